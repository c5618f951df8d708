//! The environment Copilot gets: the engine's policy applied with this adapter's profile to an
//! injected ambient environment (the process environment is never touched).

use corral_copilot::CopilotAdapter;
use corral_copilot::adapter::SECRET_ENV_VARS;
use corral_engine::{CliAdapter, EnvInherit, EnvPolicy};

fn ambient() -> Vec<(&'static str, &'static str)> {
    vec![
        ("PATH", "/usr/bin"),
        ("HOME", "/home/u"),
        ("COPILOT_GITHUB_TOKEN", "github_pat_x"),
        ("GH_TOKEN", "gho_x"),
        ("GITHUB_TOKEN", "ghp_x"),
        ("GH_HOST", "example.ghe.com"),
        ("COPILOT_HOME", "/home/u/.copilot-work"),
        ("COPILOT_MODEL", "fake-model"),
        ("COPILOT_OFFLINE", "true"),
        ("COPILOT_PROVIDER_BASE_URL", "http://127.0.0.1:9/v1"),
        ("COPILOT_PROVIDER_API_KEY", "sk-test"),
        ("COPILOT_PROVIDER_TYPE", "anthropic"),
        ("HTTPS_PROXY", "http://proxy:3128"),
        ("no_proxy", "localhost"),
        ("NODE_EXTRA_CA_CERTS", "/etc/ca.pem"),
        ("XDG_CACHE_HOME", "/home/u/.cache"),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "https://collector.example"),
        ("ANTHROPIC_API_KEY", "sk-ant"),
        ("OPENAI_API_KEY", "sk-openai"),
        ("AWS_SECRET_ACCESS_KEY", "aws-secret"),
        ("EDITOR", "vim"),
        ("CLAUDECODE", "1"),
    ]
}

fn resolve(inherit: EnvInherit) -> (Vec<String>, Vec<String>) {
    let adapter = CopilotAdapter::default();
    let env = EnvPolicy {
        inherit,
        profile: adapter.env_profile(),
        allow: Vec::new(),
        set: Vec::new(),
    }
    .resolve(ambient());
    (
        env.vars.into_iter().map(|(k, _)| k).collect(),
        env.withheld_secrets,
    )
}

#[test]
fn the_profile_passes_copilot_credentials_and_nothing_else_secret() {
    let (names, withheld) = resolve(EnvInherit::Core);
    assert_eq!(
        names,
        [
            "COPILOT_GITHUB_TOKEN",
            "COPILOT_HOME",
            "COPILOT_MODEL",
            "COPILOT_OFFLINE",
            "COPILOT_PROVIDER_API_KEY",
            "COPILOT_PROVIDER_BASE_URL",
            "COPILOT_PROVIDER_TYPE",
            "GH_HOST",
            "GH_TOKEN",
            "GITHUB_TOKEN",
            "HOME",
            "HTTPS_PROXY",
            "NODE_EXTRA_CA_CERTS",
            "PATH",
            "XDG_CACHE_HOME",
            "no_proxy",
        ]
    );
    // Other providers' keys and cloud secrets never reach the agent.
    assert_eq!(withheld, Vec::<String>::new());
}

#[test]
fn with_nothing_inherited_only_the_profile_remains() {
    let (names, _) = resolve(EnvInherit::None);
    assert_eq!(
        names,
        [
            "COPILOT_GITHUB_TOKEN",
            "COPILOT_HOME",
            "COPILOT_MODEL",
            "COPILOT_OFFLINE",
            "COPILOT_PROVIDER_API_KEY",
            "COPILOT_PROVIDER_BASE_URL",
            "COPILOT_PROVIDER_TYPE",
            "GH_HOST",
            "GH_TOKEN",
            "GITHUB_TOKEN",
            "HTTPS_PROXY",
            "NODE_EXTRA_CA_CERTS",
            "XDG_CACHE_HOME",
            "no_proxy",
        ]
    );
}

#[test]
fn every_credential_the_profile_passes_is_hidden_from_the_agents_shell() {
    let (names, _) = resolve(EnvInherit::None);
    let secret_looking = names.iter().filter(|n| {
        let upper = n.to_ascii_uppercase();
        ["KEY", "SECRET", "TOKEN"].iter().any(|w| upper.contains(w))
    });
    for name in secret_looking {
        assert!(
            SECRET_ENV_VARS.contains(&name.as_str()),
            "{name} reaches Copilot but is not in --secret-env-vars"
        );
    }
}
