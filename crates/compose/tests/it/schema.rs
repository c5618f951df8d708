//! The JSON Schemas checked in under `docs/schema/` are what the types generate now: the
//! settings, and every record the run and the sprint write (ADR 0012).
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

/// The schema of what Corral writes as `T` (a field it leaves out when empty is optional, an
/// old name a reader still accepts is not named).
fn written<T: schemars::JsonSchema>() -> schemars::Schema {
    schemars::generate::SchemaSettings::draft2020_12()
        .for_serialize()
        .into_generator()
        .into_root_schema_for::<T>()
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
    check("run.schema.json", &written::<corral_compose::RunRecord>());
    check("events.schema.json", &corral_engine::execution_log_schema());
    check(
        "session.schema.json",
        &written::<corral_engine::SessionMeta>(),
    );
    check(
        "rate-limit-hold.schema.json",
        &corral_engine::rate_limit_hold_schema(),
    );
}

#[test]
fn the_checked_in_sprint_record_schemas_are_current() {
    check(
        "sprint.schema.json",
        &written::<corral_sprint::SprintState>(),
    );
    check(
        "sprint-events.schema.json",
        &written::<corral_sprint::SprintEvent>(),
    );
    check(
        "role-meta.schema.json",
        &written::<corral_sprint::RoleMeta>(),
    );
    check(
        "worker.schema.json",
        &written::<corral_sprint::RecordOwner>(),
    );
}
