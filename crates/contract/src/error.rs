//! What can be wrong with a `signals.json`: one error variant per validation stage, each naming
//! the file and, where there is one, the JSON path; and the [`Issue`] list that the schema, rule
//! and contract stages collect.
//!
//! Retry semantics: every variant except [`SignalsError::Unreadable`] is about what the agent
//! wrote, so it is not retryable as is, but the agent can be asked to correct it (see
//! [`SignalsError::is_correctable`] and [`crate::corrective_message`]).

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

use serde::Serialize;

/// One problem found in a signals document, with the JSON path where it is.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct Issue {
    /// Where, e.g. `signals[2].gates[0].command`; `$` is the root.
    pub path: String,
    /// What is wrong, written for the agent that will fix it.
    pub message: String,
    /// Which stage found it.
    pub stage: IssueStage,
}

impl Issue {
    pub(crate) fn new(
        path: impl Into<String>,
        message: impl Into<String>,
        stage: IssueStage,
    ) -> Self {
        Self {
            path: path.into(),
            message: message.into(),
            stage,
        }
    }
}

impl fmt::Display for Issue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

/// The validation stage that found an [`Issue`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum IssueStage {
    /// The shape: a missing or unknown field, a wrong JSON type, an unknown signal kind.
    Schema,
    /// A value rule: an empty text, a bad timestamp, a number out of range, an evaluation rule.
    Rule,
    /// The flow's contract: a kind this step does not accept, or the wrong number of a kind.
    Contract,
}

/// Why a `signals.json` was not accepted.
#[derive(Debug, thiserror::Error)]
pub enum SignalsError {
    /// The file is larger than [`crate::SIGNALS_FILE_MAX_BYTES`]; it was not read.
    /// Not retryable as is; the agent can be asked to correct it (write a smaller file).
    #[error("{}: signals file is too large ({size} bytes; the limit is {limit})", file.display())]
    TooLarge {
        /// The file.
        file: PathBuf,
        /// Its size in bytes (at least the bytes seen, if it grew while being read).
        size: u64,
        /// The limit in bytes.
        limit: u64,
    },
    /// There is no file at the path: the agent did not write it (or wrote it elsewhere).
    /// Not retryable as is; the agent can be asked to correct it (write the file).
    #[error("{}: signals file is missing", file.display())]
    Missing {
        /// The path where the file was expected.
        file: PathBuf,
    },
    /// Something other than a regular file is at the path (a FIFO, a device, a directory, a
    /// socket); it was not opened for reading, so it cannot hang or flood the reader.
    /// Not retryable as is; the agent can be asked to correct it (write a regular file).
    #[error("{}: signals file is {kind}, not a regular file; it was not read", file.display())]
    NotAFile {
        /// The path.
        file: PathBuf,
        /// What is there instead, e.g. `a FIFO`.
        kind: &'static str,
    },
    /// The file exists but could not be read (permissions, an I/O error).
    /// Retryable: reading again may succeed; it is not something the agent can correct.
    #[error("{}: signals file could not be read: {source}", file.display())]
    Unreadable {
        /// The file.
        file: PathBuf,
        /// The I/O error.
        source: io::Error,
    },
    /// The file is not JSON (or not UTF-8).
    /// Not retryable as is; the agent can be asked to correct it.
    #[error("{}: invalid JSON at line {line}, column {column}: {message}", file.display())]
    InvalidJson {
        /// The file.
        file: PathBuf,
        /// 1-based line of the error.
        line: usize,
        /// 1-based column of the error (0 when the input ended early on an empty line).
        column: usize,
        /// The parser's description.
        message: String,
    },
    /// The JSON root (`$`) is not an object (an array, `null`, ...).
    /// Not retryable as is; the agent can be asked to correct it.
    #[error("{}: at `$`: the root must be an object, found {found}", file.display())]
    RootNotObject {
        /// The file.
        file: PathBuf,
        /// What the root is instead, e.g. `an array`.
        found: &'static str,
    },
    /// The root has no `schemaVersion`.
    /// Not retryable as is; the agent can be asked to correct it.
    #[error("{}: at `schemaVersion`: missing; the current version is {current}", file.display())]
    SchemaVersionMissing {
        /// The file.
        file: PathBuf,
        /// The version to write.
        current: u32,
    },
    /// `schemaVersion` is not a non-negative integer (a string, `1.0`, `-1`, ...).
    /// Not retryable as is; the agent can be asked to correct it.
    #[error("{}: at `schemaVersion`: expected a whole number, found {found}", file.display())]
    SchemaVersionNotInteger {
        /// The file.
        file: PathBuf,
        /// The value found, as compact JSON (shortened if long).
        found: String,
    },
    /// `schemaVersion` is newer than this crate understands.
    /// Not retryable as is; the agent can be asked to correct it (write the supported version).
    #[error("{}: at `schemaVersion`: version {found} is newer than the supported version {supported}", file.display())]
    SchemaVersionTooNew {
        /// The file.
        file: PathBuf,
        /// The version found.
        found: u64,
        /// The newest version this crate reads.
        supported: u32,
    },
    /// `schemaVersion` is older than the current version, and the migration chain has no step
    /// from `missing_from`.
    /// Not retryable as is; the agent can be asked to correct it (write the current version).
    #[error("{}: at `schemaVersion`: version {found} cannot be migrated to {target}: no migration from version {missing_from}", file.display())]
    MigrationGap {
        /// The file.
        file: PathBuf,
        /// The version found.
        found: u32,
        /// The version the chain should reach.
        target: u32,
        /// The first version with no step.
        missing_from: u32,
    },
    /// A migration step refused the document.
    /// Not retryable as is; the agent can be asked to correct it (write the current version).
    #[error("{}: at `schemaVersion`: version {found} could not be migrated (step from version {from}): {message}", file.display())]
    MigrationFailed {
        /// The file.
        file: PathBuf,
        /// The version found.
        found: u32,
        /// The version the failing step reads.
        from: u32,
        /// Why the step refused.
        message: String,
    },
    /// The document has the right version but its content breaks the schema, a rule or the
    /// contract: every issue found, across all signals, in document order.
    /// Not retryable as is; the agent can be asked to correct it.
    #[error("{}: {} problem(s) in the signals; first at `{}`: {}", file.display(), issues.len(), first_path(issues), first_message(issues))]
    Invalid {
        /// The file.
        file: PathBuf,
        /// Every issue found (never empty).
        issues: Vec<Issue>,
    },
}

fn first_path(issues: &[Issue]) -> &str {
    issues.first().map_or("$", |issue| issue.path.as_str())
}

fn first_message(issues: &[Issue]) -> &str {
    issues.first().map_or("", |issue| issue.message.as_str())
}

impl SignalsError {
    /// The file the error is about.
    #[must_use]
    pub fn file(&self) -> &Path {
        match self {
            Self::TooLarge { file, .. }
            | Self::Missing { file }
            | Self::NotAFile { file, .. }
            | Self::Unreadable { file, .. }
            | Self::InvalidJson { file, .. }
            | Self::RootNotObject { file, .. }
            | Self::SchemaVersionMissing { file, .. }
            | Self::SchemaVersionNotInteger { file, .. }
            | Self::SchemaVersionTooNew { file, .. }
            | Self::MigrationGap { file, .. }
            | Self::MigrationFailed { file, .. }
            | Self::Invalid { file, .. } => file,
        }
    }

    /// Whether asking the agent to fix its file (on the resumed session) can cure this error.
    /// False only for [`SignalsError::Unreadable`], which is the machine's problem.
    #[must_use]
    pub fn is_correctable(&self) -> bool {
        match self {
            Self::Unreadable { .. } => false,
            Self::TooLarge { .. }
            | Self::Missing { .. }
            | Self::NotAFile { .. }
            | Self::InvalidJson { .. }
            | Self::RootNotObject { .. }
            | Self::SchemaVersionMissing { .. }
            | Self::SchemaVersionNotInteger { .. }
            | Self::SchemaVersionTooNew { .. }
            | Self::MigrationGap { .. }
            | Self::MigrationFailed { .. }
            | Self::Invalid { .. } => true,
        }
    }

    /// The problems as a list of issues: the collected ones for [`SignalsError::Invalid`], one
    /// issue describing the failure for every other variant. Used by the corrective message.
    #[must_use]
    pub fn issues(&self) -> Vec<Issue> {
        let one = |path: &str, message: String| vec![Issue::new(path, message, IssueStage::Schema)];
        match self {
            Self::TooLarge { size, limit, .. } => one(
                "$",
                format!("the file is {size} bytes; it must be at most {limit} bytes"),
            ),
            Self::Missing { .. } => one("$", "the file does not exist".to_owned()),
            Self::NotAFile { kind, .. } => one(
                "$",
                format!("the path holds {kind}; write a regular file there"),
            ),
            Self::Unreadable { source, .. } => {
                one("$", format!("the file could not be read: {source}"))
            }
            Self::InvalidJson {
                line,
                column,
                message,
                ..
            } => one(
                "$",
                format!("not valid JSON: {message} (line {line}, column {column})"),
            ),
            Self::RootNotObject { found, .. } => one(
                "$",
                format!(
                    "the root must be an object with `schemaVersion` and `signals`, found {found}"
                ),
            ),
            Self::SchemaVersionMissing { current, .. } => one(
                "schemaVersion",
                format!("missing; write `\"schemaVersion\": {current}`"),
            ),
            Self::SchemaVersionNotInteger { found, .. } => one(
                "schemaVersion",
                format!(
                    "must be the whole number {}, found {found}",
                    crate::CURRENT_SCHEMA_VERSION
                ),
            ),
            Self::SchemaVersionTooNew {
                found, supported, ..
            } => one(
                "schemaVersion",
                format!("version {found} is not supported; write {supported}"),
            ),
            Self::MigrationGap { found, target, .. } => one(
                "schemaVersion",
                format!("version {found} is no longer supported; write {target}"),
            ),
            Self::MigrationFailed { found, message, .. } => one(
                "schemaVersion",
                format!(
                    "version {found} could not be upgraded ({message}); write version {}",
                    crate::CURRENT_SCHEMA_VERSION
                ),
            ),
            Self::Invalid { issues, .. } => issues.clone(),
        }
    }
}
