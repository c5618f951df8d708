//! The real Grok CLI (`@vibe-kit/grok-cli` 0.0.34, pinned in `PINNED_CLIS`, installed with npm on
//! first use) driven by the fake model API over non-streaming Chat Completions: a text reply, its
//! `create_file` tool creating `signals.json`, and a permanent 429, which Grok reports as an
//! assistant message while exiting 0.
//!
//! Recipe: `GROK_API_KEY` and `GROK_BASE_URL=<url>/v1`; `grok -m fake-model -p "<prompt>"` with
//! stdin closed (Grok takes the prompt only from `-p`). It prints its messages as JSONL only when
//! the run ends, and creates `.grok/settings.json` in the working directory.

// The helpers outside `#[test]` functions are test code too (clippy only exempts the test fns).
#![allow(clippy::expect_used, clippy::panic, clippy::unwrap_used)]

use std::path::Path;

use corral_test_support::fake_api::{Endpoint, FakeApi, Scenario, Step};
use corral_test_support::require_cli;

use super::cli_run::{Run, command, report, run, signals_prompt};

/// Runs `grok -m fake-model -p <prompt>` in `cwd` with stdin closed.
fn grok(api: &FakeApi, home: &Path, cwd: &Path, prompt: &str) -> Run {
    let bin = require_cli("grok");
    let mut cmd = command(&bin, home, cwd);
    cmd.env("GROK_API_KEY", "sk-test")
        .env("GROK_BASE_URL", api.url_v1())
        .args(["-m", "fake-model", "-p", prompt]);
    run(cmd, None)
}

fn dirs() -> (tempfile::TempDir, tempfile::TempDir) {
    (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap())
}

/// The `content` of the assistant messages printed.
fn assistant_texts(run: &Run) -> Vec<&str> {
    run.lines
        .iter()
        .filter(|l| l["role"] == "assistant")
        .filter_map(|l| l["content"].as_str())
        .collect()
}

#[test]
fn a_text_reply_is_printed_as_jsonl_at_the_end() {
    let api = FakeApi::start(Scenario::script([Step::text("Hello from the fake API.")])).unwrap();
    let (home, cwd) = dirs();
    let run = grok(&api, home.path(), cwd.path(), "say hi");
    report("grok_cli::text", &[&run], &api);

    run.assert_exit(0);
    assert_eq!(run.lines[0]["role"], "user", "{run:#?}");
    assert_eq!(run.lines[0]["content"], "say hi", "{run:#?}");
    assert_eq!(assistant_texts(&run), ["Hello from the fake API."]);

    let requests = api.model_requests();
    assert_eq!(requests.len(), 1, "{requests:#?}");
    let request = &requests[0];
    assert_eq!(request.path, "/v1/chat/completions");
    assert_eq!(request.endpoint, Endpoint::ChatCompletions);
    assert!(!request.stream);
    assert!(!request.history);
    assert_eq!(request.model.as_deref(), Some("fake-model"));
    assert!(
        request.tools.iter().any(|t| t == "create_file"),
        "{request:#?}"
    );
    assert_eq!(request.last_user_text.as_deref(), Some("say hi"));
    assert_eq!(request.auth.as_deref(), Some("bearer"));
}

#[test]
fn create_file_writes_signals_json() {
    let (home, cwd) = dirs();
    let signals = cwd.path().join("signals.json");
    let content = "{\"signal\": \"go\", \"n\": 1}";
    let api = FakeApi::start(Scenario::script([
        Step::write_signals_with("create_file", content),
        Step::text("Created signals.json."),
    ]))
    .unwrap();
    let run = grok(&api, home.path(), cwd.path(), &signals_prompt(cwd.path()));
    report("grok_cli::write", &[&run], &api);

    run.assert_exit(0);
    assert_eq!(
        std::fs::read_to_string(&signals).unwrap_or_else(|e| panic!("{e}: {run:#?}")),
        content
    );
    let call = run
        .lines
        .iter()
        .find(|l| l["tool_calls"].is_array())
        .unwrap_or_else(|| panic!("no tool call printed: {run:#?}"));
    assert_eq!(call["tool_calls"][0]["function"]["name"], "create_file");
    assert!(run.lines.iter().any(|l| l["role"] == "tool"), "{run:#?}");
    assert_eq!(
        assistant_texts(&run).last().copied(),
        Some("Created signals.json.")
    );
    let shape: Vec<(bool, bool, Option<u16>)> = api
        .model_requests()
        .iter()
        .map(|r| (r.stream, r.history, r.status))
        .collect();
    assert_eq!(shape, [(false, false, Some(200)), (false, true, Some(200))]);
}

#[test]
fn a_permanent_429_is_an_assistant_message_and_exit_0() {
    let api = FakeApi::start(Scenario::forever(Step::rate_limited(1))).unwrap();
    let (home, cwd) = dirs();
    let run = grok(&api, home.path(), cwd.path(), "hi");
    report("grok_cli::e429", &[&run], &api);

    run.assert_exit(0);
    let texts = assistant_texts(&run);
    assert_eq!(texts.len(), 1, "{run:#?}");
    assert!(
        texts[0].starts_with("Sorry, I encountered an error: Grok API error: 429"),
        "{texts:?}"
    );
    let statuses: Vec<Option<u16>> = api.model_requests().iter().map(|r| r.status).collect();
    assert_eq!(statuses, [Some(429); 3], "the OpenAI SDK retries twice");
}
