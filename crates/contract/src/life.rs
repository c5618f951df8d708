//! The signal kinds of a sprint's life around its implementation: refining a ticket, planning
//! it into tasks, ideating tickets, making the repository ready for agents.
//!
//! These payloads travel the same way as the implementation's (`signals.json`, validated in
//! stages, a corrective prompt on a resumed session when they are wrong), so their rules are
//! garde rules like every other kind's: an agent's plan with a repeated task id or a cycle is
//! answered with the JSON path of the mistake, not accepted and refused later. (A dependency
//! on an id the plan does not have may be a task already in the sprint file, which this crate
//! does not see; the sprint file's own check names it when the plan meets the file.) The task id rule mirrors the sprint file's (`corral-sprint`'s `check_name`):
//! this crate cannot use that crate, and the sprint file is checked again when the plan is
//! written into it.

use garde::Validate;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::rules::{non_blank, single_line};
use crate::signal::FieldDoc;
use crate::timestamp::Timestamp;

/// The longest task id a plan may use (the sprint file's limit).
pub const PLANNED_TASK_ID_MAX_LEN: usize = 64;

/// The files a readiness proposal may write: the context file each CLI reads.
pub const AGENTS_CONTEXT_FILES: [&str; 3] =
    ["AGENTS.md", "CLAUDE.md", ".github/copilot-instructions.md"];

/// A ticket made precise enough to plan: its spec and the criteria that say when it is done.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Validate)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RefinedTicket {
    /// When the signal was emitted.
    #[garde(dive)]
    pub timestamp: Timestamp,
    /// The ticket's title, one line.
    #[garde(custom(non_blank), custom(single_line))]
    #[schemars(length(min = 1))]
    pub title: String,
    /// The specification (Markdown): what to build and what not to.
    #[garde(custom(non_blank))]
    #[schemars(length(min = 1))]
    pub spec: String,
    /// At least one criterion, each one checkable statement.
    #[garde(length(min = 1), inner(custom(non_blank)))]
    #[schemars(length(min = 1), inner(length(min = 1)))]
    pub acceptance_criteria: Vec<String>,
}

/// A plan of tasks for a sprint: ids, briefs, dependencies and acceptance criteria.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Validate)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TaskPlan {
    /// When the signal was emitted.
    #[garde(dive)]
    pub timestamp: Timestamp,
    /// At least one task; ids unique, no task depending on itself, no cycle among them. A
    /// dependency may name a task the sprint file already has, so whether each is known is
    /// checked when the plan meets the file.
    #[garde(
        length(min = 1),
        dive,
        custom(unique_task_ids),
        custom(no_self_dependency),
        custom(no_dependency_cycle)
    )]
    pub tasks: Vec<PlannedTask>,
}

/// One task of a [`TaskPlan`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Validate)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PlannedTask {
    /// The task's id: ASCII letters, digits, `.`, `_` and `-`, at most 64, not starting with
    /// `.` or `-`.
    #[garde(custom(task_id_shape))]
    #[schemars(
        length(min = 1, max = 64),
        regex(pattern = r"^[A-Za-z0-9_][A-Za-z0-9._-]*$")
    )]
    pub id: String,
    /// The task's title, one line.
    #[garde(custom(non_blank), custom(single_line))]
    #[schemars(length(min = 1))]
    pub title: String,
    /// What the generator is asked to do (Markdown).
    #[garde(custom(non_blank))]
    #[schemars(length(min = 1))]
    pub brief: String,
    /// The ids of the tasks that must be done first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[garde(skip)]
    pub depends_on: Vec<String>,
    /// What the evaluator checks the work against, one statement each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[garde(inner(custom(non_blank)))]
    #[schemars(inner(length(min = 1)))]
    pub acceptance_criteria: Vec<String>,
}

/// Tickets proposed from a prompt and the repository.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Validate)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct IdeatedTickets {
    /// When the signal was emitted.
    #[garde(dive)]
    pub timestamp: Timestamp,
    /// At least one ticket.
    #[garde(length(min = 1), dive)]
    pub tickets: Vec<IdeatedTicket>,
}

/// One proposed ticket.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Validate)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct IdeatedTicket {
    /// The ticket's title, one line.
    #[garde(custom(non_blank), custom(single_line))]
    #[schemars(length(min = 1))]
    pub title: String,
    /// What the ticket asks for and why (Markdown).
    #[garde(custom(non_blank))]
    #[schemars(length(min = 1))]
    pub description: String,
}

/// The content proposed for one of the agents' context files.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Validate)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AgentsMdProposal {
    /// When the signal was emitted.
    #[garde(dive)]
    pub timestamp: Timestamp,
    /// Which file: `AGENTS.md`, `CLAUDE.md` or `.github/copilot-instructions.md`.
    #[garde(custom(agents_context_file))]
    #[schemars(extend("enum" = ["AGENTS.md", "CLAUDE.md", ".github/copilot-instructions.md"]))]
    pub path: String,
    /// The file's whole proposed content (Markdown).
    #[garde(custom(non_blank))]
    #[schemars(length(min = 1))]
    pub content: String,
}

/// The command that prepares a fresh work tree (installs dependencies, builds).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Validate)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SetupScript {
    /// When the signal was emitted.
    #[garde(dive)]
    pub timestamp: Timestamp,
    /// The shell command.
    #[garde(custom(non_blank))]
    #[schemars(length(min = 1))]
    pub command: String,
    /// Why this command.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[garde(skip)]
    pub rationale: Option<String>,
}

/// The command that checks the whole repository after each round (the sprint's `check`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Validate)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct VerifyScript {
    /// When the signal was emitted.
    #[garde(dive)]
    pub timestamp: Timestamp,
    /// The shell command.
    #[garde(custom(non_blank))]
    #[schemars(length(min = 1))]
    pub command: String,
    /// Why this command.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[garde(skip)]
    pub rationale: Option<String>,
}

/// Why `id` is not a task id, or `None` when it is one; the sprint file's rule.
#[must_use]
pub fn task_id_problem(id: &str) -> Option<String> {
    let first = id.chars().next()?;
    let len = id.chars().count();
    if len > PLANNED_TASK_ID_MAX_LEN {
        return Some(format!(
            "is {len} characters long; at most {PLANNED_TASK_ID_MAX_LEN} are allowed"
        ));
    }
    if let Some(bad) = id
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return Some(format!(
            "holds {bad:?}; only ASCII letters, digits, '.', '_' and '-' are allowed"
        ));
    }
    if matches!(first, '.' | '-') {
        return Some(format!("starts with {first:?}"));
    }
    if id.contains("..") || id.ends_with(".lock") {
        return Some("holds `..` or ends in `.lock`, which git refuses in a branch name".into());
    }
    None
}

fn task_id_shape(id: &str, _ctx: &()) -> garde::Result {
    if id.is_empty() {
        return Err(garde::Error::new("must not be empty"));
    }
    match task_id_problem(id) {
        None => Ok(()),
        Some(problem) => Err(garde::Error::new(problem)),
    }
}

fn unique_task_ids(tasks: &[PlannedTask], _ctx: &()) -> garde::Result {
    let mut repeated: Vec<&str> = Vec::new();
    for (index, task) in tasks.iter().enumerate() {
        if tasks[..index].iter().any(|earlier| earlier.id == task.id)
            && !repeated.contains(&task.id.as_str())
        {
            repeated.push(&task.id);
        }
    }
    if repeated.is_empty() {
        return Ok(());
    }
    let names: Vec<String> = repeated.iter().map(|id| format!("`{id}`")).collect();
    Err(garde::Error::new(format!(
        "task id(s) {} used more than once; give each task its own id",
        names.join(", ")
    )))
}

fn no_self_dependency(tasks: &[PlannedTask], _ctx: &()) -> garde::Result {
    let selfish: Vec<String> = tasks
        .iter()
        .filter(|task| task.depends_on.contains(&task.id))
        .map(|task| format!("`{}`", task.id))
        .collect();
    if selfish.is_empty() {
        Ok(())
    } else {
        Err(garde::Error::new(format!(
            "task(s) {} depend on themselves; `dependsOn` names other tasks",
            selfish.join(", ")
        )))
    }
}

fn no_dependency_cycle(tasks: &[PlannedTask], _ctx: &()) -> garde::Result {
    // A task depending on itself is named by its own rule; here it would be said twice.
    let without_self: Vec<PlannedTask> = tasks
        .iter()
        .map(|task| {
            let mut task = task.clone();
            let id = task.id.clone();
            task.depends_on.retain(|d| *d != id);
            task
        })
        .collect();
    match dependency_cycle(&without_self) {
        None => Ok(()),
        Some(cycle) => Err(garde::Error::new(format!(
            "the dependencies form a cycle: {}; a task cannot wait for itself",
            cycle.join(" → ")
        ))),
    }
}

/// The first dependency cycle among `tasks` as a list of ids whose last repeats its first, or
/// `None`. Unknown dependencies are ignored (another rule names them).
#[must_use]
pub fn dependency_cycle(tasks: &[PlannedTask]) -> Option<Vec<String>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        OnPath,
        Done,
    }
    let index_of = |id: &str| tasks.iter().position(|t| t.id == id);
    let mut marks = vec![Mark::New; tasks.len()];
    for start in 0..tasks.len() {
        if marks[start] != Mark::New {
            continue;
        }
        // Iterative depth-first search: (task, next dependency to look at).
        let mut path: Vec<(usize, usize)> = vec![(start, 0)];
        marks[start] = Mark::OnPath;
        while let Some(&mut (node, ref mut next)) = path.last_mut() {
            let Some(dependency) = tasks[node].depends_on.get(*next) else {
                marks[node] = Mark::Done;
                path.pop();
                continue;
            };
            *next += 1;
            let Some(target) = index_of(dependency) else {
                continue;
            };
            match marks[target] {
                Mark::Done => {}
                Mark::New => {
                    marks[target] = Mark::OnPath;
                    path.push((target, 0));
                }
                Mark::OnPath => {
                    let from = path.iter().position(|(n, _)| *n == target).unwrap_or(0);
                    let mut cycle: Vec<String> = path[from..]
                        .iter()
                        .map(|(n, _)| tasks[*n].id.clone())
                        .collect();
                    cycle.push(tasks[target].id.clone());
                    return Some(cycle);
                }
            }
        }
    }
    None
}

fn agents_context_file(path: &str, _ctx: &()) -> garde::Result {
    if AGENTS_CONTEXT_FILES.contains(&path) {
        Ok(())
    } else {
        Err(garde::Error::new(format!(
            "must be one of {}",
            AGENTS_CONTEXT_FILES
                .iter()
                .map(|f| format!("`{f}`"))
                .collect::<Vec<_>>()
                .join(", ")
        )))
    }
}

/// The fields of `RefinedTicket` for the prompt.
pub(crate) const REFINED_TICKET_FIELDS: &[FieldDoc] = &[
    FieldDoc::text("title", "the ticket's title, one line"),
    FieldDoc::text(
        "spec",
        "the specification in Markdown: what to build, and what not to",
    ),
    FieldDoc::list_of_text(
        "acceptanceCriteria",
        true,
        "at least one criterion, each one checkable statement",
    ),
];

/// The fields of `TaskPlan` for the prompt.
pub(crate) const TASK_PLAN_FIELDS: &[FieldDoc] = &[FieldDoc {
    name: "tasks",
    required: true,
    ty: "list",
    description: "at least one task, in the order they should run; each task \
                              is an object with:",
    items: &[
        FieldDoc::text(
            "id",
            "unique in the plan: ASCII letters, digits, `.`, `_`, `-`, at \
                                 most 64, not starting with `.` or `-`",
        ),
        FieldDoc::text("title", "the task's title, one line"),
        FieldDoc::text(
            "brief",
            "what the implementing agent is asked to do, in Markdown; it \
                                 sees only this brief, so say everything it needs",
        ),
        FieldDoc::list_of_text(
            "dependsOn",
            false,
            "ids of tasks that must be done first: of this plan, or tasks the sprint \
                         file already has; no cycles",
        ),
        FieldDoc::list_of_text(
            "acceptanceCriteria",
            false,
            "what the reviewer checks the work against, one statement each",
        ),
    ],
}];

/// The fields of `IdeatedTickets` for the prompt.
pub(crate) const IDEATED_TICKETS_FIELDS: &[FieldDoc] = &[FieldDoc {
    name: "tickets",
    required: true,
    ty: "list",
    description: "at least one ticket; each ticket is an object with:",
    items: &[
        FieldDoc::text("title", "the ticket's title, one line"),
        FieldDoc::text("description", "what it asks for and why, in Markdown"),
    ],
}];

/// The fields of `AgentsMdProposal` for the prompt.
pub(crate) const AGENTS_MD_PROPOSAL_FIELDS: &[FieldDoc] = &[
    FieldDoc::text(
        "path",
        "`AGENTS.md`, `CLAUDE.md` or `.github/copilot-instructions.md`",
    ),
    FieldDoc::text("content", "the file's whole proposed content, in Markdown"),
];

/// The fields of `SetupScript` for the prompt.
pub(crate) const SETUP_SCRIPT_FIELDS: &[FieldDoc] = &[
    FieldDoc::text("command", "the shell command, run at the repository root"),
    FieldDoc::optional("rationale", "string", "why this command"),
];

/// The fields of `VerifyScript` for the prompt.
pub(crate) const VERIFY_SCRIPT_FIELDS: &[FieldDoc] = &[
    FieldDoc::text(
        "command",
        "the shell command, run at the repository root; exit 0 means good",
    ),
    FieldDoc::optional("rationale", "string", "why this command"),
];

#[cfg(test)]
mod tests {
    use super::{PlannedTask, dependency_cycle, task_id_problem};

    fn task(id: &str, depends_on: &[&str]) -> PlannedTask {
        PlannedTask {
            id: id.to_owned(),
            title: id.to_owned(),
            brief: id.to_owned(),
            depends_on: depends_on.iter().map(|d| (*d).to_owned()).collect(),
            acceptance_criteria: Vec::new(),
        }
    }

    #[test]
    fn a_cycle_is_named_in_order() {
        let tasks = [task("a", &["c"]), task("b", &["a"]), task("c", &["b"])];
        assert_eq!(
            dependency_cycle(&tasks),
            Some(vec!["a".into(), "c".into(), "b".into(), "a".into()])
        );
        let chain = [
            task("a", &[]),
            task("b", &["a"]),
            task("c", &["a", "b", "zz"]),
        ];
        assert_eq!(dependency_cycle(&chain), None);
        assert_eq!(
            dependency_cycle(&[task("x", &["x"])]),
            Some(vec!["x".into(), "x".into()])
        );
    }

    #[test]
    fn task_ids_follow_the_sprint_file_rule() {
        for ok in ["t1", "parse-dates", "A_b.c"] {
            assert_eq!(task_id_problem(ok), None, "{ok}");
        }
        for bad in ["-x", ".x", "a b", "a..b", "x.lock", &"a".repeat(65)] {
            assert!(task_id_problem(bad).is_some(), "{bad}");
        }
    }
}
