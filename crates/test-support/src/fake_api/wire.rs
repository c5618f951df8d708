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
