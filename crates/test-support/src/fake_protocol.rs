//! The stdout protocol of `corral-fake-agent`: one JSON object per line, tagged by `"type"`.
//!
//! The fake agent writes these lines and the engine's tests parse them back with the same types,
//! so both sides agree on the exact shape without repeating JSON literals.

use serde::{Deserialize, Serialize};

/// The text the fake prints once every process of its tree has recorded its pid.
pub const TREE_READY: &str = "tree-ready";

/// The text of the `text` line of the `ok` mode.
pub const HELLO: &str = "hello";

/// One line of the fake agent's stdout.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum FakeLine {
    /// `{"type":"init","session_id":"..."}`: the session the fake works in.
    Init {
        /// The announced session id.
        session_id: String,
    },
    /// `{"type":"text","text":"..."}`: assistant output.
    Text {
        /// The text.
        text: String,
    },
    /// `{"type":"result",...}`: the final line of a successful turn.
    Result {
        /// Whether the turn failed (the fake always says `false`).
        is_error: bool,
        /// The final text (`"done"`).
        text: String,
        /// Token counts of the turn.
        usage: FakeUsage,
        /// The cost of the turn in US dollars.
        cost_usd: f64,
    },
    /// `{"type":"rate_limit",...}`: the provider refused the turn for now.
    RateLimit {
        /// When the limit resets, in seconds since the Unix epoch, if known.
        resets_at: Option<u64>,
        /// A human-readable message (`"rate limited"`).
        message: String,
    },
    /// `{"type":"retry",...}`: the fake retries a request on its own after an HTTP `status`,
    /// waiting `delay_ms` first (what Claude Code's `system/api_retry` says).
    Retry {
        /// The fake's own attempt number.
        attempt: u32,
        /// The HTTP status that caused the retry.
        status: u16,
        /// How long it waits before retrying.
        delay_ms: u64,
    },
}

/// Token counts reported in a [`FakeLine::Result`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FakeUsage {
    /// Input tokens.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
}

impl FakeLine {
    /// The `init` line announcing `session_id`.
    pub fn init(session_id: impl Into<String>) -> Self {
        Self::Init {
            session_id: session_id.into(),
        }
    }

    /// A `text` line.
    pub fn text(text: impl Into<String>) -> Self {
        Self::Text { text: text.into() }
    }

    /// The `result` line every successful mode prints: `"done"`, 10 in, 5 out, $0.001.
    pub fn done() -> Self {
        Self::Result {
            is_error: false,
            text: "done".to_owned(),
            usage: FakeUsage {
                input_tokens: 10,
                output_tokens: 5,
            },
            cost_usd: 0.001,
        }
    }

    /// A `rate_limit` line.
    pub fn rate_limit(resets_at: Option<u64>) -> Self {
        Self::RateLimit {
            resets_at,
            message: "rate limited".to_owned(),
        }
    }
}

/// One line of the fake's stdout as the normalized event a provider's parser would make of it:
/// the parser every engine test and benchmark adapter for the fake uses.
pub fn to_agent_event(line: &str) -> corral_ports::AgentEvent {
    use corral_ports::{AgentEvent, RateLimitInfo, SessionId, Usage};
    let unparsed = || AgentEvent::Unparsed {
        line: line.to_string(),
    };
    match serde_json::from_str::<FakeLine>(line) {
        Ok(FakeLine::Init { session_id }) => match SessionId::new(session_id) {
            Ok(session_id) => AgentEvent::SessionStarted {
                session_id,
                model: None,
            },
            Err(_) => unparsed(),
        },
        Ok(FakeLine::Text { text }) => AgentEvent::Text { text },
        Ok(FakeLine::Result {
            is_error,
            text,
            usage,
            cost_usd,
        }) => AgentEvent::TerminalResult {
            is_error,
            text: Some(text),
            api_status: None,
            usage: Some(Usage {
                input: Some(usage.input_tokens),
                output: Some(usage.output_tokens),
                cost_usd: Some(cost_usd),
                ..Usage::default()
            }),
        },
        Ok(FakeLine::Retry {
            attempt,
            status,
            delay_ms,
        }) => AgentEvent::RetryNotice {
            attempt,
            max: None,
            delay_ms: Some(delay_ms),
            status: Some(status),
        },
        Ok(FakeLine::RateLimit { resets_at, message }) => AgentEvent::RateLimit {
            info: RateLimitInfo {
                resets_at_epoch_s: resets_at,
                retry_after_ms: None,
                rejected: true,
                message,
            },
        },
        Err(_) => unparsed(),
    }
}
