//! The environment Codex gets: the engine's policy applied with this adapter's profile and
//! settings to an injected ambient environment (the process environment is never touched).

use corral_codex::CodexAdapter;
use corral_engine::{CliAdapter, EnvInherit, EnvPolicy};
use corral_test_support::session::session;

fn ambient() -> Vec<(&'static str, &'static str)> {
    vec![
        ("PATH", "/usr/bin"),
        ("HOME", "/home/u"),
        ("OPENAI_API_KEY", "sk-openai"),
        ("OPENAI_BASE_URL", "http://127.0.0.1:9/v1"),
        ("OPENAI_ORGANIZATION", "org-1"),
        ("CODEX_HOME", "/home/u/.codex-work"),
        ("CODEX_API_KEY", "sk-codex"),
        ("CODEX_ACCESS_TOKEN", "at"),
        ("CODEX_CA_CERTIFICATE", "/etc/ca.pem"),
        // Set by a parent Codex for the commands it runs; a nested Corral must not pass them on.
        ("CODEX_SANDBOX", "seatbelt"),
        ("CODEX_SANDBOX_NETWORK_DISABLED", "1"),
        ("CODEX_THREAD_ID", "01a22c60"),
        ("HTTPS_PROXY", "http://proxy:3128"),
        ("no_proxy", "localhost"),
        ("SSL_CERT_FILE", "/etc/ssl/cert.pem"),
        ("AWS_PROFILE", "bedrock"),
        ("AWS_SECRET_ACCESS_KEY", "aws-secret"),
        ("ANTHROPIC_API_KEY", "sk-ant"),
        ("GITHUB_TOKEN", "ghp"),
        ("GROK_API_KEY", "xai"),
        ("FAKE_API_KEY", "sk-test"),
        ("RUST_LOG", "debug"),
        ("CLAUDECODE", "1"),
        ("EDITOR", "vim"),
    ]
}

fn resolve(inherit: EnvInherit, allow: &[&str]) -> (Vec<(String, String)>, Vec<String>) {
    let adapter = CodexAdapter::default();
    let env = EnvPolicy {
        inherit,
        profile: adapter.env_profile(),
        allow: allow.iter().map(|a| a.to_string()).collect(),
        set: adapter
            .command(&corral_engine::AttemptPlan {
                session: &session(),
                resume: None,
                attempt: 1,
                pointer: None,
            })
            .unwrap()
            .env_set,
    }
    .resolve(ambient());
    (env.vars, env.withheld_secrets)
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn the_profile_passes_codex_credentials_and_nothing_else_secret() {
    let (vars, withheld) = resolve(EnvInherit::Core, &[]);
    assert_eq!(
        vars,
        pairs(&[
            ("AWS_PROFILE", "bedrock"),
            ("CODEX_ACCESS_TOKEN", "at"),
            ("CODEX_API_KEY", "sk-codex"),
            ("CODEX_CA_CERTIFICATE", "/etc/ca.pem"),
            ("CODEX_HOME", "/home/u/.codex-work"),
            ("HOME", "/home/u"),
            ("HTTPS_PROXY", "http://proxy:3128"),
            ("OPENAI_API_KEY", "sk-openai"),
            ("OPENAI_BASE_URL", "http://127.0.0.1:9/v1"),
            ("OPENAI_ORGANIZATION", "org-1"),
            ("PATH", "/usr/bin"),
            ("SSL_CERT_FILE", "/etc/ssl/cert.pem"),
            ("no_proxy", "localhost"),
        ])
    );
    // Nothing of the other providers' credentials, static cloud keys or a custom provider's key
    // reaches the child (the engine's core set never reaches secrets, so none is reported
    // withheld).
    assert!(withheld.is_empty(), "{withheld:?}");
}

#[test]
fn a_custom_providers_key_passes_when_named_exactly() {
    let (vars, _) = resolve(EnvInherit::None, &["FAKE_API_KEY"]);
    let names: Vec<&str> = vars.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        names,
        [
            "AWS_PROFILE",
            "CODEX_ACCESS_TOKEN",
            "CODEX_API_KEY",
            "CODEX_CA_CERTIFICATE",
            "CODEX_HOME",
            "FAKE_API_KEY",
            "HTTPS_PROXY",
            "OPENAI_API_KEY",
            "OPENAI_BASE_URL",
            "OPENAI_ORGANIZATION",
            "no_proxy",
        ]
    );
}

#[test]
fn the_adapter_sets_no_variables() {
    // Codex's knobs are configuration keys, given with `-c` on the command line.
    let (vars, _) = resolve(EnvInherit::None, &[]);
    assert!(!vars.iter().any(|(k, _)| k == "RUST_LOG"));
    let spec = CodexAdapter::default()
        .command(&corral_engine::AttemptPlan {
            session: &session(),
            resume: None,
            attempt: 1,
            pointer: None,
        })
        .unwrap();
    assert!(spec.env_set.is_empty());
}
