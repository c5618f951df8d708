//! `corral config show`: the merged settings, each value with its source.

use corral_compose::{LoadedSettings, SettingsSources};

use crate::exit::{Exit, usage};

/// Loads the settings the way `corral run` would, from the current directory.
pub fn load_settings(
    cwd: &std::path::Path,
    flags: Vec<(String, serde_json::Value)>,
) -> anyhow::Result<LoadedSettings> {
    let mut sources = SettingsSources::discover(cwd, std::env::vars().collect());
    sources.flags = flags;
    LoadedSettings::load(&sources).map_err(|e| usage(e.to_string()))
}

/// Prints every setting.
pub fn show(json: bool) -> anyhow::Result<Exit> {
    let cwd = std::env::current_dir()?;
    let loaded = load_settings(&cwd, Vec::new())?;
    let entries = loaded.entries();
    if json {
        let list: Vec<serde_json::Value> = entries
            .iter()
            .map(|e| serde_json::json!({"key": e.key, "value": e.value, "source": e.source.to_string()}))
            .collect();
        println!("{}", serde_json::to_string_pretty(&list)?);
    } else {
        let width = entries
            .iter()
            .map(|e| e.key.len() + e.value.to_string().len())
            .max()
            .unwrap_or(0);
        for e in entries {
            let left = format!("{} = {}", e.key, e.value);
            println!("{left:<w$}  # {}", e.source, w = width + 3);
        }
    }
    Ok(Exit::Success)
}
