//! Loading the layers, remembering where each value came from, and explaining bad values.

use std::fmt;
use std::path::{Path, PathBuf};

use figment::providers::{Format, Toml};
use figment::value::{Dict, Map, Value};
use figment::{Figment, Metadata, Profile, Provider};
use garde::Validate;

use crate::settings::Settings;

/// Prefix of the environment variables that set keys (`CORRAL_RUN__IDLE_WATCHDOG_MS`).
pub const ENV_PREFIX: &str = "CORRAL_";

const DEFAULTS_NAME: &str = "built-in default";
const ENV_NAME: &str = "environment";
const FLAGS_NAME: &str = "command-line flag";

/// Where settings come from. Every part is explicit, so tests never touch the real home or the
/// process environment.
#[derive(Debug, Clone, Default)]
pub struct SettingsSources {
    /// The user config file, if any (see [`SettingsSources::discover`]).
    pub user_config: Option<PathBuf>,
    /// The project config file, if any.
    pub project_config: Option<PathBuf>,
    /// The environment to read `CORRAL_*` variables from.
    pub env: Vec<(String, String)>,
    /// Values set by command-line flags, as `(key path, value)`, e.g. `("run.provider", "codex")`.
    pub flags: Vec<(String, serde_json::Value)>,
}

impl SettingsSources {
    /// The usual places: `$XDG_CONFIG_HOME/corral/config.toml` (else
    /// `$HOME/.config/corral/config.toml`), `<cwd>/corral.toml`, and the given environment.
    pub fn discover(cwd: &Path, env: Vec<(String, String)>) -> Self {
        let var = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        let user_dir = var("XDG_CONFIG_HOME")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .or_else(|| var("HOME").map(|h| PathBuf::from(h).join(".config")));
        SettingsSources {
            user_config: user_dir.map(|d| d.join("corral").join("config.toml")),
            project_config: Some(cwd.join("corral.toml")),
            env,
            flags: Vec::new(),
        }
    }
}

/// Where one value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SettingSource {
    /// Nobody set it.
    Default,
    /// A config file.
    File(PathBuf),
    /// An environment variable.
    Env(String),
    /// A command-line flag.
    Flag,
}

impl fmt::Display for SettingSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SettingSource::Default => f.write_str("default"),
            SettingSource::File(p) => write!(f, "{}", p.display()),
            SettingSource::Env(name) => write!(f, "env {name}"),
            SettingSource::Flag => f.write_str("flag"),
        }
    }
}

/// A leaf value with its source, for `corral config show`.
#[derive(Debug, Clone, PartialEq)]
pub struct ValueWithSource {
    /// Dotted key path.
    pub key: String,
    /// The value, as JSON.
    pub value: serde_json::Value,
    /// Where it came from.
    pub source: SettingSource,
}

/// Settings that are not acceptable. Not retryable: the named value must be fixed.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    /// A config file could not be read or parsed, or a value has the wrong type or an unknown key.
    #[error("{0}")]
    Load(String),
    /// Values out of range or malformed; each line names the key, the value and its source.
    #[error("invalid settings:\n{}", .0.iter().map(|l| format!("  - {l}")).collect::<Vec<_>>().join("\n"))]
    Invalid(Vec<String>),
}

/// Merged, validated settings and the layers they came from.
#[derive(Debug, Clone)]
pub struct LoadedSettings {
    /// The settings.
    pub settings: Settings,
    figment: Figment,
}

/// A provider built from a dictionary, with a fixed name (defaults, environment, flags).
struct Layer {
    name: &'static str,
    dict: Dict,
}

impl Provider for Layer {
    fn metadata(&self) -> Metadata {
        let md = Metadata::named(self.name);
        if self.name == ENV_NAME {
            md.interpolater(|_: &Profile, keys: &[&str]| {
                let upper: Vec<String> = keys.iter().map(|k| k.to_ascii_uppercase()).collect();
                format!("{ENV_PREFIX}{}", upper.join("__"))
            })
        } else {
            md
        }
    }

    fn data(&self) -> Result<Map<Profile, Dict>, figment::Error> {
        Ok(Profile::Default.collect(self.dict.clone()))
    }
}

fn nest(path: &[String], value: Value) -> Dict {
    let mut value = value;
    for key in path.iter().rev() {
        let mut dict = Dict::new();
        dict.insert(key.clone(), value);
        value = Value::from(dict);
    }
    value.into_dict().unwrap_or_default()
}

fn merge_into(target: &mut Dict, other: Dict) {
    for (k, v) in other {
        match (target.get_mut(&k), v) {
            (Some(Value::Dict(_, existing)), Value::Dict(_, incoming)) => {
                merge_into(existing, incoming)
            }
            (_, v) => {
                target.insert(k, v);
            }
        }
    }
}

fn env_layer(env: &[(String, String)]) -> Layer {
    let mut dict = Dict::new();
    for (name, raw) in env {
        let Some(rest) = name.strip_prefix(ENV_PREFIX) else {
            continue;
        };
        if rest.is_empty() {
            continue;
        }
        let path: Vec<String> = rest.split("__").map(|k| k.to_ascii_lowercase()).collect();
        // Same typing rules as figment's own Env provider: "300000" is a number, "[a, b]" a list.
        let value: Value = raw.parse().unwrap_or_else(|_| Value::from(raw.clone()));
        merge_into(&mut dict, nest(&path, value));
    }
    Layer {
        name: ENV_NAME,
        dict,
    }
}

fn json_layer(
    name: &'static str,
    pairs: &[(String, serde_json::Value)],
) -> Result<Layer, SettingsError> {
    let mut dict = Dict::new();
    for (key, json) in pairs {
        let value =
            Value::serialize(json).map_err(|e| SettingsError::Load(format!("{key}: {e}")))?;
        let path: Vec<String> = key.split('.').map(str::to_string).collect();
        merge_into(&mut dict, nest(&path, value));
    }
    Ok(Layer { name, dict })
}

impl LoadedSettings {
    /// Loads, merges and validates every layer.
    pub fn load(sources: &SettingsSources) -> Result<Self, SettingsError> {
        let defaults = Value::serialize(Settings::default())
            .map_err(|e| SettingsError::Load(e.to_string()))?
            .into_dict()
            .unwrap_or_default();
        let mut figment = Figment::from(Layer {
            name: DEFAULTS_NAME,
            dict: defaults,
        });
        for path in [&sources.user_config, &sources.project_config]
            .into_iter()
            .flatten()
        {
            if path.is_file() {
                figment = figment.merge(Toml::file_exact(path));
            }
        }
        figment = figment.merge(env_layer(&sources.env));
        figment = figment.merge(json_layer(FLAGS_NAME, &sources.flags)?);
        let settings: Settings = figment.extract().map_err(|e| {
            SettingsError::Load(
                e.into_iter()
                    .map(|e| e.to_string())
                    .collect::<Vec<_>>()
                    .join("\n"),
            )
        })?;
        let loaded = LoadedSettings { settings, figment };
        if let Err(report) = loaded.settings.validate() {
            let lines = report
                .iter()
                .map(|(path, error)| {
                    let key = path.to_string();
                    let (value, source) = loaded.describe(&key);
                    format!("{key} = {value} (from {source}): {}", error.message())
                })
                .collect();
            return Err(SettingsError::Invalid(lines));
        }
        Ok(loaded)
    }

    fn describe(&self, key: &str) -> (String, SettingSource) {
        let value = self
            .figment
            .find_value(key)
            .ok()
            .and_then(|v| v.deserialize::<serde_json::Value>().ok())
            .map_or_else(|| "?".to_string(), |v| v.to_string());
        (value, self.source_of(key))
    }

    /// Where the value at `key` (dotted path) came from.
    pub fn source_of(&self, key: &str) -> SettingSource {
        let Some(md) = self.figment.find_metadata(key) else {
            return SettingSource::Default;
        };
        match md.name.as_ref() {
            DEFAULTS_NAME => SettingSource::Default,
            FLAGS_NAME => SettingSource::Flag,
            ENV_NAME => {
                let keys: Vec<&str> = key.split('.').collect();
                SettingSource::Env(md.interpolate(&Profile::Default, &keys))
            }
            _ => match &md.source {
                Some(figment::Source::File(path)) => SettingSource::File(path.clone()),
                Some(other) => SettingSource::File(PathBuf::from(other.to_string())),
                None => SettingSource::Default,
            },
        }
    }

    /// Every leaf value with its source, sorted by key.
    pub fn entries(&self) -> Vec<ValueWithSource> {
        let mut out = Vec::new();
        if let Ok(json) = serde_json::to_value(&self.settings) {
            self.walk(String::new(), &json, &mut out);
        }
        out
    }

    fn walk(&self, prefix: String, value: &serde_json::Value, out: &mut Vec<ValueWithSource>) {
        match value.as_object() {
            Some(map) if !map.is_empty() => {
                for (k, v) in map {
                    let key = if prefix.is_empty() {
                        k.clone()
                    } else {
                        format!("{prefix}.{k}")
                    };
                    self.walk(key, v, out);
                }
            }
            _ => out.push(ValueWithSource {
                source: self.source_of(&prefix),
                key: prefix,
                value: value.clone(),
            }),
        }
    }
}
