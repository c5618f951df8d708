//! Egress confined to the allow-list: inside bubblewrap (and inside a podman container) the
//! fake agent reaches its declared endpoint through Corral's proxy and nothing else (no other host loopback service, no host
//! unix or abstract socket), every refusal is named in the run's log, and a sandbox whose way out
//! cannot be opened never runs its CLI.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use corral_engine::{AllowRule, BackendChoice, EngineConfig, NetworkPolicy, SandboxConfig};
use corral_ports::{Guarantee, Outcome, ProviderError};

use crate::support::*;

/// A TCP service on the host's loopback that answers every HTTP request with `200 <reply>` and
/// counts the connections it accepted.
pub(crate) struct HostService {
    port: u16,
    connections: Arc<AtomicUsize>,
}

impl HostService {
    pub(crate) fn start(reply: &'static str) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let connections = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&connections);
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                counted.fetch_add(1, Ordering::SeqCst);
                std::thread::spawn(move || {
                    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
                    let mut reader = BufReader::new(&stream);
                    let mut line = String::new();
                    while reader.read_line(&mut line).is_ok_and(|n| n > 0) {
                        if line == "\r\n" {
                            let _ = (&stream).write_all(
                                format!(
                                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{reply}",
                                    reply.len()
                                )
                                .as_bytes(),
                            );
                            return;
                        }
                        line.clear();
                    }
                });
            }
        });
        HostService { port, connections }
    }

    pub(crate) fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    pub(crate) fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }
}

/// bubblewrap with the allow-list; the fake's "model API" at `model`.
fn confined(s: &Scratch, model: &HostService) -> EngineConfig {
    confined_in(BackendChoice::Bubblewrap, s, model)
}

/// `backend` with the allow-list; the fake's "model API" at `model`.
fn confined_in(backend: BackendChoice, s: &Scratch, model: &HostService) -> EngineConfig {
    let mut config = fast_config();
    // A container starts in seconds on a loaded machine.
    config.idle_timeout = Duration::from_secs(60);
    // Kept as written, for the failure message: what the sandbox's starter said.
    config.raw_streams = corral_engine::RawStreamRetention::Keep;
    config.sandbox = SandboxConfig {
        backend,
        network: NetworkPolicy::Allowlist,
        ..SandboxConfig::default()
    };
    config.ambient_env = Some(vec![
        ("PATH".into(), std::env::var("PATH").unwrap_or_default()),
        ("HOME".into(), s.path("home").display().to_string()),
        (
            FAKE_BASE_URL_VAR.into(),
            format!("http://{}/v1", model.address()),
        ),
    ]);
    config
}

/// The fake in `net-probe` mode, its pid file in the run directory (writable in the sandbox).
fn net_probe(s: &Scratch, args: &[&str]) -> FakeAdapter {
    let mut adapter = s.adapter("net-probe", args);
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

fn said<'a>(texts: &'a [String], prefix: &str) -> &'a str {
    texts
        .iter()
        .find(|t| t.starts_with(prefix))
        .unwrap_or_else(|| panic!("no line starting with {prefix:?} in {texts:#?}"))
}

#[tokio::test]
async fn the_declared_endpoint_is_reached_through_the_proxy_and_nothing_else_on_the_host() {
    only_the_declared_endpoint_is_reached(BackendChoice::Bubblewrap).await;
}

/// The same probes, and the same answers, under the container backend (podman): its own
/// network namespace with Corral's proxy in it.
#[tokio::test]
async fn in_a_container_too_only_the_declared_endpoint_is_reached_through_the_proxy() {
    if let Err(why) = corral_engine::container_usable() {
        eprintln!("SKIPPED: the container backend cannot run here: {why}");
        return;
    }
    only_the_declared_endpoint_is_reached(BackendChoice::Container).await;
}

async fn only_the_declared_endpoint_is_reached(backend: BackendChoice) {
    let s = Scratch::new();
    let model = HostService::start("model-ok");
    let secret = HostService::start("secret");
    let (m, x) = (model.address(), secret.address());
    let get_model = format!("http://{m}/v1/ping");
    let get_secret = format!("http://{x}/admin");
    let out = run(
        confined_in(backend, &s, &model),
        &net_probe(
            &s,
            &[
                "--proxy-get",
                &get_model,
                "--proxy-connect",
                &format!("{m},{x}"),
                "--proxy-get",
                &get_secret,
                "--connect",
                &format!("{x},{m}"),
            ],
        ),
        s.session(),
    )
    .await
    .unwrap_or_else(|e| {
        let raw = std::fs::read_dir(s.run_dir().join("raw"))
            .into_iter()
            .flatten()
            .flatten()
            .map(|f| std::fs::read_to_string(f.path()).unwrap_or_default())
            .collect::<Vec<_>>();
        panic!("{e}\nlog: {:#?}\nraw: {raw:#?}", s.log())
    });
    assert_eq!(out.outcome, Outcome::Succeeded);
    let texts = texts(&s);
    assert!(
        said(&texts, &format!("proxy-get {get_model}:")).contains("ok (HTTP/1.1 200 OK) model-ok"),
        "{texts:#?}"
    );
    assert!(
        said(&texts, &format!("proxy-connect {m}:")).starts_with(&format!("proxy-connect {m}: ok")),
        "{texts:#?}"
    );
    for refused in [
        format!("proxy-connect {x}:"),
        format!("proxy-get {get_secret}:"),
    ] {
        let line = said(&texts, &refused);
        assert!(line.contains("denied (HTTP/1.1 403 Forbidden"), "{line}");
    }
    // The sandbox's loopback is its own: neither host port exists there, allowed or not.
    for direct in [format!("connect {x}:"), format!("connect {m}:")] {
        let line = said(&texts, &direct);
        assert!(
            line.contains("denied") && line.contains("refused"),
            "{line}"
        );
    }
    assert_eq!(secret.connections(), 0, "the secret service was reached");
    assert_eq!(
        model.connections(),
        2,
        "the model saw the GET and the tunnel"
    );

    let log = s.log();
    let opened = records(&log, "egress_opened");
    assert_eq!(opened.len(), 1, "{log:#?}");
    assert_eq!(opened[0]["proxy"], "127.0.0.1:3128");
    assert_eq!(opened[0]["allow"], serde_json::json!([m]));
    let refused: Vec<(String, String)> = records(&log, "egress_refused")
        .iter()
        .map(|r| {
            (
                r["method"].as_str().unwrap().to_string(),
                r["target"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        refused,
        [
            ("CONNECT".to_string(), x.clone()),
            ("GET".to_string(), x.clone())
        ],
        "each refused connection is named in the log"
    );
    let attestation = out.attestation.unwrap();
    assert!(
        attestation.enforced.contains(&Guarantee::EgressConfined),
        "{attestation:?}"
    );
}

#[tokio::test]
async fn the_users_rules_widen_the_allow_list() {
    let s = Scratch::new();
    let model = HostService::start("model-ok");
    let registry = HostService::start("registry");
    let mut config = confined(&s, &model);
    config.sandbox.network_allow = vec![registry.address().parse::<AllowRule>().unwrap()];
    let get = format!("http://{}/pkg", registry.address());
    run(config, &net_probe(&s, &["--proxy-get", &get]), s.session())
        .await
        .unwrap();
    let texts = texts(&s);
    assert!(
        said(&texts, "proxy-get").contains("ok (HTTP/1.1 200 OK) registry"),
        "{texts:#?}"
    );
    let opened = records(&s.log(), "egress_opened")[0].clone();
    assert_eq!(
        opened["allow"],
        serde_json::json!([model.address(), registry.address()]),
        "the provider's endpoints first, then the user's rules"
    );
}

/// A unix socket on the host that counts the connections it accepted.
fn host_unix_socket(path: &Path) -> Arc<AtomicUsize> {
    let listener = UnixListener::bind(path).unwrap();
    let connections = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&connections);
    std::thread::spawn(move || {
        for _ in listener.incoming().flatten() {
            counted.fetch_add(1, Ordering::SeqCst);
        }
    });
    connections
}

fn abstract_socket(name: &str) -> Arc<AtomicUsize> {
    use std::os::linux::net::SocketAddrExt;
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let listener = UnixListener::bind_addr(&addr).unwrap();
    let connections = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&connections);
    std::thread::spawn(move || {
        for _ in listener.incoming().flatten() {
            counted.fetch_add(1, Ordering::SeqCst);
        }
    });
    connections
}

#[tokio::test]
async fn host_unix_and_abstract_sockets_are_out_of_reach() {
    let s = Scratch::new();
    let model = HostService::start("model-ok");
    // An agent socket in a directory the sandbox sees read-only, and one in the working
    // directory (writable): read-only mounts do not stop a connect, so both must be covered.
    let dir = s.path("agent-sockets");
    std::fs::create_dir_all(&dir).unwrap();
    let outside = dir.join("agent.sock");
    let inside = s.path("work").join("dev-server.sock");
    std::fs::create_dir_all(s.path("work")).unwrap();
    let outside_seen = host_unix_socket(&outside);
    let inside_seen = host_unix_socket(&inside);
    let name = format!("corral-egress-test-{}", std::process::id());
    let abstract_seen = abstract_socket(&name);
    run(
        confined(&s, &model),
        &net_probe(
            &s,
            &[
                "--unix",
                &format!("{},{}", outside.display(), inside.display()),
                "--abstract",
                &name,
            ],
        ),
        s.session(),
    )
    .await
    .unwrap();
    let texts = texts(&s);
    for probe in [
        format!("unix {}:", outside.display()),
        format!("unix {}:", inside.display()),
        format!("abstract {name}:"),
    ] {
        assert!(said(&texts, &probe).contains("denied"), "{texts:#?}");
    }
    assert_eq!(outside_seen.load(Ordering::SeqCst), 0);
    assert_eq!(inside_seen.load(Ordering::SeqCst), 0);
    assert_eq!(abstract_seen.load(Ordering::SeqCst), 0);
}

/// A bubblewrap that never reports its sandbox: it closes the status pipe and runs the real one
/// without `--json-status-fd`, so the sandbox waits on its block forever.
fn mute_bwrap(dir: &Path) -> PathBuf {
    let script = dir.join("mute-bwrap");
    std::fs::write(
        &script,
        r#"#!/bin/sh
# Drops --json-status-fd N (closing N), keeps everything else.
n=$#; i=0; skip=0
for a in "$@"; do
  i=$((i+1))
  if [ "$skip" = 1 ]; then skip=0; eval "exec $a>&-"; continue; fi
  if [ "$a" = "--json-status-fd" ]; then skip=1; continue; fi
  set -- "$@" "$a"
done
shift "$n"
exec bwrap "$@"
"#,
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    script
}

#[tokio::test]
async fn a_sandbox_whose_way_out_cannot_be_opened_never_runs_its_cli() {
    let s = Scratch::new();
    let model = HostService::start("model-ok");
    let mut config = confined(&s, &model);
    config.sandbox.bwrap = mute_bwrap(s.dir.path());
    let err = run(
        config,
        &net_probe(&s, &["--connect", "127.0.0.1:9"]),
        s.session(),
    )
    .await
    .unwrap_err();
    match &err {
        ProviderError::Unsandboxed { unenforced, .. } => {
            assert_eq!(unenforced[0].guarantee, Guarantee::EgressConfined, "{err}");
        }
        other => panic!("expected Unsandboxed, got {other}"),
    }
    assert!(
        err.to_string().contains("did not report its sandbox"),
        "{err}"
    );
    assert!(
        corral_test_support::read_pids(&s.run_dir().join("pids")).is_empty(),
        "the CLI ran"
    );
    let log = s.log();
    assert_eq!(
        log.last().unwrap()["kind"],
        "run_finished",
        "the log still ends with how the run ended"
    );
}

#[tokio::test]
async fn natively_the_allow_list_is_not_enforced_and_the_run_says_so() {
    let s = Scratch::new();
    let mut config = fast_config();
    config.sandbox = SandboxConfig {
        backend: BackendChoice::Native,
        network: NetworkPolicy::Allowlist,
        ..SandboxConfig::default()
    };
    let err = run(config.clone(), &s.adapter("ok", &[]), s.session())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("egress-confined"), "{err}");
    config.sandbox.allow_degraded_native = true;
    let out = run(config, &s.adapter("ok", &[]), s.session())
        .await
        .unwrap();
    let attestation = out.attestation.unwrap();
    assert!(
        attestation
            .not_enforced
            .iter()
            .any(|u| u.guarantee == Guarantee::EgressConfined),
        "{attestation:?}"
    );
}
