//! The recorded samples of a real CLI, for a provider crate's tests: each case is a `<case>.stdout`
//! (what the CLI printed) and a `<case>.txt` record (its stderr, exit code and the requests the
//! fake model API saw) in one folder. [`Samples`] reads them, repairs the lines the recorder cut,
//! and feeds them line by line through the crate's stream parser.
//!
//! The parser comes as a closure ([`LineParser`]), not as the engine's `StreamParser`: this crate
//! may not depend on `corral-engine`, whose tests use it. For the same reason what a case left
//! behind ([`RecordedRun`]) is in the ports' terms, and the caller turns the terminal event into
//! the engine's type.
//!
//! The recorder cut every line longer than about 600 characters and appended ` ...[N chars]`, so
//! such a line is not valid JSON as stored. [`restore`] makes it valid again without inventing
//! anything: it keeps the recorded text up to a point chosen by a [`Repair`] and closes what is
//! open there, so every field the parser then sees is one that was recorded.

#![allow(
    clippy::unwrap_used,
    clippy::panic,
    reason = "test fixture: a missing or malformed recording must stop the test loudly"
)]

use std::path::Path;

use corral_ports::{AgentEvent, RateLimitInfo};
use serde_json::{Value, json};

/// A stream parser as a closure: parses one line (without terminator), pushing its events.
pub type LineParser = Box<dyn FnMut(&str, &mut Vec<AgentEvent>)>;

/// Where [`restore`] may end the recorded text it keeps of a cut line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Repair {
    /// At the last comma outside a string: everything before it is a complete member or element.
    /// A line without such a comma is not restored.
    AtLastComma,
    /// At the last comma outside a string, or just after the last object or array opened.
    AtLastMember,
    /// At the end of the last complete value (a string value, a closed object or array), at the
    /// last comma, or just after the last opened object or array; a string value that was cut is
    /// kept up to the cut (without a half escape) and closed.
    AtLastValue,
}

/// A line the recorder cut, made valid JSON again: `Some(repaired)` for a cut line (one ending in
/// ` ...[N chars]`), `None` for one stored whole or one with nothing complete to keep.
///
/// The repair keeps the recorded text up to the point `repair` names and closes the objects and
/// arrays open there; a value cut in half is dropped with its key, except a string value under
/// [`Repair::AtLastValue`]. Nothing is made up.
pub fn restore(line: &str, repair: Repair) -> Option<String> {
    let marker = line.rfind(" ...[")?;
    if !line.ends_with(" chars]") {
        return None;
    }
    let prefix = &line[..marker];

    let mut open: Vec<char> = Vec::new();
    // The chosen end of the kept text, and the containers open there.
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
                if string_is_value && repair == Repair::AtLastValue {
                    cut = Some((i + 1, open.clone()));
                }
                last_structural = '"';
            }
            continue;
        }
        match c {
            '"' => {
                in_string = true;
                string_is_value = last_structural == ':' || open.last() == Some(&'[');
            }
            '{' | '[' => {
                open.push(c);
                if repair != Repair::AtLastComma {
                    cut = Some((i + 1, open.clone()));
                }
            }
            '}' | ']' => {
                open.pop();
                if repair == Repair::AtLastValue {
                    cut = Some((i + 1, open.clone()));
                }
            }
            ',' => cut = Some((i, open.clone())),
            _ => {}
        }
        if !c.is_whitespace() {
            last_structural = c;
        }
    }
    let (mut text, still_open) = if repair == Repair::AtLastValue && in_string && string_is_value {
        let end = escape_start.unwrap_or(prefix.len());
        (format!("{}\"", &prefix[..end]), open)
    } else {
        let (end, still_open) = cut?;
        (prefix[..end].to_string(), still_open)
    };
    for c in still_open.iter().rev() {
        text.push(if *c == '{' { '}' } else { ']' });
    }
    Some(text)
}

/// What a parser that recognises none of `lines` makes of them: one `Unparsed` event per line,
/// carrying it whole.
pub fn unparsed(lines: &[&str]) -> Vec<AgentEvent> {
    lines
        .iter()
        .map(|l| AgentEvent::Unparsed {
            line: l.to_string(),
        })
        .collect()
}

/// One recorded line and what the parser made of it.
#[derive(Debug)]
pub struct ParsedLine {
    /// The 1-based line number in `<case>.stdout`.
    pub line: usize,
    /// Whether the recorder had cut the line and [`restore`] repaired it.
    pub restored: bool,
    /// The events the parser pushed for the line.
    pub events: Vec<AgentEvent>,
}

/// A line the recorder cut, as stored and as restored.
#[derive(Debug)]
pub struct CutLine {
    /// The case it belongs to.
    pub case: String,
    /// The line as stored, ending in ` ...[N chars]`.
    pub raw: String,
    /// The line [`restore`] made of it.
    pub restored: String,
}

/// What one recorded case left behind, as the engine would gather it for the adapter.
#[derive(Debug)]
pub struct RecordedRun<T> {
    /// The last terminal event (a later one replaces an earlier one), as the caller's type.
    pub terminal: Option<T>,
    /// Every rate-limit event, in order.
    pub rate_limits: Vec<RateLimitInfo>,
    /// The recorded stderr.
    pub stderr: String,
    /// The recorded exit code as the record states it (negative when the recorder saw a signal);
    /// `None` when the record has none.
    pub exit_code: Option<i32>,
}

/// One CLI's recorded samples and the parser to read them with.
#[derive(Clone, Copy, Debug)]
pub struct Samples {
    /// The folder holding `<case>.stdout` and `<case>.txt` (typically
    /// `concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/<cli>")`).
    pub dir: &'static str,
    /// A fresh parser; every case is read through a new one.
    pub parser: fn() -> LineParser,
    /// How cut lines are repaired before parsing; `None` when the recorder cut none of this CLI's
    /// lines (they are parsed as stored, and snapshots carry no `restored` field).
    pub repair: Option<Repair>,
}

impl Samples {
    /// The folder holding the samples.
    pub fn dir(&self) -> &Path {
        Path::new(self.dir)
    }

    /// Every recorded case name (`<case>.stdout`), sorted.
    pub fn cases(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(self.dir())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter_map(|n| n.strip_suffix(".stdout").map(str::to_string))
            .collect();
        names.sort();
        names
    }

    /// The recorded stdout of a case.
    pub fn stdout_of(&self, case: &str) -> String {
        self.read(&format!("{case}.stdout"))
    }

    /// The record of a case (`<case>.txt`).
    pub fn record_of(&self, case: &str) -> String {
        self.read(&format!("{case}.txt"))
    }

    /// The recorded stderr of a case, from its record (escape codes kept).
    pub fn stderr_of(&self, case: &str) -> String {
        let record = self.record_of(case);
        let start = record.find("--- stderr (").unwrap();
        let body = &record[start..];
        let body = &body[body.find('\n').unwrap() + 1..];
        let end = body.find("\n--- requests seen").unwrap_or(body.len());
        body[..end].trim_end().to_string()
    }

    /// The recorded exit code of a case: the number after `exit_code: ` in its record, whatever
    /// follows it (`143 (KILLED by runner …)` is 143, `-15 (KILLED …)` is -15).
    pub fn exit_code_of(&self, case: &str) -> Option<i32> {
        self.record_of(case)
            .lines()
            .find_map(|l| l.strip_prefix("exit_code: "))
            .and_then(|c| c.split_whitespace().next())
            .and_then(|c| c.parse().ok())
    }

    /// A line, repaired with [`Samples::repair`] when the recorder cut it.
    pub fn restore(&self, line: &str) -> Option<String> {
        self.repair.and_then(|repair| restore(line, repair))
    }

    /// A case's stdout, restored line by line, through one parser.
    pub fn parse_case(&self, case: &str) -> Vec<ParsedLine> {
        let mut parse = (self.parser)();
        self.stdout_of(case)
            .lines()
            .enumerate()
            .map(|(i, raw)| {
                let restored = self.restore(raw);
                let mut events = Vec::new();
                parse(restored.as_deref().unwrap_or(raw), &mut events);
                ParsedLine {
                    line: i + 1,
                    restored: restored.is_some(),
                    events,
                }
            })
            .collect()
    }

    /// Every event of a case, in order.
    pub fn events_of(&self, case: &str) -> Vec<AgentEvent> {
        self.parse_case(case)
            .into_iter()
            .flat_map(|l| l.events)
            .collect()
    }

    /// Parsed lines as JSON, for a snapshot: `line`, `events` and, where lines are repaired,
    /// `restored`.
    pub fn snapshot(&self, lines: impl IntoIterator<Item = ParsedLine>) -> Value {
        lines
            .into_iter()
            .map(|l| match self.repair {
                Some(_) => json!({ "line": l.line, "restored": l.restored, "events": l.events }),
                None => json!({ "line": l.line, "events": l.events }),
            })
            .collect()
    }

    /// A case's parse as JSON, for its snapshot: every line (see [`Samples::snapshot`]).
    pub fn snapshot_of(&self, case: &str) -> Value {
        self.snapshot(self.parse_case(case))
    }

    /// Parses lines written in a test, through one parser.
    pub fn parse_lines(&self, lines: &[&str]) -> Vec<AgentEvent> {
        let mut parse = (self.parser)();
        let mut events = Vec::new();
        for line in lines {
            parse(line, &mut events);
        }
        events
    }

    /// Every `Unparsed` event of every case, as `(case, line)`, in case order.
    pub fn unparsed_lines(&self) -> Vec<(String, String)> {
        let mut unparsed = Vec::new();
        for case in self.cases() {
            for event in self.events_of(&case) {
                if let AgentEvent::Unparsed { line } = event {
                    unparsed.push((case.clone(), line));
                }
            }
        }
        unparsed
    }

    /// Every line the recorder cut, in case order, with its repair.
    pub fn cut_lines(&self) -> Vec<CutLine> {
        let mut cut = Vec::new();
        for case in self.cases() {
            for raw in self.stdout_of(&case).lines() {
                if let Some(restored) = self.restore(raw) {
                    cut.push(CutLine {
                        case: case.clone(),
                        raw: raw.to_string(),
                        restored,
                    });
                }
            }
        }
        cut
    }

    /// Asserts that every restored line is a JSON object and invents nothing: without the
    /// `closers` it ends with, it is a prefix of the line as stored. Returns how many there are.
    pub fn assert_restored_lines_keep_the_recorded_prefix(&self, closers: &[char]) -> usize {
        let cut = self.cut_lines();
        for CutLine {
            case,
            raw,
            restored,
        } in &cut
        {
            let value: Value = serde_json::from_str(restored)
                .unwrap_or_else(|e| panic!("{case}: {e}: {restored}"));
            assert!(value.is_object(), "{case}: {restored}");
            let kept = restored.trim_end_matches(closers);
            assert!(raw.starts_with(kept), "{case}: {restored}");
        }
        cut.len()
    }

    /// Asserts that every cut line, as stored, is one `Unparsed` event carrying the whole line,
    /// read by a fresh parser that has first been fed `before` (whose events do not count).
    pub fn assert_cut_lines_as_stored_are_unparsed(&self, before: &[&str]) {
        for CutLine { case, raw, .. } in self.cut_lines() {
            let mut parse = (self.parser)();
            let mut events = Vec::new();
            for line in before {
                parse(line, &mut events);
            }
            events.clear();
            parse(&raw, &mut events);
            assert_eq!(
                events,
                [AgentEvent::Unparsed { line: raw.clone() }],
                "{case}"
            );
        }
    }

    /// What a case left behind: its last terminal event made into a `T` by `terminal` (from
    /// `is_error`, `text` and `api_status`), its rate-limit events, stderr and exit code.
    pub fn run_of<T>(
        &self,
        case: &str,
        terminal: impl Fn(bool, Option<String>, Option<u16>) -> T,
    ) -> RecordedRun<T> {
        let mut last = None;
        let mut rate_limits = Vec::new();
        for event in self.events_of(case) {
            match event {
                AgentEvent::TerminalResult {
                    is_error,
                    text,
                    api_status,
                    ..
                } => last = Some(terminal(is_error, text, api_status)),
                AgentEvent::RateLimit { info } => rate_limits.push(info),
                AgentEvent::SessionStarted { .. }
                | AgentEvent::Text { .. }
                | AgentEvent::Thinking { .. }
                | AgentEvent::ToolUse { .. }
                | AgentEvent::ToolResult { .. }
                | AgentEvent::Usage { .. }
                | AgentEvent::RetryNotice { .. }
                | AgentEvent::LineShortened { .. }
                | AgentEvent::OversizedLine { .. }
                | AgentEvent::Unparsed { .. } => {}
            }
        }
        RecordedRun {
            terminal: last,
            rate_limits,
            stderr: self.stderr_of(case),
            exit_code: self.exit_code_of(case),
        }
    }

    fn read(&self, file: &str) -> String {
        let path = self.dir().join(file);
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }
}
