//! The fake model API's scripts for a sprint's spawns, over raw HTTP/1.1: the generator's and the
//! evaluator's requests take their own scripts whatever order they arrive in (told apart by the
//! spawn directory a path in the request lies in: `…/rounds/<N>/<role>/signals.json`, or the prompt
//! file a pointer-file CLI reads), a round's script before its role's
//! before the shared one, a resumed generator's request records the earlier round it re-sends, the
//! session header, and the write steps resolving to the current round's path.

// Test code: a failed expectation should panic loudly.
#![allow(clippy::expect_used, clippy::panic, clippy::unwrap_used)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use corral_test_support::fake_api::{FakeApi, RecordedRequest, Role, Scenario, SpawnKey, Step};
use serde_json::{Value, json};

const SPRINT: &str = "/w/repo/.corral/sprints/demo";

/// The absolute `signals.json` path of a spawn, in the sprint layout.
fn signals(task: &str, round: u32, role: Role) -> String {
    format!(
        "{SPRINT}/implement/{task}/rounds/{round}/{}/signals.json",
        role.as_str()
    )
}

/// A prompt whose contract section names the spawn's `signals.json`, as the sprint's do.
fn prompt(task: &str, round: u32, role: Role) -> String {
    format!(
        "# Task {task}, round {round}\n\n## Contract\n\nWrite your signals to `{}`.",
        signals(task, round, role)
    )
}

/// A non-streamed Messages request holding `turns` (user texts, each answered by an assistant
/// text), with a Claude Code session header.
fn messages(turns: &[String], session: &str) -> Value {
    let mut msgs = Vec::new();
    for (i, text) in turns.iter().enumerate() {
        if i > 0 {
            msgs.push(json!({"role": "assistant", "content": [{"type": "text", "text": "ok"}]}));
        }
        msgs.push(json!({"role": "user", "content": [{"type": "text", "text": text}]}));
    }
    json!({
        "model": "claude-test",
        "stream": false,
        "max_tokens": 100,
        "tools": [{"name": "Write", "input_schema": {}}],
        "messages": msgs,
        "metadata": {"session": session},
    })
}

/// Posts `body` to `/v1/messages` on a fresh connection; the status and the JSON body.
fn post(addr: SocketAddr, body: &Value, session: &str) -> (u16, Value) {
    let body = body.to_string();
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let head = format!(
        "POST /v1/messages HTTP/1.1\r\nhost: 127.0.0.1\r\nx-api-key: sk-test\r\n\
         x-claude-code-session-id: {session}\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(body.as_bytes()).unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).expect("read the response");
    let raw = String::from_utf8(raw).unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").expect("end of headers");
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("status");
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

/// The text of a non-streamed reply's first content block.
fn text_of(reply: &Value) -> &str {
    reply["content"][0]["text"].as_str().unwrap_or("")
}

/// Asks once as the spawn `(task, round, role)` starting fresh; the reply's text.
fn ask(api: &FakeApi, task: &str, round: u32, role: Role) -> String {
    let (status, reply) = post(
        api.addr(),
        &messages(&[prompt(task, round, role)], "s"),
        "s",
    );
    assert_eq!(status, 200, "{reply}");
    text_of(&reply).to_owned()
}

#[test]
fn each_role_takes_its_own_script_whatever_the_order() {
    let api = FakeApi::start(Scenario::by_role(
        [Step::text("g1"), Step::text("g2"), Step::text("g3")],
        [Step::text("e1"), Step::text("e2")],
    ))
    .unwrap();
    assert_eq!(api.steps_left(), 5);
    assert_eq!(ask(&api, "t1", 1, Role::Evaluator), "e1");
    assert_eq!(ask(&api, "t1", 1, Role::Generator), "g1");
    assert_eq!(ask(&api, "t1", 1, Role::Generator), "g2");
    assert_eq!(ask(&api, "t2", 1, Role::Evaluator), "e2");
    assert_eq!(ask(&api, "t2", 1, Role::Generator), "g3");
    assert_eq!(api.steps_left(), 0);

    // Used up, a role falls back to the shared script: here none, so the exhausted 400.
    let (status, _) = post(
        api.addr(),
        &messages(&[prompt("t2", 1, Role::Evaluator)], "s"),
        "s",
    );
    assert_eq!(status, 400);
    let roles: Vec<Option<Role>> = api
        .model_requests()
        .iter()
        .map(|r| r.spawn.as_ref().map(|k| k.role))
        .collect();
    use Role::{Evaluator as E, Generator as G};
    assert_eq!(
        roles,
        [E, G, G, E, G, E].map(Some),
        "every request records its spawn"
    );
    assert_eq!(
        api.spawn_requests(&SpawnKey::new(G, "t1", 1)).len(),
        2,
        "two requests of task t1's round-1 generator"
    );
}

#[test]
fn a_rounds_script_comes_before_its_roles_and_the_shared_one_after_both() {
    let scenario = Scenario::script([Step::text("shared")])
        .with_role(Role::Generator, [Step::text("any round")])
        .with_round(Role::Generator, "t2", 2, [Step::text("t2 round 2")])
        .with_round(Role::Generator, "t2", 2, [Step::text("t2 round 2, again")])
        .then(Step::text("then"));
    let api = FakeApi::start(scenario).unwrap();
    assert_eq!(ask(&api, "t2", 2, Role::Generator), "t2 round 2");
    assert_eq!(ask(&api, "t2", 2, Role::Generator), "t2 round 2, again");
    assert_eq!(ask(&api, "t2", 2, Role::Generator), "any round");
    assert_eq!(ask(&api, "t2", 2, Role::Generator), "shared");
    assert_eq!(ask(&api, "t2", 2, Role::Generator), "then");
    // A request naming no spawn never takes a spawn's steps.
    let api = FakeApi::start(
        Scenario::script([Step::text("shared")]).with_role(Role::Generator, [Step::text("g")]),
    )
    .unwrap();
    let (status, reply) = post(api.addr(), &messages(&["say hi".to_owned()], "s"), "s");
    assert_eq!((status, text_of(&reply)), (200, "shared"));
    assert_eq!(api.model_requests()[0].spawn, None);
    assert_eq!(api.steps_left(), 1);
}

#[test]
fn a_resumed_generator_records_the_round_whose_history_it_re_sends() {
    let api = FakeApi::start(Scenario::by_role(
        [
            Step::text("round 1"),
            Step::write_signals(r#"{"signals":[]}"#),
        ],
        [],
    ))
    .unwrap();
    let round1 = prompt("t2", 1, Role::Generator);
    let round2 = prompt("t2", 2, Role::Generator);
    let (_, first) = post(
        api.addr(),
        &messages(std::slice::from_ref(&round1), "sess-a"),
        "sess-a",
    );
    assert_eq!(text_of(&first), "round 1");
    let (status, second) = post(api.addr(), &messages(&[round1, round2], "sess-a"), "sess-a");
    assert_eq!(status, 200, "{second}");
    // The write goes to the current round's path, not the one in the history.
    assert_eq!(second["content"][0]["type"], "tool_use", "{second}");
    assert_eq!(
        second["content"][0]["input"]["file_path"],
        signals("t2", 2, Role::Generator)
    );

    let log = api.model_requests();
    let at = |r: &RecordedRequest| {
        (
            r.spawn.clone(),
            r.earlier_spawns.clone(),
            r.history,
            r.session_id().map(str::to_owned),
        )
    };
    assert_eq!(
        at(&log[0]),
        (
            Some(SpawnKey::new(Role::Generator, "t2", 1)),
            vec![],
            false,
            Some("sess-a".to_owned())
        )
    );
    assert_eq!(
        at(&log[1]),
        (
            Some(SpawnKey::new(Role::Generator, "t2", 2)),
            vec![SpawnKey::new(Role::Generator, "t2", 1)],
            true,
            Some("sess-a".to_owned())
        ),
        "round 2 re-sends round 1's conversation in the same session"
    );
}

#[test]
fn only_paths_in_the_sprint_layout_name_a_spawn() {
    let text = format!(
        "{} and again {} then {}; not /w/x/rounds/1/generator/signals.json, not \
         {SPRINT}/implement/t1/rounds/one/generator/signals.json, not \
         {SPRINT}/implement/t1/rounds/1/critic/signals.json, not relative \
         implement/t1/rounds/1/generator/signals.json, not a directory alone \
         {SPRINT}/implement/t4/rounds/1/generator; and a pointer file \
         {SPRINT}/implement/t5/rounds/2/generator/prompt.md",
        signals("t1", 1, Role::Generator),
        signals("t1", 1, Role::Generator),
        signals("t-3", 10, Role::Evaluator),
    );
    assert_eq!(
        SpawnKey::find(&text),
        [
            SpawnKey::new(Role::Generator, "t1", 1),
            SpawnKey::new(Role::Evaluator, "t-3", 10),
            SpawnKey::new(Role::Generator, "t5", 2)
        ]
    );
}

#[test]
fn the_jsonl_log_carries_the_spawn_only_for_sprint_requests() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("requests.jsonl");
    let api = FakeApi::start_with_log(Scenario::forever(Step::text("ok")), &log).unwrap();
    ask(&api, "t1", 1, Role::Evaluator);
    post(api.addr(), &messages(&["say hi".to_owned()], "s"), "s");
    let lines: Vec<Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        lines[0]["spawn"],
        json!({"role": "evaluator", "task": "t1", "round": 1})
    );
    assert!(lines[1].get("spawn").is_none(), "{}", lines[1]);
    let back: Vec<RecordedRequest> = lines
        .into_iter()
        .map(|l| serde_json::from_value(l).unwrap())
        .collect();
    assert_eq!(back, api.requests());
}
