//! The stream parser: every recorded sample, line by line, against its snapshot; the repair of the
//! recorder's shortened lines; and the line shapes no sample shows (rate-limit events, thinking,
//! several blocks in one message, error results), written from the documented shapes.

use corral_claude::parser::TOOL_RESULT_KEEP;
use corral_ports::{AgentEvent, RateLimitInfo, SessionId, Usage};
use corral_test_support::recorded::unparsed;
use serde_json::json;

use crate::support::{SAMPLES, snapshot_of};

fn sid(id: &str) -> SessionId {
    SessionId::new(id).unwrap()
}

#[test]
fn every_recorded_sample_has_its_snapshot() {
    let names = SAMPLES.cases();
    // 28 recorded cases; a fixture that goes missing must fail here, not vanish silently.
    assert_eq!(names.len(), 28, "{names:?}");
    for case in names {
        insta::assert_json_snapshot!(format!("sample__{case}"), snapshot_of(&case));
    }
}

#[test]
fn restored_lines_are_json_objects_and_keep_the_recorded_prefix() {
    // Nothing is invented: the repaired line is the recorded prefix, shortened to a complete
    // value, plus closing quotes and brackets.
    let restored = SAMPLES.assert_restored_lines_keep_the_recorded_prefix(&['}', ']', '"']);
    assert!(restored > 40, "only {restored} lines were shortened?");
}

#[test]
fn shortened_lines_as_stored_become_one_unparsed_event_each() {
    SAMPLES.assert_cut_lines_as_stored_are_unparsed(&[]);
}

#[test]
fn the_samples_leave_only_known_lines_unparsed() {
    let unparsed: Vec<String> = SAMPLES
        .unparsed_lines()
        .into_iter()
        .map(|(case, line)| format!("{case}: {}", &line[..line.len().min(60)]))
        .collect();
    assert_eq!(
        unparsed,
        [
            // The recorder's own echo of the first run's id, not Claude output.
            "resume: first session: 0298f576-dcfa-437d-b446-91714c2e202b",
            "resume-other-cwd: first session (cwd /tmp): 1affd294-a734-4ce9-ac98-ae90124970",
            // A `system` subtype without a normalized event; kept whole for the log.
            "slow: {\"type\":\"system\",\"subtype\":\"status\",\"status\":\"requesting\",\"u",
        ]
    );
}

#[test]
fn a_successful_tool_run_reads_as_expected() {
    let events = SAMPLES.events_of("write-bypass");
    let kinds: Vec<&str> = events.iter().map(AgentEvent::kind).collect();
    assert_eq!(
        kinds,
        [
            "session_started",
            "tool_use",
            "usage",
            "tool_result",
            "text",
            "usage",
            "terminal_result"
        ]
    );
    assert_eq!(
        events.last(),
        Some(&AgentEvent::TerminalResult {
            is_error: false,
            text: Some("Created signals.json as requested.".into()),
            api_status: None,
            usage: Some(Usage {
                input: Some(20),
                output: Some(9),
                cache_read: Some(0),
                cache_write: Some(0),
                cost_usd: Some(0.000325),
                ..Usage::default()
            }),
        })
    );
}

#[test]
fn a_rate_limited_run_ends_with_status_429() {
    let events = SAMPLES.events_of("e429-maxretries0");
    assert_eq!(
        events,
        [
            AgentEvent::SessionStarted {
                session_id: sid("c207e706-c896-4a82-a098-fd4c86530cd0"),
                model: Some("claude-opus-4-8[1m]".into()),
            },
            AgentEvent::Text {
                text: "API Error: Request rejec".into()
            },
            AgentEvent::TerminalResult {
                is_error: true,
                text: Some("API Error: Request rejected (429) · Rate limited (fakeapi)".into()),
                api_status: Some(429),
                usage: Some(Usage {
                    input: Some(0),
                    output: Some(0),
                    cache_read: Some(0),
                    cache_write: Some(0),
                    cost_usd: Some(0.0),
                    ..Usage::default()
                }),
            },
        ]
    );
}

#[test]
fn api_retry_lines_become_retry_notices() {
    let events = SAMPLES.parse_lines(&[
        r#"{"type":"system","subtype":"api_retry","attempt":3,"max_retries":10,"retry_delay_ms":2481.6380646216385,"error_status":429,"error":"rate_limit","session_id":"s1","uuid":"u"}"#,
        r#"{"type":"system","subtype":"api_retry","attempt":1,"max_retries":1,"retry_delay_ms":503.72500786801317,"error_status":null,"error":"unknown","session_id":"s1","uuid":"u"}"#,
    ]);
    assert_eq!(
        events,
        [
            AgentEvent::RetryNotice {
                attempt: 3,
                max: Some(10),
                delay_ms: Some(2482),
                status: Some(429)
            },
            AgentEvent::RetryNotice {
                attempt: 1,
                max: Some(1),
                delay_ms: Some(504),
                status: None
            },
        ]
    );
}

#[test]
fn rate_limit_events_are_rejected_only_when_nothing_carries_the_request() {
    let line = |status: &str, overage: &str| {
        json!({
            "type": "rate_limit_event",
            "rate_limit_info": {
                "status": status,
                "resetsAt": 1_767_225_600u64,
                "rateLimitType": "five_hour",
                "utilization": 1.0,
                "overageStatus": overage,
            },
            "uuid": "u",
            "session_id": "s1",
        })
        .to_string()
    };
    let rejected = line("rejected", "rejected");
    let carried = line("rejected", "allowed");
    let warning = line("allowed_warning", "rejected");
    let events = SAMPLES.parse_lines(&[&rejected, &carried, &warning]);
    let info = |rejected: bool, message: &str| AgentEvent::RateLimit {
        info: RateLimitInfo {
            resets_at_epoch_s: Some(1_767_225_600),
            retry_after_ms: None,
            rejected,
            message: message.into(),
        },
    };
    assert_eq!(
        events,
        [
            info(
                true,
                "status rejected, limit five_hour, utilization 1, overage rejected"
            ),
            info(
                false,
                "status rejected, limit five_hour, utilization 1, overage allowed"
            ),
            info(
                false,
                "status allowed_warning, limit five_hour, utilization 1, overage rejected"
            ),
        ]
    );
    // A bare event, and a reset time in milliseconds.
    let events = SAMPLES.parse_lines(&[
        r#"{"type":"rate_limit_event","rate_limit_info":{"status":"rejected","resetsAt":1767225600000}}"#,
        r#"{"type":"rate_limit_event"}"#,
    ]);
    assert_eq!(
        events,
        [
            AgentEvent::RateLimit {
                info: RateLimitInfo {
                    resets_at_epoch_s: Some(1_767_225_600),
                    retry_after_ms: None,
                    rejected: true,
                    message: "status rejected".into(),
                }
            },
            AgentEvent::Unparsed {
                line: r#"{"type":"rate_limit_event"}"#.into()
            },
        ]
    );
}

#[test]
fn one_message_in_several_lines_reports_its_usage_once() {
    let message = |block: serde_json::Value| {
        json!({
            "type": "assistant",
            "message": {
                "id": "msg_1",
                "model": "claude-opus-4-8",
                "role": "assistant",
                "content": [block],
                "usage": {"input_tokens": 10, "output_tokens": 1,
                          "cache_creation_input_tokens": 5, "cache_read_input_tokens": 7},
            },
            "parent_tool_use_id": null,
            "session_id": "s1",
        })
        .to_string()
    };
    let thinking =
        message(json!({"type": "thinking", "thinking": "Plan first.", "signature": "x"}));
    let text = message(json!({"type": "text", "text": "Writing the file."}));
    let tool = message(json!({"type": "tool_use", "id": "toolu_1", "name": "Write",
                              "input": {"file_path": "/r/signals.json", "content": "{}"}}));
    let events = SAMPLES.parse_lines(&[
        r#"{"type":"system","subtype":"init","session_id":"s1","model":"claude-opus-4-8"}"#,
        &thinking,
        &text,
        &tool,
    ]);
    assert_eq!(
        events,
        [
            AgentEvent::SessionStarted {
                session_id: sid("s1"),
                model: Some("claude-opus-4-8".into())
            },
            AgentEvent::Thinking {
                text: "Plan first.".into()
            },
            AgentEvent::Usage {
                usage: Usage {
                    input: Some(10),
                    output: Some(1),
                    cache_read: Some(7),
                    cache_write: Some(5),
                    ..Usage::default()
                }
            },
            AgentEvent::Text {
                text: "Writing the file.".into()
            },
            AgentEvent::ToolUse {
                id: "toolu_1".into(),
                name: "Write".into(),
                input: json!({"file_path": "/r/signals.json", "content": "{}"}),
            },
        ]
    );
}

#[test]
fn several_blocks_in_one_line_give_one_event_each() {
    let line = json!({
        "type": "assistant",
        "message": {
            "id": "msg_2", "model": "m",
            "content": [
                {"type": "text", "text": "a"},
                {"type": "text", "text": ""},
                {"type": "redacted_thinking", "data": "opaque"},
                {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "q"}},
                {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []},
                {"type": "tool_use", "name": "Bash"},
            ],
        },
        "session_id": "s2",
    })
    .to_string();
    let events = SAMPLES.parse_lines(&[&line]);
    assert_eq!(
        events,
        [
            // No init line was seen: the first assistant line's id stands in.
            AgentEvent::SessionStarted {
                session_id: sid("s2"),
                model: Some("m".into())
            },
            AgentEvent::Text { text: "a".into() },
            AgentEvent::ToolUse {
                id: "srvtoolu_1".into(),
                name: "web_search".into(),
                input: json!({"query": "q"}),
            },
            AgentEvent::Unparsed {
                line:
                    r#"{"content":[],"tool_use_id":"srvtoolu_1","type":"web_search_tool_result"}"#
                        .into()
            },
            AgentEvent::Unparsed {
                line: r#"{"name":"Bash","type":"tool_use"}"#.into()
            },
        ]
    );
}

#[test]
fn synthetic_error_messages_report_no_usage() {
    let line = r#"{"type":"assistant","message":{"id":"d50ab4de","model":"<synthetic>","role":"assistant","usage":{"input_tokens":0,"output_tokens":0},"content":[{"type":"text","text":"Invalid API key · Fix external API key"}]},"session_id":"s1","error":"authentication_failed"}"#;
    assert_eq!(
        SAMPLES.parse_lines(&[
            r#"{"type":"system","subtype":"init","session_id":"s1"}"#,
            line
        ]),
        [
            AgentEvent::SessionStarted {
                session_id: sid("s1"),
                model: None
            },
            AgentEvent::Text {
                text: "Invalid API key · Fix external API key".into()
            },
        ]
    );
}

#[test]
fn tool_results_are_flattened_and_shortened() {
    let long = "x".repeat(5000);
    let line = json!({
        "type": "user",
        "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_a", "content": [
                {"type": "text", "text": "line one"},
                {"type": "image", "source": {"type": "base64", "data": "AAAA"}},
            ]},
            {"type": "tool_result", "tool_use_id": "toolu_b", "is_error": true, "content": long},
            {"type": "text", "text": "the prompt, echoed"},
        ]},
        "session_id": "s1",
    })
    .to_string();
    let events = SAMPLES.parse_lines(&[
        r#"{"type":"system","subtype":"init","session_id":"s1"}"#,
        &line,
    ]);
    let shortened = format!("{}… [5000 bytes in all]", "x".repeat(TOOL_RESULT_KEEP));
    assert_eq!(
        events[1..],
        [
            AgentEvent::ToolResult {
                id: "toolu_a".into(),
                is_error: false,
                content: "line one\n[image]".into(),
            },
            AgentEvent::ToolResult {
                id: "toolu_b".into(),
                is_error: true,
                content: shortened,
            },
        ]
    );
}

#[test]
fn error_results_carry_their_errors_and_subtype() {
    let events = SAMPLES.parse_lines(&[
        r#"{"type":"result","subtype":"error_during_execution","is_error":true,"num_turns":0,"session_id":"123e4567-e89b-12d3-a456-426614174000","total_cost_usd":0,"errors":["No conversation found with session ID: 123e4567-e89b-12d3-a456-426614174000"]}"#,
        r#"{"type":"result","subtype":"error_max_turns","session_id":"s1","usage":{"input_tokens":100,"output_tokens":20},"total_cost_usd":0.5}"#,
        r#"{"type":"result","subtype":"success","is_error":false,"result":"done","api_error_status":null}"#,
    ]);
    assert_eq!(
        events,
        [
            // A result line never announces the session: after a failed resume it names the id
            // that was asked for, not one that exists.
            AgentEvent::TerminalResult {
                is_error: true,
                text: Some(
                    "No conversation found with session ID: 123e4567-e89b-12d3-a456-426614174000"
                        .into()
                ),
                api_status: None,
                usage: Some(Usage {
                    cost_usd: Some(0.0),
                    ..Usage::default()
                }),
            },
            AgentEvent::TerminalResult {
                is_error: true,
                text: Some("Claude Code ended with error_max_turns".into()),
                api_status: None,
                usage: Some(Usage {
                    input: Some(100),
                    output: Some(20),
                    cost_usd: Some(0.5),
                    ..Usage::default()
                }),
            },
            AgentEvent::TerminalResult {
                is_error: false,
                text: Some("done".into()),
                api_status: None,
                usage: None,
            },
        ]
    );
}

#[test]
fn odd_lines_are_kept_as_unparsed_and_never_crash() {
    let lines = [
        "not json at all",
        "[1,2,3]",
        r#"{"no_type":true}"#,
        r#"{"type":"control_request","request":{}}"#,
        r#"{"type":"system","subtype":"init","session_id":"--dangerously-skip-permissions"}"#,
        r#"{"type":"system","subtype":"init"}"#,
        r#"{"type":"system","subtype":"api_retry"}"#,
        r#"{"type":"system","subtype":"compact_boundary","session_id":"s1"}"#,
        r#"{"type":"assistant"}"#,
        r#"{"type":"user","message":"text"}"#,
        "{\"type\":\"result\",\"subtype\":\"succ",
    ];
    assert_eq!(SAMPLES.parse_lines(&lines), unparsed(&lines));
    // Blank lines and partial-message deltas give nothing.
    assert_eq!(
        SAMPLES.parse_lines(&[
            "",
            "   ",
            r#"{"type":"stream_event","event":{"type":"content_block_delta"}}"#
        ]),
        []
    );
}
