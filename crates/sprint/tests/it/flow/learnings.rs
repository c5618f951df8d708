//! Learnings and who reads them.

use super::*;

/// Issue 37: learnings are filtered by their `appliesTo`: one about a place reaches a task
/// that names that place and the tasks that depend on the task that learnt it, and stays out of
/// the others' briefs; one that names no place reaches every later task.
#[tokio::test]
async fn a_learning_reaches_the_tasks_it_applies_to() {
    let p = project(
        r#"
[[tasks]]
id = "a"
title = "Task a"
prompt = "Write a.txt."

[[tasks]]
id = "b"
title = "Task b"
prompt = "Write b.txt in the docs."

[[tasks]]
id = "c"
title = "Task c"
prompt = "Fix the generator in tests/fixtures now."

[[tasks]]
id = "d"
title = "Task d"
prompt = "Write d.txt."
depends_on = ["a"]
"#,
    )
    .await;
    let generator = FakeAgent::new(ProviderId::Claude);
    generator.on(
        "a",
        1,
        Role::Generator,
        Act::Write {
            files: vec![("a.txt", "a\n")],
            remove: Vec::new(),
            signals: serde_json::json!({"schemaVersion": 1, "signals": [
                {"type": "task-complete", "timestamp": TS},
                {"type": "learning", "timestamp": TS, "text": "FIXTURES-ARE-GENERATED",
                 "appliesTo": "tests/fixtures/"},
                {"type": "learning", "timestamp": TS, "text": "EVERYWHERE-LEARNING"},
            ]}),
        },
    );
    let summary = run_plain(&p, &generator, None).await.unwrap();
    assert_eq!(summary.end, SprintEnd::Done, "{summary:?}");
    let brief = |task: &str| generator.seen_for(task, 1)[0].request.prompt.clone();
    for task in ["b", "c", "d"] {
        assert!(brief(task).contains("EVERYWHERE-LEARNING"), "{task}");
    }
    assert!(
        !brief("b").contains("FIXTURES-ARE-GENERATED"),
        "{}",
        brief("b")
    );
    assert!(
        brief("c").contains("FIXTURES-ARE-GENERATED"),
        "names the place"
    );
    assert!(
        brief("d").contains("FIXTURES-ARE-GENERATED"),
        "depends on a"
    );
}
