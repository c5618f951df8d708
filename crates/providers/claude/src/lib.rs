//! Corral's adapter for Anthropic's Claude Code CLI (`claude`): one CLI's grammar, plugged into
//! the engine.
//!
//! It knows how to start Claude Code headless (`claude -p --verbose --output-format stream-json`,
//! the prompt on stdin), how to resume a session (`--resume <id>`, from the session's own working
//! directory), how to map [`corral_ports::Permissions`] onto `--permission-mode bypassPermissions`
//! and a `--disallowedTools=` deny list, which environment variables the CLI reads, how to read its
//! stream-json lines into normalized [`corral_ports::AgentEvent`]s ([`ClaudeStreamParser`]), which
//! of its words mean a rate limit, a stale session, an unavailable model or a refusal, and its
//! tested version range. [`headless`] wires it to an [`Engine`]; [`ClaudeProbe`] answers the model
//! probe port.
//!
//! It knows nothing about any other provider, settings files, or processes beyond what the engine
//! gives it: it never spawns, waits or kills, and reads no configuration; the composition root
//! hands it a [`ClaudeSettings`].
//!
//! Known gaps, stated rather than hidden:
//! - Claude Code refuses `bypassPermissions` as root unless `IS_SANDBOX=1`. The adapter does not set
//!   it: that is the operator's consent to give, in the environment (the profile passes it). The
//!   refusal, a rejected command line and failed authentication are permanent, but the engine's
//!   `Diagnosis` cannot say so yet; they surface as a crash whose stderr tail holds the CLI's words,
//!   and [`ClaudeAdapter::refusal`] already explains them.
//! - `edit_files: false` closes `Edit`, `MultiEdit` and `NotebookEdit` but keeps `Write`, which the
//!   agent needs for `signals.json` (see [`adapter::EDIT_TOOLS`]).

pub mod adapter;
mod diagnose;
pub mod parser;
mod probe;
mod settings;

use corral_engine::{Engine, SupervisedProvider};

pub use adapter::ClaudeAdapter;
pub use parser::ClaudeStreamParser;
pub use probe::ClaudeProbe;
pub use settings::{ClaudeSettings, MAX_INTERNAL_RETRIES, default_tested_versions};

/// The headless Claude Code provider: this adapter driven by `engine`.
pub fn headless(engine: Engine, settings: ClaudeSettings) -> SupervisedProvider<ClaudeAdapter> {
    SupervisedProvider::new(engine, ClaudeAdapter::new(settings))
}
