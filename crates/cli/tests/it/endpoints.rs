//! Endpoints known before the first spawn (issue 34), with the real pinned Codex against the fake
//! model API: an endpoint named only in Codex's own `config.toml` is refused before anything
//! starts, naming the `sandbox.network_allow` entry that allows it; one that reaches Corral's
//! egress proxy anyway is reported as the proxy's refusal, never as Codex's "could not
//! authenticate (HTTP 403)"; and `corral doctor` says the same before any run. The same holds for
//! the real OpenCode with its provider in `~/.config/opencode/opencode.json`.

use std::os::unix::fs::PermissionsExt;

use corral_test_support::fake_api::{Scenario, Step};

use crate::providers::{CODEX, OPENCODE, World};
use crate::support::{Env, kinds, log, only_run_dir, transcript};

/// The world's Codex, whose `config.toml` points the provider `fake` at the API, without the
/// allow-list entry the conformance worlds add for it.
fn codex_without_allow_entry() -> World {
    let mut world = World::new(&CODEX, |_| Scenario::script([Step::text("hello")]));
    world.set_var("CORRAL_SANDBOX__NETWORK_ALLOW", None);
    world
}

#[test]
fn a_codex_provider_base_url_not_on_the_allow_list_is_refused_before_the_spawn() {
    let world = codex_without_allow_entry();
    let target = world.api.addr().to_string();
    let out = world.corral_run().arg("say hello").output().unwrap();
    let text = transcript(&world.env, &out);
    assert_eq!(out.status.code(), Some(2), "{text}");
    for needed in [
        format!("Corral's network allow-list does not include {target}"),
        "[model_providers.fake] base_url names it".to_string(),
        format!("add \"{target}\" to sandbox.network_allow"),
        format!("--allow-net {target}"),
        "nothing was started".to_string(),
    ] {
        assert!(text.contains(&needed), "missing {needed:?} in {text}");
    }
    assert!(!text.contains("authenticate"), "{text}");
    assert!(world.api.requests().is_empty(), "nothing reached the API");
    let dir = only_run_dir(&world.project()).expect("a run directory");
    let log = log(&dir);
    assert!(kinds(&log, "spawn").is_empty(), "no spawn: {log:#?}");
    assert!(
        kinds(&log, "classified")
            .iter()
            .any(|c| c["class"] == "egress-refused"),
        "{log:#?}"
    );
    // The flag the message names is the one that allows it: Codex starts and reaches the API.
    let out = world
        .corral_run()
        .args(["--allow-net", &target, "say hello"])
        .output()
        .unwrap();
    let text = transcript(&world.env, &out);
    assert!(!text.contains("allow-list does not include"), "{text}");
    assert!(text.contains("hello"), "{text}");
    assert!(!world.api.requests().is_empty(), "{text}");
}

#[test]
fn a_refusal_by_the_egress_proxy_is_not_reported_as_codexs_authentication_failure() {
    let mut world = World::new(&CODEX, |_| Scenario::script([Step::text("hello")]));
    // The config file's endpoint is allowed (the world's entry), but a `-c` override on Codex's
    // command line sends it to a spelling of the same server the allow-list does not hold: the
    // proxy answers 403, which Codex reads as failed authentication.
    let other = format!("localhost:{}", world.api.addr().port());
    let url = format!("http://{other}/v1");
    world.set_var(
        &CODEX.setting("ARGS"),
        Some(
            &serde_json::json!(["-c", format!("model_providers.fake.base_url=\"{url}\"")])
                .to_string(),
        ),
    );
    let out = world.corral_run().arg("say hello").output().unwrap();
    let text = transcript(&world.env, &out);
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(
        text.contains(&format!(
            "Corral's network allow-list does not include {other}"
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!("add \"{other}\" to sandbox.network_allow")),
        "{text}"
    );
    assert!(!text.contains("could not authenticate"), "{text}");
    let dir = only_run_dir(&world.project()).expect("a run directory");
    let log = log(&dir);
    assert_eq!(kinds(&log, "spawn").len(), 1, "not retried: {log:#?}");
    assert!(
        kinds(&log, "egress_refused")
            .iter()
            .any(|r| r["target"] == other.as_str()),
        "{log:#?}"
    );
}

#[test]
fn an_opencode_provider_in_its_config_file_is_refused_before_the_spawn_then_allowed() {
    let mut world = World::new(&OPENCODE, |_| Scenario::script([Step::text("hello")]));
    // The provider `fake` moves from the environment (which widens the allow-list) to
    // OpenCode's own config file (which does not).
    world.set_var("OPENCODE_CONFIG_CONTENT", None);
    let config = serde_json::json!({
        "$schema": "https://opencode.ai/config.json",
        "provider": {"fake": {
            "npm": "@ai-sdk/openai-compatible",
            "name": "fakeapi",
            "options": {"baseURL": world.api.url_v1(), "apiKey": "sk-test"},
            "models": {"fake-model": {"name": "fake-model"}},
        }},
    });
    world.env.write(
        "home/.config/opencode/opencode.json",
        &serde_json::to_string_pretty(&config).unwrap(),
    );
    let target = world.api.addr().to_string();
    let out = world.corral_run().arg("say hello").output().unwrap();
    let text = transcript(&world.env, &out);
    assert_eq!(out.status.code(), Some(2), "{text}");
    for needed in [
        format!("Corral's network allow-list does not include {target}"),
        "~/.config/opencode/opencode.json provider.fake.options.baseURL names it".to_string(),
        format!("--allow-net {target}"),
    ] {
        assert!(text.contains(&needed), "missing {needed:?} in {text}");
    }
    assert!(world.api.requests().is_empty(), "nothing reached the API");
    let out = world
        .corral_run()
        .args(["--allow-net", &target, "say hello"])
        .output()
        .unwrap();
    let text = transcript(&world.env, &out);
    assert!(!text.contains("allow-list does not include"), "{text}");
    assert!(!world.api.requests().is_empty(), "{text}");
}

#[test]
fn doctor_names_the_endpoints_of_codexs_config_and_the_entry_to_add() {
    let env = Env::new();
    let fake = env.write(
        "bin/codex",
        "#!/bin/sh\n[ \"$1\" = --version ] && echo 'codex-cli 0.171.0'\n",
    );
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    env.write(
        "home/.codex/config.toml",
        r#"model_provider = "corp"

[model_providers.corp]
base_url = "https://llm.corp.example:8443/v1"

[model_providers.local]
base_url = "http://127.0.0.1:11434/v1"

[model_providers.spare]
base_url = "https://spare.example/v1"
"#,
    );
    let out = env
        .corral()
        // The stand-in only knows its version: the login is not asked here (the endpoints are).
        .args(["doctor", "--provider", "codex", "--no-request"])
        .env(
            "PATH",
            format!("{}:/usr/bin:/bin", env.dir.path().join("bin").display()),
        )
        .env("HOME", env.dir.path().join("home"))
        .env("CORRAL_SANDBOX__BACKEND", "native")
        .env("CORRAL_SANDBOX__ALLOW_DEGRADED_NATIVE", "true")
        .env("CORRAL_SANDBOX__NETWORK_ALLOW", "[\"127.0.0.1:11434\"]")
        .env("OPENAI_API_KEY", "sk-test")
        .output()
        .unwrap();
    insta::assert_snapshot!(transcript(&env, &out));
}
