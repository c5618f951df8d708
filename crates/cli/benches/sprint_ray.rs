//! `cargo bench -p corral-cli --bench sprint_ray`: what running each task as a Ray job costs
//! over running it in a local worktree (issue 13, "Ray").
//!
//! Both sides run the same sprint as `sprint_jobs`: eight independent tasks, one round each,
//! evaluator off, through a stand-in for Claude Code that works for 2 s (a `sleep`), writes
//! `<task>.txt` and `signals.json` and prints a stream-json init and result line. The local
//! side is `corral sprint run --jobs 4`; the Ray side is `corral sprint run --jobs 4 --executor
//! ray` against a real two-node Ray cluster on 127.0.0.1 (the test-support harness, started
//! once before the rounds and not timed), each task one job whose entrypoint is `corral sprint
//! work`, cloning from and pushing to a `file://` bare remote.
//!
//! Each run in a fresh copy of the same repository (and, on the Ray side, a fresh remote and
//! work root); the sides alternate round by round (ABBA). Target (issue 38): the Ray side's
//! median wall ≤ 1.15× Ray alone's (the same tasks as bare jobs, measured in the same rounds). Each run also reports the CPU seconds the whole machine spent during
//! it (`/proc/stat`): on a small machine the Ray side is CPU-bound. The table goes to stdout and `target/bench-sprint-ray-report.md`;
//! `docs/benchmarks.md` has the last figures. Without Ray installed (`.cache/venv`) it says so
//! and exits 0. Run without `--bench` (as `cargo test --benches` does), it makes one small run
//! of each side (two tasks) and checks both made their commits. With `RAY_PROFILE_DIR=DIR` it
//! keeps each Ray run's coordinator output (with the executor's own account, timed:
//! `RUST_LOG=corral_executor_ray=debug`), the sprint's record, the jobs' logs and Ray's job
//! list (`GET /api/jobs/`: each job's submission and end times) under `DIR/run-N`, for the
//! split of where a job's time goes.

// A benchmark is a tool, not product: a failed run stops it loudly, and it runs git itself.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

mod common;

use std::fmt::Write as _;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{ExitCode, Stdio};
use std::time::Instant;

use common::parallel::{WORK_S, sprint_file, stand_in_script};
use common::{fmt_list, median};
use common::{git, task_id};
use corral_test_support::is_root;
use corral_test_support::ray_cluster::{RayCluster, ray_venv};

/// Tasks per run, measured and in the smoke run.
const TASKS: usize = 8;
const SMOKE_TASKS: usize = 2;
/// `--jobs` of both sides.
const JOBS: usize = 4;
/// Target: the Ray side's wall over Ray alone's (issue 38): what Corral adds to Ray's own
/// floor for the same tasks, measured in the same rounds. (The local side stays beside it: on a
/// two-core machine Ray alone is already 1.4–1.7× the local side, so the old target of 1.5×
/// the local side judged Ray, not Corral.)
const TARGET: f64 = 1.15;
/// CPUs each job's entrypoint reserves: the harness's cluster has three (two on the head, one
/// on the second node), and Ray places a job on one node, so at 0.25 eight jobs fit on the
/// head alone (the four whose rounds run and the four the executor starts ahead of a free
/// slot), twelve in all; at 0.375 only seven fit (five and two), and the eighth waited for a
/// job to end.
const ENTRYPOINT_CPUS: &str = "0.25";

/// The two sides, and Ray's floor under the second.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Side {
    Local,
    Ray,
    /// Ray by itself: the sprint's eight 2-s tasks as bare jobs, no Corral ([`ray_alone`]).
    RayAlone,
}

impl Side {
    const ALL: [Side; 3] = [Side::Local, Side::Ray, Side::RayAlone];

    fn name(self) -> &'static str {
        match self {
            Side::Local => "--jobs 4",
            Side::Ray => "--jobs 4 --executor ray",
            Side::RayAlone => "Ray alone",
        }
    }

    fn index(self) -> usize {
        match self {
            Side::Local => 0,
            Side::Ray => 1,
            Side::RayAlone => 2,
        }
    }
}

/// A scratch home, the stand-in, and a template repository that each run copies.
struct Place {
    _dir: tempfile::TempDir,
    root: PathBuf,
    home: PathBuf,
    stand_in: PathBuf,
    template: PathBuf,
    tasks: usize,
    runs: std::cell::Cell<usize>,
}

impl Place {
    fn new(tasks: usize) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let home = root.join("home");
        std::fs::create_dir_all(&home).unwrap();
        let stand_in = root.join("claude");
        std::fs::write(&stand_in, stand_in_script()).unwrap();
        std::fs::set_permissions(&stand_in, std::fs::Permissions::from_mode(0o755)).unwrap();
        let template = root.join("template");
        std::fs::create_dir_all(&template).unwrap();
        std::fs::write(template.join("README"), "bench\n").unwrap();
        std::fs::write(template.join(".gitignore"), ".corral/\n").unwrap();
        std::fs::write(template.join("corral-sprint.toml"), sprint_file(tasks)).unwrap();
        for args in [
            &["init", "--quiet", "--initial-branch=main"][..],
            &["config", "user.name", "Bench"],
            &["config", "user.email", "bench@example.invalid"],
            &["add", "--all"],
            &["commit", "--quiet", "-m", "start"],
        ] {
            git(&template, args);
        }
        Place {
            _dir: dir,
            root,
            home,
            stand_in,
            template,
            tasks,
            runs: std::cell::Cell::new(0),
        }
    }

    /// What a worker node's image provides: a home, the stand-in's key, a git identity.
    fn node_env(&self) -> Vec<(String, String)> {
        let mut env = vec![
            ("HOME".to_owned(), self.home.display().to_string()),
            ("ANTHROPIC_API_KEY".to_owned(), "sk-bench".to_owned()),
        ];
        for (k, v) in [
            ("GIT_AUTHOR_NAME", "Bench"),
            ("GIT_AUTHOR_EMAIL", "bench@example.invalid"),
            ("GIT_COMMITTER_NAME", "Bench"),
            ("GIT_COMMITTER_EMAIL", "bench@example.invalid"),
        ] {
            env.push((k.to_owned(), v.to_owned()));
        }
        if is_root() {
            env.push(("IS_SANDBOX".to_owned(), "1".to_owned()));
        }
        env
    }

    /// A fresh copy of the template repository, a fresh temp dir (the Ray side's work root)
    /// and, for the Ray side, a fresh bare remote holding `main`: `(project, tmp, remote URL)`.
    fn project(&self, side: Side) -> (PathBuf, PathBuf, Option<String>) {
        let n = self.runs.get() + 1;
        self.runs.set(n);
        let project = self.root.join(format!("run-{n}"));
        let status = corral_test_support::command(Path::new("cp"))
            .arg("-a")
            .arg(&self.template)
            .arg(&project)
            .status()
            .unwrap();
        assert!(status.success());
        let tmp = self.root.join(format!("run-{n}-tmp"));
        std::fs::create_dir_all(&tmp).unwrap();
        let remote = (side == Side::Ray).then(|| {
            let remote = self.root.join(format!("run-{n}-remote.git"));
            git(
                &self.root,
                &["init", "--quiet", "--bare", &remote.display().to_string()],
            );
            let url = format!("file://{}", remote.display());
            git(&project, &["push", "--quiet", &url, "main"]);
            url
        });
        (project, tmp, remote)
    }

    /// Removes a run's copies (the disk is shared).
    fn clean(&self, project: &Path, tmp: &Path) {
        let _ = std::fs::remove_dir_all(project);
        let _ = std::fs::remove_dir_all(tmp);
        let remote = PathBuf::from(format!("{}-remote.git", project.display()));
        let _ = std::fs::remove_dir_all(remote);
    }
}

/// One run of `side` in a fresh copy: its wall and the machine's CPU. Checks that every
/// task was committed on the sprint's branch with its file.
fn run(corral: &Path, place: &Place, cluster: &RayCluster, side: Side) -> Run {
    let (project, tmp, remote) = place.project(side);
    let mut cmd = corral_test_support::command(corral);
    cmd.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", &place.home)
        .env("TMPDIR", &tmp)
        .env("ANTHROPIC_API_KEY", "sk-bench")
        .env("CORRAL_PROVIDERS__CLAUDE__COMMAND", &place.stand_in)
        .current_dir(&project)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .args(["sprint", "run", "--jobs", &JOBS.to_string()]);
    if is_root() {
        cmd.env("IS_SANDBOX", "1");
    }
    let profile = std::env::var_os("RAY_PROFILE_DIR").filter(|_| remote.is_some());
    if profile.is_some() {
        // The executor's own account, timed: submissions, gates, slots, ends.
        cmd.env("RUST_LOG", "warn,corral_executor_ray=debug");
    }
    if let Some(remote) = &remote {
        cmd.args(["--executor", "ray"])
            .env("CORRAL_EXECUTOR__RAY__ADDRESS", cluster.address())
            .env("CORRAL_EXECUTOR__RAY__REMOTE", remote)
            .env("CORRAL_EXECUTOR__RAY__ENTRYPOINT_NUM_CPUS", ENTRYPOINT_CPUS);
    }
    let cpu_before = machine_cpu_seconds();
    let started = Instant::now();
    let out = cmd.output().unwrap();
    let wall = started.elapsed().as_secs_f64();
    let cpu = machine_cpu_seconds() - cpu_before;
    // Kept whether the run succeeded or not: a failed run's record says why.
    if let Some(dir) = profile {
        let dir = PathBuf::from(dir).join(format!("run-{}", place.runs.get()));
        std::fs::create_dir_all(&dir).unwrap();
        let record = project.join(".corral/sprints/bench");
        let _ = corral_test_support::command(Path::new("cp"))
            .arg("-r")
            .arg(&record)
            .arg(dir.join("record"))
            .status();
        std::fs::write(dir.join("coordinator.stderr"), &out.stderr).unwrap();
        std::fs::write(dir.join("jobs.txt"), job_logs(&project)).unwrap();
        let jobs = corral_test_support::command(Path::new("curl"))
            .args(["-s", &format!("{}/api/jobs/", cluster.address())])
            .output()
            .unwrap();
        std::fs::write(dir.join("jobs.json"), &jobs.stdout).unwrap();
        std::fs::write(dir.join("wall"), format!("{wall}\n")).unwrap();
    }
    assert!(
        out.status.success(),
        "{} exited with {}\nstderr: {}\n{}",
        side.name(),
        out.status,
        String::from_utf8_lossy(&out.stderr),
        job_logs(&project)
    );
    let log = git(&project, &["log", "--format=%s", "corral/bench"]);
    let commits = log.lines().filter(|l| l.starts_with("Task t")).count();
    assert_eq!(
        commits,
        place.tasks,
        "{} made {commits} commits:\n{log}",
        side.name()
    );
    let files = git(&project, &["ls-tree", "--name-only", "corral/bench"]);
    for n in 1..=place.tasks {
        let name = format!("{}.txt", task_id(n));
        assert!(
            files.lines().any(|f| f == name),
            "{}: no {name} in\n{files}",
            side.name()
        );
    }
    place.clean(&project, &tmp);
    Run { wall, cpu }
}

/// Ray by itself, in the same run as the two sides: the same eight tasks of 2 s as bare
/// jobs through the Jobs API (a `sleep 2` entrypoint reserving the same CPUs), no Corral, no
/// git, no sandbox. As the ray executor does, four run at once and the other four are
/// submitted at the start and wait at a gate: a file that a job of the first four writes
/// when its work is over (here the jobs open the gates themselves, so nobody polls the Jobs
/// API meanwhile). The run ends when Ray says every job succeeded. Its wall is what Ray
/// itself takes for this sprint on this machine: the floor under the Ray side, whatever
/// Corral does.
fn ray_alone(place: &Place, cluster: &RayCluster) -> Run {
    let n = place.runs.get() + 1;
    place.runs.set(n);
    let marks = place.root.join(format!("run-{n}-marks"));
    std::fs::create_dir_all(&marks).unwrap();
    let mark = |name: String| marks.join(name).display().to_string();
    let cpus: f64 = ENTRYPOINT_CPUS.parse().unwrap();
    let ids: Vec<String> = (1..=place.tasks)
        .map(|k| format!("alone-{n}-{k}"))
        .collect();
    let cpu_before = machine_cpu_seconds();
    let started = Instant::now();
    for (k, id) in ids.iter().enumerate() {
        let done = mark(format!("done-{k}"));
        let entrypoint = match k.checked_sub(JOBS) {
            // Its work over, it opens the gate of the task started ahead behind it.
            None => format!(
                "sleep {WORK_S}; touch '{}' '{done}'",
                mark(format!("gate-{k}"))
            ),
            Some(behind) => format!(
                "while [ ! -e '{}' ]; do sleep 0.05; done; sleep {WORK_S}; touch '{done}'",
                mark(format!("gate-{behind}"))
            ),
        };
        assert!(cluster.submit_job(id, &entrypoint, cpus), "Ray took {id}");
    }
    let all_done = || (0..ids.len()).all(|k| marks.join(format!("done-{k}")).exists());
    while !all_done() {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    for id in &ids {
        loop {
            match cluster.job_status(id).as_deref() {
                Some("SUCCEEDED") => break,
                Some(status @ ("FAILED" | "STOPPED")) => panic!("{id} ended {status}"),
                _ => std::thread::sleep(std::time::Duration::from_millis(50)),
            }
        }
    }
    let wall = started.elapsed().as_secs_f64();
    let cpu = machine_cpu_seconds() - cpu_before;
    let _ = std::fs::remove_dir_all(&marks);
    Run { wall, cpu }
}

/// One run's figures.
#[derive(Debug, Clone, Copy)]
struct Run {
    /// Its wall, in seconds.
    wall: f64,
    /// CPU seconds the whole machine spent meanwhile (every process: the sprint, its
    /// agents and git, the cluster's), from `/proc/stat`.
    cpu: f64,
}

/// CPU seconds the machine has spent since boot, outside idle and I/O wait (`/proc/stat`
/// counts in USER_HZ, 100 a second on Linux).
fn machine_cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let busy: u64 = stat
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .skip(1)
        .enumerate()
        // user, nice, system, irq, softirq
        .filter(|(i, _)| [0, 1, 2, 5, 6].contains(i))
        .filter_map(|(_, v)| v.parse::<u64>().ok())
        .sum();
    busy as f64 / 100.0
}

/// Every task's record of a failed run: its `task.json` and its jobs' logs.
fn job_logs(project: &Path) -> String {
    let mut out = String::new();
    let tasks = project.join(".corral/sprints/bench/implement");
    for entry in std::fs::read_dir(&tasks).into_iter().flatten().flatten() {
        for file in std::fs::read_dir(entry.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            let name = file.file_name().to_string_lossy().into_owned();
            if name == "task.json" || name.starts_with("ray-job-") {
                let text = std::fs::read_to_string(file.path()).unwrap_or_default();
                let _ = writeln!(out, "--- {} ---\n{text}", file.path().display());
            }
        }
    }
    out
}

/// `rounds` rounds of the three sides, each round in another order (a rotation, reversed
/// every other round), `[local, ray, ray alone]`.
fn rounds(corral: &Path, place: &Place, cluster: &RayCluster, rounds: usize) -> [Vec<Run>; 3] {
    let mut walls: [Vec<Run>; 3] = Default::default();
    for round in 0..rounds {
        let mut order = Side::ALL;
        order.rotate_left(round % Side::ALL.len());
        if round % 2 == 1 {
            order.reverse();
        }
        for side in order {
            let one = match side {
                Side::Local | Side::Ray => run(corral, place, cluster, side),
                Side::RayAlone => ray_alone(place, cluster),
            };
            eprintln!(
                "  {} round {}/{rounds}: {:.2} s, {:.1} CPU-s",
                side.name(),
                round + 1,
                one.wall,
                one.cpu
            );
            walls[side.index()].push(one);
        }
    }
    walls
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".to_string())
}

fn report(runs: &[Vec<Run>; 3], load_before: &str, load_after: &str) -> String {
    let walls = runs
        .each_ref()
        .map(|side| side.iter().map(|r| r.wall).collect::<Vec<_>>());
    let cpus = runs
        .each_ref()
        .map(|side| side.iter().map(|r| r.cpu).collect::<Vec<_>>());
    let [local, ray, alone] = walls.each_ref().map(|w| median(w));
    let ratio = ray / local;
    let over_alone = ray / alone;
    let verdict = if over_alone <= TARGET { "PASS" } else { "MISS" };
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let [local_cpu, ray_cpu, alone_cpu] = cpus.each_ref().map(|c| median(c));
    format!(
        "| {TASKS} independent tasks, agent works {WORK_S} s each, stand-in Claude Code, default sandbox ({} rounds) | median wall (s) | runs (s) | ratio to local | ratio to Ray alone | machine CPU (s) | Target | Result |\n\
         |---|---|---|---|---|---|---|---|\n\
         | `corral sprint run --jobs {JOBS}` (local worktrees) | {local:.2} | {} | 1.00 | | {local_cpu:.1} | | |\n\
         | `corral sprint run --jobs {JOBS} --executor ray` (two-node cluster on 127.0.0.1) | {ray:.2} | {} | {ratio:.2}× | {over_alone:.2}× | {ray_cpu:.1} | ≤ {TARGET:.2}× Ray alone | {verdict} |\n\
         | Ray alone: the same {TASKS} tasks as bare `sleep {WORK_S}` jobs, {JOBS} at once, the rest started ahead (no Corral) | {alone:.2} | {} | {:.2}× | 1.00 | {alone_cpu:.1} | | |\n\n\
         Corral's part of the Ray side: {:.2} s of wall ({:.2}× Ray alone), {:.1} CPU-s.\n\n\
         Machine CPU: seconds of CPU every process on the machine spent during a run (`/proc/stat`, \
         median). On {cores} cores the Ray side's {ray_cpu:.1} CPU-s take at least {:.2} s of wall \
         however they are scheduled ({:.2}× the local side's wall).\n\n\
         Load average (1, 5, 15 min): {load_before} before, {load_after} after.\n",
        walls[0].len(),
        fmt_list(&walls[0]),
        fmt_list(&walls[1]),
        fmt_list(&walls[2]),
        alone / local,
        ray - alone,
        ray / alone,
        ray_cpu - alone_cpu,
        ray_cpu / cores as f64,
        ray_cpu / cores as f64 / local,
    )
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let benching = args.iter().any(|a| a == "--bench");
    let quick = args.iter().any(|a| a == "--quick");
    let corral = PathBuf::from(env!("CARGO_BIN_EXE_corral"));
    let Some(venv) = ray_venv() else {
        eprintln!(
            "sprint_ray: skipped, Ray is not installed in .cache/venv (`cargo xtask \
             prerequisites ci` installs the pinned ray[default])"
        );
        return ExitCode::SUCCESS;
    };
    let place = Place::new(if benching { TASKS } else { SMOKE_TASKS });
    // Not timed: a cluster stands before any sprint is sent to it.
    let cluster = RayCluster::start_with_env(&venv, &place.node_env()).unwrap();
    if !benching {
        let walls = rounds(&corral, &place, &cluster, 1);
        eprintln!("sprint_ray bench smoke ({SMOKE_TASKS} tasks): local, ray {walls:?}");
        return ExitCode::SUCCESS;
    }
    let n = if quick { 2 } else { 4 };
    // Warm-up, not counted: Corral's version cache, the page cache, Ray's first workers.
    run(&corral, &place, &cluster, Side::Ray);
    let load_before = load_average();
    eprintln!("sprint_ray: {n} alternating rounds of local / ray, {TASKS} tasks, --jobs {JOBS}");
    let walls = rounds(&corral, &place, &cluster, n);
    let table = report(&walls, &load_before, &load_average());
    println!("{table}");
    let target =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/bench-sprint-ray-report.md");
    let _ = std::fs::write(&target, &table);
    ExitCode::SUCCESS
}
