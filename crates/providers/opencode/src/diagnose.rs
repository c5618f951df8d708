//! What only OpenCode's wording reveals about a failed attempt.
//!
//! The structured evidence comes first: an `error` line's `statusCode` (429/529 is a rate limit,
//! 401/403 a refusal, 404 about a model an unavailable model), and the rejected rate-limit events
//! the parser made of it. Text patterns are looked for only where OpenCode itself speaks: the text
//! of its `error` line, and stderr with its ANSI colours removed. Assistant prose (`text` parts) is
//! never searched, so an agent writing about rate limits does not trip the backoff.
//!
//! Evidence for each pattern (samples recorded with OpenCode 1.18.33 unless said otherwise):
//! - rate limit: `error` line with `statusCode: 429, isRetryable: true` and a `retry-after`
//!   header (recorded). Also taken from the error text, not recorded: `rate limit`,
//!   `rate_limit`, `too many requests` (providers that stream an error without a status).
//! - stale session: `Error: Session not found` on stderr, ANSI-coloured (recorded, exit 1, no
//!   stdout).
//! - model unavailable: NOT recorded. From OpenCode's source: the error text
//!   `Model not found: <provider>/<model>. Did you mean: …?` (a `session.error` of name
//!   `UnknownError`), an error named `ProviderModelNotFoundError` or `ModelNotFoundError`, and an
//!   API status 404 whose text names the model.
//! - refusals (see [`refusal_in`]): `error` line with `statusCode: 401, isRetryable: false`
//!   (recorded: `invalid x-api-key (fakeapi)`), 403 and `ProviderAuthError` (from the source);
//!   a rejected command line, for which OpenCode prints only its usage on stderr and exits 1
//!   (recorded with `--bogus-flag`: no line names the flag); from the source, not recorded: `You
//!   must provide a message or a command` (empty prompt) and `Failed to change directory to`.

use corral_engine::{AttemptEvidence, Diagnosis};
use corral_ports::RateLimitInfo;

use corral_engine::shorten;

/// How much of the CLI's words a diagnosis keeps, in bytes.
const MESSAGE_KEEP: usize = 1024;

/// Lowercase wordings of a rate limit in an `error` line without a status.
const RATE_LIMIT_WORDS: &[&str] = &["rate limit", "rate_limit", "too many requests"];
const STALE: &str = "Session not found";
const MODEL_NOT_FOUND: &[&str] = &[
    "Model not found: ",
    "ProviderModelNotFoundError",
    "ModelNotFoundError",
];
/// The first line of `opencode run --help`, which OpenCode prints alone when it rejects its
/// command line.
const USAGE_HEADER: &str = "opencode run [message..]";

/// The adapter's reading of a failed attempt.
pub fn diagnose(evidence: &AttemptEvidence<'_>) -> Diagnosis {
    let stderr = strip_ansi(evidence.stderr_tail);
    Diagnosis {
        rate_limit: rate_limit(evidence),
        stale_session: stderr.lines().any(|l| l.contains(STALE)),
        model_unavailable: model_unavailable(evidence, &stderr),
        refused: refusal_in(evidence, &stderr),
    }
}

/// Why OpenCode refused to run at all, with what to do about it (`stderr` with its colours
/// stripped). Such a refusal is permanent: the same command fails the same way until something
/// outside the run changes.
fn refusal_in(evidence: &AttemptEvidence<'_>, stderr: &str) -> Option<String> {
    if let Some(t) = evidence.terminal.filter(|t| t.is_error) {
        let text = t.text.as_deref().unwrap_or_default();
        let auth_status = t.api_status.filter(|s| matches!(s, 401 | 403));
        if auth_status.is_some() || text.starts_with("ProviderAuthError") {
            let status = auth_status
                .map(|s| format!(" (HTTP {s})"))
                .unwrap_or_default();
            return Some(format!(
                "OpenCode could not authenticate with the model's provider{status}: {}; check \
                 the provider's key (ANTHROPIC_API_KEY, OPENAI_API_KEY, OPENROUTER_API_KEY, …) or \
                 `opencode auth login` for the account Corral runs as",
                shorten(text, MESSAGE_KEEP)
            ));
        }
        return None;
    }
    if evidence.terminal.is_some() {
        return None;
    }
    let lines: Vec<&str> = stderr.lines().map(str::trim).collect();
    if lines.iter().any(|l| l.starts_with(USAGE_HEADER)) {
        let named = lines
            .iter()
            .find(|l| {
                l.starts_with("Unknown argument")
                    || l.starts_with("Invalid values")
                    || l.starts_with("Not enough arguments")
                    || l.starts_with("Missing required argument")
            })
            .map(|l| format!(": {}", shorten(l, MESSAGE_KEEP)))
            .unwrap_or_default();
        return Some(format!(
            "OpenCode rejected its command line (it printed its usage{named}); check \
             providers.opencode.extra_args and whether the installed version is a tested one"
        ));
    }
    if let Some(line) = lines
        .iter()
        .find(|l| l.contains("You must provide a message or a command"))
    {
        return Some(format!(
            "OpenCode got no prompt ({}); the prompt is piped on stdin and must not be empty",
            shorten(line, MESSAGE_KEEP)
        ));
    }
    if let Some(line) = lines
        .iter()
        .find(|l| l.contains("Failed to change directory to"))
    {
        return Some(format!(
            "OpenCode could not enter the working directory ({}); check that it exists and is \
             readable by the account Corral runs as",
            shorten(line, MESSAGE_KEEP)
        ));
    }
    None
}

/// The `error` line's text, when the attempt ended with one.
fn error_text<'a>(evidence: &AttemptEvidence<'a>) -> Option<&'a str> {
    evidence
        .terminal
        .filter(|t| t.is_error)
        .and_then(|t| t.text.as_deref())
}

/// A rejected rate-limit event (it carries OpenCode's `retry-after`), else a 429/529 status on the
/// `error` line, else the error text's wording.
fn rate_limit(evidence: &AttemptEvidence<'_>) -> Option<RateLimitInfo> {
    if let Some(info) = evidence.rate_limits.iter().rev().find(|i| i.rejected) {
        return Some(info.clone());
    }
    let t = evidence.terminal.filter(|t| t.is_error)?;
    let text = t.text.as_deref().unwrap_or_default();
    let by_status = matches!(t.api_status, Some(429 | 529));
    let lower = text.to_ascii_lowercase();
    let by_words = t.api_status.is_none() && RATE_LIMIT_WORDS.iter().any(|w| lower.contains(w));
    (by_status || by_words).then(|| RateLimitInfo {
        resets_at_epoch_s: None,
        retry_after_ms: None,
        rejected: true,
        message: shorten(text, MESSAGE_KEEP),
    })
}

fn model_unavailable(evidence: &AttemptEvidence<'_>, stderr: &str) -> Option<String> {
    let says_so = |text: &str| MODEL_NOT_FOUND.iter().any(|p| text.contains(p));
    if let Some(text) = error_text(evidence) {
        let status_404 = evidence.terminal.is_some_and(|t| t.api_status == Some(404));
        if says_so(text) || (status_404 && text.to_ascii_lowercase().contains("model")) {
            return Some(shorten(text, MESSAGE_KEEP));
        }
    }
    stderr
        .lines()
        .find(|line| says_so(line))
        .map(|line| shorten(line.trim(), MESSAGE_KEEP))
}

/// `text` without ANSI escape sequences: CSI (`ESC [ … final`), OSC (`ESC ] … BEL` or
/// `ESC ] … ESC \`) and two-byte escapes. OpenCode colours its stderr even when it is a pipe.
pub(crate) fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\u{1b}' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('[') => {
                // Parameters and intermediates, up to the final byte in `@`..=`~`.
                for c in chars.by_ref() {
                    if ('@'..='~').contains(&c) {
                        break;
                    }
                }
            }
            Some(']') => {
                while let Some(c) = chars.next() {
                    if c == '\u{7}' {
                        break;
                    }
                    if c == '\u{1b}' && chars.peek() == Some(&'\\') {
                        chars.next();
                        break;
                    }
                }
            }
            Some(_) | None => {}
        }
    }
    out
}
