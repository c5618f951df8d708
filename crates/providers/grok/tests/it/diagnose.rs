//! The failure patterns, on the recorded runs (their stdout through the parser, their stderr and
//! exit code from the record) and on wordings no recording shows. Prose in a successful answer
//! must not count.

use corral_engine::{AttemptEvidence, CliAdapter, Diagnosis, ExitInfo, TerminalSummary};
use corral_grok::GrokAdapter;
use corral_ports::RateLimitInfo;
use corral_test_support::recorded::RecordedRun;

use crate::support::{SAMPLES, exit_code_of};

/// What one recorded case left behind, as the engine would hand it to the adapter.
fn recorded(case: &str) -> RecordedRun<TerminalSummary> {
    SAMPLES.run_of(case, |is_error, text, api_status| TerminalSummary {
        is_error,
        text,
        api_status,
    })
}

fn read(case: &str) -> Diagnosis {
    let r = recorded(case);
    let evidence = AttemptEvidence {
        exit: Some(ExitInfo {
            code: Some(exit_code_of(case)),
            signal: None,
        }),
        terminal: r.terminal.as_ref(),
        stderr_tail: &r.stderr,
        stdout_tail: "",
        resumed: None,
        rate_limits: &r.rate_limits,
    };
    GrokAdapter::default().diagnose(&evidence)
}

fn refused(message: &str) -> Diagnosis {
    Diagnosis {
        refused: Some(message.into()),
        ..Diagnosis::default()
    }
}

#[test]
fn every_recorded_case_has_a_reading_here() {
    // A new recording must be classified below, not skipped.
    assert_eq!(
        SAMPLES.cases(),
        [
            "badflag",
            "bash",
            "e401",
            "e429-forever",
            "e429-twice",
            "e500",
            "hang",
            "nokey",
            "stall",
            "text",
            "text-stdin",
            "write"
        ]
    );
}

#[test]
fn a_recorded_429_is_a_rate_limit() {
    let message = "Sorry, I encountered an error: Grok API error: 429 Rate limited (fakeapi)";
    assert_eq!(
        read("e429-forever"),
        Diagnosis {
            rate_limit: Some(RateLimitInfo {
                resets_at_epoch_s: None,
                retry_after_ms: None,
                rejected: true,
                message: message.into(),
            }),
            ..Diagnosis::default()
        }
    );
    // And the parser's own event says so too, for the engine's structured check.
    assert_eq!(recorded("e429-forever").rate_limits.len(), 1);
}

#[test]
fn recorded_refusals_are_explained() {
    let cases = [
        (
            "e401",
            "Grok could not authenticate (HTTP 401): Sorry, I encountered an error: Grok API error: 401 invalid x-api-key (fakeapi); check GROK_API_KEY (or apiKey in ~/.grok/user-settings.json) and that GROK_BASE_URL points at the API the key is for",
        ),
        (
            "nokey",
            "Grok found no API key; set GROK_API_KEY in Corral's environment (the Grok profile passes GROK_* variables), or apiKey in ~/.grok/user-settings.json of the account Corral runs as",
        ),
        (
            "badflag",
            "Grok rejected its command line (error: unknown option '--bogus-flag'); check providers.grok.args and whether the installed version is a tested one",
        ),
        (
            "text-stdin",
            "Grok rejected its command line (error: option '-p, --prompt <prompt>' argument missing); check providers.grok.args and whether the installed version is a tested one",
        ),
    ];
    for (case, message) in cases {
        assert_eq!(read(case), refused(message), "{case}");
    }
}

#[test]
fn recorded_runs_that_are_neither_rate_limits_nor_refusals() {
    // e500: a failure the engine reports as a crash, with Grok's text in the log. hang and stall
    // were killed by the recorder; the rest succeeded.
    for case in [
        "bash",
        "e429-twice",
        "e500",
        "hang",
        "stall",
        "text",
        "write",
    ] {
        assert_eq!(read(case), Diagnosis::default(), "{case}");
    }
}

fn evidence_read(terminal: Option<TerminalSummary>, stderr: &str) -> Diagnosis {
    let evidence = AttemptEvidence {
        exit: Some(ExitInfo {
            code: Some(0),
            signal: None,
        }),
        terminal: terminal.as_ref(),
        stderr_tail: stderr,
        stdout_tail: "",
        resumed: None,
        rate_limits: &[],
    };
    GrokAdapter::default().diagnose(&evidence)
}

fn failed(text: &str, status: Option<u16>) -> Option<TerminalSummary> {
    Some(TerminalSummary {
        is_error: true,
        text: Some(text.into()),
        api_status: status,
    })
}

#[test]
fn forbidden_is_a_refusal_too() {
    let text = "Sorry, I encountered an error: Grok API error: 403 team is blocked";
    assert_eq!(
        evidence_read(failed(text, Some(403)), ""),
        refused(
            "Grok could not authenticate (HTTP 403): Sorry, I encountered an error: Grok API error: 403 team is blocked; check GROK_API_KEY (or apiKey in ~/.grok/user-settings.json) and that GROK_BASE_URL points at the API the key is for"
        )
    );
}

#[test]
fn a_directory_grok_cannot_enter_is_a_refusal() {
    let stderr = "Error changing directory to /gone: ENOENT: no such file or directory, chdir '/work' -> '/gone'";
    assert_eq!(
        evidence_read(None, stderr),
        refused(&format!(
            "Grok could not enter the working directory ({stderr}); check the session's cwd"
        ))
    );
}

#[test]
fn model_unavailable_wordings() {
    // Not recorded: an OpenAI-compatible API's answer to an unknown model.
    let not_found = "Sorry, I encountered an error: Grok API error: 404 The model grok-nope does not exist or your team does not have access to it.";
    let bare = "Sorry, I encountered an error: Grok API error: 404 model grok-nope";
    let as_400 = "Sorry, I encountered an error: Grok API error: 400 Model not found: grok-nope";
    for (text, status) in [(not_found, 404), (bare, 404), (as_400, 400)] {
        assert_eq!(
            evidence_read(failed(text, Some(status)), ""),
            Diagnosis {
                model_unavailable: Some(text.into()),
                ..Diagnosis::default()
            },
            "{text}"
        );
    }
    // A 404 that does not name a model, and a 400 about the context, are not.
    for (text, status) in [
        (
            "Sorry, I encountered an error: Grok API error: 404 Not Found",
            404,
        ),
        (
            "Sorry, I encountered an error: Grok API error: 400 This model's maximum context length is 131072 tokens",
            400,
        ),
    ] {
        assert_eq!(
            evidence_read(failed(text, Some(status)), ""),
            Diagnosis::default(),
            "{text}"
        );
    }
}

#[test]
fn prose_in_a_successful_answer_does_not_count() {
    let prose = "Sorry, I encountered an error: Grok API error: 429 Rate limited; also 401, and the model grok-x does not exist";
    let ok = Some(TerminalSummary {
        is_error: false,
        text: Some(prose.into()),
        api_status: None,
    });
    assert_eq!(evidence_read(ok, ""), Diagnosis::default());
    // A usage error counts only when Grok printed no messages: it rejects its command line
    // before doing anything.
    let ok = Some(TerminalSummary {
        is_error: false,
        text: Some("done".into()),
        api_status: None,
    });
    assert_eq!(
        evidence_read(ok, "error: unknown option '--frobnicate'"),
        Diagnosis::default()
    );
}
