//! `cargo bench -p corral-cli --bench cli_path`: what the `corral` binary costs over the CLI it
//! supervises, on the path users take (issue 11, items 9 and 10). Two scenarios, each measured
//! side by side in rotating rounds in one run:
//!
//! - **start**: the real Claude Code answering one word from the fake model API on 127.0.0.1,
//!   bare (`claude -p --verbose --output-format stream-json`, as a user runs it) against
//!   `corral run --no-contract --json` around the same CLI, without a sandbox (what supervision
//!   costs: target ≤ 1.05× the bare wall) and with the default sandbox (reported; its own cost is
//!   the egress bench's subject). One home for every run, as on a user's machine: Corral's
//!   version probe is cached per binary, so only the first run starts the CLI twice. The same
//!   two, bare and without a sandbox, also run in a git repository of 50 committed files
//!   (reported: there the stray-write check takes its git snapshots before and after the CLI,
//!   and Claude Code reads the repository's status too).
//! - **flood**: 200 000 lines of about 1 KiB in Claude Code's stream-json format (one assistant
//!   text message each, between an init and a result line), printed by a stand-in for the CLI that
//!   copies a file to its stdout, read by `corral run --no-contract` with `--json` and in plain
//!   mode (the real Claude parser, the execution log, the renderer; the default sandbox) against a
//!   raw tokio reader that spawns the same stand-in, parses every line as JSON and logs it.
//!   Targets: throughput ≥ 0.8× the raw reader's, `corral`'s peak resident set (VmHWM) ≤ 16 MiB.
//!   Two shapes of the same size (issue 38): **text only** (one message id, no usage: the cheapest
//!   stream a parser can meet) and **Claude's** (as Claude Code prints: every assistant line a new
//!   message id carrying `usage`, one line in ten a `tool_use` answered by a `user` `tool_result`
//!   line), which is the path a real stream takes through the parser's per-message bookkeeping.
//!
//! Build it in release (`cargo bench` does): the figures are the product's. The table goes to
//! stdout and `target/bench-cli-path-report.md`; `docs/benchmarks.md` has the last figures. Run
//! without `--bench` (as `cargo test --benches` does, a step of `cargo xtask ci`), it makes one
//! run of each side with a short flood and checks them. `--corral PATH` measures another build of
//! the binary (another commit's) with this harness and workload.

// A benchmark is a tool, not product: a failed run stops it loudly.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{ExitCode, Stdio};
use std::time::{Duration, Instant};

use common::{fmt_list, hwm_kib, max, median, rotation};
use corral_test_support::fake_api::{FakeApi, Scenario, Step};
use corral_test_support::is_root;
use corral_test_support::raw_reader::raw_tokio_reader;
use serde_json::Value;

/// The flood measured: lines, and bytes per line without the newline.
const FLOOD_LINES: usize = 200_000;
const FLOOD_LINE_BYTES: usize = 1024;
/// The smoke run's flood.
const SMOKE_LINES: usize = 2_000;
/// Targets.
const START_TARGET: f64 = 1.05;
const THROUGHPUT_TARGET: f64 = 0.8;
const RSS_TARGET_MIB: f64 = 16.0;
/// How often `VmHWM` is read.
const SAMPLE_EVERY: Duration = Duration::from_millis(2);
/// The version the stand-in reports: the pinned one, so Corral runs it without a warning.
const CLAUDE_VERSION: &str = "2.1.197 (Claude Code)";
const SESSION: &str = "0b8f5a7e-3c1d-4e2f-9a6b-5d4c3b2a1f00";

/// A scratch home and project shared by the runs of one scenario.
struct Place {
    _dir: tempfile::TempDir,
    home: PathBuf,
    project: PathBuf,
    root: PathBuf,
}

impl Place {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_path_buf();
        let home = root.join("home");
        let project = root.join("project");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::create_dir_all(&project).unwrap();
        Place {
            _dir: dir,
            home,
            project,
            root,
        }
    }

    /// A command with only what a run needs in its environment.
    fn command(&self, program: &Path) -> std::process::Command {
        let mut cmd = corral_test_support::command(program);
        cmd.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &self.home)
            .env("ANTHROPIC_API_KEY", "sk-bench")
            .env("DISABLE_TELEMETRY", "1")
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
            .env("DISABLE_AUTOUPDATER", "1")
            .current_dir(&self.project)
            .stdin(Stdio::null());
        if is_root() {
            cmd.env("IS_SANDBOX", "1");
        }
        cmd
    }
}

/// Runs `cmd` with stdout and stderr to files; its wall time in seconds, its peak `VmHWM` in
/// MiB, and what it printed.
fn measure(mut cmd: std::process::Command, place: &Place, what: &str) -> (f64, f64, String) {
    let stdout_path = place.root.join("stdout");
    let stderr_path = place.root.join("stderr");
    cmd.stdout(std::fs::File::create(&stdout_path).unwrap())
        .stderr(std::fs::File::create(&stderr_path).unwrap());
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
    let stdout = std::fs::read_to_string(&stdout_path).unwrap_or_default();
    let stderr = std::fs::read_to_string(&stderr_path).unwrap_or_default();
    assert!(
        status.success(),
        "{what} exited with {status}\nstderr: {stderr}\nstdout tail: {}",
        &stdout[stdout.len().saturating_sub(2000)..]
    );
    (wall, peak_kib as f64 / 1024.0, stdout)
}

// ---------------------------------------------------------------------------------------------
// Start: the real Claude Code, bare and under `corral run`.

#[derive(Debug, Clone, Copy)]
enum StartSide {
    Bare,
    Native,
    Sandboxed,
    /// Bare, in a git repository: Claude Code reads its status too.
    BareInRepo,
    /// No sandbox, in a git repository: Corral's stray-write check takes its git snapshots.
    NativeInRepo,
}

impl StartSide {
    const ALL: [StartSide; 5] = [
        StartSide::Bare,
        StartSide::Native,
        StartSide::Sandboxed,
        StartSide::BareInRepo,
        StartSide::NativeInRepo,
    ];

    fn in_repo(self) -> bool {
        matches!(self, StartSide::BareInRepo | StartSide::NativeInRepo)
    }
}

/// Files in the start scenario's git repository.
const REPO_FILES: usize = 50;

/// A git repository of [`REPO_FILES`] committed files under `place`, for the in-repository sides.
fn start_repo(place: &Place) -> PathBuf {
    let repo = place.root.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    for i in 0..REPO_FILES {
        std::fs::write(repo.join(format!("f{i}.txt")), format!("{i}\n")).unwrap();
    }
    for args in [
        &["init", "--quiet"][..],
        &["add", "--all"],
        &[
            "-c",
            "user.name=B",
            "-c",
            "user.email=b@example.invalid",
            "commit",
            "--quiet",
            "-m",
            "start",
        ],
    ] {
        let status = corral_test_support::command(Path::new("git"))
            .current_dir(&repo)
            .args(args)
            .status()
            .unwrap();
        assert!(status.success(), "git {args:?}: {status}");
    }
    // Corral's runs stay out of the status the next run's check reads.
    std::fs::write(repo.join(".gitignore"), ".corral/\n").unwrap();
    repo
}

/// One run of `side` answering "ok": its wall time in seconds.
fn start_run(corral: &Path, claude: &Path, place: &Place, repo: &Path, side: StartSide) -> f64 {
    // A fresh API per run, started before the clock: Claude Code may ask it more than once.
    let api = FakeApi::start(Scenario::script([Step::text("ok")])).unwrap();
    let mut cmd = match side {
        StartSide::Bare | StartSide::BareInRepo => {
            let mut cmd = place.command(claude);
            cmd.args([
                "-p",
                "--verbose",
                "--output-format",
                "stream-json",
                "--permission-mode",
                "bypassPermissions",
                "say ok",
            ]);
            cmd
        }
        StartSide::Native | StartSide::Sandboxed | StartSide::NativeInRepo => {
            let mut cmd = place.command(corral);
            cmd.env("CORRAL_PROVIDERS__CLAUDE__COMMAND", claude).args([
                "run",
                "--provider",
                "claude",
                "--no-contract",
                "--json",
            ]);
            if matches!(side, StartSide::Native | StartSide::NativeInRepo) {
                cmd.args([
                    "--sandbox",
                    "native",
                    "--allow-degraded-native",
                    "--network",
                    "host",
                ]);
            }
            cmd.arg("say ok");
            cmd
        }
    };
    cmd.env("ANTHROPIC_BASE_URL", api.url());
    if side.in_repo() {
        cmd.current_dir(repo);
    }
    let (wall, _, stdout) = measure(cmd, place, &format!("{side:?}"));
    let answered = match side {
        StartSide::Bare | StartSide::BareInRepo => stdout.contains("\"type\":\"result\""),
        StartSide::Native | StartSide::Sandboxed | StartSide::NativeInRepo => stdout
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .any(|v| v["type"] == "summary" && v["outcome"] == "succeeded"),
    };
    assert!(answered, "{side:?}: no answer\n{stdout}");
    wall
}

/// `rounds` rotating rounds of the start sides; walls in seconds, indexed like `ALL`.
fn start_rounds(corral: &Path, claude: &Path, rounds: usize) -> [Vec<f64>; 5] {
    let place = Place::new();
    let repo = start_repo(&place);
    // Warm-up, not counted: Claude Code's first start in a new home, Corral's version cache.
    for side in StartSide::ALL {
        start_run(corral, claude, &place, &repo, side);
    }
    let mut walls: [Vec<f64>; 5] = Default::default();
    for round in 0..rounds {
        for i in rotation(round, StartSide::ALL.len()) {
            let side = StartSide::ALL[i];
            let wall = start_run(corral, claude, &place, &repo, side);
            eprintln!("  start {side:?} round {}/{rounds}: {wall:.3} s", round + 1);
            walls[i].push(wall);
        }
    }
    walls
}

// ---------------------------------------------------------------------------------------------
// Flood: 200 000 Claude-format lines through `corral run` and through a raw tokio reader.

/// What the flood's lines look like.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// One assistant text message per line, all under one message id, no usage.
    TextOnly,
    /// As Claude Code prints them: a new message id and `usage` on every assistant line, and one
    /// line in ten a tool call answered by its result.
    Claude,
}

impl Shape {
    const ALL: [Shape; 2] = [Shape::TextOnly, Shape::Claude];

    fn label(self) -> &'static str {
        match self {
            Shape::TextOnly => "text-only lines (one message id, no usage)",
            Shape::Claude => {
                "Claude-shaped lines (a message id and usage each, a tool call and its result in ten)"
            }
        }
    }
}

/// The flood file and the stand-in CLI that prints it.
struct Flood {
    place: Place,
    stand_in: PathBuf,
    /// Lines between the init and the result line.
    lines: usize,
    /// Of those, the assistant text lines (each carries the `xxxxxxxx` fill).
    texts: usize,
}

/// One line of `shape`'s flood, number `i`, about `FLOOD_LINE_BYTES` long.
fn flood_line(shape: Shape, i: usize) -> String {
    let text_line = |id: &str, usage: &str| {
        let head = format!(
            r#"{{"type":"assistant","message":{{"id":"{id}","type":"message","role":"assistant","model":"claude-opus-4-8","content":[{{"type":"text","text":""#
        );
        let tail = format!(
            r#""}}],"stop_reason":null{usage}}},"parent_tool_use_id":null,"session_id":"{SESSION}"}}"#
        );
        let fill = FLOOD_LINE_BYTES.saturating_sub(head.len() + tail.len() + 8);
        format!("{head}{i:08}{}{tail}", "x".repeat(fill))
    };
    let usage = r#","usage":{"input_tokens":10,"output_tokens":1,"cache_creation_input_tokens":0,"cache_read_input_tokens":0}"#;
    match shape {
        Shape::TextOnly => text_line("msg_flood", ""),
        Shape::Claude => match i % 10 {
            // A tool call, then its result: ids paired as Claude Code pairs them.
            8 => {
                let head = format!(
                    r#"{{"type":"assistant","message":{{"id":"msg_{i:016}","type":"message","role":"assistant","model":"claude-opus-4-8","content":[{{"type":"tool_use","id":"toolu_{i:016}","name":"Bash","input":{{"command":"echo "#
                );
                let tail = format!(
                    r#"","description":"a flood of tool calls"}}}}],"stop_reason":null{usage}}},"parent_tool_use_id":null,"session_id":"{SESSION}"}}"#
                );
                let fill = FLOOD_LINE_BYTES.saturating_sub(head.len() + tail.len());
                format!("{head}{}{tail}", "y".repeat(fill))
            }
            9 => {
                let head = format!(
                    r#"{{"type":"user","message":{{"role":"user","content":[{{"tool_use_id":"toolu_{:016}","type":"tool_result","content":""#,
                    i - 1
                );
                let tail = format!(
                    r#"","is_error":false}}]}},"parent_tool_use_id":null,"session_id":"{SESSION}"}}"#
                );
                let fill = FLOOD_LINE_BYTES.saturating_sub(head.len() + tail.len());
                format!("{head}{}{tail}", "z".repeat(fill))
            }
            _ => text_line(&format!("msg_{i:016}"), usage),
        },
    }
}

impl Flood {
    fn new(lines: usize, shape: Shape) -> Self {
        let place = Place::new();
        let file = place.root.join("flood.jsonl");
        let mut out = std::io::BufWriter::new(std::fs::File::create(&file).unwrap());
        writeln!(
            out,
            r#"{{"type":"system","subtype":"init","cwd":"{}","session_id":"{SESSION}","tools":["Bash","Edit","Read","Write"],"model":"claude-opus-4-8","permissionMode":"bypassPermissions"}}"#,
            place.project.display()
        )
        .unwrap();
        // Each line padded to about FLOOD_LINE_BYTES with its text.
        let mut texts = 0;
        for i in 0..lines {
            let line = flood_line(shape, i);
            texts += usize::from(line.contains("xxxxxxxx"));
            writeln!(out, "{line}").unwrap();
        }
        writeln!(
            out,
            r#"{{"type":"result","subtype":"success","is_error":false,"num_turns":1,"result":"done","stop_reason":"end_turn","session_id":"{SESSION}","total_cost_usd":0.0002,"usage":{{"input_tokens":10,"output_tokens":6}}}}"#
        )
        .unwrap();
        out.flush().unwrap();
        drop(out);
        let stand_in = place.root.join("claude");
        std::fs::write(
            &stand_in,
            format!(
                "#!/bin/sh\nif [ \"$1\" = --version ]; then echo '{CLAUDE_VERSION}'; exit 0; fi\nexec cat '{}'\n",
                file.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&stand_in, std::fs::Permissions::from_mode(0o755)).unwrap();
        Flood {
            place,
            stand_in,
            lines,
            texts,
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum FloodSide {
    Raw,
    Json,
    Plain,
}

impl FloodSide {
    const ALL: [FloodSide; 3] = [FloodSide::Raw, FloodSide::Json, FloodSide::Plain];
}

/// Before each timed flood run, untimed: the earlier runs' records and outputs removed and the
/// disk caught up (`sync`). Each `corral` run writes about 470 MB (the CLI's raw stream, the
/// execution log) and the raw reader 205 MB; left in place, the page cache's writeback of the
/// earlier rounds' data lands inside whichever run comes later, and one side's median moved by
/// 2x between two runs of the bench on an idle machine.
fn settle(flood: &Flood) {
    let _ = std::fs::remove_dir_all(flood.place.project.join(".corral/runs"));
    for file in ["raw.jsonl", "stdout", "stderr"] {
        let _ = std::fs::remove_file(flood.place.root.join(file));
    }
    let synced = corral_test_support::command(Path::new("sync"))
        .status()
        .unwrap();
    assert!(synced.success(), "sync: {synced}");
}

/// One run of `side` over the whole flood: wall in seconds and, for `corral`, its peak MiB.
fn flood_run(corral: &Path, flood: &Flood, side: FloodSide) -> (f64, Option<f64>) {
    let want = flood.lines + 2;
    settle(flood);
    match side {
        FloodSide::Raw => {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()
                .unwrap();
            let started = Instant::now();
            let n = runtime
                .block_on(raw_tokio_reader(
                    &flood.stand_in,
                    &flood.place.project,
                    &flood.place.root.join("raw.jsonl"),
                ))
                .unwrap();
            let wall = started.elapsed().as_secs_f64();
            assert_eq!(n, want, "the raw reader read {n} lines");
            (wall, None)
        }
        FloodSide::Json | FloodSide::Plain => {
            let mut cmd = flood.place.command(corral);
            cmd.env("CORRAL_PROVIDERS__CLAUDE__COMMAND", &flood.stand_in)
                .args(["run", "--provider", "claude", "--no-contract"]);
            if matches!(side, FloodSide::Json) {
                cmd.arg("--json");
            }
            cmd.arg("flood");
            let (wall, peak, stdout) = measure(cmd, &flood.place, &format!("{side:?}"));
            match side {
                FloodSide::Json => {
                    let texts = stdout.lines().filter(|l| l.contains("xxxxxxxx")).count();
                    assert_eq!(texts, flood.texts, "--json printed {texts} text events");
                }
                FloodSide::Plain | FloodSide::Raw => {
                    assert!(
                        stdout.contains("done"),
                        "plain mode lost the answer: {stdout}"
                    );
                }
            }
            (wall, Some(peak))
        }
    }
}

/// Walls (s) per side, indexed like `ALL`, and the peaks (MiB) of the two `corral` sides.
struct FloodFigures {
    walls: [Vec<f64>; 3],
    peaks: [Vec<f64>; 3],
}

fn flood_rounds(corral: &Path, lines: usize, shape: Shape, rounds: usize) -> FloodFigures {
    let flood = Flood::new(lines, shape);
    let mut figures = FloodFigures {
        walls: Default::default(),
        peaks: Default::default(),
    };
    for round in 0..rounds {
        for i in rotation(round, 3) {
            let side = FloodSide::ALL[i];
            let (wall, peak) = flood_run(corral, &flood, side);
            eprintln!(
                "  flood {shape:?} {side:?} round {}/{rounds}: {wall:.2} s{}",
                round + 1,
                peak.map(|p| format!(", peak {p:.1} MiB"))
                    .unwrap_or_default()
            );
            figures.walls[i].push(wall);
            if let Some(peak) = peak {
                figures.peaks[i].push(peak);
            }
        }
    }
    figures
}

fn verdict(pass: bool) -> &'static str {
    if pass { "PASS" } else { "MISS" }
}

fn report(start: &[Vec<f64>; 5], floods: &[(Shape, FloodFigures)], lines: usize) -> String {
    let bare = median(&start[0]);
    let native = median(&start[1]);
    let sandboxed = median(&start[2]);
    let bare_repo = median(&start[3]);
    let native_repo = median(&start[4]);
    let mut out = String::new();
    out.push_str(&format!(
        "| Start: the real Claude Code, one-word reply ({} rounds) | median wall (s) | runs (ms) | ratio to bare | Target | Result |\n\
         |---|---|---|---|---|---|\n\
         | `claude -p` bare | {bare:.3} | {} | 1.00 | | |\n\
         | `corral run --no-contract`, no sandbox | {native:.3} | {} | {:.2}× | ≤ {START_TARGET:.2}× | {} |\n\
         | `corral run --no-contract`, default sandbox | {sandboxed:.3} | {} | {:.2}× | (reported) | |\n\
         | `claude -p` bare, in a git repository of {REPO_FILES} files | {bare_repo:.3} | {} | 1.00 | | |\n\
         | `corral run --no-contract`, no sandbox, in that repository | {native_repo:.3} | {} | {:.2}× | (reported: the stray-write check's git snapshots) | |\n\n",
        start[0].len(),
        fmt_ms(&start[0]),
        fmt_ms(&start[1]),
        native / bare,
        verdict(native / bare <= START_TARGET),
        fmt_ms(&start[2]),
        sandboxed / bare,
        fmt_ms(&start[3]),
        fmt_ms(&start[4]),
        native_repo / bare_repo,
    ));
    let tables: Vec<String> = floods
        .iter()
        .map(|(shape, flood)| flood_table(*shape, flood, lines))
        .collect();
    out.push_str(&tables.join("\n"));
    out
}

fn flood_table(shape: Shape, flood: &FloodFigures, lines: usize) -> String {
    let raw = median(&flood.walls[0]);
    let json = median(&flood.walls[1]);
    let plain = median(&flood.walls[2]);
    let json_peak = max(&flood.peaks[1]);
    let plain_peak = max(&flood.peaks[2]);
    format!(
        "| Flood: {lines} × {FLOOD_LINE_BYTES} B {} ({} rounds) | median wall (s) | runs (s) | throughput vs raw | peak RSS (MiB, max) | Target | Result |\n\
         |---|---|---|---|---|---|---|\n\
         | raw tokio reader | {raw:.2} | {} | 1.00 | | | |\n\
         | `corral run --json` | {json:.2} | {} | {:.2}× | {json_peak:.1} ({}) | ≥ {THROUGHPUT_TARGET}×, ≤ {RSS_TARGET_MIB:.0} MiB | {} |\n\
         | `corral run` plain | {plain:.2} | {} | {:.2}× | {plain_peak:.1} ({}) | ≥ {THROUGHPUT_TARGET}×, ≤ {RSS_TARGET_MIB:.0} MiB | {} |\n",
        shape.label(),
        flood.walls[0].len(),
        fmt_list(&flood.walls[0]),
        fmt_list(&flood.walls[1]),
        raw / json,
        fmt_list(&flood.peaks[1]),
        verdict(raw / json >= THROUGHPUT_TARGET && json_peak <= RSS_TARGET_MIB),
        fmt_list(&flood.walls[2]),
        raw / plain,
        fmt_list(&flood.peaks[2]),
        verdict(raw / plain >= THROUGHPUT_TARGET && plain_peak <= RSS_TARGET_MIB),
    )
}

fn fmt_ms(v: &[f64]) -> String {
    v.iter()
        .map(|s| format!("{:.0}", s * 1000.0))
        .collect::<Vec<_>>()
        .join(", ")
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let benching = args.iter().any(|a| a == "--bench");
    let quick = args.iter().any(|a| a == "--quick");
    // `--corral PATH` measures another build of the binary with this same harness, so two
    // commits can be set side by side on the same workload (issue 30's before and after).
    let corral = args
        .iter()
        .position(|a| a == "--corral")
        .and_then(|i| args.get(i + 1))
        .map_or_else(
            || PathBuf::from(env!("CARGO_BIN_EXE_corral")),
            PathBuf::from,
        );
    eprintln!("corral under test: {}", corral.display());
    let claude = corral_test_support::require_cli("claude");
    if !benching {
        let start = start_rounds(&corral, &claude, 1);
        eprintln!("cli-path bench smoke: start {start:?}");
        for shape in Shape::ALL {
            let flood = flood_rounds(&corral, SMOKE_LINES, shape, 1);
            eprintln!(
                "cli-path bench smoke: flood of {SMOKE_LINES} {shape:?} {:?} peaks {:?}",
                flood.walls, flood.peaks
            );
        }
        return ExitCode::SUCCESS;
    }
    let (start_n, flood_n) = if quick { (3, 1) } else { (10, 7) };
    eprintln!("start: {start_n} rotating rounds of bare / no sandbox / default sandbox");
    let start = start_rounds(&corral, &claude, start_n);
    let floods: Vec<(Shape, FloodFigures)> = Shape::ALL
        .into_iter()
        .map(|shape| {
            eprintln!(
                "flood ({shape:?}): {flood_n} rotating rounds of {FLOOD_LINES} lines, raw / --json / plain"
            );
            (shape, flood_rounds(&corral, FLOOD_LINES, shape, flood_n))
        })
        .collect();
    let table = report(&start, &floods, FLOOD_LINES);
    println!("{table}");
    let target =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/bench-cli-path-report.md");
    let _ = std::fs::write(&target, &table);
    ExitCode::SUCCESS
}
