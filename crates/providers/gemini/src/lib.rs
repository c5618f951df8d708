//! Corral's adapter for Google's Gemini CLI (`@google/gemini-cli`, tested with 0.61.0): the
//! command line ([`adapter`]), the `stream-json` parser ([`parser`]), the failure patterns only
//! Gemini's wording reveals, the model probe, and the [`DESCRIPTOR`] the composition root builds
//! it from. It knows nothing about any other provider or about Corral's settings files.
//!
//! The auth-type trap, which this crate reports rather than fixes: headless Gemini takes its auth
//! type from `security.auth.selectedType` in a settings file, else from the environment, where
//! `GOOGLE_GEMINI_BASE_URL` (a gateway, or the test suite's fake API) makes it `gateway`, which
//! headless mode refuses with exit 41 (`Invalid auth method selected.`). Against Google's own API
//! `GEMINI_API_KEY` alone is enough. With a base URL, the account Corral runs as needs
//! `{"security":{"auth":{"selectedType":"gemini-api-key"}}}` in `~/.gemini/settings.json` (or in
//! the file `GEMINI_CLI_SYSTEM_SETTINGS_PATH` names). The adapter never writes that file: it is a
//! protected path, and an adapter that rewrote the user's settings would also rewrite their hooks
//! and MCP servers. A run that hits the trap is refused with the sentence to add.

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

pub use adapter::GeminiAdapter;
pub use diagnose::{EXIT_AUTH, EXIT_INPUT, EXIT_TURN_FAILED};
pub use parser::GeminiStreamParser;
pub use probe::GeminiProbe;
pub use settings::{GeminiSettings, default_tested_versions};

/// The headless Gemini provider: this adapter driven by `engine`.
pub fn headless(engine: Engine, settings: GeminiSettings) -> SupervisedProvider<GeminiAdapter> {
    SupervisedProvider::new(engine, GeminiAdapter::new(settings))
}

/// What Corral knows about this provider without running it, and how to build it: read by the
/// composition root, `corral doctor` and `corral providers`.
pub const DESCRIPTOR: ProviderDescriptor = ProviderDescriptor {
    id: ProviderId::Gemini,
    label: "Gemini CLI",
    command: "gemini",
    npm_package: "@google/gemini-cli",
    pinned_version: "0.61.0",
    credential_vars: CREDENTIAL_VARS,
    credential_files: &[
        ".gemini/oauth_creds.json",
        ".gemini/google_accounts.json",
        ".gemini/gemini-credentials.json",
        ".gemini/.env",
    ],
    credential_paths: |env| {
        corral_engine::CliAdapter::credential_paths(&GeminiAdapter::default(), env)
    },
    state_dirs: &[".gemini"],
    tested_versions: default_tested_versions,
    capabilities: adapter::CAPABILITIES,
    options: &[],
    provider: |engine, cli| Ok(Arc::new(headless(engine, settings(cli)?))),
    probe: |engine, cli| Ok(Arc::new(GeminiProbe::with_engine(&settings(cli)?, engine))),
};

/// Environment variables that carry credentials for the CLI.
const CREDENTIAL_VARS: &[&str] = &[
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "GOOGLE_CLOUD_ACCESS_TOKEN",
];

/// This provider's settings from the ones every provider shares.
fn settings(cli: &CliSettings) -> Result<GeminiSettings, SettingError> {
    cli.refuse_unknown(ProviderId::Gemini, DESCRIPTOR.options)?;
    let mut s = GeminiSettings::default();
    cli.apply(CommonFields {
        command: &mut s.command,
        model: &mut s.model,
        extra_args: &mut s.extra_args,
        tested_versions: &mut s.tested_versions,
        allow_untested_version: &mut s.allow_untested_version,
    });
    Ok(s)
}
