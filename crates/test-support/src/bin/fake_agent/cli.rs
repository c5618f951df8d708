//! Command-line parsing of `corral-fake-agent`: the mode, the options and the help text.
//!
//! Parsing is hand-written (no extra dependency): `<MODE> [--option VALUE | --option=VALUE]...`.
//! Anything unknown is an error the caller turns into exit code 64.

use std::ffi::OsString;
use std::path::PathBuf;

/// The environment variable naming the pid file when `--pid-file` is not given.
pub const PID_FILE_ENV: &str = "FAKE_AGENT_PID_FILE";

/// Every mode of the fake agent; the `__` ones are internal (the fake re-executes itself).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Ok,
    QuietBusy,
    FsProbe,
    NetProbe,
    TtyProbe,
    HangAfterInit,
    TrapTerm,
    Grandchildren,
    SetsidGrandchild,
    SetsidScrubbed,
    Daemonize,
    GiantLine,
    GiantResult,
    NoResult,
    DropsPipeTail,
    InvalidUtf8,
    Crlf,
    LingerAfterResult,
    ExitNonzeroAfterResult,
    ExitNonzeroWithSignals,
    StderrFlood,
    CrashMidLine,
    CloseStdout,
    RateLimitThenOk,
    RateLimitForever,
    RetryWaitThenRateLimit,
    RateLimitThenSilence,
    StaleSession,
    EchoStdin,
    Flood,
    WriteFiles,
    RunTool,
    Usage,
    /// Internal: spawns `--count` sleepers, then sleeps forever.
    Spawner,
    /// Internal: records its pid and sleeps forever.
    Sleeper,
    /// Internal: records its pid, calls setsid() and sleeps forever.
    SetsidSleeper,
    /// Internal: spawns a setsid sleeper and exits at once.
    DaemonIntermediate,
}

/// `(name, mode, one-line help)`; the help is empty for internal modes.
const MODES: &[(&str, Mode, &str)] = &[
    (
        "ok",
        Mode::Ok,
        "init, text \"hello\", result; exit 0 (--sleep-ms N between text and result)",
    ),
    (
        "tty-probe",
        Mode::TtyProbe,
        "an interactive CLI: report whether stdin/stdout are a terminal it owns and the --pointer; read one line; exit 0",
    ),
    (
        "fs-probe",
        Mode::FsProbe,
        "try to read --read PATH and write --write PATH, report each as text; then result; exit 0",
    ),
    (
        "net-probe",
        Mode::NetProbe,
        "try each --connect HOST:PORT (TCP), --proxy-connect HOST:PORT (CONNECT through $HTTPS_PROXY), --proxy-get URL (through $HTTP_PROXY), --unix PATH, --abstract NAME (comma-separated lists); one text line each; result; exit 0",
    ),
    (
        "quiet-busy",
        Mode::QuietBusy,
        "print nothing while computing for --sleep-ms N (CPU only), then the ok lines; exit 0",
    ),
    (
        "hang-after-init",
        Mode::HangAfterInit,
        "init, then sleep forever",
    ),
    (
        "trap-term",
        Mode::TrapTerm,
        "block SIGTERM/SIGINT/SIGHUP, init, sleep forever",
    ),
    (
        "grandchildren",
        Mode::Grandchildren,
        "init; a child with --count N grandchildren, all in the group; tree-ready; sleep forever",
    ),
    (
        "setsid-grandchild",
        Mode::SetsidGrandchild,
        "init; a child that calls setsid(); tree-ready; sleep forever",
    ),
    (
        "setsid-scrubbed",
        Mode::SetsidScrubbed,
        "like setsid-grandchild, but the child starts with an empty environment",
    ),
    (
        "daemonize",
        Mode::Daemonize,
        "init; double fork, the grandchild calls setsid(); tree-ready; sleep forever",
    ),
    (
        "giant-line",
        Mode::GiantLine,
        "init; one text line of --bytes N (default 64 MiB); result; exit 0",
    ),
    (
        "giant-result",
        Mode::GiantResult,
        "init; a result line whose text is --bytes N (default 20 MiB) of 'a', with usage and cost; exit 0",
    ),
    (
        "no-result",
        Mode::NoResult,
        "init, text \"hello\"; exit 0 without a result line",
    ),
    (
        "drops-pipe-tail",
        Mode::DropsPipeTail,
        "init; a result line of --bytes N (default 4 MiB) of text, written as Node.js does: onto a pipe without blocking, and what the full pipe did not take is lost at exit; exit 0",
    ),
    (
        "invalid-utf8",
        Mode::InvalidUtf8,
        "init; a text line with bytes 0xff 0xfe; result; exit 0",
    ),
    ("crlf", Mode::Crlf, "the ok lines, each ended by \\r\\n"),
    (
        "linger-after-result",
        Mode::LingerAfterResult,
        "init, result, then sleep forever",
    ),
    (
        "exit-nonzero-after-result",
        Mode::ExitNonzeroAfterResult,
        "init, result; exit 3",
    ),
    (
        "exit-nonzero-with-signals",
        Mode::ExitNonzeroWithSignals,
        "init; write a task-complete signals file to --signals PATH; exit 1",
    ),
    (
        "stderr-flood",
        Mode::StderrFlood,
        "init; --bytes N (default 100 MiB) of 1 KiB lines on stderr; result; exit 0",
    ),
    (
        "crash-mid-line",
        Mode::CrashMidLine,
        "init; half a line; raise SIGSEGV",
    ),
    (
        "close-stdout",
        Mode::CloseStdout,
        "init; close stdout and stderr; sleep forever",
    ),
    (
        "rate-limit-then-ok",
        Mode::RateLimitThenOk,
        "invocation n (--state-file): init; rate_limit and exit 1 while n <= --times; else text, result",
    ),
    (
        "rate-limit-forever",
        Mode::RateLimitForever,
        "init, rate_limit; exit 1",
    ),
    (
        "retry-wait-then-rate-limit",
        Mode::RetryWaitThenRateLimit,
        "invocation n (--state-file): init; retry after a 429, waiting --sleep-ms in silence; then rate_limit and exit 1 while n <= --times, else text, result",
    ),
    (
        "rate-limit-then-silence",
        Mode::RateLimitThenSilence,
        "invocation n (--state-file): init; a rejected rate_limit (--resets-at), then silence for --sleep-ms, alive, while n <= --times; else text, result",
    ),
    (
        "stale-session",
        Mode::StaleSession,
        "with --resume ID: \"No conversation found\" on stderr, exit 1; else like ok",
    ),
    (
        "echo-stdin",
        Mode::EchoStdin,
        "read stdin to EOF; init; text stdin_bytes=<n> cmdline_bytes=<m>; --sleep-ms; result",
    ),
    (
        "flood",
        Mode::Flood,
        "init; --lines N (200000) text lines of --line-bytes B (1024), buffered; result; exit 0",
    ),
    (
        "write-files",
        Mode::WriteFiles,
        "init; creates --count N (1000) small files in its working directory; result; exit 0",
    ),
    (
        "run-tool",
        Mode::RunTool,
        "init; run `sh -c` --tool SCRIPT as a CLI runs its shell tool, and report how it ended as text; result; exit 0",
    ),
    ("usage", Mode::Usage, "print this help; exit 0"),
    ("__spawner", Mode::Spawner, ""),
    ("__sleeper", Mode::Sleeper, ""),
    ("__setsid_sleeper", Mode::SetsidSleeper, ""),
    ("__daemon_intermediate", Mode::DaemonIntermediate, ""),
];

impl Mode {
    fn parse(name: &str) -> Option<Self> {
        MODES
            .iter()
            .find(|(n, _, _)| *n == name)
            .map(|&(_, m, _)| m)
    }

    /// Whether this is one of the `__` modes the fake runs its own children in.
    pub fn is_internal(self) -> bool {
        self.name().starts_with("__")
    }

    /// The name used on the command line.
    pub fn name(self) -> &'static str {
        MODES
            .iter()
            .find(|(_, m, _)| *m == self)
            .map_or("?", |&(n, _, _)| n)
    }
}

/// The parsed command line.
#[derive(Debug, Clone)]
pub struct Opts {
    pub mode: Mode,
    pub session_id: Option<String>,
    pub resume: Option<String>,
    pub pid_file: Option<PathBuf>,
    pub state_file: Option<PathBuf>,
    pub argv_log: Option<PathBuf>,
    pub signals: Option<PathBuf>,
    pub bytes: Option<u64>,
    pub lines: Option<u64>,
    pub line_bytes: Option<u64>,
    pub times: Option<u64>,
    pub count: Option<u64>,
    pub sleep_ms: Option<u64>,
    pub resets_at: Option<u64>,
    pub pointer: Option<String>,
    pub read: Option<PathBuf>,
    pub write: Option<PathBuf>,
    pub wait_for: Option<PathBuf>,
    pub connect: Vec<String>,
    pub proxy_connect: Vec<String>,
    pub proxy_get: Vec<String>,
    pub unix: Vec<String>,
    pub abstract_names: Vec<String>,
    pub tool: Option<String>,
}

/// The help text listing the modes and options.
pub fn usage_text() -> String {
    let mut text = String::from(
        "usage: corral-fake-agent <MODE> [OPTIONS]\n\
         \n\
         A fake headless AI CLI for Corral's tests: JSON lines on stdout, one fault per mode.\n\
         \n\
         modes:\n",
    );
    for (name, _, help) in MODES.iter().filter(|(_, _, help)| !help.is_empty()) {
        text.push_str(&format!("  {name:<27} {help}\n"));
    }
    text.push_str(
        "\noptions:\n\
         \x20 --session-id ID   session id to announce (default fake-<pid>)\n\
         \x20 --resume ID       resume ID (announced as the session id)\n\
         \x20 --pid-file PATH   every process appends its pid here (or env FAKE_AGENT_PID_FILE)\n\
         \x20 --state-file PATH invocation counter shared across runs\n\
         \x20 --argv-log PATH   append {\"argv\":[...],\"stdin_bytes\":...} per invocation\n\
         \x20 --signals PATH    where exit-nonzero-with-signals writes its signals file\n\
         \x20 --connect/--proxy-connect HOST:PORT,…  --proxy-get URL,…  --unix PATH,…  --abstract NAME,…\n\
         \x20 --bytes N  --lines N  --line-bytes N  --times N  --count N  --sleep-ms N  --resets-at EPOCH_SECS\n",
    );
    text
}

/// The pid file to record into, found before full parsing so the pid is written first:
/// `--pid-file PATH` / `--pid-file=PATH`, else the environment variable.
pub fn early_pid_file(args: &[OsString]) -> Option<PathBuf> {
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        if arg == "--pid-file" {
            return iter.next().map(PathBuf::from);
        }
        if let Some(value) = arg.to_str().and_then(|a| a.strip_prefix("--pid-file=")) {
            return Some(PathBuf::from(value));
        }
    }
    std::env::var_os(PID_FILE_ENV)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

/// A comma-separated list, empty items dropped.
fn list(value: &str) -> impl Iterator<Item = String> + '_ {
    value
        .split(',')
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(str::to_owned)
}

/// Parses the arguments after argv0.
pub fn parse(args: &[OsString]) -> Result<Opts, String> {
    let mut mode = None;
    let mut opts = Opts {
        mode: Mode::Usage,
        session_id: None,
        resume: None,
        pid_file: None,
        state_file: None,
        argv_log: None,
        signals: None,
        bytes: None,
        lines: None,
        line_bytes: None,
        times: None,
        count: None,
        sleep_ms: None,
        resets_at: None,
        pointer: None,
        read: None,
        write: None,
        wait_for: None,
        connect: Vec::new(),
        proxy_connect: Vec::new(),
        proxy_get: Vec::new(),
        unix: Vec::new(),
        abstract_names: Vec::new(),
        tool: None,
    };
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        let Some(arg) = arg.to_str() else {
            return Err(format!("argument is not UTF-8: {}", arg.to_string_lossy()));
        };
        let Some(flag) = arg.strip_prefix("--") else {
            if mode.is_some() {
                return Err(format!("unexpected argument: {arg}"));
            }
            mode = Some(Mode::parse(arg).ok_or_else(|| format!("unknown mode: {arg}"))?);
            continue;
        };
        let (name, value) = match flag.split_once('=') {
            Some((name, value)) => (name, value.to_owned()),
            None => {
                let value = iter
                    .next()
                    .ok_or_else(|| format!("option --{flag} needs a value"))?;
                let value = value
                    .to_str()
                    .ok_or_else(|| format!("value of --{flag} is not UTF-8"))?;
                (flag, value.to_owned())
            }
        };
        let number = |value: &str| {
            value
                .parse::<u64>()
                .map_err(|_| format!("option --{name} needs a number, got {value:?}"))
        };
        match name {
            "session-id" => opts.session_id = Some(value),
            "resume" => opts.resume = Some(value),
            "pid-file" => opts.pid_file = Some(value.into()),
            "state-file" => opts.state_file = Some(value.into()),
            "argv-log" => opts.argv_log = Some(value.into()),
            "signals" => opts.signals = Some(value.into()),
            "bytes" => opts.bytes = Some(number(&value)?),
            "lines" => opts.lines = Some(number(&value)?),
            "line-bytes" => opts.line_bytes = Some(number(&value)?),
            "times" => opts.times = Some(number(&value)?),
            "count" => opts.count = Some(number(&value)?),
            "sleep-ms" => opts.sleep_ms = Some(number(&value)?),
            "resets-at" => opts.resets_at = Some(number(&value)?),
            "pointer" => opts.pointer = Some(value),
            "read" => opts.read = Some(value.into()),
            "write" => opts.write = Some(value.into()),
            "wait-for" => opts.wait_for = Some(value.into()),
            "connect" => opts.connect.extend(list(&value)),
            "proxy-connect" => opts.proxy_connect.extend(list(&value)),
            "proxy-get" => opts.proxy_get.extend(list(&value)),
            "unix" => opts.unix.extend(list(&value)),
            "abstract" => opts.abstract_names.extend(list(&value)),
            "tool" => opts.tool = Some(value),
            _ => return Err(format!("unknown option: --{name}")),
        }
    }
    opts.mode = mode.ok_or("missing mode (try `corral-fake-agent usage`)")?;
    if opts.pid_file.is_none() {
        opts.pid_file = early_pid_file(&[]);
    }
    if opts.mode == Mode::ExitNonzeroWithSignals && opts.signals.is_none() {
        return Err("exit-nonzero-with-signals needs --signals PATH".to_owned());
    }
    Ok(opts)
}
