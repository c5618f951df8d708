//! Every validation stage, in order: each test fails if its stage broke or moved.

use std::fs;
use std::path::Path;

use corral_contract::{
    Contract, IssueStage, SIGNALS_FILE_MAX_BYTES, SignalKind, SignalsError, validate_signals_file,
    validate_signals_str,
};
use serde_json::json;

use crate::support::{FILE, TS, check, doc, issues, paths};

fn write(dir: &Path, contents: &[u8]) -> std::path::PathBuf {
    let path = dir.join("signals.json");
    fs::write(&path, contents).unwrap();
    path
}

fn generator_doc() -> serde_json::Value {
    doc(json!([{ "type": "task-complete", "timestamp": TS }]))
}

#[test]
fn a_valid_file_is_read_and_validated() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), generator_doc().to_string().as_bytes());
    let validated = validate_signals_file(&path, &Contract::generator()).unwrap();
    assert_eq!(validated.file_version(), 1);
    assert_eq!(validated.signals().len(), 1);
    assert_eq!(validated.signals()[0].kind(), SignalKind::TaskComplete);
}

#[test]
fn size_cap_one_byte_over_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(
        dir.path(),
        &vec![b' '; usize::try_from(SIGNALS_FILE_MAX_BYTES + 1).unwrap()],
    );
    match validate_signals_file(&path, &Contract::generator()) {
        Err(SignalsError::TooLarge { file, size, limit }) => {
            assert_eq!(file, path);
            assert_eq!(size, SIGNALS_FILE_MAX_BYTES + 1);
            assert_eq!(limit, 4 * 1024 * 1024);
        }
        other => panic!("expected TooLarge, got {other:?}"),
    }
}

#[test]
fn size_cap_is_checked_from_metadata_before_reading() {
    // A sparse 64 GiB file: reading it would take minutes and all the memory.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("signals.json");
    let file = fs::File::create(&path).unwrap();
    file.set_len(64 << 30).unwrap();
    match validate_signals_file(&path, &Contract::generator()) {
        Err(SignalsError::TooLarge { size, .. }) => assert_eq!(size, 64 << 30),
        other => panic!("expected TooLarge, got {other:?}"),
    }
}

#[test]
fn size_cap_exactly_at_the_limit_is_accepted() {
    let mut text = generator_doc().to_string().into_bytes();
    text.resize(usize::try_from(SIGNALS_FILE_MAX_BYTES).unwrap(), b' ');
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), &text);
    assert!(validate_signals_file(&path, &Contract::generator()).is_ok());
}

#[test]
fn size_cap_applies_to_in_memory_documents() {
    let text = " ".repeat(usize::try_from(SIGNALS_FILE_MAX_BYTES + 1).unwrap());
    let result = validate_signals_str(&text, Path::new(FILE), &Contract::generator());
    assert!(
        matches!(result, Err(SignalsError::TooLarge { .. })),
        "{result:?}"
    );
}

#[test]
fn size_is_checked_before_json() {
    let mut text = b"{ not json".to_vec();
    text.resize(usize::try_from(SIGNALS_FILE_MAX_BYTES + 1).unwrap(), b' ');
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), &text);
    let result = validate_signals_file(&path, &Contract::generator());
    assert!(
        matches!(result, Err(SignalsError::TooLarge { .. })),
        "{result:?}"
    );
}

#[test]
fn missing_file_names_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("signals.json");
    match validate_signals_file(&path, &Contract::generator()) {
        Err(error @ SignalsError::Missing { .. }) => {
            assert_eq!(error.file(), path);
            assert!(error.is_correctable());
            assert!(
                error
                    .to_string()
                    .contains("signals.json: signals file is missing")
            );
        }
        other => panic!("expected Missing, got {other:?}"),
    }
}

#[test]
fn a_directory_or_a_link_to_a_device_is_not_read_and_the_agent_is_asked_for_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("signals.json");
    fs::create_dir(&path).unwrap();
    match validate_signals_file(&path, &Contract::generator()) {
        Err(error @ SignalsError::NotAFile { .. }) => {
            assert!(error.is_correctable());
            assert!(
                error
                    .to_string()
                    .contains("is a directory, not a regular file"),
                "{error}"
            );
        }
        other => panic!("expected NotAFile, got {other:?}"),
    }
    // A link to a terminal or to an endless device: a read would block or never end.
    for (name, target) in [("tty.json", "/dev/tty"), ("zero.json", "/dev/zero")] {
        let link = dir.path().join(name);
        std::os::unix::fs::symlink(target, &link).unwrap();
        match validate_signals_file(&link, &Contract::generator()) {
            Err(SignalsError::NotAFile {
                kind: "a character device",
                ..
            }) => {}
            other => panic!("{target}: expected NotAFile, got {other:?}"),
        }
    }
}

#[test]
fn invalid_json_reports_line_and_column() {
    let text = "{\n  \"schemaVersion\": 1,\n  \"signals\": [}\n";
    match validate_signals_str(text, Path::new(FILE), &Contract::generator()) {
        Err(SignalsError::InvalidJson {
            file,
            line,
            column,
            message,
        }) => {
            assert_eq!(file, Path::new(FILE));
            assert_eq!((line, column), (3, 15));
            assert!(!message.contains("line"), "{message}");
        }
        other => panic!("expected InvalidJson, got {other:?}"),
    }
}

#[test]
fn an_empty_file_is_invalid_json() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), b"");
    let result = validate_signals_file(&path, &Contract::generator());
    assert!(
        matches!(result, Err(SignalsError::InvalidJson { .. })),
        "{result:?}"
    );
}

#[test]
fn non_utf8_is_invalid_json() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(
        dir.path(),
        b"{\"schemaVersion\": 1, \"signals\": [\"\xff\"]}",
    );
    let result = validate_signals_file(&path, &Contract::generator());
    assert!(
        matches!(result, Err(SignalsError::InvalidJson { .. })),
        "{result:?}"
    );
}

#[test]
fn a_byte_order_mark_is_tolerated() {
    let mut text = b"\xEF\xBB\xBF".to_vec();
    text.extend(generator_doc().to_string().into_bytes());
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), &text);
    assert!(validate_signals_file(&path, &Contract::generator()).is_ok());
}

#[test]
fn root_must_be_an_object() {
    for (root, found) in [
        (json!([]), "an array"),
        (json!(null), "null"),
        (json!("signals"), "a string"),
        (json!(1), "a number"),
    ] {
        match check(&root, &Contract::generator()) {
            Err(error @ SignalsError::RootNotObject { .. }) => {
                assert!(error.to_string().contains("at `$`"), "{error}");
                assert!(
                    matches!(error, SignalsError::RootNotObject { found: f, .. } if f == found)
                );
            }
            other => panic!("expected RootNotObject for {root}, got {other:?}"),
        }
    }
}

#[test]
fn missing_schema_version_is_its_own_error() {
    let result = check(&json!({ "signals": [] }), &Contract::generator());
    match result {
        Err(error @ SignalsError::SchemaVersionMissing { .. }) => {
            assert!(error.to_string().contains("at `schemaVersion`"), "{error}");
        }
        other => panic!("expected SchemaVersionMissing, got {other:?}"),
    }
}

#[test]
fn a_non_integer_schema_version_is_its_own_error() {
    for version in [json!("1"), json!(1.0), json!(-1), json!(null), json!([1])] {
        let result = check(
            &json!({ "schemaVersion": version, "signals": [] }),
            &Contract::generator(),
        );
        match result {
            Err(SignalsError::SchemaVersionNotInteger { found, .. }) => {
                assert_eq!(found, version.to_string());
            }
            other => panic!("expected SchemaVersionNotInteger for {version}, got {other:?}"),
        }
    }
}

#[test]
fn a_future_schema_version_is_refused() {
    for version in [2_u64, 1 << 40] {
        let result = check(
            &json!({ "schemaVersion": version, "signals": [] }),
            &Contract::generator(),
        );
        match result {
            Err(SignalsError::SchemaVersionTooNew {
                found, supported, ..
            }) => assert_eq!((found, supported), (version, 1)),
            other => panic!("expected SchemaVersionTooNew for {version}, got {other:?}"),
        }
    }
}

#[test]
fn an_older_version_without_a_migration_is_a_gap() {
    // Version 1 is the first version: the chain is empty, so version 0 has no step.
    let result = check(
        &json!({ "schemaVersion": 0, "signals": [] }),
        &Contract::generator(),
    );
    match result {
        Err(error @ SignalsError::MigrationGap { .. }) => {
            assert!(error.is_correctable());
            assert!(matches!(
                error,
                SignalsError::MigrationGap {
                    found: 0,
                    target: 1,
                    missing_from: 0,
                    ..
                }
            ));
        }
        other => panic!("expected MigrationGap, got {other:?}"),
    }
}

#[test]
fn the_version_is_checked_before_the_signals() {
    let bad_signals = json!([{ "type": "nope" }]);
    let result = check(&json!({ "signals": bad_signals }), &Contract::generator());
    assert!(matches!(
        result,
        Err(SignalsError::SchemaVersionMissing { .. })
    ));
    let result = check(
        &json!({ "schemaVersion": 9, "signals": bad_signals }),
        &Contract::generator(),
    );
    assert!(matches!(
        result,
        Err(SignalsError::SchemaVersionTooNew { .. })
    ));
}

#[test]
fn the_wrapper_shape_is_checked() {
    let found = issues(check(
        &json!({ "schemaVersion": 1 }),
        &Contract::generator(),
    ));
    assert_eq!(paths(&found), ["signals"]);
    assert!(found[0].message.contains("missing field `signals`"));

    let found = issues(check(
        &json!({ "schemaVersion": 1, "signals": {}, "extra": 1 }),
        &Contract::generator(),
    ));
    assert_eq!(paths(&found), ["extra", "signals"]);
    assert!(found.iter().all(|issue| issue.stage == IssueStage::Schema));
}

#[test]
fn a_signal_must_be_an_object_with_a_known_type() {
    let found = issues(check(
        &doc(json!([
            "task-complete",
            { "timestamp": TS },
            { "type": 7, "timestamp": TS },
            { "type": "task_complete", "timestamp": TS },
            { "type": "task-complete", "timestamp": TS }
        ])),
        &Contract::generator(),
    ));
    assert_eq!(
        paths(&found),
        [
            "signals[0]",
            "signals[1].type",
            "signals[2].type",
            "signals[3].type"
        ]
    );
    assert!(found.iter().all(|issue| issue.stage == IssueStage::Schema));
    assert!(
        found[3]
            .message
            .contains("unknown signal kind `task_complete`"),
        "{}",
        found[3].message
    );
    assert!(found[3].message.contains("`task-complete`"));
}

#[test]
fn unknown_fields_are_refused() {
    let found = issues(check(
        &doc(json!([{ "type": "task-complete", "timestamp": TS, "done": true }])),
        &Contract::generator(),
    ));
    assert_eq!(paths(&found), ["signals[0]"]);
    assert_eq!(found[0].stage, IssueStage::Schema);
    assert!(
        found[0].message.contains("unknown field `done`"),
        "{}",
        found[0].message
    );
}

#[test]
fn unknown_nested_fields_are_refused() {
    let contract =
        Contract::new("gates").accept(SignalKind::VerifyGates, corral_contract::Multiplicity::Any);
    let found = issues(check(
        &doc(json!([{ "type": "verify-gates", "timestamp": TS,
                      "gates": [{ "pathPrefix": "", "command": "make", "timeout": 5 }] }])),
        &contract,
    ));
    assert_eq!(paths(&found), ["signals[0]"]);
    assert!(
        found[0].message.contains("unknown field `timeout`"),
        "{}",
        found[0].message
    );
}

#[test]
fn a_missing_or_mistyped_field_is_a_schema_issue() {
    let found = issues(check(
        &doc(json!([
            { "type": "task-blocked", "timestamp": TS },
            { "type": "note", "text": "no timestamp" },
            { "type": "note", "timestamp": TS, "text": 3 }
        ])),
        &Contract::generator(),
    ));
    assert_eq!(paths(&found), ["signals[0]", "signals[1]", "signals[2]"]);
    assert!(found[0].message.contains("missing field `reason`"));
    assert!(found[1].message.contains("missing field `timestamp`"));
    assert!(found[2].message.contains("invalid type"));
}

#[test]
fn a_bad_timestamp_is_a_rule_issue_at_its_path() {
    let found = issues(check(
        &doc(json!([
            { "type": "task-complete", "timestamp": "2025-02-30T12:00:00Z" },
            { "type": "note", "timestamp": "yesterday", "text": "x" },
            { "type": "note", "timestamp": "2025-01-01 12:00:00", "text": "x" }
        ])),
        &Contract::generator(),
    ));
    assert_eq!(
        paths(&found),
        [
            "signals[0].timestamp",
            "signals[1].timestamp",
            "signals[2].timestamp"
        ]
    );
    assert!(found.iter().all(|issue| issue.stage == IssueStage::Rule));
    assert!(
        found[0]
            .message
            .contains("2025-02-30 is not a calendar date"),
        "{}",
        found[0].message
    );
}
