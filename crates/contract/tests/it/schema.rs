//! The checked-in JSON Schema at `docs/schema/signals.schema.json` must match the types.

use std::path::{Path, PathBuf};

use corral_contract::{SignalKind, signals_json_schema};
use serde_json::Value;

/// `<workspace>/docs/schema/signals.schema.json`; the crate is `<workspace>/crates/contract`.
fn checked_in_path() -> PathBuf {
    let manifest_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let workspace = manifest_dir.parent().and_then(Path::parent).unwrap();
    workspace.join("docs/schema/signals.schema.json")
}

fn rendered() -> String {
    let mut text = serde_json::to_string_pretty(&signals_json_schema()).unwrap();
    text.push('\n');
    text
}

#[test]
fn the_checked_in_schema_is_current() {
    let path = checked_in_path();
    let fresh = rendered();
    if std::env::var_os("UPDATE_SCHEMA").is_some_and(|v| v == "1") {
        fs_write(&path, &fresh);
        return;
    }
    let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        on_disk == fresh,
        "{} is stale or missing: run `UPDATE_SCHEMA=1 cargo test -p corral-contract` to refresh",
        path.display()
    );
}

fn fs_write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn variant<'a>(schema: &'a Value, kind: &str) -> &'a Value {
    let variants = schema["properties"]["signals"]["items"]["$ref"]
        .as_str()
        .and_then(|r| r.strip_prefix("#/$defs/"))
        .map(|name| &schema["$defs"][name]["oneOf"])
        .unwrap();
    variants
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["properties"]["type"]["const"] == kind)
        .unwrap_or_else(|| panic!("no variant {kind}"))
}

#[test]
fn every_kind_is_a_closed_variant_with_a_date_time_timestamp() {
    let schema = signals_json_schema();
    assert_eq!(
        schema["$schema"],
        "https://json-schema.org/draft/2020-12/schema"
    );
    for kind in SignalKind::ALL {
        let v = variant(&schema, kind.as_str());
        assert_eq!(v["additionalProperties"], false, "{kind}");
        assert_eq!(
            v["properties"]["timestamp"]["format"], "date-time",
            "{kind}"
        );
        let required = v["required"].as_array().unwrap();
        assert!(
            required.contains(&Value::from("type")) && required.contains(&Value::from("timestamp"))
        );
    }
}

#[test]
fn garde_limits_reach_the_schema() {
    let schema = signals_json_schema();
    let subject = &variant(&schema, "commit-message")["properties"]["subject"];
    assert_eq!(
        (subject["minLength"].clone(), subject["maxLength"].clone()),
        (1.into(), 72.into())
    );
    let gates = &variant(&schema, "verify-gates")["properties"]["gates"];
    assert_eq!(gates["minItems"], 1);
    let reason = &variant(&schema, "task-blocked")["properties"]["reason"];
    assert_eq!(reason["minLength"], 1);
    let text = rendered();
    assert!(
        text.contains("\"maximum\": 3600000"),
        "timeoutMs range missing"
    );
    assert!(
        text.contains("\"const\": \"robustness\""),
        "floor dimensions missing"
    );
}
