//! The provider wiring check, part of the layering gate: every crate under `crates/providers/`
//! is wired in each place `docs/adding-a-provider.md` names, so a provider crate added without
//! one of them fails here with the step it misses.
//!
//! The compiler already asks for the rest: a new `ProviderId` variant makes every exhaustive
//! `match` on it (the descriptor arm in compose, the settings table) a compile error until it is
//! handled, and a crate that drives the engine without a `deny.toml` wrapper fails cargo-deny.

use std::path::{Path, PathBuf};

use anyhow::Context;
use serde_json::Value;

use crate::{layers, shell};

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
    let mut found = not_members(root, packages)?;
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
        if !layers::is_provider(name) {
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

/// Each crate under `crates/providers/` that `cargo metadata` does not list: the `crates/*` glob
/// leaves that folder out, so a provider crate is a member only where it is named.
fn not_members(root: &Path, packages: &[Value]) -> anyhow::Result<Vec<String>> {
    let listed: Vec<PathBuf> = packages
        .iter()
        .filter_map(|p| p["manifest_path"].as_str())
        .filter_map(|path| std::fs::canonicalize(path).ok())
        .collect();
    let root = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
    let dir = root.join(PROVIDERS_DIR);
    let entries =
        std::fs::read_dir(&dir).with_context(|| format!("could not read {}", dir.display()))?;
    let mut found = Vec::new();
    for entry in entries {
        let manifest = entry
            .with_context(|| format!("could not read {}", dir.display()))?
            .path()
            .join("Cargo.toml");
        let Ok(manifest) = std::fs::canonicalize(&manifest) else {
            continue;
        };
        if !listed.contains(&manifest) {
            found.push(format!(
                "{}: a provider crate that is no workspace member: add its folder to `members` \
                 and `default-members` of the root Cargo.toml; see docs/adding-a-provider.md",
                shell::relative(&root, &manifest)
            ));
        }
    }
    found.sort();
    Ok(found)
}

/// The provider directory (`crates/providers/<name>`) of a manifest, if it is one.
fn provider_dir(root: &Path, manifest: &Path) -> Option<String> {
    let root = std::fs::canonicalize(root).ok()?;
    let manifest = std::fs::canonicalize(manifest).ok()?;
    let rel = manifest.strip_prefix(&root).ok()?.parent()?;
    let rel = rel.to_str()?;
    rel.starts_with(PROVIDERS_DIR).then(|| rel.to_string())
}
