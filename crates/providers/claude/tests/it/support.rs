//! Shared test helpers: the recorded samples in `tests/fixtures/claude`.
//!
//! The samples are copies of `shared/cli-behaviour/samples/claude` (Claude Code 2.1.197 against a
//! fake model API). The recorder cut every line longer than about 600 characters and appended
//! ` ...[N chars]`, so the `system/init` and `result` lines are not valid JSON as stored.
//! [`SAMPLES`] restores them without inventing anything ([`Repair::AtLastValue`]): it keeps the
//! recorded prefix, drops the field that was cut in half (or closes a string value that was cut),
//! and closes the open objects and arrays. Every field the parser then sees is one that was
//! recorded.

use corral_claude::ClaudeStreamParser;
use corral_engine::StreamParser;
use corral_ports::AgentEvent;
use corral_test_support::recorded::{LineParser, Repair, Samples};

/// The recorded samples, read through a fresh [`ClaudeStreamParser`] each.
pub const SAMPLES: Samples = Samples {
    dir: concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/claude"),
    parser,
    repair: Some(Repair::AtLastValue),
};

fn parser() -> LineParser {
    let mut parser = ClaudeStreamParser::default();
    Box::new(move |line: &str, out: &mut Vec<AgentEvent>| parser.parse_line(line, out))
}

/// A case's parse as JSON, for its snapshot.
pub fn snapshot_of(case: &str) -> serde_json::Value {
    SAMPLES.snapshot_of(case)
}
