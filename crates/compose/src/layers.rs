//! Loading the layers, remembering where each value came from, and explaining bad values.

use std::fmt;
use std::path::{Path, PathBuf};

use corral_ports::ProviderId;
use figment::providers::{Format, Toml};
use figment::value::{Dict, Map, Value};
use figment::{Figment, Metadata, Profile, Provider};
use garde::Validate;

use crate::settings::Settings;
use crate::trust::{self, UntrustedKey};

/// Prefix of the environment variables that set keys (`CORRAL_RUN__IDLE_WATCHDOG_MS`).
pub const ENV_PREFIX: &str = "CORRAL_";

/// Variables Corral sets in a child itself (the run token in every one, the egress proxy's address
/// in a confined sandbox); a `corral` run inside a supervised CLI sees them, and they are not
/// settings.
const OWN_CHILD_VARS: &[&str] = &[
    corral_engine::RUN_TOKEN_VAR,
    corral_engine::PROXY_ADDRESS_VAR,
];

/// The largest settings file read.
const SETTINGS_FILE_MAX_BYTES: u64 = 1024 * 1024;

const DEFAULTS_NAME: &str = "built-in default";
const FILE_NAME: &str = "TOML file";
const ENV_NAME: &str = "environment";
const FLAGS_NAME: &str = "command-line flag";

/// Where settings come from. Every part is explicit, so tests never touch the real home or the
/// process environment.
#[derive(Debug, Clone, Default)]
pub struct SettingsSources {
    /// The user config file, if any (see [`SettingsSources::discover`]).
    pub user_config: Option<PathBuf>,
    /// The project config file, if any. It may set only what the `trust` module allows, unless the
    /// trust store trusts it.
    pub project_config: Option<PathBuf>,
    /// The trust store: project files the user trusted with their exact content (see
    /// the `trust` module).
    pub trust_store: Option<PathBuf>,
    /// The environment to read `CORRAL_*` variables from.
    pub env: Vec<(String, String)>,
    /// Values set by command-line flags, as `(key path, value)`, e.g. `("run.provider", "codex")`.
    pub flags: Vec<(String, serde_json::Value)>,
    /// The project's root: where `corral.toml` is, and what a relative `run.runs_dir` is under
    /// (see [`project_root`]).
    pub project_root: PathBuf,
}

/// The project's root for a command run in `cwd`: the nearest directory at or above `cwd` that
/// holds a `corral.toml`, looking no further up than the git work tree's top (the nearest
/// directory with a `.git`), which is the root when no `corral.toml` is found; `cwd` itself when
/// neither is found. So settings and runs are the same from any subdirectory of the project, as
/// with cargo, uv and git, and a `corral.toml` above the repository never applies to it.
pub fn project_root(cwd: &Path) -> PathBuf {
    for dir in cwd.ancestors() {
        if dir.join(PROJECT_FILE).is_file() || dir.join(".git").exists() {
            return dir.to_path_buf();
        }
    }
    cwd.to_path_buf()
}

/// The project file's name.
pub const PROJECT_FILE: &str = "corral.toml";

impl SettingsSources {
    /// The usual places: `$XDG_CONFIG_HOME/corral/config.toml` (else
    /// `$HOME/.config/corral/config.toml`) with the trust store beside it, the `corral.toml` of
    /// the project `cwd` is in (see [`project_root`]), and the given environment.
    pub fn discover(cwd: &Path, env: Vec<(String, String)>) -> Self {
        let root = project_root(cwd);
        let var = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        let user_dir = var("XDG_CONFIG_HOME")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .or_else(|| var("HOME").map(|h| PathBuf::from(h).join(".config")));
        let corral_dir = user_dir.map(|d| d.join("corral"));
        SettingsSources {
            user_config: corral_dir.as_ref().map(|d| d.join("config.toml")),
            trust_store: corral_dir.map(|d| d.join(trust::TRUST_STORE_FILE)),
            project_config: Some(root.join(PROJECT_FILE)),
            env,
            flags: Vec::new(),
            project_root: root,
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
    /// Values that cannot be read: unknown keys, wrong types. Each line names the key, where
    /// it came from and what is wrong; every such value is reported, not only the first.
    #[error("bad settings:\n{}", .0.iter().map(|l| format!("  - {l}")).collect::<Vec<_>>().join("\n"))]
    Malformed(Vec<String>),
    /// Values out of range or malformed; each line names the key, the value and its source.
    #[error("invalid settings:\n{}", .0.iter().map(|l| format!("  - {l}")).collect::<Vec<_>>().join("\n"))]
    Invalid(Vec<String>),
    /// The project file sets keys only the user's own settings may set (see the `trust` module),
    /// and the user has not trusted it as it is. The run would otherwise let whoever wrote the
    /// file (a cloned repository, an earlier agent) choose the sandbox, the programs or the
    /// environment.
    #[error("{}", untrusted_message(file, keys, user_config.as_deref(), *trusted_before))]
    Untrusted {
        /// The project file.
        file: PathBuf,
        /// Each key it may not set, with its value.
        keys: Vec<UntrustedKey>,
        /// Where the user config is, for the hint.
        user_config: Option<PathBuf>,
        /// Whether the trust store names this file with another content.
        trusted_before: bool,
    },
}

fn untrusted_message(
    file: &Path,
    keys: &[UntrustedKey],
    user_config: Option<&Path>,
    trusted_before: bool,
) -> String {
    let mut text = format!(
        "{} sets settings that only your own config, the environment or a flag may set:",
        file.display()
    );
    for key in keys {
        text.push_str(&format!("\n  - {key}"));
    }
    if trusted_before {
        text.push_str("\nit was trusted with other content: it changed since");
    }
    let user = user_config.map_or_else(
        || "your user config".to_string(),
        |p| p.display().to_string(),
    );
    text.push_str(&format!(
        "\nhint: a project file comes with the repository and an agent can rewrite it; set these in {user}, as CORRAL_* variables or as flags, or, once you have read the file, trust it as it is now with `corral config trust`"
    ));
    text
}

/// Merged, validated settings and the layers they came from.
#[derive(Debug, Clone)]
pub struct LoadedSettings {
    /// The settings.
    pub settings: Settings,
    /// The project's root (see [`project_root`]).
    pub project_root: PathBuf,
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

/// Turns a duration written as text (`"5m"`, `"90s"`, `"2h"`, `"1h 30m"`) under any `*_ms` key
/// of `dict` into its milliseconds, so a settings file or variable takes what the flags take.
/// Text that is not a duration is left for the type check to name.
fn durations_to_ms(dict: &mut Dict) {
    for (key, value) in dict.iter_mut() {
        match value {
            Value::Dict(_, inner) => durations_to_ms(inner),
            Value::String(tag, text) if key.ends_with("_ms") => {
                if let Ok(d) = humantime::parse_duration(text.trim()) {
                    let ms = u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
                    *value = Value::Num(*tag, figment::value::Num::U64(ms));
                }
            }
            // A list of durations is no setting's: left as it is, like any other value.
            Value::String(..)
            | Value::Char(..)
            | Value::Bool(..)
            | Value::Num(..)
            | Value::Empty(..)
            | Value::Array(..) => {}
        }
    }
}

fn env_layer(env: &[(String, String)]) -> Layer {
    let mut dict = Dict::new();
    for (name, raw) in env {
        let Some(rest) = name.strip_prefix(ENV_PREFIX) else {
            continue;
        };
        if OWN_CHILD_VARS.contains(&name.as_str()) {
            continue;
        }
        if rest.is_empty() {
            continue;
        }
        let path: Vec<String> = rest.split("__").map(|k| k.to_ascii_lowercase()).collect();
        // Same typing rules as figment's own Env provider: "300000" is a number, "[a, b]" a list.
        let value: Value = raw.parse().unwrap_or_else(|_| Value::from(raw.clone()));
        merge_into(&mut dict, nest(&path, value));
    }
    durations_to_ms(&mut dict);
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

/// A settings file, read once: the bytes that are checked are the bytes that are merged.
struct SettingsFile {
    path: PathBuf,
    /// The content as text, to point at a bad key's line and column.
    text: String,
    content: Vec<u8>,
    dict: Dict,
}

impl SettingsFile {
    /// Reads and parses the file at `path`; `None` when there is none. The file is read without
    /// blocking (a FIFO or a link to a device is an error, not a hang).
    fn read(path: &Path) -> Result<Option<Self>, SettingsError> {
        let content = match corral_contract::read_untrusted_file(path, SETTINGS_FILE_MAX_BYTES) {
            Ok(content) => content,
            Err(corral_contract::UntrustedFileError::Missing { .. }) => return Ok(None),
            Err(e) => return Err(SettingsError::Load(format!("cannot read settings: {e}"))),
        };
        let text = String::from_utf8(content.clone())
            .map_err(|_| SettingsError::Load(format!("{}: not UTF-8 text", path.display())))?;
        let mut dict = Toml::string(&text)
            .data()
            .map_err(|e| SettingsError::Load(format!("{}: {e}", path.display())))?
            .remove(&Profile::Default)
            .unwrap_or_default();
        durations_to_ms(&mut dict);
        Ok(Some(SettingsFile {
            path: path.to_path_buf(),
            text,
            content,
            dict,
        }))
    }

    /// Refuses a project file that sets user-only keys, unless the trust store trusts it with
    /// this exact content.
    fn check_trust(&self, sources: &SettingsSources) -> Result<(), SettingsError> {
        let keys = trust::untrusted_keys(&self.dict);
        if keys.is_empty() {
            return Ok(());
        }
        let path = std::fs::canonicalize(&self.path).unwrap_or_else(|_| self.path.clone());
        let digest = trust::content_digest(&self.content);
        let store = sources.trust_store.as_deref();
        if trust::is_trusted(store, &path, &digest) {
            return Ok(());
        }
        Err(SettingsError::Untrusted {
            file: self.path.clone(),
            keys,
            user_config: sources.user_config.clone(),
            trusted_before: trust::is_listed(store, &path),
        })
    }
}

impl Provider for SettingsFile {
    fn metadata(&self) -> Metadata {
        Metadata::from(FILE_NAME, figment::Source::File(self.path.clone()))
    }

    fn data(&self) -> Result<Map<Profile, Dict>, figment::Error> {
        Ok(Profile::Default.collect(self.dict.clone()))
    }
}

/// A layer with some keys taken out, to merge the layers again past a value that cannot be read.
struct Without<'a, P> {
    layer: &'a P,
    skip: &'a [Vec<String>],
}

impl<'a, P: Provider> Without<'a, P> {
    fn new(layer: &'a P, skip: &'a [Vec<String>]) -> Self {
        Without { layer, skip }
    }
}

fn remove_path(dict: &mut Dict, path: &[String]) {
    match path {
        [] => {}
        [last] => {
            dict.remove(last);
        }
        [first, rest @ ..] => {
            if let Some(Value::Dict(_, inner)) = dict.get_mut(first) {
                remove_path(inner, rest);
            }
        }
    }
}

impl<P: Provider> Provider for Without<'_, P> {
    fn metadata(&self) -> Metadata {
        self.layer.metadata()
    }

    fn data(&self) -> Result<Map<Profile, Dict>, figment::Error> {
        let mut data = self.layer.data()?;
        for dict in data.values_mut() {
            for path in self.skip {
                remove_path(dict, path);
            }
        }
        Ok(data)
    }
}

/// At most this many unreadable values are reported at once.
const MAX_LOAD_ERRORS: usize = 32;

/// Every value that cannot be read, one line each: `first`, then what merging the layers
/// without each reported key turns up, until nothing does. Also returns the keys left out, so
/// the rest can still be validated in the same pass.
fn every_load_error(
    first: figment::Error,
    merged: impl Fn(&[Vec<String>]) -> Figment,
    files: &[&SettingsFile],
) -> (Vec<String>, Vec<Vec<String>>) {
    let mut lines = Vec::new();
    let mut skip: Vec<Vec<String>> = Vec::new();
    let mut error = first;
    loop {
        let mut progress = false;
        for e in error {
            lines.push(describe_load_error(&e, files));
            if !e.path.is_empty() && !skip.contains(&e.path) {
                skip.push(e.path.clone());
                progress = true;
            }
        }
        if !progress || lines.len() >= MAX_LOAD_ERRORS {
            return (lines, skip);
        }
        match merged(&skip).extract::<Settings>() {
            Ok(_) => return (lines, skip),
            Err(next) => error = next,
        }
    }
}

/// `file:line:column` of the key at `path` in one of `files`, and its line under it, when the
/// value came from a file; `None` otherwise (a variable, a flag, a default).
fn file_spot(file: &Path, path: &[String], files: &[&SettingsFile]) -> Option<(String, String)> {
    let settings_file = files.iter().find(|f| f.path == file)?;
    let spot = crate::spans::locate(&settings_file.text, path)?;
    Some((
        format!("{}:{}:{}", file.display(), spot.line, spot.column),
        format!("{:>4} | {}", spot.line, crate::spans::inert(&spot.text)),
    ))
}

/// A problem with the value at `key` (dotted), where it is: `file:line:column: key: problem`
/// with the line quoted under it for a file, else `key (from source): problem`.
fn located(
    key: &str,
    path: &[String],
    from: Option<&Path>,
    source: &str,
    problem: &str,
    files: &[&SettingsFile],
) -> String {
    match from.and_then(|f| file_spot(f, path, files)) {
        Some((at, quoted)) => {
            if key.is_empty() {
                format!("{at}: {problem}\n    {quoted}")
            } else {
                format!("{at}: {key}: {problem}\n    {quoted}")
            }
        }
        None if key.is_empty() => format!("{source}: {problem}"),
        None => format!("{key} (from {source}): {problem}"),
    }
}

/// Where a value came from, for an error message.
fn origin(md: Option<&Metadata>, path: &[String]) -> String {
    let Some(md) = md else {
        return "settings".to_string();
    };
    match (md.name.as_ref(), &md.source) {
        (ENV_NAME, _) => {
            let keys: Vec<&str> = path.iter().map(String::as_str).collect();
            format!("env {}", md.interpolate(&Profile::Default, &keys))
        }
        (FLAGS_NAME, _) => "a command-line flag".to_string(),
        (DEFAULTS_NAME, _) => "the built-in defaults".to_string(),
        (_, Some(figment::Source::File(file))) => file.display().to_string(),
        (name, _) => name.to_string(),
    }
}

/// A value as a person would name it.
fn actual(value: &figment::error::Actual) -> String {
    use figment::error::Actual;
    match value {
        Actual::Bool(v) => v.to_string(),
        Actual::Unsigned(v) => v.to_string(),
        Actual::Signed(v) => v.to_string(),
        Actual::Float(v) => v.to_string(),
        Actual::Char(v) => format!("{v:?}"),
        Actual::Str(v) => format!("{v:?}"),
        Actual::Seq => "a list".to_string(),
        Actual::Map => "a table".to_string(),
        other @ (Actual::Bytes(_)
        | Actual::Unit
        | Actual::Option
        | Actual::NewtypeStruct
        | Actual::Enum
        | Actual::UnitVariant
        | Actual::NewtypeVariant
        | Actual::TupleVariant
        | Actual::StructVariant
        | Actual::Other(_)) => other.to_string(),
    }
}

/// What serde expected, as a person would say it.
fn expected(what: &str) -> String {
    match what {
        "u8" | "u16" | "u32" | "u64" | "usize" => "a whole number".to_string(),
        "i8" | "i16" | "i32" | "i64" | "isize" => "a number".to_string(),
        "f32" | "f64" => "a number".to_string(),
        "a boolean" | "bool" => "true or false".to_string(),
        other => other.to_string(),
    }
}

/// The name in `candidates` closest to `name`, when it is close enough to be a typo.
fn did_you_mean<'a>(name: &str, candidates: &[&'a str]) -> Option<&'a str> {
    candidates
        .iter()
        .map(|c| (strsim::jaro_winkler(name, c), *c))
        .filter(|(score, _)| *score > 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, c)| c)
}

/// One value that cannot be read: the key, where it came from, and what is wrong with it, in
/// Corral's words (never the settings library's internals).
fn describe_load_error(e: &figment::Error, files: &[&SettingsFile]) -> String {
    use figment::error::Kind;
    let key = e.path.join(".");
    let parent = e
        .path
        .split_last()
        .map(|(_, p)| p.join("."))
        .unwrap_or_default();
    let from = origin(e.metadata.as_ref(), &e.path);
    let problem = match &e.kind {
        Kind::UnknownField(field, known) => {
            let hint = did_you_mean(field, known).map_or(String::new(), |m| {
                let full = if parent.is_empty() {
                    m.to_string()
                } else {
                    format!("{parent}.{m}")
                };
                format!("; did you mean {full}?")
            });
            let within = if parent.is_empty() {
                "the settings".to_string()
            } else {
                format!("[{parent}]")
            };
            format!("unknown key{hint} ({within} has {})", known.join(", "))
        }
        Kind::UnknownVariant(value, known) => {
            let hint = did_you_mean(value, known)
                .map_or(String::new(), |m| format!("; did you mean {m:?}?"));
            format!("{value:?} is not one of {}{hint}", known.join(", "))
        }
        // A `*_ms` key takes a duration as text as well; say so, since that is what was tried.
        Kind::InvalidType(found, want) if key.ends_with("_ms") => format!(
            "{} is not {} of milliseconds, nor a duration such as \"90s\", \"5m\" or \"2h\"",
            actual(found),
            expected(want)
        ),
        Kind::InvalidType(found, want) => format!("{} is not {}", actual(found), expected(want)),
        Kind::InvalidValue(found, want) => format!("{} is not {}", actual(found), expected(want)),
        Kind::InvalidLength(len, want) => format!("{len} items, expected {want}"),
        Kind::MissingField(field) => format!("{field} is missing"),
        Kind::Message(text) => text.clone(),
        other @ (Kind::DuplicateField(_)
        | Kind::ISizeOutOfRange(_)
        | Kind::USizeOutOfRange(_)
        | Kind::Unsupported(_)
        | Kind::UnsupportedKey(..)) => other.to_string(),
    };
    let file = match e.metadata.as_ref().and_then(|md| md.source.as_ref()) {
        Some(figment::Source::File(file)) => Some(file.as_path()),
        _ => None,
    };
    located(&key, &e.path, file, &from, &problem, files)
}

/// What trusting the project file deliberately recorded.
#[derive(Debug, Clone, PartialEq)]
pub struct TrustedFile {
    /// The file, symlinks resolved.
    pub path: PathBuf,
    /// Its content digest (`sha256:…`).
    pub digest: String,
    /// The user-only keys it sets, which it may now set.
    pub keys: Vec<UntrustedKey>,
}

/// Trusts the project file of `sources` as it is now: records its path and digest in the trust
/// store, so that it may set user-only keys until its content changes.
pub fn trust_project_file(sources: &SettingsSources) -> Result<TrustedFile, SettingsError> {
    let Some(project) = &sources.project_config else {
        return Err(SettingsError::Load("no project file to trust".into()));
    };
    let Some(file) = SettingsFile::read(project)? else {
        return Err(SettingsError::Load(format!(
            "{}: no such file to trust",
            project.display()
        )));
    };
    let Some(store) = &sources.trust_store else {
        return Err(SettingsError::Load(
            "no trust store: neither XDG_CONFIG_HOME nor HOME is set".into(),
        ));
    };
    let path = std::fs::canonicalize(&file.path).unwrap_or_else(|_| file.path.clone());
    let digest = trust::content_digest(&file.content);
    trust::record_trust(store, &path, &digest).map_err(|e| {
        SettingsError::Load(format!(
            "cannot write the trust store {}: {e}",
            store.display()
        ))
    })?;
    Ok(TrustedFile {
        keys: trust::untrusted_keys(&file.dict),
        path,
        digest,
    })
}

const NETWORK_ALLOW_KEY: &str = "sandbox.network_allow";
const HIDE_KEY: &str = "sandbox.hide";

/// The allow-list only widens: each layer that sets `sandbox.network_allow` (the user's file, a
/// trusted project file, the environment, the flags) adds its rules to the others'. Every rule
/// is checked against the layer it came from.
fn widened_allow_list(layers: &[(SettingSource, Dict)]) -> Result<Vec<String>, SettingsError> {
    added_up(layers, NETWORK_ALLOW_KEY, |rule| {
        rule.parse::<corral_engine::AllowRule>()
            .map(|_| ())
            .map_err(|e| e.why.to_string())
    })
}

/// The hidden paths add up like the allow-list: a layer cannot un-hide what another hides.
fn added_up_hide_list(layers: &[(SettingSource, Dict)]) -> Result<Vec<String>, SettingsError> {
    added_up(layers, HIDE_KEY, check_hidden_path)
}

/// Why `entry` of `sandbox.hide` cannot be hidden: it must name one absolute path, or one under
/// the home (`~/...`), without `..` (which would make what is hidden depend on symbolic links
/// in between), and not the root or the home itself (an empty directory over either would hide
/// the CLI's own program and state).
fn check_hidden_path(entry: &str) -> Result<(), String> {
    let rest = match entry.strip_prefix("~/") {
        Some(rest) => rest,
        None if Path::new(entry).is_absolute() => entry,
        None => return Err("must be an absolute path or start with ~/".to_string()),
    };
    let path = Path::new(rest);
    if path
        .components()
        .any(|c| matches!(c, std::path::Component::ParentDir))
    {
        return Err("must not contain `..`".to_string());
    }
    if !path
        .components()
        .any(|c| matches!(c, std::path::Component::Normal(_)))
    {
        return Err(
            "must name something inside the root or the home, not either whole".to_string(),
        );
    }
    Ok(())
}

/// The list `key` from every layer that sets it, each entry checked by `check` against the layer
/// it came from and kept once: every bad entry is named with its index and source.
fn added_up(
    layers: &[(SettingSource, Dict)],
    key: &str,
    check: impl Fn(&str) -> Result<(), String>,
) -> Result<Vec<String>, SettingsError> {
    let mut entries: Vec<String> = Vec::new();
    let mut bad: Vec<String> = Vec::new();
    for (source, dict) in layers {
        let Some(value) = Value::from(dict.clone()).find(key) else {
            continue;
        };
        let list: Vec<String> = value
            .deserialize()
            .map_err(|e| SettingsError::Load(format!("{key} (from {source}): {e}")))?;
        for (i, entry) in list.into_iter().enumerate() {
            if let Err(why) = check(&entry) {
                bad.push(format!("{key}[{i}] = {entry:?} (from {source}): {why}"));
            } else if !entries.contains(&entry) {
                entries.push(entry);
            }
        }
    }
    if bad.is_empty() {
        Ok(entries)
    } else {
        Err(SettingsError::Invalid(bad))
    }
}

impl LoadedSettings {
    /// Where run directories go: `run.runs_dir`, under the project root when relative.
    pub fn runs_root(&self) -> PathBuf {
        self.settings.runs_root(&self.project_root)
    }

    /// Creates a new run directory under [`LoadedSettings::runs_root`], first making sure git
    /// ignores Corral's state (see [`crate::run_record::ignore_state_dir`]).
    pub fn create_run_dir(&self, provider: ProviderId) -> std::io::Result<(String, PathBuf)> {
        crate::run_record::ignore_state_dir(&self.project_root, &self.settings.run.runs_dir)?;
        crate::run_record::create_run_dir(&self.runs_root(), provider)
    }

    /// Loads, merges and validates every layer. Every value that cannot be read (an unknown
    /// key, a wrong type) is reported, not only the first: after each one the layers are merged
    /// again without it.
    pub fn load(sources: &SettingsSources) -> Result<Self, SettingsError> {
        let defaults = Layer {
            name: DEFAULTS_NAME,
            dict: Value::serialize(Settings::default())
                .map_err(|e| SettingsError::Load(e.to_string()))?
                .into_dict()
                .unwrap_or_default(),
        };
        // The allow-list and the hidden paths add up across the layers instead of the last one
        // replacing the rest.
        let mut allow_lists: Vec<(SettingSource, Dict)> = Vec::new();
        let user = match &sources.user_config {
            Some(path) => SettingsFile::read(path)?,
            None => None,
        };
        if let Some(file) = &user {
            allow_lists.push((SettingSource::File(file.path.clone()), file.dict.clone()));
        }
        let project = match &sources.project_config {
            Some(path) => SettingsFile::read(path)?,
            None => None,
        };
        if let Some(file) = &project {
            // Past the trust check, a project file's allow-list is empty or trusted as it is.
            file.check_trust(sources)?;
            allow_lists.push((SettingSource::File(file.path.clone()), file.dict.clone()));
        }
        let env = env_layer(&sources.env);
        let flags = json_layer(FLAGS_NAME, &sources.flags)?;
        // The environment layer is named by the variable that sets each list.
        let mut hide_lists = allow_lists.clone();
        allow_lists.push((
            SettingSource::Env(format!("{ENV_PREFIX}SANDBOX__NETWORK_ALLOW")),
            env.dict.clone(),
        ));
        allow_lists.push((SettingSource::Flag, flags.dict.clone()));
        hide_lists.push((
            SettingSource::Env(format!("{ENV_PREFIX}SANDBOX__HIDE")),
            env.dict.clone(),
        ));
        hide_lists.push((SettingSource::Flag, flags.dict.clone()));
        let merged = |skip: &[Vec<String>]| {
            let mut figment = Figment::from(Without::new(&defaults, skip));
            if let Some(file) = &user {
                figment = figment.merge(Without::new(file, skip));
            }
            if let Some(file) = &project {
                figment = figment.merge(Without::new(file, skip));
            }
            figment
                .merge(Without::new(&env, skip))
                .merge(Without::new(&flags, skip))
        };
        let files: Vec<&SettingsFile> = user.iter().chain(project.iter()).collect();
        let figment = merged(&[]);
        let mut settings: Settings = match figment.extract() {
            Ok(settings) => settings,
            Err(first) => {
                // Every problem in one pass: the values that cannot be read, then what is out
                // of range among the rest.
                let (mut lines, skip) = every_load_error(first, merged, &files);
                let rest = merged(&skip);
                if let Ok(settings) = rest.extract::<Settings>() {
                    let loaded = LoadedSettings {
                        settings,
                        project_root: sources.project_root.clone(),
                        figment: rest,
                    };
                    lines.extend(loaded.invalid_lines(&files));
                }
                return Err(SettingsError::Malformed(lines));
            }
        };
        settings.sandbox.network_allow = widened_allow_list(&allow_lists)?;
        settings.sandbox.hide = added_up_hide_list(&hide_lists)?;
        let loaded = LoadedSettings {
            settings,
            project_root: sources.project_root.clone(),
            figment,
        };
        let lines = loaded.invalid_lines(&files);
        if !lines.is_empty() {
            return Err(SettingsError::Invalid(lines));
        }
        Ok(loaded)
    }

    /// A line for each value out of range or malformed, as [`located`] words it.
    fn invalid_lines(&self, files: &[&SettingsFile]) -> Vec<String> {
        let Err(report) = self.settings.validate() else {
            return Vec::new();
        };
        report
            .iter()
            .map(|(path, error)| {
                let key = path.to_string();
                let (value, source) = self.describe(&key);
                let keys: Vec<String> = key.split('.').map(str::to_string).collect();
                let file = match &source {
                    SettingSource::File(file) => Some(file.as_path()),
                    SettingSource::Default | SettingSource::Env(_) | SettingSource::Flag => None,
                };
                located(
                    &format!("{key} = {value}"),
                    &keys,
                    file,
                    &source.to_string(),
                    error.message(),
                    files,
                )
            })
            .collect()
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
            FILE_NAME => match &md.source {
                Some(figment::Source::File(path)) => SettingSource::File(path.clone()),
                Some(other) => SettingSource::File(PathBuf::from(other.to_string())),
                None => SettingSource::Default,
            },
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
