//! Launching a CLI, the same way for headless attempts and interactive handoffs: the adapter's
//! command becomes a spawn request in four steps (the environment policy applied to the
//! engine's environment setting with the run token added; the run's sandbox wrapped around it by
//! its `corral_sandbox::Confinement`; the argv budget checked; the spawn), and the spawn is
//! recorded in the execution log whether it starts or not. Right after the spawn the sandbox's
//! guard opens its way out and checks it from inside; what it notes goes to the log.

use std::path::Path;

use corral_ports::{ProviderError, SessionId};
use corral_sandbox::{CliNeeds, CommandLine, SpawnGuard, Stopped, WrapError};

use crate::adapter::{ChildEnv, CommandSpec};
use crate::log::Record;
use crate::run::RunScope;
use corral_process::argv::{ArgvPlatform, WINDOWS_CREATE_PROCESS_MAX, check_argv, env_block_bytes};
use corral_process::env::{EnvPolicy, ResolvedEnv};
use corral_process::process_group::RUN_TOKEN_VAR;
use corral_process::spawn::{SpawnRequest, SpawnedChild, StdinMode};

/// A CLI ready to start.
#[derive(Debug)]
pub(crate) struct Launch {
    /// What the spawner gets.
    pub request: SpawnRequest,
    /// The environment the policy resolved (names go to the log, never values).
    pub env: ResolvedEnv,
    /// The measured command-line size.
    pub argv_bytes: usize,
    /// What serves the child once spawned (see `corral_sandbox::SpawnGuard`).
    pub guard: SpawnGuard,
}

/// A started CLI, and what serves it until it was reaped.
pub(crate) struct Spawned {
    /// The child (bubblewrap, or the CLI itself).
    pub child: Box<dyn SpawnedChild>,
    /// The sandbox's guard: end it with [`RunScope::spawn_ended`] once the child was reaped.
    pub guard: SpawnGuard,
}

/// Builds the spawn request for `spec`: the environment policy with the adapter's profile and
/// variables, the run `token` and `extra_env` set on top; the run's sandbox wrapped around the
/// program; the argv budget checked.
pub(crate) fn launch(
    scope: &RunScope<'_>,
    spec: &CommandSpec,
    token: &str,
    stdin: StdinMode,
    extra_env: Vec<(String, String)>,
) -> Result<Launch, ProviderError> {
    let config = scope.config();
    let policy = EnvPolicy {
        inherit: config.env_inherit,
        profile: scope.adapter.env_profile(),
        allow: config.env_allow.clone(),
        set: spec
            .env_set
            .iter()
            .cloned()
            .chain([(RUN_TOKEN_VAR.to_string(), token.to_string())])
            .chain(extra_env)
            .collect(),
    };
    let env = policy.resolve(config.ambient());
    let child_env = ChildEnv::new(&env.vars);
    let not_found = |reason: String| ProviderError::CliNotFound {
        provider: scope.provider,
        program: spec.program.display().to_string(),
        reason,
    };
    let wrapped = scope
        .confinement()?
        .wrap_cli(
            CommandLine {
                program: &spec.program,
                args: &spec.args,
                env: &env.vars,
            },
            CliNeeds {
                state: scope.adapter.state_paths(&child_env),
                protected: scope.adapter.protected_paths(&child_env),
            },
            || scope.adapter.egress(&child_env),
        )
        .map_err(|e| match e {
            WrapError::NotFound => not_found(e.to_string()),
            WrapError::Io { path, source } => scope.io_error(&path, &source),
            WrapError::NotPlanned => scope.unplanned(&spec.program),
        })?;
    let mut request = wrapped.request;
    let argv_bytes = check_argv(
        request.program.as_os_str(),
        request.args.iter().map(|a| a.as_os_str()),
        env_block_bytes(
            request
                .env
                .iter()
                .map(|(k, v)| (k.as_os_str(), v.as_os_str())),
        ),
        config.argv_platform,
    )
    .map_err(|e| ProviderError::ArgvTooLong {
        provider: scope.provider,
        measured: e.measured,
        limit: e.limit,
        limit_name: e.limit_name.to_string(),
    })?;
    request.stdin = stdin;
    request.parent_death_signal = config.parent_death_signal;
    Ok(Launch {
        request,
        env,
        argv_bytes,
        guard: wrapped.guard,
    })
}

/// Starts a launched CLI and records the spawn (or why it failed) in the log, flushed; then
/// the sandbox's guard serves it (the way out opened, the check from inside) and what it notes
/// is recorded. `stdin_label` names what stdin carries (`prompt`, `continuation`, `null`,
/// `terminal`).
pub(crate) async fn spawn(
    scope: &mut RunScope<'_>,
    attempt: u32,
    launch: Launch,
    stdin_label: &str,
    resume: Option<&SessionId>,
) -> Result<Spawned, ProviderError> {
    let request = &launch.request;
    let mut child = match scope.spawner.spawn(request) {
        Ok(child) => child,
        Err(e) => {
            scope.log.record(
                attempt,
                &Record::SpawnFailed {
                    program: &request.program,
                    error: e.to_string(),
                },
            );
            scope.log.flush();
            return Err(spawn_error(scope, &request.program, &e, launch.argv_bytes));
        }
    };
    scope.log.record(
        attempt,
        &Record::Spawn {
            program: &request.program,
            args: request
                .args
                .iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect(),
            cwd: &scope.session.cwd,
            env_names: launch.env.names(),
            env_withheld: &launch.env.withheld_secrets,
            stdin: stdin_label,
            pid: child.pid(),
            resume,
            argv_bytes: launch.argv_bytes,
        },
    );
    scope.log.flush();
    tracing::debug!(
        attempt,
        pid = child.pid(),
        program = %request.program.display(),
        args = request.args.len(),
        argv_bytes = launch.argv_bytes,
        stdin = stdin_label,
        resume = resume.map(SessionId::as_str),
        "spawned"
    );
    let mut guard = launch.guard;
    match guard.started(child.as_mut()).await {
        Ok(notes) => {
            scope.record_notes(attempt, &notes);
            Ok(Spawned { child, guard })
        }
        Err(Stopped { notes, refusal }) => {
            scope.record_notes(attempt, &notes);
            let err = ProviderError::Unsandboxed {
                provider: scope.provider,
                backend: refusal.backend,
                reason: refusal.reason,
                unenforced: refusal.unenforced,
                hint: refusal.hint,
            };
            scope.log.record(
                attempt,
                &Record::Classified {
                    class: "unsandboxed",
                    detail: err.to_string(),
                },
            );
            scope.log.flush();
            Err(err)
        }
    }
}

/// The ports' error for a spawn the operating system refused.
fn spawn_error(
    scope: &RunScope<'_>,
    program: &Path,
    e: &std::io::Error,
    argv_bytes: usize,
) -> ProviderError {
    let provider = scope.provider;
    let program_name = program.display().to_string();
    let kind = e.kind();
    if kind == std::io::ErrorKind::NotFound || kind == std::io::ErrorKind::PermissionDenied {
        ProviderError::CliNotFound {
            provider,
            program: program_name,
            reason: e.to_string(),
        }
    } else if kind == std::io::ErrorKind::ArgumentListTooLong
        || kind == std::io::ErrorKind::InvalidFilename
    {
        // The budget check passed, so the system's own limit is lower than the one measured
        // against (a smaller stack limit shrinks it on Linux): name the system's limit, not the
        // measured size twice.
        let (limit, name) = match scope.config().argv_platform {
            ArgvPlatform::Linux { arg_max } => (arg_max, "ARG_MAX"),
            ArgvPlatform::Windows { .. } => (WINDOWS_CREATE_PROCESS_MAX, "CreateProcess"),
        };
        ProviderError::ArgvTooLong {
            provider,
            measured: argv_bytes,
            limit,
            limit_name: format!("{name}; the operating system refused the spawn: {e}"),
        }
    } else {
        ProviderError::SpawnFailed {
            provider,
            program: program_name,
            reason: e.to_string(),
        }
    }
}
