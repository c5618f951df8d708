//! `corral sprint refine`, `ideate` and `ready`, and the life in `corral sprint status`, through
//! the real CLIs against the fake model API: a refinement with a person at a pseudo-terminal
//! (the real Claude Code's own interface, a question answered, the terminal taken back, a
//! mistake corrected on the resumed session; Codex's TUI likewise), headless refinements,
//! ideations and readiness proposals through every pinned CLI, a flow killed mid-spawn resumed
//! on its session by the rerun, a refinement planned and its stages shown; tickets ideated into
//! new files that never overwrite one; a readiness proposal shown as a diff and applied only
//! with `--yes`, comments kept; and bad input to each flow refused with one message before any
//! agent, its files as they were.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};

use corral_ports::PromptChannel;
use corral_test_support::fake_api::{Scenario, Step, shell_tool_input};
use corral_test_support::{Terminal, make_fifo, strip_screen};

use crate::providers::{
    CLAUDE, CODEX, COPILOT, Cli, GEMINI, GROK, OPENCODE, RUN_CAP, World, canonical,
};
use crate::support::*;

const TS: &str = "2026-12-07T10:00:00Z";

/// A sprint file with a comment and a hand edit, one task.
const SPRINT: &str = r#"# Our sprint: this comment must survive.
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

const TICKET: &str = "# Parse dates\n\nThe app needs dates parsed, and bad ones named.\n";

fn signals(signal: Value) -> String {
    json!({"schemaVersion": 1, "signals": [signal]}).to_string()
}

fn refined(criteria: &[&str]) -> String {
    signals(json!({
        "type": "refined-ticket", "timestamp": TS,
        "title": "Parse ISO 8601 dates",
        "spec": "Parse ISO 8601 dates in `src/dates.rs`; name the bad ones.",
        "acceptanceCriteria": criteria,
    }))
}

fn project(world: &World) -> PathBuf {
    let project = world.project();
    git(&project, &["init", "-q", "-b", "main"]);
    std::fs::write(project.join("corral-sprint.toml"), SPRINT).unwrap();
    std::fs::write(project.join("ticket.md"), TICKET).unwrap();
    project
}

fn corral(world: &World, args: &[&str]) -> std::process::Output {
    world
        .env
        .corral()
        .envs(world.vars().iter().map(|(k, v)| (k, v)))
        .timeout(RUN_CAP)
        .args(args)
        .output()
        .unwrap()
}

// ---------------------------------------------------------------------------------------------
// refine, with a person at a pseudo-terminal

/// How long a step of a person's conversation may take to appear: a guard, not a speed limit.
const SHOWN_WITHIN: Duration = Duration::from_secs(180);

/// `corral ARGS` in the world's project on a pseudo-terminal that is its controlling terminal.
fn terminal(world: &World, args: &[&str]) -> Terminal {
    terminal_with(world, args, &[])
}

/// [`terminal`], with `more` variables.
fn terminal_with(world: &World, args: &[&str], more: &[(&str, &str)]) -> Terminal {
    let mut env: Vec<(String, String)> = vec![
        ("PATH".into(), std::env::var("PATH").unwrap_or_default()),
        ("HOME".into(), world.env.home().display().to_string()),
        ("TZ".into(), "UTC0".into()),
        ("TERM".into(), "xterm".into()),
    ];
    env.extend(world.vars().iter().cloned());
    env.extend(more.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())));
    Terminal::start(
        &assert_cmd::cargo::cargo_bin("corral"),
        args,
        env,
        &world.project(),
    )
    .unwrap()
}

/// Waits for `needle` on `term` after `from`, failing with what it showed.
fn wait_for(term: &mut Terminal, needle: &str, from: usize) -> usize {
    term.wait_for(needle, from, SHOWN_WITHIN)
        .unwrap_or_else(|screen| panic!("never saw {needle:?}; the terminal showed:\n{screen}"))
}

/// Claude Code's first-run screens answered, and the project trusted, in the world's HOME: what
/// a person who has used Claude Code here before has.
fn claude_has_been_used_here(world: &World) {
    let project = world.project().display().to_string();
    let config = json!({
        "hasCompletedOnboarding": true,
        "theme": "dark",
        "customApiKeyResponses": {"approved": ["sk-test"], "rejected": []},
        "projects": {project: {"hasTrustDialogAccepted": true, "hasCompletedProjectOnboarding": true}},
    });
    std::fs::write(world.env.home().join(".claude.json"), config.to_string()).unwrap();
}

#[test]
fn refine_hands_the_terminal_to_claude_asks_takes_it_back_and_corrects_on_the_resumed_session() {
    let world = World::new(&CLAUDE, |project| {
        let pointer =
            canonical(project).join(".corral/sprints/dates/refine/1/interactive-prompt.md");
        Scenario::script([
            // The agent reads its task from the pointer file, asks, and is answered.
            Step::tool_use("Read", json!({"file_path": pointer.display().to_string()})),
            Step::text("QUESTION: which date formats must be accepted?"),
            // Its first file has no criterion: the contract refuses it.
            Step::write_signals_for(CLAUDE.bin, refined(&[])).unwrap(),
            Step::text("WRITTEN: leave the session with /exit."),
            // The corrective retry, headless on the same session, after the person left.
            Step::write_signals_for(
                CLAUDE.bin,
                refined(&["`2026-12-07` parses", "`2026-13-01` is named as bad"]),
            )
            .unwrap(),
            Step::text("Fixed."),
        ])
    });
    let project = project(&world);
    claude_has_been_used_here(&world);

    let mut term = terminal(&world, &["sprint", "refine", "ticket.md"]);
    let at = wait_for(&mut term, "QUESTION: which date formats", 0);
    term.type_line("ISO 8601 only").unwrap();
    wait_for(&mut term, "WRITTEN: leave the session", at);
    term.type_line("/exit").unwrap();
    let (code, screen) = term.finish(RUN_CAP).unwrap();
    assert_eq!(code, Some(0), "{screen}");

    // The person's answer reached the model, in the session the corrective retry resumed.
    let requests = world.api.requests();
    assert!(
        requests.iter().any(|r| r
            .last_user_text
            .as_deref()
            .is_some_and(|t| t.contains("ISO 8601 only"))),
        "the answer typed never reached the model"
    );
    assert!(
        requests.iter().any(|r| r
            .last_user_text
            .as_deref()
            .is_some_and(|t| t.contains("acceptanceCriteria"))),
        "no corrective prompt named the missing criteria"
    );
    assert!(
        screen.contains(&strip_screen(b"the agent corrects it on its session")),
        "{screen}"
    );

    let ticket = std::fs::read_to_string(project.join("ticket.md")).unwrap();
    assert!(ticket.starts_with("# Parse ISO 8601 dates\n"), "{ticket}");
    assert!(
        ticket.contains("- `2026-13-01` is named as bad"),
        "{ticket}"
    );
    let record = project.join(".corral/sprints/dates/refine/1");
    assert_eq!(
        std::fs::read_to_string(record.join("source.md")).unwrap(),
        TICKET
    );
    assert!(record.join("refined.json").is_file());
    assert!(record.join("interactive-prompt.md").is_file());
}

/// Codex's TUI on a pseudo-terminal: the project trusted in its `config.toml`, as a person who
/// has used Codex here before has it (else its first screen asks).
fn codex_has_been_used_here(world: &World) {
    let home = world
        .vars()
        .iter()
        .find(|(k, _)| k == "CODEX_HOME")
        .map(|(_, v)| PathBuf::from(v))
        .unwrap();
    let config = home.join("config.toml");
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str(&format!(
        "\n[projects.{:?}]\ntrust_level = \"trusted\"\n",
        canonical(&world.project()).display().to_string()
    ));
    std::fs::write(&config, text).unwrap();
}

#[test]
fn refine_hands_the_terminal_to_codex_and_takes_it_back() {
    let world = World::new(&CODEX, |project| {
        let pointer =
            canonical(project).join(".corral/sprints/dates/refine/1/interactive-prompt.md");
        Scenario::script([
            Step::tool_use(
                CODEX.shell_tool,
                shell_tool_input(CODEX.shell_tool, &format!("cat {}", pointer.display())),
            ),
            Step::text("QUESTION: which date formats must be accepted?"),
            Step::write_signals_for(
                CODEX.bin,
                refined(&["`2026-12-07` parses", "`2026-13-01` is named as bad"]),
            )
            .unwrap(),
            Step::text("WRITTEN: leave the session with /quit."),
        ])
    });
    let project = project(&world);
    codex_has_been_used_here(&world);

    let mut term = terminal_with(
        &world,
        &["sprint", "refine", "ticket.md", "--provider", "codex"],
        // Codex's TUI starts a background server by default (`/tmp/codex-daemon-<uid>`); on a
        // disk nearly full it failed with ENOSPC before its first request. In-process, as a
        // person sets it in `[providers.codex] args`, the conversation does not depend on it.
        &[("CORRAL_PROVIDERS__CODEX__ARGS", "[\"--no-daemon\"]")],
    );
    let at = wait_for(&mut term, "QUESTION: which date formats", 0);
    term.type_line("ISO 8601 only").unwrap();
    wait_for(&mut term, "WRITTEN: leave the session", at);
    term.type_line("/quit").unwrap();
    let (code, screen) = term.finish(RUN_CAP).unwrap();
    assert_eq!(code, Some(0), "{screen}");
    assert!(
        world.api.requests().iter().any(|r| r
            .last_user_text
            .as_deref()
            .is_some_and(|t| t.contains("ISO 8601 only"))),
        "the answer typed never reached the model"
    );
    let ticket = std::fs::read_to_string(project.join("ticket.md")).unwrap();
    assert!(ticket.starts_with("# Parse ISO 8601 dates\n"), "{ticket}");
    assert!(
        ticket.contains("- `2026-13-01` is named as bad"),
        "{ticket}"
    );
}

#[test]
fn a_person_who_leaves_before_the_ticket_is_written_leaves_it_as_it_was() {
    let world = World::new(&CLAUDE, |project| {
        let pointer =
            canonical(project).join(".corral/sprints/dates/refine/1/interactive-prompt.md");
        Scenario::script([
            Step::tool_use("Read", json!({"file_path": pointer.display().to_string()})),
            Step::text("QUESTION: which date formats must be accepted?"),
        ])
    });
    let project = project(&world);
    claude_has_been_used_here(&world);

    let mut term = terminal(&world, &["sprint", "refine", "ticket.md"]);
    wait_for(&mut term, "QUESTION: which date formats", 0);
    term.type_line("/exit").unwrap();
    let (code, screen) = term.finish(RUN_CAP).unwrap();
    assert_eq!(code, Some(7), "{screen}");
    assert!(
        screen.contains(&strip_screen(
            b"the session ended before the agent wrote the refined ticket"
        )),
        "{screen}"
    );
    assert!(
        screen.contains(&strip_screen(b"ticket.md was left as it was")),
        "{screen}"
    );
    assert_eq!(
        std::fs::read_to_string(project.join("ticket.md")).unwrap(),
        TICKET
    );
    // No headless run was started behind the person's back.
    assert_eq!(
        world
            .api
            .requests()
            .iter()
            .filter(|r| r.step.is_some())
            .count(),
        2
    );
}

#[test]
fn refine_without_a_terminal_asks_for_headless_and_bad_input_is_refused_before_any_agent() {
    let world = World::new(&CLAUDE, |_| Scenario::script([]));
    let project = project(&world);
    let outside = world.env.write("elsewhere/secret.md", "not the project's");
    std::os::unix::fs::symlink(&outside, project.join("linked.md")).unwrap();
    std::fs::write(project.join("long.md"), "- a line\n".repeat(10_000)).unwrap();
    make_fifo(&project.join("fifo.md")).unwrap();

    for (args, says) in [
        (
            vec!["ticket.md"],
            "stdin is not a terminal: run it in a terminal, or add --headless",
        ),
        (
            vec!["linked.md", "--headless"],
            "linked.md: is outside the project",
        ),
        (
            vec!["long.md", "--headless"],
            "long.md: is 10000 lines long; at most 2000",
        ),
        (vec!["fifo.md", "--headless"], "fifo.md"),
        (
            vec!["ticket.md", "--headless", "--output", "fifo.md"],
            "fifo.md: is a FIFO",
        ),
        (
            vec!["ticket.md", "--headless", "--output", "../out.md"],
            "is outside the project",
        ),
    ] {
        let mut all = vec!["sprint", "refine"];
        all.extend(&args);
        let out = corral(&world, &all);
        let shown = transcript(&world.env, &out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {shown}");
        assert!(shown.contains(says), "{args:?}: {shown}");
        assert_eq!(shown.matches("error").count(), 1, "one message: {shown}");
    }
    // A sprint file with errors is named as `sprint check` names them, and nothing starts.
    let broken = SPRINT.replace("check = \"true\"", "chek = \"true\"");
    std::fs::write(project.join("corral-sprint.toml"), &broken).unwrap();
    let out = corral(&world, &["sprint", "refine", "ticket.md", "--headless"]);
    let shown = transcript(&world.env, &out);
    assert_eq!(out.status.code(), Some(2), "{shown}");
    assert!(shown.contains("sprint.chek: unknown key"), "{shown}");
    assert!(shown.contains("fix these first"), "{shown}");

    assert!(world.api.requests().is_empty());
    assert_eq!(
        std::fs::read_to_string(project.join("ticket.md")).unwrap(),
        TICKET
    );
    assert!(!project.join(".corral/sprints/dates/refine").exists());
}

// ---------------------------------------------------------------------------------------------
// refine --headless, then plan, and the stages in `sprint status`

fn plan_signals() -> String {
    let task = |id: &str, deps: &[&str]| {
        json!({"id": id, "title": format!("Do {id}"), "brief": format!("Carry out {id}."),
               "dependsOn": deps, "acceptanceCriteria": [format!("{id} is done")]})
    };
    signals(json!({"type": "task-plan", "timestamp": TS,
                   "tasks": [task("parse", &["setup"]), task("names", &["parse"])]}))
}

#[test]
fn a_headless_refinement_is_planned_and_status_shows_each_stage() {
    let world = World::new(&CLAUDE, |_| {
        Scenario::script([
            Step::write_signals_for(CLAUDE.bin, refined(&["bad dates are named"])).unwrap(),
            Step::text("Refined."),
            Step::write_signals_for(CLAUDE.bin, plan_signals()).unwrap(),
            Step::text("Planned."),
        ])
    });
    project(&world);

    let status = |world: &World| {
        let out = corral(world, &["sprint", "status"]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            transcript(&world.env, &out)
        );
        world.env.clean(&out.stdout)
    };
    let shown = status(&world);
    assert!(shown.starts_with("sprint dates: new\n"), "{shown}");

    let out = corral(&world, &["sprint", "refine", "ticket.md", "--headless"]);
    let shown = transcript(&world.env, &out);
    assert_eq!(out.status.code(), Some(0), "{shown}");
    assert!(
        shown.contains("refined ticket.md into ticket.md"),
        "{shown}"
    );
    assert!(
        shown.contains("next: `corral sprint plan ticket.md`"),
        "{shown}"
    );
    // Headless, the agent is told no one answers.
    let first = &world.api.requests()[0];
    assert!(
        first
            .last_user_text
            .as_deref()
            .is_some_and(|t| t.contains("No one will answer questions")),
        "{first:?}"
    );
    let shown = status(&world);
    assert!(shown.starts_with("sprint dates: refined\n"), "{shown}");
    assert!(
        shown.contains("refine  refine/1: \"Parse ISO 8601 dates\", 1 criterion"),
        "{shown}"
    );

    let out = corral(&world, &["sprint", "plan", "ticket.md"]);
    let shown = transcript(&world.env, &out);
    assert_eq!(out.status.code(), Some(0), "{shown}");
    // The plan was made from the refined text.
    let plan_request = world.api.requests().into_iter().nth(2).unwrap();
    assert!(
        plan_request
            .last_user_text
            .as_deref()
            .is_some_and(|t| t.contains("## Acceptance criteria")),
        "{plan_request:?}"
    );
    let shown = status(&world);
    assert!(shown.starts_with("sprint dates: planned\n"), "{shown}");
    assert!(shown.contains("plan    plan/1: 2 tasks"), "{shown}");
    assert!(shown.contains("run     not started"), "{shown}");

    let out = corral(&world, &["sprint", "status", "--json"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        transcript(&world.env, &out)
    );
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["life"]["stage"], "planned", "{json}");
    crate::schemas::Schema::load("sprint-status.schema.json").check("sprint status --json", &json);
}

/// The steps a CLI's scripted model takes before it writes `signals`: a CLI that reads its
/// prompt from a file is first made to read it (the flow's spawn `n`), as a real model would.
fn steps_for(
    cli: &'static Cli,
    project: &std::path::Path,
    flow: &str,
    n: u32,
    signals: String,
) -> Vec<Step> {
    let mut steps = Vec::new();
    if cli.caps().prompt == PromptChannel::PointerFile {
        let read = format!(
            "cat {}/.corral/sprints/dates/{flow}/{n}/*prompt.md",
            canonical(project).display()
        );
        steps.push(Step::tool_use(
            cli.shell_tool,
            shell_tool_input(cli.shell_tool, &read),
        ));
    }
    steps.push(Step::write_signals_for(cli.bin, signals).unwrap());
    steps.push(Step::text("Done."));
    steps
}

/// A headless refinement through `cli`.
fn refine_with(cli: &'static Cli) {
    let world = World::new(cli, |project| {
        Scenario::script(steps_for(
            cli,
            project,
            "refine",
            1,
            refined(&["bad dates are named"]),
        ))
    });
    let project = project(&world);
    let out = corral(
        &world,
        &[
            "sprint",
            "refine",
            "ticket.md",
            "--headless",
            "--provider",
            cli.id.as_str(),
        ],
    );
    let shown = transcript(&world.env, &out);
    assert_eq!(out.status.code(), Some(0), "{shown}");
    let ticket = std::fs::read_to_string(project.join("ticket.md")).unwrap();
    assert!(
        ticket.contains("## Acceptance criteria\n\n- bad dates are named\n"),
        "{ticket}"
    );
}

#[test]
fn a_headless_refinement_through_codex() {
    refine_with(&CODEX);
}

#[test]
fn a_headless_refinement_through_copilot() {
    refine_with(&COPILOT);
}

#[test]
fn a_headless_refinement_through_opencode() {
    refine_with(&OPENCODE);
}

#[test]
fn a_headless_refinement_through_grok() {
    refine_with(&GROK);
}

#[test]
fn a_headless_refinement_through_gemini() {
    refine_with(&GEMINI);
}

// ---------------------------------------------------------------------------------------------
// ideate

fn tickets(titles: &[&str]) -> String {
    let tickets: Vec<Value> = titles
        .iter()
        .map(|t| json!({"title": t, "description": format!("{t}: why and what.")}))
        .collect();
    signals(json!({"type": "ideated-tickets", "timestamp": TS, "tickets": tickets}))
}

#[test]
fn ideas_become_new_ticket_files_and_never_overwrite_one() {
    let world = World::new(&CLAUDE, |_| {
        Scenario::script([
            Step::write_signals_for(CLAUDE.bin, tickets(&["Parse dates", "Name bad dates"]))
                .unwrap(),
            Step::text("Proposed."),
        ])
    });
    let project = project(&world);
    std::fs::create_dir(project.join("tickets")).unwrap();
    std::fs::write(
        project.join("tickets/parse-dates.md"),
        "# Parse dates\n\nmine\n",
    )
    .unwrap();

    let out = corral(&world, &["sprint", "ideate", "Dates, please"]);
    let shown = transcript(&world.env, &out);
    assert_eq!(out.status.code(), Some(0), "{shown}");
    assert!(shown.contains("proposed 2 tickets in tickets"), "{shown}");
    assert!(
        shown.contains("tickets/parse-dates-2.md  Parse dates"),
        "{shown}"
    );
    assert!(
        shown.contains("tickets/name-bad-dates.md  Name bad dates"),
        "{shown}"
    );
    assert_eq!(
        std::fs::read_to_string(project.join("tickets/parse-dates.md")).unwrap(),
        "# Parse dates\n\nmine\n",
        "an existing ticket is never overwritten"
    );
    assert_eq!(
        std::fs::read_to_string(project.join("tickets/name-bad-dates.md")).unwrap(),
        "# Name bad dates\n\nName bad dates: why and what.\n"
    );
    // The agent was told the person's prompt and the ticket that exists.
    let asked = world.api.requests()[0].last_user_text.clone().unwrap();
    assert!(asked.contains("Dates, please"), "{asked}");
    assert!(asked.contains("do not propose these again"), "{asked}");
    assert!(
        project
            .join(".corral/sprints/dates/ideate/1/tickets.json")
            .is_file()
    );
    let out = corral(&world, &["sprint", "status"]);
    let shown = world.env.clean(&out.stdout);
    assert!(shown.contains("ideate  ideate/1: 2 tickets"), "{shown}");
}

/// Ideation through `cli`: the tickets written as new files.
fn ideate_with(cli: &'static Cli) {
    let world = World::new(cli, |project| {
        Scenario::script(steps_for(
            cli,
            project,
            "ideate",
            1,
            tickets(&["Parse dates", "Name bad dates"]),
        ))
    });
    let project = project(&world);
    let out = corral(
        &world,
        &[
            "sprint",
            "ideate",
            "Dates, please",
            "--provider",
            cli.id.as_str(),
        ],
    );
    let shown = transcript(&world.env, &out);
    assert_eq!(out.status.code(), Some(0), "{shown}");
    assert!(shown.contains("proposed 2 tickets in tickets"), "{shown}");
    assert_eq!(
        std::fs::read_to_string(project.join("tickets/name-bad-dates.md")).unwrap(),
        "# Name bad dates\n\nName bad dates: why and what.\n"
    );
}

#[test]
fn ideation_through_claude() {
    ideate_with(&CLAUDE);
}

#[test]
fn ideation_through_codex() {
    ideate_with(&CODEX);
}

#[test]
fn ideation_through_copilot() {
    ideate_with(&COPILOT);
}

#[test]
fn ideation_through_opencode() {
    ideate_with(&OPENCODE);
}

#[test]
fn ideation_through_grok() {
    ideate_with(&GROK);
}

#[test]
fn ideation_through_gemini() {
    ideate_with(&GEMINI);
}

/// Whether a file called `name` is in `dir` or one level below it.
fn has_file_named(dir: &std::path::Path, name: &str) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    entries.flatten().any(|e| {
        let path = e.path();
        e.file_name() == name || (path.is_dir() && path.join(name).is_file())
    })
}

#[test]
fn an_ideation_killed_mid_spawn_resumes_its_session_on_the_rerun() {
    let world = World::new(&CLAUDE, |_| {
        Scenario::script([
            // The first spawn asks, and the model holds its answer until the kill.
            Step::HangBeforeHeaders,
            Step::write_signals_for(CLAUDE.bin, tickets(&["Parse dates"])).unwrap(),
            Step::text("Proposed."),
        ])
    });
    let project = project(&world);
    let mut child = corral_test_support::command(&assert_cmd::cargo::cargo_bin("corral"));
    child
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", world.env.home())
        .envs(world.vars().iter().map(|(k, v)| (k, v)))
        .current_dir(&project)
        .args(["sprint", "ideate", "Dates, please"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let mut child = child.spawn().unwrap();
    let spawn_dir = project.join(".corral/sprints/dates/ideate/1");
    // Killed once Corral recorded the session (what a crash resume must match) and Claude Code
    // kept its transcript (what it resumes from): before that there is nothing to resume.
    assert!(
        wait_until(Duration::from_secs(300), || {
            exists(&spawn_dir.join("session-id.txt"))
                && exists(&spawn_dir.join("session.json"))
                && !world.api.requests().is_empty()
        }),
        "the first spawn never asked the model; requests: {:#?}",
        world.api.requests()
    );
    let session = std::fs::read_to_string(spawn_dir.join("session-id.txt")).unwrap();
    let kept = format!("{}.jsonl", session.trim());
    let projects = world.env.home().join(".claude/projects");
    assert!(
        wait_until(Duration::from_secs(60), || has_file_named(&projects, &kept)),
        "Claude Code never kept session {}",
        session.trim()
    );
    let orphans = spawned_pids(&spawn_dir);
    corral_test_support::send_signal(child.id(), corral_test_support::Signal::SIGKILL);
    child.wait().unwrap();
    for pid in orphans {
        corral_test_support::send_signal(pid, corral_test_support::Signal::SIGKILL);
    }

    let out = corral(&world, &["sprint", "ideate", "Dates, please"]);
    let shown = transcript(&world.env, &out);
    assert_eq!(out.status.code(), Some(0), "{shown}");
    assert!(
        shown.contains("resuming the session of this flow's spawn that was cut short"),
        "{shown}"
    );
    assert!(shown.contains("proposed 1 ticket"), "{shown}");
    // The same session, in the same directory: no second spawn beside the first.
    let requests = world.api.requests();
    assert!(requests.len() >= 2, "{requests:#?}");
    assert_eq!(
        requests.last().unwrap().session_id(),
        Some(session.trim()),
        "the killed spawn's session was resumed"
    );
    assert!(!project.join(".corral/sprints/dates/ideate/2").exists());
    assert!(spawn_dir.join("tickets.json").is_file());
}

#[test]
fn ideate_refuses_a_tickets_directory_it_cannot_write_before_any_agent() {
    let world = World::new(&CLAUDE, |_| Scenario::script([]));
    let project = project(&world);
    let outside = world.env.dir.path().join("elsewhere");
    std::fs::create_dir_all(&outside).unwrap();
    std::os::unix::fs::symlink(&outside, project.join("linked")).unwrap();
    std::fs::write(project.join("plain"), "a file").unwrap();
    for (args, says) in [
        (vec!["--dir", "linked/x"], "is outside the project"),
        (vec!["--dir", "plain"], "plain: is a file"),
        (
            vec!["--dir", "nowhere/deeper"],
            "its directory does not exist",
        ),
        (vec!["   "], "the prompt: is empty"),
    ] {
        let mut all = vec!["sprint", "ideate"];
        all.extend(&args);
        let out = corral(&world, &all);
        let shown = transcript(&world.env, &out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {shown}");
        assert!(shown.contains(says), "{args:?}: {shown}");
        assert_eq!(shown.matches("error").count(), 1, "one message: {shown}");
    }
    assert!(world.api.requests().is_empty());
    assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
}

// ---------------------------------------------------------------------------------------------
// ready

/// A readiness proposal whose one gate is on `docs/` and may run `gate_ms` milliseconds.
fn proposal(gate_ms: u64) -> String {
    json!({"schemaVersion": 1, "signals": [
        {"type": "agents-md-proposal", "timestamp": TS, "path": "AGENTS.md",
         "content": "# Agents\n\nRun `cargo test` before you say you are done.\n"},
        {"type": "agents-md-proposal", "timestamp": TS, "path": ".github/copilot-instructions.md",
         "content": "# Copilot\n\nSee AGENTS.md.\n"},
        {"type": "setup-script", "timestamp": TS, "command": "cargo fetch"},
        {"type": "verify-script", "timestamp": TS, "command": "cargo test --workspace",
         "rationale": "the project's tests"},
        {"type": "verify-gates", "timestamp": TS,
         "gates": [{"pathPrefix": "docs/", "command": "cargo doc --no-deps", "timeoutMs": gate_ms}]},
    ]})
    .to_string()
}

fn ready_world(proposals: Vec<String>) -> World {
    World::new(&CLAUDE, move |_| {
        let mut steps = Vec::new();
        for p in proposals {
            steps.push(Step::write_signals_for(CLAUDE.bin, p).unwrap());
            steps.push(Step::text("Proposed."));
        }
        Scenario::script(steps)
    })
}

#[test]
fn ready_shows_a_diff_applies_only_with_yes_and_keeps_the_comments() {
    let world = ready_world(vec![proposal(60_000), proposal(60_000)]);
    let project = project(&world);
    std::fs::write(project.join("AGENTS.md"), "# Agents\n\nOld advice.\n").unwrap();
    // A link planted where a context file goes: left alone, never written through.
    let outside = world.env.dir.path().join("elsewhere");
    std::fs::create_dir_all(&outside).unwrap();
    std::os::unix::fs::symlink(&outside, project.join(".github")).unwrap();

    // No terminal and no --yes: shown, not applied.
    let out = corral(&world, &["sprint", "ready"]);
    let shown = transcript(&world.env, &out);
    assert_eq!(out.status.code(), Some(0), "{shown}");
    assert!(shown.contains("--- a/AGENTS.md"), "{shown}");
    assert!(shown.contains("-Old advice."), "{shown}");
    assert!(
        shown.contains("+Run `cargo test` before you say you are done."),
        "{shown}"
    );
    assert!(
        shown.contains("-check = \"true\"   # hand edit: no tests yet"),
        "{shown}"
    );
    assert!(
        shown.contains("+check = \"cargo test --workspace\"   # hand edit: no tests yet"),
        "{shown}"
    );
    assert!(
        shown.contains("ready: not applied (no terminal to ask)"),
        "{shown}"
    );
    assert!(
        shown.contains(".github/copilot-instructions.md is reached through a link: left as it is"),
        "{shown}"
    );
    assert_eq!(
        std::fs::read_to_string(project.join("corral-sprint.toml")).unwrap(),
        SPRINT
    );
    assert_eq!(
        std::fs::read_to_string(project.join("AGENTS.md")).unwrap(),
        "# Agents\n\nOld advice.\n"
    );
    let out = corral(&world, &["sprint", "status"]);
    let status = world.env.clean(&out.stdout);
    assert!(status.contains("(proposed, not applied)"), "{status}");

    let out = corral(&world, &["sprint", "ready", "--yes"]);
    let shown = transcript(&world.env, &out);
    assert_eq!(out.status.code(), Some(0), "{shown}");
    assert!(
        shown.contains("ready: applied to AGENTS.md, corral-sprint.toml"),
        "{shown}"
    );
    let text = std::fs::read_to_string(project.join("corral-sprint.toml")).unwrap();
    assert!(
        text.starts_with("# Our sprint: this comment must survive."),
        "{text}"
    );
    assert!(
        text.contains("check = \"cargo test --workspace\"   # hand edit: no tests yet"),
        "{text}"
    );
    assert!(text.contains("setup = \"cargo fetch\""), "{text}");
    let file = corral_sprint::load(&project.join("corral-sprint.toml")).unwrap();
    assert_eq!(file.gates.len(), 1);
    assert_eq!(file.gates[0].command, "cargo doc --no-deps");
    assert!(
        std::fs::read_to_string(project.join("AGENTS.md"))
            .unwrap()
            .contains("Run `cargo test`")
    );
    assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
    let out = corral(&world, &["sprint", "status"]);
    let status = world.env.clean(&out.stdout);
    assert!(status.starts_with("sprint dates: ready\n"), "{status}");
    assert!(status.contains("(applied)"), "{status}");
}

#[test]
fn a_readiness_proposal_that_breaks_the_sprint_file_changes_nothing() {
    // Five milliseconds is a gate's time in the signal's rules, not in the sprint file's.
    let world = ready_world(vec![proposal(5)]);
    let project = project(&world);

    let out = corral(&world, &["sprint", "ready", "--yes"]);
    let shown = transcript(&world.env, &out);
    assert_eq!(out.status.code(), Some(2), "{shown}");
    assert!(shown.contains("gates[0].timeout_ms"), "{shown}");
    assert!(shown.contains("nothing was changed"), "{shown}");
    assert_eq!(
        std::fs::read_to_string(project.join("corral-sprint.toml")).unwrap(),
        SPRINT
    );
    assert!(!project.join("AGENTS.md").exists());

    // No sprint file at all: refused before any agent, with what to do.
    std::fs::remove_file(project.join("corral-sprint.toml")).unwrap();
    let before = world.api.requests().len();
    let out = corral(&world, &["sprint", "ready"]);
    let shown = transcript(&world.env, &out);
    assert_eq!(out.status.code(), Some(2), "{shown}");
    assert!(shown.contains("plan one first"), "{shown}");
    assert_eq!(world.api.requests().len(), before);
}

#[test]
fn on_a_terminal_ready_asks_and_applies_only_on_yes() {
    let world = ready_world(vec![proposal(60_000), proposal(60_000)]);
    let project = project(&world);

    let mut term = terminal(&world, &["sprint", "ready"]);
    wait_for(&mut term, "apply these changes? [y/N]", 0);
    term.type_line("n").unwrap();
    let (code, screen) = term.finish(RUN_CAP).unwrap();
    assert_eq!(code, Some(0), "{screen}");
    assert!(
        screen.contains(&strip_screen(b"ready: not applied; the proposal is in")),
        "{screen}"
    );
    assert_eq!(
        std::fs::read_to_string(project.join("corral-sprint.toml")).unwrap(),
        SPRINT
    );
    assert!(!project.join("AGENTS.md").exists());

    let mut term = terminal(&world, &["sprint", "ready"]);
    wait_for(&mut term, "apply these changes? [y/N]", 0);
    term.type_line("y").unwrap();
    let (code, screen) = term.finish(RUN_CAP).unwrap();
    assert_eq!(code, Some(0), "{screen}");
    assert!(project.join("AGENTS.md").is_file(), "{screen}");
    assert!(
        std::fs::read_to_string(project.join("corral-sprint.toml"))
            .unwrap()
            .contains("check = \"cargo test --workspace\"")
    );
}

/// Readiness through `cli`, applied with `--yes`.
fn ready_with(cli: &'static Cli) {
    let world = World::new(cli, |project| {
        Scenario::script(steps_for(cli, project, "ready", 1, proposal(60_000)))
    });
    let project = project(&world);
    let out = corral(
        &world,
        &["sprint", "ready", "--yes", "--provider", cli.id.as_str()],
    );
    let shown = transcript(&world.env, &out);
    assert_eq!(out.status.code(), Some(0), "{shown}");
    assert!(shown.contains("ready: applied to"), "{shown}");
    assert!(
        std::fs::read_to_string(project.join("AGENTS.md"))
            .unwrap()
            .contains("Run `cargo test`")
    );
    let file = corral_sprint::load(&project.join("corral-sprint.toml")).unwrap();
    assert_eq!(file.gates.len(), 1);
}

#[test]
fn readiness_through_claude() {
    ready_with(&CLAUDE);
}

#[test]
fn readiness_through_codex() {
    ready_with(&CODEX);
}

#[test]
fn readiness_through_copilot() {
    ready_with(&COPILOT);
}

#[test]
fn readiness_through_opencode() {
    ready_with(&OPENCODE);
}

#[test]
fn readiness_through_grok() {
    ready_with(&GROK);
}

#[test]
fn readiness_through_gemini() {
    ready_with(&GEMINI);
}

#[test]
fn plan_fills_a_sprint_file_written_with_its_settings_and_no_tasks() {
    let plan = plan_signals().replace(r#"["setup"]"#, "[]");
    let world = World::new(&CLAUDE, move |_| {
        Scenario::script([
            Step::write_signals_for(CLAUDE.bin, plan).unwrap(),
            Step::text("Planned."),
        ])
    });
    let project = project(&world);
    let settings_only = SPRINT.split("[[tasks]]").next().unwrap().to_owned();
    std::fs::write(project.join("corral-sprint.toml"), &settings_only).unwrap();
    // `sprint check` still wants a task; plan fills them in.
    let out = corral(&world, &["sprint", "check"]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        transcript(&world.env, &out)
    );
    let out = corral(&world, &["sprint", "plan", "ticket.md"]);
    let shown = transcript(&world.env, &out);
    assert_eq!(out.status.code(), Some(0), "{shown}");
    assert!(shown.contains("added    parse, names"), "{shown}");
    let text = std::fs::read_to_string(project.join("corral-sprint.toml")).unwrap();
    assert!(text.starts_with(&settings_only), "{text}");
    let file = corral_sprint::load(&project.join("corral-sprint.toml")).unwrap();
    assert_eq!(file.tasks.len(), 2);
}
