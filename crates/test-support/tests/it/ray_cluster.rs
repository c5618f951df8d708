//! The Ray cluster harness: both nodes come up on 127.0.0.1 with the Jobs API answering, and
//! dropping the cluster leaves no process of it behind, and ends nothing that is not its own.

use std::time::{Duration, Instant};

use corral_test_support::ray_cluster::{RayCluster, require_ray};

#[test]
fn a_two_node_cluster_starts_answers_and_leaves_nothing_behind() {
    let Some(venv) = require_ray() else {
        return;
    };
    let started = Instant::now();
    let cluster = RayCluster::start(&venv).expect("the cluster starts");
    eprintln!("cluster up in {:?}", started.elapsed());
    let temp_dir = cluster.temp_dir().to_path_buf();
    assert!(cluster.address().starts_with("http://127.0.0.1:"));
    let before = RayCluster::leftovers(&temp_dir);
    assert!(
        before.len() >= 4,
        "both nodes' processes carry the cluster's mark: {before:?}"
    );
    // Another test's sandbox names the host's unix sockets, this cluster's among them, in its
    // arguments: a process that only mentions the temp dir is not the cluster's to end.
    let socket = temp_dir.join("session_latest/sockets/raylet");
    // `read` is built into the shell: no child of its own, and its argv keeps the path.
    let mut bystander = corral_test_support::command(std::path::Path::new("sh"))
        .args(["-c", "read line", "sh", "--ro-bind"])
        .arg(&socket)
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    assert!(
        !RayCluster::leftovers(&temp_dir).contains(&bystander.id()),
        "a process naming the temp dir is not taken for the cluster's"
    );
    let stopping = Instant::now();
    drop(cluster);
    eprintln!("cluster stopped in {:?}", stopping.elapsed());
    // The drop waits for the process groups; a straggler re-parented elsewhere gets a moment.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut left = RayCluster::leftovers(&temp_dir);
    while !left.is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
        left = RayCluster::leftovers(&temp_dir);
    }
    assert!(
        left.is_empty(),
        "Ray processes left after the drop: {left:?}"
    );
    assert!(!temp_dir.exists(), "the cluster's temp dir is removed");
    let bystander_survived = bystander.try_wait().unwrap().is_none();
    let _ = bystander.kill();
    let _ = bystander.wait();
    assert!(
        bystander_survived,
        "stopping the cluster ended a process that was not its own"
    );
}
