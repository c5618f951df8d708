//! The provider wiring check, part of the layering gate: every crate under `crates/providers/`
//! is wired in each place `docs/adding-a-provider.md` names, so a provider crate added without
//! one of them fails here with the step it misses.
//!
//! The compiler already asks for the rest: a new `ProviderId` variant makes every exhaustive
//! `match` on it (the descriptor arm in compose, the settings table) a compile error until it is
//! handled, and a crate that drives the engine without a `deny.toml` wrapper fails cargo-deny.

use std::path::Path;

use anyhow::Context;
use serde_json::Value;

use crate::layers::{LAYERS, PROVIDER, Rules};

/// Where the provider crates live.
const PROVIDERS_DIR: &str = "crates/providers/";
/// The one file that names every provider.
const FACTORY: &str = "crates/compose/src/factory.rs";

/// Every missing wiring step of every provider crate in the workspace at `root`, given its
/// `cargo metadata`.
pub fn violations(root: &Path, metadata: &Value) -> anyhow::Result<Vec<String>> {
    let packages = metadata["packages"]
        .as_array()
        .context("cargo metadata has no `packages` array")?;
    let read = |rel: &str| {
        std::fs::read_to_string(root.join(rel)).with_context(|| format!("could not read {rel}"))
    };
    let manifest = read("Cargo.toml")?;
    let deny = read("deny.toml")?;
    let factory = read(FACTORY)?;
    let compose_deps: Vec<&str> = packages
        .iter()
        .find(|p| p["name"] == "corral-compose")
        .and_then(|p| p["dependencies"].as_array())
        .map(|deps| {
            deps.iter()
                .filter(|d| d["kind"].is_null())
                .filter_map(|d| d["name"].as_str())
                .collect()
        })
        .unwrap_or_default();
    let mut found = Vec::new();
    for package in packages {
        let (Some(name), Some(path)) =
            (package["name"].as_str(), package["manifest_path"].as_str())
        else {
            continue;
        };
        let Some(dir) = provider_dir(root, Path::new(path)) else {
            continue;
        };
        let step = |what: &str| {
            format!("provider crate {name} ({dir}): {what}; see docs/adding-a-provider.md")
        };
        if manifest.matches(&format!("\"{dir}\"")).count() < 2 {
            found.push(step(
                "not in both `members` and `default-members` of the root Cargo.toml",
            ));
        }
        let is_provider_layer = LAYERS
            .iter()
            .any(|layer| layer.name == name && is_provider_rules(&layer.rules));
        if !is_provider_layer {
            found.push(step(
                "no `Layer { name, rules: PROVIDER }` in xtask/src/layers.rs",
            ));
        }
        if !deny.contains(&format!(
            "{{ crate = \"{name}\", wrappers = [\"corral-compose\"]"
        )) {
            found.push(step(
                "no `{ crate = \"<name>\", wrappers = [\"corral-compose\"] }` entry in deny.toml",
            ));
        }
        if !compose_deps.contains(&name) {
            found.push(step(
                "not a dependency of corral-compose (crates/compose/Cargo.toml)",
            ));
        }
        let module = name.replace('-', "_");
        if !factory.contains(&format!("{module}::DESCRIPTOR")) {
            found.push(step(&format!(
                "its `{module}::DESCRIPTOR` has no arm in `descriptor()` ({FACTORY})"
            )));
        }
    }
    Ok(found)
}

/// Whether `rules` are the provider rules (the same internal crates, of the same kinds).
fn is_provider_rules(rules: &Rules) -> bool {
    let internal = |rules: &Rules| match rules {
        Rules::Product { internal, .. } => Some(
            internal
                .iter()
                .map(|dep| (dep.name, dep.kinds.to_vec()))
                .collect::<Vec<_>>(),
        ),
        Rules::Tool => None,
    };
    internal(rules).is_some() && internal(rules) == internal(&PROVIDER)
}

/// The provider directory (`crates/providers/<name>`) of a manifest, if it is one.
fn provider_dir(root: &Path, manifest: &Path) -> Option<String> {
    let root = std::fs::canonicalize(root).ok()?;
    let manifest = std::fs::canonicalize(manifest).ok()?;
    let rel = manifest.strip_prefix(&root).ok()?.parent()?;
    let rel = rel.to_str()?;
    rel.starts_with(PROVIDERS_DIR).then(|| rel.to_string())
}
