//! `cargo xtask self-check`: proof that each gate fails on a violation planted on purpose.
//!
//! A gate that silently accepts everything looks exactly like a gate that passes, so each case
//! copies the workspace into `target/xtask-self-check/<case>/`, plants one violation, runs the
//! gates that must catch it, and checks that each one fails *and* names the planted violation
//! (a gate failing for some other reason proves nothing). Cargo builds in the scratch copies share
//! the workspace's target directory, so only the planted crate itself is checked again.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, bail};

use crate::{ci, layers, prereq, shell, tidy};

/// What the scratch copy holds: enough to resolve, lint and check the workspace.
const COPIED: &[&str] = &[
    "Cargo.toml",
    "Cargo.lock",
    "deny.toml",
    "clippy.toml",
    "rust-toolchain.toml",
    ".cargo",
    "crates",
    // A workspace member: without it the scratch workspace does not load.
    "xtask",
];

#[derive(Debug, Clone, Copy)]
enum Gate {
    CargoDeny,
    Layers,
    Clippy,
    Tidy,
}

impl Gate {
    fn name(self) -> &'static str {
        match self {
            Self::CargoDeny => "cargo-deny",
            Self::Layers => "layers",
            Self::Clippy => "clippy",
            Self::Tidy => "tidy",
        }
    }
}

#[derive(Debug)]
enum Plant {
    /// Adds `line` right after the `[dependencies]` header of `manifest`.
    Dependency {
        manifest: &'static str,
        line: &'static str,
    },
    /// Appends `text` to `file`.
    Code {
        file: &'static str,
        text: &'static str,
    },
}

#[derive(Debug)]
struct Case {
    dir: &'static str,
    violation: &'static str,
    plant: Plant,
    /// Each gate that must reject the plant, with text its failure output must contain.
    gates: &'static [(Gate, &'static [&'static str])],
}

const CASES: &[Case] = &[
    Case {
        dir: "contract-uses-engine",
        violation: "corral-contract -> corral-engine (normal dep)",
        plant: Plant::Dependency {
            manifest: "crates/contract/Cargo.toml",
            line: "corral-engine.workspace = true",
        },
        gates: &[
            (
                Gate::CargoDeny,
                &[
                    "direct parent 'corral-contract",
                    "error[banned]: crate 'corral-engine",
                ],
            ),
            (
                Gate::Layers,
                &["corral-contract -> corral-engine (normal dep) is not allowed"],
            ),
        ],
    },
    Case {
        dir: "engine-uses-test-support",
        violation: "corral-engine -> corral-test-support (normal dep)",
        plant: Plant::Dependency {
            manifest: "crates/engine/Cargo.toml",
            line: "corral-test-support.workspace = true",
        },
        gates: &[(
            Gate::Layers,
            &["corral-engine -> corral-test-support (normal dep) is not allowed"],
        )],
    },
    Case {
        dir: "contract-creates-process",
        violation: "std::process::Command::new in corral-contract",
        plant: Plant::Code {
            file: "crates/contract/src/lib.rs",
            text: "\n/// Planted by `cargo xtask self-check`: a process created outside the engine.\n\
                   pub fn planted_process() -> std::io::Result<std::process::Child> {\n    \
                   std::process::Command::new(\"true\").spawn()\n}\n",
        },
        gates: &[
            (
                Gate::Clippy,
                &["use of a disallowed method `std::process::Command::new`"],
            ),
            (
                Gate::Tidy,
                &[
                    "crates/contract/src/lib.rs:",
                    "`std::process::Command::new` outside",
                ],
            ),
        ],
    },
    Case {
        dir: "xtask-runs-cargo-offline",
        violation: "cargo's offline flag in xtask",
        plant: Plant::Code {
            file: "xtask/src/ci.rs",
            // In two pieces, so this file does not hold the flag itself.
            text: concat!(
                "\n/// Planted by `cargo xtask self-check`: a gate that passes only on a warm cache.\n\
                 pub const PLANTED: &[&str] = &[\"deny\", \"-",
                "-offline\", \"check\"];\n"
            ),
        },
        gates: &[(Gate::Tidy, &["xtask/src/ci.rs:", "in xtask or .ci"])],
    },
];

/// How a gate answered a planted violation.
#[derive(Debug)]
enum Verdict {
    Rejected,
    Accepted,
    /// It failed, but its output does not name the planted violation.
    FailedOtherwise(String),
}

/// Runs every case; fails if any gate accepted its planted violation.
pub fn run(root: &Path) -> anyhow::Result<()> {
    prereq::ensure(&prereq::Machine::current(root), &[prereq::CARGO_DENY])?;
    let base = root.join("target").join("xtask-self-check");
    let mut failures = 0_usize;
    for case in CASES {
        let started = Instant::now();
        let scratch = base.join(case.dir);
        prepare(root, &scratch)?;
        plant(&scratch, &case.plant)?;
        for (gate, evidence) in case.gates {
            let (gate_name, violation) = (gate.name(), case.violation);
            match judge(root, &scratch, *gate, evidence)? {
                Verdict::Rejected => {
                    println!("gate {gate_name} rejected planted violation {violation}: ok");
                }
                Verdict::Accepted => {
                    failures += 1;
                    println!("gate {gate_name} ACCEPTED planted violation {violation}: FAILED");
                }
                Verdict::FailedOtherwise(output) => {
                    failures += 1;
                    println!(
                        "gate {gate_name} failed, but not on planted violation {violation} \
                         (expected {evidence:?} in its output): FAILED\n{}",
                        tail(&output, 40)
                    );
                }
            }
        }
        println!(
            "  ({} in {:.1}s, scratch copy kept at {})",
            case.dir,
            started.elapsed().as_secs_f64(),
            shell::relative(root, &scratch)
        );
    }
    if failures > 0 {
        bail!("self-check failed: {failures} gate(s) did not reject their planted violation");
    }
    println!("self-check ok: every gate rejected its planted violation");
    Ok(())
}

fn judge(root: &Path, scratch: &Path, gate: Gate, evidence: &[&str]) -> anyhow::Result<Verdict> {
    let (failed, output) = match gate {
        Gate::CargoDeny => {
            command_outcome(ci::deny_command(scratch).env("CARGO_TERM_COLOR", "never"))?
        }
        Gate::Clippy => {
            let mut cmd = shell::cargo(scratch);
            cmd.args([
                "clippy",
                "--package",
                "corral-contract",
                "--",
                "-D",
                "warnings",
            ])
            .env("CARGO_TARGET_DIR", target_dir(root))
            .env("CARGO_TERM_COLOR", "never");
            command_outcome(&mut cmd)?
        }
        Gate::Layers => check_outcome(layers::check(scratch)),
        Gate::Tidy => check_outcome(tidy::check(scratch)),
    };
    Ok(if !failed {
        Verdict::Accepted
    } else if evidence.iter().all(|needle| output.contains(needle)) {
        Verdict::Rejected
    } else {
        Verdict::FailedOtherwise(output)
    })
}

/// Whether the command failed, and everything it printed.
fn command_outcome(cmd: &mut Command) -> anyhow::Result<(bool, String)> {
    let out = shell::output(cmd)?;
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    Ok((!out.status.success(), text))
}

/// Whether an in-process check failed (an error counts as a failure), and its report.
fn check_outcome(result: anyhow::Result<Vec<String>>) -> (bool, String) {
    match result {
        Ok(violations) => (!violations.is_empty(), violations.join("\n")),
        Err(err) => (true, format!("{err:#}")),
    }
}

/// The workspace's target directory, shared by the scratch copies.
fn target_dir(root: &Path) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), PathBuf::from)
}

/// A fresh copy of the workspace at `scratch`.
fn prepare(root: &Path, scratch: &Path) -> anyhow::Result<()> {
    if scratch.exists() {
        std::fs::remove_dir_all(scratch)
            .with_context(|| format!("could not remove {}", scratch.display()))?;
    }
    std::fs::create_dir_all(scratch)
        .with_context(|| format!("could not create {}", scratch.display()))?;
    for entry in COPIED {
        let from = root.join(entry);
        if from.exists() {
            copy(&from, &scratch.join(entry))?;
        }
    }
    Ok(())
}

/// Copies a file, or a directory tree without its `target` directories.
fn copy(from: &Path, to: &Path) -> anyhow::Result<()> {
    if from.is_dir() {
        std::fs::create_dir_all(to)
            .with_context(|| format!("could not create {}", to.display()))?;
        let entries = std::fs::read_dir(from)
            .with_context(|| format!("could not list {}", from.display()))?;
        for entry in entries {
            let entry = entry.with_context(|| format!("could not list {}", from.display()))?;
            if entry.file_name() == "target" {
                continue;
            }
            copy(&entry.path(), &to.join(entry.file_name()))?;
        }
    } else {
        std::fs::copy(from, to)
            .with_context(|| format!("could not copy {} to {}", from.display(), to.display()))?;
    }
    Ok(())
}

fn plant(scratch: &Path, plant: &Plant) -> anyhow::Result<()> {
    match plant {
        Plant::Dependency { manifest, line } => {
            let path = scratch.join(manifest);
            let text = read(&path)?;
            write(&path, &with_dependency(&text, line))
        }
        Plant::Code { file, text } => {
            let path = scratch.join(file);
            let mut code = read(&path)?;
            code.push_str(text);
            write(&path, &code)
        }
    }
}

/// `manifest` with `line` added to its `[dependencies]` table (created if absent).
fn with_dependency(manifest: &str, line: &str) -> String {
    let mut out = String::with_capacity(manifest.len() + line.len() + 16);
    let mut inserted = false;
    for existing in manifest.lines() {
        out.push_str(existing);
        out.push('\n');
        if !inserted && existing.trim() == "[dependencies]" {
            out.push_str(line);
            out.push('\n');
            inserted = true;
        }
    }
    if !inserted {
        out.push_str("\n[dependencies]\n");
        out.push_str(line);
        out.push('\n');
    }
    out
}

fn read(path: &Path) -> anyhow::Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("could not read {}", path.display()))
}

fn write(path: &Path, text: &str) -> anyhow::Result<()> {
    std::fs::write(path, text).with_context(|| format!("could not write {}", path.display()))
}

/// The last `lines` lines of `text`.
fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dependency_goes_into_the_dependencies_table() {
        let manifest = "[package]\nname = \"x\"\n\n[dependencies]\nserde.workspace = true\n\n[dev-dependencies]\ninsta.workspace = true\n";
        assert_eq!(
            with_dependency(manifest, "corral-engine.workspace = true"),
            "[package]\nname = \"x\"\n\n[dependencies]\ncorral-engine.workspace = true\nserde.workspace = true\n\n[dev-dependencies]\ninsta.workspace = true\n"
        );
        assert_eq!(
            with_dependency("[package]\nname = \"x\"\n", "a = \"1\""),
            "[package]\nname = \"x\"\n\n[dependencies]\na = \"1\"\n"
        );
    }
}
