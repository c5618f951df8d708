//! The sprint's life around `corral sprint run`: `corral sprint ideate` proposes tickets,
//! `corral sprint refine` makes one precise with a person at the keyboard, `corral sprint plan`
//! turns tickets into the sprint file's tasks, `corral sprint ready` proposes what agents need
//! of the repository, and `corral sprint pr` writes the pull request of a sprint that ran, each
//! through an agent with its flow's contract and the corrective loop of `corral run`.

mod ideate;
mod plan;
mod pr;
mod ready;
mod refine;
mod spawn;
mod status;
mod target;

pub use ideate::SprintIdeateArgs;
pub use ready::SprintReadyArgs;
pub use refine::SprintRefineArgs;
pub(crate) use status::{print_life, sprint_file_name};

use std::path::PathBuf;

use clap::{Args, Subcommand};
use corral_ports::ProviderId;

use crate::exit::Exit;

/// The sprint's life commands, flattened into `corral sprint`.
#[derive(Debug, Subcommand)]
pub enum SprintLifeCommand {
    /// Turn a ticket, a Markdown PRD or GitHub issues into the sprint file's tasks: an agent
    /// writes a task plan (ids, briefs, dependencies, acceptance criteria); Corral checks it
    /// as `sprint check` does and writes it into corral-sprint.toml, keeping your comments and
    /// hand edits (a new file is made from `sprint init`'s example when there is none).
    Plan(SprintPlanArgs),
    /// Open the sprint's pull request: an agent writes its title and description from the
    /// branch, Corral adds what it recorded (each task's status, rounds, check, commit, cost),
    /// pushes the branch and opens the pull request with `gh` (a rerun updates the same one);
    /// without gh, its login or the remote it prints the commands instead.
    Pr(SprintPrArgs),
    /// Make a ticket precise enough to plan: the terminal is handed to the agent, which asks
    /// you what it needs and writes the ticket's spec and acceptance criteria over the ticket
    /// file (`--headless`: without you).
    Refine(SprintRefineArgs),
    /// Propose tickets from a prompt and the repository, each written as a new Markdown file in
    /// tickets/ to refine or plan.
    Ideate(SprintIdeateArgs),
    /// Propose what makes the repository ready for agents (CLAUDE.md, AGENTS.md,
    /// .github/copilot-instructions.md, the sprint's check, setup and gates), shown as a diff
    /// and applied when you accept (`--yes`).
    Ready(SprintReadyArgs),
}

/// `corral sprint pr`'s arguments.
#[derive(Debug, Args)]
pub struct SprintPrArgs {
    /// The sprint file (default: corral-sprint.toml).
    pub file: Option<PathBuf>,
    /// The branch the pull request goes into.
    #[arg(long, value_name = "BRANCH", default_value = "main")]
    pub base: String,
    /// The provider that writes it (default: the sprint file's generator).
    #[arg(long, value_name = "ID", value_parser = crate::args::provider_parser())]
    pub provider: Option<ProviderId>,
    /// The model (default: the sprint file's generator's, else the provider's setting).
    #[arg(long, value_name = "MODEL")]
    pub model: Option<String>,
    /// One JSON object per event on stdout.
    #[arg(long)]
    pub json: bool,
    /// The git remote the sprint's branch is pushed to.
    #[arg(long, value_name = "NAME", default_value = "origin")]
    pub remote: String,
    /// The GitHub repository as `[HOST/]OWNER/REPO` (default: gh infers it from the remotes).
    #[arg(long, value_name = "REPO")]
    pub repo: Option<String>,
    /// Write and print the pull request and the commands that open it; push nothing.
    #[arg(long)]
    pub print_only: bool,
}

/// `corral sprint plan`'s arguments.
#[derive(Debug, Args)]
pub struct SprintPlanArgs {
    /// A ticket file (Markdown or text) inside the project.
    pub ticket: Option<PathBuf>,
    /// A Markdown PRD (or another ticket) inside the project; may be given more than once.
    #[arg(long = "from", value_name = "FILE")]
    pub from: Vec<PathBuf>,
    /// GitHub issues, each a ticket, found through `gh` with GitHub's search syntax
    /// (`label:sprint-7`, `milestone:v2 label:bug`); open issues of the repository only.
    #[arg(long, value_name = "QUERY")]
    pub from_issues: Option<String>,
    /// The GitHub repository of `--from-issues` as `[HOST/]OWNER/REPO` (default: gh infers it
    /// from the remotes).
    #[arg(long, value_name = "REPO", requires = "from_issues")]
    pub repo: Option<String>,
    /// The sprint file (default: corral-sprint.toml).
    #[arg(long, value_name = "FILE")]
    pub file: Option<PathBuf>,
    /// The sprint's name when the sprint file is new (default: the ticket's file name).
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    /// The provider that plans (default: the sprint file's generator, else `run.provider`).
    #[arg(long, value_name = "ID", value_parser = crate::args::provider_parser())]
    pub provider: Option<ProviderId>,
    /// The model (default: the sprint file's generator's, else the provider's setting).
    #[arg(long, value_name = "MODEL")]
    pub model: Option<String>,
    /// One JSON object per event on stdout, ending with the summary.
    #[arg(long)]
    pub json: bool,
}

/// `corral sprint run --pr`: the pull request of the sprint in `file` that just finished, with
/// `corral sprint pr`'s defaults.
pub(crate) async fn pr_after_run(file: PathBuf, json: bool) -> anyhow::Result<Exit> {
    pr::pr(SprintPrArgs {
        file: Some(file),
        base: "main".to_owned(),
        provider: None,
        model: None,
        json,
        remote: "origin".to_owned(),
        repo: None,
        print_only: false,
    })
    .await
}

/// Runs one of the sprint's life commands.
pub async fn run(command: SprintLifeCommand) -> anyhow::Result<Exit> {
    match command {
        SprintLifeCommand::Plan(args) => plan::plan(args).await,
        SprintLifeCommand::Pr(args) => pr::pr(args).await,
        SprintLifeCommand::Refine(args) => refine::refine(args).await,
        SprintLifeCommand::Ideate(args) => ideate::ideate(args).await,
        SprintLifeCommand::Ready(args) => ready::ready(args).await,
    }
}
