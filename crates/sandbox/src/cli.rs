//! An AI coding CLI's command line wrapped in bubblewrap for one attempt of a run: the CLI's
//! state paths prepared, what must stay read-only inside the writable trees (each tree's `.git`,
//! the CLI's own configuration, files with another name elsewhere, Corral's record in the run
//! directory) locked and given placeholders, the run's private `TMPDIR`, the egress gate's and
//! bubblewrap's arguments, the CLI resolved on the child's `PATH`, and the probe that checks the
//! sandbox from inside put before it; the sequence itself is the one wrapping (`wrap`) a
//! command goes through too.
//!
//! [`confine_cli`] decides per backend what one attempt's spawn gets: under bubblewrap the
//! egress gate (with the network confined to the allow-list), the seccomp program and the
//! wrapping above; under the native backend the write watch (unless the user turned it off).
//! Reached only through [`crate::Confinement`], which gives plain values (the adapter's answers
//! included) and hands the gate, the probe and the watch to the spawn's guard.

use std::ffi::OsString;
use std::fs;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use corral_ports::{Permissions, SandboxBackend};
use corral_process::PreExecHook;

use crate::egress::{AllowList, EgressGate, EgressNeeds, NetworkPolicy, ProxyHonour};
use crate::error::WrapError;
use crate::inside::InsideProbe;
use crate::policy::{self, Placeholder, SandboxConfig};
use crate::wrap::{Frame, Framed};
use crate::write_watch::PendingWatch;

/// One attempt's CLI and the run it belongs to, in plain values.
#[derive(Debug)]
pub(crate) struct CliLine<'a> {
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
    /// The CLI's own state paths (its adapter's answer), writable.
    pub state: &'a [PathBuf],
    /// The CLI's own configuration (its adapter's answer), read-only inside what is writable.
    pub protected: Vec<PathBuf>,
    /// Files with another name elsewhere, read-only (the plan's).
    pub read_only_links: &'a [PathBuf],
    /// Whether the raw stream files are made in the run directory's `raw/` after the spawn.
    pub raw_stream_files: bool,
    /// The CLI, as its adapter names it.
    pub program: &'a Path,
    /// Its arguments.
    pub args: &'a [OsString],
    /// The environment the policy resolved.
    pub env: &'a [(String, String)],
}

/// Wraps `line` for bubblewrap through the one wrapping (`wrap`); `env` (the child's, as sent)
/// gets the private `TMPDIR` and, with `egress`, the proxy's variables. The placeholders made
/// are handed to `placeholders_made` as soon as they exist, so that the run removes them
/// whatever happens next.
pub(crate) fn wrap_cli(
    mut line: CliLine<'_>,
    env: &mut Vec<(OsString, OsString)>,
    egress: Option<(&EgressGate, ProxyHonour)>,
    placeholders_made: impl FnOnce(Vec<Placeholder>),
) -> Result<Framed, WrapError> {
    let protected = cli_protected(&mut line);
    let tmp = private_tmpdir(line.output_dir, env)?;
    let output_dir = line.output_dir;
    let raw_stream_files = line.raw_stream_files;
    crate::wrap::wrap(
        Frame {
            config: line.config,
            permissions: line.permissions,
            cwd: line.cwd,
            output_dir,
            extra_roots: line.extra_roots,
            state: line.state,
            tmp: &tmp,
            egress,
            program: line.program,
            args: line.args,
            env: line.env,
        },
        protected,
        env,
        |protected, made| bind_record(output_dir, raw_stream_files, protected, made),
        placeholders_made,
    )
}

/// The CLI's state prepared, and what stays read-only inside what is writable: each writable
/// tree's `.git`, the CLI's own configuration, files with another name elsewhere.
fn cli_protected(line: &mut CliLine<'_>) -> Vec<PathBuf> {
    policy::prepare_state(line.state);
    let mut protected = std::mem::take(&mut line.protected);
    if line.permissions.edit_files {
        protected.extend(policy::git_paths(line.cwd));
    }
    for root in line.extra_roots {
        protected.extend(policy::git_paths(root));
    }
    protected.extend(line.read_only_links.iter().cloned());
    protected
}

/// Wraps `line` for the container backend: the same paths as under bubblewrap (`wrap_cli`),
/// bound by podman into a container named `name`.
fn wrap_cli_in_container(
    mut line: CliLine<'_>,
    env: &mut Vec<(OsString, OsString)>,
    name: &str,
    egress: Option<(&EgressGate, crate::egress::ProxyHonour)>,
    placeholders_made: impl FnOnce(Vec<Placeholder>),
) -> Result<crate::wrap::Framed, WrapError> {
    let protected = cli_protected(&mut line);
    let tmp = private_tmpdir(line.output_dir, env)?;
    if let Some((_, honour)) = egress {
        // Before podman's `-e` names are taken: the proxy's variables reach the program.
        crate::egress::confine_env(env, honour, &tmp).map_err(|source| WrapError::Io {
            path: tmp.clone(),
            source,
        })?;
    }
    let output_dir = line.output_dir;
    let raw_stream_files = line.raw_stream_files;
    let args = crate::wrap::wrap_in_container(
        Frame {
            config: line.config,
            permissions: line.permissions,
            cwd: line.cwd,
            output_dir,
            extra_roots: line.extra_roots,
            state: line.state,
            tmp: &tmp,
            egress,
            program: line.program,
            args: line.args,
            env: line.env,
        },
        protected,
        name,
        env,
        |protected, made| bind_record(output_dir, raw_stream_files, protected, made),
        placeholders_made,
    )?;
    crate::podman::add_own_env(env);
    Ok(args)
}

/// Corral's own record in the run directory, read-only to the agent (a bind mount point can be
/// neither unlinked nor renamed either). What does not exist yet is made now, as a placeholder,
/// so that the agent cannot create it first and it is bound too: the session files, written
/// once the id is known, and the copies whose presence makes Corral write the files it rewrites
/// in place (a rename over a bind mount point would detach it in the sandbox). Untouched
/// placeholders go with the sandbox. `signals.json`, its temporary files and `tmp/` stay
/// writable.
fn bind_record(
    output_dir: &Path,
    raw_stream_files: bool,
    protected: &mut Vec<PathBuf>,
    made: &mut Vec<Placeholder>,
) -> Result<(), WrapError> {
    // The stream files are made after the spawn, in `raw/`: made now, it can be bound.
    let raw = output_dir.join(corral_ports::run_dir::RAW_STREAMS_DIR);
    if raw_stream_files
        && let Err(source) = fs::create_dir(&raw)
        && source.kind() != std::io::ErrorKind::AlreadyExists
    {
        return Err(WrapError::Io { path: raw, source });
    }
    let record = policy::record_paths(output_dir);
    let missing: Vec<PathBuf> = record.iter().filter(|p| **p != raw).cloned().collect();
    made.extend(policy::prepare_protected(&missing));
    protected.extend(
        record
            .into_iter()
            .filter(|p| fs::symlink_metadata(p).is_ok()),
    );
    Ok(())
}

/// The run's private `TMPDIR` (`policy::private_tmp`), created and set in the CLI's environment,
/// for both backends; removed with the run.
fn private_tmpdir(
    output_dir: &Path,
    env: &mut Vec<(OsString, OsString)>,
) -> Result<PathBuf, WrapError> {
    let tmp = policy::private_tmp(output_dir);
    policy::create_private_dir(&tmp).map_err(|source| WrapError::Io {
        path: tmp.clone(),
        source,
    })?;
    env.retain(|(k, _)| k != "TMPDIR");
    env.push(("TMPDIR".into(), tmp.clone().into_os_string()));
    Ok(tmp)
}

/// What the sandbox adds to one attempt's spawn, and what serves the child once it started.
#[derive(Debug)]
pub(crate) struct ConfinedCli {
    /// The program to start: bubblewrap, or the CLI itself under the native backend.
    pub program: PathBuf,
    /// Its arguments.
    pub args: Vec<OsString>,
    /// Descriptors the child keeps (the gate's and the probe's pipes, the seccomp program).
    pub inherit_fds: Vec<RawFd>,
    /// What the child runs last before exec (the native write watch).
    pub pre_exec: Vec<Arc<dyn PreExecHook>>,
    /// With egress confined to the allow-list: the gate that holds the sandbox until its way
    /// out is open, and the allow-list the proxy enforces.
    pub egress: Option<(EgressGate, AllowList)>,
    /// Under bubblewrap: the seccomp program's descriptor, kept open until the spawn returned.
    pub seccomp: Option<OwnedFd>,
    /// In a sandbox (bubblewrap, a container): the probe that checks it from inside before the
    /// CLI runs.
    pub probe: Option<InsideProbe>,
    /// Under the native backend: the write watch, until the child handed over its listener.
    pub watch: Option<PendingWatch>,
    /// Under the container backend: the container's name, removed once the spawn ended.
    pub container: Option<String>,
}

/// Confines one attempt's CLI under `backend` (see the module documentation). `egress_needs` is
/// asked only when the network is confined to the allow-list.
pub(crate) fn confine_cli(
    backend: SandboxBackend,
    line: CliLine<'_>,
    egress_needs: impl FnOnce() -> EgressNeeds,
    env: &mut Vec<(OsString, OsString)>,
    placeholders_made: impl FnOnce(Vec<Placeholder>),
) -> Result<ConfinedCli, WrapError> {
    let io = |source| WrapError::Io {
        path: line.output_dir.to_path_buf(),
        source,
    };
    match backend {
        SandboxBackend::Native => {
            let watch = if line.config.watch_native_writes {
                Some(native_watch(&line, env)?)
            } else {
                None
            };
            Ok(ConfinedCli {
                program: line.program.to_path_buf(),
                args: line.args.to_vec(),
                inherit_fds: Vec::new(),
                pre_exec: watch.iter().map(PendingWatch::hook).collect(),
                egress: None,
                seccomp: None,
                probe: None,
                watch,
                container: None,
            })
        }
        SandboxBackend::Container => {
            let name = crate::container::container_name();
            // Egress confined to the allow-list: the container's program is held until the
            // supervisor has opened the proxy inside its network namespace, as under bubblewrap.
            let egress = match line.config.network {
                NetworkPolicy::Allowlist => {
                    let gate = EgressGate::for_container(&name).map_err(io)?;
                    let needs = egress_needs();
                    let allow = AllowList::new(
                        needs
                            .endpoints
                            .iter()
                            .chain(&line.config.network_allow)
                            .cloned(),
                    );
                    Some((gate, allow, needs.proxy))
                }
                NetworkPolicy::Host | NetworkPolicy::None => None,
            };
            let framed = wrap_cli_in_container(
                line,
                env,
                &name,
                egress.as_ref().map(|(gate, _, honour)| (gate, *honour)),
                placeholders_made,
            )?;
            // The gate's pipe first (descriptor 3), then the probe's.
            let mut given: Vec<(RawFd, bool)> = egress
                .as_ref()
                .map(|(gate, _, _)| gate.container_fds())
                .unwrap_or_default()
                .into_iter()
                .map(|fd| (fd, false))
                .collect();
            given.extend(framed.probe.container_fds());
            let podman = PathBuf::from(crate::podman::PODMAN);
            let (program, args) =
                crate::container::starter(&podman, &given, framed.args).map_err(io)?;
            let inherit_fds = given.iter().map(|&(fd, _)| fd).collect();
            Ok(ConfinedCli {
                program,
                args,
                inherit_fds,
                pre_exec: Vec::new(),
                egress: egress.map(|(gate, allow, _)| (gate, allow)),
                seccomp: None,
                probe: Some(framed.probe),
                watch: None,
                container: Some(name),
            })
        }
        SandboxBackend::Bubblewrap => {
            // Egress confined to the allow-list: bubblewrap holds the CLI until the supervisor
            // has opened the proxy inside the sandbox's network namespace (see `egress`).
            let egress = match line.config.network {
                NetworkPolicy::Allowlist => {
                    let gate = EgressGate::new().map_err(io)?;
                    let needs = egress_needs();
                    let allow = AllowList::new(
                        needs
                            .endpoints
                            .iter()
                            .chain(&line.config.network_allow)
                            .cloned(),
                    );
                    Some((gate, allow, needs.proxy))
                }
                NetworkPolicy::Host | NetworkPolicy::None => None,
            };
            let seccomp = crate::seccomp::program_fd().map_err(io)?;
            let bwrap = line.config.bwrap.clone();
            let wrapped = wrap_cli(
                line,
                env,
                egress.as_ref().map(|(gate, _, honour)| (gate, *honour)),
                placeholders_made,
            )?;
            let mut inherit_fds = egress
                .as_ref()
                .map(|(gate, _, _)| gate.child_fds())
                .unwrap_or_default();
            inherit_fds.extend(wrapped.probe.child_fds());
            inherit_fds.push(seccomp.as_raw_fd());
            let mut args: Vec<OsString> =
                vec!["--seccomp".into(), seccomp.as_raw_fd().to_string().into()];
            args.extend(wrapped.args);
            Ok(ConfinedCli {
                program: bwrap,
                args,
                inherit_fds,
                pre_exec: Vec::new(),
                egress: egress.map(|(gate, allow, _)| (gate, allow)),
                seccomp: Some(seccomp),
                probe: Some(wrapped.probe),
                watch: None,
                container: None,
            })
        }
    }
}

/// The native backend's write watch: the paths the CLI may write (the run directory, the
/// working directory when it may edit, the extra roots, the CLI's own state, and the run's
/// private `TMPDIR`, which the CLI gets here as it does in a sandbox, so that what honours
/// `TMPDIR` stays out of the shared `/tmp`).
fn native_watch(
    line: &CliLine<'_>,
    env: &mut Vec<(OsString, OsString)>,
) -> Result<PendingWatch, WrapError> {
    private_tmpdir(line.output_dir, env)?;
    let mut allowed = vec![line.output_dir.to_path_buf()];
    if line.permissions.edit_files {
        allowed.push(line.cwd.to_path_buf());
    }
    allowed.extend(line.extra_roots.iter().cloned());
    // What the sandbox binds read-only inside the writable paths stays named when written.
    let mut protected = line.protected.clone();
    let mut trees: Vec<&Path> = line.extra_roots.iter().map(PathBuf::as_path).collect();
    if line.permissions.edit_files {
        trees.push(line.cwd);
    }
    let mut git_dirs = Vec::new();
    for tree in trees {
        for git_dir in policy::git_paths(tree) {
            protected.extend(
                ["config", "hooks", "info", "commondir"]
                    .iter()
                    .map(|name| git_dir.join(name)),
            );
            git_dirs.push(git_dir);
        }
    }
    PendingWatch::new(allowed, line.state.to_vec(), protected, git_dirs).map_err(|source| {
        WrapError::Io {
            path: line.output_dir.to_path_buf(),
            source,
        }
    })
}
