//! What only Gemini CLI's wording and exit codes reveal about a failed attempt.
//!
//! The parser already turns the `result` line's error into a failed terminal event with the HTTP
//! status its wording implies, and a rejected rate-limit event for a quota error. This module
//! reads that terminal event, the exit code and stderr, and nothing else: the agent's prose is
//! never searched.
//!
//! Evidence for each pattern (recorded with `@google/gemini-cli@0.61.0` against a fake model API,
//! samples in `tests/fixtures/gemini/`):
//! - rate limit: a 429 `RESOURCE_EXHAUSTED` on every request: Gemini retries on its own
//!   (`Attempt 1 failed with status 429. Retrying with backoff...` on stderr), then prints a
//!   `result` whose error is `[API Error: Resource has been exhausted (e.g. check quota).]` and
//!   exits 173. The stderr line is read too, for a run killed before the `result`.
//! - auth type: without `security.auth.selectedType` in a settings file, Gemini derives the auth
//!   type from the environment, and `GOOGLE_GEMINI_BASE_URL` makes that `gateway`, which headless
//!   mode rejects: `Invalid auth method selected.`, exit 41 (recorded). Exit 41 is Gemini's
//!   `FATAL_AUTHENTICATION_ERROR` for a missing key as well.
//! - stale session: `--resume <uuid>` of a session that is not there: `Error resuming session:
//!   Invalid session identifier "<uuid>".`, exit 42 (recorded); after a failed first turn the
//!   session file holds no user message and the resume says `No previous sessions found for this
//!   project.` (../shared/cli-behaviour/README.md), exit 42 too.
//! - model unavailable: `[API Error: models/nope is not found for API version v1beta, or is not
//!   supported for generateContent.]`, exit 1 (recorded).

use corral_engine::{AttemptEvidence, Diagnosis, shorten};
use corral_ports::RateLimitInfo;

use crate::parser::{MODEL_NOT_FOUND_TEXT, QUOTA_TEXT};

/// How much of the CLI's words a diagnosis keeps, in bytes.
const MESSAGE_KEEP: usize = 1024;

/// Gemini's exit code for an authentication failure (`ExitCodes.FATAL_AUTHENTICATION_ERROR`).
pub const EXIT_AUTH: i32 = 41;
/// Gemini's exit code for bad input, a resume that found no session among them.
pub const EXIT_INPUT: i32 = 42;
/// Gemini's exit code when a turn failed after its own retries (recorded after 429s).
pub const EXIT_TURN_FAILED: i32 = 173;

const INVALID_AUTH: &str = "Invalid auth method selected.";
const NO_KEY: &str = "you must specify the GEMINI_API_KEY";
const RESUME_FAILED: &str = "Error resuming session:";
const RETRY_429: &str = "failed with status 429";

/// The adapter's reading of a failed attempt.
pub fn diagnose(evidence: &AttemptEvidence<'_>) -> Diagnosis {
    let error_text = evidence
        .terminal
        .filter(|t| t.is_error)
        .and_then(|t| t.text.as_deref());
    Diagnosis {
        rate_limit: rate_limit(evidence, error_text),
        stale_session: stale_session(evidence),
        model_unavailable: model_unavailable(evidence, error_text),
        refused: refusal(evidence),
    }
}

fn exit_code(evidence: &AttemptEvidence<'_>) -> Option<i32> {
    evidence.exit.and_then(|e| e.code)
}

/// Why Gemini refused to run at all, with what to do about it.
fn refusal(evidence: &AttemptEvidence<'_>) -> Option<String> {
    let stderr = evidence.stderr_tail;
    if stderr.contains(INVALID_AUTH) {
        return Some(
            "Gemini CLI found no usable auth type (exit 41, `Invalid auth method selected.`): with \
             GOOGLE_GEMINI_BASE_URL set it needs {\"security\":{\"auth\":{\"selectedType\":\
             \"gemini-api-key\"}}} in ~/.gemini/settings.json (or the file \
             GEMINI_CLI_SYSTEM_SETTINGS_PATH names) of the account Corral runs as"
                .to_string(),
        );
    }
    if stderr.contains(NO_KEY) || exit_code(evidence) == Some(EXIT_AUTH) {
        return Some(format!(
            "Gemini CLI could not authenticate (exit 41): {}; set GEMINI_API_KEY (the Gemini \
             profile passes GEMINI_* and GOOGLE_* variables)",
            shorten(last_line(stderr), MESSAGE_KEEP)
        ));
    }
    None
}

fn stale_session(evidence: &AttemptEvidence<'_>) -> bool {
    evidence.resumed.is_some()
        && evidence.terminal.is_none()
        && evidence.stderr_tail.contains(RESUME_FAILED)
}

fn rate_limit(evidence: &AttemptEvidence<'_>, error_text: Option<&str>) -> Option<RateLimitInfo> {
    let from_terminal = evidence
        .terminal
        .is_some_and(|t| t.is_error && t.api_status == Some(429));
    // Killed (or crashed) during Gemini's own retries: stderr holds the 429s and nothing else.
    let from_stderr = evidence.terminal.is_none()
        && evidence.stderr_tail.contains(RETRY_429)
        && evidence.stderr_tail.contains("RESOURCE_EXHAUSTED");
    (from_terminal || from_stderr).then(|| RateLimitInfo {
        resets_at_epoch_s: None,
        retry_after_ms: None,
        rejected: true,
        message: shorten(error_text.unwrap_or(QUOTA_TEXT), MESSAGE_KEEP),
    })
}

fn model_unavailable(evidence: &AttemptEvidence<'_>, error_text: Option<&str>) -> Option<String> {
    let text = error_text?;
    let status_404 = evidence.terminal.is_some_and(|t| t.api_status == Some(404));
    (status_404 || text.contains(MODEL_NOT_FOUND_TEXT)).then(|| shorten(text, MESSAGE_KEEP))
}

fn last_line(text: &str) -> &str {
    text.lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or_default()
        .trim()
}
