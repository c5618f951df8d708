//! [`ClaudeStreamParser`]: one line of `claude -p --verbose --output-format stream-json` into
//! normalized [`AgentEvent`]s.
//!
//! | line | events |
//! |---|---|
//! | `system` / `init` | `SessionStarted { session_id, model }` |
//! | `system` / `api_retry` | `RetryNotice { attempt, max, delay_ms, status }` |
//! | `system`, any other subtype | `Unparsed` (kept whole in the execution log) |
//! | `assistant` | per content block: `Text`, `Thinking`, `ToolUse` (`tool_use`, `server_tool_use`, `mcp_tool_use`); then one `Usage` per message id |
//! | `user` | `ToolResult` per `tool_result` block (content shortened to 2 KiB) |
//! | `rate_limit_event` | `RateLimit { info }` |
//! | `result` | `TerminalResult { is_error, text, api_status, usage }` |
//! | `stream_event` | nothing (partial deltas; the complete `assistant` line follows) |
//! | anything else, non-JSON, or a known type with missing fields | `Unparsed` |
//!
//! Usage: Claude repeats a message's `usage` on every content-block line of that message, and
//! these figures are a snapshot from the start of the message (output tokens are counted as 1
//! where the `result` line reports 7). The parser therefore emits one `Usage` per message id (of
//! the last 64 messages: a message's lines come together), and none for the CLI's `<synthetic>`
//! error messages. The engine prefers the `result` line's usage,
//! which is the authoritative total with the cost, so these events only count when a run dies
//! before `result` (killed by a watchdog, crashed): input and cache tokens are then right, output
//! tokens a lower bound.
//!
//! The session id comes from `system/init`, the first line, printed before any API call. Should it
//! be missing, the first `assistant` or `user` line carrying a valid id stands in. A `result` line
//! never does: after a failed `--resume` it carries the id that was asked for (or a fresh one
//! that was never saved), not a conversation that exists.

use std::borrow::Cow;
use std::collections::VecDeque;

use corral_engine::StreamParser;
use corral_engine::shorten;
use corral_ports::{AgentEvent, RateLimitInfo, SessionId, Usage};
use serde_json::{Map, Value};

/// How much of a tool result's content is kept, in bytes.
pub const TOOL_RESULT_KEEP: usize = 2 * 1024;
/// How much of a rate-limit report is kept as its message, in bytes.
const RATE_LIMIT_MESSAGE_KEEP: usize = 512;
/// The model name Claude Code gives the assistant messages it makes up to report an API error.
const SYNTHETIC_MODEL: &str = "<synthetic>";

/// Parses Claude Code's stream-json output. One per attempt: it remembers whether the session was
/// announced and which messages' usage it has reported.
#[derive(Debug, Default)]
pub struct ClaudeStreamParser {
    session_announced: bool,
    usage_reported: RecentIds,
}

/// How many message ids [`RecentIds`] remembers.
const RECENT_IDS: usize = 64;

/// The ids of the last messages whose usage was reported. Claude Code prints a message's content
/// blocks a line each, one after the other (a sub-agent's lines may come between), so a message
/// seen again is one of the last few. A set of every id grew with the stream: 200 000 messages
/// held about 10 MiB until the run ended.
#[derive(Debug, Default)]
struct RecentIds(VecDeque<String>);

impl RecentIds {
    /// True the first time `id` is offered (among the last [`RECENT_IDS`]), and remembers it.
    fn first_time(&mut self, id: &str) -> bool {
        if self.0.iter().any(|seen| seen == id) {
            return false;
        }
        if self.0.len() == RECENT_IDS {
            self.0.pop_front();
        }
        self.0.push_back(id.to_string());
        true
    }
}

impl StreamParser for ClaudeStreamParser {
    fn parse_line(&mut self, line: &str, out: &mut Vec<AgentEvent>) {
        let trimmed = line.trim();
        if trimmed.is_empty() {
            return;
        }
        if self.session_announced && self.text_only_assistant(trimmed, out) {
            return;
        }
        let Ok(Value::Object(obj)) = serde_json::from_str::<Value>(trimmed) else {
            out.push(unparsed(line));
            return;
        };
        let before = out.len();
        let recognised = match str_field(&obj, "type") {
            Some("system") => self.system(&obj, out),
            Some("assistant") => self.assistant(&obj, out),
            Some("user") => self.user(&obj, out),
            Some("result") => result(&obj, out),
            Some("rate_limit_event") => rate_limit(&obj, out),
            Some("stream_event") => true,
            Some(_) | None => false,
        };
        if !recognised {
            out.truncate(before);
            out.push(unparsed(line));
        }
    }
}

impl ClaudeStreamParser {
    fn system(&mut self, obj: &Map<String, Value>, out: &mut Vec<AgentEvent>) -> bool {
        match str_field(obj, "subtype") {
            Some("init") => {
                let Some(session_id) = session_id(obj) else {
                    return false;
                };
                self.session_announced = true;
                out.push(AgentEvent::SessionStarted {
                    session_id,
                    model: str_field(obj, "model").map(str::to_string),
                });
                true
            }
            Some("api_retry") => {
                let Some(attempt) = u32_field(obj, "attempt") else {
                    return false;
                };
                out.push(AgentEvent::RetryNotice {
                    attempt,
                    max: u32_field(obj, "max_retries"),
                    delay_ms: obj.get("retry_delay_ms").and_then(whole_number),
                    status: obj
                        .get("error_status")
                        .and_then(Value::as_u64)
                        .and_then(|s| u16::try_from(s).ok()),
                });
                true
            }
            Some(_) | None => false,
        }
    }

    fn assistant(&mut self, obj: &Map<String, Value>, out: &mut Vec<AgentEvent>) -> bool {
        let Some(message) = obj.get("message").and_then(Value::as_object) else {
            return false;
        };
        let model = str_field(message, "model").filter(|m| *m != SYNTHETIC_MODEL);
        self.announce_fallback(obj, model, out);
        match message.get("content") {
            Some(Value::Array(blocks)) => {
                for block in blocks {
                    assistant_block(block, out);
                }
            }
            Some(Value::String(text)) if !text.is_empty() => {
                out.push(AgentEvent::Text { text: text.clone() });
            }
            Some(_) | None => {}
        }
        if let (Some(id), Some(usage), Some(_)) = (
            str_field(message, "id"),
            message.get("usage").and_then(Value::as_object),
            model,
        ) && self.usage_reported.first_time(id)
        {
            out.push(AgentEvent::Usage {
                usage: usage_of(usage, None),
            });
        }
        true
    }

    fn user(&mut self, obj: &Map<String, Value>, out: &mut Vec<AgentEvent>) -> bool {
        let Some(message) = obj.get("message").and_then(Value::as_object) else {
            return false;
        };
        self.announce_fallback(obj, None, out);
        // Text content is the prompt echoed back or context the CLI injected; both are known
        // already, and echoing the prompt into the log would copy it there.
        if let Some(Value::Array(blocks)) = message.get("content") {
            for block in blocks {
                if block.get("type").and_then(Value::as_str) == Some("tool_result") {
                    out.push(tool_result(block));
                }
            }
        }
        true
    }

    fn announce_fallback(
        &mut self,
        obj: &Map<String, Value>,
        model: Option<&str>,
        out: &mut Vec<AgentEvent>,
    ) {
        if self.session_announced {
            return;
        }
        if let Some(session_id) = session_id(obj) {
            self.session_announced = true;
            out.push(AgentEvent::SessionStarted {
                session_id,
                model: model.map(str::to_string),
            });
        }
    }
}

/// The commonest line: an `assistant` message of `text` blocks only, with or without `usage` (as
/// Claude Code prints it, every line carries its message's). Its fields are read borrowed from
/// the line, not built into a `Value` tree. Each struct has a flattened catch-all, so that serde
/// reads it from a JSON object only (as the general path does; a struct alone would also take an
/// array). Every other line, and one this shape does not read (a duplicate field, a block that
/// is not text, a count that is not a whole number), goes the general way.
#[derive(serde::Deserialize)]
struct TextLine<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(borrow)]
    message: TextMessage<'a>,
    #[serde(flatten)]
    _rest: serde::de::IgnoredAny,
}

#[derive(serde::Deserialize)]
struct TextMessage<'a> {
    #[serde(borrow)]
    content: Vec<TextBlock<'a>>,
    #[serde(borrow, default)]
    id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    model: Option<Cow<'a, str>>,
    #[serde(default)]
    usage: Option<TokenCounts>,
    #[serde(flatten)]
    _rest: serde::de::IgnoredAny,
}

/// A message's `usage`, read as [`usage_of`] reads it from a `Value`.
#[derive(serde::Deserialize)]
struct TokenCounts {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
    #[serde(default)]
    cache_read_input_tokens: Option<u64>,
    #[serde(default)]
    cache_creation_input_tokens: Option<u64>,
    #[serde(flatten)]
    _rest: serde::de::IgnoredAny,
}

impl TokenCounts {
    fn usage(&self) -> Usage {
        Usage {
            input: self.input_tokens,
            output: self.output_tokens,
            cache_read: self.cache_read_input_tokens,
            cache_write: self.cache_creation_input_tokens,
            reasoning: None,
            cost_usd: None,
            premium_requests: None,
        }
    }
}

#[derive(serde::Deserialize)]
struct TextBlock<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(borrow)]
    text: Option<Cow<'a, str>>,
    #[serde(flatten)]
    _rest: serde::de::IgnoredAny,
}

impl ClaudeStreamParser {
    /// Reads `line` as a [`TextLine`] into `out`: what [`ClaudeStreamParser::assistant`] makes
    /// of it once the session is announced. False (and `out` untouched) when it is not one.
    fn text_only_assistant(&mut self, line: &str, out: &mut Vec<AgentEvent>) -> bool {
        let Ok(parsed) = serde_json::from_str::<TextLine<'_>>(line) else {
            return false;
        };
        if parsed.kind != "assistant" || parsed.message.content.iter().any(|b| b.kind != "text") {
            return false;
        }
        let TextMessage {
            content,
            id,
            model,
            usage,
            ..
        } = parsed.message;
        out.extend(
            content
                .into_iter()
                .filter_map(|b| b.text.filter(|t| !t.is_empty()))
                .map(|text| AgentEvent::Text {
                    text: text.into_owned(),
                }),
        );
        if let (Some(id), Some(usage), Some(model)) = (id, usage, model)
            && model != SYNTHETIC_MODEL
            && self.usage_reported.first_time(&id)
        {
            out.push(AgentEvent::Usage {
                usage: usage.usage(),
            });
        }
        true
    }
}

fn assistant_block(block: &Value, out: &mut Vec<AgentEvent>) {
    let Some(obj) = block.as_object() else {
        out.push(unparsed(&block.to_string()));
        return;
    };
    match str_field(obj, "type") {
        Some("text") => {
            if let Some(text) = str_field(obj, "text").filter(|t| !t.is_empty()) {
                out.push(AgentEvent::Text {
                    text: text.to_string(),
                });
            }
        }
        Some("thinking") => {
            if let Some(text) = str_field(obj, "thinking").filter(|t| !t.is_empty()) {
                out.push(AgentEvent::Thinking {
                    text: text.to_string(),
                });
            }
        }
        // Encrypted reasoning: nothing readable to report.
        Some("redacted_thinking") => {}
        Some("tool_use" | "server_tool_use" | "mcp_tool_use") => {
            match (str_field(obj, "id"), str_field(obj, "name")) {
                (Some(id), Some(name)) => out.push(AgentEvent::ToolUse {
                    id: id.to_string(),
                    name: name.to_string(),
                    input: obj.get("input").cloned().unwrap_or(Value::Null),
                }),
                _ => out.push(unparsed(&block.to_string())),
            }
        }
        Some(_) | None => out.push(unparsed(&block.to_string())),
    }
}

fn tool_result(block: &Value) -> AgentEvent {
    let content = match block.get("content") {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .map(|part| match part.get("type").and_then(Value::as_str) {
                Some("text") => part
                    .get("text")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
                Some(kind) => format!("[{kind}]"),
                None => part.to_string(),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    };
    AgentEvent::ToolResult {
        id: block
            .get("tool_use_id")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        is_error: block
            .get("is_error")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        content: shorten(&content, TOOL_RESULT_KEEP),
    }
}

fn result(obj: &Map<String, Value>, out: &mut Vec<AgentEvent>) -> bool {
    let subtype = str_field(obj, "subtype");
    let failed_subtype = subtype.is_some_and(|s| s != "success");
    let is_error = obj
        .get("is_error")
        .and_then(Value::as_bool)
        .unwrap_or(failed_subtype)
        || subtype.is_some_and(|s| s.starts_with("error"));
    let mut parts: Vec<String> = Vec::new();
    if let Some(text) = str_field(obj, "result").filter(|t| !t.is_empty()) {
        parts.push(text.to_string());
    }
    if let Some(Value::Array(errors)) = obj.get("errors") {
        parts.extend(errors.iter().map(|e| match e.as_str() {
            Some(s) => s.to_string(),
            None => e.to_string(),
        }));
    }
    let text = if parts.is_empty() {
        is_error.then(|| format!("Claude Code ended with {}", subtype.unwrap_or("an error")))
    } else {
        Some(parts.join("; "))
    };
    let cost = obj.get("total_cost_usd").and_then(Value::as_f64);
    let usage = match obj.get("usage").and_then(Value::as_object) {
        Some(u) => Some(usage_of(u, cost)),
        None => cost.map(|c| Usage {
            cost_usd: Some(c),
            ..Usage::default()
        }),
    };
    out.push(AgentEvent::TerminalResult {
        is_error,
        text,
        api_status: obj
            .get("api_error_status")
            .and_then(Value::as_u64)
            .and_then(|s| u16::try_from(s).ok()),
        usage,
    });
    true
}

/// `{"type":"rate_limit_event","rate_limit_info":{"status","resetsAt","rateLimitType",
/// "utilization","overageStatus",…}}`. `rejected` only when the status is `rejected` and overage
/// (extra usage beyond the plan) does not carry the request on.
fn rate_limit(obj: &Map<String, Value>, out: &mut Vec<AgentEvent>) -> bool {
    let Some(info) = obj.get("rate_limit_info").and_then(Value::as_object) else {
        return false;
    };
    let status = str_field(info, "status").unwrap_or("unknown");
    let overage = str_field(info, "overageStatus");
    let overage_carries = matches!(overage, Some("allowed" | "allowed_warning"));
    let mut message = format!("status {status}");
    if let Some(kind) = str_field(info, "rateLimitType") {
        message.push_str(&format!(", limit {kind}"));
    }
    if let Some(used) = info.get("utilization").and_then(Value::as_f64) {
        message.push_str(&format!(", utilization {used}"));
    }
    if let Some(overage) = overage {
        message.push_str(&format!(", overage {overage}"));
    }
    out.push(AgentEvent::RateLimit {
        info: RateLimitInfo {
            resets_at_epoch_s: info.get("resetsAt").and_then(epoch_seconds),
            retry_after_ms: None,
            rejected: status == "rejected" && !overage_carries,
            message: shorten(&message, RATE_LIMIT_MESSAGE_KEEP),
        },
    });
    true
}

fn usage_of(usage: &Map<String, Value>, cost_usd: Option<f64>) -> Usage {
    let count = |key: &str| usage.get(key).and_then(Value::as_u64);
    Usage {
        input: count("input_tokens"),
        output: count("output_tokens"),
        cache_read: count("cache_read_input_tokens"),
        cache_write: count("cache_creation_input_tokens"),
        reasoning: None,
        cost_usd,
        premium_requests: None,
    }
}

fn session_id(obj: &Map<String, Value>) -> Option<SessionId> {
    str_field(obj, "session_id").and_then(|id| SessionId::new(id).ok())
}

fn str_field<'a>(obj: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    obj.get(key).and_then(Value::as_str)
}

fn u32_field(obj: &Map<String, Value>, key: &str) -> Option<u32> {
    obj.get(key)
        .and_then(Value::as_u64)
        .and_then(|n| u32::try_from(n).ok())
}

/// A non-negative number rounded to a whole one (Claude writes `retry_delay_ms` with a fraction).
fn whole_number(value: &Value) -> Option<u64> {
    match value.as_u64() {
        Some(n) => Some(n),
        None => value
            .as_f64()
            .filter(|f| f.is_finite() && *f >= 0.0 && *f < u64::MAX as f64)
            .map(|f| f.round() as u64),
    }
}

/// Seconds since the epoch; a value too large for seconds is taken as milliseconds.
fn epoch_seconds(value: &Value) -> Option<u64> {
    const MILLIS_THRESHOLD: u64 = 100_000_000_000;
    whole_number(value).map(|n| if n >= MILLIS_THRESHOLD { n / 1000 } else { n })
}

fn unparsed(line: &str) -> AgentEvent {
    AgentEvent::Unparsed {
        line: line.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the general path makes of `line` once the session is announced.
    fn general(line: &str) -> Vec<AgentEvent> {
        let mut parser = ClaudeStreamParser {
            session_announced: true,
            ..ClaudeStreamParser::default()
        };
        let mut out = Vec::new();
        match serde_json::from_str::<Value>(line) {
            Ok(Value::Object(obj)) if parser.assistant(&obj, &mut out) => out,
            _ => vec![unparsed(line)],
        }
    }

    /// The borrowed reading of text-only lines makes what the `Value` tree makes, and leaves
    /// every line it is not sure of to it: arrays in place of objects, duplicates, other blocks,
    /// fields of the wrong type.
    #[test]
    fn the_text_only_reading_agrees_with_the_general_one() {
        let taken = [
            r#"{"type":"assistant","message":{"id":"m","model":"x","content":[{"type":"text","text":"hi \"there\"\n\u001b"}],"stop_reason":null},"session_id":"s"}"#,
            r#"{"type":"assistant","message":{"content":[{"type":"text","text":""},{"type":"text","text":"b","citations":[]}],"usage":null}}"#,
            r#"{"type":"assistant","message":{"content":[{"type":"text"}]}}"#,
            r#"{"type":"assistant","message":{"content":[]},"parent_tool_use_id":null}"#,
            r#"{"type":"assistant","message":{"id":"m","model":"x","content":[{"type":"text","text":"a"}],"usage":{"input_tokens":1}}}"#,
            r#"{"type":"assistant","message":{"id":"m","model":"x","content":[{"type":"text","text":"a"}],"usage":{"input_tokens":3,"output_tokens":1,"cache_read_input_tokens":2,"cache_creation_input_tokens":0,"service_tier":"standard"}}}"#,
            r#"{"type":"assistant","message":{"id":"m","content":[{"type":"text","text":"a"}],"usage":{"input_tokens":1}}}"#,
            r#"{"type":"assistant","message":{"id":"m","model":"<synthetic>","content":[{"type":"text","text":"Invalid API key"}],"usage":{"input_tokens":0}}}"#,
            r#"{"type":"assistant","message":{"id":"m","model":"x","content":[{"type":"text","text":"a"}],"usage":{"input_tokens":null}}}"#,
        ];
        let left = [
            r#"{"type":"assistant","message":{"id":"m","model":"x","content":[{"type":"text","text":"a"}],"usage":[1]}}"#,
            r#"{"type":"assistant","message":{"id":"m","model":"x","content":[{"type":"text","text":"a"}],"usage":{"input_tokens":1.5}}}"#,
            r#"{"type":"assistant","message":{"id":"m","model":"x","content":[{"type":"text","text":"a"}],"usage":{"input_tokens":1,"input_tokens":2}}}"#,
            r#"{"type":"assistant","message":{"id":7,"model":"x","content":[{"type":"text","text":"a"}],"usage":{"input_tokens":1}}}"#,
            r#"{"type":"assistant","message":{"content":[{"type":"tool_use","id":"t","name":"Bash","input":{}}]}}"#,
            r#"{"type":"assistant","message":{"content":[{"type":"text","text":"a"},{"type":"thinking","thinking":"b"}]}}"#,
            r#"{"type":"assistant","message":{"content":"a string"}}"#,
            r#"{"type":"assistant","message":{"content":[{"type":"text","text":5}]}}"#,
            r#"{"type":"assistant","type":"assistant","message":{"content":[{"type":"text","text":"a"}]}}"#,
            r#"{"type":"assistant","message":{"content":[{"type":"text","text":"a","text":"b"}]}}"#,
            r#"{"type":"user","message":{"content":[{"type":"text","text":"a"}]}}"#,
            r#"{"type":"assistant","message":[[{"type":"text","text":"a"}],null,1]}"#,
            r#"{"type":"assistant","message":{"content":[["text","a",1]]}}"#,
            r#"["assistant",{"content":[{"type":"text","text":"a"}]},1]"#,
            r#"{"type":"assistant","message":[[{"type":"text","text":"a"}],null]}"#,
            r#"{"type":"assistant","message":{"content":[["text","a"]]}}"#,
            r#"["assistant",{"content":[{"type":"text","text":"a"}]}]"#,
            r#"{"type":"assistant","message":{"content":[{"type":"text","text":"a"}]}} trailing"#,
        ];
        for line in taken {
            let mut out = Vec::new();
            assert!(
                announced().text_only_assistant(line, &mut out),
                "not taken: {line}"
            );
            assert_eq!(out, general(line), "{line}");
        }
        for line in left {
            let mut out = Vec::new();
            assert!(
                !announced().text_only_assistant(line, &mut out),
                "taken: {line}"
            );
            assert!(out.is_empty());
        }
    }

    fn announced() -> ClaudeStreamParser {
        ClaudeStreamParser {
            session_announced: true,
            ..ClaudeStreamParser::default()
        }
    }

    /// A message's lines report its usage once, whichever path reads them, and what is
    /// remembered stays bounded however long the stream.
    #[test]
    fn usage_is_reported_once_a_message_and_the_memory_of_ids_is_bounded() {
        let mut parser = announced();
        let line = |id: usize, block: &str| {
            format!(
                r#"{{"type":"assistant","message":{{"id":"msg_{id}","model":"x","content":[{block}],"usage":{{"input_tokens":1}}}}}}"#
            )
        };
        let mut usages = 0;
        for id in 0..1000 {
            for block in [
                r#"{"type":"text","text":"a"}"#,
                r#"{"type":"tool_use","id":"t","name":"Bash","input":{}}"#,
                r#"{"type":"text","text":"b"}"#,
            ] {
                let mut out = Vec::new();
                parser.parse_line(&line(id, block), &mut out);
                usages += out
                    .iter()
                    .filter(|e| matches!(e, AgentEvent::Usage { .. }))
                    .count();
            }
        }
        assert_eq!(usages, 1000);
        assert_eq!(parser.usage_reported.0.len(), RECENT_IDS);
    }
}
