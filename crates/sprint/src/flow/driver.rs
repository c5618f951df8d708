//! The sequential sprint's driver: the run from its lock to its summary (the state loaded or
//! made, the preflight, `setup`, the tasks one by one or through the queue of `wave`), and the
//! skip of a task whose dependency failed.

use std::path::Path;
use std::time::Duration;

use corral_ports::CommandSpec;

use crate::error::SprintError;
use crate::event::{SprintEnd, SprintEvent, SprintSummary};
use crate::prompt::{self};
use crate::state::{RunProgress, SprintState, StateError, TaskStatus, read_state};

use super::{DirtyTree, Flow, Next, describe_end, ignore_state_dir, summarize};

impl<'r, 'a> Flow<'r, 'a> {
    pub(super) async fn run(&self) -> Result<SprintSummary, SprintError> {
        ignore_state_dir(self.run.project_root)?;
        let mut state = self.load_state()?;
        let resumed = state.run.is_some();
        let run_id = state
            .run
            .get_or_insert_with(|| RunProgress {
                run_id: self.run.options.run_id.clone(),
                setup_done: false,
            })
            .run_id
            .clone();
        self.emit(SprintEvent::SprintStarted {
            name: self.file().sprint.name.to_string(),
            branch: self.file().sprint.branch.clone(),
            run_id: run_id.clone(),
            resumed,
        });
        self.refuse_users_branch(resumed).await?;
        self.settle_fold(&state).await?;
        self.preflight(&state).await?;
        self.save(&mut state)?;
        if !state.run.as_ref().is_some_and(|r| r.setup_done) {
            self.setup().await?;
            if let Some(progress) = state.run.as_mut() {
                progress.setup_done = true;
            }
            self.save(&mut state)?;
        }
        if (self.run.options.jobs > 1 || self.run.executor.is_remote())
            && let Some(end) = self.run_waves(&mut state, &run_id).await?
        {
            return Ok(self.summary(&state, end));
        }
        for i in 0..state.tasks.len() {
            if self.run.cancel.is_cancelled() {
                return Ok(self.summary(&state, SprintEnd::Cancelled));
            }
            match state.tasks.get(i).map(|t| t.status) {
                Some(TaskStatus::Pending | TaskStatus::Running) => {}
                Some(TaskStatus::Done | TaskStatus::Blocked | TaskStatus::Skipped) | None => {
                    continue;
                }
            }
            if self.skip_if_dependency_failed(&mut state, i)? {
                continue;
            }
            match self.run_task(&mut state, i, &run_id).await? {
                Next::Pause(end) => return Ok(self.summary(&state, end)),
                Next::Finished | Next::Continue => {}
            }
        }
        let end = if state.tasks.iter().all(|t| t.status == TaskStatus::Done) {
            SprintEnd::Done
        } else {
            SprintEnd::Blocked
        };
        Ok(self.summary(&state, end))
    }

    /// The state on disk, fitted to the sprint file (a task added to the file since is
    /// pending; one removed is dropped), or a fresh one.
    pub(super) fn load_state(&self) -> Result<SprintState, SprintError> {
        let fresh = SprintState::fresh(self.file(), &self.now());
        match read_state(&self.layout.state_file()) {
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

    pub(super) async fn preflight(&self, state: &SprintState) -> Result<(), SprintError> {
        // A task left running by a stopped sprint left its changes in the tree: they are the
        // sprint's own, not the user's.
        let continuing = state.tasks.iter().any(|t| t.status == TaskStatus::Running);
        let dirty = self.git.dirty_paths().await?;
        if !dirty.is_empty() && !continuing {
            match self.run.options.dirty {
                DirtyTree::Refuse => return Err(SprintError::Dirty { paths: dirty }),
                DirtyTree::Keep => self.emit(SprintEvent::DirtyTree {
                    paths: dirty,
                    action: "kept".to_string(),
                }),
                DirtyTree::Stash => {
                    let message = format!("corral sprint {}", self.file().sprint.name);
                    self.git
                        .run(&[
                            "stash",
                            "push",
                            "--include-untracked",
                            "--message",
                            &message,
                        ])
                        .await?;
                    self.emit(SprintEvent::DirtyTree {
                        paths: dirty,
                        action: "stashed".to_string(),
                    });
                }
            }
        }
        let branch = &self.file().sprint.branch;
        if self.git.branch().await?.as_deref() != Some(branch.as_str()) {
            let created = !self.git.branch_exists(branch).await?;
            if created {
                self.git.run(&["checkout", "--quiet", "-b", branch]).await?;
            } else {
                self.git.run(&["checkout", "--quiet", branch]).await?;
            }
            self.emit(SprintEvent::Branch {
                branch: branch.clone(),
                created,
            });
        }
        Ok(())
    }

    pub(super) async fn setup(&self) -> Result<(), SprintError> {
        self.setup_in(&self.work_tree).await
    }

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

    pub(super) fn skip_if_dependency_failed(
        &self,
        state: &mut SprintState,
        i: usize,
    ) -> Result<bool, SprintError> {
        let Some(task) = state.tasks.get(i).and_then(|t| self.file().task(&t.id)) else {
            return Ok(false);
        };
        let failed = task.depends_on.iter().find_map(|dep| {
            state
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
        self.end_without_commit(state, i, task, TaskStatus::Skipped, reason)?;
        Ok(true)
    }

    pub(super) fn summary(&self, state: &SprintState, end: SprintEnd) -> SprintSummary {
        let summary = summarize(state, end);
        self.emit(SprintEvent::SprintFinished {
            summary: summary.clone(),
        });
        summary
    }
}
