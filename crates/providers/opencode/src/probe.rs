//! [`OpencodeProbe`]: whether a model can be used, from `opencode models`, which lists every
//! `provider/model` OpenCode can reach with the credentials and configuration it sees. No request
//! goes to a model, so nothing is spent.
//!
//! The listing runs through the engine's spawn port (new process group, explicit environment,
//! stdin `/dev/null`) and is bounded by [`OpencodeSettings::probe_timeout`] (15 s by default).
//! When the time is up the whole process group is killed: the npm `opencode` is a Node wrapper
//! that runs the native binary as its child, so killing the leader alone would leave the binary
//! running. A listing that is late, fails or is empty gives [`ModelAvailability::Unknown`], never
//! a guess; a program that cannot be started is [`ProviderError::CliNotFound`].
//!
//! The listing depends on the environment (provider keys, `OPENCODE_CONFIG_CONTENT`, the XDG
//! directories), so the probe runs `opencode models` with the environment a run would get: the
//! adapter's profile and variables applied to the given ambient environment. It runs in the
//! system temporary directory, so a project's own `opencode.json` is not seen. The first run of
//! a fresh OpenCode installs a plugin with npm, which can outlast the time limit: the answer is
//! then `Unknown`, and the next probe is fast.

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use corral_engine::{
    BoundedCommand, BoundedEnd, BoundedError, CliAdapter, Engine, EnvInherit, EnvPolicy, ExitInfo,
    ProviderSpawn, SpawnRequest, StdinMode, TokioSpawner, run_bounded,
};
use corral_ports::{ModelAvailability, ModelAvailabilityProbe, ProviderError, ProviderId};

use crate::adapter::OpencodeAdapter;
use crate::diagnose::strip_ansi;
use crate::settings::OpencodeSettings;
use corral_engine::shorten;

/// The most of the listing that is read, in bytes (a listing of every provider is far smaller).
const LISTING_KEEP: usize = 4 * 1024 * 1024;
/// The most of stderr that is kept, in bytes.
const STDERR_KEEP: usize = 16 * 1024;
/// How much of stderr a reason quotes, in bytes.
const REASON_KEEP: usize = 512;

/// The OpenCode model probe.
#[derive(Debug, Clone)]
pub struct OpencodeProbe {
    command: PathBuf,
    timeout: Duration,
    spawner: Arc<dyn ProviderSpawn>,
    env: Vec<(OsString, OsString)>,
}

/// What one `opencode models` left behind.
enum Listing {
    /// It exited; its stdout, the start of its stderr and how it ended.
    Finished {
        stdout: String,
        stderr: String,
        exit: Option<ExitInfo>,
    },
    /// It did not finish in time and its group was killed.
    TimedOut,
    /// Its output could not be read, or it could not be waited for.
    Unreadable(String),
}

impl OpencodeProbe {
    /// A probe that runs the configured `opencode` with this process's environment, passed
    /// through the adapter's profile as a run with the default policy would be.
    pub fn new(settings: &OpencodeSettings) -> Self {
        let ambient = std::env::vars_os()
            .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)));
        OpencodeProbe::with_spawner(
            settings,
            Arc::new(TokioSpawner),
            probe_env(ambient, EnvInherit::Core, &[]),
        )
    }

    /// A probe that runs through `engine`'s spawner, with the environment a run with that engine
    /// would get (its environment setting, inheritance and allowlist).
    pub fn with_engine(settings: &OpencodeSettings, engine: &Engine) -> Self {
        let config = engine.config();
        OpencodeProbe::with_spawner(
            settings,
            engine.spawner_arc(),
            probe_env(config.ambient(), config.env_inherit, &config.env_allow),
        )
    }

    /// A probe that starts processes through `spawner` with exactly `env` (see [`probe_env`]).
    pub fn with_spawner(
        settings: &OpencodeSettings,
        spawner: Arc<dyn ProviderSpawn>,
        env: Vec<(String, String)>,
    ) -> Self {
        OpencodeProbe {
            command: settings.command.clone(),
            timeout: settings.probe_timeout,
            spawner,
            env: env
                .into_iter()
                .map(|(k, v)| (OsString::from(k), OsString::from(v)))
                .collect(),
        }
    }

    async fn list(&self) -> Result<Listing, ProviderError> {
        let request = SpawnRequest {
            program: self.command.clone(),
            args: vec![OsString::from("models")],
            env: self.env.clone(),
            cwd: std::env::temp_dir(),
            stdin: StdinMode::Null,
            parent_death_signal: true,
            inherit_fds: Vec::new(),
            output: corral_engine::ChildOutputs::Pipes,
            pre_exec: Vec::new(),
        };
        let command = BoundedCommand {
            stdout_limit: LISTING_KEEP,
            stderr_limit: STDERR_KEEP,
            ..BoundedCommand::limited(request, self.timeout)
        };
        match run_bounded(self.spawner.as_ref(), &command).await {
            Ok(output) => Ok(match output.end {
                BoundedEnd::Exited(exit) => Listing::Finished {
                    stdout: output.stdout.text(),
                    stderr: output.stderr.text(),
                    exit: Some(exit),
                },
                BoundedEnd::TimedOut => Listing::TimedOut,
            }),
            Err(BoundedError::Spawn { source, .. }) => Err(ProviderError::CliNotFound {
                provider: ProviderId::Opencode,
                program: self.command.display().to_string(),
                reason: source.to_string(),
            }),
            Err(e @ (BoundedError::Read { .. } | BoundedError::Wait { .. })) => {
                Ok(Listing::Unreadable(e.to_string()))
            }
        }
    }

    fn unknown(&self, why: String) -> ModelAvailability {
        ModelAvailability::Unknown {
            reason: format!(
                "{why}; run the model, and a missing one is reported as model-unavailable \
                 (program {})",
                self.command.display()
            ),
        }
    }
}

/// The environment `opencode models` gets: the adapter's profile and variables applied to
/// `ambient` with the given inheritance and allowlist, as the engine would for a run.
pub fn probe_env<I>(ambient: I, inherit: EnvInherit, allow: &[String]) -> Vec<(String, String)>
where
    I: IntoIterator<Item = (String, String)>,
{
    let adapter = OpencodeAdapter::default();
    EnvPolicy {
        inherit,
        profile: adapter.env_profile(),
        allow: allow.to_vec(),
        set: adapter.env_set(),
    }
    .resolve(ambient)
    .vars
}

/// The `provider/model` names of an `opencode models` listing, in order, without repeats. Lines
/// that are not such a name (progress, warnings, colour codes around them) are skipped.
pub fn parse_model_listing(stdout: &str) -> Vec<String> {
    let mut models: Vec<String> = Vec::new();
    for line in strip_ansi(stdout).lines() {
        let name = line.trim();
        let is_model = !name.starts_with('-')
            && !name.chars().any(char::is_whitespace)
            && name
                .split_once('/')
                .is_some_and(|(provider, id)| !provider.is_empty() && !id.is_empty());
        if is_model && !models.iter().any(|m| m == name) {
            models.push(name.to_string());
        }
    }
    models
}

#[async_trait]
impl ModelAvailabilityProbe for OpencodeProbe {
    fn id(&self) -> ProviderId {
        ProviderId::Opencode
    }

    async fn probe(&self, model: &str) -> Result<ModelAvailability, ProviderError> {
        let (stdout, stderr, exit) = match self.list().await? {
            Listing::TimedOut => {
                return Ok(self.unknown(format!(
                    "`opencode models` did not answer within {:?} and was killed",
                    self.timeout
                )));
            }
            Listing::Unreadable(why) => {
                return Ok(self.unknown(format!("`opencode models` gave no answer: {why}")));
            }
            Listing::Finished {
                stdout,
                stderr,
                exit,
            } => (stdout, stderr, exit),
        };
        if !exit.is_some_and(|e| e.success()) {
            let ended = exit.map_or_else(|| "an unknown exit".to_string(), |e| e.to_string());
            let said = strip_ansi(stderr.trim());
            let said = if said.is_empty() {
                String::new()
            } else {
                format!(": {}", shorten(&said, REASON_KEEP))
            };
            return Ok(self.unknown(format!("`opencode models` failed with {ended}{said}")));
        }
        let known = parse_model_listing(&stdout);
        if known.is_empty() {
            return Ok(self.unknown(
                "`opencode models` listed no model (no provider is configured, or its key is \
                 not in the environment)"
                    .to_string(),
            ));
        }
        if known.iter().any(|m| m == model) {
            Ok(ModelAvailability::Available)
        } else {
            Ok(ModelAvailability::Unavailable { known })
        }
    }
}
