//! `corral sprint run`: the flow that takes a sprint's tasks, one by one, through generator
//! and evaluator rounds gated by its check, and commits each task that passes.
//!
//! Every step is written to `sprint.json` (atomically) before the next one starts, and every
//! spawn's directory is set up before the spawn, so that the sprint killed at any moment and
//! run again goes on at the same task, round and step: a round whose signals validated is not
//! run again, the generator's session is resumed when provider, model and cwd match, a round
//! is counted once, and a commit already made is found by its `Corral-Task:` trailer instead
//! of being made again.
//!
//! The flow by role, after nextest's runner (dispatcher, unit runner, steps):
//!
//! - this file holds the entry points ([`run_sprint`], [`work_task`]), the `Context` every role
//!   works with (the run, the record, git, the work tree, where a save goes) and the small
//!   helpers they share;
//! - `driver`: the `Driver`, which owns the sprint's state from its load to its summary and
//!   runs the tasks one by one; `wave`, the parallel run's queue, over the `Coordinator`
//!   (`coordinator`: the one writer of `sprint.json` while tasks run at once, and the
//!   executors' host) with `fold` (the merge queue's folds);
//! - `task`: one task's rounds, a `TaskCursor` over the task's entry in the state, with the
//!   ends every step may reach (next round, block, skip); its steps each in a file of their
//!   own: `generate` (the generator's spawn), `police` (what an agent must not have done),
//!   `check` (the check and gates), `evaluate` (the evaluator's review), `commit`, and
//!   `failure` (a failed spawn judged by its class);
//! - `learnings`, `branch`, `disk`, `protect` and `review`: the smaller concerns their names say.
//!
//! The errors are the crate's (`crate::error`).

use std::path::{Path, PathBuf};

use corral_contract::{
    Contract, Evaluation, Signal, read_session_id, read_untrusted_file, validate_signals_file,
};
use corral_ports::{
    CancellationToken, CommandEnd, CommandRunner, ErrorClass, Outcome, ProviderId, SessionId,
};

use crate::agent::{RoleAgent, SpawnReport};
use crate::error::SprintError;
use crate::event::{EventSink, SprintEnd, SprintEvent, SprintSummary, TaskSummary};
use crate::executor::{TaskEnd, TaskExecutor, TaskHandback, TaskJob, TaskRecorder};
use crate::file::{SprintFile, Task};
use crate::git::{Git, GitError};
use crate::hooks::HookQueue;
use crate::journal::Journal;
use crate::layout::{
    ROLE_META_FILE, Role, RoleMeta, SESSION_ID_FILE, SESSION_META_FILE, SIGNALS_FILE, SprintLayout,
};
use crate::state::{
    RoleUsage, SprintState, TaskProgress, TaskStatus, UsageRollUp, read_state, write_state_as,
};

/// The round's diff, in the round's directory.
pub const DIFF_FILE: &str = "diff.patch";
/// Every path the round changed (`git diff --name-status`), in the round's directory, when its
/// diff is too long for the evaluator's prompt.
pub const CHANGED_PATHS_FILE: &str = "changed-paths.txt";
/// The check's report after the round, in the round's directory.
pub const CHECK_FILE: &str = "check.txt";
/// A regressed round's change, saved before the tree is reset, in the round's directory.
pub const REGRESSED_PATCH_FILE: &str = "regressed.patch";
/// A blocked task's change, saved before the tree is reset, in the task's directory.
pub const BLOCKED_PATCH_FILE: &str = "blocked.patch";
/// The check's report before the task, in the task's directory.
pub const PRE_VERIFY_FILE: &str = "pre-verify.txt";

/// What to do with uncommitted changes found before the sprint starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DirtyTree {
    /// Refuse, naming the paths (the default).
    Refuse,
    /// Go on with them (the first task's commit will include them).
    Keep,
    /// Stash them (`git stash push --include-untracked`) and go on.
    Stash,
}

/// How a sprint run is asked for.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Uncommitted changes before the start.
    pub dirty: DirtyTree,
    /// The id of this run (kept for the sprint's commits unless an earlier run set one).
    pub run_id: String,
    /// The time now, RFC 3339.
    pub now: fn() -> String,
    /// Variables for git (the committer's identity: `GIT_AUTHOR_NAME` and the like).
    pub git_env: Vec<(String, String)>,
    /// How many tasks may run at once (1: one by one in the project's work tree; more: each
    /// ready task in its own git worktree on its own branch, folded back in run order).
    pub jobs: usize,
    /// What a spawn whose CLI reports only tokens is estimated to cost (the spend caps count
    /// it; the task's entry says `costEstimated`).
    pub prices: crate::price::PriceTable,
}

/// Everything a sprint run works with.
pub struct SprintRun<'a> {
    /// The sprint file.
    pub file: &'a SprintFile,
    /// The project root: `.corral/sprints/<name>/` is below it, and the agents work in it.
    pub project_root: &'a Path,
    /// The agent playing the generator.
    pub generator: &'a dyn RoleAgent,
    /// The agent playing the evaluator; `None`: the evaluator is turned off.
    pub evaluator: Option<&'a dyn RoleAgent>,
    /// Runs the check, the gates, `setup` and git.
    pub commands: &'a dyn CommandRunner,
    /// Where the tasks of a parallel run (`jobs` above 1) run: worktrees here, a cluster.
    pub executor: &'a dyn TaskExecutor,
    /// Receives every step.
    pub events: &'a dyn EventSink,
    /// How the run is asked for.
    pub options: RunOptions,
    /// Fires to stop the run (it stops at the next step and can be continued).
    pub cancel: CancellationToken,
}

impl std::fmt::Debug for SprintRun<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SprintRun")
            .field("sprint", &self.file.sprint.name)
            .field("project_root", &self.project_root)
            .field("generator", &self.generator.provider())
            .field("evaluator", &self.evaluator.map(|e| e.provider()))
            .field("executor", &self.executor.kind())
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

/// Writes `contents` as the record's file at `path` (one of `layout`'s paths), replacing what
/// is there through the record's handle: never through a link, a FIFO or a second hard link
/// (those are [`SprintError::Record`], tampering).
fn write_file(layout: &SprintLayout, path: &Path, contents: &[u8]) -> Result<(), SprintError> {
    let rel = layout.below_root(path).ok_or_else(|| SprintError::Io {
        path: path.to_path_buf(),
        source: std::io::Error::other("not in the sprint's record"),
    })?;
    Ok(layout.record()?.replace(rel, contents)?)
}

/// Reads the record's text file at `path` (one of `layout`'s paths) through the record's
/// handle, as [`write_file`] writes it; empty when it is missing or cannot be read.
fn read_record_text(layout: &SprintLayout, path: &Path) -> String {
    layout
        .below_root(path)
        .and_then(|rel| layout.record().ok()?.read(rel, 16 * 1024 * 1024).ok())
        .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
        .unwrap_or_default()
}

/// The check and the gates: passed or not, and what they printed.
struct Verification {
    passed: bool,
    check_passed: bool,
    gates: Vec<String>,
    failed_gates: Vec<String>,
    report: String,
}

/// Where a task went after a step.
enum Next {
    /// On to the step now in its progress.
    Continue,
    /// The task ended (done, blocked).
    Finished,
    /// The sprint must stop here and can be continued.
    Pause(SprintEnd),
}

/// Runs the sprint, or continues it from its `sprint.json`. Returns how it ended; an `Err` is
/// a refusal before any task ran (exit 2) or a failure of the machinery (exit 1).
///
/// Every event also goes to the sprint's `events.jsonl` (`journal`), and the sprint file's
/// `[hooks]` run beside the sprint (`hooks`): the run returns once the hooks it queued ran.
pub async fn run_sprint(run: SprintRun<'_>) -> Result<SprintSummary, SprintError> {
    let layout = SprintLayout::new(run.project_root, &run.file.sprint.name);
    let (commands, project_root, now) = (run.commands, run.project_root, run.options.now);
    let hooks = HookQueue::new(run.file.hooks.clone());
    let journal = Journal::new(run.events, layout.clone(), now, &hooks);
    let recorded = SprintRun {
        events: &journal,
        ..run
    };
    let sprint = async {
        let result = run_recorded(recorded).await;
        hooks.close();
        result
    };
    let hooks_run = crate::hooks::run_hooks(&hooks, commands, &layout, project_root, now);
    crate::hooks::beside(sprint, hooks_run).await
}

/// [`run_sprint`] with its events recorded.
async fn run_recorded(run: SprintRun<'_>) -> Result<SprintSummary, SprintError> {
    // Held to the end of the run, whatever its end: one sprint at a time per repository.
    // (A cancel during the lock's git command is a stop like any other, below.)
    let (result, _lock) = match crate::lock::lock_repository(&run).await {
        Ok(lock) => {
            let result = match Context::new(&run).await {
                Ok(ctx) => driver::Driver::run(ctx).await,
                Err(e) => Err(e),
            };
            (result, Some(lock))
        }
        Err(e) => (Err(e), None),
    };
    match result {
        // Cancelled in the middle of a git command: stopped, as at any other step.
        Err(SprintError::Git(GitError::Failed {
            end: CommandEnd::Cancelled,
            ..
        })) => {
            let layout = SprintLayout::new(run.project_root, &run.file.sprint.name);
            let state = read_state(&layout.state_file())
                .unwrap_or_else(|_| SprintState::fresh(run.file, &(run.options.now)()));
            let summary = summarize(&state, SprintEnd::Cancelled);
            run.events.event(&SprintEvent::SprintFinished {
                summary: summary.clone(),
            });
            Ok(summary)
        }
        // A full disk, wherever it was met (git, a check, a record): the summary and the way
        // on, not a bare error, since running again once there is room continues.
        Err(e) if disk::is_full(&e) => Ok(disk::stopped(&run, &e)),
        other => other,
    }
}

/// Runs one task's rounds, from `job`'s resume point, in `work_tree` (a checkout on
/// `job.branch`): what a parallel run's task runs, through an executor's host on this machine
/// and through `corral sprint work` on a worker. The task's record goes below the sprint's
/// directory in `run.project_root`; its state after every step goes to `recorder`. It writes
/// neither `sprint.json` nor the learnings (the coordinator's, at the fold).
pub async fn work_task(
    run: &SprintRun<'_>,
    job: &TaskJob,
    work_tree: &Path,
    recorder: &dyn TaskRecorder,
) -> Result<TaskHandback, SprintError> {
    let layout = SprintLayout::new(run.project_root, &run.file.sprint.name);
    let mut state = SprintState::fresh(run.file, &(run.options.now)());
    let Some(i) = state.tasks.iter().position(|t| t.id == job.task) else {
        return Err(SprintError::Io {
            path: state.sprint_file.clone(),
            source: std::io::Error::other(format!("the sprint file has no task {}", job.task)),
        });
    };
    if let Some(t) = state.tasks.get_mut(i) {
        t.clone_from(&job.resume);
        t.task_branch = Some(job.branch.clone());
    }
    let ctx = Context {
        run,
        layout: layout.clone(),
        git: Git {
            runner: run.commands,
            cwd: work_tree.to_path_buf(),
            cancel: &run.cancel,
            env: run.options.git_env.clone(),
            known: crate::git::Known::default(),
        },
        work_tree: work_tree.to_path_buf(),
        branch: job.branch.clone(),
        shared: Some((recorder, i)),
        share: job.max_cost_usd,
    };
    let Some(mut cursor) = TaskCursor::new(&ctx, &mut state, i) else {
        return Err(SprintError::Io {
            path: layout.task_dir(&job.task),
            source: std::io::Error::other(format!("the sprint file has no task {}", job.task)),
        });
    };
    let end = match cursor.run(&job.run_id).await? {
        Next::Pause(end) => TaskEnd::Paused(end),
        Next::Continue | Next::Finished => TaskEnd::Finished,
    };
    let task = state.tasks.swap_remove(i);
    let head = if task.status == TaskStatus::Done {
        task.commit.clone()
    } else {
        None
    };
    Ok(TaskHandback {
        end,
        head,
        state: task,
        record: layout.task_dir(&job.task),
    })
}

/// What every role of the flow works with: the run, the record, git in the work tree and the
/// branch it must stay on, and where a save of the state goes.
struct Context<'r, 'a> {
    run: &'r SprintRun<'a>,
    layout: SprintLayout,
    git: Git<'r>,
    work_tree: PathBuf,
    /// The branch the work tree must stay on: the sprint's, or a parallel task's own.
    branch: String,
    /// In a parallel run's task: where its steps are recorded (the coordinator, the one
    /// writer of `sprint.json`, or a worker's record) and this task's index; a save hands
    /// the task's entry to it.
    shared: Option<(&'r dyn TaskRecorder, usize)>,
    /// A remote task's part of the sprint's spend cap ([`TaskJob::max_cost_usd`]).
    share: Option<f64>,
}

impl<'r, 'a> Context<'r, 'a> {
    async fn new(run: &'r SprintRun<'a>) -> Result<Self, SprintError> {
        let mut git = Git {
            runner: run.commands,
            cwd: run.project_root.to_path_buf(),
            cancel: &run.cancel,
            env: run.options.git_env.clone(),
            known: crate::git::Known::default(),
        };
        let work_tree = git.top().await?;
        git.cwd.clone_from(&work_tree);
        Ok(Context {
            run,
            layout: SprintLayout::new(run.project_root, &run.file.sprint.name),
            git,
            work_tree,
            branch: run.file.sprint.branch.clone(),
            shared: None,
            share: None,
        })
    }

    fn file(&self) -> &'a SprintFile {
        self.run.file
    }

    fn now(&self) -> String {
        (self.run.options.now)()
    }

    fn emit(&self, event: SprintEvent) {
        self.run.events.event(&event);
    }

    /// Writes the state, waiting for the disk only when it announces what must not be done
    /// twice ([`SprintState::durability`]): every step's state is there for a `kill -9`
    /// either way.
    fn save(&self, state: &mut SprintState) -> Result<(), SprintError> {
        state.updated_at = self.now();
        match self.shared {
            None => write_state_as(&self.layout.state_file(), state, state.durability())?,
            Some((recorder, i)) => {
                if let Some(mine) = state.tasks.get(i) {
                    recorder.record(mine)?;
                }
            }
        }
        Ok(())
    }
}

/// The summary of `state`, ended by `end`.
fn summarize(state: &SprintState, end: SprintEnd) -> SprintSummary {
    {
        let mut usage = RoleUsage::default();
        let tasks = state
            .tasks
            .iter()
            .map(|t| {
                usage.add(&t.usage);
                TaskSummary {
                    roll_up: UsageRollUp::of_task(t),
                    id: t.id.clone(),
                    status: t.status,
                    rounds: t.round,
                    commit: t.commit.clone(),
                    attribution: t.attribution,
                    reason: t.reason.clone(),
                    warnings: t.warnings.clone(),
                    usage: t.usage,
                }
            })
            .collect();
        SprintSummary {
            end,
            exit_code: end.exit_code(),
            tasks,
            usage,
            roll_up: Box::new(state.usage()),
        }
    }
}

mod branch;
mod budget;
mod check;
mod commit;
mod coordinator;
mod disk;
mod driver;
mod evaluate;
mod failure;
mod fold;
mod generate;
mod handover;
mod learnings;
mod police;
mod protect;
mod review;
mod task;
mod wave;

use task::TaskCursor;

pub(crate) use protect::glob_matches;

pub use coordinator::JOB_LOG_FILE;
pub use fold::{ALREADY_ON_BRANCH, FOLD_CHECK_FILE, SENT_HOME_PATCH_FILE};
pub use protect::PROTECTED_FILE;

fn progress_mut(state: &mut SprintState, i: usize) -> Option<&mut TaskProgress> {
    state.tasks.get_mut(i).and_then(|t| t.progress.as_mut())
}

/// Whether the sprint must stop after `report`: cancelled, or rate-limit retries used up.
///
/// A spawn that ended while the run was being cancelled is not judged, whatever its outcome:
/// its CLI may have died of the same signal before Corral stopped it (a Ray job's stop signals
/// every process of the job's tree), and a round judged failed for that would be counted and
/// not resumed.
fn pause_for(report: &SpawnReport, cancel: &CancellationToken) -> Option<SprintEnd> {
    if cancel.is_cancelled() {
        return Some(SprintEnd::Cancelled);
    }
    match (report.outcome, report.error.as_ref().map(|e| e.class)) {
        (Outcome::Cancelled, _) | (_, Some(ErrorClass::Cancelled)) => Some(SprintEnd::Cancelled),
        (Outcome::RateLimited, _) => Some(SprintEnd::RateLimited),
        (
            Outcome::Succeeded
            | Outcome::Recovered
            | Outcome::ModelUnavailable
            | Outcome::StaleSession
            | Outcome::Crashed
            | Outcome::IdleTimeout
            | Outcome::WallTimeout
            | Outcome::SpawnFailed
            | Outcome::NotStarted
            | Outcome::Refused
            | Outcome::LimitExceeded,
            _,
        ) => None,
    }
}

/// The session a generator stopped with the sprint left behind, when this agent can resume
/// it: same provider (role-meta.json), same model and working directory (session.json).
fn crash_resumable(dir: &Path, agent: &dyn RoleAgent, work_tree: &Path) -> Option<SessionId> {
    if !agent.resumes() {
        return None;
    }
    let session = read_session_id(&dir.join(SESSION_ID_FILE)).ok().flatten()?;
    let meta: RoleMeta =
        serde_json::from_slice(&read_untrusted_file(&dir.join(ROLE_META_FILE), 64 * 1024).ok()?)
            .ok()?;
    let record: serde_json::Value =
        serde_json::from_slice(&read_untrusted_file(&dir.join(SESSION_META_FILE), 64 * 1024).ok()?)
            .ok()?;
    let model = record.get("model").and_then(serde_json::Value::as_str);
    let cwd = record.get("cwd").and_then(serde_json::Value::as_str)?;
    let same_cwd = Path::new(cwd) == work_tree
        || std::fs::canonicalize(cwd).ok() == std::fs::canonicalize(work_tree).ok();
    // The session's own record names the CLI that made it: with failover, a spawn started on
    // one provider (role-meta.json) may have been handed to the next.
    let made_by = record.get("provider").and_then(serde_json::Value::as_str);
    let same_provider =
        meta.provider == agent.provider() && made_by.is_none_or(|p| p == agent.provider().as_str());
    (same_provider && model == agent.model() && same_cwd).then_some(session)
}

/// The provider that made the session recorded in spawn directory `dir` (its `session.json`),
/// when it can be read.
fn session_provider(dir: &Path) -> Option<ProviderId> {
    let record: serde_json::Value =
        serde_json::from_slice(&read_untrusted_file(&dir.join(SESSION_META_FILE), 64 * 1024).ok()?)
            .ok()?;
    let name = record.get("provider").and_then(serde_json::Value::as_str)?;
    ProviderId::ALL.into_iter().find(|p| p.as_str() == name)
}

fn critique_of(evaluation: &Evaluation, round: u32) -> String {
    let mut out = format!("The review of round {round} failed it:\n");
    for d in evaluation.failed_dimensions() {
        out.push_str(&format!(
            "- {}: {}\n",
            d.name,
            d.finding.as_deref().unwrap_or("failed")
        ));
    }
    for c in evaluation.failed_criteria() {
        out.push_str(&format!(
            "- criterion {}: {}\n",
            c.name,
            c.finding.as_deref().unwrap_or("failed")
        ));
    }
    // The evaluator's own summary (seed 002's `critique`), when it wrote one.
    if let Some(critique) = evaluation
        .critique
        .as_deref()
        .map(str::trim)
        .filter(|c| !c.is_empty())
    {
        out.push_str(&format!("\nThe reviewer's critique: {critique}\n"));
    }
    out
}

fn commit_message(task: &Task, signals: &[Signal], run_id: &str) -> String {
    let proposed = signals.iter().find_map(|s| {
        if let Signal::CommitMessage(m) = s {
            Some(m)
        } else {
            None
        }
    });
    let message = match proposed {
        Some(m) => match m.body.as_deref().map(str::trim).filter(|b| !b.is_empty()) {
            Some(body) => format!("{}\n\n{body}\n", m.subject.trim()),
            None => format!("{}\n", m.subject.trim()),
        },
        None => format!("{}\n", task.title.trim()),
    };
    // What the agent wrote is shown raw by `git log | cat`: nothing in it may act on a terminal.
    let mut message = crate::inert::inert(&message);
    message.push_str(&format!(
        "\nCorral-Task: {}\nCorral-Run: {run_id}\n",
        task.id
    ));
    message
}

/// The valid report a spawn of this task left in `dir`, when Corral's own state says that it
/// started this spawn (`round`, `role`) there, in the directory it had just made anew: a
/// report found without that record is not one (another agent could have written it first),
/// and the spawn runs, in a directory made anew.
fn earlier_report(
    progress: &TaskProgress,
    round: u32,
    role: Role,
    dir: &Path,
    contract: &Contract,
) -> Option<corral_contract::ValidatedSignals> {
    let mine = crate::state::SpawnMark { round, role };
    if progress.spawned != Some(mine) {
        return None;
    }
    validate_signals_file(&dir.join(SIGNALS_FILE), contract).ok()
}

fn describe_end(end: CommandEnd) -> String {
    match end {
        CommandEnd::Exited(code) => format!("exit {code}"),
        CommandEnd::Signalled(signal) => format!("signal {signal}"),
        CommandEnd::TimedOut => "timed out".to_string(),
        CommandEnd::Cancelled => "cancelled".to_string(),
        // The check's report is what the generator's next round reads: it names the limit.
        CommandEnd::LimitExceeded(exceeded) => {
            format!("stopped at its {exceeded}: the command and all it started were ended")
        }
    }
}

fn short(commit: &str) -> &str {
    commit.get(..12).unwrap_or(commit)
}

/// Makes sure git ignores Corral's state (`.corral/`): a `.gitignore` holding `*` in it, as
/// `corral run` writes for its runs; an existing one is left alone.
fn ignore_state_dir(project_root: &Path) -> Result<(), SprintError> {
    let dir = corral_hostfs::HostDir::open(project_root)?.create_dir(crate::layout::STATE_DIR)?;
    match dir.kind(".gitignore")? {
        Some(corral_hostfs::EntryKind::File) => Ok(()),
        // Nothing, or something planted in its place: Corral's own file, made anew.
        None | Some(corral_hostfs::EntryKind::Dir | corral_hostfs::EntryKind::Other(_)) => {
            dir.remove(".gitignore")?;
            Ok(dir.write_new(
                ".gitignore",
                b"# Written by corral: its run records stay out of git.\n*\n",
            )?)
        }
    }
}

#[cfg(test)]
mod critique_tests {
    use corral_contract::{Criterion, Dimension, Evaluation, EvaluationStatus, Timestamp};

    #[test]
    fn the_critique_names_failed_criteria_and_the_reviewers_summary() {
        let Ok(timestamp) = Timestamp::parse("2026-12-07T10:00:00Z") else {
            panic!("a valid timestamp");
        };
        let criterion = |name: &str, passed: bool, applicable: Option<bool>| Criterion {
            name: name.to_owned(),
            passed,
            finding: (!passed).then(|| format!("{name} is not met")),
            applicable,
            execution_evidence: None,
        };
        let evaluation = Evaluation {
            timestamp,
            status: EvaluationStatus::Failed,
            dimensions: vec![Dimension {
                name: "correctness".into(),
                passed: true,
                finding: None,
            }],
            criteria: vec![
                criterion("Dates parse", false, None),
                criterion("Works on Windows", false, Some(false)),
            ],
            critique: Some("Parse the offset too.".into()),
        };
        let critique = super::critique_of(&evaluation, 1);
        assert!(
            critique.contains("- criterion Dates parse: Dates parse is not met"),
            "{critique}"
        );
        assert!(!critique.contains("Windows"), "{critique}");
        assert!(
            critique.contains("The reviewer's critique: Parse the offset too."),
            "{critique}"
        );
    }
}
