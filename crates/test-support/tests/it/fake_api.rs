//! The fake model API spoken to over raw HTTP/1.1 from a `TcpStream`: the Anthropic event order and
//! JSON shapes, which requests consume steps, errors and their headers, hangs, stalls and slow
//! streams, keep-alive with a chunked request body, the request log and the JSONL file.

// Test code: a failed expectation should panic loudly.
#![allow(clippy::expect_used, clippy::panic, clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use corral_test_support::fake_api::{
    Endpoint, FakeApi, RecordedRequest, SIDE_REQUEST_TEXT, Scenario, Step, USAGE_INPUT_TOKENS,
    USAGE_OUTPUT_TOKENS,
};
use serde_json::{Value, json};

/// A minimal HTTP/1.1 client on one connection.
struct Client {
    reader: BufReader<TcpStream>,
}

/// A response's status line and headers (lower-case names).
#[derive(Debug)]
struct Head {
    status: u16,
    headers: BTreeMap<String, String>,
}

impl Client {
    fn connect(addr: SocketAddr) -> Self {
        let stream = TcpStream::connect(addr).expect("connect to the fake API");
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        Self {
            reader: BufReader::new(stream),
        }
    }

    fn send_raw(&mut self, raw: &[u8]) {
        self.reader.get_mut().write_all(raw).expect("send");
    }

    /// Sends a request with a `content-length` body.
    fn send(&mut self, method: &str, path: &str, body: &str) {
        let head = format!(
            "{method} {path} HTTP/1.1\r\nhost: 127.0.0.1\r\nx-api-key: sk-test\r\n\
             anthropic-version: 2023-06-01\r\ncontent-type: application/json\r\n\
             content-length: {}\r\n\r\n",
            body.len()
        );
        self.send_raw(head.as_bytes());
        self.send_raw(body.as_bytes());
    }

    fn read_line(&mut self) -> String {
        let mut line = String::new();
        self.reader.read_line(&mut line).expect("read a line");
        line.trim_end_matches(['\r', '\n']).to_owned()
    }

    fn read_head(&mut self) -> Head {
        let status_line = self.read_line();
        let status = status_line
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("bad status line {status_line:?}"));
        let mut headers = BTreeMap::new();
        loop {
            let line = self.read_line();
            if line.is_empty() {
                return Head { status, headers };
            }
            let (name, value) = line.split_once(':').expect("header line");
            headers.insert(name.to_ascii_lowercase(), value.trim().to_owned());
        }
    }

    /// One chunk of a chunked body; `None` for the last (empty) chunk.
    fn read_chunk(&mut self) -> Option<Vec<u8>> {
        let size_line = self.read_line();
        let size = usize::from_str_radix(size_line.trim(), 16)
            .unwrap_or_else(|_| panic!("bad chunk size {size_line:?}"));
        let mut data = vec![0; size];
        self.reader.read_exact(&mut data).expect("chunk data");
        assert_eq!(self.read_line(), "", "chunk terminator");
        (size > 0).then_some(data)
    }

    fn read_body(&mut self, head: &Head) -> Vec<u8> {
        if let Some(len) = head.headers.get("content-length") {
            let mut data = vec![0; len.parse().unwrap()];
            self.reader.read_exact(&mut data).expect("body");
            return data;
        }
        assert_eq!(
            head.headers.get("transfer-encoding").map(String::as_str),
            Some("chunked"),
            "{head:?}"
        );
        let mut data = Vec::new();
        while let Some(chunk) = self.read_chunk() {
            data.extend(chunk);
        }
        data
    }

    fn exchange(&mut self, method: &str, path: &str, body: &str) -> (Head, Vec<u8>) {
        self.send(method, path, body);
        let head = self.read_head();
        let body = self.read_body(&head);
        (head, body)
    }
}

/// A Messages request body like Claude Code's, trimmed.
fn messages_body(stream: bool) -> String {
    json!({
        "model": "claude-test",
        "stream": stream,
        "max_tokens": 100,
        "tools": [{"name": "Bash", "input_schema": {}}, {"name": "Write", "input_schema": {}}],
        "messages": [{"role": "user", "content": [{"type": "text", "text": "say hi"}]}],
    })
    .to_string()
}

/// The `(event name, data)` pairs of an SSE body.
fn sse_events(body: &[u8]) -> Vec<(String, Value)> {
    let text = std::str::from_utf8(body).expect("utf-8 SSE");
    text.split("\n\n")
        .filter(|block| !block.trim().is_empty())
        .map(|block| {
            let mut name = None;
            let mut data = None;
            for line in block.lines() {
                if let Some(rest) = line.strip_prefix("event: ") {
                    name = Some(rest.to_owned());
                } else if let Some(rest) = line.strip_prefix("data: ") {
                    data = Some(serde_json::from_str(rest).expect("data is JSON"));
                }
            }
            (name.expect("event name"), data.expect("event data"))
        })
        .collect()
}

fn names(events: &[(String, Value)]) -> Vec<&str> {
    events.iter().map(|(name, _)| name.as_str()).collect()
}

/// The recorded request of `messages_body(stream)` answered by `step` with `status`.
fn recorded_message(seq: u64, stream: bool, step: &str, status: Option<u16>) -> RecordedRequest {
    RecordedRequest {
        seq,
        at_ms: 0,
        method: "POST".to_owned(),
        path: "/v1/messages?beta=true".to_owned(),
        endpoint: Endpoint::AnthropicMessages,
        model: Some("claude-test".to_owned()),
        stream,
        n_msgs: 1,
        history: false,
        tools: vec!["Bash".to_owned(), "Write".to_owned()],
        last_user_text: Some("say hi".to_owned()),
        step: Some(step.to_owned()),
        status,
        auth: Some("x-api-key".to_owned()),
        headers: BTreeMap::from([
            ("anthropic-version".to_owned(), "2023-06-01".to_owned()),
            ("content-type".to_owned(), "application/json".to_owned()),
        ]),
        spawn: None,
        earlier_spawns: Vec::new(),
        whole_text: String::new(),
    }
}

/// The log with arrival times zeroed, for whole-value comparisons.
/// The recorded requests without their times and their whole text (each test's body is its
/// own; what the whole text is for is asked elsewhere).
fn log_without_times(api: &FakeApi) -> Vec<RecordedRequest> {
    api.requests()
        .into_iter()
        .map(|r| RecordedRequest {
            at_ms: 0,
            whole_text: String::new(),
            ..r
        })
        .collect()
}

#[test]
fn text_reply_streams_the_messages_events_in_order() {
    let api = FakeApi::start(Scenario::script([Step::text("Hello there.")])).unwrap();
    let mut client = Client::connect(api.addr());
    let (head, body) = client.exchange("POST", "/v1/messages?beta=true", &messages_body(true));

    assert_eq!(head.status, 200);
    assert_eq!(
        head.headers.get("content-type").map(String::as_str),
        Some("text/event-stream; charset=utf-8")
    );
    let events = sse_events(&body);
    assert_eq!(
        names(&events),
        [
            "message_start",
            "ping",
            "content_block_start",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop"
        ]
    );
    assert_eq!(
        events[0].1,
        json!({"type": "message_start", "message": {
            "id": "msg_fake_0001", "type": "message", "role": "assistant", "model": "claude-test",
            "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": USAGE_INPUT_TOKENS, "cache_creation_input_tokens": 0,
                      "cache_read_input_tokens": 0, "output_tokens": 1}}})
    );
    assert_eq!(
        events[3].1,
        json!({"type": "content_block_delta", "index": 0,
               "delta": {"type": "text_delta", "text": "Hello there."}})
    );
    assert_eq!(
        events[5].1,
        json!({"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": null},
               "usage": {"output_tokens": USAGE_OUTPUT_TOKENS}})
    );
    assert_eq!(
        log_without_times(&api),
        [recorded_message(1, true, "text", Some(200))]
    );
    assert_eq!(api.steps_left(), 0);
}

#[test]
fn tool_use_streams_its_input_in_pieces_and_stops_for_the_tool() {
    let input = json!({"file_path": "/tmp/x/signals.json", "content": "{\"signal\": \"go\"} é"});
    let api = FakeApi::start(Scenario::script([Step::tool_use("Write", input.clone())])).unwrap();
    let mut client = Client::connect(api.addr());
    let (_, body) = client.exchange("POST", "/v1/messages?beta=true", &messages_body(true));

    let events = sse_events(&body);
    assert_eq!(
        names(&events),
        [
            "message_start",
            "ping",
            "content_block_start",
            "content_block_delta",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop"
        ]
    );
    assert_eq!(
        events[2].1,
        json!({"type": "content_block_start", "index": 0, "content_block":
               {"type": "tool_use", "id": "toolu_fake_0001", "name": "Write", "input": {}}})
    );
    let joined: String = events[3..5]
        .iter()
        .map(|(_, data)| data["delta"]["partial_json"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(serde_json::from_str::<Value>(&joined).unwrap(), input);
    assert_eq!(events[6].1["delta"]["stop_reason"], "tool_use");
}

#[test]
fn non_streaming_requests_get_one_json_message() {
    let input = json!({"command": "true"});
    let api = FakeApi::start(Scenario::script([
        Step::tool_use("Bash", input.clone()),
        Step::text("done"),
    ]))
    .unwrap();
    let mut client = Client::connect(api.addr());
    let (head, body) = client.exchange("POST", "/v1/messages", &messages_body(false));
    assert_eq!(head.status, 200);
    assert_eq!(
        head.headers.get("content-type").map(String::as_str),
        Some("application/json")
    );
    let usage = json!({"input_tokens": USAGE_INPUT_TOKENS, "cache_creation_input_tokens": 0,
                       "cache_read_input_tokens": 0, "output_tokens": USAGE_OUTPUT_TOKENS});
    assert_eq!(
        serde_json::from_slice::<Value>(&body).unwrap(),
        json!({"id": "msg_fake_0001", "type": "message", "role": "assistant", "model": "claude-test",
               "content": [{"type": "tool_use", "id": "toolu_fake_0001", "name": "Bash", "input": input}],
               "stop_reason": "tool_use", "stop_sequence": null, "usage": usage})
    );
    let (_, body) = client.exchange("POST", "/v1/messages", &messages_body(false));
    let message: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        message["content"],
        json!([{"type": "text", "text": "done"}])
    );
    assert_eq!(message["stop_reason"], "end_turn");
}

/// A side request (no tools offered: Claude Code's title, topic or quota requests) is answered with
/// the side text and never takes the agent turn's step, whether it arrives before, between or
/// alongside the turns: steps go by what a request is, not by when it arrives.
#[test]
fn a_messages_request_offering_no_tools_is_a_side_request_whenever_it_arrives() {
    let api = FakeApi::start(Scenario::script([
        Step::tool_use("Bash", json!({"command": "true"})),
        Step::text("done"),
    ]))
    .unwrap();
    let mut side_body: Value = serde_json::from_str(&messages_body(false)).unwrap();
    side_body.as_object_mut().unwrap().remove("tools");
    let side_body = side_body.to_string();
    let mut client = Client::connect(api.addr());
    let (head, body) = client.exchange("POST", "/v1/messages?beta=true", &side_body);
    assert_eq!(head.status, 200);
    let side: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        side["content"],
        json!([{"type": "text", "text": SIDE_REQUEST_TEXT}])
    );
    assert_eq!(api.steps_left(), 2, "the side request took no step");

    // The turn and another side request at once, on two connections, in either order.
    let addr = api.addr();
    let racing_side = std::thread::spawn(move || {
        let mut client = Client::connect(addr);
        let (_, body) = client.exchange("POST", "/v1/messages", &side_body);
        serde_json::from_slice::<Value>(&body).unwrap()["content"][0]["text"].clone()
    });
    let (_, body) = client.exchange("POST", "/v1/messages", &messages_body(false));
    let turn: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(turn["stop_reason"], "tool_use", "{turn}");
    assert_eq!(racing_side.join().unwrap(), SIDE_REQUEST_TEXT);
    let (_, body) = client.exchange("POST", "/v1/messages", &messages_body(false));
    let turn: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(turn["content"], json!([{"type": "text", "text": "done"}]));

    let mut endpoints: Vec<(Endpoint, Option<String>)> = api
        .requests()
        .into_iter()
        .map(|r| (r.endpoint, r.step))
        .collect();
    endpoints.sort_by_key(|(endpoint, step)| (format!("{endpoint:?}"), step.clone()));
    assert_eq!(
        endpoints,
        [
            (Endpoint::AnthropicMessages, Some("text".to_owned())),
            (Endpoint::AnthropicMessages, Some("tool_use".to_owned())),
            (Endpoint::AnthropicMessagesSide, None),
            (Endpoint::AnthropicMessagesSide, None),
        ]
    );
    assert_eq!(api.model_requests().len(), 2);
}

#[test]
fn count_tokens_and_unknown_paths_consume_no_step() {
    let api = FakeApi::start(Scenario::script([Step::text("only step")])).unwrap();
    let mut client = Client::connect(api.addr());

    let (head, body) = client.exchange(
        "POST",
        "/v1/messages/count_tokens?beta=true",
        &messages_body(false),
    );
    assert_eq!(head.status, 200);
    assert_eq!(
        serde_json::from_slice::<Value>(&body).unwrap(),
        json!({"input_tokens": USAGE_INPUT_TOKENS})
    );
    let (head, body) = client.exchange("GET", "/v1/models", "");
    assert_eq!(head.status, 404);
    assert_eq!(
        serde_json::from_slice::<Value>(&body).unwrap()["error"]["type"],
        "not_found_error"
    );
    assert_eq!(api.steps_left(), 1);

    let (head, _) = client.exchange("POST", "/v1/messages?beta=true", &messages_body(true));
    assert_eq!(head.status, 200);
    assert_eq!(api.steps_left(), 0);

    let summary: Vec<(Endpoint, Option<String>, Option<u16>)> = api
        .requests()
        .into_iter()
        .map(|r| (r.endpoint, r.step, r.status))
        .collect();
    assert_eq!(
        summary,
        [
            (Endpoint::AnthropicCountTokens, None, Some(200)),
            (Endpoint::Unknown, None, Some(404)),
            (
                Endpoint::AnthropicMessages,
                Some("text".to_owned()),
                Some(200)
            ),
        ]
    );
    assert_eq!(api.model_requests().len(), 1);
}

#[test]
fn http_errors_carry_retry_after_and_the_api_error_shape() {
    let api = FakeApi::start(Scenario::script([
        Step::rate_limited(3),
        Step::http_error(529),
        Step::HttpError {
            status: 500,
            retry_after_secs: None,
            body: Some("not json at all".to_owned()),
        },
    ]))
    .unwrap();
    let mut client = Client::connect(api.addr());

    let (head, body) = client.exchange("POST", "/v1/messages?beta=true", &messages_body(true));
    assert_eq!(head.status, 429);
    assert_eq!(
        head.headers.get("retry-after").map(String::as_str),
        Some("3")
    );
    assert_eq!(
        serde_json::from_slice::<Value>(&body).unwrap(),
        json!({"type": "error", "error": {"type": "rate_limit_error", "message": "Rate limited (fake_api)"},
               "request_id": "req_fake_0001"})
    );
    let (head, body) = client.exchange("POST", "/v1/messages?beta=true", &messages_body(true));
    assert_eq!(head.status, 529);
    assert!(!head.headers.contains_key("retry-after"));
    assert_eq!(
        serde_json::from_slice::<Value>(&body).unwrap()["error"]["type"],
        "overloaded_error"
    );
    let (head, body) = client.exchange("POST", "/v1/messages?beta=true", &messages_body(true));
    assert_eq!(head.status, 500);
    assert_eq!(body, b"not json at all");
}

/// A spent usage window: Anthropic's 429 carries the subscription's unified rate-limit headers
/// (what Claude Code reads the reset from) and the usage-limit wording with the reset.
#[test]
fn a_usage_limit_is_a_429_with_the_unified_reset_headers() {
    let api = FakeApi::start(Scenario::script([Step::UsageLimit {
        resets_at_epoch_s: 1_900_000_000,
    }]))
    .unwrap();
    let mut client = Client::connect(api.addr());
    let (head, body) = client.exchange("POST", "/v1/messages?beta=true", &messages_body(true));
    assert_eq!(head.status, 429);
    let header = |name: &str| head.headers.get(name).map(String::as_str);
    assert_eq!(
        header("anthropic-ratelimit-unified-status"),
        Some("rejected")
    );
    assert_eq!(
        header("anthropic-ratelimit-unified-reset"),
        Some("1900000000")
    );
    assert_eq!(
        serde_json::from_slice::<Value>(&body).unwrap()["error"],
        json!({"type": "rate_limit_error", "message": "Claude AI usage limit reached|1900000000"})
    );
    assert_eq!(api.model_requests()[0].step.as_deref(), Some("usage_limit"));
}

/// A Messages request body naming `model` with `text` as the user's words.
fn messages_body_with(model: &str, text: &str) -> String {
    json!({
        "model": model,
        "stream": false,
        "max_tokens": 100,
        "tools": [{"name": "Bash", "input_schema": {}}],
        "messages": [{"role": "user", "content": [{"type": "text", "text": text}]}],
    })
    .to_string()
}

#[test]
fn an_unserved_model_gets_404_a_wrong_key_401_and_a_preflight_ok_without_a_step() {
    use corral_test_support::fake_api::{PREFLIGHT_PROMPT_OPENING, PREFLIGHT_REPLY};
    let api =
        FakeApi::start(Scenario::script([Step::text("scripted")]).with_models(["claude-test"]))
            .unwrap();
    let mut client = Client::connect(api.addr());
    let (head, body) = client.exchange(
        "POST",
        "/v1/messages",
        &messages_body_with("claude-tset", "say hi"),
    );
    assert_eq!(head.status, 404);
    assert_eq!(
        serde_json::from_slice::<Value>(&body).unwrap()["error"],
        json!({"type": "not_found_error", "message": "model: claude-tset"})
    );
    let preflight = format!("{PREFLIGHT_PROMPT_OPENING} (/p/.corral/preflight/x): reply OK");
    let (head, body) = client.exchange(
        "POST",
        "/v1/messages",
        &messages_body_with("claude-test", &preflight),
    );
    assert_eq!(head.status, 200);
    let reply: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(reply["content"][0]["text"], PREFLIGHT_REPLY);
    assert_eq!(api.steps_left(), 1, "neither consumed the scripted step");
    let (_, body) = client.exchange(
        "POST",
        "/v1/messages",
        &messages_body_with("claude-test", "hi"),
    );
    let reply: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(reply["content"][0]["text"], "scripted");
    let steps: Vec<Option<String>> = api.requests().into_iter().map(|r| r.step).collect();
    assert_eq!(
        steps,
        [Some("refused"), Some("preflight"), Some("text")].map(|s| s.map(str::to_owned))
    );

    // The client sends `x-api-key: sk-test`.
    let api = FakeApi::start(Scenario::forever(Step::text("hi")).with_api_key("sk-other")).unwrap();
    let mut client = Client::connect(api.addr());
    let (head, body) = client.exchange("POST", "/v1/messages", &messages_body(false));
    assert_eq!(head.status, 401);
    assert_eq!(
        serde_json::from_slice::<Value>(&body).unwrap()["error"]["type"],
        "authentication_error"
    );
    let api = FakeApi::start(Scenario::forever(Step::text("hi")).with_api_key("sk-test")).unwrap();
    let mut client = Client::connect(api.addr());
    let (head, _) = client.exchange("POST", "/v1/messages", &messages_body(false));
    assert_eq!(head.status, 200);
}

#[test]
fn an_exhausted_script_answers_400_and_a_repeated_step_answers_forever() {
    let api = FakeApi::start(Scenario::script([Step::text("one")])).unwrap();
    let mut client = Client::connect(api.addr());
    client.exchange("POST", "/v1/messages", &messages_body(true));
    let (head, body) = client.exchange("POST", "/v1/messages", &messages_body(true));
    assert_eq!(head.status, 400);
    assert!(
        String::from_utf8_lossy(&body).contains("scenario exhausted"),
        "{body:?}"
    );
    assert_eq!(api.requests()[1].step.as_deref(), Some("exhausted"));

    let api = FakeApi::start(Scenario {
        steps: vec![Step::text("first")],
        then: Some(Step::rate_limited(1)),
        ..Scenario::default()
    })
    .unwrap();
    let mut client = Client::connect(api.addr());
    let statuses: Vec<u16> = (0..4)
        .map(|_| {
            client
                .exchange("POST", "/v1/messages", &messages_body(true))
                .0
                .status
        })
        .collect();
    assert_eq!(statuses, [200, 429, 429, 429]);
}

#[test]
fn a_hung_request_gets_nothing_and_is_closed_when_the_server_drops() {
    let api = FakeApi::start(Scenario::forever(Step::HangBeforeHeaders)).unwrap();
    let mut client = Client::connect(api.addr());
    client.send("POST", "/v1/messages?beta=true", &messages_body(true));
    assert!(api.wait_for_requests(1, Duration::from_secs(5)));
    assert_eq!(
        log_without_times(&api),
        [recorded_message(1, true, "hang_before_headers", None)]
    );

    client
        .reader
        .get_ref()
        .set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let mut byte = [0u8; 1];
    let err = client
        .reader
        .read(&mut byte)
        .expect_err("no answer while hung");
    assert!(
        matches!(err.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut),
        "{err:?}"
    );

    let dropped = Instant::now();
    drop(api);
    assert!(
        dropped.elapsed() < Duration::from_secs(2),
        "drop took too long"
    );
    client
        .reader
        .get_ref()
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    match client.reader.read(&mut byte) {
        Ok(0) => {}
        Err(err) if err.kind() == ErrorKind::ConnectionReset => {}
        other => panic!("expected the connection to be closed, got {other:?}"),
    }
}

#[test]
fn a_stalled_stream_sends_headers_and_message_start_then_nothing() {
    let api = FakeApi::start(Scenario::script([Step::StallMidStream])).unwrap();
    let mut client = Client::connect(api.addr());
    client.send("POST", "/v1/messages?beta=true", &messages_body(true));
    let head = client.read_head();
    assert_eq!(head.status, 200);
    let first = client.read_chunk().expect("a first chunk");
    assert_eq!(names(&sse_events(&first)), ["message_start"]);

    client
        .reader
        .get_ref()
        .set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let mut byte = [0u8; 1];
    let err = client
        .reader
        .read(&mut byte)
        .expect_err("silence after message_start");
    assert!(
        matches!(err.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut),
        "{err:?}"
    );
    assert_eq!(api.requests()[0].status, Some(200));
    drop(api);
    client
        .reader
        .get_ref()
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    match client.reader.read(&mut byte) {
        Ok(0) => {}
        Err(err) if err.kind() == ErrorKind::ConnectionReset => {}
        other => panic!("expected the connection to be closed, got {other:?}"),
    }
}

#[test]
fn slow_chunks_arrive_one_word_at_a_time() {
    let api = FakeApi::start(Scenario::script([
        Step::SlowChunks {
            text: "one two three".to_owned(),
            delay_ms: 150,
        },
        Step::SlowChunks {
            text: "a b".to_owned(),
            delay_ms: 100,
        },
    ]))
    .unwrap();
    let mut client = Client::connect(api.addr());
    let started = Instant::now();
    let (_, body) = client.exchange("POST", "/v1/messages", &messages_body(true));
    assert!(started.elapsed() >= Duration::from_millis(450));
    let events = sse_events(&body);
    let words: Vec<&str> = events
        .iter()
        .filter(|(name, _)| name == "content_block_delta")
        .map(|(_, data)| data["delta"]["text"].as_str().unwrap())
        .collect();
    assert_eq!(words, ["one ", "two ", "three"]);

    let started = Instant::now();
    let (_, body) = client.exchange("POST", "/v1/messages", &messages_body(false));
    assert!(started.elapsed() >= Duration::from_millis(200));
    assert_eq!(
        serde_json::from_slice::<Value>(&body).unwrap()["content"][0]["text"],
        "a b"
    );
}

#[test]
fn an_error_mid_stream_is_an_error_event_after_message_start() {
    let api = FakeApi::start(Scenario::script([
        Step::ErrorMidStream {
            message: "boom".to_owned(),
        },
        Step::ErrorMidStream {
            message: "boom".to_owned(),
        },
    ]))
    .unwrap();
    let mut client = Client::connect(api.addr());
    let (head, body) = client.exchange("POST", "/v1/messages", &messages_body(true));
    assert_eq!(head.status, 200);
    let events = sse_events(&body);
    assert_eq!(names(&events), ["message_start", "error"]);
    assert_eq!(
        events[1].1,
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "boom"}})
    );
    let (head, _) = client.exchange("POST", "/v1/messages", &messages_body(false));
    assert_eq!(head.status, 529);
}

#[test]
fn keep_alive_with_a_chunked_request_body() {
    let api = FakeApi::start(Scenario::script([Step::text("a"), Step::text("b")])).unwrap();
    let mut client = Client::connect(api.addr());
    let body = messages_body(true);
    let (first, second) = body.split_at(10);
    let raw = format!(
        "POST /v1/messages?beta=true HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer sk\r\n\
         transfer-encoding: chunked\r\n\r\n{:x}\r\n{first}\r\n{:x}\r\n{second}\r\n0\r\n\r\n",
        first.len(),
        second.len()
    );
    client.send_raw(raw.as_bytes());
    let head = client.read_head();
    assert_eq!(head.status, 200);
    client.read_body(&head);
    let (head, _) = client.exchange("POST", "/v1/messages?beta=true", &messages_body(true));
    assert_eq!(head.status, 200);

    let requests = api.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0].auth.as_deref(), Some("bearer"));
    assert_eq!(
        requests[0]
            .headers
            .get("transfer-encoding")
            .map(String::as_str),
        Some("chunked")
    );
    assert_eq!(requests[0].last_user_text.as_deref(), Some("say hi"));
}

#[test]
fn a_body_that_is_not_json_is_a_400_and_consumes_no_step() {
    let api = FakeApi::start(Scenario::script([Step::text("a")])).unwrap();
    let mut client = Client::connect(api.addr());
    let (head, _) = client.exchange("POST", "/v1/messages", "{not json");
    assert_eq!(head.status, 400);
    assert_eq!(api.steps_left(), 1);
    assert_eq!(api.requests()[0].step, None);
}

#[test]
fn the_jsonl_log_reads_back_as_the_recorded_requests() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("requests.jsonl");
    let api = FakeApi::start_with_log(
        Scenario::script([Step::rate_limited(1), Step::text("ok")]),
        &log,
    )
    .unwrap();
    let mut client = Client::connect(api.addr());
    client.exchange("POST", "/v1/messages?beta=true", &messages_body(true));
    client.exchange("POST", "/v1/messages?beta=true", &messages_body(true));
    let from_file: Vec<RecordedRequest> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(from_file, api.requests());
    assert_eq!(
        from_file
            .into_iter()
            .map(|r| RecordedRequest {
                at_ms: 0,
                whole_text: String::new(),
                ..r
            })
            .collect::<Vec<_>>(),
        [
            recorded_message(1, true, "http_error", Some(429)),
            recorded_message(2, true, "text", Some(200)),
        ]
    );
}

#[test]
fn the_url_is_loopback_without_v1() {
    let api = FakeApi::start(Scenario::default()).unwrap();
    assert!(api.addr().ip().is_loopback());
    assert_eq!(api.url(), format!("http://127.0.0.1:{}", api.addr().port()));
}
