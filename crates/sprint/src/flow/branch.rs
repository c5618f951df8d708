//! The sprint's branch is its own: a sprint does not commit on the branch the user is on.
//!
//! A sprint file saying `branch = "main"` would have a new sprint commit every task, and reset
//! every regressed or blocked round, on the user's own branch, with the user's own uncommitted
//! work one `--keep-dirty` away. So a sprint that has not run yet refuses to start on the branch
//! checked out; a sprint that has (its `sprint.json` holds a run) is on its own branch, checked
//! out by its first run, and goes on.

use super::{Context, SprintError};

impl Context<'_, '_> {
    /// Refuses ([`SprintError::UsersBranch`]) a new sprint whose branch is the one checked out.
    pub(super) async fn refuse_users_branch(&self, resumed: bool) -> Result<(), SprintError> {
        if resumed {
            return Ok(());
        }
        let branch = &self.file().sprint.branch;
        if self.git.branch().await?.as_deref() == Some(branch.as_str()) {
            return Err(SprintError::UsersBranch {
                branch: branch.clone(),
            });
        }
        Ok(())
    }
}
