//! The real GitHub Copilot CLI (1.0.102, pinned in `PINNED_CLIS`, installed with npm on first use)
//! driven by the fake model API over streaming Chat Completions, offline through BYOK: a text reply
//! (the session id arrives on the last line only), `--session-id <uuid>` choosing the id up front,
//! its `create` tool writing `signals.json`, and `--resume=<id>` re-sending the history.
//!
//! Recipe: `COPILOT_OFFLINE=true`, `COPILOT_PROVIDER_BASE_URL=<url>/v1`,
//! `COPILOT_PROVIDER_API_KEY=sk-test`, `COPILOT_MODEL=fake-model`; `copilot --no-auto-update
//! --disable-client-telemetry -p "<prompt>" --output-format json --allow-all-tools` with stdin
//! closed. The first run in a `HOME` unpacks ~235 MB into `~/.cache/copilot/pkg`, so every test here
//! shares one `HOME`, `<workspace>/target/copilot-home/`, and holds an exclusive lock on
//! `<workspace>/target/copilot-home.lock` while it runs (parallel tests, nextest processes).

// The helpers outside `#[test]` functions are test code too (clippy only exempts the test fns).
#![allow(clippy::expect_used, clippy::panic, clippy::unwrap_used)]

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};

use corral_test_support::fake_api::{Endpoint, FakeApi, Scenario, Step};
use corral_test_support::{require_cli, workspace_root};
use nix::fcntl::{Flock, FlockArg};

use super::cli_run::{Run, command, report, run, signals_prompt, uuid_v4};

/// The shared `HOME`, held exclusively while a test uses it.
struct SharedHome {
    path: PathBuf,
    _lock: Flock<File>,
}

fn shared_home() -> SharedHome {
    let target = workspace_root().join("target");
    let path = target.join("copilot-home");
    std::fs::create_dir_all(&path).unwrap();
    let lock = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(target.join("copilot-home.lock"))
        .unwrap();
    let lock = Flock::lock(lock, FlockArg::LockExclusive)
        .map_err(|(_, errno)| errno)
        .unwrap();
    SharedHome { path, _lock: lock }
}

/// Runs `copilot --no-auto-update --disable-client-telemetry -p <prompt> --output-format json
/// --allow-all-tools <extra>` in `cwd` with stdin closed.
fn copilot(api: &FakeApi, home: &SharedHome, cwd: &Path, prompt: &str, extra: &[&str]) -> Run {
    let bin = require_cli("copilot");
    let unpacked = home.path.join(".cache/copilot/pkg").is_dir();
    let mut cmd = command(&bin, &home.path, cwd);
    cmd.env("COPILOT_OFFLINE", "true")
        .env("COPILOT_PROVIDER_BASE_URL", api.url_v1())
        .env("COPILOT_PROVIDER_API_KEY", "sk-test")
        .env("COPILOT_MODEL", "fake-model")
        .args([
            "--no-auto-update",
            "--disable-client-telemetry",
            "-p",
            prompt,
            "--output-format",
            "json",
            "--allow-all-tools",
        ])
        .args(extra);
    let run = run(cmd, None);
    if !unpacked {
        eprintln!(
            "copilot_cli: first run in {} (unpacks ~/.cache/copilot/pkg): {:.2}s",
            home.path.display(),
            run.elapsed.as_secs_f64()
        );
    }
    run
}

fn session_id(run: &Run) -> String {
    run.last("result")["sessionId"]
        .as_str()
        .unwrap_or_else(|| panic!("no sessionId on the result line: {run:#?}"))
        .to_owned()
}

fn assistant_texts(run: &Run) -> Vec<&str> {
    run.all("assistant.message")
        .into_iter()
        .filter_map(|l| l["data"]["content"].as_str())
        .filter(|text| !text.is_empty())
        .collect()
}

#[test]
fn a_text_reply_ends_in_a_result_line_with_the_session_id() {
    let home = shared_home();
    let api = FakeApi::start(Scenario::script([Step::text("Hello from the fake API.")])).unwrap();
    let cwd = tempfile::tempdir().unwrap();
    let run = copilot(&api, &home, cwd.path(), "say hi", &[]);
    report("copilot_cli::text", &[&run], &api);

    run.assert_exit(0);
    let result = run.lines.last().unwrap_or_else(|| panic!("{run:#?}"));
    assert_eq!(result["type"], "result", "{run:#?}");
    assert_eq!(result["exitCode"], 0, "{result}");
    assert!(!session_id(&run).is_empty());
    assert_eq!(assistant_texts(&run), ["Hello from the fake API."]);

    let requests = api.model_requests();
    assert_eq!(requests.len(), 1, "{requests:#?}");
    let request = &requests[0];
    assert_eq!(request.path, "/v1/chat/completions");
    assert_eq!(request.endpoint, Endpoint::ChatCompletions);
    assert!(request.stream);
    assert!(!request.history);
    assert_eq!(request.model.as_deref(), Some("fake-model"));
    assert!(request.tools.iter().any(|t| t == "create"), "{request:#?}");
    assert!(
        request
            .last_user_text
            .as_deref()
            .is_some_and(|t| t.ends_with("say hi")),
        "{request:#?}"
    );
    assert_eq!(request.auth.as_deref(), Some("bearer"));
}

#[test]
fn session_id_chooses_the_id_up_front() {
    let home = shared_home();
    let api = FakeApi::start(Scenario::script([Step::text("ok")])).unwrap();
    let cwd = tempfile::tempdir().unwrap();
    let id = uuid_v4();
    let run = copilot(&api, &home, cwd.path(), "hi", &["--session-id", &id]);
    report("copilot_cli::session_id", &[&run], &api);

    run.assert_exit(0);
    assert_eq!(session_id(&run), id);
}

#[test]
fn the_create_tool_writes_signals_json() {
    let home = shared_home();
    let cwd = tempfile::tempdir().unwrap();
    let signals = cwd.path().join("signals.json");
    let content = "{\"signal\": \"go\", \"n\": 1}";
    let api = FakeApi::start(Scenario::script([
        Step::write_signals_with("create", content),
        Step::text("Created signals.json."),
    ]))
    .unwrap();
    let run = copilot(&api, &home, cwd.path(), &signals_prompt(cwd.path()), &[]);
    report("copilot_cli::write", &[&run], &api);

    run.assert_exit(0);
    assert_eq!(
        std::fs::read_to_string(&signals).unwrap_or_else(|e| panic!("{e}: {run:#?}")),
        content
    );
    let done = run.last("tool.execution_complete");
    assert_eq!(done["data"]["success"], true, "{done}");
    assert_eq!(assistant_texts(&run), ["Created signals.json."]);
    let shape: Vec<(bool, Option<u16>)> = api
        .model_requests()
        .iter()
        .map(|r| (r.history, r.status))
        .collect();
    assert_eq!(shape, [(false, Some(200)), (true, Some(200))]);
}

#[test]
fn resume_resends_the_history_of_the_first_run() {
    let home = shared_home();
    let api = FakeApi::start(Scenario::script([
        Step::text("First answer."),
        Step::text("Second answer."),
    ]))
    .unwrap();
    let cwd = tempfile::tempdir().unwrap();
    let first = copilot(&api, &home, cwd.path(), "first prompt", &[]);
    first.assert_exit(0);
    let session = session_id(&first);
    let second = copilot(
        &api,
        &home,
        cwd.path(),
        "second prompt",
        &[&format!("--resume={session}")],
    );
    report("copilot_cli::resume", &[&first, &second], &api);

    second.assert_exit(0);
    assert_eq!(session_id(&second), session);
    assert_eq!(assistant_texts(&second), ["Second answer."]);
    let requests = api.model_requests();
    let shape: Vec<(bool, bool)> = requests
        .iter()
        .map(|r| {
            (
                r.history,
                r.last_user_text
                    .as_deref()
                    .is_some_and(|t| t.ends_with("second prompt")),
            )
        })
        .collect();
    assert_eq!(shape, [(false, false), (true, true)], "{requests:#?}");
}
