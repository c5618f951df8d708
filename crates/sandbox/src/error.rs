//! Why a command line could not be wrapped, whichever kind of confinement wrapped it: apart, so
//! that the wrappings of a CLI (`cli`) and of a command (`command`) need not know the face
//! (`confinement`) that calls them.

use std::path::PathBuf;

/// Why a command line could not be wrapped.
#[derive(Debug, thiserror::Error)]
pub enum WrapError {
    /// The program is not on the child's `PATH`. Not retryable as configured.
    #[error("not found on the child's PATH")]
    NotFound,
    /// Preparing the sandbox failed at `path`. Retryable: a transient condition of the host.
    #[error("{}: {source}", path.display())]
    Io {
        /// Where.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// The run's sandbox was not planned before its first command line. Not retryable: the
    /// caller's mistake.
    #[error("the sandbox was not planned before the spawn")]
    NotPlanned,
}
