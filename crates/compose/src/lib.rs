//! The composition root of Corral: layered settings and the provider factory.
//!
//! Settings come from built-in defaults < the user config (`$XDG_CONFIG_HOME/corral/config.toml`,
//! else `~/.config/corral/config.toml`) < the project's `corral.toml` < `CORRAL_*` environment
//! variables (nested keys joined with `__`) < command-line flags. They are validated with garde,
//! and every error names the key, the bad value and the layer it came from. The project file is
//! not trusted: it may not set the keys that decide the sandbox, the programs, their arguments
//! and environment (see the `trust` module and `docs/security.md`). The factory turns settings
//! into a ready provider, or its model probe, from the provider's descriptor, picked by one
//! exhaustive `match` on `ProviderId`, and into the supervised command runner a sprint's checks
//! and git go through. It also owns the run directory and its record
//! (`run.json`), which every caller writes alike, and the corrective-retry policy: a task run
//! until the agent's `signals.json` satisfies the contract ([`run_with_contract`]); and it builds
//! the agents that play a sprint's roles ([`role_agent()`], ADR 0005) and the executor its
//! parallel tasks run through ([`task_executor()`], `executor.kind`, ADR 0007), and it runs the
//! preflight's cheap request through a role's CLI ([`cheap_request`]).
//!
//! This is the only crate that reads settings and the only one that names every provider. It
//! knows nothing about the terminal: rendering belongs to the CLI.

mod contract_run;
mod executor;
mod factory;
mod layers;
mod preflight;
mod role_agent;
mod run_record;
mod settings;
mod spans;
mod spawn;
mod trust;

pub use contract_run::{ContractPolicy, ContractRun, SignalsVerdict, run_with_contract};
/// What the binary needs of the signals contract, through the composition root: the contract a
/// run asks for, the prompt section that states it, the error a check reports, and the check
/// and corrective message for a session that ran outside a spawn (an interactive handoff).
pub use corral_contract::{
    Contract, SignalsError, corrective_message, render_contract_section, validate_signals_file,
};
/// What the binary needs of the engine, through the composition root: the engine's
/// configuration (tests tune it), ending every process group of this process's children on a
/// second signal, the run directory's crash-safe record writes, finding a program to run on
/// the host (never one the agent could have planted), and whether bubblewrap works here (for
/// `corral doctor`), and a provider account's hold in the rate-limit gate (for
/// `corral sprint status`; tests plant one where the user's state directory would be).
pub use corral_engine::{
    AccountHold, BackendChoice, BackendReadiness, CONTAINER_RUNTIME, EngineConfig, HOST_CWD,
    HostProgramError, ProviderAccount, ProviderEndpoints, allow_hint, backend_limits_readiness,
    backend_readiness, bubblewrap_usable, container_limits, host_program, kill_child_groups,
    limits_readiness, record_copy, repair_run_dir, user_rate_limit_dir, write_record_file,
};
pub use executor::{local_executor, task_executor};
pub use factory::{
    CliVersion, ComposeError, Provider, ProviderFacts, capabilities, cli_version, command_runner,
    descriptor, engine_config, forge, headless_provider, interactive_provider, model_probe,
    other_providers_credentials, provider, provider_account, provider_facts, provider_settings,
    tested_version,
};
pub use layers::{
    ENV_PREFIX, LoadedSettings, PROJECT_FILE, SettingSource, SettingsError, SettingsSources,
    TrustedFile, ValueWithSource, project_root, trust_project_file,
};
pub use preflight::{CheapAnswer, CheapOk, CheapRequest, PREFLIGHT_PROMPT_OPENING, cheap_request};
pub use role_agent::role_agent;
pub use run_record::{
    Journal, RunRecord, RunRecordError, STATE_GITIGNORE, Supervisor, create_run_dir,
    ignore_state_dir, new_run_id, now, read_record, write_record,
};
pub use settings::{
    EnvSettings, ExecutorKind, ExecutorSettings, LimitsSettings, PriceSettings, ProviderSettings,
    ProvidersSettings, RaySettings, RetrySettings, RunSettings, SandboxSettings, Settings,
    settings_json_schema,
};
pub use spawn::{NoHooks, ResumedBy, Spawn, SpawnEnd, SpawnHooks, SpawnPlan, resume_command};
pub use trust::{
    KEYS as TRUST_TABLE, ProjectMay, TRUST_STORE_FILE, UntrustedKey, Who, content_digest,
    who_may_set,
};
