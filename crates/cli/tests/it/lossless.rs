//! Nothing lost from a real CLI's stream (issue 17): giant replies and a giant file write through
//! `corral run`, against the fake model API, with the CLI's stdout and stderr captured as files.
//!
//! On a pipe, Claude Code and OpenCode exit with the tail of such a reply still queued, the
//! terminal event included (`docs/benchmarks.md`, "Lost tails"); a run that lost it used to end
//! `succeeded` with no usage. So every run here must keep what only the last line carries: the
//! outcome, the usage, the cost and the session in `run.json`, and the terminal event in the
//! execution log. A line over the framing's cap is shortened in place, and its
//! `line_shortened` record names each cut string's original length: that length being the whole
//! reply proves the line arrived whole, not merely that it parsed.
//!
//! Claude Code, the CLI measured losing tails most often, runs each case ten times in a row
//! against one fake API; each of the five CLIs runs one 20 MiB reply. The runs are sequential:
//! a giant reply costs a core for seconds, and the machine running the suite may have two.

use std::path::Path;
use std::process::Output;

use corral_test_support::fake_api::{
    Scenario, Step, USAGE_INPUT_TOKENS, USAGE_OUTPUT_TOKENS, bulk_text,
};
use serde_json::Value;

use crate::providers::{CLAUDE, Cli, World, conformance};
use crate::support::*;

const MIB: usize = 1024 * 1024;

/// Runs in a row per Claude Code case.
const RUNS: usize = 10;

/// What a failed run printed, without the megabytes of events its `--json` stdout holds: stderr
/// and the last few KiB of stdout.
fn brief(out: &Output) -> String {
    const TAIL: usize = 4096;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let mut from = stdout.len().saturating_sub(TAIL);
    while !stdout.is_char_boundary(from) {
        from += 1;
    }
    format!(
        "exit status {:?}; stdout ({} bytes) ends with:\n{}\n[stderr]\n{}",
        out.status.code(),
        stdout.len(),
        &stdout[from..],
        String::from_utf8_lossy(&out.stderr)
    )
}

/// One `corral run --json --no-contract PROMPT` that must succeed; its summary.
fn run_ok(world: &World, prompt: &str) -> Value {
    let out = world
        .corral_run()
        .args(["--json", "--no-contract", prompt])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", brief(&out));
    let s = summary(&out.stdout);
    assert_eq!(s["outcome"], "succeeded", "{}", brief(&out));
    s
}

/// The execution log's agent events named `event`.
fn agent_events<'a>(log: &'a [Value], event: &str) -> Vec<&'a Value> {
    kinds(log, "agent")
        .into_iter()
        .filter(|v| v["event"] == event)
        .collect()
}

/// The original lengths of every string the framing cut, over the run's shortened lines.
fn cut_lengths(log: &[Value]) -> Vec<u64> {
    agent_events(log, "line_shortened")
        .iter()
        .flat_map(|v| v["strings"].as_array().cloned().unwrap_or_default())
        .filter_map(|s| s["len"].as_u64())
        .collect()
}

/// What every run must keep, whatever the CLI: the terminal event in the log, and `run.json`
/// finished as a success with the session the CLI announced (where it has one).
fn assert_terminal_kept(cli: &Cli, dir: &Path, s: &Value) -> Value {
    let log = log(dir);
    let terminal = agent_events(&log, "terminal_result");
    assert_eq!(
        terminal.len(),
        1,
        "one terminal event: {:?}",
        kinds_seen(&log)
    );
    assert_eq!(terminal[0]["isError"], false, "{}", terminal[0]);
    let rec = record(dir);
    assert_eq!(rec["outcome"], "succeeded", "{}", short(&rec));
    if cli.has_session_id() {
        let id = rec["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session in run.json: {}", short(&rec)));
        assert_eq!(s["sessionId"], id);
        assert_eq!(
            std::fs::read_to_string(dir.join("session-id.txt")).unwrap(),
            format!("{id}\n")
        );
    }
    rec
}

/// The record or event with its long strings cut, for a failure message.
fn short(v: &Value) -> String {
    let mut text = v.to_string();
    if text.len() > 2000 {
        let mut at = 2000;
        while !text.is_char_boundary(at) {
            at -= 1;
        }
        text.truncate(at);
        text.push('…');
    }
    text
}

/// The kinds and agent events of a log, in order, for a failure message.
fn kinds_seen(log: &[Value]) -> Vec<String> {
    log.iter()
        .map(|v| match v["event"].as_str() {
            Some(event) => format!("{}:{event}", v["kind"].as_str().unwrap_or("?")),
            None => v["kind"].as_str().unwrap_or("?").to_string(),
        })
        .collect()
}

/// Claude Code's usage and cost in `run.json`, for `turns` model calls of the fake API.
fn assert_claude_usage(rec: &Value, turns: u64) {
    let usage = &rec["usage"];
    assert_eq!(usage["input"], USAGE_INPUT_TOKENS * turns, "{usage}");
    assert_eq!(usage["output"], USAGE_OUTPUT_TOKENS * turns, "{usage}");
    assert!(
        usage["costUsd"].as_f64().is_some_and(|c| c > 0.0),
        "{usage}"
    );
}

/// Claude Code answering `bytes` of text, `RUNS` times in a row: each run keeps its terminal
/// event, usage, cost and session, and the answer arrived whole.
fn claude_text_reply_ten_times(bytes: usize) {
    let reply = bulk_text(bytes);
    let world = World::new(&CLAUDE, |_| Scenario::forever(Step::text(reply.clone())));
    for run in 0..RUNS {
        let s = run_ok(&world, "say a lot");
        let dir = run_dir(&s);
        let rec = assert_terminal_kept(&CLAUDE, &dir, &s);
        assert_claude_usage(&rec, 1);
        let answer = rec["result"].as_str().unwrap_or_default();
        let log = log(&dir);
        if bytes <= 4 * MIB {
            // Under the framing's cap: the answer is in run.json as the model sent it.
            assert!(
                answer == reply,
                "run {run}: the answer in run.json is {} bytes, not {bytes}",
                answer.len()
            );
        } else {
            // Over the cap: the answer's start is kept, and the cut strings (the assistant
            // line's text and the result line's) were each whole when they arrived.
            assert!(
                answer.starts_with("line 0000000000 "),
                "run {run}: {}",
                short(&rec)
            );
            let cut = cut_lengths(&log);
            assert!(
                cut.iter().filter(|&&len| len == bytes as u64).count() >= 2,
                "run {run}: the assistant and result lines each carried the whole {bytes} \
                 bytes: cut strings {cut:?}"
            );
        }
        eprintln!("claude {bytes}-byte reply, run {}/{RUNS}: ok", run + 1);
    }
    assert!(world.api.model_requests().len() >= RUNS);
}

#[test]
fn claude_a_20_mib_reply_ten_times_keeps_every_terminal_event() {
    claude_text_reply_ten_times(20 * MIB);
}

#[test]
fn claude_a_4_mib_reply_ten_times_keeps_every_terminal_event() {
    claude_text_reply_ten_times(4 * MIB);
}

/// Claude Code writing a 20 MiB file (one `Write` call: the whole content in one `assistant`
/// line), then answering, ten times in a row: each file is complete, and each run keeps its
/// terminal event, usage, cost and session.
#[test]
fn claude_a_20_mib_write_ten_times_writes_every_file_whole() {
    let bytes = 20 * MIB;
    let content = bulk_text(bytes);
    let name = |run: usize| format!("big-{run}.txt");
    let world = World::new(&CLAUDE, |_| {
        Scenario::script((0..RUNS).flat_map(|run| {
            [
                Step::write_named_for("claude", name(run), content.clone()).unwrap(),
                Step::text("Done: the file is written."),
            ]
        }))
    });
    for run in 0..RUNS {
        let path = world.project().join(name(run));
        let s = run_ok(&world, &format!("Write the file {}", path.display()));
        let dir = run_dir(&s);
        let rec = assert_terminal_kept(&CLAUDE, &dir, &s);
        assert_claude_usage(&rec, 2);
        assert_eq!(rec["result"], "Done: the file is written.");
        let written = std::fs::read(&path).unwrap_or_else(|e| panic!("run {run}: {e}"));
        assert_eq!(written.len(), bytes, "run {run}: {} is cut", path.display());
        assert!(
            written == content.as_bytes(),
            "run {run}: {} has the size but not the content",
            path.display()
        );
        // The tool call still names the tool and the path, its 20 MiB input shortened.
        let log = log(&dir);
        let uses = agent_events(&log, "tool_use");
        assert!(
            uses.iter().any(
                |u| u["name"] == "Write" && u.to_string().contains(&path.display().to_string())
            ),
            "run {run}: {:?}",
            uses.iter().map(|u| short(u)).collect::<Vec<_>>()
        );
        assert!(
            cut_lengths(&log).contains(&(bytes as u64)),
            "run {run}: the Write's content arrived whole: {:?}",
            cut_lengths(&log)
        );
        std::fs::remove_file(&path).unwrap();
        eprintln!("claude 20 MiB write, run {}/{RUNS}: ok", run + 1);
    }
    assert_eq!(world.api.steps_left(), 0);
}

conformance!(
    a_20_mib_reply_keeps_the_terminal_event,
    |cli: &'static Cli| {
        let bytes = 20 * MIB;
        let world = World::new(cli, |_| Scenario::script([Step::text(bulk_text(bytes))]));
        let s = run_ok(&world, "say a lot");
        let dir = run_dir(&s);
        let rec = assert_terminal_kept(cli, &dir, &s);
        let answer = rec["result"].as_str().unwrap_or_default();
        assert!(answer.starts_with("line 0000000000 "), "{}", short(&rec));
        let cut = cut_lengths(&log(&dir));
        assert!(
            cut.contains(&(bytes as u64)),
            "the {bytes}-byte answer arrived whole: cut strings {cut:?}"
        );
    }
);
