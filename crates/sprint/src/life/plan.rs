//! Planning: the prompt that asks for a `task-plan`, the plan's record, and the plan applied to
//! `corral-sprint.toml` with `toml_edit`, so that the user's comments, key order and hand
//! edits survive.
//!
//! How a plan meets the file: a planned task whose id is already in the file updates that
//! task's `title`, `prompt`, `depends_on` and `acceptance_criteria` in place (a task written
//! with a `brief` file keeps its brief: the file is the user's); a new id is appended as a new
//! `[[tasks]]`; tasks the plan does not name stay as they are. The merged text is validated
//! with the same rules as `corral sprint check` before anything is written, and it is written
//! whole into a new file renamed over the old one, so a crash leaves the old file or the new.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use corral_contract::{Signal, TaskPlan, read_session_id, read_untrusted_file_within_directory};
use corral_hostfs::{Flush, HostDir};
use corral_ports::run_dir::{RUN_FILE, SESSION_ID_FILE, SESSION_META_FILE};
use corral_ports::{ProviderId, SessionId};
use toml_edit::{Array, ArrayOfTables, DocumentMut, Item, Table, value};

use super::{LifeError, SourceText};
use crate::file::SprintFile;
use crate::layout::SprintLayout;

/// The flow's directory under the sprint's record: `.corral/sprints/<name>/plan/`.
pub const PLAN_DIR: &str = "plan";

/// The accepted plan, as validated, in its spawn's directory (`plan/<n>/plan.json`).
pub const PLAN_FILE: &str = "plan.json";

/// The sprint file's text with a plan applied, and what the plan did to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanMerge {
    /// The new text of the sprint file.
    pub text: String,
    /// The ids of the tasks the plan added, in order.
    pub added: Vec<String>,
    /// The ids of the tasks the plan changed in place.
    pub updated: Vec<String>,
    /// The ids of tasks already in the file that the plan did not name (left as they were).
    pub kept: Vec<String>,
    /// The ids of updated tasks whose `brief` file was kept rather than replaced by the plan's
    /// text.
    pub briefs_kept: Vec<String>,
}

/// The prompt asking for a plan of `sources`, telling the agent what the sprint file already
/// holds so that it extends it rather than repeats it. The contract section is appended by
/// the spawn.
#[must_use]
pub fn plan_prompt(sources: &[SourceText], existing: Option<&SprintFile>) -> String {
    let mut out = String::from(
        "# Plan a sprint\n\n\
         Turn the ticket(s) below into a plan of tasks that coding agents carry out one at a \
         time, each in its own session that sees only its task's brief and the repository. \
         Read the repository as much as you need to make each brief concrete (files, \
         functions, commands), but change nothing: your only output is the result file \
         described at the end.\n\n\
         For each task give:\n\
         - a short `id` (like `parse-dates`) and a one-line `title`;\n\
         - a `brief` that says everything its agent needs, since it sees nothing else;\n\
         - `dependsOn`: the ids of tasks that must be done first (no cycles);\n\
         - `acceptanceCriteria`: checkable statements a reviewer will hold the work to.\n\n\
         Prefer a few tasks that each leave the project working over many small ones.\n\n",
    );
    if let Some(file) = existing
        && !file.tasks.is_empty()
    {
        out.push_str(
            "## The sprint's current tasks\n\n\
             The sprint file already has these tasks. A task in your plan with one of these ids \
             replaces that task's title, brief, dependencies and criteria; a new id adds a \
             task; tasks you leave out stay. New tasks may depend on these ids.\n\n",
        );
        for task in &file.tasks {
            let _ = write!(out, "- `{}`: {}", task.id, task.title);
            if !task.depends_on.is_empty() {
                let deps: Vec<String> = task.depends_on.iter().map(|d| format!("`{d}`")).collect();
                let _ = write!(out, " (after {})", deps.join(", "));
            }
            out.push('\n');
        }
        out.push('\n');
    }
    for source in sources {
        let _ = writeln!(out, "## Ticket: {}\n", source.label);
        let fence = fence_for(&source.text);
        let _ = writeln!(
            out,
            "{fence}markdown\n{}\n{fence}\n",
            source.text.trim_end()
        );
    }
    out
}

/// A code fence longer than any run of backticks in `text`, so the text cannot close it.
pub(super) fn fence_for(text: &str) -> String {
    let mut longest = 0;
    let mut run = 0;
    for c in text.chars() {
        if c == '`' {
            run += 1;
            longest = longest.max(run);
        } else {
            run = 0;
        }
    }
    "`".repeat((longest + 1).max(3))
}

/// The `task-plan` among a planning spawn's validated signals (its contract asks for exactly
/// one).
#[must_use]
pub fn plan_of(signals: &[Signal]) -> Option<&TaskPlan> {
    signals.iter().find_map(|signal| match signal {
        Signal::TaskPlan(plan) => Some(plan),
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
        | Signal::IdeatedTickets(_)
        | Signal::AgentsMdProposal(_)
        | Signal::SetupScript(_)
        | Signal::VerifyScript(_) => None,
    })
}

/// A new, empty directory for the next planning spawn: `plan/<n>/` (see [`flow_spawn_dir`]).
///
/// # Errors
///
/// [`LifeError::Write`] when the record cannot be made or is tampered with.
pub fn plan_spawn_dir(layout: &SprintLayout) -> Result<PathBuf, LifeError> {
    flow_spawn_dir(layout, PLAN_DIR)
}

/// A new, empty directory for the next spawn of the flow `flow`: `<flow>/<n>/` under the
/// sprint's record, with `n` one above the highest there, made without following a link. An
/// interrupted flow leaves its directory as evidence; the next starts beside it.
///
/// # Errors
///
/// [`LifeError::Write`] when the record cannot be made or is tampered with.
pub fn flow_spawn_dir(layout: &SprintLayout, flow: &str) -> Result<PathBuf, LifeError> {
    let write = |source| LifeError::Write {
        what: format!("the {flow} record under {}", layout.root().display()),
        source,
    };
    let dirs = layout
        .record()
        .and_then(|r| r.create_dir(flow))
        .map_err(write)?;
    let mut n: u32 = 1;
    while dirs.kind(n.to_string()).map_err(write)?.is_some() {
        n += 1;
    }
    dirs.fresh_dir(n.to_string()).map_err(write)?;
    Ok(layout.root().join(flow).join(n.to_string()))
}

/// The flow's last spawn directory and its session, when that spawn was cut short (killed,
/// cancelled, the machine down) after the CLI named its session and before the agent's
/// `signals.json` was found valid, and the session is one this spawn may resume: made by
/// `provider` with `model` in `cwd` (its `session.json`). A rerun resumes it in that directory,
/// as the implement chain resumes a round, instead of starting a new session beside it.
///
/// Every file read is the agent's to forge: each is read as untrusted (size capped; the records
/// through no link out of the spawn's directory), and anything unreadable or unexpected means
/// "start afresh", never an error.
pub fn unfinished_flow_spawn(
    layout: &SprintLayout,
    flow: &str,
    provider: ProviderId,
    model: Option<&str>,
    cwd: &Path,
) -> Option<(PathBuf, SessionId)> {
    const RECORD_MAX_BYTES: u64 = 1024 * 1024;
    let flow_dir = layout.root().join(flow);
    let is_dir = |p: &Path| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_dir());
    if !is_dir(&flow_dir) {
        return None;
    }
    // The directories are numbered from 1 without a gap (flow_spawn_dir): the last is the one
    // below the first number missing.
    let mut n: u32 = 1;
    while std::fs::symlink_metadata(flow_dir.join(n.to_string())).is_ok() {
        n += 1;
    }
    let dir = flow_dir.join(n.checked_sub(1).filter(|&l| l > 0)?.to_string());
    if !is_dir(&dir) {
        return None;
    }
    let session = read_session_id(&dir.join(SESSION_ID_FILE)).ok().flatten()?;
    let run: serde_json::Value = serde_json::from_slice(
        &read_untrusted_file_within_directory(&dir.join(RUN_FILE), RECORD_MAX_BYTES).ok()?,
    )
    .ok()?;
    if run.get("signalsValid").and_then(serde_json::Value::as_bool) == Some(true) {
        return None;
    }
    let meta: serde_json::Value = serde_json::from_slice(
        &read_untrusted_file_within_directory(&dir.join(SESSION_META_FILE), RECORD_MAX_BYTES)
            .ok()?,
    )
    .ok()?;
    let made_by = meta.get("provider").and_then(serde_json::Value::as_str)?;
    let made_with = meta.get("model").and_then(serde_json::Value::as_str);
    let made_in = meta.get("cwd").and_then(serde_json::Value::as_str)?;
    let same_cwd = Path::new(made_in) == cwd
        || std::fs::canonicalize(made_in).ok() == std::fs::canonicalize(cwd).ok();
    (made_by == provider.as_str() && made_with == model && same_cwd).then_some((dir, session))
}

/// Writes `contents` as the file `name` in the flow's spawn directory `spawn_dir` (one of the
/// layout's paths), replaced whole, no link followed.
///
/// # Errors
///
/// [`LifeError::Write`].
pub fn record_flow_file(
    layout: &SprintLayout,
    spawn_dir: &Path,
    name: &str,
    contents: &[u8],
) -> Result<(), LifeError> {
    let write = |source| LifeError::Write {
        what: spawn_dir.join(name).display().to_string(),
        source,
    };
    let rel = layout
        .below_root(spawn_dir)
        .map(|dir| dir.join(name))
        .ok_or_else(|| LifeError::Write {
            what: spawn_dir.join(name).display().to_string(),
            source: corral_hostfs::HostFsError::Io {
                path: spawn_dir.to_owned(),
                source: std::io::Error::other("not in the sprint's record"),
            },
        })?;
    layout
        .record()
        .and_then(|r| r.replace(rel, contents))
        .map_err(write)
}

/// Writes the accepted `plan` as `plan.json` in its spawn's directory `spawn_dir`.
///
/// # Errors
///
/// [`LifeError::Write`].
pub fn record_plan(
    layout: &SprintLayout,
    spawn_dir: &Path,
    plan: &TaskPlan,
) -> Result<(), LifeError> {
    let json = serde_json::to_vec_pretty(plan).unwrap_or_default();
    record_flow_file(layout, spawn_dir, PLAN_FILE, &json)
}

/// Applies `plan` to the sprint file `file` whose text is `current`. With `drop_tasks` the
/// file's own `[[tasks]]` are removed first (a freshly written example's placeholders).
///
/// # Errors
///
/// [`LifeError::NotToml`] when `current` does not parse; [`LifeError::PlanDoesNotFit`] when
/// the result breaks the sprint file's rules (nothing is written either way).
pub fn merge_plan(
    file: &Path,
    current: &str,
    plan: &TaskPlan,
    drop_tasks: bool,
) -> Result<PlanMerge, LifeError> {
    let mut doc: DocumentMut =
        current
            .parse()
            .map_err(|e: toml_edit::TomlError| LifeError::NotToml {
                file: file.to_owned(),
                message: e.message().to_owned(),
            })?;
    if drop_tasks {
        doc.remove("tasks");
    }
    if doc.get("tasks").is_some_and(|t| !t.is_array_of_tables()) {
        return Err(LifeError::NotToml {
            file: file.to_owned(),
            message: "`tasks` is not a list of [[tasks]] tables".to_owned(),
        });
    }
    if doc.get("tasks").is_none() {
        doc.insert("tasks", Item::ArrayOfTables(ArrayOfTables::new()));
    }
    let Some(tasks) = doc.get_mut("tasks").and_then(Item::as_array_of_tables_mut) else {
        return Err(LifeError::NotToml {
            file: file.to_owned(),
            message: "`tasks` is not a list of [[tasks]] tables".to_owned(),
        });
    };
    let mut merge = PlanMerge {
        text: String::new(),
        added: Vec::new(),
        updated: Vec::new(),
        kept: Vec::new(),
        briefs_kept: Vec::new(),
    };
    let planned_ids: Vec<&str> = plan.tasks.iter().map(|t| t.id.as_str()).collect();
    for table in tasks.iter() {
        if let Some(id) = table.get("id").and_then(Item::as_str)
            && !planned_ids.contains(&id)
        {
            merge.kept.push(id.to_owned());
        }
    }
    for planned in &plan.tasks {
        let existing = tasks
            .iter_mut()
            .find(|t| t.get("id").and_then(Item::as_str) == Some(planned.id.as_str()));
        match existing {
            Some(table) => {
                table["title"] = value(planned.title.as_str());
                if table.contains_key("brief") {
                    merge.briefs_kept.push(planned.id.clone());
                } else {
                    table["prompt"] = value(planned.brief.as_str());
                }
                set_list(table, "depends_on", &planned.depends_on);
                set_list(table, "acceptance_criteria", &planned.acceptance_criteria);
                merge.updated.push(planned.id.clone());
            }
            None => {
                let mut table = Table::new();
                table["id"] = value(planned.id.as_str());
                table["title"] = value(planned.title.as_str());
                table["prompt"] = value(planned.brief.as_str());
                set_list(&mut table, "depends_on", &planned.depends_on);
                set_list(
                    &mut table,
                    "acceptance_criteria",
                    &planned.acceptance_criteria,
                );
                tasks.push(table);
                merge.added.push(planned.id.clone());
            }
        }
    }
    merge.text = doc.to_string();
    if let Err(error) = crate::parse::parse(file, &merge.text) {
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
    Ok(merge)
}

/// Sets `key` to the list `items`, or removes it when the list is empty.
fn set_list(table: &mut Table, key: &str, items: &[String]) {
    if items.is_empty() {
        table.remove(key);
    } else {
        let array: Array = items.iter().map(String::as_str).collect();
        table[key] = value(array);
    }
}

/// Writes `text` as the sprint file `file` (in the project at `project_root`): into a new
/// file renamed over the old one, synced, never through a link planted at its name.
///
/// # Errors
///
/// [`LifeError::Write`].
pub fn write_sprint_file(project_root: &Path, file: &Path, text: &str) -> Result<(), LifeError> {
    let write = |source| LifeError::Write {
        what: file.display().to_string(),
        source,
    };
    let rel = file.strip_prefix(project_root).unwrap_or(file);
    HostDir::open(project_root)
        .and_then(|root| root.replace_with(rel, text.as_bytes(), Flush::Synced))
        .map_err(write)
}

/// The most issues one `--from-issues` query plans from: more is several sprints.
pub const ISSUES_MAX: usize = 30;

/// The tickets of `issues` (found by `query`), one source each, held to a source's rules (not
/// empty, within [`super::SOURCE_MAX_LINES`]), and together to [`super::SOURCE_MAX_LINES`] and
/// [`super::SOURCE_MAX_BYTES`] as one PRD would be.
///
/// # Errors
///
/// [`LifeError::NoIssues`] when there are none; [`LifeError::TooManyLines`] when together they
/// are too long.
pub fn issue_sources(
    query: &str,
    issues: &[corral_ports::ForgeIssue],
) -> Result<Vec<SourceText>, LifeError> {
    if issues.is_empty() {
        return Err(LifeError::NoIssues {
            query: query.to_owned(),
        });
    }
    let mut sources = Vec::new();
    for issue in issues {
        let mut text = format!("# {}\n\n{}\n", issue.title.trim(), issue.url);
        if !issue.labels.is_empty() {
            let _ = writeln!(text, "Labels: {}", issue.labels.join(", "));
        }
        let _ = write!(text, "\n{}\n", issue.body.trim_end());
        sources.push(super::check_source(
            format!("GitHub issue #{}", issue.number),
            text,
        )?);
    }
    let lines: usize = sources.iter().map(|s| s.text.lines().count()).sum();
    let bytes: usize = sources.iter().map(|s| s.text.len()).sum();
    if lines > super::SOURCE_MAX_LINES || bytes as u64 > super::SOURCE_MAX_BYTES {
        return Err(LifeError::TooManyLines {
            label: format!("the {} issues of `{query}`", sources.len()),
            lines,
            limit: super::SOURCE_MAX_LINES,
        });
    }
    Ok(sources)
}

#[cfg(test)]
mod tests {
    use super::{fence_for, unfinished_flow_spawn};
    use crate::layout::SprintLayout;
    use corral_ports::ProviderId;

    /// A project whose `ideate/1/` was cut short by Claude in the project: returns the root,
    /// the layout and the spawn directory.
    fn cut_short() -> (tempfile::TempDir, SprintLayout, std::path::PathBuf) {
        let tmp = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(tmp.path()).unwrap();
        let name = crate::SprintName::new("dates").unwrap();
        let layout = SprintLayout::new(&root, &name);
        let dir = layout.root().join("ideate/1");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("session-id.txt"), "abc-123\n").unwrap();
        std::fs::write(dir.join("run.json"), r#"{"outcome":"running"}"#).unwrap();
        let meta = serde_json::json!({"session_id": "abc-123", "provider": "claude",
                                      "model": null, "cwd": root});
        std::fs::write(dir.join("session.json"), meta.to_string()).unwrap();
        (tmp, layout, dir)
    }

    #[test]
    fn a_cut_short_spawn_is_resumed_only_by_its_own_provider_model_and_project() {
        let (tmp, layout, dir) = cut_short();
        let root = std::fs::canonicalize(tmp.path()).unwrap();
        let found = unfinished_flow_spawn(&layout, "ideate", ProviderId::Claude, None, &root);
        assert_eq!(
            found.map(|(d, s)| (d, s.to_string())),
            Some((dir, "abc-123".into()))
        );
        assert!(unfinished_flow_spawn(&layout, "ideate", ProviderId::Codex, None, &root).is_none());
        assert!(
            unfinished_flow_spawn(&layout, "ideate", ProviderId::Claude, Some("m"), &root)
                .is_none()
        );
        assert!(
            unfinished_flow_spawn(&layout, "ideate", ProviderId::Claude, None, &root.join("x"))
                .is_none()
        );
        assert!(unfinished_flow_spawn(&layout, "plan", ProviderId::Claude, None, &root).is_none());
        // A later spawn that ended valid: nothing to resume, the earlier one is not looked at.
        std::fs::create_dir(layout.root().join("ideate/2")).unwrap();
        assert!(
            unfinished_flow_spawn(&layout, "ideate", ProviderId::Claude, None, &root).is_none()
        );
    }

    #[test]
    fn a_spawn_whose_signals_were_valid_or_whose_record_is_a_link_is_not_resumed() {
        let (tmp, layout, dir) = cut_short();
        let root = std::fs::canonicalize(tmp.path()).unwrap();
        std::fs::write(dir.join("run.json"), r#"{"signalsValid":true}"#).unwrap();
        assert!(
            unfinished_flow_spawn(&layout, "ideate", ProviderId::Claude, None, &root).is_none()
        );
        // A forged record reached through a link is not read.
        std::fs::remove_file(dir.join("run.json")).unwrap();
        let elsewhere = root.join("forged.json");
        std::fs::write(&elsewhere, r#"{"outcome":"running"}"#).unwrap();
        std::os::unix::fs::symlink(&elsewhere, dir.join("run.json")).unwrap();
        assert!(
            unfinished_flow_spawn(&layout, "ideate", ProviderId::Claude, None, &root).is_none()
        );
    }

    #[test]
    fn the_fence_outgrows_the_text() {
        assert_eq!(fence_for("plain"), "```");
        assert_eq!(fence_for("a ```` b"), "`````");
    }
}
