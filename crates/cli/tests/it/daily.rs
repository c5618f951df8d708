//! `corral run` for daily use (issue 11): the record stays out of git, runs and settings are
//! found from anywhere in the project.

use std::path::Path;

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
    assert_eq!(value["run_id"], id.as_str());
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
    let started = record(&dir)["started_at"].as_str().unwrap().to_string();
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
