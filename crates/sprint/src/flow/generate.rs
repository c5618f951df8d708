//! The generate step: the generator's spawn (its prompt, its session, its directory made
//! anew), the report it left or the one an earlier run of the same round left, and one spawn's
//! bookkeeping (`role-meta.json`, usage, stray writes) for either role.

use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use std::time::SystemTime;

use corral_contract::{Contract, Signal, read_session_id};
use corral_ports::SessionId;

use crate::agent::{RoleAgent, SpawnReport, SpawnRequest, SpawnVerdict, current_agent};
use crate::error::SprintError;
use crate::event::SprintEvent;
use crate::file::Usd;
use crate::layout::{ROLE_META_FILE, Role, RoleMeta, SESSION_ID_FILE};
use crate::prompt::{self};
use crate::state::{RoleUsage, Step};

use super::handover::{HoldWatch, rfc3339};
use super::task::TaskCursor;
use super::{Context, Next, crash_resumable, earlier_report, progress_mut, write_file};

impl TaskCursor<'_, '_, '_> {
    pub(super) async fn generate(&mut self, run_id: &str) -> Result<Next, SprintError> {
        let task = self.task;
        let Some(t) = self.state.tasks.get(self.i).cloned() else {
            return Ok(Next::Finished);
        };
        let Some(progress) = t.progress.clone() else {
            return Ok(Next::Finished);
        };
        let role_agent = self.ctx.run.generator;
        // With failover, the provider of the role whose account is not held.
        let agent = current_agent(role_agent);
        let dir = self
            .ctx
            .layout
            .spawn_dir(&task.id, t.round, Role::Generator);
        let contract = Contract::generator();
        let signals = if let Some(valid) =
            earlier_report(&progress, t.round, Role::Generator, &dir, &contract)
        {
            // The round ran to a valid report before the sprint stopped: not run again.
            self.ctx.emit(SprintEvent::SpawnFinished {
                task: task.id.clone(),
                round: t.round,
                role: Role::Generator,
                outcome: None,
                valid: true,
                usage: corral_ports::Usage::default(),
            });
            let session = read_session_id(&dir.join(SESSION_ID_FILE)).ok().flatten();
            if let Some(p) = progress_mut(self.state, self.i)
                && let Some(session) = session
            {
                p.generator_session = Some(session.to_string());
                p.generator_session_provider = super::session_provider(&dir);
            }
            Some(valid.into_signals())
        } else {
            let learnings = self.ctx.learnings_for(task);
            let brief = prompt::generator_brief(
                self.ctx.file(),
                task,
                t.round,
                &learnings,
                progress.critique.as_deref(),
            );
            let crashed = crash_resumable(&dir, agent, &self.ctx.work_tree);
            let previous = progress
                .generator_session
                .as_deref()
                .and_then(|s| SessionId::new(s).ok())
                .filter(|_| agent.resumes())
                // A session another provider of the role made is not this one's to resume: a
                // new session gets the brief, the critique and the learnings.
                .filter(|_| {
                    progress
                        .generator_session_provider
                        .is_none_or(|p| p == agent.provider())
                });
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
            if let Some(pause) = self.spend_cap().await? {
                return Ok(pause);
            }
            // Taken once the spawn is sure to run: a sprint paused at its spend cap is told to
            // raise the cap in the sprint file, and that edit, made before the round, is not
            // the round's change to a protected file.
            self.ctx.fingerprint_protected(task, t.round).await?;
            let report = self
                .spawn(
                    Role::Generator,
                    agent,
                    SpawnRequest {
                        role: Role::Generator,
                        dir: dir.clone(),
                        work_tree: self.ctx.work_tree.clone(),
                        prompt: prompt_text,
                        cold_prompt: cold,
                        resume,
                        contract,
                        read_only: false,
                        run_id: run_id.to_string(),
                        max_budget_usd: self.ctx.file().sprint.max_budget_usd.map(Usd::dollars),
                        max_turns: self.ctx.file().sprint.max_turns,
                    },
                )
                .await?;
            if let Some(next) = self.after_spawn(Role::Generator, role_agent, agent, &report)? {
                return Ok(next);
            }
            if let (Some(p), Some(session)) = (progress_mut(self.state, self.i), &report.session_id)
            {
                p.generator_session = Some(session.to_string());
                p.generator_session_provider = Some(agent.provider());
            }
            if let Some(next) = self.failed_spawn(Role::Generator, &report, None).await? {
                return Ok(next);
            }
            match report.verdict {
                SpawnVerdict::Valid { signals } => Some(signals),
                SpawnVerdict::Invalid { reason } => {
                    let critique =
                        format!("Round {} ended without a valid report: {reason}", t.round);
                    self.save()?;
                    return self.next_round(critique).await;
                }
                SpawnVerdict::NotChecked => {
                    let why = report.error.as_ref().map_or_else(
                        || report.outcome.as_str().to_string(),
                        |e| e.message.clone(),
                    );
                    let critique = format!("Round {} ended before a report: {why}", t.round);
                    self.save()?;
                    return self.next_round(critique).await;
                }
            }
        };
        if let Some(next) = self.police(Role::Generator).await? {
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
                .block(format!("the generator reported it blocked: {reason}"))
                .await;
        }
        if let Some(p) = progress_mut(self.state, self.i) {
            p.step = Step::PostVerify;
        }
        self.save()?;
        Ok(Next::Continue)
    }

    /// Writes `role-meta.json`, runs one spawn, and counts its usage.
    pub(super) async fn spawn(
        &mut self,
        role: Role,
        agent: &dyn RoleAgent,
        request: SpawnRequest,
    ) -> Result<SpawnReport, SprintError> {
        let Some(t) = self.state.tasks.get(self.i) else {
            return Err(SprintError::Io {
                path: request.dir,
                source: std::io::Error::other("no such task"),
            });
        };
        let (id, round, attempt) = (t.id.clone(), t.round, t.attempt);
        // A parallel run's coordinator let this spawn go against the sprint's cap
        // (`spend_cap`): it hears when it ended, its spend saved, on every way out of here.
        let _ended = super::budget::SpawnEnded {
            recorder: self.ctx.shared.map(|(recorder, _)| recorder),
            task: id.clone(),
        };
        self.ctx.fresh_spawn_dir(&request.dir)?;
        // Recorded before the spawn: from now on, what is in its directory is its own.
        if let Some(p) = progress_mut(self.state, self.i) {
            p.spawned = Some(crate::state::SpawnMark { round, role });
        }
        self.save()?;
        let meta = RoleMeta {
            role,
            provider: agent.provider(),
            model: agent.model().map(str::to_string),
            effort: agent.effort(),
            attempt,
            round,
            started_at: self.ctx.now(),
        };
        let meta_path = request.dir.join(ROLE_META_FILE);
        let json = serde_json::to_vec_pretty(&meta).map_err(|e| SprintError::Io {
            path: meta_path.clone(),
            source: std::io::Error::other(e),
        })?;
        write_file(&self.ctx.layout, &meta_path, &json)?;
        self.ctx.emit(SprintEvent::SpawnStarted {
            task: id.clone(),
            round,
            role,
            provider: agent.provider(),
            model: agent.model().map(str::to_string),
            resumes: request.resume.is_some(),
        });
        let (holds, held) = std::sync::mpsc::channel();
        let observer = Arc::new(HoldWatch {
            inner: self.ctx.run.events.observer(&id, round, role),
            holds: std::sync::Mutex::new(holds),
        });
        self.ctx.git.forget();
        let provider = agent.provider();
        let ctx = self.ctx;
        let tell = |until: SystemTime| {
            ctx.emit(SprintEvent::RateLimitHold {
                task: id.clone(),
                round,
                role,
                provider,
                until: rfc3339(until),
            });
        };
        // The holds the spawn meets are told as it meets them (between its polls), not once it
        // ended: a hold of hours is heard of while it lasts.
        let mut spawn = std::pin::pin!(agent.spawn(request, self.ctx.run.cancel.clone(), observer));
        let report = std::future::poll_fn(move |cx| {
            let polled = spawn.as_mut().poll(cx);
            while let Ok(until) = held.try_recv() {
                tell(until);
            }
            polled
        })
        .await;
        // A CLI that reports only tokens: its cost estimated from the run's price table.
        let mut spent = report.usage;
        let estimate = self.ctx.run.options.prices.estimate(agent.model(), &spent);
        if estimate.is_some() {
            spent.cost_usd = estimate;
        }
        if let Some(t) = self.state.tasks.get_mut(self.i) {
            let mut usage = RoleUsage::default();
            match role {
                Role::Generator => usage.generator = spent,
                Role::Evaluator => usage.evaluator = spent,
            }
            t.cost_estimated |= estimate.is_some();
            t.usage.add(&usage);
            t.usage_by_provider
                .entry(agent.provider())
                .or_default()
                .add(&spent);
            // Not undone, and not blocking: Corral cannot take back a write outside the tree
            // (the sandbox, when there is one, refuses it); it is named for the user to look at.
            if !report.stray_writes.is_empty() {
                let message = format!(
                    "round {round}: the {role} wrote outside the paths it may write: {}",
                    report.stray_writes.join("; ")
                );
                t.warnings.push(message.clone());
                self.ctx.emit(SprintEvent::Warning {
                    task: id.clone(),
                    message,
                });
            }
        }
        self.save()?;
        self.ctx.emit(SprintEvent::SpawnFinished {
            task: id,
            round,
            role,
            outcome: Some(report.outcome),
            valid: matches!(report.verdict, SpawnVerdict::Valid { .. }),
            usage: report.usage,
        });
        Ok(report)
    }
}

impl Context<'_, '_> {
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
}
