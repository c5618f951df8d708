//! The container backend: the program runs in a podman container whose image is the host's own
//! root filesystem (`--rootfs /:O`, an overlay: a write outside the bound paths lands in the
//! overlay and goes with the container), so no image is pulled and the CLIs and toolchains the
//! user has are the ones the agent gets. The work tree, the run directory, the extra roots and
//! the CLI's state are bound at their own paths as bubblewrap binds them, what must stay
//! read-only inside them is bound read-only, the user's other secrets are hidden, and
//! `[limits]` become podman's own (`--memory`, `--pids-limit`, `--cpus`, `--ulimit fsize`),
//! enforced by the container's cgroup.
//!
//! Two traps, both found on Debian's podman 4.3: every option must come before `--rootfs /:O`
//! (the root filesystem is the first positional argument, and what follows it is the command),
//! and podman's default rlimits (`nofile` 1048576, a high `nproc`) make runc fail as root
//! without `CAP_SYS_RESOURCE` ("error setting rlimit type 7"): `--ulimit nofile=1024:1024
//! --ulimit nproc=4096:4096` are always given. Debian's podman pulls `crun`, which fails on a
//! hybrid cgroup host ("cgroups in hybrid mode not supported"): the runtime is `runc`.
//!
//! With the network confined to the allow-list the container gets `--network none` and Corral's
//! proxy inside its network namespace, as bubblewrap's sandbox does (`egress`): its program is
//! held on a pipe given in as descriptor 3 until the proxy listens.
//!
//! Then, as under bubblewrap, the first program is the probe that checks the sandbox from
//! inside (`inside`), its report and go pipes given in as the next two descriptors: it reads
//! the mount table too, since a rootful container shares the supervisor's user namespace and
//! what confines its writes is its overlay root (see `inside::confirm`). podman is started by
//! a shell that puts each pipe at its number ([`starter`]).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use corral_process::{LimitGroup, ResourceLimits};

use crate::egress::NetworkPolicy;
use crate::podman::{PODMAN_TIMEOUT, RUNTIME, podman};
use crate::policy::{HomePolicy, SandboxConfig};

/// A fresh container name for one spawn.
pub(crate) fn container_name() -> String {
    format!("corral-{}-{:016x}", std::process::id(), fastrand::u64(..))
}

/// How each limit of `limits` would be enforced for a spawn under `backend` here (what
/// `corral doctor` shows): [`crate::limits_readiness`]'s trial cgroup for the backends Corral confines
/// itself, what podman enforces here for the container.
pub fn backend_limits_readiness(
    backend: crate::policy::BackendChoice,
    limits: corral_process::ResourceLimits,
) -> Vec<corral_ports::LimitEnforced> {
    match backend {
        crate::policy::BackendChoice::Container => container_limits(limits),
        crate::policy::BackendChoice::Auto
        | crate::policy::BackendChoice::Native
        | crate::policy::BackendChoice::Bubblewrap => crate::policy::limits_readiness(limits),
    }
}

/// Whether the kernel killed the container's process out of memory (`None`: podman could
/// not tell).
pub(crate) fn oom_killed(name: &str) -> Option<bool> {
    podman(&["inspect", "--format", "{{.State.OOMKilled}}", name])
        .ok()
        .map(|text| text.trim() == "true")
}

/// The container's cgroup (the same path in every hierarchy), once it runs.
pub(crate) fn cgroup_path(name: &str) -> Option<PathBuf> {
    let text = podman(&[
        "inspect",
        "--format",
        "{{.State.Running}} {{.State.CgroupPath}}",
        name,
    ])
    .ok()?;
    let (running, path) = text.trim().split_once(' ')?;
    (running == "true" && !path.is_empty()).then(|| PathBuf::from(path))
}

/// Watches the running container `name` against `limits` through its own cgroup, and the
/// bound directories in `measured` against the disk limit, as a limit group watches a
/// spawn's: the first breach, once the container ran (`None` when it never
/// ran or podman could not say where its cgroup is).
pub(crate) async fn watch(
    name: String,
    limits: ResourceLimits,
    measured: Vec<PathBuf>,
    period: Duration,
) -> Option<(corral_process::Breach, LimitGroup)> {
    if !cgroup_limits_enforced() {
        // No cgroup of the container's to read: the measured directories alone.
        let group = LimitGroup::measure_only(limits.disk?, measured);
        let breach = group.watch(period).await;
        return Some((breach, group));
    }
    let started = std::time::Instant::now();
    let path = loop {
        let asked = name.clone();
        match tokio::task::spawn_blocking(move || cgroup_path(&asked)).await {
            Ok(Some(path)) => break path,
            Ok(None) if started.elapsed() < PODMAN_TIMEOUT => tokio::time::sleep(period).await,
            Ok(None) | Err(_) => return None,
        }
    };
    // The bound directories the disk limit measures are the host's own: measured here.
    let group = LimitGroup::adopt(limits, &path).measuring(measured);
    let breach = group.watch(period).await;
    Some((breach, group))
}

/// Kills the container's processes (it stays, for `remove`).
pub(crate) fn kill(name: &str) {
    let _ = podman(&["kill", "--signal", "KILL", name]);
}

/// Removes the container, whatever its state (killed with its client, or never started).
pub(crate) fn remove(name: &str) {
    if let Err(why) = podman(&["rm", "--force", "--ignore", "--time", "0", name]) {
        tracing::warn!(container = name, why = %why, "a container could not be removed");
    }
}

/// One line to run in a container, in plain values.
pub(crate) struct ContainerLine<'a> {
    pub config: &'a SandboxConfig,
    pub name: &'a str,
    pub cwd: &'a Path,
    /// Whether the working directory is writable.
    pub cwd_writable: bool,
    /// Bound writable at their own paths (the run directory, extra roots, the CLI's state).
    pub writable: Vec<&'a Path>,
    /// The run directory (among `writable`), whose record around it is read-only.
    pub output_dir: &'a Path,
    /// Bound read-only at their own paths, inside what is writable.
    pub protected: &'a [PathBuf],
    /// The home the program sees, hidden under `HomePolicy::Isolated`.
    pub home: Option<&'a Path>,
    /// The CLI's state paths, kept visible in a hidden home.
    pub state: &'a [PathBuf],
    /// The names of the child's environment variables: podman passes each from its own
    /// environment (`-e NAME`), so no value reaches its argv.
    pub env_names: Vec<&'a str>,
    /// With egress confined to the allow-list: the program is held until the gate releases
    /// it (`--preserve-fds 1`, [`crate::egress::CONTAINER_HOLD`]).
    pub hold: bool,
    /// The probe's argv, to run first (after the hold), its two pipes given in after the
    /// gate's.
    pub probe: Vec<OsString>,
    /// The program, resolved on the child's `PATH`.
    pub program: &'a Path,
    /// Its arguments.
    pub args: &'a [OsString],
}

/// A bind's `-v` value; a path podman cannot take in one (a `:` in it) is an error.
fn volume(source: &Path, target: &Path, read_only: bool) -> std::io::Result<OsString> {
    for path in [source, target] {
        if path.as_os_str().as_encoded_bytes().contains(&b':') {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!(
                    "{}: podman cannot bind a path with a ':' in it",
                    path.display()
                ),
            ));
        }
    }
    let mut value = OsString::from(source.as_os_str());
    value.push(":");
    value.push(target.as_os_str());
    if read_only {
        value.push(":ro");
    }
    Ok(value)
}

/// podman's arguments for `line`: every option, then `--rootfs /:O`, then the program.
pub(crate) fn podman_args(line: &ContainerLine<'_>) -> std::io::Result<Vec<OsString>> {
    // No `--rm`: the guard asks whether the kernel killed it out of memory once it ended, then
    // removes it (`remove`), killed or not.
    let mut args: Vec<OsString> = [
        "run",
        "--name",
        line.name,
        "--runtime",
        RUNTIME,
        "--cap-drop",
        "all",
        "--security-opt",
        "no-new-privileges",
        "--ulimit",
        "nofile=1024:1024",
        "--ulimit",
        "nproc=4096:4096",
        "--network",
        match line.config.network {
            NetworkPolicy::Host => "host",
            NetworkPolicy::None | NetworkPolicy::Allowlist => "none",
        },
        "--log-driver",
        "none",
        // The program's standard input is passed in (a CLI's prompt is on it): without it
        // podman gives the container `/dev/null`.
        "--interactive",
    ]
    .iter()
    .map(OsString::from)
    .collect();
    args.extend(limit_args(line.config.limits, cgroup_limits_enforced()));
    for name in &line.env_names {
        args.extend(["-e".into(), OsString::from(name)]);
    }
    if let (HomePolicy::Isolated, Some(home)) = (line.config.home, line.home) {
        args.extend(["--tmpfs".into(), empty_tmpfs(home)?]);
    }
    args.extend(["-v".into(), volume(line.cwd, line.cwd, !line.cwd_writable)?]);
    let state: Vec<&Path> = line.state.iter().map(PathBuf::as_path).collect();
    for path in line.writable.iter().chain(&state) {
        if path.exists() {
            args.extend(["-v".into(), volume(path, path, false)?]);
        }
    }
    // Corral's record around the run directory, read-only as under bubblewrap (the work tree's
    // `.corral/`), the writable paths in it bound again (podman mounts the deeper after).
    let mut writable: Vec<&Path> = line.writable.clone();
    if line.cwd_writable {
        writable.push(line.cwd);
    }
    for top in crate::policy::record_roots(&writable, line.output_dir) {
        args.extend(["-v".into(), volume(&top, &top, true)?]);
    }
    for path in line.protected {
        if path.exists() {
            args.extend(["-v".into(), volume(path, path, true)?]);
        }
    }
    if let Some(home) = line.home {
        args.extend(hide_args(&crate::policy::hide_home_secrets(
            home, line.state,
        ))?);
    }
    args.extend(hide_args(&crate::policy::hide_paths(
        &line.config.hide,
        line.state,
    ))?);
    args.extend(["-w".into(), line.cwd.as_os_str().to_owned()]);
    let preserved = usize::from(line.hold)
        + if line.probe.is_empty() {
            0
        } else {
            crate::inside::CONTAINER_PROBE_FDS
        };
    if preserved > 0 {
        args.extend(["--preserve-fds".into(), preserved.to_string().into()]);
    }
    args.extend(["--rootfs".into(), "/:O".into()]);
    if line.hold {
        args.extend([
            "/bin/sh".into(),
            "-c".into(),
            crate::egress::CONTAINER_HOLD.into(),
            "corral-hold".into(),
        ]);
    }
    args.extend(line.probe.iter().cloned());
    args.push(line.program.as_os_str().to_owned());
    args.extend(line.args.iter().cloned());
    Ok(args)
}

/// The first descriptor podman gives into the container (`--preserve-fds`).
pub(crate) const FIRST_FD: std::os::fd::RawFd = 3;

/// The program and arguments that start `podman` with `fds` (ours; each with whether it is
/// written) at descriptors 3, 4, … in order, which `--preserve-fds` passes into the container.
/// A shell opens each again through `/proc/self/fd` (dash takes no two-digit descriptor in a
/// redirection), the one step before podman replaces it. One of ours already at a number an
/// earlier one takes would be lost: refused (never seen: the pipes are made long after the
/// first descriptors).
pub(crate) fn starter(
    podman: &Path,
    fds: &[(std::os::fd::RawFd, bool)],
    podman_args: Vec<OsString>,
) -> std::io::Result<(PathBuf, Vec<OsString>)> {
    let mut script = String::from("exec");
    for (i, &(fd, write)) in fds.iter().enumerate() {
        let target = FIRST_FD + i32::try_from(i).unwrap_or(i32::MAX);
        if (FIRST_FD..target).contains(&fd) {
            return Err(std::io::Error::other(format!(
                "descriptor {fd} would be replaced before podman inherits it"
            )));
        }
        let arrow = if write { '>' } else { '<' };
        script.push_str(&format!(" {target}{arrow}/proc/self/fd/\"${}\"", i + 1));
    }
    script.push_str(&format!(" && shift {} && exec \"$@\"", fds.len()));
    let mut args: Vec<OsString> = vec!["-c".into(), script.into(), "corral-start".into()];
    args.extend(fds.iter().map(|(fd, _)| OsString::from(fd.to_string())));
    args.push(podman.as_os_str().to_owned());
    args.extend(podman_args);
    Ok((PathBuf::from("/bin/sh"), args))
}

/// A `--tmpfs` value that mounts an empty tmpfs at `path`: podman's default (`tmpcopyup`)
/// copies what the image has there into it, and the image here is the host's root, so a
/// hidden `~/.ssh` would be copied in whole.
fn empty_tmpfs(path: &Path) -> std::io::Result<OsString> {
    // The same refusal of a `:` in the path as a bind's.
    volume(path, path, false)?;
    let mut value = OsString::from(path.as_os_str());
    value.push(":notmpcopyup");
    Ok(value)
}

/// bubblewrap's hiding arguments (`--tmpfs P`, `--ro-bind SRC DST`) as podman's.
fn hide_args(bwrap: &[OsString]) -> std::io::Result<Vec<OsString>> {
    let mut out = Vec::new();
    let mut rest = bwrap.iter();
    while let Some(option) = rest.next() {
        match option.to_str() {
            Some("--tmpfs") => {
                if let Some(path) = rest.next() {
                    out.extend(["--tmpfs".into(), empty_tmpfs(Path::new(path))?]);
                }
            }
            Some("--ro-bind" | "--ro-bind-try") => {
                if let (Some(source), Some(target)) = (rest.next(), rest.next()) {
                    out.extend([
                        "-v".into(),
                        volume(Path::new(source), Path::new(target), true)?,
                    ]);
                }
            }
            _ => {}
        }
    }
    Ok(out)
}

/// Whether podman enforces its cgroup limits here: as root, or as a user on a unified (v2)
/// cgroup host. Rootless podman on a v1 or hybrid host ignores `--memory`, `--pids-limit` and
/// `--cpus` ("Resource limits are not supported and ignored on cgroups V1 rootless systems").
pub(crate) fn cgroup_limits_enforced() -> bool {
    nix::unistd::geteuid().is_root() || Path::new("/sys/fs/cgroup/cgroup.controllers").exists()
}

/// Why rootless podman's cgroup limits do not hold here.
const ROOTLESS_V1: &str = "rootless podman ignores cgroup limits on a cgroup v1 (or hybrid) host";

/// `[limits]` as podman's options: enforced by the container's own cgroup where podman can
/// (`cgroups`); else only each file's size (an rlimit). Not `--ulimit data` for memory: runc's
/// own start inside the container runs under it, and fails at a small cap ("unable to init
/// seccomp: … cannot allocate memory" at 64 MiB).
fn limit_args(limits: ResourceLimits, cgroups: bool) -> Vec<OsString> {
    let mut args: Vec<OsString> = Vec::new();
    if let (Some(bytes), true) = (limits.memory, cgroups) {
        // No swap to spill into: the cap is the cap.
        args.extend([
            "--memory".into(),
            bytes.to_string().into(),
            "--memory-swap".into(),
            bytes.to_string().into(),
        ]);
    }
    if let (Some(count), true) = (limits.pids, cgroups) {
        args.extend(["--pids-limit".into(), count.to_string().into()]);
    }
    if let (Some(millis), true) = (limits.cpu_millis, cgroups) {
        args.extend([
            "--cpus".into(),
            format!("{}.{:03}", millis / 1000, millis % 1000).into(),
        ]);
    }
    if let Some(bytes) = limits.disk {
        args.extend(["--ulimit".into(), format!("fsize={bytes}:{bytes}").into()]);
    }
    args
}

/// How each limit is enforced in a container here, for the attestation and `corral doctor`.
pub fn container_limits(limits: ResourceLimits) -> Vec<corral_ports::LimitEnforced> {
    let cgroups = cgroup_limits_enforced();
    // The caps as the process crate writes them, the means podman's.
    LimitGroup::describe(limits)
        .into_iter()
        .map(|(limit, cap)| {
            let (how, why_not) = match (limit, cgroups) {
                (corral_process::Limit::Memory, true) => {
                    (Some("podman --memory (the container's cgroup)"), None)
                }
                (corral_process::Limit::Pids, true) => {
                    (Some("podman --pids-limit (the container's cgroup)"), None)
                }
                (corral_process::Limit::Cpus, true) => {
                    (Some("podman --cpus (the container's cgroup)"), None)
                }
                (
                    corral_process::Limit::Memory
                    | corral_process::Limit::Pids
                    | corral_process::Limit::Cpus,
                    false,
                ) => (
                    None,
                    Some(format!(
                        "{ROOTLESS_V1}, and no rlimit bounds one container's"
                    )),
                ),
                (corral_process::Limit::Disk, _) => {
                    (Some("podman --ulimit fsize (each file)"), None)
                }
            };
            corral_ports::LimitEnforced {
                limit: limit.as_str().to_string(),
                cap,
                how: how.map(str::to_string),
                why_not,
            }
        })
        .collect()
}
