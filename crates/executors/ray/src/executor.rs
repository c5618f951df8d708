//! [`RayExecutor`]: each task one Ray job whose entrypoint is `corral sprint work`.
//!
//! Per task: the base commit is pushed to the remote (the worker must reach it), the job is
//! submitted, its log polled (what is new appended to `implement/<task>/ray-job-<n>.log` and read
//! once, [`crate::job_log`]) and its status read when it matters.
//! When the job ends with a handback (exit 0 done, 3 blocked) the task's branch and record are
//! fetched from the remote; when Ray lost it (its node went away, or someone stopped it) the job
//! is resubmitted under a new id, at most `max_resubmits` times, and the worker resumes from the
//! record it pushed after its last step (a record is taken only when its `worker.json` names
//! this run, task, base and remote). The sprint's learnings so far go to the worker as a blob
//! ref on the remote (`--learnings`). Cancelling the run stops the job.
//!
//! Jobs start ahead ([`TaskExecutor::lookahead`]): a Ray job takes a second or more before its
//! entrypoint runs (the job's supervisor, a Python worker of Ray's), so the coordinator hands
//! this executor up to `--jobs` more tasks than slots. Such a task's job is submitted once the
//! jobs holding slots have started (their starts do not compete for the CPU), with
//! `--gate <ref>`: its worker clones, prints `{"kind":"ready"}` and waits. When a slot frees
//! (a task's worker printed its `task-finished`, or its job ended) the executor takes it and
//! pushes the gate ref; the worker sees it and runs its rounds. A job started when a slot was
//! free and no task waited ahead runs at once, without a gate.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use async_trait::async_trait;
use corral_ports::CancellationToken;
use corral_sprint::{
    ExecutorError, RECORD_OWNER_FILE, RecordOwner, SprintEnd, TaskEnd, TaskExecutor, TaskHandback,
    TaskHost, TaskJob, TaskState, record_ref,
};
use std::sync::Arc;

use corral_sprint::Slot;
use tokio::sync::watch;

use crate::job_log::{JobLog, WorkerHandback};
use crate::jobs::{JobInfo, JobStatus, JobSubmission, JobsClient, JobsError, RuntimeEnv};

/// The name of this executor in settings (`executor.kind`).
pub const KIND: &str = "ray";

/// How long a stopped job gets to reach a terminal status before the executor stops waiting.
const STOP_WAIT: Duration = Duration::from_secs(30);
/// Consecutive failed polls of a job's status before the cluster counts as unreachable.
const POLL_FAILURES: u32 = 20;
/// Every how many polls a running job's status is read even when nothing asks for it: a job
/// that ends without its worker saying so (its node lost) is seen within this many polls.
const STATUS_EVERY: u32 = 4;

/// What the ray executor needs to know, built by the composition root from `executor.ray.*`.
#[derive(Debug, Clone, PartialEq)]
pub struct RaySettings {
    /// The cluster's Jobs HTTP address (`http://host:port`).
    pub address: String,
    /// The git remote the workers clone from and push to (a URL the cluster reaches).
    pub remote: String,
    /// The sprint file's path inside the repository (what `--sprint-file` names).
    pub sprint_file: String,
    /// The `corral` program on the workers.
    pub corral: String,
    /// CPUs reserved for each job's entrypoint.
    pub entrypoint_num_cpus: f64,
    /// Memory reserved for each job's entrypoint, in MiB (0: none).
    pub entrypoint_memory_mb: u64,
    /// Times a lost job is resubmitted.
    pub max_resubmits: u32,
    /// How often a job's status and log are read.
    pub poll_interval: Duration,
    /// Environment variables of every job (credentials by environment, `PATH`).
    pub env_vars: BTreeMap<String, String>,
}

/// Runs every task as a job on a Ray cluster.
#[derive(Debug, Clone)]
pub struct RayExecutor {
    client: JobsClient,
    settings: RaySettings,
    /// Of this run's tasks: how many jobs holding a slot are still starting, and how many
    /// tasks wait ahead for a slot.
    pace: Arc<watch::Sender<Pace>>,
}

/// See [`RayExecutor::pace`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Pace {
    /// Jobs submitted with a slot whose entrypoint has not started yet.
    starting: usize,
    /// Tasks started ahead whose gate is not open yet.
    ahead: usize,
}

/// One count of a [`Pace`], given back when dropped.
struct Counted {
    pace: Arc<watch::Sender<Pace>>,
    field: fn(&mut Pace) -> &mut usize,
}

impl Counted {
    fn new(pace: &Arc<watch::Sender<Pace>>, field: fn(&mut Pace) -> &mut usize) -> Self {
        pace.send_modify(|p| *field(p) += 1);
        Self {
            pace: Arc::clone(pace),
            field,
        }
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        let field = self.field;
        self.pace
            .send_modify(|p| *field(p) = field(p).saturating_sub(1));
    }
}

/// One attempt of a task's job, as it is followed.
struct Attempt<'h> {
    /// The gate its worker waits at, until it is pushed.
    gate: Option<String>,
    /// Whether the worker said it is ready at its gate.
    ready: bool,
    /// The task's round slot, while it holds one (kept across attempts).
    slot: Option<Slot<'h>>,
    /// Counts the job among those starting, until its entrypoint runs.
    starting: Option<Counted>,
    /// Counts the task among those waiting ahead, until its gate opens.
    ahead: Option<Counted>,
}

impl RayExecutor {
    /// The executor for the cluster in `settings`.
    ///
    /// # Errors
    /// [`ExecutorError::Settings`] when the address is not an `http://host:port` URL.
    pub fn new(settings: RaySettings) -> Result<Self, ExecutorError> {
        let client = JobsClient::new(&settings.address).map_err(|e| ExecutorError::Settings {
            key: "executor.ray.address".to_owned(),
            reason: e.to_string(),
        })?;
        Ok(Self {
            client,
            settings,
            pace: Arc::new(watch::Sender::new(Pace::default())),
        })
    }

    /// The Jobs API client.
    pub fn client(&self) -> &JobsClient {
        &self.client
    }
}

/// How one job ended, as the executor sees it.
enum JobEnd {
    /// The worker handed the task back (done, blocked, paused).
    HandedBack(WorkerHandback),
    /// Ray lost the job or someone else stopped it: resubmit.
    Lost(String),
    /// The worker failed without a handback.
    Failed(String),
    /// The run was cancelled and the job stopped.
    Cancelled,
}

#[async_trait]
impl TaskExecutor for RayExecutor {
    fn kind(&self) -> &'static str {
        KIND
    }

    fn is_remote(&self) -> bool {
        true
    }

    fn lookahead(&self, jobs: usize) -> usize {
        jobs
    }

    async fn run_task(
        &self,
        job: TaskJob,
        host: &dyn TaskHost,
        cancel: &CancellationToken,
    ) -> Result<TaskHandback, ExecutorError> {
        let root = host.project_root().to_path_buf();
        let task_dir = host.layout().task_dir(&job.task);
        std::fs::create_dir_all(&task_dir).map_err(|e| ExecutorError::Failed {
            task: job.task.clone(),
            reason: format!("cannot create {}: {e}", task_dir.display()),
        })?;
        // Claimed before the first wait: the coordinator polls the tasks it hands out in run
        // order, so a free slot goes to the first of them, not to whichever ends its push
        // first (the pushes run side by side); and a task ahead whose push ends first sees
        // the jobs holding slots as starting, so its job is not submitted before theirs.
        let mut claimed = Some(self.claim(host));
        // The worker checks out `base`, so the remote must hold it under some ref.
        let base_ref = format!("{}:refs/corral/{}/{}/base", job.base, job.sprint, job.task);
        host.git_push(&root, &self.settings.remote, &[&base_ref])
            .await?;
        self.stop_leftovers(&job, host).await?;
        let learnings = self.ship_learnings(&job, host).await?;
        let mut state = job.resume.clone();
        let mut losses = 0;
        let mut attempt = 0;
        loop {
            attempt += 1;
            let log = task_dir.join(format!("ray-job-{attempt}.log"));
            let (slot, count) = claimed.take().unwrap_or_else(|| self.claim(host));
            let holds = slot.is_some();
            let mut followed = Attempt {
                gate: None,
                ready: false,
                slot,
                starting: None,
                ahead: None,
            };
            if holds {
                followed.starting = Some(count);
            } else {
                followed.ahead = Some(count);
                // Ahead: submitted once the jobs holding slots have started.
                let mut pace = self.pace.subscribe();
                tokio::select! {
                    () = cancel.cancelled() => return Ok(paused(state, task_dir)),
                    _ = pace.wait_for(|p| p.starting == 0) => {}
                }
            }
            let (id, gate) = self
                .submit(
                    &job,
                    attempt,
                    followed.ahead.is_some(),
                    learnings.as_deref(),
                )
                .await?;
            followed.gate = gate;
            tracing::info!(task = %job.task, job = %id, attempt, gated = followed.gate.is_some(), "submitted the task's Ray job");
            host.job_log(
                &job.task,
                &format!(
                    "ray: submitted job {id}{} (log: {})",
                    if followed.gate.is_some() {
                        ", started ahead: it waits for a free slot"
                    } else {
                        ""
                    },
                    log.display()
                ),
            );
            let end = self
                .follow(&job, host, &id, &log, &mut followed, cancel)
                .await?;
            // Its slot goes back: a resubmission waits for one like any task (it may go
            // pending, its node gone, while others could run), a handed-back task folds
            // without one.
            drop(followed);
            match end {
                JobEnd::Cancelled => return Ok(paused(state, task_dir)),
                JobEnd::Failed(reason) => {
                    return Err(ExecutorError::Failed {
                        task: job.task.clone(),
                        reason: format!("{reason} (its log: {})", log.display()),
                    });
                }
                JobEnd::Lost(reason) => {
                    losses += 1;
                    tracing::warn!(task = %job.task, job = %id, %reason, losses, "the task's Ray job was lost");
                    host.job_log(&job.task, &format!("ray: job {id} lost: {reason}"));
                    if let Some(recorded) = self.fetch_record(&job, host).await? {
                        state = recorded;
                        host.record_progress(&state)?;
                    }
                    if losses > self.settings.max_resubmits {
                        return Err(ExecutorError::Lost {
                            task: job.task.clone(),
                            times: losses,
                            reason,
                        });
                    }
                }
                JobEnd::HandedBack(handback) => {
                    return self.fold(&job, host, handback, task_dir).await;
                }
            }
        }
    }
}

/// The task paused by a cancelled run, as it was last recorded.
fn paused(state: TaskState, record: PathBuf) -> TaskHandback {
    TaskHandback {
        end: TaskEnd::Paused(SprintEnd::Cancelled),
        head: None,
        state,
        record,
    }
}

impl RayExecutor {
    /// A round slot when one is free and no task waits ahead for one, the task counted among
    /// the jobs starting; else no slot, the task counted among those ahead. None is taken
    /// while a task waits ahead: it would wait behind a job that has not started, and a
    /// cluster full of jobs at their gates could leave that one pending for ever.
    fn claim<'h>(&self, host: &'h dyn TaskHost) -> (Option<Slot<'h>>, Counted) {
        let slot = if self.pace.borrow().ahead == 0 {
            host.round_slots().try_take()
        } else {
            None
        };
        let field: fn(&mut Pace) -> &mut usize = if slot.is_some() {
            |p| &mut p.starting
        } else {
            |p| &mut p.ahead
        };
        (slot, Counted::new(&self.pace, field))
    }

    /// Pushes the sprint's learnings so far (`learnings.ndjson`, the coordinator's) to the
    /// remote as one blob under `refs/corral/<sprint>/<task>/learnings`; the ref, `None` when
    /// there are none. A worker's clone holds no `.corral/` of the coordinator's, and its
    /// generator's brief shows what the tasks done so far learned, as a local task's does; the
    /// tasks it depends on are done (and folded, their learnings appended) before it is handed
    /// here.
    async fn ship_learnings(
        &self,
        job: &TaskJob,
        host: &dyn TaskHost,
    ) -> Result<Option<String>, ExecutorError> {
        let path = host.layout().learnings_file();
        if std::fs::metadata(&path).map_or(true, |m| m.len() == 0) {
            return Ok(None);
        }
        let root = host.project_root();
        let file = path.display().to_string();
        let blob = host.git(root, &["hash-object", "-w", "--", &file]).await?;
        let reference = format!("refs/corral/{}/{}/learnings", job.sprint, job.task);
        let refspec = format!("{}:{reference}", blob.trim());
        host.git_push(root, &self.settings.remote, &[&refspec])
            .await?;
        Ok(Some(reference))
    }

    /// Submits attempt `attempt` of the task's job, `gated` or not, with the sprint's
    /// `learnings` ref; its submission id and gate. An id already taken on the cluster (an
    /// earlier run with the same run id) moves on to the next free one.
    async fn submit(
        &self,
        job: &TaskJob,
        attempt: u32,
        gated: bool,
        learnings: Option<&str>,
    ) -> Result<(String, Option<String>), ExecutorError> {
        let mut suffix = 0;
        loop {
            let id = match suffix {
                0 => format!(
                    "corral-{}-{}-{}-{attempt}",
                    job.sprint, job.task, job.run_id
                ),
                n => format!(
                    "corral-{}-{}-{}-{attempt}.{n}",
                    job.sprint, job.task, job.run_id
                ),
            };
            // One gate per job: a gate left on the remote by an earlier job opens no other.
            let gate = gated.then(|| format!("refs/corral/{}/{}/gate/{id}", job.sprint, job.task));
            let submission = JobSubmission {
                entrypoint: self.entrypoint(job, gate.as_deref(), learnings),
                submission_id: id.clone(),
                entrypoint_num_cpus: Some(self.settings.entrypoint_num_cpus),
                entrypoint_memory: (self.settings.entrypoint_memory_mb > 0)
                    .then(|| self.settings.entrypoint_memory_mb * 1024 * 1024),
                runtime_env: RuntimeEnv {
                    env_vars: self.settings.env_vars.clone(),
                },
                metadata: BTreeMap::from([
                    ("corral.sprint".to_owned(), job.sprint.to_string()),
                    ("corral.task".to_owned(), job.task.to_string()),
                ]),
            };
            match self.client.submit(&submission).await {
                Ok(id) => return Ok((id, gate)),
                Err(JobsError::Taken { .. }) if suffix < 100 => suffix += 1,
                Err(e) => return Err(self.cluster_error(e)),
            }
        }
    }

    /// The worker's command line, shell-quoted.
    fn entrypoint(&self, job: &TaskJob, gate: Option<&str>, learnings: Option<&str>) -> String {
        let words = [
            self.settings.corral.as_str(),
            "sprint",
            "work",
            "--remote",
            &self.settings.remote,
            "--sprint-file",
            &self.settings.sprint_file,
            "--task",
            job.task.as_str(),
            "--base",
            &job.base,
            "--branch",
            &job.branch,
            // The worker's clone is its own: a private directory on its node keyed by the
            // run's id and the task (found again by a resubmission that lands on the same
            // node), and a record it resumes from only when the record names this run.
            "--run-id",
            &job.run_id,
            "--json",
        ];
        let gate = gate.map(|g| ["--gate", g]);
        let learnings = learnings.map(|l| ["--learnings", l]);
        // The task's part of the sprint's spend cap: the worker sees no other task's spend.
        let upto = job.max_cost_usd.map(|usd| format!("{usd}"));
        let upto = upto.as_deref().map(|usd| ["--max-cost-usd", usd]);
        words
            .iter()
            .chain(gate.iter().flatten())
            .chain(learnings.iter().flatten())
            .chain(upto.iter().flatten())
            .map(|w| shell_quote(w))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// Polls the job until it ends or the run is cancelled, appending its log to `log`; opens
    /// its gate once its worker is ready and a slot is free, and gives the slot back once the
    /// worker's rounds are over.
    async fn follow<'h>(
        &self,
        job: &TaskJob,
        host: &'h dyn TaskHost,
        id: &str,
        log: &Path,
        attempt: &mut Attempt<'h>,
        cancel: &CancellationToken,
    ) -> Result<JobEnd, ExecutorError> {
        let mut job_log = JobLog::new(log.to_path_buf());
        let mut failures = 0;
        let mut polls: u32 = 0;
        loop {
            let waiting = attempt.ready && attempt.gate.is_some();
            tokio::select! {
                () = cancel.cancelled() => {
                    self.stop(id, &mut job_log).await;
                    relay_events(host, &job.task, &mut job_log);
                    return Ok(JobEnd::Cancelled);
                }
                taken = host.round_slots().take(), if waiting => {
                    attempt.slot = Some(taken);
                    tracing::debug!(task = %job.task, job = %id, "took a slot; opening the gate");
                    if let Err(e) = self.open_gate(job, host, attempt).await {
                        // Its worker would wait at the gate for ever.
                        self.stop(id, &mut job_log).await;
                        return Err(e);
                    }
                    tracing::debug!(task = %job.task, job = %id, "gate open");
                    host.job_log(&job.task, &format!("ray: job {id} took a free slot"));
                    continue;
                }
                () = tokio::time::sleep(self.settings.poll_interval) => {}
            }
            polls = polls.wrapping_add(1);
            // The log every poll: what the worker says opens its gate and frees its slot. Its
            // status only when it matters: while the job starts (the jobs started ahead wait
            // for it), once the worker handed the task back (its job is about to end), when
            // the log could not be read, and every few polls for a job that ends unheard
            // (its node lost, its entrypoint killed).
            let logs_read = self.read_logs(id, &mut job_log).await;
            relay_events(host, &job.task, &mut job_log);
            let said = job_log.said();
            if said.ready && !attempt.ready {
                tracing::debug!(task = %job.task, job = %id, "the worker is ready at its gate");
            }
            attempt.ready |= said.ready;
            if said.rounds_over && attempt.slot.take().is_some() {
                // The rest is the worker's pushes and Ray's end: another task's rounds
                // may run meanwhile.
                tracing::debug!(task = %job.task, job = %id, "rounds over; the slot is free");
            }
            let ask_status = attempt.starting.is_some()
                || said.handback.is_some()
                || !logs_read
                || polls.is_multiple_of(STATUS_EVERY);
            if !ask_status {
                continue;
            }
            let info = match self.client.status(id).await {
                Ok(info) => {
                    failures = 0;
                    info
                }
                Err(e) if e.is_retryable() && failures < POLL_FAILURES => {
                    failures += 1;
                    tracing::debug!(job = %id, error = %e, "a poll of the job failed; trying again");
                    continue;
                }
                Err(e) => return Err(self.cluster_error(e)),
            };
            if info.status != JobStatus::Pending && attempt.starting.take().is_some() {
                tracing::debug!(task = %job.task, job = %id, status = ?info.status, "the job started");
            }
            if info.status.is_terminal() {
                tracing::debug!(task = %job.task, job = %id, status = ?info.status, "the job ended");
                // What it printed between the last read and its end.
                self.read_logs(id, &mut job_log).await;
                job_log.finish();
                relay_events(host, &job.task, &mut job_log);
                return Ok(classify(&info, job_log.said().handback.clone()));
            }
        }
    }

    /// Stops the task's jobs that an earlier run of the sprint left on the cluster (its
    /// coordinator killed): one waiting at its gate would wait for ever, one running would
    /// push the task's branch and record beside this run's. Waits until they ended, so that
    /// the record this run's worker resumes from is their last. Any job of the task not
    /// ended is one: a run hands each task to its executor once, before any job of it (not
    /// told apart by its run id: a sprint continued keeps its run's id).
    async fn stop_leftovers(
        &self,
        job: &TaskJob,
        host: &dyn TaskHost,
    ) -> Result<(), ExecutorError> {
        let listed = self
            .client
            .list()
            .await
            .map_err(|e| self.cluster_error(e))?;
        fn label<'j>(j: &'j crate::jobs::ListedJob, key: &str) -> Option<&'j str> {
            j.metadata
                .as_ref()
                .and_then(|m| m.get(key))
                .map(String::as_str)
        }
        for left in listed.iter().filter(|j| {
            !j.status.is_terminal()
                && label(j, "corral.sprint") == Some(job.sprint.as_str())
                && label(j, "corral.task") == Some(job.task.as_str())
        }) {
            let Some(id) = left.submission_id.as_deref() else {
                continue;
            };
            tracing::warn!(task = %job.task, job = %id, "stopping a job an earlier run left");
            host.job_log(
                &job.task,
                &format!("ray: stopping job {id}, left by an earlier run"),
            );
            let log = host
                .layout()
                .task_dir(&job.task)
                .join(format!("ray-leftover-{id}.log"));
            self.stop(id, &mut JobLog::new(log)).await;
        }
        Ok(())
    }

    /// Pushes the attempt's gate to the remote: its worker starts its rounds.
    async fn open_gate(
        &self,
        job: &TaskJob,
        host: &dyn TaskHost,
        attempt: &mut Attempt<'_>,
    ) -> Result<(), ExecutorError> {
        if let Some(gate) = attempt.gate.take() {
            let refspec = format!("{}:{gate}", job.base);
            host.git_push(host.project_root(), &self.settings.remote, &[&refspec])
                .await?;
        }
        attempt.ahead = None;
        Ok(())
    }

    /// Stops the job and waits (bounded) until Ray says it ended; best effort, the run is
    /// ending anyway.
    async fn stop(&self, id: &str, job_log: &mut JobLog) {
        if let Err(e) = self.client.stop(id).await {
            tracing::warn!(job = %id, error = %e, "could not stop the task's Ray job");
            return;
        }
        let deadline = tokio::time::Instant::now() + STOP_WAIT;
        while tokio::time::Instant::now() < deadline {
            match self.client.status(id).await {
                Ok(info) if info.status.is_terminal() => break,
                Ok(_) | Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
        self.read_logs(id, job_log).await;
        job_log.finish();
    }

    /// Reads the job's log into `job_log` (what is new is appended and read); whether the
    /// Jobs API answered.
    async fn read_logs(&self, id: &str, job_log: &mut JobLog) -> bool {
        match self.client.logs(id).await {
            Ok(logs) => {
                job_log.take(&logs);
                true
            }
            Err(e) => {
                tracing::debug!(job = %id, error = %e, "the job's log could not be read");
                false
            }
        }
    }

    /// The task's record from its record ref on the remote, restored into the task's record
    /// directory; its `task.json`. `None` when the worker pushed no record yet.
    async fn fetch_record(
        &self,
        job: &TaskJob,
        host: &dyn TaskHost,
    ) -> Result<Option<TaskState>, ExecutorError> {
        let root = host.project_root();
        let record_ref = record_ref(job.sprint.as_str(), job.task.as_str());
        let refspec = format!("+{record_ref}:{record_ref}");
        let fetched = host
            .git_remote(
                root,
                &["fetch", "--quiet", &self.settings.remote, &refspec],
                &self.settings.remote,
            )
            .await;
        if fetched.is_err() {
            // No record pushed yet (the job was lost before its first step).
            return Ok(None);
        }
        // The ref is the sprint's and task's name, not this run's: an earlier sprint of the
        // same names (another repository, another prompt) left its record there until this
        // run's worker pushes its first.
        let owner_path = format!("{record_ref}:implement/{}/{RECORD_OWNER_FILE}", job.task);
        let owner = host
            .git(root, &["show", &owner_path])
            .await
            .ok()
            .and_then(|json| serde_json::from_str::<RecordOwner>(&json).ok());
        if !owner.is_some_and(|o| o.is_of(job, &self.settings.remote)) {
            host.job_log(
                &job.task,
                &format!("ray: the record at {record_ref} is not this run's; not taken"),
            );
            return Ok(None);
        }
        let prefix = format!("implement/{}/", job.task);
        let sprint_dir = host.layout().root().to_path_buf();
        host.git_extract(root, &record_ref, &prefix, &sprint_dir)
            .await?;
        let task_json = host.layout().task_state_file(&job.task);
        let task_json = std::fs::read(&task_json).map_err(|e| ExecutorError::Failed {
            task: job.task.clone(),
            reason: format!("cannot read {} from {record_ref}: {e}", task_json.display()),
        })?;
        let state = serde_json::from_slice(&task_json).map_err(|e| ExecutorError::Failed {
            task: job.task.clone(),
            reason: format!("the task.json in {record_ref} is not a task state: {e}"),
        })?;
        Ok(Some(state))
    }

    /// The worker handed the task back: its record and (when done) its branch, fetched.
    async fn fold(
        &self,
        job: &TaskJob,
        host: &dyn TaskHost,
        handback: WorkerHandback,
        record: PathBuf,
    ) -> Result<TaskHandback, ExecutorError> {
        let state = self
            .fetch_record(job, host)
            .await?
            .unwrap_or_else(|| job.resume.clone());
        let root = host.project_root();
        let head = if handback.status == "done" {
            let refspec = format!("+refs/heads/{0}:refs/heads/{0}", job.branch);
            host.git_remote(
                root,
                &["fetch", "--quiet", &self.settings.remote, &refspec],
                &self.settings.remote,
            )
            .await?;
            let head = host
                .git(root, &["rev-parse", &format!("refs/heads/{}", job.branch)])
                .await?;
            Some(head.trim().to_owned())
        } else {
            None
        };
        let end = match handback.status.as_str() {
            "done" | "blocked" | "skipped" => TaskEnd::Finished,
            _ if state
                .reason
                .as_deref()
                .is_some_and(|r| r.contains("RateLimited")) =>
            {
                TaskEnd::Paused(SprintEnd::RateLimited)
            }
            _ => TaskEnd::Paused(SprintEnd::Cancelled),
        };
        Ok(TaskHandback {
            end,
            head,
            state,
            record,
        })
    }

    fn cluster_error(&self, e: JobsError) -> ExecutorError {
        if e.is_retryable() {
            ExecutorError::Unreachable {
                what: format!("the Ray cluster at {}", self.client.address()),
                reason: e.to_string(),
            }
        } else {
            ExecutorError::Settings {
                key: "executor.ray.address".to_owned(),
                reason: e.to_string(),
            }
        }
    }
}

/// Hands the worker's sprint events read so far to the coordinator, which writes them into the
/// sprint's `events.jsonl` (its one writer) as a local task's.
fn relay_events(host: &dyn TaskHost, task: &corral_sprint::TaskId, job_log: &mut JobLog) {
    for event in job_log.take_events() {
        host.worker_event(task, &event);
    }
}

/// How a job that reached a terminal status ended for the task.
fn classify(info: &JobInfo, handback: Option<WorkerHandback>) -> JobEnd {
    match (info.status, handback) {
        // Not by this executor (its own stop returns before asking): the worker resumes from
        // its record on a resubmission, whatever it printed on the way out.
        (JobStatus::Stopped, _) => JobEnd::Lost(format!(
            "stopped: {}",
            info.message.as_deref().unwrap_or("no message")
        )),
        // Done, blocked, or paused by the worker itself (rate limited): the handback says.
        (JobStatus::Succeeded | JobStatus::Failed, Some(handback)) => JobEnd::HandedBack(handback),
        (JobStatus::Failed, None) if info.entrypoint_failed() => JobEnd::Failed(format!(
            "the worker exited without handing the task back: {}",
            info.message.as_deref().unwrap_or("no message")
        )),
        (JobStatus::Failed, None) => JobEnd::Lost(format!(
            "{}: {}",
            info.error_type.as_deref().unwrap_or("failed"),
            info.message.as_deref().unwrap_or("no message")
        )),
        (JobStatus::Succeeded, None) => {
            JobEnd::Failed("the worker exited 0 without handing the task back".to_owned())
        }
        (JobStatus::Pending | JobStatus::Running, _) => {
            JobEnd::Lost("the job was not over when it was judged".to_owned())
        }
    }
}

/// `word` quoted for a POSIX shell (Ray runs the entrypoint through one).
fn shell_quote(word: &str) -> String {
    if !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=@+,".contains(c))
    {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_with_shell_characters_are_quoted() {
        assert_eq!(shell_quote("corral/s.tasks/a"), "corral/s.tasks/a");
        assert_eq!(shell_quote("it's here"), r"'it'\''s here'");
        assert_eq!(shell_quote(""), "''");
    }
}
