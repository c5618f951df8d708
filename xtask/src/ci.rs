//! `cargo xtask ci`: every gate, in order, stopping at the first failure.
//!
//! The first step makes sure the machine has what the gates need (`prereq::CI`: cargo-deny at its
//! pinned version, cargo-nextest, bubblewrap, the five pinned CLIs), installing what it can and
//! failing at once with the fix for what it cannot, so the README's command works as the first
//! command on a fresh machine. Then formatting, clippy, cargo-deny, the layering check, tidy, the
//! test suite, the offline demo (the README's main command, end to end), one short run of each
//! benchmark (so that a bench cannot rot unseen), the self-check that proves the gates still
//! reject planted violations, and the crate `cargo xtask new-provider` scaffolds, built and tested.
//! Each step prints its name and elapsed time; a failure names the step and the command that
//! failed.

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use crate::{demo, layers, prereq, self_check, shell, tidy};

/// The cargo-deny gate, after `cargo`. Advisories need the advisory database, so they are not
/// part of it. It runs online: `cargo metadata`, which cargo-deny calls, needs the crates of every
/// target (Windows-only ones too), and a machine that only ever built for Linux has not
/// downloaded those. No `-D warnings`: `multiple-versions` is meant to warn, and so is a wrapper
/// cargo-deny never sees as a direct parent (`warning[unused-wrapper]`).
pub const DENY_ARGS: &[&str] = &["deny", "check", "bans", "licenses", "sources"];

#[derive(Debug, Clone, Copy)]
enum Step {
    Prerequisites,
    Fmt,
    Clippy,
    Doc,
    Deny,
    Layers,
    Tidy,
    Tests,
    Demo,
    BenchSmoke,
    SelfCheck,
    Scaffold,
}

const STEPS: &[Step] = &[
    Step::Prerequisites,
    Step::Fmt,
    Step::Clippy,
    Step::Doc,
    Step::Deny,
    Step::Layers,
    Step::Tidy,
    Step::Tests,
    Step::Demo,
    Step::BenchSmoke,
    Step::SelfCheck,
    Step::Scaffold,
];

impl Step {
    fn name(self) -> &'static str {
        match self {
            Self::Prerequisites => "prerequisites",
            Self::Fmt => "fmt",
            Self::Clippy => "clippy",
            Self::Doc => "doc",
            Self::Deny => "cargo-deny",
            Self::Layers => "layers",
            Self::Tidy => "tidy",
            Self::Tests => "tests",
            Self::Demo => "demo",
            Self::BenchSmoke => "bench-smoke",
            Self::Scaffold => "scaffold",
            Self::SelfCheck => "self-check",
        }
    }

    fn run(self, root: &Path) -> anyhow::Result<()> {
        match self {
            Self::Prerequisites => {
                prereq::ensure(&prereq::Machine::current(root), prereq::CI).map(|_| ())
            }
            Self::Fmt => shell::run(shell::cargo(root).args(["fmt", "--all", "--", "--check"])),
            Self::Clippy => shell::run(shell::cargo(root).args([
                "clippy",
                "--workspace",
                "--all-targets",
                "--",
                "-D",
                "warnings",
            ])),
            // Broken intra-doc links and malformed docs fail, private items included.
            Self::Doc => shell::run(
                shell::cargo(root)
                    .args([
                        "doc",
                        "--workspace",
                        "--no-deps",
                        "--document-private-items",
                    ])
                    .env("RUSTDOCFLAGS", "-D warnings"),
            ),
            Self::Deny => deny(root),
            Self::Layers => layers::run(root),
            Self::Tidy => tidy::run(root),
            Self::Tests => tests(root),
            // The README's main command, end to end: nothing else runs it, and a change to how
            // corral finds its project once broke it unseen.
            Self::Demo => demo::run(root),
            // The bench targets are not tests, so nextest never runs them: without this step a
            // bench broke unseen when the sandbox became the default. Without `--bench` each
            // makes one short, checked run in a debug build (seconds, not the minutes of
            // `cargo xtask bench`).
            Self::BenchSmoke => shell::run(shell::cargo(root).args([
                "test",
                "--benches",
                "-p",
                "corral-engine",
                "-p",
                "corral-cli",
            ])),
            // `cargo xtask new-provider`'s crate, built and tested in a scratch copy of the
            // workspace (docs/adding-a-provider.md): skipped by the test suite, which does not
            // set the variable; run here, after the self-check, whose target directory it
            // shares (the self-check built the dependencies there). Through nextest, which
            // holds no lock on a target directory while a test runs.
            Self::Scaffold => shell::run(
                shell::cargo(root)
                    .args([
                        "nextest",
                        "run",
                        "-p",
                        "xtask",
                        "-E",
                        "test(the_scaffolded_crate_builds_and_passes_its_skeleton)",
                        "--no-capture",
                    ])
                    .env("CORRAL_XTASK_SCAFFOLD_BUILD", "1"),
            ),
            Self::SelfCheck => self_check::run(root, &[]),
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
    shell::run(&mut deny_command(root))
}

/// The test suite, with nextest (a prerequisite of `ci`).
fn tests(root: &Path) -> anyhow::Result<()> {
    shell::run(shell::cargo(root).args(["nextest", "run", "--workspace", "--no-fail-fast"]))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `.ci/run` only prepares the shell and runs the README's command: its last command is
    /// `cargo xtask ci`, and it holds no version pin (those live in `prereq.rs` and
    /// `pinned_clis.rs`) and installs nothing itself.
    #[test]
    fn ci_run_is_a_thin_wrapper_around_the_readme_command() {
        let root = shell::project_root();
        let script = std::fs::read_to_string(root.join(".ci/run")).unwrap();
        let commands: Vec<&str> = script
            .lines()
            .map(str::trim)
            .filter(|line| !line.is_empty() && !line.starts_with('#'))
            .collect();
        assert_eq!(commands.last(), Some(&"cargo xtask ci"), "{script}");
        for needle in ["install", "VERSION", "apt-get", "npm "] {
            assert!(
                !commands.iter().any(|line| line.contains(needle)),
                "`.ci/run` does `{needle}` itself: {script}"
            );
        }
        let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
        assert!(
            readme.contains("cargo xtask ci"),
            "the README names the command"
        );
    }
}
