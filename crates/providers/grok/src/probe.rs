//! [`GrokProbe`]: whether a model can be used, as far as the Grok CLI can tell without a paid
//! request, which is never.
//!
//! Grok 1.0.x has no model listing (`grok --help` offers `-m` and nothing that lists models; the
//! `models` array in `~/.grok/user-settings.json` is a fixed default list, not what the account
//! may use), and the only way to learn whether a model answers is to send it a request, which
//! costs tokens. So the probe always answers [`ModelAvailability::Unknown`], and a run with a
//! model that does not exist fails with a classified `ModelUnavailable` where the API says so. It
//! still asks `grok --version` (bounded by the settings' version timeout, through the engine's
//! spawner), so that a missing CLI is reported before a run.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use corral_engine::{Engine, EngineConfig, ProviderSpawn};
use corral_ports::{ModelAvailability, ModelAvailabilityProbe, ProviderError, ProviderId};

use crate::settings::GrokSettings;

/// The Grok model probe.
#[derive(Debug, Clone)]
pub struct GrokProbe {
    command: PathBuf,
    timeout: Duration,
    /// Whose spawner and environment setting the version question runs with.
    engine: Engine,
}

impl GrokProbe {
    /// A probe that runs the configured `grok`.
    pub fn new(settings: &GrokSettings) -> Self {
        GrokProbe::with_engine(settings, &Engine::new(EngineConfig::default()))
    }

    /// A probe that starts processes through `spawner`, with this process's environment.
    pub fn with_spawner(settings: &GrokSettings, spawner: Arc<dyn ProviderSpawn>) -> Self {
        GrokProbe::with_engine(
            settings,
            &Engine::with_spawner(EngineConfig::default(), spawner),
        )
    }

    /// A probe that runs through `engine`'s spawner with its environment setting, as a run
    /// with that engine would.
    pub fn with_engine(settings: &GrokSettings, engine: &Engine) -> Self {
        GrokProbe {
            command: settings.command.clone(),
            timeout: settings.version_timeout,
            engine: engine.clone(),
        }
    }
}

#[async_trait]
impl ModelAvailabilityProbe for GrokProbe {
    fn id(&self) -> ProviderId {
        ProviderId::Grok
    }

    async fn probe(&self, model: &str) -> Result<ModelAvailability, ProviderError> {
        let cli = self
            .engine
            .describe_cli(ProviderId::Grok, "Grok CLI", &self.command, self.timeout)
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
