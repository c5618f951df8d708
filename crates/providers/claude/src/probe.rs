//! [`ClaudeProbe`]: whether a model can be used, as far as Claude Code can tell without a paid
//! request, which is never.
//!
//! Claude Code has no headless model listing, and the only way to learn whether a model answers is
//! to send it a request, which costs tokens. So the probe always answers
//! [`ModelAvailability::Unknown`], and a run with a model that does not exist fails with a
//! classified `ModelUnavailable`. It still asks `claude --version` (bounded by the settings' version
//! timeout, through the engine's spawner), so that a missing CLI is reported before a run.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use corral_engine::{Engine, EngineConfig, ProviderSpawn};
use corral_ports::{ModelAvailability, ModelAvailabilityProbe, ProviderError, ProviderId};

use crate::settings::ClaudeSettings;

/// The Claude Code model probe.
#[derive(Debug, Clone)]
pub struct ClaudeProbe {
    command: PathBuf,
    timeout: Duration,
    /// Whose spawner and environment setting the version question runs with.
    engine: Engine,
}

impl ClaudeProbe {
    /// A probe that runs the configured `claude`.
    pub fn new(settings: &ClaudeSettings) -> Self {
        ClaudeProbe::with_engine(settings, &Engine::new(EngineConfig::default()))
    }

    /// A probe that starts processes through `spawner`, with this process's environment.
    pub fn with_spawner(settings: &ClaudeSettings, spawner: Arc<dyn ProviderSpawn>) -> Self {
        ClaudeProbe::with_engine(
            settings,
            &Engine::with_spawner(EngineConfig::default(), spawner),
        )
    }

    /// A probe that runs through `engine`'s spawner with its environment setting, as a run
    /// with that engine would.
    pub fn with_engine(settings: &ClaudeSettings, engine: &Engine) -> Self {
        ClaudeProbe {
            command: settings.command.clone(),
            timeout: settings.version_timeout,
            engine: engine.clone(),
        }
    }
}

#[async_trait]
impl ModelAvailabilityProbe for ClaudeProbe {
    fn id(&self) -> ProviderId {
        ProviderId::Claude
    }

    async fn probe(&self, model: &str) -> Result<ModelAvailability, ProviderError> {
        let cli = self
            .engine
            .describe_cli(
                ProviderId::Claude,
                "Claude Code",
                &self.command,
                self.timeout,
            )
            .await?;
        Ok(ModelAvailability::Unknown {
            reason: format!(
                "{cli} has no model listing, and only a paid request would show whether \
                 {model:?} answers; run it, and a missing model is reported as model-unavailable"
            ),
        })
    }
}
