//! The engine embedded in another program: what that program owns stays its own. The sweep
//! after each attempt reaps only what the run left behind, never a child of the embedding
//! program, whose exit status that program still has to collect.

use std::time::{Duration, Instant};

use corral_ports::ProviderError;

use crate::support::*;

/// Waits until `pid` has exited but has not been waited for (a zombie).
fn wait_until_zombie(pid: u32) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        let state = stat[stat.rfind(')').unwrap() + 2..].chars().next().unwrap();
        if state == 'Z' {
            return;
        }
        assert!(Instant::now() < deadline, "{pid} never exited: {stat}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[tokio::test]
async fn the_sweep_leaves_the_embedding_programs_exited_children_to_it() {
    // The embedding program's own child: a plain std spawn, not the engine's.
    #[allow(clippy::disallowed_methods)]
    let mut own = std::process::Command::new("sh")
        .args(["-c", "exit 7"])
        .spawn()
        .unwrap();
    wait_until_zombie(own.id());
    let s = Scratch::new();
    // A run whose sweep has work to do: a grandchild that left the group.
    let err = s.run_fake("setsid-grandchild", &[]).await.unwrap_err();
    assert!(matches!(err, ProviderError::IdleTimeout { .. }), "{err}");
    s.assert_tree_gone();
    let status = own
        .wait()
        .expect("the embedding program can still wait for its child");
    assert_eq!(status.code(), Some(7));
}
