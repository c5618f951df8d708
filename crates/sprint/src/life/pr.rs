//! The pull request of a sprint: the prompt asking an agent for its title and description
//! (`pr-content`), and the section Corral adds from what it recorded for certain (each task's
//! status, rounds and attempts, what its check said, its commit and its cost), which no agent
//! writes; and the pull request published through the [`Forge`] port: the branch pushed, the
//! branch's open pull request updated or a new one opened.

use std::fmt::Write as _;

use corral_contract::{PrContent, Signal};
use corral_ports::{CancellationToken, Forge, ForgeError, ForgeRepo, PullRequest, PullRequestText};

use crate::state::{SprintState, TaskState, UsageRollUp};

/// The flow's directory under the sprint's record: `.corral/sprints/<name>/pr/`.
pub const PR_DIR: &str = "pr";

/// The composed pull request (title line, blank line, body), in its spawn's directory.
pub const PR_FILE: &str = "pr.md";

/// What publishing did, in the spawn's directory: `{"action": "opened"|"updated", "number",
/// "url", "branch", "base", "remote"}`.
pub const PUBLISHED_FILE: &str = "published.json";

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

/// What publishing a sprint's pull request did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Published {
    /// No pull request of the branch was open: this one was opened.
    Opened(PullRequest),
    /// The branch's open pull request got the new title and body (a rerun).
    Updated(PullRequest),
}

impl Published {
    /// The pull request either way.
    #[must_use]
    pub fn pull_request(&self) -> &PullRequest {
        match self {
            Published::Opened(pr) | Published::Updated(pr) => pr,
        }
    }
}

/// Pushes the sprint's `branch` and opens its pull request into `base` with `text`, or, when
/// one is already open for the branch, updates that one: a rerun never opens a second.
///
/// The order is the one that changes nothing on the forge until everything it needs is known
/// to be there: the remote and the forge's program (no network), then the open pull request
/// (which proves the login), then the push, then the pull request.
///
/// # Errors
///
/// The forge's [`ForgeError`]; [`ForgeError::is_unavailable`] ones come before anything was
/// pushed.
pub async fn publish_pr(
    forge: &dyn Forge,
    repo: &ForgeRepo,
    branch: &str,
    base: &str,
    text: &PullRequestText,
    cancel: &CancellationToken,
) -> Result<Published, ForgeError> {
    forge.check(repo, cancel).await?;
    let open = forge.pull_request_for(repo, branch, cancel).await?;
    forge.push_branch(repo, branch, cancel).await?;
    match open {
        Some(pr) => forge
            .update_pull_request(repo, pr.number, text, cancel)
            .await
            .map(Published::Updated),
        None => forge
            .open_pull_request(repo, branch, base, text, cancel)
            .await
            .map(Published::Opened),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use async_trait::async_trait;
    use corral_ports::ForgeIssue;

    use super::*;

    /// A forge that records the operations asked of it, with an open pull request or not, and
    /// optionally no login.
    struct Recording {
        open: Option<PullRequest>,
        logged_in: bool,
        asked: Mutex<Vec<&'static str>>,
    }

    impl Recording {
        fn note(&self, what: &'static str) {
            self.asked.lock().unwrap().push(what);
        }
    }

    fn pr(number: u64) -> PullRequest {
        PullRequest {
            number,
            url: format!("https://forge.invalid/pull/{number}"),
        }
    }

    #[async_trait]
    impl Forge for Recording {
        async fn check(&self, _: &ForgeRepo, _: &CancellationToken) -> Result<(), ForgeError> {
            self.note("check");
            Ok(())
        }
        async fn push_branch(
            &self,
            _: &ForgeRepo,
            _: &str,
            _: &CancellationToken,
        ) -> Result<(), ForgeError> {
            self.note("push");
            Ok(())
        }
        async fn pull_request_for(
            &self,
            _: &ForgeRepo,
            _: &str,
            _: &CancellationToken,
        ) -> Result<Option<PullRequest>, ForgeError> {
            self.note("find");
            if self.logged_in {
                Ok(self.open.clone())
            } else {
                Err(ForgeError::NotLoggedIn {
                    program: "gh".into(),
                    detail: "no token".into(),
                })
            }
        }
        async fn open_pull_request(
            &self,
            _: &ForgeRepo,
            _: &str,
            _: &str,
            _: &PullRequestText,
            _: &CancellationToken,
        ) -> Result<PullRequest, ForgeError> {
            self.note("open");
            Ok(pr(1))
        }
        async fn update_pull_request(
            &self,
            _: &ForgeRepo,
            number: u64,
            _: &PullRequestText,
            _: &CancellationToken,
        ) -> Result<PullRequest, ForgeError> {
            self.note("update");
            Ok(pr(number))
        }
        async fn issues(
            &self,
            _: &ForgeRepo,
            _: &str,
            _: usize,
            _: &CancellationToken,
        ) -> Result<Vec<ForgeIssue>, ForgeError> {
            Ok(Vec::new())
        }
    }

    async fn publish(forge: &Recording) -> Result<Published, ForgeError> {
        let repo = ForgeRepo {
            dir: "/p".into(),
            remote: "origin".into(),
            repo: None,
        };
        let text = PullRequestText {
            title: "t".into(),
            body: "b".into(),
        };
        publish_pr(
            forge,
            &repo,
            "corral/x",
            "main",
            &text,
            &CancellationToken::new(),
        )
        .await
    }

    #[tokio::test]
    async fn a_branch_without_a_pull_request_gets_one_and_a_rerun_updates_it() {
        let fresh = Recording {
            open: None,
            logged_in: true,
            asked: Mutex::new(Vec::new()),
        };
        assert_eq!(publish(&fresh).await, Ok(Published::Opened(pr(1))));
        assert_eq!(
            *fresh.asked.lock().unwrap(),
            ["check", "find", "push", "open"]
        );
        let rerun = Recording {
            open: Some(pr(7)),
            logged_in: true,
            asked: Mutex::new(Vec::new()),
        };
        assert_eq!(publish(&rerun).await, Ok(Published::Updated(pr(7))));
        assert_eq!(
            *rerun.asked.lock().unwrap(),
            ["check", "find", "push", "update"]
        );
    }

    #[tokio::test]
    async fn nothing_is_pushed_before_the_login_is_known() {
        let forge = Recording {
            open: None,
            logged_in: false,
            asked: Mutex::new(Vec::new()),
        };
        let e = publish(&forge).await.unwrap_err();
        assert!(e.is_unavailable());
        assert_eq!(*forge.asked.lock().unwrap(), ["check", "find"]);
    }
}
