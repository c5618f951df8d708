//! The real-CLI contract suite for Claude Code: the pinned `claude` (installed from npm into
//! `.cache/clis`) runs under `corral run` against the fake model API on 127.0.0.1.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use corral_test_support::fake_api::{FakeApi, Scenario, Step};
use corral_test_support::{is_alive, require_cli};
use serde_json::Value;

use crate::support::*;

const VALID_SIGNALS: &str = r#"{"schemaVersion":1,"signals":[{"type":"note","timestamp":"2026-11-30T12:00:00Z","text":"looked at the task"},{"type":"task-complete","timestamp":"2026-11-30T12:00:01Z"}]}"#;
/// A note alone: the generator contract needs exactly one of task-complete or task-blocked.
const INVALID_SIGNALS: &str = r#"{"schemaVersion":1,"signals":[{"type":"note","timestamp":"2026-11-30T12:00:00Z","text":"forgot the verdict"}]}"#;

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(2) == Some("0"))
        })
        .unwrap_or(false)
}

/// The environment that points `corral` at the pinned Claude Code and at `api`.
fn claude_env(api: &FakeApi) -> Vec<(String, String)> {
    let mut vars = vec![
        (
            "CORRAL_PROVIDERS__CLAUDE__COMMAND".to_string(),
            require_cli("claude").display().to_string(),
        ),
        ("ANTHROPIC_API_KEY".to_string(), "sk-test".to_string()),
        ("ANTHROPIC_BASE_URL".to_string(), api.url()),
        (
            "CORRAL_RETRY__BACKOFF_INITIAL_MS".to_string(),
            "1000".to_string(),
        ),
        ("CORRAL_RUN__KILL_GRACE_MS".to_string(), "2000".to_string()),
    ];
    if is_root() {
        // Claude Code refuses bypassPermissions as root unless told the machine is a sandbox.
        vars.push(("IS_SANDBOX".to_string(), "1".to_string()));
    }
    vars
}

/// `corral` set up to drive the pinned Claude Code against `api`.
fn corral(env: &Env, api: &FakeApi) -> assert_cmd::Command {
    let mut cmd = env.corral();
    cmd.envs(claude_env(api)).timeout(Duration::from_secs(180));
    cmd
}

fn summary(stdout: &[u8]) -> Value {
    let text = String::from_utf8_lossy(stdout);
    let last = text
        .lines()
        .rev()
        .find(|l| l.contains("\"type\":\"summary\""))
        .unwrap_or_else(|| panic!("no summary in {text}"));
    serde_json::from_str(last).unwrap()
}

fn run_dir(summary: &Value) -> PathBuf {
    PathBuf::from(summary["run_dir"].as_str().unwrap())
}

fn log(dir: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(dir.join("events.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn kinds<'a>(log: &'a [Value], kind: &str) -> Vec<&'a Value> {
    log.iter().filter(|v| v["kind"] == kind).collect()
}

#[test]
fn a_text_reply_ends_with_outcome_session_usage_and_cost() {
    let env = Env::new();
    let api = FakeApi::start(Scenario::script([Step::text("Hello from the fake model.")])).unwrap();
    let out = corral(&env, &api)
        .args(["run", "--json", "--no-contract", "say hello"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", transcript(&env, &out));
    let s = summary(&out.stdout);
    assert_eq!(s["outcome"], "succeeded");
    assert_eq!(s["exit_code"], 0);
    assert_eq!(s["usage"]["input"], 12);
    assert_eq!(s["usage"]["output"], 7);
    assert!(s["cost_usd"].as_f64().is_some_and(|c| c > 0.0), "{s}");
    let dir = run_dir(&s);
    let session = s["session_id"].as_str().unwrap();
    assert_eq!(
        std::fs::read_to_string(dir.join("session-id.txt")).unwrap(),
        format!("{session}\n")
    );
    let meta: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("session.json")).unwrap()).unwrap();
    assert_eq!(meta["cli_version"], "2.1.197");
    let log = log(&dir);
    assert_eq!(kinds(&log, "spawn").len(), 1);
    assert_eq!(kinds(&log, "run_finished")[0]["outcome"], "succeeded");
    let events: Vec<&str> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["type"] == "event")
        .filter_map(|v| v["event"]["event"].as_str().map(str::to_string))
        .map(|s| Box::leak(s.into_boxed_str()) as &str)
        .collect();
    assert!(
        events.contains(&"session_started") && events.contains(&"terminal_result"),
        "{events:?}"
    );
}

#[test]
fn the_agent_writes_signals_json_and_corral_validates_it() {
    let env = Env::new();
    let api = FakeApi::start(Scenario::script([
        Step::write_signals(VALID_SIGNALS),
        Step::text("Done."),
    ]))
    .unwrap();
    let out = corral(&env, &api)
        .args(["run", "--json", "do the task"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", transcript(&env, &out));
    let s = summary(&out.stdout);
    assert_eq!(s["signals_valid"], true);
    assert_eq!(
        s["signal_kinds"],
        serde_json::json!(["note", "task-complete"])
    );
    let record: Value =
        serde_json::from_str(&std::fs::read_to_string(run_dir(&s).join("run.json")).unwrap())
            .unwrap();
    assert_eq!(record["signals_valid"], true);
    // The prompt told the agent the absolute path; the fake model found it there.
    let prompt = std::fs::read_to_string(run_dir(&s).join("prompt.md")).unwrap();
    assert!(prompt.contains(run_dir(&s).join("signals.json").to_str().unwrap()));
}

#[test]
fn invalid_signals_get_a_corrective_retry_on_the_resumed_session() {
    let env = Env::new();
    let api = FakeApi::start(Scenario::script([
        Step::write_signals(INVALID_SIGNALS),
        Step::text("Done."),
        Step::write_signals(VALID_SIGNALS),
        Step::text("Fixed."),
    ]))
    .unwrap();
    let out = corral(&env, &api)
        .args(["run", "--json", "do the task"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", transcript(&env, &out));
    let s = summary(&out.stdout);
    assert_eq!(s["signals_valid"], true);
    let record: Value =
        serde_json::from_str(&std::fs::read_to_string(run_dir(&s).join("run.json")).unwrap())
            .unwrap();
    assert_eq!(record["provider_runs"], 2);
    let spawns: Vec<Value> = kinds(&log(&run_dir(&s)), "spawn")
        .into_iter()
        .cloned()
        .collect();
    assert_eq!(spawns.len(), 2);
    assert_eq!(
        spawns[1]["resume"], s["session_id"],
        "the correction resumes the same session"
    );
    let requests = api.model_requests();
    let correction = &requests[2];
    assert!(
        correction.history,
        "the corrective request carries the earlier turns"
    );
    let asked = correction.last_user_text.as_deref().unwrap_or_default();
    assert!(asked.contains("signals.json"), "{asked}");
}

#[test]
fn rate_limited_twice_then_resumed_with_the_same_session() {
    let env = Env::new();
    let api = FakeApi::start(Scenario::script([
        Step::http_error(429),
        Step::http_error(429),
        Step::write_signals(VALID_SIGNALS),
        Step::text("Done."),
    ]))
    .unwrap();
    let out = corral(&env, &api)
        .args(["run", "--json", "do the task"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", transcript(&env, &out));
    let s = summary(&out.stdout);
    assert_eq!(s["attempts"], 3);
    let log = log(&run_dir(&s));
    assert_eq!(kinds(&log, "backoff").len(), 2);
    let spawns = kinds(&log, "spawn");
    let session = s["session_id"].as_str().unwrap();
    assert_eq!(spawns[0]["resume"], Value::Null);
    assert_eq!(spawns[1]["resume"], session);
    assert_eq!(spawns[2]["resume"], session);
    let requests = api.model_requests();
    assert_eq!(requests.len(), 4);
    assert!(!requests[0].history);
    assert!(
        requests[1].history && requests[2].history,
        "the resumed requests re-send the history"
    );
}

#[test]
fn an_unknown_resume_id_falls_back_to_one_cold_run() {
    let env = Env::new();
    let api = FakeApi::start(Scenario::script([
        Step::write_signals(VALID_SIGNALS),
        Step::text("Done."),
    ]))
    .unwrap();
    let gone = "0b5f3c1e-0000-4000-8000-000000000000";
    let out = corral(&env, &api)
        .args(["run", "--json", "--resume", gone, "do the task"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", transcript(&env, &out));
    let s = summary(&out.stdout);
    assert_ne!(s["session_id"], gone);
    let log = log(&run_dir(&s));
    assert_eq!(kinds(&log, "cold_retry")[0]["stale_session"], gone);
    let spawns = kinds(&log, "spawn");
    assert_eq!(
        (spawns[0]["resume"].clone(), spawns[1]["resume"].clone()),
        (gone.into(), Value::Null)
    );
}

/// Pids of the CLI runs recorded in a run's log.
fn spawned_pids(dir: &std::path::Path) -> Vec<u32> {
    kinds(&log(dir), "spawn")
        .iter()
        .filter_map(|v| v["pid"].as_u64())
        .map(|p| p as u32)
        .collect()
}

fn assert_group_gone(pids: &[u32]) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline
        && pids
            .iter()
            .any(|&p| corral_engine::group_alive(p) || is_alive(p))
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    let left: Vec<u32> = pids
        .iter()
        .copied()
        .filter(|&p| corral_engine::group_alive(p) || is_alive(p))
        .collect();
    assert!(left.is_empty(), "process groups left: {left:?}");
}

#[test]
fn a_stalled_stream_is_ended_by_the_idle_watchdog_with_its_whole_tree() {
    let env = Env::new();
    let api = FakeApi::start(Scenario::forever(Step::StallMidStream)).unwrap();
    // The settings floor is 60 s; the watchdog is injected low through the composition root.
    let mut settings = corral_compose::Settings::default();
    settings.providers.claude.command = Some(require_cli("claude").display().to_string());
    let mut config = corral_compose::engine_config(&settings);
    config.idle_timeout = Duration::from_secs(4);
    config.kill_grace = Duration::from_secs(2);
    let mut ambient: Vec<(String, String)> = vec![
        ("PATH".into(), std::env::var("PATH").unwrap_or_default()),
        ("HOME".into(), env.home().display().to_string()),
        ("ANTHROPIC_API_KEY".into(), "sk-test".into()),
        ("ANTHROPIC_BASE_URL".into(), api.url()),
    ];
    if is_root() {
        ambient.push(("IS_SANDBOX".into(), "1".into()));
    }
    config.ambient_env = Some(ambient);
    let provider =
        corral_compose::headless_provider(corral_ports::ProviderId::Claude, &settings, config)
            .unwrap();
    let dir = env.project().join("run");
    let session = corral_ports::AiSession {
        prompt: "stall please".into(),
        cwd: env.project(),
        extra_roots: Vec::new(),
        model: None,
        effort: None,
        permissions: corral_ports::Permissions::default(),
        resume: None,
        cancel: corral_ports::CancellationToken::new(),
        signals_file: dir.join("signals.json"),
        output_dir: dir.clone(),
        max_budget_usd: None,
    };
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let err = runtime
        .block_on(provider.run(session, std::sync::Arc::new(corral_ports::NoopObserver)))
        .unwrap_err();
    assert!(
        matches!(err, corral_ports::ProviderError::IdleTimeout { .. }),
        "{err}"
    );
    assert!(
        err.session_id().is_some(),
        "the session id was captured before the stall"
    );
    assert_group_gone(&spawned_pids(&dir));
}

#[test]
fn ctrl_c_mid_run_cancels_cleanly_and_leaves_no_process() {
    let env = Env::new();
    let api = FakeApi::start(Scenario::forever(Step::HangBeforeHeaders)).unwrap();
    let mut cmd = corral_test_support::command(&assert_cmd::cargo::cargo_bin("corral"));
    cmd.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", env.home())
        .envs(claude_env(&api))
        .current_dir(env.project())
        .args(["run", "wait forever"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = cmd.spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while api.model_requests().is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        !api.model_requests().is_empty(),
        "claude never called the model"
    );
    corral_test_support::interrupt(child.id());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", transcript(&env, &out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("outcome   cancelled"), "{stdout}");
    assert!(
        stdout.contains("resume    corral run --provider claude"),
        "{stdout}"
    );
    let runs = env.project().join(".corral/runs");
    let dir = std::fs::read_dir(&runs)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    assert!(
        dir.join("session-id.txt").is_file(),
        "the session id is kept"
    );
    assert_group_gone(&spawned_pids(&dir));
    let last = log(&dir).last().cloned().unwrap();
    assert_eq!(
        last["kind"], "run_finished",
        "the log was flushed to its end"
    );
}
