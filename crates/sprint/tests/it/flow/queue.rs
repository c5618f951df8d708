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

/// The `SentHome`, `Held` and `Folded` events of a run, as (task, what) lines.
fn queue_events(sink: &Recorder) -> Vec<String> {
    sink.events
        .lock()
        .unwrap()
        .iter()
        .filter_map(|e| match e {
            SprintEvent::SentHome { task, round, .. } => Some(format!("{task} home {round}")),
            SprintEvent::Held {
                task,
                behind,
                overlap,
            } => Some(format!("{task} held behind {behind}: {overlap}")),
            SprintEvent::Folded { task, how, .. } => Some(format!("{task} folded {how}")),
            _ => None,
        })
        .collect()
}

/// Three tasks that change the same lines and end at once (a's round waits for b's and c's
/// to end): a folds, b and c conflict with it in the same pass of folds and are both sent
/// home at a's fold. Neither declares `touches`: c is held behind b by what their first
/// attempts changed (`sent-home.patch`, the rounds' `diff.patch`), and starts its round at
/// the tip after b's fold, not at the tip it was sent home at (where its change would meet
/// b's again and block it). Each change taken back stays on `<branch>.sent-home`.
#[tokio::test]
async fn tasks_sent_home_together_are_held_apart_by_what_they_changed_and_restart_at_the_tip() {
    let p = project(THREE_TASKS).await;
    let generator = FakeAgent::new(ProviderId::Claude);
    let sink = Recorder::default();
    let others_ended = Gate::default();
    sink.open_when(&others_ended, |events| {
        ["b", "c"].iter().all(|id| {
            events.iter().any(
                |e| matches!(e, SprintEvent::TaskFinished { task, .. } if task.as_str() == *id),
            )
        })
    });
    generator.on(
        "a",
        1,
        Role::Generator,
        Act::Await(others_ended, Box::new(write(&[("README", "a's words\n")]))),
    );
    generator.on("b", 1, Role::Generator, write(&[("README", "b's words\n")]));
    generator.on("c", 1, Role::Generator, write(&[("README", "c's words\n")]));
    generator.on(
        "b",
        2,
        Role::Generator,
        write(&[("README", "a's words\nb's words\n")]),
    );
    generator.on(
        "c",
        2,
        Role::Generator,
        write(&[("README", "a's words\nb's words\nc's words\n")]),
    );
    let summary = run_parallel(&p, &generator, None, &sink).await.unwrap();
    assert_eq!(summary.end, SprintEnd::Done);
    assert_eq!(
        queue_events(&sink),
        [
            "a folded fast-forward",
            "b home 2",
            "c home 2",
            "c held behind b: `README` and `README`",
            "b folded fast-forward",
            "c folded fast-forward",
        ],
        "c's round starts on b's fold: its commit fast-forwards the branch"
    );
    assert_eq!(
        commits(&p).await,
        vec![
            ("Task a".to_string(), "a".to_string()),
            ("Task b".to_string(), "b".to_string()),
            ("Task c".to_string(), "c".to_string()),
        ]
    );
    assert_eq!(
        std::fs::read_to_string(p.root.join("README")).unwrap(),
        "a's words\nb's words\nc's words\n"
    );
    for (id, words) in [("b", "b's words\n"), ("c", "c's words\n")] {
        let c = task_state(&p, id);
        assert_eq!((c.status, c.round, c.sent_home), (TaskStatus::Done, 2, 1));
        // The change taken back off the branch is kept on a branch of its own, whole: its
        // one commit, with its trailer, on the tree it was made on.
        let kept = format!("corral/s.tasks/{id}.sent-home");
        assert!(branch_exists(&p, &kept).await, "{kept}");
        assert_eq!(
            git(&p.root, &["show", &format!("{kept}:README")]).await,
            words
        );
        let trailer = git(
            &p.root,
            &[
                "log",
                "-1",
                "--format=%(trailers:key=Corral-Task,valueonly)",
                &kept,
            ],
        )
        .await;
        assert_eq!(trailer.trim(), id);
        assert_eq!(
            git(&p.root, &["rev-list", "--count", &format!("main..{kept}")])
                .await
                .trim(),
            "1"
        );
        let on_branch = runner()
            .run(
                CommandSpec::git(
                    ["merge-base", "--is-ancestor", kept.as_str(), "corral/s"],
                    &p.root,
                    Duration::from_secs(30),
                ),
                &CancellationToken::new(),
            )
            .await
            .unwrap();
        assert!(!on_branch.success(), "{kept} is not on the sprint's branch");
        // Its round sent home was told where the change is kept.
        let told = &generator.seen_for(id, 2)[0].request.prompt;
        assert!(told.contains(&format!("branch {kept}")), "{told}");
    }
    assert_eq!(status_porcelain(&p).await, "");
}

#[tokio::test]
async fn a_fold_that_fails_again_after_the_round_sent_home_blocks_the_task_and_keeps_its_change() {
    let tasks = THREE_TASKS.replace(
        "prompt = \"Write c.txt.\"",
        "prompt = \"Write c.txt.\"\ndepends_on = [\"b\"]",
    );
    let p = project_checked(FAILS_ONLY_ON_THE_BRANCH, &tasks).await;
    let generator = FakeAgent::new(ProviderId::Claude);
    let sink = Recorder::default();
    let summary = run_parallel(&p, &generator, None, &sink).await.unwrap();
    assert_eq!(summary.end, SprintEnd::Blocked);
    let checks: Vec<(String, bool)> = sink
        .events
        .lock()
        .unwrap()
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
        [
            ("a".to_string(), true),
            ("b".to_string(), false),
            ("b".to_string(), false)
        ]
    );
    assert_eq!(
        queue_events(&sink)
            .iter()
            .filter(|e| e.contains("home"))
            .collect::<Vec<_>>(),
        ["b home 2"],
        "sent home once, not twice"
    );
    let b = task_state(&p, "b");
    assert_eq!(
        (b.status, b.round, b.sent_home),
        (TaskStatus::Blocked, 2, 1)
    );
    assert_eq!(b.attribution, Some(Attribution::BrokeOnFold));
    let reason = b.reason.unwrap();
    assert!(
        reason.contains("the check failed on the sprint branch")
            && reason.contains("after the round it was sent home for")
            && reason.contains("its change stays on branch corral/s.tasks/b"),
        "{reason}"
    );
    assert!(b.commit.is_none() && b.task_branch.is_none() && b.fold_onto.is_none());
    // The second round's change is on the task's branch, and off the sprint's.
    assert_eq!(
        git(&p.root, &["show", "corral/s.tasks/b:b.txt"]).await,
        "done\n"
    );
    assert!(!p.root.join("b.txt").exists());
    assert_eq!(
        commits(&p).await,
        vec![("Task a".to_string(), "a".to_string())]
    );
    let c = task_state(&p, "c");
    assert_eq!(c.status, TaskStatus::Skipped, "b's dependent");
    assert!(generator.seen_for("c", 1).is_empty());
    assert_eq!(generator.seen_for("b", 3).len(), 0, "no third round");
    assert_eq!(status_porcelain(&p).await, "");
}

/// The gates of the paths a fold changed run on the sprint's branch after it, and the
/// `fold-checked` event names them: no more (a gate whose paths the fold left alone does not
/// run), no fewer.
#[tokio::test]
async fn the_fold_check_runs_the_gates_of_the_paths_the_fold_changed() {
    let head = format!(
        "{SPRINT_HEAD}\n[[gates]]\npath = \"src/\"\ncommand = \"echo the src gate ran\"\n\n\
         [[gates]]\npath = \"docs/\"\ncommand = \"echo the docs gate ran\"\n"
    );
    let p = project_with(&head, THREE_TASKS).await;
    let generator = FakeAgent::new(ProviderId::Claude);
    generator.on("a", 1, Role::Generator, write(&[("src/a.rs", "// a\n")]));
    generator.on(
        "b",
        1,
        Role::Generator,
        write(&[("docs/b.md", "b\n"), ("src/b.rs", "// b\n")]),
    );
    generator.on("c", 1, Role::Generator, write(&[("c.txt", "c\n")]));
    let sink = Recorder::default();
    let summary = run_parallel(&p, &generator, None, &sink).await.unwrap();
    assert_eq!(summary.end, SprintEnd::Done);
    let checked: Vec<(String, bool, Vec<String>)> = sink
        .events
        .lock()
        .unwrap()
        .iter()
        .filter_map(|e| match e {
            SprintEvent::FoldChecked {
                task,
                passed,
                gates,
            } => Some((task.as_str().to_string(), *passed, gates.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(
        checked,
        [
            ("a".to_string(), true, vec!["src/".to_string()]),
            (
                "b".to_string(),
                true,
                vec!["src/".to_string(), "docs/".to_string()]
            ),
            ("c".to_string(), true, Vec::new()),
        ]
    );
    let report = |id: &str| {
        std::fs::read_to_string(
            layout(&p)
                .task_dir(&TaskId::new(id).unwrap())
                .join("fold-check.txt"),
        )
        .unwrap()
    };
    assert!(report("a").contains("the src gate ran"), "{}", report("a"));
    assert!(
        !report("a").contains("the docs gate ran"),
        "{}",
        report("a")
    );
    assert!(report("b").contains("the docs gate ran"), "{}", report("b"));
    assert!(!report("c").contains("gate ran"), "{}", report("c"));
}

/// `fold_check = "off"`: the queue as it was before it checked its folds. Two tasks that each
/// pass the check and break it together are both committed, nothing is checked after the
/// folds and nothing is sent home; the branch ends with its check failing.
#[tokio::test]
async fn with_fold_check_off_two_tasks_that_break_the_check_together_are_both_committed() {
    let head = SPRINT_HEAD.replace(
        "check = \"test ! -e BROKEN\"",
        &format!(
            "check = {}\nfold_check = \"off\"",
            toml_string(TOGETHER_CHECK)
        ),
    );
    let p = project_with(
        &head,
        THREE_TASKS.split("[[tasks]]\nid = \"c\"").next().unwrap(),
    )
    .await;
    let generator = FakeAgent::new(ProviderId::Claude);
    let sink = Recorder::default();
    let summary = run_parallel(&p, &generator, None, &sink).await.unwrap();
    assert_eq!(summary.end, SprintEnd::Done);
    assert_eq!(
        commits(&p).await,
        vec![
            ("Task a".to_string(), "a".to_string()),
            ("Task b".to_string(), "b".to_string()),
        ]
    );
    let events = sink.events.lock().unwrap().clone();
    assert!(
        !events.iter().any(|e| matches!(
            e,
            SprintEvent::FoldChecked { .. } | SprintEvent::SentHome { .. }
        )),
        "{events:?}"
    );
    assert_eq!(
        events
            .iter()
            .filter(|e| matches!(e, SprintEvent::Folded { .. }))
            .count(),
        2
    );
    let check = runner()
        .run(
            CommandSpec::shell(TOGETHER_CHECK, &p.root, Duration::from_secs(30)),
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    assert!(!check.success(), "nothing checked the folds");
    assert!(state(&p).tasks.iter().all(|t| t.task_branch.is_none()));
}
