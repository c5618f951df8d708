//! The JSON Schemas checked in under `docs/schema/` are what the types generate now: the
//! settings, and every record the run and the sprint write (ADR 0010).
//! `UPDATE_SCHEMA=1 cargo test -p corral-compose schema` rewrites them.

use std::path::PathBuf;

fn schema_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/schema")
}

/// Compares (or, with `UPDATE_SCHEMA` set, rewrites) `docs/schema/<name>`.
fn check(name: &str, schema: &impl serde::Serialize) {
    let path = schema_dir().join(name);
    let fresh = serde_json::to_string_pretty(schema).unwrap() + "\n";
    if std::env::var_os("UPDATE_SCHEMA").is_some() {
        std::fs::write(&path, &fresh).unwrap();
    }
    let current = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        current == fresh,
        "docs/schema/{name} is stale; run `UPDATE_SCHEMA=1 cargo test -p corral-compose schema` to refresh"
    );
}

#[test]
fn the_checked_in_settings_schema_is_current() {
    check(
        "settings.schema.json",
        &corral_compose::settings_json_schema(),
    );
}

#[test]
fn the_checked_in_run_record_schemas_are_current() {
    check(
        "run.schema.json",
        &schemars::schema_for!(corral_compose::RunRecord),
    );
    check("events.schema.json", &corral_engine::execution_log_schema());
    check(
        "session.schema.json",
        &schemars::schema_for!(corral_engine::SessionMeta),
    );
}

#[test]
fn the_checked_in_sprint_record_schemas_are_current() {
    check(
        "sprint.schema.json",
        &schemars::schema_for!(corral_sprint::SprintState),
    );
    check(
        "sprint-events.schema.json",
        &schemars::schema_for!(corral_sprint::SprintEvent),
    );
    check(
        "role-meta.schema.json",
        &schemars::schema_for!(corral_sprint::RoleMeta),
    );
    check(
        "worker.schema.json",
        &schemars::schema_for!(corral_sprint::RecordOwner),
    );
}
