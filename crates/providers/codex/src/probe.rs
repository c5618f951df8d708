//! [`CodexProbe`]: whether a model can be used, as far as Codex can tell without a paid request.
//!
//! Codex keeps the model catalog it last fetched for its login in `$CODEX_HOME/models_cache.json`
//! (default `~/.codex`). The file's layout is not documented: Codex's bundled catalog is
//! `{"models": [{"slug": "gpt-…", "visibility": "list", …}]}`, and the cache is an entry of that
//! catalog plus fetch metadata. So the probe reads it defensively: every `models` array anywhere
//! in the file (a bounded depth), each entry a slug string or an object with `slug` (or `id`).
//!
//! - The model is listed (whatever its `visibility`: a hidden model still answers) → `Available`.
//! - Not listed, no file, an unreadable or unexpected file → `Unknown`, never `Unavailable`: the
//!   cache lists what the OpenAI catalog offered this login when it was fetched. It may be stale,
//!   it says nothing about a custom model provider, and an API key may reach models it omits.
//! - A custom model provider in the settings → `Unknown` without reading the cache, for that
//!   reason.
//!
//! Before reading, it asks `codex --version` (bounded by the settings' version timeout, through the
//! engine's spawner), so that a missing CLI is reported before a run. Nothing here spends tokens,
//! and nothing waits longer than the version timeout.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use corral_engine::{Engine, EngineConfig, ProviderSpawn};
use corral_ports::{ModelAvailability, ModelAvailabilityProbe, ProviderError, ProviderId};
use serde_json::Value;

use crate::settings::CodexSettings;

/// The cache file's name in `CODEX_HOME`.
pub const MODELS_CACHE_FILE: &str = "models_cache.json";
/// A cache larger than this is not read (the real one is tens of KiB).
const MAX_CACHE_BYTES: u64 = 16 * 1024 * 1024;
/// How deep the probe looks for `models` arrays.
const MAX_DEPTH: usize = 6;

/// The Codex model probe.
#[derive(Debug, Clone)]
pub struct CodexProbe {
    command: PathBuf,
    timeout: Duration,
    model_provider: Option<String>,
    codex_home: Option<PathBuf>,
    /// Whose spawner and environment setting the version question runs with.
    engine: Engine,
}

impl CodexProbe {
    /// A probe that runs the configured `codex` and reads the cache in `$CODEX_HOME`, else
    /// `$HOME/.codex` (as Codex does).
    pub fn new(settings: &CodexSettings) -> Self {
        let codex_home = std::env::var_os("CODEX_HOME")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".codex")));
        CodexProbe::with_engine(settings, codex_home, &Engine::new(EngineConfig::default()))
    }

    /// A probe that reads the cache in `codex_home` (`None`: no cache) and starts processes
    /// through `spawner`, with this process's environment.
    pub fn with_parts(
        settings: &CodexSettings,
        codex_home: Option<PathBuf>,
        spawner: Arc<dyn ProviderSpawn>,
    ) -> Self {
        let engine = Engine::with_spawner(EngineConfig::default(), spawner);
        CodexProbe::with_engine(settings, codex_home, &engine)
    }

    /// A probe that reads the cache in `codex_home` (`None`: no cache) and runs through
    /// `engine`'s spawner with its environment setting.
    pub fn with_engine(
        settings: &CodexSettings,
        codex_home: Option<PathBuf>,
        engine: &Engine,
    ) -> Self {
        CodexProbe {
            command: settings.command.clone(),
            timeout: settings.version_timeout,
            model_provider: settings.model_provider.clone(),
            codex_home,
            engine: engine.clone(),
        }
    }

    async fn cli(&self) -> Result<String, ProviderError> {
        self.engine
            .describe_cli(ProviderId::Codex, "Codex", &self.command, self.timeout)
            .await
    }
}

#[async_trait]
impl ModelAvailabilityProbe for CodexProbe {
    fn id(&self) -> ProviderId {
        ProviderId::Codex
    }

    async fn probe(&self, model: &str) -> Result<ModelAvailability, ProviderError> {
        let cli = self.cli().await?;
        if let Some(provider) = self.model_provider.as_deref().filter(|p| *p != "openai") {
            return Ok(ModelAvailability::Unknown {
                reason: format!(
                    "{cli} runs model provider {provider:?}, which has no model listing Codex \
                     keeps; only a paid request would show whether {model:?} answers"
                ),
            });
        }
        let Some(path) = self.codex_home.as_ref().map(|h| h.join(MODELS_CACHE_FILE)) else {
            return Ok(ModelAvailability::Unknown {
                reason: format!("{cli}: neither CODEX_HOME nor HOME is set, so no model cache"),
            });
        };
        Ok(availability(&cli, model, &path))
    }
}

/// The answer from the cache file at `path`.
fn availability(cli: &str, model: &str, path: &Path) -> ModelAvailability {
    let unknown = |why: String| ModelAvailability::Unknown {
        reason: format!(
            "{cli}: {why}; only a paid request would show whether {model:?} answers, and a \
             missing model is reported as model-unavailable"
        ),
    };
    let text = match read_capped(path) {
        Ok(Some(text)) => text,
        Ok(None) => return unknown(format!("no model cache at {}", path.display())),
        Err(reason) => return unknown(format!("cannot read {}: {reason}", path.display())),
    };
    let slugs = match serde_json::from_str::<Value>(&text) {
        Ok(value) => model_slugs(&value),
        Err(e) => return unknown(format!("{} is not JSON ({e})", path.display())),
    };
    if slugs.is_empty() {
        return unknown(format!("{} lists no models", path.display()));
    }
    if slugs.iter().any(|s| s == model) {
        return ModelAvailability::Available;
    }
    unknown(format!(
        "{model:?} is not among the {} models cached in {}, but that cache may be stale and lists \
         only what the OpenAI catalog offered this login",
        slugs.len(),
        path.display()
    ))
}

/// The file's text; `None` when it does not exist.
fn read_capped(path: &Path) -> Result<Option<String>, String> {
    let file = match std::fs::File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e.to_string()),
    };
    let mut text = String::new();
    file.take(MAX_CACHE_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|e| e.to_string())?;
    if text.len() as u64 > MAX_CACHE_BYTES {
        return Err(format!("larger than {MAX_CACHE_BYTES} bytes"));
    }
    Ok(Some(text))
}

/// Every model slug in `models` arrays of `value` (or in `value` itself, when it is an array).
pub fn model_slugs(value: &Value) -> Vec<String> {
    let mut slugs = Vec::new();
    match value {
        Value::Array(entries) => collect_entries(entries, &mut slugs),
        Value::Object(_) => visit(value, 0, &mut slugs),
        Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) => {}
    }
    slugs.sort();
    slugs.dedup();
    slugs
}

fn visit(value: &Value, depth: usize, slugs: &mut Vec<String>) {
    if depth > MAX_DEPTH {
        return;
    }
    match value {
        Value::Object(map) => {
            for (key, inner) in map {
                match (key.as_str(), inner) {
                    ("models", Value::Array(entries)) => collect_entries(entries, slugs),
                    (_, Value::Object(_) | Value::Array(_)) => visit(inner, depth + 1, slugs),
                    _ => {}
                }
            }
        }
        Value::Array(items) => {
            for inner in items {
                visit(inner, depth + 1, slugs);
            }
        }
        Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) => {}
    }
}

fn collect_entries(entries: &[Value], slugs: &mut Vec<String>) {
    for entry in entries {
        let slug = match entry {
            Value::String(slug) => Some(slug.as_str()),
            Value::Object(map) => ["slug", "id"]
                .iter()
                .find_map(|k| map.get(*k).and_then(Value::as_str)),
            Value::Null | Value::Bool(_) | Value::Number(_) | Value::Array(_) => None,
        };
        if let Some(slug) = slug.filter(|s| !s.is_empty()) {
            slugs.push(slug.to_string());
        }
    }
}
