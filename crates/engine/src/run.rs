//! What every run does around its CLI, headless or interactive: the run's scope.
//!
//! [`RunScope::open`] checks the working directory and opens the execution log;
//! [`RunScope::begin`] notes the git work tree, writes `run_started` and refuses a dirty tree when
//! asked to; [`RunScope::plan_sandbox`] chooses the backend, or refuses, and records the
//! attestation; [`RunScope::end`] names the writes outside the allowed paths, adds them to the
//! attestation, removes the private `TMPDIR` and writes `run_finished`. Between `begin` and `end`
//! the headless loop (`headless.rs`) or the handoff (`interactive.rs`) launches the CLI
//! (`launch.rs`); a refusal anywhere still ends the log with how the run ended.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use corral_ports::{
    AiSession, Attestation, Outcome, ProviderError, ProviderId, SessionId, StrayCheck, Usage,
};

use crate::adapter::CliAdapter;
use crate::config::EngineConfig;
use crate::log::{ExecutionLog, Record};
use corral_process::spawn::ProviderSpawn;
use corral_sandbox::git_check::{GitProgram, GitSnapshot, strays};
use corral_sandbox::policy::SandboxPlan;

/// How long one git-cleanliness step may take.
const GIT_TIMEOUT: Duration = Duration::from_secs(30);

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
    /// What the sandbox enforces, once planned.
    pub attestation: Option<Attestation>,
    /// The stream files of every attempt, for the retention at the end.
    pub raw_streams: Vec<crate::streams::RawFile>,
    /// The run directory's `raw/`, opened at the first attempt.
    pub raw_dir: Option<crate::streams::RawDir>,
    run_id: String,
    signals_before: Option<FileStamp>,
    git: Option<GitSnapshot>,
    /// Why there is no snapshot, when there is none: the stray-write check will not run.
    git_missing: String,
    /// The protected paths' placeholders made for this run's sandboxes, removed at the end
    /// when untouched (see `sandbox::remove_placeholders`).
    placeholders: std::sync::Mutex<Vec<corral_sandbox::policy::Placeholder>>,
    finished: Option<Finished>,
    /// What the native backend's write watch saw over the run's attempts.
    watched: Watched,
}

/// The write watches of a run's attempts under the native backend, taken together.
#[derive(Debug, Default)]
struct Watched {
    /// Attempts that ran natively.
    attempts: u32,
    /// Every stray they saw, once.
    strays: std::collections::BTreeSet<String>,
    /// Why some attempt's watch did not see all of it, when one did not.
    gap: Option<String>,
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
            attestation: None,
            raw_streams: Vec::new(),
            raw_dir: None,
            run_id,
            signals_before,
            git: None,
            git_missing: "the run ended before the git work tree was noted".to_string(),
            placeholders: std::sync::Mutex::default(),
            finished: None,
            watched: Watched::default(),
        })
    }

    /// Notes placeholders made for an attempt's sandbox.
    pub fn placeholders_made(&self, made: Vec<corral_sandbox::policy::Placeholder>) {
        if let Ok(mut all) = self.placeholders.lock() {
            all.extend(made);
        }
    }

    /// An attempt under the native backend ended: what its write watch saw goes to the log and
    /// into the run's stray writes.
    pub fn watch_ended(
        &mut self,
        attempt: u32,
        watch: Option<Result<corral_sandbox::write_watch::Watch, String>>,
    ) {
        let Some(watch) = watch else {
            return;
        };
        self.watched.attempts += 1;
        let seen = match watch {
            Ok(watch) => watch.finish(),
            Err(why) => {
                self.watched.gap.get_or_insert(why);
                return;
            }
        };
        self.log.record(
            attempt,
            &Record::WriteWatch {
                calls: seen.calls,
                strays: &seen.strays,
                more: seen.more,
                error: seen.error.clone(),
            },
        );
        if let Some(e) = seen.error {
            self.watched.gap.get_or_insert(e);
        }
        if seen.more > 0 {
            self.watched.strays.insert(format!(
                "... and {} more writes outside the allowed paths",
                seen.more
            ));
        }
        self.watched.strays.extend(seen.strays);
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
        let git = GitProgram::with_parts("git", std::sync::Arc::clone(self.spawner), config.ambient());
        self.git = match git.snapshot(&self.session.cwd, GIT_TIMEOUT).await {
            Ok(snapshot) => {
                self.git_missing = "the working directory is not in a git work tree".to_string();
                snapshot
            }
            Err(e) => {
                tracing::warn!(error = %e, "git-cleanliness check unavailable");
                self.git_missing = format!("git is unavailable: {e}");
                None
            }
        };
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
        let Some(snapshot) = &self.git else {
            return Ok(());
        };
        let output_dir =
            fs::canonicalize(&self.session.output_dir).unwrap_or(self.session.output_dir.clone());
        let dirty: Vec<String> = snapshot
            .dirty_paths()
            .into_iter()
            .filter(|p| !p.starts_with(&output_dir) && !p.starts_with(&self.session.output_dir))
            .map(|p| p.display().to_string())
            .collect();
        if dirty.is_empty() {
            return Ok(());
        }
        let err = ProviderError::InvalidSession {
            provider: self.provider,
            reason: format!(
                "the git work tree {} has uncommitted changes ({}) and sandbox.refuse_dirty_tree is set",
                snapshot.root().display(),
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
    pub fn refuse_unlisted_endpoints(&mut self, plan: &SandboxPlan) -> Result<(), ProviderError> {
        match plan.backend {
            corral_ports::SandboxBackend::Bubblewrap => {}
            // Nothing confines the network without bubblewrap.
            corral_ports::SandboxBackend::Native => return Ok(()),
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

    /// Chooses the backend and what it enforces, or refuses; records the attestation.
    pub fn plan_sandbox(&mut self) -> Result<SandboxPlan, ProviderError> {
        let planned = corral_sandbox::policy::plan(
            &self.config().sandbox,
            &self.session.permissions,
            corral_sandbox::policy::bubblewrap_usable,
        );
        let plan = match planned {
            Ok(plan) => plan,
            Err(refusal) => {
                let err = ProviderError::Unsandboxed {
                    provider: self.provider,
                    backend: refusal.backend,
                    reason: refusal.reason,
                    unenforced: refusal.unenforced,
                    hint: refusal.hint,
                };
                return Err(self.refuse("unsandboxed", err));
            }
        };
        // A work tree that is the whole filesystem or holds the home confines nothing.
        let mut trees: Vec<&std::path::Path> = self
            .session
            .extra_roots
            .iter()
            .map(|p| p.as_path())
            .collect();
        if self.session.permissions.edit_files {
            trees.push(&self.session.cwd);
        }
        let home = self
            .config()
            .ambient()
            .into_iter()
            .find(|(k, _)| k == "HOME")
            .map(|(_, v)| PathBuf::from(v));
        let confined = corral_sandbox::policy::confine_trees(
            &self.config().sandbox,
            plan,
            &trees,
            home.as_deref(),
        );
        let mut plan = match confined {
            Ok(plan) => plan,
            Err(refusal) => {
                let err = ProviderError::Unsandboxed {
                    provider: self.provider,
                    backend: refusal.backend,
                    reason: refusal.reason,
                    unenforced: refusal.unenforced,
                    hint: refusal.hint,
                };
                return Err(self.refuse("unsandboxed", err));
            }
        };
        if plan.backend == corral_ports::SandboxBackend::Bubblewrap {
            let mut roots: Vec<&std::path::Path> = self
                .session
                .extra_roots
                .iter()
                .map(|p| p.as_path())
                .collect();
            if self.session.permissions.edit_files {
                roots.push(&self.session.cwd);
            }
            plan.read_only_links = corral_sandbox::policy::multi_link_files(&roots);
            plan.attestation.read_only_links = plan
                .read_only_links
                .iter()
                .map(|p| p.display().to_string())
                .collect();
        }
        self.log.record(
            self.before_attempts(),
            &Record::Attestation(&plan.attestation),
        );
        self.attestation = Some(plan.attestation.clone());
        Ok(plan)
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
        // Every sandbox of the run is gone by now: what Corral made to bind read-only goes
        // too, when the run left it as it was.
        let placeholders = self
            .placeholders
            .lock()
            .map(|mut p| std::mem::take(&mut *p))
            .unwrap_or_default();
        corral_sandbox::policy::remove_placeholders(&placeholders);
        // The copies of the record files written in place while a sandbox had them bound:
        // with no sandbox left, the next writes are renames again.
        for copy in corral_sandbox::policy::record_copies(&self.session.output_dir) {
            if fs::symlink_metadata(&copy).is_ok_and(|m| m.is_file()) {
                let _ = fs::remove_file(&copy);
            }
        }
        let strays = self
            .stray_writes(finished.as_ref().map_or(0, |f| f.attempts))
            .await;
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

    /// The changes outside the allowed paths since [`RunScope::begin`], recorded in the log;
    /// `Err` says why they were not checked (outside a git work tree, git failed): never an
    /// empty list, which would read as a clean tree.
    async fn stray_writes(&mut self, attempt: u32) -> Result<Vec<String>, String> {
        let from_git = self.git_strays(attempt).await;
        if self.watched.attempts == 0 {
            return from_git;
        }
        // Under the native backend the write watch saw every write of the CLI's process tree,
        // wherever it went: with it whole, the check is whole even outside a git work tree.
        let watched = std::mem::take(&mut self.watched.strays);
        let whole_watch = self.watched.gap.is_none();
        match from_git {
            Ok(found) => {
                let mut all: std::collections::BTreeSet<String> = found.into_iter().collect();
                all.extend(watched);
                Ok(all.into_iter().collect())
            }
            Err(_) if whole_watch => Ok(watched.into_iter().collect()),
            Err(why) => Err(format!(
                "{why}; and the write watch did not see every write: {}",
                self.watched.gap.as_deref().unwrap_or("")
            )),
        }
    }

    /// The changes the git snapshots show outside the allowed paths since [`RunScope::begin`],
    /// recorded in the log; `Err` says why they were not checked.
    async fn git_strays(&mut self, attempt: u32) -> Result<Vec<String>, String> {
        let Some(snapshot) = self.git.as_ref() else {
            return Err(self.git_missing.clone());
        };
        let mut allowed: Vec<PathBuf> = vec![self.session.output_dir.clone()];
        if self.session.permissions.edit_files {
            allowed.push(self.session.cwd.clone());
        }
        allowed.extend(self.session.extra_roots.iter().cloned());
        let (found, error): (Vec<String>, Option<String>) =
            match snapshot.changes_since(GIT_TIMEOUT).await {
                Ok(changes) => (
                    strays(&changes, &allowed)
                        .iter()
                        .map(|c| c.to_string())
                        .collect::<Vec<_>>(),
                    None,
                ),
                Err(e) => (Vec::new(), Some(e.to_string())),
            };
        self.log.record(
            attempt,
            &Record::StrayWrites {
                repo: snapshot.root(),
                strays: &found,
                error: error.clone(),
            },
        );
        if !found.is_empty() {
            tracing::warn!(count = found.len(), "writes outside the allowed paths");
        }
        match error {
            Some(e) => Err(format!("the git-cleanliness check failed: {e}")),
            None => Ok(found),
        }
    }

    fn write_finished(&mut self, finished: &Finished) {
        // The run's private TMPDIR goes with the run.
        let _ = fs::remove_dir_all(corral_sandbox::policy::private_tmp(
            &self.session.output_dir,
        ));
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
