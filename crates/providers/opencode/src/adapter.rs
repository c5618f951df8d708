//! [`OpencodeAdapter`]: OpenCode's command line, environment profile and version check, plugged
//! into the engine's [`CliAdapter`].
//!
//! The command is `opencode run --format json --thinking --dir <cwd>` with the prompt on stdin
//! (never in argv; OpenCode reads a piped stdin to its end and uses it as the message), then
//! `-s <id>` to resume, `-m <provider/model>`, `--variant <effort>`, `--auto` only when the
//! settings ask for it, and the settings' extra arguments.
//!
//! - `--dir` pins the project root. Without it OpenCode takes the root from `$PWD` when that is
//!   set, not from its working directory; the engine forces the working directory but a `PWD`
//!   let through by an allowlist would point OpenCode elsewhere.
//! - `--thinking` makes OpenCode print `reasoning` parts (otherwise dropped in `--format json`);
//!   they become [`corral_ports::AgentEvent::Thinking`] and are also a sign of life between steps.
//! - OpenCode has no `--add-dir` and no switch to deny a tool. Headless, it auto-rejects every
//!   permission request unless `--auto` is given, and its default configuration asks before
//!   touching a directory outside `--dir` (`external_directory`) while it allows edits, shell
//!   and web fetches without asking. So no [`corral_ports::Permissions`] gate is enforced (see
//!   [`CAPABILITIES`]), and a session that declares extra roots is refused unless
//!   [`OpencodeSettings::auto_approve`] is on: without `--auto` the roots would be unreachable,
//!   and `--auto` approves every directory, not only the declared ones. The operator has to
//!   choose that over-grant; the adapter never adds `--auto` on its own.
//! - OpenCode has no spend cap, so a session with `max_budget_usd` is refused rather than run
//!   without the cap it asked for.

use std::ffi::OsString;
use std::path::Path;

use corral_engine::{
    AllowRule, AttemptEvidence, AttemptPlan, CliAdapter, CommandSpec, Diagnosis, EgressNeeds,
    EnvProfile, PromptDelivery, ProxyHonour, StreamParser, VersionCheck,
};
use corral_ports::{
    AiSession, Capabilities, CostReporting, Gate, PromptChannel, ProviderError, ProviderId,
    SessionIdTiming,
};

use crate::diagnose;
use crate::parser::OpencodeStreamParser;
use crate::settings::OpencodeSettings;

/// The variables OpenCode reads, as the engine's env profile patterns (a trailing `*` is a
/// prefix). A name listed here reaches the child even when it looks secret.
///
/// OpenCode is an aggregator: it talks to whichever provider the model names, and finds that
/// provider's key in the variable models.dev declares for it. So the keys of the common providers
/// are listed, each by its exact name: `ANTHROPIC_API_KEY`, `OPENAI_API_KEY`,
/// `OPENROUTER_API_KEY`, `GOOGLE_GENERATIVE_AI_API_KEY`, `GEMINI_API_KEY`, `GROQ_API_KEY`,
/// `XAI_API_KEY`, `DEEPSEEK_API_KEY`, `MISTRAL_API_KEY`, `TOGETHER_API_KEY`, `FIREWORKS_API_KEY`,
/// `CEREBRAS_API_KEY`, `AZURE_API_KEY`; OpenCode's own (`OPENCODE_API_KEY`, the server password)
/// come with `OPENCODE_*`. A provider not listed here needs its variable named in the engine's
/// allowlist; keys saved with `opencode auth login` live in `$XDG_DATA_HOME/opencode/auth.json`
/// and need nothing.
///
/// The XDG directories are listed even though the core set passes them: OpenCode keeps its
/// sessions under `XDG_DATA_HOME`, so a resume only finds the session when the directory is the
/// same, also with `EnvInherit::None`.
///
/// Bedrock and Vertex: the routing variables pass (regions, `AWS_PROFILE`, config and credential
/// file paths, the Google project, location and credentials file), static cloud keys
/// (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, `AWS_BEARER_TOKEN_BEDROCK`)
/// do not: the agent runs shell commands with this environment, and such keys usually open far
/// more than the model. Name them exactly in the engine's allowlist to pass them.
pub const ENV_PROFILE: &[&str] = &[
    "OPENCODE_*",
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
    "XDG_CACHE_HOME",
    "XDG_STATE_HOME",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "OPENROUTER_API_KEY",
    "GOOGLE_GENERATIVE_AI_API_KEY",
    "GEMINI_API_KEY",
    "GROQ_API_KEY",
    "XAI_API_KEY",
    "DEEPSEEK_API_KEY",
    "MISTRAL_API_KEY",
    "TOGETHER_API_KEY",
    "FIREWORKS_API_KEY",
    "CEREBRAS_API_KEY",
    "AZURE_API_KEY",
    "AZURE_RESOURCE_NAME",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_PROFILE",
    "AWS_CONFIG_FILE",
    "AWS_SHARED_CREDENTIALS_FILE",
    "GOOGLE_CLOUD_PROJECT",
    "GOOGLE_CLOUD_LOCATION",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "VERTEX_LOCATION",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "NODE_EXTRA_CA_CERTS",
];

/// OpenCode's row in the capability table.
///
/// The session id is on every line, but the first line only comes with the model's first output
/// (or the error), after a start-up of several seconds and a title side-request: hence
/// [`SessionIdTiming::FirstEvent`]. Cost is reported per step, in tokens and dollars.
pub const CAPABILITIES: Capabilities = Capabilities {
    prompt: PromptChannel::Stdin,
    session_id: SessionIdTiming::FirstEvent,
    resume: true,
    effort: true,
    cost: CostReporting::TokensAndUsd,
    streaming: true,
    always_terminal_event: true,
    enforced_gates: &[],
    over_grants: &[
        (
            Gate::EditFiles,
            "OpenCode has no switch to deny its write, edit and patch tools and its default \
             configuration allows them without asking: edits inside --dir land whether or not \
             edit_files is false",
        ),
        (
            Gate::RunShell,
            "OpenCode has no switch to deny its bash tool and its default configuration allows \
             it without asking: commands run whether or not run_shell is false",
        ),
        (
            Gate::WebAccess,
            "OpenCode has no switch to deny its webfetch tool and its default configuration \
             allows it without asking: fetches run whether or not web_access is false",
        ),
        (
            Gate::ExtraRoots,
            "OpenCode has no --add-dir: without --auto it auto-rejects every directory outside \
             --dir, so extra roots are refused unless auto_approve is set, and with --auto it \
             approves any directory, not only the declared roots; bash commands are not confined \
             to --dir either way",
        ),
    ],
};

/// OpenCode, as the engine drives it.
#[derive(Debug, Clone, Default)]
pub struct OpencodeAdapter {
    settings: OpencodeSettings,
}

impl OpencodeAdapter {
    /// An adapter with these settings.
    pub fn new(settings: OpencodeSettings) -> Self {
        OpencodeAdapter { settings }
    }

    /// The settings.
    pub fn settings(&self) -> &OpencodeSettings {
        &self.settings
    }

    /// The arguments of one attempt (program excluded). The prompt is never among them.
    pub fn args(&self, plan: &AttemptPlan<'_>) -> Result<Vec<OsString>, ProviderError> {
        let session = plan.session;
        refuse_what_cannot_be_honoured(session, self.settings.auto_approve)?;
        let mut args: Vec<OsString> = ["run", "--format", "json", "--thinking", "--dir"]
            .into_iter()
            .map(OsString::from)
            .collect();
        args.push(project_dir(&session.cwd)?);
        if let Some(id) = plan.resume {
            args.push("-s".into());
            args.push(id.as_str().into());
        }
        if let Some(model) = session.model.as_ref().or(self.settings.model.as_ref()) {
            check_model(model)?;
            args.push("-m".into());
            args.push(model.into());
        }
        if let Some(effort) = session.effort {
            args.push("--variant".into());
            args.push(effort.as_str().into());
        }
        if self.settings.auto_approve {
            args.push("--auto".into());
        }
        args.extend(self.settings.extra_args.iter().map(OsString::from));
        Ok(args)
    }

    /// Variables set on top of the environment policy: no self-update during an unattended run
    /// (`OPENCODE_DISABLE_AUTOUPDATE`) and no publishing of the session to a public share link
    /// (`OPENCODE_DISABLE_SHARE`; a user config with `"share": "auto"` would otherwise upload
    /// every run). Both were set in every recorded run. OpenCode has no variable that caps its
    /// own retries (a 500 was sent six times over 69 s, a 429 six times over 6 s), so none is set,
    /// and the engine's backoff comes on top of them.
    pub fn env_set(&self) -> Vec<(String, String)> {
        vec![
            ("OPENCODE_DISABLE_AUTOUPDATE".to_string(), "1".to_string()),
            ("OPENCODE_DISABLE_SHARE".to_string(), "1".to_string()),
        ]
    }
}

/// Refuses the parts of a session OpenCode cannot honour, before anything is spawned.
fn refuse_what_cannot_be_honoured(
    session: &AiSession,
    auto_approve: bool,
) -> Result<(), ProviderError> {
    if !session.extra_roots.is_empty() && !auto_approve {
        let roots: Vec<String> = session
            .extra_roots
            .iter()
            .map(|r| r.display().to_string())
            .collect();
        return Err(invalid(format!(
            "extra roots {roots:?} cannot be opened: OpenCode has no --add-dir and auto-rejects \
             directories outside --dir in a headless run; set providers.opencode.auto_approve to \
             pass --auto, which approves every permission request (any directory, not only these \
             roots)"
        )));
    }
    if let Some(budget) = session.max_budget_usd {
        return Err(invalid(format!(
            "max_budget_usd {budget} cannot be enforced: OpenCode has no spend cap; run without \
             one or with a provider that has one"
        )));
    }
    if let Some(turns) = session.max_turns {
        return Err(invalid(format!(
            "max_turns {turns} cannot be enforced: `opencode run` has no turn limit; run without \
             one or with a provider that has one (claude, grok)"
        )));
    }
    Ok(())
}

/// The working directory as `--dir` gets it: absolute, so that OpenCode does not resolve it a
/// second time against the working directory the engine already moved it to.
fn project_dir(cwd: &Path) -> Result<OsString, ProviderError> {
    if cwd.is_absolute() {
        return Ok(cwd.as_os_str().to_os_string());
    }
    std::path::absolute(cwd).map(OsString::from).map_err(|e| {
        invalid(format!(
            "working directory {cwd:?} cannot be made absolute: {e}"
        ))
    })
}

/// OpenCode names a model `provider/model`; the model part may hold more slashes
/// (`openrouter/anthropic/claude-sonnet-4.5`).
fn check_model(model: &str) -> Result<(), ProviderError> {
    let well_formed = !model.starts_with('-')
        && !model.chars().any(char::is_whitespace)
        && model
            .split_once('/')
            .is_some_and(|(provider, id)| !provider.is_empty() && !id.is_empty());
    if well_formed {
        Ok(())
    } else {
        Err(invalid(format!(
            "model name {model:?} is not spelled provider/model (for example \
             anthropic/claude-sonnet-4-5), or starts with '-'"
        )))
    }
}

fn invalid(reason: String) -> ProviderError {
    ProviderError::InvalidSession {
        provider: ProviderId::Opencode,
        reason,
        hint: None,
    }
}

impl CliAdapter for OpencodeAdapter {
    /// OpenCode keeps config, sessions, caches and state in its four XDG directories, read
    /// from the child's environment (`XDG_*_HOME`, else under `HOME`).
    fn state_paths(&self, env: &corral_engine::ChildEnv<'_>) -> Vec<std::path::PathBuf> {
        [
            ("XDG_CONFIG_HOME", ".config"),
            ("XDG_DATA_HOME", ".local/share"),
            ("XDG_CACHE_HOME", ".cache"),
            ("XDG_STATE_HOME", ".local/state"),
        ]
        .iter()
        .filter_map(|(var, default)| env.dir_or_home(var, default))
        .map(|dir| dir.join("opencode"))
        .collect()
    }

    /// In its config directory: the global config in each name OpenCode reads (providers,
    /// MCP servers, permissions), `AGENTS.md`, and the plugin, agent and command directories
    /// (a plugin is code OpenCode loads). The directory itself stays writable: OpenCode installs
    /// its plugin package there.
    fn protected_paths(&self, env: &corral_engine::ChildEnv<'_>) -> Vec<std::path::PathBuf> {
        env.dir_or_home("XDG_CONFIG_HOME", ".config")
            .map(|config| {
                let dir = config.join("opencode");
                [
                    "opencode.json",
                    "opencode.jsonc",
                    "config.json",
                    "AGENTS.md",
                    "plugin",
                    "plugins",
                    "agent",
                    "command",
                ]
                .iter()
                .map(|name| dir.join(name))
                .collect()
            })
            .unwrap_or_default()
    }

    /// In its data directory: `auth.json` (every provider's API key or OAuth login) and
    /// `mcp-auth.json` (MCP servers' OAuth tokens).
    fn credential_paths(&self, env: &corral_engine::ChildEnv<'_>) -> Vec<std::path::PathBuf> {
        env.dir_or_home("XDG_DATA_HOME", ".local/share")
            .map(|data| {
                let dir = data.join("opencode");
                vec![dir.join("auth.json"), dir.join("mcp-auth.json")]
            })
            .unwrap_or_default()
    }

    fn provider(&self) -> ProviderId {
        ProviderId::Opencode
    }

    /// `opencode <cwd> [-s <id>] [-m <provider/model>] [extra] [--prompt <pointer>]`: the TUI.
    fn interactive_command(&self, plan: &AttemptPlan<'_>) -> Result<CommandSpec, ProviderError> {
        let session = plan.session;
        let cwd = std::path::absolute(&session.cwd)
            .map_err(|e| invalid(format!("working directory: {e}")))?;
        let mut args: Vec<OsString> = vec![cwd.into_os_string()];
        if let Some(id) = plan.resume {
            args.push("-s".into());
            args.push(id.as_str().into());
        }
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
            let mut arg = OsString::from("--prompt=");
            arg.push(&pointer.sentence);
            args.push(arg);
        }
        Ok(CommandSpec {
            program: self.settings.command.clone(),
            args,
            env_set: self.env_set(),
            session_id: None,
        })
    }

    fn prompt_delivery(&self) -> PromptDelivery {
        PromptDelivery::Stdin
    }

    /// The providers OpenCode is configured with: every `baseURL` in `OPENCODE_CONFIG_CONTENT`,
    /// `ANTHROPIC_BASE_URL` / `OPENAI_BASE_URL`, and the public API of the model's provider
    /// (`anthropic/…` → `api.anthropic.com`, …). Providers declared only in OpenCode's config
    /// files do not widen the allow-list ([`CliAdapter::configured_endpoints`] names them, and
    /// a run refuses before the spawn until `sandbox.network_allow` holds the one it uses).
    /// OpenCode reads `HTTP_PROXY`/`HTTPS_PROXY` by the URL's scheme.
    fn egress(&self, env: &corral_engine::ChildEnv<'_>) -> EgressNeeds {
        let mut endpoints: Vec<AllowRule> = Vec::new();
        if let Some(content) = env.get("OPENCODE_CONFIG_CONTENT") {
            endpoints.extend(
                config_base_urls(content)
                    .iter()
                    .filter_map(|u| AllowRule::from_url(u)),
            );
        }
        for var in ["ANTHROPIC_BASE_URL", "OPENAI_BASE_URL"] {
            endpoints.extend(env.get(var).and_then(AllowRule::from_url));
        }
        let provider = self
            .settings
            .model
            .as_deref()
            .and_then(|m| m.split_once('/'))
            .map(|(provider, _)| provider);
        if let Some(host) = provider.and_then(public_api_host) {
            endpoints.push(AllowRule::exact(host, 443));
        }
        EgressNeeds {
            endpoints,
            proxy: ProxyHonour::Environment,
        }
    }

    /// Every provider `baseURL` of OpenCode's config files, the run's model's provider in use.
    fn configured_endpoints(
        &self,
        env: &corral_engine::ChildEnv<'_>,
    ) -> Vec<corral_engine::ConfiguredEndpoint> {
        crate::endpoints::configured_endpoints(env, self.settings.model.as_deref())
    }

    fn env_profile(&self) -> EnvProfile {
        EnvProfile::new("opencode", ENV_PROFILE)
    }

    fn command(&self, plan: &AttemptPlan<'_>) -> Result<CommandSpec, ProviderError> {
        Ok(CommandSpec {
            program: self.settings.command.clone(),
            args: self.args(plan)?,
            env_set: self.env_set(),
            session_id: None,
        })
    }

    fn parser(&self) -> Box<dyn StreamParser> {
        Box::new(OpencodeStreamParser::default())
    }

    fn diagnose(&self, evidence: &AttemptEvidence<'_>) -> Diagnosis {
        diagnose::diagnose(evidence)
    }

    fn capabilities(&self) -> Capabilities {
        CAPABILITIES
    }

    fn version_check(&self) -> Option<VersionCheck> {
        Some(VersionCheck::dash_version(
            &self.settings.command,
            &self.settings.tested_versions,
            self.settings.version_timeout,
            self.settings.allow_untested_version,
        ))
    }
}

/// Every provider `baseURL` (`provider.<id>.options.baseURL`) in an OpenCode configuration
/// given as JSON; none when it does not parse.
fn config_base_urls(content: &str) -> Vec<String> {
    let Ok(config) = serde_json::from_str::<serde_json::Value>(content) else {
        return Vec::new();
    };
    config["provider"]
        .as_object()
        .map(|providers| {
            providers
                .values()
                .filter_map(|p| p["options"]["baseURL"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// The public API host of an OpenCode model provider id (the part before `/` in
/// `anthropic/claude-sonnet-4`), for the ones whose host is fixed.
fn public_api_host(provider: &str) -> Option<&'static str> {
    Some(match provider {
        "anthropic" => "api.anthropic.com",
        "openai" => "api.openai.com",
        "openrouter" => "openrouter.ai",
        "google" => "generativelanguage.googleapis.com",
        "groq" => "api.groq.com",
        "xai" => "api.x.ai",
        "deepseek" => "api.deepseek.com",
        "mistral" => "api.mistral.ai",
        "togetherai" => "api.together.xyz",
        "fireworks-ai" => "api.fireworks.ai",
        "cerebras" => "api.cerebras.ai",
        _ => return None,
    })
}
