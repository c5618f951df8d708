//! The merge queue: folds sent home (a conflict, a check broken together), a change already
//! on the branch, overlapping tasks held apart.

use super::*;

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
