//! What only Claude Code's wording reveals about a failed attempt.
//!
//! The engine already reads the structured evidence: a `result` with `is_error: false` is success,
//! a rejected `rate_limit_event` or `api_error_status` 429/529 is a rate limit. This module adds
//! narrow text patterns, looked for only where the CLI itself speaks: the `result` line's text
//! when it reports an error, and stderr. Assistant prose is never searched, so an agent writing
//! about rate limits does not trip the backoff.
//!
//! Evidence for each pattern (samples recorded with Claude Code 2.1.197 unless said otherwise):
//! - rate limit: `API Error: Request rejected (429) · Rate limited (fakeapi)` (recorded);
//!   `API Error: Server is temporarily limiting requests …` and `API Error: 529 …` (the CLI's
//!   strings; 529 recorded with `api_error_status`); `Claude AI usage limit reached|<epoch>`
//!   (older CLIs, reported by peers).
//! - stale session: `No conversation found with session ID: <id>` on stderr (recorded, also for a
//!   session of another working directory), and `--resume requires a valid session ID` for an id
//!   that is not a UUID (recorded).
//! - model unavailable: NOT recorded. The patterns are the CLI's own strings for an API 404 on the
//!   model: `There's an issue with the selected model (<m>). It may not exist or you may not have
//!   access to it.` and `The model <m> is not available on your <x> deployment.`, plus the raw
//!   API error body (`not_found_error` with `model:`).
//! - refusals (see [`refusal`]): `--dangerously-skip-permissions cannot be used with root/sudo
//!   privileges for security reasons` (recorded), `error: unknown option '--bogus-flag'`
//!   (recorded), `api_error_status` 401/403 (recorded: `Invalid API key · Fix external API key`).

use corral_engine::{AttemptEvidence, Diagnosis};
use corral_ports::RateLimitInfo;

use corral_engine::shorten;

/// How much of the CLI's words a diagnosis keeps, in bytes.
const MESSAGE_KEEP: usize = 1024;

const RATE_LIMIT_PREFIXES: &[&str] = &[
    "API Error: Request rejected (429)",
    "API Error: Server is temporarily limiting requests",
    "API Error: 529",
];
const USAGE_LIMIT: &str = "Claude AI usage limit reached";
const STALE: &[&str] = &[
    "No conversation found with session ID",
    "--resume requires a valid session ID",
];
const ROOT_REFUSAL: &str = "cannot be used with root/sudo privileges";

/// The adapter's reading of a failed attempt.
pub fn diagnose(evidence: &AttemptEvidence<'_>) -> Diagnosis {
    let error_text = terminal_error_text(evidence);
    Diagnosis {
        rate_limit: rate_limit(error_text, evidence.stderr_tail),
        stale_session: [error_text.unwrap_or_default(), evidence.stderr_tail]
            .iter()
            .any(|text| STALE.iter().any(|p| text.contains(p))),
        model_unavailable: model_unavailable(evidence, error_text),
        refused: refusal(evidence),
    }
}

/// Why Claude Code refused to run at all, with what to do about it. Such a refusal is permanent:
/// the same command fails the same way until something outside the run changes.
fn refusal(evidence: &AttemptEvidence<'_>) -> Option<String> {
    let stderr = evidence.stderr_tail;
    if stderr.contains(ROOT_REFUSAL) {
        return Some(
            "Claude Code refuses bypassPermissions as root; run Corral as a normal user, or set \
             IS_SANDBOX=1 in Corral's environment if this machine is a disposable sandbox"
                .to_string(),
        );
    }
    if evidence.terminal.is_none()
        && let Some(line) = stderr
            .lines()
            .find(|l| l.starts_with("error: unknown option") || l.starts_with("error: option"))
    {
        return Some(format!(
            "Claude Code rejected its command line ({}); check providers.claude.extra_args and \
             whether the installed version is a tested one",
            shorten(line.trim(), MESSAGE_KEEP)
        ));
    }
    if let Some(t) = evidence.terminal.filter(|t| t.is_error)
        && let Some(status @ (401 | 403)) = t.api_status
    {
        return Some(format!(
            "Claude Code could not authenticate (HTTP {status}): {}; check ANTHROPIC_API_KEY, \
             CLAUDE_CODE_OAUTH_TOKEN or the login of the account Corral runs as",
            shorten(t.text.as_deref().unwrap_or_default(), MESSAGE_KEEP)
        ));
    }
    None
}

/// The `result` line's text, when it reports an error.
fn terminal_error_text<'a>(evidence: &AttemptEvidence<'a>) -> Option<&'a str> {
    evidence
        .terminal
        .filter(|t| t.is_error)
        .and_then(|t| t.text.as_deref())
}

fn rate_limit(error_text: Option<&str>, stderr: &str) -> Option<RateLimitInfo> {
    let from_result = error_text.filter(|text| {
        let text = text.trim_start();
        RATE_LIMIT_PREFIXES.iter().any(|p| text.starts_with(p)) || text.contains(USAGE_LIMIT)
    });
    let from_stderr = || {
        stderr
            .lines()
            .find(|line| line.contains(USAGE_LIMIT))
            .map(str::trim)
    };
    let text = from_result.or_else(from_stderr)?;
    Some(RateLimitInfo {
        resets_at_epoch_s: usage_limit_reset(text),
        retry_after_ms: None,
        rejected: true,
        message: shorten(text, MESSAGE_KEEP),
    })
}

/// `Claude AI usage limit reached|1735689600` → `1735689600`.
fn usage_limit_reset(text: &str) -> Option<u64> {
    let rest = &text[text.find(USAGE_LIMIT)? + USAGE_LIMIT.len()..];
    let digits: String = rest
        .strip_prefix('|')?
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

fn model_unavailable(evidence: &AttemptEvidence<'_>, error_text: Option<&str>) -> Option<String> {
    let says_so = |text: &str| {
        text.contains("There's an issue with the selected model (")
            || (text.contains("The model ") && text.contains(" is not available on your "))
            || (text.contains("not_found_error") && text.contains("model:"))
    };
    let status_404 = evidence
        .terminal
        .is_some_and(|t| t.is_error && t.api_status == Some(404));
    if let Some(text) = error_text
        && (says_so(text) || (status_404 && text.contains("model")))
    {
        return Some(shorten(text, MESSAGE_KEEP));
    }
    evidence
        .stderr_tail
        .lines()
        .find(|line| says_so(line))
        .map(|line| shorten(line.trim(), MESSAGE_KEEP))
}
