//! Shared test helpers: the recorded samples in `tests/fixtures/codex`.
//!
//! The samples are copies of `shared/cli-behaviour/samples/codex` (Codex 0.171.0 against a fake
//! model API). Unlike Claude's, no line was shortened by the recorder, so every line is parsed as
//! stored.

use corral_codex::CodexStreamParser;
use corral_engine::StreamParser;
use corral_ports::AgentEvent;
use corral_test_support::recorded::{LineParser, Samples};

/// The recorded samples, read through a fresh [`CodexStreamParser`] each.
pub const SAMPLES: Samples = Samples {
    dir: concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/codex"),
    parser,
    repair: None,
};

fn parser() -> LineParser {
    let mut parser = CodexStreamParser::default();
    Box::new(move |line: &str, out: &mut Vec<AgentEvent>| parser.parse_line(line, out))
}

/// A case's parse as JSON, for its snapshot.
pub fn snapshot_of(case: &str) -> serde_json::Value {
    SAMPLES.snapshot_of(case)
}
