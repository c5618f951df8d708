//! The verdict: from one attempt's class to the run's next step, in one exhaustive match.
//!
//! A rate limit waits and resumes while retries are left; a stale session gets one cold retry
//! that uses no retry slot; every other class ends the run with a [`Verdict`], which maps onto
//! exactly one of the ports' results. The state the loop carries between attempts is
//! [`Progress`].

use std::time::{Duration, SystemTime};

use corral_ports::{Outcome, SessionId, Usage};

use crate::attempt::AttemptResult;
use crate::backoff::{RetryPolicy, WaitBasis};
use crate::classify::AttemptClass;

/// What the run carries from one attempt to the next.
#[derive(Debug)]
pub(crate) struct Progress {
    /// The number of the current attempt (1-based once the first started), counted over the
    /// whole task run: a corrective retry's provider run numbers on from the one before.
    pub attempt: u32,
    /// Attempts the task's earlier provider runs made.
    pub attempts_before: u32,
    /// The session the next attempt resumes.
    pub resume: Option<SessionId>,
    /// Set when the engine itself resumes a session it captured (after a rate limit): the
    /// conversation already holds the task, so only a short continuation is sent.
    pub continuing: bool,
    /// The session id already written to `session-id.txt`, to write it only on change.
    pub persisted: Option<SessionId>,
    /// The last session id any attempt reported (or the caller's, before one did).
    pub last_session: Option<SessionId>,
    /// Usage over all attempts.
    pub usage: Usage,
    /// Rate-limit retries spent.
    pub retries_used: u32,
    /// Whether the one cold retry after a stale session was spent.
    pub stale_fallback_used: bool,
    rng: fastrand::Rng,
}

impl Progress {
    /// Before the first attempt: resuming the caller's session, if any, after `attempts_before`
    /// attempts of the task's earlier provider runs.
    pub fn new(resume: Option<SessionId>, jitter_seed: Option<u64>, attempts_before: u32) -> Self {
        Progress {
            attempt: attempts_before,
            attempts_before,
            last_session: resume.clone(),
            resume,
            continuing: false,
            persisted: None,
            usage: Usage::default(),
            retries_used: 0,
            stale_fallback_used: false,
            rng: match jitter_seed {
                Some(seed) => fastrand::Rng::with_seed(seed),
                None => fastrand::Rng::new(),
            },
        }
    }

    /// Starts the next attempt and returns its number.
    pub fn next_attempt(&mut self) -> u32 {
        self.attempt += 1;
        self.attempt
    }

    /// The attempts this provider run made.
    pub fn made(&self) -> u32 {
        self.attempt - self.attempts_before
    }

    /// Adds what an attempt paid for and reported.
    pub fn absorb(&mut self, result: &AttemptResult) {
        self.usage.add(&result.usage);
        if let Some(id) = &result.session_id {
            self.last_session = Some(id.clone());
        }
    }

    /// Whether the next attempt continues a session the engine captured.
    pub fn continues(&self) -> bool {
        self.continuing && self.resume.is_some()
    }

    /// Whether the next attempt starts a new session because the one to resume was gone: it
    /// is sent the caller's cold prompt (the whole task), not the resume prompt.
    pub fn gone_cold(&self) -> bool {
        self.stale_fallback_used && self.resume.is_none()
    }
}

/// What the run does after an attempt.
#[derive(Debug, PartialEq)]
pub(crate) enum Step {
    /// Wait, then resume (a rate limit with retries left).
    Backoff {
        /// How long.
        wait: Duration,
        /// What the wait was computed from.
        basis: WaitBasis,
    },
    /// Start again without resuming: the session was not found.
    ColdRetry {
        /// The session that was not found.
        stale: Option<SessionId>,
    },
    /// The run is over.
    Done(Verdict),
}

/// How a run ended, as far as the attempts decide it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Verdict {
    /// The CLI reported success.
    Succeeded,
    /// It failed, but `signals.json` is there.
    Recovered,
    /// The caller cancelled.
    Cancelled,
    /// Rate limited with no retry left, or a long limit with auto-resume off.
    RateLimited {
        /// The reset time the CLI reported, if it did.
        resets_at_epoch_s: Option<u64>,
        /// The limit was long and auto-resume is off: stopped instead of waiting.
        auto_resume_off: bool,
    },
    /// The model is unavailable, in the CLI's words.
    ModelUnavailable(String),
    /// The CLI refused, with what to change.
    Refused(String),
    /// Corral's egress proxy refused `target`; `detail` says what it said.
    EgressRefused {
        /// `host:port`.
        target: String,
        /// The proxy's reason.
        detail: String,
    },
    /// The resumed session was not found, after the cold retry was spent.
    StaleSession(SessionId),
    /// Killed for printing nothing.
    IdleTimeout,
    /// Killed at the wall-clock limit.
    WallTimeout,
    /// Ended by the sandbox's guard at one of its limits (`[limits]`).
    LimitExceeded(corral_process::Breach),
    /// Anything else.
    Crashed,
}

impl Verdict {
    /// The ports' outcome.
    pub fn outcome(&self) -> Outcome {
        match self {
            Verdict::Succeeded => Outcome::Succeeded,
            Verdict::Recovered => Outcome::Recovered,
            Verdict::Cancelled => Outcome::Cancelled,
            Verdict::RateLimited { .. } => Outcome::RateLimited,
            Verdict::ModelUnavailable(_) => Outcome::ModelUnavailable,
            Verdict::Refused(_) | Verdict::EgressRefused { .. } => Outcome::Refused,
            Verdict::StaleSession(_) => Outcome::StaleSession,
            Verdict::IdleTimeout => Outcome::IdleTimeout,
            Verdict::WallTimeout => Outcome::WallTimeout,
            Verdict::LimitExceeded(_) => Outcome::LimitExceeded,
            Verdict::Crashed => Outcome::Crashed,
        }
    }
}

/// The next step after an attempt of class `class` that reported session `captured`, updating
/// `progress` for a retry.
pub(crate) fn step(
    class: AttemptClass,
    captured: Option<&SessionId>,
    progress: &mut Progress,
    policy: &RetryPolicy,
) -> Step {
    match class {
        AttemptClass::RateLimited(info) => {
            let wait = if progress.retries_used < policy.max_retries {
                policy.wait(
                    progress.retries_used + 1,
                    Some(&info),
                    SystemTime::now(),
                    &mut progress.rng,
                )
            } else {
                None
            };
            let Some((wait, basis)) = wait else {
                return Step::Done(Verdict::RateLimited {
                    resets_at_epoch_s: info.resets_at_epoch_s,
                    auto_resume_off: false,
                });
            };
            if policy.stops_at(wait) {
                // The session to resume by hand is the one this attempt captured.
                if let Some(id) = captured {
                    progress.last_session = Some(id.clone());
                }
                let wait = info.retry_after_ms.map_or(wait, Duration::from_millis);
                return Step::Done(Verdict::RateLimited {
                    resets_at_epoch_s: info
                        .resets_at_epoch_s
                        .or_else(|| crate::gate::epoch_s_after(wait)),
                    auto_resume_off: true,
                });
            }
            progress.retries_used += 1;
            // Resume what this attempt captured; with nothing captured, keep what it resumed
            // (the caller's session), or go cold.
            if let Some(id) = captured {
                progress.resume = Some(id.clone());
            }
            progress.continuing = captured.is_some();
            Step::Backoff { wait, basis }
        }
        AttemptClass::StaleSession if !progress.stale_fallback_used => {
            progress.stale_fallback_used = true;
            Step::ColdRetry {
                stale: progress.resume.take(),
            }
        }
        // Only an attempt that resumed a session is classified stale, so `resume` is set.
        AttemptClass::StaleSession => Step::Done(match progress.resume.clone() {
            Some(id) => Verdict::StaleSession(id),
            None => Verdict::Crashed,
        }),
        AttemptClass::Succeeded => Step::Done(Verdict::Succeeded),
        AttemptClass::Recovered => Step::Done(Verdict::Recovered),
        AttemptClass::Cancelled => Step::Done(Verdict::Cancelled),
        AttemptClass::ModelUnavailable(message) => Step::Done(Verdict::ModelUnavailable(message)),
        AttemptClass::Refused(message) => Step::Done(Verdict::Refused(message)),
        AttemptClass::EgressRefused { target, detail } => {
            Step::Done(Verdict::EgressRefused { target, detail })
        }
        AttemptClass::IdleTimeout => Step::Done(Verdict::IdleTimeout),
        AttemptClass::WallTimeout => Step::Done(Verdict::WallTimeout),
        // Never retried, not even as a crash would be: the same work meets the same limit.
        AttemptClass::LimitExceeded(breach) => Step::Done(Verdict::LimitExceeded(breach)),
        AttemptClass::Crashed => Step::Done(Verdict::Crashed),
    }
}

#[cfg(test)]
mod tests {
    use corral_ports::RateLimitInfo;

    use super::*;

    fn id(s: &str) -> SessionId {
        SessionId::new(s).unwrap()
    }

    fn policy(max_retries: u32) -> RetryPolicy {
        RetryPolicy {
            max_retries,
            initial: Duration::from_millis(10),
            max: Duration::from_millis(10),
            jitter: 0.0,
            max_reset_wait: Duration::from_secs(1),
            auto_resume: true,
            hand_over_after: None,
        }
    }

    fn limited(resets_at_epoch_s: Option<u64>) -> RateLimitInfo {
        RateLimitInfo {
            resets_at_epoch_s,
            retry_after_ms: None,
            rejected: true,
            message: "limited".into(),
        }
    }

    #[test]
    fn a_rate_limit_resumes_what_the_attempt_captured_and_spends_a_retry() {
        let mut progress = Progress::new(None, Some(1), 0);
        let captured = id("captured-1");
        let next = step(
            AttemptClass::RateLimited(limited(None)),
            Some(&captured),
            &mut progress,
            &policy(1),
        );
        assert!(matches!(next, Step::Backoff { .. }), "{next:?}");
        assert_eq!(progress.resume, Some(captured));
        assert!(progress.continuing);
        assert_eq!(progress.retries_used, 1);
        let last = step(
            AttemptClass::RateLimited(limited(Some(7))),
            None,
            &mut progress,
            &policy(1),
        );
        assert_eq!(
            last,
            Step::Done(Verdict::RateLimited {
                resets_at_epoch_s: Some(7),
                auto_resume_off: false,
            })
        );
    }

    #[test]
    fn with_auto_resume_off_a_long_limit_stops_and_a_short_one_still_waits() {
        let off = RetryPolicy {
            max_reset_wait: Duration::from_secs(6 * 3600),
            auto_resume: false,
            ..policy(3)
        };
        let now_s = SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let captured = id("captured-1");
        let mut progress = Progress::new(None, Some(1), 0);
        let short = step(
            AttemptClass::RateLimited(limited(Some(now_s + 30))),
            Some(&captured),
            &mut progress,
            &off,
        );
        assert!(matches!(short, Step::Backoff { .. }), "{short:?}");
        let reset = now_s + 2 * 3600;
        let long = step(
            AttemptClass::RateLimited(limited(Some(reset))),
            Some(&captured),
            &mut progress,
            &off,
        );
        assert_eq!(
            long,
            Step::Done(Verdict::RateLimited {
                resets_at_epoch_s: Some(reset),
                auto_resume_off: true,
            })
        );
        assert_eq!(progress.last_session, Some(captured));
        // On, the same limit is waited for.
        let on = RetryPolicy {
            auto_resume: true,
            ..off
        };
        let waited = step(
            AttemptClass::RateLimited(limited(Some(reset))),
            None,
            &mut Progress::new(None, Some(1), 0),
            &on,
        );
        assert!(matches!(waited, Step::Backoff { .. }), "{waited:?}");
    }

    #[test]
    fn a_limit_past_the_hand_over_wait_stops_even_with_auto_resume_on() {
        let handing = RetryPolicy {
            max_reset_wait: Duration::from_secs(6 * 3600),
            hand_over_after: Some(Duration::from_secs(60)),
            ..policy(3)
        };
        assert!(handing.auto_resume);
        let now_s = SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        // Within the hand-over wait: waited for as usual.
        let short = step(
            AttemptClass::RateLimited(limited(Some(now_s + 20))),
            None,
            &mut Progress::new(None, Some(1), 0),
            &handing,
        );
        assert!(matches!(short, Step::Backoff { .. }), "{short:?}");
        // Past it: the run stops with the reset, for the caller to hand the work over.
        let reset = now_s + 600;
        let long = step(
            AttemptClass::RateLimited(limited(Some(reset))),
            None,
            &mut Progress::new(None, Some(1), 0),
            &handing,
        );
        assert_eq!(
            long,
            Step::Done(Verdict::RateLimited {
                resets_at_epoch_s: Some(reset),
                auto_resume_off: true,
            })
        );
        assert_eq!(
            handing.stop_reason(Duration::from_secs(600)),
            "longer than the caller waits before another provider takes over"
        );
    }

    #[test]
    fn a_stale_session_gets_one_cold_retry_then_ends_naming_the_session() {
        let stale = id("stale-1");
        let mut progress = Progress::new(Some(stale.clone()), Some(1), 0);
        let cold = step(AttemptClass::StaleSession, None, &mut progress, &policy(3));
        assert_eq!(
            cold,
            Step::ColdRetry {
                stale: Some(stale.clone())
            }
        );
        assert_eq!(progress.resume, None);
        progress.resume = Some(stale.clone());
        let done = step(AttemptClass::StaleSession, None, &mut progress, &policy(3));
        assert_eq!(done, Step::Done(Verdict::StaleSession(stale)));
    }
}
