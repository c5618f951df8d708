//! The OpenAI Responses API wire format, as Codex 0.171.0 uses it: request summaries of
//! `POST /v1/responses` bodies, and replies as server-sent events (`response.created`,
//! `response.in_progress`, `response.output_item.added`, `response.content_part.added`,
//! `response.output_text.delta`/`.done`, `response.function_call_arguments.delta`/`.done`,
//! `response.content_part.done`, `response.output_item.done`, `response.completed`,
//! `response.failed`) or as one JSON response object.
//!
//! Every event's data carries its `type` and a `sequence_number`. A tool call is a `function_call`
//! output item with a `call_id`, the tool's `name` and its `arguments` as a JSON *string*. Ids are
//! derived from the request's sequence number (`resp_fake_0001`, `msg_fake_0001`, `fc_fake_0001`,
//! `call_fake_0001`) and usage figures are the parent module's constants, so replies are
//! deterministic.

use std::time::Duration;

use serde_json::{Value, json};

use super::openai::{self, CREATED};
use super::wire::{
    BodyEnd, Chunk, Reply, Summary, char_boundary_near_middle, sse_event, sse_headers, words,
};
use super::{Step, USAGE_INPUT_TOKENS, USAGE_OUTPUT_TOKENS};

/// The model named in replies when the request named none.
const DEFAULT_MODEL: &str = "gpt-fake";

/// Input item types that can only come from an earlier model turn.
const MODEL_ITEM_TYPES: &[&str] = &[
    "function_call",
    "function_call_output",
    "custom_tool_call",
    "custom_tool_call_output",
    "local_shell_call",
    "local_shell_call_output",
    "reasoning",
];

/// Prefixes of the user-role texts Codex adds around the prompt (context, not the user's words).
const CONTEXT_PREFIXES: &[&str] = &[
    "<environment_context>",
    "<user_instructions>",
    "# AGENTS.md instructions",
];

/// The summary of a Responses request body: `n_msgs` counts the `input` items (developer and user
/// messages, earlier assistant messages, function calls and their outputs); `history` is true when
/// one of them is an assistant message or a function call or output.
///
/// # Errors
/// When the body is not a JSON object; the message says why.
pub fn summarize(body: &[u8]) -> Result<Summary, String> {
    let json = openai::parse_object(body)?;
    let (n_msgs, history, last_user_text) = match json.get("input") {
        Some(Value::String(text)) => (1, false, Some(text.clone())),
        Some(Value::Array(items)) => (
            items.len(),
            items.iter().any(is_model_item),
            items
                .iter()
                .filter(|item| item.get("role").and_then(Value::as_str) == Some("user"))
                .flat_map(|item| openai::content_texts(item.get("content")))
                .rfind(|text| {
                    let text = text.trim_start();
                    !CONTEXT_PREFIXES.iter().any(|p| text.starts_with(p))
                }),
        ),
        Some(_) | None => (0, false, None),
    };
    Ok(Summary {
        model: json.get("model").and_then(Value::as_str).map(str::to_owned),
        stream: json.get("stream").and_then(Value::as_bool).unwrap_or(false),
        n_msgs,
        history,
        tools: openai::tool_names(&json),
        last_user_text,
        warmup: json.get("generate").and_then(Value::as_bool) == Some(false),
    })
}

/// Whether an input item comes from an earlier model turn.
fn is_model_item(item: &Value) -> bool {
    item.get("role").and_then(Value::as_str) == Some("assistant")
        || item
            .get("type")
            .and_then(Value::as_str)
            .is_some_and(|kind| MODEL_ITEM_TYPES.contains(&kind))
}

/// The reply to a Responses request answered by `step` (`None`: the scenario is exhausted).
pub fn reply(step: Option<&Step>, summary: &Summary, seq: u64) -> Reply {
    let Some(step) = step else {
        return openai::exhausted(seq);
    };
    let ids = Ids::new(seq);
    let model = summary.model.as_deref().unwrap_or(DEFAULT_MODEL);
    let complete = |item: Item| {
        if summary.stream {
            stream(&ids, model, &item)
        } else {
            whole(&ids, model, &item)
        }
    };
    match step {
        Step::Text(text) => complete(Item::Message(vec![(Duration::ZERO, text.clone())])),
        Step::ToolUse { name, input } => complete(Item::Call {
            name: name.clone(),
            arguments: input.to_string(),
        }),
        Step::SlowChunks { text, delay_ms } => {
            let delay = Duration::from_millis(*delay_ms);
            complete(Item::Message(
                words(text).into_iter().map(|word| (delay, word)).collect(),
            ))
        }
        Step::HttpError {
            status,
            retry_after_secs,
            body,
        } => openai::http_error(*status, *retry_after_secs, body.as_deref(), seq),
        Step::UsageLimit { resets_at_epoch_s } => {
            let body = json!({"error": {
                "type": "usage_limit_reached",
                "message": "The usage limit has been reached",
                "plan_type": "pro",
                "resets_at": resets_at_epoch_s,
                "resets_in_seconds": Step::seconds_until(*resets_at_epoch_s),
            }});
            openai::http_error(429, None, Some(&body.to_string()), seq)
        }
        Step::HangBeforeHeaders => Reply::Hang,
        Step::StallMidStream => {
            let chunks = if summary.stream {
                let mut events = Events::default();
                events.push("response.created", created(&ids, model));
                events.chunks
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
                let mut events = Events::default();
                events.push("response.created", created(&ids, model));
                events.push("response.in_progress", created(&ids, model));
                let mut failed = response_object(&ids, model, "failed", Vec::new(), Value::Null);
                failed["error"] = json!({"code": "server_error", "message": message});
                events.push("response.failed", json!({"response": failed}));
                Reply::Send {
                    status: 200,
                    headers: headers(&ids, true),
                    chunks: events.chunks,
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

/// A 400 for a Responses request whose body could not be read.
pub fn bad_request(why: &str, seq: u64) -> Reply {
    openai::bad_request(why, seq)
}

/// The ids of one reply.
struct Ids {
    response: String,
    message: String,
    function_call: String,
    call: String,
    request: String,
}

impl Ids {
    fn new(seq: u64) -> Self {
        Self {
            response: format!("resp_fake_{seq:04}"),
            message: format!("msg_fake_{seq:04}"),
            function_call: format!("fc_fake_{seq:04}"),
            call: format!("call_fake_{seq:04}"),
            request: openai::request_id(seq),
        }
    }
}

/// The one output item of a reply.
enum Item {
    /// An assistant message with one `output_text` part, streamed as one delta per piece, each
    /// after its delay.
    Message(Vec<(Duration, String)>),
    /// A `function_call` with its arguments as a JSON string.
    Call { name: String, arguments: String },
}

impl Item {
    /// The item as it stands complete (in `response.output_item.done` and the response's `output`).
    fn done(&self, ids: &Ids) -> Value {
        match self {
            Self::Message(pieces) => {
                message_item(ids, "completed", vec![output_text(&concat(pieces))])
            }
            Self::Call { name, arguments } => call_item(ids, "completed", name, arguments),
        }
    }

    /// How long the pieces wait in all: when a non-streamed reply is sent.
    fn total_delay(&self) -> Duration {
        match self {
            Self::Message(pieces) => pieces.iter().map(|(delay, _)| *delay).sum(),
            Self::Call { .. } => Duration::ZERO,
        }
    }
}

fn concat(pieces: &[(Duration, String)]) -> String {
    pieces.iter().map(|(_, text)| text.as_str()).collect()
}

fn message_item(ids: &Ids, status: &str, content: Vec<Value>) -> Value {
    json!({
        "id": ids.message,
        "type": "message",
        "status": status,
        "role": "assistant",
        "content": content,
    })
}

fn call_item(ids: &Ids, status: &str, name: &str, arguments: &str) -> Value {
    json!({
        "id": ids.function_call,
        "type": "function_call",
        "status": status,
        "call_id": ids.call,
        "name": name,
        "arguments": arguments,
    })
}

fn output_text(text: &str) -> Value {
    json!({"type": "output_text", "text": text, "annotations": []})
}

fn usage() -> Value {
    json!({
        "input_tokens": USAGE_INPUT_TOKENS,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": USAGE_OUTPUT_TOKENS,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": USAGE_INPUT_TOKENS + USAGE_OUTPUT_TOKENS,
    })
}

/// The response object: in `response.created` (`in_progress`, no output, no usage), in
/// `response.completed` and as the whole non-streamed reply.
fn response_object(
    ids: &Ids,
    model: &str,
    status: &str,
    output: Vec<Value>,
    usage: Value,
) -> Value {
    json!({
        "id": ids.response,
        "object": "response",
        "created_at": CREATED,
        "status": status,
        "error": null,
        "incomplete_details": null,
        "model": model,
        "output": output,
        "parallel_tool_calls": true,
        "tool_choice": "auto",
        "tools": [],
        "usage": usage,
    })
}

/// The data of `response.created` and `response.in_progress`.
fn created(ids: &Ids, model: &str) -> Value {
    json!({"response": response_object(ids, model, "in_progress", Vec::new(), Value::Null)})
}

fn headers(ids: &Ids, stream: bool) -> Vec<(&'static str, String)> {
    let request = ("x-request-id", ids.request.clone());
    if stream {
        sse_headers(vec![request])
    } else {
        vec![("content-type", "application/json".to_owned()), request]
    }
}

/// Server-sent events under construction, numbered in order.
#[derive(Default)]
struct Events {
    chunks: Vec<Chunk>,
    next: u64,
}

impl Events {
    /// Adds the event `name`: `data` (an object) gains `type` and `sequence_number`.
    fn push(&mut self, name: &str, data: Value) {
        self.push_after(Duration::ZERO, name, data);
    }

    /// Like [`Events::push`], sent after `delay`.
    fn push_after(&mut self, delay: Duration, name: &str, mut data: Value) {
        if let Some(object) = data.as_object_mut() {
            object.insert("type".to_owned(), json!(name));
            object.insert("sequence_number".to_owned(), json!(self.next));
        }
        self.next += 1;
        self.chunks.push(Chunk {
            delay,
            bytes: sse_event(name, &data),
        });
    }
}

/// A complete streamed reply with one output item.
fn stream(ids: &Ids, model: &str, item: &Item) -> Reply {
    let mut events = Events::default();
    events.push("response.created", created(ids, model));
    events.push("response.in_progress", created(ids, model));
    match item {
        Item::Message(pieces) => {
            let at = |extra: Value| {
                let mut data =
                    json!({"item_id": ids.message, "output_index": 0, "content_index": 0});
                if let (Some(data), Value::Object(extra)) = (data.as_object_mut(), extra) {
                    data.extend(extra);
                }
                data
            };
            let full = concat(pieces);
            events.push(
                "response.output_item.added",
                json!({"output_index": 0, "item": message_item(ids, "in_progress", Vec::new())}),
            );
            events.push(
                "response.content_part.added",
                at(json!({"part": output_text("")})),
            );
            for (delay, text) in pieces {
                events.push_after(
                    *delay,
                    "response.output_text.delta",
                    at(json!({"delta": text})),
                );
            }
            events.push("response.output_text.done", at(json!({"text": full})));
            events.push(
                "response.content_part.done",
                at(json!({"part": output_text(&full)})),
            );
        }
        Item::Call { name, arguments } => {
            events.push(
                "response.output_item.added",
                json!({"output_index": 0, "item": call_item(ids, "in_progress", name, "")}),
            );
            // Two partial pieces, as the real API streams arguments: the client must join them.
            let (first, second) = arguments.split_at(char_boundary_near_middle(arguments));
            for part in [first, second] {
                events.push(
                    "response.function_call_arguments.delta",
                    json!({"item_id": ids.function_call, "output_index": 0, "delta": part}),
                );
            }
            events.push(
                "response.function_call_arguments.done",
                json!({"item_id": ids.function_call, "output_index": 0, "arguments": arguments}),
            );
        }
    }
    let done = item.done(ids);
    events.push(
        "response.output_item.done",
        json!({"output_index": 0, "item": done}),
    );
    events.push(
        "response.completed",
        json!({"response": response_object(ids, model, "completed", vec![done], usage())}),
    );
    Reply::Send {
        status: 200,
        headers: headers(ids, true),
        chunks: events.chunks,
        end: BodyEnd::Close,
    }
}

/// A complete non-streamed reply (the response object), sent after the item's total delay.
fn whole(ids: &Ids, model: &str, item: &Item) -> Reply {
    let delay = item.total_delay();
    let body = response_object(ids, model, "completed", vec![item.done(ids)], usage());
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
    fn summary_of_a_codex_like_body() {
        let body = json!({
            "model": "fake-model",
            "stream": true,
            "tools": [{"type": "function", "name": "exec_command"}, {"type": "web_search"}],
            "input": [
                {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "be good"}]},
                {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "first"}]},
                {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "<environment_context>\n</environment_context>"}]},
            ],
        });
        assert_eq!(
            summarize(body.to_string().as_bytes()),
            Ok(Summary {
                model: Some("fake-model".to_owned()),
                stream: true,
                n_msgs: 3,
                history: false,
                tools: vec!["exec_command".to_owned(), "web_search".to_owned()],
                last_user_text: Some("first".to_owned()),
                warmup: false,
            })
        );
        for earlier in [
            json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "hi"}]}),
            json!({"type": "function_call", "call_id": "c", "name": "exec_command", "arguments": "{}"}),
            json!({"type": "function_call_output", "call_id": "c", "output": "ok"}),
        ] {
            let body = json!({"input": [{"role": "user", "content": "x"}, earlier]});
            let summary = summarize(body.to_string().as_bytes()).unwrap();
            assert!(summary.history, "{body}");
            assert_eq!(summary.last_user_text.as_deref(), Some("x"));
        }
        let plain = summarize(br#"{"input": "just text"}"#).unwrap();
        assert_eq!(
            (plain.n_msgs, plain.last_user_text.as_deref()),
            (1, Some("just text"))
        );
        assert!(summarize(b"[1]").is_err());
    }
}
