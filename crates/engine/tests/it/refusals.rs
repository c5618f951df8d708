//! A run refused before its CLI starts is recorded as such: its log is complete, from
//! `run_started` to a `run_finished` whose outcome is `not-started`, never a spawn failure.

use std::path::Path;

use corral_ports::{Outcome, ProviderError};

use crate::support::*;

fn git(dir: &Path, args: &[&str]) {
    let out = corral_test_support::command(Path::new("git"))
        .args(["-c", "user.name=t", "-c", "user.email=t@example.invalid"])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}");
}

#[tokio::test]
async fn a_dirty_tree_refusal_ends_the_log_as_not_started() {
    let s = Scratch::new();
    let session = s.session();
    git(s.dir.path(), &["init", "-q"]);
    std::fs::write(s.path("work").join("uncommitted.txt"), "x").unwrap();
    let mut config = fast_config();
    config.sandbox.refuse_dirty_tree = true;
    let err = run(config, &s.adapter("ok", &[]), session)
        .await
        .unwrap_err();
    assert!(matches!(err, ProviderError::InvalidSession { .. }), "{err}");
    assert_eq!(err.outcome(), Outcome::NotStarted);
    let log = s.assert_log_complete("not-started");
    assert_eq!(records(&log, "classified")[0]["class"], "dirty-tree");
    assert!(!s.pid_file().exists(), "the CLI never ran");
}

#[tokio::test]
async fn a_missing_program_is_still_a_spawn_failure() {
    let s = Scratch::new();
    let mut adapter = s.adapter("ok", &[]);
    adapter.program = s.path("no-such-cli");
    let err = run(fast_config(), &adapter, s.session()).await.unwrap_err();
    assert_eq!(err.outcome(), Outcome::SpawnFailed);
    s.assert_log_complete("spawn-failed");
}
