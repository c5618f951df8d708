//! `corral sprint refine TICKET`: a ticket made precise enough to plan.
//!
//! By default the terminal is handed to the provider's CLI, as `corral chat` does, with the
//! refine prompt and its contract: the agent asks the person what it needs, writes a
//! `refined-ticket`, and the person leaves the session. Corral then takes the terminal back and
//! validates the file; a mistake is sent to the agent on its resumed session, headless (the
//! person has left), through the corrective loop of `corral run`. `--headless` does the whole
//! refinement without a person, as `corral sprint plan` runs its agent.
//!
//! The ticket, and where the refined ticket goes, are checked before any agent runs (in the
//! project, a regular file, not too long); the refined ticket is written whole over the ticket
//! (or `--output`), never through a link, and the text it replaced is kept in the record, in
//! `.corral/sprints/<name>/refine/<n>/` with the session's own files.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::Args;
use corral_compose::{
    Contract, SignalsError, corrective_message, engine_config, interactive_provider,
    render_contract_section, repair_run_dir, validate_signals_file,
};
use corral_ports::run_dir::SIGNALS_FILE;
use corral_ports::{AiSession, CancellationToken, Permissions, ProviderId};
use corral_sprint::SprintLayout;
use corral_sprint::life::{
    REFINE_DIR, REFINE_SOURCE_FILE, REFINED_FILE, REFINED_TICKET_FILE, RefineMode, SourceText,
    flow_spawn_dir, read_source, record_flow_file, refine_prompt, refined_markdown, refined_of,
};

use super::plan::life_usage;
use super::spawn::{
    FlowEnd, FlowSpawn, Resumed, flow_run_id, next_flow_dir, run_flow_spawn,
    run_resumed_flow_spawn, short_error,
};
use super::target::{Target, in_project};
use crate::exit::{Exit, usage};
use crate::term::{errln, outln};

/// `corral sprint refine`'s arguments.
#[derive(Debug, Args)]
pub struct SprintRefineArgs {
    /// The ticket file (Markdown or text) inside the project. The refined ticket replaces it;
    /// the text it replaced is kept in the sprint's record.
    pub ticket: PathBuf,
    /// Refine without a person: the agent decides what the ticket leaves open and says what
    /// it assumed (default: the terminal is handed to the agent, which asks you).
    #[arg(long)]
    pub headless: bool,
    /// Write the refined ticket to FILE (inside the project) instead of over the ticket.
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// The sprint file (default: corral-sprint.toml); its sprint keeps the record.
    #[arg(long, value_name = "FILE")]
    pub file: Option<PathBuf>,
    /// The sprint's name when there is no sprint file (default: the ticket's file name).
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    /// The provider (default: the sprint file's generator, else `run.provider`).
    #[arg(long, value_name = "ID", value_parser = crate::args::provider_parser())]
    pub provider: Option<ProviderId>,
    /// The model (default: the sprint file's generator's, else the provider's setting).
    #[arg(long, value_name = "MODEL")]
    pub model: Option<String>,
}

/// What every refinement shares once its checks passed.
struct Refining<'a> {
    target: &'a Target,
    layout: SprintLayout,
    dir: PathBuf,
    source: SourceText,
    output: PathBuf,
    provider: ProviderId,
    model: Option<String>,
    /// The session of a headless spawn cut short in `dir`, resumed.
    crashed: Option<corral_ports::SessionId>,
}

/// The pointer file an interactive handoff leaves in its spawn directory (corral-engine's
/// `INTERACTIVE_PROMPT_FILE`, which this crate does not reach).
const INTERACTIVE_PROMPT: &str = "interactive-prompt.md";

/// Runs `corral sprint refine`.
pub async fn refine(args: SprintRefineArgs) -> anyhow::Result<Exit> {
    let target = match Target::open(args.file.as_deref(), "refine")? {
        Ok(target) => target,
        Err(exit) => return Ok(exit),
    };
    let source = read_source(&target.root, &args.ticket).map_err(life_usage)?;
    let output = match &args.output {
        Some(file) => in_project(&target.root, file)?,
        None => PathBuf::from(&source.label),
    };
    check_output(&target.root, &output)?;
    if !args.headless && !std::io::stdin().is_terminal() {
        return Err(usage(
            "refine hands the terminal to the agent, and stdin is not a terminal: run it in a \
             terminal, or add --headless to refine without a person",
        ));
    }
    let name = target.sprint_name(
        args.name.as_deref(),
        std::slice::from_ref(&source),
        "sprint",
    )?;
    let layout = SprintLayout::new(&target.root, &name);
    let (provider, model) = target.provider_model(args.provider, args.model.as_deref());
    // Only a headless refinement resumes a cut-short spawn: a person's conversation is not
    // carried on without them.
    let (dir, crashed) = if args.headless {
        match next_flow_dir(
            &layout,
            REFINE_DIR,
            provider,
            model.as_deref(),
            &target.root,
        )
        .map_err(life_usage)?
        {
            // A person's session left before its ticket was written (the engine's
            // `interactive-prompt.md` is there) is theirs: a new spawn starts beside it.
            (dir, Some(_)) if std::fs::symlink_metadata(dir.join(INTERACTIVE_PROMPT)).is_ok() => (
                flow_spawn_dir(&layout, REFINE_DIR).map_err(life_usage)?,
                None,
            ),
            fresh_or_resumed => fresh_or_resumed,
        }
    } else {
        (
            flow_spawn_dir(&layout, REFINE_DIR).map_err(life_usage)?,
            None,
        )
    };
    record_flow_file(&layout, &dir, REFINE_SOURCE_FILE, source.text.as_bytes())
        .map_err(life_usage)?;
    let refining = Refining {
        target: &target,
        layout,
        dir,
        source,
        output,
        provider,
        model,
        crashed,
    };
    let end = if args.headless {
        run_flow_spawn(refining.spawn(refine_prompt(&refining.source, RefineMode::Headless)))
            .await?
    } else {
        match interactive(&refining).await? {
            Handoff::Valid(signals) => return refining.accept(&signals, None),
            Handoff::Corrected(end) => *end,
            Handoff::Ended(exit) => return Ok(exit),
        }
    };
    let Some(signals) = end.valid_signals("refine", "refined ticket") else {
        return Ok(refining.left_as_it_was(end.exit));
    };
    refining.accept(signals, end.record.usage.cost_usd)
}

/// How the interactive handoff ended.
enum Handoff {
    /// The file was valid when the person left.
    Valid(Vec<corral_sprint::life::Signal>),
    /// It was not, and the agent's corrective spawn ran.
    Corrected(Box<FlowEnd>),
    /// Nothing to accept: the exit code, the reason already printed.
    Ended(Exit),
}

/// Hands the terminal to the agent with the refine prompt and its contract; once the person
/// leaves, checks what the agent wrote, and sends a correctable mistake back to its session.
async fn interactive(r: &Refining<'_>) -> anyhow::Result<Handoff> {
    let settings = &r.target.loaded.settings;
    let contract = Contract::refine();
    let signals_file = r.dir.join(SIGNALS_FILE);
    let prompt = format!(
        "{}\n\n{}",
        refine_prompt(&r.source, RefineMode::Interactive).trim_end(),
        render_contract_section(&contract, &signals_file)
    );
    let cli = interactive_provider(r.provider, settings, engine_config(settings))
        .map_err(|e| usage(e.to_string()))?;
    errln!(
        "refine: handing the terminal to {} (record in {}); answer its questions, and leave the \
         session (/exit) once it has written the refined ticket",
        r.provider,
        r.dir.display()
    );
    let session = AiSession {
        prompt: Arc::from(prompt.as_str()),
        cold_prompt: None,
        cwd: r.target.root.clone(),
        extra_roots: Vec::new(),
        model: r.model.clone(),
        effort: None,
        permissions: Permissions::default(),
        resume: None,
        cancel: CancellationToken::new(),
        signals_file: signals_file.clone(),
        output_dir: r.dir.clone(),
        max_budget_usd: None,
        max_turns: None,
        cold_fallback: true,
        task: None,
    };
    let outcome = match cli.run_interactive(session).await {
        Ok(outcome) => outcome,
        Err(err) => {
            errln!("error: {err}");
            return Ok(Handoff::Ended(Exit::for_error(&err)));
        }
    };
    errln!("");
    if outcome.cancelled {
        errln!("refine: cancelled");
        return Ok(Handoff::Ended(r.left_as_it_was(Exit::Cancelled)));
    }
    let retries = settings.retry.corrective_retries;
    match validate_signals_file(&signals_file, &contract) {
        Ok(valid) => Ok(Handoff::Valid(valid.into_signals())),
        Err(SignalsError::Missing { .. }) => {
            errln!("refine: the session ended before the agent wrote the refined ticket");
            Ok(Handoff::Ended(r.left_as_it_was(Exit::SignalsInvalid)))
        }
        Err(e) if e.is_correctable() && retries > 0 && outcome.session_id.is_some() => {
            let Some(session) = outcome.session_id else {
                return Ok(Handoff::Ended(Exit::Internal));
            };
            // What the agent left in place of its file (a FIFO, say) would block the
            // corrected write; the engine's repair removes it, as between corrective retries.
            for removed in repair_run_dir(&r.dir, &signals_file) {
                tracing::warn!(path = %removed.path.display(), was = removed.was, "removed before the corrective retry");
            }
            errln!(
                "refine: the refined ticket is not valid yet ({}); the agent corrects it on its \
                 session, without the terminal",
                short_error(&e)
            );
            let mut spawn = r.spawn(corrective_message(&e, &signals_file, &contract));
            spawn.contract = contract;
            let end = run_resumed_flow_spawn(
                spawn,
                Resumed {
                    session,
                    cold_prompt: refine_prompt(&r.source, RefineMode::Headless),
                    corrective_retries: retries - 1,
                },
            )
            .await?;
            Ok(Handoff::Corrected(Box::new(end)))
        }
        Err(e) => {
            errln!(
                "refine: the agent's refined ticket is not valid: {}",
                short_error(&e)
            );
            Ok(Handoff::Ended(r.left_as_it_was(Exit::SignalsInvalid)))
        }
    }
}

impl Refining<'_> {
    /// A headless spawn of the refinement in its directory, asked `prompt`.
    fn spawn(&self, prompt: String) -> FlowSpawn<'_> {
        FlowSpawn {
            run_id: flow_run_id("refine", &self.dir),
            settings: &self.target.loaded.settings,
            provider: self.provider,
            model: self.model.clone(),
            cwd: self.target.root.clone(),
            dir: self.dir.clone(),
            prompt,
            contract: Contract::refine(),
            json: false,
            crashed: self.crashed.clone(),
        }
    }

    /// Says that the ticket was not changed, and where the record is; returns `exit`.
    fn left_as_it_was(&self, exit: Exit) -> Exit {
        errln!(
            "refine: {} was left as it was; the record is in {}",
            self.output.display(),
            self.dir.display()
        );
        exit
    }

    /// Records the refined ticket among `signals` and writes it over the ticket.
    fn accept(
        &self,
        signals: &[corral_sprint::life::Signal],
        cost_usd: Option<f64>,
    ) -> anyhow::Result<Exit> {
        let Some(ticket) = refined_of(signals) else {
            errln!("refine: the agent wrote no refined ticket");
            return Ok(self.left_as_it_was(Exit::SignalsInvalid));
        };
        let json = serde_json::to_vec_pretty(ticket).unwrap_or_default();
        record_flow_file(&self.layout, &self.dir, REFINED_FILE, &json).map_err(life_usage)?;
        let markdown = refined_markdown(ticket);
        record_flow_file(
            &self.layout,
            &self.dir,
            REFINED_TICKET_FILE,
            markdown.as_bytes(),
        )
        .map_err(life_usage)?;
        corral_hostfs_write(&self.target.root, &self.output, &markdown)?;
        let cost = cost_usd.map_or(String::new(), |c| format!(" (${c:.4})"));
        outln!(
            "refined {} into {}{cost}: {} with {} acceptance criteri{}",
            self.source.label,
            self.output.display(),
            ticket.title,
            ticket.acceptance_criteria.len(),
            if ticket.acceptance_criteria.len() == 1 {
                "on"
            } else {
                "a"
            }
        );
        for criterion in &ticket.acceptance_criteria {
            outln!("  - {}", criterion.lines().next().unwrap_or_default());
        }
        outln!(
            "the text it replaced is in {}",
            self.dir.join(REFINE_SOURCE_FILE).display()
        );
        outln!(
            "next: `corral sprint plan {}` to turn it into the sprint's tasks",
            self.output.display()
        );
        Ok(Exit::Success)
    }
}

/// Refuses, before any agent runs, an output that is not a regular file or nothing (a FIFO, a
/// directory, a link: the write would refuse it after the agent's work).
fn check_output(root: &Path, rel: &Path) -> anyhow::Result<()> {
    let project = corral_sprint::life::project_dir(root).map_err(life_usage)?;
    match project.kind(rel) {
        Ok(None | Some(corral_sprint::life::EntryKind::File)) => Ok(()),
        Ok(Some(corral_sprint::life::EntryKind::Dir)) => Err(usage(format!(
            "{}: is a directory; name the file the refined ticket goes to",
            rel.display()
        ))),
        Ok(Some(corral_sprint::life::EntryKind::Other(what))) => Err(usage(format!(
            "{}: is {what}; the refined ticket is written only to a regular file",
            rel.display()
        ))),
        Err(e) => Err(usage(format!(
            "{e}; the refined ticket cannot be written there"
        ))),
    }
}

/// Writes `text` as the file `rel` of the project at `root`: whole, synced, no link followed.
fn corral_hostfs_write(root: &Path, rel: &Path, text: &str) -> anyhow::Result<()> {
    corral_sprint::life::write_project_file(root, rel, text).map_err(life_usage)
}
