//! The `ProviderSpawn` port and its tokio implementation: the one place that creates processes.
//!
//! Every child gets: a forced working directory, an explicit environment (never the ambient one
//! wholesale), stdin that is the prompt (a sealed in-memory file), a pipe, or `/dev/null`,
//! piped stdout and stderr, a new process group whose id is the child's pid, and, on Linux,
//! a group keeper so a crashed supervisor takes its children's whole process groups along (see
//! the `pdeathsig` module).

use std::ffi::OsString;
use std::fmt;
use std::io;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;

use async_trait::async_trait;
use tokio::io::{AsyncRead, AsyncWrite};

use crate::process_group::{self, Registration};

/// Where the child's stdin comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StdinMode {
    /// `/dev/null`: the child sees end of file at once.
    Null,
    /// A pipe the supervisor writes to and then closes ([`SpawnedChild::take_stdin`]).
    Piped,
    /// The prompt, as a sealed in-memory file (Linux `memfd`): the CLI reads it to its end as
    /// it would a pipe, but from a regular file, which is what it reads fastest (Claude Code
    /// starts ~40 ms later with its prompt on a pipe than in a file, measured in
    /// docs/benchmarks.md); the prompt never reaches argv or the disk, and the seals keep the
    /// CLI from rewriting what the record says it was given.
    Prompt(std::sync::Arc<str>),
    /// The supervisor's own terminal: stdin, stdout and stderr are inherited, and the child's
    /// process group becomes the terminal's foreground group (interactive handoff).
    Terminal,
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
    /// Whether the child dies with the supervisor (`PR_SET_PDEATHSIG`).
    pub parent_death_signal: bool,
    /// Descriptors the child keeps across exec, at the same numbers (bubblewrap's status and
    /// block pipes, a seccomp program). The caller keeps them open until the spawn returns; they
    /// stay close-on-exec in the supervisor, so no other child inherits them.
    pub inherit_fds: Vec<std::os::fd::RawFd>,
    /// Where stdout and stderr go (ignored with [`StdinMode::Terminal`], which inherits them).
    pub output: ChildOutputs,
    /// Extensions the child runs last before exec, in order, after every step of the spawn's
    /// own (the native sandbox's write watch is one); empty for most spawns.
    pub pre_exec: Vec<Arc<dyn PreExecHook>>,
}

/// An extension of one spawn: code the child runs between fork and exec, after the spawn's own
/// steps (the group keeper, the descriptors it keeps). A feature plugs into a spawn this way
/// (the native sandbox's seccomp write watch does) without the spawn naming it.
///
/// # Safety
///
/// [`PreExecHook::in_child`] runs in the forked child of a multi-threaded process: an
/// implementation calls only async-signal-safe functions, allocates nothing, takes no lock and
/// does not panic. Whatever it needs is built before the spawn.
#[allow(unsafe_code)]
pub unsafe trait PreExecHook: Send + Sync + fmt::Debug {
    /// Runs in the child just before exec. An error fails the spawn with it.
    fn in_child(&self) -> io::Result<()>;
}

/// Where a child's stdout and stderr go.
#[derive(Debug, Clone, Default)]
pub enum ChildOutputs {
    /// Two pipes the supervisor reads ([`SpawnedChild::take_stdout`], `take_stderr`).
    #[default]
    Pipes,
    /// Two files the child inherits and writes; the supervisor follows them itself, and the
    /// child's `take_stdout`/`take_stderr` give nothing.
    Files {
        /// The child's stdout.
        stdout: std::sync::Arc<std::fs::File>,
        /// The child's stderr.
        stderr: std::sync::Arc<std::fs::File>,
    },
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

/// A started child, leader of its own process group. The group is the child's pid; what is done
/// to the group (signals, liveness, the kill ladder) is `process_group`'s.
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
}

/// The port through which the engine starts processes, so tests can record or script spawns.
pub trait ProviderSpawn: Send + Sync + fmt::Debug {
    /// Starts a child as described. Errors are the operating system's (`NotFound`,
    /// `PermissionDenied`, `E2BIG`, …).
    fn spawn(&self, request: &SpawnRequest) -> io::Result<Box<dyn SpawnedChild>>;
}

/// A sealed in-memory file holding `text`, read from its start: the child's stdin for
/// [`StdinMode::Prompt`]. Close-on-exec here; the child gets it as its descriptor 0. Safe system
/// calls through rustix.
#[cfg(target_os = "linux")]
fn prompt_file(text: &str) -> io::Result<std::fs::File> {
    use rustix::fs::{MemfdFlags, SealFlags, fcntl_add_seals, memfd_create};
    use std::io::{Seek, Write};
    let mut file = std::fs::File::from(memfd_create(
        c"corral-prompt",
        MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING,
    )?);
    file.write_all(text.as_bytes())?;
    fcntl_add_seals(
        &file,
        SealFlags::SEAL | SealFlags::WRITE | SealFlags::GROW | SealFlags::SHRINK,
    )?;
    file.rewind()?;
    Ok(file)
}

/// Without memfd (not Linux): an unnamed file could not be kept off the disk, so the prompt
/// mode is refused; a pipe ([`StdinMode::Piped`]) still works.
#[cfg(not(target_os = "linux"))]
fn prompt_file(_text: &str) -> io::Result<std::fs::File> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "a prompt file on stdin needs Linux memfd",
    ))
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
            .stdin(match &request.stdin {
                StdinMode::Null => Stdio::null(),
                StdinMode::Piped => Stdio::piped(),
                StdinMode::Prompt(text) => Stdio::from(prompt_file(text)?),
                StdinMode::Terminal => Stdio::inherit(),
            })
            .process_group(0)
            // A dropped handle must not leave a running CLI behind.
            .kill_on_drop(true);
        if request.stdin == StdinMode::Terminal {
            cmd.stdout(Stdio::inherit()).stderr(Stdio::inherit());
            terminal::take_foreground_in_child(&mut cmd);
        } else {
            match &request.output {
                ChildOutputs::Pipes => {
                    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
                }
                ChildOutputs::Files { stdout, stderr } => {
                    // The child gets its own descriptors of the same open files (appending).
                    cmd.stdout(Stdio::from(stdout.try_clone()?))
                        .stderr(Stdio::from(stderr.try_clone()?));
                }
            }
        }
        if request.parent_death_signal {
            pdeathsig::install(&mut cmd);
        }
        if !request.inherit_fds.is_empty() {
            inherit::install(&mut cmd, request.inherit_fds.clone());
        }
        // Last: every step before exec runs unwatched, the keeper included.
        for hook in &request.pre_exec {
            hooks::install(&mut cmd, Arc::clone(hook));
        }
        // Registered before the spawn returns, so no sweep can see the pid unregistered.
        let registration = Registration::lock()?;
        let child = cmd.spawn()?;
        let pid = child
            .id()
            .ok_or_else(|| io::Error::other("child exited before its pid could be read"))?;
        registration.insert(pid);
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
        process_group::reap_keeper(self.pid).await;
        process_group::forget(self.pid);
        process_group::reap_exited_members(self.pid);
        Ok(exit_info(status))
    }
}

fn exit_info(status: std::process::ExitStatus) -> ExitInfo {
    use std::os::unix::process::ExitStatusExt;
    ExitInfo {
        code: status.code(),
        signal: status.signal(),
    }
}

pub mod terminal {
    //! Job control for the interactive handoff: the child's process group takes the terminal
    //! (`tcsetpgrp`) so it can read keys without `SIGTTIN`, and the supervisor takes it back after.
    //! `SIGTTOU` is blocked around each `tcsetpgrp`, since a background group may not otherwise
    //! change the foreground group.

    use nix::sys::signal::{SigSet, SigmaskHow, Signal};
    use nix::unistd::Pid;

    fn with_sigttou_blocked<T>(f: impl FnOnce() -> T) -> T {
        let mut set = SigSet::empty();
        set.add(Signal::SIGTTOU);
        let mut old = SigSet::empty();
        let blocked =
            nix::sys::signal::pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&set), Some(&mut old))
                .is_ok();
        let out = f();
        if blocked {
            let _ = nix::sys::signal::pthread_sigmask(SigmaskHow::SIG_SETMASK, Some(&old), None);
        }
        out
    }

    /// Makes `pgrp` the foreground group of the terminal on stdin, if stdin is a terminal.
    pub fn give_terminal_to(pgrp: u32) -> bool {
        let stdin = std::io::stdin();
        if !nix::unistd::isatty(&stdin).unwrap_or(false) {
            return false;
        }
        let Ok(raw) = i32::try_from(pgrp) else {
            return false;
        };
        with_sigttou_blocked(|| nix::unistd::tcsetpgrp(&stdin, Pid::from_raw(raw)).is_ok())
    }

    /// The terminal's settings, to restore after the child changed them (raw mode, echo).
    pub fn save() -> Option<nix::sys::termios::Termios> {
        nix::sys::termios::tcgetattr(std::io::stdin()).ok()
    }

    /// Takes the terminal back for this process's group and restores its settings.
    pub fn restore(saved: Option<&nix::sys::termios::Termios>) {
        let me = nix::unistd::getpgrp();
        let stdin = std::io::stdin();
        with_sigttou_blocked(|| {
            let _ = nix::unistd::tcsetpgrp(&stdin, me);
            if let Some(termios) = saved {
                let _ = nix::sys::termios::tcsetattr(
                    &stdin,
                    nix::sys::termios::SetArg::TCSADRAIN,
                    termios,
                );
            }
        });
    }

    /// In the child, before exec: take the foreground too, so the CLI never reads the terminal
    /// while still in the background (the parent does the same right after the spawn).
    #[allow(unsafe_code)]
    pub fn take_foreground_in_child(cmd: &mut tokio::process::Command) {
        // SAFETY: runs between fork and exec; it only calls sigprocmask, ioctl(TIOCSPGRP) and
        // getpid, which are async-signal-safe, and allocates nothing.
        unsafe {
            cmd.pre_exec(|| {
                let mut set: libc::sigset_t = std::mem::zeroed();
                libc::sigemptyset(&mut set);
                libc::sigaddset(&mut set, libc::SIGTTOU);
                let mut old = std::mem::zeroed::<libc::sigset_t>();
                libc::pthread_sigmask(libc::SIG_BLOCK, &set, &mut old);
                if libc::isatty(0) == 1 {
                    libc::tcsetpgrp(0, libc::getpid());
                }
                libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
                Ok(())
            });
        }
    }
}

mod hooks {
    //! The caller's extensions, each run by the child as a step before exec.

    use std::sync::Arc;

    use super::PreExecHook;

    #[allow(unsafe_code)]
    pub fn install(cmd: &mut tokio::process::Command, hook: Arc<dyn PreExecHook>) {
        // SAFETY: the closure runs between fork and exec; `PreExecHook` is an unsafe trait whose
        // contract holds `in_child` to async-signal-safe calls without allocation, and the Arc
        // is only read.
        unsafe {
            cmd.pre_exec(move || hook.in_child());
        }
    }
}

mod inherit {
    //! Descriptors a child keeps: their close-on-exec flag is cleared in the child only, between
    //! fork and exec, so concurrent spawns never inherit them.

    #[allow(unsafe_code)]
    pub fn install(cmd: &mut tokio::process::Command, fds: Vec<std::os::fd::RawFd>) {
        // SAFETY: the closure runs between fork and exec and only calls fcntl, which is
        // async-signal-safe; the vector was allocated before the fork and is only read.
        unsafe {
            cmd.pre_exec(move || {
                for &fd in &fds {
                    let flags = libc::fcntl(fd, libc::F_GETFD);
                    if flags < 0 || libc::fcntl(fd, libc::F_SETFD, flags & !libc::FD_CLOEXEC) < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                Ok(())
            });
        }
    }
}

mod pdeathsig {
    //! The whole process group dies with the supervisor, however the supervisor dies.
    //!
    //! `PR_SET_PDEATHSIG` makes the kernel kill a child when the thread that spawned it dies,
    //! but only that child: the rest of its process group (the CLI's own children) would live on
    //! after a SIGKILLed supervisor. So between fork and exec the child opens a pidfd of the
    //! supervisor and forks a *keeper* into its process group, then goes on to exec the CLI
    //! (which stays the group's leader, with its own pid, arguments, environment and exit
    //! status). The keeper closes every other inherited descriptor (so pipes reach end of file
    //! when the CLI closes them, and the standard library's exec-error pipe is the CLI's alone),
    //! ignores the signals the kill ladder and the terminal send to the group, dies with the CLI
    //! (its own death signal), and waits for the pidfd to say the supervisor is gone: then it
    //! kills its whole group, the CLI included (`kill(0, SIGKILL)`). The CLI has no death signal
    //! of its own then: it would die first and take the keeper along before the keeper could
    //! reach the rest of the group. After the CLI is reaped, [`super::TokioChild`] reaps the
    //! keeper, which the kernel hands to the supervisor (a child subreaper) when the CLI exits.
    //!
    //! Without pidfds (a kernel before 5.3) or when the second fork fails, the CLI alone gets
    //! `PR_SET_PDEATHSIG`, as before the keeper existed. The keeper dies with the CLI, so
    //! processes the CLI leaves behind in its group when it exits are the supervisor's to end
    //! (the leftover grace, then the kill ladder); a supervisor killed within that grace leaves
    //! them running.

    #[cfg(target_os = "linux")]
    #[allow(unsafe_code)]
    pub fn install(cmd: &mut tokio::process::Command) {
        let supervisor = std::process::id() as libc::pid_t;
        // SAFETY: the closure runs between fork and exec, in a single-threaded child, and calls
        // only async-signal-safe functions (syscall(pidfd_open), prctl, getppid, getpid, fork,
        // close, and in the keeper close_range/close, signal, poll, kill, _exit); it allocates
        // nothing.
        unsafe {
            cmd.pre_exec(move || {
                // Opened here, while the supervisor is certainly our parent (checked below, after
                // the open), so the pidfd cannot name a process that reused the pid.
                let pidfd = libc::syscall(libc::SYS_pidfd_open, supervisor, 0u32);
                if libc::getppid() != supervisor {
                    return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
                }
                if pidfd >= 0 {
                    let pidfd = pidfd as libc::c_int;
                    let cli = libc::getpid();
                    #[allow(clippy::disallowed_methods)] // the group keeper (clippy.toml)
                    match libc::fork() {
                        0 => keep_group(cli, pidfd),
                        // The pidfd is close-on-exec: the CLI never sees it.
                        keeper if keeper > 0 => return Ok(()),
                        _ => {
                            libc::close(pidfd);
                        }
                    }
                }
                die_with_supervisor(supervisor)
            });
        }
    }

    /// The fallback: only the CLI dies with the supervisor (`PR_SET_PDEATHSIG`).
    #[cfg(target_os = "linux")]
    #[allow(unsafe_code)]
    unsafe fn die_with_supervisor(supervisor: libc::pid_t) -> std::io::Result<()> {
        // SAFETY: async-signal-safe calls only (prctl, getppid), between fork and exec.
        unsafe {
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
            // The supervisor may have died before the death signal was armed.
            if libc::getppid() != supervisor {
                return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
            }
        }
        Ok(())
    }

    /// The keeper's life: see the module documentation. Never returns.
    #[cfg(target_os = "linux")]
    #[allow(unsafe_code)]
    unsafe fn keep_group(cli: libc::pid_t, supervisor: libc::c_int) -> ! {
        // SAFETY: async-signal-safe calls only, in the single-threaded keeper.
        unsafe {
            // Dies with the CLI, which is its parent until then (it may have failed to exec and
            // exited already).
            libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGKILL as libc::c_ulong,
                0,
                0,
                0,
            );
            if libc::getppid() != cli {
                libc::_exit(0);
            }
            close_all_but(supervisor);
            for signal in [
                libc::SIGTERM,
                libc::SIGINT,
                libc::SIGHUP,
                libc::SIGQUIT,
                libc::SIGPIPE,
                libc::SIGTSTP,
                libc::SIGTTIN,
                libc::SIGTTOU,
                libc::SIGUSR1,
                libc::SIGUSR2,
            ] {
                libc::signal(signal, libc::SIG_IGN);
            }
            let mut gone = libc::pollfd {
                fd: supervisor,
                events: libc::POLLIN,
                revents: 0,
            };
            loop {
                // Readable once the supervisor has exited, however it died; EINTR polls again.
                if libc::poll(&mut gone, 1, -1) > 0 {
                    libc::kill(0, libc::SIGKILL);
                }
            }
        }
    }

    /// Closes every descriptor but `keep`.
    #[cfg(target_os = "linux")]
    #[allow(unsafe_code)]
    unsafe fn close_all_but(keep: libc::c_int) {
        let keep = keep as libc::c_uint;
        // SAFETY: close_range and close are async-signal-safe and only touch descriptors.
        unsafe {
            let below =
                keep == 0 || libc::syscall(libc::SYS_close_range, 0u32, keep - 1, 0u32) == 0;
            let above = libc::syscall(libc::SYS_close_range, keep + 1, u32::MAX, 0u32) == 0;
            if !(below && above) {
                // No close_range (a kernel before 5.9): the usual descriptor range, one by one.
                for fd in 0..4096 {
                    if fd != keep as libc::c_int {
                        libc::close(fd);
                    }
                }
            }
        }
    }

    #[cfg(not(target_os = "linux"))]
    pub fn install(_cmd: &mut tokio::process::Command) {}
}
