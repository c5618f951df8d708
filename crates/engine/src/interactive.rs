//! The interactive handoff: the CLI takes over the terminal for a person, and the supervisor
//! takes it back afterwards, whatever happened.
//!
//! The prompt goes into a pointer file (piped stdin would turn these CLIs headless); the child
//! runs in its own process group, which becomes the terminal's foreground group so it can read
//! keys; the supervisor reads nothing from the terminal meanwhile, and restores the terminal's
//! settings and foreground group when the child exits. Cancellation ends the child's group with
//! the same kill ladder as headless runs.

use std::sync::Arc;
use std::time::Instant;

use corral_ports::{
    AgentEvent, AiSession, InteractiveOutcome, ProviderError, RunObserver, SessionId,
};

use crate::adapter::{AttemptPlan, CliAdapter};
use crate::attempt::terminate_group;
use crate::env::EnvPolicy;
use crate::files::{SessionMeta, persist_session, write_prompt_pointer};
use crate::log::{ExecutionLog, KillReason, Record};
use crate::proc::RUN_TOKEN_VAR;
use crate::spawn::{SpawnRequest, StdinMode, terminal};
use crate::supervisor::Engine;

/// The pointer file for interactive handoffs, beside `signals.json`.
pub const INTERACTIVE_PROMPT_FILE: &str = "interactive-prompt.md";

impl Engine {
    /// Hands the terminal to `adapter`'s CLI until it exits or `session.cancel` fires. See
    /// [`corral_ports::InteractiveAiProvider`] for the contract.
    pub async fn run_interactive(
        &self,
        adapter: &dyn CliAdapter,
        session: AiSession,
        observer: Arc<dyn RunObserver>,
    ) -> Result<InteractiveOutcome, ProviderError> {
        let provider = adapter.provider();
        let io_err = |path: &std::path::Path, e: std::io::Error| ProviderError::Io {
            provider,
            path: path.to_path_buf(),
            reason: e.to_string(),
        };
        if !session.cwd.is_dir() {
            return Err(ProviderError::InvalidSession {
                provider,
                reason: format!("working directory {} does not exist", session.cwd.display()),
            });
        }
        let start = Instant::now();
        let mut log = ExecutionLog::open(&session.output_dir, start)
            .map_err(|e| io_err(&session.output_dir, e))?;
        let dir = session
            .signals_file
            .parent()
            .unwrap_or(&session.output_dir)
            .to_path_buf();
        // Without a prompt the person starts the conversation.
        let pointer = if session.prompt.trim().is_empty() {
            None
        } else {
            let written = write_prompt_pointer(&dir, INTERACTIVE_PROMPT_FILE, &session.prompt);
            Some(written.map_err(|e| io_err(&dir, e))?)
        };
        let plan = AttemptPlan {
            session: &session,
            resume: session.resume.as_ref(),
            attempt: 1,
            pointer: pointer.as_ref(),
        };
        let spec = adapter.interactive_command(&plan)?;
        let token = format!(
            "{provider}-interactive-{}-{:016x}",
            std::process::id(),
            fastrand::u64(..)
        );
        let config = self.config();
        let policy = EnvPolicy {
            inherit: config.env_inherit,
            profile: adapter.env_profile(),
            allow: config.env_allow.clone(),
            // The person's terminal type must reach the CLI for its UI to draw.
            set: spec
                .env_set
                .iter()
                .cloned()
                .chain([(RUN_TOKEN_VAR.to_string(), token)])
                .chain(std::env::var("TERM").ok().map(|t| ("TERM".to_string(), t)))
                .collect(),
        };
        let env = match &config.ambient_env {
            Some(vars) => policy.resolve(vars.iter().cloned()),
            None => policy.resolve(std::env::vars_os().map(|(k, v)| {
                (
                    k.to_string_lossy().into_owned(),
                    v.to_string_lossy().into_owned(),
                )
            })),
        };
        let request = SpawnRequest {
            program: spec.program.clone(),
            args: spec.args.clone(),
            env: env.vars.iter().map(|(k, v)| (k.into(), v.into())).collect(),
            cwd: session.cwd.clone(),
            stdin: StdinMode::Terminal,
            parent_death_signal: config.parent_death_signal,
        };
        if let Some(id) = &spec.session_id {
            persist(&session, provider.as_str(), id, &mut log);
            observer.event(
                1,
                &AgentEvent::SessionStarted {
                    session_id: id.clone(),
                    model: None,
                },
            );
        }
        let saved = terminal::save();
        let spawned = self.spawner().spawn(&request);
        let mut child = match spawned {
            Ok(child) => child,
            Err(e) => {
                log.record(
                    1,
                    &Record::SpawnFailed {
                        program: &spec.program,
                        error: e.to_string(),
                    },
                );
                return Err(ProviderError::CliNotFound {
                    provider,
                    program: spec.program.display().to_string(),
                    reason: e.to_string(),
                });
            }
        };
        let pgid = child.pid();
        terminal::give_terminal_to(pgid);
        log.record(
            1,
            &Record::Spawn {
                program: &spec.program,
                args: spec
                    .args
                    .iter()
                    .map(|a| a.to_string_lossy().into_owned())
                    .collect(),
                cwd: &session.cwd,
                env_names: env.names(),
                env_withheld: &env.withheld_secrets,
                stdin: "terminal",
                pid: pgid,
                resume: session.resume.as_ref(),
                argv_bytes: 0,
            },
        );
        log.flush();
        let (exit, cancelled) = tokio::select! {
            status = child.wait() => (status.ok(), false),
            () = session.cancel.cancelled() => {
                terminate_group(child.as_ref(), config.kill_grace, &mut log, 1, KillReason::Cancelled).await;
                (child.wait().await.ok(), true)
            }
        };
        // Whatever happened, the person gets their terminal back as it was.
        terminal::restore(saved.as_ref());
        if child.group_alive() {
            terminate_group(
                child.as_ref(),
                config.kill_grace,
                &mut log,
                1,
                KillReason::LeftoversAfterExit,
            )
            .await;
        }
        if let Some(info) = exit {
            log.record(
                1,
                &Record::Exit {
                    code: info.code,
                    signal: info.signal,
                },
            );
        }
        log.flush();
        Ok(InteractiveOutcome {
            exit_code: exit.and_then(|e| e.code),
            session_id: spec.session_id.or(session.resume),
            cancelled,
        })
    }
}

fn persist(session: &AiSession, provider: &str, id: &SessionId, log: &mut ExecutionLog) {
    let meta = SessionMeta {
        session_id: id.clone(),
        provider: provider.to_string(),
        cwd: session.cwd.clone(),
        cli_version: None,
        attempt: 1,
    };
    if let Ok(path) = persist_session(&session.output_dir, &meta) {
        log.record(
            1,
            &Record::SessionPersisted {
                session_id: id,
                path: &path,
            },
        );
    }
}
