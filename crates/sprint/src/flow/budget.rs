//! The spend caps, checked before every spawn: the task's `max_cost_usd` over its spawns, and
//! the sprint's `[sprint] max_cost_usd` over every spawn of every run. A cap reached pauses the
//! sprint with [`SprintEnd::BudgetExhausted`] (exit 9), the cap and the spend named in the
//! task's warnings; the task stays at its step, so raising the cap and running again goes on
//! there. Checked between spawns, a cap is passed by at most the last spawn's cost; a spawn's
//! own cap (`max_budget_usd`, `max_turns`) is the CLI's to enforce. In a parallel run the
//! coordinator, which sees every task's spend, also lets each spawn go only while the sprint's
//! spend and a spawn's worth for each spawn in flight stay below the cap
//! ([`crate::TaskRecorder::admit_spawn`]), so that N tasks at once pass it by one spawn's cost,
//! not N. A remote task's worker sees only its own task's spend: the coordinator hands it
//! its part of what is left of the cap ([`crate::TaskJob::max_cost_usd`]), at which it pauses.

use std::future::Future;
use std::task::Poll;

use crate::error::SprintError;
use crate::event::SprintEnd;
use crate::executor::{SpawnAdmission, TaskRecorder};
use crate::state::{SprintState, UsageRollUp};

use super::task::TaskCursor;
use super::{Context, Next};

impl TaskCursor<'_, '_, '_> {
    /// Before a spawn: `Some` (the pause) when a spend cap is reached, named in the task's
    /// warnings; `None` when the spawn may run.
    pub(super) async fn spend_cap(&mut self) -> Result<Option<Next>, SprintError> {
        let task_cost = self.state.tasks.get(self.i).map_or(0.0, |t| {
            UsageRollUp::of_task(t).total.cost_usd.unwrap_or(0.0)
        });
        let reached = match self.task.max_cost_usd {
            Some(cap) if task_cost >= cap.dollars() => format!(
                "task {} has spent ${task_cost:.2}, its max_cost_usd is {cap}",
                self.task.id
            ),
            // A remote task's part of the sprint's cap, spent: the coordinator, which sees
            // every task's spend, decides whether the sprint pauses or the task goes on with
            // a new part; no warning, since raising nothing is asked of anyone yet.
            _ if self.ctx.share.is_some_and(|share| task_cost >= share) => {
                return Ok(Some(Next::Pause(SprintEnd::BudgetExhausted)));
            }
            _ => match self.ctx.sprint_cap_reached(self.state) {
                Some(reached) => reached,
                None => match self.admitted().await {
                    Admitted::Go => return Ok(None),
                    Admitted::Cancelled => return Ok(Some(Next::Pause(SprintEnd::Cancelled))),
                    Admitted::CapReached(reached) => reached,
                },
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

/// How a parallel task's wait for room under the sprint's cap ended.
enum Admitted {
    Go,
    Cancelled,
    CapReached(String),
}

impl TaskCursor<'_, '_, '_> {
    /// In a parallel run, waits until the coordinator lets the task's next spawn go beside the
    /// spawns in flight ([`TaskRecorder::admit_spawn`]); the spawn then tells it when it ended
    /// (`spawn` in `generate.rs`). A task run one by one goes at once: the cap checked between
    /// spawns is passed by at most one spawn's cost.
    async fn admitted(&self) -> Admitted {
        let Some((recorder, _)) = self.ctx.shared else {
            return Admitted::Go;
        };
        let id = &self.task.id;
        let mut cancelled = std::pin::pin!(self.ctx.run.cancel.cancelled());
        std::future::poll_fn(|cx| {
            if cancelled.as_mut().poll(cx).is_ready() {
                return Poll::Ready(Admitted::Cancelled);
            }
            match recorder.admit_spawn(id, cx.waker()) {
                SpawnAdmission::Go => Poll::Ready(Admitted::Go),
                SpawnAdmission::Wait => Poll::Pending,
                SpawnAdmission::CapReached(reached) => Poll::Ready(Admitted::CapReached(reached)),
            }
        })
        .await
    }
}

/// Tells the coordinator that a spawn it let go ended, however `spawn` ends.
pub(super) struct SpawnEnded<'r> {
    pub(super) recorder: Option<&'r dyn TaskRecorder>,
    pub(super) task: crate::names::TaskId,
}

impl Drop for SpawnEnded<'_> {
    fn drop(&mut self) {
        if let Some(recorder) = self.recorder {
            recorder.spawn_ended(&self.task);
        }
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
