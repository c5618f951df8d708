//! The command lines the adapter builds, compared whole: plain, resume (which must not carry
//! `-C`, `-s` or `--add-dir`), every optional flag, each permission combination, the settings'
//! provider, retry caps, sandbox override and extra arguments, and the refusals. No argument may
//! hold the prompt, and the prompt marker `-` is always last.

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::PathBuf;
use std::time::Duration;

use corral_codex::adapter::{CAPABILITIES, CAPABILITIES_UNSANDBOXED};
use corral_codex::{CodexAdapter, CodexSettings, SandboxMode, default_tested_versions};
use corral_engine::{AttemptPlan, CliAdapter, CommandSpec, PromptDelivery};
use corral_ports::{
    AiSession, CostReporting, Effort, Gate, Permissions, PromptChannel, ProviderError, ProviderId,
    SessionId, SessionIdTiming,
};
use corral_test_support::session::{assert_prompt_not_in, session};

const HEAD: [&str; 5] = [
    "exec",
    "--json",
    "--skip-git-repo-check",
    "-c",
    "features.plugins=false",
];
const ID: &str = "01a22c60-7f01-7143-ad2a-26ff7d5b1e90";
// In workspace-write the network switch is always followed by the `/tmp` exclusion (Corral gives
// each run a private TMPDIR, and its bubblewrap backend keeps `/tmp` read-only).
const NET_ON: [&str; 4] = [
    "-c",
    "sandbox_workspace_write.network_access=true",
    "-c",
    "sandbox_workspace_write.exclude_slash_tmp=true",
];
const NET_OFF: [&str; 4] = [
    "-c",
    "sandbox_workspace_write.network_access=false",
    "-c",
    "sandbox_workspace_write.exclude_slash_tmp=true",
];

/// `-C /work/repo -s <mode>`, the head of a fresh run.
fn fresh(mode: &str) -> Vec<&str> {
    [HEAD.as_slice(), &["-C", "/work/repo", "-s", mode]].concat()
}

fn spec_for(program: &str, args: &[&str]) -> CommandSpec {
    CommandSpec {
        program: PathBuf::from(program),
        args: args.iter().map(OsString::from).collect(),
        env_set: Vec::new(),
        session_id: None,
    }
}

fn spec(args: &[&str]) -> CommandSpec {
    spec_for("codex", args)
}

fn id() -> SessionId {
    SessionId::new(ID).unwrap()
}

fn command(
    adapter: &CodexAdapter,
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
    assert_eq!(spec.args.last(), Some(&OsString::from("-")), "{spec:?}");
    if resume.is_some() {
        for flag in ["-C", "-s", "--add-dir", "--sandbox", "--cd", "--last"] {
            assert!(
                !spec.args.iter().any(|a| a == flag),
                "resume must not carry {flag}: {spec:?}"
            );
        }
    }
    Ok(spec)
}

fn build(session: &AiSession) -> CommandSpec {
    command(&CodexAdapter::default(), session, None).unwrap()
}

fn build_resumed(session: &AiSession) -> CommandSpec {
    command(&CodexAdapter::default(), session, Some(&id())).unwrap()
}

#[test]
fn plain_run_reads_the_prompt_from_stdin() {
    let adapter = CodexAdapter::default();
    assert_eq!(adapter.provider(), ProviderId::Codex);
    assert_eq!(adapter.prompt_delivery(), PromptDelivery::Stdin);
    assert_eq!(
        build(&session()),
        spec(
            &[
                fresh("workspace-write").as_slice(),
                // The run directory lies outside the working directory: opened for signals.json.
                &["--add-dir", "/runs/r1"],
                NET_ON.as_slice(),
                &["-"],
            ]
            .concat()
        )
    );
}

#[test]
fn resume_gives_the_sandbox_as_configuration_and_names_the_thread_last() {
    assert_eq!(
        build_resumed(&session()),
        spec(
            &[
                HEAD.as_slice(),
                &[
                    "-c",
                    "sandbox_mode=\"workspace-write\"",
                    "-c",
                    "sandbox_workspace_write.writable_roots=[\"/runs/r1\"]",
                ],
                NET_ON.as_slice(),
                &["resume", ID, "-"],
            ]
            .concat()
        )
    );
    // Read-only: no roots at all.
    let s = AiSession {
        permissions: Permissions {
            edit_files: false,
            ..Permissions::default()
        },
        ..session()
    };
    assert_eq!(
        build_resumed(&s),
        spec(
            &[
                HEAD.as_slice(),
                &["-c", "sandbox_mode=\"read-only\"", "resume", ID, "-"]
            ]
            .concat()
        )
    );
}

#[test]
fn model_effort_and_extra_roots_fresh_and_resumed() {
    let s = AiSession {
        model: Some("gpt-5.5".into()),
        effort: Some(Effort::High),
        extra_roots: vec![PathBuf::from("/srv/shared lib"), PathBuf::from("/a=b")],
        ..session()
    };
    assert_eq!(
        build(&s),
        spec(
            &[
                fresh("workspace-write").as_slice(),
                &[
                    "--add-dir",
                    "/srv/shared lib",
                    "--add-dir",
                    "/a=b",
                    "--add-dir",
                    "/runs/r1",
                    "-m",
                    "gpt-5.5",
                    "-c",
                    "model_reasoning_effort=\"high\"",
                ],
                NET_ON.as_slice(),
                &["-"],
            ]
            .concat()
        )
    );
    assert_eq!(
        build_resumed(&s),
        spec(
            &[
                HEAD.as_slice(),
                &[
                    "-m",
                    "gpt-5.5",
                    "-c",
                    "model_reasoning_effort=\"high\"",
                    "-c",
                    "sandbox_mode=\"workspace-write\"",
                    "-c",
                    "sandbox_workspace_write.writable_roots=[\"/srv/shared lib\",\"/a=b\",\"/runs/r1\"]",
                ],
                NET_ON.as_slice(),
                &["resume", ID, "-"],
            ]
            .concat()
        )
    );
    for (effort, word) in [
        (Effort::Low, "model_reasoning_effort=\"low\""),
        (Effort::Medium, "model_reasoning_effort=\"medium\""),
        (Effort::High, "model_reasoning_effort=\"high\""),
    ] {
        let got = build(&AiSession {
            effort: Some(effort),
            ..session()
        });
        assert_eq!(
            got,
            spec(
                &[
                    fresh("workspace-write").as_slice(),
                    &["--add-dir", "/runs/r1", "-c", word],
                    NET_ON.as_slice(),
                    &["-"],
                ]
                .concat()
            )
        );
    }
}

#[test]
fn the_signals_folder_is_opened_only_when_nothing_covers_it() {
    // Inside the working directory.
    let inside = AiSession {
        signals_file: PathBuf::from("/work/repo/.corral/r1/signals.json"),
        ..session()
    };
    assert_eq!(
        build(&inside),
        spec(
            &[
                fresh("workspace-write").as_slice(),
                NET_ON.as_slice(),
                &["-"]
            ]
            .concat()
        )
    );
    // Inside an extra root.
    let in_root = AiSession {
        extra_roots: vec![PathBuf::from("/runs")],
        ..session()
    };
    assert_eq!(
        build(&in_root),
        spec(
            &[
                fresh("workspace-write").as_slice(),
                &["--add-dir", "/runs"],
                NET_ON.as_slice(),
                &["-"],
            ]
            .concat()
        )
    );
    // A sibling whose name merely starts like the working directory is not inside it.
    let sibling = AiSession {
        signals_file: PathBuf::from("/work/repo-runs/signals.json"),
        ..session()
    };
    assert_eq!(
        build(&sibling),
        spec(
            &[
                fresh("workspace-write").as_slice(),
                &["--add-dir", "/work/repo-runs"],
                NET_ON.as_slice(),
                &["-"],
            ]
            .concat()
        )
    );
}

/// `(edit_files, run_shell, web_access)`.
type Gates = (bool, bool, bool);

#[test]
fn each_permission_combination() {
    let ws = || {
        [
            fresh("workspace-write").as_slice(),
            &["--add-dir", "/runs/r1"],
        ]
        .concat()
    };
    let ro = || fresh("read-only");
    let no_shell: &[&str] = &["--disable", "shell_tool"];
    let no_web: &[&str] = &["-c", "web_search=\"disabled\""];
    let cases: [(Gates, Vec<&str>); 8] = [
        ((true, true, true), [ws().as_slice(), &NET_ON].concat()),
        ((false, true, true), ro()),
        (
            (true, false, true),
            [ws().as_slice(), no_shell, &NET_ON].concat(),
        ),
        (
            (true, true, false),
            [ws().as_slice(), no_web, &NET_OFF].concat(),
        ),
        ((false, false, true), [ro().as_slice(), no_shell].concat()),
        ((false, true, false), [ro().as_slice(), no_web].concat()),
        (
            (true, false, false),
            [ws().as_slice(), no_shell, no_web, &NET_OFF].concat(),
        ),
        (
            (false, false, false),
            [ro().as_slice(), no_shell, no_web].concat(),
        ),
    ];
    for ((edit_files, run_shell, web_access), mut expected) in cases {
        let s = AiSession {
            permissions: Permissions {
                edit_files,
                run_shell,
                web_access,
            },
            ..session()
        };
        expected.push("-");
        assert_eq!(
            build(&s),
            spec(&expected),
            "edit_files={edit_files} run_shell={run_shell} web_access={web_access}"
        );
    }
}

#[test]
fn settings_supply_program_model_provider_retry_caps_and_extra_args() {
    let adapter = CodexAdapter::new(CodexSettings {
        command: PathBuf::from("/opt/codex/bin/codex"),
        model: Some("gpt-5.5".into()),
        model_provider: Some("fake".into()),
        request_max_retries: 1,
        extra_args: vec![
            "-c".into(),
            "model_providers.fake.stream_idle_timeout_ms=10000".into(),
        ],
        ..CodexSettings::default()
    });
    let provider = [
        "-c",
        "model_provider=\"fake\"",
        "-c",
        "model_providers.fake.request_max_retries=1",
        "-c",
        "model_providers.fake.stream_max_retries=0",
        "-c",
        "model_providers.fake.stream_idle_timeout_ms=10000",
    ];
    let expected = |model: &str| {
        spec_for(
            "/opt/codex/bin/codex",
            &[
                fresh("workspace-write").as_slice(),
                &["--add-dir", "/runs/r1", "-m", model],
                NET_ON.as_slice(),
                provider.as_slice(),
                &["-"],
            ]
            .concat(),
        )
    };
    assert_eq!(
        command(&adapter, &session(), None).unwrap(),
        expected("gpt-5.5")
    );
    // The session's model wins over the settings' default.
    let s = AiSession {
        model: Some("o4-mini".into()),
        ..session()
    };
    assert_eq!(command(&adapter, &s, None).unwrap(), expected("o4-mini"));
    // Resumed: the extra arguments stay before `resume`, where every option goes.
    let resumed = command(&adapter, &session(), Some(&id())).unwrap();
    assert_eq!(
        resumed,
        spec_for(
            "/opt/codex/bin/codex",
            &[
                HEAD.as_slice(),
                &[
                    "-m",
                    "gpt-5.5",
                    "-c",
                    "sandbox_mode=\"workspace-write\"",
                    "-c",
                    "sandbox_workspace_write.writable_roots=[\"/runs/r1\"]",
                ],
                NET_ON.as_slice(),
                provider.as_slice(),
                &["resume", ID, "-"],
            ]
            .concat()
        )
    );
}

#[test]
fn built_in_providers_get_no_retry_tables() {
    // Codex refuses `[model_providers.openai]`: naming the provider is all the adapter does.
    for builtin in ["openai", "ollama"] {
        let adapter = CodexAdapter::new(CodexSettings {
            model_provider: Some(builtin.into()),
            ..CodexSettings::default()
        });
        let provider = format!("model_provider=\"{builtin}\"");
        assert_eq!(
            command(&adapter, &session(), None).unwrap(),
            spec(
                &[
                    fresh("workspace-write").as_slice(),
                    &["--add-dir", "/runs/r1"],
                    NET_ON.as_slice(),
                    &["-c", provider.as_str(), "-"],
                ]
                .concat()
            )
        );
    }
}

#[test]
fn the_sandbox_override_wins_over_the_permissions() {
    let unsandboxed = CodexAdapter::new(CodexSettings {
        sandbox: Some(SandboxMode::DangerFullAccess),
        ..CodexSettings::default()
    });
    let s = AiSession {
        permissions: Permissions {
            edit_files: false,
            run_shell: true,
            web_access: false,
        },
        extra_roots: vec![PathBuf::from("/srv/lib")],
        ..session()
    };
    assert_eq!(
        command(&unsandboxed, &s, None).unwrap(),
        spec(
            &[
                fresh("danger-full-access").as_slice(),
                &["-c", "web_search=\"disabled\"", "-"]
            ]
            .concat()
        )
    );
    assert_eq!(unsandboxed.capabilities(), CAPABILITIES_UNSANDBOXED);

    let writable = CodexAdapter::new(CodexSettings {
        sandbox: Some(SandboxMode::WorkspaceWrite),
        ..CodexSettings::default()
    });
    let read_only_session = AiSession {
        permissions: Permissions {
            edit_files: false,
            ..Permissions::default()
        },
        ..session()
    };
    assert_eq!(
        command(&writable, &read_only_session, None).unwrap(),
        spec(
            &[
                fresh("workspace-write").as_slice(),
                &["--add-dir", "/runs/r1"],
                NET_ON.as_slice(),
                &["-"],
            ]
            .concat()
        )
    );
    assert_eq!(writable.capabilities(), CAPABILITIES);
}

#[test]
fn malformed_intent_is_refused_before_a_spawn() {
    let invalid = |reason: &str| ProviderError::InvalidSession {
        provider: ProviderId::Codex,
        reason: reason.into(),
        hint: None,
    };
    let cases = [
        (
            AiSession {
                model: Some("--dangerously-bypass-approvals-and-sandbox".into()),
                ..session()
            },
            invalid(
                "model name \"--dangerously-bypass-approvals-and-sandbox\" is empty or starts with '-'",
            ),
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
        (
            AiSession {
                extra_roots: vec![PathBuf::from("-rf")],
                ..session()
            },
            invalid("extra root -rf starts with '-'"),
        ),
    ];
    for (s, expected) in cases {
        let got = command(&CodexAdapter::default(), &s, None).unwrap_err();
        assert_eq!(got.to_string(), expected.to_string());
    }
    // A provider id that is not a bare configuration key.
    let adapter = CodexAdapter::new(CodexSettings {
        model_provider: Some("my.provider".into()),
        ..CodexSettings::default()
    });
    assert_eq!(
        command(&adapter, &session(), None).unwrap_err().to_string(),
        invalid(
            "model provider id \"my.provider\" must be letters, digits, '_' and '-' (a bare key \
             of Codex's configuration)"
        )
        .to_string()
    );
    // A writable root that is not UTF-8 cannot be written into `-c` when resuming (fresh runs
    // pass it to --add-dir as it is).
    let s = AiSession {
        extra_roots: vec![PathBuf::from(OsString::from_vec(b"/srv/\xff".to_vec()))],
        ..session()
    };
    assert!(command(&CodexAdapter::default(), &s, None).is_ok());
    let err = command(&CodexAdapter::default(), &s, Some(&id())).unwrap_err();
    assert!(err.to_string().contains("is not UTF-8"), "{err}");
}

#[test]
fn paths_are_quoted_as_toml_when_resuming() {
    let s = AiSession {
        extra_roots: vec![PathBuf::from("/srv/a \"b\"\\c")],
        ..session()
    };
    let args = build_resumed(&s).args;
    assert!(
        args.contains(&OsString::from(
            r#"sandbox_workspace_write.writable_roots=["/srv/a \"b\"\\c","/runs/r1"]"#
        )),
        "{args:?}"
    );
}

#[test]
fn version_check_uses_the_tested_range() {
    let check = CodexAdapter::default().version_check().unwrap();
    assert_eq!(check.program, PathBuf::from("codex"));
    assert_eq!(check.args, ["--version"]);
    assert_eq!(check.required, default_tested_versions());
    assert_eq!(check.required.to_string(), ">=0.171.0, <0.172.0");
    assert_eq!(check.timeout, Duration::from_secs(60));
    assert!(!check.allow_mismatch);
    assert!(check.required.matches(&semver::Version::new(0, 171, 0)));
    assert!(!check.required.matches(&semver::Version::new(0, 172, 0)));
    assert!(!check.required.matches(&semver::Version::new(0, 170, 9)));

    let overridden = CodexAdapter::new(CodexSettings {
        allow_untested_version: true,
        version_timeout: Duration::from_secs(3),
        ..CodexSettings::default()
    })
    .version_check()
    .unwrap();
    assert!(overridden.allow_mismatch);
    assert_eq!(overridden.timeout, Duration::from_secs(3));
}

#[test]
fn the_capability_row() {
    let row = CodexAdapter::default().capabilities();
    assert_eq!(row, CAPABILITIES);
    assert_eq!(row.prompt, PromptChannel::Stdin);
    assert_eq!(row.session_id, SessionIdTiming::FirstLine);
    assert!(row.resume && row.effort && row.streaming);
    assert_eq!(row.cost, CostReporting::TokensOnly);
    assert_eq!(row.enforced_gates, [Gate::RunShell, Gate::WebAccess]);
    let over: Vec<Gate> = row.over_grants.iter().map(|(g, _)| *g).collect();
    assert_eq!(over, [Gate::EditFiles, Gate::ExtraRoots]);
    // Every gate is either enforced or named, never both.
    for gate in [
        Gate::EditFiles,
        Gate::RunShell,
        Gate::WebAccess,
        Gate::ExtraRoots,
    ] {
        for row in [CAPABILITIES, CAPABILITIES_UNSANDBOXED] {
            let enforced = row.enforced_gates.contains(&gate);
            let named = row.over_grants.iter().any(|(g, _)| *g == gate);
            assert!(enforced != named, "{gate:?} in {row:?}");
        }
    }
}

#[test]
fn a_turn_cap_is_refused_because_codex_exec_has_none() {
    let s = AiSession {
        max_turns: Some(3),
        ..session()
    };
    let err = command(&CodexAdapter::default(), &s, None).unwrap_err();
    assert!(
        matches!(err, ProviderError::InvalidSession { .. })
            && err
                .to_string()
                .contains("max_turns 3 cannot be enforced: `codex exec` has no turn limit"),
        "{err}"
    );
}
