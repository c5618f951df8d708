//! The adapter's plain settings: which `codex` to run, the default model and model provider, extra
//! arguments, the tested version range, the CLI's own retry caps and a sandbox override. The
//! composition root fills this struct; the adapter reads no settings file (and never Codex's own
//! `config.toml`: what it needs to change there, it changes with `-c key=value` for one run).

use std::path::PathBuf;
use std::time::Duration;

use semver::{Comparator, Op, Prerelease, VersionReq};

/// Model provider ids built into Codex. Codex 0.171 refuses a `[model_providers.<id>]` table for
/// these ("model_providers contains reserved built-in provider IDs: … Built-in providers cannot be
/// overridden", from the binary's own strings), so their retry knobs cannot be set per run and the
/// adapter does not try.
pub const BUILT_IN_PROVIDERS: &[&str] = &["openai", "ollama", "lmstudio", "amazon-bedrock"];

/// Codex's sandbox modes (`-s`, or `sandbox_mode` in its configuration).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SandboxMode {
    /// Commands may read everything and write nothing (not even `signals.json`), with no network.
    ReadOnly,
    /// Commands may write the working directory, the `--add-dir` roots, `/tmp` and `$TMPDIR`;
    /// network only with `sandbox_workspace_write.network_access`.
    WorkspaceWrite,
    /// No sandbox at all. For machines that are a sandbox already (containers where Codex's
    /// bubblewrap cannot start).
    DangerFullAccess,
}

impl SandboxMode {
    /// The CLI's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            SandboxMode::ReadOnly => "read-only",
            SandboxMode::WorkspaceWrite => "workspace-write",
            SandboxMode::DangerFullAccess => "danger-full-access",
        }
    }
}

/// How the Codex adapter runs the CLI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodexSettings {
    /// The program: a path, or a name looked up on the child's `PATH` (default `codex`).
    pub command: PathBuf,
    /// The model when the session names none (`-m`); `None` leaves the CLI's default.
    pub model: Option<String>,
    /// The model provider id, as in Codex's `[model_providers.<id>]` (`-c model_provider="<id>"`).
    /// `None` leaves whichever provider Codex's own configuration selects, and then the adapter
    /// cannot cap the CLI's retries: the knobs live in that provider's table, whose id it does not
    /// know.
    pub model_provider: Option<String>,
    /// Arguments added after everything the adapter builds, before the prompt marker `-` (and, when
    /// resuming, before `resume`). The prompt is never among them.
    pub extra_args: Vec<String>,
    /// The Codex versions this adapter was tested against (default `>=0.171.0, <0.172.0`).
    pub tested_versions: VersionReq,
    /// Run even when `codex --version` is outside [`CodexSettings::tested_versions`].
    pub allow_untested_version: bool,
    /// HTTP retries per request (`model_providers.<id>.request_max_retries`; Codex's default is 4).
    /// Default 0, so that Corral owns the retry schedule. Applied only when
    /// [`CodexSettings::model_provider`] names a provider that is not built in.
    pub request_max_retries: u32,
    /// Stream reconnects per turn (`model_providers.<id>.stream_max_retries`; Codex's default is
    /// 5, and each reconnect repeats the HTTP retries: 30 requests for a permanent 500). Default 0.
    /// Same condition as [`CodexSettings::request_max_retries`].
    pub stream_max_retries: u32,
    /// Run every session in this sandbox mode instead of the one its permissions map to. For
    /// containers where Codex's bubblewrap cannot start (`danger-full-access`), or to let sessions
    /// with `edit_files: false` write `signals.json` (`workspace-write`, which opens all edits).
    pub sandbox: Option<SandboxMode>,
    /// How long `codex --version` may take (default 60 s: a CLI starts slowly on a busy
    /// machine, and a probe that runs out refuses the run as
    /// [`corral_ports::ProviderError::VersionProbeTimedOut`]).
    pub version_timeout: Duration,
}

impl Default for CodexSettings {
    fn default() -> Self {
        CodexSettings {
            command: PathBuf::from("codex"),
            model: None,
            model_provider: None,
            extra_args: Vec::new(),
            tested_versions: default_tested_versions(),
            allow_untested_version: false,
            request_max_retries: 0,
            stream_max_retries: 0,
            sandbox: None,
            version_timeout: Duration::from_secs(60),
        }
    }
}

/// `>=0.171.0, <0.172.0`: the release recorded, 0.171.0. Codex changes flags and event shapes
/// between minor releases (`--full-auto` went away), so the range is one minor line.
pub fn default_tested_versions() -> VersionReq {
    let bound = |op, minor| Comparator {
        op,
        major: 0,
        minor: Some(minor),
        patch: Some(0),
        pre: Prerelease::EMPTY,
    };
    VersionReq {
        comparators: vec![bound(Op::GreaterEq, 171), bound(Op::Less, 172)],
    }
}
