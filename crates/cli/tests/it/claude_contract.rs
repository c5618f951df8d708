//! Claude Code's own contract cases, beyond the conformance suite every CLI passes: the exact
//! usage, cost and version it reports, the corrective retry on the resumed session when the agent
//! wrote invalid signals, and a rate limit twice over with the history re-sent on each resume. The
//! pinned `claude` (installed from npm into `.cache/clis`) runs under `corral run` against the fake
//! model API on 127.0.0.1 (see `providers.rs` for the recipe).

use corral_test_support::fake_api::{Scenario, Step};
use serde_json::Value;

use crate::providers::{CLAUDE, INVALID_SIGNALS, VALID_SIGNALS, World};
use crate::support::*;

#[test]
fn a_text_reply_ends_with_outcome_session_usage_and_cost() {
    let world = World::new(&CLAUDE, |_| {
        Scenario::script([Step::text("Hello from the fake model.")])
    });
    let out = world
        .corral_run()
        .args(["--json", "--no-contract", "say hello"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        transcript(&world.env, &out)
    );
    let s = summary(&out.stdout);
    assert_eq!(s["outcome"], "succeeded");
    assert_eq!(s["exitCode"], 0);
    assert_eq!(s["usage"]["input"], 12);
    assert_eq!(s["usage"]["output"], 7);
    assert!(s["costUsd"].as_f64().is_some_and(|c| c > 0.0), "{s}");
    let dir = run_dir(&s);
    let meta: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("session.json")).unwrap()).unwrap();
    // The pinned version, or the one `CORRAL_TEST_CLI_CLAUDE` runs instead (the newest of the
    // tested range, say).
    if std::env::var_os("CORRAL_TEST_CLI_CLAUDE").is_none() {
        assert_eq!(meta["cliVersion"], "2.1.197");
    }
    assert!(
        meta["cliVersion"]
            .as_str()
            .is_some_and(|v| v.starts_with("2.1.")),
        "{meta}"
    );
    let log = log(&dir);
    assert_eq!(kinds(&log, "spawn").len(), 1);
    assert_eq!(kinds(&log, "run_finished")[0]["outcome"], "succeeded");
    let events: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["type"] == "event")
        .filter_map(|v| v["event"]["event"].as_str().map(str::to_string))
        .collect();
    assert!(
        events.iter().any(|e| e == "session_started")
            && events.iter().any(|e| e == "terminal_result"),
        "{events:?}"
    );
}

#[test]
fn invalid_signals_get_a_corrective_retry_on_the_resumed_session() {
    let world = World::new(&CLAUDE, |_| {
        Scenario::script([
            Step::write_signals(INVALID_SIGNALS),
            Step::text("Done."),
            Step::write_signals(VALID_SIGNALS),
            Step::text("Fixed."),
        ])
    });
    let out = world
        .corral_run()
        .args(["--json", "do the task"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        transcript(&world.env, &out)
    );
    let s = summary(&out.stdout);
    assert_eq!(s["signalsValid"], true);
    assert_eq!(record(&run_dir(&s))["providerRuns"], 2);
    let spawns: Vec<Value> = kinds(&log(&run_dir(&s)), "spawn")
        .into_iter()
        .cloned()
        .collect();
    assert_eq!(spawns.len(), 2);
    assert_eq!(
        spawns[1]["resume"], s["sessionId"],
        "the correction resumes the same session"
    );
    assert_eq!(
        (spawns[0]["attempt"].clone(), spawns[1]["attempt"].clone()),
        (Value::from(1), Value::from(2)),
        "one attempt counter over the corrective retry"
    );
    let log = log(&run_dir(&s));
    let finished = kinds(&log, "run_finished");
    assert_eq!(finished.len(), 1, "one run_finished: {log:#?}");
    assert_eq!(finished[0]["attempts"], 2);
    assert_eq!(kinds(&log, "provider_run_finished").len(), 2);
    let clock: Vec<f64> = log.iter().filter_map(|v| v["monoMs"].as_f64()).collect();
    assert!(clock.windows(2).all(|w| w[0] <= w[1]), "{clock:?}");
    let requests = world.api.model_requests();
    let correction = &requests[2];
    assert!(
        correction.history,
        "the corrective request carries the earlier turns"
    );
    let asked = correction.last_user_text.as_deref().unwrap_or_default();
    assert!(asked.contains("signals.json"), "{asked}");
}

/// Issue 29 item 3: an agent that left `signals.json` as a FIFO had its corrective retry resume
/// the session with the FIFO in place: Claude Code 2.1.197's Write tool refused to replace it
/// ("File has not been read yet"), so the run crashed without signals, and a shell's write to it
/// (`cat > signals.json`, as Codex writes) blocks until the idle watchdog (5 min) ends the run.
/// The FIFO is removed before the retry, the removal is named in `events.jsonl`, and the
/// corrected signals are written and valid.
#[test]
fn a_fifo_left_as_signals_json_is_removed_before_the_corrective_retry() {
    use corral_test_support::fake_api::shell_tool_input;
    let plant = "mkfifo \"$(ls -d .corral/runs/*/ | head -n 1)signals.json\"";
    let world = World::new(&CLAUDE, |_| {
        Scenario::script([
            Step::tool_use(
                CLAUDE.shell_tool,
                shell_tool_input(CLAUDE.shell_tool, plant),
            ),
            Step::text("Done."),
            Step::write_signals(VALID_SIGNALS),
            Step::text("Fixed."),
        ])
    });
    let started = std::time::Instant::now();
    let out = world
        .corral_run()
        .args(["--json", "do the task"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        transcript(&world.env, &out)
    );
    assert!(
        started.elapsed() < std::time::Duration::from_secs(120),
        "the run waited for a watchdog: {:?}",
        started.elapsed()
    );
    let s = summary(&out.stdout);
    assert_eq!(s["signalsValid"], true, "{s}");
    let dir = run_dir(&s);
    assert_eq!(record(&dir)["providerRuns"], 2);
    let log = log(&dir);
    let removed = kinds(&log, "tampering_removed");
    assert_eq!(removed.len(), 1, "{log:#?}");
    assert_eq!(removed[0]["was"], "a FIFO");
    assert_eq!(
        removed[0]["path"],
        dir.join("signals.json").display().to_string()
    );
    assert!(
        std::fs::symlink_metadata(dir.join("signals.json"))
            .unwrap()
            .is_file()
    );
}

/// Rate limits past the CLI's own retries, twice: each attempt's CLI spends its retries and
/// gives up, and Corral resumes the same session after waiting the delay the CLI last announced
/// (not its own 60 s backoff floor, which this test puts back).
#[test]
fn rate_limited_twice_then_resumed_with_the_same_session() {
    let per_attempt = CLAUDE.requests_per_failed_call;
    let world = World::new(&CLAUDE, |_| {
        let mut steps = vec![Step::rate_limited(1); 2 * per_attempt];
        steps.extend([Step::write_signals(VALID_SIGNALS), Step::text("Done.")]);
        Scenario::script(steps)
    });
    let out = world
        .corral_run()
        .env("CORRAL_RETRY__BACKOFF_INITIAL_MS", "60000")
        .args(["--json", "do the task"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        transcript(&world.env, &out)
    );
    let s = summary(&out.stdout);
    assert_eq!(s["attempts"], 3);
    let log = log(&run_dir(&s));
    let backoffs = kinds(&log, "backoff");
    assert_eq!(backoffs.len(), 2);
    for backoff in &backoffs {
        assert_eq!(backoff["reason"], "the CLI's retry-after hint", "{backoff}");
        assert!(
            backoff["waitMs"].as_u64().unwrap() < 60_000,
            "the wait the CLI announced, not the backoff floor: {backoff}"
        );
    }
    let spawns = kinds(&log, "spawn");
    let session = s["sessionId"].as_str().unwrap();
    assert_eq!(spawns[0]["resume"], Value::Null);
    assert_eq!(spawns[1]["resume"], session);
    assert_eq!(spawns[2]["resume"], session);
    let requests = world.api.model_requests();
    assert_eq!(requests.len(), 2 * per_attempt + 2);
    assert!(!requests[0].history);
    // What a resumed request must carry is the task: Claude Code 2.1.197 re-sends it with a
    // synthetic assistant turn between it and the continuation, 2.1.337 merges the
    // continuation into the task's user turn (no assistant turn at all).
    for resumed in [&requests[per_attempt], &requests[2 * per_attempt]] {
        assert!(
            resumed.whole_text.contains("do the task"),
            "a resumed request lost the task: {:?}",
            resumed.last_user_text
        );
    }
}

/// Three 429s with `retry-after: 1`, then the agent's work, with Corral's backoff at its real
/// 60 s floor: Claude Code waits them out itself, in the one attempt, as the bare CLI would.
/// Each of its retries is in the run's log, and the account was held in the gate for each wait
/// (what a parallel run on the account reads before its spawn).
#[test]
fn three_short_rate_limits_are_waited_out_in_one_attempt_at_their_real_length() {
    let world = World::new(&CLAUDE, |_| {
        let mut steps = vec![Step::rate_limited(1); 3];
        steps.extend([Step::write_signals(VALID_SIGNALS), Step::text("Done.")]);
        Scenario::script(steps)
    });
    let out = world
        .corral_run()
        .env("CORRAL_RETRY__BACKOFF_INITIAL_MS", "60000")
        .args(["--json", "do the task"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        transcript(&world.env, &out)
    );
    let s = summary(&out.stdout);
    assert_eq!(s["attempts"], 1, "{s}");
    assert_eq!(s["signalsValid"], true, "{s}");
    let log = log(&run_dir(&s));
    assert!(kinds(&log, "backoff").is_empty(), "{log:#?}");
    let notices: Vec<&Value> = kinds(&log, "agent")
        .into_iter()
        .filter(|r| r["event"] == "retry_notice")
        .collect();
    assert_eq!(notices.len(), 3, "{log:#?}");
    for notice in &notices {
        assert_eq!(notice["status"], 429, "{notice}");
        assert!(notice["delayMs"].as_u64().is_some(), "{notice}");
    }
    let holds = kinds(&log, "rate_limit_hold");
    assert_eq!(holds.len(), 3, "{log:#?}");
    assert!(
        holds
            .iter()
            .all(|h| h["basis"] == "the CLI's own retry after HTTP 429"),
        "{holds:#?}"
    );
    let statuses: Vec<Option<u16>> = world
        .api
        .model_requests()
        .iter()
        .map(|r| r.status)
        .collect();
    assert_eq!(statuses.len(), 5, "three 429s, the write, the reply");
    assert_eq!(statuses[..3], [Some(429); 3]);
}

/// Under the default sandbox (bubblewrap), the real Claude Code cannot write outside its working
/// and run directories: the fake model asks for `../escape.txt`, the Write fails, the file never
/// appears, and the attestation says the boundary was enforced.
#[test]
fn bubblewrap_stops_a_write_outside_the_working_directory() {
    // The closure gets the project directory: the escape target is its sibling, `../escape.txt`.
    let world = World::new(&CLAUDE, |project| {
        let escape = project.parent().unwrap().join("escape.txt");
        Scenario::script([
            Step::write_file(&escape, "escaped\n"),
            Step::text("I tried."),
        ])
    });
    let escape = world.env.project().parent().unwrap().join("escape.txt");
    let out = world
        .corral_run()
        .args(["--json", "--no-contract", "write ../escape.txt"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        transcript(&world.env, &out)
    );
    assert!(
        !escape.exists(),
        "the write outside the sandbox landed at {}",
        escape.display()
    );
    let dir = run_dir(&summary(&out.stdout));
    let attestation = record(&dir)["attestation"].clone();
    assert_eq!(attestation["actualBackend"], "bubblewrap", "{attestation}");
    assert!(
        attestation["enforced"]
            .as_array()
            .unwrap()
            .contains(&"writes-confined".into()),
        "{attestation}"
    );
    assert_eq!(attestation["notEnforced"], serde_json::json!([]));
    let results: Vec<Value> = kinds(&log(&dir), "agent")
        .into_iter()
        .filter(|v| v["event"] == "tool_result")
        .cloned()
        .collect();
    assert!(
        results.iter().any(|r| r["isError"] == true),
        "the Write reported its failure: {results:#?}"
    );
}

/// `corral runs follow` tails a run that is still going, from another process, and stops once
/// the run has finished.
#[test]
fn runs_follow_tails_a_run_in_flight_until_it_ends() {
    let world = World::new(&CLAUDE, |_| Scenario::forever(Step::HangBeforeHeaders));
    let spawn = |args: &[&str]| {
        let mut cmd = corral_test_support::command(&assert_cmd::cargo::cargo_bin("corral"));
        cmd.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", world.env.home())
            .envs(world.vars().iter().map(|(k, v)| (k, v)))
            .current_dir(world.env.project())
            .args(args)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        cmd.spawn().unwrap()
    };
    let run = spawn(&["run", "--provider", "claude", "wait for the model"]);
    assert!(
        wait_until(std::time::Duration::from_secs(60), || !world
            .api
            .model_requests()
            .is_empty()),
        "claude never called the model"
    );
    let runs = world.env.project().join(".corral/runs");
    let id = std::fs::read_dir(&runs)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .file_name();
    let id = id.to_string_lossy().into_owned();
    let follow = spawn(&["runs", "follow", &id[..12]]);
    let raw = spawn(&["runs", "follow", "--json", &id[..12]]);
    // Let the followers catch up with the log so far, then end the run.
    std::thread::sleep(std::time::Duration::from_millis(500));
    corral_test_support::interrupt(run.id());
    let run = run.wait_with_output().unwrap();
    assert_eq!(run.status.code(), Some(130));
    let followed = follow.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&followed.stdout);
    let shown = String::from_utf8_lossy(&followed.stderr);
    // `runs follow` exits with the followed run's code: it was cancelled.
    assert_eq!(followed.status.code(), Some(130), "{text}");
    // The run as `corral run` shows it, on stderr; how it ended on stdout.
    assert!(shown.contains("] session "), "{shown}");
    assert!(!shown.contains("session_started"), "{shown}");
    assert!(
        text.trim_end().ends_with("finished: cancelled (exit 130)"),
        "{text}"
    );
    let raw = raw.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&raw.stdout);
    assert_eq!(raw.status.code(), Some(130), "{text}");
    for needle in [
        "run_started",
        "spawn",
        "session_started",
        "kill_started",
        "run_finished",
    ] {
        assert!(
            text.contains(needle),
            "follow --json printed no {needle}: {text}"
        );
    }
}

#[test]
fn max_turns_reaches_claude_code_and_a_run_that_hits_it_is_not_a_success() {
    // Two tool calls before the answer: with one turn allowed, Claude Code stops after the first.
    let world = World::new(&CLAUDE, |project| {
        Scenario::script([
            Step::write_file(&project.join("one.txt"), "1\n"),
            Step::write_file(&project.join("two.txt"), "2\n"),
            Step::text("Done."),
        ])
    });
    let out = world
        .corral_run()
        .args([
            "--json",
            "--no-contract",
            "--max-turns",
            "1",
            "write two files",
        ])
        .output()
        .unwrap();
    let text = transcript(&world.env, &out);
    let s = summary(&out.stdout);
    let spawn = kinds(&log(&run_dir(&s)), "spawn")[0].clone();
    assert!(
        spawn.to_string().contains("\"--max-turns\",\"1\""),
        "the flag reaches the CLI: {spawn}"
    );
    // Claude Code's own words reach the summary: the cap, not a mystery crash.
    assert_ne!(s["outcome"], "succeeded", "{text}");
    assert_ne!(out.status.code(), Some(0), "{text}");
    assert!(
        s["error"]
            .as_str()
            .is_some_and(|e| e.contains("Reached maximum number of turns (1)")),
        "{text}"
    );
    assert!(!world.env.project().join("two.txt").exists(), "{text}");
}

/// The instant `ahead` from now, in seconds since the Unix epoch.
fn epoch_s_in(ahead: std::time::Duration) -> u64 {
    (std::time::SystemTime::now() + ahead)
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// A usage limit Claude Code waits out in its own process (`CLAUDE_CODE_RETRY_WATCHDOG=1` in the
/// user's environment, Anthropic's opt-in for unattended use): it prints a retry line every 30 s
/// until the reset. Corral reads the wait as it happens: the account is held in the gate until
/// the reset, the live view says "waiting for claude until T", the idle watchdog (at its 60 s
/// floor) lets the wait pass, and the one attempt then does the task.
#[test]
fn a_usage_limit_claude_code_waits_out_itself_holds_the_account_until_the_reset() {
    let reset = epoch_s_in(std::time::Duration::from_secs(90));
    let world = World::new(&CLAUDE, |_| {
        Scenario::script(vec![
            Step::UsageLimit {
                resets_at_epoch_s: reset,
            },
            Step::write_signals(VALID_SIGNALS),
            Step::text("Done."),
        ])
    });
    let out = world
        .corral_run()
        .env("CLAUDE_CODE_RETRY_WATCHDOG", "1")
        .env("CORRAL_RUN__IDLE_WATCHDOG_MS", "60000")
        .args(["do the task"])
        .output()
        .unwrap();
    let said = transcript(&world.env, &out);
    assert_eq!(out.status.code(), Some(0), "{said}");
    assert!(said.contains("waiting for claude until"), "{said}");
    let runs: Vec<_> = std::fs::read_dir(world.project().join(".corral/runs"))
        .unwrap()
        .flatten()
        .collect();
    assert_eq!(runs.len(), 1);
    let log = log(&runs[0].path());
    assert_eq!(kinds(&log, "spawn").len(), 1, "one attempt: {log:#?}");
    assert!(kinds(&log, "kill_started").is_empty(), "{log:#?}");
    assert!(kinds(&log, "backoff").is_empty(), "{log:#?}");
    // Held until the reset (Claude Code counts its wait from the reset header, to the ms).
    let holds = kinds(&log, "rate_limit_hold");
    assert!(
        holds
            .iter()
            .any(|h| h["untilEpochMs"].as_u64().unwrap() + 2_000 >= reset * 1000),
        "{holds:#?}"
    );
    let steps: Vec<Option<String>> = world
        .api
        .model_requests()
        .iter()
        .map(|r| r.step.clone())
        .collect();
    assert_eq!(steps[0].as_deref(), Some("usage_limit"), "{steps:?}");
    assert_eq!(
        steps
            .iter()
            .filter(|s| s.as_deref() == Some("usage_limit"))
            .count(),
        1,
        "the CLI's retry comes after the reset: {steps:?}"
    );
}

/// `retry.auto_resume = false`: the same usage limit, hours away, stops the run as soon as
/// Claude Code announces its wait, with exit 4, the reset, and the command that resumes the
/// session; the account stays held until the reset for the other runs.
#[test]
fn with_auto_resume_off_a_usage_limit_the_cli_would_wait_out_stops_the_run() {
    let reset = epoch_s_in(std::time::Duration::from_secs(2 * 3600));
    let world = World::new(&CLAUDE, |_| {
        Scenario::script(vec![Step::UsageLimit {
            resets_at_epoch_s: reset,
        }])
    });
    let out = world
        .corral_run()
        .env("CLAUDE_CODE_RETRY_WATCHDOG", "1")
        .env("CORRAL_RETRY__AUTO_RESUME", "false")
        .args(["--json", "do the task"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(4),
        "{}",
        transcript(&world.env, &out)
    );
    let s = summary(&out.stdout);
    let error = s["error"].as_str().unwrap_or_default();
    assert!(error.contains("retry.auto_resume is off"), "{s}");
    assert!(
        s["resumeCommand"]
            .as_str()
            .is_some_and(|c| c.starts_with("corral resume ")),
        "{s}"
    );
    let log = log(&run_dir(&s));
    let kills = kinds(&log, "kill_started");
    assert_eq!(kills.len(), 1, "{log:#?}");
    assert_eq!(kills[0]["reason"], "rate_limited", "{log:#?}");
    assert!(kinds(&log, "backoff").is_empty(), "{log:#?}");
    let holds = kinds(&log, "rate_limit_hold");
    assert!(
        holds
            .iter()
            .any(|h| h["untilEpochMs"].as_u64().unwrap() + 2_000 >= reset * 1000),
        "{holds:#?}"
    );
    assert_eq!(world.api.model_requests().len(), 1);
}

/// `retry.auto_resume = false` when Claude Code gives up on a usage limit itself (no retry
/// watchdog: its own few retries meet the limit, it exits with the reset in its error): the run
/// stops at once with exit 4 instead of sleeping until the reset.
#[test]
fn with_auto_resume_off_a_usage_limit_the_cli_gave_up_on_stops_the_run() {
    let reset = epoch_s_in(std::time::Duration::from_secs(2 * 3600));
    let per_attempt = CLAUDE.requests_per_failed_call;
    let world = World::new(&CLAUDE, |_| {
        Scenario::script(vec![
            Step::UsageLimit {
                resets_at_epoch_s: reset,
            };
            per_attempt
        ])
    });
    let out = world
        .corral_run()
        .env("CORRAL_RETRY__AUTO_RESUME", "false")
        .args(["--json", "do the task"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(4),
        "{}",
        transcript(&world.env, &out)
    );
    let s = summary(&out.stdout);
    assert!(
        s["error"].as_str().is_some_and(
            |e| e.contains("retry.auto_resume is off") && e.contains(&reset.to_string())
        ),
        "{s}"
    );
    assert!(s["resumeCommand"].as_str().is_some(), "{s}");
    assert_eq!(s["attempts"], 1, "{s}");
    let log = log(&run_dir(&s));
    assert!(kinds(&log, "backoff").is_empty(), "{log:#?}");
}
