//! The Gemini API wire format (`v1beta`), as Gemini CLI 0.61.0 uses it: request summaries of
//! `POST /v1beta/models/<model>:generateContent` and `…:streamGenerateContent?alt=sse` bodies, and
//! replies as server-sent `data: {GenerateContentResponse}` events (no `[DONE]` marker: the
//! stream ends with the connection), or as one such JSON object.
//!
//! The model is named by the path, not the body. A text reply streams one candidate part per
//! piece, the last chunk carrying `finishReason: "STOP"` and `usageMetadata`; a tool call is one
//! chunk with a `functionCall` part (`name`, `args` as an object, not a string) and
//! `finishReason: "STOP"` (Gemini has no tool-call finish reason). The CLI answers it with a user
//! content holding a `functionResponse` part. Errors are Google's `{"error": {"code", "message",
//! "status"}}`, 429 as `RESOURCE_EXHAUSTED`; an in-stream error is a `data: {"error": …}` event.
//!
//! A request offering no tools is a side request: Gemini's routing classification (a
//! `generateContent` to a flash-lite model before each turn when the model is `auto`) and its
//! next-speaker and loop checks. They ask for a JSON answer of a schema each, and [`side_reply`]
//! answers one object that satisfies every one of them (recorded: with another answer the
//! classifier logs a Zod error on stderr and falls back).

use std::time::Duration;

use serde_json::{Value, json};

use super::openai;
use super::wire::{BodyEnd, Chunk, Reply, Summary, default_message, sse_data, sse_headers, words};
use super::{Step, USAGE_INPUT_TOKENS, USAGE_OUTPUT_TOKENS};

/// The model named in replies when the path names none.
const DEFAULT_MODEL: &str = "gemini-fake";

/// What a side request gets: the routing classifiers' fields (`complexity_reasoning`,
/// `complexity_score` for the numerical one, `reasoning`, `model_choice` for the other), the
/// next-speaker check's (`next_speaker: "user"`: the turn is over) and nothing else.
const SIDE_JSON: &str = r#"{"complexity_reasoning":"fake_api side request","complexity_score":10,"reasoning":"fake_api side request","model_choice":"flash","next_speaker":"user"}"#;

/// The model a Gemini path names: `/v1beta/models/<model>:<method>` → `<model>`.
pub fn model_of(path: &str) -> Option<&str> {
    let rest = path.split('?').next()?.strip_prefix("/v1beta/models/")?;
    rest.split(':').next().filter(|m| !m.is_empty())
}

/// Whether a Gemini path asks for a stream (`:streamGenerateContent`).
pub fn is_stream(path: &str) -> bool {
    path.split('?')
        .next()
        .is_some_and(|p| p.ends_with(":streamGenerateContent"))
}

/// The summary of a Gemini request body: `n_msgs` counts the `contents`; `history` is true when one
/// of them has the role `model`; the tools are the names of every `functionDeclarations` entry.
/// The model and whether it streams come from the path ([`model_of`], [`is_stream`]), which the
/// caller fills in.
///
/// # Errors
/// When the body is not a JSON object; the message says why.
pub fn summarize(body: &[u8]) -> Result<Summary, String> {
    let json = openai::parse_object(body)?;
    let contents = json
        .get("contents")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let role = |c: &Value| c.get("role").and_then(Value::as_str).map(str::to_owned);
    let tools = json
        .get("tools")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .filter_map(|t| t.get("functionDeclarations").and_then(Value::as_array))
        .flatten()
        .filter_map(|f| f.get("name").and_then(Value::as_str).map(str::to_owned))
        .collect();
    Ok(Summary {
        model: None,
        stream: false,
        n_msgs: contents.len(),
        history: contents.iter().any(|c| role(c).as_deref() == Some("model")),
        tools,
        // The user's own words: text parts of user contents, function responses skipped.
        last_user_text: contents
            .iter()
            .filter(|c| role(c).as_deref() != Some("model"))
            .filter_map(|c| c.get("parts").and_then(Value::as_array))
            .flatten()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .rfind(|text| !text.trim().is_empty())
            .map(str::to_owned),
        warmup: false,
    })
}

/// The reply to an agent turn answered by `step` (`None`: the scenario is exhausted).
pub fn reply(step: Option<&Step>, summary: &Summary, seq: u64) -> Reply {
    let Some(step) = step else {
        return error(
            400,
            None,
            "fake_api: scenario exhausted (no step left for this request)",
        );
    };
    let model = summary.model.as_deref().unwrap_or(DEFAULT_MODEL);
    let complete = |parts: Vec<(Duration, Value)>| respond(model, summary.stream, parts, seq);
    match step {
        Step::Text(text) => complete(vec![(Duration::ZERO, json!({"text": text}))]),
        Step::ToolUse { name, input } => complete(vec![(
            Duration::ZERO,
            json!({"functionCall": {"name": name, "args": input}}),
        )]),
        Step::SlowChunks { text, delay_ms } => {
            let delay = Duration::from_millis(*delay_ms);
            complete(
                words(text)
                    .into_iter()
                    .map(|word| (delay, json!({"text": word})))
                    .collect(),
            )
        }
        Step::HttpError {
            status,
            retry_after_secs,
            body,
        } => match body {
            Some(raw) => openai::http_error(*status, *retry_after_secs, Some(raw), seq),
            None => error(*status, *retry_after_secs, &message(*status)),
        },
        Step::UsageLimit { resets_at_epoch_s } => error(
            429,
            Some(Step::seconds_until(*resets_at_epoch_s)),
            &message(429),
        ),
        Step::HangBeforeHeaders => Reply::Hang,
        Step::StallMidStream => Reply::Send {
            status: 200,
            headers: headers(summary.stream),
            chunks: if summary.stream {
                vec![Chunk::now(sse_data(&chunk(
                    model,
                    &json!({"text": ""}),
                    None,
                )))]
            } else {
                Vec::new()
            },
            end: BodyEnd::Stall,
        },
        Step::ErrorMidStream { message } => {
            if summary.stream {
                let first = chunk(model, &json!({"text": ""}), None);
                Reply::Send {
                    status: 200,
                    headers: headers(true),
                    chunks: vec![
                        Chunk::now(sse_data(&first)),
                        Chunk::now(sse_data(&error_body(500, message))),
                    ],
                    end: BodyEnd::Close,
                }
            } else {
                error(500, None, message)
            }
        }
        // The server resolves request-dependent steps before planning a reply.
        Step::WriteToNamedPath { .. } | Step::ShellWriteToNamedPath { .. } => {
            error(500, None, "fake_api: unresolved step")
        }
    }
}

/// The reply to a side request (no tools offered): [`SIDE_JSON`], streamed or not as asked.
pub fn side_reply(summary: &Summary, seq: u64) -> Reply {
    let model = summary.model.as_deref().unwrap_or(DEFAULT_MODEL);
    respond(
        model,
        summary.stream,
        vec![(Duration::ZERO, json!({"text": SIDE_JSON}))],
        seq,
    )
}

/// A 400 for a Gemini request whose body could not be read.
pub fn bad_request(why: &str, _seq: u64) -> Reply {
    error(400, None, why)
}

/// Google's wording of the usual statuses.
fn message(status: u16) -> String {
    match status {
        429 => "Resource has been exhausted (e.g. check quota).".to_owned(),
        401 | 403 => "API key not valid. Please pass a valid API key. (fake_api)".to_owned(),
        other => default_message(other),
    }
}

/// Google's status name for an HTTP status.
fn status_name(status: u16) -> &'static str {
    match status {
        400 => "INVALID_ARGUMENT",
        401 => "UNAUTHENTICATED",
        403 => "PERMISSION_DENIED",
        404 => "NOT_FOUND",
        429 => "RESOURCE_EXHAUSTED",
        503 => "UNAVAILABLE",
        _ => "INTERNAL",
    }
}

fn error_body(status: u16, message: &str) -> Value {
    json!({"error": {"code": status, "message": message, "status": status_name(status)}})
}

fn error(status: u16, retry_after_secs: Option<u64>, message: &str) -> Reply {
    let headers = retry_after_secs
        .map(|secs| vec![("retry-after", secs.to_string())])
        .unwrap_or_default();
    Reply::json(status, &error_body(status, message), headers)
}

fn headers(stream: bool) -> Vec<(&'static str, String)> {
    if stream {
        sse_headers(Vec::new())
    } else {
        vec![("content-type", "application/json".to_owned())]
    }
}

fn usage() -> Value {
    json!({
        "promptTokenCount": USAGE_INPUT_TOKENS,
        "candidatesTokenCount": USAGE_OUTPUT_TOKENS,
        "totalTokenCount": USAGE_INPUT_TOKENS + USAGE_OUTPUT_TOKENS,
    })
}

/// One `GenerateContentResponse` with one candidate holding `part`; the last one of a reply
/// carries `finishReason` and the usage.
fn chunk(model: &str, part: &Value, finish_reason: Option<&str>) -> Value {
    let mut candidate = json!({"content": {"role": "model", "parts": [part]}, "index": 0});
    let mut body = json!({"modelVersion": model});
    if let Some(reason) = finish_reason {
        candidate["finishReason"] = json!(reason);
        body["usageMetadata"] = usage();
    }
    body["candidates"] = json!([candidate]);
    body
}

/// A complete reply of `parts`: one `data:` event per part (each after its delay) when streamed,
/// else one object holding them all after their total delay.
fn respond(model: &str, stream: bool, parts: Vec<(Duration, Value)>, _seq: u64) -> Reply {
    if stream {
        let last = parts.len().saturating_sub(1);
        let chunks = parts
            .iter()
            .enumerate()
            .map(|(i, (delay, part))| Chunk {
                delay: *delay,
                bytes: sse_data(&chunk(model, part, (i == last).then_some("STOP"))),
            })
            .collect();
        Reply::Send {
            status: 200,
            headers: headers(true),
            chunks,
            end: BodyEnd::Close,
        }
    } else {
        let delay = parts.iter().map(|(delay, _)| *delay).sum();
        let all: Vec<Value> = parts.into_iter().map(|(_, part)| part).collect();
        let body = json!({
            "candidates": [{
                "content": {"role": "model", "parts": all},
                "finishReason": "STOP",
                "index": 0,
            }],
            "usageMetadata": usage(),
            "modelVersion": model,
        });
        Reply::Send {
            status: 200,
            headers: headers(false),
            chunks: vec![Chunk {
                delay,
                bytes: body.to_string().into(),
            }],
            end: BodyEnd::Close,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_path_names_the_model_and_the_stream() {
        let path = "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse";
        assert_eq!(model_of(path), Some("gemini-2.5-pro"));
        assert!(is_stream(path));
        assert!(!is_stream("/v1beta/models/flash-lite:generateContent"));
        assert_eq!(model_of("/v1/messages"), None);
    }

    #[test]
    fn summary_of_a_gemini_turn_skips_function_responses() {
        let turn = json!({
            "contents": [
                {"role": "user", "parts": [{"text": "<session_context>"}, {"text": "write /r/signals.json"}]},
                {"role": "model", "parts": [{"functionCall": {"name": "write_file", "args": {}}}]},
                {"role": "user", "parts": [{"functionResponse": {"name": "write_file", "response": {}}}]},
            ],
            "tools": [{"functionDeclarations": [{"name": "write_file"}, {"name": "run_shell_command"}]}],
        });
        let summary = summarize(turn.to_string().as_bytes()).unwrap();
        assert_eq!(summary.n_msgs, 3);
        assert!(summary.history);
        assert_eq!(summary.tools, ["write_file", "run_shell_command"]);
        assert_eq!(
            summary.last_user_text.as_deref(),
            Some("write /r/signals.json")
        );
    }
}
