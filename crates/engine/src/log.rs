//! The execution log, `events.jsonl`: one JSON object per line for every happening of a run.
//!
//! Every line carries `t` (wall time, RFC 3339 with microseconds), `monoMs` (monotonic offset
//! from the run's start), `attempt` and `kind`. The log is streamed to disk through a buffer that
//! is flushed at least every 50 ms while the run goes on and at every attempt's end, so a
//! follower (`tail -f`, `corral runs follow`) sees it live and a crash loses at most that much.
//! A full disk or a removed run directory does not cut a record in half or lose the end of the
//! run (see [`ExecutionLog`]).
//! It records the program, arguments and environment NAMES of each spawn, never values and never
//! the prompt.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use corral_ports::run_dir::EVENTS_FILE;
use corral_ports::{AgentEvent, Outcome, SessionId, Usage};
use serde::Serialize;

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The longest a record waits in the buffer while a run goes on.
pub(crate) const FLUSH_EVERY: Duration = Duration::from_millis(50);

/// Why the supervisor ended a process group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum KillReason {
    /// The caller cancelled.
    Cancelled,
    /// No output for longer than the idle limit.
    IdleTimeout,
    /// The wall-clock limit passed.
    WallTimeout,
    /// The terminal event was seen and the CLI did not exit within the grace.
    LingeredAfterResult,
    /// The leader exited but processes of its group kept running.
    LeftoversAfterExit,
    /// The CLI reported a rejected rate limit and stayed alive without saying it waits for the
    /// reset itself, or the limit was long with auto-resume off: the engine waits for the reset
    /// (or stops) and resumes the session, instead of leaving a silent process to the idle
    /// watchdog.
    RateLimited,
}

/// One record's body. The `kind` field names the variant.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(
    rename_all_fields = "camelCase",
    tag = "kind",
    rename_all = "snake_case"
)]
pub enum Record<'a> {
    /// The run begins.
    RunStarted {
        /// Provider id.
        provider: &'a str,
        /// Working directory.
        cwd: &'a Path,
        /// Run directory.
        output_dir: &'a Path,
        /// Resume requested by the caller.
        resume: Option<&'a SessionId>,
        /// Prompt size in bytes (the prompt itself is in `prompt.md`, not here).
        prompt_bytes: usize,
    },
    /// What the sandbox enforces for this run.
    Attestation(&'a corral_ports::Attestation),
    /// What the probe inside the sandbox saw before the CLI ran (see `inside`), and each
    /// guarantee it did not confirm (no longer counted as enforced).
    SandboxChecked {
        /// Capability sets, flags, namespaces, the writes tried and where they went.
        seen: &'a corral_ports::InsideCheck,
        /// The guarantees asked for that the check did not confirm, each with what was seen.
        not_confirmed: &'a [corral_ports::Unenforced],
    },
    /// The git-cleanliness check after the run: changes outside the paths the run could write.
    StrayWrites {
        /// The repository checked.
        repo: &'a Path,
        /// Each stray change (`modified /repo/README`).
        strays: &'a [String],
        /// Why the check could not run, if it could not.
        error: Option<String>,
    },
    /// Under the native backend, right after the spawn: whether the write watch runs (see
    /// `write_watch`), and why not when it does not.
    WriteWatchStarted {
        /// Why there is no watch for this attempt.
        #[serde(skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// Under the native backend, at the attempt's end: what the write watch saw.
    WriteWatch {
        /// The calls it stopped (every write-like call of the process tree).
        calls: u64,
        /// Each write outside the paths the spawn may write (`added /home/me/x`).
        strays: &'a [String],
        /// Further strays, counted only.
        #[serde(skip_serializing_if = "is_zero")]
        more: u64,
        /// Why the watch stopped before the attempt ended, if it did.
        #[serde(skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// The CLI's version was checked.
    VersionChecked {
        /// The program.
        program: &'a str,
        /// The version found.
        found: Option<&'a str>,
        /// The tested range.
        required: &'a str,
        /// Whether it is inside the range.
        accepted: bool,
        /// Whether the caller overrode a mismatch.
        overridden: bool,
        /// Whether the version came from the version cache (the binary unchanged since it was
        /// last asked) rather than from running the CLI.
        cached: bool,
    },
    /// A child was started.
    Spawn {
        /// The program.
        program: &'a Path,
        /// Its arguments (never the prompt body).
        args: Vec<String>,
        /// The working directory.
        cwd: &'a Path,
        /// Environment variable NAMES passed (values never logged).
        env_names: Vec<&'a str>,
        /// Secret-looking names withheld by the env policy.
        env_withheld: &'a [String],
        /// `prompt` or `continuation` (piped, then closed), or `null`.
        stdin: &'a str,
        /// Pid, which is also the process group id.
        pid: u32,
        /// Session resumed by this attempt.
        resume: Option<&'a SessionId>,
        /// Measured command-line size in bytes.
        argv_bytes: usize,
    },
    /// A confined sandbox's way out is open: the proxy inside its network namespace, and the
    /// allow-list it enforces.
    EgressOpened {
        /// The proxy's address inside the sandbox.
        proxy: &'a str,
        /// The allow-list: the provider's endpoints, then the user's rules.
        allow: &'a [corral_sandbox::AllowRule],
        /// The sandbox's network namespace (inode).
        netns: Option<u64>,
        /// From spawn to the released CLI, in microseconds.
        setup_us: u64,
        /// Of which from spawn to bubblewrap's report of its sandbox, in microseconds.
        reported_us: u64,
    },
    /// The egress proxy refused a connection.
    EgressRefused {
        /// `CONNECT` or the plain-HTTP method.
        method: &'a str,
        /// `host:port` as the CLI asked for it.
        target: &'a str,
        /// Why.
        reason: &'a str,
    },
    /// An allowed target could not be reached.
    EgressFailed {
        /// `host:port`.
        target: &'a str,
        /// The operating system's words.
        error: &'a str,
    },
    /// The child could not be started.
    SpawnFailed {
        /// The program.
        program: &'a Path,
        /// The operating system's words.
        error: String,
    },
    /// The files the child writes as its stdout and stderr, and how they are followed.
    StreamFiles {
        /// `raw/<n>.stdout`.
        stdout: &'a Path,
        /// `raw/<n>.stderr`.
        stderr: &'a Path,
        /// `inotify`, or `poll` where inotify could not be set up.
        follow: &'static str,
    },
    /// What became of the stream files when the run ended (`run.raw_streams`).
    RawStreams {
        /// The retention setting.
        retention: crate::streams::RawStreamRetention,
        /// Each file: as written, where it is now (`null`: removed), its size as written.
        files: &'a [crate::streams::Retained],
    },
    /// Bytes written to the child's stdin, then closed.
    StdinClosed {
        /// Bytes written.
        bytes: usize,
        /// A write error (the child exited without reading), if any.
        error: Option<String>,
    },
    /// A normalized agent event.
    Agent(&'a AgentEvent),
    /// A line the CLI wrote on stderr.
    Stderr {
        /// The line, lossily decoded.
        line: &'a str,
    },
    /// Stderr lines beyond the per-attempt logging budget were not logged.
    StderrTruncated {
        /// Bytes of stderr not logged.
        bytes_not_logged: u64,
        /// Total stderr bytes of the attempt.
        total_bytes: u64,
    },
    /// The session id was persisted.
    SessionPersisted {
        /// The id.
        session_id: &'a SessionId,
        /// The file.
        path: &'a Path,
    },
    /// A watchdog or the caller decided to end the process group.
    KillStarted {
        /// Why.
        reason: KillReason,
        /// The idle or wall limit that fired, if one did.
        limit_ms: Option<u64>,
    },
    /// A signal was sent to a process group or to an escaped process.
    Signal {
        /// `SIGTERM` or `SIGKILL`.
        signal: &'a str,
        /// `group` or `escaped`.
        target: &'a str,
        /// Pid or process group id.
        id: u32,
        /// Whether anything received it.
        delivered: bool,
    },
    /// One of the child's output pipes could not be read; it counts as closed from here on.
    ReadFailed {
        /// `stdout` or `stderr`.
        stream: &'a str,
        /// The operating system's words.
        error: String,
    },
    /// Waiting for the child failed, so its exit status is unknown.
    WaitFailed {
        /// The operating system's words.
        error: String,
    },
    /// The child exited.
    Exit {
        /// Exit code.
        code: Option<i32>,
        /// Terminating signal.
        signal: Option<i32>,
    },
    /// The attempt's result was classified.
    Classified {
        /// The class (`succeeded`, `rate-limited`, `stale-session`, …).
        class: &'a str,
        /// Why, in a few words.
        detail: String,
    },
    /// The supervisor waits before the next attempt.
    Backoff {
        /// How long.
        wait_ms: u64,
        /// Why (`rate limit`, `reset time`).
        reason: &'a str,
        /// Retry number (1-based).
        retry: u32,
        /// Session the next attempt resumes, if any.
        next_resume: Option<&'a SessionId>,
    },
    /// This run told the rate-limit gate that its provider account is limited until then.
    RateLimitHold {
        /// Until when (milliseconds since the epoch).
        until_epoch_ms: u64,
        /// Where that came from (a reset time or this run's own backoff).
        basis: &'a str,
    },
    /// The next spawn waits for a hold another run recorded on the same provider account.
    RateLimitWait {
        /// The provider whose account is limited.
        provider: &'a str,
        /// Until when (milliseconds since the epoch).
        until_epoch_ms: u64,
        /// How long the wait is.
        wait_ms: u64,
        /// The run that recorded the hold (`<run id>-<attempt>`).
        set_by: &'a str,
    },
    /// The next attempt starts without resuming (the session was not found).
    ColdRetry {
        /// The session that was not found.
        stale_session: &'a SessionId,
    },
    /// Before a resume, something the agent left in place of `signals.json` or of a record file
    /// was removed (see [`crate::files::repair_run_dir`]).
    TamperingRemoved {
        /// Where.
        path: &'a Path,
        /// What it was (`a FIFO`, `a symbolic link`, …).
        was: &'a str,
    },
    /// Records dropped while the log could not be written (a full disk); the log writes it
    /// itself (`note_gap`) once it can write again.
    LogGap {
        /// How many records were lost.
        records_lost: u64,
    },
    /// The run is over: the log's last line, once per run.
    RunFinished(RunEnd<'a>),
    /// One provider run of a task run is over (a corrective retry may follow); the task's owner
    /// writes the `run_finished` (see [`corral_ports::AiSession::task`]).
    ProviderRunFinished(RunEnd<'a>),
}

/// One line of `events.jsonl` as its JSON Schema describes it: the stamp every line opens with,
/// then the record's own fields. Only the schema uses it: the log writes the stamp itself, and
/// a test checks real logs against the schema.
#[derive(Debug, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LogLine<'a> {
    /// Wall time, RFC 3339 with microseconds.
    pub t: String,
    /// Milliseconds since the run started, on the monotonic clock, to the microsecond.
    pub mono_ms: f64,
    /// The attempt the record belongs to (0 before the first and for the run's own records).
    pub attempt: u32,
    /// The record, its `kind` naming which.
    #[serde(flatten)]
    pub record: Record<'a>,
}

/// The JSON Schema of one line of `events.jsonl` (`docs/schema/events.schema.json`): what the
/// log writes (a field left out when empty is optional).
pub fn execution_log_schema() -> schemars::Schema {
    schemars::generate::SchemaSettings::draft2020_12()
        .for_serialize()
        .into_generator()
        .into_root_schema_for::<LogLine<'static>>()
}

/// How a run (or one provider run of a task) ended.
#[derive(Debug, Clone, Copy, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunEnd<'a> {
    /// The outcome.
    pub outcome: Outcome,
    /// Attempts made, over the whole task run.
    pub attempts: u32,
    /// Usage over all attempts.
    pub usage: &'a Usage,
    /// Last session id.
    pub session_id: Option<&'a SessionId>,
    /// Whether `signals.json` exists.
    pub signals_present: bool,
    /// Wall time of the whole run, from the task's start.
    pub duration_ms: u64,
}

/// Appends the one `run_finished` of a task run whose provider runs each ended with
/// `provider_run_finished`, to `dir/events.jsonl`, on the task's clock (`task.started`).
pub fn write_task_finished(
    dir: &Path,
    task: corral_ports::TaskRun,
    end: &RunEnd<'_>,
) -> io::Result<()> {
    let mut log = ExecutionLog::open(dir, task.started)?;
    log.record(end.attempts, &Record::RunFinished(*end));
    log.flush();
    match log.error() {
        Some(kind) => Err(io::Error::from(kind)),
        None => Ok(()),
    }
}

/// Appends a `tampering_removed` record for each of `removed` to `dir/events.jsonl`, on the
/// task's clock, with `attempt` (the attempts of the task so far).
pub fn write_tampering_removed(
    dir: &Path,
    task: corral_ports::TaskRun,
    attempt: u32,
    removed: &[crate::files::Tampered],
) -> io::Result<()> {
    if removed.is_empty() {
        return Ok(());
    }
    let mut log = ExecutionLog::open(dir, task.started)?;
    for t in removed {
        log.record(
            attempt,
            &Record::TamperingRemoved {
                path: &t.path,
                was: t.was,
            },
        );
    }
    log.flush();
    match log.error() {
        Some(kind) => Err(io::Error::from(kind)),
        None => Ok(()),
    }
}

impl<'a> Record<'a> {
    /// The record of something the egress proxy did.
    pub fn egress(note: &'a corral_sandbox::EgressNote) -> Self {
        match note {
            corral_sandbox::EgressNote::Refused {
                method,
                target,
                reason,
            } => Record::EgressRefused {
                method,
                target,
                reason,
            },
            corral_sandbox::EgressNote::Failed { target, error } => {
                Record::EgressFailed { target, error }
            }
        }
    }
}

/// Appends `text` as a JSON string. Text with nothing to escape (the common case for agent
/// output) is copied as it is; anything else goes through serde_json, so the output is the same
/// either way.
fn push_json_str(out: &mut Vec<u8>, text: &str) -> io::Result<()> {
    // A branch-free fold the compiler vectorizes, unlike an early-exit search.
    let needs_escape = text.as_bytes().iter().fold(false, |acc, &b| {
        acc | (b < 0x20) | (b == b'"') | (b == b'\\')
    });
    if needs_escape {
        serde_json::to_writer(&mut *out, text).map_err(io::Error::other)
    } else {
        out.push(b'"');
        out.extend_from_slice(text.as_bytes());
        out.push(b'"');
        Ok(())
    }
}

/// Wall-clock stamps, with the date and time formatted once per second.
#[derive(Debug, Default)]
struct Stamp {
    second: u64,
    prefix: String,
}

impl Stamp {
    /// Writes `"t":"<RFC 3339 with microseconds>"`.
    fn write(&mut self, out: &mut Vec<u8>, now: SystemTime) {
        let since = now
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        if since.as_secs() != self.second || self.prefix.is_empty() {
            self.second = since.as_secs();
            let full = humantime::format_rfc3339_seconds(now).to_string();
            self.prefix = full.trim_end_matches('Z').to_string();
        }
        out.extend_from_slice(b"\"t\":\"");
        out.extend_from_slice(self.prefix.as_bytes());
        let _ = write!(out, ".{:06}Z\"", since.subsec_micros());
    }
}

/// Writes `events.jsonl` for one run.
///
/// Records are buffered whole and written whole: when a write fails half-way (a full disk), the
/// file is cut back to its last complete line, so a reader never sees half a record. A small
/// reserve file (see [`create_reserve`](crate::reserve::create_reserve)) is removed on the first "no space left" to make room
/// for the run's last records, which matter most (the session id, how the run ended). While
/// the disk stays full, up to `PENDING_MAX` (4 MiB) bytes of records wait in memory and every flush
/// tries again; what did not fit is counted and recorded as a `log_gap` once writing works again.
/// When the log file itself is removed (its directory deleted under a running supervisor), the
/// next flush recreates it from the open descriptor, so the records written so far survive.
#[derive(Debug)]
pub struct ExecutionLog {
    path: PathBuf,
    file: File,
    /// Bytes known to be in the file: everything before is whole lines.
    committed: u64,
    /// Records not yet written (whole lines only).
    pending: Vec<u8>,
    /// Records dropped while the pending buffer was full.
    dropped: u64,
    start: Instant,
    last_flush: Instant,
    failed: Option<io::ErrorKind>,
    reserve: Option<PathBuf>,
    stamp: Stamp,
}

/// Pending records are written once they reach this size, even between flush ticks.
const PENDING_FLUSH: usize = 64 * 1024;
/// The most records kept in memory while the log cannot be written.
pub const PENDING_MAX: usize = 4 * 1024 * 1024;

impl ExecutionLog {
    /// Creates (or appends to) `dir/events.jsonl`.
    pub fn open(dir: &Path, start: Instant) -> io::Result<Self> {
        fs::create_dir_all(dir)?;
        let path = dir.join(EVENTS_FILE);
        let file = open_append(&path)?;
        let committed = file.metadata()?.len();
        Ok(ExecutionLog {
            reserve: crate::reserve::create_reserve(dir, "log"),
            path,
            file,
            committed,
            pending: Vec::with_capacity(PENDING_FLUSH),
            dropped: 0,
            start,
            last_flush: Instant::now(),
            failed: None,
            stamp: Stamp::default(),
        })
    }

    /// The log file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one record. A write error is remembered (see [`ExecutionLog::error`]) rather than
    /// ending the run: losing the log must not kill the agent's work.
    pub fn record(&mut self, attempt: u32, record: &Record<'_>) {
        // The record is written straight after the pending ones, not built apart and copied:
        // under a flood of agent text that copy was a visible part of the log's cost.
        let start = self.pending.len();
        let line = &mut self.pending;
        line.push(b'{');
        self.stamp.write(line, SystemTime::now());
        let mono_us = self.start.elapsed().as_micros();
        let _ = write!(
            line,
            ",\"monoMs\":{}.{:03},\"attempt\":{attempt},",
            mono_us / 1000,
            mono_us % 1000
        );
        // The hot path: agent text, written without a second serde pass over the text.
        let fast_text = if let Record::Agent(AgentEvent::Text { text }) = record {
            Some(("text", text))
        } else if let Record::Agent(AgentEvent::Thinking { text }) = record {
            Some(("thinking", text))
        } else {
            None
        };
        let result = if let Some((event, text)) = fast_text {
            let _ = write!(line, "\"kind\":\"agent\",\"event\":\"{event}\",\"text\":");
            push_json_str(line, text).map(|()| line.push(b'}'))
        } else {
            // The record is a JSON object; splice its fields after ours.
            let fields = line.len();
            serde_json::to_writer(&mut *line, record)
                .map_err(io::Error::other)
                .map(|()| {
                    if line.get(fields) == Some(&b'{') {
                        line.remove(fields);
                    }
                })
        };
        line.push(b'\n');
        // A record that could not be serialised, or that does not fit beside the records
        // already waiting for a full disk, is taken back out whole.
        if result.is_err() {
            line.truncate(start);
        } else if start > 0 && line.len() > PENDING_MAX {
            line.truncate(start);
            self.dropped += 1;
        }
        if self.pending.len() >= PENDING_FLUSH && self.failed.is_none() {
            self.write_pending();
        }
    }

    /// Writes the pending records; on failure cuts the file back to its last whole line.
    fn write_pending(&mut self) {
        self.reopen_if_removed();
        if self.dropped > 0 && self.failed.is_none() {
            self.note_gap();
        }
        if self.pending.is_empty() {
            return;
        }
        let mut result = self.file.write_all(&self.pending);
        if let Err(e) = &result
            && e.kind() == io::ErrorKind::StorageFull
        {
            let _ = self.file.set_len(self.committed);
            if crate::reserve::release_reserve(self.dir()) {
                result = self.file.write_all(&self.pending);
            }
        }
        match result {
            Ok(()) => {
                self.committed += self.pending.len() as u64;
                self.pending.clear();
                if self.failed.take().is_some() && self.dropped > 0 {
                    self.note_gap();
                }
            }
            Err(e) => {
                // Never leave half a record behind.
                let _ = self.file.set_len(self.committed);
                if self.failed.is_none() {
                    tracing::warn!(
                        path = %self.path.display(),
                        error = %e,
                        "the execution log cannot be written; records wait in memory"
                    );
                }
                self.failed = Some(e.kind());
            }
        }
    }

    /// Writes a `log_gap` record for the records dropped while the log could not be written.
    fn note_gap(&mut self) {
        let dropped = std::mem::take(&mut self.dropped);
        let mut line = Vec::new();
        line.push(b'{');
        self.stamp.write(&mut line, SystemTime::now());
        let mono_us = self.start.elapsed().as_micros();
        let _ = writeln!(
            line,
            ",\"monoMs\":{}.{:03},\"attempt\":0,\"kind\":\"log_gap\",\"recordsLost\":{dropped}}}",
            mono_us / 1000,
            mono_us % 1000
        );
        match self.file.write_all(&line) {
            Ok(()) => self.committed += line.len() as u64,
            Err(_) => {
                let _ = self.file.set_len(self.committed);
                self.dropped = dropped;
            }
        }
    }

    fn dir(&self) -> &Path {
        self.path.parent().unwrap_or(Path::new("."))
    }

    /// When the log file was unlinked (its run directory removed), writes would go to a file
    /// nobody can open: recreate it at its path with what it held, read back through the open
    /// descriptor.
    fn reopen_if_removed(&mut self) {
        use std::os::unix::fs::MetadataExt;
        let removed = self.file.metadata().is_ok_and(|m| m.nlink() == 0);
        if !removed {
            return;
        }
        let recreated = (|| -> io::Result<File> {
            use std::os::fd::AsRawFd;
            fs::create_dir_all(self.dir())?;
            let mut old = File::open(format!("/proc/self/fd/{}", self.file.as_raw_fd()))?;
            let mut new = open_append(&self.path)?;
            io::copy(&mut old, &mut new)?;
            Ok(new)
        })();
        match recreated {
            Ok(file) => {
                tracing::warn!(path = %self.path.display(), "the execution log was removed; recreated it");
                self.committed = file.metadata().map(|m| m.len()).unwrap_or(self.committed);
                self.file = file;
            }
            Err(e) => {
                tracing::warn!(path = %self.path.display(), error = %e, "the execution log was removed and cannot be recreated");
            }
        }
    }

    /// Writes buffered lines to the file so followers see them.
    pub fn flush(&mut self) {
        self.write_pending();
        self.last_flush = Instant::now();
    }

    /// Flushes if lines are waiting and the last flush is older than the flush interval.
    pub fn flush_if_due(&mut self) {
        if !self.pending.is_empty() && self.last_flush.elapsed() >= FLUSH_EVERY {
            self.flush();
        }
    }

    /// The write error the log is stuck on, if it cannot be written now.
    pub fn error(&self) -> Option<io::ErrorKind> {
        self.failed
    }
}

fn open_append(path: &Path) -> io::Result<File> {
    OpenOptions::new().create(true).append(true).open(path)
}

impl Drop for ExecutionLog {
    fn drop(&mut self) {
        self.flush();
        if let Some(reserve) = self.reserve.take() {
            let _ = fs::remove_file(reserve);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn last_line(log: &ExecutionLog) -> serde_json::Value {
        let text = std::fs::read_to_string(log.path()).unwrap();
        serde_json::from_str(text.lines().last().unwrap()).unwrap()
    }

    #[test]
    fn fast_and_generic_paths_write_the_same_json() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = ExecutionLog::open(dir.path(), Instant::now()).unwrap();
        for text in [
            "plain ascii",
            "naïve — ünïcode",
            "quote \" back\\slash",
            "ctl \u{1}\n\t",
            "",
        ] {
            let event = AgentEvent::Text {
                text: text.to_string(),
            };
            log.record(3, &Record::Agent(&event));
            log.flush();
            let got = last_line(&log);
            assert_eq!(got["text"], text);
            assert_eq!(got["kind"], "agent");
            assert_eq!(got["event"], "text");
            assert_eq!(got["attempt"], 3);
            let t = got["t"].as_str().unwrap();
            assert!(humantime::parse_rfc3339(t).is_ok(), "{t}");
            assert!(got["monoMs"].as_f64().is_some());
        }
        log.record(
            1,
            &Record::Exit {
                code: Some(2),
                signal: None,
            },
        );
        log.flush();
        let got = last_line(&log);
        assert_eq!(
            (got["kind"].clone(), got["code"].clone()),
            ("exit".into(), 2.into())
        );
    }
}
