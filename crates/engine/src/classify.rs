//! The exit classification ladder: how one attempt ended, decided in a fixed order.
//!
//! cancelled → success from the terminal event (exit code 0 only for a CLI that has no terminal
//! event it always prints) → rate limit → model unavailable → refused (authentication, rejected
//! flags; a refusal by Corral's own egress proxy wins over the CLI's reading of it) → failed but
//! `signals.json` present (recovered) → stale session → refused by the egress proxy → watchdog
//! kills (idle, wall clock) → crash. Spawn errors and refusals before the spawn are decided
//! before any of this.

use corral_ports::RateLimitInfo;

use crate::adapter::{Diagnosis, TerminalSummary};
use crate::log::KillReason;
use corral_process::spawn::ExitInfo;

/// One attempt's class.
#[derive(Debug, Clone, PartialEq)]
pub enum AttemptClass {
    /// The caller cancelled.
    Cancelled,
    /// The CLI reported success.
    Succeeded,
    /// Rate limited; the info is the best report seen.
    RateLimited(RateLimitInfo),
    /// The model is unavailable.
    ModelUnavailable(String),
    /// The CLI refused; retrying cannot help.
    Refused(String),
    /// Corral's egress proxy refused a connection of a failed attempt: the cause, whatever the
    /// CLI made of the 403 it got (a CLI reads it as failed authentication).
    EgressRefused {
        /// `host:port`.
        target: String,
        /// The proxy's reason, and the other targets it refused.
        detail: String,
    },
    /// Failed, but `signals.json` is there.
    Recovered,
    /// The resumed session was not found.
    StaleSession,
    /// Killed for printing nothing.
    IdleTimeout,
    /// Killed at the wall-clock limit.
    WallTimeout,
    /// The tree went over one of its limits (`[limits]`) and the sandbox's guard ended it.
    /// Not retried: the same work meets the same limit.
    LimitExceeded(corral_process::Breach),
    /// Anything else.
    Crashed,
}

impl AttemptClass {
    /// For the log.
    pub fn as_str(&self) -> &'static str {
        match self {
            AttemptClass::Cancelled => "cancelled",
            AttemptClass::Succeeded => "succeeded",
            AttemptClass::RateLimited(_) => "rate-limited",
            AttemptClass::ModelUnavailable(_) => "model-unavailable",
            AttemptClass::Refused(_) => "refused",
            AttemptClass::EgressRefused { .. } => "egress-refused",
            AttemptClass::Recovered => "recovered",
            AttemptClass::StaleSession => "stale-session",
            AttemptClass::IdleTimeout => "idle-timeout",
            AttemptClass::WallTimeout => "wall-timeout",
            AttemptClass::LimitExceeded(_) => "limit-exceeded",
            AttemptClass::Crashed => "crashed",
        }
    }
}

/// The facts one attempt produced.
#[derive(Debug, Clone, Copy)]
pub struct ClassifyInput<'a> {
    /// Why the supervisor ended the group, if it did.
    pub killed_by: Option<KillReason>,
    /// The terminal event, if seen.
    pub terminal: Option<&'a TerminalSummary>,
    /// How the leader ended.
    pub exit: Option<ExitInfo>,
    /// The adapter's reading.
    pub diagnosis: &'a Diagnosis,
    /// Rate-limit events from the stream.
    pub rate_limit_events: &'a [RateLimitInfo],
    /// Whether `signals.json` was written during the run.
    pub signals_present: bool,
    /// Whether the attempt resumed a session.
    pub resumed: bool,
    /// The connection Corral's egress proxy refused during the attempt that its failure points
    /// at (`host:port`, and what the proxy said): one whose 403 body the CLI echoed, or any when
    /// the CLI's failure was an HTTP 403. `None` when none explains it.
    pub egress_refused: Option<&'a (String, String)>,
    /// Whether the CLI always ends a completed run with its terminal event
    /// ([`corral_ports::Capabilities::always_terminal_event`]): then exit code 0 without one is
    /// a failure, not a success.
    pub terminal_expected: bool,
    /// The wait the CLI announced before its last own retry of a 429 or 529: the retry-after
    /// of a rate limit that reports neither a reset time nor a retry-after of its own.
    pub cli_retry_after_ms: Option<u64>,
    /// The limit the tree went over, for which the sandbox's guard ended it.
    pub limit_breach: Option<&'a corral_process::Breach>,
}

/// Classifies one attempt.
pub fn classify(input: &ClassifyInput<'_>) -> AttemptClass {
    let watchdog = matches!(
        input.killed_by,
        Some(KillReason::IdleTimeout | KillReason::WallTimeout | KillReason::RateLimited)
    );
    if input.killed_by == Some(KillReason::Cancelled) {
        return AttemptClass::Cancelled;
    }
    // Ended by the guard at its limit, whatever the CLI made of it (a tool killed out of
    // memory reads to the model as a failed command, and its tree was then ended whole).
    if let Some(breach) = input.limit_breach {
        return AttemptClass::LimitExceeded(breach.clone());
    }
    match input.terminal {
        Some(t) if !t.is_error => return AttemptClass::Succeeded,
        Some(_) => {}
        None if !watchdog
            && !input.terminal_expected
            && input.exit.is_some_and(|e| e.success()) =>
        {
            return AttemptClass::Succeeded;
        }
        None => {}
    }
    if let Some(info) = rate_limit(input) {
        return AttemptClass::RateLimited(info);
    }
    if let Some(message) = &input.diagnosis.model_unavailable {
        return AttemptClass::ModelUnavailable(message.clone());
    }
    let egress_refused = || {
        input
            .egress_refused
            .map(|(target, detail)| AttemptClass::EgressRefused {
                target: target.clone(),
                detail: detail.clone(),
            })
    };
    if let Some(message) = &input.diagnosis.refused {
        // The CLI's "could not authenticate (HTTP 403)" after the proxy refused its endpoint is
        // the proxy's 403, not the account's.
        return egress_refused().unwrap_or_else(|| AttemptClass::Refused(message.clone()));
    }
    if input.signals_present {
        return AttemptClass::Recovered;
    }
    if input.resumed && input.diagnosis.stale_session {
        return AttemptClass::StaleSession;
    }
    if let Some(class) = egress_refused() {
        return class;
    }
    match input.killed_by {
        Some(KillReason::IdleTimeout) => AttemptClass::IdleTimeout,
        Some(KillReason::WallTimeout) => AttemptClass::WallTimeout,
        Some(KillReason::Cancelled)
        | Some(KillReason::LingeredAfterResult)
        | Some(KillReason::LeftoversAfterExit)
        | Some(KillReason::RateLimited)
        | None => AttemptClass::Crashed,
    }
}

/// Structured evidence first: the adapter's diagnosis, a rejected rate-limit event, then an HTTP
/// 429/529 on the terminal event. One that says neither when the limit resets nor how long to
/// wait takes the wait the CLI last announced for its own retry: the API's `retry-after`, as
/// far as the CLI let it through (its error result does not carry it).
fn rate_limit(input: &ClassifyInput<'_>) -> Option<RateLimitInfo> {
    let mut info = reported_rate_limit(input)?;
    if info.resets_at_epoch_s.is_none() && info.retry_after_ms.is_none() {
        info.retry_after_ms = input.cli_retry_after_ms;
    }
    Some(info)
}

fn reported_rate_limit(input: &ClassifyInput<'_>) -> Option<RateLimitInfo> {
    if let Some(info) = &input.diagnosis.rate_limit {
        return Some(info.clone());
    }
    if let Some(info) = input.rate_limit_events.iter().rev().find(|i| i.rejected) {
        return Some(info.clone());
    }
    if let Some(t) = input.terminal
        && matches!(t.api_status, Some(429 | 529))
    {
        return Some(RateLimitInfo {
            resets_at_epoch_s: None,
            retry_after_ms: None,
            rejected: true,
            message: t.text.clone().unwrap_or_default(),
        });
    }
    // Ended by the engine while the CLI waited out a long limit of its own (auto-resume off):
    // its last announced wait is all there is.
    (input.killed_by == Some(KillReason::RateLimited)).then(|| RateLimitInfo {
        resets_at_epoch_s: None,
        retry_after_ms: input.cli_retry_after_ms,
        rejected: true,
        message: "the CLI was waiting for the account's rate limit to pass".to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input<'a>(d: &'a Diagnosis) -> ClassifyInput<'a> {
        ClassifyInput {
            killed_by: None,
            terminal: None,
            exit: Some(ExitInfo {
                code: Some(1),
                signal: None,
            }),
            diagnosis: d,
            rate_limit_events: &[],
            signals_present: false,
            resumed: false,
            egress_refused: None,
            terminal_expected: false,
            cli_retry_after_ms: None,
            limit_breach: None,
        }
    }

    #[test]
    fn a_limit_breach_wins_over_everything_but_a_cancel() {
        let d = Diagnosis {
            refused: Some("exit 137".into()),
            ..Diagnosis::default()
        };
        let breach = corral_process::Breach {
            limit: corral_process::Limit::Memory,
            cap: 64 << 20,
            peak: Some(64 << 20),
            what: "the kernel killed 1 process(es) out of memory".into(),
        };
        let hog = ClassifyInput {
            limit_breach: Some(&breach),
            signals_present: true,
            ..input(&d)
        };
        assert_eq!(classify(&hog), AttemptClass::LimitExceeded(breach.clone()));
        let cancelled = ClassifyInput {
            killed_by: Some(KillReason::Cancelled),
            ..hog
        };
        assert_eq!(classify(&cancelled), AttemptClass::Cancelled);
    }

    #[test]
    fn terminal_success_wins_over_a_non_zero_exit_and_a_linger_kill() {
        let d = Diagnosis::default();
        let ok = TerminalSummary {
            is_error: false,
            text: None,
            api_status: None,
        };
        let i = ClassifyInput {
            terminal: Some(&ok),
            killed_by: Some(KillReason::LingeredAfterResult),
            ..input(&d)
        };
        assert_eq!(classify(&i), AttemptClass::Succeeded);
    }

    #[test]
    fn a_spawn_ended_for_a_limit_is_rate_limited_with_the_wait_the_cli_announced() {
        let d = Diagnosis::default();
        let i = ClassifyInput {
            killed_by: Some(KillReason::RateLimited),
            exit: None,
            cli_retry_after_ms: Some(7_200_000),
            ..input(&d)
        };
        let class = classify(&i);
        let AttemptClass::RateLimited(info) = &class else {
            panic!("{class:?}");
        };
        assert_eq!(info.retry_after_ms, Some(7_200_000));
        assert!(info.rejected);
    }

    #[test]
    fn cancellation_comes_first() {
        let d = Diagnosis::default();
        let ok = TerminalSummary {
            is_error: false,
            text: None,
            api_status: None,
        };
        let i = ClassifyInput {
            terminal: Some(&ok),
            killed_by: Some(KillReason::Cancelled),
            ..input(&d)
        };
        assert_eq!(classify(&i), AttemptClass::Cancelled);
    }

    #[test]
    fn exit_zero_without_terminal_is_success_unless_a_watchdog_fired() {
        let d = Diagnosis::default();
        let zero = Some(ExitInfo {
            code: Some(0),
            signal: None,
        });
        assert_eq!(
            classify(&ClassifyInput {
                exit: zero,
                ..input(&d)
            }),
            AttemptClass::Succeeded
        );
        let i = ClassifyInput {
            exit: zero,
            killed_by: Some(KillReason::IdleTimeout),
            ..input(&d)
        };
        assert_eq!(classify(&i), AttemptClass::IdleTimeout);
    }

    #[test]
    fn exit_zero_without_the_terminal_event_a_cli_always_prints_is_a_failure() {
        let d = Diagnosis::default();
        let i = ClassifyInput {
            exit: Some(ExitInfo {
                code: Some(0),
                signal: None,
            }),
            terminal_expected: true,
            ..input(&d)
        };
        assert_eq!(classify(&i), AttemptClass::Crashed);
        // The agent's work is kept when it wrote its signals.
        let i = ClassifyInput {
            signals_present: true,
            ..i
        };
        assert_eq!(classify(&i), AttemptClass::Recovered);
    }

    #[test]
    fn rate_limit_from_terminal_status_beats_recovered() {
        let d = Diagnosis::default();
        let t = TerminalSummary {
            is_error: true,
            text: Some("API Error 429".into()),
            api_status: Some(429),
        };
        let i = ClassifyInput {
            terminal: Some(&t),
            signals_present: true,
            ..input(&d)
        };
        assert!(matches!(classify(&i), AttemptClass::RateLimited(_)));
    }

    #[test]
    fn a_rate_limit_without_a_wait_of_its_own_takes_the_clis_last_announced_retry_delay() {
        let d = Diagnosis::default();
        let t = TerminalSummary {
            is_error: true,
            text: Some("API Error: Request rejected (429)".into()),
            api_status: Some(429),
        };
        let i = ClassifyInput {
            terminal: Some(&t),
            cli_retry_after_ms: Some(2481),
            ..input(&d)
        };
        let AttemptClass::RateLimited(info) = classify(&i) else {
            panic!("not a rate limit");
        };
        assert_eq!(info.retry_after_ms, Some(2481));
        // A reset time the CLI reported stands: the retry delay does not replace it.
        let reset = [RateLimitInfo {
            resets_at_epoch_s: Some(7),
            retry_after_ms: None,
            rejected: true,
            message: "limited".into(),
        }];
        let i = ClassifyInput {
            rate_limit_events: &reset,
            ..i
        };
        let AttemptClass::RateLimited(info) = classify(&i) else {
            panic!("not a rate limit");
        };
        assert_eq!(
            (info.resets_at_epoch_s, info.retry_after_ms),
            (Some(7), None)
        );
    }

    #[test]
    fn a_warning_is_not_a_rate_limit() {
        let d = Diagnosis::default();
        let warn = [RateLimitInfo {
            resets_at_epoch_s: None,
            retry_after_ms: None,
            rejected: false,
            message: "80% used".into(),
        }];
        let i = ClassifyInput {
            rate_limit_events: &warn,
            ..input(&d)
        };
        assert_eq!(classify(&i), AttemptClass::Crashed);
    }

    #[test]
    fn signals_present_recovers_a_failure() {
        let d = Diagnosis::default();
        assert_eq!(
            classify(&ClassifyInput {
                signals_present: true,
                ..input(&d)
            }),
            AttemptClass::Recovered
        );
    }

    #[test]
    fn stale_session_only_counts_when_resuming() {
        let d = Diagnosis {
            stale_session: true,
            ..Diagnosis::default()
        };
        assert_eq!(classify(&input(&d)), AttemptClass::Crashed);
        assert_eq!(
            classify(&ClassifyInput {
                resumed: true,
                ..input(&d)
            }),
            AttemptClass::StaleSession
        );
    }

    #[test]
    fn a_refusal_is_permanent_even_with_signals_present() {
        let d = Diagnosis {
            refused: Some("bad key".into()),
            ..Diagnosis::default()
        };
        let i = ClassifyInput {
            signals_present: true,
            ..input(&d)
        };
        assert_eq!(classify(&i), AttemptClass::Refused("bad key".into()));
    }

    #[test]
    fn the_egress_proxy_refusal_wins_over_the_clis_authentication_reading() {
        let d = Diagnosis {
            refused: Some("Codex could not authenticate (HTTP 403)".into()),
            ..Diagnosis::default()
        };
        let refused = ("corp.example:8443".to_string(), "refused it".to_string());
        let want = AttemptClass::EgressRefused {
            target: "corp.example:8443".into(),
            detail: "refused it".into(),
        };
        let i = ClassifyInput {
            egress_refused: Some(&refused),
            ..input(&d)
        };
        assert_eq!(classify(&i), want);
        // A plain crash or a watchdog kill after a refusal is the refusal too.
        let plain = Diagnosis::default();
        for killed_by in [None, Some(KillReason::IdleTimeout)] {
            let i = ClassifyInput {
                egress_refused: Some(&refused),
                killed_by,
                ..input(&plain)
            };
            assert_eq!(classify(&i), want, "{killed_by:?}");
        }
        // What the API answered, and work that was done, say more than a refusal on the side.
        let limited = Diagnosis {
            model_unavailable: Some("no such model".into()),
            ..Diagnosis::default()
        };
        let i = ClassifyInput {
            egress_refused: Some(&refused),
            ..input(&limited)
        };
        assert_eq!(
            classify(&i),
            AttemptClass::ModelUnavailable("no such model".into())
        );
        let i = ClassifyInput {
            egress_refused: Some(&refused),
            signals_present: true,
            ..input(&plain)
        };
        assert_eq!(classify(&i), AttemptClass::Recovered);
    }

    #[test]
    fn model_unavailable_is_its_own_class() {
        let d = Diagnosis {
            model_unavailable: Some("no such model".into()),
            ..Diagnosis::default()
        };
        assert_eq!(
            classify(&input(&d)),
            AttemptClass::ModelUnavailable("no such model".into())
        );
    }
}
