//! The environment OpenCode gets: the engine's policy applied with this adapter's profile and
//! variables to an injected ambient environment (the process environment is never touched). The
//! probe's environment is built the same way.

use corral_engine::{CliAdapter, EnvInherit, EnvPolicy};
use corral_opencode::{OpencodeAdapter, probe_env};

fn ambient() -> Vec<(String, String)> {
    [
        ("PATH", "/usr/bin"),
        ("HOME", "/home/u"),
        ("PWD", "/somewhere/else"),
        ("XDG_DATA_HOME", "/home/u/.local/share"),
        ("XDG_CONFIG_HOME", "/home/u/.config"),
        ("OPENCODE_CONFIG_CONTENT", "{\"provider\":{}}"),
        ("OPENCODE_API_KEY", "zen"),
        ("ANTHROPIC_API_KEY", "sk-ant"),
        ("ANTHROPIC_AUTH_TOKEN", "oauth-not-read-by-opencode"),
        ("OPENAI_API_KEY", "sk-openai"),
        ("OPENAI_BASE_URL", "http://127.0.0.1:9/v1"),
        ("OPENROUTER_API_KEY", "sk-or"),
        ("GEMINI_API_KEY", "gem"),
        ("GROQ_API_KEY", "groq"),
        ("XAI_API_KEY", "xai"),
        ("HTTPS_PROXY", "http://proxy:3128"),
        ("no_proxy", "localhost"),
        ("NODE_EXTRA_CA_CERTS", "/etc/ca.pem"),
        ("AWS_REGION", "eu-west-1"),
        ("AWS_PROFILE", "bedrock"),
        ("AWS_SECRET_ACCESS_KEY", "aws-secret"),
        ("AWS_ACCESS_KEY_ID", "AKIA"),
        ("AWS_BEARER_TOKEN_BEDROCK", "bedrock-token"),
        ("GITHUB_TOKEN", "ghp"),
        ("CLAUDE_CODE_OAUTH_TOKEN", "claude"),
        ("CLAUDECODE", "1"),
        ("EDITOR", "vim"),
        // The ambient environment must not re-enable what the adapter turns off.
        ("OPENCODE_DISABLE_AUTOUPDATE", "0"),
        ("OPENCODE_DISABLE_SHARE", "false"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

fn resolve(inherit: EnvInherit) -> Vec<(String, String)> {
    let adapter = OpencodeAdapter::default();
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

fn names(vars: &[(String, String)]) -> Vec<&str> {
    vars.iter().map(|(k, _)| k.as_str()).collect()
}

#[test]
fn the_profile_passes_provider_keys_and_opencode_knobs_and_nothing_else_secret() {
    assert_eq!(
        resolve(EnvInherit::Core),
        pairs(&[
            ("ANTHROPIC_API_KEY", "sk-ant"),
            ("AWS_PROFILE", "bedrock"),
            ("AWS_REGION", "eu-west-1"),
            ("GEMINI_API_KEY", "gem"),
            ("GROQ_API_KEY", "groq"),
            ("HOME", "/home/u"),
            ("HTTPS_PROXY", "http://proxy:3128"),
            ("NODE_EXTRA_CA_CERTS", "/etc/ca.pem"),
            ("OPENAI_API_KEY", "sk-openai"),
            ("OPENAI_BASE_URL", "http://127.0.0.1:9/v1"),
            ("OPENCODE_API_KEY", "zen"),
            ("OPENCODE_CONFIG_CONTENT", "{\"provider\":{}}"),
            ("OPENCODE_DISABLE_AUTOUPDATE", "1"),
            ("OPENCODE_DISABLE_SHARE", "1"),
            ("OPENROUTER_API_KEY", "sk-or"),
            ("PATH", "/usr/bin"),
            ("XAI_API_KEY", "xai"),
            ("XDG_CONFIG_HOME", "/home/u/.config"),
            ("XDG_DATA_HOME", "/home/u/.local/share"),
            ("no_proxy", "localhost"),
        ])
    );
}

#[test]
fn pwd_static_cloud_keys_and_other_clis_credentials_stay_out() {
    let vars = resolve(EnvInherit::Core);
    let names = names(&vars);
    for withheld in [
        "PWD",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_ACCESS_KEY_ID",
        "AWS_BEARER_TOKEN_BEDROCK",
        "ANTHROPIC_AUTH_TOKEN",
        "GITHUB_TOKEN",
        "CLAUDE_CODE_OAUTH_TOKEN",
        "CLAUDECODE",
        "EDITOR",
    ] {
        assert!(!names.contains(&withheld), "{withheld} reached OpenCode");
    }
}

#[test]
fn with_nothing_inherited_the_session_store_is_still_found() {
    assert_eq!(
        names(&resolve(EnvInherit::None)),
        [
            "ANTHROPIC_API_KEY",
            "AWS_PROFILE",
            "AWS_REGION",
            "GEMINI_API_KEY",
            "GROQ_API_KEY",
            "HTTPS_PROXY",
            "NODE_EXTRA_CA_CERTS",
            "OPENAI_API_KEY",
            "OPENAI_BASE_URL",
            "OPENCODE_API_KEY",
            "OPENCODE_CONFIG_CONTENT",
            "OPENCODE_DISABLE_AUTOUPDATE",
            "OPENCODE_DISABLE_SHARE",
            "OPENROUTER_API_KEY",
            "XAI_API_KEY",
            "XDG_CONFIG_HOME",
            "XDG_DATA_HOME",
            "no_proxy",
        ]
    );
}

#[test]
fn the_probe_gets_the_environment_a_run_gets() {
    assert_eq!(
        probe_env(ambient(), EnvInherit::Core, &[]),
        resolve(EnvInherit::Core)
    );
    // The user's allowlist reaches the probe too (exact names pass even when secret-looking).
    let allowed = probe_env(ambient(), EnvInherit::Core, &["GITHUB_TOKEN".to_string()]);
    assert!(allowed.contains(&("GITHUB_TOKEN".to_string(), "ghp".to_string())));
}
