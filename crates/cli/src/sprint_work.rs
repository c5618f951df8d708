//! `corral sprint work`: one task of a sprint, run on this machine for a remote executor (a Ray
//! job's entrypoint runs it on a worker node).
//!
//! It clones the commit it starts from out of `--remote` into its work dir (a private directory of its run's
//! task, see `private_dir`, or `--work-dir`), checks out `--base` on the task's branch, and runs
//! the task's rounds with the same engine, sandbox and record as `corral sprint run`
//! (`corral_sprint::work_task`). After its steps
//! (once a burst of them has settled) it pushes the task's record to
//! `refs/corral/<sprint>/<task>/record`: a commit whose tree holds `implement/<task>/` (the
//! record, and `task.json`, the task's state) and `tree/` (the work tree as it was), so that
//! the same command run again, here or on another node, resumes from the last recorded step
//! instead of running a round again. A clone or a record is resumed from only when its
//! `worker.json` ([`RecordOwner`]) names this run, sprint, task (and its text), base and remote;
//! anything else starts the task afresh. When the task is over, its last record, the removal of
//! its gate and (done) its branch go to the remote in one push; the coordinator fetches and
//! folds it.
//!
//! One writer: the worker writes only its clone and its own refs on the remote; the sprint's
//! `sprint.json` and learnings are the coordinator's (the worker gets a copy of the learnings
//! through `--learnings`, and its own come back with its record). Shared by every worker: the
//! provider accounts' holds, which each passes between its node's gate and the remote
//! (`holds`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use corral_compose::{command_runner, engine_config, new_run_id, now};
use corral_ports::{CancellationToken, CommandEnd, CommandRunner, CommandSpec};
use corral_sprint::{
    RECORD_OWNER_FILE, RecordOwner, RoleAgent, RunOptions, SprintError, SprintLayout, SprintRun,
    SprintState, TaskEnd, TaskId, TaskJob, TaskRecorder, TaskState, TaskStatus, extract_tree,
    record_ref, work_task,
};
use tokio::sync::watch;

mod holds;
mod remote_refs;

use crate::args::SprintWorkArgs;
use crate::config_cmd::load_settings;
use crate::exit::{Exit, usage};
use crate::render::Style;
use crate::sprint_run::{exit_for, exit_for_error, git_identity, install_signal_handlers};
use crate::sprint_view::SprintView;
use crate::term::{errln, outln};

/// How long one git command of the worker may take (a clone, a push).
const GIT_TIMEOUT: Duration = Duration::from_secs(600);
/// How often a worker at its gate asks the remote whether the gate is open: a `file://`
/// remote answers in milliseconds, a hosted one in a round trip.
const GATE_POLL: Duration = Duration::from_millis(200);
/// How long the task's state stays unchanged before its record is pushed (see
/// [`Worker::push_records`]): a step that lasts this long (a spawn, a long check) is one worth
/// not doing again, a burst of short ones (a check, the diff, the commit) is cheaper to redo
/// than a push (a dozen processes).
const RECORD_SETTLE: Duration = Duration::from_secs(5);
/// The longest a change of the task's state waits for its record's push, however often the
/// state changes meanwhile.
const RECORD_LATEST: Duration = Duration::from_secs(30);
/// The most of the sprint's learnings taken from the remote: what the flow reads of them.
const LEARNINGS_LIMIT: usize = 4 * 1024 * 1024;

/// Runs `corral sprint work`.
pub async fn run(args: SprintWorkArgs) -> anyhow::Result<Exit> {
    let cwd = std::env::current_dir()?;
    let task = TaskId::new(&args.task).map_err(|e| usage(format!("--task {}: {e}", args.task)))?;
    let work = work_dir(&args, &cwd)?;
    let outer = load_settings(&cwd, Vec::new())?;
    let commands = command_runner(engine_config(&outer.settings));
    // The worker's own git (clone, record, push) ends on its own, even once the task is
    // cancelled: the last record must reach the remote.
    let git_cancel = CancellationToken::new();
    let env = git_identity(&*commands, &cwd, &git_cancel).await;
    let worker = Worker {
        runner: &*commands,
        work: work.clone(),
        remote: args.remote.clone(),
        env,
        cancel: git_cancel,
    };
    let (cloned, empty) = worker.clone_or_fetch().await?;
    if cloned {
        worker
            .checkout_base(&args.branch, &args.base, empty)
            .await?;
    }
    ignore_state_dir(&work)?;
    let (mut file, mut owner) = match sprint_and_owner(&args, &work, &task)? {
        Ok(loaded) => loaded,
        Err(exit) => return Ok(exit),
    };
    let mut layout = SprintLayout::new(&work, &file.sprint.name);
    let mut state_file = layout.task_state_file(&task);
    let local = read_owner(&layout, &task);
    let resumes_here = !cloned && local.as_ref() == Some(&owner) && state_file.exists();
    if !cloned && !resumes_here {
        // A clone this run's task did not leave as it is (its record names another run, base,
        // remote or task text, or none): the task starts from the base, or from its own record
        // on the remote, never from this tree.
        worker
            .checkout_base(&args.branch, &args.base, false)
            .await?;
        remove_task_dir(&layout, &task)?;
        (file, owner) = match sprint_and_owner(&args, &work, &task)? {
            Ok(loaded) => loaded,
            Err(exit) => return Ok(exit),
        };
        layout = SprintLayout::new(&work, &file.sprint.name);
        state_file = layout.task_state_file(&task);
    }
    let reference = record_ref(file.sprint.name.as_str(), task.as_str());
    let resume = if resumes_here {
        worker.stay_on(&args.branch).await?;
        match read_task_state(&state_file) {
            Some(state) => state,
            None => fresh_task(&file, &task)?,
        }
    } else {
        resume_from_remote(&worker, &layout, &file, &task, &owner, &state_file).await?
    };
    write_owner(&layout, &task, &owner)?;
    if let Some(learnings) = &args.learnings {
        worker
            .take_learnings(learnings, &layout.learnings_file())
            .await;
    }
    let run_id = owner.run_id.clone();

    let loaded = load_settings(&work, Vec::new())?;
    let settings = &loaded.settings;
    let config = engine_config(settings);
    let (generator, evaluator) = crate::sprint::role_agents(&file, settings, &config)?;
    let accounts = holds::accounts(&file, settings, &config);
    let cancel = CancellationToken::new();
    let view = SprintView::new(Style::choose(args.json, false));
    install_signal_handlers(cancel.clone(), view.clone());
    let job = TaskJob {
        sprint: file.sprint.name.clone(),
        task: task.clone(),
        base: args.base.clone(),
        branch: args.branch.clone(),
        run_id: run_id.clone(),
        resume,
        max_cost_usd: args.max_cost_usd,
    };
    let finished_before = matches!(
        job.resume.status,
        TaskStatus::Done | TaskStatus::Blocked | TaskStatus::Skipped
    );
    let mut gate_passed = args.gate.is_some() && !finished_before;
    let result = if finished_before {
        // Ended before the last push reached the remote: only the pushes are left.
        Ok((job.resume.clone(), TaskEnd::Finished))
    } else if let Some(gate) = &args.gate
        && !worker.wait_at_gate(&task, gate, &cancel).await
    {
        gate_passed = false;
        Ok((
            job.resume.clone(),
            TaskEnd::Paused(corral_sprint::SprintEnd::Cancelled),
        ))
    } else {
        let run = SprintRun {
            file: &file,
            project_root: &work,
            generator: &*generator,
            evaluator: evaluator.as_deref().map(|e| e as &dyn RoleAgent),
            commands: &*commands,
            // One task, no parallel run: the executor is never asked.
            executor: corral_compose::local_executor(),
            events: &view,
            options: RunOptions {
                dirty: corral_sprint::DirtyTree::Keep,
                run_id,
                now,
                git_env: worker.env.clone(),
                jobs: 1,
                prices: crate::sprint::price_table(settings),
            },
            cancel,
        };
        let (tx, rx) = watch::channel(0_u64);
        let recorder = FileRecorder {
            path: state_file.clone(),
            owner: owner.clone(),
            changed: tx,
        };
        // An account held on another node holds this one's spawns too.
        let mut passed = holds::Passed::default();
        worker.take_holds(&accounts, &mut passed).await;
        let done = CancellationToken::new();
        let working = async {
            let result = work_task(&run, &job, &work, &recorder).await;
            done.cancel();
            result
        };
        let pushing = worker.push_records(rx, &done, layout.root(), &task, &reference);
        let relaying = worker.relay_holds(&accounts, passed, &done);
        let (result, (), ()) = tokio::join!(working, pushing, relaying);
        result.map(|handback| (handback.state, handback.end))
    };
    view.finish();
    let committed = match &result {
        Ok((state, _)) if state.status == TaskStatus::Done => state.commit.as_deref(),
        Ok(_) | Err(_) => None,
    };
    let gate = args.gate.as_deref().filter(|_| gate_passed);
    last_push(
        &worker,
        &args,
        layout.root(),
        &task,
        &reference,
        gate,
        committed,
    )
    .await?;
    let (state, end) = result.map_err(exit_for_error)?;
    Ok(finish(&args, &task, &state, end, &reference))
}

/// The last record, the gate's removal (`gate`: passed, the coordinator has no more use for it)
/// and the branch of a task done (`committed`: its commit): one push.
async fn last_push(
    worker: &Worker<'_>,
    args: &SprintWorkArgs,
    layout_root: &Path,
    task: &TaskId,
    reference: &str,
    gate: Option<&str>,
    committed: Option<&str>,
) -> anyhow::Result<()> {
    let done = committed.is_some();
    let mut refspecs = Vec::new();
    match worker.record_commit(layout_root, task, committed).await {
        Ok(commit) => refspecs.push(format!("{commit}:{reference}")),
        Err(e) => errln!("warning: the task's last record was not made: {e:#}"),
    }
    if let Some(gate) = gate {
        refspecs.push(format!(":{gate}"));
    }
    // The task's commit by its id, not the local branch: a clone made on another node for a
    // task whose record says done checked the branch out at the base, and pushing that branch
    // would force the base over the finished work on the remote. Without the commit here the
    // push fails and says so instead.
    let branch = format!(
        "{}:refs/heads/{}",
        committed.unwrap_or(args.branch.as_str()),
        args.branch
    );
    if done {
        refspecs.push(branch.clone());
    }
    if let Err(e) = worker.push(&refspecs).await {
        // Each ref of a push lands or is refused on its own (a remote's hook or permission
        // may refuse the record's ref): the branch of a task done is the one that must land.
        if done && let Err(e) = worker.push(std::slice::from_ref(&branch)).await {
            return Err(e.context(format!("pushing task {task}'s branch {}", args.branch)));
        }
        errln!(
            "warning: not all of the task's last push reached {}: {e:#}",
            args.remote
        );
    }
    Ok(())
}

/// Where the clone is: `--work-dir`, else the private directory of the run's task.
fn work_dir(args: &SprintWorkArgs, cwd: &Path) -> anyhow::Result<PathBuf> {
    match &args.work_dir {
        // Named by whoever runs it: theirs to choose.
        Some(dir) => Ok(cwd.join(dir)),
        None => {
            // Without a run's id, a job is its own run: a key no other job has.
            let run = args
                .run_id
                .clone()
                .unwrap_or_else(|| format!("{:016x}", fastrand::u64(..)));
            let key = crate::private_dir::key(&run, &args.remote, &args.sprint_file, &args.task);
            crate::private_dir::work_dir(&std::env::temp_dir(), &key)
        }
    }
}

/// The sprint file as the clone has it, and the owner of this job's record; the exit when the
/// file is bad (reported).
fn sprint_and_owner(
    args: &SprintWorkArgs,
    work: &Path,
    task: &TaskId,
) -> anyhow::Result<Result<(corral_sprint::SprintFile, RecordOwner), Exit>> {
    let file = match crate::sprint::load_or_report(&work.join(&args.sprint_file))? {
        Ok(file) => file,
        Err(exit) => return Ok(Err(exit)),
    };
    let Some(stated) = file.task(task) else {
        return Err(usage(format!(
            "--task {task}: {} has no such task",
            args.sprint_file.display()
        )));
    };
    let depends: Vec<&str> = stated.depends_on.iter().map(TaskId::as_str).collect();
    let text = format!(
        "{}\0{}\0{}\0{}",
        stated.id.as_str(),
        stated.title,
        stated.prompt.text(),
        depends.join("\0")
    );
    let run_id = args
        .run_id
        .clone()
        .unwrap_or_else(|| new_run_id(file.generator.provider));
    let owner = RecordOwner {
        run_id,
        sprint: file.sprint.name.to_string(),
        task: task.to_string(),
        base: args.base.clone(),
        remote: args.remote.clone(),
        task_digest: corral_compose::content_digest(text.as_bytes()),
    };
    Ok(Ok((file, owner)))
}

/// Where the task resumes when this clone holds none of its own: its record on the remote
/// when that names this run (restored into the checkout of the base), else the start.
async fn resume_from_remote(
    worker: &Worker<'_>,
    layout: &SprintLayout,
    file: &corral_sprint::SprintFile,
    task: &TaskId,
    owner: &RecordOwner,
    state_file: &Path,
) -> anyhow::Result<TaskState> {
    let reference = record_ref(file.sprint.name.as_str(), task.as_str());
    if worker.fetch_record(&reference).await {
        let path = format!("{reference}:implement/{task}/{RECORD_OWNER_FILE}");
        let recorded = worker
            .git(&worker.work, &["show", &path], &[])
            .await
            .ok()
            .and_then(|json| serde_json::from_str::<RecordOwner>(&json).ok());
        if recorded.as_ref() == Some(owner) {
            worker.restore(&reference, layout.root(), task).await?;
        } else {
            // The ref names the sprint and the task, not the run: an earlier sprint of the
            // same names left it, or this task's text changed since.
            errln!("warning: the record at {reference} is not this run's task: starting afresh");
        }
    }
    match read_task_state(state_file) {
        Some(state) => Ok(state),
        None => fresh_task(file, task),
    }
}

/// The owner named in the clone's record of the task, if any.
fn read_owner(layout: &SprintLayout, task: &TaskId) -> Option<RecordOwner> {
    let bytes = std::fs::read(layout.task_dir(task).join(RECORD_OWNER_FILE)).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// Writes the owner into the task's record directory: every record pushed from here names it.
fn write_owner(layout: &SprintLayout, task: &TaskId, owner: &RecordOwner) -> anyhow::Result<()> {
    let dir = layout.task_dir(task);
    std::fs::create_dir_all(&dir)?;
    std::fs::write(
        dir.join(RECORD_OWNER_FILE),
        serde_json::to_vec_pretty(owner)?,
    )?;
    Ok(())
}

/// Removes the task's record directory of a clone that is not this run's.
fn remove_task_dir(layout: &SprintLayout, task: &TaskId) -> anyhow::Result<()> {
    match std::fs::remove_dir_all(layout.task_dir(task)) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e.into()),
        Ok(()) | Err(_) => Ok(()),
    }
}

/// Prints the handback (the branch of a task done is on the remote by now), and says how
/// the task ended.
fn finish(
    args: &SprintWorkArgs,
    task: &TaskId,
    state: &TaskState,
    end: TaskEnd,
    reference: &str,
) -> Exit {
    let head = (state.status == TaskStatus::Done)
        .then(|| state.commit.clone())
        .flatten();
    if args.json {
        let handback = crate::json_lines::WorkLine::Handback {
            task: task.as_str(),
            status: state.status.as_str(),
            round: state.round,
            head: head.as_deref(),
            branch: &args.branch,
            record: reference,
        };
        match crate::term::json(&handback) {
            Ok(line) => outln!("{line}"),
            Err(e) => tracing::warn!(error = %e, "cannot print the handback line"),
        }
    }
    match (end, state.status) {
        // Paused: the state stays running, the exit says why.
        (TaskEnd::Paused(end), _) => exit_for(end),
        (TaskEnd::Finished, TaskStatus::Done) => Exit::Success,
        (TaskEnd::Finished, TaskStatus::Blocked | TaskStatus::Skipped) => Exit::Blocked,
        (TaskEnd::Finished, TaskStatus::Running | TaskStatus::Pending) => Exit::Internal,
    }
}

/// The task as a sprint that never ran it has it.
fn fresh_task(file: &corral_sprint::SprintFile, task: &TaskId) -> anyhow::Result<TaskState> {
    SprintState::fresh(file, &now())
        .tasks
        .into_iter()
        .find(|t| &t.id == task)
        .ok_or_else(|| usage(format!("--task {task}: the sprint file has no such task")))
}

fn read_task_state(path: &Path) -> Option<TaskState> {
    let bytes = std::fs::read(path).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// `.corral/.gitignore` holding `*`, as `corral sprint run` writes it: the record is never
/// part of the task's commit nor of the tree snapshot.
fn ignore_state_dir(work: &Path) -> anyhow::Result<()> {
    let dir = work.join(".corral");
    std::fs::create_dir_all(&dir)?;
    let path = dir.join(".gitignore");
    if !path.exists() {
        std::fs::write(
            &path,
            "# Written by corral: its run records stay out of git.\n*\n",
        )?;
    }
    Ok(())
}

/// Writes the task's state after every step into its record directory, and wakes the pusher.
struct FileRecorder {
    path: PathBuf,
    /// Written beside the state every time: a task started afresh has its record directory
    /// emptied by the flow first.
    owner: RecordOwner,
    changed: watch::Sender<u64>,
}

impl TaskRecorder for FileRecorder {
    fn record(&self, task: &TaskState) -> Result<(), SprintError> {
        let io = |source| SprintError::Io {
            path: self.path.clone(),
            source,
        };
        let json = serde_json::to_vec_pretty(task).map_err(|e| io(std::io::Error::other(e)))?;
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        let tmp = self.path.with_extension("json.tmp");
        std::fs::write(&tmp, json).map_err(io)?;
        std::fs::rename(&tmp, &self.path).map_err(io)?;
        if let Some(dir) = self.path.parent() {
            let owner =
                serde_json::to_vec_pretty(&self.owner).map_err(|e| io(std::io::Error::other(e)))?;
            std::fs::write(dir.join(RECORD_OWNER_FILE), owner).map_err(io)?;
        }
        self.changed.send_modify(|n| *n += 1);
        Ok(())
    }
}

/// The worker's git: its clone, its record, its pushes.
struct Worker<'a> {
    runner: &'a dyn CommandRunner,
    work: PathBuf,
    remote: String,
    env: Vec<(String, String)>,
    cancel: CancellationToken,
}

impl Worker<'_> {
    /// `git args` in `cwd` with the identity and `extra` variables; its stdout on exit 0.
    async fn git(
        &self,
        cwd: &Path,
        args: &[&str],
        extra: &[(&str, String)],
    ) -> anyhow::Result<String> {
        let mut spec = CommandSpec::git(args.iter().copied(), cwd, GIT_TIMEOUT);
        spec.env.clone_from(&self.env);
        spec.env
            .extend(extra.iter().map(|(k, v)| ((*k).to_string(), v.clone())));
        let out = self.runner.run(spec, &self.cancel).await?;
        if out.success() {
            Ok(out.stdout.text)
        } else {
            anyhow::bail!(
                "git {} in {}: {:?}: {}",
                args.join(" "),
                cwd.display(),
                out.end,
                out.stderr.text.trim()
            )
        }
    }

    /// Makes the clone in the work dir (an empty repository: [`Worker::checkout_base`] fetches
    /// the one commit the task starts from, not the remote's branches, which the task never
    /// reads) or reuses the one there; whether it made it, and whether the directory was
    /// empty before.
    async fn clone_or_fetch(&self) -> anyhow::Result<(bool, bool)> {
        let made = !self.work.join(".git").exists();
        let mut empty = false;
        if made {
            std::fs::create_dir_all(&self.work)?;
            empty = std::fs::read_dir(&self.work)?.next().is_none();
            self.git(&self.work, &["init", "--quiet"], &[]).await?;
        }
        Ok((made, empty))
    }

    /// What a command that talks to the remote needs: Corral's git reaches no remote by
    /// default (`protocol.allow=never`); `GIT_ALLOW_PROTOCOL` lets through the one transport
    /// the remote's URL names, for that command only.
    fn to_remote(&self) -> [(&'static str, String); 1] {
        [(
            "GIT_ALLOW_PROTOCOL",
            corral_sprint::git_transport(&self.remote).to_string(),
        )]
    }

    /// The task's branch at `base`, nothing else in the tree (the record's directory, which
    /// git ignores, stays). `fresh`: the clone was just made in an empty directory.
    async fn checkout_base(&self, branch: &str, base: &str, fresh: bool) -> anyhow::Result<()> {
        // By its id: the coordinator pushes the base under `refs/corral/…/base`, not under a
        // branch, when the remote's branches do not hold it (a project ahead of its remote).
        self.git(
            &self.work,
            &["fetch", "--quiet", &self.remote, base],
            &self.to_remote(),
        )
        .await?;
        self.git(
            &self.work,
            &["checkout", "--quiet", "--force", "-B", branch, base],
            &[],
        )
        .await?;
        // A clone just made in an empty directory has nothing for `git clean` to remove.
        if !fresh {
            self.git(&self.work, &["clean", "-fdq"], &[]).await?;
        }
        Ok(())
    }

    /// Back on the task's branch in a reused clone, its tree as it was.
    async fn stay_on(&self, branch: &str) -> anyhow::Result<()> {
        let now_on = self
            .git(&self.work, &["rev-parse", "--abbrev-ref", "HEAD"], &[])
            .await?;
        if now_on.trim() != branch {
            self.git(&self.work, &["checkout", "--quiet", branch], &[])
                .await?;
        }
        Ok(())
    }

    /// Says it is ready (`{"kind":"ready",…}` on stdout) and waits until `gate` exists on
    /// the remote, asking every [`GATE_POLL`]. `false` when cancelled first.
    async fn wait_at_gate(&self, task: &TaskId, gate: &str, cancel: &CancellationToken) -> bool {
        let ready = crate::json_lines::WorkLine::Ready {
            task: task.as_str(),
            gate,
        };
        match crate::term::json(&ready) {
            Ok(line) => outln!("{line}"),
            Err(e) => tracing::warn!(error = %e, "cannot print the ready line"),
        }
        let mut complained = false;
        loop {
            // A `file://` remote's gate is read from its files: a worker started ahead may
            // wait here for minutes, and a `git ls-remote` five times a second is fifteen
            // processes a second.
            match remote_refs::find(&self.remote, gate) {
                Some(Some(_)) => return true,
                Some(None) => {
                    tokio::select! {
                        () = cancel.cancelled() => return false,
                        () = tokio::time::sleep(GATE_POLL) => {}
                    }
                    continue;
                }
                None => {}
            }
            let mut spec = CommandSpec::git(
                ["ls-remote", "--exit-code", &self.remote, gate],
                &self.work,
                GIT_TIMEOUT,
            );
            spec.env.clone_from(&self.env);
            spec.env.extend(
                self.to_remote()
                    .iter()
                    .map(|(k, v)| ((*k).to_string(), v.clone())),
            );
            match self.runner.run(spec, cancel).await {
                Ok(out) if out.success() => return true,
                // Exit 2: not there yet. Anything else is said once and asked again: the
                // coordinator stops this job if the remote stays out of reach.
                Ok(out) if out.end == CommandEnd::Exited(2) => {}
                Ok(out) if !complained => {
                    complained = true;
                    errln!(
                        "warning: cannot ask {} for the gate {gate}: {:?}: {}",
                        self.remote,
                        out.end,
                        out.stderr.text.trim()
                    );
                }
                Ok(_) => {}
                Err(e) => {
                    if !complained {
                        complained = true;
                        errln!(
                            "warning: cannot ask {} for the gate {gate}: {e}",
                            self.remote
                        );
                    }
                }
            }
            tokio::select! {
                () = cancel.cancelled() => return false,
                () = tokio::time::sleep(GATE_POLL) => {}
            }
        }
    }

    /// Fetches the blob `reference` names on the remote (the sprint's learnings) and writes
    /// it to `path`. Without them (said on stderr) the task runs as a local one run before
    /// any task learned anything.
    async fn take_learnings(&self, reference: &str, path: &Path) {
        if let Err(e) = self.write_learnings(reference, path).await {
            errln!("warning: the sprint's learnings at {reference} did not come: {e:#}");
        }
    }

    async fn write_learnings(&self, reference: &str, path: &Path) -> anyhow::Result<()> {
        let refspec = format!("+{reference}:{reference}");
        self.git(
            &self.work,
            &["fetch", "--quiet", &self.remote, &refspec],
            &self.to_remote(),
        )
        .await?;
        let mut spec = CommandSpec::git(["cat-file", "blob", reference], &self.work, GIT_TIMEOUT);
        spec.env.clone_from(&self.env);
        // As much as the flow reads of `learnings.ndjson`: the default keeps 64 KiB.
        spec.output_limit = LEARNINGS_LIMIT;
        let out = self.runner.run(spec, &self.cancel).await?;
        if !out.success() {
            anyhow::bail!(
                "git cat-file blob {reference}: {:?}: {}",
                out.end,
                out.stderr.text.trim()
            );
        }
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(path, out.stdout.text)?;
        Ok(())
    }

    /// Fetches the task's record from the remote; whether it has one. A `file://` remote
    /// without it is seen to have none from its files (a fetch of nothing is three processes).
    async fn fetch_record(&self, reference: &str) -> bool {
        if remote_refs::find(&self.remote, reference) == Some(None) {
            return false;
        }
        let refspec = format!("+{reference}:{reference}");
        self.git(
            &self.work,
            &["fetch", "--quiet", &self.remote, &refspec],
            &self.to_remote(),
        )
        .await
        .is_ok()
    }

    /// Puts the record's files below `layout_root` and its tree snapshot into the work tree.
    async fn restore(
        &self,
        reference: &str,
        layout_root: &Path,
        task: &TaskId,
    ) -> anyhow::Result<()> {
        let dir = format!("implement/{task}/");
        extract_tree(
            self.runner,
            &self.work,
            &self.env,
            &self.cancel,
            reference,
            &dir,
            layout_root,
        )
        .await?;
        let snapshot = format!("{reference}:tree");
        if let Ok(tree) = self
            .git(
                &self.work,
                &["rev-parse", "--verify", "--quiet", &snapshot],
                &[],
            )
            .await
        {
            let source = format!("--source={}", tree.trim());
            self.git(
                &self.work,
                &["restore", &source, "--worktree", "--", "."],
                &[],
            )
            .await?;
        }
        Ok(())
    }

    /// Pushes the record after the task's state changed, until `done`: once it has stayed
    /// unchanged for [`RECORD_SETTLE`], and at the latest [`RECORD_LATEST`] after the first
    /// change not pushed. A round's steps come in bursts (the check, the diff, the commit
    /// within milliseconds), and each push is a dozen git processes: one a long step, not one
    /// a step. So a spawn that runs longer than the settling time has the step before it on
    /// the remote (the check before the task and the round's count are not done again by a
    /// job resumed after its node was lost), a short task pushes only its last record (the
    /// caller's, at its end), and what a lost job resumes from is at most that much older.
    async fn push_records(
        &self,
        mut changed: watch::Receiver<u64>,
        done: &CancellationToken,
        layout_root: &Path,
        task: &TaskId,
        reference: &str,
    ) {
        loop {
            tokio::select! {
                () = done.cancelled() => return,
                seen = changed.changed() => if seen.is_err() { return },
            }
            let latest = tokio::time::Instant::now() + RECORD_LATEST;
            loop {
                let settled = (tokio::time::Instant::now() + RECORD_SETTLE).min(latest);
                tokio::select! {
                    biased;
                    // The last record is pushed once the task is over, by the caller.
                    () = done.cancelled() => return,
                    () = tokio::time::sleep_until(settled) => break,
                    seen = changed.changed() => if seen.is_err() { return },
                }
            }
            let pushed = match self.record_commit(layout_root, task, None).await {
                Ok(commit) => self.push(&[format!("{commit}:{reference}")]).await,
                Err(e) => Err(e),
            };
            if let Err(e) = pushed {
                tracing::warn!(task = task.as_str(), "the record was not pushed: {e:#}");
            }
        }
    }

    /// `git push --force` of `refspecs` to the remote, in one command; nothing when empty.
    async fn push(&self, refspecs: &[String]) -> anyhow::Result<()> {
        if refspecs.is_empty() {
            return Ok(());
        }
        let mut args = vec!["push", "--quiet", "--force"];
        // A `file://` remote's receiving end is this machine's git, started for the push: it
        // is told not to start the repository's automatic maintenance after each of the
        // task's pushes (a process of its own, and a `gc` now and then in the middle of a
        // run); the repository's other writers (the coordinator's pushes and fetches) still
        // start it. Any other remote's receiving end is the server's own.
        if corral_sprint::git_transport(&self.remote) == "file" {
            args.push("--receive-pack=git -c receive.autogc=false receive-pack");
        }
        args.push(self.remote.as_str());
        args.extend(refspecs.iter().map(String::as_str));
        self.git(&self.work, &args, &self.to_remote()).await?;
        Ok(())
    }

    /// One record commit: the task's directory and a snapshot of the work tree. Its id.
    /// `committed`: the commit of a task done, whose tree the work tree is (the task's commit
    /// staged every file git does not ignore, and nothing ran after it): its tree is the
    /// snapshot, and no index of the work tree is made (three processes fewer).
    async fn record_commit(
        &self,
        layout_root: &Path,
        task: &TaskId,
        committed: Option<&str>,
    ) -> anyhow::Result<String> {
        let git_dir = self.work.join(".git");
        // Own index files: the task's git (its staging, its commit) is never disturbed.
        let record_index = git_dir.join("corral-record.index");
        let record = [("GIT_INDEX_FILE", record_index.display().to_string())];
        // Each record starts from no index at all (one process fewer than `read-tree --empty`).
        match std::fs::remove_file(&record_index) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(
                    anyhow::Error::new(e).context(format!("removing {}", record_index.display()))
                );
            }
        }
        // The record's files as seen from the sprint's directory (paths `implement/<task>/…`).
        let mut below = record.to_vec();
        below.push(("GIT_DIR", git_dir.display().to_string()));
        below.push(("GIT_WORK_TREE", layout_root.display().to_string()));
        let dir = format!("implement/{task}");
        // Run from the clone (outside that work tree: the paths are the work tree's), where
        // the host git's listing of the repository's drivers is already known.
        self.git(&self.work, &["add", "-f", "--", &dir], &below)
            .await?;
        let from_commit = match committed {
            Some(commit) => self
                .git(
                    &self.work,
                    &["read-tree", "--prefix=tree/", commit],
                    &record,
                )
                .await
                .map_err(|e| tracing::debug!(error = %e, "the task's commit is not here"))
                .is_ok(),
            None => false,
        };
        if !from_commit {
            let tree = self.snapshot_tree().await?;
            self.git(
                &self.work,
                &["read-tree", "--prefix=tree/", tree.trim()],
                &record,
            )
            .await?;
        }
        let record_tree = self.git(&self.work, &["write-tree"], &record).await?;
        let mut identity = record.to_vec();
        for var in [
            "GIT_AUTHOR_NAME",
            "GIT_COMMITTER_NAME",
            "GIT_AUTHOR_EMAIL",
            "GIT_COMMITTER_EMAIL",
        ] {
            if !self.env.iter().any(|(k, _)| k == var) {
                let value = if var.ends_with("EMAIL") {
                    "corral@localhost"
                } else {
                    "corral"
                };
                identity.push((var, value.to_string()));
            }
        }
        let message = format!("corral record of task {task}");
        let commit = self
            .git(
                &self.work,
                &["commit-tree", record_tree.trim(), "-m", &message],
                &identity,
            )
            .await?;
        Ok(commit.trim().to_owned())
    }

    /// The work tree as a tree object, through an index of its own kept from one record to
    /// the next (`add -A` then only looks at what changed since).
    async fn snapshot_tree(&self) -> anyhow::Result<String> {
        let index = self.work.join(".git").join("corral-snapshot.index");
        let snapshot = [("GIT_INDEX_FILE", index.display().to_string())];
        if !index.exists() {
            self.git(&self.work, &["read-tree", "HEAD"], &snapshot)
                .await?;
        }
        self.git(&self.work, &["add", "-A"], &snapshot).await?;
        self.git(&self.work, &["write-tree"], &snapshot).await
    }
}
