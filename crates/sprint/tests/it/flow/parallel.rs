//! Parallel runs (`--jobs` above 1): tasks in worktrees, slots, tasks started ahead, setup
//! per worktree, a kill with tasks in flight.

use super::*;

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
        // a and b hold the two slots and never end: c is in flight, its rounds wait. Driven
        // until both have spawned (however slow the machine), then a while longer, in which a
        // round of c would have started had it not waited.
        let mut after_both = 0;
        for _ in 0..3000 {
            if after_both == 25 {
                break;
            }
            tokio::select! {
                r = &mut fut => panic!("the sprint ended while a hangs: {r:?}"),
                () = tokio::time::sleep(Duration::from_millis(20)) => {}
            }
            if generator.seen().len() >= 2 {
                after_both += 1;
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
