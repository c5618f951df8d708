//! A caller's short command (a sprint's check, its gates, its setup step) confined as an agent's
//! run is: planned by the same code (`policy::plan` with the run's permissions, the working
//! directory writable), refused where no sandbox is usable unless the user consented to the
//! native backend, and under bubblewrap wrapped with the same arguments: the rest of the file
//! system read-only, the working tree's `.git` and multi-linked files read-only, the user's other
//! credentials hidden, the seccomp filter, a private `TMPDIR`, and the network as the settings
//! say, except that the allow-list opens nothing for a command (it names the provider's model
//! endpoints, which a check has no business reaching; docs/security.md).
//!
//! The caller resolves the environment, spawns what [`wrap_command`] returns through
//! `corral-process` and drops the [`CommandSandbox`] once the command ended: that removes what
//! the sandbox left (the placeholders, the private temporary directory, the seccomp program).

use std::ffi::OsString;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};

use corral_ports::{Permissions, SandboxBackend};

use crate::policy::{self, Paths, SandboxConfig};

/// One command line to confine, with its resolved environment.
#[derive(Debug, Clone, Copy)]
pub struct CommandLine<'a> {
    /// The program, as the caller named it (a path, or a name on the environment's `PATH`).
    pub program: &'a str,
    /// Its arguments.
    pub args: &'a [String],
    /// The environment the policy resolved, the caller's variables included.
    pub env: &'a [(String, String)],
    /// The working directory, writable inside the sandbox.
    pub cwd: &'a Path,
    /// Directories inside the working directory that stay read-only (Corral's record).
    pub read_only: &'a [PathBuf],
}

/// Why a command was not confined.
#[derive(Debug, thiserror::Error)]
pub enum WrapError {
    /// No sandbox is usable and the user did not consent to the native backend. Not retryable
    /// as configured.
    #[error("{0}")]
    Refused(String),
    /// The program is not on the command's `PATH`. Not retryable as configured.
    #[error("not found on the command's PATH")]
    NotFound,
    /// Preparing the sandbox failed (the temporary directory, the seccomp program). Retryable:
    /// a transient condition of the host.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// A confined command line: what to spawn, and what to drop once it ended.
#[derive(Debug)]
pub struct WrappedCommand {
    /// The program to start (bubblewrap, or the command itself under the native backend).
    pub program: PathBuf,
    /// Its arguments.
    pub args: Vec<OsString>,
    /// The child's complete environment.
    pub env: Vec<(OsString, OsString)>,
    /// Descriptors the child keeps (the seccomp program); open as long as [`Self::sandbox`].
    pub inherit_fds: Vec<RawFd>,
    /// What the sandbox holds until the command ended.
    pub sandbox: CommandSandbox,
}

/// What a command's sandbox holds while the command runs; dropping it removes the placeholders,
/// the private temporary directory and the seccomp program.
#[derive(Debug, Default)]
pub struct CommandSandbox {
    seccomp: Option<OwnedFd>,
    tmp: Option<PrivateTmp>,
    placeholders: Vec<policy::Placeholder>,
}

impl Drop for CommandSandbox {
    fn drop(&mut self) {
        // bubblewrap read the program at its start; the descriptor and the directory go only
        // now, after it ended.
        self.seccomp.take();
        self.tmp.take();
        policy::remove_placeholders(&self.placeholders);
    }
}

/// Confines `command` as `config` says; see the module documentation.
pub fn wrap_command(
    config: &SandboxConfig,
    command: CommandLine<'_>,
) -> Result<WrappedCommand, WrapError> {
    let permissions = Permissions {
        edit_files: true,
        ..Permissions::default()
    };
    let plan = policy::plan(config, &permissions, policy::bubblewrap_usable)
        .map_err(|refusal| WrapError::Refused(format!("{}; {}", refusal.reason, refusal.hint)))?;
    let mut env: Vec<(OsString, OsString)> = command
        .env
        .iter()
        .map(|(k, v)| (k.into(), v.into()))
        .collect();
    let args = || command.args.iter().map(OsString::from);
    match plan.backend {
        SandboxBackend::Native => Ok(WrappedCommand {
            program: PathBuf::from(command.program),
            args: args().collect(),
            env,
            inherit_fds: Vec::new(),
            sandbox: CommandSandbox::default(),
        }),
        SandboxBackend::Bubblewrap => {
            let var = |name: &str| {
                command
                    .env
                    .iter()
                    .find(|(k, _)| k == name)
                    .map(|(_, v)| v.as_str())
            };
            let program = corral_process::resolve_program(
                Path::new(command.program),
                var("PATH"),
                command.cwd,
            )
            .ok_or(WrapError::NotFound)?;
            let home = var("HOME").map(PathBuf::from);
            let account_home = policy::account_home();
            let mut sandbox = CommandSandbox::default();
            sandbox.tmp = Some(PrivateTmp::create()?);
            let tmp = sandbox
                .tmp
                .as_ref()
                .map(|t| t.path.clone())
                .unwrap_or_default();
            env.retain(|(k, _)| k != "TMPDIR");
            env.push(("TMPDIR".into(), tmp.clone().into_os_string()));
            // As for an agent: the work tree's repository and any file with another name
            // elsewhere stay read-only inside the writable tree.
            let mut protected = policy::git_paths(command.cwd);
            protected.extend(policy::multi_link_files(&[command.cwd]));
            sandbox.placeholders = policy::prepare_protected(&protected);
            // Corral's record in the tree: only what exists can be bound (nothing to protect
            // otherwise), and never made here, so no placeholder is left in the user's tree.
            protected.extend(
                command
                    .read_only
                    .iter()
                    .filter(|p| p.starts_with(command.cwd) && p.is_dir())
                    .cloned(),
            );
            let seccomp = crate::seccomp::program_fd()?;
            let seccomp_fd = seccomp.as_raw_fd();
            sandbox.seccomp = Some(seccomp);
            let mut wrapped: Vec<OsString> =
                vec!["--seccomp".into(), seccomp_fd.to_string().into()];
            wrapped.extend(policy::bwrap_args(
                config,
                &permissions,
                &Paths {
                    cwd: command.cwd,
                    output_dir: &tmp,
                    extra_roots: &[],
                    state: &[],
                    protected: &protected,
                    home: home.as_deref(),
                    account_home: account_home.as_deref(),
                },
            ));
            wrapped.push(program.into_os_string());
            wrapped.extend(args());
            Ok(WrappedCommand {
                program: config.bwrap.clone(),
                args: wrapped,
                env,
                inherit_fds: vec![seccomp_fd],
                sandbox,
            })
        }
    }
}

/// A sandboxed command's private temporary directory (0700), removed when dropped.
#[derive(Debug)]
struct PrivateTmp {
    path: PathBuf,
}

impl PrivateTmp {
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
