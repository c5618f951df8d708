//! Reading `run.json` back: a record cut short by a crash in the middle of an in-place write
//! is read from the copy Corral wrote first.

use corral_compose::{RunRecordError, read_record, write_record_file};

fn record(outcome: &str) -> String {
    format!(
        r#"{{"run_id": "r1", "provider": "claude", "cwd": "/work", "started_at": "2026-12-02T20:00:00Z",
  "outcome": "{outcome}", "signal_kinds": [], "attempts": 1, "provider_runs": 1, "usage": {{}}}}"#
    )
}

#[test]
fn a_record_cut_short_is_read_from_the_copy_written_first() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.json");
    let copy = corral_compose::record_copy(&path);
    std::fs::write(&copy, "").unwrap();
    std::fs::write(&path, record("running")).unwrap();
    // Written in place: the copy holds the same, the record reads whole.
    write_record_file(&path, record("succeeded").as_bytes()).unwrap();
    assert_eq!(
        std::fs::read(&copy).unwrap(),
        record("succeeded").as_bytes()
    );
    assert_eq!(read_record(dir.path()).unwrap().outcome, "succeeded");
    // Cut short after the copy was written: the copy's version.
    std::fs::write(&copy, record("failed")).unwrap();
    std::fs::write(&path, &record("failed")[..40]).unwrap();
    assert_eq!(read_record(dir.path()).unwrap().outcome, "failed");
    // Without a whole copy, a record cut short is malformed, as before.
    std::fs::write(&copy, "").unwrap();
    assert!(matches!(
        read_record(dir.path()),
        Err(RunRecordError::Malformed { .. })
    ));
}

/// A `run.json` written before every key was camelCase (ADR 0012): snake_case keys, the usage,
/// the attestation and the supervisor included.
const OLD_CASING: &str = r#"{
  "run_id": "20261201T100000Z-claude-abcdef", "provider": "claude", "model": "opus",
  "cwd": "/work", "started_at": "2026-12-01T10:00:00Z", "finished_at": "2026-12-01T10:05:00Z",
  "outcome": "succeeded", "exit_code": 0, "session_id": "s-1", "signals_valid": true,
  "signals_error": null, "signal_kinds": ["task-complete"], "attempts": 2, "provider_runs": 1,
  "usage": {"input": 10, "output": 5, "cache_read": 3, "cache_write": 2, "cost_usd": 0.25,
            "premium_requests": 1.0},
  "duration_ms": 300000, "error": null, "result": "Done.",
  "resume_command": "corral resume 20261201T100000Z-claude-abcdef",
  "cold_fallback_from": "gone-1",
  "attestation": {"requested_backend": "auto", "actual_backend": "bubblewrap",
    "requested": ["writes-confined"], "enforced": ["writes-confined"], "not_enforced": [],
    "consent": null, "stray_writes": ["added /etc/x"], "stray_check": "checked",
    "read_only_links": ["/work/a"],
    "checked_inside": {"status": {}, "namespaces": {"mnt": "own"},
      "write_outside": {"path": "/tmp/x", "landed": false}, "elapsed_us": 12}},
  "supervisor": {"pid": 42, "start_ticks": 7}
}"#;

#[test]
fn a_record_written_with_snake_case_keys_still_reads() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("run.json"), OLD_CASING).unwrap();
    let record = read_record(dir.path()).unwrap();
    assert_eq!(record.run_id, "20261201T100000Z-claude-abcdef");
    assert_eq!(record.exit_code, Some(0));
    assert_eq!(record.session_id.as_deref(), Some("s-1"));
    assert_eq!(record.signals_valid, Some(true));
    assert_eq!(record.provider_runs, 1);
    assert_eq!(record.usage.cache_read, Some(3));
    assert_eq!(record.usage.cost_usd, Some(0.25));
    assert_eq!(record.usage.premium_requests, Some(1.0));
    assert_eq!(record.duration_ms, Some(300_000));
    assert_eq!(record.cold_fallback_from.as_deref(), Some("gone-1"));
    let attestation = record.attestation.as_ref().unwrap();
    assert_eq!(attestation.requested_backend, "auto");
    assert_eq!(attestation.stray_writes, ["added /etc/x"]);
    assert_eq!(attestation.stray_check, corral_ports::StrayCheck::Checked);
    assert_eq!(attestation.read_only_links, ["/work/a"]);
    let inside = attestation.checked_inside.as_ref().unwrap();
    assert_eq!(inside.elapsed_us, 12);
    assert!(inside.write_outside.is_some());
    assert_eq!(record.supervisor.unwrap().start_ticks, Some(7));
    // Written again, every key is camelCase, and it reads back the same.
    let again = serde_json::to_string(&record).unwrap();
    for key in [
        "runId",
        "exitCode",
        "cacheRead",
        "requestedBackend",
        "elapsedUs",
        "startTicks",
    ] {
        assert!(again.contains(&format!("\"{key}\"")), "{key}: {again}");
    }
    fn snake_keys(value: &serde_json::Value, found: &mut Vec<String>) {
        match value {
            serde_json::Value::Object(map) => {
                for (key, inner) in map {
                    if key.contains('_') {
                        found.push(key.clone());
                    }
                    snake_keys(inner, found);
                }
            }
            serde_json::Value::Array(items) => items.iter().for_each(|v| snake_keys(v, found)),
            _ => {}
        }
    }
    let mut snake = Vec::new();
    snake_keys(&serde_json::from_str(&again).unwrap(), &mut snake);
    assert!(snake.is_empty(), "{snake:?}");
    std::fs::write(dir.path().join("run.json"), &again).unwrap();
    assert_eq!(read_record(dir.path()).unwrap(), record);
}
