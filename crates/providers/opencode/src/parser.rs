//! [`OpencodeStreamParser`]: one line of `opencode run --format json` into normalized
//! [`AgentEvent`]s.
//!
//! Every line is `{"type", "timestamp", "sessionID", …}`; the payload is a message `part` or an
//! `error`.
//!
//! | line | events |
//! |---|---|
//! | any line, the first with a valid `sessionID` | `SessionStarted { session_id, model: None }` first |
//! | `step_start` | nothing more |
//! | `text` | `Text` (the part is printed once, complete) |
//! | `reasoning` (only with `--thinking`) | `Thinking` |
//! | `tool_use` | `ToolUse { id: callID, name: tool, input: state.input }`, then `ToolResult` when `state.status` is `completed` (output) or `error` (error), shortened to 2 KiB |
//! | `step_finish` | `Usage` of the step; when `reason` is `stop`, then `TerminalResult { is_error: false, usage: sum of every step so far }` |
//! | `error` | `RateLimit { rejected: true }` for HTTP 429/529 (with `retry-after`); then `TerminalResult { is_error: true, text: "<name>: <message>", api_status: statusCode, usage: sum so far }` |
//! | `done` (newer OpenCode builds) | `TerminalResult { is_error: false, usage: sum }`, unless a `stop` or an error already ended the run |
//! | anything else, non-JSON, or a known type with missing fields | `Unparsed` |
//!
//! The end of a run: OpenCode 1.18 prints no end-of-run line. A step that ends with reason `stop`
//! is the model's final answer, so it is taken as the terminal event; `tool-calls` (and any other
//! reason) is a step within the run. The engine then gives the CLI its post-terminal grace to exit.
//! Known gap: OpenCode's automatic compaction (when the context fills) is a summarising step that
//! also ends with `stop` and is followed by more steps in the same run; if the next step's first
//! line comes later than the grace, the run is ended early and reported as a success.
//!
//! Usage: every `step_finish` carries that step's tokens (`input` without cache, `output`,
//! `reasoning`, `cache.read`, `cache.write`) and dollar cost. Each becomes one `Usage` event, and
//! every terminal event carries the running sum, so the engine (which prefers the terminal
//! event's usage over the sum of `Usage` events) counts each step once; a run killed before its
//! terminal event is counted from the `Usage` events, to the same total.
//!
//! Failure: once an `error` line was seen, OpenCode exits 1 whatever follows, so a later `stop`
//! or `done` does not report success.

use corral_engine::StreamParser;
use corral_engine::shorten;
use corral_ports::{AgentEvent, RateLimitInfo, SessionId, Usage};
use serde_json::{Map, Value};

/// How much of a tool result's content is kept, in bytes.
pub const TOOL_RESULT_KEEP: usize = 2 * 1024;
/// How much of an error's text is kept, in bytes.
pub const ERROR_TEXT_KEEP: usize = 2 * 1024;
/// How much of a rate-limit report is kept as its message, in bytes.
const RATE_LIMIT_MESSAGE_KEEP: usize = 512;

/// Parses OpenCode's `--format json` output. One per attempt: it remembers whether the session
/// was announced, the usage summed so far and whether the run already failed or finished.
#[derive(Debug, Default)]
pub struct OpencodeStreamParser {
    session_announced: bool,
    total: Option<Usage>,
    failed: bool,
    finished: bool,
}

impl StreamParser for OpencodeStreamParser {
    fn parse_line(&mut self, line: &str, out: &mut Vec<AgentEvent>) {
        let trimmed = line.trim();
        if trimmed.is_empty() {
            return;
        }
        let Ok(Value::Object(obj)) = serde_json::from_str::<Value>(trimmed) else {
            out.push(unparsed(line));
            return;
        };
        self.announce_session(&obj, out);
        let before = out.len();
        let recognised = match str_field(&obj, "type") {
            Some("step_start") => true,
            Some("text") => part_text(&obj, out, |text| AgentEvent::Text { text }),
            Some("reasoning") => part_text(&obj, out, |text| AgentEvent::Thinking { text }),
            Some("tool_use") => tool_use(&obj, out),
            Some("step_finish") => self.step_finish(&obj, out),
            Some("error") => self.error(&obj, out),
            Some("done") => self.done(out),
            Some(_) | None => false,
        };
        if !recognised {
            out.truncate(before);
            out.push(unparsed(line));
        }
    }
}

impl OpencodeStreamParser {
    /// The first valid `sessionID` of the run, from the envelope or else from the part.
    fn announce_session(&mut self, obj: &Map<String, Value>, out: &mut Vec<AgentEvent>) {
        if self.session_announced {
            return;
        }
        let id = session_id(obj).or_else(|| {
            obj.get("part")
                .and_then(Value::as_object)
                .and_then(session_id)
        });
        if let Some(session_id) = id {
            self.session_announced = true;
            out.push(AgentEvent::SessionStarted {
                session_id,
                model: None,
            });
        }
    }

    fn step_finish(&mut self, obj: &Map<String, Value>, out: &mut Vec<AgentEvent>) -> bool {
        let Some(part) = obj.get("part").and_then(Value::as_object) else {
            return false;
        };
        if let Some(usage) = step_usage(part) {
            self.total.get_or_insert_default().add(&usage);
            out.push(AgentEvent::Usage { usage });
        }
        if str_field(part, "reason") == Some("stop") && !self.failed {
            self.finished = true;
            out.push(AgentEvent::TerminalResult {
                is_error: false,
                text: None,
                api_status: None,
                usage: self.total,
            });
        }
        true
    }

    /// `{"type":"error","error":{"name","data":{"message","statusCode","isRetryable",
    /// "responseHeaders",…}}}`.
    fn error(&mut self, obj: &Map<String, Value>, out: &mut Vec<AgentEvent>) -> bool {
        let (text, status, retry_after_ms) = match obj.get("error") {
            Some(Value::Object(error)) => {
                let data = error.get("data").and_then(Value::as_object);
                let status = data
                    .and_then(|d| d.get("statusCode"))
                    .and_then(Value::as_u64)
                    .and_then(|s| u16::try_from(s).ok());
                let retry_after = data
                    .and_then(|d| d.get("responseHeaders"))
                    .and_then(Value::as_object)
                    .and_then(retry_after_ms);
                (error_text(error, data), status, retry_after)
            }
            Some(Value::String(text)) if !text.is_empty() => (text.clone(), None, None),
            Some(_) | None => return false,
        };
        let text = shorten(&text, ERROR_TEXT_KEEP);
        if let Some(code @ (429 | 529)) = status {
            out.push(AgentEvent::RateLimit {
                info: RateLimitInfo {
                    resets_at_epoch_s: None,
                    retry_after_ms,
                    rejected: true,
                    message: shorten(&format!("HTTP {code}: {text}"), RATE_LIMIT_MESSAGE_KEEP),
                },
            });
        }
        self.failed = true;
        out.push(AgentEvent::TerminalResult {
            is_error: true,
            text: Some(text),
            api_status: status,
            usage: self.total,
        });
        true
    }

    /// `{"type":"done","reason":"idle","rejected":[…]}`, printed once the session is idle by
    /// OpenCode builds newer than the recorded 1.18.33.
    fn done(&mut self, out: &mut Vec<AgentEvent>) -> bool {
        if !self.failed && !self.finished {
            self.finished = true;
            out.push(AgentEvent::TerminalResult {
                is_error: false,
                text: None,
                api_status: None,
                usage: self.total,
            });
        }
        true
    }
}

/// `text` and `reasoning` lines: the part's complete text. An empty text gives nothing.
fn part_text(
    obj: &Map<String, Value>,
    out: &mut Vec<AgentEvent>,
    event: fn(String) -> AgentEvent,
) -> bool {
    let Some(text) = obj
        .get("part")
        .and_then(Value::as_object)
        .and_then(|part| str_field(part, "text"))
    else {
        return false;
    };
    if !text.is_empty() {
        out.push(event(text.to_string()));
    }
    true
}

/// `{"type":"tool_use","part":{"type":"tool","tool","callID","state":{"status","input","output",
/// "error",…}}}`. OpenCode prints a tool part once, when it completed or failed.
fn tool_use(obj: &Map<String, Value>, out: &mut Vec<AgentEvent>) -> bool {
    let Some(part) = obj.get("part").and_then(Value::as_object) else {
        return false;
    };
    let (Some(name), Some(id)) = (
        str_field(part, "tool"),
        str_field(part, "callID").or_else(|| str_field(part, "id")),
    ) else {
        return false;
    };
    let state = part.get("state").and_then(Value::as_object);
    out.push(AgentEvent::ToolUse {
        id: id.to_string(),
        name: name.to_string(),
        input: state
            .and_then(|s| s.get("input"))
            .cloned()
            .unwrap_or(Value::Null),
    });
    let Some(state) = state else {
        return true;
    };
    let (is_error, content) = match str_field(state, "status") {
        Some("completed") => (false, state.get("output")),
        Some("error") => (true, state.get("error")),
        Some(_) | None => return true,
    };
    out.push(AgentEvent::ToolResult {
        id: id.to_string(),
        is_error,
        content: shorten(&plain_text(content), TOOL_RESULT_KEEP),
    });
    true
}

/// A step's usage, when it reported any: `tokens{input, output, reasoning, cache{read, write}}`
/// and `cost`.
fn step_usage(part: &Map<String, Value>) -> Option<Usage> {
    let tokens = part.get("tokens").and_then(Value::as_object);
    let count = |key: &str| tokens.and_then(|t| t.get(key)).and_then(Value::as_u64);
    let cache = tokens
        .and_then(|t| t.get("cache"))
        .and_then(Value::as_object);
    let cached = |key: &str| cache.and_then(|c| c.get(key)).and_then(Value::as_u64);
    let usage = Usage {
        input: count("input"),
        output: count("output"),
        cache_read: cached("read"),
        cache_write: cached("write"),
        reasoning: count("reasoning"),
        cost_usd: part
            .get("cost")
            .and_then(Value::as_f64)
            .filter(|c| c.is_finite()),
        premium_requests: None,
    };
    (!usage.is_empty()).then_some(usage)
}

/// `<name>: <message>`, as far as the error says; an error without a message keeps its data.
fn error_text(error: &Map<String, Value>, data: Option<&Map<String, Value>>) -> String {
    let name = str_field(error, "name").filter(|n| !n.is_empty());
    let message = data
        .and_then(|d| str_field(d, "message"))
        .filter(|m| !m.is_empty());
    match (name, message) {
        (Some(name), Some(message)) => format!("{name}: {message}"),
        (None, Some(message)) => message.to_string(),
        (Some(name), None) => match data.filter(|d| !d.is_empty()) {
            Some(data) => format!("{name}: {}", Value::Object(data.clone())),
            None => name.to_string(),
        },
        (None, None) => format!(
            "OpenCode reported an error: {}",
            Value::Object(error.clone())
        ),
    }
}

/// `retry-after-ms`, or `retry-after` in seconds, from the response headers the error carries.
/// An HTTP date is not read.
fn retry_after_ms(headers: &Map<String, Value>) -> Option<u64> {
    let header = |name: &str| {
        headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .and_then(|(_, v)| v.as_str())
            .and_then(|v| v.trim().parse::<f64>().ok())
            .filter(|n| n.is_finite() && *n >= 0.0 && *n < 1e12)
    };
    header("retry-after-ms")
        .or_else(|| header("retry-after").map(|s| s * 1000.0))
        .map(|ms| ms.round() as u64)
}

fn plain_text(value: Option<&Value>) -> String {
    match value {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    }
}

fn session_id(obj: &Map<String, Value>) -> Option<SessionId> {
    str_field(obj, "sessionID").and_then(|id| SessionId::new(id).ok())
}

fn str_field<'a>(obj: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    obj.get(key).and_then(Value::as_str)
}

fn unparsed(line: &str) -> AgentEvent {
    AgentEvent::Unparsed {
        line: line.to_string(),
    }
}
