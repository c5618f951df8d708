//! One task run to a checked result: the provider's run, then the agent's `signals.json` checked
//! against the contract and, while corrective retries are left and a session was captured, the
//! session resumed with the corrective message until the signals are acceptable.
//!
//! `corral run` drives it, and so can any caller of the library (the sprint): the policy lives
//! here once, between the provider port and the contract, and knows nothing of a terminal.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use corral_contract::{Contract, Signal, SignalsError, corrective_message, validate_signals_file};
use corral_ports::{
    AiSession, HeadlessAiProvider, ProviderError, ProviderOutput, RunObserver, TaskRun, Usage,
};

/// What the agent's signals came to.
#[derive(Debug)]
pub enum SignalsVerdict {
    /// No contract was asked for, or the run ended in an error before the check.
    NotChecked,
    /// `signals.json` satisfied the contract.
    Valid {
        /// The kind of each signal, in file order.
        kinds: Vec<String>,
        /// The reason of a `task_blocked` signal, when the agent reported one.
        blocked: Option<String>,
        /// The signals as they were checked, in file order: a caller that needs them (the
        /// sprint) takes these rather than reading the agent's file a second time.
        signals: Vec<Signal>,
    },
    /// `signals.json` was missing or invalid once no corrective retry was left (or none could
    /// help).
    Invalid(SignalsError),
}

/// How the signals of one task are held to a contract.
#[derive(Debug, Clone, Copy)]
pub struct ContractPolicy<'a> {
    /// The contract `signals.json` is checked against; `None`: not checked.
    pub contract: Option<&'a Contract>,
    /// How many times a session may be resumed with the corrective message.
    pub corrective_retries: u32,
}

/// What every provider run of one task came to.
#[derive(Debug)]
pub struct ContractRun {
    /// The last provider run: its output, or the error it ended in.
    pub result: Result<ProviderOutput, ProviderError>,
    /// The signals check of the last successful provider run.
    pub verdict: SignalsVerdict,
    /// Attempts over every provider run.
    pub attempts: u32,
    /// Provider runs: the first and each corrective retry.
    pub provider_runs: u32,
    /// Tokens and cost over every provider run.
    pub usage: Usage,
}

/// Runs `first` through `provider`, then checks `signals.json` against the policy's contract
/// (`None`: not checked) and, while corrective retries are left and a session was captured,
/// resumes that session with the corrective message. `on_corrective` hears each error a corrective retry is
/// sent for, before it is sent.
///
/// The provider runs are one task run (see [`AiSession::task`]; a `task` in `first` is kept as
/// its origin): one attempt counter, one clock, and one `run_finished` in `events.jsonl`,
/// written here once the task is over.
pub async fn run_with_contract(
    provider: &dyn HeadlessAiProvider,
    first: AiSession,
    policy: ContractPolicy<'_>,
    observer: Arc<dyn RunObserver>,
    on_corrective: &(dyn Fn(&SignalsError) + Send + Sync),
) -> ContractRun {
    let mut session = first;
    let task = session.task.unwrap_or(TaskRun {
        started: Instant::now(),
        attempts_before: 0,
    });
    let run = provider_runs(
        provider,
        &mut session,
        task,
        policy,
        observer,
        on_corrective,
    )
    .await;
    finish_task_log(&session, task, &run);
    run
}

/// Writes the task's one `run_finished`; a log that cannot be written is a warning, and the
/// run's result stands.
fn finish_task_log(session: &AiSession, task: TaskRun, run: &ContractRun) {
    let (outcome, session_id, signals_present) = match &run.result {
        Ok(out) => (out.outcome, out.session_id.as_ref(), out.signals_present),
        Err(err) => (err.outcome(), err.session_id(), false),
    };
    let end = corral_engine::RunEnd {
        outcome,
        attempts: task.attempts_before + run.attempts,
        usage: &run.usage,
        session_id,
        signals_present,
        duration_ms: u64::try_from(task.started.elapsed().as_millis()).unwrap_or(u64::MAX),
    };
    if let Err(e) = corral_engine::write_task_finished(&session.output_dir, task, &end) {
        tracing::warn!(dir = %session.output_dir.display(), error = %e, "cannot write run_finished");
    }
}

/// The provider runs of one task, the corrective retries included.
async fn provider_runs(
    provider: &dyn HeadlessAiProvider,
    session: &mut AiSession,
    task: TaskRun,
    policy: ContractPolicy<'_>,
    observer: Arc<dyn RunObserver>,
    on_corrective: &(dyn Fn(&SignalsError) + Send + Sync),
) -> ContractRun {
    let mut corrective_left = policy.corrective_retries;
    let mut attempts = 0;
    let mut provider_runs = 0;
    let mut usage = Usage::default();
    let finished = |result: Result<ProviderOutput, ProviderError>,
                    verdict: SignalsVerdict,
                    attempts: u32,
                    provider_runs: u32,
                    usage: Usage| ContractRun {
        result,
        verdict,
        attempts,
        provider_runs,
        usage,
    };
    loop {
        provider_runs += 1;
        session.task = Some(TaskRun {
            attempts_before: task.attempts_before + attempts,
            ..task
        });
        let out = match provider.run(session.clone(), Arc::clone(&observer)).await {
            Ok(out) => out,
            Err(err) => {
                if let Some(ev) = err.evidence() {
                    usage.add(&ev.usage);
                    attempts += ev.attempts;
                }
                let verdict = SignalsVerdict::NotChecked;
                return finished(Err(err), verdict, attempts, provider_runs, usage);
            }
        };
        usage.add(&out.usage);
        attempts += out.attempts;
        let Some(contract) = policy.contract else {
            let verdict = SignalsVerdict::NotChecked;
            return finished(Ok(out), verdict, attempts, provider_runs, usage);
        };
        match check_signals(&session.signals_file, contract) {
            SignalsVerdict::Invalid(e)
                if e.is_correctable() && corrective_left > 0 && out.session_id.is_some() =>
            {
                corrective_left -= 1;
                // The session resumes in the run directory as the agent left it: a FIFO as
                // `signals.json` would block its corrected write until the idle watchdog ended
                // the run. What is not a plain file goes, and the record says so.
                let removed =
                    corral_engine::repair_run_dir(&session.output_dir, &session.signals_file);
                for t in &removed {
                    tracing::warn!(path = %t.path.display(), was = t.was, "removed before the corrective retry");
                }
                let attempt = task.attempts_before + attempts;
                if let Err(err) = corral_engine::write_tampering_removed(
                    &session.output_dir,
                    task,
                    attempt,
                    &removed,
                ) {
                    tracing::warn!(dir = %session.output_dir.display(), error = %err, "cannot record the removal");
                }
                on_corrective(&e);
                let prompt = corrective_message(&e, &session.signals_file, contract);
                // Should the session be gone, a new one needs the task, not the correction.
                if session.cold_prompt.is_none() {
                    session.cold_prompt = Some(Arc::clone(&session.prompt));
                }
                session.prompt = Arc::from(prompt.as_str());
                session.resume = out.session_id.clone();
            }
            verdict @ (SignalsVerdict::Invalid(_)
            | SignalsVerdict::Valid { .. }
            | SignalsVerdict::NotChecked) => {
                return finished(Ok(out), verdict, attempts, provider_runs, usage);
            }
        }
    }
}

/// Checks `path` against `contract`.
fn check_signals(path: &Path, contract: &Contract) -> SignalsVerdict {
    match validate_signals_file(path, contract) {
        Ok(valid) => {
            let kinds = valid
                .signals()
                .iter()
                .map(|s| s.kind().to_string())
                .collect();
            let blocked = valid.signals().iter().find_map(|s| {
                if let Signal::TaskBlocked(b) = s {
                    Some(b.reason.clone())
                } else {
                    None
                }
            });
            SignalsVerdict::Valid {
                kinds,
                blocked,
                signals: valid.into_signals(),
            }
        }
        Err(e) => SignalsVerdict::Invalid(e),
    }
}
