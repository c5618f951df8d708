//! `sprint.json`: how far a sprint has come, written atomically after every step so that a
//! sprint killed at any moment continues from what the file says.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

use corral_ports::{Outcome, ProviderId, Usage};
use serde::{Deserialize, Serialize};

use crate::file::SprintFile;
use crate::layout::Role;
use crate::names::{SprintName, TaskId};

/// The version of the `sprint.json` format this build writes and reads.
pub const STATE_SCHEMA_VERSION: u32 = 1;

/// The largest `sprint.json` read, in bytes.
const STATE_LIMIT: u64 = 16 * 1024 * 1024;

/// A sprint's state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SprintState {
    /// [`STATE_SCHEMA_VERSION`] when written.
    pub schema_version: u32,
    /// The sprint's name.
    pub name: SprintName,
    /// The branch it commits on.
    pub branch: String,
    /// The sprint file it runs.
    pub sprint_file: PathBuf,
    /// When it first started (RFC 3339).
    pub started_at: String,
    /// When this state was written (RFC 3339).
    pub updated_at: String,
    /// Every task, in run order.
    pub tasks: Vec<TaskState>,
    /// What `corral sprint run` has done once for the whole sprint (absent until it first ran).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<RunProgress>,
}

/// What a sprint run does once, kept so that a rerun does not do it again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RunProgress {
    /// The id of the run: the `Corral-Run:` trailer of its commits, kept across reruns.
    pub run_id: String,
    /// Whether `setup` ran (and passed).
    pub setup_done: bool,
}

/// One task's state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TaskState {
    /// The task's id.
    pub id: TaskId,
    /// Its title.
    pub title: String,
    /// Where it stands.
    pub status: TaskStatus,
    /// The round it is in, or ended in (0: not started).
    pub round: u32,
    /// Its attempt (0: not started).
    pub attempt: u32,
    /// The commit that finished it.
    pub commit: Option<String>,
    /// Why it is blocked or skipped.
    pub reason: Option<String>,
    /// How its last verified round's check compared with the tree before the task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attribution: Option<Attribution>,
    /// What the agents did that they should not have (switched branch, committed), as found.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// Tokens and cost per role, over every round.
    #[serde(default, skip_serializing_if = "RoleUsage::is_empty")]
    pub usage: RoleUsage,
    /// Tokens and cost per provider, over every round (the provider that played each spawn's
    /// role then, which a later run of the sprint file may change).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub usage_by_provider: BTreeMap<ProviderId, Usage>,
    /// Where a running task is inside its round (absent unless it is running).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<TaskProgress>,
    /// In a parallel run (`--jobs` above 1): the task's own branch, while the task runs in its
    /// worktree or is done there and not yet folded onto the sprint's branch (absent otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_branch: Option<String>,
    /// In a parallel run: the head of the sprint's branch a fold of this task started from,
    /// written before the fold, so that a fold whose check fails (or a stop in between) takes
    /// the branch back to exactly there (absent when no fold is under way).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fold_onto: Option<String>,
    /// In a parallel run: the rounds a fold sent the task back for (its fold conflicted, or
    /// broke the check on the sprint's branch). One at most: the second such fold blocks it.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub sent_home: u32,
    /// Every spawn of the task that failed (not a report that did not pass: a spawn that ended
    /// without one), in order, each with its class: what a transient failure cost (a rerun of
    /// the spawn, no round) and which permanent one stopped the sprint.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failures: Vec<SpawnFailureRecord>,
    /// Whether any of the task's cost is an estimate (a spawn whose CLI reported only tokens,
    /// priced by the run's price table) rather than what a CLI reported.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cost_estimated: bool,
    /// Every time a role's provider was held by a rate limit longer than the role's
    /// `failover_after_ms` and the next provider it lists went on, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub handovers: Vec<HandOverRecord>,
}

/// A role's work handed from a held provider to the next, as the task's record keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HandOverRecord {
    /// The round it happened in.
    pub round: u32,
    /// The role handed over.
    pub role: Role,
    /// The provider whose account is held.
    pub from: ProviderId,
    /// Until when, RFC 3339 in UTC: the role comes back to `from` after it.
    pub held_until: String,
    /// The provider that went on.
    pub to: ProviderId,
}

impl HandOverRecord {
    /// One line for a person: `round 2: the generator's claude held until T, continued on codex`.
    pub fn describe(&self) -> String {
        format!(
            "round {}: the {}'s {} held until {}, continued on {}",
            self.round, self.role, self.from, self.held_until, self.to
        )
    }
}

/// A spawn that failed, as the task's record keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SpawnFailureRecord {
    /// The round it was run for.
    pub round: u32,
    /// The role it played.
    pub role: Role,
    /// The provider that played it.
    pub provider: ProviderId,
    /// How its provider run ended.
    pub outcome: Outcome,
    /// What kind of failure it was, and so what it cost.
    pub class: FailureClass,
    /// The provider's message, its fix included where it names one.
    pub message: String,
}

/// What kind of failure a spawn's was, for the sprint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum FailureClass {
    /// Running it again can succeed (a watchdog kill, the wall clock, a crash): the spawn is
    /// run again, within `[sprint] transient_retries` per round, and costs no round.
    Transient,
    /// Nothing changes by running it again (the CLI missing or out of its tested range, the
    /// model unavailable, the login refused, a read-only run not attested read-only): the
    /// sprint stops with exit 8 and what to fix.
    Permanent,
    /// The evaluator answered, but with no valid evaluation: run again as a transient failure
    /// is, and never at the cost of a generator round.
    NoEvaluation,
    /// The spawn's process tree went over one of its limits (`[limits]`: memory, processes,
    /// disk) and was ended: a failed round, whose reason the generator's next round is given.
    /// Never run again as a transient failure (the same work meets the same limit), never a
    /// stop of the sprint.
    LimitExceeded,
}

impl FailureClass {
    /// The name in `sprint.json` and the messages.
    pub fn as_str(self) -> &'static str {
        match self {
            FailureClass::Transient => "transient",
            FailureClass::Permanent => "permanent",
            FailureClass::NoEvaluation => "no-evaluation",
            FailureClass::LimitExceeded => "limit-exceeded",
        }
    }
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// Usage per role.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RoleUsage {
    /// The generator's spawns.
    #[serde(default)]
    pub generator: Usage,
    /// The evaluator's spawns.
    #[serde(default)]
    pub evaluator: Usage,
}

impl RoleUsage {
    /// Whether nothing was reported for either role.
    pub fn is_empty(&self) -> bool {
        *self == RoleUsage::default()
    }

    /// Adds another role usage to this one.
    pub fn add(&mut self, other: &RoleUsage) {
        self.generator.add(&other.generator);
        self.evaluator.add(&other.evaluator);
    }
}

/// Tokens and cost rolled up: in total, per role and per provider.
#[derive(Debug, Clone, Default, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UsageRollUp {
    /// Every spawn's usage.
    pub total: Usage,
    /// Per role.
    pub by_role: RoleUsage,
    /// Per provider.
    pub by_provider: BTreeMap<ProviderId, Usage>,
}

impl UsageRollUp {
    /// The roll-up of one task.
    pub fn of_task(task: &TaskState) -> Self {
        let mut total = task.usage.generator;
        total.add(&task.usage.evaluator);
        UsageRollUp {
            total,
            by_role: task.usage,
            by_provider: task.usage_by_provider.clone(),
        }
    }

    /// Adds another roll-up to this one.
    pub fn add(&mut self, other: &UsageRollUp) {
        self.total.add(&other.total);
        self.by_role.add(&other.by_role);
        for (provider, usage) in &other.by_provider {
            self.by_provider.entry(*provider).or_default().add(usage);
        }
    }
}

impl SprintState {
    /// The sprint's roll-up over every task.
    pub fn usage(&self) -> UsageRollUp {
        let mut all = UsageRollUp::default();
        for task in &self.tasks {
            all.add(&UsageRollUp::of_task(task));
        }
        all
    }
}

/// How the check after a round compares with the check before the task (pre / post).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Attribution {
    /// Passed before, passes after.
    Clean,
    /// Passed before, fails after: the round broke it.
    Regressed,
    /// Failed before, passes after: the round fixed it.
    FixedBaseline,
    /// Failed before, fails after: the tree was broken already; the agent is not blamed.
    BaselineBroken,
    /// Passed on its own branch, but the sprint's branch with its commit folded on fails:
    /// it and a task folded before it do not hold together. Its commit is taken back off the
    /// branch and the task reopened at the branch's tip. Never from [`Attribution::of`].
    BrokeOnFold,
}

impl Attribution {
    /// From the check before the task and after the round.
    pub fn of(pre_passed: bool, post_passed: bool) -> Self {
        match (pre_passed, post_passed) {
            (true, true) => Attribution::Clean,
            (true, false) => Attribution::Regressed,
            (false, true) => Attribution::FixedBaseline,
            (false, false) => Attribution::BaselineBroken,
        }
    }

    /// The name in `sprint.json`, events and the status.
    pub fn as_str(self) -> &'static str {
        match self {
            Attribution::Clean => "clean",
            Attribution::Regressed => "regressed",
            Attribution::FixedBaseline => "fixed-baseline",
            Attribution::BaselineBroken => "baseline-broken",
            Attribution::BrokeOnFold => "broke-on-fold",
        }
    }
}

/// The next step of a running task's round.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Step {
    /// The check and the gates on the tree before the task.
    PreVerify,
    /// The generator's spawn.
    Generate,
    /// The check and the gates the round's diff calls for, and the attribution.
    PostVerify,
    /// The evaluator's spawn.
    Evaluate,
    /// The task's commit and its learnings.
    Commit,
}

impl Step {
    /// The step's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Step::PreVerify => "pre-verify",
            Step::Generate => "generate",
            Step::PostVerify => "post-verify",
            Step::Evaluate => "evaluate",
            Step::Commit => "commit",
        }
    }
}

/// Where a running task is: enough for a sprint killed at any moment to go on from there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TaskProgress {
    /// The commit the task started from: the base of its diff, where a reset goes, and the
    /// start of the range searched for its commit.
    pub base: String,
    /// The next step.
    pub step: Step,
    /// Whether the check passed on the tree before the task (`None`: not yet run).
    pub pre_passed: Option<bool>,
    /// The gates (by path) that failed on the tree before the task.
    #[serde(default)]
    pub pre_failed_gates: Vec<String>,
    /// What round `round` must address (the critique of the round before).
    pub critique: Option<String>,
    /// Rounds that regressed so far (each one reset the tree).
    pub regressions: u32,
    /// A regressed round's reset is decided and may not be done yet.
    #[serde(default)]
    pub reset_pending: bool,
    /// The generator's session, resumed by the next round.
    pub generator_session: Option<String>,
    /// The provider whose session `generator_session` is (`None`: not recorded, as before
    /// failover existed): a round played by another provider of the role starts a new session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generator_session_provider: Option<ProviderId>,
    /// The spawn of this task Corral started last, in a directory it had just made anew: its
    /// round and role. A report found in a spawn's directory counts (the spawn is not run
    /// again) only when this names that spawn, so only what that spawn wrote can count; a
    /// file's presence alone never does (another agent could have put it there first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spawned: Option<SpawnMark>,
    /// This round's spawns run again after a transient failure so far, against `[sprint]
    /// transient_retries`; back to 0 at the next round.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub transient_retries: u32,
}

/// Where a task stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum TaskStatus {
    /// Not started.
    Pending,
    /// Started and not finished (a sprint that stopped here continues here).
    Running,
    /// Passed and committed.
    Done,
    /// Could not be done: the agent reported it blocked, or its rounds or attempts ran out.
    Blocked,
    /// Not run, because a task it depends on is blocked.
    Skipped,
}

impl TaskStatus {
    /// The status's name in `sprint.json` and in `corral sprint status`.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Pending => "pending",
            TaskStatus::Running => "running",
            TaskStatus::Done => "done",
            TaskStatus::Blocked => "blocked",
            TaskStatus::Skipped => "skipped",
        }
    }
}

impl SprintState {
    /// The state of `file`'s sprint before anything ran: every task pending, in run order.
    pub fn fresh(file: &SprintFile, now: &str) -> Self {
        SprintState {
            schema_version: STATE_SCHEMA_VERSION,
            name: file.sprint.name.clone(),
            branch: file.sprint.branch.clone(),
            sprint_file: file.path.clone(),
            started_at: now.to_string(),
            updated_at: now.to_string(),
            tasks: file
                .run_order()
                .into_iter()
                .map(|t| TaskState {
                    id: t.id.clone(),
                    title: t.title.clone(),
                    status: TaskStatus::Pending,
                    round: 0,
                    attempt: 0,
                    commit: None,
                    reason: None,
                    attribution: None,
                    warnings: Vec::new(),
                    usage: RoleUsage::default(),
                    usage_by_provider: BTreeMap::new(),
                    progress: None,
                    task_branch: None,
                    fold_onto: None,
                    sent_home: 0,
                    failures: Vec::new(),
                    cost_estimated: false,
                    handovers: Vec::new(),
                })
                .collect(),
            run: None,
        }
    }

    /// How many tasks have `status`.
    pub fn count(&self, status: TaskStatus) -> usize {
        self.tasks.iter().filter(|t| t.status == status).count()
    }
}

/// Why `sprint.json` could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// No state file: the sprint never ran here. Retryable: no.
    #[error("{}: no such file", path.display())]
    Missing {
        /// The state file.
        path: PathBuf,
    },
    /// The file could not be read (not a regular file, too large, an I/O error). Retryable:
    /// only an I/O error may pass.
    #[error("cannot read the sprint state: {0}")]
    Unreadable(#[source] corral_contract::UntrustedFileError),
    /// The file is not a state this build understands. Retryable: no.
    #[error("{}: not a sprint state: {reason}", path.display())]
    Invalid {
        /// The state file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The file could not be written: something planted where it goes (not retryable), or the
    /// disk (retryable once it has room).
    #[error(transparent)]
    Record(Box<corral_hostfs::HostFsError>),
    /// The file could not be written. Retryable: yes, once the disk has room or the
    /// directory is writable.
    #[error("cannot write {}: {source}", path.display())]
    Write {
        /// The state file.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
}

/// A spawn Corral started in a directory it made anew (see [`TaskProgress::spawned`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SpawnMark {
    /// Its round.
    pub round: u32,
    /// Its role.
    pub role: crate::layout::Role,
}

/// Reads the state at `path`. The file is read as one an agent could have replaced (it is in
/// the project tree): regular files only, bounded, never a blocking open.
pub fn read_state(path: &Path) -> Result<SprintState, StateError> {
    let bytes = match corral_contract::read_untrusted_file(path, STATE_LIMIT) {
        Ok(bytes) => bytes,
        Err(corral_contract::UntrustedFileError::Missing { .. }) => {
            return Err(StateError::Missing {
                path: path.to_path_buf(),
            });
        }
        Err(e) => return Err(StateError::Unreadable(e)),
    };
    let invalid = |reason: String| StateError::Invalid {
        path: path.to_path_buf(),
        reason,
    };
    let value: serde_json::Value =
        serde_json::from_slice(&bytes).map_err(|e| invalid(e.to_string()))?;
    match value
        .get("schemaVersion")
        .and_then(serde_json::Value::as_u64)
    {
        Some(v) if v == u64::from(STATE_SCHEMA_VERSION) => {}
        Some(v) => {
            return Err(invalid(format!(
                "schema version {v}; this build reads version {STATE_SCHEMA_VERSION}"
            )));
        }
        None => return Err(invalid("no schemaVersion".to_string())),
    }
    serde_json::from_value(value).map_err(|e| invalid(e.to_string()))
}

impl SprintState {
    /// How durably this state must be written. [`Durability::Synced`] when a task's state
    /// announces what the flow does next and must not do twice: the commit (the step is
    /// `commit`: were it lost in a power cut, the resume would judge the round again and
    /// commit it a second time; found, it looks the commit up first) or the reset of a
    /// regressed round (were it lost, the resume would judge the reset tree as the round's
    /// work). Every other state a power cut may lose: the resume redoes a step that is safe to
    /// redo (a check, a spawn whose report it finds or runs again, a reset to the task's base),
    /// and counts no round twice, since the round is counted in the synced state before the
    /// reset.
    pub fn durability(&self) -> Durability {
        let announces = self.tasks.iter().any(|t| {
            t.progress
                .as_ref()
                .is_some_and(|p| p.step == Step::Commit || p.reset_pending)
        });
        if announces {
            Durability::Synced
        } else {
            Durability::Cached
        }
    }
}

/// How far [`write_state_as`] makes sure a state reached the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// Written and renamed over the old state, no `fsync`: a `kill -9` at any moment leaves
    /// the old state or the new one (the kernel holds both the data and the rename), and so
    /// does a power cut on a file system that orders a replace-by-rename after its data (ext4
    /// by default: `auto_da_alloc`); after a power cut the newest of these states may be lost,
    /// so the one before it is resumed. For a state whose loss makes the run redo a step that
    /// is safe to redo.
    Cached,
    /// The data `fsync`ed before the rename and the directory after it: on disk before the
    /// caller does what the state announces. For a state written before something that must
    /// not be done twice (a commit, a reset): lost, the resume would do it again.
    Synced,
}

/// Writes `state` to `path` atomically and durably ([`Durability::Synced`]).
pub fn write_state(path: &Path, state: &SprintState) -> Result<(), StateError> {
    write_state_as(path, state, Durability::Synced)
}

/// Writes `state` to `path` atomically (a temporary file in the same directory, then renamed
/// over it), creating the directory: a reader, or the next `corral sprint run` after a kill,
/// sees the old state or the new one, never half of one. `durability` says whether it waits
/// for the disk.
pub fn write_state_as(
    path: &Path,
    state: &SprintState,
    durability: Durability,
) -> Result<(), StateError> {
    let failed = |source: io::Error| StateError::Write {
        path: path.to_path_buf(),
        source,
    };
    let mut json = serde_json::to_vec_pretty(state).map_err(|e| failed(io::Error::other(e)))?;
    json.push(b'\n');
    let dir = crate::file::base_dir(path);
    let name = path
        .file_name()
        .unwrap_or(std::ffi::OsStr::new(crate::layout::STATE_FILE));
    let host = |e: corral_hostfs::HostFsError| StateError::Record(Box::new(e));
    let flush = match durability {
        Durability::Synced => corral_hostfs::Flush::Synced,
        Durability::Cached => corral_hostfs::Flush::Cached,
    };
    // A temporary file created exclusively beside it, renamed over it: a reader, or the next
    // run after a kill, sees the old state or the new one, and nothing is written through a
    // link planted at its name.
    corral_hostfs::HostDir::create(dir)
        .and_then(|d| d.replace_with(name, &json, flush))
        .map_err(host)
}
