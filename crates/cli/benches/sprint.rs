//! `cargo bench -p corral-cli --bench sprint`: what `corral sprint run` costs over a shell
//! script doing the same work with `corral run` (issue 9, "Live view and performance").
//!
//! Both sides run 30 tasks of 2 rounds each through the same stand-in for Claude Code (a shell
//! script that prints a stream-json init and result line and writes `signals.json`): in round 1
//! the generator writes `<task>.txt` containing `TODO`, which fails the check
//! (`! grep -qs TODO *.txt`); in round 2 it writes `done`, which passes. The evaluator is off.
//!
//! - **sprint**: `corral sprint run` over a generated `corral-sprint.toml` (`max_rounds = 2`,
//!   `max_attempts = 2`): per task the pre-verify check (after the first task, the passing check
//!   the task before ran on the same tree: not run again), round 1, the failing check
//!   (regressed: the patch is saved and the tree reset), round 2 resuming the session, the
//!   passing check, the commit with its trailers; `sprint.json` written at every step (synced
//!   before the reset and before the commit). The checks run in the sandbox, as a sprint's do by
//!   default; the script's run in its shell.
//! - **script**: a generated `sh` script doing the same by hand: per task the check,
//!   `corral run` for round 1, the check, `git diff` into a patch and `git reset --hard`,
//!   `corral run --resume` for round 2, the check, `git add` and `git commit`.
//!
//! Both under the default sandbox, each in a fresh copy of the same repository; the sides rotate
//! round by round. Target: the sprint's median wall ≤ 1.2× the script's. The table goes to stdout
//! and `target/bench-sprint-report.md`; `docs/benchmarks.md` has the last figures. Run without
//! `--bench` (as `cargo test --benches` does), it makes one small run of each side (2 tasks) and
//! checks both made their commits.

// A benchmark is a tool, not product: a failed run stops it loudly, and it spawns the script
// and git itself (that is the point of the comparison).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

mod common;
#[path = "sprint/floor.rs"]
mod floor;

use std::fmt::Write as _;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{ExitCode, Stdio};
use std::time::Instant;

use common::{commit_template, fmt_list, fresh_copy, git, median, task_id};
use corral_test_support::is_root;

/// Tasks per run, measured and in the smoke run.
const TASKS: usize = 30;
const SMOKE_TASKS: usize = 2;
/// Target: sprint wall over script wall.
const TARGET: f64 = 1.2;
/// The session the stand-in announces.
const SESSION: &str = "0b8f5a7e-3c1d-4e2f-9a6b-5d4c3b2a1f00";
/// The check both sides run.
const CHECK: &str = "! grep -qs TODO *.txt";

/// The stand-in for Claude Code. The sprint's spawn directory
/// (`…/implement/<task>/rounds/<N>/generator/signals.json`) names the task and round; the
/// script's prompt names them with `BENCH-TASK` and `BENCH-ROUND`.
const STAND_IN: &str = r#"#!/bin/sh
if [ "$1" = "--version" ]; then echo "2.1.197 (Claude Code)"; exit 0; fi
PROMPT=$(cat)
SIGNALS=$(printf '%s\n' "$PROMPT" | grep -o '/[^`]*signals\.json' | head -n 1)
case "$SIGNALS" in
  */implement/*/rounds/*)
    R=${SIGNALS%/generator/signals.json}; ROUND=${R##*/}; T=${R%/rounds/*}; TASK=${T##*/} ;;
  *)
    TASK=$(printf '%s\n' "$PROMPT" | sed -n 's/.*BENCH-TASK \([a-z0-9]*\).*/\1/p' | head -n 1)
    ROUND=$(printf '%s\n' "$PROMPT" | sed -n 's/.*BENCH-ROUND \([0-9]*\).*/\1/p' | head -n 1) ;;
esac
if [ "$ROUND" = 1 ]; then echo TODO > "$TASK.txt"; else echo done > "$TASK.txt"; fi
printf '%s' '{"schemaVersion":1,"signals":[{"type":"task-complete","timestamp":"2026-12-01T10:00:00Z"}]}' > "$SIGNALS"
echo '{"type":"system","subtype":"init","session_id":"SESSION","model":"claude-opus-4-8"}'
echo '{"type":"result","subtype":"success","is_error":false,"result":"done","session_id":"SESSION","total_cost_usd":0.001,"usage":{"input_tokens":10,"output_tokens":5}}'
"#;

/// A scratch home, the stand-in, and a template repository that each run copies.
struct Place {
    _dir: tempfile::TempDir,
    root: PathBuf,
    home: PathBuf,
    stand_in: PathBuf,
    template: PathBuf,
    tasks: usize,
}

impl Place {
    fn new(tasks: usize) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let home = root.join("home");
        std::fs::create_dir_all(&home).unwrap();
        let stand_in = root.join("claude");
        std::fs::write(&stand_in, STAND_IN.replace("SESSION", SESSION)).unwrap();
        std::fs::set_permissions(&stand_in, std::fs::Permissions::from_mode(0o755)).unwrap();
        let template = root.join("template");
        std::fs::create_dir_all(&template).unwrap();
        std::fs::write(template.join("README"), "bench\n").unwrap();
        std::fs::write(template.join(".gitignore"), ".corral/\nregressed-*.patch\n").unwrap();
        std::fs::write(template.join("corral-sprint.toml"), sprint_file(tasks)).unwrap();
        std::fs::write(template.join("by-hand.sh"), script(tasks)).unwrap();
        commit_template(&template);
        Place {
            _dir: dir,
            root,
            home,
            stand_in,
            template,
            tasks,
        }
    }

    /// A fresh copy of the template repository.
    fn project(&self, name: &str) -> PathBuf {
        let project = self.root.join(name);
        fresh_copy(&self.template, &project);
        project
    }

    /// A command with only what a run needs in its environment.
    fn command(&self, program: &Path, project: &Path) -> std::process::Command {
        let mut cmd = corral_test_support::command(program);
        cmd.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &self.home)
            .env("ANTHROPIC_API_KEY", "sk-bench")
            .env("CORRAL_PROVIDERS__CLAUDE__COMMAND", &self.stand_in)
            .current_dir(project)
            .stdin(Stdio::null());
        if is_root() {
            cmd.env("IS_SANDBOX", "1");
        }
        cmd
    }
}

fn sprint_file(tasks: usize) -> String {
    let mut out = format!(
        "[sprint]\nname = \"bench\"\ncheck = \"{CHECK}\"\ncheck_timeout_ms = 30000\n\
         max_rounds = 2\nmax_attempts = 2\n\n[roles.generator]\nprovider = \"claude\"\n\n\
         [roles.evaluator]\nprovider = \"claude\"\nenabled = false\n"
    );
    for n in 1..=tasks {
        let id = task_id(n);
        write!(
            out,
            "\n[[tasks]]\nid = \"{id}\"\ntitle = \"Task {id}\"\nprompt = \"Write {id}.txt. BENCH-TASK {id}\"\n"
        )
        .unwrap();
    }
    out
}

/// The shell script doing the sprint's work by hand, with `corral run`.
fn script(tasks: usize) -> String {
    let mut out = format!(
        "#!/bin/sh\nset -e\ncheck() {{ {CHECK}; }}\n\
         corral() {{ \"$CORRAL\" \"$@\" > /dev/null; }}\n"
    );
    for n in 1..=tasks {
        let id = task_id(n);
        write!(
            out,
            "check\n\
             corral run --provider claude \"Write {id}.txt. BENCH-TASK {id} BENCH-ROUND 1\"\n\
             if ! check; then\n\
             \x20 git add --all && git diff --cached > regressed-{id}.patch && git reset --quiet --hard\n\
             \x20 corral run --provider claude --resume {SESSION} \"Write {id}.txt. BENCH-TASK {id} BENCH-ROUND 2\"\n\
             \x20 check\n\
             fi\n\
             git add --all\n\
             git commit --quiet -m \"Task {id}\" -m \"Corral-Task: {id}\"\n"
        )
        .unwrap();
    }
    out
}

#[derive(Debug, Clone, Copy)]
enum Side {
    Script,
    Sprint,
}

impl Side {
    const ALL: [Side; 2] = [Side::Script, Side::Sprint];
}

/// One run of `side` in a fresh copy: its wall in seconds. Checks that every task was
/// committed, with the round-2 content.
fn run(corral: &Path, place: &Place, side: Side) -> f64 {
    let project = place.project(&format!("{side:?}").to_lowercase());
    let mut cmd = match side {
        Side::Script => {
            let mut cmd = place.command(Path::new("sh"), &project);
            cmd.env("CORRAL", corral).arg("by-hand.sh");
            cmd
        }
        Side::Sprint => {
            let mut cmd = place.command(corral, &project);
            cmd.args(["sprint", "run"]);
            cmd
        }
    };
    cmd.stdout(Stdio::null()).stderr(Stdio::piped());
    let started = Instant::now();
    let out = cmd.output().unwrap();
    let wall = started.elapsed().as_secs_f64();
    assert!(
        out.status.success(),
        "{side:?} exited with {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let log = git(&project, &["log", "--format=%s"]);
    let commits = log.lines().filter(|l| l.starts_with("Task t")).count();
    assert_eq!(
        commits, place.tasks,
        "{side:?} made {commits} commits:\n{log}"
    );
    let last = task_id(place.tasks);
    let text = std::fs::read_to_string(project.join(format!("{last}.txt"))).unwrap();
    assert_eq!(text, "done\n", "{side:?}: {last}.txt after round 2");
    wall
}

/// `rounds` rotating rounds of both sides; walls in seconds, indexed like `ALL`.
fn rounds(corral: &Path, place: &Place, rounds: usize) -> [Vec<f64>; 2] {
    let mut walls: [Vec<f64>; 2] = Default::default();
    for round in 0..rounds {
        // ABBA: `common::rotation` puts the same side first every round when there are two.
        let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        for i in order {
            let side = Side::ALL[i];
            let wall = run(corral, place, side);
            eprintln!("  {side:?} round {}/{rounds}: {wall:.2} s", round + 1);
            walls[i].push(wall);
        }
    }
    walls
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".to_string())
}

fn report(walls: &[Vec<f64>; 2], load_before: &str, load_after: &str) -> String {
    let script = median(&walls[0]);
    let sprint = median(&walls[1]);
    let ratio = sprint / script;
    let verdict = if ratio <= TARGET { "PASS" } else { "MISS" };
    format!(
        "| {TASKS} tasks × 2 rounds, stand-in Claude Code, default sandbox ({} rounds) | median wall (s) | runs (s) | per task (ms) | ratio to script | Target | Result |\n\
         |---|---|---|---|---|---|---|\n\
         | shell script: `corral run` ×2, check ×3, `git commit` | {script:.2} | {} | {:.0} | 1.00 | | |\n\
         | `corral sprint run` | {sprint:.2} | {} | {:.0} | {ratio:.2}× | ≤ {TARGET:.1}× | {verdict} |\n\n\
         Load average (1, 5, 15 min): {load_before} before, {load_after} after.\n",
        walls[0].len(),
        fmt_list(&walls[0]),
        script * 1000.0 / TASKS as f64,
        fmt_list(&walls[1]),
        sprint * 1000.0 / TASKS as f64,
    )
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let benching = args.iter().any(|a| a == "--bench");
    let quick = args.iter().any(|a| a == "--quick");
    let corral = PathBuf::from(env!("CARGO_BIN_EXE_corral"));
    let claude = corral_test_support::require_cli("claude");
    if !benching {
        let place = Place::new(SMOKE_TASKS);
        let walls = rounds(&corral, &place, 1);
        eprintln!("sprint bench smoke ({SMOKE_TASKS} tasks): script, sprint {walls:?}");
        let floor = floor::Floor::new(&claude);
        let walls = floor.rounds(&corral, 1);
        eprintln!("sprint bench smoke (floor, real Claude Code): loop, sprint {walls:?}");
        return ExitCode::SUCCESS;
    }
    let n = if quick { 3 } else { 7 };
    let place = Place::new(TASKS);
    // Warm-up, not counted: Corral's version cache, the page cache.
    run(&corral, &place, Side::Script);
    run(&corral, &place, Side::Sprint);
    let load_before = load_average();
    eprintln!("sprint: {n} rotating rounds of script / sprint, {TASKS} tasks × 2 rounds");
    let walls = rounds(&corral, &place, n);
    let mut table = report(&walls, &load_before, &load_average());
    let floor = floor::Floor::new(&claude);
    floor.warm_up(&corral);
    let load_before = load_average();
    let floor_n = if quick { 3 } else { 5 };
    eprintln!(
        "sprint floor: {floor_n} alternated rounds of a `claude -p` loop / `corral sprint run`, {} tasks",
        floor::TASKS
    );
    let walls = floor.rounds(&corral, floor_n);
    table.push('\n');
    table.push_str(&floor::report(&walls, &load_before, &load_average()));
    println!("{table}");
    let target =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/bench-sprint-report.md");
    let _ = std::fs::write(&target, &table);
    ExitCode::SUCCESS
}
