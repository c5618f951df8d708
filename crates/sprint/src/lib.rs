//! The sprint of Corral: tasks run one by one, each through generator and evaluator rounds
//! gated by checks, and committed on its own. This crate holds what a sprint is: the sprint
//! file `corral-sprint.toml` ([`load`], [`SprintFile`]), validated so that every error names
//! its file, line, key and [`Rule`]; the order its tasks run in ([`SprintFile::run_order`]);
//! the names of its state on disk ([`SprintLayout`], `role-meta.json`); and that state,
//! `sprint.json` ([`SprintState`], written atomically); and the seam through which it has an
//! agent play a role ([`RoleAgent`]: one spawn asked for, one report back); and the seam
//! through which a parallel run has a task's rounds run somewhere ([`TaskExecutor`]: one task
//! handed out, its branch handed back), with the entry that runs one task's rounds in a given
//! work tree ([`work_task`]) for the executors and the worker of `corral sprint work`.
//!
//! Around the implementation, [`life`] holds what the sprint's other flows need besides their
//! agent: a plan's sources read safely, its prompt, its record, and the plan applied to the
//! sprint file with the user's comments and hand edits kept.
//!
//! It sits on the ports (providers, models, efforts, the run directory's names) and the
//! signals contract (reading files an agent could have replaced). It knows nothing about
//! processes, the engine, any provider's CLI, settings files or the terminal: the composition
//! root hands it providers, and the binary renders what it returns.

mod agent;
mod diagnostic;
mod error;
mod event;
mod example;
mod executor;
mod failover;
mod file;
mod file_schema;
mod flow;
mod git;
mod hooks;
mod inert;
mod intree;
mod journal;
mod layout;
pub mod life;
mod lock;
mod names;
mod order;
mod overlap;
mod parse;
mod price;
mod prompt;
mod slots;
mod state;

pub use agent::{
    HandOver, RoleAgent, SpawnFailure, SpawnReport, SpawnRequest, SpawnVerdict, current_agent,
};
pub use diagnostic::{Diagnostic, Rule};
pub use error::{ExecutorError, SprintError};
pub use event::{EventSink, SprintEnd, SprintEvent, SprintSummary, TaskSummary};
pub use example::{EXAMPLE, ExampleChoice, PLACEHOLDER_CHECK, ProjectCheck, example};
pub use executor::{
    RECORD_OWNER_FILE, RecordOwner, SpawnAdmission, TaskEnd, TaskExecutor, TaskHandback, TaskHost,
    TaskJob, TaskRecorder, git_transport, record_ref,
};
pub use failover::FailoverAgent;
pub use file::{
    FoldCheck, Gate, Hooks, ProviderChoice, RoleSettings, SPRINT_FILE, SprintFile, SprintFileError,
    SprintSection, Task, TaskPrompt, TouchOverlap, Usd, limits, load,
};
pub use file_schema::sprint_file_schema;
pub use flow::{
    ALREADY_ON_BRANCH, BLOCKED_PATCH_FILE, CHANGED_PATHS_FILE, CHECK_FILE, DIFF_FILE, DirtyTree,
    FOLD_CHECK_FILE, JOB_LOG_FILE, PRE_VERIFY_FILE, PROTECTED_FILE, REGRESSED_PATCH_FILE,
    RunOptions, SENT_HOME_PATCH_FILE, SprintRun, run_sprint, work_task,
};
pub use git::{GitError, extract_tree};
pub use hooks::{HOOK_EVENTS_DIR, HOOKS_LOG_FILE, HookMoment};
pub use journal::{MONOTONIC_KEY, WALL_TIME_KEY, complete_lines, read_events};
pub use layout::{
    EVALUATION_FILE, EVENTS_FILE, IMPLEMENT_DIR, LEARNINGS_FILE, PROMPT_FILE, ROLE_META_FILE,
    ROUNDS_DIR, RUN_FILE, Role, RoleMeta, SESSION_ID_FILE, SESSION_META_FILE, SIGNALS_FILE,
    SPRINTS_DIR, STATE_FILE, SprintLayout, TASK_STATE_FILE, recorded_sprints, sprints_dir,
};
pub use lock::LOCK_FILE;
pub use names::{NAME_MAX_LEN, NameError, SprintName, TaskId, check_name};
pub use price::{ModelPrice, PriceTable};
pub use slots::{Slot, Slots};
pub use state::{
    Attribution, Durability, FailureClass, HandOverRecord, RoleUsage, RunProgress,
    STATE_SCHEMA_VERSION, SpawnFailureRecord, SprintState, StateError, Step, TaskProgress,
    TaskState, TaskStatus, UsageRollUp, read_state, write_state, write_state_as,
};

/// Validates sprint file text `src` as if read from `path` (briefs are read relative to it).
pub fn parse(path: &std::path::Path, src: &str) -> Result<SprintFile, SprintFileError> {
    parse::parse(path, src)
}
