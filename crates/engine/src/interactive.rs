//! The interactive handoff: the CLI takes over the terminal for a person, and the supervisor
//! takes it back afterwards, whatever happened.
//!
//! It runs in the same run scope as a headless run (`run.rs`: the git check before and after, the
//! sandbox plan and its attestation, `run_started` and `run_finished`) and is launched the same
//! way (`launch.rs`: environment policy, sandbox, argv budget), so a handoff never degrades
//! unseen. There is no version check: nothing parses an interactive CLI's output.
//!
//! The prompt goes into a pointer file (piped stdin would turn these CLIs headless); the child
//! runs in its own process group, which becomes the terminal's foreground group so it can read
//! keys; the supervisor reads nothing from the terminal meanwhile, and restores the terminal's
//! settings and foreground group when the child exits. Cancellation ends the child's group with
//! the same kill ladder as headless runs, and the processes that left the group are swept.

use std::sync::Arc;

use corral_ports::{
    AgentEvent, AiSession, InteractiveOutcome, Outcome, ProviderError, RunObserver, SessionId,
    Usage,
};

use crate::adapter::{AttemptPlan, CliAdapter};
use crate::attempt::{sweep_logged, terminate_group};
use crate::config::EngineConfig;
use crate::files::{SessionMeta, persist_session, write_prompt_pointer};
use crate::launch::{Spawned, launch, spawn};
use crate::log::{KillReason, Record};
use crate::run::{Finished, RunScope};
use corral_process::process_group;
use corral_process::spawn::ProviderSpawn;
use corral_process::spawn::{StdinMode, terminal};

/// The pointer file for interactive handoffs, beside `signals.json`.
pub const INTERACTIVE_PROMPT_FILE: &str = "interactive-prompt.md";

/// The handoff is attempt 1 in the log.
const ATTEMPT: u32 = 1;

/// Hands the terminal to `adapter`'s CLI until it exits or `session.cancel` fires.
pub(crate) async fn run(
    config: &EngineConfig,
    spawner: &Arc<dyn ProviderSpawn>,
    adapter: &dyn CliAdapter,
    session: AiSession,
    observer: Arc<dyn RunObserver>,
) -> Result<InteractiveOutcome, ProviderError> {
    let mut scope = RunScope::open(config, spawner, adapter, session)?;
    let result = hand_over(&mut scope, &observer).await;
    scope.end(result, |_| None).await
}

async fn hand_over(
    scope: &mut RunScope<'_>,
    observer: &Arc<dyn RunObserver>,
) -> Result<InteractiveOutcome, ProviderError> {
    scope.begin().await?;
    scope.plan_sandbox()?;
    scope.refuse_unlisted_endpoints()?;
    // Without a prompt the person starts the conversation.
    let pointer = if scope.session.prompt.trim().is_empty() {
        None
    } else {
        let dir = scope.pointer_dir();
        let written = write_prompt_pointer(dir, INTERACTIVE_PROMPT_FILE, &scope.session.prompt);
        Some(written.map_err(|e| scope.io_error(dir, &e))?)
    };
    let spec = scope.adapter.interactive_command(&AttemptPlan {
        session: &scope.session,
        resume: scope.session.resume.as_ref(),
        attempt: ATTEMPT,
        pointer: pointer.as_ref(),
    })?;
    let token = scope.token(ATTEMPT);
    // The person's terminal type must reach the CLI for its UI to draw, whatever the policy.
    let term: Vec<(String, String)> = scope
        .config()
        .ambient()
        .into_iter()
        .filter(|(k, _)| k == "TERM")
        .collect();
    let launched = launch(scope, &spec, &token, StdinMode::Terminal, term)?;
    if let Some(id) = &spec.session_id {
        persist(scope, id);
        observer.event(
            ATTEMPT,
            &AgentEvent::SessionStarted {
                session_id: id.clone(),
                model: None,
            },
        );
    }
    let saved = terminal::save();
    let resume = scope.session.resume.clone();
    let Spawned {
        mut child,
        mut guard,
    } = spawn(scope, ATTEMPT, launched, "terminal", resume.as_ref()).await?;
    let pgid = child.pid();
    terminal::give_terminal_to(pgid);
    let grace = scope.config().kill_grace;
    let (exit, cancelled) = tokio::select! {
        status = child.wait() => (status.ok(), false),
        () = scope.session.cancel.cancelled() => {
            terminate_group(pgid, grace, &mut scope.log, ATTEMPT, KillReason::Cancelled).await;
            (child.wait().await.ok(), true)
        }
    };
    // Whatever happened, the person gets their terminal back as it was.
    terminal::restore(saved.as_ref());
    if process_group::group_alive(pgid) {
        terminate_group(
            pgid,
            grace,
            &mut scope.log,
            ATTEMPT,
            KillReason::LeftoversAfterExit,
        )
        .await;
    }
    if let Some(info) = exit {
        scope.log.record(
            ATTEMPT,
            &Record::Exit {
                code: info.code,
                signal: info.signal,
            },
        );
    }
    sweep_logged(&token, pgid, &mut scope.log, ATTEMPT).await;
    // The session is over: what the egress proxy refused meanwhile goes to the log.
    if let Some(mut notes) = guard.egress_notes() {
        while let Ok(note) = notes.try_recv() {
            scope.log.record(ATTEMPT, &Record::egress(&note));
        }
    }
    let breach = guard.limit_breach(exit);
    scope.spawn_ended(ATTEMPT, guard);
    let session_id = spec.session_id.or(resume);
    let outcome = match (cancelled, &breach, exit.and_then(|e| e.code)) {
        (true, _, _) => Outcome::Cancelled,
        (false, Some(breach), _) => {
            scope.log.record(
                ATTEMPT,
                &Record::Classified {
                    class: "limit-exceeded",
                    detail: format!(
                        "the session went over its {} and was ended: {}",
                        crate::limits::exceeded(breach),
                        breach.what
                    ),
                },
            );
            Outcome::LimitExceeded
        }
        (false, None, Some(0)) => Outcome::Succeeded,
        (false, None, _) => Outcome::Crashed,
    };
    let signals_present = scope.signals_present();
    scope.finish(Finished {
        outcome,
        attempts: ATTEMPT,
        session: session_id.clone(),
        usage: Usage::default(),
        signals_present,
    });
    Ok(InteractiveOutcome {
        exit_code: exit.and_then(|e| e.code),
        session_id,
        cancelled,
    })
}

fn persist(scope: &mut RunScope<'_>, id: &SessionId) {
    let meta = SessionMeta {
        session_id: id.clone(),
        provider: scope.provider.as_str().to_string(),
        model: scope.session.model.clone(),
        cwd: scope.session.cwd.clone(),
        cli_version: None,
        attempt: ATTEMPT,
    };
    match persist_session(&scope.session.output_dir, &meta) {
        Ok(path) => scope.log.record(
            ATTEMPT,
            &Record::SessionPersisted {
                session_id: id,
                path: &path,
            },
        ),
        Err(e) => tracing::error!(error = %e, "cannot persist session id"),
    }
}
