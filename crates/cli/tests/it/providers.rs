//! The six real AI coding CLIs as `corral run --provider <id>` drives them against the fake model
//! API on 127.0.0.1: one [`Cli`] row per CLI (what the conformance cases may branch on), a
//! [`World`] per test (scratch HOME and project, the fake API, and the settings and variables that
//! point Corral at the pinned binary and at the API), and the [`conformance!`] macro that turns one
//! test body into one `#[test]` per CLI. What each CLI can do is read from the product's own
//! capability table (`corral_compose::capabilities`), never restated here.
//!
//! The recipes are the ones `crates/test-support/tests/it/*_cli.rs` found to work, moved from the
//! CLIs' own command lines to Corral's settings and environment policy (the engine passes a
//! variable only when the provider's `ENV_PROFILE` or the allowlist names it):
//!
//! - Claude Code: `ANTHROPIC_API_KEY`, `ANTHROPIC_BASE_URL`, and `IS_SANDBOX=1` when running as
//!   root (it refuses `bypassPermissions` as root otherwise).
//! - Codex: a `CODEX_HOME` under `<workspace>/target/` (`codex-home-*/.codex`; under `/tmp` Codex
//!   cannot create its sandbox helper) whose `config.toml` declares the provider `fake` at the
//!   API's `/v1`; the key variable `FAKE_API_KEY` is not in Codex's profile, so it is
//!   allowlisted; `providers.codex.model_provider = "fake"` also makes the adapter cap Codex's own
//!   retries (0 HTTP retries, 0 stream reconnects: one request per failed call).
//! - OpenCode: the XDG directories inside the scratch HOME, the `OPENCODE_DISABLE_*` switches,
//!   `OPENCODE_CONFIG_CONTENT` declaring the provider `fake`, model `fake/fake-model`, and
//!   `npm_config_registry=http://127.0.0.1:9/` (allowlisted) so that the background plugin install
//!   it starts even with plugins disabled cannot reach the network.
//! - Grok CLI: `GROK_API_KEY`, `GROK_BASE_URL`, model `fake-model`.
//! - Gemini CLI: `GEMINI_API_KEY`, `GOOGLE_GEMINI_BASE_URL`, model `fake-model`, and a
//!   `~/.gemini/settings.json` selecting the `gemini-api-key` auth type with one attempt per call.
//! - Copilot CLI: `COPILOT_OFFLINE`, `COPILOT_PROVIDER_BASE_URL`, `COPILOT_PROVIDER_API_KEY`,
//!   `COPILOT_MODEL`, and a per-test HOME whose `~/.cache/copilot/pkg` is a symlink to one shared
//!   unpacked copy (the first run in a HOME otherwise unpacks ~235 MB; with the link a run takes
//!   about a second, so no lock is needed and the Copilot tests run in parallel).
//!
//! Every world also sets `retry.backoff_initial_ms` to its floor (1000) and `run.kill_grace_ms`
//! to 2000, so that a backoff or a kill ladder costs seconds, not minutes.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use corral_ports::{
    AiSession, Capabilities, HeadlessAiProvider, PromptChannel, ProviderId, SessionIdTiming,
};
use corral_test_support::fake_api::{FakeApi, Scenario, Step, shell_tool_input};
use corral_test_support::session::session_in;
use corral_test_support::{require_cli, workspace_root};

use crate::support::Env;

/// The longest one `corral` invocation may take in these tests before assert_cmd kills it: a
/// guard against a hung run, not a speed limit (the run's own watchdogs are what the tests check).
/// A run can start a real CLI twice or more, and at load 15 on two cores OpenCode alone took 38 s
/// from its spawn to its first request, then backs off on its own between retries: the 120 s this
/// used to be killed a healthy rate-limit-then-resume run of OpenCode.
pub const RUN_CAP: Duration = Duration::from_secs(600);

/// One real CLI: its provider id, its pinned binary, and how the fake model drives it. What it
/// can do comes from its provider's capability row ([`Cli::caps`]), the one the product declares.
#[derive(Debug)]
pub struct Cli {
    /// The provider (`--provider <id>`).
    pub id: ProviderId,
    /// The binary in `corral_test_support::PINNED_CLIS`.
    pub bin: &'static str,
    /// The shell tool the CLI offers the model (a pointer-file CLI's agent reads its task with it).
    pub shell_tool: &'static str,
    /// How many requests the CLI sends for one model call that keeps failing with 429 before it
    /// gives up and reports the error (1 + the retries it makes on its own, which Corral can cap
    /// for Claude Code and Codex only; see each adapter's documentation). The conformance case
    /// for permanent 429s checks this number.
    pub requests_per_failed_call: usize,
}

/// Claude Code.
pub const CLAUDE: Cli = Cli {
    id: ProviderId::Claude,
    bin: "claude",
    shell_tool: "Bash",
    // CLAUDE_CODE_MAX_RETRIES=3 from the adapter (`providers.claude.max_internal_retries`).
    requests_per_failed_call: 4,
};

/// Codex.
pub const CODEX: Cli = Cli {
    id: ProviderId::Codex,
    bin: "codex",
    shell_tool: "exec_command",
    // request_max_retries=0 and stream_max_retries=0 for the custom provider `fake`.
    requests_per_failed_call: 1,
};

/// Copilot CLI.
pub const COPILOT: Cli = Cli {
    id: ProviderId::Copilot,
    bin: "copilot",
    shell_tool: "bash",
    // Five retries of its own for a 429, which cannot be capped from outside.
    requests_per_failed_call: 6,
};

/// OpenCode.
pub const OPENCODE: Cli = Cli {
    id: ProviderId::Opencode,
    bin: "opencode",
    shell_tool: "bash",
    // No knob caps its retries: a 429 is sent six times.
    requests_per_failed_call: 6,
};

/// Grok CLI.
pub const GROK: Cli = Cli {
    id: ProviderId::Grok,
    bin: "grok",
    shell_tool: "bash",
    // The OpenAI SDK's default maxRetries (2), which Grok does not change.
    requests_per_failed_call: 3,
};

/// Gemini CLI.
pub const GEMINI: Cli = Cli {
    id: ProviderId::Gemini,
    bin: "gemini",
    shell_tool: "run_shell_command",
    // `general.maxAttempts: 1` in the world's settings.json.
    requests_per_failed_call: 1,
};

/// Valid generator signals: a note and the verdict.
pub const VALID_SIGNALS: &str = r#"{"schemaVersion":1,"signals":[{"type":"note","timestamp":"2026-11-30T12:00:00Z","text":"looked at the task"},{"type":"task-complete","timestamp":"2026-11-30T12:00:01Z"}]}"#;

/// A note alone: the generator contract needs exactly one of task-complete or task-blocked.
pub const INVALID_SIGNALS: &str = r#"{"schemaVersion":1,"signals":[{"type":"note","timestamp":"2026-11-30T12:00:00Z","text":"forgot the verdict"}]}"#;

impl Cli {
    /// `CORRAL_PROVIDERS__<ID>__<KEY>`.
    pub fn setting(&self, key: &str) -> String {
        format!(
            "CORRAL_PROVIDERS__{}__{key}",
            self.id.as_str().to_ascii_uppercase()
        )
    }

    /// The provider's capability row, as `corral providers` prints it.
    pub fn caps(&self) -> Capabilities {
        corral_compose::capabilities(self.id)
    }

    /// Whether the capability row says a session id is known before the CLI calls the model.
    pub fn session_id_before_model_call(&self) -> bool {
        match self.caps().session_id {
            SessionIdTiming::MintedUpFront | SessionIdTiming::FirstLine => true,
            SessionIdTiming::FirstEvent | SessionIdTiming::LastLine | SessionIdTiming::Never => {
                false
            }
        }
    }

    /// Whether the capability row says the CLI has a session id at all.
    pub fn has_session_id(&self) -> bool {
        self.caps().session_id != SessionIdTiming::Never
    }

    /// The steps of an agent that writes `signals.json` with `content` and then says it is done.
    ///
    /// A CLI that gets its prompt through a pointer file only sees the sentence naming that file,
    /// and only the file names the signals path; so its agent first reads the file with its shell
    /// tool, as a real model does (`cat` with a glob, since the run directory's name is not known
    /// yet), and the write step finds the path in that tool result.
    pub fn write_signals_steps(&self, project: &Path, content: &str) -> Vec<Step> {
        let mut steps = Vec::new();
        if self.caps().prompt == PromptChannel::PointerFile {
            let read = format!(
                "cat {}/.corral/runs/*/*-prompt.md",
                canonical(project).display()
            );
            steps.push(Step::tool_use(
                self.shell_tool,
                shell_tool_input(self.shell_tool, &read),
            ));
        }
        steps.push(
            Step::write_signals_for(self.bin, content)
                .unwrap_or_else(|| panic!("no write step for {}", self.bin)),
        );
        steps.push(Step::text("Done."));
        steps
    }
}

/// `path` with symlinks resolved, as `corral run` resolves its working directory.
pub fn canonical(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// One test's world for one CLI: a scratch HOME and project, the fake API, and the variables that
/// point `corral` at both.
#[derive(Debug)]
pub struct World {
    pub cli: &'static Cli,
    pub env: Env,
    pub api: FakeApi,
    vars: Vec<(String, String)>,
    /// Kept for its lifetime: the Codex home is removed when the world is dropped.
    _codex_home: Option<tempfile::TempDir>,
}

impl World {
    /// A scratch HOME and project for `cli`, and the fake API answering with what `scenario`
    /// builds from the project directory.
    pub fn new(cli: &'static Cli, scenario: impl FnOnce(&Path) -> Scenario) -> Self {
        let env = Env::new();
        let api = FakeApi::start(scenario(&env.project())).unwrap();
        let mut vars: Vec<(String, String)> = vec![
            (
                cli.setting("COMMAND"),
                require_cli(cli.bin).display().to_string(),
            ),
            ("CORRAL_RETRY__BACKOFF_INITIAL_MS".into(), "1000".into()),
            ("CORRAL_RUN__KILL_GRACE_MS".into(), "2000".into()),
        ];
        let mut codex_home = None;
        let home = env.home();
        let var = |k: &str, v: &str| (k.to_string(), v.to_string());
        match cli.id {
            ProviderId::Claude => {
                vars.push(var("ANTHROPIC_API_KEY", "sk-test"));
                vars.push(var("ANTHROPIC_BASE_URL", &api.url()));
                if is_root() {
                    vars.push(var("IS_SANDBOX", "1"));
                }
            }
            ProviderId::Codex => {
                let dir = codex_home_for(&api);
                let home_dir = dir.path().join(".codex");
                vars.push(var("CODEX_HOME", &home_dir.display().to_string()));
                vars.push(var("FAKE_API_KEY", "sk-test"));
                vars.push(var(&cli.setting("MODEL_PROVIDER"), "fake"));
                vars.push(var(&cli.setting("MODEL"), "fake-model"));
                vars.push(var(&cli.setting("ENV_ALLOW"), "[\"FAKE_API_KEY\"]"));
                // The custom provider's base_url is in Codex's config.toml, which the adapter
                // does not trust to widen the allow-list: the user (here, the environment) does.
                vars.push(var(
                    "CORRAL_SANDBOX__NETWORK_ALLOW",
                    &format!("[\"{}\"]", api.addr()),
                ));
                codex_home = Some(dir);
            }
            ProviderId::Opencode => {
                for (name, rel) in [
                    ("XDG_CONFIG_HOME", ".config"),
                    ("XDG_DATA_HOME", ".local/share"),
                    ("XDG_CACHE_HOME", ".cache"),
                    ("XDG_STATE_HOME", ".local/state"),
                ] {
                    vars.push(var(name, &home.join(rel).display().to_string()));
                }
                for switch in [
                    "OPENCODE_DISABLE_MODELS_FETCH",
                    "OPENCODE_DISABLE_AUTOUPDATE",
                    "OPENCODE_DISABLE_SHARE",
                    "OPENCODE_DISABLE_LSP_DOWNLOAD",
                    "OPENCODE_DISABLE_DEFAULT_PLUGINS",
                ] {
                    vars.push(var(switch, "1"));
                }
                vars.push(var("OPENCODE_CONFIG_CONTENT", &opencode_config(&api)));
                vars.push(var("npm_config_registry", "http://127.0.0.1:9/"));
                vars.push(var(&cli.setting("MODEL"), "fake/fake-model"));
                vars.push(var(&cli.setting("ENV_ALLOW"), "[\"npm_config_registry\"]"));
            }
            ProviderId::Grok => {
                vars.push(var("GROK_API_KEY", "sk-test"));
                vars.push(var("GROK_BASE_URL", &api.url_v1()));
                vars.push(var(&cli.setting("MODEL"), "fake-model"));
            }
            ProviderId::Gemini => {
                // Headless Gemini takes its auth type from settings.json; from the environment
                // alone a base URL makes it `gateway`, which it refuses (exit 41).
                let dir = home.join(".gemini");
                std::fs::create_dir_all(&dir).unwrap();
                std::fs::write(dir.join("settings.json"), GEMINI_SETTINGS).unwrap();
                vars.push(var("GEMINI_API_KEY", "sk-test"));
                vars.push(var("GOOGLE_GEMINI_BASE_URL", &api.url()));
                vars.push(var(&cli.setting("MODEL"), "fake-model"));
            }
            ProviderId::Copilot => {
                let cache = home.join(".cache/copilot");
                std::fs::create_dir_all(&cache).unwrap();
                std::os::unix::fs::symlink(copilot_pkg(), cache.join("pkg")).unwrap();
                vars.push(var("COPILOT_OFFLINE", "true"));
                vars.push(var("COPILOT_PROVIDER_BASE_URL", &api.url_v1()));
                vars.push(var("COPILOT_PROVIDER_API_KEY", "sk-test"));
                vars.push(var("COPILOT_MODEL", "fake-model"));
            }
        }
        World {
            cli,
            env,
            api,
            vars,
            _codex_home: codex_home,
        }
    }

    /// The canonical project directory (the run's working directory).
    pub fn project(&self) -> PathBuf {
        canonical(&self.env.project())
    }

    /// The variables this world adds to `PATH` and `HOME`.
    pub fn vars(&self) -> &[(String, String)] {
        &self.vars
    }

    /// Sets `name` (over the world's own value), or removes it with `None`.
    pub fn set_var(&mut self, name: &str, value: Option<&str>) {
        self.vars.retain(|(k, _)| k != name);
        if let Some(value) = value {
            self.vars.push((name.to_string(), value.to_string()));
        }
    }

    /// `corral run --provider <id>` in the project, with a clean environment, this world's
    /// variables and [`RUN_CAP`]; the caller adds the other arguments.
    pub fn corral_run(&self) -> assert_cmd::Command {
        let mut cmd = self.env.corral();
        cmd.envs(self.vars.iter().map(|(k, v)| (k, v)))
            .timeout(RUN_CAP)
            .args(["run", "--provider", self.cli.id.as_str()]);
        cmd
    }

    /// The provider built through the composition root from this world's settings (the same
    /// `CORRAL_*` variables `corral` reads), with `tune` applied to the engine configuration
    /// (tests lower timers here, below the settings' floors). The children get PATH, `home` as
    /// HOME and the world's other variables as their ambient environment.
    pub fn library_provider(
        &self,
        home: &Path,
        tune: impl FnOnce(&mut corral_compose::EngineConfig),
    ) -> Arc<dyn HeadlessAiProvider> {
        let sources = corral_compose::SettingsSources {
            env: self.vars.clone(),
            flags: vec![(
                "run.provider".to_string(),
                serde_json::json!(self.cli.id.as_str()),
            )],
            ..corral_compose::SettingsSources::default()
        };
        let settings = corral_compose::LoadedSettings::load(&sources)
            .unwrap_or_else(|e| panic!("{e}"))
            .settings;
        let mut config = corral_compose::engine_config(&settings);
        let mut ambient = vec![
            (
                "PATH".to_string(),
                std::env::var("PATH").unwrap_or_default(),
            ),
            ("HOME".to_string(), home.display().to_string()),
        ];
        ambient.extend(
            self.vars
                .iter()
                .filter(|(k, _)| !k.starts_with("CORRAL_"))
                .cloned(),
        );
        config.ambient_env = Some(ambient);
        tune(&mut config);
        corral_compose::headless_provider(self.cli.id, &settings, config)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// A session in the project whose run directory is `<project>/<run>`.
    pub fn session(&self, run: &str, prompt: &str) -> AiSession {
        session_in(prompt, &self.project(), &self.project().join(run))
    }
}

impl Drop for World {
    /// A failed case prints what the fake API received and answered: which request took which
    /// step is the first question about any failure against it.
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("the fake API's requests:");
            for r in self.api.requests() {
                eprintln!(
                    "  #{} +{}ms {} {:?} tools={} msgs={} history={} step={:?} status={:?} user={:?}",
                    r.seq,
                    r.at_ms,
                    r.path,
                    r.endpoint,
                    r.tools.len(),
                    r.n_msgs,
                    r.history,
                    r.step,
                    r.status,
                    r.last_user_text
                        .as_deref()
                        .map(|t| t.chars().take(80).collect::<String>()),
                );
            }
        }
    }
}

/// `~/.gemini/settings.json` of a Gemini world: the API-key auth type, one attempt per model call
/// (Gemini's own retries would otherwise send a 429 ten times over minutes), and no telemetry or
/// update check.
const GEMINI_SETTINGS: &str = r#"{"security":{"auth":{"selectedType":"gemini-api-key"}},"general":{"maxAttempts":1,"enableAutoUpdate":false,"enableAutoUpdateNotification":false},"telemetry":{"enabled":false},"privacy":{"usageStatisticsEnabled":false}}"#;

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(2) == Some("0"))
        })
        .unwrap_or(false)
}

/// A directory outside the temporary directory (Codex refuses its sandbox helpers under `/tmp`;
/// see `corral_test_support::non_temp_dir`), removed on drop, holding the `CODEX_HOME`, `.codex`,
/// whose `config.toml` declares the provider `fake` speaking the Responses API at `api`, its key
/// in `FAKE_API_KEY`. (Being `.codex` in its parent, it is also `$HOME/.codex` for a HOME there.)
fn codex_home_for(api: &FakeApi) -> tempfile::TempDir {
    let dir = tempfile::Builder::new()
        .prefix("codex-home-")
        .tempdir_in(corral_test_support::non_temp_dir())
        .unwrap();
    let codex_home = dir.path().join(".codex");
    std::fs::create_dir(&codex_home).unwrap();
    let config = format!(
        r#"model = "fake-model"
model_provider = "fake"
check_for_update_on_startup = false

[model_providers.fake]
name = "fakeapi"
base_url = "{}"
wire_api = "responses"
env_key = "FAKE_API_KEY"

[analytics]
enabled = false
"#,
        api.url_v1()
    );
    std::fs::write(codex_home.join("config.toml"), config).unwrap();
    dir
}

/// `OPENCODE_CONFIG_CONTENT`: the provider `fake` speaking Chat Completions at `api`.
fn opencode_config(api: &FakeApi) -> String {
    serde_json::json!({
        "$schema": "https://opencode.ai/config.json",
        "provider": {
            "fake": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "fakeapi",
                "options": {"baseURL": api.url_v1(), "apiKey": "sk-test"},
                "models": {"fake-model": {"name": "Fake Model"}},
            },
        },
        "model": "fake/fake-model",
        "autoupdate": false,
        "share": "disabled",
    })
    .to_string()
}

/// The unpacked Copilot package every test's `~/.cache/copilot/pkg` links to:
/// `<workspace>/target/copilot-pkg-cache/pkg`. When it is missing, `copilot --version` unpacks it
/// into a scratch HOME, which is then renamed into place: a rename is atomic, so parallel test
/// processes never see half a package, and the one that loses the race just drops its copy.
fn copilot_pkg() -> PathBuf {
    static PKG: OnceLock<PathBuf> = OnceLock::new();
    PKG.get_or_init(|| {
        let target = workspace_root().join("target");
        let shared = target.join("copilot-pkg-cache/pkg");
        if shared.is_dir() {
            return shared;
        }
        std::fs::create_dir_all(shared.parent().unwrap()).unwrap();
        let scratch = tempfile::Builder::new()
            .prefix("copilot-unpack-")
            .tempdir_in(&target)
            .unwrap();
        let mut version = corral_test_support::command(&require_cli("copilot"));
        version
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", scratch.path())
            .arg("--version");
        assert_cmd::Command::from_std(version)
            .timeout(Duration::from_secs(120))
            .assert()
            .success();
        let _ = std::fs::rename(scratch.path().join(".cache/copilot/pkg"), &shared);
        assert!(shared.is_dir(), "{} was not unpacked", shared.display());
        shared
    })
    .clone()
}

/// Expands one test body into one `#[test]` per CLI, in a module named after the case:
/// `conformance!(name, |cli: &'static Cli| { … })` gives `name::claude`, `name::codex`,
/// `name::copilot`, `name::opencode`, `name::grok` and `name::gemini` (ripgrep's `rgtest!` style).
macro_rules! conformance {
    ($name:ident, $body:expr) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            fn body(cli: &'static $crate::providers::Cli) {
                let started = std::time::Instant::now();
                ($body)(cli);
                eprintln!(
                    "{}::{}: {:.1}s",
                    stringify!($name),
                    cli.bin,
                    started.elapsed().as_secs_f64()
                );
            }

            #[test]
            fn claude() {
                body(&$crate::providers::CLAUDE);
            }

            #[test]
            fn codex() {
                body(&$crate::providers::CODEX);
            }

            #[test]
            fn copilot() {
                body(&$crate::providers::COPILOT);
            }

            #[test]
            fn opencode() {
                body(&$crate::providers::OPENCODE);
            }

            #[test]
            fn grok() {
                body(&$crate::providers::GROK);
            }

            #[test]
            fn gemini() {
                body(&$crate::providers::GEMINI);
            }
        }
    };
}

pub(crate) use conformance;
