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
