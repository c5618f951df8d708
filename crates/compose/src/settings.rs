//! The settings model: every key, its default and its valid range.

use std::path::{Path, PathBuf};

use corral_engine::EnvInherit;
use corral_ports::ProviderId;
use garde::Validate;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// All settings. Unknown keys are errors, so a typo never silently does nothing.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, Validate, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct Settings {
    /// How runs are supervised.
    #[garde(dive)]
    pub run: RunSettings,
    /// Rate-limit and corrective retries.
    #[garde(dive)]
    pub retry: RetrySettings,
    /// Which environment variables reach the CLIs.
    #[garde(dive)]
    pub env: EnvSettings,
    /// Per-provider settings.
    #[garde(dive)]
    pub providers: ProvidersSettings,
    /// The sandbox the CLIs run in.
    #[garde(dive)]
    pub sandbox: SandboxSettings,
    /// Where the tasks of a parallel sprint (`corral sprint run --jobs N`) run.
    #[garde(dive)]
    pub executor: ExecutorSettings,
    /// What each spawn (a CLI's attempt, a sprint's check, gate or setup step) may use.
    #[garde(dive)]
    pub limits: LimitsSettings,
    /// `[prices."<model>"]`: what a model costs, in US dollars per million tokens, for a
    /// sprint's spend caps when a CLI reports only tokens; added to the built-in list prices,
    /// replacing the one of the same model.
    #[garde(dive)]
    pub prices: std::collections::BTreeMap<String, PriceSettings>,
}

/// `[limits]`: what one spawn and everything it starts may use, enforced by a cgroup where one
/// can be made and by rlimits where not (the run's attestation says which). A spawn that goes
/// over its memory, process or disk limit is ended with the outcome `limit-exceeded`; CPU is a
/// rate, a spawn over it is only slowed. The defaults keep a 2-core, 24 GiB machine responsive
/// with four tasks at once (`--jobs 4`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Validate, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct LimitsSettings {
    /// Memory: `auto` (a fifth of this machine's memory), `off`, or a size (`4GiB`, `512MiB`,
    /// bytes).
    #[garde(custom(valid_size))]
    pub memory: String,
    /// Processes and threads at once; 0 is no limit.
    #[garde(skip)]
    pub pids: u64,
    /// Cores: `auto` (all but one of this machine's, at least one), `off`, or a number (`1.5`).
    #[garde(custom(valid_cpus))]
    pub cpus: String,
    /// Disk in the run directory and the private temporary directory together, and for any
    /// one file written: `off` or a size (`20GiB`).
    #[garde(custom(valid_size))]
    pub disk: String,
}

impl Default for LimitsSettings {
    fn default() -> Self {
        LimitsSettings {
            memory: "auto".to_string(),
            pids: 4096,
            cpus: "auto".to_string(),
            disk: "20GiB".to_string(),
        }
    }
}

impl LimitsSettings {
    /// The limits, with `auto` worked out for this machine (`total_memory` in bytes, `cores`).
    pub fn resolve(&self, total_memory: Option<u64>, cores: u64) -> corral_engine::ResourceLimits {
        corral_engine::ResourceLimits {
            memory: match self.memory.as_str() {
                "auto" => total_memory.map(|total| total / 5),
                other => parse_size(other).ok().flatten(),
            },
            pids: (self.pids > 0).then_some(self.pids),
            cpu_millis: match self.cpus.as_str() {
                "auto" => Some(cores.saturating_sub(1).max(1) * 1000),
                other => parse_cpus(other).ok().flatten(),
            },
            disk: parse_size(&self.disk).ok().flatten(),
        }
    }
}

/// A size: `off` (`None`), bytes, or a number with `KiB`, `MiB`, `GiB`, `TiB` (or `K`, `M`,
/// `G`, `T`, also powers of 1024). `auto` is left to the caller.
pub fn parse_size(text: &str) -> Result<Option<u64>, String> {
    let text = text.trim();
    if text == "off" {
        return Ok(None);
    }
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: u64 = number
        .parse()
        .map_err(|_| format!("`{text}` is not a size (a number, then KiB, MiB, GiB or TiB)"))?;
    let shift = match unit.trim() {
        "" | "B" => 0,
        "K" | "KiB" => 10,
        "M" | "MiB" => 20,
        "G" | "GiB" => 30,
        "T" | "TiB" => 40,
        other => {
            return Err(format!(
                "`{other}` is not a size unit (KiB, MiB, GiB or TiB)"
            ));
        }
    };
    if number == 0 {
        return Err("a size of 0 leaves nothing; write `off` for no limit".to_string());
    }
    number
        .checked_mul(1u64 << shift)
        .map(Some)
        .ok_or_else(|| format!("`{text}` is too large"))
}

/// Cores: `off` (`None`) or a positive number, in thousandths of a core.
pub fn parse_cpus(text: &str) -> Result<Option<u64>, String> {
    let text = text.trim();
    if text == "off" {
        return Ok(None);
    }
    let cores: f64 = text
        .parse()
        .map_err(|_| format!("`{text}` is not a number of cores (`1`, `1.5`, `auto`, `off`)"))?;
    if !(cores.is_finite() && cores >= 0.01) {
        return Err(format!("`{text}` cores: at least 0.01"));
    }
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)] // Positive and finite.
    let millis = (cores * 1000.0).round() as u64;
    Ok(Some(millis))
}

fn valid_size(value: &String, (): &()) -> garde::Result {
    if value == "auto" {
        return Ok(());
    }
    parse_size(value).map(|_| ()).map_err(garde::Error::new)
}

fn valid_cpus(value: &String, (): &()) -> garde::Result {
    if value == "auto" {
        return Ok(());
    }
    parse_cpus(value).map(|_| ()).map_err(garde::Error::new)
}

/// `[prices."<model>"]`: one model's price, US dollars per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Validate, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PriceSettings {
    /// Input tokens.
    #[garde(range(min = 0.0, max = 10_000.0))]
    pub input: f64,
    /// Output tokens.
    #[garde(range(min = 0.0, max = 10_000.0))]
    pub output: f64,
    /// Input tokens read from the cache (default: as input).
    #[serde(default)]
    #[garde(inner(range(min = 0.0, max = 10_000.0)))]
    pub cache_read: Option<f64>,
    /// Input tokens written to the cache (default: as input).
    #[serde(default)]
    #[garde(inner(range(min = 0.0, max = 10_000.0)))]
    pub cache_write: Option<f64>,
}

/// `[executor]`
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, Validate, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct ExecutorSettings {
    /// `local` (each task in a git worktree on this machine, the default) or `ray` (each task
    /// a job on a Ray cluster, through its Jobs HTTP API).
    #[garde(skip)]
    pub kind: ExecutorKind,
    /// `[executor.ray]`: the cluster, used when `kind` is `ray`.
    #[garde(dive, custom(ray_complete(&self.kind)))]
    pub ray: RaySettings,
}

/// Where a parallel sprint's tasks run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ExecutorKind {
    /// Git worktrees on this machine.
    #[default]
    Local,
    /// Jobs on a Ray cluster.
    Ray,
}

impl ExecutorKind {
    /// The name in settings.
    pub fn as_str(self) -> &'static str {
        match self {
            ExecutorKind::Local => "local",
            ExecutorKind::Ray => "ray",
        }
    }
}

/// `[executor.ray]`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Validate, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct RaySettings {
    /// The cluster's Jobs HTTP address, e.g. `http://127.0.0.1:8265`.
    #[garde(inner(custom(http_url)))]
    pub address: Option<String>,
    /// The git remote the cluster's workers clone the repository from and push the tasks'
    /// branches and records to (a URL they can reach).
    #[garde(inner(length(min = 1)))]
    pub remote: Option<String>,
    /// CPUs reserved for each task's job (Ray's `entrypoint_num_cpus`).
    #[garde(range(min = 0.0, max = 1024.0))]
    pub entrypoint_num_cpus: f64,
    /// Memory reserved for each task's job, in MiB (Ray's `entrypoint_memory`; 0: none).
    #[garde(range(max = 4_194_304))]
    pub entrypoint_memory_mb: u64,
    /// Times a job lost with its node is resubmitted (it resumes from its last recorded step).
    #[garde(range(max = 20))]
    pub max_resubmits: u32,
}

impl Default for RaySettings {
    fn default() -> Self {
        RaySettings {
            address: None,
            remote: None,
            entrypoint_num_cpus: 1.0,
            entrypoint_memory_mb: 0,
            max_resubmits: 3,
        }
    }
}

// garde hands a custom rule the field as declared, so `&String` it is.
#[allow(clippy::ptr_arg)]
fn http_url(value: &String, (): &()) -> garde::Result {
    let rest = value
        .strip_prefix("http://")
        .or_else(|| value.strip_prefix("https://"));
    match rest {
        Some(host) if !host.is_empty() && !host.starts_with('/') => Ok(()),
        Some(_) | None => Err(garde::Error::new(
            "must be an http:// or https:// address with a host, e.g. http://127.0.0.1:8265",
        )),
    }
}

fn ray_complete(kind: &ExecutorKind) -> impl FnOnce(&RaySettings, &()) -> garde::Result + '_ {
    move |ray, ()| match kind {
        ExecutorKind::Local => Ok(()),
        ExecutorKind::Ray if ray.address.is_none() => Err(garde::Error::new(
            "executor.kind is ray: set executor.ray.address (the cluster's Jobs HTTP address)",
        )),
        ExecutorKind::Ray if ray.remote.is_none() => Err(garde::Error::new(
            "executor.kind is ray: set executor.ray.remote (a git remote the cluster reaches)",
        )),
        ExecutorKind::Ray => Ok(()),
    }
}

/// `[sandbox]`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Validate, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct SandboxSettings {
    /// `auto` (bubblewrap where it works, else native with consent), `native` or `bubblewrap`.
    #[garde(skip)]
    #[schemars(with = "String")]
    pub backend: corral_engine::BackendChoice,
    /// Run natively even though the policy's guarantees go unenforced (recorded in the run's
    /// attestation). Never implied: without it such a run refuses to start.
    #[garde(skip)]
    pub allow_degraded_native: bool,
    /// `allowlist` (the provider's model endpoints and `network_allow`, through Corral's proxy;
    /// nothing on the host), `host` (unconfined) or `none` (the CLI cannot reach its model API
    /// either). A project's `corral.toml` may not set `host`.
    #[garde(skip)]
    #[schemars(with = "String")]
    pub network: corral_engine::NetworkPolicy,
    /// With `network = "allowlist"`: more `host:port` pairs the CLI may reach (`*.domain:port`
    /// for the names below a domain), e.g. the package registries a task needs. Widened only by
    /// your own settings file, `CORRAL_SANDBOX__NETWORK_ALLOW` and `--allow-net`, each adding
    /// to the others; never by a project's `corral.toml`. Each entry is checked where it is
    /// read, against its own source.
    #[garde(skip)]
    pub network_allow: Vec<String>,
    /// `host` or `isolated` (only the CLI's own state paths stay visible).
    #[garde(skip)]
    #[schemars(with = "String")]
    pub home: corral_engine::HomePolicy,
    /// The bubblewrap program.
    #[garde(length(min = 1))]
    pub bwrap: String,
    /// Refuse to start when the git work tree has uncommitted changes.
    #[garde(skip)]
    pub refuse_dirty_tree: bool,
    /// Under the native backend, watch every write of the agent's processes and name those
    /// outside the paths it may write (the run's stray writes). Turning it off gives the agent
    /// back `ptrace`, `io_uring` and setuid programs (`sudo`), and leaves a write outside the
    /// git work tree unseen.
    #[garde(skip)]
    pub watch_native_writes: bool,
    /// More files and directories the agent may not see, on top of the well-known secrets
    /// Corral hides already (docs/security.md): absolute paths, or paths under your home
    /// written `~/...`, e.g. `["~/.config/foo", "/srv/keys"]`. A directory is covered by an
    /// empty one, a file by an empty file; the running CLI's own state stays. Each source adds
    /// to the others (hiding more only takes power away, so a project's `corral.toml` may add
    /// too).
    #[garde(skip)]
    pub hide: Vec<String>,
}

/// `[run]`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Validate, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct RunSettings {
    /// The provider used when `--provider` is not given.
    #[garde(skip)]
    #[schemars(with = "String")]
    pub provider: ProviderId,
    /// Kill the CLI's process tree after this long without output, in ms (or as text: "5m").
    #[garde(range(min = 60_000, max = 3_600_000))]
    // Text such as "5m" is turned into milliseconds when the layers are read (layers.rs).
    #[schemars(extend("type" = ["integer", "string"]))]
    pub idle_watchdog_ms: u64,
    /// Kill the CLI's process tree after this long in total, in ms (or as text: "2h"); 0 turns
    /// it off.
    #[garde(range(max = 172_800_000))]
    // Text such as "5m" is turned into milliseconds when the layers are read (layers.rs).
    #[schemars(extend("type" = ["integer", "string"]))]
    pub wall_timeout_ms: u64,
    /// Time between SIGTERM and SIGKILL when ending a process tree, in ms (or as text: "10s").
    #[garde(range(min = 100, max = 600_000))]
    // Text such as "5m" is turned into milliseconds when the layers are read (layers.rs).
    #[schemars(extend("type" = ["integer", "string"]))]
    pub kill_grace_ms: u64,
    /// Longest stdout line kept whole, in bytes; a longer JSON line is shortened in place (its
    /// long strings cut and marked with their length), any other is recorded as oversized.
    #[garde(range(min = 65_536, max = 268_435_456))]
    pub max_line_bytes: u64,
    /// `files` (the CLI writes its stdout and stderr to `raw/` in the run directory, followed as
    /// they grow: nothing lost when it exits before a pipe drains) or `pipes`.
    #[garde(skip)]
    #[schemars(with = "String")]
    pub output_capture: corral_engine::OutputCapture,
    /// What becomes of the `raw/` stream files when the run ends: `compress` (gzip), `keep`, or
    /// `drop-on-success`.
    #[garde(skip)]
    #[schemars(with = "String")]
    pub raw_streams: corral_engine::RawStreamRetention,
    /// Where run directories go; relative paths are under the project root (the nearest
    /// directory with a `corral.toml`, else the git work tree's top, else the working directory).
    #[garde(custom(non_empty_path))]
    #[schemars(with = "String", length(min = 1))]
    pub runs_dir: PathBuf,
}

fn non_empty_path(value: &Path, (): &()) -> garde::Result {
    if value.as_os_str().is_empty() {
        return Err(garde::Error::new("must not be empty"));
    }
    Ok(())
}

impl Settings {
    /// Where run directories go for the project at `root`: `run.runs_dir`, under `root` when
    /// relative.
    pub fn runs_root(&self, root: &Path) -> PathBuf {
        root.join(&self.run.runs_dir)
    }
}

impl Default for RunSettings {
    fn default() -> Self {
        RunSettings {
            provider: ProviderId::Claude,
            idle_watchdog_ms: 300_000,
            wall_timeout_ms: 0,
            kill_grace_ms: 10_000,
            max_line_bytes: 8 * 1024 * 1024,
            output_capture: corral_engine::OutputCapture::default(),
            raw_streams: corral_engine::RawStreamRetention::default(),
            runs_dir: PathBuf::from(".corral/runs"),
        }
    }
}

impl Default for SandboxSettings {
    fn default() -> Self {
        SandboxSettings {
            backend: corral_engine::BackendChoice::Auto,
            allow_degraded_native: false,
            network: corral_engine::NetworkPolicy::default(),
            network_allow: Vec::new(),
            home: corral_engine::HomePolicy::Host,
            bwrap: "bwrap".to_string(),
            refuse_dirty_tree: false,
            watch_native_writes: true,
            hide: Vec::new(),
        }
    }
}

/// `[retry]`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Validate, JsonSchema)]
#[serde(deny_unknown_fields, default)]
#[garde(allow_unvalidated)]
pub struct RetrySettings {
    /// Retries after a rate limit (each resumes the session).
    #[garde(range(max = 10))]
    pub rate_limit_retries: u32,
    /// First backoff after a rate limit without a reset time, in ms (or as text: "1m").
    #[garde(range(min = 1_000, max = 3_600_000))]
    // Text such as "5m" is turned into milliseconds when the layers are read (layers.rs).
    #[schemars(extend("type" = ["integer", "string"]))]
    pub backoff_initial_ms: u64,
    /// Largest backoff, in ms (or as text: "15m"); not below the first.
    #[garde(range(min = 1_000, max = 21_600_000), custom(not_below_initial(&self.backoff_initial_ms)))]
    // Text such as "5m" is turned into milliseconds when the layers are read (layers.rs).
    #[schemars(extend("type" = ["integer", "string"]))]
    pub backoff_max_ms: u64,
    /// Times the agent is asked to fix an invalid `signals.json` on its resumed session.
    #[garde(range(min = 1, max = 5))]
    pub corrective_retries: u32,
    /// Whether a long rate limit (a wait of 5 minutes or more: an account's usage window) is
    /// waited out and the session resumed at the reset (default). Off, the run stops as soon as
    /// it learns of one and prints the command that resumes it; a sprint pauses (exit 4).
    pub auto_resume: bool,
}

fn not_below_initial(initial: &u64) -> impl FnOnce(&u64, &()) -> garde::Result + '_ {
    move |max, ()| {
        if max < initial {
            return Err(garde::Error::new(format!(
                "must not be below retry.backoff_initial_ms ({initial})"
            )));
        }
        Ok(())
    }
}

impl Default for RetrySettings {
    fn default() -> Self {
        RetrySettings {
            rate_limit_retries: 3,
            backoff_initial_ms: 60_000,
            backoff_max_ms: 900_000,
            corrective_retries: 2,
            auto_resume: true,
        }
    }
}

/// `[env]`
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, Validate, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct EnvSettings {
    /// `core` (PATH, HOME, locale, terminal, temp, XDG) or `none`.
    #[garde(skip)]
    #[schemars(with = "String")]
    pub inherit: EnvInherit,
    /// Extra variables to pass (`NAME` or `PREFIX_*`); wildcards never pass names that look
    /// secret (`*KEY*`, `*SECRET*`, `*TOKEN*`).
    #[garde(inner(length(min = 1)))]
    pub allow: Vec<String>,
}

/// `[providers.<id>]` for each provider.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, Validate, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct ProvidersSettings {
    /// Claude Code.
    #[garde(dive)]
    pub claude: ProviderSettings,
    /// Codex.
    #[garde(dive)]
    pub codex: ProviderSettings,
    /// Copilot CLI.
    #[garde(dive)]
    pub copilot: ProviderSettings,
    /// OpenCode.
    #[garde(dive)]
    pub opencode: ProviderSettings,
    /// Grok CLI.
    #[garde(dive)]
    pub grok: ProviderSettings,
    /// Gemini CLI.
    #[garde(dive)]
    pub gemini: ProviderSettings,
}

impl ProvidersSettings {
    /// The settings of one provider.
    pub fn get(&self, id: ProviderId) -> &ProviderSettings {
        match id {
            ProviderId::Claude => &self.claude,
            ProviderId::Codex => &self.codex,
            ProviderId::Copilot => &self.copilot,
            ProviderId::Opencode => &self.opencode,
            ProviderId::Grok => &self.grok,
            ProviderId::Gemini => &self.gemini,
        }
    }
}

/// One provider's settings.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, Validate, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct ProviderSettings {
    /// The CLI's program: a path, or a name looked up on PATH (default: the CLI's usual name).
    #[garde(inner(length(min = 1)))]
    pub command: Option<String>,
    /// The model, in the provider's spelling.
    #[garde(inner(length(min = 1)))]
    pub model: Option<String>,
    /// Extra arguments appended to every invocation.
    #[garde(skip)]
    pub args: Vec<String>,
    /// The tested version range (semver requirement) overriding the provider's own.
    #[garde(inner(custom(valid_version_req)))]
    pub tested_versions: Option<String>,
    /// Run even when the installed CLI's version is outside the tested range.
    #[garde(skip)]
    pub allow_untested_version: bool,
    /// Extra variables passed to this provider only (names or `PREFIX_*`).
    #[garde(inner(length(min = 1)))]
    pub env_allow: Vec<String>,
    /// Codex only: the configured model provider to use (`model_provider`); a custom provider
    /// also gets Codex's own retries capped so Corral owns the schedule.
    #[garde(inner(length(min = 1)))]
    pub model_provider: Option<String>,
    /// Codex only: its sandbox mode, `read-only`, `workspace-write` or `danger-full-access`
    /// (default: from the run's permissions).
    #[garde(inner(custom(valid_sandbox)))]
    pub sandbox: Option<String>,
    /// OpenCode only: pass `--auto`, approving every permission OpenCode would ask for.
    #[garde(skip)]
    pub auto_approve: bool,
    /// Claude only: the retries Claude Code makes on its own per request
    /// (`CLAUDE_CODE_MAX_RETRIES`, 0 to 15; default 3), each read from its stream. A short rate
    /// limit is absorbed at the length the API asks for; 0 hands every retry to Corral.
    #[garde(inner(range(max = 15)))]
    pub max_internal_retries: Option<u32>,
}

// garde hands a custom rule the field as declared, so `&String` it is.
#[allow(clippy::ptr_arg)]
fn valid_sandbox(value: &String, (): &()) -> garde::Result {
    match value.as_str() {
        "read-only" | "workspace-write" | "danger-full-access" => Ok(()),
        _ => Err(garde::Error::new(
            "must be read-only, workspace-write or danger-full-access",
        )),
    }
}

// garde hands a custom rule the field as declared, so `&String` it is.
#[allow(clippy::ptr_arg)]
fn valid_version_req(value: &String, (): &()) -> garde::Result {
    semver::VersionReq::parse(value)
        .map(|_| ())
        .map_err(|e| garde::Error::new(format!("not a semver range: {e}")))
}

/// The JSON Schema of the settings file, as checked in under `docs/schema/`.
pub fn settings_json_schema() -> serde_json::Value {
    serde_json::to_value(schemars::schema_for!(Settings)).unwrap_or_default()
}
