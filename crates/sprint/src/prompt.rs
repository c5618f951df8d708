//! The prompts of a sprint's spawns. The contract section (where and what to write) is not
//! here: the agent's implementation renders it from the request's contract, as `corral run`
//! does.

use std::fmt::Write as _;

use crate::file::{SprintFile, Task};
use crate::state::Attribution;

/// Kept of a diff in the evaluator's prompt; the whole patch is in the round's directory.
pub(crate) const PROMPT_DIFF_LIMIT: usize = 200 * 1024;
/// Kept of a check's output in a prompt.
pub(crate) const PROMPT_OUTPUT_LIMIT: usize = 16 * 1024;

/// One learning of an earlier task, as the generator is shown it.
pub(crate) struct ShownLearning {
    pub(crate) task: String,
    pub(crate) text: String,
    /// Where the agent said it applies (a path, a module, a tool); `None`: everywhere.
    pub(crate) applies_to: Option<String>,
}

/// Whether a learning is shown to `task`'s generator: one that names no place it applies to
/// applies everywhere; one that does (`appliesTo`: `tests/fixtures/`, `the parser`, `cargo`)
/// applies to a task whose title or instructions name that place (case-insensitively, a
/// trailing `/` aside), and to the tasks that depend on the task that learnt it, which build on
/// its work. A learning about the fixtures then stays out of a task about the docs.
pub(crate) fn applies_to_task(learning: &ShownLearning, task: &Task) -> bool {
    let Some(place) = learning.applies_to.as_deref().map(str::trim) else {
        return true;
    };
    let place = place.trim_end_matches('/').to_lowercase();
    if place.is_empty() || task.depends_on.iter().any(|d| d.as_str() == learning.task) {
        return true;
    }
    let text = format!("{}\n{}", task.title, task.prompt.text()).to_lowercase();
    text.contains(&place)
}

const RULES: &str = "Work in the current directory, on the branch that is checked out. Corral \
commits the task once it passes its check and its review: do not commit, do not switch branches, \
and do not write outside this directory. When the task is done, report task-complete, with a \
commit-message signal whose subject says what the change does, and a learning signal for each \
thing the next tasks should know. If the task cannot be done, report task-blocked with the reason.";

/// The whole brief: what a new session of the generator is given.
pub(crate) fn generator_brief(
    file: &SprintFile,
    task: &Task,
    round: u32,
    learnings: &[ShownLearning],
    critique: Option<&str>,
) -> String {
    let mut out = format!(
        "# Sprint {}, task {}: {}\n\n{}\n",
        file.sprint.name,
        task.id,
        task.title,
        task.prompt.text().trim_end()
    );
    if !task.acceptance_criteria.is_empty() {
        out.push_str(
            "\n## Acceptance criteria\n\nThe review holds your work to each of these; meet \
             every one:\n\n",
        );
        criteria_list(&mut out, task);
    }
    if !learnings.is_empty() {
        out.push_str("\n## What earlier tasks learned\n\n");
        for l in learnings {
            let _ = writeln!(out, "- {} (task {})", one_line(&l.text), l.task);
        }
    }
    if let Some(critique) = critique {
        let _ = write!(
            out,
            "\n## What round {round} must address\n\nAn earlier round of this task did not pass.\n\n{}\n",
            critique.trim_end()
        );
    }
    let _ = write!(out, "\n## How the round ends\n\n{RULES}\n");
    out
}

/// What a resumed generator is told at the start of round `round`.
pub(crate) fn generator_next_round(task: &Task, round: u32, critique: Option<&str>) -> String {
    let mut out = format!(
        "Round {round} of task {}: {}. Your previous round did not pass.\n",
        task.id, task.title
    );
    if let Some(critique) = critique {
        let _ = write!(
            out,
            "\n## What this round must address\n\n{}\n",
            critique.trim_end()
        );
    }
    let _ = write!(
        out,
        "\nReport again for this round, in this round's signals file.\n\n{RULES}\n"
    );
    out
}

/// What a generator resumed after Corral itself was stopped is told.
pub(crate) fn generator_crash_resume(task: &Task, round: u32) -> String {
    format!(
        "Corral was stopped while you worked on round {round} of task {}: {}. Continue where you \
         stopped: finish the task, then report as asked.\n\n{RULES}\n",
        task.id, task.title
    )
}

/// What the evaluator of round `round` is given.
/// A round's diff as the evaluator's prompt shows it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RoundDiff<'a> {
    /// The patch (`diff.patch`).
    pub(crate) text: &'a str,
    /// Where it is, for the agent to read whole.
    pub(crate) file: &'a str,
    /// Every path it changes (`changed-paths.txt`), listed after a cut; may be empty.
    pub(crate) changed_paths: &'a str,
}

pub(crate) fn evaluator_prompt(
    task: &Task,
    round: u32,
    check: &str,
    attribution: Attribution,
    check_output: &str,
    diff: &RoundDiff<'_>,
) -> String {
    let RoundDiff {
        text: diff,
        file: diff_file,
        changed_paths,
    } = *diff;
    let mut out = format!(
        "# Review task {}: {} (round {round})\n\nAnother agent changed this repository to do the \
         task below. Judge the change; do not change any file (the work tree is read-only for \
         you). Judge every floor dimension (correctness, completeness, safety, consistency, \
         robustness); a dimension that fails needs a finding that says what is wrong and where, \
         so that the next round can fix it.\n\n## The task\n\n{}\n",
        task.id,
        task.title,
        task.prompt.text().trim_end()
    );
    if !task.acceptance_criteria.is_empty() {
        out.push_str(
            "\n## Acceptance criteria\n\nAnswer each of these in the evaluation's `criteria`, \
             one entry per criterion with its `name` written as here, `passed`, and a `finding` \
             that says what you saw (the test or command you ran, the code you read); the \
             verdict is `passed` only if every criterion passed too:\n\n",
        );
        criteria_list(&mut out, task);
    }
    let verdict = match attribution {
        Attribution::Clean => "passed, as it did before the task",
        Attribution::FixedBaseline => "passed; it failed before the task",
        Attribution::BaselineBroken => {
            "failed, and it failed before the task as well (the change is not blamed for it)"
        }
        Attribution::Regressed => "failed; it passed before the task",
        Attribution::BrokeOnFold => {
            "failed on the sprint's branch with the change folded on, though it passed beside it"
        }
    };
    let _ = write!(
        out,
        "\n## The check\n\n`{}` {verdict}. Its output:\n\n```text\n{}\n```\n",
        one_line(check),
        cut(check_output, PROMPT_OUTPUT_LIMIT).trim_end()
    );
    let shown = cut(diff, PROMPT_DIFF_LIMIT);
    let _ = write!(
        out,
        "\n## The change (against the task's start)\n\n```diff\n{}\n```\n",
        shown.trim_end()
    );
    if shown.len() < diff.len() {
        // Said in the text, with every path: a change past the cut is not to pass unseen.
        let _ = writeln!(
            out,
            "\n[diff cut at {} bytes of {}; the full list of changed paths follows]\n\n```text\n{}\n```\n\nThe whole patch is {diff_file}.",
            shown.len(),
            diff.len(),
            changed_paths.trim_end()
        );
    }
    out
}

/// The task's acceptance criteria as a Markdown list.
fn criteria_list(out: &mut String, task: &Task) {
    for criterion in &task.acceptance_criteria {
        let _ = writeln!(out, "- {}", one_line(criterion));
    }
}

/// `text` cut to at most `limit` bytes, at a character boundary.
pub(crate) fn cut(text: &str, limit: usize) -> &str {
    if text.len() <= limit {
        return text;
    }
    let mut end = limit;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.get(..end).unwrap_or_default()
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::{RoundDiff, evaluator_prompt, generator_brief};
    use crate::state::Attribution;

    const FILE: &str = "[sprint]\nname = \"s\"\ncheck = \"true\"\n\n[roles.generator]\n\
        provider = \"claude\"\n\n[[tasks]]\nid = \"a\"\ntitle = \"A\"\nprompt = \"Do a.\"\n\
        acceptance_criteria = [\"Dates parse\", \"Bad dates are named\"]\n\n\
        [[tasks]]\nid = \"b\"\ntitle = \"B\"\nprompt = \"Do b.\"\n";

    #[test]
    fn acceptance_criteria_reach_the_generator_and_the_evaluator() {
        let Ok(file) = crate::parse::parse(std::path::Path::new("corral-sprint.toml"), FILE) else {
            panic!("the test's sprint file is invalid");
        };
        let diff = RoundDiff {
            text: "",
            file: "diff.patch",
            changed_paths: "",
        };
        let brief = generator_brief(&file, &file.tasks[0], 1, &[], None);
        assert!(
            brief.contains("## Acceptance criteria\n\nThe review holds your work to each of these; meet every one:\n\n- Dates parse\n- Bad dates are named\n"),
            "{brief}"
        );
        let review = evaluator_prompt(&file.tasks[0], 1, "true", Attribution::Clean, "", &diff);
        assert!(
            review.contains("in the evaluation's `criteria`"),
            "{review}"
        );
        assert!(
            review.contains("- Dates parse\n- Bad dates are named\n"),
            "{review}"
        );
        // A task without criteria gets no such section.
        let brief = generator_brief(&file, &file.tasks[1], 1, &[], None);
        assert!(!brief.contains("Acceptance criteria"), "{brief}");
        let review = evaluator_prompt(&file.tasks[1], 1, "true", Attribution::Clean, "", &diff);
        assert!(!review.contains("Acceptance criteria"), "{review}");
    }
}
