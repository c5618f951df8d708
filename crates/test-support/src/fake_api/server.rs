//! The HTTP side of the fake model API: a hyper 1.x HTTP/1.1 server (keep-alive, chunked request
//! bodies) on its own thread and single-threaded tokio runtime, the routing of paths to endpoints, the
//! request log and the execution of reply plans.
//!
//! Shutdown: [`super::FakeApi`]'s drop fires the oneshot, the accept loop ends, and dropping the
//! runtime drops every connection task, so hung and stalled connections are closed too.

use std::collections::{BTreeMap, VecDeque};
use std::convert::Infallible;
use std::fs::File;
use std::io::{self, Write};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::{Body, Frame, Incoming};
use hyper::header::{HeaderMap, HeaderName, HeaderValue};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot};

use super::wire::{BodyEnd, Reply, Summary};
use super::{
    Endpoint, FakeApi, RecordedRequest, Scenario, SpawnKey, SpawnScript, Step, anthropic, chat,
    endpoint_consumes_step, gemini, responses,
};

/// Request headers worth recording (values kept verbatim; credentials are never recorded).
const HEADERS_OF_INTEREST: &[&str] = &[
    "accept",
    "accept-encoding",
    "anthropic-beta",
    "anthropic-dangerous-direct-browser-access",
    "anthropic-version",
    "connection",
    "content-encoding",
    "content-type",
    "transfer-encoding",
    "user-agent",
    "originator",
    "session-id",
    "thread-id",
    "x-app",
    "x-claude-code-session-id",
    "x-initiator",
    "x-interaction-type",
    "x-session-affinity",
    "x-session-id",
    "x-stainless-retry-count",
    "x-stainless-timeout",
];

/// The largest request body read (Claude Code's first request is about 100 kB).
const MAX_BODY: usize = 64 * 1024 * 1024;

type ReplyBody = BoxBody<Bytes, Infallible>;

/// What the server and the [`FakeApi`] handle share.
#[derive(Debug)]
pub struct State {
    started: Instant,
    seq: AtomicU64,
    script: Mutex<Script>,
    log: Mutex<Vec<RecordedRequest>>,
    log_file: Option<Mutex<File>>,
}

/// The scenario being played.
#[derive(Debug)]
struct Script {
    steps: VecDeque<Step>,
    then: Option<Step>,
    /// The spawn scripts, each with its steps left.
    spawns: Vec<(SpawnScript, VecDeque<Step>)>,
    /// The models served, when not any.
    models: Option<Vec<String>>,
    /// The key accepted, when not any.
    api_key: Option<String>,
}

/// Locks `mutex`, ignoring poisoning (a panicking test thread must not break the server).
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl State {
    pub fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.log).clone()
    }

    pub fn request_count(&self) -> usize {
        lock(&self.log).len()
    }

    pub fn steps_left(&self) -> usize {
        let script = lock(&self.script);
        script.steps.len() + script.spawns.iter().map(|(_, s)| s.len()).sum::<usize>()
    }

    /// The next step for a request of `spawn` (if it names one): the most specific matching spawn
    /// script's next one, else the shared script's next one, else the repeated one, else `None`
    /// (exhausted).
    fn next_step(&self, spawn: Option<&SpawnKey>) -> Option<Step> {
        let mut script = lock(&self.script);
        if let Some(key) = spawn {
            let best = script
                .spawns
                .iter_mut()
                .filter(|(spec, left)| !left.is_empty() && spec.matches(key))
                .fold(None::<(u8, &mut VecDeque<Step>)>, |best, (spec, left)| {
                    let rank = spec.specificity();
                    match best {
                        Some((top, _)) if top >= rank => best,
                        Some(_) | None => Some((rank, left)),
                    }
                });
            if let Some(step) = best.and_then(|(_, left)| left.pop_front()) {
                return Some(step);
            }
        }
        match script.steps.pop_front() {
            Some(step) => Some(step),
            None => script.then.clone(),
        }
    }

    /// The refusal a request gets before any script is read: its key is not the one accepted
    /// (401), else the model it names is not served (404).
    fn refusal(&self, wire: Wire, key: Option<&str>, model: Option<&str>) -> Option<Step> {
        let script = lock(&self.script);
        if let Some(accepted) = &script.api_key
            && key != Some(accepted.as_str())
        {
            return Some(Step::http_error(401));
        }
        let model = model?;
        let served = script.models.as_ref()?;
        if served.iter().any(|m| m == model) {
            return None;
        }
        Some(Step::HttpError {
            status: 404,
            retry_after_secs: None,
            body: wire.model_not_found(model),
        })
    }

    /// Adds `request` to the log; returns its index.
    fn record(&self, request: RecordedRequest) -> usize {
        let mut log = lock(&self.log);
        log.push(request);
        log.len() - 1
    }

    /// Sets the status of the request at `index` (if known) and appends it to the JSONL file.
    fn finish(&self, index: usize, status: Option<u16>) {
        let line = {
            let mut log = lock(&self.log);
            let Some(request) = log.get_mut(index) else {
                return;
            };
            request.status = status;
            serde_json::to_string(request)
        };
        if let (Some(file), Ok(line)) = (&self.log_file, line) {
            let mut file = lock(file);
            // The log file is a convenience; a full disk must not fail the test's request.
            let _ = writeln!(file, "{line}");
        }
    }
}

/// Binds `127.0.0.1:0` and starts the server thread.
pub fn start(scenario: Scenario, log_file: Option<File>) -> io::Result<FakeApi> {
    let std_listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    std_listener.set_nonblocking(true)?;
    let addr = std_listener.local_addr()?;
    let state = Arc::new(State {
        started: Instant::now(),
        seq: AtomicU64::new(0),
        script: Mutex::new(Script {
            steps: scenario.steps.into(),
            then: scenario.then,
            spawns: scenario
                .spawns
                .into_iter()
                .map(|spec| {
                    let steps = spec.steps.iter().cloned().collect();
                    (spec, steps)
                })
                .collect(),
            models: scenario.models,
            api_key: scenario.api_key,
        }),
        log: Mutex::new(Vec::new()),
        log_file: log_file.map(Mutex::new),
    });
    let (shutdown_tx, shutdown_rx) = oneshot::channel();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<io::Result<()>>();
    let server_state = Arc::clone(&state);
    let thread = std::thread::Builder::new()
        .name(format!("fake-api-{}", addr.port()))
        .spawn(move || {
            let runtime = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(runtime) => runtime,
                Err(err) => {
                    let _ = ready_tx.send(Err(err));
                    return;
                }
            };
            runtime.block_on(async move {
                let listener = match TcpListener::from_std(std_listener) {
                    Ok(listener) => listener,
                    Err(err) => {
                        let _ = ready_tx.send(Err(err));
                        return;
                    }
                };
                let _ = ready_tx.send(Ok(()));
                serve(listener, server_state, shutdown_rx).await;
            });
            // Dropping the runtime here drops every connection task, hung ones included.
        })?;
    let ready = ready_rx.recv().unwrap_or_else(|_| {
        Err(io::Error::other(
            "the fake API thread ended before starting",
        ))
    });
    let api = FakeApi {
        addr,
        state,
        shutdown: Some(shutdown_tx),
        thread: Some(thread),
    };
    ready.map(|()| api)
}

/// Accepts connections until `shutdown` fires (or its sender is dropped).
async fn serve(listener: TcpListener, state: Arc<State>, mut shutdown: oneshot::Receiver<()>) {
    loop {
        tokio::select! {
            _ = &mut shutdown => return,
            accepted = listener.accept() => match accepted {
                Ok((stream, _peer)) => {
                    let state = Arc::clone(&state);
                    tokio::spawn(async move {
                        let service = service_fn(move |request| handle(Arc::clone(&state), request));
                        // A client that resets or times out mid-request is normal in fault tests.
                        let _ = http1::Builder::new()
                            .keep_alive(true)
                            .serve_connection(TokioIo::new(stream), service)
                            .await;
                    });
                }
                // Out of file descriptors and the like: wait a little instead of spinning.
                Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            },
        }
    }
}

/// The wire format of an endpoint that has one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wire {
    Anthropic,
    Responses,
    Chat,
    Gemini,
}

impl Wire {
    fn of(endpoint: Endpoint) -> Option<Self> {
        match endpoint {
            Endpoint::AnthropicMessages
            | Endpoint::AnthropicMessagesSide
            | Endpoint::AnthropicCountTokens => Some(Self::Anthropic),
            Endpoint::OpenAiResponses | Endpoint::OpenAiResponsesSide => Some(Self::Responses),
            Endpoint::ChatCompletions | Endpoint::ChatCompletionsSide => Some(Self::Chat),
            Endpoint::GeminiGenerate | Endpoint::GeminiGenerateSide => Some(Self::Gemini),
            Endpoint::Unknown => None,
        }
    }

    /// The summary of a request body; `path` is read only by the Gemini API, whose path names
    /// the model and whether to stream.
    fn summarize(self, body: &[u8], path: &str) -> Result<Summary, String> {
        match self {
            Self::Anthropic => anthropic::summarize(body),
            Self::Responses => responses::summarize(body),
            Self::Chat => chat::summarize(body),
            Self::Gemini => gemini::summarize(body).map(|summary| Summary {
                model: gemini::model_of(path).map(str::to_owned),
                stream: gemini::is_stream(path),
                ..summary
            }),
        }
    }

    fn bad_request(self, why: &str, seq: u64) -> Reply {
        match self {
            Self::Anthropic => anthropic::bad_request(why, seq),
            Self::Responses => responses::bad_request(why, seq),
            Self::Chat => chat::bad_request(why, seq),
            Self::Gemini => gemini::bad_request(why, seq),
        }
    }

    /// The body of the API's 404 for a model it does not serve, naming the model as each API
    /// does; `None`: the API's usual 404 body.
    fn model_not_found(self, model: &str) -> Option<String> {
        match self {
            Self::Anthropic => Some(
                serde_json::json!({
                    "type": "error",
                    "error": {"type": "not_found_error", "message": format!("model: {model}")},
                })
                .to_string(),
            ),
            Self::Responses | Self::Chat => Some(
                serde_json::json!({"error": {
                    "message": format!("The model `{model}` does not exist or you do not have access to it."),
                    "type": "invalid_request_error",
                    "param": null,
                    "code": "model_not_found",
                }})
                .to_string(),
            ),
            Self::Gemini => Some(
                serde_json::json!({"error": {
                    "code": 404,
                    "message": format!("models/{model} is not found for API version v1beta, or is not supported for generateContent."),
                    "status": "NOT_FOUND",
                }})
                .to_string(),
            ),
        }
    }

    /// The reply to a request that consumed `step` (`None`: the scenario is exhausted).
    fn reply(self, step: Option<&Step>, summary: &Summary, seq: u64) -> Reply {
        match self {
            Self::Anthropic => anthropic::reply(step, summary, seq),
            Self::Responses => responses::reply(step, summary, seq),
            Self::Chat => chat::reply(step, summary, seq),
            Self::Gemini => gemini::reply(step, summary, seq),
        }
    }
}

/// The endpoint a request maps to by its method and path. A Chat Completions request is refined
/// by [`refine`] once its body is read.
fn route(method: &Method, path: &str) -> Endpoint {
    if method != Method::POST {
        return Endpoint::Unknown;
    }
    if path.starts_with("/v1beta/models/")
        && (path.ends_with(":generateContent") || path.ends_with(":streamGenerateContent"))
    {
        return Endpoint::GeminiGenerate;
    }
    match path.trim_end_matches('/') {
        "/v1/messages" => Endpoint::AnthropicMessages,
        "/v1/messages/count_tokens" => Endpoint::AnthropicCountTokens,
        "/v1/responses" => Endpoint::OpenAiResponses,
        "/v1/chat/completions" => Endpoint::ChatCompletions,
        _ => Endpoint::Unknown,
    }
}

/// The side-request rule, by what the request is: a model request that offers no tools (a title,
/// a topic check, a summary, a quota probe), or a warm-up, is a side request and consumes no step.
/// Every agent turn of the five CLIs offers tools.
fn refine(endpoint: Endpoint, summary: &Summary) -> Endpoint {
    let side = summary.tools.is_empty() || summary.warmup;
    match endpoint {
        Endpoint::AnthropicMessages if side => Endpoint::AnthropicMessagesSide,
        Endpoint::OpenAiResponses if side => Endpoint::OpenAiResponsesSide,
        Endpoint::ChatCompletions if side => Endpoint::ChatCompletionsSide,
        Endpoint::GeminiGenerate if side => Endpoint::GeminiGenerateSide,
        Endpoint::AnthropicMessages
        | Endpoint::AnthropicMessagesSide
        | Endpoint::AnthropicCountTokens
        | Endpoint::OpenAiResponses
        | Endpoint::OpenAiResponsesSide
        | Endpoint::ChatCompletions
        | Endpoint::ChatCompletionsSide
        | Endpoint::GeminiGenerate
        | Endpoint::GeminiGenerateSide
        | Endpoint::Unknown => endpoint,
    }
}

/// Answers one request: records it, picks the reply and carries it out.
async fn handle(
    state: Arc<State>,
    request: Request<Incoming>,
) -> Result<Response<ReplyBody>, Infallible> {
    let seq = state.seq.fetch_add(1, Ordering::SeqCst) + 1;
    let method = request.method().clone();
    let path = request.uri().path_and_query().map_or_else(
        || request.uri().path().to_owned(),
        |pq| pq.as_str().to_owned(),
    );
    let endpoint = route(&method, request.uri().path());
    let headers = headers_of_interest(request.headers());
    let auth = auth_kind(request.headers());
    let key = api_key(request.headers(), &path);
    let body = http_body_util::Limited::new(request.into_body(), MAX_BODY)
        .collect()
        .await
        .map(http_body_util::Collected::to_bytes);
    let at_ms = u64::try_from(state.started.elapsed().as_millis()).unwrap_or(u64::MAX);

    let wire = Wire::of(endpoint);
    let summary = match (&body, wire) {
        (Ok(bytes), Some(wire)) => wire.summarize(bytes, request_path(&path)),
        (Err(err), Some(_)) => Err(format!("could not read the request body: {err}")),
        (Ok(_) | Err(_), None) => Ok(Summary::default()),
    };
    let endpoint = match &summary {
        Ok(summary) => refine(endpoint, summary),
        Err(_) => endpoint,
    };
    // The last user message names the path on a first turn; after a resume it may be a short
    // continuation, and (like a real model) the fake then reads the whole request.
    let whole = match (&body, wire) {
        (Ok(bytes), Some(_)) => Some(json_strings(bytes)),
        (Ok(_) | Err(_), _) => None,
    };
    let (spawn, earlier_spawns) = spawns_named(
        summary
            .as_ref()
            .ok()
            .and_then(|s| s.last_user_text.as_deref()),
        whole.as_deref(),
    );
    let refusal = match (&summary, wire) {
        (Ok(summary), Some(wire)) => state
            .refusal(
                wire,
                key.as_deref(),
                // Side requests use the CLI's own small model, which a test does not name.
                summary
                    .model
                    .as_deref()
                    .filter(|_| endpoint_consumes_step(endpoint)),
            )
            .map(|step| (wire, step)),
        (Ok(_) | Err(_), _) => None,
    };
    // A CLI that reads its prompt from a file first sends only a pointer to it, whose path
    // lies in the preflight's record directory.
    let preflight = whole.as_deref().is_some_and(|text| {
        text.contains(super::PREFLIGHT_PROMPT_OPENING) || text.contains(super::PREFLIGHT_DIR)
    });
    let (step, reply) = match (&summary, wire) {
        (Err(why), Some(wire)) => (None, wire.bad_request(why, seq)),
        (Ok(summary), Some(_)) if let Some((wire, step)) = &refusal => (
            Some("refused".to_owned()),
            wire.reply(Some(step), summary, seq),
        ),
        (Ok(summary), Some(wire)) if preflight && endpoint_consumes_step(endpoint) => (
            Some("preflight".to_owned()),
            wire.reply(Some(&Step::text(super::PREFLIGHT_REPLY)), summary, seq),
        ),
        (Ok(summary), Some(wire)) if endpoint_consumes_step(endpoint) => {
            let step = state
                .next_step(spawn.as_ref())
                .map(|s| s.resolve_from([summary.last_user_text.as_deref(), whole.as_deref()]));
            let kind = step.as_ref().map_or("exhausted", Step::kind);
            (
                Some(kind.to_owned()),
                wire.reply(step.as_ref(), summary, seq),
            )
        }
        (Ok(summary), Some(_)) => (None, side_reply(endpoint, summary, seq, &method, &path)),
        (Ok(_) | Err(_), None) => (None, not_found(&method, &path)),
    };
    debug_assert!(step.is_none() || refusal.is_some() || endpoint_consumes_step(endpoint));

    let summary = summary.unwrap_or_default();
    let index = state.record(RecordedRequest {
        seq,
        at_ms,
        method: method.to_string(),
        path,
        endpoint,
        model: summary.model,
        stream: summary.stream,
        n_msgs: summary.n_msgs,
        history: summary.history,
        tools: summary.tools,
        last_user_text: summary.last_user_text,
        step,
        status: None,
        auth,
        headers,
        spawn,
        earlier_spawns,
        whole_text: whole.unwrap_or_default(),
    });
    state.finish(index, reply.status());
    Ok(carry_out(reply).await)
}

/// The path of a path and query.
fn request_path(path_and_query: &str) -> &str {
    path_and_query.split('?').next().unwrap_or(path_and_query)
}

/// The reply to a request of a known wire format that consumes no step.
fn side_reply(
    endpoint: Endpoint,
    summary: &Summary,
    seq: u64,
    method: &Method,
    path: &str,
) -> Reply {
    let side_text = Step::text(super::SIDE_REQUEST_TEXT);
    match endpoint {
        Endpoint::AnthropicCountTokens => anthropic::count_tokens(),
        Endpoint::AnthropicMessagesSide => anthropic::reply(Some(&side_text), summary, seq),
        Endpoint::OpenAiResponsesSide => responses::reply(Some(&side_text), summary, seq),
        Endpoint::ChatCompletionsSide => chat::side_reply(summary, seq),
        Endpoint::GeminiGenerateSide => gemini::side_reply(summary, seq),
        // Requests that consume a step never get here; answer them harmlessly all the same.
        Endpoint::AnthropicMessages
        | Endpoint::OpenAiResponses
        | Endpoint::ChatCompletions
        | Endpoint::GeminiGenerate
        | Endpoint::Unknown => not_found(method, path),
    }
}

/// The response for a reply plan; for [`Reply::Hang`], never (until the runtime is dropped).
async fn carry_out(reply: Reply) -> Response<ReplyBody> {
    let (status, headers, mut chunks, end) = match reply {
        Reply::Hang => {
            let never = std::future::pending::<Infallible>().await;
            match never {}
        }
        Reply::Send {
            status,
            headers,
            chunks,
            end,
        } => (status, headers, chunks, end),
    };
    // A single chunk that ends the body is sent whole (with content-length), after its delay.
    let body = match (end, chunks.len()) {
        (BodyEnd::Close, 0) => Full::new(Bytes::new()).boxed(),
        (BodyEnd::Close, 1) => {
            let chunk = chunks.remove(0);
            if !chunk.delay.is_zero() {
                tokio::time::sleep(chunk.delay).await;
            }
            Full::new(chunk.bytes).boxed()
        }
        (BodyEnd::Close | BodyEnd::Stall, _) => {
            let (tx, rx) = mpsc::channel::<Bytes>(16);
            tokio::spawn(async move {
                for chunk in chunks {
                    if !chunk.delay.is_zero() {
                        tokio::time::sleep(chunk.delay).await;
                    }
                    if tx.send(chunk.bytes).await.is_err() {
                        return; // The client went away.
                    }
                }
                match end {
                    BodyEnd::Close => {}
                    // Keep the body open until the client goes away or the runtime is dropped.
                    BodyEnd::Stall => tx.closed().await,
                }
            });
            ChannelBody { rx }.boxed()
        }
    };
    let mut response = Response::new(body);
    *response.status_mut() =
        StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    for (name, value) in headers {
        if let Ok(value) = HeaderValue::from_str(&value) {
            response
                .headers_mut()
                .append(HeaderName::from_static(name), value);
        }
    }
    response
}

/// A harmless 404 for anything that is not a known endpoint.
fn not_found(method: &Method, path: &str) -> Reply {
    Reply::json(
        404,
        &serde_json::json!({
            "type": "error",
            "error": {
                "type": "not_found_error",
                "message": format!("fake_api: no route for {method} {path}"),
            },
        }),
        Vec::new(),
    )
}

fn headers_of_interest(headers: &HeaderMap) -> BTreeMap<String, String> {
    HEADERS_OF_INTEREST
        .iter()
        .filter_map(|name| {
            let value = headers.get(*name)?;
            Some((
                (*name).to_owned(),
                String::from_utf8_lossy(value.as_bytes()).into_owned(),
            ))
        })
        .collect()
}

fn auth_kind(headers: &HeaderMap) -> Option<String> {
    if headers.contains_key("x-api-key") {
        return Some("x-api-key".to_owned());
    }
    let authorization = headers.get("authorization")?.as_bytes();
    let kind = if authorization
        .get(..7)
        .is_some_and(|scheme| scheme.eq_ignore_ascii_case(b"bearer "))
    {
        "bearer"
    } else {
        "authorization"
    };
    Some(kind.to_owned())
}

/// The API key a request carries: `x-api-key` (Anthropic), a bearer token (OpenAI), Google's
/// `x-goog-api-key` header or `key` query parameter.
fn api_key(headers: &HeaderMap, path_and_query: &str) -> Option<String> {
    let header = |name: &str| {
        headers
            .get(name)
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
    };
    if let Some(key) = header("x-api-key").or_else(|| header("x-goog-api-key")) {
        return Some(key);
    }
    if let Some(value) = header("authorization") {
        let token = value
            .get(..7)
            .filter(|scheme| scheme.eq_ignore_ascii_case("bearer "))
            .map_or(value.as_str(), |_| &value[7..]);
        return Some(token.to_owned());
    }
    path_and_query
        .split_once('?')
        .map(|(_, query)| query)
        .into_iter()
        .flat_map(|query| query.split('&'))
        .find_map(|pair| pair.strip_prefix("key="))
        .map(str::to_owned)
}

/// A response body fed by a channel: each message is one data frame; the body ends when the sender
/// is dropped.
struct ChannelBody {
    rx: mpsc::Receiver<Bytes>,
}

impl Body for ChannelBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.rx
            .poll_recv(cx)
            .map(|chunk| chunk.map(|bytes| Ok(Frame::data(bytes))))
    }
}

/// The sprint spawn a request belongs to (the last one its latest user text names, else the last
/// one the whole request names) and the other spawns it names, in order.
fn spawns_named(
    last_user_text: Option<&str>,
    whole: Option<&str>,
) -> (Option<SpawnKey>, Vec<SpawnKey>) {
    let mut all = whole.map(SpawnKey::find).unwrap_or_default();
    let current = last_user_text
        .and_then(|text| SpawnKey::find(text).pop())
        .or_else(|| all.last().cloned());
    all.retain(|key| Some(key) != current.as_ref());
    (current, all)
}

/// Every string value in a JSON body, one per line: what a model reads of the conversation.
fn json_strings(body: &[u8]) -> String {
    fn walk(value: &serde_json::Value, out: &mut String) {
        match value {
            serde_json::Value::String(s) => {
                out.push_str(s);
                out.push('\n');
            }
            serde_json::Value::Array(items) => items.iter().for_each(|v| walk(v, out)),
            serde_json::Value::Object(map) => map.values().for_each(|v| walk(v, out)),
            serde_json::Value::Null | serde_json::Value::Bool(_) | serde_json::Value::Number(_) => {
            }
        }
    }
    let mut out = String::new();
    if let Ok(value) = serde_json::from_slice::<serde_json::Value>(body) {
        walk(&value, &mut out);
    }
    out
}
