//! The command line, and dispatch to each command.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use clap_complete::engine::ArgValueCompleter;
use corral_ports::ProviderId;

use crate::exit::Exit;

/// Run AI coding CLIs (Claude Code, Codex, Copilot, OpenCode, Grok) as supervised child
/// processes: validated results, resumable sessions, a complete record of every run.
#[derive(Debug, Parser)]
#[command(name = "corral", version, propagate_version = true)]
pub struct Cli {
    /// More diagnostics on stderr (-v, -vv); RUST_LOG overrides.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run one task headless and wait for its result.
    #[command(after_help = Exit::TABLE)]
    Run(RunArgs),
    /// Resume an earlier run's session: its provider, working directory and session come from
    /// the run's record.
    #[command(
        after_help = Exit::TABLE,
        // The record names the session: these two would only contradict it.
        mut_arg("resume", |a| a.hide(true)),
        mut_arg("continue_latest", |a| a.hide(true)),
    )]
    Resume(ResumeArgs),
    /// Hand the terminal to a provider's CLI for an interactive session, then take it back.
    Chat(ChatArgs),
    /// Look at runs: list them, show one, or follow one in flight.
    #[command(subcommand)]
    Runs(RunsCommand),
    /// Sprints: tasks run one by one through generator and evaluator rounds, each committed
    /// on its own (docs/sprint.md).
    #[command(subcommand)]
    Sprint(SprintCommand),
    /// Settings.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Print the capability table: what each provider's CLI can and cannot do.
    Providers {
        /// As JSON.
        #[arg(long)]
        json: bool,
    },
    /// Check each provider's CLI: found, version against the tested range, a credential set,
    /// the configured model; the provider `corral run` would use is asked one cheap request,
    /// which tries its login and model; exit 8 when what `corral run` would use cannot be used.
    Doctor(DoctorArgs),
    /// Print the shell's completion script (`source <(corral completions bash)`): commands,
    /// options and provider names, and run ids from the project's runs as you type.
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// The provider (default: the `run.provider` setting).
    #[arg(long, value_parser = provider_parser())]
    pub provider: Option<ProviderId>,
    /// The model, in the provider's spelling.
    #[arg(long)]
    pub model: Option<String>,
    /// The working directory of the agent (default: the current directory).
    #[arg(short = 'C', long, value_name = "DIR")]
    pub cwd: Option<PathBuf>,
    /// Resume this session instead of starting a new one.
    #[arg(long, value_name = "SESSION_ID")]
    pub resume: Option<String>,
    /// Resume the session of the latest run in this project that has one, with that run's
    /// provider and working directory (as `claude -c`).
    #[arg(short = 'c', long = "continue", conflicts_with = "resume")]
    pub continue_latest: bool,
    /// When the session to resume is not found, end the run as a stale session (exit 6) instead
    /// of running the task once cold, in a new session.
    #[arg(long)]
    pub no_cold_fallback: bool,
    /// Emit normalized events as JSON lines on stdout, ending with a summary object.
    #[arg(long)]
    pub json: bool,
    /// No progress: the answer alone on stdout; on stderr only errors, and the summary of a run
    /// that did not succeed.
    #[arg(short, long, conflicts_with = "json")]
    pub quiet: bool,
    /// Write the agent's final answer to FILE (as `codex exec -o` does).
    #[arg(short = 'o', long, value_name = "FILE")]
    pub output_last_message: Option<PathBuf>,
    /// End the run after this long in total (`90s`, `5m`, `2h`; the `run.wall_timeout_ms`
    /// setting).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub timeout: Option<std::time::Duration>,
    /// End the run after this long without output (`5m`; the `run.idle_watchdog_ms` setting).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub idle_timeout: Option<std::time::Duration>,
    /// Cap the spend in USD, enforced by the CLI; refused by a CLI that cannot enforce it.
    #[arg(long, value_name = "USD")]
    pub max_budget_usd: Option<f64>,
    /// Stop the agent after this many turns, where the CLI enforces it (Claude Code's
    /// `--max-turns`, Grok's `--max-tool-rounds`); refused with the reason by the others.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_turns: Option<u32>,
    /// The agent may read but not edit files or run commands.
    #[arg(long)]
    pub read_only: bool,
    /// A further directory the agent may read and write (repeatable).
    #[arg(long, value_name = "DIR")]
    pub add_dir: Vec<PathBuf>,
    /// Send the prompt as it is, without the section that asks for signals.json.
    #[arg(long)]
    pub no_contract: bool,
    /// The sandbox backend (default: the `sandbox.backend` setting, `auto`).
    #[arg(long, value_parser = ["auto", "native", "bubblewrap"])]
    pub sandbox: Option<String>,
    /// Run natively even though the sandbox guarantees go unenforced (recorded in run.json).
    #[arg(long)]
    pub allow_degraded_native: bool,
    /// Network access (default: the `sandbox.network` setting, `allowlist`: the provider's
    /// model endpoints and `sandbox.network_allow`, through Corral's proxy).
    #[arg(long, value_parser = ["allowlist", "host", "none"])]
    pub network: Option<String>,
    /// Also let the agent reach HOST:PORT (`*.domain:port` for the names below a domain), on top
    /// of the `sandbox.network_allow` setting; repeatable.
    #[arg(long = "allow-net", value_name = "HOST:PORT")]
    pub allow_net: Vec<String>,
    /// Read the prompt from this file.
    #[arg(long, conflicts_with = "prompt")]
    pub prompt_file: Option<PathBuf>,
    /// Before the run, check the provider as `corral sprint run` does: its CLI found and
    /// tested, then one cheap request (a one-word answer) through the same engine and sandbox,
    /// proving the login and the model. Problems end the run with exit 8, each with its fix.
    /// Cost: one request, measured against a fake API at 1-20 s with the CLI's start-up
    /// (Claude Code 3 s, Codex 1 s, OpenCode 19 s) and, by the size of what the CLI sends, 2k-19k
    /// input tokens and a one-word answer (Claude Code: about 19k tokens, $0.06 at $3 per
    /// million). docs/sprint.md has every CLI's figures.
    #[arg(long)]
    pub preflight: bool,
    /// The prompt; `-` reads it from standard input, as does a prompt piped in when none is
    /// given here.
    pub prompt: Option<String>,
}

#[derive(Debug, Args)]
pub struct ResumeArgs {
    /// The run whose session to resume (its id or a unique prefix); without a prompt, the agent
    /// is asked to continue where it stopped.
    #[arg(add = ArgValueCompleter::new(crate::runs::complete_run_id))]
    pub run_id: String,
    #[command(flatten)]
    pub run: RunArgs,
}

#[derive(Debug, Args)]
pub struct ChatArgs {
    /// The provider (default: the `run.provider` setting).
    #[arg(long, value_parser = provider_parser())]
    pub provider: Option<ProviderId>,
    /// The model, in the provider's spelling.
    #[arg(long)]
    pub model: Option<String>,
    /// The working directory of the session (default: the current directory).
    #[arg(short = 'C', long, value_name = "DIR")]
    pub cwd: Option<PathBuf>,
    /// Resume this session instead of starting a new one.
    #[arg(long, value_name = "SESSION_ID")]
    pub resume: Option<String>,
    /// Read the opening prompt from this file.
    #[arg(long, conflicts_with = "prompt")]
    pub prompt_file: Option<PathBuf>,
    /// The opening prompt; without one, you start the conversation.
    pub prompt: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum RunsCommand {
    /// List runs, newest first.
    List {
        /// Where runs live (default: the `run.runs_dir` setting, under the project root: the
        /// nearest directory up from here with a corral.toml, else the git work tree's top).
        #[arg(long = "runs-dir", visible_alias = "dir", value_name = "DIR")]
        dir: Option<PathBuf>,
        /// One JSON object per run.
        #[arg(long)]
        json: bool,
        /// Also the runs refused before their CLI started (CLI missing or untested, sandbox
        /// refused), which are left out otherwise.
        #[arg(short, long)]
        all: bool,
    },
    /// Show one run's summary, its answer and its files (default: the latest run).
    Show {
        /// The run id (or a unique prefix); without it, the latest run.
        #[arg(add = ArgValueCompleter::new(crate::runs::complete_run_id))]
        id: Option<String>,
        /// The record (`run.json`) as JSON, and nothing else.
        #[arg(long)]
        json: bool,
        /// Where runs live (default: as for `runs list`).
        #[arg(long = "runs-dir", visible_alias = "dir", value_name = "DIR")]
        dir: Option<PathBuf>,
    },
    /// Show a run as it happens until it finishes, as `corral run` shows it (default: the
    /// latest run). Exits with the followed run's exit code.
    Follow {
        /// The run id (or a unique prefix); without it, the latest run.
        #[arg(add = ArgValueCompleter::new(crate::runs::complete_run_id))]
        id: Option<String>,
        /// The execution log's raw events instead, one JSON object per line on stdout.
        #[arg(long)]
        json: bool,
        /// Where runs live (default: as for `runs list`).
        #[arg(long = "runs-dir", visible_alias = "dir", value_name = "DIR")]
        dir: Option<PathBuf>,
    },
}

#[derive(Debug, Subcommand)]
pub enum SprintCommand {
    /// Write a commented example sprint file (never over an existing one).
    Init {
        /// The file to write (default: corral-sprint.toml).
        file: Option<PathBuf>,
    },
    /// Validate a sprint file: every error with its file, line, key and rule (exit 2), or the
    /// tasks in the order they run.
    Check {
        /// The sprint file (default: corral-sprint.toml).
        file: Option<PathBuf>,
    },
    /// Run a sprint, or continue it where it stopped: each task through generator and
    /// evaluator rounds gated by the check, committed on the sprint's branch.
    #[command(after_help = SPRINT_EXIT_TABLE)]
    Run(SprintRunArgs),
    /// Run one task of a sprint on this machine for a remote executor (a Ray job's
    /// entrypoint): clone the repository, run the task's rounds, push its branch back, and
    /// after every step push its record to `refs/corral/<sprint>/<task>/record`.
    Work(SprintWorkArgs),
    /// The sprint's life around the run (`ideate`, `refine`, `plan`, `ready`, `pr`).
    #[command(flatten)]
    Life(crate::sprint_life::SprintLifeCommand),
    /// Show what a sprint recorded (sprint.json in .corral/sprints/NAME/) and where its life
    /// stands (ideated, refined, planned, ready, running, finished, pull request).
    Status {
        /// The sprint's name (default: the only one recorded, or the one corral-sprint.toml
        /// here names).
        name: Option<String>,
        /// The state as JSON (with --follow: each event as its JSON line).
        #[arg(long)]
        json: bool,
        /// Follow the sprint's events (.corral/sprints/NAME/events.jsonl) as they are written,
        /// from the start of its latest run, until it ends or Ctrl-C.
        #[arg(long)]
        follow: bool,
    },
}

#[derive(Debug, Args)]
pub struct SprintRunArgs {
    /// The sprint file (default: corral-sprint.toml).
    pub file: Option<PathBuf>,
    /// Go on with uncommitted changes in the work tree (the first task's commit includes them).
    #[arg(long, conflicts_with = "stash")]
    pub keep_dirty: bool,
    /// Stash uncommitted changes (untracked files included) and go on.
    #[arg(long)]
    pub stash: bool,
    /// How many tasks may run at once: above 1 (or with `--executor ray`), each task whose
    /// dependencies are done runs on its own branch (in its own git worktree, or as a job on
    /// the cluster), folded onto the sprint's branch in run order.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub jobs: u16,
    /// Where the parallel tasks run, over `executor.kind`: `local` (git worktrees here) or
    /// `ray` (one job per task on the cluster at `executor.ray.address`).
    #[arg(long, value_name = "KIND", value_parser = ["local", "ray"])]
    pub executor: Option<String>,
    /// One JSON object per step on stdout, ending with the summary.
    #[arg(long)]
    pub json: bool,
    /// Skip the preflight: start the first task without first asking each role's CLI one
    /// cheap request (see "Preflight" below).
    #[arg(long)]
    pub no_preflight: bool,
    /// Once every task is done, open the sprint's pull request as `corral sprint pr` does
    /// (into `main`, the branch pushed to `origin`; run `corral sprint pr` for others).
    #[arg(long)]
    pub pr: bool,
}

#[derive(Debug, Args)]
pub struct SprintWorkArgs {
    /// The git remote the repository is cloned from and the task's branch and record are
    /// pushed to: `file:///…`, `http://…` or `https://…` (not `ssh://…`: the supervised git
    /// has no ssh command).
    #[arg(long, value_name = "URL")]
    pub remote: String,
    /// The sprint file's path inside the repository.
    #[arg(long, value_name = "PATH", default_value = "corral-sprint.toml")]
    pub sprint_file: PathBuf,
    /// The task to run.
    #[arg(long, value_name = "ID")]
    pub task: String,
    /// The commit the task's branch starts at (reachable from a ref of the remote).
    #[arg(long, value_name = "SHA")]
    pub base: String,
    /// The task's branch, pushed back when the task is done.
    #[arg(long, value_name = "NAME")]
    pub branch: String,
    /// The sprint run's id (the `Corral-Run:` trailer of the task's commit).
    #[arg(long, value_name = "ID")]
    pub run_id: Option<String>,
    /// Where the clone is (reused when its record names this run's task, base and remote;
    /// default: a directory of this user's alone in the temp dir, keyed by the run and task).
    #[arg(long, value_name = "DIR")]
    pub work_dir: Option<PathBuf>,
    /// Wait, once the clone is ready and before the first round, until this ref exists on
    /// the remote: the coordinator pushes it when one of its `--jobs` slots frees (a job
    /// started ahead). Printed first: `{"kind":"ready",…}` on stdout.
    #[arg(long, value_name = "REF")]
    pub gate: Option<String>,
    /// A ref on the remote holding the sprint's learnings so far (a blob of
    /// `learnings.ndjson`, pushed by the coordinator): written into the clone's sprint
    /// directory before the first round, so the generator's brief shows them.
    #[arg(long, value_name = "REF")]
    pub learnings: Option<String>,
    /// The task's spend, in dollars over all its runs, at which it pauses before its next
    /// spawn (exit 9): the part of the sprint's `max_cost_usd` the coordinator left it, since
    /// this worker sees no other task's spend.
    #[arg(long, value_name = "USD", value_parser = non_negative_dollars)]
    pub max_cost_usd: Option<f64>,
    /// One JSON object per step on stdout, ending with the handback.
    #[arg(long)]
    pub json: bool,
}

/// The table printed in `corral sprint run --help`.
pub const SPRINT_EXIT_TABLE: &str = "\
Exit codes:
  0    every task is done
  1    unexpected internal error (git, the sprint's record); no space left on device (the
       summary printed: free some space and run again to continue)
  2    bad sprint file or settings, or a refusal before the first task (uncommitted changes,
       another sprint running in the repository, a new sprint on the branch checked out,
       setup failed)
  3    a task is blocked (its dependents skipped; the others ran)
  4    rate limited; every retry was used (paused: run again to continue)
  8    the preflight found what would fail (every problem named with its fix; nothing was
       spawned for a task); or a spawn failed in a way no rerun mends (a model unavailable, a
       login refused, ...): stopped at that spawn, the fix in the task's warnings (run again
       once fixed to continue)
  9    a spend cap was reached ([sprint] or a task's max_cost_usd): paused before the next
       spawn, the cap named in the task's warnings (raise it and run again to continue)
  130  cancelled (run again to continue)
With --pr, once every task is done the code is the pull request's: 0 opened, updated, or its
commands printed (no gh, login or remote), 7 its text not valid, 8 the forge failed.

Preflight: before the first task, each role's CLI is found and its version checked, then asked
one cheap request (a one-word answer) through the same engine and sandbox as its spawns, which
proves its login, its model and, for the evaluator, a sandbox that keeps the work tree
read-only; a missing commit identity or check command is refused too. Every problem is
named at once with its fix (exit 8). Cost: one request per distinct provider and model,
measured against a fake API at 1-20 s each with the CLI's start-up (Claude Code 3 s, Codex 1 s,
OpenCode 19 s) and, by the size of what the CLI sends, 2k-19k input tokens and a one-word answer
(Claude Code: about 19k tokens, $0.06 at $3 per million); docs/sprint.md has every CLI's
figures. --no-preflight skips it.";

#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Print every setting with its value and where it came from.
    Show {
        /// As JSON.
        #[arg(long)]
        json: bool,
    },
    /// Trust the project's corral.toml as it is now: it may then set the keys that only your
    /// own config, the environment or flags may set (the sandbox, the programs, their arguments
    /// and environment), until its content changes.
    Trust {
        /// The directory whose corral.toml to trust (default: the current directory).
        #[arg(long)]
        cwd: Option<PathBuf>,
    },
}

#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// Only this provider.
    #[arg(long, value_parser = provider_parser())]
    pub provider: Option<ProviderId>,
    /// Only look: send the provider `corral run` would use no cheap request, so its login is
    /// only seen (a credential set), not tried.
    #[arg(long)]
    pub no_request: bool,
}

/// The provider names as clap's possible values (listed in `--help`, completed by the shells).
pub(crate) fn provider_parser() -> impl clap::builder::TypedValueParser<Value = ProviderId> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(ProviderId::ALL.map(|p| p.as_str()))
        .try_map(|s: String| parse_provider(&s))
}

/// A duration as people write it: `90s`, `5m`, `1h 30m`.
fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    humantime::parse_duration(s).map_err(|e| format!("{e} (write it like 90s, 5m or 1h30m)"))
}

fn parse_provider(s: &str) -> Result<ProviderId, String> {
    ProviderId::ALL
        .into_iter()
        .find(|p| p.as_str() == s)
        .ok_or_else(|| {
            let names: Vec<&str> = ProviderId::ALL.iter().map(|p| p.as_str()).collect();
            format!("unknown provider {s:?}; one of {}", names.join(", "))
        })
}

/// Runs the parsed command.
pub async fn dispatch(cli: Cli) -> anyhow::Result<Exit> {
    match cli.command {
        Command::Run(args) => crate::run::run(args).await,
        Command::Resume(args) => crate::run::resume(args).await,
        Command::Chat(args) => crate::chat::chat(args).await,
        Command::Runs(cmd) => crate::runs::runs(cmd).await,
        Command::Sprint(cmd) => crate::sprint::sprint(cmd).await,
        Command::Config(ConfigCommand::Show { json }) => crate::config_cmd::show(json),
        Command::Config(ConfigCommand::Trust { cwd }) => {
            let cwd = match cwd {
                Some(dir) => dir,
                None => std::env::current_dir()?,
            };
            crate::config_cmd::trust(&cwd)
        }
        Command::Doctor(args) => crate::doctor::doctor(args).await,
        Command::Providers { json } => crate::providers::print(json),
        Command::Completions { shell } => {
            let script = completion_script(shell)?;
            crate::term::outln!(
                "{}",
                String::from_utf8_lossy(&script).trim_end_matches('\n')
            );
            Ok(Exit::Success)
        }
    }
}

/// The variable a completion script sets when it asks `corral` for the candidates of the word
/// being typed (clap's convention: `COMPLETE=bash corral -- corral runs show 2026…`).
pub const COMPLETE_VAR: &str = "COMPLETE";

/// Answers a completion script's request and exits, when [`COMPLETE_VAR`] says this is one;
/// otherwise returns and the command line is parsed as usual.
pub fn answer_completion_request() {
    clap_complete::CompleteEnv::with_factory(<Cli as clap::CommandFactory>::command)
        .var(COMPLETE_VAR)
        .complete();
}

/// The script that registers `corral`'s completions in `shell`. It asks `corral` itself for
/// each word's candidates, so the run ids offered are the project's runs as they are now.
fn completion_script(shell: clap_complete::Shell) -> anyhow::Result<Vec<u8>> {
    let name = shell.to_string();
    let shells = clap_complete::env::Shells::builtins();
    let Some(completer) = shells.completer(&name) else {
        anyhow::bail!("no completion script for {name}");
    };
    let mut script = Vec::new();
    completer.write_registration(COMPLETE_VAR, "corral", "corral", "corral", &mut script)?;
    Ok(script)
}

/// A dollar amount for `--max-cost-usd`: a finite number, not negative.
fn non_negative_dollars(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        Ok(_) | Err(_) => Err(format!(
            "{text:?} is not an amount of dollars (a number, 0 or more)"
        )),
    }
}
