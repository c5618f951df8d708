//! The sprint's flow with a fake agent per role (it writes files and `signals.json` in the
//! tree, as a real agent would) and real git and `sh` through the test-support host runner.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use corral_ports::{
    CancellationToken, CommandRunner, CommandSpec, Effort, ErrorClass, Outcome, ProviderId,
    RunObserver, SessionId, Usage,
};
use corral_sprint::{
    Attribution, DirtyTree, EventSink, Role, RoleAgent, RunOptions, SpawnFailure, SpawnReport,
    SpawnRequest, SpawnVerdict, SprintEnd, SprintError, SprintEvent, SprintLayout, SprintState,
    SprintSummary, TaskExecutor, TaskHandback, TaskHost, TaskId, TaskJob, TaskStatus, read_state,
    run_sprint,
};
use corral_test_support::HostCommandRunner;

// What an agent must not be able to do to its judges and the sprint's inputs (issue 29).
mod failover;
mod guard;
mod learnings;
mod night;
mod parallel;
mod queue;
mod queue_crash;
mod resume;
mod rounds;
mod tree;

const IDENTITY: [(&str, &str); 4] = [
    ("GIT_AUTHOR_NAME", "Sprint Test"),
    ("GIT_AUTHOR_EMAIL", "sprint@example.invalid"),
    ("GIT_COMMITTER_NAME", "Sprint Test"),
    ("GIT_COMMITTER_EMAIL", "sprint@example.invalid"),
];

pub(crate) fn runner() -> HostCommandRunner {
    HostCommandRunner {
        env: IDENTITY
            .iter()
            .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
            .collect(),
    }
}

pub(crate) async fn git(dir: &Path, args: &[&str]) -> String {
    let out = runner()
        .run(
            CommandSpec::git(args.iter().copied(), dir, Duration::from_secs(30)),
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    assert!(out.success(), "git {args:?}: {}", out.stderr.text);
    out.stdout.text
}

/// What a fake spawn does.
#[derive(Clone, Debug)]
enum Act {
    /// Writes these files in the work tree, then reports these signals.
    Write {
        files: Vec<(&'static str, &'static str)>,
        remove: Vec<&'static str>,
        signals: serde_json::Value,
    },
    /// Like `Write`, then never returns (the sprint is killed during the spawn).
    WriteAndHang {
        files: Vec<(&'static str, &'static str)>,
        signals: Option<serde_json::Value>,
    },
    /// Rate-limit retries used up.
    RateLimited,
    /// Dies of the signal that stops the run, the run's token firing as it dies: what a Ray
    /// job's stop does, signalling every process of the job's tree, the agent's too.
    KilledWithTheRun,
    /// Checks out another branch, then completes.
    SwitchBranch(&'static str),
    /// Commits its change itself, then completes.
    CommitsItself(&'static str),
    /// An attacker without a sandbox (the native backend): writes `<task>.txt`, plants these
    /// symbolic links (path in the work tree, target) and these files (a forged report), then
    /// completes with these signals.
    Plant {
        links: Vec<(String, PathBuf)>,
        files: Vec<(String, String)>,
        signals: serde_json::Value,
    },
    /// Writes `<task>.txt`, completes, and its spawn's stray-write check reports this change
    /// outside the paths it may write (as the engine's check does under the native backend).
    WritesOutside(&'static str),
    /// Waits until the gate opens, then does the act: orders the fakes of a parallel run.
    Await(Gate, Box<Act>),
}

/// A gate a fake spawn waits at ([`Act::Await`]), opened by the test's [`Recorder`] when the
/// events it waits for were seen.
#[derive(Clone, Debug, Default)]
struct Gate(Arc<std::sync::atomic::AtomicBool>);

impl Gate {
    fn open(&self) {
        self.0.store(true, std::sync::atomic::Ordering::SeqCst);
    }

    fn is_open(&self) -> bool {
        self.0.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Waits until it opens; a gate still shut after a minute is a test that lost its way.
    async fn pass(&self) {
        for _ in 0..6000 {
            if self.is_open() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("a fake's gate never opened");
    }
}

/// The events that open a gate: true once they were all seen.
type GateOpener = Box<dyn Fn(&[SprintEvent]) -> bool + Send>;

const TS: &str = "2026-12-02T10:00:00Z";

fn complete(subject: Option<&str>, learning: Option<&str>) -> serde_json::Value {
    let mut signals = vec![serde_json::json!({"type": "task-complete", "timestamp": TS})];
    if let Some(subject) = subject {
        signals.push(
            serde_json::json!({"type": "commit-message", "timestamp": TS, "subject": subject}),
        );
    }
    if let Some(text) = learning {
        signals.push(serde_json::json!({"type": "learning", "timestamp": TS, "text": text}));
    }
    serde_json::json!({"schemaVersion": 1, "signals": signals})
}

fn blocked(reason: &str) -> serde_json::Value {
    serde_json::json!({"schemaVersion": 1, "signals": [
        {"type": "task-blocked", "timestamp": TS, "reason": reason}
    ]})
}

fn evaluation(failed: Option<&str>) -> serde_json::Value {
    let dims: Vec<serde_json::Value> = corral_contract::FLOOR_DIMENSIONS
        .iter()
        .map(|name| match (failed, *name) {
            (Some(finding), "correctness") => {
                serde_json::json!({"name": name, "passed": false, "finding": finding})
            }
            _ => serde_json::json!({"name": name, "passed": true}),
        })
        .collect();
    let status = if failed.is_some() { "failed" } else { "passed" };
    serde_json::json!({"schemaVersion": 1, "signals": [
        {"type": "evaluation", "timestamp": TS, "status": status, "dimensions": dims}
    ]})
}

fn write(files: &[(&'static str, &'static str)]) -> Act {
    Act::Write {
        files: files.to_vec(),
        remove: Vec::new(),
        signals: complete(None, None),
    }
}

/// One spawn as the fake saw it.
#[derive(Clone, Debug)]
struct Seen {
    task: String,
    round: u32,
    request: SpawnRequest,
}

/// A fake agent: what it does is looked up by task, round and role; unscripted generator
/// spawns write `<task>.txt` and complete, unscripted evaluator spawns pass.
struct FakeAgent {
    provider: ProviderId,
    model: Option<String>,
    resumes: bool,
    script: Mutex<HashMap<(String, u32, Role), Act>>,
    seen: Mutex<Vec<Seen>>,
}

impl FakeAgent {
    fn new(provider: ProviderId) -> Arc<Self> {
        Arc::new(FakeAgent {
            provider,
            model: Some("fake-model".to_string()),
            resumes: true,
            script: Mutex::new(HashMap::new()),
            seen: Mutex::new(Vec::new()),
        })
    }

    fn on(&self, task: &str, round: u32, role: Role, act: Act) {
        self.script
            .lock()
            .unwrap()
            .insert((task.to_string(), round, role), act);
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    fn seen_for(&self, task: &str, round: u32) -> Vec<Seen> {
        self.seen()
            .into_iter()
            .filter(|s| s.task == task && s.round == round)
            .collect()
    }
}

/// The task and round of a spawn directory `…/implement/<task>/rounds/<N>/<role>`.
pub(crate) fn task_and_round(dir: &Path) -> (String, u32) {
    let parts: Vec<String> = dir
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    let n = parts.len();
    (parts[n - 4].clone(), parts[n - 2].parse().unwrap())
}

fn report(session: &SessionId, verdict: SpawnVerdict) -> SpawnReport {
    SpawnReport {
        outcome: Outcome::Succeeded,
        session_id: Some(session.clone()),
        verdict,
        usage: Usage {
            input: Some(100),
            output: Some(10),
            cost_usd: Some(0.01),
            ..Usage::default()
        },
        error: None,
        attempts: 1,
        stray_writes: Vec::new(),
    }
}

fn write_files(tree: &Path, files: &[(&str, &str)]) {
    for (path, text) in files {
        let path = tree.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
}

/// The session id and `session.json` a real spawn leaves, written as soon as it is known.
fn persist_session(request: &SpawnRequest, session: &SessionId, model: Option<&str>) {
    std::fs::create_dir_all(&request.dir).unwrap();
    std::fs::write(request.dir.join("session-id.txt"), format!("{session}\n")).unwrap();
    let meta = serde_json::json!({
        "session_id": session.as_str(), "model": model, "cwd": request.work_tree, "attempt": 1
    });
    std::fs::write(request.dir.join("session.json"), meta.to_string()).unwrap();
}

fn verdict_of(request: &SpawnRequest) -> SpawnVerdict {
    SpawnVerdict::of_signals_file(&request.dir.join("signals.json"), &request.contract)
}

#[async_trait]
impl RoleAgent for FakeAgent {
    fn provider(&self) -> ProviderId {
        self.provider
    }
    fn model(&self) -> Option<&str> {
        self.model.as_deref()
    }
    fn effort(&self) -> Option<Effort> {
        None
    }
    fn resumes(&self) -> bool {
        self.resumes
    }

    async fn spawn(
        &self,
        request: SpawnRequest,
        cancel: CancellationToken,
        _observer: Arc<dyn RunObserver>,
    ) -> SpawnReport {
        let (task, round) = task_and_round(&request.dir);
        self.seen.lock().unwrap().push(Seen {
            task: task.clone(),
            round,
            request: request.clone(),
        });
        // A resumed session keeps its id; a new one is named after where it started.
        let session = request
            .resume
            .clone()
            .unwrap_or_else(|| SessionId::new(format!("{}-{task}-{round}", request.role)).unwrap());
        persist_session(&request, &session, self.model.as_deref());
        let act = self
            .script
            .lock()
            .unwrap()
            .get(&(task.clone(), round, request.role))
            .cloned();
        let act = act.unwrap_or_else(|| match request.role {
            Role::Generator => Act::Write {
                files: Vec::new(),
                remove: Vec::new(),
                signals: complete(None, None),
            },
            Role::Evaluator => Act::Write {
                files: Vec::new(),
                remove: Vec::new(),
                signals: evaluation(None),
            },
        });
        let act = match act {
            Act::Await(gate, then) => {
                gate.pass().await;
                *then
            }
            other => other,
        };
        let tree = request.work_tree.clone();
        let default_file = format!("{task}.txt");
        let signals = |value: &serde_json::Value| {
            std::fs::write(request.dir.join("signals.json"), value.to_string()).unwrap();
        };
        match act {
            Act::Write {
                files,
                remove,
                signals: value,
            } => {
                if request.role == Role::Generator {
                    if files.is_empty() && remove.is_empty() {
                        write_files(&tree, &[(default_file.as_str(), "done\n")]);
                    }
                    write_files(&tree, &files);
                    for path in remove {
                        let _ = std::fs::remove_file(tree.join(path));
                    }
                }
                signals(&value);
            }
            Act::Plant {
                links,
                files,
                signals: value,
            } => {
                write_files(&tree, &[(default_file.as_str(), "done\n")]);
                for (path, text) in &files {
                    let path = tree.join(path);
                    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                    std::fs::write(path, text).unwrap();
                }
                for (path, target) in &links {
                    let path = tree.join(path);
                    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                    let _ = std::fs::remove_file(&path);
                    std::os::unix::fs::symlink(target, path).unwrap();
                }
                signals(&value);
            }
            Act::WriteAndHang {
                files,
                signals: value,
            } => {
                write_files(&tree, &files);
                if let Some(value) = value {
                    signals(&value);
                }
                std::future::pending::<()>().await;
            }
            Act::KilledWithTheRun => {
                cancel.cancel();
                return SpawnReport {
                    outcome: Outcome::Crashed,
                    session_id: Some(session),
                    verdict: SpawnVerdict::NotChecked,
                    usage: Usage::default(),
                    error: Some(SpawnFailure {
                        class: ErrorClass::Permanent,
                        message: "the CLI was killed by signal 15".to_string(),
                        resets_at_epoch_s: None,
                    }),
                    attempts: 1,
                    stray_writes: Vec::new(),
                };
            }
            Act::RateLimited => {
                return SpawnReport {
                    outcome: Outcome::RateLimited,
                    session_id: Some(session),
                    verdict: SpawnVerdict::NotChecked,
                    usage: Usage::default(),
                    error: Some(SpawnFailure {
                        class: ErrorClass::Retryable,
                        message: "rate limited; retries used up".to_string(),
                        resets_at_epoch_s: None,
                    }),
                    attempts: 3,
                    stray_writes: Vec::new(),
                };
            }
            Act::SwitchBranch(branch) => {
                write_files(&tree, &[(default_file.as_str(), "done\n")]);
                git(&tree, &["checkout", "--quiet", "-b", branch]).await;
                signals(&complete(None, None));
            }
            Act::CommitsItself(message) => {
                write_files(&tree, &[(default_file.as_str(), "done\n")]);
                git(&tree, &["add", "--all"]).await;
                git(&tree, &["commit", "--quiet", "-m", message]).await;
                signals(&complete(Some("Add the file"), None));
            }
            Act::WritesOutside(change) => {
                write_files(&tree, &[(default_file.as_str(), "done\n")]);
                signals(&complete(None, None));
                return SpawnReport {
                    stray_writes: vec![change.to_string()],
                    ..report(&session, verdict_of(&request))
                };
            }
            Act::Await(..) => panic!("a gate behind a gate"),
        }
        report(&session, verdict_of(&request))
    }
}

/// Keeps every event; on demand, a copy of `sprint.json` as it was at each one.
#[derive(Default)]
struct Recorder {
    events: Mutex<Vec<SprintEvent>>,
    state_file: Mutex<Option<PathBuf>>,
    states: Mutex<Vec<(SprintEvent, Vec<u8>)>>,
    /// Gates opened once their events were seen.
    gates: Mutex<Vec<(Gate, GateOpener)>>,
}

impl Recorder {
    /// Opens `gate` once `seen` holds for the events so far.
    fn open_when(&self, gate: &Gate, seen: impl Fn(&[SprintEvent]) -> bool + Send + 'static) {
        self.gates
            .lock()
            .unwrap()
            .push((gate.clone(), Box::new(seen)));
    }
}

impl EventSink for Recorder {
    fn event(&self, event: &SprintEvent) {
        let mut events = self.events.lock().unwrap();
        events.push(event.clone());
        for (gate, seen) in self.gates.lock().unwrap().iter() {
            if seen(&events) {
                gate.open();
            }
        }
        drop(events);
        let path = self.state_file.lock().unwrap().clone();
        if let Some(bytes) = path.and_then(|p| std::fs::read(p).ok()) {
            self.states.lock().unwrap().push((event.clone(), bytes));
        }
    }
}

struct Project {
    _dir: tempfile::TempDir,
    root: PathBuf,
}

const SPRINT_HEAD: &str = r#"
[sprint]
name = "s"
check = "test ! -e BROKEN"
max_rounds = 3
max_attempts = 2

[roles.generator]
provider = "claude"

[roles.evaluator]
provider = "codex"
"#;

async fn project(tasks: &str) -> Project {
    project_with(SPRINT_HEAD, tasks).await
}

/// A project whose sprint's check is `check` instead of [`SPRINT_HEAD`]'s.
async fn project_checked(check: &str, tasks: &str) -> Project {
    let head = SPRINT_HEAD.replace(
        "check = \"test ! -e BROKEN\"",
        &format!("check = {}", toml_string(check)),
    );
    project_with(&head, tasks).await
}

fn toml_string(s: &str) -> String {
    format!("'{s}'")
}

async fn project_with(head: &str, tasks: &str) -> Project {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    git(&root, &["init", "--quiet", "--initial-branch=main"]).await;
    std::fs::write(root.join("README"), "project\n").unwrap();
    std::fs::write(root.join("corral-sprint.toml"), format!("{head}\n{tasks}")).unwrap();
    git(&root, &["add", "--all"]).await;
    git(&root, &["commit", "--quiet", "-m", "start"]).await;
    Project { _dir: dir, root }
}

const THREE_TASKS: &str = r#"
[[tasks]]
id = "a"
title = "Task a"
prompt = "Write a.txt."

[[tasks]]
id = "b"
title = "Task b"
prompt = "Write b.txt."

[[tasks]]
id = "c"
title = "Task c"
prompt = "Write c.txt."
"#;

/// The tests' price table: the fakes' model at a dollar per million tokens in and out (the
/// fakes report a cost of their own, which is never replaced; a test that strips it sees this).
fn prices() -> corral_sprint::PriceTable {
    corral_sprint::PriceTable::default().with([(
        "fake-model".to_string(),
        corral_sprint::ModelPrice {
            input: 100.0,
            output: 100.0,
            cache_read: None,
            cache_write: None,
        },
    )])
}

pub(crate) fn now() -> String {
    "2026-12-02T12:00:00.000Z".to_string()
}

async fn run(
    p: &Project,
    generator: &FakeAgent,
    evaluator: Option<&FakeAgent>,
    sink: &Recorder,
    dirty: DirtyTree,
    cancel: CancellationToken,
) -> Result<SprintSummary, SprintError> {
    run_jobs(p, generator, evaluator, sink, dirty, cancel, 1).await
}

async fn run_jobs(
    p: &Project,
    generator: &FakeAgent,
    evaluator: Option<&FakeAgent>,
    sink: &Recorder,
    dirty: DirtyTree,
    cancel: CancellationToken,
    jobs: usize,
) -> Result<SprintSummary, SprintError> {
    let executor = corral_executor_local::LocalExecutor;
    run_through(
        p, generator, evaluator, sink, dirty, cancel, jobs, &executor,
    )
    .await
}

#[allow(clippy::too_many_arguments)]
async fn run_through(
    p: &Project,
    generator: &FakeAgent,
    evaluator: Option<&FakeAgent>,
    sink: &Recorder,
    dirty: DirtyTree,
    cancel: CancellationToken,
    jobs: usize,
    executor: &dyn TaskExecutor,
) -> Result<SprintSummary, SprintError> {
    let evaluator = evaluator.map(|e| e as &dyn RoleAgent);
    run_agents(p, generator, evaluator, sink, dirty, cancel, jobs, executor).await
}

/// [`run_through`] with any agents (a role of several providers, say).
#[allow(clippy::too_many_arguments)]
async fn run_agents(
    p: &Project,
    generator: &dyn RoleAgent,
    evaluator: Option<&dyn RoleAgent>,
    sink: &Recorder,
    dirty: DirtyTree,
    cancel: CancellationToken,
    jobs: usize,
    executor: &dyn TaskExecutor,
) -> Result<SprintSummary, SprintError> {
    let file = corral_sprint::load(&p.root.join("corral-sprint.toml")).unwrap();
    let commands = runner();
    let run = corral_sprint::SprintRun {
        file: &file,
        project_root: &p.root,
        generator,
        evaluator,
        commands: &commands,
        executor,
        events: sink,
        options: RunOptions {
            dirty,
            run_id: "run-1".to_string(),
            now,
            git_env: IDENTITY
                .iter()
                .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
                .collect(),
            jobs,
            prices: prices(),
        },
        cancel,
    };
    run_sprint(run).await
}

async fn run_plain(
    p: &Project,
    generator: &FakeAgent,
    evaluator: Option<&FakeAgent>,
) -> Result<SprintSummary, SprintError> {
    run(
        p,
        generator,
        evaluator,
        &Recorder::default(),
        DirtyTree::Refuse,
        CancellationToken::new(),
    )
    .await
}

fn state(p: &Project) -> SprintState {
    read_state(&layout(p).state_file()).unwrap()
}

fn layout(p: &Project) -> SprintLayout {
    SprintLayout::new(&p.root, &corral_sprint::SprintName::new("s").unwrap())
}

fn task_state(p: &Project, id: &str) -> corral_sprint::TaskState {
    state(p)
        .tasks
        .into_iter()
        .find(|t| t.id.as_str() == id)
        .unwrap()
}

/// The sprint branch's commits after `start`, oldest first: (subject, Corral-Task trailer).
async fn commits(p: &Project) -> Vec<(String, String)> {
    let out = git(
        &p.root,
        &[
            "log",
            "--reverse",
            "--format=%s%x1f%(trailers:key=Corral-Task,valueonly,separator=%x2C)%x1f%(trailers:key=Corral-Run,valueonly,separator=%x2C)%x1e",
            "main..corral/s",
        ],
    )
    .await;
    out.split('\x1e')
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(|l| {
            let mut parts = l.split('\x1f').map(str::trim);
            let subject = parts.next().unwrap().to_string();
            let task = parts.next().unwrap().to_string();
            assert_eq!(parts.next(), Some("run-1"), "every commit names the run");
            (subject, task)
        })
        .collect()
}

async fn status_porcelain(p: &Project) -> String {
    git(&p.root, &["status", "--porcelain"]).await
}

// --- Parallel runs (`--jobs` above 1): tasks in worktrees, folded in run order. ---

async fn run_parallel(
    p: &Project,
    generator: &FakeAgent,
    evaluator: Option<&FakeAgent>,
    sink: &Recorder,
) -> Result<SprintSummary, SprintError> {
    run_jobs(
        p,
        generator,
        evaluator,
        sink,
        DirtyTree::Refuse,
        CancellationToken::new(),
        3,
    )
    .await
}

async fn branch_exists(p: &Project, branch: &str) -> bool {
    let reference = format!("refs/heads/{branch}");
    runner()
        .run(
            CommandSpec::git(
                ["rev-parse", "--verify", "--quiet", reference.as_str()],
                &p.root,
                Duration::from_secs(30),
            ),
            &CancellationToken::new(),
        )
        .await
        .unwrap()
        .success()
}

/// A check that fails once a.txt and b.txt are both there, unless fixed.txt is too: a and b
/// each pass it alone.
const TOGETHER_CHECK: &str =
    "if [ -e a.txt ] && [ -e b.txt ] && [ ! -e fixed.txt ]; then echo a and b clash; exit 1; fi";

/// A check that fails on the sprint's branch once b.txt is there, and passes in a task's
/// worktree (where `.git` is a file): b's round passes every time, its fold never does.
const FAILS_ONLY_ON_THE_BRANCH: &str =
    "if [ -d .git ] && [ -e b.txt ]; then echo b.txt breaks the branch; exit 1; fi";
