//! Launching a CLI, the same way for headless attempts and interactive handoffs: the adapter's
//! command becomes a spawn request (the environment policy applied to the engine's environment
//! setting, the run token added, the sandbox's confinement around it (`corral_sandbox::cli`),
//! the argv budget checked), and the spawn is recorded in the execution log whether it starts or
//! not.

use std::ffi::OsString;
use std::path::Path;

use corral_ports::{Guarantee, ProviderError, SandboxBackend, SessionId, Unenforced};
use tokio::sync::mpsc::UnboundedReceiver;

use crate::adapter::{ChildEnv, CommandSpec};
use crate::log::Record;
use crate::run::RunScope;
use corral_process::argv::{ArgvPlatform, WINDOWS_CREATE_PROCESS_MAX, check_argv, env_block_bytes};
use corral_process::env::{EnvPolicy, ResolvedEnv};
use corral_process::process_group::RUN_TOKEN_VAR;
use corral_process::spawn::{SpawnRequest, SpawnedChild, StdinMode};
use corral_sandbox::egress::{AllowList, EgressGate, EgressNote, EgressProxy};
use corral_sandbox::inside::{InsideProbe, REPORT_TIMEOUT};
use corral_sandbox::policy::SandboxPlan;
use corral_sandbox::write_watch::{PendingWatch, Watch};
use corral_sandbox::{CliLine, WrapCliError};

/// A CLI ready to start.
#[derive(Debug)]
pub(crate) struct Launch {
    /// What the spawner gets.
    pub request: SpawnRequest,
    /// The environment the policy resolved (names go to the log, never values).
    pub env: ResolvedEnv,
    /// The measured command-line size.
    pub argv_bytes: usize,
    /// With egress confined to the allow-list: the gate that holds the sandbox until its way
    /// out is open, and the allow-list the proxy enforces (see `egress`).
    pub egress: Option<(EgressGate, AllowList)>,
    /// Under bubblewrap: the seccomp program's descriptor (see `seccomp`), kept open until the
    /// spawn returned.
    pub seccomp: Option<std::os::fd::OwnedFd>,
    /// Under bubblewrap: the probe that checks the sandbox from inside before the CLI runs
    /// (see `inside`).
    pub probe: Option<InsideProbe>,
    /// Under the native backend: the write watch, until the child handed over its listener
    /// (see `write_watch`).
    pub watch: Option<PendingWatch>,
}

/// A started CLI, and the way out of its sandbox when its egress is confined.
pub(crate) struct Spawned {
    /// The child (bubblewrap, or the CLI itself).
    pub child: Box<dyn SpawnedChild>,
    /// The proxy, served while this lives, and what it reports for the log.
    pub egress: Option<OpenEgress>,
    /// Under the native backend: the write watch serving the child, or why there is none.
    pub watch: Option<Result<Watch, String>>,
}

/// A confined sandbox's proxy and its reports. Drop it only after the child was reaped: it also
/// holds bubblewrap's status pipe open.
pub(crate) struct OpenEgress {
    /// Served while this lives.
    pub proxy: EgressProxy,
    /// Refusals and failures, for the execution log.
    pub notes: UnboundedReceiver<EgressNote>,
}

/// Builds the spawn request for `spec`: the environment policy with the adapter's profile and
/// variables, the run `token` and `extra_env` set on top; the sandbox `plan` wrapped around the
/// program; the argv budget checked.
pub(crate) fn launch(
    scope: &RunScope<'_>,
    plan: &SandboxPlan,
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
    let mut env_os: Vec<(OsString, OsString)> =
        env.vars.iter().map(|(k, v)| (k.into(), v.into())).collect();
    let session = &scope.session;
    let child_env = ChildEnv::new(&env.vars);
    let state = scope.adapter.state_paths(&child_env);
    let confined = corral_sandbox::confine_cli(
        plan.backend,
        CliLine {
            config: &config.sandbox,
            permissions: &session.permissions,
            cwd: &session.cwd,
            output_dir: &session.output_dir,
            extra_roots: &session.extra_roots,
            state: &state,
            protected: scope.adapter.protected_paths(&child_env),
            read_only_links: &plan.read_only_links,
            raw_stream_files: matches!(config.capture, crate::streams::OutputCapture::Files),
            program: &spec.program,
            args: &spec.args,
            env: &env.vars,
        },
        || scope.adapter.egress(&child_env),
        &mut env_os,
        |made| scope.placeholders_made(made),
    )
    .map_err(|e| match e {
        WrapCliError::NotFound => ProviderError::CliNotFound {
            provider: scope.provider,
            program: spec.program.display().to_string(),
            reason: e.to_string(),
        },
        WrapCliError::Io { path, source } => scope.io_error(&path, &source),
    })?;
    let (program, args) = (confined.program, confined.args);
    let argv_bytes = check_argv(
        program.as_os_str(),
        args.iter().map(|a| a.as_os_str()),
        env_block_bytes(env_os.iter().map(|(k, v)| (k.as_os_str(), v.as_os_str()))),
        config.argv_platform,
    )
    .map_err(|e| ProviderError::ArgvTooLong {
        provider: scope.provider,
        measured: e.measured,
        limit: e.limit,
        limit_name: e.limit_name.to_string(),
    })?;
    Ok(Launch {
        request: SpawnRequest {
            program,
            args,
            env: env_os,
            cwd: scope.session.cwd.clone(),
            stdin,
            parent_death_signal: config.parent_death_signal,
            inherit_fds: confined.inherit_fds,
            output: corral_process::spawn::ChildOutputs::Pipes,
            pre_exec: confined.pre_exec,
        },
        env,
        argv_bytes,
        egress: confined.egress,
        seccomp: confined.seccomp,
        probe: confined.probe,
        watch: confined.watch,
    })
}

/// Starts a launched CLI and records the spawn (or why it failed) in the log, flushed.
/// `stdin_label` names what stdin carries (`prompt`, `continuation`, `null`, `terminal`).
/// With egress confined, the sandbox's way out is opened right after the spawn (see
/// [`open_egress`]).
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
    // bubblewrap holds its own copy of the seccomp program's descriptor now.
    drop(launch.seccomp);
    let watch = launch.watch.map(|pending| {
        let started = pending.start();
        scope.log.record(
            attempt,
            &Record::WriteWatchStarted {
                error: started.as_ref().err().cloned(),
            },
        );
        if let Err(why) = &started {
            tracing::warn!(why = %why, "the native backend's write watch is not running");
        }
        started
    });
    let mut probe = launch.probe;
    if let Some(probe) = probe.as_mut() {
        probe.spawned();
    }
    // The probe cannot report before bubblewrap releases it, after the way out is open; a
    // report that comes first says that what was spawned is not holding the CLI as bubblewrap
    // does, so it is judged at once instead of waiting for a status that never comes. A sandbox
    // that ended before either (its report pipe closed) is left to the way out's own error,
    // which says why.
    let (egress, early) = match (launch.egress, probe.as_mut()) {
        (Some((gate, allow)), Some(waiting)) => {
            let opening = open_egress(scope, attempt, gate, allow, child.as_mut());
            tokio::pin!(opening);
            tokio::select! {
                biased;
                opened = &mut opening => (Some(opened?), None),
                report = waiting.read_report() => match report {
                    Ok(text) => (None, Some(Ok(text))),
                    Err(_) => (Some(opening.await?), None),
                },
            }
        }
        (Some((gate, allow)), None) => (
            Some(open_egress(scope, attempt, gate, allow, child.as_mut()).await?),
            None,
        ),
        (None, _) => (None, None),
    };
    if let Some(mut probe) = probe {
        let proxy_netns = egress.as_ref().and_then(|e| e.proxy.sandbox_netns);
        let report = match early {
            Some(report) => report,
            None => tokio::time::timeout(REPORT_TIMEOUT, probe.read_report())
                .await
                .unwrap_or_else(|_| Err(format!("no report within {REPORT_TIMEOUT:?}"))),
        };
        // Reported (or ended): bubblewrap has bound the protected paths by now.
        probe.bound();
        check_inside(scope, attempt, probe, report, proxy_netns, child.as_mut()).await?;
    }
    Ok(Spawned {
        child,
        egress,
        watch,
    })
}

/// Judges the probe's report: the attestation keeps only what it confirmed, and records what it
/// saw. When something asked for did not hold, the sandbox is killed before its CLI ran and the
/// run refuses, unless the user consented to run degraded; otherwise the probe executes the CLI.
async fn check_inside(
    scope: &mut RunScope<'_>,
    attempt: u32,
    probe: InsideProbe,
    report: Result<String, String>,
    proxy_netns: Option<u64>,
    child: &mut dyn SpawnedChild,
) -> Result<(), ProviderError> {
    let requested = scope
        .attestation
        .as_ref()
        .map(|a| a.requested.clone())
        .unwrap_or_default();
    let (check, unconfirmed) = probe.judge(report, &requested, proxy_netns);
    let consent = scope.config().sandbox.allow_degraded_native;
    if let Some(attestation) = scope.attestation.as_mut() {
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
        if !unconfirmed.is_empty() && consent {
            attestation.consent = Some("allow_degraded_native".to_string());
        }
    }
    scope.log.record(
        attempt,
        &Record::SandboxChecked {
            seen: &check,
            not_confirmed: &unconfirmed,
        },
    );
    scope.log.flush();
    if !unconfirmed.is_empty() && !consent {
        let _ = corral_process::process_group::signal_group(
            child.pid(),
            nix::sys::signal::Signal::SIGKILL,
        );
        let _ = tokio::time::timeout(std::time::Duration::from_secs(5), child.wait()).await;
        let err = ProviderError::Unsandboxed {
            provider: scope.provider,
            backend: SandboxBackend::Bubblewrap,
            reason:
                "checked from inside before the CLI ran, the sandbox did not hold; it was stopped"
                    .to_string(),
            unenforced: unconfirmed,
            hint: format!(
                "make sure sandbox.bwrap ({}) is bubblewrap itself and can make user namespaces here, or pass --allow-degraded-native (setting sandbox.allow_degraded_native = true) to run without these guarantees",
                scope.config().sandbox.bwrap.display()
            ),
        };
        scope.log.record(
            attempt,
            &Record::Classified {
                class: "unsandboxed",
                detail: err.to_string(),
            },
        );
        scope.log.flush();
        return Err(err);
    }
    if let Err(e) = probe.release() {
        tracing::warn!(error = %e, "the sandbox probe could not be released");
    }
    Ok(())
}

/// Opens a confined sandbox's way out and records it; when it cannot be opened, the sandbox is
/// killed before its CLI ever ran and the run refuses.
async fn open_egress(
    scope: &mut RunScope<'_>,
    attempt: u32,
    gate: EgressGate,
    allow: AllowList,
    child: &mut dyn SpawnedChild,
) -> Result<OpenEgress, ProviderError> {
    let (tx, notes) = tokio::sync::mpsc::unbounded_channel();
    let rules = allow.rules().to_vec();
    match gate.open(allow, tx).await {
        Ok(proxy) => {
            let address = corral_sandbox::egress::proxy_address();
            scope.log.record(
                attempt,
                &Record::EgressOpened {
                    proxy: &address,
                    allow: &rules,
                    netns: proxy.sandbox_netns,
                    setup_us: u64::try_from(proxy.setup.as_micros()).unwrap_or(u64::MAX),
                    reported_us: u64::try_from(proxy.reported.as_micros()).unwrap_or(u64::MAX),
                },
            );
            scope.log.flush();
            Ok(OpenEgress { proxy, notes })
        }
        Err(e) => {
            let _ = corral_process::process_group::signal_group(
                child.pid(),
                nix::sys::signal::Signal::SIGKILL,
            );
            let _ = tokio::time::timeout(std::time::Duration::from_secs(5), child.wait()).await;
            let err = ProviderError::Unsandboxed {
                provider: scope.provider,
                backend: SandboxBackend::Bubblewrap,
                reason: format!(
                    "its way out could not be opened ({e}); the sandbox was stopped before the CLI ran"
                ),
                unenforced: vec![Unenforced {
                    guarantee: Guarantee::EgressConfined,
                    why: "the allow-list proxy is not listening inside the sandbox".to_string(),
                }],
                hint: "set sandbox.network = \"host\" (unconfined) or \"none\" (no network) to run without the allow-list proxy".to_string(),
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
