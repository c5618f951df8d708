//! Where a sprint keeps its state, every name in one place.
//!
//! ```text
//! <project>/.corral/sprints/<name>/
//!   sprint.json                 the state (written atomically)
//!   learnings.ndjson            what the agents learned, one JSON object a line
//!   implement/<task-id>/rounds/<N>/generator/   one spawn's run directory
//!   implement/<task-id>/rounds/<N>/evaluator/   (prompt.md, signals.json, session-id.txt,
//!                                                role-meta.json, events.jsonl, run.json,
//!                                                evaluation.md for the evaluator)
//! ```
//!
//! Rounds count from 1. Every spawn directory is an ordinary run directory (the names of
//! `corral_ports::run_dir`), plus `role-meta.json`, written before the spawn so that what ran
//! is known even when the sprint was killed during it.

use std::fmt;
use std::path::{Path, PathBuf};

use corral_ports::{Effort, ProviderId};
use serde::{Deserialize, Serialize};

use crate::names::{SprintName, TaskId};

pub use corral_contract::EVALUATION_SIDECAR_FILE as EVALUATION_FILE;
pub use corral_ports::run_dir::{
    EVENTS_FILE, PROMPT_FILE, RUN_FILE, SESSION_ID_FILE, SESSION_META_FILE, SIGNALS_FILE,
};

/// Corral's state directory, relative to the project root.
pub const STATE_DIR: &str = ".corral";
/// The sprints' directory, relative to the project root.
pub const SPRINTS_DIR: &str = ".corral/sprints";
/// The state file in a sprint's directory.
pub const STATE_FILE: &str = "sprint.json";
/// The learnings file in a sprint's directory.
pub const LEARNINGS_FILE: &str = "learnings.ndjson";
/// Below a sprint's directory: the git worktrees of a parallel run's tasks.
pub const WORKTREES_DIR: &str = "worktrees";
/// The directory of the implement flow's tasks in a sprint's directory.
pub const IMPLEMENT_DIR: &str = "implement";
/// The directory of a task's rounds.
pub const ROUNDS_DIR: &str = "rounds";
/// A task's state in its own directory, where a worker of a remote executor keeps it (the
/// coordinator's `sprint.json` holds every task's; a worker has one task).
pub const TASK_STATE_FILE: &str = "task.json";
/// Who ran a spawn, written in its directory before it starts.
pub const ROLE_META_FILE: &str = "role-meta.json";

/// The two parts an agent plays in a round.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    /// Changes the tree to do the task.
    Generator,
    /// Reads the change and judges it, with the repository read-only.
    Evaluator,
}

impl Role {
    /// The role's name: its spawn directory and its value in `role-meta.json`.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Generator => "generator",
            Role::Evaluator => "evaluator",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One sprint's directory and the paths below it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SprintLayout {
    project_root: PathBuf,
    root: PathBuf,
}

impl SprintLayout {
    /// The layout of sprint `name` in the project at `project_root`.
    pub fn new(project_root: &Path, name: &SprintName) -> Self {
        SprintLayout {
            project_root: project_root.to_path_buf(),
            root: sprints_dir(project_root).join(name.as_str()),
        }
    }

    /// The sprint's record as a handle: `.corral/sprints/<name>/`, made when missing, reached
    /// from the project root without following a link. Every file of the record is written and
    /// read through it, so nothing an agent planted redirects Corral on the host.
    pub fn record(&self) -> Result<corral_hostfs::HostDir, corral_hostfs::HostFsError> {
        let project = corral_hostfs::HostDir::open(&self.project_root)?;
        let rel = self
            .root
            .strip_prefix(&self.project_root)
            .unwrap_or(Path::new(SPRINTS_DIR));
        project.create_dir(rel)
    }

    /// `path` (one of this layout's paths) relative to the record's root, for [`Self::record`].
    pub fn below_root<'p>(&self, path: &'p Path) -> Option<&'p Path> {
        path.strip_prefix(&self.root).ok()
    }

    /// `<project>/.corral/`: what a check or an agent in the project's work tree may not write
    /// (Corral's record, see `CommandSpec::read_only`).
    pub fn state_root(&self) -> PathBuf {
        self.project_root.join(STATE_DIR)
    }

    /// `.corral/sprints/<name>/`.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `sprint.json`.
    pub fn state_file(&self) -> PathBuf {
        self.root.join(STATE_FILE)
    }

    /// `events.jsonl`: every event of every run of the sprint, one JSON object a line.
    pub fn events_file(&self) -> PathBuf {
        self.root.join(EVENTS_FILE)
    }

    /// `learnings.ndjson`.
    pub fn learnings_file(&self) -> PathBuf {
        self.root.join(LEARNINGS_FILE)
    }

    /// `implement/<task-id>/`.
    pub fn task_dir(&self, task: &TaskId) -> PathBuf {
        self.root.join(IMPLEMENT_DIR).join(task.as_str())
    }

    /// `implement/<task-id>/task.json`.
    pub fn task_state_file(&self, task: &TaskId) -> PathBuf {
        self.task_dir(task).join(TASK_STATE_FILE)
    }

    /// `implement/<task-id>/rounds/<round>/`.
    pub fn round_dir(&self, task: &TaskId, round: u32) -> PathBuf {
        self.task_dir(task).join(ROUNDS_DIR).join(round.to_string())
    }

    /// `implement/<task-id>/rounds/<round>/<role>/`: one spawn's run directory.
    pub fn spawn_dir(&self, task: &TaskId, round: u32, role: Role) -> PathBuf {
        self.round_dir(task, round).join(role.as_str())
    }

    /// `worktrees/<task-id>/`: the git worktree a task of a parallel run (`--jobs` above 1)
    /// works in, on its own branch (ignored by git, as all of `.corral/` is).
    pub fn worktree_dir(&self, task: &TaskId) -> PathBuf {
        self.root.join(WORKTREES_DIR).join(task.as_str())
    }
}

/// `.corral/sprints/` of the project at `project_root`.
pub fn sprints_dir(project_root: &Path) -> PathBuf {
    project_root.join(SPRINTS_DIR)
}

/// The sprints that have a state file in the project at `project_root`, by name.
pub fn recorded_sprints(project_root: &Path) -> std::io::Result<Vec<SprintName>> {
    let dir = sprints_dir(project_root);
    let entries = match std::fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut names = Vec::new();
    for entry in entries {
        let entry = entry?;
        let Some(name) = entry
            .file_name()
            .to_str()
            .and_then(|n| SprintName::new(n).ok())
        else {
            continue;
        };
        if entry.path().join(STATE_FILE).is_file() {
            names.push(name);
        }
    }
    names.sort();
    Ok(names)
}

/// `role-meta.json`: who ran a spawn, written before it starts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RoleMeta {
    /// The role played.
    pub role: Role,
    /// The provider.
    pub provider: ProviderId,
    /// The model asked for; `None`: the CLI's default.
    pub model: Option<String>,
    /// The effort asked for; `None`: the CLI's default.
    pub effort: Option<Effort>,
    /// The task's attempt, from 1.
    pub attempt: u32,
    /// The round, from 1.
    pub round: u32,
    /// When the spawn started (RFC 3339).
    pub started_at: String,
}
