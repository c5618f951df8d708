//! Failure classes in the sprint, with fake agents and real git: a transient failure (a watchdog
//! kill, the wall clock, a crash) runs the same spawn again without counting a round, within
//! `[sprint] transient_retries`; an evaluator that fails runs again alone, never at the cost of a
//! generator round; a permanent failure stops the sprint with exit 8 before the other tasks
//! spend their rounds; a spawn ended at its limits (`[limits]`) fails its round, the limit
//! named to the generator's next round, and never stops the sprint; and each failure is in the
//! task's record with its class.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::flow::{now, task_and_round};
use async_trait::async_trait;
use corral_ports::{
    CancellationToken, CommandRunner, CommandSpec, Effort, ErrorClass, Outcome, ProviderId,
    RunObserver, SessionId, Usage,
};
use corral_sprint::{
    DirtyTree, EventSink, FailureClass, Role, RoleAgent, RunOptions, SpawnFailure, SpawnReport,
    SpawnRequest, SpawnVerdict, SprintEnd, SprintEvent, SprintLayout, SprintState, SprintSummary,
    TaskStatus, read_state, run_sprint,
};
use corral_test_support::HostCommandRunner;

const IDENTITY: [(&str, &str); 4] = [
    ("GIT_AUTHOR_NAME", "Sprint Test"),
    ("GIT_AUTHOR_EMAIL", "sprint@example.invalid"),
    ("GIT_COMMITTER_NAME", "Sprint Test"),
    ("GIT_COMMITTER_EMAIL", "sprint@example.invalid"),
];

fn identity() -> Vec<(String, String)> {
    IDENTITY
        .iter()
        .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
        .collect()
}

async fn git(dir: &Path, args: &[&str]) -> String {
    let out = HostCommandRunner { env: identity() }
        .run(
            CommandSpec::git(args.iter().copied(), dir, Duration::from_secs(30)),
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    assert!(out.success(), "git {args:?}: {}", out.stderr.text);
    out.stdout.text
}

const TS: &str = "2026-12-02T10:00:00Z";

/// How a scripted spawn fails instead of doing its work.
#[derive(Clone, Debug)]
enum Fail {
    /// Its provider run ends retryable with this outcome (a watchdog, the wall clock, a crash).
    Transient(Outcome),
    /// Its provider run ends permanently with this outcome and message.
    Permanent(Outcome, &'static str),
    /// An evaluator that answers, with a report that holds no evaluation.
    NoEvaluation,
    /// An evaluator whose valid verdict is `malformed`: it could not evaluate at all.
    Malformed,
}

/// One spawn as the fake saw it.
#[derive(Clone, Debug)]
struct Seen {
    task: String,
    round: u32,
    role: Role,
    resume: Option<SessionId>,
    prompt: String,
}

/// A fake agent for both roles: each (task, role) fails as scripted, in order, then works
/// (a generator writes `<task>.txt` and completes, an evaluator passes the round).
struct FailingAgent {
    provider: ProviderId,
    script: Mutex<HashMap<(String, Role), VecDeque<Fail>>>,
    seen: Mutex<Vec<Seen>>,
}

impl FailingAgent {
    fn new(provider: ProviderId) -> Arc<Self> {
        Arc::new(FailingAgent {
            provider,
            script: Mutex::new(HashMap::new()),
            seen: Mutex::new(Vec::new()),
        })
    }

    fn fails(&self, task: &str, role: Role, fails: impl IntoIterator<Item = Fail>) {
        self.script
            .lock()
            .unwrap()
            .entry((task.to_string(), role))
            .or_default()
            .extend(fails);
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    fn spawns(&self, task: &str, role: Role) -> Vec<Seen> {
        self.seen()
            .into_iter()
            .filter(|s| s.task == task && s.role == role)
            .collect()
    }
}

fn evaluation_passed() -> serde_json::Value {
    let dims: Vec<serde_json::Value> = corral_contract::FLOOR_DIMENSIONS
        .iter()
        .map(|name| serde_json::json!({"name": name, "passed": true}))
        .collect();
    serde_json::json!({"schemaVersion": 1, "signals": [
        {"type": "evaluation", "timestamp": TS, "status": "passed", "dimensions": dims}
    ]})
}

fn evaluation_malformed() -> serde_json::Value {
    let dims: Vec<serde_json::Value> = corral_contract::FLOOR_DIMENSIONS
        .iter()
        .map(
            |name| serde_json::json!({"name": name, "passed": false, "finding": "no diff to read"}),
        )
        .collect();
    serde_json::json!({"schemaVersion": 1, "signals": [
        {"type": "evaluation", "timestamp": TS, "status": "malformed", "dimensions": dims}
    ]})
}

fn completed() -> serde_json::Value {
    serde_json::json!({"schemaVersion": 1, "signals": [
        {"type": "task-complete", "timestamp": TS}
    ]})
}

#[async_trait]
impl RoleAgent for FailingAgent {
    fn provider(&self) -> ProviderId {
        self.provider
    }
    fn model(&self) -> Option<&str> {
        Some("fake-model")
    }
    fn effort(&self) -> Option<Effort> {
        None
    }
    fn resumes(&self) -> bool {
        true
    }

    async fn spawn(
        &self,
        request: SpawnRequest,
        _cancel: CancellationToken,
        _observer: Arc<dyn RunObserver>,
    ) -> SpawnReport {
        let (task, round) = task_and_round(&request.dir);
        self.seen.lock().unwrap().push(Seen {
            task: task.clone(),
            round,
            role: request.role,
            resume: request.resume.clone(),
            prompt: request.prompt.clone(),
        });
        // A resumed session keeps its id; a new one is named after where it started. Written
        // at once, as a real spawn's is: a rerun after a failure finds it in the directory.
        let spawns = self.spawns(&task, request.role).len();
        let session = request.resume.clone().unwrap_or_else(|| {
            SessionId::new(format!("{}-{task}-{round}-{spawns}", request.role)).unwrap()
        });
        std::fs::create_dir_all(&request.dir).unwrap();
        std::fs::write(request.dir.join("session-id.txt"), format!("{session}\n")).unwrap();
        let meta = serde_json::json!({
            "session_id": session.as_str(), "model": "fake-model", "cwd": request.work_tree,
            "attempt": 1
        });
        std::fs::write(request.dir.join("session.json"), meta.to_string()).unwrap();
        let fail = self
            .script
            .lock()
            .unwrap()
            .get_mut(&(task.clone(), request.role))
            .and_then(VecDeque::pop_front);
        let failed = |outcome, class, message: &str| SpawnReport {
            outcome,
            session_id: Some(session.clone()),
            verdict: SpawnVerdict::NotChecked,
            usage: Usage::default(),
            error: Some(SpawnFailure {
                class,
                message: message.to_string(),
                resets_at_epoch_s: None,
            }),
            attempts: 1,
            stray_writes: Vec::new(),
        };
        let signals = match fail {
            Some(Fail::Transient(outcome)) => {
                return failed(
                    outcome,
                    ErrorClass::Retryable,
                    &format!("claude: the run ended {}", outcome.as_str()),
                );
            }
            Some(Fail::Permanent(outcome, message)) => {
                return failed(outcome, ErrorClass::Permanent, message);
            }
            Some(Fail::NoEvaluation) => completed(),
            Some(Fail::Malformed) => evaluation_malformed(),
            None => match request.role {
                Role::Generator => {
                    std::fs::write(request.work_tree.join(format!("{task}.txt")), "done\n")
                        .unwrap();
                    completed()
                }
                Role::Evaluator => evaluation_passed(),
            },
        };
        std::fs::write(request.dir.join("signals.json"), signals.to_string()).unwrap();
        SpawnReport {
            outcome: Outcome::Succeeded,
            session_id: Some(session),
            verdict: SpawnVerdict::of_signals_file(
                &request.dir.join("signals.json"),
                &request.contract,
            ),
            usage: Usage::default(),
            error: None,
            attempts: 1,
            stray_writes: Vec::new(),
        }
    }
}

/// Keeps every event.
#[derive(Default)]
struct Events(Mutex<Vec<SprintEvent>>);

impl EventSink for Events {
    fn event(&self, event: &SprintEvent) {
        self.0.lock().unwrap().push(event.clone());
    }
}

impl Events {
    fn warnings(&self) -> Vec<String> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .filter_map(|e| match e {
                SprintEvent::Warning { message, .. } => Some(message.clone()),
                _ => None,
            })
            .collect()
    }
}

struct Project {
    _dir: tempfile::TempDir,
    root: PathBuf,
}

/// A project whose sprint runs `tasks` (ids) with `head_extra` added to its `[sprint]` table.
async fn project(tasks: &[&str], head_extra: &str) -> Project {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    git(&root, &["init", "--quiet", "--initial-branch=main"]).await;
    std::fs::write(root.join("README"), "project\n").unwrap();
    let mut sprint = format!(
        "[sprint]\nname = \"s\"\ncheck = \"true\"\nmax_rounds = 3\n{head_extra}\n\n\
         [roles.generator]\nprovider = \"claude\"\n\n[roles.evaluator]\nprovider = \"codex\"\n"
    );
    for id in tasks {
        sprint.push_str(&format!(
            "\n[[tasks]]\nid = \"{id}\"\ntitle = \"Task {id}\"\nprompt = \"Write {id}.txt.\"\n"
        ));
    }
    std::fs::write(root.join("corral-sprint.toml"), sprint).unwrap();
    git(&root, &["add", "--all"]).await;
    git(&root, &["commit", "--quiet", "-m", "start"]).await;
    Project { _dir: dir, root }
}

async fn run(
    p: &Project,
    generator: &FailingAgent,
    evaluator: &FailingAgent,
    events: &Events,
) -> SprintSummary {
    run_jobs(p, generator, evaluator, events, 1).await
}

async fn run_jobs(
    p: &Project,
    generator: &FailingAgent,
    evaluator: &FailingAgent,
    events: &Events,
    jobs: usize,
) -> SprintSummary {
    let file = corral_sprint::load(&p.root.join("corral-sprint.toml")).unwrap();
    let commands = HostCommandRunner { env: identity() };
    let executor = corral_executor_local::LocalExecutor;
    run_sprint(corral_sprint::SprintRun {
        file: &file,
        project_root: &p.root,
        generator,
        evaluator: Some(evaluator),
        commands: &commands,
        executor: &executor,
        events,
        options: RunOptions {
            dirty: DirtyTree::Refuse,
            run_id: "run-1".to_string(),
            now,
            git_env: identity(),
            jobs,
            prices: corral_sprint::PriceTable::default(),
        },
        cancel: CancellationToken::new(),
    })
    .await
    .unwrap()
}

fn state(p: &Project) -> SprintState {
    let layout = SprintLayout::new(&p.root, &corral_sprint::SprintName::new("s").unwrap());
    read_state(&layout.state_file()).unwrap()
}

fn classes(state: &SprintState, task: &str) -> Vec<(u32, Role, FailureClass, Outcome)> {
    state
        .tasks
        .iter()
        .find(|t| t.id.as_str() == task)
        .unwrap()
        .failures
        .iter()
        .map(|f| (f.round, f.role, f.class, f.outcome))
        .collect()
}

#[tokio::test]
async fn an_idle_timeout_reruns_the_round_without_counting_it_and_resumes_the_session() {
    let p = project(&["a"], "").await;
    let generator = FailingAgent::new(ProviderId::Claude);
    let evaluator = FailingAgent::new(ProviderId::Codex);
    generator.fails(
        "a",
        Role::Generator,
        [
            Fail::Transient(Outcome::IdleTimeout),
            Fail::Transient(Outcome::WallTimeout),
        ],
    );
    let events = Events::default();
    let summary = run(&p, &generator, &evaluator, &events).await;
    assert_eq!(summary.end, SprintEnd::Done, "{summary:?}");
    assert_eq!(summary.tasks[0].rounds, 1, "no round was counted");
    let spawns = generator.spawns("a", Role::Generator);
    assert_eq!(spawns.len(), 3);
    assert!(spawns.iter().all(|s| s.round == 1), "{spawns:?}");
    // The rerun resumes the session the failed spawn left in its directory.
    assert_eq!(spawns[0].resume, None);
    assert_eq!(
        spawns[1].resume.as_ref().map(SessionId::as_str),
        Some("generator-a-1-1")
    );
    assert_eq!(spawns[2].resume, spawns[1].resume);
    let s = state(&p);
    assert_eq!(
        classes(&s, "a"),
        [
            (
                1,
                Role::Generator,
                FailureClass::Transient,
                Outcome::IdleTimeout
            ),
            (
                1,
                Role::Generator,
                FailureClass::Transient,
                Outcome::WallTimeout
            ),
        ]
    );
    let warnings = events.warnings();
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    assert!(
        warnings[0].contains("runs again (1 of 2, no round counted)"),
        "{warnings:?}"
    );
}

#[tokio::test]
async fn an_evaluator_that_fails_reruns_the_review_only() {
    let p = project(&["a"], "").await;
    let generator = FailingAgent::new(ProviderId::Claude);
    let evaluator = FailingAgent::new(ProviderId::Codex);
    evaluator.fails(
        "a",
        Role::Evaluator,
        [Fail::Transient(Outcome::Crashed), Fail::NoEvaluation],
    );
    let events = Events::default();
    let summary = run(&p, &generator, &evaluator, &events).await;
    assert_eq!(summary.end, SprintEnd::Done, "{summary:?}");
    assert_eq!(summary.tasks[0].rounds, 1);
    assert_eq!(
        generator.spawns("a", Role::Generator).len(),
        1,
        "no generator round was spent on the review's failures"
    );
    let reviews = evaluator.spawns("a", Role::Evaluator);
    assert_eq!(reviews.len(), 3);
    assert!(reviews.iter().all(|s| s.round == 1), "{reviews:?}");
    assert_eq!(
        classes(&state(&p), "a"),
        [
            (
                1,
                Role::Evaluator,
                FailureClass::Transient,
                Outcome::Crashed
            ),
            (
                1,
                Role::Evaluator,
                FailureClass::NoEvaluation,
                Outcome::Succeeded
            ),
        ]
    );
}

#[tokio::test]
async fn a_malformed_verdict_reruns_the_review_and_costs_no_round() {
    let p = project(&["a"], "").await;
    let generator = FailingAgent::new(ProviderId::Claude);
    let evaluator = FailingAgent::new(ProviderId::Codex);
    evaluator.fails("a", Role::Evaluator, [Fail::Malformed]);
    let events = Events::default();
    let summary = run(&p, &generator, &evaluator, &events).await;
    assert_eq!(summary.end, SprintEnd::Done, "{summary:?}");
    assert_eq!(summary.tasks[0].rounds, 1);
    assert_eq!(generator.spawns("a", Role::Generator).len(), 1);
    assert_eq!(evaluator.spawns("a", Role::Evaluator).len(), 2);
    assert_eq!(
        classes(&state(&p), "a"),
        [(
            1,
            Role::Evaluator,
            FailureClass::NoEvaluation,
            Outcome::Succeeded
        )]
    );
}

#[tokio::test]
async fn a_permanent_failure_stops_the_sprint_with_exit_8_and_leaves_later_tasks_pending() {
    let p = project(&["a", "b"], "").await;
    let generator = FailingAgent::new(ProviderId::Claude);
    let evaluator = FailingAgent::new(ProviderId::Codex);
    evaluator.fails(
        "a",
        Role::Evaluator,
        [Fail::Permanent(
            Outcome::ModelUnavailable,
            "codex: the model fake-modle is not available\nhint: set model under [roles.evaluator]",
        )],
    );
    let events = Events::default();
    let summary = run(&p, &generator, &evaluator, &events).await;
    assert_eq!(summary.end, SprintEnd::PermanentFailure, "{summary:?}");
    assert_eq!(summary.exit_code, 8);
    let s = state(&p);
    assert_eq!(
        s.tasks[0].status,
        TaskStatus::Running,
        "a stopped at its review"
    );
    assert_eq!(s.tasks[1].status, TaskStatus::Pending, "b spent nothing");
    assert!(generator.spawns("b", Role::Generator).is_empty());
    assert_eq!(
        classes(&s, "a"),
        [(
            1,
            Role::Evaluator,
            FailureClass::Permanent,
            Outcome::ModelUnavailable
        )]
    );
    let warning = s.tasks[0].warnings.last().unwrap();
    assert!(
        warning.contains("the evaluator (codex) failed in a way no rerun mends")
            && warning
                .contains("fake-modle is not available; hint: set model under [roles.evaluator]"),
        "{warning}"
    );
    // Fixed (the script has no more failures), the rerun goes on at a's review.
    let summary = run(&p, &generator, &evaluator, &Events::default()).await;
    assert_eq!(summary.end, SprintEnd::Done, "{summary:?}");
    assert_eq!(generator.spawns("a", Role::Generator).len(), 1);
    assert_eq!(evaluator.spawns("a", Role::Evaluator).len(), 2);
}

#[tokio::test]
async fn transient_failures_past_the_allowance_block_the_task_naming_why() {
    let p = project(&["a", "b"], "transient_retries = 1").await;
    let generator = FailingAgent::new(ProviderId::Claude);
    let evaluator = FailingAgent::new(ProviderId::Codex);
    generator.fails(
        "a",
        Role::Generator,
        [
            Fail::Transient(Outcome::Crashed),
            Fail::Transient(Outcome::IdleTimeout),
        ],
    );
    let events = Events::default();
    let summary = run(&p, &generator, &evaluator, &events).await;
    assert_eq!(summary.end, SprintEnd::Blocked, "{summary:?}");
    let a = &summary.tasks[0];
    assert_eq!(a.status, TaskStatus::Blocked);
    assert_eq!(a.rounds, 1, "no round counted");
    let reason = a.reason.as_deref().unwrap();
    assert!(
        reason.contains("failed 2 time(s) running, past [sprint] transient_retries = 1")
            && reason.contains("idle-timeout"),
        "{reason}"
    );
    assert_eq!(generator.spawns("a", Role::Generator).len(), 2);
    assert_eq!(summary.tasks[1].status, TaskStatus::Done, "b still ran");
}

#[tokio::test]
async fn a_spawn_that_met_a_full_disk_ends_the_sprint_as_a_full_disk_not_a_provider_failure() {
    let p = project(&["a"], "").await;
    let generator = FailingAgent::new(ProviderId::Claude);
    let evaluator = FailingAgent::new(ProviderId::Codex);
    generator.fails(
        "a",
        Role::Generator,
        [Fail::Permanent(
            Outcome::NotStarted,
            "claude: cannot write /p/.corral/sprints/s/implement/a/rounds/1/generator: No space left on device (os error 28)",
        )],
    );
    let summary = run(&p, &generator, &evaluator, &Events::default()).await;
    assert_eq!(summary.end, SprintEnd::DiskFull, "{summary:?}");
    assert_eq!(summary.exit_code, 1);
    let s = state(&p);
    assert!(classes(&s, "a").is_empty(), "not the provider's failure");
    // Room again: the rerun goes on at the same spawn.
    let summary = run(&p, &generator, &evaluator, &Events::default()).await;
    assert_eq!(summary.end, SprintEnd::Done, "{summary:?}");
    assert_eq!(summary.tasks[0].rounds, 1);
}

#[tokio::test]
async fn with_jobs_a_permanent_failure_stops_the_sprint_with_exit_8() {
    let p = project(&["a", "b", "c"], "").await;
    let generator = FailingAgent::new(ProviderId::Claude);
    let evaluator = FailingAgent::new(ProviderId::Codex);
    generator.fails(
        "a",
        Role::Generator,
        [Fail::Permanent(
            Outcome::Refused,
            "claude: the login was refused: Invalid API key",
        )],
    );
    let summary = run_jobs(&p, &generator, &evaluator, &Events::default(), 2).await;
    assert_eq!(summary.end, SprintEnd::PermanentFailure, "{summary:?}");
    assert_eq!(summary.exit_code, 8);
    let s = state(&p);
    assert_eq!(
        classes(&s, "a"),
        [(
            1,
            Role::Generator,
            FailureClass::Permanent,
            Outcome::Refused
        )]
    );
    assert_eq!(
        s.tasks[0].status,
        TaskStatus::Running,
        "a stopped at its spawn"
    );
}

/// What `corral run`'s engine reports for a tool that went over `[limits] memory`.
const MEMORY_LIMIT: &str = "claude: stopped at its memory limit of 64 MiB (peak 64 MiB): the \
kernel killed 1 process(es) out of memory\nhint: raise [limits] memory in your settings, or \
resume the session and ask for work that uses less";

#[tokio::test]
async fn a_spawn_ended_at_its_limit_fails_the_round_and_the_next_round_is_told_which() {
    let p = project(&["a", "b"], "").await;
    let generator = FailingAgent::new(ProviderId::Claude);
    let evaluator = FailingAgent::new(ProviderId::Codex);
    // Permanent in the provider's terms: the class the engine gives a limit.
    generator.fails(
        "a",
        Role::Generator,
        [Fail::Permanent(Outcome::LimitExceeded, MEMORY_LIMIT)],
    );
    evaluator.fails(
        "b",
        Role::Evaluator,
        [Fail::Permanent(Outcome::LimitExceeded, MEMORY_LIMIT)],
    );
    let events = Events::default();
    let summary = run(&p, &generator, &evaluator, &events).await;
    // Never a stop of the sprint (exit 8), never a transient rerun of the same round.
    assert_eq!(summary.end, SprintEnd::Done, "{summary:?}");
    assert_eq!(summary.exit_code, 0);
    let a = &summary.tasks[0];
    assert_eq!(a.status, TaskStatus::Done);
    assert_eq!(a.rounds, 2, "the limit cost a round");
    let spawned = generator.spawns("a", Role::Generator);
    assert_eq!(spawned.len(), 2);
    assert_eq!(spawned[1].round, 2);
    assert!(
        spawned[1].prompt.contains("went over a limit")
            && spawned[1].prompt.contains("memory limit of 64 MiB"),
        "the second round is told: {}",
        spawned[1].prompt
    );
    // The user's fix stays the user's: the hint is not the generator's business.
    assert!(
        !spawned[1].prompt.contains("hint:"),
        "{}",
        spawned[1].prompt
    );
    // An evaluator's limit fails the round the same way: the generator's next round hears it.
    let b = &summary.tasks[1];
    assert_eq!(b.status, TaskStatus::Done);
    assert_eq!(b.rounds, 2);
    let b_spawned = generator.spawns("b", Role::Generator);
    assert!(
        b_spawned[1].prompt.contains("the evaluator's process tree"),
        "{}",
        b_spawned[1].prompt
    );
    let s = state(&p);
    assert_eq!(
        classes(&s, "a"),
        [(
            1,
            Role::Generator,
            FailureClass::LimitExceeded,
            Outcome::LimitExceeded
        )]
    );
    assert!(
        events
            .warnings()
            .iter()
            .any(|w| w.contains("round 1: the generator (claude) went over a limit")),
        "{:?}",
        events.warnings()
    );
}
