//! The Jobs API client against a real cluster: a job runs to SUCCEEDED with its output in the
//! logs, a failing entrypoint is told apart from a lost job, and a long job is stopped.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use corral_executor_ray::{JobStatus, JobSubmission, JobsClient, JobsError, RuntimeEnv};
use corral_test_support::ray_cluster::{RayCluster, require_ray};

fn job(id: &str, entrypoint: &str) -> JobSubmission {
    JobSubmission {
        entrypoint: entrypoint.to_owned(),
        submission_id: id.to_owned(),
        entrypoint_num_cpus: Some(0.5),
        entrypoint_memory: Some(64 * 1024 * 1024),
        runtime_env: RuntimeEnv {
            env_vars: BTreeMap::from([("CORRAL_GREETING".to_owned(), "hello from ray".to_owned())]),
        },
        metadata: BTreeMap::new(),
    }
}

async fn wait_for(client: &JobsClient, id: &str, done: impl Fn(JobStatus) -> bool) -> JobStatus {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let info = client.status(id).await.expect("status answers");
        if done(info.status) || Instant::now() > deadline {
            return info.status;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn submit_status_logs_and_stop_against_a_real_cluster() {
    let Some(venv) = require_ray() else {
        return;
    };
    let cluster = tokio::task::spawn_blocking(move || RayCluster::start(&venv))
        .await
        .expect("the start thread")
        .expect("the cluster starts");
    let client = JobsClient::new(&cluster.address()).expect("an http address");
    assert_eq!(
        client
            .version()
            .await
            .expect("the API answers")
            .split('.')
            .next(),
        Some("2")
    );

    // A job runs with its environment and its output lands in the logs.
    let echo = client
        .submit(&job("corral-test-echo", "echo \"$CORRAL_GREETING\""))
        .await
        .expect("submitted");
    assert_eq!(echo, "corral-test-echo");
    assert_eq!(
        wait_for(&client, &echo, JobStatus::is_terminal).await,
        JobStatus::Succeeded
    );
    let logs = client.logs(&echo).await.expect("logs");
    assert!(
        logs.contains("hello from ray"),
        "the job's output is in its logs: {logs:?}"
    );

    // The same id again is refused (a client error, not retryable).
    let taken = client
        .submit(&job("corral-test-echo", "true"))
        .await
        .expect_err("a submission id is unique");
    assert!(matches!(taken, JobsError::Taken { .. }), "{taken:?}");
    assert!(!taken.is_retryable());

    // An entrypoint that exits non-zero is its own failure, not a lost job.
    let failing = client
        .submit(&job("corral-test-exit3", "exit 3"))
        .await
        .expect("submitted");
    assert_eq!(
        wait_for(&client, &failing, JobStatus::is_terminal).await,
        JobStatus::Failed
    );
    let info = client.status(&failing).await.expect("status");
    assert!(info.entrypoint_failed(), "{info:?}");

    // A long job is stopped.
    let sleeper = client
        .submit(&job("corral-test-sleep", "sleep 60"))
        .await
        .expect("submitted");
    assert_eq!(
        wait_for(&client, &sleeper, |s| s != JobStatus::Pending).await,
        JobStatus::Running
    );
    let listed = client.list().await.expect("the list answers");
    let running: Vec<_> = listed
        .iter()
        .filter(|j| j.status == JobStatus::Running)
        .filter_map(|j| j.submission_id.clone())
        .collect();
    assert_eq!(running, std::slice::from_ref(&sleeper), "{listed:#?}");
    assert!(
        listed
            .iter()
            .any(|j| j.submission_id.as_deref() == Some(failing.as_str())
                && j.status == JobStatus::Failed),
        "{listed:#?}"
    );
    assert!(
        client.stop(&sleeper).await.expect("stop answers"),
        "it was running"
    );
    assert_eq!(
        wait_for(&client, &sleeper, JobStatus::is_terminal).await,
        JobStatus::Stopped
    );

    // An unknown job is a client error.
    let unknown = client
        .status("corral-test-nope")
        .await
        .expect_err("no such job");
    assert!(
        matches!(unknown, JobsError::Status { status: 404, .. }),
        "{unknown:?}"
    );
    tokio::task::spawn_blocking(move || drop(cluster))
        .await
        .expect("the stop thread");
}

#[tokio::test]
async fn a_cluster_that_is_not_there_is_unreachable_and_retryable() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let client = JobsClient::new(&format!("http://127.0.0.1:{port}")).expect("an http address");
    let e = client.version().await.expect_err("nothing listens");
    assert!(matches!(e, JobsError::Unreachable { .. }), "{e:?}");
    assert!(e.is_retryable());
    assert!(matches!(
        JobsClient::new("127.0.0.1:8265"),
        Err(JobsError::Address { .. })
    ));
}
