//! The merge queue's folds: a task done on its own branch goes onto the sprint's branch in run
//! order (found there already, fast-forwarded, or cherry-picked), the check and the gates of the
//! paths it changed run on the branch, and a fold that conflicts or breaks the check is taken
//! back off it and the task sent home for one more round at the tip (or blocked, the second
//! time).

use corral_contract::{Contract, validate_signals_file};

use super::task::TaskCursor;
use super::{Context, SprintError, read_session_id, write_file};
use crate::event::SprintEvent;
use crate::file::{FoldCheck, Gate};
use crate::layout::{Role, SESSION_ID_FILE, SIGNALS_FILE};
use crate::names::TaskId;
use crate::state::{Attribution, SprintState, Step, TaskProgress, TaskStatus};

/// How a task's commit went onto the sprint's branch.
enum Applied {
    /// The branch has it now: the commit there, and `fast-forward` or `cherry-pick`.
    Made(String, &'static str),
    /// The pick came out empty: the branch had the same change already.
    Empty,
    /// The pick did not apply (aborted): why, as "conflicts in a, b" or "fails: <git's words>".
    Failed(String),
}

/// The check's output on the sprint's branch after a task's fold, in the task's directory.
pub const FOLD_CHECK_FILE: &str = "fold-check.txt";

/// A task's change as it was when its fold failed and it was sent home, in its directory.
pub const SENT_HOME_PATCH_FILE: &str = "sent-home.patch";

/// How a fold whose change the branch already has is named (the `folded` event's `how`).
pub const ALREADY_ON_BRANCH: &str = "already on the branch";

/// The largest patch of a task sent home that is saved.
const PATCH_LIMIT: usize = 64 * 1024 * 1024;

impl Context<'_, '_> {
    /// Folds the tasks done on their own branches and not yet folded, in run order, up to
    /// the first task that has not ended: the sprint's branch gets its commits in run order
    /// whatever order the tasks ended in.
    pub(super) async fn fold_ready(&self, state: &mut SprintState) -> Result<(), SprintError> {
        for i in 0..state.tasks.len() {
            let Some(t) = state.tasks.get(i) else {
                break;
            };
            match t.status {
                TaskStatus::Done if t.task_branch.is_some() => {
                    if let Some(mut cursor) = TaskCursor::new(self, state, i) {
                        cursor.fold().await?;
                    }
                }
                TaskStatus::Done | TaskStatus::Blocked | TaskStatus::Skipped => {}
                TaskStatus::Pending | TaskStatus::Running => break,
            }
        }
        Ok(())
    }

    /// Puts `commit` (task `id`'s) on the sprint's branch: found there already (a stop after
    /// the fold), fast-forwarded, or cherry-picked; a pick that fails is aborted.
    async fn apply_fold(&self, commit: &str, id: &str) -> Result<Applied, SprintError> {
        let parent = format!("{commit}^");
        let folded = if self
            .git
            .succeeds(&["merge-base", "--is-ancestor", commit, "HEAD"])
            .await?
        {
            (commit.to_string(), "fast-forward")
        } else if let Some(found) = self
            .git
            .commits_for_task(&parent, id)
            .await?
            .into_iter()
            .next()
        {
            (found, "cherry-pick")
        } else if self
            .git
            .succeeds(&["merge-base", "--is-ancestor", "HEAD", commit])
            .await?
        {
            self.git
                .run(&["merge", "--ff-only", "--quiet", commit])
                .await?;
            (commit.to_string(), "fast-forward")
        } else {
            let out = self
                .git
                .output(
                    &["cherry-pick", "--allow-empty", commit],
                    corral_ports::DEFAULT_OUTPUT_LIMIT,
                )
                .await?;
            if out.success() {
                (self.git.head().await?, "cherry-pick")
            } else {
                let conflicted = self
                    .git
                    .run(&["diff", "--name-only", "--diff-filter=U"])
                    .await
                    .unwrap_or_default();
                let paths: Vec<String> = conflicted
                    .lines()
                    .filter(|l| !l.is_empty())
                    .map(str::to_string)
                    .collect();
                // Nothing in conflict and nothing staged: the pick came out empty, the same
                // change being on the branch already (another task made it).
                let empty = paths.is_empty()
                    && self
                        .git
                        .succeeds(&["diff", "--cached", "--quiet", "HEAD"])
                        .await?;
                if !self.git.succeeds(&["cherry-pick", "--abort"]).await? {
                    self.git
                        .run(&["reset", "--hard", "--quiet", "HEAD"])
                        .await?;
                }
                self.git.forget();
                if empty {
                    return Ok(Applied::Empty);
                }
                let what = if paths.is_empty() {
                    format!("fails: {}", out.stderr.text.trim())
                } else {
                    format!("conflicts in {}", paths.join(", "))
                };
                return Ok(Applied::Failed(what));
            }
        };
        Ok(Applied::Made(folded.0, folded.1))
    }

    /// Removes a task's worktree (its branch stays); one that cannot be removed stays too,
    /// and the next run of the task replaces it.
    pub(super) async fn remove_worktree(&self, task: &TaskId) {
        let path = self
            .layout
            .worktree_dir(task)
            .to_string_lossy()
            .into_owned();
        let _ = self
            .git
            .run(&["worktree", "remove", "--force", &path])
            .await;
    }
}

impl TaskCursor<'_, '_, '_> {
    /// Folds task `i`'s commit onto the sprint's branch: found there already (a stop after
    /// the fold), fast-forwarded, or cherry-picked; then the check (and the gates of the paths
    /// the fold changed) runs on the branch. A fold that conflicts or breaks the check is taken
    /// back off the branch and the task sent home for one more round ([`TaskCursor::send_home`]); a
    /// change found already on the branch (another task made the same) folds as nothing.
    ///
    /// Crash-safe: the branch's head before the fold is written (`fold_onto`) before anything
    /// moves it, and the task is marked folded only after its check passed. A stop in between
    /// finds the fold on the next run and checks it again; a stop after the branch was taken
    /// back folds again and meets the same failure.
    pub(super) async fn fold(&mut self) -> Result<(), SprintError> {
        let Some(t) = self.state.tasks.get(self.i).cloned() else {
            return Ok(());
        };
        let (Some(_), Some(commit)) = (&t.task_branch, t.commit.clone()) else {
            return Ok(());
        };
        let onto = match t.fold_onto.clone() {
            Some(onto) => onto,
            None => {
                let head = self.ctx.git.head().await?;
                if let Some(t) = self.state.tasks.get_mut(self.i) {
                    t.fold_onto = Some(head.clone());
                }
                self.save()?;
                head
            }
        };
        let folded = match self.ctx.apply_fold(&commit, t.id.as_str()).await? {
            Applied::Made(commit, how) => (commit, how),
            Applied::Empty => {
                self.ctx.emit(SprintEvent::Folded {
                    task: t.id.clone(),
                    commit: onto.clone(),
                    how: ALREADY_ON_BRANCH.to_string(),
                });
                return self.folded(onto).await;
            }
            Applied::Failed(what) => {
                let critique = format!(
                    "Your change could not be folded onto the sprint's branch ({}): it {what}. \
                     Another task changed the same lines first. Your work tree now starts at \
                     the branch's tip, with that task's change in it; do the task again on it, \
                     keeping the other task's change.",
                    self.ctx.file().sprint.branch
                );
                return self
                    .send_home(&onto, format!("folding it {what}"), critique, None)
                    .await;
            }
        };
        self.ctx.emit(SprintEvent::Folded {
            task: t.id.clone(),
            commit: folded.0.clone(),
            how: folded.1.to_string(),
        });
        match self.ctx.file().sprint.fold_check {
            FoldCheck::Each => {}
            // Taken as it applied: what the queue was before it checked its folds.
            FoldCheck::Off => return self.folded(folded.0).await,
        }
        // The fold's own check, on the branch as it now is: two tasks that each passed beside
        // the other can break it together.
        let changed = self
            .ctx
            .git
            .run(&["diff", "--name-only", "-z", &onto, &folded.0])
            .await?;
        let paths: Vec<&str> = changed.split('\0').filter(|p| !p.is_empty()).collect();
        let gates: Vec<&Gate> = self
            .ctx
            .file()
            .gates
            .iter()
            .filter(|g| paths.iter().any(|p| g.applies_to(p)))
            .collect();
        let Some(v) = self.ctx.verify(&gates).await? else {
            // Cancelled: the next run finds the fold and checks it again.
            return Ok(());
        };
        write_file(
            &self.ctx.layout,
            &self.ctx.layout.task_dir(&t.id).join(FOLD_CHECK_FILE),
            v.report.as_bytes(),
        )?;
        self.ctx.emit(SprintEvent::FoldChecked {
            task: t.id.clone(),
            passed: v.passed,
            gates: v.gates.clone(),
        });
        // Blamed on the fold only when the task's own round passed: a check that failed on
        // its branch too is the baseline's, as the round's attribution said.
        let blamed = match t.attribution {
            Some(Attribution::Clean | Attribution::FixedBaseline) | None => !v.passed,
            Some(
                Attribution::Regressed | Attribution::BaselineBroken | Attribution::BrokeOnFold,
            ) => false,
        };
        if blamed {
            // Back to the head before the fold (no `git clean`: the project's untracked files
            // are the user's).
            self.ctx
                .git
                .run(&["reset", "--hard", "--quiet", &onto])
                .await?;
            self.ctx.git.forget();
            let critique = format!(
                "Your change passed the check on its own, but once folded onto the sprint's \
                 branch ({}), after the tasks folded before it, the check failed. Your work \
                 tree now starts at the branch's tip, with their changes in it; do the task \
                 again on it so that the check passes. The check's output there:\n\n```text\n{}\n```",
                self.ctx.file().sprint.branch,
                crate::prompt::cut(&v.report, crate::prompt::PROMPT_OUTPUT_LIMIT).trim_end()
            );
            return self
                .send_home(
                    &onto,
                    "the check failed on the sprint branch with it folded on".to_string(),
                    critique,
                    Some(Attribution::BrokeOnFold),
                )
                .await;
        }
        self.folded(folded.0).await
    }

    /// Task `i` is folded as `commit`: its learnings appended, its entry saved, its worktree
    /// removed (its branch stays).
    pub(super) async fn folded(&mut self, commit: String) -> Result<(), SprintError> {
        let task = self.task;
        let Some(t) = self.state.tasks.get(self.i).cloned() else {
            return Ok(());
        };
        let signals = validate_signals_file(
            &self
                .ctx
                .layout
                .spawn_dir(&t.id, t.round, Role::Generator)
                .join(SIGNALS_FILE),
            &Contract::generator(),
        )
        .map(corral_contract::ValidatedSignals::into_signals)
        .unwrap_or_default();
        self.ctx.append_learnings(task, t.round, &signals)?;
        if let Some(t) = self.state.tasks.get_mut(self.i) {
            t.commit = Some(commit.clone());
            t.task_branch = None;
            t.fold_onto = None;
        }
        self.save()?;
        self.ctx.remove_worktree(&t.id).await;
        Ok(())
    }

    /// Takes task `i` home after its fold failed (`why`, one line): one more round at the
    /// sprint branch's tip `onto`, told `critique`, its generator's session resumed; or, sent
    /// home once already, blocked. Its commit is saved as a patch and named, and stays on its
    /// branch when it is blocked.
    ///
    /// The branch was put back to `onto` before this; the state is written last, so that a
    /// stop before it folds again and meets the same failure.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn send_home(
        &mut self,
        onto: &str,
        why: String,
        critique: String,
        attribution: Option<Attribution>,
    ) -> Result<(), SprintError> {
        let Some(t) = self.state.tasks.get(self.i).cloned() else {
            return Ok(());
        };
        let (Some(branch), Some(commit)) = (t.task_branch.clone(), t.commit.clone()) else {
            return Ok(());
        };
        self.ctx.remove_worktree(&t.id).await;
        if t.sent_home > 0 {
            if let Some(t) = self.state.tasks.get_mut(self.i) {
                t.commit = None;
                t.task_branch = None;
                t.fold_onto = None;
                if attribution.is_some() {
                    t.attribution = attribution;
                }
            }
            let reason = format!(
                "{why} onto {}, after the round it was sent home for; its change stays on \
                 branch {branch}",
                self.ctx.file().sprint.branch
            );
            return self.finish_blocked(reason).map(drop);
        }
        let patch = self
            .ctx
            .git
            .run_limited(
                &["diff", "--binary", &format!("{commit}^"), &commit],
                PATCH_LIMIT,
            )
            .await?;
        let saved = self.ctx.layout.task_dir(&t.id).join(SENT_HOME_PATCH_FILE);
        write_file(&self.ctx.layout, &saved, patch.as_bytes())?;
        let critique = format!(
            "{critique}\n\nYour earlier change is saved as {} (commit {commit}, branch \
             {branch}.sent-home); `git apply` it if it helps.",
            saved.display()
        );
        // The change stays on a branch of its own beside the task's; the task's branch starts
        // again at the tip, and its worktree is made afresh there.
        let kept = format!("{branch}.sent-home");
        self.ctx
            .git
            .run(&["branch", "--force", &kept, &commit])
            .await?;
        self.ctx
            .git
            .run(&["branch", "--force", &branch, onto])
            .await?;
        let round = t.round + 1;
        let generator_dir = self.ctx.layout.spawn_dir(&t.id, t.round, Role::Generator);
        let session = read_session_id(&generator_dir.join(SESSION_ID_FILE))
            .ok()
            .flatten()
            .map(|s| s.to_string());
        let session_provider = super::session_provider(&generator_dir);
        if let Some(t) = self.state.tasks.get_mut(self.i) {
            t.status = TaskStatus::Running;
            t.round = round;
            t.commit = None;
            t.fold_onto = None;
            t.sent_home += 1;
            if attribution.is_some() {
                t.attribution = attribution;
            }
            t.progress = Some(TaskProgress {
                base: onto.to_string(),
                // The tip's check is known only on the project's tree: the round's own
                // pre-verify runs it again on the new worktree, for the attribution.
                step: Step::PreVerify,
                pre_passed: None,
                pre_failed_gates: Vec::new(),
                critique: Some(critique),
                regressions: 0,
                reset_pending: false,
                generator_session: session,
                generator_session_provider: session_provider,
                spawned: None,
                transient_retries: 0,
            });
        }
        self.save()?;
        self.ctx.emit(SprintEvent::SentHome {
            task: t.id.clone(),
            round,
            why,
        });
        Ok(())
    }
}
