//! `corral run`: one task through one provider, with the signals contract and corrective
//! retries (compose's `run_with_contract`), Ctrl-C handling, the run directory, and a summary.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use corral_compose::{
    Contract, ContractPolicy, ContractRun, Journal, RunRecord, SignalsError, SignalsVerdict,
    Supervisor, engine_config, headless_provider, now, render_contract_section, run_with_contract,
};
use corral_ports::run_dir::{PROMPT_FILE, SIGNALS_FILE};
use corral_ports::{
    AgentEvent, AiSession, CancellationToken, Permissions, ProviderError, ProviderId, RunObserver,
    SessionId, Usage,
};
use tokio::signal::unix::{SignalKind, signal};

use crate::args::RunArgs;
use crate::config_cmd::load_settings;
use crate::exit::{Exit, usage};
use crate::render::{Renderer, Style};
use crate::term::{errln, outln};

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
        (None, None) => {
            return Err(usage(
                "no prompt: give it as an argument, with --prompt-file FILE, or as - to read stdin",
            ));
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
        if let Some(cmd) = &record.resume_command {
            errln!("resume    {cmd}");
        }
        errln!("run dir   {}", journal.dir().display());
        if let Err(e) = written {
            errln!("warning   cannot write run.json: {e}");
        }
        std::process::exit(i32::from(Exit::Cancelled.code()));
    });
}

/// Forwards to the renderer, and writes a session id into `run.json` the moment it is seen: a
/// supervisor that is killed outright still leaves it there.
struct RecordingObserver {
    renderer: Arc<Renderer>,
    journal: Arc<Journal>,
    provider: ProviderId,
    cwd: PathBuf,
}

impl RunObserver for RecordingObserver {
    fn attempt_started(&self, attempt: u32, resume: Option<&SessionId>) {
        self.renderer.attempt_started(attempt, resume);
    }

    fn event(&self, attempt: u32, event: &AgentEvent) {
        if let AgentEvent::SessionStarted { session_id, .. } = event
            && self.journal.snapshot().session_id.as_deref() != Some(session_id.as_str())
        {
            let written = self.journal.update(|record| {
                record.session_id = Some(session_id.to_string());
                record.resume_command = Some(resume_command(self.provider, &self.cwd, session_id));
            });
            if let Err(e) = written {
                self.renderer
                    .line(&format!("warning: cannot write run.json: {e}"));
            }
        }
        self.renderer.event(attempt, event);
    }

    fn backoff(&self, attempt: u32, wait: std::time::Duration, reason: &str) {
        self.renderer.backoff(attempt, wait, reason);
    }

    fn cold_fallback(&self, _attempt: u32, stale: &SessionId) {
        self.renderer.line(&format!(
            "session {stale} not found: running the task cold, in a new session \
             (--no-cold-fallback makes this an error)"
        ));
        let written = self.journal.update(|record| {
            record.cold_fallback_from = Some(stale.to_string());
        });
        if let Err(e) = written {
            self.renderer
                .line(&format!("warning: cannot write run.json: {e}"));
        }
    }
}

fn resume_command(provider: ProviderId, cwd: &Path, session: &SessionId) -> String {
    format!(
        "corral run --provider {provider} --cwd {} --resume {session} \"continue where you stopped\"",
        shell_quote(&cwd.display().to_string())
    )
}

fn shell_quote(s: &str) -> String {
    if s.chars()
        .all(|c| c.is_ascii_alphanumeric() || "/._-".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
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
/// resumes only from its own directory), else from `run.json`.
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
    let Some(session) = field("session_id").or(record.session_id) else {
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

    let (run_id, run_dir) = loaded.create_run_dir(provider_id).map_err(|e| {
        anyhow::anyhow!(
            "cannot create a run directory under {}: {e}",
            loaded.runs_root().display()
        )
    })?;
    let signals_file = run_dir.join(SIGNALS_FILE);
    let contract = Contract::generator();
    let full_prompt = if args.no_contract {
        user_prompt
    } else {
        format!(
            "{}\n\n{}",
            user_prompt.trim_end(),
            render_contract_section(&contract, &signals_file)
        )
    };

    let renderer = Renderer::new(Style::choose(args.json, args.quiet), provider_id.as_str());
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
    // From here on, nothing the disk does ends the run without its summary: a record that
    // cannot be written is reported, and the run goes on.
    if let Err(e) =
        corral_compose::write_record_file(&run_dir.join(PROMPT_FILE), full_prompt.as_bytes())
    {
        renderer.line(&format!("warning: cannot write prompt.md: {e}"));
    }
    let record = first_record(run_id, provider_id, model.clone(), &cwd, resume.as_ref());
    let journal = Arc::new(Journal::new(run_dir.clone(), record));
    if let Err(e) = journal.update(|_| {}) {
        renderer.line(&format!("warning: cannot write run.json: {e}"));
    }

    let ticker = renderer.spawn_ticker();
    let cancel = CancellationToken::new();
    let started = Instant::now();
    install_signal_handlers(
        cancel.clone(),
        Arc::clone(&renderer),
        Arc::clone(&journal),
        started,
    );
    let observer: Arc<dyn RunObserver> = Arc::new(RecordingObserver {
        renderer: Arc::clone(&renderer),
        journal: Arc::clone(&journal),
        provider: provider_id,
        cwd: cwd.clone(),
    });
    let first = AiSession {
        prompt: Arc::from(full_prompt.as_str()),
        cold_prompt: None,
        cwd: cwd.clone(),
        extra_roots,
        model,
        effort: None,
        permissions,
        resume,
        cancel,
        signals_file,
        output_dir: run_dir.clone(),
        max_budget_usd: args.max_budget_usd,
        max_turns: args.max_turns,
        cold_fallback: !args.no_cold_fallback,
        task: None,
    };
    let contract = (!args.no_contract).then_some(&contract);
    let corrective = settings.retry.corrective_retries;
    let on_corrective = |e: &SignalsError| {
        renderer.line(&format!(
            "signals.json is not acceptable ({}); asking the agent to fix it",
            short_error(e)
        ));
    };
    let ending = Ending::new(
        run_with_contract(
            &*provider,
            first,
            ContractPolicy {
                contract,
                corrective_retries: corrective,
            },
            observer,
            &on_corrective,
        )
        .await,
    );
    if let Some(t) = ticker {
        t.abort();
    }
    renderer.finish();

    let written = finish_record(&journal, &ending, provider_id, &cwd, started);
    journal.close();
    let record = journal.snapshot();
    if let Some(file) = &args.output_last_message {
        write_answer(&renderer, file, record.result.as_deref());
    }
    print_summary(
        &renderer,
        &record,
        &run_dir,
        ending.exit,
        ending.run.result.as_ref().err(),
        &ending.run.verdict,
        written.err(),
    );
    Ok(ending.exit)
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

/// `run.json` as the run starts.
fn first_record(
    run_id: String,
    provider: ProviderId,
    model: Option<String>,
    cwd: &Path,
    resume: Option<&SessionId>,
) -> RunRecord {
    RunRecord {
        run_id,
        provider,
        model,
        cwd: cwd.to_path_buf(),
        started_at: now(),
        finished_at: None,
        outcome: "running".into(),
        exit_code: None,
        session_id: resume.map(|s| s.to_string()),
        signals_valid: None,
        signals_error: None,
        signal_kinds: Vec::new(),
        attempts: 0,
        provider_runs: 0,
        usage: Usage::default(),
        duration_ms: None,
        error: None,
        result: None,
        resume_command: resume.map(|s| resume_command(provider, cwd, s)),
        cold_fallback_from: None,
        attestation: None,
        supervisor: Some(Supervisor::this_process()),
    }
}

/// How one `corral run` ended: the provider runs and the exit code they come to.
struct Ending {
    exit: Exit,
    run: ContractRun,
}

impl Ending {
    fn new(run: ContractRun) -> Self {
        let exit = match (&run.result, &run.verdict) {
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
        };
        Ending { exit, run }
    }
}

/// Writes how the run ended into `run.json`.
fn finish_record(
    journal: &Journal,
    ending: &Ending,
    provider_id: ProviderId,
    cwd: &Path,
    started: Instant,
) -> std::io::Result<()> {
    let (session_id, outcome, attestation) = match &ending.run.result {
        Ok(out) => (
            out.session_id.clone(),
            out.outcome.to_string(),
            out.attestation.clone(),
        ),
        Err(err) => (
            err.session_id().cloned(),
            err.outcome().to_string(),
            err.evidence().and_then(|e| e.attestation.clone()),
        ),
    };
    journal.update(|record| {
        record.finished_at = Some(now());
        record.outcome = outcome;
        record.exit_code = Some(ending.exit.code());
        // A session seen live (and already in the record) is kept when the result names none.
        if let Some(id) = &session_id {
            record.session_id = Some(id.to_string());
            record.resume_command = Some(resume_command(provider_id, cwd, id));
        }
        record.attempts = ending.run.attempts;
        record.provider_runs = ending.run.provider_runs;
        record.usage = ending.run.usage;
        record.duration_ms = Some(u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX));
        record.error = ending.run.result.as_ref().err().map(|e| e.to_string());
        record.result = ending
            .run
            .result
            .as_ref()
            .ok()
            .and_then(|o| o.final_text.clone());
        record.attestation = attestation;
        match &ending.run.verdict {
            SignalsVerdict::NotChecked => {}
            SignalsVerdict::Valid { kinds, .. } => {
                record.signals_valid = Some(true);
                record.signal_kinds = kinds.clone();
            }
            SignalsVerdict::Invalid(e) => {
                record.signals_valid = Some(false);
                record.signals_error = Some(e.to_string());
            }
        }
    })
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

fn short_error(e: &SignalsError) -> String {
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
        renderer.json(&serde_json::json!({
            "type": "summary",
            "outcome": record.outcome,
            "exit_code": exit.code(),
            "session_id": record.session_id,
            "run_dir": run_dir,
            "signals_valid": record.signals_valid,
            "signal_kinds": record.signal_kinds,
            "usage": record.usage,
            "cost_usd": record.usage.cost_usd,
            "attempts": record.attempts,
            "error": record.error,
            "result": record.result,
            "resume_command": record.resume_command,
            "cold_fallback_from": record.cold_fallback_from,
            "stray_writes": if not_checked.is_some() { None } else { Some(strays) },
            "stray_check": if not_checked.is_some() { "not-checked" } else { "checked" },
            "stray_check_why": not_checked,
            "record_error": record_error,
        }));
        return;
    }
    // The answer first, as `claude -p` prints it; the summary below it.
    if let Some(answer) = record.result.as_deref().map(str::trim_end)
        && !answer.is_empty()
    {
        outln!("{answer}");
        outln!("");
    }
    let u = &record.usage;
    let n = |v: Option<u64>| v.map_or("-".to_string(), |v| v.to_string());
    outln!("outcome   {} (exit {})", record.outcome, exit.code());
    if let Some(err) = error {
        outln!("error     {err}");
    }
    match verdict {
        SignalsVerdict::NotChecked => outln!("signals   not checked"),
        SignalsVerdict::Valid { kinds, blocked } => {
            outln!("signals   valid: {}", kinds.join(", "));
            if let Some(reason) = blocked {
                outln!("blocked   {reason}");
            }
        }
        SignalsVerdict::Invalid(e) => outln!("signals   invalid: {}", short_error(e)),
    }
    outln!("session   {}", record.session_id.as_deref().unwrap_or("-"));
    if let Some(stale) = &record.cold_fallback_from {
        outln!("resumed   no: session {stale} was not found; the task ran cold, in a new session");
    }
    outln!(
        "usage     in {} out {} cache read {} write {}",
        n(u.input),
        n(u.output),
        n(u.cache_read),
        n(u.cache_write)
    );
    outln!(
        "cost      {}",
        u.cost_usd.map_or("-".to_string(), |c| format!("${c:.4}"))
    );
    outln!("attempts  {}", record.attempts);
    for stray in strays {
        outln!("stray     {}", crate::term::one_line(stray));
    }
    if let Some(why) = &not_checked
        && record.attestation.is_some()
    {
        outln!("strays    not checked: {}", crate::term::one_line(why));
    }
    outln!("run dir   {}", run_dir.display());
    if let Some(e) = &record_error {
        outln!("warning   {e}");
    }
    if exit != Exit::Success
        && let Some(cmd) = &record.resume_command
    {
        outln!("resume    {cmd}");
    }
}
