//! Test fixtures for Corral: the path of the fake agent program, helpers to check that no process
//! of a supervised tree is left behind, the fake model API and the pinned real AI coding CLIs.
//!
//! The fake agent (`corral-fake-agent`, see `src/bin/fake_agent.rs`) records the pid of every process
//! it creates in a pid file; [`read_pids`], [`wait_all_dead`] and [`kill_survivors`] turn that file
//! into an assertion and a cleanup. [`fake_protocol`] holds the types of its stdout lines.
//!
//! [`fake_api`] is a scripted model API on 127.0.0.1 that the real CLIs can be pointed at;
//! [`require_cli`] finds (installing with npm if needed) the real CLIs pinned in [`PINNED_CLIS`].
//!
//! The provider crates' tests share [`recorded`] (a CLI's recorded samples, repaired and read
//! through its parser), [`session`] (the session they build command lines from) and [`probe`]
//! (the model-probe scaffolding). They speak the ports' types only: this crate may depend on
//! `corral-ports`, never on `corral-engine`, whose tests use it.
//!
//! [`ray_cluster`] starts a real two-node Ray cluster on 127.0.0.1 (from the pinned Ray in
//! `.cache/venv`) for the `ray` executor's tests, and stops exactly its processes on drop.
//!
//! [`fake_forge`] is a loopback GitHub REST API the real `gh` is pointed at (`gh_env`), for the
//! sprint's pull request and `--from-issues`; it records what it was asked.
//!
//! [`raw_reader`] is the raw tokio baseline the `corral-cli` benches measure `corral run` against.
//!
//! [`unprivileged_user`] gives the sandbox tests a user to run `corral` as when they run as root
//! (creating [`PROBE_USER`] once), and says why bubblewrap cannot run as it when it cannot.

// test-support is a tool, not product: it may create processes.
#![allow(clippy::disallowed_methods)]

mod clis;
pub mod fake_api;
pub mod fake_forge;
pub mod fake_protocol;
pub mod host_commands;
mod host_user;
pub mod pinned_clis;
pub mod probe;
mod pty;
pub mod raw_reader;
pub mod ray_cluster;
pub mod recorded;
pub mod session;

pub use clis::{install_cli, installed_cli, non_temp_dir, require_cli, workspace_root};
pub use fake_forge::{FAKE_GH_HOST, FakeForge, FakeIssue, FakePullRequest, ForgeRequest};
pub use host_commands::HostCommandRunner;
pub use host_user::{HostUser, PROBE_USER, is_root, unprivileged_user};
/// The signals [`send_signal`] sends, for crates that may not depend on `nix` themselves.
pub use nix::sys::signal::Signal;
pub use pinned_clis::PINNED_CLIS;
pub use pty::{Screen, Terminal, make_fifo, run_on_pty, run_on_pty_sized, strip_screen};

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use nix::sys::signal::kill;
use nix::unistd::Pid;

/// The file name of the fake agent binary.
const FAKE_AGENT_BIN: &str = "corral-fake-agent";

/// How often the polling helpers look again.
const POLL: Duration = Duration::from_millis(10);

/// The path of the built `corral-fake-agent` binary, building it first if it is missing.
///
/// Looks next to the running test executable (`target/<profile>/deps/<test>-<hash>` → the binary is
/// `target/<profile>/corral-fake-agent`). Cargo does not build a dependency's binaries for another
/// crate's tests, so when it is missing this runs `$CARGO build -p corral-test-support --bin
/// corral-fake-agent` once per process with the same profile and target directory.
///
/// # Panics
/// When the binary can't be found or built (this is test code; the message says why).
pub fn fake_agent_path() -> PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(locate_or_build_fake_agent).clone()
}

/// True when a source file of the fake agent is newer than the built binary: a `cargo test -p`
/// of another crate does not rebuild it, and a stale fake fails in confusing ways.
fn older_than_its_sources(bin: &Path) -> bool {
    fn newest(dir: &Path) -> Option<std::time::SystemTime> {
        std::fs::read_dir(dir)
            .ok()?
            .flatten()
            .filter_map(|e| {
                let path = e.path();
                if path.is_dir() {
                    newest(&path)
                } else {
                    e.metadata().ok()?.modified().ok()
                }
            })
            .max()
    }
    let sources = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("src")
        .join("bin");
    let built = std::fs::metadata(bin).and_then(|m| m.modified()).ok();
    matches!((newest(&sources), built), (Some(src), Some(built)) if src > built)
}

#[allow(
    clippy::panic,
    reason = "test fixture: a missing fake agent must stop the test loudly"
)]
fn locate_or_build_fake_agent() -> PathBuf {
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(err) => panic!("corral-test-support: can't find the current executable: {err}"),
    };
    let Some(mut profile_dir) = exe.parent().map(Path::to_path_buf) else {
        panic!(
            "corral-test-support: {} has no parent directory",
            exe.display()
        );
    };
    if profile_dir.file_name().is_some_and(|n| n == "deps") {
        profile_dir.pop();
    }
    let bin = profile_dir.join(format!("{FAKE_AGENT_BIN}{}", std::env::consts::EXE_SUFFIX));
    if bin.is_file() && !older_than_its_sources(&bin) {
        return bin;
    }

    let (Some(profile_name), Some(target_dir)) = (
        profile_dir.file_name().and_then(|n| n.to_str()),
        profile_dir.parent(),
    ) else {
        panic!(
            "corral-test-support: can't derive the profile and target dir from {}",
            profile_dir.display()
        );
    };
    let profile = match profile_name {
        "debug" => "dev",
        other => other,
    };
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = std::process::Command::new(&cargo)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args([
            "build",
            "--quiet",
            "-p",
            "corral-test-support",
            "--bin",
            FAKE_AGENT_BIN,
        ])
        .arg("--profile")
        .arg(profile)
        .arg("--target-dir")
        .arg(target_dir)
        .status();
    match status {
        Ok(status) if status.success() => {}
        Ok(status) => panic!("corral-test-support: building {FAKE_AGENT_BIN} failed: {status}"),
        Err(err) => panic!(
            "corral-test-support: can't run {} to build {FAKE_AGENT_BIN}: {err}",
            cargo.to_string_lossy()
        ),
    }
    if !bin.is_file() {
        panic!(
            "corral-test-support: built {FAKE_AGENT_BIN} but {} does not exist",
            bin.display()
        );
    }
    bin
}

/// The pids recorded in a pid file, one per line, in order. A missing file gives an empty list;
/// lines that aren't a pid are skipped.
pub fn read_pids(path: &Path) -> Vec<u32> {
    std::fs::read_to_string(path)
        .map(|text| {
            text.lines()
                .filter_map(|line| line.trim().parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// Whether `pid` is a live process: it exists and is neither a zombie (`Z`) nor dead (`X`).
pub fn is_alive(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // `pid (comm) state ...`: comm may contain anything, so the state follows the LAST ')'.
    let state = stat
        .rfind(')')
        .and_then(|i| stat[i + 1..].split_whitespace().next());
    !matches!(state, None | Some("Z" | "X" | "x"))
}

/// Whether any live process (zombies do not count) has process group `pgid`, read from `/proc`.
pub fn group_alive(pgid: u32) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return false;
    };
    entries.flatten().any(|entry| {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            return false;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            return false;
        };
        // `pid (comm) state ppid pgrp ...`, counted from the LAST ')'.
        let mut fields = stat
            .rfind(')')
            .map(|i| stat[i + 1..].split_whitespace())
            .into_iter()
            .flatten();
        let state = fields.next();
        let pgrp = fields.nth(1).and_then(|g| g.parse::<u32>().ok());
        pgrp == Some(pgid) && !matches!(state, None | Some("Z" | "X" | "x"))
    })
}

/// A version-4 UUID no one has seen, from the clock, the pid and a counter (unique, not secret).
pub fn fresh_uuid() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let mixed = nanos
        ^ (u128::from(std::process::id()) << 64)
        ^ (u128::from(COUNTER.fetch_add(1, Ordering::Relaxed)) << 96);
    let mut bytes = mixed.to_be_bytes();
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

/// Polls every 10 ms until none of `pids` is alive or `timeout` passed; returns the survivors
/// (empty means every process is gone).
pub fn wait_all_dead(pids: &[u32], timeout: Duration) -> Vec<u32> {
    let deadline = Instant::now() + timeout;
    loop {
        let survivors: Vec<u32> = pids.iter().copied().filter(|&p| is_alive(p)).collect();
        if survivors.is_empty() || Instant::now() >= deadline {
            return survivors;
        }
        std::thread::sleep(POLL);
    }
}

/// Sends SIGKILL to each of `pids` that is still alive (test cleanup). Ignores pids that can't name
/// a single other process (0, values beyond `i32::MAX`, the caller itself) and errors.
pub fn kill_survivors(pids: &[u32]) {
    let me = std::process::id();
    for &pid in pids {
        let Ok(raw) = i32::try_from(pid) else {
            continue;
        };
        if raw > 0 && pid != me && is_alive(pid) {
            let _ = kill(Pid::from_raw(raw), Signal::SIGKILL);
        }
    }
}

/// Polls every 10 ms until the file at `path` holds at least `n` complete lines; false on timeout.
pub fn wait_for_lines(path: &Path, n: usize, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if count_lines(path) >= n {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(POLL);
    }
}

/// The number of complete (newline-terminated) lines in a file; 0 when it is missing.
fn count_lines(path: &Path) -> usize {
    std::fs::read(path)
        .map(|bytes| bytes.iter().filter(|&&b| b == b'\n').count())
        .unwrap_or(0)
}

/// Sends SIGINT to `pid`, as Ctrl-C in a terminal would.
pub fn interrupt(pid: u32) {
    send_signal(pid, Signal::SIGINT);
}

/// Sends `signal` to `pid` (a test standing in for the user, the system or a service manager).
pub fn send_signal(pid: u32, signal: Signal) {
    if let Ok(raw) = i32::try_from(pid) {
        let _ = kill(Pid::from_raw(raw), signal);
    }
}

/// Creates a FIFO at `path`, as a hostile agent would in place of a file Corral reads.
///
/// # Panics
/// When it cannot be created (this is test code).
#[allow(
    clippy::panic,
    reason = "test fixture: a FIFO that cannot be made must stop the test loudly"
)]
pub fn mkfifo(path: &Path) {
    nix::unistd::mkfifo(path, nix::sys::stat::Mode::from_bits_truncate(0o600))
        .unwrap_or_else(|e| panic!("mkfifo {}: {e}", path.display()));
}

/// A `std::process::Command` for `program`, for tests of other crates that must drive a process
/// by hand (signals, pseudo-terminals), where only test-support may create processes.
pub fn command(program: &std::path::Path) -> std::process::Command {
    std::process::Command::new(program)
}

/// `git` in `dir` with `options` before `args` (`-c` settings a test's repository needs): its
/// stdout. A git that fails stops the test, naming the arguments and git's stderr.
#[expect(
    clippy::panic,
    reason = "test fixture: a git set-up step that fails must stop the test loudly"
)]
pub fn git_ok(dir: &Path, options: &[&str], args: &[&str]) -> String {
    let out = command(Path::new("git"))
        .current_dir(dir)
        .args(options)
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("git {args:?} in {}: {e}", dir.display()));
    if !out.status.success() {
        panic!(
            "git {args:?} in {}: {}",
            dir.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    String::from_utf8_lossy(&out.stdout).into_owned()
}
