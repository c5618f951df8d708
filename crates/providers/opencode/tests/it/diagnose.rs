//! The failure patterns, on the recorded failures (their stdout through the parser, their stderr,
//! ANSI colours and all, and exit code from the record) and on wordings no recording shows.
//! Prose about rate limits or models in anything but OpenCode's own error text must not count.

use corral_engine::{
    AttemptClass, AttemptEvidence, ClassifyInput, CliAdapter, Diagnosis, ExitInfo, TerminalSummary,
    classify,
};
use corral_opencode::OpencodeAdapter;
use corral_ports::RateLimitInfo;

use crate::support::Recorded;

fn read(case: &str) -> (Diagnosis, Option<String>) {
    let recorded = Recorded::of(case);
    let evidence = recorded.evidence();
    let adapter = OpencodeAdapter::default();
    let diagnosis = adapter.diagnose(&evidence);
    // The refusal is the diagnosis's own field, read out so each case states it.
    let refusal = diagnosis.refused.clone();
    (diagnosis, refusal)
}

/// How the engine classifies a recorded case, resumed or not.
fn class_of(case: &str, resumed: bool) -> AttemptClass {
    let recorded = Recorded::of(case);
    let diagnosis = OpencodeAdapter::default().diagnose(&recorded.evidence());
    classify(&ClassifyInput {
        killed_by: None,
        terminal: recorded.terminal.as_ref(),
        exit: recorded.exit,
        diagnosis: &diagnosis,
        rate_limit_events: &recorded.rate_limits,
        signals_present: false,
        resumed,
        egress_refused: None,
        terminal_expected: OpencodeAdapter::default()
            .capabilities()
            .always_terminal_event,
        cli_retry_after_ms: None,
        limit_breach: None,
    })
}

fn evidence_read(terminal: Option<TerminalSummary>, stderr: &str) -> Diagnosis {
    let evidence = AttemptEvidence {
        exit: Some(ExitInfo {
            code: Some(1),
            signal: None,
        }),
        terminal: terminal.as_ref(),
        stderr_tail: stderr,
        stdout_tail: "",
        resumed: None,
        rate_limits: &[],
    };
    OpencodeAdapter::default().diagnose(&evidence)
}

fn failed(text: &str, status: Option<u16>) -> Option<TerminalSummary> {
    Some(TerminalSummary {
        is_error: true,
        text: Some(text.into()),
        api_status: status,
    })
}

fn rate_limited(message: &str) -> Diagnosis {
    Diagnosis {
        rate_limit: Some(RateLimitInfo {
            resets_at_epoch_s: None,
            retry_after_ms: None,
            rejected: true,
            message: message.into(),
        }),
        ..Diagnosis::default()
    }
}

#[test]
fn recorded_rate_limit_keeps_the_retry_after() {
    let limited = Diagnosis {
        rate_limit: Some(RateLimitInfo {
            resets_at_epoch_s: None,
            retry_after_ms: Some(1000),
            rejected: true,
            message: "HTTP 429: APIError: Rate limited (fakeapi)".into(),
        }),
        ..Diagnosis::default()
    };
    assert_eq!(read("e429-forever"), (limited.clone(), None));
    assert_eq!(
        class_of("e429-forever", false),
        AttemptClass::RateLimited(limited.rate_limit.unwrap())
    );
}

#[test]
fn recorded_stale_session_behind_ansi_colours() {
    let stderr = crate::support::SAMPLES.stderr_of("resume-unknown");
    assert!(
        stderr.starts_with("\u{1b}[91m\u{1b}[1mError: \u{1b}[0mSession not found"),
        "the fixture keeps the colours: {stderr:?}"
    );
    // Coloured, the words are split by escape codes; the adapter matches them uncoloured.
    assert!(!stderr.contains("Error: Session not found"));
    let stale = Diagnosis {
        stale_session: true,
        ..Diagnosis::default()
    };
    assert_eq!(read("resume-unknown"), (stale, None));
    assert_eq!(class_of("resume-unknown", true), AttemptClass::StaleSession);
    // Only a resumed attempt can be stale.
    assert_eq!(class_of("resume-unknown", false), AttemptClass::Crashed);
}

#[test]
fn recorded_refusals_are_explained() {
    let cases = [
        (
            "e401",
            "OpenCode could not authenticate with the model's provider (HTTP 401): APIError: \
             invalid x-api-key (fakeapi); check the provider's key (ANTHROPIC_API_KEY, \
             OPENAI_API_KEY, OPENROUTER_API_KEY, …) or `opencode auth login` for the account \
             Corral runs as",
        ),
        (
            "badflag",
            "OpenCode rejected its command line (it printed its usage); check \
             providers.opencode.extra_args and whether the installed version is a tested one",
        ),
    ];
    for (case, message) in cases {
        let refused = Diagnosis {
            refused: Some(message.to_string()),
            ..Diagnosis::default()
        };
        assert_eq!(read(case), (refused, Some(message.to_string())), "{case}");
        assert_eq!(
            class_of(case, false),
            AttemptClass::Refused(message.to_string()),
            "{case}"
        );
    }
}

#[test]
fn recorded_cases_that_need_no_words() {
    // A 500 after OpenCode's own retries is a crash (retryable); a hang or a stall is the
    // watchdog's; the successes need no diagnosis.
    for case in [
        "e500",
        "hang",
        "stall",
        "text",
        "text-stdin",
        "write-default",
        "write-auto",
        "e429-twice",
        "resume",
        "pure-fresh-home",
        "text-default-format",
    ] {
        assert_eq!(read(case), (Diagnosis::default(), None), "{case}");
    }
    assert_eq!(class_of("e500", false), AttemptClass::Crashed);
    for success in [
        "text",
        "write-default",
        "write-auto",
        "e429-twice",
        "resume",
    ] {
        assert_eq!(
            class_of(success, false),
            AttemptClass::Succeeded,
            "{success}"
        );
    }
}

#[test]
fn rate_limit_wordings_without_a_status() {
    for text in [
        "AI_APICallError: Rate limit exceeded for requests per minute",
        "APIError: {\"type\":\"rate_limit_error\"}",
        "UnknownError: Too Many Requests",
    ] {
        assert_eq!(evidence_read(failed(text, None), ""), rate_limited(text));
    }
    assert_eq!(
        evidence_read(failed("APIError: Overloaded", Some(529)), ""),
        rate_limited("APIError: Overloaded")
    );
    // A status that is not a rate limit wins over the words.
    assert_eq!(
        evidence_read(failed("APIError: rate limit config invalid", Some(400)), ""),
        Diagnosis::default()
    );
}

#[test]
fn prose_and_success_do_not_count() {
    let prose = "I added a rate limit (429) handler; the model was not found in the Model not found: list. Error: Session not found";
    let ok = Some(TerminalSummary {
        is_error: false,
        text: Some(prose.into()),
        api_status: None,
    });
    assert_eq!(evidence_read(ok, ""), Diagnosis::default());
    assert_eq!(evidence_read(None, ""), Diagnosis::default());
}

#[test]
fn model_unavailable_wordings() {
    // Not recorded: OpenCode's own wordings, from its source.
    for text in [
        "UnknownError: Model not found: fake/nope. Did you mean: fake/fake-model?",
        r#"ProviderModelNotFoundError: {"modelID":"nope","providerID":"fake"}"#,
        "APIError: The model `gpt-9` does not exist or you do not have access to it.",
    ] {
        let status = text.starts_with("APIError").then_some(404);
        assert_eq!(
            evidence_read(failed(text, status), ""),
            Diagnosis {
                model_unavailable: Some(text.into()),
                ..Diagnosis::default()
            },
            "{text}"
        );
    }
    // A 404 that is not about a model is not this.
    assert_eq!(
        evidence_read(failed("APIError: Not Found", Some(404)), ""),
        Diagnosis::default()
    );
    // Printed on stderr (the default format), coloured.
    assert_eq!(
        evidence_read(
            None,
            "\u{1b}[91m\u{1b}[1mError: \u{1b}[0mModel not found: fake/nope.\n"
        ),
        Diagnosis {
            model_unavailable: Some("Error: Model not found: fake/nope.".into()),
            ..Diagnosis::default()
        }
    );
}

#[test]
fn refusal_wordings_no_recording_shows() {
    let refused = |message: &str| Diagnosis {
        refused: Some(message.into()),
        ..Diagnosis::default()
    };
    assert_eq!(
        evidence_read(
            failed("ProviderAuthError: API key is missing for anthropic", None),
            ""
        ),
        refused(
            "OpenCode could not authenticate with the model's provider: ProviderAuthError: API \
             key is missing for anthropic; check the provider's key (ANTHROPIC_API_KEY, \
             OPENAI_API_KEY, OPENROUTER_API_KEY, …) or `opencode auth login` for the account \
             Corral runs as"
        )
    );
    assert_eq!(
        evidence_read(failed("APIError: forbidden", Some(403)), ""),
        refused(
            "OpenCode could not authenticate with the model's provider (HTTP 403): APIError: \
             forbidden; check the provider's key (ANTHROPIC_API_KEY, OPENAI_API_KEY, \
             OPENROUTER_API_KEY, …) or `opencode auth login` for the account Corral runs as"
        )
    );
    assert_eq!(
        evidence_read(
            None,
            "opencode run [message..]\n\nrun opencode with a message\n\nUnknown argument: bogus-flag\n"
        ),
        refused(
            "OpenCode rejected its command line (it printed its usage: Unknown argument: \
             bogus-flag); check providers.opencode.extra_args and whether the installed version \
             is a tested one"
        )
    );
    assert_eq!(
        evidence_read(
            None,
            "\u{1b}[91m\u{1b}[1mError: \u{1b}[0mYou must provide a message or a command\n"
        ),
        refused(
            "OpenCode got no prompt (Error: You must provide a message or a command); the \
             prompt is piped on stdin and must not be empty"
        )
    );
    assert_eq!(
        evidence_read(
            None,
            "\u{1b}[91m\u{1b}[1mError: \u{1b}[0mFailed to change directory to /gone\n"
        ),
        refused(
            "OpenCode could not enter the working directory (Error: Failed to change directory \
             to /gone); check that it exists and is readable by the account Corral runs as"
        )
    );
    // A usage text after a terminal event is not a rejected command line.
    let after_a_result = Some(TerminalSummary {
        is_error: false,
        text: None,
        api_status: None,
    });
    assert_eq!(
        evidence_read(after_a_result, "opencode run [message..]\n"),
        Diagnosis::default()
    );
}
