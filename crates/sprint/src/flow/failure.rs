//! A failed spawn judged by its class, for either role: a transient failure runs the same
//! spawn again within the round's allowance (no round counted), a permanent one stops the
//! sprint with what to fix, and one ended at its limits (`[limits]`) fails the round, its
//! reason given to the generator's next.

use corral_ports::{ErrorClass, Outcome};

use crate::agent::{SpawnReport, SpawnVerdict};
use crate::error::SprintError;
use crate::event::SprintEnd;
use crate::layout::Role;
use crate::state::{FailureClass, SpawnFailureRecord};

use super::Next;
use super::task::TaskCursor;

impl TaskCursor<'_, '_, '_> {
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
    /// goes on there. A spawn ended at one of its limits, of either role, fails the round: the
    /// generator's next round is told which limit, and past `max_rounds` the task is blocked.
    pub(super) async fn failed_spawn(
        &mut self,
        role: Role,
        report: &SpawnReport,
        no_evaluation: Option<String>,
    ) -> Result<Option<Next>, SprintError> {
        let task = self.task;
        let valid = matches!(report.verdict, SpawnVerdict::Valid { .. });
        let (class, message) = match (&report.error, no_evaluation) {
            // Before the class: a limit is not transient (the same work meets it again) and no
            // stop of the sprint either (another round can do the work with less).
            (Some(error), _) if report.outcome == Outcome::LimitExceeded => {
                (FailureClass::LimitExceeded, error.message.clone())
            }
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
                path: self.ctx.layout.task_dir(&task.id),
                source: std::io::Error::other(message),
            });
        }
        // What the generator's next round is told: the limit, not the user's fix (`hint:`).
        let first_line = message.lines().next().unwrap_or_default().to_string();
        // The provider's message may span lines (its `hint:` is one): one line in the record.
        let message = message
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect::<Vec<_>>()
            .join("; ");
        let Some(t) = self.state.tasks.get_mut(self.i) else {
            return Ok(None);
        };
        let round = t.round;
        let agent = crate::agent::current_agent(match role {
            Role::Generator => self.ctx.run.generator,
            // Without an evaluator of its own, the generator's agent reviews.
            Role::Evaluator => self.ctx.run.evaluator.unwrap_or(self.ctx.run.generator),
        });
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
                    permanent_fix(report.outcome, role, provider, self.ctx.file())
                };
                let warning = format!(
                    "round {round}: the {role} ({provider}) failed in a way no rerun mends, so \
                     the sprint stopped here: {message}{fix}"
                );
                self.warn(&warning)?;
                Ok(Some(Next::Pause(SprintEnd::PermanentFailure)))
            }
            FailureClass::LimitExceeded => {
                let warning = format!(
                    "round {round}: the {role} ({provider}) went over a limit and was ended, so \
                     the round failed: {message}"
                );
                self.warn(&warning)?;
                let critique = format!(
                    "Round {round} was stopped: the {role}'s process tree (the agent and every \
                     command it ran) went over a limit and was ended ({first_line}). Whatever \
                     used it (a build, a test suite, a tool, a loop) must use less this round."
                );
                self.save()?;
                self.next_round(critique).await.map(Some)
            }
            FailureClass::Transient | FailureClass::NoEvaluation => {
                let allowed = self.ctx.file().sprint.transient_retries;
                let used = t.progress.as_ref().map_or(0, |p| p.transient_retries);
                if used >= allowed {
                    let reason = format!(
                        "round {round}: the {role} ({provider}) failed {} time(s) running, past \
                         [sprint] transient_retries = {allowed} ({}); the last: {}: {message}",
                        used + 1,
                        class.as_str(),
                        report.outcome.as_str(),
                    );
                    self.save()?;
                    return self.block(reason).await.map(Some);
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
                self.warn(&warning)?;
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
        | Outcome::WallTimeout
        | Outcome::LimitExceeded => String::new(),
    }
}
