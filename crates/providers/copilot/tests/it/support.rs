//! Shared test helpers: the recorded samples in `tests/fixtures/copilot`, and pointers and
//! adapters to build command lines from.
//!
//! The samples are copies of `shared/cli-behaviour/samples/copilot` (Copilot CLI 1.0.102 against a
//! fake model API, BYOK). The recorder cut every line longer than about 600 characters and appended
//! ` ...[N chars]`, so those lines are not valid JSON as stored. [`SAMPLES`] restores them without
//! inventing anything ([`Repair::AtLastComma`]): it cuts the recorded prefix at its last comma
//! outside a string (everything before such a comma is a complete member or element) and closes
//! the objects and arrays still open there. Every field the parser then sees was recorded whole.

use std::path::PathBuf;

use corral_copilot::{CopilotAdapter, CopilotJsonParser, CopilotSettings, UuidSource};
use corral_engine::{PromptPointer, StreamParser};
use corral_ports::AgentEvent;
use corral_test_support::recorded::{LineParser, Repair, Samples};

/// The recorded samples, read through a fresh [`CopilotJsonParser`] each.
pub const SAMPLES: Samples = Samples {
    dir: concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/copilot"),
    parser,
    repair: Some(Repair::AtLastComma),
};

fn parser() -> LineParser {
    let mut parser = CopilotJsonParser::default();
    Box::new(move |line: &str, out: &mut Vec<AgentEvent>| parser.parse_line(line, out))
}

/// A case's parse as JSON, for its snapshot: only the lines that gave events, so that the
/// snapshot shows what a reader of the log sees.
pub fn snapshot_of(case: &str) -> serde_json::Value {
    SAMPLES.snapshot(
        SAMPLES
            .parse_case(case)
            .into_iter()
            .filter(|l| !l.events.is_empty()),
    )
}

/// The pointer sentence of the fixed pointer.
pub const SENTENCE: &str = "Your complete task is in the file /runs/r1/copilot-prompt.md. Read that file and follow its instructions exactly.";

/// The pointer the engine would write for `corral_test_support::session::session`.
pub fn pointer() -> PromptPointer {
    PromptPointer {
        path: PathBuf::from("/runs/r1/copilot-prompt.md"),
        sentence: SENTENCE.to_string(),
    }
}

/// The 16 bytes every deterministic adapter mints from.
pub const FIXED_BYTES: [u8; 16] = [
    0x0b, 0x5f, 0x3c, 0x1e, 0xaa, 0xaa, 0xfb, 0xbb, 0x3c, 0xcc, 0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc,
];

/// The id [`FIXED_BYTES`] make: version nibble forced to 4, variant bits to `10`.
pub const FIXED_ID: &str = "0b5f3c1e-aaaa-4bbb-bccc-123456789abc";

/// An adapter that mints [`FIXED_ID`].
pub fn adapter(settings: CopilotSettings) -> CopilotAdapter {
    CopilotAdapter::with_uuid_source(settings, UuidSource::from_fn(|| Ok(FIXED_BYTES)))
}
