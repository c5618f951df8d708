//! A role played by several providers in order (`provider = ["claude", "codex"]`):
//! [`FailoverAgent`] runs each spawn on the first provider whose account is not held, and when
//! one's account is held longer than the role's `failover_after_ms`, hands the work to the next.
//!
//! The hold itself is learnt by the engine (a rejected rate limit with its reset, the account's
//! gate): each provider but the last is built to stop a spawn at once when it meets a hold longer
//! than `failover_after_ms` instead of waiting for it (`RetryPolicy::hand_over_after`), and the
//! sprint asks [`RoleAgent::hand_over`] what to do with such a spawn. The holds this agent knows
//! are kept in memory only: after a restart the first provider is tried again, and its engine,
//! finding the account's hold in the gate (on disk), stops before starting the CLI, so the
//! hand-over is learnt again for nothing.
//!
//! When every provider is held, the role goes on with the one whose hold ends first, whichever it
//! is: its spawn runs on that provider's *waiting* agent ([`FailoverAgent::with_waiting`], built
//! without a hand-over), which waits for the reset in the account's gate with its countdown, or,
//! with `retry.auto_resume = false`, pauses the sprint (exit 4) naming that reset. A spawn that
//! meets a hold longer than `failover_after` on the provider whose hold is then the first to end
//! is "handed over" to that same provider ([`HandOver`] with `from` and `to` the same), whose
//! waiting agent runs the step again; on another provider, the work is handed to the one whose
//! hold ends first (the last provider is handed over from as the others are).

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use corral_ports::{CancellationToken, Effort, Outcome, ProviderId, RunObserver};

use crate::agent::{HandOver, RoleAgent, SpawnReport, SpawnRequest};

/// A role's providers in failover order (see the module's documentation).
pub struct FailoverAgent {
    /// At least one; no provider twice.
    agents: Vec<Arc<dyn RoleAgent>>,
    /// A hold longer than this hands the work over (a reset not reported is taken as this long).
    failover_after: Duration,
    /// Per agent, the same provider built to wait for a hold instead of stopping at it: what
    /// runs when every provider is held. Empty: `agents` themselves.
    waiting: Vec<Arc<dyn RoleAgent>>,
    /// Per agent, until when its account is held, as far as this agent learnt.
    held: Mutex<Vec<Option<SystemTime>>>,
    /// The clock (a test's own).
    now: fn() -> SystemTime,
}

impl std::fmt::Debug for FailoverAgent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let providers: Vec<ProviderId> = self.agents.iter().map(|a| a.provider()).collect();
        f.debug_struct("FailoverAgent")
            .field("providers", &providers)
            .field("failover_after", &self.failover_after)
            .finish_non_exhaustive()
    }
}

impl FailoverAgent {
    /// The role played by `agents`, in order; `None` when there is none.
    pub fn new(agents: Vec<Arc<dyn RoleAgent>>, failover_after: Duration) -> Option<Self> {
        Self::with_clock(agents, failover_after, SystemTime::now)
    }

    /// [`FailoverAgent::new`] on the clock `now`.
    pub fn with_clock(
        agents: Vec<Arc<dyn RoleAgent>>,
        failover_after: Duration,
        now: fn() -> SystemTime,
    ) -> Option<Self> {
        if agents.is_empty() {
            return None;
        }
        let held = Mutex::new(vec![None; agents.len()]);
        Some(FailoverAgent {
            agents,
            failover_after,
            waiting: Vec::new(),
            held,
            now,
        })
    }

    /// The agents to run when every provider is held, one per agent and in the same order:
    /// each provider built to wait for its hold (or pause, `retry.auto_resume = false`) rather
    /// than stop at it. Ignored unless there is one per agent.
    #[must_use]
    pub fn with_waiting(mut self, waiting: Vec<Arc<dyn RoleAgent>>) -> Self {
        if waiting.len() == self.agents.len() {
            self.waiting = waiting;
        }
        self
    }

    /// The index of the agent that runs the next spawn, and whether every provider is held:
    /// the first whose hold has passed, else the one whose hold ends first.
    fn pick(&self) -> (usize, bool) {
        let now = (self.now)();
        let held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(i) = held.iter().position(|h| h.is_none_or(|until| until <= now)) {
            return (i, false);
        }
        let first = held
            .iter()
            .enumerate()
            .min_by_key(|(_, h)| h.unwrap_or(now))
            .map_or(self.agents.len() - 1, |(i, _)| i);
        (first, true)
    }

    /// The agent of index `i`: its waiting one when every provider is held.
    fn agent(&self, i: usize, all_held: bool) -> &dyn RoleAgent {
        let i = i.min(self.agents.len() - 1);
        match self.waiting.get(i) {
            Some(waiting) if all_held => &**waiting,
            _ => &*self.agents[i],
        }
    }

    fn chosen(&self) -> &dyn RoleAgent {
        // `pick` is always an index of `agents`, which is never empty.
        let (i, all_held) = self.pick();
        self.agent(i, all_held)
    }

    /// Notes the hold a spawn of agent `i` stopped at (`report`, rate limited): until its
    /// reset, or for `failover_after` when none was reported. When it is learnt.
    fn note_hold(&self, i: usize, report: &SpawnReport) -> SystemTime {
        let now = (self.now)();
        // A reset not reported (the retries ran out on backoff alone): held for as long as the
        // role waits before handing over, then tried again.
        let until = report
            .error
            .as_ref()
            .and_then(|e| e.resets_at_epoch_s)
            .map(|s| UNIX_EPOCH + Duration::from_secs(s))
            .filter(|until| *until > now)
            .unwrap_or(now + self.failover_after);
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(slot) = held.get_mut(i) {
            *slot = Some(slot.map_or(until, |known| known.max(until)));
        }
        until
    }
}

#[async_trait]
impl RoleAgent for FailoverAgent {
    fn provider(&self) -> ProviderId {
        self.chosen().provider()
    }

    fn model(&self) -> Option<&str> {
        self.chosen().model()
    }

    fn effort(&self) -> Option<Effort> {
        self.chosen().effort()
    }

    fn resumes(&self) -> bool {
        self.chosen().resumes()
    }

    async fn spawn(
        &self,
        request: SpawnRequest,
        cancel: CancellationToken,
        observer: Arc<dyn RunObserver>,
    ) -> SpawnReport {
        self.chosen().spawn(request, cancel, observer).await
    }

    fn current(&self) -> Option<&dyn RoleAgent> {
        Some(self.chosen())
    }

    fn hand_over(&self, ran: ProviderId, report: &SpawnReport) -> Option<HandOver> {
        if report.outcome != Outcome::RateLimited {
            return None;
        }
        let i = self.agents.iter().position(|a| a.provider() == ran)?;
        // Without waiting agents the last provider's own agent waits for its hold (or pauses):
        // it is never handed over from.
        if self.waiting.is_empty() && i + 1 >= self.agents.len() {
            return None;
        }
        // The spawn ran on a waiting agent (every provider was held): its limit is the sprint's
        // to meet (a pause, `retry.auto_resume = false`, naming the first reset).
        if !self.waiting.is_empty() && self.pick().1 {
            return None;
        }
        let until = self.note_hold(i, report);
        let (next, all_held) = self.pick();
        let to = self.agent(next, all_held).provider();
        // Every provider held and this one's hold ends first: the step runs again on its
        // waiting agent, which waits for the reset (`from` and `to` the same provider).
        if to == ran && (!all_held || self.waiting.is_empty()) {
            return None;
        }
        let held_until_epoch_s = until
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() + u64::from(d.subsec_nanos() > 0));
        Some(HandOver {
            from: ran,
            held_until_epoch_s,
            to,
        })
    }
}
