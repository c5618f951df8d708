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
mod guard;

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
}

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
fn task_and_round(dir: &Path) -> (String, u32) {
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
}

impl EventSink for Recorder {
    fn event(&self, event: &SprintEvent) {
        self.events.lock().unwrap().push(event.clone());
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

fn now() -> String {
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
    let file = corral_sprint::load(&p.root.join("corral-sprint.toml")).unwrap();
    let commands = runner();
    let run = corral_sprint::SprintRun {
        file: &file,
        project_root: &p.root,
        generator,
        evaluator: evaluator.map(|e| e as &dyn RoleAgent),
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

#[tokio::test]
async fn a_check_passed_on_the_tree_just_committed_is_not_run_again_before_the_next_task() {
    // The check counts its runs in an ignored file. Without an evaluator and gates, nothing
    // writes the tree between a round's passing check and the next task's pre-verify (the
    // commit only), so that pre-verify is the check's answer; a reset (b's regression) or a
    // spawn in between runs it again.
    let head = SPRINT_HEAD.replace(
        "check = \"test ! -e BROKEN\"",
        "check = \"echo run >> .corral/checks.log; test ! -e BROKEN\"",
    );
    let p = project("").await;
    std::fs::write(
        p.root.join("corral-sprint.toml"),
        format!("{head}\n{THREE_TASKS}"),
    )
    .unwrap();
    git(
        &p.root,
        &["commit", "--quiet", "--all", "-m", "the counting check"],
    )
    .await;
    let generator = FakeAgent::new(ProviderId::Claude);
    generator.on(
        "b",
        1,
        Role::Generator,
        write(&[("b.txt", "b\n"), ("BROKEN", "x")]),
    );
    let summary = run_plain(&p, &generator, None).await.unwrap();
    assert_eq!(summary.end, SprintEnd::Done);
    assert_eq!(commits(&p).await.len(), 3);
    let runs = std::fs::read_to_string(p.root.join(".corral/checks.log")).unwrap();
    // a: pre, round 1; b: (pre known), round 1 (regressed), round 2; c: (pre known), round 1.
    assert_eq!(runs.lines().count(), 5, "check runs");
    let pre = |task: &str| {
        std::fs::read_to_string(
            layout(&p)
                .task_dir(&TaskId::new(task).unwrap())
                .join("pre-verify.txt"),
        )
        .unwrap()
    };
    assert!(!pre("a").contains("the task before"), "{}", pre("a"));
    for task in ["b", "c"] {
        assert!(
            pre(task).starts_with("(the check after the task before"),
            "{}",
            pre(task)
        );
    }
    // The regression of b still counts as one: its round 1 broke a check that passed before.
    assert_eq!(task_state(&p, "b").round, 2);

    // With the evaluator, a spawn runs between the check and the commit: checked again.
    let p = project("").await;
    std::fs::write(
        p.root.join("corral-sprint.toml"),
        format!("{head}\n{THREE_TASKS}"),
    )
    .unwrap();
    git(
        &p.root,
        &["commit", "--quiet", "--all", "-m", "the counting check"],
    )
    .await;
    let generator = FakeAgent::new(ProviderId::Claude);
    let evaluator = FakeAgent::new(ProviderId::Codex);
    let summary = run_plain(&p, &generator, Some(&evaluator)).await.unwrap();
    assert_eq!(summary.end, SprintEnd::Done);
    let runs = std::fs::read_to_string(p.root.join(".corral/checks.log")).unwrap();
    assert_eq!(runs.lines().count(), 6, "check runs with an evaluator");
}

#[tokio::test]
async fn three_tasks_pass_first_time_after_a_regression_and_after_a_failed_review() {
    let p = project(THREE_TASKS).await;
    let generator = FakeAgent::new(ProviderId::Claude);
    let evaluator = FakeAgent::new(ProviderId::Codex);
    generator.on(
        "a",
        1,
        Role::Generator,
        Act::Write {
            files: vec![("a.txt", "a\n")],
            remove: Vec::new(),
            signals: complete(Some("Add a.txt"), Some("The check forbids a BROKEN file")),
        },
    );
    // b breaks the check in round 1, and fixes it in round 2.
    generator.on(
        "b",
        1,
        Role::Generator,
        write(&[("b.txt", "b\n"), ("BROKEN", "x")]),
    );
    generator.on("b", 2, Role::Generator, write(&[("b.txt", "b fixed\n")]));
    // c's first round is turned down by the review.
    evaluator.on(
        "c",
        1,
        Role::Evaluator,
        Act::Write {
            files: Vec::new(),
            remove: Vec::new(),
            signals: evaluation(Some("c.txt lacks its final newline in src/c")),
        },
    );
    let summary = run_plain(&p, &generator, Some(&evaluator)).await.unwrap();
    assert_eq!(summary.end, SprintEnd::Done);
    assert_eq!(summary.exit_code, 0);

    assert_eq!(
        commits(&p).await,
        [
            ("Add a.txt".to_string(), "a".to_string()),
            ("Task b".to_string(), "b".to_string()),
            ("Task c".to_string(), "c".to_string()),
        ],
        "one commit per task, the agent's subject or the title, with trailers"
    );
    assert_eq!(status_porcelain(&p).await, "", "everything committed");
    assert!(!p.root.join("BROKEN").exists());
    assert_eq!(git(&p.root, &["show", "corral/s:b.txt"]).await, "b fixed\n");

    let rounds: Vec<(String, u32, Option<Attribution>)> = state(&p)
        .tasks
        .iter()
        .map(|t| (t.id.to_string(), t.round, t.attribution))
        .collect();
    assert_eq!(
        rounds,
        [
            ("a".into(), 1, Some(Attribution::Clean)),
            ("b".into(), 2, Some(Attribution::Clean)),
            ("c".into(), 2, Some(Attribution::Clean)),
        ]
    );

    // b: round 1's change is saved and the tree was reset; round 2 resumes round 1's session
    // with the check's output as its critique, and the full brief as the cold prompt.
    let l = layout(&p);
    let b = TaskId::new("b").unwrap();
    let saved = std::fs::read_to_string(l.round_dir(&b, 1).join("regressed.patch")).unwrap();
    assert!(saved.contains("BROKEN"), "{saved}");
    let b2 = generator.seen_for("b", 2);
    assert_eq!(b2.len(), 1);
    let r = &b2[0].request;
    assert_eq!(
        r.resume.as_ref().map(SessionId::as_str),
        Some("generator-b-1")
    );
    assert!(r.prompt.contains("made the check fail"), "{}", r.prompt);
    assert!(r.prompt.contains("regressed.patch"), "{}", r.prompt);
    assert!(r.cold_prompt.as_deref().unwrap().contains("Write b.txt."));
    assert_eq!(
        task_state(&p, "b").attempt,
        2,
        "the regression used an attempt"
    );

    // c: round 2's prompt carries the review's finding; the generator resumes its own
    // session, never the evaluator's.
    let c2 = generator.seen_for("c", 2);
    assert_eq!(c2.len(), 1);
    let r = &c2[0].request;
    assert!(
        r.prompt.contains("c.txt lacks its final newline in src/c"),
        "{}",
        r.prompt
    );
    assert_eq!(
        r.resume.as_ref().map(SessionId::as_str),
        Some("generator-c-1")
    );
    let c = TaskId::new("c").unwrap();
    let md =
        std::fs::read_to_string(l.spawn_dir(&c, 1, Role::Evaluator).join("evaluation.md")).unwrap();
    assert!(md.contains("c.txt lacks its final newline"), "{md}");

    // The evaluator runs read-only, with the task, the diff and the check's output, in a new
    // session each time.
    for seen in evaluator.seen() {
        assert!(seen.request.read_only);
        assert!(seen.request.resume.is_none());
        assert!(
            seen.request
                .prompt
                .contains(&format!("Write {}.txt.", seen.task))
        );
        assert!(
            seen.request
                .prompt
                .contains(&format!("+++ b/{}.txt", seen.task))
        );
        assert!(seen.request.prompt.contains("test ! -e BROKEN"));
    }
    assert_eq!(evaluator.seen().len(), 4, "a, b, c twice");

    // Learnings are kept and shown to the next tasks.
    let learnings = std::fs::read_to_string(l.learnings_file()).unwrap();
    assert_eq!(learnings.lines().count(), 1);
    assert!(learnings.contains("\"task\":\"a\""));
    let b1 = &generator.seen_for("b", 1)[0].request;
    assert!(
        b1.prompt.contains("The check forbids a BROKEN file"),
        "{}",
        b1.prompt
    );

    // role-meta.json before each spawn.
    let meta: corral_sprint::RoleMeta = serde_json::from_slice(
        &std::fs::read(l.spawn_dir(&c, 2, Role::Evaluator).join("role-meta.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        (meta.role, meta.provider, meta.round),
        (Role::Evaluator, ProviderId::Codex, 2)
    );

    // Usage per role: 5 generator spawns, 4 evaluator spawns of 100 input tokens each.
    assert_eq!(summary.usage.generator.input, Some(500));
    assert_eq!(summary.usage.evaluator.input, Some(400));
    // Rolled up: in total, and per provider (the generator on Claude Code, the evaluator on
    // Codex), for the sprint and for each task, in the summary and in sprint.json alike.
    let all = &summary.roll_up;
    assert_eq!(all.total.input, Some(900));
    assert_eq!(all.by_role, summary.usage);
    assert_eq!(all.by_provider[&ProviderId::Claude].input, Some(500));
    assert_eq!(all.by_provider[&ProviderId::Codex].input, Some(400));
    let per_task: u64 = summary
        .tasks
        .iter()
        .filter_map(|t| t.roll_up.total.input)
        .sum();
    assert_eq!(per_task, 900);
    let state = corral_sprint::read_state(&l.state_file()).unwrap();
    assert_eq!(state.usage(), *summary.roll_up);
}

#[tokio::test]
async fn a_blocked_task_skips_its_dependents_and_the_others_go_on() {
    let p = project(
        r#"
[[tasks]]
id = "a"
title = "Task a"
prompt = "Do a."

[[tasks]]
id = "b"
title = "Task b"
prompt = "Do b."
depends_on = ["a"]

[[tasks]]
id = "c"
title = "Task c"
prompt = "Do c."
"#,
    )
    .await;
    let generator = FakeAgent::new(ProviderId::Claude);
    generator.on(
        "a",
        1,
        Role::Generator,
        Act::Write {
            files: vec![("half-done.txt", "x")],
            remove: Vec::new(),
            signals: blocked("the API it needs does not exist"),
        },
    );
    let summary = run_plain(&p, &generator, None).await.unwrap();
    assert_eq!(summary.end, SprintEnd::Blocked);
    assert_eq!(summary.exit_code, 3);
    let statuses: Vec<(String, TaskStatus)> = summary
        .tasks
        .iter()
        .map(|t| (t.id.to_string(), t.status))
        .collect();
    assert_eq!(
        statuses,
        [
            ("a".into(), TaskStatus::Blocked),
            ("b".into(), TaskStatus::Skipped),
            ("c".into(), TaskStatus::Done),
        ]
    );
    assert!(
        summary.tasks[0]
            .reason
            .as_deref()
            .unwrap()
            .contains("the API it needs does not exist")
    );
    assert!(
        summary.tasks[1]
            .reason
            .as_deref()
            .unwrap()
            .contains("depends on a")
    );
    assert!(
        generator.seen_for("b", 1).is_empty(),
        "a skipped task never runs"
    );
    // a's half-done change is saved, and c started from a clean tree.
    assert!(!p.root.join("half-done.txt").exists());
    let a = TaskId::new("a").unwrap();
    let patch = std::fs::read_to_string(layout(&p).task_dir(&a).join("blocked.patch")).unwrap();
    assert!(patch.contains("half-done.txt"));
    assert_eq!(commits(&p).await, [("Task c".to_string(), "c".to_string())]);
}

#[tokio::test]
async fn a_broken_baseline_is_not_blamed_on_the_agent() {
    let p = project(THREE_TASKS.split("[[tasks]]\nid = \"b\"").next().unwrap()).await;
    std::fs::write(p.root.join("BROKEN"), "already\n").unwrap();
    git(&p.root, &["add", "--all"]).await;
    git(&p.root, &["commit", "--quiet", "-m", "broken"]).await;
    let generator = FakeAgent::new(ProviderId::Claude);
    let evaluator = FakeAgent::new(ProviderId::Codex);
    let summary = run_plain(&p, &generator, Some(&evaluator)).await.unwrap();
    assert_eq!(summary.end, SprintEnd::Done);
    assert_eq!(
        summary.tasks[0].attribution,
        Some(Attribution::BaselineBroken)
    );
    assert_eq!(summary.tasks[0].rounds, 1);
    let prompt = &evaluator.seen()[0].request.prompt;
    assert!(prompt.contains("not blamed"), "{prompt}");
}

#[tokio::test]
async fn a_fixed_baseline_is_credited() {
    let p = project(THREE_TASKS.split("[[tasks]]\nid = \"b\"").next().unwrap()).await;
    std::fs::write(p.root.join("BROKEN"), "already\n").unwrap();
    git(&p.root, &["add", "--all"]).await;
    git(&p.root, &["commit", "--quiet", "-m", "broken"]).await;
    let generator = FakeAgent::new(ProviderId::Claude);
    generator.on(
        "a",
        1,
        Role::Generator,
        Act::Write {
            files: vec![("a.txt", "a")],
            remove: vec!["BROKEN"],
            signals: complete(None, None),
        },
    );
    let summary = run_plain(&p, &generator, None).await.unwrap();
    assert_eq!(
        summary.tasks[0].attribution,
        Some(Attribution::FixedBaseline)
    );
    assert_eq!(summary.end, SprintEnd::Done);
}

#[tokio::test]
async fn regressing_again_after_the_retry_blocks_the_task() {
    let p = project(THREE_TASKS.split("[[tasks]]\nid = \"b\"").next().unwrap()).await;
    let generator = FakeAgent::new(ProviderId::Claude);
    generator.on("a", 1, Role::Generator, write(&[("BROKEN", "1")]));
    generator.on("a", 2, Role::Generator, write(&[("BROKEN", "2")]));
    let summary = run_plain(&p, &generator, None).await.unwrap();
    assert_eq!(summary.end, SprintEnd::Blocked);
    let reason = summary.tasks[0].reason.as_deref().unwrap();
    assert!(reason.contains("attempts (2) are used up"), "{reason}");
    assert!(generator.seen_for("a", 3).is_empty());
    assert!(!p.root.join("BROKEN").exists(), "the tree is reset");
    assert!(commits(&p).await.is_empty());
}

#[tokio::test]
async fn failing_review_every_round_blocks_after_max_rounds() {
    let p = project(THREE_TASKS.split("[[tasks]]\nid = \"b\"").next().unwrap()).await;
    let generator = FakeAgent::new(ProviderId::Claude);
    let evaluator = FakeAgent::new(ProviderId::Codex);
    for round in 1..=3 {
        evaluator.on(
            "a",
            round,
            Role::Evaluator,
            Act::Write {
                files: Vec::new(),
                remove: Vec::new(),
                signals: evaluation(Some("still wrong")),
            },
        );
    }
    let summary = run_plain(&p, &generator, Some(&evaluator)).await.unwrap();
    assert_eq!(summary.end, SprintEnd::Blocked);
    assert_eq!(summary.tasks[0].rounds, 3);
    assert!(
        summary.tasks[0]
            .reason
            .as_deref()
            .unwrap()
            .contains("3 round(s)")
    );
    assert_eq!(generator.seen().len(), 3);
}

/// Runs the sprint until `stop` is seen (by polling), then drops the future: what `kill -9`
/// leaves, as far as the sprint's files go.
async fn run_until_dropped(
    p: &Project,
    generator: &FakeAgent,
    evaluator: Option<&FakeAgent>,
    stop: impl Fn() -> bool,
) {
    let sink = Recorder::default();
    let fut = run(
        p,
        generator,
        evaluator,
        &sink,
        DirtyTree::Refuse,
        CancellationToken::new(),
    );
    tokio::pin!(fut);
    loop {
        tokio::select! {
            r = &mut fut => panic!("the sprint ended before the crash point: {r:?}"),
            () = tokio::time::sleep(Duration::from_millis(20)) => {
                if stop() { return; }
            }
        }
    }
}

#[tokio::test]
async fn a_spawn_that_dies_as_the_run_is_cancelled_is_not_judged_and_its_round_resumes() {
    let p = project(THREE_TASKS).await;
    let generator = FakeAgent::new(ProviderId::Claude);
    generator.on("a", 1, Role::Generator, Act::KilledWithTheRun);
    let cancel = CancellationToken::new();
    let summary = run(
        &p,
        &generator,
        None,
        &Recorder::default(),
        DirtyTree::Refuse,
        cancel,
    )
    .await
    .unwrap();
    assert_eq!(summary.end, SprintEnd::Cancelled);
    let a = task_state(&p, "a");
    assert_eq!(a.status, TaskStatus::Running, "{a:?}");
    assert_eq!(a.round, 1, "the round is not counted as failed: {a:?}");
    assert_eq!(generator.seen().len(), 1, "no second round was started");

    // The next run asks round 1 again, and this time the agent completes it.
    generator.on(
        "a",
        1,
        Role::Generator,
        Act::Write {
            files: Vec::new(),
            remove: Vec::new(),
            signals: complete(None, None),
        },
    );
    let summary = run(
        &p,
        &generator,
        None,
        &Recorder::default(),
        DirtyTree::Refuse,
        CancellationToken::new(),
    )
    .await
    .unwrap();
    assert_eq!(summary.end, SprintEnd::Done);
    assert_eq!(task_state(&p, "a").round, 1);
    assert_eq!(
        generator.seen_for("a", 2).len(),
        0,
        "round 1 resumed, not a round 2"
    );
}

#[tokio::test]
async fn killed_during_a_generator_round_it_resumes_the_same_session_and_round() {
    let p = project(THREE_TASKS.split("[[tasks]]\nid = \"b\"").next().unwrap()).await;
    let generator = FakeAgent::new(ProviderId::Claude);
    let evaluator = FakeAgent::new(ProviderId::Codex);
    generator.on(
        "a",
        1,
        Role::Generator,
        Act::WriteAndHang {
            files: vec![("a.txt", "half\n")],
            signals: None,
        },
    );
    run_until_dropped(&p, &generator, Some(&evaluator), || {
        !generator.seen().is_empty()
    })
    .await;
    assert_eq!(task_state(&p, "a").status, TaskStatus::Running);

    // Running again: the tree is dirty with the task's own change (no refusal), the same
    // round continues in the same session with the crash-resume prompt.
    let again = FakeAgent::new(ProviderId::Claude);
    let summary = run_plain(&p, &again, Some(&evaluator)).await.unwrap();
    assert_eq!(summary.end, SprintEnd::Done);
    let seen = again.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].round, 1, "no round counted twice");
    let r = &seen[0].request;
    assert_eq!(
        r.resume.as_ref().map(SessionId::as_str),
        Some("generator-a-1")
    );
    assert!(r.prompt.contains("Corral was stopped"), "{}", r.prompt);
    assert!(r.cold_prompt.as_deref().unwrap().contains("Write a.txt."));
    assert_eq!(summary.tasks[0].rounds, 1);
    assert_eq!(commits(&p).await.len(), 1);
}

#[tokio::test]
async fn a_crash_resume_with_another_model_starts_cold_with_the_brief() {
    let p = project(THREE_TASKS.split("[[tasks]]\nid = \"b\"").next().unwrap()).await;
    let generator = FakeAgent::new(ProviderId::Claude);
    generator.on(
        "a",
        1,
        Role::Generator,
        Act::WriteAndHang {
            files: vec![("a.txt", "half\n")],
            signals: None,
        },
    );
    run_until_dropped(&p, &generator, None, || !generator.seen().is_empty()).await;
    let mut other = FakeAgent::new(ProviderId::Claude);
    Arc::get_mut(&mut other).unwrap().model = Some("another-model".to_string());
    let summary = run_plain(&p, &other, None).await.unwrap();
    assert_eq!(summary.end, SprintEnd::Done);
    let r = &other.seen()[0].request;
    assert!(r.resume.is_none());
    assert!(r.prompt.contains("Write a.txt."));
}

#[tokio::test]
async fn killed_during_the_review_a_validated_round_is_not_run_again() {
    let p = project(THREE_TASKS.split("[[tasks]]\nid = \"b\"").next().unwrap()).await;
    let generator = FakeAgent::new(ProviderId::Claude);
    let evaluator = FakeAgent::new(ProviderId::Codex);
    evaluator.on(
        "a",
        1,
        Role::Evaluator,
        Act::WriteAndHang {
            files: Vec::new(),
            signals: Some(evaluation(None)),
        },
    );
    run_until_dropped(&p, &generator, Some(&evaluator), || {
        !evaluator.seen().is_empty()
    })
    .await;
    let generator2 = FakeAgent::new(ProviderId::Claude);
    let evaluator2 = FakeAgent::new(ProviderId::Codex);
    let summary = run_plain(&p, &generator2, Some(&evaluator2)).await.unwrap();
    assert_eq!(summary.end, SprintEnd::Done);
    assert!(
        generator2.seen().is_empty(),
        "the generator's valid round is kept"
    );
    assert!(
        evaluator2.seen().is_empty(),
        "the evaluation written before the kill counts"
    );
    assert_eq!(commits(&p).await.len(), 1);
}

#[tokio::test]
async fn a_stop_at_any_recorded_step_then_a_rerun_commits_each_task_once() {
    // Every state the sprint wrote, one at a time, stands for a kill right after it was
    // written; the run after it must end the same, without a second commit. The git side is
    // rebuilt for each from the recorded HEAD and tree.
    let p = project(THREE_TASKS).await;
    let generator = FakeAgent::new(ProviderId::Claude);
    let evaluator = FakeAgent::new(ProviderId::Codex);
    evaluator.on(
        "b",
        1,
        Role::Evaluator,
        Act::Write {
            files: Vec::new(),
            remove: Vec::new(),
            signals: evaluation(Some("missing docs")),
        },
    );
    let sink = Recorder::default();
    *sink.state_file.lock().unwrap() = Some(layout(&p).state_file());
    run(
        &p,
        &generator,
        Some(&evaluator),
        &sink,
        DirtyTree::Refuse,
        CancellationToken::new(),
    )
    .await
    .unwrap();
    let final_commits = commits(&p).await;
    assert_eq!(final_commits.len(), 3);
    // A kill after the commit and before the state said so: the state says "commit" still.
    let states = sink.states.lock().unwrap().clone();
    let at_commit: Vec<&Vec<u8>> = states
        .iter()
        .filter(|(e, _)| matches!(e, SprintEvent::Evaluated { passed: true, .. }))
        .map(|(_, s)| s)
        .collect();
    assert_eq!(at_commit.len(), 3);
    for saved in at_commit {
        std::fs::write(layout(&p).state_file(), saved).unwrap();
        let g = FakeAgent::new(ProviderId::Claude);
        let e = FakeAgent::new(ProviderId::Codex);
        let summary = run_plain(&p, &g, Some(&e)).await.unwrap();
        assert_eq!(summary.end, SprintEnd::Done);
        assert_eq!(commits(&p).await, final_commits, "no commit made twice");
    }
}

#[tokio::test]
async fn rate_limits_used_up_pause_with_exit_4_and_a_rerun_finishes() {
    let p = project(THREE_TASKS).await;
    let generator = FakeAgent::new(ProviderId::Claude);
    generator.on("b", 1, Role::Generator, Act::RateLimited);
    let summary = run_plain(&p, &generator, None).await.unwrap();
    assert_eq!(summary.end, SprintEnd::RateLimited);
    assert_eq!(summary.exit_code, 4);
    assert_eq!(task_state(&p, "a").status, TaskStatus::Done);
    assert_eq!(task_state(&p, "b").status, TaskStatus::Running);
    assert_eq!(task_state(&p, "c").status, TaskStatus::Pending);

    let again = FakeAgent::new(ProviderId::Claude);
    let summary = run_plain(&p, &again, None).await.unwrap();
    assert_eq!(summary.end, SprintEnd::Done);
    assert_eq!(
        task_state(&p, "b").round,
        1,
        "the paused round is not counted twice"
    );
    assert_eq!(
        again
            .seen()
            .iter()
            .map(|s| s.task.as_str())
            .collect::<Vec<_>>(),
        ["b", "c"]
    );
    assert_eq!(commits(&p).await.len(), 3);
}

#[tokio::test]
async fn cancelling_stops_with_130_and_a_rerun_continues() {
    let p = project(THREE_TASKS).await;
    let generator = FakeAgent::new(ProviderId::Claude);
    let cancel = CancellationToken::new();
    cancel.cancel();
    let summary = run(
        &p,
        &generator,
        None,
        &Recorder::default(),
        DirtyTree::Refuse,
        cancel,
    )
    .await
    .unwrap();
    assert_eq!(summary.end, SprintEnd::Cancelled);
    assert_eq!(summary.exit_code, 130);
    let summary = run_plain(&p, &generator, None).await.unwrap();
    assert_eq!(summary.end, SprintEnd::Done);
}

#[tokio::test]
async fn an_agent_switching_branch_is_named_and_its_task_blocked() {
    let p = project(THREE_TASKS.split("[[tasks]]\nid = \"c\"").next().unwrap()).await;
    let generator = FakeAgent::new(ProviderId::Claude);
    generator.on("a", 1, Role::Generator, Act::SwitchBranch("elsewhere"));
    let summary = run_plain(&p, &generator, None).await.unwrap();
    assert_eq!(summary.end, SprintEnd::Blocked);
    let a = &summary.tasks[0];
    assert_eq!(a.status, TaskStatus::Blocked);
    let reason = a.reason.as_deref().unwrap();
    assert!(
        reason.contains("switched from corral/s to branch elsewhere"),
        "{reason}"
    );
    assert_eq!(a.warnings.len(), 1);
    assert_eq!(
        git(&p.root, &["symbolic-ref", "--short", "HEAD"])
            .await
            .trim(),
        "corral/s",
        "the sprint's branch is checked out again"
    );
    assert_eq!(
        summary.tasks[1].status,
        TaskStatus::Done,
        "b does not depend on a"
    );
    assert_eq!(commits(&p).await, [("Task b".to_string(), "b".to_string())]);
}

#[tokio::test]
async fn an_agent_committing_itself_is_named_and_one_commit_made() {
    let p = project(THREE_TASKS.split("[[tasks]]\nid = \"b\"").next().unwrap()).await;
    let generator = FakeAgent::new(ProviderId::Claude);
    generator.on(
        "a",
        1,
        Role::Generator,
        Act::CommitsItself("agent's own commit"),
    );
    let summary = run_plain(&p, &generator, None).await.unwrap();
    assert_eq!(summary.end, SprintEnd::Done);
    assert!(summary.tasks[0].warnings[0].contains("committed on its own"));
    assert_eq!(
        commits(&p).await,
        [("Add the file".to_string(), "a".to_string())]
    );
}

#[tokio::test]
async fn a_write_outside_the_work_tree_is_named_in_the_status_and_does_not_block() {
    let p = project(THREE_TASKS.split("[[tasks]]\nid = \"b\"").next().unwrap()).await;
    let generator = FakeAgent::new(ProviderId::Claude);
    generator.on(
        "a",
        1,
        Role::Generator,
        Act::WritesOutside("added /home/user/.bashrc"),
    );
    let summary = run_plain(&p, &generator, None).await.unwrap();
    assert_eq!(summary.end, SprintEnd::Done, "named, not blocking");
    assert_eq!(
        summary.tasks[0].warnings,
        [
            "round 1: the generator wrote outside the paths it may write: added /home/user/.bashrc"
                .to_string()
        ]
    );
    // The same in sprint.json, which `corral sprint status` prints.
    assert_eq!(task_state(&p, "a").warnings, summary.tasks[0].warnings);
    assert_eq!(commits(&p).await, [("Task a".to_string(), "a".to_string())]);
}

#[tokio::test]
async fn a_dirty_tree_is_refused_with_its_paths_unless_kept_or_stashed() {
    let p = project(THREE_TASKS.split("[[tasks]]\nid = \"b\"").next().unwrap()).await;
    std::fs::write(p.root.join("README"), "edited\n").unwrap();
    std::fs::write(p.root.join("notes.txt"), "mine\n").unwrap();
    let generator = FakeAgent::new(ProviderId::Claude);
    let err = run_plain(&p, &generator, None).await.unwrap_err();
    assert_eq!(err.exit_code(), 2);
    let SprintError::Dirty { paths } = &err else {
        panic!("{err}")
    };
    assert_eq!(paths, &["README".to_string(), "notes.txt".to_string()]);
    assert!(err.to_string().contains("--stash"));
    assert!(generator.seen().is_empty());

    let summary = run(
        &p,
        &generator,
        None,
        &Recorder::default(),
        DirtyTree::Stash,
        CancellationToken::new(),
    )
    .await
    .unwrap();
    assert_eq!(summary.end, SprintEnd::Done);
    assert_eq!(
        std::fs::read_to_string(p.root.join("README")).unwrap(),
        "project\n"
    );
    assert!(
        git(&p.root, &["stash", "list"])
            .await
            .contains("corral sprint s")
    );
}

#[tokio::test]
async fn setup_runs_once_and_a_failing_setup_refuses() {
    let p = project(THREE_TASKS.split("[[tasks]]\nid = \"b\"").next().unwrap()).await;
    let file = p.root.join("corral-sprint.toml");
    let text = std::fs::read_to_string(&file).unwrap().replace(
        "max_rounds = 3",
        "max_rounds = 3\nsetup = \"echo ran >> .corral/setup-count\"",
    );
    std::fs::write(&file, text).unwrap();
    git(&p.root, &["commit", "--quiet", "-am", "setup"]).await;
    let generator = FakeAgent::new(ProviderId::Claude);
    generator.on("a", 1, Role::Generator, Act::RateLimited);
    run_plain(&p, &generator, None).await.unwrap();
    let again = FakeAgent::new(ProviderId::Claude);
    run_plain(&p, &again, None).await.unwrap();
    assert_eq!(
        std::fs::read_to_string(p.root.join(".corral/setup-count")).unwrap(),
        "ran\n"
    );

    let q = project(THREE_TASKS.split("[[tasks]]\nid = \"b\"").next().unwrap()).await;
    let file = q.root.join("corral-sprint.toml");
    let text = std::fs::read_to_string(&file).unwrap().replace(
        "max_rounds = 3",
        "max_rounds = 3\nsetup = \"echo no >&2; exit 3\"",
    );
    std::fs::write(&file, text).unwrap();
    git(&q.root, &["commit", "--quiet", "-am", "setup"]).await;
    let err = run_plain(&q, &generator, None).await.unwrap_err();
    assert_eq!(err.exit_code(), 2);
    assert!(err.to_string().contains("exit 3"), "{err}");
}

#[tokio::test]
async fn a_provider_without_resume_starts_each_round_cold_with_the_brief_and_critique() {
    let p = project(THREE_TASKS.split("[[tasks]]\nid = \"b\"").next().unwrap()).await;
    let mut generator = FakeAgent::new(ProviderId::Grok);
    Arc::get_mut(&mut generator).unwrap().resumes = false;
    let evaluator = FakeAgent::new(ProviderId::Codex);
    evaluator.on(
        "a",
        1,
        Role::Evaluator,
        Act::Write {
            files: Vec::new(),
            remove: Vec::new(),
            signals: evaluation(Some("the file is empty-ish")),
        },
    );
    let summary = run_plain(&p, &generator, Some(&evaluator)).await.unwrap();
    assert_eq!(summary.end, SprintEnd::Done);
    let r = &generator.seen_for("a", 2)[0].request;
    assert!(r.resume.is_none());
    assert!(r.prompt.contains("Write a.txt."), "{}", r.prompt);
    assert!(r.prompt.contains("the file is empty-ish"), "{}", r.prompt);
}

#[tokio::test]
async fn leftovers_of_an_earlier_sprint_of_the_same_name_are_not_taken_for_done_rounds() {
    let p = project(THREE_TASKS.split("[[tasks]]\nid = \"b\"").next().unwrap()).await;
    let generator = FakeAgent::new(ProviderId::Claude);
    run_plain(&p, &generator, None).await.unwrap();
    // The user starts over: the state goes, the round directories stay; the tree goes back.
    std::fs::remove_file(layout(&p).state_file()).unwrap();
    git(&p.root, &["checkout", "--quiet", "main"]).await;
    git(&p.root, &["branch", "--quiet", "-D", "corral/s"]).await;
    let again = FakeAgent::new(ProviderId::Claude);
    let summary = run_plain(&p, &again, None).await.unwrap();
    assert_eq!(summary.end, SprintEnd::Done);
    assert_eq!(again.seen().len(), 1, "round 1 runs again");
    assert_eq!(commits(&p).await.len(), 1);
}

#[tokio::test]
async fn a_kill_between_a_regression_and_its_reset_resets_on_the_next_run() {
    let p = project(THREE_TASKS.split("[[tasks]]\nid = \"b\"").next().unwrap()).await;
    let generator = FakeAgent::new(ProviderId::Claude);
    generator.on("a", 1, Role::Generator, write(&[("BROKEN", "1")]));
    let sink = Recorder::default();
    *sink.state_file.lock().unwrap() = Some(layout(&p).state_file());
    run(
        &p,
        &generator,
        None,
        &sink,
        DirtyTree::Refuse,
        CancellationToken::new(),
    )
    .await
    .unwrap();
    // The state written just before the reset (the one with reset pending): put it back, and
    // the broken file with it, as a kill at that moment leaves them.
    let states = sink.states.lock().unwrap().clone();
    let pending = states
        .iter()
        .map(|(_, bytes)| bytes)
        .find(|bytes| String::from_utf8_lossy(bytes).contains("\"resetPending\": true"))
        .expect("a state with the reset pending")
        .clone();
    let after: Vec<String> = commits(&p).await.into_iter().map(|(s, _)| s).collect();
    git(&p.root, &["reset", "--quiet", "--hard", "HEAD~1"]).await;
    std::fs::write(p.root.join("BROKEN"), "1").unwrap();
    std::fs::write(layout(&p).state_file(), pending).unwrap();
    let again = FakeAgent::new(ProviderId::Claude);
    let summary = run_plain(&p, &again, None).await.unwrap();
    assert_eq!(summary.end, SprintEnd::Done);
    assert!(!p.root.join("BROKEN").exists());
    assert_eq!(summary.tasks[0].rounds, 2);
    let now: Vec<String> = commits(&p).await.into_iter().map(|(s, _)| s).collect();
    assert_eq!(now, after);
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

#[tokio::test]
async fn three_independent_tasks_run_at_once_in_worktrees_and_fold_in_file_order() {
    let p = project(THREE_TASKS).await;
    let generator = FakeAgent::new(ProviderId::Claude);
    let evaluator = FakeAgent::new(ProviderId::Codex);
    generator.on(
        "b",
        1,
        Role::Generator,
        Act::Write {
            files: vec![("b.txt", "b\n")],
            remove: Vec::new(),
            signals: complete(None, Some("b learned this")),
        },
    );
    let sink = Recorder::default();
    let summary = run_parallel(&p, &generator, Some(&evaluator), &sink)
        .await
        .unwrap();
    assert_eq!(summary.end, SprintEnd::Done);
    assert_eq!(
        commits(&p).await,
        vec![
            ("Task a".to_string(), "a".to_string()),
            ("Task b".to_string(), "b".to_string()),
            ("Task c".to_string(), "c".to_string()),
        ],
        "one commit per task on the sprint branch, in file order"
    );
    let events = sink.events.lock().unwrap().clone();
    let waves: Vec<Vec<String>> = events
        .iter()
        .filter_map(|e| match e {
            SprintEvent::WaveStarted { tasks, jobs, ahead } => {
                assert!(ahead.is_empty(), "{ahead:?}");
                assert_eq!(*jobs, 3);
                Some(tasks.iter().map(|t| t.as_str().to_string()).collect())
            }
            _ => None,
        })
        .collect();
    assert_eq!(waves, vec![vec!["a", "b", "c"]], "the three ran at once");
    // Each worked in its own worktree, not in the project's tree.
    for seen in generator.seen() {
        let tree = &seen.request.work_tree;
        assert_eq!(
            tree,
            &layout(&p).root().join("worktrees").join(&seen.task),
            "{seen:?}"
        );
    }
    let folds = events
        .iter()
        .filter(|e| matches!(e, SprintEvent::Folded { .. }))
        .count();
    assert_eq!(folds, 3);
    for id in ["a", "b", "c"] {
        let t = task_state(&p, id);
        assert_eq!(t.status, TaskStatus::Done);
        assert!(t.task_branch.is_none(), "{id} is folded");
        assert!(branch_exists(&p, &format!("corral/s.tasks/{id}")).await);
        assert!(
            p.root.join(format!("{id}.txt")).exists(),
            "{id}'s file is on the branch"
        );
        assert!(!layout(&p).worktree_dir(&TaskId::new(id).unwrap()).exists());
    }
    // The learnings are the coordinator's to write: once, at the fold.
    let learnings = std::fs::read_to_string(layout(&p).learnings_file()).unwrap();
    assert_eq!(learnings.lines().count(), 1, "{learnings}");
    assert!(learnings.contains("b learned this"));
    assert_eq!(status_porcelain(&p).await, "");
}

#[tokio::test]
async fn two_parallel_tasks_editing_the_same_lines_send_the_second_home_for_one_round() {
    let p = project(THREE_TASKS.split("[[tasks]]\nid = \"c\"").next().unwrap()).await;
    let generator = FakeAgent::new(ProviderId::Claude);
    generator.on("a", 1, Role::Generator, write(&[("README", "a's words\n")]));
    generator.on("b", 1, Role::Generator, write(&[("README", "b's words\n")]));
    generator.on(
        "b",
        2,
        Role::Generator,
        write(&[("README", "a's words\nb's words\n")]),
    );
    let sink = Recorder::default();
    let summary = run_parallel(&p, &generator, None, &sink).await.unwrap();
    assert_eq!(summary.end, SprintEnd::Done);
    assert_eq!(
        commits(&p).await,
        vec![
            ("Task a".to_string(), "a".to_string()),
            ("Task b".to_string(), "b".to_string()),
        ],
        "each task once, b's made again at the branch's tip"
    );
    assert_eq!(
        std::fs::read_to_string(p.root.join("README")).unwrap(),
        "a's words\nb's words\n"
    );
    let events = sink.events.lock().unwrap().clone();
    let home: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            SprintEvent::SentHome { task, round, why } => {
                Some((task.as_str().to_string(), *round, why.clone()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(home.len(), 1, "{home:?}");
    assert_eq!((home[0].0.as_str(), home[0].1), ("b", 2));
    assert!(home[0].2.contains("conflicts in README"), "{home:?}");
    // The round sent home resumes b's session, told what conflicted, on a tree at the tip.
    let round2 = generator.seen_for("b", 2);
    assert_eq!(round2.len(), 1);
    let request = &round2[0].request;
    assert_eq!(
        request.resume.as_ref().map(|s| s.to_string()),
        Some("generator-b-1".to_string()),
        "the session of b's first round"
    );
    assert!(
        request.prompt.contains("conflicts in README"),
        "{}",
        request.prompt
    );
    assert!(
        request.prompt.contains("sent-home.patch"),
        "{}",
        request.prompt
    );
    let b = task_state(&p, "b");
    assert_eq!((b.status, b.round, b.sent_home), (TaskStatus::Done, 2, 1));
    assert!(
        layout(&p)
            .task_dir(&TaskId::new("b").unwrap())
            .join("sent-home.patch")
            .exists()
    );
    assert_eq!(status_porcelain(&p).await, "", "no half cherry-pick left");
}

#[tokio::test]
async fn two_tasks_making_the_same_change_fold_the_second_as_already_on_the_branch() {
    let p = project(THREE_TASKS.split("[[tasks]]\nid = \"c\"").next().unwrap()).await;
    let generator = FakeAgent::new(ProviderId::Claude);
    generator.on("a", 1, Role::Generator, write(&[("README", "the same\n")]));
    generator.on("b", 1, Role::Generator, write(&[("README", "the same\n")]));
    let sink = Recorder::default();
    let summary = run_parallel(&p, &generator, None, &sink).await.unwrap();
    assert_eq!(summary.end, SprintEnd::Done);
    assert_eq!(
        commits(&p).await,
        vec![("Task a".to_string(), "a".to_string())],
        "no second, empty commit"
    );
    let (a, b) = (task_state(&p, "a"), task_state(&p, "b"));
    assert_eq!(b.status, TaskStatus::Done);
    assert_eq!(b.reason, None);
    assert_eq!(b.commit, a.commit, "b's change is a's commit");
    assert!(b.task_branch.is_none());
    let events = sink.events.lock().unwrap().clone();
    assert!(events.iter().any(|e| matches!(
        e,
        SprintEvent::Folded { task, how, .. } if task.as_str() == "b" && how == "already on the branch"
    )), "{events:?}");
    assert!(generator.seen_for("b", 2).is_empty(), "not sent home");
    assert_eq!(status_porcelain(&p).await, "");
}

/// A check that fails once a.txt and b.txt are both there, unless fixed.txt is too: a and b
/// each pass it alone.
const TOGETHER_CHECK: &str =
    "if [ -e a.txt ] && [ -e b.txt ] && [ ! -e fixed.txt ]; then echo a and b clash; exit 1; fi";

#[tokio::test]
async fn two_tasks_that_break_the_check_together_reopen_the_second_at_the_tip() {
    let p = project_checked(
        TOGETHER_CHECK,
        THREE_TASKS.split("[[tasks]]\nid = \"c\"").next().unwrap(),
    )
    .await;
    let generator = FakeAgent::new(ProviderId::Claude);
    generator.on(
        "b",
        2,
        Role::Generator,
        write(&[("b.txt", "done\n"), ("fixed.txt", "fixed\n")]),
    );
    let sink = Recorder::default();
    *sink.state_file.lock().unwrap() = Some(layout(&p).state_file());
    let summary = run_parallel(&p, &generator, None, &sink).await.unwrap();
    assert_eq!(summary.end, SprintEnd::Done);
    assert_eq!(
        commits(&p).await,
        vec![
            ("Task a".to_string(), "a".to_string()),
            ("Task b".to_string(), "b".to_string()),
        ],
        "each task once: b's broken fold is not on the branch"
    );
    assert!(
        p.root.join("fixed.txt").exists(),
        "b's second round is the one folded"
    );
    let check = runner()
        .run(
            CommandSpec::shell(TOGETHER_CHECK, &p.root, Duration::from_secs(30)),
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    assert!(
        check.success(),
        "the folded check passes on the sprint branch"
    );
    let events = sink.events.lock().unwrap().clone();
    let checks: Vec<(String, bool)> = events
        .iter()
        .filter_map(|e| match e {
            SprintEvent::FoldChecked { task, passed, .. } => {
                Some((task.as_str().to_string(), *passed))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        checks,
        vec![
            ("a".to_string(), true),
            ("b".to_string(), false),
            ("b".to_string(), true)
        ]
    );
    let reopened = events.iter().find_map(|e| match e {
        SprintEvent::SentHome { task, round, why } if task.as_str() == "b" => {
            Some((*round, why.clone()))
        }
        _ => None,
    });
    let (round, why) = reopened.expect("b sent home");
    assert_eq!(round, 2);
    assert!(why.contains("check failed"), "{why}");
    // Its round at the tip is told what broke, and sees a's change.
    let seen = generator.seen_for("b", 2);
    assert_eq!(seen.len(), 1);
    assert!(
        seen[0].request.prompt.contains("a and b clash"),
        "{}",
        seen[0].request.prompt
    );
    let b = task_state(&p, "b");
    assert_eq!((b.status, b.round, b.sent_home), (TaskStatus::Done, 2, 1));
    assert!(b.fold_onto.is_none());
    assert!(
        state(&p).tasks.iter().all(|t| t.task_branch.is_none()),
        "both folded"
    );
    // The state written when b was sent home names the fold as the cause.
    let states = sink.states.lock().unwrap().clone();
    let at_home = states
        .iter()
        .find(|(e, _)| matches!(e, SprintEvent::SentHome { .. }))
        .map(|(_, bytes)| serde_json::from_slice::<SprintState>(bytes).unwrap())
        .unwrap();
    let b_then = at_home.tasks.iter().find(|t| t.id.as_str() == "b").unwrap();
    assert_eq!(b_then.attribution, Some(Attribution::BrokeOnFold));
    assert_eq!(b_then.status, TaskStatus::Running);
    assert_eq!(status_porcelain(&p).await, "");
}

#[tokio::test]
async fn tasks_whose_touches_overlap_run_one_after_the_other_and_the_hold_is_told() {
    let tasks = THREE_TASKS
        .replace(
            "prompt = \"Write a.txt.\"",
            "prompt = \"Write a.txt.\"\ntouches = [\"README\"]",
        )
        .replace(
            "prompt = \"Write b.txt.\"",
            "prompt = \"Write b.txt.\"\ntouches = [\"./README\", \"b/\"]",
        );
    let p = project(&tasks).await;
    let generator = FakeAgent::new(ProviderId::Claude);
    generator.on("a", 1, Role::Generator, write(&[("README", "a's words\n")]));
    generator.on(
        "b",
        1,
        Role::Generator,
        write(&[("README", "a's words\nb's words\n")]),
    );
    let sink = Recorder::default();
    let summary = run_parallel(&p, &generator, None, &sink).await.unwrap();
    assert_eq!(summary.end, SprintEnd::Done);
    let events = sink.events.lock().unwrap().clone();
    let waves: Vec<Vec<String>> = events
        .iter()
        .filter_map(|e| match e {
            SprintEvent::WaveStarted { tasks, .. } => {
                Some(tasks.iter().map(|t| t.as_str().to_string()).collect())
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        waves,
        vec![vec!["a", "c"], vec!["b"]],
        "b waits for a; c runs beside a"
    );
    let holds: Vec<String> = events
        .iter()
        .filter_map(|e| match e {
            SprintEvent::Held {
                task,
                behind,
                overlap,
            } => Some(format!("{task} {behind} {overlap}")),
            _ => None,
        })
        .collect();
    assert_eq!(holds, ["b a `README` and `README`"], "told once");
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, SprintEvent::SentHome { .. })),
        "no conflict: b started on a's fold"
    );
    assert_eq!(
        std::fs::read_to_string(p.root.join("README")).unwrap(),
        "a's words\nb's words\n"
    );
}

/// A runner that stops running anything once `frozen` is set: every command after it waits
/// forever, so that dropping the run then is a `kill -9` right after what set it.
struct Freezing {
    inner: HostCommandRunner,
    frozen: Arc<std::sync::atomic::AtomicBool>,
    /// Freezes too before the first command whose arguments hold this one.
    before: Option<&'static str>,
}

#[async_trait]
impl CommandRunner for Freezing {
    async fn run(
        &self,
        spec: CommandSpec,
        cancel: &CancellationToken,
    ) -> Result<corral_ports::CommandOutput, corral_ports::CommandError> {
        if self
            .before
            .is_some_and(|arg| spec.args.iter().any(|a| a == arg))
        {
            self.frozen.store(true, std::sync::atomic::Ordering::SeqCst);
        }
        if self.frozen.load(std::sync::atomic::Ordering::SeqCst) {
            std::future::pending::<()>().await;
        }
        self.inner.run(spec, cancel).await
    }
}

/// Counts the events and freezes the runner at the `at`-th (0-based); records them all.
struct FreezeAt {
    at: usize,
    seen: Mutex<Vec<SprintEvent>>,
    frozen: Arc<std::sync::atomic::AtomicBool>,
}

impl EventSink for FreezeAt {
    fn event(&self, event: &SprintEvent) {
        let mut seen = self.seen.lock().unwrap();
        if seen.len() == self.at {
            self.frozen.store(true, std::sync::atomic::Ordering::SeqCst);
        }
        seen.push(event.clone());
    }
}

/// The together-check sprint (a and b pass alone, break the check together; b's second round
/// fixes it), run with `--jobs 2` until its `at`-th event, then dropped; the events seen.
async fn together_until(p: &Project, at: usize) -> (Vec<SprintEvent>, bool) {
    let generator = FakeAgent::new(ProviderId::Claude);
    generator.on(
        "b",
        2,
        Role::Generator,
        write(&[("b.txt", "done\n"), ("fixed.txt", "fixed\n")]),
    );
    run_frozen(p, &generator, at, None).await
}

/// Runs `p`'s sprint with `--jobs 2` until its `at`-th event or the first command with the
/// argument `before`, then drops it; the events seen, and whether it ended first.
async fn run_frozen(
    p: &Project,
    generator: &FakeAgent,
    at: usize,
    before: Option<&'static str>,
) -> (Vec<SprintEvent>, bool) {
    let frozen = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sink = FreezeAt {
        at,
        seen: Mutex::new(Vec::new()),
        frozen: frozen.clone(),
    };
    let commands = Freezing {
        inner: runner(),
        frozen: frozen.clone(),
        before,
    };
    let file = corral_sprint::load(&p.root.join("corral-sprint.toml")).unwrap();
    let executor = corral_executor_local::LocalExecutor;
    let run = corral_sprint::SprintRun {
        file: &file,
        project_root: &p.root,
        generator,
        evaluator: None,
        commands: &commands,
        executor: &executor,
        events: &sink,
        options: RunOptions {
            dirty: DirtyTree::Refuse,
            run_id: "run-1".to_string(),
            now,
            git_env: IDENTITY
                .iter()
                .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
                .collect(),
            jobs: 2,
        },
        cancel: CancellationToken::new(),
    };
    let fut = run_sprint(run);
    tokio::pin!(fut);
    let mut ended = false;
    loop {
        tokio::select! {
            r = &mut fut => { r.unwrap(); ended = true; break; }
            () = tokio::time::sleep(Duration::from_millis(50)) => {
                if frozen.load(std::sync::atomic::Ordering::SeqCst) { break; }
            }
        }
    }
    let seen = sink.seen.lock().unwrap().clone();
    (seen, ended)
}

#[tokio::test]
async fn a_kill_at_any_point_of_a_fold_its_check_or_a_reopen_then_a_rerun_commits_each_task_once() {
    let tasks = THREE_TASKS.split("[[tasks]]\nid = \"c\"").next().unwrap();
    // The whole run once, to count its events; then a kill after each from the first fold on.
    let whole = project_checked(TOGETHER_CHECK, tasks).await;
    let (events, ended) = together_until(&whole, usize::MAX).await;
    assert!(ended);
    let first_fold = events
        .iter()
        .position(|e| matches!(e, SprintEvent::Folded { .. }))
        .unwrap();
    assert!(
        events
            .iter()
            .any(|e| matches!(e, SprintEvent::SentHome { .. })),
        "{events:?}"
    );
    for at in first_fold..events.len() {
        let p = project_checked(TOGETHER_CHECK, tasks).await;
        let (_, ended) = together_until(&p, at).await;
        let (_, again) = together_until(&p, usize::MAX).await;
        assert!(again || ended, "stop at event {at}: the rerun ends");
        let state = state(&p);
        assert!(
            state.tasks.iter().all(|t| t.status == TaskStatus::Done
                && t.task_branch.is_none()
                && t.fold_onto.is_none()),
            "stop at event {at}: {state:?}"
        );
        assert_eq!(
            commits(&p).await,
            vec![
                ("Task a".to_string(), "a".to_string()),
                ("Task b".to_string(), "b".to_string()),
            ],
            "stop at event {at}: each task committed once"
        );
        let check = runner()
            .run(
                CommandSpec::shell(TOGETHER_CHECK, &p.root, Duration::from_secs(30)),
                &CancellationToken::new(),
            )
            .await
            .unwrap();
        assert!(
            check.success(),
            "stop at event {at}: the folded check passes"
        );
        assert_eq!(status_porcelain(&p).await, "", "stop at event {at}");
    }
}

#[tokio::test]
async fn a_kill_between_a_conflicting_pick_and_its_abort_is_settled_on_the_rerun() {
    let p = project(THREE_TASKS.split("[[tasks]]\nid = \"c\"").next().unwrap()).await;
    let script = || {
        let generator = FakeAgent::new(ProviderId::Claude);
        generator.on("a", 1, Role::Generator, write(&[("README", "a's words\n")]));
        generator.on("b", 1, Role::Generator, write(&[("README", "b's words\n")]));
        generator.on(
            "b",
            2,
            Role::Generator,
            write(&[("README", "a's words\nb's words\n")]),
        );
        generator
    };
    let (_, ended) = run_frozen(&p, &script(), usize::MAX, Some("--abort")).await;
    assert!(!ended);
    assert!(
        p.root.join(".git/CHERRY_PICK_HEAD").exists(),
        "the kill left the pick half made"
    );
    let (_, ended) = run_frozen(&p, &script(), usize::MAX, None).await;
    assert!(ended);
    assert!(state(&p).tasks.iter().all(|t| t.status == TaskStatus::Done));
    assert_eq!(
        commits(&p).await,
        vec![
            ("Task a".to_string(), "a".to_string()),
            ("Task b".to_string(), "b".to_string()),
        ]
    );
    assert_eq!(
        std::fs::read_to_string(p.root.join("README")).unwrap(),
        "a's words\nb's words\n"
    );
    assert_eq!(status_porcelain(&p).await, "");
}

#[tokio::test]
async fn killed_with_two_tasks_in_flight_a_rerun_finishes_both_in_their_worktrees() {
    let p = project(THREE_TASKS.split("[[tasks]]\nid = \"c\"").next().unwrap()).await;
    let generator = FakeAgent::new(ProviderId::Claude);
    for id in ["a", "b"] {
        let file: &'static str = if id == "a" { "a.txt" } else { "b.txt" };
        generator.on(
            id,
            1,
            Role::Generator,
            Act::WriteAndHang {
                files: vec![(file, "written before the kill\n")],
                signals: Some(complete(None, None)),
            },
        );
    }
    {
        let sink = Recorder::default();
        let fut = run_parallel(&p, &generator, None, &sink);
        tokio::pin!(fut);
        // Both spawns hang together only when they run at once; one by one, the second
        // never starts (bounded, so that such a run fails instead of hanging).
        for tick in 0.. {
            assert!(tick < 250, "the two tasks never were in flight together");
            tokio::select! {
                r = &mut fut => panic!("the sprint ended before the crash point: {r:?}"),
                () = tokio::time::sleep(Duration::from_millis(20)) => {
                    if generator.seen().len() == 2 { break; }
                }
            }
        }
    }
    for id in ["a", "b"] {
        let t = task_state(&p, id);
        assert_eq!(t.status, TaskStatus::Running, "{id} was in flight");
        assert_eq!(
            t.task_branch.as_deref(),
            Some(format!("corral/s.tasks/{id}").as_str())
        );
    }
    let again = FakeAgent::new(ProviderId::Claude);
    let summary = run_parallel(&p, &again, None, &Recorder::default())
        .await
        .unwrap();
    assert_eq!(summary.end, SprintEnd::Done);
    assert!(
        again.seen().is_empty(),
        "both rounds reported before the kill: continued, not run again"
    );
    assert_eq!(
        commits(&p).await,
        vec![
            ("Task a".to_string(), "a".to_string()),
            ("Task b".to_string(), "b".to_string()),
        ],
        "each task committed once"
    );
    for file in ["a.txt", "b.txt"] {
        assert_eq!(
            std::fs::read_to_string(p.root.join(file)).unwrap(),
            "written before the kill\n",
            "the change made in the worktree before the kill is the one committed"
        );
    }
}

#[tokio::test]
async fn a_freed_slot_starts_the_next_ready_task_while_another_is_still_in_flight() {
    let p = project(THREE_TASKS).await;
    let generator = FakeAgent::new(ProviderId::Claude);
    generator.on(
        "a",
        1,
        Role::Generator,
        Act::WriteAndHang {
            files: vec![("a.txt", "a\n")],
            signals: None,
        },
    );
    let sink = Recorder::default();
    {
        let fut = run_jobs(
            &p,
            &generator,
            None,
            &sink,
            DirtyTree::Refuse,
            CancellationToken::new(),
            2,
        );
        tokio::pin!(fut);
        // In waves of two, c would wait for a, which never ends (bounded, so that such a run
        // fails instead of hanging).
        for tick in 0.. {
            assert!(tick < 250, "c never started while a was in flight");
            tokio::select! {
                r = &mut fut => panic!("the sprint ended while a hangs: {r:?}"),
                () = tokio::time::sleep(Duration::from_millis(20)) => {
                    let done = corral_sprint::read_state(&layout(&p).state_file())
                        .is_ok_and(|s| s.tasks.iter().any(|t| {
                            t.id.as_str() == "c" && t.status == TaskStatus::Done
                        }));
                    if done { break; }
                }
            }
        }
    }
    let started: Vec<Vec<String>> = sink
        .events
        .lock()
        .unwrap()
        .iter()
        .filter_map(|e| match e {
            SprintEvent::WaveStarted { tasks, jobs, ahead } => {
                assert!(ahead.is_empty(), "{ahead:?}");
                assert_eq!(*jobs, 2);
                Some(tasks.iter().map(|t| t.as_str().to_string()).collect())
            }
            _ => None,
        })
        .collect();
    assert_eq!(started, vec![vec!["a", "b"], vec!["c"]], "c took b's slot");
    assert_eq!(task_state(&p, "a").status, TaskStatus::Running);
    for id in ["b", "c"] {
        let t = task_state(&p, id);
        assert_eq!(t.status, TaskStatus::Done, "{id}");
        assert!(
            t.task_branch.is_some(),
            "{id} waits for a to be folded after it, in run order"
        );
    }
    assert!(commits(&p).await.is_empty(), "nothing folded ahead of a");
}

/// The local executor told to take tasks ahead of a free slot, as a cluster's does.
struct AheadLocal;

#[async_trait]
impl TaskExecutor for AheadLocal {
    fn kind(&self) -> &'static str {
        "ahead-local"
    }

    fn lookahead(&self, jobs: usize) -> usize {
        jobs
    }

    async fn run_task(
        &self,
        job: TaskJob,
        host: &dyn TaskHost,
        cancel: &CancellationToken,
    ) -> Result<TaskHandback, corral_sprint::ExecutorError> {
        corral_executor_local::LocalExecutor
            .run_task(job, host, cancel)
            .await
    }
}

#[tokio::test]
async fn a_task_started_ahead_waits_for_a_round_slot() {
    let p = project(THREE_TASKS).await;
    let generator = FakeAgent::new(ProviderId::Claude);
    for (task, file) in [("a", "a.txt"), ("b", "b.txt")] {
        generator.on(
            task,
            1,
            Role::Generator,
            Act::WriteAndHang {
                files: vec![(file, "half\n")],
                signals: None,
            },
        );
    }
    let sink = Recorder::default();
    {
        let fut = run_through(
            &p,
            &generator,
            None,
            &sink,
            DirtyTree::Refuse,
            CancellationToken::new(),
            2,
            &AheadLocal,
        );
        tokio::pin!(fut);
        // a and b hold the two slots and never end: c is in flight, its rounds wait.
        for _ in 0..25 {
            tokio::select! {
                r = &mut fut => panic!("the sprint ended while a hangs: {r:?}"),
                () = tokio::time::sleep(Duration::from_millis(20)) => {}
            }
        }
        // Dropped, as a killed coordinator would be: a's fake agent hangs through a cancel.
    }
    let waves: Vec<(Vec<String>, Vec<String>)> = sink
        .events
        .lock()
        .unwrap()
        .iter()
        .filter_map(|e| match e {
            SprintEvent::WaveStarted { tasks, jobs, ahead } => {
                assert_eq!(*jobs, 2);
                let names = |t: &[TaskId]| t.iter().map(|t| t.as_str().to_string()).collect();
                Some((names(tasks), names(ahead)))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        waves,
        vec![(
            vec!["a".to_string(), "b".to_string()],
            vec!["c".to_string()]
        )],
        "c started ahead of a free slot"
    );
    let mut spawned: Vec<String> = generator.seen().into_iter().map(|s| s.task).collect();
    spawned.sort();
    assert_eq!(
        spawned,
        ["a", "b"],
        "no round of c ran while a and b held the slots"
    );
}

#[tokio::test]
async fn setup_runs_once_in_the_project_and_once_in_each_new_worktree() {
    let p = project(THREE_TASKS).await;
    let file = p.root.join("corral-sprint.toml");
    // One count for every tree: the repository's common directory is the same for all.
    let text = std::fs::read_to_string(&file).unwrap().replace(
        "max_rounds = 3",
        "max_rounds = 3\nsetup = \"basename \\\"$PWD\\\" >> \\\"$(git rev-parse --git-common-dir)/setup-count\\\"\"",
    );
    std::fs::write(&file, text).unwrap();
    git(&p.root, &["commit", "--quiet", "-am", "setup"]).await;
    let generator = FakeAgent::new(ProviderId::Claude);
    let summary = run_parallel(&p, &generator, None, &Recorder::default())
        .await
        .unwrap();
    assert_eq!(summary.end, SprintEnd::Done);
    let count = std::fs::read_to_string(p.root.join(".git/setup-count")).unwrap();
    let mut trees: Vec<&str> = count.lines().collect();
    trees.sort_unstable();
    let project = p.root.file_name().unwrap().to_str().unwrap();
    let mut expected = vec!["a", "b", "c", project];
    expected.sort_unstable();
    assert_eq!(trees, expected, "{count}");
    assert_eq!(commits(&p).await.len(), 3);
}

/// Issue 29, hole 2: a generator writes the evaluator's report of its own round before the
/// evaluator starts. The report is not taken (Corral never started that evaluator): the
/// evaluator runs in a directory made anew, and its failing verdict stands.
#[tokio::test]
async fn a_report_forged_before_its_spawn_is_not_taken() {
    let p = project(THREE_TASKS.split("[[tasks]]\nid = \"b\"").next().unwrap()).await;
    let generator = FakeAgent::new(ProviderId::Claude);
    let evaluator = FakeAgent::new(ProviderId::Codex);
    let forged = ".corral/sprints/s/implement/a/rounds/1/evaluator/signals.json".to_string();
    generator.on(
        "a",
        1,
        Role::Generator,
        Act::Plant {
            links: Vec::new(),
            files: vec![(forged.clone(), evaluation(None).to_string())],
            signals: complete(None, None),
        },
    );
    for round in 1..=3 {
        evaluator.on(
            "a",
            round,
            Role::Evaluator,
            Act::Write {
                files: Vec::new(),
                remove: Vec::new(),
                signals: evaluation(Some("it does not do the task")),
            },
        );
    }
    let summary = run_plain(&p, &generator, Some(&evaluator)).await.unwrap();
    assert_eq!(summary.end, SprintEnd::Blocked, "{summary:?}");
    assert_eq!(
        evaluator.seen_for("a", 1).len(),
        1,
        "the evaluator of round 1 ran despite the report found in its directory"
    );
    assert!(commits(&p).await.is_empty());
    // The forged report was moved aside, not read as the spawn's.
    let aside = layout(&p)
        .round_dir(&TaskId::new("a").unwrap(), 1)
        .join("evaluator.earlier-1");
    assert!(aside.join("signals.json").is_file());
}

/// Issue 29, hole 1: an agent without a sandbox replaces the files Corral writes after its
/// round (`check.txt`, `diff.patch`, the round's directory itself, `learnings.ndjson`) with
/// links to the user's files. Nothing is written through them: the user's files keep their
/// bytes, and the sprint names the tampering.
#[tokio::test]
async fn links_planted_where_corral_writes_are_never_followed() {
    let p = project(THREE_TASKS.split("[[tasks]]\nid = \"b\"").next().unwrap()).await;
    let victims = tempfile::tempdir().unwrap();
    let bashrc = victims.path().join("bashrc");
    let profile = victims.path().join("profile");
    let home = victims.path().join("home");
    std::fs::write(&bashrc, "original bashrc\n").unwrap();
    std::fs::write(&profile, "original profile\n").unwrap();
    std::fs::create_dir(&home).unwrap();
    let round = ".corral/sprints/s/implement/a/rounds/1".to_string();
    let generator = FakeAgent::new(ProviderId::Claude);
    generator.on(
        "a",
        1,
        Role::Generator,
        Act::Plant {
            links: vec![
                (format!("{round}/check.txt"), bashrc.clone()),
                (format!("{round}/diff.patch"), profile.clone()),
                (
                    ".corral/sprints/s/learnings.ndjson".to_string(),
                    profile.clone(),
                ),
                (
                    ".corral/sprints/s/implement/a/rounds/2".to_string(),
                    home.clone(),
                ),
            ],
            files: Vec::new(),
            signals: complete(None, Some("a learning")),
        },
    );
    let summary = run_plain(&p, &generator, None).await.unwrap();
    assert_eq!(
        std::fs::read_to_string(&bashrc).unwrap(),
        "original bashrc\n"
    );
    assert_eq!(
        std::fs::read_to_string(&profile).unwrap(),
        "original profile\n"
    );
    assert_eq!(std::fs::read_dir(&home).unwrap().count(), 0);
    // Each round that met a planted file failed, named; the task went on in a later round.
    let warnings = &summary.tasks[0].warnings;
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("tampering") && w.contains("rounds/1/diff.patch")),
        "{warnings:?}"
    );
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("tampering") && w.contains("rounds/2")),
        "{warnings:?}"
    );
}

/// Issue 37: learnings are filtered by their `appliesTo`: one about a place reaches a task
/// that names that place and the tasks that depend on the task that learnt it, and stays out of
/// the others' briefs; one that names no place reaches every later task.
#[tokio::test]
async fn a_learning_reaches_the_tasks_it_applies_to() {
    let p = project(
        r#"
[[tasks]]
id = "a"
title = "Task a"
prompt = "Write a.txt."

[[tasks]]
id = "b"
title = "Task b"
prompt = "Write b.txt in the docs."

[[tasks]]
id = "c"
title = "Task c"
prompt = "Fix the generator in tests/fixtures now."

[[tasks]]
id = "d"
title = "Task d"
prompt = "Write d.txt."
depends_on = ["a"]
"#,
    )
    .await;
    let generator = FakeAgent::new(ProviderId::Claude);
    generator.on(
        "a",
        1,
        Role::Generator,
        Act::Write {
            files: vec![("a.txt", "a\n")],
            remove: Vec::new(),
            signals: serde_json::json!({"schemaVersion": 1, "signals": [
                {"type": "task-complete", "timestamp": TS},
                {"type": "learning", "timestamp": TS, "text": "FIXTURES-ARE-GENERATED",
                 "appliesTo": "tests/fixtures/"},
                {"type": "learning", "timestamp": TS, "text": "EVERYWHERE-LEARNING"},
            ]}),
        },
    );
    let summary = run_plain(&p, &generator, None).await.unwrap();
    assert_eq!(summary.end, SprintEnd::Done, "{summary:?}");
    let brief = |task: &str| generator.seen_for(task, 1)[0].request.prompt.clone();
    for task in ["b", "c", "d"] {
        assert!(brief(task).contains("EVERYWHERE-LEARNING"), "{task}");
    }
    assert!(
        !brief("b").contains("FIXTURES-ARE-GENERATED"),
        "{}",
        brief("b")
    );
    assert!(
        brief("c").contains("FIXTURES-ARE-GENERATED"),
        "names the place"
    );
    assert!(
        brief("d").contains("FIXTURES-ARE-GENERATED"),
        "depends on a"
    );
}
