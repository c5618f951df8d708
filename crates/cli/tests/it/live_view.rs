//! The live view on a real terminal: a status line redrawn in place (provider, elapsed, tool
//! calls, tokens, cost, current activity), event lines above it, and the summary at the end.

use std::time::Duration;

use corral_test_support::fake_api::{Scenario, Step};

use crate::providers::{CLAUDE, VALID_SIGNALS, World};

#[test]
fn a_terminal_shows_the_status_line_tool_calls_tokens_and_the_summary() {
    let world = World::new(&CLAUDE, |_| {
        Scenario::script([Step::write_signals(VALID_SIGNALS), Step::text("All done.")])
    });
    let mut cmd = corral_test_support::command(&assert_cmd::cargo::cargo_bin("corral"));
    cmd.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", world.env.home())
        .env("TERM", "xterm")
        .envs(world.vars().iter().map(|(k, v)| (k, v)))
        .current_dir(world.env.project())
        .args(["run", "--provider", "claude", "do the task"]);
    let screen = corral_test_support::run_on_pty(cmd, Duration::from_secs(120)).unwrap();
    let out = &screen.output;
    assert!(screen.status.success(), "{out}");
    // The status line is redrawn in place: carriage return, erase line, then the status.
    assert!(out.contains("\r\x1b[2K▶ claude"), "no status line: {out:?}");
    assert!(
        out.contains("tools 1"),
        "the Write call is counted: {out:?}"
    );
    assert!(
        out.contains("in 24 out 14  $0.0"),
        "tokens and cost from the result: {out:?}"
    );
    assert!(out.contains("→ Write"), "the tool call is shown: {out:?}");
    assert!(
        out.contains("outcome   succeeded (exit 0)"),
        "the summary: {out:?}"
    );
    assert!(
        out.contains("signals   valid: note, task-complete"),
        "{out:?}"
    );
}
