//! `[limits]` through the sandbox's one face: a memory hog, a fork loop, a disk filler and a
//! CPU spinner run as a sprint's check would (a command's confinement), under the native
//! backend and under bubblewrap. Each is ended by its own limit and the guard names it (the
//! CPU spinner is only held to its share), a sibling command goes on, the attestation says how
//! each limit was enforced, and no process or cgroup is left behind.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use corral_process::{Limit, ProviderSpawn, ResourceLimits, TokioSpawner};
use corral_sandbox::{BackendChoice, CommandLine, CommandRequest, Confinement, SandboxConfig};

/// Generous: the machine is shared with other builds and tests.
const DEADLINE: Duration = Duration::from_secs(90);

const LIMITS: ResourceLimits = ResourceLimits {
    memory: Some(64 << 20),
    pids: Some(48),
    cpu_millis: Some(200),
    disk: Some(8 << 20),
};

fn config(backend: BackendChoice) -> SandboxConfig {
    SandboxConfig {
        backend,
        allow_degraded_native: backend == BackendChoice::Native,
        limits: LIMITS,
        ..SandboxConfig::default()
    }
}

fn env(home: &Path) -> Vec<(String, String)> {
    vec![
        ("PATH".into(), "/usr/bin:/bin".into()),
        ("HOME".into(), home.display().to_string()),
    ]
}

/// What a command came to.
struct Ran {
    breach: Option<corral_process::Breach>,
    throttled: Option<u64>,
    attestation: corral_ports::Attestation,
}

/// Runs `script` as a confined command; with `spin`, the command never ends by itself: it is
/// watched until throttled, then killed.
async fn run(backend: BackendChoice, cwd: &Path, script: &str, spin: bool) -> Ran {
    let config = config(backend);
    let confinement = Confinement::for_command(CommandRequest {
        config: &config,
        cwd,
        read_only: &[],
    })
    .expect("a sandbox for the command");
    let args = [OsString::from("-c"), OsString::from(script)];
    let env = env(cwd);
    let wrapped = confinement
        .wrap(CommandLine {
            program: Path::new("/bin/sh"),
            args: &args,
            env: &env,
        })
        .expect("wrapped");
    let mut guard = wrapped.guard;
    let mut child = TokioSpawner.spawn(&wrapped.request).expect("spawned");
    guard
        .started(child.as_mut())
        .await
        .expect("the sandbox holds");
    let mut throttled = None;
    if spin {
        let start = Instant::now();
        loop {
            throttled = guard.limit_usage().and_then(|u| u.cpu_throttled);
            if throttled.unwrap_or(0) > 0 {
                break;
            }
            assert!(
                start.elapsed() < DEADLINE,
                "the spinner was never throttled"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(guard.limit_breach(None), None, "CPU never breaches");
        corral_process::signal_group(child.pid(), nix::sys::signal::Signal::SIGKILL).unwrap();
    }
    let exit = tokio::time::timeout(DEADLINE, child.wait())
        .await
        .expect("the command is ended")
        .expect("wait");
    let breach = guard.limit_breach(Some(exit));
    let _ = guard.end();
    drop(child);
    let attestation = confinement.attestation().expect("planned");
    confinement.finish().await;
    Ran {
        breach,
        throttled,
        attestation,
    }
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
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if !kind.is_dir() {
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

async fn every_hog_is_stopped_by_its_limit(backend: BackendChoice) {
    let dir = tempfile::tempdir().unwrap();
    let cwd = dir.path();
    let hogs = [
        (Limit::Pids, "while :; do sleep 30 & done"),
        (
            Limit::Memory,
            "a=$(head -c 268435456 /dev/zero | tr '\\0' x); echo survived ${#a}",
        ),
        // A native command has no private `TMPDIR`: its working directory, never the host's `/`.
        (
            Limit::Disk,
            "exec dd if=/dev/zero of=\"${TMPDIR:-$PWD}/big\" bs=1M count=64",
        ),
    ];
    // Asked before a hog runs: without a cgroup a fork loop would run unbounded (a plain user
    // on a cgroup v1 host has none).
    let readiness = corral_sandbox::limits_readiness(LIMITS);
    for (limit, script) in hogs {
        let by_cgroup = readiness.iter().any(|e| {
            e.limit == limit.as_str() && e.how.as_deref().is_some_and(|h| h.starts_with("cgroup"))
        });
        if matches!(limit, Limit::Pids | Limit::Memory) && !by_cgroup {
            eprintln!(
                "SKIPPED: {} under {}: no cgroup here ({readiness:?})",
                limit.as_str(),
                backend.as_str(),
            );
            continue;
        }
        let ran = run(backend, cwd, script, false).await;
        let breach = ran
            .breach
            .unwrap_or_else(|| panic!("{} under {}: no breach", limit.as_str(), backend.as_str()));
        assert_eq!(breach.limit, limit, "{breach:?}");
        // A sibling goes on.
        let sibling = run(backend, cwd, "echo sibling > sibling.txt", false).await;
        assert_eq!(sibling.breach, None);
        assert_eq!(
            std::fs::read_to_string(cwd.join("sibling.txt")).unwrap(),
            "sibling\n"
        );
    }
    let cpu_by_cgroup = readiness
        .iter()
        .any(|e| e.limit == "cpus" && e.how.as_deref().is_some_and(|h| h.starts_with("cgroup")));
    if !cpu_by_cgroup {
        eprintln!(
            "SKIPPED: cpus under {}: no cgroup here ({readiness:?})",
            backend.as_str()
        );
        return;
    }
    let spun = run(backend, cwd, "while :; do :; done", true).await;
    assert!(spun.throttled.unwrap_or(0) > 0);
    assert_eq!(spun.breach, None);
    for limit in ["memory", "pids", "cpus", "disk"] {
        assert!(
            spun.attestation.limits.iter().any(|e| e.limit == limit),
            "{limit} not in the attestation: {:?}",
            spun.attestation.limits
        );
    }
}

/// One test: the check for leftover cgroups must not see another test's live ones.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hogs_are_stopped_by_their_limits_under_each_backend_and_nothing_is_left() {
    every_hog_is_stopped_by_its_limit(BackendChoice::Native).await;
    match corral_sandbox::bubblewrap_usable(Path::new("bwrap")) {
        Ok(()) => every_hog_is_stopped_by_its_limit(BackendChoice::Bubblewrap).await,
        Err(why) => eprintln!("SKIPPED: bubblewrap is not usable here: {why}"),
    }
    let left = our_cgroups();
    assert!(left.is_empty(), "cgroups left behind: {left:?}");
}
