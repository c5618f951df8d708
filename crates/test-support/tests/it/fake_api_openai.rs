//! The fake model API's OpenAI wire formats spoken to over raw HTTP/1.1: the Responses API's event
//! order and shapes (text, function calls, in-stream failure, stall, the non-streamed object), Chat
//! Completions' chunks (text, `tool_calls` deltas, the usage chunk and `[DONE]`, in-stream errors,
//! slow chunks) and JSON replies, the OpenAI error body with `retry-after`, the side-request rule, how
//! `history` is detected in each format, and the per-tool argument shapes of the write steps —
//! including running the here-document Codex gets through `bash`; and the Gemini API (its routing
//! request a side request, a turn's `functionCall` part, `RESOURCE_EXHAUSTED`).

// test-support is a tool, not product: it may create processes.
#![allow(clippy::disallowed_methods)]
// Test code: a failed expectation should panic loudly.
#![allow(clippy::expect_used, clippy::panic, clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use corral_test_support::fake_api::{
    Endpoint, FakeApi, SIDE_REQUEST_TEXT, Scenario, Step, USAGE_INPUT_TOKENS, USAGE_OUTPUT_TOKENS,
};
use serde_json::{Value, json};

/// A response: status, headers (lower-case names) and the de-chunked body.
#[derive(Debug)]
struct Response {
    status: u16,
    headers: BTreeMap<String, String>,
    body: Vec<u8>,
}

impl Response {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("{e}: {:?}", String::from_utf8_lossy(&self.body)))
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(String::as_str)
    }

    /// The body's server-sent events: `(event name, data)`; `data` is `[DONE]` or JSON text.
    fn events(&self) -> Vec<(Option<String>, String)> {
        sse(&self.body)
    }

    /// The data of the events, parsed, without `[DONE]`.
    fn event_data(&self) -> Vec<Value> {
        self.events()
            .into_iter()
            .filter(|(_, data)| data != "[DONE]")
            .map(|(_, data)| serde_json::from_str(&data).unwrap())
            .collect()
    }
}

fn sse(body: &[u8]) -> Vec<(Option<String>, String)> {
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
                    data = Some(rest.to_owned());
                }
            }
            (name, data.expect("event data"))
        })
        .collect()
}

fn request_bytes(path: &str, body: &Value) -> Vec<u8> {
    let body = body.to_string();
    format!(
        "POST {path} HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer sk-test\r\n\
         content-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Splits a raw response into its status, headers and (de-chunked) body.
fn parse(raw: &[u8]) -> Response {
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no end of headers in {:?}", String::from_utf8_lossy(raw)));
    let head = std::str::from_utf8(&raw[..split]).unwrap();
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .expect("status line");
    let headers: BTreeMap<String, String> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let mut rest = &raw[split + 4..];
    let body = if headers.get("transfer-encoding").map(String::as_str) == Some("chunked") {
        let mut body = Vec::new();
        loop {
            let end = rest.windows(2).position(|w| w == b"\r\n").expect("size");
            let size = usize::from_str_radix(std::str::from_utf8(&rest[..end]).unwrap(), 16)
                .expect("hex size");
            rest = &rest[end + 2..];
            if size == 0 {
                break body;
            }
            body.extend_from_slice(&rest[..size]);
            rest = &rest[size + 2..];
        }
    } else {
        rest.to_vec()
    };
    Response {
        status,
        headers,
        body,
    }
}

/// Posts `body` as JSON on a fresh connection (`connection: close`) and reads the whole response.
fn post(addr: SocketAddr, path: &str, body: &Value) -> Response {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream.write_all(&request_bytes(path, body)).unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).expect("read the response");
    parse(&raw)
}

/// Posts `body` and reads what arrives until `quiet` passes without a byte (a stalled reply).
fn post_until_quiet(addr: SocketAddr, path: &str, body: &Value, quiet: Duration) -> String {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream.set_read_timeout(Some(quiet)).unwrap();
    stream.write_all(&request_bytes(path, body)).unwrap();
    let mut raw = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => panic!(
                "the stalled reply ended: {:?}",
                String::from_utf8_lossy(&raw)
            ),
            Ok(n) => raw.extend_from_slice(&buf[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => break,
            Err(e) => panic!("{e}"),
        }
    }
    String::from_utf8_lossy(&raw).into_owned()
}

/// A Responses body like Codex's, trimmed: developer text, the prompt, the environment context.
fn responses_body(stream: bool, prompt: &str) -> Value {
    json!({
        "model": "fake-model",
        "stream": stream,
        "tools": [{"type": "function", "name": "exec_command", "parameters": {}}, {"type": "web_search"}],
        "input": [
            {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "be precise"}]},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": prompt}]},
            {"type": "message", "role": "user", "content": [{"type": "input_text",
                "text": "<environment_context>\n  <cwd>/w</cwd>\n</environment_context>"}]},
        ],
    })
}

/// A Chat Completions body offering `tools`.
fn chat_body(stream: bool, tools: &[&str], prompt: &str) -> Value {
    let tools: Vec<Value> = tools
        .iter()
        .map(|name| json!({"type": "function", "function": {"name": name, "parameters": {}}}))
        .collect();
    json!({
        "model": "fake-model",
        "stream": stream,
        "stream_options": {"include_usage": true},
        "tools": tools,
        "messages": [
            {"role": "system", "content": "You are a CLI."},
            {"role": "user", "content": prompt},
        ],
    })
}

fn usage_responses() -> Value {
    json!({
        "input_tokens": USAGE_INPUT_TOKENS,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": USAGE_OUTPUT_TOKENS,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": USAGE_INPUT_TOKENS + USAGE_OUTPUT_TOKENS,
    })
}

#[test]
fn responses_text_streams_the_events_codex_needs_in_order() {
    let api = FakeApi::start(Scenario::script([Step::text("Hello there.")])).unwrap();
    let reply = post(api.addr(), "/v1/responses", &responses_body(true, "say hi"));

    assert_eq!(reply.status, 200);
    assert_eq!(
        reply.header("content-type"),
        Some("text/event-stream; charset=utf-8")
    );
    assert_eq!(reply.header("x-request-id"), Some("req_fake_0001"));
    let events = reply.events();
    let names: Vec<&str> = events.iter().filter_map(|(n, _)| n.as_deref()).collect();
    assert_eq!(
        names,
        [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.content_part.added",
            "response.output_text.delta",
            "response.output_text.done",
            "response.content_part.done",
            "response.output_item.done",
            "response.completed",
        ]
    );
    let data = reply.event_data();
    for (i, (event, data)) in names.iter().zip(&data).enumerate() {
        assert_eq!(data["type"], *event);
        assert_eq!(data["sequence_number"], i);
    }
    assert_eq!(data[0]["response"]["id"], "resp_fake_0001");
    assert_eq!(data[0]["response"]["status"], "in_progress");
    assert_eq!(data[4]["delta"], "Hello there.");
    assert_eq!(data[4]["item_id"], "msg_fake_0001");
    let message = json!({"id": "msg_fake_0001", "type": "message", "status": "completed",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "Hello there.", "annotations": []}]});
    assert_eq!(data[7]["item"], message);
    let completed = &data[8]["response"];
    assert_eq!(completed["status"], "completed");
    assert_eq!(completed["model"], "fake-model");
    assert_eq!(completed["output"], json!([message]));
    assert_eq!(completed["usage"], usage_responses());

    let requests = api.requests();
    assert_eq!(requests.len(), 1);
    let request = &requests[0];
    assert_eq!(request.endpoint, Endpoint::OpenAiResponses);
    assert_eq!(
        (request.n_msgs, request.history, request.stream),
        (3, false, true)
    );
    assert_eq!(request.tools, ["exec_command", "web_search"]);
    assert_eq!(request.last_user_text.as_deref(), Some("say hi"));
    assert_eq!(request.auth.as_deref(), Some("bearer"));
    assert_eq!(request.step.as_deref(), Some("text"));
}

#[test]
fn responses_function_calls_carry_call_id_name_and_string_arguments() {
    let input = json!({"cmd": "echo é > x"});
    let api = FakeApi::start(Scenario::script([Step::tool_use(
        "exec_command",
        input.clone(),
    )]))
    .unwrap();
    let reply = post(api.addr(), "/v1/responses", &responses_body(true, "go"));
    let data = reply.event_data();
    let kinds: Vec<&str> = data.iter().filter_map(|d| d["type"].as_str()).collect();
    assert_eq!(
        kinds,
        [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.function_call_arguments.delta",
            "response.function_call_arguments.delta",
            "response.function_call_arguments.done",
            "response.output_item.done",
            "response.completed",
        ]
    );
    assert_eq!(
        data[2]["item"],
        json!({"id": "fc_fake_0001", "type": "function_call", "status": "in_progress",
               "call_id": "call_fake_0001", "name": "exec_command", "arguments": ""})
    );
    let joined: String = data[3..5]
        .iter()
        .map(|d| d["delta"].as_str().unwrap())
        .collect();
    assert_eq!(serde_json::from_str::<Value>(&joined).unwrap(), input);
    let item = &data[6]["item"];
    assert_eq!(item["call_id"], "call_fake_0001");
    assert_eq!(item["name"], "exec_command");
    let arguments = item["arguments"].as_str().expect("arguments are a string");
    assert_eq!(serde_json::from_str::<Value>(arguments).unwrap(), input);
    assert_eq!(data[7]["response"]["output"], json!([item]));
}

#[test]
fn responses_without_stream_get_the_response_object() {
    let api = FakeApi::start(Scenario::script([Step::SlowChunks {
        text: "a b".to_owned(),
        delay_ms: 100,
    }]))
    .unwrap();
    let started = Instant::now();
    let reply = post(api.addr(), "/v1/responses", &responses_body(false, "hi"));
    assert!(started.elapsed() >= Duration::from_millis(200));
    assert_eq!(reply.header("content-type"), Some("application/json"));
    let body = reply.json();
    assert_eq!(body["object"], "response");
    assert_eq!(body["status"], "completed");
    assert_eq!(body["output"][0]["content"][0]["text"], "a b");
    assert_eq!(body["usage"], usage_responses());
}

/// Codex's spent usage window: 429 with the `usage_limit_reached` body and its reset.
#[test]
fn responses_usage_limit_is_codex_s_usage_limit_reached_body() {
    let reset = 1_900_000_000;
    let api = FakeApi::start(Scenario::script([Step::UsageLimit {
        resets_at_epoch_s: reset,
    }]))
    .unwrap();
    let reply = post(api.addr(), "/v1/responses", &responses_body(true, "hi"));
    assert_eq!(reply.status, 429);
    let body = reply.json();
    assert_eq!(body["error"]["type"], "usage_limit_reached");
    assert_eq!(body["error"]["resets_at"], reset);
    assert!(body["error"]["resets_in_seconds"].as_u64().unwrap() > 0);
}

#[test]
fn responses_slow_chunks_stream_one_delta_per_word() {
    let api = FakeApi::start(Scenario::script([Step::SlowChunks {
        text: "one two three".to_owned(),
        delay_ms: 120,
    }]))
    .unwrap();
    let started = Instant::now();
    let reply = post(api.addr(), "/v1/responses", &responses_body(true, "hi"));
    assert!(started.elapsed() >= Duration::from_millis(360));
    let deltas: Vec<String> = reply
        .event_data()
        .iter()
        .filter(|d| d["type"] == "response.output_text.delta")
        .map(|d| d["delta"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(deltas, ["one ", "two ", "three"]);
}

#[test]
fn openai_errors_have_the_error_body_and_retry_after() {
    let api = FakeApi::start(Scenario::script([
        Step::rate_limited(2),
        Step::http_error(401),
        Step::HttpError {
            status: 503,
            retry_after_secs: Some(7),
            body: Some("upstream down".to_owned()),
        },
        Step::rate_limited(1),
    ]))
    .unwrap();
    let reply = post(api.addr(), "/v1/responses", &responses_body(true, "hi"));
    assert_eq!(reply.status, 429);
    assert_eq!(reply.header("retry-after"), Some("2"));
    assert_eq!(reply.header("content-type"), Some("application/json"));
    assert_eq!(
        reply.json(),
        json!({"error": {"message": "Rate limited (fake_api)", "type": "requests",
                         "param": null, "code": "rate_limit_exceeded"}})
    );
    let reply = post(api.addr(), "/v1/responses", &responses_body(true, "hi"));
    assert_eq!(reply.status, 401);
    assert_eq!(reply.header("retry-after"), None);
    assert_eq!(reply.json()["error"]["code"], "invalid_api_key");
    let reply = post(api.addr(), "/v1/responses", &responses_body(true, "hi"));
    assert_eq!(
        (reply.status, reply.header("retry-after"), &reply.body[..]),
        (503, Some("7"), &b"upstream down"[..])
    );
    // The same step on Chat Completions.
    let reply = post(
        api.addr(),
        "/v1/chat/completions",
        &chat_body(false, &["bash"], "hi"),
    );
    assert_eq!(reply.status, 429);
    assert_eq!(reply.header("retry-after"), Some("1"));
    assert_eq!(reply.json()["error"]["message"], "Rate limited (fake_api)");
    // Exhausted: a 400 in the same shape.
    let reply = post(api.addr(), "/v1/responses", &responses_body(true, "hi"));
    assert_eq!(reply.status, 400);
    assert_eq!(reply.json()["error"]["type"], "invalid_request_error");
    assert_eq!(api.requests()[4].step.as_deref(), Some("exhausted"));
}

#[test]
fn an_error_mid_stream_is_response_failed_or_an_error_chunk() {
    let boom = || Step::ErrorMidStream {
        message: "boom".to_owned(),
    };
    let api = FakeApi::start(Scenario::script([boom(), boom(), boom(), boom()])).unwrap();

    let reply = post(api.addr(), "/v1/responses", &responses_body(true, "hi"));
    assert_eq!(reply.status, 200);
    let data = reply.event_data();
    let kinds: Vec<&str> = data.iter().filter_map(|d| d["type"].as_str()).collect();
    assert_eq!(
        kinds,
        [
            "response.created",
            "response.in_progress",
            "response.failed"
        ]
    );
    assert_eq!(data[2]["response"]["status"], "failed");
    assert_eq!(
        data[2]["response"]["error"],
        json!({"code": "server_error", "message": "boom"})
    );
    let reply = post(api.addr(), "/v1/responses", &responses_body(false, "hi"));
    assert_eq!(reply.status, 500);

    let reply = post(
        api.addr(),
        "/v1/chat/completions",
        &chat_body(true, &["bash"], "hi"),
    );
    assert_eq!(reply.status, 200);
    let events = reply.events();
    assert!(
        events.iter().all(|(_, data)| data != "[DONE]"),
        "{events:?}"
    );
    let data = reply.event_data();
    assert_eq!(data.len(), 2);
    assert_eq!(data[0]["choices"][0]["delta"]["role"], "assistant");
    assert_eq!(data[1]["error"]["message"], "boom");
    let reply = post(
        api.addr(),
        "/v1/chat/completions",
        &chat_body(false, &["bash"], "hi"),
    );
    assert_eq!(reply.status, 500);
}

#[test]
fn stalled_openai_streams_send_their_first_event_then_nothing() {
    let api = FakeApi::start(Scenario::forever(Step::StallMidStream)).unwrap();
    let quiet = Duration::from_millis(400);
    let raw = post_until_quiet(
        api.addr(),
        "/v1/responses",
        &responses_body(true, "hi"),
        quiet,
    );
    assert!(raw.starts_with("HTTP/1.1 200"), "{raw}");
    assert_eq!(raw.matches("event: ").count(), 1, "{raw}");
    assert!(raw.contains("event: response.created"), "{raw}");

    let raw = post_until_quiet(
        api.addr(),
        "/v1/chat/completions",
        &chat_body(true, &["bash"], "hi"),
        quiet,
    );
    assert!(raw.starts_with("HTTP/1.1 200"), "{raw}");
    assert_eq!(raw.matches("data: ").count(), 1, "{raw}");
    assert!(!raw.contains("[DONE]"), "{raw}");
    let statuses: Vec<Option<u16>> = api.requests().iter().map(|r| r.status).collect();
    assert_eq!(statuses, [Some(200), Some(200)]);
}

#[test]
fn chat_text_streams_chunks_a_finish_a_usage_chunk_and_done() {
    let api = FakeApi::start(Scenario::script([Step::text("Hello there.")])).unwrap();
    let reply = post(
        api.addr(),
        "/v1/chat/completions",
        &chat_body(true, &["write"], "say hi"),
    );
    assert_eq!(reply.status, 200);
    assert_eq!(
        reply.header("content-type"),
        Some("text/event-stream; charset=utf-8")
    );
    let events = reply.events();
    assert!(events.iter().all(|(name, _)| name.is_none()));
    assert_eq!(events.last().map(|(_, d)| d.as_str()), Some("[DONE]"));
    let data = reply.event_data();
    assert_eq!(data.len(), 4, "{data:#?}");
    for chunk in &data {
        assert_eq!(chunk["id"], "chatcmpl-fake-0001");
        assert_eq!(chunk["object"], "chat.completion.chunk");
        assert_eq!(chunk["model"], "fake-model");
    }
    assert_eq!(
        data[0]["choices"][0]["delta"],
        json!({"role": "assistant", "content": ""})
    );
    assert_eq!(
        data[1]["choices"][0]["delta"],
        json!({"content": "Hello there."})
    );
    assert_eq!(data[2]["choices"][0]["finish_reason"], "stop");
    assert_eq!(data[3]["choices"], json!([]));
    assert_eq!(data[3]["usage"]["prompt_tokens"], USAGE_INPUT_TOKENS);
    assert_eq!(data[3]["usage"]["completion_tokens"], USAGE_OUTPUT_TOKENS);
    assert_eq!(
        data[3]["usage"]["total_tokens"],
        USAGE_INPUT_TOKENS + USAGE_OUTPUT_TOKENS
    );

    let request = &api.requests()[0];
    assert_eq!(request.endpoint, Endpoint::ChatCompletions);
    assert_eq!(
        (request.n_msgs, request.history, request.stream),
        (2, false, true)
    );
    assert_eq!(request.tools, ["write"]);
    assert_eq!(request.last_user_text.as_deref(), Some("say hi"));
}

#[test]
fn chat_tool_calls_stream_as_deltas_and_finish_with_tool_calls() {
    let api = FakeApi::start(Scenario::script([Step::write_signals_with("write", "{}")])).unwrap();
    let reply = post(
        api.addr(),
        "/v1/chat/completions",
        &chat_body(true, &["write"], "Create /w/signals.json now"),
    );
    let data = reply.event_data();
    assert_eq!(data.len(), 5, "{data:#?}");
    assert_eq!(
        data[0]["choices"][0]["delta"]["tool_calls"],
        json!([{"index": 0, "id": "call_fake_0001", "type": "function",
                "function": {"name": "write", "arguments": ""}}])
    );
    let joined: String = data[1..3]
        .iter()
        .map(|d| {
            let call = &d["choices"][0]["delta"]["tool_calls"][0];
            assert_eq!(call["index"], 0);
            call["function"]["arguments"].as_str().unwrap().to_owned()
        })
        .collect();
    assert_eq!(
        serde_json::from_str::<Value>(&joined).unwrap(),
        json!({"filePath": "/w/signals.json", "content": "{}"})
    );
    assert_eq!(data[3]["choices"][0]["finish_reason"], "tool_calls");
    assert!(data[4]["usage"].is_object());
    assert_eq!(api.requests()[0].step.as_deref(), Some("tool_use"));
}

#[test]
fn chat_without_stream_gets_one_completion_object() {
    let api = FakeApi::start(Scenario::script([
        Step::write_signals_with("create_file", "{\"n\": 1}"),
        Step::text("Done."),
    ]))
    .unwrap();
    let reply = post(
        api.addr(),
        "/v1/chat/completions",
        &chat_body(false, &["create_file"], "Create /w/signals.json"),
    );
    assert_eq!(reply.header("content-type"), Some("application/json"));
    let body = reply.json();
    assert_eq!(body["object"], "chat.completion");
    let choice = &body["choices"][0];
    assert_eq!(choice["finish_reason"], "tool_calls");
    assert_eq!(choice["message"]["content"], Value::Null);
    let call = &choice["message"]["tool_calls"][0];
    assert_eq!(
        (&call["id"], &call["type"], &call["function"]["name"]),
        (
            &json!("call_fake_0001"),
            &json!("function"),
            &json!("create_file")
        )
    );
    assert_eq!(
        serde_json::from_str::<Value>(call["function"]["arguments"].as_str().unwrap()).unwrap(),
        json!({"path": "/w/signals.json", "content": "{\"n\": 1}"})
    );
    assert_eq!(body["usage"]["prompt_tokens"], USAGE_INPUT_TOKENS);

    let mut next = chat_body(false, &["create_file"], "Create /w/signals.json");
    next["messages"].as_array_mut().unwrap().extend([
        choice["message"].clone(),
        json!({"role": "tool", "tool_call_id": "call_fake_0001", "content": "ok"}),
    ]);
    let body = post(api.addr(), "/v1/chat/completions", &next).json();
    assert_eq!(body["choices"][0]["message"]["content"], "Done.");
    assert_eq!(body["choices"][0]["finish_reason"], "stop");
    let shape: Vec<(usize, bool)> = api
        .requests()
        .iter()
        .map(|r| (r.n_msgs, r.history))
        .collect();
    assert_eq!(shape, [(2, false), (4, true)]);
}

#[test]
fn the_side_request_rule_a_chat_request_without_tools_consumes_no_step() {
    let api = FakeApi::start(Scenario::script([Step::text("the agent's turn")])).unwrap();
    let mut title = chat_body(true, &[], "say hi");
    title.as_object_mut().unwrap().remove("tools");
    let reply = post(api.addr(), "/v1/chat/completions", &title);
    assert_eq!(reply.status, 200);
    let text: String = reply
        .event_data()
        .iter()
        .filter_map(|d| {
            d["choices"][0]["delta"]["content"]
                .as_str()
                .map(str::to_owned)
        })
        .collect();
    assert_eq!(text, SIDE_REQUEST_TEXT);
    // An empty tools list is a side request too, streamed or not.
    let reply = post(
        api.addr(),
        "/v1/chat/completions",
        &chat_body(false, &[], "say hi"),
    );
    assert_eq!(
        reply.json()["choices"][0]["message"]["content"],
        SIDE_REQUEST_TEXT
    );
    assert_eq!(api.steps_left(), 1);

    let reply = post(
        api.addr(),
        "/v1/chat/completions",
        &chat_body(false, &["bash"], "say hi"),
    );
    assert_eq!(
        reply.json()["choices"][0]["message"]["content"],
        "the agent's turn"
    );
    assert_eq!(api.steps_left(), 0);
    let log: Vec<(Endpoint, Option<String>, Option<u16>)> = api
        .requests()
        .into_iter()
        .map(|r| (r.endpoint, r.step, r.status))
        .collect();
    assert_eq!(
        log,
        [
            (Endpoint::ChatCompletionsSide, None, Some(200)),
            (Endpoint::ChatCompletionsSide, None, Some(200)),
            (
                Endpoint::ChatCompletions,
                Some("text".to_owned()),
                Some(200)
            ),
        ]
    );
    assert_eq!(api.model_requests().len(), 1);
}

/// A Responses request offering no tools, or a warm-up (`"generate": false`), is a side request:
/// it gets the side text and takes no step, so a Codex side request sent before or alongside its
/// turn cannot hand the turn the scenario's second step.
#[test]
fn the_side_request_rule_holds_for_responses_too() {
    let api = FakeApi::start(Scenario::script([
        Step::tool_use("exec_command", json!({"cmd": "true"})),
        Step::text("Done."),
    ]))
    .unwrap();
    let mut no_tools = responses_body(false, "Write a title for this thread");
    no_tools.as_object_mut().unwrap().remove("tools");
    let mut warmup = responses_body(false, "do the task");
    warmup["generate"] = json!(false);
    for side in [&no_tools, &warmup] {
        let reply = post(api.addr(), "/v1/responses", side);
        assert_eq!(reply.status, 200);
        assert_eq!(
            reply.json()["output"][0]["content"][0]["text"],
            SIDE_REQUEST_TEXT
        );
    }
    assert_eq!(api.steps_left(), 2);
    let turn = post(
        api.addr(),
        "/v1/responses",
        &responses_body(false, "do the task"),
    );
    assert_eq!(
        turn.json()["output"][0]["type"],
        "function_call",
        "{:?}",
        turn.json()
    );
    let log: Vec<(Endpoint, Option<String>)> = api
        .requests()
        .into_iter()
        .map(|r| (r.endpoint, r.step))
        .collect();
    assert_eq!(
        log,
        [
            (Endpoint::OpenAiResponsesSide, None),
            (Endpoint::OpenAiResponsesSide, None),
            (Endpoint::OpenAiResponses, Some("tool_use".to_owned())),
        ]
    );
}

#[test]
fn chat_slow_chunks_stream_one_word_at_a_time() {
    let api = FakeApi::start(Scenario::script([Step::SlowChunks {
        text: "one two three".to_owned(),
        delay_ms: 120,
    }]))
    .unwrap();
    let started = Instant::now();
    let reply = post(
        api.addr(),
        "/v1/chat/completions",
        &chat_body(true, &["bash"], "hi"),
    );
    assert!(started.elapsed() >= Duration::from_millis(360));
    let words: Vec<String> = reply
        .event_data()
        .iter()
        .filter_map(|d| {
            d["choices"][0]["delta"]["content"]
                .as_str()
                .map(str::to_owned)
        })
        .filter(|w| !w.is_empty())
        .collect();
    assert_eq!(words, ["one ", "two ", "three"]);
}

#[test]
fn responses_history_is_an_assistant_item_or_a_function_call_output() {
    let api = FakeApi::start(Scenario::forever(Step::text("ok"))).unwrap();
    let mut with_reply = responses_body(true, "second");
    with_reply["input"].as_array_mut().unwrap().insert(
        1,
        json!({"type": "message", "role": "assistant",
               "content": [{"type": "output_text", "text": "first answer"}]}),
    );
    let mut with_output = responses_body(true, "go");
    with_output["input"].as_array_mut().unwrap().push(
        json!({"type": "function_call_output", "call_id": "call_fake_0001", "output": "done"}),
    );
    for body in [responses_body(true, "first"), with_reply, with_output] {
        assert_eq!(post(api.addr(), "/v1/responses", &body).status, 200);
    }
    let shape: Vec<(usize, bool, Option<String>)> = api
        .requests()
        .into_iter()
        .map(|r| (r.n_msgs, r.history, r.last_user_text))
        .collect();
    assert_eq!(
        shape,
        [
            (3, false, Some("first".to_owned())),
            (4, true, Some("second".to_owned())),
            (4, true, Some("go".to_owned())),
        ]
    );
}

#[test]
fn the_shell_write_heredoc_writes_the_exact_content_through_bash() {
    let dir = tempfile::tempdir().unwrap();
    let signals = dir.path().join("signals.json");
    let content = "{\"text\": \"it's $HOME and `date` \\\\ FAKE_API_EOF\"}\n";
    let api = FakeApi::start(Scenario::script([Step::shell_write_signals(
        "exec_command",
        content,
    )]))
    .unwrap();
    let prompt = format!("Write {} for me.", signals.display());
    let reply = post(api.addr(), "/v1/responses", &responses_body(true, &prompt));
    let done = reply
        .event_data()
        .into_iter()
        .find(|d| d["type"] == "response.output_item.done")
        .expect("output_item.done");
    assert_eq!(done["item"]["name"], "exec_command");
    let arguments: Value =
        serde_json::from_str(done["item"]["arguments"].as_str().unwrap()).unwrap();
    let cmd = arguments["cmd"].as_str().expect("exec_command takes cmd");
    assert!(
        cmd.starts_with(&format!(
            "cat > '{}' <<'FAKE_API_EOF0'\n",
            signals.display()
        )),
        "{cmd}"
    );
    let status = std::process::Command::new("bash")
        .args(["-c", cmd])
        .current_dir(dir.path())
        .status()
        .expect("run bash");
    assert!(status.success());
    assert_eq!(std::fs::read_to_string(&signals).unwrap(), content);
}

/// A Gemini body like Gemini CLI's, trimmed: the session context and the prompt as parts of one
/// user content, the tools as function declarations (none for a routing classification).
fn gemini_body(tools: &[&str], prompt: &str) -> Value {
    let declarations: Vec<Value> = tools.iter().map(|t| json!({"name": t})).collect();
    let mut body = json!({
        "contents": [{"role": "user", "parts": [{"text": "<session_context>"}, {"text": prompt}]}],
    });
    if !tools.is_empty() {
        body["tools"] = json!([{"functionDeclarations": declarations}]);
    }
    body
}

#[test]
fn gemini_routing_is_a_side_request_and_a_turn_streams_its_parts_then_stop_and_usage() {
    let api = FakeApi::start(Scenario::script([
        Step::write_signals_for("gemini", "{}").unwrap(),
        Step::text("Done."),
    ]))
    .unwrap();
    // The routing classification: no tools, a JSON answer, no step consumed.
    let routing = post(
        api.addr(),
        "/v1beta/models/gemini-flash-lite:generateContent",
        &gemini_body(&[], "write /r/signals.json"),
    );
    assert_eq!(routing.status, 200);
    let text = routing.json()["candidates"][0]["content"]["parts"][0]["text"]
        .as_str()
        .unwrap()
        .to_owned();
    let answer: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(answer["complexity_score"], 10, "{answer}");
    assert_eq!(api.steps_left(), 2);
    // The turn: a functionCall part with the write tool's arguments as an object.
    let turn = post(
        api.addr(),
        "/v1beta/models/fake-model:streamGenerateContent?alt=sse",
        &gemini_body(
            &["write_file", "run_shell_command"],
            "write /r/signals.json",
        ),
    );
    let data = turn.event_data();
    assert_eq!(data.len(), 1, "{data:?}");
    assert_eq!(
        data[0]["candidates"][0]["content"]["parts"][0]["functionCall"],
        json!({"name": "write_file", "args": {"file_path": "/r/signals.json", "content": "{}"}})
    );
    assert_eq!(data[0]["candidates"][0]["finishReason"], "STOP");
    assert_eq!(
        data[0]["usageMetadata"]["promptTokenCount"],
        USAGE_INPUT_TOKENS
    );
    assert_eq!(
        data[0]["usageMetadata"]["candidatesTokenCount"],
        USAGE_OUTPUT_TOKENS
    );
    let requests = api.requests();
    assert_eq!(
        requests.iter().map(|r| r.endpoint).collect::<Vec<_>>(),
        [Endpoint::GeminiGenerateSide, Endpoint::GeminiGenerate]
    );
    assert_eq!(requests[1].model.as_deref(), Some("fake-model"));
    assert!(requests[1].stream);
}

#[test]
fn a_gemini_429_is_resource_exhausted() {
    let api = FakeApi::start(Scenario::script([Step::http_error(429)])).unwrap();
    let reply = post(
        api.addr(),
        "/v1beta/models/fake-model:streamGenerateContent?alt=sse",
        &gemini_body(&["write_file"], "hi"),
    );
    assert_eq!(reply.status, 429);
    assert_eq!(reply.json()["error"]["status"], "RESOURCE_EXHAUSTED");
}
