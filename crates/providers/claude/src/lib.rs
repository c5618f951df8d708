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
//!   refusal, a rejected command line and failed authentication are permanent: the diagnosis
//!   reports them as refused, with the CLI's words and what to change.
//! - `edit_files: false` closes `Edit`, `MultiEdit` and `NotebookEdit` but keeps `Write`, which the
//!   agent needs for `signals.json` (see [`adapter::EDIT_TOOLS`]).

pub mod adapter;
mod diagnose;
pub mod parser;
mod probe;
mod settings;

use std::sync::Arc;

use corral_engine::{
    CliSettings, CommonFields, Engine, ProviderDescriptor, SettingError, SupervisedProvider,
};
use corral_ports::ProviderId;

pub use adapter::ClaudeAdapter;
pub use parser::ClaudeStreamParser;
pub use probe::ClaudeProbe;
pub use settings::{
    ClaudeSettings, DEFAULT_INTERNAL_RETRIES, MAX_INTERNAL_RETRIES, default_tested_versions,
};

/// The headless Claude Code provider: this adapter driven by `engine`.
pub fn headless(engine: Engine, settings: ClaudeSettings) -> SupervisedProvider<ClaudeAdapter> {
    SupervisedProvider::new(engine, ClaudeAdapter::new(settings))
}

/// What Corral knows about this provider without running it, and how to build it: read by the
/// composition root, `corral doctor` and `corral providers`.
pub const DESCRIPTOR: ProviderDescriptor = ProviderDescriptor {
    id: ProviderId::Claude,
    label: "Claude Code",
    command: "claude",
    npm_package: "@anthropic-ai/claude-code",
    pinned_version: "2.1.197",
    credential_vars: CREDENTIAL_VARS,
    credential_files: &[".claude/.credentials.json"],
    credential_paths: |env| {
        corral_engine::CliAdapter::credential_paths(&ClaudeAdapter::default(), env)
    },
    state_dirs: &[".claude"],
    tested_versions: default_tested_versions,
    capabilities: adapter::CAPABILITIES,
    options: &[MAX_INTERNAL_RETRIES_KEY],
    provider: |engine, cli| Ok(Arc::new(headless(engine, settings(cli)?))),
    probe: |engine, cli| Ok(Arc::new(ClaudeProbe::with_engine(&settings(cli)?, engine))),
};

/// The provider-only key of the CLI's own retries per request
/// ([`ClaudeSettings::max_internal_retries`]).
const MAX_INTERNAL_RETRIES_KEY: &str = "max_internal_retries";

/// Environment variables that carry credentials for the CLI.
const CREDENTIAL_VARS: &[&str] = &[
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "CLAUDE_CODE_OAUTH_TOKEN",
];

/// This provider's settings from the ones every provider shares.
fn settings(cli: &CliSettings) -> Result<ClaudeSettings, SettingError> {
    cli.refuse_unknown(ProviderId::Claude, DESCRIPTOR.options)?;
    let mut s = ClaudeSettings::default();
    cli.apply(CommonFields {
        command: &mut s.command,
        model: &mut s.model,
        extra_args: &mut s.extra_args,
        tested_versions: &mut s.tested_versions,
        allow_untested_version: &mut s.allow_untested_version,
    });
    if let Some(retries) = cli.count(MAX_INTERNAL_RETRIES_KEY) {
        s.max_internal_retries = retries;
    }
    Ok(s)
}
