//! The process trees of `corral-fake-agent`: recording pids, re-executing itself in an internal
//! mode, and waiting until a tree is complete before the fake says `tree-ready`.
//!
//! Children are created by re-executing the fake's own binary (no raw fork), so every process runs
//! the normal `main`, which records its pid in the pid file before doing anything else.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use corral_test_support::read_pids;

use crate::cli::{Mode, PID_FILE_ENV};

/// How long to wait for a tree to be recorded before giving up.
const TREE_TIMEOUT: Duration = Duration::from_secs(10);

/// How often to look again while waiting.
const POLL: Duration = Duration::from_millis(10);

/// Appends `<pid>\n` to `path` in one O_APPEND write.
pub fn record_pid(path: &Path) -> std::io::Result<()> {
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    file.write_all(format!("{}\n", std::process::id()).as_bytes())
}

/// The pid file a tree mode records into: the caller's, or a private one in the temp dir when the
/// caller gave none (the fake still needs it to know when its tree is complete).
#[derive(Debug)]
pub struct TreePidFile {
    pub path: PathBuf,
    private: bool,
}

impl TreePidFile {
    pub fn new(given: Option<&Path>) -> Self {
        match given {
            Some(path) => Self {
                path: path.to_path_buf(),
                private: false,
            },
            None => {
                let path = std::env::temp_dir()
                    .join(format!("corral-fake-agent-{}.pids", std::process::id()));
                let _ = std::fs::remove_file(&path);
                Self {
                    path,
                    private: true,
                }
            }
        }
    }

    /// The number of pids recorded so far.
    pub fn len(&self) -> usize {
        read_pids(&self.path).len()
    }

    /// Removes the file if it is private (the tree is recorded; nobody reads it again).
    pub fn done(&self) {
        if self.private {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Starts the fake's own binary in `mode`, recording into `pid_file`. The child inherits stdin,
/// stdout, stderr and the process group.
pub fn spawn_self(mode: Mode, pid_file: &Path, extra: &[String]) -> std::io::Result<Child> {
    spawn_self_with(mode, pid_file, extra, false)
}

/// [`spawn_self`], optionally with an empty environment (a descendant that scrubs its env).
pub fn spawn_self_with(
    mode: Mode,
    pid_file: &Path,
    extra: &[String],
    scrub_env: bool,
) -> std::io::Result<Child> {
    let exe = std::env::current_exe()?;
    let mut cmd = Command::new(exe);
    if scrub_env {
        cmd.env_clear();
    }
    cmd.arg(mode.name())
        .arg("--pid-file")
        .arg(pid_file)
        .args(extra)
        .env_remove(PID_FILE_ENV)
        .spawn()
}

/// Runs `sh -c script` to its end, as a CLI runs its shell tool.
pub fn shell(script: &str) -> std::io::Result<std::process::ExitStatus> {
    Command::new("sh").arg("-c").arg(script).status()
}

/// Polls `ready` every 10 ms for up to 10 s; an error naming `what` on timeout.
pub fn wait_until(what: &str, mut ready: impl FnMut() -> bool) -> std::io::Result<()> {
    let deadline = Instant::now() + TREE_TIMEOUT;
    while !ready() {
        if Instant::now() >= deadline {
            return Err(std::io::Error::other(format!(
                "gave up after {TREE_TIMEOUT:?} waiting for {what}"
            )));
        }
        std::thread::sleep(POLL);
    }
    Ok(())
}

/// Whether `pid` leads its own session (it has called setsid()), from `/proc/<pid>/stat`.
pub fn is_session_leader(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // After `pid (comm)`: state ppid pgrp session ...
    stat.rfind(')')
        .and_then(|i| stat[i + 1..].split_whitespace().nth(3))
        .and_then(|sid| sid.parse::<u32>().ok())
        == Some(pid)
}

/// Sleeps until killed.
pub fn sleep_forever() -> ! {
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}
