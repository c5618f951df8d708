//! The real AI coding CLIs for tests: where the pinned ones are installed, and installing them on demand
//! so that `cargo test` alone works on a fresh machine that has npm.
//!
//! The table and the npm recipe live in [`crate::pinned_clis`], shared with `cargo xtask install-clis`.
//! Installs from parallel tests (threads or nextest processes) are serialized with an exclusive
//! `flock` on `<root>/.cache/clis/.install.lock`.

use std::fs::OpenOptions;
use std::io;
use std::path::{Path, PathBuf};

use nix::fcntl::{Flock, FlockArg};

use crate::pinned_clis::{bin_path, clis_dir, is_current, npm_install, pinned};

/// The workspace root: two levels above this crate's manifest directory (`crates/test-support`).
pub fn workspace_root() -> PathBuf {
    let manifest_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest_dir
        .parent()
        .and_then(Path::parent)
        .map_or_else(|| manifest_dir.to_path_buf(), Path::to_path_buf)
}

/// A folder for state a CLI refuses to keep in the temporary directory (Codex will not create
/// its sandbox helpers under `/tmp`): `<workspace>/target`, unless the checkout itself lies under
/// the temporary directory (CI may clone there), then `$HOME/.cache/corral-tests`.
pub fn non_temp_dir() -> PathBuf {
    let target = workspace_root().join("target");
    let tmp = std::env::temp_dir();
    let under_tmp = target.starts_with(&tmp) || target.starts_with("/tmp");
    let dir = match (under_tmp, std::env::var_os("HOME")) {
        (true, Some(home)) => PathBuf::from(home).join(".cache").join("corral-tests"),
        (true, None) | (false, _) => target,
    };
    let _ = std::fs::create_dir_all(&dir);
    dir
}

/// The installed binary `name` under `<workspace root>/.cache/clis/node_modules/.bin/`.
///
/// For a pinned CLI (see [`crate::PINNED_CLIS`]) only when the pinned version is installed; any other
/// name only needs the binary to exist.
pub fn installed_cli(name: &str) -> Option<PathBuf> {
    let root = workspace_root();
    let path = bin_path(&root, name);
    let usable = match pinned(name) {
        Some(_) => is_current(&root, name),
        None => path.is_file(),
    };
    usable.then_some(path)
}

/// Installs the pinned CLI `name` with npm unless it is already installed, and returns its binary.
///
/// # Errors
/// When `name` is not pinned, when npm can't be started or fails (the error carries npm's output), or
/// when the binary is still missing afterwards.
pub fn install_cli(name: &str) -> io::Result<PathBuf> {
    if let Some(path) = installed_cli(name) {
        return Ok(path);
    }
    let Some((package, version)) = pinned(name) else {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("`{name}` is not one of the pinned CLIs in corral_test_support::PINNED_CLIS"),
        ));
    };
    let root = workspace_root();
    let dir = clis_dir(&root);
    std::fs::create_dir_all(&dir)?;
    let lock_file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.join(".install.lock"))?;
    let _lock = Flock::lock(lock_file, FlockArg::LockExclusive)
        .map_err(|(_, errno)| io::Error::from(errno))?;
    // Another test may have installed it while this one waited for the lock.
    if let Some(path) = installed_cli(name) {
        return Ok(path);
    }
    let mut cmd = npm_install(&root, package, version);
    let output = cmd.output().map_err(|err| {
        io::Error::new(
            err.kind(),
            format!("could not run npm to install {package}@{version} (is Node.js with npm on PATH?): {err}"),
        )
    })?;
    if !output.status.success() {
        return Err(io::Error::other(format!(
            "`npm install {package}@{version}` into {} failed ({}):\n{}\n{}",
            dir.display(),
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )));
    }
    installed_cli(name).ok_or_else(|| {
        io::Error::other(format!(
            "npm installed {package}@{version} but {} is missing or has another version",
            bin_path(&root, name).display()
        ))
    })
}

/// The binary of the pinned CLI `name`, installing it with npm first when it is missing; the
/// binary `CORRAL_TEST_CLI_<NAME>` names instead, when set (another version to test against).
///
/// # Panics
/// When it can't be installed; the message says why (test fixture: the test must stop loudly).
#[allow(
    clippy::panic,
    reason = "test fixture: a CLI that can't be installed must stop the test loudly"
)]
pub fn require_cli(name: &str) -> PathBuf {
    // Another build of the same CLI, to run the suites against (the newest of its tested range,
    // say): `CORRAL_TEST_CLI_CLAUDE=/path/to/claude`.
    if let Some(path) = std::env::var_os(format!("CORRAL_TEST_CLI_{}", name.to_uppercase())) {
        return PathBuf::from(path);
    }
    match install_cli(name) {
        Ok(path) => path,
        Err(err) => panic!(
            "corral-test-support: the real `{name}` CLI is needed by this test and could not be \
             installed (try `cargo xtask install-clis {name}`): {err}"
        ),
    }
}
