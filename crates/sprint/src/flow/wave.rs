//! `corral sprint run --jobs N` (N above 1): the tasks whose dependencies are done run at the
//! same time, in waves of at most N, each in its own git worktree
//! (`.corral/sprints/<name>/worktrees/<task>/`) on its own branch
//! (`corral/<sprint>.tasks/<task>`); when a wave ended, the tasks done in it are folded onto the
//! sprint's branch in run order (fast-forward, else cherry-pick). A fold that conflicts blocks
//! only that task, names the paths, and keeps its branch.
//!
//! One writer: every task of a wave saves through one lock that holds the whole state (its
//! entry is copied in and `sprint.json` written while the lock is held), and the learnings
//! are appended by the coordinator when it folds a task, never by the tasks. A sprint stopped
//! with tasks in flight continues each at its step, in the same worktree, on the next run; a
//! task done and not yet folded is folded then, and a fold already made is found, not made
//! again.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Mutex, PoisonError};
use std::task::{Context, Poll};

use corral_contract::{Contract, validate_signals_file};

use super::{Flow, Next, SprintError};
use crate::event::{SprintEnd, SprintEvent};
use crate::git::Git;
use crate::layout::{Role, SIGNALS_FILE};
use crate::names::TaskId;
use crate::state::{SprintState, TaskStatus};

type TaskFuture<'f> = Pin<Box<dyn Future<Output = Result<Next, SprintError>> + Send + 'f>>;

/// Polls every future until all of them ended; their outputs in the order given. They share
/// one thread: a step of one task never runs at the same instant as a step of another.
struct JoinAll<'f> {
    futures: Vec<Option<TaskFuture<'f>>>,
    outputs: Vec<Option<Result<Next, SprintError>>>,
}

impl Future for JoinAll<'_> {
    type Output = Vec<Result<Next, SprintError>>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        let mut pending = false;
        for (slot, out) in this.futures.iter_mut().zip(this.outputs.iter_mut()) {
            if let Some(future) = slot {
                match future.as_mut().poll(cx) {
                    Poll::Ready(value) => {
                        *out = Some(value);
                        *slot = None;
                    }
                    Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            Poll::Pending
        } else {
            Poll::Ready(this.outputs.iter_mut().filter_map(Option::take).collect())
        }
    }
}

/// The branch of task `task` in sprint `sprint`: beside the sprint's own `corral/<sprint>`
/// (which, being a branch, cannot also be a directory of branches).
pub(crate) fn task_branch(sprint: &str, task: &TaskId) -> String {
    format!("corral/{sprint}.tasks/{task}")
}

impl Flow<'_, '_> {
    /// Runs the sprint's tasks in waves of at most `jobs`; `Some` when the sprint must stop
    /// (cancelled, rate limited), `None` when no task is left that can run.
    pub(super) async fn run_waves(
        &self,
        state: &mut SprintState,
        run_id: &str,
    ) -> Result<Option<SprintEnd>, SprintError> {
        let jobs = self.run.options.jobs.max(1);
        loop {
            // Tasks done on their branches before a stop are folded first.
            self.fold_all(state).await?;
            if self.run.cancel.is_cancelled() {
                return Ok(Some(SprintEnd::Cancelled));
            }
            let wave = self.ready(state, jobs)?;
            if wave.is_empty() {
                return Ok(None);
            }
            let head = self.git.head().await?;
            let mut flows = Vec::new();
            for &i in &wave {
                let Some(t) = state.tasks.get(i) else {
                    continue;
                };
                let id = t.id.clone();
                let fresh = t.status == TaskStatus::Pending;
                let branch = task_branch(self.file().sprint.name.as_str(), &id);
                let dir = self.layout.worktree_dir(&id);
                self.worktree(&dir, &branch, &head, fresh).await?;
                if let Some(t) = state.tasks.get_mut(i) {
                    t.task_branch = Some(branch.clone());
                }
                flows.push((i, dir, branch));
            }
            self.save(state)?;
            self.emit(SprintEvent::WaveStarted {
                tasks: wave
                    .iter()
                    .filter_map(|&i| state.tasks.get(i).map(|t| t.id.clone()))
                    .collect(),
                jobs,
            });
            let shared = Mutex::new(state.clone());
            let results = {
                let flows: Vec<(usize, Flow<'_, '_>)> = flows
                    .into_iter()
                    .map(|(i, dir, branch)| {
                        (
                            i,
                            Flow {
                                run: self.run,
                                layout: self.layout.clone(),
                                git: Git {
                                    runner: self.git.runner,
                                    cwd: dir.clone(),
                                    cancel: self.git.cancel,
                                    env: self.git.env.clone(),
                                    known: crate::git::Known::default(),
                                },
                                work_tree: dir,
                                branch,
                                shared: Some((&shared, i)),
                            },
                        )
                    })
                    .collect();
                let futures = flows
                    .iter()
                    .map(|(i, flow)| {
                        let (i, shared) = (*i, &shared);
                        let future: TaskFuture<'_> = Box::pin(async move {
                            let mut mine = shared
                                .lock()
                                .unwrap_or_else(PoisonError::into_inner)
                                .clone();
                            flow.run_task(&mut mine, i, run_id).await
                        });
                        Some(future)
                    })
                    .collect::<Vec<_>>();
                let outputs = futures.iter().map(|_| None).collect();
                JoinAll { futures, outputs }.await
            };
            *state = shared.into_inner().unwrap_or_else(PoisonError::into_inner);
            let mut pause = None;
            for result in results {
                match result? {
                    Next::Pause(end) => {
                        pause.get_or_insert(end);
                    }
                    Next::Continue | Next::Finished => {}
                }
            }
            if let Some(end) = pause {
                self.fold_all(state).await?;
                return Ok(Some(end));
            }
        }
    }

    /// The next wave: at most `jobs` tasks, pending or left running, whose dependencies are
    /// done and folded; those left running first (they were in flight). Tasks whose
    /// dependency failed are skipped on the way.
    fn ready(&self, state: &mut SprintState, jobs: usize) -> Result<Vec<usize>, SprintError> {
        let mut running = Vec::new();
        let mut pending = Vec::new();
        for i in 0..state.tasks.len() {
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
        let mut wave: Vec<usize> = running.into_iter().chain(pending).take(jobs).collect();
        wave.sort_unstable();
        Ok(wave)
    }

    /// Makes the worktree of a task at `dir` on `branch`: a fresh task's starts at `head`
    /// (what an earlier sprint of the same name left there is dropped); a task left running
    /// keeps the one it has.
    async fn worktree(
        &self,
        dir: &std::path::Path,
        branch: &str,
        head: &str,
        fresh: bool,
    ) -> Result<(), SprintError> {
        let path = dir.to_string_lossy().into_owned();
        let exists = dir.join(".git").exists();
        if exists && !fresh {
            return Ok(());
        }
        if exists {
            self.git
                .run(&["worktree", "remove", "--force", &path])
                .await?;
        }
        // A worktree whose directory went away is still registered until pruned.
        self.git.run(&["worktree", "prune"]).await?;
        if !fresh && self.git.branch_exists(branch).await? {
            self.git
                .run(&["worktree", "add", "--quiet", &path, branch])
                .await?;
        } else {
            self.git
                .run(&["worktree", "add", "--quiet", "-B", branch, &path, head])
                .await?;
        }
        Ok(())
    }

    /// Folds every task done on its own branch and not yet folded, in run order.
    async fn fold_all(&self, state: &mut SprintState) -> Result<(), SprintError> {
        for i in 0..state.tasks.len() {
            let waiting = state
                .tasks
                .get(i)
                .is_some_and(|t| t.status == TaskStatus::Done && t.task_branch.is_some());
            if waiting {
                self.fold(state, i).await?;
            }
        }
        Ok(())
    }

    /// Folds task `i`'s commit onto the sprint's branch: found there already (a stop after
    /// the fold), fast-forwarded, or cherry-picked; a conflict blocks the task.
    async fn fold(&self, state: &mut SprintState, i: usize) -> Result<(), SprintError> {
        let Some(t) = state.tasks.get(i).cloned() else {
            return Ok(());
        };
        let (Some(branch), Some(commit)) = (t.task_branch.clone(), t.commit.clone()) else {
            return Ok(());
        };
        let Some(task) = self.file().task(&t.id) else {
            return Ok(());
        };
        let id = t.id.as_str();
        let parent = format!("{commit}^");
        let folded = if self
            .git
            .succeeds(&["merge-base", "--is-ancestor", &commit, "HEAD"])
            .await?
        {
            Some((commit.clone(), "fast-forward"))
        } else if let Some(found) = self
            .git
            .commits_for_task(&parent, id)
            .await?
            .into_iter()
            .next()
        {
            Some((found, "cherry-pick"))
        } else if self
            .git
            .succeeds(&["merge-base", "--is-ancestor", "HEAD", &commit])
            .await?
        {
            self.git
                .run(&["merge", "--ff-only", "--quiet", &commit])
                .await?;
            Some((commit.clone(), "fast-forward"))
        } else {
            let out = self
                .git
                .output(
                    &["cherry-pick", "--allow-empty", &commit],
                    corral_ports::DEFAULT_OUTPUT_LIMIT,
                )
                .await?;
            if out.success() {
                Some((self.git.head().await?, "cherry-pick"))
            } else {
                let conflicted = self
                    .git
                    .run(&["diff", "--name-only", "--diff-filter=U"])
                    .await
                    .unwrap_or_default();
                let paths: Vec<&str> = conflicted.lines().filter(|l| !l.is_empty()).collect();
                if !self.git.succeeds(&["cherry-pick", "--abort"]).await? {
                    self.git
                        .run(&["reset", "--hard", "--quiet", "HEAD"])
                        .await?;
                }
                let what = if paths.is_empty() {
                    format!("fails: {}", out.stderr.text.trim())
                } else {
                    format!("conflicts in {}", paths.join(", "))
                };
                let reason = format!(
                    "folding it onto {} {what}; its change stays on branch {branch}",
                    self.file().sprint.branch
                );
                if let Some(t) = state.tasks.get_mut(i) {
                    t.commit = None;
                    t.task_branch = None;
                }
                self.remove_worktree(&t.id).await;
                return self.finish_blocked(state, i, task, reason).map(drop);
            }
        };
        let Some((folded, how)) = folded else {
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
            t.commit = Some(folded.clone());
            t.task_branch = None;
        }
        self.save(state)?;
        self.remove_worktree(&t.id).await;
        self.emit(SprintEvent::Folded {
            task: t.id.clone(),
            commit: folded,
            how: how.to_string(),
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
