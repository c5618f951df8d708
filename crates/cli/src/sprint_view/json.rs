//! The JSON view of a running sprint (`--json`): each [`SprintEvent`] as one JSON line on
//! stdout, the last one, `sprint-finished`, holding the summary. Its keys are the events' own
//! (serde), their text escaped by `term`.

use corral_sprint::SprintEvent;

use crate::term;

/// Writes `event` as one line; the last one goes out at once, not held.
pub(super) fn write(event: &SprintEvent) {
    if let Ok(line) = term::json(event) {
        term::out_soon(format_args!("{line}"));
    }
    if matches!(event, SprintEvent::SprintFinished { .. }) {
        term::flush();
    }
}
