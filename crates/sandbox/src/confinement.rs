//! The one face of the sandbox: a [`Confinement`], opened for a CLI's run or for a caller's
//! short command (a sprint's check, gates, setup), that wraps one command line into a spawn
//! request plus a [`SpawnGuard`], serves the spawned child (the egress proxy opened, the sandbox
//! checked from inside before the program runs), and finishes with the stray writes.
//!
//! A run's confinement is opened before anything runs ([`Confinement::open`] notes the git work
//! tree), planned ([`Confinement::plan`]: the backend and what it enforces, or a [`Refusal`]),
//! and then wraps each attempt's CLI. A command's confinement ([`Confinement::for_command`]) is
//! planned at once, with the working directory writable, and wraps one command line. Both kinds
//! go through the same wrapping: under bubblewrap the same arguments, the seccomp program, the
//! private `TMPDIR`, the probe that checks the sandbox from inside before the program runs and,
//! with the network confined to the allow-list, the egress gate and Corral's proxy. What differs
//! is what a command's allow-list holds: the user's `sandbox.network_allow` rules only, never a
//! provider's model endpoints (docs/security.md).
//!
//! The caller spawns the request through `corral-process`, calls [`SpawnGuard::started`] at once
//! (or hands the guard to a bounded command as its [`AfterSpawn`]), and [`SpawnGuard::end`]s it
//! once the child was reaped. The sandbox never sees the caller's log: it returns [`Note`]s,
//! which the caller records, and [`Refusal`]s, which the caller reports.

use std::ffi::OsString;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use corral_ports::{
    Attestation, Guarantee, InsideCheck, LimitEnforced, Permissions, SandboxBackend, Unenforced,
};
use corral_process::bounded::AfterSpawn;
use corral_process::limits::{Breach, LimitGroup, Usage};
use corral_process::spawn::{ChildOutputs, ExitInfo, SpawnRequest, SpawnedChild, StdinMode};
use tokio::sync::mpsc::UnboundedReceiver;

use crate::egress::{AllowList, AllowRule, EgressGate, EgressNeeds, EgressNote, EgressProxy};
pub use crate::error::WrapError;
use crate::git_check::{GitProgram, GitSnapshot, strays};
use crate::inside::InsideProbe;
use crate::policy::{self, Placeholder, Refusal, SandboxConfig};
use crate::write_watch::{PendingWatch, Watch};

/// How long one git-cleanliness step may take.
const GIT_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a sandbox killed before its program ran is waited for.
const KILLED_WAIT: Duration = Duration::from_secs(5);

/// How often a spawn's limits are looked at: a fork loop or a memory hog is ended within this
/// (the kernel holds it at its cap meanwhile).
const LIMIT_WATCH_PERIOD: Duration = Duration::from_millis(250);

/// A CLI's run, in plain values.
#[derive(Debug)]
pub struct RunRequest<'a> {
    /// The sandbox settings.
    pub config: &'a SandboxConfig,
    /// What the run may do.
    pub permissions: &'a Permissions,
    /// The working directory.
    pub cwd: &'a Path,
    /// The run directory.
    pub output_dir: &'a Path,
    /// Further trees the run may write.
    pub extra_roots: &'a [PathBuf],
    /// The user's home, as the caller's environment names it (a work tree that holds it
    /// confines nothing).
    pub home: Option<&'a Path>,
    /// Whether the raw stream files are made in the run directory's `raw/` after each spawn.
    pub raw_stream_files: bool,
    /// The git that notes the work tree before the run and its changes after it.
    pub git: GitProgram,
}

/// A caller's short command, in plain values.
#[derive(Debug, Clone, Copy)]
pub struct CommandRequest<'a> {
    /// The sandbox settings.
    pub config: &'a SandboxConfig,
    /// The working directory, writable inside the sandbox.
    pub cwd: &'a Path,
    /// Directories inside the working directory that stay read-only (Corral's record).
    pub read_only: &'a [PathBuf],
}

/// One command line to confine.
#[derive(Debug, Clone, Copy)]
pub struct CommandLine<'a> {
    /// The program, as the caller names it (a path, or a name on the environment's `PATH`).
    pub program: &'a Path,
    /// Its arguments.
    pub args: &'a [OsString],
    /// The environment the caller's policy resolved.
    pub env: &'a [(String, String)],
}

/// What a CLI adds to its command line: its own state paths, writable, and its own
/// configuration, read-only inside what is writable (its adapter's answers).
#[derive(Debug, Default, Clone)]
pub struct CliNeeds {
    /// The CLI's state paths.
    pub state: Vec<PathBuf>,
    /// The CLI's configuration that must stay read-only.
    pub protected: Vec<PathBuf>,
}

/// A confined command line: what to spawn (stdin `/dev/null`, output to pipes and the parent's
/// death signal until the caller says otherwise), and what serves the child once it started.
#[derive(Debug)]
pub struct Wrapped {
    /// The spawn request: bubblewrap around the program, or the program itself.
    pub request: SpawnRequest,
    /// What serves the spawned child, until it was reaped.
    pub guard: SpawnGuard,
}

/// What the sandbox tells its caller's record, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Note {
    /// The native backend's write watch started, or why it did not.
    WriteWatchStarted {
        /// Why the watch is not running, when it is not.
        error: Option<String>,
    },
    /// The way out of a confined sandbox is open.
    EgressOpened {
        /// The proxy's address inside the sandbox.
        proxy: String,
        /// What it serves.
        allow: Vec<AllowRule>,
        /// The sandbox's network namespace (its inode).
        netns: Option<u64>,
        /// From the spawn to the released program.
        setup: Duration,
        /// From the spawn to bubblewrap's report of its sandbox.
        reported: Duration,
    },
    /// The sandbox, checked from inside before the program ran.
    SandboxChecked {
        /// What the probe saw.
        seen: InsideCheck,
        /// What was asked for and did not hold.
        not_confirmed: Vec<Unenforced>,
    },
    /// What one spawn's write watch saw.
    WriteWatch {
        /// The calls it stopped.
        calls: u64,
        /// The writes outside the allowed paths.
        strays: Vec<String>,
        /// Strays beyond those listed, counted only.
        more: u64,
        /// Why the watch stopped early, if it did.
        error: Option<String>,
    },
    /// What git saw change outside the allowed paths over the run.
    StrayWrites {
        /// The repository.
        repo: PathBuf,
        /// The changes outside the allowed paths.
        strays: Vec<String>,
        /// Why git could not tell, if it could not.
        error: Option<String>,
    },
}

/// A spawned sandbox that was stopped before its program ran: what the sandbox noted until
/// then, and why.
#[derive(Debug)]
pub struct Stopped {
    /// The notes, in order.
    pub notes: Vec<Note>,
    /// Why.
    pub refusal: Refusal,
}

/// What a run's confinement found once it finished.
#[derive(Debug)]
pub struct Findings {
    /// The notes, for the record.
    pub notes: Vec<Note>,
    /// The writes outside the allowed paths, or why they were not checked: never an empty list
    /// for "not checked", which would read as a clean tree.
    pub stray_writes: Result<Vec<String>, String>,
}

/// The write watches of a run's spawns under the native backend, taken together.
#[derive(Debug, Default)]
struct Watched {
    /// Spawns that ran watched (or should have).
    spawns: u32,
    /// Every stray they saw, once.
    strays: std::collections::BTreeSet<String>,
    /// Why some spawn's watch did not see all of it, when one did not.
    gap: Option<String>,
}

/// What a confinement and the guards of its spawns share.
#[derive(Debug, Default)]
struct Shared {
    /// What the sandbox enforces, once planned, as the checks from inside left it.
    attestation: Option<Attestation>,
    /// The placeholders made for the sandboxes, removed at the end when untouched.
    placeholders: Vec<Placeholder>,
    /// What the write watches saw.
    watched: Watched,
}

fn lock(shared: &Mutex<Shared>) -> MutexGuard<'_, Shared> {
    shared.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What was planned.
#[derive(Debug)]
struct Planned {
    backend: SandboxBackend,
    /// Files with another name elsewhere in the writable trees, bound read-only.
    read_only_links: Vec<PathBuf>,
}

/// A run's or a command's own parts.
#[derive(Debug)]
enum Kind {
    Run {
        output_dir: PathBuf,
        home: Option<PathBuf>,
        raw_stream_files: bool,
        git: Option<GitSnapshot>,
        /// Why there is no snapshot, when there is none: the stray-write check will not run.
        git_missing: String,
    },
    Command {
        read_only: Vec<PathBuf>,
        /// The command's private temporary directory, made at the first wrap.
        tmp: Mutex<Option<crate::command::PrivateTmp>>,
    },
}

/// One run's or one command's sandbox, from the plan to the findings; see the module
/// documentation.
#[derive(Debug)]
pub struct Confinement {
    config: SandboxConfig,
    permissions: Permissions,
    cwd: PathBuf,
    extra_roots: Vec<PathBuf>,
    kind: Kind,
    planned: Option<Planned>,
    shared: Arc<Mutex<Shared>>,
}

impl Confinement {
    /// Opens a run's confinement: notes the git work tree (or why it cannot be noted). The
    /// sandbox is chosen by [`Confinement::plan`].
    pub async fn open(request: RunRequest<'_>) -> Confinement {
        let (git, git_missing) = match request.git.snapshot(request.cwd, GIT_TIMEOUT).await {
            Ok(snapshot) => (
                snapshot,
                "the working directory is not in a git work tree".to_string(),
            ),
            Err(e) => {
                tracing::warn!(error = %e, "git-cleanliness check unavailable");
                (None, format!("git is unavailable: {e}"))
            }
        };
        Confinement {
            config: request.config.clone(),
            permissions: *request.permissions,
            cwd: request.cwd.to_path_buf(),
            extra_roots: request.extra_roots.to_vec(),
            kind: Kind::Run {
                output_dir: request.output_dir.to_path_buf(),
                home: request.home.map(Path::to_path_buf),
                raw_stream_files: request.raw_stream_files,
                git,
                git_missing,
            },
            planned: None,
            shared: Arc::default(),
        }
    }

    /// The confinement of a caller's short command, planned as a run with the working directory
    /// writable is, or refused where no sandbox is usable and the user did not consent to the
    /// native backend.
    pub fn for_command(request: CommandRequest<'_>) -> Result<Confinement, Refusal> {
        let permissions = Permissions {
            edit_files: true,
            ..Permissions::default()
        };
        let plan = policy::plan(request.config, &permissions, policy::bubblewrap_usable)?;
        Ok(Confinement {
            config: request.config.clone(),
            permissions,
            cwd: request.cwd.to_path_buf(),
            extra_roots: Vec::new(),
            kind: Kind::Command {
                read_only: request.read_only.to_vec(),
                tmp: Mutex::default(),
            },
            planned: Some(Planned {
                backend: plan.backend,
                read_only_links: Vec::new(),
            }),
            shared: Arc::new(Mutex::new(Shared {
                attestation: Some(plan.attestation),
                ..Shared::default()
            })),
        })
    }

    /// The git work tree's root and its uncommitted paths when the run began, outside the run
    /// directory; `None` outside a git work tree.
    pub fn dirty_paths(&self) -> Option<(PathBuf, Vec<PathBuf>)> {
        let Kind::Run {
            git: Some(snapshot),
            output_dir,
            ..
        } = &self.kind
        else {
            return None;
        };
        let real_output = std::fs::canonicalize(output_dir).unwrap_or(output_dir.clone());
        let dirty = snapshot
            .dirty_paths()
            .into_iter()
            .filter(|p| !p.starts_with(&real_output) && !p.starts_with(output_dir))
            .collect();
        Some((snapshot.root().to_path_buf(), dirty))
    }

    /// Chooses the backend of a run and what it enforces, or refuses: no sandbox usable without
    /// the user's consent, or a work tree too wide to confine (the whole filesystem, one that
    /// holds the home). Returns the attestation to record.
    pub fn plan(&mut self) -> Result<Attestation, Refusal> {
        let plan = policy::plan(&self.config, &self.permissions, policy::bubblewrap_usable)?;
        let trees = self.writable_trees();
        let home = match &self.kind {
            Kind::Run { home, .. } => home.as_deref(),
            Kind::Command { .. } => None,
        };
        let mut plan = policy::confine_trees(&self.config, plan, &trees, home)?;
        // A file with another name outside is bound read-only in a container as in bubblewrap's
        // sandbox (the probe suite's `write-existing-link` row).
        if matches!(
            plan.backend,
            SandboxBackend::Bubblewrap | SandboxBackend::Container
        ) {
            plan.read_only_links = policy::multi_link_files(&trees);
            plan.attestation.read_only_links = plan
                .read_only_links
                .iter()
                .map(|p| p.display().to_string())
                .collect();
        }
        lock(&self.shared).attestation = Some(plan.attestation.clone());
        self.planned = Some(Planned {
            backend: plan.backend,
            read_only_links: plan.read_only_links,
        });
        Ok(plan.attestation)
    }

    /// The trees the run may write: its extra roots, and its working directory when it may
    /// edit files.
    fn writable_trees(&self) -> Vec<&Path> {
        let mut trees: Vec<&Path> = self.extra_roots.iter().map(PathBuf::as_path).collect();
        if self.permissions.edit_files {
            trees.push(&self.cwd);
        }
        trees
    }

    /// Whether the planned sandbox confines the network to the allow-list: only bubblewrap
    /// can, when the settings ask for it.
    pub fn egress_confined(&self) -> bool {
        self.planned
            .as_ref()
            .is_some_and(|p| p.backend == SandboxBackend::Bubblewrap)
            && self.config.network == policy::NetworkPolicy::Allowlist
    }

    /// What the sandbox enforces, as planned and as the checks from inside left it.
    pub fn attestation(&self) -> Option<Attestation> {
        lock(&self.shared).attestation.clone()
    }

    /// Wraps one of a run's CLI command lines: `needs` are the CLI's own paths, and `egress`
    /// says what the CLI reaches (asked only when the network is confined to the allow-list).
    pub fn wrap_cli(
        &self,
        line: CommandLine<'_>,
        needs: CliNeeds,
        egress: impl FnOnce() -> EgressNeeds,
    ) -> Result<Wrapped, WrapError> {
        let planned = self.planned.as_ref().ok_or(WrapError::NotPlanned)?;
        let Kind::Run {
            output_dir,
            raw_stream_files,
            ..
        } = &self.kind
        else {
            return self.wrap(line);
        };
        let mut env: Vec<(OsString, OsString)> =
            line.env.iter().map(|(k, v)| (k.into(), v.into())).collect();
        let confined = crate::cli::confine_cli(
            planned.backend,
            crate::cli::CliLine {
                config: &self.config,
                permissions: &self.permissions,
                cwd: &self.cwd,
                output_dir,
                extra_roots: &self.extra_roots,
                state: &needs.state,
                protected: needs.protected,
                read_only_links: &planned.read_only_links,
                raw_stream_files: *raw_stream_files,
                program: line.program,
                args: line.args,
                env: line.env,
            },
            egress,
            &mut env,
            |made| lock(&self.shared).placeholders.extend(made),
        )?;
        let mut request = SpawnRequest {
            program: confined.program,
            args: confined.args,
            env,
            cwd: self.cwd.clone(),
            stdin: StdinMode::Null,
            parent_death_signal: true,
            inherit_fds: confined.inherit_fds,
            output: ChildOutputs::Pipes,
            pre_exec: confined.pre_exec,
        };
        // The run directory holds the private `TMPDIR`: one measure covers both.
        let measured = vec![output_dir.clone()];
        let limits = self.limit(planned.backend, measured.clone(), &mut request);
        Ok(Wrapped {
            request,
            guard: SpawnGuard::new(
                self,
                planned.backend,
                Parts {
                    seccomp: confined.seccomp,
                    egress: confined.egress,
                    probe: confined.probe,
                    watch: confined.watch,
                    limits,
                    container: confined.container,
                    measured,
                },
            ),
        })
    }

    /// Wraps a command's line (for a run's confinement, as a CLI without paths of its own that
    /// reaches nothing but the user's allow-list).
    pub fn wrap(&self, line: CommandLine<'_>) -> Result<Wrapped, WrapError> {
        let planned = self.planned.as_ref().ok_or(WrapError::NotPlanned)?;
        let Kind::Command { read_only, tmp } = &self.kind else {
            return self.wrap_cli(line, CliNeeds::default(), || EgressNeeds {
                endpoints: Vec::new(),
                proxy: crate::egress::ProxyHonour::Environment,
            });
        };
        let mut tmp = tmp.lock().unwrap_or_else(PoisonError::into_inner);
        let wrapped = crate::command::wrap_command(
            planned.backend,
            &self.config,
            crate::command::CommandLine {
                program: line.program,
                args: line.args,
                env: line.env,
                cwd: &self.cwd,
                read_only,
            },
            &mut tmp,
            |made| lock(&self.shared).placeholders.extend(made),
        )?;
        let measured: Vec<PathBuf> = tmp.iter().map(|t| t.path().to_path_buf()).collect();
        drop(tmp);
        let mut request = SpawnRequest {
            program: wrapped.program,
            args: wrapped.args,
            env: wrapped.env,
            cwd: self.cwd.clone(),
            stdin: StdinMode::Null,
            parent_death_signal: true,
            inherit_fds: wrapped.inherit_fds,
            output: ChildOutputs::Pipes,
            pre_exec: Vec::new(),
        };
        let limits = self.limit(planned.backend, measured.clone(), &mut request);
        Ok(Wrapped {
            request,
            guard: SpawnGuard::new(
                self,
                planned.backend,
                Parts {
                    seccomp: wrapped.seccomp,
                    egress: wrapped.egress,
                    probe: wrapped.probe,
                    watch: None,
                    limits,
                    container: wrapped.container,
                    measured,
                },
            ),
        })
    }

    /// The limits of one spawn (`[limits]`), when any is set: a limit group the child joins
    /// first thing before exec, and `measured` (the run directory, a command's private
    /// `TMPDIR`) counted against the disk limit. The first spawn's enforcement goes into the
    /// attestation.
    fn limit(
        &self,
        backend: SandboxBackend,
        measured: Vec<PathBuf>,
        request: &mut SpawnRequest,
    ) -> Option<Arc<LimitGroup>> {
        if self.config.limits.is_unlimited() {
            return None;
        }
        match backend {
            SandboxBackend::Container => {
                // podman's own options, enforced by the container's cgroup (the container is
                // not a child of the spawn: a group the client joined would not count it).
                if let Some(attestation) = lock(&self.shared).attestation.as_mut() {
                    attestation.limits = crate::container::container_limits(self.config.limits);
                }
                return None;
            }
            SandboxBackend::Native | SandboxBackend::Bubblewrap => {}
        }
        let group = Arc::new(LimitGroup::create(self.config.limits, measured));
        // First: the sandbox and every later step of the child are counted, and a hook that
        // watches the child's own calls (the native write watch) comes after it.
        request.pre_exec.insert(0, group.hook());
        if let Some(attestation) = lock(&self.shared).attestation.as_mut()
            && attestation.limits.is_empty()
        {
            attestation.limits = group
                .enforcement()
                .iter()
                .map(|e| LimitEnforced {
                    limit: e.limit.as_str().to_string(),
                    cap: e.cap.clone(),
                    how: e.how.clone(),
                    why_not: e.why_not.clone(),
                })
                .collect();
        }
        Some(group)
    }

    /// Finishes: every sandbox is gone by now, so what Corral made to bind read-only goes when
    /// it was left as it was, with the copies of the record files and the private temporary
    /// directory; then the writes outside the allowed paths, from git and the write watches.
    pub async fn finish(self) -> Findings {
        let (placeholders, watched) = {
            let mut shared = lock(&self.shared);
            (
                std::mem::take(&mut shared.placeholders),
                std::mem::take(&mut shared.watched),
            )
        };
        policy::remove_placeholders(&placeholders);
        let Kind::Run {
            output_dir,
            git,
            git_missing,
            ..
        } = &self.kind
        else {
            return Findings {
                notes: Vec::new(),
                stray_writes: Ok(Vec::new()),
            };
        };
        // With no sandbox left, the next writes of the record files are renames again.
        for copy in policy::record_copies(output_dir) {
            if std::fs::symlink_metadata(&copy).is_ok_and(|m| m.is_file()) {
                let _ = std::fs::remove_file(&copy);
            }
        }
        let mut notes = Vec::new();
        let from_git = match git {
            Some(snapshot) => self.git_strays(snapshot, output_dir, &mut notes).await,
            None => Err(git_missing.clone()),
        };
        let _ = std::fs::remove_dir_all(policy::private_tmp(output_dir));
        Findings {
            notes,
            stray_writes: merge_watched(from_git, watched),
        }
    }

    /// The changes the git snapshot shows outside the allowed paths since the run began.
    async fn git_strays(
        &self,
        snapshot: &GitSnapshot,
        output_dir: &Path,
        notes: &mut Vec<Note>,
    ) -> Result<Vec<String>, String> {
        let mut allowed: Vec<PathBuf> = vec![output_dir.to_path_buf()];
        if self.permissions.edit_files {
            allowed.push(self.cwd.clone());
        }
        allowed.extend(self.extra_roots.iter().cloned());
        let (found, error): (Vec<String>, Option<String>) =
            match snapshot.changes_since(GIT_TIMEOUT).await {
                Ok(changes) => (
                    strays(&changes, &allowed)
                        .iter()
                        .map(|c| c.to_string())
                        .collect(),
                    None,
                ),
                Err(e) => (Vec::new(), Some(e.to_string())),
            };
        if !found.is_empty() {
            tracing::warn!(count = found.len(), "writes outside the allowed paths");
        }
        notes.push(Note::StrayWrites {
            repo: snapshot.root().to_path_buf(),
            strays: found.clone(),
            error: error.clone(),
        });
        match error {
            Some(e) => Err(format!("the git-cleanliness check failed: {e}")),
            None => Ok(found),
        }
    }
}

/// git's strays and the write watches' together. Under the native backend the write watch saw
/// every write of the CLI's process tree, wherever it went: with it whole, the check is whole
/// even outside a git work tree.
fn merge_watched(
    from_git: Result<Vec<String>, String>,
    watched: Watched,
) -> Result<Vec<String>, String> {
    if watched.spawns == 0 {
        return from_git;
    }
    match (from_git, watched.gap) {
        (Ok(found), _) => {
            let mut all: std::collections::BTreeSet<String> = found.into_iter().collect();
            all.extend(watched.strays);
            Ok(all.into_iter().collect())
        }
        (Err(_), None) => Ok(watched.strays.into_iter().collect()),
        (Err(why), Some(gap)) => Err(format!(
            "{why}; and the write watch did not see every write: {gap}"
        )),
    }
}

impl Drop for Confinement {
    fn drop(&mut self) {
        // Not finished (the caller's future was dropped): what is left still goes.
        let placeholders = std::mem::take(&mut lock(&self.shared).placeholders);
        policy::remove_placeholders(&placeholders);
    }
}

/// What a wrapping leaves to serve the spawned child.
struct Parts {
    seccomp: Option<OwnedFd>,
    egress: Option<(EgressGate, AllowList)>,
    probe: Option<InsideProbe>,
    watch: Option<PendingWatch>,
    limits: Option<Arc<LimitGroup>>,
    container: Option<String>,
    /// The directories the disk limit measures, for a container's watch.
    measured: Vec<PathBuf>,
}

/// What serves one spawned child of a confinement: the seccomp program until bubblewrap read
/// it, the egress gate and proxy, the probe, the write watch. Dropped, it ends them all: end it
/// ([`SpawnGuard::end`]) only after the child was reaped.
#[derive(Debug)]
pub struct SpawnGuard {
    backend: SandboxBackend,
    consent: bool,
    /// `[limits]`, for a container's watch.
    limit_caps: corral_process::ResourceLimits,
    bwrap: PathBuf,
    shared: Arc<Mutex<Shared>>,
    seccomp: Option<OwnedFd>,
    gate: Option<(EgressGate, AllowList)>,
    probe: Option<InsideProbe>,
    pending_watch: Option<PendingWatch>,
    watch: Option<Result<Watch, String>>,
    proxy: Option<EgressProxy>,
    egress_notes: Option<UnboundedReceiver<EgressNote>>,
    /// As a bounded command's [`AfterSpawn`]: what [`SpawnGuard::started`] came to.
    outcome: Option<Result<Vec<Note>, Stopped>>,
    /// The spawn's limit group, when `[limits]` set any.
    limits: Option<Arc<LimitGroup>>,
    /// The limit the spawn went over, once the watch saw it (and ended the spawn).
    breach: Arc<Mutex<Option<Breach>>>,
    /// The watch of the limits, from the spawn until the guard ends.
    limit_watch: Option<tokio::task::JoinHandle<()>>,
    /// Under the container backend: the container's name, removed when the guard ends.
    container: Option<String>,
    /// Under the container backend: the bound directories the disk limit measures.
    measured: Vec<PathBuf>,
}

impl SpawnGuard {
    fn new(confinement: &Confinement, backend: SandboxBackend, parts: Parts) -> Self {
        SpawnGuard {
            backend,
            consent: confinement.config.allow_degraded_native,
            limit_caps: confinement.config.limits,
            bwrap: confinement.config.bwrap.clone(),
            shared: Arc::clone(&confinement.shared),
            seccomp: parts.seccomp,
            gate: parts.egress,
            probe: parts.probe,
            pending_watch: parts.watch,
            watch: None,
            proxy: None,
            egress_notes: None,
            outcome: None,
            limits: parts.limits,
            breach: Arc::default(),
            limit_watch: None,
            container: parts.container,
            measured: parts.measured,
        }
    }

    /// Watches the spawn's limits from now on: at the first breach the whole spawn is ended
    /// (every process in its cgroups, and its process group), so that one runaway tool takes
    /// neither the machine nor a sibling task with it.
    fn watch_limits(&mut self, child: &dyn SpawnedChild) {
        if let Some(name) = self.container.clone()
            && !self.limit_caps.is_unlimited()
        {
            let slot = Arc::clone(&self.breach);
            let limits = self.limit_caps;
            let measured = self.measured.clone();
            self.limit_watch = Some(tokio::spawn(async move {
                let Some((breach, group)) =
                    crate::container::watch(name.clone(), limits, measured, LIMIT_WATCH_PERIOD)
                        .await
                else {
                    return;
                };
                tracing::warn!(limit = breach.limit.as_str(), cap = breach.cap, peak = ?breach.peak, what = %breach.what, "a container went over its limit; it is ended");
                *slot.lock().unwrap_or_else(PoisonError::into_inner) = Some(breach);
                group.kill_all();
                let _ = tokio::task::spawn_blocking(move || crate::container::kill(&name)).await;
            }));
            return;
        }
        let Some(group) = self.limits.clone() else {
            return;
        };
        let slot = Arc::clone(&self.breach);
        let pid = child.pid();
        self.limit_watch = Some(tokio::spawn(async move {
            let breach = group.watch(LIMIT_WATCH_PERIOD).await;
            tracing::warn!(limit = breach.limit.as_str(), cap = breach.cap, peak = ?breach.peak, what = %breach.what, "a spawn went over its limit; it is ended");
            *slot.lock().unwrap_or_else(PoisonError::into_inner) = Some(breach);
            group.kill_all();
            let _ =
                corral_process::process_group::signal_group(pid, nix::sys::signal::Signal::SIGKILL);
        }));
    }

    /// The limit the spawn went over, if it went over one: the watch's finding, or, once the
    /// child was reaped with `exit`, what the kernel counted (a file over the disk limit ends
    /// its writer with `SIGXFSZ`). Ask before [`SpawnGuard::end`].
    pub fn limit_breach(&self, exit: Option<ExitInfo>) -> Option<Breach> {
        if let Some(found) = self
            .breach
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
        {
            return Some(found);
        }
        if let (Some(name), Some(cap), true) = (
            &self.container,
            self.limit_caps.memory,
            crate::container::cgroup_limits_enforced(),
        ) {
            // The watch may miss a hog the kernel kills within its first look (the cgroup goes
            // with the container). podman passes on the container's end: exit 137 is its first
            // process killed by SIGKILL, which nothing of Corral's sends into a container (the
            // kill ladder stops the client with SIGTERM, forwarded, then SIGKILL on the client
            // itself, a signal and not an exit code), so with a memory limit it is the kernel's
            // OOM kill; podman's own `OOMKilled` is asked too.
            let killed = exit.is_some_and(|e| e.code == Some(137))
                || crate::container::oom_killed(name) == Some(true);
            if killed {
                return Some(Breach {
                    limit: corral_process::Limit::Memory,
                    cap,
                    peak: None,
                    what: "the container's process was killed by SIGKILL (exit 137) under its memory limit".to_string(),
                });
            }
        }
        if let (Some(_), Some(cap)) = (&self.container, self.limit_caps.disk) {
            // podman passes on its first process's end as 128 + the signal: a file over the
            // `--ulimit fsize` cap ends its writer with SIGXFSZ where it is not ignored.
            if exit.is_some_and(|e| e.code == Some(128 + libc::SIGXFSZ)) {
                return Some(Breach {
                    limit: corral_process::Limit::Disk,
                    cap,
                    peak: None,
                    what: "a file grew past the disk limit (SIGXFSZ)".to_string(),
                });
            }
            // The bound directories are the host's: measured after the end as well, for a
            // container that ended before the watch's first look.
            if let Some(breach) = corral_process::limits::disk_breach(cap, &self.measured) {
                return Some(breach);
            }
        }
        if let Some(found) = self
            .breach
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
        {
            return Some(found);
        }
        let group = self.limits.as_ref()?;
        match exit {
            Some(exit) => group.breach_by_exit(exit),
            None => group.breach(),
        }
    }

    /// What the spawn's limit group used, when `[limits]` set any.
    pub fn limit_usage(&self) -> Option<Usage> {
        self.limits.as_ref().map(|g| g.usage())
    }

    /// Right after the spawn: starts the write watch, opens the way out of a confined sandbox
    /// and checks the sandbox from inside, then lets the program run. When the way out cannot
    /// be opened, or something asked for did not hold inside and the user did not consent to
    /// run degraded, the sandbox is killed before its program ran.
    pub async fn started(&mut self, child: &mut dyn SpawnedChild) -> Result<Vec<Note>, Stopped> {
        let mut notes = Vec::new();
        self.watch_limits(child);
        // bubblewrap holds its own copy of the seccomp program's descriptor now.
        self.seccomp = None;
        if let Some(pending) = self.pending_watch.take() {
            let started = pending.start();
            if let Err(why) = &started {
                tracing::warn!(why = %why, "the native backend's write watch is not running");
            }
            notes.push(Note::WriteWatchStarted {
                error: started.as_ref().err().cloned(),
            });
            self.watch = Some(started);
        }
        if let Some(probe) = self.probe.as_mut() {
            probe.spawned();
        }
        // The probe cannot report before bubblewrap releases it, after the way out is open; a
        // report that comes first says that what was spawned is not holding the program as
        // bubblewrap does, so it is judged at once instead of waiting for a status that never
        // comes. A sandbox that ended before either (its report pipe closed) is left to the way
        // out's own error, which says why.
        let mut early = None;
        if let Some((gate, allow)) = self.gate.take() {
            let opening = open_egress(gate, allow);
            tokio::pin!(opening);
            let opened = match self.probe.as_mut() {
                Some(waiting) => tokio::select! {
                    biased;
                    opened = &mut opening => Some(opened),
                    report = waiting.read_report() => match report {
                        Ok(text) => {
                            early = Some(Ok(text));
                            None
                        }
                        Err(_) => Some(opening.await),
                    },
                },
                None => Some(opening.await),
            };
            match opened {
                Some(Ok((proxy, note, receiver))) => {
                    notes.push(note);
                    self.proxy = Some(proxy);
                    self.egress_notes = Some(receiver);
                }
                Some(Err(refusal)) => {
                    kill(child).await;
                    return Err(Stopped { notes, refusal });
                }
                None => {}
            }
        }
        if let Some(mut probe) = self.probe.take() {
            let report = match early {
                Some(report) => report,
                None => {
                    let timeout = probe.timeout();
                    tokio::time::timeout(timeout, probe.read_report())
                        .await
                        .unwrap_or_else(|_| Err(format!("no report within {timeout:?}")))
                }
            };
            // Reported (or ended): bubblewrap has bound the protected paths by now.
            probe.bound();
            let netns = self.proxy.as_ref().and_then(|p| p.sandbox_netns);
            let unconfirmed = self.judge(&probe, report, netns, &mut notes);
            if !unconfirmed.is_empty() && !self.consent {
                kill(child).await;
                return Err(Stopped {
                    notes,
                    refusal: Refusal {
                        backend: self.backend,
                        reason: "checked from inside before the CLI ran, the sandbox did not hold; it was stopped".to_string(),
                        unenforced: unconfirmed,
                        hint: match self.backend {
                            SandboxBackend::Container => format!(
                                "make sure {} is podman itself and runs containers here (corral doctor), or pass --allow-degraded-native (setting sandbox.allow_degraded_native = true) to run without these guarantees",
                                crate::podman::PODMAN
                            ),
                            SandboxBackend::Bubblewrap | SandboxBackend::Native => format!(
                                "make sure sandbox.bwrap ({}) is bubblewrap itself and can make user namespaces here, or pass --allow-degraded-native (setting sandbox.allow_degraded_native = true) to run without these guarantees",
                                self.bwrap.display()
                            ),
                        },
                    },
                });
            }
            if let Err(e) = probe.release() {
                tracing::warn!(error = %e, "the sandbox probe could not be released");
            }
        }
        Ok(notes)
    }

    /// Judges the probe's report: the attestation keeps only what it confirmed, and says what
    /// the probe saw. Returns what was asked for and did not hold.
    fn judge(
        &self,
        probe: &InsideProbe,
        report: Result<String, String>,
        netns: Option<u64>,
        notes: &mut Vec<Note>,
    ) -> Vec<Unenforced> {
        let mut shared = lock(&self.shared);
        let requested: Vec<Guarantee> = shared
            .attestation
            .as_ref()
            .map(|a| a.requested.clone())
            .unwrap_or_default();
        let (check, unconfirmed) = probe.judge(report, &requested, netns);
        if let Some(attestation) = shared.attestation.as_mut() {
            attestation
                .enforced
                .retain(|g| !unconfirmed.iter().any(|u| u.guarantee == *g));
            for u in &unconfirmed {
                if !attestation
                    .not_enforced
                    .iter()
                    .any(|n| n.guarantee == u.guarantee)
                {
                    attestation.not_enforced.push(u.clone());
                }
            }
            if attestation.checked_inside.is_none() || !unconfirmed.is_empty() {
                attestation.checked_inside = Some(check.clone());
            }
            if !unconfirmed.is_empty() && self.consent {
                attestation.consent = Some("allow_degraded_native".to_string());
            }
        }
        notes.push(Note::SandboxChecked {
            seen: check,
            not_confirmed: unconfirmed.clone(),
        });
        unconfirmed
    }

    /// The proxy's refusals and failures while the child runs, for the caller's record; taken
    /// once.
    pub fn egress_notes(&mut self) -> Option<UnboundedReceiver<EgressNote>> {
        self.egress_notes.take()
    }

    /// As a bounded command's [`AfterSpawn`]: what [`SpawnGuard::started`] came to, taken
    /// once.
    pub fn take_outcome(&mut self) -> Option<Result<Vec<Note>, Stopped>> {
        self.outcome.take()
    }

    /// After the child was reaped: closes the way out, stops the write watch and adds what it
    /// saw to the confinement's stray writes. Returns what to record.
    pub fn end(mut self) -> Vec<Note> {
        if let Some(watch) = self.limit_watch.take() {
            watch.abort();
        }
        if let Some(name) = self.container.take() {
            crate::container::remove(&name);
        }
        // Only now: the proxy also holds bubblewrap's status pipe open until it was reaped.
        self.proxy = None;
        if let Some(mut unread) = self.egress_notes.take() {
            while let Ok(note) = unread.try_recv() {
                tracing::info!(?note, "egress proxy");
            }
        }
        let Some(watch) = self.watch.take() else {
            return Vec::new();
        };
        let mut shared = lock(&self.shared);
        let watched = &mut shared.watched;
        watched.spawns += 1;
        let seen = match watch {
            Ok(watch) => watch.finish(),
            Err(why) => {
                watched.gap.get_or_insert(why);
                return Vec::new();
            }
        };
        if let Some(e) = &seen.error {
            watched.gap.get_or_insert(e.clone());
        }
        if seen.more > 0 {
            watched.strays.insert(format!(
                "... and {} more writes outside the allowed paths",
                seen.more
            ));
        }
        watched.strays.extend(seen.strays.iter().cloned());
        vec![Note::WriteWatch {
            calls: seen.calls,
            strays: seen.strays,
            more: seen.more,
            error: seen.error,
        }]
    }
}

impl Drop for SpawnGuard {
    fn drop(&mut self) {
        // Not ended (the caller's future was dropped): a container outlives its client.
        if let Some(name) = self.container.take() {
            crate::container::remove(&name);
        }
    }
}

#[async_trait::async_trait]
impl AfterSpawn for SpawnGuard {
    async fn started(&mut self, child: &mut dyn SpawnedChild) -> bool {
        let outcome = SpawnGuard::started(self, child).await;
        let go_on = outcome.is_ok();
        self.outcome = Some(outcome);
        go_on
    }
}

/// Opens a confined sandbox's way out; the note to record, and the proxy's reports.
async fn open_egress(
    gate: EgressGate,
    allow: AllowList,
) -> Result<(EgressProxy, Note, UnboundedReceiver<EgressNote>), Refusal> {
    let (tx, receiver) = tokio::sync::mpsc::unbounded_channel();
    let rules = allow.rules().to_vec();
    match gate.open(allow, tx).await {
        Ok(proxy) => {
            let note = Note::EgressOpened {
                proxy: crate::egress::proxy_address(),
                allow: rules,
                netns: proxy.sandbox_netns,
                setup: proxy.setup,
                reported: proxy.reported,
            };
            Ok((proxy, note, receiver))
        }
        Err(e) => Err(Refusal {
            backend: SandboxBackend::Bubblewrap,
            reason: format!(
                "its way out could not be opened ({e}); the sandbox was stopped before the CLI ran"
            ),
            unenforced: vec![Unenforced {
                guarantee: Guarantee::EgressConfined,
                why: "the allow-list proxy is not listening inside the sandbox".to_string(),
            }],
            hint: "set sandbox.network = \"host\" (unconfined) or \"none\" (no network) to run without the allow-list proxy".to_string(),
        }),
    }
}

/// Kills a sandbox whose program must not run, and waits a little for it.
async fn kill(child: &mut dyn SpawnedChild) {
    let _ =
        corral_process::process_group::signal_group(child.pid(), nix::sys::signal::Signal::SIGKILL);
    let _ = tokio::time::timeout(KILLED_WAIT, child.wait()).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn watched(strays: &[&str], gap: Option<&str>) -> Watched {
        Watched {
            spawns: 1,
            strays: strays.iter().map(|s| (*s).to_string()).collect(),
            gap: gap.map(str::to_string),
        }
    }

    #[test]
    fn the_watch_completes_git_and_stands_in_for_it_only_when_whole() {
        let git = || Ok(vec!["modified /repo/README".to_string()]);
        assert_eq!(merge_watched(git(), Watched::default()), git());
        assert_eq!(
            merge_watched(
                git(),
                watched(&["added /home/me/x"], Some("listener failed"))
            ),
            Ok(vec![
                "added /home/me/x".to_string(),
                "modified /repo/README".to_string()
            ])
        );
        let no_git = || Err("not in a git work tree".to_string());
        assert_eq!(
            merge_watched(no_git(), watched(&["added /home/me/x"], None)),
            Ok(vec!["added /home/me/x".to_string()])
        );
        assert_eq!(
            merge_watched(no_git(), watched(&[], Some("listener failed"))),
            Err(
                "not in a git work tree; and the write watch did not see every write: listener failed"
                    .to_string()
            )
        );
        // No spawn ran watched: git's answer, even when it is "not checked".
        assert_eq!(merge_watched(no_git(), Watched::default()), no_git());
    }
}
