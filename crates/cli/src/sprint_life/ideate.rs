//! `corral sprint ideate [PROMPT]`: tickets proposed from a prompt and the repository.
//!
//! The agent runs headless, as `corral sprint plan`'s does, and writes `ideated-tickets`; each
//! ticket becomes a new Markdown file in `tickets/` (or `--dir`), which the user then refines
//! or plans. Nothing that is there is ever overwritten: a name that is taken gets a `-2`
//! suffix. The directory is checked before any agent runs (in the project, a directory), and
//! the tickets' titles already in it are given to the agent so that it does not repeat them.

use std::path::{Path, PathBuf};

use clap::Args;
use corral_compose::Contract;
use corral_ports::ProviderId;
use corral_sprint::SprintLayout;
use corral_sprint::life::{
    EntryKind, IDEATE_DIR, IDEATED_FILE, TICKETS_DIR, check_source, ideate_prompt, ideated_of,
    project_dir, record_flow_file, ticket_file_names, ticket_markdown, write_new_project_file,
};

use super::plan::life_usage;
use super::spawn::{FlowSpawn, flow_run_id, next_flow_dir, run_flow_spawn};
use super::target::{Target, in_project};
use crate::exit::{Exit, usage};
use crate::term::{errln, outln};

/// The most ticket files read from the directory for their titles.
const EXISTING_MAX: usize = 200;

/// `corral sprint ideate`'s arguments.
#[derive(Debug, Args)]
pub struct SprintIdeateArgs {
    /// What you want tickets for; without it, the agent proposes what the repository needs
    /// most.
    pub prompt: Option<String>,
    /// Where the tickets are written, inside the project (default: tickets/).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// The sprint file (default: corral-sprint.toml); its sprint keeps the record.
    #[arg(long, value_name = "FILE")]
    pub file: Option<PathBuf>,
    /// The sprint whose record keeps the flow when there is no sprint file (default: ideas).
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    /// The provider (default: the sprint file's generator, else `run.provider`).
    #[arg(long, value_name = "ID", value_parser = crate::args::provider_parser())]
    pub provider: Option<ProviderId>,
    /// The model (default: the sprint file's generator's, else the provider's setting).
    #[arg(long, value_name = "MODEL")]
    pub model: Option<String>,
}

/// Runs `corral sprint ideate`.
pub async fn ideate(args: SprintIdeateArgs) -> anyhow::Result<Exit> {
    let target = match Target::open(args.file.as_deref(), "ideate")? {
        Ok(target) => target,
        Err(exit) => return Ok(exit),
    };
    let prompt = match &args.prompt {
        Some(text) => {
            Some(check_source("the prompt".to_owned(), text.clone()).map_err(life_usage)?)
        }
        None => None,
    };
    let dir_arg = args
        .dir
        .clone()
        .unwrap_or_else(|| PathBuf::from(TICKETS_DIR));
    let tickets_dir = tickets_dir(&target.root, &dir_arg)?;
    let existing = existing_titles(&target.root, &tickets_dir);

    let name = target.sprint_name(args.name.as_deref(), &[], "ideas")?;
    let layout = SprintLayout::new(&target.root, &name);
    let (provider, model) = target.provider_model(args.provider, args.model.as_deref());
    let (dir, crashed) = next_flow_dir(
        &layout,
        IDEATE_DIR,
        provider,
        model.as_deref(),
        &target.root,
    )
    .map_err(life_usage)?;
    let end = run_flow_spawn(FlowSpawn {
        run_id: flow_run_id("ideate", &dir),
        settings: &target.loaded.settings,
        provider,
        model,
        cwd: target.root.clone(),
        dir: dir.clone(),
        prompt: ideate_prompt(prompt.as_ref(), &existing.titles),
        contract: Contract::ideate(),
        json: false,
        crashed,
    })
    .await?;
    let Some(signals) = end.valid_signals("ideate", "tickets") else {
        errln!(
            "ideate: no ticket was written; the record is in {}",
            dir.display()
        );
        return Ok(end.exit);
    };
    let Some(ideated) = ideated_of(signals) else {
        errln!("ideate: the agent wrote no tickets");
        return Ok(Exit::SignalsInvalid);
    };
    let json = serde_json::to_vec_pretty(ideated).unwrap_or_default();
    record_flow_file(&layout, &dir, IDEATED_FILE, &json).map_err(life_usage)?;

    // Names taken now, not when the agent started: the user may have added a ticket since.
    let taken = existing_titles(&target.root, &tickets_dir).names;
    let names = ticket_file_names(&ideated.tickets, &taken);
    let mut written: Vec<PathBuf> = Vec::new();
    for (ticket, name) in ideated.tickets.iter().zip(&names) {
        let rel = tickets_dir.join(name);
        if let Err(e) = write_new_project_file(&target.root, &rel, &ticket_markdown(ticket)) {
            errln!("ideate: {e}");
            errln!(
                "ideate: {} of {} tickets were written before this; every ticket is in {}",
                written.len(),
                ideated.tickets.len(),
                dir.join(IDEATED_FILE).display()
            );
            return Ok(Exit::BadInput);
        }
        written.push(rel);
    }
    let cost = end
        .record
        .usage
        .cost_usd
        .map_or(String::new(), |c| format!(" (${c:.4})"));
    outln!(
        "proposed {} ticket{} in {}{cost}",
        written.len(),
        if written.len() == 1 { "" } else { "s" },
        tickets_dir.display()
    );
    for (rel, ticket) in written.iter().zip(&ideated.tickets) {
        outln!("  {}  {}", rel.display(), ticket.title);
    }
    if let Some(first) = written.first() {
        outln!(
            "next: `corral sprint refine {}` to make one precise, or `corral sprint plan {}` to \
             plan it as it is",
            first.display(),
            first.display()
        );
    }
    Ok(Exit::Success)
}

/// The tickets' directory, relative to the project: in it, and a directory (or nothing yet).
fn tickets_dir(root: &Path, dir: &Path) -> anyhow::Result<PathBuf> {
    // The directory may not exist yet: its own parent must, inside the project.
    let rel = in_project(root, dir)?;
    let project = project_dir(root).map_err(life_usage)?;
    match project.kind(&rel) {
        Ok(None | Some(EntryKind::Dir)) => Ok(rel),
        Ok(Some(EntryKind::File)) => Err(usage(format!(
            "{}: is a file; --dir names the directory the tickets are written to",
            dir.display()
        ))),
        Ok(Some(EntryKind::Other(what))) => Err(usage(format!(
            "{}: is {what}; tickets are written only into a directory of the project",
            dir.display()
        ))),
        Err(e) => Err(usage(format!("{e}; no ticket can be written there"))),
    }
}

/// The ticket files already in the directory: their names, and their titles (first line).
struct Existing {
    names: Vec<String>,
    titles: Vec<String>,
}

fn existing_titles(root: &Path, rel: &Path) -> Existing {
    let mut existing = Existing {
        names: Vec::new(),
        titles: Vec::new(),
    };
    let Ok(dir) = project_dir(root).and_then(|p| {
        p.dir(rel)
            .map_err(|source| corral_sprint::life::LifeError::Write {
                what: rel.display().to_string(),
                source,
            })
    }) else {
        return existing;
    };
    let mut names: Vec<String> = dir
        .entries()
        .unwrap_or_default()
        .into_iter()
        .filter_map(|n| n.into_string().ok())
        .collect();
    names.sort();
    for name in names {
        if name.ends_with(".md") && existing.titles.len() < EXISTING_MAX {
            let title = dir
                .read(&name, corral_sprint::life::SOURCE_MAX_BYTES)
                .ok()
                .and_then(|b| String::from_utf8(b).ok())
                .and_then(|t| {
                    t.lines()
                        .find(|l| !l.trim().is_empty())
                        .map(|l| l.trim_start_matches('#').trim().to_owned())
                });
            if let Some(title) = title.filter(|t| !t.is_empty()) {
                existing.titles.push(title);
            }
        }
        existing.names.push(name);
    }
    existing
}
