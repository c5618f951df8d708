//! One job's log as the executor follows it: appended to the task's log file as it grows, and
//! read line by line once.
//!
//! The Jobs API answers `GET …/logs` with the whole log so far, on every poll (its only
//! incremental read is a WebSocket tail that the dashboard feeds from the log file once a
//! second, slower than the poll). What is new since the last poll is the part past the bytes
//! already taken; only that part is appended and read, and a line cut by the poll is read when
//! its end arrives. So a long-lived worker's log costs the coordinator its size once, not once
//! per poll.

use std::io::Write as _;
use std::path::PathBuf;

use serde::Deserialize;

/// The last stdout line of `corral sprint work --json`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub(crate) struct WorkerHandback {
    pub(crate) kind: String,
    pub(crate) status: String,
}

/// What the worker said so far, of what the executor acts on.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct WorkerSaid {
    /// Ready at its gate (`{"kind":"ready"}`).
    pub(crate) ready: bool,
    /// Its rounds are over (the sprint's `task-finished` event).
    pub(crate) rounds_over: bool,
    /// The last handback line it printed (`{"kind":"handback",…}`).
    pub(crate) handback: Option<WorkerHandback>,
}

/// A job's log followed poll by poll.
#[derive(Debug)]
pub(crate) struct JobLog {
    /// The task's copy of the log (`implement/<task>/ray-job-<n>.log`).
    path: PathBuf,
    /// Bytes of the job's log taken so far.
    taken: usize,
    /// The start of a line whose end has not arrived yet.
    partial: String,
    said: WorkerSaid,
    /// The worker's sprint events read since they were last taken ([`JobLog::take_events`]).
    events: Vec<serde_json::Map<String, serde_json::Value>>,
}

impl JobLog {
    /// A log copied to `path`.
    pub(crate) fn new(path: PathBuf) -> Self {
        Self {
            path,
            taken: 0,
            partial: String::new(),
            said: WorkerSaid::default(),
            events: Vec::new(),
        }
    }

    /// The worker's sprint events (its `--json` lines with an `event` key) read since the last
    /// call, in order: each is read once, whole lines only.
    pub(crate) fn take_events(&mut self) -> Vec<serde_json::Map<String, serde_json::Value>> {
        std::mem::take(&mut self.events)
    }

    /// What the worker said so far.
    pub(crate) fn said(&self) -> &WorkerSaid {
        &self.said
    }

    /// Takes the whole log so far (as `GET …/logs` returns it): appends and reads what is new.
    /// A log shorter than what was taken (a job's log is only ever appended to) is ignored.
    pub(crate) fn take(&mut self, whole: &str) {
        let Some(new) = whole.get(self.taken..).filter(|new| !new.is_empty()) else {
            return;
        };
        let appended = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
            .and_then(|mut file| file.write_all(new.as_bytes()));
        if let Err(e) = appended {
            // The copy is for people; what the executor acts on is read all the same.
            tracing::warn!(log = %self.path.display(), error = %e, "could not append the job's log");
        }
        self.taken = whole.len();
        self.partial.push_str(new);
        let Some(end) = self.partial.rfind('\n') else {
            return;
        };
        let lines: String = self.partial.drain(..=end).collect();
        for line in lines.lines() {
            self.read_line(line);
        }
    }

    /// Reads the line cut off by the last poll as a whole one: the job has ended, nothing follows.
    pub(crate) fn finish(&mut self) {
        let last = std::mem::take(&mut self.partial);
        self.read_line(&last);
    }

    fn read_line(&mut self, line: &str) {
        let line = line.trim();
        if !line.starts_with('{') {
            return;
        }
        let Ok(serde_json::Value::Object(object)) = serde_json::from_str(line) else {
            return;
        };
        let text = |key: &str| object.get(key).and_then(serde_json::Value::as_str);
        match text("kind") {
            Some("ready") => self.said.ready = true,
            Some("handback") => {
                if let Ok(handback) = serde_json::from_str::<WorkerHandback>(line) {
                    self.said.handback = Some(handback);
                }
            }
            _ => {}
        }
        let event = text("event").map(str::to_owned);
        self.said.rounds_over |= event.as_deref() == Some("task-finished");
        if event.is_some() && text("kind").is_none() {
            self.events.push(object);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log() -> (tempfile::TempDir, JobLog) {
        let dir = tempfile::tempdir().unwrap();
        let log = JobLog::new(dir.path().join("job.log"));
        (dir, log)
    }

    #[test]
    fn the_worker_is_read_for_its_gate_and_the_end_of_its_rounds() {
        let (_dir, mut log) = log();
        log.take("cloning\n");
        assert_eq!(log.said(), &WorkerSaid::default());
        let ready = "cloning\n{\"kind\":\"ready\",\"task\":\"a\",\"gate\":\"refs/x\"}\n";
        log.take(ready);
        assert!(log.said().ready);
        assert!(!log.said().rounds_over);
        let over = format!(
            "{ready}{{\"event\":\"task-started\",\"task\":\"a\"}}\n{{\"event\":\"task-finished\",\"task\":\"a\",\"status\":\"done\"}}\n"
        );
        log.take(&over);
        assert!(log.said().ready && log.said().rounds_over);
        // The sprint events, each once, in order; not the worker's own lines.
        let events: Vec<_> = log
            .take_events()
            .into_iter()
            .map(|e| e["event"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(events, ["task-started", "task-finished"]);
        log.take(&over);
        assert!(log.take_events().is_empty());
    }

    #[test]
    fn the_last_handback_line_is_found_among_the_workers_output() {
        let (_dir, mut log) = log();
        log.take("cloning\n{\"kind\":\"progress\",\"status\":\"x\"}\n{\"kind\":\"handback\",\"task\":\"a\",\"status\":\"blocked\"}\n");
        log.take("cloning\n{\"kind\":\"progress\",\"status\":\"x\"}\n{\"kind\":\"handback\",\"task\":\"a\",\"status\":\"blocked\"}\n{\"kind\":\"handback\",\"task\":\"a\",\"status\":\"done\",\"head\":\"abc\"}\n");
        assert_eq!(
            log.said().handback.as_ref().map(|h| h.status.as_str()),
            Some("done")
        );
        let (_dir, mut quiet) = self::log();
        quiet.take("nothing\n");
        assert!(quiet.said().handback.is_none());
    }

    #[test]
    fn a_line_cut_by_a_poll_is_read_when_its_end_arrives_and_the_copy_has_each_byte_once() {
        let (dir, mut log) = log();
        let whole =
            "a\n{\"kind\":\"ready\",\"task\":\"a\"}\n{\"kind\":\"handback\",\"status\":\"done\"}";
        let cut = whole.find("\"ready\"").unwrap();
        log.take(&whole[..cut]);
        assert!(!log.said().ready);
        log.take(&whole[..cut]);
        log.take(whole);
        assert!(log.said().ready);
        // The last line has no newline: read only once the job has ended.
        assert!(log.said().handback.is_none());
        log.finish();
        assert_eq!(
            log.said().handback.as_ref().map(|h| h.status.as_str()),
            Some("done")
        );
        let copy = std::fs::read_to_string(dir.path().join("job.log")).unwrap();
        assert_eq!(copy, whole);
        // A log that seems to have shrunk (another answer of a restarted dashboard) adds nothing.
        log.take("a\n");
        assert_eq!(
            std::fs::read_to_string(dir.path().join("job.log")).unwrap(),
            whole
        );
    }
}
