//! The command lines the adapter builds, compared whole: the pointer sentence in `-p`, the
//! working directory in `-d`, the model in `-m`, extra arguments last; the refusals (resume,
//! spending cap, missing pointer, flag-like values); the version check, the liveness rule and
//! the capability row. No argument may hold the prompt.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use corral_engine::{CliAdapter, CommandSpec, Liveness, PromptDelivery, PromptPointer};
use corral_grok::{
    GrokAdapter, GrokSettings, IDLE_MARGIN, PROMPT_FILE, default_request_timeout_budget,
    default_tested_versions,
};
use corral_ports::{
    AiSession, Capabilities, CostReporting, Effort, Gate, Permissions, PromptChannel,
    ProviderError, ProviderId, SessionId, SessionIdTiming,
};
use corral_test_support::session::{assert_prompt_not_in, session};

use crate::support::{SENTENCE, plan, pointer};

fn spec(args: &[&str]) -> CommandSpec {
    CommandSpec {
        program: PathBuf::from("grok"),
        args: args.iter().map(OsString::from).collect(),
        env_set: Vec::new(),
        session_id: None,
    }
}

fn command(
    adapter: &GrokAdapter,
    session: &AiSession,
    pointer: Option<&PromptPointer>,
    resume: Option<&SessionId>,
) -> Result<CommandSpec, ProviderError> {
    let spec = adapter.command(&plan(session, pointer, resume))?;
    assert_prompt_not_in(&spec.args);
    Ok(spec)
}

fn build(session: &AiSession) -> CommandSpec {
    command(&GrokAdapter::default(), session, Some(&pointer()), None).unwrap()
}

fn invalid(reason: &str) -> String {
    ProviderError::InvalidSession {
        provider: ProviderId::Grok,
        reason: reason.into(),
        hint: None,
    }
    .to_string()
}

#[test]
fn plain_run_points_at_the_prompt_file() {
    let adapter = GrokAdapter::default();
    assert_eq!(adapter.provider(), ProviderId::Grok);
    assert_eq!(
        adapter.prompt_delivery(),
        PromptDelivery::PointerFile {
            file_name: "grok-prompt.md"
        }
    );
    assert_eq!(PROMPT_FILE, "grok-prompt.md");
    assert_eq!(
        build(&session()),
        spec(&["-p", SENTENCE, "-d", "/work/repo"])
    );
}

#[test]
fn the_model_comes_from_the_session_then_the_settings() {
    let s = AiSession {
        model: Some("grok-code-fast-1".into()),
        ..session()
    };
    assert_eq!(
        build(&s),
        spec(&["-p", SENTENCE, "-d", "/work/repo", "-m", "grok-code-fast-1"])
    );

    let adapter = GrokAdapter::new(GrokSettings {
        command: PathBuf::from("/opt/grok/bin/grok"),
        model: Some("grok-4-latest".into()),
        extra_args: vec!["--max-tool-rounds".into(), "50".into()],
        ..GrokSettings::default()
    });
    let expected = |model: &str| CommandSpec {
        program: PathBuf::from("/opt/grok/bin/grok"),
        args: [
            "-p",
            SENTENCE,
            "-d",
            "/work/repo",
            "-m",
            model,
            "--max-tool-rounds",
            "50",
        ]
        .iter()
        .map(OsString::from)
        .collect(),
        env_set: Vec::new(),
        session_id: None,
    };
    assert_eq!(
        command(&adapter, &session(), Some(&pointer()), None).unwrap(),
        expected("grok-4-latest")
    );
    // The session's model wins over the settings' default.
    assert_eq!(
        command(&adapter, &s, Some(&pointer()), None).unwrap(),
        expected("grok-code-fast-1")
    );
}

#[test]
fn permissions_effort_and_extra_roots_have_no_flag() {
    // Grok 1.0.x has no flag for any of them: the argv is the same, and the capability row
    // names the over-grants.
    for edit_files in [true, false] {
        for run_shell in [true, false] {
            for web_access in [true, false] {
                let s = AiSession {
                    permissions: Permissions {
                        edit_files,
                        run_shell,
                        web_access,
                    },
                    effort: Some(Effort::High),
                    extra_roots: vec![PathBuf::from("/srv/shared")],
                    ..session()
                };
                assert_eq!(build(&s), spec(&["-p", SENTENCE, "-d", "/work/repo"]));
            }
        }
    }
}

#[test]
fn a_resume_is_refused_because_grok_has_none() {
    let id = SessionId::new("0298f576-dcfa-437d-b446-91714c2e202b").unwrap();
    let err = command(
        &GrokAdapter::default(),
        &session(),
        Some(&pointer()),
        Some(&id),
    )
    .unwrap_err();
    assert!(matches!(
        err,
        ProviderError::InvalidSession {
            provider: ProviderId::Grok,
            ..
        }
    ));
    assert_eq!(
        err.to_string(),
        invalid(
            "Grok CLI has no headless resume (it prints no session id and has no resume flag), \
             so session 0298f576-dcfa-437d-b446-91714c2e202b cannot be continued; start a new \
             session instead"
        )
    );
}

#[test]
fn malformed_intent_is_refused_before_a_spawn() {
    let odd_pointer = |sentence: &str| PromptPointer {
        path: PathBuf::from("/runs/r1/grok-prompt.md"),
        sentence: sentence.into(),
    };
    let cases: Vec<(AiSession, Option<PromptPointer>, String)> = vec![
        (
            AiSession {
                max_budget_usd: Some(2.5),
                ..session()
            },
            Some(pointer()),
            invalid(
                "Grok CLI cannot cap spending, so max_budget_usd 2.5 would be ignored; drop it \
                 or choose a provider that enforces it",
            ),
        ),
        (
            session(),
            None,
            invalid(
                "no prompt pointer: Grok takes its prompt only as the -p argument, so the engine \
                 must write grok-prompt.md and pass the sentence pointing at it",
            ),
        ),
        (
            session(),
            Some(odd_pointer("  ")),
            invalid("the prompt pointer sentence \"  \" is empty or starts with '-'"),
        ),
        (
            session(),
            Some(odd_pointer("--api-key=x")),
            invalid("the prompt pointer sentence \"--api-key=x\" is empty or starts with '-'"),
        ),
        (
            AiSession {
                cwd: PathBuf::new(),
                ..session()
            },
            Some(pointer()),
            invalid("the working directory \"\" is empty or starts with '-'"),
        ),
        (
            AiSession {
                cwd: PathBuf::from("-k"),
                ..session()
            },
            Some(pointer()),
            invalid("the working directory \"-k\" is empty or starts with '-'"),
        ),
        (
            AiSession {
                model: Some("--api-key".into()),
                ..session()
            },
            Some(pointer()),
            invalid("model name \"--api-key\" is empty or starts with '-'"),
        ),
        (
            AiSession {
                model: Some(String::new()),
                ..session()
            },
            Some(pointer()),
            invalid("model name \"\" is empty or starts with '-'"),
        ),
    ];
    for (s, p, expected) in cases {
        let got = command(&GrokAdapter::default(), &s, p.as_ref(), None).unwrap_err();
        assert_eq!(got.to_string(), expected);
    }
}

#[test]
fn version_check_uses_the_tested_range() {
    let check = GrokAdapter::default().version_check().unwrap();
    assert_eq!(check.program, PathBuf::from("grok"));
    assert_eq!(check.args, ["--version"]);
    assert_eq!(check.required, default_tested_versions());
    assert_eq!(check.required.to_string(), ">=1.0.0, <1.1.0");
    assert_eq!(check.timeout, Duration::from_secs(60));
    assert!(!check.allow_mismatch);
    // `@vibe-kit/grok-cli@0.0.34` prints 1.0.1; the package version itself is not what it says.
    assert!(check.required.matches(&semver::Version::new(1, 0, 1)));
    assert!(!check.required.matches(&semver::Version::new(0, 0, 34)));
    assert!(!check.required.matches(&semver::Version::new(1, 1, 0)));

    let overridden = GrokAdapter::new(GrokSettings {
        allow_untested_version: true,
        version_timeout: Duration::from_secs(3),
        ..GrokSettings::default()
    })
    .version_check()
    .unwrap();
    assert!(overridden.allow_mismatch);
    assert_eq!(overridden.timeout, Duration::from_secs(3));
}

#[test]
fn liveness_counts_process_activity_with_grok_s_own_timeout_as_the_floor() {
    // 360 s per attempt, 1 + 2 attempts, plus the margin: 19 minutes.
    assert_eq!(default_request_timeout_budget(), Duration::from_secs(1080));
    assert_eq!(IDLE_MARGIN, Duration::from_secs(60));
    let settings = GrokSettings::default();
    assert_eq!(settings.min_idle(), Duration::from_secs(1140));
    assert_eq!(
        GrokAdapter::default().liveness(),
        Liveness::ProcessActivity {
            min_idle: Duration::from_secs(1140)
        }
    );
    let shorter = GrokAdapter::new(GrokSettings {
        request_timeout_budget: Duration::from_secs(30),
        ..GrokSettings::default()
    });
    assert_eq!(
        shorter.liveness(),
        Liveness::ProcessActivity {
            min_idle: Duration::from_secs(90)
        }
    );
    // Saturates instead of overflowing.
    let huge = GrokSettings {
        request_timeout_budget: Duration::MAX,
        ..GrokSettings::default()
    };
    assert_eq!(huge.min_idle(), Duration::MAX);
}

#[test]
fn the_capability_row_is_honest() {
    let row: Capabilities = GrokAdapter::default().capabilities();
    assert_eq!(row.prompt, PromptChannel::PointerFile);
    assert_eq!(row.session_id, SessionIdTiming::Never);
    assert!(!row.resume);
    assert!(!row.effort);
    assert_eq!(row.cost, CostReporting::None);
    assert!(!row.streaming);
    assert_eq!(row.enforced_gates, &[] as &[Gate]);
    let over: Vec<Gate> = row.over_grants.iter().map(|(g, _)| *g).collect();
    assert_eq!(
        over,
        [
            Gate::EditFiles,
            Gate::RunShell,
            Gate::WebAccess,
            Gate::ExtraRoots
        ]
    );
    assert!(row.over_grants.iter().all(|(_, why)| !why.is_empty()));
}

#[test]
fn a_turn_cap_is_passed_as_max_tool_rounds() {
    let got = build(&AiSession {
        max_turns: Some(4),
        ..session()
    });
    assert_eq!(
        got,
        spec(&["-p", SENTENCE, "-d", "/work/repo", "--max-tool-rounds", "4"])
    );
}
