//! A caller's short command (a sprint's check, its gates, its setup step) wrapped as an agent's
//! CLI is: under bubblewrap with the same arguments (the rest of the file system read-only, the
//! working tree's `.git` and multi-linked files read-only, the user's other credentials hidden),
//! the seccomp filter, a private `TMPDIR`, the probe that checks the sandbox from inside before
//! the command runs, and the network as the settings say: with `allowlist`, the egress gate and
//! Corral's proxy, which serves the user's `sandbox.network_allow` rules only (a command gets
//! none of a provider's model endpoints; docs/security.md).
//!
//! Reached only through [`crate::Confinement`], which plans the command's sandbox and serves
//! the gate and the probe once the command was spawned.

use std::ffi::OsString;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};

use corral_ports::{Permissions, SandboxBackend};

use crate::egress::{AllowList, EgressGate, NetworkPolicy, ProxyHonour};
use crate::error::WrapError;
use crate::inside::InsideProbe;
use crate::policy::{self, Placeholder, SandboxConfig};
use crate::wrap::Frame;

/// One command line to confine, with its resolved environment.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CommandLine<'a> {
    /// The program, as the caller named it (a path, or a name on the environment's `PATH`).
    pub program: &'a Path,
    /// Its arguments.
    pub args: &'a [OsString],
    /// The environment the policy resolved, the caller's variables included.
    pub env: &'a [(String, String)],
    /// The working directory, writable inside the sandbox.
    pub cwd: &'a Path,
    /// Directories inside the working directory that stay read-only (Corral's record).
    pub read_only: &'a [PathBuf],
}

/// A confined command line: what to spawn, and what serves it once spawned.
#[derive(Debug)]
pub(crate) struct WrappedCommand {
    /// The program to start (bubblewrap, or the command itself under the native backend).
    pub program: PathBuf,
    /// Its arguments.
    pub args: Vec<OsString>,
    /// The child's complete environment.
    pub env: Vec<(OsString, OsString)>,
    /// Descriptors the child keeps (the seccomp program, the gate's and the probe's pipes).
    pub inherit_fds: Vec<RawFd>,
    /// Under bubblewrap: the seccomp program, open until bubblewrap read it.
    pub seccomp: Option<OwnedFd>,
    /// With egress confined to the allow-list: the gate and the user's allow-list.
    pub egress: Option<(EgressGate, AllowList)>,
    /// In a sandbox (bubblewrap, a container): the probe that checks it from inside.
    pub probe: Option<InsideProbe>,
    /// Under the container backend: the container's name, removed once the command ended.
    pub container: Option<String>,
}

/// Wraps `command` under `backend` (see the module documentation). The command's private
/// temporary directory is made into `tmp` (kept by the caller until the command ended), and
/// the placeholders made are handed to `placeholders_made` as soon as they exist.
pub(crate) fn wrap_command(
    backend: SandboxBackend,
    config: &SandboxConfig,
    command: CommandLine<'_>,
    tmp: &mut Option<PrivateTmp>,
    placeholders_made: impl FnOnce(Vec<Placeholder>),
) -> Result<WrappedCommand, WrapError> {
    let permissions = Permissions {
        edit_files: true,
        ..Permissions::default()
    };
    let mut env: Vec<(OsString, OsString)> = command
        .env
        .iter()
        .map(|(k, v)| (k.into(), v.into()))
        .collect();
    let program = match backend {
        SandboxBackend::Native => {
            return Ok(WrappedCommand {
                program: command.program.to_path_buf(),
                args: command.args.to_vec(),
                env,
                inherit_fds: Vec::new(),
                seccomp: None,
                egress: None,
                probe: None,
                container: None,
            });
        }
        SandboxBackend::Bubblewrap | SandboxBackend::Container => command.program,
    };
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| WrapError::Io { path, source }
    };
    let tmp = match tmp {
        Some(made) => made.path.clone(),
        None => {
            let made = PrivateTmp::create().map_err(io(&std::env::temp_dir()))?;
            tmp.insert(made).path.clone()
        }
    };
    env.retain(|(k, _)| k != "TMPDIR");
    env.push(("TMPDIR".into(), tmp.clone().into_os_string()));
    // As for an agent: the work tree's repository and any file with another name elsewhere
    // stay read-only inside the writable tree.
    let mut protected = policy::git_paths(command.cwd);
    protected.extend(policy::multi_link_files(&[command.cwd]));
    if backend == SandboxBackend::Container {
        let name = crate::container::container_name();
        // The user's allow-list only, through the proxy, as under bubblewrap.
        let gate = match config.network {
            NetworkPolicy::Allowlist => {
                crate::egress::confine_env(&mut env, ProxyHonour::Environment, &tmp)
                    .map_err(io(&tmp))?;
                Some(EgressGate::for_container(&name).map_err(io(&tmp))?)
            }
            NetworkPolicy::Host | NetworkPolicy::None => None,
        };
        let framed = crate::wrap::wrap_in_container(
            Frame {
                config,
                permissions: &permissions,
                cwd: command.cwd,
                output_dir: &tmp,
                extra_roots: &[],
                state: &[],
                tmp: &tmp,
                egress: gate.as_ref().map(|g| (g, ProxyHonour::Environment)),
                program,
                args: command.args,
                env: command.env,
            },
            protected,
            &name,
            &env,
            |protected, _| {
                protected.extend(record_in_tree(&command));
                Ok(())
            },
            placeholders_made,
        )?;
        crate::podman::add_own_env(&mut env);
        // The gate's pipe first (descriptor 3), then the probe's.
        let mut given: Vec<(RawFd, bool)> = gate
            .as_ref()
            .map(EgressGate::container_fds)
            .unwrap_or_default()
            .into_iter()
            .map(|fd| (fd, false))
            .collect();
        given.extend(framed.probe.container_fds());
        let podman = PathBuf::from(crate::podman::PODMAN);
        let (program, args) =
            crate::container::starter(&podman, &given, framed.args).map_err(io(&tmp))?;
        let egress = gate.map(|gate| (gate, AllowList::new(config.network_allow.iter().cloned())));
        return Ok(WrappedCommand {
            program,
            args,
            env,
            inherit_fds: given.iter().map(|&(fd, _)| fd).collect(),
            seccomp: None,
            egress,
            probe: Some(framed.probe),
            container: Some(name),
        });
    }
    let egress = match config.network {
        NetworkPolicy::Allowlist => Some((
            EgressGate::new().map_err(io(&tmp))?,
            AllowList::new(config.network_allow.iter().cloned()),
        )),
        NetworkPolicy::Host | NetworkPolicy::None => None,
    };
    let seccomp = crate::seccomp::program_fd().map_err(io(&tmp))?;
    let framed = crate::wrap::wrap(
        Frame {
            config,
            permissions: &permissions,
            cwd: command.cwd,
            output_dir: &tmp,
            extra_roots: &[],
            state: &[],
            tmp: &tmp,
            egress: egress
                .as_ref()
                .map(|(gate, _)| (gate, ProxyHonour::Environment)),
            program,
            args: command.args,
            env: command.env,
        },
        protected,
        &mut env,
        |protected, _| {
            protected.extend(record_in_tree(&command));
            Ok(())
        },
        placeholders_made,
    )?;
    let mut inherit_fds = egress
        .as_ref()
        .map(|(gate, _)| gate.child_fds())
        .unwrap_or_default();
    inherit_fds.push(seccomp.as_raw_fd());
    inherit_fds.extend(framed.probe.child_fds());
    let mut args: Vec<OsString> = vec!["--seccomp".into(), seccomp.as_raw_fd().to_string().into()];
    args.extend(framed.args);
    let probe = framed.probe;
    Ok(WrappedCommand {
        program: config.bwrap.clone(),
        args,
        env,
        inherit_fds,
        seccomp: Some(seccomp),
        egress,
        probe: Some(probe),
        container: None,
    })
}

/// Corral's record in the tree: only what exists can be bound (nothing to protect otherwise),
/// and never made here, so no placeholder is left in the user's tree.
fn record_in_tree(command: &CommandLine<'_>) -> Vec<PathBuf> {
    command
        .read_only
        .iter()
        .filter(|p| p.starts_with(command.cwd) && p.is_dir())
        .cloned()
        .collect()
}

/// A sandboxed command's private temporary directory (0700), removed when dropped.
#[derive(Debug)]
pub(crate) struct PrivateTmp {
    path: PathBuf,
}

impl PrivateTmp {
    /// Where it is.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    fn create() -> std::io::Result<Self> {
        let path = std::env::temp_dir().join(format!(
            "corral-command-{}-{:016x}",
            std::process::id(),
            fastrand::u64(..)
        ));
        policy::create_private_dir(&path)?;
        Ok(PrivateTmp { path })
    }
}

impl Drop for PrivateTmp {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}
