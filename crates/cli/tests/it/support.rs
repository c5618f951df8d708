//! Running `corral` in a scratch home and project, and normalizing its output for snapshots.

use std::path::{Path, PathBuf};

use assert_cmd::Command;

/// A scratch HOME and project directory.
pub struct Env {
    pub dir: tempfile::TempDir,
}

impl Env {
    pub fn new() -> Self {
        let env = Env {
            dir: tempfile::tempdir().unwrap(),
        };
        std::fs::create_dir_all(env.home()).unwrap();
        std::fs::create_dir_all(env.project()).unwrap();
        env
    }

    pub fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }

    pub fn project(&self) -> PathBuf {
        self.dir.path().join("project")
    }

    /// `corral` with a clean environment: PATH, HOME, and nothing else.
    pub fn corral(&self) -> Command {
        let mut cmd = Command::cargo_bin("corral").unwrap();
        cmd.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.home())
            .current_dir(self.project());
        cmd
    }

    pub fn write(&self, rel: &str, text: &str) -> PathBuf {
        let path = self.dir.path().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        path
    }

    /// Output with the scratch path replaced, for stable snapshots.
    pub fn clean(&self, text: &[u8]) -> String {
        String::from_utf8_lossy(text).replace(&self.dir.path().display().to_string(), "<tmp>")
    }
}

/// stdout, stderr and the exit code as one text, jj-style.
pub fn transcript(env: &Env, output: &std::process::Output) -> String {
    format!(
        "{}[stderr]\n{}[exit status: {}]",
        env.clean(&output.stdout),
        env.clean(&output.stderr),
        output
            .status
            .code()
            .map_or("signal".to_string(), |c| c.to_string())
    )
}

pub fn exists(path: &Path) -> bool {
    path.exists()
}
