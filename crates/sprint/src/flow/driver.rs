//! The sprint's driver: the [`Driver`] owns the sprint's state from its load to the summary and
//! writes it (`sprint.json`) between the tasks; it runs the preflight, `setup`, and the tasks
//! one by one (each a [`TaskCursor`] over its entry) or hands the state to the parallel run's
//! coordinator (`wave`) and takes it back at the end.

use std::path::Path;
use std::time::Duration;

use corral_ports::CommandSpec;

use crate::error::SprintError;
use crate::event::{SprintEnd, SprintEvent, SprintSummary};
use crate::prompt::{self};
use crate::state::{RunProgress, SprintState, StateError, TaskStatus, read_state};

use super::{Context, DirtyTree, Next, TaskCursor, describe_end, ignore_state_dir, summarize};

/// The sprint run from its state's load to its summary: the owner of the sprint's state.
pub(super) struct Driver<'r, 'a> {
    ctx: Context<'r, 'a>,
    state: SprintState,
}

impl<'r, 'a> Driver<'r, 'a> {
    /// Runs the sprint in `ctx`, from its state on disk or a fresh one, to its summary.
    pub(super) async fn run(ctx: Context<'r, 'a>) -> Result<SprintSummary, SprintError> {
        ignore_state_dir(ctx.run.project_root)?;
        let state = load_state(&ctx)?;
        Driver { ctx, state }.drive().await
    }

    async fn drive(mut self) -> Result<SprintSummary, SprintError> {
        let resumed = self.state.run.is_some();
        let run_id = self
            .state
            .run
            .get_or_insert_with(|| RunProgress {
                run_id: self.ctx.run.options.run_id.clone(),
                setup_done: false,
            })
            .run_id
            .clone();
        let ctx = &self.ctx;
        ctx.emit(SprintEvent::SprintStarted {
            name: ctx.file().sprint.name.to_string(),
            branch: ctx.file().sprint.branch.clone(),
            run_id: run_id.clone(),
            resumed,
        });
        ctx.refuse_users_branch(resumed).await?;
        ctx.settle_fold(&self.state).await?;
        // Saved before the branch is checked out: a run killed between the checkout and its
        // first save would leave the sprint's branch checked out and no state, and the rerun
        // would take that branch for the user's own and refuse it.
        self.ctx.save(&mut self.state)?;
        self.preflight().await?;
        self.ctx.save(&mut self.state)?;
        if !self.state.run.as_ref().is_some_and(|r| r.setup_done) {
            self.ctx.setup_in(&self.ctx.work_tree).await?;
            if let Some(progress) = self.state.run.as_mut() {
                progress.setup_done = true;
            }
            self.ctx.save(&mut self.state)?;
        }
        if (self.ctx.run.options.jobs > 1 || self.ctx.run.executor.is_remote())
            && let Some(end) = self.ctx.run_waves(&mut self.state, &run_id).await?
        {
            return Ok(self.summary(end));
        }
        for i in 0..self.state.tasks.len() {
            if self.ctx.run.cancel.is_cancelled() {
                return Ok(self.summary(SprintEnd::Cancelled));
            }
            match self.state.tasks.get(i).map(|t| t.status) {
                Some(TaskStatus::Pending | TaskStatus::Running) => {}
                Some(TaskStatus::Done | TaskStatus::Blocked | TaskStatus::Skipped) | None => {
                    continue;
                }
            }
            let Some(mut task) = TaskCursor::new(&self.ctx, &mut self.state, i) else {
                continue;
            };
            if task.skip_if_dependency_failed()? {
                continue;
            }
            match task.run(&run_id).await? {
                Next::Pause(end) => return Ok(self.summary(end)),
                Next::Finished | Next::Continue => {}
            }
        }
        let end = if self
            .state
            .tasks
            .iter()
            .all(|t| t.status == TaskStatus::Done)
        {
            SprintEnd::Done
        } else {
            SprintEnd::Blocked
        };
        Ok(self.summary(end))
    }

    /// Before the first task: the user's uncommitted changes dealt with as asked, and the
    /// sprint's branch checked out (made when it is not there).
    async fn preflight(&self) -> Result<(), SprintError> {
        let (state, ctx) = (&self.state, &self.ctx);
        // A task left running by a stopped sprint left its changes in the tree: they are the
        // sprint's own, not the user's.
        let continuing = state.tasks.iter().any(|t| t.status == TaskStatus::Running);
        let dirty = ctx.git.dirty_paths().await?;
        if !dirty.is_empty() && !continuing {
            match ctx.run.options.dirty {
                DirtyTree::Refuse => return Err(SprintError::Dirty { paths: dirty }),
                DirtyTree::Keep => ctx.emit(SprintEvent::DirtyTree {
                    paths: dirty,
                    action: "kept".to_string(),
                }),
                DirtyTree::Stash => {
                    let message = format!("corral sprint {}", ctx.file().sprint.name);
                    ctx.git
                        .run(&[
                            "stash",
                            "push",
                            "--include-untracked",
                            "--message",
                            &message,
                        ])
                        .await?;
                    ctx.emit(SprintEvent::DirtyTree {
                        paths: dirty,
                        action: "stashed".to_string(),
                    });
                }
            }
        }
        let branch = &ctx.file().sprint.branch;
        if ctx.git.branch().await?.as_deref() != Some(branch.as_str()) {
            let created = !ctx.git.branch_exists(branch).await?;
            if created {
                ctx.git.run(&["checkout", "--quiet", "-b", branch]).await?;
            } else {
                ctx.git.run(&["checkout", "--quiet", branch]).await?;
            }
            ctx.emit(SprintEvent::Branch {
                branch: branch.clone(),
                created,
            });
        }
        Ok(())
    }

    /// The summary of the sprint ended by `end`, told.
    fn summary(&self, end: SprintEnd) -> SprintSummary {
        let summary = summarize(&self.state, end);
        self.ctx.emit(SprintEvent::SprintFinished {
            summary: summary.clone(),
        });
        summary
    }
}

/// The state on disk, fitted to the sprint file (a task added to the file since is pending;
/// one removed is dropped), or a fresh one.
fn load_state(ctx: &Context<'_, '_>) -> Result<SprintState, SprintError> {
    let fresh = SprintState::fresh(ctx.file(), &ctx.now());
    match read_state(&ctx.layout.state_file()) {
        Ok(old) => {
            let mut state = fresh;
            state.started_at = old.started_at.clone();
            state.run = old.run.clone();
            for task in &mut state.tasks {
                if let Some(known) = old.tasks.iter().find(|t| t.id == task.id) {
                    *task = known.clone();
                }
            }
            Ok(state)
        }
        Err(StateError::Missing { .. }) => Ok(fresh),
        Err(e) => Err(e.into()),
    }
}

impl Context<'_, '_> {
    /// Runs `setup` (if the sprint has one) in `work_tree`.
    pub(super) async fn setup_in(&self, work_tree: &Path) -> Result<(), SprintError> {
        let Some(command) = &self.file().sprint.setup else {
            return Ok(());
        };
        let timeout = Duration::from_millis(self.file().sprint.check_timeout_ms);
        let mut spec = CommandSpec::shell(command, work_tree, timeout);
        spec.read_only = vec![self.layout.state_root()];
        self.git.forget();
        let out = self
            .run
            .commands
            .run(spec, &self.run.cancel)
            .await
            .map_err(|source| SprintError::Command {
                command: command.clone(),
                source,
            })?;
        self.emit(SprintEvent::Setup {
            passed: out.success(),
        });
        if out.success() {
            Ok(())
        } else {
            Err(SprintError::SetupFailed {
                command: command.clone(),
                end: describe_end(out.end),
                output: prompt::cut(
                    &format!("{}{}", out.stdout.text, out.stderr.text),
                    prompt::PROMPT_OUTPUT_LIMIT,
                )
                .to_string(),
            })
        }
    }
}
