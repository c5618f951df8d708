//! [`CopilotAdapter`]: the Copilot CLI's command line, environment profile and version check,
//! plugged into the engine's [`CliAdapter`].
//!
//! Copilot takes its prompt only as an argument (`-p`) or on stdin without `-p`, so the engine
//! writes the prompt to `copilot-prompt.md` beside `signals.json` and the CLI gets a one-line
//! pointer sentence as `-p` ([`PromptDelivery::PointerFile`]). The full command of a fresh attempt:
//!
//! ```text
//! copilot -p <pointer sentence> --output-format json --no-auto-update --disable-client-telemetry
//!         --no-ask-user --session-id=<minted uuid> --allow-all-tools [--allow-all-urls]
//!         [--deny-tool=<kinds>] [--excluded-tools=<tools>] [--disable-builtin-mcps]
//!         --secret-env-vars=<credential names> [--model=<m>] [--reasoning-effort=<e>]
//!         [--add-dir=<run dir>] [--add-dir=<root>]… <extra_args>
//! ```
//!
//! A resumed attempt has `--resume=<id>` instead of `--session-id`. Every valued long flag is
//! written `--flag=value`: `--deny-tool`, `--excluded-tools` and `--secret-env-vars` take several
//! values and would swallow the arguments after them in the separate form, `--resume` takes an
//! optional value, and the joined form never lets a value be read as a flag. Copilot splits a
//! joined value on top-level commas (`shell,url`), as its own `--secret-env-vars=A,B` example
//! shows.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use corral_engine::{
    AllowRule, AttemptEvidence, AttemptPlan, CliAdapter, CommandSpec, Diagnosis, EgressNeeds,
    EnvProfile, PromptDelivery, ProxyHonour, StreamParser, VersionCheck,
};
use corral_ports::{
    Capabilities, CostReporting, Effort, Gate, Permissions, PromptChannel, ProviderError,
    ProviderId, SessionId, SessionIdTiming,
};

use crate::diagnose;
use crate::mint::UuidSource;
use crate::parser::CopilotJsonParser;
use crate::settings::CopilotSettings;

/// The prompt file the engine writes beside `signals.json`.
pub const PROMPT_FILE: &str = "copilot-prompt.md";

/// The variables the Copilot CLI reads, as the engine's env profile patterns (a trailing `*` is a
/// prefix). A name listed here reaches the child even when it looks secret, so the credentials
/// listed are Copilot's own: `COPILOT_GITHUB_TOKEN`, `GH_TOKEN`, `GITHUB_TOKEN` (in Copilot's order
/// of precedence) and, through `COPILOT_*`, the BYOK `COPILOT_PROVIDER_API_KEY`,
/// `COPILOT_PROVIDER_BEARER_TOKEN` and `COPILOT_PROVIDER_API_KEY_COMMAND`.
///
/// `COPILOT_*` also carries `COPILOT_HOME` (its state directory), `COPILOT_MODEL`,
/// `COPILOT_OFFLINE`, the rest of the BYOK set (`COPILOT_PROVIDER_BASE_URL`, `_TYPE`, `_WIRE_API`,
/// `_MODEL_ID`, …) and `COPILOT_GH_HOST`. OpenTelemetry's `OTEL_*` is left out: an exporter can
/// ship prompts and replies off the machine; name it in the engine's allowlist to pass it.
pub const ENV_PROFILE: &[&str] = &[
    "COPILOT_*",
    "GH_TOKEN",
    "GITHUB_TOKEN",
    "GH_HOST",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "NODE_EXTRA_CA_CERTS",
    "XDG_CONFIG_HOME",
    "XDG_CACHE_HOME",
    "XDG_STATE_HOME",
    "XDG_DATA_HOME",
];

/// Credentials Copilot reads that the agent's shell commands and MCP servers must not see:
/// passed as `--secret-env-vars`, which strips them from those environments and redacts their
/// values from the output. Copilot itself still uses them.
pub const SECRET_ENV_VARS: &[&str] = &[
    "COPILOT_GITHUB_TOKEN",
    "GH_TOKEN",
    "GITHUB_TOKEN",
    "COPILOT_PROVIDER_API_KEY",
    "COPILOT_PROVIDER_BEARER_TOKEN",
];

/// Permission kinds denied (`--deny-tool=shell`) when [`Permissions::run_shell`] is false. A deny
/// rule beats `--allow-all-tools`, and the kind covers every shell tool (`bash`, `read_bash`, …).
pub const SHELL_DENY: &[&str] = &["shell"];
/// Permission kinds denied when [`Permissions::web_access`] is false: `url` with no argument
/// matches every URL the web-fetch tool or a shell command asks for.
pub const WEB_DENY: &[&str] = &["url"];
/// Tools hidden from the model (`--excluded-tools`) when [`Permissions::edit_files`] is false.
/// Only `edit` (in-place edits): `create` stays, because the agent writes `signals.json` with it,
/// and Copilot's `write` permission kind cannot be narrowed to that one file (a deny rule beats
/// every allow rule). So with Copilot, `edit_files: false` means "no in-place edits", not "no
/// writes".
pub const EDIT_EXCLUDED: &[&str] = &["edit"];
/// Tools hidden from the model when [`Permissions::web_access`] is false (Copilot 1.0's names).
pub const WEB_EXCLUDED: &[&str] = &["web_fetch", "web_search"];

/// The Copilot CLI, as the engine drives it.
#[derive(Debug, Clone, Default)]
pub struct CopilotAdapter {
    settings: CopilotSettings,
    uuids: UuidSource,
}

impl CopilotAdapter {
    /// An adapter with these settings, minting session ids from `/dev/urandom`.
    pub fn new(settings: CopilotSettings) -> Self {
        CopilotAdapter::with_uuid_source(settings, UuidSource::urandom())
    }

    /// An adapter minting session ids from `uuids` (tests pass fixed bytes).
    pub fn with_uuid_source(settings: CopilotSettings, uuids: UuidSource) -> Self {
        CopilotAdapter { settings, uuids }
    }

    /// The settings.
    pub fn settings(&self) -> &CopilotSettings {
        &self.settings
    }

    /// The arguments of one attempt (program excluded): `--resume=<id>` when `plan` resumes,
    /// otherwise `--session-id=<minted>` when an id is given. The prompt is never among them, only
    /// the pointer sentence that names its file.
    pub fn args(
        &self,
        plan: &AttemptPlan<'_>,
        minted: Option<&SessionId>,
    ) -> Result<Vec<OsString>, ProviderError> {
        let session = plan.session;
        // `--max-autopilot-continues` caps autopilot's continuations, not the model's turns in
        // a prompt run: forwarding it would promise a limit that does not hold.
        if let Some(turns) = session.max_turns {
            return Err(invalid(format!(
                "max_turns {turns} cannot be enforced: `copilot -p` has no turn limit; run \
                 without one or with a provider that has one (claude, grok)"
            )));
        }
        let pointer = plan.pointer.ok_or_else(|| {
            invalid("no prompt pointer: Copilot takes its prompt through copilot-prompt.md".into())
        })?;
        let mut args: Vec<OsString> = vec![
            "-p".into(),
            pointer.sentence.clone().into(),
            "--output-format".into(),
            "json".into(),
            "--no-auto-update".into(),
            "--disable-client-telemetry".into(),
            "--no-ask-user".into(),
        ];
        match (plan.resume, minted) {
            (Some(id), _) => args.push(format!("--resume={id}").into()),
            (None, Some(id)) => args.push(format!("--session-id={id}").into()),
            (None, None) => {}
        }
        args.extend(
            permission_args(session.permissions)
                .into_iter()
                .map(OsString::from),
        );
        args.push(format!("--secret-env-vars={}", SECRET_ENV_VARS.join(",")).into());
        if let Some(model) = session.model.as_ref().or(self.settings.model.as_ref()) {
            if model.is_empty() || model.starts_with('-') {
                return Err(invalid(format!(
                    "model name {model:?} is empty or starts with '-'"
                )));
            }
            args.push(format!("--model={model}").into());
        }
        if let Some(effort) = session.effort {
            args.push(format!("--reasoning-effort={}", effort_arg(effort)).into());
        }
        for dir in allowed_dirs(plan, &pointer.path)? {
            let mut arg = OsString::from("--add-dir=");
            arg.push(dir.as_os_str());
            args.push(arg);
        }
        args.extend(self.settings.extra_args.iter().map(OsString::from));
        Ok(args)
    }

    /// The interactive command line: the session minted up front (or `--resume=`), no tool
    /// pre-approval (a person answers), the directories the agent may use (the prompt file's
    /// included, or it could not read it), and the pointer as `-i`, which starts the
    /// interactive UI and sends it as the first message.
    pub fn interactive_args(
        &self,
        plan: &AttemptPlan<'_>,
        minted: Option<&SessionId>,
    ) -> Result<Vec<OsString>, ProviderError> {
        let session = plan.session;
        let mut args: Vec<OsString> = vec!["--no-auto-update".into()];
        match (plan.resume, minted) {
            (Some(id), _) => args.push(format!("--resume={id}").into()),
            (None, Some(id)) => args.push(format!("--session-id={id}").into()),
            (None, None) => {}
        }
        if let Some(model) = session.model.as_ref().or(self.settings.model.as_ref()) {
            if model.is_empty() || model.starts_with('-') {
                return Err(invalid(format!(
                    "model name {model:?} is empty or starts with '-'"
                )));
            }
            args.push(format!("--model={model}").into());
        }
        if let Some(pointer) = plan.pointer {
            for dir in allowed_dirs(plan, &pointer.path)? {
                let mut arg = OsString::from("--add-dir=");
                arg.push(dir.as_os_str());
                args.push(arg);
            }
        }
        args.extend(self.settings.extra_args.iter().map(OsString::from));
        if let Some(pointer) = plan.pointer {
            args.push(format!("--interactive={}", pointer.sentence).into());
        }
        Ok(args)
    }

    fn mint(&self) -> Result<SessionId, ProviderError> {
        let text = self.uuids.mint().map_err(|e| ProviderError::Io {
            provider: ProviderId::Copilot,
            path: PathBuf::from("/dev/urandom"),
            reason: format!("cannot mint a session id: {e}"),
        })?;
        SessionId::new(text).map_err(|e| invalid(format!("minted session id refused: {e}")))
    }
}

/// Copilot's row in the capability table.
pub const CAPABILITIES: Capabilities = Capabilities {
    prompt: PromptChannel::PointerFile,
    session_id: SessionIdTiming::MintedUpFront,
    resume: true,
    effort: true,
    cost: CostReporting::PremiumRequests,
    streaming: true,
    always_terminal_event: true,
    enforced_gates: &[Gate::RunShell, Gate::WebAccess],
    over_grants: &[
        (
            Gate::EditFiles,
            "the edit tool is hidden, but create stays allowed so the agent can write \
             signals.json; create (and the shell, when allowed) can still write files, because \
             Copilot's write permission cannot be narrowed to one file (a deny rule beats every \
             allow rule)",
        ),
        (
            Gate::ExtraRoots,
            "Copilot's path check confines its file tools to the working directory, the --add-dir \
             roots and the run directory (added so the agent can read copilot-prompt.md and write \
             signals.json), but it always admits the system temporary directory too, and shell \
             commands, when allowed, can reach any path the user can",
        ),
    ],
};

/// The permission flags for `permissions`, in a fixed order. `--allow-all-tools` always (headless
/// Copilot denies every tool that would need an approval, and the run still exits 0), and deny
/// rules or hidden tools for the gates the session closes.
pub fn permission_args(permissions: Permissions) -> Vec<String> {
    let mut args = vec!["--allow-all-tools".to_string()];
    if permissions.web_access {
        // Without it a URL in a fetch or a shell command needs an approval nobody can give.
        args.push("--allow-all-urls".to_string());
    }
    let mut deny: Vec<&str> = Vec::new();
    let mut excluded: Vec<&str> = Vec::new();
    if !permissions.edit_files {
        excluded.extend_from_slice(EDIT_EXCLUDED);
    }
    if !permissions.run_shell {
        deny.extend_from_slice(SHELL_DENY);
    }
    if !permissions.web_access {
        deny.extend_from_slice(WEB_DENY);
        excluded.extend_from_slice(WEB_EXCLUDED);
    }
    if !deny.is_empty() {
        args.push(format!("--deny-tool={}", deny.join(",")));
    }
    if !excluded.is_empty() {
        args.push(format!("--excluded-tools={}", excluded.join(",")));
    }
    if !permissions.web_access {
        // The built-in GitHub MCP server reads github.com on the agent's behalf.
        args.push("--disable-builtin-mcps".to_string());
    }
    args
}

/// The directories given with `--add-dir`: the one holding the prompt file and `signals.json`
/// unless it lies inside the working directory (Copilot's path check would refuse both files
/// otherwise), then the session's extra roots, without repeats.
fn allowed_dirs(plan: &AttemptPlan<'_>, prompt_file: &Path) -> Result<Vec<PathBuf>, ProviderError> {
    let session = plan.session;
    let mut dirs: Vec<PathBuf> = Vec::new();
    let run_dirs = [session.signals_file.parent(), prompt_file.parent()];
    for dir in run_dirs.into_iter().flatten() {
        if !dir.as_os_str().is_empty()
            && !dir.starts_with(&session.cwd)
            && !dirs.iter().any(|d| d == dir)
        {
            dirs.push(dir.to_path_buf());
        }
    }
    for root in &session.extra_roots {
        if root.as_os_str().is_empty() {
            return Err(invalid("an extra root is an empty path".to_string()));
        }
        if !dirs.iter().any(|d| d == root) {
            dirs.push(root.clone());
        }
    }
    Ok(dirs)
}

fn effort_arg(effort: Effort) -> &'static str {
    match effort {
        Effort::Low => "low",
        Effort::Medium => "medium",
        Effort::High => "high",
    }
}

fn invalid(reason: String) -> ProviderError {
    ProviderError::InvalidSession {
        provider: ProviderId::Copilot,
        reason,
        hint: None,
    }
}

impl CliAdapter for CopilotAdapter {
    /// Copilot keeps sessions and config in `$COPILOT_HOME` (default `~/.copilot`) and unpacks
    /// its runtime under `$XDG_CACHE_HOME/copilot` (default `~/.cache/copilot`).
    fn state_paths(&self, env: &corral_engine::ChildEnv<'_>) -> Vec<std::path::PathBuf> {
        let mut paths: Vec<std::path::PathBuf> = env
            .dir_or_home("COPILOT_HOME", ".copilot")
            .into_iter()
            .collect();
        paths.extend(
            env.dir_or_home("XDG_CACHE_HOME", ".cache")
                .map(|c| c.join("copilot")),
        );
        paths
    }

    /// In `$COPILOT_HOME`: `mcp-config.json` (MCP servers: commands Copilot starts). Not
    /// `config.json`, which Copilot rewrites itself (trusted folders, sign-in).
    fn protected_paths(&self, env: &corral_engine::ChildEnv<'_>) -> Vec<std::path::PathBuf> {
        env.dir_or_home("COPILOT_HOME", ".copilot")
            .map(|dir| vec![dir.join("mcp-config.json")])
            .unwrap_or_default()
    }

    /// `config.json` in `$COPILOT_HOME` (the GitHub token, where no keychain is) and the
    /// GitHub Copilot editors' logins in `$XDG_CONFIG_HOME/github-copilot`.
    fn credential_paths(&self, env: &corral_engine::ChildEnv<'_>) -> Vec<std::path::PathBuf> {
        let mut paths: Vec<std::path::PathBuf> = env
            .dir_or_home("COPILOT_HOME", ".copilot")
            .map(|dir| dir.join("config.json"))
            .into_iter()
            .collect();
        paths.extend(
            env.dir_or_home("XDG_CONFIG_HOME", ".config")
                .map(|c| c.join("github-copilot")),
        );
        paths
    }

    fn provider(&self) -> ProviderId {
        ProviderId::Copilot
    }

    fn prompt_delivery(&self) -> PromptDelivery {
        PromptDelivery::PointerFile {
            file_name: PROMPT_FILE,
        }
    }

    /// With BYOK, the provider `COPILOT_PROVIDER_BASE_URL` names and nothing else; otherwise
    /// GitHub's API (token exchange) and Copilot's (`api.githubcopilot.com` and its plan
    /// hosts), or those of the GitHub Enterprise host in `COPILOT_GH_HOST` / `GH_HOST`.
    /// Copilot reads `HTTPS_PROXY` / `HTTP_PROXY` itself.
    fn egress(&self, env: &corral_engine::ChildEnv<'_>) -> EgressNeeds {
        let endpoints = if let Some(byok) = env
            .get("COPILOT_PROVIDER_BASE_URL")
            .and_then(AllowRule::from_url)
        {
            vec![byok]
        } else if let Some(host) = env.get("COPILOT_GH_HOST").or_else(|| env.get("GH_HOST")) {
            let host = host.trim_start_matches("https://").trim_end_matches('/');
            vec![
                AllowRule::exact(host, 443),
                AllowRule::exact(&format!("api.{host}"), 443),
                AllowRule::exact(&format!("copilot-api.{host}"), 443),
            ]
        } else {
            [
                "api.github.com",
                "api.githubcopilot.com",
                "api.individual.githubcopilot.com",
                "api.business.githubcopilot.com",
                "api.enterprise.githubcopilot.com",
            ]
            .iter()
            .map(|h| AllowRule::exact(h, 443))
            .collect()
        };
        EgressNeeds {
            endpoints,
            proxy: ProxyHonour::Environment,
        }
    }

    fn env_profile(&self) -> EnvProfile {
        EnvProfile::new("copilot", ENV_PROFILE)
    }

    /// A fresh attempt gets a newly minted session id, in argv and in
    /// [`CommandSpec::session_id`] (which the engine persists before the CLI prints anything); a
    /// resumed one names the session it resumes and mints nothing.
    fn command(&self, plan: &AttemptPlan<'_>) -> Result<CommandSpec, ProviderError> {
        let minted = match plan.resume {
            Some(_) => None,
            None => Some(self.mint()?),
        };
        Ok(CommandSpec {
            program: self.settings.command.clone(),
            args: self.args(plan, minted.as_ref())?,
            env_set: Vec::new(),
            session_id: minted,
        })
    }

    fn interactive_command(&self, plan: &AttemptPlan<'_>) -> Result<CommandSpec, ProviderError> {
        let minted = match plan.resume {
            Some(_) => None,
            None => Some(self.mint()?),
        };
        Ok(CommandSpec {
            program: self.settings.command.clone(),
            args: self.interactive_args(plan, minted.as_ref())?,
            env_set: Vec::new(),
            session_id: minted.or_else(|| plan.resume.cloned()),
        })
    }

    fn parser(&self) -> Box<dyn StreamParser> {
        Box::new(CopilotJsonParser::default())
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
