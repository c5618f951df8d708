//! What `sprint_jobs` and `sprint_ray` share: the sprint of independent one-round tasks both
//! run and its stand-in for Claude Code.

use super::task_id;
use std::fmt::Write as _;

/// How long the stand-in agent works per task, in seconds.
pub const WORK_S: u32 = 2;
/// The check every side runs.
pub const CHECK: &str = "! grep -qs TODO *.txt";

/// The stand-in for Claude Code. The sprint's spawn directory
/// (`…/implement/<task>/rounds/<N>/generator/signals.json`) names the task.
const STAND_IN: &str = r#"#!/bin/sh
if [ "$1" = "--version" ]; then echo "2.1.197 (Claude Code)"; exit 0; fi
PROMPT=$(cat)
SIGNALS=$(printf '%s\n' "$PROMPT" | grep -o '/[^`]*signals\.json' | head -n 1)
R=${SIGNALS%/generator/signals.json}; T=${R%/rounds/*}; TASK=${T##*/}
echo '{"type":"system","subtype":"init","session_id":"0b8f5a7e-3c1d-4e2f-9a6b-5d4c3b2a1f00","model":"claude-opus-4-8"}'
sleep WORK_S
echo done > "$TASK.txt"
printf '%s' '{"schemaVersion":1,"signals":[{"type":"task-complete","timestamp":"2026-12-01T10:00:00Z"}]}' > "$SIGNALS"
echo '{"type":"result","subtype":"success","is_error":false,"result":"done","session_id":"0b8f5a7e-3c1d-4e2f-9a6b-5d4c3b2a1f00","total_cost_usd":0.001,"usage":{"input_tokens":10,"output_tokens":5}}'
"#;

/// The stand-in's script, working [`WORK_S`] seconds.
pub fn stand_in_script() -> String {
    stand_in_working(WORK_S)
}

/// The stand-in's script, working `seconds` seconds.
pub fn stand_in_working(seconds: u32) -> String {
    STAND_IN.replace("WORK_S", &seconds.to_string())
}

/// A sprint of `tasks` independent one-round tasks, evaluator off.
pub fn sprint_file(tasks: usize) -> String {
    let mut out = format!(
        "[sprint]\nname = \"bench\"\ncheck = \"{CHECK}\"\ncheck_timeout_ms = 30000\n\
         max_rounds = 1\nmax_attempts = 1\n\n[roles.generator]\nprovider = \"claude\"\n\n\
         [roles.evaluator]\nprovider = \"claude\"\nenabled = false\n"
    );
    for n in 1..=tasks {
        let id = task_id(n);
        write!(
            out,
            "\n[[tasks]]\nid = \"{id}\"\ntitle = \"Task {id}\"\nprompt = \"Write {id}.txt.\"\n"
        )
        .unwrap();
    }
    out
}
