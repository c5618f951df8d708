//! A full disk ends a sprint like a pause, not like a crash.
//!
//! A sprint meets a full disk in git (`git add` cannot write an object: "No space left on
//! device"), in a check, or writing its own record, and any of these came back as a bare error
//! with neither the summary nor the way on. Since every step is written down before the next
//! starts, running again once there is room continues at the same step: so a full disk ends the
//! run with the summary of `sprint.json` as it stands, the failing step named in the running
//! task's warnings (for this summary only: the disk has no room to record it), and the resume
//! command ([`SprintEnd::DiskFull`], exit 1).

use super::{SprintError, SprintRun, read_state, summarize};
use crate::event::{SprintEnd, SprintEvent, SprintSummary};
use crate::layout::SprintLayout;
use crate::state::{SprintState, TaskStatus};

/// What git, a shell or the OS say when the disk (or a quota) is full.
const FULL: &[&str] = &["No space left on device", "Disk quota exceeded"];

/// Whether `text` (a message from elsewhere: a spawn's provider error) says the disk is full.
pub(super) fn names_full(text: &str) -> bool {
    FULL.iter().any(|f| text.contains(f))
}

/// Whether `error`, or any error under it, is a full disk.
pub(super) fn is_full(error: &SprintError) -> bool {
    let mut next: Option<&dyn std::error::Error> = Some(error);
    while let Some(e) = next {
        let text = e.to_string();
        if FULL.iter().any(|f| text.contains(f)) {
            return true;
        }
        next = e.source();
    }
    false
}

/// The run's end on a full disk: the summary of the state on disk, with `error` named.
pub(super) fn stopped(run: &SprintRun<'_>, error: &SprintError) -> SprintSummary {
    let layout = SprintLayout::new(run.project_root, &run.file.sprint.name);
    let state = read_state(&layout.state_file())
        .unwrap_or_else(|_| SprintState::fresh(run.file, &(run.options.now)()));
    let mut summary = summarize(&state, SprintEnd::DiskFull);
    let cause = format!("stopped here, the disk full: {error}");
    let cause = cause.lines().map(str::trim).collect::<Vec<_>>().join(" ");
    match summary
        .tasks
        .iter_mut()
        .find(|t| t.status == TaskStatus::Running)
    {
        Some(task) => task.warnings.push(cause),
        None => {
            if let Some(task) = summary.tasks.first_mut() {
                task.warnings.push(cause);
            }
        }
    }
    run.events.event(&SprintEvent::SprintFinished {
        summary: summary.clone(),
    });
    summary
}
