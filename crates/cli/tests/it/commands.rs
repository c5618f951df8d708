//! The other commands: help, config show, runs, doctor, completions.

use crate::support::*;

#[test]
fn run_help_lists_the_exit_codes() {
    let env = Env::new();
    let out = env.corral().args(["run", "--help"]).output().unwrap();
    insta::assert_snapshot!(transcript(&env, &out));
}

#[test]
fn resume_help_takes_a_run_id_and_the_run_flags() {
    let env = Env::new();
    let out = env.corral().args(["resume", "--help"]).output().unwrap();
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
fn doctor_says_how_each_limit_is_enforced_here() {
    let env = Env::new();
    let out = env
        .corral()
        .args(["doctor", "--provider", "claude"])
        .env("PATH", "/nonexistent")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    for limit in ["memory", "pids", "cpus", "disk"] {
        assert!(
            text.lines()
                .any(|l| l.starts_with(&format!("  ✓ limits.{limit} = "))
                    || l.starts_with(&format!("  · limits.{limit} = "))),
            "no line for limits.{limit}:\n{text}"
        );
    }
}

#[test]
fn completions_are_generated() {
    let env = Env::new();
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let out = env.corral().args(["completions", shell]).output().unwrap();
        assert!(out.status.success(), "{shell}");
        let script = String::from_utf8_lossy(&out.stdout);
        // The script asks corral itself for each word's candidates.
        assert!(script.contains("COMPLETE"), "{shell}: {script}");
    }
}

/// What the completion script gets back for the words typed so far (fish's protocol: the last
/// word is the one being completed; one candidate a line, its help after a tab).
fn candidates(env: &Env, words: &[&str]) -> Vec<String> {
    let out = env
        .corral()
        .env("COMPLETE", "fish")
        .arg("--")
        .args(words)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", transcript(env, &out));
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn run_ids_and_provider_names_are_completed() {
    let env = Env::new();
    for (id, prompt) in [
        ("20261202-120000-claude-abcd", "add a flag"),
        ("20261202-130000-codex-ef01", "fix the bug in the parser"),
    ] {
        env.write(&format!("project/.corral/runs/{id}/prompt.md"), prompt);
    }
    let ids = |words: &[&str]| -> Vec<String> {
        candidates(&env, words)
            .iter()
            .map(|c| c.split('\t').next().unwrap_or("").to_string())
            .collect()
    };
    assert_eq!(
        ids(&["corral", "runs", "show", "2026"]),
        ["20261202-130000-codex-ef01", "20261202-120000-claude-abcd"],
        "newest first"
    );
    assert_eq!(
        ids(&["corral", "resume", "20261202-13"]),
        ["20261202-130000-codex-ef01"]
    );
    assert_eq!(
        ids(&["corral", "runs", "follow", "20261202-12"]),
        ["20261202-120000-claude-abcd"]
    );
    let shown = candidates(&env, &["corral", "resume", "20261202-13"]);
    assert!(
        shown[0].ends_with("fix the bug in the parser"),
        "the prompt is the help text: {shown:?}"
    );
    assert_eq!(
        ids(&["corral", "run", "--provider", "c"]),
        ["claude", "codex", "copilot"]
    );
}

#[test]
fn providers_prints_the_capability_table_and_docs_carry_the_same() {
    let env = Env::new();
    let out = env.corral().args(["providers"]).output().unwrap();
    assert!(out.status.success());
    let table = String::from_utf8(out.stdout).unwrap();
    for id in ["claude", "codex", "copilot", "opencode", "grok"] {
        assert!(table.lines().next().unwrap().contains(id), "{table}");
    }
    let path = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/providers.md");
    let doc = std::fs::read_to_string(&path).unwrap();
    let (start, end) = (
        "<!-- capability-table:start -->\n",
        "<!-- capability-table:end -->",
    );
    let from = doc.find(start).expect("start marker") + start.len();
    let to = doc.find(end).expect("end marker");
    if std::env::var_os("UPDATE_DOCS").is_some() {
        std::fs::write(&path, format!("{}{table}{}", &doc[..from], &doc[to..])).unwrap();
        return;
    }
    assert!(
        doc[from..to] == table,
        "docs/providers.md's capability table is stale; run `UPDATE_DOCS=1 cargo test -p corral-cli providers`"
    );
}

/// `corral doctor --provider opencode` with a fake `opencode` of the tested version, whose
/// `models` lists two models, the model `model` configured and the sandbox allowed degraded.
fn doctor_with_model(model: &str) -> (Env, std::process::Output) {
    use std::os::unix::fs::PermissionsExt;
    let env = Env::new();
    let fake = env.write(
        "bin/opencode",
        "#!/bin/sh\ncase \"$1\" in\n--version) echo 1.18.33 ;;\nmodels) printf 'anthropic/one\\nopenai/two\\n' ;;\nesac\n",
    );
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = env
        .corral()
        .args(["doctor", "--provider", "opencode", "--no-request"])
        .env(
            "PATH",
            format!("{}:/usr/bin:/bin", env.dir.path().join("bin").display()),
        )
        .env("CORRAL_SANDBOX__BACKEND", "native")
        .env("CORRAL_SANDBOX__ALLOW_DEGRADED_NATIVE", "true")
        .env("CORRAL_PROVIDERS__OPENCODE__MODEL", model)
        .output()
        .unwrap();
    (env, out)
}

#[test]
fn doctor_exits_8_when_the_configured_model_is_unavailable() {
    let (env, out) = doctor_with_model("anthropic/gone");
    insta::assert_snapshot!(transcript(&env, &out));
    let (env, out) = doctor_with_model("openai/two");
    let text = transcript(&env, &out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("✓ model openai/two is available"), "{text}");
}

#[test]
fn doctor_says_a_credential_is_only_seen_not_tried() {
    use std::os::unix::fs::PermissionsExt;
    let env = Env::new();
    let fake = env.write(
        "bin/claude",
        "#!/bin/sh\n[ \"$1\" = --version ] && echo '2.1.197 (Claude Code)'\n",
    );
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = env
        .corral()
        .args(["doctor", "--provider", "claude", "--no-request"])
        .env(
            "PATH",
            format!("{}:/usr/bin:/bin", env.dir.path().join("bin").display()),
        )
        .env("CORRAL_SANDBOX__BACKEND", "native")
        .env("CORRAL_SANDBOX__ALLOW_DEGRADED_NATIVE", "true")
        .env("ANTHROPIC_API_KEY", "sk-test")
        .output()
        .unwrap();
    insta::assert_snapshot!(transcript(&env, &out));
}
