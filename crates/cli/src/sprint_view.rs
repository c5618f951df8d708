//! How `corral sprint run` shows a sprint as it runs, in three views, each in its own module:
//! [`json`] (`--json`: each [`SprintEvent`] as one JSON line on stdout, the last one,
//! `sprint-finished`, holding the summary), [`plain`] (piped: one line per finished step on
//! stderr, then the summary) and [`live`] (on a terminal: a status line per running task,
//! redrawn below the plain view's lines). [`words`] holds what they say alike.
//!
//! Everything shown goes through `term` as `corral run`'s output does: lines and the status
//! text are made one line with their control characters visible (task titles, reasons,
//! warnings and the agents' activity are text an agent or the sprint file controls), and JSON
//! escapes them. Widths are display widths, times and durations as `display` shows them.

mod json;
mod live;
mod plain;
#[cfg(test)]
mod tests;
mod words;

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use corral_ports::{AgentEvent, ProviderId, RunObserver, SessionId};
use corral_sprint::{EventSink, Role, SprintEvent, TaskId};

pub(crate) use plain::summary_lines;
pub(crate) use words::usage_text;

use crate::render::{Activity, Style, ToolCall, short};
use crate::{display, term};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

#[derive(Debug)]
struct Shared {
    style: Style,
    started: Instant,
    steps: Mutex<plain::Steps>,
    /// The live view's status lines (`Style::Live` only).
    live: Option<live::Live>,
}

impl Shared {
    /// A line of the log: above the status lines on a terminal, on stderr when piped.
    fn log(&self, text: &str) {
        let text = term::one_line(text);
        match self.style {
            Style::Json | Style::Quiet => {}
            Style::Plain => plain::write(self.started.elapsed(), &text, display::terminal_width()),
            Style::Live => {
                if let Some(live) = &self.live {
                    live.println(&text);
                }
            }
        }
    }

    fn redraw(&self) {
        if let Some(live) = &self.live {
            live.redraw();
        }
    }

    fn with_running(&self, task: &TaskId, f: impl FnOnce(&mut live::Running)) {
        if let Some(live) = &self.live {
            live.with_running(task, f);
        }
    }
}

/// Shows a running sprint in one of the styles; an [`EventSink`] for `run_sprint`.
#[derive(Debug, Clone)]
pub struct SprintView {
    shared: Arc<Shared>,
}

impl SprintView {
    /// A view in `style` (live on a terminal, plain when piped, JSON when asked).
    pub fn new(style: Style) -> Self {
        SprintView {
            shared: Arc::new(Shared {
                style,
                started: Instant::now(),
                steps: Mutex::new(plain::Steps::default()),
                live: (style == Style::Live).then(live::Live::new),
            }),
        }
    }

    /// The style.
    pub fn style(&self) -> Style {
        self.shared.style
    }

    /// A line that is not a step (a signal received, say): on stderr in every style.
    pub fn note(&self, text: &str) {
        match self.shared.style {
            Style::Live | Style::Plain => self.shared.log(text),
            Style::Json | Style::Quiet => term::errln!("{}", term::one_line(text)),
        }
    }

    /// Keeps the elapsed times moving on a terminal while the agents are quiet.
    pub fn spawn_ticker(&self) -> Option<tokio::task::JoinHandle<()>> {
        self.shared.live.as_ref()?;
        let shared = Arc::clone(&self.shared);
        Some(tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(500)).await;
                shared.redraw();
            }
        }))
    }

    /// Clears the status lines and writes what is held back, before the summary.
    pub fn finish(&self) {
        if let Some(live) = &self.shared.live {
            live.finish();
        }
        term::flush();
    }
}

impl EventSink for SprintView {
    fn event(&self, event: &SprintEvent) {
        let shared = &self.shared;
        match shared.style {
            Style::Json => json::write(event),
            Style::Plain | Style::Live => {
                let line = lock(&shared.steps).line(event, Instant::now());
                if let Some(line) = line {
                    shared.log(&line);
                }
                if let Some(live) = &shared.live {
                    live.track(event);
                    live.redraw();
                }
            }
            Style::Quiet => {}
        }
    }

    fn observer(&self, task: &TaskId, round: u32, role: Role) -> Arc<dyn RunObserver> {
        Arc::new(SpawnObserver {
            shared: Arc::clone(&self.shared),
            task: task.clone(),
            round,
            role,
        })
    }
}

/// What one spawn's agent does, for its task's status line (and its backoffs, for the log).
struct SpawnObserver {
    shared: Arc<Shared>,
    task: TaskId,
    round: u32,
    role: Role,
}

impl SpawnObserver {
    /// The agent waits on purpose from now on: its quiet is not silence.
    fn waiting(&self) {
        self.shared.with_running(&self.task, |r| r.waiting = true);
    }

    fn activity(&self, text: impl Into<Activity>) {
        let text = text.into();
        self.shared.with_running(&self.task, |r| r.activity = text);
        self.shared.redraw();
    }
}

impl RunObserver for SpawnObserver {
    fn attempt_started(&self, attempt: u32, resume: Option<&SessionId>) {
        self.shared.with_running(&self.task, |r| {
            r.heard = Instant::now();
            r.waiting = false;
        });
        if attempt > 1 {
            let how = resume.map_or("cold".to_string(), |id| format!("resuming {id}"));
            self.shared.log(&format!(
                "{}  round {}  {}: attempt {attempt}, {how}",
                self.task, self.round, self.role
            ));
        }
        self.activity("starting");
    }

    fn event(&self, _attempt: u32, event: &AgentEvent) {
        // Whatever the CLI printed, it is not silent.
        self.shared.with_running(&self.task, |r| {
            r.heard = Instant::now();
            r.waiting = false;
        });
        match event {
            AgentEvent::SessionStarted { .. } | AgentEvent::Thinking { .. } => {
                self.activity("thinking");
            }
            AgentEvent::Text { text } => self.activity(format!("writing: {}", short(text, 50))),
            AgentEvent::ToolUse { name, input, .. } => {
                self.activity(Activity::Tool(ToolCall::new(name, input)));
            }
            AgentEvent::Usage { usage } => {
                self.shared.with_running(&self.task, |r| r.usage.add(usage));
                self.shared.redraw();
            }
            AgentEvent::TerminalResult {
                usage, is_error, ..
            } => {
                if let Some(u) = usage {
                    self.shared
                        .with_running(&self.task, |r| r.usage = u.sanitized());
                }
                self.activity(if *is_error { "failed" } else { "done" });
            }
            AgentEvent::RateLimit { info } => {
                if info.rejected {
                    self.activity(format!("rate limited: {}", short(&info.message, 50)));
                }
            }
            AgentEvent::ToolResult { .. }
            | AgentEvent::RetryNotice { .. }
            | AgentEvent::LineShortened { .. }
            | AgentEvent::OversizedLine { .. }
            | AgentEvent::Unparsed { .. } => {}
        }
    }

    fn backoff(&self, _attempt: u32, wait: Duration, reason: &str) {
        self.waiting();
        self.shared.log(&format!(
            "{}  round {}  {}: waiting {} before retrying ({reason})",
            self.task,
            self.round,
            self.role,
            display::duration(Duration::from_secs(wait.as_secs()))
        ));
        self.activity(format!(
            "waiting {} ({})",
            display::duration(Duration::from_secs(wait.as_secs())),
            short(reason, 40)
        ));
    }

    fn account_wait(&self, _attempt: u32, provider: ProviderId, until: std::time::SystemTime) {
        self.waiting();
        let clock = display::system_time(until);
        self.shared.log(&format!(
            "{}  round {}  {}: waiting for {provider} until {clock} (another run found the \
             account rate-limited)",
            self.task, self.round, self.role
        ));
        self.activity(format!("waiting for {provider} until {clock}"));
    }

    fn cli_retry_wait(
        &self,
        _attempt: u32,
        provider: ProviderId,
        status: u16,
        until: std::time::SystemTime,
    ) {
        self.waiting();
        let clock = display::system_time(until);
        self.shared.log(&format!(
            "{}  round {}  {}: {provider} retries on its own after HTTP {status}, waiting until \
             {clock}; the account is held meanwhile",
            self.task, self.round, self.role
        ));
        self.activity(format!(
            "waiting for {provider} until {clock} ({status}, retry-after)"
        ));
    }

    fn cold_fallback(&self, _attempt: u32, stale: &SessionId) {
        self.shared.log(&format!(
            "{}  round {}  {}: session {stale} not found, the task runs cold with the full brief",
            self.task, self.round, self.role
        ));
    }
}
