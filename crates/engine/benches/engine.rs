//! The engine benchmark (`cargo xtask bench`, or `cargo bench -p corral-engine --bench engine`;
//! add `-- --quick` for a short run).
//!
//! Every scenario measures the real engine ([`Engine::run`] with a small adapter for the fake
//! agent's protocol, writing `events.jsonl`) AND a raw tokio baseline in the same run: the same
//! fake agent with the same arguments, spawned with `tokio::process::Command` in its own process
//! group, stdout read with `BufReader::lines()`, each line parsed with `serde_json` and written
//! through a 64 KiB `BufWriter` to a file. The two sides alternate (ABBA order) so the noise of a
//! shared machine hits both, and the verdicts compare medians measured minutes apart at most,
//! never absolute timings. Peak memory is measured in a fresh child process of this binary per
//! sample (`VmHWM` reset through `/proc/self/clear_refs`), so one side's heap never counts
//! against the other.
//!
//! The final table is printed on stdout as markdown and written to `target/bench-report.md`.
//! `--only overhead,cancel` runs some scenarios only. Without `--bench` (which `cargo bench`
//! passes), as under `cargo test --benches` (a step of `cargo xtask ci`), it makes one short run
//! per side and stops.
//! See `docs/benchmarks.md` for what each scenario means.

// A benchmark is a tool, not product: a failed measurement stops it loudly, it spawns the raw
// baseline itself (that is the point of the comparison), and it re-executes itself to measure
// peak memory in a fresh process.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

use std::ffi::OsString;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{ExitCode, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use corral_engine::{
    AttemptEvidence, AttemptPlan, CliAdapter, CommandSpec, Diagnosis, Engine, EngineConfig,
    EnvProfile, OutputCapture, PromptDelivery, RawStreamRetention, StreamParser,
};
use corral_ports::{
    AgentEvent, AiSession, Capabilities, CostReporting, NoopObserver, Outcome, PromptChannel,
    ProviderError, ProviderId, ProviderOutput, SessionIdTiming,
};
use corral_test_support::session::session_in;
use corral_test_support::{fake_agent_path, is_alive, kill_survivors, read_pids, wait_for_lines};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::runtime::Runtime;

/// Selects a child-process measurement (`<scenario>:<side>`); unset in the parent.
const CHILD_VAR: &str = "CORRAL_BENCH_CHILD";
/// The fake agent's path, handed to child processes.
const FAKE_VAR: &str = "CORRAL_BENCH_FAKE_AGENT";
/// The prompt both sides write to the fake's stdin.
const PROMPT: &str = "do the thing";
/// The baseline's output buffer.
const BASELINE_BUF: usize = 64 * 1024;
/// How often the cancel scenario looks at the tree.
const GONE_POLL: Duration = Duration::from_micros(200);
/// When the cancel scenario gives up waiting for the tree to die.
const GONE_TIMEOUT: Duration = Duration::from_secs(5);
/// Tokio worker threads, the same on both sides and in every process.
const WORKERS: usize = 2;

// ---------------------------------------------------------------------------------------------
// The adapter: the fake agent's protocol, as in the integration tests' support module.
// ---------------------------------------------------------------------------------------------

/// Drives `corral-fake-agent <mode> <args…> --pid-file <file>`.
#[derive(Debug, Clone)]
struct FakeAdapter {
    program: PathBuf,
    mode: String,
    args: Vec<String>,
    pid_file: PathBuf,
}

impl FakeAdapter {
    /// The fake's arguments, exactly as the engine passes them (the baseline uses the same).
    fn argv(&self) -> Vec<OsString> {
        let mut args: Vec<OsString> = vec![self.mode.clone().into()];
        args.extend(self.args.iter().map(OsString::from));
        args.push("--pid-file".into());
        args.push(self.pid_file.clone().into());
        args
    }
}

impl CliAdapter for FakeAdapter {
    fn provider(&self) -> ProviderId {
        ProviderId::Claude
    }

    fn prompt_delivery(&self) -> PromptDelivery {
        PromptDelivery::Stdin
    }

    fn env_profile(&self) -> EnvProfile {
        EnvProfile::new("fake", &["FAKE_AGENT_*"])
    }

    fn command(&self, _plan: &AttemptPlan<'_>) -> Result<CommandSpec, ProviderError> {
        Ok(CommandSpec {
            program: self.program.clone(),
            args: self.argv(),
            env_set: Vec::new(),
            session_id: None,
        })
    }

    fn parser(&self) -> Box<dyn StreamParser> {
        Box::new(FakeParser)
    }

    fn diagnose(&self, _evidence: &AttemptEvidence<'_>) -> Diagnosis {
        Diagnosis::default()
    }

    fn egress(&self, _env: &corral_engine::ChildEnv<'_>) -> corral_engine::EgressNeeds {
        corral_engine::EgressNeeds {
            endpoints: Vec::new(),
            proxy: corral_engine::ProxyHonour::Environment,
        }
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            prompt: PromptChannel::Stdin,
            session_id: SessionIdTiming::FirstLine,
            resume: true,
            effort: false,
            cost: CostReporting::TokensAndUsd,
            streaming: true,
            always_terminal_event: true,
            enforced_gates: &[],
            over_grants: &[],
        }
    }
}

/// One `serde_json::from_str` per line into the fake's line type, then into an event.
struct FakeParser;

impl StreamParser for FakeParser {
    fn parse_line(&mut self, line: &str, out: &mut Vec<AgentEvent>) {
        out.push(corral_test_support::fake_protocol::to_agent_event(line));
    }
}

/// One run's scratch space: working directory, run directory, pid file.
#[derive(Debug)]
struct Scratch {
    dir: tempfile::TempDir,
}

impl Scratch {
    fn new() -> Self {
        Self::in_dir(&std::env::temp_dir())
    }

    /// In memory where the machine has `/dev/shm`: for a scenario whose agent writes many
    /// files, so that the disk's own noise (journal, discard) does not drown what is measured.
    fn in_memory() -> Self {
        let shm = Path::new("/dev/shm");
        Self::in_dir(if shm.is_dir() { shm } else { Path::new("/tmp") })
    }

    fn in_dir(parent: &Path) -> Self {
        let dir = tempfile::Builder::new()
            .prefix("corral-bench-")
            .tempdir_in(parent)
            .expect("tempdir");
        std::fs::create_dir_all(dir.path().join("work")).expect("work dir");
        std::fs::create_dir_all(dir.path().join("run")).expect("run dir");
        Scratch { dir }
    }

    fn work(&self) -> PathBuf {
        self.dir.path().join("work")
    }

    fn run_dir(&self) -> PathBuf {
        self.dir.path().join("run")
    }

    fn pid_file(&self) -> PathBuf {
        self.dir.path().join("pids")
    }

    fn adapter(&self, fake: &Path, job: &Job) -> FakeAdapter {
        FakeAdapter {
            program: fake.to_path_buf(),
            mode: job.mode.to_string(),
            args: job.args.clone(),
            pid_file: self.pid_file(),
        }
    }

    fn session(&self) -> AiSession {
        session_in(PROMPT, &self.work(), &self.run_dir())
    }
}

/// What the fake agent is asked to do.
#[derive(Debug, Clone)]
struct Job {
    mode: &'static str,
    args: Vec<String>,
    /// Stdout lines the fake prints (init and result included), when known.
    lines: Option<u64>,
}

impl Job {
    fn flood(lines: u64, line_bytes: u64) -> Self {
        Job {
            mode: "flood",
            args: vec![
                "--lines".into(),
                lines.to_string(),
                "--line-bytes".into(),
                line_bytes.to_string(),
            ],
            lines: Some(lines + 2),
        }
    }

    fn giant_line(bytes: u64) -> Self {
        Job {
            mode: "giant-line",
            args: vec!["--bytes".into(), bytes.to_string()],
            lines: Some(3),
        }
    }

    fn grandchildren(count: u32) -> Self {
        Job {
            mode: "grandchildren",
            args: vec!["--count".into(), count.to_string()],
            lines: None,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The two sides.
// ---------------------------------------------------------------------------------------------

/// The engine with its default configuration, as the product runs it, but outside the sandbox:
/// the baseline has none, bubblewrap's start-up would swamp the figures measured here, and what
/// the sandbox costs is the egress bench's (`crates/cli/benches/egress.rs`).
fn engine_config() -> EngineConfig {
    EngineConfig {
        sandbox: corral_engine::SandboxConfig {
            backend: corral_engine::BackendChoice::Native,
            allow_degraded_native: true,
            ..corral_engine::SandboxConfig::default()
        },
        ..EngineConfig::default()
    }
}

/// The engine of [`engine_config`].
fn engine() -> Engine {
    Engine::new(engine_config())
}

/// One engine run to its end; panics unless it succeeded.
async fn engine_run(engine: &Engine, fake: &Path, scratch: &Scratch, job: &Job) {
    let adapter = scratch.adapter(fake, job);
    let out = engine
        .run(&adapter, scratch.session(), Arc::new(NoopObserver))
        .await;
    check_engine_output(out, scratch, job);
}

fn check_engine_output(out: Result<ProviderOutput, ProviderError>, scratch: &Scratch, job: &Job) {
    let out = out.unwrap_or_else(|e| panic!("engine run of {} failed: {e}", job.mode));
    assert_eq!(
        out.outcome,
        Outcome::Succeeded,
        "engine run of {}",
        job.mode
    );
    // Every stdout line became at least one log line: the log cannot be shorter than that.
    let log_len = std::fs::metadata(scratch.run_dir().join(corral_ports::run_dir::EVENTS_FILE))
        .map(|m| m.len())
        .unwrap_or(0);
    assert!(
        log_len >= job.lines.unwrap_or(0) * 2,
        "events.jsonl holds only {log_len} bytes"
    );
}

/// The raw tokio baseline: spawn, write the prompt, `lines()`, parse, write, wait. Returns the
/// number of lines read.
async fn baseline_run(fake: &Path, scratch: &Scratch, job: &Job) -> u64 {
    let adapter = scratch.adapter(fake, job);
    let mut child = tokio::process::Command::new(fake)
        .args(adapter.argv())
        .current_dir(scratch.work())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .expect("spawn the baseline");
    if let Some(mut stdin) = child.stdin.take() {
        // The fake may exit without reading: a broken pipe is fine.
        let _ = stdin.write_all(PROMPT.as_bytes()).await;
    }
    let stdout = child.stdout.take().expect("stdout pipe");
    let file = std::fs::File::create(scratch.run_dir().join("out.jsonl")).expect("out file");
    let mut out = std::io::BufWriter::with_capacity(BASELINE_BUF, file);
    let mut lines = BufReader::new(stdout).lines();
    let mut n = 0u64;
    while let Some(line) = lines.next_line().await.expect("read stdout") {
        let value: serde_json::Value = serde_json::from_str(&line).expect("a JSON line");
        std::hint::black_box(&value);
        out.write_all(line.as_bytes()).expect("write");
        out.write_all(b"\n").expect("write");
        n += 1;
    }
    out.flush().expect("flush");
    let status = child.wait().await.expect("wait");
    assert!(
        status.success(),
        "baseline {} exited with {status}",
        job.mode
    );
    if let Some(want) = job.lines {
        assert_eq!(n, want, "baseline {} read {n} lines", job.mode);
    }
    n
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    Engine,
    Baseline,
}

impl Side {
    fn name(self) -> &'static str {
        match self {
            Side::Engine => "engine",
            Side::Baseline => "baseline",
        }
    }

    fn parse(s: &str) -> Option<Side> {
        match s {
            "engine" => Some(Side::Engine),
            "baseline" => Some(Side::Baseline),
            _ => None,
        }
    }

    /// The ABBA order for repetition `i`: engine first on even repetitions.
    fn order(i: usize) -> [Side; 2] {
        if i.is_multiple_of(2) {
            [Side::Engine, Side::Baseline]
        } else {
            [Side::Baseline, Side::Engine]
        }
    }
}

/// One run of `job` on `side`, timed from the call to the end of the run.
async fn timed_run(side: Side, engine: &Engine, fake: &Path, scratch: &Scratch, job: &Job) -> f64 {
    let start = Instant::now();
    match side {
        Side::Engine => engine_run(engine, fake, scratch, job).await,
        Side::Baseline => {
            baseline_run(fake, scratch, job).await;
        }
    }
    start.elapsed().as_secs_f64()
}

/// CPU seconds (user + system) spent so far by this process and the children it reaped: on a
/// shared machine the work a run costs, which its wall time only shows when a core is free.
fn cpu_secs() -> f64 {
    let secs = |who| {
        // SAFETY: `getrusage` only writes the struct it is given.
        #[allow(unsafe_code)]
        let usage = unsafe {
            let mut usage = std::mem::zeroed::<libc::rusage>();
            libc::getrusage(who, &mut usage);
            usage
        };
        let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
        tv(usage.ru_utime) + tv(usage.ru_stime)
    };
    secs(libc::RUSAGE_SELF) + secs(libc::RUSAGE_CHILDREN)
}

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(WORKERS)
        .enable_all()
        .build()
        .expect("tokio runtime")
}

// ---------------------------------------------------------------------------------------------
// Peak memory, in a fresh process per sample.
// ---------------------------------------------------------------------------------------------

/// `VmHWM` and `VmRSS` of this process, in KiB.
fn mem_kib() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    };
    (field("VmHWM:"), field("VmRSS:"))
}

/// Resets `VmHWM` to the current RSS (Linux ≥ 4.0). False when the kernel refused.
fn reset_hwm() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// What a child process reports.
#[derive(Debug, Clone, Copy)]
struct MemSample {
    wall_s: f64,
    /// RSS right before the measured run (after the runtime, scratch dirs and a warm-up run).
    rss_before_kib: u64,
    /// `VmHWM` right before the run: equal to the RSS when the reset worked.
    hwm_before_kib: u64,
    /// `VmHWM` at the end of the run.
    hwm_after_kib: u64,
    hwm_reset: bool,
}

impl MemSample {
    /// Peak growth during the run, in MiB. With a reset `VmHWM` this is exact; without one it
    /// is an upper bound (the peak may predate the run).
    fn growth_mib(&self) -> f64 {
        self.hwm_after_kib.saturating_sub(self.rss_before_kib) as f64 / 1024.0
    }

    fn peak_mib(&self) -> f64 {
        self.hwm_after_kib as f64 / 1024.0
    }
}

/// The scenarios measured in a child process.
#[derive(Debug, Clone, Copy)]
enum ChildScenario {
    /// 200 000 lines × 1 KiB.
    Stream,
    /// One 64 MiB line.
    Giant,
    /// 50 concurrent runs × 2 000 lines.
    Concurrent,
}

impl ChildScenario {
    fn name(self) -> &'static str {
        match self {
            ChildScenario::Stream => "stream",
            ChildScenario::Giant => "giant",
            ChildScenario::Concurrent => "concurrent",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        match s {
            "stream" => Some(ChildScenario::Stream),
            "giant" => Some(ChildScenario::Giant),
            "concurrent" => Some(ChildScenario::Concurrent),
            _ => None,
        }
    }
}

const STREAM_LINES: u64 = 200_000;
const STREAM_LINE_BYTES: u64 = 1024;
const GIANT_BYTES: u64 = 64 * 1024 * 1024;
const CONCURRENT_RUNS: usize = 50;
const CONCURRENT_LINES: u64 = 2_000;

/// The child side: runs one measurement and prints `RESULT <json>` on stdout.
fn child_main(spec: &str) -> ExitCode {
    let Some((scenario, side)) = spec
        .split_once(':')
        .and_then(|(a, b)| Some((ChildScenario::parse(a)?, Side::parse(b)?)))
    else {
        eprintln!("bad {CHILD_VAR}={spec}");
        return ExitCode::FAILURE;
    };
    let fake = PathBuf::from(std::env::var_os(FAKE_VAR).expect("the fake agent's path"));
    let rt = runtime();
    let engine = engine();
    let (job, runs) = match scenario {
        ChildScenario::Stream => (Job::flood(STREAM_LINES, STREAM_LINE_BYTES), 1),
        ChildScenario::Giant => (Job::giant_line(GIANT_BYTES), 1),
        ChildScenario::Concurrent => (
            Job::flood(CONCURRENT_LINES, STREAM_LINE_BYTES),
            CONCURRENT_RUNS,
        ),
    };
    let scratches: Vec<Arc<Scratch>> = (0..runs).map(|_| Arc::new(Scratch::new())).collect();
    // Warm-up: the first spawn sets up tokio's process and signal drivers, and the first run
    // faults in the code of its side. Neither is the cost being measured.
    let warm = Scratch::new();
    rt.block_on(timed_run(
        side,
        &engine,
        &fake,
        &warm,
        &Job::flood(10, STREAM_LINE_BYTES),
    ));
    drop(warm);

    let hwm_reset = reset_hwm();
    let (hwm_before_kib, rss_before_kib) = mem_kib();
    let start = Instant::now();
    rt.block_on(async {
        let tasks: Vec<_> = scratches
            .iter()
            .map(|scratch| {
                let (engine, fake, job, scratch) = (
                    engine.clone(),
                    fake.clone(),
                    job.clone(),
                    Arc::clone(scratch),
                );
                tokio::spawn(async move { timed_run(side, &engine, &fake, &scratch, &job).await })
            })
            .collect();
        for task in tasks {
            task.await.expect("a run panicked");
        }
    });
    let wall_s = start.elapsed().as_secs_f64();
    let (hwm_after_kib, _) = mem_kib();
    let report = serde_json::json!({
        "wall_s": wall_s,
        "rss_before_kib": rss_before_kib,
        "hwm_before_kib": hwm_before_kib,
        "hwm_after_kib": hwm_after_kib,
        "hwm_reset": hwm_reset,
    });
    println!("RESULT {report}");
    ExitCode::SUCCESS
}

/// Runs one child-process measurement and reads its report.
fn in_child(fake: &Path, scenario: ChildScenario, side: Side) -> MemSample {
    let exe = std::env::current_exe().expect("current exe");
    let out = std::process::Command::new(exe)
        .env(CHILD_VAR, format!("{}:{}", scenario.name(), side.name()))
        .env(FAKE_VAR, fake)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .expect("start the measuring child");
    assert!(
        out.status.success(),
        "{} {} child failed: {}",
        scenario.name(),
        side.name(),
        out.status
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let json = stdout
        .lines()
        .find_map(|l| l.strip_prefix("RESULT "))
        .expect("the child's RESULT line");
    let v: serde_json::Value = serde_json::from_str(json).expect("the child's JSON");
    let kib = |k: &str| v[k].as_u64().expect("a KiB figure");
    MemSample {
        wall_s: v["wall_s"].as_f64().expect("wall_s"),
        rss_before_kib: kib("rss_before_kib"),
        hwm_before_kib: kib("hwm_before_kib"),
        hwm_after_kib: kib("hwm_after_kib"),
        hwm_reset: v["hwm_reset"].as_bool().unwrap_or(false),
    }
}

// ---------------------------------------------------------------------------------------------
// The parent: scenarios, statistics, report.
// ---------------------------------------------------------------------------------------------

/// The scenario names `--only` accepts, in the order they run.
const SCENARIOS: [&str; 8] = [
    "throughput",
    "capture",
    "overhead",
    "concurrent",
    "stream",
    "giant",
    "cancel",
    "watch",
];

/// Files the write-heavy agent of the watch scenario creates.
const WATCH_FILES: u64 = 2_000;

#[derive(Debug, Clone)]
struct Opts {
    quick: bool,
    /// The scenarios to run (`--only a,b`); all by default.
    only: Vec<String>,
    /// Repetitions of the big scenarios per side.
    reps: usize,
    /// Runs per side for the per-run overhead.
    overhead_runs: usize,
    /// Cancellations per side.
    cancel_runs: usize,
}

impl Opts {
    fn parse() -> Result<Self, String> {
        let mut quick = false;
        let mut only: Vec<String> = SCENARIOS.iter().map(|s| s.to_string()).collect();
        let mut args = std::env::args().skip(1);
        while let Some(arg) = args.next() {
            match arg.as_str() {
                "--quick" => quick = true,
                "--only" => {
                    let list = args.next().ok_or("--only needs a list of scenarios")?;
                    only = list.split(',').map(str::to_string).collect();
                    if let Some(bad) = only.iter().find(|s| !SCENARIOS.contains(&s.as_str())) {
                        return Err(format!(
                            "unknown scenario `{bad}` (known: {})",
                            SCENARIOS.join(", ")
                        ));
                    }
                }
                // `cargo bench` passes `--bench` to every bench target.
                "--bench" => {}
                other => {
                    return Err(format!(
                        "unknown argument `{other}` (known: --quick, --only a,b)"
                    ));
                }
            }
        }
        Ok(if quick {
            Opts {
                quick,
                only,
                reps: 2,
                overhead_runs: 20,
                cancel_runs: 5,
            }
        } else {
            Opts {
                quick,
                only,
                reps: 5,
                overhead_runs: 50,
                cancel_runs: 10,
            }
        })
    }
}

fn median(samples: &[f64]) -> f64 {
    let mut v = samples.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

fn quantile(samples: &[f64], q: f64) -> f64 {
    let mut v = samples.to_vec();
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        return f64::NAN;
    }
    let i = ((v.len() - 1) as f64 * q).round() as usize;
    v[i.min(v.len() - 1)]
}

fn max(samples: &[f64]) -> f64 {
    samples.iter().copied().fold(f64::NAN, f64::max)
}

fn verdict(pass: bool) -> &'static str {
    if pass { "PASS" } else { "MISS" }
}

/// One row of the summary table.
#[derive(Debug)]
struct Row {
    scenario: String,
    metric: String,
    engine: String,
    baseline: String,
    ratio: String,
    target: String,
    result: String,
}

impl Row {
    fn new(scenario: &str, metric: &str) -> Self {
        Row {
            scenario: scenario.into(),
            metric: metric.into(),
            engine: String::new(),
            baseline: String::new(),
            ratio: String::new(),
            target: String::new(),
            result: String::new(),
        }
    }
    fn values(mut self, engine: String, baseline: String, ratio: String) -> Self {
        self.engine = engine;
        self.baseline = baseline;
        self.ratio = ratio;
        self
    }
    fn judged(mut self, target: &str, result: &str) -> Self {
        self.target = target.into();
        self.result = result.into();
        self
    }
}

/// Everything the report is made of.
#[derive(Debug, Default)]
struct Report {
    rows: Vec<Row>,
    /// Raw samples and notes, per scenario.
    details: Vec<String>,
    misses: usize,
}

impl Report {
    fn row(&mut self, row: Row) {
        if row.result == "MISS" {
            self.misses += 1;
        }
        self.rows.push(row);
    }

    fn detail(&mut self, line: String) {
        eprintln!("    {line}");
        self.details.push(line);
    }

    fn table(&self) -> String {
        let header = [
            "Scenario", "Metric", "Engine", "Baseline", "Ratio", "Target", "Result",
        ];
        let cells: Vec<[&str; 7]> = self
            .rows
            .iter()
            .map(|r| {
                [
                    r.scenario.as_str(),
                    r.metric.as_str(),
                    r.engine.as_str(),
                    r.baseline.as_str(),
                    r.ratio.as_str(),
                    r.target.as_str(),
                    r.result.as_str(),
                ]
            })
            .collect();
        let mut widths = header.map(|h| h.chars().count());
        for row in &cells {
            for (w, c) in widths.iter_mut().zip(row) {
                *w = (*w).max(c.chars().count());
            }
        }
        let line = |cols: &[&str; 7]| {
            let mut s = String::from("|");
            for (c, w) in cols.iter().zip(widths) {
                let pad = w - c.chars().count();
                let _ = write!(s, " {c}{} |", " ".repeat(pad));
            }
            s.push('\n');
            s
        };
        let mut out = line(&header);
        out.push('|');
        for w in widths {
            let _ = write!(out, "{}|", "-".repeat(w + 2));
        }
        out.push('\n');
        for row in &cells {
            out.push_str(&line(row));
        }
        out
    }
}

/// The parent's state.
struct Bench {
    opts: Opts,
    fake: PathBuf,
    rt: Runtime,
    engine: Engine,
    report: Report,
}

impl Bench {
    fn run_once(&self, side: Side, job: &Job) -> f64 {
        let scratch = Scratch::new();
        self.rt
            .block_on(timed_run(side, &self.engine, &self.fake, &scratch, job))
    }

    /// 1. Throughput, 200 000 lines × 1 KiB.
    fn throughput(&mut self) {
        let job = Job::flood(STREAM_LINES, STREAM_LINE_BYTES);
        let (mut e, mut b) = (Vec::new(), Vec::new());
        for i in 0..self.opts.reps {
            for side in Side::order(i) {
                let wall = self.run_once(side, &job);
                match side {
                    Side::Engine => e.push(wall),
                    Side::Baseline => b.push(wall),
                }
            }
            eprintln!(
                "  throughput rep {}/{}: engine {:.0} ms, baseline {:.0} ms",
                i + 1,
                self.opts.reps,
                e[i] * 1e3,
                b[i] * 1e3
            );
        }
        let (we, wb) = (median(&e), median(&b));
        let lines = STREAM_LINES as f64;
        let mb = (STREAM_LINES * STREAM_LINE_BYTES) as f64 / 1e6;
        let ratio = wb / we;
        let pass = ratio >= 0.8;
        self.report.row(
            Row::new("1. Throughput 200k × 1 KiB", "lines/s (median)")
                .values(
                    format!("{:.0}", lines / we),
                    format!("{:.0}", lines / wb),
                    format!("{ratio:.2}×"),
                )
                .judged("engine ≥ 0.80× baseline", verdict(pass)),
        );
        self.report.row(
            Row::new("", "MB/s (median)")
                .values(
                    format!("{:.0}", mb / we),
                    format!("{:.0}", mb / wb),
                    format!("{ratio:.2}×"),
                )
                .judged("", ""),
        );
        self.report.detail(format!(
            "throughput walls (s): engine {}; baseline {}",
            fmt_list(&e, 3),
            fmt_list(&b, 3)
        ));
    }

    /// 1b. The same flood through the stream files against pipes: the engine on both sides, only
    /// `capture` differs. The files are kept as they are on the judged side (what the capture
    /// itself costs); the default retention, gzip after the run, is reported beside it.
    fn capture(&mut self) {
        let job = Job::flood(STREAM_LINES, STREAM_LINE_BYTES);
        let with = |capture, raw_streams| {
            Engine::new(EngineConfig {
                capture,
                raw_streams,
                ..engine_config()
            })
        };
        let sides = [
            with(OutputCapture::Pipes, RawStreamRetention::Keep),
            with(OutputCapture::Files, RawStreamRetention::Keep),
            with(OutputCapture::Files, RawStreamRetention::Compress),
        ];
        let mut walls: [Vec<f64>; 3] = Default::default();
        let mut cpus: [Vec<f64>; 3] = Default::default();
        for i in 0..self.opts.reps {
            // Each side first, middle and last in turn, and the order reversed every other
            // repetition, so that drift on a shared machine hits all three alike.
            let mut order = [0, 1, 2];
            order.rotate_left(i % 3);
            if i % 2 == 1 {
                order.reverse();
            }
            for side in order {
                let scratch = Scratch::new();
                let cpu = cpu_secs();
                let wall = self.rt.block_on(timed_run(
                    Side::Engine,
                    &sides[side],
                    &self.fake,
                    &scratch,
                    &job,
                ));
                cpus[side].push(cpu_secs() - cpu);
                walls[side].push(wall);
            }
            eprintln!(
                "  capture rep {}/{}: pipes {:.0} ms ({:.0} ms CPU), files {:.0} ms ({:.0} ms CPU), \
                 files + gzip {:.0} ms ({:.0} ms CPU)",
                i + 1,
                self.opts.reps,
                walls[0][i] * 1e3,
                cpus[0][i] * 1e3,
                walls[1][i] * 1e3,
                cpus[1][i] * 1e3,
                walls[2][i] * 1e3,
                cpus[2][i] * 1e3
            );
        }
        let [pipes, files, gzip] = walls.each_ref().map(|w| median(w));
        let lines = STREAM_LINES as f64;
        let ratio = pipes / files;
        self.report.row(
            Row::new("1b. Flood 200k × 1 KiB: files vs pipes", "lines/s (median)")
                .values(
                    format!("{:.0}", lines / files),
                    format!("{:.0}", lines / pipes),
                    format!("{ratio:.2}×"),
                )
                .judged("files ≥ 0.95× pipes", verdict(ratio >= 0.95)),
        );
        self.report.row(
            Row::new(
                "   … files, gzip after the run (default)",
                "lines/s (median)",
            )
            .values(
                format!("{:.0}", lines / gzip),
                format!("{:.0}", lines / pipes),
                format!("{:.2}×", pipes / gzip),
            )
            .judged("(reported: the retention's cost)", ""),
        );
        let [cpu_pipes, cpu_files, cpu_gzip] = cpus.each_ref().map(|c| median(c));
        self.report.row(
            Row::new(
                "   … CPU of the run and its CLI (files, pipes)",
                "CPU ms per run (median)",
            )
            .values(
                format!("{:.0}", cpu_files * 1e3),
                format!("{:.0}", cpu_pipes * 1e3),
                format!("{:.2}×", cpu_files / cpu_pipes),
            )
            .judged("(reported: the work, whatever the load)", ""),
        );
        self.report.row(
            Row::new("   … CPU, files + gzip", "CPU ms per run (median)")
                .values(
                    format!("{:.0}", cpu_gzip * 1e3),
                    format!("{:.0}", cpu_pipes * 1e3),
                    format!("{:.2}×", cpu_gzip / cpu_pipes),
                )
                .judged("(reported)", ""),
        );
        self.report.detail(format!(
            "capture walls (s): pipes {}; files {}; files + gzip {}",
            fmt_list(&walls[0], 3),
            fmt_list(&walls[1], 3),
            fmt_list(&walls[2], 3)
        ));
        self.report.detail(format!(
            "capture CPU (s): pipes {}; files {}; files + gzip {}",
            fmt_list(&cpus[0], 3),
            fmt_list(&cpus[1], 3),
            fmt_list(&cpus[2], 3)
        ));
    }

    /// Scenario 7, what the native backend's write watch costs an agent that writes many files: the same
    /// engine runs with the watch (the default) and without it (the setting
    /// `sandbox.watch_native_writes` false), ABBA, the agent creating [`WATCH_FILES`] files in
    /// memory. Each file is one stopped call.
    fn watch(&mut self) {
        let job = Job {
            mode: "write-files",
            args: vec!["--count".into(), WATCH_FILES.to_string()],
            lines: Some(2),
        };
        let mut config = engine_config();
        config.sandbox.watch_native_writes = false;
        let unwatched = Engine::new(config);
        let runs = self.opts.overhead_runs.min(20);
        let (mut w, mut u) = (Vec::new(), Vec::new());
        for i in 0..runs {
            for side in Side::order(i) {
                let scratch = Scratch::in_memory();
                let engine = match side {
                    Side::Engine => &self.engine,
                    Side::Baseline => &unwatched,
                };
                let wall =
                    self.rt
                        .block_on(timed_run(Side::Engine, engine, &self.fake, &scratch, &job));
                match side {
                    Side::Engine => w.push(wall * 1e3),
                    Side::Baseline => u.push(wall * 1e3),
                }
            }
        }
        let (mw, mu) = (median(&w), median(&u));
        let per_call_us = (mw - mu) * 1e3 / WATCH_FILES as f64;
        self.report.row(
            Row::new(
                "7. Native write watch, 2 000 files written",
                "wall per run, ms (median; baseline: watch off)",
            )
            .values(
                format!("{mw:.1}"),
                format!("{mu:.1}"),
                format!("{:.2}× ({per_call_us:+.1} µs a call)", mw / mu),
            )
            .judged("(reported: the cost of the record)", ""),
        );
        self.report.detail(format!(
            "watch over {runs} runs each (ms): watched {}; unwatched {}",
            fmt_list(&w, 1),
            fmt_list(&u, 1)
        ));
    }

    /// 2. Per-run overhead of a 10-line run.
    fn overhead(&mut self) {
        let job = Job::flood(10, STREAM_LINE_BYTES);
        let (mut e, mut b) = (Vec::new(), Vec::new());
        for i in 0..self.opts.overhead_runs {
            for side in Side::order(i) {
                let wall = self.run_once(side, &job);
                match side {
                    Side::Engine => e.push(wall * 1e3),
                    Side::Baseline => b.push(wall * 1e3),
                }
            }
        }
        let (me, mb) = (median(&e), median(&b));
        let diff = me - mb;
        self.report.row(
            Row::new("2. Per-run overhead, 10 lines", "wall per run, ms (median)")
                .values(
                    format!("{me:.2}"),
                    format!("{mb:.2}"),
                    format!("{diff:+.2} ms"),
                )
                .judged("engine − baseline ≤ 0.50 ms", verdict(diff <= 0.5)),
        );
        // The same runs on an engine without PR_SET_PDEATHSIG, whose pre-exec hook turns the
        // spawn into a fork: what that safety net costs per start.
        let lean = Engine::new(EngineConfig {
            parent_death_signal: false,
            ..engine_config()
        });
        let mut l = Vec::new();
        for _ in 0..self.opts.overhead_runs {
            let scratch = Scratch::new();
            l.push(
                1e3 * self
                    .rt
                    .block_on(timed_run(Side::Engine, &lean, &self.fake, &scratch, &job)),
            );
        }
        let ml = median(&l);
        self.report.row(
            Row::new("   … without PDEATHSIG", "wall per run, ms (median)")
                .values(
                    format!("{ml:.2}"),
                    format!("{mb:.2}"),
                    format!("{:+.2} ms", ml - mb),
                )
                .judged("(reported: the cost of the safety net)", ""),
        );
        // The same runs through pipes: what the stream files cost per run.
        let pipes = Engine::new(EngineConfig {
            capture: OutputCapture::Pipes,
            ..engine_config()
        });
        let mut p = Vec::new();
        for _ in 0..self.opts.overhead_runs {
            let scratch = Scratch::new();
            p.push(
                1e3 * self
                    .rt
                    .block_on(timed_run(Side::Engine, &pipes, &self.fake, &scratch, &job)),
            );
        }
        let mp = median(&p);
        self.report.row(
            Row::new("   … through pipes", "wall per run, ms (median)")
                .values(
                    format!("{mp:.2}"),
                    format!("{mb:.2}"),
                    format!("{:+.2} ms", mp - mb),
                )
                .judged("(reported: the cost of the stream files)", ""),
        );
        self.report.detail(format!(
            "overhead over {} runs each (ms): engine min {:.2} / median {me:.2} / p90 {:.2}; \
             baseline min {:.2} / median {mb:.2} / p90 {:.2}",
            self.opts.overhead_runs,
            quantile(&e, 0.0),
            quantile(&e, 0.9),
            quantile(&b, 0.0),
            quantile(&b, 0.9),
        ));
    }

    /// Alternating child-process samples of one scenario.
    fn child_samples(
        &self,
        scenario: ChildScenario,
        reps: usize,
    ) -> (Vec<MemSample>, Vec<MemSample>) {
        let (mut e, mut b) = (Vec::new(), Vec::new());
        for i in 0..reps {
            for side in Side::order(i) {
                let s = in_child(&self.fake, scenario, side);
                match side {
                    Side::Engine => e.push(s),
                    Side::Baseline => b.push(s),
                }
            }
            eprintln!(
                "  {} rep {}/{reps}: engine {:.0} ms, +{:.1} MiB; baseline {:.0} ms, +{:.1} MiB",
                scenario.name(),
                i + 1,
                e[i].wall_s * 1e3,
                e[i].growth_mib(),
                b[i].wall_s * 1e3,
                b[i].growth_mib()
            );
        }
        (e, b)
    }

    fn mem_detail(&mut self, what: &str, e: &[MemSample], b: &[MemSample]) {
        let list = |s: &[MemSample]| {
            s.iter()
                .map(|m| {
                    format!(
                        "+{:.1} (peak {:.1}, rss before {:.1}, hwm before {:.1}{})",
                        m.growth_mib(),
                        m.peak_mib(),
                        m.rss_before_kib as f64 / 1024.0,
                        m.hwm_before_kib as f64 / 1024.0,
                        if m.hwm_reset { "" } else { ", HWM NOT RESET" }
                    )
                })
                .collect::<Vec<_>>()
                .join("; ")
        };
        self.report.detail(format!(
            "{what} memory (MiB): engine {}; baseline {}",
            list(e),
            list(b)
        ));
    }

    /// 3. 50 concurrent runs × 2 000 lines: wall and peak memory.
    fn concurrent(&mut self) {
        let (e, b) = self.child_samples(ChildScenario::Concurrent, self.opts.reps);
        let walls = |s: &[MemSample]| s.iter().map(|m| m.wall_s * 1e3).collect::<Vec<_>>();
        let growth = |s: &[MemSample]| s.iter().map(MemSample::growth_mib).collect::<Vec<_>>();
        let peak = |s: &[MemSample]| s.iter().map(MemSample::peak_mib).collect::<Vec<_>>();
        let (we, wb) = (median(&walls(&e)), median(&walls(&b)));
        let ratio = we / wb;
        self.report.row(
            Row::new("3. 50 concurrent × 2 000 lines", "total wall, ms (median)")
                .values(
                    format!("{we:.0}"),
                    format!("{wb:.0}"),
                    format!("{ratio:.2}×"),
                )
                .judged("engine ≤ 1.25× baseline", verdict(ratio <= 1.25)),
        );
        let (ge, gb) = (max(&growth(&e)), max(&growth(&b)));
        self.report.row(
            Row::new("", "RSS growth, MiB (max)")
                .values(
                    format!("{ge:.1}"),
                    format!("{gb:.1}"),
                    format!("{:.2}×", ge / gb),
                )
                .judged("engine growth ≤ 30 MiB", verdict(ge <= 30.0)),
        );
        self.report.row(
            Row::new("", "peak RSS (VmHWM), MiB (max)")
                .values(
                    format!("{:.1}", max(&peak(&e))),
                    format!("{:.1}", max(&peak(&b))),
                    String::new(),
                )
                .judged("(reported)", ""),
        );
        self.report.detail(format!(
            "concurrent walls (ms): engine {}; baseline {}",
            fmt_list(&walls(&e), 0),
            fmt_list(&walls(&b), 0)
        ));
        self.mem_detail("concurrent", &e, &b);
    }

    /// 4. and 5. Peak memory while streaming 200 MB, and for one 64 MiB line.
    fn memory(&mut self, scenario: ChildScenario) {
        let reps = self.opts.reps.min(3);
        let (e, b) = self.child_samples(scenario, reps);
        let growth = |s: &[MemSample]| s.iter().map(MemSample::growth_mib).collect::<Vec<_>>();
        let peak = |s: &[MemSample]| s.iter().map(MemSample::peak_mib).collect::<Vec<_>>();
        let (ge, gb) = (max(&growth(&e)), max(&growth(&b)));
        let (name, limit, target) = match scenario {
            ChildScenario::Stream => (
                "4. Stream 200 MB (200k × 1 KiB)",
                16.0,
                "engine growth ≤ 16 MiB",
            ),
            ChildScenario::Giant => (
                "5. One 64 MiB line (cap 8 MiB)",
                16.0,
                "engine growth ≤ 2 × cap = 16 MiB",
            ),
            ChildScenario::Concurrent => ("", 0.0, ""),
        };
        self.report.row(
            Row::new(name, "RSS growth, MiB (max)")
                .values(
                    format!("{ge:.1}"),
                    format!("{gb:.1}"),
                    format!("{:.2}×", ge / gb),
                )
                .judged(target, verdict(ge <= limit)),
        );
        self.report.row(
            Row::new("", "peak RSS (VmHWM), MiB (max)")
                .values(
                    format!("{:.1}", max(&peak(&e))),
                    format!("{:.1}", max(&peak(&b))),
                    String::new(),
                )
                .judged("(reported)", ""),
        );
        self.mem_detail(scenario.name(), &e, &b);
    }

    /// 6. Cancel → whole tree gone.
    fn cancel(&mut self) {
        let job = Job::grandchildren(3);
        let (mut e, mut b) = (Vec::new(), Vec::new());
        let (mut left_e, mut left_b) = (0usize, 0usize);
        for i in 0..self.opts.cancel_runs {
            for side in Side::order(i) {
                let (latency, left) = match side {
                    Side::Engine => self.cancel_engine(&job),
                    Side::Baseline => self.cancel_baseline(&job),
                };
                match side {
                    Side::Engine => {
                        e.push(latency * 1e3);
                        left_e += left;
                    }
                    Side::Baseline => {
                        b.push(latency * 1e3);
                        left_b += left;
                    }
                }
            }
        }
        let (me, mb) = (median(&e), median(&b));
        self.report.row(
            Row::new("6. Cancel → tree of 5 gone", "latency, ms (median)")
                .values(
                    format!("{me:.2}"),
                    format!("{mb:.2}"),
                    format!("{:.2}×", me / mb),
                )
                .judged("engine ≤ 10 ms", verdict(me <= 10.0)),
        );
        self.report.row(
            Row::new("", "processes left (total)")
                .values(left_e.to_string(), left_b.to_string(), String::new())
                .judged("engine 0", verdict(left_e == 0)),
        );
        self.report.detail(format!(
            "cancel latencies over {} runs each (ms): engine {}; baseline {}",
            self.opts.cancel_runs,
            fmt_list(&e, 2),
            fmt_list(&b, 2)
        ));
    }

    /// Starts the tree through the engine, cancels, and times until every pid is gone.
    fn cancel_engine(&self, job: &Job) -> (f64, usize) {
        let scratch = Scratch::new();
        let adapter = scratch.adapter(&self.fake, job);
        let session = scratch.session();
        let token = session.cancel.clone();
        let engine = self.engine.clone();
        let run = self
            .rt
            .spawn(async move { engine.run(&adapter, session, Arc::new(NoopObserver)).await });
        let pids = wait_tree(&scratch.pid_file());
        let t0 = Instant::now();
        token.cancel();
        let (latency, left) = poll_gone(&pids, t0);
        let out = self.rt.block_on(run).expect("the engine task");
        assert!(
            matches!(out, Err(ProviderError::Cancelled { .. })),
            "a cancelled run must end as cancelled: {out:?}"
        );
        kill_survivors(&pids);
        (latency, left)
    }

    /// Starts the tree raw, `killpg(SIGKILL)`, and times until every pid is gone.
    fn cancel_baseline(&self, job: &Job) -> (f64, usize) {
        let scratch = Scratch::new();
        let adapter = scratch.adapter(&self.fake, job);
        let mut child = {
            let _guard = self.rt.enter();
            tokio::process::Command::new(&self.fake)
                .args(adapter.argv())
                .current_dir(scratch.work())
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .process_group(0)
                .kill_on_drop(true)
                .spawn()
                .expect("spawn the baseline tree")
        };
        let pgid = child.id().expect("the leader's pid");
        let pids = wait_tree(&scratch.pid_file());
        let t0 = Instant::now();
        let pgid = nix::unistd::Pid::from_raw(i32::try_from(pgid).expect("pid"));
        nix::sys::signal::killpg(pgid, nix::sys::signal::Signal::SIGKILL).expect("killpg");
        let (latency, left) = poll_gone(&pids, t0);
        self.rt.block_on(child.wait()).expect("reap the leader");
        kill_survivors(&pids);
        (latency, left)
    }
}

/// One scenario of the parent: its `--only` name, its title and what runs it.
type Step = (&'static str, &'static str, fn(&mut Bench));

/// Waits until the grandchildren tree (leader, spawner, 3 sleepers) recorded its 5 pids.
fn wait_tree(pid_file: &Path) -> Vec<u32> {
    assert!(
        wait_for_lines(pid_file, 5, Duration::from_secs(10)),
        "the tree never recorded its 5 pids"
    );
    let pids = read_pids(pid_file);
    assert_eq!(pids.len(), 5, "pids: {pids:?}");
    pids
}

/// Polls every 0.2 ms until none of `pids` is alive: (seconds since `t0`, processes left).
fn poll_gone(pids: &[u32], t0: Instant) -> (f64, usize) {
    loop {
        let alive = pids.iter().filter(|&&p| is_alive(p)).count();
        let elapsed = t0.elapsed();
        if alive == 0 || elapsed >= GONE_TIMEOUT {
            return (elapsed.as_secs_f64(), alive);
        }
        std::thread::sleep(GONE_POLL);
    }
}

fn fmt_list(v: &[f64], decimals: usize) -> String {
    v.iter()
        .map(|x| format!("{x:.decimals$}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

/// `target/`: three levels up from `target/<profile>/deps/<bench>-<hash>`.
fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    exe.ancestors()
        .nth(3)
        .map_or_else(|| PathBuf::from("target"), Path::to_path_buf)
}

/// Without `--bench` (as under `cargo test --benches`, which `cargo xtask ci` runs): one short
/// run per side and per capture, each checked as the measurement checks it, to prove the
/// benchmark still works, instead of minutes of measurement in a debug build.
fn smoke() -> ExitCode {
    let fake = fake_agent_path();
    let rt = runtime();
    let job = Job::flood(10, STREAM_LINE_BYTES);
    let pipes = Engine::new(EngineConfig {
        capture: OutputCapture::Pipes,
        ..engine_config()
    });
    for (name, side, engine) in [
        ("engine, stream files", Side::Engine, engine()),
        ("engine, pipes", Side::Engine, pipes),
        ("baseline", Side::Baseline, engine()),
    ] {
        let scratch = Scratch::new();
        let wall = rt.block_on(timed_run(side, &engine, &fake, &scratch, &job));
        eprintln!("engine bench smoke: {name} ok in {:.1} ms", wall * 1e3);
    }
    let writes = Job {
        mode: "write-files",
        args: vec!["--count".into(), "20".into()],
        lines: Some(2),
    };
    let scratch = Scratch::new();
    let wall = rt.block_on(timed_run(Side::Engine, &engine(), &fake, &scratch, &writes));
    eprintln!(
        "engine bench smoke: engine, write watch ok in {:.1} ms",
        wall * 1e3
    );
    eprintln!("engine bench: measure with `cargo xtask bench` (cargo bench passes --bench)");
    ExitCode::SUCCESS
}

fn main() -> ExitCode {
    if let Some(spec) = std::env::var_os(CHILD_VAR) {
        return child_main(&spec.to_string_lossy());
    }
    if !std::env::args().any(|a| a == "--bench") {
        return smoke();
    }
    let opts = match Opts::parse() {
        Ok(opts) => opts,
        Err(e) => {
            eprintln!("engine bench: {e}");
            return ExitCode::from(2);
        }
    };
    let fake = fake_agent_path();
    let started = Instant::now();
    let date = humantime::format_rfc3339_seconds(SystemTime::now()).to_string();
    let load_before = loadavg();
    let cores = std::thread::available_parallelism().map_or(0, usize::from);
    eprintln!(
        "engine bench ({}): fake agent {}, {cores} cores, load {load_before}",
        if opts.quick { "quick" } else { "full" },
        fake.display()
    );
    let quick = opts.quick;
    let (reps, overhead_runs, cancel_runs) = (opts.reps, opts.overhead_runs, opts.cancel_runs);
    let mut bench = Bench {
        opts,
        fake,
        rt: runtime(),
        engine: engine(),
        report: Report::default(),
    };
    // Warm-up, untimed: page cache, the fake's binary, tokio's process driver.
    for side in [Side::Engine, Side::Baseline] {
        bench.run_once(side, &Job::flood(1_000, STREAM_LINE_BYTES));
    }

    let wanted = |name: &str| bench.opts.only.iter().any(|s| s == name);
    let steps: [Step; 8] = [
        (
            "throughput",
            "throughput, 200 000 lines × 1 KiB",
            Bench::throughput,
        ),
        (
            "capture",
            "the same flood through stream files and through pipes",
            Bench::capture,
        ),
        ("overhead", "per-run overhead, 10 lines", Bench::overhead),
        (
            "concurrent",
            "50 concurrent runs × 2 000 lines (fresh process per sample)",
            Bench::concurrent,
        ),
        (
            "stream",
            "peak RSS streaming 200 MB (fresh process per sample)",
            |b| b.memory(ChildScenario::Stream),
        ),
        (
            "giant",
            "peak RSS for one 64 MiB line (fresh process per sample)",
            |b| b.memory(ChildScenario::Giant),
        ),
        ("cancel", "cancel → whole tree gone", Bench::cancel),
        (
            "watch",
            "a write-heavy agent with and without the native write watch",
            Bench::watch,
        ),
    ];
    let selected: Vec<_> = steps.iter().filter(|(name, ..)| wanted(name)).collect();
    for (i, (_, title, step)) in selected.iter().enumerate() {
        eprintln!("[{}/{}] {title}", i + 1, selected.len());
        step(&mut bench);
    }

    let elapsed = started.elapsed().as_secs_f64();
    let load_after = loadavg();
    let table = bench.report.table();
    let mut md = String::new();
    let _ = writeln!(md, "# Corral engine benchmark\n");
    let _ = writeln!(
        md,
        "- date: {date}\n- mode: {}{} ({} reps of the big scenarios, {} runs for the \
         overhead, {} cancellations; memory: max over {} fresh processes per side)\n- machine: \
         {cores} cores, load average {load_before} before, {load_after} after\n- fake agent: \
         {}\n- elapsed: {elapsed:.0} s\n",
        if quick { "quick" } else { "full" },
        if bench.opts.only.len() < SCENARIOS.len() {
            format!(", only {}", bench.opts.only.join(","))
        } else {
            String::new()
        },
        reps,
        overhead_runs,
        cancel_runs,
        reps.min(3),
        bench.fake.display(),
    );
    md.push_str(&table);
    let _ = writeln!(
        md,
        "\nMemory targets are judged on growth: VmHWM at the end of the run minus VmRSS right \
         before it (VmHWM reset first), in a fresh process per sample.\n\n## Samples\n"
    );
    for d in &bench.report.details {
        let _ = writeln!(md, "- {d}");
    }
    let _ = writeln!(
        md,
        "\n{} target(s) missed.",
        if bench.report.misses == 0 {
            "No".to_string()
        } else {
            bench.report.misses.to_string()
        }
    );

    println!();
    print!("{md}");
    let path = target_dir().join("bench-report.md");
    match std::fs::write(&path, &md) {
        Ok(()) => eprintln!("\nreport written to {}", path.display()),
        Err(e) => eprintln!("\ncould not write {}: {e}", path.display()),
    }
    ExitCode::SUCCESS
}
