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
//! (ChatGPT plans; the time as `3:04 PM` on the reset's own day, else `Jan 1st, 2027 9:00 AM`), the API body type `usage_limit_reached` with `resets_at` (epoch seconds) and
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
/// read from a structured body the message quotes (`"resets_at": <epoch s>`,
/// `"resets_in_seconds": <s>`), else from Codex's own prose (`try again at 3:04 PM`, see
/// [`prose_reset`]).
pub(crate) fn rate_limit(text: &str) -> Option<RateLimitInfo> {
    rate_limit_at(text, &jiff::Zoned::now())
}

/// [`rate_limit`] as read at `now`, in `now`'s time zone (the local one: Codex's, as Corral hands
/// the CLI its `TZ`).
pub(crate) fn rate_limit_at(text: &str, now: &jiff::Zoned) -> Option<RateLimitInfo> {
    if QUOTA.iter().any(|q| text.contains(q)) {
        return None;
    }
    let limited = matches!(http_status(text), Some(429 | 529))
        || USAGE_LIMIT.iter().any(|p| text.contains(p))
        || OVERLOADED.iter().any(|p| text.contains(p));
    limited.then(|| RateLimitInfo {
        resets_at_epoch_s: json_number(text, "resets_at").or_else(|| prose_reset(text, now)),
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

/// The reset Codex names in its usage-limit prose, in Unix seconds. Codex 0.171 formats the
/// reset in the local time zone, to the minute: `try again at 3:04 PM.` when it falls on today's
/// date, `try again at Jan 1st, 2027 9:00 AM.` otherwise. A time without a date is its next
/// occurrence (today's, or tomorrow's once it has passed: a message read just after midnight).
/// The minute is rounded up (Codex cut the seconds off), so that the retry lands after the reset.
/// `None` when the text has no such phrase, or one that does not read as either form.
pub(crate) fn prose_reset(text: &str, now: &jiff::Zoned) -> Option<u64> {
    const AT: &str = "try again at ";
    let rest = &text[text.find(AT)? + AT.len()..];
    // The phrase runs to the line's end (or the quote closing it in a JSON line), its full stop cut.
    let end = rest.find(['\n', '"']).unwrap_or(rest.len());
    let phrase = rest[..end].trim().trim_end_matches('.').trim();
    let zone = now.time_zone().clone();
    let at =
        if let Ok(time) = jiff::fmt::strtime::parse("%I:%M %p", phrase).and_then(|t| t.to_time()) {
            let today = now.date().to_datetime(time).to_zoned(zone.clone()).ok()?;
            if today.timestamp() > now.timestamp() {
                today
            } else {
                let tomorrow = now.date().tomorrow().ok()?;
                tomorrow.to_datetime(time).to_zoned(zone).ok()?
            }
        } else {
            // `Jan 1st, 2027 9:00 AM`: the day's ordinal suffix is not a strftime field.
            let plain = strip_ordinal(phrase)?;
            let datetime = jiff::fmt::strtime::parse("%b %d, %Y %I:%M %p", &plain)
                .and_then(|t| t.to_datetime())
                .ok()?;
            datetime.to_zoned(zone).ok()?
        };
    let seconds = at.timestamp().as_second().checked_add(60)?;
    u64::try_from(seconds).ok()
}

/// `Jan 1st, 2027 9:00 AM` as `Jan 1, 2027 9:00 AM`; `None` when the day has no ordinal suffix.
fn strip_ordinal(phrase: &str) -> Option<String> {
    let (month, rest) = phrase.split_once(' ')?;
    let (day, rest) = rest.split_once(',')?;
    let digits = day.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let suffix = &day[digits.len()..];
    if digits.is_empty() || !["st", "nd", "rd", "th"].contains(&suffix) {
        return None;
    }
    Some(format!("{month} {digits},{rest}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> jiff::Zoned {
        text.parse().unwrap()
    }

    #[test]
    fn codexs_same_day_reset_is_its_next_occurrence_rounded_up_to_the_minute() {
        let prose = "You’ve hit your usage limit. Upgrade to Pro (https://chatgpt.com/explore/pro), or try again at 3:04 PM.";
        let now = at("2026-12-07T14:10:30+01:00[Europe/Paris]");
        let reset = prose_reset(prose, &now).unwrap();
        let expected = at("2026-12-07T15:05:00+01:00[Europe/Paris]")
            .timestamp()
            .as_second();
        assert_eq!(reset, u64::try_from(expected).unwrap());
        // Read after that time has passed (just after midnight, say): tomorrow's.
        let late = at("2026-12-07T15:30:00+01:00[Europe/Paris]");
        let next = at("2026-12-08T15:05:00+01:00[Europe/Paris]")
            .timestamp()
            .as_second();
        assert_eq!(
            prose_reset(prose, &late),
            Some(u64::try_from(next).unwrap())
        );
        // The message the rate limit carries has it too.
        let info = rate_limit_at(prose, &now).unwrap();
        assert_eq!(info.resets_at_epoch_s, Some(reset));
    }

    #[test]
    fn codexs_reset_on_another_day_carries_its_date() {
        let prose = "You’ve hit your usage limit. Visit https://chatgpt.com/settings/usage to purchase more credits or try again at Jan 1st, 2027 9:00 AM.";
        let now = at("2026-12-07T14:10:30-05:00[America/New_York]");
        let expected = at("2027-01-01T09:01:00-05:00[America/New_York]")
            .timestamp()
            .as_second();
        assert_eq!(
            prose_reset(prose, &now),
            Some(u64::try_from(expected).unwrap())
        );
        for (day, ok) in [
            ("2nd", true),
            ("3rd", true),
            ("22nd", true),
            ("4", false),
            ("x", false),
        ] {
            let text = format!("try again at Jan {day}, 2027 9:00 AM.");
            assert_eq!(prose_reset(&text, &now).is_some(), ok, "{text}");
        }
    }

    #[test]
    fn a_reset_quoted_in_a_body_wins_and_prose_without_a_time_has_none() {
        let now = at("2026-12-07T14:10:30+00:00[UTC]");
        let body = r#"unexpected status 429: {"error":{"type":"usage_limit_reached","resets_at":1767225600}} try again at 3:04 PM."#;
        assert_eq!(
            rate_limit_at(body, &now).unwrap().resets_at_epoch_s,
            Some(1_767_225_600)
        );
        for text in [
            "You’ve hit your usage limit. Try again later.",
            "You’ve hit your usage limit. try again at noon.",
            "You’ve hit your usage limit. try again at 13:04 PM.",
        ] {
            assert_eq!(
                rate_limit_at(text, &now).unwrap().resets_at_epoch_s,
                None,
                "{text}"
            );
        }
    }
}
