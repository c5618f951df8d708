//! The OpenAI Chat Completions wire format, as OpenCode 1.18.33 (streaming, through
//! `@ai-sdk/openai-compatible`), Grok CLI 0.0.34 (non-streaming, OpenAI JS SDK) and Copilot CLI
//! 1.0.102 (streaming, OpenAI JS SDK) use it: request summaries of `POST /v1/chat/completions`
//! bodies, and replies as server-sent `data: {chunk}` events ending with a usage chunk (no
//! choices) and `data: [DONE]`, or as one `chat.completion` JSON object.
//!
//! A tool call is streamed as a first `tool_calls` delta carrying the call's `id`, `type` and
//! `function.name` with empty arguments, then the arguments (a JSON string) in two pieces, then a
//! chunk with `finish_reason: "tool_calls"`. An in-stream error is a `data: {"error": …}` chunk.
//!
//! A request offering no tools is a side request (OpenCode's title generation), answered by
//! [`side_reply`] with [`super::SIDE_REQUEST_TEXT`]; the server does not consume a step for it.
//! Ids are derived from the request's sequence number (`chatcmpl-fake-0001`, `call_fake_0001`).

use std::time::Duration;

use serde_json::{Value, json};

use super::openai::{self, CREATED};
use super::wire::{
    BodyEnd, Chunk, Reply, Summary, char_boundary_near_middle, sse_data, sse_done, sse_headers,
    words,
};
use super::{SIDE_REQUEST_TEXT, Step, USAGE_INPUT_TOKENS, USAGE_OUTPUT_TOKENS};

/// The model named in replies when the request named none.
const DEFAULT_MODEL: &str = "gpt-fake";

/// The summary of a Chat Completions request body: `n_msgs` counts the `messages` (system
/// included); `history` is true when one of them has the role `assistant`.
///
/// # Errors
/// When the body is not a JSON object; the message says why.
pub fn summarize(body: &[u8]) -> Result<Summary, String> {
    let json = openai::parse_object(body)?;
    let messages = json
        .get("messages")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let role = |m: &Value| m.get("role").and_then(Value::as_str).map(str::to_owned);
    Ok(Summary {
        model: json.get("model").and_then(Value::as_str).map(str::to_owned),
        stream: json.get("stream").and_then(Value::as_bool).unwrap_or(false),
        n_msgs: messages.len(),
        history: messages
            .iter()
            .any(|m| role(m).as_deref() == Some("assistant")),
        tools: openai::tool_names(&json),
        last_user_text: messages
            .iter()
            .filter(|m| role(m).as_deref() == Some("user"))
            .flat_map(|m| openai::content_texts(m.get("content")))
            .rfind(|text| !text.trim().is_empty()),
        warmup: false,
    })
}

/// The reply to an agent turn answered by `step` (`None`: the scenario is exhausted).
pub fn reply(step: Option<&Step>, summary: &Summary, seq: u64) -> Reply {
    let Some(step) = step else {
        return openai::exhausted(seq);
    };
    let ids = Ids::new(seq);
    let model = summary.model.as_deref().unwrap_or(DEFAULT_MODEL);
    let complete = |choice: Choice| {
        if summary.stream {
            stream(&ids, model, &choice)
        } else {
            whole(&ids, model, &choice)
        }
    };
    match step {
        Step::Text(text) => complete(Choice::Message(vec![(Duration::ZERO, text.clone())])),
        Step::ToolUse { name, input } => complete(Choice::Call {
            name: name.clone(),
            arguments: input.to_string(),
        }),
        Step::SlowChunks { text, delay_ms } => {
            let delay = Duration::from_millis(*delay_ms);
            complete(Choice::Message(
                words(text).into_iter().map(|word| (delay, word)).collect(),
            ))
        }
        Step::HttpError {
            status,
            retry_after_secs,
            body,
        } => openai::http_error(*status, *retry_after_secs, body.as_deref(), seq),
        Step::UsageLimit { resets_at_epoch_s } => openai::http_error(
            429,
            Some(Step::seconds_until(*resets_at_epoch_s)),
            None,
            seq,
        ),
        Step::HangBeforeHeaders => Reply::Hang,
        Step::StallMidStream => {
            let chunks = if summary.stream {
                vec![Chunk::now(sse_data(&chunk(
                    &ids,
                    model,
                    json!({"role": "assistant", "content": ""}),
                    None,
                )))]
            } else {
                Vec::new()
            };
            Reply::Send {
                status: 200,
                headers: headers(&ids, summary.stream),
                chunks,
                end: BodyEnd::Stall,
            }
        }
        Step::ErrorMidStream { message } => {
            if summary.stream {
                let first = chunk(
                    &ids,
                    model,
                    json!({"role": "assistant", "content": ""}),
                    None,
                );
                let error = openai::error_body("server_error", None, message);
                Reply::Send {
                    status: 200,
                    headers: headers(&ids, true),
                    chunks: vec![Chunk::now(sse_data(&first)), Chunk::now(sse_data(&error))],
                    end: BodyEnd::Close,
                }
            } else {
                openai::error(500, None, message, seq)
            }
        }
        // The server resolves request-dependent steps before planning a reply.
        Step::WriteToNamedPath { .. } | Step::ShellWriteToNamedPath { .. } => {
            openai::error(500, None, "fake_api: unresolved step", seq)
        }
    }
}

/// The reply to a side request (no tools offered): [`SIDE_REQUEST_TEXT`], streamed or not as asked.
pub fn side_reply(summary: &Summary, seq: u64) -> Reply {
    let ids = Ids::new(seq);
    let model = summary.model.as_deref().unwrap_or(DEFAULT_MODEL);
    let choice = Choice::Message(vec![(Duration::ZERO, SIDE_REQUEST_TEXT.to_owned())]);
    if summary.stream {
        stream(&ids, model, &choice)
    } else {
        whole(&ids, model, &choice)
    }
}

/// A 400 for a Chat Completions request whose body could not be read.
pub fn bad_request(why: &str, seq: u64) -> Reply {
    openai::bad_request(why, seq)
}

/// The ids of one reply.
struct Ids {
    completion: String,
    call: String,
    request: String,
}

impl Ids {
    fn new(seq: u64) -> Self {
        Self {
            completion: format!("chatcmpl-fake-{seq:04}"),
            call: format!("call_fake_{seq:04}"),
            request: openai::request_id(seq),
        }
    }
}

/// The one choice of a reply.
enum Choice {
    /// Assistant text, streamed as one delta per piece, each after its delay.
    Message(Vec<(Duration, String)>),
    /// One function call with its arguments as a JSON string.
    Call { name: String, arguments: String },
}

fn usage() -> Value {
    json!({
        "prompt_tokens": USAGE_INPUT_TOKENS,
        "completion_tokens": USAGE_OUTPUT_TOKENS,
        "total_tokens": USAGE_INPUT_TOKENS + USAGE_OUTPUT_TOKENS,
        "prompt_tokens_details": {"cached_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 0},
    })
}

fn headers(ids: &Ids, stream: bool) -> Vec<(&'static str, String)> {
    let request = ("x-request-id", ids.request.clone());
    if stream {
        sse_headers(vec![request])
    } else {
        vec![("content-type", "application/json".to_owned()), request]
    }
}

/// One `chat.completion.chunk` with one choice holding `delta`.
fn chunk(ids: &Ids, model: &str, delta: Value, finish_reason: Option<&str>) -> Value {
    json!({
        "id": ids.completion,
        "object": "chat.completion.chunk",
        "created": CREATED,
        "model": model,
        "system_fingerprint": null,
        "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish_reason}],
    })
}

/// A complete streamed reply: the choice's deltas, the finishing chunk, the usage chunk, `[DONE]`.
fn stream(ids: &Ids, model: &str, choice: &Choice) -> Reply {
    let mut chunks = Vec::new();
    let mut send = |delay: Duration, data: Value| {
        chunks.push(Chunk {
            delay,
            bytes: sse_data(&data),
        });
    };
    let finish_reason = match choice {
        Choice::Message(pieces) => {
            send(
                Duration::ZERO,
                chunk(
                    ids,
                    model,
                    json!({"role": "assistant", "content": ""}),
                    None,
                ),
            );
            for (delay, text) in pieces {
                send(*delay, chunk(ids, model, json!({"content": text}), None));
            }
            "stop"
        }
        Choice::Call { name, arguments } => {
            send(
                Duration::ZERO,
                chunk(
                    ids,
                    model,
                    json!({"role": "assistant", "content": null, "tool_calls": [{
                        "index": 0, "id": ids.call, "type": "function",
                        "function": {"name": name, "arguments": ""},
                    }]}),
                    None,
                ),
            );
            // Two partial pieces, as the real API streams arguments: the client must join them.
            let (first, second) = arguments.split_at(char_boundary_near_middle(arguments));
            for part in [first, second] {
                send(
                    Duration::ZERO,
                    chunk(
                        ids,
                        model,
                        json!({"tool_calls": [{"index": 0, "function": {"arguments": part}}]}),
                        None,
                    ),
                );
            }
            "tool_calls"
        }
    };
    send(
        Duration::ZERO,
        chunk(ids, model, json!({}), Some(finish_reason)),
    );
    send(
        Duration::ZERO,
        json!({
            "id": ids.completion,
            "object": "chat.completion.chunk",
            "created": CREATED,
            "model": model,
            "system_fingerprint": null,
            "choices": [],
            "usage": usage(),
        }),
    );
    chunks.push(Chunk::now(sse_done()));
    Reply::Send {
        status: 200,
        headers: headers(ids, true),
        chunks,
        end: BodyEnd::Close,
    }
}

/// A complete non-streamed reply (`chat.completion`), sent after the pieces' total delay.
fn whole(ids: &Ids, model: &str, choice: &Choice) -> Reply {
    let (message, finish_reason, delay) = match choice {
        Choice::Message(pieces) => (
            json!({
                "role": "assistant",
                "content": pieces.iter().map(|(_, text)| text.as_str()).collect::<String>(),
                "refusal": null,
            }),
            "stop",
            pieces.iter().map(|(delay, _)| *delay).sum(),
        ),
        Choice::Call { name, arguments } => (
            json!({
                "role": "assistant",
                "content": null,
                "refusal": null,
                "tool_calls": [{
                    "id": ids.call, "type": "function",
                    "function": {"name": name, "arguments": arguments},
                }],
            }),
            "tool_calls",
            Duration::ZERO,
        ),
    };
    let body = json!({
        "id": ids.completion,
        "object": "chat.completion",
        "created": CREATED,
        "model": model,
        "system_fingerprint": null,
        "choices": [{"index": 0, "message": message, "logprobs": null, "finish_reason": finish_reason}],
        "usage": usage(),
    });
    Reply::Send {
        status: 200,
        headers: headers(ids, false),
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
    fn summary_of_opencode_like_bodies() {
        let title = json!({
            "model": "fake-model",
            "stream": true,
            "messages": [
                {"role": "system", "content": "You are a title generator."},
                {"role": "user", "content": "Generate a title for this conversation:\n"},
                {"role": "user", "content": "say hi"},
            ],
        });
        assert_eq!(
            summarize(title.to_string().as_bytes()),
            Ok(Summary {
                model: Some("fake-model".to_owned()),
                stream: true,
                n_msgs: 3,
                history: false,
                tools: Vec::new(),
                last_user_text: Some("say hi".to_owned()),
                warmup: false,
            })
        );
        let turn = json!({
            "model": "fake-model",
            "tools": [{"type": "function", "function": {"name": "write"}}],
            "messages": [
                {"role": "system", "content": "You are opencode."},
                {"role": "user", "content": [{"type": "text", "text": "create it"}]},
                {"role": "assistant", "content": null, "tool_calls": []},
                {"role": "tool", "tool_call_id": "c", "content": "Wrote file successfully."},
            ],
        });
        let summary = summarize(turn.to_string().as_bytes()).unwrap();
        assert_eq!(
            (
                summary.stream,
                summary.n_msgs,
                summary.history,
                summary.tools,
                summary.last_user_text
            ),
            (
                false,
                4,
                true,
                vec!["write".to_owned()],
                Some("create it".to_owned())
            )
        );
        assert!(summarize(b"\"text\"").is_err());
    }
}
