//! Ideating: the prompt that asks for `ideated-tickets` from a person's prompt and the
//! repository, and each proposed ticket as a Markdown file the user can then refine or plan.
//!
//! Tickets are written as new files only (`tickets/<slug>.md`, a `-2`, `-3`, ... suffix when
//! the name is taken): ideating never changes a file that is there.

use std::fmt::Write as _;

use corral_contract::{IdeatedTicket, IdeatedTickets, Signal};

use super::SourceText;
use super::plan::fence_for;

/// The flow's directory under the sprint's record: `.corral/sprints/<name>/ideate/`.
pub const IDEATE_DIR: &str = "ideate";

/// The accepted tickets, as validated, in their spawn's directory.
pub const IDEATED_FILE: &str = "tickets.json";

/// Where the tickets are written by default, relative to the project.
pub const TICKETS_DIR: &str = "tickets";

/// The longest file name stem a ticket gets from its title.
const SLUG_MAX_CHARS: usize = 48;

/// The prompt asking for tickets: from the person's `prompt` (or the repository alone), told
/// which tickets exist already so that it does not propose them again. The contract section
/// is appended by the spawn.
#[must_use]
pub fn ideate_prompt(prompt: Option<&SourceText>, existing: &[String]) -> String {
    let mut out = String::from(
        "# Propose tickets\n\n\
         Propose tickets of work for this repository: each a self-contained piece of work a \
         small team would pick up, with a one-line title and a description of what it asks \
         for and why, concrete about the parts of the repository it touches. Read the \
         repository as much as you need, but change nothing in it: your only output is the \
         result file described at the end. Prefer a few tickets that matter over many small \
         ones.\n\n",
    );
    if !existing.is_empty() {
        out.push_str("## Tickets that exist already (do not propose these again)\n\n");
        for title in existing {
            let _ = writeln!(out, "- {title}");
        }
        out.push('\n');
    }
    match prompt {
        Some(prompt) => {
            let _ = writeln!(out, "## What the person asks for\n");
            let fence = fence_for(&prompt.text);
            let _ = writeln!(out, "{fence}markdown\n{}\n{fence}", prompt.text.trim_end());
        }
        None => out.push_str(
            "No one said what they want: propose what the repository needs most (gaps in its \
             tests or documentation, TODOs, rough edges a user would meet first).\n",
        ),
    }
    out
}

/// The `ideated-tickets` among a spawn's validated signals (its contract asks for exactly one).
#[must_use]
pub fn ideated_of(signals: &[Signal]) -> Option<&IdeatedTickets> {
    signals.iter().find_map(|signal| match signal {
        Signal::IdeatedTickets(tickets) => Some(tickets),
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
        | Signal::RefinedTicket(_)
        | Signal::TaskPlan(_)
        | Signal::AgentsMdProposal(_)
        | Signal::SetupScript(_)
        | Signal::VerifyScript(_) => None,
    })
}

/// A ticket as the Markdown file it is written to.
#[must_use]
pub fn ticket_markdown(ticket: &IdeatedTicket) -> String {
    format!(
        "# {}\n\n{}\n",
        ticket.title.trim(),
        ticket.description.trim()
    )
}

/// A file name stem for a ticket titled `title`: lower-case ASCII letters and digits joined by
/// `-`, at most 48 characters, `ticket` when nothing is left.
#[must_use]
pub fn ticket_slug(title: &str) -> String {
    let mut slug = String::new();
    for c in title.chars() {
        if c.is_ascii_alphanumeric() {
            slug.push(c.to_ascii_lowercase());
        } else if !slug.is_empty() && !slug.ends_with('-') {
            slug.push('-');
        }
        if slug.len() >= SLUG_MAX_CHARS {
            break;
        }
    }
    let slug = slug.trim_matches('-');
    if slug.is_empty() {
        "ticket".to_owned()
    } else {
        slug.to_owned()
    }
}

/// The file names for `tickets`, each `<slug>.md`, made unique among themselves and against
/// `taken` (the names already in the directory) with a `-2`, `-3`, ... suffix.
#[must_use]
pub fn ticket_file_names(tickets: &[IdeatedTicket], taken: &[String]) -> Vec<String> {
    let mut names: Vec<String> = Vec::with_capacity(tickets.len());
    for ticket in tickets {
        let slug = ticket_slug(&ticket.title);
        let mut n = 1;
        let name = loop {
            let candidate = if n == 1 {
                format!("{slug}.md")
            } else {
                format!("{slug}-{n}.md")
            };
            if !taken.contains(&candidate) && !names.contains(&candidate) {
                break candidate;
            }
            n += 1;
        };
        names.push(name);
    }
    names
}

#[cfg(test)]
mod tests {
    use corral_contract::IdeatedTicket;

    use super::{ticket_file_names, ticket_slug};

    #[test]
    fn slugs_are_plain_and_short() {
        assert_eq!(
            ticket_slug("Parse ISO dates (fast!)"),
            "parse-iso-dates-fast"
        );
        assert_eq!(ticket_slug("¿¡!"), "ticket");
        assert!(ticket_slug(&"word ".repeat(40)).len() <= 48);
    }

    #[test]
    fn names_never_collide() {
        let t = |title: &str| IdeatedTicket {
            title: title.into(),
            description: "d".into(),
        };
        let names = ticket_file_names(&[t("A b"), t("a-b"), t("c")], &["c.md".to_owned()]);
        assert_eq!(names, ["a-b.md", "a-b-2.md", "c-2.md"]);
    }
}
