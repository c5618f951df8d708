//! The live view on a real terminal: a status line redrawn in place (provider, elapsed, tool
//! calls, tokens, cost, current activity), event lines above it, and the summary at the end.

use std::time::Duration;

use corral_test_support::fake_api::{Scenario, Step};

use crate::providers::{CLAUDE, VALID_SIGNALS, World};

/// `corral run` of the task on a pseudo-terminal of `columns` × `rows`, as a person runs it.
fn corral_on_pty(world: &World, columns: u16, rows: u16) -> corral_test_support::Screen {
    let mut cmd = corral_test_support::command(&assert_cmd::cargo::cargo_bin("corral"));
    cmd.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", world.env.home())
        .env("TERM", "xterm")
        .envs(world.vars().iter().map(|(k, v)| (k, v)))
        .current_dir(world.env.project())
        .args(["run", "--provider", "claude", "do the task"]);
    corral_test_support::run_on_pty_sized(cmd, columns, rows, Duration::from_secs(120)).unwrap()
}

#[test]
fn a_terminal_shows_the_status_line_tool_calls_tokens_and_the_summary() {
    let world = World::new(&CLAUDE, |_| {
        Scenario::script([Step::write_signals(VALID_SIGNALS), Step::text("All done.")])
    });
    let screen = corral_on_pty(&world, 120, 50);
    let out = &screen.output;
    assert!(screen.status.success(), "{out}");
    assert!(out.contains("▶ claude"), "no status line: {out:?}");
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

/// Where the status line is wider than the terminal: a deep path written, then a shell command
/// that takes a few seconds (the status line is redrawn every half second meanwhile).
fn narrow_terminal_run(columns: u16) -> (String, String) {
    const ROWS: u16 = 200;
    let world = World::new(&CLAUDE, |project| {
        let deep = project.join(
            "crates/some-component/src/deeply/nested/module/of/the/project/status_line_fits.rs",
        );
        Scenario::script([
            Step::write_file(&deep, "// written\n"),
            Step::tool_use(
                "Bash",
                serde_json::json!({
                    "command": "sleep 2; echo 'the status line has to fit the terminal it is drawn on'",
                    "description": "wait a little",
                }),
            ),
            Step::write_signals(VALID_SIGNALS),
            Step::text("All done."),
        ])
    });
    let screen = corral_on_pty(&world, columns, ROWS);
    assert!(screen.status.success(), "{}", screen.output);
    // What a person sees once the run is over: the terminal's rows, as a VT100 draws them.
    let mut terminal = vt100::Parser::new(ROWS, columns, 0);
    terminal.process(screen.output.as_bytes());
    (terminal.screen().contents(), screen.output)
}

#[test]
fn a_narrow_terminal_keeps_no_stale_status_rows_and_shows_the_file_name() {
    for columns in [80, 60] {
        let (rows, raw) = narrow_terminal_run(columns);
        // The status line was drawn while the run went on …
        assert!(raw.contains("▶ claude"), "{columns} columns: {raw:?}");
        // … and no row of it is left: a wrapped status line cleared one row at a time left
        // its first rows behind on every redraw.
        let stale: Vec<&str> = rows.lines().filter(|row| row.contains('▶')).collect();
        assert!(
            stale.is_empty(),
            "{columns} columns: stale status rows {stale:#?} in\n{rows}"
        );
        // The tool line keeps the file's name, cutting the path at its start.
        assert!(
            rows.contains("→ Write …/") && rows.contains("/status_line_fits.rs"),
            "{columns} columns:\n{rows}"
        );
        assert!(
            rows.contains("outcome   succeeded (exit 0)"),
            "{columns} columns:\n{rows}"
        );
    }
}

/// On a terminal the answer is shown once, as `claude -p` shows it: on stdout, after the live
/// view, which leaves it out (no text line of it, no text in the result line); the summary
/// follows on stderr.
#[test]
fn a_terminal_shows_the_answer_once() {
    const ANSWER: &str = "The answer, shown once: forty-two.";
    const ROWS: u16 = 60;
    let world = World::new(&CLAUDE, |_| {
        Scenario::script([Step::write_signals(VALID_SIGNALS), Step::text(ANSWER)])
    });
    let screen = corral_on_pty(&world, 120, ROWS);
    assert!(screen.status.success(), "{}", screen.output);
    let mut terminal = vt100::Parser::new(ROWS, 120, 0);
    terminal.process(screen.output.as_bytes());
    let rows: Vec<String> = terminal.screen().rows(0, 120).collect();
    let all = rows.join("\n");
    assert_eq!(all.matches(ANSWER).count(), 1, "{all}");
    assert!(rows.iter().any(|r| r.trim_end() == "result: done"), "{all}");
    let answer_row = rows.iter().position(|r| r.trim_end() == ANSWER);
    let outcome_row = rows
        .iter()
        .position(|r| r.starts_with("outcome   succeeded"));
    assert!(
        answer_row.is_some() && answer_row < outcome_row,
        "the answer alone on its row, before the summary:\n{all}"
    );
}
