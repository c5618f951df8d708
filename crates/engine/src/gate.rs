//! One rate-limit gate per provider account, shared by every run on the machine.
//!
//! A rate limit belongs to the account, not to the run that met it: when one run learns that the
//! account is limited until T (the reset time the CLI reported, else the end of its own backoff),
//! every other run on that account, in this process (a sprint's parallel tasks) or in another
//! (parallel `corral run`s), holds its next spawn until T instead of walking into its own 429
//! and backing off on its own.
//!
//! The gate is a directory of small files, one per account (`<provider>-<fingerprint>.json`),
//! under the user's state directory: never the project's, where an agent writes. An account is
//! known by its provider and a SHA-256 fingerprint of what selects it: `HOME` and the values of
//! the variables the provider's credential profile passes (the API key, the base URL, the config
//! home). The values themselves are never stored. A file holds the latest `until` any run
//! recorded; it is replaced atomically (written beside, then renamed), only ever to push `until`
//! later, and read within a size limit before each spawn. A file that does not parse is ignored.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use corral_ports::ProviderId;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::config::EngineConfig;
use corral_process::env::EnvProfile;

/// The gate's directory under the user's state directory (`$XDG_STATE_HOME/corral/` or
/// `~/.local/state/corral/`).
pub const RATE_LIMIT_DIR: &str = "rate-limits";
/// An account file larger than this is not read (it would be nobody's hold).
const MAX_HOLD_BYTES: u64 = 4096;

/// The gate directory of the user whose environment `ambient` is (see
/// [`crate::EngineConfig::ambient`]): `$XDG_STATE_HOME/corral/rate-limits`, else
/// `$HOME/.local/state/corral/rate-limits`; `None` when neither is set to an absolute path.
pub fn user_rate_limit_dir(ambient: &[(String, String)]) -> Option<PathBuf> {
    let absolute = |name: &str| {
        ambient
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| PathBuf::from(v))
            .filter(|p| p.is_absolute())
    };
    let base = absolute("XDG_STATE_HOME")
        .or_else(|| absolute("HOME").map(|h| h.join(".local").join("state")))?;
    Some(base.join("corral").join(RATE_LIMIT_DIR))
}

/// One provider account: the provider and a fingerprint of what selects the account.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AccountKey {
    provider: ProviderId,
    fingerprint: String,
}

impl AccountKey {
    /// The account a child of `provider` started from `ambient` uses: `HOME` and every variable
    /// `profile` passes, hashed in name order.
    pub fn of(provider: ProviderId, profile: &EnvProfile, ambient: &[(String, String)]) -> Self {
        let selects = |name: &str| {
            name == "HOME"
                || profile
                    .pass
                    .iter()
                    .any(|p| corral_process::env::matches(p, name))
        };
        let mut vars: Vec<&(String, String)> = ambient.iter().filter(|(k, _)| selects(k)).collect();
        vars.sort();
        let mut hash = Sha256::new();
        hash.update(provider.as_str().as_bytes());
        for (name, value) in vars {
            // Lengths first, so that no two different lists hash the same bytes.
            for part in [name, value] {
                hash.update((part.len() as u64).to_le_bytes());
                hash.update(part.as_bytes());
            }
        }
        let digest = hash.finalize();
        let fingerprint = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
        AccountKey {
            provider,
            fingerprint,
        }
    }

    /// The account file's name.
    fn file_name(&self) -> String {
        format!("{}-{}.json", self.provider.as_str(), self.fingerprint)
    }

    /// The provider, for messages.
    pub fn provider(&self) -> ProviderId {
        self.provider
    }
}

/// What an account file holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Hold {
    /// Spawns on the account wait until this instant (milliseconds since the epoch).
    #[serde(alias = "until_epoch_ms")]
    pub until_epoch_ms: u64,
    /// Where `until` came from (a [`crate::WaitBasis`] in words).
    pub basis: String,
    /// The run that recorded it (`<run id>-<attempt>`).
    #[serde(alias = "set_by")]
    pub set_by: String,
}

/// The JSON Schema of an account file (`docs/schema/rate-limit-hold.schema.json`): what the
/// gate writes.
pub fn rate_limit_hold_schema() -> schemars::Schema {
    schemars::generate::SchemaSettings::draft2020_12()
        .for_serialize()
        .into_generator()
        .into_root_schema_for::<Hold>()
}

/// The gate: a directory of account files.
#[derive(Debug, Clone)]
pub(crate) struct RateLimitGate {
    dir: PathBuf,
}

impl RateLimitGate {
    /// The gate kept in `dir` (created on the first record).
    pub fn new(dir: &Path) -> Self {
        RateLimitGate {
            dir: dir.to_path_buf(),
        }
    }

    fn path(&self, key: &AccountKey) -> PathBuf {
        self.dir.join(key.file_name())
    }

    /// The account's hold, if it has a readable one.
    pub fn read(&self, key: &AccountKey) -> Option<Hold> {
        let path = self.path(key);
        let file = std::fs::File::open(&path).ok()?;
        let mut text = String::new();
        file.take(MAX_HOLD_BYTES).read_to_string(&mut text).ok()?;
        match serde_json::from_str(&text) {
            Ok(hold) => Some(hold),
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "ignoring an unreadable rate-limit hold");
                None
            }
        }
    }

    /// Records that the account is limited until `hold.until_epoch_ms`, unless a later hold is
    /// already there. Two runs recording at once may both write; the later rename wins, and
    /// either hold is a wait the other run would have taken too.
    pub fn record(&self, key: &AccountKey, hold: &Hold) -> std::io::Result<()> {
        if self
            .read(key)
            .is_some_and(|old| old.until_epoch_ms >= hold.until_epoch_ms)
        {
            return Ok(());
        }
        std::fs::create_dir_all(&self.dir)?;
        let path = self.path(key);
        let next = self
            .dir
            .join(format!(".{}.{}.next", key.file_name(), std::process::id()));
        let body = serde_json::to_vec(hold).map_err(std::io::Error::other)?;
        std::fs::write(&next, body)?;
        std::fs::rename(&next, &path)
    }
}

/// One provider account's place in the gate, as a provider built on an engine sees it
/// ([`crate::SupervisedAi::account`]): what a run records when it learns the account is limited,
/// and what `corral sprint status` reads to say who waits and until when.
#[derive(Debug, Clone)]
pub struct ProviderAccount {
    gate: RateLimitGate,
    key: AccountKey,
}

/// A hold on a provider account: spawns on it wait until `until`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccountHold {
    /// When the account's next spawn may start (kept to the millisecond).
    pub until: SystemTime,
    /// Where `until` came from (a [`crate::WaitBasis`] in words).
    pub basis: String,
    /// The run that recorded it (`<run id>-<attempt>`).
    pub set_by: String,
}

impl ProviderAccount {
    /// The account a child of `provider` with credential profile `profile` uses on an engine
    /// configured by `config` (its ambient environment selects the account); `None` when the
    /// engine keeps no gate.
    pub fn of(config: &EngineConfig, provider: ProviderId, profile: &EnvProfile) -> Option<Self> {
        let dir = config.rate_limit_gate.as_deref()?;
        Some(ProviderAccount {
            gate: RateLimitGate::new(dir),
            key: AccountKey::of(provider, profile, &config.ambient()),
        })
    }

    /// The provider.
    pub fn provider(&self) -> ProviderId {
        self.key.provider()
    }

    /// The account's hold, when it has a readable one that lasts beyond `now`.
    pub fn hold_at(&self, now: SystemTime) -> Option<AccountHold> {
        let hold = self.read()?;
        remaining(hold.until_epoch_ms, now)?;
        Some(AccountHold {
            until: UNIX_EPOCH + Duration::from_millis(hold.until_epoch_ms),
            basis: hold.basis,
            set_by: hold.set_by,
        })
    }

    /// Records that the account is limited until `hold.until`, unless a later hold is already
    /// there. The file is replaced atomically; two runs recording at once may both write, and
    /// the later rename wins.
    pub fn record(&self, hold: &AccountHold) -> std::io::Result<()> {
        self.record_hold(&Hold {
            until_epoch_ms: epoch_ms(hold.until),
            basis: hold.basis.clone(),
            set_by: hold.set_by.clone(),
        })
    }

    /// The account file's hold as written, past or not.
    pub(crate) fn read(&self) -> Option<Hold> {
        self.gate.read(&self.key)
    }

    /// Records `hold` as the account file keeps it.
    pub(crate) fn record_hold(&self, hold: &Hold) -> std::io::Result<()> {
        self.gate.record(&self.key, hold)
    }
}

/// Milliseconds since the epoch of `t` (0 before it).
pub(crate) fn epoch_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// How long from `now` until `until_epoch_ms`; `None` when it has passed.
/// Seconds since the Unix epoch, `wait` from now: the reset of a limit known only by its wait.
pub(crate) fn epoch_s_after(wait: Duration) -> Option<u64> {
    Some(epoch_ms(SystemTime::now() + wait).div_ceil(1000))
}

pub(crate) fn remaining(until_epoch_ms: u64, now: SystemTime) -> Option<Duration> {
    let now_ms = epoch_ms(now);
    (until_epoch_ms > now_ms).then(|| Duration::from_millis(until_epoch_ms - now_ms))
}

/// `HH:MM:SS` (UTC) of an instant, for people.
pub(crate) fn clock_utc(epoch_ms: u64) -> String {
    let t = UNIX_EPOCH + Duration::from_millis(epoch_ms);
    let text = humantime::format_rfc3339_seconds(t).to_string();
    text.get(11..19).unwrap_or(&text).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn profile() -> EnvProfile {
        EnvProfile::new("claude", &["ANTHROPIC_*", "CLAUDE_CONFIG_DIR"])
    }

    #[test]
    fn the_account_is_the_provider_home_and_profile_variables_only() {
        let base = vars(&[("HOME", "/h"), ("ANTHROPIC_API_KEY", "sk-1"), ("PWD", "/a")]);
        let key = AccountKey::of(ProviderId::Claude, &profile(), &base);
        let other_cwd = vars(&[("HOME", "/h"), ("ANTHROPIC_API_KEY", "sk-1"), ("PWD", "/b")]);
        assert_eq!(
            key,
            AccountKey::of(ProviderId::Claude, &profile(), &other_cwd)
        );
        let other_key = vars(&[("HOME", "/h"), ("ANTHROPIC_API_KEY", "sk-2")]);
        assert_ne!(
            key,
            AccountKey::of(ProviderId::Claude, &profile(), &other_key)
        );
        let other_home = vars(&[("HOME", "/g"), ("ANTHROPIC_API_KEY", "sk-1")]);
        assert_ne!(
            key,
            AccountKey::of(ProviderId::Claude, &profile(), &other_home)
        );
        assert_ne!(key, AccountKey::of(ProviderId::Codex, &profile(), &base));
        assert!(!key.file_name().contains("sk-1"), "{}", key.file_name());
    }

    #[test]
    fn a_hold_only_ever_moves_later_and_survives_a_reread() {
        let dir = tempfile::tempdir().unwrap();
        let gate = RateLimitGate::new(&dir.path().join("rate-limits"));
        let key = AccountKey::of(ProviderId::Claude, &profile(), &vars(&[("HOME", "/h")]));
        assert_eq!(gate.read(&key), None);
        let hold = |until| Hold {
            until_epoch_ms: until,
            basis: "exponential backoff".into(),
            set_by: "r-1".into(),
        };
        gate.record(&key, &hold(2000)).unwrap();
        gate.record(&key, &hold(1000)).unwrap();
        assert_eq!(gate.read(&key), Some(hold(2000)));
        gate.record(&key, &hold(3000)).unwrap();
        assert_eq!(gate.read(&key).map(|h| h.until_epoch_ms), Some(3000));
        std::fs::write(gate.path(&key), "not json").unwrap();
        assert_eq!(gate.read(&key), None, "a broken file is no hold");
    }

    #[test]
    fn the_directory_is_the_users_state_never_relative() {
        assert_eq!(
            user_rate_limit_dir(&vars(&[("HOME", "/h")])),
            Some(PathBuf::from("/h/.local/state/corral/rate-limits"))
        );
        assert_eq!(
            user_rate_limit_dir(&vars(&[("HOME", "/h"), ("XDG_STATE_HOME", "/s")])),
            Some(PathBuf::from("/s/corral/rate-limits"))
        );
        assert_eq!(user_rate_limit_dir(&vars(&[("HOME", "rel")])), None);
    }

    #[test]
    fn the_clock_reads_utc() {
        assert_eq!(clock_utc(3_723_000), "01:02:03");
        let now = UNIX_EPOCH + Duration::from_secs(10);
        assert_eq!(remaining(11_500, now), Some(Duration::from_millis(1500)));
        assert_eq!(remaining(9_000, now), None);
    }
}
