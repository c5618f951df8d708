//! One test per fault the engine must survive.

use std::sync::Arc;
use std::time::{Duration, Instant};

use corral_engine::EngineConfig;
use corral_ports::{Outcome, ProviderError};
use corral_test_support::{read_pids, wait_for_lines};

use crate::support::*;

#[tokio::test]
async fn hang_after_init_is_ended_by_the_idle_watchdog() {
    let s = Scratch::new();
    let err = s
        .run_fake("hang-after-init", &["--session-id", "hang-1"])
        .await
        .unwrap_err();
    assert!(matches!(err, ProviderError::IdleTimeout { .. }), "{err}");
    assert_eq!(err.session_id().map(|s| s.as_str()), Some("hang-1"));
    assert_eq!(s.session_file().as_deref(), Some("hang-1\n"));
    let log = s.assert_log_complete("idle-timeout");
    let kill = records(&log, "kill_started");
    assert_eq!(kill[0]["reason"], "idle_timeout");
    assert_eq!(kill[0]["limitMs"], 1500);
    s.assert_tree_gone();
}

#[tokio::test]
async fn a_child_that_traps_sigterm_gets_sigkill_after_the_grace() {
    let s = Scratch::new();
    let err = s.run_fake("trap-term", &[]).await.unwrap_err();
    assert!(matches!(err, ProviderError::IdleTimeout { .. }), "{err}");
    let log = s.assert_log_complete("idle-timeout");
    let signals: Vec<_> = records(&log, "signal")
        .iter()
        .map(|v| v["signal"].clone())
        .collect();
    assert_eq!(signals, ["SIGTERM", "SIGKILL"], "{log:?}");
    assert_eq!(err.evidence().and_then(|e| e.signal), Some(9));
    s.assert_tree_gone();
}

#[tokio::test]
async fn three_grandchildren_die_with_the_group_on_cancel() {
    let s = Scratch::new();
    let session = s.session();
    let cancel = session.cancel.clone();
    let adapter = s.adapter("grandchildren", &["--count", "3"]);
    let config = EngineConfig {
        idle_timeout: Duration::from_secs(60),
        ..fast_config()
    };
    let run = tokio::spawn(async move { run(config, &adapter, session).await });
    // The fake, the spawner and three sleepers.
    let pid_file = s.pid_file();
    let ready =
        tokio::task::spawn_blocking(move || wait_for_lines(&pid_file, 5, Duration::from_secs(20)))
            .await
            .unwrap();
    assert!(ready, "the tree never reported five pids");
    cancel.cancel();
    let err = run.await.unwrap().unwrap_err();
    assert!(matches!(err, ProviderError::Cancelled { .. }), "{err}");
    assert_eq!(err.outcome(), Outcome::Cancelled);
    s.assert_log_complete("cancelled");
    assert_eq!(s.assert_tree_gone().len(), 5);
}

/// A grandchild that calls setsid() leaves the process group, so killpg cannot reach it. The
/// engine finds it by the run token in its environment and kills it too.
#[tokio::test]
async fn a_setsid_grandchild_is_caught_by_the_run_token_sweep() {
    let s = Scratch::new();
    let err = s.run_fake("setsid-grandchild", &[]).await.unwrap_err();
    assert!(matches!(err, ProviderError::IdleTimeout { .. }), "{err}");
    let log = s.assert_log_complete("idle-timeout");
    let escaped: Vec<_> = records(&log, "signal")
        .into_iter()
        .filter(|v| v["target"] == "escaped")
        .collect();
    assert_eq!(escaped.len(), 1, "{log:?}");
    s.assert_tree_gone();
}

#[tokio::test]
async fn a_double_forked_daemon_is_caught_by_the_run_token_sweep() {
    let s = Scratch::new();
    let err = s.run_fake("daemonize", &[]).await.unwrap_err();
    assert!(matches!(err, ProviderError::IdleTimeout { .. }), "{err}");
    s.assert_log_complete("idle-timeout");
    s.assert_tree_gone();
}

/// The honest limit of the native backend: a descendant that both leaves the group and scrubs
/// its environment is out of reach. Only a pid namespace (the bubblewrap backend) catches it.
#[tokio::test]
async fn a_setsid_grandchild_with_a_scrubbed_environment_escapes_natively() {
    let s = Scratch::new();
    let err = s.run_fake("setsid-scrubbed", &[]).await.unwrap_err();
    assert!(matches!(err, ProviderError::IdleTimeout { .. }), "{err}");
    let pids = read_pids(&s.pid_file());
    assert_eq!(pids.len(), 2);
    let survivors = corral_test_support::wait_all_dead(&pids, Duration::from_millis(500));
    corral_test_support::kill_survivors(&survivors);
    assert_eq!(
        survivors,
        [pids[1]],
        "exactly the scrubbed setsid child survives"
    );
}

#[tokio::test]
async fn a_64_mib_line_is_shortened_into_its_event_and_the_stream_continues() {
    let s = Scratch::new();
    let out = s
        .run_fake("giant-line", &["--bytes", "67108864"])
        .await
        .unwrap();
    assert_eq!(out.outcome, Outcome::Succeeded);
    let log = s.assert_log_complete("succeeded");
    assert!(agent_events(&log, "oversized_line").is_empty());
    let shortened = agent_events(&log, "line_shortened");
    assert_eq!(shortened.len(), 1);
    let text_len = 67_108_864 - r#"{"type":"text","text":""}"#.len() as u64;
    // The default cap is 8 MiB; one long string keeps an eighth of it.
    let kept: u64 = 1024 * 1024;
    assert_eq!(shortened[0]["len"], 67_108_864);
    assert_eq!(
        shortened[0]["strings"],
        serde_json::json!([{"path": "text", "len": text_len, "kept": kept}])
    );
    // The shortened line still parsed into its event, which says where it was cut.
    let text = agent_events(&log, "text");
    let text = text[0]["text"].as_str().unwrap();
    let marker = format!("…[cut by corral: {text_len} bytes, first {kept} kept]");
    assert_eq!(text.len() as u64, kept + marker.len() as u64);
    assert!(
        text.ends_with(&marker) && text.starts_with("aaaa"),
        "{}",
        &text[text.len() - 80..]
    );
    assert_eq!(
        agent_events(&log, "terminal_result").len(),
        1,
        "the result after the giant line"
    );
    s.assert_tree_gone();
}

#[tokio::test]
async fn a_20_mib_result_line_still_gives_the_outcome_usage_cost_and_session() {
    let s = Scratch::new();
    let out = s
        .run_fake(
            "giant-result",
            &["--session-id", "big-1", "--bytes", "20971520"],
        )
        .await
        .unwrap();
    assert_eq!(out.outcome, Outcome::Succeeded);
    assert_eq!(out.session_id.as_ref().map(|s| s.as_str()), Some("big-1"));
    assert_eq!(
        out.usage,
        corral_ports::Usage {
            input: Some(10),
            output: Some(5),
            cost_usd: Some(0.001),
            ..corral_ports::Usage::default()
        }
    );
    let text = out.final_text.unwrap();
    assert!(
        text.ends_with("…[cut by corral: 20971520 bytes, first 1048576 kept]"),
        "{}",
        &text[text.len() - 80..]
    );
    let log = s.assert_log_complete("succeeded");
    let shortened = agent_events(&log, "line_shortened");
    assert_eq!(shortened[0]["strings"][0]["path"], "text");
    assert_eq!(shortened[0]["strings"][0]["len"], 20_971_520);
    s.assert_tree_gone();
}

#[tokio::test]
async fn exit_zero_without_the_terminal_event_is_a_cli_failure_that_names_the_reason() {
    let s = Scratch::new();
    let err = s
        .run_fake("no-result", &["--session-id", "nr-1"])
        .await
        .unwrap_err();
    let ProviderError::Crashed { reason, .. } = &err else {
        panic!("not a crash: {err}");
    };
    assert!(
        reason.contains("exited 0 without its terminal event"),
        "{reason}"
    );
    assert!(
        err.to_string()
            .starts_with("claude: the CLI failed (exit code 0): it exited 0 without"),
        "{err}"
    );
    // Retryable, with the session to resume.
    assert!(err.is_retryable());
    assert_eq!(err.session_id().map(|s| s.as_str()), Some("nr-1"));
    let log = s.assert_log_complete("crashed");
    let classified = records(&log, "classified");
    assert_eq!(classified[0]["class"], "crashed");
    assert_eq!(
        classified[0]["detail"],
        "exit code 0; no terminal event, though this CLI always prints one"
    );
    s.assert_tree_gone();
}

#[tokio::test]
async fn exit_zero_is_a_success_for_a_cli_without_a_terminal_event() {
    let s = Scratch::new();
    let adapter = FakeAdapter {
        always_terminal_event: false,
        ..s.adapter("no-result", &[])
    };
    let out = run(fast_config(), &adapter, s.session()).await.unwrap();
    assert_eq!(out.outcome, Outcome::Succeeded);
    s.assert_log_complete("succeeded");
    s.assert_tree_gone();
}

#[tokio::test]
async fn invalid_utf8_is_decoded_lossily() {
    let s = Scratch::new();
    let out = s.run_fake("invalid-utf8", &[]).await.unwrap();
    assert_eq!(out.outcome, Outcome::Succeeded);
    let log = s.assert_log_complete("succeeded");
    let texts = agent_events(&log, "text");
    assert_eq!(texts[0]["text"], "bad \u{fffd}\u{fffd} bytes");
    s.assert_tree_gone();
}

#[tokio::test]
async fn crlf_line_ends_are_trimmed() {
    let s = Scratch::new();
    let out = s
        .run_fake("crlf", &["--session-id", "crlf-1"])
        .await
        .unwrap();
    assert_eq!(out.outcome, Outcome::Succeeded);
    assert_eq!(out.session_id.as_ref().map(|s| s.as_str()), Some("crlf-1"));
    let log = s.assert_log_complete("succeeded");
    assert_eq!(agent_events(&log, "text")[0]["text"], "hello");
    assert!(agent_events(&log, "unparsed").is_empty(), "{log:?}");
    assert_eq!(s.session_file().as_deref(), Some("crlf-1\n"));
    s.assert_tree_gone();
}

#[tokio::test]
async fn lingering_after_the_terminal_event_is_success_and_the_group_is_ended() {
    let s = Scratch::new();
    let out = s.run_fake("linger-after-result", &[]).await.unwrap();
    assert_eq!(out.outcome, Outcome::Succeeded);
    assert_eq!(out.usage.input, Some(10));
    assert_eq!(out.usage.cost_usd, Some(0.001));
    let log = s.assert_log_complete("succeeded");
    assert_eq!(
        records(&log, "kill_started")[0]["reason"],
        "lingered_after_result"
    );
    s.assert_tree_gone();
}

#[tokio::test]
async fn a_non_zero_exit_after_success_is_still_success() {
    let s = Scratch::new();
    let out = s.run_fake("exit-nonzero-after-result", &[]).await.unwrap();
    assert_eq!(out.outcome, Outcome::Succeeded);
    assert_eq!(out.exit_code, Some(3));
    assert!(!out.recovered_from_exit);
    s.assert_log_complete("succeeded");
    s.assert_tree_gone();
}

#[tokio::test]
async fn a_non_zero_exit_with_signals_present_is_recovered() {
    let s = Scratch::new();
    let session = s.session();
    let signals = session.signals_file.to_string_lossy().into_owned();
    let out = run(
        fast_config(),
        &s.adapter("exit-nonzero-with-signals", &["--signals", &signals]),
        session,
    )
    .await
    .unwrap();
    assert_eq!(out.outcome, Outcome::Recovered);
    assert!(out.recovered_from_exit && out.signals_present);
    assert_eq!(out.exit_code, Some(1));
    s.assert_log_complete("recovered");
    s.assert_tree_gone();
}

#[tokio::test]
async fn a_signals_file_left_by_an_earlier_run_does_not_recover_a_failure() {
    let s = Scratch::new();
    let session = s.session();
    std::fs::create_dir_all(&session.output_dir).unwrap();
    write_file(&session.signals_file, "{}");
    let err = run(fast_config(), &s.adapter("crash-mid-line", &[]), session)
        .await
        .unwrap_err();
    assert!(matches!(err, ProviderError::Crashed { .. }), "{err}");
    s.assert_tree_gone();
}

#[tokio::test]
async fn a_100_mb_stderr_flood_is_drained_and_bounded_in_the_log() {
    let s = Scratch::new();
    let out = s
        .run_fake("stderr-flood", &["--bytes", "104857600"])
        .await
        .unwrap();
    assert_eq!(out.outcome, Outcome::Succeeded);
    let log = s.assert_log_complete("succeeded");
    let truncated = records(&log, "stderr_truncated");
    assert_eq!(truncated[0]["totalBytes"], 104_857_600);
    let size = std::fs::metadata(s.run_dir().join("events.jsonl"))
        .unwrap()
        .len();
    assert!(size < 2 * 1024 * 1024, "log is {size} bytes");
    s.assert_tree_gone();
}

#[tokio::test]
async fn a_crash_in_the_middle_of_a_line_is_a_crash_with_the_partial_line_kept() {
    let s = Scratch::new();
    let err = s
        .run_fake("crash-mid-line", &["--session-id", "c-1"])
        .await
        .unwrap_err();
    assert!(matches!(err, ProviderError::Crashed { .. }), "{err}");
    assert!(err.is_retryable());
    let evidence = err.evidence().unwrap();
    assert_eq!(evidence.signal, Some(11));
    assert_eq!(
        evidence.session_id.as_ref().map(|s| s.as_str()),
        Some("c-1")
    );
    let log = s.assert_log_complete("crashed");
    assert_eq!(
        agent_events(&log, "unparsed")[0]["line"],
        "{\"type\":\"text\",\"te"
    );
    assert_eq!(s.session_file().as_deref(), Some("c-1\n"));
    s.assert_tree_gone();
}

#[tokio::test]
async fn stdout_closed_while_the_process_runs_on_is_ended_by_the_idle_watchdog() {
    let s = Scratch::new();
    let err = s.run_fake("close-stdout", &[]).await.unwrap_err();
    assert!(matches!(err, ProviderError::IdleTimeout { .. }), "{err}");
    s.assert_log_complete("idle-timeout");
    s.assert_tree_gone();
}

#[tokio::test]
async fn a_wall_clock_limit_ends_a_chatty_run() {
    let s = Scratch::new();
    let config = EngineConfig {
        wall_timeout: Some(Duration::from_millis(800)),
        ..fast_config()
    };
    // `ok` with a long sleep keeps the process alive; the idle watchdog is longer than the wall.
    let config = EngineConfig {
        idle_timeout: Duration::from_secs(30),
        ..config
    };
    let err = run(
        config,
        &s.adapter("ok", &["--sleep-ms", "20000"]),
        s.session(),
    )
    .await
    .unwrap_err();
    assert!(matches!(err, ProviderError::WallTimeout { .. }), "{err}");
    s.assert_log_complete("wall-timeout");
    s.assert_tree_gone();
}

#[tokio::test]
async fn a_missing_program_is_cli_not_found() {
    let s = Scratch::new();
    let mut adapter = s.adapter("ok", &[]);
    adapter.program = s.path("no-such-cli");
    let err = run(fast_config(), &adapter, s.session()).await.unwrap_err();
    match &err {
        ProviderError::CliNotFound { program, .. } => assert!(program.ends_with("no-such-cli")),
        other => panic!("expected CliNotFound, got {other}"),
    }
    assert!(
        err.to_string().contains("is the CLI installed and on PATH"),
        "{err}"
    );
    let log = s.log();
    assert_eq!(records(&log, "spawn_failed").len(), 1);
}

#[tokio::test]
async fn a_missing_working_directory_is_refused_before_spawning() {
    let s = Scratch::new();
    let mut session = s.session();
    session.cwd = s.path("gone");
    let err = run(fast_config(), &s.adapter("ok", &[]), session)
        .await
        .unwrap_err();
    assert!(matches!(err, ProviderError::InvalidSession { .. }), "{err}");
    assert!(err.to_string().contains("gone"), "{err}");
}

/// A 1 MiB prompt goes through stdin; the child's command line, read from
/// `/proc/<pid>/cmdline` while it runs, holds none of it.
#[tokio::test]
async fn a_1_mib_prompt_never_enters_argv() {
    let s = Scratch::new();
    let mut session = s.session();
    let sentinel = "SENTINEL-7f3a9";
    let mut prompt = String::with_capacity(1 << 20);
    while prompt.len() < (1 << 20) - sentinel.len() {
        prompt.push_str(sentinel);
    }
    while prompt.len() < 1 << 20 {
        prompt.push('.');
    }
    session.prompt = Arc::from(prompt.as_str());
    // The fake stays alive until the go file exists: the test reads its argv first.
    let go = s.path("go");
    let adapter = s.adapter("echo-stdin", &["--wait-for", go.to_str().unwrap()]);
    let pid_file = s.pid_file();
    let run = tokio::spawn(async move { run(fast_config(), &adapter, session).await });
    let go_file = go.clone();
    let cmdline = tokio::task::spawn_blocking(move || {
        assert!(wait_for_lines(&pid_file, 1, Duration::from_secs(20)));
        let pid = read_pids(&pid_file)[0];
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline"))
            .unwrap_or_else(|e| panic!("pid {pid} of {:?}: {e}", read_pids(&pid_file)));
        std::fs::write(&go_file, "").unwrap();
        cmdline
    })
    .await
    .unwrap();
    let out = run.await.unwrap().unwrap();
    assert_eq!(out.outcome, Outcome::Succeeded);
    let cmdline = String::from_utf8_lossy(&cmdline);
    assert!(
        cmdline.contains("echo-stdin"),
        "read the right process: {cmdline}"
    );
    assert!(!cmdline.contains(sentinel), "the prompt leaked into argv");
    assert!(cmdline.len() < 4096, "argv is {} bytes", cmdline.len());
    let log = s.assert_log_complete("succeeded");
    let text = agent_events(&log, "text")[0]["text"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(text.starts_with("stdin_bytes=1048576 "), "{text}");
    let stdin = records(&log, "stdin_closed");
    assert_eq!(stdin[0]["bytes"], 1_048_576);
    assert!(
        !std::fs::read_to_string(s.run_dir().join("events.jsonl"))
            .unwrap()
            .contains(sentinel)
    );
    s.assert_tree_gone();
}

#[tokio::test]
async fn cancellation_kills_the_tree_promptly() {
    let s = Scratch::new();
    let session = s.session();
    let cancel = session.cancel.clone();
    let adapter = s.adapter("hang-after-init", &[]);
    let config = EngineConfig {
        idle_timeout: Duration::from_secs(60),
        ..fast_config()
    };
    let run = tokio::spawn(async move { run(config, &adapter, session).await });
    let pid_file = s.pid_file();
    assert!(
        tokio::task::spawn_blocking(move || wait_for_lines(&pid_file, 1, Duration::from_secs(20)))
            .await
            .unwrap()
    );
    let t = Instant::now();
    cancel.cancel();
    let err = run.await.unwrap().unwrap_err();
    assert!(matches!(err, ProviderError::Cancelled { .. }), "{err}");
    // Not a speed target (see the benchmark): only proof that no grace period was waited out.
    assert!(t.elapsed() < Duration::from_secs(5));
    s.assert_log_complete("cancelled");
    s.assert_tree_gone();
}

#[tokio::test]
async fn environment_values_and_the_prompt_are_never_logged() {
    let s = Scratch::new();
    let mut config = fast_config();
    config.ambient_env = Some(vec![
        ("PATH".into(), std::env::var("PATH").unwrap_or_default()),
        (
            "FAKE_AGENT_SECRET_TOKEN".into(),
            "value-must-not-appear".into(),
        ),
        ("OTHER_API_KEY".into(), "other-secret".into()),
        ("OTHER_HOME".into(), "/opt/other".into()),
        ("CLAUDECODE".into(), "1".into()),
    ]);
    // A wildcard allowlist passes ordinary names but never secret-looking ones.
    config.env_allow = vec!["OTHER_*".into()];
    let out = run(config, &s.adapter("ok", &[]), s.session())
        .await
        .unwrap();
    assert_eq!(out.outcome, Outcome::Succeeded);
    let log = s.assert_log_complete("succeeded");
    let spawn = records(&log, "spawn")[0];
    let names: Vec<&str> = spawn["envNames"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"FAKE_AGENT_SECRET_TOKEN"),
        "the profile names it: {names:?}"
    );
    assert!(names.contains(&"CORRAL_RUN_ID"));
    assert!(names.contains(&"OTHER_HOME"), "{names:?}");
    assert!(
        !names.contains(&"OTHER_API_KEY") && !names.contains(&"CLAUDECODE"),
        "{names:?}"
    );
    assert_eq!(spawn["envWithheld"], serde_json::json!(["OTHER_API_KEY"]));
    let text = std::fs::read_to_string(s.run_dir().join("events.jsonl")).unwrap();
    assert!(!text.contains("value-must-not-appear") && !text.contains("do the thing"));
}
