//! How `corral sprint run` shows a sprint as it runs: `--json` writes each [`SprintEvent`] as
//! one JSON line on stdout (the last one, `sprint-finished`, holds the summary); piped, stderr
//! gets one plain line per finished step (task, round, role or step, outcome, elapsed); on a
//! terminal, a status line per running task (task, round, role, provider, elapsed, tokens,
//! cost, what its agent does) is redrawn below the log of finished steps.
//!
//! Everything shown goes through `term` as `corral run`'s output does: lines and the status
//! text are made one line with their control characters visible (task titles, reasons,
//! warnings and the agents' activity are text an agent or the sprint file controls), and JSON
//! escapes them.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use corral_ports::{AgentEvent, ProviderId, RunObserver, SessionId, Usage};
use corral_sprint::{
    EventSink, Role, SprintEnd, SprintEvent, SprintSummary, Step, TaskId, TaskStatus,
};
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::render::{Style, short, tokens, tool_summary};
use crate::term;

/// `d` as a step's elapsed time: `0.4s`, `12.3s`, `2m05s`.
fn elapsed(d: Duration) -> String {
    let s = d.as_secs();
    if s < 60 {
        format!("{:.1}s", d.as_secs_f64())
    } else {
        format!("{}m{:02}s", s / 60, s % 60)
    }
}

/// Tokens and cost in a few characters: `in 1.2k out 300 $0.0123`.
pub(crate) fn usage_text(u: &Usage) -> String {
    let cost = u.cost_usd.map(|c| format!(" ${c:.4}")).unwrap_or_default();
    format!("in {} out {}{cost}", tokens(u.input), tokens(u.output))
}

/// Turns events into the plain log's lines, timing each finished step from the event that
/// began it. Pure but for the clock it is handed, so a fixed event list renders the same.
#[derive(Debug, Default)]
pub(crate) struct Steps {
    /// When each task (re)started.
    task_started: HashMap<TaskId, Instant>,
    /// When each task's previous step ended.
    last: HashMap<TaskId, Instant>,
    /// When each spawn started.
    spawn_started: HashMap<(TaskId, u32, Role), Instant>,
}

impl Steps {
    /// How long since `task`'s previous step, and marks `now` as its latest.
    fn step_time(&mut self, task: &TaskId, now: Instant) -> Duration {
        let since = self.last.insert(task.clone(), now).unwrap_or(now);
        now.saturating_duration_since(since)
    }

    /// The line for `event` at `now`, or `None` for an event that ends no step.
    pub(crate) fn line(&mut self, event: &SprintEvent, now: Instant) -> Option<String> {
        let text = match event {
            SprintEvent::SprintStarted {
                name,
                branch,
                run_id,
                resumed,
            } => {
                let how = if *resumed { "continues" } else { "starts" };
                format!("sprint {name} {how} on branch {branch} (run {run_id})")
            }
            SprintEvent::DirtyTree { paths, action } => {
                format!("uncommitted changes {action}: {}", paths.join(", "))
            }
            SprintEvent::Branch { branch, created } => {
                let how = if *created { "created" } else { "checked out" };
                format!("branch {branch} {how}")
            }
            SprintEvent::Setup { passed } => {
                format!("setup {}", if *passed { "passed" } else { "failed" })
            }
            SprintEvent::TaskStarted {
                task,
                title,
                round,
                step,
            } => {
                self.task_started.insert(task.clone(), now);
                self.last.insert(task.clone(), now);
                let at = if *step == Step::PreVerify {
                    String::new()
                } else {
                    format!(" (continues at round {round}, {})", step.as_str())
                };
                format!("{task}  {title}{at}")
            }
            SprintEvent::Verified {
                task,
                round,
                step,
                passed,
                gates,
                attribution,
            } => {
                let what = match step {
                    Step::PreVerify => "pre-verify",
                    Step::Generate | Step::PostVerify | Step::Evaluate | Step::Commit => "check",
                };
                let mut outcome = if *passed { "passed" } else { "failed" }.to_string();
                if !gates.is_empty() {
                    outcome.push_str(&format!(" (gates {})", gates.join(", ")));
                }
                if let Some(a) = attribution {
                    outcome.push_str(&format!(", {}", a.as_str()));
                }
                let took = self.step_time(task, now);
                format!(
                    "{task}  round {round}  {what:<10}  {outcome}  {}",
                    elapsed(took)
                )
            }
            SprintEvent::SpawnStarted {
                task, round, role, ..
            } => {
                self.spawn_started
                    .insert((task.clone(), *round, *role), now);
                self.last.insert(task.clone(), now);
                return None;
            }
            SprintEvent::SpawnFinished {
                task,
                round,
                role,
                outcome,
                valid,
                usage,
            } => {
                let began = self
                    .spawn_started
                    .remove(&(task.clone(), *round, *role))
                    .or_else(|| self.last.get(task).copied())
                    .unwrap_or(now);
                self.last.insert(task.clone(), now);
                let outcome = outcome.map_or("done in an earlier run", |o| o.as_str());
                let signals = if *valid {
                    "signals valid"
                } else {
                    "signals invalid"
                };
                format!(
                    "{task}  round {round}  {:<10}  {outcome}, {signals}, {}  {}",
                    role.as_str(),
                    usage_text(usage),
                    elapsed(now.saturating_duration_since(began))
                )
            }
            SprintEvent::Evaluated {
                task,
                round,
                passed,
                failed,
            } => {
                let outcome = if *passed {
                    "passed".to_string()
                } else {
                    format!("failed: {}", failed.join(", "))
                };
                let took = self.step_time(task, now);
                format!(
                    "{task}  round {round}  {:<10}  {outcome}  {}",
                    "evaluation",
                    elapsed(took)
                )
            }
            SprintEvent::Regressed { task, round, patch } => {
                let took = self.step_time(task, now);
                format!(
                    "{task}  round {round}  {:<10}  the change is saved in {patch}, the tree reset  {}",
                    "regressed",
                    elapsed(took)
                )
            }
            SprintEvent::Warning { task, message } => format!("{task}  warning: {message}"),
            SprintEvent::WaveStarted { .. }
            | SprintEvent::Folded { .. }
            | SprintEvent::FoldChecked { .. }
            | SprintEvent::SentHome { .. }
            | SprintEvent::Held { .. } => parallel_text(event)?,
            SprintEvent::TaskFinished {
                task,
                status,
                commit,
                reason,
            } => {
                let began = self.task_started.remove(task).unwrap_or(now);
                self.last.remove(task);
                let mut text = format!("{task}  {}", status.as_str());
                if let Some(commit) = commit {
                    text.push_str(&format!(", commit {}", short_commit(commit)));
                }
                if let Some(reason) = reason {
                    text.push_str(&format!(": {reason}"));
                }
                let took = now.saturating_duration_since(began);
                format!("{text}  {}", elapsed(took))
            }
            // The summary follows on stdout.
            SprintEvent::SprintFinished { .. } => return None,
        };
        Some(term::one_line(&text))
    }
}

/// The line of a parallel run's own events (`--jobs` above 1): which tasks run at once, and
/// each fold onto the sprint's branch.
fn parallel_text(event: &SprintEvent) -> Option<String> {
    match event {
        SprintEvent::WaveStarted { tasks, jobs, ahead } => {
            let names = |tasks: &[TaskId]| {
                tasks
                    .iter()
                    .map(TaskId::as_str)
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let mut text = String::new();
            if !tasks.is_empty() {
                text = format!(
                    "running at once (--jobs {jobs}), each on its own branch: {}",
                    names(tasks)
                );
            }
            if !ahead.is_empty() {
                if !text.is_empty() {
                    text.push_str("; ");
                }
                text.push_str(&format!(
                    "started ahead, each waiting for a free slot: {}",
                    names(ahead)
                ));
            }
            Some(text)
        }
        SprintEvent::Folded { task, commit, how } => Some(format!(
            "{task}  folded onto the sprint branch ({how}), commit {}",
            short_commit(commit)
        )),
        SprintEvent::FoldChecked {
            task,
            passed,
            gates,
        } => {
            let what = if gates.is_empty() {
                "the check".to_string()
            } else {
                format!("the check and the gates of {}", gates.join(", "))
            };
            let verdict = if *passed { "passed" } else { "failed" };
            Some(format!(
                "{task}  on the sprint branch after its fold, {what} {verdict}"
            ))
        }
        SprintEvent::SentHome { task, round, why } => Some(format!(
            "{task}  taken back off the sprint branch ({why}); round {round} starts at its tip"
        )),
        SprintEvent::Held {
            task,
            behind,
            overlap,
        } => Some(format!(
            "{task}  held back while {behind} runs: both touch {overlap}"
        )),
        SprintEvent::SprintStarted { .. }
        | SprintEvent::DirtyTree { .. }
        | SprintEvent::Branch { .. }
        | SprintEvent::Setup { .. }
        | SprintEvent::TaskStarted { .. }
        | SprintEvent::Verified { .. }
        | SprintEvent::SpawnStarted { .. }
        | SprintEvent::SpawnFinished { .. }
        | SprintEvent::Evaluated { .. }
        | SprintEvent::Regressed { .. }
        | SprintEvent::Warning { .. }
        | SprintEvent::TaskFinished { .. }
        | SprintEvent::SprintFinished { .. } => None,
    }
}

fn short_commit(commit: &str) -> &str {
    commit.get(..12).unwrap_or(commit)
}

/// The summary after the run (plain and live): how it ended, each task, usage per role.
pub(crate) fn summary_lines(name: &str, summary: &SprintSummary) -> Vec<String> {
    let done = summary
        .tasks
        .iter()
        .filter(|t| t.status == TaskStatus::Done)
        .count();
    let end = match summary.end {
        SprintEnd::Done => "done",
        SprintEnd::Blocked => "blocked",
        SprintEnd::RateLimited => "paused: rate limited, every retry used",
        SprintEnd::Cancelled => "cancelled",
        SprintEnd::DiskFull => "stopped: no space left on device",
    };
    let mut lines = vec![format!(
        "sprint {name}: {end}; {done} of {} tasks done (exit {})",
        summary.tasks.len(),
        summary.exit_code
    )];
    let width = summary
        .tasks
        .iter()
        .map(|t| t.id.as_str().len())
        .max()
        .unwrap_or(0);
    for t in &summary.tasks {
        let mut details = Vec::new();
        if t.rounds > 0 {
            details.push(format!(
                "{} round{}",
                t.rounds,
                if t.rounds == 1 { "" } else { "s" }
            ));
        }
        if let Some(a) = t.attribution {
            details.push(a.as_str().to_string());
        }
        if let Some(commit) = &t.commit {
            details.push(format!("commit {}", short_commit(commit)));
        }
        if let Some(reason) = &t.reason {
            details.push(reason.clone());
        }
        details.extend(t.warnings.iter().map(|w| format!("warning: {w}")));
        if t.roll_up.total != Usage::default() {
            details.push(usage_text(&t.roll_up.total));
        }
        lines.push(format!(
            "  {:<7}  {:<width$}  {}",
            t.status.as_str(),
            t.id.as_str(),
            details.join(", ")
        ));
    }
    lines.push(format!(
        "generator  {}",
        usage_text(&summary.usage.generator)
    ));
    lines.push(format!(
        "evaluator  {}",
        usage_text(&summary.usage.evaluator)
    ));
    for (provider, usage) in &summary.roll_up.by_provider {
        lines.push(format!("{:<9}  {}", provider.as_str(), usage_text(usage)));
    }
    lines.push(format!("total      {}", usage_text(&summary.roll_up.total)));
    match summary.end {
        SprintEnd::Done | SprintEnd::Blocked => {}
        SprintEnd::RateLimited | SprintEnd::Cancelled => {
            lines.push(
                "continue   corral sprint run (it goes on at the same task and round)".into(),
            );
        }
        SprintEnd::DiskFull => {
            lines.push(
                "continue   free some space, then corral sprint run (it goes on at the same task and round)"
                    .into(),
            );
        }
    }
    lines.push(format!("status     corral sprint status {name}"));
    lines.into_iter().map(|l| term::one_line(&l)).collect()
}

/// One running task on the live view.
#[derive(Debug)]
struct Running {
    round: u32,
    /// The spawn running, if one is.
    role: Option<Role>,
    provider: Option<ProviderId>,
    /// When its current step started.
    since: Instant,
    usage: Usage,
    activity: String,
    bar: Option<ProgressBar>,
}

/// The status line of a running task.
fn status_text(task: &TaskId, r: &Running, now: Instant) -> String {
    let s = now.saturating_duration_since(r.since).as_secs();
    let role = r.role.map_or("check", Role::as_str);
    let provider = r.provider.map(|p| format!("  {p}")).unwrap_or_default();
    format!(
        "▶ {task}  round {}  {role}{provider}  {:02}:{:02}  {}  {}",
        r.round,
        s / 60,
        s % 60,
        usage_text(&r.usage),
        short(&r.activity, 60)
    )
}

#[derive(Debug)]
struct Shared {
    style: Style,
    started: Instant,
    steps: Mutex<Steps>,
    running: Mutex<BTreeMap<TaskId, Running>>,
    /// The live view's bars (`Style::Live` only).
    multi: Option<MultiProgress>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Shared {
    /// A line of the log: above the status lines on a terminal, on stderr when piped.
    fn log(&self, text: &str) {
        let text = term::one_line(text);
        match self.style {
            Style::Json | Style::Quiet => {}
            Style::Plain => term::err_soon(format_args!(
                "[{:>7.1}s] {text}",
                self.started.elapsed().as_secs_f64()
            )),
            Style::Live => {
                if let Some(multi) = &self.multi {
                    let _ = multi.println(&text);
                }
            }
        }
    }

    fn redraw(&self) {
        if self.multi.is_none() {
            return;
        }
        let now = Instant::now();
        for (task, r) in lock(&self.running).iter() {
            if let Some(bar) = &r.bar {
                bar.set_message(term::one_line(&status_text(task, r, now)));
            }
        }
    }

    fn with_running(&self, task: &TaskId, f: impl FnOnce(&mut Running)) {
        if let Some(r) = lock(&self.running).get_mut(task) {
            f(r);
        }
    }

    /// Keeps the live view's running tasks in step with `event`.
    fn track(&self, event: &SprintEvent) {
        let Some(multi) = &self.multi else {
            return;
        };
        let now = Instant::now();
        match event {
            SprintEvent::TaskStarted { task, round, .. } => {
                let bar = ProgressStyle::with_template("{wide_msg}")
                    .ok()
                    .map(|style| {
                        let bar = multi.add(ProgressBar::new_spinner());
                        bar.set_style(style);
                        bar
                    });
                lock(&self.running).insert(
                    task.clone(),
                    Running {
                        round: *round,
                        role: None,
                        provider: None,
                        since: now,
                        usage: Usage::default(),
                        activity: "checking".into(),
                        bar,
                    },
                );
            }
            SprintEvent::SpawnStarted {
                task,
                round,
                role,
                provider,
                resumes,
                ..
            } => self.with_running(task, |r| {
                r.round = *round;
                r.role = Some(*role);
                r.provider = Some(*provider);
                r.since = now;
                r.usage = Usage::default();
                r.activity = if *resumes { "resuming" } else { "starting" }.into();
            }),
            SprintEvent::SpawnFinished { task, .. } => self.with_running(task, |r| {
                r.role = None;
                r.provider = None;
                r.since = now;
                r.activity = "checking".into();
            }),
            SprintEvent::Verified { task, round, .. }
            | SprintEvent::Evaluated { task, round, .. }
            | SprintEvent::Regressed { task, round, .. } => self.with_running(task, |r| {
                r.round = *round;
                r.since = now;
            }),
            SprintEvent::TaskFinished { task, .. } => {
                if let Some(r) = lock(&self.running).remove(task)
                    && let Some(bar) = r.bar
                {
                    bar.finish_and_clear();
                    multi.remove(&bar);
                }
            }
            SprintEvent::SprintStarted { .. }
            | SprintEvent::DirtyTree { .. }
            | SprintEvent::Branch { .. }
            | SprintEvent::Setup { .. }
            | SprintEvent::Warning { .. }
            | SprintEvent::WaveStarted { .. }
            | SprintEvent::Folded { .. }
            | SprintEvent::FoldChecked { .. }
            | SprintEvent::SentHome { .. }
            | SprintEvent::Held { .. }
            | SprintEvent::SprintFinished { .. } => {}
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
        let multi = (style == Style::Live).then(|| {
            let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stderr());
            multi.set_move_cursor(false);
            multi
        });
        SprintView {
            shared: Arc::new(Shared {
                style,
                started: Instant::now(),
                steps: Mutex::new(Steps::default()),
                running: Mutex::new(BTreeMap::new()),
                multi,
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
        self.shared.multi.as_ref()?;
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
        for (_, r) in std::mem::take(&mut *lock(&self.shared.running)) {
            if let Some(bar) = r.bar {
                bar.finish_and_clear();
            }
        }
        if let Some(multi) = &self.shared.multi {
            let _ = multi.clear();
        }
        term::flush();
    }
}

impl EventSink for SprintView {
    fn event(&self, event: &SprintEvent) {
        let shared = &self.shared;
        match shared.style {
            Style::Json => {
                if let Ok(line) = term::json(event) {
                    term::out_soon(format_args!("{line}"));
                }
                // The last event: out at once, not held.
                if matches!(event, SprintEvent::SprintFinished { .. }) {
                    term::flush();
                }
            }
            Style::Plain | Style::Live => {
                let line = lock(&shared.steps).line(event, Instant::now());
                if let Some(line) = line {
                    shared.log(&line);
                }
                shared.track(event);
                shared.redraw();
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
    fn activity(&self, text: impl Into<String>) {
        let text = text.into();
        self.shared.with_running(&self.task, |r| r.activity = text);
        self.shared.redraw();
    }
}

impl RunObserver for SpawnObserver {
    fn attempt_started(&self, attempt: u32, resume: Option<&SessionId>) {
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
        match event {
            AgentEvent::SessionStarted { .. } | AgentEvent::Thinking { .. } => {
                self.activity("thinking");
            }
            AgentEvent::Text { text } => self.activity(format!("writing: {}", short(text, 50))),
            AgentEvent::ToolUse { name, input, .. } => self.activity(tool_summary(name, input)),
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
        self.shared.log(&format!(
            "{}  round {}  {}: waiting {} before retrying ({reason})",
            self.task,
            self.round,
            self.role,
            humantime::format_duration(Duration::from_secs(wait.as_secs()))
        ));
        self.activity(format!(
            "waiting {}s ({})",
            wait.as_secs(),
            short(reason, 40)
        ));
    }

    fn account_wait(&self, _attempt: u32, provider: ProviderId, until: std::time::SystemTime) {
        let clock = crate::render::clock_utc(until);
        self.shared.log(&format!(
            "{}  round {}  {}: waiting for {provider} until {clock} UTC (another run found the \
             account rate-limited)",
            self.task, self.round, self.role
        ));
        self.activity(format!("waiting for {provider} until {clock}"));
    }

    fn cold_fallback(&self, _attempt: u32, stale: &SessionId) {
        self.shared.log(&format!(
            "{}  round {}  {}: session {stale} not found, the task runs cold with the full brief",
            self.task, self.round, self.role
        ));
    }
}

#[cfg(test)]
mod tests {
    use corral_ports::Outcome;
    use corral_sprint::{Attribution, RoleUsage, TaskSummary, UsageRollUp};

    use super::*;

    fn id(s: &str) -> TaskId {
        TaskId::new(s).unwrap()
    }

    fn usage(input: u64, output: u64, cost: f64) -> Usage {
        Usage {
            input: Some(input),
            output: Some(output),
            cost_usd: Some(cost),
            ..Usage::default()
        }
    }

    /// How the sprint of [`events`] ended.
    fn summary() -> SprintSummary {
        SprintSummary {
            end: SprintEnd::Blocked,
            exit_code: 3,
            tasks: vec![
                TaskSummary {
                    id: id("t1"),
                    status: TaskStatus::Done,
                    rounds: 2,
                    commit: Some("0123456789abcdef0123456789abcdef01234567".into()),
                    attribution: Some(Attribution::Clean),
                    reason: None,
                    warnings: Vec::new(),
                    usage: RoleUsage {
                        generator: usage(2400, 300, 0.02),
                        evaluator: usage(1200, 100, 0.01),
                    },
                    roll_up: roll_up(),
                },
                TaskSummary {
                    id: id("t2"),
                    status: TaskStatus::Blocked,
                    rounds: 1,
                    commit: None,
                    attribution: None,
                    reason: Some("the agent said: no\x1b[2J".into()),
                    warnings: vec!["the agent checked out elsewhere".into()],
                    usage: RoleUsage::default(),
                    roll_up: UsageRollUp::default(),
                },
            ],
            usage: RoleUsage {
                generator: usage(2400, 300, 0.02),
                evaluator: usage(1200, 100, 0.01),
            },
            roll_up: Box::new(roll_up()),
        }
    }

    /// t1's usage, the generator on Claude Code and the evaluator on Codex.
    fn roll_up() -> UsageRollUp {
        UsageRollUp {
            total: usage(3600, 400, 0.03),
            by_role: RoleUsage {
                generator: usage(2400, 300, 0.02),
                evaluator: usage(1200, 100, 0.01),
            },
            by_provider: [
                (ProviderId::Claude, usage(2400, 300, 0.02)),
                (ProviderId::Codex, usage(1200, 100, 0.01)),
            ]
            .into(),
        }
    }

    /// A two-task sprint: t1 regresses in round 1 and passes in round 2; t2 is blocked (its
    /// reason, written by an agent, holds control sequences), each event with its time.
    fn events() -> Vec<(u64, SprintEvent)> {
        let t1 = id("t1");
        let gen_started = |task: &TaskId, round, resumes| SprintEvent::SpawnStarted {
            task: task.clone(),
            round,
            role: Role::Generator,
            provider: ProviderId::Claude,
            model: None,
            resumes,
        };
        let summary = summary();
        vec![
            (
                0,
                SprintEvent::SprintStarted {
                    name: "demo".into(),
                    branch: "corral/demo".into(),
                    run_id: "run-1".into(),
                    resumed: false,
                },
            ),
            (
                0,
                SprintEvent::Branch {
                    branch: "corral/demo".into(),
                    created: true,
                },
            ),
            (
                0,
                SprintEvent::TaskStarted {
                    task: t1.clone(),
                    title: "Write t1".into(),
                    round: 0,
                    step: Step::PreVerify,
                },
            ),
            (
                400,
                SprintEvent::Verified {
                    task: t1.clone(),
                    round: 0,
                    step: Step::PreVerify,
                    passed: true,
                    gates: Vec::new(),
                    attribution: None,
                },
            ),
            (400, gen_started(&t1, 1, false)),
            (
                12_700,
                SprintEvent::SpawnFinished {
                    task: t1.clone(),
                    round: 1,
                    role: Role::Generator,
                    outcome: Some(Outcome::Succeeded),
                    valid: true,
                    usage: usage(1200, 150, 0.01),
                },
            ),
            (
                13_000,
                SprintEvent::Verified {
                    task: t1.clone(),
                    round: 1,
                    step: Step::PostVerify,
                    passed: false,
                    gates: vec!["crates/".into()],
                    attribution: Some(Attribution::Regressed),
                },
            ),
            (
                13_100,
                SprintEvent::Regressed {
                    task: t1.clone(),
                    round: 1,
                    patch: ".corral/sprints/demo/implement/t1/rounds/1/regressed.patch".into(),
                },
            ),
            (13_100, gen_started(&t1, 2, true)),
            (
                85_600,
                SprintEvent::SpawnFinished {
                    task: t1.clone(),
                    round: 2,
                    role: Role::Generator,
                    outcome: Some(Outcome::Succeeded),
                    valid: true,
                    usage: usage(1200, 150, 0.01),
                },
            ),
            (
                86_000,
                SprintEvent::Verified {
                    task: t1.clone(),
                    round: 2,
                    step: Step::PostVerify,
                    passed: true,
                    gates: Vec::new(),
                    attribution: Some(Attribution::Clean),
                },
            ),
            (
                86_000,
                SprintEvent::SpawnStarted {
                    task: t1.clone(),
                    round: 2,
                    role: Role::Evaluator,
                    provider: ProviderId::Codex,
                    model: Some("gpt-5".into()),
                    resumes: false,
                },
            ),
            (
                95_000,
                SprintEvent::SpawnFinished {
                    task: t1.clone(),
                    round: 2,
                    role: Role::Evaluator,
                    outcome: None,
                    valid: true,
                    usage: usage(1200, 100, 0.01),
                },
            ),
            (
                95_000,
                SprintEvent::Evaluated {
                    task: t1.clone(),
                    round: 2,
                    passed: true,
                    failed: Vec::new(),
                },
            ),
            (
                95_500,
                SprintEvent::TaskFinished {
                    task: t1.clone(),
                    status: TaskStatus::Done,
                    commit: Some("0123456789abcdef0123456789abcdef01234567".into()),
                    reason: None,
                },
            ),
        ]
        .into_iter()
        .chain(t2_events(summary))
        .collect()
    }

    /// The blocked task's events and the end.
    fn t2_events(summary: SprintSummary) -> Vec<(u64, SprintEvent)> {
        let t2 = id("t2");
        let gen_started = |task: &TaskId, round, resumes| SprintEvent::SpawnStarted {
            task: task.clone(),
            round,
            role: Role::Generator,
            provider: ProviderId::Claude,
            model: None,
            resumes,
        };
        vec![
            (
                95_500,
                SprintEvent::TaskStarted {
                    task: t2.clone(),
                    title: "Write t2\nforged line".into(),
                    round: 1,
                    step: Step::Generate,
                },
            ),
            (95_500, gen_started(&t2, 1, true)),
            (
                99_000,
                SprintEvent::Warning {
                    task: t2.clone(),
                    message: "the agent checked out elsewhere".into(),
                },
            ),
            (
                99_000,
                SprintEvent::SpawnFinished {
                    task: t2.clone(),
                    round: 1,
                    role: Role::Generator,
                    outcome: Some(Outcome::Succeeded),
                    valid: true,
                    usage: Usage::default(),
                },
            ),
            (
                99_100,
                SprintEvent::Evaluated {
                    task: t2.clone(),
                    round: 1,
                    passed: false,
                    failed: vec!["correctness".into(), "safety".into()],
                },
            ),
            (
                99_200,
                SprintEvent::TaskFinished {
                    task: t2.clone(),
                    status: TaskStatus::Blocked,
                    commit: None,
                    reason: Some("the agent said: no\x1b[2J".into()),
                },
            ),
            (99_200, SprintEvent::SprintFinished { summary }),
        ]
    }

    #[test]
    fn plain_lines_one_per_finished_step_then_the_summary() {
        let start = Instant::now();
        let mut steps = Steps::default();
        let mut out = Vec::new();
        let mut summary = None;
        for (ms, event) in events() {
            if let Some(line) = steps.line(&event, start + Duration::from_millis(ms)) {
                out.push(line);
            }
            if let SprintEvent::SprintFinished { summary: s } = &event {
                summary = Some(s.clone());
            }
        }
        out.push(String::new());
        out.extend(summary_lines("demo", &summary.unwrap()));
        let text = out.join("\n");
        assert!(!text.contains('\x1b'), "{text}");
        insta::assert_snapshot!(text);
    }

    #[test]
    fn a_full_disk_ends_with_the_summary_and_the_way_on() {
        let mut full = summary();
        full.end = SprintEnd::DiskFull;
        full.exit_code = SprintEnd::DiskFull.exit_code();
        if let Some(t2) = full.tasks.get_mut(1) {
            t2.status = TaskStatus::Running;
            t2.reason = None;
            t2.warnings = vec![
                "stopped here, the disk full: git add --all: Exited(128): error: unable to write new index file: No space left on device".into(),
            ];
        }
        insta::assert_snapshot!(summary_lines("demo", &full).join("\n"));
    }

    #[test]
    fn json_one_event_per_line_ending_with_the_summary() {
        let lines: Vec<String> = events()
            .iter()
            .map(|(_, e)| term::json(e).unwrap())
            .collect();
        for line in &lines {
            let back: serde_json::Value = serde_json::from_str(line).unwrap();
            assert!(back["event"].is_string(), "{line}");
        }
        let last: serde_json::Value = serde_json::from_str(lines.last().unwrap()).unwrap();
        assert_eq!(last["event"], "sprint-finished");
        assert_eq!(last["summary"]["exitCode"], 3);
        insta::assert_snapshot!(lines.join("\n"));
    }

    #[test]
    fn the_status_line_names_task_round_role_provider_and_activity() {
        let now = Instant::now();
        let running = Running {
            round: 2,
            role: Some(Role::Generator),
            provider: Some(ProviderId::Claude),
            since: now,
            usage: usage(1500, 40, 0.0123),
            activity: "Edit src/lib.rs".into(),
            bar: None,
        };
        let text = status_text(&id("t1"), &running, now + Duration::from_secs(65));
        assert_eq!(
            text,
            "▶ t1  round 2  generator  claude  01:05  in 1.5k out 40 $0.0123  Edit src/lib.rs"
        );
    }
}
