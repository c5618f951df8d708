//! Readiness: the prompt that asks what makes the repository ready for agents (their context
//! files, a setup command, the check and the gates), the proposal gathered from the agent's
//! signals, the changes it would make shown as a diff, and the changes applied.
//!
//! How a proposal meets the sprint file: `verify-script` becomes `[sprint] check`,
//! `setup-script` `[sprint] setup`, and each gate of `verify-gates` updates the `[[gates]]`
//! with the same `path` in place or is appended; everything else (comments, the tasks, other
//! gates) stays as written. The edited text is checked with `sprint check`'s rules before
//! anything is shown, and nothing is written before the user accepts.

use std::fmt::Write as _;

use corral_contract::{AgentsMdProposal, SetupScript, Signal, VerifyGates, VerifyScript};
use serde::{Deserialize, Serialize};
use toml_edit::{ArrayOfTables, DocumentMut, Item, Table, value};

use super::LifeError;
use super::plan::fence_for;
use crate::file::SprintFile;

/// The flow's directory under the sprint's record: `.corral/sprints/<name>/ready/`.
pub const READY_DIR: &str = "ready";

/// The proposal, as validated, in its spawn's directory.
pub const PROPOSAL_FILE: &str = "proposal.json";

/// Written in the spawn's directory once the proposal was applied: which files it changed.
pub const APPLIED_FILE: &str = "applied.json";

/// The most bytes of an existing context file shown to the agent.
const CONTEXT_SHOWN_MAX_BYTES: usize = 16 * 1024;

/// What an agent proposed to make the repository ready, one entry per context file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReadyProposal {
    /// The context files, the last proposal per path, in the order first proposed.
    pub context_files: Vec<AgentsMdProposal>,
    /// The setup command, if one was proposed.
    pub setup: Option<SetupScript>,
    /// The check.
    pub check: VerifyScript,
    /// The gates, if any were proposed.
    pub gates: Option<VerifyGates>,
}

/// What was applied, recorded as `applied.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReadyApplied {
    /// When, RFC 3339 in UTC.
    pub at: String,
    /// The files written, relative to the project.
    pub files: Vec<String>,
}

/// One file a proposal changes: its path relative to the project, its text before (`None`:
/// it does not exist) and after.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileChange {
    /// Relative to the project.
    pub path: String,
    /// The text now; `None` when the file is new.
    pub before: Option<String>,
    /// The text it would have.
    pub after: String,
}

impl FileChange {
    /// The change as a unified diff (`--- a/PATH`, `+++ b/PATH`, three lines of context).
    #[must_use]
    pub fn diff(&self) -> String {
        let before = self.before.as_deref().unwrap_or("");
        let old = if self.before.is_some() {
            format!("a/{}", self.path)
        } else {
            "/dev/null".to_owned()
        };
        similar::TextDiff::from_lines(before, &self.after)
            .unified_diff()
            .context_radius(3)
            .header(&old, &format!("b/{}", self.path))
            .to_string()
    }
}

/// The prompt asking what makes the repository ready for agents, told what the sprint file
/// and the context files say now. The contract section is appended by the spawn.
#[must_use]
pub fn ready_prompt(file: &SprintFile, context: &[(String, Option<String>)]) -> String {
    let mut out = String::from(
        "# Make this repository ready for coding agents\n\n\
         Coding agents will work on this repository one task at a time, unattended. Read it \
         (its build files, its README, its CI configuration, its tests) and propose what they \
         need, without changing anything: your only output is the result file described at \
         the end.\n\n\
         - `verify-script`: the one shell command, run at the repository's root, that says \
         whether the tree is good (builds and passes its tests; exit 0 means good). It runs \
         after every round, so it should take minutes at most.\n\
         - `setup-script` (optional): the shell command that prepares a fresh clone before the \
         first task (installs dependencies), when one is needed.\n\
         - `verify-gates` (optional): further commands for changes under a path prefix (the \
         docs' build for `docs/`, say), only where the check does not already cover them.\n\
         - `agents-md-proposal`: for each context file below that is missing or out of date, \
         its whole new content: what the project is, how it is laid out, how to build, test \
         and check it, and its conventions. Keep what is still true in a file that exists.\n\n",
    );
    let s = &file.sprint;
    let _ = writeln!(
        out,
        "## The sprint file now\n\n- check: `{}`\n- setup: {}",
        s.check,
        s.setup
            .as_deref()
            .map_or("none".to_owned(), |c| format!("`{c}`"))
    );
    if file.gates.is_empty() {
        out.push_str("- gates: none\n");
    }
    for gate in &file.gates {
        let _ = writeln!(
            out,
            "- gate: changes under `{}` run `{}`",
            gate.path, gate.command
        );
    }
    out.push_str("\n## The agents' context files now\n\n");
    for (path, text) in context {
        match text {
            None => {
                let _ = writeln!(out, "- `{path}`: missing");
            }
            Some(text) => {
                let shown: String = if text.len() > CONTEXT_SHOWN_MAX_BYTES {
                    let mut end = CONTEXT_SHOWN_MAX_BYTES;
                    while !text.is_char_boundary(end) {
                        end -= 1;
                    }
                    format!("{}\n[... cut: read the file for the rest]", &text[..end])
                } else {
                    text.clone()
                };
                let fence = fence_for(&shown);
                let _ = writeln!(
                    out,
                    "- `{path}`:\n\n{fence}markdown\n{}\n{fence}\n",
                    shown.trim_end()
                );
            }
        }
    }
    out
}

/// The proposal among a readiness spawn's validated signals: the verify script (the contract
/// asks for exactly one), the setup script and gates when given, and the last context-file
/// proposal per path. `None` without a verify script.
#[must_use]
pub fn ready_proposal_of(signals: &[Signal]) -> Option<ReadyProposal> {
    let mut context_files: Vec<AgentsMdProposal> = Vec::new();
    let mut setup = None;
    let mut check = None;
    let mut gates = None;
    for signal in signals {
        match signal {
            Signal::AgentsMdProposal(p) => {
                match context_files.iter_mut().find(|c| c.path == p.path) {
                    Some(earlier) => *earlier = p.clone(),
                    None => context_files.push(p.clone()),
                }
            }
            Signal::SetupScript(s) => setup = Some(s.clone()),
            Signal::VerifyScript(v) => check = Some(v.clone()),
            Signal::VerifyGates(g) => gates = Some(g.clone()),
            Signal::TaskComplete(_)
            | Signal::TaskBlocked(_)
            | Signal::TaskVerified(_)
            | Signal::Note(_)
            | Signal::Decision(_)
            | Signal::Learning(_)
            | Signal::Change(_)
            | Signal::CommitMessage(_)
            | Signal::PrContent(_)
            | Signal::Evaluation(_)
            | Signal::RefinedTicket(_)
            | Signal::TaskPlan(_)
            | Signal::IdeatedTickets(_) => {}
        }
    }
    Some(ReadyProposal {
        context_files,
        setup,
        check: check?,
        gates,
    })
}

/// The sprint file `file` whose text is `current` with `proposal`'s check, setup and gates
/// applied, checked with the sprint file's rules.
///
/// # Errors
///
/// [`LifeError::NotToml`] when `current` does not parse; [`LifeError::PlanDoesNotFit`] when
/// the result breaks the sprint file's rules.
pub fn apply_ready(
    file: &std::path::Path,
    current: &str,
    proposal: &ReadyProposal,
) -> Result<String, LifeError> {
    let not_toml = |message: String| LifeError::NotToml {
        file: file.to_owned(),
        message,
    };
    let mut doc: DocumentMut = current
        .parse()
        .map_err(|e: toml_edit::TomlError| not_toml(e.message().to_owned()))?;
    let Some(sprint) = doc.get_mut("sprint").and_then(Item::as_table_mut) else {
        return Err(not_toml("there is no [sprint] table".to_owned()));
    };
    set_keeping_comments(sprint, "check", proposal.check.command.trim());
    if let Some(setup) = &proposal.setup {
        set_keeping_comments(sprint, "setup", setup.command.trim());
    }
    if let Some(proposed) = &proposal.gates {
        if doc.get("gates").is_some_and(|g| !g.is_array_of_tables()) {
            return Err(not_toml(
                "`gates` is not a list of [[gates]] tables".to_owned(),
            ));
        }
        if doc.get("gates").is_none() {
            // Before the tasks, where `sprint init`'s example has them.
            doc.insert("gates", Item::ArrayOfTables(ArrayOfTables::new()));
        }
        let Some(gates) = doc.get_mut("gates").and_then(Item::as_array_of_tables_mut) else {
            return Err(not_toml(
                "`gates` is not a list of [[gates]] tables".to_owned(),
            ));
        };
        for gate in &proposed.gates {
            let existing = gates
                .iter_mut()
                .find(|t| t.get("path").and_then(Item::as_str) == Some(gate.path_prefix.as_str()));
            let table = match existing {
                Some(table) => table,
                None => {
                    let mut table = Table::new();
                    table["path"] = value(gate.path_prefix.as_str());
                    gates.push(table);
                    let last = gates.len() - 1;
                    match gates.get_mut(last) {
                        Some(table) => table,
                        None => continue,
                    }
                }
            };
            set_keeping_comments(table, "command", gate.command.trim());
            match gate.timeout_ms.and_then(|t| i64::try_from(t).ok()) {
                Some(ms) => table["timeout_ms"] = value(ms),
                None => {
                    table.remove("timeout_ms");
                }
            }
        }
    }
    let text = doc.to_string();
    if let Err(error) = crate::parse::parse(file, &text) {
        return Err(match error {
            crate::file::SprintFileError::Invalid { diagnostics, .. } => {
                LifeError::PlanDoesNotFit {
                    file: file.to_owned(),
                    diagnostics,
                }
            }
            crate::file::SprintFileError::Unreadable(e) => LifeError::Unreadable(e),
        });
    }
    Ok(text)
}

/// Sets `key` of `table` to the string `text`, keeping the comment after the old value (`check
/// = "true" # replace this`) and the space around it.
fn set_keeping_comments(table: &mut Table, key: &str, text: &str) {
    match table.get_mut(key).and_then(Item::as_value_mut) {
        Some(old) => {
            let decor = old.decor().clone();
            *old = toml_edit::Value::from(text);
            *old.decor_mut() = decor;
        }
        None => table[key] = value(text),
    }
}

#[cfg(test)]
mod tests {
    use corral_contract::{Gate, SetupScript, Timestamp, VerifyGates, VerifyScript};

    use super::{FileChange, ReadyProposal, apply_ready};

    fn ts() -> Timestamp {
        Timestamp::parse("2026-12-07T10:00:00Z").unwrap()
    }

    const FILE: &str = "# keep me\n[sprint]\nname = \"s\"\ncheck = \"true\" # replace\n\n\
        [roles.generator]\nprovider = \"claude\"\n\n[[gates]]\npath = \"docs/\"\n\
        command = \"old\"\n\n[[tasks]]\nid = \"a\"\ntitle = \"A\"\nprompt = \"p\"\n";

    #[test]
    fn a_proposal_edits_check_setup_and_gates_and_keeps_the_rest() {
        let proposal = ReadyProposal {
            context_files: Vec::new(),
            setup: Some(SetupScript {
                timestamp: ts(),
                command: "npm ci".into(),
                rationale: None,
            }),
            check: VerifyScript {
                timestamp: ts(),
                command: "npm test".into(),
                rationale: None,
            },
            gates: Some(VerifyGates {
                timestamp: ts(),
                gates: vec![
                    Gate {
                        path_prefix: "docs/".into(),
                        command: "make docs".into(),
                        timeout_ms: Some(60_000),
                    },
                    Gate {
                        path_prefix: "web/".into(),
                        command: "npm run lint".into(),
                        timeout_ms: None,
                    },
                ],
            }),
        };
        let text = apply_ready("corral-sprint.toml".as_ref(), FILE, &proposal).unwrap();
        assert!(text.starts_with("# keep me\n"), "{text}");
        assert!(text.contains("check = \"npm test\" # replace"), "{text}");
        assert!(text.contains("setup = \"npm ci\""), "{text}");
        assert!(
            text.contains("path = \"docs/\"\ncommand = \"make docs\"\ntimeout_ms = 60000"),
            "{text}"
        );
        assert!(text.contains("path = \"web/\""), "{text}");
        assert!(!text.contains("old"), "{text}");
        assert!(text.contains("id = \"a\""), "{text}");
    }

    #[test]
    fn a_diff_names_both_sides() {
        let change = FileChange {
            path: "AGENTS.md".into(),
            before: None,
            after: "# Agents\n".into(),
        };
        let diff = change.diff();
        assert!(diff.contains("--- /dev/null"), "{diff}");
        assert!(diff.contains("+++ b/AGENTS.md"), "{diff}");
        assert!(diff.contains("+# Agents"), "{diff}");
    }
}
