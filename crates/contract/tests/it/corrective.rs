//! The corrective message: snapshot, the issue cap, and its self-contained context.

use std::path::Path;

use corral_contract::{
    CORRECTIVE_MAX_ISSUES, Contract, SignalsError, corrective_message, validate_signals_file,
    validate_signals_str,
};
use serde_json::json;

use crate::support::{FILE, TS, check, doc, evaluation, passing_dimensions};

#[test]
fn corrective_message_for_an_evaluator() {
    let mut dimensions = passing_dimensions();
    dimensions[3] = json!({ "name": "consistency", "passed": false });
    let error = check(
        &doc(json!([
            evaluation("passed", dimensions),
            { "type": "task-complete", "timestamp": TS },
            { "type": "note", "timestamp": "today", "text": "" }
        ])),
        &Contract::evaluator(),
    )
    .unwrap_err();
    insta::assert_snapshot!(corrective_message(
        &error,
        Path::new("/runs/r1/evaluator/signals.json"),
        &Contract::evaluator()
    ));
}

#[test]
fn corrective_message_for_a_missing_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("signals.json");
    let error = validate_signals_file(&path, &Contract::generator()).unwrap_err();
    let message = corrective_message(&error, &path, &Contract::generator());
    let message = message.replace(&dir.path().display().to_string(), "<run>");
    insta::assert_snapshot!(message);
}

#[test]
fn at_most_ten_issues_are_listed() {
    let notes: Vec<_> = (0..13)
        .map(|_| json!({ "type": "note", "timestamp": TS, "text": "" }))
        .collect();
    let mut signals = vec![json!({ "type": "task-complete", "timestamp": TS })];
    signals.extend(notes);
    let error = check(&doc(json!(signals)), &Contract::generator()).unwrap_err();
    let SignalsError::Invalid { issues, .. } = &error else {
        panic!("{error:?}");
    };
    assert_eq!(issues.len(), 13);

    let message = corrective_message(&error, Path::new(FILE), &Contract::generator());
    assert!(message.contains("Problems found (13):"));
    assert!(message.contains(&format!("{CORRECTIVE_MAX_ISSUES}. `signals[10].text`")));
    assert!(!message.contains("11. "), "{message}");
    assert!(!message.contains("`signals[11].text`"));
    assert!(message.contains("… and 3 more."));
}

#[test]
fn exactly_ten_issues_have_no_remainder_line() {
    let mut signals = vec![json!({ "type": "task-complete", "timestamp": TS })];
    signals.extend((0..10).map(|_| json!({ "type": "note", "timestamp": TS, "text": "" })));
    let error = check(&doc(json!(signals)), &Contract::generator()).unwrap_err();
    let message = corrective_message(&error, Path::new(FILE), &Contract::generator());
    assert!(message.contains("10. `signals[10].text`"));
    assert!(!message.contains("more."), "{message}");
}

#[test]
fn the_context_block_is_self_contained_for_every_contract() {
    for contract in crate::render::contracts() {
        let errors = [
            validate_signals_str("[]", Path::new(FILE), &contract).unwrap_err(),
            validate_signals_str("{", Path::new(FILE), &contract).unwrap_err(),
            validate_signals_str("{\"signals\":[]}", Path::new(FILE), &contract).unwrap_err(),
        ];
        for error in errors {
            assert!(error.is_correctable());
            let message = corrective_message(&error, Path::new(FILE), &contract);
            assert!(
                message.contains(&format!("- The file: `{FILE}`")),
                "{message}"
            );
            for (kind, multiplicity) in contract.kinds() {
                assert!(
                    message.contains(&format!("`{kind}` ({multiplicity})")),
                    "{message}"
                );
            }
            let start = message.find("```json\n").unwrap() + "```json\n".len();
            let end = start + message[start..].find("\n```").unwrap();
            let example = &message[start..end];
            let result = validate_signals_str(example, Path::new(FILE), &contract);
            assert!(result.is_ok(), "{}: {result:?}", contract.name());
        }
    }
}
