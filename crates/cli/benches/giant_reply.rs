//! `cargo bench -p corral-cli --bench giant_reply`: the peak memory of the `corral` binary while
//! the real Claude Code prints a 20 MiB reply (issue 17: under 64 MiB), with the CLI's output
//! captured as stream files (the default) and, for comparison, through pipes.
//!
//! Each run is `corral run --provider claude --no-contract --json` against a fresh fake model API
//! on 127.0.0.1 answering with 20 MiB of text; Claude Code prints it twice (its `assistant` line
//! and its `result` line, about 42 MB of stdout). The figure is `corral`'s own `VmHWM` (the
//! kernel's high-water mark of its resident set), read from `/proc/<pid>/status` every 2 ms
//! until it exits: a high-water mark only grows, so the last reading misses at most the growth
//! of the final 2 ms. `getrusage` cannot tell: the children's figure is the largest descendant,
//! which is Claude Code's Node, not `corral`. Every run must end `succeeded` with its terminal
//! event in the log, or the figure would be that of a run that never read the whole reply.
//!
//! The table goes to stdout and `target/bench-giant-reply-report.md`; `docs/benchmarks.md` has
//! the target and the last figures. Run without `--bench` (as `cargo test --benches` does, a
//! step of `cargo xtask ci`), it makes one run with a 1 MiB reply and checks it.

// Bench code: a failed run should stop the bench loudly.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::path::{Path, PathBuf};
use std::process::{ExitCode, Stdio};
use std::time::{Duration, Instant};

use common::{fmt_list, hwm_kib, max};
use corral_test_support::fake_api::{FakeApi, Scenario, Step, bulk_text};
use corral_test_support::is_root;
use serde_json::Value;

const MIB: usize = 1024 * 1024;
/// The reply measured.
const REPLY_BYTES: usize = 20 * MIB;
/// The target for `corral`'s peak resident set with the stream files.
const TARGET_MIB: f64 = 64.0;
/// How often `VmHWM` is read.
const SAMPLE_EVERY: Duration = Duration::from_millis(2);

/// One run: `corral`'s peak `VmHWM` in MiB, its wall time in seconds, and whether it ended
/// `succeeded` with its terminal event. That must hold with the stream files; through a pipe
/// Claude Code often loses the tail of such a reply, and the run is measured all the same.
fn run_once(corral: &Path, claude: &Path, capture: &str, bytes: usize) -> (f64, f64, bool) {
    let scratch = tempfile::tempdir().unwrap();
    let home = scratch.path().join("home");
    let project = scratch.path().join("project");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&project).unwrap();
    let api = FakeApi::start(Scenario::script([Step::text(bulk_text(bytes))])).unwrap();
    // The `--json` events go to a file: read after the run, they cost `corral` nothing extra.
    let stdout_path = scratch.path().join("stdout.jsonl");
    let stderr_path = scratch.path().join("stderr.txt");
    let mut cmd = corral_test_support::command(corral);
    cmd.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", &home)
        .env("ANTHROPIC_API_KEY", "sk-bench")
        .env("ANTHROPIC_BASE_URL", api.url())
        .env("CORRAL_PROVIDERS__CLAUDE__COMMAND", claude)
        .env("CORRAL_RUN__OUTPUT_CAPTURE", capture)
        .current_dir(&project)
        .args([
            "run",
            "--provider",
            "claude",
            "--no-contract",
            "--json",
            "say a lot",
        ])
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&stdout_path).unwrap())
        .stderr(std::fs::File::create(&stderr_path).unwrap());
    if is_root() {
        cmd.env("IS_SANDBOX", "1");
    }
    let started = Instant::now();
    let mut child = cmd.spawn().unwrap();
    let pid = child.id();
    let mut peak_kib = 0;
    let status = loop {
        if let Some(kib) = hwm_kib(pid) {
            peak_kib = peak_kib.max(kib);
        }
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        std::thread::sleep(SAMPLE_EVERY);
    };
    let wall = started.elapsed().as_secs_f64();
    let stderr = std::fs::read_to_string(&stderr_path).unwrap_or_default();
    let stdout = std::fs::read_to_string(&stdout_path).unwrap();
    let summary: Value = stdout
        .lines()
        .filter(|l| l.contains("\"type\":\"summary\""))
        .find_map(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| panic!("no summary ({capture}, {status}): {stderr}"));
    let dir = PathBuf::from(summary["runDir"].as_str().unwrap());
    let log = std::fs::read_to_string(dir.join("events.jsonl")).unwrap();
    let terminal = log
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .any(|v| v["kind"] == "agent" && v["event"] == "terminal_result");
    let complete = terminal && summary["outcome"] == "succeeded";
    assert!(
        complete || capture == "pipes",
        "{capture}: the run lost its end: {summary}\n{stderr}"
    );
    assert!(peak_kib > 0, "{capture}: VmHWM was never read");
    (peak_kib as f64 / 1024.0, wall, complete)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let benching = args.iter().any(|a| a == "--bench");
    let quick = args.iter().any(|a| a == "--quick");
    let corral = PathBuf::from(env!("CARGO_BIN_EXE_corral"));
    let claude = corral_test_support::require_cli("claude");
    if !benching {
        let (peak, wall, _) = run_once(&corral, &claude, "files", MIB);
        eprintln!("giant-reply bench smoke: 1 MiB reply, peak {peak:.1} MiB in {wall:.1} s");
        return ExitCode::SUCCESS;
    }
    let runs = if quick { 1 } else { 3 };
    // Alternated, so that load from other processes hits both captures.
    let (mut files, mut pipes) = (Vec::new(), Vec::new());
    let (mut files_wall, mut pipes_wall) = (Vec::new(), Vec::new());
    let mut pipes_complete = 0;
    for i in 0..runs {
        let order = if i % 2 == 0 {
            ["files", "pipes"]
        } else {
            ["pipes", "files"]
        };
        for capture in order {
            let (peak, wall, complete) = run_once(&corral, &claude, capture, REPLY_BYTES);
            eprintln!(
                "  {capture} run {}/{runs}: peak {peak:.1} MiB, {wall:.1} s, {}",
                i + 1,
                if complete { "complete" } else { "tail lost" }
            );
            if capture == "files" {
                files.push(peak);
                files_wall.push(wall);
            } else {
                pipes.push(peak);
                pipes_wall.push(wall);
                pipes_complete += usize::from(complete);
            }
        }
    }
    let files_peak = max(&files);
    let verdict = if files_peak < TARGET_MIB {
        "PASS"
    } else {
        "MISS"
    };
    let report = format!(
        "| `corral run`, Claude Code, {} MiB reply | peak RSS (VmHWM), MiB (max of {runs}) | runs (MiB) | wall (s) | Target | Result |\n\
         |---|---|---|---|---|---|\n\
         | stream files (default) | {files_peak:.1} | {} | {} | < {TARGET_MIB:.0} MiB | {verdict} |\n\
         | pipes ({pipes_complete} of {runs} runs complete) | {:.1} | {} | {} | (reported) | |\n",
        REPLY_BYTES / MIB,
        fmt_list(&files),
        fmt_list(&files_wall),
        max(&pipes),
        fmt_list(&pipes),
        fmt_list(&pipes_wall),
    );
    println!("{report}");
    let target =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/bench-giant-reply-report.md");
    let _ = std::fs::write(&target, &report);
    ExitCode::SUCCESS
}
