//! The conformance suite: the same cases, with the same assertions, for every real CLI under
//! `corral run` against the fake model API. A case branches only on what the provider's capability
//! row declares (session id timing, resume, prompt channel, streaming), never on which CLI it is;
//! [`conformance!`] expands each case into `case::claude`, `case::codex`, `case::copilot`,
//! `case::opencode`, `case::grok` and `case::gemini`.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use corral_ports::{NoopObserver, ProviderError, SessionIdTiming};
use corral_test_support::fake_api::{Scenario, Step, shell_tool_input};
use serde_json::Value;

use crate::providers::{Cli, VALID_SIGNALS, World, conformance};
use crate::support::*;

/// A fresh random session id that no CLI has ever seen.
fn unknown_session() -> String {
    corral_test_support::fresh_uuid()
}

/// About 200 KB of task text with `sentinel` in its middle.
fn big_prompt(sentinel: &str) -> String {
    let filler: String = (0..1_500)
        .map(|i| {
            format!("Context line {i:05}: nothing here needs doing; keep reading to the end.\n")
        })
        .collect();
    format!(
        "{filler}The secret word is {sentinel}; never repeat it.\n{filler}Say hello and stop.\n"
    )
}

/// The spawn records of a run.
fn spawns(dir: &Path) -> Vec<Value> {
    kinds(&log(dir), "spawn").into_iter().cloned().collect()
}

/// The classes the run's attempts were given, in order.
fn classes(dir: &Path) -> Vec<String> {
    kinds(&log(dir), "classified")
        .iter()
        .filter_map(|v| v["class"].as_str().map(str::to_string))
        .collect()
}

/// Asserts that `--resume` was refused with exit 2 and a message naming the session, and that
/// the CLI never ran a session: no spawn record, no request to the model.
fn assert_resume_refused(world: &World, session: &str) {
    let out = world
        .corral_run()
        .args(["--json", "--no-contract", "--resume", session, "continue"])
        .output()
        .unwrap();
    let text = transcript(&world.env, &out);
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(
        text.to_lowercase().contains("resume") && text.contains(session),
        "the refusal names the resume and the session: {text}"
    );
    let dir = run_dir(&summary(&out.stdout));
    let log = log(&dir);
    assert!(kinds(&log, "spawn").is_empty(), "{log:#?}");
    assert!(
        world.api.requests().is_empty(),
        "{:#?}",
        world.api.requests()
    );
    // Refused from the capability row before anything runs: not even the version probe, and
    // the log still ends with how the run ended.
    assert!(kinds(&log, "version_checked").is_empty(), "{log:#?}");
    assert_eq!(kinds(&log, "run_finished").len(), 1, "{log:#?}");
}

/// Kills the process it holds (with SIGKILL) when dropped, unless it was taken out: a failed
/// assertion must not leave a `corral` and its CLI waiting on a model that never answers.
struct KillOnDrop(Option<u32>);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Some(pid) = self.0 {
            corral_test_support::kill_survivors(&[pid]);
        }
    }
}

conformance!(
    a_secret_prompt_stays_out_of_every_argv_and_ctrl_c_leaves_nothing,
    |cli: &'static Cli| {
        let world = World::new(cli, |_| Scenario::forever(Step::HangBeforeHeaders));
        let sentinel = format!("SENTINEL{}", unknown_session().replace('-', ""));
        let prompt_file = world.env.write("prompt.md", &big_prompt(&sentinel));
        let mut cmd = corral_test_support::command(&assert_cmd::cargo::cargo_bin("corral"));
        cmd.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", world.env.home())
            .envs(world.vars().iter().map(|(k, v)| (k, v)))
            .current_dir(world.env.project())
            .args(["run", "--provider", cli.id.as_str(), "--prompt-file"])
            .arg(&prompt_file)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().unwrap();
        let corral_pid = child.id();
        // Read both pipes on threads so a chatty child never blocks on a full pipe.
        let mut stdout = child.stdout.take().unwrap();
        let mut stderr = child.stderr.take().unwrap();
        let out_reader = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = stdout.read_to_string(&mut text);
            text
        });
        let err_reader = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = stderr.read_to_string(&mut text);
            text
        });
        let mut guard = KillOnDrop(Some(corral_pid));

        // While the CLI waits on the model: the spawn record names the group.
        let mut dir = None;
        // Until the spawn record, or until corral ends without one (a refusal before the spawn):
        // waiting on for a spawn that cannot come only hides why.
        let spawned = |dir: &Option<PathBuf>| dir.as_ref().is_some_and(|d| !spawns(d).is_empty());
        let settled = wait_until(EVENT_WAIT, || {
            dir = only_run_dir(&world.env.project());
            spawned(&dir) || !corral_test_support::is_alive(corral_pid)
        });
        assert!(settled, "no spawn record within {EVENT_WAIT:?}");
        if !spawned(&dir) {
            guard.0 = None;
            let _ = child.wait();
            panic!(
                "corral ended before it started {}:\n{}",
                cli.bin,
                err_reader.join().unwrap_or_default()
            );
        }
        let dir = dir.unwrap();
        let pid = u32::try_from(spawns(&dir)[0]["pid"].as_u64().unwrap()).unwrap();
        let called = wait_until(EVENT_WAIT, || !world.api.model_requests().is_empty());
        assert!(called, "{} never called the model", cli.bin);
        if cli.session_id_before_model_call() {
            assert!(
                wait_until(Duration::from_secs(10), || dir
                    .join("session-id.txt")
                    .is_file()),
                "{:?} says the session id is known before the model call",
                cli.caps().session_id
            );
        }
        let token = environ_var(pid, "CORRAL_RUN_ID").unwrap_or_default();
        let run_marker = format!("CORRAL_RUN_ID={}-{corral_pid}-", cli.id);
        assert!(
            format!("CORRAL_RUN_ID={token}").starts_with(&run_marker),
            "the CLI carries the run's marker: {token:?}"
        );
        let mut tree = group_members(pid);
        tree.extend(processes_carrying(&run_marker));
        tree.sort_unstable();
        tree.dedup();
        assert!(
            tree.contains(&pid),
            "the group leader {pid} is alive: {tree:?}"
        );
        for &member in &tree {
            let argv = cmdline(member);
            eprintln!("  {member}: {}", argv.chars().take(160).collect::<String>());
            assert!(
                !argv.contains(&sentinel),
                "the prompt is in the argv of {member}: {argv}"
            );
            let environ = std::fs::read(format!("/proc/{member}/environ")).unwrap_or_default();
            assert!(
                !String::from_utf8_lossy(&environ).contains(&sentinel),
                "the prompt is in the environment of {member}"
            );
        }

        corral_test_support::interrupt(corral_pid);
        let exited = wait_until(Duration::from_secs(60), || {
            !corral_test_support::is_alive(corral_pid)
        });
        if exited {
            guard.0 = None;
        }
        drop(guard);
        let status = child.wait().unwrap();
        let stdout = out_reader.join().unwrap();
        let stderr = err_reader.join().unwrap();
        let said = format!("{stdout}[stderr]\n{stderr}");
        assert!(exited, "corral did not exit within 60 s of Ctrl-C: {said}");
        assert_eq!(status.code(), Some(130), "{said}");
        assert!(stderr.contains("outcome   cancelled"), "{said}");

        let session = record(&dir)["sessionId"].as_str().map(str::to_string);
        eprintln!("  session id at the cancel: {session:?}");
        if cli.session_id_before_model_call() {
            assert!(session.is_some(), "{said}");
        }
        if !cli.has_session_id() {
            assert_eq!(session, None, "{said}");
        }
        match &session {
            Some(id) => {
                assert_eq!(
                    std::fs::read_to_string(dir.join("session-id.txt")).unwrap(),
                    format!("{id}\n"),
                    "the session id is kept"
                );
                let resume = format!(
                    "resume    corral resume {}",
                    dir.file_name().unwrap().to_string_lossy()
                );
                assert!(stderr.contains(&resume), "{said}");
            }
            None => {
                assert!(!dir.join("session-id.txt").exists());
                assert!(!stdout.contains("\nresume "), "{said}");
            }
        }
        assert_group_gone(&spawned_pids(&dir));
        assert!(
            wait_until(Duration::from_secs(5), || processes_carrying(&run_marker)
                .is_empty()),
            "processes of the run left: {:?}",
            processes_carrying(&run_marker)
        );
        let log = log(&dir);
        let last = log.last().unwrap();
        assert_eq!(
            (&last["kind"], &last["outcome"]),
            (&"run_finished".into(), &"cancelled".into()),
            "the log was flushed to its end"
        );
        let text = std::fs::read_to_string(dir.join("events.jsonl")).unwrap();
        assert!(
            !text.contains(&sentinel),
            "the prompt is in the execution log"
        );
    }
);

conformance!(
    the_session_id_is_captured_and_persisted,
    |cli: &'static Cli| {
        let world = World::new(cli, |_| {
            Scenario::script([Step::text("Hello from the fake model.")])
        });
        let out = world
            .corral_run()
            .args(["--json", "--no-contract", "say hello"])
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            transcript(&world.env, &out)
        );
        let s = summary(&out.stdout);
        assert_eq!(s["outcome"], "succeeded", "{s}");
        let dir = run_dir(&s);
        if cli.has_session_id() {
            let id = s["sessionId"]
                .as_str()
                .unwrap_or_else(|| panic!("no session id: {s}"));
            assert_eq!(
                std::fs::read_to_string(dir.join("session-id.txt")).unwrap(),
                format!("{id}\n")
            );
            let meta: Value =
                serde_json::from_str(&std::fs::read_to_string(dir.join("session.json")).unwrap())
                    .unwrap();
            assert_eq!(meta["sessionId"], id, "{meta}");
            assert_eq!(meta["provider"], cli.id.as_str(), "{meta}");
            assert_eq!(meta["cwd"], world.project().display().to_string(), "{meta}");
            assert_eq!(record(&dir)["sessionId"], id);
            if cli.caps().session_id == SessionIdTiming::MintedUpFront {
                let args = spawns(&dir)[0]["args"].to_string();
                assert!(args.contains(id), "the minted id is passed: {args}");
            }
        } else {
            assert!(s["sessionId"].is_null(), "{s}");
            assert!(!dir.join("session-id.txt").exists());
            assert!(!dir.join("session.json").exists());
        }
    }
);

conformance!(resume_is_spelled_right_or_refused, |cli: &'static Cli| {
    if !cli.caps().resume {
        let world = World::new(cli, |_| Scenario::script([Step::text("never asked")]));
        assert_resume_refused(&world, &unknown_session());
        return;
    }
    let world = World::new(cli, |_| {
        Scenario::script([Step::text("First answer."), Step::text("Second answer.")])
    });
    let first = world
        .corral_run()
        .args(["--json", "--no-contract", "first prompt"])
        .output()
        .unwrap();
    assert_eq!(
        first.status.code(),
        Some(0),
        "{}",
        transcript(&world.env, &first)
    );
    let s1 = summary(&first.stdout);
    let id = s1["sessionId"]
        .as_str()
        .unwrap_or_else(|| panic!("no session id to resume: {s1}"))
        .to_string();
    let second = world
        .corral_run()
        .args(["--json", "--no-contract", "--resume", &id, "second prompt"])
        .output()
        .unwrap();
    assert_eq!(
        second.status.code(),
        Some(0),
        "{}",
        transcript(&world.env, &second)
    );
    let s2 = summary(&second.stdout);
    assert_eq!(s2["outcome"], "succeeded", "{s2}");
    let dir = run_dir(&s2);
    let spawned = spawns(&dir);
    assert_eq!(spawned.len(), 1, "no fallback: {spawned:#?}");
    assert_eq!(spawned[0]["resume"], id.as_str());
    assert!(kinds(&log(&dir), "cold_retry").is_empty());
    let requests = world.api.model_requests();
    let history: Vec<bool> = requests.iter().map(|r| r.history).collect();
    assert_eq!(
        history,
        [false, true],
        "the resumed request carries the first run's turns: {requests:#?}"
    );
});

conformance!(
    an_unknown_session_falls_back_to_exactly_one_cold_run,
    |cli: &'static Cli| {
        let gone = unknown_session();
        if !cli.caps().resume {
            let world = World::new(cli, |_| Scenario::script([Step::text("never asked")]));
            assert_resume_refused(&world, &gone);
            return;
        }
        let world = World::new(cli, |_| Scenario::script([Step::text("A fresh start.")]));
        let out = world
            .corral_run()
            .args(["--json", "--no-contract", "--resume", &gone, "do the task"])
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            transcript(&world.env, &out)
        );
        let s = summary(&out.stdout);
        assert_eq!(s["outcome"], "succeeded", "{s}");
        assert_ne!(s["sessionId"], gone.as_str(), "{s}");
        let dir = run_dir(&s);
        let log = log(&dir);
        let cold = kinds(&log, "cold_retry");
        assert_eq!(cold.len(), 1, "{log:#?}");
        assert_eq!(cold[0]["staleSession"], gone.as_str());
        let spawned = spawns(&dir);
        let resumed: Vec<&Value> = spawned.iter().map(|s| &s["resume"]).collect();
        assert_eq!(resumed, [&Value::from(gone.as_str()), &Value::Null]);
        assert_eq!(classes(&dir), ["stale-session", "succeeded"]);
        assert_eq!(
            world.api.model_requests().len(),
            1,
            "only the cold run called the model"
        );
    }
);

conformance!(
    a_permanent_429_is_classified_from_the_clis_own_output,
    |cli: &'static Cli| {
        let world = World::new(cli, |_| Scenario::forever(Step::rate_limited(1)));
        let out = world
            .corral_run()
            .env("CORRAL_RETRY__RATE_LIMIT_RETRIES", "0")
            .args(["--json", "--no-contract", "hello"])
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(4),
            "{}",
            transcript(&world.env, &out)
        );
        let s = summary(&out.stdout);
        assert_eq!(s["outcome"], "rate-limited", "{s}");
        assert_eq!(s["attempts"], 1, "{s}");
        let dir = run_dir(&s);
        assert_eq!(classes(&dir), ["rate-limited"]);
        assert!(kinds(&log(&dir), "backoff").is_empty());
        let statuses: Vec<Option<u16>> = world
            .api
            .model_requests()
            .iter()
            .map(|r| r.status)
            .collect();
        assert_eq!(
            statuses,
            vec![Some(429); cli.requests_per_failed_call],
            "the CLI's own retries, as the harness row says"
        );
    }
);

conformance!(
    the_agent_writes_signals_json_and_corral_validates_it,
    |cli: &'static Cli| {
        let world = World::new(cli, |project| {
            Scenario::script(cli.write_signals_steps(project, VALID_SIGNALS))
        });
        let out = world
            .corral_run()
            .args(["--json", "do the task"])
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            transcript(&world.env, &out)
        );
        let s = summary(&out.stdout);
        assert_eq!(s["outcome"], "succeeded", "{s}");
        assert_eq!(s["signalsValid"], true, "{s}");
        assert_eq!(
            s["signalKinds"],
            serde_json::json!(["note", "task-complete"])
        );
        let dir = run_dir(&s);
        let written: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("signals.json")).unwrap())
                .unwrap();
        assert_eq!(
            written,
            serde_json::from_str::<Value>(VALID_SIGNALS).unwrap()
        );
        let record = record(&dir);
        assert_eq!(record["signalsValid"], true);
        assert_eq!(record["providerRuns"], 1, "no corrective run was needed");
        // It got there through the default sandbox's allow-list proxy: the only way out of its
        // network namespace to the fake API on the host's loopback.
        let log = log(&dir);
        let opened = kinds(&log, "egress_opened");
        assert_eq!(opened.len(), 1, "{log:#?}");
        assert!(
            opened[0]["allow"]
                .as_array()
                .unwrap()
                .contains(&Value::from(world.api.addr().to_string())),
            "{}",
            opened[0]
        );
        for refused in kinds(&log, "egress_refused") {
            eprintln!(
                "  refused: {} {} ({})",
                refused["method"], refused["target"], refused["reason"]
            );
        }
        assert!(
            record["attestation"]["enforced"]
                .as_array()
                .unwrap()
                .contains(&Value::from("egress-confined")),
            "{}",
            record["attestation"]
        );
    }
);

conformance!(
    a_rate_limit_then_success_resumes_what_was_captured,
    |cli: &'static Cli| {
        let world = World::new(cli, |project| {
            // Enough 429s that the CLI's own retries give up once, then the agent's work.
            let mut steps = vec![Step::rate_limited(1); cli.requests_per_failed_call];
            steps.extend(cli.write_signals_steps(project, VALID_SIGNALS));
            Scenario::script(steps)
        });
        let out = world
            .corral_run()
            .env("CORRAL_RETRY__RATE_LIMIT_RETRIES", "2")
            .args(["--json", "do the task"])
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            transcript(&world.env, &out)
        );
        let s = summary(&out.stdout);
        assert_eq!(s["signalsValid"], true, "{s}");
        assert_eq!(s["attempts"], 2, "{s}");
        let dir = run_dir(&s);
        let log = log(&dir);
        assert_eq!(classes(&dir), ["rate-limited", "succeeded"]);
        let backoff = kinds(&log, "backoff");
        assert_eq!(backoff.len(), 1, "{log:#?}");
        let captured = kinds(&log, "session_persisted")
            .iter()
            .find(|r| r["attempt"] == 1)
            .map(|r| r["sessionId"].clone())
            .unwrap_or(Value::Null);
        if cli.session_id_before_model_call() {
            assert!(captured.is_string(), "{log:#?}");
        }
        if !cli.has_session_id() {
            assert!(captured.is_null(), "{log:#?}");
        }
        let spawned = spawns(&dir);
        eprintln!(
            "  attempt 1 captured {captured}; attempt 2 resumed {}",
            spawned[1]["resume"]
        );
        assert_eq!(spawned.len(), 2);
        assert_eq!(spawned[0]["resume"], Value::Null);
        assert_eq!(
            spawned[1]["resume"], captured,
            "the second attempt resumes what the first captured, else runs cold"
        );
        assert_eq!(backoff[0]["nextResume"], captured);
    }
);

/// How long a case waits for something a real CLI does on its way (the spawn record, its first
/// request): generous, since the wait ends as soon as it happens, and a CLI's start-up on a busy
/// machine is slow (OpenCode: 38 s from its spawn to its first request at load 15).
const EVENT_WAIT: Duration = Duration::from_secs(300);

/// The idle watchdog of the stall case: twice the settings' floor (`run.idle_watchdog_ms` >= 60
/// s), because a streaming CLI's silent start-up counts against it as much as the stall does.
/// OpenCode prints nothing until its first part is complete, and its start-up is CPU-bound (a
/// Node launcher, then a large Bun binary): at load 15 on two cores its first request came 38 s
/// after the spawn, at load 21 its first line about 50 s after the run began. The 30 s this case
/// used to set fired before OpenCode reached the stalled stream, even with the case run alone.
const STALL_IDLE: Duration = Duration::from_secs(120);

/// The wall-clock limit of the stall case, for a CLI that prints nothing until the end; above
/// [`STALL_IDLE`] plus a busy machine's start-up time (Codex's first request came 16 s after its
/// start there).
const STALL_WALL: Duration = Duration::from_secs(180);

/// How long the stall case may take in all before it is called hung: [`STALL_WALL`], the kill
/// grace and the version probe, with room for a machine at load 25.
const STALL_RUN_LIMIT: Duration = Duration::from_secs(420);

/// Runs a session against the stalled API through the composition root, with the children's
/// HOME at `home` and the run directory `<project>/<run>`: the error, how long it took, the run
/// directory.
fn run_stalled(world: &World, home: &Path, run: &str) -> (ProviderError, Duration, PathBuf) {
    let provider = world.library_provider(home, |config| {
        config.idle_timeout = STALL_IDLE;
        config.wall_timeout = Some(STALL_WALL);
        config.kill_grace = Duration::from_secs(2);
    });
    let session = world.session(run, "stall please");
    let dir = session.output_dir.clone();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let started = Instant::now();
    let result = runtime
        .block_on(async {
            tokio::time::timeout(
                STALL_RUN_LIMIT,
                provider.run(session, Arc::new(NoopObserver)),
            )
            .await
        })
        .unwrap_or_else(|_| panic!("the run did not end within {STALL_RUN_LIMIT:?}"));
    let took = started.elapsed();
    let err = result.unwrap_err();
    eprintln!("  ended after {:.1}s: {err}", took.as_secs_f64());
    (err, took, dir)
}

/// Asserts that a stalled run reached the model, was ended by the right timer, and left no
/// process behind.
fn assert_stall_ended(world: &World, err: &ProviderError, took: Duration, dir: &Path) {
    let cli = world.cli;
    assert!(
        world
            .api
            .model_requests()
            .iter()
            .any(|r| r.step.as_deref() == Some("stall_mid_stream")),
        "the CLI reached the stalled stream before {err} (with no request at all, its start-up \
         outlasted the limit): {:#?}",
        world.api.requests()
    );
    if cli.caps().streaming {
        assert!(
            matches!(err, ProviderError::IdleTimeout { .. }),
            "a streaming CLI gone silent is ended by the idle watchdog: {err}"
        );
    } else {
        // A CLI that prints only at the end gets an idle floor above its own request timeout (the
        // adapter's liveness rule), so the short watchdog must not fire: the wall clock ends it.
        assert!(
            matches!(err, ProviderError::WallTimeout { .. }),
            "a CLI that prints only at the end is ended by the wall clock: {err}"
        );
        assert!(took >= STALL_WALL, "{took:?}");
    }
    assert!(
        took >= STALL_IDLE,
        "ended before the watchdog could fire: {took:?}"
    );
    if cli.session_id_before_model_call() {
        assert!(
            err.session_id().is_some(),
            "the session id was captured before the stall: {err}"
        );
    }
    assert_group_gone(&spawned_pids(dir));
    let marker = format!("CORRAL_RUN_ID={}-{}-", cli.id, std::process::id());
    assert!(
        wait_until(Duration::from_secs(5), || processes_carrying(&marker)
            .is_empty()),
        "processes of the run left: {:?}",
        processes_carrying(&marker)
    );
}

conformance!(
    a_stalled_stream_is_ended_with_its_whole_tree,
    |cli: &'static Cli| {
        let world = World::new(cli, |_| Scenario::forever(Step::StallMidStream));
        let (err, took, dir) = run_stalled(&world, &world.env.home(), "run");
        assert_stall_ended(&world, &err, took, &dir);
    }
);

/// A TCP service on the host's loopback, not on any allow-list, that counts who reached it.
struct HostService {
    addr: std::net::SocketAddr,
    reached: Arc<std::sync::atomic::AtomicUsize>,
}

impl HostService {
    fn start() -> Self {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let reached = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counter = Arc::clone(&reached);
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                drop(stream);
            }
        });
        HostService { addr, reached }
    }

    fn reached(&self) -> usize {
        self.reached.load(std::sync::atomic::Ordering::SeqCst)
    }
}

conformance!(
    a_host_service_off_the_allow_list_is_out_of_reach_and_the_refusal_is_named,
    |cli: &'static Cli| {
        let service = HostService::start();
        let target = service.addr.to_string();
        // The agent tries the service through the proxy the sandbox points it at, then
        // directly; then it does its task.
        let probe = format!(
            "curl -sS -m 5 http://{target}/secrets; curl -sS -m 5 --noproxy '*' http://{target}/secrets; true"
        );
        let world = World::new(cli, |project| {
            let mut steps = vec![Step::tool_use(
                cli.shell_tool,
                shell_tool_input(cli.shell_tool, &probe),
            )];
            steps.extend(cli.write_signals_steps(project, VALID_SIGNALS));
            Scenario::script(steps)
        });
        let out = world
            .corral_run()
            .args(["--json", "look around, then do the task"])
            .output()
            .unwrap();
        let text = transcript(&world.env, &out);
        assert_eq!(out.status.code(), Some(0), "{text}");
        let dir = run_dir(&summary(&out.stdout));
        let log = log(&dir);
        assert_eq!(service.reached(), 0, "the agent reached {target}: {log:#?}");
        let refused: Vec<&Value> = kinds(&log, "egress_refused")
            .into_iter()
            .filter(|r| r["target"] == target.as_str())
            .collect();
        assert_eq!(refused.len(), 1, "one refusal naming {target}: {log:#?}");
        assert_eq!(refused[0]["reason"], "not on the allow-list");
    }
);
