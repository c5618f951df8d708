//! Why a sprint, or one task of it handed to an executor, did not run to an end of its own:
//! [`SprintError`] and [`ExecutorError`], each variant with whether running again may get past
//! it. The two hold each other (a task's rounds fail in the sprint's machinery; a parallel run
//! fails in its executor), so they live here together, below the flow and the executor port
//! that both raise them.

use std::path::PathBuf;

use crate::git::GitError;
use crate::names::TaskId;
use crate::state::StateError;

/// Why a sprint did not run to an end of its own.
#[derive(Debug, thiserror::Error)]
pub enum SprintError {
    /// The tree has uncommitted changes and neither `--keep-dirty` nor `--stash` was given.
    /// Retryable: yes, once the tree is clean or a flag given.
    #[error(
        "the work tree has uncommitted changes: {}\nhint: commit them, or run with --keep-dirty or --stash",
        paths.join(", ")
    )]
    Dirty {
        /// The paths.
        paths: Vec<String>,
    },
    /// `setup` failed. Retryable: no, not until the setup command is fixed.
    #[error("setup `{command}` failed ({end}):\n{output}")]
    SetupFailed {
        /// The command.
        command: String,
        /// How it ended.
        end: String,
        /// Its output, cut.
        output: String,
    },
    /// The project is not in a git work tree, or git failed. Retryable: no.
    #[error(transparent)]
    Git(#[from] GitError),
    /// A check, gate or setup could not be run at all (no sandbox, say). Retryable: as the
    /// port's error says.
    #[error("cannot run `{command}`: {source}")]
    Command {
        /// The command.
        command: String,
        /// The port's error.
        source: corral_ports::CommandError,
    },
    /// `sprint.json` could not be read or written. Retryable: as its error says.
    #[error(transparent)]
    State(#[from] StateError),
    /// A file of the sprint's record could not be written. Retryable: yes, once the disk has
    /// room.
    #[error("cannot write {}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// A file of the sprint's record could not be written or read through its handle:
    /// something other than Corral's own file was planted where it goes (tampering; not
    /// retryable, and named in the record), or the disk failed (retryable once it has room).
    #[error("the sprint's record: {0}")]
    Record(#[from] corral_hostfs::HostFsError),
    /// Another sprint is running in this repository (it holds the repository's sprint lock).
    /// Retryable: yes, once that sprint has ended.
    #[error(
        "another sprint ({holder}) is running in this repository\nhint: wait for it to end, or stop it (Ctrl-C in its terminal); `corral sprint run` then continues this one"
    )]
    Busy {
        /// Who holds the lock: sprint, pid, host, start time.
        holder: String,
    },
    /// A new sprint's branch is the branch checked out: it would commit and reset there.
    /// Retryable: no, not until another branch is checked out or `branch` names a new one.
    #[error(
        "the sprint's branch {branch} is the branch checked out: a sprint commits, and resets its failed rounds, on a branch of its own\nhint: check out another branch first, or set [sprint] branch to a new name (the default is corral/<name>)"
    )]
    UsersBranch {
        /// The branch.
        branch: String,
    },
    /// A task's executor could not run it to a handback. Retryable: as the executor's error
    /// says ([`ExecutorError::is_retryable`]).
    #[error("task {task} ({kind} executor): {source}")]
    Executor {
        /// The executor's kind.
        kind: &'static str,
        /// The task.
        task: TaskId,
        /// The executor's error.
        source: Box<ExecutorError>,
    },
}

impl SprintError {
    /// The exit code of `corral sprint run`: 2 for a preflight refusal, 1 otherwise.
    pub fn exit_code(&self) -> i32 {
        match self {
            SprintError::Dirty { .. }
            | SprintError::SetupFailed { .. }
            | SprintError::Busy { .. }
            | SprintError::UsersBranch { .. } => 2,
            SprintError::Git(_)
            | SprintError::Command { .. }
            | SprintError::State(_)
            | SprintError::Io { .. }
            | SprintError::Record(_)
            | SprintError::Executor { .. } => 1,
        }
    }

    /// Whether running the sprint again, unchanged, may get past this error.
    pub fn is_retryable(&self) -> bool {
        match self {
            SprintError::Command { source, .. } => source.is_retryable(),
            SprintError::Git(GitError::Run { source, .. }) => source.is_retryable(),
            SprintError::Io { .. } | SprintError::Busy { .. } => true,
            SprintError::Record(e) => !e.is_tampering(),
            SprintError::Executor { source, .. } => source.is_retryable(),
            SprintError::Dirty { .. }
            | SprintError::SetupFailed { .. }
            | SprintError::UsersBranch { .. }
            | SprintError::Git(GitError::Failed { .. })
            | SprintError::State(_) => false,
        }
    }
}

/// Why an executor could not run a task to a handback.
#[derive(Debug, thiserror::Error)]
pub enum ExecutorError {
    /// The task's rounds failed in the sprint's own machinery (git, the state, the record).
    /// Retryable: as the sprint's error says.
    #[error(transparent)]
    Sprint(Box<SprintError>),
    /// `setup` failed in a new work tree of the task. Retryable: no, not until the setup
    /// command is fixed.
    #[error("setup `{command}` failed in {} ({end}):\n{output}", work_tree.display())]
    Setup {
        /// The command.
        command: String,
        /// The work tree it ran in.
        work_tree: PathBuf,
        /// How it ended.
        end: String,
        /// Its output, cut.
        output: String,
    },
    /// The place the task runs in (a cluster, a git remote) could not be reached.
    /// Retryable: yes, once it is reachable again.
    #[error("{what} is unreachable: {reason}")]
    Unreachable {
        /// What: the cluster's address, the git remote.
        what: String,
        /// Why, as the transport said.
        reason: String,
    },
    /// The task's job was lost (its node went away) more often than it may be resubmitted.
    /// Retryable: yes: a new run resubmits it and it resumes from its last recorded round.
    #[error("the job of task {task} was lost {times} time(s): {reason}")]
    Lost {
        /// The task.
        task: TaskId,
        /// How many times.
        times: u32,
        /// The last loss, as the executor saw it.
        reason: String,
    },
    /// The task's job ended in an error of its own (the worker failed, not the task).
    /// Retryable: no, not until what its log names is fixed.
    #[error("the job of task {task} failed: {reason}")]
    Failed {
        /// The task.
        task: TaskId,
        /// Why, with where its log is.
        reason: String,
    },
    /// The executor's settings do not work (a bad address, a missing remote).
    /// Retryable: no, not until the settings are fixed.
    #[error("executor settings: {key}: {reason}")]
    Settings {
        /// The settings key (`executor.ray.address`, say).
        key: String,
        /// What is wrong.
        reason: String,
    },
}

impl From<SprintError> for ExecutorError {
    fn from(e: SprintError) -> Self {
        ExecutorError::Sprint(Box::new(e))
    }
}

impl ExecutorError {
    /// Whether running the sprint again may get past this error.
    pub fn is_retryable(&self) -> bool {
        match self {
            ExecutorError::Sprint(e) => e.is_retryable(),
            ExecutorError::Unreachable { .. } | ExecutorError::Lost { .. } => true,
            ExecutorError::Setup { .. }
            | ExecutorError::Failed { .. }
            | ExecutorError::Settings { .. } => false,
        }
    }
}
