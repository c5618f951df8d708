//! Normalized agent events: every CLI's stream, parsed into one vocabulary.

use serde::{Deserialize, Serialize};

use crate::session::SessionId;
use crate::usage::Usage;

/// What a rate-limit report said.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RateLimitInfo {
    /// When the limit resets, in seconds since the Unix epoch, if the CLI said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(alias = "resets_at_epoch_s")]
    pub resets_at_epoch_s: Option<u64>,
    /// A retry-after hint in milliseconds, if the CLI gave one instead of a reset time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(alias = "retry_after_ms")]
    pub retry_after_ms: Option<u64>,
    /// Whether the CLI gave up on this request (rejected), rather than only warning.
    pub rejected: bool,
    /// The CLI's own words, shortened.
    pub message: String,
}

/// One string of an over-long line that was cut so the line could still be parsed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ShortenedString {
    /// Where the string sits in the line's JSON, as keys and indices:
    /// `message.content[0].input.content`.
    pub path: String,
    /// The string's length in bytes, as decoded from JSON (escapes resolved).
    pub len: u64,
    /// How many of its first bytes were kept; the rest was replaced by a marker naming `len`.
    pub kept: u64,
}

/// One thing an agent did or reported, in the vocabulary shared by all providers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(
    rename_all_fields = "camelCase",
    tag = "event",
    rename_all = "snake_case"
)]
pub enum AgentEvent {
    /// The CLI announced its session id.
    SessionStarted {
        /// The id, validated.
        #[serde(alias = "session_id")]
        session_id: SessionId,
        /// The model the CLI says it uses, if it said.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        model: Option<String>,
    },
    /// Text the agent wrote for the user.
    Text {
        /// The text.
        text: String,
    },
    /// Reasoning the CLI exposed.
    Thinking {
        /// The reasoning text.
        text: String,
    },
    /// The agent called a tool.
    ToolUse {
        /// The CLI's id for this call, to pair it with its result.
        id: String,
        /// The tool's name (`Write`, `Bash`, `exec_command`, …).
        name: String,
        /// The tool input as the CLI reported it.
        input: serde_json::Value,
    },
    /// A tool call finished.
    ToolResult {
        /// The id of the call this answers.
        id: String,
        /// Whether the tool reported an error (a denied permission, a failed command).
        #[serde(alias = "is_error")]
        is_error: bool,
        /// The result text, shortened by the provider where it is large.
        content: String,
    },
    /// A usage report (per turn or per step).
    Usage {
        /// The reported figures.
        usage: Usage,
    },
    /// The CLI reported a rate limit (or an overload that behaves like one).
    RateLimit {
        /// What the report said.
        info: RateLimitInfo,
    },
    /// The CLI is retrying a request on its own.
    RetryNotice {
        /// The CLI's attempt number.
        attempt: u32,
        /// Its maximum, if it said.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max: Option<u32>,
        /// How long it will wait, if it said.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[serde(alias = "delay_ms")]
        delay_ms: Option<u64>,
        /// The HTTP status that caused the retry, if known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        status: Option<u16>,
    },
    /// The CLI's own end-of-run event (`result`, `turn.completed`, …).
    TerminalResult {
        /// Whether the CLI reports the run as failed.
        #[serde(alias = "is_error")]
        is_error: bool,
        /// The final text or error message.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        text: Option<String>,
        /// An HTTP status behind a failure, if the CLI reported one (Claude `api_error_status`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[serde(alias = "api_status")]
        api_status: Option<u16>,
        /// The run's usage as the terminal event reports it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        usage: Option<Usage>,
    },
    /// A stdout line longer than the per-line cap whose long strings were cut in place so that
    /// it fits under the cap and still parses: the events parsed from the shortened line follow
    /// this one. Each cut string ends with a marker naming its original length.
    LineShortened {
        /// The line's length in bytes as the CLI printed it.
        len: u64,
        /// Its length after shortening.
        kept: u64,
        /// The strings that were cut (the first 64 of them).
        strings: Vec<ShortenedString>,
    },
    /// A stdout line longer than the per-line cap that could not be shortened (it is not JSON,
    /// or it stays over the cap even with its long strings cut); nothing was parsed from it. The
    /// stream kept flowing past it.
    OversizedLine {
        /// The line's length in bytes.
        len: u64,
        /// Its first bytes, decoded lossily.
        prefix: String,
    },
    /// A stdout line the provider's parser did not recognise; kept so nothing is lost.
    Unparsed {
        /// The line, shortened to a few KiB.
        line: String,
    },
}

impl AgentEvent {
    /// A short name for the event's kind, for live views and logs.
    pub fn kind(&self) -> &'static str {
        match self {
            AgentEvent::SessionStarted { .. } => "session_started",
            AgentEvent::Text { .. } => "text",
            AgentEvent::Thinking { .. } => "thinking",
            AgentEvent::ToolUse { .. } => "tool_use",
            AgentEvent::ToolResult { .. } => "tool_result",
            AgentEvent::Usage { .. } => "usage",
            AgentEvent::RateLimit { .. } => "rate_limit",
            AgentEvent::RetryNotice { .. } => "retry_notice",
            AgentEvent::TerminalResult { .. } => "terminal_result",
            AgentEvent::LineShortened { .. } => "line_shortened",
            AgentEvent::OversizedLine { .. } => "oversized_line",
            AgentEvent::Unparsed { .. } => "unparsed",
        }
    }
}
