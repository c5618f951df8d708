//! One task's step machine: from its resume point through its rounds to its end (committed,
//! blocked, or paused), in the project's tree or in a parallel task's own work tree.

use corral_contract::{Contract, validate_signals_file};

use crate::error::SprintError;
use crate::event::SprintEvent;
use crate::file::Task;
use crate::layout::{Role, SIGNALS_FILE};
use crate::state::{SprintState, Step, TaskProgress, TaskStatus};

use super::{BLOCKED_PATCH_FILE, Flow, Next, commit_message, progress_mut, write_file};

impl<'r, 'a> Flow<'r, 'a> {
    pub(super) async fn run_task(
        &self,
        state: &mut SprintState,
        i: usize,
        run_id: &str,
    ) -> Result<Next, SprintError> {
        let Some(id) = state.tasks.get(i).map(|t| t.id.clone()) else {
            return Ok(Next::Finished);
        };
        let Some(task) = self.file().task(&id) else {
            return Ok(Next::Finished);
        };
        let fresh = state
            .tasks
            .get(i)
            .is_some_and(|t| t.status == TaskStatus::Pending || t.progress.is_none());
        // The base: the commit the task before made, when nothing ran since.
        let head = if fresh {
            self.git.current_head().await?
        } else {
            String::new()
        };
        let Some(t) = state.tasks.get_mut(i) else {
            return Ok(Next::Finished);
        };
        if fresh {
            t.status = TaskStatus::Running;
            t.round = 1;
            t.attempt = 1;
            t.progress = Some(TaskProgress {
                base: head,
                step: Step::PreVerify,
                pre_passed: None,
                pre_failed_gates: Vec::new(),
                critique: None,
                regressions: 0,
                reset_pending: false,
                generator_session: None,
                spawned: None,
                transient_retries: 0,
            });
        }
        let (round, step) = (
            t.round,
            t.progress.as_ref().map_or(Step::PreVerify, |p| p.step),
        );
        let reset = t
            .progress
            .as_ref()
            .filter(|p| p.reset_pending)
            .map(|p| p.base.clone());
        if fresh {
            // What an earlier sprint of the same name left for this task is not this run's:
            // a report found there would read as a round already done.
            // Removed through the record's handle: a link planted in it is removed, never
            // followed.
            let dir = self.layout.task_dir(&task.id);
            if let Some(rel) = self.layout.below_root(&dir) {
                self.layout.record()?.remove(rel)?;
            }
        }
        if let Some(base) = reset {
            self.git.reset_to(&base).await?;
            if let Some(p) = progress_mut(state, i) {
                p.reset_pending = false;
            }
        }
        self.save(state)?;
        self.emit(SprintEvent::TaskStarted {
            task: id.clone(),
            title: task.title.clone(),
            round,
            step,
        });
        // Only a task continued at its commit can have been committed by a run that stopped;
        // one that reached the commit in this run was policed to its base after every spawn.
        let mut continued = !fresh;
        loop {
            let Some(step) = state
                .tasks
                .get(i)
                .and_then(|t| t.progress.as_ref())
                .map(|p| p.step)
            else {
                return Ok(Next::Finished);
            };
            let result = match step {
                Step::PreVerify => self.pre_verify(state, i, task).await,
                Step::Generate => self.generate(state, i, task, run_id).await,
                Step::PostVerify => self.post_verify(state, i, task).await,
                Step::Evaluate => self.evaluate(state, i, task, run_id).await,
                Step::Commit => self.commit(state, i, task, run_id, continued).await,
            };
            let next = match (result, step) {
                (Ok(next), _) => next,
                // Something planted in the record during a round (possible only without a
                // sandbox): nothing was written through it, and the round fails, named.
                (
                    Err(SprintError::Record(e)),
                    Step::Generate | Step::PostVerify | Step::Evaluate,
                ) if e.is_tampering() => self.tampered_round(state, i, task, &e).await?,
                (Err(e), _) => return Err(e),
            };
            continued = false;
            match next {
                Next::Continue => {}
                Next::Finished => return Ok(Next::Finished),
                Next::Pause(end) => return Ok(Next::Pause(end)),
            }
        }
    }

    pub(super) async fn commit(
        &self,
        state: &mut SprintState,
        i: usize,
        task: &Task,
        run_id: &str,
        continued: bool,
    ) -> Result<Next, SprintError> {
        let Some(t) = state.tasks.get(i).cloned() else {
            return Ok(Next::Finished);
        };
        let Some(progress) = t.progress.clone() else {
            return Ok(Next::Finished);
        };
        let signals = validate_signals_file(
            &self
                .layout
                .spawn_dir(&task.id, t.round, Role::Generator)
                .join(SIGNALS_FILE),
            &Contract::generator(),
        )
        .map(corral_contract::ValidatedSignals::into_signals)
        .unwrap_or_default();
        // A commit made before the sprint stopped is found, not made again.
        let made = if continued {
            self.git
                .commits_for_task(&progress.base, task.id.as_str())
                .await?
                .into_iter()
                .next()
        } else {
            None
        };
        let commit = match made {
            Some(commit) => commit,
            None => {
                if !self.git.staged() {
                    self.git.stage_all().await?;
                }
                let message = commit_message(task, &signals, run_id);
                self.git
                    .commit(&message, &self.layout.round_dir(&task.id, t.round))
                    .await?
            }
        };
        // A parallel task's learnings are the sprint's once it is folded (its one writer).
        if self.shared.is_none() {
            self.append_learnings(task, t.round, &signals)?;
        }
        if let Some(t) = state.tasks.get_mut(i) {
            t.status = TaskStatus::Done;
            t.commit = Some(commit.clone());
            t.reason = None;
            t.progress = None;
        }
        self.save(state)?;
        self.emit(SprintEvent::TaskFinished {
            task: task.id.clone(),
            status: TaskStatus::Done,
            commit: Some(commit),
            reason: None,
        });
        Ok(Next::Finished)
    }

    /// On to the next round with `critique`, or blocked when the rounds are used up.
    /// Fails the task's round for `tampering` found in the record: named in the task's
    /// warnings and the round's critique, then on to the next round (or blocked after the last).
    pub(super) async fn tampered_round(
        &self,
        state: &mut SprintState,
        i: usize,
        task: &Task,
        tampering: &corral_hostfs::HostFsError,
    ) -> Result<Next, SprintError> {
        let round = state.tasks.get(i).map_or(0, |t| t.round);
        let message = format!("round {round} failed: tampering: {tampering}");
        self.warn(state, i, task, &message)?;
        let critique = format!(
            "Round {round} failed: Corral found something planted in its record ({tampering}). \
             Write only in the work tree and your own run directory."
        );
        self.next_round(state, i, task, critique).await
    }

    pub(super) async fn next_round(
        &self,
        state: &mut SprintState,
        i: usize,
        task: &Task,
        critique: String,
    ) -> Result<Next, SprintError> {
        let max = self.file().sprint.max_rounds;
        let round = state.tasks.get(i).map_or(0, |t| t.round);
        if round >= max {
            let last = critique.lines().next().unwrap_or_default().to_string();
            return self
                .block(
                    state,
                    i,
                    task,
                    format!("{max} round(s) without passing; the last: {last}"),
                )
                .await;
        }
        if let Some(t) = state.tasks.get_mut(i) {
            t.round += 1;
            if let Some(p) = t.progress.as_mut() {
                p.critique = Some(critique);
                p.step = Step::Generate;
                // Each round has its own allowance of transient failures.
                p.transient_retries = 0;
            }
        }
        self.save(state)?;
        Ok(Next::Continue)
    }

    /// Blocks the task: its change is saved as a patch and the tree put back as it was at the
    /// task's start, so that the tasks that do not depend on it start from a clean tree.
    pub(super) async fn block(
        &self,
        state: &mut SprintState,
        i: usize,
        task: &Task,
        reason: String,
    ) -> Result<Next, SprintError> {
        if let Some(base) = state
            .tasks
            .get(i)
            .and_then(|t| t.progress.as_ref())
            .map(|p| p.base.clone())
        {
            let (patch, paths) = self.git.diff_against(&base).await?;
            if !paths.is_empty() {
                write_file(
                    &self.layout,
                    &self.layout.task_dir(&task.id).join(BLOCKED_PATCH_FILE),
                    patch.as_bytes(),
                )?;
            }
            self.git.reset_to(&base).await?;
        }
        self.finish_blocked(state, i, task, reason)
    }

    /// Ends task `i` as `status` (blocked or skipped) for `reason`: recorded, saved, told.
    pub(super) fn end_without_commit(
        &self,
        state: &mut SprintState,
        i: usize,
        task: &Task,
        status: TaskStatus,
        reason: String,
    ) -> Result<(), SprintError> {
        if let Some(t) = state.tasks.get_mut(i) {
            t.status = status;
            t.reason = Some(reason.clone());
            t.progress = None;
        }
        self.save(state)?;
        self.emit(SprintEvent::TaskFinished {
            task: task.id.clone(),
            status,
            commit: None,
            reason: Some(reason),
        });
        Ok(())
    }

    pub(super) fn finish_blocked(
        &self,
        state: &mut SprintState,
        i: usize,
        task: &Task,
        reason: String,
    ) -> Result<Next, SprintError> {
        self.end_without_commit(state, i, task, TaskStatus::Blocked, reason)?;
        Ok(Next::Finished)
    }
}
