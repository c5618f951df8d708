//! `corral sprint run` through the real CLIs against the fake model API (issue 9's cases): a
//! three-task sprint (a clean pass, a regression fixed in round 2 on the resumed session, a failed
//! evaluation whose critique reaches round 2), a blocked task, a regression that uses up its
//! attempts, a baseline-broken check, `kill -9` during a generator and during an evaluator round
//! then a rerun, the generator on Claude Code with the evaluator on Codex, an agent that checks out
//! another branch, rate-limit retries used up then a rerun, a one-task sprint with each
//! provider as the generator, Ctrl-C then a rerun, the commit identity from the user's git config,
//! the live view on a terminal, and with `--jobs 2` two tasks that break the check only together
//! (the second sent home from its fold for one more round at the tip).
//!
//! The cases hold the command to its fixed interface (exit codes 0 done, 2 bad file or
//! preflight, 3 blocked, 4 rate-limited, 130 cancelled; state under `.corral/sprints/<name>/`).
//! The fake tells the generator's requests from the evaluator's by the spawn directory their
//! paths lie in (`Scenario::with_round`).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use corral_ports::PromptChannel;
use corral_test_support::fake_api::{Role, Scenario, SpawnKey, Step, shell_tool_input};
use corral_test_support::{Signal, require_cli};
use serde_json::{Value, json};

use crate::providers::{
    CLAUDE, CODEX, COPILOT, Cli, GEMINI, GROK, OPENCODE, RUN_CAP, World, canonical,
};
use crate::support::*;

/// The evaluator contract's floor dimensions (`corral_contract::FLOOR_DIMENSIONS`).
const FLOOR_DIMENSIONS: [&str; 5] = [
    "correctness",
    "completeness",
    "safety",
    "consistency",
    "robustness",
];
const TS: &str = "2026-12-02T10:00:00Z";
const NAME: &str = "it";
/// Passes unless a task file says `broken`.
const CHECK: &str = "! grep -qs broken t*.txt";

/// One task of a test sprint: `t<n>` writes `t<n>.txt`.
struct Task {
    id: &'static str,
    depends_on: &'static [&'static str],
}

const fn task(id: &'static str) -> Task {
    Task {
        id,
        depends_on: &[],
    }
}

/// The sprint file: the tasks, the check, the roles' providers (no evaluator when `None`).
fn sprint_file(
    project: &Path,
    tasks: &[Task],
    check: &str,
    generator: &Cli,
    evaluator: Option<&Cli>,
    max_attempts: u32,
) -> String {
    let mut out = format!(
        "[sprint]\nname = \"{NAME}\"\ncheck = {check:?}\ncheck_timeout_ms = 60000\nmax_rounds = 3\n\
         max_attempts = {max_attempts}\n\n[roles.generator]\nprovider = \"{}\"\n\n",
        generator.id.as_str()
    );
    match evaluator {
        Some(cli) => out.push_str(&format!(
            "[roles.evaluator]\nprovider = \"{}\"\n\n",
            cli.id.as_str()
        )),
        None => out.push_str("[roles.evaluator]\nprovider = \"claude\"\nenabled = false\n\n"),
    }
    for t in tasks {
        out.push_str(&format!(
            "[[tasks]]\nid = \"{id}\"\ntitle = \"Write {id}\"\nprompt = \"Write ok to {}/{id}.txt.\"\n\
             depends_on = {:?}\n\n",
            project.display(),
            t.depends_on,
            id = t.id,
        ));
    }
    out
}

/// A git repository in the project with the sprint file committed (a clean tree).
fn repository(world: &World, file: &str) {
    let project = world.project();
    std::fs::write(project.join("corral-sprint.toml"), file).unwrap();
    std::fs::write(project.join(".gitignore"), ".corral/\n").unwrap();
    git(&project, &["init", "-q", "-b", "main"]);
    git(&project, &["config", "user.email", "it@example.invalid"]);
    git(&project, &["config", "user.name", "it"]);
    git(&project, &["add", "-A"]);
    git(&project, &["commit", "-q", "-m", "start"]);
}

fn complete(subject: &str) -> String {
    json!({"schemaVersion": 1, "signals": [
        {"type": "task-complete", "timestamp": TS},
        {"type": "commit-message", "timestamp": TS, "subject": subject},
        {"type": "learning", "timestamp": TS, "text": format!("learnt while {subject}")},
    ]})
    .to_string()
}

fn blocked(reason: &str) -> String {
    json!({"schemaVersion": 1, "signals": [
        {"type": "task-blocked", "timestamp": TS, "reason": reason}
    ]})
    .to_string()
}

fn evaluation(finding: Option<&str>) -> String {
    let dims: Vec<Value> = FLOOR_DIMENSIONS
        .iter()
        .map(|name| match (finding, *name) {
            (Some(finding), "correctness") => {
                json!({"name": name, "passed": false, "finding": finding})
            }
            _ => json!({"name": name, "passed": true}),
        })
        .collect();
    let status = if finding.is_some() {
        "failed"
    } else {
        "passed"
    };
    json!({"schemaVersion": 1, "signals": [
        {"type": "evaluation", "timestamp": TS, "status": status, "dimensions": dims}
    ]})
    .to_string()
}

/// The steps of one spawn of `cli` in `(task, round, role)`: read the prompt file first when the
/// CLI gets a pointer file, write `files` (name, content; the task prompt names their absolute
/// paths), write the signals, end with a text.
fn spawn_steps(
    cli: &Cli,
    project: &Path,
    key: &SpawnKey,
    files: &[(&str, &str)],
    signals: &str,
) -> Vec<Step> {
    let mut steps = Vec::new();
    if cli.caps().prompt == PromptChannel::PointerFile {
        let read = format!(
            "cat {}/.corral/sprints/{NAME}/implement/{}/rounds/{}/{}/*prompt.md",
            canonical(project).display(),
            key.task,
            key.round,
            key.role.as_str()
        );
        steps.push(Step::tool_use(
            cli.shell_tool,
            corral_test_support::fake_api::shell_tool_input(cli.shell_tool, &read),
        ));
    }
    for (name, content) in files {
        steps.push(Step::write_named_for(cli.bin, *name, *content).unwrap());
    }
    steps.push(Step::write_signals_for(cli.bin, signals).unwrap());
    steps.push(Step::text("Done."));
    steps
}

/// `corral sprint run --json` in the world's project, with its variables and `extra`.
fn sprint_run(world: &World, extra: &[(String, String)]) -> std::process::Output {
    world
        .env
        .corral()
        .envs(world.vars().iter().chain(extra).map(|(k, v)| (k, v)))
        .timeout(RUN_CAP * 3)
        .args(["sprint", "run", "--json"])
        .output()
        .unwrap()
}

/// `corral sprint run` as a child this test can kill.
fn spawn_sprint_run(world: &World) -> std::process::Child {
    let mut cmd = corral_test_support::command(&assert_cmd::cargo::cargo_bin("corral"));
    cmd.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", world.env.home())
        .envs(world.vars().iter().map(|(k, v)| (k, v)))
        .current_dir(world.project())
        .args(["sprint", "run", "--json"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    cmd.spawn().unwrap()
}

fn sprint_dir(world: &World) -> PathBuf {
    world.project().join(".corral/sprints").join(NAME)
}

fn state(world: &World) -> Value {
    serde_json::from_str(&std::fs::read_to_string(sprint_dir(world).join("sprint.json")).unwrap())
        .unwrap()
}

/// `corral sprint status --json`.
fn status(world: &World) -> Value {
    let out = world
        .env
        .corral()
        .args(["sprint", "status", "--json"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        transcript(&world.env, &out)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The subjects and `Corral-Task:` trailers of the sprint branch's commits since `main`.
fn sprint_commits(world: &World) -> Vec<(String, String)> {
    let out = corral_test_support::command(Path::new("git"))
        .current_dir(world.project())
        .args([
            "log",
            "--reverse",
            "--format=%s%x1f%(trailers:key=Corral-Task,valueonly)%x1e",
            &format!("main..corral/{NAME}"),
        ])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .split('\x1e')
        .filter(|r| !r.trim().is_empty())
        .map(|r| {
            let (s, t) = r.trim().split_once('\x1f').unwrap_or((r.trim(), ""));
            (s.to_owned(), t.trim().to_owned())
        })
        .collect()
}

fn key(role: Role, task: &str, round: u32) -> SpawnKey {
    SpawnKey::new(role, task, round)
}

/// The task statuses sprint.json recorded, by id.
fn task_statuses(world: &World) -> Vec<(String, String)> {
    state(world)["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["id"].as_str().unwrap_or_default().to_owned(),
                t["status"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

#[test]
fn three_tasks_a_pass_a_regression_fixed_on_the_resumed_session_and_a_critique() {
    let world = World::new(&CLAUDE, |project| {
        let g = |t: &str, r: u32, body: &str, subject: &str| {
            spawn_steps(
                &CLAUDE,
                project,
                &key(Role::Generator, t, r),
                &[(&format!("{t}.txt"), body)],
                &complete(subject),
            )
        };
        let e = |t: &str, r: u32, finding: Option<&str>| {
            spawn_steps(
                &CLAUDE,
                project,
                &key(Role::Evaluator, t, r),
                &[],
                &evaluation(finding),
            )
        };
        Scenario::default()
            .with_round(Role::Generator, "t1", 1, g("t1", 1, "ok", "Write t1"))
            .with_round(Role::Evaluator, "t1", 1, e("t1", 1, None))
            .with_round(Role::Generator, "t2", 1, g("t2", 1, "broken", "Write t2"))
            .with_round(Role::Generator, "t2", 2, g("t2", 2, "ok", "Write t2 again"))
            .with_round(Role::Evaluator, "t2", 2, e("t2", 2, None))
            .with_round(Role::Generator, "t3", 1, g("t3", 1, "ok?", "Write t3"))
            .with_round(
                Role::Evaluator,
                "t3",
                1,
                e("t3", 1, Some("CRITIQUE-T3: t3.txt must say ok, not ok?")),
            )
            .with_round(Role::Generator, "t3", 2, g("t3", 2, "ok", "Write t3 right"))
            .with_round(Role::Evaluator, "t3", 2, e("t3", 2, None))
    });
    let file = sprint_file(
        &world.project(),
        &[task("t1"), task("t2"), task("t3")],
        CHECK,
        &CLAUDE,
        Some(&CLAUDE),
        2,
    );
    repository(&world, &file);
    let out = sprint_run(&world, &[]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        transcript(&world.env, &out)
    );
    assert_eq!(world.api.steps_left(), 0, "every scripted step was used");

    // One commit per task, from the commit-message signal, with its trailer.
    assert_eq!(
        sprint_commits(&world),
        [
            ("Write t1".to_owned(), "t1".to_owned()),
            ("Write t2 again".to_owned(), "t2".to_owned()),
            ("Write t3 right".to_owned(), "t3".to_owned()),
        ]
    );
    // Task 2's round 1 regressed: its patch is kept and round 2 resumed the same session, which
    // re-sent round 1's conversation.
    assert!(exists(
        &sprint_dir(&world).join("implement/t2/rounds/1/regressed.patch")
    ));
    let r1 = world.api.spawn_requests(&key(Role::Generator, "t2", 1));
    let r2 = world.api.spawn_requests(&key(Role::Generator, "t2", 2));
    assert!(!r2.is_empty(), "{:#?}", world.api.model_requests());
    assert!(r2[0].history, "round 2 carries round 1's turns");
    assert!(
        r2[0]
            .earlier_spawns
            .contains(&key(Role::Generator, "t2", 1)),
        "{:?}",
        r2[0].earlier_spawns
    );
    assert_eq!(r1[0].session_id(), r2[0].session_id(), "the same session");
    // Never the evaluator's session.
    assert!(
        r2[0]
            .earlier_spawns
            .iter()
            .all(|k| k.role == Role::Generator),
        "{:?}",
        r2[0].earlier_spawns
    );
    // Task 3's critique is in round 2's prompt, and evaluation.md was rendered.
    let r2 = world.api.spawn_requests(&key(Role::Generator, "t3", 2));
    assert!(
        r2[0]
            .last_user_text
            .as_deref()
            .unwrap_or_default()
            .contains("CRITIQUE-T3"),
        "{:?}",
        r2[0].last_user_text
    );
    assert!(exists(
        &sprint_dir(&world).join("implement/t3/rounds/1/evaluator/evaluation.md")
    ));
    for (role, round) in [(Role::Generator, 1), (Role::Evaluator, 1)] {
        let dir = sprint_dir(&world).join(format!("implement/t1/rounds/{round}/{}", role.as_str()));
        for f in [
            "prompt.md",
            "signals.json",
            "session-id.txt",
            "role-meta.json",
        ] {
            assert!(exists(&dir.join(f)), "{}/{f}", dir.display());
        }
    }
    let learnings = std::fs::read_to_string(sprint_dir(&world).join("learnings.ndjson")).unwrap();
    assert_eq!(learnings.lines().count(), 3, "{learnings}");
    let s = status(&world);
    assert!(s.to_string().contains("t3"), "{s}");
    // Tokens and cost rolled up per provider and for the sprint: every spawn ran on Claude Code.
    let claude = &s["rollUp"]["byProvider"]["claude"];
    assert!(claude["input"].as_u64().is_some_and(|n| n > 0), "{s}");
    assert_eq!(s["rollUp"]["total"], *claude, "{s}");
}

#[test]
fn a_blocked_task_skips_its_dependents_and_the_others_go_on() {
    let world = World::new(&CLAUDE, |project| {
        Scenario::default()
            .with_round(
                Role::Generator,
                "t1",
                1,
                spawn_steps(
                    &CLAUDE,
                    project,
                    &key(Role::Generator, "t1", 1),
                    &[],
                    &blocked("no"),
                ),
            )
            .with_round(
                Role::Generator,
                "t3",
                1,
                spawn_steps(
                    &CLAUDE,
                    project,
                    &key(Role::Generator, "t3", 1),
                    &[("t3.txt", "ok")],
                    &complete("Write t3"),
                ),
            )
    });
    let tasks = [
        task("t1"),
        Task {
            id: "t2",
            depends_on: &["t1"],
        },
        task("t3"),
    ];
    repository(
        &world,
        &sprint_file(&world.project(), &tasks, CHECK, &CLAUDE, None, 2),
    );
    let out = sprint_run(&world, &[]);
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        transcript(&world.env, &out)
    );
    assert_eq!(
        task_statuses(&world),
        [
            ("t1".to_owned(), "blocked".to_owned()),
            ("t2".to_owned(), "skipped".to_owned()),
            ("t3".to_owned(), "done".to_owned()),
        ]
    );
    assert_eq!(
        sprint_commits(&world),
        [("Write t3".to_owned(), "t3".to_owned())]
    );
    assert!(
        world
            .api
            .spawn_requests(&key(Role::Generator, "t2", 1))
            .is_empty()
    );
}

#[test]
fn a_regression_with_no_attempt_left_blocks_with_the_patch_saved_and_the_tree_reset() {
    let world = World::new(&CLAUDE, |project| {
        Scenario::default().with_round(
            Role::Generator,
            "t1",
            1,
            spawn_steps(
                &CLAUDE,
                project,
                &key(Role::Generator, "t1", 1),
                &[("t1.txt", "broken")],
                &complete("Write t1"),
            ),
        )
    });
    repository(
        &world,
        &sprint_file(&world.project(), &[task("t1")], CHECK, &CLAUDE, None, 1),
    );
    let out = sprint_run(&world, &[]);
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        transcript(&world.env, &out)
    );
    assert_eq!(
        task_statuses(&world),
        [("t1".to_owned(), "blocked".to_owned())]
    );
    let patch =
        std::fs::read_to_string(sprint_dir(&world).join("implement/t1/rounds/1/regressed.patch"))
            .unwrap();
    assert!(patch.contains("broken"), "{patch}");
    assert!(
        !exists(&world.project().join("t1.txt")),
        "the tree was reset"
    );
    assert!(sprint_commits(&world).is_empty());
}

#[test]
fn a_check_broken_before_the_task_is_not_blamed_on_the_agent() {
    let world = World::new(&CLAUDE, |project| {
        Scenario::default().with_round(
            Role::Generator,
            "t1",
            1,
            spawn_steps(
                &CLAUDE,
                project,
                &key(Role::Generator, "t1", 1),
                &[("t1.txt", "ok")],
                &complete("Write t1"),
            ),
        )
    });
    repository(
        &world,
        &sprint_file(&world.project(), &[task("t1")], "false", &CLAUDE, None, 2),
    );
    let out = sprint_run(&world, &[]);
    let text = transcript(&world.env, &out);
    assert!(
        text.contains("baseline-broken") || text.contains("baseline_broken"),
        "{text}"
    );
    assert!(
        !exists(&sprint_dir(&world).join("implement/t1/rounds/1/regressed.patch")),
        "not a regression"
    );
}

/// Sends `signal` to `corral sprint run` once `(role, t1, 1)` has asked the model (its first
/// step hangs): SIGKILL, then reaps the orphaned CLI; SIGINT (Ctrl-C), and checks the sprint
/// stopped as cancelled (exit 130). Then reruns, and checks the round resumed its session and
/// one commit was made.
fn killed_during(role: Role, signal: Signal) {
    let world = World::new(&CLAUDE, |project| {
        let mut g = spawn_steps(
            &CLAUDE,
            project,
            &key(Role::Generator, "t1", 1),
            &[("t1.txt", "ok")],
            &complete("Write t1"),
        );
        let mut e = spawn_steps(
            &CLAUDE,
            project,
            &key(Role::Evaluator, "t1", 1),
            &[],
            &evaluation(None),
        );
        match role {
            Role::Generator => g.insert(0, Step::HangBeforeHeaders),
            Role::Evaluator => e.insert(0, Step::HangBeforeHeaders),
        }
        Scenario::default()
            .with_round(Role::Generator, "t1", 1, g)
            .with_round(Role::Evaluator, "t1", 1, e)
    });
    repository(
        &world,
        &sprint_file(
            &world.project(),
            &[task("t1")],
            CHECK,
            &CLAUDE,
            Some(&CLAUDE),
            2,
        ),
    );
    let mut child = spawn_sprint_run(&world);
    let hung = key(role, "t1", 1);
    // Ends early when the sprint ended instead (its round 1 failed before asking the model, say):
    // the engine's record of each spawn then says how it ended.
    let mut ended = None;
    let asked_in_time = wait_until(Duration::from_secs(300), || {
        ended = child.try_wait().unwrap();
        ended.is_some() || !world.api.spawn_requests(&hung).is_empty()
    });
    assert!(
        asked_in_time && ended.is_none(),
        "{role:?} round 1 never asked the model (sprint ended: {ended:?})\n{}\nrequests: {:#?}",
        spawn_records(&world),
        world.api.requests()
    );
    let spawn_dir = sprint_dir(&world).join(format!("implement/t1/rounds/1/{}", role.as_str()));
    // Claude Code names its session on its first line, and asks the model right after: the kill
    // comes once Corral has recorded the session (session-id.txt, and session.json with its model
    // and directory, which a crash resume must match). Killed before that, a rerun cannot know
    // the session and rightly starts the round cold.
    assert!(
        wait_until(Duration::from_secs(60), || exists(
            &spawn_dir.join("session-id.txt")
        ) && exists(
            &spawn_dir.join("session.json")
        )),
        "the session was never recorded in {}",
        spawn_dir.display()
    );
    // And once Claude Code has kept the session it would resume (its transcript under
    // `~/.claude/projects/`): killed before it wrote one, there is no session to resume, and the
    // rerun's resume rightly falls back to the full brief in a new session.
    let session = std::fs::read_to_string(spawn_dir.join("session-id.txt")).unwrap();
    let transcript_name = format!("{}.jsonl", session.trim());
    let projects = world.env.home().join(".claude/projects");
    assert!(
        wait_until(Duration::from_secs(60), || has_file_named(
            &projects,
            &transcript_name
        )),
        "Claude Code never kept session {} under {}",
        session.trim(),
        projects.display()
    );
    let orphans = spawned_pids(&spawn_dir);
    corral_test_support::send_signal(child.id(), signal);
    let code = child.wait().unwrap().code();
    if signal == Signal::SIGKILL {
        for pid in orphans {
            corral_test_support::send_signal(pid, Signal::SIGKILL);
        }
    } else {
        // Cancelled: the CLI's tree ended by corral, the sprint stopped at this step.
        assert_eq!(code, Some(130), "Ctrl-C ends the sprint as cancelled");
        let s = state(&world);
        assert_eq!(s["tasks"][0]["status"], "running", "{s}");
    }
    let first_session = world.api.spawn_requests(&hung)[0]
        .session_id()
        .map(str::to_owned);

    let out = sprint_run(&world, &[]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        transcript(&world.env, &out)
    );
    assert_eq!(
        sprint_commits(&world),
        [("Write t1".to_owned(), "t1".to_owned())]
    );
    let asked = world.api.spawn_requests(&hung);
    assert!(asked.len() >= 2, "{asked:#?}");
    if role == Role::Generator {
        assert_eq!(
            asked.last().unwrap().session_id().map(str::to_owned),
            first_session,
            "the generator's session was resumed"
        );
    }
    // No round counted twice.
    assert!(!exists(&sprint_dir(&world).join("implement/t1/rounds/2")));
}

/// The engine's records of every spawn of the sprint so far, one line each, without the CLI's
/// own stream lines: for a failure message that must say how a spawn ended.
fn spawn_records(world: &World) -> String {
    let mut dirs = Vec::new();
    let mut todo = vec![sprint_dir(world).join("implement")];
    while let Some(dir) = todo.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                todo.push(path);
            } else if entry.file_name() == "events.jsonl" {
                dirs.push(dir.clone());
            }
        }
    }
    dirs.sort();
    let mut out = String::new();
    for dir in dirs {
        out.push_str(&format!("{}:\n", dir.display()));
        for record in log(&dir).iter().filter(|r| r["kind"] != "agent") {
            let line = record.to_string();
            let cut: String = line.chars().take(600).collect();
            out.push_str(&format!("  {cut}\n"));
        }
    }
    out
}

/// Whether a file called `name` is in `dir` or one level below it.
fn has_file_named(dir: &Path, name: &str) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    entries.flatten().any(|e| {
        let path = e.path();
        e.file_name() == name || (path.is_dir() && path.join(name).is_file())
    })
}

#[test]
fn kill_9_during_a_generator_round_then_a_rerun_resumes_the_session() {
    killed_during(Role::Generator, Signal::SIGKILL);
}

#[test]
fn kill_9_during_an_evaluator_round_then_a_rerun_finishes_with_one_commit() {
    killed_during(Role::Evaluator, Signal::SIGKILL);
}

#[test]
fn ctrl_c_during_a_generator_round_exits_130_and_a_rerun_resumes_the_session() {
    killed_during(Role::Generator, Signal::SIGINT);
}

/// Claude Code's variables added to a world built for another CLI, so that one sprint can use
/// both against the same fake API.
fn claude_vars(world: &World) -> Vec<(String, String)> {
    let mut vars = vec![
        (
            "CORRAL_PROVIDERS__CLAUDE__COMMAND".to_owned(),
            require_cli("claude").display().to_string(),
        ),
        ("ANTHROPIC_API_KEY".to_owned(), "sk-test".to_owned()),
        ("ANTHROPIC_BASE_URL".to_owned(), world.api.url()),
    ];
    if corral_test_support::is_root() {
        vars.push(("IS_SANDBOX".to_owned(), "1".to_owned()));
    }
    vars
}

#[test]
fn the_generator_on_claude_and_the_evaluator_on_codex() {
    let world = World::new(&CODEX, |project| {
        Scenario::default()
            .with_round(
                Role::Generator,
                "t1",
                1,
                spawn_steps(
                    &CLAUDE,
                    project,
                    &key(Role::Generator, "t1", 1),
                    &[("t1.txt", "ok")],
                    &complete("Write t1"),
                ),
            )
            .with_round(
                Role::Evaluator,
                "t1",
                1,
                spawn_steps(
                    &CODEX,
                    project,
                    &key(Role::Evaluator, "t1", 1),
                    &[],
                    &evaluation(None),
                ),
            )
    });
    repository(
        &world,
        &sprint_file(
            &world.project(),
            &[task("t1")],
            CHECK,
            &CLAUDE,
            Some(&CODEX),
            2,
        ),
    );
    let out = sprint_run(&world, &claude_vars(&world));
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        transcript(&world.env, &out)
    );
    let paths = |k: &SpawnKey| -> Vec<String> {
        world
            .api
            .spawn_requests(k)
            .iter()
            .map(|r| r.path.clone())
            .collect()
    };
    assert!(
        paths(&key(Role::Generator, "t1", 1))
            .iter()
            .all(|p| p.starts_with("/v1/messages")),
        "the generator spoke Anthropic"
    );
    assert!(
        paths(&key(Role::Evaluator, "t1", 1))
            .iter()
            .all(|p| p.starts_with("/v1/responses")),
        "the evaluator spoke Responses"
    );
    assert_eq!(
        sprint_commits(&world),
        [("Write t1".to_owned(), "t1".to_owned())]
    );
}

/// The settings of a native run the user consented to (the default sandbox would refuse the
/// act under test outright).
fn native_with_consent() -> [(String, String); 2] {
    [
        ("CORRAL_SANDBOX__BACKEND".to_owned(), "native".to_owned()),
        (
            "CORRAL_SANDBOX__ALLOW_DEGRADED_NATIVE".to_owned(),
            "true".to_owned(),
        ),
    ]
}

/// Task t1's generator round 1 on Claude Code: `before`, then it writes `t1.txt` and reports the
/// task complete.
fn t1_round_after(project: &Path, mut before: Vec<Step>) -> Scenario {
    before.extend(spawn_steps(
        &CLAUDE,
        project,
        &key(Role::Generator, "t1", 1),
        &[("t1.txt", "ok")],
        &complete("Write t1"),
    ));
    Scenario::default().with_round(Role::Generator, "t1", 1, before)
}

/// [`t1_round_after`] a Bash tool call running `command`.
fn bash_then_t1(project: &Path, command: &str, description: &str) -> Scenario {
    t1_round_after(
        project,
        vec![Step::tool_use(
            "Bash",
            json!({"command": command, "description": description}),
        )],
    )
}

#[test]
fn an_agent_that_checks_out_another_branch_is_named_in_the_status() {
    let world = World::new(&CLAUDE, |project| {
        bash_then_t1(project, "git checkout -q -b elsewhere", "switch")
    });
    repository(
        &world,
        &sprint_file(&world.project(), &[task("t1")], CHECK, &CLAUDE, None, 2),
    );
    // The sandbox keeps the repository's `.git` read-only, so a sandboxed agent cannot switch
    // branches at all: natively (degraded, on the user's word) it can, and the sprint must see it.
    let out = sprint_run(&world, &native_with_consent());
    let text = transcript(&world.env, &out);
    assert_eq!(out.status.code(), Some(3), "the task is blocked: {text}");
    let s = status(&world).to_string();
    assert!(s.contains("switched") && s.contains("elsewhere"), "{s}");
    let head = corral_test_support::command(Path::new("git"))
        .current_dir(world.project())
        .args(["branch", "--show-current"])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&head.stdout).trim(),
        format!("corral/{NAME}"),
        "the sprint's branch is checked out again"
    );
    assert!(sprint_commits(&world).is_empty());
    assert!(exists(
        &sprint_dir(&world).join("implement/t1/blocked.patch")
    ));
}

/// Under the native backend (degraded, on the user's word) nothing stops a generator writing
/// outside its work tree, and no git snapshot of the work tree sees the home directory, `/tmp`
/// or a sibling checkout: the write watch does, and the sprint names each write in the task's
/// warnings, as the spawn's `run.json` lists it. What Claude Code itself writes (its state, its
/// temporary files) is not named.
#[test]
fn a_native_generator_writing_outside_its_work_tree_is_named_with_each_path() {
    let tmp_name = format!(
        "corral-it-stray-{}-{}",
        std::process::id(),
        fastrand_suffix()
    );
    let tmp_stray = PathBuf::from("/tmp").join(&tmp_name);
    let world = World::new(&CLAUDE, |project| {
        let sibling = project.parent().unwrap().join("sibling");
        std::fs::create_dir_all(&sibling).unwrap();
        std::fs::write(sibling.join("kept"), "theirs\n").unwrap();
        let command = format!(
            "echo home > \"$HOME/stray-home.txt\" && echo tmp > {tmp} && echo mine > {sib}/kept \
             && rm {sib}/kept && mkdir {sib}/made",
            tmp = tmp_stray.display(),
            sib = sibling.display(),
        );
        bash_then_t1(project, &command, "write elsewhere")
    });
    repository(
        &world,
        &sprint_file(&world.project(), &[task("t1")], CHECK, &CLAUDE, None, 2),
    );
    let out = sprint_run(&world, &native_with_consent());
    let _ = std::fs::remove_file(&tmp_stray);
    let text = transcript(&world.env, &out);
    assert_eq!(
        out.status.code(),
        Some(0),
        "the write does not block the task: {text}"
    );
    let home = canonical(&world.env.home());
    let sibling = canonical(&world.project().parent().unwrap().join("sibling"));
    let mut expected = vec![
        format!("added {}", home.join("stray-home.txt").display()),
        format!("added {}", tmp_stray.display()),
        format!("modified {}", sibling.join("kept").display()),
        format!("deleted {}", sibling.join("kept").display()),
        format!("added {}", sibling.join("made").display()),
    ];
    expected.sort();
    let run = sprint_dir(&world).join("implement/t1/rounds/1/generator/run.json");
    let record: Value = serde_json::from_str(&std::fs::read_to_string(&run).unwrap()).unwrap();
    let mut listed: Vec<String> = record["attestation"]["strayWrites"]
        .as_array()
        .unwrap_or_else(|| panic!("no stray_writes in {record}"))
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect();
    listed.sort();
    assert_eq!(listed, expected, "{record}");
    let s = status(&world).to_string();
    for change in &expected {
        assert!(
            s.contains(change.as_str()),
            "{change} not in the status: {s}"
        );
    }
    assert!(s.contains("wrote outside the paths it may write"), "{s}");
    assert_eq!(
        sprint_commits(&world),
        [("Write t1".to_owned(), "t1".to_owned())]
    );
}

fn fastrand_suffix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::from(d.subsec_nanos()))
}

#[test]
fn rate_limit_retries_used_up_pause_with_exit_4_and_a_rerun_finishes() {
    let world = World::new(&CLAUDE, |project| {
        t1_round_after(
            project,
            vec![Step::rate_limited(1); CLAUDE.requests_per_failed_call],
        )
    });
    repository(
        &world,
        &sprint_file(&world.project(), &[task("t1")], CHECK, &CLAUDE, None, 2),
    );
    let no_retries = [(
        "CORRAL_RETRY__RATE_LIMIT_RETRIES".to_owned(),
        "0".to_owned(),
    )];
    let out = sprint_run(&world, &no_retries);
    assert_eq!(
        out.status.code(),
        Some(4),
        "{}",
        transcript(&world.env, &out)
    );
    assert!(sprint_commits(&world).is_empty());
    let out = sprint_run(&world, &no_retries);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        transcript(&world.env, &out)
    );
    assert_eq!(
        sprint_commits(&world),
        [("Write t1".to_owned(), "t1".to_owned())]
    );
}

/// A generator whose first request hangs before the API's headers, under a short wall clock:
/// Corral kills it at the limit, and the sprint runs the same round's spawn again, resuming its
/// session, without counting a round (a transient failure, [sprint] transient_retries). The
/// task is done in round 1, and its record names the failure and its class.
#[test]
fn a_spawn_killed_at_the_wall_clock_is_run_again_without_counting_a_round() {
    let world = World::new(&CLAUDE, |project| {
        t1_round_after(project, vec![Step::HangBeforeHeaders])
    });
    repository(
        &world,
        &sprint_file(&world.project(), &[task("t1")], CHECK, &CLAUDE, None, 2),
    );
    // Long enough for Claude Code to start and finish a round on a loaded machine, short
    // enough that the hang is cut well before its own API timeout (10 min).
    let wall = [("CORRAL_RUN__WALL_TIMEOUT_MS".to_owned(), "30000".to_owned())];
    let out = sprint_run(&world, &wall);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        transcript(&world.env, &out)
    );
    let state = state(&world);
    let t1 = &state["tasks"][0];
    assert_eq!(t1["status"], "done", "{t1}");
    assert_eq!(t1["round"], 1, "no round was counted: {t1}");
    let failures = t1["failures"].as_array().unwrap();
    assert_eq!(failures.len(), 1, "{t1}");
    assert_eq!(failures[0]["class"], "transient", "{t1}");
    assert_eq!(failures[0]["outcome"], "wall-timeout", "{t1}");
    assert_eq!(failures[0]["role"], "generator", "{t1}");
    // The rerun resumed the session the killed spawn had started.
    let requests = world.api.spawn_requests(&key(Role::Generator, "t1", 1));
    assert!(requests.len() >= 2, "{requests:#?}");
    assert!(
        requests[1..].iter().all(|r| r.history),
        "the rerun resumed the session: {requests:#?}"
    );
    assert_eq!(
        sprint_commits(&world),
        [("Write t1".to_owned(), "t1".to_owned())]
    );
}

/// Without the preflight, an evaluator model the API does not serve is met at t1's first
/// review: a permanent failure, so the sprint stops there with exit 8 and the fix, and t2 is
/// left pending instead of spending its rounds on the same refusal.
#[test]
fn an_unknown_evaluator_model_met_mid_sprint_stops_it_with_exit_8_before_the_next_task() {
    let world = World::new(&CLAUDE, |project| {
        Scenario::default()
            .with_round(
                Role::Generator,
                "t1",
                1,
                spawn_steps(
                    &CLAUDE,
                    project,
                    &key(Role::Generator, "t1", 1),
                    &[("t1.txt", "ok")],
                    &complete("Write t1"),
                ),
            )
            .with_models(["fake-model"])
    });
    let file = sprint_file(
        &world.project(),
        &[task("t1"), task("t2")],
        CHECK,
        &CLAUDE,
        Some(&CLAUDE),
        2,
    )
    .replacen(
        "[roles.generator]\nprovider = \"claude\"\n",
        "[roles.generator]\nprovider = \"claude\"\nmodel = \"fake-model\"\n",
        1,
    )
    .replacen(
        "[roles.evaluator]\nprovider = \"claude\"\n",
        "[roles.evaluator]\nprovider = \"claude\"\nmodel = \"fake-modle\"\n",
        1,
    );
    assert!(file.contains("fake-modle"), "{file}");
    repository(&world, &file);
    let out = world
        .env
        .corral()
        .envs(world.vars().iter().map(|(k, v)| (k, v)))
        .timeout(RUN_CAP * 3)
        .args(["sprint", "run", "--json", "--no-preflight"])
        .output()
        .unwrap();
    let text = transcript(&world.env, &out);
    assert_eq!(out.status.code(), Some(8), "{text}");
    let state = state(&world);
    let t1 = &state["tasks"][0];
    assert_eq!(t1["status"], "running", "{t1}");
    assert_eq!(t1["failures"][0]["class"], "permanent", "{t1}");
    assert_eq!(t1["failures"][0]["role"], "evaluator", "{t1}");
    assert_eq!(t1["failures"][0]["outcome"], "model-unavailable", "{t1}");
    let warning = t1["warnings"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .to_string();
    assert!(
        warning.contains("fake-modle")
            && warning.contains("fix: set `model` under [roles.evaluator] in corral-sprint.toml"),
        "{warning}"
    );
    assert_eq!(state["tasks"][1]["status"], "pending", "{state}");
    assert!(sprint_commits(&world).is_empty());
    // The generator's round ran; the review is where it stopped.
    assert_eq!(
        world
            .api
            .spawn_requests(&key(Role::Generator, "t1", 1))
            .len(),
        3,
        "{text}"
    );
    assert!(
        world
            .api
            .spawn_requests(&key(Role::Generator, "t2", 1))
            .is_empty()
    );
}

/// A one-task sprint with `cli` as the generator and no evaluator.
fn one_task_with(cli: &'static Cli) {
    let world = World::new(cli, |project| {
        Scenario::default().with_round(
            Role::Generator,
            "t1",
            1,
            spawn_steps(
                cli,
                project,
                &key(Role::Generator, "t1", 1),
                &[("t1.txt", "ok")],
                &complete("Write t1"),
            ),
        )
    });
    repository(
        &world,
        &sprint_file(&world.project(), &[task("t1")], CHECK, cli, None, 2),
    );
    let out = sprint_run(&world, &[]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        transcript(&world.env, &out)
    );
    assert_eq!(
        sprint_commits(&world),
        [("Write t1".to_owned(), "t1".to_owned())]
    );
    let meta: Value = serde_json::from_str(
        &std::fs::read_to_string(
            sprint_dir(&world).join("implement/t1/rounds/1/generator/role-meta.json"),
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(meta["provider"], cli.id.as_str(), "{meta}");
}

#[test]
fn one_task_with_claude_as_the_generator() {
    one_task_with(&CLAUDE);
}

#[test]
fn one_task_with_codex_as_the_generator() {
    one_task_with(&CODEX);
}

#[test]
fn one_task_with_copilot_as_the_generator() {
    one_task_with(&COPILOT);
}

#[test]
fn one_task_with_opencode_as_the_generator() {
    one_task_with(&OPENCODE);
}

#[test]
fn one_task_with_grok_as_the_generator() {
    one_task_with(&GROK);
}

/// Gemini as both roles: the evaluator runs read-only, and still writes its `signals.json` in
/// the run directory outside the work tree (Gemini's file tools reach it through
/// `--include-directories`; its read-only `plan` mode would refuse it).
#[test]
fn one_task_with_gemini_as_the_generator_and_the_evaluator() {
    let world = World::new(&GEMINI, |project| {
        Scenario::default()
            .with_round(
                Role::Generator,
                "t1",
                1,
                spawn_steps(
                    &GEMINI,
                    project,
                    &key(Role::Generator, "t1", 1),
                    &[("t1.txt", "ok")],
                    &complete("Write t1"),
                ),
            )
            .with_round(
                Role::Evaluator,
                "t1",
                1,
                spawn_steps(
                    &GEMINI,
                    project,
                    &key(Role::Evaluator, "t1", 1),
                    &[],
                    &evaluation(None),
                ),
            )
    });
    repository(
        &world,
        &sprint_file(
            &world.project(),
            &[task("t1")],
            CHECK,
            &GEMINI,
            Some(&GEMINI),
            2,
        ),
    );
    let out = sprint_run(&world, &[]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        transcript(&world.env, &out)
    );
    assert!(
        world
            .api
            .spawn_requests(&key(Role::Evaluator, "t1", 1))
            .iter()
            .any(|r| r.path.starts_with("/v1beta/models/")),
        "the evaluator spoke the Gemini API"
    );
    assert_eq!(
        sprint_commits(&world),
        [("Write t1".to_owned(), "t1".to_owned())]
    );
}

/// A Gemini evaluator that tries to change the work tree it reviews: Gemini's read-only mode
/// cannot be used (it refuses `signals.json` too), so the evaluator runs in YOLO mode with
/// `write_file` and `run_shell_command` available, and what holds is the sandbox, which mounts
/// the work tree read-only for the evaluator. Its `write_file` into the project and its shell's
/// `echo >` both fail (the shell's error kept in the evaluator's own run directory, the one place
/// it may write), its verdict still counts, and the commit holds the generator's change alone.
#[test]
fn a_gemini_evaluator_writing_in_the_work_tree_is_refused_and_its_verdict_stands() {
    let evaluator_dir = |project: &Path| {
        canonical(project)
            .join(".corral/sprints")
            .join(NAME)
            .join("implement/t1/rounds/1/evaluator")
    };
    let world = World::new(&GEMINI, |project| {
        let tree = canonical(project);
        let shell = format!(
            "(echo evil > '{}') 2> '{}'; true",
            tree.join("evil-shell.txt").display(),
            evaluator_dir(project).join("shell-write.log").display()
        );
        let mut evaluator = vec![
            Step::tool_use(
                "write_file",
                corral_test_support::fake_api::write_tool_input(
                    "write_file",
                    &tree.join("evil-tool.txt").display().to_string(),
                    "evil\n",
                ),
            ),
            Step::tool_use(
                "run_shell_command",
                shell_tool_input("run_shell_command", &shell),
            ),
        ];
        evaluator.extend(spawn_steps(
            &GEMINI,
            project,
            &key(Role::Evaluator, "t1", 1),
            &[],
            &evaluation(None),
        ));
        Scenario::default()
            .with_round(
                Role::Generator,
                "t1",
                1,
                spawn_steps(
                    &GEMINI,
                    project,
                    &key(Role::Generator, "t1", 1),
                    &[("t1.txt", "ok")],
                    &complete("Write t1"),
                ),
            )
            .with_round(Role::Evaluator, "t1", 1, evaluator)
    });
    repository(
        &world,
        &sprint_file(
            &world.project(),
            &[task("t1")],
            CHECK,
            &GEMINI,
            Some(&GEMINI),
            2,
        ),
    );
    let out = sprint_run(&world, &[]);
    let text = transcript(&world.env, &out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    let project = world.project();
    for evil in ["evil-tool.txt", "evil-shell.txt"] {
        assert!(
            !exists(&project.join(evil)),
            "the evaluator wrote {evil} in the work tree: {text}"
        );
    }
    // The shell ran, and the sandbox refused its write.
    let said = std::fs::read_to_string(evaluator_dir(&project).join("shell-write.log"))
        .unwrap_or_else(|e| panic!("the evaluator's shell never ran ({e}): {text}"));
    assert!(
        said.contains("Read-only file system"),
        "the shell said: {said:?}"
    );
    // The write_file call was made and answered: the evaluator went on to its verdict.
    let steps: Vec<String> = world
        .api
        .spawn_requests(&key(Role::Evaluator, "t1", 1))
        .iter()
        .filter_map(|r| r.step.clone())
        .collect();
    assert!(steps.len() >= 3, "the evaluator's steps: {steps:?}");
    assert_eq!(
        sprint_commits(&world),
        [("Write t1".to_owned(), "t1".to_owned())]
    );
    let files = corral_test_support::command(Path::new("git"))
        .current_dir(&project)
        .args([
            "show",
            "--name-only",
            "--format=",
            &format!("corral/{NAME}"),
        ])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&files.stdout).trim(),
        "t1.txt",
        "the commit holds the generator's change alone"
    );
}

#[test]
fn a_terminal_shows_a_status_line_per_running_task_over_the_finished_steps() {
    const ROWS: u16 = 60;
    const COLUMNS: u16 = 120;
    let world = World::new(&CLAUDE, |project| {
        let mut steps = vec![Step::tool_use(
            "Bash",
            json!({"command": "sleep 2", "description": "wait a little"}),
        )];
        steps.extend(spawn_steps(
            &CLAUDE,
            project,
            &key(Role::Generator, "t1", 1),
            &[("t1.txt", "ok")],
            &complete("Write t1"),
        ));
        Scenario::default().with_round(Role::Generator, "t1", 1, steps)
    });
    repository(
        &world,
        &sprint_file(&world.project(), &[task("t1")], CHECK, &CLAUDE, None, 2),
    );
    let mut cmd = corral_test_support::command(&assert_cmd::cargo::cargo_bin("corral"));
    cmd.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", world.env.home())
        .env("TERM", "xterm")
        .envs(world.vars().iter().map(|(k, v)| (k, v)))
        .current_dir(world.project())
        .args(["sprint", "run"]);
    let screen = corral_test_support::run_on_pty_sized(cmd, COLUMNS, ROWS, RUN_CAP * 2).unwrap();
    let raw = &screen.output;
    assert!(screen.status.success(), "{raw}");
    // While the generator ran: its task's status line, with the role, the provider and what
    // the agent did.
    assert!(
        raw.contains("▶ t1  round 1  generator  claude"),
        "no status line: {raw:?}"
    );
    assert!(raw.contains("Bash sleep 2"), "the activity: {raw:?}");
    // What is left on the screen: the finished steps and the summary, no status row.
    let mut terminal = vt100::Parser::new(ROWS, COLUMNS, 0);
    terminal.process(raw.as_bytes());
    let rows = terminal.screen().contents();
    assert!(
        !rows.lines().any(|row| row.contains('▶')),
        "a stale status row:\n{rows}"
    );
    for line in [
        "t1  round 1  generator   succeeded, signals valid",
        "t1  done, commit ",
        "sprint it: done; 1 of 1 tasks done (exit 0)",
    ] {
        assert!(rows.contains(line), "{line:?} missing in\n{rows}");
    }
}

#[test]
fn the_commits_carry_the_identity_of_the_users_global_git_config() {
    let world = World::new(&CLAUDE, |project| {
        Scenario::default().with_round(
            Role::Generator,
            "t1",
            1,
            spawn_steps(
                &CLAUDE,
                project,
                &key(Role::Generator, "t1", 1),
                &[("t1.txt", "ok")],
                &complete("Write t1"),
            ),
        )
    });
    // No identity in the repository: only the user's ~/.gitconfig has one, which the
    // supervised git (global config neutralised) cannot read by itself.
    let project = world.project();
    std::fs::write(
        project.join("corral-sprint.toml"),
        sprint_file(&project, &[task("t1")], CHECK, &CLAUDE, None, 2),
    )
    .unwrap();
    std::fs::write(project.join(".gitignore"), ".corral/\n").unwrap();
    git(&project, &["init", "-q", "-b", "main"]);
    git(&project, &["add", "-A"]);
    git(&project, &["commit", "-q", "-m", "start"]);
    std::fs::write(
        world.env.home().join(".gitconfig"),
        "[user]\n\tname = Global Person\n\temail = global@example.invalid\n",
    )
    .unwrap();
    let out = sprint_run(&world, &[]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        transcript(&world.env, &out)
    );
    let author = corral_test_support::command(Path::new("git"))
        .current_dir(&project)
        .args([
            "log",
            "-1",
            "--format=%an <%ae> / %cn <%ce>",
            &format!("corral/{NAME}"),
        ])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&author.stdout).trim(),
        "Global Person <global@example.invalid> / Global Person <global@example.invalid>"
    );
}

/// `--jobs 2` through the real Claude Code: two independent tasks run at the same time, each in
/// its own worktree, and each lands as its own commit on the sprint's branch. The prompts name
/// their files relative to the working directory, as a sprint file for a parallel run must (an
/// absolute path into the project would write past the worktree); the fake model resolves the
/// name against the worktree the CLI runs in, as a model reads its working directory from the
/// CLI's system prompt, and the test checks that the file landed there and not in the project.
#[test]
fn two_independent_tasks_run_at_once_in_their_worktrees_with_jobs_2() {
    let worktree = |project: &Path, id: &str| {
        canonical(project)
            .join(".corral/sprints")
            .join(NAME)
            .join("worktrees")
            .join(id)
    };
    // t1's agent also tries to write in the project root, outside its worktree, from its shell;
    // what the shell said is kept in the worktree, so that the attempt is seen to have run.
    let escape = |project: &Path| {
        let command = format!(
            "(echo escaped > '{}') 2> '{}'; true",
            canonical(project).join("escaped-t1.txt").display(),
            worktree(project, "t1").join("escape-t1.log").display()
        );
        Step::tool_use("Bash", shell_tool_input("Bash", &command))
    };
    let world = World::new(&CLAUDE, |project| {
        let mut scenario = Scenario::default();
        for id in ["t1", "t2"] {
            let mut steps = Vec::new();
            if id == "t1" {
                steps.push(escape(project));
            }
            steps.extend([
                Step::write_file(&worktree(project, id).join(format!("{id}.txt")), "ok\n"),
                Step::write_signals(complete(&format!("Write {id}"))),
                Step::text("Done."),
            ]);
            scenario = scenario.with_round(Role::Generator, id, 1, steps);
        }
        scenario
    });
    let mut file = "[sprint]\nname = \"it\"\ncheck = \"! grep -qs broken t*.txt\"\n\
                    check_timeout_ms = 60000\nmax_rounds = 2\nmax_attempts = 1\n\n\
                    [roles.generator]\nprovider = \"claude\"\n\n\
                    [roles.evaluator]\nprovider = \"claude\"\nenabled = false\n\n"
        .to_string();
    for id in ["t1", "t2"] {
        file.push_str(&format!(
            "[[tasks]]\nid = \"{id}\"\ntitle = \"Write {id}\"\n\
             prompt = \"Write ok to {id}.txt in the working directory.\"\n\n"
        ));
    }
    repository(&world, &file);
    let out = world
        .env
        .corral()
        .envs(world.vars().iter().map(|(k, v)| (k, v)))
        .timeout(RUN_CAP * 3)
        .args(["sprint", "run", "--json", "--jobs", "2"])
        .output()
        .unwrap();
    let text = transcript(&world.env, &out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert_eq!(
        sprint_commits(&world),
        [
            ("Write t1".to_owned(), "t1".to_owned()),
            ("Write t2".to_owned(), "t2".to_owned())
        ],
        "{text}"
    );
    // Both generators were under way before either ended.
    let events: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let position = |event: &str, task: &str| {
        events
            .iter()
            .position(|e| e["event"] == event && e["task"] == task)
            .unwrap_or_else(|| panic!("no {event} for {task}: {text}"))
    };
    let first_end = position("spawn-finished", "t1").min(position("spawn-finished", "t2"));
    assert!(
        position("spawn-started", "t1") < first_end && position("spawn-started", "t2") < first_end,
        "the two spawns did not overlap: {text}"
    );
    // Each model call was made from its task's worktree prompt, naming no path in the project.
    let project = world.project();
    for request in world.api.model_requests() {
        let asked = request.last_user_text.unwrap_or_default();
        if asked.contains("Write ok to") {
            assert!(
                !asked.contains(&format!("{}/t", project.display())),
                "a prompt names a path in the project: {asked}"
            );
        }
    }
    // The files were written in the worktrees and reached the project only by the fold.
    let head = corral_test_support::command(Path::new("git"))
        .current_dir(&project)
        .args(["show", "--stat", "--format=", "corral/it"])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&head.stdout).contains("t2.txt"),
        "{}",
        String::from_utf8_lossy(&head.stdout)
    );
    // The sandbox kept the worktree agent's write out of the project root.
    assert!(
        !project.join("escaped-t1.txt").exists(),
        "t1's agent wrote in the project root, outside its worktree"
    );
    let said = corral_test_support::command(Path::new("git"))
        .current_dir(&project)
        .args(["show", "corral/it:escape-t1.log"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&said.stdout);
    assert!(
        said.contains("Read-only file system"),
        "the shell said: {said:?}"
    );
    let s = status(&world);
    for t in s["tasks"].as_array().unwrap() {
        assert_eq!(t["status"], "done", "{s}");
    }
}

/// Issue 35 through the real Claude Code: two tasks run at once with `--jobs 2`, each passing
/// the check on its own branch (at most one task file may say `ok`), and breaking it together.
/// The first folds; the second's fold fails the check on the sprint's branch, is taken back off
/// it (`broke-on-fold`) and sent home for one more round at the tip, whose prompt carries the
/// check's output; the resumed generator writes its file so that the check passes beside the
/// first task's, and the fold's check passes. Each task is committed exactly once.
#[test]
fn two_tasks_that_break_the_check_together_are_folded_once_each_after_one_sent_home() {
    let worktree = |project: &Path, id: &str| {
        canonical(project)
            .join(".corral/sprints")
            .join(NAME)
            .join("worktrees")
            .join(id)
    };
    let world = World::new(&CLAUDE, |project| {
        let round = |id: &str, content: &str, subject: &str| {
            vec![
                Step::write_file(&worktree(project, id).join(format!("{id}.txt")), content),
                Step::write_signals(complete(subject)),
                Step::text("Done."),
            ]
        };
        Scenario::default()
            .with_round(Role::Generator, "t1", 1, round("t1", "ok\n", "Write t1"))
            .with_round(Role::Generator, "t2", 1, round("t2", "ok\n", "Write t2"))
            .with_round(
                Role::Generator,
                "t2",
                2,
                round("t2", "fine\n", "Write t2 beside t1"),
            )
    });
    let check = "test $(grep -ls ok t*.txt | wc -l) -le 1";
    let mut file = format!(
        "[sprint]\nname = \"{NAME}\"\ncheck = {check:?}\ncheck_timeout_ms = 60000\n\
         max_rounds = 1\nmax_attempts = 1\n\n[roles.generator]\nprovider = \"claude\"\n\n\
         [roles.evaluator]\nprovider = \"claude\"\nenabled = false\n\n"
    );
    for id in ["t1", "t2"] {
        file.push_str(&format!(
            "[[tasks]]\nid = \"{id}\"\ntitle = \"Write {id}\"\n\
             prompt = \"Write ok to {id}.txt in the working directory.\"\n\n"
        ));
    }
    repository(&world, &file);
    let out = world
        .env
        .corral()
        .envs(world.vars().iter().map(|(k, v)| (k, v)))
        .timeout(RUN_CAP * 3)
        .args(["sprint", "run", "--json", "--jobs", "2"])
        .output()
        .unwrap();
    let text = transcript(&world.env, &out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert_eq!(
        sprint_commits(&world),
        [
            ("Write t1".to_owned(), "t1".to_owned()),
            ("Write t2 beside t1".to_owned(), "t2".to_owned())
        ],
        "{text}"
    );
    let events: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let of =
        |event: &str| -> Vec<&Value> { events.iter().filter(|e| e["event"] == event).collect() };
    // Both round-1 generators were under way before either ended.
    let position = |event: &str, task: &str| {
        events
            .iter()
            .position(|e| e["event"] == event && e["task"] == task)
            .unwrap_or_else(|| panic!("no {event} for {task}: {text}"))
    };
    let first_end = position("spawn-finished", "t1").min(position("spawn-finished", "t2"));
    assert!(
        position("spawn-started", "t1") < first_end && position("spawn-started", "t2") < first_end,
        "the two spawns did not overlap: {text}"
    );
    // t1's fold passed, t2's first failed and its second passed.
    let checked: Vec<(String, bool)> = of("fold-checked")
        .iter()
        .map(|e| {
            (
                e["task"].as_str().unwrap_or_default().to_owned(),
                e["passed"].as_bool().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        checked,
        [
            ("t1".to_owned(), true),
            ("t2".to_owned(), false),
            ("t2".to_owned(), true)
        ],
        "{text}"
    );
    let sent = of("sent-home");
    assert_eq!(sent.len(), 1, "{text}");
    assert_eq!(sent[0]["task"], "t2", "{text}");
    assert_eq!(sent[0]["round"], 2, "{text}");
    // The round sent home ran on the resumed session, told what broke.
    let resumed = of("spawn-started")
        .into_iter()
        .find(|e| e["task"] == "t2" && e["round"] == 2)
        .unwrap_or_else(|| panic!("no round 2 of t2: {text}"));
    assert_eq!(resumed["resumes"], true, "{text}");
    let told = world
        .api
        .model_requests()
        .into_iter()
        .filter_map(|r| r.last_user_text)
        .any(|asked| asked.contains("once folded onto the sprint's branch"));
    assert!(
        told,
        "no round-2 prompt named the failed folded check: {text}"
    );
    // The branch ends with both changes and the check passing on it.
    let project = world.project();
    let show = |name: &str| {
        let out = corral_test_support::command(Path::new("git"))
            .current_dir(&project)
            .args(["show", &format!("corral/{NAME}:{name}")])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert_eq!(show("t1.txt"), "ok\n", "{text}");
    assert_eq!(show("t2.txt"), "fine\n", "{text}");
    let s = status(&world);
    for t in s["tasks"].as_array().unwrap() {
        assert_eq!(t["status"], "done", "{s}");
    }
}

/// Issue 29, holes 1 and 2, with the real Claude Code doing it through its own Bash tool: the
/// generator replaces the files Corral writes after its round with links to the user's files,
/// links the learnings to another, and writes a passing report into the evaluator's directory
/// before it starts. The record is read-only inside the sandbox, so none of it lands: the
/// user's files keep their bytes, the evaluator of round 1 runs and its failing verdict costs
/// the round, and round 2 is judged on its own.
#[test]
fn a_generator_cannot_plant_links_or_a_verdict_in_the_sprints_record() {
    let victims = tempfile::tempdir().unwrap();
    let bashrc = victims.path().join("bashrc");
    let profile = victims.path().join("profile");
    std::fs::write(&bashrc, "original bashrc\n").unwrap();
    std::fs::write(&profile, "original profile\n").unwrap();
    let (bashrc_at, profile_at) = (bashrc.clone(), profile.clone());
    let world = World::new(&CLAUDE, move |project| {
        let round = format!(".corral/sprints/{NAME}/implement/t1/rounds/1");
        let attack = format!(
            "ln -sf {bashrc} {round}/check.txt; ln -sf {profile} {round}/diff.patch; \
             ln -sf {profile} .corral/sprints/{NAME}/learnings.ndjson; \
             mkdir -p {round}/evaluator && echo '{forged}' > {round}/evaluator/signals.json; true",
            bashrc = bashrc_at.display(),
            profile = profile_at.display(),
            forged = evaluation(None),
        );
        let mut g1 = vec![Step::tool_use(
            CLAUDE.shell_tool,
            shell_tool_input(CLAUDE.shell_tool, &attack),
        )];
        g1.extend(spawn_steps(
            &CLAUDE,
            project,
            &key(Role::Generator, "t1", 1),
            &[("t1.txt", "ok?")],
            &complete("Write t1"),
        ));
        let g2 = spawn_steps(
            &CLAUDE,
            project,
            &key(Role::Generator, "t1", 2),
            &[("t1.txt", "ok")],
            &complete("Write t1 right"),
        );
        let e = |r: u32, finding: Option<&str>| {
            spawn_steps(
                &CLAUDE,
                project,
                &key(Role::Evaluator, "t1", r),
                &[],
                &evaluation(finding),
            )
        };
        Scenario::default()
            .with_round(Role::Generator, "t1", 1, g1)
            .with_round(Role::Evaluator, "t1", 1, e(1, Some("t1.txt must say ok")))
            .with_round(Role::Generator, "t1", 2, g2)
            .with_round(Role::Evaluator, "t1", 2, e(2, None))
    });
    let file = sprint_file(
        &world.project(),
        &[task("t1")],
        CHECK,
        &CLAUDE,
        Some(&CLAUDE),
        2,
    );
    repository(&world, &file);
    let out = sprint_run(&world, &[]);
    let transcript = transcript(&world.env, &out);
    assert_eq!(out.status.code(), Some(0), "{transcript}");
    assert_eq!(
        std::fs::read_to_string(&bashrc).unwrap(),
        "original bashrc\n",
        "{transcript}"
    );
    assert_eq!(
        std::fs::read_to_string(&profile).unwrap(),
        "original profile\n",
        "{transcript}"
    );
    // The evaluator of round 1 ran (the report in its directory was not the agent's to write)
    // and failed the round; the commit is round 2's.
    assert!(
        !world
            .api
            .spawn_requests(&key(Role::Evaluator, "t1", 1))
            .is_empty(),
        "{transcript}"
    );
    assert_eq!(
        sprint_commits(&world),
        [("Write t1 right".to_owned(), "t1".to_owned())]
    );
    let round = sprint_dir(&world).join("implement/t1/rounds/1");
    for file in ["check.txt", "diff.patch"] {
        let meta = std::fs::symlink_metadata(round.join(file)).unwrap();
        assert!(meta.file_type().is_file(), "{file} is Corral's own file");
    }
    assert!(
        std::fs::symlink_metadata(sprint_dir(&world).join("learnings.ndjson"))
            .unwrap()
            .file_type()
            .is_file()
    );
}

/// `corral sprint run --pr`: once its one task is done, the sprint's branch is pushed to a bare
/// repository and its pull request opened through the real `gh` against the fake forge, with
/// the pull request's text written by the agent (a spawn of its own, after the sprint's).
#[test]
fn run_with_pr_opens_the_pull_request_once_every_task_is_done() {
    let pr_content = json!({"schemaVersion": 1, "signals": [{
        "type": "pr-content", "timestamp": TS,
        "title": "Write t1", "body": "Writes t1.txt."
    }]})
    .to_string();
    let world = World::new(&CLAUDE, |project| {
        Scenario::script([
            Step::write_signals_for(CLAUDE.bin, pr_content).unwrap(),
            Step::text("Written."),
        ])
        .with_round(
            Role::Generator,
            "t1",
            1,
            spawn_steps(
                &CLAUDE,
                project,
                &key(Role::Generator, "t1", 1),
                &[("t1.txt", "ok")],
                &complete("Write t1"),
            ),
        )
    });
    let project = world.project();
    repository(
        &world,
        &sprint_file(&project, &[task("t1")], CHECK, &CLAUDE, None, 2),
    );
    let bare = project.parent().unwrap().join("remote.git");
    git(
        project.parent().unwrap(),
        &["init", "-q", "--bare", bare.to_str().unwrap()],
    );
    git(
        &project,
        &["remote", "add", "origin", bare.to_str().unwrap()],
    );
    let forge = corral_test_support::FakeForge::start("octo/widgets", "gho_fake").unwrap();
    let gh_config = project.parent().unwrap().join("gh-config");
    std::fs::create_dir_all(&gh_config).unwrap();
    // `--pr` finds the repository from the remotes, as gh does; a bare path names none, so the
    // test names it as GH_REPO would be set by hand.
    let mut extra = forge.gh_env(&gh_config, Some("gho_fake"));
    extra.push(("GH_REPO".into(), forge.repo()));

    let out = world
        .env
        .corral()
        .envs(world.vars().iter().chain(&extra).map(|(k, v)| (k, v)))
        .timeout(RUN_CAP * 3)
        .args(["sprint", "run", "--no-preflight", "--pr"])
        .output()
        .unwrap();
    let shown = transcript(&world.env, &out);
    assert_eq!(out.status.code(), Some(0), "{shown}");
    assert_eq!(
        sprint_commits(&world),
        [("Write t1".to_owned(), "t1".to_owned())]
    );
    assert!(shown.contains("and opened pull request #1"), "{shown}");
    let prs = forge.pull_requests();
    assert_eq!(prs.len(), 1, "{prs:?}");
    assert_eq!(prs[0].title, "Write t1");
    assert!(
        prs[0].body.contains("| `t1` | done | 1 |"),
        "{}",
        prs[0].body
    );
    assert_eq!(prs[0].head, format!("corral/{NAME}"));
}

/// A check that is a fork loop once the task's file exists, under `[limits] pids`: the check
/// is ended at its limit and its report, which the generator's next round reads, names it; each
/// round fails that way until the task is blocked. Never exit 8, never a crash of Corral.
#[test]
fn a_check_ended_at_its_limit_fails_the_round_naming_the_limit() {
    let world = World::new(&CLAUDE, |project| {
        let mut scenario = Scenario::default();
        for round in 1..=3 {
            scenario = scenario.with_round(
                Role::Generator,
                "t1",
                round,
                spawn_steps(
                    &CLAUDE,
                    project,
                    &key(Role::Generator, "t1", round),
                    &[("t1.txt", "ok")],
                    &complete("Write t1"),
                ),
            );
        }
        scenario
    });
    let check = "test ! -e t1.txt || { (while :; do sleep 30 & done) 2>/dev/null; sleep 60; }";
    repository(
        &world,
        &sprint_file(&world.project(), &[task("t1")], check, &CLAUDE, None, 1),
    );
    let out = sprint_run(&world, &[("CORRAL_LIMITS__PIDS".into(), "256".into())]);
    let text = transcript(&world.env, &out);
    assert_ne!(out.status.code(), Some(8), "{text}");
    let report =
        std::fs::read_to_string(sprint_dir(&world).join("implement/t1/rounds/1/check.txt"))
            .unwrap_or_else(|e| panic!("no check report ({e}): {text}"));
    assert!(
        report.contains("[stopped at its pids limit of 256 processes"),
        "{report}"
    );
    assert_eq!(
        task_statuses(&world),
        [("t1".to_string(), "blocked".to_string())],
        "{text}"
    );
}

/// Failover (issue 31): the generator lists Claude Code then Codex; Claude Code's account is held
/// by a usage limit two hours from its reset (its own fake API answers nothing else; another run
/// met it first), longer than the role's `failover_after_ms`: the preflight says so without
/// waiting, the spawn stops before Claude Code starts, the task goes on with Codex in a new
/// session, and `sprint status` says who was held until when and who went on.
#[test]
fn a_generator_held_past_failover_after_goes_on_with_the_next_provider() {
    let reset = std::time::SystemTime::now() + Duration::from_secs(2 * 3600);
    let reset_s = reset
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let limited =
        corral_test_support::fake_api::FakeApi::start(Scenario::forever(Step::UsageLimit {
            resets_at_epoch_s: reset_s,
        }))
        .unwrap();
    let world = World::new(&CODEX, |project| {
        Scenario::default().with_round(
            Role::Generator,
            "t1",
            1,
            spawn_steps(
                &CODEX,
                project,
                &key(Role::Generator, "t1", 1),
                &[("t1.txt", "ok")],
                &complete("Write t1"),
            ),
        )
    });
    let mut file = sprint_file(&world.project(), &[task("t1")], CHECK, &CODEX, None, 2);
    file = file.replace(
        "[roles.generator]\nprovider = \"codex\"\n",
        "[roles.generator]\nprovider = [\"claude\", \"codex\"]\nfailover_after_ms = \"1m\"\n",
    );
    repository(&world, &file);
    let mut vars = claude_vars(&world);
    for (k, v) in &mut vars {
        if k == "ANTHROPIC_BASE_URL" {
            *v = limited.url();
        }
    }
    // Another run met the limit first (auto_resume off: it stops, exit 4): the account is held
    // in the gate until the reset, which neither the preflight nor the sprint waits for.
    let first = world
        .env
        .corral()
        .envs(world.vars().iter().chain(&vars).map(|(k, v)| (k, v)))
        .env("CORRAL_RETRY__AUTO_RESUME", "false")
        .timeout(RUN_CAP)
        .args(["run", "--provider", "claude", "--json", "say hello"])
        .output()
        .unwrap();
    assert_eq!(
        first.status.code(),
        Some(4),
        "{}",
        transcript(&world.env, &first)
    );
    let asked = limited.model_requests().len();
    let started = std::time::Instant::now();
    let out = world
        .env
        .corral()
        .envs(world.vars().iter().chain(&vars).map(|(k, v)| (k, v)))
        .timeout(Duration::from_secs(180))
        .args(["sprint", "run", "--json"])
        .output()
        .unwrap();
    let took = started.elapsed();
    assert_eq!(
        limited.model_requests().len(),
        asked,
        "the held account was not asked again, by the preflight or the sprint"
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("rate limited right now"),
        "the preflight says so: {}",
        transcript(&world.env, &out)
    );
    let said = transcript(&world.env, &out);
    assert_eq!(out.status.code(), Some(0), "{said}");
    // Not a two-hour wait, nor a backoff: the hold was learnt and handed over.
    assert!(took < Duration::from_secs(120), "{took:?}: {said}");
    assert!(
        !limited.model_requests().is_empty(),
        "Claude Code met the limit"
    );
    assert!(
        world
            .api
            .spawn_requests(&key(Role::Generator, "t1", 1))
            .iter()
            .all(|r| r.path.starts_with("/v1/responses")),
        "Codex did the round"
    );
    assert_eq!(
        sprint_commits(&world),
        [("Write t1".to_owned(), "t1".to_owned())]
    );
    let s = state(&world);
    let handovers = s["tasks"][0]["handovers"].as_array().unwrap();
    assert_eq!(handovers.len(), 1, "{s:#}");
    assert_eq!(handovers[0]["from"], "claude");
    assert_eq!(handovers[0]["to"], "codex");
    assert_eq!(handovers[0]["round"], 1);
    let until = humantime::parse_rfc3339(handovers[0]["heldUntil"].as_str().unwrap()).unwrap();
    let off = until.duration_since(reset).unwrap_or_else(|e| e.duration());
    assert!(
        off < Duration::from_secs(5),
        "held until the reset: {off:?}"
    );
    // The night's record and the status say it.
    let events = std::fs::read_to_string(sprint_dir(&world).join("events.jsonl")).unwrap();
    assert!(events.contains("\"event\":\"failed-over\""), "{events}");
    let status = world
        .env
        .corral()
        .args(["sprint", "status"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(
        text.contains("claude held until") && text.contains("continued on codex"),
        "{text}"
    );
}

/// The fake API's "model not found", as the Anthropic API (`true`) or the Responses API says it.
fn model_gone(anthropic: bool) -> Step {
    let body = if anthropic {
        json!({"type": "error", "error": {"type": "not_found_error", "message": "model: gone"}})
    } else {
        json!({"error": {"message": "The model `fake-model` does not exist or you do not have access to it.",
            "type": "invalid_request_error", "param": null, "code": "model_not_found"}})
    };
    Step::HttpError {
        status: 404,
        retry_after_secs: None,
        body: Some(body.to_string()),
    }
}

/// The chaos test's two worlds: Codex's (the world's API) and Claude Code's own API, both
/// scripting every task, with Claude Code's storm of 429s (t2), its usage limit until `reset_s`
/// (t3), the model gone for whoever plays t8 first, and t11's first request hung.
fn chaos_world(ids: &[String], reset_s: u64) -> (World, corral_test_support::fake_api::FakeApi) {
    let mut claude = Scenario::default();
    let world = World::new(&CODEX, |project| {
        let mut codex = Scenario::default();
        for id in ids {
            let steps = |cli: &Cli| {
                spawn_steps(
                    cli,
                    project,
                    &key(Role::Generator, id, 1),
                    &[(&format!("{id}.txt"), "ok")],
                    &complete(&format!("Write {id}")),
                )
            };
            let (mut c, mut x) = (steps(&CLAUDE), steps(&CODEX));
            match id.as_str() {
                "t2" => c
                    .splice(0..0, [Step::rate_limited(1), Step::rate_limited(1)])
                    .for_each(drop),
                // As a real account answers: every request, Claude Code's own retries too.
                "t3" => c
                    .splice(
                        0..0,
                        vec![
                            Step::UsageLimit {
                                resets_at_epoch_s: reset_s
                            };
                            CLAUDE.requests_per_failed_call
                        ],
                    )
                    .for_each(drop),
                "t8" => {
                    c.insert(0, model_gone(true));
                    x.insert(0, model_gone(false));
                }
                "t11" => {
                    c.insert(0, Step::HangBeforeHeaders);
                    x.insert(0, Step::HangBeforeHeaders);
                }
                _ => {}
            }
            claude = std::mem::take(&mut claude).with_round(Role::Generator, id, 1, c);
            codex = codex.with_round(Role::Generator, id, 1, x);
        }
        codex
    });
    let api = corral_test_support::fake_api::FakeApi::start(claude).unwrap();
    (world, api)
}

/// The sprint's spend in `sprint.json`, and the most one task has spent (at least any one
/// spawn's cost).
fn spend_of(s: &Value) -> (f64, f64) {
    let mut total = 0.0;
    let mut most: f64 = 0.0;
    for t in s["tasks"].as_array().unwrap() {
        let task: f64 = t["usageByProvider"].as_object().map_or(0.0, |m| {
            m.values()
                .map(|u| u["costUsd"].as_f64().unwrap_or(0.0))
                .sum()
        });
        total += task;
        most = most.max(task);
    }
    (total, most)
}

/// The night's chaos (issue 31): a twelve-task sprint whose generator lists Claude Code then
/// Codex, each on its own fake API. Claude Code meets a storm of 429s (t2) and a usage limit an
/// hour long (t3: Codex goes on with the night); the model vanishes mid-sprint (t8,
/// whoever plays it: exit 8, then it is back); the spend cap trips and is raised; the sprint is
/// killed with `kill -9` mid-spawn (t11) and run again. At the end every task is done once, in
/// its first round, with one commit each, and at each pause the spend had passed the cap by at
/// most one spawn's cost.
#[test]
fn chaos_a_night_of_limits_a_vanished_model_a_tripped_cap_and_a_kill_loses_and_repeats_nothing() {
    let ids: Vec<String> = (1..=12).map(|n| format!("t{n}")).collect();
    let reset_s = (std::time::SystemTime::now() + Duration::from_secs(3600))
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let (world, claude_api) = chaos_world(&ids, reset_s);
    let tasks: Vec<Task> = ids
        .iter()
        .map(|id| task(Box::leak(id.clone().into_boxed_str())))
        .collect();
    let file = sprint_file(&world.project(), &tasks, CHECK, &CODEX, None, 2)
        .replace(
            "[roles.generator]\nprovider = \"codex\"\n",
            "[roles.generator]\nprovider = [\"claude\", \"codex\"]\nfailover_after_ms = \"1m\"\n",
        )
        .replace(
            "max_rounds = 3\n",
            "max_rounds = 3\nmax_cost_usd = 0.0001\n",
        );
    repository(&world, &file);
    // Codex reports tokens only: its spawns are priced by the user's table.
    std::fs::write(
        world.project().join("corral.toml"),
        "[prices.\"fake-model\"]\ninput = 1.0\noutput = 1.0\n",
    )
    .unwrap();
    git(&world.project(), &["add", "-A"]);
    git(&world.project(), &["commit", "-q", "-m", "prices"]);
    let mut vars = claude_vars(&world);
    for (k, v) in &mut vars {
        if k == "ANTHROPIC_BASE_URL" {
            v.clone_from(&claude_api.url());
        }
    }
    let events =
        || std::fs::read_to_string(sprint_dir(&world).join("events.jsonl")).unwrap_or_default();
    let sprint_file_path = world.project().join("corral-sprint.toml");
    let t11 = key(Role::Generator, "t11", 1);
    let (mut cap, mut exits, mut raised, mut killed) = (0.0001, Vec::new(), 0, false);
    let started = std::time::Instant::now();
    for _ in 0..12 {
        let mut child = corral_test_support::command(&assert_cmd::cargo::cargo_bin("corral"))
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", world.env.home())
            .envs(world.vars().iter().chain(&vars).map(|(k, v)| (k, v)))
            .current_dir(world.project())
            .args(["sprint", "run", "--json", "--no-preflight"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut ended = None;
        // t11's first spawn hangs: the sprint is killed there, whichever run reaches it.
        let asked =
            |api: &corral_test_support::fake_api::FakeApi| !api.spawn_requests(&t11).is_empty();
        assert!(
            wait_until(RUN_CAP * 3, || {
                ended = child.try_wait().unwrap();
                ended.is_some() || (!killed && (asked(&claude_api) || asked(&world.api)))
            }),
            "a run took too long: {exits:?}\n{}",
            events()
        );
        let Some(status) = ended else {
            let spawn_dir = sprint_dir(&world).join("implement/t11/rounds/1/generator");
            wait_until(Duration::from_secs(20), || {
                !spawned_pids(&spawn_dir).is_empty()
            });
            let orphans = spawned_pids(&spawn_dir);
            corral_test_support::send_signal(child.id(), Signal::SIGKILL);
            let _ = child.wait();
            for pid in orphans {
                corral_test_support::send_signal(pid, Signal::SIGKILL);
            }
            exits.push(137);
            killed = true;
            continue;
        };
        let code = status.code().unwrap_or(-1);
        exits.push(code);
        match code {
            0 => break,
            // The model is back: the next run goes on.
            8 => {}
            9 => {
                let (spent, most) = spend_of(&state(&world));
                assert!(
                    spent <= cap + most + 1e-9,
                    "paused at ${spent} against a cap of ${cap}: past it by more than one spawn (${most})"
                );
                // Raised: first a little (it may trip again a few spawns on), then for good.
                cap = if raised == 0 {
                    spent + 3.5 * most.max(0.0001)
                } else {
                    100.0
                };
                raised += 1;
                let text = std::fs::read_to_string(&sprint_file_path).unwrap();
                let line = text
                    .lines()
                    .find(|l| l.starts_with("max_cost_usd"))
                    .unwrap();
                let raised_text = text.replace(line, &format!("max_cost_usd = {cap:.6}"));
                std::fs::write(&sprint_file_path, raised_text).unwrap();
            }
            _ => panic!("exit {code} after {exits:?}\n{}", events()),
        }
    }
    let took = started.elapsed();
    assert_eq!(exits.last(), Some(&0), "{exits:?}\n{}", events());
    assert!(
        exits.contains(&8),
        "the vanished model stopped the sprint: {exits:?}\n{}",
        events()
    );
    assert!(raised >= 1 && killed, "{exits:?}");
    // Nothing lost, nothing done twice: one commit per task, in order.
    let expected: Vec<(String, String)> = ids
        .iter()
        .map(|id| (format!("Write {id}"), id.clone()))
        .collect();
    assert_eq!(sprint_commits(&world), expected);
    let s = state(&world);
    for t in s["tasks"].as_array().unwrap() {
        assert_eq!(t["status"], "done", "{t:#}");
        // No round spent on a transient failure, a limit or the vanished model.
        assert_eq!(t["round"], 1, "{t:#}");
    }
    // Claude Code's limit handed t3 to Codex, which did the rest of the night (a rerun tries
    // Claude Code first: its engine finds the hold in the account's gate and stops before the
    // CLI starts, so the hand-over costs nothing).
    let t3 = &s["tasks"][2];
    assert_eq!(
        (&t3["handovers"][0]["from"], &t3["handovers"][0]["to"]),
        (&json!("claude"), &json!("codex")),
        "{t3:#}"
    );
    assert!(
        s["tasks"][0]["usageByProvider"]["claude"].is_object(),
        "{s:#}"
    );
    assert!(
        s["tasks"][11]["usageByProvider"]["codex"].is_object(),
        "{s:#}"
    );
    eprintln!("chaos: exits {exits:?} in {took:?}");
    assert!(
        took < Duration::from_secs(240),
        "the chaos took {took:?}: {exits:?}"
    );
}

/// The spend cap with a CLI that reports only tokens (issue 31): Codex's spawns are priced by
/// the user's `[prices."fake-model"]`, marked as estimates, and counted against the sprint's
/// `max_cost_usd`: the second task pauses before its spawn (exit 9), naming the cap.
#[test]
fn codexs_tokens_are_priced_by_the_users_table_and_count_against_the_sprints_cap() {
    let world = World::new(&CODEX, |project| {
        let mut scenario = Scenario::default();
        for id in ["t1", "t2"] {
            scenario = scenario.with_round(
                Role::Generator,
                id,
                1,
                spawn_steps(
                    &CODEX,
                    project,
                    &key(Role::Generator, id, 1),
                    &[(&format!("{id}.txt"), "ok")],
                    &complete(&format!("Write {id}")),
                ),
            );
        }
        scenario
    });
    let file = sprint_file(
        &world.project(),
        &[task("t1"), task("t2")],
        CHECK,
        &CODEX,
        None,
        2,
    )
    .replace(
        "max_rounds = 3\n",
        "max_rounds = 3\nmax_cost_usd = 0.0001\n",
    );
    repository(&world, &file);
    std::fs::write(
        world.project().join("corral.toml"),
        "[prices.\"fake-model\"]\ninput = 10.0\noutput = 10.0\n",
    )
    .unwrap();
    git(&world.project(), &["add", "-A"]);
    git(&world.project(), &["commit", "-q", "-m", "prices"]);
    let out = sprint_run(&world, &[]);
    assert_eq!(
        out.status.code(),
        Some(9),
        "{}",
        transcript(&world.env, &out)
    );
    let s = state(&world);
    let t1 = &s["tasks"][0];
    assert_eq!(t1["status"], "done", "{t1:#}");
    assert_eq!(t1["costEstimated"], true, "{t1:#}");
    let usage = &t1["usageByProvider"]["codex"];
    let tokens = usage["input"].as_u64().unwrap() + usage["output"].as_u64().unwrap();
    let cost = usage["costUsd"].as_f64().unwrap();
    // $10 per million tokens in and out (no cache tokens against the fake API).
    #[allow(clippy::cast_precision_loss)]
    let priced = tokens as f64 * 10.0 / 1_000_000.0;
    assert!(
        (cost - priced).abs() < 1e-9,
        "{cost} for {tokens} tokens: {usage:#}"
    );
    let t2 = &s["tasks"][1];
    assert_eq!(t2["status"], "running", "{t2:#}");
    let warning = t2["warnings"][0].as_str().unwrap_or_default();
    assert!(warning.contains("max_cost_usd is $0.0001"), "{warning}");
    assert!(
        world
            .api
            .spawn_requests(&key(Role::Generator, "t2", 1))
            .is_empty(),
        "t2's spawn never started"
    );
}
