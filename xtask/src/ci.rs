//! `cargo xtask ci`: every gate, in order, stopping at the first failure.
//!
//! The steps are formatting, clippy, cargo-deny, the layering check, tidy, the test suite and the
//! self-check that proves the gates still reject planted violations. Each step prints its name and
//! elapsed time; a failure names the step and the command that failed.

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, bail};

use crate::{layers, self_check, shell, tidy};

/// The cargo-deny version `.ci/run` installs and the gate is written against.
pub const CARGO_DENY_VERSION: &str = "0.20.2";

/// The cargo-deny gate, after `cargo`. Advisories need the network, so they are not part of it.
/// No `-D warnings`: the crates `deny.toml` plans for but that do not exist yet make every one of
/// their wrappers a `warning[unused-wrapper]`, and `multiple-versions` is meant to warn.
pub const DENY_ARGS: &[&str] = &["deny", "--offline", "check", "bans", "licenses", "sources"];

#[derive(Debug, Clone, Copy)]
enum Step {
    Fmt,
    Clippy,
    Deny,
    Layers,
    Tidy,
    Tests,
    SelfCheck,
}

const STEPS: &[Step] = &[
    Step::Fmt,
    Step::Clippy,
    Step::Deny,
    Step::Layers,
    Step::Tidy,
    Step::Tests,
    Step::SelfCheck,
];

impl Step {
    fn name(self) -> &'static str {
        match self {
            Self::Fmt => "fmt",
            Self::Clippy => "clippy",
            Self::Deny => "cargo-deny",
            Self::Layers => "layers",
            Self::Tidy => "tidy",
            Self::Tests => "tests",
            Self::SelfCheck => "self-check",
        }
    }

    fn run(self, root: &Path) -> anyhow::Result<()> {
        match self {
            Self::Fmt => shell::run(shell::cargo(root).args(["fmt", "--all", "--", "--check"])),
            Self::Clippy => shell::run(shell::cargo(root).args([
                "clippy",
                "--workspace",
                "--all-targets",
                "--",
                "-D",
                "warnings",
            ])),
            Self::Deny => deny(root),
            Self::Layers => layers::run(root),
            Self::Tidy => tidy::run(root),
            Self::Tests => tests(root),
            Self::SelfCheck => self_check::run(root),
        }
    }
}

/// Runs every step; fails on the first step that fails.
pub fn run(root: &Path) -> anyhow::Result<()> {
    let started = Instant::now();
    let mut timings = Vec::new();
    for (index, step) in STEPS.iter().enumerate() {
        let name = step.name();
        println!("\n==> ci step {}/{}: {name}", index + 1, STEPS.len());
        let step_started = Instant::now();
        let result = step.run(root);
        let secs = step_started.elapsed().as_secs_f64();
        if let Err(err) = result {
            print_timings(&timings);
            return Err(err.context(format!("ci step `{name}` failed after {secs:.1}s")));
        }
        println!("==> ci step {name}: ok in {secs:.1}s");
        timings.push((name, secs));
    }
    print_timings(&timings);
    println!(
        "ci ok: {} steps in {:.1}s",
        STEPS.len(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

fn print_timings(timings: &[(&str, f64)]) {
    if timings.is_empty() {
        return;
    }
    println!("\nci step timings:");
    for (name, secs) in timings {
        println!("  {name:<12} {secs:>7.1}s");
    }
}

/// The cargo-deny gate command for the workspace at `root`.
pub fn deny_command(root: &Path) -> Command {
    let mut cmd = shell::cargo(root);
    cmd.args(DENY_ARGS);
    cmd
}

fn deny(root: &Path) -> anyhow::Result<()> {
    ensure_cargo_deny(root)?;
    shell::run(&mut deny_command(root))
}

/// Fails with an install hint when cargo-deny is missing; warns on another version.
pub fn ensure_cargo_deny(root: &Path) -> anyhow::Result<()> {
    let out = shell::output(shell::cargo(root).args(["deny", "--version"]));
    let out = match out {
        Ok(out) if out.status.success() => out,
        Ok(_) | Err(_) => bail!(
            "cargo-deny is not installed; install it with \
             `cargo install cargo-deny --locked --version {CARGO_DENY_VERSION}` (.ci/run does)"
        ),
    };
    let version =
        String::from_utf8(out.stdout).context("`cargo deny --version` printed non-UTF-8")?;
    if !version.contains(CARGO_DENY_VERSION) {
        eprintln!(
            "warning: found {}, the gate is written against cargo-deny {CARGO_DENY_VERSION}",
            version.trim()
        );
    }
    Ok(())
}

/// The test suite: nextest when it is installed, `cargo test` otherwise.
fn tests(root: &Path) -> anyhow::Result<()> {
    if shell::succeeds(shell::cargo(root).args(["nextest", "--version"])) {
        shell::run(shell::cargo(root).args(["nextest", "run", "--workspace", "--no-fail-fast"]))
    } else {
        println!("cargo-nextest is not installed: falling back to `cargo test --workspace`");
        shell::run(shell::cargo(root).args(["test", "--workspace"]))
    }
}
