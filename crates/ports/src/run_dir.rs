//! The run directory: the file contract on disk between a caller, the engine and the agent.
//!
//! Every name is defined here once; the engine writes some of these files, the agent writes
//! `signals.json`, and callers (the `corral` binary, a sprint tool) read them all.

/// The prompt as sent, the contract section included (written by the caller).
pub const PROMPT_FILE: &str = "prompt.md";
/// The agent's structured result (written by the agent, validated by `corral-contract`).
pub const SIGNALS_FILE: &str = "signals.json";
/// The provider session id, one line (written by the engine the moment it is known).
pub const SESSION_ID_FILE: &str = "session-id.txt";
/// Where and with what the session was made, beside `session-id.txt` (written by the engine).
pub const SESSION_META_FILE: &str = "session.json";
/// The execution log, one JSON object per line (written by the engine).
pub const EVENTS_FILE: &str = "events.jsonl";
/// The caller's record of the run: outcome, session, usage, attestation.
pub const RUN_FILE: &str = "run.json";

/// The raw stream files of each attempt (`raw/attempt-N.stdout`, `.stderr`), written by the
/// engine.
pub const RAW_STREAMS_DIR: &str = "raw";

/// The copy beside a record file (`.NAME.next`) that the engine writes first when it writes the
/// file in place, so that a write cut short (or a reader racing it) always finds one whole
/// version: the file's old one, or the new one in the copy, which keeps it until the next
/// write. Corral makes it before a sandbox starts and binds it read-only there with the file, so
/// the agent cannot plant one; it is removed when the run's last sandbox is gone.
pub fn record_copy(path: &std::path::Path) -> std::path::PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!(".{name}.next"))
}
