//! `cargo bench -p corral-cli --bench sprint_jobs`: what `corral sprint run --jobs 4` gains over
//! `--jobs 1` when the agents, not Corral, take the time (issue 13, "Parallel waves").
//!
//! Both sides run the same sprint of eight independent tasks, one round each, evaluator off,
//! through the same stand-in for Claude Code: a shell script that works for 2 s (a `sleep`),
//! writes `<task>.txt` in its working directory (the task's worktree with `--jobs 4`, the project
//! with `--jobs 1`), writes `signals.json` and prints a stream-json init and result line.
//! `--jobs 1` runs the tasks one after another in the project; `--jobs 4` runs them in two waves
//! of four, each task in its own git worktree, folded onto the sprint's branch after each wave.
//!
//! Both under the default sandbox, each in a fresh copy of the same repository; the sides
//! alternate round by round (ABBA). Target: `--jobs 4`'s median wall ≤ 0.35× `--jobs 1`'s (the
//! agents' 16 s of work alone would allow 0.25×). The table goes to stdout and
//! `target/bench-sprint-jobs-report.md`; `docs/benchmarks.md` has the last figures. Run without
//! `--bench` (as `cargo test --benches` does), it makes one small run of each side (two tasks)
//! and checks both made their commits.
//!
//! Then the coordinator's memory (issue 38): one `corral sprint run --jobs 4` of
//! [`MEMORY_TASKS`] independent tasks whose stand-in works 0 s, the `corral` process's peak
//! resident set (`VmHWM`, read every [`SAMPLE_EVERY`] until it exits) against a target of
//! [`MEMORY_TARGET_MIB`]. The agents' and checks' processes are not counted: they are the
//! coordinator's children, each with its own memory.

// A benchmark is a tool, not product: a failed run stops it loudly, and it runs git itself.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{ExitCode, Stdio};
use std::time::Instant;

use common::parallel::{WORK_S, sprint_file, stand_in_working};
use common::{commit_template, fresh_copy, git, task_id};
use common::{fmt_list, hwm_kib, median};
use corral_test_support::is_root;

/// Tasks per run, measured and in the smoke run.
const TASKS: usize = 8;
const SMOKE_TASKS: usize = 2;
/// The parallel side's `--jobs`, measured and in the smoke run.
const JOBS: usize = 4;
const SMOKE_JOBS: usize = 2;
/// Target: `--jobs 4` wall over `--jobs 1` wall.
const TARGET: f64 = 0.35;
/// Tasks of the coordinator's memory run, measured and in the smoke run.
const MEMORY_TASKS: usize = 50;
const SMOKE_MEMORY_TASKS: usize = 4;
/// Target: the coordinator's peak resident set over a [`MEMORY_TASKS`]-task run.
const MEMORY_TARGET_MIB: f64 = 64.0;
/// How often the coordinator's `VmHWM` is read.
const SAMPLE_EVERY: std::time::Duration = std::time::Duration::from_millis(20);

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
        Self::working(tasks, WORK_S)
    }

    /// A place whose stand-in works `seconds` seconds a task.
    fn working(tasks: usize, seconds: u32) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let home = root.join("home");
        std::fs::create_dir_all(&home).unwrap();
        let stand_in = root.join("claude");
        std::fs::write(&stand_in, stand_in_working(seconds)).unwrap();
        std::fs::set_permissions(&stand_in, std::fs::Permissions::from_mode(0o755)).unwrap();
        let template = root.join("template");
        std::fs::create_dir_all(&template).unwrap();
        std::fs::write(template.join("README"), "bench\n").unwrap();
        std::fs::write(template.join(".gitignore"), ".corral/\n").unwrap();
        std::fs::write(template.join("corral-sprint.toml"), sprint_file(tasks)).unwrap();
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

    /// `corral sprint run --jobs <jobs>` with only what a run needs in its environment.
    fn sprint_run(&self, corral: &Path, project: &Path, jobs: usize) -> std::process::Command {
        let mut cmd = corral_test_support::command(corral);
        cmd.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &self.home)
            .env("ANTHROPIC_API_KEY", "sk-bench")
            .env("CORRAL_PROVIDERS__CLAUDE__COMMAND", &self.stand_in)
            .current_dir(project)
            .stdin(Stdio::null())
            .args(["sprint", "run", "--jobs", &jobs.to_string()]);
        if is_root() {
            cmd.env("IS_SANDBOX", "1");
        }
        cmd
    }
}

/// One run with `--jobs <jobs>` in a fresh copy: its wall in seconds. Checks that every task
/// was committed on the sprint's branch with its file.
fn run(corral: &Path, place: &Place, jobs: usize) -> f64 {
    let project = place.project(&format!("jobs-{jobs}"));
    let mut cmd = place.sprint_run(corral, &project, jobs);
    cmd.stdout(Stdio::null()).stderr(Stdio::piped());
    let started = Instant::now();
    let out = cmd.output().unwrap();
    let wall = started.elapsed().as_secs_f64();
    assert!(
        out.status.success(),
        "--jobs {jobs} exited with {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let log = git(&project, &["log", "--format=%s", "corral/bench"]);
    let commits = log.lines().filter(|l| l.starts_with("Task t")).count();
    assert_eq!(
        commits, place.tasks,
        "--jobs {jobs} made {commits} commits:\n{log}"
    );
    let files = git(&project, &["ls-tree", "--name-only", "corral/bench"]);
    for n in 1..=place.tasks {
        let name = format!("{}.txt", task_id(n));
        assert!(
            files.lines().any(|f| f == name),
            "--jobs {jobs}: no {name} in\n{files}"
        );
    }
    wall
}

/// One `--jobs 4` run of `place`'s tasks, the coordinator's peak resident set sampled until it
/// exits: its `VmHWM` in MiB and the run's wall in seconds.
fn coordinator_memory(corral: &Path, place: &Place, jobs: usize) -> (f64, f64) {
    let project = place.project("memory");
    let mut cmd = place.sprint_run(corral, &project, jobs);
    let stderr = place.root.join("memory.stderr");
    cmd.stdout(Stdio::null())
        .stderr(std::fs::File::create(&stderr).unwrap());
    let started = Instant::now();
    let mut child = cmd.spawn().unwrap();
    let mut peak_kib = 0;
    let status = loop {
        if let Some(kib) = hwm_kib(child.id()) {
            peak_kib = peak_kib.max(kib);
        }
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        std::thread::sleep(SAMPLE_EVERY);
    };
    let wall = started.elapsed().as_secs_f64();
    assert!(
        status.success(),
        "the memory run exited with {status}\nstderr: {}",
        std::fs::read_to_string(&stderr).unwrap_or_default()
    );
    let log = git(&project, &["log", "--format=%s", "corral/bench"]);
    let commits = log.lines().filter(|l| l.starts_with("Task t")).count();
    assert_eq!(
        commits, place.tasks,
        "the memory run made {commits} commits"
    );
    (peak_kib as f64 / 1024.0, wall)
}

/// `rounds` alternating rounds of both sides; walls in seconds, `[serial, parallel]`.
fn rounds(corral: &Path, place: &Place, jobs: usize, rounds: usize) -> [Vec<f64>; 2] {
    let mut walls: [Vec<f64>; 2] = Default::default();
    for round in 0..rounds {
        let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        for i in order {
            let n = if i == 0 { 1 } else { jobs };
            let wall = run(corral, place, n);
            eprintln!("  --jobs {n} round {}/{rounds}: {wall:.2} s", round + 1);
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
    let serial = median(&walls[0]);
    let parallel = median(&walls[1]);
    let ratio = parallel / serial;
    let verdict = if ratio <= TARGET { "PASS" } else { "MISS" };
    format!(
        "| {TASKS} independent tasks, agent works {WORK_S} s each, stand-in Claude Code, default sandbox ({} rounds) | median wall (s) | runs (s) | ratio to `--jobs 1` | Target | Result |\n\
         |---|---|---|---|---|---|\n\
         | `corral sprint run --jobs 1` | {serial:.2} | {} | 1.00 | | |\n\
         | `corral sprint run --jobs {JOBS}` | {parallel:.2} | {} | {ratio:.2}× | ≤ {TARGET:.2}× | {verdict} |\n\n\
         Load average (1, 5, 15 min): {load_before} before, {load_after} after.\n",
        walls[0].len(),
        fmt_list(&walls[0]),
        fmt_list(&walls[1]),
    )
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let benching = args.iter().any(|a| a == "--bench");
    let quick = args.iter().any(|a| a == "--quick");
    let corral = PathBuf::from(env!("CARGO_BIN_EXE_corral"));
    if !benching {
        let place = Place::new(SMOKE_TASKS);
        let walls = rounds(&corral, &place, SMOKE_JOBS, 1);
        eprintln!(
            "sprint_jobs bench smoke ({SMOKE_TASKS} tasks): --jobs 1, --jobs {SMOKE_JOBS} {walls:?}"
        );
        let place = Place::working(SMOKE_MEMORY_TASKS, 0);
        let (peak, wall) = coordinator_memory(&corral, &place, SMOKE_JOBS);
        eprintln!(
            "sprint_jobs bench smoke ({SMOKE_MEMORY_TASKS} tasks): coordinator peak {peak:.1} MiB in {wall:.1} s"
        );
        return ExitCode::SUCCESS;
    }
    let n = if quick { 2 } else { 4 };
    let place = Place::new(TASKS);
    // Warm-up, not counted: Corral's version cache, the page cache.
    run(&corral, &place, JOBS);
    let load_before = load_average();
    eprintln!("sprint_jobs: {n} alternating rounds of --jobs 1 / --jobs {JOBS}, {TASKS} tasks");
    let walls = rounds(&corral, &place, JOBS, n);
    let mut table = report(&walls, &load_before, &load_average());
    eprintln!("sprint_jobs: the coordinator's memory over {MEMORY_TASKS} tasks, --jobs {JOBS}");
    let place = Place::working(MEMORY_TASKS, 0);
    let (peak, wall) = coordinator_memory(&corral, &place, JOBS);
    let verdict = if peak <= MEMORY_TARGET_MIB {
        "PASS"
    } else {
        "MISS"
    };
    table.push_str(&format!(
        "\n| {MEMORY_TASKS} independent tasks, agent works 0 s, `--jobs {JOBS}` | coordinator peak RSS (VmHWM, MiB) | wall (s) | Target | Result |\n\
         |---|---|---|---|---|\n\
         | `corral sprint run --jobs {JOBS}` | {peak:.1} | {wall:.1} | ≤ {MEMORY_TARGET_MIB:.0} MiB | {verdict} |\n"
    ));
    println!("{table}");
    let target =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/bench-sprint-jobs-report.md");
    let _ = std::fs::write(&target, &table);
    ExitCode::SUCCESS
}
