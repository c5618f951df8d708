//! Per-kind value rules (garde) and the evaluation rules, each reported at its JSON path.

use corral_contract::{Contract, IssueStage, Multiplicity, SignalKind};
use serde_json::{Value, json};

use crate::support::{TS, check, doc, evaluation, issues, passing_dimensions, paths};

fn all_kinds() -> Contract {
    SignalKind::ALL
        .into_iter()
        .fold(Contract::new("all"), |contract, kind| {
            contract.accept(kind, Multiplicity::Any)
        })
}

/// The paths of the rule issues in `signals`; within one signal, garde reports fields in
/// alphabetical order.
fn rule_paths(signals: Value) -> Vec<String> {
    let found = issues(check(&doc(signals), &all_kinds()));
    assert!(
        found.iter().all(|issue| issue.stage == IssueStage::Rule),
        "{found:#?}"
    );
    paths(&found).into_iter().map(str::to_owned).collect()
}

fn gates(gates: Value) -> Value {
    json!([{ "type": "verify-gates", "timestamp": TS, "gates": gates }])
}

#[test]
fn verify_gates_needs_at_least_one_gate() {
    assert_eq!(rule_paths(gates(json!([]))), ["signals[0].gates"]);
}

#[test]
fn each_gate_is_checked_at_its_path() {
    let found = rule_paths(gates(json!([
        { "pathPrefix": "src/", "command": "cargo test", "timeoutMs": 3_600_000 },
        { "pathPrefix": "", "command": "  " },
        { "pathPrefix": "/etc", "command": "make", "timeoutMs": 0 },
        { "pathPrefix": "../up", "command": "make", "timeoutMs": 3_600_001 }
    ])));
    assert_eq!(
        found,
        [
            "signals[0].gates[1].command",
            "signals[0].gates[2].pathPrefix",
            "signals[0].gates[2].timeoutMs",
            "signals[0].gates[3].pathPrefix",
            "signals[0].gates[3].timeoutMs",
        ]
    );
}

#[test]
fn required_texts_must_not_be_blank() {
    let found = rule_paths(json!([
        { "type": "task-blocked", "timestamp": TS, "reason": "" },
        { "type": "task-verified", "timestamp": TS, "output": " \n" },
        { "type": "note", "timestamp": TS, "text": "" },
        { "type": "decision", "timestamp": TS, "text": "", "rationale": "" },
        { "type": "learning", "timestamp": TS, "text": "", "appliesTo": "" },
        { "type": "change", "timestamp": TS, "path": "", "summary": "" },
        { "type": "pr-content", "timestamp": TS, "title": "", "body": "" }
    ]));
    assert_eq!(
        found,
        [
            "signals[0].reason",
            "signals[1].output",
            "signals[2].text",
            "signals[3].text",
            "signals[4].text",
            "signals[5].path",
            "signals[5].summary",
            "signals[6].body",
            "signals[6].title",
        ]
    );
}

#[test]
fn commit_subject_is_one_line_of_at_most_72_chars() {
    let ok = "é".repeat(72);
    let long = "x".repeat(73);
    assert!(
        check(
            &doc(json!([{ "type": "commit-message", "timestamp": TS, "subject": ok }])),
            &all_kinds()
        )
        .is_ok()
    );
    let found = issues(check(
        &doc(json!([
            { "type": "commit-message", "timestamp": TS, "subject": long },
            { "type": "commit-message", "timestamp": TS, "subject": "a\nb", "body": "x" },
            { "type": "commit-message", "timestamp": TS, "subject": "" }
        ])),
        &all_kinds(),
    ));
    assert_eq!(
        paths(&found),
        [
            "signals[0].subject",
            "signals[1].subject",
            "signals[2].subject"
        ]
    );
    assert!(
        found[0]
            .message
            .contains("at most 72 characters long (it is 73)"),
        "{}",
        found[0].message
    );
}

#[test]
fn every_floor_dimension_is_required() {
    let mut dimensions = passing_dimensions();
    dimensions
        .as_array_mut()
        .unwrap()
        .retain(|d| d["name"] != "safety");
    let found = issues(check(
        &doc(json!([evaluation("failed", dimensions)])),
        &Contract::evaluator(),
    ));
    assert_eq!(paths(&found), ["signals[0].dimensions"]);
    assert_eq!(found[0].stage, IssueStage::Rule);
    assert!(
        found[0].message.contains("`safety`"),
        "{}",
        found[0].message
    );
}

#[test]
fn dimension_names_do_not_repeat() {
    let mut dimensions = passing_dimensions();
    dimensions
        .as_array_mut()
        .unwrap()
        .push(json!({ "name": "safety", "passed": true }));
    let found = issues(check(
        &doc(json!([evaluation("passed", dimensions)])),
        &Contract::evaluator(),
    ));
    assert_eq!(paths(&found), ["signals[0].dimensions"]);
    assert!(found[0].message.contains("more than once"));
}

#[test]
fn extra_dimensions_are_allowed() {
    let mut dimensions = passing_dimensions();
    dimensions
        .as_array_mut()
        .unwrap()
        .push(json!({ "name": "performance", "passed": true }));
    assert!(
        check(
            &doc(json!([evaluation("passed", dimensions)])),
            &Contract::evaluator()
        )
        .is_ok()
    );
}

#[test]
fn a_failed_dimension_needs_a_finding() {
    let mut dimensions = passing_dimensions();
    dimensions[2] = json!({ "name": "safety", "passed": false });
    dimensions[4] = json!({ "name": "robustness", "passed": false, "finding": "  " });
    let found = issues(check(
        &doc(json!([evaluation("failed", dimensions)])),
        &Contract::evaluator(),
    ));
    assert_eq!(
        paths(&found),
        [
            "signals[0].dimensions[2].finding",
            "signals[0].dimensions[4].finding"
        ]
    );
}

#[test]
fn passed_cannot_stand_beside_a_failure() {
    let mut dimensions = passing_dimensions();
    dimensions[0] = json!({ "name": "correctness", "passed": false, "finding": "off by one" });
    let found = issues(check(
        &doc(json!([evaluation("passed", dimensions)])),
        &Contract::evaluator(),
    ));
    assert_eq!(paths(&found), ["signals[0].status"]);
    assert!(found[0].message.contains("dimension `correctness`"));

    let mut with_criteria = evaluation("passed", passing_dimensions());
    with_criteria["criteria"] = json!([
        { "name": "adds a test", "passed": true },
        { "name": "updates the docs", "passed": false }
    ]);
    let found = issues(check(&doc(json!([with_criteria])), &Contract::evaluator()));
    assert_eq!(paths(&found), ["signals[0].status"]);
    assert!(found[0].message.contains("criterion `updates the docs`"));
}

#[test]
fn failed_and_malformed_verdicts_are_accepted_as_given() {
    let mut failing = passing_dimensions();
    failing[1] = json!({ "name": "completeness", "passed": false, "finding": "docs missing" });
    for (status, dimensions) in [
        ("failed", failing.clone()),
        ("failed", passing_dimensions()),
        ("malformed", failing),
        ("passed", passing_dimensions()),
    ] {
        let result = check(
            &doc(json!([evaluation(status, dimensions)])),
            &Contract::evaluator(),
        );
        assert!(result.is_ok(), "{status}: {result:?}");
    }
}

#[test]
fn an_unknown_status_or_mistyped_verdict_is_a_schema_issue() {
    let mut mistyped = passing_dimensions();
    mistyped[0]["passed"] = json!("yes");
    let found = issues(check(
        &doc(json!([
            evaluation("ok", passing_dimensions()),
            evaluation("failed", mistyped)
        ])),
        &Contract::new("e").accept(SignalKind::Evaluation, Multiplicity::Any),
    ));
    assert_eq!(paths(&found), ["signals[0]", "signals[1]"]);
    assert!(found.iter().all(|issue| issue.stage == IssueStage::Schema));
    assert!(
        found[0].message.contains("unknown variant `ok`"),
        "{}",
        found[0].message
    );
}

#[test]
fn the_validated_evaluation_is_typed() {
    let validated = check(
        &doc(json!([
            evaluation("passed", passing_dimensions()),
            { "type": "note", "timestamp": TS, "text": "fine" }
        ])),
        &Contract::evaluator(),
    )
    .unwrap();
    let evaluation = validated.evaluation().unwrap();
    assert_eq!(evaluation.status, corral_contract::EvaluationStatus::Passed);
    assert_eq!(evaluation.dimensions.len(), 5);
    assert_eq!(validated.of_kind(SignalKind::Note).count(), 1);
}
