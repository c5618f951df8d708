//! The sprint file, `corral-sprint.toml`, as validated values.
//!
//! Parsing (`parse.rs`) turns the text into these types or into every [`Diagnostic`] it
//! found; nothing here can hold a value the rules refuse (a name unsafe as a directory, a
//! number out of range, a dependency on no task, a cycle).

use std::path::{Path, PathBuf};

use corral_ports::{Effort, ProviderId};

use crate::diagnostic::Diagnostic;
use crate::names::{SprintName, TaskId};

/// The file name `corral sprint` looks for when none is given.
pub const SPRINT_FILE: &str = "corral-sprint.toml";

/// The bounds and defaults of the sprint file's numbers.
pub mod limits {
    /// `max_rounds`: generator and evaluator rounds per task.
    pub const MAX_ROUNDS: (i64, i64) = (1, 10);
    /// The default `max_rounds`.
    pub const DEFAULT_MAX_ROUNDS: u32 = 3;
    /// `max_attempts`: runs of a task (after a regression or a crash) before it is blocked.
    pub const MAX_ATTEMPTS: (i64, i64) = (1, 10);
    /// The default `max_attempts`.
    pub const DEFAULT_MAX_ATTEMPTS: u32 = 2;
    /// `transient_retries`: reruns of a round's spawn after a transient failure (a watchdog
    /// kill, the wall clock, a crash) before the task is blocked.
    pub const TRANSIENT_RETRIES: (i64, i64) = (0, 10);
    /// The default `transient_retries`.
    pub const DEFAULT_TRANSIENT_RETRIES: u32 = 2;
    /// `check_timeout_ms` and a gate's `timeout_ms`: one second to one day.
    pub const TIMEOUT_MS: (i64, i64) = (1_000, 86_400_000);
    /// The default `check_timeout_ms`: ten minutes.
    pub const DEFAULT_CHECK_TIMEOUT_MS: u64 = 600_000;
    /// `max_cost_usd` (the sprint's and a task's) and `max_budget_usd` (a spawn's): more than
    /// nothing, at most a million dollars.
    pub const COST_USD: (f64, f64) = (0.0001, 1_000_000.0);
    /// `max_turns`: a spawn's turns.
    pub const MAX_TURNS: (i64, i64) = (1, 10_000);
    /// `[hooks] timeout_ms`: how long a hook may run, one second to an hour.
    pub const HOOK_TIMEOUT_MS: (i64, i64) = (1_000, 3_600_000);
    /// The default `failover_after_ms` of a role: fifteen minutes. A provider's account held
    /// longer than this hands the role's work to the next provider it lists.
    pub const DEFAULT_FAILOVER_AFTER_MS: u64 = 900_000;
    /// The default `[hooks] timeout_ms`: thirty seconds.
    pub const DEFAULT_HOOK_TIMEOUT_MS: u64 = 30_000;
    /// The largest sprint file or brief read, in bytes.
    pub const FILE_LIMIT: u64 = 1024 * 1024;
}

/// A validated sprint file.
#[derive(Debug, Clone, PartialEq)]
pub struct SprintFile {
    /// The file it was read from, as named.
    pub path: PathBuf,
    /// `[sprint]`.
    pub sprint: SprintSection,
    /// `[roles.generator]`.
    pub generator: RoleSettings,
    /// `[hooks]`: the commands run when the sprint reaches a moment worth telling someone.
    pub hooks: Hooks,
    /// `[roles.evaluator]`; `None` when it is turned off (`enabled = false`).
    pub evaluator: Option<RoleSettings>,
    /// `[[gates]]`, in file order.
    pub gates: Vec<Gate>,
    /// `[[tasks]]`, in file order (at least one).
    pub tasks: Vec<Task>,
}

/// `[sprint]`: what the sprint is called, where it commits, and how every round is checked.
#[derive(Debug, Clone, PartialEq)]
pub struct SprintSection {
    /// `name`: the state directory `.corral/sprints/<name>/`.
    pub name: SprintName,
    /// `branch`: where the sprint commits (default `corral/<name>`).
    pub branch: String,
    /// `check`: the shell command that tells whether the tree is good (exit 0).
    pub check: String,
    /// `check_timeout_ms`.
    pub check_timeout_ms: u64,
    /// `setup`: a shell command run once before the first task.
    pub setup: Option<String>,
    /// `max_rounds`: generator and evaluator rounds per task.
    pub max_rounds: u32,
    /// `max_attempts`: runs of a task before it is blocked.
    pub max_attempts: u32,
    /// `transient_retries`: per round, how many times a spawn that failed transiently (a
    /// watchdog kill, the wall clock, a crash) is run again without counting a round; past it
    /// the task is blocked.
    pub transient_retries: u32,
    /// `protected`: globs (relative to the work tree's top) of files a generator round must
    /// not change, on top of the ones always protected (the sprint file, and the check's and
    /// gates' scripts that are files in the tree); a round that changes one is reset.
    pub protected: Vec<String>,
    /// `fold_check`: whether the check runs on the sprint's branch after each fold of a
    /// parallel run.
    pub fold_check: FoldCheck,
    /// `max_cost_usd`: the sprint's spend cap; checked before every spawn against the cost of
    /// every spawn so far (every run of the sprint), the sprint pauses (`budget-exhausted`)
    /// once it is reached.
    pub max_cost_usd: Option<Usd>,
    /// `max_budget_usd`: each spawn's spend cap, passed to the CLIs that enforce one.
    pub max_budget_usd: Option<Usd>,
    /// `max_turns`: each spawn's turn cap, passed to the CLIs that enforce one.
    pub max_turns: Option<u32>,
}

/// An amount of US dollars, kept in millionths so that it compares exactly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Usd(u64);

impl Usd {
    /// `dollars` as an amount; `None` when it is not a finite number of at least zero.
    pub fn from_dollars(dollars: f64) -> Option<Usd> {
        let micros = (dollars * 1_000_000.0).round();
        if !(dollars.is_finite() && (0.0..1.8e19).contains(&micros)) {
            return None;
        }
        // Whole, not negative and within u64 (above): the cast keeps it.
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        Some(Usd(micros as u64))
    }

    /// The amount in dollars.
    #[allow(clippy::cast_precision_loss)]
    pub fn dollars(self) -> f64 {
        self.0 as f64 / 1_000_000.0
    }
}

impl std::fmt::Display for Usd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let cents = self.0 / 10_000;
        if self.0.is_multiple_of(10_000) {
            write!(f, "${}.{:02}", cents / 100, cents % 100)
        } else {
            write!(f, "${}", self.dollars())
        }
    }
}

/// `[hooks]`: a command (`sh -c`) per moment of the sprint, each run with the moment's event as
/// one JSON object on its standard input, bounded by `timeout_ms`, off the sprint's path (a
/// hook that fails or hangs is logged and killed, never stops the sprint).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hooks {
    /// `task_finished`: a task ended (done, blocked or skipped).
    pub task_finished: Option<String>,
    /// `blocked`: a task was blocked.
    pub blocked: Option<String>,
    /// `rate_limited`: the sprint paused on a rate limit.
    pub rate_limited: Option<String>,
    /// `budget_exhausted`: the sprint paused at a spend cap.
    pub budget_exhausted: Option<String>,
    /// `sprint_finished`: the sprint ended, however it ended.
    pub sprint_finished: Option<String>,
    /// `timeout_ms`: how long each hook may run before its process group is killed.
    pub timeout_ms: u64,
}

impl Default for Hooks {
    fn default() -> Self {
        Hooks {
            task_finished: None,
            blocked: None,
            rate_limited: None,
            budget_exhausted: None,
            sprint_finished: None,
            timeout_ms: limits::DEFAULT_HOOK_TIMEOUT_MS,
        }
    }
}

/// `fold_check`: what runs on the sprint's branch after a parallel task's fold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FoldCheck {
    /// `each` (the default): the check, and the gates of the paths the fold changed, after
    /// every fold; a fold that fails it is taken back and its task sent home.
    #[default]
    Each,
    /// `off`: nothing; a fold that applies is taken as it is (two tasks that break the check
    /// only together are both committed). A conflict still sends its task home.
    Off,
}

impl FoldCheck {
    /// Every value, in the spelling of the sprint file.
    pub const ALL: [FoldCheck; 2] = [FoldCheck::Each, FoldCheck::Off];

    /// The value as the sprint file spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            FoldCheck::Each => "each",
            FoldCheck::Off => "off",
        }
    }
}

/// `[roles.generator]` or `[roles.evaluator]`: which agent plays the role, and who goes on when
/// its account is held for long (`provider = ["claude", "codex"]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoleSettings {
    /// `provider` (the first, when it lists several).
    pub provider: ProviderId,
    /// `model` (the first provider's), in the provider's spelling; `None`: the CLI's default.
    pub model: Option<String>,
    /// `effort` (the first provider's); `None`: the CLI's default.
    pub effort: Option<Effort>,
    /// The providers `provider` lists after the first, in order, each with its `model` and
    /// `effort`: when the one before is held by a rate limit longer than
    /// `failover_after_ms`, the role's work goes on with the next (a new session with the
    /// brief, the critique and the learnings), and comes back once the hold has passed.
    pub failover: Vec<ProviderChoice>,
    /// `failover_after_ms`: how long a hold the role waits out before the next provider takes
    /// over (default fifteen minutes); unused with one provider.
    pub failover_after_ms: u64,
}

impl RoleSettings {
    /// One provider with its model and effort, no failover.
    pub fn single(provider: ProviderId, model: Option<String>, effort: Option<Effort>) -> Self {
        RoleSettings {
            provider,
            model,
            effort,
            failover: Vec::new(),
            failover_after_ms: limits::DEFAULT_FAILOVER_AFTER_MS,
        }
    }

    /// Every provider of the role, in failover order, the first first.
    pub fn choices(&self) -> Vec<ProviderChoice> {
        std::iter::once(ProviderChoice {
            provider: self.provider,
            model: self.model.clone(),
            effort: self.effort,
        })
        .chain(self.failover.iter().cloned())
        .collect()
    }
}

/// One provider of a role, with its model and effort.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderChoice {
    /// The provider.
    pub provider: ProviderId,
    /// Its model; `None`: the CLI's default (or the settings' `providers.<id>.model`).
    pub model: Option<String>,
    /// Its effort; `None`: the CLI's default.
    pub effort: Option<Effort>,
}

/// `[[gates]]`: a further check for rounds whose diff touches a path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gate {
    /// `path`: a path prefix relative to the work tree's top (`crates/engine/`).
    pub path: String,
    /// `command`: the shell command.
    pub command: String,
    /// `timeout_ms` (default: the sprint's `check_timeout_ms`).
    pub timeout_ms: u64,
}

impl Gate {
    /// Whether a change to `changed` (relative to the work tree's top) calls for this gate.
    pub fn applies_to(&self, changed: &str) -> bool {
        changed.starts_with(&self.path)
    }
}

/// `[[tasks]]`: one unit of work, committed on its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Task {
    /// `id`.
    pub id: TaskId,
    /// `title`: the commit subject when the agent proposes none.
    pub title: String,
    /// `prompt` or `brief`.
    pub prompt: TaskPrompt,
    /// `depends_on`: tasks that must be done first, as written (duplicates dropped).
    pub depends_on: Vec<TaskId>,
    /// `may_edit`: globs of protected paths this task's generator may change (a task that
    /// is about the check itself).
    pub may_edit: Vec<String>,
    /// `touches`: globs of the paths the task expects to change. A parallel run does not run
    /// two tasks whose `touches` overlap at the same time (they would likely conflict at the
    /// fold); a hint, never enforced on what the task does change.
    pub touches: Vec<String>,
    /// `max_cost_usd`: the task's spend cap, over all its spawns; the sprint pauses
    /// (`budget-exhausted`) before the task's next spawn once it is reached.
    pub max_cost_usd: Option<Usd>,
    /// `acceptance_criteria`: what the evaluator checks the work against, one statement each
    /// (a plan's, or written by hand); empty when the task has none.
    pub acceptance_criteria: Vec<String>,
    /// The line of the task's `[[tasks]]` header (for messages about it).
    pub line: usize,
}

/// Two tasks of a sprint file whose `touches` overlap and that could run at the same time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TouchOverlap {
    /// The first in the file.
    pub first: TaskId,
    /// The second.
    pub second: TaskId,
    /// The globs that meet: `` `src/**` and `src/lib.rs` ``.
    pub overlap: String,
}

impl std::fmt::Display for TouchOverlap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "tasks {} and {} both touch {}: with --jobs they run one after the other",
            self.first, self.second, self.overlap
        )
    }
}

/// Where a task's instructions come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaskPrompt {
    /// `prompt`: the text in the sprint file.
    Inline(String),
    /// `brief`: a file, read when the sprint file was.
    Brief {
        /// The file, resolved against the sprint file's directory.
        path: PathBuf,
        /// Its text.
        text: String,
    },
}

impl TaskPrompt {
    /// The instructions.
    pub fn text(&self) -> &str {
        match self {
            TaskPrompt::Inline(text) | TaskPrompt::Brief { text, .. } => text,
        }
    }
}

impl SprintFile {
    /// The tasks in the order they run: a task after every task it depends on, and otherwise
    /// in file order (of the tasks whose dependencies are done, the first in the file is next).
    pub fn run_order(&self) -> Vec<&Task> {
        let (order, _) = crate::order::dependency_order(&self.tasks);
        order
            .into_iter()
            .filter_map(|i| self.tasks.get(i))
            .collect()
    }

    /// The task with id `id`.
    pub fn task(&self, id: &TaskId) -> Option<&Task> {
        self.tasks.iter().find(|t| &t.id == id)
    }

    /// The pairs of tasks that could run at the same time (neither depends on the other, even
    /// through others) and whose `touches` overlap, in file order: a parallel run keeps each
    /// pair apart.
    pub fn overlaps(&self) -> Vec<TouchOverlap> {
        let mut out = Vec::new();
        for (k, a) in self.tasks.iter().enumerate() {
            for b in self.tasks.iter().skip(k + 1) {
                if self.depends(a, b) || self.depends(b, a) {
                    continue;
                }
                if let Some(overlap) = crate::overlap::overlap(&a.touches, &b.touches) {
                    out.push(TouchOverlap {
                        first: a.id.clone(),
                        second: b.id.clone(),
                        overlap,
                    });
                }
            }
        }
        out
    }

    /// Whether `a` depends on `b`, directly or through other tasks.
    fn depends(&self, a: &Task, b: &Task) -> bool {
        let mut seen: Vec<&TaskId> = Vec::new();
        let mut todo: Vec<&TaskId> = a.depends_on.iter().collect();
        while let Some(id) = todo.pop() {
            if id == &b.id {
                return true;
            }
            if seen.contains(&id) {
                continue;
            }
            seen.push(id);
            if let Some(t) = self.task(id) {
                todo.extend(t.depends_on.iter());
            }
        }
        false
    }

    /// The directory relative paths in the file (a brief) are resolved against.
    pub fn base_dir(&self) -> &Path {
        base_dir(&self.path)
    }
}

/// The directory of `file`, `.` for a bare file name.
pub(crate) fn base_dir(file: &Path) -> &Path {
    match file.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        Some(_) | None => Path::new("."),
    }
}

/// Why a sprint file was not loaded.
#[derive(Debug, thiserror::Error)]
pub enum SprintFileError {
    /// The file could not be read (missing, not a regular file, too large, an I/O error).
    /// Retryable: no, not until the file is there and readable.
    #[error("cannot read the sprint file: {0}")]
    Unreadable(#[source] corral_contract::UntrustedFileError),
    /// The file breaks one or more rules; every one found is listed. Retryable: no.
    #[error("{} has {} error(s)", path.display(), diagnostics.len())]
    Invalid {
        /// The file, as named.
        path: PathBuf,
        /// Every broken rule, in file order.
        diagnostics: Vec<Diagnostic>,
    },
}

/// Reads and validates the sprint file at `path`. It is read as a file an agent could have
/// replaced (it may sit in the work tree the agents edit): regular files only, bounded, never
/// a blocking open; so is each brief.
pub fn load(path: &Path) -> Result<SprintFile, SprintFileError> {
    let bytes = corral_contract::read_untrusted_file(path, limits::FILE_LIMIT)
        .map_err(SprintFileError::Unreadable)?;
    match String::from_utf8(bytes) {
        Ok(text) => crate::parse::parse(path, &text),
        Err(e) => {
            let valid = e.utf8_error().valid_up_to();
            let text = String::from_utf8_lossy(e.as_bytes());
            let (line, column) = crate::diagnostic::line_col(&text, valid);
            Err(SprintFileError::Invalid {
                path: path.to_path_buf(),
                diagnostics: vec![Diagnostic {
                    file: path.to_path_buf(),
                    line,
                    column,
                    key: String::new(),
                    rule: crate::diagnostic::Rule::Syntax,
                    message: "is not UTF-8 text".to_string(),
                }],
            })
        }
    }
}
