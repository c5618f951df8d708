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
use corral_engine::{ProviderSpawn, TokioSpawner, describe_cli};
use corral_ports::{ModelAvailability, ModelAvailabilityProbe, ProviderError, ProviderId};

use crate::settings::ClaudeSettings;

/// The Claude Code model probe.
#[derive(Debug, Clone)]
pub struct ClaudeProbe {
    command: PathBuf,
    timeout: Duration,
    spawner: Arc<dyn ProviderSpawn>,
}

impl ClaudeProbe {
    /// A probe that runs the configured `claude`.
    pub fn new(settings: &ClaudeSettings) -> Self {
        ClaudeProbe::with_spawner(settings, Arc::new(TokioSpawner))
    }

    /// A probe that starts processes through `spawner`.
    pub fn with_spawner(settings: &ClaudeSettings, spawner: Arc<dyn ProviderSpawn>) -> Self {
        ClaudeProbe {
            command: settings.command.clone(),
            timeout: settings.version_timeout,
            spawner,
        }
    }
}

#[async_trait]
impl ModelAvailabilityProbe for ClaudeProbe {
    fn id(&self) -> ProviderId {
        ProviderId::Claude
    }

    async fn probe(&self, model: &str) -> Result<ModelAvailability, ProviderError> {
        let cli = describe_cli(
            self.spawner.as_ref(),
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
