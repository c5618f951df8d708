//! The coordinator as a parallel run's executors see it ([`TaskHost`], [`TaskRecorder`]): the
//! one state of the sprint, whose one writer it is, the project's git taken in turns, and the
//! `--jobs` slots a task's rounds run in.

use std::path::Path;
use std::sync::{Mutex, PoisonError};

use async_trait::async_trait;
use corral_ports::CommandRunner;

use super::{Context, SprintError};
use crate::error::ExecutorError;
use crate::executor::{SpawnAdmission, TaskHandback, TaskHost, TaskJob, TaskRecorder};
use crate::git::Git;
use crate::layout::SprintLayout;
use crate::names::TaskId;
use crate::slots::Slots;
use crate::state::{SprintState, TaskState, TaskStatus, UsageRollUp, write_state};

/// What a remote task's job printed, in the task's directory.
pub const JOB_LOG_FILE: &str = "job.log";

/// The coordinator as its executors see it: the one state (its one writer) and the context.
pub(super) struct Coordinator<'c, 'r, 'a> {
    pub(super) ctx: &'c Context<'r, 'a>,
    pub(super) shared: Mutex<SprintState>,
    /// The executors' git runs one command at a time: two `git worktree add` at once race on
    /// `.git/worktrees/` (one reads the other's half-made entry), as two fetches would.
    pub(super) git_turn: Slots,
    /// The `--jobs` slots a task's rounds run in.
    pub(super) round_slots: Slots,
    /// The spawns in flight, against the sprint's spend cap.
    pub(super) spend: Mutex<SpendLedger>,
}

/// The spawns of a parallel run in flight, for the sprint's spend cap: each task's spend when
/// its spawn was let go, and the most one spawn has cost so far.
#[derive(Debug, Default)]
pub(super) struct SpendLedger {
    in_flight: Vec<(TaskId, f64)>,
    largest: f64,
    /// The spawns waiting for room, woken when one in flight ends.
    waiting: Vec<std::task::Waker>,
    /// The remote tasks in flight and the spend each pauses at ([`TaskJob::max_cost_usd`]).
    granted: Vec<(TaskId, f64)>,
}

/// What the sprint's cap leaves a remote task about to start ([`Coordinator::grant`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Grant {
    /// It may start with no part of a cap (no cap, or a local executor's task, whose spawns
    /// the coordinator admits one by one).
    Free,
    /// It may start, and pauses once its spend reaches this.
    UpTo(f64),
    /// Not now: the parts of the tasks in flight leave nothing; asked again once one ends.
    Wait,
}

/// A task's spend in `state`, in dollars.
fn task_spend(state: &SprintState, task: &TaskId) -> f64 {
    state
        .tasks
        .iter()
        .find(|t| &t.id == task)
        .and_then(|t| UsageRollUp::of_task(t).total.cost_usd)
        .unwrap_or(0.0)
}

impl Coordinator<'_, '_, '_> {
    /// Git in `cwd` with the sprint's identity, allowed to reach `remote` when one is named.
    fn git_in(&self, cwd: &Path, remote: Option<&str>) -> Git<'_> {
        let mut env = self.ctx.run.options.git_env.clone();
        if let Some(remote) = remote {
            env.push((
                "GIT_ALLOW_PROTOCOL".to_string(),
                crate::executor::git_transport(remote).to_string(),
            ));
        }
        Git {
            runner: self.ctx.run.commands,
            cwd: cwd.to_path_buf(),
            cancel: &self.ctx.run.cancel,
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

    pub(super) fn snapshot(&self) -> SprintState {
        self.shared
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub(super) fn replace(&self, state: SprintState) {
        *self.shared.lock().unwrap_or_else(PoisonError::into_inner) = state;
    }

    /// The most one spawn is reckoned to cost: the most one has cost yet, or the sprint's
    /// `max_budget_usd` before any has cost anything.
    fn per_spawn(&self, ledger: &SpendLedger) -> f64 {
        if ledger.largest > 0.0 {
            ledger.largest
        } else {
            self.ctx
                .file()
                .sprint
                .max_budget_usd
                .map_or(0.0, crate::file::Usd::dollars)
        }
    }

    /// The part of the sprint's cap a remote task about to start (`task`, with `state` as the
    /// coordinator has it) may spend: its worker sees only its own task's spend, so it pauses
    /// at the spend handed to it. What is left of the cap, less what each remote task in flight
    /// may still spend of its part and one spawn's worth for each of them (the spawn each may
    /// be in when its part runs out), is split evenly among the tasks that may yet start
    /// (`in_flight` less those running). So all the tasks in flight together pass the cap by at
    /// most one spawn's cost, as `admit_spawn` keeps the local executor's, unless a spawn costs
    /// more than any before it.
    pub(super) fn grant(&self, state: &SprintState, task: &TaskId, in_flight: usize) -> Grant {
        let Some(cap) = self.ctx.file().sprint.max_cost_usd else {
            return Grant::Free;
        };
        if !self.ctx.run.executor.is_remote() {
            return Grant::Free;
        }
        let spent = state.usage().total.cost_usd.unwrap_or(0.0);
        let mut ledger = self.spend.lock().unwrap_or_else(PoisonError::into_inner);
        let per_spawn = self.per_spawn(&ledger);
        let reserved: f64 = ledger
            .granted
            .iter()
            .map(|(t, upto)| (upto - task_spend(state, t)).max(0.0) + per_spawn)
            .sum();
        let left = cap.dollars() - spent - reserved;
        let starters = in_flight.saturating_sub(ledger.granted.len()).max(1);
        #[allow(clippy::cast_precision_loss)]
        let part = left / starters as f64;
        if part <= 0.0 {
            return Grant::Wait;
        }
        let upto = task_spend(state, task) + part;
        ledger.granted.push((task.clone(), upto));
        Grant::UpTo(upto)
    }

    /// A remote task in flight ended: its part of the cap goes back. The spend it was to pause
    /// at, if it had one.
    pub(super) fn release(&self, task: &TaskId) -> Option<f64> {
        let mut ledger = self.spend.lock().unwrap_or_else(PoisonError::into_inner);
        let at = ledger.granted.iter().position(|(t, _)| t == task)?;
        Some(ledger.granted.remove(at).1)
    }

    /// Takes task `i`'s handback into the state: its final entry, the head to fold.
    pub(super) fn hand_back(&self, i: usize, handback: TaskHandback) -> Result<(), SprintError> {
        let mut whole = self.shared.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(entry) = whole.tasks.get_mut(i) {
            let branch = entry.task_branch.take();
            *entry = handback.state;
            entry.task_branch = entry.task_branch.take().or(branch);
            if entry.status == TaskStatus::Done && handback.head.is_some() {
                entry.commit = handback.head;
            }
        }
        whole.updated_at = self.ctx.now();
        write_state(&self.ctx.layout.state_file(), &whole)?;
        Ok(())
    }
}

impl TaskRecorder for Coordinator<'_, '_, '_> {
    /// A spawn goes when nothing else is in flight (then the sprint's cap, checked between
    /// spawns, is passed by at most its cost), or when the spend so far and a spawn's worth for
    /// it and each spawn in flight (the most one spawn has cost yet; the spawn's own
    /// `max_budget_usd` when none has cost anything yet) stay below the cap; otherwise it waits
    /// for one to end. So the sprint's cap is passed by at most one spawn's cost, unless a spawn
    /// costs more than any before it.
    fn admit_spawn(&self, task: &TaskId, waker: &std::task::Waker) -> SpawnAdmission {
        let Some(cap) = self.ctx.file().sprint.max_cost_usd else {
            return SpawnAdmission::Go;
        };
        // A remote executor's task spends the part of the cap it was started with
        // (`Coordinator::grant`), as its worker, which asks no one, would.
        if self.ctx.run.executor.is_remote() {
            return SpawnAdmission::Go;
        }
        let whole = self.shared.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(reached) = self.ctx.sprint_cap_reached(&whole) {
            return SpawnAdmission::CapReached(reached);
        }
        let spent = whole.usage().total.cost_usd.unwrap_or(0.0);
        let mine = task_spend(&whole, task);
        let mut ledger = self.spend.lock().unwrap_or_else(PoisonError::into_inner);
        let per_spawn = self.per_spawn(&ledger);
        #[allow(clippy::cast_precision_loss)]
        let room = spent + per_spawn * ((ledger.in_flight.len() + 1) as f64) < cap.dollars();
        if ledger.in_flight.is_empty() || room {
            ledger.in_flight.push((task.clone(), mine));
            SpawnAdmission::Go
        } else {
            ledger.waiting.push(waker.clone());
            SpawnAdmission::Wait
        }
    }

    fn spawn_ended(&self, task: &TaskId) {
        let now = task_spend(
            &self.shared.lock().unwrap_or_else(PoisonError::into_inner),
            task,
        );
        let mut ledger = self.spend.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(at) = ledger.in_flight.iter().position(|(t, _)| t == task) {
            let (_, before) = ledger.in_flight.remove(at);
            ledger.largest = ledger.largest.max(now - before);
        }
        for waker in ledger.waiting.drain(..) {
            waker.wake();
        }
    }

    fn record(&self, task: &TaskState) -> Result<(), SprintError> {
        // Held only while the file is written: no task's save overlaps another's.
        let mut whole = self.shared.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(entry) = whole.tasks.iter_mut().find(|t| t.id == task.id) {
            // A step's spend is about one spawn's: how a remote task's spawns, which the
            // coordinator does not see one by one, reckon the cost of one.
            let step = UsageRollUp::of_task(task).total.cost_usd.unwrap_or(0.0)
                - UsageRollUp::of_task(entry).total.cost_usd.unwrap_or(0.0);
            if step > 0.0 {
                let mut ledger = self.spend.lock().unwrap_or_else(PoisonError::into_inner);
                ledger.largest = ledger.largest.max(step);
            }
            entry.clone_from(task);
        }
        whole.updated_at = self.ctx.now();
        write_state(&self.ctx.layout.state_file(), &whole)?;
        Ok(())
    }
}

#[async_trait]
impl TaskHost for Coordinator<'_, '_, '_> {
    fn project_root(&self) -> &Path {
        self.ctx.run.project_root
    }

    fn layout(&self) -> &SprintLayout {
        &self.ctx.layout
    }

    fn commands(&self) -> &dyn CommandRunner {
        self.ctx.run.commands
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
            self.ctx.run.commands,
            repo,
            &self.ctx.run.options.git_env,
            &self.ctx.run.cancel,
            tree_ish,
            path,
            into,
        )
        .await
        .map_err(SprintError::from)?)
    }

    async fn run_setup(&self, work_tree: &Path) -> Result<(), ExecutorError> {
        Ok(self.ctx.setup_in(work_tree).await?)
    }

    fn record_progress(&self, task: &TaskState) -> Result<(), ExecutorError> {
        Ok(self.record(task)?)
    }

    fn job_log(&self, task: &TaskId, line: &str) {
        let path = self.ctx.layout.task_dir(task).join(JOB_LOG_FILE);
        // Best effort, as a log is: through the record's handle, never through a link.
        if let (Some(rel), Ok(record)) =
            (self.ctx.layout.below_root(&path), self.ctx.layout.record())
        {
            let _ = record.append(rel, format!("{line}\n").as_bytes());
        }
    }

    fn worker_event(&self, task: &TaskId, event: &serde_json::Map<String, serde_json::Value>) {
        self.ctx.run.events.relayed(task, event);
    }

    async fn work_task(
        &self,
        job: &TaskJob,
        work_tree: &Path,
    ) -> Result<TaskHandback, ExecutorError> {
        Ok(super::work_task(self.ctx.run, job, work_tree, self).await?)
    }
}
