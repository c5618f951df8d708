//! A sprint stopped (killed, cancelled, rate limited) and run again: each round and commit
//! made once, sessions resumed where they can be.

use super::*;

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
