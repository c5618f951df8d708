//! The `ProviderSpawn` port and its tokio implementation: the one place that creates processes.
//!
//! Every child gets: a forced working directory, an explicit environment (never the ambient one
//! wholesale), stdin that is either piped (the prompt is written, then closed) or `/dev/null`,
//! piped stdout and stderr, a new process group whose id is the child's pid, and, on Linux,
//! `PR_SET_PDEATHSIG` so a crashed supervisor takes its children along.

use std::ffi::OsString;
use std::fmt;
use std::io;
use std::path::PathBuf;
use std::process::Stdio;

use async_trait::async_trait;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::io::{AsyncRead, AsyncWrite};

/// Where the child's stdin comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StdinMode {
    /// `/dev/null`: the child sees end of file at once.
    Null,
    /// A pipe the supervisor writes the prompt to and then closes.
    Piped,
}

/// Everything needed to start one child.
#[derive(Debug, Clone)]
pub struct SpawnRequest {
    /// The program (a path, or a name looked up on the child's `PATH`).
    pub program: PathBuf,
    /// Arguments, program excluded. Never holds the prompt body.
    pub args: Vec<OsString>,
    /// The complete environment of the child.
    pub env: Vec<(OsString, OsString)>,
    /// The working directory, always set.
    pub cwd: PathBuf,
    /// Where stdin comes from.
    pub stdin: StdinMode,
}

/// How a child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct ExitInfo {
    /// The exit code, when the child exited.
    pub code: Option<i32>,
    /// The signal that killed it, when one did.
    pub signal: Option<i32>,
}

impl ExitInfo {
    /// Exit code 0.
    pub fn success(&self) -> bool {
        self.code == Some(0)
    }
}

impl fmt::Display for ExitInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.code, self.signal) {
            (Some(code), _) => write!(f, "exit code {code}"),
            (None, Some(sig)) => write!(f, "signal {sig}"),
            (None, None) => f.write_str("unknown exit"),
        }
    }
}

/// A boxed async reader for a child's output.
pub type ChildOutput = Box<dyn AsyncRead + Send + Unpin>;
/// A boxed async writer for a child's stdin.
pub type ChildInput = Box<dyn AsyncWrite + Send + Unpin>;

/// A started child, leader of its own process group.
#[async_trait]
pub trait SpawnedChild: Send + Sync {
    /// The child's pid, which is also its process group id.
    fn pid(&self) -> u32;
    /// Takes the stdin pipe (only with [`StdinMode::Piped`]).
    fn take_stdin(&mut self) -> Option<ChildInput>;
    /// Takes the stdout pipe.
    fn take_stdout(&mut self) -> Option<ChildOutput>;
    /// Takes the stderr pipe.
    fn take_stderr(&mut self) -> Option<ChildOutput>;
    /// Waits for the leader to exit and reaps it. Cancel-safe: dropping the future and calling
    /// again is fine.
    async fn wait(&mut self) -> io::Result<ExitInfo>;
    /// Sends a signal to the whole process group. Returns `false` when the group is already gone.
    fn signal_group(&self, signal: Signal) -> io::Result<bool>;
    /// True while any process of the group is alive (zombies do not count).
    fn group_alive(&self) -> bool;
}

/// The port through which the engine starts processes, so tests can record or script spawns.
pub trait ProviderSpawn: Send + Sync + fmt::Debug {
    /// Starts a child as described. Errors are the operating system's (`NotFound`,
    /// `PermissionDenied`, `E2BIG`, …).
    fn spawn(&self, request: &SpawnRequest) -> io::Result<Box<dyn SpawnedChild>>;
}

/// Starts real processes with tokio.
#[derive(Debug, Clone, Copy, Default)]
pub struct TokioSpawner;

impl ProviderSpawn for TokioSpawner {
    fn spawn(&self, request: &SpawnRequest) -> io::Result<Box<dyn SpawnedChild>> {
        // The one sanctioned process creation in the product; see clippy.toml.
        #[allow(clippy::disallowed_methods)]
        let mut cmd = tokio::process::Command::new(&request.program);
        cmd.args(&request.args)
            .env_clear()
            .envs(request.env.iter().map(|(k, v)| (k, v)))
            .current_dir(&request.cwd)
            .stdin(match request.stdin {
                StdinMode::Null => Stdio::null(),
                StdinMode::Piped => Stdio::piped(),
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            // A dropped handle must not leave a running CLI behind.
            .kill_on_drop(true);
        pdeathsig::install(&mut cmd);
        let child = cmd.spawn()?;
        let pid = child
            .id()
            .ok_or_else(|| io::Error::other("child exited before its pid could be read"))?;
        Ok(Box::new(TokioChild { child, pid }))
    }
}

struct TokioChild {
    child: tokio::process::Child,
    pid: u32,
}

#[async_trait]
impl SpawnedChild for TokioChild {
    fn pid(&self) -> u32 {
        self.pid
    }

    fn take_stdin(&mut self) -> Option<ChildInput> {
        self.child.stdin.take().map(|s| Box::new(s) as ChildInput)
    }

    fn take_stdout(&mut self) -> Option<ChildOutput> {
        self.child.stdout.take().map(|s| Box::new(s) as ChildOutput)
    }

    fn take_stderr(&mut self) -> Option<ChildOutput> {
        self.child.stderr.take().map(|s| Box::new(s) as ChildOutput)
    }

    async fn wait(&mut self) -> io::Result<ExitInfo> {
        let status = self.child.wait().await?;
        Ok(exit_info(status))
    }

    fn signal_group(&self, signal: Signal) -> io::Result<bool> {
        signal_group(self.pid, signal)
    }

    fn group_alive(&self) -> bool {
        group_alive(self.pid)
    }
}

fn exit_info(status: std::process::ExitStatus) -> ExitInfo {
    use std::os::unix::process::ExitStatusExt;
    ExitInfo {
        code: status.code(),
        signal: status.signal(),
    }
}

/// Sends `signal` to process group `pgid`. `Ok(false)` when no process of the group exists.
pub fn signal_group(pgid: u32, signal: Signal) -> io::Result<bool> {
    // 0 would mean our own group and 1 init's: never a child's group.
    if pgid <= 1 {
        return Err(io::Error::other(format!(
            "refusing to signal process group {pgid}"
        )));
    }
    let pgid = i32::try_from(pgid).map_err(|_| io::Error::other("pid out of range"))?;
    match killpg(Pid::from_raw(pgid), signal) {
        Ok(()) => Ok(true),
        Err(nix::errno::Errno::ESRCH) => Ok(false),
        Err(e) => Err(io::Error::from(e)),
    }
}

/// True while a process of group `pgid` is alive. Zombies are dead: an orphaned grandchild that
/// was killed may wait a long time for an init that reaps slowly, and must not stall the kill
/// ladder.
pub fn group_alive(pgid: u32) -> bool {
    let Ok(raw) = i32::try_from(pgid) else {
        return false;
    };
    if raw <= 1 {
        return false;
    }
    // Signal 0 only checks existence; ESRCH settles it cheaply.
    if let Err(nix::errno::Errno::ESRCH) = killpg(Pid::from_raw(raw), None) {
        return false;
    }
    crate::proc::any_live_in_group(pgid).unwrap_or(true)
}

mod pdeathsig {
    //! `PR_SET_PDEATHSIG`: the kernel kills the child when the thread that spawned it dies.
    //!
    //! Children are spawned from tokio worker threads (or the current-thread runtime's thread),
    //! which live as long as the runtime, so a supervisor that crashes takes its children along,
    //! while a healthy one is never surprised by it.

    #[cfg(target_os = "linux")]
    #[allow(unsafe_code)]
    pub fn install(cmd: &mut tokio::process::Command) {
        let parent = std::process::id();
        // SAFETY: the closure runs between fork and exec and calls only async-signal-safe
        // functions (prctl, getppid); it allocates nothing.
        unsafe {
            cmd.pre_exec(move || {
                if libc::prctl(
                    libc::PR_SET_PDEATHSIG,
                    libc::SIGKILL as libc::c_ulong,
                    0,
                    0,
                    0,
                ) != 0
                {
                    return Err(std::io::Error::last_os_error());
                }
                // The parent may have died between fork and prctl; then nobody would kill us.
                if libc::getppid() as u32 != parent {
                    return Err(std::io::Error::other("supervisor exited during spawn"));
                }
                Ok(())
            });
        }
    }

    #[cfg(not(target_os = "linux"))]
    pub fn install(_cmd: &mut tokio::process::Command) {}
}
