//! The evaluate step: the evaluator's read-only review of the round (its diff, the check's
//! report, the attribution), judged into the commit or the next round's critique.

use corral_contract::{Contract, EvaluationStatus, Signal, render_evaluation_md};

use crate::agent::{SpawnRequest, SpawnVerdict, current_agent};
use crate::error::SprintError;
use crate::event::SprintEvent;
use crate::file::Usd;
use crate::layout::{EVALUATION_FILE, Role};
use crate::prompt::{self};
use crate::state::{Attribution, Step};

use super::task::TaskCursor;
use super::{
    CHANGED_PATHS_FILE, CHECK_FILE, DIFF_FILE, Next, critique_of, earlier_report, progress_mut,
    read_record_text, write_file,
};

impl TaskCursor<'_, '_, '_> {
    pub(super) async fn evaluate(&mut self, run_id: &str) -> Result<Next, SprintError> {
        let task = self.task;
        let Some(t) = self.state.tasks.get(self.i).cloned() else {
            return Ok(Next::Finished);
        };
        let Some((evaluator, agent)) = self.ctx.run.evaluator.map(|r| (r, current_agent(r))) else {
            if let Some(p) = progress_mut(self.state, self.i) {
                p.step = Step::Commit;
            }
            self.save()?;
            return Ok(Next::Continue);
        };
        let dir = self
            .ctx
            .layout
            .spawn_dir(&task.id, t.round, Role::Evaluator);
        let contract = Contract::evaluator();
        let reported = t
            .progress
            .as_ref()
            .and_then(|p| earlier_report(p, t.round, Role::Evaluator, &dir, &contract))
            // A `malformed` verdict left by the review being rerun is not taken again.
            .filter(|valid| {
                valid
                    .evaluation()
                    .is_none_or(|e| e.status != EvaluationStatus::Malformed)
            });
        let (evaluation, fresh) = if let Some(valid) = reported {
            self.ctx.emit(SprintEvent::SpawnFinished {
                task: task.id.clone(),
                round: t.round,
                role: Role::Evaluator,
                outcome: None,
                valid: true,
                usage: corral_ports::Usage::default(),
            });
            (valid.evaluation().cloned(), None)
        } else {
            let round_dir = self.ctx.layout.round_dir(&task.id, t.round);
            let diff_file = round_dir.join(DIFF_FILE);
            let diff = read_record_text(&self.ctx.layout, &diff_file);
            let changed = read_record_text(&self.ctx.layout, &round_dir.join(CHANGED_PATHS_FILE));
            let check = read_record_text(&self.ctx.layout, &round_dir.join(CHECK_FILE));
            let text = prompt::evaluator_prompt(
                task,
                t.round,
                &self.ctx.file().sprint.check,
                t.attribution.unwrap_or(Attribution::Clean),
                &check,
                &prompt::RoundDiff {
                    text: &diff,
                    file: &diff_file.display().to_string(),
                    changed_paths: &changed,
                },
            );
            if let Some(pause) = self.spend_cap().await? {
                return Ok(pause);
            }
            let report = self
                .spawn(
                    Role::Evaluator,
                    agent,
                    SpawnRequest {
                        role: Role::Evaluator,
                        dir: dir.clone(),
                        work_tree: self.ctx.work_tree.clone(),
                        prompt: text,
                        cold_prompt: None,
                        resume: None,
                        contract,
                        read_only: true,
                        run_id: run_id.to_string(),
                        max_budget_usd: self.ctx.file().sprint.max_budget_usd.map(Usd::dollars),
                        max_turns: self.ctx.file().sprint.max_turns,
                    },
                )
                .await?;
            if let Some(next) = self.after_spawn(Role::Evaluator, evaluator, agent, &report)? {
                return Ok(next);
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
        if let Some(next) = self.police(Role::Evaluator).await? {
            return Ok(next);
        }
        // An evaluator that failed, answered without a valid evaluation, or said it could not
        // evaluate the work at all (`malformed`), is the review's failure, not the round's:
        // the review runs again, and no generator round is spent.
        let malformed = evaluation
            .as_ref()
            .is_some_and(|e| e.status == EvaluationStatus::Malformed);
        if let Some(report) = &fresh {
            let no_evaluation = if malformed {
                Some("its verdict is `malformed`: it could not evaluate the work".to_string())
            } else {
                evaluation.is_none().then(|| match &report.verdict {
                    SpawnVerdict::Invalid { reason } => {
                        format!("its report is not a valid evaluation: {reason}")
                    }
                    SpawnVerdict::Valid { .. } => "its report holds no evaluation".to_string(),
                    SpawnVerdict::NotChecked => "it ended before a report".to_string(),
                })
            };
            if let Some(next) = self
                .failed_spawn(Role::Evaluator, report, no_evaluation)
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
            return self.next_round(critique).await;
        };
        write_file(
            &self.ctx.layout,
            &dir.join(EVALUATION_FILE),
            render_evaluation_md(&evaluation).as_bytes(),
        )?;
        let passed = evaluation.status == EvaluationStatus::Passed;
        self.ctx.emit(SprintEvent::Evaluated {
            task: task.id.clone(),
            round: t.round,
            passed,
            failed: evaluation
                .failed_dimensions()
                .map(|d| d.name.clone())
                .collect(),
        });
        if passed {
            if let Some(p) = progress_mut(self.state, self.i) {
                p.step = Step::Commit;
            }
            self.save()?;
            Ok(Next::Continue)
        } else {
            self.next_round(critique_of(&evaluation, t.round)).await
        }
    }
}
