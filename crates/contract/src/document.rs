//! The `signals.json` wrapper: `{"schemaVersion": 1, "signals": [...]}`.
//!
//! [`SignalsDocument`] is the shape of the current version. Validation does not deserialize the
//! wrapper with serde in one go: it walks the root by hand (so every stage can name its JSON path
//! and older versions can be migrated first, see `migrate.rs`), then deserializes each signal on
//! its own. The type is used to write documents (examples, fakes) and to generate the JSON Schema.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::signal::Signal;

/// The `schemaVersion` this crate writes and validates against. Older versions are migrated.
pub const CURRENT_SCHEMA_VERSION: u32 = 1;

/// The largest `signals.json` accepted, in bytes (4 MiB). Checked before the file is read.
pub const SIGNALS_FILE_MAX_BYTES: u64 = 4 * 1024 * 1024;

/// The conventional file name of the signals file.
pub const SIGNALS_FILE_NAME: &str = corral_ports::run_dir::SIGNALS_FILE;

/// A whole `signals.json` document, current version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(
    title = "signals.json",
    description = "The result file an agent writes for Corral: a versioned list of signals."
)]
pub struct SignalsDocument {
    /// The format version: 1.
    #[schemars(extend("const" = 1))]
    pub schema_version: u32,
    /// The signals, in the order the agent emitted them.
    pub signals: Vec<Signal>,
}

impl SignalsDocument {
    /// A current-version document holding `signals`.
    #[must_use]
    pub fn new(signals: Vec<Signal>) -> Self {
        Self {
            schema_version: CURRENT_SCHEMA_VERSION,
            signals,
        }
    }

    /// The document as pretty-printed JSON, as an agent would write it.
    #[must_use]
    pub fn to_json_pretty(&self) -> String {
        // Serializing these types (structs, strings, numbers; no maps with non-string keys)
        // cannot fail. The fallback only avoids an unwrap; the example round-trip tests would
        // catch it.
        serde_json::to_string_pretty(self).unwrap_or_else(|_| String::from("{}"))
    }
}
