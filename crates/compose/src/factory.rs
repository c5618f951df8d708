//! The provider factory: settings in, a ready provider out.

use std::sync::Arc;
use std::time::Duration;

use corral_engine::{Engine, EngineConfig, RetryPolicy};
use corral_ports::{HeadlessAiProvider, InteractiveAiProvider, ProviderId};

use crate::settings::{ProviderSettings, Settings};

/// Why no provider could be built. Not retryable: settings or installation must change.
#[derive(Debug, thiserror::Error)]
pub enum ComposeError {
    /// The provider has no adapter in this build yet.
    #[error("provider {0} is not available in this version of corral (available: {1})")]
    NotAvailable(ProviderId, String),
    /// A provider setting cannot be used.
    #[error("providers.{provider}.{key}: {message}")]
    BadSetting {
        /// The provider.
        provider: ProviderId,
        /// The key under `providers.<id>`.
        key: &'static str,
        /// What is wrong.
        message: String,
    },
}

/// The engine configuration the settings describe.
pub fn engine_config(settings: &Settings) -> EngineConfig {
    let run = &settings.run;
    let retry = &settings.retry;
    EngineConfig {
        idle_timeout: Duration::from_millis(run.idle_watchdog_ms),
        wall_timeout: (run.wall_timeout_ms > 0).then(|| Duration::from_millis(run.wall_timeout_ms)),
        kill_grace: Duration::from_millis(run.kill_grace_ms),
        max_line_bytes: usize::try_from(run.max_line_bytes).unwrap_or(usize::MAX),
        retry: RetryPolicy {
            max_retries: retry.rate_limit_retries,
            initial: Duration::from_millis(retry.backoff_initial_ms),
            max: Duration::from_millis(retry.backoff_max_ms),
            ..RetryPolicy::default()
        },
        env_inherit: settings.env.inherit,
        env_allow: settings.env.allow.clone(),
        sandbox: corral_engine::SandboxConfig {
            backend: settings.sandbox.backend,
            allow_degraded_native: settings.sandbox.allow_degraded_native,
            network: settings.sandbox.network,
            home: settings.sandbox.home,
            bwrap: settings.sandbox.bwrap.clone().into(),
            refuse_dirty_tree: settings.sandbox.refuse_dirty_tree,
        },
        ..EngineConfig::default()
    }
}

/// One provider's settings, for callers that need them (doctor, config show).
pub fn provider_settings(settings: &Settings, id: ProviderId) -> &ProviderSettings {
    settings.providers.get(id)
}

/// A provider that can run headless and hand over the terminal: every `SupervisedProvider`.
pub trait Provider: HeadlessAiProvider + InteractiveAiProvider {}

impl<P: HeadlessAiProvider + InteractiveAiProvider> Provider for P {}

/// Builds provider `id` on an engine configured by `config` (usually [`engine_config`]; tests
/// pass shorter timers here, never through the settings ranges). This `match` is the one place
/// that names every provider.
pub fn provider(
    id: ProviderId,
    settings: &Settings,
    config: EngineConfig,
) -> Result<Arc<dyn Provider>, ComposeError> {
    let mut config = config;
    let own = settings.providers.get(id);
    config.env_allow.extend(own.env_allow.iter().cloned());
    only_for(id, own)?;
    let engine = Engine::new(config);
    match id {
        ProviderId::Claude => Ok(Arc::new(corral_claude::headless(
            engine,
            claude_settings(own)?,
        ))),
        ProviderId::Grok => Ok(Arc::new(corral_grok::headless(engine, grok_settings(own)?))),
        ProviderId::Copilot => Ok(Arc::new(corral_copilot::headless(
            engine,
            copilot_settings(own)?,
        ))),
        ProviderId::Codex => Ok(Arc::new(corral_codex::headless(
            engine,
            codex_settings(own)?,
        ))),
        ProviderId::Opencode => Ok(Arc::new(corral_opencode::headless(
            engine,
            opencode_settings(own)?,
        ))),
    }
}

/// Builds the headless provider `id`.
pub fn headless_provider(
    id: ProviderId,
    settings: &Settings,
    config: EngineConfig,
) -> Result<Arc<dyn HeadlessAiProvider>, ComposeError> {
    Ok(provider(id, settings, config)?)
}

/// Builds the interactive provider `id` (the CLI takes over the terminal; see
/// `corral_ports::InteractiveAiProvider`).
pub fn interactive_provider(
    id: ProviderId,
    settings: &Settings,
    config: EngineConfig,
) -> Result<Arc<dyn InteractiveAiProvider>, ComposeError> {
    Ok(provider(id, settings, config)?)
}

/// Provider `id`'s row in the capability table: what its CLI can and cannot do, as its adapter
/// declares it (with default settings).
pub fn capabilities(id: ProviderId) -> corral_ports::Capabilities {
    match id {
        ProviderId::Claude => corral_claude::adapter::CAPABILITIES,
        ProviderId::Codex => corral_codex::adapter::CAPABILITIES,
        ProviderId::Copilot => corral_copilot::adapter::CAPABILITIES,
        ProviderId::Opencode => corral_opencode::adapter::CAPABILITIES,
        ProviderId::Grok => corral_grok::adapter::CAPABILITIES,
    }
}

/// The providers this build can run.
pub fn available() -> Vec<&'static str> {
    ProviderId::ALL
        .iter()
        .filter(|id| match id {
            ProviderId::Claude
            | ProviderId::Grok
            | ProviderId::Copilot
            | ProviderId::Codex
            | ProviderId::Opencode => true,
        })
        .map(|id| id.as_str())
        .collect()
}

fn version_req(
    provider: ProviderId,
    value: Option<&String>,
) -> Result<Option<semver::VersionReq>, ComposeError> {
    value
        .map(|v| {
            semver::VersionReq::parse(v).map_err(|e| ComposeError::BadSetting {
                provider,
                key: "tested_versions",
                message: format!("{v:?} is not a semver range: {e}"),
            })
        })
        .transpose()
}

/// Provider-specific keys set on a provider that does not read them are errors, not no-ops.
fn only_for(id: ProviderId, own: &ProviderSettings) -> Result<(), ComposeError> {
    let misplaced = [
        (
            "model_provider",
            own.model_provider.is_some(),
            ProviderId::Codex,
        ),
        ("sandbox", own.sandbox.is_some(), ProviderId::Codex),
        ("auto_approve", own.auto_approve, ProviderId::Opencode),
    ];
    for (key, set, owner) in misplaced {
        if set && owner != id {
            return Err(ComposeError::BadSetting {
                provider: id,
                key,
                message: format!("only providers.{owner}.{key} exists"),
            });
        }
    }
    Ok(())
}

fn codex_settings(own: &ProviderSettings) -> Result<corral_codex::CodexSettings, ComposeError> {
    let mut s = corral_codex::CodexSettings::default();
    if let Some(command) = &own.command {
        s.command = command.into();
    }
    s.model = own.model.clone();
    s.extra_args = own.args.clone();
    s.model_provider = own.model_provider.clone();
    s.sandbox = match own.sandbox.as_deref() {
        None => None,
        Some("read-only") => Some(corral_codex::SandboxMode::ReadOnly),
        Some("workspace-write") => Some(corral_codex::SandboxMode::WorkspaceWrite),
        Some("danger-full-access") => Some(corral_codex::SandboxMode::DangerFullAccess),
        Some(other) => {
            return Err(ComposeError::BadSetting {
                provider: ProviderId::Codex,
                key: "sandbox",
                message: format!(
                    "{other:?} is not read-only, workspace-write or danger-full-access"
                ),
            });
        }
    };
    if let Some(req) = version_req(ProviderId::Codex, own.tested_versions.as_ref())? {
        s.tested_versions = req;
    }
    s.allow_untested_version = own.allow_untested_version;
    Ok(s)
}

fn opencode_settings(
    own: &ProviderSettings,
) -> Result<corral_opencode::OpencodeSettings, ComposeError> {
    let mut s = corral_opencode::OpencodeSettings::default();
    if let Some(command) = &own.command {
        s.command = command.into();
    }
    s.model = own.model.clone();
    s.extra_args = own.args.clone();
    s.auto_approve = own.auto_approve;
    if let Some(req) = version_req(ProviderId::Opencode, own.tested_versions.as_ref())? {
        s.tested_versions = req;
    }
    s.allow_untested_version = own.allow_untested_version;
    Ok(s)
}

fn copilot_settings(
    own: &ProviderSettings,
) -> Result<corral_copilot::CopilotSettings, ComposeError> {
    let mut s = corral_copilot::CopilotSettings::default();
    if let Some(command) = &own.command {
        s.command = command.into();
    }
    s.model = own.model.clone();
    s.extra_args = own.args.clone();
    if let Some(req) = version_req(ProviderId::Copilot, own.tested_versions.as_ref())? {
        s.tested_versions = req;
    }
    s.allow_untested_version = own.allow_untested_version;
    Ok(s)
}

fn grok_settings(own: &ProviderSettings) -> Result<corral_grok::GrokSettings, ComposeError> {
    let mut s = corral_grok::GrokSettings::default();
    if let Some(command) = &own.command {
        s.command = command.into();
    }
    s.model = own.model.clone();
    s.extra_args = own.args.clone();
    if let Some(req) = version_req(ProviderId::Grok, own.tested_versions.as_ref())? {
        s.tested_versions = req;
    }
    s.allow_untested_version = own.allow_untested_version;
    Ok(s)
}

fn claude_settings(own: &ProviderSettings) -> Result<corral_claude::ClaudeSettings, ComposeError> {
    let mut s = corral_claude::ClaudeSettings::default();
    if let Some(command) = &own.command {
        s.command = command.into();
    }
    s.model = own.model.clone();
    s.extra_args = own.args.clone();
    if let Some(req) = version_req(ProviderId::Claude, own.tested_versions.as_ref())? {
        s.tested_versions = req;
    }
    s.allow_untested_version = own.allow_untested_version;
    Ok(s)
}

/// What `corral doctor` needs to know about a provider without building it.
#[derive(Debug, Clone)]
pub struct ProviderFacts {
    /// The command that would run (settings override or the CLI's usual name).
    pub command: std::path::PathBuf,
    /// The tested version range (settings override or the provider's own).
    pub tested_versions: semver::VersionReq,
    /// The npm package that installs the CLI.
    pub npm_package: &'static str,
    /// Environment variables that carry credentials for it.
    pub credential_vars: &'static [&'static str],
    /// Files under `$HOME` that hold a login, when the CLI keeps one.
    pub credential_files: &'static [&'static str],
    /// Whether this build can run it.
    pub available: bool,
}

/// Facts about provider `id`, for diagnostics.
pub fn provider_facts(id: ProviderId, settings: &Settings) -> ProviderFacts {
    let own = settings.providers.get(id);
    let claude_tested = corral_claude::default_tested_versions().to_string();
    let grok_tested = corral_grok::default_tested_versions().to_string();
    let copilot_tested = corral_copilot::default_tested_versions().to_string();
    let codex_tested = corral_codex::default_tested_versions().to_string();
    let opencode_tested = corral_opencode::default_tested_versions().to_string();
    let (command, tested, npm_package, credential_vars, credential_files): (
        &str,
        &str,
        &'static str,
        &'static [&'static str],
        &'static [&'static str],
    ) = match id {
        ProviderId::Claude => (
            "claude",
            &claude_tested,
            "@anthropic-ai/claude-code",
            &[
                "ANTHROPIC_API_KEY",
                "ANTHROPIC_AUTH_TOKEN",
                "CLAUDE_CODE_OAUTH_TOKEN",
            ],
            &[".claude/.credentials.json"],
        ),
        ProviderId::Codex => (
            "codex",
            &codex_tested,
            "@openai/codex",
            &["OPENAI_API_KEY", "CODEX_API_KEY"],
            &[".codex/auth.json"],
        ),
        ProviderId::Copilot => (
            "copilot",
            &copilot_tested,
            "@github/copilot",
            &[
                "COPILOT_GITHUB_TOKEN",
                "GH_TOKEN",
                "GITHUB_TOKEN",
                "COPILOT_PROVIDER_API_KEY",
            ],
            &[".copilot/config.json"],
        ),
        ProviderId::Opencode => (
            "opencode",
            &opencode_tested,
            "opencode-ai",
            &["ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENROUTER_API_KEY"],
            &[".local/share/opencode/auth.json"],
        ),
        ProviderId::Grok => (
            "grok",
            &grok_tested,
            "@vibe-kit/grok-cli",
            // 0.0.34 reads no XAI_API_KEY.
            &["GROK_API_KEY"],
            &[".grok/user-settings.json"],
        ),
    };
    let tested_versions = own
        .tested_versions
        .as_deref()
        .and_then(|v| semver::VersionReq::parse(v).ok())
        .or_else(|| semver::VersionReq::parse(tested).ok())
        .unwrap_or(semver::VersionReq::STAR);
    ProviderFacts {
        command: own
            .command
            .clone()
            .unwrap_or_else(|| command.to_string())
            .into(),
        tested_versions,
        npm_package,
        credential_vars,
        credential_files,
        available: available().contains(&id.as_str()),
    }
}
