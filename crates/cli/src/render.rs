//! Live rendering of a run: a status line on a terminal, plain lines otherwise, or JSON lines.
//! Every piece of agent text is shown on one line with its control characters made visible
//! (see `term`): only the status line's own redraw sequences reach the terminal as such.

use std::io::IsTerminal;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use corral_ports::{AgentEvent, RunObserver, SessionId, Usage};

use crate::term;

/// How a run is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// A status line redrawn in place on stderr, with event lines above it.
    Live,
    /// One line per event on stderr.
    Plain,
    /// JSON lines on stdout.
    Json,
    /// Nothing while the run goes on (`-q`).
    Quiet,
}

impl Style {
    /// Live on a terminal, plain otherwise, JSON or nothing when asked.
    pub fn choose(json: bool, quiet: bool) -> Style {
        if json {
            Style::Json
        } else if quiet {
            Style::Quiet
        } else if std::io::stderr().is_terminal() {
            Style::Live
        } else {
            Style::Plain
        }
    }
}

#[derive(Debug, Default)]
struct State {
    tool_calls: u32,
    activity: String,
    usage: Usage,
    status_shown: bool,
}

/// Renders a run as it happens.
#[derive(Debug)]
pub struct Renderer {
    style: Style,
    provider: String,
    started: Instant,
    state: Mutex<State>,
}

fn short(text: &str, max: usize) -> String {
    let line = text
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim();
    if line.chars().count() > max {
        let cut: String = line.chars().take(max.saturating_sub(1)).collect();
        format!("{cut}…")
    } else {
        line.to_string()
    }
}

fn tool_summary(name: &str, input: &serde_json::Value) -> String {
    let detail = [
        "file_path",
        "path",
        "command",
        "pattern",
        "url",
        "description",
    ]
    .iter()
    .find_map(|k| input.get(k).and_then(|v| v.as_str()))
    .map(|s| short(s, 60))
    .unwrap_or_default();
    if detail.is_empty() {
        name.to_string()
    } else {
        format!("{name} {detail}")
    }
}

fn tokens(n: Option<u64>) -> String {
    match n {
        None => "-".into(),
        Some(n) if n >= 1_000_000 => format!("{:.1}M", n as f64 / 1e6),
        Some(n) if n >= 1_000 => format!("{:.1}k", n as f64 / 1e3),
        Some(n) => n.to_string(),
    }
}

impl Renderer {
    /// A renderer for one run.
    pub fn new(style: Style, provider: &str) -> Arc<Self> {
        Arc::new(Renderer {
            style,
            provider: provider.to_string(),
            started: Instant::now(),
            state: Mutex::new(State::default()),
        })
    }

    /// The style.
    pub fn style(&self) -> Style {
        self.style
    }

    fn elapsed(&self) -> String {
        let s = self.started.elapsed().as_secs();
        format!("{:02}:{:02}", s / 60, s % 60)
    }

    /// Prints a line about the run (above the status line on a terminal). The text may hold
    /// what the agent wrote: it is shown on one line, its control characters made visible.
    pub fn line(&self, text: &str) {
        let text = term::one_line(text);
        match self.style {
            Style::Json | Style::Quiet => {}
            Style::Plain => {
                term::errln!("[{:>7.1}s] {text}", self.started.elapsed().as_secs_f64());
            }
            Style::Live => {
                term::err_raw(&format!("\r\x1b[2K{text}\n"));
                self.redraw();
            }
        }
    }

    /// Emits one JSON line on stdout (JSON style only).
    pub fn json(&self, value: &serde_json::Value) {
        if self.style == Style::Json
            && let Ok(line) = term::json(value)
        {
            term::outln!("{line}");
        }
    }

    /// Redraws the status line (terminal only).
    pub fn redraw(&self) {
        if self.style != Style::Live {
            return;
        }
        let Ok(mut state) = self.state.lock() else {
            return;
        };
        let cost = state
            .usage
            .cost_usd
            .map(|c| format!("  ${c:.4}"))
            .unwrap_or_default();
        let text = format!(
            "▶ {}  {}  tools {}  in {} out {}{}  {}",
            self.provider,
            self.elapsed(),
            state.tool_calls,
            tokens(state.usage.input),
            tokens(state.usage.output),
            cost,
            short(&state.activity, 50)
        );
        state.status_shown = true;
        term::err_raw(&format!("\r\x1b[2K{}", term::one_line(&text)));
    }

    /// Clears the status line before the summary.
    pub fn finish(&self) {
        if self.style == Style::Live
            && let Ok(state) = self.state.lock()
            && state.status_shown
        {
            term::err_raw("\r\x1b[2K");
        }
    }

    /// Keeps the elapsed time moving on a terminal while the agent is quiet.
    pub fn spawn_ticker(self: &Arc<Self>) -> Option<tokio::task::JoinHandle<()>> {
        if self.style != Style::Live {
            return None;
        }
        let me = Arc::clone(self);
        Some(tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(500)).await;
                me.redraw();
            }
        }))
    }

    fn set_activity(&self, activity: String) {
        if let Ok(mut state) = self.state.lock() {
            state.activity = activity;
        }
    }
}

impl RunObserver for Renderer {
    fn attempt_started(&self, attempt: u32, resume: Option<&SessionId>) {
        self.json(&serde_json::json!({"type": "attempt", "attempt": attempt, "resume": resume}));
        if attempt > 1 || resume.is_some() {
            let how = resume.map_or("cold".to_string(), |id| format!("resuming {id}"));
            self.line(&format!("attempt {attempt}: {how}"));
        }
        self.set_activity("starting".into());
    }

    fn event(&self, attempt: u32, event: &AgentEvent) {
        self.json(&serde_json::json!({"type": "event", "attempt": attempt, "event": event}));
        match event {
            AgentEvent::SessionStarted { session_id, model } => {
                let model = model
                    .as_deref()
                    .map(|m| format!(" ({m})"))
                    .unwrap_or_default();
                self.line(&format!("session {session_id}{model}"));
                self.set_activity("thinking".into());
            }
            AgentEvent::Text { text } => {
                self.line(&format!("  {}", short(text, 100)));
                self.set_activity("writing".into());
            }
            AgentEvent::Thinking { .. } => self.set_activity("thinking".into()),
            AgentEvent::ToolUse { name, input, .. } => {
                let summary = tool_summary(name, input);
                self.line(&format!("→ {summary}"));
                if let Ok(mut state) = self.state.lock() {
                    state.tool_calls += 1;
                    state.activity = summary;
                }
            }
            AgentEvent::ToolResult {
                is_error, content, ..
            } => {
                if *is_error {
                    self.line(&format!("  ✗ {}", short(content, 100)));
                }
            }
            AgentEvent::Usage { usage } => {
                if let Ok(mut state) = self.state.lock() {
                    state.usage.add(usage);
                }
            }
            AgentEvent::RateLimit { info } => {
                if info.rejected {
                    self.line(&format!("rate limited: {}", short(&info.message, 80)));
                }
            }
            AgentEvent::RetryNotice {
                attempt, status, ..
            } => {
                let status = status.map(|s| format!(" (HTTP {s})")).unwrap_or_default();
                self.line(&format!(
                    "the CLI retries a request, attempt {attempt}{status}"
                ));
            }
            AgentEvent::TerminalResult {
                is_error,
                text,
                usage,
                ..
            } => {
                if let (Some(u), Ok(mut state)) = (usage, self.state.lock()) {
                    state.usage = u.sanitized();
                }
                let verdict = if *is_error { "failed" } else { "done" };
                let text = text
                    .as_deref()
                    .map(|t| format!(": {}", short(t, 90)))
                    .unwrap_or_default();
                self.line(&format!("result: {verdict}{text}"));
                self.set_activity(verdict.into());
            }
            AgentEvent::LineShortened { len, kept, strings } => {
                let cut = strings.len();
                self.line(&format!(
                    "(an output line of {len} bytes was shortened to {kept}: {cut} long string(s) cut)"
                ));
            }
            AgentEvent::OversizedLine { len, .. } => {
                self.line(&format!(
                    "(an output line of {len} bytes was recorded as oversized)"
                ));
            }
            AgentEvent::Unparsed { .. } => {}
        }
        self.redraw();
    }

    fn backoff(&self, attempt: u32, wait: Duration, reason: &str) {
        self.json(&serde_json::json!({
            "type": "backoff", "attempt": attempt, "wait_ms": wait.as_millis() as u64, "reason": reason
        }));
        self.line(&format!(
            "waiting {} before retrying ({reason})",
            humantime::format_duration(Duration::from_secs(wait.as_secs()))
        ));
        self.set_activity("waiting".into());
    }
}
