//! `corral sprint run --jobs 2`'s merge queue (issue 35) through the binary, with a stand-in for
//! Claude Code ([`FakeClaude`]: it writes `<task>.txt` in its work tree and `signals.json`):
//! what the plain view and `--json` say of a task held back by another's `touches`, and a
//! `kill -9` of the whole `corral sprint run` process group during a fold, its check or a
//! send-home, then a rerun that commits each task once with the folded check passing.

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Stdio;

use corral_test_support::is_root;
use serde_json::Value;

use corral_test_support::fake_api::{Role, Scenario, Step};

use crate::providers::{CLAUDE, RUN_CAP, World, canonical};
use crate::support::*;

const NAME: &str = "q";

/// The stand-in's work: `ok` in `<task>.txt`, or `fine` in a round told that its fold broke
/// the check (so that it passes beside the other task's `ok`).
const WORK: &str = r#"R=${SIGNALS%/generator/signals.json}; T=${R%/rounds/*}; TASK=${T##*/}
WORDS=ok
case "$PROMPT" in *"once folded onto the sprint"*) WORDS=fine;; esac
echo "$WORDS" > "$TASK.txt""#;

fn stand_in(env: &Env) -> FakeClaude {
    FakeClaude::new(
        env,
        &format!("{WORK}\nprintf '%s' '{GOOD_SIGNALS}' > \"$SIGNALS\""),
        &[
            FakeClaude::init("claude-opus-4-8"),
            FakeClaude::result("Done.", 0.001),
        ],
        "",
    )
}

/// A project whose sprint has tasks `t1` and `t2` (each with `extra` in its table), the
/// evaluator off, `check` as its check; committed on `main`.
fn project(env: &Env, check: &str, extra: &str) {
    let project = env.project();
    let mut file = format!(
        "[sprint]\nname = \"{NAME}\"\ncheck = {check:?}\ncheck_timeout_ms = 60000\n\
         max_rounds = 1\nmax_attempts = 1\n\n[roles.generator]\nprovider = \"claude\"\n\n\
         [roles.evaluator]\nprovider = \"claude\"\nenabled = false\n"
    );
    for id in ["t1", "t2"] {
        file.push_str(&format!(
            "\n[[tasks]]\nid = \"{id}\"\ntitle = \"Write {id}\"\n\
             prompt = \"Write ok to {id}.txt in the working directory.\"\n{extra}\n"
        ));
    }
    std::fs::write(project.join("corral-sprint.toml"), file).unwrap();
    std::fs::write(project.join(".gitignore"), ".corral/\n").unwrap();
    git(&project, &["init", "-q", "-b", "main"]);
    git(&project, &["config", "user.email", "it@example.invalid"]);
    git(&project, &["config", "user.name", "it"]);
    git(&project, &["add", "-A"]);
    git(&project, &["commit", "-q", "-m", "start"]);
}

/// The variables that run the stand-in as Claude Code.
fn vars(agent: &FakeClaude) -> Vec<(String, String)> {
    let (key, path) = agent.setting();
    let mut vars = vec![
        (key.to_string(), path.display().to_string()),
        ("ANTHROPIC_API_KEY".to_string(), "sk-test".to_string()),
    ];
    if is_root() {
        vars.push(("IS_SANDBOX".to_string(), "1".to_string()));
    }
    vars
}

/// `corral sprint run --jobs 2 --no-preflight`, with `--json` when asked.
fn sprint_run(env: &Env, agent: &FakeClaude, json: bool) -> std::process::Output {
    let mut cmd = env.corral();
    cmd.envs(vars(agent))
        .args(["sprint", "run", "--no-preflight", "--jobs", "2"]);
    if json {
        cmd.arg("--json");
    }
    cmd.timeout(std::time::Duration::from_secs(300))
        .output()
        .unwrap()
}

/// The `Corral-Task:` trailers of the sprint branch's commits since `main`, oldest first.
fn committed(project: &Path) -> Vec<String> {
    let out = corral_test_support::command(Path::new("git"))
        .current_dir(project)
        .args([
            "log",
            "--reverse",
            "--format=%(trailers:key=Corral-Task,valueonly)",
            &format!("main..corral/{NAME}"),
        ])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect()
}

/// `t2` declares the same path as `t1`: with two slots free it is held back until `t1` is
/// folded, and both views say so, by whom and over what.
#[test]
fn a_task_held_back_by_anothers_touches_is_told_in_the_plain_view_and_in_json() {
    let touches = "touches = [\"shared/\"]";
    let plain = Env::new();
    project(&plain, "true", touches);
    let out = sprint_run(&plain, &stand_in(&plain), false);
    let text = transcript(&plain, &out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    let held: Vec<&str> = text.lines().filter(|l| l.contains("held back")).collect();
    assert_eq!(held.len(), 1, "told once: {text}");
    // The elapsed time that opens the line varies from run to run.
    let line = held[0]
        .split_once("] ")
        .map_or(held[0].to_string(), |(_, rest)| {
            format!("[<elapsed>] {rest}")
        });
    insta::assert_snapshot!("held_plain", line);
    assert_eq!(committed(&plain.project()), ["t1", "t2"], "{text}");

    let json = Env::new();
    project(&json, "true", touches);
    let out = sprint_run(&json, &stand_in(&json), true);
    let text = transcript(&json, &out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let held: Vec<&str> = stdout
        .lines()
        .filter(|l| serde_json::from_str::<Value>(l).is_ok_and(|e| e["event"] == "held"))
        .collect();
    assert_eq!(held.len(), 1, "told once: {text}");
    insta::assert_snapshot!("held_json", held[0]);
    // t2's round started only after t1's fold.
    let events: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let at = |event: &str, task: &str| {
        events
            .iter()
            .position(|e| e["event"] == event && e["task"] == task)
            .unwrap_or_else(|| panic!("no {event} of {task}: {text}"))
    };
    assert!(at("folded", "t1") < at("spawn-started", "t2"), "{text}");
}

/// Each `ok` task file alone passes, two fail (t1 and t2 break the check together; t2's round
/// sent home writes `fine`). On the sprint's branch (where `.git` is a directory, not a
/// worktree's file) it first sleeps 0.3 s, so that a kill on a `folded` event lands in the
/// middle of the folded check (0.3 s is far more than the 10 ms the `--json` lines may be held back).
const TOGETHER: &str =
    "if [ -d .git ]; then sleep 0.3; fi; test $(grep -ls ok t*.txt | wc -l) -le 1";

/// Where a run is killed: the `nth` (1-based) event of this kind whose key has that value.
type KillPoint = (&'static str, Option<(&'static str, Value)>, usize);

/// `corral sprint run --json --jobs 2` in its own process group, killed with `kill -9` to the
/// whole group once the `nth` (1-based) event `event` (whose `extra` key, when given, has its
/// value) is read; whether the kill came before the run ended.
fn killed_at(
    env: &Env,
    vars: &[(String, String)],
    event: &str,
    extra: Option<(&str, Value)>,
    nth: usize,
) -> bool {
    let mut cmd = corral_test_support::command(&assert_cmd::cargo::cargo_bin("corral"));
    cmd.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", env.home())
        .env("TZ", "UTC0")
        .envs(vars.iter().map(|(k, v)| (k, v)))
        .current_dir(env.project())
        .args(["sprint", "run", "--json", "--no-preflight", "--jobs", "2"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .process_group(0);
    let mut child = cmd.spawn().unwrap();
    let group = child.id();
    let mut seen = 0;
    let mut killed = false;
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let Ok(e) = serde_json::from_str::<Value>(&line.unwrap()) else {
            continue;
        };
        let matches =
            e["event"] == event && extra.as_ref().is_none_or(|(key, value)| e[*key] == *value);
        if matches {
            seen += 1;
            if seen == nth {
                let status = corral_test_support::command(Path::new("kill"))
                    .args(["-9", "--", &format!("-{group}")])
                    .status()
                    .unwrap();
                assert!(status.success());
                killed = true;
                break;
            }
        }
    }
    let status = child.wait().unwrap();
    // Killed while it ran, not after it ended on its own.
    killed && std::os::unix::process::ExitStatusExt::signal(&status) == Some(9)
}

/// `kill -9` of the whole `corral sprint run` process group in a folded check (passing, and
/// failing: before its send-home), right after the send-home, and in the last fold's check,
/// then a rerun: it ends with exit
/// 0, each task committed once, and the check passing on the sprint's branch.
#[test]
fn kill_9_of_the_sprint_during_a_fold_its_check_or_a_send_home_then_a_rerun_commits_each_once() {
    // The kills inside a send-home, between its steps, are `corral-sprint`'s
    // `flow::queue_crash` tests; here the real signal to the real process group.
    let points: [KillPoint; 4] = [
        ("folded", Some(("task", Value::from("t1"))), 1),
        ("folded", Some(("task", Value::from("t2"))), 1),
        ("sent-home", None, 1),
        ("folded", Some(("task", Value::from("t2"))), 2),
    ];
    for (event, extra, nth) in points {
        let at = format!("{event} {extra:?} #{nth}");
        let env = Env::new();
        project(&env, TOGETHER, "");
        let agent = stand_in(&env);
        assert!(
            killed_at(&env, &vars(&agent), event, extra, nth),
            "{at}: the run ended before"
        );
        let out = sprint_run(&env, &agent, true);
        let text = transcript(&env, &out);
        assert_eq!(out.status.code(), Some(0), "{at}: {text}");
        let project = env.project();
        assert_eq!(committed(&project), ["t1", "t2"], "{at}: {text}");
        let check = corral_test_support::command(Path::new("sh"))
            .args(["-c", TOGETHER])
            .current_dir(&project)
            .output()
            .unwrap();
        assert!(
            check.status.success(),
            "{at}: the folded check fails: {text}"
        );
        let status = corral_test_support::command(Path::new("git"))
            .args(["status", "--porcelain"])
            .current_dir(&project)
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&status.stdout), "", "{at}: {text}");
        let state: Value = serde_json::from_slice(
            &std::fs::read(
                project
                    .join(".corral/sprints")
                    .join(NAME)
                    .join("sprint.json"),
            )
            .unwrap(),
        )
        .unwrap();
        let t2 = state["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["id"] == "t2")
            .unwrap();
        assert_eq!(t2["sentHome"], 1, "{at}: sent home once: {t2}");
    }
}

/// The same kill with the real Claude Code against the fake model API: `kill -9` of the process
/// group while t2's first fold is being checked (before it is sent home), then a rerun, which
/// finds t1 folded, folds t2 again, meets the same failure, sends it home once; its resumed
/// session writes `fine` and the fold's check passes. Each task is committed once.
#[test]
fn kill_9_in_a_folded_check_with_the_real_claude_code_then_a_rerun_commits_each_once() {
    let worktree = |project: &Path, id: &str| {
        canonical(project)
            .join(".corral/sprints")
            .join(NAME)
            .join("worktrees")
            .join(id)
    };
    let world = World::new(&CLAUDE, |project| {
        let round = |id: &str, content: &str| {
            vec![
                Step::write_file(&worktree(project, id).join(format!("{id}.txt")), content),
                Step::write_signals(GOOD_SIGNALS),
                Step::text("Done."),
            ]
        };
        Scenario::default()
            .with_round(Role::Generator, "t1", 1, round("t1", "ok\n"))
            .with_round(Role::Generator, "t2", 1, round("t2", "ok\n"))
            .with_round(Role::Generator, "t2", 2, round("t2", "fine\n"))
    });
    project(&world.env, TOGETHER, "");
    assert!(
        killed_at(
            &world.env,
            world.vars(),
            "folded",
            Some(("task", Value::from("t2"))),
            1
        ),
        "the run ended before t2's first fold was checked"
    );
    let out = world
        .env
        .corral()
        .envs(world.vars().iter().map(|(k, v)| (k, v)))
        .timeout(RUN_CAP * 3)
        .args(["sprint", "run", "--json", "--no-preflight", "--jobs", "2"])
        .output()
        .unwrap();
    let text = transcript(&world.env, &out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    let project = world.project();
    assert_eq!(committed(&project), ["t1", "t2"], "{text}");
    let show = corral_test_support::command(Path::new("git"))
        .current_dir(&project)
        .args(["show", &format!("corral/{NAME}:t2.txt")])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&show.stdout), "fine\n", "{text}");
    let check = corral_test_support::command(Path::new("sh"))
        .args(["-c", TOGETHER])
        .current_dir(&project)
        .output()
        .unwrap();
    assert!(check.status.success(), "the folded check fails: {text}");
    // The round sent home ran once, on t2's resumed session.
    let events: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let sent: Vec<&Value> = events
        .iter()
        .filter(|e| e["event"] == "sent-home")
        .collect();
    assert_eq!(sent.len(), 1, "{text}");
    let resumed = events
        .iter()
        .find(|e| e["event"] == "spawn-started" && e["task"] == "t2" && e["round"] == 2)
        .unwrap_or_else(|| panic!("no round 2 of t2: {text}"));
    assert_eq!(resumed["resumes"], true, "{text}");
}
