//! The rate-limit retry schedule: exponential backoff with jitter and a cap, or a sleep until the
//! reset time when the CLI reported one.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use corral_ports::RateLimitInfo;

/// How rate-limited attempts are retried.
#[derive(Debug, Clone, PartialEq)]
pub struct RetryPolicy {
    /// Retries after the first attempt (0 to 10).
    pub max_retries: u32,
    /// The first backoff.
    pub initial: Duration,
    /// The largest backoff.
    pub max: Duration,
    /// Jitter as a fraction of the delay, applied both ways (0.2 = ±20 %).
    pub jitter: f64,
    /// The longest sleep until a reported reset time; a later reset gives up instead.
    pub max_reset_wait: Duration,
    /// Whether a long limit (a wait of [`LONG_LIMIT`] or more) is waited out and the session
    /// resumed at its end (`retry.auto_resume`, default on). Off, the run stops as soon as it
    /// learns of one, so that a person decides when to go on.
    pub auto_resume: bool,
    /// A limit whose wait is longer than this stops the run at once, whatever `auto_resume`
    /// says: the caller has another provider to go on with (a sprint role's failover,
    /// `failover_after_ms`) and would rather hand the work over than wait. `None`: no
    /// hand-over, the run waits as `auto_resume` says.
    pub hand_over_after: Option<Duration>,
}

/// A rate limit whose wait reaches this is long: an account's usage window rather than a burst.
/// Claude Code itself gives up on a `retry-after` above a minute; Corral's own backoff (1, 2, 4
/// minutes by default) stays below it, so only a reported reset, a long retry-after or a CLI
/// that waits for the reset itself make a limit long.
pub const LONG_LIMIT: Duration = Duration::from_secs(300);

impl RetryPolicy {
    /// Whether a wait of `wait` stops the run instead: a long limit with auto-resume off, or a
    /// wait past [`RetryPolicy::hand_over_after`].
    pub fn stops_at(&self, wait: Duration) -> bool {
        (!self.auto_resume && wait >= LONG_LIMIT) || self.hand_over_after.is_some_and(|h| wait > h)
    }

    /// Why a wait that [`RetryPolicy::stops_at`] stops the run, for the run's record.
    pub fn stop_reason(&self, wait: Duration) -> &'static str {
        if self.hand_over_after.is_some_and(|h| wait > h) {
            "longer than the caller waits before another provider takes over"
        } else {
            "retry.auto_resume is off"
        }
    }
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_retries: 3,
            initial: Duration::from_millis(60_000),
            max: Duration::from_millis(900_000),
            jitter: 0.2,
            max_reset_wait: Duration::from_secs(6 * 3600),
            auto_resume: true,
            hand_over_after: None,
        }
    }
}

/// Where a wait came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitBasis {
    /// Exponential backoff.
    Backoff,
    /// Until the reported reset time.
    ResetTime,
    /// The CLI's retry-after hint.
    RetryAfter,
}

impl WaitBasis {
    /// For the log.
    pub fn as_str(self) -> &'static str {
        match self {
            WaitBasis::Backoff => "exponential backoff",
            WaitBasis::ResetTime => "until the reported reset time",
            WaitBasis::RetryAfter => "the CLI's retry-after hint",
        }
    }
}

impl RetryPolicy {
    /// The wait before retry number `retry` (1-based). `None` when the reported reset lies
    /// further away than `max_reset_wait`: waiting that long unattended is worse than reporting.
    pub fn wait(
        &self,
        retry: u32,
        info: Option<&RateLimitInfo>,
        now: SystemTime,
        rng: &mut fastrand::Rng,
    ) -> Option<(Duration, WaitBasis)> {
        if let Some(reset) = info.and_then(|i| i.resets_at_epoch_s) {
            let now_s = now
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_secs_f64())
                .unwrap_or(0.0);
            // One extra second so the retry lands after the reset, not on its edge.
            let wait = Duration::from_secs_f64((reset as f64 - now_s).max(0.0) + 1.0);
            if wait > self.max_reset_wait {
                return None;
            }
            return Some((wait, WaitBasis::ResetTime));
        }
        if let Some(ms) = info.and_then(|i| i.retry_after_ms) {
            return Some((
                Duration::from_millis(ms).min(self.max),
                WaitBasis::RetryAfter,
            ));
        }
        let exp = retry.saturating_sub(1).min(30);
        let base = self.initial.as_secs_f64() * f64::from(1u32 << exp.min(20));
        let capped = base.min(self.max.as_secs_f64());
        let spread = self.jitter.clamp(0.0, 1.0);
        let factor = 1.0 + spread * (rng.f64() * 2.0 - 1.0);
        Some((
            Duration::from_secs_f64((capped * factor).max(0.0)),
            WaitBasis::Backoff,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> RetryPolicy {
        RetryPolicy {
            max_retries: 5,
            initial: Duration::from_secs(10),
            max: Duration::from_secs(60),
            jitter: 0.2,
            max_reset_wait: Duration::from_secs(3600),
            auto_resume: true,
            hand_over_after: None,
        }
    }

    #[test]
    fn grows_exponentially_within_jitter_and_cap() {
        let mut rng = fastrand::Rng::with_seed(7);
        let now = SystemTime::now();
        for (retry, base) in [(1, 10.0), (2, 20.0), (3, 40.0), (4, 60.0), (9, 60.0)] {
            for _ in 0..50 {
                let (d, basis) = policy().wait(retry, None, now, &mut rng).unwrap();
                assert_eq!(basis, WaitBasis::Backoff);
                let s = d.as_secs_f64();
                assert!(
                    s >= base * 0.8 - 1e-9 && s <= base * 1.2 + 1e-9,
                    "retry {retry}: {s}"
                );
            }
        }
    }

    #[test]
    fn jitter_spreads_both_ways() {
        let mut rng = fastrand::Rng::with_seed(1);
        let waits: Vec<f64> = (0..200)
            .map(|_| {
                policy()
                    .wait(1, None, SystemTime::now(), &mut rng)
                    .unwrap()
                    .0
                    .as_secs_f64()
            })
            .collect();
        assert!(waits.iter().any(|w| *w < 9.5) && waits.iter().any(|w| *w > 10.5));
    }

    #[test]
    fn sleeps_until_a_known_reset_and_gives_up_on_a_far_one() {
        let now = UNIX_EPOCH + Duration::from_secs(1_000_000);
        let info = |reset| RateLimitInfo {
            resets_at_epoch_s: Some(reset),
            retry_after_ms: None,
            rejected: true,
            message: String::new(),
        };
        let mut rng = fastrand::Rng::with_seed(1);
        let (d, basis) = policy()
            .wait(1, Some(&info(1_000_030)), now, &mut rng)
            .unwrap();
        assert_eq!((d, basis), (Duration::from_secs(31), WaitBasis::ResetTime));
        assert_eq!(
            policy().wait(1, Some(&info(1_000_000 + 7200)), now, &mut rng),
            None
        );
        let (d, _) = policy()
            .wait(1, Some(&info(999_000)), now, &mut rng)
            .unwrap();
        assert_eq!(
            d,
            Duration::from_secs(1),
            "a reset in the past retries promptly"
        );
    }
}
