//! Live rendering of a run: a status line on a terminal, plain lines otherwise, or JSON lines.
//! Every piece of agent text is shown on one line with its control characters made visible
//! (see `term`): only the status line's own redraw sequences reach the terminal as such. The
//! status line is indicatif's, and every row it drew is cleared on a redraw, so a narrow or
//! resized terminal keeps no stale rows. The status line and the event lines are fitted to the
//! terminal's width in display columns (`display`): the activity, last, gets what the rest
//! leaves, and a tool call's path is cut at its start so that the file name stays. `runs
//! follow` shows a run's log through the same renderer.
//!
//! The live view shows the final answer once: its text line is held until the next event says
//! whether it was the answer, and an answer is shown in the result line only. When `corral run`
//! prints the answer on stdout to the terminal the view is drawn on, the result line leaves it
//! out too, so that a person sees it once, on stdout, as `claude -p` shows it.

use std::io::IsTerminal;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use corral_ports::{AgentEvent, ProviderId, RunObserver, SessionId, Usage};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::json_lines::RunLine;
use crate::{display, term};

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
    activity: Activity,
    usage: Usage,
    /// While backing off: when the next attempt starts and why, for the countdown.
    waiting: Option<(Instant, String)>,
    /// The account hold last said in a line ("waiting for claude until T"), said once.
    account_held: Option<String>,
}

/// How wide the status line's activity is when the terminal's width is not known.
const ACTIVITY_COLUMNS: usize = 70;

/// The status line: provider, elapsed, tool calls, tokens, cost, then what the agent does (or
/// the backoff's countdown), last because it is what a narrow terminal cuts. Given the
/// terminal's width, the activity gets what is left of it, a tool call's path cut at the front
/// so that its file name stays.
fn status_text(
    provider: &str,
    elapsed: Duration,
    state: &State,
    now: Instant,
    columns: Option<usize>,
) -> String {
    let cost = state
        .usage
        .cost_usd
        .map(|c| format!("  ${c:.4}"))
        .unwrap_or_default();
    let head = format!(
        "▶ {provider}  {}  tools {}  in {} out {}{cost}  ",
        display::duration(elapsed),
        state.tool_calls,
        tokens(state.usage.input),
        tokens(state.usage.output),
    );
    let room = columns.map_or(ACTIVITY_COLUMNS, |w| {
        w.saturating_sub(display::width(&term::one_line(&head)) + 1)
    });
    let activity = match &state.waiting {
        Some((until, reason)) => {
            let left = until.saturating_duration_since(now);
            short(
                &format!(
                    "waiting {} ({})",
                    display::duration(Duration::from_secs(left.as_secs())),
                    short(reason, 40)
                ),
                room,
            )
        }
        None => state.activity.within(room),
    };
    format!("{head}{activity}")
}

/// Renders a run as it happens.
#[derive(Debug)]
pub struct Renderer {
    style: Style,
    provider: String,
    started: Instant,
    state: Mutex<State>,
    /// For `runs follow`: the log's time of the lines being shown, which their plain prefix
    /// shows instead of the time since this renderer started.
    replayed: Mutex<Option<Duration>>,
    /// The live view's status line (`Style::Live` only). indicatif cuts it to the terminal's
    /// width and clears every row it drew, so a narrow terminal never keeps a stale row.
    status: Option<ProgressBar>,
    /// Whether the final answer is printed on stdout to the terminal this live view is on
    /// (`Style::Live` only): the view then leaves it out.
    answer_on_screen: bool,
    /// The line of the last text event and its text, not shown yet (`Style::Live` only): shown
    /// before the next line, dropped when the result says it was the answer.
    held_text: Mutex<Option<(String, String)>>,
}

/// The status line's one field: the whole text, cut to the terminal's width at the end (where
/// the activity is, which matters least).
const STATUS_TEMPLATE: &str = "{wide_msg}";

/// The plain style's time prefix, `[  16.8s] `, in columns.
const PLAIN_PREFIX_COLUMNS: usize = 11;

/// A status line on stderr, or `None` when indicatif cannot make one.
fn status_line() -> Option<ProgressBar> {
    let style = ProgressStyle::with_template(STATUS_TEMPLATE).ok()?;
    let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
    bar.set_style(style);
    Some(bar)
}

/// The first line of `text` that is not blank, in at most `max` columns.
pub(crate) fn short(text: &str, max: usize) -> String {
    let line = text
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim();
    display::cut(line, max)
}

/// What an agent is doing, for a status line: words, or a tool call whose path is cut at the
/// front so that the file name stays however narrow the terminal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Activity {
    /// `thinking`, `writing`, `waiting 42s (rate limited)`.
    Words(String),
    /// A tool call: its name and what it works on.
    Tool(ToolCall),
}

impl Default for Activity {
    fn default() -> Self {
        Activity::Words(String::new())
    }
}

impl From<&str> for Activity {
    fn from(words: &str) -> Self {
        Activity::Words(words.to_string())
    }
}

impl From<String> for Activity {
    fn from(words: String) -> Self {
        Activity::Words(words)
    }
}

impl Activity {
    /// The activity in at most `max` columns.
    pub(crate) fn within(&self, max: usize) -> String {
        match self {
            Activity::Words(words) => short(words, max),
            Activity::Tool(call) => call.within(max),
        }
    }
}

/// A tool call as shown: `Edit …/src/render.rs`, `Bash cargo test`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ToolCall {
    name: String,
    detail: Detail,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Detail {
    None,
    /// A file: cut at the front.
    Path(String),
    /// A command, pattern or address: cut at the end.
    Words(String),
}

/// How wide a tool call's detail is where nothing narrower is asked for.
const TOOL_DETAIL_COLUMNS: usize = 60;

impl ToolCall {
    /// The call named `name` with `input` (the keys each CLI's tools use for what they work on).
    pub(crate) fn new(name: &str, input: &serde_json::Value) -> Self {
        let text = |key: &str| input.get(key).and_then(|v| v.as_str());
        let detail = ["file_path", "path"]
            .iter()
            .find_map(|k| text(k))
            .map(|p| Detail::Path(term::one_line(p.trim())))
            .or_else(|| {
                ["command", "pattern", "url", "description"]
                    .iter()
                    .find_map(|k| text(k))
                    .map(|s| Detail::Words(s.to_string()))
            })
            .unwrap_or(Detail::None);
        ToolCall {
            name: term::one_line(name),
            detail,
        }
    }

    /// The call in at most `max` columns: the name, then as much of the detail as fits.
    pub(crate) fn within(&self, max: usize) -> String {
        let room = max.saturating_sub(display::width(&self.name) + 1);
        let detail = match &self.detail {
            Detail::None => String::new(),
            Detail::Path(path) => {
                // Too narrow for the name and the file's: the file's alone, it says more.
                let file = path.rsplit('/').next().unwrap_or(path);
                if room < display::width(file) + 2 && max >= display::width(file) + 2 {
                    return display::cut_front(path, max);
                }
                display::cut_front(path, room)
            }
            Detail::Words(words) => short(words, room),
        };
        if detail.is_empty() {
            display::cut(&self.name, max)
        } else {
            format!("{} {detail}", self.name)
        }
    }
}

/// A tool call as one line of the usual width.
pub(crate) fn tool_summary(name: &str, input: &serde_json::Value) -> String {
    let call = ToolCall::new(name, input);
    call.within(display::width(&call.name) + 1 + TOOL_DETAIL_COLUMNS)
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
    /// A renderer for one run; `answer_on_screen`: the final answer will be printed on stdout,
    /// a terminal (a live view then leaves it out, so that it is shown once).
    pub fn new(style: Style, provider: &str, answer_on_screen: bool) -> Arc<Self> {
        Renderer::started_at(style, provider, Instant::now(), answer_on_screen)
    }

    /// A renderer for a run that started `so_far` ago, shown from its log (`runs follow`):
    /// its elapsed time counts from the run's start.
    pub fn following(style: Style, provider: &str, so_far: Duration) -> Arc<Self> {
        let now = Instant::now();
        // The log's answer is shown only in the view: `runs follow` prints no answer on stdout.
        Renderer::started_at(
            style,
            provider,
            now.checked_sub(so_far).unwrap_or(now),
            false,
        )
    }

    fn started_at(
        style: Style,
        provider: &str,
        started: Instant,
        answer_on_screen: bool,
    ) -> Arc<Self> {
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
            started,
            state: Mutex::new(State::default()),
            replayed: Mutex::new(None),
            answer_on_screen: answer_on_screen && style == Style::Live,
            status,
            held_text: Mutex::new(None),
        })
    }

    /// The time in the run of the lines shown next (`runs follow`: the log's `mono_ms`).
    pub fn replay_at(&self, at: Duration) {
        if let Ok(mut replayed) = self.replayed.lock() {
            *replayed = Some(at);
        }
    }

    /// The style.
    pub fn style(&self) -> Style {
        self.style
    }

    /// How wide an event line may be: the terminal's width (less the plain style's time
    /// prefix), or `None` when nothing says.
    fn line_columns(&self) -> Option<usize> {
        let columns = display::terminal_width()?;
        match self.style {
            Style::Plain => Some(columns.saturating_sub(PLAIN_PREFIX_COLUMNS)),
            Style::Live | Style::Json | Style::Quiet => Some(columns),
        }
    }

    /// Prints a line about the run (above the status line on a terminal). The text may hold
    /// what the agent wrote: it is shown on one line, its control characters made visible.
    pub fn line(&self, text: &str) {
        if matches!(self.style, Style::Json | Style::Quiet) {
            return;
        }
        self.show_held_text();
        self.show_line(text);
    }

    /// Shows the held text line, if any.
    fn show_held_text(&self) {
        let held = self.held_text.lock().ok().and_then(|mut held| held.take());
        if let Some((line, _)) = held {
            self.show_line(&line);
        }
    }

    /// Prints one line, without the held text line.
    fn show_line(&self, text: &str) {
        let mut text = term::one_line(text);
        if let Some(columns) = self.line_columns() {
            text = display::cut(&text, columns);
        }
        match self.style {
            Style::Json | Style::Quiet => {}
            Style::Plain => {
                let at = self
                    .replayed
                    .lock()
                    .ok()
                    .and_then(|at| *at)
                    .unwrap_or_else(|| self.started.elapsed());
                term::err_soon(format_args!("[{:>8}] {text}", display::duration(at)));
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
        let text = status_text(
            &self.provider,
            self.started.elapsed(),
            &state,
            Instant::now(),
            display::terminal_width(),
        );
        status.set_message(term::one_line(&text));
    }

    /// Clears the status line before the summary, and writes the event lines still held back
    /// (a text line that no result followed is shown: it was not the answer).
    pub fn finish(&self) {
        self.show_held_text();
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

    fn set_activity(&self, activity: impl Into<Activity>) {
        if let Ok(mut state) = self.state.lock() {
            state.activity = activity.into();
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
        self.set_activity("starting");
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
                self.set_activity("thinking");
            }
            AgentEvent::Text { text } => {
                if !matches!(self.style, Style::Json | Style::Quiet) {
                    let room = self.line_columns().map_or(100, |w| w.saturating_sub(2));
                    let line = format!("  {}", short(text, room));
                    if self.style == Style::Live {
                        // It may be the answer, which the result line or stdout shows: held
                        // until the next event says.
                        self.show_held_text();
                        if let Ok(mut held) = self.held_text.lock() {
                            *held = Some((line, text.clone()));
                        }
                    } else {
                        self.line(&line);
                    }
                }
                self.set_activity("writing");
            }
            AgentEvent::Thinking { .. } => self.set_activity("thinking"),
            AgentEvent::ToolUse { name, input, .. } => {
                let call = ToolCall::new(name, input);
                let summary = match self.line_columns() {
                    Some(columns) => call.within(columns.saturating_sub(2)),
                    None => tool_summary(name, input),
                };
                self.line(&format!("→ {summary}"));
                if let Ok(mut state) = self.state.lock() {
                    state.tool_calls += 1;
                    state.activity = Activity::Tool(call);
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
                attempt,
                status,
                delay_ms,
                ..
            } => {
                let http = status.map(|s| format!(" (HTTP {s})")).unwrap_or_default();
                let wait = delay_ms.map(Duration::from_millis);
                let after = wait
                    .map(|w| format!(" in {}", display::duration(w)))
                    .unwrap_or_default();
                self.line(&format!(
                    "the CLI retries a request{after}, attempt {attempt}{http}"
                ));
                // The CLI waits in its own process: the status line counts it down, as it does
                // Corral's own backoff, until the next event.
                if let (Some(wait), Ok(mut state)) = (wait, self.state.lock()) {
                    let reason = match status {
                        Some(s) => format!("the CLI retries after HTTP {s}"),
                        None => "the CLI retries".to_string(),
                    };
                    state.waiting = Some((Instant::now() + wait, reason));
                }
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
                // The held text line is dropped when it was the answer (the result's text ends
                // with it), which is shown below, once.
                let held = self.held_text.lock().ok().and_then(|mut held| held.take());
                if let Some((line, held)) = held {
                    let answer = text.as_deref().map(str::trim_end);
                    if !answer.is_some_and(|a| a.ends_with(held.trim())) {
                        self.show_line(&line);
                    }
                }
                let text = match text.as_deref() {
                    // On stdout, on this terminal: shown there.
                    Some(_) if self.answer_on_screen && !*is_error => String::new(),
                    Some(t) => format!(": {}", short(t, 90)),
                    None => String::new(),
                };
                self.line(&format!("result: {verdict}{text}"));
                self.set_activity(verdict);
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
            display::duration(Duration::from_secs(wait.as_secs()))
        ));
        if let Ok(mut state) = self.state.lock() {
            state.waiting = Some((Instant::now() + wait, reason.to_string()));
        }
        self.redraw();
    }

    /// Another run found the account rate-limited: the next spawn waits until `until`.
    fn account_wait(&self, attempt: u32, provider: ProviderId, until: SystemTime) {
        let wait = until.duration_since(SystemTime::now()).unwrap_or_default();
        let clock = display::system_time(until);
        self.json(&RunLine::AccountWait {
            attempt,
            provider,
            until: humantime::format_rfc3339_millis(until).to_string(),
            wait_ms: u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
        });
        self.line(&format!(
            "waiting for {provider} until {clock} (another run found the account rate-limited)"
        ));
        if let Ok(mut state) = self.state.lock() {
            state.waiting = Some((
                Instant::now() + wait,
                format!("waiting for {provider} until {clock}"),
            ));
        }
        self.redraw();
    }

    /// The account is limited until `until` while the attempt goes on (the CLI waits for it, or
    /// reported a rejected limit): the status line counts down to it, naming the account. Waits
    /// of a few seconds (the CLI's own retries of a burst) are said by their retry line alone.
    fn cli_retry_wait(&self, _attempt: u32, provider: ProviderId, status: u16, until: SystemTime) {
        let wait = until.duration_since(SystemTime::now()).unwrap_or_default();
        if wait < Duration::from_secs(10) {
            return;
        }
        let clock = display::system_time(until);
        let said = format!("waiting for {provider} until {clock}");
        let repeated = match self.state.lock() {
            Ok(mut state) => {
                state.waiting = Some((Instant::now() + wait, said.clone()));
                state.account_held.replace(said.clone()).as_ref() == Some(&said)
            }
            Err(_) => false,
        };
        if !repeated {
            self.line(&format!(
                "{said} (HTTP {status}: the account is held until its limit resets)"
            ));
        }
        self.redraw();
    }
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
    fn a_tool_call_keeps_its_file_name_at_any_width() {
        let path = "/home/someone/projects/コラル/crates/cli/src/deeply/nested/render_status.rs";
        let call = ToolCall::new("Edit", &serde_json::json!({"file_path": path}));
        for columns in [30, 40, 60, 200] {
            let shown = call.within(columns);
            assert!(display::width(&shown) <= columns, "{columns}: {shown}");
            assert!(shown.starts_with("Edit "), "{shown}");
            assert!(shown.ends_with("/render_status.rs"), "{shown}");
        }
        assert_eq!(call.within(200), format!("Edit {path}"));
        let bash = ToolCall::new(
            "Bash",
            &serde_json::json!({"command": "echo 日本語のテキスト"}),
        );
        assert_eq!(bash.within(16), "Bash echo 日本…");
        assert_eq!(
            tool_summary("Edit", &serde_json::json!({"file_path": path})),
            format!("Edit {}", display::cut_front(path, 60))
        );
    }

    /// At 80 columns, the status line's activity is what is left of the width, and a tool
    /// call's file name stays in it.
    #[test]
    fn the_status_line_fits_the_terminal_and_keeps_the_file_name() {
        let now = Instant::now();
        let path = "/home/someone/projects/corral/crates/cli/src/deeply/nested/render_status.rs";
        let state = State {
            tool_calls: 12,
            activity: Activity::Tool(ToolCall::new(
                "Edit",
                &serde_json::json!({"file_path": path}),
            )),
            usage: Usage {
                input: Some(123_456),
                output: Some(7_890),
                cost_usd: Some(1.2345),
                ..Usage::default()
            },
            waiting: None,
            account_held: None,
        };
        for columns in [80, 100, 120] {
            let text = status_text(
                "claude",
                Duration::from_secs(75),
                &state,
                now,
                Some(columns),
            );
            assert!(display::width(&text) < columns, "{columns}: {text}");
            assert!(text.ends_with("/render_status.rs"), "{columns}: {text}");
        }
        let wide = status_text("claude", Duration::from_secs(75), &state, now, Some(200));
        assert_eq!(
            wide,
            format!("▶ claude  1m 15s  tools 12  in 123.5k out 7.9k  $1.2345  Edit {path}")
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
        let secs = Duration::from_secs;
        let text = status_text("claude", secs(65), &state, now, None);
        assert!(text.ends_with("waiting 42s (rate limited)"), "{text}");
        let later = status_text("claude", secs(75), &state, now + secs(10), None);
        assert!(later.ends_with("waiting 32s (rate limited)"), "{later}");
        let done = State {
            waiting: None,
            ..state
        };
        assert!(status_text("claude", secs(110), &done, now, None).ends_with("  thinking"));
    }

    /// The CLI's own retry wait (Claude Code's `api_retry`) is counted down on the status line
    /// like Corral's backoff, and the next event ends it.
    #[test]
    fn the_clis_own_retry_wait_counts_down_until_the_next_event() {
        let renderer = Renderer::new(Style::Quiet, "claude", false);
        let before = Instant::now();
        renderer.event(
            1,
            &AgentEvent::RetryNotice {
                attempt: 2,
                max: Some(3),
                delay_ms: Some(30_000),
                status: Some(429),
            },
        );
        let (until, reason) = renderer.state.lock().unwrap().waiting.clone().unwrap();
        assert_eq!(reason, "the CLI retries after HTTP 429");
        assert!(until >= before + Duration::from_secs(30), "{until:?}");
        renderer.event(
            1,
            &AgentEvent::Text {
                text: "back".into(),
            },
        );
        assert!(renderer.state.lock().unwrap().waiting.is_none());
    }
}
