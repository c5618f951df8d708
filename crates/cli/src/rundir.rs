//! The run directory and its `run.json` record.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use corral_ports::{ProviderId, Usage};
use serde::{Deserialize, Serialize};

/// The record of one run, written at its start and rewritten at its end.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RunRecord {
    /// The run id (the directory's name).
    pub run_id: String,
    /// The provider.
    pub provider: ProviderId,
    /// The model asked for, if any.
    pub model: Option<String>,
    /// The agent's working directory.
    pub cwd: PathBuf,
    /// When the run started (RFC 3339).
    pub started_at: String,
    /// When it ended, once it has.
    pub finished_at: Option<String>,
    /// `running`, or the outcome.
    pub outcome: String,
    /// corral's exit code, once known.
    pub exit_code: Option<u8>,
    /// The last session id.
    pub session_id: Option<String>,
    /// Whether signals.json validated; `None` when not checked.
    pub signals_valid: Option<bool>,
    /// Why it did not, if it did not.
    pub signals_error: Option<String>,
    /// The signal kinds found.
    pub signal_kinds: Vec<String>,
    /// Starts of the CLI, over all provider runs (corrective retries included).
    pub attempts: u32,
    /// Provider runs: 1 plus the corrective retries.
    pub provider_runs: u32,
    /// Usage over all attempts.
    pub usage: Usage,
    /// Wall time in ms.
    pub duration_ms: Option<u64>,
    /// The error, if the run failed.
    pub error: Option<String>,
    /// The command that resumes this run's session.
    pub resume_command: Option<String>,
    /// What the sandbox enforced.
    #[serde(default)]
    pub attestation: Option<corral_ports::Attestation>,
}

/// A new run id: UTC time, provider, and a short random suffix, sortable by start time.
pub fn new_run_id(provider: ProviderId) -> String {
    let stamp = humantime::format_rfc3339_seconds(SystemTime::now()).to_string();
    let compact: String = stamp
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .collect();
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let salt = (nanos ^ std::process::id().rotate_left(16)) & 0xff_ffff;
    format!("{compact}-{provider}-{salt:06x}")
}

/// Writes the record next to the run's other files.
pub fn write_record(dir: &Path, record: &RunRecord) -> anyhow::Result<()> {
    let json = serde_json::to_vec_pretty(record)?;
    corral_engine::write_atomic(&dir.join("run.json"), &json)?;
    Ok(())
}

/// Reads a run's record.
pub fn read_record(dir: &Path) -> anyhow::Result<RunRecord> {
    let path = dir.join("run.json");
    let text = std::fs::read_to_string(&path)
        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
    serde_json::from_str(&text)
        .map_err(|e| anyhow::anyhow!("{} is not a run record: {e}", path.display()))
}

/// Now, as RFC 3339.
pub fn now() -> String {
    humantime::format_rfc3339_millis(SystemTime::now()).to_string()
}
