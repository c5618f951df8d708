//! [`CopilotProbe`]: whether a model can be used, as far as the Copilot CLI can tell without a
//! request, which is never.
//!
//! Copilot 1.0.102 has no command that lists models (its `--help` names none; the list lives
//! behind the interactive `/model` and Copilot's online catalog, github/copilot-cli#700), and with
//! a BYOK provider the model is whatever the provider serves. So the probe always answers
//! [`ModelAvailability::Unknown`], and a run with a model that is not available fails with a
//! classified `ModelUnavailable`. It still asks `copilot --version` (bounded by the settings'
//! version timeout, through the engine's spawner), so that a missing CLI is reported before a run.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use corral_engine::{Engine, EngineConfig, ProviderSpawn};
use corral_ports::{ModelAvailability, ModelAvailabilityProbe, ProviderError, ProviderId};

use crate::settings::CopilotSettings;

/// The Copilot CLI model probe.
#[derive(Debug, Clone)]
pub struct CopilotProbe {
    command: PathBuf,
    timeout: Duration,
    /// Whose spawner and environment setting the version question runs with.
    engine: Engine,
}

impl CopilotProbe {
    /// A probe that runs the configured `copilot`.
    pub fn new(settings: &CopilotSettings) -> Self {
        CopilotProbe::with_engine(settings, &Engine::new(EngineConfig::default()))
    }

    /// A probe that starts processes through `spawner`, with this process's environment.
    pub fn with_spawner(settings: &CopilotSettings, spawner: Arc<dyn ProviderSpawn>) -> Self {
        CopilotProbe::with_engine(
            settings,
            &Engine::with_spawner(EngineConfig::default(), spawner),
        )
    }

    /// A probe that runs through `engine`'s spawner with its environment setting, as a run
    /// with that engine would.
    pub fn with_engine(settings: &CopilotSettings, engine: &Engine) -> Self {
        CopilotProbe {
            command: settings.command.clone(),
            timeout: settings.version_timeout,
            engine: engine.clone(),
        }
    }
}

#[async_trait]
impl ModelAvailabilityProbe for CopilotProbe {
    fn id(&self) -> ProviderId {
        ProviderId::Copilot
    }

    async fn probe(&self, model: &str) -> Result<ModelAvailability, ProviderError> {
        let cli = self
            .engine
            .describe_cli(
                ProviderId::Copilot,
                "Copilot CLI",
                &self.command,
                self.timeout,
            )
            .await?;
        Ok(ModelAvailability::Unknown {
            reason: format!(
                "{cli} has no model listing, and only a request would show whether {model:?} \
                 answers; run it, and a model that is not available is reported as \
                 model-unavailable"
            ),
        })
    }
}
