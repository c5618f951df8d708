//! What the evaluator is shown of a round: its diff, made with the agent's own git attributes
//! neutralised (`git::Git::patch_against`), and, when the diff is too long for the prompt,
//! every path it changes, listed after the marked cut, so that no change passes unseen for
//! sitting past the cut.

use std::path::Path;

use super::{Context, SprintError, write_file};

impl Context<'_, '_> {
    /// Beside a diff too long for the evaluator's prompt: every path it changes, for the
    /// prompt to list after its cut.
    pub(super) async fn save_changed_paths(
        &self,
        round_dir: &Path,
        base: &str,
        patch: &str,
    ) -> Result<(), SprintError> {
        if patch.len() <= crate::prompt::PROMPT_DIFF_LIMIT {
            return Ok(());
        }
        let paths = self.git.changed_paths(base).await?;
        write_file(
            &self.layout,
            &round_dir.join(super::CHANGED_PATHS_FILE),
            paths.as_bytes(),
        )
    }
}
