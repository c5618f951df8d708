//! Sidecars: `evaluation.md` and the signals summary.

use corral_contract::{
    Contract, Multiplicity, Signal, SignalKind, render_evaluation_md, render_signals_summary,
};
use serde_json::json;

use crate::support::{TS, check, doc, evaluation, passing_dimensions};

#[test]
fn evaluation_md_for_a_failed_verdict() {
    let mut dimensions = passing_dimensions();
    dimensions[0]["finding"] = json!("All 14 tests pass.");
    dimensions[2] = json!({
        "name": "safety",
        "passed": false,
        "finding": "`rm -rf $DIR` runs with an unset DIR | see install.sh:12\nAlso no quoting."
    });
    let mut signal = evaluation("failed", dimensions);
    signal["criteria"] = json!([
        { "name": "Adds an uninstall command", "passed": true },
        { "name": "Documents it in README", "passed": false, "finding": "README unchanged" }
    ]);
    let validated = check(&doc(json!([signal])), &Contract::evaluator()).unwrap();
    insta::assert_snapshot!(render_evaluation_md(validated.evaluation().unwrap()));
}

#[test]
fn evaluation_md_for_a_passed_verdict_without_criteria() {
    let validated = check(
        &doc(json!([evaluation("passed", passing_dimensions())])),
        &Contract::evaluator(),
    )
    .unwrap();
    let md = render_evaluation_md(validated.evaluation().unwrap());
    assert!(md.starts_with("# Evaluation: PASSED\n"));
    assert!(md.contains("Dimensions passed: 5 of 5."));
    assert!(!md.contains("## Criteria"));
}

#[test]
fn signals_summary_covers_every_kind() {
    let signals: Vec<Signal> = SignalKind::ALL
        .into_iter()
        .map(SignalKind::example)
        .collect();
    insta::assert_snapshot!(render_signals_summary(&signals));
}

#[test]
fn signals_summary_shortens_long_texts() {
    let contract = Contract::new("notes").accept(SignalKind::Note, Multiplicity::Any);
    let long = format!("{}\nsecond line", "word ".repeat(60));
    let validated = check(
        &doc(json!([{ "type": "note", "timestamp": TS, "text": long }])),
        &contract,
    )
    .unwrap();
    let summary = render_signals_summary(validated.signals());
    let line = summary.lines().nth(2).unwrap();
    assert!(line.ends_with('…'), "{line}");
    assert!(!summary.contains("second line"));
    assert_eq!(
        render_signals_summary(&[]),
        "# Signals (0)\n\nNo signals.\n"
    );
}
