//! The failure patterns, on the recorded runs (their stdout through the parser, their stderr and
//! exit code from the record): quota (exit 173), unknown model, the auth-type trap (exit 41), a
//! resume of a session that is not there (exit 42). Prose in a successful answer must not count.

use corral_engine::{AttemptEvidence, CliAdapter, Diagnosis, ExitInfo, TerminalSummary};
use corral_gemini::GeminiAdapter;
use corral_ports::SessionId;
use corral_test_support::recorded::RecordedRun;

use crate::support::{SAMPLES, exit_code_of};

fn recorded(case: &str) -> RecordedRun<TerminalSummary> {
    SAMPLES.run_of(case, |is_error, text, api_status| TerminalSummary {
        is_error,
        text,
        api_status,
    })
}

fn read(case: &str, resumed: Option<&SessionId>) -> Diagnosis {
    let r = recorded(case);
    let evidence = AttemptEvidence {
        exit: Some(ExitInfo {
            code: Some(exit_code_of(case)),
            signal: None,
        }),
        terminal: r.terminal.as_ref(),
        stderr_tail: &r.stderr,
        stdout_tail: "",
        resumed,
        rate_limits: &r.rate_limits,
    };
    GeminiAdapter::default().diagnose(&evidence)
}

#[test]
fn a_quota_error_is_a_rate_limit_and_nothing_else() {
    let d = read("e429", None);
    assert_eq!(exit_code_of("e429"), 173);
    let limit = d.rate_limit.clone().unwrap();
    assert!(limit.rejected);
    assert!(
        limit.message.contains("Resource has been exhausted"),
        "{limit:?}"
    );
    assert_eq!(
        Diagnosis {
            rate_limit: None,
            ..d
        },
        Diagnosis::default()
    );
}

#[test]
fn an_unknown_model_is_model_unavailable() {
    let d = read("e404", None);
    assert!(
        d.model_unavailable
            .as_deref()
            .is_some_and(|m| m.contains("models/nope is not found")),
        "{d:?}"
    );
    assert_eq!(d.rate_limit, None);
}

#[test]
fn the_auth_type_trap_is_refused_with_the_setting_to_add() {
    let d = read("noauth", None);
    assert_eq!(exit_code_of("noauth"), 41);
    let refused = d.refused.unwrap();
    assert!(refused.contains("selectedType"), "{refused}");
    assert!(refused.contains("gemini-api-key"), "{refused}");
}

#[test]
fn a_resume_of_a_missing_session_is_stale() {
    let id = SessionId::new("00000000-0000-4000-8000-000000000000").unwrap();
    let d = read("resume-stale", Some(&id));
    assert_eq!(exit_code_of("resume-stale"), 42);
    assert!(d.stale_session, "{d:?}");
    assert_eq!(d.refused, None);
}

#[test]
fn successful_runs_diagnose_nothing() {
    for case in ["text", "write", "shell", "plan", "resume"] {
        assert_eq!(read(case, None), Diagnosis::default(), "{case}");
    }
}
