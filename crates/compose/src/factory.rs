//! The provider factory: settings in, a ready provider out.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use corral_engine::{
    CliSettings, Engine, EngineConfig, OptionValue, ProviderDescriptor, RetryPolicy, SettingError,
};
use corral_ports::{
    CommandRunner, HeadlessAiProvider, InteractiveAiProvider, ModelAvailabilityProbe, ProviderId,
};

use crate::settings::{ProviderSettings, Settings};

/// Why no provider could be built. Not retryable: settings or installation must change.
#[derive(Debug, thiserror::Error)]
pub enum ComposeError {
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
    /// The provider refused one of its settings (a provider-only key it does not read, a value
    /// it cannot use).
    #[error(transparent)]
    Provider(#[from] SettingError),
}

/// The engine configuration the settings describe.
pub fn engine_config(settings: &Settings) -> EngineConfig {
    let run = &settings.run;
    let retry = &settings.retry;
    let mut config = EngineConfig {
        idle_timeout: Duration::from_millis(run.idle_watchdog_ms),
        wall_timeout: (run.wall_timeout_ms > 0).then(|| Duration::from_millis(run.wall_timeout_ms)),
        kill_grace: Duration::from_millis(run.kill_grace_ms),
        max_line_bytes: usize::try_from(run.max_line_bytes).unwrap_or(usize::MAX),
        capture: run.output_capture,
        raw_streams: run.raw_streams,
        retry: RetryPolicy {
            max_retries: retry.rate_limit_retries,
            initial: Duration::from_millis(retry.backoff_initial_ms),
            max: Duration::from_millis(retry.backoff_max_ms),
            auto_resume: retry.auto_resume,
            ..RetryPolicy::default()
        },
        env_inherit: settings.env.inherit,
        env_allow: settings.env.allow.clone(),
        sandbox: corral_engine::SandboxConfig {
            backend: settings.sandbox.backend,
            allow_degraded_native: settings.sandbox.allow_degraded_native,
            network: settings.sandbox.network,
            // Validated when loaded: every entry parses.
            network_allow: settings
                .sandbox
                .network_allow
                .iter()
                .filter_map(|rule| rule.parse().ok())
                .collect(),
            home: settings.sandbox.home,
            bwrap: settings.sandbox.bwrap.clone().into(),
            refuse_dirty_tree: settings.sandbox.refuse_dirty_tree,
            watch_native_writes: settings.sandbox.watch_native_writes,
            // Filled below, from the ambient home.
            hide: Vec::new(),
            limits: settings.limits.resolve(total_memory(), available_cores()),
        },
        ..EngineConfig::default()
    };
    config.sandbox.hide = hidden_paths(&settings.sandbox.hide, &config.ambient());
    // The user's cache, never the project's: an agent may write in the project, and a
    // remembered version decides whether a CLI runs at all.
    config.version_cache = corral_engine::user_version_cache(&config.ambient());
    // The user's state, shared by every run of the user's accounts; an agent must not be able to
    // lift or plant a hold, so it is never in the project either.
    config.rate_limit_gate = corral_engine::user_rate_limit_dir(&config.ambient());
    config
}

/// This machine's memory in bytes (`MemTotal` of `/proc/meminfo`), for `limits.memory = "auto"`.
fn total_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// The cores this process may use, for `limits.cpus = "auto"`.
fn available_cores() -> u64 {
    std::thread::available_parallelism().map_or(1, |n| n.get() as u64)
}

/// `sandbox.hide` as paths: `~/...` under the ambient `HOME` (an entry under a home that is
/// not set is left out, with a warning). The entries were checked when the settings loaded.
fn hidden_paths(entries: &[String], ambient: &[(String, String)]) -> Vec<PathBuf> {
    let home = ambient
        .iter()
        .find(|(k, v)| k == "HOME" && !v.is_empty())
        .map(|(_, v)| PathBuf::from(v));
    entries
        .iter()
        .filter_map(|entry| match entry.strip_prefix("~/") {
            Some(rest) => {
                if home.is_none() {
                    tracing::warn!(
                        entry,
                        "sandbox.hide: HOME is not set; this entry hides nothing"
                    );
                }
                home.as_ref().map(|h| h.join(rest))
            }
            None => Some(PathBuf::from(entry)),
        })
        .collect()
}

/// Where the providers other than `running` keep their logins (see
/// `corral_engine::CliAdapter::credential_paths`), found from the ambient environment: where
/// those CLIs keep them on this machine, whatever environment the running one gets. `None`
/// runs no provider (a sprint's commands): every provider's.
pub fn other_providers_credentials(
    running: Option<ProviderId>,
    ambient: &[(String, String)],
) -> Vec<PathBuf> {
    let env = corral_engine::ChildEnv::new(ambient);
    ProviderId::ALL
        .iter()
        .filter(|id| Some(**id) != running)
        .flat_map(|id| (descriptor(*id).credential_paths)(&env))
        .collect()
}

/// One provider's settings, for callers that need them (doctor, config show).
pub fn provider_settings(settings: &Settings, id: ProviderId) -> &ProviderSettings {
    settings.providers.get(id)
}

/// A provider that can run headless and hand over the terminal: every `SupervisedProvider`.
pub use corral_engine::SupervisedAi as Provider;

/// Provider `id` as its crate describes it. This `match` is the one place that names every
/// provider.
pub fn descriptor(id: ProviderId) -> &'static ProviderDescriptor {
    match id {
        ProviderId::Claude => &corral_claude::DESCRIPTOR,
        ProviderId::Codex => &corral_codex::DESCRIPTOR,
        ProviderId::Copilot => &corral_copilot::DESCRIPTOR,
        ProviderId::Opencode => &corral_opencode::DESCRIPTOR,
        ProviderId::Grok => &corral_grok::DESCRIPTOR,
        ProviderId::Gemini => &corral_gemini::DESCRIPTOR,
    }
}

/// Builds provider `id` on an engine configured by `config` (usually [`engine_config`]; tests
/// pass shorter timers here, never through the settings ranges).
pub fn provider(
    id: ProviderId,
    settings: &Settings,
    config: EngineConfig,
) -> Result<Arc<dyn Provider>, ComposeError> {
    let (engine, cli) = parts(id, settings, config)?;
    Ok((descriptor(id).provider)(engine, &cli)?)
}

/// Provider `id`'s account in the rate-limit gate of an engine configured by `config` (usually
/// [`engine_config`]): the account its runs would use, to read or record a hold on; `None` when
/// the engine keeps no gate.
pub fn provider_account(
    id: ProviderId,
    settings: &Settings,
    config: EngineConfig,
) -> Result<Option<corral_engine::ProviderAccount>, ComposeError> {
    Ok(provider(id, settings, config)?.account())
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

/// The supervised command runner (a sprint's check, gates, setup and git) on an engine
/// configured by `config` (usually [`engine_config`] of the settings): a sandboxed command gets
/// the sandbox, network and environment policy a run with these settings gets, and refuses where
/// a run would.
pub fn command_runner(config: EngineConfig) -> Arc<dyn CommandRunner> {
    let mut config = config;
    // A command runs no CLI: no provider's login is its to read.
    let credentials = other_providers_credentials(None, &config.ambient());
    config.sandbox.hide.extend(credentials);
    Arc::new(Engine::new(config))
}

/// The forge (the sprint's branch pushed, its pull request, issues) through `git` and `gh` on
/// the host, with the environment `config` gives programs (its ambient environment: the
/// host's network and the user's login are what these programs are for) and its kill grace
/// (ADR 0015).
pub fn forge(config: &EngineConfig) -> Arc<dyn corral_ports::Forge> {
    Arc::new(corral_host::HostForge {
        ambient: config.ambient(),
        timeout: corral_host::DEFAULT_TIMEOUT,
        kill_grace: config.kill_grace,
    })
}

/// Provider `id`'s model probe, starting what it must through an engine configured by `config`
/// (its spawner and environment setting), as a run with these settings would.
pub fn model_probe(
    id: ProviderId,
    settings: &Settings,
    config: EngineConfig,
) -> Result<Arc<dyn ModelAvailabilityProbe>, ComposeError> {
    let (engine, cli) = parts(id, settings, config)?;
    Ok((descriptor(id).probe)(&engine, &cli)?)
}

/// The engine and the shared settings provider `id` is built from.
fn parts(
    id: ProviderId,
    settings: &Settings,
    config: EngineConfig,
) -> Result<(Engine, CliSettings), ComposeError> {
    let mut config = config;
    let own = codex_inside_bubblewrap(id, settings.providers.get(id), &config)?;
    let own = &own;
    config.env_allow.extend(own.env_allow.iter().cloned());
    // The engine knows no provider: the others' logins reach its sandbox as paths to hide.
    let credentials = other_providers_credentials(Some(id), &config.ambient());
    config.sandbox.hide.extend(credentials);
    Ok((Engine::new(config), cli_settings(id, own)?))
}

/// Provider `id`'s settings as its runs on an engine configured by `config` need them. Under
/// bubblewrap, Codex runs without its own sandbox (`danger-full-access`): Corral's refuses the
/// nested user namespace that Codex's needs (see the engine's `sandbox::isolation_args`), and alone
/// decides what the agent may write and reach. A Codex sandbox the user chose cannot be built
/// there, and is refused naming the key rather than left to fail every command Codex runs.
fn codex_inside_bubblewrap(
    id: ProviderId,
    own: &ProviderSettings,
    config: &EngineConfig,
) -> Result<ProviderSettings, ComposeError> {
    let mut own = own.clone();
    // A comparison, not a match over every provider: the factory's `descriptor` is the one
    // place a new provider must be named, and a provider without a sandbox of its own needs
    // nothing here.
    if id != ProviderId::Codex || !config.sandbox.runs_in_bubblewrap() {
        return Ok(own);
    }
    match own.sandbox.as_deref() {
        None => own.sandbox = Some(CODEX_UNSANDBOXED.to_string()),
        Some(CODEX_UNSANDBOXED) => {}
        Some(other) => {
            return Err(ComposeError::BadSetting {
                provider: id,
                key: "sandbox",
                message: format!(
                    "Codex's own {other:?} sandbox needs a nested user namespace, which Corral's bubblewrap sandbox refuses the agent; leave it unset (Codex then runs confined by Corral's sandbox alone) or set sandbox.backend = \"native\" to run in Codex's sandbox only"
                ),
            });
        }
    }
    Ok(own)
}

/// Codex's sandbox mode without a sandbox of its own.
const CODEX_UNSANDBOXED: &str = "danger-full-access";

/// Provider `id`'s row in the capability table: what its CLI can and cannot do, as its adapter
/// declares it (with default settings).
pub fn capabilities(id: ProviderId) -> corral_ports::Capabilities {
    descriptor(id).capabilities.clone()
}

/// The settings file's `[providers.<id>]` as the settings every provider shares; provider-only
/// keys that are set go along for the provider to read (or refuse).
fn cli_settings(id: ProviderId, own: &ProviderSettings) -> Result<CliSettings, ComposeError> {
    let tested_versions = own
        .tested_versions
        .as_ref()
        .map(|v| {
            semver::VersionReq::parse(v).map_err(|e| ComposeError::BadSetting {
                provider: id,
                key: "tested_versions",
                message: format!("{v:?} is not a semver range: {e}"),
            })
        })
        .transpose()?;
    let mut options = Vec::new();
    if let Some(v) = &own.model_provider {
        options.push(("model_provider".to_string(), OptionValue::Text(v.clone())));
    }
    if let Some(v) = &own.sandbox {
        options.push(("sandbox".to_string(), OptionValue::Text(v.clone())));
    }
    if own.auto_approve {
        options.push(("auto_approve".to_string(), OptionValue::Flag(true)));
    }
    if let Some(n) = own.max_internal_retries {
        options.push(("max_internal_retries".to_string(), OptionValue::Count(n)));
    }
    Ok(CliSettings {
        command: own.command.as_ref().map(PathBuf::from),
        model: own.model.clone(),
        extra_args: own.args.clone(),
        tested_versions,
        allow_untested_version: own.allow_untested_version,
        options,
    })
}

/// What `corral doctor` needs to know about a provider without building it.
#[derive(Debug, Clone)]
pub struct ProviderFacts {
    /// The CLI's name for people.
    pub label: &'static str,
    /// The command that would run (settings override or the CLI's usual name).
    pub command: PathBuf,
    /// The tested version range (settings override or the provider's own).
    pub tested_versions: semver::VersionReq,
    /// The npm package that installs the CLI.
    pub npm_package: &'static str,
    /// Environment variables that carry credentials for it.
    pub credential_vars: &'static [&'static str],
    /// Files under `$HOME` that hold a login, when the CLI keeps one.
    pub credential_files: &'static [&'static str],
    /// Directories under `$HOME` where the CLI keeps its state.
    pub state_dirs: &'static [&'static str],
    /// The command that installs the version Corral was tested with (`npm install -g
    /// @anthropic-ai/claude-code@2.1.197`), or, when the settings' tested range leaves that
    /// version out, the newest of their range: never npm's `latest`, which may be past the range
    /// and then refused.
    pub install_command: String,
}

/// The version of provider `id`'s CLI its adapter was recorded and tested with: its
/// descriptor's pin, which is `cargo xtask install-clis`'s too (a test holds them equal, and
/// inside each descriptor's range).
pub fn tested_version(id: ProviderId) -> &'static str {
    descriptor(id).pinned_version
}

/// `npm install -g <package>@<version>` for the tested version, unless the settings' own tested
/// range (`overridden`) leaves it out: then for that range (npm's spelling, quoted for the
/// shell). The descriptor's own range is not compared with the pin: it is about what `--version`
/// prints, which for grok is not the package's version.
fn install_command(
    id: ProviderId,
    package: &str,
    range: &semver::VersionReq,
    overridden: bool,
) -> String {
    let tested = tested_version(id);
    match semver::Version::parse(tested) {
        Ok(v) if !overridden || range.matches(&v) => format!("npm install -g {package}@{tested}"),
        Ok(_) | Err(_) => format!(
            "npm install -g '{package}@{}'",
            range.to_string().replace(", ", " ")
        ),
    }
}

/// Facts about provider `id`, for diagnostics: its descriptor, with the settings applied.
pub fn provider_facts(id: ProviderId, settings: &Settings) -> ProviderFacts {
    let d = descriptor(id);
    let own = settings.providers.get(id);
    let tested_versions = own
        .tested_versions
        .as_deref()
        .and_then(|v| semver::VersionReq::parse(v).ok())
        .unwrap_or_else(d.tested_versions);
    ProviderFacts {
        label: d.label,
        command: own
            .command
            .as_ref()
            .map_or_else(|| PathBuf::from(d.command), PathBuf::from),
        install_command: install_command(
            id,
            d.npm_package,
            &tested_versions,
            own.tested_versions.is_some(),
        ),
        tested_versions,
        npm_package: d.npm_package,
        credential_vars: d.credential_vars,
        credential_files: d.credential_files,
        state_dirs: d.state_dirs,
    }
}

/// What `program --version` answered.
pub use corral_engine::VersionProbe as CliVersion;

/// Asks `program --version` through an engine configured by `config` (its spawner and
/// environment setting), within `timeout`, in `cwd`.
pub async fn cli_version(
    config: EngineConfig,
    program: &std::path::Path,
    cwd: &std::path::Path,
    timeout: Duration,
) -> CliVersion {
    Engine::new(config)
        .probe_version(program, cwd, timeout)
        .await
}
