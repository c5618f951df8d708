//! What runs on the host, with what: the one table of the programs this crate starts outside
//! any sandbox, each with its environment and the configuration that keeps the repository
//! (which an agent worked in) from running a program of its own.
//!
//! | program | for | environment beyond the core set (`PATH`, `HOME`, locale, XDG, TLS roots) | working directory |
//! | --- | --- | --- | --- |
//! | `git remote get-url` | is there a remote | none | the project |
//! | `git push` | the sprint's branch | `SSH_AUTH_SOCK`, `GIT_SSH`, `GIT_SSH_COMMAND`, the proxies | the project |
//! | `gh api` | the forge's REST API | gh's token and host variables, `GH_CONFIG_DIR`, the proxies | the project, or `/` when the repository is named |
//!
//! Every one gets `GIT_TERMINAL_PROMPT=0` (stdin is never a terminal: a missing login fails
//! instead of waiting), and git's configuration from the environment, which outranks every
//! config file, turns off hooks (`core.hooksPath=/dev/null`, and `push --no-verify`) and the
//! fsmonitor, the two ways a repository's configuration runs a program on `git push` or on
//! the `git remote` calls `gh` makes. The user's own configuration (credential helpers, the
//! ssh command, URL rewrites) is kept: it is the user's login, which is what these programs are
//! for. `gh` also gets no prompt, no pager, no colour and no update check.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use corral_process::env::{EnvInherit, EnvPolicy, EnvProfile};

/// A program of the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostProgram {
    /// `git`, for `remote get-url` and `push`.
    Git,
    /// `gh`, for `gh api`.
    Gh,
}

impl HostProgram {
    /// Its name, looked up on `PATH`.
    pub fn name(self) -> &'static str {
        match self {
            HostProgram::Git => "git",
            HostProgram::Gh => "gh",
        }
    }

    /// The variables it may read from the caller's environment beyond the core set (patterns
    /// with a trailing `*`); these may be secrets, which is why each is named.
    pub fn passes(self) -> &'static [&'static str] {
        match self {
            HostProgram::Git => &[
                "SSH_AUTH_SOCK",
                "GIT_SSH",
                "GIT_SSH_COMMAND",
                "HTTP_PROXY",
                "HTTPS_PROXY",
                "NO_PROXY",
                "ALL_PROXY",
                "http_proxy",
                "https_proxy",
                "no_proxy",
                "all_proxy",
            ],
            HostProgram::Gh => &[
                "GH_TOKEN",
                "GITHUB_TOKEN",
                "GH_ENTERPRISE_TOKEN",
                "GITHUB_ENTERPRISE_TOKEN",
                "GH_HOST",
                "GH_REPO",
                "GH_CONFIG_DIR",
                "SSH_AUTH_SOCK",
                "HTTP_PROXY",
                "HTTPS_PROXY",
                "NO_PROXY",
                "ALL_PROXY",
                "http_proxy",
                "https_proxy",
                "no_proxy",
                "all_proxy",
            ],
        }
    }

    /// The variables set on top, whatever the caller's environment says.
    pub fn sets(self) -> Vec<(String, String)> {
        let mut set: Vec<(String, String)> = vec![("GIT_TERMINAL_PROMPT".into(), "0".into())];
        set.extend(GIT_CONFIG.iter().enumerate().flat_map(|(i, (k, v))| {
            [
                (format!("GIT_CONFIG_KEY_{i}"), (*k).to_owned()),
                (format!("GIT_CONFIG_VALUE_{i}"), (*v).to_owned()),
            ]
        }));
        set.push(("GIT_CONFIG_COUNT".into(), GIT_CONFIG.len().to_string()));
        match self {
            HostProgram::Git => {}
            HostProgram::Gh => set.extend(
                [
                    ("GH_PROMPT_DISABLED", "1"),
                    ("GH_NO_UPDATE_NOTIFIER", "1"),
                    ("GH_PAGER", "cat"),
                    ("NO_COLOR", "1"),
                    ("CLICOLOR", "0"),
                ]
                .map(|(k, v)| (k.to_owned(), v.to_owned())),
            ),
        }
        set
    }

    /// Its whole environment, from the caller's `ambient` one, with `extra` set last.
    pub fn env(
        self,
        ambient: &[(String, String)],
        extra: &[(String, String)],
    ) -> Vec<(OsString, OsString)> {
        let mut set = self.sets();
        set.extend(extra.iter().cloned());
        EnvPolicy {
            inherit: EnvInherit::Core,
            profile: EnvProfile::new(self.name(), self.passes()),
            allow: Vec::new(),
            set,
        }
        .resolve(ambient.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .vars
        .into_iter()
        .map(|(k, v)| (OsString::from(k), OsString::from(v)))
        .collect()
    }

    /// Where it is on the host: on the absolute entries of the caller's `PATH`, never inside
    /// `writable` (the project an agent worked in).
    pub fn find(
        self,
        ambient: &[(String, String)],
        writable: &Path,
    ) -> Result<PathBuf, corral_process::HostProgramError> {
        let path = ambient
            .iter()
            .find(|(k, _)| k == "PATH")
            .map(|(_, v)| OsString::from(v));
        corral_process::host_program(Path::new(self.name()), path.as_deref(), &[writable])
    }
}

/// git configuration given through the environment to every program of the table (and to
/// the git that `gh` runs).
pub const GIT_CONFIG: &[(&str, &str)] = &[
    ("core.hooksPath", "/dev/null"),
    ("core.fsmonitor", "false"),
    ("core.pager", "cat"),
    ("protocol.ext.allow", "never"),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_program_gets_only_what_the_table_names() {
        let ambient: Vec<(String, String)> = [
            ("PATH", "/usr/bin"),
            ("HOME", "/home/u"),
            ("GH_TOKEN", "t"),
            ("ANTHROPIC_API_KEY", "k"),
            ("SSH_AUTH_SOCK", "/run/agent"),
            ("GIT_DIR", "/elsewhere"),
        ]
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
        let names = |p: HostProgram| -> Vec<String> {
            p.env(&ambient, &[])
                .into_iter()
                .map(|(k, _)| k.to_string_lossy().into_owned())
                .collect()
        };
        let gh = names(HostProgram::Gh);
        assert!(gh.contains(&"GH_TOKEN".to_owned()));
        assert!(!gh.contains(&"ANTHROPIC_API_KEY".to_owned()));
        assert!(!gh.contains(&"GIT_DIR".to_owned()));
        assert!(gh.contains(&"GH_PROMPT_DISABLED".to_owned()));
        let git = names(HostProgram::Git);
        assert!(!git.contains(&"GH_TOKEN".to_owned()));
        assert!(git.contains(&"SSH_AUTH_SOCK".to_owned()));
        assert!(git.contains(&"GIT_CONFIG_KEY_0".to_owned()));
    }
}
