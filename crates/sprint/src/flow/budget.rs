//! The spend caps, checked before every spawn: the task's `max_cost_usd` over its spawns, and
//! the sprint's `[sprint] max_cost_usd` over every spawn of every run. A cap reached pauses the
//! sprint with [`SprintEnd::BudgetExhausted`] (exit 9), the cap and the spend named in the
//! task's warnings; the task stays at its step, so raising the cap and running again goes on
//! there. Checked between spawns, a cap is passed by at most the last spawn's cost; a spawn's
//! own cap (`max_budget_usd`, `max_turns`) is the CLI's to enforce.

use crate::error::SprintError;
use crate::event::SprintEnd;
use crate::state::{SprintState, UsageRollUp};

use super::task::TaskCursor;
use super::{Context, Next};

impl TaskCursor<'_, '_, '_> {
    /// Before a spawn: `Some` (the pause) when a spend cap is reached, named in the task's
    /// warnings; `None` when the spawn may run.
    pub(super) fn spend_cap(&mut self) -> Result<Option<Next>, SprintError> {
        let task_cost = self.state.tasks.get(self.i).map_or(0.0, |t| {
            UsageRollUp::of_task(t).total.cost_usd.unwrap_or(0.0)
        });
        let reached = match self.task.max_cost_usd {
            Some(cap) if task_cost >= cap.dollars() => format!(
                "task {} has spent ${task_cost:.2}, its max_cost_usd is {cap}",
                self.task.id
            ),
            _ => match self.ctx.sprint_cap_reached(self.state) {
                Some(reached) => reached,
                None => return Ok(None),
            },
        };
        let message = format!(
            "{reached}: the sprint paused before the task's next spawn (budget-exhausted); \
             raise the cap in {} and run the sprint again to go on",
            self.ctx.file().path.display()
        );
        self.warn(&message)?;
        Ok(Some(Next::Pause(SprintEnd::BudgetExhausted)))
    }
}

impl Context<'_, '_> {
    /// What `[sprint] max_cost_usd` says of `state`'s spend: `Some` (what was spent of it) once
    /// reached.
    pub(super) fn sprint_cap_reached(&self, state: &SprintState) -> Option<String> {
        let cap = self.file().sprint.max_cost_usd?;
        let spent = state.usage().total.cost_usd.unwrap_or(0.0);
        (spent >= cap.dollars())
            .then(|| format!("the sprint has spent ${spent:.2}, its max_cost_usd is {cap}"))
    }
}
