//! What only Codex's wording reveals about a failed attempt.
//!
//! The engine already reads the structured evidence: `turn.completed` is success, a rejected
//! `RateLimit` from the parser or a `turn.failed` whose message names HTTP 429/529 is a rate limit.
//! This module adds narrow text patterns, looked for only where the CLI itself speaks: the
//! `turn.failed` message, and stderr. Agent messages are never searched, so an agent writing about
//! rate limits does not trip the backoff.
//!
//! Evidence for each pattern (samples recorded with Codex 0.171.0 unless said otherwise):
//! - rate limit: `exceeded retry limit, last status: 429 Too Many Requests` and `unexpected status
//!   529 …` (recorded); `usage_limit_reached` with `resets_at`, `You’ve hit your usage limit`, a
//!   model at capacity (Codex's strings, not recorded). See [`crate::wording`]. A 500 (`We’re
//!   currently experiencing high demand…`) is a crash, not a rate limit.
//! - stale session: `Error: thread/resume: thread/resume failed: no rollout found for thread id
//!   <id> (code -32600)` on stderr, followed by a stack backtrace (recorded).
//! - model unavailable: NOT recorded (every recording used a model Codex does not know, which only
//!   warns: "Model metadata for `fake-model` not found…", and the run goes on). The patterns are the
//!   OpenAI API's `model_not_found` code and its wording `The model <m> does not exist or you do not
//!   have access to it.`, the ChatGPT backend's `… model is not supported when using Codex with a
//!   ChatGPT account`, and an HTTP 404 that talks about the model.
//! - refusals: a command line clap rejects (`error: unexpected argument '--bogus-flag' found` +
//!   usage, exit 2, recorded); `Not inside a trusted directory and --skip-git-repo-check was not
//!   specified.` (recorded, though the adapter always passes the flag); a configuration Codex cannot
//!   load (`Error loading config.toml…`, its strings); `CODEX_HOME` under `/tmp`, where it refuses to
//!   install its sandbox helper so every sandboxed command fails (recorded); HTTP 401/403 after
//!   Codex's own retries (recorded: 401 retried five times); a spent quota (billing; its strings).

use corral_engine::{AttemptEvidence, Diagnosis};
use corral_ports::RateLimitInfo;

use corral_engine::shorten;

use crate::wording::{self, QUOTA};

/// How much of the CLI's words a diagnosis keeps, in bytes.
const MESSAGE_KEEP: usize = 1024;

const STALE: &[&str] = &["no rollout found for thread id", "thread/resume failed"];
const MODEL_UNAVAILABLE: &[&str] = &[
    "model_not_found",
    "does not exist or you do not have access to it",
    "is not supported when using Codex with a ChatGPT account",
];
const UNTRUSTED_DIR: &str = "Not inside a trusted directory";
const CONFIG_ERRORS: &[&str] = &["Error loading config.toml", "Error loading configuration"];
const HOME_IN_TMP: &str = "Refusing to create helper binaries under temporary dir";

/// The adapter's reading of a failed attempt. `sandboxed` is false when every run is
/// `danger-full-access`, where the sandbox helper is not needed.
pub fn diagnose(evidence: &AttemptEvidence<'_>, sandboxed: bool) -> Diagnosis {
    let error_text = terminal_error_text(evidence);
    Diagnosis {
        rate_limit: rate_limit(error_text, evidence.stderr_tail),
        stale_session: [error_text.unwrap_or_default(), evidence.stderr_tail]
            .iter()
            .any(|text| STALE.iter().any(|p| text.contains(p))),
        model_unavailable: model_unavailable(evidence, error_text),
        refused: refusal(evidence, error_text, sandboxed),
    }
}

/// The `turn.failed` message, when the turn failed.
fn terminal_error_text<'a>(evidence: &AttemptEvidence<'a>) -> Option<&'a str> {
    evidence
        .terminal
        .filter(|t| t.is_error)
        .and_then(|t| t.text.as_deref())
}

fn rate_limit(error_text: Option<&str>, stderr: &str) -> Option<RateLimitInfo> {
    if let Some(info) = error_text.and_then(wording::rate_limit) {
        return Some(info);
    }
    // Codex prints fatal errors on stderr as `Error: …` / `ERROR: …` when it fails outside a turn.
    stderr
        .lines()
        .map(str::trim)
        .filter(|line| line.starts_with("Error") || line.starts_with("ERROR"))
        .find_map(wording::rate_limit)
}

fn model_unavailable(evidence: &AttemptEvidence<'_>, error_text: Option<&str>) -> Option<String> {
    let says_so = |text: &str| MODEL_UNAVAILABLE.iter().any(|p| text.contains(p));
    let status_404 = evidence
        .terminal
        .is_some_and(|t| t.is_error && t.api_status == Some(404));
    if let Some(text) = error_text
        && (says_so(text) || (status_404 && text.to_ascii_lowercase().contains("model")))
    {
        return Some(shorten(text, MESSAGE_KEEP));
    }
    evidence
        .stderr_tail
        .lines()
        .find(|line| says_so(line))
        .map(|line| shorten(line.trim(), MESSAGE_KEEP))
}

/// Why Codex refused to run, with what to do about it. Each of these fails the same way on every
/// retry until something outside the run changes.
fn refusal(
    evidence: &AttemptEvidence<'_>,
    error_text: Option<&str>,
    sandboxed: bool,
) -> Option<String> {
    let stderr = evidence.stderr_tail;
    let exit_code = evidence.exit.and_then(|e| e.code);
    if evidence.terminal.is_none()
        && (exit_code == Some(2) || stderr.contains("Usage: codex"))
        && let Some(line) = stderr.lines().find(|l| l.starts_with("error: "))
    {
        return Some(format!(
            "Codex rejected its command line ({}); check providers.codex.extra_args and whether \
             the installed version is a tested one",
            shorten(line.trim(), MESSAGE_KEEP)
        ));
    }
    if let Some(line) = stderr.lines().find(|l| l.contains(UNTRUSTED_DIR)) {
        return Some(format!(
            "Codex refused the working directory ({}); the adapter passes --skip-git-repo-check, \
             so check providers.codex.extra_args and the installed version",
            shorten(line.trim(), MESSAGE_KEEP)
        ));
    }
    if let Some(line) = stderr
        .lines()
        .find(|l| CONFIG_ERRORS.iter().any(|p| l.contains(p)))
    {
        return Some(format!(
            "Codex could not load its configuration ({}); check $CODEX_HOME/config.toml and \
             providers.codex (model_provider, extra_args)",
            shorten(line.trim(), MESSAGE_KEEP)
        ));
    }
    if sandboxed && stderr.contains(HOME_IN_TMP) {
        return Some(
            "CODEX_HOME is under /tmp, where Codex refuses to install its sandbox helper, so every \
             sandboxed command fails; point CODEX_HOME at a folder outside /tmp"
                .to_string(),
        );
    }
    if let Some(t) = evidence.terminal.filter(|t| t.is_error)
        && let Some(status @ (401 | 403)) = t.api_status
    {
        return Some(format!(
            "Codex could not authenticate (HTTP {status}): {}; check OPENAI_API_KEY or \
             CODEX_API_KEY, the login of the account Corral runs as (`codex login`), or the \
             env_key of the configured model provider (name it in Corral's environment allowlist)",
            shorten(t.text.as_deref().unwrap_or_default(), MESSAGE_KEEP)
        ));
    }
    if let Some(text) = error_text
        && QUOTA.iter().any(|q| text.contains(q))
    {
        return Some(format!(
            "Codex's account is out of quota ({}); check the plan and billing of the API key or \
             login Corral uses",
            shorten(text, MESSAGE_KEEP)
        ));
    }
    None
}
