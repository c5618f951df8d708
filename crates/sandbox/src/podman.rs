//! podman on the host: a short podman command run to its end, and whether the container
//! backend (`container`) can run here. Apart from the backend's wrapping, so that the plan
//! (`policy`) can ask without knowing how a container is made.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use corral_process::bounded::{BoundedCommand, BoundedEnd, run_bounded_blocking};
use corral_process::spawn::{ChildOutputs, SpawnRequest, StdinMode, TokioSpawner};

/// The container engine.
pub const PODMAN: &str = "podman";

/// The OCI runtime podman is told to use.
pub const RUNTIME: &str = "runc";

/// How long one podman housekeeping command (`--version`, `inspect`, `rm`) may take.
pub(crate) const PODMAN_TIMEOUT: Duration = Duration::from_secs(30);

/// A short podman command on the host, to its end: its stdout, or why it failed.
pub(crate) fn podman(args: &[&str]) -> Result<String, String> {
    let request = SpawnRequest {
        program: PathBuf::from(PODMAN),
        args: args.iter().map(OsString::from).collect(),
        env: ["PATH", "HOME", "XDG_RUNTIME_DIR"]
            .iter()
            .filter_map(|k| std::env::var_os(k).map(|v| (OsString::from(k), v)))
            .collect(),
        cwd: PathBuf::from(corral_process::HOST_CWD),
        stdin: StdinMode::Null,
        parent_death_signal: true,
        inherit_fds: Vec::new(),
        output: ChildOutputs::Pipes,
        pre_exec: Vec::new(),
    };
    let command = BoundedCommand::limited(request, PODMAN_TIMEOUT);
    match run_bounded_blocking(&TokioSpawner, &command) {
        Ok(out) => match out.end {
            BoundedEnd::Exited(exit) if exit.success() => Ok(out.stdout.text()),
            BoundedEnd::Exited(exit) => Err(format!(
                "podman {} failed ({exit}): {}",
                args.join(" "),
                out.stderr.text().trim()
            )),
            BoundedEnd::TimedOut => Err(format!(
                "podman {} did not end within {PODMAN_TIMEOUT:?}",
                args.join(" ")
            )),
        },
        Err(e) => Err(format!("podman is not installed or not runnable: {e}")),
    }
}

/// Whether the container backend can run here, probed once per process: podman's version, or
/// why not (podman missing, its runtime `runc` missing).
pub fn container_usable() -> Result<String, String> {
    static PROBE: OnceLock<Result<String, String>> = OnceLock::new();
    PROBE
        .get_or_init(|| {
            let version = podman(&["--version"])?;
            let path = std::env::var("PATH").ok();
            if corral_process::resolve_program(
                Path::new(RUNTIME),
                path.as_deref(),
                Path::new(corral_process::HOST_CWD),
            )
            .is_none()
            {
                return Err(format!(
                    "podman's runtime {RUNTIME} is not installed (Debian: apt-get install runc; its default crun fails on a hybrid cgroup host)"
                ));
            }
            Ok(version.trim().to_string())
        })
        .clone()
}

/// Adds to a `podman run`'s environment (`env`, the program's, which podman passes on by name)
/// what rootless podman finds its storage, configuration and runtime directory by, from
/// Corral's own environment, where the program's environment lacks them: the program's `HOME`
/// may be another (a test's, an isolated one), and a `podman run` that looked elsewhere than
/// Corral's own `podman inspect` and `podman rm` would neither use the user's storage settings
/// nor be found again. Added after the names podman passes on were taken, so they do not reach
/// the program.
pub(crate) fn add_own_env(env: &mut Vec<(OsString, OsString)>) {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let own = |name: &str, below_home: &str| {
        std::env::var_os(name).or_else(|| {
            home.as_ref()
                .filter(|_| !below_home.is_empty())
                .map(|h| h.join(below_home).into_os_string())
        })
    };
    for (name, below_home) in [
        ("XDG_RUNTIME_DIR", ""),
        ("XDG_CONFIG_HOME", ".config"),
        ("XDG_DATA_HOME", ".local/share"),
    ] {
        if env.iter().any(|(k, _)| k == name) {
            continue;
        }
        if let Some(value) = own(name, below_home) {
            env.push((OsString::from(name), value));
        }
    }
}
