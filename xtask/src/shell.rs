//! Process helpers for xtask: where the workspace is, how to call cargo, and how to run a command
//! with a readable error when it fails.
//!
//! Cargo is always called through the `CARGO` environment variable that cargo sets for
//! `cargo xtask` (and for tests), so the same toolchain runs the nested commands.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use anyhow::{Context, bail};

/// The workspace root: the parent of this crate's manifest directory.
pub fn project_root() -> PathBuf {
    let manifest_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest_dir
        .parent()
        .map_or_else(|| manifest_dir.to_path_buf(), Path::to_path_buf)
}

/// A `cargo` command for the toolchain that runs xtask, working in `dir`.
pub fn cargo(dir: &Path) -> Command {
    let program = std::env::var_os("CARGO").unwrap_or_else(|| OsString::from("cargo"));
    let mut cmd = Command::new(program);
    cmd.current_dir(dir);
    cmd
}

/// The command as a shell-like line, with `cargo` for the cargo binary, for messages.
pub fn display(cmd: &Command) -> String {
    let program = cmd.get_program().to_string_lossy();
    let program = if Path::new(program.as_ref()).file_stem() == Some("cargo".as_ref()) {
        "cargo".to_owned()
    } else {
        program.into_owned()
    };
    let mut line = program;
    for arg in cmd.get_args() {
        line.push(' ');
        line.push_str(&arg.to_string_lossy());
    }
    line
}

/// Runs `cmd` with inherited stdio and fails unless it exits successfully.
pub fn run(cmd: &mut Command) -> anyhow::Result<()> {
    let line = display(cmd);
    let status = cmd
        .status()
        .with_context(|| format!("could not start `{line}`"))?;
    if !status.success() {
        bail!("`{line}` failed ({status})");
    }
    Ok(())
}

/// Runs `cmd` with captured output; the caller judges the exit status.
pub fn output(cmd: &mut Command) -> anyhow::Result<Output> {
    let line = display(cmd);
    cmd.output()
        .with_context(|| format!("could not start `{line}`"))
}

/// A path relative to `root`, with `/` separators, for messages.
pub fn relative(root: &Path, path: &Path) -> String {
    let Ok(rel) = path.strip_prefix(root) else {
        // Outside the workspace (a CARGO_TARGET_DIR elsewhere): the path as it is.
        return path.display().to_string();
    };
    rel.components()
        .map(|part| part.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
}
