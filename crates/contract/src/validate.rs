//! Validating a `signals.json` against a [`Contract`], stage by stage.
//!
//! The stages run in this order, and the first four stop at their first failure, each with its
//! own [`SignalsError`] variant:
//! 1. presence, a regular file (a FIFO or device is never opened for a blocking read), and the
//!    size cap (file metadata, before reading);
//! 2. JSON syntax (line and column);
//! 3. the root is an object;
//! 4. `schemaVersion`: present, a whole number, not newer than supported; older versions are
//!    migrated through the chain in `migrate.rs`.
//!
//! The last stages collect every issue across the document before failing, as
//! [`SignalsError::Invalid`]: the wrapper's shape, then per signal its `type` (known? accepted by
//! the contract?), its shape (serde, `deny_unknown_fields`) and its rules (garde), then the
//! contract's counts. A signal whose kind is unknown or not accepted is not examined further, and
//! one that fails its shape is not checked against the rules.

use std::path::Path;

use serde_json::Value;

use crate::contract::{Contract, quoted_list};
use crate::document::{CURRENT_SCHEMA_VERSION, SIGNALS_FILE_MAX_BYTES, SignalsDocument};
use crate::error::{Issue, IssueStage, SignalsError};
use crate::evaluation::Evaluation;
use crate::migrate::{MIGRATIONS, Migration, MigrationError, Root, migrate};
use crate::signal::{Signal, SignalKind};
use crate::untrusted::{UntrustedFileError, read_untrusted_file_within_directory};

/// A `signals.json` that passed every stage: current version, every signal valid and accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidatedSignals {
    file_version: u32,
    signals: Vec<Signal>,
}

impl ValidatedSignals {
    /// The signals, in document order.
    #[must_use]
    pub fn signals(&self) -> &[Signal] {
        &self.signals
    }

    /// The signals, owned.
    #[must_use]
    pub fn into_signals(self) -> Vec<Signal> {
        self.signals
    }

    /// The `schemaVersion` the file was written with; below [`CURRENT_SCHEMA_VERSION`] when it
    /// was migrated.
    #[must_use]
    pub fn file_version(&self) -> u32 {
        self.file_version
    }

    /// The signals of one kind, in document order.
    pub fn of_kind(&self, kind: SignalKind) -> impl Iterator<Item = &Signal> {
        self.signals.iter().filter(move |s| s.kind() == kind)
    }

    /// The first `evaluation` signal, if any.
    #[must_use]
    pub fn evaluation(&self) -> Option<&Evaluation> {
        self.signals.iter().find_map(|signal| match signal {
            Signal::Evaluation(evaluation) => Some(evaluation),
            Signal::TaskComplete(_)
            | Signal::TaskBlocked(_)
            | Signal::TaskVerified(_)
            | Signal::Note(_)
            | Signal::Decision(_)
            | Signal::Learning(_)
            | Signal::Change(_)
            | Signal::CommitMessage(_)
            | Signal::PrContent(_)
            | Signal::VerifyGates(_)
            | Signal::RefinedTicket(_)
            | Signal::TaskPlan(_)
            | Signal::IdeatedTickets(_)
            | Signal::AgentsMdProposal(_)
            | Signal::SetupScript(_)
            | Signal::VerifyScript(_) => None,
        })
    }

    /// The document in its current-version form.
    #[must_use]
    pub fn into_document(self) -> SignalsDocument {
        SignalsDocument::new(self.signals)
    }
}

/// Reads and validates the `signals.json` at `path` against `contract`.
///
/// # Errors
///
/// The first failing stage's [`SignalsError`]; for the schema, rule and contract stages, every
/// issue found, as [`SignalsError::Invalid`].
pub fn validate_signals_file(
    path: &Path,
    contract: &Contract,
) -> Result<ValidatedSignals, SignalsError> {
    let bytes = read_capped(path)?;
    validate_bytes(&bytes, path, contract, MIGRATIONS, CURRENT_SCHEMA_VERSION)
}

/// Validates an in-memory `signals.json` text against `contract`. `file` only names the
/// document in errors.
///
/// # Errors
///
/// As [`validate_signals_file`], except that [`SignalsError::Missing`] and
/// [`SignalsError::Unreadable`] cannot occur.
pub fn validate_signals_str(
    json: &str,
    file: &Path,
    contract: &Contract,
) -> Result<ValidatedSignals, SignalsError> {
    let size = u64::try_from(json.len()).unwrap_or(u64::MAX);
    if size > SIGNALS_FILE_MAX_BYTES {
        return Err(SignalsError::TooLarge {
            file: file.to_owned(),
            size,
            limit: SIGNALS_FILE_MAX_BYTES,
        });
    }
    validate_bytes(
        json.as_bytes(),
        file,
        contract,
        MIGRATIONS,
        CURRENT_SCHEMA_VERSION,
    )
}

fn read_capped(path: &Path) -> Result<Vec<u8>, SignalsError> {
    // The agent controls what is at the path: a FIFO or a link to a terminal must not hang the
    // supervisor, nor a link to `/dev/zero` fill its memory.
    read_untrusted_file_within_directory(path, SIGNALS_FILE_MAX_BYTES).map_err(
        |error| match error {
            UntrustedFileError::Missing { file } => SignalsError::Missing { file },
            UntrustedFileError::NotRegular { file, kind } => SignalsError::NotAFile { file, kind },
            UntrustedFileError::TooLarge { file, size, limit } => {
                SignalsError::TooLarge { file, size, limit }
            }
            UntrustedFileError::Io { file, source } => SignalsError::Unreadable { file, source },
        },
    )
}

/// Every stage after reading, with the migration chain and target version as parameters so the
/// mechanism can be tested with a fake chain.
pub(crate) fn validate_bytes(
    bytes: &[u8],
    file: &Path,
    contract: &Contract,
    chain: &[Migration],
    target: u32,
) -> Result<ValidatedSignals, SignalsError> {
    let file_owned = || file.to_owned();
    // A UTF-8 byte order mark is not JSON, but some editors and Windows tools write one.
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);

    let root: Value = serde_json::from_slice(bytes).map_err(|error| SignalsError::InvalidJson {
        file: file_owned(),
        line: error.line(),
        column: error.column(),
        message: parser_message(&error),
    })?;

    let Value::Object(root) = root else {
        return Err(SignalsError::RootNotObject {
            file: file_owned(),
            found: json_type(&root),
        });
    };

    let version = read_schema_version(&root, file, target)?;
    let mut root = migrate(root, version, target, chain).map_err(|error| match error {
        MigrationError::Gap { missing_from } => SignalsError::MigrationGap {
            file: file_owned(),
            found: version,
            target,
            missing_from,
        },
        MigrationError::Failed { from, message } => SignalsError::MigrationFailed {
            file: file_owned(),
            found: version,
            from,
            message,
        },
    })?;

    let mut issues = Vec::new();
    for key in root.keys() {
        if key != "schemaVersion" && key != "signals" {
            issues.push(Issue::new(
                key.clone(),
                "unknown field; the root has only `schemaVersion` and `signals`",
                IssueStage::Schema,
            ));
        }
    }

    let entries = match root.remove("signals") {
        Some(Value::Array(entries)) => Some(entries),
        Some(other) => {
            issues.push(Issue::new(
                "signals",
                format!("expected a list of signals, found {}", json_type(&other)),
                IssueStage::Schema,
            ));
            None
        }
        None => {
            issues.push(Issue::new(
                "signals",
                "missing field `signals` (a list of signals)",
                IssueStage::Schema,
            ));
            None
        }
    };
    // Without a list there is nothing to count: the contract stage would only add noise.
    let counted = entries.is_some();
    let entries = entries.unwrap_or_default();

    let mut signals = Vec::with_capacity(entries.len());
    let mut seen = Vec::with_capacity(entries.len());
    for (index, entry) in entries.into_iter().enumerate() {
        let base = format!("signals[{index}]");
        let Some(kind) = check_kind(&entry, &base, contract, &mut issues) else {
            continue;
        };
        seen.push((index, kind));
        let signal = match serde_json::from_value::<Signal>(entry) {
            Ok(signal) => signal,
            Err(error) => {
                issues.push(Issue::new(base, error.to_string(), IssueStage::Schema));
                continue;
            }
        };
        if let Err(report) = signal.check_rules() {
            for (path, error) in report.iter() {
                issues.push(Issue::new(
                    join_path(&base, &camel_case_path(&path.to_string())),
                    error.message(),
                    IssueStage::Rule,
                ));
            }
        }
        signals.push(signal);
    }
    if counted {
        issues.extend(contract.check_counts(&seen));
    }

    if issues.is_empty() {
        Ok(ValidatedSignals {
            file_version: version,
            signals,
        })
    } else {
        Err(SignalsError::Invalid {
            file: file_owned(),
            issues,
        })
    }
}

fn read_schema_version(root: &Root, file: &Path, target: u32) -> Result<u32, SignalsError> {
    let value = root
        .get("schemaVersion")
        .ok_or_else(|| SignalsError::SchemaVersionMissing {
            file: file.to_owned(),
            current: target,
        })?;
    let not_integer = || SignalsError::SchemaVersionNotInteger {
        file: file.to_owned(),
        found: shorten(&value.to_string(), 40),
    };
    let version = value.as_u64().ok_or_else(not_integer)?;
    match u32::try_from(version) {
        Ok(version) if version <= target => Ok(version),
        Ok(_) | Err(_) => Err(SignalsError::SchemaVersionTooNew {
            file: file.to_owned(),
            found: version,
            supported: target,
        }),
    }
}

/// Checks one entry's `type`: present, a known kind, accepted by the contract. Records an issue
/// and returns `None` when the entry should not be examined further.
fn check_kind(
    entry: &Value,
    base: &str,
    contract: &Contract,
    issues: &mut Vec<Issue>,
) -> Option<SignalKind> {
    let Some(object) = entry.as_object() else {
        issues.push(Issue::new(
            base,
            format!("expected a signal object, found {}", json_type(entry)),
            IssueStage::Schema,
        ));
        return None;
    };
    let type_path = format!("{base}.type");
    let name = match object.get("type") {
        Some(Value::String(name)) => name,
        Some(other) => {
            issues.push(Issue::new(
                type_path,
                format!(
                    "expected the kind as a string, found {}; accepted kinds: {}",
                    json_type(other),
                    contract.kind_list()
                ),
                IssueStage::Schema,
            ));
            return None;
        }
        None => {
            issues.push(Issue::new(
                type_path,
                format!(
                    "missing field `type`; accepted kinds: {}",
                    contract.kind_list()
                ),
                IssueStage::Schema,
            ));
            return None;
        }
    };
    let Some(kind) = SignalKind::from_name(name) else {
        issues.push(Issue::new(
            type_path,
            format!(
                "unknown signal kind `{}`; known kinds: {}",
                shorten(name, 60),
                quoted_list(SignalKind::ALL.into_iter())
            ),
            IssueStage::Schema,
        ));
        return None;
    };
    if !contract.accepts(kind) {
        issues.push(Issue::new(
            type_path,
            format!(
                "the `{}` step does not accept `{kind}` signals; accepted kinds: {}",
                contract.name(),
                contract.kind_list()
            ),
            IssueStage::Contract,
        ));
        return None;
    }
    Some(kind)
}

/// serde_json's message without its trailing " at line L column C" (the error carries both).
fn parser_message(error: &serde_json::Error) -> String {
    let full = error.to_string();
    let suffix = format!(" at line {} column {}", error.line(), error.column());
    full.strip_suffix(&suffix).unwrap_or(&full).to_owned()
}

pub(crate) fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn join_path(base: &str, relative: &str) -> String {
    if relative.is_empty() {
        base.to_owned()
    } else if relative.starts_with('[') {
        format!("{base}{relative}")
    } else {
        format!("{base}.{relative}")
    }
}

/// garde reports Rust field names (`timeout_ms`); the JSON names are camelCase (`timeoutMs`).
/// Signal payload fields are plain lowercase snake_case, so the conversion is exact.
fn camel_case_path(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    let mut upper_next = false;
    for ch in path.chars() {
        if ch == '_' {
            upper_next = true;
        } else if upper_next {
            out.extend(ch.to_uppercase());
            upper_next = false;
        } else {
            out.push(ch);
        }
    }
    out
}

fn shorten(text: &str, max_chars: usize) -> String {
    if text.chars().count() <= max_chars {
        text.to_owned()
    } else {
        let mut short: String = text.chars().take(max_chars).collect();
        short.push('…');
        short
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use serde_json::{Map, Value, json};

    use super::{camel_case_path, join_path, validate_bytes};
    use crate::contract::Contract;
    use crate::error::SignalsError;
    use crate::migrate::Migration;

    fn v0_to_v1(mut root: Map<String, Value>) -> Result<Map<String, Value>, String> {
        let events = root.remove("events").unwrap_or(Value::Array(Vec::new()));
        root.insert("signals".to_owned(), events);
        Ok(root)
    }

    const FAKE_CHAIN: [Migration; 1] = [Migration {
        from: 0,
        apply: v0_to_v1,
    }];

    #[test]
    fn paths_become_camel_case_and_join() {
        assert_eq!(camel_case_path("gates[0].timeout_ms"), "gates[0].timeoutMs");
        assert_eq!(camel_case_path("applies_to"), "appliesTo");
        assert_eq!(
            join_path("signals[1]", "gates[0].command"),
            "signals[1].gates[0].command"
        );
        assert_eq!(join_path("signals[1]", "[2]"), "signals[1][2]");
        assert_eq!(join_path("signals[1]", ""), "signals[1]");
    }

    #[test]
    fn an_older_document_is_migrated_then_validated() {
        let v0 = json!({
            "schemaVersion": 0,
            "events": [
                { "type": "evaluation", "timestamp": "2025-01-01T12:00:00Z", "status": "passed",
                  "dimensions": [
                    { "name": "correctness", "passed": true },
                    { "name": "completeness", "passed": true },
                    { "name": "safety", "passed": true },
                    { "name": "consistency", "passed": true },
                    { "name": "robustness", "passed": true }
                  ] }
            ]
        })
        .to_string();
        let validated = validate_bytes(
            v0.as_bytes(),
            Path::new("/run/signals.json"),
            &Contract::evaluator(),
            &FAKE_CHAIN,
            1,
        );
        let validated = validated.map_err(|e| e.to_string());
        assert_eq!(validated.as_ref().map(|v| v.file_version()), Ok(0));
        assert_eq!(validated.map(|v| v.signals().len()), Ok(1));
    }

    #[test]
    fn a_migrated_document_is_still_validated() {
        let v0 = json!({ "schemaVersion": 0, "events": [{ "type": "note" }] }).to_string();
        let result = validate_bytes(
            v0.as_bytes(),
            Path::new("/run/signals.json"),
            &Contract::evaluator(),
            &FAKE_CHAIN,
            1,
        );
        assert!(
            matches!(result, Err(SignalsError::Invalid { .. })),
            "{result:?}"
        );
    }

    #[test]
    fn a_gap_in_a_longer_chain_is_its_own_error() {
        let v0 = json!({ "schemaVersion": 0, "events": [] }).to_string();
        let result = validate_bytes(
            v0.as_bytes(),
            Path::new("/run/signals.json"),
            &Contract::evaluator(),
            &FAKE_CHAIN,
            2,
        );
        match result {
            Err(SignalsError::MigrationGap {
                found,
                target,
                missing_from,
                ..
            }) => assert_eq!((found, target, missing_from), (0, 2, 1)),
            other => panic!("expected a migration gap, got {other:?}"),
        }
    }
}
