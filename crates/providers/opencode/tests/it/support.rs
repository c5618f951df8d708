//! Shared test helpers: the recorded samples in `tests/fixtures/opencode`, and what a recorded
//! case leaves for the diagnosis.
//!
//! The samples are copies of `shared/cli-behaviour/samples/opencode` (OpenCode 1.18.33 against a
//! fake model API). The recorder cut the two long `tool_use` lines and appended ` ...[N chars]`,
//! so they are not valid JSON as stored. [`SAMPLES`] cuts such a line after its last complete
//! member and closes what is open ([`Repair::AtLastMember`]), so every field the parser then sees
//! is one that was recorded.

use corral_engine::{AttemptEvidence, ExitInfo, StreamParser, TerminalSummary};
use corral_opencode::OpencodeStreamParser;
use corral_ports::{AgentEvent, RateLimitInfo};
use corral_test_support::recorded::{LineParser, Repair, Samples};

/// The recorded samples, read through a fresh [`OpencodeStreamParser`] each.
pub const SAMPLES: Samples = Samples {
    dir: concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/opencode"),
    parser,
    repair: Some(Repair::AtLastMember),
};

fn parser() -> LineParser {
    let mut parser = OpencodeStreamParser::default();
    Box::new(move |line: &str, out: &mut Vec<AgentEvent>| parser.parse_line(line, out))
}

/// A case's parse as JSON, for its snapshot.
pub fn snapshot_of(case: &str) -> serde_json::Value {
    SAMPLES.snapshot_of(case)
}

/// What one recorded case left behind, as the engine would gather it for the adapter: the last
/// terminal event (a later one replaces an earlier one), the rate-limit events, stderr and exit.
pub struct Recorded {
    pub terminal: Option<TerminalSummary>,
    pub rate_limits: Vec<RateLimitInfo>,
    pub stderr: String,
    pub exit: Option<ExitInfo>,
}

impl Recorded {
    /// The recorded case `case`.
    pub fn of(case: &str) -> Recorded {
        let run = SAMPLES.run_of(case, |is_error, text, api_status| TerminalSummary {
            is_error,
            text,
            api_status,
        });
        Recorded {
            terminal: run.terminal,
            rate_limits: run.rate_limits,
            stderr: run.stderr,
            // A negative code: the recorder killed it, so there is no exit code.
            exit: run.exit_code.filter(|c| *c >= 0).map(|code| ExitInfo {
                code: Some(code),
                signal: None,
            }),
        }
    }

    /// The evidence the adapter is handed.
    pub fn evidence(&self) -> AttemptEvidence<'_> {
        AttemptEvidence {
            exit: self.exit,
            terminal: self.terminal.as_ref(),
            stderr_tail: &self.stderr,
            stdout_tail: "",
            resumed: None,
            rate_limits: &self.rate_limits,
        }
    }
}
