//! The stream parser: every recorded sample, line by line, against its snapshot; and the line
//! shapes no sample shows (reasoning, to-do lists, file changes, MCP calls, web searches, usage
//! limits), written from the documented event shapes of `codex exec --json`.

use corral_codex::CodexStreamParser;
use corral_codex::parser::TOOL_RESULT_KEEP;
use corral_engine::StreamParser;
use corral_ports::{AgentEvent, RateLimitInfo, SessionId, Usage};
use serde_json::json;

use crate::support::{SAMPLES, snapshot_of};

fn sid(id: &str) -> SessionId {
    SessionId::new(id).unwrap()
}

/// The warning every recorded run starts with: Codex does not know the fake model.
const METADATA_WARNING: &str = r#"{"type":"item.completed","item":{"id":"item_0","type":"error","message":"Model metadata for `fake-model` not found. Defaulting to fallback metadata; this can degrade performance and cause issues."}}"#;

fn warning() -> AgentEvent {
    AgentEvent::Unparsed {
        line: METADATA_WARNING.into(),
    }
}

#[test]
fn every_recorded_sample_has_its_snapshot() {
    let names = SAMPLES.cases();
    // 21 recorded cases; a fixture that goes missing must fail here, not vanish silently.
    assert_eq!(names.len(), 21, "{names:?}");
    for case in names {
        insta::assert_json_snapshot!(format!("sample__{case}"), snapshot_of(&case));
    }
}

#[test]
fn the_samples_leave_only_known_lines_unparsed() {
    let unparsed: Vec<String> = SAMPLES
        .unparsed_lines()
        .into_iter()
        .filter(|(_, line)| line != METADATA_WARNING)
        .map(|(case, line)| format!("{case}: {}", line.chars().take(90).collect::<String>()))
        .collect();
    assert_eq!(
        unparsed,
        [
            // Fatal errors that are not rate limits: the `turn.failed` after each repeats them.
            "e401: {\"type\":\"error\",\"message\":\"unexpected status 401 Unauthorized: invalid x-api-key (fakeapi)",
            "e500: {\"type\":\"error\",\"message\":\"We’re currently experiencing high demand, which may cause tempo",
            "midstream-error: {\"type\":\"error\",\"message\":\"stream disconnected before completion: fakeapi mid-stream overl",
            // The recorder's own echo of the first run's id, not Codex output.
            "resume: first session: 01a22c60-7f01-7143-ad2a-26ff7d5b1e90",
            "stall: {\"type\":\"error\",\"message\":\"stream disconnected before completion: idle timeout waiting for",
            // The second half of this record ran without --json: plain text.
            "text-plain: Hello again from fakeapi (after).",
        ]
    );
}

#[test]
fn a_plain_run_reads_as_expected() {
    assert_eq!(
        SAMPLES.events_of("text"),
        [
            AgentEvent::SessionStarted {
                session_id: sid("01a22c60-3b3f-7e63-b12a-8ae0b88d7441"),
                model: None,
            },
            warning(),
            AgentEvent::Text {
                text: "Hello from fakeapi, turn one.".into()
            },
            AgentEvent::TerminalResult {
                is_error: false,
                text: Some("Hello from fakeapi, turn one.".into()),
                api_status: None,
                usage: Some(Usage {
                    input: Some(10),
                    output: Some(7),
                    cache_read: Some(0),
                    cache_write: Some(0),
                    reasoning: Some(0),
                    ..Usage::default()
                }),
            },
        ]
    );
}

#[test]
fn a_successful_tool_run_reads_as_expected() {
    let events = SAMPLES.events_of("write-workspace");
    let command = "/bin/bash -lc \"cat > signals.json <<'FAKEAPI_EOF'\n{\\\"signal\\\": \\\"go\\\", \\\"n\\\": 1}\nFAKEAPI_EOF\"";
    assert_eq!(
        events[2..],
        [
            AgentEvent::ToolUse {
                id: "item_1".into(),
                name: "command_execution".into(),
                input: json!({ "command": command }),
            },
            AgentEvent::ToolResult {
                id: "item_1".into(),
                is_error: false,
                content: "exit code 0".into(),
            },
            AgentEvent::Text {
                text: "Created signals.json as requested.".into()
            },
            AgentEvent::TerminalResult {
                is_error: false,
                text: Some("Created signals.json as requested.".into()),
                api_status: None,
                usage: Some(Usage {
                    input: Some(20),
                    output: Some(9),
                    cache_read: Some(0),
                    cache_write: Some(0),
                    reasoning: Some(0),
                    ..Usage::default()
                }),
            },
        ]
    );
}

#[test]
fn a_rate_limited_run_retries_then_rejects() {
    let notice = |attempt| AgentEvent::RetryNotice {
        attempt,
        max: Some(5),
        delay_ms: None,
        status: Some(429),
    };
    let message = "exceeded retry limit, last status: 429 Too Many Requests";
    assert_eq!(
        SAMPLES.events_of("e429-forever")[2..],
        [
            notice(1),
            notice(2),
            notice(3),
            notice(4),
            notice(5),
            AgentEvent::RateLimit {
                info: RateLimitInfo {
                    resets_at_epoch_s: None,
                    retry_after_ms: None,
                    rejected: true,
                    message: message.into(),
                }
            },
            AgentEvent::TerminalResult {
                is_error: true,
                text: Some(message.into()),
                api_status: Some(429),
                usage: None,
            },
        ]
    );
}

#[test]
fn failures_carry_the_status_codex_names() {
    let terminal = |case: &str| {
        SAMPLES
            .events_of(case)
            .into_iter()
            .rev()
            .find_map(|e| match e {
                AgentEvent::TerminalResult {
                    is_error,
                    api_status,
                    ..
                } => Some((is_error, api_status)),
                _ => None,
            })
    };
    assert_eq!(terminal("e401"), Some((true, Some(401))));
    assert_eq!(terminal("e529"), Some((true, Some(529))));
    // Codex rewrites a 500 into prose without the status.
    assert_eq!(terminal("e500"), Some((true, None)));
    assert_eq!(terminal("stall"), Some((true, None)));
    // Killed while waiting for a response that never came: no terminal event at all.
    assert_eq!(terminal("hang"), None);
    // Rejected before any output.
    assert_eq!(terminal("badflag"), None);
}

#[test]
fn reasoning_plans_and_streaming_items() {
    let events = SAMPLES.parse_lines(&[
        r#"{"type":"item.started","item":{"id":"item_1","type":"reasoning","text":""}}"#,
        r#"{"type":"item.updated","item":{"id":"item_1","type":"reasoning","text":"**Planning**"}}"#,
        r#"{"type":"item.completed","item":{"id":"item_1","type":"reasoning","text":"**Planning** the file first."}}"#,
        r#"{"type":"item.started","item":{"id":"item_2","type":"todo_list","items":[{"text":"write signals.json","completed":false},{"text":"stop","completed":false}]}}"#,
        r#"{"type":"item.updated","item":{"id":"item_2","type":"todo_list","items":[{"text":"write signals.json","completed":false},{"text":"stop","completed":false}]}}"#,
        r#"{"type":"item.updated","item":{"id":"item_2","type":"todo_list","items":[{"text":"write signals.json","completed":true},{"text":"stop","completed":false}]}}"#,
        r#"{"type":"item.started","item":{"id":"item_3","type":"agent_message","text":"Wri"}}"#,
        r#"{"type":"item.completed","item":{"id":"item_3","type":"agent_message","text":"Writing it."}}"#,
        r#"{"type":"item.completed","item":{"id":"item_4","type":"agent_message","text":""}}"#,
        r#"{"type":"turn.started"}"#,
    ]);
    assert_eq!(
        events,
        [
            AgentEvent::Thinking {
                text: "**Planning** the file first.".into()
            },
            AgentEvent::Thinking {
                text: "[ ] write signals.json\n[ ] stop".into()
            },
            // The unchanged update says nothing new.
            AgentEvent::Thinking {
                text: "[x] write signals.json\n[ ] stop".into()
            },
            AgentEvent::Text {
                text: "Writing it.".into()
            },
        ]
    );
}

#[test]
fn file_changes_mcp_calls_and_web_searches() {
    let long = "y".repeat(5000);
    let mcp_ok = json!({"type":"item.completed","item":{"id":"item_5","type":"mcp_tool_call","server":"docs","tool":"lookup","arguments":{"q":"x"},"result":{"content":[{"type":"text","text":"found"},{"type":"image","data":"AAAA"}],"structured_content":null},"error":null,"status":"completed"}}).to_string();
    let mcp_started = json!({"type":"item.started","item":{"id":"item_6","type":"mcp_tool_call","server":"docs","tool":"lookup","arguments":{"q":"y"},"result":null,"error":null,"status":"in_progress"}}).to_string();
    let mcp_failed = json!({"type":"item.completed","item":{"id":"item_6","type":"mcp_tool_call","server":"docs","tool":"lookup","arguments":{"q":"y"},"result":null,"error":{"message":"tool timed out"},"status":"failed"}}).to_string();
    let declined = json!({"type":"item.completed","item":{"id":"item_7","type":"command_execution","command":"rm -rf /","aggregated_output":long,"exit_code":null,"status":"declined"}}).to_string();
    let events = SAMPLES.parse_lines(&[
        r#"{"type":"item.started","item":{"id":"item_1","type":"file_change","changes":[{"path":"/r/src/a.rs","kind":"update"}],"status":"in_progress"}}"#,
        r#"{"type":"item.completed","item":{"id":"item_1","type":"file_change","changes":[{"path":"/r/src/a.rs","kind":"update"},{"path":"/r/b.rs","kind":"add"}],"status":"completed"}}"#,
        r#"{"type":"item.completed","item":{"id":"item_2","type":"file_change","changes":[{"path":"/r/c.rs","kind":"delete"}],"status":"failed"}}"#,
        r#"{"type":"item.started","item":{"id":"item_3","type":"web_search","query":""}}"#,
        r#"{"type":"item.completed","item":{"id":"item_3","type":"web_search","query":"codex exec json","action":{"type":"search"}}}"#,
        &mcp_ok,
        &mcp_started,
        &mcp_failed,
        &declined,
        r#"{"type":"item.completed","item":{"id":"item_8","type":"command_execution","command":"false","aggregated_output":"","exit_code":1,"status":"failed"}}"#,
    ]);
    let shortened = format!(
        "status declined\n{}… [5016 bytes in all]",
        "y".repeat(TOOL_RESULT_KEEP - "status declined\n".len())
    );
    assert_eq!(
        events,
        [
            AgentEvent::ToolUse {
                id: "item_1".into(),
                name: "file_change".into(),
                input: json!({"changes": [{"path": "/r/src/a.rs", "kind": "update"}]}),
            },
            AgentEvent::ToolResult {
                id: "item_1".into(),
                is_error: false,
                content: "status completed\nupdate /r/src/a.rs\nadd /r/b.rs".into(),
            },
            AgentEvent::ToolUse {
                id: "item_2".into(),
                name: "file_change".into(),
                input: json!({"changes": [{"path": "/r/c.rs", "kind": "delete"}]}),
            },
            AgentEvent::ToolResult {
                id: "item_2".into(),
                is_error: true,
                content: "status failed\ndelete /r/c.rs".into(),
            },
            AgentEvent::ToolUse {
                id: "item_3".into(),
                name: "web_search".into(),
                input: json!({"query": "codex exec json", "action": {"type": "search"}}),
            },
            AgentEvent::ToolUse {
                id: "item_5".into(),
                name: "mcp__docs__lookup".into(),
                input: json!({"q": "x"}),
            },
            AgentEvent::ToolResult {
                id: "item_5".into(),
                is_error: false,
                content: "found\n[image]".into(),
            },
            AgentEvent::ToolUse {
                id: "item_6".into(),
                name: "mcp__docs__lookup".into(),
                input: json!({"q": "y"}),
            },
            AgentEvent::ToolResult {
                id: "item_6".into(),
                is_error: true,
                content: "tool timed out".into(),
            },
            AgentEvent::ToolUse {
                id: "item_7".into(),
                name: "command_execution".into(),
                input: json!({"command": "rm -rf /"}),
            },
            AgentEvent::ToolResult {
                id: "item_7".into(),
                is_error: true,
                content: shortened,
            },
            AgentEvent::ToolUse {
                id: "item_8".into(),
                name: "command_execution".into(),
                input: json!({"command": "false"}),
            },
            AgentEvent::ToolResult {
                id: "item_8".into(),
                is_error: true,
                content: "exit code 1".into(),
            },
        ]
    );
}

#[test]
fn usage_splits_cached_input_and_keeps_reasoning_apart() {
    let events = SAMPLES.parse_lines(&[
        r#"{"type":"turn.completed","usage":{"input_tokens":1200,"cached_input_tokens":1000,"cache_write_input_tokens":50,"output_tokens":300,"reasoning_output_tokens":120}}"#,
        r#"{"type":"turn.completed"}"#,
        r#"{"type":"turn.failed","error":{}}"#,
    ]);
    assert_eq!(
        events,
        [
            AgentEvent::TerminalResult {
                is_error: false,
                text: None,
                api_status: None,
                usage: Some(Usage {
                    input: Some(150),
                    output: Some(300),
                    cache_read: Some(1000),
                    cache_write: Some(50),
                    reasoning: Some(120),
                    ..Usage::default()
                }),
            },
            AgentEvent::TerminalResult {
                is_error: false,
                text: None,
                api_status: None,
                usage: None,
            },
            AgentEvent::TerminalResult {
                is_error: true,
                text: Some("Codex reported the turn as failed without a message".into()),
                api_status: None,
                usage: None,
            },
        ]
    );
}

#[test]
fn usage_limits_carry_their_reset_and_quota_does_not_count() {
    let body = r#"{"type":"error","message":"unexpected status 429 Too Many Requests: {\"error\":{\"type\":\"usage_limit_reached\",\"message\":\"The usage limit has been reached\",\"plan_type\":\"plus\",\"resets_at\":1767225600,\"resets_in_seconds\":3600}}"}"#;
    let prose = r#"{"type":"error","message":"You’ve hit your usage limit. Upgrade to Pro (https://chatgpt.com/explore/pro), or try again at 3:04 PM."}"#;
    let quota =
        r#"{"type":"error","message":"Quota exceeded. Check your plan and billing details."}"#;
    let events = SAMPLES.parse_lines(&[body, prose, quota]);
    let AgentEvent::RateLimit { info } = &events[0] else {
        panic!("{events:?}")
    };
    assert_eq!(info.resets_at_epoch_s, Some(1_767_225_600));
    assert_eq!(info.retry_after_ms, Some(3_600_000));
    assert!(info.rejected);
    // Local time without a date: its next occurrence, to the minute rounded up (read here as
    // the parser read it, at about the same moment).
    let AgentEvent::RateLimit { info: prose_info } = &events[1] else {
        panic!("{events:?}")
    };
    let reset = prose_info
        .resets_at_epoch_s
        .expect("the prose's reset is read");
    let now = jiff::Timestamp::now().as_second().unsigned_abs();
    assert!(
        reset > now && reset <= now + 24 * 3600 + 60,
        "{reset} against {now}"
    );
    assert_eq!(
        events[1..],
        [
            AgentEvent::RateLimit {
                info: RateLimitInfo {
                    resets_at_epoch_s: Some(reset),
                    retry_after_ms: None,
                    rejected: true,
                    message: "You’ve hit your usage limit. Upgrade to Pro (https://chatgpt.com/explore/pro), or try again at 3:04 PM.".into(),
                }
            },
            AgentEvent::Unparsed { line: quota.into() },
        ]
    );
}

#[test]
fn reconnects_without_a_status_and_malformed_lines() {
    let lines = [
        r#"{"type":"error","message":"Reconnecting... 1/1 (stream disconnected before completion: idle timeout waiting for SSE)"}"#,
        "not json at all",
        "   ",
        r#"{"type":"thread.started","thread_id":"-rf"}"#,
        r#"{"type":"thread.started"}"#,
        r#"{"type":"item.completed","item":{"type":"agent_message","text":"no id"}}"#,
        r#"{"type":"item.completed","item":{"id":"i","type":"agent_message"}}"#,
        r#"{"type":"item.completed","item":{"id":"i","type":"collab_tool_call"}}"#,
        r#"{"type":"item.plan.delta","item_id":"i","delta":"x"}"#,
        r#"{"type":"error"}"#,
        r#"{"type":"error","message":"Reconnecting... soon"}"#,
        r#"[1,2]"#,
    ];
    let events = SAMPLES.parse_lines(&lines);
    let mut expected = vec![AgentEvent::RetryNotice {
        attempt: 1,
        max: Some(1),
        delay_ms: None,
        status: None,
    }];
    // Everything else is kept whole, except the blank line.
    expected.extend(
        lines
            .iter()
            .skip(1)
            .filter(|l| !l.trim().is_empty())
            .map(|l| AgentEvent::Unparsed {
                line: l.to_string(),
            }),
    );
    assert_eq!(events, expected);
}

#[test]
fn a_parser_is_per_attempt_state() {
    // The last agent message belongs to its own attempt's parser.
    let mut first = CodexStreamParser::default();
    let mut out = Vec::new();
    first.parse_line(
        r#"{"type":"item.completed","item":{"id":"item_1","type":"agent_message","text":"one"}}"#,
        &mut out,
    );
    let mut second = CodexStreamParser::default();
    out.clear();
    second.parse_line(r#"{"type":"turn.completed","usage":null}"#, &mut out);
    assert_eq!(
        out,
        [AgentEvent::TerminalResult {
            is_error: false,
            text: None,
            api_status: None,
            usage: None
        }]
    );
}
