//! The endpoints OpenCode's own configuration files name: each `provider.<id>.options.baseURL`
//! of `$OPENCODE_CONFIG` and of `opencode.json`, `opencode.jsonc` and `config.json` in
//! `$XDG_CONFIG_HOME/opencode`, the one of the run's model (`<id>/<model>`, from Corral's
//! settings, else the file's `model`) marked in use. `OPENCODE_CONFIG_CONTENT`, which the
//! child's environment sets, is the adapter's `egress` instead (it widens the allow-list).

use std::path::{Path, PathBuf};

use corral_engine::{AllowRule, ChildEnv, ConfiguredEndpoint};

/// The files, in the order OpenCode merges them (later wins), with how to name each to people.
fn config_files(env: &ChildEnv<'_>) -> Vec<(PathBuf, String)> {
    let mut files = Vec::new();
    if let Some(dir) = env.dir_or_home("XDG_CONFIG_HOME", ".config") {
        let dir = dir.join("opencode");
        for name in ["config.json", "opencode.json", "opencode.jsonc"] {
            let file = dir.join(name);
            let shown = match env.home() {
                Some(home) if file.starts_with(&home) => match file.strip_prefix(&home) {
                    Ok(rest) => format!("~/{}", rest.display()),
                    Err(_) => file.display().to_string(),
                },
                _ => file.display().to_string(),
            };
            files.push((file, shown));
        }
    }
    if let Some(path) = env.get("OPENCODE_CONFIG") {
        files.push((PathBuf::from(path), path.to_string()));
    }
    files
}

/// Reads the files; `model` is Corral's `providers.opencode.model`.
pub(crate) fn configured_endpoints(
    env: &ChildEnv<'_>,
    model: Option<&str>,
) -> Vec<ConfiguredEndpoint> {
    let parsed: Vec<(serde_json::Value, String)> = config_files(env)
        .into_iter()
        .filter_map(|(file, shown)| Some((read_json(&file)?, shown)))
        .collect();
    let model = model.map(str::to_string).or_else(|| {
        parsed
            .iter()
            .rev()
            .find_map(|(config, _)| config["model"].as_str().map(str::to_string))
    });
    let selected = model
        .as_deref()
        .and_then(|m| m.split_once('/'))
        .map(|(provider, _)| provider.to_string());
    parsed
        .iter()
        .flat_map(|(config, shown)| from_config(config, shown, selected.as_deref()))
        .collect()
}

/// A JSON file; `None` when missing or not plain JSON (a `.jsonc` with comments: OpenCode reads
/// it, this does not, so `corral doctor` cannot name what it holds).
fn read_json(file: &Path) -> Option<serde_json::Value> {
    let text = std::fs::read_to_string(file).ok()?;
    serde_json::from_str(&text).ok()
}

fn from_config(
    config: &serde_json::Value,
    shown: &str,
    selected: Option<&str>,
) -> Vec<ConfiguredEndpoint> {
    let Some(providers) = config["provider"].as_object() else {
        return Vec::new();
    };
    providers
        .iter()
        .filter_map(|(id, provider)| {
            let url = provider["options"]["baseURL"].as_str()?;
            Some(ConfiguredEndpoint {
                endpoint: AllowRule::from_url(url)?,
                source: format!("{shown} provider.{id}.options.baseURL"),
                in_use: selected == Some(id.as_str()),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_models_provider_is_in_use_and_the_settings_model_wins() {
        let home = tempfile::tempdir().unwrap();
        let dir = home.path().join(".config/opencode");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("opencode.json"),
            r#"{"model": "corp/big", "provider": {
                "corp": {"options": {"baseURL": "https://llm.corp.example:8443/v1"}},
                "local": {"options": {"baseURL": "http://localhost:11434/v1"}},
                "plain": {"options": {}}}}"#,
        )
        .unwrap();
        std::fs::write(dir.join("opencode.jsonc"), "// a comment\n{}").unwrap();
        let vars = vec![("HOME".to_string(), home.path().display().to_string())];
        let env = ChildEnv::new(&vars);
        let found = configured_endpoints(&env, None);
        let listed: Vec<(String, String, bool)> = found
            .iter()
            .map(|c| (c.endpoint.to_string(), c.source.clone(), c.in_use))
            .collect();
        assert_eq!(
            listed,
            [
                (
                    "llm.corp.example:8443".to_string(),
                    "~/.config/opencode/opencode.json provider.corp.options.baseURL".to_string(),
                    true
                ),
                (
                    "localhost:11434".to_string(),
                    "~/.config/opencode/opencode.json provider.local.options.baseURL".to_string(),
                    false
                ),
            ]
        );
        let found = configured_endpoints(&env, Some("local/llama"));
        assert_eq!(
            found.iter().map(|c| c.in_use).collect::<Vec<_>>(),
            [false, true]
        );
    }
}
