//! Refining: the prompt that asks for a `refined-ticket` (with a person at the keyboard, or
//! without one), the refined ticket as the Markdown a plan is made from, and its record.
//!
//! A refined ticket replaces the ticket file it was made from (the user named that file to be
//! refined), so that `corral sprint plan TICKET` plans the refined text; the text it replaced
//! is kept in the spawn's directory as `source.md`, the accepted signal as `refined.json`.

use std::fmt::Write as _;

use corral_contract::{RefinedTicket, Signal};

use super::SourceText;
use super::plan::fence_for;

/// The flow's directory under the sprint's record: `.corral/sprints/<name>/refine/`.
pub const REFINE_DIR: &str = "refine";

/// The ticket as it was before refining, in its spawn's directory.
pub const REFINE_SOURCE_FILE: &str = "source.md";

/// The accepted refined ticket, as validated, in its spawn's directory.
pub const REFINED_FILE: &str = "refined.json";

/// The refined ticket as Markdown, in its spawn's directory (and written over the ticket).
pub const REFINED_TICKET_FILE: &str = "ticket.md";

/// Whether a person takes part in a refinement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefineMode {
    /// The terminal is handed to the CLI: the agent asks the person what it needs.
    Interactive,
    /// No one answers: the agent decides, and says what it assumed.
    Headless,
}

/// The prompt asking for the refinement of `ticket`. The contract section is appended by the
/// caller (the spawn, or the interactive handoff).
#[must_use]
pub fn refine_prompt(ticket: &SourceText, mode: RefineMode) -> String {
    let mut out = String::from(
        "# Refine a ticket\n\n\
         Make the ticket below precise enough for coding agents to plan and implement it: a \
         specification that says what to build and what not to, and acceptance criteria that a \
         reviewer can check one by one. Read the repository as much as you need to make it \
         concrete (the files, functions and commands it touches), but change nothing in it: \
         your only output is the result file described at the end.\n\n",
    );
    match mode {
        RefineMode::Interactive => out.push_str(
            "A person is at the keyboard. Ask them what you need to know, a few questions at a \
             time, until the ticket is clear; then write the result file, show them the title \
             and criteria you wrote, and tell them to leave the session (`/exit`, or Ctrl-D) \
             to hand the ticket back to Corral. If they change their mind afterwards, write \
             the file again.\n\n",
        ),
        RefineMode::Headless => out.push_str(
            "No one will answer questions. Where the ticket leaves a choice open, make the \
             choice that fits the repository best, and say in the specification what you \
             assumed, under a heading `Assumptions`.\n\n",
        ),
    }
    let _ = writeln!(out, "## Ticket: {}\n", ticket.label);
    let fence = fence_for(&ticket.text);
    let _ = writeln!(out, "{fence}markdown\n{}\n{fence}", ticket.text.trim_end());
    out
}

/// The `refined-ticket` among a refinement's validated signals (its contract asks for exactly
/// one).
#[must_use]
pub fn refined_of(signals: &[Signal]) -> Option<&RefinedTicket> {
    signals.iter().find_map(|signal| match signal {
        Signal::RefinedTicket(ticket) => Some(ticket),
        Signal::TaskComplete(_)
        | Signal::TaskBlocked(_)
        | Signal::TaskVerified(_)
        | Signal::Note(_)
        | Signal::Decision(_)
        | Signal::Learning(_)
        | Signal::Change(_)
        | Signal::CommitMessage(_)
        | Signal::PrContent(_)
        | Signal::VerifyGates(_)
        | Signal::Evaluation(_)
        | Signal::TaskPlan(_)
        | Signal::IdeatedTickets(_)
        | Signal::AgentsMdProposal(_)
        | Signal::SetupScript(_)
        | Signal::VerifyScript(_) => None,
    })
}

/// The heading of the criteria in a refined ticket's Markdown.
pub const CRITERIA_HEADING: &str = "## Acceptance criteria";

/// A refined ticket as the Markdown a plan is made from: its title, its specification, and
/// its criteria as a list.
#[must_use]
pub fn refined_markdown(ticket: &RefinedTicket) -> String {
    let mut out = format!(
        "# {}\n\n{}\n\n{CRITERIA_HEADING}\n\n",
        ticket.title.trim(),
        { ticket.spec.trim() }
    );
    for criterion in &ticket.acceptance_criteria {
        // A criterion of several lines stays one item: its later lines are indented under it.
        let mut lines = criterion.trim().lines();
        let _ = writeln!(out, "- {}", lines.next().unwrap_or_default());
        for line in lines {
            let _ = writeln!(out, "  {line}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use corral_contract::{RefinedTicket, Timestamp};

    use super::{RefineMode, SourceText, refine_prompt, refined_markdown};

    #[test]
    fn the_markdown_holds_title_spec_and_each_criterion() {
        let ticket = RefinedTicket {
            timestamp: Timestamp::parse("2026-12-07T10:00:00Z").unwrap(),
            title: "Parse dates".into(),
            spec: "Parse ISO dates.\n".into(),
            acceptance_criteria: vec!["bad dates are named".into(), "two\nlines".into()],
        };
        assert_eq!(
            refined_markdown(&ticket),
            "# Parse dates\n\nParse ISO dates.\n\n## Acceptance criteria\n\n\
             - bad dates are named\n- two\n  lines\n"
        );
    }

    #[test]
    fn the_prompt_says_who_answers() {
        let ticket = SourceText {
            label: "t.md".into(),
            text: "```x```".into(),
        };
        let with = refine_prompt(&ticket, RefineMode::Interactive);
        assert!(with.contains("A person is at the keyboard"));
        assert!(with.contains("````markdown\n```x```\n````"));
        let without = refine_prompt(&ticket, RefineMode::Headless);
        assert!(without.contains("No one will answer"));
    }
}
