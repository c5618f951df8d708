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
    let ended = run_dropped(p, generator, &commands, &sink, &frozen).await;
    let seen = sink.seen.lock().unwrap().clone();
    (seen, ended)
}

/// Runs `p`'s sprint with `--jobs 2` through `commands`, telling `sink`, until it ends (true)
/// or `frozen` is set; then drops it, as a `kill -9` would.
async fn run_dropped(
    p: &Project,
    generator: &FakeAgent,
    commands: &dyn CommandRunner,
    sink: &dyn EventSink,
    frozen: &std::sync::atomic::AtomicBool,
) -> bool {
    let file = corral_sprint::load(&p.root.join("corral-sprint.toml")).unwrap();
    let executor = corral_executor_local::LocalExecutor;
    let run = corral_sprint::SprintRun {
        file: &file,
        project_root: &p.root,
        generator,
        evaluator: None,
        commands,
        executor: &executor,
        events: sink,
        options: RunOptions {
            dirty: DirtyTree::Refuse,
            run_id: "run-1".to_string(),
            now,
            git_env: IDENTITY
                .iter()
                .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
                .collect(),
            jobs: 2,
            prices: corral_sprint::PriceTable::default(),
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
    ended
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

/// A runner armed by [`ArmAtFailedFold`]: from then on it counts the commands, and freezes
/// before the `k`-th (0-based), so that dropping the run is a `kill -9` between two of the
/// steps that take a failed fold back and send its task home (or block it).
struct FreezeAfterArmed {
    inner: HostCommandRunner,
    armed: Arc<std::sync::atomic::AtomicBool>,
    k: usize,
    /// The commands since it was armed, the one it froze before last.
    counted: Mutex<Vec<String>>,
    frozen: Arc<std::sync::atomic::AtomicBool>,
}

#[async_trait]
impl CommandRunner for FreezeAfterArmed {
    async fn run(
        &self,
        spec: CommandSpec,
        cancel: &CancellationToken,
    ) -> Result<corral_ports::CommandOutput, corral_ports::CommandError> {
        use std::sync::atomic::Ordering::SeqCst;
        if !self.frozen.load(SeqCst) && self.armed.load(SeqCst) {
            let mut counted = self.counted.lock().unwrap();
            counted.push(spec.args.join(" "));
            if counted.len() > self.k {
                self.frozen.store(true, SeqCst);
            }
        }
        if self.frozen.load(SeqCst) {
            std::future::pending::<()>().await;
        }
        self.inner.run(spec, cancel).await
    }
}

/// Arms the runner at the `n`-th (1-based) failed `fold-checked` event; records the events.
struct ArmAtFailedFold {
    n: usize,
    seen: Mutex<Vec<SprintEvent>>,
    armed: Arc<std::sync::atomic::AtomicBool>,
}

impl EventSink for ArmAtFailedFold {
    fn event(&self, event: &SprintEvent) {
        let mut seen = self.seen.lock().unwrap();
        seen.push(event.clone());
        let failed = seen
            .iter()
            .filter(|e| matches!(e, SprintEvent::FoldChecked { passed: false, .. }))
            .count();
        if failed == self.n {
            self.armed.store(true, std::sync::atomic::Ordering::SeqCst);
        }
    }
}

/// Runs `p`'s sprint, killed before the `k`-th command after its `n`-th failed fold check;
/// whether it ended first, and the command it was killed before.
async fn killed_after_failed_fold(
    p: &Project,
    generator: &FakeAgent,
    n: usize,
    k: usize,
) -> (bool, Option<String>) {
    let armed = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let frozen = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sink = ArmAtFailedFold {
        n,
        seen: Mutex::new(Vec::new()),
        armed: armed.clone(),
    };
    let commands = FreezeAfterArmed {
        inner: runner(),
        armed,
        k,
        counted: Mutex::new(Vec::new()),
        frozen: frozen.clone(),
    };
    let ended = run_dropped(p, generator, &commands, &sink, &frozen).await;
    let last = commands.counted.lock().unwrap().get(k).cloned();
    (ended, last)
}

/// Inside the send-home: a kill before each command from the failed fold check on (the
/// `reset --hard` that takes the fold back, the worktree's removal, the patch, the
/// `.sent-home` branch, the task's branch moved to the tip) and so between any two of them and
/// the state's write, then a rerun: the task is sent home once, not twice, each task is
/// committed once and the folded check passes. Then the same inside the second failed fold,
/// which blocks the task: the rerun blocks it too, with its change kept and nothing folded.
#[tokio::test]
async fn a_kill_inside_a_send_home_or_a_block_then_a_rerun_sends_home_once_and_commits_once() {
    let tasks = THREE_TASKS.split("[[tasks]]\nid = \"c\"").next().unwrap();
    let together = || {
        let generator = FakeAgent::new(ProviderId::Claude);
        generator.on(
            "b",
            2,
            Role::Generator,
            write(&[("b.txt", "done\n"), ("fixed.txt", "fixed\n")]),
        );
        generator
    };
    let mut killed_before = Vec::new();
    for k in 0.. {
        let p = project_checked(TOGETHER_CHECK, tasks).await;
        let (ended, before) = killed_after_failed_fold(&p, &together(), 1, k).await;
        if ended {
            break;
        }
        let before = before.unwrap();
        let (_, again) = run_frozen(&p, &together(), usize::MAX, None).await;
        assert!(again, "killed before `{before}`: the rerun ends");
        let state = state(&p);
        assert!(
            state.tasks.iter().all(|t| t.status == TaskStatus::Done
                && t.task_branch.is_none()
                && t.fold_onto.is_none()),
            "killed before `{before}`: {state:?}"
        );
        assert_eq!(
            task_state(&p, "b").sent_home,
            1,
            "killed before `{before}`: sent home once"
        );
        assert_eq!(
            commits(&p).await,
            vec![
                ("Task a".to_string(), "a".to_string()),
                ("Task b".to_string(), "b".to_string()),
            ],
            "killed before `{before}`: each task committed once"
        );
        assert!(
            branch_exists(&p, "corral/s.tasks/b.sent-home").await,
            "killed before `{before}`"
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
            "killed before `{before}`: the folded check passes"
        );
        assert_eq!(status_porcelain(&p).await, "", "killed before `{before}`");
        killed_before.push(before);
        assert!(
            k < 40,
            "the run never got past the send-home: {killed_before:?}"
        );
    }
    // Every step of the send-home was a kill point.
    for step in [
        "reset --hard",
        "worktree remove",
        "diff --binary",
        "branch --force corral/s.tasks/b.sent-home",
        "branch --force corral/s.tasks/b ",
    ] {
        assert!(
            killed_before.iter().any(|c| c.contains(step)),
            "no kill before `{step}`: {killed_before:?}"
        );
    }

    let mut killed_before = Vec::new();
    for k in 0.. {
        let p = project_checked(FAILS_ONLY_ON_THE_BRANCH, tasks).await;
        let generator = FakeAgent::new(ProviderId::Claude);
        let (ended, before) = killed_after_failed_fold(&p, &generator, 2, k).await;
        if ended {
            break;
        }
        let before = before.unwrap();
        let (_, again) = run_frozen(&p, &generator, usize::MAX, None).await;
        assert!(again, "killed before `{before}`: the rerun ends");
        let b = task_state(&p, "b");
        assert_eq!(
            (b.status, b.sent_home),
            (TaskStatus::Blocked, 1),
            "killed before `{before}`"
        );
        assert!(b.task_branch.is_none() && b.fold_onto.is_none());
        assert_eq!(
            commits(&p).await,
            vec![("Task a".to_string(), "a".to_string())],
            "killed before `{before}`: b is not on the sprint's branch"
        );
        assert!(!p.root.join("b.txt").exists(), "killed before `{before}`");
        assert_eq!(
            git(&p.root, &["show", "corral/s.tasks/b:b.txt"]).await,
            "done\n",
            "killed before `{before}`: b's change stays on its branch"
        );
        assert_eq!(status_porcelain(&p).await, "", "killed before `{before}`");
        killed_before.push(before);
        assert!(
            k < 40,
            "the run never got past the block: {killed_before:?}"
        );
    }
    assert!(
        killed_before.iter().any(|c| c.contains("reset --hard")),
        "{killed_before:?}"
    );
}
