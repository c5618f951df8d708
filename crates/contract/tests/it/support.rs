//! Shared helpers: documents as JSON values, validation shortcuts, issue extraction.

use std::path::Path;

use corral_contract::{Contract, Issue, SignalsError, ValidatedSignals, validate_signals_str};
use serde_json::{Value, json};

/// The label in-memory documents are validated under.
pub const FILE: &str = "/runs/r1/generator/signals.json";

pub const TS: &str = "2025-01-01T12:00:00Z";

/// Validates `doc` (serialized) against `contract`.
pub fn check(doc: &Value, contract: &Contract) -> Result<ValidatedSignals, SignalsError> {
    validate_signals_str(&doc.to_string(), Path::new(FILE), contract)
}

/// A current-version document holding `signals`.
pub fn doc(signals: Value) -> Value {
    json!({ "schemaVersion": 1, "signals": signals })
}

/// The issues of an `Invalid` error; panics on anything else.
pub fn issues(result: Result<ValidatedSignals, SignalsError>) -> Vec<Issue> {
    match result {
        Err(SignalsError::Invalid { issues, .. }) => issues,
        other => panic!("expected SignalsError::Invalid, got {other:?}"),
    }
}

/// `(path, message)` pairs, for compact assertions.
pub fn paths(issues: &[Issue]) -> Vec<&str> {
    issues.iter().map(|issue| issue.path.as_str()).collect()
}

/// A floor-complete, all-passed dimension list.
pub fn passing_dimensions() -> Value {
    json!([
        { "name": "correctness", "passed": true },
        { "name": "completeness", "passed": true },
        { "name": "safety", "passed": true },
        { "name": "consistency", "passed": true },
        { "name": "robustness", "passed": true }
    ])
}

/// A valid evaluation signal with the given status and dimensions.
pub fn evaluation(status: &str, dimensions: Value) -> Value {
    json!({ "type": "evaluation", "timestamp": TS, "status": status, "dimensions": dimensions })
}
