//! The failure patterns, on the recorded failures (their stdout through the parser, their stderr
//! and exit code from the record) and on wordings no recording shows. Prose in anything but the
//! CLI's own error text must not count.

use corral_copilot::CopilotAdapter;
use corral_engine::{AttemptEvidence, CliAdapter, Diagnosis, ExitInfo, TerminalSummary};
use corral_ports::{RateLimitInfo, SessionId};
use corral_test_support::recorded::RecordedRun;

use crate::support::SAMPLES;

/// What one recorded case left behind, as the engine would hand it to the adapter.
fn recorded(case: &str) -> RecordedRun<TerminalSummary> {
    SAMPLES.run_of(case, |is_error, text, api_status| TerminalSummary {
        is_error,
        text,
        api_status,
    })
}

fn read(case: &str) -> (Diagnosis, Option<String>) {
    let r = recorded(case);
    let id = SessionId::new("123e4567-e89b-12d3-a456-426614174000").unwrap();
    let evidence = AttemptEvidence {
        exit: r.exit_code.map(|code| ExitInfo {
            code: Some(code),
            signal: None,
        }),
        terminal: r.terminal.as_ref(),
        stderr_tail: &r.stderr,
        stdout_tail: "",
        resumed: case.starts_with("resume").then_some(&id),
        rate_limits: &r.rate_limits,
    };
    let adapter = CopilotAdapter::default();
    let diagnosis = adapter.diagnose(&evidence);
    // The refusal is the diagnosis's own field, read out so each case states it.
    let refusal = diagnosis.refused.clone();
    (diagnosis, refusal)
}

fn refused(message: &str) -> (Diagnosis, Option<String>) {
    (
        Diagnosis {
            refused: Some(message.to_string()),
            ..Diagnosis::default()
        },
        Some(message.to_string()),
    )
}

#[test]
fn recorded_rate_limit() {
    let r = recorded("e429-forever");
    assert_eq!(r.rate_limits.len(), 1, "the parser reports it too");
    assert_eq!(
        read("e429-forever"),
        (
            Diagnosis {
                rate_limit: Some(RateLimitInfo {
                    resets_at_epoch_s: None,
                    retry_after_ms: None,
                    rejected: true,
                    message: "Failed to get response from the AI model; retried 5 times (total \
                              retry wait time: 5.39 seconds) Last error: 429 Rate limited (fakeapi)"
                        .into(),
                }),
                ..Diagnosis::default()
            },
            None
        )
    );
}

#[test]
fn recorded_stale_session() {
    assert_eq!(
        read("resume-unknown"),
        (
            Diagnosis {
                stale_session: true,
                ..Diagnosis::default()
            },
            None
        )
    );
}

#[test]
fn recorded_refusals_are_explained() {
    assert_eq!(
        read("noauth"),
        refused(
            "Copilot found no credentials (\"No authentication information found\"); set \
             COPILOT_GITHUB_TOKEN, GH_TOKEN or GITHUB_TOKEN in Corral's environment, log in with \
             `copilot login` as the account Corral runs as, or configure a BYOK provider \
             (COPILOT_PROVIDER_BASE_URL with COPILOT_MODEL)"
        )
    );
    assert_eq!(
        read("e401"),
        refused(
            "Copilot could not authenticate: Authentication failed with provider at \
             http://127.0.0.1:40297/v1 (HTTP 401). Check your COPILOT_PROVIDER_API_KEY, \
             COPILOT_PROVIDER_API_KEY_COMMAND, or COPILOT_PROVIDER_BEARER_TOKEN.; check \
             COPILOT_GITHUB_TOKEN, GH_TOKEN or GITHUB_TOKEN (the first one set wins), the login \
             of the account Corral runs as, or the COPILOT_PROVIDER_* key of a BYOK provider"
        )
    );
    assert_eq!(
        read("badflag"),
        refused(
            "Copilot rejected its command line. Its message (\"It looks like your prompt was not \
             quoted\") is misleading: Copilot 1.0 prints it for any option it does not know, and \
             the prompt is never on the command line (it is in copilot-prompt.md); check \
             providers.copilot.extra_args and whether the installed version is a tested one"
        )
    );
}

#[test]
fn recorded_runs_with_nothing_to_say() {
    // Successes, a 5xx after Copilot's own retries (a crash, retryable), and the two runs the
    // recorder killed (their `abort` makes the result a failure, and the watchdog decides).
    for case in [
        "e429-twice",
        "e500",
        "hang",
        "no-allow",
        "resume",
        "stall",
        "text",
        "text-plain",
        "text-stdin",
        "write",
        "write-anthropic",
        "write-no-allow",
    ] {
        assert_eq!(read(case), (Diagnosis::default(), None), "{case}");
    }
}

fn evidence_read(terminal: Option<TerminalSummary>, stderr: &str) -> Diagnosis {
    let evidence = AttemptEvidence {
        exit: Some(ExitInfo {
            code: Some(1),
            signal: None,
        }),
        terminal: terminal.as_ref(),
        stderr_tail: stderr,
        stdout_tail: stderr,
        resumed: None,
        rate_limits: &[],
    };
    CopilotAdapter::default().diagnose(&evidence)
}

fn failed(text: &str) -> Option<TerminalSummary> {
    Some(TerminalSummary {
        is_error: true,
        text: Some(text.into()),
        api_status: None,
    })
}

#[test]
fn prose_about_failures_does_not_count() {
    let prose = "rate_limit: I added a rate limiter\nauthentication: and an auth module; No session, task, or name matched is a message too";
    let ok = Some(TerminalSummary {
        is_error: false,
        text: Some(prose.into()),
        api_status: None,
    });
    assert_eq!(evidence_read(ok, ""), Diagnosis::default());
    assert_eq!(evidence_read(None, ""), Diagnosis::default());
    // An error whose type is not one of the classified ones.
    assert_eq!(
        evidence_read(failed("query: the model mentioned a rate limit (429)"), ""),
        Diagnosis::default()
    );
}

#[test]
fn unrecorded_error_types_are_refusals() {
    let cases = [
        (
            "quota: You've run out of your included AI credits for the month.",
            "Copilot's quota is used up: You've run out of your included AI credits for the \
             month.; wait for it to reset or raise the account's Copilot budget",
        ),
        (
            "authorization: Not authorized",
            "Copilot is not authorized: Not authorized; the account or token needs Copilot access",
        ),
        (
            "abort: Copilot aborted the run (user_initiated)\npolicy: Blocked by your organization",
            "Copilot refused the request under a policy: Blocked by your organization",
        ),
    ];
    for (text, message) in cases {
        assert_eq!(
            evidence_read(failed(text), ""),
            Diagnosis {
                refused: Some(message.into()),
                ..Diagnosis::default()
            },
            "{text}"
        );
    }
}

#[test]
fn model_unavailable_wordings() {
    // Not recorded: the CLI's own strings from its 1.0.102 runtime.
    let flag = "Error: Model \"gpt-nope\" from --model flag is not available.";
    let listed = "Model 'gpt-nope' is not available. Available models: gpt-5.4, claude-sonnet-4.6";
    for line in [flag, listed] {
        assert_eq!(
            evidence_read(None, &format!("starting\n  {line}\n")),
            Diagnosis {
                model_unavailable: Some(line.into()),
                ..Diagnosis::default()
            }
        );
    }
    assert_eq!(
        evidence_read(failed("query: The requested model is not supported."), ""),
        Diagnosis {
            model_unavailable: Some("The requested model is not supported.".into()),
            ..Diagnosis::default()
        }
    );
    // A fallback to another model is a warning: the run goes on.
    let fallback = "Model 'gpt-nope' from COPILOT_MODEL environment variable is not available. Falling back to next option.";
    assert_eq!(evidence_read(None, fallback), Diagnosis::default());
}
