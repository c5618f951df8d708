//! A role's work handed to the next provider it lists (failover): the task's record and the
//! night's record say so, and the same step runs again on the provider that goes on.

use std::sync::Arc;
use std::sync::mpsc::Sender;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use corral_ports::{AgentEvent, ProviderId, RunObserver, SessionId};

use crate::agent::{HandOver, RoleAgent, SpawnReport};
use crate::error::SprintError;
use crate::event::SprintEvent;
use crate::layout::Role;
use crate::state::HandOverRecord;

use super::Next;
use super::task::TaskCursor;

impl TaskCursor<'_, '_, '_> {
    /// After a spawn of `role` on `ran` (the current agent of `role_agent`, with failover the
    /// provider of the role whose account is not held): the hand-over to the role's next
    /// provider when its rate limit calls for one, else the sprint's pause when the report calls
    /// for one (cancelled, rate limited), else `None`.
    pub(super) fn after_spawn(
        &mut self,
        role: Role,
        role_agent: &dyn RoleAgent,
        ran: &dyn RoleAgent,
        report: &SpawnReport,
    ) -> Result<Option<Next>, SprintError> {
        if !self.ctx.run.cancel.is_cancelled()
            && let Some(hand_over) = role_agent.hand_over(ran.provider(), report)
        {
            return self.handed_over(role, hand_over).map(Some);
        }
        Ok(super::pause_for(report, &self.ctx.run.cancel).map(Next::Pause))
    }

    /// Records `hand_over` of `role` and goes on at the same step: its next spawn runs on the
    /// provider that took over, in a new session (its brief carries the critique and the
    /// learnings), and no round or transient retry is counted. The spawn's directory is made
    /// anew then, the held provider's record moved aside.
    pub(super) fn handed_over(
        &mut self,
        role: Role,
        hand_over: HandOver,
    ) -> Result<Next, SprintError> {
        let task = self.task;
        let held_until = rfc3339(UNIX_EPOCH + Duration::from_secs(hand_over.held_until_epoch_s));
        if hand_over.from == hand_over.to {
            // Every provider of the role is held and this one's hold ends first: the step runs
            // again on it, waiting for its reset; no other provider took over.
            let round = self.state.tasks.get(self.i).map_or(0, |t| t.round);
            self.ctx.emit(SprintEvent::RateLimitHold {
                task: task.id.clone(),
                round,
                role,
                provider: hand_over.from,
                until: held_until,
            });
            return Ok(Next::Continue);
        }
        let Some(t) = self.state.tasks.get_mut(self.i) else {
            return Ok(Next::Finished);
        };
        let record = HandOverRecord {
            round: t.round,
            role,
            from: hand_over.from,
            held_until: held_until.clone(),
            to: hand_over.to,
        };
        t.handovers.push(record);
        let round = t.round;
        self.save()?;
        // The hold, told once (the spawn may have told it already, as it met it).
        self.ctx.emit(SprintEvent::RateLimitHold {
            task: task.id.clone(),
            round,
            role,
            provider: hand_over.from,
            until: held_until.clone(),
        });
        self.ctx.emit(SprintEvent::FailedOver {
            task: task.id.clone(),
            round,
            role,
            from: hand_over.from,
            held_until,
            to: hand_over.to,
        });
        Ok(Next::Continue)
    }
}

/// A hold shorter than this is not told ([`SprintEvent::RateLimitHold`]): a CLI's own retry
/// after a second's `retry-after` is a limit met in passing, not one to tell anyone of.
pub(super) const TOLD_HOLD: Duration = Duration::from_secs(30);

/// A spawn's observer that also notes every rate-limit hold the spawn meets (its CLI's own wait,
/// a reset, Corral's backoff, another run's hold on the account), as its end, for the sprint to
/// tell ([`SprintEvent::RateLimitHold`]); everything goes on to `inner` as it was.
pub(super) struct HoldWatch {
    pub(super) inner: Arc<dyn RunObserver>,
    pub(super) holds: std::sync::Mutex<Sender<SystemTime>>,
}

impl HoldWatch {
    fn note(&self, until: SystemTime) {
        if until
            .duration_since(SystemTime::now())
            .is_ok_and(|wait| wait >= TOLD_HOLD)
        {
            let sender = self
                .holds
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            // The receiver goes with the spawn: a hold noted after it is not told.
            let _ = sender.send(until);
        }
    }
}

impl RunObserver for HoldWatch {
    fn attempt_started(&self, attempt: u32, resume: Option<&SessionId>) {
        self.inner.attempt_started(attempt, resume);
    }
    fn event(&self, attempt: u32, event: &AgentEvent) {
        self.inner.event(attempt, event);
    }
    fn backoff(&self, attempt: u32, wait: Duration, reason: &str) {
        self.note(SystemTime::now() + wait);
        self.inner.backoff(attempt, wait, reason);
    }
    fn account_wait(&self, attempt: u32, provider: ProviderId, until: SystemTime) {
        self.note(until);
        self.inner.account_wait(attempt, provider, until);
    }
    fn cli_retry_wait(&self, attempt: u32, provider: ProviderId, status: u16, until: SystemTime) {
        self.note(until);
        self.inner.cli_retry_wait(attempt, provider, status, until);
    }
    fn cold_fallback(&self, attempt: u32, stale: &SessionId) {
        self.inner.cold_fallback(attempt, stale);
    }
}

/// `at` as RFC 3339 in UTC, to the second.
pub(super) fn rfc3339(at: SystemTime) -> String {
    humantime::format_rfc3339_seconds(at).to_string()
}
