//! The lines `corral run --json` prints: one JSON object a line, its `type` naming which, keys in
//! camelCase as in every JSON Corral writes (ADR 0012). Their JSON Schema is
//! `docs/schema/run-output.schema.json`, generated from [`RunLine`]; `sprint status --json`'s
//! is `docs/schema/sprint-status.schema.json`. A test here keeps both current
//! (`UPDATE_SCHEMA=1 cargo test -p corral-cli schema` rewrites them), and the integration tests
//! check real outputs against them.

use std::path::Path;

use corral_ports::{AgentEvent, ProviderId, SessionId, StrayCheck, Usage};
use serde::Serialize;

/// One line of `corral run --json`.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(
    tag = "type",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
pub(crate) enum RunLine<'a> {
    /// An attempt starts: cold, or resuming a session.
    Attempt {
        /// The attempt, from 1.
        attempt: u32,
        /// The session it resumes, if it does.
        resume: Option<&'a SessionId>,
    },
    /// What the agent did or reported, as the execution log has it.
    Event {
        /// The attempt it came in.
        attempt: u32,
        /// The event.
        event: &'a AgentEvent,
    },
    /// The run waits before it retries.
    Backoff {
        /// The attempt that failed.
        attempt: u32,
        /// How long it waits, in milliseconds.
        wait_ms: u64,
        /// Why (`exponential backoff`, `until the reported reset time`).
        reason: &'a str,
    },
    /// Another run found the account rate-limited: the next spawn waits until `until`.
    AccountWait {
        /// The attempt that waits.
        attempt: u32,
        /// The provider whose account is held.
        provider: ProviderId,
        /// Until when, RFC 3339 with milliseconds.
        until: String,
        /// How long that is from now, in milliseconds.
        wait_ms: u64,
    },
    /// The last line: how the run ended.
    Summary(Box<RunSummary<'a>>),
}

/// The last line of `corral run --json`.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RunSummary<'a> {
    /// `succeeded`, `recovered`, or how it failed (`idle-timeout`, `rate-limited`, …).
    pub outcome: &'a str,
    /// corral's exit code.
    pub exit_code: u8,
    /// The last session id.
    pub session_id: Option<&'a str>,
    /// The run directory.
    pub run_dir: &'a Path,
    /// Whether `signals.json` validated; `null` when it was not checked.
    pub signals_valid: Option<bool>,
    /// The signal kinds found.
    pub signal_kinds: &'a [String],
    /// Tokens and cost over every attempt.
    pub usage: &'a Usage,
    /// The cost in US dollars, when the CLI reported one (also in `usage`).
    pub cost_usd: Option<f64>,
    /// Starts of the CLI.
    pub attempts: u32,
    /// The error, if the run failed.
    pub error: Option<&'a str>,
    /// The agent's final answer.
    pub result: Option<&'a str>,
    /// The command that resumes the run (`corral resume <run-id>`).
    pub resume_command: Option<String>,
    /// The session the run was asked to resume when it was gone and the task ran cold.
    pub cold_fallback_from: Option<&'a str>,
    /// Writes outside the allowed paths; `null` when the check did not run.
    pub stray_writes: Option<&'a [String]>,
    /// Whether the git-cleanliness check ran.
    pub stray_check: StrayCheck,
    /// Why it did not.
    pub stray_check_why: Option<String>,
    /// Why `run.json` could not be written, if it could not.
    pub record_error: Option<String>,
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    /// Compares (or, with `UPDATE_SCHEMA` set, rewrites) `docs/schema/<name>`.
    fn check(name: &str, schema: &schemars::Schema) {
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../docs/schema")
            .join(name);
        let fresh = serde_json::to_string_pretty(schema).unwrap() + "\n";
        if std::env::var_os("UPDATE_SCHEMA").is_some() {
            std::fs::write(&path, &fresh).unwrap();
        }
        let current = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            current == fresh,
            "docs/schema/{name} is stale; run `UPDATE_SCHEMA=1 cargo test -p corral-cli schema` to refresh"
        );
    }

    /// The schema of what Corral prints as `T`.
    fn written<T: schemars::JsonSchema>() -> schemars::Schema {
        schemars::generate::SchemaSettings::draft2020_12()
            .for_serialize()
            .into_generator()
            .into_root_schema_for::<T>()
    }

    #[test]
    fn the_checked_in_output_schemas_are_current() {
        check(
            "run-output.schema.json",
            &written::<super::RunLine<'static>>(),
        );
        check(
            "sprint-status.schema.json",
            &written::<crate::sprint::StatusJson<'static>>(),
        );
    }
}
