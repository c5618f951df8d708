//! The commit step: the task's change committed with the generator's proposed message (or the
//! task's title) and the `Corral-Task:` trailer, found instead of made again when a stopped
//! run had made it, and the task's learnings appended.

use corral_contract::{Contract, validate_signals_file};

use crate::error::SprintError;
use crate::event::SprintEvent;
use crate::layout::{Role, SIGNALS_FILE};
use crate::state::TaskStatus;

use super::task::TaskCursor;
use super::{Next, commit_message};

impl TaskCursor<'_, '_, '_> {
    pub(super) async fn commit(
        &mut self,
        run_id: &str,
        continued: bool,
    ) -> Result<Next, SprintError> {
        let task = self.task;
        let Some(t) = self.state.tasks.get(self.i).cloned() else {
            return Ok(Next::Finished);
        };
        let Some(progress) = t.progress.clone() else {
            return Ok(Next::Finished);
        };
        let signals = validate_signals_file(
            &self
                .ctx
                .layout
                .spawn_dir(&task.id, t.round, Role::Generator)
                .join(SIGNALS_FILE),
            &Contract::generator(),
        )
        .map(corral_contract::ValidatedSignals::into_signals)
        .unwrap_or_default();
        // A commit made before the sprint stopped is found, not made again.
        let made = if continued {
            self.ctx
                .git
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
                if !self.ctx.git.staged() {
                    self.ctx.git.stage_all().await?;
                }
                let message = commit_message(task, &signals, run_id);
                self.ctx
                    .git
                    .commit(&message, &self.ctx.layout.round_dir(&task.id, t.round))
                    .await?
            }
        };
        // A parallel task's learnings are the sprint's once it is folded (its one writer).
        if self.ctx.shared.is_none() {
            self.ctx.append_learnings(task, t.round, &signals)?;
        }
        if let Some(t) = self.state.tasks.get_mut(self.i) {
            t.status = TaskStatus::Done;
            t.commit = Some(commit.clone());
            t.reason = None;
            t.progress = None;
        }
        self.save()?;
        self.ctx.emit(SprintEvent::TaskFinished {
            task: task.id.clone(),
            status: TaskStatus::Done,
            commit: Some(commit),
            reason: None,
        });
        Ok(Next::Finished)
    }
}
