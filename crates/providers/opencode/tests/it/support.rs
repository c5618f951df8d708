//! Shared test helpers: the recorded samples in `tests/fixtures/opencode`, the repair of the lines
//! the recorder cut, what a recorded case leaves for the diagnosis, and a session to build command
//! lines from.
//!
//! The samples are copies of `shared/cli-behaviour/samples/opencode` (OpenCode 1.18.33 against a
//! fake model API). The recorder cut the two long `tool_use` lines and appended ` ...[N chars]`,
//! so they are not valid JSON as stored. [`restore`] cuts such a line after its last complete
//! member and closes what is open, so every field the parser then sees is one that was recorded.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use corral_engine::{AttemptEvidence, ExitInfo, StreamParser, TerminalSummary};
use corral_opencode::OpencodeStreamParser;
use corral_ports::{AgentEvent, AiSession, CancellationToken, Permissions, RateLimitInfo};

/// The folder holding the copied samples.
pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/opencode")
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

/// A case's `.txt` record.
fn record_of(case: &str) -> String {
    std::fs::read_to_string(fixtures().join(format!("{case}.txt"))).unwrap()
}

/// The recorded stderr of a case, from its record (ANSI codes kept).
pub fn stderr_of(case: &str) -> String {
    let record = record_of(case);
    let header = record.find("--- stderr (").unwrap();
    let body = &record[header..];
    let body = &body[body.find('\n').unwrap() + 1..];
    let end = body.find("\n--- requests seen").unwrap_or(body.len());
    body[..end].trim_end().to_string()
}

/// The recorded exit code of a case; `None` when the recorder killed it.
pub fn exit_code_of(case: &str) -> Option<i32> {
    record_of(case)
        .lines()
        .find_map(|l| l.strip_prefix("exit_code: "))
        .and_then(|c| c.split_whitespace().next())
        .and_then(|c| c.parse().ok())
        .filter(|c: &i32| *c >= 0)
}

/// A line the recorder cut, made valid JSON again: `Some(repaired)` for a cut line, `None` for
/// one stored whole.
///
/// The repair keeps the recorded text up to the last point where a member or element had just
/// ended (a `,` outside strings) or a container had just opened, and closes the containers open
/// there. A value cut in half is dropped with its key; nothing is made up.
pub fn restore(line: &str) -> Option<String> {
    let marker = line.rfind(" ...[")?;
    if !line.ends_with(" chars]") {
        return None;
    }
    let prefix = &line[..marker];
    let mut open: Vec<char> = Vec::new();
    let mut best: Option<(usize, Vec<char>)> = None;
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
            '{' | '[' => {
                open.push(c);
                best = Some((i + 1, open.clone()));
            }
            '}' | ']' => {
                open.pop();
            }
            ',' => best = Some((i, open.clone())),
            _ => {}
        }
    }
    let (end, open) = best?;
    let mut text = prefix[..end].to_string();
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
    let mut parser = OpencodeStreamParser::default();
    stdout_of(case)
        .lines()
        .enumerate()
        .map(|(i, raw)| {
            let restored = restore(raw);
            let mut events = Vec::new();
            parser.parse_line(restored.as_deref().unwrap_or(raw), &mut events);
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
    parse_case(case)
        .into_iter()
        .map(|l| {
            serde_json::json!({
                "line": l.line,
                "restored": l.restored,
                "events": l.events,
            })
        })
        .collect()
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
    let mut parser = OpencodeStreamParser::default();
    let mut events = Vec::new();
    for line in lines {
        parser.parse_line(line, &mut events);
    }
    events
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
        let mut terminal = None;
        let mut rate_limits = Vec::new();
        for event in events_of(case) {
            match event {
                AgentEvent::TerminalResult {
                    is_error,
                    text,
                    api_status,
                    ..
                } => {
                    terminal = Some(TerminalSummary {
                        is_error,
                        text,
                        api_status,
                    })
                }
                AgentEvent::RateLimit { info } => rate_limits.push(info),
                _ => {}
            }
        }
        Recorded {
            terminal,
            rate_limits,
            stderr: stderr_of(case),
            exit: exit_code_of(case).map(|code| ExitInfo {
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
