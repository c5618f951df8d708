//! Shared test helpers: the recorded samples in `tests/fixtures/claude`, the repair of the lines
//! the recorder shortened, and a session to build command lines from.
//!
//! The samples are copies of `shared/cli-behaviour/samples/claude` (Claude Code 2.1.197 against a
//! fake model API). The recorder cut every line longer than about 600 characters and appended
//! ` ...[N chars]`, so the `system/init` and `result` lines are not valid JSON as stored.
//! [`restore`] makes them valid again without inventing anything: it keeps the recorded prefix,
//! drops the field that was cut in half (or closes a string value that was cut), and closes the
//! open objects and arrays. Every field the parser then sees is one that was recorded.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use corral_claude::ClaudeStreamParser;
use corral_engine::StreamParser;
use corral_ports::{AgentEvent, AiSession, CancellationToken, Permissions};

/// The folder holding the copied samples.
pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/claude")
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
    let record = std::fs::read_to_string(fixtures().join(format!("{case}.txt"))).unwrap();
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

    let mut stack: Vec<char> = Vec::new();
    // The longest prefix that ends on a complete value, and the containers open there.
    let mut cut: Option<(usize, Vec<char>)> = None;
    let mut in_string = false;
    let mut string_is_value = false;
    let mut escape_start: Option<usize> = None;
    let mut unicode_left = 0u8;
    let mut last_structural = ' ';
    for (i, c) in prefix.char_indices() {
        if in_string {
            if unicode_left > 0 {
                unicode_left -= 1;
                if unicode_left == 0 {
                    escape_start = None;
                }
            } else if escape_start.is_some() {
                if c == 'u' {
                    unicode_left = 4;
                } else {
                    escape_start = None;
                }
            } else if c == '\\' {
                escape_start = Some(i);
            } else if c == '"' {
                in_string = false;
                if string_is_value {
                    cut = Some((i + 1, stack.clone()));
                }
                last_structural = '"';
            }
            continue;
        }
        match c {
            '"' => {
                in_string = true;
                string_is_value = last_structural == ':' || stack.last() == Some(&'[');
            }
            '{' | '[' => {
                stack.push(c);
                cut = Some((i + 1, stack.clone()));
            }
            '}' | ']' => {
                stack.pop();
                cut = Some((i + 1, stack.clone()));
            }
            ',' => cut = Some((i, stack.clone())),
            _ => {}
        }
        if !c.is_whitespace() {
            last_structural = c;
        }
    }
    let (mut text, open) = if in_string && string_is_value {
        let end = escape_start.unwrap_or(prefix.len());
        (format!("{}\"", &prefix[..end]), stack)
    } else {
        let (end, open) = cut.unwrap();
        (prefix[..end].to_string(), open)
    };
    for c in open.iter().rev() {
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
    let mut parser = ClaudeStreamParser::default();
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

/// A case's parse as JSON, for its snapshot.
pub fn snapshot_of(case: &str) -> serde_json::Value {
    let lines: Vec<serde_json::Value> = parse_case(case)
        .into_iter()
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
    let mut parser = ClaudeStreamParser::default();
    let mut events = Vec::new();
    for line in lines {
        parser.parse_line(line, &mut events);
    }
    events
}

/// The prompt every test session carries; it must never reach argv.
pub const PROMPT: &str = "SENTINEL-PROMPT: write signals.json and stop";

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
