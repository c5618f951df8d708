//! `corral run` for daily use (issue 11): the record stays out of git, runs and settings are
//! found from anywhere in the project.

use std::path::Path;

use corral_test_support::fake_api::{Scenario, Step};

use crate::providers::{CLAUDE, World};
use crate::support::*;

fn git(dir: &Path, args: &[&str]) -> String {
    let out = corral_test_support::command(Path::new("git"))
        .args(["-c", "user.name=t", "-c", "user.email=t@t", "-C"])
        .arg(dir)
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A Claude stand-in that announces its session and answers `answer`.
fn answering_agent(env: &Env, answer: &str) -> FakeClaude {
    FakeClaude::new(
        env,
        "",
        &[FakeClaude::init("fake"), FakeClaude::result(answer, 0.001)],
        "",
    )
}

#[test]
fn runs_stay_out_of_git_and_are_found_from_a_subdirectory() {
    let env = Env::new();
    let project = env.project();
    git(&project, &["init", "-q"]);
    env.write("project/corral.toml", "[retry]\ncorrective_retries = 1\n");
    env.write("project/src/lib.rs", "\n");
    git(&project, &["add", "-A"]);
    git(&project, &["commit", "-q", "-m", "init"]);
    let agent = answering_agent(&env, "Done.");
    let (name, path) = agent.setting();
    for _ in 0..2 {
        // The second run would be refused if the first one's record made the tree dirty.
        let out = env
            .corral()
            .current_dir(project.join("src"))
            .env(name, &path)
            .env("CORRAL_SANDBOX__REFUSE_DIRTY_TREE", "true")
            .args(["run", "--no-contract", "--sandbox", "native"])
            .args(["--allow-degraded-native", "hi"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", transcript(&env, &out));
    }
    assert_eq!(git(&project, &["status", "--porcelain"]), "");
    assert!(!project.join("src/.corral").exists());
    let runs: Vec<_> = std::fs::read_dir(project.join(".corral/runs"))
        .unwrap()
        .flatten()
        .collect();
    assert_eq!(runs.len(), 2, "{runs:?}");
    let list = env
        .corral()
        .current_dir(project.join("src"))
        .args(["runs", "list"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&list.stdout);
    for run in &runs {
        assert!(text.contains(&*run.file_name().to_string_lossy()), "{text}");
    }
    let show = env
        .corral()
        .current_dir(project.join("src"))
        .args(["config", "show"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&show.stdout);
    let line = text
        .lines()
        .find(|l| l.starts_with("retry.corrective_retries"))
        .unwrap();
    assert!(
        line.contains("= 1") && line.contains("project/corral.toml"),
        "{line}"
    );
}

#[test]
fn doctor_with_nothing_installed_fails_and_checks_bubblewrap() {
    let env = Env::new();
    let out = env
        .corral()
        .args(["doctor"])
        .env("PATH", "/nonexistent")
        .env("CORRAL_SANDBOX__BWRAP", "/nonexistent/bwrap")
        .output()
        .unwrap();
    let text = transcript(&env, &out);
    assert_eq!(out.status.code(), Some(8), "{text}");
    assert!(
        text.contains("sandbox\n  ✗ /nonexistent/bwrap is not installed or not runnable")
            && text.contains("hint: install bubblewrap"),
        "{text}"
    );
}

#[test]
fn runs_follow_exits_with_the_followed_runs_code() {
    let env = Env::new();
    let dir = env
        .project()
        .join(".corral/runs/20261201T100000Z-claude-abcdef");
    std::fs::create_dir_all(&dir).unwrap();
    let record = serde_json::json!({
        "run_id": "20261201T100000Z-claude-abcdef", "provider": "claude", "model": null,
        "cwd": env.project(), "started_at": "2026-12-01T10:00:00Z",
        "finished_at": "2026-12-01T10:05:00Z", "outcome": "idle-timeout", "exit_code": 5,
        "session_id": null, "signals_valid": null, "signals_error": null, "signal_kinds": [],
        "attempts": 1, "provider_runs": 1, "usage": {}, "duration_ms": 300000, "error": null,
        "resume_command": null,
    });
    std::fs::write(dir.join("run.json"), record.to_string()).unwrap();
    std::fs::write(dir.join("events.jsonl"), "").unwrap();
    let out = env
        .corral()
        .args(["runs", "follow", "20261201T1000"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(5), "{}", transcript(&env, &out));
}

/// `runs follow` shows a run from its log as `corral run` shows it: the agent's events as the
/// live view's lines (no raw kinds, no unparsed JSON), each at its time in the run, cut to the
/// terminal's width by display width with a tool call's file name kept; the end on stdout.
/// `--json` gives the raw events instead, one per line, and the end on stderr.
#[test]
fn runs_follow_renders_as_the_live_view_and_json_gives_the_raw_events() {
    let env = Env::new();
    let id = "20261201T100000Z-claude-f011ow";
    let dir = env.project().join(".corral/runs").join(id);
    std::fs::create_dir_all(&dir).unwrap();
    let record = serde_json::json!({
        "run_id": id, "provider": "claude", "model": null,
        "cwd": env.project(), "started_at": "2026-12-01T10:00:00Z",
        "finished_at": "2026-12-01T10:01:05Z", "outcome": "succeeded", "exit_code": 0,
        "session_id": "60a5da9f-0000-4000-8000-000000000001", "signals_valid": null,
        "signals_error": null, "signal_kinds": [], "attempts": 2, "provider_runs": 1,
        "usage": {}, "duration_ms": 65000, "error": null, "resume_command": null,
    });
    std::fs::write(dir.join("run.json"), record.to_string()).unwrap();
    let path =
        "/home/someone/projects/プロジェクト/crates/cli/src/deeply/nested/module/render_status.rs";
    let session = "60a5da9f-0000-4000-8000-000000000001";
    let lines = [
        serde_json::json!({"mono_ms": 0.4, "attempt": 1, "kind": "run_started", "provider": "claude"}),
        serde_json::json!({"mono_ms": 10.0, "attempt": 1, "kind": "spawn", "program": "/bin/claude", "pid": 42, "resume": null}),
        serde_json::json!({"mono_ms": 700.0, "attempt": 1, "kind": "agent", "event": "session_started", "session_id": session, "model": "claude-opus"}),
        serde_json::json!({"mono_ms": 900.0, "attempt": 1, "kind": "agent", "event": "unparsed", "line": "{\"type\":\"system\",\"subtype\":\"task_started\"}"}),
        serde_json::json!({"mono_ms": 1500.0, "attempt": 1, "kind": "agent", "event": "tool_use", "id": "t1", "name": "Edit", "input": {"file_path": path}}),
        serde_json::json!({"mono_ms": 1600.0, "attempt": 1, "kind": "stderr", "line": "noise"}),
        serde_json::json!({"mono_ms": 2000.0, "attempt": 1, "kind": "agent", "event": "terminal_result", "is_error": true, "text": "API Error: 429"}),
        serde_json::json!({"mono_ms": 2100.0, "attempt": 1, "kind": "exit", "code": 1, "signal": null}),
        serde_json::json!({"mono_ms": 2200.0, "attempt": 1, "kind": "backoff", "wait_ms": 53000, "reason": "exponential backoff", "retry": 1, "next_resume": session}),
        serde_json::json!({"mono_ms": 55300.0, "attempt": 2, "kind": "spawn", "program": "/bin/claude", "pid": 43, "resume": session}),
        serde_json::json!({"mono_ms": 64000.0, "attempt": 2, "kind": "agent", "event": "text", "text": "日本語の答えはここにあります。".repeat(8)}),
        serde_json::json!({"mono_ms": 64900.0, "attempt": 2, "kind": "agent", "event": "terminal_result", "is_error": false, "text": "Recovered and done."}),
        serde_json::json!({"mono_ms": 65000.0, "attempt": 2, "kind": "run_finished", "outcome": "succeeded"}),
    ];
    let log: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(dir.join("events.jsonl"), &log).unwrap();
    let out = env
        .corral()
        .env("COLUMNS", "80")
        .args(["runs", "follow"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", transcript(&env, &out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    for line in stderr.lines() {
        assert!(
            unicode_width::UnicodeWidthStr::width(line) <= 80,
            "wider than 80 columns: {line}"
        );
    }
    insta::assert_snapshot!(transcript(&env, &out));
    let json = env
        .corral()
        .args(["runs", "follow", "--json", id])
        .output()
        .unwrap();
    assert_eq!(json.status.code(), Some(0), "{}", transcript(&env, &json));
    let events: Vec<serde_json::Value> = String::from_utf8_lossy(&json.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(events, lines);
    assert!(
        String::from_utf8_lossy(&json.stderr).contains("finished: succeeded (exit 0)"),
        "{}",
        transcript(&env, &json)
    );
}

#[test]
fn chat_without_the_cli_exits_like_run() {
    let env = Env::new();
    let out = env
        .corral()
        .args(["chat", "--provider", "codex"])
        .env("CORRAL_PROVIDERS__CODEX__COMMAND", "/nonexistent/codex")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(8), "{}", transcript(&env, &out));
}

#[test]
fn the_answer_is_on_stdout_in_the_json_summary_in_run_json_and_in_the_o_file() {
    let env = Env::new();
    let agent = answering_agent(&env, "The answer is 42.\nSecond line.");
    let (name, path) = agent.setting();
    let answer_file = env.dir.path().join("answer.txt");
    let out = env
        .corral()
        .current_dir(env.dir.path())
        .env(name, &path)
        .args([
            "run",
            "-C",
            "project",
            "--no-contract",
            "--sandbox",
            "native",
        ])
        .args(["--allow-degraded-native", "-o"])
        .arg(&answer_file)
        .arg("what is it?")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", transcript(&env, &out));
    // The answer alone on stdout (`$(corral run …)` is the answer); the summary on stderr.
    assert_eq!(stdout, "The answer is 42.\nSecond line.\n");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("outcome   succeeded"),
        "{}",
        transcript(&env, &out)
    );
    assert_eq!(
        std::fs::read_to_string(&answer_file).unwrap(),
        "The answer is 42.\nSecond line.\n"
    );
    let dir = only_run_dir(&env.project()).unwrap();
    assert_eq!(record(&dir)["result"], "The answer is 42.\nSecond line.");
    let out = env
        .corral()
        .env(name, &path)
        .args(["run", "--json", "--no-contract", "--sandbox", "native"])
        .args(["--allow-degraded-native", "again"])
        .output()
        .unwrap();
    assert_eq!(
        summary(&out.stdout)["result"],
        "The answer is 42.\nSecond line."
    );
}

#[test]
fn runs_show_prints_a_summary_or_the_record_as_json() {
    let env = Env::new();
    let agent = answering_agent(&env, "All good.");
    let (name, path) = agent.setting();
    let out = env
        .corral()
        .env(name, &path)
        .args(["run", "--no-contract", "--sandbox", "native"])
        .args(["--allow-degraded-native", "Say it is all good"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", transcript(&env, &out));
    let dir = only_run_dir(&env.project()).unwrap();
    let id = dir.file_name().unwrap().to_string_lossy().into_owned();
    let json = env
        .corral()
        .args(["runs", "show", "--json", &id])
        .output()
        .unwrap();
    let value: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(value["runId"], id.as_str());
    // The resume hint is the short one; the session id has its own field.
    assert_eq!(value["resumeCommand"], format!("corral resume {id}"));
    assert_eq!(value["sessionId"], FAKE_SESSION);
    assert_eq!(record(&dir)["resumeCommand"], format!("corral resume {id}"));
    let listed = env
        .corral()
        .args(["runs", "list", "--json"])
        .output()
        .unwrap();
    // One record a line.
    let listed = String::from_utf8_lossy(&listed.stdout);
    let listed: serde_json::Value = serde_json::from_str(listed.lines().next().unwrap()).unwrap();
    assert_eq!(listed["resumeCommand"], format!("corral resume {id}"));
    let human = env.corral().args(["runs", "show", &id]).output().unwrap();
    // Without an id, the latest run (as `gh run view`).
    let latest = env.corral().args(["runs", "show"]).output().unwrap();
    assert_eq!(latest.stdout, human.stdout, "{}", transcript(&env, &latest));
    let text = String::from_utf8_lossy(&human.stdout);
    assert!(
        text.contains("outcome   succeeded (exit 0)")
            && text.contains("prompt    Say it is all good")
            && text.contains("answer\n  All good.\n"),
        "{text}"
    );
    let list = env.corral().args(["runs", "list"]).output().unwrap();
    let text = String::from_utf8_lossy(&list.stdout);
    let row = text.lines().find(|l| l.starts_with(&id)).unwrap();
    let started = record(&dir)["startedAt"].as_str().unwrap().to_string();
    // Shown in the local zone (UTC here: the tests set TZ) with its name and the year.
    let started = format!("{} {} UTC", &started[..10], &started[11..19]);
    assert!(
        text.starts_with("run ")
            && text.lines().next().unwrap().contains("started")
            && row.contains("succeeded")
            && row.contains(&started)
            && row.contains("$0.0010")
            && row.ends_with("Say it is all good"),
        "{text}"
    );
}

/// A Claude stand-in that notes each `--version` it answers in `count`.
fn counting_agent(env: &Env, count: &Path) -> FakeClaude {
    let agent = answering_agent(env, "Done.");
    let script = std::fs::read_to_string(&agent.path).unwrap();
    let counted = script.replacen(
        "if [ \"$1\" = \"--version\" ]; then ",
        &format!(
            "if [ \"$1\" = \"--version\" ]; then echo v >> '{}'; ",
            count.display()
        ),
        1,
    );
    assert_ne!(counted, script, "the stand-in's --version branch moved");
    std::fs::write(&agent.path, counted).unwrap();
    agent
}

fn version_calls(count: &Path) -> usize {
    std::fs::read_to_string(count).map_or(0, |t| t.lines().count())
}

#[test]
fn an_unchanged_cli_is_asked_its_version_once() {
    let env = Env::new();
    let count = env.dir.path().join("version-calls");
    let agent = counting_agent(&env, &count);
    let (name, path) = agent.setting();
    let run = |expected_calls: usize| {
        let out = env
            .corral()
            .env(name, &path)
            .args(["run", "--no-contract", "--sandbox", "native"])
            .args(["--allow-degraded-native", "hi"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", transcript(&env, &out));
        assert_eq!(version_calls(&count), expected_calls);
        out
    };
    run(1);
    run(1);
    let cache = env.home().join(".cache/corral/cli-versions.json");
    assert!(cache.is_file(), "the cache is in the user's cache dir");
    let dirs: Vec<_> = std::fs::read_dir(env.project().join(".corral/runs"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    let cached: Vec<bool> = dirs
        .iter()
        .map(|d| {
            kinds(&log(d), "version_checked")[0]["cached"]
                .as_bool()
                .unwrap()
        })
        .collect();
    assert_eq!(
        cached.iter().filter(|c| **c).count(),
        1,
        "one run asked, one used the cache: {cached:?}"
    );

    // A changed binary is asked again.
    let script = std::fs::read_to_string(&agent.path).unwrap();
    std::fs::write(&agent.path, format!("{script}\n# upgraded\n")).unwrap();
    run(2);
    run(2);

    // A corrupt cache is ignored (with a warning) and rewritten.
    std::fs::write(&cache, "{ not json").unwrap();
    let out = run(3);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("version cache is corrupt"),
        "{}",
        transcript(&env, &out)
    );
    run(3);
}

/// A prompt piped on stdin, with no prompt argument and no `-`, is read as `claude -p` reads it:
/// the pinned Claude Code sends it to the (fake) model, and stdout, what `$(corral run)` holds,
/// is the answer alone; the summary is on stderr.
#[test]
fn a_piped_prompt_without_an_argument_is_read_and_stdout_is_the_answer_alone() {
    let world = World::new(&CLAUDE, |_| {
        Scenario::script([Step::text("Paris is the capital of France.")])
    });
    let prompt = "Which city is the capital of France? (piped, with no argument)";
    let out = world
        .corral_run()
        .arg("--no-contract")
        .write_stdin(format!("{prompt}\n"))
        .output()
        .unwrap();
    let text = transcript(&world.env, &out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "Paris is the capital of France.\n",
        "{text}"
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("outcome   succeeded (exit 0)"),
        "{text}"
    );
    // The model was asked the piped prompt, not an empty or default one.
    let asked: Vec<String> = world
        .api
        .model_requests()
        .into_iter()
        .filter_map(|r| r.last_user_text)
        .collect();
    assert!(asked.iter().any(|t| t.contains(prompt)), "{asked:#?}");
    let dir = only_run_dir(&world.env.project()).unwrap();
    let sent = std::fs::read_to_string(dir.join("prompt.md")).unwrap();
    assert!(sent.contains(prompt), "{sent}");
}

/// What varies from run to run in `corral run`'s plain output: the run id, the scratch path, the
/// time in the run that prefixes each line.
fn stable_run_output(env: &Env, run_id: &str, text: &[u8]) -> String {
    env.clean(text)
        .replace(run_id, "<run-id>")
        .lines()
        .map(|line| match (line.starts_with('['), line.find("] ")) {
            (true, Some(end)) => format!("[<t>]{}", &line[end + 1..]),
            _ => line.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// `corral run`'s plain output (stderr not a terminal): the answer alone on stdout; the event
/// lines and the summary on stderr.
#[test]
fn run_prints_the_answer_on_stdout_and_the_rest_on_stderr() {
    let env = Env::new();
    let agent = answering_agent(&env, "All good.\nSecond line.");
    let (name, path) = agent.setting();
    let out = env
        .corral()
        .env(name, &path)
        .args(["run", "--no-contract", "--sandbox", "native"])
        .args(["--allow-degraded-native", "Say it is all good"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", transcript(&env, &out));
    let dir = only_run_dir(&env.project()).unwrap();
    let id = dir.file_name().unwrap().to_string_lossy().into_owned();
    insta::assert_snapshot!("run_stdout", stable_run_output(&env, &id, &out.stdout));
    insta::assert_snapshot!("run_stderr", stable_run_output(&env, &id, &out.stderr));
}

/// Writes a finished run's record, prompt and answer under the project, at fixed times.
fn recorded_run(env: &Env, id: &str, outcome: &str, exit: u8, prompt: &str, answer: Option<&str>) {
    let dir = env.project().join(".corral/runs").join(id);
    std::fs::create_dir_all(&dir).unwrap();
    // The id's time: `20261201T100000Z` is 2026-12-01T10:00:00Z (every id here is on the hour).
    let started = format!(
        "{}-{}-{}T{}:{}:{}Z",
        &id[..4],
        &id[4..6],
        &id[6..8],
        &id[9..11],
        &id[11..13],
        &id[13..15]
    );
    let record = serde_json::json!({
        "runId": id, "provider": "claude", "model": "claude-opus", "cwd": "/work/project",
        "startedAt": started, "finishedAt": started.replace(":00:00Z", ":02:05Z"),
        "outcome": outcome, "exitCode": exit,
        "sessionId": "60a5da9f-0000-4000-8000-000000000001", "signalsValid": true,
        "signalsError": null, "signalKinds": ["task-complete"], "attempts": 1, "providerRuns": 1,
        "usage": {"input": 1200, "output": 340, "costUsd": 0.0123}, "durationMs": 125000,
        "error": null, "result": answer, "resumeCommand": format!("corral resume {id}"),
    });
    std::fs::write(dir.join("run.json"), record.to_string()).unwrap();
    std::fs::write(dir.join("prompt.md"), prompt).unwrap();
}

/// `runs list` and `runs show` with the one time format (the local zone with its name and the
/// year; the tests' zone is UTC) and the table fitted to no terminal.
#[test]
fn runs_list_and_runs_show_print_times_and_tables_one_way() {
    let env = Env::new();
    recorded_run(
        &env,
        "20261201T100000Z-claude-aaaaaa",
        "succeeded",
        0,
        "Fix the failing test in the parser\nand say what it was.",
        Some("The parser dropped the last token.\nFixed in src/parse.rs."),
    );
    recorded_run(
        &env,
        "20261201T110000Z-claude-bbbbbb",
        "rate-limited",
        4,
        "日本語のプロンプト: translate the README",
        None,
    );
    let list = env.corral().args(["runs", "list"]).output().unwrap();
    insta::assert_snapshot!("runs_list", transcript(&env, &list));
    let show = env
        .corral()
        .args(["runs", "show", "20261201T1000"])
        .output()
        .unwrap();
    insta::assert_snapshot!("runs_show", transcript(&env, &show));
}
