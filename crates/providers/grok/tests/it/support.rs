//! Shared test helpers: the recorded samples in `tests/fixtures/grok`, and a prompt pointer and
//! attempt plan to build command lines from.
//!
//! The samples are copies of `shared/cli-behaviour/samples/grok` (`@vibe-kit/grok-cli@0.0.34`
//! against a fake model API); none of their lines was shortened by the recorder.

use std::path::PathBuf;

use corral_engine::{AttemptPlan, PromptPointer, StreamParser};
use corral_grok::GrokStreamParser;
use corral_ports::{AgentEvent, AiSession, SessionId};
use corral_test_support::recorded::{LineParser, Samples};

/// The recorded samples, read through a fresh [`GrokStreamParser`] each.
pub const SAMPLES: Samples = Samples {
    dir: concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/grok"),
    parser,
    repair: None,
};

fn parser() -> LineParser {
    let mut parser = GrokStreamParser::default();
    Box::new(move |line: &str, out: &mut Vec<AgentEvent>| parser.parse_line(line, out))
}

/// The recorded exit code of a case (`exit_code: 0 (KILLED by runner …)` counts as 0).
pub fn exit_code_of(case: &str) -> i32 {
    SAMPLES.exit_code_of(case).unwrap()
}

/// A case's parse as JSON, for its snapshot.
pub fn snapshot_of(case: &str) -> serde_json::Value {
    SAMPLES.snapshot_of(case)
}

/// The pointer sentence the tests hand the adapter (the engine's wording).
pub const SENTENCE: &str = "Your complete task is in the file /runs/r1/grok-prompt.md. Read that \
                            file now and follow its instructions exactly.";

/// The pointer the engine would have written for `corral_test_support::session::session`.
pub fn pointer() -> PromptPointer {
    PromptPointer {
        path: PathBuf::from("/runs/r1/grok-prompt.md"),
        sentence: SENTENCE.to_string(),
    }
}

/// An attempt plan for `session` with `pointer` and an optional session to resume.
pub fn plan<'a>(
    session: &'a AiSession,
    pointer: Option<&'a PromptPointer>,
    resume: Option<&'a SessionId>,
) -> AttemptPlan<'a> {
    AttemptPlan {
        session,
        resume,
        attempt: 1,
        pointer,
    }
}
