//! The environment Grok gets: the engine's policy applied with this adapter's profile to an
//! injected ambient environment (the process environment is never touched).

use corral_engine::{CliAdapter, EnvInherit, EnvPolicy, ResolvedEnv};
use corral_grok::GrokAdapter;
use corral_test_support::session::session;

fn ambient() -> Vec<(&'static str, &'static str)> {
    vec![
        ("PATH", "/usr/bin"),
        ("HOME", "/home/u"),
        ("GROK_API_KEY", "xai-key"),
        ("GROK_BASE_URL", "http://127.0.0.1:9/v1"),
        ("GROK_MODEL", "grok-code-fast-1"),
        ("GROK_MAX_TOKENS", "8192"),
        // Not read by Grok 1.0.x: withheld.
        ("XAI_API_KEY", "xai-other"),
        // Opts Grok into sending files to Morph's API: withheld unless allowed by name.
        ("MORPH_API_KEY", "morph"),
        ("HTTPS_PROXY", "http://proxy:3128"),
        ("no_proxy", "localhost"),
        ("NODE_USE_ENV_PROXY", "1"),
        ("NODE_EXTRA_CA_CERTS", "/etc/ca.pem"),
        ("NODE_OPTIONS", "--require /tmp/hook.js"),
        ("ANTHROPIC_API_KEY", "sk-ant"),
        ("OPENAI_API_KEY", "sk-openai"),
        ("GITHUB_TOKEN", "ghp"),
        ("EDITOR", "vim"),
    ]
}

fn resolve(inherit: EnvInherit, allow: &[&str]) -> ResolvedEnv {
    let adapter = GrokAdapter::default();
    let spec_env: Vec<(String, String)> = Vec::new();
    EnvPolicy {
        inherit,
        profile: adapter.env_profile(),
        allow: allow.iter().map(|a| a.to_string()).collect(),
        set: spec_env,
    }
    .resolve(ambient())
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn the_profile_passes_grok_variables_and_nothing_else_secret() {
    let env = resolve(EnvInherit::Core, &[]);
    assert_eq!(
        env.vars,
        pairs(&[
            ("GROK_API_KEY", "xai-key"),
            ("GROK_BASE_URL", "http://127.0.0.1:9/v1"),
            ("GROK_MAX_TOKENS", "8192"),
            ("GROK_MODEL", "grok-code-fast-1"),
            ("HOME", "/home/u"),
            ("HTTPS_PROXY", "http://proxy:3128"),
            ("NODE_EXTRA_CA_CERTS", "/etc/ca.pem"),
            ("NODE_USE_ENV_PROXY", "1"),
            ("PATH", "/usr/bin"),
            ("no_proxy", "localhost"),
        ])
    );
    // XAI_API_KEY, MORPH_API_KEY and the other providers' keys match no rule at all.
    assert_eq!(env.withheld_secrets, Vec::<String>::new());
}

#[test]
fn with_nothing_inherited_only_the_profile_remains() {
    let names: Vec<String> = resolve(EnvInherit::None, &[])
        .vars
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    assert_eq!(
        names,
        [
            "GROK_API_KEY",
            "GROK_BASE_URL",
            "GROK_MAX_TOKENS",
            "GROK_MODEL",
            "HTTPS_PROXY",
            "NODE_EXTRA_CA_CERTS",
            "NODE_USE_ENV_PROXY",
            "no_proxy",
        ]
    );
}

#[test]
fn morph_passes_only_when_allowed_by_name() {
    let env = resolve(EnvInherit::None, &["MORPH_*"]);
    assert!(!env.vars.iter().any(|(k, _)| k == "MORPH_API_KEY"));
    assert_eq!(env.withheld_secrets, ["MORPH_API_KEY"]);
    let env = resolve(EnvInherit::None, &["MORPH_API_KEY"]);
    assert!(env.vars.iter().any(|(k, _)| k == "MORPH_API_KEY"));
}

#[test]
fn the_adapter_sets_no_variables_of_its_own() {
    let session = session();
    let pointer = crate::support::pointer();
    let spec = GrokAdapter::default()
        .command(&crate::support::plan(&session, Some(&pointer), None))
        .unwrap();
    assert!(spec.env_set.is_empty());
}
