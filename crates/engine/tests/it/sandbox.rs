//! The bubblewrap backend enforces what the attestation claims; the native backend refuses to
//! run unenforced without consent.

use std::path::{Path, PathBuf};
use std::time::Duration;

use corral_engine::{BackendChoice, EngineConfig, HomePolicy, SandboxConfig};
use corral_ports::{Guarantee, Outcome, Permissions, ProviderError, SandboxBackend};

use crate::support::*;

fn sandboxed(home: HomePolicy, ambient_home: &Path) -> EngineConfig {
    let mut config = fast_config();
    config.sandbox = SandboxConfig {
        backend: BackendChoice::Bubblewrap,
        home,
        ..SandboxConfig::default()
    };
    config.ambient_env = Some(vec![
        ("PATH".into(), std::env::var("PATH").unwrap_or_default()),
        ("HOME".into(), ambient_home.display().to_string()),
    ]);
    config
}

/// The fake, with its pid file where the sandbox lets it write (the run directory).
fn probe(s: &Scratch, read: &Path, write: &Path) -> FakeAdapter {
    let mut adapter = s.adapter(
        "fs-probe",
        &[
            "--read",
            read.to_str().unwrap(),
            "--write",
            write.to_str().unwrap(),
        ],
    );
    adapter.pid_file = s.run_dir().join("pids");
    std::fs::create_dir_all(s.run_dir()).unwrap();
    adapter
}

fn texts(s: &Scratch) -> Vec<String> {
    agent_events(&s.log(), "text")
        .iter()
        .map(|v| v["text"].as_str().unwrap().to_string())
        .collect()
}

fn home_with_secret(s: &Scratch) -> PathBuf {
    let home = s.path("home");
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::write(home.join(".ssh/id_ed25519"), "PRIVATE KEY").unwrap();
    home
}

#[tokio::test]
async fn bubblewrap_confines_writes_to_the_working_and_run_directories() {
    let s = Scratch::new();
    let home = home_with_secret(&s);
    let escape = s.path("escape.txt");
    let out = run(
        sandboxed(HomePolicy::Host, &home),
        &probe(&s, &home.join(".ssh/id_ed25519"), &escape),
        s.session(),
    )
    .await
    .unwrap();
    assert_eq!(out.outcome, Outcome::Succeeded);
    let said = texts(&s);
    assert!(
        said[1].starts_with(&format!("write {}: denied", escape.display())),
        "{said:?}"
    );
    assert!(
        !escape.exists(),
        "the write outside the allowed paths landed"
    );
    let attestation = out.attestation.unwrap();
    assert_eq!(attestation.actual_backend, SandboxBackend::Bubblewrap);
    assert!(attestation.enforced.contains(&Guarantee::WritesConfined));
    assert!(attestation.not_enforced.is_empty());
    assert_eq!(
        records(&s.log(), "attestation").len(),
        1,
        "the log records the attestation"
    );

    // The working directory and the run directory stay writable.
    let s2 = Scratch::new();
    let inside = s2.path("work").join("inside.txt");
    let out = run(
        sandboxed(HomePolicy::Host, &home),
        &probe(&s2, &home.join("nothing"), &inside),
        s2.session(),
    )
    .await
    .unwrap();
    assert_eq!(out.outcome, Outcome::Succeeded);
    assert_eq!(
        std::fs::read_to_string(inside).unwrap(),
        "written by fs-probe\n"
    );
}

/// This process's children, live or exited and not reaped, as `pid (name) state`, read from
/// `/proc` (each test runs in a process of its own).
fn our_children() -> Vec<String> {
    let mut found = Vec::new();
    for task in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let children = std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
        for pid in children.split_whitespace() {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let name_end = stat.rfind(')').unwrap_or(0);
            let state = stat.get(name_end + 2..name_end + 3).unwrap_or("?");
            found.push(format!("{}) {state}", stat.get(..name_end).unwrap_or(pid)));
        }
    }
    found
}

/// Bubblewrap's second process outlives the first by a moment and is handed to the supervisor
/// (a child subreaper): it used to stay a `[bwrap] <defunct>` child of Corral for the whole run.
#[tokio::test]
async fn a_sandboxed_run_leaves_no_child_behind_not_even_a_zombie() {
    let s = Scratch::new();
    let home = s.path("home");
    std::fs::create_dir_all(&home).unwrap();
    let out = run(
        sandboxed(HomePolicy::Host, &home),
        &probe(
            &s,
            &home.join("nothing"),
            &s.path("work").join("inside.txt"),
        ),
        s.session(),
    )
    .await
    .unwrap();
    assert_eq!(out.outcome, Outcome::Succeeded);
    assert_eq!(
        our_children(),
        Vec::<String>::new(),
        "children of the supervisor left after the run (state Z: never reaped)"
    );
}

#[tokio::test]
async fn a_read_only_repository_stays_read_only_while_the_run_directory_is_writable() {
    let s = Scratch::new();
    let home = home_with_secret(&s);
    let mut session = s.session();
    session.permissions = Permissions {
        edit_files: false,
        ..Permissions::default()
    };
    let target = s.path("work").join("edited.txt");
    let out = run(
        sandboxed(HomePolicy::Host, &home),
        &probe(&s, &s.run_dir().join("pids"), &target),
        session,
    )
    .await
    .unwrap();
    assert!(texts(&s)[1].contains("denied"), "{:?}", texts(&s));
    assert!(!target.exists());
    assert!(
        out.attestation
            .unwrap()
            .enforced
            .contains(&Guarantee::RepoReadOnly)
    );
    assert!(
        s.run_dir().join("pids").exists(),
        "the run directory stayed writable"
    );
}

#[tokio::test]
async fn an_isolated_home_shows_no_secret_of_the_user() {
    let s = Scratch::new();
    let home = home_with_secret(&s);
    let secret = home.join(".ssh/id_ed25519");
    let out = run(
        sandboxed(HomePolicy::Isolated, &home),
        &probe(&s, &secret, &s.run_dir().join("x")),
        s.session(),
    )
    .await
    .unwrap();
    let said = texts(&s);
    assert!(
        said[0].starts_with(&format!("read {}: denied", secret.display())),
        "{said:?}"
    );
    assert!(
        out.attestation
            .unwrap()
            .enforced
            .contains(&Guarantee::HomeHidden)
    );
}

/// Every host process whose command line names this test's unique pid file.
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

/// The case that escapes natively (setsid and a scrubbed environment) dies with the run under
/// bubblewrap, because the run has its own pid namespace.
#[tokio::test]
async fn a_setsid_grandchild_with_a_scrubbed_environment_dies_with_the_run() {
    let s = Scratch::new();
    let home = home_with_secret(&s);
    let mut adapter = s.adapter("setsid-scrubbed", &[]);
    adapter.pid_file = s.run_dir().join("pids");
    std::fs::create_dir_all(s.run_dir()).unwrap();
    let err = run(sandboxed(HomePolicy::Host, &home), &adapter, s.session())
        .await
        .unwrap_err();
    assert!(matches!(err, ProviderError::IdleTimeout { .. }), "{err}");
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let marker = s.run_dir().join("pids");
    while !processes_naming(&marker).is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let left = processes_naming(&marker);
    corral_test_support::kill_survivors(&left);
    assert!(left.is_empty(), "survivors: {left:?}");
    assert_eq!(
        corral_test_support::read_pids(&marker).len(),
        2,
        "the fake and its setsid child both ran"
    );
}

#[tokio::test]
async fn without_an_enforcing_backend_the_run_refuses_and_names_each_guarantee() {
    let s = Scratch::new();
    let mut config = fast_config();
    config.sandbox = SandboxConfig {
        bwrap: PathBuf::from("/nonexistent/bwrap"),
        ..SandboxConfig::default()
    };
    let err = run(config, &s.adapter("ok", &[]), s.session())
        .await
        .unwrap_err();
    match &err {
        ProviderError::Unsandboxed {
            backend,
            unenforced,
            ..
        } => {
            assert_eq!(*backend, SandboxBackend::Native);
            let names: Vec<Guarantee> = unenforced.iter().map(|u| u.guarantee).collect();
            assert_eq!(
                names,
                [
                    Guarantee::WritesConfined,
                    Guarantee::TreeContained,
                    Guarantee::EgressConfined
                ]
            );
        }
        other => panic!("expected Unsandboxed, got {other}"),
    }
    let message = err.to_string();
    // One line naming each guarantee once and the reason once, then the fix on a `hint:` line.
    let lines: Vec<&str> = message.lines().collect();
    assert_eq!(lines.len(), 2, "{message}");
    for once in [
        "writes-confined",
        "tree-contained",
        "bubblewrap is not usable",
        "/nonexistent/bwrap",
    ] {
        assert_eq!(message.matches(once).count(), 1, "{once:?} once: {message}");
    }
    assert!(lines[1].starts_with("hint: "), "{message}");
    assert!(lines[1].contains("--allow-degraded-native"), "{message}");
    assert!(!s.pid_file().exists(), "nothing was started");
}

#[tokio::test]
async fn consenting_to_native_runs_and_records_what_was_not_enforced() {
    let s = Scratch::new();
    let mut config = fast_config();
    config.sandbox = SandboxConfig {
        bwrap: PathBuf::from("/nonexistent/bwrap"),
        allow_degraded_native: true,
        home: HomePolicy::Isolated,
        ..SandboxConfig::default()
    };
    let out = run(config, &s.adapter("ok", &[]), s.session())
        .await
        .unwrap();
    let attestation = out.attestation.unwrap();
    assert_eq!(attestation.requested_backend, "auto");
    assert_eq!(attestation.actual_backend, SandboxBackend::Native);
    assert_eq!(
        attestation.consent.as_deref(),
        Some("allow_degraded_native")
    );
    let unenforced: Vec<Guarantee> = attestation
        .not_enforced
        .iter()
        .map(|u| u.guarantee)
        .collect();
    assert_eq!(
        unenforced,
        [
            Guarantee::WritesConfined,
            Guarantee::TreeContained,
            Guarantee::EgressConfined,
            Guarantee::HomeHidden
        ]
    );
    assert!(
        attestation.not_enforced[0]
            .why
            .contains("/nonexistent/bwrap")
    );
}

fn git(dir: &Path, args: &[&str]) {
    corral_test_support::git_ok(
        dir,
        &["-c", "user.name=t", "-c", "user.email=t@example.invalid"],
        args,
    );
}

/// Natively nothing stops a write outside the working directory; the git-cleanliness check
/// names it afterwards, in the attestation and the log.
#[tokio::test]
async fn a_stray_write_inside_the_repository_is_detected_and_named() {
    let s = Scratch::new();
    let session = s.session();
    std::fs::write(s.path("README"), "hello\n").unwrap();
    git(s.dir.path(), &["init", "-q"]);
    git(s.dir.path(), &["add", "README"]);
    git(s.dir.path(), &["commit", "-q", "-m", "init"]);
    let stray = s.path("stray.txt");
    let mut config = fast_config();
    config.sandbox.allow_degraded_native = true;
    let out = run(config, &probe(&s, &s.path("README"), &stray), session)
        .await
        .unwrap();
    let attestation = out.attestation.unwrap();
    let root = std::fs::canonicalize(s.dir.path()).unwrap();
    assert_eq!(
        attestation.stray_writes,
        [format!("added {}", root.join("stray.txt").display())]
    );
    let log = s.log();
    let record = records(&log, "stray_writes");
    assert_eq!(record.len(), 1);
    assert_eq!(
        log.last().unwrap()["kind"],
        "run_finished",
        "the log still ends with run_finished"
    );
}

#[tokio::test]
async fn a_dirty_tree_is_refused_when_asked_and_the_run_directory_does_not_count() {
    let s = Scratch::new();
    let session = s.session();
    git(s.dir.path(), &["init", "-q"]);
    std::fs::create_dir_all(s.run_dir()).unwrap();
    std::fs::write(s.run_dir().join("prompt.md"), "x").unwrap();
    let mut config = fast_config();
    config.sandbox.refuse_dirty_tree = true;
    // Only the run directory is new: not dirty.
    let adapter = s.adapter("ok", &[]);
    assert!(run(config.clone(), &adapter, s.session()).await.is_ok());
    std::fs::write(s.path("work").join("uncommitted.txt"), "x").unwrap();
    let err = run(config, &adapter, session).await.unwrap_err();
    assert!(matches!(err, ProviderError::InvalidSession { .. }), "{err}");
    let message = err.to_string();
    let lines: Vec<&str> = message.lines().collect();
    assert_eq!(lines.len(), 2, "{message}");
    assert!(lines[0].contains("uncommitted.txt"), "{message}");
    assert!(
        lines[1].starts_with("hint: ") && lines[1].contains("refuse_dirty_tree"),
        "{message}"
    );
}
