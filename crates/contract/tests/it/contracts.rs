//! The contract stage, and collecting every issue across the document.

use corral_contract::{Contract, IssueStage, Multiplicity, SignalKind};
use serde_json::json;

use crate::support::{TS, check, doc, evaluation, issues, passing_dimensions, paths};

#[test]
fn a_kind_the_step_does_not_accept_is_an_issue_at_its_type() {
    let found = issues(check(
        &doc(json!([
            evaluation("passed", passing_dimensions()),
            { "type": "task-complete", "timestamp": TS }
        ])),
        &Contract::evaluator(),
    ));
    assert_eq!(paths(&found), ["signals[1].type"]);
    assert_eq!(found[0].stage, IssueStage::Contract);
    assert!(
        found[0]
            .message
            .contains("the `evaluator` step does not accept `task-complete`"),
        "{}",
        found[0].message
    );
    assert!(found[0].message.contains("`evaluation`, `note`"));
}

#[test]
fn a_not_accepted_signal_is_not_examined_further() {
    // The evaluation below is malformed too, but the generator does not accept it at all.
    let found = issues(check(
        &doc(json!([
            { "type": "task-complete", "timestamp": TS },
            { "type": "evaluation", "timestamp": "nope" }
        ])),
        &Contract::generator(),
    ));
    assert_eq!(paths(&found), ["signals[1].type"]);
}

#[test]
fn an_exactly_one_kind_must_be_present() {
    let found = issues(check(
        &doc(json!([{ "type": "note", "timestamp": TS, "text": "hm" }])),
        &Contract::evaluator(),
    ));
    assert_eq!(paths(&found), ["signals"]);
    assert_eq!(found[0].stage, IssueStage::Contract);
    assert!(
        found[0]
            .message
            .contains("expected exactly one `evaluation` signal, found 0")
    );

    let found = issues(check(
        &doc(json!([
            evaluation("passed", passing_dimensions()),
            evaluation("passed", passing_dimensions())
        ])),
        &Contract::evaluator(),
    ));
    assert_eq!(paths(&found), ["signals[1]"]);
}

#[test]
fn the_generator_ends_with_exactly_one_outcome() {
    let found = issues(check(&doc(json!([])), &Contract::generator()));
    assert_eq!(paths(&found), ["signals"]);
    assert!(
        found[0]
            .message
            .contains("exactly one of `task-complete`, `task-blocked`")
    );

    let found = issues(check(
        &doc(json!([
            { "type": "task-complete", "timestamp": TS },
            { "type": "note", "timestamp": TS, "text": "x" },
            { "type": "task-blocked", "timestamp": TS, "reason": "y" }
        ])),
        &Contract::generator(),
    ));
    assert_eq!(paths(&found), ["signals[2]"]);
}

#[test]
fn counts_include_signals_that_failed_their_own_checks() {
    // Two evaluations, one malformed: both the malformation and the count are reported.
    let found = issues(check(
        &doc(json!([
            evaluation("passed", passing_dimensions()),
            evaluation("passed", json!([]))
        ])),
        &Contract::evaluator(),
    ));
    assert_eq!(paths(&found), ["signals[1].dimensions", "signals[1]"]);
}

#[test]
fn every_issue_across_all_signals_is_collected_in_order() {
    let found = issues(check(
        &json!({
            "schemaVersion": 1,
            "signals": [
                { "type": "task-blocked", "timestamp": "soon", "reason": "" },
                { "type": "mystery", "timestamp": TS },
                { "type": "note", "timestamp": TS, "text": "fine" },
                { "type": "commit-message", "timestamp": TS, "subject": "x".repeat(80), "extra": 1 },
                { "type": "evaluation", "timestamp": TS, "status": "passed", "dimensions": [] },
                { "type": "change", "timestamp": TS, "path": "", "summary": "did it" }
            ],
            "notes": "root extra"
        }),
        &Contract::generator(),
    ));
    assert_eq!(
        paths(&found),
        [
            "notes",
            "signals[0].reason",
            "signals[0].timestamp",
            "signals[1].type",
            "signals[3]",
            "signals[4].type",
            "signals[5].path",
        ]
    );
    let stages: Vec<IssueStage> = found.iter().map(|issue| issue.stage).collect();
    assert_eq!(
        stages,
        [
            IssueStage::Schema,
            IssueStage::Rule,
            IssueStage::Rule,
            IssueStage::Schema,
            IssueStage::Schema,
            IssueStage::Contract,
            IssueStage::Rule,
        ]
    );
}

#[test]
fn a_custom_contract_accepting_every_kind_takes_every_example() {
    let contract = SignalKind::ALL
        .into_iter()
        .fold(Contract::new("all"), |contract, kind| {
            contract.accept(kind, Multiplicity::AtLeastOne)
        });
    let signals: Vec<_> = SignalKind::ALL
        .into_iter()
        .map(SignalKind::example)
        .collect();
    let document = serde_json::to_value(corral_contract::SignalsDocument::new(signals)).unwrap();
    let validated = check(&document, &contract).unwrap();
    let kinds: Vec<SignalKind> = validated.signals().iter().map(|s| s.kind()).collect();
    assert_eq!(kinds, SignalKind::ALL);
}
