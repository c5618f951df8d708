//! `[limits]` as `corral run` shows a breach: the real Claude Code, against the fake model API,
//! runs a Bash tool call that is a fork loop under the default sandbox, and the run ends with
//! the `limit-exceeded` outcome, exit 10, the limit in `run.json` and in the `--json` summary,
//! the session kept for `corral resume`, and nothing of the tree left.

use serde_json::{Value, json};

use corral_test_support::fake_api::{Scenario, Step};

use crate::providers::{CLAUDE, VALID_SIGNALS, World};
use crate::support::{cmdline, record, run_dir, summary};

/// Processes at once: room for Claude Code's own (Node.js and its threads, the tool's shell)
/// and not for a fork loop.
const PIDS: &str = "256";

/// A fork loop as a model's Bash call; the sleep keeps the tool's shell (which gives up at a
/// refused fork) alive for the guard's look. The marker names its processes on the host.
fn fork_loop(marker: &str) -> String {
    format!("(while :; do sleep 30 & done) 2>/dev/null; sleep 60 # {marker}")
}

#[test]
fn a_fork_loop_in_a_tool_ends_the_run_with_exit_10_naming_the_limit_and_the_session_resumes() {
    let marker = format!("corral-limits-{}", std::process::id());
    let command = fork_loop(&marker);
    let mut world = World::new(&CLAUDE, |_| {
        Scenario::script([
            Step::tool_use(
                "Bash",
                json!({"command": command, "description": "build everything"}),
            ),
            // What the resumed session answers.
            Step::write_signals(VALID_SIGNALS),
            Step::text("Done, with less."),
        ])
    });
    world.set_var("CORRAL_LIMITS__PIDS", Some(PIDS));
    let out = world
        .corral_run()
        .args(["--json", "build everything"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(10), "{stderr}");
    let line = summary(&out.stdout);
    assert_eq!(line["outcome"], "limit-exceeded", "{line}");
    assert_eq!(line["exitCode"], 10);
    assert_eq!(line["limitExceeded"]["limit"], "pids", "{line}");
    assert_eq!(line["limitExceeded"]["cap"], json!(256), "{line}");
    assert!(
        line["error"]
            .as_str()
            .is_some_and(|e| e.contains("stopped at its pids limit of 256 processes")),
        "{line}"
    );
    let dir = run_dir(&line);
    let run = record(&dir);
    assert_eq!(run["outcome"], "limit-exceeded");
    assert_eq!(run["exitCode"], 10);
    assert_eq!(run["limitExceeded"], line["limitExceeded"]);
    let session = run["sessionId"].as_str().expect("the session is kept");
    let resume = run["resumeCommand"].as_str().expect("a resume command");
    assert!(resume.starts_with("corral resume "), "{resume}");
    // The attempt was classified as such, once: not retried.
    let classified: Vec<Value> = crate::support::log(&dir)
        .into_iter()
        .filter(|l| l["kind"] == "classified")
        .collect();
    assert_eq!(classified.len(), 1, "{classified:?}");
    assert_eq!(classified[0]["class"], "limit-exceeded");
    // Nothing of the loop is left on the machine.
    let left = naming(&marker);
    assert!(left.is_empty(), "processes of the loop left: {left:?}");

    // The kept session goes on with `corral resume`, the limit still in force.
    let run_id = run["runId"].as_str().unwrap();
    let mut resumed = world.env.corral();
    resumed
        .envs(world.vars().iter().map(|(k, v)| (k, v)))
        .timeout(std::time::Duration::from_secs(300))
        .args(["resume", run_id, "--json", "do it with less"]);
    let again = resumed.output().unwrap();
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert_eq!(again.status.code(), Some(0), "{stderr}");
    let line = summary(&again.stdout);
    assert_eq!(line["sessionId"], session, "{line}");
    assert!(line.get("limitExceeded").is_none(), "{line}");
}

/// Live processes whose command line names `marker`.
fn naming(marker: &str) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| cmdline(pid).contains(marker))
        .filter(|&pid| corral_test_support::is_alive(pid))
        .collect()
}
