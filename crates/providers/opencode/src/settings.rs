//! The adapter's plain settings: which `opencode` to run, the default model, extra arguments, the
//! tested version range, whether to pass `--auto`, and the time limits of the version check and the
//! model probe. The composition root fills this struct; the adapter reads no settings file.

use std::path::PathBuf;
use std::time::Duration;

use semver::{Comparator, Op, Prerelease, VersionReq};

/// How the OpenCode adapter runs the CLI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpencodeSettings {
    /// The program: a path, or a name looked up on the child's `PATH` (default `opencode`).
    pub command: PathBuf,
    /// The model when the session names none, spelled `provider/model` as OpenCode wants it for
    /// `-m` (`anthropic/claude-sonnet-4-5`, `openrouter/openai/gpt-5`). `None` leaves OpenCode's own
    /// default (its config's `model`).
    pub model: Option<String>,
    /// Arguments appended after everything the adapter builds. The prompt is never among them.
    /// A positional word here would be prepended to the prompt: OpenCode joins its positional
    /// message and piped stdin.
    pub extra_args: Vec<String>,
    /// The OpenCode versions this adapter was tested against (default `>=1.18.0, <1.19.0`).
    pub tested_versions: VersionReq,
    /// Run even when `opencode --version` is outside [`OpencodeSettings::tested_versions`].
    pub allow_untested_version: bool,
    /// Pass `--auto`, which approves every permission request the configuration does not deny
    /// outright: directories outside `--dir` (`external_directory`) and whatever the user's
    /// OpenCode config sets to `ask`. Off by default; a session that declares extra roots is
    /// refused unless this is on, because OpenCode has no narrower way to open them.
    pub auto_approve: bool,
    /// How long `opencode --version` may take (default 60 s: a CLI starts slowly on a busy
    /// machine, and a probe that runs out refuses the run as
    /// [`corral_ports::ProviderError::VersionProbeTimedOut`]).
    pub version_timeout: Duration,
    /// How long `opencode models` may take before the probe kills it (default 15 s).
    pub probe_timeout: Duration,
}

impl Default for OpencodeSettings {
    fn default() -> Self {
        OpencodeSettings {
            command: PathBuf::from("opencode"),
            model: None,
            extra_args: Vec::new(),
            tested_versions: default_tested_versions(),
            allow_untested_version: false,
            auto_approve: false,
            version_timeout: Duration::from_secs(60),
            probe_timeout: Duration::from_secs(15),
        }
    }
}

/// `>=1.18.0, <1.19.0`: the 1.18 line, recorded with 1.18.33.
pub fn default_tested_versions() -> VersionReq {
    let bound = |op, minor| Comparator {
        op,
        major: 1,
        minor: Some(minor),
        patch: Some(0),
        pre: Prerelease::EMPTY,
    };
    VersionReq {
        comparators: vec![bound(Op::GreaterEq, 18), bound(Op::Less, 19)],
    }
}
