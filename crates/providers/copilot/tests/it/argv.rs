//! The command lines the adapter builds, compared whole: a fresh run with its minted session id, a
//! resume, every optional flag, each permission combination, extra arguments, the prompt pointer,
//! and the refusals. No argument may hold the prompt, and every flag must be one Copilot 1.0.102
//! lists in its `--help`.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use corral_copilot::adapter::{CAPABILITIES, PROMPT_FILE};
use corral_copilot::{CopilotAdapter, CopilotSettings, default_tested_versions};
use corral_engine::{
    AttemptPlan, CliAdapter, CommandSpec, PromptDelivery, PromptPointer, write_prompt_pointer,
};
use corral_ports::{
    AiSession, CostReporting, Effort, Gate, Permissions, PromptChannel, ProviderError, ProviderId,
    SessionId, SessionIdTiming,
};
use corral_test_support::session::{PROMPT, assert_prompt_not_in, session};

use crate::support::{FIXED_ID, SAMPLES, SENTENCE, adapter, pointer};

const HEAD: [&str; 7] = [
    "-p",
    SENTENCE,
    "--output-format",
    "json",
    "--no-auto-update",
    "--disable-client-telemetry",
    "--no-ask-user",
];
const SECRETS: &str = "--secret-env-vars=COPILOT_GITHUB_TOKEN,GH_TOKEN,GITHUB_TOKEN,COPILOT_PROVIDER_API_KEY,COPILOT_PROVIDER_BEARER_TOKEN";
const RUN_DIR: &str = "--add-dir=/runs/r1";

fn fresh_id() -> String {
    format!("--session-id={FIXED_ID}")
}

/// A fresh run's command: the minted id in argv and in `session_id`.
fn fresh(middle: &[&str], tail: &[&str]) -> CommandSpec {
    let id = fresh_id();
    let mut args: Vec<&str> = HEAD.to_vec();
    args.push(&id);
    args.extend_from_slice(middle);
    args.push(SECRETS);
    args.extend_from_slice(tail);
    CommandSpec {
        program: PathBuf::from("copilot"),
        args: args.iter().map(OsString::from).collect(),
        env_set: Vec::new(),
        session_id: Some(SessionId::new(FIXED_ID).unwrap()),
    }
}

fn command_with(
    adapter: &CopilotAdapter,
    session: &AiSession,
    resume: Option<&SessionId>,
    pointer: &PromptPointer,
) -> Result<CommandSpec, ProviderError> {
    let plan = AttemptPlan {
        session,
        resume,
        attempt: 1,
        pointer: Some(pointer),
    };
    let spec = adapter.command(&plan)?;
    assert_prompt_not_in(&spec.args);
    Ok(spec)
}

fn build(session: &AiSession) -> CommandSpec {
    command_with(
        &adapter(CopilotSettings::default()),
        session,
        None,
        &pointer(),
    )
    .unwrap()
}

#[test]
fn a_fresh_run_points_at_the_prompt_file_and_names_its_minted_session() {
    let adapter = adapter(CopilotSettings::default());
    assert_eq!(adapter.provider(), ProviderId::Copilot);
    assert_eq!(
        adapter.prompt_delivery(),
        PromptDelivery::PointerFile {
            file_name: "copilot-prompt.md"
        }
    );
    assert_eq!(PROMPT_FILE, "copilot-prompt.md");
    assert_eq!(
        build(&session()),
        fresh(&["--allow-all-tools", "--allow-all-urls"], &[RUN_DIR])
    );
}

#[test]
fn resume_uses_the_equals_form_and_mints_nothing() {
    let id = SessionId::new("226942f0-094f-484f-93be-2156381ad5d3").unwrap();
    let got = command_with(
        &adapter(CopilotSettings::default()),
        &session(),
        Some(&id),
        &pointer(),
    )
    .unwrap();
    let mut args: Vec<&str> = HEAD.to_vec();
    args.extend([
        "--resume=226942f0-094f-484f-93be-2156381ad5d3",
        "--allow-all-tools",
        "--allow-all-urls",
        SECRETS,
        RUN_DIR,
    ]);
    assert_eq!(
        got,
        CommandSpec {
            program: PathBuf::from("copilot"),
            args: args.iter().map(OsString::from).collect(),
            env_set: Vec::new(),
            session_id: None,
        }
    );
    assert!(
        !got.args
            .iter()
            .any(|a| a.to_string_lossy().starts_with("--session-id")),
        "a resume must not also name a new session"
    );
}

#[test]
fn each_fresh_attempt_mints_a_new_id() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU8, Ordering};

    let counter = Arc::new(AtomicU8::new(0));
    let source = {
        let counter = Arc::clone(&counter);
        corral_copilot::UuidSource::from_fn(
            move || Ok([counter.fetch_add(1, Ordering::SeqCst); 16]),
        )
    };
    let adapter = CopilotAdapter::with_uuid_source(CopilotSettings::default(), source);
    let s = session();
    let p = pointer();
    let first = command_with(&adapter, &s, None, &p).unwrap();
    let second = command_with(&adapter, &s, None, &p).unwrap();
    assert_eq!(
        first.session_id.unwrap().as_str(),
        "00000000-0000-4000-8000-000000000000"
    );
    assert_eq!(
        second.session_id.unwrap().as_str(),
        "01010101-0101-4101-8101-010101010101"
    );
    assert!(second.args.contains(&OsString::from(
        "--session-id=01010101-0101-4101-8101-010101010101"
    )));
}

#[test]
fn a_failing_id_source_is_an_io_error_before_a_spawn() {
    let adapter = CopilotAdapter::with_uuid_source(
        CopilotSettings::default(),
        corral_copilot::UuidSource::from_fn(|| Err(std::io::Error::other("no entropy"))),
    );
    match command_with(&adapter, &session(), None, &pointer()) {
        Err(ProviderError::Io {
            provider,
            path,
            reason,
        }) => {
            assert_eq!(provider, ProviderId::Copilot);
            assert_eq!(path, PathBuf::from("/dev/urandom"));
            assert_eq!(reason, "cannot mint a session id: no entropy");
        }
        other => panic!("expected an Io error, got {other:?}"),
    }
    // A resume needs no new id, so it still works.
    let id = SessionId::new(FIXED_ID).unwrap();
    assert!(command_with(&adapter, &session(), Some(&id), &pointer()).is_ok());
}

#[test]
fn the_real_pointer_names_the_prompt_file_and_its_directory_is_allowed() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let prompt = format!("{PROMPT}\n{}", "more of the task\n".repeat(5_000));
    let written = write_prompt_pointer(&run, PROMPT_FILE, &prompt).unwrap();
    let s = AiSession {
        signals_file: run.join("signals.json"),
        output_dir: run.clone(),
        ..session()
    };
    let spec = command_with(&adapter(CopilotSettings::default()), &s, None, &written).unwrap();
    assert_eq!(std::fs::read_to_string(&written.path).unwrap(), prompt);
    // The sentence is the one argument after -p, one line, naming the file.
    let args: Vec<String> = spec
        .args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    assert_eq!(args[0], "-p");
    assert_eq!(args[1], written.sentence);
    assert!(args[1].contains(&run.join("copilot-prompt.md").display().to_string()));
    assert!(!args[1].contains('\n'));
    // Copilot's path check admits the working directory only: the run directory is added.
    assert!(args.contains(&format!("--add-dir={}", run.display())));
    let total: usize = args.iter().map(String::len).sum();
    assert!(total < 2048, "argv is {total} bytes for a large prompt");
}

#[test]
fn a_run_directory_inside_the_working_directory_is_not_added() {
    let s = AiSession {
        signals_file: PathBuf::from("/work/repo/.corral/r1/signals.json"),
        output_dir: PathBuf::from("/work/repo/.corral/r1"),
        ..session()
    };
    let inside = PromptPointer {
        path: PathBuf::from("/work/repo/.corral/r1/copilot-prompt.md"),
        sentence: SENTENCE.to_string(),
    };
    let got = command_with(&adapter(CopilotSettings::default()), &s, None, &inside).unwrap();
    assert_eq!(got, fresh(&["--allow-all-tools", "--allow-all-urls"], &[]));
}

#[test]
fn model_effort_and_roots() {
    let s = AiSession {
        model: Some("claude-sonnet-4.6".into()),
        effort: Some(Effort::High),
        extra_roots: vec![
            PathBuf::from("/srv/shared lib"),
            PathBuf::from("/a=b"),
            PathBuf::from("/runs/r1"),
        ],
        // Copilot caps spend in AI credits, not dollars: not forwarded.
        max_budget_usd: Some(2.5),
        ..session()
    };
    assert_eq!(
        build(&s),
        fresh(
            &["--allow-all-tools", "--allow-all-urls"],
            &[
                "--model=claude-sonnet-4.6",
                "--reasoning-effort=high",
                RUN_DIR,
                "--add-dir=/srv/shared lib",
                "--add-dir=/a=b",
            ]
        )
    );
    for (effort, word) in [
        (Effort::Low, "--reasoning-effort=low"),
        (Effort::Medium, "--reasoning-effort=medium"),
        (Effort::High, "--reasoning-effort=high"),
    ] {
        let got = build(&AiSession {
            effort: Some(effort),
            ..session()
        });
        assert_eq!(
            got,
            fresh(&["--allow-all-tools", "--allow-all-urls"], &[word, RUN_DIR])
        );
    }
}

#[test]
fn each_permission_combination() {
    // (edit_files, run_shell, web_access) and the permission flags they give.
    type Case = ((bool, bool, bool), &'static [&'static str]);
    let cases: [Case; 8] = [
        (
            (true, true, true),
            &["--allow-all-tools", "--allow-all-urls"],
        ),
        (
            (false, true, true),
            &[
                "--allow-all-tools",
                "--allow-all-urls",
                "--excluded-tools=edit",
            ],
        ),
        (
            (true, false, true),
            &["--allow-all-tools", "--allow-all-urls", "--deny-tool=shell"],
        ),
        (
            (true, true, false),
            &[
                "--allow-all-tools",
                "--deny-tool=url",
                "--excluded-tools=web_fetch,web_search",
                "--disable-builtin-mcps",
            ],
        ),
        (
            (false, false, true),
            &[
                "--allow-all-tools",
                "--allow-all-urls",
                "--deny-tool=shell",
                "--excluded-tools=edit",
            ],
        ),
        (
            (false, true, false),
            &[
                "--allow-all-tools",
                "--deny-tool=url",
                "--excluded-tools=edit,web_fetch,web_search",
                "--disable-builtin-mcps",
            ],
        ),
        (
            (true, false, false),
            &[
                "--allow-all-tools",
                "--deny-tool=shell,url",
                "--excluded-tools=web_fetch,web_search",
                "--disable-builtin-mcps",
            ],
        ),
        (
            (false, false, false),
            &[
                "--allow-all-tools",
                "--deny-tool=shell,url",
                "--excluded-tools=edit,web_fetch,web_search",
                "--disable-builtin-mcps",
            ],
        ),
    ];
    for ((edit_files, run_shell, web_access), permission_args) in cases {
        let s = AiSession {
            permissions: Permissions {
                edit_files,
                run_shell,
                web_access,
            },
            ..session()
        };
        assert_eq!(
            build(&s),
            fresh(permission_args, &[RUN_DIR]),
            "edit_files={edit_files} run_shell={run_shell} web_access={web_access}"
        );
    }
}

#[test]
fn settings_supply_program_model_and_extra_args() {
    let adapter = adapter(CopilotSettings {
        command: PathBuf::from("/opt/copilot/bin/copilot"),
        model: Some("gpt-5.4".into()),
        extra_args: vec!["--no-custom-instructions".into(), "--log-level".into()],
        ..CopilotSettings::default()
    });
    let expected = |model: &str| {
        let mut spec = fresh(
            &["--allow-all-tools", "--allow-all-urls"],
            &[model, RUN_DIR, "--no-custom-instructions", "--log-level"],
        );
        spec.program = PathBuf::from("/opt/copilot/bin/copilot");
        spec
    };
    assert_eq!(
        command_with(&adapter, &session(), None, &pointer()).unwrap(),
        expected("--model=gpt-5.4")
    );
    // The session's model wins over the settings' default.
    let s = AiSession {
        model: Some("claude-opus-4.8".into()),
        ..session()
    };
    assert_eq!(
        command_with(&adapter, &s, None, &pointer()).unwrap(),
        expected("--model=claude-opus-4.8")
    );
}

#[test]
fn malformed_intent_is_refused_before_a_spawn() {
    let invalid = |reason: &str| ProviderError::InvalidSession {
        provider: ProviderId::Copilot,
        reason: reason.into(),
        hint: None,
    };
    let cases = [
        (
            AiSession {
                model: Some("--yolo".into()),
                ..session()
            },
            invalid("model name \"--yolo\" is empty or starts with '-'"),
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
                extra_roots: vec![PathBuf::new()],
                ..session()
            },
            invalid("an extra root is an empty path"),
        ),
    ];
    let adapter = adapter(CopilotSettings::default());
    for (s, expected) in cases {
        let got = command_with(&adapter, &s, None, &pointer()).unwrap_err();
        assert_eq!(got.to_string(), expected.to_string());
    }
    // Without the engine's pointer there is no prompt to give.
    let s = session();
    let plan = AttemptPlan {
        session: &s,
        resume: None,
        attempt: 1,
        pointer: None,
    };
    assert_eq!(
        adapter.command(&plan).unwrap_err().to_string(),
        invalid("no prompt pointer: Copilot takes its prompt through copilot-prompt.md")
            .to_string()
    );
}

#[test]
fn every_flag_is_one_copilot_1_0_102_lists() {
    let help = std::fs::read_to_string(SAMPLES.dir().join("help-1.0.102.txt")).unwrap();
    let listed = |flag: &str| {
        help.lines()
            .any(|line| line.trim_start().split([' ', ',']).any(|word| word == flag))
    };
    let everything = AiSession {
        model: Some("gpt-5.4".into()),
        effort: Some(Effort::Low),
        extra_roots: vec![PathBuf::from("/srv")],
        permissions: Permissions {
            edit_files: false,
            run_shell: false,
            web_access: false,
        },
        ..session()
    };
    let id = SessionId::new(FIXED_ID).unwrap();
    let mut flags: Vec<String> = Vec::new();
    for (s, resume) in [
        (&everything, None),
        (&everything, Some(&id)),
        (&session(), None),
    ] {
        let spec =
            command_with(&adapter(CopilotSettings::default()), s, resume, &pointer()).unwrap();
        for arg in spec.args {
            let arg = arg.to_string_lossy().into_owned();
            if arg.starts_with('-') {
                let flag = arg.split('=').next().unwrap().to_string();
                if !flags.contains(&flag) {
                    flags.push(flag);
                }
            }
        }
    }
    assert_eq!(flags.len(), 16, "{flags:?}");
    for flag in flags {
        assert!(listed(&flag), "{flag} is not in copilot 1.0.102 --help");
    }
}

#[test]
fn capabilities_name_the_pointer_the_minted_id_and_the_over_grants() {
    let caps = adapter(CopilotSettings::default()).capabilities();
    assert_eq!(caps, CAPABILITIES);
    assert_eq!(caps.prompt, PromptChannel::PointerFile);
    assert_eq!(caps.session_id, SessionIdTiming::MintedUpFront);
    assert!(caps.resume);
    assert!(caps.effort);
    assert_eq!(caps.cost, CostReporting::PremiumRequests);
    assert!(caps.streaming);
    assert_eq!(caps.enforced_gates, &[Gate::RunShell, Gate::WebAccess]);
    let over: Vec<Gate> = caps.over_grants.iter().map(|(g, _)| *g).collect();
    assert_eq!(over, [Gate::EditFiles, Gate::ExtraRoots]);
    assert!(caps.over_grants[0].1.contains("create stays allowed"));
}

#[test]
fn version_check_uses_the_tested_range() {
    let check = CopilotAdapter::default().version_check().unwrap();
    assert_eq!(check.program, PathBuf::from("copilot"));
    assert_eq!(check.args, ["--version"]);
    assert_eq!(check.required, default_tested_versions());
    assert_eq!(check.required.to_string(), ">=1.0.0, <1.1.0");
    assert_eq!(check.timeout, Duration::from_secs(60));
    assert!(!check.allow_mismatch);
    assert!(check.required.matches(&semver::Version::new(1, 0, 102)));
    assert!(!check.required.matches(&semver::Version::new(1, 1, 0)));
    assert!(!check.required.matches(&semver::Version::new(0, 0, 400)));

    let overridden = CopilotAdapter::new(CopilotSettings {
        allow_untested_version: true,
        version_timeout: Duration::from_secs(3),
        ..CopilotSettings::default()
    })
    .version_check()
    .unwrap();
    assert!(overridden.allow_mismatch);
    assert_eq!(overridden.timeout, Duration::from_secs(3));
}

#[test]
fn a_turn_cap_is_refused_because_copilot_has_none() {
    let s = AiSession {
        max_turns: Some(3),
        ..session()
    };
    let err = command_with(&adapter(CopilotSettings::default()), &s, None, &pointer()).unwrap_err();
    assert!(
        matches!(err, ProviderError::InvalidSession { .. })
            && err
                .to_string()
                .contains("max_turns 3 cannot be enforced: `copilot -p` has no turn limit"),
        "{err}"
    );
}
