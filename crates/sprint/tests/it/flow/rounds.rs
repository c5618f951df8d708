//! A sprint run one task at a time: rounds, regressions, reviews, attribution and
//! blocked tasks.

use super::*;

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
