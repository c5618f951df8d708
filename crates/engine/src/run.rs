//! What every run does around its CLI, headless or interactive: the run's scope.
//!
//! [`RunScope::open`] checks the working directory and opens the execution log;
//! [`RunScope::begin`] opens the run's `corral_sandbox::Confinement` (which notes the git work
//! tree), writes `run_started` and refuses a dirty tree when asked to;
//! [`RunScope::plan_sandbox`] has the confinement choose the backend, or refuse, and records the
//! attestation; [`RunScope::end`] finishes the confinement, records the writes outside the
//! allowed paths in the log and the attestation, and writes `run_finished`. Between `begin` and
//! `end` the headless loop (`headless.rs`) or the handoff (`interactive.rs`) launches the CLI
//! (`launch.rs`) through the confinement; a refusal anywhere still ends the log with how the run
//! ended. The sandbox returns notes and findings; this file writes them to the log.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime};

use corral_ports::{
    AiSession, Attestation, Outcome, ProviderError, ProviderId, SessionId, StrayCheck, Usage,
};
use corral_sandbox::{Confinement, Findings, GitProgram, Note, RunRequest, SpawnGuard};

use crate::adapter::CliAdapter;
use crate::config::EngineConfig;
use crate::log::{ExecutionLog, Record};
use corral_process::spawn::ProviderSpawn;

/// How a run ended, for its last log line.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Finished {
    /// The outcome.
    pub outcome: Outcome,
    /// Attempts made.
    pub attempts: u32,
    /// The last session id seen.
    pub session: Option<SessionId>,
    /// Usage over all attempts.
    pub usage: Usage,
    /// Whether `signals.json` was written during the run.
    pub signals_present: bool,
}

/// A file's size and modification time, to tell a rewritten file from one left by an earlier run.
type FileStamp = (u64, Option<SystemTime>);

fn file_stamp(path: &Path) -> Option<FileStamp> {
    fs::metadata(path)
        .ok()
        .map(|m| (m.len(), m.modified().ok()))
}

/// One run, from the opened log to `run_finished`.
pub(crate) struct RunScope<'a> {
    /// The engine's configuration.
    config: &'a EngineConfig,
    /// The engine's spawner, which starts every program of the run.
    pub spawner: &'a std::sync::Arc<dyn ProviderSpawn>,
    pub adapter: &'a dyn CliAdapter,
    pub provider: ProviderId,
    pub session: AiSession,
    pub log: ExecutionLog,
    pub start: Instant,
    /// The stream files of every attempt, for the retention at the end.
    pub raw_streams: Vec<crate::streams::RawFile>,
    /// The run directory's `raw/`, opened at the first attempt.
    pub raw_dir: Option<crate::streams::RawDir>,
    run_id: String,
    signals_before: Option<FileStamp>,
    /// The run's sandbox, from `begin` on.
    confinement: Option<Confinement>,
    finished: Option<Finished>,
}

impl<'a> RunScope<'a> {
    /// Checks the working directory, creates the run directory and opens its log.
    pub fn open(
        config: &'a EngineConfig,
        spawner: &'a std::sync::Arc<dyn ProviderSpawn>,
        adapter: &'a dyn CliAdapter,
        session: AiSession,
    ) -> Result<Self, ProviderError> {
        let provider = adapter.provider();
        if !session.cwd.is_dir() {
            return Err(ProviderError::InvalidSession {
                provider,
                reason: format!("working directory {} does not exist", session.cwd.display()),
                hint: None,
            });
        }
        fs::create_dir_all(&session.output_dir)
            .map_err(|e| io_error(provider, &session.output_dir, &e))?;
        // A provider run that continues a task keeps the task's clock.
        let start = session.task.map_or_else(Instant::now, |t| t.started);
        // A resumed session finds the run directory as the agent left it: what it put in place
        // of `signals.json` or of a record file goes first (before the log is opened: a FIFO
        // there would block the open), and is named in the log.
        let tampered = match session.resume {
            Some(_) => crate::files::repair_run_dir(&session.output_dir, &session.signals_file),
            None => Vec::new(),
        };
        let mut log = ExecutionLog::open(&session.output_dir, start)
            .map_err(|e| io_error(provider, &session.output_dir, &e))?;
        let attempts_before = session.task.map_or(0, |t| t.attempts_before);
        for t in &tampered {
            tracing::warn!(path = %t.path.display(), was = t.was, "removed what the agent left in the run directory");
            log.record(
                attempts_before,
                &Record::TamperingRemoved {
                    path: &t.path,
                    was: t.was,
                },
            );
        }
        let signals_before = file_stamp(&session.signals_file);
        let run_id = format!(
            "{}-{}-{:016x}",
            provider,
            std::process::id(),
            fastrand::u64(..)
        );
        Ok(RunScope {
            config,
            spawner,
            adapter,
            provider,
            session,
            log,
            start,
            raw_streams: Vec::new(),
            raw_dir: None,
            run_id,
            signals_before,
            confinement: None,
            finished: None,
        })
    }

    /// The run's sandbox; an error before [`RunScope::begin`] opened it.
    pub fn confinement(&self) -> Result<&Confinement, ProviderError> {
        self.confinement
            .as_ref()
            .ok_or_else(|| self.unplanned(Path::new("the CLI")))
    }

    /// The error for a spawn asked for before the sandbox was planned (the engine's mistake).
    pub fn unplanned(&self, program: &Path) -> ProviderError {
        ProviderError::SpawnFailed {
            provider: self.provider,
            program: program.display().to_string(),
            reason: "the sandbox was not planned before the spawn".to_string(),
        }
    }

    /// What the sandbox enforces, once planned, as the checks from inside left it.
    pub fn attestation(&self) -> Option<Attestation> {
        self.confinement.as_ref().and_then(Confinement::attestation)
    }

    /// Records what the sandbox noted, in order, and flushes the log.
    pub fn record_notes(&mut self, attempt: u32, notes: &[Note]) {
        let micros = |d: std::time::Duration| u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        for note in notes {
            let record = match note {
                Note::WriteWatchStarted { error } => Record::WriteWatchStarted {
                    error: error.clone(),
                },
                Note::EgressOpened {
                    proxy,
                    allow,
                    netns,
                    setup,
                    reported,
                } => Record::EgressOpened {
                    proxy,
                    allow,
                    netns: *netns,
                    setup_us: micros(*setup),
                    reported_us: micros(*reported),
                },
                Note::SandboxChecked {
                    seen,
                    not_confirmed,
                } => Record::SandboxChecked {
                    seen,
                    not_confirmed,
                },
                Note::WriteWatch {
                    calls,
                    strays,
                    more,
                    error,
                } => Record::WriteWatch {
                    calls: *calls,
                    strays,
                    more: *more,
                    error: error.clone(),
                },
                Note::StrayWrites {
                    repo,
                    strays,
                    error,
                } => Record::StrayWrites {
                    repo,
                    strays,
                    error: error.clone(),
                },
            };
            self.log.record(attempt, &record);
        }
        self.log.flush();
    }

    /// A spawn's child was reaped: its guard ends (the way out closed, the write watch's
    /// findings kept for the stray writes) and what it noted goes to the log.
    pub fn spawn_ended(&mut self, attempt: u32, guard: SpawnGuard) {
        let notes = guard.end();
        if !notes.is_empty() {
            self.record_notes(attempt, &notes);
        }
    }

    /// The attempt number of the records before this run's first attempt: 0, or the attempts
    /// of the task's earlier provider runs, so that the numbers never go backwards in the log.
    pub fn before_attempts(&self) -> u32 {
        self.session.task.map_or(0, |t| t.attempts_before)
    }

    /// The engine's configuration.
    pub fn config(&self) -> &'a EngineConfig {
        self.config
    }

    /// The run token of one attempt, which every process of its tree carries.
    pub fn token(&self, attempt: u32) -> String {
        format!("{}-{attempt}", self.run_id)
    }

    /// Notes the git work tree, writes `run_started`, and refuses a dirty tree when the sandbox
    /// settings ask for a clean one.
    pub async fn begin(&mut self) -> Result<(), ProviderError> {
        let config = self.config();
        if config.child_subreaper {
            corral_process::process_group::become_subreaper();
        }
        let home = config
            .ambient()
            .into_iter()
            .find(|(k, _)| k == "HOME")
            .map(|(_, v)| PathBuf::from(v));
        self.confinement = Some(
            Confinement::open(RunRequest {
                config: &config.sandbox,
                permissions: &self.session.permissions,
                cwd: &self.session.cwd,
                output_dir: &self.session.output_dir,
                extra_roots: &self.session.extra_roots,
                home: home.as_deref(),
                raw_stream_files: matches!(config.capture, crate::streams::OutputCapture::Files),
                git: GitProgram::with_parts(
                    "git",
                    std::sync::Arc::clone(self.spawner),
                    config.ambient(),
                ),
            })
            .await,
        );
        self.log.record(
            self.before_attempts(),
            &Record::RunStarted {
                provider: self.provider.as_str(),
                cwd: &self.session.cwd,
                output_dir: &self.session.output_dir,
                resume: self.session.resume.as_ref(),
                prompt_bytes: self.session.prompt.len(),
            },
        );
        if config.sandbox.refuse_dirty_tree {
            self.refuse_dirty_tree()?;
        }
        Ok(())
    }

    fn refuse_dirty_tree(&mut self) -> Result<(), ProviderError> {
        let Some((root, dirty)) = self.confinement.as_ref().and_then(Confinement::dirty_paths)
        else {
            return Ok(());
        };
        let dirty: Vec<String> = dirty.iter().map(|p| p.display().to_string()).collect();
        if dirty.is_empty() {
            return Ok(());
        }
        let err = ProviderError::InvalidSession {
            provider: self.provider,
            reason: format!(
                "the git work tree {} has uncommitted changes ({}) and sandbox.refuse_dirty_tree is set",
                root.display(),
                dirty.join(", ")
            ),
            hint: Some(
                "commit or stash the changes, or set sandbox.refuse_dirty_tree = false".to_string(),
            ),
        };
        Err(self.refuse("dirty-tree", err))
    }

    /// Records a refusal before anything ran, and returns it.
    pub fn refuse(&mut self, class: &'static str, err: ProviderError) -> ProviderError {
        self.log.record(
            self.before_attempts(),
            &Record::Classified {
                class,
                detail: err.to_string(),
            },
        );
        self.log.flush();
        err
    }

    /// Refuses before the spawn when the CLI's own configuration names an endpoint this run
    /// uses that the egress proxy would refuse (see [`crate::endpoints`]): no attempt is spent
    /// on a refusal, and the message names the endpoint, the file, and the entry that allows it.
    pub fn refuse_unlisted_endpoints(&mut self) -> Result<(), ProviderError> {
        // Nothing to refuse where the sandbox does not confine the network.
        if !self
            .confinement
            .as_ref()
            .is_some_and(Confinement::egress_confined)
        {
            return Ok(());
        }
        let endpoints = crate::endpoints::ProviderEndpoints::of(self.config(), self.adapter);
        let Some(refused) = endpoints.refused_in_use() else {
            return Ok(());
        };
        let target = refused.endpoint.to_string();
        let err = ProviderError::EgressRefused {
            provider: self.provider,
            detail: format!(
                "{} names it, and an endpoint in the CLI's own configuration does not widen the allow-list (the agent can write that file); nothing was started",
                refused.source
            ),
            hint: crate::endpoints::allow_hint(&target),
            target,
            evidence: Box::default(),
        };
        Err(self.refuse("egress-refused", err))
    }

    /// Has the run's sandbox choose its backend and what it enforces, or refuse; records the
    /// attestation.
    pub fn plan_sandbox(&mut self) -> Result<(), ProviderError> {
        let planned = match self.confinement.as_mut() {
            Some(confinement) => confinement.plan(),
            None => return Err(self.unplanned(Path::new("the CLI"))),
        };
        match planned {
            Ok(attestation) => {
                self.log
                    .record(self.before_attempts(), &Record::Attestation(&attestation));
                Ok(())
            }
            Err(refusal) => {
                let err = ProviderError::Unsandboxed {
                    provider: self.provider,
                    backend: refusal.backend,
                    reason: refusal.reason,
                    unenforced: refusal.unenforced,
                    hint: refusal.hint,
                };
                Err(self.refuse("unsandboxed", err))
            }
        }
    }

    /// Whether `signals.json` was written during the run. A file left by an earlier run in the
    /// same place counts only once rewritten.
    pub fn signals_present(&self) -> bool {
        match (file_stamp(&self.session.signals_file), self.signals_before) {
            (None, _) => false,
            (Some(_), None) => true,
            (Some(now), Some(before)) => now != before,
        }
    }

    /// Remembers how the run ended; [`RunScope::end`] writes it as the log's last line once the
    /// git-cleanliness check has run.
    pub fn finish(&mut self, finished: Finished) {
        self.finished = Some(finished);
    }

    /// Ends the run: the stray writes (in the log, and in the attestation `attestation_of`
    /// finds in a success), the private `TMPDIR` removed, `run_finished`.
    pub async fn end<T>(
        mut self,
        mut result: Result<T, ProviderError>,
        attestation_of: impl FnOnce(&mut T) -> Option<&mut Attestation>,
    ) -> Result<T, ProviderError> {
        let finished = match (self.finished.take(), &result) {
            (Some(finished), _) => Some(finished),
            // Refused before any attempt (dirty tree, untested version, no sandbox, no resume):
            // the log still ends with how the run ended.
            (None, Err(e)) => Some(Finished {
                outcome: e.outcome(),
                attempts: self.before_attempts(),
                session: self.session.resume.clone(),
                usage: Usage::default(),
                signals_present: false,
            }),
            (None, Ok(_)) => None,
        };
        // Every sandbox of the run is gone by now: the confinement cleans up after them and
        // says where the run wrote outside the allowed paths.
        let findings = match self.confinement.take() {
            Some(confinement) => confinement.finish().await,
            None => Findings {
                notes: Vec::new(),
                stray_writes: Err("the run ended before the git work tree was noted".to_string()),
            },
        };
        self.record_notes(finished.as_ref().map_or(0, |f| f.attempts), &findings.notes);
        let strays = findings.stray_writes;
        let attestation = match &mut result {
            Ok(out) => attestation_of(out),
            Err(e) => e.evidence_mut().and_then(|ev| ev.attestation.as_mut()),
        };
        if let Some(attestation) = attestation {
            match strays {
                Ok(strays) => {
                    attestation.stray_writes = strays;
                    attestation.stray_check = StrayCheck::Checked;
                    attestation.stray_check_why = None;
                }
                Err(why) => {
                    attestation.stray_writes = Vec::new();
                    attestation.stray_check = StrayCheck::NotChecked;
                    attestation.stray_check_why = Some(why);
                }
            }
        }
        let succeeded = finished
            .as_ref()
            .is_some_and(|f| f.outcome == Outcome::Succeeded);
        self.retain_raw_streams(finished.as_ref().map_or(0, |f| f.attempts), succeeded)
            .await;
        if let Some(finished) = finished {
            self.write_finished(&finished);
        }
        result
    }

    /// Applies `run.raw_streams` to the stream files (compression runs off the async threads),
    /// and records what became of them.
    async fn retain_raw_streams(&mut self, attempt: u32, succeeded: bool) {
        if self.raw_streams.is_empty() {
            return;
        }
        let files = std::mem::take(&mut self.raw_streams);
        let retention = self.config().raw_streams;
        let retained = match tokio::task::spawn_blocking(move || {
            crate::streams::retain(&files, retention, succeeded)
        })
        .await
        {
            Ok(retained) => retained,
            Err(e) => {
                tracing::error!(error = %e, "the raw stream retention did not finish");
                return;
            }
        };
        for failed in retained.iter().filter(|r| r.error.is_some()) {
            tracing::warn!(file = %failed.file.display(), error = ?failed.error, "raw stream kept as it is");
        }
        self.log.record(
            attempt,
            &Record::RawStreams {
                retention,
                files: &retained,
            },
        );
    }

    fn write_finished(&mut self, finished: &Finished) {
        let end = crate::log::RunEnd {
            outcome: finished.outcome,
            attempts: finished.attempts,
            usage: &finished.usage,
            session_id: finished.session.as_ref(),
            signals_present: finished.signals_present,
            duration_ms: self.start.elapsed().as_millis() as u64,
        };
        // Part of a task run: its owner writes the one `run_finished` once the task is over.
        let record = match self.session.task {
            Some(_) => Record::ProviderRunFinished(end),
            None => Record::RunFinished(end),
        };
        self.log.record(finished.attempts, &record);
        self.log.flush();
    }

    /// An I/O error about `path`.
    pub fn io_error(&self, path: &Path, e: &std::io::Error) -> ProviderError {
        io_error(self.provider, path, e)
    }

    /// The directory beside `signals.json`, where prompt pointer files go.
    pub fn pointer_dir(&self) -> &Path {
        self.session
            .signals_file
            .parent()
            .unwrap_or(&self.session.output_dir)
    }
}

fn io_error(provider: ProviderId, path: &Path, e: &std::io::Error) -> ProviderError {
    ProviderError::Io {
        provider,
        path: path.to_path_buf(),
        reason: e.to_string(),
    }
}
