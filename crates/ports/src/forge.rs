//! The forge port: what Corral asks of the place a sprint's branch goes (a git remote) and its
//! pull request lives (GitHub): push the branch, find, open or update its pull request, list
//! issues. Unlike [`crate::CommandRunner`]'s commands, these run on the host outside any
//! sandbox, with the host's network and the user's login, so the port names each operation and
//! its typed values: a caller (the sprint) never hands over a command line, and an agent's text
//! reaches the forge only as the data of a request (a title, a body), never as a program or an
//! argument that selects one.

use std::path::PathBuf;
use std::time::Duration;

use async_trait::async_trait;
use tokio_util::sync::CancellationToken;

/// Where a sprint's branch goes and where its pull request is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForgeRepo {
    /// The project's work tree (its git repository).
    pub dir: PathBuf,
    /// The git remote the branch is pushed to (`origin`).
    pub remote: String,
    /// The forge's repository as `[HOST/]OWNER/REPO`, when the caller names it; otherwise the
    /// forge's tool infers it from the repository's remotes.
    pub repo: Option<String>,
}

/// A pull request on the forge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullRequest {
    /// Its number.
    pub number: u64,
    /// Its page.
    pub url: String,
}

/// The text of a pull request: its title and its Markdown body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullRequestText {
    /// The title, one line.
    pub title: String,
    /// The body.
    pub body: String,
}

/// An issue on the forge, as a ticket to plan from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForgeIssue {
    /// Its number.
    pub number: u64,
    /// Its title.
    pub title: String,
    /// Its body (empty when it has none).
    pub body: String,
    /// Its page.
    pub url: String,
    /// Its labels' names.
    pub labels: Vec<String>,
}

/// Why a forge operation gave no answer. Each says whether trying again can help
/// ([`ForgeError::is_retryable`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ForgeError {
    /// The forge's program is not installed (or only inside a directory an agent can write).
    /// Retryable: no; install it.
    #[error("{program} is not installed: {detail}")]
    Missing {
        /// The program (`gh`, `git`).
        program: String,
        /// Where it was looked for.
        detail: String,
    },
    /// The forge's program has no login for the host. Retryable: no; log in (`gh auth login`)
    /// or set a token.
    #[error("{program} is not logged in: {detail}")]
    NotLoggedIn {
        /// The program.
        program: String,
        /// What it said.
        detail: String,
    },
    /// The repository has no such git remote. Retryable: no; add it
    /// (`git remote add origin URL`) or name another.
    #[error("the repository has no git remote `{remote}`")]
    NoRemote {
        /// The remote asked for.
        remote: String,
    },
    /// The remote refused the push (not a fast-forward, a protected branch, no permission).
    /// Retryable: no, not as it stands.
    #[error("git push to `{remote}` was refused: {detail}")]
    PushRefused {
        /// The remote.
        remote: String,
        /// What git said.
        detail: String,
    },
    /// The forge answered with an error: `status` is the HTTP status when it said one (a 5xx
    /// is the forge's trouble and retryable; a 4xx is about the request, not retryable).
    #[error("{what}: the forge answered {}: {detail}", status.map_or("an error".to_owned(), |s| format!("HTTP {s}")))]
    Answered {
        /// What was asked.
        what: String,
        /// The HTTP status, when known.
        status: Option<u16>,
        /// What it said.
        detail: String,
    },
    /// The forge's answer could not be read. Retryable: no.
    #[error("{what}: the forge's answer could not be read: {detail}")]
    BadAnswer {
        /// What was asked.
        what: String,
        /// Why.
        detail: String,
    },
    /// The operation took longer than it may; its process group was killed. Retryable: yes.
    #[error("{what}: no answer within {}s", after.as_secs())]
    TimedOut {
        /// What was asked.
        what: String,
        /// The limit.
        after: Duration,
    },
    /// The caller cancelled it. Retryable: no.
    #[error("{what}: cancelled")]
    Cancelled {
        /// What was asked.
        what: String,
    },
    /// Starting or reading the program failed (an operating system condition). Retryable: yes.
    #[error("{what}: {detail}")]
    Io {
        /// What was asked.
        what: String,
        /// What the operating system said.
        detail: String,
    },
}

impl ForgeError {
    /// Whether trying again may help.
    pub fn is_retryable(&self) -> bool {
        match self {
            ForgeError::Answered { status, .. } => status.is_some_and(|s| s >= 500),
            ForgeError::TimedOut { .. } | ForgeError::Io { .. } => true,
            ForgeError::Missing { .. }
            | ForgeError::NotLoggedIn { .. }
            | ForgeError::NoRemote { .. }
            | ForgeError::PushRefused { .. }
            | ForgeError::BadAnswer { .. }
            | ForgeError::Cancelled { .. } => false,
        }
    }

    /// Whether the forge cannot be used here at all (no program, no login, no remote), as
    /// opposed to an operation that failed: the caller then prints what it would have done.
    pub fn is_unavailable(&self) -> bool {
        match self {
            ForgeError::Missing { .. }
            | ForgeError::NotLoggedIn { .. }
            | ForgeError::NoRemote { .. } => true,
            ForgeError::PushRefused { .. }
            | ForgeError::Answered { .. }
            | ForgeError::BadAnswer { .. }
            | ForgeError::TimedOut { .. }
            | ForgeError::Cancelled { .. }
            | ForgeError::Io { .. } => false,
        }
    }
}

/// The forge, run on the host with the user's network and login.
///
/// Contract, for every implementation:
/// - MUST run every program through the process layer (a process group of its own, stdin
///   that is not the terminal, an explicit environment, a time limit that ends the whole group)
///   and leave none running once it returns; [`ForgeError::Cancelled`] when `cancel` fires.
/// - MUST build every command line itself from the typed values: a title or a body travels as
///   a request's data, never as an argument that could be read as an option or a program.
/// - MUST keep the repository's own configuration from running programs (hooks, fsmonitor).
/// - MUST say [`ForgeError::Missing`], [`ForgeError::NotLoggedIn`] and
///   [`ForgeError::NoRemote`] for those three cases, so a caller can fall back to printing.
#[async_trait]
pub trait Forge: Send + Sync {
    /// Checks, without the network, that the remote exists and the forge's program is
    /// installed.
    async fn check(&self, repo: &ForgeRepo, cancel: &CancellationToken) -> Result<(), ForgeError>;

    /// Pushes the local branch `branch` to the same name on the remote.
    async fn push_branch(
        &self,
        repo: &ForgeRepo,
        branch: &str,
        cancel: &CancellationToken,
    ) -> Result<(), ForgeError>;

    /// The open pull request whose head is `branch`, if any.
    async fn pull_request_for(
        &self,
        repo: &ForgeRepo,
        branch: &str,
        cancel: &CancellationToken,
    ) -> Result<Option<PullRequest>, ForgeError>;

    /// Opens a pull request of `branch` into `base`.
    async fn open_pull_request(
        &self,
        repo: &ForgeRepo,
        branch: &str,
        base: &str,
        text: &PullRequestText,
        cancel: &CancellationToken,
    ) -> Result<PullRequest, ForgeError>;

    /// Replaces the title and body of the pull request `number`.
    async fn update_pull_request(
        &self,
        repo: &ForgeRepo,
        number: u64,
        text: &PullRequestText,
        cancel: &CancellationToken,
    ) -> Result<PullRequest, ForgeError>;

    /// The open issues matching `query` (the forge's search syntax, `label:sprint`), at most
    /// `limit`.
    async fn issues(
        &self,
        repo: &ForgeRepo,
        query: &str,
        limit: usize,
        cancel: &CancellationToken,
    ) -> Result<Vec<ForgeIssue>, ForgeError>;
}
