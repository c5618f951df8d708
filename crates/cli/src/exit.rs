//! Exit codes: one per outcome a script may want to act on.

use std::fmt;
use std::process::ExitCode;

use corral_ports::ProviderError;

/// The documented exit codes of `corral`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// 0: the task succeeded and its signals are valid.
    Success,
    /// 1: an unexpected internal error.
    Internal,
    /// 2: bad configuration or input (settings, prompt file, arguments).
    BadInput,
    /// 3: the agent reported the task blocked (`task-blocked` signal).
    Blocked,
    /// 4: rate limited and every retry was used.
    RateLimited,
    /// 5: the idle watchdog or the wall-clock limit ended the run.
    Timeout,
    /// 6: the CLI failed (crash, stale session, non-zero exit without results).
    Crashed,
    /// 7: `signals.json` missing or invalid after the corrective retries.
    SignalsInvalid,
    /// 8: the CLI cannot be used (not installed, untested version, model unavailable, refused:
    /// authentication, rejected flags).
    Unavailable,
    /// 9: `corral sprint run` paused at a spend cap (`max_cost_usd`); raising it and running
    /// again continues.
    BudgetExhausted,
    /// 10: the CLI's process tree went over one of its limits (`[limits]`: memory, processes,
    /// disk) and was ended; its session is kept.
    LimitExceeded,
    /// 130: cancelled (Ctrl-C).
    Cancelled,
}

impl Exit {
    /// The numeric code.
    pub fn code(self) -> u8 {
        match self {
            Exit::Success => 0,
            Exit::Internal => 1,
            Exit::BadInput => 2,
            Exit::Blocked => 3,
            Exit::RateLimited => 4,
            Exit::Timeout => 5,
            Exit::Crashed => 6,
            Exit::SignalsInvalid => 7,
            Exit::Unavailable => 8,
            Exit::BudgetExhausted => 9,
            Exit::LimitExceeded => 10,
            Exit::Cancelled => 130,
        }
    }

    /// The exit for a code `corral` returned (from a run record); `None` for a code it never
    /// returns.
    pub fn from_code(code: u8) -> Option<Exit> {
        [
            Exit::Success,
            Exit::Internal,
            Exit::BadInput,
            Exit::Blocked,
            Exit::RateLimited,
            Exit::Timeout,
            Exit::Crashed,
            Exit::SignalsInvalid,
            Exit::Unavailable,
            Exit::BudgetExhausted,
            Exit::LimitExceeded,
            Exit::Cancelled,
        ]
        .into_iter()
        .find(|e| e.code() == code)
    }

    /// The exit code for a provider error.
    pub fn for_error(err: &ProviderError) -> Exit {
        match err {
            // The settings must change: the sandbox, or the network allow-list.
            ProviderError::InvalidSession { .. }
            | ProviderError::Unsandboxed { .. }
            | ProviderError::EgressRefused { .. } => Exit::BadInput,
            ProviderError::CliNotFound { .. }
            | ProviderError::SpawnFailed { .. }
            | ProviderError::ArgvTooLong { .. }
            | ProviderError::VersionMismatch { .. }
            | ProviderError::VersionProbeTimedOut { .. }
            | ProviderError::ModelUnavailable { .. }
            | ProviderError::Refused { .. } => Exit::Unavailable,
            ProviderError::RateLimited { .. } => Exit::RateLimited,
            ProviderError::IdleTimeout { .. } | ProviderError::WallTimeout { .. } => Exit::Timeout,
            ProviderError::StaleSession { .. }
            | ProviderError::Crashed { .. }
            | ProviderError::Io { .. } => Exit::Crashed,
            ProviderError::Cancelled { .. } => Exit::Cancelled,
            ProviderError::LimitExceeded { .. } => Exit::LimitExceeded,
        }
    }

    /// The table printed in `corral run --help`.
    pub const TABLE: &'static str = "\
Exit codes:
  0    success: the task is done and signals.json is valid
  1    unexpected internal error
  2    bad configuration or input (settings, prompt, arguments)
  3    the agent reported the task blocked
  4    rate limited; every retry was used (resume the printed session later)
  5    the idle watchdog or the wall-clock limit ended the run
  6    the CLI failed (crash, stale session, exit without results)
  7    signals.json missing or invalid after the corrective retries
  8    the CLI cannot be used (not installed, untested version, model unavailable,
       refused: authentication, a rejected flag or permission mode)
  10   a limit ended the CLI's process tree ([limits]: memory, processes, disk);
       the session is kept (corral resume <run-id>)
  130  cancelled";
}

impl From<Exit> for ExitCode {
    fn from(exit: Exit) -> Self {
        ExitCode::from(exit.code())
    }
}

impl fmt::Display for Exit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.code())
    }
}

/// An error in what the user gave us (exit code 2), as opposed to an internal failure.
#[derive(Debug)]
pub struct UsageError(pub String);

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// Returns a usage error (exit code 2) from a message.
pub fn usage(message: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(UsageError(message.into()))
}
