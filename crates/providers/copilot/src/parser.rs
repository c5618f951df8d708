//! [`CopilotJsonParser`]: one line of `copilot -p … --output-format json` into normalized
//! [`AgentEvent`]s.
//!
//! Every line is `{"type", "data", "id", "timestamp", "parentId", "ephemeral"?}`, except the last,
//! `{"type":"result","sessionId","exitCode","usage":{"premiumRequests",…}}`, which has no `data`.
//! A plain run prints about 18 lines, a third of them token deltas.
//!
//! | line | events |
//! |---|---|
//! | `session.start` / `session.resume` with `data.sessionId` | `SessionStarted` (from the CLI's schema; 1.0.102 did not print them) |
//! | `assistant.message` | `Text` when `content` is not empty (tool requests are reported when they run) |
//! | `assistant.reasoning` | `Thinking` |
//! | `assistant.usage` | `Usage` (tokens; from the schema, not printed in the recordings) |
//! | `tool.execution_start` | `ToolUse { id: toolCallId, name: toolName, input: arguments }` |
//! | `tool.execution_complete` | `ToolResult` (`result.content`, or `error.message` when `success` is false; shortened to 2 KiB) |
//! | `assistant.turn_retry` | `RetryNotice` (attempt and status from the `model.call_failure` before it) |
//! | `session.error` | `RateLimit { rejected: true }` for `errorType: "rate_limit"`; always kept for the terminal event |
//! | `result` | `SessionStarted` (only if no id was announced on the stream) and `TerminalResult` |
//! | bookkeeping (`session.skills_loaded`, `user.message`, `assistant.turn_start`, `model.call_*`, `abort`, …) | nothing |
//! | deltas (`assistant.message_delta`, `assistant.tool_call_delta`, `assistant.reasoning_delta`, …) | nothing: the complete message follows, and a live view wants text, not one event per token |
//! | anything else, non-JSON, or a known type with missing fields | `Unparsed` |
//!
//! The terminal event: `result` carries no error flag and no text, only `exitCode`. The run failed
//! when `exitCode` is not 0 **or** the run was aborted: Copilot answers SIGTERM (a watchdog kill)
//! with `abort {reason: "user_initiated"}` and then `result` with **`exitCode: 0`** (recorded in
//! `hang` and `stall`), which must not read as a success. A failed run's text is its
//! `session.error` messages, one per line as `<errorType>: <message>` (the diagnosis reads the
//! error type back from there), and its status is the last error's `statusCode`. A successful
//! run's text is the main agent's last message.
//!
//! Usage: `result.usage.premiumRequests` is the only cost figure Copilot 1.0.102 printed; the
//! tokens of any `assistant.usage` lines are added to it, so the terminal usage is the whole run's.
//!
//! The session id: Corral mints it and passes `--session-id`, so the engine knows it before the
//! first line. Copilot itself names the session only on the `result` line, which therefore
//! announces it when nothing on the stream did (for a fresh run it repeats the minted id, which the
//! engine does not write again; a different id would be the one Copilot really used).

use corral_engine::StreamParser;
use corral_engine::shorten;
use corral_ports::{AgentEvent, RateLimitInfo, SessionId, Usage};
use serde_json::{Map, Value};

/// How much of a tool result's content is kept, in bytes.
pub const TOOL_RESULT_KEEP: usize = 2 * 1024;
/// How much of an error message is kept, in bytes.
const ERROR_KEEP: usize = 1024;

/// Line types the parser reads and drops on purpose: session bookkeeping, the prompt echo (which
/// would copy the prompt into the log), per-call telemetry, and deltas of messages that arrive
/// whole later.
const QUIET: &[&str] = &[
    "session.skills_loaded",
    "session.mcp_servers_loaded",
    "session.tools_updated",
    "session.info",
    "session.idle",
    "session.background_tasks_changed",
    "user.message",
    "assistant.turn_start",
    "assistant.turn_end",
    "assistant.message_start",
    "assistant.message_delta",
    "assistant.reasoning_delta",
    "assistant.streaming_delta",
    "assistant.tool_call_delta",
    "model.call_start",
    "model.call_finished",
    "model.call_final_result",
    "agent.interrupted",
];

/// Parses Copilot's JSONL output. One per attempt: it remembers what the terminal event needs
/// (errors, an abort, the last message, token totals) and whether the session was announced.
#[derive(Debug, Default)]
pub struct CopilotJsonParser {
    session_announced: bool,
    model: Option<String>,
    last_text: Option<String>,
    errors: Vec<String>,
    error_status: Option<u16>,
    aborted: Option<String>,
    last_failure: Option<(Option<u32>, Option<u16>)>,
    retries: u32,
    tokens: Option<Usage>,
}

impl StreamParser for CopilotJsonParser {
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
        let data = obj.get("data").and_then(Value::as_object);
        // Events of a sub-agent carry its id beside `data`; the main agent's carry none.
        let sub_agent = obj.contains_key("agentId");
        let recognised = match (str_field(&obj, "type"), data) {
            (Some("result"), _) => self.result(&obj, out),
            (Some(kind), Some(data)) => self.event(kind, data, sub_agent, out),
            (Some(_), None) | (None, _) => false,
        };
        if !recognised {
            out.truncate(before);
            out.push(unparsed(line));
        }
    }
}

impl CopilotJsonParser {
    fn event(
        &mut self,
        kind: &str,
        data: &Map<String, Value>,
        sub_agent: bool,
        out: &mut Vec<AgentEvent>,
    ) -> bool {
        match kind {
            "session.start" | "session.resume" => {
                if let Some(model) = str_field(data, "selectedModel") {
                    self.model = Some(model.to_string());
                }
                match str_field(data, "sessionId") {
                    Some(id) => self.announce(id, out),
                    None => true,
                }
            }
            "session.tools_updated" | "model.call_start" => {
                if let Some(model) = str_field(data, "model") {
                    self.model = Some(model.to_string());
                }
                true
            }
            "assistant.message" => self.message(data, sub_agent, out),
            "assistant.reasoning" => {
                let Some(text) = str_field(data, "content") else {
                    return false;
                };
                if !text.is_empty() {
                    out.push(AgentEvent::Thinking {
                        text: text.to_string(),
                    });
                }
                true
            }
            "assistant.usage" => {
                let usage = tokens_of(data);
                self.tokens.get_or_insert_with(Usage::default).add(&usage);
                out.push(AgentEvent::Usage { usage });
                true
            }
            "tool.execution_start" => {
                match (str_field(data, "toolCallId"), str_field(data, "toolName")) {
                    (Some(id), Some(name)) => {
                        out.push(AgentEvent::ToolUse {
                            id: id.to_string(),
                            name: name.to_string(),
                            input: data.get("arguments").cloned().unwrap_or(Value::Null),
                        });
                        true
                    }
                    _ => false,
                }
            }
            "tool.execution_complete" => tool_result(data, out),
            "model.call_failure" => {
                self.last_failure = Some((u32_field(data, "retryAttempt"), status_field(data)));
                true
            }
            "assistant.turn_retry" => {
                self.retries += 1;
                let (attempt, status) = self.last_failure.take().unwrap_or((None, None));
                let status = status
                    .or_else(|| (str_field(data, "reason") == Some("rate_limit")).then_some(429));
                out.push(AgentEvent::RetryNotice {
                    // `retryAttempt` counts the failed calls from 0; the retry is the next one.
                    attempt: attempt.map_or(self.retries, |a| a.saturating_add(1)),
                    max: None,
                    delay_ms: None,
                    status,
                });
                true
            }
            "session.error" => self.error(data, out),
            "abort" => {
                let reason = str_field(data, "reason").unwrap_or("unknown reason");
                self.aborted = Some(reason.to_string());
                true
            }
            "assistant.idle" => {
                if data.get("aborted").and_then(Value::as_bool) == Some(true)
                    && self.aborted.is_none()
                {
                    self.aborted = Some("aborted".to_string());
                }
                true
            }
            other => QUIET.contains(&other),
        }
    }

    fn message(
        &mut self,
        data: &Map<String, Value>,
        sub_agent: bool,
        out: &mut Vec<AgentEvent>,
    ) -> bool {
        let Some(text) = str_field(data, "content") else {
            return false;
        };
        if let Some(model) = str_field(data, "model") {
            self.model = Some(model.to_string());
        }
        if text.is_empty() {
            return true;
        }
        // A sub-agent's words are shown, but the run's final text is the main agent's.
        if !sub_agent {
            self.last_text = Some(text.to_string());
        }
        out.push(AgentEvent::Text {
            text: text.to_string(),
        });
        true
    }

    /// `{"errorType","message","statusCode"?,…}`: kept for the terminal event; a rate limit is
    /// reported at once. The CLI has already retried it (5 times in 1.0.102) when it says so.
    fn error(&mut self, data: &Map<String, Value>, out: &mut Vec<AgentEvent>) -> bool {
        let Some(message) = str_field(data, "message") else {
            return false;
        };
        let kind = str_field(data, "errorType").unwrap_or("error");
        self.errors
            .push(format!("{kind}: {}", shorten(message.trim(), ERROR_KEEP)));
        if let Some(status) = status_field(data) {
            self.error_status = Some(status);
        }
        if kind == "rate_limit" {
            let mut text = message.trim().to_string();
            if let Some(code) = str_field(data, "errorCode") {
                text.push_str(&format!(" ({code})"));
            }
            out.push(AgentEvent::RateLimit {
                info: RateLimitInfo {
                    resets_at_epoch_s: None,
                    retry_after_ms: None,
                    rejected: true,
                    message: shorten(&text, ERROR_KEEP),
                },
            });
        }
        true
    }

    fn result(&mut self, obj: &Map<String, Value>, out: &mut Vec<AgentEvent>) -> bool {
        if let Some(id) = str_field(obj, "sessionId")
            && !self.session_announced
        {
            // An id Copilot printed but Corral cannot pass back is dropped, not the result.
            self.announce(id, out);
        }
        let exit_code = obj.get("exitCode").and_then(Value::as_i64);
        let is_error = match exit_code {
            Some(code) => code != 0,
            None => !self.errors.is_empty(),
        } || self.aborted.is_some();
        let text = if is_error {
            let mut lines: Vec<String> = Vec::new();
            if let Some(reason) = &self.aborted {
                lines.push(format!("abort: Copilot aborted the run ({reason})"));
            }
            lines.extend(self.errors.iter().cloned());
            if lines.is_empty() {
                lines.push(match exit_code {
                    Some(code) => format!("Copilot exited with code {code}"),
                    None => "Copilot reported a failure".to_string(),
                });
            }
            Some(lines.join("\n"))
        } else {
            self.last_text.clone()
        };
        let premium = obj
            .get("usage")
            .and_then(|u| u.get("premiumRequests"))
            .and_then(Value::as_f64);
        let usage = match (self.tokens, premium) {
            (None, None) => None,
            (tokens, premium) => Some(Usage {
                premium_requests: premium,
                ..tokens.unwrap_or_default()
            }),
        };
        out.push(AgentEvent::TerminalResult {
            is_error,
            text,
            api_status: if is_error { self.error_status } else { None },
            usage,
        });
        true
    }

    /// Announces `id` once; an id that is not a valid [`SessionId`] is not announced.
    fn announce(&mut self, id: &str, out: &mut Vec<AgentEvent>) -> bool {
        if self.session_announced {
            return true;
        }
        let Ok(session_id) = SessionId::new(id) else {
            return false;
        };
        self.session_announced = true;
        out.push(AgentEvent::SessionStarted {
            session_id,
            model: self.model.clone(),
        });
        true
    }
}

/// `{"toolCallId","success","result":{"content",…}?,"error":{"message","code"?}?,…}`.
fn tool_result(data: &Map<String, Value>, out: &mut Vec<AgentEvent>) -> bool {
    let Some(id) = str_field(data, "toolCallId") else {
        return false;
    };
    let success = data.get("success").and_then(Value::as_bool);
    let error = data.get("error").and_then(Value::as_object);
    let content = match (data.get("result").and_then(|r| r.get("content")), error) {
        (_, Some(error)) if success != Some(true) => {
            let message = str_field(error, "message").unwrap_or_default();
            match str_field(error, "code") {
                Some(code) => format!("{message} ({code})"),
                None => message.to_string(),
            }
        }
        (Some(Value::String(text)), _) => text.clone(),
        (Some(Value::Null) | None, _) => String::new(),
        (Some(other), _) => other.to_string(),
    };
    out.push(AgentEvent::ToolResult {
        id: id.to_string(),
        is_error: success != Some(true),
        content: shorten(&content, TOOL_RESULT_KEEP),
    });
    true
}

/// `assistant.usage` figures. Copilot reports `inputTokens` as its provider does; whether cached
/// tokens are inside it is not recorded.
fn tokens_of(data: &Map<String, Value>) -> Usage {
    let count = |key: &str| data.get(key).and_then(Value::as_u64);
    Usage {
        input: count("inputTokens"),
        output: count("outputTokens"),
        cache_read: count("cacheReadTokens"),
        cache_write: count("cacheWriteTokens"),
        reasoning: count("reasoningTokens"),
        cost_usd: None,
        premium_requests: None,
    }
}

fn str_field<'a>(obj: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    obj.get(key).and_then(Value::as_str)
}

fn u32_field(obj: &Map<String, Value>, key: &str) -> Option<u32> {
    obj.get(key)
        .and_then(Value::as_u64)
        .and_then(|n| u32::try_from(n).ok())
}

fn status_field(obj: &Map<String, Value>) -> Option<u16> {
    obj.get("statusCode")
        .and_then(Value::as_u64)
        .and_then(|n| u16::try_from(n).ok())
}

fn unparsed(line: &str) -> AgentEvent {
    AgentEvent::Unparsed {
        line: line.to_string(),
    }
}
