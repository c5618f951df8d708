//! The one sandbox wrapping a CLI's line (`cli`) and a caller's command (`command`) both go
//! through, in one order: the program resolved on the child's `PATH`, what must stay read-only
//! inside the writable trees locked and given placeholders, the caller's own read-only paths
//! (`Frame::after_placeholders`), the egress gate's environment, bubblewrap's arguments, and the
//! probe that checks the sandbox from inside, holding the binding locks until its report, put
//! before the program.
//!
//! What differs between a CLI and a command is only what they hand in: which trees are
//! writable, which paths are protected, and what else is bound read-only (a run's record in its
//! run directory, a command's record in its tree).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use corral_ports::Permissions;

use crate::egress::{EgressGate, ProxyHonour};
use crate::error::WrapError;
use crate::inside::{InsideProbe, Targets};
use crate::policy::{self, HomePolicy, Paths, Placeholder, SandboxConfig};

/// What one command line is wrapped in, in plain values.
pub(crate) struct Frame<'a> {
    /// The sandbox settings.
    pub config: &'a SandboxConfig,
    /// What the program may do.
    pub permissions: &'a Permissions,
    /// The working directory.
    pub cwd: &'a Path,
    /// The run directory (a command's private temporary directory), writable.
    pub output_dir: &'a Path,
    /// Further trees the program may write.
    pub extra_roots: &'a [PathBuf],
    /// The CLI's own state paths, writable.
    pub state: &'a [PathBuf],
    /// The private `TMPDIR` (already in the child's environment).
    pub tmp: &'a Path,
    /// With the network confined to the allow-list: the gate, and how the program honours a
    /// proxy.
    pub egress: Option<(&'a EgressGate, ProxyHonour)>,
    /// The program, as the caller named it.
    pub program: &'a Path,
    /// Its arguments.
    pub args: &'a [OsString],
    /// The environment the policy resolved (its `PATH` finds the program, its `HOME` is the
    /// home the program sees).
    pub env: &'a [(String, String)],
}

/// The arguments around the program's, and the probe that checks the sandbox from inside.
#[derive(Debug)]
pub(crate) struct Framed {
    /// bubblewrap's arguments, the gate's, the probe's and the program's included.
    pub args: Vec<OsString>,
    /// The probe, holding the binding locks until its report.
    pub probe: InsideProbe,
}

/// Wraps `frame` (see the module documentation). `protected` is locked and given placeholders;
/// `after_placeholders` then adds what else is bound read-only (and may make placeholders of its
/// own). Every placeholder made is handed to `placeholders_made` as soon as they all exist, so
/// that the caller removes them whatever happens next. `env` (the child's, as sent) gets the
/// proxy's variables with `egress`.
pub(crate) fn wrap(
    frame: Frame<'_>,
    protected: Vec<PathBuf>,
    env: &mut Vec<(OsString, OsString)>,
    after_placeholders: impl FnOnce(&mut Vec<PathBuf>, &mut Vec<Placeholder>) -> Result<(), WrapError>,
    placeholders_made: impl FnOnce(Vec<Placeholder>),
) -> Result<Framed, WrapError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| WrapError::Io { path, source }
    };
    let prepared = prepare(&frame, protected, after_placeholders, placeholders_made)?;
    let Prepared {
        resolved,
        home,
        binding,
        protected,
    } = prepared;
    let account_home = policy::account_home();
    let mut args = match frame.egress {
        Some((gate, honour)) => {
            crate::egress::confine_env(env, honour, frame.tmp).map_err(io(frame.tmp))?;
            gate.bwrap_args()
        }
        None => Vec::new(),
    };
    args.extend(policy::bwrap_args(
        frame.config,
        frame.permissions,
        &Paths {
            cwd: frame.cwd,
            output_dir: frame.output_dir,
            extra_roots: frame.extra_roots,
            state: frame.state,
            protected: &protected,
            home: home.as_deref(),
            account_home: account_home.as_deref(),
        },
    ));
    let mut writable: Vec<&Path> = Vec::new();
    if frame.permissions.edit_files {
        writable.push(frame.cwd);
    }
    writable.push(frame.output_dir);
    writable.extend(frame.extra_roots.iter().map(PathBuf::as_path));
    writable.extend(frame.state.iter().map(PathBuf::as_path));
    let mut probe = InsideProbe::prepare(&Targets {
        writable,
        read_only_cwd: (!frame.permissions.edit_files).then_some(frame.cwd),
        hidden_home: match frame.config.home {
            HomePolicy::Isolated => home.as_deref(),
            HomePolicy::Host => None,
        },
    })
    .map_err(io(frame.output_dir))?;
    probe.hold_until_report(binding);
    args.extend(probe.argv());
    args.push(resolved.into_os_string());
    args.extend(frame.args.iter().cloned());
    Ok(Framed { args, probe })
}

/// What every wrapping does first, whatever the backend.
struct Prepared {
    /// The program, resolved on the child's `PATH`.
    resolved: PathBuf,
    /// The home the program sees.
    home: Option<PathBuf>,
    /// The binding locks, held until the sandbox has bound the protected paths.
    binding: policy::BindingLocks,
    /// Every path bound read-only inside what is writable.
    protected: Vec<PathBuf>,
}

/// The program resolved (before anything is made, so a missing one is said as such and not as
/// the sandbox's own failure), then `protected` locked and given placeholders, then the
/// caller's own read-only paths.
fn prepare(
    frame: &Frame<'_>,
    mut protected: Vec<PathBuf>,
    after_placeholders: impl FnOnce(&mut Vec<PathBuf>, &mut Vec<Placeholder>) -> Result<(), WrapError>,
    placeholders_made: impl FnOnce(Vec<Placeholder>),
) -> Result<Prepared, WrapError> {
    let var = |name: &str| {
        frame
            .env
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    };
    let resolved = corral_process::resolve_program(frame.program, var("PATH"), frame.cwd)
        .ok_or(WrapError::NotFound)?;
    let home = var("HOME").map(PathBuf::from);
    // Held until the sandbox has bound these paths (the probe's report): no other run
    // removes a placeholder of them meanwhile.
    let binding = policy::lock_for_binding(&protected);
    let mut made = policy::prepare_protected(&protected);
    let added = after_placeholders(&mut protected, &mut made);
    placeholders_made(made);
    added?;
    Ok(Prepared {
        resolved,
        home,
        binding,
        protected,
    })
}

/// Wraps `frame` for the container backend (`container`), after the same first steps as
/// [`wrap`]: podman's arguments, the container named `name`, and the probe that checks it from
/// inside, holding the binding locks until its report as under bubblewrap (podman binds what
/// exists when it starts). `hold`: the program is held for the way out first, so the probe's
/// pipes come after the gate's.
pub(crate) fn wrap_in_container(
    frame: Frame<'_>,
    protected: Vec<PathBuf>,
    name: &str,
    env: &[(OsString, OsString)],
    after_placeholders: impl FnOnce(&mut Vec<PathBuf>, &mut Vec<Placeholder>) -> Result<(), WrapError>,
    placeholders_made: impl FnOnce(Vec<Placeholder>),
) -> Result<Framed, WrapError> {
    let Prepared {
        resolved,
        home,
        binding,
        protected,
    } = prepare(&frame, protected, after_placeholders, placeholders_made)?;
    let io = |source| WrapError::Io {
        path: frame.cwd.to_path_buf(),
        source,
    };
    let mut writable: Vec<&Path> = vec![frame.output_dir, frame.tmp];
    writable.extend(frame.extra_roots.iter().map(PathBuf::as_path));
    let mut probed = writable.clone();
    probed.extend(frame.state.iter().map(PathBuf::as_path));
    if frame.permissions.edit_files {
        probed.push(frame.cwd);
    }
    let first_fd = crate::container::FIRST_FD + i32::from(frame.egress.is_some());
    let mut probe = InsideProbe::prepare_in_container(
        &Targets {
            writable: probed,
            read_only_cwd: (!frame.permissions.edit_files).then_some(frame.cwd),
            hidden_home: match frame.config.home {
                HomePolicy::Isolated => home.as_deref(),
                HomePolicy::Host => None,
            },
        },
        first_fd,
    )
    .map_err(io)?;
    let args = crate::container::podman_args(&crate::container::ContainerLine {
        config: frame.config,
        name,
        cwd: frame.cwd,
        cwd_writable: frame.permissions.edit_files,
        writable,
        output_dir: frame.output_dir,
        protected: &protected,
        home: home.as_deref(),
        state: frame.state,
        env_names: env.iter().filter_map(|(k, _)| k.to_str()).collect(),
        hold: frame.egress.is_some(),
        probe: probe.argv(),
        program: &resolved,
        args: frame.args,
    })
    .map_err(io)?;
    probe.hold_until_report(binding);
    Ok(Framed { args, probe })
}
