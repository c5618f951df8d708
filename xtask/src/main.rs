//! See <https://github.com/matklad/cargo-xtask/>.
//!
//! `cargo xtask` is Corral's automation: the CI gates (`ci`), the crate layering check (`layers`),
//! the source tidiness check (`tidy`) and the proof that each gate rejects what it should
//! (`self-check`), the scaffold of a new provider (`new-provider`), the engine benchmark (`bench`), the installation of the pinned real AI coding
//! CLIs (`install-clis`) and of every other prerequisite (`prerequisites`), and the demo (`demo`). This file only parses the command line; each subcommand lives in its module.
//! The layering and tidy checks also run as `#[test]`s, so `cargo test` and `cargo nextest run`
//! enforce them without any extra CI step.

// xtask is a tool, not product: it may create processes
#![allow(clippy::disallowed_methods)]

mod bench;
mod ci;
mod demo;
mod install_clis;
mod layers;
mod new_provider;
// The pinned CLI table and npm recipe, shared with corral-test-support (which xtask may not depend
// on) by compiling the same file into both crates: one table, no drift.
#[path = "../../crates/test-support/src/pinned_clis.rs"]
mod pinned_clis;
mod prereq;
mod providers;
mod self_check;
mod shell;
mod tidy;

use std::process::ExitCode;

use anyhow::bail;

const USAGE: &str = "\
usage: cargo xtask <subcommand>

subcommands:
  ci            run every gate in order, stopping at the first failure:
                prerequisites, fmt, clippy, cargo-deny, layers, tidy, tests, self-check
  layers        check the crate layering (cargo metadata against xtask/src/layers.rs)
  tidy          check `//!` headers, forbidden macros and process creation sites
  self-check [CASE...]
                prove that each gate rejects a planted violation, in a scratch copy; with
                CASE names (scratch directory names), only the cases that start with one
  new-provider NAME
                scaffold crates/providers/NAME (corral-NAME) and the one line in each place
                docs/adding-a-provider.md lists; it builds and passes its skeleton test
  bench         run the engine benchmark in release mode against a raw tokio baseline
                and print the table (also target/bench-report.md); --quick for a short run
  install-clis [NAME|all]
                install the pinned AI coding CLIs with npm into .cache/clis (default: claude;
                the names are those of crates/test-support/src/pinned_clis.rs);
                already installed ones are left alone
  prerequisites [ci|demo] [--plan]
                check what `ci` (default) or `demo` needs, installing what is missing where
                this machine allows (cargo install; apt-get as root; npm); --plan only says
                what it would do
  demo          the offline demo: the pinned Claude Code CLI, the fake model API and
                `corral run`, end to end
  help          print this message";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: &[String]) -> anyhow::Result<()> {
    let Some((subcommand, rest)) = args.split_first() else {
        bail!("no subcommand given\n\n{USAGE}");
    };
    let root = shell::project_root();
    if subcommand == "bench" {
        return bench::run(&root, bench::Opts::parse(rest)?);
    }
    if !matches!(
        subcommand.as_str(),
        "install-clis" | "prerequisites" | "self-check" | "new-provider"
    ) && let Some(extra) = rest.first()
    {
        bail!("unexpected argument `{extra}` after `{subcommand}`\n\n{USAGE}");
    }
    match subcommand.as_str() {
        "ci" => ci::run(&root),
        "layers" => layers::run(&root),
        "tidy" => tidy::run(&root),
        "self-check" => self_check::run(&root, rest),
        "new-provider" => new_provider::run(&root, rest),
        "install-clis" => install_clis::run(&root, rest),
        "prerequisites" => prereq::run(&root, rest),
        "help" | "--help" | "-h" => {
            println!("{USAGE}");
            Ok(())
        }
        "demo" => demo::run(&root),
        other => bail!("unknown subcommand `{other}`\n\n{USAGE}"),
    }
}
