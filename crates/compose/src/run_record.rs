//! The run directory and its `run.json` record: the caller's record of a run, a format other
//! programs read (`corral runs`, a sprint tool), kept here so that every caller writes it alike.
//!
//! `run.json` is written when the run starts (outcome `running`, with the supervisor's pid and
//! start time), again the moment a session id is seen, and at the end: a run that ends in any
//! way the supervisor lives through leaves its outcome, and one whose supervisor was killed
//! leaves the session id and a supervisor that `runs list` and `runs follow` can see is gone.
//! Writing the record never ends the run: a full disk or a removed run directory is retried
//! (freeing the directory's reserve, recreating the directory) and otherwise reported.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

use corral_contract::{UntrustedFileError, read_untrusted_file};
use corral_ports::run_dir::RUN_FILE;
use corral_ports::{Outcome, ProviderId, Usage};
use serde::{Deserialize, Serialize};

/// The largest `run.json` read back.
const RECORD_MAX_BYTES: u64 = 16 * 1024 * 1024;

/// The process that supervises a run: enough to tell later whether it still lives.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Supervisor {
    /// Its pid.
    pub pid: u32,
    /// Its start time in clock ticks since boot (`/proc/<pid>/stat` field 22): a later process
    /// with the same pid has another.
    #[serde(alias = "start_ticks")]
    pub start_ticks: Option<u64>,
}

/// The start time of `pid` in clock ticks since boot, from `/proc`.
fn start_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses: count fields after the last `)`.
    stat.get(stat.rfind(')')? + 1..)?
        .split_whitespace()
        .nth(19)?
        .parse()
        .ok()
}

impl Supervisor {
    /// This process.
    pub fn this_process() -> Self {
        let pid = std::process::id();
        Supervisor {
            pid,
            start_ticks: start_ticks(pid),
        }
    }

    /// Whether the process is still the one that started the run.
    pub fn is_alive(&self) -> bool {
        match (start_ticks(self.pid), self.start_ticks) {
            (Some(now), Some(then)) => now == then,
            (Some(_), None) => true,
            (None, _) => false,
        }
    }
}

/// The record of one run, written at its start and rewritten at its end.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunRecord {
    /// The run id (the directory's name).
    #[serde(alias = "run_id")]
    pub run_id: String,
    /// The provider.
    pub provider: ProviderId,
    /// The model asked for, if any.
    pub model: Option<String>,
    /// The agent's working directory.
    pub cwd: PathBuf,
    /// When the run started (RFC 3339).
    #[serde(alias = "started_at")]
    pub started_at: String,
    /// When it ended, once it has.
    #[serde(alias = "finished_at")]
    pub finished_at: Option<String>,
    /// `running`, or the outcome.
    pub outcome: String,
    /// corral's exit code, once known.
    #[serde(alias = "exit_code")]
    pub exit_code: Option<u8>,
    /// The last session id.
    #[serde(alias = "session_id")]
    pub session_id: Option<String>,
    /// Whether signals.json validated; `None` when not checked.
    #[serde(alias = "signals_valid")]
    pub signals_valid: Option<bool>,
    /// Why it did not, if it did not.
    #[serde(alias = "signals_error")]
    pub signals_error: Option<String>,
    /// The signal kinds found.
    #[serde(alias = "signal_kinds")]
    pub signal_kinds: Vec<String>,
    /// Starts of the CLI, over all provider runs (corrective retries included).
    pub attempts: u32,
    /// Provider runs: 1 plus the corrective retries.
    #[serde(alias = "provider_runs")]
    pub provider_runs: u32,
    /// Usage over all attempts.
    pub usage: Usage,
    /// Wall time in ms.
    #[serde(alias = "duration_ms")]
    pub duration_ms: Option<u64>,
    /// The error, if the run failed.
    pub error: Option<String>,
    /// The agent's final answer (its last result text), once known.
    #[serde(default)]
    pub result: Option<String>,
    /// The command that resumes this run's session once it has one: `corral resume <run-id>`
    /// for a `corral run` (the session id itself is `sessionId`). `null` for a spawn that its
    /// owner resumes (a sprint round's role, the preflight's request). Records written before
    /// hold the longer `corral run --provider … --resume <session>` command.
    #[serde(alias = "resume_command")]
    pub resume_command: Option<String>,
    /// The session the run was asked to resume, when that session was not found and the task
    /// ran once cold, in a new session instead (`session_id` then names the new one).
    #[serde(default)]
    #[serde(alias = "cold_fallback_from")]
    pub cold_fallback_from: Option<String>,
    /// The limit (`[limits]`) the run's process tree went over, when that ended it (outcome
    /// `limit-exceeded`): which, its cap and the highest use seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit_exceeded: Option<corral_ports::LimitExceeded>,
    /// What the sandbox enforced.
    #[serde(default)]
    pub attestation: Option<corral_ports::Attestation>,
    /// The `corral` process running it (absent in records written before it was recorded).
    #[serde(default)]
    pub supervisor: Option<Supervisor>,
}

impl RunRecord {
    /// Whether the record says the run is going on but its supervisor is gone: it will never be
    /// finished.
    pub fn supervisor_gone(&self) -> bool {
        self.finished_at.is_none() && self.supervisor.is_some_and(|s| !s.is_alive())
    }

    /// Whether the run was refused before its CLI started (the CLI missing or untested, the
    /// sandbox refused, a flag the CLI cannot honour): it has an outcome of its own and no
    /// session, so there is nothing to resume, follow or pay for.
    pub fn refused_before_start(&self) -> bool {
        self.finished_at.is_some()
            && self.session_id.is_none()
            && self.provider_runs <= 1
            && [Outcome::NotStarted, Outcome::SpawnFailed]
                .iter()
                .any(|o| o.as_str() == self.outcome)
    }
}

/// A new run id: UTC time, provider, and a random suffix, sortable by start time.
pub fn new_run_id(provider: ProviderId) -> String {
    let stamp = humantime::format_rfc3339_seconds(SystemTime::now()).to_string();
    let compact: String = stamp
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .collect();
    format!("{compact}-{provider}-{:06x}", fastrand::u32(..0x100_0000))
}

/// Creates a new, empty run directory under `root`: never one that exists (two runs started in
/// the same second with the same suffix get two directories, not one merged).
pub fn create_run_dir(root: &Path, provider: ProviderId) -> io::Result<(String, PathBuf)> {
    create_run_dir_with(root, || new_run_id(provider))
}

/// [`create_run_dir`] with the ids from `next_id`: an id whose directory exists is never used,
/// the next one is tried.
fn create_run_dir_with(
    root: &Path,
    mut next_id: impl FnMut() -> String,
) -> io::Result<(String, PathBuf)> {
    std::fs::create_dir_all(root)?;
    let mut last = io::Error::other("no run id tried");
    for _ in 0..64 {
        let id = next_id();
        let dir = root.join(&id);
        match std::fs::create_dir(&dir) {
            Ok(()) => return Ok((id, dir)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = e,
            Err(e) => return Err(e),
        }
    }
    Err(last)
}

/// What Corral writes into the directory holding its state so that git ignores all of it, as
/// uv does for `.venv`: `*` matches the file itself too, so `git status` stays clean.
pub const STATE_GITIGNORE: &str = "# Written by corral: its run records stay out of git.\n*\n";

/// Makes sure git ignores the runs of a project at `root` whose `run.runs_dir` is `runs_dir`: a
/// `.gitignore` holding `*` goes into the hidden directory a relative `runs_dir` starts with
/// (`.corral` for the default `.corral/runs`), or else into the runs root itself, whose content
/// is all Corral's. An existing `.gitignore` is left as it is (the user may have written it), and
/// a concurrent run writing it at the same moment is not an error.
pub fn ignore_state_dir(root: &Path, runs_dir: &Path) -> io::Result<()> {
    let first = runs_dir.components().next();
    let dir = match first {
        Some(std::path::Component::Normal(name))
            if name.to_string_lossy().starts_with('.') && runs_dir.is_relative() =>
        {
            root.join(name)
        }
        Some(_) | None => root.join(runs_dir),
    };
    std::fs::create_dir_all(&dir)?;
    let created = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(dir.join(".gitignore"));
    match created {
        Ok(mut file) => io::Write::write_all(&mut file, STATE_GITIGNORE.as_bytes()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e),
    }
}

/// The run's `run.json`, shared by the run, its observer and its signal handler.
#[derive(Debug)]
pub struct Journal {
    dir: PathBuf,
    record: Mutex<RunRecord>,
}

impl Journal {
    /// A journal for `record` in `dir`, with a reserve of disk space for its last write.
    pub fn new(dir: PathBuf, record: RunRecord) -> Self {
        corral_engine::create_reserve(&dir, "record");
        Journal {
            dir,
            record: Mutex::new(record),
        }
    }

    /// The run directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// A copy of the record as it is now.
    pub fn snapshot(&self) -> RunRecord {
        match self.record.lock() {
            Ok(record) => record.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Changes the record and writes it (see [`write_record`]).
    pub fn update(&self, change: impl FnOnce(&mut RunRecord)) -> io::Result<()> {
        let record = {
            let mut guard = match self.record.lock() {
                Ok(guard) => guard,
                Err(poisoned) => poisoned.into_inner(),
            };
            change(&mut guard);
            guard.clone()
        };
        write_record(&self.dir, &record)
    }

    /// Releases the reserve once the record is final.
    pub fn close(&self) {
        let _ = std::fs::remove_file(
            self.dir
                .join(format!("{}record", corral_engine::RESERVE_PREFIX)),
        );
    }
}

/// Writes the record next to the run's other files, atomically; a full disk or a removed
/// directory is retried once (see `corral_engine::write_record_file`).
pub fn write_record(dir: &Path, record: &RunRecord) -> io::Result<()> {
    let json = serde_json::to_vec_pretty(record).map_err(io::Error::other)?;
    corral_engine::write_record_file(&dir.join(RUN_FILE), &json)
}

/// Why a run record could not be read.
#[derive(Debug, thiserror::Error)]
pub enum RunRecordError {
    /// The file could not be read (missing, not a regular file, too large, an I/O error).
    /// Retryable: no, unless the run is still writing it.
    #[error("cannot read {source}")]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        source: UntrustedFileError,
    },
    /// The file is not a run record. Not retryable.
    #[error("{} is not a run record: {source}", path.display())]
    Malformed {
        /// The file.
        path: PathBuf,
        /// What the parser said.
        source: serde_json::Error,
    },
}

/// Reads a run's record. The agent may have replaced it: it is read without blocking and within
/// a size limit.
pub fn read_record(dir: &Path) -> Result<RunRecord, RunRecordError> {
    let path = dir.join(RUN_FILE);
    let bytes = read_untrusted_file(&path, RECORD_MAX_BYTES).map_err(|source| {
        RunRecordError::Unreadable {
            path: path.clone(),
            source,
        }
    })?;
    serde_json::from_slice(&bytes).or_else(|source| {
        // Cut short by a crash in the middle of an in-place write: the copy written first is
        // whole (it exists only while bound read-only into a sandbox, so the agent cannot
        // plant it; see `corral_engine::write_record_file`).
        read_untrusted_file(&corral_engine::record_copy(&path), RECORD_MAX_BYTES)
            .ok()
            .and_then(|copy| serde_json::from_slice(&copy).ok())
            .ok_or(RunRecordError::Malformed { path, source })
    })
}

/// Now, as RFC 3339.
pub fn now() -> String {
    humantime::format_rfc3339_millis(SystemTime::now()).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_runs_never_share_a_directory() {
        let root = tempfile::tempdir().unwrap();
        let (a, dir_a) = create_run_dir(root.path(), ProviderId::Claude).unwrap();
        let (b, dir_b) = create_run_dir(root.path(), ProviderId::Claude).unwrap();
        assert_ne!(a, b);
        assert_ne!(dir_a, dir_b);
        assert!(dir_a.is_dir() && dir_b.is_dir());
        // Two runs that draw the same id (same second, same suffix): the second gets the next.
        let mut ids = ["x".to_string(), "x".to_string(), "y".to_string()].into_iter();
        let mut next = || ids.next().unwrap_or_default();
        let (first, _) = create_run_dir_with(root.path(), &mut next).unwrap();
        let (second, _) = create_run_dir_with(root.path(), &mut next).unwrap();
        assert_eq!((first.as_str(), second.as_str()), ("x", "y"));
        // Only ever the same id: an error, never a shared directory.
        assert!(create_run_dir_with(root.path(), || "x".to_string()).is_err());
    }

    #[test]
    fn this_process_is_alive_and_a_recycled_pid_is_not() {
        let me = Supervisor::this_process();
        assert!(me.start_ticks.is_some());
        assert!(me.is_alive());
        let recycled = Supervisor {
            start_ticks: me.start_ticks.map(|t| t + 1),
            ..me
        };
        assert!(!recycled.is_alive());
        let gone = Supervisor {
            pid: u32::MAX,
            start_ticks: None,
        };
        assert!(!gone.is_alive());
    }
}
