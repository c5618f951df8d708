//! What only Grok's wording reveals about a failed attempt.
//!
//! Grok exits 0 when the model API fails, so the parser already turns its error report into a
//! failed terminal event with the HTTP status, and emits a rejected rate-limit event for a 429.
//! This module reads that terminal event and stderr, and nothing else: the agent's prose is never
//! searched, so an agent writing about rate limits or API keys does not trip anything.
//!
//! Evidence for each pattern (recorded with `@vibe-kit/grok-cli@0.0.34` against a fake model API
//! unless said otherwise):
//! - rate limit: `Sorry, I encountered an error: Grok API error: 429 Rate limited (fakeapi)`, exit
//!   0, after Grok's client tried three times in 3 s (recorded).
//! - refusals: `Grok API error: 401 invalid x-api-key (fakeapi)` (recorded; 403 is taken alike);
//!   `❌ Error: API key required. Set GROK_API_KEY …` on stderr with exit 1 when no key is found
//!   (recorded); `error: unknown option '--bogus-flag'` (recorded) and commander's other usage
//!   errors (`error: option '-p, --prompt <prompt>' argument missing`, recorded); `Error changing
//!   directory to <dir>:` for a `-d` that cannot be entered (Grok's own string).
//! - model unavailable: NOT recorded. An OpenAI-compatible API answers an unknown model with 404
//!   and a message naming the model (`The model x does not exist or your team does not have
//!   access to it`); the pattern is a 404 whose text says `model`, or any error text saying the
//!   model does not exist or was not found.
//! - stale session: never. Grok has no resume, so there is no session to lose.
//! - not a class of their own: 5xx, `Request timed out.`, `Connection error.` and a stalled
//!   response are failures the engine reports as a crash (or an idle timeout), with Grok's text in
//!   the execution log.

use corral_engine::{AttemptEvidence, Diagnosis};
use corral_ports::RateLimitInfo;

use corral_engine::shorten;

/// How much of the CLI's words a diagnosis keeps, in bytes.
const MESSAGE_KEEP: usize = 1024;

const NO_API_KEY: &str = "Error: API key required";
const BAD_DIRECTORY: &str = "Error changing directory to ";
/// Commander's usage errors, at the start of a stderr line.
const USAGE_ERRORS: &[&str] = &[
    "error: unknown option",
    "error: option",
    "error: missing required argument",
    "error: too many arguments",
    "error: unknown command",
];

/// The adapter's reading of a failed attempt.
pub fn diagnose(evidence: &AttemptEvidence<'_>) -> Diagnosis {
    let error_text = terminal_error_text(evidence);
    Diagnosis {
        rate_limit: rate_limit(evidence, error_text),
        stale_session: false,
        model_unavailable: model_unavailable(evidence, error_text),
        refused: refusal(evidence),
    }
}

/// Why Grok refused to run at all, with what to do about it. Such a refusal is permanent: the
/// same command fails the same way until something outside the run changes.
fn refusal(evidence: &AttemptEvidence<'_>) -> Option<String> {
    let stderr = evidence.stderr_tail;
    if stderr.contains(NO_API_KEY) {
        return Some(
            "Grok found no API key; set GROK_API_KEY in Corral's environment (the Grok profile \
             passes GROK_* variables), or apiKey in ~/.grok/user-settings.json of the account \
             Corral runs as"
                .to_string(),
        );
    }
    if let Some(line) = stderr.lines().find(|l| l.contains(BAD_DIRECTORY)) {
        return Some(format!(
            "Grok could not enter the working directory ({}); check the session's cwd",
            shorten(line.trim(), MESSAGE_KEEP)
        ));
    }
    if evidence.terminal.is_none()
        && let Some(line) = stderr
            .lines()
            .find(|l| USAGE_ERRORS.iter().any(|p| l.starts_with(p)))
    {
        return Some(format!(
            "Grok rejected its command line ({}); check providers.grok.args and whether the \
             installed version is a tested one",
            shorten(line.trim(), MESSAGE_KEEP)
        ));
    }
    if let Some(t) = evidence.terminal.filter(|t| t.is_error)
        && let Some(status @ (401 | 403)) = t.api_status
    {
        return Some(format!(
            "Grok could not authenticate (HTTP {status}): {}; check GROK_API_KEY (or apiKey in \
             ~/.grok/user-settings.json) and that GROK_BASE_URL points at the API the key is for",
            shorten(t.text.as_deref().unwrap_or_default(), MESSAGE_KEEP)
        ));
    }
    None
}

/// The terminal event's text, when it reports an error.
fn terminal_error_text<'a>(evidence: &AttemptEvidence<'a>) -> Option<&'a str> {
    evidence
        .terminal
        .filter(|t| t.is_error)
        .and_then(|t| t.text.as_deref())
}

fn rate_limit(evidence: &AttemptEvidence<'_>, error_text: Option<&str>) -> Option<RateLimitInfo> {
    let limited = evidence
        .terminal
        .is_some_and(|t| t.is_error && t.api_status == Some(429));
    limited.then(|| RateLimitInfo {
        resets_at_epoch_s: None,
        retry_after_ms: None,
        rejected: true,
        message: shorten(error_text.unwrap_or_default(), MESSAGE_KEEP),
    })
}

fn model_unavailable(evidence: &AttemptEvidence<'_>, error_text: Option<&str>) -> Option<String> {
    let text = error_text?;
    let lower = text.to_ascii_lowercase();
    let names_model = lower.contains("model");
    let status_404 = evidence.terminal.is_some_and(|t| t.api_status == Some(404));
    let says_missing = lower.contains("does not exist") || lower.contains("not found");
    (names_model && (status_404 || says_missing)).then(|| shorten(text, MESSAGE_KEEP))
}
