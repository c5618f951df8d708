//! The Ray cluster harness: both nodes come up on 127.0.0.1 with the Jobs API answering, and
//! dropping the cluster leaves no process of it behind.

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
        "both nodes' processes name the cluster's temp dir: {before:?}"
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
}
