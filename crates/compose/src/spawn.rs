//! One spawn: a task run of one provider, recorded in its run directory the same way for every
//! caller (`corral run`, a sprint role).
//!
//! [`Spawn::begin`] writes `prompt.md` (the prompt with the contract section, as the agent gets
//! it) and `run.json` at the start (outcome `running`, the supervisor); [`Spawn::run`] runs the
//! task through [`run_with_contract`] with the policy's corrective retries, writes the session id
//! into `run.json` the moment the agent reports it (the provider itself writes
//! `session-id.txt` then, and `events.jsonl` as it goes) and `run.json` again at the end. A
//! record that cannot be written is reported through [`SpawnHooks::record_failed`]; it never ends
//! the run.

use std::io;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use corral_contract::{Contract, SignalsError, render_contract_section};
use corral_ports::run_dir::PROMPT_FILE;
use corral_ports::{
    AgentEvent, AiSession, HeadlessAiProvider, ProviderError, ProviderId, RunObserver, SessionId,
    Usage,
};

use crate::contract_run::{ContractPolicy, ContractRun, SignalsVerdict, run_with_contract};
use crate::run_record::{Journal, RunRecord, Supervisor, now};

/// What one spawn is.
#[derive(Debug, Clone)]
pub struct SpawnPlan {
    /// The run's id, recorded in `run.json`.
    pub run_id: String,
    /// The provider that runs it.
    pub provider: ProviderId,
    /// The task: `prompt` and `cold_prompt` without the contract section (the spawn appends
    /// it), `output_dir` the run directory (it exists), `signals_file` in it.
    pub session: AiSession,
    /// What `signals.json` must satisfy; `None`: no contract section, no check.
    pub contract: Option<Contract>,
    /// How many times the session may be resumed with the corrective message.
    pub corrective_retries: u32,
    /// Who resumes the run's session later: what `run.json`'s `resumeCommand` says.
    pub resumed_by: ResumedBy,
}

/// Who resumes a spawn's session, for the command its record names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResumedBy {
    /// A `corral run` under the project's runs directory: `corral resume <run-id>`, which takes
    /// the provider, working directory and session from the record.
    CorralResume,
    /// A part of something that resumes it itself (a sprint round, the preflight's request):
    /// its record names no command; the session id is still in it.
    ItsOwner,
}

/// What a caller hears of a spawn besides the run's own events.
pub trait SpawnHooks: Send + Sync {
    /// A part of the record could not be written (`what` names it, `error` says why); the run
    /// goes on.
    fn record_failed(&self, _what: &str, _error: &io::Error) {}
    /// `signals.json` was not acceptable, and the corrective message is about to be sent.
    fn corrective(&self, _error: &SignalsError) {}
}

/// [`SpawnHooks`] that ignore everything.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoHooks;

impl SpawnHooks for NoHooks {}

/// A spawn whose record is started and whose run is to come.
pub struct Spawn {
    plan: SpawnPlan,
    journal: Arc<Journal>,
    hooks: Arc<dyn SpawnHooks>,
    started: Instant,
}

/// How a spawn ended.
#[derive(Debug)]
pub struct SpawnEnd {
    /// The provider runs, their signals check and their usage.
    pub run: ContractRun,
    /// `run.json` as last written.
    pub record: RunRecord,
    /// Why the last write of `run.json` failed, if it did.
    pub record_error: Option<io::Error>,
    /// The run directory.
    pub dir: PathBuf,
}

impl std::fmt::Debug for Spawn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Spawn")
            .field("plan", &self.plan)
            .field("journal", &self.journal)
            .finish_non_exhaustive()
    }
}

impl Spawn {
    /// Renders the prompt (with the contract section, when there is a contract), writes
    /// `prompt.md` and the first `run.json`.
    pub fn begin(mut plan: SpawnPlan, hooks: Arc<dyn SpawnHooks>) -> Spawn {
        if let Some(contract) = &plan.contract {
            let section = render_contract_section(contract, &plan.session.signals_file);
            let with = |prompt: &str| -> Arc<str> {
                Arc::from(format!("{}\n\n{section}", prompt.trim_end()).as_str())
            };
            let prompt = with(&plan.session.prompt);
            let cold = plan.session.cold_prompt.as_deref().map(with);
            plan.session.prompt = prompt;
            plan.session.cold_prompt = cold;
        }
        let dir = plan.session.output_dir.clone();
        if let Err(e) =
            corral_engine::write_record_file(&dir.join(PROMPT_FILE), plan.session.prompt.as_bytes())
        {
            hooks.record_failed(PROMPT_FILE, &e);
        }
        let record = first_record(&plan);
        let journal = Arc::new(Journal::new(dir, record));
        if let Err(e) = journal.update(|_| {}) {
            hooks.record_failed(corral_ports::run_dir::RUN_FILE, &e);
        }
        Spawn {
            plan,
            journal,
            hooks,
            started: Instant::now(),
        }
    }

    /// The run's record, for a caller that must write it from elsewhere (a signal handler).
    pub fn journal(&self) -> &Arc<Journal> {
        &self.journal
    }

    /// The prompt as the agent gets it (what `prompt.md` holds).
    pub fn prompt(&self) -> &str {
        &self.plan.session.prompt
    }

    /// When the spawn began.
    pub fn started(&self) -> Instant {
        self.started
    }

    /// Runs the task to its end; `observer` sees every event, `exit_code` is the code the run
    /// comes to, recorded in `run.json` (`None`: a spawn that is no command of its own).
    pub async fn run(
        self,
        provider: &dyn HeadlessAiProvider,
        observer: Arc<dyn RunObserver>,
        exit_code: impl FnOnce(&ContractRun) -> Option<u8>,
    ) -> SpawnEnd {
        let Spawn {
            plan,
            journal,
            hooks,
            started,
        } = self;
        let recording: Arc<dyn RunObserver> = Arc::new(RecordingObserver {
            inner: observer,
            journal: Arc::clone(&journal),
            hooks: Arc::clone(&hooks),
            resume_command: resume_command_of(&plan.run_id, plan.resumed_by),
        });
        let on_corrective = |e: &SignalsError| hooks.corrective(e);
        let run = run_with_contract(
            provider,
            plan.session.clone(),
            ContractPolicy {
                contract: plan.contract.as_ref(),
                corrective_retries: plan.corrective_retries,
            },
            recording,
            &on_corrective,
        )
        .await;
        let code = exit_code(&run);
        let written = finish_record(
            &journal,
            &run,
            code,
            resume_command_of(&plan.run_id, plan.resumed_by),
            started,
        );
        journal.close();
        SpawnEnd {
            record: journal.snapshot(),
            record_error: written.err(),
            dir: journal.dir().to_path_buf(),
            run,
        }
    }
}

/// The command that resumes the session of the `corral run` whose id is `run_id`: `corral
/// resume` reads the provider, working directory and session from its record.
pub fn resume_command(run_id: &str) -> String {
    format!("corral resume {run_id}")
}

/// The record's `resumeCommand` once the run has a session.
fn resume_command_of(plan_run_id: &str, resumed_by: ResumedBy) -> Option<String> {
    match resumed_by {
        ResumedBy::CorralResume => Some(resume_command(plan_run_id)),
        ResumedBy::ItsOwner => None,
    }
}

/// Forwards to the caller's observer, and writes a session id into `run.json` the moment it
/// is seen (a supervisor killed outright still leaves it there), and a cold fallback when it
/// happens.
struct RecordingObserver {
    inner: Arc<dyn RunObserver>,
    journal: Arc<Journal>,
    hooks: Arc<dyn SpawnHooks>,
    /// What the record's `resumeCommand` becomes once a session is seen.
    resume_command: Option<String>,
}

impl RunObserver for RecordingObserver {
    fn attempt_started(&self, attempt: u32, resume: Option<&SessionId>) {
        self.inner.attempt_started(attempt, resume);
    }

    fn event(&self, attempt: u32, event: &AgentEvent) {
        if let AgentEvent::SessionStarted { session_id, .. } = event
            && self.journal.snapshot().session_id.as_deref() != Some(session_id.as_str())
        {
            let written = self.journal.update(|record| {
                record.session_id = Some(session_id.to_string());
                record.resume_command.clone_from(&self.resume_command);
            });
            if let Err(e) = written {
                self.hooks
                    .record_failed(corral_ports::run_dir::RUN_FILE, &e);
            }
        }
        self.inner.event(attempt, event);
    }

    fn backoff(&self, attempt: u32, wait: std::time::Duration, reason: &str) {
        self.inner.backoff(attempt, wait, reason);
    }

    fn account_wait(&self, attempt: u32, provider: ProviderId, until: std::time::SystemTime) {
        self.inner.account_wait(attempt, provider, until);
    }

    fn cli_retry_wait(
        &self,
        attempt: u32,
        provider: ProviderId,
        status: u16,
        until: std::time::SystemTime,
    ) {
        self.inner.cli_retry_wait(attempt, provider, status, until);
    }

    fn cold_fallback(&self, attempt: u32, stale: &SessionId) {
        let written = self.journal.update(|record| {
            record.cold_fallback_from = Some(stale.to_string());
        });
        if let Err(e) = written {
            self.hooks
                .record_failed(corral_ports::run_dir::RUN_FILE, &e);
        }
        self.inner.cold_fallback(attempt, stale);
    }
}

/// `run.json` as the run starts.
fn first_record(plan: &SpawnPlan) -> RunRecord {
    let session = &plan.session;
    let resume = session.resume.as_ref();
    RunRecord {
        run_id: plan.run_id.clone(),
        provider: plan.provider,
        model: session.model.clone(),
        cwd: session.cwd.clone(),
        started_at: now(),
        finished_at: None,
        outcome: "running".into(),
        exit_code: None,
        session_id: resume.map(ToString::to_string),
        signals_valid: None,
        signals_error: None,
        signal_kinds: Vec::new(),
        attempts: 0,
        provider_runs: 0,
        usage: Usage::default(),
        duration_ms: None,
        error: None,
        result: None,
        resume_command: resume.and_then(|_| resume_command_of(&plan.run_id, plan.resumed_by)),
        cold_fallback_from: None,
        limit_exceeded: None,
        attestation: None,
        supervisor: Some(Supervisor::this_process()),
    }
}

/// Writes how the run ended into `run.json`.
fn finish_record(
    journal: &Journal,
    run: &ContractRun,
    exit_code: Option<u8>,
    resume_command: Option<String>,
    started: Instant,
) -> io::Result<()> {
    let (session_id, outcome, attestation) = match &run.result {
        Ok(out) => (
            out.session_id.clone(),
            out.outcome.to_string(),
            out.attestation.clone(),
        ),
        Err(err) => (
            err.session_id().cloned(),
            err.outcome().to_string(),
            err.evidence().and_then(|e| e.attestation.clone()),
        ),
    };
    journal.update(|record| {
        record.finished_at = Some(now());
        record.outcome = outcome;
        record.exit_code = exit_code;
        // A session seen live (and already in the record) is kept when the result names none.
        if let Some(id) = &session_id {
            record.session_id = Some(id.to_string());
            record.resume_command = resume_command;
        }
        record.attempts = run.attempts;
        record.provider_runs = run.provider_runs;
        record.usage = run.usage;
        record.duration_ms = Some(u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX));
        record.error = run.result.as_ref().err().map(ToString::to_string);
        record.result = run.result.as_ref().ok().and_then(|o| o.final_text.clone());
        record.attestation = attestation;
        record.limit_exceeded =
            if let Err(ProviderError::LimitExceeded { exceeded, .. }) = &run.result {
                Some(*exceeded)
            } else {
                None
            };
        match &run.verdict {
            SignalsVerdict::NotChecked => {}
            SignalsVerdict::Valid { kinds, .. } => {
                record.signals_valid = Some(true);
                record.signal_kinds = kinds.clone();
            }
            SignalsVerdict::Invalid(e) => {
                record.signals_valid = Some(false);
                record.signals_error = Some(e.to_string());
            }
        }
    })
}
