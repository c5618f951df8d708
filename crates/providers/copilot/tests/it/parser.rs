//! The JSONL parser: every recorded sample, line by line, against its snapshot; the repair of the
//! recorder's shortened lines; and the line shapes no sample shows (a session announced on the
//! stream, token usage, reasoning, sub-agents, other error types), written from the event schema
//! Copilot 1.0.102 ships (`copilot-sdk/generated/session-events.d.ts`).

use corral_copilot::parser::TOOL_RESULT_KEEP;
use corral_ports::{AgentEvent, RateLimitInfo, SessionId, Usage};
use corral_test_support::recorded::unparsed;
use serde_json::json;

use crate::support::{SAMPLES, snapshot_of};

fn sid(id: &str) -> SessionId {
    SessionId::new(id).unwrap()
}

fn premium(n: f64) -> Option<Usage> {
    Some(Usage {
        premium_requests: Some(n),
        ..Usage::default()
    })
}

#[test]
fn every_recorded_sample_has_its_snapshot() {
    let names = SAMPLES.cases();
    // 17 recorded cases; a fixture that goes missing must fail here, not vanish silently.
    assert_eq!(names.len(), 17, "{names:?}");
    for case in names {
        insta::assert_json_snapshot!(format!("sample__{case}"), snapshot_of(&case));
    }
}

#[test]
fn restored_lines_are_json_objects_and_keep_the_recorded_prefix() {
    // Nothing is invented: the repaired line is the recorded prefix, cut at a comma, plus
    // closing brackets.
    let restored = SAMPLES.assert_restored_lines_keep_the_recorded_prefix(&['}', ']']);
    assert_eq!(restored, 36);
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
        .map(|(case, line)| format!("{case}: {}", &line[..line.len().min(80)]))
        .collect();
    assert_eq!(
        unparsed,
        [
            // The recorder's own echo of the first run's id, not Copilot output.
            "resume: first session: 226942f0-094f-484f-93be-2156381ad5d3",
            // Text mode (no --output-format json): the answer alone.
            "text-plain: Hello from fakeapi, turn one.",
            // A warning has no normalized event; kept whole for the log.
            "write-anthropic: {\"type\":\"session.warning\",\"data\":{\"warningType\":\"unknown_token_count_multiplier\"",
        ]
    );
}

#[test]
fn a_successful_write_reads_as_expected() {
    let events = SAMPLES.events_of("write");
    assert_eq!(
        events,
        [
            AgentEvent::ToolUse {
                id: "call_ee5d653b55224d21b9996884".into(),
                name: "create".into(),
                input: json!({"path": "signals.json", "file_text": "{\"signal\": \"go\", \"n\": 1}"}),
            },
            AgentEvent::ToolResult {
                id: "call_ee5d653b55224d21b9996884".into(),
                is_error: false,
                content: "Created file $SCRATCH/work/copilot/write/signals.json with 24 characters"
                    .into(),
            },
            AgentEvent::Text {
                text: "Created signals.json as requested.".into()
            },
            AgentEvent::SessionStarted {
                session_id: sid("37c3ac90-f8dc-4e92-9f5d-72668212e0a4"),
                model: Some("fake-model".into()),
            },
            AgentEvent::TerminalResult {
                is_error: false,
                text: Some("Created signals.json as requested.".into()),
                api_status: None,
                usage: premium(0.0),
            },
        ]
    );
}

#[test]
fn a_denied_tool_is_an_error_result_in_a_successful_run() {
    let events = SAMPLES.events_of("write-no-allow");
    assert!(
        events.contains(&AgentEvent::ToolResult {
            id: "call_e00baebdbdd74fcc9c7c164e".into(),
            is_error: true,
            content:
                "Permission denied because no interactive user response was available. Retry in \
                  an interactive session so the user can approve it, or try an alternative that \
                  does not require this permission. (denied)"
                    .into(),
        })
    );
    // Copilot exits 0 all the same: only signals.json tells whether the work was done.
    assert!(matches!(
        events.last(),
        Some(AgentEvent::TerminalResult {
            is_error: false,
            ..
        })
    ));
}

#[test]
fn a_rate_limited_run_reports_its_retries_the_limit_and_a_failed_result() {
    let events = SAMPLES.events_of("e429-forever");
    let message = "Failed to get response from the AI model; retried 5 times (total retry wait time: 5.39 seconds) Last error: 429 Rate limited (fakeapi)";
    let mut expected: Vec<AgentEvent> = (1..=5)
        .map(|attempt| AgentEvent::RetryNotice {
            attempt,
            max: None,
            delay_ms: None,
            status: Some(429),
        })
        .collect();
    expected.extend([
        AgentEvent::RateLimit {
            info: RateLimitInfo {
                resets_at_epoch_s: None,
                retry_after_ms: None,
                rejected: true,
                message: message.into(),
            },
        },
        AgentEvent::SessionStarted {
            session_id: sid("ebbc372a-91e2-47b5-857f-a44e59f541c3"),
            model: Some("fake-model".into()),
        },
        AgentEvent::TerminalResult {
            is_error: true,
            text: Some(format!("rate_limit: {message}")),
            api_status: Some(429),
            usage: premium(0.0),
        },
    ]);
    assert_eq!(events, expected);
}

#[test]
fn an_authentication_failure_keeps_the_whole_message() {
    let events = SAMPLES.events_of("e401");
    assert_eq!(
        events.last(),
        Some(&AgentEvent::TerminalResult {
            is_error: true,
            text: Some(
                "authentication: Authentication failed with provider at http://127.0.0.1:40297/v1 (HTTP 401).\n  Check your COPILOT_PROVIDER_API_KEY, COPILOT_PROVIDER_API_KEY_COMMAND, or COPILOT_PROVIDER_BEARER_TOKEN."
                    .into()
            ),
            api_status: Some(401),
            usage: premium(0.0),
        })
    );
    // Its two retries on a 401 ("transient_auth_error") are retries all the same.
    let retries = events
        .iter()
        .filter(|e| {
            matches!(
                e,
                AgentEvent::RetryNotice {
                    status: Some(401),
                    ..
                }
            )
        })
        .count();
    assert_eq!(retries, 2);
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, AgentEvent::RateLimit { .. }))
    );
}

#[test]
fn a_killed_run_reports_exit_code_0_but_is_a_failure() {
    // SIGTERM from the runner: Copilot prints `abort` and then `result` with exitCode 0.
    for case in ["hang", "stall"] {
        let events = SAMPLES.events_of(case);
        match events.last() {
            Some(AgentEvent::TerminalResult { is_error, text, .. }) => {
                assert!(is_error, "{case}");
                assert_eq!(
                    text.as_deref(),
                    Some("abort: Copilot aborted the run (user_initiated)"),
                    "{case}"
                );
            }
            other => panic!("{case}: {other:?}"),
        }
    }
}

#[test]
fn a_session_announced_on_the_stream_is_not_repeated_by_the_result() {
    let events = SAMPLES.parse_lines(&[
        r#"{"type":"session.start","data":{"sessionId":"0b5f3c1e-aaaa-4bbb-bccc-123456789abc","selectedModel":"gpt-5.4","version":1},"id":"e1","timestamp":"t","parentId":null}"#,
        r#"{"type":"assistant.message","data":{"messageId":"m1","content":"Done.","toolRequests":[]},"id":"e2","timestamp":"t","parentId":"e1"}"#,
        r#"{"type":"result","timestamp":"t","sessionId":"0b5f3c1e-aaaa-4bbb-bccc-123456789abc","exitCode":0,"usage":{"premiumRequests":1.5}}"#,
    ]);
    assert_eq!(
        events,
        [
            AgentEvent::SessionStarted {
                session_id: sid("0b5f3c1e-aaaa-4bbb-bccc-123456789abc"),
                model: Some("gpt-5.4".into()),
            },
            AgentEvent::Text {
                text: "Done.".into()
            },
            AgentEvent::TerminalResult {
                is_error: false,
                text: Some("Done.".into()),
                api_status: None,
                usage: premium(1.5),
            },
        ]
    );
}

#[test]
fn token_usage_reasoning_and_sub_agents() {
    let usage_line = |input: u64, output: u64| {
        json!({
            "type": "assistant.usage",
            "data": {"model": "gpt-5.4", "inputTokens": input, "outputTokens": output,
                     "cacheReadTokens": 5, "reasoningTokens": 2, "cost": 1},
            "ephemeral": true, "id": "u", "timestamp": "t", "parentId": null,
        })
        .to_string()
    };
    let first = usage_line(100, 10);
    let second = usage_line(50, 20);
    let events = SAMPLES.parse_lines(&[
        r#"{"type":"assistant.reasoning","data":{"reasoningId":"r1","content":"Plan first."},"id":"e","timestamp":"t","parentId":null}"#,
        &first,
        r#"{"type":"assistant.message","agentId":"sub-1","data":{"messageId":"m1","content":"Sub-agent findings.","toolRequests":[]},"id":"e","timestamp":"t","parentId":null}"#,
        r#"{"type":"assistant.message","data":{"messageId":"m2","content":"Main answer.","toolRequests":[]},"id":"e","timestamp":"t","parentId":null}"#,
        r#"{"type":"assistant.message","agentId":"sub-2","data":{"messageId":"m3","content":"Late sub-agent note.","toolRequests":[]},"id":"e","timestamp":"t","parentId":null}"#,
        &second,
        r#"{"type":"result","timestamp":"t","sessionId":"s-1","exitCode":0,"usage":{"premiumRequests":2}}"#,
    ]);
    let per_call = |input: u64, output: u64| Usage {
        input: Some(input),
        output: Some(output),
        cache_read: Some(5),
        reasoning: Some(2),
        ..Usage::default()
    };
    assert_eq!(
        events,
        [
            AgentEvent::Thinking {
                text: "Plan first.".into()
            },
            AgentEvent::Usage {
                usage: per_call(100, 10)
            },
            AgentEvent::Text {
                text: "Sub-agent findings.".into()
            },
            AgentEvent::Text {
                text: "Main answer.".into()
            },
            AgentEvent::Text {
                text: "Late sub-agent note.".into()
            },
            AgentEvent::Usage {
                usage: per_call(50, 20)
            },
            AgentEvent::SessionStarted {
                session_id: sid("s-1"),
                model: None,
            },
            // The whole run's tokens with the premium requests; the main agent's last words.
            AgentEvent::TerminalResult {
                is_error: false,
                text: Some("Main answer.".into()),
                api_status: None,
                usage: Some(Usage {
                    input: Some(150),
                    output: Some(30),
                    cache_read: Some(10),
                    reasoning: Some(4),
                    premium_requests: Some(2.0),
                    ..Usage::default()
                }),
            },
        ]
    );
}

#[test]
fn other_error_types_are_kept_for_the_result_but_are_not_rate_limits() {
    let events = SAMPLES.parse_lines(&[
        r#"{"type":"session.error","data":{"errorType":"quota","errorCode":"quota_exceeded","message":"You've run out of your included AI credits for the month.","statusCode":402},"id":"e","timestamp":"t","parentId":null}"#,
        r#"{"type":"session.error","data":{"errorType":"rate_limit","errorCode":"user_weekly_rate_limited","message":"Rate limited","eligibleForAutoSwitch":false},"id":"e","timestamp":"t","parentId":null}"#,
        r#"{"type":"result","timestamp":"t","exitCode":1}"#,
    ]);
    assert_eq!(
        events,
        [
            AgentEvent::RateLimit {
                info: RateLimitInfo {
                    resets_at_epoch_s: None,
                    retry_after_ms: None,
                    rejected: true,
                    message: "Rate limited (user_weekly_rate_limited)".into(),
                }
            },
            AgentEvent::TerminalResult {
                is_error: true,
                text: Some(
                    "quota: You've run out of your included AI credits for the month.\nrate_limit: Rate limited"
                        .into()
                ),
                api_status: Some(402),
                usage: None,
            },
        ]
    );
}

#[test]
fn a_result_without_exit_code_or_with_a_bad_id() {
    let events = SAMPLES.parse_lines(&[
        r#"{"type":"result","sessionId":"--yolo"}"#,
        r#"{"type":"result","exitCode":3}"#,
    ]);
    assert_eq!(
        events,
        [
            AgentEvent::TerminalResult {
                is_error: false,
                text: None,
                api_status: None,
                usage: None,
            },
            AgentEvent::TerminalResult {
                is_error: true,
                text: Some("Copilot exited with code 3".into()),
                api_status: None,
                usage: None,
            },
        ]
    );
}

#[test]
fn tool_results_are_shortened_and_odd_results_kept() {
    let long = "x".repeat(5000);
    let big = json!({
        "type": "tool.execution_complete",
        "data": {"toolCallId": "c1", "success": true, "result": {"content": long}},
        "id": "e", "timestamp": "t", "parentId": null,
    })
    .to_string();
    let events = SAMPLES.parse_lines(&[
        &big,
        r#"{"type":"tool.execution_complete","data":{"toolCallId":"c2","success":false,"error":{"message":"exit 2"}},"id":"e","timestamp":"t","parentId":null}"#,
        r#"{"type":"tool.execution_complete","data":{"toolCallId":"c3","success":true},"id":"e","timestamp":"t","parentId":null}"#,
        r#"{"type":"tool.execution_start","data":{"toolCallId":"c4","toolName":"bash"},"id":"e","timestamp":"t","parentId":null}"#,
    ]);
    assert_eq!(
        events,
        [
            AgentEvent::ToolResult {
                id: "c1".into(),
                is_error: false,
                content: format!("{}… [5000 bytes in all]", "x".repeat(TOOL_RESULT_KEEP)),
            },
            AgentEvent::ToolResult {
                id: "c2".into(),
                is_error: true,
                content: "exit 2".into(),
            },
            AgentEvent::ToolResult {
                id: "c3".into(),
                is_error: false,
                content: String::new(),
            },
            AgentEvent::ToolUse {
                id: "c4".into(),
                name: "bash".into(),
                input: serde_json::Value::Null,
            },
        ]
    );
}

#[test]
fn a_retry_without_a_recorded_failure_counts_on_its_own() {
    let events = SAMPLES.parse_lines(&[
        r#"{"type":"assistant.turn_retry","data":{"turnId":"0","reason":"rate_limit"},"id":"e","timestamp":"t","parentId":null}"#,
        r#"{"type":"assistant.turn_retry","data":{"turnId":"0","reason":"transient_error"},"id":"e","timestamp":"t","parentId":null}"#,
    ]);
    assert_eq!(
        events,
        [
            AgentEvent::RetryNotice {
                attempt: 1,
                max: None,
                delay_ms: None,
                status: Some(429),
            },
            AgentEvent::RetryNotice {
                attempt: 2,
                max: None,
                delay_ms: None,
                status: None,
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
        r#"{"type":"session.warning","data":{"warningType":"mcp","message":"server x failed"}}"#,
        r#"{"type":"assistant.message","data":{}}"#,
        r#"{"type":"assistant.message"}"#,
        r#"{"type":"tool.execution_start","data":{"toolName":"bash"}}"#,
        r#"{"type":"tool.execution_complete","data":{"success":true}}"#,
        r#"{"type":"session.error","data":{"errorType":"query"}}"#,
        r#"{"type":"session.start","data":{"sessionId":"a b"}}"#,
        r#"{"type":"brand.new_event","data":{}}"#,
        "{\"type\":\"result\",\"sessionId\":\"ab",
    ];
    assert_eq!(SAMPLES.parse_lines(&lines), unparsed(&lines));
    // Blank lines, bookkeeping and deltas give nothing.
    assert_eq!(
        SAMPLES.parse_lines(&[
            "",
            "   ",
            r#"{"type":"assistant.message_delta","data":{"messageId":"m","deltaContent":"Hel"}}"#,
            r#"{"type":"user.message","data":{"content":"the pointer sentence"}}"#,
            r#"{"type":"assistant.idle","data":{}}"#,
        ]),
        []
    );
}
