//! A role of several providers (`provider = ["claude", "codex"]`, issue 31): a provider held
//! past the role's `failover_after_ms` hands the task to the next, in a new session, and the
//! role comes back to it once the hold has passed.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

use corral_sprint::FailoverAgent;

use super::*;

fn role(agents: &[&Arc<FakeAgent>], failover_after: Duration) -> FailoverAgent {
    let agents = agents
        .iter()
        .map(|a| Arc::clone(a) as Arc<dyn RoleAgent>)
        .collect();
    FailoverAgent::new(agents, failover_after).unwrap()
}

async fn run_role(p: &Project, role: &dyn RoleAgent, sink: &Recorder) -> SprintSummary {
    let executor = corral_executor_local::LocalExecutor;
    let cancel = CancellationToken::new();
    run_agents(p, role, None, sink, DirtyTree::Refuse, cancel, 1, &executor)
        .await
        .unwrap()
}

#[tokio::test]
async fn a_held_provider_hands_the_task_to_the_next_in_a_new_session_without_a_round() {
    let p = project(THREE_TASKS).await;
    let claude = FakeAgent::new(ProviderId::Claude);
    claude.on("a", 1, Role::Generator, Act::RateLimited);
    let codex = FakeAgent::new(ProviderId::Codex);
    let role = role(&[&claude, &codex], Duration::from_secs(3600));
    let sink = Recorder::default();
    let summary = run_role(&p, &role, &sink).await;
    assert_eq!(summary.end, SprintEnd::Done, "{summary:?}");

    // Claude met the limit once; Codex went on with a's first round, as a new session with the
    // whole brief, and did the other tasks while Claude's account is held.
    assert_eq!(claude.seen().len(), 1);
    let a = codex.seen_for("a", 1);
    assert_eq!(a.len(), 1);
    assert_eq!(a[0].request.resume, None);
    assert!(
        a[0].request.prompt.contains("Write a.txt."),
        "{}",
        a[0].request.prompt
    );
    assert_eq!(codex.seen().len(), 3);

    // No round counted, and the record says who was held until when and who went on.
    let a = task_state(&p, "a");
    assert_eq!(a.status, TaskStatus::Done);
    assert_eq!(a.round, 1);
    assert!(a.failures.is_empty(), "{:?}", a.failures);
    assert_eq!(a.handovers.len(), 1, "{:?}", a.handovers);
    let h = &a.handovers[0];
    assert_eq!(
        (h.role, h.from, h.to, h.round),
        (Role::Generator, ProviderId::Claude, ProviderId::Codex, 1)
    );
    assert!(
        h.describe().contains("claude held until 20"),
        "{}",
        h.describe()
    );
    assert!(
        h.describe().ends_with("continued on codex"),
        "{}",
        h.describe()
    );
    let told: Vec<SprintEvent> = sink
        .events
        .lock()
        .unwrap()
        .iter()
        .filter(|e| matches!(e, SprintEvent::FailedOver { .. }))
        .cloned()
        .collect();
    assert_eq!(told.len(), 1, "{told:?}");
    let holds = sink
        .events
        .lock()
        .unwrap()
        .iter()
        .filter(|e| {
            matches!(
                e,
                SprintEvent::RateLimitHold {
                    provider: ProviderId::Claude,
                    ..
                }
            )
        })
        .count();
    assert_eq!(holds, 1, "the hold is told once");
    // The held provider's spawn is kept beside the one that went on.
    let rounds = layout(&p).spawn_dir(&TaskId::new("a").unwrap(), 1, Role::Generator);
    assert!(rounds.with_file_name("generator.earlier-1").is_dir());
    // The usage is told per provider.
    assert!(a.usage_by_provider.contains_key(&ProviderId::Codex));
}

/// The test's clock: now, moved on by what the test says.
static AHEAD_S: AtomicU64 = AtomicU64::new(0);

fn moved_clock() -> SystemTime {
    SystemTime::now() + Duration::from_secs(AHEAD_S.load(Ordering::SeqCst))
}

#[tokio::test]
async fn the_role_comes_back_to_the_first_provider_once_its_hold_has_passed_in_a_new_session() {
    let p = project(THREE_TASKS).await;
    let claude = FakeAgent::new(ProviderId::Claude);
    claude.on("a", 1, Role::Generator, Act::RateLimited);
    let codex = FakeAgent::new(ProviderId::Codex);
    // Codex's round breaks the check: a second round follows.
    codex.on("a", 1, Role::Generator, write(&[("BROKEN", "x\n")]));
    let agents: Vec<Arc<dyn RoleAgent>> = vec![claude.clone(), codex.clone()];
    let role = FailoverAgent::with_clock(agents, Duration::from_secs(3600), moved_clock).unwrap();
    let sink = Recorder::default();
    // Two hours pass once Codex's round has been checked: Claude's hold is over.
    sink.open_when(&Gate::default(), |events| {
        let checked = events.iter().any(|e| {
            matches!(
                e,
                SprintEvent::Verified {
                    round: 1,
                    passed: false,
                    ..
                }
            )
        });
        if checked {
            AHEAD_S.store(7200, Ordering::SeqCst);
        }
        checked
    });
    let summary = run_role(&p, &role, &sink).await;
    assert_eq!(summary.end, SprintEnd::Done, "{summary:?}");

    // Back on Claude: Codex's session is not Claude's to resume, so a new one gets the brief.
    let back: Vec<Seen> = claude.seen().into_iter().skip(1).collect();
    assert!(!back.is_empty());
    assert_eq!(back[0].task, "a");
    assert_eq!(back[0].request.resume, None, "{:?}", back[0].request);
    assert!(back[0].request.prompt.contains("Write a.txt."));
    assert_eq!(
        codex.seen().len(),
        1,
        "Codex played only while Claude was held"
    );
    assert_eq!(task_state(&p, "a").handovers.len(), 1);
}

#[test]
fn a_role_lists_its_providers_in_order_each_with_its_model_and_bad_input_names_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("corral-sprint.toml");
    let file = |roles: &str| {
        format!(
            "[sprint]\nname = \"s\"\ncheck = \"true\"\n\n{roles}\n\n[[tasks]]\nid = \"a\"\ntitle = \"A\"\nprompt = \"p\"\n"
        )
    };
    let good = file(
        "[roles.generator]\nprovider = [\"claude\", \"codex\"]\nmodel = { claude = \"sonnet\", codex = \"gpt-5\" }\neffort = \"high\"\nfailover_after_ms = \"5m\"",
    );
    let parsed = corral_sprint::parse(&path, &good).unwrap();
    let g = &parsed.generator;
    assert_eq!(
        (g.provider, g.model.as_deref()),
        (ProviderId::Claude, Some("sonnet"))
    );
    assert_eq!(g.failover.len(), 1);
    assert_eq!(g.failover[0].provider, ProviderId::Codex);
    assert_eq!(g.failover[0].model.as_deref(), Some("gpt-5"));
    assert_eq!(g.failover[0].effort, Some(Effort::High));
    assert_eq!(g.failover_after_ms, 300_000);
    // Without its own table, the evaluator is the same role, failover and all.
    assert_eq!(parsed.evaluator.as_ref(), Some(g));

    for (roles, key, words) in [
        (
            "[roles.generator]\nprovider = [\"claude\", \"codex\"]\nmodel = \"sonnet\"",
            "roles.generator.model",
            "give each its own, model = { claude = \"…\", codex = \"…\" }",
        ),
        (
            "[roles.generator]\nprovider = [\"claude\", \"codx\"]",
            "roles.generator.provider[1]",
            "did you mean \"codex\"?",
        ),
        (
            "[roles.generator]\nprovider = [\"claude\", \"claude\"]",
            "roles.generator.provider[1]",
            "names \"claude\" twice",
        ),
        (
            "[roles.generator]\nprovider = []",
            "roles.generator.provider",
            "empty array",
        ),
        (
            "[roles.generator]\nprovider = [\"claude\", \"codex\"]\nmodel = { claude = \"x\", gemini = \"y\" }",
            "roles.generator.model.gemini",
            "provider lists claude, codex",
        ),
        (
            "[roles.generator]\nprovider = [\"claude\", \"codex\"]\neffort = { codex = \"hard\" }",
            "roles.generator.effort.codex",
            "\"hard\" is not one of low, medium, high",
        ),
        (
            "[roles.generator]\nprovider = [\"claude\", \"codex\"]\nfailover_after_ms = 5",
            "roles.generator.failover_after_ms",
            "",
        ),
    ] {
        let err = corral_sprint::parse(&path, &file(roles)).unwrap_err();
        let text = err.to_string();
        let corral_sprint::SprintFileError::Invalid { diagnostics, .. } = err else {
            panic!("{text}");
        };
        assert!(
            diagnostics
                .iter()
                .any(|d| d.key == key && d.message.contains(words)),
            "{roles}: {text}"
        );
    }
}

/// An agent whose every spawn first meets the same rate-limit hold its CLI waits out (the
/// CLI's retry lines, twice), then does what the fake does.
struct Holding {
    inner: Arc<FakeAgent>,
    until: SystemTime,
}

#[async_trait]
impl RoleAgent for Holding {
    fn provider(&self) -> ProviderId {
        self.inner.provider()
    }
    fn model(&self) -> Option<&str> {
        self.inner.model()
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
        cancel: CancellationToken,
        observer: Arc<dyn RunObserver>,
    ) -> SpawnReport {
        for _ in 0..2 {
            observer.cli_retry_wait(1, self.provider(), 429, self.until);
            tokio::task::yield_now().await;
        }
        // A CLI's one-second retry is not a hold worth telling.
        observer.cli_retry_wait(
            1,
            self.provider(),
            429,
            SystemTime::now() + Duration::from_secs(1),
        );
        self.inner.spawn(request, cancel, observer).await
    }
}

#[tokio::test]
async fn the_rate_limited_hook_hears_every_hold_once_however_many_spawns_meet_it() {
    let out = tempfile::tempdir().unwrap();
    let heard = out.path().join("heard.jsonl");
    let head = format!(
        "{SPRINT_HEAD}\n[hooks]\nrate_limited = 'cat >> {}; echo >> {}'\n",
        heard.display(),
        heard.display()
    );
    let p = project_with(&head, THREE_TASKS).await;
    let holding = Holding {
        inner: FakeAgent::new(ProviderId::Claude),
        until: SystemTime::now() + Duration::from_secs(3600),
    };
    let sink = Recorder::default();
    let summary = run_role(&p, &holding, &sink).await;
    assert_eq!(summary.end, SprintEnd::Done, "{summary:?}");
    let told: Vec<SprintEvent> = sink
        .events
        .lock()
        .unwrap()
        .iter()
        .filter(|e| matches!(e, SprintEvent::RateLimitHold { .. }))
        .cloned()
        .collect();
    // Three tasks' spawns met it, each twice: told once, at the first.
    assert_eq!(told.len(), 1, "{told:?}");
    let SprintEvent::RateLimitHold { task, provider, .. } = &told[0] else {
        unreachable!()
    };
    assert_eq!((task.as_str(), *provider), ("a", ProviderId::Claude));
    let text = std::fs::read_to_string(&heard).unwrap();
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "{text}");
    let event: serde_json::Value = serde_json::from_str(lines[0]).unwrap();
    assert_eq!(event["event"], "rate-limit-hold");
    assert_eq!(event["provider"], "claude");
}

/// The exit-4 pause tells the `rate_limited` hook of its hold only when no `rate-limit-hold`
/// told it already: a spawn that met a told hold of an hour and then ended rate limited pauses
/// the sprint with one line heard (the hold's), and a spawn that ended rate limited without a
/// hold told pauses it with the pause's own line.
#[tokio::test]
async fn the_exit_4_pause_tells_the_rate_limited_hook_only_of_a_hold_not_told_yet() {
    let out = tempfile::tempdir().unwrap();
    for (told, name) in [(true, "told"), (false, "untold")] {
        let heard = out.path().join(format!("{name}.jsonl"));
        let head = format!(
            "{SPRINT_HEAD}\n[hooks]\nrate_limited = 'cat >> {}; echo >> {}'\n",
            heard.display(),
            heard.display()
        );
        let p = project_with(&head, THREE_TASKS).await;
        let claude = FakeAgent::new(ProviderId::Claude);
        claude.on("a", 1, Role::Generator, Act::RateLimited);
        let holding = Holding {
            inner: Arc::clone(&claude),
            until: SystemTime::now() + Duration::from_secs(3600),
        };
        let sink = Recorder::default();
        let role: &dyn RoleAgent = if told { &holding } else { &*claude };
        let summary = run_role(&p, role, &sink).await;
        assert_eq!(summary.end, SprintEnd::RateLimited, "{name}: {summary:?}");
        let text = std::fs::read_to_string(&heard).unwrap();
        let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        assert_eq!(lines.len(), 1, "{name}: {text}");
        let event: serde_json::Value = serde_json::from_str(lines[0]).unwrap();
        let expected = if told {
            "rate-limit-hold"
        } else {
            "sprint-finished"
        };
        assert_eq!(event["event"], expected, "{name}: {text}");
    }
}

/// An agent whose spawns take a while, so that a parallel run's spawns overlap.
struct Slow {
    inner: Arc<FakeAgent>,
    running: Arc<std::sync::atomic::AtomicUsize>,
    most: Arc<std::sync::atomic::AtomicUsize>,
}

#[async_trait]
impl RoleAgent for Slow {
    fn provider(&self) -> ProviderId {
        self.inner.provider()
    }
    fn model(&self) -> Option<&str> {
        self.inner.model()
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
        cancel: CancellationToken,
        observer: Arc<dyn RunObserver>,
    ) -> SpawnReport {
        let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(now, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(400)).await;
        let report = self.inner.spawn(request, cancel, observer).await;
        self.running.fetch_sub(1, Ordering::SeqCst);
        report
    }
}

/// `--jobs 3` under a sprint cap of a spawn and a half: the coordinator lets a spawn go only
/// while the spend and a spawn's worth for each in flight stay below the cap, so the sprint
/// passes its cap by at most one spawn's cost (three at once would pass it by one and a half).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_jobs_the_sprints_cap_is_passed_by_at_most_one_spawns_cost() {
    let head = SPRINT_HEAD.replace(
        "max_attempts = 2\n",
        "max_attempts = 2\nmax_cost_usd = 0.015\nmax_budget_usd = 0.01\n",
    );
    let p = project_with(&head, THREE_TASKS).await;
    let slow = Slow {
        inner: FakeAgent::new(ProviderId::Claude),
        running: Arc::default(),
        most: Arc::default(),
    };
    let sink = Recorder::default();
    let executor = corral_executor_local::LocalExecutor;
    let summary = run_agents(
        &p,
        &slow,
        None,
        &sink,
        DirtyTree::Refuse,
        CancellationToken::new(),
        3,
        &executor,
    )
    .await
    .unwrap();
    assert_eq!(summary.end, SprintEnd::BudgetExhausted, "{summary:?}");
    let spent = state(&p).usage().total.cost_usd.unwrap();
    // Each fake spawn costs $0.01: the cap ($0.015) passed by at most one of them.
    assert!(spent <= 0.015 + 0.01 + 1e-9, "spent ${spent}");
    assert_eq!(
        slow.most.load(Ordering::SeqCst),
        1,
        "no room for a second spawn beside one"
    );
}

/// The local executor seen as a cluster's (remote): the coordinator admits none of its spawns
/// one by one, and each task spends only the part of the sprint's cap it was started with
/// (`TaskJob::max_cost_usd`, a worker's `--max-cost-usd`), as a Ray worker that sees only its
/// own task's spend would. The parts it was handed, task by task.
#[derive(Default)]
struct RemoteLocal {
    parts: Mutex<Vec<(String, Option<f64>)>>,
}

#[async_trait]
impl TaskExecutor for RemoteLocal {
    fn kind(&self) -> &'static str {
        "remote-local"
    }

    fn is_remote(&self) -> bool {
        true
    }

    async fn run_task(
        &self,
        job: TaskJob,
        host: &dyn TaskHost,
        cancel: &CancellationToken,
    ) -> Result<TaskHandback, corral_sprint::ExecutorError> {
        self.parts
            .lock()
            .unwrap()
            .push((job.task.as_str().to_string(), job.max_cost_usd));
        corral_executor_local::LocalExecutor
            .run_task(job, host, cancel)
            .await
    }
}

/// `--jobs 3` through a remote executor under a sprint cap of a spawn and a half: three
/// workers that each saw only their own task's spend would each spawn (three spawns, past the
/// cap by one and a half); with the parts the coordinator hands them, the tasks in flight
/// together pass it by at most one spawn's cost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_executors_tasks_in_flight_pass_the_sprints_cap_by_at_most_one_spawn() {
    let head = SPRINT_HEAD.replace(
        "max_attempts = 2\n",
        "max_attempts = 2\nmax_cost_usd = 0.015\nmax_budget_usd = 0.01\n",
    );
    let p = project_with(&head, THREE_TASKS).await;
    let slow = Slow {
        inner: FakeAgent::new(ProviderId::Claude),
        running: Arc::default(),
        most: Arc::default(),
    };
    let sink = Recorder::default();
    let executor = RemoteLocal::default();
    let summary = run_agents(
        &p,
        &slow,
        None,
        &sink,
        DirtyTree::Refuse,
        CancellationToken::new(),
        3,
        &executor,
    )
    .await
    .unwrap();
    assert_eq!(summary.end, SprintEnd::BudgetExhausted, "{summary:?}");
    let spent = state(&p).usage().total.cost_usd.unwrap();
    assert!(spent <= 0.015 + 0.01 + 1e-9, "spent ${spent}");
    let parts = executor.parts.lock().unwrap().clone();
    assert!(!parts.is_empty());
    for (task, part) in &parts {
        let part = part.unwrap_or_else(|| panic!("{task} was started without a part: {parts:?}"));
        assert!(part > 0.0 && part <= 0.015, "{task}: {part}");
    }
    // A worker's part spent is no pause of the sprint's: no warning asks to raise a cap the
    // sprint has not reached.
    assert!(
        state(&p)
            .tasks
            .iter()
            .all(|t| t.warnings.iter().all(|w| !w.contains("part"))),
        "{:?}",
        state(&p).tasks
    );
}

/// A task whose part of the cap runs out before its evaluator's spawn goes back to the
/// coordinator and starts again with a new part (the sprint's cap is not reached): the sprint
/// ends done, never past its cap, no task's pause taken for the sprint's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_task_whose_part_is_spent_starts_again_with_a_new_one_while_the_cap_holds() {
    let head = SPRINT_HEAD.replace(
        "max_attempts = 2\n",
        "max_attempts = 2\nmax_cost_usd = 0.07\nmax_budget_usd = 0.01\n",
    );
    let p = project_with(&head, THREE_TASKS).await;
    let generator = FakeAgent::new(ProviderId::Claude);
    let evaluator = FakeAgent::new(ProviderId::Codex);
    let sink = Recorder::default();
    let executor = RemoteLocal::default();
    let summary = run_agents(
        &p,
        &*generator,
        Some(&*evaluator as &dyn RoleAgent),
        &sink,
        DirtyTree::Refuse,
        CancellationToken::new(),
        3,
        &executor,
    )
    .await
    .unwrap();
    assert_eq!(summary.end, SprintEnd::Done, "{summary:?}");
    let spent = state(&p).usage().total.cost_usd.unwrap();
    assert!(spent <= 0.07 + 1e-9, "spent ${spent}");
    let parts = executor.parts.lock().unwrap().clone();
    assert!(
        parts.len() > 3,
        "a task started again with a new part: {parts:?}"
    );
    for t in &state(&p).tasks {
        assert_eq!(t.status, TaskStatus::Done, "{}", t.id);
    }
}

/// A cluster's worker whose task met a told hold and then ended rate limited, as its relayed
/// events say (`spawn-started`, `rate-limit-hold`, `spawn-finished`), and whose handback is a
/// rate-limit pause.
struct LimitedWorker {
    until: String,
}

#[async_trait]
impl TaskExecutor for LimitedWorker {
    fn kind(&self) -> &'static str {
        "limited-worker"
    }

    fn is_remote(&self) -> bool {
        true
    }

    async fn run_task(
        &self,
        job: TaskJob,
        host: &dyn TaskHost,
        _cancel: &CancellationToken,
    ) -> Result<TaskHandback, corral_sprint::ExecutorError> {
        let task = job.task.as_str();
        for event in [
            serde_json::json!({"event": "spawn-started", "task": task, "round": 1,
                "role": "generator", "provider": "claude", "resumes": false}),
            serde_json::json!({"event": "rate-limit-hold", "task": task, "round": 1,
                "role": "generator", "provider": "claude", "until": self.until}),
            serde_json::json!({"event": "spawn-finished", "task": task, "round": 1,
                "role": "generator", "outcome": "rate-limited", "valid": false}),
        ] {
            let serde_json::Value::Object(event) = event else {
                unreachable!()
            };
            host.worker_event(&job.task, &event);
        }
        let mut state = job.resume.clone();
        state.status = TaskStatus::Running;
        Ok(TaskHandback {
            end: corral_sprint::TaskEnd::Paused(SprintEnd::RateLimited),
            head: None,
            state,
            record: host.layout().task_dir(&job.task),
        })
    }
}

/// A worker's hold, relayed and told once, is not told again by the exit-4 pause it ends in.
#[tokio::test]
async fn a_workers_told_hold_is_not_told_again_by_the_pause_it_ends_in() {
    let out = tempfile::tempdir().unwrap();
    let heard = out.path().join("heard.jsonl");
    let head = format!(
        "{SPRINT_HEAD}\n[hooks]\nrate_limited = 'cat >> {}; echo >> {}'\n",
        heard.display(),
        heard.display()
    );
    let p = project_with(&head, THREE_TASKS).await;
    let until = humantime::format_rfc3339_seconds(SystemTime::now() + Duration::from_secs(3600));
    let executor = LimitedWorker {
        until: until.to_string(),
    };
    let generator = FakeAgent::new(ProviderId::Claude);
    let sink = Recorder::default();
    let summary = run_agents(
        &p,
        &*generator,
        None,
        &sink,
        DirtyTree::Refuse,
        CancellationToken::new(),
        1,
        &executor,
    )
    .await
    .unwrap();
    assert_eq!(summary.end, SprintEnd::RateLimited, "{summary:?}");
    let text = std::fs::read_to_string(&heard).unwrap();
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "{text}");
    let event: serde_json::Value = serde_json::from_str(lines[0]).unwrap();
    assert_eq!(event["event"], "rate-limit-hold", "{text}");
}

/// A provider whose first spawn stops at a hold until `until` (its reset reported), as an
/// engine built to hand over does; its later spawns are the fake's.
struct LimitedOnce {
    inner: Arc<FakeAgent>,
    until: SystemTime,
    met: std::sync::atomic::AtomicBool,
}

impl LimitedOnce {
    fn new(provider: ProviderId, until: SystemTime) -> Arc<Self> {
        Arc::new(LimitedOnce {
            inner: FakeAgent::new(provider),
            until,
            met: std::sync::atomic::AtomicBool::new(false),
        })
    }
}

#[async_trait]
impl RoleAgent for LimitedOnce {
    fn provider(&self) -> ProviderId {
        self.inner.provider()
    }
    fn model(&self) -> Option<&str> {
        self.inner.model()
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
        cancel: CancellationToken,
        observer: Arc<dyn RunObserver>,
    ) -> SpawnReport {
        if self.met.swap(true, Ordering::SeqCst) {
            return self.inner.spawn(request, cancel, observer).await;
        }
        let reset = self
            .until
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        SpawnReport {
            outcome: Outcome::RateLimited,
            session_id: None,
            verdict: SpawnVerdict::NotChecked,
            usage: Usage::default(),
            error: Some(SpawnFailure {
                class: ErrorClass::Retryable,
                message: "rate limited: held longer than the role waits before handing over"
                    .to_string(),
                resets_at_epoch_s: Some(reset),
            }),
            attempts: 1,
            stray_writes: Vec::new(),
        }
    }
}

/// Every provider of a role held: the role goes on with the one whose hold ends first, on its
/// waiting agent (which waits for the reset, or pauses), whether it is listed first or last.
#[tokio::test]
async fn with_every_provider_held_the_role_goes_on_with_the_one_whose_hold_ends_first() {
    let hour = Duration::from_secs(3600);
    for (claude_hold, codex_hold, first) in [
        (hour, 2 * hour, ProviderId::Claude),
        (2 * hour, hour, ProviderId::Codex),
    ] {
        let p = project(THREE_TASKS).await;
        let now = SystemTime::now();
        let claude = LimitedOnce::new(ProviderId::Claude, now + claude_hold);
        let codex = LimitedOnce::new(ProviderId::Codex, now + codex_hold);
        let claude_waits = FakeAgent::new(ProviderId::Claude);
        let codex_waits = FakeAgent::new(ProviderId::Codex);
        let role = FailoverAgent::new(
            vec![
                Arc::clone(&claude) as Arc<dyn RoleAgent>,
                Arc::clone(&codex) as Arc<dyn RoleAgent>,
            ],
            Duration::from_secs(60),
        )
        .unwrap()
        .with_waiting(vec![
            Arc::clone(&claude_waits) as Arc<dyn RoleAgent>,
            Arc::clone(&codex_waits) as Arc<dyn RoleAgent>,
        ]);
        let sink = Recorder::default();
        let summary = run_role(&p, &role, &sink).await;
        assert_eq!(summary.end, SprintEnd::Done, "{first:?} first: {summary:?}");
        let (waited, idle) = if first == ProviderId::Claude {
            (&claude_waits, &codex_waits)
        } else {
            (&codex_waits, &claude_waits)
        };
        // Every task's spawn, while both are held, waited on the first to be free.
        let tasks: Vec<String> = waited.seen().iter().map(|s| s.task.clone()).collect();
        assert_eq!(tasks, ["a", "b", "c"], "{first:?} first");
        assert!(idle.seen().is_empty(), "{first:?} first");
        let handovers: Vec<(ProviderId, ProviderId)> = task_state(&p, "a")
            .handovers
            .iter()
            .map(|h| (h.from, h.to))
            .collect();
        let expected = if first == ProviderId::Claude {
            vec![
                (ProviderId::Claude, ProviderId::Codex),
                (ProviderId::Codex, ProviderId::Claude),
            ]
        } else {
            vec![(ProviderId::Claude, ProviderId::Codex)]
        };
        assert_eq!(handovers, expected, "{first:?} first");
    }
}

/// Every provider held and the first reset's provider pausing instead of waiting (as its
/// engine does with `retry.auto_resume = false`): the sprint pauses (exit 4) after that one
/// spawn, not handing the work round and round.
#[tokio::test]
async fn with_every_provider_held_and_no_auto_resume_the_sprint_pauses_once() {
    let hour = Duration::from_secs(3600);
    let p = project(THREE_TASKS).await;
    let now = SystemTime::now();
    let claude = LimitedOnce::new(ProviderId::Claude, now + 2 * hour);
    let codex = LimitedOnce::new(ProviderId::Codex, now + hour);
    let claude_waits = FakeAgent::new(ProviderId::Claude);
    let codex_pauses = LimitedOnce::new(ProviderId::Codex, now + hour);
    let role = FailoverAgent::new(
        vec![
            Arc::clone(&claude) as Arc<dyn RoleAgent>,
            Arc::clone(&codex) as Arc<dyn RoleAgent>,
        ],
        Duration::from_secs(60),
    )
    .unwrap()
    .with_waiting(vec![
        Arc::clone(&claude_waits) as Arc<dyn RoleAgent>,
        Arc::clone(&codex_pauses) as Arc<dyn RoleAgent>,
    ]);
    let sink = Recorder::default();
    let summary = run_role(&p, &role, &sink).await;
    assert_eq!(summary.end, SprintEnd::RateLimited, "{summary:?}");
    assert!(
        codex_pauses.met.load(Ordering::SeqCst),
        "codex's waiting agent ran"
    );
    assert!(codex_pauses.inner.seen().is_empty(), "and paused at once");
    assert!(claude_waits.seen().is_empty());
}
