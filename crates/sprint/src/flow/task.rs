//! One task's rounds, as a [`TaskCursor`]: the task's entry in the sprint's state and what it
//! is, over the [`Context`] every role shares. Its step machine runs from the task's resume
//! point through its rounds to its end (committed, blocked, or paused), in the project's tree
//! or in a parallel task's own work tree; each step (`generate`, `police`, `check`,
//! `evaluate`, `commit`) is a method of the cursor in a file of its own, and what every step
//! may end in is here: the next round, a block, a skip, a warning.

use crate::error::SprintError;
use crate::event::SprintEvent;
use crate::file::Task;
use crate::state::{SprintState, Step, TaskProgress, TaskStatus};

use super::{BLOCKED_PATCH_FILE, Context, Next, progress_mut, write_file};

/// One task of the sprint as its steps see it: its entry (`state.tasks[i]`) and the task it
/// runs, over the context every role shares. Every step reads and writes the entry through
/// it, and [`TaskCursor::save`] hands the state to the context's one writer.
pub(super) struct TaskCursor<'c, 'r, 'a> {
    pub(super) ctx: &'c Context<'r, 'a>,
    pub(super) state: &'c mut SprintState,
    pub(super) i: usize,
    pub(super) task: &'a Task,
}

impl<'c, 'r, 'a> TaskCursor<'c, 'r, 'a> {
    /// The cursor on `state`'s task `i`; `None` when there is no such entry or the sprint
    /// file no longer has its task.
    pub(super) fn new(
        ctx: &'c Context<'r, 'a>,
        state: &'c mut SprintState,
        i: usize,
    ) -> Option<Self> {
        let id = state.tasks.get(i).map(|t| t.id.clone())?;
        let task = ctx.file().task(&id)?;
        Some(TaskCursor {
            ctx,
            state,
            i,
            task,
        })
    }

    /// Writes the state through the context (`sprint.json`, or the parallel task's recorder).
    pub(super) fn save(&mut self) -> Result<(), SprintError> {
        self.ctx.save(self.state)
    }

    /// Runs the task's steps from where its entry stands to its end (done, blocked) or to a
    /// pause of the sprint; every step's state is saved before the next.
    pub(super) async fn run(&mut self, run_id: &str) -> Result<Next, SprintError> {
        let task = self.task;
        let id = task.id.clone();
        let fresh = self
            .state
            .tasks
            .get(self.i)
            .is_some_and(|t| t.status == TaskStatus::Pending || t.progress.is_none());
        // The base: the commit the task before made, when nothing ran since.
        let head = if fresh {
            self.ctx.git.current_head().await?
        } else {
            String::new()
        };
        let Some(t) = self.state.tasks.get_mut(self.i) else {
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
                generator_session_provider: None,
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
            let dir = self.ctx.layout.task_dir(&task.id);
            if let Some(rel) = self.ctx.layout.below_root(&dir) {
                self.ctx.layout.record()?.remove(rel)?;
            }
        }
        if let Some(base) = reset {
            self.ctx.git.reset_to(&base).await?;
            if let Some(p) = progress_mut(self.state, self.i) {
                p.reset_pending = false;
            }
        }
        self.save()?;
        self.ctx.emit(SprintEvent::TaskStarted {
            task: id.clone(),
            title: task.title.clone(),
            round,
            step,
        });
        // Only a task continued at its commit can have been committed by a run that stopped;
        // one that reached the commit in this run was policed to its base after every spawn.
        let mut continued = !fresh;
        loop {
            let Some(step) = self
                .state
                .tasks
                .get(self.i)
                .and_then(|t| t.progress.as_ref())
                .map(|p| p.step)
            else {
                return Ok(Next::Finished);
            };
            let result = match step {
                Step::PreVerify => self.pre_verify().await,
                Step::Generate => self.generate(run_id).await,
                Step::PostVerify => self.post_verify().await,
                Step::Evaluate => self.evaluate(run_id).await,
                Step::Commit => self.commit(run_id, continued).await,
            };
            let next = match (result, step) {
                (Ok(next), _) => next,
                // Something planted in the record during a round (possible only without a
                // sandbox): nothing was written through it, and the round fails, named.
                (
                    Err(SprintError::Record(e)),
                    Step::Generate | Step::PostVerify | Step::Evaluate,
                ) if e.is_tampering() => self.tampered_round(&e).await?,
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

    /// On to the next round with `critique`, or blocked when the rounds are used up.
    /// Fails the task's round for `tampering` found in the record: named in the task's
    /// warnings and the round's critique, then on to the next round (or blocked after the last).
    pub(super) async fn tampered_round(
        &mut self,
        tampering: &corral_hostfs::HostFsError,
    ) -> Result<Next, SprintError> {
        let round = self.state.tasks.get(self.i).map_or(0, |t| t.round);
        let message = format!("round {round} failed: tampering: {tampering}");
        self.warn(&message)?;
        let critique = format!(
            "Round {round} failed: Corral found something planted in its record ({tampering}). \
             Write only in the work tree and your own run directory."
        );
        self.next_round(critique).await
    }

    pub(super) async fn next_round(&mut self, critique: String) -> Result<Next, SprintError> {
        let max = self.ctx.file().sprint.max_rounds;
        let round = self.state.tasks.get(self.i).map_or(0, |t| t.round);
        if round >= max {
            let last = critique.lines().next().unwrap_or_default().to_string();
            return self
                .block(format!("{max} round(s) without passing; the last: {last}"))
                .await;
        }
        if let Some(t) = self.state.tasks.get_mut(self.i) {
            t.round += 1;
            if let Some(p) = t.progress.as_mut() {
                p.critique = Some(critique);
                p.step = Step::Generate;
                // Each round has its own allowance of transient failures.
                p.transient_retries = 0;
            }
        }
        self.save()?;
        Ok(Next::Continue)
    }

    /// Blocks the task: its change is saved as a patch and the tree put back as it was at the
    /// task's start, so that the tasks that do not depend on it start from a clean tree.
    pub(super) async fn block(&mut self, reason: String) -> Result<Next, SprintError> {
        let task = self.task;
        if let Some(base) = self
            .state
            .tasks
            .get(self.i)
            .and_then(|t| t.progress.as_ref())
            .map(|p| p.base.clone())
        {
            let (patch, paths) = self.ctx.git.diff_against(&base).await?;
            if !paths.is_empty() {
                write_file(
                    &self.ctx.layout,
                    &self.ctx.layout.task_dir(&task.id).join(BLOCKED_PATCH_FILE),
                    patch.as_bytes(),
                )?;
            }
            self.ctx.git.reset_to(&base).await?;
        }
        self.finish_blocked(reason)
    }

    /// Ends task `i` as `status` (blocked or skipped) for `reason`: recorded, saved, told.
    pub(super) fn end_without_commit(
        &mut self,
        status: TaskStatus,
        reason: String,
    ) -> Result<(), SprintError> {
        let task = self.task;
        if let Some(t) = self.state.tasks.get_mut(self.i) {
            t.status = status;
            t.reason = Some(reason.clone());
            t.progress = None;
        }
        self.save()?;
        self.ctx.emit(SprintEvent::TaskFinished {
            task: task.id.clone(),
            status,
            commit: None,
            reason: Some(reason),
        });
        Ok(())
    }

    pub(super) fn finish_blocked(&mut self, reason: String) -> Result<Next, SprintError> {
        self.end_without_commit(TaskStatus::Blocked, reason)?;
        Ok(Next::Finished)
    }

    pub(super) fn warn(&mut self, message: &str) -> Result<(), SprintError> {
        let task = self.task;
        if let Some(t) = self.state.tasks.get_mut(self.i) {
            t.warnings.push(message.to_string());
        }
        self.save()?;
        self.ctx.emit(SprintEvent::Warning {
            task: task.id.clone(),
            message: message.to_string(),
        });
        Ok(())
    }

    pub(super) fn skip_if_dependency_failed(&mut self) -> Result<bool, SprintError> {
        let Some(task) = self
            .state
            .tasks
            .get(self.i)
            .and_then(|t| self.ctx.file().task(&t.id))
        else {
            return Ok(false);
        };
        let failed = task.depends_on.iter().find_map(|dep| {
            self.state
                .tasks
                .iter()
                .find(|t| &t.id == dep)
                .filter(|t| matches!(t.status, TaskStatus::Blocked | TaskStatus::Skipped))
                .map(|t| (dep.clone(), t.status))
        });
        let Some((dep, status)) = failed else {
            return Ok(false);
        };
        let reason = format!("it depends on {dep}, which is {}", status.as_str());
        self.end_without_commit(TaskStatus::Skipped, reason)?;
        Ok(true)
    }
}
