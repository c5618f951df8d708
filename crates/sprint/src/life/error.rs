//! [`LifeError`]: why a flow of the sprint's life stopped before or after its agent.

use std::path::PathBuf;

use crate::diagnostic::Diagnostic;

/// Why a flow of the sprint's life (plan, ...) did not change the sprint file. Each names the
/// file and what to do; none is retryable as it stands, because each is about input that must
/// change first.
#[derive(Debug, thiserror::Error)]
pub enum LifeError {
    /// A source file resolves outside the project (itself, or a link in it). Retryable: no.
    #[error(
        "{}: is outside the project {} (a link out of the tree, or a path beyond it); copy the \
         text into the project to plan from it",
        file.display(),
        root.display()
    )]
    OutsideProject {
        /// The file as named.
        file: PathBuf,
        /// The project's root.
        root: PathBuf,
    },
    /// A source could not be read (missing, not a regular file, too large, an I/O error).
    /// Retryable: no.
    #[error("cannot read the source: {0}")]
    Unreadable(#[source] corral_contract::UntrustedFileError),
    /// A source is not UTF-8 text. Retryable: no.
    #[error("{label}: is not UTF-8 text")]
    NotText {
        /// The source's name.
        label: String,
    },
    /// A source holds nothing but whitespace. Retryable: no.
    #[error("{label}: is empty; there is nothing to plan")]
    Empty {
        /// The source's name.
        label: String,
    },
    /// A source is longer than an agent's prompt should carry. Retryable: no; split it.
    #[error(
        "{label}: is {lines} lines long; at most {limit} are planned from at once: split it \
         into parts and plan each (`corral sprint plan` adds to the sprint file)"
    )]
    TooManyLines {
        /// The source's name.
        label: String,
        /// Its line count.
        lines: usize,
        /// The limit.
        limit: usize,
    },
    /// A query for issues found none. Retryable: no; change the query or label the issues.
    #[error(
        "no open issue matches `{query}`: there is nothing to plan (label the issues, or try the \
         query with `gh search issues`)"
    )]
    NoIssues {
        /// The query.
        query: String,
    },
    /// The sprint file is not TOML Corral can edit. Retryable: no.
    #[error("{}: {message}; fix it (`corral sprint check`) and plan again", file.display())]
    NotToml {
        /// The sprint file.
        file: PathBuf,
        /// The parser's message.
        message: String,
    },
    /// The sprint file with the plan applied would break the sprint file's rules (a cycle or an
    /// unknown dependency through a hand-written task, say); the file was left as it was.
    /// Retryable: no.
    #[error(
        "the plan does not fit {}: {}; the file was left as it was",
        file.display(),
        diagnostics.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")
    )]
    PlanDoesNotFit {
        /// The sprint file.
        file: PathBuf,
        /// What the merged file breaks.
        diagnostics: Vec<Diagnostic>,
    },
    /// The flow's record or the sprint file could not be written (a link planted in the
    /// record, a full disk). Retryable: once the cause is gone.
    #[error("cannot write {what}: {source}")]
    Write {
        /// What was being written.
        what: String,
        /// Why not.
        #[source]
        source: corral_hostfs::HostFsError,
    },
}
