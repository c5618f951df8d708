//! What Corral runs on the host with the host's network and the user's login: `git push` of a
//! sprint's branch and `gh api` for its pull request and for issues, behind the ports'
//! [`Forge`] (ADR 0015).
//!
//! Everything else Corral starts runs in the agents' sandbox (a check, a gate) or on the host
//! with the repository's power to run programs and its transports taken away (Corral's own
//! git, a CLI's version probe). These programs cannot be either: a push needs the user's
//! credentials and the network, and `gh` the user's token. So they are few, named in one table
//! ([`programs`]: each program, its environment, its working directory), found only outside the
//! project an agent worked in, and started through `corral-process` like every other program
//! (a process group of its own, stdin that is not the terminal, a time limit that kills the
//! group). Every command line is built here from the port's typed values; what an agent wrote
//! (a pull request's title and body) reaches `gh` as the JSON of a request on stdin, never as
//! an argument.
//!
//! `gh` is used through `gh api` and GitHub's REST endpoints rather than its porcelain
//! (`gh pr create`): those ask, page, run git in the work tree and change their output between
//! versions; the REST answers are documented and stable, and one parser reads them.

pub mod programs;

use std::path::Path;
use std::time::Duration;

use async_trait::async_trait;
use corral_ports::{Forge, ForgeError, ForgeIssue, ForgeRepo, PullRequest, PullRequestText};
use corral_process::bounded::{BoundedCommand, Captured, Stop, run_until};
use corral_process::spawn::{ChildOutputs, SpawnRequest, StdinMode, TokioSpawner};
use corral_process::{HOST_CWD, HostProgramError};
use tokio_util::sync::CancellationToken;

pub use programs::HostProgram;

/// The time one program gets by default.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);

/// Kept of each stream.
const OUTPUT_LIMIT: usize = 4 * 1024 * 1024;

/// gh's exit code when it has no login for the host.
const GH_EXIT_AUTH: i32 = 4;

/// The forge through `git` and `gh` on the host.
#[derive(Debug, Clone)]
pub struct HostForge {
    /// The environment the programs' environments are taken from (the caller's).
    pub ambient: Vec<(String, String)>,
    /// The time each program gets.
    pub timeout: Duration,
    /// The time between SIGTERM and SIGKILL when it is up.
    pub kill_grace: Duration,
}

impl HostForge {
    /// The forge with this process's environment and the default time limit.
    pub fn from_process_env() -> Self {
        HostForge {
            ambient: corral_process::process_env(),
            timeout: DEFAULT_TIMEOUT,
            kill_grace: Duration::from_secs(5),
        }
    }
}

/// One program to run: what for (in messages), which of the table, the project it must not
/// come from, where it runs, its arguments, the variables set on top of its table row's, and
/// its stdin.
struct Call<'a> {
    what: &'a str,
    program: HostProgram,
    project: &'a Path,
    cwd: &'a Path,
    args: Vec<String>,
    extra_env: &'a [(String, String)],
    input: Option<String>,
}

/// One program's end, read.
struct Ran {
    code: i32,
    stdout: String,
    stderr: String,
}

impl HostForge {
    /// Runs `call` to its end.
    async fn run(&self, call: Call<'_>, cancel: &CancellationToken) -> Result<Ran, ForgeError> {
        let Call {
            what,
            program,
            project,
            cwd,
            args,
            extra_env,
            input,
        } = call;
        let found = program.find(&self.ambient, project).map_err(|e| match e {
            HostProgramError::NotFound { .. } => ForgeError::Missing {
                program: program.name().to_owned(),
                detail: format!(
                    "{e} (install it: `apt-get install {}`, or see its docs)",
                    program.name()
                ),
            },
            HostProgramError::AgentWritable { .. } => ForgeError::Missing {
                program: program.name().to_owned(),
                detail: e.to_string(),
            },
        })?;
        tracing::debug!(program = %found.display(), ?args, cwd = %cwd.display(), "host command");
        let command = BoundedCommand {
            request: SpawnRequest {
                program: found,
                args: args.into_iter().map(Into::into).collect(),
                env: program.env(&self.ambient, extra_env),
                cwd: cwd.to_owned(),
                stdin: input.map_or(StdinMode::Null, |text| StdinMode::Prompt(text.into())),
                parent_death_signal: true,
                inherit_fds: Vec::new(),
                output: ChildOutputs::Pipes,
                pre_exec: Vec::new(),
            },
            timeout: self.timeout,
            kill_grace: self.kill_grace,
            stdout_limit: OUTPUT_LIMIT,
            stderr_limit: 64 * 1024,
            run_token: Some(format!("host-{}-{}", std::process::id(), next_token())),
        };
        let (stop, stdout, stderr) =
            run_until(&TokioSpawner, &command, cancel)
                .await
                .map_err(|e| ForgeError::Io {
                    what: what.to_owned(),
                    detail: e.to_string(),
                })?;
        let text = |c: &Captured| c.text();
        match stop {
            Stop::Exited(exit) => Ok(Ran {
                code: exit.code.unwrap_or(-1),
                stdout: text(&stdout),
                stderr: text(&stderr),
            }),
            Stop::TimedOut => Err(ForgeError::TimedOut {
                what: what.to_owned(),
                after: self.timeout,
            }),
            Stop::Cancelled | Stop::Refused => Err(ForgeError::Cancelled {
                what: what.to_owned(),
            }),
        }
    }

    /// `gh api ARGS` for `repo`, its JSON answer parsed.
    async fn gh_api(
        &self,
        what: &str,
        repo: &ForgeRepo,
        args: Vec<String>,
        input: Option<String>,
        cancel: &CancellationToken,
    ) -> Result<serde_json::Value, ForgeError> {
        // Named, the repository needs no git at all: gh runs where the agent never wrote.
        let (cwd, extra): (&Path, Vec<(String, String)>) = match &repo.repo {
            Some(name) => (Path::new(HOST_CWD), vec![("GH_REPO".into(), name.clone())]),
            None => (&repo.dir, Vec::new()),
        };
        let mut argv = vec!["api".to_owned()];
        argv.extend(args);
        let ran = self
            .run(
                Call {
                    what,
                    program: HostProgram::Gh,
                    project: &repo.dir,
                    cwd,
                    args: argv,
                    extra_env: &extra,
                    input,
                },
                cancel,
            )
            .await?;
        if ran.code != 0 {
            return Err(gh_failure(what, &ran));
        }
        serde_json::from_str(&ran.stdout).map_err(|e| ForgeError::BadAnswer {
            what: what.to_owned(),
            detail: format!("{e}: {}", first_line(&ran.stdout)),
        })
    }

    /// The repository's full name (`OWNER/REPO`), as the forge says it.
    async fn full_name(
        &self,
        repo: &ForgeRepo,
        cancel: &CancellationToken,
    ) -> Result<String, ForgeError> {
        let what = "reading the repository on the forge";
        let answer = self
            .gh_api(
                what,
                repo,
                vec!["repos/{owner}/{repo}".into()],
                None,
                cancel,
            )
            .await?;
        answer
            .get("full_name")
            .and_then(serde_json::Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| ForgeError::BadAnswer {
                what: what.to_owned(),
                detail: "no `full_name`".to_owned(),
            })
    }
}

/// The next run token's number: with the pid, it names this program's processes for the sweep
/// of any that left its group.
fn next_token() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

fn first_line(text: &str) -> String {
    let line = text.trim().lines().next().unwrap_or("").trim();
    line.chars().take(300).collect()
}

/// What a failed `gh api` comes to: no login, or the forge's answer with its status.
fn gh_failure(what: &str, ran: &Ran) -> ForgeError {
    let said = first_line(&ran.stderr);
    let status = http_status(&ran.stderr);
    if ran.code == GH_EXIT_AUTH || status == Some(401) {
        return ForgeError::NotLoggedIn {
            program: "gh".to_owned(),
            detail: format!("{said} (run `gh auth login`, or set GH_TOKEN)"),
        };
    }
    if status.is_none() && (said.contains("error connecting") || said.contains("dial tcp")) {
        return ForgeError::Io {
            what: what.to_owned(),
            detail: said,
        };
    }
    // The answer's own message and its field errors say most (a 422's "already exists").
    let detail = serde_json::from_str::<serde_json::Value>(&ran.stdout)
        .ok()
        .map(|v| {
            let mut parts: Vec<String> = v
                .get("message")
                .and_then(serde_json::Value::as_str)
                .map(str::to_owned)
                .into_iter()
                .collect();
            if let Some(errors) = v.get("errors").and_then(serde_json::Value::as_array) {
                parts.extend(
                    errors
                        .iter()
                        .filter_map(|e| e.get("message").and_then(serde_json::Value::as_str))
                        .map(str::to_owned),
                );
            }
            parts.join(": ")
        })
        .filter(|d| !d.is_empty())
        .unwrap_or(said);
    ForgeError::Answered {
        what: what.to_owned(),
        status,
        detail,
    }
}

/// The status in gh's `gh: Message (HTTP 500)`.
fn http_status(stderr: &str) -> Option<u16> {
    let at = stderr.rfind("(HTTP ")?;
    stderr[at + 6..].get(..3)?.parse().ok()
}

/// A branch name as a query parameter's value: everything but unreserved characters and `/`
/// percent-encoded.
fn query_value(text: &str) -> String {
    let mut out = String::new();
    for byte in text.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b'/' => {
                out.push(char::from(byte));
            }
            other => out.push_str(&format!("%{other:02X}")),
        }
    }
    out
}

fn pull_request(what: &str, value: &serde_json::Value) -> Result<PullRequest, ForgeError> {
    let number = value.get("number").and_then(serde_json::Value::as_u64);
    let url = value.get("html_url").and_then(serde_json::Value::as_str);
    match (number, url) {
        (Some(number), Some(url)) => Ok(PullRequest {
            number,
            url: url.to_owned(),
        }),
        _ => Err(ForgeError::BadAnswer {
            what: what.to_owned(),
            detail: "a pull request without `number` or `html_url`".to_owned(),
        }),
    }
}

fn request_json(text: &PullRequestText, head_base: Option<(&str, &str)>) -> String {
    let mut body = serde_json::json!({ "title": text.title, "body": text.body });
    if let Some((head, base)) = head_base {
        body["head"] = head.into();
        body["base"] = base.into();
    }
    body.to_string()
}

#[async_trait]
impl Forge for HostForge {
    async fn check(&self, repo: &ForgeRepo, cancel: &CancellationToken) -> Result<(), ForgeError> {
        let ran = self
            .run(
                Call {
                    what: "looking up the git remote",
                    program: HostProgram::Git,
                    project: &repo.dir,
                    cwd: &repo.dir,
                    args: vec![
                        "remote".into(),
                        "get-url".into(),
                        "--".into(),
                        repo.remote.clone(),
                    ],
                    extra_env: &[],
                    input: None,
                },
                cancel,
            )
            .await?;
        if ran.code != 0 {
            return Err(ForgeError::NoRemote {
                remote: repo.remote.clone(),
            });
        }
        HostProgram::Gh
            .find(&self.ambient, &repo.dir)
            .map(|_| ())
            .map_err(|e| ForgeError::Missing {
                program: "gh".to_owned(),
                detail: format!("{e} (install GitHub's CLI: https://cli.github.com)"),
            })
    }

    async fn push_branch(
        &self,
        repo: &ForgeRepo,
        branch: &str,
        cancel: &CancellationToken,
    ) -> Result<(), ForgeError> {
        let refspec = format!("refs/heads/{branch}:refs/heads/{branch}");
        let ran = self
            .run(
                Call {
                    what: "git push",
                    program: HostProgram::Git,
                    project: &repo.dir,
                    cwd: &repo.dir,
                    args: vec![
                        "push".into(),
                        "--no-verify".into(),
                        "--porcelain".into(),
                        // The default, named: a `remote.<name>.receivepack` in the
                        // repository's configuration would otherwise be run for a local
                        // remote.
                        "--receive-pack=git-receive-pack".into(),
                        "--".into(),
                        repo.remote.clone(),
                        refspec,
                    ],
                    extra_env: &[],
                    input: None,
                },
                cancel,
            )
            .await?;
        if ran.code == 0 {
            return Ok(());
        }
        let said: Vec<&str> = ran
            .stderr
            .lines()
            .chain(ran.stdout.lines())
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with("To ") && *l != "Done")
            .collect();
        Err(ForgeError::PushRefused {
            remote: repo.remote.clone(),
            detail: said.join("; ").chars().take(500).collect(),
        })
    }

    async fn pull_request_for(
        &self,
        repo: &ForgeRepo,
        branch: &str,
        cancel: &CancellationToken,
    ) -> Result<Option<PullRequest>, ForgeError> {
        let what = "looking for the branch's pull request";
        let endpoint = format!(
            "repos/{{owner}}/{{repo}}/pulls?state=open&head={{owner}}:{}",
            query_value(branch)
        );
        let answer = self
            .gh_api(what, repo, vec![endpoint], None, cancel)
            .await?;
        let Some(list) = answer.as_array() else {
            return Err(ForgeError::BadAnswer {
                what: what.to_owned(),
                detail: "not a list".to_owned(),
            });
        };
        list.first().map(|pr| pull_request(what, pr)).transpose()
    }

    async fn open_pull_request(
        &self,
        repo: &ForgeRepo,
        branch: &str,
        base: &str,
        text: &PullRequestText,
        cancel: &CancellationToken,
    ) -> Result<PullRequest, ForgeError> {
        let what = "opening the pull request";
        let args = ["-X", "POST", "repos/{owner}/{repo}/pulls", "--input", "-"]
            .map(str::to_owned)
            .to_vec();
        let input = request_json(text, Some((branch, base)));
        let answer = self.gh_api(what, repo, args, Some(input), cancel).await?;
        pull_request(what, &answer)
    }

    async fn update_pull_request(
        &self,
        repo: &ForgeRepo,
        number: u64,
        text: &PullRequestText,
        cancel: &CancellationToken,
    ) -> Result<PullRequest, ForgeError> {
        let what = "updating the pull request";
        let args = vec![
            "-X".to_owned(),
            "PATCH".to_owned(),
            format!("repos/{{owner}}/{{repo}}/pulls/{number}"),
            "--input".to_owned(),
            "-".to_owned(),
        ];
        let answer = self
            .gh_api(what, repo, args, Some(request_json(text, None)), cancel)
            .await?;
        pull_request(what, &answer)
    }

    async fn issues(
        &self,
        repo: &ForgeRepo,
        query: &str,
        limit: usize,
        cancel: &CancellationToken,
    ) -> Result<Vec<ForgeIssue>, ForgeError> {
        let what = "searching the issues";
        let full_name = self.full_name(repo, cancel).await?;
        // `-f` sends the query as a raw string (never read as a file or a number), in the
        // URL's query with GET.
        let q = format!("repo:{full_name} is:issue is:open {query}");
        let args = vec![
            "-X".to_owned(),
            "GET".to_owned(),
            "search/issues".to_owned(),
            "-f".to_owned(),
            format!("q={q}"),
            "-f".to_owned(),
            format!("per_page={}", limit.clamp(1, 100)),
        ];
        let answer = self.gh_api(what, repo, args, None, cancel).await?;
        let items = answer
            .get("items")
            .and_then(serde_json::Value::as_array)
            .ok_or_else(|| ForgeError::BadAnswer {
                what: what.to_owned(),
                detail: "no `items`".to_owned(),
            })?;
        let text = |v: &serde_json::Value, key: &str| {
            v.get(key)
                .and_then(serde_json::Value::as_str)
                .unwrap_or("")
                .to_owned()
        };
        Ok(items
            .iter()
            .filter(|item| item.get("pull_request").is_none())
            .filter_map(|item| {
                Some(ForgeIssue {
                    number: item.get("number")?.as_u64()?,
                    title: text(item, "title"),
                    body: text(item, "body"),
                    url: text(item, "html_url"),
                    labels: item
                        .get("labels")
                        .and_then(serde_json::Value::as_array)
                        .map(|labels| {
                            labels
                                .iter()
                                .filter_map(|l| l.get("name")?.as_str().map(str::to_owned))
                                .collect()
                        })
                        .unwrap_or_default(),
                })
            })
            .take(limit)
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gh_failures_are_told_apart() {
        let ran = |code, stdout: &str, stderr: &str| Ran {
            code,
            stdout: stdout.to_owned(),
            stderr: stderr.to_owned(),
        };
        assert!(matches!(
            gh_failure(
                "x",
                &ran(
                    4,
                    "",
                    "To get started with GitHub CLI, please run:  gh auth login"
                )
            ),
            ForgeError::NotLoggedIn { .. }
        ));
        assert!(matches!(
            gh_failure(
                "x",
                &ran(
                    1,
                    "{\"message\":\"Requires authentication\"}",
                    "gh: Requires authentication (HTTP 401)"
                )
            ),
            ForgeError::NotLoggedIn { .. }
        ));
        let e = gh_failure(
            "x",
            &ran(
                1,
                "{\"message\":\"Server Error\"}",
                "gh: Server Error (HTTP 500)",
            ),
        );
        assert_eq!(
            e,
            ForgeError::Answered {
                what: "x".into(),
                status: Some(500),
                detail: "Server Error".into()
            }
        );
        assert!(e.is_retryable());
    }

    #[test]
    fn a_branch_is_quoted_for_the_query() {
        assert_eq!(query_value("corral/a b&c"), "corral/a%20b%26c");
    }
}
