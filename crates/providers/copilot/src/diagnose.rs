//! What only the Copilot CLI's wording reveals about a failed attempt.
//!
//! The engine already reads the structured evidence: the parser's `RateLimit` event for a
//! `session.error` of type `rate_limit`, and the terminal event's status (429). This module adds
//! the rest, looked for only where the CLI itself speaks: the terminal event's text when it
//! reports a failure (the parser writes it as `<errorType>: <message>` lines taken from
//! `session.error`), and stderr. Assistant prose is never searched, so an agent writing about rate
//! limits does not trip the backoff.
//!
//! Evidence for each pattern (samples recorded with Copilot CLI 1.0.102 unless said otherwise):
//! - rate limit: `session.error` `errorType: "rate_limit"`, `Failed to get response from the AI
//!   model; retried 5 times (total retry wait time: 5.39 seconds) Last error: 429 …` (recorded).
//! - stale session: `Error: No session, task, or name matched '<id>'.` on stderr, exit 1, nothing
//!   on stdout (recorded).
//! - model unavailable: NOT recorded. The wordings are the CLI's own strings, read from its
//!   1.0.102 runtime: `Model "<m>" from --model flag is not available.`, `Model '<m>' is not
//!   available. Available models: …` and `… model is not supported`. `Model '<m>' from COPILOT_MODEL
//!   environment variable is not available. Falling back to next option.` is a fallback, not a
//!   failure, and does not count.
//! - refusals (see [`refusal`]): `Error: No authentication information found.` on stderr
//!   (recorded, without a token or BYOK); `session.error` `errorType: "authentication"` (recorded:
//!   `Authentication failed with provider at … (HTTP 401)`, after 2 retries of its own);
//!   `authorization`, `quota` and `policy` (error types from the CLI's event schema, not
//!   recorded); a rejected command line, which Copilot reports as `error: Invalid command format.`
//!   / `It looks like your prompt was not quoted…` whatever the real cause (recorded with
//!   `--bogus-flag`).

use corral_engine::{AttemptEvidence, Diagnosis};
use corral_ports::RateLimitInfo;

use corral_engine::shorten;

/// How much of the CLI's words a diagnosis keeps, in bytes.
const MESSAGE_KEEP: usize = 1024;

const STALE: &str = "No session, task, or name matched";
const NO_AUTH: &str = "No authentication information found";
const BAD_COMMAND: &[&str] = &[
    "error: Invalid command format",
    "It looks like your prompt was not quoted",
];

/// The adapter's reading of a failed attempt.
pub fn diagnose(evidence: &AttemptEvidence<'_>) -> Diagnosis {
    let errors = terminal_errors(evidence);
    Diagnosis {
        rate_limit: errors
            .iter()
            .find(|(kind, _)| *kind == "rate_limit")
            .map(|(_, message)| RateLimitInfo {
                resets_at_epoch_s: None,
                retry_after_ms: None,
                rejected: true,
                message: one_line(message),
            }),
        stale_session: evidence.stderr_tail.contains(STALE),
        model_unavailable: model_unavailable(evidence.stderr_tail, &errors),
        refused: refusal(evidence),
    }
}

/// Why Copilot refused to run at all, with what to do about it. Such a refusal is permanent: the
/// same command fails the same way until something outside the run changes.
fn refusal(evidence: &AttemptEvidence<'_>) -> Option<String> {
    let stderr = evidence.stderr_tail;
    if stderr.contains(NO_AUTH) {
        return Some(
            "Copilot found no credentials (\"No authentication information found\"); set \
             COPILOT_GITHUB_TOKEN, GH_TOKEN or GITHUB_TOKEN in Corral's environment, log in with \
             `copilot login` as the account Corral runs as, or configure a BYOK provider \
             (COPILOT_PROVIDER_BASE_URL with COPILOT_MODEL)"
                .to_string(),
        );
    }
    if evidence.terminal.is_none() && BAD_COMMAND.iter().any(|p| stderr.contains(p)) {
        return Some(
            "Copilot rejected its command line. Its message (\"It looks like your prompt was not \
             quoted\") is misleading: Copilot 1.0 prints it for any option it does not know, and \
             the prompt is never on the command line (it is in copilot-prompt.md); check \
             providers.copilot.extra_args and whether the installed version is a tested one"
                .to_string(),
        );
    }
    let errors = terminal_errors(evidence);
    let (kind, message) = errors.iter().find(|(kind, _)| {
        matches!(
            *kind,
            "authentication" | "authorization" | "quota" | "policy"
        )
    })?;
    let message = one_line(message);
    Some(match *kind {
        "authentication" => format!(
            "Copilot could not authenticate: {message}; check COPILOT_GITHUB_TOKEN, GH_TOKEN or \
             GITHUB_TOKEN (the first one set wins), the login of the account Corral runs as, or \
             the COPILOT_PROVIDER_* key of a BYOK provider"
        ),
        "authorization" => format!(
            "Copilot is not authorized: {message}; the account or token needs Copilot access"
        ),
        "quota" => format!(
            "Copilot's quota is used up: {message}; wait for it to reset or raise the account's \
             Copilot budget"
        ),
        _ => format!("Copilot refused the request under a policy: {message}"),
    })
}

/// The `<errorType>: <message>` entries of the terminal event's text, when it reports a failure.
/// A line that does not start with a lower-case type continues the message before it.
fn terminal_errors<'a>(evidence: &AttemptEvidence<'a>) -> Vec<(&'a str, String)> {
    let Some(text) = evidence
        .terminal
        .filter(|t| t.is_error)
        .and_then(|t| t.text.as_deref())
    else {
        return Vec::new();
    };
    let mut entries: Vec<(&'a str, String)> = Vec::new();
    for line in text.lines() {
        let kind = line.split_once(": ").map(|(kind, _)| kind).filter(|kind| {
            !kind.is_empty() && kind.bytes().all(|b| b.is_ascii_lowercase() || b == b'_')
        });
        match (kind, entries.last_mut()) {
            (Some(kind), _) => entries.push((kind, line[kind.len() + 2..].to_string())),
            (None, Some((_, message))) => {
                message.push('\n');
                message.push_str(line);
            }
            (None, None) => {}
        }
    }
    entries
}

fn model_unavailable(stderr: &str, errors: &[(&str, String)]) -> Option<String> {
    let from_stderr = stderr
        .lines()
        .map(str::trim)
        .find(|line| {
            line.contains("from --model flag is not available")
                || (line.contains("Model '") && line.contains("is not available. Available models"))
        })
        .map(|line| shorten(line, MESSAGE_KEEP));
    from_stderr.or_else(|| {
        errors
            .iter()
            .find(|(_, message)| message.contains("model is not supported"))
            .map(|(_, message)| one_line(message))
    })
}

/// The CLI's words on one line (its messages wrap with an indented second line), shortened.
fn one_line(text: &str) -> String {
    shorten(
        &text.split_whitespace().collect::<Vec<_>>().join(" "),
        MESSAGE_KEEP,
    )
}
