//! Liveness for CLIs that print nothing until the end, and session ids minted up front.

use std::time::Duration;

use corral_engine::{EngineConfig, Liveness};
use corral_ports::{Outcome, ProviderError, SessionId};

use crate::support::*;

fn quiet_config() -> EngineConfig {
    EngineConfig {
        idle_timeout: Duration::from_millis(700),
        ..fast_config()
    }
}

#[tokio::test]
async fn a_silent_but_busy_cli_is_killed_when_only_output_counts() {
    let s = Scratch::new();
    let adapter = s.adapter("quiet-busy", &["--sleep-ms", "3000"]);
    let err = run(quiet_config(), &adapter, s.session())
        .await
        .unwrap_err();
    assert!(matches!(err, ProviderError::IdleTimeout { .. }), "{err}");
    s.assert_tree_gone();
}

#[tokio::test]
async fn process_activity_keeps_a_silent_but_busy_cli_alive() {
    let s = Scratch::new();
    let mut adapter = s.adapter("quiet-busy", &["--sleep-ms", "3000"]);
    adapter.liveness = Liveness::ProcessActivity {
        min_idle: Duration::ZERO,
    };
    let out = run(quiet_config(), &adapter, s.session()).await.unwrap();
    assert_eq!(out.outcome, Outcome::Succeeded);
    s.assert_log_complete("succeeded");
    s.assert_tree_gone();
}

#[tokio::test]
async fn process_activity_still_ends_a_hung_cli() {
    let s = Scratch::new();
    let mut adapter = s.adapter("hang-after-init", &[]);
    adapter.liveness = Liveness::ProcessActivity {
        min_idle: Duration::ZERO,
    };
    let err = run(quiet_config(), &adapter, s.session())
        .await
        .unwrap_err();
    assert!(matches!(err, ProviderError::IdleTimeout { .. }), "{err}");
    s.assert_log_complete("idle-timeout");
    s.assert_tree_gone();
}

#[tokio::test]
async fn the_minimum_idle_of_a_cli_overrides_a_shorter_setting() {
    let s = Scratch::new();
    let mut adapter = s.adapter("hang-after-init", &[]);
    adapter.liveness = Liveness::ProcessActivity {
        min_idle: Duration::from_millis(1500),
    };
    let err = run(quiet_config(), &adapter, s.session())
        .await
        .unwrap_err();
    match err {
        ProviderError::IdleTimeout { idle, .. } => assert_eq!(idle, Duration::from_millis(1500)),
        other => panic!("expected IdleTimeout, got {other}"),
    }
    let log = s.log();
    assert_eq!(records(&log, "kill_started")[0]["limitMs"], 1500);
}

#[tokio::test]
async fn a_minted_session_id_is_on_disk_before_the_cli_prints_anything() {
    let s = Scratch::new();
    let mut adapter = s.adapter("ok", &["--session-id", "minted-7"]);
    adapter.minted = Some(SessionId::new("minted-7").unwrap());
    let out = run(fast_config(), &adapter, s.session()).await.unwrap();
    assert_eq!(
        out.session_id.as_ref().map(SessionId::as_str),
        Some("minted-7")
    );
    let log = s.assert_log_complete("succeeded");
    let order: Vec<String> = log
        .iter()
        .filter_map(|v| match v["kind"].as_str() {
            Some("agent") => Some(format!("agent:{}", v["event"].as_str().unwrap_or("?"))),
            Some("session_persisted") => Some("session_persisted".into()),
            _ => None,
        })
        .take(3)
        .collect();
    assert_eq!(
        order,
        [
            "agent:session_started",
            "session_persisted",
            "agent:session_started"
        ]
    );
    assert_eq!(
        records(&log, "session_persisted").len(),
        1,
        "the same id is written once"
    );
}
