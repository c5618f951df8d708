//! Session intent (what the caller asks for) and the outcome of a finished run.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::usage::Usage;

/// Which AI coding CLI a provider drives. Matching on it must stay exhaustive: adding a provider
/// makes every `match` in the workspace point at the places that need a decision.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum ProviderId {
    /// Anthropic's Claude Code (`claude`).
    Claude,
    /// OpenAI's Codex CLI (`codex`).
    Codex,
    /// GitHub Copilot CLI (`copilot`).
    Copilot,
    /// OpenCode (`opencode`).
    Opencode,
    /// Grok CLI (`grok`).
    Grok,
    /// Google's Gemini CLI (`gemini`).
    Gemini,
}

impl ProviderId {
    /// Every provider, in a stable order.
    pub const ALL: [ProviderId; 6] = [
        ProviderId::Claude,
        ProviderId::Codex,
        ProviderId::Copilot,
        ProviderId::Opencode,
        ProviderId::Grok,
        ProviderId::Gemini,
    ];

    /// The identifier used in settings keys and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            ProviderId::Claude => "claude",
            ProviderId::Codex => "codex",
            ProviderId::Copilot => "copilot",
            ProviderId::Opencode => "opencode",
            ProviderId::Grok => "grok",
            ProviderId::Gemini => "gemini",
        }
    }
}

impl fmt::Display for ProviderId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The longest session id accepted, in characters.
pub const SESSION_ID_MAX_LEN: usize = 256;

/// A provider's session identifier, validated so that it can be passed back on a command line
/// (`--resume <id>`) and written as `session-id.txt`. This is the one rule, for every reader and
/// writer of session ids.
///
/// Accepted: 1 to [`SESSION_ID_MAX_LEN`] characters of `[A-Za-z0-9._:-]`, not starting with `-`
/// (an id that could be read as a flag is refused) nor with `.` (`..` would be a path where a CLI
/// names a file after the id).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct SessionId(String);

/// In a JSON Schema a session id is a string of the rule's characters (the rule itself is
/// [`SessionId::parse`]'s).
impl schemars::JsonSchema for SessionId {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "SessionId".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "minLength": 1,
            "maxLength": SESSION_ID_MAX_LEN,
            "pattern": "^[A-Za-z0-9_:][A-Za-z0-9._:-]*$",
        })
    }
}

/// Why a text is not a session id.
///
/// Not retryable: the id came from the provider's stream or the caller; resuming with it is
/// refused and the caller falls back to a cold start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SessionIdError {
    /// The text is empty.
    #[error("session id is empty")]
    Empty,
    /// The text is longer than [`SESSION_ID_MAX_LEN`] characters.
    #[error("session id is {len} characters long; the limit is {SESSION_ID_MAX_LEN}")]
    TooLong {
        /// Its length in characters.
        len: usize,
    },
    /// The text starts with `-`, so it could be read as a command-line flag.
    #[error("session id starts with '-' and could be read as a command-line flag")]
    LeadingDash,
    /// The text starts with `.`: as a file name (CLIs keep sessions in files named after their
    /// ids) it could be `.`, `..` or a hidden file.
    #[error("session id starts with '.' and could be read as a path")]
    LeadingDot,
    /// The text has a character outside `[A-Za-z0-9._:-]` (a space, a newline, a slash, ...).
    #[error(
        "session id has the character {ch:?} at index {index}; only A-Z a-z 0-9 . _ : - are allowed"
    )]
    ForbiddenChar {
        /// The first offending character.
        ch: char,
        /// Its index in characters.
        index: usize,
    },
}

/// Checks `text` against the session-id rule.
///
/// # Errors
///
/// The first rule broken, checked in this order: empty, too long, forbidden character, leading
/// dash, leading dot.
pub fn validate_session_id(text: &str) -> Result<(), SessionIdError> {
    if text.is_empty() {
        return Err(SessionIdError::Empty);
    }
    let len = text.chars().count();
    if len > SESSION_ID_MAX_LEN {
        return Err(SessionIdError::TooLong { len });
    }
    if let Some((index, ch)) = text
        .chars()
        .enumerate()
        .find(|(_, ch)| !(ch.is_ascii_alphanumeric() || matches!(ch, '.' | '_' | ':' | '-')))
    {
        return Err(SessionIdError::ForbiddenChar { ch, index });
    }
    if text.starts_with('-') {
        return Err(SessionIdError::LeadingDash);
    }
    if text.starts_with('.') {
        return Err(SessionIdError::LeadingDot);
    }
    Ok(())
}

impl SessionId {
    /// Validates and wraps an id.
    ///
    /// # Errors
    ///
    /// [`SessionIdError`] saying which rule `id` breaks.
    pub fn new(id: impl Into<String>) -> Result<Self, SessionIdError> {
        let id = id.into();
        validate_session_id(&id)?;
        Ok(SessionId(id))
    }

    /// Checks `text` and wraps it (the same as [`SessionId::new`], for a borrowed text).
    ///
    /// # Errors
    ///
    /// [`SessionIdError`] saying which rule `text` breaks.
    pub fn parse(text: &str) -> Result<Self, SessionIdError> {
        SessionId::new(text)
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The exact contents of `session-id.txt` for this id: the id and one `\n`.
    pub fn to_file_contents(&self) -> String {
        format!("{}\n", self.0)
    }
}

impl AsRef<str> for SessionId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl std::str::FromStr for SessionId {
    type Err = SessionIdError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        SessionId::new(text)
    }
}

impl TryFrom<String> for SessionId {
    type Error = SessionIdError;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        SessionId::new(value)
    }
}

impl From<SessionId> for String {
    fn from(value: SessionId) -> Self {
        value.0
    }
}

impl fmt::Display for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// How hard the model should think, where the CLI can be told.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Effort {
    /// Quick answers.
    Low,
    /// The CLI's usual default.
    Medium,
    /// Deeper reasoning, slower and dearer.
    High,
}

impl Effort {
    /// The spelling most CLIs accept.
    pub fn as_str(self) -> &'static str {
        match self {
            Effort::Low => "low",
            Effort::Medium => "medium",
            Effort::High => "high",
        }
    }
}

/// What the agent may do. Providers map this onto their own flags and declare the gates they
/// cannot enforce; this struct states intent, not a guarantee.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Permissions {
    /// Create and edit files under the working directory and the extra roots.
    #[serde(alias = "edit_files")]
    pub edit_files: bool,
    /// Run shell commands.
    #[serde(alias = "run_shell")]
    pub run_shell: bool,
    /// Use web search and fetch tools.
    #[serde(alias = "web_access")]
    pub web_access: bool,
}

impl Default for Permissions {
    /// An unattended coding agent: it edits, runs commands and may look things up.
    fn default() -> Self {
        Permissions {
            edit_files: true,
            run_shell: true,
            web_access: true,
        }
    }
}

/// One headless task for a provider: the intent, free of any CLI's spelling.
#[derive(Debug, Clone)]
pub struct AiSession {
    /// The full prompt. Shared so that retries do not copy it; it never goes into argv.
    pub prompt: Arc<str>,
    /// What to send instead of `prompt` when the session in `resume` turns out to be gone and
    /// the run starts cold: the whole task, since a new session has none of the conversation a
    /// resume prompt ("fix what the check reported", "continue where you stopped") relies on.
    /// `None`: the cold start re-sends `prompt`, which is right when `prompt` is already the
    /// whole task.
    pub cold_prompt: Option<Arc<str>>,
    /// The directory the agent works in (forced as the child's working directory).
    pub cwd: PathBuf,
    /// Further directories the agent may read and write.
    pub extra_roots: Vec<PathBuf>,
    /// Model name in the provider's own spelling; `None` leaves the CLI's default.
    pub model: Option<String>,
    /// Reasoning effort, forwarded where the CLI supports it.
    pub effort: Option<Effort>,
    /// What the agent may do.
    pub permissions: Permissions,
    /// A session to resume instead of starting a new one.
    pub resume: Option<SessionId>,
    /// Cancels the run, including any backoff sleep, and ends the whole process tree.
    pub cancel: CancellationToken,
    /// Where the agent is told to write `signals.json` (absolute).
    pub signals_file: PathBuf,
    /// The run directory: `session-id.txt`, `events.jsonl`, pointer files (absolute).
    pub output_dir: PathBuf,
    /// A spend cap in US dollars, where the CLI can enforce one.
    pub max_budget_usd: Option<f64>,
    /// A cap on the agent's turns (the model's replies in one run, each with its tool calls),
    /// where the CLI can enforce one; a provider that cannot refuses the session rather than
    /// run it uncapped.
    pub max_turns: Option<u32>,
    /// When `resume` names a session the CLI no longer has: `true` runs the task once cold, in a
    /// new session (the observer hears [`RunObserver::cold_fallback`](crate::RunObserver)),
    /// `false` ends the run as a stale session instead.
    pub cold_fallback: bool,
    /// The task run this provider run belongs to, when a caller runs one task as several
    /// provider runs (a corrective retry resumes the session of the run before): attempts are
    /// numbered on from the earlier runs, the log's clock keeps running from the task's start,
    /// and the log ends with `provider_run_finished`, leaving the one `run_finished` to the
    /// caller. `None`: the provider run is the whole task.
    pub task: Option<TaskRun>,
}

/// A provider run's place in a larger task run (see [`AiSession::task`]).
#[derive(Debug, Clone, Copy)]
pub struct TaskRun {
    /// When the task started: the origin of the log's `mono_ms` and of its duration.
    pub started: std::time::Instant,
    /// Attempts the task's earlier provider runs made; this run's first attempt is the next.
    pub attempts_before: u32,
}

/// How a run ended. One value per distinct thing a caller may want to act on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// The CLI reported success (its terminal event, or exit 0 where it has none).
    Succeeded,
    /// The CLI failed or exited non-zero, but `signals.json` exists: the work is kept.
    Recovered,
    /// Rate limited and every retry was used.
    RateLimited,
    /// The requested model is not available to this account or CLI.
    ModelUnavailable,
    /// The session to resume was not found, and the one cold retry failed as well.
    StaleSession,
    /// The CLI ended without success for any other reason.
    Crashed,
    /// No output for longer than the idle watchdog allows; the tree was killed.
    IdleTimeout,
    /// The wall-clock limit passed; the tree was killed.
    WallTimeout,
    /// The caller cancelled; the tree was killed.
    Cancelled,
    /// The CLI could not be started (missing, not executable, argv too long).
    SpawnFailed,
    /// The run was refused before the CLI was started: a dirty work tree, an untested CLI
    /// version, no sandbox that enforces the policy, no headless resume, a bad session, or an I/O
    /// error preparing the run directory.
    NotStarted,
    /// The CLI refused the request for a reason retrying cannot fix (authentication, a rejected
    /// flag, a refused permission mode).
    Refused,
    /// The CLI's process tree went over one of its limits (`[limits]`: memory, processes,
    /// disk) and was ended; its session is kept.
    LimitExceeded,
}

impl Outcome {
    /// The kebab-case name used in logs and JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Succeeded => "succeeded",
            Outcome::Recovered => "recovered",
            Outcome::RateLimited => "rate-limited",
            Outcome::ModelUnavailable => "model-unavailable",
            Outcome::StaleSession => "stale-session",
            Outcome::Crashed => "crashed",
            Outcome::IdleTimeout => "idle-timeout",
            Outcome::WallTimeout => "wall-timeout",
            Outcome::Cancelled => "cancelled",
            Outcome::SpawnFailed => "spawn-failed",
            Outcome::NotStarted => "not-started",
            Outcome::Refused => "refused",
            Outcome::LimitExceeded => "limit-exceeded",
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a successful (or recovered) run hands back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProviderOutput {
    /// [`Outcome::Succeeded`] or [`Outcome::Recovered`].
    pub outcome: Outcome,
    /// Where `signals.json` was expected.
    #[serde(alias = "signals_file")]
    pub signals_file: PathBuf,
    /// Whether the file existed when the run ended. Validation is the contract's job.
    #[serde(alias = "signals_present")]
    pub signals_present: bool,
    /// The session the run ended in, persisted to `session-id.txt` as soon as it was seen.
    #[serde(alias = "session_id")]
    pub session_id: Option<SessionId>,
    /// The last attempt's exit code, if it exited rather than being killed by a signal.
    #[serde(alias = "exit_code")]
    pub exit_code: Option<i32>,
    /// True when the CLI exited non-zero (or crashed) but left `signals.json`.
    #[serde(alias = "recovered_from_exit")]
    pub recovered_from_exit: bool,
    /// Tokens and cost summed over every attempt.
    pub usage: Usage,
    /// How many times the CLI was started.
    pub attempts: u32,
    /// Wall time from the first spawn to the end, backoff sleeps included.
    #[serde(with = "duration_ms")]
    pub duration: Duration,
    /// The final text the agent reported, if any.
    #[serde(alias = "final_text")]
    pub final_text: Option<String>,
    /// What the sandbox enforced for this run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attestation: Option<crate::Attestation>,
}

mod duration_ms {
    //! Durations as whole milliseconds in JSON.
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        Ok(Duration::from_millis(u64::deserialize(d)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_id_accepts_provider_shaped_ids() {
        for ok in [
            "0f8e4f7a-1b2c-4d5e-8f90-123456789abc",
            "thread_abc123",
            "ses_01J.ABC:def",
            "a",
            &"x".repeat(SESSION_ID_MAX_LEN),
        ] {
            assert_eq!(validate_session_id(ok), Ok(()), "{ok}");
        }
    }

    #[test]
    fn session_id_refuses_flags_and_odd_characters() {
        assert_eq!(SessionId::new(""), Err(SessionIdError::Empty));
        assert_eq!(
            SessionId::new("--dangerously-skip-permissions"),
            Err(SessionIdError::LeadingDash)
        );
        assert_eq!(SessionId::new("-"), Err(SessionIdError::LeadingDash));
        assert_eq!(
            SessionId::new("x".repeat(SESSION_ID_MAX_LEN + 1)),
            Err(SessionIdError::TooLong {
                len: SESSION_ID_MAX_LEN + 1
            })
        );
        // Characters, not bytes: 200 two-byte characters are 200 long, and the first is refused.
        assert_eq!(
            SessionId::new("é".repeat(200)),
            Err(SessionIdError::ForbiddenChar { ch: 'é', index: 0 })
        );
        for (bad, ch, index) in [
            ("a b", ' ', 1),
            ("a\nb", '\n', 1),
            ("a/b", '/', 1),
            ("$(x)", '$', 0),
            ("a;b", ';', 1),
        ] {
            assert_eq!(
                SessionId::new(bad),
                Err(SessionIdError::ForbiddenChar { ch, index }),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn session_id_refuses_what_could_be_a_path() {
        for path_like in ["..", ".", ".claude"] {
            assert_eq!(
                SessionId::new(path_like),
                Err(SessionIdError::LeadingDot),
                "{path_like}"
            );
        }
    }

    #[test]
    fn session_id_file_contents_are_one_line() {
        let id = SessionId::parse("abc-1");
        assert_eq!(id.map(|id| id.to_file_contents()), Ok("abc-1\n".to_owned()));
    }

    #[test]
    fn session_id_deserialization_validates() {
        let ok: Result<SessionId, _> = serde_json::from_str("\"abc\"");
        assert!(ok.is_ok());
        let bad: Result<SessionId, _> = serde_json::from_str("\"-rf\"");
        assert!(bad.is_err());
    }
}
