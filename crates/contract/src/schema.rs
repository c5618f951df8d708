//! The JSON Schema (draft 2020-12, via schemars) of a whole `signals.json` document.
//!
//! Generated from the same types validation uses; garde's `length` and `range` rules reach the
//! schema through schemars' garde support, the other rules through explicit `#[schemars(...)]`
//! attributes. The schema is necessary, not sufficient: whitespace-only texts, the calendar check
//! of timestamps and the path-prefix rule are only enforced by the validator. The checked-in copy
//! lives at `docs/schema/signals.schema.json`; a test fails when it is stale.

use crate::document::SignalsDocument;

/// The JSON Schema of `signals.json`, current version.
#[must_use]
pub fn signals_json_schema() -> serde_json::Value {
    schemars::schema_for!(SignalsDocument).to_value()
}
