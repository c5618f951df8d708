//! One agent spawn of a life flow: `corral run`'s path (compose's `Spawn`: the contract section
//! appended to the prompt, `signals.json` validated, the corrective loop on the resumed
//! session, `run.json` kept) in the flow's own directory of the sprint's record, shown on the
//! terminal as a run is.

use std::path::PathBuf;
use std::sync::Arc;

use corral_compose::{
    Contract, ContractRun, ResumedBy, RunRecord, Settings, SignalsVerdict, Spawn, SpawnPlan,
    engine_config, headless_provider,
};
use corral_ports::run_dir::SIGNALS_FILE;
use corral_ports::{AiSession, CancellationToken, Permissions, ProviderId, RunObserver};

use crate::exit::{Exit, usage};
use crate::render::{Renderer, Style};
use crate::term::errln;

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
    /// The session of this directory's spawn that was cut short, resumed instead of a new one
    /// (from [`next_flow_dir`]).
    pub crashed: Option<corral_ports::SessionId>,
}

/// The directory for `flow`'s next spawn, and the session to resume there: the last spawn's
/// directory again when it was cut short with a session this provider, model and project may
/// resume (as the implement chain resumes a round), else a new directory beside it.
pub(crate) fn next_flow_dir(
    layout: &corral_sprint::SprintLayout,
    flow: &str,
    provider: ProviderId,
    model: Option<&str>,
    cwd: &std::path::Path,
) -> Result<(PathBuf, Option<corral_ports::SessionId>), corral_sprint::life::LifeError> {
    if let Some((dir, session)) =
        corral_sprint::life::unfinished_flow_spawn(layout, flow, provider, model, cwd)
    {
        tracing::info!(dir = %dir.display(), %session, "resuming the flow's cut-short spawn");
        return Ok((dir, Some(session)));
    }
    Ok((corral_sprint::life::flow_spawn_dir(layout, flow)?, None))
}

/// What a spawn that resumes a cut-short one is told: the whole task is its cold prompt.
const CRASH_RESUME_PROMPT: &str = "Your previous run of this task was interrupted before it \
finished. Carry on from where you stopped and finish the task: write the signals file as the \
task asks, in full.";

/// How a flow's spawn ended.
pub(crate) struct FlowEnd {
    /// The exit code its outcome comes to.
    pub exit: Exit,
    /// The provider runs and the signals' verdict.
    pub run: ContractRun,
    /// `run.json` as last written.
    pub record: RunRecord,
}

impl FlowEnd {
    /// The signals the agent wrote, when they satisfied the flow's contract; else `None`, once
    /// `flow` has said why on stderr (`document`: what the agent was to write, "task plan").
    /// The caller then says what it left as it was and exits with [`FlowEnd::exit`].
    pub(crate) fn valid_signals(
        &self,
        flow: &str,
        document: &str,
    ) -> Option<&[corral_sprint::life::Signal]> {
        match &self.run.verdict {
            SignalsVerdict::Valid { signals, .. } => Some(signals),
            SignalsVerdict::Invalid(e) => {
                errln!(
                    "{flow}: the agent's {document} is not valid after its corrective retries: {}",
                    short_error(e)
                );
                None
            }
            SignalsVerdict::NotChecked => {
                if let Err(e) = &self.run.result {
                    errln!("{flow}: the agent did not finish: {e}");
                }
                None
            }
        }
    }
}

/// Runs `spawn` to its end. Ctrl-C cancels it (the CLI's process tree is ended).
pub(crate) async fn run_flow_spawn(spawn: FlowSpawn<'_>) -> anyhow::Result<FlowEnd> {
    run_spawn(spawn, None).await
}

/// What a flow's spawn resumes: a session that ran before it outside a spawn (an interactive
/// handoff), with `spawn.prompt` as the message to it.
pub(crate) struct Resumed {
    /// The session.
    pub session: corral_ports::SessionId,
    /// The whole task, for a new session should this one be gone.
    pub cold_prompt: String,
    /// Corrective retries left after this spawn's first run.
    pub corrective_retries: u32,
}

/// [`run_flow_spawn`], resuming `resumed`'s session.
pub(crate) async fn run_resumed_flow_spawn(
    spawn: FlowSpawn<'_>,
    resumed: Resumed,
) -> anyhow::Result<FlowEnd> {
    run_spawn(spawn, Some(resumed)).await
}

async fn run_spawn(mut spawn: FlowSpawn<'_>, resumed: Option<Resumed>) -> anyhow::Result<FlowEnd> {
    // A cut-short spawn's session resumed with a note, the whole task kept for a new session
    // should that one be gone.
    let crashed = spawn.crashed.is_some() && resumed.is_none();
    let resumed = match (resumed, spawn.crashed.take()) {
        (Some(r), _) => Some(r),
        (None, Some(session)) => Some(Resumed {
            session,
            cold_prompt: std::mem::replace(&mut spawn.prompt, CRASH_RESUME_PROMPT.to_owned()),
            corrective_retries: spawn.settings.retry.corrective_retries,
        }),
        (None, None) => None,
    };
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
    if crashed {
        renderer.line("resuming the session of this flow's spawn that was cut short");
    }
    let cancel = CancellationToken::new();
    let corrective_retries = resumed
        .as_ref()
        .map_or(spawn.settings.retry.corrective_retries, |r| {
            r.corrective_retries
        });
    let (resume, cold_prompt) = match resumed {
        Some(r) => (Some(r.session), Some(Arc::from(r.cold_prompt.as_str()))),
        None => (None, None),
    };
    let session = AiSession {
        prompt: Arc::from(spawn.prompt.as_str()),
        cold_prompt,
        cwd: spawn.cwd.clone(),
        extra_roots: Vec::new(),
        model: spawn.model.clone(),
        effort: None,
        permissions: Permissions::default(),
        resume,
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
            corrective_retries,
            resumed_by: ResumedBy::ItsOwner,
        },
        Arc::new(crate::run::RendererHooks {
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
    let observer: Arc<dyn RunObserver> = Arc::new(crate::run::RendererObserver {
        renderer: Arc::clone(&renderer),
        names_no_cold_fallback: false,
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

pub(crate) use crate::run::short_error;

/// A flow spawn's run id: the flow and its numbered directory (`plan-3`).
pub(crate) fn flow_run_id(flow: &str, dir: &std::path::Path) -> String {
    format!(
        "{flow}-{}",
        dir.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    )
}
