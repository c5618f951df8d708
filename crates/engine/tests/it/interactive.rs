//! The interactive handoff, under a real pseudo-terminal: the CLI sees a terminal it owns (its
//! group is the foreground group), receives the prompt as a pointer, reads what the person types,
//! and the supervisor gets the terminal back afterwards.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use corral_engine::Engine;
use corral_ports::{NoopObserver, ProviderError};
use corral_test_support::{read_pids, wait_all_dead, wait_for_lines};

use crate::support::*;

const ROLE: &str = "CORRAL_TEST_PTY_SUPERVISOR";

/// Runs only inside the re-executed supervisor on the pseudo-terminal; a no-op otherwise.
#[test]
fn pty_supervisor_role() {
    let Some(dir) = std::env::var_os(ROLE) else {
        return;
    };
    // Become a session leader whose controlling terminal is the pty on stdin.
    let tty = std::fs::read_link("/proc/self/fd/0").unwrap();
    nix::unistd::setsid().unwrap();
    let _ctty = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&tty)
        .unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let s = Scratch::new();
    let mut adapter = s.adapter("tty-probe", &[]);
    adapter.pid_file = PathBuf::from(&dir).join("pids");
    let mut session = s.session();
    session.prompt = "the secret task text".into();
    let outcome = runtime
        .block_on(Engine::new(fast_config()).run_interactive(
            &adapter,
            session,
            Arc::new(NoopObserver),
        ))
        .unwrap();
    let stdin = std::io::stdin();
    let restored = nix::unistd::tcgetpgrp(&stdin).ok() == Some(nix::unistd::getpgrp());
    println!(
        "role-done exit={:?} cancelled={} restored={restored}",
        outcome.exit_code, outcome.cancelled
    );
}

fn read_until(rx: &mpsc::Receiver<String>, seen: &mut String, needle: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !seen.contains(needle) {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(chunk) => seen.push_str(&chunk),
            Err(_) => panic!("never saw {needle:?}; terminal showed:\n{seen}"),
        }
    }
}

#[test]
fn the_cli_owns_the_terminal_reads_a_line_and_the_terminal_comes_back() {
    let s = Scratch::new();
    let pty = nix::pty::openpty(None, None).unwrap();
    let exe = std::env::current_exe().unwrap();
    let slave = || Stdio::from(pty.slave.try_clone().unwrap());
    // The supervisor under test is this test binary itself, re-executed: test code, not product.
    #[allow(clippy::disallowed_methods)]
    let mut supervisor = std::process::Command::new(exe)
        .args([
            "--exact",
            "interactive::pty_supervisor_role",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(ROLE, s.dir.path())
        .env("TERM", "xterm")
        .stdin(slave())
        .stdout(slave())
        .stderr(slave())
        .spawn()
        .unwrap();
    drop(pty.slave);
    let mut master = std::fs::File::from(pty.master);
    let mut reader = master.try_clone().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = reader.read(&mut buf) {
            if n == 0
                || tx
                    .send(String::from_utf8_lossy(&buf[..n]).into_owned())
                    .is_err()
            {
                break;
            }
        }
    });
    let mut seen = String::new();
    read_until(&rx, &mut seen, "tty-probe stdin_tty=");
    read_until(&rx, &mut seen, "\n");
    assert!(
        seen.contains("stdin_tty=true stdout_tty=true foreground=true"),
        "{seen}"
    );
    assert!(
        seen.contains("interactive-prompt.md"),
        "the CLI got the pointer: {seen}"
    );
    assert!(
        !seen.contains("the secret task text"),
        "the prompt itself never reaches argv or stdin"
    );
    master.write_all(b"typed by a person\n").unwrap();
    read_until(&rx, &mut seen, "tty-probe got=typed by a person");
    read_until(&rx, &mut seen, "role-done");
    read_until(&rx, &mut seen, "restored=");
    read_until(&rx, &mut seen, "\n");
    assert!(
        seen.contains("role-done exit=Some(0) cancelled=false restored=true"),
        "{seen}"
    );
    let status = supervisor.wait().unwrap();
    assert!(status.success(), "{seen}");
}

#[tokio::test]
async fn cancelling_an_interactive_run_ends_its_tree() {
    let s = Scratch::new();
    let adapter = s.adapter("grandchildren", &["--count", "2"]);
    let session = s.session();
    let cancel = session.cancel.clone();
    let run = tokio::spawn(async move {
        Engine::new(fast_config())
            .run_interactive(&adapter, session, Arc::new(NoopObserver))
            .await
    });
    let pid_file = s.pid_file();
    let ready =
        tokio::task::spawn_blocking(move || wait_for_lines(&pid_file, 4, Duration::from_secs(20)))
            .await
            .unwrap();
    assert!(ready);
    cancel.cancel();
    let outcome = run.await.unwrap().unwrap();
    assert!(outcome.cancelled);
    let pids = read_pids(&s.pid_file());
    assert!(
        wait_all_dead(&pids, Duration::from_secs(5)).is_empty(),
        "{pids:?}"
    );
}

#[tokio::test]
async fn an_interactive_run_is_planned_attested_and_logged_like_a_headless_one() {
    let s = Scratch::new();
    let adapter = s.adapter("ok", &["--session-id", "chat-1"]);
    let outcome = Engine::new(fast_config())
        .run_interactive(&adapter, s.session(), Arc::new(NoopObserver))
        .await
        .unwrap();
    assert_eq!(outcome.exit_code, Some(0));
    let log = s.assert_log_complete("succeeded");
    let kinds: Vec<&str> = log.iter().filter_map(|v| v["kind"].as_str()).collect();
    for kind in [
        "run_started",
        "attestation",
        "spawn",
        "exit",
        "run_finished",
    ] {
        assert!(kinds.contains(&kind), "no {kind} in {kinds:?}");
    }
    let attestation = &records(&log, "attestation")[0];
    assert_eq!(attestation["actualBackend"], "native", "{attestation}");
    assert_eq!(records(&log, "spawn")[0]["stdin"], "terminal");
}

#[tokio::test]
async fn an_interactive_run_without_an_enforcing_backend_or_consent_is_refused() {
    let s = Scratch::new();
    let mut config = fast_config();
    config.sandbox.allow_degraded_native = false;
    let err = Engine::new(config)
        .run_interactive(&s.adapter("ok", &[]), s.session(), Arc::new(NoopObserver))
        .await
        .unwrap_err();
    assert!(matches!(err, ProviderError::Unsandboxed { .. }), "{err}");
    assert!(
        !s.pid_file().exists(),
        "nothing was started without a sandbox"
    );
    s.assert_log_complete("not-started");
}
