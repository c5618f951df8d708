//! `corral sprint plan`: tickets in, the sprint file's tasks out.
//!
//! The sources are read first (GitHub issues through the forge, `gh` on the host; each file refused, with one message, when it leaves the project, is
//! not a regular file or is too long), then the sprint file (its errors printed as `sprint
//! check` prints them); only then does an agent spawn, in `.corral/sprints/<name>/plan/<n>/`.
//! Its `task-plan` is validated by the plan's contract (ids, dependencies, cycles: the
//! corrective loop names them to the agent), recorded as `plan.json`, merged into the sprint
//! file and checked with the sprint file's rules before the file is replaced. Any failure
//! leaves the sprint file as it was.

use std::path::{Path, PathBuf};

use corral_compose::{Contract, engine_config, forge};
use corral_ports::{CancellationToken, ForgeRepo};
use corral_sprint::life::{
    ISSUES_MAX, LifeError, PLAN_DIR, SourceText, issue_sources, merge_plan, plan_of, plan_prompt,
    read_source, record_plan, write_sprint_file,
};
use corral_sprint::{SPRINT_FILE, SprintFile, SprintLayout, SprintName};

use super::SprintPlanArgs;
use super::spawn::{FlowSpawn, flow_run_id, next_flow_dir, run_flow_spawn};
use crate::config_cmd::load_settings;
use crate::exit::{Exit, usage};
use crate::term::{errln, outln};

/// The sprint file as it is before planning: its text and what it parses to, or the example a
/// new file starts from.
enum Before {
    Existing { text: String, file: Box<SprintFile> },
    New { text: String },
}

/// Runs `corral sprint plan`.
pub async fn plan(args: SprintPlanArgs) -> anyhow::Result<Exit> {
    let cwd = std::fs::canonicalize(std::env::current_dir()?)?;
    let loaded = load_settings(&cwd, Vec::new())?;
    let root = std::fs::canonicalize(&loaded.project_root).unwrap_or(loaded.project_root.clone());
    let path = sprint_file_path(&cwd, &root, args.file.as_deref())?;

    let named: Vec<&PathBuf> = args.ticket.iter().chain(&args.from).collect();
    if named.is_empty() && args.from_issues.is_none() {
        return Err(usage(
            "nothing to plan from: name a ticket file (`corral sprint plan TICKET.md`), a PRD \
             (`--from PRD.md`) or GitHub issues (`--from-issues label:sprint`)",
        ));
    }
    let mut sources: Vec<SourceText> = Vec::new();
    for file in named {
        sources.push(read_source(&root, file).map_err(life_usage)?);
    }
    if let Some(query) = &args.from_issues {
        match issues(&loaded, &root, query, args.repo.as_deref()).await? {
            Ok(found) => sources.extend(found),
            Err(exit) => return Ok(exit),
        }
    }

    let before = match read_before(&path, &cwd, &root, &loaded, args.name.as_deref(), &sources)? {
        Ok(before) => before,
        Err(exit) => return Ok(exit),
    };

    let (name, role, existing) = match &before {
        Before::Existing { file, .. } => (
            file.sprint.name.clone(),
            Some(file.generator.clone()),
            Some(&**file),
        ),
        Before::New { .. } => (new_sprint_name(args.name.as_deref(), &sources)?, None, None),
    };
    let provider = args
        .provider
        .or(role.as_ref().map(|r| r.provider))
        .unwrap_or(loaded.settings.run.provider);
    let model = args
        .model
        .clone()
        .or_else(|| {
            role.as_ref()
                .filter(|r| r.provider == provider)
                .and_then(|r| r.model.clone())
        })
        .or_else(|| loaded.settings.providers.get(provider).model.clone());

    let layout = SprintLayout::new(&root, &name);
    let (dir, crashed) =
        next_flow_dir(&layout, PLAN_DIR, provider, model.as_deref(), &root).map_err(life_usage)?;
    let run_id = flow_run_id("plan", &dir);
    let end = run_flow_spawn(FlowSpawn {
        run_id,
        settings: &loaded.settings,
        provider,
        model,
        cwd: root.clone(),
        dir: dir.clone(),
        prompt: plan_prompt(&sources, existing),
        contract: Contract::plan(),
        json: args.json,
        crashed,
    })
    .await?;
    let Some(signals) = end.valid_signals("plan", "task plan") else {
        errln!(
            "plan: {} was left as it was; the record is in {}",
            path.display(),
            dir.display()
        );
        return Ok(end.exit);
    };
    let Some(plan) = plan_of(signals) else {
        errln!(
            "plan: the agent wrote no task plan; {} was left as it was",
            path.display()
        );
        return Ok(Exit::SignalsInvalid);
    };
    record_plan(&layout, &dir, plan).map_err(life_usage)?;
    let (text, drop_tasks) = match &before {
        Before::Existing { text, .. } => (text.as_str(), false),
        Before::New { text } => (text.as_str(), true),
    };
    let merged = match merge_plan(&path, text, plan, drop_tasks) {
        Ok(merged) => merged,
        Err(LifeError::PlanDoesNotFit { diagnostics, .. }) => {
            for d in &diagnostics {
                errln!("error: {d}");
            }
            errln!(
                "plan: the plan (in {}) does not fit {}: the file was left as it was",
                dir.join(corral_sprint::life::PLAN_FILE).display(),
                path.display()
            );
            return Ok(Exit::BadInput);
        }
        Err(e) => return Err(life_usage(e)),
    };
    write_sprint_file(path.parent().unwrap_or(&root), &path, &merged.text).map_err(life_usage)?;

    print_merge(
        plan.tasks.len(),
        &merged,
        &path,
        &dir,
        end.record.usage.cost_usd,
    );
    outln!("next: `corral sprint check` to see the order, `corral sprint run` to run it");
    Ok(Exit::Success)
}

/// The sprint file as it is (its errors printed as `sprint check` prints them, then the exit
/// code), or the example a new file starts from.
fn read_before(
    path: &Path,
    cwd: &Path,
    root: &Path,
    loaded: &corral_compose::LoadedSettings,
    name: Option<&str>,
    sources: &[SourceText],
) -> anyhow::Result<Result<Before, Exit>> {
    Ok(if path.exists() || path.symlink_metadata().is_ok() {
        // A file with the settings and no tasks yet is what a plan fills.
        match crate::sprint::load_untasked_or_report(path)? {
            Ok(file) => {
                let text = std::fs::read_to_string(path)
                    .map_err(|e| usage(format!("cannot read {}: {e}", path.display())))?;
                Ok(Before::Existing {
                    text,
                    file: Box::new(file),
                })
            }
            Err(exit) => {
                errln!(
                    "{}: fix these first (`corral sprint check`); the plan was not made",
                    path.display()
                );
                Err(exit)
            }
        }
    } else {
        let choice = crate::sprint_init::example_choice(&loaded.settings, cwd, root);
        let name = new_sprint_name(name, sources)?;
        let text = corral_sprint::example(&choice).replacen(
            "name = \"example\"",
            &format!("name = \"{name}\""),
            1,
        );
        Ok(Before::New { text })
    })
}

/// What the plan did to the sprint file, on stdout.
fn print_merge(
    count: usize,
    merged: &corral_sprint::life::PlanMerge,
    path: &Path,
    dir: &Path,
    cost_usd: Option<f64>,
) {
    let cost = cost_usd.map_or(String::new(), |c| format!(", ${c:.4}"));
    outln!(
        "planned {} task{} into {}{cost}",
        count,
        if count == 1 { "" } else { "s" },
        path.display()
    );
    let list = |ids: &[String]| ids.join(", ");
    if !merged.added.is_empty() {
        outln!("  added    {}", list(&merged.added));
    }
    if !merged.updated.is_empty() {
        outln!("  updated  {}", list(&merged.updated));
    }
    if !merged.kept.is_empty() {
        outln!("  kept     {} (not in the plan)", list(&merged.kept));
    }
    if !merged.briefs_kept.is_empty() {
        outln!(
            "  note     {}: the brief file was kept; the plan's brief is in {}",
            list(&merged.briefs_kept),
            dir.join(corral_sprint::life::PLAN_FILE).display()
        );
    }
}

/// The sprint file: `--file` or `corral-sprint.toml` here; it must be in the project, where
/// Corral writes it without following a link.
pub(super) fn sprint_file_path(
    cwd: &Path,
    root: &Path,
    file: Option<&Path>,
) -> anyhow::Result<PathBuf> {
    let path = cwd.join(file.unwrap_or(Path::new(SPRINT_FILE)));
    let parent = path
        .parent()
        .and_then(|p| std::fs::canonicalize(p).ok())
        .ok_or_else(|| usage(format!("{}: its directory does not exist", path.display())))?;
    if !parent.starts_with(root) {
        return Err(usage(format!(
            "{}: is outside the project {}; plan into a sprint file inside it",
            path.display(),
            root.display()
        )));
    }
    Ok(parent.join(path.file_name().unwrap_or(SPRINT_FILE.as_ref())))
}

/// The name of a new sprint: `--name`, else the first source's file name without extension,
/// made into a valid name.
pub(super) fn new_sprint_name(
    name: Option<&str>,
    sources: &[SourceText],
) -> anyhow::Result<SprintName> {
    if let Some(name) = name {
        return SprintName::new(name).map_err(|e| usage(format!("--name {name:?} {e}")));
    }
    let stem = sources
        .first()
        .and_then(|s| {
            Path::new(&s.label)
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
        })
        .unwrap_or_default();
    let cleaned: String = stem
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '-'
            }
        })
        .collect::<String>()
        .trim_matches('-')
        .chars()
        .take(corral_sprint::NAME_MAX_LEN)
        .collect();
    SprintName::new(if cleaned.is_empty() {
        "sprint"
    } else {
        &cleaned
    })
    .or_else(|_| SprintName::new("sprint"))
    .map_err(|e| usage(format!("no sprint name: {e}; give one with --name")))
}

/// The open issues `query` finds, through the forge (`gh` on the host), as sources; a forge
/// that cannot answer is one message and exit 8, before anything else happened.
async fn issues(
    loaded: &corral_compose::LoadedSettings,
    root: &Path,
    query: &str,
    repo: Option<&str>,
) -> anyhow::Result<Result<Vec<SourceText>, Exit>> {
    let forge = forge(&engine_config(&loaded.settings));
    let repo = ForgeRepo {
        dir: root.to_owned(),
        remote: "origin".to_owned(),
        repo: repo.map(str::to_owned),
    };
    let found = match forge
        .issues(&repo, query, ISSUES_MAX, &CancellationToken::new())
        .await
    {
        Ok(found) => found,
        Err(e) => {
            errln!("plan: --from-issues {query:?}: {e}; the plan was not made");
            return Ok(Err(Exit::Unavailable));
        }
    };
    Ok(Ok(issue_sources(query, &found).map_err(life_usage)?))
}

pub(super) fn life_usage(error: LifeError) -> anyhow::Error {
    usage(error.to_string())
}
