//! The project's own files that a flow writes (a refined ticket, ideated tickets, the agents'
//! context files): reached from the project's root without following a link, and written whole
//! into a new file renamed over the old one, so a crash leaves the old file or the new and a
//! link or FIFO planted at the name is refused, never written through.

use std::path::Path;

pub use corral_contract::{AGENTS_CONTEXT_FILES, Signal};
pub use corral_hostfs::{EntryKind, HostDir};

use super::LifeError;

/// The project at `root` as a handle for [`HostDir::kind`] and the writes below.
///
/// # Errors
///
/// [`LifeError::Write`] when the root cannot be opened.
pub fn project_dir(root: &Path) -> Result<HostDir, LifeError> {
    HostDir::open(root).map_err(|source| LifeError::Write {
        what: root.display().to_string(),
        source,
    })
}

/// Writes `text` as the file `rel` of the project at `root` (its directories made as needed),
/// replaced whole and synced, never through a link.
///
/// # Errors
///
/// [`LifeError::Write`], naming the file: a link or a FIFO where it goes, a full disk.
pub fn write_project_file(root: &Path, rel: &Path, text: &str) -> Result<(), LifeError> {
    project_dir(root)?
        .replace_with(rel, text.as_bytes(), corral_hostfs::Flush::Synced)
        .map_err(|source| LifeError::Write {
            what: rel.display().to_string(),
            source,
        })
}

/// Writes `text` as the new file `rel` of the project at `root`; anything already there is
/// refused and stays as it was.
///
/// # Errors
///
/// [`LifeError::Write`], naming the file.
pub fn write_new_project_file(root: &Path, rel: &Path, text: &str) -> Result<(), LifeError> {
    project_dir(root)?
        .write_new(rel, text.as_bytes())
        .map_err(|source| LifeError::Write {
            what: rel.display().to_string(),
            source,
        })
}
