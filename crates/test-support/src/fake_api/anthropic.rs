//! The Anthropic Messages API wire format, as Claude Code 2.1.197 uses it: request summaries of
//! `POST /v1/messages` bodies, and replies to them as server-sent events (`message_start`, `ping`,
//! `content_block_start`/`_delta`/`_stop`, `message_delta`, `message_stop`, `error`) or as one JSON
//! message, plus `POST /v1/messages/count_tokens` and the API's error bodies.
//!
//! Ids are derived from the request's sequence number (`msg_fake_0001`, `toolu_fake_0001`,
//! `req_fake_0001`) and usage figures are the constants of the parent module, so replies are
//! deterministic.

use std::time::Duration;

use serde_json::{Value, json};

use super::wire::{
    BodyEnd, Chunk, Reply, Summary, char_boundary_near_middle, default_message, sse_event,
};
use super::{Step, USAGE_INPUT_TOKENS, USAGE_OUTPUT_TOKENS};

/// The model named in replies when the request named none.
const DEFAULT_MODEL: &str = "claude-fake";

/// The summary of a Messages (or count_tokens) request body.
///
/// # Errors
/// When the body is not a JSON object; the message says why.
pub fn summarize(body: &[u8]) -> Result<Summary, String> {
    let json: Value =
        serde_json::from_slice(body).map_err(|err| format!("request body is not JSON: {err}"))?;
    if !json.is_object() {
        return Err("request body is not a JSON object".to_owned());
    }
    let messages = json
        .get("messages")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let tools = json
        .get("tools")
        .and_then(Value::as_array)
        .map(|tools| {
            tools
                .iter()
                .filter_map(|tool| tool.get("name").and_then(Value::as_str))
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    Ok(Summary {
        model: json.get("model").and_then(Value::as_str).map(str::to_owned),
        stream: json.get("stream").and_then(Value::as_bool).unwrap_or(false),
        n_msgs: messages.len(),
        history: messages
            .iter()
            .any(|m| m.get("role").and_then(Value::as_str) == Some("assistant")),
        tools,
        last_user_text: messages
            .iter()
            .filter(|m| m.get("role").and_then(Value::as_str) == Some("user"))
            .flat_map(user_texts)
            .next_back(),
        warmup: false,
    })
}

/// The plain texts of one user message: a string content, or its `text` blocks, minus the
/// `<system-reminder>` blocks Claude Code adds.
fn user_texts(message: &Value) -> Vec<String> {
    let texts: Vec<&str> = match message.get("content") {
        Some(Value::String(text)) => vec![text.as_str()],
        Some(Value::Array(blocks)) => blocks
            .iter()
            .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect(),
        Some(_) | None => Vec::new(),
    };
    texts
        .into_iter()
        .filter(|t| !t.trim_start().starts_with("<system-reminder>"))
        .map(str::to_owned)
        .collect()
}

/// The reply to a Messages request answered by `step` (`None`: the scenario is exhausted).
pub fn reply(step: Option<&Step>, summary: &Summary, seq: u64) -> Reply {
    let Some(step) = step else {
        return error(
            400,
            None,
            "fake_api: scenario exhausted (no step left for this request)",
            seq,
        );
    };
    let ids = Ids::new(seq);
    let model = summary.model.as_deref().unwrap_or(DEFAULT_MODEL);
    match step {
        Step::Text(text) => {
            let block = Block::Text(text.clone());
            if summary.stream {
                stream(&ids, model, &[block], "end_turn", Duration::ZERO)
            } else {
                message(&ids, model, &[block], "end_turn", Duration::ZERO)
            }
        }
        Step::ToolUse { name, input } => {
            let block = Block::ToolUse {
                id: ids.tool.clone(),
                name: name.clone(),
                input: input.clone(),
            };
            if summary.stream {
                stream(&ids, model, &[block], "tool_use", Duration::ZERO)
            } else {
                message(&ids, model, &[block], "tool_use", Duration::ZERO)
            }
        }
        Step::SlowChunks { text, delay_ms } => {
            let delay = Duration::from_millis(*delay_ms);
            let words: Vec<String> = text.split_inclusive(' ').map(str::to_owned).collect();
            if summary.stream {
                stream(&ids, model, &[Block::Words(words)], "end_turn", delay)
            } else {
                let total = delay.saturating_mul(u32::try_from(words.len()).unwrap_or(u32::MAX));
                message(&ids, model, &[Block::Text(text.clone())], "end_turn", total)
            }
        }
        Step::HttpError {
            status,
            retry_after_secs,
            body,
        } => match body {
            Some(raw) => {
                let mut headers = vec![
                    ("content-type", "application/json".to_owned()),
                    ("request-id", ids.request),
                ];
                if let Some(secs) = retry_after_secs {
                    headers.push(("retry-after", secs.to_string()));
                }
                Reply::Send {
                    status: *status,
                    headers,
                    chunks: vec![Chunk::now(raw.clone())],
                    end: BodyEnd::Close,
                }
            }
            None => error(*status, *retry_after_secs, &default_message(*status), seq),
        },
        Step::UsageLimit { resets_at_epoch_s } => {
            let reset = resets_at_epoch_s.to_string();
            let mut reply = error(
                429,
                None,
                &format!("Claude AI usage limit reached|{reset}"),
                seq,
            );
            if let Reply::Send { headers, .. } = &mut reply {
                headers.extend([
                    ("anthropic-ratelimit-unified-status", "rejected".to_owned()),
                    ("anthropic-ratelimit-unified-reset", reset),
                    (
                        "anthropic-ratelimit-unified-representative-claim",
                        "five_hour".to_owned(),
                    ),
                ]);
            }
            reply
        }
        Step::HangBeforeHeaders => Reply::Hang,
        Step::StallMidStream => {
            if summary.stream {
                Reply::Send {
                    status: 200,
                    headers: sse_headers(&ids),
                    chunks: vec![Chunk::now(message_start(&ids, model))],
                    end: BodyEnd::Stall,
                }
            } else {
                Reply::Send {
                    status: 200,
                    headers: vec![
                        ("content-type", "application/json".to_owned()),
                        ("request-id", ids.request),
                    ],
                    chunks: Vec::new(),
                    end: BodyEnd::Stall,
                }
            }
        }
        Step::ErrorMidStream { message } => {
            if summary.stream {
                let event = sse_event(
                    "error",
                    &json!({"type": "error", "error": {"type": "overloaded_error", "message": message}}),
                );
                Reply::Send {
                    status: 200,
                    headers: sse_headers(&ids),
                    chunks: vec![Chunk::now(message_start(&ids, model)), Chunk::now(event)],
                    end: BodyEnd::Close,
                }
            } else {
                error(529, None, message, seq)
            }
        }
        // The server resolves request-dependent steps before planning a reply.
        Step::WriteToNamedPath { .. } | Step::ShellWriteToNamedPath { .. } => {
            error(500, None, "fake_api: unresolved step", seq)
        }
    }
}

/// The reply to `POST /v1/messages/count_tokens`.
pub fn count_tokens() -> Reply {
    Reply::json(
        200,
        &json!({"input_tokens": USAGE_INPUT_TOKENS}),
        Vec::new(),
    )
}

/// A 400 for a Messages request whose body could not be read.
pub fn bad_request(why: &str, seq: u64) -> Reply {
    error(400, None, &format!("fake_api: {why}"), seq)
}

/// The API's error reply: `{"type":"error","error":{"type":...,"message":...},"request_id":...}`.
pub fn error(status: u16, retry_after_secs: Option<u64>, message: &str, seq: u64) -> Reply {
    let ids = Ids::new(seq);
    let mut headers = vec![("request-id", ids.request.clone())];
    if let Some(secs) = retry_after_secs {
        headers.push(("retry-after", secs.to_string()));
    }
    Reply::json(
        status,
        &json!({
            "type": "error",
            "error": {"type": error_type(status), "message": message},
            "request_id": ids.request,
        }),
        headers,
    )
}

/// The API's `error.type` for an HTTP status.
fn error_type(status: u16) -> &'static str {
    match status {
        400 => "invalid_request_error",
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        529 => "overloaded_error",
        _ => "api_error",
    }
}

/// The ids of one reply.
struct Ids {
    message: String,
    tool: String,
    request: String,
}

impl Ids {
    fn new(seq: u64) -> Self {
        Self {
            message: format!("msg_fake_{seq:04}"),
            tool: format!("toolu_fake_{seq:04}"),
            request: format!("req_fake_{seq:04}"),
        }
    }
}

/// One content block of a reply.
enum Block {
    /// A text block.
    Text(String),
    /// A text block streamed as one delta per word (each after the step's delay).
    Words(Vec<String>),
    /// A tool call.
    ToolUse {
        id: String,
        name: String,
        input: Value,
    },
}

fn usage() -> Value {
    json!({
        "input_tokens": USAGE_INPUT_TOKENS,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": USAGE_OUTPUT_TOKENS,
    })
}

fn sse_headers(ids: &Ids) -> Vec<(&'static str, String)> {
    vec![
        (
            "content-type",
            "text/event-stream; charset=utf-8".to_owned(),
        ),
        ("cache-control", "no-cache".to_owned()),
        ("request-id", ids.request.clone()),
    ]
}

fn message_start(ids: &Ids, model: &str) -> bytes::Bytes {
    sse_event(
        "message_start",
        &json!({
            "type": "message_start",
            "message": {
                "id": ids.message,
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": [],
                "stop_reason": null,
                "stop_sequence": null,
                "usage": {
                    "input_tokens": USAGE_INPUT_TOKENS,
                    "cache_creation_input_tokens": 0,
                    "cache_read_input_tokens": 0,
                    "output_tokens": 1,
                },
            },
        }),
    )
}

/// A complete streamed reply: start, ping, each block, the delta with stop reason and usage, stop.
/// Text deltas of [`Block::Words`] wait `delay` each.
fn stream(ids: &Ids, model: &str, blocks: &[Block], stop_reason: &str, delay: Duration) -> Reply {
    let mut chunks = vec![
        Chunk::now(message_start(ids, model)),
        Chunk::now(sse_event("ping", &json!({"type": "ping"}))),
    ];
    for (index, block) in blocks.iter().enumerate() {
        let start = match block {
            Block::Text(_) | Block::Words(_) => json!({"type": "text", "text": ""}),
            Block::ToolUse { id, name, .. } => {
                json!({"type": "tool_use", "id": id, "name": name, "input": {}})
            }
        };
        chunks.push(Chunk::now(sse_event(
            "content_block_start",
            &json!({"type": "content_block_start", "index": index, "content_block": start}),
        )));
        let text_delta = |text: &str| {
            sse_event(
                "content_block_delta",
                &json!({"type": "content_block_delta", "index": index,
                        "delta": {"type": "text_delta", "text": text}}),
            )
        };
        match block {
            Block::Text(text) => chunks.push(Chunk::now(text_delta(text))),
            Block::Words(words) => chunks.extend(words.iter().map(|word| Chunk {
                delay,
                bytes: text_delta(word),
            })),
            Block::ToolUse { input, .. } => {
                // Two partial pieces, as the real API streams arguments: the client must join them.
                let whole = input.to_string();
                let (first, second) = whole.split_at(char_boundary_near_middle(&whole));
                for part in [first, second] {
                    chunks.push(Chunk::now(sse_event(
                        "content_block_delta",
                        &json!({"type": "content_block_delta", "index": index,
                                "delta": {"type": "input_json_delta", "partial_json": part}}),
                    )));
                }
            }
        }
        chunks.push(Chunk::now(sse_event(
            "content_block_stop",
            &json!({"type": "content_block_stop", "index": index}),
        )));
    }
    chunks.push(Chunk::now(sse_event(
        "message_delta",
        &json!({
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason, "stop_sequence": null},
            "usage": {"output_tokens": USAGE_OUTPUT_TOKENS},
        }),
    )));
    chunks.push(Chunk::now(sse_event(
        "message_stop",
        &json!({"type": "message_stop"}),
    )));
    Reply::Send {
        status: 200,
        headers: sse_headers(ids),
        chunks,
        end: BodyEnd::Close,
    }
}

/// A complete non-streamed reply, sent after `delay`.
fn message(ids: &Ids, model: &str, blocks: &[Block], stop_reason: &str, delay: Duration) -> Reply {
    let content: Vec<Value> = blocks
        .iter()
        .map(|block| match block {
            Block::Text(text) => json!({"type": "text", "text": text}),
            Block::Words(words) => json!({"type": "text", "text": words.concat()}),
            Block::ToolUse { id, name, input } => {
                json!({"type": "tool_use", "id": id, "name": name, "input": input})
            }
        })
        .collect();
    let body = json!({
        "id": ids.message,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": null,
        "usage": usage(),
    });
    Reply::Send {
        status: 200,
        headers: vec![
            ("content-type", "application/json".to_owned()),
            ("request-id", ids.request.clone()),
        ],
        chunks: vec![Chunk {
            delay,
            bytes: body.to_string().into(),
        }],
        end: BodyEnd::Close,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_of_a_claude_like_body() {
        let body = json!({
            "model": "claude-opus-4-8",
            "stream": true,
            "tools": [{"name": "Bash"}, {"name": "Write"}],
            "messages": [
                {"role": "user", "content": [
                    {"type": "text", "text": "<system-reminder>ctx</system-reminder>"},
                    {"type": "text", "text": "first"}]},
                {"role": "assistant", "content": [{"type": "text", "text": "hi"}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "ok"}]},
            ],
        });
        assert_eq!(
            summarize(body.to_string().as_bytes()),
            Ok(Summary {
                model: Some("claude-opus-4-8".to_owned()),
                stream: true,
                n_msgs: 3,
                history: true,
                tools: vec!["Bash".to_owned(), "Write".to_owned()],
                last_user_text: Some("first".to_owned()),
                warmup: false,
            })
        );
        assert!(summarize(b"[1]").is_err());
        assert!(summarize(b"{").is_err());
    }

    #[test]
    fn middle_split_respects_utf8() {
        let text = "aé€b";
        let i = char_boundary_near_middle(text);
        assert!(text.is_char_boundary(i));
        assert_eq!(char_boundary_near_middle(""), 0);
    }
}
