//! `[limits]` end to end through the engine: a CLI whose shell tool is a memory hog, a fork loop
//! or a disk filler (the fake agent's `run-tool`, as a CLI runs a model's Bash call), and a
//! sprint's check that is one (the engine as the ports' command runner), under the native
//! backend, bubblewrap and the container backend where each can run here. Each ends with the
//! typed `limit-exceeded` outcome naming its limit (the run keeps its session, which resumes;
//! the command's end is `CommandEnd::LimitExceeded`), a CPU spinner is only held to its share, a
//! sibling run beside the hog goes on, and nothing is left behind: no process of the run, no
//! cgroup of this test process, no container.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use corral_engine::{BackendChoice, Engine, EngineConfig, NetworkPolicy, ResourceLimits};
use corral_ports::{
    CancellationToken, CommandEnd, CommandRunner, CommandSpec, ErrorClass, Outcome, ProviderError,
    ResourceLimit,
};

use crate::support::*;

const LIMITS: ResourceLimits = ResourceLimits {
    memory: Some(64 << 20),
    pids: Some(48),
    cpu_millis: Some(200),
    disk: Some(8 << 20),
};

/// The hogs: the limit that must stop each, the CLI's tool, and the check. `{dir}` is a
/// directory the CLI may write that the disk limit measures (its run directory), or the
/// check's working directory. A check's file goes to its private `TMPDIR` (measured) where it
/// has one (bubblewrap, the container), else into its working directory, where the file over
/// the limit ends it by `SIGXFSZ` (the check is the writer itself, `exec`; inside a container
/// `SIGXFSZ` is ignored and the write fails with `EFBIG` instead).
const HOGS: &[(ResourceLimit, &str, &str)] = &[
    // A CLI goes on after its tool was killed (it tells the model, which answers): the sleep
    // is that time. A container's cgroup, where its watch reads the kill, is there only while
    // it runs.
    (
        ResourceLimit::Memory,
        "(a=$(head -c 268435456 /dev/zero | tr '\\0' x); echo survived ${#a}); sleep 120",
        MEMORY_HOG,
    ),
    // The shell that meets a refused fork gives up; the sleep keeps the tree alive for the
    // watch (a container's cgroup is there only while it runs).
    (ResourceLimit::Pids, FORK_LOOP, FORK_LOOP),
    (
        ResourceLimit::Disk,
        "dd if=/dev/zero of={dir}/big bs=1M count=64 2>/dev/null; sleep 120",
        "exec dd if=/dev/zero of=${TMPDIR:-{dir}}/big bs=1M count=64",
    ),
];

const MEMORY_HOG: &str = "a=$(head -c 268435456 /dev/zero | tr '\\0' x); echo survived ${#a}";
const FORK_LOOP: &str = "(while :; do sleep 30 & done) 2>/dev/null; sleep 120";

fn config(backend: BackendChoice) -> EngineConfig {
    let mut config = fast_config();
    // A hog is silent while it grows: only its limit may end it, not the idle watchdog, on a
    // machine as loaded as a CI runner.
    config.idle_timeout = Duration::from_secs(120);
    config.sandbox.backend = backend;
    config.sandbox.allow_degraded_native = backend == BackendChoice::Native;
    config.sandbox.network = NetworkPolicy::None;
    config.sandbox.limits = LIMITS;
    config.ambient_env = Some(vec![
        ("PATH".into(), std::env::var("PATH").unwrap_or_default()),
        ("HOME".into(), std::env::temp_dir().display().to_string()),
    ]);
    config
}

/// The backends that can run here; the others are named, loudly.
fn backends() -> Vec<BackendChoice> {
    let mut found = vec![BackendChoice::Native];
    match corral_engine::bubblewrap_usable(Path::new("bwrap")) {
        Ok(()) => found.push(BackendChoice::Bubblewrap),
        Err(why) => eprintln!("SKIPPED: bubblewrap is not usable here: {why}"),
    }
    match corral_engine::container_usable() {
        Ok(_) => found.push(BackendChoice::Container),
        Err(why) => eprintln!("SKIPPED: the container backend cannot run here: {why}"),
    }
    found
}

/// Whether `limit` is enforced by a cgroup for `backend` here (memory and processes have no
/// per-spawn enforcement without one: the test says so instead of failing). Rootless podman
/// on a cgroup v1 host has none either.
fn enforced_here(limit: ResourceLimit, backend: BackendChoice) -> bool {
    if limit == ResourceLimit::Disk {
        return true;
    }
    let readiness = match backend {
        BackendChoice::Container => corral_engine::container_limits(LIMITS),
        _ => corral_engine::limits_readiness(LIMITS),
    };
    let by_cgroup = readiness.iter().any(|e| {
        e.limit == limit.as_str() && e.how.as_deref().is_some_and(|h| h.contains("cgroup"))
    });
    if !by_cgroup {
        eprintln!(
            "SKIPPED: {} under {}: no cgroup here ({readiness:?})",
            limit.as_str(),
            backend.as_str()
        );
    }
    by_cgroup
}

/// Every host process whose command line names `marker` (pid namespaces hide nothing from
/// the host's `/proc`).
fn processes_naming(marker: &Path) -> Vec<u32> {
    let needle = marker.to_string_lossy().into_owned();
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(&needle))
        })
        .filter(|&pid| corral_test_support::is_alive(pid))
        .collect()
}

/// Every cgroup this test process made, anywhere under the cgroup mounts.
fn our_cgroups() -> Vec<PathBuf> {
    let prefix = format!("corral-{}-", std::process::id());
    let mut found = Vec::new();
    let mut stack = vec![(PathBuf::from("/sys/fs/cgroup"), 0)];
    while let Some((dir, depth)) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            if !entry.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            if entry.file_name().to_string_lossy().starts_with(&prefix) {
                found.push(entry.path());
            } else if depth < 5 {
                stack.push((entry.path(), depth + 1));
            }
        }
    }
    found
}

/// A CLI whose tool is `script`, run in `s`, its pid file in the run directory (which every
/// backend lets it write). The run directory's path ends the script as a comment, so that every
/// shell of the tree names it ([`processes_naming`]).
fn tool(s: &Scratch, script: &str) -> FakeAdapter {
    let dir = s.run_dir();
    let dir = dir.to_str().unwrap();
    let script = format!("{} # {dir}", script.replace("{dir}", dir));
    let mut adapter = s.adapter("run-tool", &["--tool", &script]);
    adapter.pid_file = s.run_dir().join("pids");
    std::fs::create_dir_all(s.run_dir()).unwrap();
    adapter
}

async fn a_cli_whose_tool_hogs_is_ended_with_its_own_outcome(backend: BackendChoice) {
    for &(limit, script, _) in HOGS {
        if !enforced_here(limit, backend) {
            continue;
        }
        let hog = Scratch::new();
        let sibling = Scratch::new();
        let (hog_cli, sibling_cli) = (tool(&hog, script), tool(&sibling, "echo sibling"));
        let (hogged, beside) = tokio::join!(
            run(config(backend), &hog_cli, hog.session()),
            run(config(backend), &sibling_cli, sibling.session()),
        );
        let what = format!("{} under {}", limit.as_str(), backend.as_str());
        let err = hogged.expect_err(&what);
        let ProviderError::LimitExceeded {
            exceeded, evidence, ..
        } = &err
        else {
            let stderr = err.evidence().map(|e| e.stderr_tail.clone());
            panic!("{what}: {err}; stderr: {stderr:?}");
        };
        assert_eq!(exceeded.limit, limit, "{what}: {err}");
        assert_eq!(err.outcome(), Outcome::LimitExceeded);
        // Not retried as transient: one start of the CLI.
        assert_eq!(err.class(), ErrorClass::Permanent);
        assert_eq!(evidence.attempts, 1, "{what}");
        let session = evidence
            .session_id
            .clone()
            .unwrap_or_else(|| panic!("{what}: the session is kept"));
        let log = hog.log();
        let classified = records(&log, "classified");
        assert!(
            classified.iter().any(|r| r["class"] == "limit-exceeded"),
            "{what}: {classified:?}"
        );
        // The sibling went on.
        let out = beside.unwrap_or_else(|e| panic!("{what}: the sibling failed: {e}"));
        assert_eq!(out.outcome, Outcome::Succeeded);
        // Nothing of the hog's tree is left (its other processes were in its cgroups, which
        // are checked at the end: a cgroup with a member cannot be removed).
        let left = processes_naming(&hog.run_dir());
        assert!(
            corral_test_support::wait_all_dead(&left, Duration::from_secs(10)).is_empty(),
            "{what}: processes left: {left:?}"
        );
        // The kept session resumes (a harmless tool this time), in a run directory of its own
        // as `corral resume` makes one.
        let next = Scratch::new();
        let mut again = next.session();
        again.resume = Some(session.clone());
        let resumed = run(config(backend), &tool(&next, "echo resumed"), again)
            .await
            .unwrap_or_else(|e| panic!("{what}: the resume failed: {e}"));
        assert_eq!(resumed.session_id, Some(session), "{what}");
    }
    // CPU is a rate: a spinner is held to its share, and the run ends as its tool does.
    let spin = Scratch::new();
    let out = run(
        config(backend),
        &tool(&spin, "timeout 3 sh -c 'while :; do :; done'; echo spun"),
        spin.session(),
    )
    .await
    .unwrap_or_else(|e| panic!("the spinner under {}: {e}", backend.as_str()));
    assert_eq!(out.outcome, Outcome::Succeeded);
    let attestation = out.attestation.expect("attested");
    for limit in ["memory", "pids", "cpus", "disk"] {
        assert!(
            attestation.limits.iter().any(|e| e.limit == limit),
            "{limit} not in the attestation: {:?}",
            attestation.limits
        );
    }
}

async fn a_check_that_hogs_ends_with_its_limit(backend: BackendChoice) {
    let runner: Arc<dyn CommandRunner> = Arc::new(Engine::new(config(backend)));
    let dir = tempfile::tempdir().unwrap();
    for &(limit, _, script) in HOGS {
        if !enforced_here(limit, backend) {
            continue;
        }
        let script = script.replace("{dir}", dir.path().to_str().unwrap());
        let spec = CommandSpec::shell(&script, dir.path(), Duration::from_secs(180));
        let never = CancellationToken::new();
        let (hogged, beside) = tokio::join!(
            runner.run(spec, &never),
            runner.run(
                CommandSpec::shell("echo sibling", dir.path(), Duration::from_secs(180)),
                &never
            ),
        );
        let what = format!("a check's {} under {}", limit.as_str(), backend.as_str());
        let out = hogged.unwrap_or_else(|e| panic!("{what}: {e}"));
        match out.end {
            CommandEnd::LimitExceeded(exceeded) => assert_eq!(exceeded.limit, limit, "{what}"),
            other => panic!("{what}: ended {other:?}: {}", out.stderr.text),
        }
        assert!(!out.success());
        let beside = beside.unwrap_or_else(|e| panic!("{what}: the sibling: {e}"));
        assert!(beside.success(), "{what}: the sibling: {beside:?}");
        assert_eq!(beside.stdout.text, "sibling\n");
    }
}

/// One test for every backend: the check for leftover cgroups must not see another test's
/// live ones, and the machine is not asked to run two hogs at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hogs_end_with_the_limit_exceeded_outcome_under_every_backend_and_leave_nothing() {
    for backend in backends() {
        a_cli_whose_tool_hogs_is_ended_with_its_own_outcome(backend).await;
        a_check_that_hogs_ends_with_its_limit(backend).await;
    }
    let left = our_cgroups();
    assert!(left.is_empty(), "cgroups left behind: {left:?}");
}
