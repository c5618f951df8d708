//! The real Claude Code CLI (pinned in `PINNED_CLIS`, installed with npm on first use) driven by the
//! fake model API: a text reply, a `Write` tool call creating `signals.json`, a 429 with retries off,
//! and `--resume` re-sending the history. This is the proof that `fake_api` speaks the Anthropic
//! Messages API well enough for the real client; each run is killed after 60 s so a bug cannot hang
//! the suite, and each case prints its wall time.

// test-support is a tool, not product: it may create processes.
#![allow(clippy::disallowed_methods)]
// The helpers outside `#[test]` functions are test code too (clippy only exempts the test fns).
#![allow(clippy::expect_used, clippy::panic, clippy::unwrap_used)]

use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use corral_test_support::fake_api::{
    FakeApi, Scenario, Step, USAGE_INPUT_TOKENS, USAGE_OUTPUT_TOKENS,
};
use corral_test_support::require_cli;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use serde_json::Value;

/// The longest one CLI run may take before it is killed.
const RUN_CAP: Duration = Duration::from_secs(60);

/// What one run of the CLI did.
#[derive(Debug)]
struct Run {
    /// The exit code; `None` when killed by a signal (the 60 s cap included).
    code: Option<i32>,
    /// The stdout lines, parsed as JSON.
    lines: Vec<Value>,
    stderr: String,
    elapsed: Duration,
    timed_out: bool,
}

impl Run {
    fn init(&self) -> &Value {
        self.lines
            .iter()
            .find(|l| l["type"] == "system" && l["subtype"] == "init")
            .unwrap_or_else(|| panic!("no system/init line: {self:#?}"))
    }

    fn result(&self) -> &Value {
        self.lines
            .iter()
            .rev()
            .find(|l| l["type"] == "result")
            .unwrap_or_else(|| panic!("no result line: {self:#?}"))
    }
}

/// Runs `claude -p --output-format stream-json --verbose --permission-mode bypassPermissions
/// <extra>` in `cwd` with `prompt` on stdin (then closed) and an environment of only `PATH`, `HOME`
/// and the settings that point it at `api`; `env` adds or overrides variables.
fn claude(
    api: &FakeApi,
    home: &Path,
    cwd: &Path,
    prompt: &str,
    extra: &[&str],
    env: &[(&str, &str)],
) -> Run {
    let bin = require_cli("claude");
    let mut cmd = Command::new(&bin);
    cmd.args([
        "-p",
        "--output-format",
        "stream-json",
        "--verbose",
        "--permission-mode",
        "bypassPermissions",
    ])
    .args(extra)
    .env_clear()
    .env("PATH", std::env::var_os("PATH").unwrap_or_default())
    .env("HOME", home)
    .env("ANTHROPIC_API_KEY", "sk-test")
    .env("ANTHROPIC_BASE_URL", api.url())
    .env("DISABLE_TELEMETRY", "1")
    .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
    .env("DISABLE_AUTOUPDATER", "1")
    .env("IS_SANDBOX", "1")
    .env("CLAUDE_CODE_MAX_RETRIES", "0")
    .current_dir(cwd)
    .stdin(Stdio::piped())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .process_group(0);
    for (name, value) in env {
        cmd.env(name, value);
    }

    let started = Instant::now();
    let mut child = cmd.spawn().expect("spawn claude");
    let mut stdin = child.stdin.take().expect("piped stdin");
    stdin
        .write_all(prompt.as_bytes())
        .expect("write the prompt");
    drop(stdin);
    let mut stdout = child.stdout.take().expect("piped stdout");
    let mut stderr = child.stderr.take().expect("piped stderr");
    let out_reader = thread::spawn(move || {
        let mut text = String::new();
        let _ = stdout.read_to_string(&mut text);
        text
    });
    let err_reader = thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });

    let pgid = Pid::from_raw(i32::try_from(child.id()).unwrap());
    let mut timed_out = false;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for claude") {
            break status;
        }
        if started.elapsed() >= RUN_CAP {
            timed_out = true;
            let _ = killpg(pgid, Signal::SIGKILL);
            break child.wait().expect("reap claude");
        }
        thread::sleep(Duration::from_millis(20));
    };
    let elapsed = started.elapsed();
    // The CLI may leave helpers in its group holding the pipes open: end them before reading to EOF.
    let _ = killpg(pgid, Signal::SIGKILL);
    let stdout = out_reader.join().expect("stdout reader");
    let stderr = err_reader.join().expect("stderr reader");
    let lines = stdout
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("stdout line {l:?}: {e}")))
        .collect();
    Run {
        code: status.code(),
        lines,
        stderr,
        elapsed,
        timed_out,
    }
}

/// Prints a case's wall time and the requests the fake API saw (shown with `--nocapture`).
fn report(case: &str, runs: &[&Run], api: &FakeApi) {
    let times: Vec<String> = runs
        .iter()
        .map(|r| format!("{:.2}s", r.elapsed.as_secs_f64()))
        .collect();
    eprintln!("claude_cli::{case}: wall time {}", times.join(" + "));
    for run in runs {
        if !run.stderr.trim().is_empty() {
            eprintln!("  stderr: {}", run.stderr.trim());
        }
    }
    for request in api.requests() {
        eprintln!(
            "  {} {} stream={} msgs={} history={} tools={} step={:?} status={:?} headers={:?}",
            request.method,
            request.path,
            request.stream,
            request.n_msgs,
            request.history,
            request.tools.len(),
            request.step,
            request.status,
            request.headers
        );
    }
}

fn dirs() -> (tempfile::TempDir, tempfile::TempDir) {
    (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap())
}

#[test]
fn a_text_reply_ends_in_a_successful_result() {
    let api = FakeApi::start(Scenario::script([Step::text("Hello from the fake API.")])).unwrap();
    let (home, cwd) = dirs();
    let run = claude(&api, home.path(), cwd.path(), "say hi", &[], &[]);
    report("text", &[&run], &api);

    assert_eq!((run.code, run.timed_out), (Some(0), false), "{run:#?}");
    assert!(run.init()["session_id"].is_string(), "{run:#?}");
    let result = run.result();
    assert_eq!(result["subtype"], "success");
    assert_eq!(result["is_error"], false);
    assert_eq!(result["result"], "Hello from the fake API.");
    assert_eq!(result["usage"]["input_tokens"], USAGE_INPUT_TOKENS);
    assert_eq!(result["usage"]["output_tokens"], USAGE_OUTPUT_TOKENS);

    let requests = api.model_requests();
    assert_eq!(requests.len(), 1, "{requests:#?}");
    let request = &requests[0];
    assert_eq!(request.path, "/v1/messages?beta=true");
    assert!(request.stream);
    assert!(!request.history);
    assert!(request.model.is_some());
    assert!(request.tools.iter().any(|t| t == "Write"), "{request:#?}");
    assert_eq!(request.last_user_text.as_deref(), Some("say hi"));
    assert_eq!(request.auth.as_deref(), Some("x-api-key"));
    assert_eq!(request.status, Some(200));
}

#[test]
fn a_write_tool_call_creates_signals_json_in_the_cwd() {
    let (home, cwd) = dirs();
    let signals = cwd.path().join("signals.json");
    let content = "{\"signal\": \"go\", \"n\": 1}";
    let api = FakeApi::start(Scenario::script([
        Step::write_file(&signals, content),
        Step::text("Created signals.json."),
    ]))
    .unwrap();
    let run = claude(
        &api,
        home.path(),
        cwd.path(),
        "create signals.json",
        &[],
        &[],
    );
    report("write", &[&run], &api);

    assert_eq!((run.code, run.timed_out), (Some(0), false), "{run:#?}");
    assert_eq!(std::fs::read_to_string(&signals).unwrap(), content);
    assert_eq!(run.result()["result"], "Created signals.json.");
    let requests = api.model_requests();
    let shape: Vec<(bool, bool, Option<u16>)> = requests
        .iter()
        .map(|r| (r.stream, r.history, r.status))
        .collect();
    assert_eq!(shape, [(true, false, Some(200)), (true, true, Some(200))]);
    assert!(requests[1].n_msgs > requests[0].n_msgs, "{requests:#?}");
}

#[test]
fn a_429_with_retries_off_fails_the_run_with_its_status() {
    let api = FakeApi::start(Scenario::script([
        Step::rate_limited(1),
        Step::text("never reached"),
    ]))
    .unwrap();
    let (home, cwd) = dirs();
    let run = claude(&api, home.path(), cwd.path(), "hi", &[], &[]);
    report("e429", &[&run], &api);

    assert_eq!((run.code, run.timed_out), (Some(1), false), "{run:#?}");
    let result = run.result();
    assert_eq!(result["is_error"], true);
    assert_eq!(result["api_error_status"], 429);
    let statuses: Vec<Option<u16>> = api.model_requests().iter().map(|r| r.status).collect();
    assert_eq!(statuses, [Some(429)]);
    assert_eq!(api.steps_left(), 1);
}

#[test]
fn resume_resends_the_history_of_the_first_run() {
    let api = FakeApi::start(Scenario::script([
        Step::text("First answer."),
        Step::text("Second answer."),
    ]))
    .unwrap();
    let (home, cwd) = dirs();
    let first = claude(&api, home.path(), cwd.path(), "first prompt", &[], &[]);
    assert_eq!(
        (first.code, first.timed_out),
        (Some(0), false),
        "{first:#?}"
    );
    let session = first.init()["session_id"]
        .as_str()
        .expect("session id")
        .to_owned();
    let second = claude(
        &api,
        home.path(),
        cwd.path(),
        "second prompt",
        &["--resume", &session],
        &[],
    );
    report("resume", &[&first, &second], &api);

    assert_eq!(
        (second.code, second.timed_out),
        (Some(0), false),
        "{second:#?}"
    );
    assert_eq!(second.init()["session_id"], session.as_str());
    assert_eq!(second.result()["result"], "Second answer.");
    let requests = api.model_requests();
    let shape: Vec<(bool, Option<&str>, Option<&str>)> = requests
        .iter()
        .map(|r| {
            (
                r.history,
                r.last_user_text.as_deref(),
                r.headers
                    .get("x-claude-code-session-id")
                    .map(String::as_str),
            )
        })
        .collect();
    assert_eq!(
        shape,
        [
            (false, Some("first prompt"), Some(session.as_str())),
            (true, Some("second prompt"), Some(session.as_str())),
        ]
    );
}

#[test]
fn a_hang_before_headers_times_out_on_api_timeout_ms() {
    let api = FakeApi::start(Scenario::forever(Step::HangBeforeHeaders)).unwrap();
    let (home, cwd) = dirs();
    let run = claude(
        &api,
        home.path(),
        cwd.path(),
        "hi",
        &[],
        &[("API_TIMEOUT_MS", "3000")],
    );
    report("hang", &[&run], &api);

    assert_eq!((run.code, run.timed_out), (Some(1), false), "{run:#?}");
    let result = run.result();
    assert_eq!(result["is_error"], true);
    assert_eq!(result["result"], "Request timed out");
    let statuses: Vec<Option<u16>> = api.model_requests().iter().map(|r| r.status).collect();
    assert_eq!(statuses, [None]);
    let dropped = Instant::now();
    drop(api);
    assert!(dropped.elapsed() < Duration::from_secs(2));
}

#[test]
fn slow_chunks_stream_through_as_partial_messages() {
    let api = FakeApi::start(Scenario::script([Step::SlowChunks {
        text: "one two three".to_owned(),
        delay_ms: 200,
    }]))
    .unwrap();
    let (home, cwd) = dirs();
    let run = claude(
        &api,
        home.path(),
        cwd.path(),
        "hi",
        &["--include-partial-messages"],
        &[],
    );
    report("slow", &[&run], &api);

    assert_eq!((run.code, run.timed_out), (Some(0), false), "{run:#?}");
    assert_eq!(run.result()["result"], "one two three");
    let deltas: Vec<&str> = run
        .lines
        .iter()
        .filter(|l| l["type"] == "stream_event" && l["event"]["type"] == "content_block_delta")
        .filter_map(|l| l["event"]["delta"]["text"].as_str())
        .collect();
    assert_eq!(deltas, ["one ", "two ", "three"]);
}
