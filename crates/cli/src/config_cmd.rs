//! `corral config show`: the merged settings, each value with its source; `corral config
//! trust`: trusting the project's `corral.toml` as it is, so it may set user-only keys.

use corral_compose::{LoadedSettings, SettingsSources, trust_project_file};

use crate::exit::{Exit, usage};
use crate::term::outln;

/// The process environment as text. A variable whose name or value is not UTF-8 (an `OLDPWD`
/// in another encoding, say) is left out: no setting can come from it, and no child needs it
/// through Corral. A `CORRAL_*` one is an error naming it, since it was meant as a setting.
pub fn utf8_env() -> anyhow::Result<Vec<(String, String)>> {
    let mut env = Vec::new();
    for (name, value) in std::env::vars_os() {
        match (name.into_string(), value.into_string()) {
            (Ok(name), Ok(value)) => env.push((name, value)),
            (Ok(name), Err(_)) if name.starts_with(corral_compose::ENV_PREFIX) => {
                return Err(usage(format!(
                    "the environment variable {name} is not UTF-8 text"
                )));
            }
            (Ok(_), Err(_)) | (Err(_), _) => {}
        }
    }
    Ok(env)
}

fn sources(
    cwd: &std::path::Path,
    flags: Vec<(String, serde_json::Value)>,
) -> anyhow::Result<SettingsSources> {
    let mut sources = SettingsSources::discover(cwd, utf8_env()?);
    sources.flags = flags;
    Ok(sources)
}

/// Loads the settings the way `corral run` would, from the current directory.
pub fn load_settings(
    cwd: &std::path::Path,
    flags: Vec<(String, serde_json::Value)>,
) -> anyhow::Result<LoadedSettings> {
    LoadedSettings::load(&sources(cwd, flags)?).map_err(|e| usage(e.to_string()))
}

/// Trusts the project file of `cwd` as it is now, after printing what it sets.
pub fn trust(cwd: &std::path::Path) -> anyhow::Result<Exit> {
    let trusted =
        trust_project_file(&sources(cwd, Vec::new())?).map_err(|e| usage(e.to_string()))?;
    outln!("trusted {} ({})", trusted.path.display(), trusted.digest);
    if trusted.keys.is_empty() {
        outln!("it sets no user-only key; nothing changes until it does");
    } else {
        outln!("it may now set, until its content changes:");
        for key in &trusted.keys {
            outln!("  - {key}");
        }
    }
    Ok(Exit::Success)
}

/// Prints every setting.
pub fn show(json: bool) -> anyhow::Result<Exit> {
    let cwd = std::env::current_dir()?;
    let loaded = load_settings(&cwd, Vec::new())?;
    let entries = loaded.entries();
    if json {
        let list: Vec<crate::json_lines::SettingJson<'_>> = entries
            .iter()
            .map(|e| crate::json_lines::SettingJson {
                key: &e.key,
                value: &e.value,
                source: e.source.to_string(),
            })
            .collect();
        outln!("{}", crate::term::json_pretty(&list)?);
    } else {
        let width = entries
            .iter()
            .map(|e| e.key.len() + e.value.to_string().len())
            .max()
            .unwrap_or(0);
        for e in entries {
            let left = format!("{} = {}", e.key, e.value);
            outln!("{left:<w$}  # {}", e.source, w = width + 3);
        }
    }
    Ok(Exit::Success)
}
