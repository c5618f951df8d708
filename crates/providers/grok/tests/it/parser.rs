//! The message-line parser: every recorded sample, line by line, against its snapshot; the error
//! reports Grok prints with exit code 0 (recorded 429, 500 and 401, and the statusless ones);
//! and the line shapes no sample shows, written from Grok's source (`dist/index.js`,
//! `dist/agent/grok-agent.js`).

use corral_grok::parser::{
    FATAL_PREFIX, LOOP_ERROR_PREFIX, MAX_ROUNDS_TEXT, TOOL_CALL_FILLER, TOOL_RESULT_KEEP,
    api_status,
};
use corral_ports::{AgentEvent, RateLimitInfo};
use corral_test_support::recorded::unparsed;
use serde_json::json;

use crate::support::{SAMPLES, snapshot_of};

const USER: &str =
    r#"{"role":"user","content":"Your complete task is in the file /r/grok-prompt.md."}"#;

fn answer(text: &str) -> String {
    json!({"role": "assistant", "content": text}).to_string()
}

fn ok(text: &str) -> AgentEvent {
    AgentEvent::TerminalResult {
        is_error: false,
        text: Some(text.into()),
        api_status: None,
        usage: None,
    }
}

fn failed(text: &str, status: Option<u16>) -> AgentEvent {
    AgentEvent::TerminalResult {
        is_error: true,
        text: Some(text.into()),
        api_status: status,
        usage: None,
    }
}

fn said(text: &str) -> AgentEvent {
    AgentEvent::Text { text: text.into() }
}

#[test]
fn every_recorded_sample_has_its_snapshot() {
    let names = SAMPLES.cases();
    // 12 recorded cases; a fixture that goes missing must fail here, not vanish silently.
    assert_eq!(names.len(), 12, "{names:?}");
    for case in names {
        insta::assert_json_snapshot!(format!("sample__{case}"), snapshot_of(&case));
    }
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
            // Grok's SIGTERM handler writes this to stdout; both runs were killed by the recorder.
            "hang: Gracefully shutting down...",
            "stall: Gracefully shutting down...",
        ]
    );
}

#[test]
fn every_recorded_run_that_printed_messages_has_exactly_one_terminal_event() {
    for case in SAMPLES.cases() {
        let terminals = SAMPLES
            .events_of(&case)
            .iter()
            .filter(|e| matches!(e, AgentEvent::TerminalResult { .. }))
            .count();
        let printed_messages = SAMPLES.stdout_of(&case).contains("\"role\"");
        assert_eq!(terminals, usize::from(printed_messages), "{case}");
    }
}

#[test]
fn a_tool_run_reads_as_expected() {
    assert_eq!(
        SAMPLES.events_of("write"),
        [
            // The tool-calling message's content is Grok's filler, not the model's words.
            AgentEvent::ToolUse {
                id: "call_533210c712404fab969801d8".into(),
                name: "create_file".into(),
                input: json!({"path": "signals.json", "content": "{\"signal\": \"go\", \"n\": 1}"}),
            },
            AgentEvent::ToolResult {
                id: "call_533210c712404fab969801d8".into(),
                is_error: false,
                content: "Updated signals.json with 1 addition\n--- a/signals.json\n+++ b/signals.json\n@@ -1,0 +1,1 @@\n+{\"signal\": \"go\", \"n\": 1}".into(),
            },
            said("Created signals.json as requested."),
            ok("Created signals.json as requested."),
        ]
    );
    let kinds: Vec<&str> = SAMPLES
        .events_of("bash")
        .iter()
        .map(AgentEvent::kind)
        .collect();
    assert_eq!(
        kinds,
        ["tool_use", "tool_result", "text", "terminal_result"]
    );
}

#[test]
fn recorded_api_errors_are_failed_terminal_events_despite_exit_code_0() {
    let e429 = "Sorry, I encountered an error: Grok API error: 429 Rate limited (fakeapi)";
    assert_eq!(
        SAMPLES.events_of("e429-forever"),
        [
            AgentEvent::RateLimit {
                info: RateLimitInfo {
                    resets_at_epoch_s: None,
                    retry_after_ms: None,
                    rejected: true,
                    message: e429.into(),
                }
            },
            failed(e429, Some(429)),
        ]
    );
    assert_eq!(
        SAMPLES.events_of("e500"),
        [failed(
            "Sorry, I encountered an error: Grok API error: 500 Internal server error (fakeapi)",
            Some(500)
        )]
    );
    assert_eq!(
        SAMPLES.events_of("e401"),
        [failed(
            "Sorry, I encountered an error: Grok API error: 401 invalid x-api-key (fakeapi)",
            Some(401)
        )]
    );
    // Grok's client retried twice on its own and the third request succeeded.
    assert_eq!(
        SAMPLES.events_of("e429-twice"),
        [
            said("Recovered after two 429s."),
            ok("Recovered after two 429s.")
        ]
    );
}

#[test]
fn errors_without_a_status_still_fail() {
    // The OpenAI SDK's words for a timeout, a refused connection, and a status without a body.
    for (message, status) in [
        ("Grok API error: Request timed out.", None),
        ("Grok API error: Connection error.", None),
        ("Grok API error: 503 status code (no body)", Some(503)),
        ("No response from Grok", None),
    ] {
        let text = format!("{LOOP_ERROR_PREFIX}{message}");
        assert_eq!(
            SAMPLES.parse_lines(&[USER, &answer(&text)]),
            [failed(&text, status)],
            "{message}"
        );
    }
}

#[test]
fn the_status_is_read_only_where_grok_writes_it() {
    let cases = [
        (
            "Sorry, I encountered an error: Grok API error: 429 Rate limited",
            Some(429),
        ),
        (
            "Sorry, I encountered an error: Grok API error: 404",
            Some(404),
        ),
        (
            "Sorry, I encountered an error: Grok API error: 4290 x",
            None,
        ),
        ("Sorry, I encountered an error: Grok API error: 42 x", None),
        ("Sorry, I encountered an error: Grok API error: 999 x", None),
        ("Sorry, I encountered an error: Grok API error: abc", None),
        ("Sorry, I encountered an error: Tool failed 429", None),
        ("Grok API error: 429 Rate limited", None),
        ("I saw Grok API error: 429 in the logs", None),
    ];
    for (text, status) in cases {
        assert_eq!(api_status(text), status, "{text}");
    }
}

#[test]
fn the_error_prefix_after_work_is_the_models_prose() {
    // On its error path Grok prints only the prompt and the error: an "error" after tool lines
    // was written by the model.
    let prose = format!("{LOOP_ERROR_PREFIX}Grok API error: 429 while testing, so I retried.");
    let events = SAMPLES.parse_lines(&[
        USER,
        r#"{"role":"assistant","content":"Using tools to help you...","tool_calls":[{"id":"c1","type":"function","function":{"name":"bash","arguments":"{\"command\":\"make test\"}"}}]}"#,
        r#"{"role":"tool","tool_call_id":"c1","content":"ok"}"#,
        &answer(&prose),
    ]);
    assert_eq!(events[2..], [said(&prose), ok(&prose)]);
}

#[test]
fn grok_failing_outside_its_agent_loop_fails_the_run() {
    // `index.js` prints `Error: <message>` as the only line and exits 1.
    let text = format!("{FATAL_PREFIX}Cannot read properties of undefined (reading 'model')");
    assert_eq!(
        SAMPLES.parse_lines(&[&answer(&text)]),
        [failed(&text, None)]
    );
    // After the prompt line, the same words are an answer.
    assert_eq!(
        SAMPLES.parse_lines(&[USER, &answer("Error: none found.")]),
        [said("Error: none found."), ok("Error: none found.")]
    );
}

#[test]
fn running_out_of_tool_rounds_fails_the_run() {
    let events = SAMPLES.parse_lines(&[
        USER,
        r#"{"role":"assistant","content":"Using tools to help you...","tool_calls":[{"id":"c1","type":"function","function":{"name":"view_file","arguments":"{\"path\":\"a\"}"}}]}"#,
        r#"{"role":"tool","tool_call_id":"c1","content":"a"}"#,
        &answer(MAX_ROUNDS_TEXT),
    ]);
    assert_eq!(events.last(), Some(&failed(MAX_ROUNDS_TEXT, None)));
    assert_eq!(events.len(), 3);
}

#[test]
fn tool_calls_keep_the_models_words_and_their_arguments() {
    let line = json!({
        "role": "assistant",
        "content": "Let me look first.",
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "view_file", "arguments": "{\"path\": \"src/lib.rs\"}"}},
            {"id": "c2", "type": "function", "function": {"name": "bash", "arguments": "{\"command\": \"ls"}},
            {"id": "c3", "type": "function", "function": {"name": "create_todo_list"}},
        ],
    })
    .to_string();
    let filler = json!({
        "role": "assistant",
        "content": TOOL_CALL_FILLER,
        "tool_calls": [{"id": "c4", "type": "function", "function": {"name": "search", "arguments": "{}"}}],
    })
    .to_string();
    assert_eq!(
        SAMPLES.parse_lines(&[USER, &line, &filler]),
        [
            said("Let me look first."),
            AgentEvent::ToolUse {
                id: "c1".into(),
                name: "view_file".into(),
                input: json!({"path": "src/lib.rs"}),
            },
            // Malformed arguments are kept as the model sent them.
            AgentEvent::ToolUse {
                id: "c2".into(),
                name: "bash".into(),
                input: json!("{\"command\": \"ls"),
            },
            AgentEvent::ToolUse {
                id: "c3".into(),
                name: "create_todo_list".into(),
                input: serde_json::Value::Null,
            },
            AgentEvent::ToolUse {
                id: "c4".into(),
                name: "search".into(),
                input: json!({}),
            },
        ]
    );
}

#[test]
fn tool_results_are_shortened() {
    let long = "é".repeat(3000);
    let line = json!({"role": "tool", "tool_call_id": "c1", "content": long}).to_string();
    let events = SAMPLES.parse_lines(&[USER, &line]);
    let AgentEvent::ToolResult {
        id,
        is_error,
        content,
    } = &events[0]
    else {
        panic!("{events:?}");
    };
    assert_eq!((id.as_str(), *is_error), ("c1", false));
    assert!(content.ends_with("… [6000 bytes in all]"), "{content}");
    assert!(content.len() <= TOOL_RESULT_KEEP + 30);
    // No content at all is an empty result.
    assert_eq!(
        SAMPLES.parse_lines(&[r#"{"role":"tool","tool_call_id":"c2"}"#]),
        [AgentEvent::ToolResult {
            id: "c2".into(),
            is_error: false,
            content: String::new(),
        }]
    );
}

#[test]
fn an_empty_answer_ends_the_run_without_text() {
    assert_eq!(
        SAMPLES.parse_lines(&[USER, r#"{"role":"assistant","content":""}"#]),
        [AgentEvent::TerminalResult {
            is_error: false,
            text: None,
            api_status: None,
            usage: None,
        }]
    );
    assert_eq!(
        SAMPLES.parse_lines(&[
            USER,
            r#"{"role":"assistant","content":null,"tool_calls":[]}"#
        ]),
        [AgentEvent::TerminalResult {
            is_error: false,
            text: None,
            api_status: None,
            usage: None,
        }]
    );
}

#[test]
fn odd_lines_are_kept_as_unparsed_and_never_crash() {
    let lines = [
        "Gracefully shutting down...",
        "✅ API key saved to ~/.grok/user-settings.json",
        "[1,2,3]",
        r#"{"no_role":true}"#,
        r#"{"role":"system","content":"You are Grok CLI"}"#,
        r#"{"role":"tool","content":"orphan result"}"#,
        r#"{"role":"assistant","content":[{"type":"text","text":"parts"}]}"#,
        r#"{"role":"assistant","content":"x","tool_calls":[{"id":"c1","type":"function","function":{"arguments":"{}"}}]}"#,
        r#"{"role":"assistant","content":"x","tool_calls":[{"type":"function","function":{"name":"bash"}}]}"#,
        "{\"role\":\"assistant\",\"content\":\"cut",
    ];
    assert_eq!(SAMPLES.parse_lines(&lines), unparsed(&lines));
    // Blank lines give nothing, and the prompt line gives nothing either.
    assert_eq!(SAMPLES.parse_lines(&["", "   ", USER]), []);
}
