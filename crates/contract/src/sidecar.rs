//! Sidecars: human-readable Markdown rendered from validated signals and written next to
//! `signals.json` by the caller (this crate renders; it does not write files).
//!
//! - [`render_evaluation_md`]: the evaluator's verdict, for `evaluation.md`.
//! - [`render_signals_summary`]: one line per signal, any kinds, for logs and run summaries.

use crate::evaluation::{Evaluation, EvaluationStatus};
use crate::markdown::{code, table_cell};
use crate::signal::Signal;

/// The conventional file name of the evaluation sidecar.
pub const EVALUATION_SIDECAR_FILE: &str = "evaluation.md";

/// The most characters of a text a summary line shows before cutting it with `…`.
const SUMMARY_TEXT_MAX_CHARS: usize = 160;

/// Renders `evaluation.md`: the verdict, then a table of dimensions and (if any) of criteria,
/// then the findings of what failed in full.
#[must_use]
pub fn render_evaluation_md(evaluation: &Evaluation) -> String {
    let mut out = String::new();
    let verdict = match evaluation.status {
        EvaluationStatus::Passed => "PASSED",
        EvaluationStatus::Failed => "FAILED",
        EvaluationStatus::Malformed => "MALFORMED (the work could not be evaluated)",
    };
    out.push_str(&format!("# Evaluation: {verdict}\n\n"));
    let failed_dimensions = evaluation.failed_dimensions().count();
    let failed_criteria = evaluation.failed_criteria().count();
    out.push_str(&format!(
        "Evaluated at {}. Dimensions passed: {} of {}.",
        evaluation.timestamp,
        evaluation.dimensions.len() - failed_dimensions,
        evaluation.dimensions.len()
    ));
    if !evaluation.criteria.is_empty() {
        out.push_str(&format!(
            " Criteria met: {} of {}.",
            evaluation.criteria.len() - failed_criteria,
            evaluation.criteria.len()
        ));
    }
    out.push_str("\n\n## Dimensions\n\n| Dimension | Result | Finding |\n| --- | --- | --- |\n");
    for dimension in &evaluation.dimensions {
        out.push_str(&row(
            &dimension.name,
            dimension.passed,
            dimension.finding.as_deref(),
        ));
    }
    if !evaluation.criteria.is_empty() {
        out.push_str("\n## Criteria\n\n| Criterion | Result | Finding |\n| --- | --- | --- |\n");
        for criterion in &evaluation.criteria {
            out.push_str(&row(
                &criterion.name,
                criterion.passed,
                criterion.finding.as_deref(),
            ));
        }
    }
    out
}

fn row(name: &str, passed: bool, finding: Option<&str>) -> String {
    let result = if passed { "passed" } else { "**failed**" };
    format!(
        "| {} | {result} | {} |\n",
        table_cell(name),
        table_cell(finding.unwrap_or(""))
    )
}

/// Renders one Markdown list line per signal: its kind, its timestamp and its gist.
#[must_use]
pub fn render_signals_summary(signals: &[Signal]) -> String {
    let mut out = format!("# Signals ({})\n\n", signals.len());
    if signals.is_empty() {
        out.push_str("No signals.\n");
        return out;
    }
    for (index, signal) in signals.iter().enumerate() {
        out.push_str(&format!(
            "{}. `{}` at {}",
            index + 1,
            signal.kind(),
            signal.timestamp()
        ));
        let gist = gist(signal);
        if !gist.is_empty() {
            out.push_str(": ");
            out.push_str(&gist);
        }
        out.push('\n');
    }
    out
}

fn gist(signal: &Signal) -> String {
    match signal {
        Signal::TaskComplete(_) => String::new(),
        Signal::TaskBlocked(s) => short(&s.reason),
        Signal::TaskVerified(s) => short(&s.output),
        Signal::Note(s) => short(&s.text),
        Signal::Decision(s) => short(&s.text),
        Signal::Learning(s) => match &s.applies_to {
            Some(applies_to) => format!(
                "{} (applies to {})",
                short(&s.text),
                code(&short(applies_to))
            ),
            None => short(&s.text),
        },
        Signal::Change(s) => format!("{} {}", code(&s.path), short(&s.summary)),
        Signal::CommitMessage(s) => short(&s.subject),
        Signal::PrContent(s) => short(&s.title),
        Signal::VerifyGates(s) => {
            let gates: Vec<String> = s
                .gates
                .iter()
                .map(|gate| {
                    let prefix = if gate.path_prefix.is_empty() {
                        "(all)"
                    } else {
                        gate.path_prefix.as_str()
                    };
                    format!("{} → {}", code(prefix), code(&short(&gate.command)))
                })
                .collect();
            gates.join(", ")
        }
        Signal::RefinedTicket(s) => format!(
            "{} ({} acceptance criteria)",
            short(&s.title),
            s.acceptance_criteria.len()
        ),
        Signal::TaskPlan(s) => {
            let ids: Vec<String> = s.tasks.iter().map(|t| code(&t.id)).collect();
            format!("{} task(s): {}", s.tasks.len(), ids.join(", "))
        }
        Signal::IdeatedTickets(s) => {
            let titles: Vec<String> = s.tickets.iter().map(|t| short(&t.title)).collect();
            titles.join("; ")
        }
        Signal::AgentsMdProposal(s) => code(&s.path),
        Signal::SetupScript(s) => code(&short(&s.command)),
        Signal::VerifyScript(s) => code(&short(&s.command)),
        Signal::Evaluation(s) => {
            let failed: Vec<&str> = s.failed_dimensions().map(|d| d.name.as_str()).collect();
            if failed.is_empty() {
                s.status.to_string()
            } else {
                format!("{} (failed: {})", s.status, failed.join(", "))
            }
        }
    }
}

/// The first line of `text`, cut to [`SUMMARY_TEXT_MAX_CHARS`]; `…` marks anything left out.
fn short(text: &str) -> String {
    let text = text.trim();
    let first_line = text.lines().next().unwrap_or("");
    let mut out: String = first_line.chars().take(SUMMARY_TEXT_MAX_CHARS).collect();
    if out.len() < text.len() {
        out.push('…');
    }
    out
}
