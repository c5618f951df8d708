//! The knobs users of the peer CLIs reach for (issue 11 item 8), through the `corral` binary and
//! the default sandbox: timeouts written as durations, `-q`, a `-v` that shows what Corral does,
//! `--max-budget-usd` and `--max-turns` refused with the reason by a CLI that cannot enforce
//! them, `--read-only` and `--add-dir` held by the sandbox rather than by the agent's goodwill.

use crate::support::*;

/// A Claude stand-in that runs `acts`, then answers `answer`.
fn agent(env: &Env, acts: &str, answer: &str) -> FakeClaude {
    FakeClaude::new(
        env,
        acts,
        &[
            FakeClaude::init("fake"),
            FakeClaude::text("Working on it."),
            FakeClaude::result(answer, 0.001),
        ],
        "",
    )
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_timeout_written_as_a_duration_ends_the_run_and_a_bad_one_is_named() {
    let env = Env::new();
    // Without the limit the stand-in would end after 20 s with no result line: a crash (6).
    let agent = FakeClaude::new(&env, "", &[FakeClaude::init("fake")], "sleep 20");
    let (name, path) = agent.setting();
    let out = env
        .corral()
        .env(name, &path)
        .args(["run", "--no-contract", "--timeout", "1s", "wait"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(5), "{}", transcript(&env, &out));
    let dir = only_run_dir(&env.project()).unwrap();
    assert_eq!(record(&dir)["outcome"], "wall-timeout");

    let out = env
        .corral()
        .args(["run", "--no-contract", "--idle-timeout", "5x", "wait"])
        .output()
        .unwrap();
    let text = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{}", transcript(&env, &out));
    assert!(
        text.contains("'5x'") && text.contains("--idle-timeout") && text.contains("90s, 5m"),
        "{text}"
    );
}

#[test]
fn quiet_leaves_the_answer_alone_and_nothing_on_stderr() {
    let env = Env::new();
    let agent = agent(&env, "", "The answer.");
    let (name, path) = agent.setting();
    let run = |quiet: bool| {
        let mut cmd = env.corral();
        cmd.env(name, &path).args(["run", "--no-contract"]);
        if quiet {
            cmd.arg("-q");
        }
        let out = cmd.arg("answer").output().unwrap();
        assert!(out.status.success(), "{}", transcript(&env, &out));
        out
    };
    let plain = run(false);
    assert!(
        stderr(&plain).contains("session 11111111") && stderr(&plain).contains("Working on it."),
        "{}",
        transcript(&env, &plain)
    );
    let quiet = run(true);
    assert_eq!(stderr(&quiet), "", "{}", transcript(&env, &quiet));
    assert_eq!(String::from_utf8_lossy(&quiet.stdout), "The answer.\n");
}

#[test]
fn verbose_shows_the_run_the_cli_version_the_spawn_and_how_the_attempt_ended() {
    let env = Env::new();
    let agent = agent(&env, "", "Done.");
    let (name, path) = agent.setting();
    let run = |verbose: bool| {
        let mut cmd = env.corral();
        cmd.env(name, &path).args(["run", "--no-contract"]);
        if verbose {
            cmd.arg("-v");
        }
        let out = cmd.arg("go").output().unwrap();
        assert!(out.status.success(), "{}", transcript(&env, &out));
        stderr(&out)
    };
    let wanted = [
        "starting the run",
        "the CLI's version",
        "spawned",
        "attempt ended",
    ];
    let text = run(true);
    for message in wanted {
        assert!(text.contains(message), "no {message:?} in:\n{text}");
    }
    assert!(text.contains(&path.display().to_string()), "{text}");
    let text = run(false);
    for message in wanted {
        assert!(!text.contains(message), "{message:?} without -v:\n{text}");
    }
}

#[test]
fn a_budget_reaches_claude_code_and_a_cli_that_cannot_enforce_one_refuses_it_with_the_reason() {
    let env = Env::new();
    let agent = agent(&env, "printf '%s\\n' \"$@\" > argv.txt", "Done.");
    let (name, path) = agent.setting();
    let out = env
        .corral()
        .env(name, &path)
        .args([
            "run",
            "--no-contract",
            "--max-budget-usd",
            "0.5",
            "--max-turns",
            "3",
        ])
        .arg("go")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", transcript(&env, &out));
    let argv = std::fs::read_to_string(env.project().join("argv.txt")).unwrap();
    assert!(
        argv.contains("--max-budget-usd\n0.5\n") && argv.contains("--max-turns\n3\n"),
        "{argv}"
    );

    // OpenCode has neither: a stand-in that only knows its version, never started.
    let opencode = env.write(
        "fake-opencode.sh",
        "#!/bin/sh\nif [ \"$1\" = \"--version\" ]; then echo 1.18.3; exit 0; fi\ntouch \"$0.ran\"\nexit 1\n",
    );
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&opencode, std::fs::Permissions::from_mode(0o755)).unwrap();
    for (flag, value, reason) in [
        (
            "--max-budget-usd",
            "1",
            "max_budget_usd 1 cannot be enforced: OpenCode has no spend cap",
        ),
        (
            "--max-turns",
            "3",
            "max_turns 3 cannot be enforced: `opencode run` has no turn limit",
        ),
    ] {
        let out = env
            .corral()
            .env("CORRAL_PROVIDERS__OPENCODE__COMMAND", &opencode)
            .args([
                "run",
                "--provider",
                "opencode",
                "--no-contract",
                flag,
                value,
                "go",
            ])
            .output()
            .unwrap();
        let text = transcript(&env, &out);
        assert_eq!(out.status.code(), Some(2), "{text}");
        assert!(text.contains(reason), "{text}");
    }
    assert!(!exists(&env.dir.path().join("fake-opencode.sh.ran")));
}

/// `providers.claude.max_internal_retries` becomes Claude Code's `CLAUDE_CODE_MAX_RETRIES`
/// (default 3), and another provider refuses the key as not its own.
#[test]
fn claude_codes_own_retries_are_a_setting_and_default_to_three() {
    let env = Env::new();
    let agent = agent(
        &env,
        "printf '%s\\n' \"$CLAUDE_CODE_MAX_RETRIES\" >> retries.txt",
        "Done.",
    );
    let (name, path) = agent.setting();
    for retries in [None, Some("0"), Some("7")] {
        let mut cmd = env.corral();
        cmd.env(name, &path);
        if let Some(n) = retries {
            cmd.env("CORRAL_PROVIDERS__CLAUDE__MAX_INTERNAL_RETRIES", n);
        }
        let out = cmd.args(["run", "--no-contract", "go"]).output().unwrap();
        assert!(out.status.success(), "{}", transcript(&env, &out));
    }
    let seen = std::fs::read_to_string(env.project().join("retries.txt")).unwrap();
    assert_eq!(seen, "3\n0\n7\n");
    let out = env
        .corral()
        .env("CORRAL_PROVIDERS__CODEX__MAX_INTERNAL_RETRIES", "2")
        .args(["run", "--provider", "codex", "--no-contract", "go"])
        .output()
        .unwrap();
    let text = transcript(&env, &out);
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(
        text.contains("providers.codex.max_internal_retries"),
        "{text}"
    );
}

#[test]
fn read_only_keeps_the_work_tree_as_it_was_whatever_the_agent_runs() {
    let env = Env::new();
    env.write("project/existing.txt", "as it was\n");
    let agent = agent(
        &env,
        "echo changed > existing.txt; echo new > new.txt; rm -f existing.txt; mkdir made",
        "Looked.",
    );
    let (name, path) = agent.setting();
    let out = env
        .corral()
        .env(name, &path)
        .args(["run", "--no-contract", "--read-only", "look around"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", transcript(&env, &out));
    let project = env.project();
    assert_eq!(
        std::fs::read_to_string(project.join("existing.txt")).unwrap(),
        "as it was\n"
    );
    assert!(!exists(&project.join("new.txt")) && !exists(&project.join("made")));
}

#[test]
fn an_added_directory_is_writable_and_its_sibling_is_not() {
    let env = Env::new();
    let added = env.dir.path().join("added");
    let sibling = env.dir.path().join("sibling");
    std::fs::create_dir_all(&added).unwrap();
    std::fs::create_dir_all(&sibling).unwrap();
    let acts = format!(
        "echo in > '{}'; echo out > '{}'",
        added.join("note.txt").display(),
        sibling.join("note.txt").display()
    );
    let agent = agent(&env, &acts, "Noted.");
    let (name, path) = agent.setting();
    let out = env
        .corral()
        .env(name, &path)
        .args(["run", "--no-contract", "--add-dir"])
        .arg(&added)
        .arg("note it")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", transcript(&env, &out));
    assert_eq!(
        std::fs::read_to_string(added.join("note.txt")).unwrap(),
        "in\n"
    );
    assert!(!exists(&sibling.join("note.txt")));
}

/// `sandbox.watch_native_writes` (on by default): under the native backend the run names the
/// agent's writes to the home directory and `/tmp` (outside any git work tree, so only the watch
/// can), not those to the private `TMPDIR` it is given; turned off by the user, they go unseen
/// and the check says it did not run; a project's `corral.toml` cannot turn it off.
#[test]
fn the_native_write_watch_names_writes_outside_and_only_the_user_turns_it_off() {
    let env = Env::new();
    let stray_tmp = format!("/tmp/corral-knobs-{}", std::process::id());
    let agent = agent(
        &env,
        &format!(
            "echo h > \"$HOME/stray.txt\"; echo t > {stray_tmp}; echo ok > \"$TMPDIR/scratch\""
        ),
        "done",
    );
    let (name, path) = agent.setting();
    let run = |extra: &[(&str, &str)]| {
        let mut cmd = env.corral();
        cmd.env(name, &path)
            .env("CORRAL_SANDBOX__BACKEND", "native")
            .env("CORRAL_SANDBOX__ALLOW_DEGRADED_NATIVE", "true");
        for (k, v) in extra {
            cmd.env(k, v);
        }
        let out = cmd
            .args(["run", "--no-contract", "--json", "write"])
            .output()
            .unwrap();
        let _ = std::fs::remove_file(&stray_tmp);
        assert!(out.status.success(), "{}", transcript(&env, &out));
        summary(&out.stdout)
    };
    let home = std::fs::canonicalize(env.home()).unwrap();
    let watched = run(&[]);
    let mut expected = vec![
        format!("added {stray_tmp}"),
        format!("added {}", home.join("stray.txt").display()),
    ];
    expected.sort();
    assert_eq!(
        watched["strayWrites"],
        serde_json::json!(expected),
        "{watched}"
    );
    assert_eq!(watched["strayCheck"], "checked");

    let _ = std::fs::remove_file(home.join("stray.txt"));
    let unwatched = run(&[("CORRAL_SANDBOX__WATCH_NATIVE_WRITES", "false")]);
    assert_eq!(
        unwatched["strayWrites"],
        serde_json::Value::Null,
        "{unwatched}"
    );
    assert_eq!(unwatched["strayCheck"], "not-checked");

    env.write(
        "project/corral.toml",
        "[sandbox]\nwatch_native_writes = false\n",
    );
    let out = env
        .corral()
        .env(name, &path)
        .args(["run", "--no-contract", "write"])
        .output()
        .unwrap();
    let text = transcript(&env, &out);
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(
        text.contains("sandbox.watch_native_writes = false"),
        "{text}"
    );
}
