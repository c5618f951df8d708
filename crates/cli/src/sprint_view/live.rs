//! The live view of a running sprint, on a terminal: a status line per running task (task,
//! round, role, provider, elapsed, tokens, cost, what its agent does), redrawn below the log of
//! finished steps (the plain view's lines). Every line is fitted to the terminal's width, a
//! tool call's path cut at the front so that its file name stays.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use corral_ports::{ProviderId, Usage};
use corral_sprint::{Role, SprintEvent, TaskId};
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::lock;
use super::words::usage_text;
use crate::render::Activity;
use crate::{display, term};

/// One running task on the live view.
#[derive(Debug)]
pub(super) struct Running {
    pub(super) round: u32,
    /// The spawn running, if one is.
    pub(super) role: Option<Role>,
    pub(super) provider: Option<ProviderId>,
    /// When its current step started.
    pub(super) since: Instant,
    pub(super) usage: Usage,
    pub(super) activity: Activity,
    pub(super) bar: Option<ProgressBar>,
    /// When its agent's CLI last printed anything (or its spawn started).
    pub(super) heard: Instant,
    /// Whether its agent waits on purpose (a backoff, a rate limit's reset): not silent then.
    pub(super) waiting: bool,
}

/// How long a running agent may print nothing before its status line says so.
pub(super) const SILENT_AFTER: Duration = Duration::from_secs(30);

/// How wide a status line's activity is when the terminal's width is not known.
const ACTIVITY_COLUMNS: usize = 60;

/// The status line of a running task; given the terminal's width, the activity gets what is
/// left of it.
pub(super) fn status_text(
    task: &TaskId,
    r: &Running,
    now: Instant,
    columns: Option<usize>,
) -> String {
    let role = r.role.map_or("check", Role::as_str);
    let provider = r.provider.map(|p| format!("  {p}")).unwrap_or_default();
    let quiet = now.saturating_duration_since(r.heard);
    let silent = if r.role.is_some() && !r.waiting && quiet >= SILENT_AFTER {
        format!("silent for {} s  ", quiet.as_secs())
    } else {
        String::new()
    };
    let head = format!(
        "▶ {task}  round {}  {role}{provider}  {}  {}  {silent}",
        r.round,
        display::duration(now.saturating_duration_since(r.since)),
        usage_text(&r.usage),
    );
    let room = columns.map_or(ACTIVITY_COLUMNS, |w| {
        w.saturating_sub(display::width(&term::one_line(&head)) + 1)
    });
    format!("{head}{}", r.activity.within(room))
}

/// The status lines and the log above them.
#[derive(Debug)]
pub(super) struct Live {
    multi: MultiProgress,
    running: Mutex<BTreeMap<TaskId, Running>>,
}

impl Live {
    pub(super) fn new() -> Self {
        let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stderr());
        multi.set_move_cursor(false);
        Live {
            multi,
            running: Mutex::new(BTreeMap::new()),
        }
    }

    /// A line of the log, above the status lines, cut to the terminal's width.
    pub(super) fn println(&self, text: &str) {
        let text = match display::terminal_width() {
            Some(columns) => display::cut(text, columns),
            None => text.to_string(),
        };
        let _ = self.multi.println(&text);
    }

    pub(super) fn redraw(&self) {
        let now = Instant::now();
        let columns = display::terminal_width();
        for (task, r) in lock(&self.running).iter() {
            if let Some(bar) = &r.bar {
                bar.set_message(term::one_line(&status_text(task, r, now, columns)));
            }
        }
    }

    pub(super) fn with_running(&self, task: &TaskId, f: impl FnOnce(&mut Running)) {
        if let Some(r) = lock(&self.running).get_mut(task) {
            f(r);
        }
    }

    /// Keeps the running tasks in step with `event`.
    pub(super) fn track(&self, event: &SprintEvent) {
        let now = Instant::now();
        match event {
            SprintEvent::TaskStarted { task, round, .. } => {
                let bar = ProgressStyle::with_template("{wide_msg}")
                    .ok()
                    .map(|style| {
                        let bar = self.multi.add(ProgressBar::new_spinner());
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
                        heard: now,
                        waiting: false,
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
                r.heard = now;
                r.waiting = false;
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
                    self.multi.remove(&bar);
                }
            }
            SprintEvent::SprintStarted { .. }
            | SprintEvent::DirtyTree { .. }
            | SprintEvent::Branch { .. }
            | SprintEvent::Setup { .. }
            | SprintEvent::Warning { .. }
            | SprintEvent::FailedOver { .. }
            | SprintEvent::RateLimitHold { .. }
            | SprintEvent::RecordUnwritable { .. }
            | SprintEvent::WaveStarted { .. }
            | SprintEvent::Folded { .. }
            | SprintEvent::FoldChecked { .. }
            | SprintEvent::SentHome { .. }
            | SprintEvent::Held { .. }
            | SprintEvent::SprintFinished { .. } => {}
        }
    }

    /// Clears the status lines.
    pub(super) fn finish(&self) {
        for (_, r) in std::mem::take(&mut *lock(&self.running)) {
            if let Some(bar) = r.bar {
                bar.finish_and_clear();
            }
        }
        let _ = self.multi.clear();
    }
}
