//! The merge queue killed at any point of a fold, its check or a send-home, then run again.

use super::*;

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
