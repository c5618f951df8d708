//! The engine's knobs, with the defaults the design names. Settings files are not read here; the
//! composition root fills this struct.

use std::time::Duration;

use crate::backoff::RetryPolicy;
use crate::streams::{OutputCapture, RawStreamRetention};
use corral_process::argv::ArgvPlatform;
use corral_process::env::EnvInherit;
use corral_sandbox::SandboxConfig;

/// How the engine supervises runs.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// Kill the tree after this long without a byte on stdout or stderr (default 300 s).
    pub idle_timeout: Duration,
    /// Kill the tree after this long in total (default off).
    pub wall_timeout: Option<Duration>,
    /// Time between SIGTERM and SIGKILL (default 10 s).
    pub kill_grace: Duration,
    /// Time the CLI gets to exit after its terminal event (default 5 s).
    pub post_terminal_grace: Duration,
    /// Time the rest of the group may keep running (and its output open) after the leader
    /// exited (default 2 s).
    pub leftover_grace: Duration,
    /// Longest stdout line kept whole (default 8 MiB); a longer JSON line is shortened to fit,
    /// any other is recorded as oversized (see `docs/output.md`).
    pub max_line_bytes: usize,
    /// How the CLI's stdout and stderr reach the engine (default: files in the run directory,
    /// followed as they grow).
    pub capture: OutputCapture,
    /// What becomes of those files when the run ends (default: compressed).
    pub raw_streams: RawStreamRetention,
    /// Stderr kept for error reports (default 16 KiB).
    pub stderr_tail_bytes: usize,
    /// Stdout kept for text classifiers (default 8 KiB).
    pub stdout_scan_bytes: usize,
    /// Stderr bytes per attempt written to the execution log before it is summarised (256 KiB).
    pub stderr_log_budget: usize,
    /// Rate-limit retries.
    pub retry: RetryPolicy,
    /// Which ambient variables children start from.
    pub env_inherit: EnvInherit,
    /// Extra variables the user allows through.
    pub env_allow: Vec<String>,
    /// The ambient environment every child's environment is made from (the CLI's, git's, the
    /// version probe's); `None` reads this process's environment. See [`EngineConfig::ambient`].
    pub ambient_env: Option<Vec<(String, String)>>,
    /// Command-line limits to check against.
    pub argv_platform: ArgvPlatform,
    /// Seed for backoff jitter; `None` seeds from the clock.
    pub jitter_seed: Option<u64>,
    /// Ask the kernel to kill each CLI when the supervisor dies (`PR_SET_PDEATHSIG`, default on).
    /// It needs a pre-exec hook, which makes the spawn a `fork` instead of a `posix_spawn`:
    /// about a millisecond per start on a small supervisor (see `docs/benchmarks.md`).
    pub parent_death_signal: bool,
    /// The sandbox: backend, consent to degrade, network and home policy.
    pub sandbox: SandboxConfig,
    /// Make this process a child subreaper at its first run (default on), so a descendant that
    /// left its process group is re-parented here and the sweep finds it among this process's
    /// own children. A program embedding the engine that manages orphans itself can turn it off;
    /// the sweep then reads every process on the machine. It is a property of the whole process.
    pub child_subreaper: bool,
    /// The file that keeps each CLI binary's `--version` answer (see
    /// [`crate::user_version_cache`]), so an unchanged CLI is asked once, not before every run;
    /// `None` (the default) asks every time.
    pub version_cache: Option<std::path::PathBuf>,
    /// The directory of the rate-limit gate (see [`crate::user_rate_limit_dir`]): a run that
    /// learns its provider account is limited records until when, and every run on that account
    /// waits for it before its next spawn. `None` (the default) shares nothing: each run meets
    /// its own rate limits.
    pub rate_limit_gate: Option<std::path::PathBuf>,
}

impl EngineConfig {
    /// The ambient environment: [`EngineConfig::ambient_env`], or this process's environment
    /// when it is `None`. Nothing in the engine reads the process environment any other way.
    pub fn ambient(&self) -> Vec<(String, String)> {
        match &self.ambient_env {
            Some(vars) => vars.clone(),
            None => corral_process::process_env(),
        }
    }
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            idle_timeout: Duration::from_millis(300_000),
            wall_timeout: None,
            kill_grace: Duration::from_secs(10),
            post_terminal_grace: Duration::from_secs(5),
            leftover_grace: Duration::from_secs(2),
            max_line_bytes: 8 * 1024 * 1024,
            capture: OutputCapture::default(),
            raw_streams: RawStreamRetention::default(),
            stderr_tail_bytes: 16 * 1024,
            stdout_scan_bytes: 8 * 1024,
            stderr_log_budget: 256 * 1024,
            retry: RetryPolicy::default(),
            env_inherit: EnvInherit::Core,
            env_allow: Vec::new(),
            ambient_env: None,
            argv_platform: ArgvPlatform::current(),
            jitter_seed: None,
            parent_death_signal: true,
            sandbox: SandboxConfig::default(),
            child_subreaper: true,
            version_cache: None,
            rate_limit_gate: None,
        }
    }
}
