//! [`CodexStreamParser`]: one line of `codex exec --json` into normalized [`AgentEvent`]s.
//!
//! | line | events |
//! |---|---|
//! | `thread.started` | `SessionStarted { session_id: thread_id }` (Codex names no model here) |
//! | `turn.started` | nothing (it carries no field) |
//! | `turn.completed` | `TerminalResult { is_error: false, text: last agent message, usage }` |
//! | `turn.failed` | `TerminalResult { is_error: true, text: error.message, api_status }` |
//! | `error`, `Reconnecting... n/m (cause)` | `RetryNotice { attempt: n, max: m, status }` |
//! | `error`, a rate limit (429, 529, usage limit) | `RateLimit { rejected: true }` |
//! | `error`, anything else | `Unparsed` (the `turn.failed` that follows repeats it) |
//! | `item.*` / `agent_message` | `Text` on `item.completed` |
//! | `item.*` / `reasoning`, `plan` | `Thinking` on `item.completed` |
//! | `item.*` / `todo_list` | `Thinking` (a checklist) whenever the list changed |
//! | `item.*` / `command_execution` | `ToolUse` at first sight; `ToolResult` on `item.completed` |
//! | `item.*` / `file_change` | `ToolUse` at first sight; `ToolResult` on `item.completed` |
//! | `item.*` / `mcp_tool_call` | `ToolUse` (`mcp__<server>__<tool>`) at first sight; `ToolResult` on `item.completed` |
//! | `item.*` / `web_search` | `ToolUse` on `item.completed` (the query is only final then) |
//! | `item.*` / `error` | `Unparsed` (a warning of the CLI, not the agent's words) |
//! | anything else, non-JSON, or a known type with missing fields | `Unparsed` |
//!
//! Decisions:
//! - An `error` item is a warning on a run that goes on (recorded: "Model metadata for
//!   `fake-model` not found…" on every run with a model Codex does not know). It is not the
//!   agent's text, so it must not become `Text` (which is what a run reports as its final text),
//!   and the event vocabulary has no warning; it is kept whole as `Unparsed` in the log.
//! - A top-level `error` that is not a reconnect is the fatal error; Codex prints `turn.failed`
//!   with the same message right after it, so it does not become a second terminal event. Only a
//!   rate limit is lifted out of it, as a rejected `RateLimit`.
//! - Reconnects are Codex's own retries. A reconnect caused by a 429 is not a rejection: the CLI is
//!   still trying, and a later success wins.
//! - Streaming items (`item.started`/`item.updated`) of messages and reasoning carry partial text;
//!   only `item.completed` is reported, so no text is said twice.
//!
//! Usage (`turn.completed.usage`): the Responses API counts cached tokens inside `input_tokens`,
//! and Codex's own telemetry splits total input into cache reads, cache writes and the rest, so
//! `input` is `input_tokens - cached_input_tokens - cache_write_input_tokens`. `output` is
//! `output_tokens`, which includes the reasoning tokens reported apart as `reasoning`. Codex
//! reports no cost.

use std::collections::{HashMap, HashSet};

use corral_engine::StreamParser;
use corral_ports::{AgentEvent, SessionId, Usage};
use serde_json::{Map, Value, json};

use corral_engine::shorten;

use crate::wording;

/// How much of a tool result's content is kept, in bytes.
pub const TOOL_RESULT_KEEP: usize = 2 * 1024;

/// Which of the three item lines this is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Started,
    Updated,
    Completed,
}

/// Parses Codex's `exec --json` output. One per attempt: it remembers which tool calls it has
/// announced, the last state of each to-do list, and the last agent message (the run's final
/// text).
#[derive(Debug, Default)]
pub struct CodexStreamParser {
    tools_announced: HashSet<String>,
    todo_lists: HashMap<String, String>,
    last_message: Option<String>,
}

impl StreamParser for CodexStreamParser {
    fn parse_line(&mut self, line: &str, out: &mut Vec<AgentEvent>) {
        let trimmed = line.trim();
        if trimmed.is_empty() {
            return;
        }
        let Ok(Value::Object(obj)) = serde_json::from_str::<Value>(trimmed) else {
            out.push(unparsed(line));
            return;
        };
        let before = out.len();
        let recognised = match str_field(&obj, "type") {
            Some("thread.started") => thread_started(&obj, out),
            Some("turn.started") => true,
            Some("turn.completed") => self.turn_completed(&obj, out),
            Some("turn.failed") => turn_failed(&obj, out),
            Some("item.started") => self.item(&obj, Phase::Started, out),
            Some("item.updated") => self.item(&obj, Phase::Updated, out),
            Some("item.completed") => self.item(&obj, Phase::Completed, out),
            Some("error") => top_level_error(&obj, out),
            Some(_) | None => false,
        };
        if !recognised {
            out.truncate(before);
            out.push(unparsed(line));
        }
    }
}

impl CodexStreamParser {
    fn turn_completed(&mut self, obj: &Map<String, Value>, out: &mut Vec<AgentEvent>) -> bool {
        let usage = match obj.get("usage") {
            Some(Value::Object(usage)) => Some(usage_of(usage)),
            Some(Value::Null) | None => None,
            Some(_) => return false,
        };
        out.push(AgentEvent::TerminalResult {
            is_error: false,
            text: self.last_message.clone(),
            api_status: None,
            usage,
        });
        true
    }

    fn item(&mut self, obj: &Map<String, Value>, phase: Phase, out: &mut Vec<AgentEvent>) -> bool {
        let Some(item) = obj.get("item").and_then(Value::as_object) else {
            return false;
        };
        let Some(id) = str_field(item, "id") else {
            return false;
        };
        match str_field(item, "type") {
            Some("agent_message") => {
                let Some(text) = str_field(item, "text") else {
                    return phase != Phase::Completed;
                };
                if phase == Phase::Completed && !text.is_empty() {
                    self.last_message = Some(text.to_string());
                    out.push(AgentEvent::Text {
                        text: text.to_string(),
                    });
                }
                true
            }
            Some("reasoning" | "plan") => {
                let Some(text) = str_field(item, "text") else {
                    return phase != Phase::Completed;
                };
                if phase == Phase::Completed && !text.trim().is_empty() {
                    out.push(AgentEvent::Thinking {
                        text: text.to_string(),
                    });
                }
                true
            }
            Some("todo_list") => self.todo_list(id, item, out),
            Some("command_execution") => self.command(id, item, phase, out),
            Some("file_change") => self.file_change(id, item, phase, out),
            Some("mcp_tool_call") => self.mcp_call(id, item, phase, out),
            Some("web_search") => self.web_search(id, item, phase, out),
            // A warning of the CLI: kept whole (see the module documentation).
            Some("error") => false,
            Some(_) | None => false,
        }
    }

    fn announce(&mut self, id: &str, name: String, input: Value, out: &mut Vec<AgentEvent>) {
        if self.tools_announced.insert(id.to_string()) {
            out.push(AgentEvent::ToolUse {
                id: id.to_string(),
                name,
                input,
            });
        }
    }

    fn command(
        &mut self,
        id: &str,
        item: &Map<String, Value>,
        phase: Phase,
        out: &mut Vec<AgentEvent>,
    ) -> bool {
        let Some(command) = str_field(item, "command") else {
            return false;
        };
        self.announce(
            id,
            "command_execution".to_string(),
            json!({ "command": command }),
            out,
        );
        if phase == Phase::Completed {
            let status = str_field(item, "status");
            let exit_code = item.get("exit_code").and_then(Value::as_i64);
            let mut content = match exit_code {
                Some(code) => format!("exit code {code}"),
                None => format!("status {}", status.unwrap_or("unknown")),
            };
            let output = str_field(item, "aggregated_output").unwrap_or_default();
            if !output.is_empty() {
                content.push('\n');
                content.push_str(output);
            }
            out.push(AgentEvent::ToolResult {
                id: id.to_string(),
                is_error: failed(status) || exit_code.is_some_and(|c| c != 0),
                content: shorten(&content, TOOL_RESULT_KEEP),
            });
        }
        true
    }

    fn file_change(
        &mut self,
        id: &str,
        item: &Map<String, Value>,
        phase: Phase,
        out: &mut Vec<AgentEvent>,
    ) -> bool {
        let Some(Value::Array(changes)) = item.get("changes") else {
            return false;
        };
        self.announce(
            id,
            "file_change".to_string(),
            json!({ "changes": changes }),
            out,
        );
        if phase == Phase::Completed {
            let status = str_field(item, "status");
            let listed: Vec<String> = changes
                .iter()
                .map(|change| {
                    let kind = change
                        .get("kind")
                        .and_then(Value::as_str)
                        .unwrap_or("change");
                    match change.get("path").and_then(Value::as_str) {
                        Some(path) => format!("{kind} {path}"),
                        None => change.to_string(),
                    }
                })
                .collect();
            let mut content = format!("status {}", status.unwrap_or("unknown"));
            for line in listed {
                content.push('\n');
                content.push_str(&line);
            }
            out.push(AgentEvent::ToolResult {
                id: id.to_string(),
                is_error: status != Some("completed"),
                content: shorten(&content, TOOL_RESULT_KEEP),
            });
        }
        true
    }

    fn mcp_call(
        &mut self,
        id: &str,
        item: &Map<String, Value>,
        phase: Phase,
        out: &mut Vec<AgentEvent>,
    ) -> bool {
        let (Some(server), Some(tool)) = (str_field(item, "server"), str_field(item, "tool"))
        else {
            return false;
        };
        self.announce(
            id,
            format!("mcp__{server}__{tool}"),
            item.get("arguments").cloned().unwrap_or(Value::Null),
            out,
        );
        if phase == Phase::Completed {
            let status = str_field(item, "status");
            let error = item
                .get("error")
                .and_then(|e| e.get("message"))
                .and_then(Value::as_str);
            let content = match error {
                Some(message) => message.to_string(),
                None => mcp_result_text(item.get("result")),
            };
            out.push(AgentEvent::ToolResult {
                id: id.to_string(),
                is_error: error.is_some() || failed(status),
                content: shorten(&content, TOOL_RESULT_KEEP),
            });
        }
        true
    }

    fn web_search(
        &mut self,
        id: &str,
        item: &Map<String, Value>,
        phase: Phase,
        out: &mut Vec<AgentEvent>,
    ) -> bool {
        if phase != Phase::Completed {
            return true;
        }
        let Some(query) = str_field(item, "query") else {
            return false;
        };
        let mut input = json!({ "query": query });
        if let (Some(action), Some(map)) = (item.get("action"), input.as_object_mut()) {
            map.insert("action".to_string(), action.clone());
        }
        self.announce(id, "web_search".to_string(), input, out);
        true
    }

    fn todo_list(
        &mut self,
        id: &str,
        item: &Map<String, Value>,
        out: &mut Vec<AgentEvent>,
    ) -> bool {
        let Some(Value::Array(items)) = item.get("items") else {
            return false;
        };
        let rendered: Vec<String> = items
            .iter()
            .map(|entry| {
                let done = entry
                    .get("completed")
                    .and_then(Value::as_bool)
                    .unwrap_or(false);
                let text = entry
                    .get("text")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                format!("[{}] {text}", if done { "x" } else { " " })
            })
            .collect();
        let rendered = rendered.join("\n");
        if !rendered.is_empty() && self.todo_lists.get(id) != Some(&rendered) {
            self.todo_lists.insert(id.to_string(), rendered.clone());
            out.push(AgentEvent::Thinking { text: rendered });
        }
        true
    }
}

fn thread_started(obj: &Map<String, Value>, out: &mut Vec<AgentEvent>) -> bool {
    let Some(session_id) = str_field(obj, "thread_id").and_then(|id| SessionId::new(id).ok())
    else {
        return false;
    };
    out.push(AgentEvent::SessionStarted {
        session_id,
        model: None,
    });
    true
}

fn turn_failed(obj: &Map<String, Value>, out: &mut Vec<AgentEvent>) -> bool {
    let message = obj
        .get("error")
        .and_then(|e| e.get("message"))
        .and_then(Value::as_str)
        .filter(|m| !m.is_empty());
    out.push(AgentEvent::TerminalResult {
        is_error: true,
        text: Some(
            message
                .unwrap_or("Codex reported the turn as failed without a message")
                .to_string(),
        ),
        api_status: message.and_then(wording::http_status),
        usage: None,
    });
    true
}

fn top_level_error(obj: &Map<String, Value>, out: &mut Vec<AgentEvent>) -> bool {
    let Some(message) = str_field(obj, "message") else {
        return false;
    };
    if let Some(reconnect) = wording::reconnect(message) {
        out.push(AgentEvent::RetryNotice {
            attempt: reconnect.attempt,
            max: Some(reconnect.max),
            delay_ms: None,
            status: wording::http_status(reconnect.cause),
        });
        return true;
    }
    match wording::rate_limit(message) {
        Some(info) => {
            out.push(AgentEvent::RateLimit { info });
            true
        }
        None => false,
    }
}

/// An MCP result's text parts, joined; other parts as `[type]`; the structured content when there
/// is nothing else.
fn mcp_result_text(result: Option<&Value>) -> String {
    let Some(result) = result.and_then(Value::as_object) else {
        return String::new();
    };
    let parts: Vec<String> = match result.get("content") {
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
            .collect(),
        Some(_) | None => Vec::new(),
    };
    if parts.is_empty() {
        return match result.get("structured_content") {
            Some(Value::Null) | None => String::new(),
            Some(structured) => structured.to_string(),
        };
    }
    parts.join("\n")
}

fn failed(status: Option<&str>) -> bool {
    matches!(status, Some("failed" | "declined"))
}

fn usage_of(usage: &Map<String, Value>) -> Usage {
    let count = |key: &str| usage.get(key).and_then(Value::as_u64);
    let cache_read = count("cached_input_tokens");
    let cache_write = count("cache_write_input_tokens");
    Usage {
        input: count("input_tokens").map(|total| {
            total
                .saturating_sub(cache_read.unwrap_or(0))
                .saturating_sub(cache_write.unwrap_or(0))
        }),
        output: count("output_tokens"),
        cache_read,
        cache_write,
        reasoning: count("reasoning_output_tokens"),
        cost_usd: None,
        premium_requests: None,
    }
}

fn str_field<'a>(obj: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    obj.get(key).and_then(Value::as_str)
}

fn unparsed(line: &str) -> AgentEvent {
    AgentEvent::Unparsed {
        line: line.to_string(),
    }
}
