//! The sprint file's `[hooks]`: a command run when the sprint reaches a moment someone may want
//! to hear about (a task finished or blocked, a pause on a rate limit or a spend cap, the
//! sprint's end), with the moment's event, the line `events.jsonl` holds, on its standard input.
//!
//! Off the sprint's path: the [`Journal`](crate::journal::Journal) offers each event to a
//! [`HookQueue`] and goes on; [`run_hooks`] takes the queue's jobs one at a time beside the
//! sprint, each bounded by `[hooks] timeout_ms` (then its process group is killed by the command
//! runner). A hook that fails, hangs or cannot start is written in the sprint's `hooks.log` and
//! never stops or slows the sprint; at the sprint's end the hooks still queued run (each within
//! its time) before the run returns, so that `sprint_finished` is heard.
//!
//! A hook is the user's own command from the sprint file, run as a check is: through the
//! command runner, in the sandbox an agent gets (`Confinement::Sandboxed`), in the project's
//! work tree, with Corral's record read-only and the network the user's allow-list gives a
//! check (docs/security.md). The event reaches it through a file of the record
//! (`hooks/<n>-<moment>.json`, named by `CORRAL_EVENT_FILE`) that the shell opens as its input
//! before the hook's own text runs; `CORRAL_HOOK` names the moment.

use std::collections::VecDeque;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};
use std::task::{Poll, Waker};
use std::time::Duration;

use corral_ports::{CancellationToken, CommandEnd, CommandRunner, CommandSpec};

use crate::event::{SprintEnd, SprintEvent};
use crate::file::Hooks;
use crate::layout::SprintLayout;
use crate::state::TaskStatus;

/// The log of the hooks that ran, one line each, in the sprint's directory.
pub const HOOKS_LOG_FILE: &str = "hooks.log";
/// The directory of the events handed to hooks, in the sprint's directory.
pub const HOOK_EVENTS_DIR: &str = "hooks";

/// A moment a hook may be run at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookMoment {
    /// A task ended: done, blocked or skipped.
    TaskFinished,
    /// A task was blocked.
    Blocked,
    /// A provider's account is held by a rate limit (once per hold), or the sprint paused on
    /// one.
    RateLimited,
    /// The sprint paused at a spend cap.
    BudgetExhausted,
    /// The sprint ended, however it ended.
    SprintFinished,
}

impl HookMoment {
    /// The moment's name (`CORRAL_HOOK`, the log, the event file's name).
    pub fn as_str(self) -> &'static str {
        match self {
            HookMoment::TaskFinished => "task-finished",
            HookMoment::Blocked => "blocked",
            HookMoment::RateLimited => "rate-limited",
            HookMoment::BudgetExhausted => "budget-exhausted",
            HookMoment::SprintFinished => "sprint-finished",
        }
    }

    /// The command `hooks` runs at this moment, if any.
    fn command(self, hooks: &Hooks) -> Option<&str> {
        match self {
            HookMoment::TaskFinished => hooks.task_finished.as_deref(),
            HookMoment::Blocked => hooks.blocked.as_deref(),
            HookMoment::RateLimited => hooks.rate_limited.as_deref(),
            HookMoment::BudgetExhausted => hooks.budget_exhausted.as_deref(),
            HookMoment::SprintFinished => hooks.sprint_finished.as_deref(),
        }
    }

    /// The moments of a remote worker's event as the coordinator reads it from the job's log
    /// (the `--json` object, by its `event` name and `status`): a task's end and a hold, the
    /// moments a worker's task meets; the sprint's own moments are the coordinator's.
    pub fn of_relayed(event: &serde_json::Map<String, serde_json::Value>) -> Vec<HookMoment> {
        let text = |key: &str| event.get(key).and_then(serde_json::Value::as_str);
        match text("event") {
            Some("task-finished") if text("status") == Some("blocked") => {
                vec![HookMoment::TaskFinished, HookMoment::Blocked]
            }
            Some("task-finished") => vec![HookMoment::TaskFinished],
            Some("rate-limit-hold") => vec![HookMoment::RateLimited],
            _ => Vec::new(),
        }
    }

    /// The moments `event` is, in the order their hooks run.
    pub fn of(event: &SprintEvent) -> Vec<HookMoment> {
        match event {
            SprintEvent::TaskFinished { status, .. } => match status {
                TaskStatus::Blocked => vec![HookMoment::TaskFinished, HookMoment::Blocked],
                TaskStatus::Done
                | TaskStatus::Skipped
                | TaskStatus::Pending
                | TaskStatus::Running => vec![HookMoment::TaskFinished],
            },
            SprintEvent::SprintFinished { summary } => match summary.end {
                SprintEnd::RateLimited => {
                    vec![HookMoment::RateLimited, HookMoment::SprintFinished]
                }
                SprintEnd::BudgetExhausted => {
                    vec![HookMoment::BudgetExhausted, HookMoment::SprintFinished]
                }
                SprintEnd::Done
                | SprintEnd::Blocked
                | SprintEnd::Cancelled
                | SprintEnd::DiskFull
                | SprintEnd::PermanentFailure => vec![HookMoment::SprintFinished],
            },
            // Every hold, once (the journal tells each once), though the sprint goes on; a
            // hand-over follows a hold already told.
            SprintEvent::RateLimitHold { .. } => vec![HookMoment::RateLimited],
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
            | SprintEvent::WaveStarted { .. }
            | SprintEvent::Folded { .. }
            | SprintEvent::FoldChecked { .. }
            | SprintEvent::SentHome { .. }
            | SprintEvent::Held { .. }
            | SprintEvent::FailedOver { .. }
            | SprintEvent::RecordUnwritable { .. } => Vec::new(),
        }
    }
}

/// A hook to run: its moment, its command and the event's line.
#[derive(Debug)]
struct HookJob {
    moment: HookMoment,
    command: String,
    line: String,
}

#[derive(Debug, Default)]
struct Queue {
    jobs: VecDeque<HookJob>,
    closed: bool,
    waker: Option<Waker>,
}

/// The hooks waiting to run: filled by the journal as the sprint goes, emptied by
/// [`run_hooks`] beside it.
#[derive(Debug)]
pub(crate) struct HookQueue {
    hooks: Hooks,
    queue: Mutex<Queue>,
}

impl HookQueue {
    pub(crate) fn new(hooks: Hooks) -> Self {
        HookQueue {
            hooks,
            queue: Mutex::new(Queue::default()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues the hooks of `moments`, with `line`, the event as `events.jsonl` holds it.
    pub(crate) fn offer_moments(&self, moments: Vec<HookMoment>, line: &str) {
        let jobs: Vec<HookJob> = moments
            .into_iter()
            .filter_map(|moment| {
                moment.command(&self.hooks).map(|command| HookJob {
                    moment,
                    command: command.to_string(),
                    line: line.to_string(),
                })
            })
            .collect();
        if jobs.is_empty() {
            return;
        }
        let mut queue = self.lock();
        if queue.closed {
            return;
        }
        queue.jobs.extend(jobs);
        if let Some(waker) = queue.waker.take() {
            waker.wake();
        }
    }

    /// No more hooks will be queued: [`run_hooks`] ends once the queued ones ran.
    pub(crate) fn close(&self) {
        let mut queue = self.lock();
        queue.closed = true;
        if let Some(waker) = queue.waker.take() {
            waker.wake();
        }
    }

    /// The next hook to run; `None` once the queue is closed and empty.
    async fn next(&self) -> Option<HookJob> {
        std::future::poll_fn(|cx| {
            let mut queue = self.lock();
            if let Some(job) = queue.jobs.pop_front() {
                return Poll::Ready(Some(job));
            }
            if queue.closed {
                return Poll::Ready(None);
            }
            queue.waker = Some(cx.waker().clone());
            Poll::Pending
        })
        .await
    }
}

/// Runs the queued hooks one at a time until the queue is closed and empty, each in
/// `work_tree` within its time, writing each one's end in `hooks.log`.
pub(crate) async fn run_hooks(
    queue: &HookQueue,
    commands: &dyn CommandRunner,
    layout: &SprintLayout,
    work_tree: &Path,
    now: fn() -> String,
) {
    let timeout = Duration::from_millis(queue.hooks.timeout_ms);
    // The hooks' own: a stopped sprint still tells its end (each hook within its time).
    let cancel = CancellationToken::new();
    let mut n = 0u32;
    while let Some(job) = queue.next().await {
        n += 1;
        let outcome = run_one(&job, n, commands, layout, work_tree, timeout, &cancel).await;
        let line = format!(
            "{} {} {}: {}\n",
            now(),
            job.moment.as_str(),
            crate::inert::inert(&job.command).replace('\n', " "),
            outcome
        );
        if let Ok(record) = layout.record() {
            // Best effort, as a log is: through the record's handle, never through a link.
            let _ = record.append(HOOKS_LOG_FILE, line.as_bytes());
        }
    }
}

/// Runs one hook; what became of it, one line for the log.
async fn run_one(
    job: &HookJob,
    n: u32,
    commands: &dyn CommandRunner,
    layout: &SprintLayout,
    work_tree: &Path,
    timeout: Duration,
    cancel: &CancellationToken,
) -> String {
    let rel = PathBuf::from(HOOK_EVENTS_DIR).join(format!("{n}-{}.json", job.moment.as_str()));
    let written = layout
        .record()
        .and_then(|record| record.replace(&rel, job.line.as_bytes()));
    if let Err(e) = written {
        return format!("not run: its event could not be written ({e})");
    }
    let event_file = layout.root().join(&rel);
    // The event on the hook's standard input: the shell opens it before the hook's text runs.
    let script = format!("exec <\"$CORRAL_EVENT_FILE\" || exit 125\n{}", job.command);
    let mut spec = CommandSpec::shell(&script, work_tree, timeout);
    spec.read_only = vec![layout.state_root()];
    spec.env = vec![
        ("CORRAL_HOOK".to_string(), job.moment.as_str().to_string()),
        (
            "CORRAL_EVENT_FILE".to_string(),
            event_file.display().to_string(),
        ),
    ];
    match commands.run(spec, cancel).await {
        Ok(out) if out.success() => "ok".to_string(),
        Ok(out) => {
            let said = format!("{}{}", out.stderr.text, out.stdout.text);
            let said = said.trim();
            let end = match out.end {
                CommandEnd::Exited(code) => format!("failed (exit {code})"),
                CommandEnd::Signalled(signal) => format!("failed (signal {signal})"),
                CommandEnd::TimedOut => {
                    format!("killed after {} s (timeout_ms)", timeout.as_secs())
                }
                CommandEnd::Cancelled => "cancelled".to_string(),
                CommandEnd::LimitExceeded(exceeded) => format!("stopped at its {exceeded}"),
            };
            if said.is_empty() {
                end
            } else {
                let said = crate::prompt::cut(said, 400).replace('\n', " | ");
                format!("{end}: {}", crate::inert::inert(&said))
            }
        }
        Err(e) => format!("could not run: {e}"),
    }
}

/// Runs `sprint` to its end with `hooks` beside it, and returns once both ended: the sprint's
/// outcome, after the hooks it queued ran.
pub(crate) async fn beside<T>(
    sprint: impl Future<Output = T>,
    hooks: impl Future<Output = ()>,
) -> T {
    let mut sprint = std::pin::pin!(sprint);
    let mut hooks = std::pin::pin!(hooks);
    let mut out: Option<T> = None;
    let mut hooks_done = false;
    std::future::poll_fn(|cx| {
        if out.is_none()
            && let Poll::Ready(value) = sprint.as_mut().poll(cx)
        {
            out = Some(value);
        }
        if !hooks_done && hooks.as_mut().poll(cx).is_ready() {
            hooks_done = true;
        }
        match (hooks_done, out.take()) {
            (true, Some(value)) => Poll::Ready(value),
            (_, value) => {
                out = value;
                Poll::Pending
            }
        }
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn relayed(json: &str) -> Vec<HookMoment> {
        match serde_json::from_str::<serde_json::Value>(json) {
            Ok(serde_json::Value::Object(event)) => HookMoment::of_relayed(&event),
            other => panic!("not an object: {other:?}"),
        }
    }

    /// A Ray worker's events reach the coordinator as JSON: its task's end and its holds are
    /// the moments the coordinator's own events would be.
    #[test]
    fn a_workers_relayed_events_are_the_moments_of_the_coordinators_own() {
        assert_eq!(
            relayed(r#"{"event":"task-finished","task":"t1","status":"done"}"#),
            [HookMoment::TaskFinished]
        );
        assert_eq!(
            relayed(r#"{"event":"task-finished","task":"t1","status":"blocked"}"#),
            [HookMoment::TaskFinished, HookMoment::Blocked]
        );
        assert_eq!(
            relayed(r#"{"event":"rate-limit-hold","task":"t1","provider":"claude"}"#),
            [HookMoment::RateLimited]
        );
        assert!(relayed(r#"{"event":"spawn-started","task":"t1"}"#).is_empty());
        assert!(relayed(r#"{"event":"sprint-finished"}"#).is_empty());
        assert!(relayed(r#"{"task":"t1"}"#).is_empty());
    }
}
