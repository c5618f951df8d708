//! `sprint.json` and the names of the sprint's directory: what a crash resume reads back.

use std::path::Path;

use corral_ports::{Effort, ProviderId};
use corral_sprint::{
    Durability, EXAMPLE, Role, RoleMeta, SprintLayout, SprintName, SprintState, StateError, Step,
    TaskId, TaskProgress, TaskStatus, parse, read_state, recorded_sprints, write_state,
    write_state_as,
};

#[test]
fn the_layout_names_every_path_of_the_issue() {
    let layout = SprintLayout::new(Path::new("/p"), &SprintName::new("s1").unwrap());
    let task = TaskId::new("t-1").unwrap();
    assert_eq!(layout.root(), Path::new("/p/.corral/sprints/s1"));
    assert_eq!(
        layout.state_file(),
        Path::new("/p/.corral/sprints/s1/sprint.json")
    );
    assert_eq!(
        layout.learnings_file(),
        Path::new("/p/.corral/sprints/s1/learnings.ndjson")
    );
    assert_eq!(
        layout.spawn_dir(&task, 2, Role::Generator),
        Path::new("/p/.corral/sprints/s1/implement/t-1/rounds/2/generator")
    );
    assert_eq!(
        layout.spawn_dir(&task, 1, Role::Evaluator),
        Path::new("/p/.corral/sprints/s1/implement/t-1/rounds/1/evaluator")
    );
}

#[test]
fn role_meta_uses_the_seed_spelling() {
    let meta = RoleMeta {
        role: Role::Evaluator,
        provider: ProviderId::Codex,
        model: Some("gpt-5".into()),
        effort: Some(Effort::High),
        attempt: 1,
        round: 2,
        started_at: "2026-12-02T10:00:00.000Z".into(),
    };
    insta::assert_snapshot!(serde_json::to_string_pretty(&meta).unwrap());
    let back: RoleMeta = serde_json::from_str(&serde_json::to_string(&meta).unwrap()).unwrap();
    assert_eq!(back, meta);
}

fn example_state() -> SprintState {
    let file = parse(Path::new("corral-sprint.toml"), EXAMPLE).unwrap();
    SprintState::fresh(&file, "2026-12-02T10:00:00.000Z")
}

#[test]
fn a_fresh_state_holds_every_task_pending_in_run_order() {
    let state = example_state();
    assert_eq!(state.branch, "corral/example");
    let ids: Vec<&str> = state.tasks.iter().map(|t| t.id.as_str()).collect();
    assert_eq!(ids, ["parse-config", "use-config"]);
    assert_eq!(state.count(TaskStatus::Pending), 2);
    insta::assert_snapshot!(serde_json::to_string_pretty(&state).unwrap());
}

#[test]
fn the_state_is_written_atomically_and_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let layout = SprintLayout::new(dir.path(), &SprintName::new("example").unwrap());
    let mut state = example_state();
    state.tasks[0].status = TaskStatus::Done;
    state.tasks[0].commit = Some("abc123".into());
    write_state(&layout.state_file(), &state).unwrap();
    state.tasks[1].status = TaskStatus::Running;
    write_state(&layout.state_file(), &state).unwrap();
    assert_eq!(read_state(&layout.state_file()).unwrap(), state);
    let left: Vec<String> = std::fs::read_dir(layout.root())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(left, ["sprint.json"], "no temporary file is left behind");
    assert_eq!(
        recorded_sprints(dir.path()).unwrap(),
        [SprintName::new("example").unwrap()]
    );
}

#[test]
fn only_a_state_announcing_a_commit_or_a_reset_waits_for_the_disk() {
    // What a power cut may lose is only what the resume can redo: a state that says the
    // commit or a regressed round's reset comes next is synced before either is done.
    let mut state = example_state();
    assert_eq!(state.durability(), Durability::Cached, "all pending");
    let progress = |step: Step, reset_pending: bool| TaskProgress {
        base: "abc123".into(),
        step,
        pre_passed: Some(true),
        pre_failed_gates: Vec::new(),
        critique: None,
        regressions: 0,
        reset_pending,
        generator_session: None,
        generator_session_provider: None,
        spawned: None,
        transient_retries: 0,
    };
    state.tasks[0].status = TaskStatus::Running;
    for step in [
        Step::PreVerify,
        Step::Generate,
        Step::PostVerify,
        Step::Evaluate,
    ] {
        state.tasks[0].progress = Some(progress(step, false));
        assert_eq!(state.durability(), Durability::Cached, "{step:?}");
        state.tasks[0].progress = Some(progress(step, true));
        assert_eq!(
            state.durability(),
            Durability::Synced,
            "{step:?} with a reset pending"
        );
    }
    state.tasks[0].progress = Some(progress(Step::Commit, false));
    assert_eq!(state.durability(), Durability::Synced, "the commit next");
    state.tasks[0].status = TaskStatus::Done;
    state.tasks[0].progress = None;
    state.tasks[0].commit = Some("def456".into());
    assert_eq!(state.durability(), Durability::Cached, "the commit made");

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sprint.json");
    write_state_as(&path, &state, Durability::Cached).unwrap();
    assert_eq!(read_state(&path).unwrap(), state);
}

#[test]
fn no_state_another_version_and_garbage_are_told_apart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sprint.json");
    assert!(matches!(read_state(&path), Err(StateError::Missing { .. })));
    assert!(recorded_sprints(dir.path()).unwrap().is_empty());
    std::fs::write(&path, r#"{"schemaVersion": 2}"#).unwrap();
    let err = read_state(&path).unwrap_err();
    assert!(err.to_string().contains("schema version 2"), "{err}");
    std::fs::write(&path, "not json").unwrap();
    assert!(matches!(read_state(&path), Err(StateError::Invalid { .. })));
    std::fs::remove_file(&path).unwrap();
    std::fs::create_dir(&path).unwrap();
    assert!(matches!(read_state(&path), Err(StateError::Unreadable(_))));
}

/// A `sprint.json` written before the ports' usage was camelCase (ADR 0012): the sprint's own
/// keys were camelCase already, the usage inside them snake_case.
#[test]
fn a_state_with_the_old_snake_case_usage_still_reads() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sprint.json");
    std::fs::write(
        &path,
        r#"{"schemaVersion":1,"name":"example","branch":"corral/example",
  "sprintFile":"corral-sprint.toml","startedAt":"2026-12-02T10:00:00.000Z",
  "updatedAt":"2026-12-02T10:00:00.000Z",
  "tasks":[{"id":"parse-config","title":"Parse","status":"done","round":1,"attempt":1,
    "commit":"abc123","reason":null,
    "usage":{"generator":{"input":10,"cache_read":4,"cost_usd":0.5},"evaluator":{}},
    "usageByProvider":{"claude":{"input":10,"cache_write":2,"premium_requests":1.0}}}]}"#,
    )
    .unwrap();
    let state = read_state(&path).unwrap();
    let task = &state.tasks[0];
    assert_eq!(task.usage.generator.cache_read, Some(4));
    assert_eq!(task.usage.generator.cost_usd, Some(0.5));
    let claude = &task.usage_by_provider[&corral_ports::ProviderId::Claude];
    assert_eq!(claude.cache_write, Some(2));
    assert_eq!(claude.premium_requests, Some(1.0));
    let again = serde_json::to_string(&state).unwrap();
    assert!(again.contains("\"cacheRead\":4"), "{again}");
    assert!(!again.contains("cache_read"), "{again}");
}
