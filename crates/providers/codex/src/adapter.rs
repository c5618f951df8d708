//! [`CodexAdapter`]: Codex's command line, environment profile and version check, plugged into
//! the engine's [`CliAdapter`].
//!
//! A new session:
//!
//! ```text
//! codex exec --json --skip-git-repo-check -C <cwd> -s <sandbox> [--add-dir <root>]…
//!     [-m <model>] [-c model_reasoning_effort="<effort>"] [<permission -c>…] [<provider -c>…]
//!     [<extra args>…] -
//! ```
//!
//! A resumed one (the engine runs it in the session's own working directory):
//!
//! ```text
//! codex exec --json --skip-git-repo-check [-m <model>] [-c model_reasoning_effort="<effort>"]
//!     -c sandbox_mode="<sandbox>" [-c sandbox_workspace_write.writable_roots=[…]]
//!     [<permission -c>…] [<provider -c>…] [<extra args>…] resume <id> -
//! ```
//!
//! Traps this encodes:
//! - The prompt goes on stdin, named by the positional `-`; the engine writes it and closes stdin.
//!   Codex reads a piped stdin even when a prompt argument is given and waits for its end before
//!   the first request (recorded: `sleep 15 | codex exec … 'hi'` starts 15 s late).
//! - `--skip-git-repo-check` always: outside a Git repository Codex otherwise exits 1 at once
//!   ("Not inside a trusted directory…", recorded).
//! - `codex exec resume` accepts none of `-C`, `-s`, `--add-dir`; the sandbox and the writable
//!   roots are given as `-c` overrides of the configuration keys those flags set, so a resumed
//!   session runs with the same permissions as a fresh one. Every option goes before `resume`,
//!   where the recorded resume put them (`exec --json --skip-git-repo-check -c … resume <id>`).
//! - Never `resume --last`: with nothing to resume it silently starts a new session (recorded).
//! - `--full-auto` no longer exists (exit 2, recorded); `exec` never asks for approval anyway.
//! - The signals file's folder is added as a writable root when it lies outside the working
//!   directory and the extra roots: `workspace-write` confines writes, and without it the agent
//!   could not write `signals.json` into the run directory.
//! - `--add-dir` only works in `workspace-write`; in `read-only` Codex ignores it with a warning,
//!   so the adapter leaves it out there.
//! - The CLI's retries are capped through the model provider's table
//!   (`-c model_providers.<id>.request_max_retries=N`, `…stream_max_retries=N`; recorded to work for
//!   a custom provider). Codex refuses tables for its built-in providers (`openai`, …), so for those,
//!   and when the settings name no provider, its own defaults stay: 4 HTTP retries inside each of
//!   5 stream reconnects.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use corral_engine::{
    AllowRule, AttemptEvidence, AttemptPlan, CliAdapter, CommandSpec, Diagnosis, EgressNeeds,
    EnvProfile, PromptDelivery, ProxyHonour, StreamParser, VersionCheck,
};
use corral_ports::{
    AiSession, Capabilities, CostReporting, Gate, Permissions, PromptChannel, ProviderError,
    ProviderId, SessionIdTiming,
};

use crate::diagnose;
use crate::parser::CodexStreamParser;
use crate::settings::{BUILT_IN_PROVIDERS, CodexSettings, SandboxMode};

/// The variables Codex reads, as the engine's env profile patterns (a trailing `*` is a prefix).
/// A name listed here reaches the child even when it looks secret, so only Codex's own credentials
/// are listed: `OPENAI_API_KEY` (through `OPENAI_*`), `CODEX_API_KEY`, `CODEX_ACCESS_TOKEN`.
///
/// - `CODEX_*` is not a pattern: Codex sets `CODEX_SANDBOX`, `CODEX_SANDBOX_NETWORK_DISABLED`,
///   `CODEX_THREAD_ID` and more for the commands it runs, and a Corral started from inside a Codex
///   session must not hand them to its own child. Only the names Codex reads as configuration are
///   listed.
/// - A custom model provider's `env_key` (for example `AZURE_OPENAI_API_KEY`) is not known here;
///   name it exactly in the engine's allowlist.
/// - Bedrock: the routing variables pass, static AWS keys do not (the agent's commands get this
///   environment too); name them in the allowlist to pass them.
/// - `RUST_LOG` is not passed: Codex would log to stderr at whatever level Corral itself runs with.
pub const ENV_PROFILE: &[&str] = &[
    "OPENAI_*",
    "CODEX_HOME",
    "CODEX_API_KEY",
    "CODEX_ACCESS_TOKEN",
    "CODEX_CA_CERTIFICATE",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "all_proxy",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_PROFILE",
    "AWS_CONFIG_FILE",
    "AWS_SHARED_CREDENTIALS_FILE",
];

/// Codex, as the engine drives it.
#[derive(Debug, Clone, Default)]
pub struct CodexAdapter {
    settings: CodexSettings,
}

impl CodexAdapter {
    /// An adapter with these settings.
    pub fn new(settings: CodexSettings) -> Self {
        CodexAdapter { settings }
    }

    /// The settings.
    pub fn settings(&self) -> &CodexSettings {
        &self.settings
    }

    /// The sandbox a session runs in: the settings' override, else `workspace-write` when it may
    /// edit files and `read-only` when it may not.
    pub fn sandbox(&self, permissions: Permissions) -> SandboxMode {
        self.settings.sandbox.unwrap_or(if permissions.edit_files {
            SandboxMode::WorkspaceWrite
        } else {
            SandboxMode::ReadOnly
        })
    }

    /// The arguments of one attempt (program excluded). The prompt is never among them.
    pub fn args(&self, plan: &AttemptPlan<'_>) -> Result<Vec<OsString>, ProviderError> {
        let session = plan.session;
        if let Some(turns) = session.max_turns {
            return Err(invalid(format!(
                "max_turns {turns} cannot be enforced: `codex exec` has no turn limit; run \
                 without one or with a provider that has one (claude, grok)"
            )));
        }
        let sandbox = self.sandbox(session.permissions);
        let roots = match sandbox {
            SandboxMode::WorkspaceWrite => writable_roots(session)?,
            SandboxMode::ReadOnly | SandboxMode::DangerFullAccess => Vec::new(),
        };
        let mut args: Vec<OsString> = ["exec", "--json", "--skip-git-repo-check"]
            .into_iter()
            .map(OsString::from)
            .collect();
        // Codex syncs its plugin catalogue from github.com and chatgpt.com at start: traffic a
        // headless run does not need, which an allow-listed sandbox would only refuse.
        push_config(&mut args, "features.plugins", "false");
        // `resume` takes none of these; a resumed run gets the same sandbox through `-c` below.
        if plan.resume.is_none() {
            args.push("-C".into());
            args.push(session.cwd.as_os_str().into());
            args.push("-s".into());
            args.push(sandbox.as_str().into());
            for root in &roots {
                args.push("--add-dir".into());
                args.push(root.as_os_str().into());
            }
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
        if let Some(effort) = session.effort {
            push_config(
                &mut args,
                "model_reasoning_effort",
                &toml_string(effort.as_str()),
            );
        }
        if plan.resume.is_some() {
            push_config(&mut args, "sandbox_mode", &toml_string(sandbox.as_str()));
            if !roots.is_empty() {
                let list = roots
                    .iter()
                    .map(|root| path_toml(root))
                    .collect::<Result<Vec<_>, _>>()?;
                push_config(
                    &mut args,
                    "sandbox_workspace_write.writable_roots",
                    &format!("[{}]", list.join(",")),
                );
            }
        }
        self.permission_args(session.permissions, sandbox, &mut args);
        self.provider_args(&mut args)?;
        args.extend(self.settings.extra_args.iter().map(OsString::from));
        if let Some(id) = plan.resume {
            args.push("resume".into());
            args.push(id.as_str().into());
        }
        args.push("-".into());
        Ok(args)
    }

    /// Shell and web gates. The network switch only exists in `workspace-write` (`read-only` has
    /// no network, `danger-full-access` no sandbox); it is always given there, so that a
    /// `config.toml` saying otherwise does not decide.
    fn permission_args(
        &self,
        permissions: Permissions,
        sandbox: SandboxMode,
        args: &mut Vec<OsString>,
    ) {
        if !permissions.run_shell {
            args.push("--disable".into());
            args.push("shell_tool".into());
        }
        if !permissions.web_access {
            push_config(args, "web_search", &toml_string("disabled"));
        }
        match sandbox {
            SandboxMode::WorkspaceWrite => {
                push_config(
                    args,
                    "sandbox_workspace_write.network_access",
                    if permissions.web_access {
                        "true"
                    } else {
                        "false"
                    },
                );
                // Corral gives every run a private TMPDIR (which Codex still allows) and, under
                // its bubblewrap backend, a read-only `/tmp`: Codex's own sandbox must not try to
                // make `/tmp` writable, or every command it runs fails (observed: `bwrap: Can't
                // mkdir /tmp/.git: Read-only file system`).
                push_config(args, "sandbox_workspace_write.exclude_slash_tmp", "true");
            }
            SandboxMode::ReadOnly | SandboxMode::DangerFullAccess => {}
        }
    }

    /// The provider and its retry caps (see the module documentation).
    fn provider_args(&self, args: &mut Vec<OsString>) -> Result<(), ProviderError> {
        let Some(id) = self.settings.model_provider.as_deref() else {
            return Ok(());
        };
        let bare = !id.is_empty()
            && id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !bare {
            return Err(invalid(format!(
                "model provider id {id:?} must be letters, digits, '_' and '-' (a bare key of \
                 Codex's configuration)"
            )));
        }
        push_config(args, "model_provider", &toml_string(id));
        if !BUILT_IN_PROVIDERS.contains(&id) {
            push_config(
                args,
                &format!("model_providers.{id}.request_max_retries"),
                &self.settings.request_max_retries.to_string(),
            );
            push_config(
                args,
                &format!("model_providers.{id}.stream_max_retries"),
                &self.settings.stream_max_retries.to_string(),
            );
        }
        Ok(())
    }
}

/// Codex's row in the capability table, for sessions in its sandbox.
pub const CAPABILITIES: Capabilities = Capabilities {
    prompt: PromptChannel::Stdin,
    session_id: SessionIdTiming::FirstLine,
    resume: true,
    effort: true,
    cost: CostReporting::TokensOnly,
    streaming: true,
    always_terminal_event: true,
    enforced_gates: &[Gate::RunShell, Gate::WebAccess],
    over_grants: &[
        (
            Gate::EditFiles,
            "edit_files: false runs Codex's read-only sandbox, which closes every write, \
             signals.json included, so such a run ends without its result file; the alternative \
             (providers.codex.sandbox = workspace-write) lets the signals file be written but \
             opens all edits under the working directory and the extra roots",
        ),
        (
            Gate::ExtraRoots,
            "Codex's sandbox confines writes, not reads: commands can read any path the user can; \
             besides the working directory and the extra roots they may write /tmp, $TMPDIR and \
             the signals file's folder (added so that signals.json can be written); MCP servers \
             from Codex's config.toml run outside the sandbox",
        ),
    ],
};

/// The row when the settings turn the sandbox off (`danger-full-access`): nothing is enforced but
/// what the tools themselves refuse.
pub const CAPABILITIES_UNSANDBOXED: Capabilities = Capabilities {
    enforced_gates: &[Gate::RunShell],
    over_grants: &[
        (
            Gate::EditFiles,
            "danger-full-access: no sandbox, the agent can write anywhere the user can",
        ),
        (
            Gate::WebAccess,
            "danger-full-access: commands have the network even when web search is disabled",
        ),
        (
            Gate::ExtraRoots,
            "danger-full-access: no sandbox, nothing is confined to the working directory and the \
             extra roots",
        ),
    ],
    ..CAPABILITIES
};

/// The roots `workspace-write` must open: the extra roots, then the signals file's folder unless
/// it already lies inside the working directory or an extra root.
fn writable_roots(session: &AiSession) -> Result<Vec<PathBuf>, ProviderError> {
    let mut roots = Vec::with_capacity(session.extra_roots.len() + 1);
    for root in &session.extra_roots {
        if root.as_os_str().is_empty() {
            return Err(invalid("an extra root is an empty path".to_string()));
        }
        if root.to_string_lossy().starts_with('-') {
            return Err(invalid(format!(
                "extra root {} starts with '-'",
                root.display()
            )));
        }
        roots.push(root.clone());
    }
    if let Some(dir) = session
        .signals_file
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
    {
        let covered = dir.starts_with(&session.cwd) || roots.iter().any(|r| dir.starts_with(r));
        if !covered {
            roots.push(dir.to_path_buf());
        }
    }
    Ok(roots)
}

/// `-c key=value`, the value already TOML.
fn push_config(args: &mut Vec<OsString>, key: &str, value: &str) {
    args.push("-c".into());
    args.push(format!("{key}={value}").into());
}

/// A TOML basic string.
fn toml_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A path as a TOML string; a path that is not UTF-8 cannot be written in Codex's configuration.
fn path_toml(path: &Path) -> Result<String, ProviderError> {
    path.to_str().map(toml_string).ok_or_else(|| {
        invalid(format!(
            "{} is not UTF-8 and cannot be passed as a writable root when resuming",
            path.display()
        ))
    })
}

fn invalid(reason: String) -> ProviderError {
    ProviderError::InvalidSession {
        provider: ProviderId::Codex,
        reason,
        hint: None,
    }
}

impl CliAdapter for CodexAdapter {
    /// Codex keeps its config, sessions (rollouts) and logs in `$CODEX_HOME` (default
    /// `~/.codex`), read from the child's environment. Building its own sandbox, it also needs
    /// `/tmp/codex-daemon-<uid>` (always under `/tmp`, not `$TMPDIR`) and fails with "Read-only
    /// file system" when it cannot create it; the uid is the one inside Corral's sandbox.
    fn state_paths(&self, env: &corral_engine::ChildEnv<'_>) -> Vec<std::path::PathBuf> {
        env.dir_or_home("CODEX_HOME", ".codex")
            .into_iter()
            .chain([std::path::PathBuf::from(format!(
                "/tmp/codex-daemon-{}",
                corral_engine::sandbox_uid()
            ))])
            .collect()
    }

    /// In `$CODEX_HOME`: `config.toml` (MCP servers, `notify` commands, model providers, the
    /// sandbox mode itself) and `AGENTS.md` (instructions every session reads).
    fn protected_paths(&self, env: &corral_engine::ChildEnv<'_>) -> Vec<std::path::PathBuf> {
        env.dir_or_home("CODEX_HOME", ".codex")
            .map(|dir| vec![dir.join("config.toml"), dir.join("AGENTS.md")])
            .unwrap_or_default()
    }

    /// In `$CODEX_HOME`: `auth.json` (the ChatGPT login or API key) and `.credentials.json`
    /// (MCP servers' OAuth tokens, where no keychain is).
    fn credential_paths(&self, env: &corral_engine::ChildEnv<'_>) -> Vec<std::path::PathBuf> {
        env.dir_or_home("CODEX_HOME", ".codex")
            .map(|dir| vec![dir.join("auth.json"), dir.join(".credentials.json")])
            .unwrap_or_default()
    }

    fn provider(&self) -> ProviderId {
        ProviderId::Codex
    }

    /// `codex [-C <cwd> -s <sandbox> --add-dir …] [-m] [extra] -- <pointer>`, or
    /// `codex resume <id> [<pointer>]`. Codex mints no id up front; its TUI shows it.
    fn interactive_command(&self, plan: &AttemptPlan<'_>) -> Result<CommandSpec, ProviderError> {
        let session = plan.session;
        let mut args: Vec<OsString> = Vec::new();
        let model = session.model.as_ref().or(self.settings.model.as_ref());
        if let Some(model) = model
            && (model.is_empty() || model.starts_with('-'))
        {
            return Err(invalid(format!(
                "model name {model:?} is empty or starts with '-'"
            )));
        }
        match plan.resume {
            Some(id) => {
                args.push("resume".into());
                if let Some(model) = model {
                    args.push("-m".into());
                    args.push(model.into());
                }
                args.extend(self.settings.extra_args.iter().map(OsString::from));
                args.push(id.as_str().into());
            }
            None => {
                args.push("-C".into());
                args.push(session.cwd.clone().into_os_string());
                args.push("-s".into());
                args.push(self.sandbox(session.permissions).as_str().into());
                for root in &session.extra_roots {
                    args.push("--add-dir".into());
                    args.push(root.clone().into_os_string());
                }
                if let Some(model) = model {
                    args.push("-m".into());
                    args.push(model.into());
                }
                args.extend(self.settings.extra_args.iter().map(OsString::from));
                args.push("--".into());
            }
        }
        if let Some(pointer) = plan.pointer {
            args.push(pointer.sentence.clone().into());
        }
        Ok(CommandSpec {
            program: self.settings.command.clone(),
            args,
            env_set: Vec::new(),
            session_id: None,
        })
    }

    fn prompt_delivery(&self) -> PromptDelivery {
        PromptDelivery::Stdin
    }

    /// The Responses API (`api.openai.com`, or `OPENAI_BASE_URL`), and for a ChatGPT sign-in
    /// its backend (`chatgpt.com`) and token service (`auth.openai.com`). A custom
    /// `model_provider`'s `base_url` lives in Codex's own `config.toml`: it does not widen the
    /// allow-list ([`CliAdapter::configured_endpoints`] names it, and a run refuses before the
    /// spawn until `sandbox.network_allow` holds it). Codex reads `HTTP_PROXY`/`HTTPS_PROXY` by
    /// the URL's scheme, and `ALL_PROXY`.
    fn egress(&self, env: &corral_engine::ChildEnv<'_>) -> EgressNeeds {
        let mut endpoints = vec![
            env.get("OPENAI_BASE_URL")
                .and_then(AllowRule::from_url)
                .unwrap_or_else(|| AllowRule::exact("api.openai.com", 443)),
        ];
        endpoints.push(AllowRule::exact("chatgpt.com", 443));
        endpoints.push(AllowRule::exact("auth.openai.com", 443));
        EgressNeeds {
            endpoints,
            proxy: ProxyHonour::Environment,
        }
    }

    /// Every `[model_providers.<id>] base_url` of `$CODEX_HOME/config.toml`, the selected
    /// provider's in use.
    fn configured_endpoints(
        &self,
        env: &corral_engine::ChildEnv<'_>,
    ) -> Vec<corral_engine::ConfiguredEndpoint> {
        let Some(dir) = env.dir_or_home("CODEX_HOME", ".codex") else {
            return Vec::new();
        };
        let file = dir.join("config.toml");
        let shown = match (env.home(), env.get("CODEX_HOME")) {
            (Some(home), None) if file.starts_with(&home) => "~/.codex/config.toml".to_string(),
            _ => file.display().to_string(),
        };
        crate::endpoints::configured_endpoints(
            &file,
            &shown,
            self.settings.model_provider.as_deref(),
        )
    }

    fn env_profile(&self) -> EnvProfile {
        EnvProfile::new("codex", ENV_PROFILE)
    }

    fn command(&self, plan: &AttemptPlan<'_>) -> Result<CommandSpec, ProviderError> {
        Ok(CommandSpec {
            program: self.settings.command.clone(),
            args: self.args(plan)?,
            env_set: Vec::new(),
            session_id: None,
        })
    }

    fn parser(&self) -> Box<dyn StreamParser> {
        Box::new(CodexStreamParser::default())
    }

    fn diagnose(&self, evidence: &AttemptEvidence<'_>) -> Diagnosis {
        diagnose::diagnose(
            evidence,
            self.settings.sandbox != Some(SandboxMode::DangerFullAccess),
        )
    }

    fn capabilities(&self) -> Capabilities {
        match self.settings.sandbox {
            Some(SandboxMode::DangerFullAccess) => CAPABILITIES_UNSANDBOXED,
            Some(SandboxMode::ReadOnly | SandboxMode::WorkspaceWrite) | None => CAPABILITIES,
        }
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
