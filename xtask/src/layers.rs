//! The crate layering gate: every workspace member's declared dependencies, checked against a
//! declarative table with `cargo metadata --format-version 1 --no-deps`.
//!
//! This is the fine half of the layering; `deny.toml` is the coarse half. cargo-deny only sees
//! direct parents of banned crates. This table also knows dependency kinds (test fixtures are a
//! dev-dependency only), which external crates a member may use (the ports stay tiny; `anyhow`
//! only in the binary), and that every member opts into the workspace lints.
//! A workspace member missing from [`LAYERS`] is an error, so a new crate must be declared here.

use std::collections::BTreeSet;
use std::path::Path;

use anyhow::{Context, bail};
use serde_json::Value;

use crate::shell;

/// How a dependency is declared: `[dependencies]`, `[dev-dependencies]` or `[build-dependencies]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Normal,
    Dev,
    Build,
}

impl Kind {
    fn from_metadata(kind: Option<&str>) -> anyhow::Result<Self> {
        match kind {
            None => Ok(Self::Normal),
            Some("dev") => Ok(Self::Dev),
            Some("build") => Ok(Self::Build),
            Some(other) => bail!("unknown dependency kind `{other}` in cargo metadata"),
        }
    }

    fn label(self) -> &'static str {
        match self {
            Self::Normal => "normal",
            Self::Dev => "dev",
            Self::Build => "build",
        }
    }
}

/// A dependency a crate may declare, and the kinds it may declare it as.
#[derive(Debug)]
pub struct Dep {
    pub name: &'static str,
    pub kinds: &'static [Kind],
}

const ANY_KIND: &[Kind] = &[Kind::Normal, Kind::Dev, Kind::Build];
const DEV_ONLY: &[Kind] = &[Kind::Dev];

/// May be declared as a normal, dev or build dependency.
const fn any(name: &'static str) -> Dep {
    Dep {
        name,
        kinds: ANY_KIND,
    }
}

/// May be declared as a dev-dependency only.
const fn dev(name: &'static str) -> Dep {
    Dep {
        name,
        kinds: DEV_ONLY,
    }
}

/// Which external (registry) crates a member may declare.
#[derive(Debug)]
pub enum Externals {
    /// Any, subject to [`RESERVED`].
    Any,
    /// Exactly these, subject to [`RESERVED`].
    Only(&'static [Dep]),
}

/// What a member may depend on.
#[derive(Debug)]
pub enum Rules {
    /// A tool, not product: any internal or external crate, and [`RESERVED`] does not apply.
    Tool,
    /// A product crate: only the internal crates listed, externals as given, [`RESERVED`] applies.
    Product {
        internal: &'static [Dep],
        external: Externals,
    },
    /// The composition root: a product crate that may also depend on every provider crate (a
    /// layer whose rules are [`PROVIDER`]), so that a new provider's one line here is its own.
    Root {
        internal: &'static [Dep],
        external: Externals,
    },
}

/// One workspace member and its rules.
#[derive(Debug)]
pub struct Layer {
    pub name: &'static str,
    pub rules: Rules,
}

/// An external crate only some product crates may declare.
#[derive(Debug)]
pub struct Reserved {
    pub name: &'static str,
    /// Empty: any declaration counts. Otherwise only a declaration enabling one of these features.
    pub features: &'static [&'static str],
    pub only_in: &'static [&'static str],
    pub reason: &'static str,
}

/// The provider adapters are siblings: ports and engine, the contract suite and fixtures in tests.
const PROVIDER: Rules = Rules::Product {
    internal: &[
        any("corral-ports"),
        any("corral-engine"),
        dev("corral-contract"),
        dev("corral-test-support"),
    ],
    external: Externals::Any,
};

/// The executors are siblings: the sprint's port and the ports, an async trait, nothing else.
const EXECUTOR: Rules = Rules::Product {
    internal: &[
        any("corral-ports"),
        any("corral-sprint"),
        dev("corral-test-support"),
    ],
    external: Externals::Only(&[any("async-trait")]),
};

/// Every workspace member and what it may depend on.
pub const LAYERS: &[Layer] = &[
    // The bottom layer: traits and types, and a handful of small external crates.
    Layer {
        name: "corral-ports",
        rules: Rules::Product {
            internal: &[dev("corral-test-support")],
            external: Externals::Only(&[
                any("async-trait"),
                // The derive that describes its records in `docs/schema/` (ADR 0012).
                any("schemars"),
                any("serde"),
                any("serde_json"),
                any("thiserror"),
                any("tokio-util"),
            ]),
        },
    },
    // The signals.json contract knows nothing of the rest of Corral but the ports' shared types
    // (the session id, the run directory's names; ADR 0006).
    Layer {
        name: "corral-contract",
        rules: Rules::Product {
            internal: &[any("corral-ports"), dev("corral-test-support")],
            external: Externals::Only(&[
                any("garde"),
                // The open flags that keep a read of an agent's file from blocking (ADR 0003).
                any("libc"),
                any("schemars"),
                any("serde"),
                any("serde_json"),
                any("thiserror"),
                dev("insta"),
                dev("tempfile"),
            ]),
        },
    },
    // Corral's files on the host below directories an agent can write (ADR 0009): a leaf, on
    // the file system calls alone.
    Layer {
        name: "corral-hostfs",
        rules: Rules::Product {
            internal: &[],
            external: Externals::Only(&[any("rustix"), any("thiserror"), dev("tempfile")]),
        },
    },
    // Starting and ending programs (ADR 0010): the only crate that forks or execs. It knows no
    // other crate of the workspace, as the ports do not.
    Layer {
        name: "corral-process",
        rules: Rules::Product {
            internal: &[],
            external: Externals::Only(&[
                any("async-trait"),
                any("libc"),
                any("nix"),
                // Safe system calls where nix has no wrapper enabled (ADR 0010).
                any("rustix"),
                any("serde"),
                any("thiserror"),
                any("tokio"),
                any("tokio-util"),
                any("tracing"),
                dev("tempfile"),
            ]),
        },
    },
    // What a run may touch, how it is enforced and the proof (ADR 0011): on the ports and
    // corral-process only, never the engine, a provider or the settings.
    Layer {
        name: "corral-sandbox",
        rules: Rules::Product {
            internal: &[
                any("corral-ports"),
                any("corral-process"),
                // A hidden home's entries are listed through one handle (ADR 0009).
                any("corral-hostfs"),
            ],
            external: Externals::Only(&[
                // A spawn's guard is a bounded command's `AfterSpawn` (corral-process).
                any("async-trait"),
                any("fastrand"),
                any("humantime"),
                any("libc"),
                any("memchr"),
                any("nix"),
                // Safe system calls where nix has no wrapper enabled (ADR 0011).
                any("rustix"),
                // An allow-list entry in the settings' JSON Schema, as its text (ADR 0012).
                any("schemars"),
                any("serde"),
                any("serde_json"),
                any("thiserror"),
                any("tokio"),
                any("tracing"),
                dev("tempfile"),
            ]),
        },
    },
    // What runs on the host with the user's network and login (ADR 0015): the ports' forge
    // over git push and gh, started through corral-process, never the engine or the sandbox.
    Layer {
        name: "corral-host",
        rules: Rules::Product {
            internal: &[
                any("corral-ports"),
                any("corral-process"),
                dev("corral-test-support"),
            ],
            external: Externals::Only(&[
                any("async-trait"),
                any("serde_json"),
                any("tokio-util"),
                any("tracing"),
                dev("tempfile"),
                dev("tokio"),
            ]),
        },
    },
    // The supervised process runner: it implements what the ports describe.
    Layer {
        name: "corral-engine",
        rules: Rules::Product {
            internal: &[
                any("corral-ports"),
                // Every program it starts, it starts through corral-process (ADR 0010).
                any("corral-process"),
                // Every run's sandbox is planned, enforced and proven there (ADR 0011).
                any("corral-sandbox"),
                // The run directory's files are replaced through one handle (ADR 0009).
                any("corral-hostfs"),
                dev("corral-test-support"),
            ],
            external: Externals::Any,
        },
    },
    Layer {
        name: "corral-claude",
        rules: PROVIDER,
    },
    Layer {
        name: "corral-codex",
        rules: PROVIDER,
    },
    Layer {
        name: "corral-copilot",
        rules: PROVIDER,
    },
    Layer {
        name: "corral-opencode",
        rules: PROVIDER,
    },
    Layer {
        name: "corral-grok",
        rules: PROVIDER,
    },
    Layer {
        name: "corral-gemini",
        rules: PROVIDER,
    },
    // The composition root: the only crate that names every provider. It implements the
    // sprint's agent seam over them (ADR 0005).
    Layer {
        name: "corral-compose",
        rules: Rules::Root {
            internal: &[
                any("corral-ports"),
                any("corral-engine"),
                any("corral-contract"),
                any("corral-sprint"),
                // The executors, built from `executor.kind` (ADR 0007).
                any("corral-executor-local"),
                any("corral-executor-ray"),
                // The forge's host commands (ADR 0015).
                any("corral-host"),
                dev("corral-test-support"),
            ],
            external: Externals::Any,
        },
    },
    // The executors are siblings (ADR 0007): each implements the sprint's executor port on
    // the ports alone, never on another executor, a provider, the engine or compose.
    Layer {
        name: "corral-executor-local",
        rules: EXECUTOR,
    },
    // The sprint: what a sprint is (its file, task order, state layout). On the ports and the
    // contract only, never the engine or a provider (ADR 0004); its externals stay few.
    Layer {
        name: "corral-sprint",
        rules: Rules::Product {
            internal: &[
                any("corral-ports"),
                any("corral-contract"),
                // Its record is written and read through one handle (ADR 0009).
                any("corral-hostfs"),
                dev("corral-test-support"),
                // Its parallel runs' tests go through the default executor (ADR 0007).
                dev("corral-executor-local"),
            ],
            external: Externals::Only(&[
                // The agent seam (`RoleAgent`) is an async trait with the ports' cancellation
                // token, as the ports' own traits are (ADR 0002).
                any("async-trait"),
                // Durations written as text in the sprint file (`check_timeout_ms = "15m"`), read as
                // the settings read them.
                any("humantime"),
                // The derive that describes `sprint.json` and its events in `docs/schema/`
                // (ADR 0012).
                any("schemars"),
                any("serde"),
                any("serde_json"),
                // The protected files' fingerprints (content and mode) before each round.
                any("sha2"),
                // The line diff `corral sprint ready` shows before it changes a file (a text
                // algorithm with no dependencies, in the tree already through insta).
                any("similar"),
                any("strsim"),
                any("thiserror"),
                // The sprint file's parser: TOML with its spans, for errors with lines.
                any("toml_edit"),
                any("tokio-util"),
                dev("insta"),
                dev("tempfile"),
                dev("tokio"),
            ]),
        },
    },
    // The ray executor: the sprint's executor port over a Ray cluster's Jobs HTTP API
    // (ADR 0008). On the sprint and the ports only, never the local executor, the engine or a
    // provider.
    Layer {
        name: "corral-executor-ray",
        rules: Rules::Product {
            internal: &[
                any("corral-ports"),
                any("corral-sprint"),
                dev("corral-test-support"),
            ],
            external: Externals::Any,
        },
    },
    // The `corral` binary: above the composition root, which is all it knows of the engine, the
    // providers and the signals contract; the sprint's file and state it reads directly.
    Layer {
        name: "corral-cli",
        rules: Rules::Product {
            internal: &[
                any("corral-ports"),
                any("corral-compose"),
                any("corral-sprint"),
                dev("corral-test-support"),
            ],
            external: Externals::Any,
        },
    },
    // Fixtures and the fake agent; a dev-dependency only (see the `dev` entries above).
    Layer {
        name: "corral-test-support",
        rules: Rules::Product {
            internal: &[any("corral-ports"), any("corral-contract")],
            external: Externals::Any,
        },
    },
    Layer {
        name: "xtask",
        rules: Rules::Tool,
    },
];

/// External crates reserved to a few product crates, whatever their `Externals`.
pub const RESERVED: &[Reserved] = &[
    Reserved {
        name: "anyhow",
        features: &[],
        only_in: &["corral-cli", "xtask"],
        reason: "libraries return thiserror enums; anyhow is for the binary and the tool",
    },
    Reserved {
        name: "figment",
        features: &[],
        only_in: &["corral-compose"],
        reason: "only the composition root reads settings",
    },
    Reserved {
        name: "clap",
        features: &[],
        only_in: &["corral-cli", "xtask"],
        reason: "only the binary parses a command line",
    },
    Reserved {
        name: "nix",
        features: &[],
        only_in: &[
            "corral-process",
            "corral-sandbox",
            "corral-engine",
            "corral-test-support",
        ],
        reason: "only the process layer, the sandbox and the engine (and the fake agent) deal in processes and signals",
    },
    Reserved {
        name: "tokio",
        features: &["process", "full"],
        only_in: &["corral-process", "corral-test-support"],
        reason: "only corral-process creates processes",
    },
];

/// `cargo xtask layers`: prints every violation and fails if there is any.
pub fn run(root: &Path) -> anyhow::Result<()> {
    let violations = check(root)?;
    if violations.is_empty() {
        println!("layers ok: every member's dependencies match xtask/src/layers.rs");
        return Ok(());
    }
    for violation in &violations {
        eprintln!("{violation}");
    }
    bail!(
        "layering check failed with {} violation(s)",
        violations.len()
    )
}

/// Every layering violation in the workspace at `root`, the provider wiring included
/// (`providers.rs`).
pub fn check(root: &Path) -> anyhow::Result<Vec<String>> {
    let metadata = metadata(root)?;
    let mut found = violations(&metadata, |manifest| {
        std::fs::read_to_string(manifest)
            .with_context(|| format!("could not read {}", manifest.display()))
    })?;
    found.extend(crate::providers::violations(root, &metadata)?);
    Ok(found)
}

fn metadata(root: &Path) -> anyhow::Result<Value> {
    let mut cmd = shell::cargo(root);
    cmd.args(["metadata", "--format-version", "1", "--no-deps"])
        .arg("--manifest-path")
        .arg(root.join("Cargo.toml"));
    let line = shell::display(&cmd);
    let out = shell::output(&mut cmd)?;
    if !out.status.success() {
        bail!(
            "`{line}` failed ({}):\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    serde_json::from_slice(&out.stdout).with_context(|| format!("`{line}` printed invalid JSON"))
}

/// The violations in a `cargo metadata` document; `read_manifest` returns a member's Cargo.toml.
fn violations(
    metadata: &Value,
    read_manifest: impl Fn(&Path) -> anyhow::Result<String>,
) -> anyhow::Result<Vec<String>> {
    let packages = metadata["packages"]
        .as_array()
        .context("cargo metadata has no `packages` array")?;
    let members: BTreeSet<&str> = packages
        .iter()
        .filter_map(|package| package["name"].as_str())
        .collect();
    let mut found = Vec::new();
    for package in packages {
        let name = package["name"]
            .as_str()
            .context("a package in cargo metadata has no name")?;
        let manifest = package["manifest_path"]
            .as_str()
            .context("a package in cargo metadata has no manifest_path")?;
        let manifest = Path::new(manifest);

        if !lints_opted_in(&read_manifest(manifest)?) {
            found.push(format!(
                "{name}: {} does not opt into the workspace lints with `[lints] workspace = true`",
                manifest.display()
            ));
        }

        let Some(layer) = LAYERS.iter().find(|layer| layer.name == name) else {
            found.push(format!(
                "{name} ({}) is a workspace member missing from LAYERS in xtask/src/layers.rs; \
                 declare what it may depend on there (and in deny.toml)",
                manifest.display()
            ));
            continue;
        };
        let (internal, external, providers) = match &layer.rules {
            Rules::Tool => continue,
            Rules::Product { internal, external } => (internal, external, false),
            Rules::Root { internal, external } => (internal, external, true),
        };

        let deps = package["dependencies"]
            .as_array()
            .with_context(|| format!("{name} has no `dependencies` array in cargo metadata"))?;
        for dep in deps {
            let dep_name = dep["name"]
                .as_str()
                .with_context(|| format!("a dependency of {name} has no name"))?;
            let kind = Kind::from_metadata(dep["kind"].as_str())?;
            let is_internal = members.contains(dep_name) || dep["path"].is_string();
            if is_internal {
                let allowed =
                    allows(internal, dep_name, kind) || (providers && is_provider(dep_name));
                if !allowed {
                    let every_provider = if providers {
                        ", and every provider crate"
                    } else {
                        ""
                    };
                    found.push(format!(
                        "{name} -> {dep_name} ({} dep) is not allowed; allowed: {}{every_provider}",
                        kind.label(),
                        describe(internal)
                    ));
                }
                continue;
            }
            if let Externals::Only(allowed) = external
                && !allows(allowed, dep_name, kind)
            {
                found.push(format!(
                    "{name} -> {dep_name} ({} dep) is not allowed; allowed externals: {}",
                    kind.label(),
                    describe(allowed)
                ));
            }
            if let Some(reserved) = reserved_violation(name, dep_name, dep) {
                found.push(format!(
                    "{name} -> {dep_name} ({} dep) is not allowed; {reserved}",
                    kind.label()
                ));
            }
        }
    }
    Ok(found)
}

/// Whether `name` is declared in [`LAYERS`] as a provider crate (with the [`PROVIDER`] rules).
pub fn is_provider(name: &str) -> bool {
    LAYERS
        .iter()
        .any(|layer| layer.name == name && is_provider_rules(&layer.rules))
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
        Rules::Root { .. } | Rules::Tool => None,
    };
    internal(rules).is_some() && internal(rules) == internal(&PROVIDER)
}

fn allows(allowed: &[Dep], name: &str, kind: Kind) -> bool {
    allowed
        .iter()
        .any(|dep| dep.name == name && dep.kinds.contains(&kind))
}

fn describe(allowed: &[Dep]) -> String {
    if allowed.is_empty() {
        return "none".to_owned();
    }
    allowed
        .iter()
        .map(|dep| {
            let kinds: Vec<&str> = dep.kinds.iter().map(|kind| kind.label()).collect();
            format!("{} ({})", dep.name, kinds.join("/"))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Why `krate` may not declare `dep`, if it is reserved to other crates.
fn reserved_violation(krate: &str, dep_name: &str, dep: &Value) -> Option<String> {
    let reserved = RESERVED.iter().find(|reserved| reserved.name == dep_name)?;
    if reserved.only_in.contains(&krate) {
        return None;
    }
    let mut what = format!("`{dep_name}`");
    if !reserved.features.is_empty() {
        let enabled: Vec<&str> = dep["features"]
            .as_array()
            .map(|features| features.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let hits: Vec<&str> = reserved
            .features
            .iter()
            .copied()
            .filter(|feature| enabled.contains(feature))
            .collect();
        if hits.is_empty() {
            return None;
        }
        what = format!("`{dep_name}` with feature `{}`", hits.join("`, `"));
    }
    Some(format!(
        "{what} is reserved to {}: {}",
        reserved.only_in.join(", "),
        reserved.reason
    ))
}

/// Whether a Cargo.toml has `[lints] workspace = true` (or `lints.workspace = true`).
fn lints_opted_in(manifest: &str) -> bool {
    let mut in_lints = false;
    for line in manifest.lines() {
        let line: String = line
            .split('#')
            .next()
            .unwrap_or_default()
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect();
        if line.starts_with('[') {
            in_lints = line == "[lints]";
            continue;
        }
        if (in_lints && line == "workspace=true") || line == "lints.workspace=true" {
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// The layering gate, run by `cargo test` / `cargo nextest run` like rust-analyzer's tidy.
    #[test]
    fn layers() {
        let root = shell::project_root();
        let violations = check(&root).unwrap();
        assert!(
            violations.is_empty(),
            "layering violations (fix them, or change xtask/src/layers.rs and deny.toml deliberately):\n{}",
            violations.join("\n")
        );
    }

    #[test]
    fn table_names_only_declared_crates() {
        let declared: Vec<&str> = LAYERS.iter().map(|layer| layer.name).collect();
        for layer in LAYERS {
            if let Rules::Product { internal, .. } | Rules::Root { internal, .. } = &layer.rules {
                for dep in *internal {
                    assert!(
                        declared.contains(&dep.name),
                        "{} allows undeclared {}",
                        layer.name,
                        dep.name
                    );
                    assert_ne!(dep.name, layer.name, "{} allows itself", layer.name);
                }
            }
        }
        for reserved in RESERVED {
            for krate in reserved.only_in {
                assert!(declared.contains(krate), "{} names {krate}", reserved.name);
            }
        }
    }

    const LINTS: &str = "[package]\nname = \"x\"\n\n[lints]\nworkspace = true\n";

    fn package(name: &str, deps: Value) -> Value {
        json!({ "name": name, "manifest_path": format!("/ws/{name}/Cargo.toml"), "dependencies": deps })
    }

    fn internal(name: &str, kind: Option<&str>) -> Value {
        json!({ "name": name, "kind": kind, "path": format!("/ws/{name}"), "features": [] })
    }

    fn external(name: &str, kind: Option<&str>, features: &[&str]) -> Value {
        json!({ "name": name, "kind": kind, "features": features })
    }

    fn check_packages(packages: Vec<Value>, manifest: &'static str) -> Vec<String> {
        violations(
            &json!({ "packages": packages }),
            |_| Ok(manifest.to_owned()),
        )
        .unwrap()
    }

    #[test]
    fn reports_every_violation_at_once() {
        let found = check_packages(
            vec![
                package(
                    "corral-claude",
                    json!([
                        internal("corral-ports", None),
                        internal("corral-engine", None),
                        internal("corral-codex", None),
                        internal("corral-contract", None),
                        internal("corral-test-support", Some("dev")),
                        external("anyhow", None, &[]),
                        external("tokio", None, &["rt", "process"]),
                    ]),
                ),
                package(
                    "corral-engine",
                    json!([internal("corral-test-support", None)]),
                ),
                package(
                    "corral-ports",
                    json!([
                        external("serde", None, &[]),
                        external("tokio", Some("dev"), &["rt"]),
                    ]),
                ),
                package("corral-codex", json!([])),
                package("corral-contract", json!([])),
                package("corral-test-support", json!([])),
                package("corral-newcomer", json!([])),
            ],
            LINTS,
        );
        let expected = [
            "corral-claude -> corral-codex (normal dep) is not allowed; allowed: corral-ports (normal/dev/build), corral-engine (normal/dev/build), corral-contract (dev), corral-test-support (dev)",
            "corral-claude -> corral-contract (normal dep) is not allowed; allowed: corral-ports (normal/dev/build), corral-engine (normal/dev/build), corral-contract (dev), corral-test-support (dev)",
            "corral-claude -> anyhow (normal dep) is not allowed; `anyhow` is reserved to corral-cli, xtask: libraries return thiserror enums; anyhow is for the binary and the tool",
            "corral-claude -> tokio (normal dep) is not allowed; `tokio` with feature `process` is reserved to corral-process, corral-test-support: only corral-process creates processes",
            "corral-engine -> corral-test-support (normal dep) is not allowed; allowed: corral-ports (normal/dev/build), corral-process (normal/dev/build), corral-sandbox (normal/dev/build), corral-hostfs (normal/dev/build), corral-test-support (dev)",
            "corral-ports -> tokio (dev dep) is not allowed; allowed externals: async-trait (normal/dev/build), schemars (normal/dev/build), serde (normal/dev/build), serde_json (normal/dev/build), thiserror (normal/dev/build), tokio-util (normal/dev/build)",
            "corral-newcomer (/ws/corral-newcomer/Cargo.toml) is a workspace member missing from LAYERS in xtask/src/layers.rs; declare what it may depend on there (and in deny.toml)",
        ];
        assert_eq!(found, expected);
    }

    #[test]
    fn only_the_composition_root_may_use_every_provider() {
        let found = check_packages(
            vec![
                package(
                    "corral-compose",
                    json!([
                        internal("corral-engine", None),
                        internal("corral-claude", None),
                        internal("corral-grok", None),
                        internal("corral-cli", None),
                    ]),
                ),
                package("corral-cli", json!([internal("corral-grok", None)])),
            ],
            LINTS,
        );
        let expected = [
            "corral-compose -> corral-cli (normal dep) is not allowed; allowed: corral-ports (normal/dev/build), corral-engine (normal/dev/build), corral-contract (normal/dev/build), corral-sprint (normal/dev/build), corral-executor-local (normal/dev/build), corral-executor-ray (normal/dev/build), corral-host (normal/dev/build), corral-test-support (dev), and every provider crate",
            "corral-cli -> corral-grok (normal dep) is not allowed; allowed: corral-ports (normal/dev/build), corral-compose (normal/dev/build), corral-sprint (normal/dev/build), corral-test-support (dev)",
        ];
        assert_eq!(found, expected);
        assert!(is_provider("corral-claude") && is_provider("corral-grok"));
        assert!(!is_provider("corral-engine") && !is_provider("corral-compose"));
    }

    #[test]
    fn tools_may_use_anything() {
        let found = check_packages(
            vec![
                package(
                    "xtask",
                    json!([
                        internal("corral-engine", None),
                        external("anyhow", None, &[]),
                        external("figment", None, &[]),
                    ]),
                ),
                package("corral-engine", json!([])),
            ],
            LINTS,
        );
        assert_eq!(found, Vec::<String>::new());
    }

    #[test]
    fn lints_opt_in_is_required() {
        assert!(lints_opted_in(LINTS));
        assert!(lints_opted_in("[package]\nlints.workspace = true\n"));
        assert!(lints_opted_in("[lints]\n  workspace=true  # inherit\n"));
        assert!(!lints_opted_in("[package]\nname = \"x\"\n"));
        assert!(!lints_opted_in("[lints]\n[features]\nworkspace = true\n"));
        assert!(!lints_opted_in("[lints]\nworkspace = false\n"));

        let found = check_packages(vec![package("corral-ports", json!([]))], "[package]\n");
        assert_eq!(
            found,
            [
                "corral-ports: /ws/corral-ports/Cargo.toml does not opt into the workspace lints with `[lints] workspace = true`"
            ]
        );
    }
}
