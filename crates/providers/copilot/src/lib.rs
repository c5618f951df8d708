//! Corral's adapter for the GitHub Copilot CLI (`copilot`): one CLI's grammar, plugged into the
//! engine.
//!
//! It knows how to start Copilot headless (`copilot -p <pointer> --output-format json`, the
//! prompt in `copilot-prompt.md` beside `signals.json`, because Copilot reads it only from an
//! argument), how to name a fresh session up front (`--session-id=<uuid>`, minted here, since
//! Copilot prints its id only on its last line) and resume one (`--resume=<id>`), how to map
//! [`corral_ports::Permissions`] onto `--allow-all-tools` with `--deny-tool` rules, hidden tools and
//! `--add-dir` roots, which environment variables the CLI reads, how to read its JSONL events into
//! normalized [`corral_ports::AgentEvent`]s ([`CopilotJsonParser`]), which of its words mean a rate
//! limit, a stale session, an unavailable model or a refusal, and its tested version range.
//! [`headless`] wires it to an [`Engine`]; [`CopilotProbe`] answers the model probe port.
//!
//! It knows nothing about any other provider, settings files, or processes beyond what the engine
//! gives it: it never spawns, waits or kills, never writes the prompt file (the engine does), and
//! reads no configuration; the composition root hands it a [`CopilotSettings`].
//!
//! Known gaps, stated rather than hidden:
//! - `edit_files: false` hides the `edit` tool but keeps `create`, which the agent needs for
//!   `signals.json` (see [`adapter::EDIT_EXCLUDED`]); the shell, when allowed, writes anything.
//! - `max_budget_usd` is not forwarded: Copilot caps spend in AI credits (`--max-ai-credits`,
//!   at least 30), and there is no fixed rate between credits and dollars.
//! - Token counts: Copilot 1.0.102 printed none in `--output-format json` (only premium
//!   requests on the `result` line); `assistant.usage` lines are read should a version print them.
//! - Copilot's own retries (5 for a 429 or a 5xx, about 6 to 17 s) cannot be capped from outside;
//!   Corral's backoff starts after them.

pub mod adapter;
mod diagnose;
pub mod mint;
pub mod parser;
mod probe;
mod settings;

use std::sync::Arc;

use corral_engine::{
    CliSettings, CommonFields, Engine, ProviderDescriptor, SettingError, SupervisedProvider,
};
use corral_ports::ProviderId;

pub use adapter::CopilotAdapter;
pub use mint::UuidSource;
pub use parser::CopilotJsonParser;
pub use probe::CopilotProbe;
pub use settings::{CopilotSettings, default_tested_versions};

/// The headless Copilot CLI provider: this adapter driven by `engine`.
pub fn headless(engine: Engine, settings: CopilotSettings) -> SupervisedProvider<CopilotAdapter> {
    SupervisedProvider::new(engine, CopilotAdapter::new(settings))
}

/// What Corral knows about this provider without running it, and how to build it: read by the
/// composition root, `corral doctor` and `corral providers`.
pub const DESCRIPTOR: ProviderDescriptor = ProviderDescriptor {
    id: ProviderId::Copilot,
    label: "Copilot CLI",
    command: "copilot",
    npm_package: "@github/copilot",
    pinned_version: "1.0.102",
    credential_vars: CREDENTIAL_VARS,
    credential_files: &[".copilot/config.json"],
    credential_paths: |env| {
        corral_engine::CliAdapter::credential_paths(&CopilotAdapter::default(), env)
    },
    state_dirs: &[".copilot"],
    tested_versions: default_tested_versions,
    capabilities: adapter::CAPABILITIES,
    options: &[],
    provider: |engine, cli| Ok(Arc::new(headless(engine, settings(cli)?))),
    probe: |engine, cli| Ok(Arc::new(CopilotProbe::with_engine(&settings(cli)?, engine))),
};

/// Environment variables that carry credentials for the CLI.
const CREDENTIAL_VARS: &[&str] = &[
    "COPILOT_GITHUB_TOKEN",
    "GH_TOKEN",
    "GITHUB_TOKEN",
    "COPILOT_PROVIDER_API_KEY",
];

/// This provider's settings from the ones every provider shares.
fn settings(cli: &CliSettings) -> Result<CopilotSettings, SettingError> {
    cli.refuse_unknown(ProviderId::Copilot, DESCRIPTOR.options)?;
    let mut s = CopilotSettings::default();
    cli.apply(CommonFields {
        command: &mut s.command,
        model: &mut s.model,
        extra_args: &mut s.extra_args,
        tested_versions: &mut s.tested_versions,
        allow_untested_version: &mut s.allow_untested_version,
    });
    Ok(s)
}
