//! What a running sprint tells its caller, step by step: [`SprintEvent`] into an
//! [`EventSink`], for the live view, plain step lines and `--json`.

use std::sync::Arc;

use corral_ports::{NoopObserver, Outcome, ProviderId, RunObserver, Usage};
use serde::Serialize;

use crate::layout::Role;
use crate::names::TaskId;
use crate::state::{Attribution, RoleUsage, Step, TaskStatus, UsageRollUp};

/// One step of a sprint. Serialised with an `event` tag in kebab-case, fields in camelCase.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(tag = "event", rename_all = "kebab-case")]
pub enum SprintEvent {
    /// The sprint (re)started.
    #[serde(rename_all = "camelCase")]
    SprintStarted {
        /// Its name.
        name: String,
        /// Its branch.
        branch: String,
        /// The run's id.
        run_id: String,
        /// Whether it continues an earlier run.
        resumed: bool,
    },
    /// Uncommitted changes were kept or stashed on the user's word.
    #[serde(rename_all = "camelCase")]
    DirtyTree {
        /// The paths.
        paths: Vec<String>,
        /// `kept` or `stashed`.
        action: String,
    },
    /// The sprint's branch was checked out or created.
    #[serde(rename_all = "camelCase")]
    Branch {
        /// The branch.
        branch: String,
        /// Whether it was created now.
        created: bool,
    },
    /// `setup` ran.
    #[serde(rename_all = "camelCase")]
    Setup {
        /// Whether it exited 0.
        passed: bool,
    },
    /// A task began, or continues after a stop.
    #[serde(rename_all = "camelCase")]
    TaskStarted {
        /// The task.
        task: TaskId,
        /// Its title.
        title: String,
        /// Its round.
        round: u32,
        /// The step it continues at.
        step: Step,
    },
    /// The check (and gates) ran.
    #[serde(rename_all = "camelCase")]
    Verified {
        /// The task.
        task: TaskId,
        /// Its round (0 before the first).
        round: u32,
        /// Before the task or after the round.
        step: Step,
        /// Whether the check and every gate run passed.
        passed: bool,
        /// The gates that ran, by path.
        gates: Vec<String>,
        /// After a round: how it compares with before the task.
        #[serde(skip_serializing_if = "Option::is_none")]
        attribution: Option<Attribution>,
    },
    /// An agent spawn starts.
    #[serde(rename_all = "camelCase")]
    SpawnStarted {
        /// The task.
        task: TaskId,
        /// The round.
        round: u32,
        /// The role.
        role: Role,
        /// Who plays it.
        provider: ProviderId,
        /// The model, if set.
        model: Option<String>,
        /// Whether it resumes the role's session.
        resumes: bool,
    },
    /// An agent spawn ended, or a validated one was found from an earlier run.
    #[serde(rename_all = "camelCase")]
    SpawnFinished {
        /// The task.
        task: TaskId,
        /// The round.
        round: u32,
        /// The role.
        role: Role,
        /// How the run ended (`None`: not run again, its signals were valid already).
        outcome: Option<Outcome>,
        /// Whether its signals satisfied its contract.
        valid: bool,
        /// Its usage.
        usage: Usage,
    },
    /// The evaluator judged the round.
    #[serde(rename_all = "camelCase")]
    Evaluated {
        /// The task.
        task: TaskId,
        /// The round.
        round: u32,
        /// Whether it passed.
        passed: bool,
        /// The failed dimensions, by name.
        failed: Vec<String>,
    },
    /// A round's change broke the check: saved as a patch, the tree reset.
    #[serde(rename_all = "camelCase")]
    Regressed {
        /// The task.
        task: TaskId,
        /// The round.
        round: u32,
        /// The patch.
        patch: String,
    },
    /// An agent did what it must not; the sprint names it.
    #[serde(rename_all = "camelCase")]
    Warning {
        /// The task.
        task: TaskId,
        /// What happened.
        message: String,
    },
    /// A parallel run (`--jobs` above 1) starts these tasks at once, each in its own worktree
    /// on its own branch; they are folded onto the sprint's branch when all of them ended.
    #[serde(rename_all = "camelCase")]
    WaveStarted {
        /// The tasks, in run order.
        tasks: Vec<TaskId>,
        /// How many may run at once.
        jobs: usize,
        /// The tasks started ahead of a free slot (an executor whose jobs take long to
        /// start): their jobs start now, their rounds once a slot frees.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        ahead: Vec<TaskId>,
    },
    /// A task done on its own branch was folded onto the sprint's branch.
    #[serde(rename_all = "camelCase")]
    Folded {
        /// The task.
        task: TaskId,
        /// Its commit on the sprint's branch.
        commit: String,
        /// `fast-forward`, `cherry-pick`, or `already on the branch` (the pick came out empty:
        /// another task made the same change; `commit` is the branch's head, which has it).
        how: String,
    },
    /// The check (and the gates of the paths the fold changed) ran on the sprint's branch
    /// right after a task was folded onto it.
    #[serde(rename_all = "camelCase")]
    FoldChecked {
        /// The task folded.
        task: TaskId,
        /// Whether the check and every gate run passed.
        passed: bool,
        /// The gates that ran, by path.
        gates: Vec<String>,
    },
    /// A task's fold failed (it conflicted, or broke the check on the sprint's branch): its
    /// commit is off the sprint's branch and the task gets one more round at the branch's tip.
    #[serde(rename_all = "camelCase")]
    SentHome {
        /// The task.
        task: TaskId,
        /// The round it starts again at.
        round: u32,
        /// What went wrong, one line.
        why: String,
    },
    /// A ready task is held back: it may touch paths a task in flight touches (its
    /// `touches`, or what its last attempt changed), and would likely conflict at the fold.
    #[serde(rename_all = "camelCase")]
    Held {
        /// The task held back.
        task: TaskId,
        /// The task in flight it overlaps.
        behind: TaskId,
        /// The overlap, as the globs or paths that meet.
        overlap: String,
    },
    /// A provider's account is held by a rate limit (its reset, the CLI's own wait, Corral's
    /// backoff, another run's hold) for half a minute or more: told once per hold, however many
    /// spawns meet it, for the `rate_limited` hook.
    #[serde(rename_all = "camelCase")]
    RateLimitHold {
        /// The task whose spawn met it.
        task: TaskId,
        /// The round.
        round: u32,
        /// The role.
        role: Role,
        /// The provider held.
        provider: ProviderId,
        /// Until when, RFC 3339 in UTC.
        until: String,
    },
    /// A role's provider is held by a rate limit longer than the role's `failover_after_ms`:
    /// the next provider the role lists goes on with the task, in a new session, until the
    /// hold has passed.
    #[serde(rename_all = "camelCase")]
    FailedOver {
        /// The task.
        task: TaskId,
        /// The round.
        round: u32,
        /// The role.
        role: Role,
        /// The provider held.
        from: ProviderId,
        /// Until when, RFC 3339 in UTC.
        held_until: String,
        /// The provider that goes on.
        to: ProviderId,
    },
    /// A task ended.
    #[serde(rename_all = "camelCase")]
    TaskFinished {
        /// The task.
        task: TaskId,
        /// Done, blocked or skipped.
        status: TaskStatus,
        /// Its commit, when done.
        #[serde(skip_serializing_if = "Option::is_none")]
        commit: Option<String>,
        /// Why, when blocked or skipped.
        #[serde(skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// The sprint's record of events (`events.jsonl`) could not be written (something planted
    /// in its place, a full disk): told once, and the sprint goes on without it.
    #[serde(rename_all = "camelCase")]
    RecordUnwritable {
        /// The file.
        file: String,
        /// Why.
        message: String,
    },
    /// The sprint stopped; the last event.
    #[serde(rename_all = "camelCase")]
    SprintFinished {
        /// The summary.
        summary: SprintSummary,
    },
}

/// How a sprint run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum SprintEnd {
    /// Every task is done.
    Done,
    /// At least one task is blocked or skipped, and every other one is done.
    Blocked,
    /// An agent's rate-limit retries were used up: paused; running again continues.
    RateLimited,
    /// Cancelled; running again continues.
    Cancelled,
    /// Stopped at a step the disk had no room for ("No space left on device", from git, a
    /// check or a record): running again, once there is room, continues.
    DiskFull,
    /// A spawn failed in a way no rerun mends (the CLI missing or out of its tested range, the
    /// model unavailable, the login refused, a read-only run not attested read-only): stopped
    /// before the other tasks spend their rounds on it, the provider and the fix named in the
    /// task's warnings; running again once it is fixed continues at the same spawn.
    PermanentFailure,
    /// A spend cap was reached (`[sprint] max_cost_usd`, a task's `max_cost_usd`): paused
    /// before the next spawn, the cap and the spend named in the task's warnings; raising the
    /// cap and running again continues where it stopped.
    BudgetExhausted,
}

impl SprintEnd {
    /// The exit code of `corral sprint run` (those of `corral run` where they mean the same).
    pub fn exit_code(self) -> i32 {
        match self {
            SprintEnd::Done => 0,
            SprintEnd::Blocked => 3,
            SprintEnd::RateLimited => 4,
            SprintEnd::Cancelled => 130,
            // A failure of the machinery, as any other (`corral run`'s full disk is 1 too).
            SprintEnd::DiskFull => 1,
            // `corral run`'s "the CLI cannot be used", and the preflight's.
            SprintEnd::PermanentFailure => 8,
            // The next code free after `corral run`'s.
            SprintEnd::BudgetExhausted => 9,
        }
    }
}

/// One task in the summary.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TaskSummary {
    /// The task.
    pub id: TaskId,
    /// Where it stands.
    pub status: TaskStatus,
    /// Its last round.
    pub rounds: u32,
    /// Its commit.
    pub commit: Option<String>,
    /// The attribution of its last verified round.
    pub attribution: Option<Attribution>,
    /// Why it is blocked or skipped.
    pub reason: Option<String>,
    /// What the agents did that they should not have.
    pub warnings: Vec<String>,
    /// Tokens and cost per role.
    pub usage: RoleUsage,
    /// Tokens and cost in total, per role and per provider.
    pub roll_up: UsageRollUp,
}

/// The end of a sprint run.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SprintSummary {
    /// How it ended.
    pub end: SprintEnd,
    /// The exit code.
    pub exit_code: i32,
    /// Every task, in run order.
    pub tasks: Vec<TaskSummary>,
    /// Tokens and cost per role over every task.
    pub usage: RoleUsage,
    /// Tokens and cost over every task: in total, per role and per provider (boxed: it would
    /// make every `SprintEvent` as large as the summary's).
    pub roll_up: Box<UsageRollUp>,
}

/// Receives a sprint's events. Implementations must return quickly.
pub trait EventSink: Send + Sync {
    /// One step happened.
    fn event(&self, event: &SprintEvent);

    /// The observer of one spawn, for a live view of its agent's events.
    fn observer(&self, _task: &TaskId, _round: u32, _role: Role) -> Arc<dyn RunObserver> {
        Arc::new(NoopObserver)
    }

    /// An event of `task` that its remote worker printed (its `--json` object, as this crate's
    /// [`SprintEvent`] serialises), handed on by the task's executor: the sprint's record of
    /// events (`events.jsonl`) writes it as one of its own. Dropped by default.
    fn relayed(&self, _task: &TaskId, _event: &serde_json::Map<String, serde_json::Value>) {}
}
