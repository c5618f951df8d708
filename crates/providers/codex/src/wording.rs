//! The Codex CLI's own phrases, shared by the stream parser and the diagnosis: the HTTP status in
//! its error messages, its reconnect notices, and what counts as a rate limit.
//!
//! Codex reports API failures as prose, never as a status field. The recorded shapes (0.171.0):
//! - `unexpected status 401 Unauthorized: <body message>, url: <url>` (also 529, and any status
//!   it does not map to a message of its own);
//! - `exceeded retry limit, last status: 429 Too Many Requests` (429 is not retried per request;
//!   each stream attempt gives up at once and the stream reconnects);
//! - `Reconnecting... 2/5 (<one of the above>)` while it reconnects the stream;
//! - `We’re currently experiencing high demand, which may cause temporary errors.` for a 500 (the
//!   status is lost: a server error, not a rate limit).
//!
//! Not recorded, from Codex's strings: `You’ve hit your usage limit. … try again at <local time>`
//! (ChatGPT plans), the API body type `usage_limit_reached` with `resets_at` (epoch seconds) and
//! `resets_in_seconds`, `Selected model is at capacity. Please try a different model.` (overload)
//! and `Quota exceeded. Check your plan and billing details.` (billing: permanent, not a limit that
//! resets).

use corral_engine::shorten;
use corral_ports::RateLimitInfo;

/// How much of the CLI's words a rate-limit report keeps, in bytes.
const MESSAGE_KEEP: usize = 1024;

/// Where Codex puts an HTTP status in its messages.
const STATUS_MARKERS: &[&str] = &["unexpected status ", "last status: "];
/// Words that mean the account's usage window is spent; it comes back at the reset.
const USAGE_LIMIT: &[&str] = &["usage_limit_reached", "hit your usage limit"];
/// Overload wordings that behave like a rate limit: wait, then try again.
const OVERLOADED: &[&str] = &["Selected model is at capacity"];
/// Billing, not a rate limit: no reset brings the request through.
pub(crate) const QUOTA: &[&str] = &[
    "Quota exceeded",
    "insufficient_quota",
    "exceeded your current quota",
];

/// The HTTP status a Codex error message names, if it names one.
pub(crate) fn http_status(text: &str) -> Option<u16> {
    STATUS_MARKERS.iter().find_map(|marker| {
        let at = text.find(marker)? + marker.len();
        let digits: String = text[at..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        digits
            .parse::<u16>()
            .ok()
            .filter(|s| (100..=599).contains(s))
    })
}

/// A reconnect notice: `Reconnecting... <attempt>/<max> (<cause>)`.
pub(crate) struct Reconnect<'a> {
    pub attempt: u32,
    pub max: u32,
    pub cause: &'a str,
}

/// Reads a reconnect notice; `None` for any other message.
pub(crate) fn reconnect(message: &str) -> Option<Reconnect<'_>> {
    let rest = message.strip_prefix("Reconnecting... ")?;
    let (counts, cause) = rest.split_once(' ').unwrap_or((rest, ""));
    let (attempt, max) = counts.split_once('/')?;
    let cause = cause.trim();
    let cause = cause
        .strip_prefix('(')
        .and_then(|c| c.strip_suffix(')'))
        .unwrap_or(cause);
    Some(Reconnect {
        attempt: attempt.parse().ok()?,
        max: max.parse().ok()?,
        cause,
    })
}

/// A rate limit, when an error message of the CLI says so: HTTP 429 or 529 (overloaded), a spent
/// usage window, or a model at capacity. A spent quota (billing) is not one. The reset time is
/// read only from a structured body the message quotes (`"resets_at": <epoch s>`,
/// `"resets_in_seconds": <s>`): the prose `try again at 3:04 PM` is local time without a date or
/// zone, and guessing it could oversleep by a day.
pub(crate) fn rate_limit(text: &str) -> Option<RateLimitInfo> {
    if QUOTA.iter().any(|q| text.contains(q)) {
        return None;
    }
    let limited = matches!(http_status(text), Some(429 | 529))
        || USAGE_LIMIT.iter().any(|p| text.contains(p))
        || OVERLOADED.iter().any(|p| text.contains(p));
    limited.then(|| RateLimitInfo {
        resets_at_epoch_s: json_number(text, "resets_at"),
        retry_after_ms: json_number(text, "resets_in_seconds").map(|s| s.saturating_mul(1000)),
        rejected: true,
        message: shorten(text.trim(), MESSAGE_KEEP),
    })
}

/// The whole number after `"key":` in a JSON body quoted inside a message.
fn json_number(text: &str, key: &str) -> Option<u64> {
    let needle = format!("\"{key}\"");
    let at = text.find(&needle)? + needle.len();
    let rest = text[at..].trim_start().strip_prefix(':')?.trim_start();
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}
