//! The provider traits: headless runs, interactive handoffs, and model probes.

use std::sync::Arc;

use async_trait::async_trait;

use crate::error::ProviderError;
use crate::event::AgentEvent;
use crate::session::{AiSession, ProviderId, ProviderOutput, SessionId};

/// Runs one task through an AI coding CLI without a human, under supervision.
///
/// Contract, for every implementation:
/// - MUST never put the prompt body in the child's argv (stdin or a pointer file instead).
/// - MUST persist the session id to `<output_dir>/session-id.txt` the moment the CLI reports it,
///   while the child still runs.
/// - MUST return `Ok` with [`crate::Outcome::Succeeded`] when the CLI's terminal event reports
///   success, even if the process then lingers or exits non-zero.
/// - MUST return `Ok` with [`crate::Outcome::Recovered`] when the CLI failed but `signals.json`
///   exists, so the agent's work is kept.
/// - MUST return [`ProviderError::RateLimited`] only after its retries are used, each retry
///   resuming the captured session (or cold when none was captured).
/// - MUST retry cold exactly once, without using a retry, when the session to resume is not found,
///   sending `session.cold_prompt` (the full brief) in place of `session.prompt` when it is set,
///   and return [`ProviderError::StaleSession`] when that also fails.
/// - MUST return [`ProviderError::Cancelled`] promptly when `session.cancel` fires, including
///   during a backoff sleep, with no process of the run's tree left behind.
/// - MUST return [`ProviderError::IdleTimeout`] when the CLI prints nothing on stdout or stderr
///   for the configured idle time, after killing the whole process group.
#[async_trait]
pub trait HeadlessAiProvider: Send + Sync {
    /// Which CLI this is.
    fn id(&self) -> ProviderId;

    /// Runs the session to the end. `observer` sees every normalized event as it happens.
    async fn run(
        &self,
        session: AiSession,
        observer: Arc<dyn RunObserver>,
    ) -> Result<ProviderOutput, ProviderError>;
}

/// Sees a run as it happens. Every method has an empty default; implementations must return
/// quickly, since they run on the supervising task.
pub trait RunObserver: Send + Sync {
    /// An attempt (one start of the CLI) begins; `resume` is the session it resumes, if any.
    fn attempt_started(&self, _attempt: u32, _resume: Option<&SessionId>) {}
    /// The agent reported something.
    fn event(&self, _attempt: u32, _event: &AgentEvent) {}
    /// The supervisor waits before the next attempt (rate limit backoff).
    fn backoff(&self, _attempt: u32, _wait: std::time::Duration, _reason: &str) {}
    /// The next spawn waits until `until` (a wall-clock instant) because another run found the
    /// same `provider` account rate-limited.
    fn account_wait(&self, _attempt: u32, _provider: ProviderId, _until: std::time::SystemTime) {}
    /// The CLI itself waits until `until` (a wall-clock instant) before retrying a request the
    /// `provider`'s API refused with HTTP `status` (429 rate limited, 529 overloaded): the
    /// attempt goes on, and the account is held in the meantime.
    fn cli_retry_wait(
        &self,
        _attempt: u32,
        _provider: ProviderId,
        _status: u16,
        _until: std::time::SystemTime,
    ) {
    }
    /// The session to resume was not found, so the next attempt runs the task cold, in a new
    /// session.
    fn cold_fallback(&self, _attempt: u32, _stale: &SessionId) {}
}

/// A [`RunObserver`] that ignores everything.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoopObserver;

impl RunObserver for NoopObserver {}

/// How an interactive handoff ended.
#[derive(Debug, Clone, PartialEq)]
pub struct InteractiveOutcome {
    /// The CLI's exit code, if it exited.
    pub exit_code: Option<i32>,
    /// The session id, where it was minted up front or reported.
    pub session_id: Option<SessionId>,
    /// Whether the handoff was cancelled.
    pub cancelled: bool,
}

/// Hands the terminal to an AI coding CLI for a human to work with, then takes it back.
///
/// Contract:
/// - MUST hand the prompt as a pointer to a file, never on stdin (piped stdin turns these CLIs
///   headless).
/// - MUST give the child the terminal (stdio inherited) and restore the parent's terminal state
///   afterwards, whatever happened.
/// - MUST mint the session id up front where the CLI accepts one, and persist it.
/// - MUST end the child's whole process group with the same kill ladder as headless runs when
///   `session.cancel` fires.
#[async_trait]
pub trait InteractiveAiProvider: Send + Sync {
    /// Which CLI this is.
    fn id(&self) -> ProviderId;

    /// Runs the CLI on the caller's terminal until the human leaves it.
    async fn run_interactive(
        &self,
        session: AiSession,
    ) -> Result<InteractiveOutcome, ProviderError>;
}

/// Whether a model can be used, as far as the probe can tell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelAvailability {
    /// The CLI lists it or accepted it.
    Available,
    /// The CLI does not know it; `known` lists what it offers, when it said.
    Unavailable {
        /// Models the CLI offers, if it listed them.
        known: Vec<String>,
    },
    /// The probe cannot tell without a paid request (the CLI has no listing). Treat as
    /// "try it and classify the failure".
    Unknown {
        /// Why the probe could not tell.
        reason: String,
    },
}

/// Checks, cheaply and before a run, whether a model can be used.
///
/// Contract: MUST NOT spend tokens; MUST finish within its own bounded time (a hung CLI yields
/// [`ModelAvailability::Unknown`], not a hang); MUST return `Unknown` rather than guess.
#[async_trait]
pub trait ModelAvailabilityProbe: Send + Sync {
    /// Which CLI this is.
    fn id(&self) -> ProviderId;

    /// Probes one model.
    async fn probe(&self, model: &str) -> Result<ModelAvailability, ProviderError>;
}

#[async_trait]
impl<P: HeadlessAiProvider + ?Sized> HeadlessAiProvider for Arc<P> {
    fn id(&self) -> ProviderId {
        (**self).id()
    }
    async fn run(
        &self,
        session: AiSession,
        observer: Arc<dyn RunObserver>,
    ) -> Result<ProviderOutput, ProviderError> {
        (**self).run(session, observer).await
    }
}

#[async_trait]
impl<P: HeadlessAiProvider + ?Sized> HeadlessAiProvider for Box<P> {
    fn id(&self) -> ProviderId {
        (**self).id()
    }
    async fn run(
        &self,
        session: AiSession,
        observer: Arc<dyn RunObserver>,
    ) -> Result<ProviderOutput, ProviderError> {
        (**self).run(session, observer).await
    }
}
