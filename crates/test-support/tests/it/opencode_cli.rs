//! The real OpenCode CLI (1.18.33, pinned in `PINNED_CLIS`, installed with npm on first use) driven
//! by the fake model API over streaming Chat Completions: a text reply (with the title side request
//! answered without consuming a step), its `write` tool creating `signals.json`, and `-s <id>`
//! re-sending the history.
//!
//! Recipe: `HOME` and the four XDG directories in a temporary home, the five `OPENCODE_DISABLE_*`
//! switches, and `OPENCODE_CONFIG_CONTENT` declaring the provider `fake`
//! (`npm: "@ai-sdk/openai-compatible"`, `options.baseURL = <url>/v1`); `opencode run --pure --format
//! json -m fake/fake-model` with the prompt on stdin, then closed.

// The helpers outside `#[test]` functions are test code too (clippy only exempts the test fns).
#![allow(clippy::expect_used, clippy::panic, clippy::unwrap_used)]

use std::path::Path;

use corral_test_support::fake_api::{
    Endpoint, FakeApi, SIDE_REQUEST_TEXT, Scenario, Step, USAGE_INPUT_TOKENS, USAGE_OUTPUT_TOKENS,
};
use corral_test_support::require_cli;
use serde_json::json;

use super::cli_run::{Run, command, report, run, signals_prompt};

/// `OPENCODE_CONFIG_CONTENT`: the provider `fake` speaking Chat Completions at `<url>/v1`.
fn config(api: &FakeApi) -> String {
    json!({
        "$schema": "https://opencode.ai/config.json",
        "provider": {
            "fake": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "fakeapi",
                "options": {"baseURL": api.url_v1(), "apiKey": "sk-test"},
                "models": {"fake-model": {"name": "Fake Model"}},
            },
        },
        "model": "fake/fake-model",
        "autoupdate": false,
        "share": "disabled",
    })
    .to_string()
}

/// Runs `opencode run --pure --format json -m fake/fake-model <extra>` in `cwd` with `prompt` on
/// stdin.
fn opencode(api: &FakeApi, home: &Path, cwd: &Path, prompt: &str, extra: &[&str]) -> Run {
    let bin = require_cli("opencode");
    let mut cmd = command(&bin, home, cwd);
    cmd.env("XDG_CONFIG_HOME", home.join(".config"))
        .env("XDG_DATA_HOME", home.join(".local/share"))
        .env("XDG_CACHE_HOME", home.join(".cache"))
        .env("XDG_STATE_HOME", home.join(".local/state"))
        .env("OPENCODE_DISABLE_MODELS_FETCH", "1")
        .env("OPENCODE_DISABLE_AUTOUPDATE", "1")
        .env("OPENCODE_DISABLE_SHARE", "1")
        .env("OPENCODE_DISABLE_LSP_DOWNLOAD", "1")
        .env("OPENCODE_DISABLE_DEFAULT_PLUGINS", "1")
        .env("OPENCODE_CONFIG_CONTENT", config(api))
        .args(["run", "--pure", "--format", "json", "-m", "fake/fake-model"])
        .args(extra);
    run(cmd, Some(prompt))
}

fn dirs() -> (tempfile::TempDir, tempfile::TempDir) {
    (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap())
}

fn session_id(run: &Run) -> String {
    let ids: Vec<&str> = run
        .lines
        .iter()
        .filter_map(|l| l["sessionID"].as_str())
        .collect();
    assert!(!ids.is_empty(), "no sessionID: {run:#?}");
    assert!(ids.iter().all(|id| *id == ids[0]), "{ids:?}");
    ids[0].to_owned()
}

fn texts(run: &Run) -> Vec<&str> {
    run.all("text")
        .into_iter()
        .filter_map(|l| l["part"]["text"].as_str())
        .collect()
}

#[test]
fn a_text_reply_ends_in_a_step_finish_with_tokens() {
    let api = FakeApi::start(Scenario::script([Step::text("Hello from the fake API.")])).unwrap();
    let (home, cwd) = dirs();
    let run = opencode(&api, home.path(), cwd.path(), "say hi", &[]);
    report("opencode_cli::text", &[&run], &api);
    // OpenCode 1.18.33 starts a background `npm install @opencode-ai/plugin` into its config dir
    // even with `--pure`; a short run usually exits before it finishes. Shown, not asserted.
    eprintln!(
        "  ~/.npm after the run: {}; config dir node_modules: {}",
        home.path().join(".npm").exists(),
        home.path().join(".config/opencode/node_modules").exists()
    );

    run.assert_exit(0);
    assert!(session_id(&run).starts_with("ses_"));
    assert_eq!(texts(&run), ["Hello from the fake API."]);
    let finish = &run.last("step_finish")["part"];
    assert_eq!(finish["reason"], "stop", "{finish}");
    assert_eq!(finish["tokens"]["input"], USAGE_INPUT_TOKENS, "{finish}");
    assert_eq!(finish["tokens"]["output"], USAGE_OUTPUT_TOKENS, "{finish}");
    assert_eq!(finish["cost"], 0, "{finish}");

    // The title side request offers no tools and consumes no step; the agent turn consumes the one.
    let requests = api.requests();
    let side: Vec<_> = requests
        .iter()
        .filter(|r| r.endpoint == Endpoint::ChatCompletionsSide)
        .collect();
    // OpenCode starts the title request and the turn concurrently: the title usually reaches the
    // API first, but under load the turn can (seen in CI: turn +3234 ms, title +3306 ms), so
    // only its presence is asserted, not its place.
    assert_eq!(side.len(), 1, "{requests:#?}");
    for request in &side {
        assert!(request.tools.is_empty());
        assert_eq!((request.step.as_deref(), request.status), (None, Some(200)));
    }
    let turns = api.model_requests();
    assert_eq!(turns.len(), 1, "{requests:#?}");
    let turn = &turns[0];
    assert_eq!(turn.path, "/v1/chat/completions");
    assert_eq!(turn.endpoint, Endpoint::ChatCompletions);
    assert!(turn.stream);
    assert!(!turn.history);
    assert_eq!(turn.model.as_deref(), Some("fake-model"));
    assert!(turn.tools.iter().any(|t| t == "write"), "{turn:#?}");
    assert_eq!(turn.last_user_text.as_deref(), Some("say hi"));
    assert_eq!(turn.auth.as_deref(), Some("bearer"));
    assert!(!texts(&run).contains(&SIDE_REQUEST_TEXT));
}

#[test]
fn the_write_tool_creates_signals_json() {
    let (home, cwd) = dirs();
    let signals = cwd.path().join("signals.json");
    let content = "{\"signal\": \"go\", \"n\": 1}";
    let api = FakeApi::start(Scenario::script([
        Step::write_signals_with("write", content),
        Step::text("Created signals.json."),
    ]))
    .unwrap();
    let run = opencode(
        &api,
        home.path(),
        cwd.path(),
        &signals_prompt(cwd.path()),
        &[],
    );
    report("opencode_cli::write", &[&run], &api);

    run.assert_exit(0);
    assert_eq!(
        std::fs::read_to_string(&signals).unwrap_or_else(|e| panic!("{e}: {run:#?}")),
        content
    );
    let tool = run.first("tool_use");
    assert_eq!(tool["part"]["tool"], "write", "{tool}");
    assert_eq!(tool["part"]["state"]["status"], "completed", "{tool}");
    assert_eq!(texts(&run), ["Created signals.json."]);
    let shape: Vec<(bool, Option<u16>)> = api
        .model_requests()
        .iter()
        .map(|r| (r.history, r.status))
        .collect();
    assert_eq!(shape, [(false, Some(200)), (true, Some(200))]);
}

#[test]
fn resume_with_s_resends_the_history_of_the_first_run() {
    let api = FakeApi::start(Scenario::script([
        Step::text("First answer."),
        Step::text("Second answer."),
    ]))
    .unwrap();
    let (home, cwd) = dirs();
    let first = opencode(&api, home.path(), cwd.path(), "first prompt", &[]);
    first.assert_exit(0);
    let session = session_id(&first);
    let second = opencode(
        &api,
        home.path(),
        cwd.path(),
        "second prompt",
        &["-s", &session],
    );
    report("opencode_cli::resume", &[&first, &second], &api);

    second.assert_exit(0);
    assert_eq!(session_id(&second), session);
    assert_eq!(texts(&second), ["Second answer."]);
    let requests = api.model_requests();
    assert_eq!(
        requests
            .iter()
            .map(|r| (r.history, r.last_user_text.as_deref()))
            .collect::<Vec<_>>(),
        [(false, Some("first prompt")), (true, Some("second prompt"))]
    );
}
