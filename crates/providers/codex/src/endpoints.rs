//! The endpoints Codex's own `config.toml` names: each `[model_providers.<id>] base_url`, the
//! one the run selects marked in use (`providers.codex.model_provider`, else the file's
//! `model_provider`, else that of its selected `[profiles.<name>]`, else the built-in `openai`).

use std::path::Path;

use corral_engine::{AllowRule, ConfiguredEndpoint};
use toml_edit::{ImDocument, TableLike};

/// Reads `file` (`shown` is how to name it to people); a missing or unparsable file names none
/// (Codex itself reports a broken one when it starts).
pub(crate) fn configured_endpoints(
    file: &Path,
    shown: &str,
    selected: Option<&str>,
) -> Vec<ConfiguredEndpoint> {
    let Ok(text) = std::fs::read_to_string(file) else {
        return Vec::new();
    };
    from_text(&text, shown, selected)
}

fn from_text(text: &str, shown: &str, selected: Option<&str>) -> Vec<ConfiguredEndpoint> {
    let Ok(doc) = ImDocument::parse(text) else {
        return Vec::new();
    };
    let root = doc.as_table();
    let text_of = |table: &dyn TableLike, key: &str| {
        table
            .get(key)
            .and_then(|item| item.as_str())
            .map(str::to_string)
    };
    let profile_provider = text_of(root, "profile").and_then(|profile| {
        let profiles = root.get("profiles")?.as_table_like()?;
        text_of(profiles.get(&profile)?.as_table_like()?, "model_provider")
    });
    let selected = selected
        .map(str::to_string)
        .or_else(|| text_of(root, "model_provider"))
        .or(profile_provider)
        .unwrap_or_else(|| "openai".to_string());
    let Some(providers) = root.get("model_providers").and_then(|p| p.as_table_like()) else {
        return Vec::new();
    };
    providers
        .iter()
        .filter_map(|(id, item)| {
            let url = text_of(item.as_table_like()?, "base_url")?;
            Some(ConfiguredEndpoint {
                endpoint: AllowRule::from_url(&url)?,
                source: format!("{shown} [model_providers.{id}] base_url"),
                in_use: id == selected,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONFIG: &str = r#"
model_provider = "corp"

[model_providers.corp]
base_url = "https://llm.corp.example:8443/v1"

[model_providers.spare]
base_url = "http://127.0.0.1:4000/v1"

[model_providers.nourl]
name = "x"
"#;

    fn listed(found: &[ConfiguredEndpoint]) -> Vec<(String, String, bool)> {
        found
            .iter()
            .map(|c| (c.endpoint.to_string(), c.source.clone(), c.in_use))
            .collect()
    }

    #[test]
    fn every_base_url_is_named_and_the_selected_one_is_in_use() {
        let found = from_text(CONFIG, "~/.codex/config.toml", None);
        assert_eq!(
            listed(&found),
            [
                (
                    "llm.corp.example:8443".to_string(),
                    "~/.codex/config.toml [model_providers.corp] base_url".to_string(),
                    true
                ),
                (
                    "127.0.0.1:4000".to_string(),
                    "~/.codex/config.toml [model_providers.spare] base_url".to_string(),
                    false
                ),
            ]
        );
        let found = from_text(CONFIG, "c", Some("spare"));
        assert_eq!(
            found.iter().map(|c| c.in_use).collect::<Vec<_>>(),
            [false, true],
            "Corral's providers.codex.model_provider wins over the file's"
        );
    }

    #[test]
    fn a_profile_selects_its_provider_and_a_broken_file_names_nothing() {
        let text = r#"
profile = "work"
[profiles.work]
model_provider = "corp"
[model_providers.corp]
base_url = "https://llm.corp.example/v1"
"#;
        let found = from_text(text, "c", None);
        assert_eq!(found.len(), 1);
        assert!(found[0].in_use);
        assert_eq!(found[0].endpoint.to_string(), "llm.corp.example:443");
        assert!(from_text("model_provider = ", "c", None).is_empty());
        assert!(from_text("", "c", None).is_empty());
    }
}
