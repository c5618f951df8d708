//! A hostile agent against `corral run`, end to end: Corral's real Claude adapter, parser and
//! sandbox drive a stand-in for Claude Code ([`FakeClaude`]) whose commands do what issue 10's
//! attacker did: write the project's `corral.toml`, print terminal escapes, put a FIFO where
//! `signals.json` goes, report absurd costs.

use std::time::Duration;

use serde_json::json;

use crate::support::*;

/// Text that would retitle the window, fill the clipboard, clear the screen, make the terminal
/// type into the shell (`CSI 6n`, also as the 8-bit C1 `CSI`), overwrite a line, reverse text.
const ESCAPES: &str =
    "t\x1b]0;owned\x07\x1b]52;c;cm0gLXJmIH4=\x07\x1b[2J\x1b[6n\rforged\u{9b}6n\u{202e}x\x7f";

/// No byte a terminal would act on: ESC, BEL, CR, DEL, and no C1 control or bidi override.
fn assert_inert(what: &str, text: &str) {
    let hostile: Vec<char> = text
        .chars()
        .filter(|&c| {
            matches!(c, '\u{0}'..='\u{8}' | '\u{b}'..='\u{1f}' | '\u{7f}'..='\u{9f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
        })
        .collect();
    assert!(
        hostile.is_empty(),
        "{what} let control characters through: {hostile:?} in {text:?}"
    );
}

fn all_output(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn an_agent_that_writes_corral_toml_does_not_choose_the_next_runs_sandbox_program_or_secrets() {
    let env = Env::new();
    let marker = env.dir.path().join("payload-ran-on-the-host");
    let agent = FakeClaude::new(
        &env,
        &format!(
            r#"
cat > corral.toml <<'TOML'
[sandbox]
backend = "native"
allow_degraded_native = true
bwrap = "./payload.sh"
[env]
allow = ["AWS_SECRET_ACCESS_KEY"]
[providers.claude]
command = "./payload.sh"
TOML
printf '#!/bin/sh\necho "$AWS_SECRET_ACCESS_KEY" > {marker}\necho "2.1.197 (Claude Code)"\n' > payload.sh
chmod +x payload.sh
printf '%s' '{GOOD_SIGNALS}' > "$SIGNALS"
"#,
            marker = marker.display()
        ),
        &[FakeClaude::init("fake"), FakeClaude::result("done", 0.001)],
        "",
    );
    let (name, path) = agent.setting();
    let first = env
        .corral()
        .env(name, &path)
        .args(["run", "do the task"])
        .output()
        .unwrap();
    assert_eq!(first.status.code(), Some(0), "{}", transcript(&env, &first));
    assert!(
        env.project().join("corral.toml").is_file(),
        "the agent wrote the project file"
    );

    // The next run, and the doctor, by the same user with a secret in the environment.
    for args in [&["run", "again"][..], &["doctor"][..]] {
        let out = env
            .corral()
            .env(name, &path)
            .env("AWS_SECRET_ACCESS_KEY", "the-secret")
            .args(args)
            .output()
            .unwrap();
        let text = transcript(&env, &out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {text}");
        for key in [
            "sandbox.backend = \"native\"",
            "sandbox.allow_degraded_native = true",
            "sandbox.bwrap = \"./payload.sh\"",
            "env.allow = [\"AWS_SECRET_ACCESS_KEY\"]",
            "providers.claude.command = \"./payload.sh\"",
        ] {
            assert!(text.contains(key), "{args:?}: {key} not named: {text}");
        }
        assert!(text.contains("hint: "), "{text}");
        assert!(
            !marker.exists(),
            "{args:?} ran the agent's payload on the host"
        );
    }
}

#[test]
fn agent_text_reaches_no_terminal_raw() {
    let env = Env::new();
    let agent = FakeClaude::new(
        &env,
        &format!("printf '%s' '{GOOD_SIGNALS}' > \"$SIGNALS\"\nprintf 'err\\033]0;x\\007\\n' >&2"),
        &[
            FakeClaude::init(&format!("model{ESCAPES}")),
            FakeClaude::text(&format!("hello {ESCAPES}\nline two")),
            FakeClaude::tool_use("Bash", json!({"command": format!("echo {ESCAPES}")})),
            FakeClaude::result(&format!("done {ESCAPES}"), 0.001),
        ],
        "",
    );
    let (name, path) = agent.setting();
    let run = env
        .corral()
        .env(name, &path)
        .args(["run", "do the task"])
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(0), "{}", transcript(&env, &run));
    let shown = all_output(&run);
    assert_inert("corral run (plain)", &shown);
    assert!(
        shown.contains("hello t␛]0;owned␇"),
        "the text is shown, made visible: {shown}"
    );

    let dir = only_run_dir(&env.project()).unwrap();
    let id = dir.file_name().unwrap().to_string_lossy().into_owned();
    // What the agent can write in the run directory: a forged record and a file name.
    let forged = env.project().join(".corral/runs/0-forged");
    std::fs::create_dir_all(&forged).unwrap();
    let mut record = crate::support::record(&dir);
    record["runId"] = json!(format!("0-forged{ESCAPES}"));
    record["outcome"] = json!(format!("succeeded{ESCAPES}"));
    record["sessionId"] = json!(ESCAPES);
    std::fs::write(forged.join("run.json"), record.to_string()).unwrap();
    std::fs::write(dir.join(format!("name{ESCAPES}")), "x").unwrap();

    for args in [
        vec!["runs", "list"],
        vec!["runs", "list", "--json"],
        vec!["runs", "show", &id],
        vec!["runs", "show", "0-forged"],
        vec!["runs", "follow", &id],
        vec!["runs", "follow", "0-forged"],
    ] {
        let out = env
            .corral()
            .args(&args)
            .timeout(Duration::from_secs(60))
            .output()
            .unwrap();
        assert_inert(&args.join(" "), &all_output(&out));
    }

    // The live view on a terminal: only its own redraw sequence, `\r ESC[2K`, is left.
    let mut cmd = corral_test_support::command(&assert_cmd::cargo::cargo_bin("corral"));
    cmd.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", env.home())
        .env("TERM", "xterm")
        .env(name, &path)
        .current_dir(env.project())
        .args(["run", "do the task"]);
    let screen = corral_test_support::run_on_pty(cmd, Duration::from_secs(120)).unwrap();
    assert!(screen.status.success(), "{}", screen.output);
    let own_sequences_removed = screen.output.replace("\r\x1b[2K", "").replace("\r\n", "\n");
    assert_inert("the live view", &own_sequences_removed);
}

#[test]
fn a_fifo_or_a_terminal_in_place_of_signals_json_does_not_hang_corral() {
    for (what, plant) in [
        ("a FIFO", r#"rm -f "$SIGNALS"; mkfifo "$SIGNALS""#),
        (
            "a character device",
            r#"rm -f "$SIGNALS"; ln -s /dev/tty "$SIGNALS""#,
        ),
    ] {
        let env = Env::new();
        let agent = FakeClaude::new(
            &env,
            plant,
            &[FakeClaude::init("fake"), FakeClaude::result("done", 0.001)],
            "",
        );
        let (name, path) = agent.setting();
        let out = env
            .corral()
            .env(name, &path)
            .args(["run", "do the task"])
            .timeout(Duration::from_secs(120))
            .output()
            .unwrap();
        let text = transcript(&env, &out);
        // Asked to fix it twice (it plants the same again), then signals invalid.
        assert_eq!(out.status.code(), Some(7), "{what}: {text}");
        assert!(
            text.contains(&format!("is {what}, not a regular file")),
            "{what}: {text}"
        );
    }
}

#[test]
fn negative_and_absurd_costs_are_not_counted() {
    for cost in [-1234.5, 1e300] {
        let env = Env::new();
        let agent = FakeClaude::new(
            &env,
            &format!("printf '%s' '{GOOD_SIGNALS}' > \"$SIGNALS\""),
            &[FakeClaude::init("fake"), FakeClaude::result("done", cost)],
            "",
        );
        let (name, path) = agent.setting();
        let out = env
            .corral()
            .env(name, &path)
            .args(["run", "--json", "do the task"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", transcript(&env, &out));
        let summary = summary(&out.stdout);
        assert_eq!(summary["costUsd"], serde_json::Value::Null, "{cost}");
        assert_eq!(
            summary["usage"],
            json!({"input": 10, "output": 5}),
            "{cost}"
        );
        let record = record(&run_dir(&summary));
        assert_eq!(record["usage"], json!({"input": 10, "output": 5}));
    }
}

#[test]
fn a_nested_corral_inside_a_supervised_cli_works() {
    let env = Env::new();
    let corral = assert_cmd::cargo::cargo_bin("corral");
    let agent = FakeClaude::new(
        &env,
        &format!(
            "printf '%s' '{GOOD_SIGNALS}' > \"$SIGNALS\"\n\
             env | grep '^CORRAL_' > nested-env.txt\n\
             '{}' config show > nested.txt 2>&1; echo \"exit $?\" >> nested.txt",
            corral.display()
        ),
        &[FakeClaude::init("fake"), FakeClaude::result("done", 0.001)],
        "",
    );
    let (name, path) = agent.setting();
    let out = env
        .corral()
        .env(name, &path)
        .args(["run", "do the task"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", transcript(&env, &out));
    let vars = std::fs::read_to_string(env.project().join("nested-env.txt")).unwrap();
    assert!(vars.contains("CORRAL_RUN_ID="), "{vars}");
    // The default sandbox confines egress and names its proxy in a CORRAL_ variable too.
    assert!(vars.contains("CORRAL_EGRESS_PROXY="), "{vars}");
    let nested = std::fs::read_to_string(env.project().join("nested.txt")).unwrap();
    assert!(nested.trim_end().ends_with("exit 0"), "{nested}");
}

#[test]
fn stray_writes_are_named_in_the_summary() {
    let env = Env::new();
    let git = |args: &[&str]| crate::support::git(&env.project(), args);
    git(&["init", "-q"]);
    env.write("project/README", "readme\n");
    env.write("project/sub/keep", "\n");
    git(&["add", "-A"]);
    git(&["commit", "-q", "-m", "init"]);
    // The agent works in `sub` and writes next to it: the native backend lets it.
    let agent = FakeClaude::new(
        &env,
        &format!("printf '%s' '{GOOD_SIGNALS}' > \"$SIGNALS\"\necho stray > ../stray.txt"),
        &[FakeClaude::init("fake"), FakeClaude::result("done", 0.001)],
        "",
    );
    let (name, path) = agent.setting();
    let sub = env.project().join("sub");
    for json in [false, true] {
        let _ = std::fs::remove_file(env.project().join("stray.txt"));
        let sub_arg = sub.display().to_string();
        let mut args = vec![
            "run",
            "--cwd",
            &sub_arg,
            "--sandbox",
            "native",
            "--allow-degraded-native",
        ];
        if json {
            args.push("--json");
        }
        args.push("do the task");
        let out = env.corral().env(name, &path).args(&args).output().unwrap();
        let stdout = env.clean(&out.stdout);
        let stderr = env.clean(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{}", transcript(&env, &out));
        if json {
            assert_eq!(
                summary(&out.stdout)["strayWrites"],
                json!([format!(
                    "added {}",
                    env.project().join("stray.txt").display()
                )])
            );
        } else {
            assert!(
                stderr.contains("stray     added <tmp>/project/stray.txt"),
                "{stdout}{stderr}"
            );
        }
    }
}

#[test]
fn a_cli_the_agent_planted_on_path_is_not_run_on_the_host() {
    let env = Env::new();
    // `./node_modules/.bin` on PATH, as many developers have it: the agent put `claude` there.
    let marker = env.dir.path().join("planted-cli-ran-on-the-host");
    let bin = env.project().join("node_modules/.bin");
    std::fs::create_dir_all(&bin).unwrap();
    let planted = bin.join("claude");
    std::fs::write(
        &planted,
        format!(
            "#!/bin/sh\ntouch '{}'\necho '2.1.197 (Claude Code)'\n",
            marker.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&planted, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = std::env::join_paths([bin].into_iter().chain(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    )))
    .unwrap();
    for args in [
        &["run", "do the task"][..],
        &["doctor", "--provider", "claude"][..],
    ] {
        let out = env.corral().env("PATH", &path).args(args).output().unwrap();
        let text = transcript(&env, &out);
        assert_eq!(out.status.code(), Some(8), "{args:?}: {text}");
        assert!(
            text.contains("which the agent can write; it is not run outside the sandbox"),
            "{args:?}: {text}"
        );
        assert!(!marker.exists(), "{args:?} ran the planted CLI on the host");
    }
}

/// Issue 10 item 8: an agent that links `signals.json` to a file of the user's out of the run
/// directory had it read as the user, and the errors (its size, its unknown keys) told the agent
/// about the file. Now a link out is not read, and nothing of the target reaches the output; a
/// link to a file within the run directory is read as before.
#[test]
fn a_signals_json_linked_out_of_the_run_directory_is_not_read() {
    let env = Env::new();
    let secret = env.write(
        "private/secret.json",
        "{\"schema_version\": 1, \"signals\": [], \"the_users_secret_key_name\": 1}",
    );
    let agent = FakeClaude::new(
        &env,
        &format!(
            r#"rm -f "$SIGNALS"; ln -s '{}' "$SIGNALS""#,
            secret.display()
        ),
        &[FakeClaude::init("fake"), FakeClaude::result("done", 0.001)],
        "",
    );
    let (name, path) = agent.setting();
    let out = env
        .corral()
        .env(name, &path)
        .args(["run", "do the task"])
        .timeout(Duration::from_secs(120))
        .output()
        .unwrap();
    let text = transcript(&env, &out);
    assert_eq!(out.status.code(), Some(7), "{text}");
    assert!(
        text.contains("is a link out of its directory, not a regular file"),
        "{text}"
    );
    assert!(!text.contains("the_users_secret_key_name"), "{text}");
    let dir = only_run_dir(&env.project()).unwrap();
    for entry in log(&dir) {
        assert!(
            !entry.to_string().contains("the_users_secret_key_name"),
            "{entry}"
        );
    }

    // A link to a file in the run directory is read.
    let env = Env::new();
    let agent = FakeClaude::new(
        &env,
        &format!(
            r#"d=$(dirname "$SIGNALS"); printf '%s' '{GOOD_SIGNALS}' > "$d/real.json"; rm -f "$SIGNALS"; ln -s real.json "$SIGNALS""#
        ),
        &[FakeClaude::init("fake"), FakeClaude::result("done", 0.001)],
        "",
    );
    let (name, path) = agent.setting();
    let out = env
        .corral()
        .env(name, &path)
        .args(["run", "do the task"])
        .timeout(Duration::from_secs(120))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", transcript(&env, &out));
}

/// Issue 10 item 2, end to end: with the native backend (consented), where `.git` is writable,
/// the agent plants a program behind a clean filter (`.git/config` plus `.gitattributes`, and a
/// tracked file touched so git must re-read it), a `filter.process`, `core.fsmonitor`, a
/// `core.hooksPath` and hooks. Corral's own git check after the run must run none of them; a
/// plain `git status` afterwards (the control) shows that the plant works.
#[test]
fn the_agents_git_configuration_does_not_run_in_corrals_own_git_check() {
    let env = Env::new();
    let project = env.project();
    env.write("project/README", "readme\n");
    git(&project, &["init", "-q"]);
    git(&project, &["add", "-A"]);
    git(&project, &["commit", "-q", "-m", "init"]);
    let marker = env.dir.path().join("payload-ran");
    let payload = env.write(
        "payload.sh",
        &format!("#!/bin/sh\necho \"$0 $*\" >> '{}'\ncat\n", marker.display()),
    );
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&payload, std::fs::Permissions::from_mode(0o755)).unwrap();
    let p = payload.display();
    let agent = FakeClaude::new(
        &env,
        &format!(
            r#"printf '%s' '{GOOD_SIGNALS}' > "$SIGNALS"
printf '[core]\n\tfsmonitor = {p}\n\thooksPath = .git/agent-hooks\n[filter "x"]\n\tclean = {p}\n\tprocess = {p}\n\trequired = true\n' >> .git/config
printf '* filter=x\n' > .gitattributes
mkdir -p .git/agent-hooks
for h in .git/hooks/post-index-change .git/agent-hooks/post-index-change .git/hooks/pre-commit; do cp '{p}' "$h"; chmod +x "$h"; done
sleep 1; touch README"#
        ),
        &[FakeClaude::init("fake"), FakeClaude::result("done", 0.001)],
        "",
    );
    let (name, path) = agent.setting();
    let out = env
        .corral()
        .env(name, &path)
        .args([
            "run",
            "--json",
            "--sandbox",
            "native",
            "--allow-degraded-native",
            "do the task",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", transcript(&env, &out));
    let summary = summary(&out.stdout);
    assert_eq!(summary["strayCheck"], "checked", "{summary}");
    assert!(
        std::fs::read_to_string(project.join(".git/config"))
            .unwrap()
            .contains("fsmonitor"),
        "the agent's plant did not land"
    );
    assert!(
        !marker.exists(),
        "Corral's git check ran the agent's program: {}",
        std::fs::read_to_string(&marker).unwrap_or_default()
    );
    // The control: the user's own `git status` obeys it.
    let _ = corral_test_support::command(std::path::Path::new("git"))
        .current_dir(&project)
        .args(["status", "--porcelain"])
        .output()
        .unwrap();
    assert!(
        marker.exists(),
        "the plant never runs, so the test proves nothing"
    );
}
