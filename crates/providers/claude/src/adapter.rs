//! [`ClaudeAdapter`]: Claude Code's command line, environment profile and version check, plugged
//! into the engine's [`CliAdapter`].
//!
//! The command is `claude -p --verbose --output-format stream-json` with the prompt on stdin (never
//! in argv), `--resume <id>` to continue a session (the engine runs it in the session's own working
//! directory, which Claude requires), and `--permission-mode bypassPermissions` with a
//! `--disallowedTools=<list>` deny list for the gates the session closes. Flags whose value Claude
//! declares variadic (`--disallowedTools`, `--add-dir`) are written `--flag=value`: in the separate
//! form they swallow the arguments that follow (recorded: `--allowedTools Write 'prompt'` loses the
//! prompt).

use std::ffi::OsString;

use corral_engine::{
    AllowRule, AttemptEvidence, AttemptPlan, CliAdapter, CommandSpec, Diagnosis, EgressNeeds,
    EnvProfile, PromptDelivery, ProxyHonour, StreamParser, VersionCheck,
};
use corral_ports::{
    AiSession, Capabilities, CostReporting, Gate, Permissions, PromptChannel, ProviderError,
    ProviderId, SessionId, SessionIdTiming,
};

use crate::diagnose;
use crate::parser::ClaudeStreamParser;
use crate::settings::{ClaudeSettings, MAX_INTERNAL_RETRIES};

/// The variables Claude Code reads, as the engine's env profile patterns (a trailing `*` is a
/// prefix). A name listed here reaches the child even when it looks secret, so only Claude's own
/// credentials are listed: `ANTHROPIC_API_KEY`, `ANTHROPIC_AUTH_TOKEN`, `CLAUDE_CODE_OAUTH_TOKEN`.
///
/// Bedrock and Vertex: the routing variables pass (`CLAUDE_CODE_USE_BEDROCK`/`_VERTEX` through
/// `CLAUDE_CODE_*`, regions, `AWS_PROFILE`, config and credential file paths, the Google project and
/// credentials file), but static cloud keys (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
/// `AWS_SESSION_TOKEN`, `AWS_BEARER_TOKEN_BEDROCK`) do not: the agent runs shell commands with this
/// environment, and such keys usually open far more than the model. Name them exactly in the
/// engine's allowlist to pass them.
pub const ENV_PROFILE: &[&str] = &[
    "ANTHROPIC_*",
    "CLAUDE_CODE_*",
    "CLAUDE_CONFIG_DIR",
    "CLAUDE_STREAM_IDLE_TIMEOUT_MS",
    "DISABLE_*",
    "IS_SANDBOX",
    "API_TIMEOUT_MS",
    "BASH_DEFAULT_TIMEOUT_MS",
    "BASH_MAX_TIMEOUT_MS",
    "BASH_MAX_OUTPUT_LENGTH",
    "MAX_THINKING_TOKENS",
    "MAX_MCP_OUTPUT_TOKENS",
    "MCP_TIMEOUT",
    "MCP_TOOL_TIMEOUT",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "NODE_EXTRA_CA_CERTS",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_PROFILE",
    "AWS_CONFIG_FILE",
    "AWS_SHARED_CREDENTIALS_FILE",
    "CLOUD_ML_REGION",
    "VERTEX_REGION_*",
    "GOOGLE_CLOUD_PROJECT",
    "GOOGLE_APPLICATION_CREDENTIALS",
];

/// Tools closed when [`Permissions::edit_files`] is false. `Write` stays open on purpose: the agent
/// writes `signals.json` with it, and without that file a run has no result. So with Claude,
/// `edit_files: false` means "no in-place edits", not "no writes": `Write` can still create or
/// overwrite any file, and so can `Bash` when `run_shell` is true.
pub const EDIT_TOOLS: &[&str] = &["Edit", "MultiEdit", "NotebookEdit"];
/// Tools closed when [`Permissions::run_shell`] is false.
pub const SHELL_TOOLS: &[&str] = &["Bash"];
/// Tools closed when [`Permissions::web_access`] is false.
pub const WEB_TOOLS: &[&str] = &["WebFetch", "WebSearch"];

/// Claude Code, as the engine drives it.
#[derive(Debug, Clone, Default)]
pub struct ClaudeAdapter {
    settings: ClaudeSettings,
}

impl ClaudeAdapter {
    /// An adapter with these settings.
    pub fn new(settings: ClaudeSettings) -> Self {
        ClaudeAdapter { settings }
    }

    /// The settings.
    pub fn settings(&self) -> &ClaudeSettings {
        &self.settings
    }

    /// The arguments of one attempt (program excluded). The prompt is never among them.
    pub fn args(&self, plan: &AttemptPlan<'_>) -> Result<Vec<OsString>, ProviderError> {
        let session = plan.session;
        let mut args: Vec<OsString> = ["-p", "--verbose", "--output-format", "stream-json"]
            .into_iter()
            .map(OsString::from)
            .collect();
        if let Some(id) = plan.resume {
            args.push("--resume".into());
            args.push(id.as_str().into());
        }
        args.push("--permission-mode".into());
        args.push("bypassPermissions".into());
        let denied = disallowed_tools(session.permissions);
        if !denied.is_empty() {
            args.push(format!("--disallowedTools={}", denied.join(",")).into());
        }
        self.push_common(session, &mut args)?;
        // A print-mode flag (hidden from `claude --help`, accepted by 2.1.x); a run that hits
        // it ends with the result subtype `error_max_turns`.
        if let Some(turns) = session.max_turns {
            if turns == 0 {
                return Err(invalid("max_turns must be at least 1, got 0".to_string()));
            }
            args.push("--max-turns".into());
            args.push(turns.to_string().into());
        }
        args.extend(self.settings.extra_args.iter().map(OsString::from));
        Ok(args)
    }

    /// Options headless and interactive runs share: model, effort, extra roots, budget.
    fn push_common(
        &self,
        session: &AiSession,
        args: &mut Vec<OsString>,
    ) -> Result<(), ProviderError> {
        if let Some(model) = session.model.as_ref().or(self.settings.model.as_ref()) {
            if model.is_empty() || model.starts_with('-') {
                return Err(invalid(format!(
                    "model name {model:?} is empty or starts with '-'"
                )));
            }
            args.push("--model".into());
            args.push(model.into());
        }
        if let Some(effort) = session.effort {
            args.push("--effort".into());
            args.push(effort.as_str().into());
        }
        for root in &session.extra_roots {
            if root.as_os_str().is_empty() {
                return Err(invalid("an extra root is an empty path".to_string()));
            }
            let mut arg = OsString::from("--add-dir=");
            arg.push(root.as_os_str());
            args.push(arg);
        }
        if let Some(budget) = session.max_budget_usd {
            args.push("--max-budget-usd".into());
            args.push(budget_arg(budget)?.into());
        }
        Ok(())
    }

    /// The interactive command line: a session id minted up front (or `--resume`), the
    /// `acceptEdits` permission mode (a person is there to answer), the shared options, and the
    /// pointer sentence as the one positional argument.
    pub fn interactive_args(
        &self,
        plan: &AttemptPlan<'_>,
        minted: Option<&SessionId>,
    ) -> Result<Vec<OsString>, ProviderError> {
        let mut args: Vec<OsString> = Vec::new();
        match (plan.resume, minted) {
            (Some(id), _) => {
                args.push("--resume".into());
                args.push(id.as_str().into());
            }
            (None, Some(id)) => {
                args.push("--session-id".into());
                args.push(id.as_str().into());
            }
            (None, None) => {}
        }
        args.push("--permission-mode".into());
        args.push("acceptEdits".into());
        self.push_common(plan.session, &mut args)?;
        args.extend(self.settings.extra_args.iter().map(OsString::from));
        // Without a prompt the person starts the conversation.
        if let Some(pointer) = plan.pointer {
            args.push(pointer.sentence.clone().into());
        }
        Ok(args)
    }

    /// Variables set on top of the environment policy: the CLI's own retry cap (a few retries it
    /// makes itself, each read from the stream, before the engine's schedule takes over), and no self-update, telemetry or other non-essential traffic during an
    /// unattended run. The last three are what every recorded run used.
    pub fn env_set(&self) -> Vec<(String, String)> {
        let retries = self.settings.max_internal_retries.min(MAX_INTERNAL_RETRIES);
        vec![
            ("CLAUDE_CODE_MAX_RETRIES".to_string(), retries.to_string()),
            ("DISABLE_AUTOUPDATER".to_string(), "1".to_string()),
            ("DISABLE_TELEMETRY".to_string(), "1".to_string()),
            (
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC".to_string(),
                "1".to_string(),
            ),
        ]
    }
}

/// Claude Code's row in the capability table.
pub const CAPABILITIES: Capabilities = Capabilities {
    prompt: PromptChannel::Stdin,
    session_id: SessionIdTiming::FirstLine,
    resume: true,
    effort: true,
    cost: CostReporting::TokensAndUsd,
    streaming: true,
    always_terminal_event: true,
    enforced_gates: &[Gate::RunShell, Gate::WebAccess],
    over_grants: &[
        (
            Gate::EditFiles,
            "Edit, MultiEdit and NotebookEdit are denied, but Write stays allowed so the agent can \
             create signals.json, and Write (or Bash when allowed) can still overwrite files",
        ),
        (
            Gate::ExtraRoots,
            "bypassPermissions does not confine tools to the working directory and --add-dir \
             roots; Bash and file tools can reach any path the user can",
        ),
    ],
};

/// The deny list for the gates `permissions` closes, in a fixed order.
pub fn disallowed_tools(permissions: Permissions) -> Vec<&'static str> {
    let mut tools = Vec::new();
    if !permissions.edit_files {
        tools.extend_from_slice(EDIT_TOOLS);
    }
    if !permissions.run_shell {
        tools.extend_from_slice(SHELL_TOOLS);
    }
    if !permissions.web_access {
        tools.extend_from_slice(WEB_TOOLS);
    }
    tools
}

fn budget_arg(budget: f64) -> Result<String, ProviderError> {
    if budget.is_finite() && budget > 0.0 {
        // `Display` for f64 never uses an exponent, so the CLI gets a plain decimal.
        Ok(budget.to_string())
    } else {
        Err(invalid(format!(
            "max_budget_usd must be a positive number, got {budget}"
        )))
    }
}

fn invalid(reason: String) -> ProviderError {
    ProviderError::InvalidSession {
        provider: ProviderId::Claude,
        reason,
        hint: None,
    }
}

impl CliAdapter for ClaudeAdapter {
    /// Claude Code keeps sessions, settings and credentials in `$CLAUDE_CONFIG_DIR` (default
    /// `~/.claude`) and its global config in `~/.claude.json`.
    fn state_paths(&self, env: &corral_engine::ChildEnv<'_>) -> Vec<std::path::PathBuf> {
        let mut paths: Vec<std::path::PathBuf> = env
            .dir_or_home("CLAUDE_CONFIG_DIR", ".claude")
            .into_iter()
            .collect();
        paths.extend(env.home().map(|h| h.join(".claude.json")));
        paths
    }

    /// In the config directory: `settings.json` (hooks, `apiKeyHelper`, `statusLine`: commands
    /// Claude Code runs), the hook scripts such settings conventionally point to, `CLAUDE.md`
    /// (instructions every session reads), custom commands, subagents and skills. Not
    /// `~/.claude.json`, which Claude Code rewrites on every start (it also holds user-scope MCP
    /// servers: see docs/security.md).
    fn protected_paths(&self, env: &corral_engine::ChildEnv<'_>) -> Vec<std::path::PathBuf> {
        env.dir_or_home("CLAUDE_CONFIG_DIR", ".claude")
            .map(|dir| {
                [
                    "settings.json",
                    "CLAUDE.md",
                    "hooks",
                    "commands",
                    "agents",
                    "skills",
                ]
                .iter()
                .map(|name| dir.join(name))
                .collect()
            })
            .unwrap_or_default()
    }

    /// `.credentials.json` in the config directory (the OAuth login where no keychain is) and
    /// `~/.claude.json` (the account, and an approved API key's fingerprint).
    fn credential_paths(&self, env: &corral_engine::ChildEnv<'_>) -> Vec<std::path::PathBuf> {
        let mut paths: Vec<std::path::PathBuf> = env
            .dir_or_home("CLAUDE_CONFIG_DIR", ".claude")
            .map(|dir| dir.join(".credentials.json"))
            .into_iter()
            .collect();
        paths.extend(env.home().map(|h| h.join(".claude.json")));
        paths
    }

    fn provider(&self) -> ProviderId {
        ProviderId::Claude
    }

    fn prompt_delivery(&self) -> PromptDelivery {
        PromptDelivery::Stdin
    }

    /// The Messages API (`api.anthropic.com`, or the gateway `ANTHROPIC_BASE_URL` names) and,
    /// for a sign-in without an API key, the OAuth token service (`platform.claude.com`).
    /// Claude Code reads `HTTPS_PROXY` / `HTTP_PROXY` itself. Bedrock and Vertex endpoints are
    /// not derived: add them to `sandbox.network_allow`.
    fn egress(&self, env: &corral_engine::ChildEnv<'_>) -> EgressNeeds {
        let endpoints = match env.get("ANTHROPIC_BASE_URL").and_then(AllowRule::from_url) {
            Some(gateway) => vec![gateway],
            None => vec![
                AllowRule::exact("api.anthropic.com", 443),
                AllowRule::exact("platform.claude.com", 443),
            ],
        };
        EgressNeeds {
            endpoints,
            proxy: ProxyHonour::Environment,
        }
    }

    /// `env.ANTHROPIC_BASE_URL` of `$CLAUDE_CONFIG_DIR/settings.json` (`~/.claude`), which
    /// Claude Code applies to itself: in use.
    fn configured_endpoints(
        &self,
        env: &corral_engine::ChildEnv<'_>,
    ) -> Vec<corral_engine::ConfiguredEndpoint> {
        use corral_engine::ConfiguredEndpoint;
        let Some(file) = env
            .dir_or_home("CLAUDE_CONFIG_DIR", ".claude")
            .map(|dir| dir.join("settings.json"))
        else {
            return Vec::new();
        };
        let Some(settings) = ConfiguredEndpoint::read_json(&file) else {
            return Vec::new();
        };
        settings["env"]["ANTHROPIC_BASE_URL"]
            .as_str()
            .and_then(|url| {
                ConfiguredEndpoint::from_url(
                    url,
                    format!(
                        "{} env.ANTHROPIC_BASE_URL",
                        ConfiguredEndpoint::shown_path(env, &file)
                    ),
                    true,
                )
            })
            .into_iter()
            .collect()
    }

    fn env_profile(&self) -> EnvProfile {
        EnvProfile::new("claude", ENV_PROFILE)
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
        Box::new(ClaudeStreamParser::default())
    }

    fn diagnose(&self, evidence: &AttemptEvidence<'_>) -> Diagnosis {
        diagnose::diagnose(evidence)
    }

    fn capabilities(&self) -> Capabilities {
        CAPABILITIES
    }

    fn interactive_command(&self, plan: &AttemptPlan<'_>) -> Result<CommandSpec, ProviderError> {
        let minted = plan.resume.is_none().then(corral_engine::mint_session_uuid);
        Ok(CommandSpec {
            program: self.settings.command.clone(),
            args: self.interactive_args(plan, minted.as_ref())?,
            env_set: self.env_set(),
            session_id: minted.or_else(|| plan.resume.cloned()),
        })
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
