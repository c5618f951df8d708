//! Bounded commands: a short-lived process run to its end under a time limit, with its output
//! kept up to a cap. git, the CLI version probe and the providers' model probes run this way, and
//! so can a caller's own supervised commands (check scripts, gates, setup steps).
//!
//! [`run_bounded`] spawns through the engine's [`ProviderSpawn`] (so the child leads its own
//! process group and gets exactly the environment in its request), reads stdout and stderr at
//! the same time (a child that fills one pipe while the other is read would stall), keeps at most
//! the cap of each and reads the rest to drop it, and waits for the leader. When the time is up
//! the group goes down the kill ladder (SIGTERM, the grace, SIGKILL) and the leader is reaped;
//! what was read until then is kept. Members of the group left running after the leader exited
//! are ended the same way, and with a run token the processes that left the group are swept.
//!
//! It knows nothing about what the command is for: the caller builds the request (environment
//! policy, sandbox wrapping) and reads the answer.

use std::io;
use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio_util::sync::CancellationToken;

use crate::process_group::{self, KillLadder, RUN_TOKEN_VAR};
use crate::spawn::{ChildOutput, ExitInfo, ProviderSpawn, SpawnRequest, SpawnedChild};

/// How long a killed leader gets to be reaped.
const REAP_GRACE: Duration = Duration::from_secs(2);
/// The read buffer of each pipe.
const CHUNK: usize = 16 * 1024;

/// A command to run to its end, bounded in time and in the output kept.
#[derive(Debug, Clone)]
pub struct BoundedCommand {
    /// What to start. Stdin should be [`crate::StdinMode::Null`]: nothing writes to a pipe.
    pub request: SpawnRequest,
    /// The time the whole command gets, from the spawn to the leader's exit.
    pub timeout: Duration,
    /// The time between SIGTERM and SIGKILL when the limit is hit; zero sends SIGKILL at once.
    pub kill_grace: Duration,
    /// The most of stdout that is kept, in bytes.
    pub stdout_limit: usize,
    /// The most of stderr that is kept, in bytes.
    pub stderr_limit: usize,
    /// A run token to set as `CORRAL_RUN_ID`: with it, processes that left the group but carry
    /// the token are killed after the command ends.
    pub run_token: Option<String>,
}

impl BoundedCommand {
    /// A command with the given limit, SIGKILL at once on timeout, 64 KiB kept of each stream,
    /// and no run token.
    pub fn limited(request: SpawnRequest, timeout: Duration) -> Self {
        BoundedCommand {
            request,
            timeout,
            kill_grace: Duration::ZERO,
            stdout_limit: 64 * 1024,
            stderr_limit: 64 * 1024,
            run_token: None,
        }
    }
}

/// One stream of a bounded command.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Captured {
    /// The first bytes, up to the limit.
    pub bytes: Vec<u8>,
    /// Every byte read, kept or not.
    pub total: u64,
}

impl Captured {
    /// Whether more came than was kept.
    pub fn truncated(&self) -> bool {
        self.total > self.bytes.len() as u64
    }

    /// The kept bytes as text (invalid UTF-8 replaced).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.bytes).into_owned()
    }
}

/// How a bounded command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BoundedEnd {
    /// The leader exited on its own.
    Exited(ExitInfo),
    /// The limit was hit; the group was killed.
    TimedOut,
}

/// What a bounded command left.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BoundedOutput {
    /// How it ended.
    pub end: BoundedEnd,
    /// Its stdout, up to the limit (what came before the kill, on a timeout).
    pub stdout: Captured,
    /// Its stderr, likewise.
    pub stderr: Captured,
}

/// Why a bounded command gave no answer.
#[derive(Debug, thiserror::Error)]
pub enum BoundedError {
    /// The program could not be started (`NotFound`, `PermissionDenied`, …). Retryable: no, not
    /// as configured.
    #[error("cannot start {}: {source}", program.display())]
    Spawn {
        /// The program.
        program: std::path::PathBuf,
        /// The operating system's error.
        source: io::Error,
    },
    /// Reading an output pipe failed. Retryable: yes, a transient operating system condition.
    #[error("reading the {stream} of {}: {source}", program.display())]
    Read {
        /// The program.
        program: std::path::PathBuf,
        /// `stdout` or `stderr`.
        stream: &'static str,
        /// The operating system's error.
        source: io::Error,
    },
    /// Waiting for the leader failed. Retryable: yes, a transient operating system condition.
    #[error("waiting for {}: {source}", program.display())]
    Wait {
        /// The program.
        program: std::path::PathBuf,
        /// The operating system's error.
        source: io::Error,
    },
}

/// How a supervised command ended, cancellation included: only the command runner
/// (`commands.rs`) has a caller that cancels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// The leader exited on its own.
    Exited(ExitInfo),
    /// The limit was hit; the group was killed.
    TimedOut,
    /// The token fired; the group was killed.
    Cancelled,
    /// What the caller does once the command started ([`AfterSpawn`]) refused it; the group
    /// was killed before its output was read. The caller's [`AfterSpawn`] says why.
    Refused,
}

/// What a caller does once a bounded command was spawned and before its output is read (for a
/// sandboxed command: the sandbox's way out opened and its check from inside). The command runs
/// under the same time limit and cancel meanwhile.
#[async_trait::async_trait]
pub trait AfterSpawn: Send {
    /// Whether the command may go on; `false` ends its group at once ([`Stop::Refused`]). An
    /// implementation that refuses may kill the child itself first.
    async fn started(&mut self, child: &mut dyn SpawnedChild) -> bool;
}

/// Runs `command` to its end; see the module documentation.
pub async fn run_bounded(
    spawner: &dyn ProviderSpawn,
    command: &BoundedCommand,
) -> Result<BoundedOutput, BoundedError> {
    let (stop, stdout, stderr) = run_until(spawner, command, &CancellationToken::new()).await?;
    let end = match stop {
        Stop::Exited(exit) => BoundedEnd::Exited(exit),
        // A token nobody holds cannot fire; were it to, the command was stopped early all
        // the same.
        Stop::TimedOut | Stop::Cancelled | Stop::Refused => BoundedEnd::TimedOut,
    };
    Ok(BoundedOutput {
        end,
        stdout,
        stderr,
    })
}

/// [`run_bounded`] for a caller that is not async (a check made once per process, such as
/// whether bubblewrap works here): the command runs on a thread of its own with a runtime of its
/// own, so it may be called from inside another runtime too. A runtime or thread that cannot be
/// had is reported as a failed start.
pub fn run_bounded_blocking(
    spawner: &dyn ProviderSpawn,
    command: &BoundedCommand,
) -> Result<BoundedOutput, BoundedError> {
    let failed = |source: io::Error| BoundedError::Spawn {
        program: command.request.program.clone(),
        source,
    };
    std::thread::scope(|scope| {
        let worker = std::thread::Builder::new()
            .name("corral-bounded".into())
            .spawn_scoped(scope, || {
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(failed)?
                    .block_on(run_bounded(spawner, command))
            })
            .map_err(failed)?;
        worker
            .join()
            .unwrap_or_else(|_| Err(failed(io::Error::other("the command's thread panicked"))))
    })
}

/// [`run_bounded`], also ended (the whole group, down the kill ladder) when `cancel` fires.
pub async fn run_until(
    spawner: &dyn ProviderSpawn,
    command: &BoundedCommand,
    cancel: &CancellationToken,
) -> Result<(Stop, Captured, Captured), BoundedError> {
    run_until_started(spawner, command, cancel, None).await
}

/// [`run_until`], with `after` run once the command was spawned, before its output is read.
pub async fn run_until_started(
    spawner: &dyn ProviderSpawn,
    command: &BoundedCommand,
    cancel: &CancellationToken,
    after: Option<&mut dyn AfterSpawn>,
) -> Result<(Stop, Captured, Captured), BoundedError> {
    let program = || command.request.program.clone();
    let mut request = command.request.clone();
    if let Some(token) = &command.run_token {
        request.env.retain(|(k, _)| k != RUN_TOKEN_VAR);
        request.env.push((RUN_TOKEN_VAR.into(), token.into()));
    }
    let mut child = spawner
        .spawn(&request)
        .map_err(|source| BoundedError::Spawn {
            program: program(),
            source,
        })?;
    let pgid = child.pid();
    let stdout = child.take_stdout();
    let stderr = child.take_stderr();
    let mut out = Captured::default();
    let mut err = Captured::default();
    let finished = tokio::select! {
        finished = tokio::time::timeout(command.timeout, async {
            if let Some(after) = after
                && !after.started(child.as_mut()).await
            {
                return None;
            }
            let (read_out, read_err) = tokio::join!(
                read_capped(stdout, command.stdout_limit, &mut out),
                read_capped(stderr, command.stderr_limit, &mut err),
            );
            Some((read_out, read_err, child.wait().await))
        }) => finished.map_err(|_| Stop::TimedOut),
        () = cancel.cancelled() => Err(Stop::Cancelled),
    };
    let end = match finished {
        Ok(None) => Stop::Refused,
        Ok(Some((read_out, read_err, exit))) => {
            let read = |stream, result: io::Result<()>| {
                result.map_err(|source| BoundedError::Read {
                    program: program(),
                    stream,
                    source,
                })
            };
            read("stdout", read_out)?;
            read("stderr", read_err)?;
            let exit = exit.map_err(|source| BoundedError::Wait {
                program: program(),
                source,
            })?;
            Stop::Exited(exit)
        }
        Err(stopped) => stopped,
    };
    if process_group::group_alive(pgid) {
        // On a timeout or a cancel the whole group; after an exit, what the leader left
        // running.
        let (mut ladder, _) = KillLadder::start(pgid, command.kill_grace);
        ladder.run_to_end(|_| {}).await;
    }
    match end {
        Stop::TimedOut | Stop::Cancelled | Stop::Refused => {
            // Reaped here so the registry forgets the pid; the kill makes this quick.
            let _ = tokio::time::timeout(REAP_GRACE, child.wait()).await;
        }
        Stop::Exited(_) => {}
    }
    if let Some(token) = &command.run_token {
        process_group::sweep_escaped(token, pgid, |_| {}).await;
    }
    // What died in the group after its leader (bubblewrap's second process) is reaped too.
    process_group::reap_exited_members(pgid);
    Ok((end, out, err))
}

/// Reads `reader` to its end into `into`, keeping the first `keep` bytes and counting the rest,
/// so that a talkative child never blocks on a full pipe.
async fn read_capped(
    reader: Option<ChildOutput>,
    keep: usize,
    into: &mut Captured,
) -> io::Result<()> {
    let Some(mut reader) = reader else {
        return Ok(());
    };
    let mut chunk = vec![0u8; CHUNK];
    loop {
        let n = reader.read(&mut chunk).await?;
        if n == 0 {
            return Ok(());
        }
        into.total += n as u64;
        let room = keep.saturating_sub(into.bytes.len());
        into.bytes
            .extend_from_slice(chunk.get(..n.min(room)).unwrap_or_default());
    }
}
