//! The real Codex CLI (0.171.0, pinned in `PINNED_CLIS`, installed with npm on first use) driven by
//! the fake model API over the OpenAI Responses API: a text reply, a shell tool call (`exec_command`)
//! writing `signals.json`, a permanent 429, and `codex exec resume` re-sending the history.
//!
//! Recipe: `$CODEX_HOME/config.toml` names the provider `fake` (`wire_api = "responses"`, key from
//! `FAKE_API_KEY`); the URL is passed per run with `-c model_providers.fake.base_url="\"URL/v1\""`.
//! `CODEX_HOME` must not be under `/tmp` (Codex then refuses to create its sandbox helper and every
//! sandboxed command fails), so it lives under `<workspace>/target/codex-home-<random>/`, removed
//! afterwards. The prompt goes on stdin (`-`), which is then closed.

// The helpers outside `#[test]` functions are test code too (clippy only exempts the test fns).
#![allow(clippy::expect_used, clippy::panic, clippy::unwrap_used)]

use corral_test_support::fake_api::{
    FakeApi, Scenario, Step, USAGE_INPUT_TOKENS, USAGE_OUTPUT_TOKENS,
};
use corral_test_support::require_cli;

use super::cli_run::{Run, command, report, run, signals_prompt};

/// Codex's configuration: the provider `fake` speaking the Responses API. Its `base_url` is a
/// placeholder nobody listens on: every run overrides it with `-c`.
const CONFIG_TOML: &str = r#"model = "fake-model"
model_provider = "fake"
check_for_update_on_startup = false

[model_providers.fake]
name = "fakeapi"
base_url = "http://127.0.0.1:9/v1"
wire_api = "responses"
env_key = "FAKE_API_KEY"

[analytics]
enabled = false
"#;

/// A home, a working directory and a `CODEX_HOME` (outside `/tmp`), all removed on drop.
struct Dirs {
    home: tempfile::TempDir,
    cwd: tempfile::TempDir,
    codex_home: tempfile::TempDir,
}

fn dirs() -> Dirs {
    let codex_home = tempfile::Builder::new()
        .prefix("codex-home-")
        .tempdir_in(corral_test_support::non_temp_dir())
        .unwrap();
    std::fs::write(codex_home.path().join("config.toml"), CONFIG_TOML).unwrap();
    Dirs {
        home: tempfile::tempdir().unwrap(),
        cwd: tempfile::tempdir().unwrap(),
        codex_home,
    }
}

/// Runs `codex exec --json --skip-git-repo-check --sandbox workspace-write -c
/// model_providers.fake.base_url="<url>/v1" <extra> -` with `prompt` on stdin.
fn codex(api: &FakeApi, dirs: &Dirs, prompt: &str, extra: &[&str]) -> Run {
    let bin = require_cli("codex");
    let mut cmd = command(&bin, dirs.home.path(), dirs.cwd.path());
    cmd.env("CODEX_HOME", dirs.codex_home.path())
        .env("FAKE_API_KEY", "sk-test")
        .args([
            "exec",
            "--json",
            "--skip-git-repo-check",
            "--sandbox",
            "workspace-write",
            "-c",
        ])
        .arg(format!(
            "model_providers.fake.base_url=\"{}\"",
            api.url_v1()
        ))
        .args(extra)
        .arg("-");
    run(cmd, Some(prompt))
}

fn thread_id(run: &Run) -> String {
    run.first("thread.started")["thread_id"]
        .as_str()
        .unwrap_or_else(|| panic!("no thread id: {run:#?}"))
        .to_owned()
}

fn agent_messages(run: &Run) -> Vec<&str> {
    run.all("item.completed")
        .into_iter()
        .filter(|l| l["item"]["type"] == "agent_message")
        .filter_map(|l| l["item"]["text"].as_str())
        .collect()
}

#[test]
fn a_text_reply_completes_the_turn_with_usage() {
    let api = FakeApi::start(Scenario::script([Step::text("Hello from the fake API.")])).unwrap();
    let dirs = dirs();
    let run = codex(&api, &dirs, "say hi", &[]);
    report("codex_cli::text", &[&run], &api);

    run.assert_exit(0);
    assert!(!thread_id(&run).is_empty());
    assert_eq!(agent_messages(&run), ["Hello from the fake API."]);
    let usage = &run.last("turn.completed")["usage"];
    assert_eq!(usage["input_tokens"], USAGE_INPUT_TOKENS, "{run:#?}");
    assert_eq!(usage["output_tokens"], USAGE_OUTPUT_TOKENS, "{run:#?}");

    let requests = api.model_requests();
    assert_eq!(requests.len(), 1, "{requests:#?}");
    let request = &requests[0];
    assert_eq!(request.path, "/v1/responses");
    assert!(request.stream);
    assert!(!request.history);
    assert_eq!(request.model.as_deref(), Some("fake-model"));
    assert!(
        request.tools.iter().any(|t| t == "exec_command"),
        "{request:#?}"
    );
    assert_eq!(request.last_user_text.as_deref(), Some("say hi"));
    assert_eq!(request.auth.as_deref(), Some("bearer"));
    assert_eq!(
        request.headers.get("session-id").map(String::as_str),
        Some(thread_id(&run).as_str())
    );
}

#[test]
fn a_shell_tool_call_writes_signals_json() {
    let dirs = dirs();
    let signals = dirs.cwd.path().join("signals.json");
    let content = "{\"signal\": \"go\", \"n\": 1}\n";
    let api = FakeApi::start(Scenario::script([
        Step::shell_write_signals("exec_command", content),
        Step::text("Created signals.json."),
    ]))
    .unwrap();
    let run = codex(&api, &dirs, &signals_prompt(dirs.cwd.path()), &[]);
    report("codex_cli::write", &[&run], &api);

    run.assert_exit(0);
    assert_eq!(
        std::fs::read_to_string(&signals).unwrap_or_else(|e| panic!("{e}: {run:#?}")),
        content
    );
    let command = run
        .all("item.completed")
        .into_iter()
        .find(|l| l["item"]["type"] == "command_execution")
        .unwrap_or_else(|| panic!("no command_execution item: {run:#?}"));
    assert_eq!(command["item"]["exit_code"], 0, "{command}");
    assert_eq!(agent_messages(&run), ["Created signals.json."]);
    // `turn.completed.usage` sums the turn's two requests.
    let usage = &run.last("turn.completed")["usage"];
    assert_eq!(usage["input_tokens"], 2 * USAGE_INPUT_TOKENS, "{usage}");
    assert_eq!(usage["output_tokens"], 2 * USAGE_OUTPUT_TOKENS, "{usage}");
    let shape: Vec<(bool, Option<u16>)> = api
        .model_requests()
        .iter()
        .map(|r| (r.history, r.status))
        .collect();
    assert_eq!(shape, [(false, Some(200)), (true, Some(200))]);
}

#[test]
fn a_permanent_429_fails_the_turn_after_reconnecting() {
    let api = FakeApi::start(Scenario::forever(Step::rate_limited(1))).unwrap();
    let dirs = dirs();
    let run = codex(&api, &dirs, "hi", &[]);
    report("codex_cli::e429", &[&run], &api);

    run.assert_exit(1);
    let errors: Vec<&str> = run
        .all("error")
        .into_iter()
        .filter_map(|l| l["message"].as_str())
        .collect();
    assert!(
        errors.iter().any(|m| m.starts_with("Reconnecting... 1/")),
        "{errors:#?}"
    );
    let failed = run.last("turn.failed")["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(failed.contains("429"), "{failed}");
    let requests = api.model_requests();
    assert!(requests.len() > 1, "{requests:#?}");
    assert!(requests.iter().all(|r| r.status == Some(429)));
}

#[test]
fn resume_resends_the_history_of_the_first_run() {
    let api = FakeApi::start(Scenario::script([
        Step::text("First answer."),
        Step::text("Second answer."),
    ]))
    .unwrap();
    let dirs = dirs();
    let first = codex(&api, &dirs, "first prompt", &[]);
    first.assert_exit(0);
    let thread = thread_id(&first);
    let second = codex(&api, &dirs, "second prompt", &["resume", &thread]);
    report("codex_cli::resume", &[&first, &second], &api);

    second.assert_exit(0);
    assert_eq!(thread_id(&second), thread);
    assert_eq!(agent_messages(&second), ["Second answer."]);
    // Surprise: after a resume, `turn.completed.usage` counts the whole thread (the first run's
    // request too), not just this run's one request.
    let usage = &second.last("turn.completed")["usage"];
    assert_eq!(usage["input_tokens"], 2 * USAGE_INPUT_TOKENS, "{usage}");
    assert_eq!(usage["output_tokens"], 2 * USAGE_OUTPUT_TOKENS, "{usage}");
    let requests = api.model_requests();
    assert_eq!(
        requests
            .iter()
            .map(|r| (r.history, r.last_user_text.as_deref()))
            .collect::<Vec<_>>(),
        [(false, Some("first prompt")), (true, Some("second prompt"))]
    );
    assert!(requests[1].n_msgs > requests[0].n_msgs, "{requests:#?}");
}
