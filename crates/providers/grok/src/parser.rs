//! [`GrokStreamParser`]: one line of `grok -p` output into normalized [`AgentEvent`]s.
//!
//! Grok 1.0.x prints nothing while it works. When the run ends it prints the conversation as
//! OpenAI-style message objects, one JSON object per line, and exits (with code 0 even when the
//! model API failed). The lines come from `processPromptHeadless` in `dist/index.js`:
//!
//! | line | events |
//! |---|---|
//! | `{"role":"user","content":…}` | nothing (the prompt echoed back: here, the pointer sentence) |
//! | `{"role":"assistant","content":…,"tool_calls":[…]}` | `Text` (unless the content is Grok's own filler `Using tools to help you...`), then `ToolUse` per call, `input` being the parsed `arguments` string |
//! | `{"role":"tool","tool_call_id":…,"content":…}` | `ToolResult`, `is_error: false` (Grok does not say whether a tool failed), content shortened to 2 KiB |
//! | `{"role":"assistant","content":…}` without tool calls | the end of the run: see below |
//! | anything else, non-JSON (`Gracefully shutting down...` on SIGTERM), or a known role with missing fields | `Unparsed` |
//!
//! An assistant message without tool calls ends Grok's agent loop, so a run prints exactly one,
//! and it is the last message line. It becomes the terminal event:
//!
//! - `Sorry, I encountered an error: <message>` directly after the user line: Grok's agent loop
//!   caught an error. This is how it reports a failed model call, after its HTTP client's own
//!   retries (`<message>` is `Grok API error: <status> <body message>`, or `Grok API error:
//!   Request timed out.` / `Connection error.` without a status). On this path Grok prints only
//!   the user line and the error, dropping the work done before it, so a message with this prefix
//!   after tool lines is the model's own prose and counts as an answer. →
//!   `TerminalResult { is_error: true, api_status, text }`, preceded by a rejected `RateLimit` when
//!   the status is 429 (the engine then backs off and retries).
//! - `Error: <message>` before any user line: Grok failed outside its agent loop (and exits 1). →
//!   `TerminalResult { is_error: true }`.
//! - `Maximum tool execution rounds reached. Stopping to prevent infinite loops.` (after
//!   `--max-tool-rounds`, default 400): the CLI stopped the agent. → `TerminalResult { is_error:
//!   true }`.
//! - anything else is the answer. → `Text`, then `TerminalResult { is_error: false, text }`.
//!
//! The terminal event is known as its line is read: no buffering until the end of the stream is
//! needed. Grok reports no usage, no session id and no retries.

use corral_engine::StreamParser;
use corral_engine::shorten;
use corral_ports::{AgentEvent, RateLimitInfo};
use serde::Deserialize;
use serde_json::Value;

/// How much of a tool result's content is kept, in bytes.
pub const TOOL_RESULT_KEEP: usize = 2 * 1024;
/// How much of a rate-limit report is kept as its message, in bytes.
const RATE_LIMIT_MESSAGE_KEEP: usize = 512;

/// How Grok's agent loop reports the error that ended it (`grok-agent.js`).
pub const LOOP_ERROR_PREFIX: &str = "Sorry, I encountered an error: ";
/// How Grok's HTTP client words a failed model call (`grok/client.js`).
pub const API_ERROR_PREFIX: &str = "Grok API error: ";
/// How Grok reports a failure outside the agent loop (`index.js`), before exiting 1.
pub const FATAL_PREFIX: &str = "Error: ";
/// Grok's own last message when `--max-tool-rounds` ran out.
pub const MAX_ROUNDS_TEXT: &str =
    "Maximum tool execution rounds reached. Stopping to prevent infinite loops.";
/// What Grok writes as the content of a tool-calling message whose content was empty.
pub const TOOL_CALL_FILLER: &str = "Using tools to help you...";

/// Parses Grok's message lines. One per attempt: it remembers whether the prompt line and any
/// work (tool calls, tool results) were seen, which tells Grok's error report from prose.
#[derive(Debug, Default)]
pub struct GrokStreamParser {
    seen_prompt: bool,
    seen_work: bool,
}

/// One printed message. Unknown fields (`type` on tool calls) are ignored.
#[derive(Debug, Deserialize)]
struct Message {
    role: String,
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<ToolCall>>,
    #[serde(default)]
    tool_call_id: Option<String>,
}

#[derive(Debug, Deserialize)]
struct ToolCall {
    id: String,
    function: Function,
}

#[derive(Debug, Deserialize)]
struct Function {
    name: String,
    #[serde(default)]
    arguments: Option<String>,
}

impl StreamParser for GrokStreamParser {
    fn parse_line(&mut self, line: &str, out: &mut Vec<AgentEvent>) {
        let trimmed = line.trim();
        if trimmed.is_empty() {
            return;
        }
        let Ok(message) = serde_json::from_str::<Message>(trimmed) else {
            out.push(unparsed(line));
            return;
        };
        match message.role.as_str() {
            // The prompt, echoed: the pointer sentence. Nothing new, and kept out of the log.
            "user" => self.seen_prompt = true,
            "assistant" => self.assistant(message, out),
            "tool" => match message.tool_call_id {
                Some(id) => {
                    self.seen_work = true;
                    out.push(AgentEvent::ToolResult {
                        id,
                        is_error: false,
                        content: shorten(
                            message.content.as_deref().unwrap_or_default(),
                            TOOL_RESULT_KEEP,
                        ),
                    });
                }
                None => out.push(unparsed(line)),
            },
            _ => out.push(unparsed(line)),
        }
    }
}

impl GrokStreamParser {
    fn assistant(&mut self, message: Message, out: &mut Vec<AgentEvent>) {
        let content = message.content.unwrap_or_default();
        match message.tool_calls {
            Some(calls) if !calls.is_empty() => {
                self.seen_work = true;
                if !content.is_empty() && content != TOOL_CALL_FILLER {
                    out.push(AgentEvent::Text { text: content });
                }
                for call in calls {
                    out.push(AgentEvent::ToolUse {
                        id: call.id,
                        name: call.function.name,
                        input: tool_input(call.function.arguments),
                    });
                }
            }
            Some(_) | None => {
                let failed = self.reports_failure(&content);
                self.seen_work = true;
                if failed {
                    failure(content, out);
                } else {
                    answer(content, out);
                }
            }
        }
    }

    /// Whether a final message is Grok's own failure report rather than the model's answer.
    fn reports_failure(&self, content: &str) -> bool {
        (self.seen_prompt && !self.seen_work && content.starts_with(LOOP_ERROR_PREFIX))
            || (!self.seen_prompt && content.starts_with(FATAL_PREFIX))
            || content == MAX_ROUNDS_TEXT
    }
}

fn answer(content: String, out: &mut Vec<AgentEvent>) {
    let text = (!content.is_empty()).then_some(content);
    if let Some(text) = &text {
        out.push(AgentEvent::Text { text: text.clone() });
    }
    out.push(AgentEvent::TerminalResult {
        is_error: false,
        text,
        api_status: None,
        usage: None,
    });
}

fn failure(content: String, out: &mut Vec<AgentEvent>) {
    let api_status = api_status(&content);
    if api_status == Some(429) {
        out.push(AgentEvent::RateLimit {
            info: RateLimitInfo {
                resets_at_epoch_s: None,
                retry_after_ms: None,
                rejected: true,
                message: shorten(&content, RATE_LIMIT_MESSAGE_KEEP),
            },
        });
    }
    out.push(AgentEvent::TerminalResult {
        is_error: true,
        text: Some(content),
        api_status,
        usage: None,
    });
}

/// `Sorry, I encountered an error: Grok API error: 429 Rate limited` → 429. The OpenAI SDK words
/// an HTTP error `<status> <message>` (or `<status> status code (no body)`); a timeout or a
/// connection error has no status.
pub fn api_status(content: &str) -> Option<u16> {
    let rest = content
        .strip_prefix(LOOP_ERROR_PREFIX)?
        .strip_prefix(API_ERROR_PREFIX)?;
    let token = rest.split_whitespace().next()?;
    if token.len() != 3 || !token.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    token
        .parse::<u16>()
        .ok()
        .filter(|s| (100..=599).contains(s))
}

/// A tool call's `arguments` string, parsed; kept as a string when it is not JSON (a model can
/// send malformed arguments, and Grok passes them on as it got them).
fn tool_input(arguments: Option<String>) -> Value {
    match arguments {
        None => Value::Null,
        Some(text) => serde_json::from_str(&text).unwrap_or(Value::String(text)),
    }
}

fn unparsed(line: &str) -> AgentEvent {
    AgentEvent::Unparsed {
        line: line.to_string(),
    }
}
