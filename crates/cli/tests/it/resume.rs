//! Resuming for daily use (issue 11): a `--resume` whose session is gone says it ran cold (or,
//! with `--no-cold-fallback`, fails as a stale session); one run keeps one attempt counter, one
//! clock and one `run_finished` across its corrective retries; `--continue` and `corral resume`
//! take the provider, working directory and session from the run record.

use std::path::Path;

use serde_json::Value;

use crate::support::*;

/// A session id no CLI has.
const GONE: &str = "99999999-8888-4777-8666-555555555555";

/// A Claude stand-in that fails a `--resume` as Claude Code does for a session it does not have,
/// and otherwise announces [`FAKE_SESSION`] and answers.
fn forgetful_agent(env: &Env) -> FakeClaude {
    FakeClaude::new(
        env,
        r#"case " $* " in *" --resume "*)
  echo "No conversation found with session ID: $(printf '%s\n' "$@" | grep -A1 -- --resume | tail -n 1)" >&2
  exit 1;;
esac"#,
        &[FakeClaude::init("fake"), FakeClaude::result("Done.", 0.001)],
        "",
    )
}

fn native(cmd: &mut assert_cmd::Command) -> &mut assert_cmd::Command {
    cmd.args(["--sandbox", "native", "--allow-degraded-native"])
}

fn strings(values: &[&Value], key: &str) -> Vec<Value> {
    values.iter().map(|v| v[key].clone()).collect()
}

#[test]
fn a_gone_session_runs_cold_once_and_says_so_everywhere() {
    let env = Env::new();
    let agent = forgetful_agent(&env);
    let (name, path) = agent.setting();
    let mut cmd = env.corral();
    cmd.env(name, &path)
        .args(["run", "--no-contract", "--resume", GONE]);
    let out = native(&mut cmd).arg("hi").output().unwrap();
    let text = transcript(&env, &out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "session {GONE} not found: running the task cold, in a new session"
        )),
        "the terminal says so: {text}"
    );
    assert!(
        stderr.contains(&format!(
            "resumed   no: session {GONE} was not found; the task ran cold, in a new session"
        )),
        "the summary (on stderr) says so: {text}"
    );
    let dir = only_run_dir(&env.project()).unwrap();
    let record = record(&dir);
    assert_eq!(record["coldFallbackFrom"], GONE, "{record}");
    assert_eq!(record["sessionId"], FAKE_SESSION, "{record}");
    let log = log(&dir);
    let spawns = kinds(&log, "spawn");
    assert_eq!(strings(&spawns, "resume"), [Value::from(GONE), Value::Null]);
    assert_eq!(
        strings(&spawns, "attempt"),
        [Value::from(1), Value::from(2)]
    );

    // The --json summary carries it too.
    let mut cmd = env.corral();
    cmd.env(name, &path)
        .args(["run", "--json", "--no-contract", "--resume", GONE]);
    let out = native(&mut cmd).arg("hi").output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", transcript(&env, &out));
    assert_eq!(summary(&out.stdout)["coldFallbackFrom"], GONE);
}

#[test]
fn no_cold_fallback_ends_a_gone_session_as_stale() {
    let env = Env::new();
    let agent = forgetful_agent(&env);
    let (name, path) = agent.setting();
    let mut cmd = env.corral();
    cmd.env(name, &path)
        .args(["run", "--json", "--no-contract", "--no-cold-fallback"])
        .args(["--resume", GONE]);
    let out = native(&mut cmd).arg("hi").output().unwrap();
    let text = transcript(&env, &out);
    assert_eq!(out.status.code(), Some(6), "{text}");
    let s = summary(&out.stdout);
    assert_eq!(s["outcome"], "stale-session", "{s}");
    assert_eq!(s["coldFallbackFrom"], Value::Null, "{s}");
    assert!(
        s["error"]
            .as_str()
            .is_some_and(|e| e.contains(&format!("session {GONE} not found"))),
        "{s}"
    );
    let log = log(&run_dir(&s));
    assert_eq!(kinds(&log, "spawn").len(), 1, "no cold run: {log:#?}");
    assert_eq!(kinds(&log, "run_finished").len(), 1, "{log:#?}");
}

/// A Claude stand-in that writes invalid signals on its first run and valid ones when it is
/// resumed (the corrective retry); the signals path of the first prompt is kept in `state`,
/// since the corrective prompt is not the first one.
fn correctable_agent(env: &Env, state: &Path) -> FakeClaude {
    let before = format!(
        r#"case " $* " in
  *" --resume "*) printf '%s' '{GOOD_SIGNALS}' > "$(cat '{state}')";;
  *) printf '%s' "$SIGNALS" > '{state}'; printf '{{}}' > "$SIGNALS";;
esac"#,
        state = state.display()
    );
    FakeClaude::new(
        env,
        &before,
        &[FakeClaude::init("fake"), FakeClaude::result("Done.", 0.001)],
        "",
    )
}

#[test]
fn a_corrective_retry_keeps_one_attempt_counter_one_clock_and_one_run_finished() {
    let env = Env::new();
    let state = env.dir.path().join("signals-path");
    let agent = correctable_agent(&env, &state);
    let (name, path) = agent.setting();
    let mut cmd = env.corral();
    cmd.env(name, &path).args(["run", "do the task"]);
    let out = native(&mut cmd).output().unwrap();
    let text = transcript(&env, &out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let starts: Vec<&str> = stderr.lines().filter(|l| l.contains("attempt ")).collect();
    assert!(
        stderr.contains("attempt 2"),
        "the corrective run is attempt 2: {starts:?}"
    );
    let dir = only_run_dir(&env.project()).unwrap();
    let record = record(&dir);
    assert_eq!(record["providerRuns"], 2, "{record}");
    assert_eq!(record["attempts"], 2, "{record}");
    let log = log(&dir);
    let spawns = kinds(&log, "spawn");
    assert_eq!(
        strings(&spawns, "attempt"),
        [Value::from(1), Value::from(2)]
    );
    assert_eq!(spawns[1]["resume"], FAKE_SESSION);
    let attempts: Vec<u64> = log.iter().filter_map(|v| v["attempt"].as_u64()).collect();
    assert!(
        attempts.windows(2).all(|w| w[0] <= w[1]),
        "attempt numbers never go backwards: {attempts:?}"
    );
    let clock: Vec<f64> = log.iter().filter_map(|v| v["monoMs"].as_f64()).collect();
    assert!(
        clock.windows(2).all(|w| w[0] <= w[1]),
        "mono_ms never restarts: {clock:?}"
    );
    assert_eq!(kinds(&log, "run_started").len(), 2, "one per provider run");
    assert_eq!(kinds(&log, "provider_run_finished").len(), 2, "{log:#?}");
    let finished = kinds(&log, "run_finished");
    assert_eq!(finished.len(), 1, "{log:#?}");
    assert_eq!(
        log.last().map(|v| &v["kind"]),
        Some(&Value::from("run_finished"))
    );
    assert_eq!(finished[0]["attempts"], 2);
    assert_eq!(finished[0]["outcome"], "succeeded");
}

/// A Claude stand-in that answers and notes each argv it was started with in `argv`.
fn noting_agent(env: &Env, argv: &Path) -> FakeClaude {
    FakeClaude::new(
        env,
        &format!("echo \"$*\" >> '{}'", argv.display()),
        &[FakeClaude::init("fake"), FakeClaude::result("Done.", 0.001)],
        "",
    )
}

#[test]
fn continue_and_resume_take_provider_cwd_and_session_from_the_record() {
    let env = Env::new();
    let argv = env.dir.path().join("argv");
    let agent = noting_agent(&env, &argv);
    let (name, path) = agent.setting();
    // The project root, so that a run from src/ is recorded under the project's .corral/.
    env.write("project/corral.toml", "[run]\n");
    std::fs::create_dir_all(env.project().join("src")).unwrap();
    let mut first = env.corral();
    first
        .env(name, &path)
        .args(["run", "--no-contract", "-C", "src"]);
    let out = native(&mut first).arg("start").output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", transcript(&env, &out));
    let first_dir = only_run_dir(&env.project()).unwrap();
    let first_id = first_dir
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();

    // --continue from the project root, with another default provider: the record decides.
    let mut cont = env.corral();
    cont.env(name, &path)
        .env("CORRAL_RUN__PROVIDER", "codex")
        .args(["run", "--json", "--no-contract", "--continue"]);
    let out = native(&mut cont).output().unwrap();
    let text = transcript(&env, &out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    let s = summary(&out.stdout);
    let continued = record(&run_dir(&s));
    assert_eq!(continued["provider"], "claude", "{continued}");
    assert!(
        continued["cwd"]
            .as_str()
            .is_some_and(|c| c.ends_with("/project/src")),
        "the first run's directory: {continued}"
    );
    let spawn = kinds(&log(&run_dir(&s)), "spawn")[0].clone();
    assert_eq!(spawn["resume"], FAKE_SESSION, "{spawn}");

    // corral resume <run-id prefix>, without a prompt.
    let mut resume = env.corral();
    resume
        .env(name, &path)
        .args(["resume", &first_id[..first_id.len() - 2], "--no-contract"]);
    let out = native(&mut resume).output().unwrap();
    let text = transcript(&env, &out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(&format!(
            "resuming session {FAKE_SESSION} of run {first_id}"
        )),
        "{text}"
    );
    let calls = std::fs::read_to_string(&argv).unwrap();
    let calls: Vec<&str> = calls.lines().filter(|l| *l != "--version").collect();
    assert_eq!(calls.len(), 3, "{calls:?}");
    assert!(!calls[0].contains("--resume"), "{calls:?}");
    for call in &calls[1..] {
        assert!(
            call.contains(&format!("--resume {FAKE_SESSION}")),
            "{calls:?}"
        );
    }

    // A provider that did not make the session is refused.
    let out = env
        .corral()
        .env(name, &path)
        .args(["resume", &first_id, "--provider", "codex", "x"])
        .output()
        .unwrap();
    let text = transcript(&env, &out);
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(
        text.contains("cannot be resumed with --provider codex"),
        "{text}"
    );
}

#[test]
fn continue_without_any_session_is_a_usage_error() {
    let env = Env::new();
    let out = env
        .corral()
        .args(["run", "--continue", "more"])
        .output()
        .unwrap();
    let text = transcript(&env, &out);
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(
        text.contains("--continue: no run under") && text.contains("recorded a session"),
        "{text}"
    );
}

/// `corral resume` takes the session from `session.json` as the engine writes it now
/// (`sessionId`), and from one written before the one key casing (`session_id`): each run's
/// record names another session, which must not win.
#[test]
fn resume_reads_the_session_of_session_json_in_either_casing() {
    let env = Env::new();
    let argv = env.dir.path().join("argv");
    let agent = noting_agent(&env, &argv);
    let (name, path) = agent.setting();
    let in_record = "aaaaaaaa-0000-4000-8000-000000000000";
    let cases = [
        (
            "20261201T100000Z-claude-camel1",
            "sessionId",
            "bbbbbbbb-0000-4000-8000-000000000001",
        ),
        (
            "20261201T100001Z-claude-snake1",
            "session_id",
            "cccccccc-0000-4000-8000-000000000002",
        ),
    ];
    for (id, key, session) in cases {
        let dir = env.project().join(".corral/runs").join(id);
        std::fs::create_dir_all(&dir).unwrap();
        let record = serde_json::json!({
            "runId": id, "provider": "claude", "model": null, "cwd": env.project(),
            "startedAt": "2026-12-01T10:00:00Z", "finishedAt": "2026-12-01T10:01:00Z",
            "outcome": "rate-limited", "exitCode": 4, "sessionId": in_record,
            "signalsValid": null, "signalsError": null, "signalKinds": [], "attempts": 1,
            "providerRuns": 1, "usage": {}, "durationMs": 60000, "error": null,
            "resumeCommand": format!("corral resume {id}"),
        });
        std::fs::write(dir.join("run.json"), record.to_string()).unwrap();
        let mut meta = serde_json::json!({
            "provider": "claude", "model": null, "cwd": env.project(), "cliVersion": null,
            "attempt": 1,
        });
        meta[key] = Value::from(session);
        std::fs::write(dir.join("session.json"), meta.to_string()).unwrap();

        let _ = std::fs::remove_file(&argv);
        let mut resume = env.corral();
        resume
            .env(name, &path)
            .args(["resume", id, "--no-contract"]);
        let out = native(&mut resume).output().unwrap();
        let text = transcript(&env, &out);
        assert_eq!(out.status.code(), Some(0), "{key}: {text}");
        let calls = std::fs::read_to_string(&argv).unwrap();
        let call = calls.lines().find(|l| *l != "--version").unwrap();
        assert!(
            call.contains(&format!("--resume {session}")),
            "{key}: the session of session.json, not the record's {in_record}: {call}"
        );
    }
}
