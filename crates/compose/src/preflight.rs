//! The preflight's cheap request: one short prompt through a role's CLI, on the same engine path
//! and sandbox a real spawn of that role takes, to prove before any real work that the CLI
//! starts, its login is accepted, its model answers and (for a read-only role) the sandbox keeps
//! the work tree read-only.
//!
//! What to ask, which roles to ask and how to show the answers is the binary's (`corral`'s
//! `preflight` module); this module only builds the provider as [`crate::role_agent()`] does and
//! runs the one request.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use corral_engine::EngineConfig;
use corral_ports::{
    AiSession, CancellationToken, Effort, Guarantee, NoopObserver, Permissions, ProviderError,
    ProviderId, Usage,
};

use crate::factory::{ComposeError, headless_provider};
use crate::role_agent::read_only_settings;
use crate::settings::Settings;
use crate::spawn::{NoHooks, Spawn, SpawnPlan};

/// The words that open every preflight prompt. The fake model API of the tests answers a request
/// holding them itself, as a real model would, without taking a step of a test's script.
pub const PREFLIGHT_PROMPT_OPENING: &str = "Corral preflight check";

/// The most model turns a preflight request may take, where the CLI enforces a cap: two, since a
/// CLI that gets its prompt through a pointer file spends one turn reading it.
const PREFLIGHT_MAX_TURNS: u32 = 2;

/// One cheap request to ask.
#[derive(Debug, Clone)]
pub struct CheapRequest<'a> {
    /// The CLI to ask.
    pub provider: ProviderId,
    /// The model, in the provider's spelling; `None`: the CLI's default.
    pub model: Option<String>,
    /// The reasoning effort of the role, as a real spawn would pass it.
    pub effort: Option<Effort>,
    /// Whether the role runs read-only (an evaluator): then the request runs on the strict
    /// engine a read-only spawn runs on, and must come back attested `repo-read-only`.
    pub read_only: bool,
    /// The directory the CLI runs in: the preflight gives it a scratch directory inside the
    /// project (see `corral-cli`'s preflight), so that what the CLI writes stays out of the tree.
    pub work_tree: &'a Path,
    /// Where the request's record goes (`prompt.md`, `run.json`, `events.jsonl`); created, and
    /// emptied first.
    pub dir: PathBuf,
}

/// What the cheap request came to.
#[derive(Debug)]
pub struct CheapAnswer {
    /// The provider run's end: its error, or what it cost.
    pub result: Result<CheapOk, ProviderError>,
    /// From the start of the request to its end, the CLI's start-up included.
    pub wall: Duration,
}

/// A request the CLI answered.
#[derive(Debug, Clone)]
pub struct CheapOk {
    /// Tokens and cost, as the CLI reported them.
    pub usage: Usage,
    /// For a read-only request: whether the sandbox attested the work tree read-only (always
    /// true for a writable one).
    pub read_only_held: bool,
}

/// The prompt of a preflight request written to `dir`: it names its directory, which is where a
/// CLI that reads its prompt from a file finds it.
fn prompt(dir: &Path) -> String {
    format!(
        "{PREFLIGHT_PROMPT_OPENING} ({}): reply with the single word OK. Use no tools and change nothing.",
        dir.display()
    )
}

/// The settings of a preflight request: one request, no retries. Claude Code retries even a
/// refused login (401) on its own for as many retries as it is left
/// (`providers.claude.max_internal_retries`), which would only delay the answer.
fn one_request_settings(id: ProviderId, settings: &Settings) -> Settings {
    let mut settings = settings.clone();
    // A comparison, not a match over every provider, as in `read_only_settings`: only Claude
    // Code's own retries are a setting of Corral's.
    if id == ProviderId::Claude {
        settings.providers.claude.max_internal_retries = Some(0);
    }
    settings
}

/// Runs one cheap request through `request.provider`, built from `settings` on an engine
/// configured by `config` exactly as a sprint role's spawn is (see [`crate::role_agent()`]).
/// A provider that cannot be built is the error; a run that fails is in the answer.
pub async fn cheap_request(
    request: CheapRequest<'_>,
    settings: &Settings,
    config: EngineConfig,
    cancel: CancellationToken,
) -> Result<CheapAnswer, ComposeError> {
    let id = request.provider;
    let settings = &one_request_settings(id, settings);
    let provider = if request.read_only {
        let mut strict = config;
        strict.sandbox.allow_degraded_native = false;
        headless_provider(id, &read_only_settings(id, settings), strict)?
    } else {
        headless_provider(id, settings, config)?
    };
    // Last time's record would be mistaken for this one's.
    let _ = std::fs::remove_dir_all(&request.dir);
    if let Err(e) = std::fs::create_dir_all(&request.dir) {
        return Ok(CheapAnswer {
            result: Err(ProviderError::Io {
                provider: id,
                path: request.dir.clone(),
                reason: e.to_string(),
            }),
            wall: Duration::ZERO,
        });
    }
    let session = |max_turns| AiSession {
        prompt: Arc::from(prompt(&request.dir).as_str()),
        cold_prompt: None,
        cwd: request.work_tree.to_path_buf(),
        extra_roots: Vec::new(),
        model: request.model.clone(),
        effort: request.effort,
        permissions: Permissions {
            edit_files: !request.read_only,
            ..Permissions::default()
        },
        resume: None,
        cancel: cancel.clone(),
        signals_file: request.dir.join(corral_ports::run_dir::SIGNALS_FILE),
        output_dir: request.dir.clone(),
        max_budget_usd: None,
        max_turns,
        cold_fallback: false,
        task: None,
    };
    let plan = |max_turns| SpawnPlan {
        run_id: format!("preflight-{id}"),
        provider: id,
        session: session(max_turns),
        contract: None,
        corrective_retries: 0,
        resumed_by: crate::ResumedBy::ItsOwner,
    };
    let started = Instant::now();
    let mut end = Spawn::begin(plan(Some(PREFLIGHT_MAX_TURNS)), Arc::new(NoHooks))
        .run(&*provider, Arc::new(NoopObserver), |_| None)
        .await;
    // A CLI with no turn cap refuses the session before it starts anything: ask it uncapped
    // (the one-word prompt bounds it).
    if matches!(end.run.result, Err(ProviderError::InvalidSession { .. })) {
        end = Spawn::begin(plan(None), Arc::new(NoHooks))
            .run(&*provider, Arc::new(NoopObserver), |_| None)
            .await;
    }
    let wall = started.elapsed();
    let result = end.run.result.map(|out| CheapOk {
        usage: end.run.usage,
        read_only_held: !request.read_only
            || out
                .attestation
                .as_ref()
                .is_some_and(|a| a.enforced.contains(&Guarantee::RepoReadOnly)),
    });
    Ok(CheapAnswer { result, wall })
}
