//! A round's agent steps: the generator's spawn (its prompt, its session, its directory), the
//! policing of what it left, and the evaluator's judgement.

use std::path::Path;

use corral_contract::{Contract, EvaluationStatus, Signal, read_session_id, render_evaluation_md};
use corral_ports::{ErrorClass, SessionId};

use crate::agent::{RoleAgent, SpawnReport, SpawnRequest, SpawnVerdict};
use crate::error::SprintError;
use crate::event::{SprintEnd, SprintEvent};
use crate::file::Task;
use crate::layout::{EVALUATION_FILE, ROLE_META_FILE, Role, RoleMeta, SESSION_ID_FILE};
use crate::prompt::{self};
use crate::state::{Attribution, FailureClass, RoleUsage, SpawnFailureRecord, SprintState, Step};

use super::{
    BLOCKED_PATCH_FILE, CHANGED_PATHS_FILE, CHECK_FILE, DIFF_FILE, Flow, Next, crash_resumable,
    critique_of, earlier_report, pause_for, progress_mut, read_record_text, short, write_file,
};

impl<'r, 'a> Flow<'r, 'a> {
    pub(super) async fn generate(
        &self,
        state: &mut SprintState,
        i: usize,
        task: &Task,
        run_id: &str,
    ) -> Result<Next, SprintError> {
        let Some(t) = state.tasks.get(i).cloned() else {
            return Ok(Next::Finished);
        };
        let Some(progress) = t.progress.clone() else {
            return Ok(Next::Finished);
        };
        self.fingerprint_protected(task, t.round).await?;
        let agent = self.run.generator;
        let dir = self.layout.spawn_dir(&task.id, t.round, Role::Generator);
        let contract = Contract::generator();
        let signals = if let Some(valid) =
            earlier_report(&progress, t.round, Role::Generator, &dir, &contract)
        {
            // The round ran to a valid report before the sprint stopped: not run again.
            self.emit(SprintEvent::SpawnFinished {
                task: task.id.clone(),
                round: t.round,
                role: Role::Generator,
                outcome: None,
                valid: true,
                usage: corral_ports::Usage::default(),
            });
            let session = read_session_id(&dir.join(SESSION_ID_FILE)).ok().flatten();
            if let Some(p) = progress_mut(state, i) {
                p.generator_session = session
                    .map(|s| s.to_string())
                    .or(p.generator_session.take());
            }
            Some(valid.into_signals())
        } else {
            let learnings = self.learnings_for(task);
            let brief = prompt::generator_brief(
                self.file(),
                task,
                t.round,
                &learnings,
                progress.critique.as_deref(),
            );
            let crashed = crash_resumable(&dir, agent, &self.work_tree);
            let previous = progress
                .generator_session
                .as_deref()
                .and_then(|s| SessionId::new(s).ok())
                .filter(|_| agent.resumes());
            let (prompt_text, cold, resume) = match (crashed, previous) {
                (Some(session), _) => (
                    prompt::generator_crash_resume(task, t.round),
                    Some(brief),
                    Some(session),
                ),
                (None, Some(session)) if t.round > 1 => (
                    prompt::generator_next_round(task, t.round, progress.critique.as_deref()),
                    Some(brief),
                    Some(session),
                ),
                (None, _) => (brief, None, None),
            };
            let report = self
                .spawn(
                    state,
                    i,
                    Role::Generator,
                    agent,
                    SpawnRequest {
                        role: Role::Generator,
                        dir: dir.clone(),
                        work_tree: self.work_tree.clone(),
                        prompt: prompt_text,
                        cold_prompt: cold,
                        resume,
                        contract,
                        read_only: false,
                        run_id: run_id.to_string(),
                    },
                )
                .await?;
            if let Some(end) = pause_for(&report, &self.run.cancel) {
                return Ok(Next::Pause(end));
            }
            if let (Some(p), Some(session)) = (progress_mut(state, i), &report.session_id) {
                p.generator_session = Some(session.to_string());
            }
            if let Some(next) = self
                .failed_spawn(state, i, task, Role::Generator, &report, None)
                .await?
            {
                return Ok(next);
            }
            match report.verdict {
                SpawnVerdict::Valid { signals } => Some(signals),
                SpawnVerdict::Invalid { reason } => {
                    let critique =
                        format!("Round {} ended without a valid report: {reason}", t.round);
                    self.save(state)?;
                    return self.next_round(state, i, task, critique).await;
                }
                SpawnVerdict::NotChecked => {
                    let why = report.error.as_ref().map_or_else(
                        || report.outcome.as_str().to_string(),
                        |e| e.message.clone(),
                    );
                    let critique = format!("Round {} ended before a report: {why}", t.round);
                    self.save(state)?;
                    return self.next_round(state, i, task, critique).await;
                }
            }
        };
        if let Some(next) = self.police(state, i, task, Role::Generator).await? {
            return Ok(next);
        }
        let blocked = signals.iter().flatten().find_map(|s| {
            if let Signal::TaskBlocked(b) = s {
                Some(b.reason.clone())
            } else {
                None
            }
        });
        if let Some(reason) = blocked {
            return self
                .block(
                    state,
                    i,
                    task,
                    format!("the generator reported it blocked: {reason}"),
                )
                .await;
        }
        if let Some(p) = progress_mut(state, i) {
            p.step = Step::PostVerify;
        }
        self.save(state)?;
        Ok(Next::Continue)
    }

    /// Writes `role-meta.json`, runs one spawn, and counts its usage.
    pub(super) async fn spawn(
        &self,
        state: &mut SprintState,
        i: usize,
        role: Role,
        agent: &dyn RoleAgent,
        request: SpawnRequest,
    ) -> Result<SpawnReport, SprintError> {
        let Some(t) = state.tasks.get(i) else {
            return Err(SprintError::Io {
                path: request.dir,
                source: std::io::Error::other("no such task"),
            });
        };
        let (id, round, attempt) = (t.id.clone(), t.round, t.attempt);
        self.fresh_spawn_dir(&request.dir)?;
        // Recorded before the spawn: from now on, what is in its directory is its own.
        if let Some(p) = progress_mut(state, i) {
            p.spawned = Some(crate::state::SpawnMark { round, role });
        }
        self.save(state)?;
        let meta = RoleMeta {
            role,
            provider: agent.provider(),
            model: agent.model().map(str::to_string),
            effort: agent.effort(),
            attempt,
            round,
            started_at: self.now(),
        };
        let meta_path = request.dir.join(ROLE_META_FILE);
        let json = serde_json::to_vec_pretty(&meta).map_err(|e| SprintError::Io {
            path: meta_path.clone(),
            source: std::io::Error::other(e),
        })?;
        write_file(&self.layout, &meta_path, &json)?;
        self.emit(SprintEvent::SpawnStarted {
            task: id.clone(),
            round,
            role,
            provider: agent.provider(),
            model: agent.model().map(str::to_string),
            resumes: request.resume.is_some(),
        });
        let observer = self.run.events.observer(&id, round, role);
        self.git.forget();
        let report = agent
            .spawn(request, self.run.cancel.clone(), observer)
            .await;
        if let Some(t) = state.tasks.get_mut(i) {
            let mut usage = RoleUsage::default();
            match role {
                Role::Generator => usage.generator = report.usage,
                Role::Evaluator => usage.evaluator = report.usage,
            }
            t.usage.add(&usage);
            t.usage_by_provider
                .entry(agent.provider())
                .or_default()
                .add(&report.usage);
            // Not undone, and not blocking: Corral cannot take back a write outside the tree
            // (the sandbox, when there is one, refuses it); it is named for the user to look at.
            if !report.stray_writes.is_empty() {
                let message = format!(
                    "round {round}: the {role} wrote outside the paths it may write: {}",
                    report.stray_writes.join("; ")
                );
                t.warnings.push(message.clone());
                self.emit(SprintEvent::Warning {
                    task: id.clone(),
                    message,
                });
            }
        }
        self.save(state)?;
        self.emit(SprintEvent::SpawnFinished {
            task: id,
            round,
            role,
            outcome: Some(report.outcome),
            valid: matches!(report.verdict, SpawnVerdict::Valid { .. }),
            usage: report.usage,
        });
        Ok(report)
    }

    /// Makes a spawn's directory anew, just before the spawn: what an earlier spawn of the same
    /// round and role left there (a crash, a report that did not validate) is moved aside to
    /// `<role>.earlier-<n>` (kept for the record; its session was read before), so nothing in
    /// the spawn's directory predates it. Through the record's handle: a link is moved, never
    /// followed.
    pub(super) fn fresh_spawn_dir(&self, dir: &Path) -> Result<(), SprintError> {
        let Some(rel) = self.layout.below_root(dir) else {
            return Err(SprintError::Io {
                path: dir.to_path_buf(),
                source: std::io::Error::other("not in the sprint's record"),
            });
        };
        let record = self.layout.record()?;
        if record.kind(rel)?.is_some() {
            let name = rel.file_name().map(|n| n.to_string_lossy().into_owned());
            let name = name.unwrap_or_default();
            let mut n = 1;
            let aside = loop {
                let aside = rel.with_file_name(format!("{name}.earlier-{n}"));
                if record.kind(&aside)?.is_none() {
                    break aside;
                }
                n += 1;
            };
            record.rename(rel, &aside)?;
        }
        record.fresh_dir(rel)?;
        Ok(())
    }

    /// Finds what an agent must not have done: switched the branch (the task is blocked, its
    /// change saved, the sprint's branch checked out again) or committed (its commits are
    /// undone, their changes kept for the task's own commit). Either is named in the status.
    pub(super) async fn police(
        &self,
        state: &mut SprintState,
        i: usize,
        task: &Task,
        role: Role,
    ) -> Result<Option<Next>, SprintError> {
        let Some(base) = state
            .tasks
            .get(i)
            .and_then(|t| t.progress.as_ref())
            .map(|p| p.base.clone())
        else {
            return Ok(None);
        };
        let branch = &self.branch;
        let (now_on, head) = self.git.branch_and_head().await?;
        if now_on.as_deref() != Some(branch.as_str()) {
            let message = format!(
                "the {role} switched from {branch} to {}",
                now_on
                    .as_deref()
                    .map_or("a detached HEAD".to_string(), |b| format!("branch {b}"))
            );
            self.warn(state, i, task, &message)?;
            let patch = self.git.patch_against(&base).await?;
            write_file(
                &self.layout,
                &self.layout.task_dir(&task.id).join(BLOCKED_PATCH_FILE),
                patch.as_bytes(),
            )?;
            self.git
                .run(&["checkout", "--quiet", "--force", branch])
                .await?;
            self.git.reset_to(&base).await?;
            return Ok(Some(self.finish_blocked(state, i, task, message)?));
        }
        if head != base {
            let message = format!(
                "the {role} committed on its own ({}); Corral undid the commit and kept its change",
                short(&head)
            );
            self.warn(state, i, task, &message)?;
            self.git.run(&["reset", "--soft", "--quiet", &base]).await?;
        }
        Ok(None)
    }

    pub(super) fn warn(
        &self,
        state: &mut SprintState,
        i: usize,
        task: &Task,
        message: &str,
    ) -> Result<(), SprintError> {
        if let Some(t) = state.tasks.get_mut(i) {
            t.warnings.push(message.to_string());
        }
        self.save(state)?;
        self.emit(SprintEvent::Warning {
            task: task.id.clone(),
            message: message.to_string(),
        });
        Ok(())
    }

    pub(super) async fn evaluate(
        &self,
        state: &mut SprintState,
        i: usize,
        task: &Task,
        run_id: &str,
    ) -> Result<Next, SprintError> {
        let Some(t) = state.tasks.get(i).cloned() else {
            return Ok(Next::Finished);
        };
        let Some(agent) = self.run.evaluator else {
            if let Some(p) = progress_mut(state, i) {
                p.step = Step::Commit;
            }
            self.save(state)?;
            return Ok(Next::Continue);
        };
        let dir = self.layout.spawn_dir(&task.id, t.round, Role::Evaluator);
        let contract = Contract::evaluator();
        let reported = t
            .progress
            .as_ref()
            .and_then(|p| earlier_report(p, t.round, Role::Evaluator, &dir, &contract));
        let (evaluation, fresh) = if let Some(valid) = reported {
            self.emit(SprintEvent::SpawnFinished {
                task: task.id.clone(),
                round: t.round,
                role: Role::Evaluator,
                outcome: None,
                valid: true,
                usage: corral_ports::Usage::default(),
            });
            (valid.evaluation().cloned(), None)
        } else {
            let round_dir = self.layout.round_dir(&task.id, t.round);
            let diff_file = round_dir.join(DIFF_FILE);
            let diff = read_record_text(&self.layout, &diff_file);
            let changed = read_record_text(&self.layout, &round_dir.join(CHANGED_PATHS_FILE));
            let check = read_record_text(&self.layout, &round_dir.join(CHECK_FILE));
            let text = prompt::evaluator_prompt(
                task,
                t.round,
                &self.file().sprint.check,
                t.attribution.unwrap_or(Attribution::Clean),
                &check,
                &prompt::RoundDiff {
                    text: &diff,
                    file: &diff_file.display().to_string(),
                    changed_paths: &changed,
                },
            );
            let report = self
                .spawn(
                    state,
                    i,
                    Role::Evaluator,
                    agent,
                    SpawnRequest {
                        role: Role::Evaluator,
                        dir: dir.clone(),
                        work_tree: self.work_tree.clone(),
                        prompt: text,
                        cold_prompt: None,
                        resume: None,
                        contract,
                        read_only: true,
                        run_id: run_id.to_string(),
                    },
                )
                .await?;
            if let Some(end) = pause_for(&report, &self.run.cancel) {
                return Ok(Next::Pause(end));
            }
            let evaluation = match &report.verdict {
                SpawnVerdict::Valid { signals } => signals.iter().find_map(|s| {
                    if let Signal::Evaluation(e) = s {
                        Some(e.clone())
                    } else {
                        None
                    }
                }),
                SpawnVerdict::Invalid { .. } | SpawnVerdict::NotChecked => None,
            };
            (evaluation, Some(report))
        };
        if let Some(next) = self.police(state, i, task, Role::Evaluator).await? {
            return Ok(next);
        }
        // An evaluator that failed, or answered without a valid evaluation, is the review's
        // failure, not the round's: the review runs again, and no generator round is spent.
        if let Some(report) = &fresh {
            let no_evaluation = evaluation.is_none().then(|| match &report.verdict {
                SpawnVerdict::Invalid { reason } => {
                    format!("its report is not a valid evaluation: {reason}")
                }
                SpawnVerdict::Valid { .. } => "its report holds no evaluation".to_string(),
                SpawnVerdict::NotChecked => "it ended before a report".to_string(),
            });
            if let Some(next) = self
                .failed_spawn(state, i, task, Role::Evaluator, report, no_evaluation)
                .await?
            {
                return Ok(next);
            }
        }
        let Some(evaluation) = evaluation else {
            let critique = format!(
                "The review of round {} gave no valid evaluation; make sure the change does \
                 the whole task and the check passes.",
                t.round
            );
            return self.next_round(state, i, task, critique).await;
        };
        write_file(
            &self.layout,
            &dir.join(EVALUATION_FILE),
            render_evaluation_md(&evaluation).as_bytes(),
        )?;
        let passed = evaluation.status == EvaluationStatus::Passed;
        self.emit(SprintEvent::Evaluated {
            task: task.id.clone(),
            round: t.round,
            passed,
            failed: evaluation
                .failed_dimensions()
                .map(|d| d.name.clone())
                .collect(),
        });
        if passed {
            if let Some(p) = progress_mut(state, i) {
                p.step = Step::Commit;
            }
            self.save(state)?;
            Ok(Next::Continue)
        } else {
            self.next_round(state, i, task, critique_of(&evaluation, t.round))
                .await
        }
    }

    /// Judges a spawn whose report says it failed (`report.error`) or, for the evaluator, that
    /// it gave no valid evaluation (`no_evaluation`, why): `None` when the round goes on as
    /// usual (no failure, or a transient one that still left the generator's valid report).
    ///
    /// Every failure is written in the task's `failures` with its class. A transient one (a
    /// watchdog kill, the wall clock, a crash), and an evaluator without an evaluation, runs
    /// the same spawn again, at the same step and round, no round counted (a generator's
    /// session is resumed where the CLI can: its spawn directory names it), while the round's
    /// `transient_retries` last; past them the task is blocked, naming why. A permanent one
    /// stops the sprint with [`SprintEnd::PermanentFailure`] (exit 8), the task left at that
    /// spawn and the provider's message, with its fix, in the task's warnings: no other task
    /// spends its rounds on a CLI or a login that cannot work, and a rerun once it is fixed
    /// goes on there.
    async fn failed_spawn(
        &self,
        state: &mut SprintState,
        i: usize,
        task: &Task,
        role: Role,
        report: &SpawnReport,
        no_evaluation: Option<String>,
    ) -> Result<Option<Next>, SprintError> {
        let valid = matches!(report.verdict, SpawnVerdict::Valid { .. });
        let (class, message) = match (&report.error, no_evaluation) {
            (Some(error), no_evaluation) => match error.class {
                ErrorClass::Permanent => (FailureClass::Permanent, error.message.clone()),
                ErrorClass::Retryable if valid && no_evaluation.is_none() => return Ok(None),
                ErrorClass::Retryable => (FailureClass::Transient, error.message.clone()),
                // Stopped by `pause_for` before this is asked.
                ErrorClass::Cancelled => return Ok(None),
            },
            (None, Some(why)) => (FailureClass::NoEvaluation, why),
            (None, None) => return Ok(None),
        };
        // A spawn that could not write its record on a full disk is the sprint's full disk,
        // which ends it as a pause (exit 1, `disk.rs`), not the provider's failure.
        if super::disk::names_full(&message) {
            return Err(SprintError::Io {
                path: self.layout.task_dir(&task.id),
                source: std::io::Error::other(message),
            });
        }
        // The provider's message may span lines (its `hint:` is one): one line in the record.
        let message = message
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect::<Vec<_>>()
            .join("; ");
        let Some(t) = state.tasks.get_mut(i) else {
            return Ok(None);
        };
        let round = t.round;
        let agent = match role {
            Role::Generator => self.run.generator,
            // Without an evaluator of its own, the generator's agent reviews.
            Role::Evaluator => self.run.evaluator.unwrap_or(self.run.generator),
        };
        let provider = agent.provider();
        t.failures.push(SpawnFailureRecord {
            round,
            role,
            provider,
            outcome: report.outcome,
            class,
            message: message.clone(),
        });
        match class {
            FailureClass::Permanent => {
                let fix = if message.contains("hint:") {
                    String::new()
                } else {
                    permanent_fix(report.outcome, role, provider, self.file())
                };
                let warning = format!(
                    "round {round}: the {role} ({provider}) failed in a way no rerun mends, so \
                     the sprint stopped here: {message}{fix}"
                );
                self.warn(state, i, task, &warning)?;
                Ok(Some(Next::Pause(SprintEnd::PermanentFailure)))
            }
            FailureClass::Transient | FailureClass::NoEvaluation => {
                let allowed = self.file().sprint.transient_retries;
                let used = t.progress.as_ref().map_or(0, |p| p.transient_retries);
                if used >= allowed {
                    let reason = format!(
                        "round {round}: the {role} ({provider}) failed {} time(s) running, past \
                         [sprint] transient_retries = {allowed} ({}); the last: {}: {message}",
                        used + 1,
                        class.as_str(),
                        report.outcome.as_str(),
                    );
                    self.save(state)?;
                    return self.block(state, i, task, reason).await.map(Some);
                }
                if let Some(p) = t.progress.as_mut() {
                    p.transient_retries = used + 1;
                }
                let warning = format!(
                    "round {round}: the {role} ({provider}) failed ({}, {}), so it runs again \
                     ({} of {allowed}, no round counted): {message}",
                    class.as_str(),
                    report.outcome.as_str(),
                    used + 1,
                );
                self.warn(state, i, task, &warning)?;
                Ok(Some(Next::Continue))
            }
        }
    }
}

/// What to change after a permanent failure whose message names no fix of its own (`hint:`),
/// as `; fix: …`; empty when the outcome says nothing more than the message.
fn permanent_fix(
    outcome: corral_ports::Outcome,
    role: Role,
    provider: corral_ports::ProviderId,
    file: &crate::file::SprintFile,
) -> String {
    use corral_ports::Outcome;
    let sprint_file = file.path.file_name().map_or_else(
        || file.path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    match outcome {
        Outcome::ModelUnavailable => format!(
            "; fix: set `model` under [roles.{role}] in {sprint_file} to a model {provider} \
             serves (`corral doctor --provider {provider}` asks it)"
        ),
        Outcome::Refused => {
            format!("; fix: `corral doctor --provider {provider}` checks its login and settings")
        }
        Outcome::SpawnFailed | Outcome::NotStarted => {
            format!("; fix: `corral doctor --provider {provider}` checks its CLI and version")
        }
        Outcome::Succeeded
        | Outcome::Recovered
        | Outcome::Cancelled
        | Outcome::RateLimited
        | Outcome::StaleSession
        | Outcome::Crashed
        | Outcome::IdleTimeout
        | Outcome::WallTimeout => String::new(),
    }
}
