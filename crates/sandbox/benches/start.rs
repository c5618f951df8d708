//! The cost of a sandbox at start, measured in one run for each backend: a sprint's check
//! (`/bin/true`) confined, spawned, checked (bubblewrap's probe from inside) and reaped, from the
//! wrap to the reaped child, against the native backend. The container backend (podman on the
//! host's root filesystem) is measured where podman can run, and said skipped where not.
//!
//! `cargo bench -p corral-sandbox --bench start [-- --quick]` prints the table and writes it to
//! `target/bench-sandbox-start-report.md` (run by `cargo xtask bench`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::ffi::OsString;
use std::path::Path;
use std::time::{Duration, Instant};

use corral_process::{ProviderSpawn, TokioSpawner};
use corral_sandbox::{
    BackendChoice, CommandLine, CommandRequest, Confinement, NetworkPolicy, SandboxConfig,
};

/// One start: wrap, spawn, check, wait, end; its wall time.
async fn one(backend: BackendChoice, cwd: &Path) -> Duration {
    let config = SandboxConfig {
        backend,
        allow_degraded_native: backend == BackendChoice::Native,
        network: NetworkPolicy::None,
        ..SandboxConfig::default()
    };
    let env = vec![
        (
            "PATH".to_string(),
            std::env::var("PATH").unwrap_or_default(),
        ),
        ("HOME".to_string(), cwd.display().to_string()),
    ];
    let start = Instant::now();
    let confinement = Confinement::for_command(CommandRequest {
        config: &config,
        cwd,
        read_only: &[],
    })
    .expect("a sandbox");
    let args: [OsString; 0] = [];
    let wrapped = confinement
        .wrap(CommandLine {
            program: Path::new("/bin/true"),
            args: &args,
            env: &env,
        })
        .expect("wrapped");
    let mut guard = wrapped.guard;
    let mut child = TokioSpawner.spawn(&wrapped.request).expect("spawned");
    guard.started(child.as_mut()).await.expect("started");
    let exit = child.wait().await.expect("wait");
    assert!(exit.success(), "{backend:?}: {exit}");
    let _ = guard.end();
    confinement.finish().await;
    start.elapsed()
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort_unstable();
    times[times.len() / 2]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let reps = if quick { 3 } else { 15 };
    let dir = tempfile::tempdir().unwrap();
    let mut rows = Vec::new();
    let mut backends = vec![BackendChoice::Native];
    match corral_sandbox::bubblewrap_usable(Path::new("bwrap")) {
        Ok(()) => backends.push(BackendChoice::Bubblewrap),
        Err(why) => rows.push(format!("| bubblewrap | skipped: {why} | | |")),
    }
    match corral_sandbox::container_usable() {
        Ok(_) => backends.push(BackendChoice::Container),
        Err(why) => rows.push(format!("| container | skipped: {why} | | |")),
    }
    let mut native = None;
    for backend in backends {
        // One start first, not counted: caches warm, podman's storage set up.
        one(backend, dir.path()).await;
        let mut times = Vec::new();
        for _ in 0..reps {
            times.push(one(backend, dir.path()).await);
        }
        let min = *times.iter().min().unwrap();
        let mid = median(times);
        let base = *native.get_or_insert(mid);
        rows.push(format!(
            "| {} | {:.1} ms | {:.1} ms | +{:.1} ms |",
            backend.as_str(),
            mid.as_secs_f64() * 1e3,
            min.as_secs_f64() * 1e3,
            (mid.saturating_sub(base)).as_secs_f64() * 1e3,
        ));
    }
    let report = format!(
        "# Sandbox start cost\n\nA check (`/bin/true`) confined, started, checked and reaped; {reps} runs each, one warm-up first.\n\n| backend | median | min | over native |\n|---|---|---|---|\n{}\n",
        rows.join("\n")
    );
    println!("{report}");
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"),
        Into::into,
    );
    let _ = std::fs::create_dir_all(&target);
    let _ = std::fs::write(target.join("bench-sandbox-start-report.md"), report);
}
