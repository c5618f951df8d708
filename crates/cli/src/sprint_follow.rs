//! `corral sprint status --follow`: the sprint's `events.jsonl` read as it grows, from the start
//! of its latest run, one line per event (or the event's JSON with `--json`), until the run
//! ends (its `sprint-finished` line) or Ctrl-C.
//!
//! The file is read through the sprint's record handle (never through a link an agent
//! planted), whole at every look and from where the last look stopped: only complete lines
//! are shown, so a line being written, or one a `kill -9` cut short, is not.

use std::time::Duration;

use corral_sprint::{SprintLayout, complete_lines};
use serde_json::{Map, Value};

use crate::exit::Exit;
use crate::term::{one_line, outln};

/// How often the file is looked at.
const POLL: Duration = Duration::from_millis(300);
/// The largest `events.jsonl` read.
const LIMIT: u64 = 512 * 1024 * 1024;

/// Follows `layout`'s `events.jsonl` until its run ends or a signal; exit 0.
pub(crate) async fn follow(layout: &SprintLayout, json: bool) -> anyhow::Result<Exit> {
    let mut streams = crate::run::ending_signal_streams();
    let signal = crate::run::next_ending_signal(&mut streams);
    tokio::pin!(signal);
    let mut shown = 0usize;
    let mut first = true;
    loop {
        let bytes = read(layout);
        // A file made anew (a new sprint of the same name) is read from its start.
        if bytes.len() < shown {
            shown = 0;
        }
        let (events, used) = complete_lines(bytes.get(shown..).unwrap_or_default());
        let events = if first {
            first = false;
            latest_run(events)
        } else {
            events
        };
        shown += used;
        let mut ended = false;
        for event in &events {
            if json {
                outln!("{}", Value::Object(event.clone()));
            } else {
                outln!("{}", one_line(&line(event)));
            }
            ended = name(event) == "sprint-finished";
        }
        if ended {
            return Ok(Exit::Success);
        }
        tokio::select! {
            () = tokio::time::sleep(POLL) => {}
            _ = &mut signal => return Ok(Exit::Success),
        }
    }
}

/// The file's bytes; none when it is missing or cannot be read yet (the run has not begun).
fn read(layout: &SprintLayout) -> Vec<u8> {
    layout
        .record()
        .ok()
        .and_then(|record| record.read(corral_sprint::EVENTS_FILE, LIMIT).ok())
        .unwrap_or_default()
}

/// The events from the latest `sprint-started` on (all of them when there is none).
fn latest_run(mut events: Vec<Map<String, Value>>) -> Vec<Map<String, Value>> {
    match events.iter().rposition(|e| name(e) == "sprint-started") {
        Some(start) => events.split_off(start),
        None => events,
    }
}

fn name(event: &Map<String, Value>) -> &str {
    event.get("event").and_then(Value::as_str).unwrap_or("")
}

/// One event as a line: its time, its name, and what it says of the task.
pub(crate) fn line(event: &Map<String, Value>) -> String {
    let mut out = String::new();
    if let Some(at) = event
        .get(corral_sprint::WALL_TIME_KEY)
        .and_then(Value::as_str)
    {
        // The time of day is enough beside a name that says what happened.
        let time = at.split_once('T').map_or(at, |(_, t)| t);
        out.push_str(time.get(..8).unwrap_or(time));
        out.push_str("  ");
    }
    out.push_str(name(event));
    for key in [
        "task", "round", "role", "provider", "status", "outcome", "passed",
    ] {
        if let Some(value) = event.get(key) {
            out.push_str(&format!("  {key} {}", plain(value)));
        }
    }
    for key in ["reason", "message", "why"] {
        if let Some(value) = event.get(key).filter(|v| !v.is_null()) {
            out.push_str(&format!("  {}", plain(value)));
        }
    }
    if let Some(end) = event
        .get("summary")
        .and_then(|s| s.get("end"))
        .and_then(Value::as_str)
    {
        out.push_str(&format!("  end {end}"));
    }
    out
}

fn plain(value: &Value) -> String {
    value
        .as_str()
        .map_or_else(|| value.to_string(), str::to_string)
}
