//! Corral's adapter for OpenCode (`opencode`, npm `opencode-ai`): one CLI's grammar, plugged into
//! the engine.
//!
//! It knows how to start OpenCode headless (`opencode run --format json --thinking --dir <cwd>`,
//! the prompt piped on stdin), how to resume a session (`-s <id>`), how to name a model
//! (`-m provider/model`) and an effort (`--variant`), when to pass `--auto` (only when
//! [`OpencodeSettings::auto_approve`] says so), which environment variables the CLI reads (its own
//! `OPENCODE_*`, the XDG directories holding its sessions, and the keys of the providers it
//! aggregates), how to read its JSON lines into normalized [`corral_ports::AgentEvent`]s
//! ([`OpencodeStreamParser`]), which of its words mean a rate limit, a stale session, an
//! unavailable model or a refusal, and its tested version range. [`headless`] wires it to an
//! [`Engine`]; [`OpencodeProbe`] answers the model probe port from `opencode models`.
//!
//! It knows nothing about any other provider, settings files, or processes beyond what the engine
//! gives it: it never creates a process itself (the probe asks the engine's spawn port), reads no
//! configuration, and never decides a retry; the composition root hands it an
//! [`OpencodeSettings`].
//!
//! Known gaps, stated rather than hidden:
//! - OpenCode enforces no [`corral_ports::Permissions`] gate: it has no switch to deny a tool, and
//!   its default configuration lets edits, shell commands and web fetches through without asking.
//!   The capability row ([`adapter::CAPABILITIES`]) names each over-grant; the run goes ahead.
//! - Extra roots need `--auto`, which approves every directory; a session that declares them is
//!   refused unless the operator set `auto_approve`. A spend cap cannot be enforced and is
//!   refused.
//! - Liveness is the engine's default: any byte of output. OpenCode prints a part only once it is
//!   complete, so its first line comes after a start-up of 5 to 8 s (38 s to its first request at
//!   load 15 on two cores: the start-up is CPU-bound), a title side-request and the model's whole
//!   first step, and no line comes while the model writes a long answer or a long tool call. The
//!   idle limit must outlast the start-up and the longest single model step: keep it well above
//!   60 s on a busy machine (the default 300 s is safe).
//! - A compaction step (when the context fills) also ends with reason `stop`, which the parser
//!   takes as the end of the run; see [`parser`].
//! - Failed authentication and a rejected command line are classified as refusals, a missing
//!   model as model-unavailable from OpenCode's own wording, which no recording shows yet.

pub mod adapter;
mod diagnose;
mod endpoints;
pub mod parser;
mod probe;
mod settings;

use std::sync::Arc;

use corral_engine::{
    CliSettings, CommonFields, Engine, ProviderDescriptor, SettingError, SupervisedProvider,
};
use corral_ports::ProviderId;

pub use adapter::OpencodeAdapter;
pub use parser::OpencodeStreamParser;
pub use probe::{OpencodeProbe, parse_model_listing, probe_env};
pub use settings::{OpencodeSettings, default_tested_versions};

/// The headless OpenCode provider: this adapter driven by `engine`.
pub fn headless(engine: Engine, settings: OpencodeSettings) -> SupervisedProvider<OpencodeAdapter> {
    SupervisedProvider::new(engine, OpencodeAdapter::new(settings))
}

/// What Corral knows about this provider without running it, and how to build it: read by the
/// composition root, `corral doctor` and `corral providers`.
pub const DESCRIPTOR: ProviderDescriptor = ProviderDescriptor {
    id: ProviderId::Opencode,
    label: "OpenCode",
    command: "opencode",
    npm_package: "opencode-ai",
    pinned_version: "1.18.33",
    credential_vars: CREDENTIAL_VARS,
    credential_files: &[".local/share/opencode/auth.json"],
    credential_paths: |env| {
        corral_engine::CliAdapter::credential_paths(&OpencodeAdapter::default(), env)
    },
    state_dirs: &[".local/share/opencode", ".cache/opencode"],
    tested_versions: default_tested_versions,
    capabilities: adapter::CAPABILITIES,
    options: &["auto_approve"],
    provider: |engine, cli| Ok(Arc::new(headless(engine, settings(cli)?))),
    probe: |engine, cli| {
        Ok(Arc::new(OpencodeProbe::with_engine(
            &settings(cli)?,
            engine,
        )))
    },
};

/// Environment variables that carry credentials for the CLI.
const CREDENTIAL_VARS: &[&str] = &["ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENROUTER_API_KEY"];

/// This provider's settings from the ones every provider shares.
fn settings(cli: &CliSettings) -> Result<OpencodeSettings, SettingError> {
    cli.refuse_unknown(ProviderId::Opencode, DESCRIPTOR.options)?;
    let mut s = OpencodeSettings::default();
    cli.apply(CommonFields {
        command: &mut s.command,
        model: &mut s.model,
        extra_args: &mut s.extra_args,
        tested_versions: &mut s.tested_versions,
        allow_untested_version: &mut s.allow_untested_version,
    });
    s.auto_approve = cli.flag("auto_approve");
    Ok(s)
}
