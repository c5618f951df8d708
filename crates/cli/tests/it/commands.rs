//! The other commands: help, config show, runs, doctor, completions.

use crate::support::*;

#[test]
fn run_help_lists_the_exit_codes() {
    let env = Env::new();
    let out = env.corral().args(["run", "--help"]).output().unwrap();
    insta::assert_snapshot!(transcript(&env, &out));
}

#[test]
fn config_show_names_every_source() {
    let env = Env::new();
    env.write(
        "home/.config/corral/config.toml",
        "[retry]\nrate_limit_retries = 5\n",
    );
    env.write("project/corral.toml", "[run]\nkill_grace_ms = 2500\n");
    let out = env
        .corral()
        .args(["config", "show"])
        .env("CORRAL_RUN__IDLE_WATCHDOG_MS", "120000")
        .output()
        .unwrap();
    assert!(out.status.success());
    insta::assert_snapshot!(transcript(&env, &out));
}

#[test]
fn runs_list_with_no_runs_says_so() {
    let env = Env::new();
    let out = env.corral().args(["runs", "list"]).output().unwrap();
    assert!(out.status.success());
    assert!(
        env.clean(&out.stdout)
            .starts_with("no runs under <tmp>/project/.corral/runs")
    );
}

#[test]
fn runs_show_of_an_unknown_id_is_a_usage_error() {
    let env = Env::new();
    let out = env
        .corral()
        .args(["runs", "show", "nope"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn doctor_reports_a_missing_cli_with_the_install_command() {
    let env = Env::new();
    let out = env
        .corral()
        .args(["doctor", "--provider", "claude"])
        .env("PATH", "/nonexistent")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(8));
    insta::assert_snapshot!(transcript(&env, &out));
}

#[test]
fn completions_are_generated() {
    let env = Env::new();
    let out = env.corral().args(["completions", "bash"]).output().unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("corral"));
}
