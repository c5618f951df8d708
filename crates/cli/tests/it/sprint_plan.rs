//! `corral sprint plan` through the real Claude Code against the fake model API: the agent's
//! `task-plan` lands in the sprint file with the user's comments and hand edits kept and then
//! passes `sprint check`; a plan with a cycle is sent back through the corrective loop on the
//! resumed session; a plan that closes a cycle through a hand-written task, and bad sources (a
//! link out of the tree, a PRD of 10 000 lines), each get one message and leave the sprint
//! file as it was, the last two before any agent is asked; and the same plan through each of
//! the other CLIs. `--from-issues` takes the issues the real gh finds on the fake forge (through
//! Claude, Codex and Gemini); no issues, no login and a forge answering 500 each get one message
//! before any agent, the sprint file untouched.

use serde_json::{Value, json};

use corral_ports::PromptChannel;
use corral_test_support::fake_api::{Scenario, Step, shell_tool_input};

use crate::providers::{
    CLAUDE, CODEX, COPILOT, Cli, GEMINI, GROK, OPENCODE, RUN_CAP, World, canonical,
};
use crate::support::*;

const TS: &str = "2026-12-07T10:00:00Z";

/// A hand-written sprint file: a comment, a hand edit, one task.
const SPRINT: &str = r#"# Our sprint: this comment must survive planning.
[sprint]
name = "dates"
check = "true"   # hand edit: no tests yet

[roles.generator]
provider = "claude"

[roles.evaluator]
provider = "claude"
enabled = false

[[tasks]]
id = "setup"
title = "Set up the crate"
prompt = "Create src/lib.rs."
"#;

fn task(id: &str, deps: &[&str]) -> Value {
    json!({
        "id": id,
        "title": format!("Do {id}"),
        "brief": format!("Carry out {id}: see ticket.md."),
        "dependsOn": deps,
        "acceptanceCriteria": [format!("{id} is done")]
    })
}

fn plan(tasks: Vec<Value>) -> String {
    json!({"schemaVersion": 1, "signals": [{"type": "task-plan", "timestamp": TS, "tasks": tasks}]})
        .to_string()
}

/// The fake model writes each of `plans` in turn (the later ones answer corrective prompts).
fn world(plans: Vec<String>) -> World {
    World::new(&CLAUDE, move |_| {
        let mut steps = Vec::new();
        for plan in plans {
            steps.push(Step::write_signals_for(CLAUDE.bin, plan).unwrap());
            steps.push(Step::text("Planned."));
        }
        Scenario::script(steps)
    })
}

fn project(world: &World) -> std::path::PathBuf {
    let project = world.project();
    git(&project, &["init", "-q", "-b", "main"]);
    std::fs::write(project.join("corral-sprint.toml"), SPRINT).unwrap();
    std::fs::write(
        project.join("ticket.md"),
        "# Parse dates\n\nThe app needs ISO dates parsed, and bad ones named.\n",
    )
    .unwrap();
    project
}

fn sprint_plan(world: &World, args: &[&str]) -> std::process::Output {
    world
        .env
        .corral()
        .envs(world.vars().iter().map(|(k, v)| (k, v)))
        .timeout(RUN_CAP)
        .args(["sprint", "plan"])
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn a_ticket_becomes_tasks_after_a_corrective_retry_and_the_file_keeps_its_comments() {
    let cyclic = plan(vec![task("parse", &["names"]), task("names", &["parse"])]);
    let good = plan(vec![task("parse", &["setup"]), task("names", &["parse"])]);
    let world = world(vec![cyclic, good]);
    let project = project(&world);

    let out = sprint_plan(&world, &["ticket.md"]);
    let shown = transcript(&world.env, &out);
    assert_eq!(out.status.code(), Some(0), "{shown}");
    assert!(shown.contains("planned 2 tasks into"), "{shown}");
    assert!(shown.contains("added    parse, names"), "{shown}");
    assert!(shown.contains("kept     setup"), "{shown}");

    // The corrective prompt named the cycle to the agent, on its resumed session.
    let requests = world.api.requests();
    assert!(
        requests.iter().any(|r| r
            .last_user_text
            .as_deref()
            .is_some_and(|t| t.contains("the dependencies form a cycle"))),
        "no corrective prompt named the cycle"
    );

    let text = std::fs::read_to_string(project.join("corral-sprint.toml")).unwrap();
    assert!(
        text.starts_with("# Our sprint: this comment must survive planning."),
        "{text}"
    );
    assert!(
        text.contains("check = \"true\"   # hand edit: no tests yet"),
        "{text}"
    );
    let file = corral_sprint::load(&project.join("corral-sprint.toml")).unwrap();
    let order: Vec<&str> = file
        .run_order()
        .into_iter()
        .map(|t| t.id.as_str())
        .collect();
    assert_eq!(order, ["setup", "parse", "names"]);
    assert_eq!(file.tasks[1].acceptance_criteria, ["parse is done"]);

    let record = project.join(".corral/sprints/dates/plan/1");
    let planned: Value =
        serde_json::from_slice(&std::fs::read(record.join("plan.json")).unwrap()).unwrap();
    assert_eq!(planned["tasks"].as_array().unwrap().len(), 2);
    assert!(record.join("run.json").is_file());

    // `sprint check` accepts what plan wrote.
    let check = world
        .env
        .corral()
        .envs(world.vars().iter().map(|(k, v)| (k, v)))
        .env("GIT_AUTHOR_NAME", "T")
        .env("GIT_AUTHOR_EMAIL", "t@t.invalid")
        .env("GIT_COMMITTER_NAME", "T")
        .env("GIT_COMMITTER_EMAIL", "t@t.invalid")
        .args(["sprint", "check"])
        .output()
        .unwrap();
    assert_eq!(
        check.status.code(),
        Some(0),
        "{}",
        transcript(&world.env, &check)
    );
}

#[test]
fn a_plan_that_closes_a_cycle_through_a_hand_written_task_leaves_the_file_as_it_was() {
    // Valid alone; with the file's `setup` waiting for `parse` by hand, a cycle.
    let world = world(vec![plan(vec![task("parse", &["setup"])])]);
    let project = project(&world);

    // First a file that is invalid as it stands (`setup` waits for a task it does not have):
    // refused, as `sprint check` refuses it, before any agent is asked.
    let unknown = SPRINT.replace("id = \"setup\"", "id = \"setup\"\ndepends_on = [\"parse\"]");
    std::fs::write(project.join("corral-sprint.toml"), &unknown).unwrap();
    let out = sprint_plan(&world, &["ticket.md"]);
    let shown = transcript(&world.env, &out);
    assert_eq!(out.status.code(), Some(2), "{shown}");
    assert!(shown.contains("unknown-dependency"), "{shown}");
    assert!(shown.contains("fix these first"), "{shown}");
    assert_eq!(world.api.requests().len(), 0);

    // Then a valid file with its own `parse`, which the plan updates to wait for `setup`.
    let hand = format!("{unknown}\n[[tasks]]\nid = \"parse\"\ntitle = \"Parse\"\nprompt = \"p\"\n");
    std::fs::write(project.join("corral-sprint.toml"), &hand).unwrap();
    let out = sprint_plan(&world, &["ticket.md"]);
    let shown = transcript(&world.env, &out);
    assert_eq!(out.status.code(), Some(2), "{shown}");
    assert!(shown.contains("dependency-cycle"), "{shown}");
    assert!(shown.contains("the file was left as it was"), "{shown}");
    assert_eq!(
        std::fs::read_to_string(project.join("corral-sprint.toml")).unwrap(),
        hand
    );
    // The plan itself is kept as evidence.
    assert!(
        project
            .join(".corral/sprints/dates/plan/1/plan.json")
            .is_file()
    );
}

#[test]
fn bad_sources_are_refused_before_any_agent_and_leave_the_file_as_it_was() {
    let world = world(Vec::new());
    let project = project(&world);
    let outside = world.env.write("elsewhere/secret.md", "not the project's");
    std::os::unix::fs::symlink(&outside, project.join("linked.md")).unwrap();
    std::fs::write(project.join("prd.md"), "- a line\n".repeat(10_000)).unwrap();

    for (args, says) in [
        (vec!["linked.md"], "linked.md: is outside the project"),
        (
            vec!["--from", "prd.md"],
            "prd.md: is 10000 lines long; at most 2000",
        ),
        (vec!["missing.md"], "missing.md: no such file"),
        (vec![], "nothing to plan from"),
    ] {
        let out = sprint_plan(&world, &args);
        let shown = transcript(&world.env, &out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {shown}");
        assert!(shown.contains(says), "{args:?}: {shown}");
        assert_eq!(shown.matches("error").count(), 1, "one message: {shown}");
    }
    assert_eq!(world.api.requests().len(), 0);
    assert_eq!(
        std::fs::read_to_string(project.join("corral-sprint.toml")).unwrap(),
        SPRINT
    );
    assert!(!project.join(".corral/sprints/dates/plan").exists());
}

#[test]
fn without_a_sprint_file_plan_writes_one_from_the_example_named_after_the_ticket() {
    let world = world(vec![plan(vec![
        task("parse", &[]),
        task("names", &["parse"]),
    ])]);
    let project = world.project();
    git(&project, &["init", "-q", "-b", "main"]);
    std::fs::write(
        project.join("parse-dates.md"),
        "# Parse dates\n\nISO dates.\n",
    )
    .unwrap();

    let out = sprint_plan(&world, &["--from", "parse-dates.md"]);
    let shown = transcript(&world.env, &out);
    assert_eq!(out.status.code(), Some(0), "{shown}");
    let file = corral_sprint::load(&project.join("corral-sprint.toml")).unwrap();
    assert_eq!(file.sprint.name.as_str(), "parse-dates");
    let ids: Vec<&str> = file.tasks.iter().map(|t| t.id.as_str()).collect();
    assert_eq!(ids, ["parse", "names"], "the example's tasks are replaced");
    let text = std::fs::read_to_string(project.join("corral-sprint.toml")).unwrap();
    assert!(
        text.contains("# The check:"),
        "the example's comments stay: {text}"
    );
    assert!(
        project
            .join(".corral/sprints/parse-dates/plan/1/plan.json")
            .is_file()
    );
}

/// The plan of [`SPRINT`]'s ticket through `cli`: a CLI that reads its prompt from a file is
/// first made to read it, as a real model would.
fn plan_with(cli: &'static Cli) {
    plan_from(cli, None);
}

/// The plan through `cli`, from [`SPRINT`]'s ticket or, with `issues`, from an issue the real
/// gh finds on that fake forge.
fn plan_from(cli: &'static Cli, issues: Option<&corral_test_support::FakeForge>) {
    let world = World::new(cli, |project| {
        let mut steps = Vec::new();
        if cli.caps().prompt == PromptChannel::PointerFile {
            let read = format!(
                "cat {}/.corral/sprints/dates/plan/1/*prompt.md",
                canonical(project).display()
            );
            steps.push(Step::tool_use(
                cli.shell_tool,
                shell_tool_input(cli.shell_tool, &read),
            ));
        }
        let good = plan(vec![task("parse", &["setup"]), task("names", &["parse"])]);
        steps.push(Step::write_signals_for(cli.bin, good).unwrap());
        steps.push(Step::text("Planned."));
        Scenario::script(steps)
    });
    let project = project(&world);
    let out = match issues {
        None => sprint_plan(&world, &["ticket.md", "--provider", cli.id.as_str()]),
        Some(forge) => {
            forge.add_issue(
                7,
                "Parse dates",
                "ISO dates, and bad ones named.",
                &["sprint"],
            );
            let gh_config = world.project().parent().unwrap().join("gh-config");
            std::fs::create_dir_all(&gh_config).unwrap();
            world
                .env
                .corral()
                .envs(world.vars().iter().map(|(k, v)| (k, v)))
                .envs(forge.gh_env(&gh_config, Some(TOKEN)))
                .timeout(RUN_CAP)
                .args(["sprint", "plan", "--from-issues", "label:sprint"])
                .args(["--repo", &forge.repo(), "--provider", cli.id.as_str()])
                .output()
                .unwrap()
        }
    };
    let shown = transcript(&world.env, &out);
    assert_eq!(out.status.code(), Some(0), "{shown}");
    let file = corral_sprint::load(&project.join("corral-sprint.toml")).unwrap();
    let ids: Vec<&str> = file.tasks.iter().map(|t| t.id.as_str()).collect();
    assert_eq!(ids, ["setup", "parse", "names"], "{shown}");
}

#[test]
fn a_plan_through_codex() {
    plan_with(&CODEX);
}

#[test]
fn a_plan_through_copilot() {
    plan_with(&COPILOT);
}

#[test]
fn a_plan_through_opencode() {
    plan_with(&OPENCODE);
}

#[test]
fn a_plan_through_grok() {
    plan_with(&GROK);
}

#[test]
fn a_plan_through_gemini() {
    plan_with(&GEMINI);
}

const TOKEN: &str = "gho_fake";

/// `corral sprint plan --from-issues QUERY --repo <the fake forge's>` with the real gh pointed
/// at `forge`, logged in with `token`.
fn plan_from_issues(
    world: &World,
    forge: &corral_test_support::FakeForge,
    token: Option<&str>,
    query: &str,
) -> std::process::Output {
    let gh_config = world.project().parent().unwrap().join("gh-config");
    std::fs::create_dir_all(&gh_config).unwrap();
    world
        .env
        .corral()
        .envs(world.vars().iter().map(|(k, v)| (k, v)))
        .envs(forge.gh_env(&gh_config, token))
        .timeout(RUN_CAP)
        .args([
            "sprint",
            "plan",
            "--from-issues",
            query,
            "--repo",
            &forge.repo(),
        ])
        .output()
        .unwrap()
}

#[test]
fn issues_found_by_label_through_gh_become_tasks() {
    let world = world(vec![plan(vec![
        task("parse", &["setup"]),
        task("names", &["parse"]),
    ])]);
    let project = project(&world);
    let forge = corral_test_support::FakeForge::start("octo/widgets", TOKEN).unwrap();
    forge.add_issue(
        7,
        "Parse ISO dates",
        "Dates like 2026-12-07 must parse.",
        &["sprint"],
    );
    forge.add_issue(
        8,
        "Name bad dates",
        "Say which date was bad.",
        &["sprint", "bug"],
    );
    forge.add_issue(9, "Someday", "Not now.", &["later"]);

    let out = plan_from_issues(&world, &forge, Some(TOKEN), "label:sprint");
    let shown = transcript(&world.env, &out);
    assert_eq!(out.status.code(), Some(0), "{shown}");
    let file = corral_sprint::load(&project.join("corral-sprint.toml")).unwrap();
    let ids: Vec<&str> = file.tasks.iter().map(|t| t.id.as_str()).collect();
    assert_eq!(ids, ["setup", "parse", "names"]);
    let prompt =
        std::fs::read_to_string(project.join(".corral/sprints/dates/plan/1/prompt.md")).unwrap();
    for expected in [
        "## Ticket: GitHub issue #7",
        "Dates like 2026-12-07 must parse.",
        "## Ticket: GitHub issue #8",
        "Labels: sprint, bug",
    ] {
        assert!(
            prompt.contains(expected),
            "{expected:?} not in the prompt:\n{prompt}"
        );
    }
    assert!(!prompt.contains("Someday"), "{prompt}");
}

#[test]
fn no_issues_no_login_or_a_forge_in_trouble_each_say_so_and_leave_the_file_as_it_was() {
    let world = world(Vec::new());
    let project = project(&world);
    let forge = corral_test_support::FakeForge::start("octo/widgets", TOKEN).unwrap();
    forge.add_issue(7, "Parse ISO dates", "Dates.", &["later"]);

    let cases: [(Option<&str>, &str, i32, &str); 3] = [
        (
            Some(TOKEN),
            "label:sprint",
            2,
            "no open issue matches `label:sprint`",
        ),
        (None, "label:later", 8, "gh is not logged in"),
        (Some(TOKEN), "label:later", 8, "the forge answered HTTP 500"),
    ];
    for (i, (token, query, code, says)) in cases.into_iter().enumerate() {
        if i == 2 {
            forge.fail_with(500);
        }
        let out = plan_from_issues(&world, &forge, token, query);
        let shown = transcript(&world.env, &out);
        assert_eq!(out.status.code(), Some(code), "{query}: {shown}");
        assert!(shown.contains(says), "{says:?} not in:\n{shown}");
        assert_eq!(
            shown
                .lines()
                .filter(|l| !l.trim().is_empty() && *l != "[stderr]" && !l.starts_with("[exit"))
                .count(),
            1,
            "one message: {shown}"
        );
    }
    assert_eq!(world.api.requests().len(), 0, "no agent was asked");
    assert_eq!(
        std::fs::read_to_string(project.join("corral-sprint.toml")).unwrap(),
        SPRINT
    );
    assert!(!project.join(".corral/sprints/dates/plan").exists());
}

#[test]
fn a_plan_from_issues_through_codex() {
    let forge = corral_test_support::FakeForge::start("octo/widgets", TOKEN).unwrap();
    plan_from(&CODEX, Some(&forge));
}

#[test]
fn a_plan_from_issues_through_gemini() {
    let forge = corral_test_support::FakeForge::start("octo/widgets", TOKEN).unwrap();
    plan_from(&GEMINI, Some(&forge));
}
