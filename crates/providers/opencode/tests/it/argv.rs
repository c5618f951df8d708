//! The command lines the adapter builds, compared whole: plain, resume, model, effort, `--auto`,
//! extra arguments, a relative working directory, and the refusals. No argument may hold the
//! prompt, and the capability row says what OpenCode enforces (nothing) and over-grants.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use corral_engine::{AttemptPlan, CliAdapter, CommandSpec, Liveness, PromptDelivery};
use corral_opencode::adapter::CAPABILITIES;
use corral_opencode::{OpencodeAdapter, OpencodeSettings, default_tested_versions};
use corral_ports::{
    AiSession, CostReporting, Effort, Gate, Permissions, PromptChannel, ProviderError, ProviderId,
    SessionId, SessionIdTiming,
};
use corral_test_support::session::{assert_prompt_not_in, session};

/// `run --format json --thinking --dir /work/repo`.
const HEAD: [&str; 6] = [
    "run",
    "--format",
    "json",
    "--thinking",
    "--dir",
    "/work/repo",
];

fn env_set() -> Vec<(String, String)> {
    vec![
        ("OPENCODE_DISABLE_AUTOUPDATE".into(), "1".into()),
        ("OPENCODE_DISABLE_SHARE".into(), "1".into()),
    ]
}

fn spec(args: &[&str]) -> CommandSpec {
    CommandSpec {
        program: PathBuf::from("opencode"),
        args: args.iter().map(OsString::from).collect(),
        env_set: env_set(),
        session_id: None,
    }
}

fn command(
    adapter: &OpencodeAdapter,
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
    command(&OpencodeAdapter::default(), session, None).unwrap()
}

fn auto_adapter() -> OpencodeAdapter {
    OpencodeAdapter::new(OpencodeSettings {
        auto_approve: true,
        ..OpencodeSettings::default()
    })
}

#[test]
fn plain_run_reads_the_prompt_from_stdin() {
    let adapter = OpencodeAdapter::default();
    assert_eq!(adapter.provider(), ProviderId::Opencode);
    assert_eq!(adapter.prompt_delivery(), PromptDelivery::Stdin);
    // OpenCode prints nothing until the model's first step is complete: the default liveness,
    // any byte of output, with an idle limit that outlasts one step.
    assert_eq!(adapter.liveness(), Liveness::Output);
    assert_eq!(build(&session()), spec(&HEAD));
}

#[test]
fn resume_names_the_session() {
    let id = SessionId::new("ses_dd39e014effe6cW6RO6Os9NZ2i").unwrap();
    let got = command(&OpencodeAdapter::default(), &session(), Some(&id)).unwrap();
    assert_eq!(
        got,
        spec(&[HEAD.as_slice(), &["-s", "ses_dd39e014effe6cW6RO6Os9NZ2i"]].concat())
    );
}

#[test]
fn model_and_effort() {
    let s = AiSession {
        model: Some("anthropic/claude-sonnet-4-5".into()),
        effort: Some(Effort::High),
        ..session()
    };
    assert_eq!(
        build(&s),
        spec(
            &[
                HEAD.as_slice(),
                &["-m", "anthropic/claude-sonnet-4-5", "--variant", "high"]
            ]
            .concat()
        )
    );
    // The model part may hold more slashes (OpenRouter names the upstream provider).
    let routed = AiSession {
        model: Some("openrouter/openai/gpt-5".into()),
        ..session()
    };
    assert_eq!(
        build(&routed),
        spec(&[HEAD.as_slice(), &["-m", "openrouter/openai/gpt-5"]].concat())
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
        assert_eq!(got, spec(&[HEAD.as_slice(), &["--variant", word]].concat()));
    }
}

#[test]
fn auto_only_when_the_settings_ask_for_it() {
    assert_eq!(
        command(&auto_adapter(), &session(), None).unwrap(),
        spec(&[HEAD.as_slice(), &["--auto"]].concat())
    );
    // Closed gates change nothing: OpenCode has no switch for them, so no flag appears and
    // `--auto` is never added on their account.
    let closed = AiSession {
        permissions: Permissions {
            edit_files: false,
            run_shell: false,
            web_access: false,
        },
        ..session()
    };
    assert_eq!(build(&closed), spec(&HEAD));
}

#[test]
fn extra_roots_need_auto_approve() {
    let s = AiSession {
        extra_roots: vec![PathBuf::from("/srv/shared lib")],
        ..session()
    };
    let refused = command(&OpencodeAdapter::default(), &s, None).unwrap_err();
    assert_eq!(
        refused.to_string(),
        "opencode: invalid session: extra roots [\"/srv/shared lib\"] cannot be opened: OpenCode \
         has no --add-dir and auto-rejects directories outside --dir in a headless run; set \
         providers.opencode.auto_approve to pass --auto, which approves every permission request \
         (any directory, not only these roots)"
    );
    assert!(!refused.is_retryable());
    // With the operator's consent the run goes ahead with --auto; the roots themselves have no
    // flag to go into.
    assert_eq!(
        command(&auto_adapter(), &s, None).unwrap(),
        spec(&[HEAD.as_slice(), &["--auto"]].concat())
    );
}

#[test]
fn every_flag_at_once_in_a_fixed_order() {
    let adapter = OpencodeAdapter::new(OpencodeSettings {
        command: PathBuf::from("/opt/opencode/bin/opencode"),
        model: Some("openai/gpt-5".into()),
        auto_approve: true,
        extra_args: vec!["--agent".into(), "build".into()],
        ..OpencodeSettings::default()
    });
    let id = SessionId::new("ses_abc").unwrap();
    let s = AiSession {
        effort: Some(Effort::Low),
        ..session()
    };
    let expected = |model: &str| CommandSpec {
        program: PathBuf::from("/opt/opencode/bin/opencode"),
        args: [
            HEAD.as_slice(),
            &[
                "-s",
                "ses_abc",
                "-m",
                model,
                "--variant",
                "low",
                "--auto",
                "--agent",
                "build",
            ],
        ]
        .concat()
        .iter()
        .map(OsString::from)
        .collect(),
        env_set: env_set(),
        session_id: None,
    };
    assert_eq!(
        command(&adapter, &s, Some(&id)).unwrap(),
        expected("openai/gpt-5")
    );
    // The session's model wins over the settings' default.
    let own_model = AiSession {
        model: Some("anthropic/claude-opus-4-1".into()),
        ..s
    };
    assert_eq!(
        command(&adapter, &own_model, Some(&id)).unwrap(),
        expected("anthropic/claude-opus-4-1")
    );
}

#[test]
fn a_relative_working_directory_is_made_absolute_for_dir() {
    let s = AiSession {
        cwd: PathBuf::from("some/repo"),
        ..session()
    };
    let got = build(&s);
    let dir = PathBuf::from(&got.args[5]);
    assert!(dir.is_absolute(), "{dir:?}");
    assert!(dir.ends_with("some/repo"), "{dir:?}");
    assert_eq!(dir, std::env::current_dir().unwrap().join("some/repo"));
}

#[test]
fn what_opencode_cannot_honour_is_refused_before_a_spawn() {
    let invalid = |reason: &str| {
        ProviderError::InvalidSession {
            provider: ProviderId::Opencode,
            reason: reason.into(),
            hint: None,
        }
        .to_string()
    };
    let spelling = |m: &str| {
        invalid(&format!(
            "model name {m:?} is not spelled provider/model (for example \
             anthropic/claude-sonnet-4-5), or starts with '-'"
        ))
    };
    let cases = [
        (
            AiSession {
                model: Some("claude-sonnet-4-5".into()),
                ..session()
            },
            spelling("claude-sonnet-4-5"),
        ),
        (
            AiSession {
                model: Some("--auto/x".into()),
                ..session()
            },
            spelling("--auto/x"),
        ),
        (
            AiSession {
                model: Some("anthropic/".into()),
                ..session()
            },
            spelling("anthropic/"),
        ),
        (
            AiSession {
                model: Some("/model".into()),
                ..session()
            },
            spelling("/model"),
        ),
        (
            AiSession {
                model: Some("openai/gpt 5".into()),
                ..session()
            },
            spelling("openai/gpt 5"),
        ),
        (
            AiSession {
                model: Some(String::new()),
                ..session()
            },
            spelling(""),
        ),
        (
            AiSession {
                max_budget_usd: Some(2.5),
                ..session()
            },
            invalid(
                "max_budget_usd 2.5 cannot be enforced: OpenCode has no spend cap; run without \
                 one or with a provider that has one",
            ),
        ),
    ];
    for (s, expected) in cases {
        let got = command(&auto_adapter(), &s, None).unwrap_err();
        assert_eq!(got.to_string(), expected);
    }
    // A malformed default model in the settings is refused the same way.
    let adapter = OpencodeAdapter::new(OpencodeSettings {
        model: Some("sonnet".into()),
        ..OpencodeSettings::default()
    });
    assert_eq!(
        command(&adapter, &session(), None).unwrap_err().to_string(),
        spelling("sonnet")
    );
}

#[test]
fn the_capability_row_enforces_nothing_and_names_every_over_grant() {
    let row = OpencodeAdapter::default().capabilities();
    assert_eq!(row, CAPABILITIES);
    assert_eq!(row.prompt, PromptChannel::Stdin);
    assert_eq!(row.session_id, SessionIdTiming::FirstEvent);
    assert!(row.resume);
    assert!(row.effort, "--variant carries the effort");
    assert_eq!(row.cost, CostReporting::TokensAndUsd);
    assert!(row.streaming);
    assert!(row.enforced_gates.is_empty());
    let named: Vec<Gate> = row.over_grants.iter().map(|(gate, _)| *gate).collect();
    assert_eq!(
        named,
        [
            Gate::EditFiles,
            Gate::RunShell,
            Gate::WebAccess,
            Gate::ExtraRoots
        ]
    );
    let extra_roots = row.over_grants[3].1;
    assert!(extra_roots.contains("--auto"), "{extra_roots}");
    assert!(extra_roots.contains("auto_approve"), "{extra_roots}");
}

#[test]
fn version_check_uses_the_tested_range() {
    let check = OpencodeAdapter::default().version_check().unwrap();
    assert_eq!(check.program, PathBuf::from("opencode"));
    assert_eq!(check.args, ["--version"]);
    assert_eq!(check.required, default_tested_versions());
    assert_eq!(check.required.to_string(), ">=1.18.0, <1.19.0");
    assert_eq!(check.timeout, Duration::from_secs(60));
    assert!(!check.allow_mismatch);
    assert!(check.required.matches(&semver::Version::new(1, 18, 33)));
    assert!(!check.required.matches(&semver::Version::new(1, 19, 0)));
    assert!(!check.required.matches(&semver::Version::new(1, 17, 9)));

    let overridden = OpencodeAdapter::new(OpencodeSettings {
        allow_untested_version: true,
        version_timeout: Duration::from_secs(3),
        ..OpencodeSettings::default()
    })
    .version_check()
    .unwrap();
    assert!(overridden.allow_mismatch);
    assert_eq!(overridden.timeout, Duration::from_secs(3));
}

#[test]
fn default_settings() {
    let s = OpencodeSettings::default();
    assert_eq!(s.command, PathBuf::from("opencode"));
    assert_eq!(s.model, None);
    assert!(s.extra_args.is_empty());
    assert!(!s.auto_approve);
    assert!(!s.allow_untested_version);
    assert_eq!(s.probe_timeout, Duration::from_secs(15));
    assert_eq!(s.version_timeout, Duration::from_secs(60));
}

#[test]
fn every_flag_the_adapter_writes_is_in_the_recorded_usage() {
    // OpenCode 1.18.33 printed its `run` usage when it rejected a flag; every flag the adapter can
    // write must be in it, or the version bump that drops one shows up here first.
    let usage = crate::support::SAMPLES.stderr_of("badflag");
    let adapter = OpencodeAdapter::new(OpencodeSettings {
        auto_approve: true,
        ..OpencodeSettings::default()
    });
    let id = SessionId::new("ses_abc").unwrap();
    let s = AiSession {
        model: Some("fake/fake-model".into()),
        effort: Some(Effort::Medium),
        ..session()
    };
    let spec = command(&adapter, &s, Some(&id)).unwrap();
    let flags: Vec<String> = spec
        .args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .filter(|a| a.starts_with('-'))
        .collect();
    assert_eq!(
        flags,
        [
            "--format",
            "--thinking",
            "--dir",
            "-s",
            "-m",
            "--variant",
            "--auto"
        ]
    );
    for flag in flags {
        let listed = usage
            .lines()
            .any(|line| line.split([' ', ',']).any(|word| word == flag.as_str()));
        assert!(listed, "{flag} is not in the recorded usage:\n{usage}");
    }
    assert!(usage.starts_with("opencode run [message..]"));
}

#[test]
fn a_turn_cap_is_refused_because_opencode_run_has_none() {
    let s = AiSession {
        max_turns: Some(3),
        ..session()
    };
    let err = command(&auto_adapter(), &s, None).unwrap_err();
    assert!(
        matches!(err, ProviderError::InvalidSession { .. })
            && err
                .to_string()
                .contains("max_turns 3 cannot be enforced: `opencode run` has no turn limit"),
        "{err}"
    );
}
