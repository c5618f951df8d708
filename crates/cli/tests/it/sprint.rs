//! `corral sprint init | check | status`: the example that init writes validates, init never
//! overwrites, check names every error's file, line, key and rule, and status reads what a
//! sprint recorded, or says that none did.

use std::io::Write as _;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use corral_compose::{AccountHold, Settings, engine_config, provider_account, user_rate_limit_dir};
use corral_ports::ProviderId;
use corral_sprint::{
    SprintLayout, SprintName, SprintState, Step, TaskProgress, TaskStatus, parse, write_state,
};

use crate::support::*;

/// A scratch `bin` directory holding an executable script for each of `programs`, and a PATH
/// of it and the directories git lives in, so which CLIs are "installed" is the test's choice.
fn scratch_path(env: &Env, programs: &[&str]) -> String {
    use std::os::unix::fs::PermissionsExt;
    let bin = env.dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    for program in programs {
        let path = env.write(&format!("bin/{program}"), "#!/bin/sh\nexit 0\n");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    format!("{}:/usr/local/bin:/usr/bin:/bin", bin.display())
}

/// `corral` in `env` with PATH `path`.
fn corral_on(env: &Env, path: &str) -> assert_cmd::Command {
    let mut cmd = env.corral();
    cmd.env("PATH", path);
    cmd
}

/// `sprint init`'s message and the file it wrote, for a snapshot.
fn init_transcript(env: &Env, path: &str) -> String {
    let out = corral_on(env, path)
        .args(["sprint", "init"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", transcript(env, &out));
    let written = std::fs::read_to_string(env.project().join("corral-sprint.toml")).unwrap();
    format!("{}\n[corral-sprint.toml]\n{written}", transcript(env, &out))
}

#[test]
fn init_in_a_cargo_project_names_the_installed_provider_and_cargo_test() {
    let env = Env::new();
    env.write("project/Cargo.toml", "[package]\nname = \"p\"\n");
    // Codex alone is installed: both roles are codex, not the claude default.
    let path = scratch_path(&env, &["codex", "cargo"]);
    insta::assert_snapshot!(init_transcript(&env, &path));
    let out = corral_on(&env, &path)
        .args(["sprint", "check"])
        .env("GIT_AUTHOR_NAME", "T")
        .env("GIT_COMMITTER_NAME", "T")
        .env("GIT_AUTHOR_EMAIL", "t@t.invalid")
        .env("GIT_COMMITTER_EMAIL", "t@t.invalid")
        .output()
        .unwrap();
    // The example runs here as written: check has nothing to warn about.
    insta::assert_snapshot!(transcript(&env, &out));
}

#[test]
fn init_in_an_unknown_project_with_no_cli_says_what_to_replace() {
    let env = Env::new();
    let path = scratch_path(&env, &[]);
    insta::assert_snapshot!(init_transcript(&env, &path));
}

#[test]
fn init_tells_the_project_from_its_files() {
    let cases: [(&str, &str, &str); 5] = [
        (
            "package.json",
            r#"{"scripts": {"test": "jest"}}"#,
            "npm test",
        ),
        (
            "package.json",
            r#"{"scripts": {"test": "echo \"Error: no test specified\" && exit 1"}}"#,
            "true",
        ),
        ("pyproject.toml", "[project]\nname = \"p\"\n", "pytest"),
        ("setup.cfg", "[metadata]\n", "pytest"),
        ("go.mod", "module p\n", "go test ./..."),
    ];
    for (name, text, check) in cases {
        let env = Env::new();
        env.write(&format!("project/{name}"), text);
        let path = scratch_path(&env, &["claude"]);
        let out = init_transcript(&env, &path);
        assert!(
            out.contains(&format!("\ncheck = \"{check}\"\n")),
            "{name} {text}: {out}"
        );
        assert!(out.contains("provider = \"claude\""), "{out}");
    }
}

/// A valid sprint file whose roles are claude and whose check starts `cargo`.
const CLAUDE_CARGO: &str = r#"[sprint]
name = "s"
check = "RUST_LOG=info cargo test"

[roles.generator]
provider = "claude"

[[tasks]]
id = "a"
title = "A"
prompt = "p"
"#;

/// `sprint check` of [`CLAUDE_CARGO`] in a fresh repository with `programs` installed and,
/// when `identity`, the commit identity in the environment.
fn check_with(programs: &[&str], identity: bool) -> (Env, std::process::Output) {
    let env = Env::new();
    git(&env.project(), &["init", "--quiet"]);
    env.write("project/corral-sprint.toml", CLAUDE_CARGO);
    let path = scratch_path(&env, programs);
    let mut cmd = corral_on(&env, &path);
    if identity {
        cmd.env("GIT_AUTHOR_NAME", "T")
            .env("GIT_COMMITTER_NAME", "T")
            .env("GIT_AUTHOR_EMAIL", "t@t.invalid")
            .env("GIT_COMMITTER_EMAIL", "t@t.invalid");
    }
    let out = cmd.args(["sprint", "check"]).output().unwrap();
    (env, out)
}

#[test]
fn check_warns_about_what_will_fail_here_and_still_exits_0() {
    let (env, out) = check_with(&[], false);
    insta::assert_snapshot!(transcript(&env, &out));
}

/// Issue 35: tasks that may run at once and declare overlapping `touches` are named by
/// `sprint check`, before a `--jobs` run holds one of them back.
#[test]
fn check_names_the_tasks_whose_touches_overlap() {
    let env = Env::new();
    git(&env.project(), &["init", "--quiet"]);
    let file = CLAUDE_CARGO.replace("prompt = \"p\"", "prompt = \"p\"\ntouches = [\"src/**\"]")
        + "\n[[tasks]]\nid = \"b\"\ntitle = \"B\"\nprompt = \"q\"\ntouches = [\"src/lib.rs\"]\n";
    env.write("project/corral-sprint.toml", &file);
    let path = scratch_path(&env, &["claude", "cargo"]);
    let out = corral_on(&env, &path)
        .env("GIT_AUTHOR_NAME", "T")
        .env("GIT_COMMITTER_NAME", "T")
        .env("GIT_AUTHOR_EMAIL", "t@t.invalid")
        .env("GIT_COMMITTER_EMAIL", "t@t.invalid")
        .args(["sprint", "check"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", transcript(&env, &out));
    let stderr = env.clean(&out.stderr);
    assert_eq!(
        stderr.trim_end(),
        "note: tasks a and b both touch `src/**` and `src/lib.rs`: with --jobs they run one after the other",
        "{}",
        transcript(&env, &out)
    );
}

#[test]
fn check_warns_about_each_missing_thing_alone() {
    let (env, out) = check_with(&["claude", "cargo"], true);
    assert_eq!(env.clean(&out.stderr), "", "{}", transcript(&env, &out));

    let (env, out) = check_with(&["cargo"], true);
    let stderr = env.clean(&out.stderr);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("claude (generator, evaluator): claude is not installed"),
        "{stderr}"
    );

    let (env, out) = check_with(&["claude"], true);
    let stderr = env.clean(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("check: `cargo` is not found on PATH"),
        "{stderr}"
    );

    let (env, out) = check_with(&["claude", "cargo"], false);
    let stderr = env.clean(&out.stderr);
    assert_eq!(stderr.lines().count(), 2, "{stderr}");
    assert!(stderr.contains("no git user.name"), "{stderr}");
    assert!(stderr.contains("no git user.email"), "{stderr}");

    // The repository's own identity, or the global git config's, is enough.
    let env = Env::new();
    git(&env.project(), &["init", "--quiet"]);
    git(&env.project(), &["config", "user.name", "R"]);
    env.write("home/.gitconfig", "[user]\n\temail = g@t.invalid\n");
    env.write("project/corral-sprint.toml", CLAUDE_CARGO);
    let path = scratch_path(&env, &["claude", "cargo"]);
    let out = corral_on(&env, &path)
        .args(["sprint", "check"])
        .output()
        .unwrap();
    assert_eq!(env.clean(&out.stderr), "", "{}", transcript(&env, &out));
}

#[test]
fn init_refuses_to_overwrite_a_file() {
    let env = Env::new();
    let mine = env.write("project/mine.toml", "# my own sprint\n");
    let out = env
        .corral()
        .args(["sprint", "init", "mine.toml"])
        .output()
        .unwrap();
    insta::assert_snapshot!(transcript(&env, &out));
    assert_eq!(std::fs::read_to_string(mine).unwrap(), "# my own sprint\n");
}

#[test]
fn init_into_another_file_names_it_in_the_next_step() {
    let env = Env::new();
    let out = env
        .corral()
        .args(["sprint", "init", "other.toml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(
        env.clean(&out.stdout)
            .contains("`corral sprint check other.toml`"),
        "{}",
        transcript(&env, &out)
    );
    let out = env
        .corral()
        .args(["sprint", "check", "other.toml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", transcript(&env, &out));
}

#[test]
fn check_names_every_error_with_file_line_key_and_rule() {
    let env = Env::new();
    env.write(
        "project/corral-sprint.toml",
        r#"[sprint]
name = "s"
check = "true"
max_rounds = 0

[roles.generator]
provider = "codx"

[[tasks]]
id = "a"
title = "A"
brief = "missing.md"
depends_on = ["b"]

[[tasks]]
id = "b"
title = "B"
prompt = "p"
depends_on = ["a"]
colour = "red"
"#,
    );
    let out = env.corral().args(["sprint", "check"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    insta::assert_snapshot!(transcript(&env, &out));
}

#[test]
fn check_of_a_missing_file_points_at_init() {
    let env = Env::new();
    let out = env.corral().args(["sprint", "check"]).output().unwrap();
    insta::assert_snapshot!(transcript(&env, &out));
}

#[test]
fn status_says_when_no_sprint_has_run() {
    let env = Env::new();
    std::fs::create_dir(env.project().join(".git")).unwrap();
    let out = env.corral().args(["sprint", "status"]).output().unwrap();
    insta::assert_snapshot!(transcript(&env, &out));
    let out = env
        .corral()
        .args(["sprint", "status", "nope"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        env.clean(&out.stderr)
            .contains("sprint nope has not run in <tmp>/project"),
        "{}",
        transcript(&env, &out)
    );
}

/// Records a state for the example sprint: the first task done, the second in round 2.
fn record_example(env: &Env) -> SprintState {
    std::fs::create_dir_all(env.project().join(".git")).unwrap();
    let file = parse(
        &env.project().join("corral-sprint.toml"),
        corral_sprint::EXAMPLE,
    )
    .unwrap();
    let mut state = SprintState::fresh(&file, "2026-12-02T10:00:00.000Z");
    state.updated_at = "2026-12-02T10:20:00.000Z".into();
    state.sprint_file = "corral-sprint.toml".into();
    state.tasks[0].status = TaskStatus::Done;
    state.tasks[0].round = 1;
    state.tasks[0].attempt = 1;
    state.tasks[0].commit = Some("0123abc".into());
    state.tasks[1].status = TaskStatus::Running;
    state.tasks[1].round = 2;
    state.tasks[1].attempt = 1;
    let layout = SprintLayout::new(&env.project(), &SprintName::new("example").unwrap());
    write_state(&layout.state_file(), &state).unwrap();
    state
}

#[test]
fn status_shows_each_task_where_it_stands() {
    let env = Env::new();
    record_example(&env);
    let out = env.corral().args(["sprint", "status"]).output().unwrap();
    insta::assert_snapshot!(transcript(&env, &out));
}

#[test]
fn status_json_is_the_recorded_state() {
    let env = Env::new();
    let state = record_example(&env);
    let out = env
        .corral()
        .args(["sprint", "status", "example", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", transcript(&env, &out));
    let mut printed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // Beside the recorded state: its tokens and cost rolled up, computed, not recorded.
    let roll_up = printed
        .as_object_mut()
        .and_then(|o| o.remove("rollUp"))
        .expect("a rollUp beside the state");
    assert_eq!(roll_up, serde_json::to_value(state.usage()).unwrap());
    let holds = printed
        .as_object_mut()
        .and_then(|o| o.remove("accountHolds"));
    assert_eq!(holds, Some(serde_json::json!([])), "no account is held");
    // And where the sprint's life stands: it ran, no flow of its life is recorded.
    let life = printed.as_object_mut().and_then(|o| o.remove("life"));
    assert_eq!(
        life.as_ref().map(|l| &l["stage"]),
        Some(&serde_json::json!("running"))
    );
    let back: SprintState = serde_json::from_value(printed).unwrap();
    assert_eq!(back, state);
}

/// The state directory `corral` is given in [`held_env`]'s tests.
fn state_home(env: &Env) -> std::path::PathBuf {
    env.dir.path().join("state")
}

/// `corral` of `env` with its `XDG_STATE_HOME` at [`state_home`].
fn corral_with_state(env: &Env) -> assert_cmd::Command {
    let mut cmd = env.corral();
    cmd.env("XDG_STATE_HOME", state_home(env));
    cmd
}

/// Records a hold on `provider`'s account in the rate-limit gate through the engine's own API,
/// on the account a `corral` of [`Env::corral`] with `XDG_STATE_HOME` set would use.
fn plant_hold(env: &Env, provider: ProviderId, until: SystemTime, set_by: &str) {
    let ambient: Vec<(String, String)> = [
        ("PATH", std::env::var("PATH").unwrap_or_default()),
        ("HOME", env.home().display().to_string()),
        ("XDG_STATE_HOME", state_home(env).display().to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    let settings = Settings::default();
    let mut config = engine_config(&settings);
    config.rate_limit_gate = user_rate_limit_dir(&ambient);
    config.ambient_env = Some(ambient);
    let account = provider_account(provider, &settings, config)
        .unwrap()
        .expect("a gate in the state directory");
    let hold = AccountHold {
        until,
        basis: "until the reported reset time".into(),
        set_by: set_by.into(),
    };
    account.record(&hold).unwrap();
}

/// The example sprint paused on a rate limit: its second task's next step is the generator's
/// spawn (Claude), whose account is held until 2099; the evaluator's (Codex) hold has passed.
fn held_env() -> Env {
    let env = Env::new();
    env.write("project/corral-sprint.toml", corral_sprint::EXAMPLE);
    let mut state = record_example(&env);
    state.tasks[1].progress = Some(TaskProgress {
        base: "0123abc".into(),
        step: Step::Generate,
        pre_passed: Some(true),
        pre_failed_gates: Vec::new(),
        critique: None,
        regressions: 0,
        reset_pending: false,
        generator_session: None,
        generator_session_provider: None,
        spawned: None,
        transient_retries: 0,
    });
    let layout = SprintLayout::new(&env.project(), &SprintName::new("example").unwrap());
    write_state(&layout.state_file(), &state).unwrap();
    let in_2099 = UNIX_EPOCH + Duration::from_secs(4_070_908_800);
    plant_hold(&env, ProviderId::Claude, in_2099, "r-claude-3");
    let passed = SystemTime::now() - Duration::from_secs(60);
    plant_hold(&env, ProviderId::Codex, passed, "r-codex-1");
    env
}

#[test]
fn status_says_which_account_is_held_until_when_and_which_task_waits() {
    let env = held_env();
    let out = corral_with_state(&env)
        .args(["sprint", "status"])
        .output()
        .unwrap();
    insta::assert_snapshot!(transcript(&env, &out));
}

#[test]
fn status_json_lists_the_held_accounts_and_the_tasks_waiting_on_them() {
    let env = held_env();
    let out = corral_with_state(&env)
        .args(["sprint", "status", "example", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", transcript(&env, &out));
    let printed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        printed["accountHolds"],
        serde_json::json!([{
            "provider": "claude",
            "roles": ["generator"],
            "until": "2099-01-01T00:00:00Z",
            "untilEpochMs": 4_070_908_800_000_u64,
            "basis": "until the reported reset time",
            "setBy": "r-claude-3",
            "waitingTasks": ["use-config"],
        }]),
        "only the hold still ahead, with the paused task; the passed Codex hold is not shown"
    );
    // Another account (another HOME) is not held.
    let elsewhere = corral_with_state(&env)
        .env("HOME", env.dir.path().join("other-home"))
        .args(["sprint", "status", "example", "--json"])
        .output()
        .unwrap();
    let printed: serde_json::Value = serde_json::from_slice(&elsewhere.stdout).unwrap();
    assert_eq!(printed["accountHolds"], serde_json::json!([]), "{printed}");
}

#[test]
fn run_of_a_bad_file_prints_the_errors_as_check_does() {
    let env = Env::new();
    env.write(
        "project/corral-sprint.toml",
        "[sprint]\nname = \"s\"\ncheck = \"true\"\nmax_rounds = 11\n\n[roles.generator]\nprovider = \"claud\"\n\n[[tasks]]\nid = \"a\"\ntitle = \"A\"\nprompt = \"p\"\n",
    );
    let run = env.corral().args(["sprint", "run"]).output().unwrap();
    let check = env.corral().args(["sprint", "check"]).output().unwrap();
    assert_eq!(run.status.code(), Some(2), "{}", transcript(&env, &run));
    assert_eq!(env.clean(&run.stderr), env.clean(&check.stderr));
    let err = env.clean(&run.stderr);
    assert!(
        err.contains("[out-of-range]") && err.contains("[unknown-provider]"),
        "{err}"
    );
    assert!(!env.project().join(".corral/sprints/s").exists());
}

#[test]
fn run_refuses_a_dirty_tree_naming_the_paths_and_both_flags() {
    let env = Env::new();
    let project = env.project();
    env.write(
        "project/corral-sprint.toml",
        "[sprint]\nname = \"s\"\ncheck = \"true\"\n\n[roles.generator]\nprovider = \"claude\"\n\n[[tasks]]\nid = \"a\"\ntitle = \"A\"\nprompt = \"p\"\n",
    );
    git(&project, &["init", "-q", "-b", "main"]);
    git(&project, &["add", "-A"]);
    git(&project, &["commit", "-q", "-m", "start"]);
    env.write("project/notes.txt", "mine\n");
    // No CLI and no commit identity here: the preflight would refuse those first.
    let out = env
        .corral()
        .args(["sprint", "run", "--no-preflight"])
        .output()
        .unwrap();
    let err = env.clean(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{}", transcript(&env, &out));
    assert!(
        err.contains("notes.txt") && err.contains("--keep-dirty") && err.contains("--stash"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(project.join("notes.txt")).unwrap(),
        "mine\n"
    );
    let out = env
        .corral()
        .args(["sprint", "run", "--keep-dirty", "--stash"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "the flags exclude each other");
}

#[test]
fn a_second_run_in_the_same_repository_is_refused_naming_the_first_and_a_dead_ones_lock_is_taken() {
    let env = Env::new();
    let project = env.project();
    // The first run holds the repository in `setup` until `.corral/go` exists (ignored by git).
    // No commit identity here: the runs skip the preflight, which would refuse that first.
    env.write(
        "project/corral-sprint.toml",
        "[sprint]\nname = \"s\"\ncheck = \"true\"\nsetup = \"test -e .corral/go || sleep 60\"\nmax_rounds = 1\nmax_attempts = 1\n\n[roles.generator]\nprovider = \"claude\"\n\n[roles.evaluator]\nenabled = false\n\n[[tasks]]\nid = \"a\"\ntitle = \"A\"\nprompt = \"p\"\n",
    );
    git(&project, &["init", "-q", "-b", "main"]);
    git(&project, &["add", "-A"]);
    git(&project, &["commit", "-q", "-m", "start"]);
    let agent = FakeClaude::new(
        &env,
        "",
        &[FakeClaude::init("fake"), FakeClaude::result("done", 0.001)],
        "",
    );
    let (name, path) = agent.setting();
    let mut first = corral_test_support::command(&assert_cmd::cargo::cargo_bin("corral"))
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", env.home())
        .env(name, &path)
        .current_dir(&project)
        .args(["sprint", "run", "--no-preflight"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let lock = project.join(".git").join(corral_sprint::LOCK_FILE);
    let held = wait_until(Duration::from_secs(60), || {
        std::fs::read_to_string(&lock).is_ok_and(|t| t.contains(&format!("\"pid\":{}", first.id())))
    });
    assert!(held, "the first run never took the lock");
    // Killed this early, the first run may not have checked out the sprint's branch yet, or may
    // have: its state is saved before the checkout, so the rerun below resumes either way.
    let second = env
        .corral()
        .env(name, &path)
        .args(["sprint", "run", "--no-preflight"])
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    let err = env.clean(&second.stderr);
    assert_eq!(
        second.status.code(),
        Some(2),
        "{}",
        transcript(&env, &second)
    );
    assert!(
        err.contains(&format!("another sprint (s, pid {} on ", first.id()))
            && err.contains("is running in this repository"),
        "{err}"
    );
    // Killed, the first holds nothing: the next run takes the lock and runs (its one round
    // ends without a report: blocked, exit 3).
    first.kill().unwrap();
    first.wait().unwrap();
    std::fs::create_dir_all(project.join(".corral")).unwrap();
    std::fs::write(project.join(".corral/go"), "").unwrap();
    let third = env
        .corral()
        .env(name, &path)
        .args(["sprint", "run", "--no-preflight"])
        .timeout(Duration::from_secs(120))
        .output()
        .unwrap();
    assert!(
        !env.clean(&third.stderr).contains("another sprint"),
        "{}",
        transcript(&env, &third)
    );
    assert_ne!(third.status.code(), Some(2), "{}", transcript(&env, &third));
}

#[test]
fn check_refuses_a_brief_linked_out_of_the_tree_without_showing_its_target() {
    let env = Env::new();
    let secret = env.write("home/.ssh/id_rsa", "-----BEGIN OPENSSH PRIVATE KEY-----\n");
    env.write(
        "project/corral-sprint.toml",
        "[sprint]\nname = \"s\"\ncheck = \"true\"\n\n[roles.generator]\nprovider = \"claude\"\n\n[[tasks]]\nid = \"a\"\ntitle = \"A\"\nbrief = \"brief.md\"\n",
    );
    std::os::unix::fs::symlink(&secret, env.project().join("brief.md")).unwrap();
    let out = env.corral().args(["sprint", "check"]).output().unwrap();
    let err = env.clean(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{}", transcript(&env, &out));
    assert!(
        err.contains("tasks[0].brief") && err.contains("[brief-outside-tree]"),
        "{err}"
    );
    assert!(!err.contains("BEGIN") && !env.clean(&out.stdout).contains("BEGIN"));
}

/// `status --follow` shows the latest run's events as they are written (a line still being
/// written only once it is whole), and ends with the run.
#[test]
fn status_follow_shows_the_latest_runs_events_as_they_are_written_and_ends_with_the_run() {
    let env = Env::new();
    std::fs::create_dir_all(env.project().join(".git")).unwrap();
    let dir = env.project().join(".corral/sprints/example");
    std::fs::create_dir_all(&dir).unwrap();
    let events = dir.join("events.jsonl");
    let at = |t: &str, ms: u64| format!(r#""wallTime":"2026-12-02T{t}.000Z","monotonicMs":{ms}"#);
    std::fs::write(
        &events,
        [
            format!(
                r#"{{"event":"sprint-started","name":"example",{}}}"#,
                at("09:00:00", 0)
            ),
            format!(
                r#"{{"event":"sprint-finished","summary":{{"end":"cancelled"}},{}}}"#,
                at("09:10:00", 9)
            ),
            format!(
                r#"{{"event":"sprint-started","name":"example",{}}}"#,
                at("10:00:00", 0)
            ),
            format!(
                r#"{{"event":"task-started","task":"a","round":1,{}}}"#,
                at("10:00:01", 5)
            ),
            r#"{"event":"task-fin"#.to_string(),
        ]
        .join("\n"),
    )
    .unwrap();
    let mut child = corral_test_support::command(&assert_cmd::cargo::cargo_bin("corral"))
        .args(["sprint", "status", "example", "--follow"])
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", env.home())
        .env("TZ", "UTC0")
        .current_dir(env.project())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Whether the follower has read the first lines yet or not, it shows the same.
    std::thread::sleep(Duration::from_millis(500));
    let rest = [
        format!(
            r#"ished","task":"a","status":"done",{}}}"#,
            at("10:00:09", 9)
        ),
        format!(
            r#"{{"event":"sprint-finished","summary":{{"end":"done"}},{}}}"#,
            at("10:00:10", 10)
        ),
        String::new(),
    ]
    .join("\n");
    std::fs::OpenOptions::new()
        .append(true)
        .open(&events)
        .unwrap()
        .write_all(rest.as_bytes())
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("--follow did not end with the run");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "10:00:00  sprint-started\n\
         10:00:01  task-started  task a  round 1\n\
         10:00:09  task-finished  task a  status done\n\
         10:00:10  sprint-finished  end done\n"
    );
}
