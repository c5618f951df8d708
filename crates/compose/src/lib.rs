//! The composition root of Corral: layered settings and the provider factory.
//!
//! Settings come from built-in defaults < the user config (`$XDG_CONFIG_HOME/corral/config.toml`,
//! else `~/.config/corral/config.toml`) < the project's `corral.toml` < `CORRAL_*` environment
//! variables (nested keys joined with `__`) < command-line flags. They are validated with garde,
//! and every error names the key, the bad value and the layer it came from. The project file is
//! not trusted: it may not set the keys that decide the sandbox, the programs, their arguments
//! and environment (see the `trust` module and `docs/security.md`). The factory turns
//! settings into a ready provider with one exhaustive `match` on `ProviderId`.
//!
//! This is the only crate that reads settings and the only one that names every provider. It
//! knows nothing about the terminal: rendering belongs to the CLI.

mod factory;
mod layers;
mod settings;
mod trust;

pub use factory::{
    ComposeError, Provider, ProviderFacts, available, capabilities, engine_config,
    headless_provider, interactive_provider, provider, provider_facts, provider_settings,
};
pub use layers::{
    ENV_PREFIX, LoadedSettings, SettingSource, SettingsError, SettingsSources, TrustedFile,
    ValueWithSource, trust_project_file,
};
pub use settings::{
    EnvSettings, ProviderSettings, ProvidersSettings, RetrySettings, RunSettings, SandboxSettings,
    Settings, settings_json_schema,
};
pub use trust::{
    KEYS as TRUST_TABLE, ProjectMay, TRUST_STORE_FILE, UntrustedKey, Who, who_may_set,
};
