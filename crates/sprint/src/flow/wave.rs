//! `corral sprint run --jobs N` (N above 1): the tasks whose dependencies are done run at the
//! same time, at most N at once in a rolling queue (a task starts as soon as a slot is free and
//! its dependencies are folded), each through the run's [`TaskExecutor`] on its own branch
//! (`corral/<sprint>.tasks/<task>`): in its own git worktree here
//! (`.corral/sprints/<name>/worktrees/<task>/`, `corral-executor-local`), or as a job on a
//! cluster. The tasks handed back done are folded onto the sprint's branch in run order
//! (`fold`: fast-forward, else cherry-pick, then the check on the branch): a done task waits
//! for the tasks before it to end. A fold that conflicts or breaks the check sends that task
//! home for one more round at the tip. Tasks that may touch the same paths are held apart.
//!
//! One writer: the coordinator (`coordinator`). The executors report every step of a task
//! through the host's [`TaskHost::record_progress`](crate::TaskHost::record_progress), which
//! copies the task's entry into the one state and writes `sprint.json`; the learnings are appended by the coordinator when it folds a task, never by
//! the tasks. The tasks' futures are polled by the coordinator alone, so that its own writes
//! (a fold, a task started) never interleave with a task's. A sprint stopped with tasks in
//! flight continues each at its step on the next run (the local executor in the same
//! worktree); a task done and not yet folded is folded then, and a fold already made is found,
//! not made again.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Mutex, PoisonError};
use std::task::Poll;

use super::coordinator::{Coordinator, Grant};
use super::fold::SENT_HOME_PATCH_FILE;
use super::{Context, SprintError, TaskCursor, progress_mut};
use crate::error::ExecutorError;
use crate::event::{SprintEnd, SprintEvent};
use crate::executor::{TaskEnd, TaskExecutor, TaskHandback, TaskJob};
use crate::names::TaskId;
use crate::slots::Slots;
use crate::state::{SprintState, Step, TaskState, TaskStatus, UsageRollUp};

/// A task in flight: its executor's run.
type Running<'f> = Pin<Box<dyn Future<Output = Result<TaskHandback, ExecutorError>> + Send + 'f>>;

/// The branch of task `task` in sprint `sprint`: beside the sprint's own `corral/<sprint>`
/// (which, being a branch, cannot also be a directory of branches).
pub(crate) fn task_branch(sprint: &str, task: &TaskId) -> String {
    format!("corral/{sprint}.tasks/{task}")
}

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

impl Context<'_, '_> {
    /// Runs the sprint's tasks through the executor, at most `jobs` at once; `Some` when the
    /// sprint must stop (cancelled, rate limited), `None` when no task is left that can run.
    pub(super) async fn run_waves(
        &self,
        state: &mut SprintState,
        run_id: &str,
    ) -> Result<Option<SprintEnd>, SprintError> {
        let host = Coordinator {
            ctx: self,
            shared: Mutex::new(state.clone()),
            git_turn: Slots::new(1),
            round_slots: Slots::new(self.run.options.jobs.max(1)),
            spend: Mutex::new(super::coordinator::SpendLedger::default()),
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
            // The sprint's cap over every task's spend, which a task in flight sees only its
            // own share of: no task starts once it is reached.
            if pause.is_none() && self.sprint_cap_reached(&state).is_some() {
                pause = Some(SprintEnd::BudgetExhausted);
            }
            let mut started = Vec::new();
            if pause.is_none() && failure.is_none() && running.len() < in_flight {
                let busy: Vec<usize> = running.iter().map(|(i, _)| *i).collect();
                let ready = self.ready(&mut state, &busy, in_flight - running.len(), &mut held)?;
                if !ready.is_empty() {
                    let head = self.git.head().await?;
                    for i in ready {
                        let Some(id) = state.tasks.get(i).map(|t| t.id.clone()) else {
                            continue;
                        };
                        let upto = match host.grant(&state, &id, in_flight) {
                            Grant::Free => None,
                            Grant::UpTo(upto) => Some(upto),
                            Grant::Wait => continue,
                        };
                        let Some(mut task) = TaskCursor::new(self, &mut state, i) else {
                            host.release(&id);
                            continue;
                        };
                        task.restart_at_tip(&head).await?;
                        if let Some(mut job) = task.job(&head, run_id) {
                            job.max_cost_usd = upto;
                            started.push((i, job));
                        } else {
                            host.release(&id);
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
            let task = host.snapshot().tasks.get(i).map(|t| t.id.clone());
            let part = task.as_ref().and_then(|t| host.release(t));
            match result {
                Ok(handback) => {
                    if let TaskEnd::Paused(end) = handback.end
                        && !self.part_spent(part, &handback, end)
                    {
                        pause.get_or_insert(end);
                    }
                    host.hand_back(i, handback)?;
                }
                Err(e) => {
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

    /// Whether a remote task paused only because the part of the sprint's cap it was started
    /// with (`part`) is spent: then it starts again with a new part (or the sprint pauses at
    /// its cap, seen at the queue's next turn), and its pause is not the sprint's. A worker's
    /// pause reaches a cluster's executor as a pause it cannot name (`Cancelled`), so the
    /// spend tells, unless the run itself was cancelled or the task's own cap is reached.
    fn part_spent(&self, part: Option<f64>, handback: &TaskHandback, end: SprintEnd) -> bool {
        let Some(part) = part else {
            return false;
        };
        let named = match end {
            SprintEnd::BudgetExhausted | SprintEnd::Cancelled => true,
            SprintEnd::Done
            | SprintEnd::Blocked
            | SprintEnd::RateLimited
            | SprintEnd::DiskFull
            | SprintEnd::PermanentFailure => false,
        };
        let spent = UsageRollUp::of_task(&handback.state)
            .total
            .cost_usd
            .unwrap_or(0.0);
        let own_cap = self
            .file()
            .task(&handback.state.id)
            .and_then(|t| t.max_cost_usd)
            .is_some_and(|cap| spent >= cap.dollars());
        named
            && !self.run.cancel.is_cancelled()
            && handback.state.status == TaskStatus::Running
            && spent >= part
            && !own_cap
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
            let skipped = match TaskCursor::new(self, state, i) {
                Some(mut task) => task.skip_if_dependency_failed()?,
                None => continue,
            };
            if skipped {
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
            let mine = state
                .tasks
                .get(i)
                .map(|t| self.footprint(t))
                .unwrap_or_default();
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
                        let theirs = state.tasks.get(j).map(|t| self.footprint(t))?;
                        crate::overlap::overlap(&mine, &theirs).map(|o| (j, o))
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

    /// The paths task `t` may touch: its `touches`, and what its last attempt changed (the
    /// latest round's diff, the change it was sent home with).
    fn footprint(&self, t: &TaskState) -> Vec<String> {
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
}

impl TaskCursor<'_, '_, '_> {
    /// A task sent home whose round has not begun starts at the sprint branch's tip as it is
    /// when the task starts, not as it was when it was sent home: held back behind another
    /// task sent home with it, it would otherwise start before that task's fold and meet the
    /// same conflict again. Only while no worktree holds its branch (the send-home removed
    /// it); moving the branch and writing the base are each safe to redo after a stop.
    async fn restart_at_tip(&mut self, head: &str) -> Result<(), SprintError> {
        let Some(t) = self.state.tasks.get(self.i) else {
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
        if !not_begun || self.ctx.layout.worktree_dir(&t.id).join(".git").exists() {
            return Ok(());
        }
        let branch = task_branch(self.ctx.file().sprint.name.as_str(), &t.id);
        self.ctx
            .git
            .run(&["branch", "--force", &branch, head])
            .await?;
        if let Some(p) = progress_mut(self.state, self.i) {
            p.base = head.to_string();
        }
        self.save()
    }

    /// The task's job, its branch written into its entry: a fresh task starts at `head`, one
    /// left running continues from its own base.
    fn job(&mut self, head: &str, run_id: &str) -> Option<TaskJob> {
        let branch = task_branch(self.ctx.file().sprint.name.as_str(), &self.task.id);
        let sprint = self.ctx.file().sprint.name.clone();
        let t = self.state.tasks.get_mut(self.i)?;
        t.task_branch = Some(branch.clone());
        let base = t
            .progress
            .as_ref()
            .filter(|_| t.status == TaskStatus::Running)
            .map_or_else(|| head.to_string(), |p| p.base.clone());
        Some(TaskJob {
            sprint,
            task: t.id.clone(),
            base,
            branch,
            run_id: run_id.to_string(),
            resume: t.clone(),
            max_cost_usd: None,
        })
    }
}
