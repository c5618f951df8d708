//! The plain view of a running sprint: one line per finished step on stderr (task, round, role
//! or step, outcome, how long it took), each after the time since the sprint started; the live
//! view writes the same lines above its status lines. Then the summary, in both.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use corral_ports::Usage;
use corral_sprint::{Role, SprintEnd, SprintEvent, SprintSummary, Step, TaskId, TaskStatus};

use super::words::{short_commit, usage_text};
use crate::{display, term};

/// Writes one line of the plain log: the time since the sprint started, then the text, cut to
/// `columns` when a width is known.
pub(super) fn write(since_start: Duration, text: &str, columns: Option<usize>) {
    let text = match columns {
        Some(columns) => display::cut(text, columns.saturating_sub(PREFIX_COLUMNS)),
        None => text.to_string(),
    };
    term::err_soon(format_args!(
        "[{:>8}] {text}",
        display::duration(since_start)
    ));
}

/// The time prefix, `[  2m 5s] `, in columns.
const PREFIX_COLUMNS: usize = 11;

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
                    display::duration(took)
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
                    display::duration(now.saturating_duration_since(began))
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
                    display::duration(took)
                )
            }
            SprintEvent::Regressed { task, round, patch } => {
                let took = self.step_time(task, now);
                format!(
                    "{task}  round {round}  {:<10}  the change is saved in {patch}, the tree reset  {}",
                    "regressed",
                    display::duration(took)
                )
            }
            SprintEvent::Warning { task, message } => format!("{task}  warning: {message}"),
            SprintEvent::RecordUnwritable { .. }
            | SprintEvent::WaveStarted { .. }
            | SprintEvent::Folded { .. }
            | SprintEvent::FoldChecked { .. }
            | SprintEvent::SentHome { .. }
            | SprintEvent::Held { .. }
            | SprintEvent::RateLimitHold { .. }
            | SprintEvent::FailedOver { .. }
            | SprintEvent::DirtyTree { .. } => parallel_text(event)?,
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
                format!("{text}  {}", display::duration(took))
            }
            // The summary follows on stdout.
            SprintEvent::SprintFinished { .. } => return None,
        };
        Some(term::one_line(&text))
    }
}

/// The line of the events that are no task's step, or need no step's time: a parallel run's
/// own (`--jobs` above 1: which tasks run at once, and each fold onto the sprint's branch), the
/// record's, and a provider's rate-limit hold and the role's hand-over.
fn parallel_text(event: &SprintEvent) -> Option<String> {
    match event {
        SprintEvent::RecordUnwritable { file, message } => Some(format!(
            "the sprint's record of events ({file}) cannot be written: {message}"
        )),
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
        SprintEvent::RateLimitHold {
            task,
            round,
            role,
            provider,
            until,
        } => Some(format!(
            "{task}  round {round}  {role}: {provider}'s account is held until {}",
            display::recorded_time(until)
        )),
        SprintEvent::FailedOver {
            task,
            round,
            role,
            from,
            held_until,
            to,
        } => Some(format!(
            "{task}  round {round}  {role}: {from} held until {}, continued on {to}",
            display::recorded_time(held_until)
        )),
        SprintEvent::DirtyTree { paths, action } => Some(format!(
            "uncommitted changes {action}: {}",
            paths.join(", ")
        )),
        SprintEvent::SprintStarted { .. }
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
        SprintEnd::PermanentFailure => "stopped: a provider cannot be used as set up",
        SprintEnd::BudgetExhausted => "paused: a spend cap was reached",
    };
    let mut lines = vec![format!(
        "sprint {name}: {end}; {done} of {} tasks done (exit {})",
        summary.tasks.len(),
        summary.exit_code
    )];
    let mut rows = Vec::new();
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
        rows.push(vec![
            t.status.as_str().to_string(),
            t.id.as_str().to_string(),
            term::one_line(&details.join(", ")),
        ]);
    }
    // Whole, not fitted to the terminal: the summary is what stays on the screen.
    lines.extend(
        display::table(None, &[], rows, None)
            .into_iter()
            .map(|line| format!("  {line}")),
    );
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
        SprintEnd::PermanentFailure => {
            lines.push(
                "continue   fix what the stopped task's last warning names, then corral sprint run \
                 (it goes on at the same task and round)"
                    .into(),
            );
        }
        SprintEnd::BudgetExhausted => {
            lines.push(
                "continue   raise the cap the paused task's last warning names, then corral sprint \
                 run (it goes on at the same task and round)"
                    .into(),
            );
        }
    }
    lines.push(format!("status     corral sprint status {name}"));
    lines.into_iter().map(|l| term::one_line(&l)).collect()
}
