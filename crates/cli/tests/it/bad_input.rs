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
            && err.contains("[possible values: claude, codex, copilot, opencode, grok]"),
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

#[test]
fn a_missing_cli_is_exit_8_with_a_hint_and_a_run_record() {
    let env = Env::new();
    // The program is a user-only setting: the user's own config names it.
    env.write(
        "home/.config/corral/config.toml",
        "[providers.claude]\ncommand = \"/no/such/claude\"\n",
    );
    let out = env.corral().args(["run", "hello"]).output().unwrap();
    assert_eq!(out.status.code(), Some(8), "{}", transcript(&env, &out));
    let stdout = env.clean(&out.stdout);
    assert!(
        stdout.contains("is the CLI installed and on PATH"),
        "{stdout}"
    );
    let runs = env.project().join(".corral/runs");
    let run = std::fs::read_dir(&runs)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("run.json")).unwrap()).unwrap();
    assert_eq!(record["outcome"], "spawn-failed");
    assert_eq!(record["exit_code"], 8);
    assert!(exists(&run.join("prompt.md")));
}
