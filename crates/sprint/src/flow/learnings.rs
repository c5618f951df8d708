//! The sprint's learnings: read for a prompt (the latest, those of a task's dependencies
//! first) and appended in run order when a task is committed or folded.

use corral_contract::Signal;

use crate::error::SprintError;
use crate::file::Task;
use crate::layout::LEARNINGS_FILE;
use crate::prompt::{self, ShownLearning};

use super::Context;

/// The largest `learnings.ndjson` read, in bytes.
const LEARNINGS_LIMIT: u64 = 4 * 1024 * 1024;
/// The most learnings a prompt shows (the latest).
const LEARNINGS_SHOWN: usize = 50;

impl<'r, 'a> Context<'r, 'a> {
    /// Every learning of the tasks done so far, in the order they were learnt.
    pub(super) fn learnings(&self) -> Vec<ShownLearning> {
        let Ok(Some(bytes)) = self
            .layout
            .record()
            .and_then(|r| r.read_if_exists(LEARNINGS_FILE, LEARNINGS_LIMIT))
        else {
            return Vec::new();
        };
        let text = String::from_utf8_lossy(&bytes);
        let all: Vec<ShownLearning> = text
            .lines()
            .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
            .filter_map(|v| {
                Some(ShownLearning {
                    task: v.get("task")?.as_str()?.to_string(),
                    text: v.get("text")?.as_str()?.to_string(),
                    applies_to: v
                        .get("appliesTo")
                        .and_then(serde_json::Value::as_str)
                        .map(str::to_string),
                })
            })
            .collect();
        all
    }

    /// The learnings `task`'s generator is shown: those that apply to it
    /// ([`prompt::applies_to_task`]), the latest [`LEARNINGS_SHOWN`]. The same on a Ray worker,
    /// which gets the coordinator's `learnings.ndjson`.
    pub(super) fn learnings_for(&self, task: &Task) -> Vec<ShownLearning> {
        let all = self.learnings();
        let applying: Vec<ShownLearning> = all
            .into_iter()
            .filter(|l| prompt::applies_to_task(l, task))
            .collect();
        let skip = applying.len().saturating_sub(LEARNINGS_SHOWN);
        applying.into_iter().skip(skip).collect()
    }

    /// Appends the task's learnings to `learnings.ndjson`, unless a stopped run did already.
    pub(super) fn append_learnings(
        &self,
        task: &Task,
        round: u32,
        signals: &[Signal],
    ) -> Result<(), SprintError> {
        if self.learnings().iter().any(|l| l.task == task.id.as_str()) {
            return Ok(());
        }
        let mut lines = String::new();
        for signal in signals {
            if let Signal::Learning(l) = signal {
                let line = serde_json::json!({
                    "task": task.id.as_str(),
                    "round": round,
                    "text": l.text,
                    "context": l.context,
                    "appliesTo": l.applies_to,
                    "at": l.timestamp.as_str(),
                });
                lines.push_str(&line.to_string());
                lines.push('\n');
            }
        }
        if lines.is_empty() {
            return Ok(());
        }
        Ok(self
            .layout
            .record()?
            .append(LEARNINGS_FILE, lines.as_bytes())?)
    }
}
