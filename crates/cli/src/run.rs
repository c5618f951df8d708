//! `corral run`: one task through one provider, with the signals contract, corrective retries,
//! Ctrl-C handling, the run directory, and a summary.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use corral_compose::{engine_config, headless_provider};
use corral_contract::{
    Contract, Signal, SignalsError, corrective_message, render_contract_section,
    validate_signals_file,
};
use corral_ports::{
    AiSession, CancellationToken, Permissions, ProviderError, ProviderId, ProviderOutput,
    RunObserver, SessionId, Usage,
};

use crate::args::RunArgs;
use crate::config_cmd::load_settings;
use crate::exit::{Exit, usage};
use crate::render::{Renderer, Style};
use crate::rundir::{RunRecord, new_run_id, now, write_record};

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

/// Cancels on the first Ctrl-C; exits at once on the second.
fn install_ctrl_c(cancel: CancellationToken, renderer: Arc<Renderer>) {
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            renderer.line("cancelling: ending the CLI's process tree (Ctrl-C again to force)");
            cancel.cancel();
        }
        if tokio::signal::ctrl_c().await.is_ok() {
            eprintln!("\nforced exit; the CLI's processes die with corral (PDEATHSIG)");
            std::process::exit(i32::from(Exit::Cancelled.code()));
        }
    });
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

/// What the signals said.
enum SignalsVerdict {
    NotChecked,
    Valid {
        kinds: Vec<String>,
        blocked: Option<String>,
    },
    Invalid(SignalsError),
}

fn check_signals(path: &Path, contract: &Contract) -> SignalsVerdict {
    match validate_signals_file(path, contract) {
        Ok(valid) => {
            let kinds = valid
                .signals()
                .iter()
                .map(|s| s.kind().to_string())
                .collect();
            let blocked = valid.signals().iter().find_map(|s| {
                if let Signal::TaskBlocked(b) = s {
                    Some(b.reason.clone())
                } else {
                    None
                }
            });
            SignalsVerdict::Valid { kinds, blocked }
        }
        Err(e) => SignalsVerdict::Invalid(e),
    }
}

/// Runs `corral run`.
pub async fn run(args: RunArgs) -> anyhow::Result<Exit> {
    let cwd = resolve_cwd(&args)?;
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
    let loaded = load_settings(&cwd, flags)?;
    let settings = &loaded.settings;
    let provider_id = settings.run.provider;
    let user_prompt = read_prompt(&args)?;
    let resume = args
        .resume
        .as_deref()
        .map(SessionId::new)
        .transpose()
        .map_err(|e| usage(format!("--resume: {e}")))?;
    let model = args
        .model
        .clone()
        .or_else(|| settings.providers.get(provider_id).model.clone());

    let provider = headless_provider(provider_id, settings, engine_config(settings))
        .map_err(|e| usage(e.to_string()))?;

    let runs_root = {
        let dir = PathBuf::from(&settings.run.runs_dir);
        if dir.is_absolute() {
            dir
        } else {
            cwd.join(dir)
        }
    };
    let run_id = new_run_id(provider_id);
    let run_dir = runs_root.join(&run_id);
    std::fs::create_dir_all(&run_dir).map_err(|e| {
        anyhow::anyhow!("cannot create the run directory {}: {e}", run_dir.display())
    })?;
    let signals_file = run_dir.join("signals.json");
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
    std::fs::write(run_dir.join("prompt.md"), &full_prompt)?;

    let mut record = RunRecord {
        run_id: run_id.clone(),
        provider: provider_id,
        model: model.clone(),
        cwd: cwd.clone(),
        started_at: now(),
        finished_at: None,
        outcome: "running".into(),
        exit_code: None,
        session_id: resume.as_ref().map(|s| s.to_string()),
        signals_valid: None,
        signals_error: None,
        signal_kinds: Vec::new(),
        attempts: 0,
        provider_runs: 0,
        usage: Usage::default(),
        duration_ms: None,
        error: None,
        resume_command: None,
        attestation: None,
    };
    write_record(&run_dir, &record)?;

    let renderer = Renderer::new(Style::choose(args.json), provider_id.as_str());
    renderer.line(&format!(
        "run {run_id} · {provider_id} · {}",
        run_dir.display()
    ));
    let ticker = renderer.spawn_ticker();
    let cancel = CancellationToken::new();
    install_ctrl_c(cancel.clone(), Arc::clone(&renderer));
    let started = Instant::now();

    let mut prompt = full_prompt;
    let mut resume = resume;
    let mut corrective_left = settings.retry.corrective_retries;
    let mut usage_total = Usage::default();
    let observer: Arc<dyn RunObserver> = renderer.clone();

    let (exit, last_output, last_error, verdict) = loop {
        let session = AiSession {
            prompt: Arc::from(prompt.as_str()),
            cwd: cwd.clone(),
            extra_roots: Vec::new(),
            model: model.clone(),
            effort: None,
            permissions: Permissions::default(),
            resume: resume.clone(),
            cancel: cancel.clone(),
            signals_file: signals_file.clone(),
            output_dir: run_dir.clone(),
            max_budget_usd: None,
        };
        record.provider_runs += 1;
        let result = provider.run(session, Arc::clone(&observer)).await;
        match result {
            Err(err) => {
                if let Some(ev) = err.evidence() {
                    usage_total.add(&ev.usage);
                    record.attempts += ev.attempts;
                }
                break (
                    Exit::for_error(&err),
                    None,
                    Some(err),
                    SignalsVerdict::NotChecked,
                );
            }
            Ok(out) => {
                usage_total.add(&out.usage);
                record.attempts += out.attempts;
                if args.no_contract {
                    break (Exit::Success, Some(out), None, SignalsVerdict::NotChecked);
                }
                match check_signals(&signals_file, &contract) {
                    SignalsVerdict::Invalid(e)
                        if e.is_correctable()
                            && corrective_left > 0
                            && out.session_id.is_some() =>
                    {
                        corrective_left -= 1;
                        renderer.line(&format!(
                            "signals.json is not acceptable ({}); asking the agent to fix it",
                            short_error(&e)
                        ));
                        prompt = corrective_message(&e, &signals_file, &contract);
                        resume = out.session_id.clone();
                    }
                    SignalsVerdict::Invalid(e) => {
                        break (
                            Exit::SignalsInvalid,
                            Some(out),
                            None,
                            SignalsVerdict::Invalid(e),
                        );
                    }
                    SignalsVerdict::Valid { kinds, blocked } => {
                        let exit = if blocked.is_some() {
                            Exit::Blocked
                        } else {
                            Exit::Success
                        };
                        break (
                            exit,
                            Some(out),
                            None,
                            SignalsVerdict::Valid { kinds, blocked },
                        );
                    }
                    SignalsVerdict::NotChecked => {
                        break (Exit::Success, Some(out), None, SignalsVerdict::NotChecked);
                    }
                }
            }
        }
    };
    if let Some(t) = ticker {
        t.abort();
    }
    renderer.finish();

    let session_id = last_output
        .as_ref()
        .and_then(|o| o.session_id.clone())
        .or_else(|| last_error.as_ref().and_then(|e| e.session_id().cloned()));
    let outcome = match (&last_output, &last_error) {
        (Some(out), _) => out.outcome.to_string(),
        (None, Some(err)) => err.outcome().to_string(),
        (None, None) => "unknown".into(),
    };
    record.finished_at = Some(now());
    record.outcome = outcome;
    record.exit_code = Some(exit.code());
    record.session_id = session_id.as_ref().map(|s| s.to_string());
    record.usage = usage_total;
    record.duration_ms = Some(started.elapsed().as_millis() as u64);
    record.error = last_error.as_ref().map(|e| e.to_string());
    record.resume_command = session_id
        .as_ref()
        .map(|s| resume_command(provider_id, &cwd, s));
    record.attestation = last_output
        .as_ref()
        .and_then(|o| o.attestation.clone())
        .or_else(|| {
            last_error
                .as_ref()
                .and_then(|e| e.evidence())
                .and_then(|e| e.attestation.clone())
        });
    match &verdict {
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
    write_record(&run_dir, &record)?;
    print_summary(
        &renderer,
        &record,
        &run_dir,
        exit,
        last_error.as_ref(),
        &verdict,
        last_output.as_ref(),
    );
    Ok(exit)
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
    _output: Option<&ProviderOutput>,
) {
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
            "resume_command": record.resume_command,
        }));
        return;
    }
    let u = &record.usage;
    let n = |v: Option<u64>| v.map_or("-".to_string(), |v| v.to_string());
    println!("outcome   {} (exit {})", record.outcome, exit.code());
    if let Some(err) = error {
        println!("error     {err}");
    }
    match verdict {
        SignalsVerdict::NotChecked => println!("signals   not checked"),
        SignalsVerdict::Valid { kinds, blocked } => {
            println!("signals   valid: {}", kinds.join(", "));
            if let Some(reason) = blocked {
                println!("blocked   {reason}");
            }
        }
        SignalsVerdict::Invalid(e) => println!("signals   invalid: {}", short_error(e)),
    }
    println!("session   {}", record.session_id.as_deref().unwrap_or("-"));
    println!(
        "usage     in {} out {} cache read {} write {}",
        n(u.input),
        n(u.output),
        n(u.cache_read),
        n(u.cache_write)
    );
    println!(
        "cost      {}",
        u.cost_usd.map_or("-".to_string(), |c| format!("${c:.4}"))
    );
    println!("attempts  {}", record.attempts);
    println!("run dir   {}", run_dir.display());
    if exit != Exit::Success
        && let Some(cmd) = &record.resume_command
    {
        println!("resume    {cmd}");
    }
}
