//! `corral chat`: the interactive handoff. The provider's CLI takes over the terminal; corral
//! keeps the record (run directory, session id) and prints how to resume afterwards.

use std::sync::Arc;

use corral_compose::{engine_config, interactive_provider};
use corral_ports::run_dir::SIGNALS_FILE;
use corral_ports::{AiSession, CancellationToken, Permissions, SessionId};

use crate::args::ChatArgs;
use crate::config_cmd::load_settings;
use crate::exit::{Exit, usage};
use crate::term::errln;

/// Runs `corral chat`.
pub async fn chat(args: ChatArgs) -> anyhow::Result<Exit> {
    let cwd = match &args.cwd {
        Some(dir) => dir.clone(),
        None => std::env::current_dir()?,
    };
    let cwd =
        std::fs::canonicalize(&cwd).map_err(|e| usage(format!("--cwd {}: {e}", cwd.display())))?;
    let mut flags = Vec::new();
    if let Some(p) = args.provider {
        flags.push(("run.provider".to_string(), serde_json::json!(p.as_str())));
    }
    let loaded = load_settings(&cwd, flags)?;
    let settings = &loaded.settings;
    let provider_id = settings.run.provider;
    let prompt = match (&args.prompt_file, &args.prompt) {
        (Some(file), _) => std::fs::read_to_string(file).map_err(|e| {
            usage(format!(
                "cannot read the prompt file {}: {e}",
                file.display()
            ))
        })?,
        (None, Some(text)) => text.clone(),
        (None, None) => String::new(),
    };
    let resume = args
        .resume
        .as_deref()
        .map(|id| SessionId::new(id).map_err(|e| usage(format!("--resume {id:?}: {e}"))))
        .transpose()?;
    let provider = interactive_provider(provider_id, settings, engine_config(settings))
        .map_err(|e| usage(e.to_string()))?;
    let (_, run_dir) = loaded.create_run_dir(provider_id).map_err(|e| {
        anyhow::anyhow!(
            "cannot create a run directory under {}: {e}",
            loaded.runs_root().display()
        )
    })?;
    let session = AiSession {
        prompt: Arc::from(prompt.as_str()),
        cold_prompt: None,
        cwd: cwd.clone(),
        extra_roots: Vec::new(),
        model: args
            .model
            .clone()
            .or_else(|| settings.providers.get(provider_id).model.clone()),
        effort: None,
        permissions: Permissions::default(),
        resume,
        cancel: CancellationToken::new(),
        signals_file: run_dir.join(SIGNALS_FILE),
        output_dir: run_dir.clone(),
        max_budget_usd: None,
        max_turns: None,
        cold_fallback: true,
        task: None,
    };
    let outcome = match provider.run_interactive(session).await {
        Ok(outcome) => outcome,
        Err(err) => {
            // The same error and exit code `corral run` gives (8 for a missing CLI, say).
            errln!("error: {err}");
            return Ok(Exit::for_error(&err));
        }
    };
    errln!("");
    if let Some(id) = &outcome.session_id {
        errln!("session   {id}");
        errln!("resume    corral chat --provider {provider_id} --resume {id}");
    }
    errln!("run dir   {}", run_dir.display());
    Ok(match (outcome.cancelled, outcome.exit_code) {
        (true, _) => Exit::Cancelled,
        (false, Some(0)) => Exit::Success,
        (false, _) => Exit::Crashed,
    })
}
