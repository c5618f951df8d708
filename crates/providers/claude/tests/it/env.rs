//! The environment Claude Code gets: the engine's policy applied with this adapter's profile and
//! settings to an injected ambient environment (the process environment is never touched).

use corral_claude::{ClaudeAdapter, ClaudeSettings};
use corral_engine::{CliAdapter, EnvInherit, EnvPolicy};

fn ambient() -> Vec<(&'static str, &'static str)> {
    vec![
        ("PATH", "/usr/bin"),
        ("HOME", "/home/u"),
        ("ANTHROPIC_API_KEY", "sk-ant"),
        ("ANTHROPIC_BASE_URL", "http://127.0.0.1:9"),
        ("CLAUDE_CODE_OAUTH_TOKEN", "oauth"),
        ("CLAUDE_CONFIG_DIR", "/home/u/.claude-work"),
        ("CLAUDECODE", "1"),
        ("IS_SANDBOX", "1"),
        ("HTTPS_PROXY", "http://proxy:3128"),
        ("no_proxy", "localhost"),
        ("NODE_EXTRA_CA_CERTS", "/etc/ca.pem"),
        ("AWS_REGION", "eu-west-1"),
        ("AWS_PROFILE", "bedrock"),
        ("AWS_SECRET_ACCESS_KEY", "aws-secret"),
        ("AWS_ACCESS_KEY_ID", "AKIA"),
        ("OPENAI_API_KEY", "sk-openai"),
        ("GITHUB_TOKEN", "ghp"),
        ("GROK_API_KEY", "xai"),
        ("EDITOR", "vim"),
        // A retry cap from the ambient environment must not win over the adapter's.
        ("CLAUDE_CODE_MAX_RETRIES", "10"),
        ("DISABLE_TELEMETRY", "0"),
    ]
}

fn resolve(adapter: &ClaudeAdapter, inherit: EnvInherit) -> Vec<(String, String)> {
    EnvPolicy {
        inherit,
        profile: adapter.env_profile(),
        allow: Vec::new(),
        set: adapter.env_set(),
    }
    .resolve(ambient())
    .vars
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn the_profile_passes_claude_credentials_and_nothing_else_secret() {
    let adapter = ClaudeAdapter::new(ClaudeSettings {
        max_internal_retries: 2,
        ..ClaudeSettings::default()
    });
    assert_eq!(
        resolve(&adapter, EnvInherit::Core),
        pairs(&[
            ("ANTHROPIC_API_KEY", "sk-ant"),
            ("ANTHROPIC_BASE_URL", "http://127.0.0.1:9"),
            ("AWS_PROFILE", "bedrock"),
            ("AWS_REGION", "eu-west-1"),
            ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
            ("CLAUDE_CODE_MAX_RETRIES", "2"),
            ("CLAUDE_CODE_OAUTH_TOKEN", "oauth"),
            ("CLAUDE_CONFIG_DIR", "/home/u/.claude-work"),
            ("DISABLE_AUTOUPDATER", "1"),
            ("DISABLE_TELEMETRY", "1"),
            ("HOME", "/home/u"),
            ("HTTPS_PROXY", "http://proxy:3128"),
            ("IS_SANDBOX", "1"),
            ("NODE_EXTRA_CA_CERTS", "/etc/ca.pem"),
            ("PATH", "/usr/bin"),
            ("no_proxy", "localhost"),
        ])
    );
}

#[test]
fn with_nothing_inherited_only_the_profile_and_the_adapter_settings_remain() {
    let names: Vec<String> = resolve(&ClaudeAdapter::default(), EnvInherit::None)
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    assert_eq!(
        names,
        [
            "ANTHROPIC_API_KEY",
            "ANTHROPIC_BASE_URL",
            "AWS_PROFILE",
            "AWS_REGION",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC",
            "CLAUDE_CODE_MAX_RETRIES",
            "CLAUDE_CODE_OAUTH_TOKEN",
            "CLAUDE_CONFIG_DIR",
            "DISABLE_AUTOUPDATER",
            "DISABLE_TELEMETRY",
            "HTTPS_PROXY",
            "IS_SANDBOX",
            "NODE_EXTRA_CA_CERTS",
            "no_proxy",
        ]
    );
}
