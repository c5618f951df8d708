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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
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
}

impl ProviderId {
    /// Every provider, in a stable order.
    pub const ALL: [ProviderId; 5] = [
        ProviderId::Claude,
        ProviderId::Codex,
        ProviderId::Copilot,
        ProviderId::Opencode,
        ProviderId::Grok,
    ];

    /// The identifier used in settings keys and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            ProviderId::Claude => "claude",
            ProviderId::Codex => "codex",
            ProviderId::Copilot => "copilot",
            ProviderId::Opencode => "opencode",
            ProviderId::Grok => "grok",
        }
    }
}

impl fmt::Display for ProviderId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A provider's session identifier, validated so that it can be passed back on a command line.
///
/// Accepted: 1 to 256 characters of `[A-Za-z0-9._:-]`, not starting with `-` (an id that could be
/// read as a flag is refused) nor with `.` (`..` would be a path where a CLI names a file after
/// the id).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct SessionId(String);

/// Why a string was refused as a [`SessionId`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SessionIdError {
    /// The id is empty.
    #[error("session id is empty")]
    Empty,
    /// The id is longer than 256 characters.
    #[error("session id is {len} characters long; at most 256 are accepted")]
    TooLong {
        /// Measured length in bytes.
        len: usize,
    },
    /// The id starts with `-` and could be taken for a flag.
    #[error("session id {0:?} starts with '-' and could be read as a command-line flag")]
    LooksLikeFlag(String),
    /// The id starts with `.`: as a file name (CLIs keep sessions in files named after their
    /// ids) it could be `.`, `..` or a hidden file.
    #[error("session id {0:?} starts with '.' and could be read as a path")]
    LooksLikePath(String),
    /// The id holds a character outside `[A-Za-z0-9._:-]`.
    #[error(
        "session id {id:?} holds the character {ch:?}; only letters, digits and . _ : - are accepted"
    )]
    BadCharacter {
        /// The refused id.
        id: String,
        /// The first offending character.
        ch: char,
    },
}

impl SessionId {
    /// Validates and wraps an id.
    pub fn new(id: impl Into<String>) -> Result<Self, SessionIdError> {
        let id = id.into();
        if id.is_empty() {
            return Err(SessionIdError::Empty);
        }
        if id.len() > 256 {
            return Err(SessionIdError::TooLong { len: id.len() });
        }
        if id.starts_with('-') {
            return Err(SessionIdError::LooksLikeFlag(id));
        }
        if id.starts_with('.') {
            return Err(SessionIdError::LooksLikePath(id));
        }
        if let Some(ch) = id
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-')))
        {
            return Err(SessionIdError::BadCharacter { id, ch });
        }
        Ok(SessionId(id))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
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
pub struct Permissions {
    /// Create and edit files under the working directory and the extra roots.
    pub edit_files: bool,
    /// Run shell commands.
    pub run_shell: bool,
    /// Use web search and fetch tools.
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
}

/// How a run ended. One value per distinct thing a caller may want to act on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
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
    /// The CLI could not be started (missing, not executable, argv too long, version refused).
    SpawnFailed,
    /// The CLI refused the request for a reason retrying cannot fix (authentication, a rejected
    /// flag, a refused permission mode).
    Refused,
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
            Outcome::Refused => "refused",
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
pub struct ProviderOutput {
    /// [`Outcome::Succeeded`] or [`Outcome::Recovered`].
    pub outcome: Outcome,
    /// Where `signals.json` was expected.
    pub signals_file: PathBuf,
    /// Whether the file existed when the run ended. Validation is the contract's job.
    pub signals_present: bool,
    /// The session the run ended in, persisted to `session-id.txt` as soon as it was seen.
    pub session_id: Option<SessionId>,
    /// The last attempt's exit code, if it exited rather than being killed by a signal.
    pub exit_code: Option<i32>,
    /// True when the CLI exited non-zero (or crashed) but left `signals.json`.
    pub recovered_from_exit: bool,
    /// Tokens and cost summed over every attempt.
    pub usage: Usage,
    /// How many times the CLI was started.
    pub attempts: u32,
    /// Wall time from the first spawn to the end, backoff sleeps included.
    #[serde(with = "duration_ms")]
    pub duration: Duration,
    /// The final text the agent reported, if any.
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
    fn session_id_refuses_flags_and_odd_characters() {
        assert!(SessionId::new("0b5f3c1e-aaaa-4bbb-8ccc-123456789abc").is_ok());
        assert!(SessionId::new("ses_abc.def:1").is_ok());
        assert_eq!(SessionId::new(""), Err(SessionIdError::Empty));
        assert_eq!(
            SessionId::new("--dangerously-skip-permissions"),
            Err(SessionIdError::LooksLikeFlag(
                "--dangerously-skip-permissions".into()
            ))
        );
        assert_eq!(
            SessionId::new("a b"),
            Err(SessionIdError::BadCharacter {
                id: "a b".into(),
                ch: ' '
            })
        );
        assert_eq!(
            SessionId::new("x".repeat(257)),
            Err(SessionIdError::TooLong { len: 257 })
        );
        for path_like in ["..", ".", ".claude"] {
            assert_eq!(
                SessionId::new(path_like),
                Err(SessionIdError::LooksLikePath(path_like.into())),
                "{path_like}"
            );
        }
    }

    #[test]
    fn session_id_deserialization_validates() {
        let ok: Result<SessionId, _> = serde_json::from_str("\"abc\"");
        assert!(ok.is_ok());
        let bad: Result<SessionId, _> = serde_json::from_str("\"-rf\"");
        assert!(bad.is_err());
    }
}
