//! `corral sprint run [FILE]`: runs a sprint, or continues it where it stopped.
//!
//! The sprint file is loaded and validated (its errors printed as `sprint check` prints them,
//! exit 2); the layered settings are loaded from the current directory's project, as
//! `corral run` loads them; the composition root builds the generator's and (unless it is
//! turned off) the evaluator's agent and the supervised command runner for the check, the
//! gates, `setup` and git; Ctrl-C, SIGTERM and SIGHUP cancel the sprint (it stops at the next
//! step and can be continued), a second one ends corral at once. `corral_sprint::run_sprint`
//! does the rest; its end becomes the exit code.

use std::path::{Path, PathBuf};
use std::time::Duration;

use corral_compose::Settings;
use corral_compose::{command_runner, engine_config, new_run_id, now, task_executor};
use corral_ports::{CancellationToken, CommandEnd, CommandRunner, CommandSpec};
use corral_sprint::{
    DirtyTree, RoleAgent, RoleSettings, RunOptions, SPRINT_FILE, SprintEnd, SprintError,
    SprintFile, SprintRun, SprintSummary, run_sprint,
};

use crate::args::SprintRunArgs;
use crate::config_cmd::load_settings;
use crate::exit::{Exit, usage};
use crate::render::Style;
use crate::sprint_view::{SprintView, summary_lines};
use crate::term::{errln, outln};

/// Runs `corral sprint run`.
pub async fn run(args: SprintRunArgs) -> anyhow::Result<Exit> {
    let path = args
        .file
        .clone()
        .unwrap_or_else(|| PathBuf::from(SPRINT_FILE));
    let file = match crate::sprint::load_or_report(&path)? {
        Ok(file) => file,
        Err(exit) => return Ok(exit),
    };
    let cwd = std::env::current_dir()?;
    let loaded = load_settings(&cwd, Vec::new())?;
    let mut chosen = loaded.settings.clone();
    match args.executor.as_deref() {
        Some("ray") => chosen.executor.kind = corral_compose::ExecutorKind::Ray,
        Some("local") => chosen.executor.kind = corral_compose::ExecutorKind::Local,
        Some(_) | None => {}
    }
    let settings = &chosen;
    let root = loaded.project_root.clone();
    let config = engine_config(settings);
    let (generator, evaluator) = crate::sprint::role_agents(&file, settings, &config)?;
    let commands = command_runner(config);
    let executor = task_executor(settings, &root, &path).map_err(|e| usage(e.to_string()))?;
    let dirty = match (args.keep_dirty, args.stash) {
        (true, _) => DirtyTree::Keep,
        (false, true) => DirtyTree::Stash,
        (false, false) => DirtyTree::Refuse,
    };
    let cancel = CancellationToken::new();
    if !args.no_preflight {
        let report = preflight(&file, &path, settings, &root).await;
        if report.problems() > 0 {
            return Ok(Exit::Unavailable);
        }
    }
    let git_env = git_identity(&*commands, &root, &cancel).await;

    let view = SprintView::new(Style::choose(args.json, false));
    install_signal_handlers(cancel.clone(), view.clone());
    let ticker = view.spawn_ticker();
    let result = run_sprint(SprintRun {
        file: &file,
        project_root: &root,
        generator: &*generator,
        evaluator: evaluator.as_deref().map(|e| e as &dyn RoleAgent),
        commands: &*commands,
        executor: &*executor,
        events: &view,
        options: RunOptions {
            dirty,
            run_id: new_run_id(file.generator.provider),
            now,
            git_env,
            jobs: usize::from(args.jobs),
            prices: crate::sprint::price_table(settings),
        },
        cancel,
    })
    .await;
    if let Some(t) = ticker {
        t.abort();
    }
    view.finish();
    match result {
        Ok(summary) => {
            if view.style() != Style::Json {
                print_summary(file.sprint.name.as_str(), &summary);
            }
            if args.pr && summary.end == SprintEnd::Done {
                return crate::sprint_life::pr_after_run(path, args.json).await;
            }
            Ok(exit_for(summary.end))
        }
        Err(e) => Err(exit_for_error(e)),
    }
}

/// The sprint's preflight (see the `preflight` module), printed on stderr: the roles as the
/// sprint file and settings give them, the work tree at `root`, then the commit identity and
/// the check commands. A first signal cancels it (the request's process group ended).
async fn preflight(
    file: &SprintFile,
    path: &Path,
    settings: &Settings,
    root: &Path,
) -> crate::preflight::Report {
    use crate::preflight::{RoleCheck, check_roles, check_sprint_commands, records_dir};
    // Every provider a role lists is checked: one that takes over in the night must work too.
    let role_checks = |name: &'static str, role: &RoleSettings, read_only: bool| {
        let several = !role.failover.is_empty();
        role.choices()
            .into_iter()
            .map(|choice| {
                let key = if several {
                    format!("model.{}", choice.provider)
                } else {
                    "model".to_string()
                };
                let in_file = format!("`{key}` under [roles.{name}] in {}", path.display());
                RoleCheck {
                    role: name,
                    provider: choice.provider,
                    model: choice
                        .model
                        .clone()
                        .or_else(|| settings.providers.get(choice.provider).model.clone()),
                    effort: choice.effort,
                    read_only,
                    model_key: match choice.model {
                        Some(_) => in_file,
                        None => format!("providers.{}.model (or {in_file})", choice.provider),
                    },
                }
            })
            .collect::<Vec<_>>()
    };
    let roles: Vec<RoleCheck> = role_checks("generator", &file.generator, false)
        .into_iter()
        .chain(
            file.evaluator
                .as_ref()
                .map(|e| role_checks("evaluator", e, true))
                .unwrap_or_default(),
        )
        .collect();
    errln!(
        "preflight: asking each role's CLI one cheap request before the first task (--no-preflight skips this)"
    );
    let cancel = CancellationToken::new();
    let on_signal = {
        let cancel = cancel.clone();
        let mut streams = crate::run::ending_signal_streams();
        tokio::spawn(async move {
            crate::run::next_ending_signal(&mut streams).await;
            cancel.cancel();
        })
    };
    let mut report = check_roles(&roles, settings, root, &records_dir(root), &cancel).await;
    on_signal.abort();
    check_sprint_commands(&mut report, file, settings, root).await;
    crate::preflight::print(&report, "the sprint", "pass --no-preflight");
    report
}

/// The exit code of a sprint that ran to an end of its own.
pub(crate) fn exit_for(end: SprintEnd) -> Exit {
    match end {
        SprintEnd::Done => Exit::Success,
        SprintEnd::Blocked => Exit::Blocked,
        SprintEnd::RateLimited => Exit::RateLimited,
        SprintEnd::Cancelled => Exit::Cancelled,
        SprintEnd::DiskFull => Exit::Internal,
        SprintEnd::PermanentFailure => Exit::Unavailable,
        SprintEnd::BudgetExhausted => Exit::BudgetExhausted,
    }
}

/// A sprint that did not: a preflight refusal is the user's to fix (exit 2), anything else a
/// failure of the machinery (exit 1).
pub(crate) fn exit_for_error(e: SprintError) -> anyhow::Error {
    match e {
        SprintError::Dirty { .. }
        | SprintError::SetupFailed { .. }
        | SprintError::Busy { .. }
        | SprintError::UsersBranch { .. } => usage(e.to_string()),
        SprintError::Git(_)
        | SprintError::Command { .. }
        | SprintError::State(_)
        | SprintError::Io { .. }
        | SprintError::Record(_)
        | SprintError::Executor { .. } => anyhow::Error::new(e),
    }
}

fn print_summary(name: &str, summary: &SprintSummary) {
    outln!("");
    for line in summary_lines(name, summary) {
        outln!("{line}");
    }
}

/// The first ending signal cancels the sprint: the running agent's process tree is ended and
/// the sprint stops at that step, its state written (running again continues). A second one
/// ends corral at once, every process group it started killed first.
pub(crate) fn install_signal_handlers(cancel: CancellationToken, view: SprintView) {
    let mut streams = crate::run::ending_signal_streams();
    tokio::spawn(async move {
        let first = crate::run::next_ending_signal(&mut streams).await;
        view.note(&format!(
            "{first}: cancelling: the sprint stops at this step and `corral sprint run` continues it (again to stop corral at once)"
        ));
        cancel.cancel();
        let second = crate::run::next_ending_signal(&mut streams).await;
        let groups = corral_compose::kill_child_groups();
        view.finish();
        errln!(
            "stopped: corral was stopped by a second {second}; the process groups it started were killed ({groups}); `corral sprint run` continues the sprint"
        );
        std::process::exit(i32::from(Exit::Cancelled.code()));
    });
}

/// The identity variables git could not otherwise see.
const IDENTITY: [(&str, [&str; 2]); 2] = [
    ("user.name", ["GIT_AUTHOR_NAME", "GIT_COMMITTER_NAME"]),
    ("user.email", ["GIT_AUTHOR_EMAIL", "GIT_COMMITTER_EMAIL"]),
];

/// The committer identity for the sprint's commits. The supervised git reads the
/// repository's own configuration but neither the system's nor the user's (they could name
/// programs), so the identity variables set in corral's environment are passed on, and where
/// neither they nor the repository set a name or an email, the user's global git config
/// (`$XDG_CONFIG_HOME/git/config`, then `~/.gitconfig`, which wins, as in git) is read for it.
pub(crate) async fn git_identity(
    runner: &dyn CommandRunner,
    root: &Path,
    cancel: &CancellationToken,
) -> Vec<(String, String)> {
    git_identity_and_gaps(runner, root, cancel).await.0
}

/// [`git_identity`]'s variables, and the keys (`user.name`, `user.email`) that neither they, the
/// repository nor the global git config give a value: git would refuse to commit without them,
/// which `sprint check` warns about before any agent runs.
pub(crate) async fn git_identity_and_gaps(
    runner: &dyn CommandRunner,
    root: &Path,
    cancel: &CancellationToken,
) -> (Vec<(String, String)>, Vec<&'static str>) {
    let mut env: Vec<(String, String)> = IDENTITY
        .iter()
        .flat_map(|(_, vars)| vars.iter())
        .filter_map(|var| {
            std::env::var(var)
                .ok()
                .filter(|v| !v.is_empty())
                .map(|v| ((*var).to_string(), v))
        })
        .collect();
    let mut gaps = Vec::new();
    let globals = global_git_configs();
    for (key, vars) in IDENTITY {
        let missing: Vec<&str> = vars
            .iter()
            .copied()
            .filter(|var| !env.iter().any(|(k, _)| k == var))
            .collect();
        if missing.is_empty()
            || git_config(runner, root, &["--get", key], cancel)
                .await
                .is_some()
        {
            continue;
        }
        let mut value = None;
        for file in &globals {
            let file = file.display().to_string();
            if let Some(v) =
                git_config(runner, root, &["--file", &file, "--get", key], cancel).await
            {
                value = Some(v);
            }
        }
        match value {
            Some(value) => env.extend(
                missing
                    .iter()
                    .map(|var| ((*var).to_string(), value.clone())),
            ),
            None => gaps.push(key),
        }
    }
    (env, gaps)
}

/// The user's global git config files that exist, the one that wins last.
fn global_git_configs() -> Vec<PathBuf> {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let xdg = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| home.as_ref().map(|h| h.join(".config")));
    [
        xdg.map(|x| x.join("git/config")),
        home.map(|h| h.join(".gitconfig")),
    ]
    .into_iter()
    .flatten()
    .filter(|p| p.is_file())
    .collect()
}

/// `git config <args>`'s value, when it has one.
async fn git_config(
    runner: &dyn CommandRunner,
    root: &Path,
    args: &[&str],
    cancel: &CancellationToken,
) -> Option<String> {
    let spec = CommandSpec::git(
        std::iter::once("config").chain(args.iter().copied()),
        root,
        Duration::from_secs(10),
    );
    let out = runner.run(spec, cancel).await.ok()?;
    match out.end {
        CommandEnd::Exited(0) => {
            let value = out.stdout.text.trim().to_string();
            (!value.is_empty()).then_some(value)
        }
        CommandEnd::Exited(_)
        | CommandEnd::Signalled(_)
        | CommandEnd::TimedOut
        | CommandEnd::Cancelled
        | CommandEnd::LimitExceeded(_) => None,
    }
}
