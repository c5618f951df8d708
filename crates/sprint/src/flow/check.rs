//! The check step: the check and the gates before a task (its baseline) and after each round
//! (with the round's diff and its attribution); [`Context::verify`] also runs them on the
//! sprint's branch after a fold.

use std::time::Duration;

use corral_ports::{CommandEnd, CommandSpec};

use crate::error::SprintError;
use crate::event::{SprintEnd, SprintEvent};
use crate::file::Gate;
use crate::prompt::{self};
use crate::state::{Attribution, Step};

use super::task::TaskCursor;
use super::{
    CHECK_FILE, Context, Next, PRE_VERIFY_FILE, REGRESSED_PATCH_FILE, Verification, describe_end,
    progress_mut, write_file,
};

impl Context<'_, '_> {
    /// Runs the check and `gates`; `None` when cancelled.
    pub(super) async fn verify(
        &self,
        gates: &[&Gate],
    ) -> Result<Option<Verification>, SprintError> {
        let sprint = &self.file().sprint;
        let mut report = String::new();
        let mut passed = true;
        let mut check_passed = true;
        let mut failed_gates = Vec::new();
        let mut commands = vec![(None, sprint.check.as_str(), sprint.check_timeout_ms)];
        commands.extend(
            gates
                .iter()
                .map(|g| (Some(g.path.as_str()), g.command.as_str(), g.timeout_ms)),
        );
        for (gate, command, timeout_ms) in commands {
            self.git.forget();
            let mut spec =
                CommandSpec::shell(command, &self.work_tree, Duration::from_millis(timeout_ms));
            // The check runs code the agent wrote; Corral's record stays out of its reach.
            spec.read_only = vec![self.layout.state_root()];
            let out = self
                .run
                .commands
                .run(spec, &self.run.cancel)
                .await
                .map_err(|source| SprintError::Command {
                    command: command.to_string(),
                    source,
                })?;
            if out.end == CommandEnd::Cancelled {
                return Ok(None);
            }
            let ok = out.success();
            passed &= ok;
            match (gate, ok) {
                (Some(path), false) => failed_gates.push(path.to_string()),
                (None, false) => check_passed = false,
                (_, true) => {}
            }
            report.push_str(&format!(
                "$ {command}\n{}{}[{}]\n",
                out.stdout.text,
                out.stderr.text,
                describe_end(out.end)
            ));
        }
        Ok(Some(Verification {
            passed,
            check_passed,
            gates: gates.iter().map(|g| g.path.clone()).collect(),
            failed_gates,
            report,
        }))
    }
}

impl TaskCursor<'_, '_, '_> {
    pub(super) async fn pre_verify(&mut self) -> Result<Next, SprintError> {
        let task = self.task;
        // Every gate, since the round's diff (which picks the gates after it) is not known
        // yet: the attribution compares each gate with itself.
        let gates: Vec<&Gate> = self.ctx.file().gates.iter().collect();
        // On the tree the task before just committed, after its passing check and nothing
        // else that could write a file (`git::Known`), the check's answer is known: it is
        // not run a second time on the same files. Not with gates: the round's check ran only
        // the gates its diff picked, and the pre-verify runs every one.
        let known = if gates.is_empty() {
            self.ctx.git.take_checked()
        } else {
            None
        };
        let v = match known {
            Some(report) => Verification {
                passed: true,
                check_passed: true,
                gates: Vec::new(),
                failed_gates: Vec::new(),
                report: format!(
                    "(the check after the task before, on the same tree: this task's base)\n{report}"
                ),
            },
            None => match self.ctx.verify(&gates).await? {
                Some(v) => v,
                None => return Ok(Next::Pause(SprintEnd::Cancelled)),
            },
        };
        write_file(
            &self.ctx.layout,
            &self.ctx.layout.task_dir(&task.id).join(PRE_VERIFY_FILE),
            v.report.as_bytes(),
        )?;
        if let Some(p) = progress_mut(self.state, self.i) {
            p.pre_passed = Some(v.check_passed);
            p.pre_failed_gates.clone_from(&v.failed_gates);
            p.step = Step::Generate;
        }
        self.save()?;
        self.ctx.emit(SprintEvent::Verified {
            task: task.id.clone(),
            round: 0,
            step: Step::PreVerify,
            passed: v.passed,
            gates: v.gates,
            attribution: None,
        });
        Ok(Next::Continue)
    }

    pub(super) async fn post_verify(&mut self) -> Result<Next, SprintError> {
        let task = self.task;
        let Some(t) = self.state.tasks.get(self.i).cloned() else {
            return Ok(Next::Finished);
        };
        let Some(progress) = t.progress.clone() else {
            return Ok(Next::Finished);
        };
        // Before any check: the check must run the version the round did not write.
        if let Some(next) = self.guard_protected().await? {
            return Ok(next);
        }
        let round_dir = self.ctx.layout.round_dir(&task.id, t.round);
        // The paths only choose the gates. Without gates the change is staged after the
        // check, so that nothing runs between staging and the commit or the reset (see
        // `git::Known`): the commit needs no second `git add`, the reset no `git clean`.
        let before_check = if self.ctx.file().gates.is_empty() {
            None
        } else {
            Some(self.ctx.git.diff_against(&progress.base).await?)
        };
        let paths = before_check.as_ref().map_or(&[][..], |(_, p)| p.as_slice());
        let gates: Vec<&Gate> = self
            .ctx
            .file()
            .gates
            .iter()
            .filter(|g| paths.iter().any(|p| g.applies_to(p)))
            .collect();
        let Some(v) = self.ctx.verify(&gates).await? else {
            return Ok(Next::Pause(SprintEnd::Cancelled));
        };
        if self.ctx.file().gates.is_empty() && v.passed {
            self.ctx.git.checked(v.report.clone());
        }
        let patch = match before_check {
            Some((patch, _)) => patch,
            None => self.ctx.git.patch_against(&progress.base).await?,
        };
        write_file(
            &self.ctx.layout,
            &round_dir.join(crate::flow::DIFF_FILE),
            patch.as_bytes(),
        )?;
        self.ctx
            .save_changed_paths(&round_dir, &progress.base, &patch)
            .await?;
        write_file(
            &self.ctx.layout,
            &round_dir.join(CHECK_FILE),
            v.report.as_bytes(),
        )?;
        let pre = progress.pre_passed.unwrap_or(true)
            && !v
                .gates
                .iter()
                .any(|g| progress.pre_failed_gates.contains(g));
        let attribution = Attribution::of(pre, v.passed);
        if let Some(t) = self.state.tasks.get_mut(self.i) {
            t.attribution = Some(attribution);
        }
        self.ctx.emit(SprintEvent::Verified {
            task: task.id.clone(),
            round: t.round,
            step: Step::PostVerify,
            passed: v.passed,
            gates: v.gates,
            attribution: Some(attribution),
        });
        match attribution {
            // `BrokeOnFold` is the fold's, never a round's (`Attribution::of`): were it met
            // here, it failed, and is treated as the failure it is.
            Attribution::Regressed | Attribution::BrokeOnFold => {
                let saved = round_dir.join(REGRESSED_PATCH_FILE);
                write_file(&self.ctx.layout, &saved, patch.as_bytes())?;
                let attempts = if let Some(t) = self.state.tasks.get_mut(self.i) {
                    t.attempt += 1;
                    if let Some(p) = t.progress.as_mut() {
                        p.regressions += 1;
                    }
                    t.attempt
                } else {
                    0
                };
                if attempts > self.ctx.file().sprint.max_attempts {
                    // Blocking saves the change and resets the tree itself.
                    return self
                        .block(format!(
                            "round {} broke the check, and its attempts ({}) are used up",
                            t.round,
                            self.ctx.file().sprint.max_attempts
                        ))
                        .await;
                }
                let critique = format!(
                    "Your change in round {} made the check fail; it passed before the task. \
                     Corral saved the change to {} and put the tree back as it was at the \
                     task's start. The check's output:\n\n```text\n{}\n```",
                    t.round,
                    saved.display(),
                    prompt::cut(&v.report, prompt::PROMPT_OUTPUT_LIMIT).trim_end()
                );
                // The next round and the reset it needs are written down before the reset is
                // done: a kill in between resets on the next run, instead of judging the
                // broken tree again or counting the round twice.
                if let Some(p) = progress_mut(self.state, self.i) {
                    p.reset_pending = true;
                }
                let next = self.next_round(critique).await?;
                self.ctx.emit(SprintEvent::Regressed {
                    task: task.id.clone(),
                    round: t.round,
                    patch: saved.display().to_string(),
                });
                if let Some(p) = progress_mut(self.state, self.i).filter(|p| p.reset_pending) {
                    p.reset_pending = false;
                    self.ctx.git.reset_to(&progress.base).await?;
                    self.save()?;
                }
                Ok(next)
            }
            Attribution::Clean | Attribution::FixedBaseline | Attribution::BaselineBroken => {
                if let Some(p) = progress_mut(self.state, self.i) {
                    p.step = if self.ctx.run.evaluator.is_some() {
                        Step::Evaluate
                    } else {
                        Step::Commit
                    };
                }
                self.save()?;
                Ok(Next::Continue)
            }
        }
    }
}
