//! [`GeminiProbe`]: whether a model can be used, as far as the Gemini CLI can tell without a paid
//! request, which is never.
//!
//! Gemini CLI 0.61 has no headless model listing (`gemini --help` offers `-m` and nothing that
//! lists models; the model list of its interactive `/model` dialog is built in, not what the key
//! may use), and the only way to learn whether a model answers is to send it a request, which
//! costs tokens. So the probe always answers [`ModelAvailability::Unknown`], and a run with a
//! model that does not exist fails with a classified `ModelUnavailable` (recorded: `models/nope
//! is not found for API version v1beta`). It still asks `gemini --version` (bounded by the
//! settings' version timeout, through the engine's spawner), so that a missing CLI is reported
//! before a run.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use corral_engine::{Engine, EngineConfig, ProviderSpawn};
use corral_ports::{ModelAvailability, ModelAvailabilityProbe, ProviderError, ProviderId};

use crate::settings::GeminiSettings;

/// The Gemini model probe.
#[derive(Debug, Clone)]
pub struct GeminiProbe {
    command: PathBuf,
    timeout: Duration,
    /// Whose spawner and environment setting the version question runs with.
    engine: Engine,
}

impl GeminiProbe {
    /// A probe that runs the configured `gemini`.
    pub fn new(settings: &GeminiSettings) -> Self {
        GeminiProbe::with_engine(settings, &Engine::new(EngineConfig::default()))
    }

    /// A probe that starts processes through `spawner`, with this process's environment.
    pub fn with_spawner(settings: &GeminiSettings, spawner: Arc<dyn ProviderSpawn>) -> Self {
        GeminiProbe::with_engine(
            settings,
            &Engine::with_spawner(EngineConfig::default(), spawner),
        )
    }

    /// A probe that runs through `engine`'s spawner with its environment setting, as a run
    /// with that engine would.
    pub fn with_engine(settings: &GeminiSettings, engine: &Engine) -> Self {
        GeminiProbe {
            command: settings.command.clone(),
            timeout: settings.version_timeout,
            engine: engine.clone(),
        }
    }
}

#[async_trait]
impl ModelAvailabilityProbe for GeminiProbe {
    fn id(&self) -> ProviderId {
        ProviderId::Gemini
    }

    async fn probe(&self, model: &str) -> Result<ModelAvailability, ProviderError> {
        let cli = self
            .engine
            .describe_cli(
                ProviderId::Gemini,
                "Gemini CLI",
                &self.command,
                self.timeout,
            )
            .await?;
        Ok(ModelAvailability::Unknown {
            reason: format!(
                "{cli} has no model listing, and only a paid request would show whether \
                 {model:?} answers; run it, and a model the API rejects is reported as \
                 model-unavailable"
            ),
        })
    }
}
