//! Every bad input gets a clear error naming what and where, and exit code 2.

use crate::support::*;

#[test]
fn no_prompt_is_a_usage_error() {
    let env = Env::new();
    let out = env.corral().args(["run"]).output().unwrap();
    insta::assert_snapshot!(transcript(&env, &out));
}

#[test]
fn a_missing_prompt_file_is_named() {
    let env = Env::new();
    let out = env
        .corral()
        .args(["run", "--prompt-file", "nope.md"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = env.clean(&out.stderr);
    assert!(err.contains("cannot read the prompt file nope.md"), "{err}");
}

#[test]
fn an_empty_prompt_file_is_named() {
    let env = Env::new();
    let file = env.write("project/empty.md", "  \n");
    let out = env
        .corral()
        .args(["run", "--prompt-file"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    insta::assert_snapshot!(transcript(&env, &out));
}

#[test]
fn an_out_of_range_setting_names_key_value_and_source() {
    let env = Env::new();
    env.write("project/corral.toml", "[run]\nidle_watchdog_ms = 10\n");
    let out = env.corral().args(["run", "hello"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    insta::assert_snapshot!(transcript(&env, &out));
}

#[test]
fn an_env_setting_out_of_range_names_the_variable() {
    let env = Env::new();
    let out = env
        .corral()
        .args(["run", "hello"])
        .env("CORRAL_RETRY__RATE_LIMIT_RETRIES", "99")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = env.clean(&out.stderr);
    assert!(
        err.contains("retry.rate_limit_retries = 99 (from env CORRAL_RETRY__RATE_LIMIT_RETRIES)"),
        "{err}"
    );
}

#[test]
fn an_unknown_provider_is_refused_with_the_choices() {
    let env = Env::new();
    let out = env
        .corral()
        .args(["run", "--provider", "gpt", "hello"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = env.clean(&out.stderr);
    assert!(
        err.contains("invalid value 'gpt' for '--provider <PROVIDER>'")
            && err.contains("[possible values: claude, codex, copilot, opencode, grok, gemini]"),
        "{err}"
    );
}

#[test]
fn a_missing_working_directory_is_named() {
    let env = Env::new();
    let out = env
        .corral()
        .args(["run", "--cwd", "/no/such/dir", "hello"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(env.clean(&out.stderr).contains("--cwd /no/such/dir"));
}

#[test]
fn a_resume_id_that_looks_like_a_flag_is_refused() {
    let env = Env::new();
    let out = env
        .corral()
        .args(["run", "--resume=-rf", "hello"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        env.clean(&out.stderr)
            .contains("--resume \"-rf\": session id starts with '-'")
    );
}

/// Issue 11 item 5: a refusal before the start is an error on stderr with the fix, not a run
/// summary of dashes on stdout, and `runs list` leaves it out unless asked; its record stays.
#[test]
fn a_missing_cli_is_exit_8_on_stderr_with_the_install_command_and_left_out_of_runs_list() {
    let env = Env::new();
    // The program is a user-only setting: the user's own config names it.
    env.write(
        "home/.config/corral/config.toml",
        "[providers.claude]\ncommand = \"/no/such/claude\"\n",
    );
    let out = env.corral().args(["run", "hello"]).output().unwrap();
    let text = transcript(&env, &out);
    assert_eq!(out.status.code(), Some(8), "{text}");
    assert!(out.stdout.is_empty(), "{text}");
    let stderr = env.clean(&out.stderr);
    assert!(
        stderr.contains("\nerror: claude: cannot start \"/no/such/claude\"")
            && stderr.contains("\nhint: is the CLI installed and on PATH")
            && stderr.contains("\n  install: npm install -g @anthropic-ai/claude-code\n")
            && stderr.contains("record: <tmp>/project/.corral/runs/"),
        "{text}"
    );
    assert!(
        !stderr.contains("usage") && !stderr.contains("cost"),
        "{text}"
    );
    let runs = env.project().join(".corral/runs");
    let run = std::fs::read_dir(&runs)
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.is_dir())
        .unwrap();
    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("run.json")).unwrap()).unwrap();
    assert_eq!(record["outcome"], "spawn-failed");
    assert_eq!(record["exitCode"], 8);
    assert!(exists(&run.join("prompt.md")));
    let id = run.file_name().unwrap().to_string_lossy().into_owned();

    let list = env.corral().args(["runs", "list"]).output().unwrap();
    let listed = String::from_utf8_lossy(&list.stdout);
    assert!(
        !listed.contains(&id)
            && listed.contains("1 run refused before its CLI started is left out (--all lists it)"),
        "{listed}"
    );
    let all = env
        .corral()
        .args(["runs", "list", "--all"])
        .output()
        .unwrap();
    let listed = String::from_utf8_lossy(&all.stdout);
    assert!(
        listed
            .lines()
            .any(|l| l.starts_with(&id) && l.contains("spawn-failed")),
        "{listed}"
    );
}
