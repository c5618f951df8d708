//! The file contract between Corral and an agent: what the agent writes, and how Corral checks it.
//!
//! An agent reports its result by writing `signals.json` itself, with its file-writing tool:
//! `{"schemaVersion": 1, "signals": [{"type": "<kind>", "timestamp": "<RFC 3339>", ...}]}`. This
//! crate owns that format and everything around it:
//! - the per-kind signal types ([`Signal`], [`SignalKind`]), with serde shapes, garde rules and
//!   a JSON Schema ([`signals_json_schema`], checked in at `docs/schema/signals.schema.json`);
//! - [`Contract`]: which kinds a flow step accepts, and how many;
//! - validation in stages with one error per stage and every content issue collected with its
//!   JSON path ([`validate_signals_file`], [`validate_signals_str`], [`SignalsError`]), with
//!   schema-version migration;
//! - the prompt section telling the agent where and what to write
//!   ([`render_contract_section`]), the follow-up prompt when it got it wrong
//!   ([`corrective_message`]), and the Markdown sidecars ([`render_evaluation_md`],
//!   [`render_signals_summary`]);
//! - `session-id.txt`: its reader ([`read_session_id`]); the session-id rule itself is the
//!   ports' ([`SessionId`], re-exported here), as are the run directory's file names;
//! - [`read_untrusted_file`]: reading any file an agent could have replaced (a FIFO, a link to a
//!   device) without blocking and within a size limit; the readers above use it, and so does
//!   every caller that reads a file from a place the agent could write.
//!
//! It must NOT know about processes, providers or their CLIs, settings, or where a run directory
//! lives: it reads the one file it is pointed at, and renders strings for the caller to send or
//! write. It does no I/O beyond reading the files it is pointed at. Of the workspace it uses only
//! `corral-ports`, for the types every layer shares (ADR 0006).

mod contract;
mod corrective;
mod document;
mod error;
mod evaluation;
mod life;
mod markdown;
mod migrate;
mod render;
mod rules;
mod schema;
mod session_id;
mod sidecar;
mod signal;
mod timestamp;
mod untrusted;
mod validate;

pub use contract::{Contract, Multiplicity};
pub use corral_ports::run_dir::SESSION_ID_FILE;
pub use corral_ports::{SESSION_ID_MAX_LEN, SessionId, SessionIdError, validate_session_id};
pub use corrective::{CORRECTIVE_MAX_ISSUES, corrective_message};
pub use document::{
    CURRENT_SCHEMA_VERSION, SIGNALS_FILE_MAX_BYTES, SIGNALS_FILE_NAME, SignalsDocument,
};
pub use error::{Issue, IssueStage, SignalsError};
pub use evaluation::{Criterion, Dimension, Evaluation, EvaluationStatus, FLOOR_DIMENSIONS};
pub use life::{
    AGENTS_CONTEXT_FILES, AgentsMdProposal, IdeatedTicket, IdeatedTickets, PLANNED_TASK_ID_MAX_LEN,
    PlannedTask, RefinedTicket, SetupScript, TaskPlan, VerifyScript, dependency_cycle,
    task_id_problem,
};
pub use render::render_contract_section;
pub use schema::signals_json_schema;
pub use session_id::{SessionIdFileError, read_session_id};
pub use sidecar::{EVALUATION_SIDECAR_FILE, render_evaluation_md, render_signals_summary};
pub use signal::{
    COMMIT_SUBJECT_MAX_CHARS, Change, CommitMessage, Decision, GATE_TIMEOUT_MAX_MS, Gate, Learning,
    Note, PrContent, Signal, SignalKind, TaskBlocked, TaskComplete, TaskVerified, VerifyGates,
};
pub use timestamp::{Timestamp, TimestampError, check_rfc3339};
pub use untrusted::{
    LINK_OUT_OF_DIRECTORY, UntrustedFileError, read_untrusted_file,
    read_untrusted_file_within_directory,
};
pub use validate::{ValidatedSignals, validate_signals_file, validate_signals_str};
