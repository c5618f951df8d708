//! Shared test helpers: the recorded samples in `tests/fixtures/codex`, and a session to build
//! command lines from.
//!
//! The samples are copies of `shared/cli-behaviour/samples/codex` (Codex 0.171.0 against a fake
//! model API). Unlike Claude's, no line was shortened by the recorder, so every line is parsed as
//! stored.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use corral_codex::CodexStreamParser;
use corral_engine::StreamParser;
use corral_ports::{AgentEvent, AiSession, CancellationToken, Permissions};

/// The folder holding the copied samples.
pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/codex")
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

/// The recorded stderr of a case, from its `.txt` record.
pub fn stderr_of(case: &str) -> String {
    let record = record_of(case);
    let start = record.find("--- stderr (").unwrap();
    let body = &record[start..];
    let body = &body[body.find('\n').unwrap() + 1..];
    let end = body.find("\n--- requests seen").unwrap_or(body.len());
    body[..end].trim_end().to_string()
}

/// The recorded exit code of a case (`None` when the runner killed it).
pub fn exit_code_of(case: &str) -> Option<i32> {
    record_of(case)
        .lines()
        .find_map(|l| l.strip_prefix("exit_code: "))
        .and_then(|c| c.split_whitespace().next())
        .and_then(|c| c.parse().ok())
        .filter(|c: &i32| *c >= 0)
}

fn record_of(case: &str) -> String {
    std::fs::read_to_string(fixtures().join(format!("{case}.txt"))).unwrap()
}

/// One recorded line and what the parser made of it.
#[derive(Debug)]
pub struct ParsedLine {
    pub line: usize,
    pub events: Vec<AgentEvent>,
}

/// A case's stdout, line by line, through one parser.
pub fn parse_case(case: &str) -> Vec<ParsedLine> {
    let mut parser = CodexStreamParser::default();
    stdout_of(case)
        .lines()
        .enumerate()
        .map(|(i, raw)| {
            let mut events = Vec::new();
            parser.parse_line(raw, &mut events);
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

/// Parses lines written in a test.
pub fn parse_lines(lines: &[&str]) -> Vec<AgentEvent> {
    let mut parser = CodexStreamParser::default();
    let mut events = Vec::new();
    for line in lines {
        parser.parse_line(line, &mut events);
    }
    events
}

/// The prompt every test session carries; it must never reach argv.
pub const PROMPT: &str = "SENTINEL-PROMPT: write signals.json and stop";

/// A session with default permissions and nothing optional set. The run directory (and so the
/// signals file) lies outside the working directory, as it does in real runs.
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
