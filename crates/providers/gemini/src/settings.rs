//! The adapter's plain settings: which `gemini` to run, the default model, extra arguments and the
//! tested version range. The composition root fills this struct; the adapter reads no settings
//! file (and writes none: see the crate documentation for the auth-type setting).

use std::path::PathBuf;
use std::time::Duration;

use semver::{Comparator, Op, Prerelease, VersionReq};

/// How the Gemini adapter runs the CLI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GeminiSettings {
    /// The program: a path, or a name looked up on the child's `PATH` (default `gemini`).
    pub command: PathBuf,
    /// The model when the session names none (`-m`); `None` leaves Gemini's own choice (`auto`:
    /// a routing request to a flash-lite model picks the model of each turn).
    pub model: Option<String>,
    /// Arguments appended after everything the adapter builds. The prompt is never among them.
    pub extra_args: Vec<String>,
    /// The Gemini CLI versions this adapter was tested against (default `>=0.61.0, <0.62.0`).
    pub tested_versions: VersionReq,
    /// Run even when `gemini --version` is outside [`GeminiSettings::tested_versions`].
    pub allow_untested_version: bool,
    /// How long `gemini --version` may take (default 60 s: the bundle is large and starts slowly
    /// on a busy machine).
    pub version_timeout: Duration,
}

impl Default for GeminiSettings {
    fn default() -> Self {
        GeminiSettings {
            command: PathBuf::from("gemini"),
            model: None,
            extra_args: Vec::new(),
            tested_versions: default_tested_versions(),
            allow_untested_version: false,
            version_timeout: Duration::from_secs(60),
        }
    }
}

/// `>=0.61.0, <0.62.0`: the pinned `@google/gemini-cli@0.61.0`. Gemini's flags and stream-json
/// lines changed between minor versions before, so the range stays one minor wide.
pub fn default_tested_versions() -> VersionReq {
    let bound = |op, minor| Comparator {
        op,
        major: 0,
        minor: Some(minor),
        patch: Some(0),
        pre: Prerelease::EMPTY,
    };
    VersionReq {
        comparators: vec![bound(Op::GreaterEq, 61), bound(Op::Less, 62)],
    }
}
