//! The corrective message: the follow-up prompt sent on the resumed session when the agent's
//! `signals.json` was not accepted.
//!
//! It lists at most [`CORRECTIVE_MAX_ISSUES`] issues (then "and N more"), asks for the whole file
//! again, and always ends with a self-contained context block (which file, which kinds, a short
//! example: [`Contract::minimal_example_document`]), because the resumed session may have lost its context, and an agent that has to guess
//! could invent a verdict rather than report one.

use std::path::Path;

use crate::contract::Contract;
use crate::document::CURRENT_SCHEMA_VERSION;
use crate::error::SignalsError;
use crate::markdown::code;
use crate::render::{absolute, accepted_kinds_list, exactly_one_of_line, minimal_example_block};

/// The most issues a corrective message lists.
pub const CORRECTIVE_MAX_ISSUES: usize = 10;

/// Renders the corrective prompt for `error`, found in the file at `signals_path` (made absolute
/// against the current directory if relative), written for `contract`.
///
/// Meant for errors where [`SignalsError::is_correctable`] is true; for the others it still
/// renders, but the agent cannot fix the problem.
#[must_use]
pub fn corrective_message(
    error: &SignalsError,
    signals_path: &Path,
    contract: &Contract,
) -> String {
    let path = absolute(signals_path).display().to_string();
    let issues = error.issues();
    let mut out = String::new();

    out.push_str(&format!(
        "Corral could not accept your result file {}: {}.\n\n",
        code(&path),
        headline(error)
    ));
    out.push_str(&format!("Problems found ({}):\n\n", issues.len()));
    for (number, issue) in issues.iter().take(CORRECTIVE_MAX_ISSUES).enumerate() {
        out.push_str(&format!(
            "{}. {}: {}\n",
            number + 1,
            code(&issue.path),
            issue.message
        ));
    }
    if issues.len() > CORRECTIVE_MAX_ISSUES {
        out.push_str(&format!(
            "\n… and {} more.\n",
            issues.len() - CORRECTIVE_MAX_ISSUES
        ));
    }
    out.push_str(
        "\nFix every problem and write the complete file again: the whole document, not a \
         patch. Keep its content true to what you did and found; do not change a finding or a \
         verdict just to make the file pass. If your earlier context is gone, look at the work \
         itself before you write; never guess an outcome or a verdict.\n\n",
    );

    out.push_str("## Context\n\n");
    out.push_str(&format!(
        "- The file: {} (an absolute path; overwrite it with your file-writing tool).\n",
        code(&path)
    ));
    out.push_str(&format!(
        "- The shape: `{{\"schemaVersion\": {CURRENT_SCHEMA_VERSION}, \"signals\": [...]}}`; every \
         signal has `\"type\"`, an RFC 3339 `\"timestamp\"` (e.g. `2025-01-01T12:00:00Z`) and \
         the camelCase fields of its kind; unknown fields are rejected.\n"
    ));
    out.push_str(&format!(
        "- The kinds this step ({}) accepts, with their fields (`?` marks an optional one):\n",
        code(contract.name()),
    ));
    out.push_str(&accepted_kinds_list(contract));
    if let Some(line) = exactly_one_of_line(contract) {
        out.push_str(&format!("- {line}\n"));
    }
    out.push_str(
        "- A short valid file for this step (placeholder values; add the other kinds as \
         needed):\n\n",
    );
    out.push_str(&minimal_example_block(contract));
    out
}

fn headline(error: &SignalsError) -> &'static str {
    match error {
        SignalsError::TooLarge { .. } => "it is too large",
        SignalsError::Missing { .. } => "it does not exist",
        SignalsError::NotAFile { .. } => "it is not a regular file",
        SignalsError::Unreadable { .. } => "it could not be read",
        SignalsError::InvalidJson { .. } => "it is not valid JSON",
        SignalsError::RootNotObject { .. } => "its root is not a JSON object",
        SignalsError::SchemaVersionMissing { .. }
        | SignalsError::SchemaVersionNotInteger { .. }
        | SignalsError::SchemaVersionTooNew { .. }
        | SignalsError::MigrationGap { .. }
        | SignalsError::MigrationFailed { .. } => "its `schemaVersion` is wrong",
        SignalsError::Invalid { .. } => "its content does not match what this step expects",
    }
}
