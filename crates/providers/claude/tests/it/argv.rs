//! The command lines the adapter builds, compared whole: plain, resume, every optional flag, each
//! permission combination, extra arguments, and the refusals. No argument may hold the prompt.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use corral_claude::{ClaudeAdapter, ClaudeSettings, default_tested_versions};
use corral_engine::{AttemptPlan, CliAdapter, CommandSpec, PromptDelivery};
use corral_ports::{AiSession, Effort, Permissions, ProviderError, ProviderId, SessionId};
use corral_test_support::session::{PROMPT, assert_prompt_not_in, session};

const HEAD: [&str; 4] = ["-p", "--verbose", "--output-format", "stream-json"];
const BYPASS: [&str; 2] = ["--permission-mode", "bypassPermissions"];

fn env_set(retries: &str) -> Vec<(String, String)> {
    [
        ("CLAUDE_CODE_MAX_RETRIES", retries),
        ("DISABLE_AUTOUPDATER", "1"),
        ("DISABLE_TELEMETRY", "1"),
        ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

fn spec(args: &[&str]) -> CommandSpec {
    CommandSpec {
        program: PathBuf::from("claude"),
        args: args.iter().map(OsString::from).collect(),
        env_set: env_set("3"),
        session_id: None,
    }
}

fn command(
    adapter: &ClaudeAdapter,
    session: &AiSession,
    resume: Option<&SessionId>,
) -> Result<CommandSpec, ProviderError> {
    let plan = AttemptPlan {
        session,
        resume,
        attempt: 1,
        pointer: None,
    };
    let spec = adapter.command(&plan)?;
    assert_prompt_not_in(&spec.args);
    Ok(spec)
}

fn build(session: &AiSession) -> CommandSpec {
    command(&ClaudeAdapter::default(), session, None).unwrap()
}

#[test]
fn plain_run_reads_the_prompt_from_stdin() {
    let adapter = ClaudeAdapter::default();
    assert_eq!(adapter.provider(), ProviderId::Claude);
    assert_eq!(adapter.prompt_delivery(), PromptDelivery::Stdin);
    assert_eq!(
        build(&session()),
        spec(&[HEAD.as_slice(), BYPASS.as_slice()].concat())
    );
}

#[test]
fn resume_names_the_session() {
    let id = SessionId::new("0298f576-dcfa-437d-b446-91714c2e202b").unwrap();
    let got = command(&ClaudeAdapter::default(), &session(), Some(&id)).unwrap();
    assert_eq!(
        got,
        spec(
            &[
                HEAD.as_slice(),
                &["--resume", "0298f576-dcfa-437d-b446-91714c2e202b"],
                BYPASS.as_slice()
            ]
            .concat()
        )
    );
}

#[test]
fn model_effort_roots_and_budget() {
    let s = AiSession {
        model: Some("claude-opus-4-8".into()),
        effort: Some(Effort::High),
        extra_roots: vec![PathBuf::from("/srv/shared lib"), PathBuf::from("/a=b")],
        max_budget_usd: Some(2.5),
        ..session()
    };
    assert_eq!(
        build(&s),
        spec(
            &[
                HEAD.as_slice(),
                BYPASS.as_slice(),
                &[
                    "--model",
                    "claude-opus-4-8",
                    "--effort",
                    "high",
                    "--add-dir=/srv/shared lib",
                    "--add-dir=/a=b",
                    "--max-budget-usd",
                    "2.5",
                ]
            ]
            .concat()
        )
    );
    for (effort, word) in [
        (Effort::Low, "low"),
        (Effort::Medium, "medium"),
        (Effort::High, "high"),
    ] {
        let got = build(&AiSession {
            effort: Some(effort),
            ..session()
        });
        assert_eq!(
            got,
            spec(&[HEAD.as_slice(), BYPASS.as_slice(), &["--effort", word]].concat())
        );
    }
    // A tiny budget stays a plain decimal.
    let got = build(&AiSession {
        max_budget_usd: Some(0.0000001),
        ..session()
    });
    assert_eq!(
        got,
        spec(
            &[
                HEAD.as_slice(),
                BYPASS.as_slice(),
                &["--max-budget-usd", "0.0000001"]
            ]
            .concat()
        )
    );
}

#[test]
fn each_permission_combination() {
    let cases = [
        ((true, true, true), None),
        (
            (false, true, true),
            Some("--disallowedTools=Edit,MultiEdit,NotebookEdit"),
        ),
        ((true, false, true), Some("--disallowedTools=Bash")),
        (
            (true, true, false),
            Some("--disallowedTools=WebFetch,WebSearch"),
        ),
        (
            (false, false, true),
            Some("--disallowedTools=Edit,MultiEdit,NotebookEdit,Bash"),
        ),
        (
            (false, true, false),
            Some("--disallowedTools=Edit,MultiEdit,NotebookEdit,WebFetch,WebSearch"),
        ),
        (
            (true, false, false),
            Some("--disallowedTools=Bash,WebFetch,WebSearch"),
        ),
        (
            (false, false, false),
            Some("--disallowedTools=Edit,MultiEdit,NotebookEdit,Bash,WebFetch,WebSearch"),
        ),
    ];
    for ((edit_files, run_shell, web_access), deny) in cases {
        let s = AiSession {
            permissions: Permissions {
                edit_files,
                run_shell,
                web_access,
            },
            ..session()
        };
        let mut expected: Vec<&str> = [HEAD.as_slice(), BYPASS.as_slice()].concat();
        expected.extend(deny);
        assert_eq!(
            build(&s),
            spec(&expected),
            "edit_files={edit_files} run_shell={run_shell} web_access={web_access}"
        );
    }
}

#[test]
fn settings_supply_program_model_retries_and_extra_args() {
    let adapter = ClaudeAdapter::new(ClaudeSettings {
        command: PathBuf::from("/opt/claude/bin/claude"),
        model: Some("sonnet".into()),
        extra_args: vec!["--strict-mcp-config".into(), "--add-dir".into()],
        max_internal_retries: 40,
        ..ClaudeSettings::default()
    });
    let expected = |model: &str| CommandSpec {
        program: PathBuf::from("/opt/claude/bin/claude"),
        args: [
            HEAD.as_slice(),
            BYPASS.as_slice(),
            &["--model", model, "--strict-mcp-config", "--add-dir"],
        ]
        .concat()
        .iter()
        .map(OsString::from)
        .collect(),
        // Claude clamps its retries at 15; so does the adapter.
        env_set: env_set("15"),
        session_id: None,
    };
    assert_eq!(
        command(&adapter, &session(), None).unwrap(),
        expected("sonnet")
    );
    // The session's model wins over the settings' default.
    let s = AiSession {
        model: Some("opus".into()),
        ..session()
    };
    assert_eq!(command(&adapter, &s, None).unwrap(), expected("opus"));
}

#[test]
fn malformed_intent_is_refused_before_a_spawn() {
    let invalid = |reason: &str| ProviderError::InvalidSession {
        provider: ProviderId::Claude,
        reason: reason.into(),
        hint: None,
    };
    let cases = [
        (
            AiSession {
                model: Some("--dangerously-skip-permissions".into()),
                ..session()
            },
            invalid("model name \"--dangerously-skip-permissions\" is empty or starts with '-'"),
        ),
        (
            AiSession {
                model: Some(String::new()),
                ..session()
            },
            invalid("model name \"\" is empty or starts with '-'"),
        ),
        (
            AiSession {
                max_budget_usd: Some(0.0),
                ..session()
            },
            invalid("max_budget_usd must be a positive number, got 0"),
        ),
        (
            AiSession {
                max_budget_usd: Some(f64::NAN),
                ..session()
            },
            invalid("max_budget_usd must be a positive number, got NaN"),
        ),
        (
            AiSession {
                extra_roots: vec![PathBuf::new()],
                ..session()
            },
            invalid("an extra root is an empty path"),
        ),
    ];
    for (s, expected) in cases {
        let got = command(&ClaudeAdapter::default(), &s, None).unwrap_err();
        assert_eq!(got.to_string(), expected.to_string());
    }
}

#[test]
fn version_check_uses_the_tested_range() {
    let check = ClaudeAdapter::default().version_check().unwrap();
    assert_eq!(check.program, PathBuf::from("claude"));
    assert_eq!(check.args, ["--version"]);
    assert_eq!(check.required, default_tested_versions());
    assert_eq!(check.required.to_string(), ">=2.1.0, <2.2.0");
    assert_eq!(check.timeout, Duration::from_secs(60));
    assert!(!check.allow_mismatch);
    let recorded = semver::Version::new(2, 1, 197);
    assert!(check.required.matches(&recorded));
    assert!(!check.required.matches(&semver::Version::new(2, 2, 0)));

    let overridden = ClaudeAdapter::new(ClaudeSettings {
        allow_untested_version: true,
        version_timeout: Duration::from_secs(3),
        ..ClaudeSettings::default()
    })
    .version_check()
    .unwrap();
    assert!(overridden.allow_mismatch);
    assert_eq!(overridden.timeout, Duration::from_secs(3));
}

#[test]
fn interactive_mints_a_session_uses_accept_edits_and_passes_only_the_pointer() {
    let dir = tempfile::tempdir().unwrap();
    let pointer =
        corral_engine::write_prompt_pointer(dir.path(), "interactive-prompt.md", PROMPT).unwrap();
    let s = session();
    let plan = AttemptPlan {
        session: &s,
        resume: None,
        attempt: 1,
        pointer: Some(&pointer),
    };
    let spec = ClaudeAdapter::default().interactive_command(&plan).unwrap();
    let minted = spec.session_id.clone().expect("a minted session id");
    let args: Vec<String> = spec
        .args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        &args[..4],
        [
            "--session-id",
            minted.as_str(),
            "--permission-mode",
            "acceptEdits"
        ]
    );
    assert_eq!(args.last(), Some(&pointer.sentence));
    assert!(
        !args.iter().any(|a| a == "-p"),
        "interactive, not print mode: {args:?}"
    );
    assert!(
        !args.iter().any(|a| a.contains(PROMPT)),
        "the prompt body never enters argv"
    );

    let resumed = SessionId::new("7a1c9d52-0000-4000-8000-000000000001").unwrap();
    let plan = AttemptPlan {
        session: &s,
        resume: Some(&resumed),
        attempt: 1,
        pointer: None,
    };
    let spec = ClaudeAdapter::default().interactive_command(&plan).unwrap();
    let args: Vec<String> = spec
        .args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        &args[..4],
        [
            "--resume",
            resumed.as_str(),
            "--permission-mode",
            "acceptEdits"
        ]
    );
    assert_eq!(spec.session_id, Some(resumed));
}

#[test]
fn a_turn_cap_is_passed_as_max_turns_and_zero_is_refused() {
    let got = build(&AiSession {
        max_turns: Some(7),
        ..session()
    });
    assert_eq!(
        got,
        spec(&[HEAD.as_slice(), BYPASS.as_slice(), &["--max-turns", "7"]].concat())
    );
    let zero = AiSession {
        max_turns: Some(0),
        ..session()
    };
    let err = command(&ClaudeAdapter::default(), &zero, None).unwrap_err();
    assert!(
        matches!(err, ProviderError::InvalidSession { .. })
            && err
                .to_string()
                .contains("max_turns must be at least 1, got 0"),
        "{err}"
    );
}
