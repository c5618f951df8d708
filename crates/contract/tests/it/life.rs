//! The kinds of the sprint's life: a plan's ids, dependencies and cycles are issues with their
//! JSON paths (so the corrective prompt can name them), and the readiness kinds' own rules.

use corral_contract::{Contract, IssueStage, Signal};
use serde_json::{Value, json};

use crate::support::{TS, check, doc, issues, paths};

fn task(id: &str, depends_on: &[&str]) -> Value {
    json!({
        "id": id,
        "title": format!("Task {id}"),
        "brief": "Do it.",
        "dependsOn": depends_on,
        "acceptanceCriteria": ["It is done"]
    })
}

fn plan(tasks: Vec<Value>) -> Value {
    doc(json!([{ "type": "task-plan", "timestamp": TS, "tasks": tasks }]))
}

#[test]
fn a_valid_plan_keeps_its_tasks_in_order() {
    let validated = check(
        &plan(vec![task("a", &[]), task("b", &["a"])]),
        &Contract::plan(),
    )
    .unwrap();
    let Some(Signal::TaskPlan(plan)) = validated.signals().first() else {
        panic!("no plan: {:?}", validated.signals());
    };
    let ids: Vec<&str> = plan.tasks.iter().map(|t| t.id.as_str()).collect();
    assert_eq!(ids, ["a", "b"]);
    assert_eq!(plan.tasks[1].depends_on, ["a"]);
    assert_eq!(plan.tasks[1].acceptance_criteria, ["It is done"]);
}

#[test]
fn a_repeated_id_is_named() {
    let found = issues(check(
        &plan(vec![task("a", &[]), task("a", &[])]),
        &Contract::plan(),
    ));
    assert_eq!(paths(&found), ["signals[0].tasks"]);
    assert_eq!(found[0].stage, IssueStage::Rule);
    assert!(
        found[0].message.contains("`a` used more than once"),
        "{}",
        found[0].message
    );
}

#[test]
fn a_self_dependency_is_named_and_an_outside_one_is_left_to_the_sprint_file() {
    let found = issues(check(
        &plan(vec![task("a", &["a"]), task("b", &[])]),
        &Contract::plan(),
    ));
    assert_eq!(paths(&found), ["signals[0].tasks"]);
    assert!(
        found[0].message.contains("`a` depend on themselves"),
        "{}",
        found[0].message
    );
    // `setup` may be a task the sprint file already has.
    assert!(check(&plan(vec![task("a", &["setup"])]), &Contract::plan()).is_ok());
}

#[test]
fn a_cycle_is_named_with_its_path() {
    let found = issues(check(
        &plan(vec![
            task("a", &["c"]),
            task("b", &["a"]),
            task("c", &["b"]),
        ]),
        &Contract::plan(),
    ));
    assert_eq!(paths(&found), ["signals[0].tasks"]);
    assert!(
        found[0].message.contains("cycle: a → c → b → a"),
        "{}",
        found[0].message
    );
}

#[test]
fn a_bad_task_id_is_named_at_the_task() {
    let found = issues(check(
        &plan(vec![task("two words", &[])]),
        &Contract::plan(),
    ));
    assert_eq!(paths(&found), ["signals[0].tasks[0].id"]);
}

#[test]
fn an_empty_plan_and_blank_criteria_are_refused() {
    let found = issues(check(&plan(vec![]), &Contract::plan()));
    assert_eq!(paths(&found), ["signals[0].tasks"]);

    let mut blank = task("a", &[]);
    blank["acceptanceCriteria"] = json!(["ok", "  "]);
    let found = issues(check(&plan(vec![blank]), &Contract::plan()));
    assert_eq!(paths(&found), ["signals[0].tasks[0].acceptanceCriteria[1]"]);
}

#[test]
fn a_refined_ticket_needs_a_criterion() {
    let ticket = |criteria: Value| {
        doc(json!([{
            "type": "refined-ticket", "timestamp": TS, "title": "T", "spec": "S",
            "acceptanceCriteria": criteria
        }]))
    };
    assert!(check(&ticket(json!(["works"])), &Contract::refine()).is_ok());
    let found = issues(check(&ticket(json!([])), &Contract::refine()));
    assert_eq!(paths(&found), ["signals[0].acceptanceCriteria"]);
}

#[test]
fn a_context_file_proposal_names_a_known_file() {
    let proposal = |path: &str| {
        doc(json!([
            { "type": "agents-md-proposal", "timestamp": TS, "path": path, "content": "# x" },
            { "type": "verify-script", "timestamp": TS, "command": "make test" }
        ]))
    };
    assert!(check(&proposal("CLAUDE.md"), &Contract::ready()).is_ok());
    for bad in ["../AGENTS.md", "/etc/passwd", "README.md"] {
        let found = issues(check(&proposal(bad), &Contract::ready()));
        assert_eq!(paths(&found), ["signals[0].path"], "{bad}");
    }
}

#[test]
fn the_seed_evaluation_shape_is_accepted_and_a_criterion_that_does_not_apply_fails_nothing() {
    let dims: Vec<Value> = corral_contract::FLOOR_DIMENSIONS
        .iter()
        .map(|name| json!({"name": name, "passed": true}))
        .collect();
    let verdict = |criteria: Value| {
        doc(json!([{
            "type": "evaluation", "timestamp": TS, "status": "passed", "dimensions": dims,
            "criteria": criteria, "critique": "Nothing left to change."
        }]))
    };
    let validated = check(
        &verdict(json!([
            {"name": "Dates parse", "passed": true, "executionEvidence": "cargo test dates: 3 passed"},
            {"name": "Works on Windows", "passed": false, "applicable": false}
        ])),
        &Contract::evaluator(),
    )
    .unwrap();
    let evaluation = validated.evaluation().unwrap();
    assert_eq!(evaluation.failed_criteria().count(), 0);
    assert_eq!(
        evaluation.critique.as_deref(),
        Some("Nothing left to change.")
    );
    assert_eq!(
        evaluation.criteria[0].execution_evidence.as_deref(),
        Some("cargo test dates: 3 passed")
    );
    // A criterion that applies and failed still cannot stand beside `passed`.
    let found = issues(check(
        &verdict(json!([{"name": "Dates parse", "passed": false}])),
        &Contract::evaluator(),
    ));
    assert_eq!(paths(&found), ["signals[0].status"]);
}
