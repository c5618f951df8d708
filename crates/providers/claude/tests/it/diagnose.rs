//! The failure patterns, on the recorded failures (their stdout through the parser, their stderr
//! and exit code from the record) and on wordings no recording shows. Prose about rate limits in
//! anything but the CLI's own error text must not count.

use corral_claude::ClaudeAdapter;
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

fn resumed() -> SessionId {
    SessionId::new("123e4567-e89b-12d3-a456-426614174000").unwrap()
}

fn read(case: &str) -> (Diagnosis, Option<String>) {
    let r = recorded(case);
    let id = resumed();
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
    let adapter = ClaudeAdapter::default();
    let diagnosis = adapter.diagnose(&evidence);
    // The refusal is the diagnosis's own field, read out so each case states it.
    let refusal = diagnosis.refused.clone();
    (diagnosis, refusal)
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

fn stale() -> Diagnosis {
    Diagnosis {
        stale_session: true,
        ..Diagnosis::default()
    }
}

#[test]
fn recorded_rate_limits() {
    let message = "API Error: Request rejected (429) · Rate limited (fakeapi)";
    assert_eq!(read("e429-forever"), (rate_limited(message), None));
    assert_eq!(read("e429-maxretries0"), (rate_limited(message), None));
    assert_eq!(
        read("e529"),
        (
            rate_limited(
                "API Error: 529 Overloaded (fakeapi). This is a server-side issue, usually temporary — try again in a moment. If it persists, check your inference gateway (127.0.0.1:46139)."
            ),
            None
        )
    );
}

#[test]
fn recorded_failures_that_are_neither_rate_limits_nor_stale() {
    for case in ["e500", "hang", "midstream-error", "text", "write-default"] {
        assert_eq!(read(case), (Diagnosis::default(), None), "{case}");
    }
}

#[test]
fn recorded_stale_sessions() {
    // An unknown id, a session of another working directory, and an id that is not a UUID.
    for case in ["resume-unknown", "resume-other-cwd", "resume-notuuid"] {
        assert_eq!(read(case), (stale(), None), "{case}");
    }
}

#[test]
fn recorded_refusals_are_explained() {
    let cases = [
        (
            "write-bypass-as-root",
            "Claude Code refuses bypassPermissions as root; run Corral as a normal user, or set IS_SANDBOX=1 in Corral's environment if this machine is a disposable sandbox",
        ),
        (
            "badflag",
            "Claude Code rejected its command line (error: unknown option '--bogus-flag'); check providers.claude.extra_args and whether the installed version is a tested one",
        ),
        (
            "e401-maxretries0",
            "Claude Code could not authenticate (HTTP 401): Invalid API key · Fix external API key; check ANTHROPIC_API_KEY, CLAUDE_CODE_OAUTH_TOKEN or the login of the account Corral runs as",
        ),
    ];
    for (case, message) in cases {
        let refused = Diagnosis {
            refused: Some(message.to_string()),
            ..Diagnosis::default()
        };
        assert_eq!(read(case), (refused, Some(message.to_string())), "{case}");
    }
}

fn evidence_read(terminal: Option<TerminalSummary>, stderr: &str, stdout: &str) -> Diagnosis {
    let evidence = AttemptEvidence {
        exit: Some(ExitInfo {
            code: Some(1),
            signal: None,
        }),
        terminal: terminal.as_ref(),
        stderr_tail: stderr,
        stdout_tail: stdout,
        resumed: None,
        rate_limits: &[],
    };
    ClaudeAdapter::default().diagnose(&evidence)
}

fn failed(text: &str, status: Option<u16>) -> Option<TerminalSummary> {
    Some(TerminalSummary {
        is_error: true,
        text: Some(text.into()),
        api_status: status,
    })
}

#[test]
fn prose_about_rate_limits_does_not_count() {
    let prose = "API Error: Request rejected (429) is what the rate limiter returns; Claude AI usage limit reached|1735689600 too";
    // In a successful result, in the stdout tail, or in the middle of an error text.
    let ok = Some(TerminalSummary {
        is_error: false,
        text: Some(prose.into()),
        api_status: None,
    });
    assert_eq!(evidence_read(ok, "", prose), Diagnosis::default());
    assert_eq!(evidence_read(None, "", prose), Diagnosis::default());
    assert_eq!(
        evidence_read(
            failed(
                "The task failed: I was adding a rate limit (429) handler",
                None
            ),
            "",
            ""
        ),
        Diagnosis::default()
    );
}

#[test]
fn usage_limit_wording_carries_its_reset_time() {
    let text = "Claude AI usage limit reached|1735689600";
    let expected = Diagnosis {
        rate_limit: Some(RateLimitInfo {
            resets_at_epoch_s: Some(1_735_689_600),
            retry_after_ms: None,
            rejected: true,
            message: text.into(),
        }),
        ..Diagnosis::default()
    };
    assert_eq!(evidence_read(failed(text, None), "", ""), expected);
    assert_eq!(
        evidence_read(None, &format!("starting\n  {text}\n"), ""),
        expected
    );
    let limiting =
        "API Error: Server is temporarily limiting requests (not your usage limit) · slow down";
    assert_eq!(
        evidence_read(failed(limiting, Some(429)), "", ""),
        rate_limited(limiting)
    );
}

#[test]
fn model_unavailable_wordings() {
    // Not recorded: these are the CLI's own strings for an API 404 on the model.
    let issue = "There's an issue with the selected model (claude-nope). It may not exist or you may not have access to it. Run /model to pick a different model.";
    let deployment = "The model claude-nope is not available on your bedrock deployment. Try switching to claude-opus-4-8, or ask your admin to enable this model.";
    let raw = r#"API Error: 404 {"type":"error","error":{"type":"not_found_error","message":"model: claude-nope"}}"#;
    for text in [issue, deployment, raw] {
        assert_eq!(
            evidence_read(failed(text, Some(404)), "", ""),
            Diagnosis {
                model_unavailable: Some(text.into()),
                ..Diagnosis::default()
            }
        );
    }
    assert_eq!(
        evidence_read(
            failed("API Error: 404 model: claude-nope", Some(404)),
            "",
            ""
        ),
        Diagnosis {
            model_unavailable: Some("API Error: 404 model: claude-nope".into()),
            ..Diagnosis::default()
        }
    );
    assert_eq!(
        evidence_read(None, &format!("Error: {issue}\n"), ""),
        Diagnosis {
            model_unavailable: Some(format!("Error: {issue}")),
            ..Diagnosis::default()
        }
    );
    // An agent that merely talks about models in a successful run.
    let ok = Some(TerminalSummary {
        is_error: false,
        text: Some(issue.into()),
        api_status: None,
    });
    assert_eq!(evidence_read(ok, "", ""), Diagnosis::default());
}
