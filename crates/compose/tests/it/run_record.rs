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
