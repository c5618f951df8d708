//! The ports of Corral: what a caller may ask of an AI coding CLI, and what it gets back.
//!
//! This crate is the API boundary between the callers (a sprint tool, the `corral` CLI) and the
//! provider adapters. It holds the provider traits ([`HeadlessAiProvider`],
//! [`InteractiveAiProvider`], [`ModelAvailabilityProbe`]), the session intent ([`AiSession`]), the
//! outcome ([`ProviderOutput`]), the normalized agent events ([`AgentEvent`]), the usage record
//! ([`Usage`]), the error taxonomy ([`ProviderError`]), the validated [`SessionId`] and the
//! names of the run directory's files ([`run_dir`]), and the supervised command port
//! ([`CommandRunner`]) through which a caller has a check, a gate or git run without creating a
//! process itself, and the forge port ([`Forge`]): the branch pushed and its pull request opened
//! on the host, each operation typed so that no caller hands over a command line.
//!
//! It knows nothing about processes, `tokio::process`, argv, settings files, figment, or any one
//! provider's flags and stream format. Its only dependencies are serde, thiserror, async-trait,
//! tokio-util's cancellation token (a synchronisation primitive, not a runtime) and schemars's
//! derive, which describes its records in the JSON Schemas of `docs/schema/` (ADR 0012).

mod attestation;
mod capabilities;
mod command;
mod error;
mod event;
mod forge;
mod limit;
mod provider;
pub mod run_dir;
mod session;
mod usage;

pub use attestation::{
    Attestation, Guarantee, InsideCheck, LimitEnforced, NamespaceSeen, SandboxBackend, StrayCheck,
    Unenforced, WriteProbe,
};
pub use capabilities::{Capabilities, CostReporting, Gate, PromptChannel, SessionIdTiming};
pub use command::{
    CommandEnd, CommandError, CommandOutput, CommandRunner, CommandSpec, CommandStream,
    Confinement, DEFAULT_OUTPUT_LIMIT,
};
pub use error::{ErrorClass, ProviderError, RunEvidence};
pub use event::{AgentEvent, RateLimitInfo, ShortenedString};
pub use forge::{Forge, ForgeError, ForgeIssue, ForgeRepo, PullRequest, PullRequestText};
pub use limit::{LimitExceeded, ResourceLimit};
pub use provider::{
    HeadlessAiProvider, InteractiveAiProvider, InteractiveOutcome, ModelAvailability,
    ModelAvailabilityProbe, NoopObserver, RunObserver,
};
pub use session::{
    AiSession, Effort, Outcome, Permissions, ProviderId, ProviderOutput, SESSION_ID_MAX_LEN,
    SessionId, SessionIdError, TaskRun, validate_session_id,
};
pub use tokio_util::sync::CancellationToken;
pub use usage::{MAX_PLAUSIBLE_COST_USD, Usage};
