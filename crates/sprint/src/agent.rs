//! The seam between the sprint and whoever can start an agent: [`RoleAgent`].
//!
//! The sprint decides what a spawn is for (its role, prompt, contract, session to resume) and
//! where its record goes; the composition root implements [`RoleAgent`] over a provider with
//! the role's model and effort, using the same library call for one spawn that `corral run`
//! uses. The sprint itself never learns which CLI ran, nor how.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use corral_contract::{Contract, Signal};
use corral_ports::{
    CancellationToken, Effort, ErrorClass, Outcome, ProviderId, RunObserver, SessionId, Usage,
};

use crate::layout::Role;

/// One spawn of a sprint role, as the sprint asks for it. The sprint has created `dir` and
/// written `role-meta.json` in it before it calls [`RoleAgent::spawn`].
#[derive(Debug, Clone)]
pub struct SpawnRequest {
    /// The role played.
    pub role: Role,
    /// The spawn's run directory (`rounds/<N>/<role>/`): the implementation writes the run's
    /// record there (`prompt.md`, `events.jsonl`, `session-id.txt`, `run.json`) and the agent
    /// writes `signals.json` there.
    pub dir: PathBuf,
    /// The agent's working directory: the sprint's work tree.
    pub work_tree: PathBuf,
    /// The prompt, without the contract section (the implementation renders it from
    /// `contract`, as `corral run` does).
    pub prompt: String,
    /// The full brief, sent instead of `prompt` when `resume` names a session that is gone:
    /// a new session must get the task, not "continue where you stopped".
    pub cold_prompt: Option<String>,
    /// The session to resume; `None` starts a new one.
    pub resume: Option<SessionId>,
    /// What the agent must write to `signals.json` (`Contract::generator()` or
    /// `Contract::evaluator()`).
    pub contract: Contract,
    /// Whether the work tree must be read-only for the agent (the evaluator): the
    /// implementation asks for a sandbox that enforces it, not for the agent's good will.
    pub read_only: bool,
    /// The sprint run's id: recorded in `run.json`, and the `Corral-Run:` trailer.
    pub run_id: String,
    /// The spawn's spend cap in US dollars (`[sprint] max_budget_usd`), for the CLIs that
    /// enforce one.
    pub max_budget_usd: Option<f64>,
    /// The spawn's turn cap (`[sprint] max_turns`), for the CLIs that enforce one.
    pub max_turns: Option<u32>,
}

/// What the signals the agent wrote amounted to.
#[derive(Debug, Clone, PartialEq)]
pub enum SpawnVerdict {
    /// `signals.json` satisfied the contract (after any corrective retries).
    Valid {
        /// The signals, in file order.
        signals: Vec<Signal>,
    },
    /// It did not, and the corrective retries were used up; `reason` says what was wrong.
    Invalid {
        /// What was wrong with the last `signals.json`, in one paragraph.
        reason: String,
    },
    /// No check was made: the run ended before there was anything to check (it could not
    /// start, it was cancelled, its rate-limit retries ran out).
    NotChecked,
}

impl SpawnVerdict {
    /// The verdict on the `signals.json` at `path` against `contract`: what an implementation
    /// reports once its run, corrective retries included, has ended.
    pub fn of_signals_file(path: &Path, contract: &Contract) -> SpawnVerdict {
        match corral_contract::validate_signals_file(path, contract) {
            Ok(valid) => SpawnVerdict::Valid {
                signals: valid.into_signals(),
            },
            Err(e) => SpawnVerdict::Invalid {
                reason: e.to_string(),
            },
        }
    }
}

/// Why a spawn did not end well, in the terms a caller acts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpawnFailure {
    /// Whether trying again later can help ([`ErrorClass::Retryable`], for rate-limit retries
    /// exhausted: the sprint pauses with exit 4), cannot ([`ErrorClass::Permanent`]), or the
    /// caller asked for it ([`ErrorClass::Cancelled`]).
    pub class: ErrorClass,
    /// The error, as `corral run` would print it.
    pub message: String,
    /// For a rate limit, when the provider said it resets (Unix seconds); `None` otherwise
    /// or when it did not say.
    pub resets_at_epoch_s: Option<u64>,
}

/// How one spawn ended.
#[derive(Debug, Clone, PartialEq)]
pub struct SpawnReport {
    /// How the provider run ended.
    pub outcome: Outcome,
    /// The session the agent ran in (already persisted to `session-id.txt` by the
    /// implementation), for the next round to resume.
    pub session_id: Option<SessionId>,
    /// The signals, checked against the request's contract.
    pub verdict: SpawnVerdict,
    /// Tokens and cost over every attempt of the spawn.
    pub usage: Usage,
    /// Set when the run failed.
    pub error: Option<SpawnFailure>,
    /// How many times the CLI was started (corrective and rate-limit retries included).
    pub attempts: u32,
    /// What the spawn's stray-write check found written outside the paths the spawn may write
    /// (`corral run`'s `stray_writes`, one change a line, as in `run.json`): empty when it found
    /// nothing or did not run. The sprint names each in the task's warnings.
    pub stray_writes: Vec<String>,
}

/// An agent that can play a sprint role: one provider with one model and effort.
///
/// Contract, for every implementation:
/// - MUST run the spawn in `request.work_tree`, keep its record in `request.dir`, and write the
///   session id to `session-id.txt` there as soon as it is known (a crash resume reads it).
/// - MUST enforce `request.read_only` through the sandbox, or refuse the spawn
///   ([`Outcome::NotStarted`]) rather than run it writable.
/// - MUST validate `signals.json` against `request.contract`, with the same corrective retries
///   as `corral run`, and report the result in [`SpawnReport::verdict`].
/// - MUST return (never panic) for every failure, with [`SpawnReport::error`] set.
#[async_trait]
pub trait RoleAgent: Send + Sync {
    /// The provider that plays the role.
    fn provider(&self) -> ProviderId;
    /// The model asked for; `None`: the CLI's default.
    fn model(&self) -> Option<&str>;
    /// The effort asked for; `None`: the CLI's default.
    fn effort(&self) -> Option<Effort>;
    /// Whether a session of this provider can be resumed headless. When it cannot, the sprint
    /// never asks for a resume: it starts a new session with the full brief.
    fn resumes(&self) -> bool;
    /// Runs one spawn to its end, or until `cancel` fires. `observer` sees the run as it
    /// happens (the live view).
    async fn spawn(
        &self,
        request: SpawnRequest,
        cancel: CancellationToken,
        observer: Arc<dyn RunObserver>,
    ) -> SpawnReport;
    /// The agent that runs the role's next spawn: `None`, this one; a role that lists several
    /// providers ([`crate::FailoverAgent`]) names the first whose account is not held. The
    /// sprint asks before each spawn ([`current_agent`]) and runs, records and resumes that
    /// agent's sessions only.
    fn current(&self) -> Option<&dyn RoleAgent> {
        None
    }
    /// After a spawn by `ran` (the [`RoleAgent::current`] it was run on) that ended rate
    /// limited: the hand-over to the next provider the role lists, when there is one to go on
    /// with; `None` when the limit is the sprint's to meet (it pauses, exit 4).
    fn hand_over(&self, _ran: ProviderId, _report: &SpawnReport) -> Option<HandOver> {
        None
    }
}

/// The agent that runs `agent`'s role's next spawn (see [`RoleAgent::current`]).
pub fn current_agent(agent: &dyn RoleAgent) -> &dyn RoleAgent {
    agent.current().unwrap_or(agent)
}

/// A role's work handed from a held provider to the next one it lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HandOver {
    /// The provider whose account is held.
    pub from: ProviderId,
    /// Until when (Unix seconds): the role comes back to `from` once it has passed.
    pub held_until_epoch_s: u64,
    /// The provider that goes on: `from` itself when every provider of the role is held and
    /// its hold ends first (the step runs again on it, waiting for its reset).
    pub to: ProviderId,
}
