//! Shared test helpers: the recorded samples in `tests/fixtures/copilot`, the repair of the lines
//! the recorder shortened, and sessions, pointers and adapters to build command lines from.
//!
//! The samples are copies of `shared/cli-behaviour/samples/copilot` (Copilot CLI 1.0.102 against a
//! fake model API, BYOK). The recorder cut every line longer than about 600 characters and appended
//! ` ...[N chars]`, so those lines are not valid JSON as stored. [`restore`] makes them valid
//! without inventing anything: it cuts the recorded prefix at its last comma outside a string
//! (everything before such a comma is a complete member or element) and closes the objects and
//! arrays still open there. Every field the parser then sees was recorded whole.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use corral_copilot::{CopilotAdapter, CopilotJsonParser, CopilotSettings, UuidSource};
use corral_engine::{PromptPointer, StreamParser};
use corral_ports::{AgentEvent, AiSession, CancellationToken, Permissions};

/// The folder holding the copied samples.
pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/copilot")
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

/// The record of a case (`<case>.txt`).
pub fn record_of(case: &str) -> String {
    std::fs::read_to_string(fixtures().join(format!("{case}.txt"))).unwrap()
}

/// The recorded stderr of a case, from its record.
pub fn stderr_of(case: &str) -> String {
    let record = record_of(case);
    let start = record.find("--- stderr (").unwrap();
    let body = &record[start..];
    let body = &body[body.find('\n').unwrap() + 1..];
    let end = body.find("\n--- requests seen").unwrap_or(body.len());
    body[..end].trim_end().to_string()
}

/// A recorded line, made valid JSON again when the recorder shortened it: `Some(repaired)` for a
/// shortened line, `None` for one stored whole.
pub fn restore(line: &str) -> Option<String> {
    let marker = line.rfind(" ...[")?;
    if !line.ends_with(" chars]") {
        return None;
    }
    let prefix = &line[..marker];
    let mut open: Vec<char> = Vec::new();
    let mut last_comma: Option<(usize, Vec<char>)> = None;
    let mut in_string = false;
    let mut escaped = false;
    for (i, c) in prefix.char_indices() {
        if in_string {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                (false, _) => {}
            }
            continue;
        }
        match c {
            '"' => in_string = true,
            '{' | '[' => open.push(c),
            '}' | ']' => {
                open.pop();
            }
            ',' => last_comma = Some((i, open.clone())),
            _ => {}
        }
    }
    let (cut, still_open) = last_comma?;
    let mut text = prefix[..cut].to_string();
    for c in still_open.iter().rev() {
        text.push(if *c == '{' { '}' } else { ']' });
    }
    Some(text)
}

/// One recorded line and what the parser made of it.
#[derive(Debug)]
pub struct ParsedLine {
    pub line: usize,
    pub restored: bool,
    pub events: Vec<AgentEvent>,
}

/// A case's stdout, restored line by line, through one parser.
pub fn parse_case(case: &str) -> Vec<ParsedLine> {
    let mut parser = CopilotJsonParser::default();
    stdout_of(case)
        .lines()
        .enumerate()
        .map(|(i, raw)| {
            let restored = restore(raw);
            let line = restored.as_deref().unwrap_or(raw);
            let mut events = Vec::new();
            parser.parse_line(line, &mut events);
            ParsedLine {
                line: i + 1,
                restored: restored.is_some(),
                events,
            }
        })
        .collect()
}

/// A case's parse as JSON, for its snapshot: only the lines that gave events, so that the
/// snapshot shows what a reader of the log sees.
pub fn snapshot_of(case: &str) -> serde_json::Value {
    let lines: Vec<serde_json::Value> = parse_case(case)
        .into_iter()
        .filter(|l| !l.events.is_empty())
        .map(|l| {
            serde_json::json!({
                "line": l.line,
                "restored": l.restored,
                "events": l.events,
            })
        })
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
    let mut parser = CopilotJsonParser::default();
    let mut events = Vec::new();
    for line in lines {
        parser.parse_line(line, &mut events);
    }
    events
}

/// The prompt every test session carries; it must never reach argv.
pub const PROMPT: &str = "SENTINEL-PROMPT: write signals.json and stop";

/// The pointer sentence of the fixed pointer.
pub const SENTENCE: &str = "Your complete task is in the file /runs/r1/copilot-prompt.md. Read that file and follow its instructions exactly.";

/// A session with default permissions and nothing optional set, its run directory outside the
/// working directory.
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

/// The pointer the engine would write for [`session`].
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
