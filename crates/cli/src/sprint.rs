//! `corral sprint init | check | status`: the sprint file, and what a sprint recorded.
//!
//! `init` writes the commented example (never over an existing file), fitted to the providers
//! installed here and the project's test command, `check` validates a sprint file and prints its
//! tasks in the order they run, or every error with its file, line, key and rule (exit 2), then
//! warns about what it can see will fail on this machine (`sprint_init`), and `status` reads
//! `.corral/sprints/<name>/sprint.json` and the rate-limit gate's holds on the accounts of the
//! sprint's roles. `run` is in `sprint_run`;
//! [`role_agents`] builds the agents for it and for `sprint work`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use corral_compose::{EngineConfig, Settings, engine_config, provider_account, role_agent};
use corral_ports::ProviderId;
use corral_sprint::{
    RoleAgent, RoleSettings, SPRINT_FILE, SprintFile, SprintFileError, SprintLayout, SprintName,
    SprintState, StateError, Step, TaskId, TaskStatus, read_state,
};

use crate::args::SprintCommand;
use crate::display;
use crate::exit::{Exit, usage};
use crate::term::{errln, one_line, outln};

/// Runs a `corral sprint` command.
pub async fn sprint(cmd: SprintCommand) -> anyhow::Result<Exit> {
    match cmd {
        SprintCommand::Run(args) => crate::sprint_run::run(args).await,
        SprintCommand::Work(args) => crate::sprint_work::run(args).await,
        SprintCommand::Init { file } => init(&file.unwrap_or_else(|| PathBuf::from(SPRINT_FILE))),
        SprintCommand::Check { file } => {
            check(&file.unwrap_or_else(|| PathBuf::from(SPRINT_FILE))).await
        }
        SprintCommand::Status { name, json, follow } => status(name.as_deref(), json, follow).await,
        SprintCommand::Life(command) => crate::sprint_life::run(command).await,
    }
}

/// The sprint's price table: the built-in list prices with the settings' `[prices]` over them.
pub(crate) fn price_table(settings: &Settings) -> corral_sprint::PriceTable {
    corral_sprint::PriceTable::builtin().with(settings.prices.iter().map(|(model, p)| {
        (
            model.clone(),
            corral_sprint::ModelPrice {
                input: p.input,
                output: p.output,
                cache_read: p.cache_read,
                cache_write: p.cache_write,
            },
        )
    }))
}

fn init(path: &Path) -> anyhow::Result<Exit> {
    let cwd = std::env::current_dir()?;
    let loaded = crate::config_cmd::load_settings(&cwd, Vec::new())?;
    let choice = crate::sprint_init::example_choice(&loaded.settings, &cwd, &loaded.project_root);
    // `create_new`: a file that is there, even one made a moment ago, is never overwritten.
    let mut file = match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
    {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            return Err(usage(format!(
                "{} already exists and was left as it is; remove it or name another file",
                path.display()
            )));
        }
        Err(e) => return Err(usage(format!("cannot write {}: {e}", path.display()))),
    };
    file.write_all(corral_sprint::example(&choice).as_bytes())
        .map_err(|e| usage(format!("cannot write {}: {e}", path.display())))?;
    outln!(
        "wrote {}: an example sprint with comments; edit it, then `corral sprint check{}`",
        path.display(),
        if path == Path::new(SPRINT_FILE) {
            String::new()
        } else {
            format!(" {}", path.display())
        }
    );
    for note in crate::sprint_init::choice_notes(&choice) {
        outln!("{note}");
    }
    Ok(Exit::Success)
}

async fn check(path: &Path) -> anyhow::Result<Exit> {
    let file = match load_or_report(path)? {
        Ok(file) => file,
        Err(exit) => return Ok(exit),
    };
    print_summary(&file);
    // Tasks that may run at once with `--jobs` and declare overlapping `touches`: the scheduler
    // runs them one after the other, said here before a run finds out.
    for overlap in file.overlaps() {
        errln!("note: {overlap}");
    }
    // What will fail on this machine is a warning, not an error: the file itself is valid, and
    // the machine it runs on may differ.
    let cwd = std::env::current_dir()?;
    match crate::config_cmd::load_settings(&cwd, Vec::new()) {
        Ok(loaded) => {
            let warnings = crate::sprint_init::check_warnings(
                &file,
                &loaded.settings,
                &cwd,
                &loaded.project_root,
            )
            .await;
            for w in warnings {
                errln!("warning: {w}");
            }
        }
        Err(e) => errln!(
            "warning: the settings do not load, so what the sprint would run on was not looked at: {e:#}"
        ),
    }
    Ok(Exit::Success)
}

/// The sprint file at `path`, or its errors printed as `sprint check` prints them and the exit
/// code (2) to end with; an unreadable file is a usage error.
pub(crate) fn load_or_report(path: &Path) -> anyhow::Result<Result<SprintFile, Exit>> {
    report_load(path, corral_sprint::load(path))
}

/// [`load_or_report`], accepting a file that has no `[[tasks]]` yet (the settings written for
/// a plan to fill).
pub(crate) fn load_untasked_or_report(path: &Path) -> anyhow::Result<Result<SprintFile, Exit>> {
    report_load(path, corral_sprint::life::load_allowing_no_tasks(path))
}

fn report_load(
    path: &Path,
    loaded: Result<SprintFile, SprintFileError>,
) -> anyhow::Result<Result<SprintFile, Exit>> {
    match loaded {
        Ok(file) => Ok(Ok(file)),
        Err(SprintFileError::Invalid { path, diagnostics }) => {
            for d in &diagnostics {
                errln!("error: {d}");
            }
            errln!(
                "{}: {} error{}",
                path.display(),
                diagnostics.len(),
                if diagnostics.len() == 1 { "" } else { "s" }
            );
            Ok(Err(Exit::BadInput))
        }
        Err(e @ SprintFileError::Unreadable(_)) => {
            let hint = if path.exists() {
                ""
            } else {
                " (write an example with `corral sprint init`)"
            };
            Err(usage(format!("{e}{hint}")))
        }
    }
}

/// A sprint's generator and, unless it is turned off, its evaluator.
pub(crate) type RoleAgents = (Arc<dyn RoleAgent>, Option<Arc<dyn RoleAgent>>);

/// The generator's agent and, unless the sprint file turns it off, the evaluator's, built from
/// `settings` on engines configured by `config`; a role that cannot be built is a usage error
/// that names it. `sprint run` and `sprint work` build their agents here.
pub(crate) fn role_agents(
    file: &SprintFile,
    settings: &Settings,
    config: &EngineConfig,
) -> anyhow::Result<RoleAgents> {
    let build = |table: &str, role: &RoleSettings| {
        role_agent(role, settings, config.clone())
            .map_err(|e| usage(format!("[roles.{table}] {}: {e}", role.provider)))
    };
    let generator = build("generator", &file.generator)?;
    let evaluator = match &file.evaluator {
        Some(role) => Some(build("evaluator", role)?),
        None => None,
    };
    Ok((generator, evaluator))
}

/// A role as a short phrase: `claude (model x, effort high)`; with failover, each provider in
/// order, then how long a hold is waited out (`claude (model x), then codex after a 15m hold`).
fn role(r: &RoleSettings) -> String {
    let one = |c: &corral_sprint::ProviderChoice| {
        let mut details = Vec::new();
        if let Some(model) = &c.model {
            details.push(format!("model {model}"));
        }
        if let Some(effort) = c.effort {
            details.push(format!("effort {}", effort.as_str()));
        }
        if details.is_empty() {
            c.provider.as_str().to_string()
        } else {
            format!("{} ({})", c.provider, details.join(", "))
        }
    };
    let choices = r.choices();
    let names: Vec<String> = choices.iter().map(one).collect();
    if names.len() == 1 {
        return names.join("");
    }
    format!(
        "{} after a {} hold",
        names.join(", then "),
        display::duration_ms(r.failover_after_ms)
    )
}

fn print_summary(file: &SprintFile) {
    let s = &file.sprint;
    let count =
        |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    outln!(
        "{}: sprint {} is valid: {} on branch {}",
        file.path.display(),
        s.name,
        count(file.tasks.len(), "task", "tasks"),
        one_line(&s.branch)
    );
    let evaluator = file.evaluator.as_ref().map_or("off".to_string(), role);
    outln!(
        "generator {}, evaluator {}; {}; at most {} and {} per task",
        role(&file.generator),
        evaluator,
        count(file.gates.len(), "gate", "gates"),
        count(s.max_rounds as usize, "round", "rounds"),
        count(s.max_attempts as usize, "attempt", "attempts"),
    );
    outln!("tasks in the order they run:");
    let order = file.run_order();
    let rows = order
        .iter()
        .enumerate()
        .map(|(i, task)| {
            let after = if task.depends_on.is_empty() {
                String::new()
            } else {
                let ids: Vec<&str> = task.depends_on.iter().map(|d| d.as_str()).collect();
                format!("  (after {})", ids.join(", "))
            };
            vec![
                format!("{}.", i + 1),
                task.id.as_str().to_string(),
                format!("{}{after}", one_line(&task.title)),
            ]
        })
        .collect();
    for line in display::table(None, &[0], rows, indented_width()) {
        outln!("  {line}");
    }
}

async fn status(name: Option<&str>, json: bool, follow: bool) -> anyhow::Result<Exit> {
    let cwd = std::env::current_dir()?;
    let root = corral_compose::project_root(&cwd);
    let name = match name {
        Some(n) => SprintName::new(n).map_err(|e| usage(format!("the sprint name {n:?} {e}")))?,
        None => only_sprint(&root, &cwd)?,
    };
    let layout = SprintLayout::new(&root, &name);
    if follow {
        return crate::sprint_follow::follow(&layout, json).await;
    }
    let state = match read_state(&layout.state_file()) {
        Ok(state) => Some(state),
        Err(StateError::Missing { .. }) => None,
        Err(e) => return Err(e.into()),
    };
    let life = corral_sprint::life::life_status(&root, &layout, state.as_ref());
    if state.is_none()
        && life.stage == corral_sprint::life::LifeStage::New
        && crate::sprint_life::sprint_file_name(&cwd).as_ref() != Some(&name)
    {
        return Err(usage(format!(
            "sprint {name} has not run in {}: there is no {}",
            root.display(),
            layout.state_file().display()
        )));
    }
    let holds = state.as_ref().map_or_else(Vec::new, |state| {
        account_holds(&root, &cwd, state, std::time::SystemTime::now())
    });
    if json {
        let status = StatusJson {
            state: state.as_ref(),
            roll_up: state.as_ref().map(SprintState::usage),
            account_holds: &holds,
            life: &life,
        };
        outln!("{}", crate::term::json_pretty(&status)?);
    } else {
        match &state {
            Some(state) => {
                print_state(state);
                for hold in &holds {
                    outln!("{}", hold.line());
                }
                if life.flows.iter().any(|f| f.spawns > 0) {
                    outln!("");
                    crate::sprint_life::print_life(&name, &life);
                }
            }
            None => crate::sprint_life::print_life(&name, &life),
        }
    }
    Ok(Exit::Success)
}

/// `corral sprint status --json`: `sprint.json` as written, its tokens and cost rolled up, the
/// holds on the accounts its roles use, and where the sprint's life stands.
#[derive(serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct StatusJson<'a> {
    /// The state, once the sprint has run.
    #[serde(flatten)]
    state: Option<&'a SprintState>,
    /// Its tokens and cost, once the sprint has run.
    #[serde(skip_serializing_if = "Option::is_none")]
    roll_up: Option<corral_sprint::UsageRollUp>,
    account_holds: &'a [AccountHoldStatus],
    /// Where the sprint's life stands: each flow's record (ideate, refine, plan, ready, pr).
    life: &'a corral_sprint::life::LifeStatus,
}

/// A provider account that the sprint's roles use and that the rate-limit gate holds beyond
/// now: its next spawn waits until `until`.
#[derive(Debug, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct AccountHoldStatus {
    provider: ProviderId,
    /// The roles the provider plays (`generator`, `evaluator`).
    roles: Vec<&'static str>,
    /// RFC 3339, UTC, to the second.
    until: String,
    until_epoch_ms: u64,
    /// Where the time came from (`until the reported reset time`, `exponential backoff`).
    basis: String,
    /// The run and attempt that recorded it.
    set_by: String,
    /// The running (or paused) tasks whose next spawn is on this account.
    waiting_tasks: Vec<TaskId>,
}

impl AccountHoldStatus {
    fn line(&self) -> String {
        let until = display::recorded_time(&self.until);
        let waiting = match self.waiting_tasks.as_slice() {
            [] => String::new(),
            [one] => format!("; {one} waits for it"),
            many => {
                let ids: Vec<&str> = many.iter().map(TaskId::as_str).collect();
                format!("; {} wait for it", ids.join(", "))
            }
        };
        format!(
            "rate limit: {} ({}) is held until {until} ({}, set by {}){waiting}",
            self.provider,
            self.roles.join(", "),
            one_line(&self.basis),
            one_line(&self.set_by)
        )
    }
}

/// The holds beyond `now` on the accounts of the providers the sprint file's roles name, read
/// from the rate-limit gate the settings here would run them on. Without a readable sprint file
/// or settings there is nothing to ask about: no holds (the reason is logged).
fn account_holds(
    root: &Path,
    cwd: &Path,
    state: &SprintState,
    now: std::time::SystemTime,
) -> Vec<AccountHoldStatus> {
    let file = match corral_sprint::load(&root.join(&state.sprint_file)) {
        Ok(file) => file,
        Err(e) => {
            tracing::info!(error = %e, "no account holds shown: the sprint file is not readable");
            return Vec::new();
        }
    };
    let settings = match crate::config_cmd::load_settings(cwd, Vec::new()) {
        Ok(loaded) => loaded.settings,
        Err(e) => {
            tracing::info!(error = %e, "no account holds shown: the settings do not load");
            return Vec::new();
        }
    };
    let config = engine_config(&settings);
    let mut by_provider: Vec<(ProviderId, Vec<&'static str>)> = Vec::new();
    let roles = std::iter::once(("generator", &file.generator))
        .chain(file.evaluator.as_ref().map(|e| ("evaluator", e)));
    for (name, role) in roles {
        match by_provider.iter_mut().find(|(p, _)| *p == role.provider) {
            Some((_, names)) => names.push(name),
            None => by_provider.push((role.provider, vec![name])),
        }
    }
    let mut holds = Vec::new();
    for (provider, roles) in by_provider {
        let account = match provider_account(provider, &settings, config.clone()) {
            Ok(Some(account)) => account,
            Ok(None) => continue,
            Err(e) => {
                tracing::info!(%provider, error = %e, "no account hold shown for the provider");
                continue;
            }
        };
        let Some(hold) = account.hold_at(now) else {
            continue;
        };
        let waiting_tasks = state
            .tasks
            .iter()
            .filter(|t| t.status == TaskStatus::Running)
            .filter(|t| {
                next_spawn_role(&file, t.progress.as_ref().map(|p| p.step))
                    .is_some_and(|r| r.provider == provider)
            })
            .map(|t| t.id.clone())
            .collect();
        holds.push(AccountHoldStatus {
            provider,
            roles,
            until: humantime::format_rfc3339_seconds(hold.until).to_string(),
            until_epoch_ms: hold
                .until
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64),
            basis: hold.basis,
            set_by: hold.set_by,
            waiting_tasks,
        });
    }
    holds
}

/// The role whose spawn a running task at `step` starts next (`None` at its commit).
fn next_spawn_role(file: &SprintFile, step: Option<Step>) -> Option<&RoleSettings> {
    match step {
        None | Some(Step::PreVerify | Step::Generate) => Some(&file.generator),
        Some(Step::PostVerify | Step::Evaluate) => {
            Some(file.evaluator.as_ref().unwrap_or(&file.generator))
        }
        Some(Step::Commit) => None,
    }
}

/// The sprint to show when none is named: the only one recorded, else the one the sprint
/// file here names.
fn only_sprint(root: &Path, cwd: &Path) -> anyhow::Result<SprintName> {
    let recorded = corral_sprint::life::sprints_with_records(root)?;
    let here = crate::sprint_life::sprint_file_name(cwd);
    match recorded.as_slice() {
        [] => here.ok_or_else(|| {
            usage(format!(
                "no sprint has run in {} yet (nothing under {})",
                root.display(),
                corral_sprint::sprints_dir(root).display()
            ))
        }),
        [one] => Ok(one.clone()),
        many => {
            if let Some(name) = here
                && many.contains(&name)
            {
                return Ok(name);
            }
            let names: Vec<&str> = many.iter().map(SprintName::as_str).collect();
            Err(usage(format!(
                "{} sprints have run here ({}); name one: corral sprint status NAME",
                many.len(),
                names.join(", ")
            )))
        }
    }
}

fn print_state(state: &SprintState) {
    let done = state.count(TaskStatus::Done);
    outln!(
        "sprint {} on branch {}: {done} of {} tasks done",
        state.name,
        one_line(&state.branch),
        state.tasks.len()
    );
    outln!(
        "started {}, updated {}",
        one_line(&display::recorded_time(&state.started_at)),
        one_line(&display::recorded_time(&state.updated_at))
    );
    let mut rows = Vec::new();
    for task in &state.tasks {
        let mut details = Vec::new();
        if task.round > 0 {
            details.push(format!("round {}", task.round));
        }
        if task.attempt > 1 {
            details.push(format!("attempt {}", task.attempt));
        }
        if let Some(commit) = &task.commit {
            details.push(format!("commit {}", one_line(commit)));
        }
        if let Some(reason) = &task.reason {
            details.push(one_line(reason));
        }
        if let Some(failed) = failures_text(&task.failures) {
            details.push(failed);
        }
        if let Some(last) = task.handovers.last() {
            details.push(handover_text(last, task.handovers.len()));
        }
        let used = corral_sprint::UsageRollUp::of_task(task).total;
        if used != corral_ports::Usage::default() {
            details.push(crate::sprint_view::usage_text(&used));
        }
        let details = if details.is_empty() {
            String::new()
        } else {
            format!("  ({})", details.join(", "))
        };
        rows.push(vec![
            task.status.as_str().to_string(),
            task.id.as_str().to_string(),
            format!("{}{details}", one_line(&task.title)),
        ]);
    }
    for line in display::table(None, &[], rows, indented_width()) {
        outln!("  {line}");
    }
    let all = state.usage();
    if all.total != corral_ports::Usage::default() {
        let mut parts = vec![
            format!(
                "generator {}",
                crate::sprint_view::usage_text(&all.by_role.generator)
            ),
            format!(
                "evaluator {}",
                crate::sprint_view::usage_text(&all.by_role.evaluator)
            ),
        ];
        parts.extend(all.by_provider.iter().map(|(provider, usage)| {
            format!("{provider} {}", crate::sprint_view::usage_text(usage))
        }));
        outln!(
            "usage {} ({})",
            crate::sprint_view::usage_text(&all.total),
            parts.join("; ")
        );
    }
}

/// A task's failed spawns by class, for its status row (`2 failed spawns: 1 transient, 1
/// permanent`); `None` when it has none.
fn failures_text(failures: &[corral_sprint::SpawnFailureRecord]) -> Option<String> {
    if failures.is_empty() {
        return None;
    }
    let mut by_class: Vec<(corral_sprint::FailureClass, usize)> = Vec::new();
    for failure in failures {
        match by_class.iter_mut().find(|(c, _)| *c == failure.class) {
            Some((_, n)) => *n += 1,
            None => by_class.push((failure.class, 1)),
        }
    }
    let classes: Vec<String> = by_class
        .iter()
        .map(|(class, n)| format!("{n} {}", class.as_str()))
        .collect();
    let spawns = if failures.len() == 1 {
        "spawn"
    } else {
        "spawns"
    };
    Some(format!(
        "{} failed {spawns}: {}",
        failures.len(),
        classes.join(", ")
    ))
}

/// A task's last hand-over to another provider of its role, for its status row (`claude held
/// until 2026-12-07 04:00:00 CET, continued on codex`), with how many there were when more
/// than one.
fn handover_text(last: &corral_sprint::HandOverRecord, count: usize) -> String {
    let more = if count > 1 {
        format!(" ({count} hand-overs)")
    } else {
        String::new()
    };
    format!(
        "{} held until {}, continued on {}{more}",
        last.from,
        one_line(&display::recorded_time(&last.held_until)),
        last.to
    )
}

/// The terminal's width less the two columns a table's rows are indented by.
fn indented_width() -> Option<usize> {
    display::terminal_width().map(|w| w.saturating_sub(2))
}

#[cfg(test)]
mod tests {
    use corral_ports::{Outcome, ProviderId};
    use corral_sprint::{FailureClass, Role, SpawnFailureRecord};

    use super::failures_text;

    fn failed(class: FailureClass, outcome: Outcome) -> SpawnFailureRecord {
        SpawnFailureRecord {
            round: 1,
            role: Role::Generator,
            provider: ProviderId::Claude,
            outcome,
            class,
            message: "claude: …".into(),
        }
    }

    #[test]
    fn a_tasks_failed_spawns_are_counted_by_class() {
        assert_eq!(failures_text(&[]), None);
        assert_eq!(
            failures_text(&[failed(FailureClass::Transient, Outcome::IdleTimeout)]).as_deref(),
            Some("1 failed spawn: 1 transient")
        );
        let several = [
            failed(FailureClass::Transient, Outcome::IdleTimeout),
            failed(FailureClass::Permanent, Outcome::ModelUnavailable),
            failed(FailureClass::Transient, Outcome::Crashed),
        ];
        assert_eq!(
            failures_text(&several).as_deref(),
            Some("3 failed spawns: 2 transient, 1 permanent")
        );
    }

    #[test]
    fn a_hand_over_reads_held_until_then_who_went_on() {
        let record = corral_sprint::HandOverRecord {
            round: 2,
            role: Role::Generator,
            from: ProviderId::Claude,
            held_until: "2026-12-07T04:00:00Z".into(),
            to: ProviderId::Codex,
        };
        let until = crate::display::recorded_time("2026-12-07T04:00:00Z");
        assert_eq!(
            super::handover_text(&record, 1),
            format!("claude held until {until}, continued on codex")
        );
        assert!(super::handover_text(&record, 3).ends_with("continued on codex (3 hand-overs)"));
    }
}
