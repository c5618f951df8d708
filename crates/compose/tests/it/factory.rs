//! The factory builds what the settings describe.

use std::time::Duration;

use std::path::PathBuf;

use corral_compose::{Settings, engine_config, headless_provider, other_providers_credentials};
use corral_ports::ProviderId;

#[test]
fn engine_config_follows_the_settings() {
    let mut s = Settings::default();
    s.run.idle_watchdog_ms = 120_000;
    s.run.wall_timeout_ms = 0;
    s.retry.rate_limit_retries = 7;
    let c = engine_config(&s);
    assert_eq!(c.idle_timeout, Duration::from_secs(120));
    assert_eq!(c.wall_timeout, None);
    assert_eq!(c.retry.max_retries, 7);
    s.run.wall_timeout_ms = 1000;
    assert_eq!(engine_config(&s).wall_timeout, Some(Duration::from_secs(1)));
}

/// Issue 29 item 1: `sandbox.hide` reaches the engine as paths, `~/` under the home.
#[test]
fn hidden_paths_reach_the_engine_under_the_home() {
    let mut s = Settings::default();
    s.sandbox.hide = vec!["~/.config/foo".into(), "/srv/keys".into()];
    let c = engine_config(&s);
    let home = c
        .ambient()
        .into_iter()
        .find(|(k, _)| k == "HOME")
        .map(|(_, v)| PathBuf::from(v))
        .unwrap();
    assert_eq!(
        c.sandbox.hide,
        [home.join(".config/foo"), PathBuf::from("/srv/keys")]
    );
}

/// Issue 29 item 1: the logins of the CLIs that are not running were visible to the one that
/// is (`~/.codex/auth.json` to Claude Code's agent). Each provider declares where its CLI keeps
/// them; the composition root hands the others' to the engine to hide, found where those CLIs
/// keep them on this machine (`CODEX_HOME` included), and never the running CLI's own.
#[test]
fn the_other_providers_logins_are_hidden_and_never_the_running_ones() {
    let ambient: Vec<(String, String)> = [
        ("HOME", "/home/u"),
        ("CODEX_HOME", "/opt/codex"),
        ("XDG_DATA_HOME", "/data"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let claude = ["/home/u/.claude/.credentials.json", "/home/u/.claude.json"];
    let codex = ["/opt/codex/auth.json", "/opt/codex/.credentials.json"];
    let copilot = [
        "/home/u/.copilot/config.json",
        "/home/u/.config/github-copilot",
    ];
    let opencode = ["/data/opencode/auth.json", "/data/opencode/mcp-auth.json"];
    let grok = ["/home/u/.grok/user-settings.json"];
    let gemini = [
        "/home/u/.gemini/oauth_creds.json",
        "/home/u/.gemini/google_accounts.json",
        "/home/u/.gemini/gemini-credentials.json",
        "/home/u/.gemini/.env",
    ];
    let all = [&claude[..], &codex, &copilot, &opencode, &grok, &gemini];
    let paths = |list: &[&[&str]]| -> Vec<PathBuf> {
        list.iter()
            .flat_map(|l| l.iter().map(PathBuf::from))
            .collect()
    };
    for (i, id) in ProviderId::ALL.into_iter().enumerate() {
        let others: Vec<&[&str]> = all
            .iter()
            .enumerate()
            .filter(|(j, _)| *j != i)
            .map(|(_, l)| *l)
            .collect();
        assert_eq!(
            other_providers_credentials(Some(id), &ambient),
            paths(&others),
            "{id}"
        );
    }
    assert_eq!(other_providers_credentials(None, &ambient), paths(&all));
}

/// Issue 29 item 2: Corral's bubblewrap sandbox refuses nested user namespaces, which Codex's
/// own sandbox needs. Under bubblewrap Codex runs without it (its default becomes
/// `danger-full-access`), and a Codex sandbox the user chose is refused naming the key instead
/// of failing every command Codex runs; under the native backend it stays Codex's to enforce.
#[test]
fn under_bubblewrap_codex_runs_without_its_own_sandbox_and_a_chosen_one_is_refused() {
    let mut s = Settings::default();
    s.sandbox.backend = corral_compose::BackendChoice::Bubblewrap;
    assert!(headless_provider(ProviderId::Codex, &s, engine_config(&s)).is_ok());
    s.providers.codex.sandbox = Some("workspace-write".into());
    let err = headless_provider(ProviderId::Codex, &s, engine_config(&s))
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.starts_with("providers.codex.sandbox: Codex's own \"workspace-write\" sandbox needs a nested user namespace"),
        "{err}"
    );
    s.providers.codex.sandbox = Some("danger-full-access".into());
    assert!(headless_provider(ProviderId::Codex, &s, engine_config(&s)).is_ok());
    s.providers.codex.sandbox = Some("workspace-write".into());
    s.sandbox.backend = corral_compose::BackendChoice::Native;
    assert!(headless_provider(ProviderId::Codex, &s, engine_config(&s)).is_ok());
}

#[test]
fn every_provider_id_gets_an_answer() {
    let s = Settings::default();
    for id in ProviderId::ALL {
        match headless_provider(id, &s, engine_config(&s)) {
            Ok(p) => assert_eq!(p.id(), id),
            Err(err) => panic!("{id}: {err}"),
        }
    }
}

#[test]
fn a_bad_version_range_reaching_the_factory_names_the_key() {
    let mut s = Settings::default();
    s.providers.claude.tested_versions = Some("nope".into());
    let err = headless_provider(ProviderId::Claude, &s, engine_config(&s))
        .err()
        .unwrap();
    assert!(
        err.to_string()
            .starts_with("providers.claude.tested_versions"),
        "{err}"
    );
}

/// The command runner follows the settings' sandbox: consented native runs, an unusable
/// bubblewrap without consent refuses, as a run would.
#[tokio::test]
async fn the_command_runner_follows_the_sandbox_settings() {
    use corral_compose::{BackendChoice, command_runner};
    use corral_ports::{CancellationToken, CommandError, CommandSpec};
    let dir = tempfile::tempdir().unwrap();
    let spec = CommandSpec::shell("echo checked", dir.path(), Duration::from_secs(30));
    let mut s = Settings::default();
    s.sandbox.backend = BackendChoice::Native;
    s.sandbox.allow_degraded_native = true;
    let out = command_runner(engine_config(&s))
        .run(spec.clone(), &CancellationToken::new())
        .await
        .unwrap();
    assert!(out.success(), "{out:?}");
    assert_eq!(out.stdout.text, "checked\n");

    let mut s = Settings::default();
    s.sandbox.bwrap = "/nonexistent/corral-bwrap".into();
    let err = command_runner(engine_config(&s))
        .run(spec, &CancellationToken::new())
        .await
        .unwrap_err();
    assert!(matches!(err, CommandError::Refused { .. }), "{err}");
}

#[test]
fn the_install_command_names_the_pinned_version_inside_the_tested_range() {
    let settings = Settings::default();
    for id in ProviderId::ALL {
        let facts = corral_compose::provider_facts(id, &settings);
        let (_, package, version) = corral_test_support::PINNED_CLIS
            .iter()
            .find(|(bin, _, _)| *bin == id.as_str())
            .unwrap_or_else(|| panic!("{id} is not pinned"));
        assert_eq!(corral_compose::tested_version(id), *version, "{id}");
        assert_eq!(*package, facts.npm_package, "{id}");
        // Grok's package 0.0.34 prints 1.0.1 for `--version`, which the range is about.
        assert!(
            id == ProviderId::Grok
                || facts
                    .tested_versions
                    .matches(&semver::Version::parse(version).unwrap()),
            "{id}: {version} is outside {}",
            facts.tested_versions
        );
        assert_eq!(
            facts.install_command,
            format!("npm install -g {package}@{version}")
        );
    }
    // A tested range of the settings' own that leaves the pin out: the range, for npm.
    let mut settings = Settings::default();
    settings.providers.claude.tested_versions = Some(">=2.2.0, <2.3.0".into());
    assert_eq!(
        corral_compose::provider_facts(ProviderId::Claude, &settings).install_command,
        "npm install -g '@anthropic-ai/claude-code@>=2.2.0 <2.3.0'"
    );
}

/// Issue 34: every provider whose CLI's own configuration can name an endpoint reads it before
/// the first spawn, marks whether a run uses it, and does not let it widen the allow-list.
#[test]
fn each_provider_names_the_endpoints_of_its_clis_own_configuration() {
    let home = tempfile::tempdir().unwrap();
    let write = |rel: &str, text: &str| {
        let path = home.path().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write(
        ".claude/settings.json",
        r#"{"env": {"ANTHROPIC_BASE_URL": "https://claude-gw.corp.example/v1"}}"#,
    );
    write(
        ".codex/config.toml",
        "model_provider = \"corp\"\n[model_providers.corp]\nbase_url = \"https://codex-gw.corp.example:8443/v1\"\n",
    );
    write(
        ".config/opencode/opencode.json",
        r#"{"model": "corp/m", "provider": {"corp": {"options": {"baseURL": "http://oc-gw.corp.example:8080/v1"}}}}"#,
    );
    write(
        ".grok/user-settings.json",
        r#"{"baseURL": "https://grok-gw.corp.example/v1"}"#,
    );
    write(
        ".gemini/.env",
        "export GOOGLE_GEMINI_BASE_URL=\"https://gemini-gw.corp.example\"\n",
    );
    let mut settings = Settings::default();
    settings.sandbox.network_allow = vec!["grok-gw.corp.example:443".into()];
    let mut config = engine_config(&settings);
    config.ambient_env = Some(vec![
        ("HOME".to_string(), home.path().display().to_string()),
        ("PATH".to_string(), "/usr/bin:/bin".to_string()),
    ]);
    let mut seen = Vec::new();
    for id in ProviderId::ALL {
        let provider = corral_compose::provider(id, &settings, config.clone()).unwrap();
        let endpoints = provider.endpoints();
        assert!(endpoints.confined, "the default network is the allow-list");
        for c in &endpoints.configured {
            let listed = endpoints.allow.permits(&c.endpoint);
            seen.push(format!(
                "{id}: {} names {} (in use: {}, on the allow-list: {listed})",
                c.source, c.endpoint, c.in_use
            ));
        }
        let refused = endpoints.refused_in_use().map(|c| c.endpoint.to_string());
        let want = match id {
            ProviderId::Claude => Some("claude-gw.corp.example:443"),
            ProviderId::Codex => Some("codex-gw.corp.example:8443"),
            ProviderId::Opencode => Some("oc-gw.corp.example:8080"),
            ProviderId::Gemini => Some("gemini-gw.corp.example:443"),
            // On the allow-list; Copilot's configuration names none.
            ProviderId::Grok | ProviderId::Copilot => None,
        };
        assert_eq!(refused.as_deref(), want, "{id}");
    }
    assert_eq!(
        seen,
        [
            "claude: ~/.claude/settings.json env.ANTHROPIC_BASE_URL names claude-gw.corp.example:443 (in use: true, on the allow-list: false)",
            "codex: ~/.codex/config.toml [model_providers.corp] base_url names codex-gw.corp.example:8443 (in use: true, on the allow-list: false)",
            "opencode: ~/.config/opencode/opencode.json provider.corp.options.baseURL names oc-gw.corp.example:8080 (in use: true, on the allow-list: false)",
            "grok: ~/.grok/user-settings.json baseURL names grok-gw.corp.example:443 (in use: true, on the allow-list: true)",
            "gemini: ~/.gemini/.env GOOGLE_GEMINI_BASE_URL names gemini-gw.corp.example:443 (in use: true, on the allow-list: false)",
        ]
    );
}
