//! `corral sprint ready`: make the repository ready for agents.
//!
//! An agent reads the repository and proposes the agents' context files (`CLAUDE.md`,
//! `AGENTS.md`, `.github/copilot-instructions.md`), the sprint's check, a setup command and
//! gates. Corral turns the proposal into the changes it would make (the sprint file edited with
//! `toml_edit`, its comments kept, and checked with `sprint check`'s rules), shows them as a
//! diff, and applies them only when the user accepts: a y/N question on a terminal, `--yes`
//! otherwise. Every file is written whole through the project's handle (no link followed, a
//! FIFO refused), the sprint file last, and nothing is written if any of them changed while the
//! agent ran. The proposal stays in `.corral/sprints/<name>/ready/<n>/proposal.json` either way.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use clap::Args;
use corral_compose::Contract;
use corral_ports::ProviderId;
use corral_sprint::SprintLayout;
use corral_sprint::life::{
    AGENTS_CONTEXT_FILES, APPLIED_FILE, EntryKind, FileChange, LifeError, PROPOSAL_FILE, READY_DIR,
    ReadyApplied, apply_ready, project_dir, ready_prompt, ready_proposal_of, record_flow_file,
    write_project_file, write_sprint_file,
};

use super::plan::life_usage;
use super::spawn::{FlowSpawn, flow_run_id, next_flow_dir, run_flow_spawn};
use super::target::Target;
use crate::exit::{Exit, usage};
use crate::term::{errln, outln};

/// The most bytes of a context file read.
const CONTEXT_MAX_BYTES: u64 = 256 * 1024;

/// `corral sprint ready`'s arguments.
#[derive(Debug, Args)]
pub struct SprintReadyArgs {
    /// The sprint file (default: corral-sprint.toml).
    pub file: Option<PathBuf>,
    /// Apply the proposal without asking (without it, a terminal is asked y/N, and elsewhere
    /// the proposal is only shown).
    #[arg(short, long)]
    pub yes: bool,
    /// The provider (default: the sprint file's generator, else `run.provider`).
    #[arg(long, value_name = "ID", value_parser = crate::args::provider_parser())]
    pub provider: Option<ProviderId>,
    /// The model (default: the sprint file's generator's, else the provider's setting).
    #[arg(long, value_name = "MODEL")]
    pub model: Option<String>,
}

/// A context file as it is now.
enum Context {
    Missing,
    Text(String),
    /// A link, a FIFO, a directory...: left alone, whatever is proposed.
    NotAFile(&'static str),
}

/// Runs `corral sprint ready`.
pub async fn ready(args: SprintReadyArgs) -> anyhow::Result<Exit> {
    let target = match Target::open(args.file.as_deref(), "ready")? {
        Ok(target) => target,
        Err(exit) => return Ok(exit),
    };
    let Some(file) = &target.file else {
        return Err(usage(format!(
            "{}: no sprint file; ready sets its check, setup and gates: plan one first \
             (`corral sprint plan TICKET`) or write one (`corral sprint init`)",
            target.path.display()
        )));
    };
    let current = read_text(&target.path)?;
    let context = read_context(&target.root)?;
    let shown: Vec<(String, Option<String>)> = context
        .iter()
        .map(|(path, c)| {
            let text = match c {
                Context::Text(t) => Some(t.clone()),
                Context::Missing | Context::NotAFile(_) => None,
            };
            ((*path).to_owned(), text)
        })
        .collect();

    let layout = SprintLayout::new(&target.root, &file.sprint.name);
    let (provider, model) = target.provider_model(args.provider, args.model.as_deref());
    let (dir, crashed) =
        next_flow_dir(&layout, READY_DIR, provider, model.as_deref(), &target.root)
            .map_err(life_usage)?;
    let end = run_flow_spawn(FlowSpawn {
        run_id: flow_run_id("ready", &dir),
        settings: &target.loaded.settings,
        provider,
        model,
        cwd: target.root.clone(),
        dir: dir.clone(),
        prompt: ready_prompt(file, &shown),
        contract: Contract::ready(),
        json: false,
        crashed,
    })
    .await?;
    let Some(signals) = end.valid_signals("ready", "proposal") else {
        errln!(
            "ready: nothing was changed; the record is in {}",
            dir.display()
        );
        return Ok(end.exit);
    };
    let Some(proposal) = ready_proposal_of(signals) else {
        errln!("ready: the agent proposed no check");
        return Ok(Exit::SignalsInvalid);
    };
    let json = serde_json::to_vec_pretty(&proposal).unwrap_or_default();
    record_flow_file(&layout, &dir, PROPOSAL_FILE, &json).map_err(life_usage)?;

    let sprint_text = match apply_ready(&target.path, &current, &proposal) {
        Ok(text) => text,
        Err(LifeError::PlanDoesNotFit { diagnostics, .. }) => {
            for d in &diagnostics {
                errln!("error: {d}");
            }
            errln!(
                "ready: the proposal (in {}) does not fit {}: nothing was changed",
                dir.join(PROPOSAL_FILE).display(),
                target.path.display()
            );
            return Ok(Exit::BadInput);
        }
        Err(e) => return Err(life_usage(e)),
    };
    let changes = changes_of(&target, &context, &current, sprint_text, &proposal, &dir);
    let cost = end
        .record
        .usage
        .cost_usd
        .map_or(String::new(), |c| format!(" (${c:.4})"));
    if changes.is_empty() {
        outln!("ready: the repository is ready as it is; nothing to change{cost}");
        record_applied(&layout, &dir, &[])?;
        return Ok(Exit::Success);
    }
    for change in &changes {
        outln!("{}", change.diff().trim_end());
    }
    let files: Vec<&str> = changes.iter().map(|c| c.path.as_str()).collect();
    outln!("ready: the proposal changes {}{cost}", files.join(", "));
    if !args.yes {
        if !std::io::stdin().is_terminal() {
            outln!(
                "ready: not applied (no terminal to ask); run `corral sprint ready --yes` to \
                 apply a proposal without being asked. This one is in {}",
                dir.join(PROPOSAL_FILE).display()
            );
            return Ok(Exit::Success);
        }
        if !ask("apply these changes? [y/N] ").await {
            outln!(
                "ready: not applied; the proposal is in {}",
                dir.join(PROPOSAL_FILE).display()
            );
            return Ok(Exit::Success);
        }
    }
    apply(&target, &current, &changes)?;
    record_applied(&layout, &dir, &files)?;
    outln!("ready: applied to {}", files.join(", "));
    outln!("next: `corral sprint check`, then `corral sprint run`");
    Ok(Exit::Success)
}

/// The files the proposal changes, each with its text before and after: the context files
/// that differ (one that is not a regular file is left alone, and said so), then the sprint
/// file.
fn changes_of(
    target: &Target,
    context: &[(&'static str, Context)],
    current: &str,
    sprint_text: String,
    proposal: &corral_sprint::life::ReadyProposal,
    dir: &Path,
) -> Vec<FileChange> {
    let sprint_rel = target
        .path
        .strip_prefix(&target.root)
        .unwrap_or(&target.path)
        .display()
        .to_string();
    let mut changes: Vec<FileChange> = Vec::new();
    for proposed in &proposal.context_files {
        let Some((_, now)) = context.iter().find(|(p, _)| *p == proposed.path) else {
            continue;
        };
        let before = match now {
            Context::Missing => None,
            Context::Text(t) => Some(t.clone()),
            Context::NotAFile(what) => {
                errln!(
                    "ready: {} is {what}: left as it is (the proposal for it is in {})",
                    proposed.path,
                    dir.join(PROPOSAL_FILE).display()
                );
                continue;
            }
        };
        let mut after = proposed.content.trim_end().to_owned();
        after.push('\n');
        if before.as_deref() != Some(after.as_str()) {
            changes.push(FileChange {
                path: proposed.path.clone(),
                before,
                after,
            });
        }
    }
    if sprint_text != current {
        changes.push(FileChange {
            path: sprint_rel,
            before: Some(current.to_owned()),
            after: sprint_text,
        });
    }
    changes
}

/// Writes every change, the sprint file last; refuses, before writing anything, when a file
/// changed since it was read.
fn apply(target: &Target, current: &str, changes: &[FileChange]) -> anyhow::Result<()> {
    let project = project_dir(&target.root).map_err(life_usage)?;
    for change in changes {
        let now = project
            .read_if_exists(&change.path, CONTEXT_MAX_BYTES)
            .map_err(|e| usage(format!("{e}; nothing was changed")))?
            .map(|b| String::from_utf8_lossy(&b).into_owned());
        if now != change.before {
            return Err(usage(format!(
                "{}: changed while ready ran; nothing was changed (run ready again)",
                change.path
            )));
        }
    }
    let sprint_rel = target.path.strip_prefix(&target.root).ok();
    for change in changes {
        if Some(Path::new(&change.path)) == sprint_rel {
            continue;
        }
        write_project_file(&target.root, Path::new(&change.path), &change.after)
            .map_err(life_usage)?;
    }
    if let Some(change) = changes
        .iter()
        .find(|c| Some(Path::new(&c.path)) == sprint_rel)
    {
        debug_assert_eq!(change.before.as_deref(), Some(current));
        write_sprint_file(
            target.path.parent().unwrap_or(&target.root),
            &target.path,
            &change.after,
        )
        .map_err(life_usage)?;
    }
    Ok(())
}

fn record_applied(layout: &SprintLayout, dir: &Path, files: &[&str]) -> anyhow::Result<()> {
    let applied = ReadyApplied {
        at: jiff::Timestamp::now()
            .round(jiff::Unit::Second)
            .map_or_else(|_| jiff::Timestamp::now().to_string(), |t| t.to_string()),
        files: files.iter().map(|f| (*f).to_owned()).collect(),
    };
    let json = serde_json::to_vec_pretty(&applied).unwrap_or_default();
    record_flow_file(layout, dir, APPLIED_FILE, &json).map_err(life_usage)
}

/// Asks `question` on stderr and reads the answer from the terminal: yes only for `y`/`yes`.
async fn ask(question: &str) -> bool {
    crate::term::err_question(question);
    let answer = tokio::task::spawn_blocking(|| {
        let mut line = String::new();
        std::io::stdin().read_line(&mut line).map(|_| line)
    })
    .await;
    matches!(answer, Ok(Ok(line)) if matches!(line.trim().to_ascii_lowercase().as_str(), "y" | "yes"))
}

fn read_text(path: &Path) -> anyhow::Result<String> {
    std::fs::read_to_string(path).map_err(|e| usage(format!("cannot read {}: {e}", path.display())))
}

/// Each context file as it is now; a file that is not text is an error named before any agent
/// runs.
fn read_context(root: &Path) -> anyhow::Result<Vec<(&'static str, Context)>> {
    let project = project_dir(root).map_err(life_usage)?;
    let mut out = Vec::new();
    for path in AGENTS_CONTEXT_FILES {
        let context = match project.kind(path) {
            Ok(None) => Context::Missing,
            Ok(Some(EntryKind::File)) => {
                let bytes = project
                    .read(path, CONTEXT_MAX_BYTES)
                    .map_err(|e| usage(format!("{e}; ready did not start")))?;
                Context::Text(String::from_utf8(bytes).map_err(|_| {
                    usage(format!("{path}: is not UTF-8 text; ready did not start"))
                })?)
            }
            Ok(Some(EntryKind::Dir)) => Context::NotAFile("a directory"),
            Ok(Some(EntryKind::Other(what))) => Context::NotAFile(what),
            // A link on the way (`.github` -> elsewhere): left alone like a link at the name.
            Err(_) => Context::NotAFile("reached through a link"),
        };
        out.push((path, context));
    }
    Ok(out)
}
