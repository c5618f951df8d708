//! `corral-fake-api`: the fake model API as a program, for the offline demo and manual runs.
//!
//! `corral-fake-api [--scenario NAME] [--cli CLI] [--bytes N] [--log FILE] [--project DIR]` prints `listening on
//! http://127.0.0.1:PORT` on its first line, then serves until its standard input closes or it is
//! signalled. `huge-text` answers with a text reply of `--bytes` bytes (default 20 MiB) and
//! `huge-write` writes a file of that size to the absolute path ending in `big.txt` that the prompt
//! names, then says it is done: the two ways a CLI prints one giant line (its answer, or a tool
//! call's input), used to measure which CLIs lose the tail of their stdout on a pipe. `sprint`
//! scripts the demo's two-task sprint by role, task and round, `sprint-plan` its plan (the
//! briefs name the files under `--project DIR`) and `sprint-pr` its pull request's text; `three-429s` answers three 429s with `retry-after: 1`
//! before the `happy` run. It speaks every wire format at once (Anthropic Messages, OpenAI Responses, Chat
//! Completions); `--cli` (default `claude`) only picks how the scenarios write files: `claude`
//! `Write`, `codex` a shell here-document through `exec_command`, `opencode` `write`, `grok`
//! `create_file`, `copilot` `create`.

// test-support is a tool, not product: it may create processes and exit on bad arguments.
#![allow(clippy::disallowed_methods)]

use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use corral_test_support::fake_api::{FakeApi, Role, Scenario, Step, bulk_text};

/// The file `huge-write` writes, found by this name in the prompt.
const HUGE_WRITE_FILE: &str = "big.txt";

/// The signals a well-behaved agent writes for the demo task.
const DEMO_SIGNALS: &str = r#"{
  "schemaVersion": 1,
  "signals": [
    {"type": "note", "timestamp": "2026-11-30T12:00:00Z", "text": "Read the task; the greeting file did not exist yet."},
    {"type": "change", "timestamp": "2026-11-30T12:00:01Z", "path": "hello.txt", "summary": "Created the greeting file."},
    {"type": "task-complete", "timestamp": "2026-11-30T12:00:02Z"}
  ]
}
"#;

/// A generator's report for the `sprint` scenario: done, with its commit subject and a learning.
fn sprint_complete(subject: &str, learning: &str) -> String {
    format!(
        r#"{{"schemaVersion": 1, "signals": [
  {{"type": "task-complete", "timestamp": "2026-11-30T12:00:00Z"}},
  {{"type": "commit-message", "timestamp": "2026-11-30T12:00:00Z", "subject": "{subject}"}},
  {{"type": "learning", "timestamp": "2026-11-30T12:00:00Z", "text": "{learning}"}}
]}}
"#
    )
}

/// The evaluator's report for the `sprint` scenario: every floor dimension passed.
const SPRINT_EVALUATION: &str = r#"{"schemaVersion": 1, "signals": [
  {"type": "evaluation", "timestamp": "2026-11-30T12:00:00Z", "status": "passed", "dimensions": [
    {"name": "correctness", "passed": true},
    {"name": "completeness", "passed": true},
    {"name": "safety", "passed": true},
    {"name": "consistency", "passed": true},
    {"name": "robustness", "passed": true}
  ]}
]}
"#;

/// The demo's two-task sprint (`greet`, then `farewell`), each spawn scripted by role, task and
/// round: `greet` passes in round 1; `farewell` leaves a TODO in round 1, which the sprint's
/// check (`! grep -q TODO *.txt`) rejects, and round 2, resuming the same session with the
/// check's output, writes it right. The evaluator (when the sprint has one) passes each round.
fn sprint_scenario(cli: &str) -> Option<Scenario> {
    let generator = |file: &str, body: &str, subject: &str, learning: &str| -> Option<Vec<Step>> {
        Some(vec![
            Step::write_named_for(cli, file, body)?,
            Step::write_signals_for(cli, sprint_complete(subject, learning))?,
            Step::text("Done: the file is written and signals.json records it."),
        ])
    };
    let evaluator = || -> Option<Vec<Step>> {
        Some(vec![
            Step::write_signals_for(cli, SPRINT_EVALUATION)?,
            Step::text("Reviewed: every dimension passes."),
        ])
    };
    Some(
        Scenario::default()
            .with_round(
                Role::Generator,
                "greet",
                1,
                generator(
                    "hello.txt",
                    "Hello from the sprint.\n",
                    "Add the greeting",
                    "Greetings live in hello.txt.",
                )?,
            )
            .with_round(Role::Evaluator, "greet", 1, evaluator()?)
            .with_round(
                Role::Generator,
                "farewell",
                1,
                generator(
                    "bye.txt",
                    "TODO: say goodbye\n",
                    "Add the farewell",
                    "The check rejects TODOs.",
                )?,
            )
            .with_round(
                Role::Generator,
                "farewell",
                2,
                generator(
                    "bye.txt",
                    "Goodbye from the sprint.\n",
                    "Add the farewell, without the TODO",
                    "Finish a file before reporting it done.",
                )?,
            )
            .with_round(Role::Evaluator, "farewell", 2, evaluator()?),
    )
}

/// The demo's plan of its two-task sprint: `greet`, then `farewell`, each brief naming its file
/// under `project` by its absolute path (how the `sprint` scenario's steps find where to write).
fn sprint_plan_signals(project: &str) -> String {
    serde_json::json!({"schemaVersion": 1, "signals": [{
        "type": "task-plan", "timestamp": "2026-11-30T12:00:00Z",
        "tasks": [
            {"id": "greet", "title": "Add a greeting",
             "brief": format!("Write a one-line greeting to {project}/hello.txt."),
             "acceptanceCriteria": ["hello.txt holds one line that greets the reader"]},
            {"id": "farewell", "title": "Add a farewell",
             "brief": format!("Write a one-line farewell to {project}/bye.txt."),
             "dependsOn": ["greet"],
             "acceptanceCriteria": ["bye.txt holds one line that says goodbye, with no TODO left"]}
        ]
    }]})
    .to_string()
}

/// The demo's pull request text, as its agent writes it.
const SPRINT_PR: &str = r#"{"schemaVersion": 1, "signals": [{
  "type": "pr-content", "timestamp": "2026-11-30T12:00:00Z",
  "title": "Greet and say goodbye",
  "body": "Adds `hello.txt` with a greeting and `bye.txt` with a farewell.\n\nThe farewell took a second round: the check rejected the TODO its first round left."
}]}
"#;

fn scenario(name: &str, cli: &str, bytes: usize, project: &str) -> Option<Scenario> {
    let done = Step::text("Done: hello.txt exists and signals.json records the result.");
    let write_hello = Step::write_named_for(cli, "hello.txt", "Hello from the fake model API.\n")?;
    let write_signals = Step::write_signals_for(cli, DEMO_SIGNALS)?;
    let mut s = match name {
        // A rate limit first: Corral backs off, resumes the session, and the agent finishes.
        "demo" => Scenario::script([
            Step::HttpError {
                status: 429,
                retry_after_secs: Some(1),
                body: None,
            },
            write_hello,
            write_signals,
            done,
        ]),
        "happy" => Scenario::script([write_hello, write_signals, done]),
        // Three short rate limits (`retry-after: 1`), then the agent's work: what a CLI's own
        // retries absorb at the length the API asks for.
        "three-429s" => {
            let mut steps = vec![Step::rate_limited(1); 3];
            steps.extend([write_hello, write_signals, done]);
            Scenario::script(steps)
        }
        "sprint" => sprint_scenario(cli)?,
        "sprint-plan" => Scenario::script([
            Step::write_signals_for(cli, sprint_plan_signals(project))?,
            Step::text("Planned: two tasks, the farewell after the greeting."),
        ]),
        "sprint-pr" => Scenario::script([
            Step::write_signals_for(cli, SPRINT_PR)?,
            Step::text("Written: the pull request's title and description."),
        ]),
        "rate-limited" => Scenario::forever(Step::HttpError {
            status: 429,
            retry_after_secs: Some(1),
            body: None,
        }),
        "hang" => Scenario::forever(Step::HangBeforeHeaders),
        "stall" => Scenario::forever(Step::StallMidStream),
        "huge-text" => Scenario::script([Step::text(bulk_text(bytes))]),
        "huge-write" => Scenario::script([
            Step::write_named_for(cli, HUGE_WRITE_FILE, bulk_text(bytes))?,
            Step::text("Done: big.txt is written."),
        ]),
        _ => return None,
    };
    s.then = s.then.or(Some(Step::text("ok")));
    Some(s)
}

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let mut name = "demo".to_string();
    let mut cli = "claude".to_string();
    let mut log: Option<PathBuf> = None;
    let mut bytes: usize = 20 * 1024 * 1024;
    let mut project = String::from("/tmp/project");
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--scenario" => name = args.next().unwrap_or_default(),
            "--cli" => cli = args.next().unwrap_or_default(),
            "--log" => log = args.next().map(PathBuf::from),
            "--project" => project = args.next().unwrap_or_default(),
            "--bytes" => match args.next().and_then(|b| b.parse().ok()) {
                Some(n) => bytes = n,
                None => {
                    eprintln!("corral-fake-api: --bytes needs a number of bytes");
                    return ExitCode::from(64);
                }
            },
            _ => {
                eprintln!(
                    "usage: corral-fake-api [--scenario demo|happy|sprint|sprint-plan|sprint-pr|rate-limited|\
                     hang|stall|huge-text|huge-write] [--cli claude|codex|opencode|grok|copilot] \
                     [--bytes N] [--log FILE] [--project DIR]"
                );
                return ExitCode::from(64);
            }
        }
    }
    let Some(scenario) = scenario(&name, &cli, bytes, &project) else {
        eprintln!("corral-fake-api: unknown scenario {name:?} or CLI {cli:?}");
        return ExitCode::from(64);
    };
    let api = match log {
        Some(path) => FakeApi::start_with_log(scenario, &path),
        None => FakeApi::start(scenario),
    };
    let api = match api {
        Ok(api) => api,
        Err(e) => {
            eprintln!("corral-fake-api: cannot start: {e}");
            return ExitCode::from(1);
        }
    };
    println!("listening on {}", api.url());
    let _ = std::io::stdout().flush();
    // Serve until whoever started us closes our stdin.
    let stdin = std::io::stdin();
    for line in stdin.lock().lines() {
        if line.is_err() {
            break;
        }
    }
    drop(api);
    ExitCode::SUCCESS
}
