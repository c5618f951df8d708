//! The `corral` command line: run a task through an AI coding CLI under supervision, look at
//! past and running runs, show the merged settings, and check the installed CLIs.
//!
//! This crate renders and maps outcomes to exit codes. It knows nothing about provider
//! internals or the signals contract's rules: it builds providers and runs a task to a checked
//! result through `corral-compose`, talks to providers through the ports, and reads sprint
//! files and sprint state through `corral-sprint`.
//! Everything it prints goes through `term`, which makes agent-controlled text inert on a
//! terminal and survives a closed stdout; the `print` lints keep it so.

#![deny(clippy::print_stdout, clippy::print_stderr)]

mod args;
mod chat;
mod config_cmd;
mod display;
mod doctor;
mod exit;
mod json_lines;
mod preflight;
mod private_dir;
mod providers;
mod render;
mod run;
mod runs;
mod sprint;
mod sprint_follow;
mod sprint_init;
mod sprint_life;
mod sprint_run;
mod sprint_view;
mod sprint_work;
mod term;

use std::process::ExitCode;

use clap::Parser;

pub use args::Cli;
pub use exit::Exit;

/// Parses arguments, runs the command, and maps the result to an exit code.
pub fn main() -> ExitCode {
    args::answer_completion_request();
    let cli = Cli::parse();
    init_tracing(cli.verbose);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            term::errln!("error: cannot start the async runtime: {e}");
            return Exit::Internal.into();
        }
    };
    let result = runtime.block_on(args::dispatch(cli));
    // Whatever the renderer still holds back is written before the program ends.
    term::flush();
    match result {
        Ok(exit) => exit.into(),
        Err(err) => {
            term::errln!("error: {err:#}");
            match err.downcast_ref::<exit::UsageError>() {
                Some(_) => Exit::BadInput.into(),
                None => Exit::Internal.into(),
            }
        }
    }
}

fn init_tracing(verbose: u8) {
    let default = match verbose {
        0 => "warn",
        1 => "info,corral=debug",
        _ => "debug",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}
