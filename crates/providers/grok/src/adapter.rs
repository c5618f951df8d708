//! [`GrokAdapter`]: the Grok CLI's command line, environment profile, liveness rule and version
//! check, plugged into the engine's [`CliAdapter`].
//!
//! The command is `grok -p <pointer sentence> -d <cwd> [-m <model>] [extra args]`. Grok takes its
//! prompt only as the value of `-p` (with a piped stdin and no value it fails with `error: option
//! '-p, --prompt <prompt>' argument missing`), so the engine writes the prompt to
//! `grok-prompt.md` beside `signals.json` and `-p` carries the one-line sentence pointing at it.
//! `-p` comes first so that a dangling flag in the extra arguments cannot swallow it (without a
//! `-p` value Grok starts its interactive UI). `-d` repeats the working directory the engine
//! already forces, so that Grok's `process.chdir` lands where the engine put it.
//!
//! Flags that do not exist in 1.0.x (and are not used): no permission, sandbox or tool-list flag
//! (`--trust`, `--always-approve`, `--sandbox`, `--deny`, `--disallowed-tools`,
//! `--no-subagents` belong to other "grok" CLIs), no resume, no effort, no output format, no
//! spending cap. Flags that exist but are never used: `-k`/`--api-key` and `-u`/`--base-url`
//! (Grok writes their values to `~/.grok/user-settings.json`, and a key in argv is visible to
//! every local user); the environment carries them instead.

use std::ffi::OsString;

use corral_engine::{
    AllowRule, AttemptEvidence, AttemptPlan, CliAdapter, CommandSpec, Diagnosis, EgressNeeds,
    EnvProfile, Liveness, PromptDelivery, ProxyHonour, StreamParser, VersionCheck,
};
use corral_ports::{
    Capabilities, CostReporting, Gate, PromptChannel, ProviderError, ProviderId, SessionIdTiming,
};

use crate::diagnose;
use crate::parser::GrokStreamParser;
use crate::settings::GrokSettings;

/// The prompt file the engine writes beside `signals.json`.
pub const PROMPT_FILE: &str = "grok-prompt.md";

/// The variables Grok reads, as the engine's env profile patterns (a trailing `*` is a prefix). A
/// name listed here reaches the child even when it looks secret.
///
/// Grok 1.0.x reads `GROK_API_KEY`, `GROK_BASE_URL`, `GROK_MODEL` and `GROK_MAX_TOKENS` (the
/// reply cap, 1536 tokens by default: raise it for large file writes). It does not read
/// `XAI_API_KEY`, which is therefore not passed: the agent's shell commands run with this
/// environment, and a key the CLI does not use is only exposure. `MORPH_API_KEY` is not passed
/// either: with it Grok offers an `edit_file` tool that sends file contents to Morph's API, a
/// third party; name it in the engine's allowlist to opt in. Node's built-in `fetch` honours the
/// proxy variables only with `NODE_USE_ENV_PROXY=1` (recent Node versions), so that passes too.
pub const ENV_PROFILE: &[&str] = &[
    "GROK_*",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "NODE_USE_ENV_PROXY",
    "NODE_EXTRA_CA_CERTS",
];

/// Grok, as the engine drives it.
#[derive(Debug, Clone, Default)]
pub struct GrokAdapter {
    settings: GrokSettings,
}

impl GrokAdapter {
    /// An adapter with these settings.
    pub fn new(settings: GrokSettings) -> Self {
        GrokAdapter { settings }
    }

    /// The settings.
    pub fn settings(&self) -> &GrokSettings {
        &self.settings
    }

    /// The arguments of one attempt (program excluded). The prompt is never among them: `-p`
    /// carries the pointer sentence.
    ///
    /// Refused before any spawn: a resume (Grok has none), a spending cap (Grok cannot enforce
    /// one, and a cap that is silently ignored is worse than none), a missing or unusable
    /// pointer, and values that would be read as flags. Reasoning effort and extra roots are
    /// accepted and have no flag: see [`CAPABILITIES`].
    pub fn args(&self, plan: &AttemptPlan<'_>) -> Result<Vec<OsString>, ProviderError> {
        let session = plan.session;
        if let Some(id) = plan.resume {
            return Err(invalid(format!(
                "Grok CLI has no headless resume (it prints no session id and has no resume \
                 flag), so session {id} cannot be continued; start a new session instead"
            )));
        }
        if let Some(budget) = session.max_budget_usd {
            return Err(invalid(format!(
                "Grok CLI cannot cap spending, so max_budget_usd {budget} would be ignored; \
                 drop it or choose a provider that enforces it"
            )));
        }
        let Some(pointer) = plan.pointer else {
            return Err(invalid(format!(
                "no prompt pointer: Grok takes its prompt only as the -p argument, so the engine \
                 must write {PROMPT_FILE} and pass the sentence pointing at it"
            )));
        };
        let sentence = pointer.sentence.as_str();
        if sentence.trim().is_empty() || sentence.starts_with('-') {
            return Err(invalid(format!(
                "the prompt pointer sentence {sentence:?} is empty or starts with '-'"
            )));
        }
        let cwd = session.cwd.as_os_str();
        if cwd.is_empty() || cwd.as_encoded_bytes().starts_with(b"-") {
            return Err(invalid(format!(
                "the working directory {:?} is empty or starts with '-'",
                session.cwd
            )));
        }
        let mut args: Vec<OsString> = vec!["-p".into(), sentence.into(), "-d".into(), cwd.into()];
        if let Some(model) = session.model.as_ref().or(self.settings.model.as_ref()) {
            if model.is_empty() || model.starts_with('-') {
                return Err(invalid(format!(
                    "model name {model:?} is empty or starts with '-'"
                )));
            }
            args.push("-m".into());
            args.push(model.into());
        }
        // Grok counts rounds of tool execution, which is what a turn is to the others.
        if let Some(turns) = session.max_turns {
            if turns == 0 {
                return Err(invalid("max_turns must be at least 1, got 0".to_string()));
            }
            args.push("--max-tool-rounds".into());
            args.push(turns.to_string().into());
        }
        args.extend(self.settings.extra_args.iter().map(OsString::from));
        Ok(args)
    }

    /// The interactive command line: `grok -d <cwd> [-m <model>] [extra] [<pointer>]`. Never
    /// `-p`, which forces headless mode; the pointer is Grok's positional opening message.
    pub fn interactive_args(&self, plan: &AttemptPlan<'_>) -> Result<Vec<OsString>, ProviderError> {
        if let Some(id) = plan.resume {
            return Err(invalid(format!(
                "Grok CLI cannot resume session {id}: it has no session ids; start a new session"
            )));
        }
        let session = plan.session;
        let cwd = session.cwd.as_os_str();
        if cwd.is_empty() || cwd.as_encoded_bytes().starts_with(b"-") {
            return Err(invalid(format!(
                "the working directory {:?} is empty or starts with '-'",
                session.cwd
            )));
        }
        let mut args: Vec<OsString> = vec!["-d".into(), cwd.into()];
        if let Some(model) = session.model.as_ref().or(self.settings.model.as_ref()) {
            if model.is_empty() || model.starts_with('-') {
                return Err(invalid(format!(
                    "model name {model:?} is empty or starts with '-'"
                )));
            }
            args.push("-m".into());
            args.push(model.into());
        }
        args.extend(self.settings.extra_args.iter().map(OsString::from));
        if let Some(pointer) = plan.pointer {
            // After `--`, so a sentence can never be read as an option.
            args.push("--".into());
            args.push(pointer.sentence.clone().into());
        }
        Ok(args)
    }
}

/// Grok's row in the capability table.
pub const CAPABILITIES: Capabilities = Capabilities {
    prompt: PromptChannel::PointerFile,
    session_id: SessionIdTiming::Never,
    resume: false,
    effort: false,
    cost: CostReporting::None,
    streaming: false,
    always_terminal_event: true,
    enforced_gates: &[],
    over_grants: &[
        (
            Gate::EditFiles,
            "Grok's headless mode approves every tool and 1.0.x has no flag to withhold one: \
             create_file and str_replace_editor (and bash) can still write any file",
        ),
        (
            Gate::RunShell,
            "Grok's headless mode approves every tool and 1.0.x has no flag to withhold one: the \
             bash tool stays available",
        ),
        (
            Gate::WebAccess,
            "no flag closes the network: bash can reach it, and with a model whose name holds \
             'grok' Grok asks the API for server-side live search whenever the prompt holds words \
             such as 'now' or 'latest' or a year (the pointer names the run directory, which \
             carries the year)",
        ),
        (
            Gate::ExtraRoots,
            "Grok does not confine its tools to the working directory: view_file, create_file, \
             str_replace_editor and bash reach any path the user can",
        ),
    ],
};

fn invalid(reason: String) -> ProviderError {
    ProviderError::InvalidSession {
        provider: ProviderId::Grok,
        reason,
        hint: None,
    }
}

impl CliAdapter for GrokAdapter {
    /// Grok keeps user settings in `~/.grok` (project settings go to the working directory's
    /// `.grok`, which is writable anyway).
    fn state_paths(&self, env: &corral_engine::ChildEnv<'_>) -> Vec<std::path::PathBuf> {
        env.home().map(|h| h.join(".grok")).into_iter().collect()
    }

    /// In `~/.grok`: `user-settings.json` (the base URL the API key is sent to) and `GROK.md`
    /// (instructions every session reads).
    fn protected_paths(&self, env: &corral_engine::ChildEnv<'_>) -> Vec<std::path::PathBuf> {
        env.home()
            .map(|h| vec![h.join(".grok/user-settings.json"), h.join(".grok/GROK.md")])
            .unwrap_or_default()
    }

    /// `~/.grok/user-settings.json`, which holds the API key.
    fn credential_paths(&self, env: &corral_engine::ChildEnv<'_>) -> Vec<std::path::PathBuf> {
        env.home()
            .map(|h| h.join(".grok/user-settings.json"))
            .into_iter()
            .collect()
    }

    fn provider(&self) -> ProviderId {
        ProviderId::Grok
    }

    fn prompt_delivery(&self) -> PromptDelivery {
        PromptDelivery::PointerFile {
            file_name: PROMPT_FILE,
        }
    }

    /// xAI's API (`api.x.ai`, or `GROK_BASE_URL`). Grok runs on Node, whose `fetch` ignores the
    /// proxy variables before Node 24: the engine preloads a connector that tunnels it.
    fn egress(&self, env: &corral_engine::ChildEnv<'_>) -> EgressNeeds {
        EgressNeeds {
            endpoints: vec![
                env.get("GROK_BASE_URL")
                    .and_then(AllowRule::from_url)
                    .unwrap_or_else(|| AllowRule::exact("api.x.ai", 443)),
            ],
            proxy: ProxyHonour::NodeFetchPreload,
        }
    }

    /// `baseURL` of `~/.grok/user-settings.json`, in use unless `GROK_BASE_URL` (which Grok
    /// reads first) is set.
    fn configured_endpoints(
        &self,
        env: &corral_engine::ChildEnv<'_>,
    ) -> Vec<corral_engine::ConfiguredEndpoint> {
        use corral_engine::ConfiguredEndpoint;
        let Some(file) = env.home().map(|h| h.join(".grok/user-settings.json")) else {
            return Vec::new();
        };
        let Some(settings) = ConfiguredEndpoint::read_json(&file) else {
            return Vec::new();
        };
        settings["baseURL"]
            .as_str()
            .and_then(|url| {
                ConfiguredEndpoint::from_url(
                    url,
                    format!("{} baseURL", ConfiguredEndpoint::shown_path(env, &file)),
                    env.get("GROK_BASE_URL").is_none(),
                )
            })
            .into_iter()
            .collect()
    }

    fn env_profile(&self) -> EnvProfile {
        EnvProfile::new("grok", ENV_PROFILE)
    }

    fn command(&self, plan: &AttemptPlan<'_>) -> Result<CommandSpec, ProviderError> {
        Ok(CommandSpec {
            program: self.settings.command.clone(),
            args: self.args(plan)?,
            // Grok has no retry, telemetry or update knob to set.
            env_set: Vec::new(),
            session_id: None,
        })
    }

    fn parser(&self) -> Box<dyn StreamParser> {
        Box::new(GrokStreamParser::default())
    }

    fn diagnose(&self, evidence: &AttemptEvidence<'_>) -> Diagnosis {
        diagnose::diagnose(evidence)
    }

    fn version_check(&self) -> Option<VersionCheck> {
        Some(VersionCheck::dash_version(
            &self.settings.command,
            &self.settings.tested_versions,
            self.settings.version_timeout,
            self.settings.allow_untested_version,
        ))
    }

    /// Any process activity counts, and the idle limit is at least [`GrokSettings::min_idle`]:
    /// see the crate documentation for the rule and why.
    fn liveness(&self) -> Liveness {
        Liveness::ProcessActivity {
            min_idle: self.settings.min_idle(),
        }
    }

    fn capabilities(&self) -> Capabilities {
        CAPABILITIES
    }

    fn interactive_command(&self, plan: &AttemptPlan<'_>) -> Result<CommandSpec, ProviderError> {
        Ok(CommandSpec {
            program: self.settings.command.clone(),
            args: self.interactive_args(plan)?,
            env_set: Vec::new(),
            session_id: None,
        })
    }
}
