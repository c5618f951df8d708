//! The command lines the adapter builds, compared whole: `-p ""` with the prompt on stdin,
//! stream-json, `--skip-trust`, YOLO, the run directory included for `signals.json`, the resume
//! spelling, the model; the refusals (spending cap, turn cap, flag-like model). No argument may
//! hold the prompt.

use std::ffi::OsString;

use corral_engine::{CliAdapter, CommandSpec, PromptDelivery};
use corral_gemini::{GeminiAdapter, GeminiSettings};
use corral_ports::{AiSession, Permissions, ProviderError, ProviderId, SessionId};
use corral_test_support::session::{assert_prompt_not_in, session};

use crate::support::plan;

fn command(session: &AiSession, resume: Option<&SessionId>) -> Result<CommandSpec, ProviderError> {
    let spec = GeminiAdapter::default().command(&plan(session, resume))?;
    assert_prompt_not_in(&spec.args);
    Ok(spec)
}

fn args(list: &[&str]) -> Vec<OsString> {
    list.iter().map(OsString::from).collect()
}

const BASE: &[&str] = &[
    "-p",
    "",
    "--output-format",
    "stream-json",
    "--skip-trust",
    "--approval-mode",
    "yolo",
];

#[test]
fn a_new_session_runs_headless_with_the_prompt_on_stdin_and_the_run_directory_included() {
    let spec = command(&session(), None).unwrap();
    let mut expected = args(BASE);
    expected.push("--include-directories=/runs/r1".into());
    assert_eq!(spec.program, std::path::PathBuf::from("gemini"));
    assert_eq!(spec.args, expected);
    assert_eq!(
        GeminiAdapter::default().prompt_delivery(),
        PromptDelivery::Stdin
    );
}

#[test]
fn a_resume_names_the_session_uuid_and_a_model_follows() {
    let mut s = session();
    s.model = Some("gemini-2.5-pro".into());
    let id = SessionId::new("fd47ad41-048d-407e-9378-585feeb40cd1").unwrap();
    let spec = command(&s, Some(&id)).unwrap();
    let mut expected = args(BASE);
    expected.extend(args(&[
        "--resume",
        "fd47ad41-048d-407e-9378-585feeb40cd1",
        "-m",
        "gemini-2.5-pro",
        "--include-directories=/runs/r1",
    ]));
    assert_eq!(spec.args, expected);
}

#[test]
fn a_read_only_session_still_runs_in_yolo_because_plan_mode_refuses_signals_json() {
    let mut s = session();
    s.permissions = Permissions {
        edit_files: false,
        run_shell: false,
        web_access: false,
    };
    let spec = command(&s, None).unwrap();
    assert!(
        spec.args
            .windows(2)
            .any(|w| w == args(&["--approval-mode", "yolo"]))
    );
}

#[test]
fn extra_arguments_come_last() {
    let adapter = GeminiAdapter::new(GeminiSettings {
        extra_args: vec!["--debug".into()],
        ..GeminiSettings::default()
    });
    let spec = adapter.command(&plan(&session(), None)).unwrap();
    assert_eq!(spec.args.last(), Some(&OsString::from("--debug")));
}

#[test]
fn caps_gemini_cannot_enforce_and_flag_like_models_are_refused() {
    let mut budget = session();
    budget.max_budget_usd = Some(1.0);
    let mut turns = session();
    turns.max_turns = Some(3);
    let mut model = session();
    model.model = Some("--yolo".into());
    for s in [budget, turns, model] {
        match command(&s, None) {
            Err(ProviderError::InvalidSession { provider, .. }) => {
                assert_eq!(provider, ProviderId::Gemini);
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
    }
}

#[test]
fn the_interactive_command_opens_with_the_pointer_and_asks_before_shell_commands() {
    let pointer = corral_engine::PromptPointer {
        path: std::path::PathBuf::from("/runs/r1/prompt.md"),
        sentence: "Your task is in /runs/r1/prompt.md.".to_string(),
    };
    let s = session();
    let id = SessionId::new("fd47ad41-048d-407e-9378-585feeb40cd1").unwrap();
    let plan = corral_engine::AttemptPlan {
        session: &s,
        resume: Some(&id),
        attempt: 1,
        pointer: Some(&pointer),
    };
    let spec = GeminiAdapter::default().interactive_command(&plan).unwrap();
    assert_eq!(
        spec.args,
        args(&[
            "--resume",
            "fd47ad41-048d-407e-9378-585feeb40cd1",
            "--skip-trust",
            "--approval-mode",
            "auto_edit",
            "--include-directories=/runs/r1",
            "-i",
            "Your task is in /runs/r1/prompt.md.",
        ])
    );
    assert_eq!(spec.session_id, Some(id));
}
