//! The JSON the commands print, typed so that its schema is generated from what prints it: the
//! lines `corral run --json` prints ([`RunLine`], one JSON object a line, its `type` naming
//! which), `runs list --json`'s lines ([`RunsListLine`]), `config show --json`
//! ([`SettingJson`]), `providers --json` ([`ProvidersJson`]) and `sprint work --json`'s lines
//! ([`WorkLine`]); keys in camelCase as in every JSON Corral writes (ADR 0012). Their JSON
//! Schemas are in `docs/schema/` (`run-output`, `runs-list`, `config-show`, `providers`,
//! `sprint-work`, and `sprint-status` for `sprint status --json`). A test here keeps them
//! current (`UPDATE_SCHEMA=1 cargo test -p corral-cli schema` rewrites them), and the
//! integration tests check real outputs against them.

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
    /// The limit (`[limits]`) the CLI's process tree went over, when that ended the run
    /// (outcome `limit-exceeded`, exit 10); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit_exceeded: Option<&'a corral_ports::LimitExceeded>,
    /// Writes outside the allowed paths; `null` when the check did not run.
    pub stray_writes: Option<&'a [String]>,
    /// Whether the git-cleanliness check ran.
    pub stray_check: StrayCheck,
    /// Why it did not.
    pub stray_check_why: Option<String>,
    /// Why `run.json` could not be written, if it could not.
    pub record_error: Option<String>,
}

/// One line of `corral runs list --json`: a run's record, or one that could not be read.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(untagged)]
pub(crate) enum RunsListLine<'a> {
    /// A record that was read: `run.json` as it is.
    Record(ListedRun<'a>),
    /// A run directory whose record could not be read.
    Unreadable(UnreadableRun),
}

/// A run's record as `runs list --json` prints it.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ListedRun<'a> {
    /// `run.json`'s fields.
    #[serde(flatten)]
    pub record: &'a corral_compose::RunRecord,
    /// `true` (and only then present) when the record says the run is going on but the
    /// `corral` that ran it is gone: it will never be finished.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub supervisor_gone: bool,
}

/// A run directory whose `run.json` could not be read.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct UnreadableRun {
    /// The directory's name (the run id), when it is text.
    pub run_id: Option<String>,
    /// Why the record could not be read.
    pub unreadable: String,
}

/// One setting as `corral config show --json` prints it (the output is an array of them).
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub(crate) struct SettingJson<'a> {
    /// The dotted key (`run.provider`).
    pub key: &'a str,
    /// Its value, as JSON.
    pub value: &'a serde_json::Value,
    /// Where it came from: `default`, a file's path, `env <VARIABLE>`, `flag`.
    pub source: String,
}

/// `corral providers --json`: each provider's capability row, by provider id.
pub(crate) type ProvidersJson = std::collections::BTreeMap<String, corral_ports::Capabilities>;

/// One of the worker's own lines of `corral sprint work --json`, its `kind` naming which (the
/// sprint's events, `event` naming which, come between them).
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub(crate) enum WorkLine<'a> {
    /// The worker waits at its gate (`--gate`): it runs no round until the ref is on the remote.
    Ready {
        /// The task.
        task: &'a str,
        /// The ref it waits for.
        gate: &'a str,
    },
    /// The worker is done with its task (finished or paused): what it hands back to the
    /// coordinator.
    Handback {
        /// The task.
        task: &'a str,
        /// The task's status: `done`, `blocked`, `skipped`, `running` (paused), `pending`.
        status: &'a str,
        /// The round it reached.
        round: u32,
        /// The commit at the head of the task branch, when the task is done.
        head: Option<&'a str>,
        /// The task branch on the remote.
        branch: &'a str,
        /// The ref of the task's record on the remote.
        record: &'a str,
    },
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

    /// One line of `corral sprint work --json`: a sprint event as `sprint run --json` prints
    /// it (`event` naming which), or one of the worker's own lines (`kind` naming which).
    #[derive(schemars::JsonSchema)]
    #[serde(untagged)]
    #[expect(
        dead_code,
        reason = "only its schema is used: the lines are printed by each type"
    )]
    enum SprintWorkLine<'a> {
        /// A step of the sprint.
        Event(corral_sprint::SprintEvent),
        /// The worker's own line.
        Worker(super::WorkLine<'a>),
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
        check(
            "runs-list.schema.json",
            &written::<super::RunsListLine<'static>>(),
        );
        check(
            "config-show.schema.json",
            &written::<Vec<super::SettingJson<'static>>>(),
        );
        check("providers.schema.json", &written::<super::ProvidersJson>());
        check(
            "sprint-work.schema.json",
            &written::<SprintWorkLine<'static>>(),
        );
    }
}
