//! The stream parser: every recorded sample, line by line, against its snapshot; the repair of the
//! recorder's cut lines; the usage sum the engine ends up with; and the line shapes no sample
//! shows (reasoning, failed tools, errors without a status, `done`), written from the shapes in
//! OpenCode's `run` command.

use corral_opencode::parser::TOOL_RESULT_KEEP;
use corral_ports::{AgentEvent, RateLimitInfo, SessionId, Usage};
use corral_test_support::recorded::unparsed;
use serde_json::json;

use crate::support::{SAMPLES, snapshot_of};

fn sid(id: &str) -> SessionId {
    SessionId::new(id).unwrap()
}

/// The usage the engine reports for a run: the last terminal event's usage when there is one,
/// else the sum of the `Usage` events (`corral_engine`'s attempt loop).
fn engine_usage(events: &[AgentEvent]) -> Usage {
    let mut from_events = Usage::default();
    let mut terminal = None;
    for event in events {
        match event {
            AgentEvent::Usage { usage } => from_events.add(usage),
            AgentEvent::TerminalResult { usage, .. } => terminal = Some(*usage),
            _ => {}
        }
    }
    terminal.flatten().unwrap_or(from_events)
}

fn usage_sum(events: &[AgentEvent]) -> Usage {
    let mut sum = Usage::default();
    for event in events {
        if let AgentEvent::Usage { usage } = event {
            sum.add(usage);
        }
    }
    sum
}

#[test]
fn every_recorded_sample_has_its_snapshot() {
    let names = SAMPLES.cases();
    // 15 recorded cases; a fixture that goes missing must fail here, not vanish silently.
    assert_eq!(names.len(), 15, "{names:?}");
    for case in names {
        insta::assert_json_snapshot!(format!("sample__{case}"), snapshot_of(&case));
    }
}

#[test]
fn restored_lines_are_json_objects_and_keep_the_recorded_prefix() {
    // Nothing is invented: the repaired line is the recorded prefix plus closing brackets.
    let restored = SAMPLES.assert_restored_lines_keep_the_recorded_prefix(&['}', ']']);
    // The two `tool_use` lines of write-auto and write-default.
    assert_eq!(restored, 2);
}

#[test]
fn cut_lines_as_stored_become_one_unparsed_event_each() {
    // A parser that already announced the session, so only the line's own events count.
    SAMPLES
        .assert_cut_lines_as_stored_are_unparsed(&[r#"{"type":"step_start","sessionID":"ses_x"}"#]);
}

#[test]
fn the_samples_leave_only_known_lines_unparsed() {
    let unparsed: Vec<String> = SAMPLES
        .unparsed_lines()
        .into_iter()
        .map(|(case, line)| format!("{case}: {line}"))
        .collect();
    assert_eq!(
        unparsed,
        [
            // The recorder's own lines, not OpenCode output.
            "pure-fresh-home: config dir after run:",
            "resume: first session: ses_dd39e014effe6cW6RO6Os9NZ2i",
            // Run without --format json: the plain answer.
            "text-default-format: Hello from fakeapi, turn one.",
        ]
    );
}

#[test]
fn a_successful_tool_run_reads_as_expected() {
    let events = SAMPLES.events_of("write-default");
    let kinds: Vec<&str> = events.iter().map(AgentEvent::kind).collect();
    assert_eq!(
        kinds,
        [
            "session_started",
            "tool_use",
            "tool_result",
            "usage",
            "text",
            "usage",
            "terminal_result"
        ]
    );
    assert_eq!(
        events[0],
        AgentEvent::SessionStarted {
            session_id: sid("ses_dd39e6b55ffeSegKaJgrA7vkZt"),
            model: None,
        }
    );
    assert_eq!(
        events[2],
        AgentEvent::ToolResult {
            id: "call_ab7523fd301d45ac936d7e4f".into(),
            is_error: false,
            content: "Wrote file successfully.".into(),
        }
    );
    let total = Usage {
        input: Some(20),
        output: Some(9),
        cache_read: Some(0),
        cache_write: Some(0),
        reasoning: Some(0),
        cost_usd: Some(0.0),
        premium_requests: None,
    };
    assert_eq!(
        events.last(),
        Some(&AgentEvent::TerminalResult {
            is_error: false,
            text: None,
            api_status: None,
            usage: Some(total),
        })
    );
}

#[test]
fn each_step_is_counted_once() {
    for case in ["write-auto", "write-default", "text", "e429-twice"] {
        let events = SAMPLES.events_of(case);
        // The terminal event carries the sum of the steps, which the engine takes instead of
        // summing the Usage events: the same total, not twice it.
        assert_eq!(engine_usage(&events), usage_sum(&events), "{case}");
        // A run killed before its terminal event is counted from the Usage events it printed.
        let cut = events
            .iter()
            .position(|e| e.kind() == "terminal_result")
            .unwrap();
        assert_eq!(
            engine_usage(&events[..cut]),
            usage_sum(&events[..cut]),
            "{case}"
        );
    }
    assert_eq!(
        engine_usage(&SAMPLES.events_of("write-auto")).input,
        Some(20)
    );
    assert_eq!(
        engine_usage(&SAMPLES.events_of("write-auto")).output,
        Some(9)
    );
}

#[test]
fn a_rate_limited_run_reports_the_limit_with_its_retry_after() {
    assert_eq!(
        SAMPLES.events_of("e429-forever"),
        [
            AgentEvent::SessionStarted {
                session_id: sid("ses_dd39c1b59ffe0KF5KYX8Za8GhF"),
                model: None,
            },
            AgentEvent::RateLimit {
                info: RateLimitInfo {
                    resets_at_epoch_s: None,
                    retry_after_ms: Some(1000),
                    rejected: true,
                    message: "HTTP 429: APIError: Rate limited (fakeapi)".into(),
                },
            },
            AgentEvent::TerminalResult {
                is_error: true,
                text: Some("APIError: Rate limited (fakeapi)".into()),
                api_status: Some(429),
                usage: None,
            },
        ]
    );
}

#[test]
fn recorded_failures_end_with_an_error_terminal() {
    let terminal = |case: &str| {
        SAMPLES
            .events_of(case)
            .into_iter()
            .filter(|e| e.kind() == "terminal_result")
            .collect::<Vec<_>>()
    };
    assert_eq!(
        terminal("e401"),
        [AgentEvent::TerminalResult {
            is_error: true,
            text: Some("APIError: invalid x-api-key (fakeapi)".into()),
            api_status: Some(401),
            usage: None,
        }]
    );
    assert_eq!(
        terminal("e500"),
        [AgentEvent::TerminalResult {
            is_error: true,
            text: Some("APIError: Internal server error (fakeapi)".into()),
            api_status: Some(500),
            usage: None,
        }]
    );
    // A stalled stream: the session is known, the run never ends.
    assert_eq!(
        SAMPLES.events_of("stall"),
        [AgentEvent::SessionStarted {
            session_id: sid("ses_dd39ae256ffeTZNL09rIu5XP3b"),
            model: None,
        }]
    );
    for silent in ["hang", "badflag", "resume-unknown"] {
        assert_eq!(SAMPLES.events_of(silent), [], "{silent}");
    }
}

#[test]
fn the_first_session_id_wins_and_a_part_can_supply_it() {
    let events = SAMPLES.parse_lines(&[
        r#"{"type":"step_start","part":{"type":"step-start","sessionID":"ses_from_part"}}"#,
        r#"{"type":"text","sessionID":"ses_other","part":{"type":"text","text":"hi"}}"#,
    ]);
    assert_eq!(
        events,
        [
            AgentEvent::SessionStarted {
                session_id: sid("ses_from_part"),
                model: None,
            },
            AgentEvent::Text { text: "hi".into() },
        ]
    );
    // An id that could be read as a flag is never announced; the next valid one is.
    let events = SAMPLES.parse_lines(&[
        r#"{"type":"step_start","sessionID":"--auto","part":{}}"#,
        r#"{"type":"step_start","sessionID":"ses_ok","part":{}}"#,
    ]);
    assert_eq!(
        events,
        [AgentEvent::SessionStarted {
            session_id: sid("ses_ok"),
            model: None,
        }]
    );
}

#[test]
fn reasoning_failed_tools_and_long_results() {
    let long = "x".repeat(TOOL_RESULT_KEEP + 10);
    let failed = json!({"type":"tool_use","sessionID":"ses_a","part":{"type":"tool","tool":"bash",
        "callID":"call_1","state":{"status":"error","input":{"command":"false"},
        "error":"Command failed: exit 1"}}});
    let completed = json!({"type":"tool_use","sessionID":"ses_a","part":{"type":"tool",
        "tool":"read","callID":"call_2","state":{"status":"completed","input":{},"output":long}}});
    let running = json!({"type":"tool_use","sessionID":"ses_a","part":{"type":"tool","tool":"task",
        "id":"prt_3","state":{"status":"running","input":{"prompt":"p"}}}});
    let events = SAMPLES.parse_lines(&[
        r#"{"type":"reasoning","sessionID":"ses_a","part":{"type":"reasoning","text":"Plan: write it."}}"#,
        r#"{"type":"reasoning","sessionID":"ses_a","part":{"type":"reasoning","text":""}}"#,
        &failed.to_string(),
        &completed.to_string(),
        &running.to_string(),
    ]);
    assert_eq!(
        events,
        [
            AgentEvent::SessionStarted {
                session_id: sid("ses_a"),
                model: None,
            },
            AgentEvent::Thinking {
                text: "Plan: write it.".into()
            },
            AgentEvent::ToolUse {
                id: "call_1".into(),
                name: "bash".into(),
                input: json!({"command":"false"}),
            },
            AgentEvent::ToolResult {
                id: "call_1".into(),
                is_error: true,
                content: "Command failed: exit 1".into(),
            },
            AgentEvent::ToolUse {
                id: "call_2".into(),
                name: "read".into(),
                input: json!({}),
            },
            AgentEvent::ToolResult {
                id: "call_2".into(),
                is_error: false,
                content: format!(
                    "{}… [{} bytes in all]",
                    "x".repeat(TOOL_RESULT_KEEP),
                    TOOL_RESULT_KEEP + 10
                ),
            },
            // Still running (not printed by 1.18, but harmless): the call, no result yet.
            AgentEvent::ToolUse {
                id: "prt_3".into(),
                name: "task".into(),
                input: json!({"prompt":"p"}),
            },
        ]
    );
}

#[test]
fn errors_without_a_status_or_a_message() {
    let events = SAMPLES.parse_lines(&[
        r#"{"type":"step_finish","sessionID":"ses_e","part":{"reason":"tool-calls","tokens":{"input":100,"output":20,"reasoning":5,"cache":{"read":7,"write":3}},"cost":0.25}}"#,
        r#"{"type":"error","sessionID":"ses_e","error":{"name":"UnknownError","data":{"message":"Model not found: fake/nope. Did you mean: fake/fake-model?"}}}"#,
        r#"{"type":"error","sessionID":"ses_e","error":{"name":"ProviderModelNotFoundError","data":{"providerID":"fake","modelID":"nope"}}}"#,
        r#"{"type":"error","sessionID":"ses_e","error":{"name":"MessageAbortedError"}}"#,
        r#"{"type":"error","sessionID":"ses_e","error":"plain words"}"#,
        r#"{"type":"error","sessionID":"ses_e","error":{"data":{"message":"no name"}}}"#,
    ]);
    let step = Usage {
        input: Some(100),
        output: Some(20),
        cache_read: Some(7),
        cache_write: Some(3),
        reasoning: Some(5),
        cost_usd: Some(0.25),
        premium_requests: None,
    };
    let failed = |text: &str| AgentEvent::TerminalResult {
        is_error: true,
        text: Some(text.into()),
        api_status: None,
        // Steps before the error cost too.
        usage: Some(step),
    };
    assert_eq!(
        events,
        [
            AgentEvent::SessionStarted {
                session_id: sid("ses_e"),
                model: None,
            },
            AgentEvent::Usage { usage: step },
            failed("UnknownError: Model not found: fake/nope. Did you mean: fake/fake-model?"),
            failed(r#"ProviderModelNotFoundError: {"modelID":"nope","providerID":"fake"}"#),
            failed("MessageAbortedError"),
            failed("plain words"),
            failed("no name"),
        ]
    );
}

#[test]
fn overloads_and_retry_after_headers() {
    let events = SAMPLES.parse_lines(&[
        r#"{"type":"error","sessionID":"ses_o","error":{"name":"APIError","data":{"message":"Overloaded","statusCode":529,"isRetryable":true,"responseHeaders":{"Retry-After-Ms":"1500.4","retry-after":"9"}}}}"#,
        r#"{"type":"error","sessionID":"ses_o","error":{"name":"APIError","data":{"message":"slow down","statusCode":429,"responseHeaders":{"retry-after":"Wed, 21 Oct 2026 07:28:00 GMT"}}}}"#,
    ]);
    let limits: Vec<&AgentEvent> = events.iter().filter(|e| e.kind() == "rate_limit").collect();
    assert_eq!(
        limits,
        [
            &AgentEvent::RateLimit {
                info: RateLimitInfo {
                    resets_at_epoch_s: None,
                    retry_after_ms: Some(1500),
                    rejected: true,
                    message: "HTTP 529: APIError: Overloaded".into(),
                }
            },
            // An HTTP date is not read.
            &AgentEvent::RateLimit {
                info: RateLimitInfo {
                    resets_at_epoch_s: None,
                    retry_after_ms: None,
                    rejected: true,
                    message: "HTTP 429: APIError: slow down".into(),
                }
            },
        ]
    );
}

#[test]
fn stop_ends_the_run_unless_an_error_came_first_and_done_only_when_nothing_did() {
    let stop = r#"{"type":"step_finish","sessionID":"ses_s","part":{"reason":"stop","tokens":{"input":1,"output":1,"reasoning":0,"cache":{"read":0,"write":0}},"cost":0.5}}"#;
    let done = r#"{"type":"done","sessionID":"ses_s","reason":"idle","rejected":[]}"#;
    let error = r#"{"type":"error","sessionID":"ses_s","error":{"name":"UnknownError","data":{"message":"boom"}}}"#;
    let one = Usage {
        input: Some(1),
        output: Some(1),
        cache_read: Some(0),
        cache_write: Some(0),
        reasoning: Some(0),
        cost_usd: Some(0.5),
        premium_requests: None,
    };
    let two = Usage {
        input: Some(2),
        output: Some(2),
        cost_usd: Some(1.0),
        ..one
    };
    let success = |usage: Option<Usage>| AgentEvent::TerminalResult {
        is_error: false,
        text: None,
        api_status: None,
        usage,
    };
    let terminals = |lines: &[&str]| {
        SAMPLES
            .parse_lines(lines)
            .into_iter()
            .filter(|e| e.kind() == "terminal_result")
            .collect::<Vec<_>>()
    };
    // Each `stop` (a compaction's too) reports the sum so far; `done` adds nothing after one.
    assert_eq!(
        terminals(&[stop, stop, done]),
        [success(Some(one)), success(Some(two))]
    );
    // Newer builds: `done` ends a run whose last step was not a `stop`.
    assert_eq!(terminals(&[done]), [success(None)]);
    // After an error OpenCode exits 1: no success follows.
    assert_eq!(
        terminals(&[error, stop, done]),
        [AgentEvent::TerminalResult {
            is_error: true,
            text: Some("UnknownError: boom".into()),
            api_status: None,
            usage: None,
        }]
    );
    // A step ending for another reason is a step within the run.
    assert_eq!(
        terminals(&[
            r#"{"type":"step_finish","sessionID":"ses_s","part":{"reason":"tool-calls"}}"#,
            r#"{"type":"step_finish","sessionID":"ses_s","part":{"reason":"length","cost":0.1}}"#,
        ]),
        []
    );
}

#[test]
fn odd_lines_are_kept_as_unparsed_and_never_crash() {
    let lines = [
        "not json at all",
        "[1,2,3]",
        r#"{"no_type":true}"#,
        r#"{"type":"permission_asked","properties":{}}"#,
        r#"{"type":"text","part":{"type":"text"}}"#,
        r#"{"type":"text"}"#,
        r#"{"type":"tool_use","part":{"type":"tool","state":{}}}"#,
        r#"{"type":"step_finish"}"#,
        r#"{"type":"error"}"#,
        r#"{"type":"error","error":42}"#,
        "{\"type\":\"step_finish\",\"part\":{\"rea",
    ];
    assert_eq!(SAMPLES.parse_lines(&lines), unparsed(&lines));
    // A line of an unknown type still announces the session it carries.
    assert_eq!(
        SAMPLES.parse_lines(&[r#"{"type":"future_event","sessionID":"ses_f"}"#]),
        [
            AgentEvent::SessionStarted {
                session_id: sid("ses_f"),
                model: None,
            },
            AgentEvent::Unparsed {
                line: r#"{"type":"future_event","sessionID":"ses_f"}"#.into()
            },
        ]
    );
    // Blank lines, step starts and empty texts give nothing.
    assert_eq!(
        SAMPLES.parse_lines(&[
            "",
            "   ",
            r#"{"type":"step_start","part":{"type":"step-start"}}"#,
            r#"{"type":"text","part":{"type":"text","text":""}}"#,
        ]),
        []
    );
}
