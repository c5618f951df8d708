//! The sprint's life without an agent: a plan applied to a hand-written sprint file keeps its
//! comments and hand edits, a plan that does not fit leaves nothing to write, and the sources
//! a plan is made from are refused when they leave the tree, block, or are too long.

use std::path::Path;

use corral_contract::{PlannedTask, TaskPlan, Timestamp};
use corral_sprint::life::{LifeError, SOURCE_MAX_LINES, merge_plan, plan_prompt, read_source};

const FILE: &str = r#"# The team's sprint: keep this comment.
[sprint]
name = "s"
check = "cargo test"   # the whole suite

[roles.generator]
provider = "claude"

# Written by hand before planning.
[[tasks]]
id = "setup"
title = "Set up"
prompt = "Do the setup."
touches = ["src/setup.rs"]   # a hand edit the plan must keep

[[tasks]]
id = "docs"
title = "Docs"
brief = "docs-brief.md"
"#;

fn task(id: &str, deps: &[&str], criteria: &[&str]) -> PlannedTask {
    PlannedTask {
        id: id.into(),
        title: format!("Title of {id}"),
        brief: format!("Brief of {id}.\nSecond line."),
        depends_on: deps.iter().map(|d| (*d).to_owned()).collect(),
        acceptance_criteria: criteria.iter().map(|c| (*c).to_owned()).collect(),
    }
}

fn plan(tasks: Vec<PlannedTask>) -> TaskPlan {
    TaskPlan {
        timestamp: Timestamp::parse("2026-12-07T10:00:00Z").unwrap(),
        tasks,
    }
}

fn project() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("corral-sprint.toml");
    std::fs::write(&file, FILE).unwrap();
    std::fs::write(dir.path().join("docs-brief.md"), "Write the docs.").unwrap();
    (dir, file)
}

#[test]
fn a_plan_updates_in_place_appends_and_keeps_comments() {
    let (_dir, file) = project();
    let merged = merge_plan(
        &file,
        FILE,
        &plan(vec![
            task("setup", &[], &["It builds"]),
            task("parse", &["setup"], &["Dates parse", "Bad dates are named"]),
            task("docs", &["parse"], &[]),
        ]),
        false,
    )
    .unwrap();
    assert_eq!(merged.added, ["parse"]);
    assert_eq!(merged.updated, ["setup", "docs"]);
    assert_eq!(merged.briefs_kept, ["docs"]);
    assert!(merged.kept.is_empty());
    for kept in [
        "# The team's sprint: keep this comment.",
        "check = \"cargo test\"   # the whole suite",
        "# Written by hand before planning.",
        "touches = [\"src/setup.rs\"]   # a hand edit the plan must keep",
        "brief = \"docs-brief.md\"",
    ] {
        assert!(merged.text.contains(kept), "{kept} lost:\n{}", merged.text);
    }
    let parsed = corral_sprint::parse(&file, &merged.text).unwrap();
    let ids: Vec<&str> = parsed.tasks.iter().map(|t| t.id.as_str()).collect();
    assert_eq!(ids, ["setup", "docs", "parse"]);
    assert_eq!(
        parsed.tasks[0].prompt.text(),
        "Brief of setup.\nSecond line."
    );
    assert_eq!(parsed.tasks[0].acceptance_criteria, ["It builds"]);
    assert_eq!(parsed.tasks[0].touches, ["src/setup.rs"]);
    assert_eq!(parsed.tasks[1].prompt.text(), "Write the docs.");
    assert_eq!(parsed.tasks[2].depends_on[0].as_str(), "setup");
    assert_eq!(
        parsed.tasks[2].acceptance_criteria,
        ["Dates parse", "Bad dates are named"]
    );
    // The order the sprint runs them in honours the plan's dependencies.
    let order: Vec<&str> = parsed
        .run_order()
        .into_iter()
        .map(|t| t.id.as_str())
        .collect();
    assert_eq!(order, ["setup", "parse", "docs"]);
}

#[test]
fn a_plan_that_closes_a_cycle_through_a_hand_written_task_does_not_fit() {
    let (_dir, file) = project();
    // The plan alone has no cycle; with the file's `setup` made to wait for `parse`, it does.
    let text = FILE.replace(
        "prompt = \"Do the setup.\"",
        "prompt = \"Do the setup.\"\ndepends_on = [\"parse\"]",
    );
    let error = merge_plan(
        &file,
        &text,
        &plan(vec![task("parse", &["setup"], &[])]),
        false,
    )
    .unwrap_err();
    let LifeError::PlanDoesNotFit { diagnostics, .. } = &error else {
        panic!("{error}");
    };
    assert!(!diagnostics.is_empty());
    let message = error.to_string();
    assert!(message.contains("cycle"), "{message}");
    assert!(message.contains("the file was left as it was"), "{message}");
}

#[test]
fn a_plan_may_replace_the_example_tasks_of_a_new_file() {
    let (_dir, file) = project();
    let merged = merge_plan(&file, FILE, &plan(vec![task("only", &[], &[])]), true).unwrap();
    assert_eq!(merged.added, ["only"]);
    let parsed = corral_sprint::parse(&file, &merged.text).unwrap();
    assert_eq!(parsed.tasks.len(), 1);
    assert!(
        merged
            .text
            .contains("# The team's sprint: keep this comment.")
    );
}

#[test]
fn a_sprint_file_that_is_not_toml_is_named() {
    let (_dir, file) = project();
    let error =
        merge_plan(&file, "[sprint\n", &plan(vec![task("a", &[], &[])]), false).unwrap_err();
    assert!(matches!(error, LifeError::NotToml { .. }), "{error}");
    assert!(error.to_string().contains("corral-sprint.toml"), "{error}");
}

#[test]
fn the_prompt_names_the_current_tasks_and_fences_the_ticket() {
    let (_dir, file) = project();
    let parsed = corral_sprint::parse(&file, FILE).unwrap();
    let sources = [corral_sprint::life::check_source(
        "ticket.md".into(),
        "Add dates.\n```\ncode\n```\n".into(),
    )
    .unwrap()];
    let prompt = plan_prompt(&sources, Some(&parsed));
    assert!(prompt.contains("- `setup`: Set up\n"), "{prompt}");
    assert!(prompt.contains("## Ticket: ticket.md"), "{prompt}");
    assert!(prompt.contains("````markdown\nAdd dates."), "{prompt}");
}

#[test]
fn a_source_that_leaves_the_tree_blocks_or_is_too_long_is_refused() {
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.md"), "secret").unwrap();
    let (dir, _file) = project();
    let root = dir.path();

    std::os::unix::fs::symlink(outside.path().join("secret.md"), root.join("ticket.md")).unwrap();
    let error = read_source(root, &root.join("ticket.md")).unwrap_err();
    assert!(matches!(error, LifeError::OutsideProject { .. }), "{error}");
    assert!(error.to_string().contains("outside the project"), "{error}");

    let error = read_source(root, &outside.path().join("secret.md")).unwrap_err();
    assert!(matches!(error, LifeError::OutsideProject { .. }), "{error}");

    let fifo = root.join("fifo.md");
    let status = corral_test_support::command(Path::new("mkfifo"))
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(status.success());
    let error = read_source(root, &fifo).unwrap_err();
    assert!(error.to_string().contains("not a regular file"), "{error}");

    let prd = root.join("prd.md");
    std::fs::write(&prd, "- a requirement\n".repeat(10_000)).unwrap();
    let error = read_source(root, &prd).unwrap_err();
    assert!(
        error.to_string().contains(&format!(
            "prd.md: is 10000 lines long; at most {SOURCE_MAX_LINES} are planned from at once"
        )),
        "{error}"
    );

    std::fs::write(root.join("empty.md"), "\n  \n").unwrap();
    let error = read_source(root, &root.join("empty.md")).unwrap_err();
    assert!(matches!(error, LifeError::Empty { .. }), "{error}");

    let ok = read_source(root, &root.join("docs-brief.md")).unwrap();
    assert_eq!(ok.label, "docs-brief.md");
}
