//! The adapter's plain settings: which `copilot` to run, the default model, extra arguments and
//! the tested version range. The composition root fills this struct; the adapter reads no settings
//! file.

use std::path::PathBuf;
use std::time::Duration;

use semver::{Comparator, Op, Prerelease, VersionReq};

/// How the Copilot CLI adapter runs the CLI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CopilotSettings {
    /// The program: a path, or a name looked up on the child's `PATH` (default `copilot`).
    pub command: PathBuf,
    /// The model when the session names none (`--model`); `None` leaves the CLI's choice (its
    /// default, or `COPILOT_MODEL` from the environment, which BYOK setups need).
    pub model: Option<String>,
    /// Arguments appended after everything the adapter builds. The prompt is never among them.
    pub extra_args: Vec<String>,
    /// The Copilot CLI versions this adapter was tested against (default `>=1.0.0, <1.1.0`).
    pub tested_versions: VersionReq,
    /// Run even when `copilot --version` is outside [`CopilotSettings::tested_versions`].
    pub allow_untested_version: bool,
    /// How long `copilot --version` may take (default 60 s: the first run of a fresh install
    /// unpacks about 235 MB into `~/.cache/copilot` before it answers, slower on a busy machine;
    /// a probe that runs out refuses the run as
    /// [`corral_ports::ProviderError::VersionProbeTimedOut`]).
    pub version_timeout: Duration,
}

impl Default for CopilotSettings {
    fn default() -> Self {
        CopilotSettings {
            command: PathBuf::from("copilot"),
            model: None,
            extra_args: Vec::new(),
            tested_versions: default_tested_versions(),
            allow_untested_version: false,
            version_timeout: Duration::from_secs(60),
        }
    }
}

/// `>=1.0.0, <1.1.0`: the 1.0 line, recorded with 1.0.102.
pub fn default_tested_versions() -> VersionReq {
    let bound = |op, minor| Comparator {
        op,
        major: 1,
        minor: Some(minor),
        patch: Some(0),
        pre: Prerelease::EMPTY,
    };
    VersionReq {
        comparators: vec![bound(Op::GreaterEq, 0), bound(Op::Less, 1)],
    }
}
