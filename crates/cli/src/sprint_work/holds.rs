//! The rate-limit gate of a Ray sprint, across its nodes: a worker passes its provider accounts'
//! holds between its node's gate (the engine's files under the user's state directory, which
//! only the spawns on that node read) and the sprint's git remote, which every node reaches.
//!
//! A hold is one blob per provider at `refs/corral/holds/<provider>` on the remote (JSON:
//! `untilEpochMs`, `basis`, `setBy`). A worker takes the remote's holds into its node's gate
//! before its first round and then every [`HOLD_POLL`] while its rounds run, and publishes a
//! hold its own spawns met (a 429 with a reset time) once. A `file://` remote's hold refs are
//! read from its files (no process a poll); any other's are listed with `git ls-remote`, less
//! often while they stay unchanged. The account is the provider's: the
//! workers of a cluster run on the cluster's credentials (its nodes' environment and the
//! coordinator's `CORRAL_*` variables), whatever their `HOME`, which the node's own gate counts
//! in its account key. Two workers publishing at once: the later push wins, and either hold is a
//! wait the other's spawns would have met too.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use corral_compose::{AccountHold, EngineConfig, ProviderAccount, Settings, provider_account};
use corral_ports::{CancellationToken, ProviderId};
use serde::{Deserialize, Serialize};

use super::Worker;

/// How often a worker passes holds between its node's gate and the remote while its rounds run
/// (see [`Worker::relay_holds`]).
const HOLD_POLL: Duration = Duration::from_secs(1);
/// The longest a worker goes without asking a remote that git must list for its holds.
const HOLD_POLL_MAX: Duration = Duration::from_secs(8);

/// A hold as the remote keeps it.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SharedHold {
    until_epoch_ms: u64,
    basis: String,
    set_by: String,
}

/// The ref of `provider`'s hold on the remote.
fn hold_ref(provider: ProviderId) -> String {
    format!("refs/corral/holds/{}", provider.as_str())
}

fn epoch_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// The accounts in this node's gate of the providers the sprint's roles name (none when the
/// engine keeps no gate).
pub(super) fn accounts(
    file: &corral_sprint::SprintFile,
    settings: &Settings,
    config: &EngineConfig,
) -> Vec<(ProviderId, ProviderAccount)> {
    let mut providers = vec![file.generator.provider];
    if let Some(evaluator) = &file.evaluator
        && !providers.contains(&evaluator.provider)
    {
        providers.push(evaluator.provider);
    }
    providers
        .into_iter()
        .filter_map(|p| match provider_account(p, settings, config.clone()) {
            Ok(account) => account.map(|a| (p, a)),
            Err(e) => {
                tracing::warn!(provider = p.as_str(), error = %e, "no gate shared for the provider");
                None
            }
        })
        .collect()
}

/// What a worker has passed on, so that a hold goes each way once: the end of the last hold
/// passed per provider, and the remote's hold ref as last seen (its object id), so that an
/// unchanged hold is not fetched and read again.
#[derive(Debug, Default)]
pub(super) struct Passed(HashMap<ProviderId, u64>, HashMap<String, String>);

impl Worker<'_> {
    /// The remote's holds into this node's gate (those not over): the engine's next spawn on
    /// the account waits for them. One `git ls-remote` a call; a hold ref that changed since
    /// the last call is fetched and read (two processes more), an unchanged one is not.
    ///
    /// Whether the remote's holds were listed with git (a `file://` remote's are read from its
    /// files, which costs no process).
    pub(super) async fn take_holds(
        &self,
        accounts: &[(ProviderId, ProviderAccount)],
        passed: &mut Passed,
    ) -> bool {
        let (listed, by_git) = match local_hold_refs(&self.remote) {
            Some(listed) => (Ok(listed), false),
            None => (
                self.git(
                    &self.work,
                    &["ls-remote", &self.remote, "refs/corral/holds/*"],
                    &self.to_remote(),
                )
                .await,
                true,
            ),
        };
        let listed = match listed {
            Ok(listed) => listed,
            Err(e) => {
                tracing::debug!(error = %e, "the remote's holds were not listed");
                return by_git;
            }
        };
        for (provider, account) in accounts {
            let reference = hold_ref(*provider);
            let Some(id) = listed.lines().find_map(|line| {
                let (id, name) = line.split_once('\t')?;
                (name == reference).then_some(id)
            }) else {
                continue;
            };
            if passed.1.get(&reference).is_some_and(|seen| seen == id) {
                continue;
            }
            let refspec = format!("+{reference}:{reference}");
            let fetched = self
                .git(
                    &self.work,
                    &["fetch", "--quiet", &self.remote, &refspec],
                    &self.to_remote(),
                )
                .await;
            if let Err(e) = fetched {
                tracing::debug!(error = %e, "a hold was not fetched from the remote");
                continue;
            }
            passed.1.insert(reference.clone(), id.to_owned());
            let Ok(json) = self
                .git(&self.work, &["cat-file", "blob", &reference], &[])
                .await
            else {
                continue;
            };
            let Ok(hold) = serde_json::from_str::<SharedHold>(&json) else {
                continue;
            };
            let seen = passed.0.get(provider).copied().unwrap_or(0);
            if hold.until_epoch_ms <= seen.max(epoch_ms(SystemTime::now())) {
                continue;
            }
            let taken = AccountHold {
                until: UNIX_EPOCH + Duration::from_millis(hold.until_epoch_ms),
                basis: hold.basis,
                set_by: hold.set_by,
            };
            match account.record(&taken) {
                Ok(()) => {
                    passed.0.insert(*provider, hold.until_epoch_ms);
                }
                Err(e) => {
                    tracing::warn!(provider = provider.as_str(), error = %e, "a hold from the remote was not recorded");
                }
            }
        }
        by_git
    }

    /// This node's holds (not over, not passed yet) onto the remote.
    async fn give_holds(&self, accounts: &[(ProviderId, ProviderAccount)], passed: &mut Passed) {
        for (provider, account) in accounts {
            let Some(hold) = account.hold_at(SystemTime::now()) else {
                continue;
            };
            let until = epoch_ms(hold.until);
            if passed.0.get(provider).is_some_and(|seen| *seen >= until) {
                continue;
            }
            let shared = SharedHold {
                until_epoch_ms: until,
                basis: hold.basis,
                set_by: hold.set_by,
            };
            match self.publish(*provider, &shared).await {
                Ok(()) => {
                    passed.0.insert(*provider, until);
                }
                Err(e) => {
                    tracing::warn!(provider = provider.as_str(), error = %e, "a hold was not published");
                }
            }
        }
    }

    /// Pushes `hold` as a blob to the provider's hold ref.
    async fn publish(&self, provider: ProviderId, hold: &SharedHold) -> anyhow::Result<()> {
        // Through a file: the supervised git takes no stdin. In `.git`, out of the work tree.
        let path = self.work.join(".git").join("corral-hold.json");
        std::fs::write(&path, serde_json::to_vec(hold)?)?;
        let file = path.display().to_string();
        let blob = self
            .git(&self.work, &["hash-object", "-w", "--", &file], &[])
            .await?;
        self.push(&[format!("{}:{}", blob.trim(), hold_ref(provider))])
            .await
    }

    /// Passes holds both ways until `done`: every [`HOLD_POLL`] when the remote's holds are
    /// read without a process (a `file://` remote), else from every [`HOLD_POLL`] up to every
    /// [`HOLD_POLL_MAX`], twice as long each time the remote's holds stay as they were (a
    /// `git ls-remote` is three processes and a round trip), back to [`HOLD_POLL`] when they
    /// change. This node's own holds are published within [`HOLD_POLL`] either way.
    pub(super) async fn relay_holds(
        &self,
        accounts: &[(ProviderId, ProviderAccount)],
        mut passed: Passed,
        done: &CancellationToken,
    ) {
        if accounts.is_empty() {
            return;
        }
        let mut wait = HOLD_POLL;
        let mut next_take = tokio::time::Instant::now() + wait;
        loop {
            tokio::select! {
                () = done.cancelled() => return,
                () = tokio::time::sleep(HOLD_POLL) => {}
            }
            self.give_holds(accounts, &mut passed).await;
            if tokio::time::Instant::now() < next_take {
                continue;
            }
            let seen = passed.1.clone();
            let by_git = self.take_holds(accounts, &mut passed).await;
            wait = if by_git && passed.1 == seen {
                (wait * 2).min(HOLD_POLL_MAX)
            } else {
                HOLD_POLL
            };
            next_take = tokio::time::Instant::now() + wait;
        }
    }
}

/// The hold refs of a `file://` remote on this machine, read from its files as `git
/// ls-remote` lists them (`<id>\t<name>` a line): its loose refs under `refs/corral/holds/`,
/// then its `packed-refs` for those not loose (the order git reads them in, so that a ref
/// being packed meanwhile is seen in one or the other). `None` for any other remote, and for a
/// repository whose refs are not kept that way (`reftable`, a `.git` file, a name with `%`):
/// then git lists them.
fn local_hold_refs(remote: &str) -> Option<String> {
    let path = remote.strip_prefix("file://")?;
    if path.contains('%') || !path.starts_with('/') {
        return None;
    }
    let repo = Path::new(path);
    let git_dir = if repo.join("refs").is_dir() && repo.join("HEAD").is_file() {
        repo.to_path_buf()
    } else if repo.join(".git").join("refs").is_dir() {
        repo.join(".git")
    } else {
        return None;
    };
    if git_dir.join("reftable").exists() {
        return None;
    }
    let mut listed = String::new();
    let mut seen = Vec::new();
    let dir = git_dir.join("refs/corral/holds");
    match std::fs::read_dir(&dir) {
        Ok(entries) => {
            for entry in entries {
                let entry = entry.ok()?;
                let name = entry.file_name().into_string().ok()?;
                // A ref being written (`<name>.lock`) is not one yet.
                if name.ends_with(".lock") || !entry.file_type().ok()?.is_file() {
                    continue;
                }
                let id = read_small(&entry.path())?;
                let id = id.trim();
                if !is_object_id(id) {
                    // A symbolic ref, or something git would not take: git knows better.
                    return None;
                }
                let _ = writeln!(listed, "{id}\trefs/corral/holds/{name}");
                seen.push(name);
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(_) => return None,
    }
    match read_small(&git_dir.join("packed-refs")) {
        Some(packed) => {
            for line in packed.lines() {
                let Some((id, name)) = line.split_once(' ') else {
                    continue;
                };
                let Some(short) = name.strip_prefix("refs/corral/holds/") else {
                    continue;
                };
                if is_object_id(id) && !seen.iter().any(|s| s == short) {
                    let _ = writeln!(listed, "{id}\t{name}");
                }
            }
        }
        None if git_dir.join("packed-refs").exists() => return None,
        None => {}
    }
    Some(listed)
}

/// A ref file's text, when it is one (at most 16 MiB: a `packed-refs` of many refs).
fn read_small(path: &Path) -> Option<String> {
    let meta = std::fs::metadata(path).ok()?;
    if !meta.is_file() || meta.len() > 16 * 1024 * 1024 {
        return None;
    }
    std::fs::read_to_string(path).ok()
}

/// Whether `id` is a full object id (SHA-1 or SHA-256, lower-case hex).
fn is_object_id(id: &str) -> bool {
    matches!(id.len(), 40 | 64) && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "0123456789abcdef0123456789abcdef01234567";
    const B: &str = "89abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn a_file_remotes_hold_refs_are_read_loose_then_packed() {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path().join("remote.git");
        std::fs::create_dir_all(repo.join("refs/corral/holds")).unwrap();
        std::fs::write(repo.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        let url = format!("file://{}", repo.display());
        assert_eq!(local_hold_refs(&url).as_deref(), Some(""));
        std::fs::write(repo.join("refs/corral/holds/claude"), format!("{A}\n")).unwrap();
        std::fs::write(repo.join("refs/corral/holds/codex.lock"), format!("{A}\n")).unwrap();
        std::fs::write(
            repo.join("packed-refs"),
            format!("# pack-refs with: peeled fully-peeled sorted\n{B} refs/corral/holds/claude\n{B} refs/corral/holds/codex\n{B} refs/heads/main\n"),
        )
        .unwrap();
        let listed = local_hold_refs(&url).unwrap();
        assert_eq!(
            listed,
            format!("{A}\trefs/corral/holds/claude\n{B}\trefs/corral/holds/codex\n")
        );
        // Not read from files: a remote of another transport, a reftable, a symbolic ref.
        assert_eq!(local_hold_refs("ssh://host/remote.git"), None);
        std::fs::write(
            repo.join("refs/corral/holds/claude"),
            "ref: refs/heads/main\n",
        )
        .unwrap();
        assert_eq!(local_hold_refs(&url), None);
        std::fs::remove_file(repo.join("refs/corral/holds/claude")).unwrap();
        std::fs::create_dir(repo.join("reftable")).unwrap();
        assert_eq!(local_hold_refs(&url), None);
    }
}
