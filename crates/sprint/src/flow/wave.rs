//! `corral sprint run --jobs N` (N above 1): the tasks whose dependencies are done run at the
//! same time, at most N at once in a rolling queue (a task starts as soon as a slot is free and
//! its dependencies are folded), each through the run's [`TaskExecutor`] on its own branch
//! (`corral/<sprint>.tasks/<task>`): in its own git worktree here
//! (`.corral/sprints/<name>/worktrees/<task>/`, `corral-executor-local`), or as a job on a
//! cluster. The tasks handed back done are folded onto the sprint's branch in run order
//! (fast-forward, else cherry-pick): a done task waits for the tasks before it to end. A fold
//! that conflicts blocks only that task, names the paths, and keeps its branch.
//!
//! One writer: the coordinator. The executors report every step of a task through the host's
//! [`TaskHost::record_progress`], which copies the task's entry into the one state and writes
//! `sprint.json`; the learnings are appended by the coordinator when it folds a task, never by
//! the tasks. The tasks' futures are polled by the coordinator alone, so that its own writes
//! (a fold, a task started) never interleave with a task's. A sprint stopped with tasks in
//! flight continues each at its step on the next run (the local executor in the same
//! worktree); a task done and not yet folded is folded then, and a fold already made is found,
//! not made again.

use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::{Mutex, PoisonError};
use std::task::Poll;

use async_trait::async_trait;
use corral_contract::{Contract, validate_signals_file};
use corral_ports::CommandRunner;

use super::{Flow, SprintError, progress_mut, read_session_id, write_file};
use crate::error::ExecutorError;
use crate::event::{SprintEnd, SprintEvent};
use crate::executor::{TaskEnd, TaskExecutor, TaskHandback, TaskHost, TaskJob, TaskRecorder};
use crate::file::{Gate, Task};
use crate::git::Git;
use crate::layout::{Role, SESSION_ID_FILE, SIGNALS_FILE, SprintLayout};
use crate::names::TaskId;
use crate::slots::Slots;
use crate::state::{
    Attribution, SprintState, Step, TaskProgress, TaskState, TaskStatus, write_state,
};

/// A task in flight: its executor's run.
type Running<'f> = Pin<Box<dyn Future<Output = Result<TaskHandback, ExecutorError>> + Send + 'f>>;

/// The branch of task `task` in sprint `sprint`: beside the sprint's own `corral/<sprint>`
/// (which, being a branch, cannot also be a directory of branches).
pub(crate) fn task_branch(sprint: &str, task: &TaskId) -> String {
    format!("corral/{sprint}.tasks/{task}")
}

/// The coordinator as its executors see it: the one state (its one writer) and the flow.
struct Coordinator<'c, 'r, 'a> {
    flow: &'c Flow<'r, 'a>,
    shared: Mutex<SprintState>,
    /// The executors' git runs one command at a time: two `git worktree add` at once race on
    /// `.git/worktrees/` (one reads the other's half-made entry), as two fetches would.
    git_turn: Slots,
    /// The `--jobs` slots a task's rounds run in.
    round_slots: Slots,
}

impl Coordinator<'_, '_, '_> {
    /// Git in `cwd` with the sprint's identity, allowed to reach `remote` when one is named.
    fn git_in(&self, cwd: &Path, remote: Option<&str>) -> Git<'_> {
        let mut env = self.flow.run.options.git_env.clone();
        if let Some(remote) = remote {
            env.push((
                "GIT_ALLOW_PROTOCOL".to_string(),
                crate::executor::git_transport(remote).to_string(),
            ));
        }
        Git {
            runner: self.flow.run.commands,
            cwd: cwd.to_path_buf(),
            cancel: &self.flow.run.cancel,
            env,
            known: crate::git::Known::default(),
        }
    }

    /// `git args` through [`Coordinator::git_in`], in the run's git turn.
    async fn git_in_turn(
        &self,
        cwd: &Path,
        remote: Option<&str>,
        args: &[&str],
    ) -> Result<String, ExecutorError> {
        let _turn = self.git_turn.take().await;
        Ok(self
            .git_in(cwd, remote)
            .run(args)
            .await
            .map_err(SprintError::from)?)
    }

    fn snapshot(&self) -> SprintState {
        self.shared
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn replace(&self, state: SprintState) {
        *self.shared.lock().unwrap_or_else(PoisonError::into_inner) = state;
    }

    /// Takes task `i`'s handback into the state: its final entry, the head to fold.
    fn hand_back(&self, i: usize, handback: TaskHandback) -> Result<(), SprintError> {
        let mut whole = self.shared.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(entry) = whole.tasks.get_mut(i) {
            let branch = entry.task_branch.take();
            *entry = handback.state;
            entry.task_branch = entry.task_branch.take().or(branch);
            if entry.status == TaskStatus::Done && handback.head.is_some() {
                entry.commit = handback.head;
            }
        }
        whole.updated_at = self.flow.now();
        write_state(&self.flow.layout.state_file(), &whole)?;
        Ok(())
    }
}

impl TaskRecorder for Coordinator<'_, '_, '_> {
    fn record(&self, task: &TaskState) -> Result<(), SprintError> {
        // Held only while the file is written: no task's save overlaps another's.
        let mut whole = self.shared.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(entry) = whole.tasks.iter_mut().find(|t| t.id == task.id) {
            entry.clone_from(task);
        }
        whole.updated_at = self.flow.now();
        write_state(&self.flow.layout.state_file(), &whole)?;
        Ok(())
    }
}

#[async_trait]
impl TaskHost for Coordinator<'_, '_, '_> {
    fn project_root(&self) -> &Path {
        self.flow.run.project_root
    }

    fn layout(&self) -> &SprintLayout {
        &self.flow.layout
    }

    fn commands(&self) -> &dyn CommandRunner {
        self.flow.run.commands
    }

    fn round_slots(&self) -> &Slots {
        &self.round_slots
    }

    async fn git(&self, cwd: &Path, args: &[&str]) -> Result<String, ExecutorError> {
        self.git_in_turn(cwd, None, args).await
    }

    async fn git_remote(
        &self,
        cwd: &Path,
        args: &[&str],
        remote: &str,
    ) -> Result<String, ExecutorError> {
        self.git_in_turn(cwd, Some(remote), args).await
    }

    async fn git_push(
        &self,
        cwd: &Path,
        remote: &str,
        refspecs: &[&str],
    ) -> Result<(), ExecutorError> {
        let mut args = vec!["push", "--quiet", "--force", remote];
        args.extend_from_slice(refspecs);
        self.git_in(cwd, Some(remote))
            .run(&args)
            .await
            .map_err(SprintError::from)?;
        Ok(())
    }

    async fn git_extract(
        &self,
        repo: &Path,
        tree_ish: &str,
        path: &str,
        into: &Path,
    ) -> Result<(), ExecutorError> {
        // Reads the repository's objects and writes only below `into`: no turn needed.
        Ok(crate::git::extract_tree(
            self.flow.run.commands,
            repo,
            &self.flow.run.options.git_env,
            &self.flow.run.cancel,
            tree_ish,
            path,
            into,
        )
        .await
        .map_err(SprintError::from)?)
    }

    async fn run_setup(&self, work_tree: &Path) -> Result<(), ExecutorError> {
        Ok(self.flow.setup_in(work_tree).await?)
    }

    fn record_progress(&self, task: &TaskState) -> Result<(), ExecutorError> {
        Ok(self.record(task)?)
    }

    fn job_log(&self, task: &TaskId, line: &str) {
        let path = self.flow.layout.task_dir(task).join(JOB_LOG_FILE);
        // Best effort, as a log is: through the record's handle, never through a link.
        if let (Some(rel), Ok(record)) = (
            self.flow.layout.below_root(&path),
            self.flow.layout.record(),
        ) {
            let _ = record.append(rel, format!("{line}\n").as_bytes());
        }
    }

    async fn work_task(
        &self,
        job: &TaskJob,
        work_tree: &Path,
    ) -> Result<TaskHandback, ExecutorError> {
        Ok(super::work_task(self.flow.run, job, work_tree, self).await?)
    }
}

/// How a task's commit went onto the sprint's branch.
enum Applied {
    /// The branch has it now: the commit there, and `fast-forward` or `cherry-pick`.
    Made(String, &'static str),
    /// The pick came out empty: the branch had the same change already.
    Empty,
    /// The pick did not apply (aborted): why, as "conflicts in a, b" or "fails: <git's words>".
    Failed(String),
}

/// The check's output on the sprint's branch after a task's fold, in the task's directory.
pub const FOLD_CHECK_FILE: &str = "fold-check.txt";

/// A task's change as it was when its fold failed and it was sent home, in its directory.
pub const SENT_HOME_PATCH_FILE: &str = "sent-home.patch";

/// How a fold whose change the branch already has is named (the `folded` event's `how`).
pub const ALREADY_ON_BRANCH: &str = "already on the branch";

/// The largest patch of a task sent home that is saved.
const PATCH_LIMIT: usize = 64 * 1024 * 1024;

/// What a remote task's job printed, in the task's directory.
pub const JOB_LOG_FILE: &str = "job.log";

/// The first of `running` to end, taken out of it, with its index.
async fn next_done(
    running: &mut Vec<(usize, Running<'_>)>,
) -> (usize, Result<TaskHandback, ExecutorError>) {
    std::future::poll_fn(|cx| {
        for k in 0..running.len() {
            let ready = match running.get_mut(k) {
                Some((_, future)) => match future.as_mut().poll(cx) {
                    Poll::Ready(out) => Some(out),
                    Poll::Pending => None,
                },
                None => None,
            };
            if let Some(out) = ready {
                let (i, _) = running.swap_remove(k);
                return Poll::Ready((i, out));
            }
        }
        Poll::Pending
    })
    .await
}

/// An executor's error as the sprint's: its own machinery's error as it was.
fn sprint_error(kind: &'static str, task: TaskId, e: ExecutorError) -> SprintError {
    match e {
        ExecutorError::Sprint(inner) => *inner,
        other @ (ExecutorError::Setup { .. }
        | ExecutorError::Unreachable { .. }
        | ExecutorError::Lost { .. }
        | ExecutorError::Failed { .. }
        | ExecutorError::Settings { .. }) => SprintError::Executor {
            kind,
            task,
            source: Box::new(other),
        },
    }
}

impl Flow<'_, '_> {
    /// Runs the sprint's tasks through the executor, at most `jobs` at once; `Some` when the
    /// sprint must stop (cancelled, rate limited), `None` when no task is left that can run.
    pub(super) async fn run_waves(
        &self,
        state: &mut SprintState,
        run_id: &str,
    ) -> Result<Option<SprintEnd>, SprintError> {
        let host = Coordinator {
            flow: self,
            shared: Mutex::new(state.clone()),
            git_turn: Slots::new(1),
            round_slots: Slots::new(self.run.options.jobs.max(1)),
        };
        let result = self.run_queue(&host, run_id).await;
        *state = host
            .shared
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner);
        result
    }

    /// The rolling queue: fold what can be folded, start what is ready in the free slots,
    /// wait for the first task in flight to end; until nothing runs and nothing can start.
    async fn run_queue(
        &self,
        host: &Coordinator<'_, '_, '_>,
        run_id: &str,
    ) -> Result<Option<SprintEnd>, SprintError> {
        let jobs = self.run.options.jobs.max(1);
        let executor: &dyn TaskExecutor = self.run.executor;
        let in_flight = jobs + executor.lookahead(jobs);
        let mut running: Vec<(usize, Running<'_>)> = Vec::new();
        let mut pause: Option<SprintEnd> = None;
        let mut failure: Option<SprintError> = None;
        let mut held: Vec<(TaskId, TaskId)> = Vec::new();
        loop {
            let before = host.snapshot();
            let mut state = before.clone();
            self.fold_ready(&mut state).await?;
            if self.run.cancel.is_cancelled() {
                pause.get_or_insert(SprintEnd::Cancelled);
            }
            let mut started = Vec::new();
            if pause.is_none() && failure.is_none() && running.len() < in_flight {
                let busy: Vec<usize> = running.iter().map(|(i, _)| *i).collect();
                let ready = self.ready(&mut state, &busy, in_flight - running.len(), &mut held)?;
                if !ready.is_empty() {
                    let head = self.git.head().await?;
                    for i in ready {
                        self.restart_at_tip(&mut state, i, &head).await?;
                        if let Some(job) = self.job(&mut state, i, &head, run_id) {
                            started.push((i, job));
                        }
                    }
                    self.save(&mut state)?;
                }
            }
            // A fold or a skip can make a task ready that was not: looked at again.
            let changed = state != before;
            host.replace(state);
            if !started.is_empty() {
                // With `jobs` tasks in flight before it, a task starts ahead: it waits for
                // a round slot.
                let mut tasks: Vec<TaskId> =
                    started.iter().map(|(_, job)| job.task.clone()).collect();
                let ahead = tasks.split_off(jobs.saturating_sub(running.len()).min(tasks.len()));
                self.emit(SprintEvent::WaveStarted { tasks, jobs, ahead });
            }
            for (i, job) in started {
                running.push((i, executor.run_task(job, host, &self.run.cancel)));
            }
            if running.is_empty() {
                if changed && pause.is_none() && failure.is_none() {
                    continue;
                }
                break;
            }
            let (i, result) = next_done(&mut running).await;
            match result {
                Ok(handback) => {
                    if let TaskEnd::Paused(end) = handback.end {
                        pause.get_or_insert(end);
                    }
                    host.hand_back(i, handback)?;
                }
                Err(e) => {
                    let task = host.snapshot().tasks.get(i).map(|t| t.id.clone());
                    if let (None, Some(task)) = (&failure, task) {
                        failure = Some(sprint_error(executor.kind(), task, e));
                    }
                }
            }
        }
        if let Some(e) = failure {
            return Err(e);
        }
        Ok(pause)
    }

    /// A fold a stop cut short (an entry with `fold_onto`) may have left a cherry-pick half
    /// made in the project's tree (the stop came between the pick and its abort): aborted
    /// before anything looks at the tree, so that the rerun finds the branch as it was before
    /// the pick and folds again, instead of refusing the tree as dirty.
    pub(super) async fn settle_fold(&self, state: &SprintState) -> Result<(), SprintError> {
        if !state.tasks.iter().any(|t| t.fold_onto.is_some()) {
            return Ok(());
        }
        if self
            .git
            .succeeds(&["rev-parse", "--quiet", "--verify", "CHERRY_PICK_HEAD"])
            .await?
        {
            if !self.git.succeeds(&["cherry-pick", "--abort"]).await? {
                self.git
                    .run(&["reset", "--hard", "--quiet", "HEAD"])
                    .await?;
            }
            self.git.forget();
        }
        Ok(())
    }

    /// A task sent home whose round has not begun starts at the sprint branch's tip as it is
    /// when the task starts, not as it was when it was sent home: held back behind another
    /// task sent home with it, it would otherwise start before that task's fold and meet the
    /// same conflict again. Only while no worktree holds its branch (the send-home removed
    /// it); moving the branch and writing the base are each safe to redo after a stop.
    async fn restart_at_tip(
        &self,
        state: &mut SprintState,
        i: usize,
        head: &str,
    ) -> Result<(), SprintError> {
        let Some(t) = state.tasks.get(i) else {
            return Ok(());
        };
        let not_begun = t.status == TaskStatus::Running
            && t.sent_home > 0
            && t.progress.as_ref().is_some_and(|p| {
                p.step == Step::PreVerify
                    && p.pre_passed.is_none()
                    && p.spawned.is_none()
                    && p.base != head
            });
        if !not_begun || self.layout.worktree_dir(&t.id).join(".git").exists() {
            return Ok(());
        }
        let branch = task_branch(self.file().sprint.name.as_str(), &t.id);
        self.git.run(&["branch", "--force", &branch, head]).await?;
        if let Some(p) = progress_mut(state, i) {
            p.base = head.to_string();
        }
        self.save(state)
    }

    /// Task `i`'s job, its branch written into its entry: a fresh task starts at `head`, one
    /// left running continues from its own base.
    fn job(&self, state: &mut SprintState, i: usize, head: &str, run_id: &str) -> Option<TaskJob> {
        let t = state.tasks.get_mut(i)?;
        let branch = task_branch(self.file().sprint.name.as_str(), &t.id);
        t.task_branch = Some(branch.clone());
        let base = t
            .progress
            .as_ref()
            .filter(|_| t.status == TaskStatus::Running)
            .map_or_else(|| head.to_string(), |p| p.base.clone());
        Some(TaskJob {
            sprint: self.file().sprint.name.clone(),
            task: t.id.clone(),
            base,
            branch,
            run_id: run_id.to_string(),
            resume: t.clone(),
        })
    }

    /// The tasks to start: at most `free`, not `busy`, pending or left running, whose
    /// dependencies are done and folded; those left running first (they were in flight).
    /// Tasks whose dependency failed are skipped on the way. A task whose paths may overlap
    /// those of a task in flight (`busy`, started now, or done before it in run order and not
    /// yet folded) is held back until that one ends: run at once, they would likely conflict
    /// at the fold. Each hold is told once (`held`).
    fn ready(
        &self,
        state: &mut SprintState,
        busy: &[usize],
        free: usize,
        held: &mut Vec<(TaskId, TaskId)>,
    ) -> Result<Vec<usize>, SprintError> {
        let mut running = Vec::new();
        let mut pending = Vec::new();
        for i in 0..state.tasks.len() {
            if busy.contains(&i) {
                continue;
            }
            let status = match state.tasks.get(i).map(|t| t.status) {
                Some(s @ (TaskStatus::Pending | TaskStatus::Running)) => s,
                Some(TaskStatus::Done | TaskStatus::Blocked | TaskStatus::Skipped) | None => {
                    continue;
                }
            };
            if self.skip_if_dependency_failed(state, i)? {
                continue;
            }
            let Some(task) = state.tasks.get(i).and_then(|t| self.file().task(&t.id)) else {
                continue;
            };
            let deps_done = task.depends_on.iter().all(|dep| {
                state
                    .tasks
                    .iter()
                    .find(|t| &t.id == dep)
                    .is_none_or(|t| t.status == TaskStatus::Done && t.task_branch.is_none())
            });
            if deps_done {
                match status {
                    TaskStatus::Running => running.push(i),
                    TaskStatus::Pending
                    | TaskStatus::Done
                    | TaskStatus::Blocked
                    | TaskStatus::Skipped => pending.push(i),
                }
            }
        }
        let mut wave: Vec<usize> = Vec::new();
        for i in running.into_iter().chain(pending) {
            if wave.len() >= free {
                break;
            }
            let mine = self.footprint(state, i);
            let unfolded = (0..i).filter(|&j| {
                state
                    .tasks
                    .get(j)
                    .is_some_and(|t| t.status == TaskStatus::Done && t.task_branch.is_some())
            });
            let blocker = if mine.is_empty() {
                None
            } else {
                busy.iter()
                    .chain(wave.iter())
                    .copied()
                    .chain(unfolded)
                    .find_map(|j| {
                        crate::overlap::overlap(&mine, &self.footprint(state, j)).map(|o| (j, o))
                    })
            };
            match blocker {
                None => wave.push(i),
                Some((j, overlap)) => {
                    let (Some(task), Some(behind)) = (
                        state.tasks.get(i).map(|t| t.id.clone()),
                        state.tasks.get(j).map(|t| t.id.clone()),
                    ) else {
                        continue;
                    };
                    let pair = (task.clone(), behind.clone());
                    if !held.contains(&pair) {
                        held.push(pair);
                        self.emit(SprintEvent::Held {
                            task,
                            behind,
                            overlap,
                        });
                    }
                }
            }
        }
        wave.sort_unstable();
        Ok(wave)
    }

    /// The paths task `i` may touch: its `touches`, and what its last attempt changed (the
    /// latest round's diff, the change it was sent home with).
    fn footprint(&self, state: &SprintState, i: usize) -> Vec<String> {
        let Some(t) = state.tasks.get(i) else {
            return Vec::new();
        };
        let mut paths = self
            .file()
            .task(&t.id)
            .map(|task| task.touches.clone())
            .unwrap_or_default();
        let dir = self.layout.task_dir(&t.id);
        // Only this run's: a pending task's directory may hold an earlier sprint's leftovers.
        let mut patches = Vec::new();
        if t.sent_home > 0 {
            patches.push(dir.join(SENT_HOME_PATCH_FILE));
        }
        patches.extend(
            (1..=t.round)
                .rev()
                .map(|round| self.layout.round_dir(&t.id, round).join(super::DIFF_FILE)),
        );
        for patch in patches {
            let text = super::read_record_text(&self.layout, &patch);
            for line in text.lines() {
                let path = line
                    .strip_prefix("+++ b/")
                    .or_else(|| line.strip_prefix("--- a/"));
                if let Some(path) = path.map(str::trim_end)
                    && !paths.iter().any(|p| p == path)
                {
                    paths.push(path.to_string());
                }
            }
        }
        paths
    }

    /// Folds the tasks done on their own branches and not yet folded, in run order, up to
    /// the first task that has not ended: the sprint's branch gets its commits in run order
    /// whatever order the tasks ended in.
    async fn fold_ready(&self, state: &mut SprintState) -> Result<(), SprintError> {
        for i in 0..state.tasks.len() {
            let Some(t) = state.tasks.get(i) else {
                break;
            };
            match t.status {
                TaskStatus::Done if t.task_branch.is_some() => self.fold(state, i).await?,
                TaskStatus::Done | TaskStatus::Blocked | TaskStatus::Skipped => {}
                TaskStatus::Pending | TaskStatus::Running => break,
            }
        }
        Ok(())
    }

    /// Folds task `i`'s commit onto the sprint's branch: found there already (a stop after
    /// the fold), fast-forwarded, or cherry-picked; then the check (and the gates of the paths
    /// the fold changed) runs on the branch. A fold that conflicts or breaks the check is taken
    /// back off the branch and the task sent home for one more round ([`Flow::send_home`]); a
    /// change found already on the branch (another task made the same) folds as nothing.
    ///
    /// Crash-safe: the branch's head before the fold is written (`fold_onto`) before anything
    /// moves it, and the task is marked folded only after its check passed. A stop in between
    /// finds the fold on the next run and checks it again; a stop after the branch was taken
    /// back folds again and meets the same failure.
    async fn fold(&self, state: &mut SprintState, i: usize) -> Result<(), SprintError> {
        let Some(t) = state.tasks.get(i).cloned() else {
            return Ok(());
        };
        let (Some(_), Some(commit)) = (&t.task_branch, t.commit.clone()) else {
            return Ok(());
        };
        let Some(task) = self.file().task(&t.id) else {
            return Ok(());
        };
        let onto = match t.fold_onto.clone() {
            Some(onto) => onto,
            None => {
                let head = self.git.head().await?;
                if let Some(t) = state.tasks.get_mut(i) {
                    t.fold_onto = Some(head.clone());
                }
                self.save(state)?;
                head
            }
        };
        let folded = match self.apply_fold(&commit, t.id.as_str()).await? {
            Applied::Made(commit, how) => (commit, how),
            Applied::Empty => {
                self.emit(SprintEvent::Folded {
                    task: t.id.clone(),
                    commit: onto.clone(),
                    how: ALREADY_ON_BRANCH.to_string(),
                });
                return self.folded(state, i, task, onto).await;
            }
            Applied::Failed(what) => {
                let critique = format!(
                    "Your change could not be folded onto the sprint's branch ({}): it {what}. \
                     Another task changed the same lines first. Your work tree now starts at \
                     the branch's tip, with that task's change in it; do the task again on it, \
                     keeping the other task's change.",
                    self.file().sprint.branch
                );
                return self
                    .send_home(
                        state,
                        i,
                        task,
                        &onto,
                        format!("folding it {what}"),
                        critique,
                        None,
                    )
                    .await;
            }
        };
        self.emit(SprintEvent::Folded {
            task: t.id.clone(),
            commit: folded.0.clone(),
            how: folded.1.to_string(),
        });
        // The fold's own check, on the branch as it now is: two tasks that each passed beside
        // the other can break it together.
        let changed = self
            .git
            .run(&["diff", "--name-only", "-z", &onto, &folded.0])
            .await?;
        let paths: Vec<&str> = changed.split('\0').filter(|p| !p.is_empty()).collect();
        let gates: Vec<&Gate> = self
            .file()
            .gates
            .iter()
            .filter(|g| paths.iter().any(|p| g.applies_to(p)))
            .collect();
        let Some(v) = self.verify(&gates).await? else {
            // Cancelled: the next run finds the fold and checks it again.
            return Ok(());
        };
        write_file(
            &self.layout,
            &self.layout.task_dir(&t.id).join(FOLD_CHECK_FILE),
            v.report.as_bytes(),
        )?;
        self.emit(SprintEvent::FoldChecked {
            task: t.id.clone(),
            passed: v.passed,
            gates: v.gates.clone(),
        });
        // Blamed on the fold only when the task's own round passed: a check that failed on
        // its branch too is the baseline's, as the round's attribution said.
        let blamed = match t.attribution {
            Some(Attribution::Clean | Attribution::FixedBaseline) | None => !v.passed,
            Some(
                Attribution::Regressed | Attribution::BaselineBroken | Attribution::BrokeOnFold,
            ) => false,
        };
        if blamed {
            // Back to the head before the fold (no `git clean`: the project's untracked files
            // are the user's).
            self.git.run(&["reset", "--hard", "--quiet", &onto]).await?;
            self.git.forget();
            let critique = format!(
                "Your change passed the check on its own, but once folded onto the sprint's \
                 branch ({}), after the tasks folded before it, the check failed. Your work \
                 tree now starts at the branch's tip, with their changes in it; do the task \
                 again on it so that the check passes. The check's output there:\n\n```text\n{}\n```",
                self.file().sprint.branch,
                crate::prompt::cut(&v.report, crate::prompt::PROMPT_OUTPUT_LIMIT).trim_end()
            );
            return self
                .send_home(
                    state,
                    i,
                    task,
                    &onto,
                    "the check failed on the sprint branch with it folded on".to_string(),
                    critique,
                    Some(Attribution::BrokeOnFold),
                )
                .await;
        }
        self.folded(state, i, task, folded.0).await
    }

    /// Puts `commit` (task `id`'s) on the sprint's branch: found there already (a stop after
    /// the fold), fast-forwarded, or cherry-picked; a pick that fails is aborted.
    async fn apply_fold(&self, commit: &str, id: &str) -> Result<Applied, SprintError> {
        let parent = format!("{commit}^");
        let folded = if self
            .git
            .succeeds(&["merge-base", "--is-ancestor", commit, "HEAD"])
            .await?
        {
            (commit.to_string(), "fast-forward")
        } else if let Some(found) = self
            .git
            .commits_for_task(&parent, id)
            .await?
            .into_iter()
            .next()
        {
            (found, "cherry-pick")
        } else if self
            .git
            .succeeds(&["merge-base", "--is-ancestor", "HEAD", commit])
            .await?
        {
            self.git
                .run(&["merge", "--ff-only", "--quiet", commit])
                .await?;
            (commit.to_string(), "fast-forward")
        } else {
            let out = self
                .git
                .output(
                    &["cherry-pick", "--allow-empty", commit],
                    corral_ports::DEFAULT_OUTPUT_LIMIT,
                )
                .await?;
            if out.success() {
                (self.git.head().await?, "cherry-pick")
            } else {
                let conflicted = self
                    .git
                    .run(&["diff", "--name-only", "--diff-filter=U"])
                    .await
                    .unwrap_or_default();
                let paths: Vec<String> = conflicted
                    .lines()
                    .filter(|l| !l.is_empty())
                    .map(str::to_string)
                    .collect();
                // Nothing in conflict and nothing staged: the pick came out empty, the same
                // change being on the branch already (another task made it).
                let empty = paths.is_empty()
                    && self
                        .git
                        .succeeds(&["diff", "--cached", "--quiet", "HEAD"])
                        .await?;
                if !self.git.succeeds(&["cherry-pick", "--abort"]).await? {
                    self.git
                        .run(&["reset", "--hard", "--quiet", "HEAD"])
                        .await?;
                }
                self.git.forget();
                if empty {
                    return Ok(Applied::Empty);
                }
                let what = if paths.is_empty() {
                    format!("fails: {}", out.stderr.text.trim())
                } else {
                    format!("conflicts in {}", paths.join(", "))
                };
                return Ok(Applied::Failed(what));
            }
        };
        Ok(Applied::Made(folded.0, folded.1))
    }

    /// Task `i` is folded as `commit`: its learnings appended, its entry saved, its worktree
    /// removed (its branch stays).
    async fn folded(
        &self,
        state: &mut SprintState,
        i: usize,
        task: &Task,
        commit: String,
    ) -> Result<(), SprintError> {
        let Some(t) = state.tasks.get(i).cloned() else {
            return Ok(());
        };
        let signals = validate_signals_file(
            &self
                .layout
                .spawn_dir(&t.id, t.round, Role::Generator)
                .join(SIGNALS_FILE),
            &Contract::generator(),
        )
        .map(corral_contract::ValidatedSignals::into_signals)
        .unwrap_or_default();
        self.append_learnings(task, t.round, &signals)?;
        if let Some(t) = state.tasks.get_mut(i) {
            t.commit = Some(commit.clone());
            t.task_branch = None;
            t.fold_onto = None;
        }
        self.save(state)?;
        self.remove_worktree(&t.id).await;
        Ok(())
    }

    /// Takes task `i` home after its fold failed (`why`, one line): one more round at the
    /// sprint branch's tip `onto`, told `critique`, its generator's session resumed; or, sent
    /// home once already, blocked. Its commit is saved as a patch and named, and stays on its
    /// branch when it is blocked.
    ///
    /// The branch was put back to `onto` before this; the state is written last, so that a
    /// stop before it folds again and meets the same failure.
    #[allow(clippy::too_many_arguments)]
    async fn send_home(
        &self,
        state: &mut SprintState,
        i: usize,
        task: &Task,
        onto: &str,
        why: String,
        critique: String,
        attribution: Option<Attribution>,
    ) -> Result<(), SprintError> {
        let Some(t) = state.tasks.get(i).cloned() else {
            return Ok(());
        };
        let (Some(branch), Some(commit)) = (t.task_branch.clone(), t.commit.clone()) else {
            return Ok(());
        };
        self.remove_worktree(&t.id).await;
        if t.sent_home > 0 {
            if let Some(t) = state.tasks.get_mut(i) {
                t.commit = None;
                t.task_branch = None;
                t.fold_onto = None;
                if attribution.is_some() {
                    t.attribution = attribution;
                }
            }
            let reason = format!(
                "{why} onto {}, after the round it was sent home for; its change stays on \
                 branch {branch}",
                self.file().sprint.branch
            );
            return self.finish_blocked(state, i, task, reason).map(drop);
        }
        let patch = self
            .git
            .run_limited(
                &["diff", "--binary", &format!("{commit}^"), &commit],
                PATCH_LIMIT,
            )
            .await?;
        let saved = self.layout.task_dir(&t.id).join(SENT_HOME_PATCH_FILE);
        write_file(&self.layout, &saved, patch.as_bytes())?;
        let critique = format!(
            "{critique}\n\nYour earlier change is saved as {} (commit {commit}, branch \
             {branch}.sent-home); `git apply` it if it helps.",
            saved.display()
        );
        // The change stays on a branch of its own beside the task's; the task's branch starts
        // again at the tip, and its worktree is made afresh there.
        let kept = format!("{branch}.sent-home");
        self.git.run(&["branch", "--force", &kept, &commit]).await?;
        self.git.run(&["branch", "--force", &branch, onto]).await?;
        let round = t.round + 1;
        let session = read_session_id(
            &self
                .layout
                .spawn_dir(&t.id, t.round, Role::Generator)
                .join(SESSION_ID_FILE),
        )
        .ok()
        .flatten()
        .map(|s| s.to_string());
        if let Some(t) = state.tasks.get_mut(i) {
            t.status = TaskStatus::Running;
            t.round = round;
            t.commit = None;
            t.fold_onto = None;
            t.sent_home += 1;
            if attribution.is_some() {
                t.attribution = attribution;
            }
            t.progress = Some(TaskProgress {
                base: onto.to_string(),
                // The tip's check is known only on the project's tree: the round's own
                // pre-verify runs it again on the new worktree, for the attribution.
                step: Step::PreVerify,
                pre_passed: None,
                pre_failed_gates: Vec::new(),
                critique: Some(critique),
                regressions: 0,
                reset_pending: false,
                generator_session: session,
                spawned: None,
            });
        }
        self.save(state)?;
        self.emit(SprintEvent::SentHome {
            task: t.id.clone(),
            round,
            why,
        });
        Ok(())
    }
    /// Removes a task's worktree (its branch stays); one that cannot be removed stays too,
    /// and the next run of the task replaces it.
    async fn remove_worktree(&self, task: &TaskId) {
        let path = self
            .layout
            .worktree_dir(task)
            .to_string_lossy()
            .into_owned();
        let _ = self
            .git
            .run(&["worktree", "remove", "--force", &path])
            .await;
    }
}
