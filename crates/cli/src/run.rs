//! `corral run`: one task through one provider, with the signals contract and corrective
//! retries and the run directory's record (compose's `Spawn`, the call a sprint role makes too),
//! Ctrl-C handling, and a summary.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use corral_compose::{
    Contract, ContractRun, Journal, ResumedBy, RunRecord, SignalsError, SignalsVerdict, Spawn,
    SpawnHooks, SpawnPlan, engine_config, headless_provider, now,
};
use corral_ports::run_dir::SIGNALS_FILE;
use corral_ports::{
    AgentEvent, AiSession, CancellationToken, Permissions, ProviderError, ProviderId, RunObserver,
    SessionId,
};
use tokio::signal::unix::{SignalKind, signal};

use crate::args::RunArgs;
use crate::config_cmd::load_settings;
use crate::exit::{Exit, usage};
use crate::json_lines::{RunLine, RunSummary};
use crate::render::{Renderer, Style};
use crate::term::{errln, outln};

/// What a run without a prompt is told, piped or on a terminal.
const NO_PROMPT: &str = "no prompt: give it as an argument, with --prompt-file FILE, or on standard input (piped, or -)";

fn read_prompt(args: &RunArgs) -> anyhow::Result<String> {
    let prompt = match (&args.prompt_file, args.prompt.as_deref()) {
        (Some(file), _) => std::fs::read_to_string(file).map_err(|e| {
            usage(format!(
                "cannot read the prompt file {}: {e}",
                file.display()
            ))
        })?,
        (None, Some("-")) => {
            let mut text = String::new();
            std::io::stdin()
                .read_to_string(&mut text)
                .map_err(|e| usage(format!("cannot read the prompt from standard input: {e}")))?;
            text
        }
        (None, Some(text)) => text.to_string(),
        // A prompt piped in without `-`, as `claude -p` and `codex exec` read it; on a terminal
        // that would wait for typing no one announced, so it is refused instead.
        (None, None) if !std::io::IsTerminal::is_terminal(&std::io::stdin()) => {
            let mut text = String::new();
            std::io::stdin()
                .read_to_string(&mut text)
                .map_err(|e| usage(format!("cannot read the prompt from standard input: {e}")))?;
            if text.trim().is_empty() {
                return Err(usage(NO_PROMPT));
            }
            text
        }
        (None, None) => {
            return Err(usage(NO_PROMPT));
        }
    };
    if prompt.trim().is_empty() {
        let from = match &args.prompt_file {
            Some(f) => format!("the prompt file {}", f.display()),
            None => "the prompt".to_string(),
        };
        return Err(usage(format!("{from} is empty")));
    }
    Ok(prompt)
}

fn resolve_cwd(args: &RunArgs) -> anyhow::Result<PathBuf> {
    let cwd = match &args.cwd {
        Some(dir) => dir.clone(),
        None => std::env::current_dir()?,
    };
    let cwd =
        std::fs::canonicalize(&cwd).map_err(|e| usage(format!("--cwd {}: {e}", cwd.display())))?;
    if !cwd.is_dir() {
        return Err(usage(format!("--cwd {}: not a directory", cwd.display())));
    }
    Ok(cwd)
}

/// The signals that end a run as Ctrl-C does: the user's Ctrl-C, a service manager's or
/// `timeout`'s SIGTERM, a closed terminal's SIGHUP.
const ENDING_SIGNALS: [(SignalKind, &str); 3] = [
    (SignalKind::interrupt(), "interrupt"),
    (SignalKind::terminate(), "SIGTERM"),
    (SignalKind::hangup(), "SIGHUP"),
];

/// Listens for the ending signals (`corral sprint run` ends on the same ones as `corral run`).
pub(crate) fn ending_signal_streams() -> Vec<(tokio::signal::unix::Signal, &'static str)> {
    let mut streams = Vec::new();
    for (kind, name) in ENDING_SIGNALS {
        match signal(kind) {
            Ok(stream) => streams.push((stream, name)),
            Err(e) => tracing::warn!(signal = name, error = %e, "cannot listen for the signal"),
        }
    }
    streams
}

/// Waits for the next of the ending signals and names it; never returns when none could be
/// listened to.
pub(crate) async fn next_ending_signal(
    streams: &mut [(tokio::signal::unix::Signal, &'static str)],
) -> &'static str {
    if streams.is_empty() {
        return std::future::pending().await;
    }
    let waits = streams.iter_mut().map(|(stream, name)| {
        let name = *name;
        Box::pin(async move {
            stream.recv().await;
            name
        })
    });
    futures_select_first(waits).await
}

/// The first of `futures` to finish.
async fn futures_select_first<F: std::future::Future<Output = &'static str> + Unpin>(
    futures: impl Iterator<Item = F>,
) -> &'static str {
    let mut futures: Vec<F> = futures.collect();
    std::future::poll_fn(move |cx| {
        for future in &mut futures {
            if let std::task::Poll::Ready(name) = std::pin::Pin::new(future).poll(cx) {
                return std::task::Poll::Ready(name);
            }
        }
        std::task::Poll::Pending
    })
    .await
}

/// The first ending signal cancels the run: the engine ends the CLI's process tree, and the run
/// ends the usual way, record and summary included. A second one ends corral at once: every
/// process group it started is killed first (`PR_SET_PDEATHSIG` alone reaches only each group's
/// leader), and the record is finished with what is known.
fn install_signal_handlers(
    cancel: CancellationToken,
    renderer: Arc<Renderer>,
    journal: Arc<Journal>,
    started: Instant,
) {
    let mut streams = ending_signal_streams();
    tokio::spawn(async move {
        let first = next_ending_signal(&mut streams).await;
        renderer.line(&format!(
            "{first}: cancelling: ending the CLI's process tree (again to stop corral at once)"
        ));
        cancel.cancel();
        let second = next_ending_signal(&mut streams).await;
        let groups = corral_compose::kill_child_groups();
        let error = format!(
            "corral was stopped by a second {second}; the CLI's process groups were killed ({groups})"
        );
        let written = journal.update(|record| {
            record.finished_at = Some(now());
            record.outcome = "cancelled".into();
            record.exit_code = Some(Exit::Cancelled.code());
            record.duration_ms =
                Some(u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX));
            record.error = Some(error.clone());
        });
        renderer.finish();
        let record = journal.snapshot();
        errln!("");
        errln!("stopped   {error}");
        errln!("session   {}", record.session_id.as_deref().unwrap_or("-"));
        if let Some(cmd) = crate::runs::resume_hint(&record) {
            errln!("resume    {cmd}");
        }
        errln!("run dir   {}", journal.dir().display());
        if let Err(e) = written {
            errln!("warning   cannot write run.json: {e}");
        }
        std::process::exit(i32::from(Exit::Cancelled.code()));
    });
}

/// Forwards a run's events to the renderer (compose's spawn keeps `run.json` up to date);
/// `corral run`'s and the sprint life's flows' (`sprint_life::spawn`).
pub(crate) struct RendererObserver {
    pub(crate) renderer: Arc<Renderer>,
    /// Whether the command has `--no-cold-fallback`, which the cold-fallback line then names.
    pub(crate) names_no_cold_fallback: bool,
}

impl RunObserver for RendererObserver {
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

    fn cli_retry_wait(
        &self,
        attempt: u32,
        provider: ProviderId,
        status: u16,
        until: std::time::SystemTime,
    ) {
        self.renderer
            .cli_retry_wait(attempt, provider, status, until);
    }

    fn cold_fallback(&self, _attempt: u32, stale: &SessionId) {
        let hint = if self.names_no_cold_fallback {
            " (--no-cold-fallback makes this an error)"
        } else {
            ""
        };
        self.renderer.line(&format!(
            "session {stale} not found: running the task cold, in a new session{hint}"
        ));
    }
}

/// What the terminal shows of a spawn besides its events: records that could not be written,
/// and corrective retries; `corral run`'s and the sprint life's flows'.
pub(crate) struct RendererHooks {
    pub(crate) renderer: Arc<Renderer>,
}

impl SpawnHooks for RendererHooks {
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

/// What `--continue` and `corral resume` take from an earlier run's record.
struct Resumed {
    run_id: String,
    provider: ProviderId,
    cwd: PathBuf,
    session: String,
}

/// What the agent is told when `--continue` or `corral resume` is given no prompt.
const CONTINUE_PROMPT: &str = "Continue the task from where you stopped.";

/// The run in `dir` as something to resume: `None` when it recorded no session. The session
/// and the directory it was made in come from `session.json` when it is there (a Claude session
/// resumes only from its own directory), else from `run.json`. `session.json` names the session
/// `sessionId`; files written before the one key casing name it `session_id`, and still read.
fn resumable(dir: &Path) -> anyhow::Result<Option<Resumed>> {
    let record =
        corral_compose::read_record(dir).map_err(|e| usage(format!("{}: {e:#}", dir.display())))?;
    let meta: Option<serde_json::Value> =
        std::fs::read(dir.join(corral_ports::run_dir::SESSION_META_FILE))
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok());
    let field = |name: &str| {
        meta.as_ref()
            .and_then(|m| m.get(name))
            .and_then(|v| v.as_str())
            .map(str::to_string)
    };
    let Some(session) = field("sessionId")
        .or_else(|| field("session_id"))
        .or(record.session_id)
    else {
        return Ok(None);
    };
    Ok(Some(Resumed {
        run_id: record.run_id,
        provider: record.provider,
        cwd: field("cwd").map_or(record.cwd, PathBuf::from),
        session,
    }))
}

/// Where runs of the project that `args` runs in are recorded.
fn runs_root_for(args: &RunArgs) -> anyhow::Result<PathBuf> {
    let cwd = resolve_cwd(args)?;
    Ok(load_settings(&cwd, setting_flags(args))?.runs_root())
}

/// The latest run under the project's runs directory that recorded a session.
fn latest_resumable(args: &RunArgs) -> anyhow::Result<Resumed> {
    let root = runs_root_for(args)?;
    for dir in crate::runs::run_dirs(&root) {
        // A run whose record cannot be read is passed over: --continue means the latest one
        // that can be continued.
        match resumable(&dir) {
            Ok(Some(found)) => return Ok(found),
            Ok(None) => {}
            Err(e) => tracing::warn!(dir = %dir.display(), error = %e, "run record unreadable"),
        }
    }
    Err(usage(format!(
        "--continue: no run under {} recorded a session to resume",
        root.display()
    )))
}

/// Points `args` at `from`'s session, provider and working directory.
fn resume_from(args: &mut RunArgs, from: &Resumed) -> anyhow::Result<()> {
    if let Some(asked) = args.provider
        && asked != from.provider
    {
        return Err(usage(format!(
            "run {} was made with {}, so its session cannot be resumed with --provider {asked}",
            from.run_id, from.provider
        )));
    }
    args.provider = Some(from.provider);
    args.cwd = Some(from.cwd.clone());
    args.resume = Some(from.session.clone());
    if args.prompt.is_none() && args.prompt_file.is_none() {
        args.prompt = Some(CONTINUE_PROMPT.to_string());
    }
    Ok(())
}

/// Runs `corral run`.
pub async fn run(mut args: RunArgs) -> anyhow::Result<Exit> {
    let from = if args.continue_latest {
        let from = latest_resumable(&args)?;
        resume_from(&mut args, &from)?;
        Some(from)
    } else {
        None
    };
    run_task(args, from.as_ref()).await
}

/// Runs `corral resume`.
pub async fn resume(args: crate::args::ResumeArgs) -> anyhow::Result<Exit> {
    let mut run = args.run;
    if run.resume.is_some() || run.continue_latest {
        return Err(usage(
            "corral resume takes the session from the run's record: drop --resume and --continue",
        ));
    }
    let dir = crate::runs::find_run(&runs_root_for(&run)?, &args.run_id)?;
    let Some(from) = resumable(&dir)? else {
        return Err(usage(format!(
            "run {} recorded no session to resume",
            args.run_id
        )));
    };
    resume_from(&mut run, &from)?;
    run_task(run, Some(&from)).await
}

/// Runs one task: `from` is the earlier run it resumes, when `--continue` or `corral resume`
/// found one.
async fn run_task(args: RunArgs, from: Option<&Resumed>) -> anyhow::Result<Exit> {
    let cwd = resolve_cwd(&args)?;
    let loaded = load_settings(&cwd, setting_flags(&args))?;
    let settings = &loaded.settings;
    let provider_id = settings.run.provider;
    let user_prompt = read_prompt(&args)?;
    let resume = args
        .resume
        .as_deref()
        .map(|id| SessionId::new(id).map_err(|e| usage(format!("--resume {id:?}: {e}"))))
        .transpose()?;
    let model = args
        .model
        .clone()
        .or_else(|| settings.providers.get(provider_id).model.clone());

    let extra_roots = extra_roots(&args.add_dir)?;
    if let Some(budget) = args.max_budget_usd
        && !(budget.is_finite() && budget > 0.0)
    {
        return Err(usage(format!(
            "--max-budget-usd {budget}: must be a positive number of dollars"
        )));
    }
    let permissions = if args.read_only {
        Permissions {
            edit_files: false,
            run_shell: false,
            web_access: true,
        }
    } else {
        Permissions::default()
    };
    let provider = headless_provider(provider_id, settings, engine_config(settings))
        .map_err(|e| usage(e.to_string()))?;
    if args.preflight
        && !crate::preflight::before_a_run(
            provider_id,
            model.clone(),
            args.model.is_some(),
            settings,
            &cwd,
            &loaded.project_root,
        )
        .await
    {
        return Ok(Exit::Unavailable);
    }

    let (run_id, run_dir) = loaded.create_run_dir(provider_id).map_err(|e| {
        anyhow::anyhow!(
            "cannot create a run directory under {}: {e}",
            loaded.runs_root().display()
        )
    })?;
    tracing::info!(
        %run_id,
        provider = provider_id.as_str(),
        cwd = %cwd.display(),
        project_root = %loaded.project_root.display(),
        sandbox = ?settings.sandbox.backend,
        network = ?settings.sandbox.network,
        "starting the run"
    );
    let renderer = run_renderer(&args, provider_id);
    renderer.line(&format!(
        "run {run_id} · {provider_id} · {}",
        run_dir.display()
    ));
    if let Some(from) = from {
        renderer.line(&format!(
            "resuming session {} of run {} in {}",
            from.session,
            from.run_id,
            from.cwd.display()
        ));
    }
    let cancel = CancellationToken::new();
    let session = AiSession {
        prompt: Arc::from(user_prompt.as_str()),
        cold_prompt: None,
        cwd: cwd.clone(),
        extra_roots,
        model,
        effort: None,
        permissions,
        resume,
        cancel: cancel.clone(),
        signals_file: run_dir.join(SIGNALS_FILE),
        output_dir: run_dir.clone(),
        max_budget_usd: args.max_budget_usd,
        max_turns: args.max_turns,
        cold_fallback: !args.no_cold_fallback,
        task: None,
    };
    // From here on, nothing the disk does ends the run without its summary: a record that
    // cannot be written is reported, and the run goes on.
    let spawn = Spawn::begin(
        SpawnPlan {
            run_id,
            provider: provider_id,
            session,
            contract: (!args.no_contract).then(Contract::generator),
            corrective_retries: settings.retry.corrective_retries,
            resumed_by: ResumedBy::CorralResume,
        },
        Arc::new(RendererHooks {
            renderer: Arc::clone(&renderer),
        }),
    );

    let ticker = renderer.spawn_ticker();
    install_signal_handlers(
        cancel,
        Arc::clone(&renderer),
        Arc::clone(spawn.journal()),
        spawn.started(),
    );
    let observer: Arc<dyn RunObserver> = Arc::new(RendererObserver {
        names_no_cold_fallback: true,
        renderer: Arc::clone(&renderer),
    });
    let end = spawn
        .run(&*provider, observer, |run| {
            Some(Ending::exit_of(run).code())
        })
        .await;
    if let Some(t) = ticker {
        t.abort();
    }
    renderer.finish();

    let ending = Ending::new(end.run);
    let record = end.record;
    if let Some(file) = &args.output_last_message {
        write_answer(&renderer, file, record.result.as_deref());
    }
    if renderer.style() != Style::Json
        && record.refused_before_start()
        && let Some(err) = ending.run.result.as_ref().err()
    {
        print_refusal(err, settings, &run_dir);
        return Ok(ending.exit);
    }
    print_summary(
        &renderer,
        &record,
        &run_dir,
        ending.exit,
        ending.run.result.as_ref().err(),
        &ending.run.verdict,
        end.record_error,
    );
    Ok(ending.exit)
}

/// How the run is shown: the style its flags and stderr choose; a live view leaves the final
/// answer to stdout when stdout is a terminal too, so that it is shown once.
fn run_renderer(args: &RunArgs, provider: ProviderId) -> Arc<Renderer> {
    Renderer::new(
        Style::choose(args.json, args.quiet),
        provider.as_str(),
        std::io::IsTerminal::is_terminal(&std::io::stdout()),
    )
}

/// A run refused before its CLI started has no summary worth a screen (no session, no usage, no
/// cost): the refusal goes to stderr, as any error does, with the fix and where its record is;
/// stdout stays empty for a script that reads the answer from it.
fn print_refusal(err: &ProviderError, settings: &corral_compose::Settings, run_dir: &Path) {
    errln!("error: {err}");
    if let ProviderError::CliNotFound { provider, .. } = err {
        let package = corral_compose::provider_facts(*provider, settings).npm_package;
        errln!("  install: npm install -g {package}");
    }
    errln!("record: {}", run_dir.display());
}

/// The settings `corral run`'s flags set, as the highest settings layer.
fn setting_flags(args: &RunArgs) -> Vec<(String, serde_json::Value)> {
    let mut flags = Vec::new();
    if let Some(p) = args.provider {
        flags.push(("run.provider".to_string(), serde_json::json!(p.as_str())));
    }
    if let Some(backend) = &args.sandbox {
        flags.push(("sandbox.backend".to_string(), serde_json::json!(backend)));
    }
    if args.allow_degraded_native {
        flags.push((
            "sandbox.allow_degraded_native".to_string(),
            serde_json::json!(true),
        ));
    }
    if let Some(network) = &args.network {
        flags.push(("sandbox.network".to_string(), serde_json::json!(network)));
    }
    if !args.allow_net.is_empty() {
        flags.push((
            "sandbox.network_allow".to_string(),
            serde_json::json!(args.allow_net),
        ));
    }
    let ms = |d: &std::time::Duration| {
        serde_json::json!(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    };
    if let Some(d) = &args.timeout {
        flags.push(("run.wall_timeout_ms".to_string(), ms(d)));
    }
    if let Some(d) = &args.idle_timeout {
        flags.push(("run.idle_watchdog_ms".to_string(), ms(d)));
    }
    flags
}

/// How one `corral run` ended: the provider runs and the exit code they come to.
struct Ending {
    exit: Exit,
    run: ContractRun,
}

impl Ending {
    fn new(run: ContractRun) -> Self {
        Ending {
            exit: Ending::exit_of(&run),
            run,
        }
    }

    /// The exit code the provider runs come to.
    fn exit_of(run: &ContractRun) -> Exit {
        match (&run.result, &run.verdict) {
            (Err(err), _) => Exit::for_error(err),
            (Ok(_), SignalsVerdict::Invalid(_)) => Exit::SignalsInvalid,
            (
                Ok(_),
                SignalsVerdict::Valid {
                    blocked: Some(_), ..
                },
            ) => Exit::Blocked,
            (Ok(_), SignalsVerdict::Valid { blocked: None, .. } | SignalsVerdict::NotChecked) => {
                Exit::Success
            }
        }
    }
}

/// Writes the final answer to the `-o` file (empty when the agent gave none, so a script never
/// reads a stale one); a file that cannot be written is reported, and the run's outcome stands.
fn write_answer(renderer: &Renderer, file: &Path, answer: Option<&str>) {
    let mut text = answer.unwrap_or("").to_string();
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    if let Err(e) = std::fs::write(file, text) {
        renderer.line(&format!("warning: cannot write {}: {e}", file.display()));
    }
}

/// The `--add-dir` directories, resolved; each must be an existing directory.
fn extra_roots(dirs: &[PathBuf]) -> anyhow::Result<Vec<PathBuf>> {
    dirs.iter()
        .map(|dir| {
            let resolved = std::fs::canonicalize(dir)
                .map_err(|e| usage(format!("--add-dir {}: {e}", dir.display())))?;
            if !resolved.is_dir() {
                return Err(usage(format!(
                    "--add-dir {}: not a directory",
                    dir.display()
                )));
            }
            Ok(resolved)
        })
        .collect()
}

pub(crate) fn short_error(e: &SignalsError) -> String {
    let text = e.to_string();
    text.lines().next().unwrap_or("").to_string()
}

fn print_summary(
    renderer: &Renderer,
    record: &RunRecord,
    run_dir: &Path,
    exit: Exit,
    error: Option<&ProviderError>,
    verdict: &SignalsVerdict,
    record_error: Option<std::io::Error>,
) {
    let strays: &[String] = record
        .attestation
        .as_ref()
        .map_or(&[], |a| a.stray_writes.as_slice());
    // An empty list says "clean" only when the check ran.
    let not_checked: Option<String> = match &record.attestation {
        Some(a) => match a.stray_check {
            corral_ports::StrayCheck::Checked => None,
            corral_ports::StrayCheck::NotChecked => Some(
                a.stray_check_why
                    .clone()
                    .unwrap_or_else(|| "not recorded".to_string()),
            ),
        },
        None => Some("no sandbox was planned".to_string()),
    };
    let record_error = record_error.map(|e| format!("cannot write run.json: {e}"));
    if renderer.style() == Style::Json {
        let stray_check = if not_checked.is_some() {
            corral_ports::StrayCheck::NotChecked
        } else {
            corral_ports::StrayCheck::Checked
        };
        renderer.json(&RunLine::Summary(Box::new(RunSummary {
            outcome: &record.outcome,
            exit_code: exit.code(),
            session_id: record.session_id.as_deref(),
            run_dir,
            signals_valid: record.signals_valid,
            signal_kinds: &record.signal_kinds,
            usage: &record.usage,
            cost_usd: record.usage.cost_usd,
            attempts: record.attempts,
            error: record.error.as_deref(),
            result: record.result.as_deref(),
            resume_command: crate::runs::resume_hint(record),
            cold_fallback_from: record.cold_fallback_from.as_deref(),
            limit_exceeded: record.limit_exceeded.as_ref(),
            stray_writes: if not_checked.is_some() {
                None
            } else {
                Some(strays)
            },
            stray_check,
            stray_check_why: not_checked,
            record_error,
        })));
        return;
    }
    // The answer alone on stdout, as `claude -p` and `codex exec` print it, so that
    // `$(corral run "…")` is the answer; the summary goes to stderr with the progress.
    if let Some(answer) = record.result.as_deref().map(str::trim_end)
        && !answer.is_empty()
    {
        outln!("{answer}");
    }
    // `-q`: the answer alone when all went well; what went wrong is still said.
    if renderer.style() == Style::Quiet && exit == Exit::Success {
        return;
    }
    let u = &record.usage;
    let n = |v: Option<u64>| v.map_or("-".to_string(), |v| v.to_string());
    errln!("outcome   {} (exit {})", record.outcome, exit.code());
    if let Some(err) = error {
        errln!("error     {err}");
    }
    match verdict {
        SignalsVerdict::NotChecked => errln!("signals   not checked"),
        SignalsVerdict::Valid { kinds, blocked, .. } => {
            errln!("signals   valid: {}", kinds.join(", "));
            if let Some(reason) = blocked {
                errln!("blocked   {reason}");
            }
        }
        SignalsVerdict::Invalid(e) => errln!("signals   invalid: {}", short_error(e)),
    }
    errln!("session   {}", record.session_id.as_deref().unwrap_or("-"));
    if let Some(stale) = &record.cold_fallback_from {
        errln!("resumed   no: session {stale} was not found; the task ran cold, in a new session");
    }
    errln!(
        "usage     in {} out {} cache read {} write {}",
        n(u.input),
        n(u.output),
        n(u.cache_read),
        n(u.cache_write)
    );
    errln!(
        "cost      {}",
        u.cost_usd.map_or("-".to_string(), |c| format!("${c:.4}"))
    );
    errln!("attempts  {}", record.attempts);
    for stray in strays {
        errln!("stray     {}", crate::term::one_line(stray));
    }
    if let Some(why) = &not_checked
        && record.attestation.is_some()
    {
        errln!("strays    not checked: {}", crate::term::one_line(why));
    }
    errln!("run dir   {}", run_dir.display());
    if let Some(e) = &record_error {
        errln!("warning   {e}");
    }
    if exit != Exit::Success
        && let Some(cmd) = crate::runs::resume_hint(record)
    {
        errln!("resume    {cmd}");
    }
}
