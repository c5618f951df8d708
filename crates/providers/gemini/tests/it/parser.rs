//! The stream-json parser: every recorded sample against its snapshot, the answer joined from its
//! pieces, usage from `result.stats`, and the line shapes no sample shows.

use corral_gemini::parser::api_status;
use corral_ports::{AgentEvent, SessionId, Usage};

use crate::support::SAMPLES;

#[test]
fn every_recorded_sample_has_its_snapshot() {
    let names = SAMPLES.cases();
    // 9 recorded cases; a fixture that goes missing must fail here, not vanish silently.
    assert_eq!(names.len(), 9, "{names:?}");
    for case in names {
        insta::assert_json_snapshot!(format!("sample__{case}"), SAMPLES.snapshot_of(&case));
    }
}

#[test]
fn the_samples_leave_no_line_unparsed() {
    assert_eq!(SAMPLES.unparsed_lines(), Vec::<(String, String)>::new());
}

#[test]
fn every_recorded_run_that_printed_an_init_has_exactly_one_terminal_event() {
    for case in SAMPLES.cases() {
        let terminals = SAMPLES
            .events_of(&case)
            .iter()
            .filter(|e| matches!(e, AgentEvent::TerminalResult { .. }))
            .count();
        let started = SAMPLES.stdout_of(&case).contains("\"type\":\"init\"");
        assert_eq!(terminals, usize::from(started), "{case}");
    }
}

#[test]
fn a_text_run_has_its_session_the_joined_answer_and_the_usage_net_of_cache() {
    let events = SAMPLES.events_of("text");
    assert_eq!(
        events[0],
        AgentEvent::SessionStarted {
            session_id: SessionId::new("a8056e98-4b94-4b0d-a05b-14f9834df88a").unwrap(),
            model: Some("auto".into()),
        }
    );
    let usage = Usage {
        input: Some(240),
        output: Some(16),
        cache_read: Some(0),
        ..Usage::default()
    };
    assert_eq!(
        events.last(),
        Some(&AgentEvent::TerminalResult {
            is_error: false,
            text: Some("Hello from the fake.".into()),
            api_status: None,
            usage: Some(usage),
        })
    );
}

#[test]
fn a_quota_error_is_a_rejected_rate_limit_with_status_429() {
    let events = SAMPLES.events_of("e429");
    assert!(
        events
            .iter()
            .any(|e| matches!(e, AgentEvent::RateLimit { info } if info.rejected)),
        "{events:?}"
    );
    assert!(matches!(
        events.last(),
        Some(AgentEvent::TerminalResult {
            is_error: true,
            api_status: Some(429),
            ..
        })
    ));
}

/// A first turn that failed leaves a session `--resume` cannot find (exit 42), so its id is never
/// reported: the retry runs cold.
#[test]
fn a_session_is_reported_only_once_the_model_answered() {
    for case in ["e429", "e404"] {
        assert!(
            !SAMPLES
                .events_of(case)
                .iter()
                .any(|e| matches!(e, AgentEvent::SessionStarted { .. })),
            "{case}"
        );
    }
    let shell = SAMPLES.events_of("shell");
    assert!(
        matches!(shell[0], AgentEvent::SessionStarted { .. }),
        "{shell:?}"
    );
    assert!(matches!(shell[1], AgentEvent::ToolUse { .. }), "{shell:?}");
}

#[test]
fn the_status_is_read_only_from_gemini_s_api_error_wording() {
    assert_eq!(
        api_status("[API Error: Resource has been exhausted (e.g. check quota).]"),
        Some(429)
    );
    assert_eq!(
        api_status(
            "[API Error: models/x is not found for API version v1beta, or is not supported for generateContent.]"
        ),
        Some(404)
    );
    // The model's own prose about quotas is not an API error.
    assert_eq!(
        api_status("Resource has been exhausted, says the doc"),
        None
    );
    assert_eq!(api_status("[API Error: fetch failed]"), None);
}

#[test]
fn unknown_lines_and_invalid_ids_stay_unparsed() {
    for line in [
        "not json",
        r#"{"type":"brand_new","x":1}"#,
        r#"{"type":"init","session_id":""}"#,
        r#"{"type":"error","severity":"warning","message":"Loop detected"}"#,
    ] {
        let events = SAMPLES.parse_lines(&[line]);
        assert_eq!(
            events,
            [AgentEvent::Unparsed {
                line: line.to_string()
            }],
            "{line}"
        );
    }
}
