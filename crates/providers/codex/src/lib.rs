//! Corral's adapter for OpenAI's Codex CLI (`codex`): one CLI's grammar, plugged into the engine.
//!
//! It knows how to start Codex headless (`codex exec --json --skip-git-repo-check`, the prompt on
//! stdin through the `-` argument), how to resume a thread (`codex exec … resume <id> -`, with the
//! sandbox given as configuration overrides because `resume` takes no `-C`, `-s` or `--add-dir`),
//! how to map [`corral_ports::Permissions`] onto Codex's own sandbox (`workspace-write` or
//! `read-only`, `--add-dir` roots, the sandbox's network switch, the web search and shell tools),
//! which environment variables the CLI reads, how to read its thread/turn/item JSONL into
//! normalized [`corral_ports::AgentEvent`]s ([`CodexStreamParser`]), which of its words mean a
//! rate limit, a stale session, an unavailable model or a refusal, and its tested version range.
//! [`headless`] wires it to an [`Engine`]; [`CodexProbe`] answers the model probe port from Codex's
//! model cache.
//!
//! It knows nothing about any other provider, settings files (neither Corral's nor Codex's
//! `config.toml`, which it only overrides per run with `-c`), or processes beyond what the engine
//! gives it: it never spawns, waits or kills; the composition root hands it a [`CodexSettings`].
//!
//! Known gaps, stated rather than hidden:
//! - `edit_files: false` maps to Codex's `read-only` sandbox, which also blocks `signals.json`:
//!   such a run ends without its result file. That is the honest reading of the gate; an operator
//!   who needs the file sets [`CodexSettings::sandbox`] to `workspace-write` and accepts that all
//!   edits open (named in [`adapter::CAPABILITIES`]).
//! - Corral owns the retry schedule only when [`CodexSettings::model_provider`] names a custom
//!   provider: Codex keeps the retry knobs in the provider's table and refuses tables for its
//!   built-in providers. With the built-in `openai` provider a permanent 5xx costs 30 requests
//!   before Codex gives up, and the engine's retries multiply that.
//! - Codex has no timeout for a request that never gets response headers (recorded: still waiting
//!   after 200 s); only the engine's idle watchdog ends such a run. A long shell command prints
//!   nothing between its `item.started` and `item.completed` either, so the idle limit must exceed
//!   the longest command the agent may run.
//! - The rate-limit reset time is read from the API body when Codex quotes it (`resets_at`),
//!   else from its prose, "try again at 3:04 PM" (local time, to the minute, its next
//!   occurrence) or "try again at Jan 1st, 2027 9:00 AM".
//! - The shell gate (`--disable shell_tool`) and the model-unavailable wordings are taken from
//!   Codex's own strings, not from a recorded run.

pub mod adapter;
mod diagnose;
mod endpoints;
pub mod parser;
mod probe;
mod settings;
mod wording;

use std::sync::Arc;

use corral_engine::{
    CliSettings, CommonFields, Engine, ProviderDescriptor, SettingError, SupervisedProvider,
};
use corral_ports::ProviderId;

pub use adapter::CodexAdapter;
pub use parser::CodexStreamParser;
pub use probe::{CodexProbe, MODELS_CACHE_FILE, model_slugs};
pub use settings::{BUILT_IN_PROVIDERS, CodexSettings, SandboxMode, default_tested_versions};

/// The headless Codex provider: this adapter driven by `engine`.
pub fn headless(engine: Engine, settings: CodexSettings) -> SupervisedProvider<CodexAdapter> {
    SupervisedProvider::new(engine, CodexAdapter::new(settings))
}

/// What Corral knows about this provider without running it, and how to build it: read by the
/// composition root, `corral doctor` and `corral providers`.
pub const DESCRIPTOR: ProviderDescriptor = ProviderDescriptor {
    id: ProviderId::Codex,
    label: "Codex",
    command: "codex",
    npm_package: "@openai/codex",
    pinned_version: "0.171.0",
    credential_vars: CREDENTIAL_VARS,
    credential_files: &[".codex/auth.json"],
    credential_paths: |env| {
        corral_engine::CliAdapter::credential_paths(&CodexAdapter::default(), env)
    },
    state_dirs: &[".codex"],
    tested_versions: default_tested_versions,
    capabilities: adapter::CAPABILITIES,
    options: &["model_provider", "sandbox"],
    provider: |engine, cli| Ok(Arc::new(headless(engine, settings(cli)?))),
    probe: |engine, cli| {
        Ok(Arc::new(CodexProbe::with_engine(
            &settings(cli)?,
            codex_home(engine),
            engine,
        )))
    },
};

/// Environment variables that carry credentials for the CLI.
const CREDENTIAL_VARS: &[&str] = &["OPENAI_API_KEY", "CODEX_API_KEY"];

/// This provider's settings from the ones every provider shares.
fn settings(cli: &CliSettings) -> Result<CodexSettings, SettingError> {
    cli.refuse_unknown(ProviderId::Codex, DESCRIPTOR.options)?;
    let mut s = CodexSettings::default();
    cli.apply(CommonFields {
        command: &mut s.command,
        model: &mut s.model,
        extra_args: &mut s.extra_args,
        tested_versions: &mut s.tested_versions,
        allow_untested_version: &mut s.allow_untested_version,
    });
    s.model_provider = cli.text("model_provider").map(str::to_string);
    s.sandbox = match cli.text("sandbox") {
        None => None,
        Some("read-only") => Some(SandboxMode::ReadOnly),
        Some("workspace-write") => Some(SandboxMode::WorkspaceWrite),
        Some("danger-full-access") => Some(SandboxMode::DangerFullAccess),
        Some(other) => {
            return Err(SettingError {
                provider: ProviderId::Codex,
                key: "sandbox".to_string(),
                message: format!(
                    "{other:?} is not read-only, workspace-write or danger-full-access"
                ),
            });
        }
    };
    Ok(s)
}

/// Where Codex keeps its state for a run with `engine`: `$CODEX_HOME`, else `$HOME/.codex`, from
/// the engine's environment setting (as the adapter's state paths are found).
fn codex_home(engine: &Engine) -> Option<std::path::PathBuf> {
    let ambient = engine.config().ambient();
    corral_engine::ChildEnv::new(&ambient).dir_or_home("CODEX_HOME", ".codex")
}
