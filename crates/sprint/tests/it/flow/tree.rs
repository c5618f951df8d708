//! The project's tree and what an agent does to it: branches switched, commits made, writes
//! outside the work tree, a dirty tree, setup, providers without resume, leftovers.

use super::*;

#[tokio::test]
async fn an_agent_switching_branch_is_named_and_its_task_blocked() {
    let p = project(THREE_TASKS.split("[[tasks]]\nid = \"c\"").next().unwrap()).await;
    let generator = FakeAgent::new(ProviderId::Claude);
    generator.on("a", 1, Role::Generator, Act::SwitchBranch("elsewhere"));
    let summary = run_plain(&p, &generator, None).await.unwrap();
    assert_eq!(summary.end, SprintEnd::Blocked);
    let a = &summary.tasks[0];
    assert_eq!(a.status, TaskStatus::Blocked);
    let reason = a.reason.as_deref().unwrap();
    assert!(
        reason.contains("switched from corral/s to branch elsewhere"),
        "{reason}"
    );
    assert_eq!(a.warnings.len(), 1);
    assert_eq!(
        git(&p.root, &["symbolic-ref", "--short", "HEAD"])
            .await
            .trim(),
        "corral/s",
        "the sprint's branch is checked out again"
    );
    assert_eq!(
        summary.tasks[1].status,
        TaskStatus::Done,
        "b does not depend on a"
    );
    assert_eq!(commits(&p).await, [("Task b".to_string(), "b".to_string())]);
}

#[tokio::test]
async fn an_agent_committing_itself_is_named_and_one_commit_made() {
    let p = project(THREE_TASKS.split("[[tasks]]\nid = \"b\"").next().unwrap()).await;
    let generator = FakeAgent::new(ProviderId::Claude);
    generator.on(
        "a",
        1,
        Role::Generator,
        Act::CommitsItself("agent's own commit"),
    );
    let summary = run_plain(&p, &generator, None).await.unwrap();
    assert_eq!(summary.end, SprintEnd::Done);
    assert!(summary.tasks[0].warnings[0].contains("committed on its own"));
    assert_eq!(
        commits(&p).await,
        [("Add the file".to_string(), "a".to_string())]
    );
}

#[tokio::test]
async fn a_write_outside_the_work_tree_is_named_in_the_status_and_does_not_block() {
    let p = project(THREE_TASKS.split("[[tasks]]\nid = \"b\"").next().unwrap()).await;
    let generator = FakeAgent::new(ProviderId::Claude);
    generator.on(
        "a",
        1,
        Role::Generator,
        Act::WritesOutside("added /home/user/.bashrc"),
    );
    let summary = run_plain(&p, &generator, None).await.unwrap();
    assert_eq!(summary.end, SprintEnd::Done, "named, not blocking");
    assert_eq!(
        summary.tasks[0].warnings,
        [
            "round 1: the generator wrote outside the paths it may write: added /home/user/.bashrc"
                .to_string()
        ]
    );
    // The same in sprint.json, which `corral sprint status` prints.
    assert_eq!(task_state(&p, "a").warnings, summary.tasks[0].warnings);
    assert_eq!(commits(&p).await, [("Task a".to_string(), "a".to_string())]);
}

#[tokio::test]
async fn a_dirty_tree_is_refused_with_its_paths_unless_kept_or_stashed() {
    let p = project(THREE_TASKS.split("[[tasks]]\nid = \"b\"").next().unwrap()).await;
    std::fs::write(p.root.join("README"), "edited\n").unwrap();
    std::fs::write(p.root.join("notes.txt"), "mine\n").unwrap();
    let generator = FakeAgent::new(ProviderId::Claude);
    let err = run_plain(&p, &generator, None).await.unwrap_err();
    assert_eq!(err.exit_code(), 2);
    let SprintError::Dirty { paths } = &err else {
        panic!("{err}")
    };
    assert_eq!(paths, &["README".to_string(), "notes.txt".to_string()]);
    assert!(err.to_string().contains("--stash"));
    assert!(generator.seen().is_empty());

    let summary = run(
        &p,
        &generator,
        None,
        &Recorder::default(),
        DirtyTree::Stash,
        CancellationToken::new(),
    )
    .await
    .unwrap();
    assert_eq!(summary.end, SprintEnd::Done);
    assert_eq!(
        std::fs::read_to_string(p.root.join("README")).unwrap(),
        "project\n"
    );
    assert!(
        git(&p.root, &["stash", "list"])
            .await
            .contains("corral sprint s")
    );
}

#[tokio::test]
async fn setup_runs_once_and_a_failing_setup_refuses() {
    let p = project(THREE_TASKS.split("[[tasks]]\nid = \"b\"").next().unwrap()).await;
    let file = p.root.join("corral-sprint.toml");
    let text = std::fs::read_to_string(&file).unwrap().replace(
        "max_rounds = 3",
        "max_rounds = 3\nsetup = \"echo ran >> .corral/setup-count\"",
    );
    std::fs::write(&file, text).unwrap();
    git(&p.root, &["commit", "--quiet", "-am", "setup"]).await;
    let generator = FakeAgent::new(ProviderId::Claude);
    generator.on("a", 1, Role::Generator, Act::RateLimited);
    run_plain(&p, &generator, None).await.unwrap();
    let again = FakeAgent::new(ProviderId::Claude);
    run_plain(&p, &again, None).await.unwrap();
    assert_eq!(
        std::fs::read_to_string(p.root.join(".corral/setup-count")).unwrap(),
        "ran\n"
    );

    let q = project(THREE_TASKS.split("[[tasks]]\nid = \"b\"").next().unwrap()).await;
    let file = q.root.join("corral-sprint.toml");
    let text = std::fs::read_to_string(&file).unwrap().replace(
        "max_rounds = 3",
        "max_rounds = 3\nsetup = \"echo no >&2; exit 3\"",
    );
    std::fs::write(&file, text).unwrap();
    git(&q.root, &["commit", "--quiet", "-am", "setup"]).await;
    let err = run_plain(&q, &generator, None).await.unwrap_err();
    assert_eq!(err.exit_code(), 2);
    assert!(err.to_string().contains("exit 3"), "{err}");
}

#[tokio::test]
async fn a_provider_without_resume_starts_each_round_cold_with_the_brief_and_critique() {
    let p = project(THREE_TASKS.split("[[tasks]]\nid = \"b\"").next().unwrap()).await;
    let mut generator = FakeAgent::new(ProviderId::Grok);
    Arc::get_mut(&mut generator).unwrap().resumes = false;
    let evaluator = FakeAgent::new(ProviderId::Codex);
    evaluator.on(
        "a",
        1,
        Role::Evaluator,
        Act::Write {
            files: Vec::new(),
            remove: Vec::new(),
            signals: evaluation(Some("the file is empty-ish")),
        },
    );
    let summary = run_plain(&p, &generator, Some(&evaluator)).await.unwrap();
    assert_eq!(summary.end, SprintEnd::Done);
    let r = &generator.seen_for("a", 2)[0].request;
    assert!(r.resume.is_none());
    assert!(r.prompt.contains("Write a.txt."), "{}", r.prompt);
    assert!(r.prompt.contains("the file is empty-ish"), "{}", r.prompt);
}

#[tokio::test]
async fn leftovers_of_an_earlier_sprint_of_the_same_name_are_not_taken_for_done_rounds() {
    let p = project(THREE_TASKS.split("[[tasks]]\nid = \"b\"").next().unwrap()).await;
    let generator = FakeAgent::new(ProviderId::Claude);
    run_plain(&p, &generator, None).await.unwrap();
    // The user starts over: the state goes, the round directories stay; the tree goes back.
    std::fs::remove_file(layout(&p).state_file()).unwrap();
    git(&p.root, &["checkout", "--quiet", "main"]).await;
    git(&p.root, &["branch", "--quiet", "-D", "corral/s"]).await;
    let again = FakeAgent::new(ProviderId::Claude);
    let summary = run_plain(&p, &again, None).await.unwrap();
    assert_eq!(summary.end, SprintEnd::Done);
    assert_eq!(again.seen().len(), 1, "round 1 runs again");
    assert_eq!(commits(&p).await.len(), 1);
}
