//! A memory hog, a fork loop, a disk filler and a CPU spinner, each spawned in a limit group:
//! each is stopped (or held back) by its own limit, a sibling spawned beside it goes on, and
//! nothing is left behind (no member, no cgroup). Where the machine offers no cgroup for a
//! limit, the test says so loudly and checks what the fallback promises instead.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use corral_process::{
    ChildOutputs, Limit, LimitGroup, ProviderSpawn, ResourceLimits, SpawnRequest, SpawnedChild,
    StdinMode, TokioSpawner,
};

/// Generous: the machine is shared with other builds and tests.
const DEADLINE: Duration = Duration::from_secs(60);

fn shell(script: &str, cwd: &Path, group: Option<&Arc<LimitGroup>>) -> Box<dyn SpawnedChild> {
    let request = SpawnRequest {
        program: PathBuf::from("/bin/sh"),
        args: vec![OsString::from("-c"), OsString::from(script)],
        env: vec![("PATH".into(), "/usr/bin:/bin".into())],
        cwd: cwd.to_path_buf(),
        stdin: StdinMode::Null,
        parent_death_signal: true,
        inherit_fds: Vec::new(),
        output: ChildOutputs::Pipes,
        pre_exec: group.map(LimitGroup::hook).into_iter().collect(),
    };
    TokioSpawner.spawn(&request).expect("spawn")
}

/// Whether `limit` is enforced through a cgroup here; says so when it is not.
fn by_cgroup(group: &LimitGroup, limit: Limit) -> bool {
    let enforcement = group
        .enforcement()
        .iter()
        .find(|e| e.limit == limit)
        .expect("the limit was asked for");
    let cgroup = enforcement
        .how
        .as_deref()
        .is_some_and(|how| how.starts_with("cgroup"));
    if !cgroup {
        eprintln!(
            "SKIPPED (in part): no cgroup for {} here: {:?}",
            limit.as_str(),
            enforcement.why_not
        );
    }
    cgroup
}

/// A sibling without limits runs to its end while the limited spawn misbehaves.
async fn sibling_goes_on(dir: &Path) {
    let mut sibling = shell("echo sibling > sibling.txt", dir, None);
    let exit = tokio::time::timeout(DEADLINE, sibling.wait())
        .await
        .expect("the sibling ends")
        .expect("wait");
    assert!(exit.success(), "the sibling failed: {exit}");
    assert_eq!(
        std::fs::read_to_string(dir.join("sibling.txt")).unwrap(),
        "sibling\n"
    );
}

/// Ends the group and checks that nothing of it is left.
async fn nothing_left(group: Arc<LimitGroup>, mut child: Box<dyn SpawnedChild>) {
    // A group without cgroups (a disk limit alone) knows no members: its process group goes.
    group.kill_all();
    let _ = corral_process::signal_group(child.pid(), nix::sys::signal::Signal::SIGKILL);
    tokio::time::timeout(DEADLINE, child.wait())
        .await
        .expect("the leader ends once the group is killed")
        .expect("wait");
    assert!(
        group.members().is_empty(),
        "members left: {:?}",
        group.members()
    );
    let dirs = group.cgroup_dirs();
    drop(child);
    let group = Arc::into_inner(group).expect("no other owner of the group");
    drop(group);
    for dir in dirs {
        assert!(!dir.exists(), "cgroup left behind: {}", dir.display());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fork_loop_is_stopped_at_its_process_limit() {
    let dir = tempfile::tempdir().unwrap();
    let group = Arc::new(LimitGroup::create(
        ResourceLimits {
            pids: Some(32),
            ..ResourceLimits::default()
        },
        Vec::new(),
    ));
    if !by_cgroup(&group, Limit::Pids) {
        return;
    }
    let child = shell("while :; do sleep 30 & done", dir.path(), Some(&group));
    let breach = tokio::time::timeout(DEADLINE, group.watch(Duration::from_millis(50)))
        .await
        .expect("the fork loop reaches its limit");
    assert_eq!(breach.limit, Limit::Pids);
    assert_eq!(breach.cap, 32);
    assert!(
        group.members().len() <= 32,
        "more members than the limit: {}",
        group.members().len()
    );
    if let Some(peak) = breach.peak {
        assert!(peak <= 32, "peak over the cap: {peak}");
    }
    sibling_goes_on(dir.path()).await;
    nothing_left(group, child).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_memory_hog_is_killed_at_its_memory_limit() {
    let dir = tempfile::tempdir().unwrap();
    let cap = 64 * 1024 * 1024;
    let group = Arc::new(LimitGroup::create(
        ResourceLimits {
            memory: Some(cap),
            ..ResourceLimits::default()
        },
        Vec::new(),
    ));
    if !by_cgroup(&group, Limit::Memory) {
        return;
    }
    // The shell keeps the whole substitution in its memory: four times the cap.
    let child = shell(
        "a=$(head -c 268435456 /dev/zero | tr '\\0' x); echo survived ${#a}",
        dir.path(),
        Some(&group),
    );
    let breach = tokio::time::timeout(DEADLINE, group.watch(Duration::from_millis(50)))
        .await
        .expect("the hog is killed");
    assert_eq!(breach.limit, Limit::Memory);
    let peak = breach.peak.expect("the kernel says the peak");
    assert!(
        peak >= cap / 2 && peak <= cap + 4 * 1024 * 1024,
        "peak {peak} against a cap of {cap}"
    );
    sibling_goes_on(dir.path()).await;
    nothing_left(group, child).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disk_filler_is_stopped_by_the_file_cap_and_by_the_measure() {
    let dir = tempfile::tempdir().unwrap();
    let measured = dir.path().join("run");
    std::fs::create_dir(&measured).unwrap();
    let cap: u64 = 8 * 1024 * 1024;
    let group = Arc::new(LimitGroup::create(
        ResourceLimits {
            disk: Some(cap),
            ..ResourceLimits::default()
        },
        vec![measured.clone()],
    ));
    // One big file: the writer itself gets SIGXFSZ at the cap.
    let mut one = shell(
        "exec dd if=/dev/zero of=run/big bs=1M count=64",
        dir.path(),
        Some(&group),
    );
    let exit = tokio::time::timeout(DEADLINE, one.wait())
        .await
        .expect("dd ends")
        .expect("wait");
    let breach = group.breach_by_exit(exit).expect("a disk breach");
    assert_eq!(breach.limit, Limit::Disk);
    let size = std::fs::metadata(measured.join("big")).unwrap().len();
    assert!(size <= cap, "the file grew to {size} past the cap {cap}");
    std::fs::remove_file(measured.join("big")).unwrap();
    // Many small files, each under the cap: the measure of the directory sees the sum.
    let many = shell(
        "i=0; while [ $i -lt 64 ]; do head -c 1048576 /dev/zero > run/f$i; i=$((i+1)); done; sleep 60",
        dir.path(),
        Some(&group),
    );
    let breach = tokio::time::timeout(DEADLINE, group.watch(Duration::from_millis(50)))
        .await
        .expect("the filler goes over");
    assert_eq!(breach.limit, Limit::Disk);
    assert!(breach.peak.unwrap() > cap);
    sibling_goes_on(dir.path()).await;
    drop(one);
    nothing_left(group, many).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cpu_spinner_is_held_to_its_share_and_never_breaches() {
    let dir = tempfile::tempdir().unwrap();
    let group = Arc::new(LimitGroup::create(
        ResourceLimits {
            cpu_millis: Some(200),
            ..ResourceLimits::default()
        },
        Vec::new(),
    ));
    if !by_cgroup(&group, Limit::Cpus) {
        return;
    }
    let child = shell("while :; do :; done", dir.path(), Some(&group));
    let start = Instant::now();
    loop {
        if group.usage().cpu_throttled.unwrap_or(0) > 0 {
            break;
        }
        assert!(
            start.elapsed() < DEADLINE,
            "the spinner was never throttled"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(group.breach(), None, "CPU is a rate, never a breach");
    sibling_goes_on(dir.path()).await;
    nothing_left(group, child).await;
}

#[test]
fn a_group_left_by_a_killed_corral_is_swept_by_the_next() {
    let probe = LimitGroup::create(
        ResourceLimits {
            pids: Some(64),
            ..ResourceLimits::default()
        },
        Vec::new(),
    );
    let Some(dir) = probe.cgroup_dirs().into_iter().next() else {
        eprintln!("SKIPPED: no cgroup for pids here");
        return;
    };
    // What a SIGKILLed Corral leaves: an empty cgroup named for a pid that is gone.
    let stale = dir.with_file_name("corral-999999999-0-000000000");
    std::fs::create_dir(&stale).unwrap();
    drop(probe);
    let next = LimitGroup::create(
        ResourceLimits {
            pids: Some(64),
            ..ResourceLimits::default()
        },
        Vec::new(),
    );
    assert!(!stale.exists(), "the stale cgroup is still there");
    drop(next);
}

#[test]
fn without_limits_nothing_is_made() {
    let group = LimitGroup::create(ResourceLimits::default(), Vec::new());
    assert!(group.enforcement().is_empty());
    assert!(group.cgroup_dirs().is_empty());
    assert_eq!(group.breach(), None);
}
