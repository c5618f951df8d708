//! Rate-limit backoff with resume, the stale-session cold retry, the version check, and what a
//! resumed run finds left in place of its files.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use corral_engine::{CliAdapter, EngineConfig, VersionCheck};
use corral_ports::{CancellationToken, Outcome, ProviderError, ProviderId, RunObserver, SessionId};
use serde_json::Value;

use crate::support::*;

fn argv_log(path: &Path) -> Vec<Vec<String>> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            v["argv"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| a.as_str().unwrap().to_string())
                .collect()
        })
        .collect()
}

fn resumed_id(argv: &[String]) -> Option<&str> {
    argv.iter()
        .position(|a| a == "--resume")
        .map(|i| argv[i + 1].as_str())
}

#[tokio::test]
async fn rate_limited_twice_then_success_resumes_the_captured_session() {
    let s = Scratch::new();
    let state = s.path("state");
    let argv = s.path("argv.jsonl");
    let args = [
        "--times",
        "2",
        "--session-id",
        "rl-session",
        "--state-file",
        state.to_str().unwrap(),
        "--argv-log",
        argv.to_str().unwrap(),
    ];
    let out = s.run_fake("rate-limit-then-ok", &args).await.unwrap();
    assert_eq!(out.outcome, Outcome::Succeeded);
    assert_eq!(out.attempts, 3);
    assert_eq!(
        out.session_id.as_ref().map(SessionId::as_str),
        Some("rl-session")
    );
    let calls = argv_log(&argv);
    assert_eq!(calls.len(), 3);
    assert_eq!(resumed_id(&calls[0]), None, "the first attempt starts cold");
    assert_eq!(resumed_id(&calls[1]), Some("rl-session"));
    assert_eq!(resumed_id(&calls[2]), Some("rl-session"));
    let log = s.assert_log_complete("succeeded");
    let backoffs = records(&log, "backoff");
    assert_eq!(backoffs.len(), 2);
    assert_eq!(backoffs[0]["nextResume"], "rl-session");
    assert_eq!(backoffs[1]["retry"], 2);
    let classes: Vec<_> = records(&log, "classified")
        .iter()
        .map(|v| v["class"].clone())
        .collect();
    assert_eq!(classes, ["rate-limited", "rate-limited", "succeeded"]);
    // Resumed attempts get a short continuation, not the whole task again.
    let stdin: Vec<_> = records(&log, "spawn")
        .iter()
        .map(|v| v["stdin"].clone())
        .collect();
    assert_eq!(stdin, ["prompt", "continuation", "continuation"]);
    assert_eq!(s.session_file().as_deref(), Some("rl-session\n"));
    s.assert_tree_gone();
}

#[tokio::test]
async fn rate_limit_retries_exhausted_is_reported_with_the_session() {
    let s = Scratch::new();
    let mut config = fast_config();
    config.retry.max_retries = 2;
    let err = run(
        config,
        &s.adapter("rate-limit-forever", &["--session-id", "rl-x"]),
        s.session(),
    )
    .await
    .unwrap_err();
    match &err {
        ProviderError::RateLimited {
            retries, evidence, ..
        } => {
            assert_eq!(*retries, 2);
            assert_eq!(evidence.attempts, 3);
        }
        other => panic!("expected RateLimited, got {other}"),
    }
    assert_eq!(err.session_id().map(SessionId::as_str), Some("rl-x"));
    assert!(err.is_retryable());
    s.assert_log_complete("rate-limited");
    s.assert_tree_gone();
}

#[tokio::test]
async fn zero_retries_gives_up_after_the_first_rate_limit() {
    let s = Scratch::new();
    let mut config = fast_config();
    config.retry.max_retries = 0;
    let err = run(config, &s.adapter("rate-limit-forever", &[]), s.session())
        .await
        .unwrap_err();
    assert!(
        matches!(err, ProviderError::RateLimited { retries: 0, .. }),
        "{err}"
    );
    assert!(records(&s.log(), "backoff").is_empty());
}

#[tokio::test]
async fn a_known_reset_time_is_waited_for_instead_of_backing_off() {
    let s = Scratch::new();
    let state = s.path("state");
    let reset = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        .to_string();
    let args = [
        "--times",
        "1",
        "--resets-at",
        &reset,
        "--state-file",
        state.to_str().unwrap(),
    ];
    let out = s.run_fake("rate-limit-then-ok", &args).await.unwrap();
    assert_eq!(out.attempts, 2);
    let log = s.log();
    let backoff = records(&log, "backoff")[0];
    assert_eq!(backoff["reason"], "until the reported reset time");
    assert!(backoff["waitMs"].as_u64().unwrap() <= 2000, "{backoff}");
}

#[tokio::test]
async fn a_stale_session_falls_back_to_one_cold_run_without_using_a_retry() {
    let s = Scratch::new();
    let argv = s.path("argv.jsonl");
    let mut session = s.session();
    session.resume = Some(SessionId::new("gone-session").unwrap());
    let mut config = fast_config();
    config.retry.max_retries = 0;
    let adapter = s.adapter(
        "stale-session",
        &[
            "--argv-log",
            argv.to_str().unwrap(),
            "--session-id",
            "fresh-1",
        ],
    );
    let out = run(config, &adapter, session).await.unwrap();
    assert_eq!(out.outcome, Outcome::Succeeded);
    assert_eq!(out.attempts, 2);
    assert_eq!(
        out.session_id.as_ref().map(SessionId::as_str),
        Some("fresh-1")
    );
    let calls = argv_log(&argv);
    assert_eq!(resumed_id(&calls[0]), Some("gone-session"));
    assert_eq!(resumed_id(&calls[1]), None, "the fallback runs cold");
    let log = s.assert_log_complete("succeeded");
    assert_eq!(
        records(&log, "cold_retry")[0]["staleSession"],
        "gone-session"
    );
    assert_eq!(s.session_file().as_deref(), Some("fresh-1\n"));
    s.assert_tree_gone();
}

fn stdin_bytes(path: &Path) -> Vec<u64> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            v["stdin_bytes"].as_u64().unwrap()
        })
        .collect()
}

#[tokio::test]
async fn the_cold_start_after_a_stale_session_is_sent_the_cold_prompt() {
    let s = Scratch::new();
    let argv = s.path("argv.jsonl");
    let mut session = s.session();
    session.prompt = Arc::from("fix what the check reported");
    let brief = "the whole task, as a new session needs it: ".repeat(10);
    session.cold_prompt = Some(Arc::from(brief.as_str()));
    session.resume = Some(SessionId::new("gone-session").unwrap());
    session.model = Some("model-7".into());
    let adapter = s.adapter(
        "stale-session",
        &[
            "--argv-log",
            argv.to_str().unwrap(),
            "--session-id",
            "fresh-1",
        ],
    );
    let out = run(fast_config(), &adapter, session).await.unwrap();
    assert_eq!(out.outcome, Outcome::Succeeded);
    let log = s.assert_log_complete("succeeded");
    let stdin: Vec<_> = records(&log, "spawn")
        .iter()
        .map(|v| v["stdin"].clone())
        .collect();
    assert_eq!(stdin, ["prompt", "cold-prompt"]);
    // A crash resume must ask for the model the new session was made with.
    let meta: Value =
        serde_json::from_str(&std::fs::read_to_string(s.run_dir().join("session.json")).unwrap())
            .unwrap();
    assert_eq!(meta["sessionId"], "fresh-1");
    assert_eq!(meta["model"], "model-7");
    assert_eq!(
        stdin_bytes(&argv),
        [
            "fix what the check reported".len() as u64,
            brief.len() as u64
        ],
        "the resume is sent the resume prompt, the cold start the cold prompt"
    );
    s.assert_tree_gone();
}

#[tokio::test]
async fn without_a_cold_prompt_the_cold_start_resends_the_prompt() {
    let s = Scratch::new();
    let argv = s.path("argv.jsonl");
    let mut session = s.session();
    session.resume = Some(SessionId::new("gone-session").unwrap());
    let prompt_len = session.prompt.len() as u64;
    let adapter = s.adapter("stale-session", &["--argv-log", argv.to_str().unwrap()]);
    let out = run(fast_config(), &adapter, session).await.unwrap();
    assert_eq!(out.outcome, Outcome::Succeeded);
    assert_eq!(stdin_bytes(&argv), [prompt_len, prompt_len]);
}

/// Observer that cancels the run as soon as a backoff sleep begins.
struct CancelOnBackoff(CancellationToken);

impl RunObserver for CancelOnBackoff {
    fn backoff(&self, _attempt: u32, _wait: Duration, _reason: &str) {
        self.0.cancel();
    }
}

#[tokio::test]
async fn cancellation_cuts_a_backoff_sleep_short() {
    let s = Scratch::new();
    let session = s.session();
    let mut config = fast_config();
    config.retry.initial = Duration::from_secs(600);
    config.retry.max = Duration::from_secs(600);
    let observer = Arc::new(CancelOnBackoff(session.cancel.clone()));
    let t = Instant::now();
    let err = run_observed(
        config,
        &s.adapter("rate-limit-forever", &["--session-id", "b-1"]),
        session,
        observer,
    )
    .await
    .unwrap_err();
    assert!(matches!(err, ProviderError::Cancelled { .. }), "{err}");
    assert!(
        t.elapsed() < Duration::from_secs(60),
        "the 10-minute sleep was not cut short"
    );
    assert_eq!(err.session_id().map(SessionId::as_str), Some("b-1"));
    let log = s.assert_log_complete("cancelled");
    assert_eq!(records(&log, "backoff").len(), 1);
    s.assert_tree_gone();
}

/// Adapter wrapper that declares a version check.
struct Versioned {
    inner: FakeAdapter,
    check: VersionCheck,
}

impl CliAdapter for Versioned {
    fn provider(&self) -> corral_ports::ProviderId {
        self.inner.provider()
    }
    fn prompt_delivery(&self) -> corral_engine::PromptDelivery {
        self.inner.prompt_delivery()
    }
    fn env_profile(&self) -> corral_engine::EnvProfile {
        self.inner.env_profile()
    }
    fn command(
        &self,
        plan: &corral_engine::AttemptPlan<'_>,
    ) -> Result<corral_engine::CommandSpec, ProviderError> {
        self.inner.command(plan)
    }
    fn parser(&self) -> Box<dyn corral_engine::StreamParser> {
        self.inner.parser()
    }
    fn diagnose(&self, evidence: &corral_engine::AttemptEvidence<'_>) -> corral_engine::Diagnosis {
        self.inner.diagnose(evidence)
    }
    fn version_check(&self) -> Option<VersionCheck> {
        Some(self.check.clone())
    }
    fn egress(&self, env: &corral_engine::ChildEnv<'_>) -> corral_engine::EgressNeeds {
        self.inner.egress(env)
    }
    fn capabilities(&self) -> corral_ports::Capabilities {
        self.inner.capabilities()
    }
}

fn version_check(output: &str, required: &str, allow_mismatch: bool) -> VersionCheck {
    VersionCheck {
        program: "/bin/sh".into(),
        args: vec!["-c".into(), format!("echo '{output}'")],
        required: semver::VersionReq::parse(required).unwrap(),
        timeout: Duration::from_secs(10),
        allow_mismatch,
    }
}

#[tokio::test]
async fn an_untested_cli_version_is_refused_unless_overridden() {
    let s = Scratch::new();
    let adapter = Versioned {
        inner: s.adapter("ok", &[]),
        check: version_check("3.0.1 (Claude Code)", ">=2.1, <2.2", false),
    };
    let err = corral_engine::Engine::new(fast_config())
        .run(&adapter, s.session(), Arc::new(corral_ports::NoopObserver))
        .await
        .unwrap_err();
    match &err {
        ProviderError::VersionMismatch {
            found, required, ..
        } => {
            assert_eq!(found, "3.0.1");
            assert_eq!(required, ">=2.1, <2.2");
        }
        other => panic!("expected VersionMismatch, got {other}"),
    }
    assert!(
        err.to_string().contains("tested_versions"),
        "the error names the override: {err}"
    );
    assert!(!s.pid_file().exists(), "the CLI never ran");

    let s = Scratch::new();
    let adapter = Versioned {
        inner: s.adapter("ok", &[]),
        check: version_check("3.0.1", ">=2.1, <2.2", true),
    };
    let out = corral_engine::Engine::new(fast_config())
        .run(&adapter, s.session(), Arc::new(corral_ports::NoopObserver))
        .await
        .unwrap();
    assert_eq!(out.outcome, Outcome::Succeeded);
    let log = s.log();
    assert_eq!(records(&log, "version_checked")[0]["overridden"], true);
    let meta: Value =
        serde_json::from_str(&std::fs::read_to_string(s.run_dir().join("session.json")).unwrap())
            .unwrap();
    assert_eq!(meta["cliVersion"], "3.0.1");
    assert_eq!(meta["cwd"], s.path("work").to_str().unwrap());
}

#[tokio::test]
async fn a_hanging_version_command_times_out() {
    let s = Scratch::new();
    let mut check = version_check("x", ">=1", false);
    check.args = vec!["-c".into(), "sleep 30".into()];
    check.timeout = Duration::from_millis(300);
    let adapter = Versioned {
        inner: s.adapter("ok", &[]),
        check,
    };
    let config = EngineConfig { ..fast_config() };
    let err = corral_engine::Engine::new(config)
        .run(&adapter, s.session(), Arc::new(corral_ports::NoopObserver))
        .await
        .unwrap_err();
    // Not answering is not a version mismatch: its own refusal, which a later try can get past.
    assert!(
        matches!(&err, ProviderError::VersionProbeTimedOut { waited, .. } if *waited == Duration::from_millis(300)),
        "{err}"
    );
    assert!(err.is_retryable(), "{err}");
    assert_eq!(err.outcome(), Outcome::NotStarted);
    let message = err.to_string();
    assert!(!message.contains("tested range"), "{message}");
    assert_eq!(message.lines().count(), 2, "{message}");
    assert!(
        message
            .lines()
            .nth(1)
            .is_some_and(|l| l.starts_with("hint: ")),
        "{message}"
    );
    assert!(!s.pid_file().exists(), "the CLI never ran");
}

/// Observer that cancels the run as soon as it waits for its account's rate limit.
struct CancelOnAccountWait(CancellationToken);

impl RunObserver for CancelOnAccountWait {
    fn account_wait(&self, _attempt: u32, _provider: ProviderId, _until: std::time::SystemTime) {
        self.0.cancel();
    }
}

/// The wall time of a log record.
fn wall_ms(record: &Value) -> u64 {
    let t = humantime::parse_rfc3339(record["t"].as_str().unwrap()).unwrap();
    t.duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64
}

/// Three runs of one account in one process, sharing the gate: the first is rate-limited and
/// backs off 1.5 s (±20 %), recording the hold; the second, started during that backoff, holds
/// its spawn until the hold has passed; the third, cancelled while it waits, ends cancelled
/// without starting its CLI.
#[tokio::test]
async fn runs_in_one_process_wait_for_the_hold_another_run_recorded() {
    let gate = tempfile::tempdir().unwrap();
    let mut config = fast_config();
    config.retry.initial = Duration::from_millis(1500);
    config.retry.max = Duration::from_millis(1500);
    config.rate_limit_gate = Some(gate.path().join("rate-limits"));
    let (first, second, third) = (Scratch::new(), Scratch::new(), Scratch::new());
    let state = first.path("state");
    let first_args = [
        "--times",
        "1",
        "--session-id",
        "g-1",
        "--state-file",
        state.to_str().unwrap(),
    ];
    let first_adapter = first.adapter("rate-limit-then-ok", &first_args);
    let first_run = run(config.clone(), &first_adapter, first.session());
    let others = async {
        while first.log_lines().iter().all(|v| v["kind"] != "backoff") {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let third_session = third.session();
        let cancel = Arc::new(CancelOnAccountWait(third_session.cancel.clone()));
        let second_adapter = second.adapter("ok", &["--session-id", "g-2"]);
        let third_adapter = third.adapter("ok", &["--session-id", "g-3"]);
        tokio::join!(
            run(config.clone(), &second_adapter, second.session()),
            run_observed(config.clone(), &third_adapter, third_session, cancel),
        )
    };
    let (first_out, (second_out, third_out)) = tokio::join!(first_run, others);
    assert_eq!(first_out.unwrap().outcome, Outcome::Succeeded);
    assert_eq!(second_out.unwrap().outcome, Outcome::Succeeded);
    let third_err = third_out.unwrap_err();
    assert!(
        matches!(third_err, ProviderError::Cancelled { .. }),
        "{third_err}"
    );

    let first_log = first.assert_log_complete("succeeded");
    let hold = records(&first_log, "rate_limit_hold");
    assert_eq!(hold.len(), 1, "{first_log:#?}");
    let until = hold[0]["untilEpochMs"].as_u64().unwrap();
    assert_eq!(hold[0]["basis"], "exponential backoff");

    let second_log = second.assert_log_complete("succeeded");
    let waits = records(&second_log, "rate_limit_wait");
    assert_eq!(waits.len(), 1, "{second_log:#?}");
    assert_eq!(waits[0]["untilEpochMs"], until);
    assert!(waits[0]["setBy"].as_str().unwrap().ends_with("-1"));
    let spawns = records(&second_log, "spawn");
    assert_eq!(spawns.len(), 1);
    assert!(
        wall_ms(spawns[0]) >= until,
        "the second run spawned {} ms before the hold ended",
        until - wall_ms(spawns[0])
    );

    let third_log = third.assert_log_complete("cancelled");
    assert!(records(&third_log, "spawn").is_empty(), "{third_log:#?}");
    assert_eq!(records(&third_log, "rate_limit_wait").len(), 1);
}

/// Issue 29 item 3: a run that resumes a session (`corral resume`, a corrective retry) starts in
/// the run directory as the agent left it. A FIFO as `signals.json` blocked the resumed agent's
/// write, and a symbolic link as `events.jsonl` sent Corral's log through it, to wherever it
/// points. Both are removed before the log is opened and named in it; what the link pointed to
/// is left alone.
#[tokio::test]
async fn a_resumed_run_removes_what_the_agent_left_in_place_of_its_files_and_names_it() {
    let s = Scratch::new();
    let mut session = s.session();
    session.resume = Some(SessionId::new("ses-left").unwrap());
    let run_dir = s.run_dir();
    std::fs::create_dir_all(&run_dir).unwrap();
    corral_test_support::mkfifo(&session.signals_file);
    let elsewhere = s.path("elsewhere.txt");
    write_file(&elsewhere, "untouched\n");
    std::os::unix::fs::symlink(&elsewhere, run_dir.join("events.jsonl")).unwrap();
    let out = run(fast_config(), &s.adapter("ok", &[]), session.clone())
        .await
        .unwrap();
    assert_eq!(out.outcome, Outcome::Succeeded);
    assert_eq!(std::fs::read_to_string(&elsewhere).unwrap(), "untouched\n");
    let log = s.log();
    let removed: Vec<(String, String)> = records(&log, "tampering_removed")
        .iter()
        .map(|r| {
            (
                r["path"].as_str().unwrap().to_string(),
                r["was"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        removed,
        [
            (
                session.signals_file.display().to_string(),
                "a FIFO".to_string()
            ),
            (
                run_dir.join("events.jsonl").display().to_string(),
                "a symbolic link".to_string()
            ),
        ]
    );
    assert!(
        !std::fs::symlink_metadata(run_dir.join("events.jsonl"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
}

/// A CLI that says it retries a 429 itself, then waits in silence longer than the idle limit:
/// the wait is not a hang (no kill), the account is held in the gate for it while the attempt
/// goes on, and when the attempt still ends rate-limited (with no reset or retry-after of its
/// own) the backoff waits the delay the CLI announced instead of the exponential floor (60 s
/// here).
#[tokio::test]
async fn a_clis_own_retry_wait_holds_the_account_is_no_hang_and_sets_the_backoff() {
    let gate = tempfile::tempdir().unwrap();
    let mut config = fast_config();
    config.retry.initial = Duration::from_secs(60);
    config.retry.max = Duration::from_secs(60);
    config.rate_limit_gate = Some(gate.path().join("rate-limits"));
    let idle = config.idle_timeout;
    let delay = idle + Duration::from_millis(1000);
    let s = Scratch::new();
    let state = s.path("state");
    let delay_ms = delay.as_millis().to_string();
    let args = [
        "--times",
        "1",
        "--session-id",
        "w-1",
        "--state-file",
        state.to_str().unwrap(),
        "--sleep-ms",
        &delay_ms,
    ];
    let adapter = s.adapter("retry-wait-then-rate-limit", &args);
    let out = run(config, &adapter, s.session()).await.unwrap();
    assert_eq!(out.outcome, Outcome::Succeeded);
    assert_eq!(out.attempts, 2);
    let log = s.log();
    assert!(records(&log, "kill_started").is_empty(), "{log:#?}");
    let from_the_cli: Vec<&Value> = records(&log, "rate_limit_hold")
        .into_iter()
        .filter(|h| h["basis"] == "the CLI's own retry after HTTP 429")
        .collect();
    assert_eq!(from_the_cli.len(), 2, "one per attempt: {log:#?}");
    let backoffs = records(&log, "backoff");
    assert_eq!(backoffs.len(), 1, "{log:#?}");
    assert_eq!(backoffs[0]["reason"], "the CLI's retry-after hint");
    assert_eq!(backoffs[0]["waitMs"], delay.as_millis() as u64);
    let held: Vec<_> = std::fs::read_dir(gate.path().join("rate-limits"))
        .unwrap()
        .flatten()
        .collect();
    assert_eq!(held.len(), 1, "the account's one file");
}

/// A CLI that reports a rejected rate limit with a reset and then stays alive in silence (what
/// Sculptor's parser notes of Claude Code at a subscription limit): the account is held until the
/// reset at once, the idle watchdog lets the wait pass, and since the CLI does not say it waits
/// itself, the spawn is ended after the limit grace (not at the idle limit); the run waits for
/// the reset and resumes the same session, which then does the task.
#[tokio::test]
async fn a_rejected_limit_followed_by_silence_ends_the_spawn_and_resumes_at_the_reset() {
    let gate = tempfile::tempdir().unwrap();
    let mut config = fast_config();
    config.rate_limit_gate = Some(gate.path().join("rate-limits"));
    config.retry.max_reset_wait = Duration::from_secs(120);
    let reset = std::time::SystemTime::now() + Duration::from_secs(20);
    let reset_s = reset
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let s = Scratch::new();
    let state = s.path("state");
    let reset_arg = reset_s.to_string();
    let args = [
        "--times",
        "1",
        "--session-id",
        "silent-1",
        "--state-file",
        state.to_str().unwrap(),
        "--resets-at",
        &reset_arg,
        "--sleep-ms",
        "600000",
    ];
    let adapter = s.adapter("rate-limit-then-silence", &args);
    let out = run(config, &adapter, s.session()).await.unwrap();
    assert_eq!(out.outcome, Outcome::Succeeded);
    assert_eq!(out.attempts, 2);
    let log = s.log();
    let kills = records(&log, "kill_started");
    assert_eq!(kills.len(), 1, "{log:#?}");
    assert_eq!(kills[0]["reason"], "rate_limited", "{log:#?}");
    let holds = records(&log, "rate_limit_hold");
    assert!(
        holds
            .iter()
            .any(|h| h["basis"] == "the CLI's rate-limit event"
                && h["untilEpochMs"] == reset_s * 1000),
        "{log:#?}"
    );
    let backoffs = records(&log, "backoff");
    assert_eq!(backoffs.len(), 1, "{log:#?}");
    assert_eq!(backoffs[0]["reason"], "until the reported reset time");
    let spawns = records(&log, "spawn");
    assert_eq!(spawns[1]["resume"], "silent-1", "{log:#?}");
}
