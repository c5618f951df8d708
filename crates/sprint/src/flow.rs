//! `corral sprint run`: the flow that takes a sprint's tasks, one by one, through generator
//! and evaluator rounds gated by its check, and commits each task that passes.
//!
//! Every step is written to `sprint.json` (atomically) before the next one starts, and every
//! spawn's directory is set up before the spawn, so that the sprint killed at any moment and
//! run again goes on at the same task, round and step: a round whose signals validated is not
//! run again, the generator's session is resumed when provider, model and cwd match, a round
//! is counted once, and a commit already made is found by its `Corral-Task:` trailer instead
//! of being made again.

use std::path::{Path, PathBuf};
use std::time::Duration;

use corral_contract::{
    Contract, Evaluation, EvaluationStatus, Signal, read_session_id, read_untrusted_file,
    render_evaluation_md, validate_signals_file,
};
use corral_ports::{
    CancellationToken, CommandEnd, CommandRunner, CommandSpec, ErrorClass, Outcome, SessionId,
};

use crate::agent::{RoleAgent, SpawnReport, SpawnRequest, SpawnVerdict};
use crate::error::SprintError;
use crate::event::{EventSink, SprintEnd, SprintEvent, SprintSummary, TaskSummary};
use crate::executor::{TaskEnd, TaskExecutor, TaskHandback, TaskJob, TaskRecorder};
use crate::file::{Gate, SprintFile, Task};
use crate::git::{Git, GitError};
use crate::layout::{
    EVALUATION_FILE, LEARNINGS_FILE, ROLE_META_FILE, Role, RoleMeta, SESSION_ID_FILE,
    SESSION_META_FILE, SIGNALS_FILE, SprintLayout,
};
use crate::prompt::{self, ShownLearning};
use crate::state::{
    Attribution, RoleUsage, RunProgress, SprintState, StateError, Step, TaskProgress, TaskStatus,
    UsageRollUp, read_state, write_state_as,
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
/// The largest `learnings.ndjson` read, in bytes.
const LEARNINGS_LIMIT: u64 = 4 * 1024 * 1024;
/// The most learnings a prompt shows (the latest).
const LEARNINGS_SHOWN: usize = 50;

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
pub async fn run_sprint(run: SprintRun<'_>) -> Result<SprintSummary, SprintError> {
    // Held to the end of the run, whatever its end: one sprint at a time per repository.
    // (A cancel during the lock's git command is a stop like any other, below.)
    let (result, _lock) = match crate::lock::lock_repository(&run).await {
        Ok(lock) => {
            let result = match Flow::new(&run).await {
                Ok(flow) => flow.run().await,
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
    let flow = Flow {
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
    };
    let end = match flow.run_task(&mut state, i, &job.run_id).await? {
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

struct Flow<'r, 'a> {
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
}

impl<'r, 'a> Flow<'r, 'a> {
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
        Ok(Flow {
            run,
            layout: SprintLayout::new(run.project_root, &run.file.sprint.name),
            git,
            work_tree,
            branch: run.file.sprint.branch.clone(),
            shared: None,
        })
    }

    fn file(&self) -> &SprintFile {
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

    async fn run(&self) -> Result<SprintSummary, SprintError> {
        ignore_state_dir(self.run.project_root)?;
        let mut state = self.load_state()?;
        let resumed = state.run.is_some();
        let run_id = state
            .run
            .get_or_insert_with(|| RunProgress {
                run_id: self.run.options.run_id.clone(),
                setup_done: false,
            })
            .run_id
            .clone();
        self.emit(SprintEvent::SprintStarted {
            name: self.file().sprint.name.to_string(),
            branch: self.file().sprint.branch.clone(),
            run_id: run_id.clone(),
            resumed,
        });
        self.refuse_users_branch(resumed).await?;
        self.settle_fold(&state).await?;
        self.preflight(&state).await?;
        self.save(&mut state)?;
        if !state.run.as_ref().is_some_and(|r| r.setup_done) {
            self.setup().await?;
            if let Some(progress) = state.run.as_mut() {
                progress.setup_done = true;
            }
            self.save(&mut state)?;
        }
        if (self.run.options.jobs > 1 || self.run.executor.is_remote())
            && let Some(end) = self.run_waves(&mut state, &run_id).await?
        {
            return Ok(self.summary(&state, end));
        }
        for i in 0..state.tasks.len() {
            if self.run.cancel.is_cancelled() {
                return Ok(self.summary(&state, SprintEnd::Cancelled));
            }
            match state.tasks.get(i).map(|t| t.status) {
                Some(TaskStatus::Pending | TaskStatus::Running) => {}
                Some(TaskStatus::Done | TaskStatus::Blocked | TaskStatus::Skipped) | None => {
                    continue;
                }
            }
            if self.skip_if_dependency_failed(&mut state, i)? {
                continue;
            }
            match self.run_task(&mut state, i, &run_id).await? {
                Next::Pause(end) => return Ok(self.summary(&state, end)),
                Next::Finished | Next::Continue => {}
            }
        }
        let end = if state.tasks.iter().all(|t| t.status == TaskStatus::Done) {
            SprintEnd::Done
        } else {
            SprintEnd::Blocked
        };
        Ok(self.summary(&state, end))
    }

    /// The state on disk, fitted to the sprint file (a task added to the file since is
    /// pending; one removed is dropped), or a fresh one.
    fn load_state(&self) -> Result<SprintState, SprintError> {
        let fresh = SprintState::fresh(self.file(), &self.now());
        match read_state(&self.layout.state_file()) {
            Ok(old) => {
                let mut state = fresh;
                state.started_at = old.started_at.clone();
                state.run = old.run.clone();
                for task in &mut state.tasks {
                    if let Some(known) = old.tasks.iter().find(|t| t.id == task.id) {
                        *task = known.clone();
                    }
                }
                Ok(state)
            }
            Err(StateError::Missing { .. }) => Ok(fresh),
            Err(e) => Err(e.into()),
        }
    }

    async fn preflight(&self, state: &SprintState) -> Result<(), SprintError> {
        // A task left running by a stopped sprint left its changes in the tree: they are the
        // sprint's own, not the user's.
        let continuing = state.tasks.iter().any(|t| t.status == TaskStatus::Running);
        let dirty = self.git.dirty_paths().await?;
        if !dirty.is_empty() && !continuing {
            match self.run.options.dirty {
                DirtyTree::Refuse => return Err(SprintError::Dirty { paths: dirty }),
                DirtyTree::Keep => self.emit(SprintEvent::DirtyTree {
                    paths: dirty,
                    action: "kept".to_string(),
                }),
                DirtyTree::Stash => {
                    let message = format!("corral sprint {}", self.file().sprint.name);
                    self.git
                        .run(&[
                            "stash",
                            "push",
                            "--include-untracked",
                            "--message",
                            &message,
                        ])
                        .await?;
                    self.emit(SprintEvent::DirtyTree {
                        paths: dirty,
                        action: "stashed".to_string(),
                    });
                }
            }
        }
        let branch = &self.file().sprint.branch;
        if self.git.branch().await?.as_deref() != Some(branch.as_str()) {
            let created = !self.git.branch_exists(branch).await?;
            if created {
                self.git.run(&["checkout", "--quiet", "-b", branch]).await?;
            } else {
                self.git.run(&["checkout", "--quiet", branch]).await?;
            }
            self.emit(SprintEvent::Branch {
                branch: branch.clone(),
                created,
            });
        }
        Ok(())
    }

    async fn setup(&self) -> Result<(), SprintError> {
        self.setup_in(&self.work_tree).await
    }

    /// Runs `setup` (if the sprint has one) in `work_tree`.
    async fn setup_in(&self, work_tree: &Path) -> Result<(), SprintError> {
        let Some(command) = &self.file().sprint.setup else {
            return Ok(());
        };
        let timeout = Duration::from_millis(self.file().sprint.check_timeout_ms);
        let mut spec = CommandSpec::shell(command, work_tree, timeout);
        spec.read_only = vec![self.layout.state_root()];
        self.git.forget();
        let out = self
            .run
            .commands
            .run(spec, &self.run.cancel)
            .await
            .map_err(|source| SprintError::Command {
                command: command.clone(),
                source,
            })?;
        self.emit(SprintEvent::Setup {
            passed: out.success(),
        });
        if out.success() {
            Ok(())
        } else {
            Err(SprintError::SetupFailed {
                command: command.clone(),
                end: describe_end(out.end),
                output: prompt::cut(
                    &format!("{}{}", out.stdout.text, out.stderr.text),
                    prompt::PROMPT_OUTPUT_LIMIT,
                )
                .to_string(),
            })
        }
    }

    fn skip_if_dependency_failed(
        &self,
        state: &mut SprintState,
        i: usize,
    ) -> Result<bool, SprintError> {
        let Some(task) = state.tasks.get(i).and_then(|t| self.file().task(&t.id)) else {
            return Ok(false);
        };
        let failed = task.depends_on.iter().find_map(|dep| {
            state
                .tasks
                .iter()
                .find(|t| &t.id == dep)
                .filter(|t| matches!(t.status, TaskStatus::Blocked | TaskStatus::Skipped))
                .map(|t| (dep.clone(), t.status))
        });
        let Some((dep, status)) = failed else {
            return Ok(false);
        };
        let reason = format!("it depends on {dep}, which is {}", status.as_str());
        self.end_without_commit(state, i, task, TaskStatus::Skipped, reason)?;
        Ok(true)
    }

    async fn run_task(
        &self,
        state: &mut SprintState,
        i: usize,
        run_id: &str,
    ) -> Result<Next, SprintError> {
        let Some(id) = state.tasks.get(i).map(|t| t.id.clone()) else {
            return Ok(Next::Finished);
        };
        let Some(task) = self.file().task(&id) else {
            return Ok(Next::Finished);
        };
        let fresh = state
            .tasks
            .get(i)
            .is_some_and(|t| t.status == TaskStatus::Pending || t.progress.is_none());
        // The base: the commit the task before made, when nothing ran since.
        let head = if fresh {
            self.git.current_head().await?
        } else {
            String::new()
        };
        let Some(t) = state.tasks.get_mut(i) else {
            return Ok(Next::Finished);
        };
        if fresh {
            t.status = TaskStatus::Running;
            t.round = 1;
            t.attempt = 1;
            t.progress = Some(TaskProgress {
                base: head,
                step: Step::PreVerify,
                pre_passed: None,
                pre_failed_gates: Vec::new(),
                critique: None,
                regressions: 0,
                reset_pending: false,
                generator_session: None,
                spawned: None,
            });
        }
        let (round, step) = (
            t.round,
            t.progress.as_ref().map_or(Step::PreVerify, |p| p.step),
        );
        let reset = t
            .progress
            .as_ref()
            .filter(|p| p.reset_pending)
            .map(|p| p.base.clone());
        if fresh {
            // What an earlier sprint of the same name left for this task is not this run's:
            // a report found there would read as a round already done.
            // Removed through the record's handle: a link planted in it is removed, never
            // followed.
            let dir = self.layout.task_dir(&task.id);
            if let Some(rel) = self.layout.below_root(&dir) {
                self.layout.record()?.remove(rel)?;
            }
        }
        if let Some(base) = reset {
            self.git.reset_to(&base).await?;
            if let Some(p) = progress_mut(state, i) {
                p.reset_pending = false;
            }
        }
        self.save(state)?;
        self.emit(SprintEvent::TaskStarted {
            task: id.clone(),
            title: task.title.clone(),
            round,
            step,
        });
        // Only a task continued at its commit can have been committed by a run that stopped;
        // one that reached the commit in this run was policed to its base after every spawn.
        let mut continued = !fresh;
        loop {
            let Some(step) = state
                .tasks
                .get(i)
                .and_then(|t| t.progress.as_ref())
                .map(|p| p.step)
            else {
                return Ok(Next::Finished);
            };
            let result = match step {
                Step::PreVerify => self.pre_verify(state, i, task).await,
                Step::Generate => self.generate(state, i, task, run_id).await,
                Step::PostVerify => self.post_verify(state, i, task).await,
                Step::Evaluate => self.evaluate(state, i, task, run_id).await,
                Step::Commit => self.commit(state, i, task, run_id, continued).await,
            };
            let next = match (result, step) {
                (Ok(next), _) => next,
                // Something planted in the record during a round (possible only without a
                // sandbox): nothing was written through it, and the round fails, named.
                (
                    Err(SprintError::Record(e)),
                    Step::Generate | Step::PostVerify | Step::Evaluate,
                ) if e.is_tampering() => self.tampered_round(state, i, task, &e).await?,
                (Err(e), _) => return Err(e),
            };
            continued = false;
            match next {
                Next::Continue => {}
                Next::Finished => return Ok(Next::Finished),
                Next::Pause(end) => return Ok(Next::Pause(end)),
            }
        }
    }

    /// Runs the check and `gates`; `None` when cancelled.
    async fn verify(&self, gates: &[&Gate]) -> Result<Option<Verification>, SprintError> {
        let sprint = &self.file().sprint;
        let mut report = String::new();
        let mut passed = true;
        let mut check_passed = true;
        let mut failed_gates = Vec::new();
        let mut commands = vec![(None, sprint.check.as_str(), sprint.check_timeout_ms)];
        commands.extend(
            gates
                .iter()
                .map(|g| (Some(g.path.as_str()), g.command.as_str(), g.timeout_ms)),
        );
        for (gate, command, timeout_ms) in commands {
            self.git.forget();
            let mut spec =
                CommandSpec::shell(command, &self.work_tree, Duration::from_millis(timeout_ms));
            // The check runs code the agent wrote; Corral's record stays out of its reach.
            spec.read_only = vec![self.layout.state_root()];
            let out = self
                .run
                .commands
                .run(spec, &self.run.cancel)
                .await
                .map_err(|source| SprintError::Command {
                    command: command.to_string(),
                    source,
                })?;
            if out.end == CommandEnd::Cancelled {
                return Ok(None);
            }
            let ok = out.success();
            passed &= ok;
            match (gate, ok) {
                (Some(path), false) => failed_gates.push(path.to_string()),
                (None, false) => check_passed = false,
                (_, true) => {}
            }
            report.push_str(&format!(
                "$ {command}\n{}{}[{}]\n",
                out.stdout.text,
                out.stderr.text,
                describe_end(out.end)
            ));
        }
        Ok(Some(Verification {
            passed,
            check_passed,
            gates: gates.iter().map(|g| g.path.clone()).collect(),
            failed_gates,
            report,
        }))
    }

    async fn pre_verify(
        &self,
        state: &mut SprintState,
        i: usize,
        task: &Task,
    ) -> Result<Next, SprintError> {
        // Every gate, since the round's diff (which picks the gates after it) is not known
        // yet: the attribution compares each gate with itself.
        let gates: Vec<&Gate> = self.file().gates.iter().collect();
        // On the tree the task before just committed, after its passing check and nothing
        // else that could write a file (`git::Known`), the check's answer is known: it is
        // not run a second time on the same files. Not with gates: the round's check ran only
        // the gates its diff picked, and the pre-verify runs every one.
        let known = if gates.is_empty() {
            self.git.take_checked()
        } else {
            None
        };
        let v = match known {
            Some(report) => Verification {
                passed: true,
                check_passed: true,
                gates: Vec::new(),
                failed_gates: Vec::new(),
                report: format!(
                    "(the check after the task before, on the same tree: this task's base)\n{report}"
                ),
            },
            None => match self.verify(&gates).await? {
                Some(v) => v,
                None => return Ok(Next::Pause(SprintEnd::Cancelled)),
            },
        };
        write_file(
            &self.layout,
            &self.layout.task_dir(&task.id).join(PRE_VERIFY_FILE),
            v.report.as_bytes(),
        )?;
        if let Some(p) = progress_mut(state, i) {
            p.pre_passed = Some(v.check_passed);
            p.pre_failed_gates.clone_from(&v.failed_gates);
            p.step = Step::Generate;
        }
        self.save(state)?;
        self.emit(SprintEvent::Verified {
            task: task.id.clone(),
            round: 0,
            step: Step::PreVerify,
            passed: v.passed,
            gates: v.gates,
            attribution: None,
        });
        Ok(Next::Continue)
    }

    async fn generate(
        &self,
        state: &mut SprintState,
        i: usize,
        task: &Task,
        run_id: &str,
    ) -> Result<Next, SprintError> {
        let Some(t) = state.tasks.get(i).cloned() else {
            return Ok(Next::Finished);
        };
        let Some(progress) = t.progress.clone() else {
            return Ok(Next::Finished);
        };
        self.fingerprint_protected(task, t.round).await?;
        let agent = self.run.generator;
        let dir = self.layout.spawn_dir(&task.id, t.round, Role::Generator);
        let contract = Contract::generator();
        let signals = if let Some(valid) =
            earlier_report(&progress, t.round, Role::Generator, &dir, &contract)
        {
            // The round ran to a valid report before the sprint stopped: not run again.
            self.emit(SprintEvent::SpawnFinished {
                task: task.id.clone(),
                round: t.round,
                role: Role::Generator,
                outcome: None,
                valid: true,
                usage: corral_ports::Usage::default(),
            });
            let session = read_session_id(&dir.join(SESSION_ID_FILE)).ok().flatten();
            if let Some(p) = progress_mut(state, i) {
                p.generator_session = session
                    .map(|s| s.to_string())
                    .or(p.generator_session.take());
            }
            Some(valid.into_signals())
        } else {
            let learnings = self.learnings_for(task);
            let brief = prompt::generator_brief(
                self.file(),
                task,
                t.round,
                &learnings,
                progress.critique.as_deref(),
            );
            let crashed = crash_resumable(&dir, agent, &self.work_tree);
            let previous = progress
                .generator_session
                .as_deref()
                .and_then(|s| SessionId::new(s).ok())
                .filter(|_| agent.resumes());
            let (prompt_text, cold, resume) = match (crashed, previous) {
                (Some(session), _) => (
                    prompt::generator_crash_resume(task, t.round),
                    Some(brief),
                    Some(session),
                ),
                (None, Some(session)) if t.round > 1 => (
                    prompt::generator_next_round(task, t.round, progress.critique.as_deref()),
                    Some(brief),
                    Some(session),
                ),
                (None, _) => (brief, None, None),
            };
            let report = self
                .spawn(
                    state,
                    i,
                    Role::Generator,
                    agent,
                    SpawnRequest {
                        role: Role::Generator,
                        dir: dir.clone(),
                        work_tree: self.work_tree.clone(),
                        prompt: prompt_text,
                        cold_prompt: cold,
                        resume,
                        contract,
                        read_only: false,
                        run_id: run_id.to_string(),
                    },
                )
                .await?;
            if let Some(end) = pause_for(&report, &self.run.cancel) {
                return Ok(Next::Pause(end));
            }
            if let (Some(p), Some(session)) = (progress_mut(state, i), &report.session_id) {
                p.generator_session = Some(session.to_string());
            }
            match report.verdict {
                SpawnVerdict::Valid { signals } => Some(signals),
                SpawnVerdict::Invalid { reason } => {
                    let critique =
                        format!("Round {} ended without a valid report: {reason}", t.round);
                    self.save(state)?;
                    return self.next_round(state, i, task, critique).await;
                }
                SpawnVerdict::NotChecked => {
                    let why = report.error.as_ref().map_or_else(
                        || report.outcome.as_str().to_string(),
                        |e| e.message.clone(),
                    );
                    let critique = format!("Round {} ended before a report: {why}", t.round);
                    self.save(state)?;
                    return self.next_round(state, i, task, critique).await;
                }
            }
        };
        if let Some(next) = self.police(state, i, task, Role::Generator).await? {
            return Ok(next);
        }
        let blocked = signals.iter().flatten().find_map(|s| {
            if let Signal::TaskBlocked(b) = s {
                Some(b.reason.clone())
            } else {
                None
            }
        });
        if let Some(reason) = blocked {
            return self
                .block(
                    state,
                    i,
                    task,
                    format!("the generator reported it blocked: {reason}"),
                )
                .await;
        }
        if let Some(p) = progress_mut(state, i) {
            p.step = Step::PostVerify;
        }
        self.save(state)?;
        Ok(Next::Continue)
    }

    /// Writes `role-meta.json`, runs one spawn, and counts its usage.
    async fn spawn(
        &self,
        state: &mut SprintState,
        i: usize,
        role: Role,
        agent: &dyn RoleAgent,
        request: SpawnRequest,
    ) -> Result<SpawnReport, SprintError> {
        let Some(t) = state.tasks.get(i) else {
            return Err(SprintError::Io {
                path: request.dir,
                source: std::io::Error::other("no such task"),
            });
        };
        let (id, round, attempt) = (t.id.clone(), t.round, t.attempt);
        self.fresh_spawn_dir(&request.dir)?;
        // Recorded before the spawn: from now on, what is in its directory is its own.
        if let Some(p) = progress_mut(state, i) {
            p.spawned = Some(crate::state::SpawnMark { round, role });
        }
        self.save(state)?;
        let meta = RoleMeta {
            role,
            provider: agent.provider(),
            model: agent.model().map(str::to_string),
            effort: agent.effort(),
            attempt,
            round,
            started_at: self.now(),
        };
        let meta_path = request.dir.join(ROLE_META_FILE);
        let json = serde_json::to_vec_pretty(&meta).map_err(|e| SprintError::Io {
            path: meta_path.clone(),
            source: std::io::Error::other(e),
        })?;
        write_file(&self.layout, &meta_path, &json)?;
        self.emit(SprintEvent::SpawnStarted {
            task: id.clone(),
            round,
            role,
            provider: agent.provider(),
            model: agent.model().map(str::to_string),
            resumes: request.resume.is_some(),
        });
        let observer = self.run.events.observer(&id, round, role);
        self.git.forget();
        let report = agent
            .spawn(request, self.run.cancel.clone(), observer)
            .await;
        if let Some(t) = state.tasks.get_mut(i) {
            let mut usage = RoleUsage::default();
            match role {
                Role::Generator => usage.generator = report.usage,
                Role::Evaluator => usage.evaluator = report.usage,
            }
            t.usage.add(&usage);
            t.usage_by_provider
                .entry(agent.provider())
                .or_default()
                .add(&report.usage);
            // Not undone, and not blocking: Corral cannot take back a write outside the tree
            // (the sandbox, when there is one, refuses it); it is named for the user to look at.
            if !report.stray_writes.is_empty() {
                let message = format!(
                    "round {round}: the {role} wrote outside the paths it may write: {}",
                    report.stray_writes.join("; ")
                );
                t.warnings.push(message.clone());
                self.emit(SprintEvent::Warning {
                    task: id.clone(),
                    message,
                });
            }
        }
        self.save(state)?;
        self.emit(SprintEvent::SpawnFinished {
            task: id,
            round,
            role,
            outcome: Some(report.outcome),
            valid: matches!(report.verdict, SpawnVerdict::Valid { .. }),
            usage: report.usage,
        });
        Ok(report)
    }

    /// Makes a spawn's directory anew, just before the spawn: what an earlier spawn of the same
    /// round and role left there (a crash, a report that did not validate) is moved aside to
    /// `<role>.earlier-<n>` (kept for the record; its session was read before), so nothing in
    /// the spawn's directory predates it. Through the record's handle: a link is moved, never
    /// followed.
    fn fresh_spawn_dir(&self, dir: &Path) -> Result<(), SprintError> {
        let Some(rel) = self.layout.below_root(dir) else {
            return Err(SprintError::Io {
                path: dir.to_path_buf(),
                source: std::io::Error::other("not in the sprint's record"),
            });
        };
        let record = self.layout.record()?;
        if record.kind(rel)?.is_some() {
            let name = rel.file_name().map(|n| n.to_string_lossy().into_owned());
            let name = name.unwrap_or_default();
            let mut n = 1;
            let aside = loop {
                let aside = rel.with_file_name(format!("{name}.earlier-{n}"));
                if record.kind(&aside)?.is_none() {
                    break aside;
                }
                n += 1;
            };
            record.rename(rel, &aside)?;
        }
        record.fresh_dir(rel)?;
        Ok(())
    }

    /// Finds what an agent must not have done: switched the branch (the task is blocked, its
    /// change saved, the sprint's branch checked out again) or committed (its commits are
    /// undone, their changes kept for the task's own commit). Either is named in the status.
    async fn police(
        &self,
        state: &mut SprintState,
        i: usize,
        task: &Task,
        role: Role,
    ) -> Result<Option<Next>, SprintError> {
        let Some(base) = state
            .tasks
            .get(i)
            .and_then(|t| t.progress.as_ref())
            .map(|p| p.base.clone())
        else {
            return Ok(None);
        };
        let branch = &self.branch;
        let (now_on, head) = self.git.branch_and_head().await?;
        if now_on.as_deref() != Some(branch.as_str()) {
            let message = format!(
                "the {role} switched from {branch} to {}",
                now_on
                    .as_deref()
                    .map_or("a detached HEAD".to_string(), |b| format!("branch {b}"))
            );
            self.warn(state, i, task, &message)?;
            let patch = self.git.patch_against(&base).await?;
            write_file(
                &self.layout,
                &self.layout.task_dir(&task.id).join(BLOCKED_PATCH_FILE),
                patch.as_bytes(),
            )?;
            self.git
                .run(&["checkout", "--quiet", "--force", branch])
                .await?;
            self.git.reset_to(&base).await?;
            return Ok(Some(self.finish_blocked(state, i, task, message)?));
        }
        if head != base {
            let message = format!(
                "the {role} committed on its own ({}); Corral undid the commit and kept its change",
                short(&head)
            );
            self.warn(state, i, task, &message)?;
            self.git.run(&["reset", "--soft", "--quiet", &base]).await?;
        }
        Ok(None)
    }

    fn warn(
        &self,
        state: &mut SprintState,
        i: usize,
        task: &Task,
        message: &str,
    ) -> Result<(), SprintError> {
        if let Some(t) = state.tasks.get_mut(i) {
            t.warnings.push(message.to_string());
        }
        self.save(state)?;
        self.emit(SprintEvent::Warning {
            task: task.id.clone(),
            message: message.to_string(),
        });
        Ok(())
    }

    async fn post_verify(
        &self,
        state: &mut SprintState,
        i: usize,
        task: &Task,
    ) -> Result<Next, SprintError> {
        let Some(t) = state.tasks.get(i).cloned() else {
            return Ok(Next::Finished);
        };
        let Some(progress) = t.progress.clone() else {
            return Ok(Next::Finished);
        };
        // Before any check: the check must run the version the round did not write.
        if let Some(next) = self.guard_protected(state, i, task).await? {
            return Ok(next);
        }
        let round_dir = self.layout.round_dir(&task.id, t.round);
        // The paths only choose the gates. Without gates the change is staged after the
        // check, so that nothing runs between staging and the commit or the reset (see
        // `git::Known`): the commit needs no second `git add`, the reset no `git clean`.
        let before_check = if self.file().gates.is_empty() {
            None
        } else {
            Some(self.git.diff_against(&progress.base).await?)
        };
        let paths = before_check.as_ref().map_or(&[][..], |(_, p)| p.as_slice());
        let gates: Vec<&Gate> = self
            .file()
            .gates
            .iter()
            .filter(|g| paths.iter().any(|p| g.applies_to(p)))
            .collect();
        let Some(v) = self.verify(&gates).await? else {
            return Ok(Next::Pause(SprintEnd::Cancelled));
        };
        if self.file().gates.is_empty() && v.passed {
            self.git.checked(v.report.clone());
        }
        let patch = match before_check {
            Some((patch, _)) => patch,
            None => self.git.patch_against(&progress.base).await?,
        };
        write_file(
            &self.layout,
            &round_dir.join(crate::flow::DIFF_FILE),
            patch.as_bytes(),
        )?;
        self.save_changed_paths(&round_dir, &progress.base, &patch)
            .await?;
        write_file(
            &self.layout,
            &round_dir.join(CHECK_FILE),
            v.report.as_bytes(),
        )?;
        let pre = progress.pre_passed.unwrap_or(true)
            && !v
                .gates
                .iter()
                .any(|g| progress.pre_failed_gates.contains(g));
        let attribution = Attribution::of(pre, v.passed);
        if let Some(t) = state.tasks.get_mut(i) {
            t.attribution = Some(attribution);
        }
        self.emit(SprintEvent::Verified {
            task: task.id.clone(),
            round: t.round,
            step: Step::PostVerify,
            passed: v.passed,
            gates: v.gates,
            attribution: Some(attribution),
        });
        match attribution {
            // `BrokeOnFold` is the fold's, never a round's (`Attribution::of`): were it met
            // here, it failed, and is treated as the failure it is.
            Attribution::Regressed | Attribution::BrokeOnFold => {
                let saved = round_dir.join(REGRESSED_PATCH_FILE);
                write_file(&self.layout, &saved, patch.as_bytes())?;
                let attempts = if let Some(t) = state.tasks.get_mut(i) {
                    t.attempt += 1;
                    if let Some(p) = t.progress.as_mut() {
                        p.regressions += 1;
                    }
                    t.attempt
                } else {
                    0
                };
                if attempts > self.file().sprint.max_attempts {
                    // Blocking saves the change and resets the tree itself.
                    return self
                        .block(
                            state,
                            i,
                            task,
                            format!(
                                "round {} broke the check, and its attempts ({}) are used up",
                                t.round,
                                self.file().sprint.max_attempts
                            ),
                        )
                        .await;
                }
                let critique = format!(
                    "Your change in round {} made the check fail; it passed before the task. \
                     Corral saved the change to {} and put the tree back as it was at the \
                     task's start. The check's output:\n\n```text\n{}\n```",
                    t.round,
                    saved.display(),
                    prompt::cut(&v.report, prompt::PROMPT_OUTPUT_LIMIT).trim_end()
                );
                // The next round and the reset it needs are written down before the reset is
                // done: a kill in between resets on the next run, instead of judging the
                // broken tree again or counting the round twice.
                if let Some(p) = progress_mut(state, i) {
                    p.reset_pending = true;
                }
                let next = self.next_round(state, i, task, critique).await?;
                self.emit(SprintEvent::Regressed {
                    task: task.id.clone(),
                    round: t.round,
                    patch: saved.display().to_string(),
                });
                if let Some(p) = progress_mut(state, i).filter(|p| p.reset_pending) {
                    p.reset_pending = false;
                    self.git.reset_to(&progress.base).await?;
                    self.save(state)?;
                }
                Ok(next)
            }
            Attribution::Clean | Attribution::FixedBaseline | Attribution::BaselineBroken => {
                if let Some(p) = progress_mut(state, i) {
                    p.step = if self.run.evaluator.is_some() {
                        Step::Evaluate
                    } else {
                        Step::Commit
                    };
                }
                self.save(state)?;
                Ok(Next::Continue)
            }
        }
    }

    async fn evaluate(
        &self,
        state: &mut SprintState,
        i: usize,
        task: &Task,
        run_id: &str,
    ) -> Result<Next, SprintError> {
        let Some(t) = state.tasks.get(i).cloned() else {
            return Ok(Next::Finished);
        };
        let Some(agent) = self.run.evaluator else {
            if let Some(p) = progress_mut(state, i) {
                p.step = Step::Commit;
            }
            self.save(state)?;
            return Ok(Next::Continue);
        };
        let dir = self.layout.spawn_dir(&task.id, t.round, Role::Evaluator);
        let contract = Contract::evaluator();
        let reported = t
            .progress
            .as_ref()
            .and_then(|p| earlier_report(p, t.round, Role::Evaluator, &dir, &contract));
        let evaluation = if let Some(valid) = reported {
            self.emit(SprintEvent::SpawnFinished {
                task: task.id.clone(),
                round: t.round,
                role: Role::Evaluator,
                outcome: None,
                valid: true,
                usage: corral_ports::Usage::default(),
            });
            valid.evaluation().cloned()
        } else {
            let round_dir = self.layout.round_dir(&task.id, t.round);
            let diff_file = round_dir.join(DIFF_FILE);
            let diff = read_record_text(&self.layout, &diff_file);
            let changed = read_record_text(&self.layout, &round_dir.join(CHANGED_PATHS_FILE));
            let check = read_record_text(&self.layout, &round_dir.join(CHECK_FILE));
            let text = prompt::evaluator_prompt(
                task,
                t.round,
                &self.file().sprint.check,
                t.attribution.unwrap_or(Attribution::Clean),
                &check,
                &prompt::RoundDiff {
                    text: &diff,
                    file: &diff_file.display().to_string(),
                    changed_paths: &changed,
                },
            );
            let report = self
                .spawn(
                    state,
                    i,
                    Role::Evaluator,
                    agent,
                    SpawnRequest {
                        role: Role::Evaluator,
                        dir: dir.clone(),
                        work_tree: self.work_tree.clone(),
                        prompt: text,
                        cold_prompt: None,
                        resume: None,
                        contract,
                        read_only: true,
                        run_id: run_id.to_string(),
                    },
                )
                .await?;
            if let Some(end) = pause_for(&report, &self.run.cancel) {
                return Ok(Next::Pause(end));
            }
            match report.verdict {
                SpawnVerdict::Valid { signals } => signals.into_iter().find_map(|s| {
                    if let Signal::Evaluation(e) = s {
                        Some(e)
                    } else {
                        None
                    }
                }),
                SpawnVerdict::Invalid { .. } | SpawnVerdict::NotChecked => None,
            }
        };
        if let Some(next) = self.police(state, i, task, Role::Evaluator).await? {
            return Ok(next);
        }
        let Some(evaluation) = evaluation else {
            let critique = format!(
                "The review of round {} gave no valid evaluation; make sure the change does \
                 the whole task and the check passes.",
                t.round
            );
            return self.next_round(state, i, task, critique).await;
        };
        write_file(
            &self.layout,
            &dir.join(EVALUATION_FILE),
            render_evaluation_md(&evaluation).as_bytes(),
        )?;
        let passed = evaluation.status == EvaluationStatus::Passed;
        self.emit(SprintEvent::Evaluated {
            task: task.id.clone(),
            round: t.round,
            passed,
            failed: evaluation
                .failed_dimensions()
                .map(|d| d.name.clone())
                .collect(),
        });
        if passed {
            if let Some(p) = progress_mut(state, i) {
                p.step = Step::Commit;
            }
            self.save(state)?;
            Ok(Next::Continue)
        } else {
            self.next_round(state, i, task, critique_of(&evaluation, t.round))
                .await
        }
    }

    async fn commit(
        &self,
        state: &mut SprintState,
        i: usize,
        task: &Task,
        run_id: &str,
        continued: bool,
    ) -> Result<Next, SprintError> {
        let Some(t) = state.tasks.get(i).cloned() else {
            return Ok(Next::Finished);
        };
        let Some(progress) = t.progress.clone() else {
            return Ok(Next::Finished);
        };
        let signals = validate_signals_file(
            &self
                .layout
                .spawn_dir(&task.id, t.round, Role::Generator)
                .join(SIGNALS_FILE),
            &Contract::generator(),
        )
        .map(corral_contract::ValidatedSignals::into_signals)
        .unwrap_or_default();
        // A commit made before the sprint stopped is found, not made again.
        let made = if continued {
            self.git
                .commits_for_task(&progress.base, task.id.as_str())
                .await?
                .into_iter()
                .next()
        } else {
            None
        };
        let commit = match made {
            Some(commit) => commit,
            None => {
                if !self.git.staged() {
                    self.git.stage_all().await?;
                }
                let message = commit_message(task, &signals, run_id);
                self.git
                    .commit(&message, &self.layout.round_dir(&task.id, t.round))
                    .await?
            }
        };
        // A parallel task's learnings are the sprint's once it is folded (its one writer).
        if self.shared.is_none() {
            self.append_learnings(task, t.round, &signals)?;
        }
        if let Some(t) = state.tasks.get_mut(i) {
            t.status = TaskStatus::Done;
            t.commit = Some(commit.clone());
            t.reason = None;
            t.progress = None;
        }
        self.save(state)?;
        self.emit(SprintEvent::TaskFinished {
            task: task.id.clone(),
            status: TaskStatus::Done,
            commit: Some(commit),
            reason: None,
        });
        Ok(Next::Finished)
    }

    /// On to the next round with `critique`, or blocked when the rounds are used up.
    /// Fails the task's round for `tampering` found in the record: named in the task's
    /// warnings and the round's critique, then on to the next round (or blocked after the last).
    async fn tampered_round(
        &self,
        state: &mut SprintState,
        i: usize,
        task: &Task,
        tampering: &corral_hostfs::HostFsError,
    ) -> Result<Next, SprintError> {
        let round = state.tasks.get(i).map_or(0, |t| t.round);
        let message = format!("round {round} failed: tampering: {tampering}");
        self.warn(state, i, task, &message)?;
        let critique = format!(
            "Round {round} failed: Corral found something planted in its record ({tampering}). \
             Write only in the work tree and your own run directory."
        );
        self.next_round(state, i, task, critique).await
    }

    async fn next_round(
        &self,
        state: &mut SprintState,
        i: usize,
        task: &Task,
        critique: String,
    ) -> Result<Next, SprintError> {
        let max = self.file().sprint.max_rounds;
        let round = state.tasks.get(i).map_or(0, |t| t.round);
        if round >= max {
            let last = critique.lines().next().unwrap_or_default().to_string();
            return self
                .block(
                    state,
                    i,
                    task,
                    format!("{max} round(s) without passing; the last: {last}"),
                )
                .await;
        }
        if let Some(t) = state.tasks.get_mut(i) {
            t.round += 1;
            if let Some(p) = t.progress.as_mut() {
                p.critique = Some(critique);
                p.step = Step::Generate;
            }
        }
        self.save(state)?;
        Ok(Next::Continue)
    }

    /// Blocks the task: its change is saved as a patch and the tree put back as it was at the
    /// task's start, so that the tasks that do not depend on it start from a clean tree.
    async fn block(
        &self,
        state: &mut SprintState,
        i: usize,
        task: &Task,
        reason: String,
    ) -> Result<Next, SprintError> {
        if let Some(base) = state
            .tasks
            .get(i)
            .and_then(|t| t.progress.as_ref())
            .map(|p| p.base.clone())
        {
            let (patch, paths) = self.git.diff_against(&base).await?;
            if !paths.is_empty() {
                write_file(
                    &self.layout,
                    &self.layout.task_dir(&task.id).join(BLOCKED_PATCH_FILE),
                    patch.as_bytes(),
                )?;
            }
            self.git.reset_to(&base).await?;
        }
        self.finish_blocked(state, i, task, reason)
    }

    /// Ends task `i` as `status` (blocked or skipped) for `reason`: recorded, saved, told.
    fn end_without_commit(
        &self,
        state: &mut SprintState,
        i: usize,
        task: &Task,
        status: TaskStatus,
        reason: String,
    ) -> Result<(), SprintError> {
        if let Some(t) = state.tasks.get_mut(i) {
            t.status = status;
            t.reason = Some(reason.clone());
            t.progress = None;
        }
        self.save(state)?;
        self.emit(SprintEvent::TaskFinished {
            task: task.id.clone(),
            status,
            commit: None,
            reason: Some(reason),
        });
        Ok(())
    }

    fn finish_blocked(
        &self,
        state: &mut SprintState,
        i: usize,
        task: &Task,
        reason: String,
    ) -> Result<Next, SprintError> {
        self.end_without_commit(state, i, task, TaskStatus::Blocked, reason)?;
        Ok(Next::Finished)
    }

    /// Every learning of the tasks done so far, in the order they were learnt.
    fn learnings(&self) -> Vec<ShownLearning> {
        let Ok(Some(bytes)) = self
            .layout
            .record()
            .and_then(|r| r.read_if_exists(LEARNINGS_FILE, LEARNINGS_LIMIT))
        else {
            return Vec::new();
        };
        let text = String::from_utf8_lossy(&bytes);
        let all: Vec<ShownLearning> = text
            .lines()
            .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
            .filter_map(|v| {
                Some(ShownLearning {
                    task: v.get("task")?.as_str()?.to_string(),
                    text: v.get("text")?.as_str()?.to_string(),
                    applies_to: v
                        .get("appliesTo")
                        .and_then(serde_json::Value::as_str)
                        .map(str::to_string),
                })
            })
            .collect();
        all
    }

    /// The learnings `task`'s generator is shown: those that apply to it
    /// ([`prompt::applies_to_task`]), the latest [`LEARNINGS_SHOWN`]. The same on a Ray worker,
    /// which gets the coordinator's `learnings.ndjson`.
    fn learnings_for(&self, task: &Task) -> Vec<ShownLearning> {
        let all = self.learnings();
        let applying: Vec<ShownLearning> = all
            .into_iter()
            .filter(|l| prompt::applies_to_task(l, task))
            .collect();
        let skip = applying.len().saturating_sub(LEARNINGS_SHOWN);
        applying.into_iter().skip(skip).collect()
    }

    /// Appends the task's learnings to `learnings.ndjson`, unless a stopped run did already.
    fn append_learnings(
        &self,
        task: &Task,
        round: u32,
        signals: &[Signal],
    ) -> Result<(), SprintError> {
        if self.learnings().iter().any(|l| l.task == task.id.as_str()) {
            return Ok(());
        }
        let mut lines = String::new();
        for signal in signals {
            if let Signal::Learning(l) = signal {
                let line = serde_json::json!({
                    "task": task.id.as_str(),
                    "round": round,
                    "text": l.text,
                    "context": l.context,
                    "appliesTo": l.applies_to,
                    "at": l.timestamp.as_str(),
                });
                lines.push_str(&line.to_string());
                lines.push('\n');
            }
        }
        if lines.is_empty() {
            return Ok(());
        }
        Ok(self
            .layout
            .record()?
            .append(LEARNINGS_FILE, lines.as_bytes())?)
    }

    fn summary(&self, state: &SprintState, end: SprintEnd) -> SprintSummary {
        let summary = summarize(state, end);
        self.emit(SprintEvent::SprintFinished {
            summary: summary.clone(),
        });
        summary
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
mod disk;
mod protect;
mod review;
mod wave;

pub(crate) use protect::glob_matches;

pub use protect::PROTECTED_FILE;
pub use wave::{ALREADY_ON_BRANCH, FOLD_CHECK_FILE, JOB_LOG_FILE, SENT_HOME_PATCH_FILE};

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
            | Outcome::Refused,
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
    (meta.provider == agent.provider() && model == agent.model() && same_cwd).then_some(session)
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
