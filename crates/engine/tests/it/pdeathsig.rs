//! A supervisor that dies takes its children along (`PR_SET_PDEATHSIG`).
//!
//! The test re-runs this test binary as a supervisor process (selected by an environment
//! variable), lets it start the fake agent through the engine, kills it with SIGKILL, and checks
//! that the fake agent dies too.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use corral_engine::EngineConfig;
use corral_test_support::{read_pids, wait_all_dead, wait_for_lines};

use crate::support::*;

const ROLE: &str = "CORRAL_TEST_PDEATHSIG_SUPERVISOR";

/// Runs only inside the re-executed supervisor process; a no-op in a normal test run.
#[tokio::test]
async fn pdeathsig_supervisor_role() {
    let Some(dir) = std::env::var_os(ROLE) else {
        return;
    };
    let dir = PathBuf::from(dir);
    let s = Scratch::new();
    let mut adapter = s.adapter("hang-after-init", &[]);
    adapter.pid_file = dir.join("pids");
    let mut session = s.session();
    session.output_dir = dir.join("run");
    session.signals_file = dir.join("run/signals.json");
    let config = EngineConfig {
        idle_timeout: Duration::from_secs(120),
        ..fast_config()
    };
    let _ = run(config, &adapter, session).await;
}

#[test]
fn a_killed_supervisor_takes_its_child_along() {
    let s = Scratch::new();
    let exe = std::env::current_exe().unwrap();
    // The supervisor under test is this test binary itself, re-executed: test code, not product.
    // `--exact` works with both libtest and nextest's invocation of the test binary.
    #[allow(clippy::disallowed_methods)]
    let mut supervisor = std::process::Command::new(exe)
        .args([
            "--exact",
            "pdeathsig::pdeathsig_supervisor_role",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(ROLE, s.dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid_file = s.dir.path().join("pids");
    let started = wait_for_lines(&pid_file, 1, Duration::from_secs(30));
    if !started {
        let _ = supervisor.kill();
        panic!("the supervisor never started the fake agent");
    }
    let child = read_pids(&pid_file);
    supervisor.kill().unwrap();
    supervisor.wait().unwrap();
    let survivors = wait_all_dead(&child, Duration::from_secs(5));
    corral_test_support::kill_survivors(&survivors);
    assert!(
        survivors.is_empty(),
        "the CLI outlived its supervisor: {survivors:?}"
    );
}
