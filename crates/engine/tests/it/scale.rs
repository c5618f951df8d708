//! Many runs at once in one process, each independent.

use std::time::Duration;

use corral_engine::EngineConfig;
use corral_ports::Outcome;
use corral_test_support::{read_pids, wait_all_dead};

use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_runs_at_once_are_independent() {
    let config = EngineConfig {
        idle_timeout: Duration::from_secs(60),
        ..fast_config()
    };
    let scratches: Vec<Scratch> = (0..100).map(|_| Scratch::new()).collect();
    let mut tasks = Vec::new();
    for (i, s) in scratches.iter().enumerate() {
        let id = format!("run-{i}");
        let adapter = s.adapter("ok", &["--session-id", &id]);
        let session = s.session();
        let config = config.clone();
        tasks.push(tokio::spawn(async move {
            (id, run(config, &adapter, session).await)
        }));
    }
    for (task, s) in tasks.into_iter().zip(&scratches) {
        let (id, result) = task.await.unwrap();
        let out = result.unwrap();
        assert_eq!(out.outcome, Outcome::Succeeded);
        assert_eq!(
            out.session_id.as_ref().map(|s| s.as_str()),
            Some(id.as_str())
        );
        assert_eq!(s.session_file(), Some(format!("{id}\n")));
        s.assert_log_complete("succeeded");
    }
    let pids: Vec<u32> = scratches
        .iter()
        .flat_map(|s| read_pids(&s.pid_file()))
        .collect();
    assert_eq!(pids.len(), 100);
    assert!(wait_all_dead(&pids, Duration::from_secs(10)).is_empty());
}
