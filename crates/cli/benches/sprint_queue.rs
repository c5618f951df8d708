//! `cargo bench -p corral-cli --bench sprint_queue`: what the merge queue of `--jobs` (issue 35)
//! costs and saves when tasks overlap.
//!
//! One sprint of eight one-round tasks in two groups: `t01`–`t04` each append their id to
//! `group-a.txt`, `t05`–`t08` to `group-b.txt` (the task prompt names the file; the stand-in for
//! Claude Code works 2 s, appends, writes `signals.json`). Tasks of a group change the same lines,
//! so two of them started from the same head conflict at the fold. Four sides, each in a fresh
//! copy of a repository, rotated round by round:
//!
//! - `--jobs 1`: one task after another in the project; no fold at all.
//! - `--jobs 4` with `fold_check = "off"` and without `touches`: the fold before issue 35 (no
//!   check after a fold, nothing held apart), but for a conflict, which sends its task home for
//!   one more round at the tip where that fold blocked it.
//! - `--jobs 4` without `touches`: today's queue as a file that declares nothing gets it. Four
//!   tasks start at once; a group's second, third and fourth conflict at the fold and are sent
//!   home for one more round at the tip (after that, what their sent-home change touched keeps
//!   them apart).
//! - `--jobs 4` with `touches = ["group-a.txt"]` (or `b`): a group's tasks are held back behind
//!   each other, none conflicts. With the groups one after the other in the file (`t01`–`t04`,
//!   then `t05`–`t08`), the first task of `b` runs beside `a`'s, but the next one is held until
//!   it is folded, which is after all of `a` (folds go in run order).
//! - `--jobs 4` with `touches`, the groups interleaved in the file (odd tasks `a`, even `b`):
//!   one task of each group runs at a time, and each folds right after the one before it.
//!
//! `--jobs 1` is the floor without folds. Measured per side: the wall, the generator rounds spent (`spawn-started` events of the
//! generator), tasks sent home and held, and the folded checks' cost: the time from each
//! `folded` event to its `fold-checked` event as this bench reads the `--json` lines (the check,
//! `! grep -qs TODO *.txt`, costs next to nothing itself, so this is the sandboxed check's own
//! cost a fold). Reported, no target. The table goes to stdout and
//! `target/bench-sprint-queue-report.md`; `docs/benchmarks.md` has the last figures. Run without
//! `--bench` (as `cargo test --benches` does), it makes one small run of each side (two tasks of
//! one group, `--jobs 2`) and checks that each task was committed once.

// A benchmark is a tool, not product: a failed run stops it loudly, and it runs git itself.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

mod common;

use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Read};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{ExitCode, Stdio};
use std::time::Instant;

use common::parallel::CHECK;
use common::{fmt_list, git, median, rotation, task_id};
use corral_test_support::is_root;

/// Tasks per run and per group, measured and in the smoke run.
const TASKS: usize = 8;
const GROUP: usize = 4;
const SMOKE_TASKS: usize = 2;
const SMOKE_GROUP: usize = 2;
/// The parallel sides' `--jobs`, measured and in the smoke run.
const JOBS: usize = 4;
const SMOKE_JOBS: usize = 2;
/// How long the stand-in agent works per round, in seconds.
const WORK_S: u32 = 2;

/// The stand-in for Claude Code: the spawn directory in the prompt names the task, the task's
/// prompt the group file it appends its id to.
const STAND_IN: &str = r#"#!/bin/sh
if [ "$1" = "--version" ]; then echo "2.1.197 (Claude Code)"; exit 0; fi
PROMPT=$(cat)
SIGNALS=$(printf '%s\n' "$PROMPT" | grep -o '/[^`]*signals\.json' | head -n 1)
R=${SIGNALS%/generator/signals.json}; T=${R%/rounds/*}; TASK=${T##*/}
FILE=$(printf '%s\n' "$PROMPT" | grep -o 'group-[a-z]\.txt' | head -n 1)
echo '{"type":"system","subtype":"init","session_id":"0b8f5a7e-3c1d-4e2f-9a6b-5d4c3b2a1f00","model":"claude-opus-4-8"}'
sleep WORK_S
echo "$TASK" >> "$FILE"
printf '%s' '{"schemaVersion":1,"signals":[{"type":"task-complete","timestamp":"2026-12-01T10:00:00Z"}]}' > "$SIGNALS"
echo '{"type":"result","subtype":"success","is_error":false,"result":"done","session_id":"0b8f5a7e-3c1d-4e2f-9a6b-5d4c3b2a1f00","total_cost_usd":0.001,"usage":{"input_tokens":10,"output_tokens":5}}'
"#;

/// The sides, in table order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    Serial,
    Before,
    NoTouches,
    Touches,
    Interleaved,
}

const SIDES: [Side; 5] = [
    Side::Serial,
    Side::Before,
    Side::NoTouches,
    Side::Touches,
    Side::Interleaved,
];

impl Side {
    fn name(self) -> &'static str {
        match self {
            Side::Serial => "`--jobs 1`",
            Side::Before => "`--jobs N`, `fold_check = \"off\"`, no `touches` (before issue 35)",
            Side::NoTouches => "`--jobs N`, no `touches`",
            Side::Touches => "`--jobs N`, `touches` per group",
            Side::Interleaved => "`--jobs N`, `touches`, groups interleaved",
        }
    }

    fn dir(self) -> &'static str {
        match self {
            Side::Serial => "serial",
            Side::Before => "before",
            Side::NoTouches => "no-touches",
            Side::Touches => "touches",
            Side::Interleaved => "interleaved",
        }
    }

    /// The template it copies: its sprint file.
    fn template(self) -> &'static str {
        match self {
            Side::Serial | Side::NoTouches => "template-plain",
            Side::Before => "template-before",
            Side::Touches => "template-touches",
            Side::Interleaved => "template-interleaved",
        }
    }

    /// Whether the file's groups alternate task by task.
    fn interleaved(self) -> bool {
        self == Side::Interleaved
    }
}

/// The group file of the `n`th task (1-based): the first `group` tasks are `a`'s, or, when
/// `interleaved`, the odd ones.
fn group_file(n: usize, group: usize, interleaved: bool) -> String {
    let first = if interleaved {
        n % 2 == 1
    } else {
        (n - 1) / group == 0
    };
    let letter = if first { 'a' } else { 'b' };
    format!("group-{letter}.txt")
}

/// The sprint: `tasks` one-round tasks in groups of `group`, evaluator off, each naming its
/// group's file, with `touches` or not, the folded check on or off.
fn sprint_file(tasks: usize, group: usize, side: Side) -> String {
    let touches = matches!(side, Side::Touches | Side::Interleaved);
    let fold_check = if side == Side::Before { "off" } else { "each" };
    let mut out = format!(
        "[sprint]\nname = \"bench\"\ncheck = \"{CHECK}\"\ncheck_timeout_ms = 30000\n\
         max_rounds = 1\nmax_attempts = 1\nfold_check = \"{fold_check}\"\n\n\
         [roles.generator]\nprovider = \"claude\"\n\n\
         [roles.evaluator]\nprovider = \"claude\"\nenabled = false\n"
    );
    for n in 1..=tasks {
        let id = task_id(n);
        let file = group_file(n, group, side.interleaved());
        write!(
            out,
            "\n[[tasks]]\nid = \"{id}\"\ntitle = \"Task {id}\"\n\
             prompt = \"Append your id to {file}.\"\n"
        )
        .unwrap();
        if touches {
            writeln!(out, "touches = [\"{file}\"]").unwrap();
        }
    }
    out
}

/// A scratch home, the stand-in, and one template repository per sprint file.
struct Place {
    _dir: tempfile::TempDir,
    root: PathBuf,
    home: PathBuf,
    stand_in: PathBuf,
    tasks: usize,
    group: usize,
}

impl Place {
    fn new(tasks: usize, group: usize) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let home = root.join("home");
        std::fs::create_dir_all(&home).unwrap();
        let stand_in = root.join("claude");
        std::fs::write(&stand_in, STAND_IN.replace("WORK_S", &WORK_S.to_string())).unwrap();
        std::fs::set_permissions(&stand_in, std::fs::Permissions::from_mode(0o755)).unwrap();
        for side in [
            Side::Before,
            Side::NoTouches,
            Side::Touches,
            Side::Interleaved,
        ] {
            let template = root.join(side.template());
            std::fs::create_dir_all(&template).unwrap();
            std::fs::write(template.join(".gitignore"), ".corral/\n").unwrap();
            std::fs::write(template.join("group-a.txt"), "group a\n").unwrap();
            std::fs::write(template.join("group-b.txt"), "group b\n").unwrap();
            std::fs::write(
                template.join("corral-sprint.toml"),
                sprint_file(tasks, group, side),
            )
            .unwrap();
            for args in [
                &["init", "--quiet", "--initial-branch=main"][..],
                &["config", "user.name", "Bench"],
                &["config", "user.email", "bench@example.invalid"],
                &["add", "--all"],
                &["commit", "--quiet", "-m", "start"],
            ] {
                git(&template, args);
            }
        }
        Place {
            _dir: dir,
            root,
            home,
            stand_in,
            tasks,
            group,
        }
    }

    /// A fresh copy of the side's template repository.
    fn project(&self, side: Side) -> PathBuf {
        let project = self.root.join(side.dir());
        let _ = std::fs::remove_dir_all(&project);
        let template = self.root.join(side.template());
        let status = corral_test_support::command(Path::new("cp"))
            .arg("-a")
            .arg(&template)
            .arg(&project)
            .status()
            .unwrap();
        assert!(status.success());
        project
    }
}

/// What one run measured.
#[derive(Debug, Default, Clone)]
struct Run {
    wall: f64,
    rounds: usize,
    sent_home: usize,
    held: usize,
    blocked: usize,
    /// Seconds from each `folded` to its `fold-checked`.
    fold_checks: Vec<f64>,
}

/// One run of `side` with `--jobs jobs` in a fresh copy. Checks that every task that ended
/// done was committed exactly once on the sprint's branch, with its line in its group file.
fn run(corral: &Path, place: &Place, side: Side, jobs: usize) -> Run {
    let project = place.project(side);
    let jobs = if side == Side::Serial { 1 } else { jobs };
    let mut cmd = corral_test_support::command(corral);
    cmd.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", &place.home)
        .env("ANTHROPIC_API_KEY", "sk-bench")
        .env("CORRAL_PROVIDERS__CLAUDE__COMMAND", &place.stand_in)
        .current_dir(&project)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .args(["sprint", "run", "--json", "--jobs", &jobs.to_string()]);
    if is_root() {
        cmd.env("IS_SANDBOX", "1");
    }
    let started = Instant::now();
    let mut child = cmd.spawn().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let drain = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let mut measured = Run::default();
    let mut folded_at: Vec<(String, Instant)> = Vec::new();
    let mut lines = Vec::new();
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let line = line.unwrap();
        let at = Instant::now();
        let Ok(event) = serde_json::from_str::<serde_json::Value>(&line) else {
            continue;
        };
        let task = event["task"].as_str().unwrap_or_default().to_string();
        match event["event"].as_str().unwrap_or_default() {
            "spawn-started" if event["role"] == "generator" => measured.rounds += 1,
            "sent-home" => measured.sent_home += 1,
            "held" => measured.held += 1,
            "folded" => folded_at.push((task, at)),
            "fold-checked" => {
                if let Some(k) = folded_at.iter().position(|(t, _)| *t == task) {
                    let (_, from) = folded_at.swap_remove(k);
                    measured
                        .fold_checks
                        .push(at.duration_since(from).as_secs_f64());
                }
            }
            "task-finished" if event["status"] == "blocked" => measured.blocked += 1,
            _ => {}
        }
        lines.push(line);
    }
    let status = child.wait().unwrap();
    measured.wall = started.elapsed().as_secs_f64();
    let stderr = drain.join().unwrap();
    // 0: every task done; 3: a task blocked (a second failed fold), which the table reports.
    assert!(
        matches!(status.code(), Some(0 | 3)),
        "{} exited with {status}\nstderr: {stderr}\nstdout:\n{}",
        side.name(),
        lines.join("\n")
    );
    let log = git(
        &project,
        &[
            "log",
            "--format=%(trailers:key=Corral-Task,valueonly)",
            "main..corral/bench",
        ],
    );
    let committed: Vec<&str> = log
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    for n in 1..=place.tasks {
        let id = task_id(n);
        let times = committed.iter().filter(|t| **t == id).count();
        assert!(
            times <= 1,
            "{}: {id} committed {times} times:\n{log}",
            side.name()
        );
        if times == 1 {
            let file = group_file(n, place.group, side.interleaved());
            let text = git(&project, &["show", &format!("corral/bench:{file}")]);
            assert!(
                text.lines().any(|l| l == id),
                "{}: {id} committed but not in {file}:\n{text}",
                side.name()
            );
        }
    }
    assert_eq!(
        committed.len() + measured.blocked,
        place.tasks,
        "{}: {} commits and {} blocked:\n{log}\nstdout:\n{}",
        side.name(),
        committed.len(),
        measured.blocked,
        lines.join("\n")
    );
    measured
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".to_string())
}

/// `n` rotated rounds of the sides: each side's runs, in [`SIDES`] order.
fn rounds(corral: &Path, place: &Place, jobs: usize, n: usize) -> [Vec<Run>; SIDES.len()] {
    let mut runs: [Vec<Run>; SIDES.len()] = Default::default();
    for round in 0..n {
        for k in rotation(round, SIDES.len()) {
            let side = SIDES[k];
            let r = run(corral, place, side, jobs);
            eprintln!(
                "  {} round {}/{n}: {:.2} s, {} rounds, {} sent home, {} held, {} blocked",
                side.name(),
                round + 1,
                r.wall,
                r.rounds,
                r.sent_home,
                r.held,
                r.blocked
            );
            runs[k].push(r);
        }
    }
    runs
}

fn report(runs: &[Vec<Run>; SIDES.len()], load_before: &str, load_after: &str) -> String {
    let serial = median(&runs[0].iter().map(|r| r.wall).collect::<Vec<_>>());
    let mut table = format!(
        "| {TASKS} tasks in 2 groups of {GROUP} (a group's tasks append to one file), agent works \
         {WORK_S} s a round, stand-in Claude Code, default sandbox ({} rounds) | median wall (s) | \
         runs (s) | ratio to `--jobs 1` | generator rounds (median) | sent home | held | blocked | \
         folded check, ms a fold (median) | folded checks, s a run (median) |\n\
         |---|---|---|---|---|---|---|---|---|---|\n",
        runs[0].len()
    );
    for (k, side) in SIDES.iter().enumerate() {
        let walls: Vec<f64> = runs[k].iter().map(|r| r.wall).collect();
        let med = |f: &dyn Fn(&Run) -> f64| median(&runs[k].iter().map(f).collect::<Vec<_>>());
        let checks: Vec<f64> = runs[k]
            .iter()
            .flat_map(|r| r.fold_checks.iter().copied())
            .collect();
        let (per_fold, per_run) = if checks.is_empty() {
            ("–".to_string(), "–".to_string())
        } else {
            (
                format!("{:.0}", median(&checks) * 1000.0),
                format!("{:.2}", med(&|r| r.fold_checks.iter().sum::<f64>())),
            )
        };
        writeln!(
            table,
            "| {} | {:.2} | {} | {:.2}× | {:.0} | {:.0} | {:.0} | {:.0} | {per_fold} | {per_run} |",
            side.name().replace('N', &JOBS.to_string()),
            median(&walls),
            fmt_list(&walls),
            median(&walls) / serial,
            med(&|r| r.rounds as f64),
            med(&|r| r.sent_home as f64),
            med(&|r| r.held as f64),
            med(&|r| r.blocked as f64),
        )
        .unwrap();
    }
    write!(
        table,
        "\nLoad average (1, 5, 15 min): {load_before} before, {load_after} after.\n"
    )
    .unwrap();
    table
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let benching = args.iter().any(|a| a == "--bench");
    let quick = args.iter().any(|a| a == "--quick");
    let corral = PathBuf::from(env!("CARGO_BIN_EXE_corral"));
    if !benching {
        let place = Place::new(SMOKE_TASKS, SMOKE_GROUP);
        let runs = rounds(&corral, &place, SMOKE_JOBS, 1);
        eprintln!(
            "sprint_queue bench smoke ({SMOKE_TASKS} tasks of one group, --jobs {SMOKE_JOBS}): {:?}",
            runs.iter()
                .map(|r| r.iter().map(|r| r.wall).collect::<Vec<_>>())
                .collect::<Vec<_>>()
        );
        return ExitCode::SUCCESS;
    }
    let n = if quick { 3 } else { 6 };
    let place = Place::new(TASKS, GROUP);
    // Warm-up, not counted: Corral's version cache, the page cache.
    run(&corral, &place, Side::Touches, JOBS);
    let load_before = load_average();
    eprintln!(
        "sprint_queue: {n} rotated rounds of {} sides, {TASKS} tasks, --jobs {JOBS}",
        SIDES.len()
    );
    let runs = rounds(&corral, &place, JOBS, n);
    let table = report(&runs, &load_before, &load_average());
    println!("{table}");
    let target =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/bench-sprint-queue-report.md");
    let _ = std::fs::write(&target, &table);
    ExitCode::SUCCESS
}
