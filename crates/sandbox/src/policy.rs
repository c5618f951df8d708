//! Execution policy and sandbox backends: what a run may touch, which backend enforces it, and
//! the attestation of what was enforced.
//!
//! A policy asks for guarantees ([`Guarantee`]): writes confined and the process tree contained
//! always; the working directory read-only when the session may not edit files; no network and
//! a hidden home when the settings say so. The `bubblewrap` backend enforces all of them: a
//! read-only view of `/`, writable binds for exactly the working directory (when writable), the
//! run directory, the extra roots and the CLI's declared state paths, a private `TMPDIR`, a
//! fresh pid namespace (so a `setsid` grandchild dies with the run) and `--die-with-parent`. The
//! `native` backend enforces none of them: it is an isolated workspace, not a sandbox. A run
//! whose guarantees the chosen backend cannot enforce refuses to start unless the caller
//! consented (`allow_degraded_native`); degradation is never chosen silently.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use corral_ports::{Attestation, Guarantee, Permissions, SandboxBackend, Unenforced};
use corral_process::{
    BoundedCommand, BoundedEnd, BoundedError, ChildOutputs, SpawnRequest, StdinMode, TokioSpawner,
    run_bounded_blocking,
};

/// Which backend to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BackendChoice {
    /// bubblewrap where it works; otherwise native, which then needs consent.
    #[default]
    Auto,
    /// A plain child process.
    Native,
    /// bubblewrap, or refuse.
    Bubblewrap,
    /// A podman container on the host's root filesystem, or refuse.
    Container,
}

impl BackendChoice {
    /// The kebab-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            BackendChoice::Auto => "auto",
            BackendChoice::Native => "native",
            BackendChoice::Bubblewrap => "bubblewrap",
            BackendChoice::Container => "container",
        }
    }
}

/// Network access (defined with the egress rules).
pub use crate::egress::NetworkPolicy;

/// The user's home directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HomePolicy {
    /// Visible (read-only under bubblewrap, but for the CLI's state paths).
    #[default]
    Host,
    /// Hidden: only the CLI's declared state paths are visible.
    Isolated,
}

/// The sandbox part of the execution policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxConfig {
    /// Which backend.
    pub backend: BackendChoice,
    /// Run natively even though guarantees go unenforced (recorded in the attestation).
    pub allow_degraded_native: bool,
    /// Network access.
    pub network: NetworkPolicy,
    /// With [`NetworkPolicy::Allowlist`]: what the user allows on top of the provider's own
    /// endpoints. Only the user's settings, the environment and flags may fill it, never a
    /// project's file.
    pub network_allow: Vec<crate::egress::AllowRule>,
    /// Home directory visibility.
    pub home: HomePolicy,
    /// The bubblewrap program.
    pub bwrap: PathBuf,
    /// Refuse to start when the git work tree has changes outside the run directory.
    pub refuse_dirty_tree: bool,
    /// Under the native backend, watch every write of the CLI's process tree and name those
    /// outside the paths it may write (see `write_watch`): sets `no_new_privs` on the CLI and
    /// refuses it `ptrace` and `io_uring`.
    pub watch_native_writes: bool,
    /// Absolute paths hidden from the CLI on top of `HOME_SECRETS`: the user's own list
    /// (`sandbox.hide`) and the credentials of the providers that are not running, which the
    /// composition root adds (the engine knows no provider). A directory is covered by an empty
    /// tmpfs, a file by `/dev/null`; what does not exist, and the running CLI's own state
    /// paths, are left alone (see `hide_paths`).
    pub hide: Vec<PathBuf>,
    /// What each spawn (a CLI's attempt, a command) may use (`[limits]`); unlimited by
    /// default here, the settings' defaults are the composition root's.
    pub limits: corral_process::ResourceLimits,
}

impl Default for SandboxConfig {
    fn default() -> Self {
        SandboxConfig {
            backend: BackendChoice::Auto,
            allow_degraded_native: false,
            network: NetworkPolicy::default(),
            network_allow: Vec::new(),
            home: HomePolicy::Host,
            bwrap: PathBuf::from("bwrap"),
            refuse_dirty_tree: false,
            watch_native_writes: true,
            hide: Vec::new(),
            limits: corral_process::ResourceLimits::default(),
        }
    }
}

/// Where a run may write, besides the guarantees.
#[derive(Debug, Clone)]
pub struct Paths<'a> {
    /// The working directory.
    pub cwd: &'a Path,
    /// The run directory.
    pub output_dir: &'a Path,
    /// Extra roots.
    pub extra_roots: &'a [PathBuf],
    /// The CLI's own state (sessions, config, caches), declared by its adapter.
    pub state: &'a [PathBuf],
    /// What stays read-only inside the writable paths: the repositories' `.git` (see
    /// `git_paths`) and the CLI's protected configuration; made to exist by
    /// `prepare_protected`.
    pub protected: &'a [PathBuf],
    /// The home directory the CLI sees.
    pub home: Option<&'a Path>,
    /// The account's home in the password database (`account_home`), when it is not `home`:
    /// a CLI started with `HOME` elsewhere still reaches it by path, so its secrets are hidden
    /// too.
    pub account_home: Option<&'a Path>,
}

/// The decision for one run: the backend and what it enforces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxPlan {
    /// The backend that runs the CLI.
    pub backend: SandboxBackend,
    /// The attestation to record.
    pub attestation: Attestation,
    /// Files with more than one link in the writable trees, to bind read-only
    /// (`multi_link_files`); filled in when the run starts.
    pub read_only_links: Vec<PathBuf>,
}

/// Why a run may not start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The backend that would have run.
    pub backend: SandboxBackend,
    /// Why that backend, in one phrase, said once (the per-guarantee detail is in `unenforced`).
    pub reason: String,
    /// What it cannot enforce.
    pub unenforced: Vec<Unenforced>,
    /// What the user can do.
    pub hint: String,
}

/// What the container backend enforces of `requested`: all of it (the allow-list with
/// `--network none` and Corral's proxy inside the container's network namespace, as under
/// bubblewrap).
fn container_guarantees(requested: &[Guarantee]) -> (Vec<Guarantee>, Vec<Unenforced>) {
    (requested.to_vec(), Vec::new())
}

/// The guarantees a policy asks for.
pub fn requested(config: &SandboxConfig, permissions: &Permissions) -> Vec<Guarantee> {
    let mut out = vec![Guarantee::WritesConfined, Guarantee::TreeContained];
    if !permissions.edit_files {
        out.push(Guarantee::RepoReadOnly);
    }
    match config.network {
        NetworkPolicy::None => out.push(Guarantee::NoNetwork),
        NetworkPolicy::Allowlist => out.push(Guarantee::EgressConfined),
        NetworkPolicy::Host => {}
    }
    if config.home == HomePolicy::Isolated {
        out.push(Guarantee::HomeHidden);
    }
    out
}

/// The namespace and privilege options of every sandbox, up to the mounts. A fresh user
/// namespace even for root, with every capability dropped (effective, permitted, inheritable,
/// ambient and bounding): as root without them, a command the agent runs keeps every capability
/// of the host's user namespace and can remount `/` read-write. A private IPC namespace, so SysV
/// queues, semaphores and shared memory are not the host's. bubblewrap also sets
/// `no_new_privs` unconditionally, so no set-uid program inside regains what was dropped.
///
/// No nested user namespace (`--disable-userns`, bubblewrap 0.8.0 and later; an older one fails
/// [`bubblewrap_usable`] and says why): inside one the agent would hold every capability again,
/// over its own mounts, and each kernel bug reachable only with `CAP_SYS_ADMIN` in some
/// namespace would be within its reach. Codex's own sandbox, the one program that needed one,
/// is not used inside Corral's (the composition root runs Codex with `danger-full-access` under
/// bubblewrap; see docs/security.md).
///
/// Root is mapped to [`SANDBOX_ID_FOR_ROOT`] inside: the agent keeps root's files as their
/// owner and nothing else, and nothing inside looks like the host's root.
pub fn isolation_args() -> Vec<&'static str> {
    let mut args = vec![
        "--die-with-parent",
        "--unshare-pid",
        "--unshare-user",
        "--disable-userns",
        "--unshare-ipc",
        "--cap-drop",
        "ALL",
    ];
    if running_as_root() {
        args.extend(["--uid", SANDBOX_ID_FOR_ROOT, "--gid", SANDBOX_ID_FOR_ROOT]);
    }
    args
}

/// The first bubblewrap release with `--disable-userns`, which every sandbox uses.
pub const BUBBLEWRAP_MIN_VERSION: &str = "0.8.0";

/// The uid (and gid) a root caller has inside the sandbox: `nobody`, which every Debian-like
/// system lists in `/etc/passwd` (a CLI that asks for its user's name gets one).
pub const SANDBOX_ID_FOR_ROOT: &str = "65534";

/// The uid a CLI has inside the bubblewrap sandbox: 65534 (`nobody`) when Corral runs as
/// root, else the caller's own. For state a CLI keys by its uid (Codex's `/tmp/codex-daemon-<uid>`).
pub fn sandbox_uid() -> u32 {
    if running_as_root() {
        SANDBOX_ID_FOR_ROOT.parse().unwrap_or(u32::MAX)
    } else {
        nix::unistd::geteuid().as_raw()
    }
}

/// Whether the supervisor runs as root (effective uid 0).
pub fn running_as_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// What a backend choice comes to on this machine, for a diagnostic (`corral doctor`); the same
/// decision `plan` makes for a run, without the guarantees.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BackendReadiness {
    /// The native backend is chosen and the user consented to it: nothing is confined.
    NativeConsented,
    /// The native backend is chosen without the user's consent: runs are refused.
    NativeRefused,
    /// bubblewrap can build a sandbox here.
    Bubblewrap,
    /// The container backend is chosen: podman's version, or why it cannot run here.
    Container(Result<String, String>),
    /// bubblewrap cannot build a sandbox here.
    BubblewrapUnusable {
        /// Why not.
        why: String,
        /// Whether runs fall back to the native backend (`auto`, consented to) instead of
        /// being refused.
        falls_back: bool,
    },
}

/// What `choice` comes to with bubblewrap at `bwrap` (probed once per process) and the user's
/// consent to run unconfined.
pub fn backend_readiness(choice: BackendChoice, bwrap: &Path, consented: bool) -> BackendReadiness {
    match (choice, bubblewrap_usable(bwrap)) {
        (BackendChoice::Native, _) if consented => BackendReadiness::NativeConsented,
        (BackendChoice::Native, _) => BackendReadiness::NativeRefused,
        (BackendChoice::Container, _) => {
            BackendReadiness::Container(crate::podman::container_usable())
        }
        (BackendChoice::Auto | BackendChoice::Bubblewrap, Ok(())) => BackendReadiness::Bubblewrap,
        (choice @ (BackendChoice::Auto | BackendChoice::Bubblewrap), Err(why)) => {
            BackendReadiness::BubblewrapUnusable {
                why,
                falls_back: choice == BackendChoice::Auto && consented,
            }
        }
    }
}

impl SandboxConfig {
    /// Whether runs with this configuration run under bubblewrap: chosen, or `auto` where it
    /// works (probed once per process). Chosen but not usable, a run is refused anyway.
    pub fn runs_in_bubblewrap(&self) -> bool {
        match self.backend {
            BackendChoice::Native | BackendChoice::Container => false,
            BackendChoice::Bubblewrap => true,
            BackendChoice::Auto => bubblewrap_usable(&self.bwrap).is_ok(),
        }
    }
}

/// How `limits` would be enforced for a spawn here, each limit with its means or why it has
/// none: a trial limit group is made and removed at once (its cgroups included).
pub fn limits_readiness(
    limits: corral_process::ResourceLimits,
) -> Vec<corral_ports::LimitEnforced> {
    corral_process::LimitGroup::create(limits, Vec::new())
        .enforcement()
        .iter()
        .map(|e| corral_ports::LimitEnforced {
            limit: e.limit.as_str().to_string(),
            cap: e.cap.clone(),
            how: e.how.clone(),
            why_not: e.why_not.clone(),
        })
        .collect()
}

/// How long bubblewrap gets to build and leave a trial sandbox.
const BUBBLEWRAP_PROBE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Whether bubblewrap can build a sandbox here, probed once per process: `Err` says why not.
pub fn bubblewrap_usable(bwrap: &Path) -> Result<(), String> {
    type Probes = std::sync::Mutex<std::collections::HashMap<PathBuf, Result<(), String>>>;
    static PROBES: OnceLock<Probes> = OnceLock::new();
    let probes = PROBES.get_or_init(Default::default);
    if let Some(known) = probes.lock().ok().and_then(|p| p.get(bwrap).cloned()) {
        return known;
    }
    // The same namespaces and capability drop a run gets: where a user namespace cannot be
    // made (root on a kernel or container that forbids them), bubblewrap would otherwise run as
    // root with every capability, and the run must refuse instead. Bounded like every other
    // short command: its own process group, reaped, killed at the limit, and of the ambient
    // environment only `PATH`: a bare `bwrap` is looked up where a run looks it up, since with
    // no `PATH` at all the exec falls back to `/bin:/usr/bin` and would find one a run does not.
    let request = SpawnRequest {
        program: bwrap.to_path_buf(),
        args: isolation_args()
            .into_iter()
            .chain(["--ro-bind", "/", "/", "--", "true"])
            .map(OsString::from)
            .collect(),
        env: std::env::var_os("PATH")
            .map(|path| (OsString::from("PATH"), path))
            .into_iter()
            .collect(),
        cwd: PathBuf::from(corral_process::HOST_CWD),
        stdin: StdinMode::Null,
        parent_death_signal: true,
        inherit_fds: Vec::new(),
        output: ChildOutputs::Pipes,
        pre_exec: Vec::new(),
    };
    let command = BoundedCommand::limited(request, BUBBLEWRAP_PROBE_TIMEOUT);
    let verdict = match run_bounded_blocking(&TokioSpawner, &command) {
        Ok(out) => match out.end {
            BoundedEnd::Exited(exit) if exit.success() => Ok(()),
            BoundedEnd::Exited(_) => {
                let said = out.stderr.text();
                if said.contains("disable-userns") {
                    Err(format!(
                        "{} is older than bubblewrap {BUBBLEWRAP_MIN_VERSION}: it cannot refuse the agent a nested user namespace (--disable-userns), in which it would hold every capability again; it said: {}",
                        bwrap.display(),
                        said.trim()
                    ))
                } else {
                    Err(format!(
                        "{} cannot create a sandbox here: {}",
                        bwrap.display(),
                        said.trim()
                    ))
                }
            }
            BoundedEnd::TimedOut => Err(format!(
                "{} did not build a trial sandbox within {BUBBLEWRAP_PROBE_TIMEOUT:?}",
                bwrap.display()
            )),
        },
        Err(BoundedError::Spawn { source, .. }) => Err(format!(
            "{} is not installed or not runnable: {source}",
            bwrap.display()
        )),
        Err(e @ (BoundedError::Read { .. } | BoundedError::Wait { .. })) => Err(format!(
            "{} cannot create a sandbox here: {e}",
            bwrap.display()
        )),
    };
    if let Ok(mut p) = probes.lock() {
        p.insert(bwrap.to_path_buf(), verdict.clone());
    }
    verdict
}

/// Chooses the backend for a run and states what it enforces, or refuses.
pub fn plan(
    config: &SandboxConfig,
    permissions: &Permissions,
    probe: impl FnOnce(&Path) -> Result<(), String>,
) -> Result<SandboxPlan, Refusal> {
    let requested = requested(config, permissions);
    let native_why = |g: Guarantee, why: &str| Unenforced {
        guarantee: g,
        why: match g {
            Guarantee::TreeContained => format!(
                "{why}; the process group and the run-id sweep catch most descendants, but one that leaves the group and scrubs its environment escapes"
            ),
            Guarantee::WritesConfined
            | Guarantee::RepoReadOnly
            | Guarantee::NoNetwork
            | Guarantee::EgressConfined
            | Guarantee::HomeHidden => why.to_string(),
        },
    };
    let (backend, reason) = match config.backend {
        BackendChoice::Native => (
            SandboxBackend::Native,
            "the native backend was chosen".to_string(),
        ),
        BackendChoice::Bubblewrap => match probe(&config.bwrap) {
            Ok(()) => (SandboxBackend::Bubblewrap, String::new()),
            Err(why) => {
                return Err(Refusal {
                    backend: SandboxBackend::Bubblewrap,
                    reason: format!("bubblewrap was chosen and is not usable: {why}"),
                    unenforced: requested.iter().map(|&g| Unenforced { guarantee: g, why: why.clone() }).collect(),
                    hint: "install bubblewrap (Debian: apt-get install bubblewrap), or choose another backend".to_string(),
                });
            }
        },
        BackendChoice::Auto => match probe(&config.bwrap) {
            Ok(()) => (SandboxBackend::Bubblewrap, String::new()),
            Err(why) => (
                SandboxBackend::Native,
                format!("bubblewrap is not usable: {why}"),
            ),
        },
        BackendChoice::Container => match crate::podman::container_usable() {
            Ok(_) => (SandboxBackend::Container, String::new()),
            Err(why) => {
                return Err(Refusal {
                    backend: SandboxBackend::Container,
                    reason: format!("the container backend was chosen and is not usable: {why}"),
                    unenforced: requested.iter().map(|&g| Unenforced { guarantee: g, why: why.clone() }).collect(),
                    hint: "install podman and runc (Debian: apt-get install podman runc; `cargo xtask prerequisites` does it as root), or choose another backend".to_string(),
                });
            }
        },
    };
    let (enforced, not_enforced) = match backend {
        SandboxBackend::Bubblewrap => (requested.clone(), Vec::new()),
        SandboxBackend::Container => container_guarantees(&requested),
        SandboxBackend::Native => {
            let why = match config.backend {
                BackendChoice::Auto => format!(
                    "{reason}, so only the native backend is left; it runs a plain child process"
                ),
                BackendChoice::Native | BackendChoice::Bubblewrap | BackendChoice::Container => {
                    format!("{reason}; it runs a plain child process")
                }
            };
            (
                Vec::new(),
                requested
                    .iter()
                    .map(|&g| native_why(g, &why))
                    .collect::<Vec<_>>(),
            )
        }
    };
    let consent = (!not_enforced.is_empty()).then(|| "allow_degraded_native".to_string());
    if !not_enforced.is_empty()
        && !config.allow_degraded_native
        && backend == SandboxBackend::Container
    {
        return Err(Refusal {
            backend,
            reason: "the container backend cannot keep every guarantee asked for".to_string(),
            unenforced: not_enforced,
            hint: "set sandbox.network = \"none\" or \"host\", or pass --allow-degraded-native (setting sandbox.allow_degraded_native = true) to run without these guarantees".to_string(),
        });
    }
    if !not_enforced.is_empty() && !config.allow_degraded_native {
        return Err(Refusal {
            backend,
            reason,
            unenforced: not_enforced,
            hint: "install bubblewrap (Debian: apt-get install bubblewrap), or pass --allow-degraded-native (setting sandbox.allow_degraded_native = true) to run without these guarantees".to_string(),
        });
    }
    Ok(SandboxPlan {
        backend,
        attestation: Attestation {
            requested_backend: config.backend.as_str().to_string(),
            actual_backend: backend,
            requested,
            enforced,
            not_enforced,
            consent,
            stray_writes: Vec::new(),
            stray_check: corral_ports::StrayCheck::NotChecked,
            stray_check_why: Some("the run ended before the check".to_string()),
            read_only_links: Vec::new(),
            checked_inside: None,
            limits: Vec::new(),
        },
        read_only_links: Vec::new(),
    })
}

/// Why `tree`, a writable tree of a run, is too wide for writes to be confined: the whole
/// filesystem, the user's `home`, or a directory that holds the home. Writable, any of them lets
/// the agent change the user's shell start-up files, the CLIs' configuration and every project,
/// so "writes confined" would say nothing. `None` when it is narrower. Paths are compared
/// resolved (`/home/u/..` is `/home`).
pub fn too_wide_work_tree(tree: &Path, home: Option<&Path>) -> Option<String> {
    let tree = std::fs::canonicalize(tree).unwrap_or_else(|_| tree.to_path_buf());
    if tree.parent().is_none() {
        return Some(format!(
            "{} is the whole filesystem; writable, it confines no write",
            tree.display()
        ));
    }
    let home = home.map(|h| std::fs::canonicalize(h).unwrap_or_else(|_| h.to_path_buf()))?;
    if home == tree {
        Some(format!(
            "{} is the home directory; writable, it holds every project, the shell's start-up files and the CLIs' configuration",
            tree.display()
        ))
    } else if home.starts_with(&tree) {
        Some(format!(
            "{} holds the home directory {}; writable, it holds every project, the shell's start-up files and the CLIs' configuration",
            tree.display(),
            home.display()
        ))
    } else {
        None
    }
}

/// Applies [`too_wide_work_tree`] to a plan: a writable tree too wide makes writes-confined
/// unenforced, which refuses without consent (`allow_degraded_native`) and with it is recorded
/// as not enforced, with the reason and the consent.
pub fn confine_trees(
    config: &SandboxConfig,
    mut plan: SandboxPlan,
    trees: &[&Path],
    home: Option<&Path>,
) -> Result<SandboxPlan, Refusal> {
    let Some(why) = trees.iter().find_map(|t| too_wide_work_tree(t, home)) else {
        return Ok(plan);
    };
    let attestation = &mut plan.attestation;
    if !attestation.enforced.contains(&Guarantee::WritesConfined) {
        return Ok(plan);
    }
    let unenforced = Unenforced {
        guarantee: Guarantee::WritesConfined,
        why: format!("the work tree is too wide: {why}"),
    };
    if !config.allow_degraded_native {
        return Err(Refusal {
            backend: plan.backend,
            reason: format!("the work tree is too wide to confine writes: {why}"),
            unenforced: vec![unenforced],
            hint: "run in a project directory (--cwd PATH), or pass --allow-degraded-native (setting sandbox.allow_degraded_native = true) to run with writes unconfined".to_string(),
        });
    }
    attestation
        .enforced
        .retain(|g| *g != Guarantee::WritesConfined);
    attestation.not_enforced.push(unenforced);
    attestation.consent = Some("allow_degraded_native".to_string());
    Ok(plan)
}

/// Corral's own record of a run in its run directory, which the agent must not delete or forge:
/// the execution log, the caller's `run.json`, the prompt as sent, the session files and the raw
/// stream files; and, for each file Corral rewrites while the CLI runs (`run.json` and the
/// session files), the copy it writes first ([`corral_ports::run_dir::record_copy`]), whose
/// presence makes the engine write the file in place.
pub fn record_paths(output_dir: &Path) -> Vec<PathBuf> {
    use corral_ports::run_dir::{
        EVENTS_FILE, PROMPT_FILE, RUN_FILE, SESSION_ID_FILE, SESSION_META_FILE,
    };
    let mut paths: Vec<PathBuf> = [
        EVENTS_FILE,
        RUN_FILE,
        PROMPT_FILE,
        SESSION_ID_FILE,
        SESSION_META_FILE,
        corral_ports::run_dir::RAW_STREAMS_DIR,
    ]
    .iter()
    .map(|name| output_dir.join(name))
    .collect();
    paths.extend(record_copies(output_dir));
    paths
}

/// The copies beside the record files Corral rewrites while the CLI runs (`run.json` and the
/// session files): see [`corral_ports::run_dir::record_copy`].
pub fn record_copies(output_dir: &Path) -> Vec<PathBuf> {
    use corral_ports::run_dir::{RUN_FILE, SESSION_ID_FILE, SESSION_META_FILE};
    [RUN_FILE, SESSION_ID_FILE, SESSION_META_FILE]
        .iter()
        .map(|name| corral_ports::run_dir::record_copy(&output_dir.join(name)))
        .collect()
}

/// The run's private temporary directory, inside the run directory.
pub fn private_tmp(output_dir: &Path) -> PathBuf {
    output_dir.join("tmp")
}

/// Creates `dir` readable by its owner only (0700).
pub fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
}

/// bubblewrap's arguments for a run, up to and including `--`; the CLI's program and arguments
/// follow. Missing state directories are created first so they can be bound.
pub fn bwrap_args(
    config: &SandboxConfig,
    permissions: &Permissions,
    paths: &Paths<'_>,
) -> Vec<OsString> {
    let mut args: Vec<OsString> = Vec::new();
    let mut push = |items: &[&std::ffi::OsStr]| args.extend(items.iter().map(|s| s.to_os_string()));
    for flag in isolation_args() {
        push(&[flag.as_ref()]);
    }
    for flag in crate::egress::namespace_args(config.network) {
        push(&[flag.as_ref()]);
    }
    push(&[
        "--ro-bind".as_ref(),
        "/".as_ref(),
        "/".as_ref(),
        "--dev".as_ref(),
        "/dev".as_ref(),
        "--proc".as_ref(),
        "/proc".as_ref(),
    ]);
    if config.home == HomePolicy::Isolated
        && let Some(home) = paths.home
    {
        // The per-run home: empty, private (0700), gone with the namespace.
        push(&[
            "--perms".as_ref(),
            "0700".as_ref(),
            "--tmpfs".as_ref(),
            home.as_os_str(),
        ]);
    }
    let mut writable: Vec<&Path> = Vec::new();
    if permissions.edit_files {
        writable.push(paths.cwd);
    }
    writable.push(paths.output_dir);
    writable.extend(paths.extra_roots.iter().map(PathBuf::as_path));
    writable.extend(paths.state.iter().map(PathBuf::as_path));
    if config.home == HomePolicy::Isolated && !permissions.edit_files {
        // A hidden home may cover the working directory; it must stay readable.
        push(&[
            "--ro-bind".as_ref(),
            paths.cwd.as_os_str(),
            paths.cwd.as_os_str(),
        ]);
    }
    for path in &writable {
        if path.exists() {
            push(&["--bind".as_ref(), path.as_os_str(), path.as_os_str()]);
        }
    }
    // Corral's record around the run directory, read-only: the directory of a writable tree
    // that holds the run directory (`.corral/` of the work tree), with the run directory bound
    // writable again inside it. Otherwise the agent could plant a link, a FIFO or a forged
    // report where Corral writes or reads after it: in an earlier run's directory, in a later
    // round's, beside its own (a sprint's `check.txt`, the evaluator's `signals.json`).
    for top in record_roots(&writable, paths.output_dir) {
        push(&["--ro-bind".as_ref(), top.as_os_str(), top.as_os_str()]);
        for path in writable
            .iter()
            .filter(|w| w.starts_with(&top) && **w != top)
        {
            if path.exists() {
                push(&["--bind".as_ref(), path.as_os_str(), path.as_os_str()]);
            }
        }
    }
    // After every writable bind, or a later bind of a parent would uncover them. A protected
    // path outside the writable paths is read-only already.
    for path in paths.protected {
        let inside = writable.iter().any(|w| path.starts_with(w));
        if inside && std::fs::symlink_metadata(path).is_ok() {
            push(&["--ro-bind".as_ref(), path.as_os_str(), path.as_os_str()]);
        }
    }
    if config.home == HomePolicy::Host
        && let Some(home) = paths.home
    {
        args.extend(hide_home_secrets(home, paths.state));
    }
    // Hidden whatever the home policy: a tmpfs over `HOME` does not cover the account's home
    // in the password database when `HOME` points elsewhere.
    if let Some(account) = paths.account_home
        && !paths.home.is_some_and(|h| same_path(h, account))
    {
        args.extend(hide_home_secrets(account, paths.state));
    }
    // Under a hidden home, what lies in it is gone already (and the tmpfs has none of it).
    let hidden_home = match config.home {
        HomePolicy::Isolated => paths.home,
        HomePolicy::Host => None,
    };
    // Never over the working directory or a writable path: an entry that holds one would
    // cover the run's own tree with an empty directory.
    let extra: Vec<PathBuf> = config
        .hide
        .iter()
        .filter(|p| !hidden_home.is_some_and(|h| p.starts_with(h)))
        .filter(|p| {
            let covers = writable
                .iter()
                .chain([&paths.cwd])
                .find(|w| w.starts_with(p));
            if let Some(w) = covers {
                tracing::warn!(hidden = %p.display(), kept = %w.display(), "not hidden: it holds a path the run works in");
            }
            covers.is_none()
        })
        .cloned()
        .collect();
    args.extend(hide_paths(&extra, paths.state));
    match config.network {
        NetworkPolicy::Allowlist | NetworkPolicy::None => {
            args.extend(crate::egress::hide_host_unix_sockets(&writable));
        }
        NetworkPolicy::Host => {}
    }
    args.extend([
        OsString::from("--chdir"),
        paths.cwd.as_os_str().to_os_string(),
        OsString::from("--"),
    ]);
    args
}

/// The directories that hold Corral's record around the run directory `output_dir`: for each
/// writable tree that holds `output_dir` below one of its directories, that directory (the
/// first component below the tree: `<work tree>/.corral` for `.corral/runs/<id>` and for a
/// sprint's spawn directories). Bound read-only after the writable trees, with the writable
/// paths inside it bound again; nothing when the run directory lies outside every writable
/// tree (it is read-only there already, but for itself) or directly in one.
pub fn record_roots(writable: &[&Path], output_dir: &Path) -> Vec<PathBuf> {
    let mut tops: Vec<PathBuf> = Vec::new();
    for tree in writable {
        if *tree == output_dir || !output_dir.starts_with(tree) {
            continue;
        }
        let Ok(below) = output_dir.strip_prefix(tree) else {
            continue;
        };
        let Some(first) = below.components().next() else {
            continue;
        };
        let top = tree.join(first);
        if top != output_dir && top.is_dir() && !tops.contains(&top) {
            tops.push(top);
        }
    }
    tops
}

/// Where, under the home directory, the user keeps credentials for other services: keys, cloud
/// and cluster credentials, registry and git tokens, and the histories of shells and database
/// clients, where passwords and tokens typed on a command line end up. None of the five CLIs
/// needs any of them (their own credentials are in their state paths), so the sandbox hides
/// them even when the home directory is otherwise visible. `docs/security.md` lists them as a
/// table; `sandbox.hide` adds more.
pub const HOME_SECRETS: &[&str] = &[
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".kube",
    ".docker",
    ".config/gh",
    ".config/hub",
    ".password-store",
    ".local/share/keyrings",
    ".terraform.d",
    ".netrc",
    ".git-credentials",
    ".pgpass",
    ".pypirc",
    ".npmrc",
    ".yarnrc.yml",
    ".vault-token",
    ".terraformrc",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    // Encryption keys and other services' logins.
    ".config/sops/age/keys.txt",
    ".age",
    ".cloudflared",
    ".config/rclone",
    ".boto",
    ".m2/settings.xml",
    ".m2/settings-security.xml",
    ".gradle/gradle.properties",
    ".oci",
    ".config/doctl",
    ".config/hcloud",
    ".config/netlify",
    ".netlify",
    ".vercel",
    ".local/share/com.vercel.cli",
    ".config/heroku",
    ".env",
    // Histories: a password or token typed once stays in them.
    ".bash_history",
    ".zsh_history",
    ".local/share/fish/fish_history",
    ".history",
    ".psql_history",
    ".mysql_history",
    ".sqlite_history",
    ".python_history",
    ".node_repl_history",
    ".rediscli_history",
];

/// Secret files a tool refuses to start without when they exist but are empty: hidden behind
/// a harmless stand-in instead of `/dev/null` (Maven fails on an empty `settings.xml`: "Non-
/// parseable settings … input contained no data"; `<settings/>` is its defaults).
pub const STAND_INS: &[(&str, &str)] = &[(".m2/settings.xml", "<settings/>\n")];

/// Where, under `home`, Corral keeps the [`STAND_INS`]: the user's cache, read-only inside
/// every sandbox like the rest of the home.
const STAND_INS_DIR: &str = ".cache/corral/stand-ins";

/// bubblewrap's arguments that hide [`HOME_SECRETS`] under `home`: see [`hide_paths`]; a file
/// of [`STAND_INS`] is covered by its stand-in, written once into the user's cache.
pub fn hide_home_secrets(home: &Path, state: &[PathBuf]) -> Vec<OsString> {
    let mut args = Vec::new();
    let mut hidden: Vec<PathBuf> = Vec::new();
    for rel in HOME_SECRETS {
        let path = home.join(rel);
        let stand_in = STAND_INS
            .iter()
            .find(|(name, _)| name == rel)
            .filter(|_| std::fs::metadata(&path).is_ok_and(|m| m.is_file()))
            .filter(|_| {
                !state
                    .iter()
                    .any(|s| s.starts_with(&path) || path.starts_with(s))
            })
            .and_then(|(name, text)| stand_in_file(home, name, text));
        match stand_in {
            Some(file) => args.extend([
                "--ro-bind".into(),
                file.into_os_string(),
                path.into_os_string(),
            ]),
            None => hidden.push(path),
        }
    }
    args.extend(hide_paths(&hidden, state));
    args
}

/// The stand-in for `rel` with `text` in the user's cache under `home`, written (through the
/// one handle on host files) when missing or different; `None` when it cannot be, and the file
/// is then hidden behind `/dev/null` like the others.
fn stand_in_file(home: &Path, rel: &str, text: &str) -> Option<PathBuf> {
    let name = rel.replace('/', "_");
    let dir = corral_hostfs::HostDir::open(home)
        .and_then(|h| h.create_dir(STAND_INS_DIR))
        .ok()?;
    let current = dir.read_if_exists(&name, 64 * 1024).ok().flatten();
    if current.as_deref() != Some(text.as_bytes()) {
        dir.replace(&name, text.as_bytes()).ok()?;
    }
    Some(dir.join(&name))
}

/// bubblewrap's arguments that hide `paths`: an empty tmpfs over a directory, `/dev/null` over
/// a file (a symbolic link is judged by what it points to, and covered where it is). Only what
/// exists (the rest of the filesystem is read-only, so nothing can be created there), and never
/// a CLI's own state path or what contains one: the running CLI keeps its own credentials.
pub fn hide_paths(paths: &[PathBuf], state: &[PathBuf]) -> Vec<OsString> {
    let mut args: Vec<OsString> = Vec::new();
    for path in paths {
        if state
            .iter()
            .any(|s| s.starts_with(path) || path.starts_with(s))
        {
            continue;
        }
        match std::fs::metadata(path) {
            Ok(meta) if meta.is_dir() => {
                args.extend(["--tmpfs".into(), path.clone().into_os_string()]);
            }
            Ok(_) => {
                args.extend([
                    "--ro-bind".into(),
                    "/dev/null".into(),
                    path.clone().into_os_string(),
                ]);
            }
            Err(_) => {}
        }
    }
    args
}

/// The home directory of the account Corral runs as, from the password database
/// (`getpwuid`): `None` when the account has no entry.
pub fn account_home() -> Option<PathBuf> {
    nix::unistd::User::from_uid(nix::unistd::geteuid())
        .ok()
        .flatten()
        .map(|u| u.dir)
        .filter(|d| d.is_absolute())
}

/// Whether `a` and `b` name the same directory (resolved where they exist).
fn same_path(a: &Path, b: &Path) -> bool {
    let resolve = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    resolve(a) == resolve(b)
}

/// What of a writable tree's git repository stays read-only to the agent: `root/.git` itself
/// (so it can be neither written nor renamed away), the directory a `.git` *file* names with
/// `gitdir:` (a linked work tree, a submodule), and the common directory that directory's
/// `commondir` names. With those writable, the agent could plant `core.fsmonitor`, a hook or a
/// `commondir` that the user's next `git status` on the host obeys. A `.git` that does not exist
/// is returned too: [`prepare_protected`] makes it an empty placeholder, so no repository can be
/// created there (an empty `.git` directory is not a repository; git looks past it).
pub fn git_paths(root: &Path) -> Vec<PathBuf> {
    let dot_git = root.join(".git");
    let mut out = vec![dot_git.clone()];
    let resolve = |base: &Path, target: &str| {
        let target = Path::new(target.trim());
        if target.is_absolute() {
            target.to_path_buf()
        } else {
            base.join(target)
        }
    };
    let gitdir = match std::fs::symlink_metadata(&dot_git) {
        Ok(meta) if meta.is_dir() => Some(dot_git.clone()),
        Ok(meta) if meta.is_file() => read_small(&dot_git).and_then(|text| {
            text.lines()
                .find_map(|l| l.strip_prefix("gitdir:"))
                .map(|t| resolve(root, t))
        }),
        // A symlink: what it points to.
        Ok(_) => std::fs::canonicalize(&dot_git).ok(),
        Err(_) => None,
    };
    if let Some(dir) = gitdir {
        if let Some(text) = read_small(&dir.join("commondir")) {
            out.push(resolve(&dir, &text));
        }
        if dir != dot_git {
            out.push(dir);
        }
    }
    out
}

/// The regular files under `roots` with more than one link (`st_nlink > 1`), which the sandbox
/// binds read-only: the other name of such a file may be anywhere on the same filesystem, so a
/// write through the one inside the writable tree would land outside it. A new link to a file
/// outside cannot be made from inside (`link` across mounts fails with `EXDEV`). Symbolic links
/// are not followed and `.git` directories are skipped (read-only as a whole already).
pub fn multi_link_files(roots: &[&Path]) -> Vec<PathBuf> {
    use std::os::unix::fs::MetadataExt;
    let mut found = Vec::new();
    let mut pending: Vec<PathBuf> = roots.iter().map(|r| r.to_path_buf()).collect();
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(meta) = entry.metadata() else {
                continue;
            };
            let path = entry.path();
            if meta.is_dir() {
                if entry.file_name() != ".git" {
                    pending.push(path);
                }
            } else if meta.is_file() && meta.nlink() > 1 {
                found.push(path);
            }
        }
    }
    found.sort();
    found.dedup();
    found
}

/// A small regular file's text (a `.git` file, a `commondir`): nothing else is opened, so a
/// FIFO planted there cannot block the start of a run.
fn read_small(path: &Path) -> Option<String> {
    use std::io::Read;
    if !std::fs::symlink_metadata(path).ok()?.is_file() {
        return None;
    }
    let mut text = String::new();
    std::fs::File::open(path)
        .ok()?
        .take(4096)
        .read_to_string(&mut text)
        .ok()?;
    Some(text)
}

/// A protected path that [`prepare_protected`] created, to remove after the run if it is still
/// as it was made ([`remove_placeholders`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placeholder {
    /// Where.
    pub path: PathBuf,
    /// Its device and inode when made: another file put there is never removed.
    pub id: (u64, u64),
    /// What a file was made with (`None` for a directory).
    pub contents: Option<&'static [u8]>,
}

/// Makes every protected path exist, so that bubblewrap can bind it read-only and the agent
/// cannot create it: a missing directory (no extension) is created empty, a missing file empty
/// (`{}` for JSON, so the CLI still parses it). Only where the parent directory exists (the
/// state directories are created first, [`prepare_state`]). Returns what it created, for
/// [`remove_placeholders`] after the run.
pub fn prepare_protected(protected: &[PathBuf]) -> Vec<Placeholder> {
    use std::os::unix::fs::MetadataExt;
    let mut made = Vec::new();
    for path in protected {
        if std::fs::symlink_metadata(path).is_ok() || !path.parent().is_some_and(Path::is_dir) {
            continue;
        }
        let contents = match path.extension().and_then(|e| e.to_str()) {
            None => {
                if std::fs::create_dir(path).is_err() {
                    continue;
                }
                None
            }
            Some(ext) => {
                let placeholder: &'static [u8] = match ext {
                    "json" | "jsonc" => b"{}\n",
                    _ => b"",
                };
                let created = std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .open(path);
                let Ok(mut file) = created else {
                    continue;
                };
                use std::io::Write;
                let _ = file.write_all(placeholder);
                Some(placeholder)
            }
        };
        if let Ok(meta) = std::fs::symlink_metadata(path) {
            made.push(Placeholder {
                path: path.clone(),
                id: (meta.dev(), meta.ino()),
                contents,
            });
        }
    }
    made
}

/// Shared locks (`flock`) on the directories holding a sandbox's protected paths, taken
/// before a run looks at which of them exist ([`prepare_protected`] makes the missing ones,
/// and every one is bound) and held until its sandbox has bound them: a run removing its
/// placeholders locks the same directories exclusively first ([`remove_placeholders`]), so no
/// placeholder goes away between another run's look and its bind. Runs that share a home
/// (`--jobs`, the workers of one node) otherwise raced: one run's placeholder
/// `~/.claude/settings.json` was removed under the next run's bubblewrap ("Can't find source
/// path"), whose sandbox then ended before it reported and the run was refused.
#[derive(Debug, Default)]
pub struct BindingLocks {
    /// Held for their drop: each unlocks its directory.
    _held: Vec<nix::fcntl::Flock<std::fs::File>>,
}

/// Takes [`BindingLocks`] on the existing parent directories of `protected`, in path order;
/// a directory that cannot be opened or locked is passed over (the lock only narrows a race).
pub fn lock_for_binding(protected: &[PathBuf]) -> BindingLocks {
    let mut dirs: Vec<&Path> = protected.iter().filter_map(|p| p.parent()).collect();
    dirs.sort();
    dirs.dedup();
    BindingLocks {
        _held: dirs
            .into_iter()
            .filter_map(|dir| {
                let file = std::fs::File::open(dir).ok()?;
                nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockShared).ok()
            })
            .collect(),
    }
}

/// How long a run waits to remove a placeholder while another run is binding it (its
/// [`BindingLocks`] are held for the milliseconds between its look and its sandbox's start).
const UNBIND_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// An exclusive lock on `dir` against [`BindingLocks`], waited for at most [`UNBIND_WAIT`]:
/// `Err` when another run held it all that time, `Ok(None)` when `dir` cannot be locked at
/// all (no run can have bound through it then either).
fn lock_for_removal(dir: &Path) -> Result<Option<nix::fcntl::Flock<std::fs::File>>, ()> {
    use nix::fcntl::{Flock, FlockArg};
    let deadline = std::time::Instant::now() + UNBIND_WAIT;
    let Ok(mut file) = std::fs::File::open(dir) else {
        return Ok(None);
    };
    loop {
        match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(lock) => return Ok(Some(lock)),
            Err((back, nix::errno::Errno::EWOULDBLOCK)) => {
                if std::time::Instant::now() >= deadline {
                    return Err(());
                }
                file = back;
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            Err(_) => return Ok(None),
        }
    }
}

/// Removes the placeholders [`prepare_protected`] made that are still untouched: the same
/// inode, an empty directory or a file with exactly what it was made with. Called once the
/// sandbox is gone (a bind of it in a live sandbox would otherwise be detached). What the run
/// changed, or put there instead, stays. Later placeholders first, so a directory emptied of
/// its own placeholders goes too. Each under an exclusive lock of its directory (see
/// [`BindingLocks`]); one whose directory another run keeps locked past `UNBIND_WAIT` stays.
pub fn remove_placeholders(placeholders: &[Placeholder]) {
    use std::os::unix::fs::MetadataExt;
    for placeholder in placeholders.iter().rev() {
        let Ok(_locked) = placeholder.path.parent().map_or(Ok(None), lock_for_removal) else {
            tracing::warn!(
                path = %placeholder.path.display(),
                "a placeholder stays: another run kept its directory locked while binding it"
            );
            continue;
        };
        let Ok(meta) = std::fs::symlink_metadata(&placeholder.path) else {
            continue;
        };
        if (meta.dev(), meta.ino()) != placeholder.id {
            continue;
        }
        match placeholder.contents {
            // `rmdir` removes only an empty directory.
            None if meta.is_dir() => {
                let _ = std::fs::remove_dir(&placeholder.path);
            }
            Some(contents)
                if meta.is_file()
                    && meta.len() == contents.len() as u64
                    && read_small(&placeholder.path).is_some_and(|t| t.as_bytes() == contents) =>
            {
                let _ = std::fs::remove_file(&placeholder.path);
            }
            None | Some(_) => {}
        }
    }
}

/// Creates the state directories an adapter declared, so bubblewrap can bind them: private
/// (0700), as the CLIs create their own state.
pub fn prepare_state(state: &[PathBuf]) {
    use std::os::unix::fs::DirBuilderExt;
    for path in state {
        if path.extension().is_none() && !path.exists() {
            let _ = std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn perms(edit: bool) -> Permissions {
        Permissions {
            edit_files: edit,
            ..Permissions::default()
        }
    }

    #[test]
    fn auto_with_bubblewrap_enforces_everything_asked() {
        let config = SandboxConfig {
            network: NetworkPolicy::None,
            home: HomePolicy::Isolated,
            ..SandboxConfig::default()
        };
        let plan = plan(&config, &perms(false), |_| Ok(())).unwrap();
        assert_eq!(plan.backend, SandboxBackend::Bubblewrap);
        assert_eq!(
            plan.attestation.enforced,
            [
                Guarantee::WritesConfined,
                Guarantee::TreeContained,
                Guarantee::RepoReadOnly,
                Guarantee::NoNetwork,
                Guarantee::HomeHidden
            ]
        );
        assert!(plan.attestation.not_enforced.is_empty() && plan.attestation.consent.is_none());
    }

    #[test]
    fn native_without_consent_refuses_and_names_each_guarantee() {
        let refusal = plan(&SandboxConfig::default(), &perms(true), |_| {
            Err("bwrap: not found".into())
        })
        .unwrap_err();
        assert_eq!(refusal.backend, SandboxBackend::Native);
        let names: Vec<Guarantee> = refusal.unenforced.iter().map(|u| u.guarantee).collect();
        assert_eq!(
            names,
            [
                Guarantee::WritesConfined,
                Guarantee::TreeContained,
                Guarantee::EgressConfined
            ]
        );
        assert!(
            refusal.unenforced[0].why.contains("bwrap: not found"),
            "{:?}",
            refusal.unenforced
        );
        assert!(refusal.hint.contains("--allow-degraded-native"));
    }

    #[test]
    fn native_with_consent_runs_and_the_attestation_says_so() {
        let config = SandboxConfig {
            backend: BackendChoice::Native,
            allow_degraded_native: true,
            ..SandboxConfig::default()
        };
        let plan = plan(&config, &perms(true), |_| Ok(())).unwrap();
        assert_eq!(plan.backend, SandboxBackend::Native);
        assert!(plan.attestation.enforced.is_empty());
        assert_eq!(plan.attestation.not_enforced.len(), 3);
        assert_eq!(
            plan.attestation.consent.as_deref(),
            Some("allow_degraded_native")
        );
        assert_eq!(plan.attestation.requested_backend, "native");
    }

    #[test]
    fn asking_for_bubblewrap_where_it_fails_refuses_even_with_consent() {
        let config = SandboxConfig {
            backend: BackendChoice::Bubblewrap,
            allow_degraded_native: true,
            ..SandboxConfig::default()
        };
        let refusal =
            plan(&config, &perms(true), |_| Err("no user namespaces".into())).unwrap_err();
        assert_eq!(refusal.backend, SandboxBackend::Bubblewrap);
        assert!(refusal.hint.contains("install bubblewrap"));
    }

    #[test]
    fn git_paths_follow_gitdir_and_commondir() {
        let dir = tempfile::tempdir().unwrap();
        // A plain repository: its `.git`.
        let plain = dir.path().join("plain");
        std::fs::create_dir_all(plain.join(".git")).unwrap();
        assert_eq!(git_paths(&plain), [plain.join(".git")]);
        // A linked work tree: the `.git` file, the directory it names, and that one's common
        // directory (relative paths resolved where git resolves them).
        let linked = dir.path().join("linked");
        let admin = dir.path().join("main/.git/worktrees/linked");
        std::fs::create_dir_all(&linked).unwrap();
        std::fs::create_dir_all(&admin).unwrap();
        std::fs::write(
            linked.join(".git"),
            format!("gitdir: {}\n", admin.display()),
        )
        .unwrap();
        std::fs::write(admin.join("commondir"), "../..\n").unwrap();
        assert_eq!(
            git_paths(&linked),
            [linked.join(".git"), admin.join("../.."), admin.clone()]
        );
        // No repository: `.git` still, to become a placeholder.
        let none = dir.path().join("none");
        std::fs::create_dir_all(&none).unwrap();
        assert_eq!(git_paths(&none), [none.join(".git")]);
        // A FIFO where `.git` or `commondir` would be is not opened.
        nix::unistd::mkfifo(&admin.join("fifo"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        assert_eq!(read_small(&admin.join("fifo")), None);
    }

    #[test]
    fn missing_protected_paths_become_empty_placeholders_and_are_bound_read_only_last() {
        let dir = tempfile::tempdir().unwrap();
        let cwd = dir.path().join("repo");
        let state = dir.path().join("home/.cli");
        std::fs::create_dir_all(&cwd).unwrap();
        std::fs::create_dir_all(&state).unwrap();
        std::fs::write(state.join("config.toml"), "kept = true\n").unwrap();
        let protected = vec![
            state.join("config.toml"),
            state.join("settings.json"),
            state.join("hooks"),
            cwd.join(".git"),
            dir.path().join("elsewhere/missing.md"),
        ];
        prepare_protected(&protected);
        assert_eq!(
            std::fs::read_to_string(state.join("config.toml")).unwrap(),
            "kept = true\n",
            "an existing file is left alone"
        );
        assert_eq!(
            std::fs::read_to_string(state.join("settings.json")).unwrap(),
            "{}\n"
        );
        assert!(state.join("hooks").is_dir() && cwd.join(".git").is_dir());
        assert!(
            !dir.path().join("elsewhere").exists(),
            "no parent is created"
        );
        let out = dir.path().join("run");
        std::fs::create_dir_all(&out).unwrap();
        let paths = Paths {
            cwd: &cwd,
            output_dir: &out,
            extra_roots: &[],
            state: std::slice::from_ref(&state),
            protected: &protected,
            home: None,
            account_home: None,
        };
        let args: Vec<String> = bwrap_args(&SandboxConfig::default(), &perms(true), &paths)
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let ro: Vec<&str> = args
            .windows(2)
            .filter(|w| w[0] == "--ro-bind" && w[1] != "/" && w[1] != "/dev/null")
            .map(|w| w[1].as_str())
            .collect();
        assert_eq!(
            ro,
            protected[..4]
                .iter()
                .map(|p| p.to_str().unwrap())
                .collect::<Vec<_>>(),
            "{args:?}"
        );
        let last_bind = args.iter().rposition(|a| a == "--bind").unwrap();
        let first_protected = args
            .windows(2)
            .position(|w| w[0] == "--ro-bind" && w[1] == protected[0].to_str().unwrap())
            .unwrap();
        assert!(first_protected > last_bind, "{args:?}");
    }

    #[test]
    fn the_users_other_credentials_are_hidden_but_never_a_clis_state() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path();
        std::fs::create_dir_all(home.join(".ssh")).unwrap();
        std::fs::create_dir_all(home.join(".config/gh")).unwrap();
        std::fs::write(home.join(".netrc"), "machine x password y\n").unwrap();
        // A CLI whose state is inside one of them keeps it.
        let state = vec![home.join(".docker/cli-state")];
        std::fs::create_dir_all(&state[0]).unwrap();
        let args: Vec<String> = hide_home_secrets(home, &state)
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let at = |p: &str| home.join(p).display().to_string();
        assert_eq!(
            args,
            [
                "--tmpfs".to_string(),
                at(".ssh"),
                "--tmpfs".into(),
                at(".config/gh"),
                "--ro-bind".into(),
                "/dev/null".into(),
                at(".netrc"),
            ]
        );
    }

    /// Issue 29 item 1: age and sops keys, other services' logins, `.env` and the histories
    /// of shells and database clients were visible to the agent in a visible home.
    #[test]
    fn well_known_secrets_and_histories_are_hidden() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path();
        let dirs = [
            ".age",
            ".cloudflared",
            ".config/rclone",
            ".oci",
            ".config/doctl",
            ".config/hcloud",
            ".config/netlify",
            ".netlify",
            ".vercel",
            ".local/share/com.vercel.cli",
            ".config/heroku",
        ];
        let files = [
            ".config/sops/age/keys.txt",
            ".boto",
            ".m2/settings.xml",
            ".m2/settings-security.xml",
            ".gradle/gradle.properties",
            ".env",
            ".bash_history",
            ".zsh_history",
            ".local/share/fish/fish_history",
            ".history",
            ".psql_history",
            ".mysql_history",
            ".sqlite_history",
            ".python_history",
            ".node_repl_history",
            ".rediscli_history",
        ];
        for d in dirs {
            std::fs::create_dir_all(home.join(d)).unwrap();
        }
        for f in files {
            let path = home.join(f);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, "secret\n").unwrap();
        }
        let args: Vec<String> = hide_home_secrets(home, &[])
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        for d in dirs {
            let at = home.join(d).display().to_string();
            assert!(
                args.windows(2).any(|w| w[0] == "--tmpfs" && w[1] == at),
                "{d}: {args:?}"
            );
        }
        for f in files {
            let at = home.join(f).display().to_string();
            if let Some((_, text)) = STAND_INS.iter().find(|(name, _)| *name == f) {
                // Maven's settings: covered by a stand-in it can parse, not by an empty file.
                let bound = args
                    .windows(3)
                    .find(|w| w[0] == "--ro-bind" && w[2] == at)
                    .map(|w| w[1].clone())
                    .unwrap_or_else(|| panic!("{f}: {args:?}"));
                assert_eq!(std::fs::read_to_string(&bound).unwrap(), *text, "{f}");
                assert!(bound.starts_with(home.to_str().unwrap()), "{bound}");
                continue;
            }
            assert!(
                args.windows(3)
                    .any(|w| w[0] == "--ro-bind" && w[1] == "/dev/null" && w[2] == at),
                "{f}: {args:?}"
            );
        }
    }

    /// Issue 29 item 1: `sandbox.hide` hides what the user names, wherever it is, under either
    /// home policy; never what does not exist, the running CLI's own state, nor what holds the
    /// working directory.
    #[test]
    fn the_users_hide_list_is_hidden_but_never_the_clis_state() {
        let dir = tempfile::tempdir().unwrap();
        let cwd = dir.path().join("repo");
        let out = dir.path().join("run");
        let home = dir.path().join("home");
        let state = home.join(".cli");
        let keys = dir.path().join("srv/keys");
        let token = home.join(".config/foo/token");
        for p in [&cwd, &out, &state, &keys] {
            std::fs::create_dir_all(p).unwrap();
        }
        std::fs::create_dir_all(token.parent().unwrap()).unwrap();
        std::fs::write(&token, "t\n").unwrap();
        let config = |home_policy| SandboxConfig {
            network: NetworkPolicy::Host,
            home: home_policy,
            hide: vec![
                keys.clone(),
                token.clone(),
                dir.path().join("missing"),
                state.join("own.json"),
                // Holds the working directory: never covered.
                dir.path().to_path_buf(),
            ],
            ..SandboxConfig::default()
        };
        let paths = Paths {
            cwd: &cwd,
            output_dir: &out,
            extra_roots: &[],
            state: std::slice::from_ref(&state),
            protected: &[],
            home: Some(&home),
            account_home: None,
        };
        let args: Vec<String> = bwrap_args(&config(HomePolicy::Host), &perms(true), &paths)
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let hidden: Vec<&[String]> = args
            .windows(3)
            .filter(|w| w[0] == "--tmpfs" || (w[0] == "--ro-bind" && w[1] == "/dev/null"))
            .collect();
        let names: Vec<&str> = hidden
            .iter()
            .map(|w| {
                if w[0] == "--tmpfs" {
                    w[1].as_str()
                } else {
                    w[2].as_str()
                }
            })
            .collect();
        assert_eq!(
            names,
            [keys.to_str().unwrap(), token.to_str().unwrap()],
            "{args:?}"
        );
        let last_bind = args.iter().rposition(|a| a == "--bind").unwrap();
        let first_hidden = args
            .iter()
            .position(|a| a == keys.to_str().unwrap())
            .unwrap();
        assert!(first_hidden > last_bind, "{args:?}");
        // A hidden home covers the file in it already; what is outside is still hidden.
        let isolated: Vec<String> = bwrap_args(&config(HomePolicy::Isolated), &perms(true), &paths)
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert!(
            isolated
                .windows(2)
                .any(|w| w[0] == "--tmpfs" && w[1] == keys.to_str().unwrap()),
            "{isolated:?}"
        );
        assert!(
            !isolated.contains(&token.display().to_string()),
            "{isolated:?}"
        );
    }

    /// Issue 29 item 1: with `HOME` set elsewhere, the account's home in the password database
    /// kept its secrets in view (`~/.ssh` by its full path); it is now hidden like `HOME`,
    /// under either home policy, and not twice when it is `HOME`.
    #[test]
    fn the_account_home_gets_the_same_hiding_as_home() {
        let dir = tempfile::tempdir().unwrap();
        let cwd = dir.path().join("repo");
        let out = dir.path().join("run");
        let home = dir.path().join("elsewhere");
        let account = dir.path().join("account");
        for p in [&cwd, &out, &home, &account.join(".ssh")] {
            std::fs::create_dir_all(p).unwrap();
        }
        std::fs::write(account.join(".bash_history"), "export TOKEN=x\n").unwrap();
        let ssh = account.join(".ssh").display().to_string();
        let history = account.join(".bash_history").display().to_string();
        for policy in [HomePolicy::Host, HomePolicy::Isolated] {
            let config = SandboxConfig {
                network: NetworkPolicy::Host,
                home: policy,
                ..SandboxConfig::default()
            };
            let paths = Paths {
                cwd: &cwd,
                output_dir: &out,
                extra_roots: &[],
                state: &[],
                protected: &[],
                home: Some(&home),
                account_home: Some(&account),
            };
            let args: Vec<String> = bwrap_args(&config, &perms(true), &paths)
                .iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect();
            assert!(
                args.windows(2).any(|w| w[0] == "--tmpfs" && w[1] == ssh),
                "{policy:?}: {args:?}"
            );
            assert!(
                args.windows(3)
                    .any(|w| w[0] == "--ro-bind" && w[1] == "/dev/null" && w[2] == history),
                "{policy:?}: {args:?}"
            );
            // The same directory as HOME: hidden once.
            let same = Paths {
                home: Some(&account),
                ..paths.clone()
            };
            let args: Vec<String> = bwrap_args(&config, &perms(true), &same)
                .iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect();
            let times = args.iter().filter(|a| **a == ssh).count();
            let expected = match policy {
                HomePolicy::Host => 1,
                // A hidden home: its tmpfs covers everything in it.
                HomePolicy::Isolated => 0,
            };
            assert_eq!(times, expected, "{policy:?}: {args:?}");
        }
    }

    #[test]
    fn root_is_nobody_inside() {
        assert_eq!(SANDBOX_ID_FOR_ROOT.parse::<u32>().ok(), Some(65534));
        let args = isolation_args();
        let mapped = args
            .windows(2)
            .any(|w| w[0] == "--uid" && w[1] == SANDBOX_ID_FOR_ROOT);
        assert_eq!(mapped, running_as_root(), "{args:?}");
        if running_as_root() {
            assert_eq!(sandbox_uid(), 65534);
        }
    }

    #[test]
    fn bwrap_binds_exactly_the_writable_paths() {
        let dir = tempfile::tempdir().unwrap();
        let cwd = dir.path().join("repo");
        let out = dir.path().join("run");
        let state = dir.path().join("home/.cli");
        for p in [&cwd, &out, &state] {
            std::fs::create_dir_all(p).unwrap();
        }
        let home = dir.path().join("home");
        let paths = Paths {
            cwd: &cwd,
            output_dir: &out,
            extra_roots: &[],
            state: std::slice::from_ref(&state),
            protected: &[],
            home: Some(&home),
            account_home: None,
        };
        let host_network = SandboxConfig {
            network: NetworkPolicy::Host,
            ..SandboxConfig::default()
        };
        let args: Vec<String> = bwrap_args(&host_network, &perms(true), &paths)
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let binds: Vec<&str> = args
            .windows(2)
            .filter(|w| w[0] == "--bind")
            .map(|w| w[1].as_str())
            .collect();
        assert_eq!(
            binds,
            [
                cwd.to_str().unwrap(),
                out.to_str().unwrap(),
                state.to_str().unwrap()
            ]
        );
        let isolation: Vec<String> = isolation_args().iter().map(|a| a.to_string()).collect();
        assert!(args.starts_with(&isolation), "{args:?}");
        // Root included: its own user namespace, none nested in it, and no capability at all.
        for flag in ["--unshare-user", "--disable-userns", "--unshare-ipc"] {
            assert!(args.contains(&flag.to_string()), "{flag}: {args:?}");
        }
        assert!(
            args.windows(2)
                .any(|w| w[0] == "--cap-drop" && w[1] == "ALL"),
            "{args:?}"
        );
        assert!(!args.contains(&"--unshare-net".into()) && !args.contains(&"--tmpfs".into()));
        assert_eq!(args.last().map(String::as_str), Some("--"));
        // The default, egress confined: its own network namespace, and the host's unix sockets
        // covered after every writable bind, so that no bind uncovers one.
        let confined: Vec<String> = bwrap_args(&SandboxConfig::default(), &perms(true), &paths)
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert!(confined.contains(&"--unshare-net".into()), "{confined:?}");
        let last_bind = confined.iter().rposition(|a| a == "--bind").unwrap();
        let run_hidden = confined
            .windows(2)
            .position(|w| w[0] == "--tmpfs" && w[1] == "/run")
            .unwrap();
        assert!(run_hidden > last_bind, "{confined:?}");
        let ro: Vec<String> = bwrap_args(&SandboxConfig::default(), &perms(false), &paths)
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert!(
            !ro.windows(2)
                .any(|w| w[0] == "--bind" && w[1] == cwd.to_str().unwrap()),
            "read-only repo: {ro:?}"
        );
    }

    /// Issue 29: the record around the run directory (`.corral/` of the work tree) is bound
    /// read-only after the work tree, the run directory writable again inside it, and nothing
    /// of it when the run directory is outside the work tree (a parallel task's worktree).
    #[test]
    fn the_record_around_the_run_directory_is_read_only_but_for_the_run_directory() {
        let dir = tempfile::tempdir().unwrap();
        let cwd = dir.path().join("repo");
        let out = cwd.join(".corral/sprints/s/implement/t/rounds/1/generator");
        std::fs::create_dir_all(&out).unwrap();
        let paths = Paths {
            cwd: &cwd,
            output_dir: &out,
            extra_roots: &[],
            state: &[],
            protected: &[],
            home: None,
            account_home: None,
        };
        let args: Vec<String> = bwrap_args(&SandboxConfig::default(), &perms(true), &paths)
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let at = |flag: &str, path: &Path| {
            args.windows(2)
                .rposition(|w| w[0] == flag && w[1] == path.to_str().unwrap())
        };
        let record = cwd.join(".corral");
        let (tree, ro, rebound) = (
            at("--bind", &cwd).unwrap(),
            at("--ro-bind", &record).unwrap(),
            at("--bind", &out).unwrap(),
        );
        assert!(tree < ro && ro < rebound, "{args:?}");
        // A run directory outside the work tree: nothing of the tree is made read-only.
        let elsewhere = dir.path().join("run");
        std::fs::create_dir_all(&elsewhere).unwrap();
        let outside = Paths {
            output_dir: &elsewhere,
            ..paths
        };
        let args: Vec<String> = bwrap_args(&SandboxConfig::default(), &perms(true), &outside)
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert!(
            !args.iter().any(|a| a == record.to_str().unwrap()),
            "{args:?}"
        );
    }

    /// Issue 10 item 8: `--cwd /` made everything writable while the attestation said
    /// writes-confined. The root, the home and every directory holding the home are too wide;
    /// a project inside the home, or a directory beside it, is not. Too wide refuses without
    /// consent and, with it, runs with writes-confined recorded as not enforced.
    #[test]
    fn the_root_the_home_and_its_ancestors_are_too_wide_to_be_a_work_tree() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("users/me");
        let project = home.join("src/project");
        let beside = dir.path().join("users/other");
        for p in [&project, &beside] {
            std::fs::create_dir_all(p).unwrap();
        }
        let wide = [
            PathBuf::from("/"),
            home.clone(),
            home.join("src/.."),
            dir.path().join("users"),
            dir.path().to_path_buf(),
        ];
        for tree in &wide {
            assert!(
                too_wide_work_tree(tree, Some(&home)).is_some(),
                "{}",
                tree.display()
            );
        }
        assert!(too_wide_work_tree(Path::new("/"), None).is_some());
        for tree in [&project, &beside] {
            assert_eq!(
                too_wide_work_tree(tree, Some(&home)),
                None,
                "{}",
                tree.display()
            );
        }
        let planned = || plan(&SandboxConfig::default(), &perms(true), |_| Ok(())).unwrap();
        let refusal = confine_trees(
            &SandboxConfig::default(),
            planned(),
            &[Path::new("/")],
            Some(&home),
        )
        .unwrap_err();
        assert_eq!(refusal.backend, SandboxBackend::Bubblewrap);
        assert_eq!(refusal.unenforced[0].guarantee, Guarantee::WritesConfined);
        assert!(refusal.reason.contains("whole filesystem"), "{refusal:?}");
        assert!(
            refusal.hint.contains("--allow-degraded-native"),
            "{refusal:?}"
        );
        let consent = SandboxConfig {
            allow_degraded_native: true,
            ..SandboxConfig::default()
        };
        let degraded = confine_trees(&consent, planned(), &[home.as_path()], Some(&home)).unwrap();
        let attestation = &degraded.attestation;
        assert!(!attestation.enforced.contains(&Guarantee::WritesConfined));
        assert!(attestation.enforced.contains(&Guarantee::TreeContained));
        assert_eq!(
            attestation.not_enforced[0].guarantee,
            Guarantee::WritesConfined
        );
        assert!(attestation.not_enforced[0].why.contains("home directory"));
        assert_eq!(
            attestation.consent.as_deref(),
            Some("allow_degraded_native")
        );
        let narrow = confine_trees(
            &SandboxConfig::default(),
            planned(),
            &[project.as_path()],
            Some(&home),
        )
        .unwrap();
        assert_eq!(narrow, planned());
    }

    /// Issue 10 item 8: the placeholders of missing protected paths were left on the host
    /// after the run (an empty `.git` in a tree that is no repository, `{}` settings files).
    /// Now the untouched ones are removed; one the run changed, or replaced, stays.
    #[test]
    fn untouched_placeholders_are_removed_after_the_run_and_changed_ones_stay() {
        let dir = tempfile::tempdir().unwrap();
        let tree = dir.path().join("tree");
        std::fs::create_dir_all(&tree).unwrap();
        std::fs::write(tree.join("kept.json"), "mine\n").unwrap();
        let protected: Vec<PathBuf> = [
            ".git",
            "settings.json",
            "notes.md",
            "hooks",
            "changed.json",
            "filled",
            "replaced.md",
            "kept.json",
        ]
        .iter()
        .map(|p| tree.join(p))
        .collect();
        let made = prepare_protected(&protected);
        assert_eq!(made.len(), 7, "{made:?}");
        std::fs::write(tree.join("changed.json"), "{\"x\": 1}\n").unwrap();
        std::fs::write(tree.join("filled/a"), "").unwrap();
        // Another empty file renamed over it: another inode, so not Corral's.
        std::fs::write(tree.join("other.md"), "").unwrap();
        std::fs::rename(tree.join("other.md"), tree.join("replaced.md")).unwrap();
        remove_placeholders(&made);
        let mut left: Vec<String> = std::fs::read_dir(&tree)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left, ["changed.json", "filled", "kept.json", "replaced.md"]);
        assert_eq!(
            std::fs::read_to_string(tree.join("kept.json")).unwrap(),
            "mine\n"
        );
    }

    /// Two runs sharing a home: run A made the placeholder `settings.json`; run B looks, finds
    /// it, and is about to bind it when A ends. A's removal waits until B's sandbox has bound
    /// it (B's locks dropped), where it used to pull the file from under B's bubblewrap.
    #[test]
    fn a_placeholder_another_run_is_binding_is_removed_only_once_it_is_bound() {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join(".claude");
        std::fs::create_dir_all(&state).unwrap();
        let protected = vec![state.join("settings.json")];
        let made_by_a = prepare_protected(&protected);
        assert_eq!(made_by_a.len(), 1);

        let b_binding = lock_for_binding(&protected);
        assert!(
            prepare_protected(&protected).is_empty(),
            "B finds A's placeholder and binds it"
        );
        let removal = std::thread::spawn(move || remove_placeholders(&made_by_a));
        std::thread::sleep(std::time::Duration::from_millis(300));
        assert!(
            protected[0].exists(),
            "A's removal waits while B is binding"
        );
        assert!(!removal.is_finished());
        drop(b_binding);
        removal.join().unwrap();
        assert!(!protected[0].exists(), "removed once B has bound it");
    }
}
