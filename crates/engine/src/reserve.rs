//! The disk space a run directory keeps aside for its last records: a few reserve files, one
//! per writer (the execution log, compose's run record), and the one call every writer of the
//! run directory makes when the disk is full, which frees one of them whoever made it.
//!
//! Apart from the log and the files so that both can free space without knowing each other.

use std::fs;
use std::path::{Path, PathBuf};

/// The prefix of the reserve files kept in a run directory, released when the disk is full.
pub const RESERVE_PREFIX: &str = ".corral-reserve-";
/// The size of one.
const RESERVE_BYTES: usize = 256 * 1024;

/// Creates a reserve file named for its `owner` in `dir`: disk space set aside for the last
/// records of a run. `None` when even that does not fit.
pub fn create_reserve(dir: &Path, owner: &str) -> Option<PathBuf> {
    let path = dir.join(format!("{RESERVE_PREFIX}{owner}"));
    match fs::write(&path, vec![0u8; RESERVE_BYTES]) {
        Ok(()) => Some(path),
        Err(_) => {
            let _ = fs::remove_file(&path);
            None
        }
    }
}

/// Frees one reserve file in `dir`, whoever made it: called by every writer of the run
/// directory that hit a full disk. Returns whether space was freed.
pub fn release_reserve(dir: &Path) -> bool {
    let Ok(entries) = fs::read_dir(dir) else {
        return false;
    };
    entries.flatten().any(|entry| {
        entry
            .file_name()
            .to_string_lossy()
            .starts_with(RESERVE_PREFIX)
            && fs::remove_file(entry.path()).is_ok()
    })
}
