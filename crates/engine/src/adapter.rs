//! What a provider supplies to plug into the engine: how to start its CLI, how to read its
//! stream, and how to recognise its failures.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use corral_ports::{
    AgentEvent, AiSession, Capabilities, ProviderError, ProviderId, RateLimitInfo, SessionId,
};

use crate::files::PromptPointer;
use corral_process::env::EnvProfile;
use corral_process::spawn::ExitInfo;
use corral_sandbox::{AllowRule, EgressNeeds};

/// How the prompt reaches the CLI. The body never goes into argv.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PromptDelivery {
    /// Written to the child's stdin, which is then closed.
    Stdin,
    /// Written to this file beside `signals.json`; the CLI gets a one-line pointer sentence as
    /// an argument ([`AttemptPlan::pointer`]). Stdin is `/dev/null`.
    PointerFile {
        /// The file name, e.g. `copilot-prompt.md`.
        file_name: &'static str,
    },
}

/// The environment a child will get, for adapters to find their state paths in.
#[derive(Debug, Clone, Copy)]
pub struct ChildEnv<'a> {
    vars: &'a [(String, String)],
}

impl<'a> ChildEnv<'a> {
    /// Wraps the resolved variables.
    pub fn new(vars: &'a [(String, String)]) -> Self {
        ChildEnv { vars }
    }

    /// A variable's value, when set and not empty.
    pub fn get(&self, name: &str) -> Option<&'a str> {
        self.vars
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
            .filter(|v| !v.is_empty())
    }

    /// `$HOME`.
    pub fn home(&self) -> Option<PathBuf> {
        self.get("HOME").map(PathBuf::from)
    }

    /// `$<var>` when set, else `$HOME/<default>` (the XDG rule).
    pub fn dir_or_home(&self, var: &str, default: &str) -> Option<PathBuf> {
        self.get(var)
            .map(PathBuf::from)
            .or_else(|| self.home().map(|h| h.join(default)))
    }
}

/// What the adapter needs to build one attempt's command line.
#[derive(Debug, Clone, Copy)]
pub struct AttemptPlan<'a> {
    /// The caller's intent.
    pub session: &'a AiSession,
    /// The session this attempt resumes, if any (the caller's, or one captured by an earlier
    /// attempt after a rate limit).
    pub resume: Option<&'a SessionId>,
    /// 1-based attempt number.
    pub attempt: u32,
    /// The prompt pointer, with [`PromptDelivery::PointerFile`].
    pub pointer: Option<&'a PromptPointer>,
}

/// One attempt's command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandSpec {
    /// The program (configured path or name on `PATH`).
    pub program: PathBuf,
    /// The arguments.
    pub args: Vec<OsString>,
    /// Variables the provider sets on top of the env policy (its retry caps, telemetry off).
    pub env_set: Vec<(String, String)>,
    /// A session id Corral minted and passed to the CLI (Copilot `--session-id`): persisted
    /// to `session-id.txt` as soon as the child starts, before it prints anything.
    pub session_id: Option<SessionId>,
}

/// How the idle watchdog decides that a CLI is still alive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Liveness {
    /// Any byte on stdout or stderr. For CLIs that stream their work.
    #[default]
    Output,
    /// Any byte of output, or any progress of the process group: CPU time, or bytes read and
    /// written (files, pipes, sockets), sampled from `/proc`. For CLIs that print nothing until
    /// the end (Grok). `min_idle` raises the idle limit so that the CLI's own request timeout,
    /// not Corral's, ends a slow but healthy model call.
    ProcessActivity {
        /// The least idle limit this CLI gets, whatever the settings say.
        min_idle: std::time::Duration,
    },
}

/// Turns one stdout line of a CLI into normalized events. One parser per attempt, so it may keep
/// state (for example, pairing tool calls with results).
pub trait StreamParser: Send {
    /// Parses one line (without terminator). Unknown lines become [`AgentEvent::Unparsed`].
    fn parse_line(&mut self, line: &str, out: &mut Vec<AgentEvent>);
}

/// The CLI's terminal event, as far as classification needs it.
#[derive(Debug, Clone, PartialEq)]
pub struct TerminalSummary {
    /// Whether the CLI reported failure.
    pub is_error: bool,
    /// Its final text or error message.
    pub text: Option<String>,
    /// The HTTP status behind a failure, if reported.
    pub api_status: Option<u16>,
}

/// What an attempt left behind, for the adapter's classifiers.
#[derive(Debug, Clone, Copy)]
pub struct AttemptEvidence<'a> {
    /// How the child ended.
    pub exit: Option<ExitInfo>,
    /// The terminal event, if one was seen.
    pub terminal: Option<&'a TerminalSummary>,
    /// The last 16 KiB of stderr.
    pub stderr_tail: &'a str,
    /// The last 8 KiB of stdout.
    pub stdout_tail: &'a str,
    /// The session this attempt resumed, if any.
    pub resumed: Option<&'a SessionId>,
    /// Rate-limit events the parser produced.
    pub rate_limits: &'a [RateLimitInfo],
}

/// The adapter's reading of a failed attempt. Structured evidence first, narrow text patterns
/// last: prose that merely mentions rate limits must not count.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Diagnosis {
    /// The attempt was rate limited.
    pub rate_limit: Option<RateLimitInfo>,
    /// The session to resume was not found.
    pub stale_session: bool,
    /// The model is unavailable, with the CLI's words.
    pub model_unavailable: Option<String>,
    /// The CLI refused for a reason retrying cannot fix (authentication, a rejected flag, a
    /// refused permission mode), with an explanation of what to change.
    pub refused: Option<String>,
}

/// A declared tested version range, checked before a run.
#[derive(Debug, Clone)]
pub struct VersionCheck {
    /// The program to ask.
    pub program: PathBuf,
    /// Arguments that print the version (usually `--version`).
    pub args: Vec<String>,
    /// The tested range.
    pub required: semver::VersionReq,
    /// How long the CLI may take to answer.
    pub timeout: Duration,
    /// Run even when the version is outside the range (logged as overridden).
    pub allow_mismatch: bool,
}

/// Everything a provider supplies. Implementations hold only their CLI's grammar; the lifecycle
/// (spawn, watchdogs, retries, logs, files) is the engine's.
pub trait CliAdapter: Send + Sync {
    /// Which provider this is.
    fn provider(&self) -> ProviderId;
    /// How the prompt reaches the CLI.
    fn prompt_delivery(&self) -> PromptDelivery;
    /// The variables the CLI reads (its credentials among them).
    fn env_profile(&self) -> EnvProfile;
    /// The command for one attempt.
    fn command(&self, plan: &AttemptPlan<'_>) -> Result<CommandSpec, ProviderError>;
    /// A fresh parser for one attempt's stdout.
    fn parser(&self) -> Box<dyn StreamParser>;
    /// Reads a failed attempt's evidence.
    fn diagnose(&self, evidence: &AttemptEvidence<'_>) -> Diagnosis;
    /// The tested version range, if the engine should check it before a run.
    fn version_check(&self) -> Option<VersionCheck> {
        None
    }
    /// The CLI's own state (sessions, config, caches), which a sandbox must leave writable,
    /// found from the CHILD's environment (`env`: its `HOME`, `XDG_*`, the CLI's own home
    /// variable), never from the supervisor's. A path without an extension is a directory
    /// (created when missing).
    fn state_paths(&self, env: &ChildEnv<'_>) -> Vec<PathBuf> {
        let _ = env;
        Vec::new()
    }
    /// The CLI's own configuration that runs code or steers the agent (settings with hooks,
    /// MCP servers, plugins, instruction files), found like [`CliAdapter::state_paths`] and
    /// usually inside them: read-only inside the sandbox even where the state directory stays
    /// writable, so the agent cannot plant what the next run, or the user's own unsandboxed
    /// CLI, would obey. One that does not exist becomes an empty read-only placeholder, so it
    /// cannot be created either (see `sandbox::prepare_protected`). A path without an extension
    /// is a directory.
    fn protected_paths(&self, env: &ChildEnv<'_>) -> Vec<PathBuf> {
        let _ = env;
        Vec::new()
    }
    /// Where the CLI keeps its login (tokens, API keys, OAuth grants), found like
    /// [`CliAdapter::state_paths`] and usually inside them. Not for this CLI's own runs: the
    /// composition root hides these paths from the OTHER providers' sandboxes
    /// (`SandboxConfig::hide`), so that an agent run by one CLI cannot read, and spend or
    /// exfiltrate, another's account. A path without an extension is a directory.
    fn credential_paths(&self, env: &ChildEnv<'_>) -> Vec<PathBuf> {
        let _ = env;
        Vec::new()
    }
    /// What the CLI needs from the network when its egress is confined to an allow-list: the
    /// endpoints it cannot work without (its model API, by default the provider's public host;
    /// a base URL the CHILD's environment sets instead) and whether it honours the proxy
    /// variables. Required, so a new provider states what its CLI talks to.
    fn egress(&self, env: &ChildEnv<'_>) -> EgressNeeds;
    /// The endpoints the CLI's own configuration files name (a custom provider's base URL),
    /// read before the first spawn, each marked whether a run with these settings uses it.
    /// They do NOT widen the allow-list (the agent can write those files): a run refuses before
    /// the spawn when one in use is not on it, and `corral doctor` lists them with the entry to
    /// add. Empty for a CLI whose configuration names no endpoint.
    fn configured_endpoints(&self, env: &ChildEnv<'_>) -> Vec<ConfiguredEndpoint> {
        let _ = env;
        Vec::new()
    }
    /// How the idle watchdog tells a live CLI from a hung one.
    fn liveness(&self) -> Liveness {
        Liveness::Output
    }
    /// The provider's row in the capability table. Required, so a new provider does not compile
    /// until it states what its CLI can and cannot do.
    fn capabilities(&self) -> Capabilities;
    /// The command that hands the terminal to the CLI for a person, with the prompt given as
    /// the pointer sentence in `plan.pointer` (never on stdin: piped stdin turns these CLIs
    /// headless). Set `CommandSpec::session_id` where the CLI accepts an id minted up front.
    fn interactive_command(&self, plan: &AttemptPlan<'_>) -> Result<CommandSpec, ProviderError> {
        let _ = plan;
        Err(ProviderError::InvalidSession {
            provider: self.provider(),
            reason: "this provider has no interactive mode".to_string(),
            hint: None,
        })
    }
}

/// An endpoint named in a CLI's own configuration file (not in Corral's settings, not in the
/// child's environment).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfiguredEndpoint {
    /// `host:port`.
    pub endpoint: AllowRule,
    /// Where it is named, for people: `~/.codex/config.toml [model_providers.corp] base_url`.
    pub source: String,
    /// Whether a run with these settings talks to it (the selected provider of several).
    pub in_use: bool,
}

impl ConfiguredEndpoint {
    /// The endpoint of `url` (an `http(s)://` URL) named by `source`; `None` for anything else.
    pub fn from_url(url: &str, source: String, in_use: bool) -> Option<Self> {
        Some(ConfiguredEndpoint {
            endpoint: AllowRule::from_url(url)?,
            source,
            in_use,
        })
    }

    /// `file` as people know it: under `~/` when it lies in the child's `$HOME`.
    pub fn shown_path(env: &ChildEnv<'_>, file: &std::path::Path) -> String {
        match env
            .home()
            .and_then(|home| file.strip_prefix(home).ok().map(Path::to_path_buf))
        {
            Some(rest) => format!("~/{}", rest.display()),
            None => file.display().to_string(),
        }
    }

    /// The JSON file `file`, when it exists and parses.
    pub fn read_json(file: &std::path::Path) -> Option<serde_json::Value> {
        serde_json::from_str(&std::fs::read_to_string(file).ok()?).ok()
    }
}
