//! [`GeminiAdapter`]: Gemini CLI's command line, environment profile and version check, plugged
//! into the engine's [`CliAdapter`].
//!
//! The command is `gemini -p "" --output-format stream-json --skip-trust --approval-mode yolo
//! --include-directories <run dir> [--resume <uuid>] [-m <model>] [extra args]` with the prompt on
//! stdin. `-p` makes the run headless and its value is appended to what stdin holds, so an empty
//! value leaves the prompt as piped (recorded: the echoed user message is exactly stdin's text).
//!
//! The traps, each recorded with 0.61.0:
//! - trust: in a folder not in `~/.gemini/trustedFolders.json` Gemini silently downgrades YOLO to
//!   asking, and a headless run that asks is refused every tool. `--skip-trust` trusts the working
//!   directory for this run only, without writing the trust file.
//! - workspace: Gemini's file tools refuse any path outside the working directory and
//!   `--include-directories` (`Path not in workspace`). `signals.json` lives in the run
//!   directory, outside the work tree, so that directory is always included.
//! - plan mode: `--approval-mode plan` is Gemini's read-only mode, but it refuses every write
//!   outside its own plans directory (`Access denied: plan path ... must be within the designated
//!   plans directory`), `signals.json` included, so a read-only session cannot report its result.
//!   A read-only session therefore runs in YOLO too: see the over-grants in [`CAPABILITIES`].
//! - resume: `--resume <uuid>` works, though `--help` names only `latest` or an index.
//! - auth type: see the crate documentation.

use std::ffi::OsString;

use corral_engine::{
    AllowRule, AttemptEvidence, AttemptPlan, ChildEnv, CliAdapter, CommandSpec, Diagnosis,
    EgressNeeds, EnvProfile, PromptDelivery, ProxyHonour, StreamParser, VersionCheck,
};
use corral_ports::{
    Capabilities, CostReporting, Gate, PromptChannel, ProviderError, ProviderId, SessionIdTiming,
};

use crate::diagnose;
use crate::parser::GeminiStreamParser;
use crate::settings::GeminiSettings;

/// The variables Gemini CLI reads, as the engine's env profile patterns (a trailing `*` is a
/// prefix). A name listed here reaches the child even when it looks secret: `GEMINI_API_KEY`,
/// `GOOGLE_API_KEY` (Vertex express mode) and `GOOGLE_CLOUD_ACCESS_TOKEN` are Gemini's own
/// credentials. `GOOGLE_APPLICATION_CREDENTIALS` passes as a path; the file it names is the
/// account's.
pub const ENV_PROFILE: &[&str] = &[
    "GEMINI_*",
    "GOOGLE_GEMINI_BASE_URL",
    "GOOGLE_VERTEX_BASE_URL",
    "GOOGLE_API_KEY",
    "GOOGLE_GENAI_*",
    "GOOGLE_CLOUD_PROJECT",
    "GOOGLE_CLOUD_PROJECT_ID",
    "GOOGLE_CLOUD_LOCATION",
    "GOOGLE_CLOUD_QUOTA_PROJECT",
    "GOOGLE_CLOUD_ACCESS_TOKEN",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "NODE_USE_ENV_PROXY",
    "NODE_EXTRA_CA_CERTS",
];

/// Gemini CLI, as the engine drives it.
#[derive(Debug, Clone, Default)]
pub struct GeminiAdapter {
    settings: GeminiSettings,
}

impl GeminiAdapter {
    /// An adapter with these settings.
    pub fn new(settings: GeminiSettings) -> Self {
        GeminiAdapter { settings }
    }

    /// The settings.
    pub fn settings(&self) -> &GeminiSettings {
        &self.settings
    }

    /// The arguments of one attempt (program excluded). The prompt is never among them: it is on
    /// stdin, and `-p` carries the empty string.
    ///
    /// Refused before any spawn: a spending cap and a turn cap (Gemini 0.61 has neither flag, and
    /// a cap that is silently ignored is worse than none), and values that would be read as flags.
    pub fn args(&self, plan: &AttemptPlan<'_>) -> Result<Vec<OsString>, ProviderError> {
        let session = plan.session;
        if let Some(budget) = session.max_budget_usd {
            return Err(invalid(format!(
                "Gemini CLI cannot cap spending, so max_budget_usd {budget} would be ignored; \
                 drop it or choose a provider that enforces it"
            )));
        }
        if let Some(turns) = session.max_turns {
            return Err(invalid(format!(
                "Gemini CLI has no headless turn cap, so max_turns {turns} would be ignored; \
                 drop it or choose a provider that enforces it"
            )));
        }
        let mut args: Vec<OsString> = [
            "-p",
            "",
            "--output-format",
            "stream-json",
            "--skip-trust",
            "--approval-mode",
            "yolo",
        ]
        .into_iter()
        .map(OsString::from)
        .collect();
        if let Some(id) = plan.resume {
            args.push("--resume".into());
            args.push(id.as_str().into());
        }
        self.push_common(plan, &mut args)?;
        args.extend(self.settings.extra_args.iter().map(OsString::from));
        Ok(args)
    }

    /// The model and the directories Gemini's tools may reach besides the working directory:
    /// the run directory (for `signals.json`) and the session's extra roots.
    fn push_common(
        &self,
        plan: &AttemptPlan<'_>,
        args: &mut Vec<OsString>,
    ) -> Result<(), ProviderError> {
        let session = plan.session;
        if let Some(model) = session.model.as_ref().or(self.settings.model.as_ref()) {
            if model.is_empty() || model.starts_with('-') {
                return Err(invalid(format!(
                    "model name {model:?} is empty or starts with '-'"
                )));
            }
            args.push("-m".into());
            args.push(model.into());
        }
        let run_dir = session
            .signals_file
            .parent()
            .map(std::path::Path::to_path_buf);
        for dir in run_dir.iter().chain(session.extra_roots.iter()) {
            let raw = dir.as_os_str();
            if raw.is_empty() || raw.as_encoded_bytes().starts_with(b"-") {
                continue;
            }
            // `=`: the flag is an array, and in the separate form yargs reads on into the next
            // value that does not start with `-`.
            let mut arg = OsString::from("--include-directories=");
            arg.push(raw);
            args.push(arg);
        }
        Ok(())
    }

    /// The interactive command line: `gemini [--resume <uuid>] --skip-trust --approval-mode
    /// auto_edit [-m <model>] [--include-directories=…] [extra] [-i <pointer>]`. A person is there
    /// to answer, so shell commands ask; `-i` runs the pointer sentence and stays interactive.
    pub fn interactive_args(&self, plan: &AttemptPlan<'_>) -> Result<Vec<OsString>, ProviderError> {
        let mut args: Vec<OsString> = Vec::new();
        if let Some(id) = plan.resume {
            args.push("--resume".into());
            args.push(id.as_str().into());
        }
        args.extend(["--skip-trust", "--approval-mode", "auto_edit"].map(OsString::from));
        self.push_common(plan, &mut args)?;
        args.extend(self.settings.extra_args.iter().map(OsString::from));
        if let Some(pointer) = plan.pointer {
            args.push("-i".into());
            args.push(pointer.sentence.clone().into());
        }
        Ok(args)
    }
}

/// Gemini CLI's row in the capability table.
pub const CAPABILITIES: Capabilities = Capabilities {
    prompt: PromptChannel::Stdin,
    // Printed on the first line, but reported with the model's first answer: see the parser.
    session_id: SessionIdTiming::FirstEvent,
    resume: true,
    effort: false,
    cost: CostReporting::TokensOnly,
    streaming: true,
    always_terminal_event: true,
    enforced_gates: &[],
    over_grants: &[
        (
            Gate::EditFiles,
            "Gemini's read-only mode (--approval-mode plan) also refuses signals.json, so a \
             read-only session runs in YOLO mode: write_file and replace stay available",
        ),
        (
            Gate::RunShell,
            "no headless flag withholds one tool (--allowed-tools only skips confirmations): \
             run_shell_command stays available in YOLO mode",
        ),
        (
            Gate::WebAccess,
            "google_web_search and web_fetch stay available in YOLO mode, and the shell can reach \
             the network",
        ),
        (
            Gate::ExtraRoots,
            "Gemini's file tools refuse paths outside the working directory and \
             --include-directories, but run_shell_command reaches any path the user can",
        ),
    ],
};

fn invalid(reason: String) -> ProviderError {
    ProviderError::InvalidSession {
        provider: ProviderId::Gemini,
        reason,
        hint: None,
    }
}

/// `~/.gemini`, or `$GEMINI_CLI_HOME/.gemini`: Gemini reads `GEMINI_CLI_HOME` in place of the
/// home directory.
/// `NAME=value` (optionally `export `, quoted) in a `.env` text: the last assignment.
fn dotenv_value(text: &str, name: &str) -> Option<String> {
    text.lines()
        .filter_map(|line| {
            let line = line.trim();
            let line = line.strip_prefix("export ").unwrap_or(line);
            let (key, value) = line.split_once('=')?;
            (key.trim() == name).then(|| {
                value
                    .trim()
                    .trim_matches(|c| c == '"' || c == '\'')
                    .to_string()
            })
        })
        .next_back()
}

fn gemini_dir(env: &ChildEnv<'_>) -> Option<std::path::PathBuf> {
    match env.get("GEMINI_CLI_HOME").filter(|h| !h.is_empty()) {
        Some(home) => Some(std::path::PathBuf::from(home).join(".gemini")),
        None => env.home().map(|h| h.join(".gemini")),
    }
}

impl CliAdapter for GeminiAdapter {
    /// Gemini keeps settings, sessions (`tmp/<project>/chats`), trusted folders and logins in
    /// `~/.gemini`.
    fn state_paths(&self, env: &ChildEnv<'_>) -> Vec<std::path::PathBuf> {
        gemini_dir(env).into_iter().collect()
    }

    /// In `~/.gemini`: `settings.json` (the auth type, hooks, MCP servers: commands Gemini runs,
    /// and the base URL the key is sent to), `trustedFolders.json` (a trusted folder's own
    /// settings and hooks load without asking), `GEMINI.md` (instructions every session reads),
    /// `policies`, `commands`, `extensions`, `skills` and `agents`.
    fn protected_paths(&self, env: &ChildEnv<'_>) -> Vec<std::path::PathBuf> {
        gemini_dir(env)
            .map(|dir| {
                [
                    "settings.json",
                    "trustedFolders.json",
                    "GEMINI.md",
                    "policies",
                    "commands",
                    "extensions",
                    "skills",
                    "agents",
                ]
                .iter()
                .map(|name| dir.join(name))
                .collect()
            })
            .unwrap_or_default()
    }

    /// In `~/.gemini`: `oauth_creds.json` (the Google sign-in), `google_accounts.json`, the
    /// encrypted key store `gemini-credentials.json` and `.env` (which Gemini loads, and where an
    /// API key is conventionally kept).
    fn credential_paths(&self, env: &ChildEnv<'_>) -> Vec<std::path::PathBuf> {
        gemini_dir(env)
            .map(|dir| {
                [
                    "oauth_creds.json",
                    "google_accounts.json",
                    "gemini-credentials.json",
                    ".env",
                ]
                .iter()
                .map(|name| dir.join(name))
                .collect()
            })
            .unwrap_or_default()
    }

    fn provider(&self) -> ProviderId {
        ProviderId::Gemini
    }

    fn prompt_delivery(&self) -> PromptDelivery {
        PromptDelivery::Stdin
    }

    /// The Gemini API (`generativelanguage.googleapis.com`, or `GOOGLE_GEMINI_BASE_URL`). Gemini
    /// runs on Node, whose `fetch` ignores the proxy variables before Node 24: the engine preloads
    /// a connector that tunnels it. Vertex AI and the Google sign-in endpoints are not derived:
    /// add them to `sandbox.network_allow`.
    fn egress(&self, env: &ChildEnv<'_>) -> EgressNeeds {
        EgressNeeds {
            endpoints: vec![
                env.get("GOOGLE_GEMINI_BASE_URL")
                    .and_then(AllowRule::from_url)
                    .unwrap_or_else(|| AllowRule::exact("generativelanguage.googleapis.com", 443)),
            ],
            proxy: ProxyHonour::NodeFetchPreload,
        }
    }

    /// `GOOGLE_GEMINI_BASE_URL` in the `.env` files Gemini loads from the home (`~/.gemini/.env`,
    /// else `~/.env`; a variable already set wins, so it is in use only when the child's
    /// environment sets none). A project's own `.env` is not read here (the agent can write it).
    fn configured_endpoints(&self, env: &ChildEnv<'_>) -> Vec<corral_engine::ConfiguredEndpoint> {
        let files = [
            gemini_dir(env).map(|dir| dir.join(".env")),
            env.home().map(|h| h.join(".env")),
        ];
        let Some((file, text)) = files
            .into_iter()
            .flatten()
            .find_map(|f| std::fs::read_to_string(&f).ok().map(|text| (f, text)))
        else {
            return Vec::new();
        };
        dotenv_value(&text, "GOOGLE_GEMINI_BASE_URL")
            .and_then(|url| {
                corral_engine::ConfiguredEndpoint::from_url(
                    &url,
                    format!(
                        "{} GOOGLE_GEMINI_BASE_URL",
                        corral_engine::ConfiguredEndpoint::shown_path(env, &file)
                    ),
                    env.get("GOOGLE_GEMINI_BASE_URL").is_none(),
                )
            })
            .into_iter()
            .collect()
    }

    fn env_profile(&self) -> EnvProfile {
        EnvProfile::new("gemini", ENV_PROFILE)
    }

    fn command(&self, plan: &AttemptPlan<'_>) -> Result<CommandSpec, ProviderError> {
        Ok(CommandSpec {
            program: self.settings.command.clone(),
            args: self.args(plan)?,
            env_set: env_set(),
            session_id: None,
        })
    }

    fn parser(&self) -> Box<dyn StreamParser> {
        Box::new(GeminiStreamParser::default())
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

    fn capabilities(&self) -> Capabilities {
        CAPABILITIES
    }

    fn interactive_command(&self, plan: &AttemptPlan<'_>) -> Result<CommandSpec, ProviderError> {
        Ok(CommandSpec {
            program: self.settings.command.clone(),
            args: self.interactive_args(plan)?,
            env_set: env_set(),
            session_id: plan.resume.cloned(),
        })
    }
}

/// Nothing: Gemini has no retry knob in its environment (its attempts are `general.maxAttempts`
/// in a settings file), and its telemetry is off unless a settings file turns it on.
fn env_set() -> Vec<(String, String)> {
    Vec::new()
}
