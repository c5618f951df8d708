//! The sprint's agent seam implemented over a provider: [`role_agent`] builds the
//! [`corral_sprint::RoleAgent`] that plays one sprint role (a provider with the role's model and
//! effort), each spawn being the one-task run `corral run` makes (ADR 0005).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use corral_engine::EngineConfig;
use corral_ports::{
    AiSession, CancellationToken, Effort, ErrorClass, Guarantee, HeadlessAiProvider, Permissions,
    ProviderError, ProviderId, RunObserver,
};
use corral_sprint::{
    FailoverAgent, ProviderChoice, RoleAgent, RoleSettings, SpawnFailure, SpawnReport,
    SpawnRequest, SpawnVerdict,
};

use crate::contract_run::{ContractRun, SignalsVerdict};
use crate::factory::{ComposeError, capabilities, headless_provider};
use crate::settings::Settings;
use crate::spawn::{Spawn, SpawnHooks, SpawnPlan};

/// The agent that plays a sprint role: `role`'s provider, built from `settings` on an engine
/// configured by `config` (usually [`crate::engine_config`]), with the role's model (else the
/// provider's configured one) and effort. Read-only spawns run on a second engine that never
/// falls back to a sandbox that cannot keep the work tree read-only.
///
/// A role that lists several providers (`provider = ["claude", "codex"]`) is a
/// [`FailoverAgent`] over one such agent per provider, in order, each built to stop a spawn at
/// once on a hold longer than the role's `failover_after_ms` (`RetryPolicy::hand_over_after`),
/// for another to go on; and one per provider built to wait for its hold, for when every
/// provider is held.
pub fn role_agent(
    role: &RoleSettings,
    settings: &Settings,
    config: EngineConfig,
) -> Result<Arc<dyn RoleAgent>, ComposeError> {
    let choices = role.choices();
    if choices.len() == 1 {
        return one_agent(&role.choices()[0], settings, config);
    }
    let failover_after = Duration::from_millis(role.failover_after_ms);
    let mut agents = Vec::with_capacity(choices.len());
    let mut waiting = Vec::with_capacity(choices.len());
    for choice in &choices {
        let mut handing = config.clone();
        handing.retry.hand_over_after = Some(failover_after);
        agents.push(one_agent(choice, settings, handing)?);
        // What runs once every provider is held: the provider whose hold ends first waits
        // for it (or pauses, `retry.auto_resume = false`), as a role of one provider does.
        waiting.push(one_agent(choice, settings, config.clone())?);
    }
    match FailoverAgent::new(agents, failover_after) {
        Some(agent) => Ok(Arc::new(agent.with_waiting(waiting))),
        // `choices` is never empty: the first provider is always there.
        None => one_agent(&role.choices()[0], settings, config),
    }
}

/// The agent of one provider of a role.
fn one_agent(
    choice: &ProviderChoice,
    settings: &Settings,
    config: EngineConfig,
) -> Result<Arc<dyn RoleAgent>, ComposeError> {
    let id = choice.provider;
    let mut strict = config.clone();
    strict.sandbox.allow_degraded_native = false;
    let writable = headless_provider(id, settings, config)?;
    let read_only = headless_provider(id, &read_only_settings(id, settings), strict)?;
    let model = choice
        .model
        .clone()
        .or_else(|| settings.providers.get(id).model.clone());
    Ok(Arc::new(ComposedRoleAgent {
        id,
        model,
        effort: choice.effort,
        resumes: capabilities(id).resume,
        corrective_retries: settings.retry.corrective_retries,
        writable,
        read_only,
    }))
}

/// The settings a read-only spawn's provider is built from. Corral's sandbox is what keeps the
/// work tree read-only (the strict engine refuses where it cannot, and a run not attested
/// `repo-read-only` is a failure); Codex's own `read-only` sandbox would close the spawn's
/// `signals.json` as well, so that no Codex evaluator could ever report (and with its
/// `workspace-write` sandbox, tried, a Codex evaluator in the work tree Corral mounted read-only
/// still wrote no `signals.json`). Unless the user chose Codex's sandbox
/// (`providers.codex.sandbox`), a read-only Codex spawn runs without Codex's own sandbox
/// (`danger-full-access`) inside Corral's, which alone decides what it may write: the spawn's
/// directory (its `signals.json`), not the work tree.
pub(crate) fn read_only_settings(id: ProviderId, settings: &Settings) -> Settings {
    let mut settings = settings.clone();
    // A comparison, not a match over every provider: the factory's match is the one place a new
    // provider must be named (docs/adding-a-provider.md), and a provider without an inner
    // sandbox of its own needs nothing here.
    if id == ProviderId::Codex {
        let codex = &mut settings.providers.codex;
        if codex.sandbox.is_none() {
            codex.sandbox = Some("danger-full-access".to_string());
        }
    }
    settings
}

/// [`RoleAgent`] over a provider built by the factory.
struct ComposedRoleAgent {
    id: ProviderId,
    model: Option<String>,
    effort: Option<Effort>,
    resumes: bool,
    corrective_retries: u32,
    /// Runs writable spawns.
    writable: Arc<dyn HeadlessAiProvider>,
    /// Runs read-only spawns: never on a sandbox that cannot enforce it.
    read_only: Arc<dyn HeadlessAiProvider>,
}

#[async_trait]
impl RoleAgent for ComposedRoleAgent {
    fn provider(&self) -> ProviderId {
        self.id
    }

    fn model(&self) -> Option<&str> {
        self.model.as_deref()
    }

    fn effort(&self) -> Option<Effort> {
        self.effort
    }

    fn resumes(&self) -> bool {
        self.resumes
    }

    async fn spawn(
        &self,
        request: SpawnRequest,
        cancel: CancellationToken,
        observer: Arc<dyn RunObserver>,
    ) -> SpawnReport {
        let signals_file = request.dir.join(corral_ports::run_dir::SIGNALS_FILE);
        let session = AiSession {
            prompt: Arc::from(request.prompt.as_str()),
            cold_prompt: request.cold_prompt.as_deref().map(Arc::from),
            cwd: request.work_tree.clone(),
            extra_roots: Vec::new(),
            model: self.model.clone(),
            effort: self.effort,
            permissions: Permissions {
                edit_files: !request.read_only,
                ..Permissions::default()
            },
            resume: request.resume.clone(),
            cancel,
            signals_file,
            output_dir: request.dir.clone(),
            max_budget_usd: request.max_budget_usd,
            max_turns: request.max_turns,
            // A session that is gone gets the cold prompt in a new one (the provider's one
            // cold retry), as `corral run --resume` does.
            cold_fallback: true,
            task: None,
        };
        let plan = SpawnPlan {
            run_id: request.run_id.clone(),
            provider: self.id,
            session,
            contract: Some(request.contract.clone()),
            corrective_retries: self.corrective_retries,
            // The sprint resumes its rounds' sessions itself.
            resumed_by: crate::ResumedBy::ItsOwner,
        };
        let provider = if request.read_only {
            &self.read_only
        } else {
            &self.writable
        };
        let end = Spawn::begin(plan, Arc::new(LoggedHooks))
            .run(&**provider, observer, |_| None)
            .await;
        report(&end.run, &request)
    }
}

/// What a spawn's provider runs come to, in the sprint's terms.
fn report(run: &ContractRun, request: &SpawnRequest) -> SpawnReport {
    let (outcome, session_id, mut error, attestation) = match &run.result {
        Ok(out) => (
            out.outcome,
            out.session_id.clone(),
            None,
            out.attestation.as_ref(),
        ),
        Err(err) => (
            err.outcome(),
            err.session_id().cloned(),
            Some(failure(err)),
            err.evidence().and_then(|e| e.attestation.as_ref()),
        ),
    };
    // The read-only engine refuses where the work tree cannot be kept read-only; a run whose
    // attestation still does not say so is not trusted as read-only.
    if request.read_only
        && error.is_none()
        && !attestation.is_some_and(|a| a.enforced.contains(&Guarantee::RepoReadOnly))
    {
        error = Some(SpawnFailure {
            class: ErrorClass::Permanent,
            message: "the sandbox did not attest the work tree read-only".to_string(),
            resets_at_epoch_s: None,
        });
    }
    let verdict = match &run.verdict {
        SignalsVerdict::NotChecked => SpawnVerdict::NotChecked,
        SignalsVerdict::Valid { signals, .. } => SpawnVerdict::Valid {
            signals: signals.clone(),
        },
        SignalsVerdict::Invalid(e) => SpawnVerdict::Invalid {
            reason: e.to_string(),
        },
    };
    SpawnReport {
        outcome,
        session_id,
        verdict,
        usage: run.usage,
        error,
        attempts: run.attempts,
        stray_writes: attestation.map_or_else(Vec::new, |a| a.stray_writes.clone()),
    }
}

/// A spawn's record failures go to the log: the sprint's own record says how it ended.
struct LoggedHooks;

impl SpawnHooks for LoggedHooks {
    fn record_failed(&self, what: &str, error: &std::io::Error) {
        tracing::warn!(file = what, %error, "cannot write a spawn's record");
    }
}

/// The sprint's terms for a provider error: its own class ([`ProviderError::class`]). A rate
/// limit whose retries are used up pauses the sprint; any other retryable end (a crash, the
/// idle watchdog, the wall clock, a version probe that did not answer) is a transient failure
/// the sprint runs again without counting a round; a permanent one (the CLI missing or out of
/// range, the model unavailable, the login refused) stops the sprint; a cancelled run was asked
/// for.
fn failure(err: &ProviderError) -> SpawnFailure {
    // Only a rate limit has a reset.
    let resets_at_epoch_s = if let ProviderError::RateLimited {
        resets_at_epoch_s, ..
    } = err
    {
        *resets_at_epoch_s
    } else {
        None
    };
    SpawnFailure {
        class: err.class(),
        message: err.to_string(),
        resets_at_epoch_s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_watchdog_kill_is_transient_for_the_sprint_and_a_missing_cli_permanent() {
        let idle = ProviderError::IdleTimeout {
            provider: ProviderId::Claude,
            idle: std::time::Duration::from_secs(300),
            evidence: Box::default(),
        };
        assert_eq!(failure(&idle).class, ErrorClass::Retryable);
        let missing = ProviderError::CliNotFound {
            provider: ProviderId::Claude,
            program: "claude".into(),
            reason: "No such file or directory".into(),
        };
        let spawn = failure(&missing);
        assert_eq!(spawn.class, ErrorClass::Permanent);
        assert!(spawn.message.contains("hint:"), "{}", spawn.message);
    }

    #[test]
    fn a_read_only_codex_spawn_leaves_the_confinement_to_corrals_sandbox() {
        let settings = Settings::default();
        let ro = read_only_settings(ProviderId::Codex, &settings);
        assert_eq!(
            ro.providers.codex.sandbox.as_deref(),
            Some("danger-full-access")
        );
        // The user's own choice stands.
        let mut chosen = Settings::default();
        chosen.providers.codex.sandbox = Some("read-only".to_string());
        let ro = read_only_settings(ProviderId::Codex, &chosen);
        assert_eq!(ro.providers.codex.sandbox.as_deref(), Some("read-only"));
        // The other providers' settings are not touched.
        for id in [
            ProviderId::Claude,
            ProviderId::Copilot,
            ProviderId::Opencode,
            ProviderId::Grok,
        ] {
            assert_eq!(read_only_settings(id, &settings), settings, "{id}");
        }
    }
}
