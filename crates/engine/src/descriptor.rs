//! A provider described once: what its crate states about itself, for the composition root,
//! `corral doctor` and `corral providers` to read, and how to build it from plain settings.
//!
//! Each provider crate exports one [`ProviderDescriptor`] named `DESCRIPTOR`: its id and label,
//! the program it runs and the npm package that installs it, where its credentials and its state
//! live, its tested version range and capability row, the provider-only settings keys it reads,
//! and two constructors that take the settings every provider shares ([`CliSettings`]). The
//! composition root maps its settings file onto [`CliSettings`] once and names each provider in
//! exactly one place, the `match` that picks the descriptor.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use corral_ports::{
    Capabilities, HeadlessAiProvider, InteractiveAiProvider, ModelAvailabilityProbe, ProviderId,
};

use crate::adapter::{ChildEnv, CliAdapter, VersionCheck};
use crate::endpoints::ProviderEndpoints;
use crate::engine::{Engine, SupervisedProvider};
use crate::gate::ProviderAccount;

/// A provider that runs headless and hands over the terminal: every `SupervisedProvider`.
pub trait SupervisedAi: HeadlessAiProvider + InteractiveAiProvider {
    /// The provider account its runs use in the engine's rate-limit gate (`None` when the
    /// engine keeps no gate): whether the account is held, and until when.
    fn account(&self) -> Option<ProviderAccount>;
    /// The network endpoints its runs would need, known before any spawn (for `corral doctor`).
    fn endpoints(&self) -> ProviderEndpoints;
}

impl<A: CliAdapter> SupervisedAi for SupervisedProvider<A> {
    fn account(&self) -> Option<ProviderAccount> {
        let adapter = self.adapter();
        ProviderAccount::of(
            self.engine().config(),
            adapter.provider(),
            &adapter.env_profile(),
        )
    }

    fn endpoints(&self) -> ProviderEndpoints {
        ProviderEndpoints::of(self.engine().config(), self.adapter())
    }
}

/// A provider-only setting's value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OptionValue {
    /// A text (`providers.codex.sandbox = "read-only"`).
    Text(String),
    /// A switch (`providers.opencode.auto_approve = true`).
    Flag(bool),
    /// A count (`providers.claude.max_internal_retries = 3`).
    Count(u32),
}

/// The settings every provider reads, as the composition root hands them over. `None` and empty
/// fields leave the provider's own default.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CliSettings {
    /// The program: a path, or a name looked up on the child's `PATH`.
    pub command: Option<PathBuf>,
    /// The model when the session names none.
    pub model: Option<String>,
    /// Arguments appended to every invocation.
    pub extra_args: Vec<String>,
    /// The tested version range, overriding the provider's own.
    pub tested_versions: Option<semver::VersionReq>,
    /// Run even when the installed version is outside the tested range.
    pub allow_untested_version: bool,
    /// Provider-only keys that were set (`providers.<id>.<key>`), for the provider to read; a
    /// key the provider does not read is refused ([`CliSettings::refuse_unknown`]).
    pub options: Vec<(String, OptionValue)>,
}

/// The fields of a provider's own settings struct that [`CliSettings`] fills.
#[derive(Debug)]
pub struct CommonFields<'a> {
    /// The program.
    pub command: &'a mut PathBuf,
    /// The default model.
    pub model: &'a mut Option<String>,
    /// The extra arguments.
    pub extra_args: &'a mut Vec<String>,
    /// The tested version range.
    pub tested_versions: &'a mut semver::VersionReq,
    /// The untested-version override.
    pub allow_untested_version: &'a mut bool,
}

impl CliSettings {
    /// Writes what was set over a provider's defaults.
    pub fn apply(&self, fields: CommonFields<'_>) {
        if let Some(command) = &self.command {
            *fields.command = command.clone();
        }
        *fields.model = self.model.clone();
        *fields.extra_args = self.extra_args.clone();
        if let Some(range) = &self.tested_versions {
            *fields.tested_versions = range.clone();
        }
        *fields.allow_untested_version = self.allow_untested_version;
    }

    /// The text option `key`, when set.
    pub fn text(&self, key: &str) -> Option<&str> {
        self.options.iter().find_map(|(k, v)| match v {
            OptionValue::Text(text) if k == key => Some(text.as_str()),
            OptionValue::Text(_) | OptionValue::Flag(_) | OptionValue::Count(_) => None,
        })
    }

    /// The count option `key`, when set.
    pub fn count(&self, key: &str) -> Option<u32> {
        self.options.iter().find_map(|(k, v)| match v {
            OptionValue::Count(n) if k == key => Some(*n),
            OptionValue::Text(_) | OptionValue::Flag(_) | OptionValue::Count(_) => None,
        })
    }

    /// The switch `key`; off when not set.
    pub fn flag(&self, key: &str) -> bool {
        self.options
            .iter()
            .any(|(k, v)| k == key && *v == OptionValue::Flag(true))
    }

    /// Refuses a provider-only key that `provider` does not read (it belongs to another one):
    /// a setting that silently does nothing is a bug waiting to happen.
    pub fn refuse_unknown(&self, provider: ProviderId, known: &[&str]) -> Result<(), SettingError> {
        match self
            .options
            .iter()
            .find(|(k, _)| !known.contains(&k.as_str()))
        {
            None => Ok(()),
            Some((key, _)) => Err(SettingError {
                provider,
                key: key.clone(),
                message: format!("{provider} reads no such key; it belongs to another provider"),
            }),
        }
    }
}

/// A setting a provider cannot use. Not retryable: the settings must change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("providers.{provider}.{key}: {message}")]
pub struct SettingError {
    /// The provider.
    pub provider: ProviderId,
    /// The key under `providers.<id>`.
    pub key: String,
    /// What is wrong.
    pub message: String,
}

/// Builds a provider on an engine from the shared settings.
pub type BuildProvider = fn(Engine, &CliSettings) -> Result<Arc<dyn SupervisedAi>, SettingError>;

/// Builds a provider's model probe, starting processes through an engine.
pub type BuildProbe =
    fn(&Engine, &CliSettings) -> Result<Arc<dyn ModelAvailabilityProbe>, SettingError>;

/// Everything about a provider that is known without running it, and how to build it.
#[derive(Debug, Clone)]
pub struct ProviderDescriptor {
    /// The provider.
    pub id: ProviderId,
    /// Its CLI's name for people (`Claude Code`).
    pub label: &'static str,
    /// The program it runs when the settings name none (`claude`).
    pub command: &'static str,
    /// The npm package that installs the CLI.
    pub npm_package: &'static str,
    /// The package version its adapter was recorded and tested with: what `corral doctor`
    /// tells a user to install (`npm install -g <npm_package>@<pinned_version>`), and the pin of
    /// `cargo xtask install-clis` (a test holds them equal).
    pub pinned_version: &'static str,
    /// Environment variables that carry credentials for it.
    pub credential_vars: &'static [&'static str],
    /// Files under `$HOME` that hold a login, when the CLI keeps one.
    pub credential_files: &'static [&'static str],
    /// Where the CLI keeps its login, from an environment: its adapter's
    /// [`CliAdapter::credential_paths`] with default settings. The composition root hides them
    /// from every other provider's sandbox.
    pub credential_paths: fn(&ChildEnv<'_>) -> Vec<PathBuf>,
    /// Directories under `$HOME` where the CLI keeps its state (sessions, caches), whose size
    /// slows its start when it grows.
    pub state_dirs: &'static [&'static str],
    /// The version range its adapter was tested against.
    pub tested_versions: fn() -> semver::VersionReq,
    /// Its row in the capability table.
    pub capabilities: Capabilities,
    /// The provider-only settings keys it reads (`providers.<id>.<key>`).
    pub options: &'static [&'static str],
    /// The provider, driven by `engine`.
    pub provider: BuildProvider,
    /// Its model probe, which starts what it must through `engine`.
    pub probe: BuildProbe,
}

impl VersionCheck {
    /// `program --version`, compared with `required`: what every provider asks its CLI.
    pub fn dash_version(
        program: &Path,
        required: &semver::VersionReq,
        timeout: Duration,
        allow_mismatch: bool,
    ) -> Self {
        VersionCheck {
            program: program.to_path_buf(),
            args: vec!["--version".to_string()],
            required: required.clone(),
            timeout,
            allow_mismatch,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_options(options: &[(&str, OptionValue)]) -> CliSettings {
        CliSettings {
            options: options
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
            ..CliSettings::default()
        }
    }

    #[test]
    fn options_are_read_by_kind_and_foreign_ones_refused() {
        let cli = with_options(&[
            ("sandbox", OptionValue::Text("read-only".into())),
            ("auto_approve", OptionValue::Flag(true)),
        ]);
        assert_eq!(cli.text("sandbox"), Some("read-only"));
        assert_eq!(cli.text("auto_approve"), None);
        assert!(cli.flag("auto_approve"));
        assert!(!cli.flag("sandbox"));
        assert_eq!(
            cli.refuse_unknown(ProviderId::Codex, &["sandbox"])
                .unwrap_err()
                .to_string(),
            "providers.codex.auto_approve: codex reads no such key; it belongs to another provider"
        );
        assert_eq!(
            cli.refuse_unknown(ProviderId::Codex, &["sandbox", "auto_approve"]),
            Ok(())
        );
    }

    #[test]
    fn set_fields_override_the_providers_defaults_and_unset_ones_keep_them() {
        let mut command = PathBuf::from("claude");
        let mut model = None;
        let mut extra_args = Vec::new();
        let mut tested_versions = semver::VersionReq::parse(">=1").unwrap();
        let mut allow = false;
        let cli = CliSettings {
            model: Some("m".into()),
            extra_args: vec!["--x".into()],
            allow_untested_version: true,
            ..CliSettings::default()
        };
        cli.apply(CommonFields {
            command: &mut command,
            model: &mut model,
            extra_args: &mut extra_args,
            tested_versions: &mut tested_versions,
            allow_untested_version: &mut allow,
        });
        assert_eq!(command, PathBuf::from("claude"));
        assert_eq!(model.as_deref(), Some("m"));
        assert_eq!(extra_args, ["--x"]);
        assert_eq!(tested_versions.to_string(), ">=1");
        assert!(allow);
    }
}
