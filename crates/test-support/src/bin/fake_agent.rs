//! `corral-fake-agent`: a fake headless AI CLI for Corral's engine tests.
//!
//! It writes JSON lines on stdout (see `corral_test_support::fake_protocol`) and each mode injects
//! one fault the engine must survive: hangs, ignored SIGTERM, escaping grandchildren, giant lines,
//! invalid UTF-8, crashes, rate limits, stale sessions, floods. Every process it creates appends its
//! pid to the pid file first thing, so a test can check that none is left. Run `corral-fake-agent
//! usage` for the list of modes.

// test-support is a tool, not product: it may create processes.
#![allow(clippy::disallowed_methods)]

#[path = "fake_agent/cli.rs"]
mod cli;
#[path = "fake_agent/net.rs"]
mod net;
#[path = "fake_agent/tree.rs"]
mod tree;

use std::ffi::OsString;
use std::io::{self, BufWriter, Write};
use std::os::fd::AsFd;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use corral_test_support::fake_protocol::{FakeLine, HELLO, TREE_READY};
use corral_test_support::read_pids;
use nix::sys::signal::{SigSet, Signal, raise};

use crate::cli::{Mode, Opts};
use crate::tree::{
    TreePidFile, is_session_leader, sleep_forever, spawn_self, spawn_self_with, wait_until,
};

/// Exit code for a bad command line (EX_USAGE).
const EXIT_USAGE: u8 = 64;

/// The size of every chunk the big modes write.
const CHUNK: usize = 64 * 1024;

fn main() -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    if let Some(pid_file) = cli::early_pid_file(&args)
        && let Err(err) = tree::record_pid(&pid_file)
    {
        eprintln!(
            "corral-fake-agent: can't record pid in {}: {err}",
            pid_file.display()
        );
        return ExitCode::FAILURE;
    }
    let opts = match cli::parse(&args) {
        Ok(opts) => opts,
        Err(msg) => {
            eprintln!("corral-fake-agent: {msg}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    match run(&opts, &args) {
        Ok(code) => ExitCode::from(code),
        Err(err) => {
            eprintln!("corral-fake-agent ({}): {err}", opts.mode.name());
            ExitCode::FAILURE
        }
    }
}

/// A `Write` straight onto a file descriptor (no buffering of its own), so a line written in one
/// `write_all` is on the pipe at once.
struct FdWriter<F: AsFd>(F);

impl<F: AsFd> Write for FdWriter<F> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        nix::unistd::write(&self.0, buf).map_err(io::Error::from)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Stdout, one protocol line per write.
struct Out {
    fd: FdWriter<io::Stdout>,
    eol: &'static [u8],
}

impl Out {
    fn new(eol: &'static [u8]) -> Self {
        Self {
            fd: FdWriter(io::stdout()),
            eol,
        }
    }

    fn line(&mut self, line: &FakeLine) -> io::Result<()> {
        let mut buf = serde_json::to_vec(line)?;
        buf.extend_from_slice(self.eol);
        self.fd.write_all(&buf)
    }

    fn raw(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.fd.write_all(bytes)
    }
}

// The fault table: one short arm per mode, read side by side; splitting it would scatter the
// modes of a test fixture without making any of them clearer.
#[allow(clippy::too_many_lines)]
fn run(opts: &Opts, args: &[OsString]) -> io::Result<u8> {
    let invocation = if opts.mode.is_internal() {
        None
    } else {
        bump_state(opts.state_file.as_deref())?
    };
    if !opts.mode.is_internal() && !matches!(opts.mode, Mode::EchoStdin | Mode::StaleSession) {
        log_argv(opts, args, None)?;
    }
    let session = opts
        .resume
        .clone()
        .or_else(|| opts.session_id.clone())
        .unwrap_or_else(fresh_session);
    let mut out = Out::new(b"\n");

    match opts.mode {
        Mode::Ok => ok_turn(&mut out, &session, opts.sleep_ms),
        Mode::TtyProbe => {
            let stdin = io::stdin();
            let stdin_tty = nix::unistd::isatty(&stdin).unwrap_or(false);
            let stdout_tty = nix::unistd::isatty(io::stdout()).unwrap_or(false);
            let foreground = nix::unistd::tcgetpgrp(&stdin).ok() == Some(nix::unistd::getpgrp());
            println!(
                "tty-probe stdin_tty={stdin_tty} stdout_tty={stdout_tty} foreground={foreground} pointer={}",
                opts.pointer.as_deref().unwrap_or("-")
            );
            let mut line = String::new();
            io::stdin().read_line(&mut line)?;
            println!("tty-probe got={}", line.trim_end());
            Ok(0)
        }
        Mode::FsProbe => {
            out.line(&FakeLine::init(&session))?;
            if let Some(path) = &opts.read {
                let verdict = match std::fs::read(path) {
                    Ok(_) => "ok".to_string(),
                    Err(e) => format!("denied ({e})"),
                };
                out.line(&FakeLine::text(format!(
                    "read {}: {verdict}",
                    path.display()
                )))?;
            }
            if let Some(path) = &opts.write {
                let verdict = match std::fs::write(path, "written by fs-probe\n") {
                    Ok(()) => "ok".to_string(),
                    Err(e) => format!("denied ({e})"),
                };
                out.line(&FakeLine::text(format!(
                    "write {}: {verdict}",
                    path.display()
                )))?;
            }
            out.line(&FakeLine::done())?;
            Ok(0)
        }
        Mode::NetProbe => {
            out.line(&FakeLine::init(&session))?;
            for line in net::probe_all(opts) {
                out.line(&FakeLine::text(line))?;
            }
            out.line(&FakeLine::done())?;
            Ok(0)
        }
        Mode::QuietBusy => {
            // Like a CLI that prints nothing until the end, but visibly works meanwhile.
            let until = std::time::Instant::now()
                + std::time::Duration::from_millis(opts.sleep_ms.unwrap_or(3000));
            let mut x: u64 = 1;
            while std::time::Instant::now() < until {
                for i in 0..100_000u64 {
                    x = x.wrapping_mul(6364136223846793005).wrapping_add(i);
                }
            }
            std::hint::black_box(x);
            ok_turn(&mut out, &session, None)
        }
        Mode::HangAfterInit => {
            out.line(&FakeLine::init(&session))?;
            sleep_forever()
        }
        Mode::TrapTerm => {
            // Blocking (rather than SIG_IGN) needs no unsafe code and has the same effect here:
            // the signals stay pending forever and only SIGKILL ends the process.
            let mut set = SigSet::empty();
            for signal in [Signal::SIGTERM, Signal::SIGINT, Signal::SIGHUP] {
                set.add(signal);
            }
            set.thread_block().map_err(io::Error::from)?;
            out.line(&FakeLine::init(&session))?;
            sleep_forever()
        }
        Mode::Grandchildren => {
            let pids = TreePidFile::new(opts.pid_file.as_deref());
            let before = pids.len();
            out.line(&FakeLine::init(&session))?;
            let count = opts.count.unwrap_or(3);
            let _spawner = spawn_self(
                Mode::Spawner,
                &pids.path,
                &["--count".into(), count.to_string()],
            )?;
            let want = before + 1 + usize::try_from(count).unwrap_or(usize::MAX);
            wait_until("the spawner and its sleepers to record their pids", || {
                pids.len() >= want
            })?;
            pids.done();
            out.line(&FakeLine::text(TREE_READY))?;
            sleep_forever()
        }
        Mode::SetsidGrandchild | Mode::SetsidScrubbed => {
            let pids = TreePidFile::new(opts.pid_file.as_deref());
            out.line(&FakeLine::init(&session))?;
            let scrub = opts.mode == Mode::SetsidScrubbed;
            let child = spawn_self_with(Mode::SetsidSleeper, &pids.path, &[], scrub)?;
            let child_pid = child.id();
            wait_until(
                "the setsid child to record its pid and leave the group",
                || read_pids(&pids.path).contains(&child_pid) && is_session_leader(child_pid),
            )?;
            pids.done();
            out.line(&FakeLine::text(TREE_READY))?;
            sleep_forever()
        }
        Mode::Daemonize => {
            let pids = TreePidFile::new(opts.pid_file.as_deref());
            let before = pids.len();
            out.line(&FakeLine::init(&session))?;
            let mut intermediate = spawn_self(Mode::DaemonIntermediate, &pids.path, &[])?;
            let intermediate_pid = intermediate.id();
            let status = intermediate.wait()?;
            if !status.success() {
                return Err(io::Error::other(format!(
                    "the intermediate failed: {status}"
                )));
            }
            wait_until("the daemon to record its pid and call setsid()", || {
                read_pids(&pids.path)
                    .into_iter()
                    .skip(before)
                    .find(|&pid| pid != intermediate_pid)
                    .is_some_and(is_session_leader)
            })?;
            pids.done();
            out.line(&FakeLine::text(TREE_READY))?;
            sleep_forever()
        }
        Mode::GiantLine => {
            out.line(&FakeLine::init(&session))?;
            giant_line(&mut out, opts.bytes.unwrap_or(64 * 1024 * 1024))?;
            out.line(&FakeLine::done())?;
            Ok(0)
        }
        Mode::GiantResult => {
            out.line(&FakeLine::init(&session))?;
            giant_result(&mut out, opts.bytes.unwrap_or(20 * 1024 * 1024))?;
            Ok(0)
        }
        Mode::NoResult => {
            out.line(&FakeLine::init(&session))?;
            out.line(&FakeLine::text(HELLO))?;
            Ok(0)
        }
        Mode::DropsPipeTail => {
            out.line(&FakeLine::init(&session))?;
            if stdout_is_a_pipe()? {
                set_stdout_nonblocking()?;
            }
            match giant_result(&mut out, opts.bytes.unwrap_or(4 * 1024 * 1024)) {
                // What Claude Code and OpenCode do: exit with output still queued for the pipe.
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(0),
                Err(e) => Err(e),
                Ok(()) => Ok(0),
            }
        }
        Mode::InvalidUtf8 => {
            out.line(&FakeLine::init(&session))?;
            out.raw(b"{\"type\":\"text\",\"text\":\"bad \xff\xfe bytes\"}\n")?;
            out.line(&FakeLine::done())?;
            Ok(0)
        }
        Mode::Crlf => ok_turn(&mut Out::new(b"\r\n"), &session, None),
        Mode::LingerAfterResult => {
            out.line(&FakeLine::init(&session))?;
            out.line(&FakeLine::done())?;
            sleep_forever()
        }
        Mode::ExitNonzeroAfterResult => {
            out.line(&FakeLine::init(&session))?;
            out.line(&FakeLine::done())?;
            Ok(3)
        }
        Mode::ExitNonzeroWithSignals => {
            out.line(&FakeLine::init(&session))?;
            if let Some(path) = &opts.signals {
                std::fs::write(
                    path,
                    r#"{"schemaVersion":1,"signals":[{"type":"task-complete","timestamp":"2026-01-01T00:00:00Z"}]}"#,
                )?;
            }
            Ok(1)
        }
        Mode::StderrFlood => {
            out.line(&FakeLine::init(&session))?;
            stderr_flood(opts.bytes.unwrap_or(100 * 1024 * 1024))?;
            out.line(&FakeLine::done())?;
            Ok(0)
        }
        Mode::CrashMidLine => {
            out.line(&FakeLine::init(&session))?;
            out.raw(br#"{"type":"text","te"#)?;
            crash()
        }
        Mode::CloseStdout => {
            out.line(&FakeLine::init(&session))?;
            nix::unistd::close(1).map_err(io::Error::from)?;
            nix::unistd::close(2).map_err(io::Error::from)?;
            sleep_forever()
        }
        Mode::RateLimitThenOk => {
            out.line(&FakeLine::init(&session))?;
            if invocation.unwrap_or(1) <= opts.times.unwrap_or(1) {
                out.line(&FakeLine::rate_limit(opts.resets_at))?;
                return Ok(1);
            }
            out.line(&FakeLine::text(HELLO))?;
            out.line(&FakeLine::done())?;
            Ok(0)
        }
        Mode::RetryWaitThenRateLimit => {
            out.line(&FakeLine::init(&session))?;
            let delay_ms = opts.sleep_ms.unwrap_or(0);
            out.line(&FakeLine::Retry {
                attempt: 1,
                status: 429,
                delay_ms,
            })?;
            // The CLI's own wait: not a byte of output until it ends.
            pause(Some(delay_ms));
            if invocation.unwrap_or(1) <= opts.times.unwrap_or(1) {
                out.line(&FakeLine::rate_limit(None))?;
                return Ok(1);
            }
            out.line(&FakeLine::text(HELLO))?;
            out.line(&FakeLine::done())?;
            Ok(0)
        }
        Mode::RateLimitThenSilence => {
            out.line(&FakeLine::init(&session))?;
            if invocation.unwrap_or(1) <= opts.times.unwrap_or(1) {
                // What a CLI that waits for the reset in silence prints: the event, then nothing.
                out.line(&FakeLine::rate_limit(opts.resets_at))?;
                pause(opts.sleep_ms);
                return Ok(1);
            }
            out.line(&FakeLine::text(HELLO))?;
            out.line(&FakeLine::done())?;
            Ok(0)
        }
        Mode::RateLimitForever => {
            out.line(&FakeLine::init(&session))?;
            out.line(&FakeLine::rate_limit(opts.resets_at))?;
            Ok(1)
        }
        Mode::StaleSession => {
            // The prompt's size is logged, so a test sees which prompt each attempt was sent.
            stdin_logged(opts, args)?;
            match &opts.resume {
                Some(id) => {
                    eprintln!("No conversation found with session ID: {id}");
                    Ok(1)
                }
                None => {
                    let session = opts.session_id.clone().unwrap_or_else(fresh_session);
                    ok_turn(&mut out, &session, opts.sleep_ms)
                }
            }
        }
        Mode::EchoStdin => {
            let stdin_bytes = io::copy(&mut io::stdin().lock(), &mut io::sink())?;
            log_argv(opts, args, Some(stdin_bytes))?;
            let cmdline_bytes = std::fs::read("/proc/self/cmdline")?.len();
            out.line(&FakeLine::init(&session))?;
            out.line(&FakeLine::text(format!(
                "stdin_bytes={stdin_bytes} cmdline_bytes={cmdline_bytes}"
            )))?;
            pause(opts.sleep_ms);
            if let Some(go) = &opts.wait_for {
                // A handshake instead of a time window: stay alive until the test has looked.
                wait_until("the go file", || go.exists())?;
            }
            out.line(&FakeLine::done())?;
            Ok(0)
        }
        Mode::Flood => {
            out.line(&FakeLine::init(&session))?;
            flood(
                opts.lines.unwrap_or(200_000),
                opts.line_bytes.unwrap_or(1024),
            )?;
            out.line(&FakeLine::done())?;
            Ok(0)
        }
        Mode::WriteFiles => {
            out.line(&FakeLine::init(&session))?;
            // What an agent's build or install does to the disk: many small files.
            for i in 0..opts.count.unwrap_or(1000) {
                std::fs::write(format!("written-{i}.txt"), b"x")?;
            }
            out.line(&FakeLine::done())?;
            Ok(0)
        }
        Mode::RunTool => {
            out.line(&FakeLine::init(&session))?;
            // What a CLI does with a model's shell tool call: run it, and go on with its answer
            // (a tool ended by a limit is a failed command to the CLI, not the CLI's end).
            let script = opts.tool.as_deref().unwrap_or("true");
            let status = tree::shell(script)?;
            out.line(&FakeLine::text(format!("tool ended: {status}")))?;
            out.line(&FakeLine::done())?;
            Ok(0)
        }
        Mode::Usage => {
            out.raw(cli::usage_text().as_bytes())?;
            Ok(0)
        }
        Mode::Spawner => {
            let pid_file = internal_pid_file(opts)?;
            for _ in 0..opts.count.unwrap_or(3) {
                spawn_self(Mode::Sleeper, pid_file, &[])?;
            }
            sleep_forever()
        }
        Mode::Sleeper => sleep_forever(),
        Mode::SetsidSleeper => {
            nix::unistd::setsid().map_err(io::Error::from)?;
            sleep_forever()
        }
        Mode::DaemonIntermediate => {
            spawn_self(Mode::SetsidSleeper, internal_pid_file(opts)?, &[])?;
            Ok(0)
        }
    }
}

/// `fake-<pid>`.
fn fresh_session() -> String {
    format!("fake-{}", std::process::id())
}

/// The pid file an internal mode passes on to its children (the parent always gives one).
fn internal_pid_file(opts: &Opts) -> io::Result<&Path> {
    opts.pid_file
        .as_deref()
        .ok_or_else(|| io::Error::other("internal mode without --pid-file"))
}

/// init, text "hello", an optional pause, result; exit 0.
fn ok_turn(out: &mut Out, session: &str, sleep_ms: Option<u64>) -> io::Result<u8> {
    out.line(&FakeLine::init(session))?;
    out.line(&FakeLine::text(HELLO))?;
    pause(sleep_ms);
    out.line(&FakeLine::done())?;
    Ok(0)
}

fn pause(sleep_ms: Option<u64>) {
    if let Some(ms) = sleep_ms {
        std::thread::sleep(Duration::from_millis(ms));
    }
}

/// Reads, increments and writes the invocation counter; the new value (1-based).
fn bump_state(path: Option<&Path>) -> io::Result<Option<u64>> {
    let Some(path) = path else {
        return Ok(None);
    };
    let previous = match std::fs::read_to_string(path) {
        Ok(text) => text.trim().parse::<u64>().unwrap_or(0),
        Err(err) if err.kind() == io::ErrorKind::NotFound => 0,
        Err(err) => return Err(err),
    };
    let invocation = previous + 1;
    std::fs::write(path, format!("{invocation}\n"))?;
    Ok(Some(invocation))
}

/// Reads stdin to its end and logs the argv with the number of bytes read.
fn stdin_logged(opts: &Opts, args: &[OsString]) -> io::Result<()> {
    let stdin_bytes = io::copy(&mut io::stdin().lock(), &mut io::sink())?;
    log_argv(opts, args, Some(stdin_bytes))
}

/// Appends `{"argv":[...],"stdin_bytes":...}` to the argv log, if any, in one O_APPEND write.
fn log_argv(opts: &Opts, args: &[OsString], stdin_bytes: Option<u64>) -> io::Result<()> {
    let Some(path) = &opts.argv_log else {
        return Ok(());
    };
    let argv: Vec<String> = args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let mut line = serde_json::to_vec(&serde_json::json!({
        "argv": argv,
        "stdin_bytes": stdin_bytes,
    }))?;
    line.push(b'\n');
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?
        .write_all(&line)
}

const TEXT_PREFIX: &[u8] = br#"{"type":"text","text":""#;
const TEXT_SUFFIX: &[u8] = br#""}"#;

/// One text line of `total` bytes (without the newline), written in 64 KiB chunks.
fn giant_line(out: &mut Out, total: u64) -> io::Result<()> {
    let overhead = (TEXT_PREFIX.len() + TEXT_SUFFIX.len()) as u64;
    let mut remaining = total.saturating_sub(overhead);
    let chunk = vec![b'a'; CHUNK];
    out.raw(TEXT_PREFIX)?;
    while remaining > 0 {
        let n = usize::try_from(remaining).map_or(CHUNK, |r| r.min(CHUNK));
        out.raw(&chunk[..n])?;
        remaining -= n as u64;
    }
    out.raw(TEXT_SUFFIX)?;
    out.raw(b"\n")
}

/// The `result` line of [`FakeLine::done`] with a text of `text_bytes` bytes of `a`, written in
/// 64 KiB chunks (the fake never holds the line).
fn giant_result(out: &mut Out, text_bytes: u64) -> io::Result<()> {
    // The done line with an empty text, split where the text goes.
    let mut done = FakeLine::done();
    if let FakeLine::Result { text, .. } = &mut done {
        text.clear();
    }
    let template = serde_json::to_string(&done)?;
    let split = template
        .find(r#""text":"""#)
        .map(|at| at + r#""text":""#.len())
        .ok_or_else(|| io::Error::other("the result line has no text field"))?;
    let (head, tail) = template.split_at(split);
    out.raw(head.as_bytes())?;
    let chunk = vec![b'a'; CHUNK];
    let mut remaining = text_bytes;
    while remaining > 0 {
        let n = usize::try_from(remaining).map_or(CHUNK, |r| r.min(CHUNK));
        out.raw(&chunk[..n])?;
        remaining -= n as u64;
    }
    out.raw(tail.as_bytes())?;
    out.raw(b"\n")
}

fn stdout_is_a_pipe() -> io::Result<bool> {
    let st = nix::sys::stat::fstat(io::stdout().as_fd()).map_err(io::Error::from)?;
    let kind = st.st_mode & nix::sys::stat::SFlag::S_IFMT.bits();
    Ok(kind == nix::sys::stat::SFlag::S_IFIFO.bits())
}

fn set_stdout_nonblocking() -> io::Result<()> {
    use nix::fcntl::{FcntlArg, OFlag, fcntl};
    let stdout = io::stdout();
    let flags = fcntl(stdout.as_fd(), FcntlArg::F_GETFL).map_err(io::Error::from)?;
    let flags = OFlag::from_bits_truncate(flags) | OFlag::O_NONBLOCK;
    fcntl(stdout.as_fd(), FcntlArg::F_SETFL(flags)).map_err(io::Error::from)?;
    Ok(())
}

/// `total` bytes of 1 KiB lines (`x` * 1023 + newline) on stderr, in 64 KiB writes.
fn stderr_flood(total: u64) -> io::Result<()> {
    let mut chunk = vec![b'x'; CHUNK];
    for line_end in chunk.iter_mut().skip(1023).step_by(1024) {
        *line_end = b'\n';
    }
    let mut err = FdWriter(io::stderr());
    let mut remaining = total;
    while remaining > 0 {
        let n = usize::try_from(remaining).map_or(CHUNK, |r| r.min(CHUNK));
        err.write_all(&chunk[..n])?;
        remaining -= n as u64;
    }
    Ok(())
}

/// `lines` text lines of exactly `line_bytes` bytes each (without the newline), through a 64 KiB
/// buffer and not flushed per line.
fn flood(lines: u64, line_bytes: u64) -> io::Result<()> {
    let overhead = TEXT_PREFIX.len() + TEXT_SUFFIX.len();
    let fill = usize::try_from(line_bytes)
        .unwrap_or(usize::MAX)
        .saturating_sub(overhead);
    let mut line = Vec::with_capacity(overhead + fill + 1);
    line.extend_from_slice(TEXT_PREFIX);
    line.resize(TEXT_PREFIX.len() + fill, b'x');
    line.extend_from_slice(TEXT_SUFFIX);
    line.push(b'\n');
    let mut writer = BufWriter::with_capacity(CHUNK, FdWriter(io::stdout()));
    for _ in 0..lines {
        writer.write_all(&line)?;
    }
    writer.flush()
}

/// Dies by SIGSEGV without leaving a core file.
fn crash() -> ! {
    let _ = nix::sys::resource::setrlimit(nix::sys::resource::Resource::RLIMIT_CORE, 0, 0);
    let mut segv = SigSet::empty();
    segv.add(Signal::SIGSEGV);
    let _ = segv.thread_unblock();
    // Rust's runtime installs a SIGSEGV handler (stack-overflow detection); for a fault that is not
    // a guard-page hit it restores the default action and returns, so the first raise() comes back
    // and the second one kills.
    let _ = raise(Signal::SIGSEGV);
    let _ = raise(Signal::SIGSEGV);
    // Only reached if SIGSEGV was inherited as ignored; still die by a signal.
    std::process::abort()
}
