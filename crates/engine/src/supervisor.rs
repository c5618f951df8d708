//! The run loop: attempts, rate-limit backoff with resume, the one stale-session cold retry, and
//! the mapping of the last attempt onto the ports' outcome.

use std::ffi::OsString;
use std::fs;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use async_trait::async_trait;
use std::path::PathBuf;

use corral_ports::SandboxBackend;
use corral_ports::{
    AiSession, HeadlessAiProvider, InteractiveAiProvider, InteractiveOutcome, NoopObserver,
    Outcome, ProviderError, ProviderId, ProviderOutput, RunEvidence, RunObserver, SessionId, Usage,
};

use crate::adapter::{AttemptEvidence, AttemptPlan, CliAdapter, PromptDelivery, VersionCheck};
use crate::argv::{check_argv, env_block_bytes};
use crate::attempt::{AttemptContext, AttemptResult, supervise};
use crate::classify::{AttemptClass, ClassifyInput, classify};
use crate::config::EngineConfig;
use crate::env::EnvPolicy;
use crate::files::{SessionMeta, write_prompt_pointer};
use crate::log::{ExecutionLog, Record};
use crate::proc::RUN_TOKEN_VAR;
use crate::spawn::{ProviderSpawn, SpawnRequest, StdinMode, TokioSpawner};
use crate::version::{VersionProbe, probe_version};

/// What a resumed attempt is told after a rate limit interrupted the session: the task is
/// already in the conversation, so the full prompt is not sent again.
pub const CONTINUATION_PROMPT: &str = "Your previous turn was interrupted by a rate limit before it finished. Continue the task from where you stopped; the instructions given earlier in this conversation still apply.\n";

/// The supervised process runner. One `Engine` can run many sessions at once; runs share
/// nothing but the spawner and the configuration.
#[derive(Debug, Clone)]
pub struct Engine {
    spawner: Arc<dyn ProviderSpawn>,
    config: EngineConfig,
}

impl Engine {
    /// An engine that starts real processes.
    pub fn new(config: EngineConfig) -> Self {
        Engine {
            spawner: Arc::new(TokioSpawner),
            config,
        }
    }

    /// An engine with another spawner (tests record or script spawns).
    pub fn with_spawner(config: EngineConfig, spawner: Arc<dyn ProviderSpawn>) -> Self {
        Engine { spawner, config }
    }

    /// The configuration.
    pub fn config(&self) -> &EngineConfig {
        &self.config
    }

    /// The spawner.
    pub(crate) fn spawner(&self) -> &dyn ProviderSpawn {
        self.spawner.as_ref()
    }

    /// Runs a session through `adapter`'s CLI to the end. See
    /// [`corral_ports::HeadlessAiProvider`] for the contract this fulfils.
    pub async fn run(
        &self,
        adapter: &dyn CliAdapter,
        session: AiSession,
        observer: Arc<dyn RunObserver>,
    ) -> Result<ProviderOutput, ProviderError> {
        Run::prepare(self, adapter, session, observer)?
            .execute()
            .await
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

struct Run<'a> {
    engine: &'a Engine,
    adapter: &'a dyn CliAdapter,
    provider: ProviderId,
    session: AiSession,
    observer: Arc<dyn RunObserver>,
    log: ExecutionLog,
    start: Instant,
    signals_before: Option<(u64, Option<SystemTime>)>,
    run_id: String,
    attestation: Option<corral_ports::Attestation>,
    finished: Option<(Outcome, u32, Option<SessionId>, Usage, bool)>,
}

fn io_error(provider: ProviderId, path: &Path, e: &std::io::Error) -> ProviderError {
    ProviderError::Io {
        provider,
        path: path.to_path_buf(),
        reason: e.to_string(),
    }
}

fn file_stamp(path: &Path) -> Option<(u64, Option<SystemTime>)> {
    fs::metadata(path)
        .ok()
        .map(|m| (m.len(), m.modified().ok()))
}

impl<'a> Run<'a> {
    fn prepare(
        engine: &'a Engine,
        adapter: &'a dyn CliAdapter,
        session: AiSession,
        observer: Arc<dyn RunObserver>,
    ) -> Result<Self, ProviderError> {
        let provider = adapter.provider();
        if !session.cwd.is_dir() {
            return Err(ProviderError::InvalidSession {
                provider,
                reason: format!("working directory {} does not exist", session.cwd.display()),
            });
        }
        fs::create_dir_all(&session.output_dir)
            .map_err(|e| io_error(provider, &session.output_dir, &e))?;
        let start = Instant::now();
        let log = ExecutionLog::open(&session.output_dir, start)
            .map_err(|e| io_error(provider, &session.output_dir, &e))?;
        let signals_before = file_stamp(&session.signals_file);
        let run_id = format!(
            "{}-{}-{:016x}",
            provider,
            std::process::id(),
            fastrand::u64(..)
        );
        Ok(Run {
            engine,
            adapter,
            provider,
            session,
            observer,
            log,
            start,
            signals_before,
            run_id,
            attestation: None,
            finished: None,
        })
    }

    fn signals_present(&self) -> bool {
        match (file_stamp(&self.session.signals_file), self.signals_before) {
            (None, _) => false,
            (Some(_), None) => true,
            // A file left by an earlier run in the same place counts only once rewritten.
            (Some(now), Some(before)) => now != before,
        }
    }

    /// Runs the attempts between the git-cleanliness snapshots, and ends the log.
    async fn execute(mut self) -> Result<ProviderOutput, ProviderError> {
        let git = match crate::git_check::git_snapshot(&self.session.cwd, GIT_TIMEOUT).await {
            Ok(snapshot) => snapshot,
            Err(e) => {
                tracing::warn!(error = %e, "git-cleanliness check unavailable");
                None
            }
        };
        if self.engine.config.sandbox.refuse_dirty_tree
            && let Some(snapshot) = &git
        {
            let output_dir = fs::canonicalize(&self.session.output_dir)
                .unwrap_or(self.session.output_dir.clone());
            let dirty: Vec<String> = snapshot
                .dirty_paths()
                .into_iter()
                .filter(|p| !p.starts_with(&output_dir) && !p.starts_with(&self.session.output_dir))
                .map(|p| p.display().to_string())
                .collect();
            if !dirty.is_empty() {
                let err = ProviderError::InvalidSession {
                    provider: self.provider,
                    reason: format!(
                        "the git work tree {} has uncommitted changes and sandbox.refuse_dirty_tree is set: {}",
                        snapshot.root().display(),
                        dirty.join(", ")
                    ),
                };
                self.log.record(
                    0,
                    &Record::Classified {
                        class: "dirty-tree",
                        detail: err.to_string(),
                    },
                );
                self.log.flush();
                return Err(err);
            }
        }
        let mut result = self.execute_attempts().await;
        if self.finished.is_none()
            && let Err(e) = &result
        {
            // Refused before any attempt (untested version, no sandbox, no resume): the log
            // still ends with how the run ended.
            self.finished = Some((
                e.outcome(),
                0,
                self.session.resume.clone(),
                Usage::default(),
                false,
            ));
        }
        if let Some(snapshot) = &git {
            let mut allowed: Vec<PathBuf> = vec![self.session.output_dir.clone()];
            if self.session.permissions.edit_files {
                allowed.push(self.session.cwd.clone());
            }
            allowed.extend(self.session.extra_roots.iter().cloned());
            let (strays, error) = match snapshot.changes_since(GIT_TIMEOUT).await {
                Ok(changes) => (
                    crate::git_check::strays(&changes, &allowed)
                        .iter()
                        .map(|c| c.to_string())
                        .collect::<Vec<_>>(),
                    None,
                ),
                Err(e) => (Vec::new(), Some(e.to_string())),
            };
            self.log.record(
                self.finished.as_ref().map_or(0, |f| f.1),
                &Record::StrayWrites {
                    repo: snapshot.root(),
                    strays: &strays,
                    error,
                },
            );
            if !strays.is_empty() {
                tracing::warn!(count = strays.len(), "writes outside the allowed paths");
            }
            let attestation = match &mut result {
                Ok(out) => out.attestation.as_mut(),
                Err(e) => evidence_mut(e).and_then(|ev| ev.attestation.as_mut()),
            };
            if let Some(attestation) = attestation {
                attestation.stray_writes = strays;
            }
        }
        if let Some((outcome, attempts, session, usage, signals_present)) = self.finished.take() {
            self.write_finished(outcome, attempts, &session, usage, signals_present);
        }
        result
    }

    async fn execute_attempts(&mut self) -> Result<ProviderOutput, ProviderError> {
        let config = &self.engine.config;
        self.log.record(
            0,
            &Record::RunStarted {
                provider: self.provider.as_str(),
                cwd: &self.session.cwd,
                output_dir: &self.session.output_dir,
                resume: self.session.resume.as_ref(),
                prompt_bytes: self.session.prompt.len(),
            },
        );
        // A CLI that cannot resume is refused before anything runs (not even its version probe).
        if let Some(id) = &self.session.resume
            && !self.adapter.capabilities().resume
        {
            let err = ProviderError::InvalidSession {
                provider: self.provider,
                reason: format!(
                    "{} has no headless resume, so session {id} cannot be continued; start a new session",
                    self.provider
                ),
            };
            self.log.record(
                0,
                &Record::Classified {
                    class: "invalid-session",
                    detail: err.to_string(),
                },
            );
            self.log.flush();
            return Err(err);
        }
        let sandbox = match crate::sandbox::plan(
            &config.sandbox,
            &self.session.permissions,
            crate::sandbox::bubblewrap_usable,
        ) {
            Ok(plan) => plan,
            Err(refusal) => {
                let err = ProviderError::Unsandboxed {
                    provider: self.provider,
                    backend: refusal.backend,
                    unenforced: refusal.unenforced,
                    hint: refusal.hint,
                };
                self.log.record(
                    0,
                    &Record::Classified {
                        class: "unsandboxed",
                        detail: err.to_string(),
                    },
                );
                self.log.flush();
                return Err(err);
            }
        };
        self.log
            .record(0, &Record::Attestation(&sandbox.attestation));
        self.attestation = Some(sandbox.attestation.clone());
        let cli_version = match self.adapter.version_check() {
            Some(check) => self.check_version(&check).await?,
            None => None,
        };
        let pointer = match self.adapter.prompt_delivery() {
            PromptDelivery::Stdin => None,
            PromptDelivery::PointerFile { file_name } => {
                let dir = self
                    .session
                    .signals_file
                    .parent()
                    .unwrap_or(&self.session.output_dir);
                Some(
                    write_prompt_pointer(dir, file_name, &self.session.prompt)
                        .map_err(|e| io_error(self.provider, dir, &e))?,
                )
            }
        };

        let mut rng = match config.jitter_seed {
            Some(seed) => fastrand::Rng::with_seed(seed),
            None => fastrand::Rng::new(),
        };
        let mut resume = self.session.resume.clone();
        // Set when the engine itself resumes a session it captured (after a rate limit): the
        // conversation already holds the task, so only a short continuation is sent.
        let mut continuing = false;
        let mut persisted: Option<SessionId> = None;
        let mut last_session: Option<SessionId> = self.session.resume.clone();
        let mut usage = Usage::default();
        let mut retries_used = 0u32;
        let mut stale_fallback_used = false;
        let mut attempt = 0u32;

        loop {
            attempt += 1;
            self.observer.attempt_started(attempt, resume.as_ref());
            let plan = AttemptPlan {
                session: &self.session,
                resume: resume.as_ref(),
                attempt,
                pointer: pointer.as_ref(),
            };
            let spec = self.adapter.command(&plan)?;
            let token = format!("{}-{attempt}", self.run_id);
            let policy = EnvPolicy {
                inherit: config.env_inherit,
                profile: self.adapter.env_profile(),
                allow: config.env_allow.clone(),
                set: spec
                    .env_set
                    .iter()
                    .cloned()
                    .chain([(RUN_TOKEN_VAR.to_string(), token.clone())])
                    .collect(),
            };
            let env = match &config.ambient_env {
                Some(vars) => policy.resolve(vars.iter().cloned()),
                None => policy.resolve(std::env::vars_os().map(|(k, v)| {
                    (
                        k.to_string_lossy().into_owned(),
                        v.to_string_lossy().into_owned(),
                    )
                })),
            };
            let mut env_os: Vec<(OsString, OsString)> =
                env.vars.iter().map(|(k, v)| (k.into(), v.into())).collect();
            let (program, args) = match sandbox.backend {
                SandboxBackend::Native => (spec.program.clone(), spec.args.clone()),
                SandboxBackend::Bubblewrap => {
                    let home = env
                        .vars
                        .iter()
                        .find(|(k, _)| k == "HOME")
                        .map(|(_, v)| PathBuf::from(v));
                    let state = self
                        .adapter
                        .state_paths(&crate::adapter::ChildEnv::new(&env.vars));
                    crate::sandbox::prepare_state(&state);
                    let tmp = crate::sandbox::private_tmp(&self.session.output_dir);
                    crate::sandbox::create_private_dir(&tmp)
                        .map_err(|e| io_error(self.provider, &tmp, &e))?;
                    env_os.retain(|(k, _)| k != "TMPDIR");
                    env_os.push(("TMPDIR".into(), tmp.into_os_string()));
                    let mut args = crate::sandbox::bwrap_args(
                        &config.sandbox,
                        &self.session.permissions,
                        &crate::sandbox::Paths {
                            cwd: &self.session.cwd,
                            output_dir: &self.session.output_dir,
                            extra_roots: &self.session.extra_roots,
                            state: &state,
                            home: home.as_deref(),
                        },
                    );
                    // Inside the sandbox bubblewrap would report a missing CLI as its own failure;
                    // resolve it here so the error says what it is.
                    let path_var = env
                        .vars
                        .iter()
                        .find(|(k, _)| k == "PATH")
                        .map(|(_, v)| v.as_str());
                    let resolved = resolve_program(&spec.program, path_var, &self.session.cwd)
                        .ok_or_else(|| ProviderError::CliNotFound {
                            provider: self.provider,
                            program: spec.program.display().to_string(),
                            reason: "not found on the child's PATH".to_string(),
                        })?;
                    args.push(resolved.into_os_string());
                    args.extend(spec.args.iter().cloned());
                    (config.sandbox.bwrap.clone(), args)
                }
            };
            let argv_bytes = check_argv(
                program.as_os_str(),
                args.iter().map(|a| a.as_os_str()),
                env_block_bytes(env_os.iter().map(|(k, v)| (k.as_os_str(), v.as_os_str()))),
                config.argv_platform,
            )
            .map_err(|e| ProviderError::ArgvTooLong {
                provider: self.provider,
                measured: e.measured,
                limit: e.limit,
                limit_name: e.limit_name.to_string(),
            })?;
            let stdin_prompt = match self.adapter.prompt_delivery() {
                PromptDelivery::Stdin if continuing && resume.is_some() => {
                    Some(Arc::from(CONTINUATION_PROMPT))
                }
                PromptDelivery::Stdin => Some(Arc::clone(&self.session.prompt)),
                PromptDelivery::PointerFile { .. } => None,
            };
            let stdin_label = match (&stdin_prompt, continuing && resume.is_some()) {
                (None, _) => "null",
                (Some(_), true) => "continuation",
                (Some(_), false) => "prompt",
            };
            let request = SpawnRequest {
                program,
                args,
                env: env_os,
                cwd: self.session.cwd.clone(),
                stdin: if stdin_prompt.is_some() {
                    StdinMode::Piped
                } else {
                    StdinMode::Null
                },
                parent_death_signal: config.parent_death_signal,
            };
            let child = match self.engine.spawner.spawn(&request) {
                Ok(child) => child,
                Err(e) => {
                    self.log.record(
                        attempt,
                        &Record::SpawnFailed {
                            program: &request.program,
                            error: e.to_string(),
                        },
                    );
                    self.log.flush();
                    return Err(self.spawn_error(&request.program, &e, argv_bytes));
                }
            };
            self.log.record(
                attempt,
                &Record::Spawn {
                    program: &request.program,
                    args: request
                        .args
                        .iter()
                        .map(|a| a.to_string_lossy().into_owned())
                        .collect(),
                    cwd: &self.session.cwd,
                    env_names: env.names(),
                    env_withheld: &env.withheld_secrets,
                    stdin: stdin_label,
                    pid: child.pid(),
                    resume: resume.as_ref(),
                    argv_bytes,
                },
            );
            self.log.flush();

            let provider_name = self.provider.as_str();
            let cwd = self.session.cwd.clone();
            let version = cli_version.clone();
            let meta = move |id: &SessionId| SessionMeta {
                session_id: id.clone(),
                provider: provider_name.to_string(),
                cwd: cwd.clone(),
                cli_version: version.clone(),
                attempt,
            };
            let result = supervise(
                child,
                stdin_prompt,
                AttemptContext {
                    attempt,
                    config,
                    log: &mut self.log,
                    observer: &self.observer,
                    cancel: &self.session.cancel,
                    parser: self.adapter.parser(),
                    persisted: &mut persisted,
                    session_meta: &meta,
                    output_dir: &self.session.output_dir,
                    run_token: &token,
                    liveness: self.adapter.liveness(),
                    minted_session: spec.session_id.clone(),
                },
            )
            .await;
            usage.add(&result.usage);
            if let Some(id) = &result.session_id {
                last_session = Some(id.clone());
            }

            let diagnosis = self.adapter.diagnose(&AttemptEvidence {
                exit: result.exit,
                terminal: result.terminal.as_ref(),
                stderr_tail: &result.stderr_tail,
                stdout_tail: &result.stdout_tail,
                resumed: resume.as_ref(),
                rate_limits: &result.rate_limits,
            });
            let class = classify(&ClassifyInput {
                killed_by: result.killed_by,
                terminal: result.terminal.as_ref(),
                exit: result.exit,
                diagnosis: &diagnosis,
                rate_limit_events: &result.rate_limits,
                signals_present: self.signals_present(),
                resumed: resume.is_some(),
            });
            self.log.record(
                attempt,
                &Record::Classified {
                    class: class.as_str(),
                    detail: describe(&result),
                },
            );

            match class {
                AttemptClass::RateLimited(info) => {
                    let wait = if retries_used < config.retry.max_retries {
                        config.retry.wait(
                            retries_used + 1,
                            Some(&info),
                            SystemTime::now(),
                            &mut rng,
                        )
                    } else {
                        None
                    };
                    let Some((wait, basis)) = wait else {
                        let evidence = self.evidence(attempt, &result, &last_session, usage);
                        let signals_present = self.signals_present();
                        self.finish_log(
                            Outcome::RateLimited,
                            attempt,
                            &last_session,
                            usage,
                            signals_present,
                        );
                        return Err(ProviderError::RateLimited {
                            provider: self.provider,
                            retries: retries_used,
                            resets_at_epoch_s: info.resets_at_epoch_s,
                            evidence,
                        });
                    };
                    retries_used += 1;
                    // Resume what this attempt captured; with nothing captured, keep what it
                    // resumed (the caller's session), or go cold.
                    resume = result.session_id.clone().or(resume);
                    continuing = result.session_id.is_some();
                    self.log.record(
                        attempt,
                        &Record::Backoff {
                            wait_ms: wait.as_millis() as u64,
                            reason: basis.as_str(),
                            retry: retries_used,
                            next_resume: resume.as_ref(),
                        },
                    );
                    self.log.flush();
                    self.observer.backoff(attempt, wait, basis.as_str());
                    let cancelled = tokio::select! {
                        () = tokio::time::sleep(wait) => false,
                        () = self.session.cancel.cancelled() => true,
                    };
                    if cancelled {
                        self.log.record(
                            attempt,
                            &Record::Classified {
                                class: "cancelled",
                                detail: "cancelled during the backoff sleep".into(),
                            },
                        );
                        return Err(self.finish_err(
                            Outcome::Cancelled,
                            attempt,
                            &result,
                            &last_session,
                            usage,
                        ));
                    }
                }
                AttemptClass::StaleSession if !stale_fallback_used => {
                    stale_fallback_used = true;
                    if let Some(stale) = resume.take() {
                        self.log.record(
                            attempt,
                            &Record::ColdRetry {
                                stale_session: &stale,
                            },
                        );
                    }
                }
                AttemptClass::Succeeded | AttemptClass::Recovered => {
                    let outcome = if class == AttemptClass::Succeeded {
                        Outcome::Succeeded
                    } else {
                        Outcome::Recovered
                    };
                    let signals_present = self.signals_present();
                    self.finish_log(outcome, attempt, &last_session, usage, signals_present);
                    return Ok(ProviderOutput {
                        outcome,
                        signals_file: self.session.signals_file.clone(),
                        signals_present,
                        session_id: last_session,
                        exit_code: result.exit.and_then(|e| e.code),
                        recovered_from_exit: outcome == Outcome::Recovered,
                        usage,
                        attempts: attempt,
                        duration: self.start.elapsed(),
                        final_text: result.final_text,
                        attestation: self.attestation.clone(),
                    });
                }
                AttemptClass::StaleSession => {
                    return Err(self.finish_err(
                        Outcome::StaleSession,
                        attempt,
                        &result,
                        &last_session,
                        usage,
                    ));
                }
                AttemptClass::Cancelled => {
                    return Err(self.finish_err(
                        Outcome::Cancelled,
                        attempt,
                        &result,
                        &last_session,
                        usage,
                    ));
                }
                AttemptClass::ModelUnavailable(message) => {
                    let evidence = self.evidence(attempt, &result, &last_session, usage);
                    self.finish_log(
                        Outcome::ModelUnavailable,
                        attempt,
                        &last_session,
                        usage,
                        self.signals_present(),
                    );
                    return Err(ProviderError::ModelUnavailable {
                        provider: self.provider,
                        message,
                        evidence,
                    });
                }
                AttemptClass::Refused(message) => {
                    let evidence = self.evidence(attempt, &result, &last_session, usage);
                    let signals_present = self.signals_present();
                    self.finish_log(
                        Outcome::Refused,
                        attempt,
                        &last_session,
                        usage,
                        signals_present,
                    );
                    return Err(ProviderError::Refused {
                        provider: self.provider,
                        message,
                        evidence,
                    });
                }
                AttemptClass::IdleTimeout => {
                    return Err(self.finish_err(
                        Outcome::IdleTimeout,
                        attempt,
                        &result,
                        &last_session,
                        usage,
                    ));
                }
                AttemptClass::WallTimeout => {
                    return Err(self.finish_err(
                        Outcome::WallTimeout,
                        attempt,
                        &result,
                        &last_session,
                        usage,
                    ));
                }
                AttemptClass::Crashed => {
                    return Err(self.finish_err(
                        Outcome::Crashed,
                        attempt,
                        &result,
                        &last_session,
                        usage,
                    ));
                }
            }
        }
    }

    fn evidence(
        &self,
        attempts: u32,
        result: &AttemptResult,
        session: &Option<SessionId>,
        usage: Usage,
    ) -> Box<RunEvidence> {
        Box::new(RunEvidence {
            session_id: session.clone(),
            usage,
            attempts,
            duration_ms: self.start.elapsed().as_millis() as u64,
            exit_code: result.exit.and_then(|e| e.code),
            signal: result.exit.and_then(|e| e.signal),
            stderr_tail: result.stderr_tail.clone(),
            log_path: Some(self.log.path().to_path_buf()),
            attestation: self.attestation.clone(),
        })
    }

    /// Remembers how the run ended; [`Run::execute`] writes it as the log's last line once the
    /// git-cleanliness check has run.
    fn finish_log(
        &mut self,
        outcome: Outcome,
        attempts: u32,
        session: &Option<SessionId>,
        usage: Usage,
        signals_present: bool,
    ) {
        self.finished = Some((outcome, attempts, session.clone(), usage, signals_present));
    }

    fn write_finished(
        &mut self,
        outcome: Outcome,
        attempts: u32,
        session: &Option<SessionId>,
        usage: Usage,
        signals_present: bool,
    ) {
        // The run's private TMPDIR goes with the run.
        let _ = fs::remove_dir_all(crate::sandbox::private_tmp(&self.session.output_dir));
        self.log.record(
            attempts,
            &Record::RunFinished {
                outcome,
                attempts,
                usage: &usage,
                session_id: session.as_ref(),
                signals_present,
                duration_ms: self.start.elapsed().as_millis() as u64,
            },
        );
        self.log.flush();
    }

    /// Records the end and builds the error for a failed run.
    fn finish_err(
        &mut self,
        outcome: Outcome,
        attempts: u32,
        result: &AttemptResult,
        session: &Option<SessionId>,
        usage: Usage,
    ) -> ProviderError {
        let evidence = self.evidence(attempts, result, session, usage);
        let signals_present = self.signals_present();
        self.finish_log(outcome, attempts, session, usage, signals_present);
        let provider = self.provider;
        let config = &self.engine.config;
        match outcome {
            Outcome::Cancelled => ProviderError::Cancelled { provider, evidence },
            Outcome::IdleTimeout => ProviderError::IdleTimeout {
                provider,
                idle: result.idle_limit,
                evidence,
            },
            Outcome::WallTimeout => ProviderError::WallTimeout {
                provider,
                limit: config.wall_timeout.unwrap_or(Duration::ZERO),
                evidence,
            },
            Outcome::StaleSession => {
                match session.clone().or_else(|| self.session.resume.clone()) {
                    Some(session_id) => ProviderError::StaleSession {
                        provider,
                        session_id,
                        evidence,
                    },
                    None => ProviderError::Crashed { provider, evidence },
                }
            }
            Outcome::RateLimited => ProviderError::RateLimited {
                provider,
                retries: config.retry.max_retries,
                resets_at_epoch_s: None,
                evidence,
            },
            Outcome::ModelUnavailable => ProviderError::ModelUnavailable {
                provider,
                message: String::new(),
                evidence,
            },
            Outcome::Refused => ProviderError::Refused {
                provider,
                message: String::new(),
                evidence,
            },
            Outcome::Crashed | Outcome::Succeeded | Outcome::Recovered | Outcome::SpawnFailed => {
                ProviderError::Crashed { provider, evidence }
            }
        }
    }

    fn spawn_error(&self, program: &Path, e: &std::io::Error, argv_bytes: usize) -> ProviderError {
        let provider = self.provider;
        let program_name = program.display().to_string();
        let kind = e.kind();
        if kind == std::io::ErrorKind::NotFound || kind == std::io::ErrorKind::PermissionDenied {
            ProviderError::CliNotFound {
                provider,
                program: program_name,
                reason: e.to_string(),
            }
        } else if kind == std::io::ErrorKind::ArgumentListTooLong
            || kind == std::io::ErrorKind::InvalidFilename
        {
            ProviderError::ArgvTooLong {
                provider,
                measured: argv_bytes,
                limit: argv_bytes,
                limit_name: format!("the operating system ({e})"),
            }
        } else {
            ProviderError::SpawnFailed {
                provider,
                program: program_name,
                reason: e.to_string(),
            }
        }
    }

    async fn check_version(
        &mut self,
        check: &VersionCheck,
    ) -> Result<Option<String>, ProviderError> {
        let env = crate::version::version_env();
        let probe = probe_version(
            self.engine.spawner.as_ref(),
            &check.program,
            &check.args,
            env,
            &self.session.cwd,
            check.timeout,
        )
        .await;
        let required = check.required.to_string();
        let program = check.program.display().to_string();
        let (found, accepted) = match &probe {
            VersionProbe::Found(v) => (v.to_string(), check.required.matches(v)),
            VersionProbe::Unparsed(text) => (format!("unparsed output {text:?}"), false),
            VersionProbe::TimedOut => (format!("no answer within {:?}", check.timeout), false),
            VersionProbe::SpawnFailed(e) => {
                return Err(ProviderError::CliNotFound {
                    provider: self.provider,
                    program,
                    reason: e.clone(),
                });
            }
        };
        self.log.record(
            0,
            &Record::VersionChecked {
                program: &program,
                found: Some(&found),
                required: &required,
                accepted,
                overridden: !accepted && check.allow_mismatch,
            },
        );
        if !accepted && !check.allow_mismatch {
            self.log.flush();
            return Err(ProviderError::VersionMismatch {
                provider: self.provider,
                program,
                found,
                required,
            });
        }
        Ok(Some(found))
    }
}

/// Where `program` is: as given when it names a path, else the first executable on `path`.
fn resolve_program(program: &Path, path: Option<&str>, cwd: &Path) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &Path| {
        fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.components().count() > 1 {
        let full = if program.is_absolute() {
            program.to_path_buf()
        } else {
            cwd.join(program)
        };
        return executable(&full).then_some(full);
    }
    std::env::split_paths(path?)
        .map(|dir| dir.join(program))
        .find(|p| executable(p))
}

/// How long one git-cleanliness step may take.
const GIT_TIMEOUT: Duration = Duration::from_secs(30);

fn evidence_mut(e: &mut ProviderError) -> Option<&mut RunEvidence> {
    match e {
        ProviderError::RateLimited { evidence, .. }
        | ProviderError::ModelUnavailable { evidence, .. }
        | ProviderError::Refused { evidence, .. }
        | ProviderError::StaleSession { evidence, .. }
        | ProviderError::Crashed { evidence, .. }
        | ProviderError::IdleTimeout { evidence, .. }
        | ProviderError::WallTimeout { evidence, .. }
        | ProviderError::Cancelled { evidence, .. } => Some(evidence),
        ProviderError::CliNotFound { .. }
        | ProviderError::SpawnFailed { .. }
        | ProviderError::ArgvTooLong { .. }
        | ProviderError::VersionMismatch { .. }
        | ProviderError::InvalidSession { .. }
        | ProviderError::Unsandboxed { .. }
        | ProviderError::Io { .. } => None,
    }
}

fn describe(result: &AttemptResult) -> String {
    let exit = result
        .exit
        .map_or_else(|| "no exit status".to_string(), |e| e.to_string());
    match (&result.killed_by, &result.terminal) {
        (Some(k), _) => format!("{exit}; group ended by the supervisor ({k:?})"),
        (None, Some(t)) if t.is_error => format!("{exit}; terminal event reports an error"),
        (None, Some(_)) => format!("{exit}; terminal event reports success"),
        (None, None) => format!("{exit}; no terminal event"),
    }
}

#[cfg(test)]
mod tests {
    //! Recorded-spawn tests: what the engine asks the spawner for, without starting anything.

    use std::path::PathBuf;

    use corral_ports::{AgentEvent, CancellationToken, NoopObserver, Permissions};

    use super::*;
    use crate::adapter::{CommandSpec, Diagnosis, StreamParser};
    use crate::env::EnvProfile;
    use crate::spawn::SpawnedChild;

    mockall::mock! {
        #[derive(Debug)]
        Spawner {}
        impl ProviderSpawn for Spawner {
            fn spawn(&self, request: &SpawnRequest) -> std::io::Result<Box<dyn SpawnedChild>>;
        }
    }

    struct Adapter(PromptDelivery);

    struct NoParser;
    impl StreamParser for NoParser {
        fn parse_line(&mut self, line: &str, out: &mut Vec<AgentEvent>) {
            out.push(AgentEvent::Unparsed {
                line: line.to_string(),
            });
        }
    }

    impl CliAdapter for Adapter {
        fn provider(&self) -> ProviderId {
            ProviderId::Copilot
        }
        fn prompt_delivery(&self) -> PromptDelivery {
            self.0
        }
        fn env_profile(&self) -> EnvProfile {
            EnvProfile::new("test", &["TEST_*"])
        }
        fn command(&self, plan: &AttemptPlan<'_>) -> Result<CommandSpec, ProviderError> {
            let mut args = vec!["--headless".into()];
            if let Some(p) = plan.pointer {
                args.push("-p".into());
                args.push(p.sentence.clone().into());
            }
            Ok(CommandSpec {
                program: "the-cli".into(),
                args,
                env_set: vec![("TEST_KNOB".into(), "1".into())],
                session_id: None,
            })
        }
        fn parser(&self) -> Box<dyn StreamParser> {
            Box::new(NoParser)
        }
        fn diagnose(&self, _: &AttemptEvidence<'_>) -> Diagnosis {
            Diagnosis::default()
        }
        fn capabilities(&self) -> corral_ports::Capabilities {
            corral_ports::Capabilities {
                prompt: corral_ports::PromptChannel::Stdin,
                session_id: corral_ports::SessionIdTiming::FirstLine,
                resume: true,
                effort: false,
                cost: corral_ports::CostReporting::TokensAndUsd,
                streaming: true,
                enforced_gates: &[],
                over_grants: &[],
            }
        }
    }

    fn session(dir: &Path) -> AiSession {
        AiSession {
            prompt: Arc::from("PROMPT-BODY ".repeat(20_000).as_str()),
            cwd: dir.to_path_buf(),
            extra_roots: Vec::new(),
            model: None,
            effort: None,
            permissions: Permissions::default(),
            resume: None,
            cancel: CancellationToken::new(),
            signals_file: dir.join("run/signals.json"),
            output_dir: dir.join("run"),
            max_budget_usd: None,
        }
    }

    fn engine(spawner: MockSpawner) -> Engine {
        let config = EngineConfig {
            ambient_env: Some(vec![
                ("PATH".into(), "/bin".into()),
                ("SECRET_TOKEN".into(), "x".into()),
            ]),
            sandbox: crate::sandbox::SandboxConfig {
                backend: crate::sandbox::BackendChoice::Native,
                allow_degraded_native: true,
                ..crate::sandbox::SandboxConfig::default()
            },
            ..EngineConfig::default()
        };
        Engine::with_spawner(config, Arc::new(spawner))
    }

    #[tokio::test]
    async fn stdin_delivery_pipes_the_prompt_and_keeps_it_out_of_argv() {
        let dir = tempfile::tempdir().unwrap();
        let mut spawner = MockSpawner::new();
        spawner
            .expect_spawn()
            .withf(|r: &SpawnRequest| {
                r.stdin == StdinMode::Piped
                    && r.args == [std::ffi::OsString::from("--headless")]
                    && r.env.iter().any(|(k, v)| k == "TEST_KNOB" && v == "1")
                    && r.env.iter().any(|(k, _)| k == RUN_TOKEN_VAR)
                    && !r.env.iter().any(|(k, _)| k == "SECRET_TOKEN")
            })
            .times(1)
            .returning(|_| Err(std::io::Error::from(std::io::ErrorKind::NotFound)));
        let err = engine(spawner)
            .run(
                &Adapter(PromptDelivery::Stdin),
                session(dir.path()),
                Arc::new(NoopObserver),
            )
            .await
            .unwrap_err();
        assert!(matches!(err, ProviderError::CliNotFound { .. }), "{err}");
    }

    #[tokio::test]
    async fn pointer_delivery_writes_the_file_and_passes_one_line() {
        let dir = tempfile::tempdir().unwrap();
        let pointer_path: PathBuf = dir.path().join("run/copilot-prompt.md");
        let expected = pointer_path.display().to_string();
        let mut spawner = MockSpawner::new();
        spawner
            .expect_spawn()
            .withf(move |r: &SpawnRequest| {
                let argv: Vec<String> = r
                    .args
                    .iter()
                    .map(|a| a.to_string_lossy().into_owned())
                    .collect();
                r.stdin == StdinMode::Null
                    && argv.len() == 3
                    && argv[2].contains(&expected)
                    && !argv.iter().any(|a| a.contains("PROMPT-BODY"))
            })
            .times(1)
            .returning(|_| Err(std::io::Error::from(std::io::ErrorKind::PermissionDenied)));
        let s = session(dir.path());
        let prompt = s.prompt.clone();
        let err = engine(spawner)
            .run(
                &Adapter(PromptDelivery::PointerFile {
                    file_name: "copilot-prompt.md",
                }),
                s,
                Arc::new(NoopObserver),
            )
            .await
            .unwrap_err();
        assert!(matches!(err, ProviderError::CliNotFound { .. }), "{err}");
        assert_eq!(std::fs::read_to_string(&pointer_path).unwrap(), &*prompt);
    }
}
