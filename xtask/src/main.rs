//! See <https://github.com/matklad/cargo-xtask/>.
//!
//! `cargo xtask` is Corral's automation: the CI gates (`ci`), the crate layering check (`layers`),
//! the source tidiness check (`tidy`) and the proof that each gate rejects what it should
//! (`self-check`). This file only parses the command line; each subcommand lives in its module.
//! The layering and tidy checks also run as `#[test]`s, so `cargo test` and `cargo nextest run`
//! enforce them without any extra CI step.

// xtask is a tool, not product: it may create processes
#![allow(clippy::disallowed_methods)]

mod ci;
mod layers;
mod self_check;
mod shell;
mod tidy;

use std::process::ExitCode;

use anyhow::bail;

const USAGE: &str = "\
usage: cargo xtask <subcommand>

subcommands:
  ci            run every gate in order, stopping at the first failure:
                fmt, clippy, cargo-deny, layers, tidy, tests, self-check
  layers        check the crate layering (cargo metadata against xtask/src/layers.rs)
  tidy          check `//!` headers, forbidden macros and process creation sites
  self-check    prove that each gate rejects a planted violation, in a scratch copy
  help          print this message

planned (not available yet): bench, demo, install-clis";

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
    if let Some(extra) = rest.first() {
        bail!("unexpected argument `{extra}` after `{subcommand}`\n\n{USAGE}");
    }
    let root = shell::project_root();
    match subcommand.as_str() {
        "ci" => ci::run(&root),
        "layers" => layers::run(&root),
        "tidy" => tidy::run(&root),
        "self-check" => self_check::run(&root),
        "help" | "--help" | "-h" => {
            println!("{USAGE}");
            Ok(())
        }
        "bench" | "demo" | "install-clis" => {
            bail!("`cargo xtask {subcommand}` is planned but not available yet\n\n{USAGE}")
        }
        other => bail!("unknown subcommand `{other}`\n\n{USAGE}"),
    }
}
