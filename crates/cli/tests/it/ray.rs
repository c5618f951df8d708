//! `corral sprint run --executor ray` against a real two-node Ray cluster on 127.0.0.1 (the
//! test-support harness; skipped outside CI when Ray is not installed, a failure in CI): each
//! task one job whose entrypoint is `corral sprint work`, through the real Claude Code against
//! the fake model API, cloning from a `file://` bare remote; the coordinator folds the branches
//! the jobs push back.

use std::path::{Path, PathBuf};

use corral_test_support::fake_api::{Role, Scenario, Step};
use corral_test_support::ray_cluster::{RayCluster, require_ray};
use serde_json::json;

use crate::providers::{CLAUDE, RUN_CAP, World};
use crate::support::*;

const TS: &str = "2026-12-02T10:00:00Z";
const TASKS: [&str; 2] = ["t1", "t2"];

/// Where the jobs clone: the coordinator's `$TMPDIR/corral-work/<sprint>/<task>`.
fn clone_dir(tmp: &Path, task: &str) -> PathBuf {
    tmp.join("corral-work").join("ray").join(task)
}

fn round(task: &str) -> Vec<Step> {
    let signals = json!({"schemaVersion": 1, "signals": [
        {"type": "task-complete", "timestamp": TS},
        {"type": "commit-message", "timestamp": TS, "subject": format!("Write {task}")},
    ]})
    .to_string();
    vec![
        Step::write_named_for(CLAUDE.bin, format!("{task}.txt"), "ok").unwrap(),
        Step::write_signals_for(CLAUDE.bin, signals).unwrap(),
        Step::text("Done."),
    ]
}

#[test]
fn a_sprint_through_ray_runs_each_task_as_a_job_and_folds_the_branches() {
    let Some(venv) = require_ray() else {
        return;
    };
    let world = World::new(&CLAUDE, |_| {
        TASKS.iter().fold(Scenario::default(), |s, task| {
            s.with_round(Role::Generator, *task, 1, round(task))
        })
    });
    let project = world.project();
    let tmp = project.parent().unwrap().join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let mut file = "[sprint]\nname = \"ray\"\ncheck = \"true\"\ncheck_timeout_ms = 60000\n\
         max_rounds = 3\nmax_attempts = 2\n\n[roles.generator]\nprovider = \"claude\"\n\n\
         [roles.evaluator]\nprovider = \"claude\"\nenabled = false\n"
        .to_owned();
    for task in TASKS {
        let target = clone_dir(&tmp, task).join(format!("{task}.txt"));
        file.push_str(&format!(
            "\n[[tasks]]\nid = \"{task}\"\ntitle = \"Write {task}\"\nprompt = \"Write ok to {}.\"\n",
            target.display()
        ));
    }
    std::fs::write(project.join("corral-sprint.toml"), file).unwrap();
    std::fs::write(project.join(".gitignore"), ".corral/\n").unwrap();
    git(&project, &["init", "-q", "-b", "main"]);
    git(&project, &["config", "user.email", "it@example.invalid"]);
    git(&project, &["config", "user.name", "it"]);
    git(&project, &["add", "-A"]);
    git(&project, &["commit", "-q", "-m", "start"]);
    let remote = project.parent().unwrap().join("remote.git");
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
    let out = world
        .env
        .corral()
        .envs(world.vars().iter().map(|(k, v)| (k, v)))
        .env("TMPDIR", &tmp)
        .env("CORRAL_EXECUTOR__RAY__ADDRESS", cluster.address())
        .env("CORRAL_EXECUTOR__RAY__REMOTE", &remote_url)
        .env("CORRAL_EXECUTOR__RAY__ENTRYPOINT_NUM_CPUS", "0.5")
        .timeout(RUN_CAP * 4)
        .args(["sprint", "run", "--jobs", "2", "--executor", "ray"])
        .output()
        .unwrap();
    let temp_dir = cluster.temp_dir().to_path_buf();
    drop(cluster);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        transcript(&world.env, &out)
    );
    for task in TASKS {
        let shown = corral_test_support::command(Path::new("git"))
            .current_dir(&project)
            .args(["show", &format!("corral/ray:{task}.txt")])
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&shown.stdout).trim(),
            "ok",
            "{task}.txt is folded onto corral/ray: {}",
            transcript(&world.env, &out)
        );
        let task_dir = project.join(".corral/sprints/ray/implement").join(task);
        let log = std::fs::read_to_string(task_dir.join("ray-job-1.log")).unwrap_or_default();
        assert!(
            !log.is_empty(),
            "the job's log is kept in the sprint's record: {}",
            transcript(&world.env, &out)
        );
        assert!(
            task_dir.join("task.json").is_file(),
            "the task's record is fetched back: {}",
            transcript(&world.env, &out)
        );
    }
    assert!(
        RayCluster::leftovers(&temp_dir).is_empty(),
        "no Ray process is left"
    );
}
