//! Shared test helpers: the recorded samples in `tests/fixtures/grok`, a session and a prompt
//! pointer to build command lines from.
//!
//! The samples are copies of `shared/cli-behaviour/samples/grok` (`@vibe-kit/grok-cli@0.0.34`
//! against a fake model API); none of their lines was shortened by the recorder.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use corral_engine::{AttemptPlan, PromptPointer, StreamParser};
use corral_grok::GrokStreamParser;
use corral_ports::{AgentEvent, AiSession, CancellationToken, Permissions, SessionId};

/// The folder holding the copied samples.
pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/grok")
}

/// Every recorded case name (`<case>.stdout`), sorted.
pub fn cases() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(fixtures())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter_map(|n| n.strip_suffix(".stdout").map(str::to_string))
        .collect();
    names.sort();
    names
}

/// The recorded stdout of a case.
pub fn stdout_of(case: &str) -> String {
    std::fs::read_to_string(fixtures().join(format!("{case}.stdout"))).unwrap()
}

/// The recorded record of a case (`<case>.txt`).
fn record_of(case: &str) -> String {
    std::fs::read_to_string(fixtures().join(format!("{case}.txt"))).unwrap()
}

/// The recorded stderr of a case, from its `.txt` record.
pub fn stderr_of(case: &str) -> String {
    let record = record_of(case);
    let start = record.find("--- stderr (").unwrap();
    let body = &record[start..];
    let body = &body[body.find('\n').unwrap() + 1..];
    let end = body.find("\n--- requests seen").unwrap_or(body.len());
    body[..end].trim_end().to_string()
}

/// The recorded exit code of a case (`exit_code: 0 (KILLED by runner …)` counts as 0).
pub fn exit_code_of(case: &str) -> i32 {
    let record = record_of(case);
    let line = record
        .lines()
        .find_map(|l| l.strip_prefix("exit_code: "))
        .unwrap();
    line.split_whitespace().next().unwrap().parse().unwrap()
}

/// One recorded line and what the parser made of it.
#[derive(Debug)]
pub struct ParsedLine {
    pub line: usize,
    pub events: Vec<AgentEvent>,
}

/// A case's stdout, line by line, through one parser.
pub fn parse_case(case: &str) -> Vec<ParsedLine> {
    let mut parser = GrokStreamParser::default();
    stdout_of(case)
        .lines()
        .enumerate()
        .map(|(i, line)| {
            let mut events = Vec::new();
            parser.parse_line(line, &mut events);
            ParsedLine {
                line: i + 1,
                events,
            }
        })
        .collect()
}

/// A case's parse as JSON, for its snapshot.
pub fn snapshot_of(case: &str) -> serde_json::Value {
    let lines: Vec<serde_json::Value> = parse_case(case)
        .into_iter()
        .map(|l| serde_json::json!({ "line": l.line, "events": l.events }))
        .collect();
    serde_json::Value::Array(lines)
}

/// Every event of a case, in order.
pub fn events_of(case: &str) -> Vec<AgentEvent> {
    parse_case(case)
        .into_iter()
        .flat_map(|l| l.events)
        .collect()
}

/// Parses lines written in a test, through one parser.
pub fn parse_lines(lines: &[&str]) -> Vec<AgentEvent> {
    let mut parser = GrokStreamParser::default();
    let mut events = Vec::new();
    for line in lines {
        parser.parse_line(line, &mut events);
    }
    events
}

/// The prompt every test session carries; it must never reach argv.
pub const PROMPT: &str = "SENTINEL-PROMPT: write signals.json and stop";

/// The pointer sentence the tests hand the adapter (the engine's wording).
pub const SENTENCE: &str = "Your complete task is in the file /runs/r1/grok-prompt.md. Read that \
                            file now and follow its instructions exactly.";

/// A session with default permissions and nothing optional set.
pub fn session() -> AiSession {
    AiSession {
        prompt: Arc::from(PROMPT),
        cwd: PathBuf::from("/work/repo"),
        extra_roots: Vec::new(),
        model: None,
        effort: None,
        permissions: Permissions::default(),
        resume: None,
        cancel: CancellationToken::new(),
        signals_file: PathBuf::from("/runs/r1/signals.json"),
        output_dir: PathBuf::from("/runs/r1"),
        max_budget_usd: None,
    }
}

/// The pointer the engine would have written for [`session`].
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
