//! The supervised command port: a short command a caller needs run to its end (a sprint's
//! check, a gate, its setup step, git), run by whoever implements [`CommandRunner`] under the
//! same supervision as an agent's CLI, so that no caller creates a process of its own.

use std::path::PathBuf;
use std::time::Duration;

use async_trait::async_trait;
use tokio_util::sync::CancellationToken;

/// Where a command runs, and with what it may touch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Confinement {
    /// In the sandbox the agents run in, with `cwd` as the writable work tree: a check, a gate
    /// or a setup step runs code the agent could have written (a test, a build script), so it
    /// gets no more than the agent had.
    Sandboxed,
    /// Git on the host, for Corral's own commits, resets and diffs: the program must be `git`,
    /// and the repository's own configuration that could run code (hooks, filters, fsmonitor,
    /// aliases, pagers, credential helpers, submodule recursion) is neutralised, because the
    /// agent could have written it.
    HostGit,
}

/// A command to run to its end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandSpec {
    /// The program: a name looked up on the child's `PATH`, or a path.
    pub program: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// The working directory (always set: a command never inherits the caller's).
    pub cwd: PathBuf,
    /// The time the whole command gets; past it the whole process group is killed.
    pub timeout: Duration,
    /// The most of stdout and of stderr that is kept, in bytes each; the rest is read and
    /// dropped, so a chatty command can neither stall nor fill the memory.
    pub output_limit: usize,
    /// Variables set in the child on top of the implementation's environment policy.
    pub env: Vec<(String, String)>,
    /// Where it runs.
    pub confinement: Confinement,
    /// Directories inside `cwd` that a [`Confinement::Sandboxed`] command may not write:
    /// Corral's record (`.corral/`), where Corral writes the command's output and reads what
    /// it judges after it. A check runs code the agent wrote, which could otherwise plant a
    /// link there.
    pub read_only: Vec<PathBuf>,
}

/// Kept of each stream when a caller does not say: 64 KiB.
pub const DEFAULT_OUTPUT_LIMIT: usize = 64 * 1024;

impl CommandSpec {
    /// `sh -c <script>` in `cwd`, sandboxed, bounded by `timeout`, keeping
    /// [`DEFAULT_OUTPUT_LIMIT`] of each stream: how a sprint file's `check`, gates and `setup`
    /// are run.
    pub fn shell(script: &str, cwd: impl Into<PathBuf>, timeout: Duration) -> Self {
        CommandSpec {
            program: "sh".to_string(),
            args: vec!["-c".to_string(), script.to_string()],
            cwd: cwd.into(),
            timeout,
            output_limit: DEFAULT_OUTPUT_LIMIT,
            env: Vec::new(),
            confinement: Confinement::Sandboxed,
            read_only: Vec::new(),
        }
    }

    /// `git <args>` in `cwd` on the host with the repository's configuration neutralised
    /// ([`Confinement::HostGit`]), bounded by `timeout`.
    pub fn git<I, S>(args: I, cwd: impl Into<PathBuf>, timeout: Duration) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        CommandSpec {
            program: "git".to_string(),
            args: args.into_iter().map(Into::into).collect(),
            cwd: cwd.into(),
            timeout,
            output_limit: DEFAULT_OUTPUT_LIMIT,
            env: Vec::new(),
            confinement: Confinement::HostGit,
            read_only: Vec::new(),
        }
    }
}

/// How a command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommandEnd {
    /// It exited with this code.
    Exited(i32),
    /// A signal ended it (not one the runner sent).
    Signalled(i32),
    /// Its time was up; the runner killed its process group.
    TimedOut,
    /// The caller's cancellation token fired; the runner killed its process group.
    Cancelled,
    /// It went over one of its limits (`[limits]`: memory, processes, disk); the runner ended
    /// its whole process tree.
    LimitExceeded(crate::LimitExceeded),
}

/// One stream of a finished command.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CommandStream {
    /// The first bytes, up to the limit, as text (invalid UTF-8 replaced).
    pub text: String,
    /// Every byte the command wrote, kept or not.
    pub total_bytes: u64,
}

impl CommandStream {
    /// Whether more was written than kept.
    pub fn truncated(&self) -> bool {
        self.total_bytes > self.text.len() as u64
    }
}

/// What a finished command left.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandOutput {
    /// How it ended.
    pub end: CommandEnd,
    /// Its stdout (what came before the kill, on a timeout).
    pub stdout: CommandStream,
    /// Its stderr, likewise.
    pub stderr: CommandStream,
    /// From the spawn to the end.
    pub duration: Duration,
}

impl CommandOutput {
    /// Whether it exited 0.
    pub fn success(&self) -> bool {
        self.end == CommandEnd::Exited(0)
    }
}

/// Why a command gave no answer.
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    /// The program could not be started (not found, not executable, a missing working
    /// directory). Retryable: no, not as configured.
    #[error("cannot start {program}: {reason}")]
    Spawn {
        /// The program.
        program: String,
        /// What the operating system said.
        reason: String,
    },
    /// The spec cannot be run as asked: [`Confinement::HostGit`] with a program other than
    /// `git`, or [`Confinement::Sandboxed`] where no sandbox is available and the user has not
    /// consented to running without one. Retryable: no.
    #[error("refusing to run {program}: {reason}")]
    Refused {
        /// The program.
        program: String,
        /// Why.
        reason: String,
    },
    /// Reading its output or waiting for it failed. Retryable: yes, a transient operating
    /// system condition.
    #[error("running {program}: {reason}")]
    Io {
        /// The program.
        program: String,
        /// What the operating system said.
        reason: String,
    },
}

impl CommandError {
    /// Whether running the command again may help.
    pub fn is_retryable(&self) -> bool {
        match self {
            CommandError::Spawn { .. } | CommandError::Refused { .. } => false,
            CommandError::Io { .. } => true,
        }
    }
}

/// Runs short commands to their end under supervision.
///
/// Contract, for every implementation:
/// - MUST start the command in a process group of its own, in `spec.cwd`, with stdin from
///   `/dev/null` and an explicit environment (never the caller's wholesale).
/// - MUST honour `spec.confinement`, and refuse ([`CommandError::Refused`]) rather than run a
///   command less confined than asked.
/// - MUST end the whole group (SIGTERM, a grace, SIGKILL) when `spec.timeout` passes, and return
///   [`CommandEnd::TimedOut`] with what was read until then; likewise [`CommandEnd::Cancelled`]
///   when `cancel` fires.
/// - MUST read stdout and stderr at the same time, keep at most `spec.output_limit` bytes of
///   each, and count the rest.
/// - MUST end the whole tree when it goes over one of the limits the runner enforces, and return
///   [`CommandEnd::LimitExceeded`] naming it.
/// - MUST leave no member of the command's group running once it returns.
#[async_trait]
pub trait CommandRunner: Send + Sync {
    /// Runs `spec` to its end, or until `cancel` fires.
    async fn run(
        &self,
        spec: CommandSpec,
        cancel: &CancellationToken,
    ) -> Result<CommandOutput, CommandError>;
}
