//! The executor port: "run this task's rounds somewhere and hand back its branch".
//!
//! In a parallel run (`--jobs` above 1) the coordinator (the sprint's flow) decides which task
//! runs when and folds what comes back; a [`TaskExecutor`] decides where a task runs: in a git
//! worktree on this machine (`corral-executor-local`), or as a job on a cluster whose worker
//! runs `corral sprint work` (`corral-executor-ray`). It is the sprint's second seam, beside
//! [`RoleAgent`](crate::RoleAgent).
//!
//! One writer: an executor never writes `sprint.json` nor the learnings. It reports the task's
//! state after every step through [`TaskHost::record_progress`] (the coordinator copies it into
//! its state and writes the file), and hands the task back with a [`TaskHandback`]; the
//! coordinator folds the branch head named there onto the sprint's branch.

use std::path::{Path, PathBuf};

use async_trait::async_trait;
use corral_ports::{CancellationToken, CommandRunner};
use serde::{Deserialize, Serialize};

use crate::error::{ExecutorError, SprintError};
use crate::event::SprintEnd;
use crate::layout::SprintLayout;
use crate::names::{SprintName, TaskId};
use crate::slots::Slots;
use crate::state::TaskState;

/// One task, as the coordinator hands it to an executor.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskJob {
    /// The sprint.
    pub sprint: SprintName,
    /// The task.
    pub task: TaskId,
    /// The commit the task's branch starts at (the sprint branch's head when it was ready).
    pub base: String,
    /// The task's own branch (`corral/<sprint>.tasks/<task>`), which the executor hands back.
    pub branch: String,
    /// The sprint run's id (the `Corral-Run:` trailer of the task's commit).
    pub run_id: String,
    /// The resume point: the task's last recorded state. `Pending` starts the task afresh;
    /// `Running` continues it at its round and step (its progress says which).
    pub resume: TaskState,
    /// For a remote executor's task under `[sprint] max_cost_usd`: the spend (the task's own,
    /// in dollars, over all its runs) at which the task pauses before its next spawn. Its
    /// worker sees only its own task's spend, so the coordinator hands each task in flight its
    /// part of what is left of the cap (see `flow/coordinator.rs`); `None` lets the task run
    /// to its own caps. The worker pauses (`budget-exhausted`) once it is reached, and the
    /// coordinator starts the task again with a new part while the sprint's cap is not reached.
    pub max_cost_usd: Option<f64>,
}

impl TaskJob {
    /// Whether the task starts afresh (no round of it was recorded).
    pub fn is_fresh(&self) -> bool {
        self.resume.status == crate::state::TaskStatus::Pending || self.resume.progress.is_none()
    }
}

/// How a task's run through an executor ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskEnd {
    /// The task ended: done (its commit on its branch) or blocked.
    Finished,
    /// The sprint must stop (cancelled, rate limited); the task continues on the next run
    /// from its last recorded step.
    Paused(SprintEnd),
}

/// What an executor hands back for a task.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskHandback {
    /// How the run ended.
    pub end: TaskEnd,
    /// The head of the task's branch that the coordinator folds, fetched into the project's
    /// repository (`Some` when the task is done).
    pub head: Option<String>,
    /// The task's final state: status, round, progress (when paused), usage, warnings.
    pub state: TaskState,
    /// Where the task's record (`implement/<task>/`) now is on this machine.
    pub record: PathBuf,
}

/// Where a task runs: on this machine, on a cluster. Implementations never write the sprint's
/// state or learnings (see the module's text).
#[async_trait]
pub trait TaskExecutor: Send + Sync {
    /// The executor's name in settings and events (`local`, `ray`).
    fn kind(&self) -> &'static str;

    /// Whether tasks run away from this process (on a cluster): then a sprint goes through
    /// this executor even with `--jobs 1`, which otherwise runs its tasks in place, one by one.
    fn is_remote(&self) -> bool {
        false
    }

    /// How many tasks beyond `--jobs` the coordinator may hand this executor while every
    /// round slot is taken: a cluster starts their jobs meanwhile, so that a job's own start
    /// (seconds on Ray) is spent while other tasks' rounds run, not after them. Each such task
    /// waits for a slot from [`TaskHost::round_slots`] before its first round. Zero (the
    /// default) for an executor whose start costs nothing worth hiding.
    fn lookahead(&self, jobs: usize) -> usize {
        let _ = jobs;
        0
    }

    /// Runs `job`'s rounds (from its resume point) and hands back its branch. The rounds run
    /// only while the executor holds one of `host.round_slots()`. Every step's task state goes
    /// to `host.record_progress`; `cancel` fired stops the task at its next step (a remote job
    /// is stopped) with [`TaskEnd::Paused`].
    async fn run_task(
        &self,
        job: TaskJob,
        host: &dyn TaskHost,
        cancel: &CancellationToken,
    ) -> Result<TaskHandback, ExecutorError>;
}

/// What the coordinator lends an executor for one sprint run.
#[async_trait]
pub trait TaskHost: Send + Sync {
    /// The project's root (its repository's work tree).
    fn project_root(&self) -> &Path;

    /// The names of the sprint's state and record on disk.
    fn layout(&self) -> &SprintLayout;

    /// The supervised command runner (git, `setup`): an executor creates no process itself.
    fn commands(&self) -> &dyn CommandRunner;

    /// Runs `git args` in `cwd` with the sprint's committer identity; its stdout when it
    /// exits 0.
    async fn git(&self, cwd: &Path, args: &[&str]) -> Result<String, ExecutorError>;

    /// Runs `git args` in `cwd` like [`TaskHost::git`], allowed to reach `remote` (a fetch):
    /// Corral's git reaches no remote otherwise (`protocol.allow=never`); this one command
    /// gets `GIT_ALLOW_PROTOCOL` set to the transport `remote` names.
    async fn git_remote(
        &self,
        cwd: &Path,
        args: &[&str],
        remote: &str,
    ) -> Result<String, ExecutorError>;

    /// `git push --force remote refspecs` from the repository in `cwd`, allowed to reach
    /// `remote` as [`TaskHost::git_remote`] is. A push only reads the local repository, so it
    /// runs beside the run's other git instead of waiting for its turn: a gate opened for a
    /// waiting job does not wait behind a fold.
    async fn git_push(
        &self,
        cwd: &Path,
        remote: &str,
        refspecs: &[&str],
    ) -> Result<(), ExecutorError>;

    /// Writes the files of `tree_ish` below `path` into `into` byte for byte, leaving the
    /// index and work tree of the repository in `repo` alone ([`crate::extract_tree`]): how
    /// a task's record comes back from a ref.
    async fn git_extract(
        &self,
        repo: &Path,
        tree_ish: &str,
        path: &str,
        into: &Path,
    ) -> Result<(), ExecutorError>;

    /// Runs the sprint's `setup` (if it has one) in a new work tree of a task.
    async fn run_setup(&self, work_tree: &Path) -> Result<(), ExecutorError>;

    /// Records a task's state after a step: the coordinator copies it into `sprint.json`.
    fn record_progress(&self, task: &TaskState) -> Result<(), ExecutorError>;

    /// Appends a line a remote job printed to the task's record (`implement/<task>/job.log`).
    fn job_log(&self, task: &TaskId, line: &str);

    /// An event a remote task's worker printed (`corral sprint work --json`: one object with
    /// an `event` key), written into the sprint's `events.jsonl` as the coordinator's own: a
    /// remote task's steps are recorded there as a local task's are, and the coordinator stays
    /// the file's one writer. Dropped by default.
    fn worker_event(&self, _task: &TaskId, _event: &serde_json::Map<String, serde_json::Value>) {}

    /// The run's round slots, `--jobs` of them: at most that many tasks' rounds (their
    /// agents) run at once, however many tasks are in flight.
    fn round_slots(&self) -> &Slots;

    /// Runs `job`'s rounds here, in `work_tree` (a checkout on `job.branch`), with the
    /// sprint's agents, engine, sandbox and record: what the local executor runs, and what
    /// `corral sprint work` runs on a worker.
    async fn work_task(
        &self,
        job: &TaskJob,
        work_tree: &Path,
    ) -> Result<TaskHandback, ExecutorError>;
}

/// The ref on a remote executor's git remote that a task's record is pushed to (by its
/// worker, after its steps) and fetched from (by the coordinator, and by a worker resuming
/// it): a commit whose tree holds `implement/<task>/` and `tree/`, the work tree as it was.
pub fn record_ref(sprint: &str, task: &str) -> String {
    format!("refs/corral/{sprint}/{task}/record")
}

/// The file beside a remote task's state (`implement/<task>/worker.json`) that says whose
/// record it is: its worker writes it before its first step, so every record it pushes holds it.
pub const RECORD_OWNER_FILE: &str = "worker.json";

/// Whose record a remote task's record is: the sprint run, the task (and its text), the base
/// and the remote its worker ran for. A record is resumed from (by a worker) or taken as the
/// task's progress (by the coordinator) only when it names the same: a sprint of the same name
/// and task id run earlier (another repository, another prompt) leaves a record at the same
/// ref, and a clone on a node at a path anyone could have made first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RecordOwner {
    /// The sprint run's id: the same across a lost job's resubmissions and a continued run.
    pub run_id: String,
    /// The sprint.
    pub sprint: String,
    /// The task.
    pub task: String,
    /// The commit the task's branch started at.
    pub base: String,
    /// The git remote the worker cloned from.
    pub remote: String,
    /// The task as the sprint file states it (id, title, instructions, dependencies): a
    /// digest, so that a task whose text changed starts afresh. Only the worker reads its
    /// sprint file at `base`; the coordinator leaves it out of its comparison.
    pub task_digest: String,
}

impl RecordOwner {
    /// Whether a record of this owner is `job`'s, run against `remote`: the coordinator's
    /// check, without the task's digest (see [`RecordOwner::task_digest`]).
    pub fn is_of(&self, job: &TaskJob, remote: &str) -> bool {
        self.run_id == job.run_id
            && self.sprint == job.sprint.as_str()
            && self.task == job.task.as_str()
            && self.base == job.base
            && self.remote == remote
    }
}

/// The transport git uses for `url`: its scheme, `ssh` for `host:path`, `file` for a path
/// (the value `GIT_ALLOW_PROTOCOL` needs to let a command reach it).
pub fn git_transport(url: &str) -> &str {
    match url.split_once("://") {
        Some((scheme, _)) => scheme,
        None if url.contains(':') && !url.starts_with('/') => "ssh",
        None => "file",
    }
}

/// Where a task's steps are recorded when it runs outside the coordinator (a worker of
/// `corral sprint work`, or the coordinator's own host).
pub trait TaskRecorder: Send + Sync {
    /// Records the task's state after a step.
    fn record(&self, task: &TaskState) -> Result<(), SprintError>;

    /// Before one of `task`'s spawns in a parallel run: whether the sprint's spend cap
    /// (`[sprint] max_cost_usd`) leaves room for it beside the spawns of the other tasks in
    /// flight. On [`SpawnAdmission::Wait`] the recorder keeps `waker` and wakes it when a spawn
    /// in flight ends. The default admits every spawn: a recorder that sees only its own task
    /// (a worker's) cannot tell, and the task's own cap check still runs.
    fn admit_spawn(&self, _task: &TaskId, _waker: &std::task::Waker) -> SpawnAdmission {
        SpawnAdmission::Go
    }

    /// After a spawn [`TaskRecorder::admit_spawn`] let go ended, its spend recorded.
    fn spawn_ended(&self, _task: &TaskId) {}
}

/// Whether a parallel task's next spawn may start, as the sprint's spend cap stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SpawnAdmission {
    /// It may.
    Go,
    /// Not yet: the spend so far and a spawn's worth for each spawn in flight would pass the
    /// cap; ask again once one of them ended.
    Wait,
    /// The cap is reached: the sprint pauses (`budget-exhausted`), naming what was spent.
    CapReached(String),
}
