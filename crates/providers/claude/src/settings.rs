//! The adapter's plain settings: which `claude` to run, the default model, extra arguments, the
//! tested version range and the CLI's own retry cap. The composition root fills this struct; the
//! adapter reads no settings file.

use std::path::PathBuf;
use std::time::Duration;

use semver::{Comparator, Op, Prerelease, VersionReq};

/// The most internal retries Claude Code accepts; it clamps `CLAUDE_CODE_MAX_RETRIES` to this.
pub const MAX_INTERNAL_RETRIES: u32 = 15;
/// The CLI's own retries per request unless the settings say otherwise: three 429s with
/// `retry-after: 1` cost about what the bare CLI pays (its retries honour the header), where
/// none would cost Corral's 60 s backoff floor for each.
pub const DEFAULT_INTERNAL_RETRIES: u32 = 3;

/// How the Claude Code adapter runs the CLI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaudeSettings {
    /// The program: a path, or a name looked up on the child's `PATH` (default `claude`).
    pub command: PathBuf,
    /// The model when the session names none (`--model`); `None` leaves the CLI's default.
    pub model: Option<String>,
    /// Arguments appended after everything the adapter builds. The prompt is never among them.
    pub extra_args: Vec<String>,
    /// The Claude Code versions this adapter was tested against (default `>=2.1.0, <2.2.0`).
    pub tested_versions: VersionReq,
    /// Run even when `claude --version` is outside [`ClaudeSettings::tested_versions`].
    pub allow_untested_version: bool,
    /// The CLI's own retries per request (`CLAUDE_CODE_MAX_RETRIES`, default
    /// [`DEFAULT_INTERNAL_RETRIES`]). Values above [`MAX_INTERNAL_RETRIES`] are clamped, as the
    /// CLI would. A short rate limit is cheapest absorbed by the CLI, which honours the API's
    /// `retry-after` for its first few retries (then its own backoff grows to about 35 s);
    /// Corral reads each retry from the stream (`api_retry`), holds the account in its gate for
    /// the announced wait, and backs off on its own schedule only once these are spent. 0 hands
    /// every retry to Corral, whose backoff starts at `retry.backoff_initial_ms` (60 s).
    pub max_internal_retries: u32,
    /// How long `claude --version` may take (default 60 s: a CLI starts slowly on a busy
    /// machine, and a probe that runs out refuses the run as
    /// [`corral_ports::ProviderError::VersionProbeTimedOut`]).
    pub version_timeout: Duration,
}

impl Default for ClaudeSettings {
    fn default() -> Self {
        ClaudeSettings {
            command: PathBuf::from("claude"),
            model: None,
            extra_args: Vec::new(),
            tested_versions: default_tested_versions(),
            allow_untested_version: false,
            max_internal_retries: DEFAULT_INTERNAL_RETRIES,
            version_timeout: Duration::from_secs(60),
        }
    }
}

/// `>=2.1.0, <2.2.0`: the 2.1 line, recorded with 2.1.197.
pub fn default_tested_versions() -> VersionReq {
    let bound = |op, minor| Comparator {
        op,
        major: 2,
        minor: Some(minor),
        patch: Some(0),
        pre: Prerelease::EMPTY,
    };
    VersionReq {
        comparators: vec![bound(Op::GreaterEq, 1), bound(Op::Less, 2)],
    }
}
