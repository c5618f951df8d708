//! `corral sprint run --executor ray` against a real two-node Ray cluster on 127.0.0.1 (the
//! test-support harness; skipped outside CI when Ray is not installed, a failure in CI): each
//! task one job whose entrypoint is `corral sprint work`, cloning from a `file://` bare remote;
//! the coordinator folds the branches the jobs push back.
//!
//! One cluster for the whole story (starting one costs 15-25 s), told in four acts:
//! 1. a four-task sprint, three tasks through a stand-in agent (a shell script in place of
//!    Claude Code) and one through the real Claude Code against the fake model API; one of the
//!    stand-in's tasks fails its check in round 1, and its job is stopped through the Jobs API
//!    in the middle of round 2: the executor resubmits it and the task resumes at round 2;
//! 2. a second sprint with `--jobs 1`, interrupted with SIGINT while one task runs and the
//!    other's job, started ahead, waits at its gate (no round of it ran): exit 130, both jobs
//!    stopped on the cluster, no worker left;
//! 3. the same run again, killed with SIGKILL in the same place: its jobs are left running;
//! 4. that sprint run again: it stops the jobs the killed run left, continues and folds its
//!    tasks.
//!
//! Issue 37's tests start their own clusters: a sprint named like an earlier one runs its own
//! task (not the earlier clone or record), and directories another user made first are left
//! alone; a task's learning reaches its dependent's brief; a 429 met on one node holds the
//! account's spawns on the other (its own `HOME`) until the reset.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use corral_test_support::Signal;
use corral_test_support::fake_api::{Role, Scenario, Step};
use corral_test_support::ray_cluster::{RayCluster, require_ray};
use serde_json::{Value, json};

use crate::providers::{CLAUDE, RUN_CAP, World};
use crate::support::*;

const TS: &str = "2026-12-02T10:00:00Z";
/// The four tasks of the first sprint: `t4` through the real Claude Code, the others through
/// the stand-in; `t3` needs two rounds and its job is stopped in the second.
const TASKS: [&str; 4] = ["t1", "t2", "t3", "t4"];
const REAL: &str = "t4";
const STOPPED: &str = "t3";
/// The task whose stand-in reports [`LEARNING`], and the task depending on it, through the
/// real Claude Code (the fake model API records its brief).
const LEARNER: &str = "l1";
const DEPENDENT: &str = "l2";
const LEARNING: &str = "LEARNED-BY-L1: the fixtures are generated, never edited";
/// The task whose stand-in writes when it was spawned and with which `HOME` (`<epoch s> <home>`).
const GATED: &str = "g2";
/// The second sprint's tasks, held by the stand-in until the test lets them go.
const HELD: [&str; 2] = ["c1", "c2"];
/// The check of both sprints: a task whose file still says TODO is not done.
const CHECK: &str = "! grep -qs TODO *.txt";

/// The stand-in for Claude Code. The sprint's spawn directory
/// (`…/implement/<task>/rounds/<N>/generator/signals.json`, named in the prompt) names the task
/// and the round. `t4` goes to the real Claude Code; `t3` writes TODO in round 1 (the check
/// fails) and in round 2 waits for the file `GO_STOPPED`; the `c` tasks wait for `GO_HELD`; a
/// task whose prompt says `create NAME.txt` gets that file; `l1` reports a learning and `l2`
/// (which depends on it) goes to the real Claude Code.
const STAND_IN: &str = r#"#!/bin/sh
if [ "$1" = "--version" ]; then exec "REAL_CLAUDE" "$@"; fi
PROMPT=$(cat)
SIGNALS=$(printf '%s\n' "$PROMPT" | grep -o '/[^`]*signals\.json' | head -n 1)
R=${SIGNALS%/generator/signals.json}; ROUND=${R##*/}; T=${R%/rounds/*}; TASK=${T##*/}
if [ "$TASK" = "REAL_TASK" ] || [ "$TASK" = "DEPENDENT_TASK" ]; then printf '%s\n' "$PROMPT" | "REAL_CLAUDE" "$@"; exit $?; fi
echo '{"type":"system","subtype":"init","session_id":"0b8f5a7e-3c1d-4e2f-9a6b-5d4c3b2a1f00","model":"claude-opus-4-8"}'
TEXT=done
case "$TASK.$ROUND" in
  STOPPED_TASK.1) TEXT=TODO ;;
  STOPPED_TASK.*) GATE="GO_STOPPED" ;;
  c*) GATE="GO_HELD" ;;
esac
if [ -n "$GATE" ]; then
  n=0; while [ ! -e "$GATE" ] && [ $n -lt 1200 ]; do sleep 0.1; n=$((n+1)); done
fi
NAMED=$(printf '%s\n' "$PROMPT" | grep -o 'create [a-z]*\.txt' | head -n 1)
if [ -n "$NAMED" ]; then echo made > "${NAMED#create }"; else echo "$TEXT" > "$TASK.txt"; fi
if [ "$TASK" = "HELD_BY_GATE" ]; then echo "$(date +%s) $HOME" > "$TASK.txt"; fi
LEARN=
if [ "$TASK" = "LEARNER_TASK" ]; then LEARN=',{"type":"learning","timestamp":"2026-12-01T10:00:00Z","text":"LEARNING_TEXT"}'; fi
printf '{"schemaVersion":1,"signals":[{"type":"task-complete","timestamp":"2026-12-01T10:00:00Z"}%s]}' "$LEARN" > "$SIGNALS"
echo '{"type":"result","subtype":"success","is_error":false,"result":"done","session_id":"0b8f5a7e-3c1d-4e2f-9a6b-5d4c3b2a1f00","total_cost_usd":0.001,"usage":{"input_tokens":10,"output_tokens":5}}'
"#;

fn round(task: &str) -> Vec<Step> {
    let signals = json!({"schemaVersion": 1, "signals": [
        {"type": "task-complete", "timestamp": TS},
        {"type": "commit-message", "timestamp": TS, "subject": format!("Write {task}")},
    ]})
    .to_string();
    // In the worker's clone, wherever it is: the worker keeps it in a private directory.
    let write = format!("printf ok > {task}.txt");
    vec![
        Step::tool_use("Bash", json!({"command": write, "description": "write"})),
        Step::write_signals_for(CLAUDE.bin, signals).unwrap(),
        Step::text("Done."),
    ]
}

fn sprint_file(name: &str, tasks: &[&str]) -> String {
    let prompts: Vec<(&str, String)> = tasks
        .iter()
        .map(|task| (*task, format!("Write ok to {task}.txt.")))
        .collect();
    sprint_file_with(name, &prompts)
}

/// The sprint `name` of the tasks `(id, prompt)`.
fn sprint_file_with(name: &str, tasks: &[(&str, String)]) -> String {
    let mut file = format!(
        "[sprint]\nname = \"{name}\"\ncheck = \"{CHECK}\"\ncheck_timeout_ms = 60000\n\
         max_rounds = 3\nmax_attempts = 2\n\n[roles.generator]\nprovider = \"claude\"\n\n\
         [roles.evaluator]\nprovider = \"claude\"\nenabled = false\n"
    );
    for (task, prompt) in tasks {
        file.push_str(&format!(
            "\n[[tasks]]\nid = \"{task}\"\ntitle = \"Write {task}\"\nprompt = \"{prompt}\"\n"
        ));
    }
    file
}

fn git_out(dir: &Path, args: &[&str]) -> String {
    let out = corral_test_support::command(Path::new("git"))
        .current_dir(dir)
        .args(args)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// The task's state as its record on the remote holds it.
fn recorded_task(remote: &Path, sprint: &str, task: &str) -> Option<Value> {
    let shown = git_out(
        remote,
        &[
            "show",
            &format!("refs/corral/{sprint}/{task}/record:implement/{task}/task.json"),
        ],
    );
    serde_json::from_str(&shown).ok()
}

/// The running jobs of `sprint`'s task `task` (any task when `None`), by submission id.
fn jobs_of(cluster: &RayCluster, sprint: &str, task: Option<&str>, status: &str) -> Vec<String> {
    cluster
        .jobs()
        .iter()
        .filter(|job| job["metadata"]["corral.sprint"] == sprint)
        .filter(|job| task.is_none_or(|t| job["metadata"]["corral.task"] == t))
        .filter(|job| job["status"] == status)
        .filter_map(|job| job["submission_id"].as_str().map(str::to_owned))
        .collect()
}

/// Like [`wait_until`], polling every 250 ms (the Jobs API and git are not free).
fn wait_for(timeout: Duration, mut done: impl FnMut() -> bool) -> bool {
    wait_until(timeout, || {
        done() || {
            std::thread::sleep(Duration::from_millis(250));
            false
        }
    })
}

/// The `Corral-Task:` trailers of the commits on `branch` since `since`, sorted.
fn folded_tasks(project: &Path, since: &str, branch: &str) -> Vec<String> {
    let mut tasks: Vec<String> = git_out(
        project,
        &[
            "log",
            "--format=%(trailers:key=Corral-Task,valueonly)",
            &format!("{since}..{branch}"),
        ],
    )
    .lines()
    .map(|l| l.trim().to_owned())
    .filter(|l| !l.is_empty())
    .collect();
    tasks.sort();
    tasks
}

/// The processes whose command line names `needle` (the test's scratch directory: every
/// worker's `--remote` and the stand-in's path are under it).
fn processes_naming(needle: &Path) -> Vec<String> {
    let needle = needle.display().to_string();
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.parse::<u32>().is_ok())
        })
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|c| {
            String::from_utf8_lossy(&c)
                .split('\0')
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .filter(|args| names_outside_a_mask(args, &needle))
        .map(|args| args.join(" "))
        .collect()
}

/// Whether an argument names `needle` other than as the target of `--ro-bind /dev/null`: a
/// sandboxed run of another test masks every unix socket of the host that way, this test's Ray
/// sockets among them, and is no process of this test.
fn names_outside_a_mask(args: &[String], needle: &str) -> bool {
    args.iter().enumerate().any(|(i, arg)| {
        let masked = i >= 2 && args[i - 2] == "--ro-bind" && args[i - 1] == "/dev/null";
        arg.contains(needle) && !masked
    })
}

#[test]
fn a_sprint_through_ray_runs_each_task_as_a_job_resumes_a_stopped_job_and_stops_its_jobs_on_ctrl_c()
{
    let Some(venv) = require_ray() else {
        return;
    };
    let world = World::new(&CLAUDE, |_| {
        Scenario::default().with_round(Role::Generator, REAL, 1, round(REAL))
    });
    let project = world.project();
    let scratch = project.parent().unwrap().to_path_buf();
    let tmp = scratch.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let go_stopped = scratch.join("go-stopped");
    let go_held = scratch.join("go-held");
    // The coordinator's environment; its `CORRAL_` variables reach the jobs.
    let vars = with_stand_in(&world, &scratch, &go_stopped, &go_held);

    std::fs::write(
        project.join("corral-sprint.toml"),
        sprint_file("ray", &TASKS),
    )
    .unwrap();
    std::fs::write(project.join(".gitignore"), ".corral/\n").unwrap();
    git(&project, &["init", "-q", "-b", "main"]);
    git(&project, &["config", "user.email", "it@example.invalid"]);
    git(&project, &["config", "user.name", "it"]);
    git(&project, &["add", "-A"]);
    git(&project, &["commit", "-q", "-m", "start"]);
    let remote = scratch.join("remote.git");
    git(
        &project,
        &["init", "-q", "--bare", &remote.display().to_string()],
    );
    let remote_url = format!("file://{}", remote.display());
    git(&project, &["push", "-q", &remote_url, "main"]);

    // What a worker node's image provides: the world's variables, a home, a git identity.
    let mut node_env: Vec<(String, String)> = world.vars().to_vec();
    node_env.push(("HOME".into(), world.env.home().display().to_string()));
    for (k, v) in [
        ("GIT_AUTHOR_NAME", "it"),
        ("GIT_AUTHOR_EMAIL", "it@example.invalid"),
        ("GIT_COMMITTER_NAME", "it"),
        ("GIT_COMMITTER_EMAIL", "it@example.invalid"),
        ("TMPDIR", &tmp.display().to_string()),
    ] {
        node_env.push((k.into(), v.into()));
    }
    let cluster = RayCluster::start_with_env(&venv, &node_env).expect("the cluster starts");
    let sprint_run = |jobs: &str| {
        let mut cmd = corral_test_support::command(&assert_cmd::cargo::cargo_bin("corral"));
        cmd.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", world.env.home())
            .envs(vars.iter().map(|(k, v)| (k, v)))
            .env("TMPDIR", &tmp)
            .env("CORRAL_EXECUTOR__RAY__ADDRESS", cluster.address())
            .env("CORRAL_EXECUTOR__RAY__REMOTE", &remote_url)
            .env("CORRAL_EXECUTOR__RAY__ENTRYPOINT_NUM_CPUS", "0.5")
            .current_dir(&project)
            .stdin(Stdio::null())
            .args(["sprint", "run", "--jobs", jobs, "--executor", "ray"]);
        cmd
    };
    let transcript_of = |out: &std::process::Output| transcript(&world.env, out);

    // Act 1: four tasks; t3's job stopped in the middle of round 2.
    let mut child = spawn_logged(&mut sprint_run("4"), &scratch, "run-1");
    let in_round_2 = wait_for(RUN_CAP, || {
        child.0.try_wait().unwrap().is_some()
            || recorded_task(&remote, "ray", STOPPED)
                .is_some_and(|t| t["round"] == 2 && t["progress"]["step"] == "generate")
    }) && child.0.try_wait().unwrap().is_none();
    let running = jobs_of(&cluster, "ray", Some(STOPPED), "RUNNING");
    if !in_round_2 || running.len() != 1 {
        let out = wait_with_cap(child, Duration::ZERO);
        panic!(
            "t3 never reached round 2 in a running job ({running:?}): {}",
            transcript_of(&out)
        );
    }
    assert!(
        cluster.stop_job(&running[0]),
        "the Jobs API stops {}",
        running[0]
    );
    assert!(
        wait_for(Duration::from_secs(60), || cluster
            .job_status(&running[0])
            .is_some_and(|s| s == "STOPPED")),
        "{} is stopped",
        running[0]
    );
    std::fs::write(&go_stopped, "").unwrap();
    let out = wait_with_cap(child, RUN_CAP);
    assert_eq!(out.status.code(), Some(0), "{}", transcript_of(&out));
    check_act_one(&project, &remote, &transcript_of(&out));

    // Act 2: a second sprint with one slot, interrupted; act 3: the same, killed.
    std::fs::write(
        project.join("corral-sprint.toml"),
        sprint_file("ray-int", &HELD),
    )
    .unwrap();
    git(&project, &["commit", "-q", "-am", "second sprint"]);
    let interrupt = |signal, name| {
        interrupt_with_one_slot(
            &project,
            &scratch,
            &remote,
            &cluster,
            (&sprint_run, &transcript_of),
            signal,
            name,
        )
    };
    interrupt(Signal::SIGINT, "run-2");
    let left = interrupt(Signal::SIGKILL, "run-3");

    // Act 4: run again; it stops the jobs the killed run left (still held: they would finish
    // and push beside it), then continues.
    let child = spawn_logged(&mut sprint_run("4"), &scratch, "run-4");
    let stopped = wait_for(Duration::from_secs(120), || {
        left.iter()
            .all(|id| cluster.job_status(id).as_deref() == Some("STOPPED"))
    });
    std::fs::write(&go_held, "").unwrap();
    let out = wait_with_cap(child, RUN_CAP);
    assert!(
        stopped,
        "the jobs the killed run left are stopped ({:?}): {}",
        left.iter()
            .map(|id| cluster.job_status(id))
            .collect::<Vec<_>>(),
        transcript_of(&out)
    );
    assert_eq!(out.status.code(), Some(0), "{}", transcript_of(&out));
    assert_eq!(
        folded_tasks(&project, "corral/ray", "corral/ray-int"),
        HELD,
        "{}",
        transcript_of(&out)
    );

    let temp_dir = cluster.temp_dir().to_path_buf();
    drop(cluster);
    assert!(
        RayCluster::leftovers(&temp_dir).is_empty(),
        "no Ray process is left"
    );
}

/// A project at `dir` holding `sprint` (committed on `main`), pushed to the bare `remote`.
fn project_with(dir: &Path, sprint: &str, remote: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("corral-sprint.toml"), sprint).unwrap();
    std::fs::write(dir.join(".gitignore"), ".corral/\n").unwrap();
    git(dir, &["init", "-q", "-b", "main"]);
    git(dir, &["config", "user.email", "it@example.invalid"]);
    git(dir, &["config", "user.name", "it"]);
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", "start"]);
    if !remote.exists() {
        git(
            dir,
            &["init", "-q", "--bare", &remote.display().to_string()],
        );
    }
    let url = format!("file://{}", remote.display());
    git(dir, &["push", "-q", "--force", &url, "main"]);
}

/// The user this test runs as (the owner of `/proc/self`).
fn own_uid() -> u32 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").unwrap().uid()
}

/// `path` (and what is below it) given to the user `nobody` (65534).
fn give_to_nobody(path: &Path) {
    let out = corral_test_support::command(Path::new("chown"))
        .args(["-R", "65534:65534"])
        .arg(path)
        .output()
        .unwrap();
    assert!(out.status.success(), "chown: {out:?}");
}

/// The names in `dir`, sorted.
fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// Issue 37: a sprint of the same name and task id as one run earlier through the same cluster
/// and remote (another repository, another prompt) runs its own task: the earlier one's clone
/// on the node and its record on the remote are not taken as its work. Then directories another
/// user made first where a worker once cloned (`$TMPDIR/corral-work/<sprint>/<task>`) and where
/// it now keeps its private ones (`$TMPDIR/corral-<uid>`) are left alone by a third sprint.
#[test]
fn a_sprint_named_like_an_earlier_one_runs_its_own_task_not_the_earlier_clone_or_record() {
    let Some(venv) = require_ray() else {
        return;
    };
    let world = World::new(&CLAUDE, |_| Scenario::default());
    let scratch = world.project().parent().unwrap().to_path_buf();
    let tmp = scratch.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let vars = with_stand_in(
        &world,
        &scratch,
        &scratch.join("go-stopped"),
        &scratch.join("go-held"),
    );
    let remote = scratch.join("remote.git");
    let remote_url = format!("file://{}", remote.display());
    let first = scratch.join("first");
    let second = scratch.join("second");
    let prompt = |file: &str| vec![("t1", format!("Please create {file} here."))];
    project_with(
        &first,
        &sprint_file_with("stale", &prompt("alpha.txt")),
        &remote,
    );

    let mut node_env: Vec<(String, String)> = world.vars().to_vec();
    node_env.push(("HOME".into(), world.env.home().display().to_string()));
    for (k, v) in [
        ("GIT_AUTHOR_NAME", "it"),
        ("GIT_AUTHOR_EMAIL", "it@example.invalid"),
        ("GIT_COMMITTER_NAME", "it"),
        ("GIT_COMMITTER_EMAIL", "it@example.invalid"),
        ("TMPDIR", &tmp.display().to_string()),
    ] {
        node_env.push((k.into(), v.into()));
    }
    let cluster = RayCluster::start_with_env(&venv, &node_env).expect("the cluster starts");
    let sprint_run = |project: &Path, name: &str| {
        let mut cmd = corral_test_support::command(&assert_cmd::cargo::cargo_bin("corral"));
        cmd.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", world.env.home())
            .envs(vars.iter().map(|(k, v)| (k, v)))
            .env("TMPDIR", &tmp)
            .env("CORRAL_EXECUTOR__RAY__ADDRESS", cluster.address())
            .env("CORRAL_EXECUTOR__RAY__REMOTE", &remote_url)
            .env("CORRAL_EXECUTOR__RAY__ENTRYPOINT_NUM_CPUS", "0.5")
            .current_dir(project)
            .stdin(Stdio::null())
            .args(["sprint", "run", "--jobs", "1", "--executor", "ray"]);
        wait_with_cap(spawn_logged(&mut cmd, &scratch, name), RUN_CAP)
    };

    let out = sprint_run(&first, "first");
    let shown = transcript(&world.env, &out);
    assert_eq!(out.status.code(), Some(0), "{shown}");
    assert_eq!(
        git_out(&first, &["show", "corral/stale:alpha.txt"]),
        "made",
        "{shown}"
    );

    project_with(
        &second,
        &sprint_file_with("stale", &prompt("beta.txt")),
        &remote,
    );
    let out = sprint_run(&second, "second");
    let shown = transcript(&world.env, &out);
    assert_eq!(out.status.code(), Some(0), "{shown}");
    let files = git_out(&second, &["ls-tree", "--name-only", "corral/stale"]);
    assert!(
        files.lines().any(|f| f == "beta.txt") && !files.lines().any(|f| f == "alpha.txt"),
        "the second sprint's branch holds its own work, not the first's: {files}\n{shown}"
    );
    let task: Value = serde_json::from_str(
        &std::fs::read_to_string(second.join(".corral/sprints/stale/implement/t1/task.json"))
            .unwrap(),
    )
    .unwrap();
    assert_eq!(task["status"], "done", "{task}");

    // Made first by another user (only root may give a directory away): the old fixed path of
    // the next sprint's task, holding a tree of theirs, and the per-user directory.
    if own_uid() == 0 {
        let planted = tmp.join("corral-work/planted/t1");
        std::fs::create_dir_all(&planted).unwrap();
        std::fs::write(planted.join("planted.txt"), "theirs").unwrap();
        give_to_nobody(&tmp.join("corral-work"));
        let own = tmp.join(format!("corral-{}", own_uid()));
        std::fs::set_permissions(&own, std::fs::Permissions::from_mode(0o777)).unwrap();
        give_to_nobody(&own);
        let before = names_in(&own);
        let third = scratch.join("third");
        project_with(
            &third,
            &sprint_file_with("planted", &prompt("gamma.txt")),
            &remote,
        );
        let out = sprint_run(&third, "third");
        let shown = transcript(&world.env, &out);
        assert_eq!(out.status.code(), Some(0), "{shown}");
        assert_eq!(
            git_out(&third, &["show", "corral/planted:gamma.txt"]),
            "made",
            "{shown}"
        );
        assert_eq!(
            names_in(&planted),
            ["planted.txt"],
            "the old path another user made is not used"
        );
        assert_eq!(
            names_in(&own),
            before,
            "the private root another user took is not used"
        );
    }
    drop(cluster);
}

/// Issue 37: a task's learning reaches the generator's brief of the task that depends on it,
/// run as another job on the cluster (on either node, each with its own `HOME`: the learnings
/// go through the remote, not a node's disk), and comes back to the coordinator's
/// `learnings.ndjson`.
#[test]
fn a_tasks_learning_reaches_the_brief_of_its_dependent_run_as_another_job() {
    let Some(venv) = require_ray() else {
        return;
    };
    let world = World::new(&CLAUDE, |_| {
        Scenario::default().with_round(Role::Generator, DEPENDENT, 1, round(DEPENDENT))
    });
    let scratch = world.project().parent().unwrap().to_path_buf();
    let tmp = scratch.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let vars = with_stand_in(
        &world,
        &scratch,
        &scratch.join("go-stopped"),
        &scratch.join("go-held"),
    );
    let remote = scratch.join("remote.git");
    let remote_url = format!("file://{}", remote.display());
    let project = scratch.join("learn");
    let sprint = format!(
        "{}\n[[tasks]]\nid = \"{DEPENDENT}\"\ntitle = \"Write {DEPENDENT}\"\n\
         prompt = \"Write ok to {DEPENDENT}.txt.\"\ndepends_on = [\"{LEARNER}\"]\n",
        sprint_file_with("learn", &[(LEARNER, format!("Write ok to {LEARNER}.txt."))])
    );
    project_with(&project, &sprint, &remote);
    let mut node_env: Vec<(String, String)> = world.vars().to_vec();
    node_env.push(("HOME".into(), world.env.home().display().to_string()));
    for (k, v) in [
        ("GIT_AUTHOR_NAME", "it"),
        ("GIT_AUTHOR_EMAIL", "it@example.invalid"),
        ("GIT_COMMITTER_NAME", "it"),
        ("GIT_COMMITTER_EMAIL", "it@example.invalid"),
        ("TMPDIR", &tmp.display().to_string()),
    ] {
        node_env.push((k.into(), v.into()));
    }
    // Two machines: the second node has its own HOME (a copy of the first's).
    let second_home = scratch.join("second-home");
    let copied = corral_test_support::command(Path::new("cp"))
        .arg("-a")
        .arg(world.env.home())
        .arg(&second_home)
        .status()
        .unwrap();
    assert!(copied.success());
    let second = [("HOME".to_owned(), second_home.display().to_string())];
    let cluster =
        RayCluster::start_with_node_env(&venv, &node_env, &second).expect("the cluster starts");
    let mut cmd = corral_test_support::command(&assert_cmd::cargo::cargo_bin("corral"));
    cmd.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", world.env.home())
        .envs(vars.iter().map(|(k, v)| (k, v)))
        .env("TMPDIR", &tmp)
        .env("CORRAL_EXECUTOR__RAY__ADDRESS", cluster.address())
        .env("CORRAL_EXECUTOR__RAY__REMOTE", &remote_url)
        .env("CORRAL_EXECUTOR__RAY__ENTRYPOINT_NUM_CPUS", "0.5")
        .current_dir(&project)
        .stdin(Stdio::null())
        .args(["sprint", "run", "--jobs", "2", "--executor", "ray"]);
    let out = wait_with_cap(spawn_logged(&mut cmd, &scratch, "learn"), RUN_CAP);
    let shown = transcript(&world.env, &out);
    assert_eq!(out.status.code(), Some(0), "{shown}");
    let briefs: Vec<String> = world
        .api
        .model_requests()
        .into_iter()
        .filter_map(|r| r.last_user_text)
        .collect();
    assert!(
        briefs.iter().any(|b| b.contains(LEARNING)),
        "{DEPENDENT}'s brief shows what {LEARNER} learned: {briefs:#?}\n{shown}"
    );
    let learnings = std::fs::read_to_string(project.join(".corral/sprints/learn/learnings.ndjson"))
        .unwrap_or_default();
    assert!(
        learnings.contains(LEARNING),
        "the learning is the coordinator's: {learnings}\n{shown}"
    );
    // Each remote task's steps are in the sprint's events.jsonl, written by the coordinator
    // from what its worker printed (issue 31), as a local task's are: its start, its spawn and
    // its end, each with the two times.
    let events =
        std::fs::read_to_string(project.join(".corral/sprints/learn/events.jsonl")).unwrap();
    let events = corral_sprint::read_events(&events);
    for task in [LEARNER, DEPENDENT] {
        for name in ["task-started", "spawn-started", "task-finished"] {
            assert!(
                events.iter().any(|e| e["event"] == name
                    && e["task"] == task
                    && e.contains_key("wallTime")
                    && e.contains_key("monotonicMs")),
                "{task}'s {name} is in events.jsonl: {events:#?}\n{shown}"
            );
        }
    }
    drop(cluster);
}

/// Issue 37: a 429 with a usage-limit reset time met by a task's generator on one node holds
/// the same account's spawns on the other node (its own `HOME`, so its own gate on disk) until
/// the reset: the worker publishes the hold on the remote (`refs/corral/holds/claude`), and the
/// other worker takes it into its node's gate. `t4` (the real Claude Code) meets the 429; `g2`
/// is kept in its check before its first round until the hold is on the remote, then its
/// stand-in says when it was spawned.
#[test]
fn a_rate_limit_met_on_one_node_holds_the_accounts_spawns_on_the_other_until_its_reset() {
    let Some(venv) = require_ray() else {
        return;
    };
    // From before the cluster starts (15-25 s) and the jobs reach their rounds.
    let reset = SystemTime::now() + Duration::from_secs(75);
    let reset_s = reset.duration_since(UNIX_EPOCH).unwrap().as_secs();
    let limited = format!(
        r#"{{"type":"error","error":{{"type":"rate_limit_error","message":"Claude AI usage limit reached|{reset_s}"}}}}"#
    );
    let world = World::new(&CLAUDE, |_| {
        // Claude Code retries even a usage limit on its own: each of its requests meets it.
        let mut steps = vec![
            Step::HttpError {
                status: 429,
                retry_after_secs: None,
                body: Some(limited),
            };
            CLAUDE.requests_per_failed_call
        ];
        steps.extend(round(REAL));
        Scenario::default().with_round(Role::Generator, REAL, 1, steps)
    });
    let scratch = world.project().parent().unwrap().to_path_buf();
    let tmp = scratch.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let vars = with_stand_in(
        &world,
        &scratch,
        &scratch.join("go-stopped"),
        &scratch.join("go-held"),
    );
    let go = scratch.join("go-gated");
    let remote = scratch.join("remote.git");
    let remote_url = format!("file://{}", remote.display());
    let project = scratch.join("gate");
    // The check holds g2 (its record directory is in its clone) until the test lets it go.
    let check = format!(
        "n=0; while [ -d .corral/sprints/gate/implement/{GATED} ] && [ ! -e {} ] && [ $n -lt 550 ]; do sleep 0.1; n=$((n+1)); done; true",
        go.display()
    );
    let mut sprint = format!(
        "[sprint]\nname = \"gate\"\ncheck = '{check}'\ncheck_timeout_ms = 60000\n\
         max_rounds = 3\nmax_attempts = 2\n\n[roles.generator]\nprovider = \"claude\"\n\n\
         [roles.evaluator]\nprovider = \"claude\"\nenabled = false\n"
    );
    for task in [REAL, GATED] {
        sprint.push_str(&format!(
            "\n[[tasks]]\nid = \"{task}\"\ntitle = \"Write {task}\"\nprompt = \"Write ok to {task}.txt.\"\n"
        ));
    }
    project_with(&project, &sprint, &remote);
    let mut node_env: Vec<(String, String)> = world.vars().to_vec();
    node_env.push(("HOME".into(), world.env.home().display().to_string()));
    for (k, v) in [
        ("GIT_AUTHOR_NAME", "it"),
        ("GIT_AUTHOR_EMAIL", "it@example.invalid"),
        ("GIT_COMMITTER_NAME", "it"),
        ("GIT_COMMITTER_EMAIL", "it@example.invalid"),
        ("TMPDIR", &tmp.display().to_string()),
    ] {
        node_env.push((k.into(), v.into()));
    }
    // The second machine: a copy of the first's home, its own all the same.
    let second_home = scratch.join("second-home");
    let copied = corral_test_support::command(Path::new("cp"))
        .arg("-a")
        .arg(world.env.home())
        .arg(&second_home)
        .status()
        .unwrap();
    assert!(copied.success());
    let second = [("HOME".to_owned(), second_home.display().to_string())];
    let cluster =
        RayCluster::start_with_node_env(&venv, &node_env, &second).expect("the cluster starts");
    let mut cmd = corral_test_support::command(&assert_cmd::cargo::cargo_bin("corral"));
    cmd.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", world.env.home())
        .envs(vars.iter().map(|(k, v)| (k, v)))
        .env("TMPDIR", &tmp)
        .env("CORRAL_EXECUTOR__RAY__ADDRESS", cluster.address())
        .env("CORRAL_EXECUTOR__RAY__REMOTE", &remote_url)
        .env("CORRAL_EXECUTOR__RAY__ENTRYPOINT_NUM_CPUS", "1")
        .current_dir(&project)
        .stdin(Stdio::null())
        .args(["sprint", "run", "--jobs", "2", "--executor", "ray"]);
    let child = spawn_logged(&mut cmd, &scratch, "gate");
    // t4's attempt ends limited only once Claude Code has used its own retries (each meets
    // the limit): its hold is published after the last of them, not the first.
    let limited_once = wait_for(Duration::from_secs(70), || {
        world
            .api
            .model_requests()
            .iter()
            .filter(|r| r.step.as_deref() == Some("http_error"))
            .count()
            >= CLAUDE.requests_per_failed_call
    });
    // Long enough for the hold to be published and taken (each worker passes holds every
    // second).
    std::thread::sleep(Duration::from_secs(4));
    std::fs::write(&go, "").unwrap();
    let out = wait_with_cap(child, RUN_CAP);
    let shown = transcript(&world.env, &out);
    // Which node ran which task: Ray places the jobs (with a CPU each, on the head's two and
    // the second node's one, the two have gone to different nodes in every run seen, either
    // way round), so say it: each node's gate on disk, and g2's HOME.
    for home in [world.env.home(), second_home] {
        let gate = names_in(&home.join(".local/state/corral/rate-limits"));
        eprintln!("the gate under {}: {gate:?}", home.display());
    }
    let said = git_out(&project, &["show", &format!("corral/gate:{GATED}.txt")]);
    eprintln!("{GATED} said: {said}");
    let (spawned_s, home) = said.split_once(' ').unwrap_or(("0", ""));
    let spawned_s: u64 = spawned_s.parse().unwrap_or(0);
    assert!(
        spawned_s >= reset_s,
        "{GATED} was spawned at {spawned_s}, {} s before the reset {reset_s} (on HOME {home}): {shown}",
        reset_s.saturating_sub(spawned_s)
    );
    assert!(limited_once, "t4 met its 429: {shown}");
    assert!(
        !git_out(&remote, &["for-each-ref", "refs/corral/holds/"]).is_empty(),
        "the hold was published on the remote: {shown}"
    );
    assert_eq!(out.status.code(), Some(0), "{shown}");
    drop(cluster);
}

/// How a test runs the sprint (`--jobs` given) and shows what a run printed.
type Runs<'a> = (
    &'a dyn Fn(&str) -> std::process::Command,
    &'a dyn Fn(&std::process::Output) -> String,
);

/// Acts 2 and 3: the sprint of two held tasks with `--jobs 1`, sent `signal` while c1 runs and
/// c2's job, started ahead, waits at its gate: no round of c2 ran. SIGINT stops both jobs
/// and leaves no worker; SIGKILL leaves them running. The jobs, as they were.
fn interrupt_with_one_slot(
    project: &Path,
    scratch: &Path,
    remote: &Path,
    cluster: &RayCluster,
    (sprint_run, transcript_of): Runs<'_>,
    signal: Signal,
    name: &str,
) -> Vec<String> {
    let mut child = spawn_logged(&mut sprint_run("1"), scratch, name);
    // The newest job's log of c2: each run's jobs are its first attempts.
    let c2_dir = project.join(".corral/sprints/ray-int/implement/c2");
    let _ = std::fs::remove_file(c2_dir.join("ray-job-1.log"));
    let waiting_log = c2_dir.join("ray-job-1.log");
    // What was last seen of each condition, for the message when they are not all met.
    let mut seen = (None, Vec::new(), false);
    let held = wait_for(RUN_CAP, || {
        if child.0.try_wait().unwrap().is_some() {
            return true;
        }
        seen = (
            recorded_task(remote, "ray-int", "c1").map(|s| s["progress"]["step"].clone()),
            jobs_of(cluster, "ray-int", None, "RUNNING"),
            std::fs::read_to_string(&waiting_log)
                .is_ok_and(|log| log.contains(r#""kind":"ready""#)),
        );
        seen.0.as_ref().is_some_and(|step| step == "generate")
            && seen.1.len() == HELD.len()
            && seen.2
    }) && child.0.try_wait().unwrap().is_none();
    // Long enough for a worker that ignored its gate to reach its round.
    std::thread::sleep(Duration::from_secs(2));
    let c2_recorded = recorded_task(remote, "ray-int", "c2");
    let jobs = jobs_of(cluster, "ray-int", None, "RUNNING");
    corral_test_support::send_signal(child.0.id(), signal);
    let out = wait_with_cap(child, Duration::from_secs(120));
    assert!(
        held,
        "c1 ran, c2's job waited at its gate (last seen: c1's recorded step {:?}, jobs running \
         {:?}, c2 ready {}): {}",
        seen.0,
        seen.1,
        seen.2,
        transcript_of(&out)
    );
    assert!(
        c2_recorded.is_none(),
        "no round of c2 while c1 held the one slot: {c2_recorded:?}"
    );
    assert!(
        transcript_of(&out).contains("started ahead, each waiting for a free slot: c2"),
        "{}",
        transcript_of(&out)
    );
    if signal == Signal::SIGKILL {
        assert_eq!(out.status.code(), None, "{}", transcript_of(&out));
        assert_eq!(jobs.len(), HELD.len(), "{jobs:?}");
        return jobs;
    }
    assert_eq!(out.status.code(), Some(130), "{}", transcript_of(&out));
    for id in &jobs {
        assert_eq!(
            cluster.job_status(id).as_deref(),
            Some("STOPPED"),
            "{id} is stopped on the cluster"
        );
    }
    assert!(
        wait_for(Duration::from_secs(30), || processes_naming(scratch)
            .is_empty()),
        "no worker or agent left: {:#?}",
        processes_naming(scratch)
    );
    jobs
}

/// The world's variables with Claude Code's command replaced by the stand-in, written into
/// `scratch` with its gates at `go_stopped` and `go_held`.
fn with_stand_in(
    world: &World,
    scratch: &Path,
    go_stopped: &Path,
    go_held: &Path,
) -> Vec<(String, String)> {
    let claude_key = "CORRAL_PROVIDERS__CLAUDE__COMMAND";
    let real_claude = world
        .vars()
        .iter()
        .find(|(k, _)| k == claude_key)
        .map(|(_, v)| v.clone())
        .unwrap();
    let stand_in = scratch.join("claude-stand-in");
    std::fs::write(
        &stand_in,
        STAND_IN
            .replace("REAL_CLAUDE", &real_claude)
            .replace("REAL_TASK", REAL)
            .replace("DEPENDENT_TASK", DEPENDENT)
            .replace("HELD_BY_GATE", GATED)
            .replace("LEARNER_TASK", LEARNER)
            .replace("LEARNING_TEXT", LEARNING)
            .replace("STOPPED_TASK", STOPPED)
            .replace("GO_STOPPED", &go_stopped.display().to_string())
            .replace("GO_HELD", &go_held.display().to_string()),
    )
    .unwrap();
    std::fs::set_permissions(&stand_in, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut vars: Vec<(String, String)> = world
        .vars()
        .iter()
        .filter(|(k, _)| k != claude_key)
        .cloned()
        .collect();
    vars.push((claude_key.into(), stand_in.display().to_string()));
    vars
}

/// Act 1's end: every task folded once with its file and log, and `t3` resumed at round 2 by
/// its resubmitted job, not run again from round 1.
fn check_act_one(project: &Path, remote: &Path, transcript: &str) {
    assert_eq!(
        folded_tasks(project, "main", "corral/ray"),
        TASKS,
        "every task folded once onto corral/ray: {transcript}"
    );
    for task in TASKS {
        let shown = git_out(project, &["show", &format!("corral/ray:{task}.txt")]);
        let expected = if task == REAL { "ok" } else { "done" };
        assert_eq!(shown, expected, "{task}.txt on corral/ray");
        let task_dir = project.join(".corral/sprints/ray/implement").join(task);
        let log = std::fs::read_to_string(task_dir.join("ray-job-1.log")).unwrap_or_default();
        assert!(
            log.contains("\"handback\"") || task == STOPPED,
            "{task}'s job log is kept in the sprint's record: {log}"
        );
        assert!(
            task_dir.join("task.json").is_file(),
            "{task}'s record is fetched back"
        );
    }
    for task in TASKS {
        check_record_is_whole(project, remote, task);
    }
    let task_dir = project.join(".corral/sprints/ray/implement").join(STOPPED);
    let task: Value =
        serde_json::from_str(&std::fs::read_to_string(task_dir.join("task.json")).unwrap())
            .unwrap();
    assert_eq!(task["status"], "done", "{task}");
    assert_eq!(
        task["round"], 2,
        "round 2 resumed, not counted again: {task}"
    );
    assert!(!exists(&task_dir.join("rounds/3")), "no third round");
    assert!(!exists(&task_dir.join("ray-job-3.log")), "one resubmission");
    let resumed = std::fs::read_to_string(task_dir.join("ray-job-2.log"))
        .expect("the stopped job was resubmitted, its log kept");
    let started: Vec<Value> = resumed
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l.trim()).ok())
        .filter(|e| e["event"] == "task-started")
        .collect();
    assert_eq!(started.len(), 1, "{resumed}");
    assert_eq!(
        (&started[0]["round"], &started[0]["step"]),
        (&json!(2), &json!("generate")),
        "the resubmitted job resumed at round 2, not round 1: {resumed}"
    );
}

/// Every file of `task`'s record on the remote is in the project's sprint record byte for
/// byte: the compressed raw streams too, which a copy through text would break.
fn check_record_is_whole(project: &Path, remote: &Path, task: &str) {
    let record = format!("refs/corral/ray/{task}/record");
    let listed = git_out(
        remote,
        &["ls-tree", "-r", "--name-only", &record, "--", "implement/"],
    );
    let paths: Vec<&str> = listed.lines().filter(|p| !p.is_empty()).collect();
    assert!(
        paths.iter().any(|p| p.ends_with(".gz")),
        "{task}'s record holds compressed streams: {paths:?}"
    );
    for path in paths {
        let pushed = corral_test_support::command(Path::new("git"))
            .current_dir(remote)
            .args(["cat-file", "blob", &format!("{record}:{path}")])
            .output()
            .unwrap();
        assert!(pushed.status.success(), "{record}:{path}");
        let fetched = project.join(".corral/sprints/ray").join(path);
        let fetched = std::fs::read(&fetched)
            .unwrap_or_else(|e| panic!("{} is fetched back: {e}", fetched.display()));
        assert!(
            fetched == pushed.stdout,
            "{path} of {task}'s record is fetched back byte for byte ({} bytes pushed, {} fetched)",
            pushed.stdout.len(),
            fetched.len()
        );
    }
}

/// A running `corral` whose stdout and stderr go to files beside the project (a pipe nobody
/// reads could fill and stall it).
struct Logged(std::process::Child, PathBuf, PathBuf);

fn spawn_logged(cmd: &mut std::process::Command, dir: &Path, name: &str) -> Logged {
    let stdout = dir.join(format!("{name}.stdout"));
    let stderr = dir.join(format!("{name}.stderr"));
    let child = cmd
        .stdout(std::fs::File::create(&stdout).unwrap())
        .stderr(std::fs::File::create(&stderr).unwrap())
        .spawn()
        .unwrap();
    Logged(child, stdout, stderr)
}

/// The child's output once it exited; killed (and the test failed) after `cap`.
fn wait_with_cap(logged: Logged, cap: Duration) -> std::process::Output {
    let Logged(mut child, stdout, stderr) = logged;
    let exited = wait_for(cap, || child.try_wait().unwrap().is_some());
    if !exited {
        let _ = child.kill();
    }
    let status = child.wait().unwrap();
    let out = std::process::Output {
        status,
        stdout: std::fs::read(stdout).unwrap_or_default(),
        stderr: std::fs::read(stderr).unwrap_or_default(),
    };
    assert!(
        exited || cap.is_zero(),
        "still running after {cap:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}
