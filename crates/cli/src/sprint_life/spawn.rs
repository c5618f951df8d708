//! One agent spawn of a life flow: `corral run`'s path (compose's `Spawn`: the contract section
//! appended to the prompt, `signals.json` validated, the corrective loop on the resumed
//! session, `run.json` kept) in the flow's own directory of the sprint's record, shown on the
//! terminal as a run is.

use std::path::PathBuf;
use std::sync::Arc;

use corral_compose::{
    Contract, ContractRun, ResumedBy, RunRecord, Settings, SignalsError, SignalsVerdict, Spawn,
    SpawnHooks, SpawnPlan, engine_config, headless_provider,
};
use corral_ports::run_dir::SIGNALS_FILE;
use corral_ports::{
    AgentEvent, AiSession, CancellationToken, Permissions, ProviderId, RunObserver, SessionId,
};

use crate::exit::{Exit, usage};
use crate::render::{Renderer, Style};

/// What a flow's spawn is asked to do.
pub(crate) struct FlowSpawn<'a> {
    /// The flow's name, for the run id (`plan-3`).
    pub run_id: String,
    /// The settings the provider is built from.
    pub settings: &'a Settings,
    /// The provider and model.
    pub provider: ProviderId,
    pub model: Option<String>,
    /// The project: the agent's working directory.
    pub cwd: PathBuf,
    /// The spawn's directory (exists, empty).
    pub dir: PathBuf,
    /// The prompt, without the contract section.
    pub prompt: String,
    /// The contract `signals.json` must meet.
    pub contract: Contract,
    /// `--json`.
    pub json: bool,
}

/// How a flow's spawn ended.
pub(crate) struct FlowEnd {
    /// The exit code its outcome comes to.
    pub exit: Exit,
    /// The provider runs and the signals' verdict.
    pub run: ContractRun,
    /// `run.json` as last written.
    pub record: RunRecord,
}

/// Runs `spawn` to its end. Ctrl-C cancels it (the CLI's process tree is ended).
pub(crate) async fn run_flow_spawn(spawn: FlowSpawn<'_>) -> anyhow::Result<FlowEnd> {
    let provider = headless_provider(
        spawn.provider,
        spawn.settings,
        engine_config(spawn.settings),
    )
    .map_err(|e| usage(e.to_string()))?;
    let renderer = Renderer::new(
        Style::choose(spawn.json, false),
        spawn.provider.as_str(),
        false,
    );
    renderer.line(&format!(
        "{} · {} · {}",
        spawn.run_id,
        spawn.provider,
        spawn.dir.display()
    ));
    let cancel = CancellationToken::new();
    let session = AiSession {
        prompt: Arc::from(spawn.prompt.as_str()),
        cold_prompt: None,
        cwd: spawn.cwd.clone(),
        extra_roots: Vec::new(),
        model: spawn.model.clone(),
        effort: None,
        permissions: Permissions::default(),
        resume: None,
        cancel: cancel.clone(),
        signals_file: spawn.dir.join(SIGNALS_FILE),
        output_dir: spawn.dir.clone(),
        max_budget_usd: None,
        max_turns: None,
        cold_fallback: true,
        task: None,
    };
    let running = Spawn::begin(
        SpawnPlan {
            run_id: spawn.run_id.clone(),
            provider: spawn.provider,
            session,
            contract: Some(spawn.contract),
            corrective_retries: spawn.settings.retry.corrective_retries,
            resumed_by: ResumedBy::ItsOwner,
        },
        Arc::new(Hooks {
            renderer: Arc::clone(&renderer),
        }),
    );
    let ticker = renderer.spawn_ticker();
    let mut streams = crate::run::ending_signal_streams();
    let on_signal = {
        let renderer = Arc::clone(&renderer);
        tokio::spawn(async move {
            let name = crate::run::next_ending_signal(&mut streams).await;
            renderer.line(&format!(
                "{name}: cancelling: ending the CLI's process tree"
            ));
            cancel.cancel();
        })
    };
    let observer: Arc<dyn RunObserver> = Arc::new(Observer {
        renderer: Arc::clone(&renderer),
    });
    let end = running
        .run(&*provider, observer, |run| Some(exit_of(run).code()))
        .await;
    on_signal.abort();
    if let Some(t) = ticker {
        t.abort();
    }
    renderer.finish();
    Ok(FlowEnd {
        exit: exit_of(&end.run),
        run: end.run,
        record: end.record,
    })
}

/// The exit code a flow's spawn comes to: as `corral run`'s.
fn exit_of(run: &ContractRun) -> Exit {
    match (&run.result, &run.verdict) {
        (Err(err), _) => Exit::for_error(err),
        (Ok(_), SignalsVerdict::Invalid(_)) => Exit::SignalsInvalid,
        (Ok(_), SignalsVerdict::Valid { .. } | SignalsVerdict::NotChecked) => Exit::Success,
    }
}

/// The first line of a signals error.
pub(crate) fn short_error(e: &SignalsError) -> String {
    e.to_string().lines().next().unwrap_or("").to_string()
}

struct Hooks {
    renderer: Arc<Renderer>,
}

impl SpawnHooks for Hooks {
    fn record_failed(&self, what: &str, error: &std::io::Error) {
        self.renderer
            .line(&format!("warning: cannot write {what}: {error}"));
    }

    fn corrective(&self, error: &SignalsError) {
        self.renderer.line(&format!(
            "signals.json is not acceptable ({}); asking the agent to fix it",
            short_error(error)
        ));
    }
}

struct Observer {
    renderer: Arc<Renderer>,
}

impl RunObserver for Observer {
    fn attempt_started(&self, attempt: u32, resume: Option<&SessionId>) {
        self.renderer.attempt_started(attempt, resume);
    }

    fn event(&self, attempt: u32, event: &AgentEvent) {
        self.renderer.event(attempt, event);
    }

    fn backoff(&self, attempt: u32, wait: std::time::Duration, reason: &str) {
        self.renderer.backoff(attempt, wait, reason);
    }

    fn account_wait(&self, attempt: u32, provider: ProviderId, until: std::time::SystemTime) {
        self.renderer.account_wait(attempt, provider, until);
    }

    fn cold_fallback(&self, _attempt: u32, stale: &SessionId) {
        self.renderer.line(&format!(
            "session {stale} not found: running cold, in a new session"
        ));
    }
}
