//! The trust model of the settings: which keys a project's `corral.toml` may set.
//!
//! A project file lives in the working directory, which the agent can write, and it comes with
//! every cloned repository: whoever wrote it is not necessarily the user. So every key that
//! decides the sandbox, the programs Corral runs, their arguments, the environment they get, or
//! where Corral keeps its record is *user-only*: only the user's own config file, the `CORRAL_*`
//! environment and command-line flags may set it. A project file may still set such a key to its
//! strictest value (`sandbox.network = "none"`), since that can only take power away. The table
//! is [`KEYS`]; a test checks that it classifies every key of the settings, so a new key cannot
//! be added without a decision.
//!
//! A project file that sets a user-only key is refused as a whole, naming each key, unless the
//! user trusted that file with that exact content: `corral config trust` records its path and
//! SHA-256 in the trust store (`trusted-projects` beside the user config), and any change to the
//! file undoes the trust.

use std::fmt;
use std::io::Write;
use std::path::{Component, Path};

use figment::value::{Dict, Value};
use sha2::{Digest, Sha256};

/// Who may set a key.
#[derive(Debug, Clone, Copy)]
pub enum Who {
    /// Every layer, the project file included.
    Anyone,
    /// Only the user's config, the environment and flags; a project file only to a value the
    /// check accepts (the strictest one).
    UserOnly {
        /// What the key decides, for the refusal.
        decides: &'static str,
        /// The values a project file may still set.
        project_may: ProjectMay,
    },
}

/// The values of a user-only key that a project file may set.
#[derive(Debug, Clone, Copy)]
pub enum ProjectMay {
    /// None.
    Nothing,
    /// Exactly this value (as JSON text: `"none"`, `false`, `[]`).
    Only(&'static str),
    /// A relative path that stays below the working directory.
    RelativeInside,
}

impl ProjectMay {
    fn allows(self, value: &serde_json::Value) -> bool {
        match self {
            ProjectMay::Nothing => false,
            ProjectMay::Only(json) => serde_json::from_str::<serde_json::Value>(json)
                .is_ok_and(|allowed| allowed == *value),
            ProjectMay::RelativeInside => value.as_str().is_some_and(|text| {
                let path = Path::new(text);
                !text.is_empty()
                    && path
                        .components()
                        .all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
            }),
        }
    }
}

const fn user_only(decides: &'static str, project_may: ProjectMay) -> Who {
    Who::UserOnly {
        decides,
        project_may,
    }
}

/// Every key of the settings and who may set it; `*` stands for one provider id. Listed in full,
/// `Anyone` included, so that the completeness test makes every new key a decision.
pub const KEYS: &[(&str, Who)] = &[
    ("run.provider", Who::Anyone),
    ("run.idle_watchdog_ms", Who::Anyone),
    ("run.wall_timeout_ms", Who::Anyone),
    ("run.kill_grace_ms", Who::Anyone),
    ("run.max_line_bytes", Who::Anyone),
    ("run.output_capture", Who::Anyone),
    ("run.raw_streams", Who::Anyone),
    (
        "run.runs_dir",
        user_only(
            "where Corral keeps its record, which the agent's sandbox may write",
            ProjectMay::RelativeInside,
        ),
    ),
    ("retry.rate_limit_retries", Who::Anyone),
    ("retry.backoff_initial_ms", Who::Anyone),
    ("retry.backoff_max_ms", Who::Anyone),
    ("retry.corrective_retries", Who::Anyone),
    ("retry.auto_resume", Who::Anyone),
    (
        "env.inherit",
        user_only(
            "which of your environment variables reach the agent",
            ProjectMay::Only("\"none\""),
        ),
    ),
    (
        "env.allow",
        user_only(
            "which of your environment variables (secrets included) reach the agent",
            ProjectMay::Only("[]"),
        ),
    ),
    (
        "sandbox.backend",
        user_only(
            "the sandbox the agent runs in",
            ProjectMay::Only("\"bubblewrap\""),
        ),
    ),
    (
        "sandbox.allow_degraded_native",
        user_only(
            "consent to run the agent without a sandbox",
            ProjectMay::Only("false"),
        ),
    ),
    (
        "sandbox.network",
        user_only("what the agent can reach", ProjectMay::Only("\"none\"")),
    ),
    (
        "limits.memory",
        user_only(
            "how much memory the agent's processes may use",
            ProjectMay::Nothing,
        ),
    ),
    (
        "limits.pids",
        user_only("how many processes the agent may run", ProjectMay::Nothing),
    ),
    (
        "limits.cpus",
        user_only("how many cores the agent may use", ProjectMay::Nothing),
    ),
    (
        "limits.disk",
        user_only("how much disk the agent may fill", ProjectMay::Nothing),
    ),
    (
        "sandbox.watch_native_writes",
        user_only(
            "whether Corral sees the agent's writes outside its work tree without a sandbox",
            ProjectMay::Only("true"),
        ),
    ),
    (
        "sandbox.network_allow",
        user_only(
            "which hosts the agent can reach beyond its model API",
            ProjectMay::Only("[]"),
        ),
    ),
    // More hidden only takes power away; the lists of every layer add up.
    ("sandbox.hide", Who::Anyone),
    ("executor.kind", Who::Anyone),
    (
        "executor.ray.address",
        user_only(
            "the cluster the sprint's tasks, and the repository with them, are sent to",
            ProjectMay::Nothing,
        ),
    ),
    (
        "executor.ray.remote",
        user_only(
            "the git remote the repository is pushed to",
            ProjectMay::Nothing,
        ),
    ),
    ("executor.ray.entrypoint_num_cpus", Who::Anyone),
    ("executor.ray.entrypoint_memory_mb", Who::Anyone),
    ("executor.ray.max_resubmits", Who::Anyone),
    (
        "sandbox.home",
        user_only(
            "which of your files the agent can read",
            ProjectMay::Only("\"isolated\""),
        ),
    ),
    (
        "sandbox.bwrap",
        user_only(
            "the program that builds the sandbox, run outside it",
            ProjectMay::Nothing,
        ),
    ),
    (
        "sandbox.refuse_dirty_tree",
        user_only(
            "whether a run may start on uncommitted changes",
            ProjectMay::Only("true"),
        ),
    ),
    (
        "providers.*.command",
        user_only(
            "the program Corral runs (its version probe runs outside the sandbox)",
            ProjectMay::Nothing,
        ),
    ),
    (
        "providers.*.args",
        user_only(
            "extra arguments to the CLI (permission modes, config files, hooks)",
            ProjectMay::Only("[]"),
        ),
    ),
    (
        "providers.*.env_allow",
        user_only(
            "which of your environment variables (secrets included) reach the agent",
            ProjectMay::Only("[]"),
        ),
    ),
    (
        "providers.*.sandbox",
        user_only(
            "the CLI's own sandbox mode",
            ProjectMay::Only("\"read-only\""),
        ),
    ),
    (
        "providers.*.auto_approve",
        user_only(
            "whether every permission the CLI asks for is granted",
            ProjectMay::Only("false"),
        ),
    ),
    ("providers.*.model", Who::Anyone),
    ("providers.*.tested_versions", Who::Anyone),
    ("providers.*.allow_untested_version", Who::Anyone),
    ("providers.*.model_provider", Who::Anyone),
    ("providers.*.max_internal_retries", Who::Anyone),
];

fn pattern_matches(pattern: &str, key: &str) -> bool {
    let mut keys = key.split('.');
    for part in pattern.split('.') {
        match keys.next() {
            Some(k) if part == "*" || part == k => {}
            Some(_) | None => return false,
        }
    }
    keys.next().is_none()
}

/// Who may set `key` (a dotted leaf path); `None` for a key the table does not know (the
/// settings' own unknown-key error then names it).
pub fn who_may_set(key: &str) -> Option<Who> {
    KEYS.iter()
        .find(|(pattern, _)| pattern_matches(pattern, key))
        .map(|(_, who)| *who)
}

/// One user-only key a project file sets.
#[derive(Debug, Clone, PartialEq)]
pub struct UntrustedKey {
    /// The dotted key.
    pub key: String,
    /// The value, as JSON.
    pub value: serde_json::Value,
    /// What the key decides.
    pub decides: &'static str,
}

impl fmt::Display for UntrustedKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} = {}: decides {}", self.key, self.value, self.decides)
    }
}

fn leaves(prefix: &str, dict: &Dict, out: &mut Vec<(String, Value)>) {
    for (key, value) in dict {
        let path = if prefix.is_empty() {
            key.clone()
        } else {
            format!("{prefix}.{key}")
        };
        match value {
            Value::Dict(_, inner) => leaves(&path, inner, out),
            Value::String(..)
            | Value::Char(..)
            | Value::Bool(..)
            | Value::Num(..)
            | Value::Empty(..)
            | Value::Array(..) => out.push((path, value.clone())),
        }
    }
}

/// The user-only keys `dict` (a project file's content) sets to values a project may not set.
pub fn untrusted_keys(dict: &Dict) -> Vec<UntrustedKey> {
    let mut all = Vec::new();
    leaves("", dict, &mut all);
    all.into_iter()
        .filter_map(|(key, value)| {
            let Some(Who::UserOnly {
                decides,
                project_may,
            }) = who_may_set(&key)
            else {
                return None;
            };
            let json = value
                .deserialize::<serde_json::Value>()
                .unwrap_or(serde_json::Value::Null);
            (!project_may.allows(&json)).then_some(UntrustedKey {
                key,
                value: json,
                decides,
            })
        })
        .collect()
}

/// The SHA-256 of a file's content, as the trust store writes it.
pub fn content_digest(content: &[u8]) -> String {
    let digest = Sha256::digest(content);
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// The name of the trust store beside the user config.
pub const TRUST_STORE_FILE: &str = "trusted-projects";

/// The largest trust store read.
const TRUST_STORE_MAX_BYTES: u64 = 1024 * 1024;

/// The `(digest, path)` entries of the trust store; none when there is no store.
fn entries(store: Option<&Path>) -> Vec<(String, String)> {
    let Some(store) = store else {
        return Vec::new();
    };
    let Ok(bytes) = corral_contract::read_untrusted_file(store, TRUST_STORE_MAX_BYTES) else {
        return Vec::new();
    };
    String::from_utf8_lossy(&bytes)
        .lines()
        .filter_map(|line| line.split_once(' '))
        .map(|(d, p)| (d.to_string(), p.to_string()))
        .collect()
}

/// Whether `store` (the trust store, if any) trusts the project file at `path` with `digest`.
pub fn is_trusted(store: Option<&Path>, path: &Path, digest: &str) -> bool {
    let path = path.display().to_string();
    entries(store)
        .iter()
        .any(|(d, p)| d == digest && *p == path)
}

/// Whether `store` names the project file at `path` at all (with any content).
pub fn is_listed(store: Option<&Path>, path: &Path) -> bool {
    let path = path.display().to_string();
    entries(store).iter().any(|(_, p)| *p == path)
}

/// Appends `path` with `digest` to the trust store, creating it (and its directory) if needed.
pub fn record_trust(store: &Path, path: &Path, digest: &str) -> std::io::Result<()> {
    if let Some(dir) = store.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let line = format!("{digest} {}\n", path.display());
    if line.lines().count() != 1 {
        return Err(std::io::Error::other(
            "a path with a line break cannot be recorded",
        ));
    }
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(store)?;
    file.write_all(line.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_match_whole_segments() {
        assert!(pattern_matches(
            "providers.*.command",
            "providers.claude.command"
        ));
        assert!(!pattern_matches("providers.*.command", "providers.claude"));
        assert!(!pattern_matches(
            "providers.*.command",
            "providers.claude.command.x"
        ));
        assert!(pattern_matches("sandbox.bwrap", "sandbox.bwrap"));
        assert!(!pattern_matches("sandbox.bwrap", "sandbox.bwrapper"));
    }

    #[test]
    fn a_project_may_only_tighten_a_user_only_key() {
        let may = |key: &str, json: &str| match who_may_set(key) {
            Some(Who::UserOnly { project_may, .. }) => {
                project_may.allows(&serde_json::from_str(json).unwrap())
            }
            Some(Who::Anyone) => true,
            None => panic!("{key} is not classified"),
        };
        assert!(may("sandbox.network", "\"none\""));
        assert!(!may("sandbox.network", "\"host\""));
        assert!(!may("sandbox.network", "\"allowlist\""));
        assert!(may("sandbox.network_allow", "[]"));
        assert!(!may("sandbox.network_allow", "[\"evil.example:443\"]"));
        assert!(may("sandbox.allow_degraded_native", "false"));
        assert!(!may("sandbox.allow_degraded_native", "true"));
        assert!(may("sandbox.watch_native_writes", "true"));
        assert!(!may("sandbox.watch_native_writes", "false"));
        assert!(!may("sandbox.bwrap", "\"bwrap\""));
        assert!(!may("providers.claude.command", "\"claude\""));
        assert!(may("providers.claude.args", "[]"));
        assert!(!may(
            "providers.claude.args",
            "[\"--dangerously-skip-permissions\"]"
        ));
        assert!(may("run.runs_dir", "\".corral/runs\""));
        assert!(may("run.runs_dir", "\"./out/runs\""));
        assert!(!may("run.runs_dir", "\"/home/u/.ssh\""));
        assert!(!may("run.runs_dir", "\"../../elsewhere\""));
        assert!(!may("run.runs_dir", "\"a/../../b\""));
        assert!(may("run.idle_watchdog_ms", "60000"));
    }

    #[test]
    fn the_digest_changes_with_one_byte() {
        let a = content_digest(b"[run]\nkill_grace_ms = 100\n");
        let b = content_digest(b"[run]\nkill_grace_ms = 101\n");
        assert!(a.starts_with("sha256:") && a.len() == 7 + 64, "{a}");
        assert_ne!(a, b);
    }
}
