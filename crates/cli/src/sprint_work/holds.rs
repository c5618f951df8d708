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
    /// the account waits for them. One `git ls-remote` a call (none for a `file://` remote,
    /// whose refs are read from its files); a hold ref that changed since the last call is
    /// fetched and read (two processes more), an unchanged one is not.
    ///
    /// Whether the remote's holds were listed with git (a `file://` remote's are read from its
    /// files, which costs no process).
    pub(super) async fn take_holds(
        &self,
        accounts: &[(ProviderId, ProviderAccount)],
        passed: &mut Passed,
    ) -> bool {
        let (listed, by_git) = match super::remote_refs::list(&self.remote, "refs/corral/holds/") {
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
