//! The failure patterns, on the recorded failures (their stdout through the parser, their stderr
//! and exit code from the record) and on wordings no recording shows. Prose about rate limits in
//! anything but the CLI's own error text must not count.

use corral_codex::{CodexAdapter, CodexSettings, SandboxMode};
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

fn read_with(adapter: &CodexAdapter, case: &str) -> Diagnosis {
    let r = recorded(case);
    let id = resumed();
    let evidence = AttemptEvidence {
        // A negative code: the runner killed it, so there is no exit code.
        exit: r.exit_code.filter(|c| *c >= 0).map(|code| ExitInfo {
            code: Some(code),
            signal: None,
        }),
        terminal: r.terminal.as_ref(),
        stderr_tail: &r.stderr,
        stdout_tail: "",
        resumed: case.starts_with("resume").then_some(&id),
        rate_limits: &r.rate_limits,
    };
    adapter.diagnose(&evidence)
}

fn read(case: &str) -> Diagnosis {
    read_with(&CodexAdapter::default(), case)
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

fn refused(message: &str) -> Diagnosis {
    Diagnosis {
        refused: Some(message.into()),
        ..Diagnosis::default()
    }
}

#[test]
fn recorded_rate_limits() {
    assert_eq!(
        read("e429-forever"),
        rate_limited("exceeded retry limit, last status: 429 Too Many Requests")
    );
    assert_eq!(
        read("e529"),
        rate_limited(
            "unexpected status 529 <unknown status code>: Overloaded (fakeapi), url: http://127.0.0.1:37939/v1/responses"
        )
    );
}

#[test]
fn recorded_failures_that_are_neither_rate_limits_nor_stale() {
    // A 500 rewritten to "high demand", a stream cut mid-way, a stalled stream, a hang, and runs
    // that succeeded (the 429s before the success were Codex's own retries).
    for case in [
        "e500",
        "midstream-error",
        "stall",
        "hang",
        "text",
        "text-plain",
        "e429-twice",
        "stdin-open",
        "write-default",
        "write-workspace",
        "write-bypass",
    ] {
        assert_eq!(read(case), Diagnosis::default(), "{case}");
    }
}

#[test]
fn recorded_stale_session() {
    assert_eq!(
        read("resume-unknown"),
        Diagnosis {
            stale_session: true,
            ..Diagnosis::default()
        }
    );
    // A resume that worked.
    assert_eq!(read("resume"), Diagnosis::default());
}

#[test]
fn recorded_refusals_are_explained() {
    let bad_flag = |flag: &str| {
        format!(
            "Codex rejected its command line (error: unexpected argument '{flag}' found); check \
             providers.codex.extra_args and whether the installed version is a tested one"
        )
    };
    assert_eq!(read("badflag"), refused(&bad_flag("--bogus-flag")));
    // `--full-auto` is gone in 0.171.
    assert_eq!(read("full-auto"), refused(&bad_flag("--full-auto")));
    assert_eq!(
        read("no-skip-git"),
        refused(
            "Codex refused the working directory (Not inside a trusted directory and \
             --skip-git-repo-check was not specified.); the adapter passes \
             --skip-git-repo-check, so check providers.codex.extra_args and the installed version"
        )
    );
    assert_eq!(
        read("e401"),
        refused(
            "Codex could not authenticate (HTTP 401): unexpected status 401 Unauthorized: invalid \
             x-api-key (fakeapi), url: http://127.0.0.1:44979/v1/responses; check OPENAI_API_KEY \
             or CODEX_API_KEY, the login of the account Corral runs as (`codex login`), or the \
             env_key of the configured model provider (name it in Corral's environment allowlist)"
        )
    );
}

#[test]
fn codex_home_under_tmp_is_a_refusal_unless_unsandboxed() {
    // Recorded with exit 0 (the engine reports success first), but every sandboxed command of
    // such a run fails: when a run does fail, retrying cannot help.
    let home_in_tmp = refused(
        "CODEX_HOME is under /tmp, where Codex refuses to install its sandbox helper, so every \
         sandboxed command fails; point CODEX_HOME at a folder outside /tmp",
    );
    assert_eq!(read("write-home-in-tmp"), home_in_tmp);
    assert_eq!(read("resume-last-none"), home_in_tmp);
    let unsandboxed = CodexAdapter::new(CodexSettings {
        sandbox: Some(SandboxMode::DangerFullAccess),
        ..CodexSettings::default()
    });
    assert_eq!(
        read_with(&unsandboxed, "write-home-in-tmp"),
        Diagnosis::default()
    );
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
    CodexAdapter::default().diagnose(&evidence)
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
    let prose = "exceeded retry limit, last status: 429 Too Many Requests is what I added; usage_limit_reached too";
    let ok = Some(TerminalSummary {
        is_error: false,
        text: Some(prose.into()),
        api_status: None,
    });
    assert_eq!(evidence_read(ok, "", prose), Diagnosis::default());
    assert_eq!(evidence_read(None, "", prose), Diagnosis::default());
    // stderr that is not one of Codex's error lines.
    assert_eq!(
        evidence_read(
            None,
            "warning: the agent wrote about usage_limit_reached\n",
            ""
        ),
        Diagnosis::default()
    );
}

#[test]
fn usage_limits_and_overloads() {
    let body = r#"unexpected status 429 Too Many Requests: {"error":{"type":"usage_limit_reached","resets_at":1767225600,"resets_in_seconds":60}}"#;
    assert_eq!(
        evidence_read(failed(body, Some(429)), "", ""),
        Diagnosis {
            rate_limit: Some(RateLimitInfo {
                resets_at_epoch_s: Some(1_767_225_600),
                retry_after_ms: Some(60_000),
                rejected: true,
                message: body.into(),
            }),
            ..Diagnosis::default()
        }
    );
    let prose = "You’ve hit your usage limit. Visit https://chatgpt.com/settings/usage to purchase more credits or try again at Jan 1st, 2027 9:00 AM.";
    // Codex's prose names the reset in the local time zone, to the minute: read, and rounded up.
    let reset: jiff::Zoned = jiff::civil::datetime(2027, 1, 1, 9, 1, 0, 0)
        .to_zoned(jiff::tz::TimeZone::system())
        .unwrap();
    let with_reset = |message: &str| {
        let mut d = rate_limited(message);
        if let Some(info) = d.rate_limit.as_mut() {
            info.resets_at_epoch_s = Some(u64::try_from(reset.timestamp().as_second()).unwrap());
        }
        d
    };
    assert_eq!(
        evidence_read(failed(prose, None), "", ""),
        with_reset(prose)
    );
    // Outside a turn, Codex says it on stderr.
    assert_eq!(
        evidence_read(None, &format!("Error: {prose}\n"), ""),
        with_reset(&format!("Error: {prose}"))
    );
    let capacity = "Selected model is at capacity. Please try a different model.";
    assert_eq!(
        evidence_read(failed(capacity, None), "", ""),
        rate_limited(capacity)
    );
}

#[test]
fn a_spent_quota_is_a_refusal_not_a_rate_limit() {
    for text in [
        "Quota exceeded. Check your plan and billing details.",
        "unexpected status 429 Too Many Requests: You exceeded your current quota, please check your plan and billing details.",
    ] {
        let got = evidence_read(failed(text, Some(429)), "", "");
        assert_eq!(got.rate_limit, None, "{text}");
        assert_eq!(
            got.refused,
            Some(format!(
                "Codex's account is out of quota ({text}); check the plan and billing of the API \
                 key or login Corral uses"
            ))
        );
    }
}

#[test]
fn model_unavailable_wordings() {
    // Not recorded: the OpenAI API's wording and code, and the ChatGPT backend's.
    let api = "unexpected status 404 Not Found: The model `gpt-nope` does not exist or you do not have access to it., url: https://api.openai.com/v1/responses";
    let code = r#"unexpected status 400 Bad Request: {"error":{"code":"model_not_found","message":"gpt-nope"}}"#;
    let chatgpt = "unexpected status 400 Bad Request: {\"detail\":\"The 'gpt-nope' model is not supported when using Codex with a ChatGPT account.\"}";
    for (text, status) in [(api, Some(404)), (code, Some(400)), (chatgpt, Some(400))] {
        assert_eq!(
            evidence_read(failed(text, status), "", ""),
            Diagnosis {
                model_unavailable: Some(text.into()),
                ..Diagnosis::default()
            },
            "{text}"
        );
    }
    let bare_404 = "unexpected status 404 Not Found: no such model";
    assert_eq!(
        evidence_read(failed(bare_404, Some(404)), "", ""),
        Diagnosis {
            model_unavailable: Some(bare_404.into()),
            ..Diagnosis::default()
        }
    );
    // The recorded warning for a model Codex has no metadata for is not one: the run goes on.
    let warning = "Model metadata for `fake-model` not found. Defaulting to fallback metadata; this can degrade performance and cause issues.";
    assert_eq!(
        evidence_read(failed(warning, None), "", ""),
        Diagnosis::default()
    );
}

#[test]
fn configuration_errors_are_refusals() {
    let stderr = "Error loading config.toml: invalid type: string \"x\", expected u64 in `model_providers.fake.request_max_retries`\n";
    assert_eq!(
        evidence_read(None, stderr, ""),
        refused(
            "Codex could not load its configuration (Error loading config.toml: invalid type: \
             string \"x\", expected u64 in `model_providers.fake.request_max_retries`); check \
             $CODEX_HOME/config.toml and providers.codex (model_provider, extra_args)"
        )
    );
}
