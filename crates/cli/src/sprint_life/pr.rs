//! `corral sprint pr`: the pull request of a sprint that ran.
//!
//! An agent writes the title and description (`pr-content`) in `.corral/sprints/<name>/pr/<n>/`;
//! Corral adds the facts it recorded in `sprint.json` and writes the whole as `pr.md` there. It
//! then publishes it through the forge (compose's `forge`: `git push` and `gh` on the host,
//! ADR 0015): the branch pushed, and the branch's open pull request updated, or a new one
//! opened. Without `gh`, a login or the remote, or with `--print-only`, it prints the commands
//! that would do it instead, saying which was missing.

use corral_compose::{Contract, engine_config, forge};
use corral_ports::{CancellationToken, ForgeRepo, PullRequestText};
use corral_sprint::life::{
    LifeError, PR_DIR, PR_FILE, PUBLISHED_FILE, Published, pr_body, pr_content_of, pr_prompt,
    publish_pr, record_flow_file,
};
use corral_sprint::{SPRINT_FILE, SprintLayout, read_state};

use super::SprintPrArgs;
use super::spawn::{FlowSpawn, flow_run_id, next_flow_dir, run_flow_spawn};
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
    let (dir, crashed) =
        next_flow_dir(&layout, PR_DIR, provider, model.as_deref(), &root).map_err(life_usage)?;
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
        crashed,
    })
    .await?;
    let Some(signals) = end.valid_signals("pr", "pull request text") else {
        errln!("pr: the record is in {}", dir.display());
        return Ok(end.exit);
    };
    let Some(content) = pr_content_of(signals) else {
        errln!("pr: the agent wrote no pull request text");
        return Ok(Exit::SignalsInvalid);
    };
    let body = pr_body(content, &state);
    let text = format!("{}\n\n{body}", content.title);
    record_flow_file(&layout, &dir, PR_FILE, text.as_bytes()).map_err(life_usage)?;
    let written = Written {
        text: PullRequestText {
            title: content.title.clone(),
            body,
        },
        file: dir.join(PR_FILE),
        branch: state.branch.clone(),
    };
    outln!("{}\n", written.text.title);
    outln!("{}", written.text.body.trim_end());
    outln!("");
    if args.print_only {
        outln!(
            "pr: written to {}; to open the pull request:",
            written.file.display()
        );
        print_commands(&written, &args);
        return Ok(Exit::Success);
    }
    publish(&args, &loaded.settings, &layout, &root, &written).await
}

/// Publishes `written` through the forge (`git push` and `gh` on the host) and records what
/// it did as `published.json` beside `pr.md`; prints the commands instead when the forge cannot
/// be used here, or failed.
async fn publish(
    args: &SprintPrArgs,
    settings: &corral_compose::Settings,
    layout: &SprintLayout,
    root: &std::path::Path,
    written: &Written,
) -> anyhow::Result<Exit> {
    let dir = written.file.parent().unwrap_or(root);
    let repo = ForgeRepo {
        dir: root.to_owned(),
        remote: args.remote.clone(),
        repo: args.repo.clone(),
    };
    let forge = forge(&engine_config(settings));
    let cancel = CancellationToken::new();
    match publish_pr(
        &*forge,
        &repo,
        &written.branch,
        &args.base,
        &written.text,
        &cancel,
    )
    .await
    {
        Ok(published) => {
            let pr = published.pull_request();
            let done = match published {
                Published::Opened(_) => "opened",
                Published::Updated(_) => "updated",
            };
            let record = serde_json::json!({
                "action": done, "number": pr.number, "url": pr.url,
                "branch": written.branch, "base": args.base, "remote": repo.remote,
            });
            record_flow_file(
                layout,
                dir,
                PUBLISHED_FILE,
                format!("{record:#}\n").as_bytes(),
            )
            .map_err(life_usage)?;
            outln!(
                "pr: pushed {} to {} and {done} pull request #{}: {}",
                written.branch,
                repo.remote,
                pr.number,
                pr.url
            );
            Ok(Exit::Success)
        }
        Err(e) if e.is_unavailable() => {
            errln!("pr: not opened: {e}");
            outln!(
                "pr: written to {}; to open the pull request:",
                written.file.display()
            );
            print_commands(written, args);
            Ok(Exit::Success)
        }
        Err(e) => {
            errln!("pr: failed: {e}");
            outln!(
                "pr: written to {}; to open the pull request by hand:",
                written.file.display()
            );
            print_commands(written, args);
            Ok(Exit::Unavailable)
        }
    }
}

/// The pull request as written: its text, the file it is in, the branch it is of.
struct Written {
    text: PullRequestText,
    file: std::path::PathBuf,
    branch: String,
}

/// The commands that push the branch and open the pull request (or update the open one).
fn print_commands(written: &Written, args: &SprintPrArgs) {
    let repo = args
        .repo
        .as_deref()
        .map_or(String::new(), |r| format!(" --repo {}", shell_quote(r)));
    outln!(
        "  git push {} {}",
        shell_quote(&args.remote),
        written.branch
    );
    outln!(
        "  gh pr create{repo} --head {} --base {} --title {} --body \"$(tail -n +3 {})\"",
        written.branch,
        shell_quote(&args.base),
        shell_quote(&written.text.title),
        shell_quote(&written.file.display().to_string())
    );
    outln!(
        "  (when one is open already: `gh pr edit{repo} {}` with the same --title and --body)",
        written.branch
    );
}

/// `text` in single quotes for a POSIX shell.
fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', "'\\''"))
}

fn life_usage(error: LifeError) -> anyhow::Error {
    usage(error.to_string())
}
