//! A sprint left overnight (issue 31): the record of its events (`events.jsonl`), its hooks,
//! and its spend caps.

use super::*;

/// The name of each event, as `--json` tags it.
fn names(events: &[SprintEvent]) -> Vec<String> {
    events
        .iter()
        .map(|e| {
            serde_json::to_value(e).unwrap()["event"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect()
}

fn recorded(p: &Project) -> Vec<serde_json::Map<String, serde_json::Value>> {
    let text = std::fs::read_to_string(layout(p).events_file()).unwrap();
    corral_sprint::read_events(&text)
}

#[tokio::test]
async fn every_event_is_recorded_in_events_jsonl_with_its_wall_and_monotonic_times() {
    let p = project(THREE_TASKS).await;
    let generator = FakeAgent::new(ProviderId::Claude);
    let evaluator = FakeAgent::new(ProviderId::Codex);
    let sink = Recorder::default();
    let summary = run(
        &p,
        &generator,
        Some(&evaluator),
        &sink,
        DirtyTree::Refuse,
        CancellationToken::new(),
    )
    .await
    .unwrap();
    assert_eq!(summary.end, SprintEnd::Done);

    let lines = recorded(&p);
    let seen = sink.events.lock().unwrap().clone();
    let written: Vec<String> = lines
        .iter()
        .map(|l| l["event"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(written, names(&seen), "the record holds what --json prints");
    // Each line is the event's --json object with the two times beside it.
    for (line, event) in lines.iter().zip(&seen) {
        let mut line = line.clone();
        assert_eq!(
            line.remove(corral_sprint::WALL_TIME_KEY),
            Some(now().into())
        );
        assert!(line.remove(corral_sprint::MONOTONIC_KEY).unwrap().is_u64());
        assert_eq!(
            serde_json::Value::Object(line),
            serde_json::to_value(event).unwrap()
        );
    }
    let clock: Vec<u64> = lines
        .iter()
        .map(|l| l[corral_sprint::MONOTONIC_KEY].as_u64().unwrap())
        .collect();
    assert!(clock.windows(2).all(|w| w[0] <= w[1]), "{clock:?}");

    // A second run appends to the same record (a new `sprint-started`).
    let again = run_plain(&p, &generator, Some(&evaluator)).await.unwrap();
    assert_eq!(again.end, SprintEnd::Done);
    let all = recorded(&p);
    let starts = all
        .iter()
        .filter(|l| l["event"] == "sprint-started")
        .count();
    assert_eq!(starts, 2);
    assert!(all.len() > lines.len());
}

#[test]
fn a_last_line_cut_short_by_a_kill_is_left_out_and_reading_goes_on_after_the_complete_ones() {
    let text = "{\"event\":\"sprint-started\"}\nnot json\n{\"event\":\"task-started\",\"ta";
    let events = corral_sprint::read_events(text);
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["event"], "sprint-started");
    let (events, used) = corral_sprint::complete_lines(text.as_bytes());
    assert_eq!(events.len(), 1);
    assert_eq!(&text[used..], "{\"event\":\"task-started\",\"ta");
}

#[tokio::test]
async fn a_link_planted_as_the_record_of_events_is_not_followed_and_the_sprint_goes_on() {
    let p = project(THREE_TASKS).await;
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("victim.txt");
    std::fs::write(&target, "untouched\n").unwrap();
    let events_file = layout(&p).events_file();
    std::fs::create_dir_all(events_file.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(&target, &events_file).unwrap();
    // The record is git-ignored as a sprint makes it: the planted link is no user change.
    std::fs::write(p.root.join(".corral/.gitignore"), "*\n").unwrap();

    let generator = FakeAgent::new(ProviderId::Claude);
    let sink = Recorder::default();
    let summary = run(
        &p,
        &generator,
        None,
        &sink,
        DirtyTree::Refuse,
        CancellationToken::new(),
    )
    .await
    .unwrap();
    assert_eq!(summary.end, SprintEnd::Done);
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "untouched\n");
    let told: Vec<SprintEvent> = sink
        .events
        .lock()
        .unwrap()
        .iter()
        .filter(|e| matches!(e, SprintEvent::RecordUnwritable { .. }))
        .cloned()
        .collect();
    assert_eq!(told.len(), 1, "told once: {told:?}");
}

#[tokio::test]
async fn hooks_hear_their_moments_on_stdin_and_one_that_fails_or_hangs_never_holds_the_sprint() {
    let out = tempfile::tempdir().unwrap();
    let out_dir = out.path().display().to_string();
    let head = format!(
        "{SPRINT_HEAD}\n[hooks]\n\
         task_finished = 'cat >> {out_dir}/finished.jsonl; echo \"$CORRAL_HOOK\" >> {out_dir}/moments'\n\
         blocked = 'echo nobody listens >&2; exit 3'\n\
         sprint_finished = 'cat > {out_dir}/end.json; sleep 60'\n\
         timeout_ms = 1000\n"
    );
    let p = project_with(&head, THREE_TASKS).await;
    let generator = FakeAgent::new(ProviderId::Claude);
    generator.on(
        "b",
        1,
        Role::Generator,
        Act::Write {
            files: vec![],
            remove: vec![],
            signals: blocked("cannot"),
        },
    );
    let started = std::time::Instant::now();
    let summary = run_plain(&p, &generator, None).await.unwrap();
    assert_eq!(summary.end, SprintEnd::Blocked);
    // The hanging hook was killed at its time, not waited for to its end.
    assert!(started.elapsed() < Duration::from_secs(50));

    let finished = std::fs::read_to_string(out.path().join("finished.jsonl")).unwrap();
    let events = corral_sprint::read_events(&finished);
    let tasks: Vec<&str> = events.iter().map(|e| e["task"].as_str().unwrap()).collect();
    assert_eq!(tasks, ["a", "b", "c"]);
    assert!(events.iter().all(|e| e["event"] == "task-finished"));
    assert!(
        events
            .iter()
            .all(|e| e.contains_key(corral_sprint::WALL_TIME_KEY))
    );
    let moments = std::fs::read_to_string(out.path().join("moments")).unwrap();
    assert_eq!(moments, "task-finished\ntask-finished\ntask-finished\n");
    let end = std::fs::read_to_string(out.path().join("end.json")).unwrap();
    assert_eq!(
        corral_sprint::read_events(&end)[0]["summary"]["end"],
        "blocked"
    );

    let log =
        std::fs::read_to_string(layout(&p).root().join(corral_sprint::HOOKS_LOG_FILE)).unwrap();
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(lines.len(), 5, "{log}");
    assert!(
        lines
            .iter()
            .any(|l| l.contains(" blocked ") && l.contains("failed (exit 3): nobody listens")),
        "{log}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains(" sprint-finished ") && l.contains("killed after 1 s")),
        "{log}"
    );
}

const CAPPED_HEAD: &str = r#"
[sprint]
name = "s"
check = "test ! -e BROKEN"
max_cost_usd = 0.025
max_budget_usd = 0.5
max_turns = 12

[roles.generator]
provider = "claude"

[roles.evaluator]
provider = "codex"
"#;

#[tokio::test]
async fn the_sprint_pauses_at_its_spend_cap_and_goes_on_where_it_stopped_once_it_is_raised() {
    // Every fake spawn costs $0.01: the cap is met after three, before the fourth.
    let p = project_with(CAPPED_HEAD, THREE_TASKS).await;
    let generator = FakeAgent::new(ProviderId::Claude);
    let evaluator = FakeAgent::new(ProviderId::Codex);
    let summary = run_plain(&p, &generator, Some(&evaluator)).await.unwrap();
    assert_eq!(summary.end, SprintEnd::BudgetExhausted);
    assert_eq!(summary.exit_code, 9);
    let spent = summary.roll_up.total.cost_usd.unwrap();
    assert!((spent - 0.03).abs() < 1e-9, "{spent}");
    // Past the cap by no more than one spawn's cost.
    assert!(spent <= 0.025 + 0.01 + 1e-9);
    let b = summary.tasks.iter().find(|t| t.id.as_str() == "b").unwrap();
    assert_eq!(b.status, TaskStatus::Running);
    let warning = b.warnings.last().unwrap();
    assert!(warning.contains("max_cost_usd is $0.025"), "{warning}");
    assert!(warning.contains("budget-exhausted"), "{warning}");
    // The per-spawn caps went with every spawn.
    for seen in generator.seen().iter().chain(evaluator.seen().iter()) {
        assert_eq!(seen.request.max_budget_usd, Some(0.5));
        assert_eq!(seen.request.max_turns, Some(12));
    }
    let generator_spawns = generator.seen().len();

    // Raised: the rerun goes on at b's review, its generator round not run again.
    let file = p.root.join("corral-sprint.toml");
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(
        &file,
        text.replace("max_cost_usd = 0.025", "max_cost_usd = 1"),
    )
    .unwrap();
    let summary = run_plain(&p, &generator, Some(&evaluator)).await.unwrap();
    assert_eq!(summary.end, SprintEnd::Done);
    assert_eq!(
        generator.seen().len(),
        generator_spawns + 1,
        "only c's generator ran"
    );
    assert_eq!(generator.seen_for("b", 1).len(), 1);
    assert_eq!(evaluator.seen_for("b", 1).len(), 1);
    assert_eq!(commits(&p).await.len(), 3);
}

#[tokio::test]
async fn a_tasks_own_cap_pauses_it_before_its_next_round() {
    let tasks = THREE_TASKS.replacen(
        "prompt = \"Write a.txt.\"",
        "prompt = \"Write a.txt.\"\nmax_cost_usd = 0.015",
        1,
    );
    let p = project(&tasks).await;
    let generator = FakeAgent::new(ProviderId::Claude);
    let evaluator = FakeAgent::new(ProviderId::Codex);
    evaluator.on(
        "a",
        1,
        Role::Evaluator,
        Act::Write {
            files: vec![],
            remove: vec![],
            signals: evaluation(Some("incomplete")),
        },
    );
    let summary = run_plain(&p, &generator, Some(&evaluator)).await.unwrap();
    assert_eq!(summary.end, SprintEnd::BudgetExhausted);
    assert_eq!(generator.seen_for("a", 2).len(), 0);
    let a = &state(&p).tasks[0];
    assert_eq!(a.round, 2);
    assert!(
        a.warnings
            .last()
            .unwrap()
            .contains("task a has spent $0.02, its max_cost_usd is $0.015"),
        "{:?}",
        a.warnings
    );
}

/// A fake whose CLI reports tokens and no cost, as Codex and OpenCode do.
struct TokensOnly(Arc<FakeAgent>);

#[async_trait]
impl RoleAgent for TokensOnly {
    fn provider(&self) -> ProviderId {
        self.0.provider()
    }
    fn model(&self) -> Option<&str> {
        self.0.model()
    }
    fn effort(&self) -> Option<Effort> {
        None
    }
    fn resumes(&self) -> bool {
        self.0.resumes()
    }
    async fn spawn(
        &self,
        request: SpawnRequest,
        cancel: CancellationToken,
        observer: Arc<dyn RunObserver>,
    ) -> SpawnReport {
        let mut report = self.0.spawn(request, cancel, observer).await;
        report.usage.cost_usd = None;
        report
    }
}

#[tokio::test]
async fn a_cost_only_counted_in_tokens_is_estimated_from_the_price_table_and_marked_so() {
    // 110 tokens a spawn at $100 a million (the tests' table): $0.011 each.
    let head = CAPPED_HEAD
        .replace("max_cost_usd = 0.025", "max_cost_usd = 0.02")
        .replace("max_budget_usd = 0.5\nmax_turns = 12\n", "")
        .replace(
            "[roles.evaluator]\nprovider = \"codex\"",
            "[roles.evaluator]\nenabled = false",
        );
    let p = project_with(&head, THREE_TASKS).await;
    let generator = TokensOnly(FakeAgent::new(ProviderId::Codex));
    let file = corral_sprint::load(&p.root.join("corral-sprint.toml")).unwrap();
    let commands = runner();
    let summary = run_sprint(corral_sprint::SprintRun {
        file: &file,
        project_root: &p.root,
        generator: &generator,
        evaluator: None,
        commands: &commands,
        executor: &corral_executor_local::LocalExecutor,
        events: &Recorder::default(),
        options: RunOptions {
            dirty: DirtyTree::Refuse,
            run_id: "run-1".to_string(),
            now,
            git_env: IDENTITY
                .iter()
                .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
                .collect(),
            jobs: 1,
            prices: prices(),
        },
        cancel: CancellationToken::new(),
    })
    .await
    .unwrap();
    assert_eq!(summary.end, SprintEnd::BudgetExhausted);
    let spent = summary.roll_up.total.cost_usd.unwrap();
    assert!((spent - 0.022).abs() < 1e-9, "{spent}");
    let state = state(&p);
    assert!(state.tasks[0].cost_estimated && state.tasks[1].cost_estimated);
    assert!(!state.tasks[2].cost_estimated);
    assert_eq!(state.tasks[2].status, TaskStatus::Running);
}

/// The cap met before a generator's spawn, raised in the sprint file as the warning says: the
/// rerun's round is not blamed for that edit (the protected files are fingerprinted once the
/// spawn is sure to run, not before the cap was looked at), so the raise stands and the task is
/// done in its first round.
#[tokio::test]
async fn a_cap_raised_before_a_generators_round_is_not_the_rounds_change_to_the_sprint_file() {
    // Without an evaluator, every spawn is a generator's: the cap is met before b's.
    let head = CAPPED_HEAD.replace("max_cost_usd = 0.025", "max_cost_usd = 0.005");
    let p = project_with(&head, THREE_TASKS).await;
    let generator = FakeAgent::new(ProviderId::Claude);
    let summary = run_plain(&p, &generator, None).await.unwrap();
    assert_eq!(summary.end, SprintEnd::BudgetExhausted);
    let file = p.root.join("corral-sprint.toml");
    let text = std::fs::read_to_string(&file).unwrap();
    let raised = text.replace("max_cost_usd = 0.005", "max_cost_usd = 1");
    std::fs::write(&file, &raised).unwrap();
    let summary = run_plain(&p, &generator, None).await.unwrap();
    assert_eq!(summary.end, SprintEnd::Done, "{summary:?}");
    for t in &summary.tasks {
        assert_eq!(t.rounds, 1, "{t:?}");
        assert!(
            !t.warnings.iter().any(|w| w.contains("protected")),
            "{:?}",
            t.warnings
        );
    }
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        raised,
        "the raise stands"
    );
}
