//! The pull request of a sprint: the prompt asking an agent for its title and description
//! (`pr-content`), and the section Corral adds from what it recorded for certain (each task's
//! status, rounds and attempts, what its check said, its commit and its cost), which no agent
//! writes.

use std::fmt::Write as _;

use corral_contract::{PrContent, Signal};

use crate::state::{SprintState, TaskState, UsageRollUp};

/// The flow's directory under the sprint's record: `.corral/sprints/<name>/pr/`.
pub const PR_DIR: &str = "pr";

/// The composed pull request (title line, blank line, body), in its spawn's directory.
pub const PR_FILE: &str = "pr.md";

/// The heading of the section Corral adds to the agent's description.
pub const FACTS_HEADING: &str = "## What Corral recorded";

/// The prompt asking for the pull request of the sprint recorded in `state`. The contract
/// section is appended by the spawn.
#[must_use]
pub fn pr_prompt(state: &SprintState, base: &str) -> String {
    let mut out = format!(
        "# Write the pull request of a sprint\n\n\
         The branch `{}` holds the work of the sprint `{}`, one commit per finished task, on \
         top of `{base}`. Read what changed (`git log {base}..{}` and `git diff {base}...{}` \
         in this repository) and write the pull request's title and description for a \
         reviewer: what the change does and why, how it is organised, what to look at first, \
         and anything left undone. Change nothing in the repository.\n\n\
         Corral appends its own record (each task's rounds, check results and cost) below \
         your description, so do not repeat those figures.\n\n\
         ## The sprint's tasks\n\n",
        state.branch, state.name, state.branch, state.branch
    );
    for task in &state.tasks {
        let _ = writeln!(
            out,
            "- `{}` ({}): {}",
            task.id,
            task.status.as_str(),
            task.title
        );
    }
    out
}

/// The `pr-content` among a spawn's validated signals.
#[must_use]
pub fn pr_content_of(signals: &[Signal]) -> Option<&PrContent> {
    signals.iter().find_map(|signal| match signal {
        Signal::PrContent(content) => Some(content),
        Signal::TaskComplete(_)
        | Signal::TaskBlocked(_)
        | Signal::TaskVerified(_)
        | Signal::Note(_)
        | Signal::Decision(_)
        | Signal::Learning(_)
        | Signal::Change(_)
        | Signal::CommitMessage(_)
        | Signal::VerifyGates(_)
        | Signal::Evaluation(_)
        | Signal::RefinedTicket(_)
        | Signal::TaskPlan(_)
        | Signal::IdeatedTickets(_)
        | Signal::AgentsMdProposal(_)
        | Signal::SetupScript(_)
        | Signal::VerifyScript(_) => None,
    })
}

/// The section of facts Corral adds below the agent's description: one row per task, and the
/// sprint's total cost.
#[must_use]
pub fn pr_facts(state: &SprintState) -> String {
    let mut out = format!(
        "{FACTS_HEADING}\n\n\
         | task | status | rounds | attempts | check | commit | cost |\n\
         | --- | --- | --- | --- | --- | --- | --- |\n"
    );
    let mut total = UsageRollUp::default();
    for task in &state.tasks {
        let usage = UsageRollUp::of_task(task);
        let _ = writeln!(
            out,
            "| `{}` | {} | {} | {} | {} | {} | {} |",
            task.id,
            task.status.as_str(),
            task.round,
            task.attempt,
            check_cell(task),
            task.commit.as_deref().map_or("-".to_owned(), |c| format!(
                "`{}`",
                c.chars().take(12).collect::<String>()
            )),
            usage
                .total
                .cost_usd
                .map_or("-".to_owned(), |c| format!("${c:.4}")),
        );
        total.add(&usage);
    }
    let _ = writeln!(
        out,
        "\nTotal cost: {}. Each task ran as generator and evaluator rounds gated by the \
         sprint's check; \"check\" says what the check said before the task and after its \
         last round.",
        total
            .total
            .cost_usd
            .map_or("not reported".to_owned(), |c| format!("${c:.4}"))
    );
    out
}

fn check_cell(task: &TaskState) -> String {
    let attribution = task.attribution.map_or("-", |a| a.as_str());
    match &task.reason {
        Some(reason) => format!("{attribution} ({})", one_line(reason)),
        None => attribution.to_owned(),
    }
}

fn one_line(text: &str) -> String {
    let line = text.lines().next().unwrap_or("").replace('|', "\\|");
    if line.chars().count() > 80 {
        format!("{}…", line.chars().take(80).collect::<String>())
    } else {
        line
    }
}

/// The pull request's body: the agent's description, then Corral's facts.
#[must_use]
pub fn pr_body(content: &PrContent, state: &SprintState) -> String {
    format!("{}\n\n{}", content.body.trim_end(), pr_facts(state))
}
