//! Shared test helpers: the recorded samples in `tests/fixtures/gemini`, and an attempt plan to
//! build command lines from.
//!
//! The samples were recorded with `@google/gemini-cli@0.61.0` against a small fake of the Gemini
//! API (`tests/fixtures/gemini/recording-fake.py`, kept beside them as the record of what was
//! answered); no line was shortened.

use corral_engine::{AttemptPlan, StreamParser};
use corral_gemini::GeminiStreamParser;
use corral_ports::{AgentEvent, AiSession, SessionId};
use corral_test_support::recorded::{LineParser, Samples};

/// The recorded samples, read through a fresh [`GeminiStreamParser`] each.
pub const SAMPLES: Samples = Samples {
    dir: concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/gemini"),
    parser,
    repair: None,
};

fn parser() -> LineParser {
    let mut parser = GeminiStreamParser::default();
    Box::new(move |line: &str, out: &mut Vec<AgentEvent>| parser.parse_line(line, out))
}

/// The recorded exit code of a case.
pub fn exit_code_of(case: &str) -> i32 {
    SAMPLES.exit_code_of(case).unwrap()
}

/// An attempt plan for `session` with an optional session to resume.
pub fn plan<'a>(session: &'a AiSession, resume: Option<&'a SessionId>) -> AttemptPlan<'a> {
    AttemptPlan {
        session,
        resume,
        attempt: 1,
        pointer: None,
    }
}
