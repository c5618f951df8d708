//! One attempt: start the CLI, feed it the prompt, read its output, watch it, and end its whole
//! process tree, whatever happens.
//!
//! The loop owns every timer: the idle watchdog (reset by any stdout or stderr byte), the
//! optional wall-clock limit, the grace after the terminal event, the grace for a group whose
//! leader exited but whose pipes stay open, and the kill ladder (SIGTERM to the group, then
//! SIGKILL when the group is still alive after the grace). Output keeps being drained while the
//! group dies, so a child that flushes on SIGTERM is never blocked on a full pipe.

use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use corral_ports::{AgentEvent, RateLimitInfo, RunObserver, SessionId, Usage};
use nix::sys::signal::Signal;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::task::JoinHandle;
use tokio::time::{MissedTickBehavior, sleep_until};
use tokio_util::sync::CancellationToken;

use crate::adapter::{Liveness, StreamParser, TerminalSummary};
use crate::config::EngineConfig;
use crate::files::{SessionMeta, persist_session};
use crate::framing::{Frame, LineFramer};
use crate::log::{ExecutionLog, KillReason, Record};
use crate::proc;
use crate::spawn::{ChildOutput, ExitInfo, SpawnedChild};
use crate::tail::Tail;

const READ_CHUNK: usize = 64 * 1024;
const STDERR_MAX_LINE: usize = 64 * 1024;
const KILL_POLL: Duration = Duration::from_millis(2);
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
}

struct KillState {
    reason: KillReason,
    sigkill_at: Instant,
    sigkill_sent: bool,
    group_dead: bool,
}

/// Everything that turns bytes into events and records them.
struct StreamState<'a, 'b> {
    ctx: &'b mut AttemptContext<'a>,
    events: Vec<AgentEvent>,
    result: AttemptResult,
    usage_from_events: Usage,
    terminal_usage: Option<Usage>,
    terminal_seen_at: Option<Instant>,
}

impl StreamState<'_, '_> {
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
            AgentEvent::RateLimit { info } => self.result.rate_limits.push(info),
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
            | AgentEvent::RetryNotice { .. }
            | AgentEvent::OversizedLine { .. }
            | AgentEvent::Unparsed { .. } => {}
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

fn truncate_utf8(s: &mut String, max: usize) {
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
    let mut stdin = child.take_stdin()?;
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
    mut ctx: AttemptContext<'_>,
) -> AttemptResult {
    let config = ctx.config;
    let attempt = ctx.attempt;
    let pgid = child.pid();
    let started = Instant::now();
    let cancel = ctx.cancel.clone();

    let mut stdin_task = spawn_stdin_writer(child.as_mut(), prompt);
    let mut stdout = child.take_stdout();
    let mut stderr = child.take_stderr();
    let mut out_buf = BytesMut::with_capacity(READ_CHUNK);
    let mut err_buf = BytesMut::with_capacity(READ_CHUNK);
    let mut out_framer = LineFramer::new(config.max_line_bytes);
    let mut err_framer = LineFramer::new(STDERR_MAX_LINE);
    let mut stdout_tail = Tail::new(config.stdout_scan_bytes);
    let mut stderr_tail = Tail::new(config.stderr_tail_bytes);
    let mut stderr_logged: usize = 0;

    let mut last_activity = started;
    let (idle, sample_every) = match ctx.liveness {
        Liveness::Output => (config.idle_timeout, None),
        Liveness::ProcessActivity { min_idle } => {
            let idle = config.idle_timeout.max(min_idle);
            let every = (idle / 10).clamp(Duration::from_millis(100), Duration::from_secs(10));
            (idle, Some(every))
        }
    };
    let mut idle_deadline = started + idle;
    let mut activity_tick =
        tokio::time::interval(sample_every.unwrap_or(Duration::from_secs(3600)));
    activity_tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut last_sample: Option<u64> = None;
    let minted = ctx.minted_session.take();
    let wall_deadline = config.wall_timeout.map(|w| started + w);
    let mut leftover_deadline: Option<Instant> = None;
    let mut kill: Option<KillState> = None;
    let mut exit: Option<ExitInfo> = None;
    let mut flush_tick = tokio::time::interval(Duration::from_millis(100));
    flush_tick.set_missed_tick_behavior(MissedTickBehavior::Delay);

    let mut state = StreamState {
        ctx: &mut ctx,
        events: Vec::with_capacity(8),
        result: AttemptResult::default(),
        usage_from_events: Usage::default(),
        terminal_usage: None,
        terminal_seen_at: None,
    };
    if let Some(session_id) = minted {
        // Minted by Corral and passed to the CLI: on disk before the CLI prints anything.
        state.on_event(AgentEvent::SessionStarted {
            session_id,
            model: None,
        });
    }

    macro_rules! start_kill {
        ($reason:expr, $limit:expr) => {{
            let reason: KillReason = $reason;
            let limit: Option<Duration> = $limit;
            state.ctx.log.record(
                attempt,
                &Record::KillStarted {
                    reason,
                    limit_ms: limit.map(|d| d.as_millis() as u64),
                },
            );
            let delivered = child.signal_group(Signal::SIGTERM).unwrap_or(false);
            state.ctx.log.record(
                attempt,
                &Record::Signal {
                    signal: "SIGTERM",
                    target: "group",
                    id: pgid,
                    delivered,
                },
            );
            state.ctx.log.flush();
            kill = Some(KillState {
                reason,
                sigkill_at: Instant::now() + config.kill_grace,
                sigkill_sent: false,
                group_dead: !delivered,
            });
        }};
    }

    loop {
        let pipes_open = stdout.is_some() || stderr.is_some();
        let group_dead = kill.as_ref().is_some_and(|k| k.group_dead);
        if exit.is_some() && (!pipes_open || group_dead) {
            break;
        }
        let post_terminal_deadline = state
            .terminal_seen_at
            .map(|t| t + config.post_terminal_grace);
        let killing = kill.is_some();

        tokio::select! {
            biased;
            () = cancel.cancelled(), if !killing => {
                start_kill!(KillReason::Cancelled, None);
            }
            read = read_opt(&mut stdout, &mut out_buf) => match read {
                Ok(0) | Err(_) => {
                    out_framer.finish(|f| state.on_stdout_frame(f));
                    stdout = None;
                }
                Ok(_) => {
                    last_activity = Instant::now();
                    stdout_tail.push(&out_buf);
                    out_framer.push(&out_buf, |f| state.on_stdout_frame(f));
                    out_buf.clear();
                    state.ctx.log.flush_if_due();
                }
            },
            read = read_opt(&mut stderr, &mut err_buf) => match read {
                Ok(0) | Err(_) => {
                    err_framer.finish(|f| log_stderr(&mut state, f, &mut stderr_logged));
                    stderr = None;
                }
                Ok(_) => {
                    last_activity = Instant::now();
                    stderr_tail.push(&err_buf);
                    err_framer.push(&err_buf, |f| log_stderr(&mut state, f, &mut stderr_logged));
                    err_buf.clear();
                }
            },
            status = child.wait(), if exit.is_none() => {
                let info = status.unwrap_or_default();
                state.ctx.log.record(attempt, &Record::Exit { code: info.code, signal: info.signal });
                exit = Some(info);
                if kill.is_none() && (stdout.is_some() || stderr.is_some()) {
                    leftover_deadline = Some(Instant::now() + config.leftover_grace);
                }
            }
            () = sleep_until(idle_deadline.into()), if !killing => {
                let silent_for = last_activity.elapsed();
                if silent_for >= idle {
                    start_kill!(KillReason::IdleTimeout, Some(idle));
                } else {
                    idle_deadline = last_activity + idle;
                }
            }
            () = sleep_opt(wall_deadline), if !killing && wall_deadline.is_some() => {
                start_kill!(KillReason::WallTimeout, config.wall_timeout);
            }
            () = sleep_opt(post_terminal_deadline), if !killing && post_terminal_deadline.is_some() && exit.is_none() => {
                start_kill!(KillReason::LingeredAfterResult, Some(config.post_terminal_grace));
            }
            () = sleep_opt(leftover_deadline), if !killing && leftover_deadline.is_some() => {
                start_kill!(KillReason::LeftoversAfterExit, Some(config.leftover_grace));
            }
            () = tokio::time::sleep(KILL_POLL), if killing && !group_dead => {
                if let Some(k) = kill.as_mut() {
                    if !child.group_alive() {
                        k.group_dead = true;
                    } else if !k.sigkill_sent && Instant::now() >= k.sigkill_at {
                        let delivered = child.signal_group(Signal::SIGKILL).unwrap_or(false);
                        k.sigkill_sent = true;
                        state.ctx.log.record(
                            attempt,
                            &Record::Signal { signal: "SIGKILL", target: "group", id: pgid, delivered },
                        );
                    }
                }
            }
            _ = flush_tick.tick() => {
                state.ctx.log.flush_if_due();
            }
            _ = activity_tick.tick(), if sample_every.is_some() && !killing => {
                let sample = proc::group_activity(pgid);
                if last_sample.is_some_and(|last| last != sample) {
                    last_activity = Instant::now();
                }
                last_sample = Some(sample);
            }
        }
    }

    // Output of escaped processes is no longer read; drop the pipes so they see EPIPE.
    drop(stdout);
    drop(stderr);
    if err_framer.has_partial() {
        err_framer.finish(|f| log_stderr(&mut state, f, &mut stderr_logged));
    }
    let total_stderr = stderr_tail.total_bytes();
    if total_stderr > stderr_logged as u64 {
        state.ctx.log.record(
            attempt,
            &Record::StderrTruncated {
                bytes_not_logged: total_stderr - stderr_logged as u64,
                total_bytes: total_stderr,
            },
        );
    }

    // The leader is gone; make sure its group is too (background processes it left behind).
    if kill.as_ref().is_none_or(|k| !k.group_dead) && child.group_alive() {
        let reason = kill
            .as_ref()
            .map_or(KillReason::LeftoversAfterExit, |k| k.reason);
        terminate_group(
            child.as_ref(),
            config.kill_grace,
            state.ctx.log,
            attempt,
            reason,
        )
        .await;
    }
    let escaped = sweep_escaped(state.ctx.run_token, state.ctx.log, attempt).await;

    if let Some(task) = stdin_task.take() {
        if task.is_finished() {
            if let Ok((bytes, error)) = task.await {
                state
                    .ctx
                    .log
                    .record(attempt, &Record::StdinClosed { bytes, error });
            }
        } else {
            task.abort();
            state.ctx.log.record(
                attempt,
                &Record::StdinClosed {
                    bytes: 0,
                    error: Some("the CLI never read its stdin".into()),
                },
            );
        }
    }

    let mut result = std::mem::take(&mut state.result);
    result.usage = state.terminal_usage.unwrap_or(state.usage_from_events);
    drop(state);
    result.exit = exit;
    result.killed_by = kill.map(|k| k.reason);
    result.stderr_tail = stderr_tail.text();
    result.stdout_tail = stdout_tail.text();
    result.escaped_killed = escaped;
    result.idle_limit = idle;
    ctx.log.flush();
    result
}

fn log_stderr(state: &mut StreamState<'_, '_>, frame: Frame<'_>, logged: &mut usize) {
    let budget = state.ctx.config.stderr_log_budget;
    if *logged >= budget {
        return;
    }
    match frame {
        Frame::Line(line) => {
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

/// The kill ladder outside the read loop: SIGTERM, wait for the group to die, SIGKILL after the
/// grace. Decided by group liveness, never by signalling a reaped pid.
pub(crate) async fn terminate_group(
    child: &dyn SpawnedChild,
    grace: Duration,
    log: &mut ExecutionLog,
    attempt: u32,
    reason: KillReason,
) {
    let pgid = child.pid();
    log.record(
        attempt,
        &Record::KillStarted {
            reason,
            limit_ms: None,
        },
    );
    let delivered = child.signal_group(Signal::SIGTERM).unwrap_or(false);
    log.record(
        attempt,
        &Record::Signal {
            signal: "SIGTERM",
            target: "group",
            id: pgid,
            delivered,
        },
    );
    let deadline = Instant::now() + grace;
    while child.group_alive() && Instant::now() < deadline {
        tokio::time::sleep(KILL_POLL).await;
    }
    if child.group_alive() {
        let delivered = child.signal_group(Signal::SIGKILL).unwrap_or(false);
        log.record(
            attempt,
            &Record::Signal {
                signal: "SIGKILL",
                target: "group",
                id: pgid,
                delivered,
            },
        );
        let deadline = Instant::now() + Duration::from_secs(2);
        while child.group_alive() && Instant::now() < deadline {
            tokio::time::sleep(KILL_POLL).await;
        }
    }
}

/// Kills processes that left the group but still carry this attempt's run token, in rounds:
/// killing an escaped process re-parents its own children to the supervisor, where the next round
/// finds them.
async fn sweep_escaped(token: &str, log: &mut ExecutionLog, attempt: u32) -> Vec<u32> {
    let mut killed = Vec::new();
    for _round in 0..8 {
        let Ok(pids) = proc::escaped_with_token(token) else {
            break;
        };
        if pids.is_empty() {
            break;
        }
        for &pid in &pids {
            let delivered = i32::try_from(pid)
                .ok()
                .map(|p| {
                    nix::sys::signal::kill(nix::unistd::Pid::from_raw(p), Signal::SIGKILL).is_ok()
                })
                .unwrap_or(false);
            log.record(
                attempt,
                &Record::Signal {
                    signal: "SIGKILL",
                    target: "escaped",
                    id: pid,
                    delivered,
                },
            );
        }
        // Give the kernel a moment to finish them, then reap the ones that are our children.
        let deadline = Instant::now() + Duration::from_millis(500);
        while pids.iter().any(|&p| proc::is_live(p)) && Instant::now() < deadline {
            tokio::time::sleep(KILL_POLL).await;
        }
        for &pid in &pids {
            proc::reap(pid);
        }
        killed.extend(pids);
    }
    killed
}
