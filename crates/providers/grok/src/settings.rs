//! The adapter's plain settings: which `grok` to run, the default model, extra arguments, the
//! tested version range, and how long Grok's own HTTP client may wait for the model, which sets
//! the idle watchdog's floor. The composition root fills this struct; the adapter reads no
//! settings file.

use std::path::PathBuf;
use std::time::Duration;

use semver::{Comparator, Op, Prerelease, VersionReq};

/// Grok's HTTP client timeout per request, in seconds: `new OpenAI({ timeout: 360000 })` in
/// `dist/grok/client.js`. It runs until the response headers arrive, not while the body is read.
pub const CLIENT_TIMEOUT_SECS: u64 = 360;
/// The retries Grok's HTTP client makes on its own: the OpenAI SDK's default `maxRetries` (2),
/// which Grok does not change. Timeouts, connection errors, 408, 409, 429 and 5xx are retried.
pub const CLIENT_RETRIES: u64 = 2;
/// Added to [`GrokSettings::request_timeout_budget`] to give the idle watchdog's floor: the SDK's
/// sleeps between attempts (about 0.5 s and 1 s after a timeout), Node's start-up, and the
/// engine's activity sampling period (a tenth of the idle limit, at most 10 s), with room to spare.
pub const IDLE_MARGIN: Duration = Duration::from_secs(60);

/// How the Grok adapter runs the CLI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrokSettings {
    /// The program: a path, or a name looked up on the child's `PATH` (default `grok`).
    pub command: PathBuf,
    /// The model when the session names none (`-m`); `None` leaves Grok's own choice
    /// (`GROK_MODEL`, then the working directory's `.grok/settings.json`, then
    /// `~/.grok/user-settings.json`, then `grok-code-fast-1`).
    pub model: Option<String>,
    /// Arguments appended after everything the adapter builds. The prompt is never among them;
    /// never put `-p`, `-k`/`--api-key` or `-u`/`--base-url` here (the last two make Grok save the
    /// value to `~/.grok/user-settings.json`).
    pub extra_args: Vec<String>,
    /// The Grok CLI versions this adapter was tested against (default `>=1.0.0, <1.1.0`; the npm
    /// package `@vibe-kit/grok-cli@0.0.34` prints `1.0.1`).
    pub tested_versions: VersionReq,
    /// Run even when `grok --version` is outside [`GrokSettings::tested_versions`].
    pub allow_untested_version: bool,
    /// How long `grok --version` may take (default 60 s: a CLI starts slowly on a busy
    /// machine, and a probe that runs out refuses the run as
    /// [`corral_ports::ProviderError::VersionProbeTimedOut`]).
    pub version_timeout: Duration,
    /// The longest Grok's own HTTP client may wait on one model call before it gives up and
    /// reports `Request timed out.`: [`CLIENT_TIMEOUT_SECS`] × (1 + [`CLIENT_RETRIES`]) = 1080 s by
    /// default. The idle watchdog never fires before this plus [`IDLE_MARGIN`]
    /// ([`GrokSettings::min_idle`]); see the crate documentation.
    pub request_timeout_budget: Duration,
}

impl Default for GrokSettings {
    fn default() -> Self {
        GrokSettings {
            command: PathBuf::from("grok"),
            model: None,
            extra_args: Vec::new(),
            tested_versions: default_tested_versions(),
            allow_untested_version: false,
            version_timeout: Duration::from_secs(60),
            request_timeout_budget: default_request_timeout_budget(),
        }
    }
}

impl GrokSettings {
    /// The least idle limit a Grok run gets: [`GrokSettings::request_timeout_budget`] plus
    /// [`IDLE_MARGIN`] (1140 s = 19 min by default).
    pub fn min_idle(&self) -> Duration {
        self.request_timeout_budget.saturating_add(IDLE_MARGIN)
    }
}

/// 1080 s: three attempts of Grok's 360 s client timeout.
pub fn default_request_timeout_budget() -> Duration {
    Duration::from_secs(CLIENT_TIMEOUT_SECS * (1 + CLIENT_RETRIES))
}

/// `>=1.0.0, <1.1.0`: what `@vibe-kit/grok-cli@0.0.34` prints (`1.0.1`, a constant in its source).
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
