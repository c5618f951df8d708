//! The error taxonomy every provider reports in. Each variant says whether retrying can help.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::session::{Outcome, ProviderId, SessionId};
use crate::usage::Usage;

/// What was gathered before a run failed, so that nothing is lost: the session to resume, the
/// usage that was paid for, and where the full record lies.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunEvidence {
    /// The last session id seen (already persisted to `session-id.txt`).
    #[serde(alias = "session_id")]
    pub session_id: Option<SessionId>,
    /// Usage summed over every attempt.
    pub usage: Usage,
    /// How many times the CLI was started.
    pub attempts: u32,
    /// Wall time from the first spawn to the end.
    #[serde(alias = "duration_ms")]
    pub duration_ms: u64,
    /// The last exit code, if the CLI exited rather than being killed.
    #[serde(alias = "exit_code")]
    pub exit_code: Option<i32>,
    /// The signal that ended the CLI, if one did.
    pub signal: Option<i32>,
    /// The last 16 KiB of the CLI's stderr, decoded lossily.
    #[serde(alias = "stderr_tail")]
    pub stderr_tail: String,
    /// The execution log (`events.jsonl`), if one was written.
    #[serde(alias = "log_path")]
    pub log_path: Option<PathBuf>,
    /// What the sandbox enforced for this run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attestation: Option<crate::Attestation>,
}

/// How a caller should treat an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorClass {
    /// Retrying later, or resuming the session, can succeed.
    Retryable,
    /// Retrying the same request will fail the same way; something must change first.
    Permanent,
    /// The caller asked for it; not an error of the agent.
    Cancelled,
}

/// Why a provider run did not produce a [`crate::ProviderOutput`].
///
/// A refusal before the CLI runs (the CLI missing, an untested version, a session the provider
/// cannot continue, a dirty tree, no enforcing sandbox) reads the same way for every cause: one
/// line naming what is refused and why, each fact once, then a separate `hint:` line with the fix.
#[derive(Debug, thiserror::Error)]
pub enum ProviderError {
    /// The CLI's program was not found or is not executable. Not retryable: install the CLI or
    /// fix the configured command path.
    #[error(
        "{provider}: cannot start {program:?}: {reason}\n\
         hint: is the CLI installed and on PATH? Install it, or set providers.{provider}.command \
         to its path (`corral doctor --provider {provider}` checks it)"
    )]
    CliNotFound {
        /// The provider.
        provider: ProviderId,
        /// The program that was looked for.
        program: String,
        /// The operating system's words.
        reason: String,
    },
    /// Starting the process failed for another reason. Not retryable as is.
    #[error("{provider}: failed to start {program:?}: {reason}")]
    SpawnFailed {
        /// The provider.
        provider: ProviderId,
        /// The program.
        program: String,
        /// The operating system's words.
        reason: String,
    },
    /// The command line would be longer than the platform allows. Not retryable: the prompt or
    /// arguments must shrink (the prompt itself never goes into argv).
    #[error(
        "{provider}: command line too long: {measured} bytes measured, limit {limit} ({limit_name})"
    )]
    ArgvTooLong {
        /// The provider.
        provider: ProviderId,
        /// The measured size in bytes.
        measured: usize,
        /// The limit that was exceeded.
        limit: usize,
        /// Which limit (`MAX_ARG_STRLEN`, `ARG_MAX`, `CreateProcess`, `cmd.exe`).
        limit_name: String,
    },
    /// The installed CLI's version is outside the tested range. Not retryable: install a tested
    /// version or pass the explicit override.
    #[error(
        "{provider}: refusing to run: {program} reports version {found}, outside the tested range \
         {required}\n\
         hint: install a tested version, or run this one anyway with \
         providers.{provider}.allow_untested_version = true (or widen \
         providers.{provider}.tested_versions)"
    )]
    VersionMismatch {
        /// The provider.
        provider: ProviderId,
        /// The program.
        program: String,
        /// The version found (or the unparsed output).
        found: String,
        /// The tested range.
        required: String,
    },
    /// The CLI did not answer its version probe (`--version`) in time, so its version is unknown
    /// and the CLI was not run. Not a version mismatch: nothing says the version is wrong.
    /// Retryable: on a busy machine a CLI can be slow to start; try again later, or give the probe
    /// longer (the provider's `version_timeout`).
    #[error(
        "{provider}: refusing to run: {program} did not answer {args} within {waited:?}, so its \
         version is unknown\n\
         hint: the machine may be too busy to start it; try again when it is less loaded (a \
         library caller can give the probe longer: the provider settings' version_timeout)"
    )]
    VersionProbeTimedOut {
        /// The provider.
        provider: ProviderId,
        /// The program.
        program: String,
        /// The probe's arguments, as one string (usually `--version`).
        args: String,
        /// How long the probe waited.
        waited: Duration,
    },
    /// The session asks for something this provider cannot do or that is malformed. Not
    /// retryable.
    #[error("{provider}: invalid session: {reason}{}", hint_line(.hint.as_deref()))]
    InvalidSession {
        /// The provider.
        provider: ProviderId,
        /// What was wrong.
        reason: String,
        /// What the user can do, when that is more than fixing the value `reason` names.
        hint: Option<String>,
    },
    /// Rate limited and every retry was used. Retryable later (resume `evidence.session_id`).
    #[error("{provider}: rate limited; {}{}", limit_words(*.retries, *.auto_resume_off), reset_hint(*.resets_at_epoch_s))]
    RateLimited {
        /// The provider.
        provider: ProviderId,
        /// Retries used before giving up.
        retries: u32,
        /// When the limit resets, if known.
        resets_at_epoch_s: Option<u64>,
        /// The limit was long and `retry.auto_resume` is off: the run stopped at once instead of
        /// waiting for the reset, with retries left. Resume `evidence.session_id` once it passed.
        auto_resume_off: bool,
        /// What was gathered.
        evidence: Box<RunEvidence>,
    },
    /// The model is not available. Not retryable: choose another model.
    #[error("{provider}: model unavailable: {message}")]
    ModelUnavailable {
        /// The provider.
        provider: ProviderId,
        /// The CLI's words.
        message: String,
        /// What was gathered.
        evidence: Box<RunEvidence>,
    },
    /// The CLI refused the request for a reason retrying cannot fix: failed authentication, a
    /// rejected command line, a refused permission mode. Not retryable: the message says what to
    /// change.
    #[error("{provider}: the CLI refused to run: {message}")]
    Refused {
        /// The provider.
        provider: ProviderId,
        /// What the CLI refused and what to do about it.
        message: String,
        /// What was gathered.
        evidence: Box<RunEvidence>,
    },
    /// Corral's own egress proxy refused a connection the CLI needed, or would have refused an
    /// endpoint the CLI's own configuration names (then nothing was started): the host is not
    /// on the run's network allow-list. This is never the CLI's failure, whatever the CLI then
    /// printed about it (an HTTP 403 read as failed authentication). Not retryable: the
    /// allow-list must change (`hint` names the entry).
    #[error(
        "{provider}: Corral's network allow-list does not include {target}: {detail}\nhint: {hint}"
    )]
    EgressRefused {
        /// The provider.
        provider: ProviderId,
        /// `host:port` as the CLI asked for it.
        target: String,
        /// What asked for it, or why the proxy refused it.
        detail: String,
        /// The `sandbox.network_allow` entry (and the flag) that allows it.
        hint: String,
        /// What was gathered (empty when refused before the spawn).
        evidence: Box<RunEvidence>,
    },
    /// The session to resume does not exist, and no cold run followed (the caller asked for
    /// none) or the one cold run also failed. Not retryable with the same session id.
    #[error("{provider}: session {session_id} not found")]
    StaleSession {
        /// The provider.
        provider: ProviderId,
        /// The id that was not found.
        session_id: SessionId,
        /// What was gathered.
        evidence: Box<RunEvidence>,
    },
    /// The CLI ended without success and left no `signals.json`: it crashed, reported an
    /// error, or exited 0 without the terminal event it always prints. Retryable (resume the
    /// session if one was captured).
    #[error("{provider}: the CLI failed ({}){}", exit_hint(.evidence), reason_hint(.reason))]
    Crashed {
        /// The provider.
        provider: ProviderId,
        /// What the supervisor saw, in a few words ("it exited 0 without its terminal event, …");
        /// empty when there is nothing to add to the exit status.
        reason: String,
        /// What was gathered.
        evidence: Box<RunEvidence>,
    },
    /// The CLI printed nothing for longer than the idle watchdog allows and was killed with its
    /// whole process tree. Retryable.
    #[error("{provider}: no output for {idle:?}; the process tree was killed")]
    IdleTimeout {
        /// The provider.
        provider: ProviderId,
        /// The idle limit.
        idle: Duration,
        /// What was gathered.
        evidence: Box<RunEvidence>,
    },
    /// The wall-clock limit passed and the whole process tree was killed. Retryable, with a
    /// longer limit or a smaller task.
    #[error("{provider}: still running after {limit:?}; the process tree was killed")]
    WallTimeout {
        /// The provider.
        provider: ProviderId,
        /// The wall-clock limit.
        limit: Duration,
        /// What was gathered.
        evidence: Box<RunEvidence>,
    },
    /// The CLI's process tree went over one of its limits (`[limits]`: memory, processes,
    /// disk; a tool it ran, most often) and Corral ended all of it, so that one runaway build,
    /// test suite or fork loop takes neither the machine nor a sibling task with it. Not
    /// retryable as is: the same work meets the same limit. Raise the limit, or resume the
    /// kept session (`evidence.session_id`) with instructions that use less.
    #[error(
        "{provider}: stopped at its {exceeded}: {what}\n\
         hint: raise [limits] {} in your settings, or resume the session and ask for work that \
         uses less",
        .exceeded.limit
    )]
    LimitExceeded {
        /// The provider.
        provider: ProviderId,
        /// Which limit, its cap and the highest use seen.
        exceeded: crate::LimitExceeded,
        /// What was seen, in words ("the kernel killed 1 process(es) out of memory").
        what: String,
        /// What was gathered.
        evidence: Box<RunEvidence>,
    },
    /// The caller cancelled. The process tree was killed; the session id is kept. Not an agent
    /// failure; resume it when wanted.
    #[error("{provider}: cancelled")]
    Cancelled {
        /// The provider.
        provider: ProviderId,
        /// What was gathered.
        evidence: Box<RunEvidence>,
    },
    /// The execution policy asks for guarantees the chosen sandbox backend cannot enforce, and
    /// running degraded was not consented to. Not retryable: install or allow an enforcing
    /// backend (bubblewrap), relax the policy, or consent (`--allow-degraded-native`).
    ///
    /// The message names each unenforced guarantee once and the reason once (`reason`; the
    /// per-guarantee detail stays in `unenforced` for the attestation).
    #[error(
        "{provider}: refusing to run: the {backend} backend cannot enforce {} ({reason})\n\
         hint: {hint}",
        guarantee_list(.unenforced)
    )]
    Unsandboxed {
        /// The provider.
        provider: ProviderId,
        /// The backend that would have run.
        backend: crate::SandboxBackend,
        /// Why that backend, in one phrase (`bubblewrap is not usable: …`).
        reason: String,
        /// Each guarantee it cannot enforce, and why.
        unenforced: Vec<crate::Unenforced>,
        /// What the user can do.
        hint: String,
    },
    /// Writing the run's own files failed (run directory, log, session id file). Not retryable
    /// until the disk problem is fixed.
    #[error("{provider}: cannot write {path:?}: {reason}")]
    Io {
        /// The provider.
        provider: ProviderId,
        /// The file or directory.
        path: PathBuf,
        /// The operating system's words.
        reason: String,
    },
}

/// `\nhint: <hint>`, or nothing.
fn hint_line(hint: Option<&str>) -> String {
    hint.map(|h| format!("\nhint: {h}")).unwrap_or_default()
}

/// The guarantees' names, each once, in order, comma-separated.
fn guarantee_list(unenforced: &[crate::Unenforced]) -> String {
    let mut names: Vec<String> = Vec::new();
    for name in unenforced.iter().map(|u| u.guarantee.to_string()) {
        if !names.contains(&name) {
            names.push(name);
        }
    }
    names.join(", ")
}

fn limit_words(retries: u32, auto_resume_off: bool) -> String {
    if auto_resume_off {
        "stopped instead of waiting for the reset (retry.auto_resume is off)".to_string()
    } else {
        format!("{retries} retries used")
    }
}

fn reset_hint(resets_at: Option<u64>) -> String {
    match resets_at {
        Some(t) => format!("; the limit resets at {t} (Unix seconds)"),
        None => String::new(),
    }
}

fn reason_hint(reason: &str) -> String {
    if reason.is_empty() {
        String::new()
    } else {
        format!(": {reason}")
    }
}

fn exit_hint(evidence: &RunEvidence) -> String {
    match (evidence.exit_code, evidence.signal) {
        (Some(code), _) => format!("exit code {code}"),
        (None, Some(sig)) => format!("killed by signal {sig}"),
        (None, None) => "no exit status".to_string(),
    }
}

impl ProviderError {
    /// Whether retrying can help.
    pub fn class(&self) -> ErrorClass {
        match self {
            ProviderError::RateLimited { .. }
            | ProviderError::Crashed { .. }
            | ProviderError::IdleTimeout { .. }
            | ProviderError::WallTimeout { .. }
            | ProviderError::VersionProbeTimedOut { .. } => ErrorClass::Retryable,
            ProviderError::CliNotFound { .. }
            | ProviderError::SpawnFailed { .. }
            | ProviderError::ArgvTooLong { .. }
            | ProviderError::VersionMismatch { .. }
            | ProviderError::InvalidSession { .. }
            | ProviderError::ModelUnavailable { .. }
            | ProviderError::Refused { .. }
            | ProviderError::EgressRefused { .. }
            | ProviderError::Unsandboxed { .. }
            | ProviderError::StaleSession { .. }
            | ProviderError::LimitExceeded { .. }
            | ProviderError::Io { .. } => ErrorClass::Permanent,
            ProviderError::Cancelled { .. } => ErrorClass::Cancelled,
        }
    }

    /// True for [`ErrorClass::Retryable`].
    pub fn is_retryable(&self) -> bool {
        self.class() == ErrorClass::Retryable
    }

    /// The outcome this error stands for.
    pub fn outcome(&self) -> Outcome {
        match self {
            ProviderError::CliNotFound { .. }
            | ProviderError::SpawnFailed { .. }
            | ProviderError::ArgvTooLong { .. } => Outcome::SpawnFailed,
            ProviderError::VersionMismatch { .. }
            | ProviderError::VersionProbeTimedOut { .. }
            | ProviderError::InvalidSession { .. }
            | ProviderError::Unsandboxed { .. }
            | ProviderError::Io { .. } => Outcome::NotStarted,
            ProviderError::RateLimited { .. } => Outcome::RateLimited,
            ProviderError::ModelUnavailable { .. } => Outcome::ModelUnavailable,
            ProviderError::Refused { .. } | ProviderError::EgressRefused { .. } => Outcome::Refused,
            ProviderError::StaleSession { .. } => Outcome::StaleSession,
            ProviderError::Crashed { .. } => Outcome::Crashed,
            ProviderError::IdleTimeout { .. } => Outcome::IdleTimeout,
            ProviderError::WallTimeout { .. } => Outcome::WallTimeout,
            ProviderError::Cancelled { .. } => Outcome::Cancelled,
            ProviderError::LimitExceeded { .. } => Outcome::LimitExceeded,
        }
    }

    /// What was gathered before the failure, for errors that happened after a spawn.
    pub fn evidence(&self) -> Option<&RunEvidence> {
        match self {
            ProviderError::RateLimited { evidence, .. }
            | ProviderError::ModelUnavailable { evidence, .. }
            | ProviderError::Refused { evidence, .. }
            | ProviderError::EgressRefused { evidence, .. }
            | ProviderError::StaleSession { evidence, .. }
            | ProviderError::Crashed { evidence, .. }
            | ProviderError::IdleTimeout { evidence, .. }
            | ProviderError::WallTimeout { evidence, .. }
            | ProviderError::LimitExceeded { evidence, .. }
            | ProviderError::Cancelled { evidence, .. } => Some(evidence),
            ProviderError::CliNotFound { .. }
            | ProviderError::SpawnFailed { .. }
            | ProviderError::ArgvTooLong { .. }
            | ProviderError::VersionMismatch { .. }
            | ProviderError::VersionProbeTimedOut { .. }
            | ProviderError::InvalidSession { .. }
            | ProviderError::Unsandboxed { .. }
            | ProviderError::Io { .. } => None,
        }
    }

    /// [`ProviderError::evidence`], to add to it (the git-cleanliness check's stray writes are
    /// known only after the run).
    pub fn evidence_mut(&mut self) -> Option<&mut RunEvidence> {
        match self {
            ProviderError::RateLimited { evidence, .. }
            | ProviderError::ModelUnavailable { evidence, .. }
            | ProviderError::Refused { evidence, .. }
            | ProviderError::EgressRefused { evidence, .. }
            | ProviderError::StaleSession { evidence, .. }
            | ProviderError::Crashed { evidence, .. }
            | ProviderError::IdleTimeout { evidence, .. }
            | ProviderError::WallTimeout { evidence, .. }
            | ProviderError::LimitExceeded { evidence, .. }
            | ProviderError::Cancelled { evidence, .. } => Some(evidence),
            ProviderError::CliNotFound { .. }
            | ProviderError::SpawnFailed { .. }
            | ProviderError::ArgvTooLong { .. }
            | ProviderError::VersionMismatch { .. }
            | ProviderError::VersionProbeTimedOut { .. }
            | ProviderError::InvalidSession { .. }
            | ProviderError::Unsandboxed { .. }
            | ProviderError::Io { .. } => None,
        }
    }

    /// The session to resume after this error, if one was captured.
    pub fn session_id(&self) -> Option<&SessionId> {
        self.evidence().and_then(|e| e.session_id.as_ref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retryability_is_stated_per_variant() {
        let evidence = Box::new(RunEvidence {
            exit_code: Some(1),
            ..RunEvidence::default()
        });
        let crashed = ProviderError::Crashed {
            provider: ProviderId::Claude,
            reason: String::new(),
            evidence: evidence.clone(),
        };
        assert!(crashed.is_retryable());
        assert_eq!(crashed.to_string(), "claude: the CLI failed (exit code 1)");
        let cut = ProviderError::Crashed {
            provider: ProviderId::Claude,
            reason: "no terminal event".into(),
            evidence,
        };
        assert_eq!(
            cut.to_string(),
            "claude: the CLI failed (exit code 1): no terminal event"
        );
        let missing = ProviderError::CliNotFound {
            provider: ProviderId::Codex,
            program: "codex".into(),
            reason: "No such file or directory".into(),
        };
        assert_eq!(missing.class(), ErrorClass::Permanent);
        assert_eq!(missing.outcome(), Outcome::SpawnFailed);
        let slow = ProviderError::VersionProbeTimedOut {
            provider: ProviderId::Grok,
            program: "grok".into(),
            args: "--version".into(),
            waited: Duration::from_secs(60),
        };
        assert_eq!(slow.class(), ErrorClass::Retryable);
        assert_eq!(slow.outcome(), Outcome::NotStarted);
        let hog = ProviderError::LimitExceeded {
            provider: ProviderId::Claude,
            exceeded: crate::LimitExceeded {
                limit: crate::ResourceLimit::Memory,
                cap: 64 << 20,
                peak: Some(64 << 20),
            },
            what: "the kernel killed 1 process(es) out of memory".into(),
            evidence: Box::new(RunEvidence::default()),
        };
        // Not transient: the same work meets the same limit.
        assert_eq!(hog.class(), ErrorClass::Permanent);
        assert_eq!(hog.outcome(), Outcome::LimitExceeded);
        assert_eq!(
            hog.to_string(),
            "claude: stopped at its memory limit of 64 MiB (peak 64 MiB): the kernel killed 1 \
             process(es) out of memory\nhint: raise [limits] memory in your settings, or resume \
             the session and ask for work that uses less"
        );
    }

    /// Every refusal before a run: one line saying what is refused and why, then one `hint:`
    /// line; no fact twice.
    #[test]
    fn every_refusal_is_one_line_and_a_hint_line() {
        let guarantee = |g: crate::Guarantee| crate::Unenforced {
            guarantee: g,
            why:
                "bubblewrap is not usable: /usr/bin/bwrap is missing; it runs a plain child process"
                    .into(),
        };
        let refusals = [
            ProviderError::CliNotFound {
                provider: ProviderId::Codex,
                program: "codex".into(),
                reason: "not found on the child's PATH".into(),
            },
            ProviderError::VersionMismatch {
                provider: ProviderId::Claude,
                program: "claude".into(),
                found: "3.0.0".into(),
                required: ">=2.1.0, <2.2.0".into(),
            },
            ProviderError::InvalidSession {
                provider: ProviderId::Grok,
                reason: "grok has no headless resume, so session s cannot be continued".into(),
                hint: Some("start a new session instead".into()),
            },
            ProviderError::Unsandboxed {
                provider: ProviderId::Claude,
                backend: crate::SandboxBackend::Native,
                reason: "bubblewrap is not usable: /usr/bin/bwrap is missing".into(),
                unenforced: vec![
                    guarantee(crate::Guarantee::WritesConfined),
                    guarantee(crate::Guarantee::TreeContained),
                ],
                hint: "install bubblewrap".into(),
            },
            ProviderError::VersionProbeTimedOut {
                provider: ProviderId::Grok,
                program: "grok".into(),
                args: "--version".into(),
                waited: Duration::from_secs(60),
            },
        ];
        for refusal in &refusals {
            let text = refusal.to_string();
            let lines: Vec<&str> = text.lines().collect();
            assert_eq!(lines.len(), 2, "{text}");
            assert!(lines[1].starts_with("hint: "), "{text}");
            assert!(!lines[0].contains("hint"), "{text}");
        }
        let unsandboxed = refusals[3].to_string();
        assert_eq!(
            unsandboxed,
            "claude: refusing to run: the native backend cannot enforce writes-confined, \
             tree-contained (bubblewrap is not usable: /usr/bin/bwrap is missing)\n\
             hint: install bubblewrap"
        );
    }
}
