//! One attempt: start the CLI, feed it the prompt, read its output, watch it, and end its whole
//! process tree, whatever happens.
//!
//! The output comes from two files the child writes and the engine follows (`streams.rs`), or
//! from two pipes. With files, the output is over once the whole process group is gone and both
//! files were read to their end (after the sweep of escaped processes they are read once more);
//! with pipes, once both reached end of file.
//!
//! The loop owns every timer: the idle watchdog (reset by any stdout or stderr byte), the
//! optional wall-clock limit, the grace after the terminal event, the grace for a group whose
//! leader exited but whose other members still run (or hold the pipes open), and the kill ladder
//! (SIGTERM to the group, then SIGKILL when the group is still alive after the grace). Output
//! keeps being drained while the group dies, so a child that flushes on SIGTERM is never blocked
//! on a full pipe.

use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use bytes::BytesMut;
use corral_ports::{AgentEvent, ProviderId, RateLimitInfo, RunObserver, SessionId, Usage};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::task::JoinHandle;
use tokio::time::{Interval, MissedTickBehavior, sleep_until};
use tokio_util::sync::CancellationToken;

use crate::adapter::{Liveness, StreamParser, TerminalSummary};
use crate::config::EngineConfig;
use crate::files::{SessionMeta, persist_session};
use crate::framing::{Frame, LineFramer};
use crate::gate::{self, Hold, ProviderAccount};
use crate::log::{ExecutionLog, FLUSH_EVERY, KillReason, Record};
use crate::streams::{Follower, Stream};
use crate::tail::Tail;
use corral_process::proc;
use corral_process::process_group::{self, KILL_POLL, KillLadder, Sent};
use corral_process::spawn::{ChildOutput, ExitInfo, SpawnedChild};
use corral_sandbox::EgressNote;

const READ_CHUNK: usize = 64 * 1024;
/// One read from a stream file.
const FILE_READ_CHUNK: usize = 256 * 1024;
/// How much of one stream file is read before the loop looks at its timers again.
const FILE_READ_BUDGET: usize = 1024 * 1024;
/// How often a group whose leader exited is looked at, when its output is followed in files: at
/// first after 1 ms, doubling up to 20 ms. The rest of a group usually goes within a millisecond
/// of its leader (the group keeper dies with the CLI), and a first look 20 ms later added those
/// 20 ms to every run.
const GROUP_POLL_FIRST: Duration = Duration::from_millis(1);
const GROUP_POLL_MAX: Duration = Duration::from_millis(20);
const STDERR_MAX_LINE: usize = 64 * 1024;
const UNPARSED_KEEP: usize = 4096;

/// What one attempt produced.
#[derive(Debug, Default)]
pub(crate) struct AttemptResult {
    pub exit: Option<ExitInfo>,
    pub killed_by: Option<KillReason>,
    pub session_id: Option<SessionId>,
    pub terminal: Option<TerminalSummary>,
    pub rate_limits: Vec<RateLimitInfo>,
    pub usage: Usage,
    pub final_text: Option<String>,
    pub stderr_tail: String,
    pub stdout_tail: String,
    /// Processes that had left the group (setsid, double fork) and were killed by the sweep.
    pub escaped_killed: Vec<u32>,
    /// The idle limit that applied (the settings', or the adapter's minimum).
    pub idle_limit: Duration,
    /// What the egress proxy refused.
    pub egress_refused: crate::endpoints::EgressRefusals,
    /// The wait the CLI announced before its last own retry of a rate-limited (429) or
    /// overloaded (529) request, in milliseconds: the best guess at the API's `retry-after`
    /// when the attempt still ends rate-limited (the CLI's error result does not carry it).
    pub cli_retry_after_ms: Option<u64>,
    /// The limit (`[limits]`) the attempt's process tree went over, for which the sandbox's
    /// guard ended it: set once the child was reaped, before the guard ends.
    pub limit_breach: Option<corral_process::Breach>,
}

/// What the attempt needs from the run.
pub(crate) struct AttemptContext<'a> {
    pub attempt: u32,
    pub config: &'a EngineConfig,
    pub log: &'a mut ExecutionLog,
    pub observer: &'a Arc<dyn RunObserver>,
    pub cancel: &'a CancellationToken,
    pub parser: Box<dyn StreamParser>,
    /// The session id already persisted for this run, to write the file only on change.
    pub persisted: &'a mut Option<SessionId>,
    pub session_meta: &'a (dyn Fn(&SessionId) -> SessionMeta + Send + Sync),
    pub output_dir: &'a std::path::Path,
    pub run_token: &'a str,
    pub liveness: Liveness,
    /// A session id minted before the spawn, persisted before any output is read.
    pub minted_session: Option<SessionId>,
    /// What the egress proxy of a confined sandbox reports, recorded as it happens.
    pub egress_notes: Option<UnboundedReceiver<EgressNote>>,
    /// The follower of the stream files, when the child writes files instead of pipes.
    pub follower: Option<Follower>,
    /// The provider, for what the observer is told.
    pub provider: ProviderId,
    /// The provider account in the rate-limit gate, held while the CLI waits out a 429 of its
    /// own (`None` when the engine keeps no gate).
    pub account: Option<&'a ProviderAccount>,
}

/// Everything that turns bytes into events and records them.
struct StreamState<'a> {
    ctx: AttemptContext<'a>,
    events: Vec<AgentEvent>,
    result: AttemptResult,
    usage_from_events: Usage,
    terminal_usage: Option<Usage>,
    terminal_seen_at: Option<Instant>,
    /// The CLI announced that it waits, silent, until then before retrying a request: the idle
    /// watchdog does not count that wait as a hang.
    quiet_until: Option<Instant>,
    /// The CLI reported a rejected rate limit with a reset: unless it says by then that it waits
    /// for the reset itself (its own retry notice) or ends, the spawn is ended at this instant
    /// and the run waits for the reset and resumes the session (see [`LIMIT_GRACE`]).
    limit_deadline: Option<Instant>,
}

/// How long a CLI that reported a rejected rate limit may stay alive without saying what it does
/// about it. Claude Code either ends the attempt at once (an error result follows the event) or,
/// with `CLAUDE_CODE_RETRY_WATCHDOG`, announces its own wait (`api_retry`) right after it; one
/// that does neither waits for the reset in silence (what Sculptor's parser notes), and is ended
/// so that the run, not an idle process, holds the account and resumes the session at the reset.
pub(crate) const LIMIT_GRACE: Duration = Duration::from_secs(15);

impl StreamState<'_> {
    fn on_stdout_frame(&mut self, frame: Frame<'_>) {
        match frame {
            Frame::Line(line) => {
                if line.trim().is_empty() {
                    return;
                }
                self.ctx.parser.parse_line(&line, &mut self.events);
                if self.events.is_empty() {
                    return;
                }
            }
            Frame::Shortened { line, len, strings } => {
                // The record of what was cut comes first, then what the line still says.
                self.events.push(AgentEvent::LineShortened {
                    len,
                    kept: line.len() as u64,
                    strings,
                });
                self.ctx.parser.parse_line(&line, &mut self.events);
            }
            Frame::Oversized { len, prefix } => {
                self.events.push(AgentEvent::OversizedLine { len, prefix });
            }
        }
        let mut events = std::mem::take(&mut self.events);
        for event in events.drain(..) {
            self.on_event(event);
        }
        self.events = events;
    }

    fn on_event(&mut self, mut event: AgentEvent) {
        if let AgentEvent::Unparsed { line } = &mut event {
            truncate_utf8(line, UNPARSED_KEEP);
        }
        let attempt = self.ctx.attempt;
        self.ctx.log.record(attempt, &Record::Agent(&event));
        self.ctx.observer.event(attempt, &event);
        // The event is ours now: move its parts instead of copying them.
        match event {
            AgentEvent::SessionStarted { session_id, .. } => self.on_session(session_id),
            AgentEvent::Text { text } => self.result.final_text = Some(text),
            AgentEvent::Usage { usage } => self.usage_from_events.add(&usage),
            AgentEvent::RateLimit { info } => {
                self.on_rate_limit(&info);
                self.result.rate_limits.push(info);
            }
            AgentEvent::RetryNotice {
                status, delay_ms, ..
            } => self.on_cli_retry(status, delay_ms),
            AgentEvent::TerminalResult {
                is_error,
                text,
                api_status,
                usage,
            } => {
                if self.result.terminal.is_none() {
                    self.terminal_seen_at = Some(Instant::now());
                }
                if let Some(text) = &text {
                    self.result.final_text = Some(text.clone());
                }
                self.terminal_usage = usage;
                self.result.terminal = Some(TerminalSummary {
                    is_error,
                    text,
                    api_status,
                });
            }
            AgentEvent::Thinking { .. }
            | AgentEvent::ToolUse { .. }
            | AgentEvent::ToolResult { .. }
            | AgentEvent::LineShortened { .. }
            | AgentEvent::OversizedLine { .. }
            | AgentEvent::Unparsed { .. } => {}
        }
    }

    /// The CLI retries a request on its own after a 429 or 529, waiting `delay_ms` first: the
    /// account is limited for that long, so the gate holds it (parallel runs on it wait instead
    /// of meeting their own 429), the idle watchdog lets the wait pass, the observer is told
    /// until when, and the delay is kept as the retry-after should the attempt still end
    /// rate-limited. Other retries (a 5xx, a timeout) say nothing about the account.
    fn on_cli_retry(&mut self, status: Option<u16>, delay_ms: Option<u64>) {
        let (Some(status @ (429 | 529)), Some(delay_ms)) = (status, delay_ms) else {
            return;
        };
        let delay = Duration::from_millis(delay_ms);
        self.result.cli_retry_after_ms = Some(delay_ms);
        self.quiet_until = Some(Instant::now() + delay);
        // The CLI waits for the limit itself (Claude Code with `CLAUDE_CODE_RETRY_WATCHDOG`):
        // a rejected rate-limit event before it is that wait, not a silent stop.
        self.limit_deadline = None;
        let until = SystemTime::now() + delay;
        let basis = format!("the CLI's own retry after HTTP {status}");
        self.hold_account(until, &basis);
        self.stop_if_long(delay, &basis);
        self.ctx
            .observer
            .cli_retry_wait(self.ctx.attempt, self.ctx.provider, status, until);
    }

    /// A rejected rate limit with a reset, as the CLI reports it: the account is held until the
    /// reset at once (not when the attempt ends), the idle watchdog lets the wait pass, the
    /// observer is told until when, and unless the CLI says it waits for the reset itself within
    /// [`LIMIT_GRACE`], the spawn is ended then (the run waits and resumes the session).
    fn on_rate_limit(&mut self, info: &RateLimitInfo) {
        if !info.rejected {
            return;
        }
        let now = SystemTime::now();
        let until = match (info.resets_at_epoch_s, info.retry_after_ms) {
            (Some(reset), _) => std::time::UNIX_EPOCH + Duration::from_secs(reset),
            (None, Some(ms)) => now + Duration::from_millis(ms),
            (None, None) => return,
        };
        let Ok(wait) = until.duration_since(now) else {
            return;
        };
        self.quiet_until = Some(Instant::now() + wait);
        let basis = "the CLI's rate-limit event";
        self.hold_account(until, basis);
        if !self.stop_if_long(wait, basis) {
            self.limit_deadline = Some(Instant::now() + LIMIT_GRACE);
        }
        self.ctx
            .observer
            .cli_retry_wait(self.ctx.attempt, self.ctx.provider, 429, until);
    }

    /// A long limit with auto-resume off, or one past the hand-over wait, ends the spawn now:
    /// the run stops, naming the session to resume. True when it does.
    fn stop_if_long(&mut self, wait: Duration, basis: &str) -> bool {
        if !self.ctx.config.retry.stops_at(wait) {
            return false;
        }
        tracing::info!(
            wait_s = wait.as_secs(),
            basis,
            why = self.ctx.config.retry.stop_reason(wait),
            "a long rate limit: the spawn is ended instead of waiting"
        );
        self.limit_deadline = Some(Instant::now());
        true
    }

    /// Tells the gate that the account is limited until `until`. A gate that cannot be written
    /// costs the other runs their own 429s; this run goes on.
    fn hold_account(&mut self, until: SystemTime, basis: &str) {
        let Some(account) = self.ctx.account else {
            return;
        };
        let until_epoch_ms = gate::epoch_ms(until);
        let hold = Hold {
            until_epoch_ms,
            basis: basis.to_string(),
            set_by: self.ctx.run_token.to_string(),
        };
        match account.record_hold(&hold) {
            Ok(()) => self.ctx.log.record(
                self.ctx.attempt,
                &Record::RateLimitHold {
                    until_epoch_ms,
                    basis,
                },
            ),
            Err(e) => {
                tracing::warn!(error = %e, "could not record the rate-limit hold for the account");
            }
        }
    }

    /// Persists a newly seen session id at once, while the child still runs.
    fn on_session(&mut self, id: SessionId) {
        self.result.session_id = Some(id.clone());
        if self.ctx.persisted.as_ref() == Some(&id) {
            return;
        }
        let meta = (self.ctx.session_meta)(&id);
        match persist_session(self.ctx.output_dir, &meta) {
            Ok(path) => {
                self.ctx.log.record(
                    self.ctx.attempt,
                    &Record::SessionPersisted {
                        session_id: &id,
                        path: &path,
                    },
                );
                // A killed supervisor must leave the id behind: flush now.
                self.ctx.log.flush();
            }
            Err(e) => {
                tracing::error!(error = %e, "cannot persist session id");
            }
        }
        *self.ctx.persisted = Some(id);
    }
}

pub(crate) fn truncate_utf8(s: &mut String, max: usize) {
    if s.len() > max {
        let mut cut = max;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
        s.push('…');
    }
}

async fn read_opt(stream: &mut Option<ChildOutput>, buf: &mut BytesMut) -> io::Result<usize> {
    match stream {
        Some(s) => s.read_buf(buf).await,
        None => std::future::pending().await,
    }
}

async fn recv_note(notes: &mut Option<UnboundedReceiver<EgressNote>>) -> Option<EgressNote> {
    match notes {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

async fn changed_opt(files: &mut Option<FileCapture>) -> (bool, bool) {
    match files {
        Some(f) => f.follower.changed().await,
        None => std::future::pending().await,
    }
}

/// The wait before the next look at a group whose leader exited: [`GROUP_POLL_FIRST`] doubled
/// per look already made (`polls`), at most [`GROUP_POLL_MAX`].
fn group_poll_delay(polls: u32) -> Duration {
    // 2^5 ms is past the maximum already: no need to shift further.
    (GROUP_POLL_FIRST * (1u32 << polls.min(5))).min(GROUP_POLL_MAX)
}

async fn sleep_opt(deadline: Option<Instant>) {
    match deadline {
        Some(d) => sleep_until(d.into()).await,
        None => std::future::pending().await,
    }
}

fn spawn_stdin_writer(
    child: &mut dyn SpawnedChild,
    prompt: Option<Arc<str>>,
) -> Option<JoinHandle<(usize, Option<String>)>> {
    let prompt = prompt?;
    let Some(mut stdin) = child.take_stdin() else {
        // Handed over whole as the file on its stdin (`StdinMode::Prompt`) before it started.
        let bytes = prompt.len();
        return Some(tokio::spawn(async move { (bytes, None) }));
    };
    Some(tokio::spawn(async move {
        let bytes = prompt.len();
        let result = async {
            stdin.write_all(prompt.as_bytes()).await?;
            stdin.shutdown().await
        }
        .await;
        // Dropping the handle closes the pipe: the CLI sees end of file.
        drop(stdin);
        match result {
            Ok(()) => (bytes, None),
            Err(e) => (bytes, Some(e.to_string())),
        }
    }))
}

/// Runs one spawned child to its end. `prompt` is written to stdin when given.
pub(crate) async fn supervise(
    mut child: Box<dyn SpawnedChild>,
    prompt: Option<Arc<str>>,
    ctx: AttemptContext<'_>,
) -> AttemptResult {
    let stdin_task = spawn_stdin_writer(child.as_mut(), prompt);
    let mut attempt = Supervision::new(child, ctx);
    attempt.announce_minted_session();
    attempt.watch().await;
    attempt.drain_egress_notes();
    attempt.close_pipes();
    attempt.end_group().await;
    let escaped = attempt.sweep().await;
    // Whatever the group and the swept processes wrote until they died is on disk now.
    attempt.read_files_to_end();
    attempt.record_stdin(stdin_task).await;
    attempt.into_result(escaped)
}

/// One output pipe of the child and what is made of it.
struct Pipe {
    /// `None` once it reached end of file.
    reader: Option<ChildOutput>,
    buf: BytesMut,
    framer: LineFramer,
    tail: Tail,
}

impl Pipe {
    fn new(reader: Option<ChildOutput>, max_line: usize, tail: usize) -> Self {
        Pipe {
            reader,
            buf: BytesMut::with_capacity(READ_CHUNK),
            framer: LineFramer::new(max_line),
            tail: Tail::new(tail),
        }
    }
}

/// The stream files being followed, when the child writes files.
struct FileCapture {
    follower: Follower,
    buf: Vec<u8>,
    /// The leader exited and no process of its group is left: nothing more will be written but
    /// by processes that escaped the group (read after the sweep).
    group_gone: bool,
    /// How many times the group was looked at after its leader exited.
    group_polls: u32,
    /// Whether the last read of each stream found nothing new.
    at_end: [bool; 2],
}

impl FileCapture {
    /// The output is over: the group is gone and both files were read to their end.
    fn finished(&self) -> bool {
        self.group_gone && self.at_end[0] && self.at_end[1]
    }
}

/// The watchdogs' clocks: idle, wall clock, the leftover grace, and the activity sampler of
/// CLIs that print nothing until the end.
struct Watchdogs {
    /// The idle limit that applies (the settings', or the adapter's minimum).
    idle: Duration,
    last_activity: Instant,
    idle_deadline: Instant,
    wall_deadline: Option<Instant>,
    leftover_deadline: Option<Instant>,
    /// How often the group's activity is sampled, with [`Liveness::ProcessActivity`].
    sample_every: Option<Duration>,
    last_sample: Option<u64>,
}

impl Watchdogs {
    fn new(config: &EngineConfig, liveness: Liveness) -> Self {
        let started = Instant::now();
        let (idle, sample_every) = match liveness {
            Liveness::Output => (config.idle_timeout, None),
            Liveness::ProcessActivity { min_idle } => {
                let idle = config.idle_timeout.max(min_idle);
                let every = (idle / 10).clamp(Duration::from_millis(100), Duration::from_secs(10));
                (idle, Some(every))
            }
        };
        Watchdogs {
            idle,
            last_activity: started,
            idle_deadline: started + idle,
            wall_deadline: config.wall_timeout.map(|w| started + w),
            leftover_deadline: None,
            sample_every,
            last_sample: None,
        }
    }

    fn activity(&mut self) {
        self.last_activity = Instant::now();
    }
}

/// The kill in progress: why, and how far its ladder got.
struct Kill {
    reason: KillReason,
    ladder: KillLadder,
}

/// One attempt while it runs: the child, its pipes, the watchdogs and the kill in progress.
struct Supervision<'a> {
    child: Box<dyn SpawnedChild>,
    pgid: u32,
    config: &'a EngineConfig,
    stream: StreamState<'a>,
    stdout: Pipe,
    stderr: Pipe,
    /// The stream files, instead of pipes.
    files: Option<FileCapture>,
    /// Stderr bytes written to the log so far, against the budget.
    stderr_logged: usize,
    watch: Watchdogs,
    kill: Option<Kill>,
    exit: Option<ExitInfo>,
    /// The leader was waited for (its exit status is in `exit`, unless the wait failed).
    leader_done: bool,
}

impl<'a> Supervision<'a> {
    fn new(mut child: Box<dyn SpawnedChild>, mut ctx: AttemptContext<'a>) -> Self {
        let config = ctx.config;
        let files = ctx.follower.take().map(|follower| FileCapture {
            follower,
            buf: vec![0; FILE_READ_CHUNK],
            group_gone: false,
            group_polls: 0,
            at_end: [false; 2],
        });
        let stdout = Pipe::new(
            child.take_stdout(),
            config.max_line_bytes,
            config.stdout_scan_bytes,
        );
        let stderr = Pipe::new(
            child.take_stderr(),
            STDERR_MAX_LINE,
            config.stderr_tail_bytes,
        );
        let watch = Watchdogs::new(config, ctx.liveness);
        Supervision {
            pgid: child.pid(),
            child,
            config,
            stream: StreamState {
                ctx,
                events: Vec::with_capacity(8),
                result: AttemptResult::default(),
                usage_from_events: Usage::default(),
                terminal_usage: None,
                terminal_seen_at: None,
                quiet_until: None,
                limit_deadline: None,
            },
            stdout,
            stderr,
            files,
            stderr_logged: 0,
            watch,
            kill: None,
            exit: None,
            leader_done: false,
        }
    }

    fn attempt(&self) -> u32 {
        self.stream.ctx.attempt
    }

    fn log(&mut self) -> &mut ExecutionLog {
        &mut *self.stream.ctx.log
    }

    /// A session id minted by Corral and passed to the CLI is on disk before the CLI prints
    /// anything.
    fn announce_minted_session(&mut self) {
        if let Some(session_id) = self.stream.ctx.minted_session.take() {
            self.stream.on_event(AgentEvent::SessionStarted {
                session_id,
                model: None,
            });
        }
    }

    /// The select loop: reads both pipes, waits for the leader, and runs every timer until the
    /// leader has exited and its pipes are closed (or its group is dead).
    async fn watch(&mut self) {
        let cancel = self.stream.ctx.cancel.clone();
        let config = self.config;
        let mut flush_tick = ticker(FLUSH_EVERY);
        let sampling = self.watch.sample_every.is_some();
        let mut activity_tick =
            ticker(self.watch.sample_every.unwrap_or(Duration::from_secs(3600)));
        loop {
            let output_open = self.output_open();
            let group_dead = self.kill.as_ref().is_some_and(|k| k.ladder.group_dead());
            if self.leader_done && (!output_open || group_dead) {
                return;
            }
            let following = self.files.as_ref().is_some_and(|f| !f.finished());
            let awaiting_group =
                self.leader_done && self.files.as_ref().is_some_and(|f| !f.group_gone);
            let group_poll =
                group_poll_delay(self.files.as_ref().map_or(u32::MAX, |f| f.group_polls));
            let killing = self.kill.is_some();
            let post_terminal = self
                .stream
                .terminal_seen_at
                .map(|t| t + config.post_terminal_grace);
            let idle_deadline = self.watch.idle_deadline;
            // A CLI that ended or printed its result after a limit is not ended for it.
            let limit = self
                .stream
                .limit_deadline
                .filter(|_| !self.leader_done && self.stream.terminal_seen_at.is_none());
            let wall = self.watch.wall_deadline;
            let leftover = self.watch.leftover_deadline;
            tokio::select! {
                biased;
                () = cancel.cancelled(), if !killing => self.start_kill(KillReason::Cancelled, None),
                read = read_opt(&mut self.stdout.reader, &mut self.stdout.buf) => self.on_stdout(read),
                read = read_opt(&mut self.stderr.reader, &mut self.stderr.buf) => self.on_stderr(read),
                changed = changed_opt(&mut self.files), if following => self.on_files(changed, FILE_READ_BUDGET),
                status = self.child.wait(), if !self.leader_done => self.on_exit(status),
                () = sleep_until(idle_deadline.into()), if !killing => self.on_idle_deadline(),
                () = sleep_opt(wall), if !killing && wall.is_some() => {
                    self.start_kill(KillReason::WallTimeout, config.wall_timeout);
                }
                () = sleep_opt(post_terminal), if !killing && post_terminal.is_some() && !self.leader_done => {
                    self.start_kill(KillReason::LingeredAfterResult, Some(config.post_terminal_grace));
                }
                () = sleep_opt(limit), if !killing && limit.is_some() => {
                    self.start_kill(KillReason::RateLimited, Some(LIMIT_GRACE));
                }
                () = sleep_opt(leftover), if !killing && leftover.is_some() => {
                    self.start_kill(KillReason::LeftoversAfterExit, Some(config.leftover_grace));
                }
                () = tokio::time::sleep(KILL_POLL), if killing && !group_dead => self.poll_kill(),
                note = recv_note(&mut self.stream.ctx.egress_notes) => self.on_egress_note(note),
                () = tokio::time::sleep(group_poll), if awaiting_group && !killing => self.poll_group(),
                _ = flush_tick.tick() => self.log().flush_if_due(),
                _ = activity_tick.tick(), if sampling && !killing => self.sample_activity(),
            }
        }
    }

    /// Records what the egress proxy refused or could not reach, as it happens.
    fn on_egress_note(&mut self, note: Option<EgressNote>) {
        let attempt = self.attempt();
        match note {
            Some(note) => {
                self.stream.result.egress_refused.note(&note);
                self.log().record(attempt, &Record::egress(&note));
                self.log().flush_if_due();
            }
            None => self.stream.ctx.egress_notes = None,
        }
    }

    /// The notes that arrived after the select loop ended.
    fn drain_egress_notes(&mut self) {
        let attempt = self.attempt();
        let ctx = &mut self.stream.ctx;
        if let Some(notes) = ctx.egress_notes.as_mut() {
            while let Ok(note) = notes.try_recv() {
                self.stream.result.egress_refused.note(&note);
                ctx.log.record(attempt, &Record::egress(&note));
            }
        }
    }

    fn on_stdout(&mut self, read: io::Result<usize>) {
        match read {
            Ok(0) => self.close_stdout(),
            Ok(_) => {
                self.watch.activity();
                let Supervision { stdout, stream, .. } = self;
                feed_stdout(stdout, stream, None);
                stdout.buf.clear();
                self.log().flush_if_due();
            }
            Err(e) => {
                self.read_failed("stdout", &e);
                self.close_stdout();
            }
        }
    }

    fn close_stdout(&mut self) {
        let Supervision { stdout, stream, .. } = self;
        stdout.framer.finish(|f| stream.on_stdout_frame(f));
        stdout.reader = None;
    }

    fn on_stderr(&mut self, read: io::Result<usize>) {
        match read {
            Ok(0) => self.close_stderr(),
            Ok(_) => {
                self.watch.activity();
                let Supervision {
                    stderr,
                    stream,
                    stderr_logged,
                    ..
                } = self;
                feed_stderr(stderr, stream, stderr_logged, None);
                stderr.buf.clear();
                self.log().flush_if_due();
            }
            Err(e) => {
                self.read_failed("stderr", &e);
                self.close_stderr();
            }
        }
    }

    fn close_stderr(&mut self) {
        let Supervision {
            stderr,
            stream,
            stderr_logged,
            ..
        } = self;
        stderr
            .framer
            .finish(|f| log_stderr(stream, f, stderr_logged));
        stderr.reader = None;
    }

    /// Whether output may still come: a pipe is open, or the stream files are still followed.
    fn output_open(&self) -> bool {
        match &self.files {
            Some(files) => !files.finished(),
            None => self.stdout.reader.is_some() || self.stderr.reader.is_some(),
        }
    }

    /// Reads what was appended to the stream files flagged in `changed`, up to `budget` bytes of
    /// each (a stream with more is read again on the next turn of the loop).
    fn on_files(&mut self, changed: (bool, bool), budget: usize) {
        let Supervision {
            files,
            stdout,
            stderr,
            stream,
            stderr_logged,
            watch,
            ..
        } = self;
        let Some(files) = files.as_mut() else {
            return;
        };
        let mut failed: Option<(&'static str, io::Error)> = None;
        for (which, flagged) in [(Stream::Stdout, changed.0), (Stream::Stderr, changed.1)] {
            if !flagged {
                continue;
            }
            let index = match which {
                Stream::Stdout => 0,
                Stream::Stderr => 1,
            };
            let mut read = 0;
            loop {
                if read >= budget {
                    files.follower.again(which);
                    break;
                }
                let n = match files.follower.read(which, &mut files.buf) {
                    Ok(n) => n,
                    Err(e) => {
                        // Counted as the end of that stream; the log says why.
                        files.at_end[index] = true;
                        failed = Some((stream_name(which), e));
                        break;
                    }
                };
                if n == 0 {
                    files.at_end[index] = true;
                    break;
                }
                files.at_end[index] = false;
                read += n;
                watch.activity();
                let bytes = &files.buf[..n];
                match which {
                    Stream::Stdout => feed_stdout(stdout, stream, Some(bytes)),
                    Stream::Stderr => feed_stderr(stderr, stream, stderr_logged, Some(bytes)),
                }
            }
        }
        if let Some((name, e)) = failed {
            self.read_failed(name, &e);
        }
        self.log().flush_if_due();
    }

    /// After the leader exited: is the rest of its group gone too? Then the files are read to
    /// their end and the output is over.
    fn poll_group(&mut self) {
        if process_group::group_alive(self.pgid) {
            if let Some(files) = self.files.as_mut() {
                files.group_polls = files.group_polls.saturating_add(1);
            }
            return;
        }
        if let Some(files) = self.files.as_mut() {
            files.group_gone = true;
            files.at_end = [false; 2];
            files.follower.drain();
        }
    }

    /// Reads both stream files to their end and ends their lines; then what `close_pipes` does
    /// for pipes: a partial last stderr line, and how much stderr the budget left out.
    fn read_files_to_end(&mut self) {
        if self.files.is_none() {
            return;
        }
        loop {
            self.on_files((true, true), usize::MAX);
            let done = self
                .files
                .as_ref()
                .is_none_or(|f| f.at_end[0] && f.at_end[1]);
            if done {
                break;
            }
        }
        self.close_stdout();
        self.close_stderr();
        self.record_stderr_truncation();
    }

    /// A pipe that cannot be read counts as closed, and the log says why.
    fn read_failed(&mut self, stream: &'static str, e: &io::Error) {
        tracing::warn!(stream, error = %e, "cannot read the CLI's output");
        let attempt = self.attempt();
        self.log().record(
            attempt,
            &Record::ReadFailed {
                stream,
                error: e.to_string(),
            },
        );
    }

    fn on_exit(&mut self, status: io::Result<ExitInfo>) {
        let attempt = self.attempt();
        match status {
            Ok(info) => {
                self.log().record(
                    attempt,
                    &Record::Exit {
                        code: info.code,
                        signal: info.signal,
                    },
                );
                self.exit = Some(info);
            }
            Err(e) => {
                // No exit status is known; the group still goes down the ladder after the loop.
                tracing::warn!(error = %e, "cannot wait for the CLI");
                self.log().record(
                    attempt,
                    &Record::WaitFailed {
                        error: e.to_string(),
                    },
                );
            }
        }
        self.leader_done = true;
        if self.files.is_some() {
            self.poll_group();
        }
        if self.kill.is_none() && self.output_open() {
            self.watch.leftover_deadline = Some(Instant::now() + self.config.leftover_grace);
        }
    }

    fn on_idle_deadline(&mut self) {
        // The CLI said it waits before its own retry: silence until then is that wait, and the
        // idle time counts from its end.
        let since = self
            .stream
            .quiet_until
            .map_or(self.watch.last_activity, |q| {
                q.max(self.watch.last_activity)
            });
        if since.elapsed() >= self.watch.idle {
            self.start_kill(KillReason::IdleTimeout, Some(self.watch.idle));
        } else {
            self.watch.idle_deadline = since + self.watch.idle;
        }
    }

    fn sample_activity(&mut self) {
        let sample = proc::group_activity(self.pgid);
        if self.watch.last_sample.is_some_and(|last| last != sample) {
            self.watch.activity();
        }
        self.watch.last_sample = Some(sample);
    }

    /// Starts the kill ladder: the record of why, then SIGTERM to the group.
    fn start_kill(&mut self, reason: KillReason, limit: Option<Duration>) {
        let ladder = self.begin_ladder(reason, limit);
        self.log().flush();
        self.kill = Some(Kill { reason, ladder });
    }

    fn begin_ladder(&mut self, reason: KillReason, limit: Option<Duration>) -> KillLadder {
        let attempt = self.attempt();
        self.log().record(
            attempt,
            &Record::KillStarted {
                reason,
                limit_ms: limit.map(|d| d.as_millis() as u64),
            },
        );
        let (ladder, sent) = KillLadder::start(self.pgid, self.config.kill_grace);
        record_sent(self.log(), attempt, sent);
        ladder
    }

    fn poll_kill(&mut self) {
        let attempt = self.attempt();
        if let Some(sent) = self.kill.as_mut().and_then(|k| k.ladder.poll()) {
            record_sent(&mut *self.stream.ctx.log, attempt, sent);
        }
    }

    /// Drops the pipes (escaped processes that still hold them see EPIPE), logs a partial last
    /// stderr line and how much stderr the budget left out.
    fn close_pipes(&mut self) {
        if self.files.is_some() {
            // The files are read to their end after the sweep, see `read_files_to_end`.
            return;
        }
        self.stdout.reader = None;
        self.stderr.reader = None;
        if self.stderr.framer.has_partial() {
            self.close_stderr();
        }
        self.record_stderr_truncation();
    }

    fn record_stderr_truncation(&mut self) {
        let total = self.stderr.tail.total_bytes();
        let logged = self.stderr_logged as u64;
        if total > logged {
            let attempt = self.attempt();
            self.log().record(
                attempt,
                &Record::StderrTruncated {
                    bytes_not_logged: total - logged,
                    total_bytes: total,
                },
            );
        }
    }

    /// The leader is gone; makes sure its group is too (background processes it left behind),
    /// down the same ladder.
    async fn end_group(&mut self) {
        let dead = self.kill.as_ref().is_some_and(|k| k.ladder.group_dead());
        if dead || !process_group::group_alive(self.pgid) {
            return;
        }
        let reason = self
            .kill
            .as_ref()
            .map_or(KillReason::LeftoversAfterExit, |k| k.reason);
        let attempt = self.attempt();
        terminate_group(
            self.pgid,
            self.config.kill_grace,
            self.log(),
            attempt,
            reason,
        )
        .await;
    }

    /// Kills what left the group but carries this attempt's run token.
    async fn sweep(&mut self) -> Vec<u32> {
        let attempt = self.attempt();
        let token = self.stream.ctx.run_token;
        sweep_logged(token, self.pgid, &mut *self.stream.ctx.log, attempt).await
    }

    /// Records how the prompt writer ended; a CLI that never read its stdin is said so.
    async fn record_stdin(&mut self, task: Option<JoinHandle<(usize, Option<String>)>>) {
        let Some(task) = task else {
            return;
        };
        let attempt = self.attempt();
        if task.is_finished() {
            if let Ok((bytes, error)) = task.await {
                self.log()
                    .record(attempt, &Record::StdinClosed { bytes, error });
            }
        } else {
            task.abort();
            self.log().record(
                attempt,
                &Record::StdinClosed {
                    bytes: 0,
                    error: Some("the CLI never read its stdin".into()),
                },
            );
        }
    }

    fn into_result(mut self, escaped: Vec<u32>) -> AttemptResult {
        self.log().flush();
        let mut result = std::mem::take(&mut self.stream.result);
        result.usage = self
            .stream
            .terminal_usage
            .unwrap_or(self.stream.usage_from_events)
            // A CLI's own figures are kept only when plausible (no negative or infinite cost).
            .sanitized();
        result.exit = self.exit;
        result.killed_by = self.kill.map(|k| k.reason);
        result.stderr_tail = self.stderr.tail.text();
        result.stdout_tail = self.stdout.tail.text();
        result.escaped_killed = escaped;
        result.idle_limit = self.watch.idle;
        result
    }
}

fn ticker(every: Duration) -> Interval {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    tick
}

/// Ends group `pgid` outside a read loop, down the kill ladder, with every step in the log.
pub(crate) async fn terminate_group(
    pgid: u32,
    grace: Duration,
    log: &mut ExecutionLog,
    attempt: u32,
    reason: KillReason,
) {
    log.record(
        attempt,
        &Record::KillStarted {
            reason,
            limit_ms: None,
        },
    );
    let (mut ladder, sent) = KillLadder::start(pgid, grace);
    record_sent(log, attempt, sent);
    ladder
        .run_to_end(|sent| record_sent(log, attempt, sent))
        .await;
}

/// Kills the processes that left group `pgid` but carry `token`, with every signal in the log.
pub(crate) async fn sweep_logged(
    token: &str,
    pgid: u32,
    log: &mut ExecutionLog,
    attempt: u32,
) -> Vec<u32> {
    process_group::sweep_escaped(token, pgid, |sent| record_sent(log, attempt, sent)).await
}

fn record_sent(log: &mut ExecutionLog, attempt: u32, sent: Sent) {
    log.record(
        attempt,
        &Record::Signal {
            signal: sent.signal.as_str(),
            target: sent.target.as_str(),
            id: sent.id,
            delivered: sent.delivered,
        },
    );
}

fn stream_name(stream: Stream) -> &'static str {
    match stream {
        Stream::Stdout => "stdout",
        Stream::Stderr => "stderr",
    }
}

/// Frames stdout bytes (`bytes`, or the pipe's buffer) into events.
fn feed_stdout(pipe: &mut Pipe, stream: &mut StreamState<'_>, bytes: Option<&[u8]>) {
    let bytes = bytes.unwrap_or(&pipe.buf);
    pipe.tail.push(bytes);
    pipe.framer.push(bytes, |f| stream.on_stdout_frame(f));
}

/// Frames stderr bytes (`bytes`, or the pipe's buffer) into log lines, within the budget.
fn feed_stderr(
    pipe: &mut Pipe,
    stream: &mut StreamState<'_>,
    logged: &mut usize,
    bytes: Option<&[u8]>,
) {
    let bytes = bytes.unwrap_or(&pipe.buf);
    pipe.tail.push(bytes);
    pipe.framer.push(bytes, |f| log_stderr(stream, f, logged));
}

fn log_stderr(state: &mut StreamState<'_>, frame: Frame<'_>, logged: &mut usize) {
    let budget = state.ctx.config.stderr_log_budget;
    if *logged >= budget {
        return;
    }
    match frame {
        Frame::Line(line) | Frame::Shortened { line, .. } => {
            *logged += line.len() + 1;
            state
                .ctx
                .log
                .record(state.ctx.attempt, &Record::Stderr { line: &line });
        }
        Frame::Oversized { len, prefix } => {
            *logged += prefix.len();
            let line = format!("{prefix}… ({len} bytes)");
            state
                .ctx
                .log
                .record(state.ctx.attempt, &Record::Stderr { line: &line });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_group_is_looked_at_soon_after_its_leader_exits_then_less_often() {
        let delays: Vec<u128> = (0..8).map(|n| group_poll_delay(n).as_millis()).collect();
        assert_eq!(delays, [1, 2, 4, 8, 16, 20, 20, 20]);
        assert_eq!(group_poll_delay(u32::MAX), GROUP_POLL_MAX);
    }
}
