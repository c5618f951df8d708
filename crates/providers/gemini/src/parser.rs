//! [`GeminiStreamParser`]: Gemini CLI's `--output-format stream-json` lines onto [`AgentEvent`]s.
//!
//! Every line is one JSON object with a `type` (recorded with `@google/gemini-cli@0.61.0` against
//! a fake model API; the samples are in `tests/fixtures/gemini/`):
//! - `init` (`session_id`, `model`): the session, printed before the first request. It becomes
//!   `SessionStarted` only with the first sign that the model answered (an assistant message, a
//!   tool call, a successful `result`): a first turn that fails (after 429s, recorded) leaves a
//!   session file with no user message, and `--resume` of it exits 42 with `No previous sessions
//!   found for this project.` (../shared/cli-behaviour/README.md), so an id captured before the
//!   answer would send the retry into a stale session instead of a cold run. `model` is `auto`
//!   unless `-m` named one.
//! - `message` with `role: "user"`: the prompt, echoed. Nothing new, and kept out of the log.
//! - `message` with `role: "assistant"` and `delta: true`: a piece of the answer → `Text`. The
//!   pieces are also joined, so that the terminal event carries the whole answer.
//! - `tool_use` (`tool_name`, `tool_id`, `parameters`) → `ToolUse`.
//! - `tool_result` (`tool_id`, `status` `success`/`error`, `output`, `error.message`) →
//!   `ToolResult`. A successful `write_file` has no `output`.
//! - `error` (`severity`, `message`): a warning or error Gemini reports mid-turn → `Unparsed`, so
//!   that it is in the execution log and never taken for the answer.
//! - `result` (`status` `success`/`error`, `error.message`, `stats`) → `Usage` and
//!   `TerminalResult`. `stats` sums the tokens of every model the turn used (the routing request
//!   to a flash-lite model included); `input_tokens` counts cached tokens too, `cached` separately.
//!   Gemini's error message carries no HTTP status (`[API Error: Resource has been exhausted (e.g.
//!   check quota).]`), so the status is read from its wording: the quota sentence is 429, the
//!   not-found sentence 404.
//!
//! Anything else (a line that is not JSON, an unknown `type`) becomes `Unparsed`.

use corral_engine::{StreamParser, shorten};
use corral_ports::{AgentEvent, RateLimitInfo, SessionId, Usage};
use serde::Deserialize;
use serde_json::Value;

/// How much of a tool result's content is kept, in bytes.
pub const TOOL_RESULT_KEEP: usize = 2 * 1024;
/// How much of a rate-limit report is kept as its message, in bytes.
const RATE_LIMIT_MESSAGE_KEEP: usize = 512;

/// Gemini's wording of a 429 (`RESOURCE_EXHAUSTED`) once its own retries gave up.
pub const QUOTA_TEXT: &str = "Resource has been exhausted";
/// Gemini's advice after a quota error, which names no status either.
pub const QUOTA_ADVICE: &str = "request a quota increase";
/// The Gemini API's wording of an unknown model (HTTP 404).
pub const MODEL_NOT_FOUND_TEXT: &str = "is not found for API version";

/// Parses Gemini's stream-json lines. One per attempt: it holds the session until the model
/// answers, and joins the answer's pieces.
#[derive(Debug, Default)]
pub struct GeminiStreamParser {
    answer: String,
    /// The `init` line's session, not yet reported.
    pending: Option<AgentEvent>,
}

/// One stream-json line; fields a line type lacks are `None`.
#[derive(Debug, Deserialize)]
struct Line {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    session_id: Option<String>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    role: Option<String>,
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    tool_name: Option<String>,
    #[serde(default)]
    tool_id: Option<String>,
    #[serde(default)]
    parameters: Option<Value>,
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    output: Option<String>,
    #[serde(default)]
    error: Option<ErrorBody>,
    #[serde(default)]
    stats: Option<Stats>,
}

#[derive(Debug, Deserialize)]
struct ErrorBody {
    #[serde(default)]
    message: Option<String>,
}

/// `result.stats`: the turn's totals over every model.
#[derive(Debug, Deserialize)]
struct Stats {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
    #[serde(default)]
    cached: Option<u64>,
}

impl StreamParser for GeminiStreamParser {
    fn parse_line(&mut self, line: &str, out: &mut Vec<AgentEvent>) {
        let trimmed = line.trim();
        if trimmed.is_empty() {
            return;
        }
        let Ok(parsed) = serde_json::from_str::<Line>(trimmed) else {
            out.push(unparsed(line));
            return;
        };
        match parsed.kind.as_str() {
            // An id that is no valid session id (empty, a path) is kept as text, never resumed.
            "init" => match parsed.session_id.map(SessionId::new) {
                Some(Ok(session_id)) => {
                    self.pending = Some(AgentEvent::SessionStarted {
                        session_id,
                        model: parsed.model,
                    });
                }
                Some(Err(_)) | None => out.push(unparsed(line)),
            },
            "message" => match (parsed.role.as_deref(), parsed.content) {
                (Some("user"), _) => {}
                (Some("assistant"), Some(text)) => {
                    self.answered(out);
                    if !text.is_empty() {
                        self.answer.push_str(&text);
                        out.push(AgentEvent::Text { text });
                    }
                }
                _ => out.push(unparsed(line)),
            },
            "tool_use" => match (parsed.tool_id, parsed.tool_name) {
                (Some(id), Some(name)) => {
                    self.answered(out);
                    out.push(AgentEvent::ToolUse {
                        id,
                        name,
                        input: parsed.parameters.unwrap_or(Value::Null),
                    });
                }
                _ => out.push(unparsed(line)),
            },
            "tool_result" => match parsed.tool_id {
                Some(id) => {
                    let is_error = parsed.status.as_deref() != Some("success");
                    let content = parsed
                        .output
                        .or_else(|| parsed.error.and_then(|e| e.message))
                        .unwrap_or_default();
                    out.push(AgentEvent::ToolResult {
                        id,
                        is_error,
                        content: shorten(&content, TOOL_RESULT_KEEP),
                    });
                }
                None => out.push(unparsed(line)),
            },
            "result" => self.result(parsed, out),
            _ => out.push(unparsed(line)),
        }
    }
}

impl GeminiStreamParser {
    /// The model answered: the session held since `init` is now worth resuming.
    fn answered(&mut self, out: &mut Vec<AgentEvent>) {
        out.extend(self.pending.take());
    }

    fn result(&mut self, line: Line, out: &mut Vec<AgentEvent>) {
        if line.status.as_deref() == Some("success") {
            self.answered(out);
        }
        let usage = line.stats.map(|stats| Usage {
            // Gemini's input count includes the cached tokens; ours excludes them.
            input: stats
                .input_tokens
                .map(|input| input.saturating_sub(stats.cached.unwrap_or(0))),
            output: stats.output_tokens,
            cache_read: stats.cached,
            ..Usage::default()
        });
        if let Some(usage) = usage {
            out.push(AgentEvent::Usage { usage });
        }
        let answer = std::mem::take(&mut self.answer);
        match line.status.as_deref() {
            Some("success") => out.push(AgentEvent::TerminalResult {
                is_error: false,
                text: (!answer.is_empty()).then_some(answer),
                api_status: None,
                usage,
            }),
            Some(_) | None => {
                let message = line.error.and_then(|e| e.message).unwrap_or_default();
                let api_status = api_status(&message);
                if api_status == Some(429) {
                    out.push(AgentEvent::RateLimit {
                        info: RateLimitInfo {
                            resets_at_epoch_s: None,
                            retry_after_ms: None,
                            rejected: true,
                            message: shorten(&message, RATE_LIMIT_MESSAGE_KEEP),
                        },
                    });
                }
                out.push(AgentEvent::TerminalResult {
                    is_error: true,
                    text: (!message.is_empty()).then_some(message),
                    api_status,
                    usage,
                });
            }
        }
    }
}

/// The HTTP status behind a `result` error, from the only place Gemini keeps it: the API's
/// wording, which Gemini quotes as `[API Error: <message>]`.
pub fn api_status(message: &str) -> Option<u16> {
    let api = message.strip_prefix("[API Error: ")?;
    if api.contains(QUOTA_TEXT) || message.contains(QUOTA_ADVICE) {
        Some(429)
    } else if api.contains(MODEL_NOT_FOUND_TEXT) {
        Some(404)
    } else {
        None
    }
}

fn unparsed(line: &str) -> AgentEvent {
    AgentEvent::Unparsed {
        line: line.to_string(),
    }
}
