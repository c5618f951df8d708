//! An unlucky user against `corral run` and `corral runs`: the run is stopped by SIGTERM or
//! SIGHUP, Corral is killed outright, the disk fills up, the run directory is removed, stdout is
//! closed early, the environment holds bytes that are not UTF-8, a supervisor died and left its
//! run "running". Every way a run ends leaves `run.json` with an outcome and the session id, and
//! a summary on the terminal.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use corral_test_support::Signal;
use serde_json::json;

use crate::support::*;

/// `corral` as a child this test can signal, with `env`'s clean environment.
fn spawn_corral(env: &Env, vars: &[(&str, &Path)], args: &[&str]) -> std::process::Child {
    let mut cmd = corral_test_support::command(&assert_cmd::cargo::cargo_bin("corral"));
    cmd.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", env.home())
        .current_dir(env.project())
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in vars {
        cmd.env(k, v);
    }
    cmd.spawn().unwrap()
}

/// Waits until the engine persisted the session id: the agent is in flight.
fn wait_for_session_file(env: &Env) -> std::path::PathBuf {
    let mut found = None;
    let seen = wait_until(Duration::from_secs(60), || {
        found = only_run_dir(&env.project()).filter(|d| {
            std::fs::read_to_string(d.join("session-id.txt"))
                .is_ok_and(|id| id.trim() == FAKE_SESSION)
        });
        found.is_some()
    });
    assert!(seen, "the run never persisted its session id");
    found.unwrap()
}

/// Waits until the run's record holds the session id.
fn wait_for_session(env: &Env) -> std::path::PathBuf {
    let mut found = None;
    let seen = wait_until(Duration::from_secs(60), || {
        found = only_run_dir(&env.project()).filter(|d| {
            std::fs::read(d.join("run.json")).is_ok_and(|b| {
                serde_json::from_slice::<serde_json::Value>(&b)
                    .is_ok_and(|r| r["sessionId"] == FAKE_SESSION)
            })
        });
        found.is_some()
    });
    assert!(seen, "the run never recorded its session id");
    found.unwrap()
}

/// The pids the agent recorded in `pids` (its own and its background child's).
fn agent_pids(env: &Env) -> Vec<u32> {
    corral_test_support::read_pids(&env.dir.path().join("pids"))
}

/// An agent that records its pid and a background child's (same process group), announces the
/// session, then waits; with `ignore_term` neither of them dies of SIGTERM.
fn lingering_agent(env: &Env, ignore_term: bool) -> FakeClaude {
    let pids = env.dir.path().join("pids");
    let trap = if ignore_term { "trap '' TERM" } else { "" };
    FakeClaude::new(
        env,
        &format!(
            "{trap}\necho $$ >> '{p}'\nsleep 600 &\necho $! >> '{p}'",
            p = pids.display()
        ),
        &[FakeClaude::init("fake")],
        "wait",
    )
}

#[test]
fn sigterm_and_sighup_end_a_run_like_ctrl_c_with_its_record_and_summary() {
    for signal in [Signal::SIGTERM, Signal::SIGHUP] {
        let env = Env::new();
        let agent = lingering_agent(&env, false);
        let (name, path) = agent.setting();
        let child = spawn_corral(
            &env,
            &[(name, &path)],
            &[
                "run",
                "--sandbox",
                "native",
                "--allow-degraded-native",
                "do it",
            ],
        );
        let dir = wait_for_session_file(&env);
        assert!(wait_until(Duration::from_secs(30), || agent_pids(&env)
            .len()
            == 2));
        corral_test_support::send_signal(child.id(), signal);
        let out = child.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(130), "{signal}: {stdout}");
        let record = record(&dir);
        assert_eq!(record["outcome"], "cancelled", "{signal}: {record}");
        assert_eq!(record["sessionId"], FAKE_SESSION);
        assert!(record["finishedAt"].is_string());
        assert!(
            stdout.contains(&format!("session   {FAKE_SESSION}"))
                && stdout.contains("resume    corral resume "),
            "{signal}: no summary: {stdout}"
        );
        assert_group_gone(&agent_pids(&env));
    }
}

#[test]
fn a_second_signal_stops_corral_at_once_and_kills_the_whole_process_group() {
    let env = Env::new();
    // The agent ignores SIGTERM and the kill ladder's grace is long: only the second Ctrl-C
    // ends this run soon.
    let agent = lingering_agent(&env, true);
    let (name, path) = agent.setting();
    let child = spawn_corral(
        &env,
        &[
            (name, &path),
            ("CORRAL_RUN__KILL_GRACE_MS", Path::new("600000")),
        ],
        &[
            "run",
            "--sandbox",
            "native",
            "--allow-degraded-native",
            "do it",
        ],
    );
    let dir = wait_for_session_file(&env);
    assert!(wait_until(Duration::from_secs(30), || agent_pids(&env)
        .len()
        == 2));
    corral_test_support::interrupt(child.id());
    // The first one is taken: the record is still running and corral still there.
    std::thread::sleep(Duration::from_millis(300));
    corral_test_support::interrupt(child.id());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    assert!(
        stderr.contains(&format!("session   {FAKE_SESSION}")),
        "{stderr}"
    );
    let record = record(&dir);
    assert_eq!(record["outcome"], "cancelled", "{record}");
    assert_eq!(record["sessionId"], FAKE_SESSION);
    assert!(
        record["error"]
            .as_str()
            .is_some_and(|e| e.contains("second interrupt")),
        "{record}"
    );
    assert_group_gone(&agent_pids(&env));
}

#[test]
fn a_killed_corral_leaves_the_session_id_and_shows_as_supervisor_gone() {
    let env = Env::new();
    let agent = lingering_agent(&env, false);
    let (name, path) = agent.setting();
    let mut child = spawn_corral(&env, &[(name, &path)], &["run", "do it"]);
    let dir = wait_for_session(&env);
    corral_test_support::send_signal(child.id(), Signal::SIGKILL);
    child.wait().unwrap();
    let record = record(&dir);
    assert_eq!(record["sessionId"], FAKE_SESSION);
    assert_eq!(record["outcome"], "running");
    let list = env.corral().args(["runs", "list"]).output().unwrap();
    let list = String::from_utf8_lossy(&list.stdout);
    assert!(list.contains("running (supervisor gone)"), "{list}");
    let id = dir.file_name().unwrap().to_string_lossy().into_owned();
    let follow = env
        .corral()
        .args(["runs", "follow", &id])
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&follow.stdout);
    assert_eq!(follow.status.code(), Some(6), "{text}");
    assert!(text.contains("its supervisor (pid"), "{text}");
    assert!(text.contains(&format!("session {FAKE_SESSION}")), "{text}");
}

/// A run directory written by hand: `run.json` says running, supervised by `supervisor`.
fn planted_run(
    env: &Env,
    id: &str,
    supervisor: serde_json::Value,
    log: &str,
) -> std::path::PathBuf {
    let dir = env.project().join(".corral/runs").join(id);
    std::fs::create_dir_all(&dir).unwrap();
    let record = json!({
        "run_id": id, "provider": "claude", "model": null, "cwd": env.project(),
        "started_at": "2026-12-01T10:00:00Z", "finished_at": null, "outcome": "running",
        "exit_code": null, "session_id": "s-1", "signals_valid": null, "signals_error": null,
        "signal_kinds": [], "attempts": 1, "provider_runs": 1, "usage": {},
        "duration_ms": null, "error": null, "resume_command": null, "supervisor": supervisor,
    });
    std::fs::write(dir.join("run.json"), record.to_string()).unwrap();
    std::fs::write(dir.join("events.jsonl"), log).unwrap();
    dir
}

/// A pid that no process has any more.
fn dead_pid() -> u32 {
    let mut child = corral_test_support::command(Path::new("/bin/true"))
        .spawn()
        .unwrap();
    let pid = child.id();
    child.wait().unwrap();
    pid
}

#[test]
fn runs_follow_ends_when_the_supervisor_is_gone_even_after_run_finished() {
    let env = Env::new();
    let log = "{\"t\":\"2026-12-01T10:00:00Z\",\"mono_ms\":1.0,\"attempt\":1,\"kind\":\"run_finished\",\"outcome\":\"succeeded\"}\n";
    planted_run(
        &env,
        "20261201T100000Z-claude-000001",
        json!({"pid": dead_pid(), "start_ticks": 1}),
        log,
    );
    let out = env
        .corral()
        .args(["runs", "follow", "--json", "20261201T100000Z-claude-000001"])
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(6), "{text}");
    assert!(text.contains("\"kind\":\"run_finished\""), "{text}");
    // With --json, stdout stays JSON lines: how the run ended is on stderr.
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("is gone"),
        "{text}"
    );
}

#[test]
fn runs_follow_of_an_older_record_ends_where_its_log_ends_the_run() {
    let env = Env::new();
    let log = "{\"t\":\"2026-12-01T10:00:00Z\",\"mono_ms\":1.0,\"attempt\":1,\"kind\":\"run_finished\",\"outcome\":\"succeeded\"}\n";
    planted_run(&env, "20261201T100000Z-claude-000009", json!(null), log);
    let out = env
        .corral()
        .args(["runs", "follow", "20261201T100000Z-claude-000009"])
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(6), "{text}");
    assert!(text.contains("its log ends the run"), "{text}");
}

#[test]
fn runs_follow_refuses_a_log_swapped_for_a_device() {
    let env = Env::new();
    // A live supervisor: this test process.
    let me = std::process::id();
    let stat = std::fs::read_to_string(format!("/proc/{me}/stat")).unwrap();
    let ticks: u64 = stat[stat.rfind(')').unwrap() + 1..]
        .split_whitespace()
        .nth(19)
        .unwrap()
        .parse()
        .unwrap();
    let dir = planted_run(
        &env,
        "20261201T100000Z-claude-000002",
        json!({"pid": me, "start_ticks": ticks}),
        "",
    );
    std::fs::remove_file(dir.join("events.jsonl")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", dir.join("events.jsonl")).unwrap();
    let out = env
        .corral()
        .args(["runs", "follow", "20261201T100000Z-claude-000002"])
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    let text = transcript(&env, &out);
    assert_ne!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("is a device; it is not read"), "{text}");
    assert!(
        out.stdout.len() < 4096,
        "{} bytes of output",
        out.stdout.len()
    );
}

#[test]
fn runs_list_names_unreadable_and_dead_runs() {
    let env = Env::new();
    planted_run(
        &env,
        "20261201T100000Z-claude-000003",
        json!({"pid": dead_pid(), "start_ticks": 1}),
        "",
    );
    let broken = env
        .project()
        .join(".corral/runs/20261201T100001Z-claude-000004");
    std::fs::create_dir_all(&broken).unwrap();
    std::fs::write(broken.join("run.json"), "{ not json").unwrap();
    let missing = env
        .project()
        .join(".corral/runs/20261201T100002Z-claude-000005");
    std::fs::create_dir_all(&missing).unwrap();
    let out = env.corral().args(["runs", "list"]).output().unwrap();
    assert!(out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stdout.contains("running (supervisor gone)"), "{stdout}");
    for id in ["000004", "000005"] {
        assert!(
            stdout
                .lines()
                .any(|l| l.contains(id) && l.contains("unreadable")),
            "{id}: {stdout}"
        );
    }
    assert!(stderr.contains("is not a run record"), "{stderr}");
    assert!(stderr.contains("no such file"), "{stderr}");
    let json = env
        .corral()
        .args(["runs", "list", "--json"])
        .output()
        .unwrap();
    let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&json.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert_eq!(lines[2]["supervisorGone"], true);
    assert!(lines[0]["unreadable"].is_string() && lines[1]["unreadable"].is_string());
}

#[test]
fn a_closed_stdout_keeps_the_exit_code_and_panics_nowhere() {
    let env = Env::new();
    let agent = FakeClaude::new(
        &env,
        &format!("printf '%s' '{GOOD_SIGNALS}' > \"$SIGNALS\""),
        &[FakeClaude::init("fake"), FakeClaude::result("done", 0.001)],
        "",
    );
    let (name, path) = agent.setting();
    for (args, code) in [
        (vec!["run", "do it"], 0),
        (vec!["run", "--json", "do it"], 0),
        (vec!["config", "show"], 0),
        (vec!["runs", "list"], 0),
        (vec!["providers"], 0),
        (vec!["run", "--resume", "..", "x"], 2),
    ] {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let mut cmd = corral_test_support::command(&assert_cmd::cargo::cargo_bin("corral"));
        let out = cmd
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", env.home())
            .env(name, &path)
            .current_dir(env.project())
            .args(&args)
            .stdout(writer)
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
}

#[test]
fn an_environment_that_is_not_utf8_is_no_reason_to_panic() {
    let env = Env::new();
    let agent = FakeClaude::new(
        &env,
        &format!("printf '%s' '{GOOD_SIGNALS}' > \"$SIGNALS\""),
        &[FakeClaude::init("fake"), FakeClaude::result("done", 0.001)],
        "",
    );
    let (name, path) = agent.setting();
    let latin1 = OsStr::from_bytes(b"/home/j\xf6rg");
    for args in [
        vec!["config", "show"],
        vec!["run", "do it"],
        vec!["doctor", "--provider", "claude"],
    ] {
        let out = env
            .corral()
            .env(name, &path)
            .env("OLDPWD", latin1)
            .env(OsStr::from_bytes(b"N\xffME"), "x")
            .args(&args)
            .output()
            .unwrap();
        let text = transcript(&env, &out);
        assert!(!text.contains("panicked"), "{args:?}: {text}");
        assert_eq!(out.status.code(), Some(0), "{args:?}: {text}");
    }
    let out = env
        .corral()
        .env("CORRAL_RUN__PROVIDER", latin1)
        .args(["config", "show"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("CORRAL_RUN__PROVIDER is not UTF-8"),
        "{}",
        transcript(&env, &out)
    );
}

#[test]
fn a_path_like_session_id_is_refused() {
    let env = Env::new();
    for id in ["..", ".", ".hidden"] {
        let out = env
            .corral()
            .args(["run", "--resume", id, "x"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{id}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("could be read as a path"),
            "{id}: {}",
            transcript(&env, &out)
        );
    }
}

/// Runs `corral run` (native backend) on a 2 MiB filesystem mounted over the project, in a user
/// and mount namespace of its own, and copies the project out before the namespace goes.
fn run_on_a_small_disk(env: &Env, agent: &FakeClaude, out_dir: &Path) -> std::process::Output {
    let corral = assert_cmd::cargo::cargo_bin("corral");
    let script = format!(
        r#"mount -t tmpfs -o size=2m tmpfs '{project}' || exit 99
cd '{project}' || exit 98
'{corral}' run --no-contract --sandbox native --allow-degraded-native "do it"
code=$?
cp -a '{project}/.corral' '{out}/' 2>/dev/null
exit $code"#,
        project = env.project().display(),
        corral = corral.display(),
        out = out_dir.display()
    );
    corral_test_support::command(Path::new("/usr/bin/unshare"))
        .args(["--user", "--map-root-user", "--mount", "sh", "-c", &script])
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", env.home())
        .env("CORRAL_PROVIDERS__CLAUDE__COMMAND", &agent.path)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

#[test]
fn a_full_disk_keeps_the_session_id_whole_log_lines_and_the_summary() {
    let env = Env::new();
    // The agent fills the disk, then announces its session and finishes.
    let agent = FakeClaude::new(
        &env,
        "dd if=/dev/zero of=fill bs=4k 2>/dev/null; dd if=/dev/zero of=fill2 bs=1 2>/dev/null; true",
        &[
            FakeClaude::init("fake"),
            FakeClaude::text(&"x".repeat(8000)),
            FakeClaude::result("done", 0.001),
        ],
        "",
    );
    let saved = env.dir.path().join("saved");
    std::fs::create_dir_all(&saved).unwrap();
    let out = run_on_a_small_disk(&env, &agent, &saved);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert!(
        stderr.contains(&format!("session   {FAKE_SESSION}")),
        "{stdout}{stderr}"
    );
    let runs: Vec<_> = std::fs::read_dir(saved.join(".corral/runs"))
        .unwrap()
        .flatten()
        .collect();
    let dir = runs[0].path();
    assert_eq!(
        std::fs::read_to_string(dir.join("session-id.txt")).unwrap(),
        format!("{FAKE_SESSION}\n")
    );
    let log = std::fs::read_to_string(dir.join("events.jsonl")).unwrap();
    for line in log.lines() {
        serde_json::from_str::<serde_json::Value>(line)
            .unwrap_or_else(|e| panic!("a cut log line ({e}): {line:?}"));
    }
    assert!(log.ends_with('\n'));
    assert!(log.contains("\"kind\":\"run_finished\""), "{log}");
    let record = record(&dir);
    assert_eq!(record["outcome"], "succeeded");
    assert_eq!(record["sessionId"], FAKE_SESSION);
}

#[test]
fn a_removed_run_directory_is_recreated_with_its_record() {
    let env = Env::new();
    // Without the contract the prompt names no run directory: the agent finds it under its cwd.
    let agent = FakeClaude::new(
        &env,
        "test -d .corral/runs/*/ || exit 42\nrm -rf .corral/runs/*",
        &[FakeClaude::init("fake"), FakeClaude::result("done", 0.001)],
        "",
    );
    let (name, path) = agent.setting();
    let out = env
        .corral()
        .env(name, &path)
        .args([
            "run",
            "--no-contract",
            "--sandbox",
            "native",
            "--allow-degraded-native",
            "do it",
        ])
        .output()
        .unwrap();
    let text = transcript(&env, &out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(
        text.contains(&format!("session   {FAKE_SESSION}")),
        "{text}"
    );
    let dir = only_run_dir(&env.project()).unwrap();
    let record = record(&dir);
    assert_eq!(record["outcome"], "succeeded", "{record}");
    assert_eq!(record["sessionId"], FAKE_SESSION);
    assert_eq!(
        std::fs::read_to_string(dir.join("session-id.txt")).unwrap(),
        format!("{FAKE_SESSION}\n")
    );
    // The log holds what came before the removal (the spawn) and after it (the end).
    let log = log(&dir);
    assert!(!kinds(&log, "spawn").is_empty(), "{log:?}");
    assert!(!kinds(&log, "run_finished").is_empty(), "{log:?}");
}

#[test]
fn a_killed_corral_takes_a_native_runs_whole_process_group_along() {
    let env = Env::new();
    let agent = lingering_agent(&env, true);
    let (name, path) = agent.setting();
    let mut child = spawn_corral(
        &env,
        &[(name, &path)],
        &[
            "run",
            "--sandbox",
            "native",
            "--allow-degraded-native",
            "do it",
        ],
    );
    wait_for_session_file(&env);
    assert!(wait_until(Duration::from_secs(30), || agent_pids(&env)
        .len()
        == 2));
    corral_test_support::send_signal(child.id(), Signal::SIGKILL);
    child.wait().unwrap();
    // The agent and the child it left in its process group, not only the one corral spawned.
    assert_group_gone(&agent_pids(&env));
}

/// `corral run --json` read line by line while the CLI runs: an event line reaches the reader
/// while the CLI is still waiting, not with the lines that follow it or at the end. The stand-in
/// prints its text and then waits (up to a minute) for the reader to say it saw the line, so the
/// test waits on nothing but that line.
#[test]
fn a_live_json_reader_sees_an_event_before_the_cli_goes_on() {
    use std::io::BufRead;
    let env = Env::new();
    let result = FakeClaude::result("done", 0.001);
    let agent = FakeClaude::new(
        &env,
        &format!("printf '%s' '{GOOD_SIGNALS}' > \"$SIGNALS\""),
        &[FakeClaude::init("fake"), FakeClaude::text("seen-live")],
        &format!(
            "i=0; while [ ! -e \"$RUN_DIR/reader-saw-it\" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done\n\
             printf '%s\\n' '{result}'"
        ),
    );
    let (name, path) = agent.setting();
    let mut child = spawn_corral(&env, &[(name, &path)], &["run", "--json", "do it"]);
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let text_line = lines
        .by_ref()
        .map(Result::unwrap)
        .find(|l| l.contains("seen-live"))
        .expect("the text event is printed");
    let dir = only_run_dir(&env.project()).unwrap();
    let still_waiting = !std::fs::read_to_string(dir.join("events.jsonl"))
        .unwrap()
        .contains("\"terminal_result\"");
    std::fs::write(dir.join("reader-saw-it"), "").unwrap();
    let rest: Vec<String> = lines.map(Result::unwrap).collect();
    let status = child.wait().unwrap();
    assert!(
        still_waiting,
        "the event line came only after the CLI went on: {text_line}"
    );
    assert!(status.success(), "{rest:?}");
    assert!(
        rest.iter().any(|l| l.contains("\"terminal_result\"")),
        "{rest:?}"
    );
}

/// A flood of events on a `--json` stdout, written in batches by the flusher thread while the
/// engine goes on, and by the engine itself when the flusher falls behind: every event line
/// arrives once, whole and in order, and says what the execution log says.
#[test]
fn a_json_flood_arrives_whole_and_in_order() {
    const LINES: usize = 20_000;
    let env = Env::new();
    // Every other text has characters to escape: both ways of writing an event line are used.
    let fill = "x".repeat(900);
    let text = |i: usize| {
        let odd = if i % 2 == 1 { " ’\u{202e}\"" } else { "" };
        format!("{i:06} {fill}{odd}")
    };
    let mut lines = vec![FakeClaude::init("fake")];
    lines.extend((0..LINES).map(|i| FakeClaude::text(&text(i))));
    lines.push(FakeClaude::result("done", 0.001));
    let agent = FakeClaude::new(
        &env,
        &format!("printf '%s' '{GOOD_SIGNALS}' > \"$SIGNALS\""),
        &lines,
        "",
    );
    let (name, path) = agent.setting();
    let child = spawn_corral(&env, &[(name, &path)], &["run", "--json", "do it"]);
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    let printed: Vec<String> = stdout
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap_or_else(|e| panic!("{e}: {l}"))
        })
        .filter(|v| v["type"] == "event" && v["event"]["event"] == "text")
        .map(|v| v["event"]["text"].as_str().unwrap().to_string())
        .collect();
    let want: Vec<String> = (0..LINES).map(text).collect();
    assert!(
        printed == want,
        "{} text events printed of {LINES}",
        printed.len()
    );
    assert!(
        !stdout.contains('\u{202e}'),
        "a bidi control reached stdout unescaped"
    );
    let dir = only_run_dir(&env.project()).unwrap();
    let logged: Vec<String> = log(&dir)
        .iter()
        .filter(|r| r["kind"] == "agent" && r["event"] == "text")
        .map(|r| r["text"].as_str().unwrap().to_string())
        .collect();
    assert!(
        logged == want,
        "{} text events logged of {LINES}",
        logged.len()
    );
}
