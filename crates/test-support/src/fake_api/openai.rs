//! What the two OpenAI wire formats (Responses in `responses.rs`, Chat Completions in `chat.rs`)
//! share: the error body `{"error": {"message", "type", "param", "code"}}` with its headers, the
//! `x-request-id` header, the fixed `created` timestamp, the usage figures and the request fields
//! both formats summarize the same way.

use serde_json::{Value, json};

use super::wire::{BodyEnd, Chunk, Reply, default_message};

/// The `created` / `created_at` timestamp of every reply (fixed, so replies are deterministic).
pub const CREATED: u64 = 1_796_040_000;

/// The `x-request-id` of the reply to request `seq`.
pub fn request_id(seq: u64) -> String {
    format!("req_fake_{seq:04}")
}

/// The reply to a [`super::Step::HttpError`]: `body` verbatim (as JSON) when given, else the API's
/// error JSON for `status`; `retry-after` when given.
pub fn http_error(
    status: u16,
    retry_after_secs: Option<u64>,
    body: Option<&str>,
    seq: u64,
) -> Reply {
    match body {
        Some(raw) => {
            let mut headers = vec![
                ("content-type", "application/json".to_owned()),
                ("x-request-id", request_id(seq)),
            ];
            if let Some(secs) = retry_after_secs {
                headers.push(("retry-after", secs.to_string()));
            }
            Reply::Send {
                status,
                headers,
                chunks: vec![Chunk::now(raw.to_owned())],
                end: BodyEnd::Close,
            }
        }
        None => error(status, retry_after_secs, &message(status), seq),
    }
}

/// The default error message for `status` on the OpenAI APIs.
fn message(status: u16) -> String {
    match status {
        401 => "Incorrect API key provided (fake_api)".to_owned(),
        other => default_message(other),
    }
}

/// The API's error reply: `{"error": {"message", "type", "param": null, "code"}}`, with
/// `x-request-id` and, when given, `retry-after`.
pub fn error(status: u16, retry_after_secs: Option<u64>, message: &str, seq: u64) -> Reply {
    let mut headers = vec![("x-request-id", request_id(seq))];
    if let Some(secs) = retry_after_secs {
        headers.push(("retry-after", secs.to_string()));
    }
    let (kind, code) = error_kind(status);
    Reply::json(status, &error_body(kind, code, message), headers)
}

/// `{"error": {"message", "type", "param": null, "code"}}`.
pub fn error_body(kind: &str, code: Option<&str>, message: &str) -> Value {
    json!({"error": {"message": message, "type": kind, "param": null, "code": code}})
}

/// The `error.type` and `error.code` the OpenAI APIs send with an HTTP status.
fn error_kind(status: u16) -> (&'static str, Option<&'static str>) {
    match status {
        400 => ("invalid_request_error", None),
        401 => ("invalid_request_error", Some("invalid_api_key")),
        403 => ("permission_error", None),
        404 => ("invalid_request_error", Some("model_not_found")),
        429 => ("requests", Some("rate_limit_exceeded")),
        503 | 529 => ("server_error", Some("overloaded")),
        _ => ("server_error", None),
    }
}

/// A 400 for a request whose body could not be read.
pub fn bad_request(why: &str, seq: u64) -> Reply {
    error(400, None, &format!("fake_api: {why}"), seq)
}

/// The 400 answering a request when the scenario has no step left.
pub fn exhausted(seq: u64) -> Reply {
    error(
        400,
        None,
        "fake_api: scenario exhausted (no step left for this request)",
        seq,
    )
}

/// The names of the tools a request offers: each tool's `name`, else its `function.name` (Chat
/// Completions), else its `type` (built-in tools such as `web_search`).
pub fn tool_names(json: &Value) -> Vec<String> {
    json.get("tools")
        .and_then(Value::as_array)
        .map(|tools| {
            tools
                .iter()
                .filter_map(|tool| {
                    tool.get("name")
                        .or_else(|| tool.get("function").and_then(|f| f.get("name")))
                        .or_else(|| tool.get("type"))
                        .and_then(Value::as_str)
                })
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// The texts of a message's `content`: a string, or the `text` of its parts (`text`,
/// `input_text`, `output_text`).
pub fn content_texts(content: Option<&Value>) -> Vec<String> {
    match content {
        Some(Value::String(text)) => vec![text.clone()],
        Some(Value::Array(parts)) => parts
            .iter()
            .filter(|part| {
                matches!(
                    part.get("type").and_then(Value::as_str),
                    Some("text" | "input_text" | "output_text")
                )
            })
            .filter_map(|part| part.get("text").and_then(Value::as_str))
            .map(str::to_owned)
            .collect(),
        Some(_) | None => Vec::new(),
    }
}

/// The request body as a JSON object.
///
/// # Errors
/// When the body is not JSON or not an object; the message says why.
pub fn parse_object(body: &[u8]) -> Result<Value, String> {
    let json: Value =
        serde_json::from_slice(body).map_err(|err| format!("request body is not JSON: {err}"))?;
    if json.is_object() {
        Ok(json)
    } else {
        Err("request body is not a JSON object".to_owned())
    }
}
