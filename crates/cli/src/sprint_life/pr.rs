//! `corral sprint pr`: the pull request of a sprint that ran.
//!
//! An agent writes the title and description (`pr-content`) in `.corral/sprints/<name>/pr/<n>/`;
//! Corral adds the facts it recorded in `sprint.json` and writes the whole as `pr.md` there. It
//! then prints the text and the commands that push the branch and open the pull request (or,
//! when one is open, update it): Corral's supervised commands run either git on the host or a
//! command in the agents' sandbox, and `gh` needs the host's network and login, so it is not
//! run from here yet.

use corral_compose::{Contract, SignalsVerdict};
use corral_sprint::life::{
    LifeError, PR_DIR, PR_FILE, flow_spawn_dir, pr_body, pr_content_of, pr_prompt, record_flow_file,
};
use corral_sprint::{SPRINT_FILE, SprintLayout, read_state};

use super::SprintPrArgs;
use super::spawn::{FlowSpawn, flow_run_id, run_flow_spawn, short_error};
use crate::config_cmd::load_settings;
use crate::exit::{Exit, usage};
use crate::term::{errln, outln};

/// Runs `corral sprint pr`.
pub async fn pr(args: SprintPrArgs) -> anyhow::Result<Exit> {
    let cwd = std::fs::canonicalize(std::env::current_dir()?)?;
    let loaded = load_settings(&cwd, Vec::new())?;
    let root = std::fs::canonicalize(&loaded.project_root).unwrap_or(loaded.project_root.clone());
    let path = args.file.clone().unwrap_or_else(|| SPRINT_FILE.into());
    let file = match crate::sprint::load_or_report(&path)? {
        Ok(file) => file,
        Err(exit) => return Ok(exit),
    };
    let layout = SprintLayout::new(&root, &file.sprint.name);
    if !layout.state_file().exists() {
        return Err(usage(format!(
            "sprint {} has not run yet ({} is missing): nothing to open a pull request for \
             (`corral sprint run` first)",
            file.sprint.name,
            layout.state_file().display()
        )));
    }
    let state = read_state(&layout.state_file())
        .map_err(|e| usage(format!("{}: {e}", layout.state_file().display())))?;
    if state.tasks.iter().all(|t| t.commit.is_none()) {
        return Err(usage(format!(
            "sprint {} has no finished task yet: nothing to open a pull request for \
             (`corral sprint run` first)",
            file.sprint.name
        )));
    }
    let provider = args.provider.unwrap_or(file.generator.provider);
    let model = args
        .model
        .clone()
        .or_else(|| {
            (file.generator.provider == provider)
                .then(|| file.generator.model.clone())
                .flatten()
        })
        .or_else(|| loaded.settings.providers.get(provider).model.clone());
    let dir = flow_spawn_dir(&layout, PR_DIR).map_err(life_usage)?;
    let run_id = flow_run_id("pr", &dir);
    let end = run_flow_spawn(FlowSpawn {
        run_id,
        settings: &loaded.settings,
        provider,
        model,
        cwd: root.clone(),
        dir: dir.clone(),
        prompt: pr_prompt(&state, &args.base),
        contract: Contract::pull_request(),
        json: args.json,
    })
    .await?;
    let signals = match &end.run.verdict {
        SignalsVerdict::Valid { signals, .. } => signals,
        SignalsVerdict::Invalid(e) => {
            errln!(
                "pr: the agent's pull request text is not valid after its corrective retries: {}",
                short_error(e)
            );
            errln!("pr: the record is in {}", dir.display());
            return Ok(end.exit);
        }
        SignalsVerdict::NotChecked => {
            if let Err(e) = &end.run.result {
                errln!("pr: the agent did not finish: {e}");
            }
            errln!("pr: the record is in {}", dir.display());
            return Ok(end.exit);
        }
    };
    let Some(content) = pr_content_of(signals) else {
        errln!("pr: the agent wrote no pull request text");
        return Ok(Exit::SignalsInvalid);
    };
    let body = pr_body(content, &state);
    let text = format!("{}\n\n{body}", content.title);
    record_flow_file(&layout, &dir, PR_FILE, text.as_bytes()).map_err(life_usage)?;
    let body_file = dir.join(PR_FILE);

    outln!("{}\n", content.title);
    outln!("{}", body.trim_end());
    outln!("");
    outln!(
        "pr: written to {}; Corral does not run git push or gh itself yet. To open the pull \
         request:",
        body_file.display()
    );
    outln!("  git push -u origin {}", state.branch);
    outln!(
        "  gh pr create --head {} --base {} --title {} --body \"$(tail -n +3 {})\"",
        state.branch,
        shell_quote(&args.base),
        shell_quote(&content.title),
        shell_quote(&body_file.display().to_string())
    );
    outln!(
        "  (once it is open, run `corral sprint pr` again and use `gh pr edit {}` with the same \
         --title and --body to update it)",
        state.branch
    );
    Ok(Exit::Success)
}

/// `text` in single quotes for a POSIX shell.
fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', "'\\''"))
}

fn life_usage(error: LifeError) -> anyhow::Error {
    usage(error.to_string())
}
