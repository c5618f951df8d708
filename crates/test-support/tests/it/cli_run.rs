//! Running one real CLI against the fake model API, for the `codex_cli`, `opencode_cli`, `grok_cli`
//! and `copilot_cli` modules: a scrubbed environment (`env_clear`, then `PATH`, `HOME` and exactly
//! the variables each module adds), its own process group, stdin fed then closed (or closed at once),
//! a 90 s kill cap so a bug cannot hang the suite, and stdout split into JSON lines.

// test-support is a tool, not product: it may create processes.
#![allow(clippy::disallowed_methods)]
// The helpers outside `#[test]` functions are test code too (clippy only exempts the test fns).
#![allow(clippy::expect_used, clippy::panic, clippy::unwrap_used)]

use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use corral_test_support::fake_api::FakeApi;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use serde_json::Value;

/// The longest one CLI run may take before its process group is killed.
pub const RUN_CAP: Duration = Duration::from_secs(90);

/// What one run of a CLI did.
#[derive(Debug)]
pub struct Run {
    /// The exit code; `None` when killed by a signal (the cap included).
    pub code: Option<i32>,
    /// The stdout lines that are JSON values, in order.
    pub lines: Vec<Value>,
    /// The other non-empty stdout lines.
    pub other_lines: Vec<String>,
    pub stderr: String,
    pub elapsed: Duration,
    pub timed_out: bool,
}

impl Run {
    /// The first JSON line whose `type` is `kind`.
    pub fn first(&self, kind: &str) -> &Value {
        self.lines
            .iter()
            .find(|l| l["type"] == kind)
            .unwrap_or_else(|| panic!("no {kind:?} line: {self:#?}"))
    }

    /// The last JSON line whose `type` is `kind`.
    pub fn last(&self, kind: &str) -> &Value {
        self.lines
            .iter()
            .rev()
            .find(|l| l["type"] == kind)
            .unwrap_or_else(|| panic!("no {kind:?} line: {self:#?}"))
    }

    /// The JSON lines whose `type` is `kind`.
    pub fn all(&self, kind: &str) -> Vec<&Value> {
        self.lines.iter().filter(|l| l["type"] == kind).collect()
    }

    /// Asserts exit code `code` without hitting the cap.
    pub fn assert_exit(&self, code: i32) {
        assert_eq!(
            (self.code, self.timed_out),
            (Some(code), false),
            "{self:#?}"
        );
    }
}

/// A command for `bin` with an empty environment but `PATH` and `HOME`, in `cwd`, in its own
/// process group, all three standard streams piped.
pub fn command(bin: &Path, home: &Path, cwd: &Path) -> Command {
    let mut cmd = Command::new(bin);
    cmd.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .current_dir(cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    cmd
}

/// Runs `cmd`, writing `stdin` (when given) to its standard input and closing it either way, and
/// waits for it for at most [`RUN_CAP`]; then kills what is left of its process group.
pub fn run(mut cmd: Command, stdin: Option<&str>) -> Run {
    let started = Instant::now();
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {:?}: {e}", cmd.get_program()));
    let mut input = child.stdin.take().expect("piped stdin");
    if let Some(text) = stdin {
        input.write_all(text.as_bytes()).expect("write the prompt");
    }
    drop(input);
    let mut stdout = child.stdout.take().expect("piped stdout");
    let mut stderr = child.stderr.take().expect("piped stderr");
    let out_reader = thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = stdout.read_to_end(&mut bytes);
        String::from_utf8_lossy(&bytes).into_owned()
    });
    let err_reader = thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = stderr.read_to_end(&mut bytes);
        String::from_utf8_lossy(&bytes).into_owned()
    });

    let pgid = Pid::from_raw(i32::try_from(child.id()).unwrap());
    let mut timed_out = false;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for the CLI") {
            break status;
        }
        if started.elapsed() >= RUN_CAP {
            timed_out = true;
            let _ = killpg(pgid, Signal::SIGKILL);
            break child.wait().expect("reap the CLI");
        }
        thread::sleep(Duration::from_millis(20));
    };
    let elapsed = started.elapsed();
    // The CLI may leave helpers in its group holding the pipes open: end them before reading to EOF.
    let _ = killpg(pgid, Signal::SIGKILL);
    let stdout = out_reader.join().expect("stdout reader");
    let stderr = err_reader.join().expect("stderr reader");
    let mut lines = Vec::new();
    let mut other_lines = Vec::new();
    for line in stdout.lines().filter(|l| !l.trim().is_empty()) {
        match serde_json::from_str::<Value>(line) {
            Ok(value) => lines.push(value),
            Err(_) => other_lines.push(line.to_owned()),
        }
    }
    Run {
        code: status.code(),
        lines,
        other_lines,
        stderr,
        elapsed,
        timed_out,
    }
}

/// Prints a case's wall times and the requests the fake API saw (shown with `--nocapture`).
pub fn report(case: &str, runs: &[&Run], api: &FakeApi) {
    let times: Vec<String> = runs
        .iter()
        .map(|r| format!("{:.2}s", r.elapsed.as_secs_f64()))
        .collect();
    eprintln!("{case}: wall time {}", times.join(" + "));
    for run in runs {
        eprintln!("  exit {:?} (timed out: {})", run.code, run.timed_out);
        for line in run
            .lines
            .iter()
            .map(Value::to_string)
            .chain(run.other_lines.clone())
        {
            let short: String = line.chars().take(240).collect();
            eprintln!("  stdout: {short}");
        }
        let stderr = run.stderr.trim();
        if !stderr.is_empty() {
            let short: String = stderr.chars().take(600).collect();
            eprintln!("  stderr: {short}");
        }
    }
    for request in api.requests() {
        eprintln!(
            "  +{}ms {} {} {:?} stream={} msgs={} history={} tools={} step={:?} status={:?}",
            request.at_ms,
            request.method,
            request.path,
            request.endpoint,
            request.stream,
            request.n_msgs,
            request.history,
            request.tools.len(),
            request.step,
            request.status,
        );
    }
}

/// A fresh random UUID (version 4) from the kernel's random source.
pub fn uuid_v4() -> String {
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .expect("read /dev/urandom");
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

/// A prompt naming the absolute path of `signals.json` in `cwd` (what
/// `Step::WriteToNamedPath`/`ShellWriteToNamedPath` read).
pub fn signals_prompt(cwd: &Path) -> String {
    format!(
        "Create the file {} with the run's signals.",
        cwd.join("signals.json").display()
    )
}
