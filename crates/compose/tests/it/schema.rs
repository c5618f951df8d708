//! The settings JSON Schema is checked in and must stay current.

use std::path::PathBuf;

#[test]
fn the_checked_in_settings_schema_is_current() {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/schema/settings.schema.json");
    let fresh =
        serde_json::to_string_pretty(&corral_compose::settings_json_schema()).unwrap() + "\n";
    if std::env::var_os("UPDATE_SCHEMA").is_some() {
        std::fs::write(&path, &fresh).unwrap();
    }
    let current = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        current == fresh,
        "docs/schema/settings.schema.json is stale; run `UPDATE_SCHEMA=1 cargo test -p corral-compose` to refresh"
    );
}
