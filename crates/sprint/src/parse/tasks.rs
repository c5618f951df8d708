//! The sprint file's tasks: each task's keys, its prompt or brief, its globs and its
//! dependencies, then what only the whole list shows (duplicate ids, unknown or circular
//! dependencies).

use std::collections::HashMap;
use std::ops::Range;
use std::path::Path;

use toml_edit::{Item, TableLike};

use crate::diagnostic::{Rule, did_you_mean, line_col};
use crate::file::{Task, TaskPrompt, limits};
use crate::names::TaskId;

use super::{Cx, Entry, Span, gate_path_problem, join, kind};

pub(crate) const TASK_KEYS: &[&str] = &[
    "id",
    "title",
    "prompt",
    "brief",
    "depends_on",
    "may_edit",
    "touches",
    "max_cost_usd",
    "acceptance_criteria",
];

impl Cx<'_> {
    /// Every `[[tasks]]` entry, valid or not (the cross-checks need every id).
    pub(super) fn tasks(&mut self, root: &dyn TableLike) -> Vec<Entry> {
        let entries = self.table_array(root, "tasks");
        if entries.is_empty()
            && root
                .get("tasks")
                .is_none_or(|item| item.is_array_of_tables() || item.as_array().is_some())
        {
            self.report(
                None,
                "tasks",
                Rule::NoTasks,
                "the file has no [[tasks]]; a sprint needs at least one".to_string(),
            );
        }
        entries
            .into_iter()
            .enumerate()
            .map(|(i, (t, at))| self.task(t, i, at))
            .collect()
    }

    fn task(&mut self, t: &dyn TableLike, index: usize, at: Option<Range<usize>>) -> Entry {
        let path = format!("tasks[{index}]");
        self.unknown_keys(t, &path, TASK_KEYS);
        let line = line_col(self.src, at.as_ref().map_or(0, |s| s.start)).0;
        let id = self
            .string(t, &path, "id", true, at.clone())
            .and_then(|(id, span)| match TaskId::new(id.as_str()) {
                Ok(id) => Some(id),
                Err(e) => {
                    self.report(
                        span,
                        &join(&path, "id"),
                        Rule::BadName,
                        format!("{id:?} {e}"),
                    );
                    None
                }
            });
        let title = self
            .string(t, &path, "title", true, at.clone())
            .map(|(s, _)| s);
        let prompt = self.prompt(t, &path, at);
        let deps = self.depends_on(t, &path);
        let may_edit = self.globs(t, &path, "may_edit");
        let touches = self.globs(t, &path, "touches");
        let max_cost_usd = self.dollars(t, &path, "max_cost_usd");
        let criteria = self.criteria(t, &path);
        let task = match (
            id.clone(),
            title,
            prompt,
            &deps,
            may_edit,
            touches,
            max_cost_usd,
            criteria,
        ) {
            (
                Some(id),
                Some(title),
                Some(prompt),
                Some(deps),
                Some(may_edit),
                Some(touches),
                Ok(max_cost_usd),
                Some(acceptance_criteria),
            ) => Some(Task {
                id,
                title,
                prompt,
                depends_on: deps.iter().map(|(d, _)| d.clone()).collect(),
                may_edit,
                touches,
                max_cost_usd,
                acceptance_criteria,
                line,
            }),
            _ => None,
        };
        Entry {
            index,
            line,
            id,
            deps: deps.unwrap_or_default(),
            task,
        }
    }

    /// `prompt` or `brief`, exactly one; a brief is read now, so that a missing file is found
    /// by `corral sprint check`, not halfway through a sprint.
    fn prompt(
        &mut self,
        t: &dyn TableLike,
        path: &str,
        at: Option<Range<usize>>,
    ) -> Option<TaskPrompt> {
        match (t.get("prompt").is_some(), t.get("brief").is_some()) {
            (true, true) => {
                self.report(
                    Self::span_of(t, "brief"),
                    &join(path, "brief"),
                    Rule::PromptAndBrief,
                    "a task has a prompt or a brief, not both".to_string(),
                );
                None
            }
            (false, false) => {
                self.report(
                    at,
                    path,
                    Rule::NoPrompt,
                    "the task has neither a prompt nor a brief (a file)".to_string(),
                );
                None
            }
            (true, false) => self
                .string(t, path, "prompt", true, None)
                .map(|(p, _)| TaskPrompt::Inline(p)),
            (false, true) => {
                let (name, span) = self.string(t, path, "brief", true, None)?;
                // Beside a bare `corral-sprint.toml` the brief is named as written, not `./x`.
                let file = match self.file.parent() {
                    Some(dir) if !dir.as_os_str().is_empty() => dir.join(&name),
                    Some(_) | None => Path::new(&name).to_path_buf(),
                };
                match read_brief(crate::file::base_dir(self.file), &name, &file) {
                    Ok(text) => Some(TaskPrompt::Brief { path: file, text }),
                    Err((rule, why)) => {
                        self.report(span, &join(path, "brief"), rule, why);
                        None
                    }
                }
            }
        }
    }

    /// A list of path globs at `key` (`sprint.protected`, a task's `may_edit` or `touches`), relative to
    /// the work tree's top: empty when absent; `None` when it is no list of such globs
    /// (reported).
    pub(super) fn globs(
        &mut self,
        t: &dyn TableLike,
        path: &str,
        key: &str,
    ) -> Option<Vec<String>> {
        let full = join(path, key);
        let Some(item) = t.get(key) else {
            return Some(Vec::new());
        };
        let Some(array) = item.as_array() else {
            self.report(
                Self::span_of(t, key),
                &full,
                Rule::WrongType,
                format!("is {}, expected a list of path globs", kind(item)),
            );
            return None;
        };
        let mut globs = Vec::new();
        let mut ok = true;
        for value in array.iter() {
            let Some(s) = value.as_str() else {
                self.report(
                    value.span(),
                    &full,
                    Rule::WrongType,
                    format!(
                        "holds {}, expected path globs (strings)",
                        kind(&Item::Value(value.clone()))
                    ),
                );
                ok = false;
                continue;
            };
            let problem = if s.trim().is_empty() {
                Some((Rule::Empty, "holds an empty glob".to_string()))
            } else {
                gate_path_problem(s).map(|why| {
                    (
                        Rule::BadPath,
                        format!("{s:?} {}", why.replace("a gate path", "a glob")),
                    )
                })
            };
            match problem {
                Some((rule, message)) => {
                    self.report(value.span(), &full, rule, message);
                    ok = false;
                }
                None => globs.push(s.trim_start_matches("./").to_string()),
            }
        }
        ok.then_some(globs)
    }

    /// `depends_on`: a list of task ids, duplicates dropped, each with its span; `None` when
    /// it is not a list of valid ids (reported).
    /// `acceptance_criteria`: a list of non-empty statements; empty when absent; `None` when it
    /// is no such list (reported).
    fn criteria(&mut self, t: &dyn TableLike, path: &str) -> Option<Vec<String>> {
        let full = join(path, "acceptance_criteria");
        let Some(item) = t.get("acceptance_criteria") else {
            return Some(Vec::new());
        };
        let Some(array) = item.as_array() else {
            self.report(
                Self::span_of(t, "acceptance_criteria"),
                &full,
                Rule::WrongType,
                format!("is {}, expected a list of criteria (strings)", kind(item)),
            );
            return None;
        };
        let mut criteria = Vec::new();
        let mut ok = true;
        for value in array.iter() {
            match value.as_str() {
                Some(s) if !s.trim().is_empty() => criteria.push(s.trim().to_string()),
                Some(_) => {
                    self.report(
                        value.span(),
                        &full,
                        Rule::Empty,
                        "holds an empty criterion".to_string(),
                    );
                    ok = false;
                }
                None => {
                    self.report(
                        value.span(),
                        &full,
                        Rule::WrongType,
                        format!(
                            "holds {}, expected criteria (strings)",
                            kind(&Item::Value(value.clone()))
                        ),
                    );
                    ok = false;
                }
            }
        }
        ok.then_some(criteria)
    }

    fn depends_on(&mut self, t: &dyn TableLike, path: &str) -> Option<Vec<(TaskId, Span)>> {
        let full = join(path, "depends_on");
        let Some(item) = t.get("depends_on") else {
            return Some(Vec::new());
        };
        let Some(array) = item.as_array() else {
            self.report(
                Self::span_of(t, "depends_on"),
                &full,
                Rule::WrongType,
                format!("is {}, expected a list of task ids", kind(item)),
            );
            return None;
        };
        let mut deps: Vec<(TaskId, Span)> = Vec::new();
        let mut ok = true;
        for value in array.iter() {
            let Some(s) = value.as_str() else {
                self.report(
                    value.span(),
                    &full,
                    Rule::WrongType,
                    format!(
                        "holds {}, expected task ids (strings)",
                        kind(&Item::Value(value.clone()))
                    ),
                );
                ok = false;
                continue;
            };
            match TaskId::new(s) {
                Ok(id) if deps.iter().any(|(d, _)| d == &id) => {}
                Ok(id) => deps.push((id, value.span())),
                Err(e) => {
                    self.report(value.span(), &full, Rule::BadName, format!("{s:?} {e}"));
                    ok = false;
                }
            }
        }
        ok.then_some(deps)
    }

    /// What only the whole list shows: duplicate ids, dependencies on no task, cycles. Every
    /// entry with a valid id takes part, even one invalid otherwise, so that one broken task
    /// does not make its dependents' references look wrong too.
    pub(super) fn cross_check(&mut self, entries: &[Entry]) {
        let mut first: HashMap<&TaskId, usize> = HashMap::new();
        for entry in entries {
            let Some(id) = &entry.id else { continue };
            match first.get(id) {
                Some(&line) => {
                    let at = self.line_span(entry.line);
                    self.report(
                        at,
                        &format!("tasks[{}].id", entry.index),
                        Rule::DuplicateTaskId,
                        format!(
                            "{:?} is already the id of the task on line {line}",
                            id.as_str()
                        ),
                    );
                }
                None => {
                    first.insert(id, entry.line);
                }
            }
        }
        // In file order, so that a tie between two close ids always names the same one.
        let ids: Vec<&str> = entries
            .iter()
            .filter_map(|e| e.id.as_ref().map(TaskId::as_str))
            .collect();
        for entry in entries {
            for (dep, span) in &entry.deps {
                if first.contains_key(dep) {
                    continue;
                }
                let hint = did_you_mean(dep.as_str(), ids.iter().copied())
                    .map_or(String::new(), |m| format!("; did you mean {m:?}?"));
                let whose = entry.id.as_ref().map_or("the task".to_string(), |id| {
                    format!("task {:?}", id.as_str())
                });
                self.report(
                    span.clone(),
                    &format!("tasks[{}].depends_on", entry.index),
                    Rule::UnknownDependency,
                    format!(
                        "{whose} depends on {:?}, which is no task's id{hint}",
                        dep.as_str()
                    ),
                );
            }
        }
        // The cycle search needs only ids and dependencies.
        let graph: Vec<(Task, usize)> = entries
            .iter()
            .filter_map(|e| {
                let id = e.id.clone()?;
                let task = Task {
                    id,
                    title: String::new(),
                    prompt: TaskPrompt::Inline(String::new()),
                    depends_on: e.deps.iter().map(|(d, _)| d.clone()).collect(),
                    may_edit: Vec::new(),
                    touches: Vec::new(),
                    max_cost_usd: None,
                    acceptance_criteria: Vec::new(),
                    line: e.line,
                };
                Some((task, e.index))
            })
            .collect();
        let list: Vec<Task> = graph.iter().map(|(t, _)| t.clone()).collect();
        for cycle in crate::order::cycles(&list) {
            let Some(head) = cycle.first() else { continue };
            let Some((task, index)) = graph.iter().find(|(t, _)| &t.id == head) else {
                continue;
            };
            let mut names: Vec<&str> = cycle.iter().map(TaskId::as_str).collect();
            names.push(head.as_str());
            let at = self.line_span(task.line);
            self.report(
                at,
                &format!("tasks[{index}].depends_on"),
                Rule::DependencyCycle,
                format!(
                    "the tasks depend on each other in a cycle: {}",
                    names.join(" -> ")
                ),
            );
        }
    }
}

/// Reads a brief, `name` as written relative to `sprint_dir`, inside the work tree only
/// (`intree.rs`); the rule and the reason when it cannot be used.
fn read_brief(sprint_dir: &Path, name: &str, file: &Path) -> Result<String, (Rule, String)> {
    let shown = file.display();
    let bytes = crate::intree::read_brief_in_tree(sprint_dir, name, file, limits::FILE_LIMIT)?;
    match String::from_utf8(bytes) {
        Ok(text) if text.trim().is_empty() => {
            Err((Rule::BriefUnreadable, format!("the brief {shown} is empty")))
        }
        Ok(text) => Ok(text),
        Err(_) => Err((
            Rule::BriefUnreadable,
            format!("the brief {shown} is not UTF-8 text"),
        )),
    }
}
