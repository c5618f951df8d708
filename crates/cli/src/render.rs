//! Live rendering of a run: a status line on a terminal, plain lines otherwise, or JSON lines.
//! Every piece of agent text is shown on one line with its control characters made visible
//! (see `term`): only the status line's own redraw sequences reach the terminal as such. The
//! status line is indicatif's: it is cut to the terminal's width (the activity, last, goes
//! first), and every row it drew is cleared on a redraw, so a narrow or resized terminal keeps
//! no stale rows.

use std::io::IsTerminal;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use corral_ports::{AgentEvent, ProviderId, RunObserver, SessionId, Usage};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::json_lines::RunLine;
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
    /// While backing off: when the next attempt starts and why, for the countdown.
    waiting: Option<(Instant, String)>,
}

/// The status line: provider, elapsed, tool calls, tokens, cost, then what the agent does (or
/// the backoff's countdown), last because it is what a narrow terminal cuts.
fn status_text(provider: &str, elapsed: &str, state: &State, now: Instant) -> String {
    let cost = state
        .usage
        .cost_usd
        .map(|c| format!("  ${c:.4}"))
        .unwrap_or_default();
    let activity = match &state.waiting {
        Some((until, reason)) => {
            let left = until.saturating_duration_since(now).as_secs();
            format!("waiting {left}s ({})", short(reason, 40))
        }
        None => short(&state.activity, 70),
    };
    format!(
        "▶ {provider}  {elapsed}  tools {}  in {} out {}{cost}  {activity}",
        state.tool_calls,
        tokens(state.usage.input),
        tokens(state.usage.output),
    )
}

/// Renders a run as it happens.
#[derive(Debug)]
pub struct Renderer {
    style: Style,
    provider: String,
    started: Instant,
    state: Mutex<State>,
    /// The live view's status line (`Style::Live` only). indicatif cuts it to the terminal's
    /// width and clears every row it drew, so a narrow terminal never keeps a stale row.
    status: Option<ProgressBar>,
}

/// The status line's one field: the whole text, cut to the terminal's width at the end (where
/// the activity is, which matters least).
const STATUS_TEMPLATE: &str = "{wide_msg}";

/// A status line on stderr, or `None` when indicatif cannot make one.
fn status_line() -> Option<ProgressBar> {
    let style = ProgressStyle::with_template(STATUS_TEMPLATE).ok()?;
    let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
    bar.set_style(style);
    Some(bar)
}

pub(crate) fn short(text: &str, max: usize) -> String {
    let line = text
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim();
    // Counts no further than `max + 1` characters: a flood's kilobyte lines are cut early.
    if line.char_indices().nth(max).is_some() {
        let cut = line
            .char_indices()
            .nth(max.saturating_sub(1))
            .map_or(line.len(), |(at, _)| at);
        format!("{}…", &line[..cut])
    } else {
        line.to_string()
    }
}

/// `path` in at most `max` characters, cut at the front so that the file name stays: a long
/// path's end says which file, its start rarely does.
fn short_path(path: &str, max: usize) -> String {
    let path = path.trim();
    let count = path.chars().count();
    if count <= max {
        return path.to_string();
    }
    let tail: String = path.chars().skip(count - max.saturating_sub(1)).collect();
    // Start the kept part at a directory boundary when there is one, so no name is half shown.
    let tail = match tail.find('/') {
        Some(at) if at + 1 < tail.len() => tail[at..].to_string(),
        _ => tail,
    };
    format!("…{tail}")
}

pub(crate) fn tool_summary(name: &str, input: &serde_json::Value) -> String {
    let text = |key: &str| input.get(key).and_then(|v| v.as_str());
    let detail = ["file_path", "path"]
        .iter()
        .find_map(|k| text(k))
        .map(|p| short_path(p, 60))
        .or_else(|| {
            ["command", "pattern", "url", "description"]
                .iter()
                .find_map(|k| text(k))
                .map(|s| short(s, 60))
        })
        .unwrap_or_default();
    if detail.is_empty() {
        name.to_string()
    } else {
        format!("{name} {detail}")
    }
}

pub(crate) fn tokens(n: Option<u64>) -> String {
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
        let status = if style == Style::Live {
            status_line()
        } else {
            None
        };
        // Without a status line a terminal still gets every event, one plain line each.
        let style = if style == Style::Live && status.is_none() {
            Style::Plain
        } else {
            style
        };
        Arc::new(Renderer {
            style,
            provider: provider.to_string(),
            started: Instant::now(),
            state: Mutex::new(State::default()),
            status,
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
        if matches!(self.style, Style::Json | Style::Quiet) {
            return;
        }
        let text = term::one_line(text);
        match self.style {
            Style::Json | Style::Quiet => {}
            Style::Plain => {
                term::err_soon(format_args!(
                    "[{:>7.1}s] {text}",
                    self.started.elapsed().as_secs_f64()
                ));
            }
            Style::Live => {
                if let Some(status) = &self.status {
                    status.println(&text);
                }
                self.redraw();
            }
        }
    }

    /// Emits one JSON line on stdout (JSON style only).
    pub fn json(&self, value: &impl serde::Serialize) {
        if self.style == Style::Json {
            // A value that cannot be serialised (a map with non-string keys) is not printed; the
            // execution log still has the event.
            let _ = term::json_line_soon(value);
        }
    }

    /// Redraws the status line (terminal only).
    pub fn redraw(&self) {
        let Some(status) = &self.status else {
            return;
        };
        let Ok(state) = self.state.lock() else {
            return;
        };
        let text = status_text(&self.provider, &self.elapsed(), &state, Instant::now());
        status.set_message(term::one_line(&text));
    }

    /// Clears the status line before the summary, and writes the event lines still held back.
    pub fn finish(&self) {
        term::flush();
        if let Some(status) = &self.status {
            status.finish_and_clear();
        }
    }

    /// Keeps the elapsed time moving on a terminal while the agent is quiet.
    pub fn spawn_ticker(self: &Arc<Self>) -> Option<tokio::task::JoinHandle<()>> {
        self.status.as_ref()?;
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
            state.waiting = None;
        }
    }
}

/// Writes the [`RunLine::Event`] of a `text` or `thinking` event, the bytes serde would write for it,
/// with the text copied as it is when it holds nothing to escape: the flood of a long answer
/// is such events, and serde's escaping scan of every byte was a visible part of its cost.
fn write_text_event_line(
    buf: &mut Vec<u8>,
    attempt: u32,
    name: &str,
    text: &str,
) -> serde_json::Result<()> {
    use std::io::Write;
    write!(
        buf,
        "{{\"type\":\"event\",\"attempt\":{attempt},\"event\":{{\"event\":\"{name}\",\"text\":"
    )
    .map_err(serde_json::Error::io)?;
    term::push_inert_json_str(buf, text)?;
    buf.extend_from_slice(b"}}");
    Ok(())
}

impl RunObserver for Renderer {
    fn attempt_started(&self, attempt: u32, resume: Option<&SessionId>) {
        self.json(&RunLine::Attempt { attempt, resume });
        if attempt > 1 || resume.is_some() {
            let how = resume.map_or("cold".to_string(), |id| format!("resuming {id}"));
            self.line(&format!("attempt {attempt}: {how}"));
        }
        self.set_activity("starting".into());
    }

    fn event(&self, attempt: u32, event: &AgentEvent) {
        if self.style == Style::Json {
            // As in `json`, an event that cannot be serialised is only in the execution log.
            let _ = match event {
                AgentEvent::Text { text } => term::json_line_soon_with(|buf| {
                    write_text_event_line(buf, attempt, "text", text)
                }),
                AgentEvent::Thinking { text } => term::json_line_soon_with(|buf| {
                    write_text_event_line(buf, attempt, "thinking", text)
                }),
                AgentEvent::SessionStarted { .. }
                | AgentEvent::ToolUse { .. }
                | AgentEvent::ToolResult { .. }
                | AgentEvent::Usage { .. }
                | AgentEvent::RateLimit { .. }
                | AgentEvent::RetryNotice { .. }
                | AgentEvent::TerminalResult { .. }
                | AgentEvent::LineShortened { .. }
                | AgentEvent::OversizedLine { .. }
                | AgentEvent::Unparsed { .. } => {
                    term::json_line_soon(&RunLine::Event { attempt, event })
                }
            };
        }
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
                if !matches!(self.style, Style::Json | Style::Quiet) {
                    self.line(&format!("  {}", short(text, 100)));
                }
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
        self.json(&RunLine::Backoff {
            attempt,
            wait_ms: u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
            reason,
        });
        self.line(&format!(
            "waiting {} before retrying ({reason})",
            humantime::format_duration(Duration::from_secs(wait.as_secs()))
        ));
        if let Ok(mut state) = self.state.lock() {
            state.waiting = Some((Instant::now() + wait, reason.to_string()));
        }
        self.redraw();
    }

    /// Another run found the account rate-limited: the next spawn waits until `until`.
    fn account_wait(&self, attempt: u32, provider: ProviderId, until: SystemTime) {
        let wait = until.duration_since(SystemTime::now()).unwrap_or_default();
        let clock = clock_utc(until);
        self.json(&RunLine::AccountWait {
            attempt,
            provider,
            until: humantime::format_rfc3339_millis(until).to_string(),
            wait_ms: u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
        });
        self.line(&format!(
            "waiting for {provider} until {clock} UTC (another run found the account rate-limited)"
        ));
        if let Ok(mut state) = self.state.lock() {
            state.waiting = Some((
                Instant::now() + wait,
                format!("waiting for {provider} until {clock}"),
            ));
        }
        self.redraw();
    }
}

/// `HH:MM:SS` of `t` in UTC, for the wait lines.
pub(crate) fn clock_utc(t: SystemTime) -> String {
    let text = humantime::format_rfc3339_seconds(t).to_string();
    text.get(11..19).unwrap_or(&text).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The hand-written line of a text event is the line serde writes for it, byte for byte.
    #[test]
    fn a_text_event_line_is_what_serde_writes() {
        for text in [
            "plain",
            "",
            "quote \" slash \\ break \n é ’ \u{1b}]0;x\u{7}\u{202e}\u{9b}",
        ] {
            for (name, event) in [
                ("text", AgentEvent::Text { text: text.into() }),
                ("thinking", AgentEvent::Thinking { text: text.into() }),
            ] {
                let mut fast = Vec::new();
                write_text_event_line(&mut fast, 7, name, text).unwrap();
                let slow = term::json(&RunLine::Event {
                    attempt: 7,
                    event: &event,
                })
                .unwrap();
                assert_eq!(String::from_utf8(fast).unwrap(), slow);
            }
        }
    }

    #[test]
    fn a_long_path_keeps_its_file_name() {
        let path =
            "/home/someone/projects/corral/crates/cli/src/deeply/nested/module/render_status.rs";
        let shown = short_path(path, 40);
        assert!(shown.chars().count() <= 40, "{shown}");
        assert!(shown.starts_with("…/"), "{shown}");
        assert!(shown.ends_with("/render_status.rs"), "{shown}");
        assert_eq!(short_path("src/main.rs", 40), "src/main.rs");
        assert_eq!(
            tool_summary("Edit", &serde_json::json!({"file_path": path})),
            format!("Edit {}", short_path(path, 60))
        );
    }

    #[test]
    fn backing_off_counts_down() {
        let now = Instant::now();
        let state = State {
            tool_calls: 2,
            activity: "thinking".into(),
            waiting: Some((now + Duration::from_secs(42), "rate limited".into())),
            ..State::default()
        };
        let text = status_text("claude", "01:05", &state, now);
        assert!(text.ends_with("waiting 42s (rate limited)"), "{text}");
        let later = status_text("claude", "01:15", &state, now + Duration::from_secs(10));
        assert!(later.ends_with("waiting 32s (rate limited)"), "{later}");
        let done = State {
            waiting: None,
            ..state
        };
        assert!(status_text("claude", "01:50", &done, now).ends_with("  thinking"));
    }
}
