//! The ports of Corral: what a caller may ask of an AI coding CLI, and what it gets back.
//!
//! This crate is the API boundary between the callers (a sprint tool, the `corral` CLI) and the
//! provider adapters. It holds the provider traits ([`HeadlessAiProvider`],
//! [`InteractiveAiProvider`], [`ModelAvailabilityProbe`]), the session intent ([`AiSession`]), the
//! outcome ([`ProviderOutput`]), the normalized agent events ([`AgentEvent`]), the usage record
//! ([`Usage`]) and the error taxonomy ([`ProviderError`]).
//!
//! It knows nothing about processes, `tokio::process`, argv, settings files, figment, or any one
//! provider's flags and stream format. Its only dependencies are serde, thiserror, async-trait and
//! tokio-util's cancellation token (a synchronisation primitive, not a runtime).

mod attestation;
mod capabilities;
mod error;
mod event;
mod provider;
mod session;
mod usage;

pub use attestation::{Attestation, Guarantee, SandboxBackend, Unenforced};
pub use capabilities::{Capabilities, CostReporting, Gate, PromptChannel, SessionIdTiming};
pub use error::{ErrorClass, ProviderError, RunEvidence};
pub use event::{AgentEvent, RateLimitInfo, ShortenedString};
pub use provider::{
    HeadlessAiProvider, InteractiveAiProvider, InteractiveOutcome, ModelAvailability,
    ModelAvailabilityProbe, NoopObserver, RunObserver,
};
pub use session::{
    AiSession, Effort, Outcome, Permissions, ProviderId, ProviderOutput, SessionId, SessionIdError,
};
pub use tokio_util::sync::CancellationToken;
pub use usage::{MAX_PLAUSIBLE_COST_USD, Usage};
