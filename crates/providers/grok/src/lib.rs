//! Corral's adapter for the Grok CLI (`grok`, npm `@vibe-kit/grok-cli@0.0.34`, which prints
//! version 1.0.1): one CLI's grammar, plugged into the engine.
//!
//! It knows how to start Grok headless (`grok -p <pointer sentence> -d <cwd> [-m <model>]`, the
//! prompt in `grok-prompt.md` because Grok reads no prompt from stdin), which environment
//! variables Grok reads, how to read the message lines it prints at the end into normalized
//! [`corral_ports::AgentEvent`]s ([`GrokStreamParser`]), including the error report it prints
//! with exit code 0, which of its words mean a rate limit, an unavailable model or a refusal, how
//! the idle watchdog tells a working Grok from a hung one, and its tested version range.
//! [`headless`] wires it to an [`Engine`]; [`GrokProbe`] answers the model probe port.
//!
//! It knows nothing about any other provider, settings files, or processes beyond what the engine
//! gives it: it never spawns, waits or kills, and reads no configuration; the composition root
//! hands it a [`GrokSettings`].
//!
//! # Liveness: why a silent Grok is not killed, and when a hung one is
//!
//! Grok prints nothing until the run ends, so "no output for the idle limit" would kill every
//! healthy run longer than the limit. The adapter declares
//! [`Liveness::ProcessActivity`](corral_engine::Liveness::ProcessActivity) with
//! `min_idle` = [`GrokSettings::request_timeout_budget`] + [`IDLE_MARGIN`] (1080 s + 60 s =
//! 1140 s by default). The rule:
//!
//! - Activity is any byte on stdout or stderr, or any change in the process group's CPU time or
//!   bytes read and written (files, pipes, sockets), sampled from `/proc` every tenth of the
//!   limit (at most 10 s). The idle limit is max(the engine's idle setting, `min_idle`).
//! - A long healthy run is never killed as idle: tool commands (bash children are in the group)
//!   use CPU and I/O, file writes are bytes written, every model request is bytes written and
//!   every answer bytes read. The longest silence a healthy run can have is one model call
//!   waiting for its answer, and Grok's own HTTP client bounds that: 360 s per attempt until the
//!   response headers arrive, 2 retries, about 1.5 s of backoff between them after a timeout. Even
//!   if the retries' traffic went unseen, three attempts (≈ 1082 s) fit under `min_idle`, so a
//!   slow model call is ended by Grok itself, which then reports `Grok API error: Request timed
//!   out.` as a failed terminal event with its text, not by Corral.
//! - A hung run still ends. No answer at all: Grok gives up by itself after ≈ 1082 s (above), or
//!   the watchdog fires at max(idle setting, 1140 s) if it does not. A stalled answer (headers
//!   sent, body never finished): Grok's client timeout no longer applies and Grok would wait
//!   forever; no CPU and no I/O, so the watchdog kills the tree after max(idle setting, 1140 s).
//! - Caveat, not measured: the hang was recorded only up to 120 s (the recorder's limit). If some
//!   background work kept ticking in a hung Grok (an MCP server from the repository's
//!   `.grok/settings.json`, say), the group would never look idle; set a wall-clock limit for
//!   Grok runs.
//!
//! # Traps, stated rather than hidden
//!
//! - Grok exits 0 when the model API fails (also for 401 and 429, and when killed with SIGTERM,
//!   after printing `Gracefully shutting down...` on stdout). The parser turns its `Sorry, I
//!   encountered an error: …` message into a failed terminal event, which is the only signal. On
//!   that path Grok prints only the prompt and the error: the events of work done before the
//!   error are lost, though its files are not.
//! - Grok creates `.grok/settings.json` (`{"model": "grok-code-fast-1"}`) in the working directory
//!   on every run: a stray write that a git-cleanliness check will see. Adding `.grok/` to the
//!   repository's ignore file is the fix; the adapter cannot prevent it.
//! - Grok loads a `.env` file from the working directory (dotenv) into its own environment before
//!   anything else, without overriding variables already set: a repository can set `GROK_BASE_URL`
//!   (and so where the API key is sent) unless Corral's environment sets it. The repository's
//!   `.grok/settings.json` can also choose the model (when no `-m` is given) and start MCP servers,
//!   and `.grok/GROK.md` is added to the system prompt.
//! - No permission gate can be enforced (headless Grok approves every tool); see
//!   [`adapter::CAPABILITIES`]. No resume, no session id: a rate-limited attempt is retried cold.
//! - Grok's reply cap is 1536 tokens unless `GROK_MAX_TOKENS` says otherwise; a large file
//!   written in one tool call can be cut off.
//! - `grok --version` prints a constant from the source (`1.0.1`), so the version check cannot
//!   tell package versions apart; newer releases print different lines (`--format json` step
//!   events), and an output the parser does not know, with exit 0, would count as success.

pub mod adapter;
mod diagnose;
pub mod parser;
mod probe;
mod settings;

use std::sync::Arc;

use corral_engine::{
    CliSettings, CommonFields, Engine, ProviderDescriptor, SettingError, SupervisedProvider,
};
use corral_ports::ProviderId;

pub use adapter::{GrokAdapter, PROMPT_FILE};
pub use parser::GrokStreamParser;
pub use probe::GrokProbe;
pub use settings::{
    CLIENT_RETRIES, CLIENT_TIMEOUT_SECS, GrokSettings, IDLE_MARGIN, default_request_timeout_budget,
    default_tested_versions,
};

/// The headless Grok provider: this adapter driven by `engine`.
pub fn headless(engine: Engine, settings: GrokSettings) -> SupervisedProvider<GrokAdapter> {
    SupervisedProvider::new(engine, GrokAdapter::new(settings))
}

/// What Corral knows about this provider without running it, and how to build it: read by the
/// composition root, `corral doctor` and `corral providers`.
pub const DESCRIPTOR: ProviderDescriptor = ProviderDescriptor {
    id: ProviderId::Grok,
    label: "Grok CLI",
    command: "grok",
    npm_package: "@vibe-kit/grok-cli",
    pinned_version: "0.0.34",
    credential_vars: CREDENTIAL_VARS,
    credential_files: &[".grok/user-settings.json"],
    credential_paths: |env| {
        corral_engine::CliAdapter::credential_paths(&GrokAdapter::default(), env)
    },
    state_dirs: &[".grok"],
    tested_versions: default_tested_versions,
    capabilities: adapter::CAPABILITIES,
    options: &[],
    provider: |engine, cli| Ok(Arc::new(headless(engine, settings(cli)?))),
    probe: |engine, cli| Ok(Arc::new(GrokProbe::with_engine(&settings(cli)?, engine))),
};

/// Environment variables that carry credentials for the CLI (0.0.34 reads no `XAI_API_KEY`).
const CREDENTIAL_VARS: &[&str] = &["GROK_API_KEY"];

/// This provider's settings from the ones every provider shares.
fn settings(cli: &CliSettings) -> Result<GrokSettings, SettingError> {
    cli.refuse_unknown(ProviderId::Grok, DESCRIPTOR.options)?;
    let mut s = GrokSettings::default();
    cli.apply(CommonFields {
        command: &mut s.command,
        model: &mut s.model,
        extra_args: &mut s.extra_args,
        tested_versions: &mut s.tested_versions,
        allow_untested_version: &mut s.allow_untested_version,
    });
    Ok(s)
}
