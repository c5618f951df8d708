//! The local executor of Corral's sprint, the default: each task of a parallel run (`corral
//! sprint run --jobs N`) in its own git worktree on this machine
//! (`.corral/sprints/<name>/worktrees/<task>/`) on its own branch, `setup` run once in each new
//! worktree, and the task's rounds run there by the sprint's own flow ([`TaskHost::work_task`]),
//! with the same agents, engine, sandbox and record.
//!
//! It implements the sprint's [`TaskExecutor`] port and knows nothing else: not the other
//! executors (a sibling crate it may not depend on), no provider, no process (git and `setup`
//! run through the host's supervised command runner), no settings file.

use std::path::Path;

use async_trait::async_trait;
use corral_ports::CancellationToken;
use corral_sprint::{ExecutorError, TaskExecutor, TaskHandback, TaskHost, TaskJob};

/// Runs every task in a git worktree of the project's repository.
#[derive(Debug, Default, Clone, Copy)]
pub struct LocalExecutor;

/// The name of this executor in settings (`executor.kind`).
pub const KIND: &str = "local";

#[async_trait]
impl TaskExecutor for LocalExecutor {
    fn kind(&self) -> &'static str {
        KIND
    }

    async fn run_task(
        &self,
        job: TaskJob,
        host: &dyn TaskHost,
        _cancel: &CancellationToken,
    ) -> Result<TaskHandback, ExecutorError> {
        // The host's flow stops at the next step when the run's token fires (it is the same
        // token): no process of its own is left to stop here.
        // Never more tasks in flight than slots (no lookahead): the slot is free at once.
        let _slot = host.round_slots().take().await;
        let dir = host.layout().worktree_dir(&job.task);
        if make_worktree(host, &dir, &job).await? {
            host.run_setup(&dir).await?;
        }
        host.work_task(&job, &dir).await
    }
}

/// Makes the worktree of `job` at `dir`: a fresh task's starts at the job's base (what an
/// earlier sprint of the same name left there is dropped); a task left running keeps the one
/// it has. Whether a new one was made (`setup` runs in it).
async fn make_worktree(
    host: &dyn TaskHost,
    dir: &Path,
    job: &TaskJob,
) -> Result<bool, ExecutorError> {
    let root = host.project_root();
    let path = dir.to_string_lossy().into_owned();
    let exists = dir.join(".git").exists();
    let fresh = job.is_fresh();
    if exists && !fresh {
        return Ok(false);
    }
    if exists {
        host.git(root, &["worktree", "remove", "--force", &path])
            .await?;
    }
    // A worktree whose directory went away is still registered until pruned.
    host.git(root, &["worktree", "prune"]).await?;
    let reference = format!("refs/heads/{}", job.branch);
    let branch_exists = host
        .git(root, &["rev-parse", "--verify", "--quiet", &reference])
        .await
        .is_ok();
    if !fresh && branch_exists {
        host.git(root, &["worktree", "add", "--quiet", &path, &job.branch])
            .await?;
    } else {
        host.git(
            root,
            &[
                "worktree",
                "add",
                "--quiet",
                "-B",
                &job.branch,
                &path,
                &job.base,
            ],
        )
        .await?;
    }
    Ok(true)
}
