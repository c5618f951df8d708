//! The environment policy: a child gets an explicit environment, never the ambient one wholesale.
//!
//! A variable reaches the child when the core set names it (with [`EnvInherit::Core`]), when the
//! provider's credential profile names it, or when the user's allowlist names it. Names that look
//! secret (see [`looks_secret`]: `*KEY*`, `*SECRET*`, `*TOKEN*`, `*PASSWORD*`, `*CREDENTIAL*`,
//! words such as `PAT`, `PASS`, `AUTH` or `DSN`, credential URLs such as `DATABASE_URL`, and
//! names such as `KUBECONFIG`, `GOOGLE_APPLICATION_CREDENTIALS` or
//! `AZURE_CLIENT_CERTIFICATE_PATH` that lead to a key file) pass only when the profile names them,
//! or the allowlist names them exactly (no wildcard). `CLAUDECODE` is always removed: Claude Code
//! refuses to start inside another Claude Code session when it sees it.

use std::collections::BTreeMap;

/// Which ambient variables a child starts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EnvInherit {
    /// The core set: `PATH`, `HOME`, locale, terminal, temp and XDG directories, TLS roots.
    #[default]
    Core,
    /// Nothing but what the profile and allowlist name.
    None,
}

/// Core variables every CLI needs to run at all. `LC_*` and `XDG_*` match as prefixes.
const CORE: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "LC_*",
    "TERM",
    "COLORTERM",
    "NO_COLOR",
    "TMPDIR",
    "TZ",
    "XDG_*",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
];

/// Removed whatever any rule says.
const ALWAYS_STRIPPED: &[&str] = &["CLAUDECODE"];

/// A provider's credential profile: the variables its CLI reads (patterns with a trailing `*`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EnvProfile {
    /// The profile's name, for the record.
    pub name: String,
    /// Patterns the CLI reads; these may pass secret-looking names.
    pub pass: Vec<String>,
}

impl EnvProfile {
    /// A profile from static patterns.
    pub fn new(name: &str, pass: &[&str]) -> Self {
        EnvProfile {
            name: name.to_string(),
            pass: pass.iter().map(|p| p.to_string()).collect(),
        }
    }
}

/// The whole policy for one spawn.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EnvPolicy {
    /// What to start from.
    pub inherit: EnvInherit,
    /// The provider's credential profile.
    pub profile: EnvProfile,
    /// The user's extra allowlist (settings). Wildcards never pass secret-looking names.
    pub allow: Vec<String>,
    /// Variables set explicitly (the provider's knobs, the run token); applied last.
    pub set: Vec<(String, String)>,
}

/// The environment a child gets, and what was left out.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ResolvedEnv {
    /// The child's complete environment, sorted by name.
    pub vars: Vec<(String, String)>,
    /// Ambient names withheld because they look secret and nothing named them.
    pub withheld_secrets: Vec<String>,
}

impl ResolvedEnv {
    /// The names only, for the execution log (values are never logged).
    pub fn names(&self) -> Vec<&str> {
        self.vars.iter().map(|(k, _)| k.as_str()).collect()
    }
}

/// Whether `name` matches `pattern` (a name, or a prefix with a trailing `*`).
pub fn matches(pattern: &str, name: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => pattern == name,
    }
}

/// Parts that make a name look secret wherever they appear in it (`OPENAI_API_KEY`,
/// `npm_config__authToken`, `AZURE_STORAGE_CONNECTION_STRING`).
const SECRET_PARTS: &[&str] = &[
    "KEY",
    "SECRET",
    "TOKEN",
    "PASSWORD",
    "PASSWD",
    "PASSPHRASE",
    "CREDENTIAL",
    "PRIVATE",
    "COOKIE",
    "CONNECTION_STRING",
    "CONNSTR",
];

/// Words (between `_`, `-` or `.`) that make a name look secret, where as a part of a longer word
/// they would not (`GH_PAT` but not `PATH`, `NPM_AUTH` but not `GIT_AUTHOR_NAME`).
const SECRET_WORDS: &[&str] = &[
    "PASS", "PWD", "PAT", "AUTH", "OAUTH", "CRED", "CREDS", "DSN", "SALT", "OTP", "WEBHOOK",
];

/// Services whose `*_URL`/`*_URI` carries a user and password (`DATABASE_URL`, `REDIS_URL`).
const CREDENTIAL_URL_WORDS: &[&str] = &[
    "DATABASE",
    "DB",
    "REDIS",
    "MONGO",
    "MONGODB",
    "POSTGRES",
    "POSTGRESQL",
    "PG",
    "MYSQL",
    "AMQP",
    "RABBITMQ",
    "BROKER",
    "SMTP",
];

/// Names that hold no secret themselves but lead to one (a credentials file, an agent socket,
/// a directory of keys): the sandbox hides the usual places of these files, and a variable
/// naming another place would lead the agent to it.
const SECRET_NAMES: &[&str] = &[
    "KUBECONFIG",
    "GPG_AGENT_INFO",
    "NETRC",
    "DOCKER_AUTH_CONFIG",
    "DOCKER_CONFIG",
    "DOCKER_CERT_PATH",
    "GNUPGHOME",
    "AWS_CONFIG_FILE",
    "CLOUDSDK_CONFIG",
    "AZURE_CONFIG_DIR",
    "BOTO_CONFIG",
    "BOTO_PATH",
    "RCLONE_CONFIG",
    "PGPASSFILE",
    "PGSERVICEFILE",
    "OCI_CLI_CONFIG_FILE",
    "VAULT_CONFIG_PATH",
    "SSL_CLIENT_CERT",
    "GIT_SSL_CERT",
];

/// Endings of names that lead to a client certificate with its key
/// (`AZURE_CLIENT_CERTIFICATE_PATH`): never a CA bundle such as `SSL_CERT_FILE`, which is public
/// and in the core set.
const SECRET_SUFFIXES: &[&str] = &["_CERTIFICATE_PATH", "_CLIENT_CERT", "_CLIENT_CERTIFICATE"];

/// Names that match a rule above and are known not to be secret.
const NOT_SECRET: &[&str] = &["PWD", "OLDPWD"];

/// Whether `name` looks like it holds (or leads to) a credential.
pub fn looks_secret(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    if NOT_SECRET.contains(&upper.as_str()) {
        return false;
    }
    if SECRET_NAMES.contains(&upper.as_str())
        || SECRET_PARTS.iter().any(|p| upper.contains(p))
        || SECRET_SUFFIXES.iter().any(|s| upper.ends_with(s))
    {
        return true;
    }
    let words: Vec<&str> = upper
        .split(['_', '-', '.'])
        .filter(|w| !w.is_empty())
        .collect();
    if words.iter().any(|w| SECRET_WORDS.contains(w)) {
        return true;
    }
    let url = words.last().is_some_and(|w| matches!(*w, "URL" | "URI"));
    url && words.iter().any(|w| CREDENTIAL_URL_WORDS.contains(w))
}

impl EnvPolicy {
    /// Applies the policy to an ambient environment (passed in, so tests never touch the
    /// process environment).
    pub fn resolve<I, K, V>(&self, ambient: I) -> ResolvedEnv
    where
        I: IntoIterator<Item = (K, V)>,
        K: Into<String>,
        V: Into<String>,
    {
        let mut vars = BTreeMap::new();
        let mut withheld = Vec::new();
        for (name, value) in ambient {
            let name = name.into();
            if ALWAYS_STRIPPED.contains(&name.as_str()) {
                continue;
            }
            let by_profile = self.profile.pass.iter().any(|p| matches(p, &name));
            let by_allow_exact = self.allow.iter().any(|p| p == &name);
            let by_allow = by_allow_exact || self.allow.iter().any(|p| matches(p, &name));
            let by_core =
                self.inherit == EnvInherit::Core && CORE.iter().any(|p| matches(p, &name));
            if !(by_profile || by_allow || by_core) {
                continue;
            }
            if looks_secret(&name) && !(by_profile || by_allow_exact) {
                withheld.push(name);
                continue;
            }
            vars.insert(name, value.into());
        }
        for (name, value) in &self.set {
            if !ALWAYS_STRIPPED.contains(&name.as_str()) {
                vars.insert(name.clone(), value.clone());
            }
        }
        withheld.sort();
        ResolvedEnv {
            vars: vars.into_iter().collect(),
            withheld_secrets: withheld,
        }
    }
}

/// This process's environment, with names and values that are not UTF-8 decoded lossily: the
/// ambient environment a caller starts from when it was handed none.
pub fn process_env() -> Vec<(String, String)> {
    std::env::vars_os()
        .map(|(k, v)| {
            (
                k.to_string_lossy().into_owned(),
                v.to_string_lossy().into_owned(),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ambient() -> Vec<(&'static str, &'static str)> {
        vec![
            ("PATH", "/bin"),
            ("HOME", "/home/u"),
            ("LC_ALL", "C"),
            ("ANTHROPIC_API_KEY", "sk-a"),
            ("ANTHROPIC_BASE_URL", "http://127.0.0.1:1"),
            ("OPENAI_API_KEY", "sk-o"),
            ("GITHUB_TOKEN", "ghp"),
            ("AWS_SECRET_ACCESS_KEY", "aws"),
            ("CLAUDECODE", "1"),
            ("MY_TOOL_HOME", "/opt"),
            ("MY_TOOL_KEY", "k"),
            ("EDITOR", "vim"),
        ]
    }

    #[test]
    fn profile_passes_its_own_secrets_and_nothing_else_secret() {
        let policy = EnvPolicy {
            profile: EnvProfile::new("claude", &["ANTHROPIC_*", "CLAUDE_CODE_*"]),
            ..EnvPolicy::default()
        };
        let env = policy.resolve(ambient());
        assert_eq!(
            env.names(),
            [
                "ANTHROPIC_API_KEY",
                "ANTHROPIC_BASE_URL",
                "HOME",
                "LC_ALL",
                "PATH"
            ]
        );
        assert!(
            env.withheld_secrets.is_empty(),
            "core rules never reach secrets"
        );
    }

    #[test]
    fn wildcard_allowlist_withholds_secrets_but_exact_names_pass() {
        let policy = EnvPolicy {
            inherit: EnvInherit::None,
            allow: vec!["MY_TOOL_*".into(), "GITHUB_TOKEN".into()],
            ..EnvPolicy::default()
        };
        let env = policy.resolve(ambient());
        assert_eq!(env.names(), ["GITHUB_TOKEN", "MY_TOOL_HOME"]);
        assert_eq!(env.withheld_secrets, ["MY_TOOL_KEY"]);
    }

    #[test]
    fn a_wildcard_never_passes_what_an_attacker_would_look_for() {
        let secret = [
            "DB_PASSWORD",
            "DB_PASS",
            "MYSQL_PWD",
            "GH_PAT",
            "NPM_AUTH",
            "npm_config__authToken",
            "SSH_AUTH_SOCK",
            "SENTRY_DSN",
            "DATABASE_URL",
            "REDIS_URL",
            "MONGODB_URI",
            "SLACK_WEBHOOK_URL",
            "AZURE_STORAGE_CONNECTION_STRING",
            "GOOGLE_APPLICATION_CREDENTIALS",
            "AWS_SESSION_TOKEN",
            "KUBECONFIG",
            "PRIVATE_KEY_PATH",
            "SESSION_COOKIE",
            "VAULT_PASSPHRASE",
        ];
        let harmless = [
            "PATH",
            "HOME",
            "PWD",
            "OLDPWD",
            "GIT_AUTHOR_NAME",
            "ANTHROPIC_BASE_URL",
            "MY_TOOL_HOME",
            "EDITOR",
            "DISPLAY",
            "PASSENGER_ENV",
        ];
        let policy = EnvPolicy {
            inherit: EnvInherit::None,
            allow: vec!["*".into()],
            ..EnvPolicy::default()
        };
        let ambient = secret.iter().chain(&harmless).map(|n| (*n, "v"));
        let env = policy.resolve(ambient);
        let mut passed = env.names();
        passed.sort_unstable();
        let mut expected = harmless.to_vec();
        expected.sort_unstable();
        assert_eq!(passed, expected);
        let mut withheld = secret.to_vec();
        withheld.sort_unstable();
        assert_eq!(env.withheld_secrets, withheld);
    }

    /// Issue 29 item 1: variables that name a key file or a directory of credentials reached
    /// the agent through a wildcard allowlist (`AZURE_*`, `*`), which led it past the hidden
    /// home paths. They pass only when the provider's profile, or the allowlist by exact name,
    /// asks for them.
    #[test]
    fn variables_naming_key_files_pass_only_when_the_profile_names_them() {
        let key_files = [
            "GOOGLE_APPLICATION_CREDENTIALS",
            "AWS_SHARED_CREDENTIALS_FILE",
            "AWS_CONFIG_FILE",
            "AZURE_CLIENT_CERTIFICATE_PATH",
            "AZURE_FEDERATED_CERTIFICATE_PATH",
            "CLOUDSDK_CONFIG",
            "KUBECONFIG",
            "SSH_AUTH_SOCK",
            "DOCKER_CONFIG",
            "GNUPGHOME",
            "PGPASSFILE",
            "BOTO_CONFIG",
            "RCLONE_CONFIG",
            "OCI_CLI_CONFIG_FILE",
        ];
        let ambient: Vec<(&str, &str)> = key_files
            .iter()
            .map(|n| (*n, "/home/u/keys/k"))
            .chain([("PATH", "/bin"), ("SSL_CERT_FILE", "/etc/ssl/ca.pem")])
            .collect();
        let policy = EnvPolicy {
            profile: EnvProfile::new("codex", &["AWS_SHARED_CREDENTIALS_FILE"]),
            allow: vec!["*".into()],
            ..EnvPolicy::default()
        };
        let env = policy.resolve(ambient.clone());
        assert_eq!(
            env.names(),
            ["AWS_SHARED_CREDENTIALS_FILE", "PATH", "SSL_CERT_FILE"]
        );
        let mut withheld: Vec<&str> = key_files
            .iter()
            .copied()
            .filter(|n| *n != "AWS_SHARED_CREDENTIALS_FILE")
            .collect();
        withheld.sort_unstable();
        assert_eq!(env.withheld_secrets, withheld);
        // Without a profile naming it, not even the core set passes one.
        let core = EnvPolicy::default().resolve(ambient);
        assert_eq!(core.names(), ["PATH", "SSL_CERT_FILE"]);
    }

    #[test]
    fn claudecode_is_stripped_even_when_allowed_or_set() {
        let policy = EnvPolicy {
            allow: vec!["CLAUDECODE".into()],
            set: vec![("CLAUDECODE".into(), "1".into()), ("X".into(), "y".into())],
            ..EnvPolicy::default()
        };
        let env = policy.resolve(ambient());
        assert!(!env.names().contains(&"CLAUDECODE"));
        assert!(env.vars.contains(&("X".into(), "y".into())));
    }
}
