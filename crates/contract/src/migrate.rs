//! Schema-version migration: a chain of one-step functions, each lifting a root object from
//! version `n` to `n + 1`.
//!
//! Validation reads `schemaVersion`, then walks the chain from that version up to
//! [`CURRENT_SCHEMA_VERSION`]. A missing step is a gap (its own error), a step that refuses the
//! document is a failed migration. Version 1 is the first version, so the built-in chain is empty
//! today; the mechanism is exercised by unit tests with a fake v0 → v1 step.

use serde_json::{Map, Value};

#[cfg(doc)]
use crate::document::CURRENT_SCHEMA_VERSION;

/// A root object of `signals.json`.
pub(crate) type Root = Map<String, Value>;

/// One step of the chain: lifts a root object from `from` to `from + 1`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Migration {
    /// The version this step reads.
    pub(crate) from: u32,
    /// The step. Receives the root as the agent wrote it at version `from` (with
    /// `schemaVersion` still `from`); the runner sets `schemaVersion` afterwards. An `Err`
    /// explains why the document cannot be lifted.
    pub(crate) apply: fn(Root) -> Result<Root, String>,
}

/// The built-in chain. Append a step here when version 2 is introduced, and bump
/// [`CURRENT_SCHEMA_VERSION`].
pub(crate) const MIGRATIONS: &[Migration] = &[];

/// Why a document could not be brought to the target version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum MigrationError {
    /// No step in the chain reads version `missing_from`.
    Gap { missing_from: u32 },
    /// The step from `from` refused the document.
    Failed { from: u32, message: String },
}

/// Walks `chain` from `from` up to `target`. `from >= target` returns the root unchanged.
pub(crate) fn migrate(
    mut root: Root,
    from: u32,
    target: u32,
    chain: &[Migration],
) -> Result<Root, MigrationError> {
    let mut version = from;
    while version < target {
        let step = chain
            .iter()
            .find(|step| step.from == version)
            .ok_or(MigrationError::Gap {
                missing_from: version,
            })?;
        root = (step.apply)(root).map_err(|message| MigrationError::Failed {
            from: version,
            message,
        })?;
        version += 1;
        root.insert("schemaVersion".to_owned(), Value::from(version));
    }
    Ok(root)
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::{MIGRATIONS, Migration, MigrationError, Root, migrate};
    use crate::document::CURRENT_SCHEMA_VERSION;

    /// A pretend version 0 that called the list `events` and the kind field `kind`.
    fn v0_to_v1(mut root: Root) -> Result<Root, String> {
        let events = root
            .remove("events")
            .ok_or_else(|| "version 0 has an `events` list".to_owned())?;
        let Value::Array(events) = events else {
            return Err("`events` is not a list".to_owned());
        };
        let signals = events
            .into_iter()
            .map(|mut event| {
                if let Some(object) = event.as_object_mut()
                    && let Some(kind) = object.remove("kind")
                {
                    object.insert("type".to_owned(), kind);
                }
                event
            })
            .collect();
        root.insert("signals".to_owned(), Value::Array(signals));
        Ok(root)
    }

    fn v1_to_v2(mut root: Root) -> Result<Root, String> {
        root.insert("lifted".to_owned(), Value::Bool(true));
        Ok(root)
    }

    fn object(value: Value) -> Root {
        value.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn the_builtin_chain_is_contiguous_and_ends_at_the_current_version() {
        for (index, step) in MIGRATIONS.iter().enumerate() {
            assert!(step.from < CURRENT_SCHEMA_VERSION);
            let later_duplicate = MIGRATIONS
                .iter()
                .skip(index + 1)
                .any(|s| s.from == step.from);
            assert!(!later_duplicate, "two steps read version {}", step.from);
        }
        if let Some(oldest) = MIGRATIONS.iter().map(|s| s.from).min() {
            let root = object(json!({ "schemaVersion": oldest }));
            // Every version from the oldest up must have its step (contents may be refused).
            match migrate(root, oldest, CURRENT_SCHEMA_VERSION, MIGRATIONS) {
                Ok(_) | Err(MigrationError::Failed { .. }) => {}
                Err(gap @ MigrationError::Gap { .. }) => panic!("{gap:?}"),
            }
        }
    }

    #[test]
    fn a_fake_v0_document_is_lifted_to_v1() {
        let chain = [Migration {
            from: 0,
            apply: v0_to_v1,
        }];
        let root = object(json!({
            "schemaVersion": 0,
            "events": [{ "kind": "task-complete", "timestamp": "2025-01-01T12:00:00Z" }]
        }));
        let lifted = migrate(root, 0, 1, &chain);
        let expected = object(json!({
            "schemaVersion": 1,
            "signals": [{ "type": "task-complete", "timestamp": "2025-01-01T12:00:00Z" }]
        }));
        assert_eq!(lifted, Ok(expected));
    }

    #[test]
    fn steps_run_in_order_and_stamp_each_version() {
        let chain = [
            Migration {
                from: 1,
                apply: v1_to_v2,
            },
            Migration {
                from: 0,
                apply: v0_to_v1,
            },
        ];
        let root = object(json!({ "schemaVersion": 0, "events": [] }));
        let lifted = migrate(root, 0, 2, &chain);
        let expected = object(json!({ "schemaVersion": 2, "signals": [], "lifted": true }));
        assert_eq!(lifted, Ok(expected));
    }

    #[test]
    fn a_gap_in_the_chain_names_the_missing_step() {
        let chain = [Migration {
            from: 0,
            apply: v0_to_v1,
        }];
        let root = object(json!({ "schemaVersion": 0, "events": [] }));
        assert_eq!(
            migrate(root, 0, 3, &chain),
            Err(MigrationError::Gap { missing_from: 1 })
        );
    }

    #[test]
    fn a_refusing_step_is_a_failed_migration() {
        let chain = [Migration {
            from: 0,
            apply: v0_to_v1,
        }];
        let root = object(json!({ "schemaVersion": 0 }));
        assert_eq!(
            migrate(root, 0, 1, &chain),
            Err(MigrationError::Failed {
                from: 0,
                message: "version 0 has an `events` list".to_owned()
            })
        );
    }

    #[test]
    fn the_current_version_needs_no_step() {
        let root = object(json!({ "schemaVersion": 1, "signals": [] }));
        assert_eq!(migrate(root.clone(), 1, 1, &[]), Ok(root));
    }
}
