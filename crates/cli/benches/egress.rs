//! `cargo bench -p corral-cli --bench egress`: what the default sandbox's allow-list proxy costs
//! the path users take, the `corral` binary running the real Claude Code against the fake model
//! API on 127.0.0.1, against the same runs with `--network host` and with no sandbox at all
//! (`--sandbox native`), side by side in one run.
//!
//! Every side is `corral run --provider claude --no-contract --json`, the first two under
//! bubblewrap, started in rotating order so that load from other processes hits all three; every figure is read from the
//! run's own `events.jsonl` (monotonic, microsecond stamps) or from the fake API's arrival times:
//!
//! - **start**: from the `spawn` record to Claude's first stdout line (its `system/init`, printed
//!   before any API call), per run; the allow-list side also reports its `egress_opened.setup_us`
//!   (spawn → the CLI released, with the proxy listening inside the sandbox).
//! - **the start, split** where the CLI is executed: `spawn` → `sandbox_checked` (the engine's
//!   part: the sandbox, its way out, the probe's report judged; the probe executes the CLI right
//!   after) and the rest (the CLI's own start), per side, so that a difference in the start shows
//!   which of the two it lies in.
//! - **streamed reply**: a reply of many SSE events (one per word), from the model request's
//!   arrival at the fake API to Claude's terminal `result` line, per run.
//!
//! Each target is judged on the median of the paired differences (allow-list − host of the runs
//! of one round), printed with the rounds' quartiles and a distribution-free 95 % confidence
//! interval of that median (order statistics of the binomial sign count); the streamed reply's
//! "nothing measurable" passes only when the whole interval lies within its bound, and says
//! "not resolved" when the interval straddles it. The streamed reply gets more rounds than the
//! start (its bound, 2 % of ~1.1 s, is smaller than one run's noise), of the two sides it
//! compares, alternated; its first rounds also run the native side. The whole sandbox's cost
//! (allow-list − native) is reported the same way. `docs/benchmarks.md` has the targets and the
//! last figures. `-- --fifo` runs every side under SCHED_FIFO (`chrt -f 20`, root or
//! `CAP_SYS_NICE`), so that a loaded machine's builds do not take the cores from the runs;
//! `-- --start-rounds N` and `-- --stream-rounds N` give the start N rounds instead of 12 and the
//! streamed reply N pairs instead of 15. Run without
//! `--bench` (as `cargo test --all-targets` does), it makes one short round and checks every side ran.

// Bench code: a failed run should stop the bench loudly.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::path::{Path, PathBuf};
use std::process::{ExitCode, Stdio};
use std::time::{Instant, SystemTime};

use common::{median, rotation};
use corral_test_support::fake_api::{FakeApi, Scenario, Step};
use corral_test_support::is_root;
use serde_json::Value;

/// Set by `--fifo`: run every side under SCHED_FIFO.
static FIFO: std::sync::OnceLock<bool> = std::sync::OnceLock::new();

/// Words of the streamed reply: one SSE event each.
const STREAM_WORDS: usize = 20_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    /// The default sandbox: bubblewrap, egress through the allow-list proxy.
    Allowlist,
    /// Bubblewrap on the host network.
    Host,
    /// No sandbox: `--sandbox native` on the host network.
    Native,
}

impl Side {
    const ALL: [Side; 3] = [Side::Allowlist, Side::Host, Side::Native];

    fn args(self) -> &'static [&'static str] {
        match self {
            Side::Allowlist => &["--network", "allowlist"],
            Side::Host => &["--network", "host"],
            Side::Native => &[
                "--sandbox",
                "native",
                "--allow-degraded-native",
                "--network",
                "host",
            ],
        }
    }

    fn index(self) -> usize {
        match self {
            Side::Allowlist => 0,
            Side::Host => 1,
            Side::Native => 2,
        }
    }
}

/// What one run left behind.
#[derive(Debug, Default, Clone, Copy)]
struct Sample {
    /// `spawn` → Claude's first stdout line, ms.
    start_ms: f64,
    /// `egress_opened.setup_us`, ms (allow-list only).
    setup_ms: Option<f64>,
    /// `egress_opened.setup_us - reported_us`: bubblewrap's report → the CLI released, ms.
    open_ms: Option<f64>,
    /// `spawn` → `sandbox_checked`, ms: the engine's part of the start under bubblewrap (the
    /// sandbox made, its way out opened, the probe's report judged; the CLI is executed right
    /// after). The rest of `start_ms` is the CLI's own start. None without a sandbox.
    exec_ms: Option<f64>,
    /// Model request arrival → the terminal `result` line, ms.
    reply_ms: f64,
    /// `corral` started → exited, ms.
    run_ms: f64,
}

fn wall_ms(t: &str) -> f64 {
    let at = humantime::parse_rfc3339(t).unwrap();
    at.duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
        * 1000.0
}

/// One `corral run` of Claude against a fresh fake API answering with `reply`.
fn run_once(corral: &Path, claude: &Path, side: Side, reply: Step) -> Sample {
    let scratch = tempfile::tempdir().unwrap();
    let home = scratch.path().join("home");
    let project = scratch.path().join("project");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&project).unwrap();
    let api = FakeApi::start(Scenario::script([reply])).unwrap();
    let api_started = SystemTime::now();
    // `--fifo`: every run under SCHED_FIFO (`chrt -f`), ahead of other processes on a shared
    // machine; both sides alike, so the pairs compare as on a quiet one.
    let mut cmd = if FIFO.get().copied().unwrap_or(false) {
        let mut c = corral_test_support::command(Path::new("chrt"));
        c.args(["-f", "20"]).arg(corral);
        c
    } else {
        corral_test_support::command(corral)
    };
    cmd.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", &home)
        .env("ANTHROPIC_API_KEY", "sk-bench")
        .env("ANTHROPIC_BASE_URL", api.url())
        .env("CORRAL_PROVIDERS__CLAUDE__COMMAND", claude)
        .current_dir(&project)
        .args(["run", "--provider", "claude", "--no-contract", "--json"])
        .args(side.args())
        .arg("say ok")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if is_root() {
        cmd.env("IS_SANDBOX", "1");
    }
    let launched = Instant::now();
    let out = cmd.output().unwrap();
    let run_ms = launched.elapsed().as_secs_f64() * 1000.0;
    let summary: Value = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["type"] == "summary")
        .unwrap_or_else(|| {
            panic!(
                "no summary ({side:?}): {}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        });
    assert_eq!(summary["outcome"], "succeeded", "{side:?}: {summary}");
    let dir = PathBuf::from(summary["runDir"].as_str().unwrap());
    let log: Vec<Value> = std::fs::read_to_string(dir.join("events.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let first = |pred: &dyn Fn(&Value) -> bool| log.iter().find(|v| pred(v)).cloned();
    let spawn = first(&|v| v["kind"] == "spawn").expect("spawn record");
    let init = first(&|v| v["kind"] == "agent").expect("a first CLI line");
    let result = first(&|v| v["kind"] == "agent" && v["event"] == "terminal_result")
        .expect("the terminal result");
    let opened = first(&|v| v["kind"] == "egress_opened");
    let checked = first(&|v| v["kind"] == "sandbox_checked");
    let setup_ms = opened
        .as_ref()
        .and_then(|v| v["setupUs"].as_f64())
        .map(|us| us / 1000.0);
    let open_ms = opened
        .as_ref()
        .and_then(|v| Some((v["setupUs"].as_f64()? - v["reportedUs"].as_f64()?) / 1000.0));
    assert_eq!(
        setup_ms.is_some(),
        side == Side::Allowlist,
        "the proxy runs on the allow-list side only"
    );
    let exec_ms =
        checked.map(|c| c["monoMs"].as_f64().unwrap() - spawn["monoMs"].as_f64().unwrap());
    assert_eq!(
        exec_ms.is_some(),
        side != Side::Native,
        "the probe checks both bubblewrap sides"
    );
    let request = api
        .model_requests()
        .first()
        .cloned()
        .expect("a model request");
    let request_wall = api_started
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
        * 1000.0
        + request.at_ms as f64;
    Sample {
        start_ms: init["monoMs"].as_f64().unwrap() - spawn["monoMs"].as_f64().unwrap(),
        setup_ms,
        open_ms,
        exec_ms,
        reply_ms: wall_ms(result["t"].as_str().unwrap()) - request_wall,
        run_ms,
    }
}

fn quantile(v: &[f64], q: f64) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    if s.is_empty() {
        return f64::NAN;
    }
    s[((s.len() - 1) as f64 * q).round() as usize]
}

/// `rounds` rounds of one run of each of `sides` answering with `reply()`: each side first,
/// middle and last in turn, the order reversed every other cycle, so that drift on a shared
/// machine hits every side alike. Indexed by [`Side::index`]; a side not in `sides` is left at
/// its default (and not read).
fn rounds(
    corral: &Path,
    claude: &Path,
    rounds: usize,
    sides: &[Side],
    reply: impl Fn() -> Step,
) -> Vec<[Sample; 3]> {
    (0..rounds)
        .map(|i| {
            let mut round = [Sample::default(); 3];
            for side in rotation(i, sides.len()).into_iter().map(|k| sides[k]) {
                let sample = run_once(corral, claude, side, reply());
                eprintln!("  {side:?}: {sample:?}");
                round[side.index()] = sample;
            }
            round
        })
        .collect()
}

/// A distribution-free confidence interval of at least 95 % for the median of `v`: the `k`-th
/// smallest and `k`-th largest values, `k` the largest rank for which a Binomial(n, 1/2) count
/// falls below it with probability at most 2.5 %. With fewer than 6 values no such interval
/// exists and the whole range is returned.
fn median_ci(v: &[f64]) -> (f64, f64) {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n == 0 {
        return (f64::NAN, f64::NAN);
    }
    // P(X <= j) for X ~ Binomial(n, 1/2), accumulated term by term.
    let mut term = 0.5f64.powi(n as i32);
    let mut below = 0.0;
    let mut k = 0;
    for j in 0..n {
        below += term;
        if below > 0.025 {
            break;
        }
        k = j + 1;
        term *= (n - j) as f64 / (j + 1) as f64;
    }
    if k == 0 {
        return (s[0], s[n - 1]);
    }
    (s[k - 1], s[n - k])
}

/// The spread column: the rounds' quartiles of `deltas` and the median's 95 % interval.
fn spread_of(deltas: &[f64]) -> String {
    let (lo, hi) = median_ci(deltas);
    format!(
        "rounds' Δ {:+.1} … {:+.1}; median's 95 % CI {lo:+.1} … {hi:+.1} (n = {})",
        quantile(deltas, 0.25),
        quantile(deltas, 0.75),
        deltas.len()
    )
}

/// The verdict on "nothing measurable": PASS when the median's whole interval lies within
/// ±`bound`, MISS when it lies wholly outside, "not resolved" when it straddles the bound.
fn within_bound(deltas: &[f64], bound: f64) -> &'static str {
    let (lo, hi) = median_ci(deltas);
    if lo >= -bound && hi <= bound {
        "PASS"
    } else if lo > bound || hi < -bound {
        "MISS"
    } else {
        "not resolved (the interval straddles the bound)"
    }
}

struct Row {
    metric: String,
    allow: f64,
    host: Option<f64>,
    delta: Option<f64>,
    spread: String,
    target: &'static str,
    result: &'static str,
}

/// The start split where the CLI is executed: what the engine does before (the sandbox, its way
/// out, the probe) and the CLI's own start after, allow-list against host for each.
fn start_split_rows(short: &[[Sample; 3]]) -> Vec<Row> {
    let row = |metric: &str, f: &dyn Fn(&Sample) -> f64| {
        let deltas: Vec<f64> = short.iter().map(|r| f(&r[0]) - f(&r[1])).collect();
        Row {
            metric: metric.into(),
            allow: median(&short.iter().map(|r| f(&r[0])).collect::<Vec<_>>()),
            host: Some(median(&short.iter().map(|r| f(&r[1])).collect::<Vec<_>>())),
            delta: Some(median(&deltas)),
            spread: spread_of(&deltas),
            target: "(reported)",
            result: "",
        }
    };
    let exec = |s: &Sample| s.exec_ms.unwrap_or(f64::NAN);
    vec![
        row(
            "  of the start: spawn → CLI executed (the engine's part), ms",
            &exec,
        ),
        row(
            "  of the start: CLI executed → its first line (Claude's own start), ms",
            &|s: &Sample| s.start_ms - exec(s),
        ),
    ]
}

/// The whole sandbox's cost: the default sandbox (allow-list) against no sandbox at all, with
/// the native side's median in the "host" column.
fn native_rows(short: &[[Sample; 3]], stream: &[[Sample; 3]]) -> Vec<Row> {
    let mut rows = Vec::new();
    let allow = |p: &[[Sample; 3]], f: fn(&Sample) -> f64| -> Vec<f64> {
        p.iter().map(|r| f(&r[0])).collect()
    };
    let over_native = |p: &[[Sample; 3]], f: fn(&Sample) -> f64| -> (f64, Vec<f64>) {
        let native: Vec<f64> = p.iter().map(|r| f(&r[2])).collect();
        (
            median(&native),
            p.iter().map(|r| f(&r[0]) - f(&r[2])).collect(),
        )
    };
    let (start_native, start_nd) = over_native(short, |s| s.start_ms);
    rows.push(Row {
        metric: "spawn → Claude's first line: allowlist − native, ms".into(),
        allow: median(&allow(short, |s| s.start_ms)),
        host: Some(start_native),
        delta: Some(median(&start_nd)),
        spread: spread_of(&start_nd),
        target: "(reported: the whole sandbox; native in the host column)",
        result: "",
    });
    let (run_native, run_nd) = over_native(short, |s| s.run_ms);
    rows.push(Row {
        metric: "whole `corral run`, one-word reply: allowlist − native, ms".into(),
        allow: median(&allow(short, |s| s.run_ms)),
        host: Some(run_native),
        delta: Some(median(&run_nd)),
        spread: spread_of(&run_nd),
        target: "(reported: native in the host column)",
        result: "",
    });
    let (reply_native, reply_nd) = over_native(stream, |s| s.reply_ms);
    rows.push(Row {
        metric: format!("request → result, {STREAM_WORDS}-event reply: allowlist − native, ms"),
        allow: median(&allow(stream, |s| s.reply_ms)),
        host: Some(reply_native),
        delta: Some(median(&reply_nd)),
        spread: spread_of(&reply_nd),
        target: "(reported: native in the host column)",
        result: "",
    });
    rows
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let benching = args.iter().any(|a| a == "--bench");
    let quick = args.iter().any(|a| a == "--quick");
    let _ = FIFO.set(args.iter().any(|a| a == "--fifo"));
    let corral = PathBuf::from(env!("CARGO_BIN_EXE_corral"));
    let claude = corral_test_support::require_cli("claude");
    if !benching {
        let p = rounds(&corral, &claude, 1, &Side::ALL, || Step::text("ok"));
        eprintln!("egress bench smoke: {p:?}");
        return ExitCode::SUCCESS;
    }
    // The streamed reply's target (2 % of ~1.1 s) is smaller than one run's noise, so it gets
    // more rounds than the start, of the two sides it compares only (alternated A B, B A, B A,
    // A B); the first few rounds also run the native side for the whole sandbox's figure.
    let (short_rounds, stream_native_rounds, stream_pair_rounds) =
        if quick { (4, 1, 3) } else { (12, 3, 15) };
    // `--start-rounds N`, `--stream-rounds N`: more rounds for a narrower interval than the
    // default run affords.
    let count = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
            .and_then(|n| n.parse::<usize>().ok())
    };
    let short_rounds = count("--start-rounds").unwrap_or(short_rounds);
    let stream_pair_rounds = count("--stream-rounds").unwrap_or(stream_pair_rounds);
    eprintln!("start: {short_rounds} rotating rounds of a one-word reply");
    let short = rounds(&corral, &claude, short_rounds, &Side::ALL, || {
        Step::text("ok")
    });
    let words: String = (0..STREAM_WORDS).map(|i| format!("w{i} ")).collect();
    let streamed = || Step::SlowChunks {
        text: words.clone(),
        delay_ms: 0,
    };
    eprintln!(
        "streamed reply: {stream_native_rounds} rotating rounds of three sides and \
         {stream_pair_rounds} of allow-list and host, {STREAM_WORDS} SSE events each"
    );
    let stream_native = rounds(&corral, &claude, stream_native_rounds, &Side::ALL, streamed);
    let mut stream = stream_native.clone();
    stream.extend(rounds(
        &corral,
        &claude,
        stream_pair_rounds,
        &[Side::Allowlist, Side::Host],
        streamed,
    ));

    let mut rows = Vec::new();
    // The allow-list side against bubblewrap on the host network (the proxy's cost).
    let diff = |p: &[[Sample; 3]], f: fn(&Sample) -> f64| -> Vec<f64> {
        p.iter().map(|r| f(&r[0]) - f(&r[1])).collect()
    };
    let side = |p: &[[Sample; 3]], f: fn(&Sample) -> f64, allow: bool| -> Vec<f64> {
        p.iter()
            .map(|r| if allow { f(&r[0]) } else { f(&r[1]) })
            .collect()
    };
    let start_d = diff(&short, |s| s.start_ms);
    let start_delta = median(&start_d);
    rows.push(Row {
        metric: "spawn → Claude's first line, ms".into(),
        allow: median(&side(&short, |s| s.start_ms, true)),
        host: Some(median(&side(&short, |s| s.start_ms, false))),
        delta: Some(start_delta),
        spread: spread_of(&start_d),
        target: "Δ ≤ 10 ms",
        result: if start_delta <= 10.0 { "PASS" } else { "MISS" },
    });
    let setups: Vec<f64> = short.iter().filter_map(|r| r[0].setup_ms).collect();
    rows.push(Row {
        metric: "spawn → CLI released (egress setup), ms".into(),
        allow: median(&setups),
        host: None,
        delta: None,
        spread: format!(
            "{:.1} … {:.1}",
            quantile(&setups, 0.0),
            quantile(&setups, 1.0)
        ),
        target: "(reported)",
        result: "",
    });
    let opens: Vec<f64> = short.iter().filter_map(|r| r[0].open_ms).collect();
    rows.push(Row {
        metric: "  of which bubblewrap's report → CLI released (the proxy opened), ms".into(),
        allow: median(&opens),
        host: None,
        delta: None,
        spread: format!(
            "{:.1} … {:.1}",
            quantile(&opens, 0.0),
            quantile(&opens, 1.0)
        ),
        target: "(reported)",
        result: "",
    });
    rows.extend(start_split_rows(&short));
    let run_d = diff(&short, |s| s.run_ms);
    rows.push(Row {
        metric: "whole `corral run`, one-word reply, ms".into(),
        allow: median(&side(&short, |s| s.run_ms, true)),
        host: Some(median(&side(&short, |s| s.run_ms, false))),
        delta: Some(median(&run_d)),
        spread: spread_of(&run_d),
        target: "(reported)",
        result: "",
    });
    let reply_d = diff(&stream, |s| s.reply_ms);
    let reply_host = median(&side(&stream, |s| s.reply_ms, false));
    let reply_delta = median(&reply_d);
    let bound = (0.02 * reply_host).max(2.0);
    rows.push(Row {
        metric: format!("request → result, {STREAM_WORDS}-event streamed reply, ms"),
        allow: median(&side(&stream, |s| s.reply_ms, true)),
        host: Some(reply_host),
        delta: Some(reply_delta),
        spread: spread_of(&reply_d),
        target: "|Δ| ≤ max(2 ms, 2 % of host), the median's 95 % CI inside",
        result: within_bound(&reply_d, bound),
    });

    rows.extend(native_rows(&short, &stream_native));
    let mut report = String::from(
        "| Metric | allowlist | host (or native) | Δ (median of rounds) | spread | Target | Result |\n|---|---|---|---|---|---|---|\n",
    );
    for r in &rows {
        report.push_str(&format!(
            "| {} | {:.1} | {} | {} | {} | {} | {} |\n",
            r.metric,
            r.allow,
            r.host.map_or("—".into(), |h| format!("{h:.1}")),
            r.delta.map_or("—".into(), |d| format!("{d:+.1}")),
            r.spread,
            r.target,
            r.result
        ));
    }
    println!("{report}");
    let target =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/bench-egress-report.md");
    let _ = std::fs::write(&target, &report);
    ExitCode::SUCCESS
}
