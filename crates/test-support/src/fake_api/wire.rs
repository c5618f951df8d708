//! What a wire-format module hands the server: a summary of the request it parsed, and a plan of the
//! reply (status, headers, body chunks with delays, how the body ends). The server carries plans out
//! without knowing any API; the API modules build them without knowing any HTTP library.

use std::time::Duration;

use bytes::Bytes;

/// What the server records about a request body, whatever the API.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    /// The requested model.
    pub model: Option<String>,
    /// Whether a streamed reply was asked for.
    pub stream: bool,
    /// The number of messages (or input items) sent.
    pub n_msgs: usize,
    /// Whether an earlier assistant turn is among them.
    pub history: bool,
    /// The names of the tools offered.
    pub tools: Vec<String>,
    /// The last plain user text.
    pub last_user_text: Option<String>,
    /// Whether the request asks for no output at all: a connection warm-up (the Responses API's
    /// `"generate": false`).
    pub warmup: bool,
}

/// A reply to carry out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// Never answer; the connection stays open until the server shuts down.
    Hang,
    /// Send `status` and `headers`, then `chunks` in order (each after its delay), then end as `end`
    /// says. An empty `chunks` with [`BodyEnd::Close`] is an empty body.
    Send {
        /// The HTTP status.
        status: u16,
        /// Response headers (`content-type` included).
        headers: Vec<(&'static str, String)>,
        /// The body, in pieces.
        chunks: Vec<Chunk>,
        /// What happens after the last chunk.
        end: BodyEnd,
    },
}

/// One piece of a reply body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    /// How long to wait before sending it.
    pub delay: Duration,
    /// The bytes.
    pub bytes: Bytes,
}

impl Chunk {
    /// A chunk sent without waiting.
    pub fn now(bytes: impl Into<Bytes>) -> Self {
        Self {
            delay: Duration::ZERO,
            bytes: bytes.into(),
        }
    }
}

/// How a reply body ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyEnd {
    /// The body is complete.
    Close,
    /// The body stays open, silent, until the client goes away or the server shuts down.
    Stall,
}

impl Reply {
    /// A complete JSON reply.
    pub fn json(
        status: u16,
        body: &serde_json::Value,
        extra_headers: Vec<(&'static str, String)>,
    ) -> Self {
        let mut headers = vec![("content-type", "application/json".to_owned())];
        headers.extend(extra_headers);
        Self::Send {
            status,
            headers,
            chunks: vec![Chunk::now(body.to_string())],
            end: BodyEnd::Close,
        }
    }

    /// The status this reply sends, `None` for [`Reply::Hang`].
    pub fn status(&self) -> Option<u16> {
        match self {
            Self::Hang => None,
            Self::Send { status, .. } => Some(*status),
        }
    }
}

/// One server-sent event: `event: <name>` and `data: <json>`, then a blank line.
pub fn sse_event(name: &str, data: &serde_json::Value) -> Bytes {
    Bytes::from(format!("event: {name}\ndata: {data}\n\n"))
}

/// One unnamed server-sent event, `data: <json>` then a blank line (Chat Completions chunks).
pub fn sse_data(data: &serde_json::Value) -> Bytes {
    Bytes::from(format!("data: {data}\n\n"))
}

/// The Chat Completions end-of-stream marker, `data: [DONE]`.
pub fn sse_done() -> Bytes {
    Bytes::from_static(b"data: [DONE]\n\n")
}

/// The headers of a server-sent event stream, with `extra` (request ids) after them.
pub fn sse_headers(extra: Vec<(&'static str, String)>) -> Vec<(&'static str, String)> {
    let mut headers = vec![
        (
            "content-type",
            "text/event-stream; charset=utf-8".to_owned(),
        ),
        ("cache-control", "no-cache".to_owned()),
    ];
    headers.extend(extra);
    headers
}

/// The words of `text` for [`crate::fake_api::Step::SlowChunks`], each keeping its trailing space.
pub fn words(text: &str) -> Vec<String> {
    text.split_inclusive(' ').map(str::to_owned).collect()
}

/// The char boundary closest to the middle of `text`, at or after it (tool arguments are streamed
/// in two pieces split there, so the client must join them).
pub fn char_boundary_near_middle(text: &str) -> usize {
    (text.len() / 2..=text.len())
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(text.len())
}

/// The message of the default error body for `status`, whatever the API.
pub fn default_message(status: u16) -> String {
    match status {
        401 => "invalid x-api-key (fake_api)".to_owned(),
        429 => "Rate limited (fake_api)".to_owned(),
        500 => "Internal server error (fake_api)".to_owned(),
        529 => "Overloaded (fake_api)".to_owned(),
        other => format!("HTTP {other} (fake_api)"),
    }
}
