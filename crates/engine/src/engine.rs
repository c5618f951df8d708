//! The facade: [`Engine`], which runs sessions through a [`CliAdapter`], and
//! [`SupervisedProvider`], an adapter and an engine together as the ports' providers.
//!
//! A headless run is the attempt loop in `headless.rs`; an interactive one is the handoff in
//! `interactive.rs`. Both live inside the same run scope (`run.rs`: log, git check, sandbox plan
//! and attestation, `run_finished`) and start their CLI the same way (`launch.rs`).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use corral_ports::{
    AiSession, HeadlessAiProvider, InteractiveAiProvider, InteractiveOutcome, NoopObserver,
    ProviderError, ProviderId, ProviderOutput, RunObserver,
};

use crate::adapter::CliAdapter;
use crate::config::EngineConfig;
use crate::version::{VersionProbe, describe_cli, probe_version, version_env};
use corral_process::bounded::{BoundedCommand, BoundedError, BoundedOutput, run_bounded};
use corral_process::spawn::{ProviderSpawn, TokioSpawner};
use corral_sandbox::driver_cache::DriverCache;

/// The supervised process runner. One `Engine` can run many sessions at once; runs share
/// nothing but the spawner and the configuration.
#[derive(Debug, Clone)]
pub struct Engine {
    spawner: Arc<dyn ProviderSpawn>,
    config: EngineConfig,
    /// The drivers listed for host git, kept while the repository's configuration is unchanged.
    driver_cache: Arc<DriverCache>,
}

impl Engine {
    /// An engine that starts real processes.
    pub fn new(config: EngineConfig) -> Self {
        Engine {
            spawner: Arc::new(TokioSpawner),
            config,
            driver_cache: Arc::default(),
        }
    }

    /// An engine with another spawner (tests record or script spawns).
    pub fn with_spawner(config: EngineConfig, spawner: Arc<dyn ProviderSpawn>) -> Self {
        Engine {
            spawner,
            config,
            driver_cache: Arc::default(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &EngineConfig {
        &self.config
    }

    /// The host git's cache of driver listings (`driver_cache.rs`).
    pub(crate) fn driver_cache(&self) -> &DriverCache {
        &self.driver_cache
    }

    /// The spawner.
    pub(crate) fn spawner(&self) -> &dyn ProviderSpawn {
        self.spawner.as_ref()
    }

    /// The spawner, shared.
    pub fn spawner_arc(&self) -> Arc<dyn ProviderSpawn> {
        Arc::clone(&self.spawner)
    }

    /// Runs a short command to its end through the engine's spawner; see [`run_bounded`].
    pub async fn run_bounded(
        &self,
        command: &BoundedCommand,
    ) -> Result<BoundedOutput, BoundedError> {
        run_bounded(self.spawner(), command).await
    }

    /// Asks `program --version` (in `cwd`, within `timeout`) with the engine's spawner and
    /// environment setting.
    pub async fn probe_version(
        &self,
        program: &Path,
        cwd: &Path,
        timeout: Duration,
    ) -> VersionProbe {
        let env = version_env(self.config.ambient());
        probe_version(
            self.spawner(),
            program,
            &["--version".to_string()],
            env,
            cwd,
            timeout,
        )
        .await
    }

    /// Asks `program --version` with the engine's spawner and environment setting, and
    /// describes the CLI for a diagnostic; see [`describe_cli`].
    pub async fn describe_cli(
        &self,
        provider: ProviderId,
        label: &str,
        program: &Path,
        timeout: Duration,
    ) -> Result<String, ProviderError> {
        let env = version_env(self.config.ambient());
        describe_cli(self.spawner(), provider, label, program, env, timeout).await
    }

    /// Runs a session through `adapter`'s CLI to the end. See
    /// [`corral_ports::HeadlessAiProvider`] for the contract this fulfils.
    pub async fn run(
        &self,
        adapter: &dyn CliAdapter,
        session: AiSession,
        observer: Arc<dyn RunObserver>,
    ) -> Result<ProviderOutput, ProviderError> {
        crate::headless::run(&self.config, &self.spawner, adapter, session, observer).await
    }

    /// Hands the terminal to `adapter`'s CLI until it exits or `session.cancel` fires. See
    /// [`corral_ports::InteractiveAiProvider`] for the contract this fulfils.
    pub async fn run_interactive(
        &self,
        adapter: &dyn CliAdapter,
        session: AiSession,
        observer: Arc<dyn RunObserver>,
    ) -> Result<InteractiveOutcome, ProviderError> {
        crate::interactive::run(&self.config, &self.spawner, adapter, session, observer).await
    }
}

/// A provider made of an adapter and the engine: what each provider crate exports.
#[derive(Debug, Clone)]
pub struct SupervisedProvider<A> {
    engine: Engine,
    adapter: A,
}

impl<A: CliAdapter> SupervisedProvider<A> {
    /// Wires an adapter to an engine.
    pub fn new(engine: Engine, adapter: A) -> Self {
        SupervisedProvider { engine, adapter }
    }

    /// The adapter.
    pub fn adapter(&self) -> &A {
        &self.adapter
    }

    /// The engine.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }
}

#[async_trait]
impl<A: CliAdapter> HeadlessAiProvider for SupervisedProvider<A> {
    fn id(&self) -> ProviderId {
        self.adapter.provider()
    }

    async fn run(
        &self,
        session: AiSession,
        observer: Arc<dyn RunObserver>,
    ) -> Result<ProviderOutput, ProviderError> {
        self.engine.run(&self.adapter, session, observer).await
    }
}

#[async_trait]
impl<A: CliAdapter> InteractiveAiProvider for SupervisedProvider<A> {
    fn id(&self) -> ProviderId {
        self.adapter.provider()
    }

    async fn run_interactive(
        &self,
        session: AiSession,
    ) -> Result<InteractiveOutcome, ProviderError> {
        self.engine
            .run_interactive(&self.adapter, session, Arc::new(NoopObserver))
            .await
    }
}
