//! [`HostCommandRunner`]: a [`CommandRunner`] for tests of crates that may not depend on the
//! engine (the sprint), running commands on the host.
//!
//! It keeps the port's contract where a test can observe it (its own process group, `/dev/null`
//! stdin, an explicit environment, bounded streams read at once, the group killed on timeout or
//! cancellation, `HostGit` only for `git`), but it is no sandbox: a `Sandboxed` command runs on
//! the host like any other. Product code gets the engine's runner through the composition root.

use std::process::Stdio;
use std::time::Instant;

use async_trait::async_trait;
use corral_ports::{
    CancellationToken, CommandEnd, CommandError, CommandOutput, CommandRunner, CommandSpec,
    CommandStream, Confinement,
};
use tokio::io::{AsyncRead, AsyncReadExt};

/// Runs commands on the host, for tests.
#[derive(Debug, Clone, Default)]
pub struct HostCommandRunner {
    /// Variables every command gets (after `PATH` and `HOME`, before the spec's own).
    pub env: Vec<(String, String)>,
}

impl HostCommandRunner {
    /// A runner passing on `PATH` and `HOME` only.
    pub fn new() -> Self {
        Self::default()
    }
}

async fn read_bounded<R: AsyncRead + Unpin>(mut reader: R, limit: usize) -> CommandStream {
    let mut kept = Vec::new();
    let mut total = 0u64;
    let mut buf = [0u8; 8192];
    loop {
        match reader.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                total += n as u64;
                let room = limit.saturating_sub(kept.len());
                kept.extend_from_slice(&buf[..n.min(room)]);
            }
        }
    }
    CommandStream {
        text: String::from_utf8_lossy(&kept).into_owned(),
        total_bytes: total,
    }
}

fn kill_group(pid: Option<u32>) {
    if let Some(pid) = pid.and_then(|p| i32::try_from(p).ok()) {
        // A negative pid is the process group the child leads (it was started as its leader).
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(-pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

#[async_trait]
impl CommandRunner for HostCommandRunner {
    async fn run(
        &self,
        spec: CommandSpec,
        cancel: &CancellationToken,
    ) -> Result<CommandOutput, CommandError> {
        if spec.confinement == Confinement::HostGit && spec.program != "git" {
            return Err(CommandError::Refused {
                program: spec.program,
                reason: "host git runs git only".to_string(),
            });
        }
        let mut cmd = tokio::process::Command::new(&spec.program);
        cmd.args(&spec.args)
            .current_dir(&spec.cwd)
            .env_clear()
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        for key in ["PATH", "HOME"] {
            if let Some(value) = std::env::var_os(key) {
                cmd.env(key, value);
            }
        }
        if spec.confinement == Confinement::HostGit {
            cmd.env("GIT_CONFIG_NOSYSTEM", "1")
                .env("GIT_CONFIG_GLOBAL", "/dev/null")
                .env("GIT_TERMINAL_PROMPT", "0");
        }
        cmd.envs(self.env.iter().cloned());
        cmd.envs(spec.env.iter().cloned());
        let started = Instant::now();
        let mut child = cmd.spawn().map_err(|e| CommandError::Spawn {
            program: spec.program.clone(),
            reason: e.to_string(),
        })?;
        let pid = child.id();
        let (Some(stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
            kill_group(pid);
            return Err(CommandError::Io {
                program: spec.program,
                reason: "no pipes".to_string(),
            });
        };
        let out = tokio::spawn(read_bounded(stdout, spec.output_limit));
        let err = tokio::spawn(read_bounded(stderr, spec.output_limit));
        let end = tokio::select! {
            status = child.wait() => match status {
                Ok(status) => {
                    use std::os::unix::process::ExitStatusExt;
                    match (status.code(), status.signal()) {
                        (Some(code), _) => CommandEnd::Exited(code),
                        (None, Some(signal)) => CommandEnd::Signalled(signal),
                        (None, None) => CommandEnd::Exited(-1),
                    }
                }
                Err(e) => {
                    kill_group(pid);
                    return Err(CommandError::Io { program: spec.program, reason: e.to_string() });
                }
            },
            () = tokio::time::sleep(spec.timeout) => CommandEnd::TimedOut,
            () = cancel.cancelled() => CommandEnd::Cancelled,
        };
        // The group goes in every case: a command that exited may have left a child behind.
        kill_group(pid);
        let _ = child.wait().await;
        let stdout = out.await.unwrap_or_default();
        let stderr = err.await.unwrap_or_default();
        Ok(CommandOutput {
            end,
            stdout,
            stderr,
            duration: started.elapsed(),
        })
    }
}
