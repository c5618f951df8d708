//! `corral sprint work`, the worker a remote executor runs, through the real Claude Code against
//! the fake model API, with a `file://` bare remote standing for the repository the cluster
//! reaches: a run pushes the task's branch and its record; a run killed with SIGKILL in the
//! middle of its round, its clone then thrown away (the job lost with its node), and run
//! again from nothing but the remote, resumes at that round: no round run twice, one commit; a
//! run with `--gate` says it is ready and runs nothing until the gate is on the remote.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use corral_test_support::Signal;
use corral_test_support::fake_api::{Role, Scenario, SpawnKey, Step};
use serde_json::{Value, json};

use crate::providers::{CLAUDE, RUN_CAP, World};
use crate::support::*;

const TS: &str = "2026-12-02T10:00:00Z";
const BRANCH: &str = "corral/it.tasks/t1";
const RECORD: &str = "refs/corral/it/t1/record";

/// Beside the project: the bare remote and the worker's work dir (its "node").
struct Cluster {
    remote: PathBuf,
    work: PathBuf,
    base: String,
}

fn work_dir(project: &Path) -> PathBuf {
    project.parent().unwrap().join("node")
}

/// The generator's round 1 of t1: writes `t1.txt` in the worker's clone, then a valid report;
/// `hang` first holds the model's answer (the kill comes there).
fn scenario(hang: bool) -> Scenario {
    let signals = json!({"schemaVersion": 1, "signals": [
        {"type": "task-complete", "timestamp": TS},
        {"type": "commit-message", "timestamp": TS, "subject": "Write t1"},
    ]})
    .to_string();
    let mut steps = vec![
        Step::write_named_for(CLAUDE.bin, "t1.txt", "ok").unwrap(),
        Step::write_signals_for(CLAUDE.bin, signals).unwrap(),
        Step::text("Done."),
    ];
    if hang {
        steps.insert(0, Step::HangBeforeHeaders);
    }
    Scenario::default().with_round(Role::Generator, "t1", 1, steps)
}

/// The project with a one-task sprint whose prompt names the worker's clone, and its bare
/// clone as the remote.
fn cluster(world: &World) -> Cluster {
    let project = world.project();
    let work = work_dir(&project);
    let file = format!(
        "[sprint]\nname = \"it\"\ncheck = \"true\"\ncheck_timeout_ms = 60000\nmax_rounds = 3\n\
         max_attempts = 2\n\n[roles.generator]\nprovider = \"claude\"\n\n\
         [roles.evaluator]\nprovider = \"claude\"\nenabled = false\n\n\
         [[tasks]]\nid = \"t1\"\ntitle = \"Write t1\"\nprompt = \"Write ok to {}/t1.txt.\"\n",
        work.display()
    );
    std::fs::write(project.join("corral-sprint.toml"), file).unwrap();
    std::fs::write(project.join(".gitignore"), ".corral/\n").unwrap();
    git(&project, &["init", "-q", "-b", "main"]);
    git(&project, &["config", "user.email", "it@example.invalid"]);
    git(&project, &["config", "user.name", "it"]);
    git(&project, &["add", "-A"]);
    git(&project, &["commit", "-q", "-m", "start"]);
    let remote = project.parent().unwrap().join("remote.git");
    git(
        project.parent().unwrap(),
        &[
            "clone",
            "-q",
            "--bare",
            &project.display().to_string(),
            &remote.display().to_string(),
        ],
    );
    let base = git_out(&project, &["rev-parse", "HEAD"]);
    Cluster { remote, work, base }
}

fn git_out(dir: &Path, args: &[&str]) -> String {
    corral_test_support::git_ok(dir, &[], args)
        .trim()
        .to_owned()
}

fn work_args(c: &Cluster) -> Vec<String> {
    [
        "sprint",
        "work",
        "--json",
        "--remote",
        &format!("file://{}", c.remote.display()),
        "--sprint-file",
        "corral-sprint.toml",
        "--task",
        "t1",
        "--base",
        &c.base,
        "--branch",
        BRANCH,
        "--run-id",
        "run-w",
        "--work-dir",
        &c.work.display().to_string(),
    ]
    .map(str::to_owned)
    .to_vec()
}

/// The committer identity: the clone has no config of its own.
fn identity() -> Vec<(String, String)> {
    [
        ("GIT_AUTHOR_NAME", "it"),
        ("GIT_AUTHOR_EMAIL", "it@example.invalid"),
        ("GIT_COMMITTER_NAME", "it"),
        ("GIT_COMMITTER_EMAIL", "it@example.invalid"),
    ]
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .to_vec()
}

fn work(world: &World, c: &Cluster) -> std::process::Output {
    world
        .env
        .corral()
        .envs(world.vars().iter().map(|(k, v)| (k, v)))
        .envs(identity())
        .timeout(RUN_CAP * 3)
        .args(work_args(c))
        .output()
        .unwrap()
}

/// `corral sprint work` for the task, to be spawned (its output not yet directed).
fn worker_command(world: &World, c: &Cluster) -> std::process::Command {
    let mut cmd = corral_test_support::command(&assert_cmd::cargo::cargo_bin("corral"));
    cmd.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", world.env.home())
        .envs(world.vars().iter().map(|(k, v)| (k, v)))
        .envs(identity())
        .current_dir(world.project())
        .args(work_args(c));
    cmd
}

/// The task's state as the record on the remote holds it.
fn recorded_task(c: &Cluster) -> Option<Value> {
    let out = corral_test_support::command(Path::new("git"))
        .current_dir(&c.remote)
        .args(["show", &format!("{RECORD}:implement/t1/task.json")])
        .output()
        .unwrap();
    out.status
        .success()
        .then(|| serde_json::from_slice(&out.stdout).unwrap())
}

/// The commits on the remote's task branch since the base: subject and `Corral-Task:`.
fn branch_commits(c: &Cluster) -> Vec<String> {
    git_out(
        &c.remote,
        &[
            "log",
            "--format=%s %(trailers:key=Corral-Task,valueonly)",
            &format!("{}..{BRANCH}", c.base),
        ],
    )
    .lines()
    .map(|l| l.trim().to_owned())
    .collect()
}

#[test]
fn a_work_run_pushes_the_task_branch_and_its_record() {
    let world = World::new(&CLAUDE, |_| scenario(false));
    let c = cluster(&world);
    let out = work(&world, &c);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        transcript(&world.env, &out)
    );
    assert_eq!(
        branch_commits(&c),
        ["Write t1 t1"],
        "one commit, on the base"
    );
    assert_eq!(
        git_out(&c.remote, &["show", &format!("{BRANCH}:t1.txt")]),
        "ok"
    );
    let task = recorded_task(&c).expect("the record was pushed");
    assert_eq!(task["status"], "done", "{task}");
    assert_eq!(task["round"], 1, "{task}");
    let signals = git_out(
        &c.remote,
        &[
            "cat-file",
            "-e",
            &format!("{RECORD}:implement/t1/rounds/1/generator/signals.json"),
        ],
    );
    assert_eq!(signals, "", "the round's record is in the record ref");
    // The snapshot of the work tree is the task's commit's tree (what a resumed job restores).
    assert_eq!(
        git_out(&c.remote, &["rev-parse", &format!("{RECORD}:tree")]),
        git_out(&c.remote, &["rev-parse", &format!("{BRANCH}^{{tree}}")]),
    );
    let last = String::from_utf8_lossy(&out.stdout)
        .lines()
        .last()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .unwrap();
    assert_eq!(last["kind"], "handback", "{last}");
    assert_eq!(last["status"], "done", "{last}");
    crate::schemas::Schema::load("sprint-work.schema.json")
        .check_lines("sprint work --json", &String::from_utf8_lossy(&out.stdout));
    // The worker.json the run pushed with its record names the run, and matches its schema.
    let owner: Value = serde_json::from_str(&git_out(
        &c.remote,
        &["show", &format!("{RECORD}:implement/t1/worker.json")],
    ))
    .unwrap();
    crate::schemas::Schema::load("worker.schema.json").check("worker.json", &owner);
    assert_eq!(
        last["head"].as_str().unwrap(),
        git_out(&c.remote, &["rev-parse", BRANCH])
    );
}

/// A job run again after its task was done and its clone lost (another node, a fresh work
/// dir): the record on the remote says done, so nothing runs again, and the task's branch on
/// the remote stays at the task's commit (the fresh clone's branch sits at the base, and
/// pushing that branch would have forced the base over the finished work).
#[test]
fn a_work_run_of_a_task_done_on_a_lost_clone_leaves_its_branch_on_the_remote() {
    let world = World::new(&CLAUDE, |_| scenario(false));
    let c = cluster(&world);
    let out = work(&world, &c);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        transcript(&world.env, &out)
    );
    let head = git_out(&c.remote, &["rev-parse", BRANCH]);
    let requests = world.api.requests().len();
    std::fs::remove_dir_all(&c.work).unwrap();
    let again = work(&world, &c);
    assert_eq!(
        again.status.code(),
        Some(0),
        "{}",
        transcript(&world.env, &again)
    );
    assert_eq!(git_out(&c.remote, &["rev-parse", BRANCH]), head);
    assert_eq!(branch_commits(&c), ["Write t1 t1"]);
    assert_eq!(world.api.requests().len(), requests, "no spawn ran again");
}

#[test]
fn a_work_run_killed_mid_round_and_its_clone_lost_resumes_at_that_round_from_the_remote() {
    let world = World::new(&CLAUDE, |_| scenario(true));
    let c = cluster(&world);
    let mut cmd = worker_command(&world, &c);
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut child = cmd.spawn().unwrap();
    let hung = SpawnKey::new(Role::Generator, "t1", 1);
    assert!(
        wait_until(Duration::from_secs(300), || !world
            .api
            .spawn_requests(&hung)
            .is_empty()),
        "{:#?}",
        world.api.requests()
    );
    // The step before the spawn reached the remote: the record says round 1, generate.
    assert!(
        wait_until(Duration::from_secs(60), || recorded_task(&c)
            .is_some_and(|t| t["progress"]["step"] == "generate")),
        "{:?}",
        recorded_task(&c)
    );
    let spawn_dir = c
        .work
        .join(".corral/sprints/it/implement/t1/rounds/1/generator");
    let orphans = spawned_pids(&spawn_dir);
    corral_test_support::send_signal(child.id(), Signal::SIGKILL);
    child.wait().unwrap();
    for pid in orphans {
        corral_test_support::send_signal(pid, Signal::SIGKILL);
    }
    // The node is gone, and its clone with it.
    std::fs::remove_dir_all(&c.work).unwrap();

    let out = work(&world, &c);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        transcript(&world.env, &out)
    );
    assert_eq!(branch_commits(&c), ["Write t1 t1"], "one commit");
    let events: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let started: Vec<&Value> = events
        .iter()
        .filter(|e| e["event"] == "task-started")
        .collect();
    assert_eq!(started.len(), 1, "{events:#?}");
    assert_eq!(
        (&started[0]["round"], &started[0]["step"]),
        (&json!(1), &json!("generate")),
        "resumed at the recorded round and step, not from the start: {events:#?}"
    );
    assert!(
        !events.iter().any(|e| e["step"] == "pre-verify"),
        "the check before the task is not run again: {events:#?}"
    );
    let task = recorded_task(&c).unwrap();
    assert_eq!(task["status"], "done", "{task}");
    assert_eq!(
        task["round"], 1,
        "resumed at round 1, not counted again: {task}"
    );
    assert!(!exists(
        &c.work.join(".corral/sprints/it/implement/t1/rounds/2")
    ));
    // The record came back with the round: the report of the check before the task is there
    // though the new clone never ran it; round 1 was asked again (it never reported).
    assert!(exists(
        &c.work
            .join(".corral/sprints/it/implement/t1/pre-verify.txt")
    ));
    assert!(world.api.spawn_requests(&hung).len() >= 2);
}

#[test]
fn a_gated_work_run_says_it_is_ready_and_runs_no_round_until_its_gate_is_pushed() {
    const GATE: &str = "refs/corral/it/t1/gate/job-1";
    let world = World::new(&CLAUDE, |_| scenario(false));
    let c = cluster(&world);
    let stdout = world.project().parent().unwrap().join("work.stdout");
    let mut cmd = worker_command(&world, &c);
    cmd.args(["--gate", GATE])
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&stdout).unwrap())
        .stderr(Stdio::null());
    let mut child = cmd.spawn().unwrap();
    let said = || std::fs::read_to_string(&stdout).unwrap_or_default();
    assert!(
        wait_until(Duration::from_secs(120), || said()
            .contains(r#""kind":"ready""#)),
        "no ready line: {}",
        said()
    );
    // Long enough for a worker that ignored its gate to start its round and record it.
    std::thread::sleep(Duration::from_secs(2));
    assert!(child.try_wait().unwrap().is_none(), "{}", said());
    assert!(recorded_task(&c).is_none(), "{:?}", recorded_task(&c));
    assert!(
        world.api.model_requests().is_empty(),
        "{:#?}",
        world.api.requests()
    );
    let ready: Value = serde_json::from_str(said().lines().next().unwrap()).unwrap();
    crate::schemas::Schema::load("sprint-work.schema.json").check("the ready line", &ready);
    assert_eq!(
        (&ready["task"], &ready["gate"]),
        (&json!("t1"), &json!(GATE))
    );

    git(&c.remote, &["update-ref", GATE, &c.base]);
    assert!(
        wait_until(RUN_CAP, || child.try_wait().unwrap().is_some()),
        "the worker did not go on once its gate was there: {}",
        said()
    );
    assert_eq!(child.wait().unwrap().code(), Some(0), "{}", said());
    assert_eq!(branch_commits(&c), ["Write t1 t1"], "{}", said());
    let refs = git_out(&c.remote, &["for-each-ref", "--format=%(refname)"]);
    assert!(!refs.contains("/gate/"), "the gate is removed: {refs}");
}

/// The gate gone from the remote before the worker ends (an operator's clean-up): the worker's
/// last push, which deletes it with the record and the branch, still lands both, and the
/// worker ends as done.
#[test]
fn a_gate_removed_by_someone_else_leaves_the_task_branch_pushed() {
    const GATE: &str = "refs/corral/it/t1/gate/job-2";
    let world = World::new(&CLAUDE, |_| scenario(false));
    let c = cluster(&world);
    git(&c.remote, &["update-ref", GATE, &c.base]);
    let mut cmd = worker_command(&world, &c);
    cmd.args(["--gate", GATE])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut child = cmd.spawn().unwrap();
    assert!(
        wait_until(Duration::from_secs(300), || !world
            .api
            .model_requests()
            .is_empty()),
        "the worker passed its gate and asked the model: {:#?}",
        world.api.requests()
    );
    git(&c.remote, &["update-ref", "-d", GATE]);
    assert!(
        wait_until(RUN_CAP, || child.try_wait().unwrap().is_some()),
        "the worker ends"
    );
    assert_eq!(child.wait().unwrap().code(), Some(0));
    assert_eq!(branch_commits(&c), ["Write t1 t1"]);
    assert_eq!(
        recorded_task(&c).map(|t| t["status"].clone()),
        Some(json!("done")),
        "the last record landed too"
    );
}

/// Issue 37: a clone left in the work dir by another run of a sprint of the same name and task
/// is not taken as this run's work: the task runs afresh (the model is asked), and the record
/// pushed names this run.
#[test]
fn a_work_run_of_another_run_in_the_same_work_dir_runs_its_task_afresh() {
    let world = World::new(&CLAUDE, |_| {
        let mut twice = scenario(false);
        twice.spawns.extend(scenario(false).spawns);
        twice
    });
    let c = cluster(&world);
    let out = work(&world, &c);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        transcript(&world.env, &out)
    );
    let asked = world.api.model_requests().len();

    let args: Vec<String> = work_args(&c)
        .into_iter()
        .map(|a| if a == "run-w" { "run-x".to_owned() } else { a })
        .collect();
    let out = world
        .env
        .corral()
        .envs(world.vars().iter().map(|(k, v)| (k, v)))
        .envs(identity())
        .timeout(RUN_CAP * 3)
        .args(&args)
        .output()
        .unwrap();
    let shown = transcript(&world.env, &out);
    assert_eq!(out.status.code(), Some(0), "{shown}");
    assert!(
        world.api.model_requests().len() > asked,
        "the model was asked for the second run's task: {shown}"
    );
    let owner: Value = serde_json::from_str(&git_out(
        &c.remote,
        &["show", &format!("{RECORD}:implement/t1/worker.json")],
    ))
    .unwrap();
    assert_eq!(owner["runId"], "run-x", "{owner}");
    assert_eq!(
        git_out(
            &c.remote,
            &[
                "log",
                "-1",
                "--format=%(trailers:key=Corral-Run,valueonly)",
                BRANCH
            ]
        ),
        "run-x",
        "the branch holds the second run's commit"
    );
    assert_eq!(
        branch_commits(&c),
        ["Write t1 t1"],
        "one commit, on the base"
    );
}
