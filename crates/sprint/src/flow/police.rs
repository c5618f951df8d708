//! The police step, after each spawn: what an agent must not have done (switched the branch,
//! committed on its own) is found, named and undone.

use crate::error::SprintError;
use crate::layout::Role;

use super::task::TaskCursor;
use super::{BLOCKED_PATCH_FILE, Next, short, write_file};

impl TaskCursor<'_, '_, '_> {
    /// Finds what an agent must not have done: switched the branch (the task is blocked, its
    /// change saved, the sprint's branch checked out again) or committed (its commits are
    /// undone, their changes kept for the task's own commit). Either is named in the status.
    pub(super) async fn police(&mut self, role: Role) -> Result<Option<Next>, SprintError> {
        let task = self.task;
        let Some(base) = self
            .state
            .tasks
            .get(self.i)
            .and_then(|t| t.progress.as_ref())
            .map(|p| p.base.clone())
        else {
            return Ok(None);
        };
        let branch = &self.ctx.branch;
        let (now_on, head) = self.ctx.git.branch_and_head().await?;
        if now_on.as_deref() != Some(branch.as_str()) {
            let message = format!(
                "the {role} switched from {branch} to {}",
                now_on
                    .as_deref()
                    .map_or("a detached HEAD".to_string(), |b| format!("branch {b}"))
            );
            self.warn(&message)?;
            let patch = self.ctx.git.patch_against(&base).await?;
            write_file(
                &self.ctx.layout,
                &self.ctx.layout.task_dir(&task.id).join(BLOCKED_PATCH_FILE),
                patch.as_bytes(),
            )?;
            self.ctx
                .git
                .run(&["checkout", "--quiet", "--force", branch])
                .await?;
            self.ctx.git.reset_to(&base).await?;
            return Ok(Some(self.finish_blocked(message)?));
        }
        if head != base {
            let message = format!(
                "the {role} committed on its own ({}); Corral undid the commit and kept its change",
                short(&head)
            );
            self.warn(&message)?;
            self.ctx
                .git
                .run(&["reset", "--soft", "--quiet", &base])
                .await?;
        }
        Ok(None)
    }
}
