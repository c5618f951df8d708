//! The `evaluation` signal: an evaluator's verdict, dimension by dimension, and its rules.
//!
//! Beyond the shape, three rules hold for a validated evaluation:
//! - every floor dimension ([`FLOOR_DIMENSIONS`]) is present, and no dimension name repeats;
//! - a dimension with `passed: false` carries a non-empty `finding`;
//! - `status: passed` never stands beside a failed dimension or a failed criterion (one marked
//!   `applicable: false` fails nothing).
//!
//! The rules are garde custom validators, so a violation is reported with its JSON path like any
//! other issue; the same rules are written into the JSON Schema (`contains`, `if`/`then`) so a
//! schema-aware writer sees them too.

use std::fmt;

use garde::Validate;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::rules::non_blank;
use crate::timestamp::Timestamp;

/// The dimensions every evaluation must cover, in the order the prompt lists them.
pub const FLOOR_DIMENSIONS: [&str; 5] = [
    "correctness",
    "completeness",
    "safety",
    "consistency",
    "robustness",
];

/// An evaluator's verdict on a piece of work.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Validate)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(extend(
    "if" = { "properties": { "status": { "const": "passed" } }, "required": ["status"] },
    "then" = {
        "properties": {
            "dimensions": { "items": { "properties": { "passed": { "const": true } } } },
            "criteria": { "items": { "anyOf": [
                { "properties": { "passed": { "const": true } } },
                { "properties": { "applicable": { "const": false } }, "required": ["applicable"] }
            ] } }
        }
    }
))]
pub struct Evaluation {
    /// When the signal was emitted.
    #[garde(dive)]
    pub timestamp: Timestamp,
    /// The verdict. `passed` only if every dimension and every criterion passed.
    #[garde(custom(status_agrees_with(&self.dimensions, &self.criteria)))]
    pub status: EvaluationStatus,
    /// One entry per dimension; correctness, completeness, safety, consistency and robustness
    /// are required, each at most once.
    #[garde(dive, custom(covers_floor_dimensions), custom(unique_dimension_names))]
    #[schemars(extend("allOf" = [
        { "contains": { "properties": { "name": { "const": "correctness" } }, "required": ["name"] } },
        { "contains": { "properties": { "name": { "const": "completeness" } }, "required": ["name"] } },
        { "contains": { "properties": { "name": { "const": "safety" } }, "required": ["name"] } },
        { "contains": { "properties": { "name": { "const": "consistency" } }, "required": ["name"] } },
        { "contains": { "properties": { "name": { "const": "robustness" } }, "required": ["name"] } }
    ]))]
    pub dimensions: Vec<Dimension>,
    /// The task's acceptance criteria, if it has any.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[garde(dive)]
    pub criteria: Vec<Criterion>,
    /// The whole verdict in the evaluator's words: what the next round should change first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[garde(skip)]
    pub critique: Option<String>,
}

impl Evaluation {
    /// The dimensions that did not pass.
    pub fn failed_dimensions(&self) -> impl Iterator<Item = &Dimension> {
        self.dimensions.iter().filter(|d| !d.passed)
    }

    /// The criteria that apply and were not met.
    pub fn failed_criteria(&self) -> impl Iterator<Item = &Criterion> {
        self.criteria.iter().filter(|c| c.counts_as_failed())
    }
}

/// The overall verdict of an evaluation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum EvaluationStatus {
    /// Every dimension and criterion passed.
    Passed,
    /// At least one dimension or criterion failed.
    Failed,
    /// The work could not be evaluated at all (missing, unreadable, not what was asked for).
    Malformed,
}

impl EvaluationStatus {
    /// The JSON value of this status.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Passed => "passed",
            Self::Failed => "failed",
            Self::Malformed => "malformed",
        }
    }
}

impl fmt::Display for EvaluationStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One dimension of an evaluation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Validate)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(extend(
    "if" = { "properties": { "passed": { "const": false } }, "required": ["passed"] },
    "then" = { "required": ["finding"], "properties": { "finding": { "type": "string", "minLength": 1 } } }
))]
pub struct Dimension {
    /// The dimension's name, e.g. `correctness`.
    #[garde(custom(non_blank))]
    #[schemars(length(min = 1))]
    pub name: String,
    /// Whether the work passes this dimension.
    #[garde(skip)]
    pub passed: bool,
    /// What the evaluator found; required when `passed` is false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[garde(custom(finding_when_failed(self.passed)))]
    pub finding: Option<String>,
}

/// One acceptance criterion of an evaluation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Validate)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Criterion {
    /// The criterion, as the task states it.
    #[garde(custom(non_blank))]
    #[schemars(length(min = 1))]
    pub name: String,
    /// Whether the work meets it.
    #[garde(skip)]
    pub passed: bool,
    /// What the evaluator found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[garde(skip)]
    pub finding: Option<String>,
    /// Whether the criterion applies to this work at all; absent means it does. One that does
    /// not apply never fails the verdict.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[garde(skip)]
    pub applicable: Option<bool>,
    /// What the evaluator ran or read to decide (a command and its result, a test's name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[garde(skip)]
    pub execution_evidence: Option<String>,
}

impl Criterion {
    /// Whether this criterion fails the verdict: it applies and was not met.
    #[must_use]
    pub fn counts_as_failed(&self) -> bool {
        self.applicable != Some(false) && !self.passed
    }
}

fn status_agrees_with<'a>(
    dimensions: &'a [Dimension],
    criteria: &'a [Criterion],
) -> impl FnOnce(&EvaluationStatus, &()) -> garde::Result + 'a {
    move |status, _ctx| {
        match status {
            EvaluationStatus::Passed => {}
            EvaluationStatus::Failed | EvaluationStatus::Malformed => return Ok(()),
        }
        let failed: Vec<String> = dimensions
            .iter()
            .filter(|d| !d.passed)
            .map(|d| format!("dimension `{}`", d.name))
            .chain(
                criteria
                    .iter()
                    .filter(|c| c.counts_as_failed())
                    .map(|c| format!("criterion `{}`", c.name)),
            )
            .collect();
        if failed.is_empty() {
            Ok(())
        } else {
            Err(garde::Error::new(format!(
                "cannot be `passed` while {} failed: the status is `passed` only if every \
                 dimension and criterion passed",
                failed.join(", ")
            )))
        }
    }
}

fn covers_floor_dimensions(dimensions: &[Dimension], _ctx: &()) -> garde::Result {
    let missing: Vec<String> = FLOOR_DIMENSIONS
        .iter()
        .filter(|floor| !dimensions.iter().any(|d| d.name == **floor))
        .map(|floor| format!("`{floor}`"))
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(garde::Error::new(format!(
            "missing required dimension(s) {}; every evaluation covers {}",
            missing.join(", "),
            FLOOR_DIMENSIONS.join(", ")
        )))
    }
}

fn unique_dimension_names(dimensions: &[Dimension], _ctx: &()) -> garde::Result {
    let mut repeated: Vec<&str> = Vec::new();
    for (index, dimension) in dimensions.iter().enumerate() {
        let seen_before = dimensions
            .iter()
            .take(index)
            .any(|earlier| earlier.name == dimension.name);
        if seen_before && !repeated.contains(&dimension.name.as_str()) {
            repeated.push(&dimension.name);
        }
    }
    if repeated.is_empty() {
        Ok(())
    } else {
        let names: Vec<String> = repeated.iter().map(|n| format!("`{n}`")).collect();
        Err(garde::Error::new(format!(
            "dimension(s) {} listed more than once; give each dimension one entry",
            names.join(", ")
        )))
    }
}

fn finding_when_failed(passed: bool) -> impl FnOnce(&Option<String>, &()) -> garde::Result {
    move |finding, _ctx| {
        let has_finding = finding.as_deref().is_some_and(|f| !f.trim().is_empty());
        if passed || has_finding {
            Ok(())
        } else {
            Err(garde::Error::new(
                "required when `passed` is false: say what failed (a non-empty `finding`)",
            ))
        }
    }
}
