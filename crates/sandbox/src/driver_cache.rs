//! The listing of a repository's filter and merge drivers, kept between the host git commands
//! of one engine while the files it came from are unchanged.
//!
//! Every host git command (`commands.rs`) empties the drivers the repository's configuration
//! defines, which it learns from `git config --get-regexp` (one process more per command). With
//! the system and global configuration neutralised (`GIT_CONFIG_NOSYSTEM`,
//! `GIT_CONFIG_GLOBAL=/dev/null`), what that listing says depends only on files of the
//! repository: its configuration (`<common dir>/config`), the work tree's
//! (`<git dir>/config.worktree`), the files that lead git from the working directory to them
//! (`.git` in the working directory and each directory up to the top, `<git dir>/commondir`),
//! and whatever the configuration includes. So a listing is kept with a stamp of each of those
//! files (device, inode, size, mtime and ctime in nanoseconds; for a directory its device and
//! inode, an absent file as absent), and used again only while every stamp is the same. A
//! configuration that includes anything (`include.*`, `includeIf.*`) is never kept: the files
//! it names, and the conditions (`onbranch:` follows `HEAD`), are not followed here.
//!
//! Why a stamp is enough: a rewrite by rename gives the file a new inode, an in-place write
//! moves its ctime (which no program can set back, unlike mtime), and a file that appears,
//! goes away or changes kind changes its stamp. Under the bubblewrap sandbox the agent cannot
//! write `.git` at all (it is read-only inside the sandbox); under the native backend the agent
//! can run any program on the host anyway; a change the user makes shows in the stamp.
//!
//! The stamps are taken before the listing runs and again after it, and the paths asked of git
//! before and after too: a listing is kept only when both agree, so a change made while it ran
//! is not kept with the stamps of the files before it.

use std::collections::HashMap;
use std::ffi::OsString;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

/// More entries than this (directories with different variables) and the cache starts again:
/// an engine serves a handful of work trees.
const MOST_ENTRIES: usize = 64;

/// `git rev-parse` arguments whose answer names the files a listing depends on, one per line:
/// the top of the work tree, the git directory and the common directory.
pub const LAYOUT_QUERY: &[&str] = &[
    "rev-parse",
    "--path-format=absolute",
    "--show-toplevel",
    "--git-dir",
    "--git-common-dir",
];

/// `git config` arguments that list the keys of the filter and merge drivers (as
/// `git_check::DRIVER_LISTING`) and of the includes, which [`includes_any`] looks for.
pub const DRIVER_AND_INCLUDE_LISTING: &[&str] = &[
    "config",
    "--null",
    "--name-only",
    "--get-regexp",
    "^(filter|merge|include|includeif)\\.",
];

/// Where a repository's configuration comes from, as [`LAYOUT_QUERY`] answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    top: PathBuf,
    git_dir: PathBuf,
    common_dir: PathBuf,
}

impl Layout {
    /// The layout from [`LAYOUT_QUERY`]'s output; `None` unless it is three absolute paths.
    pub fn parse(out: &str) -> Option<Layout> {
        let mut lines = out.lines();
        let mut next = || lines.next().map(PathBuf::from).filter(|p| p.is_absolute());
        let layout = Layout {
            top: next()?,
            git_dir: next()?,
            common_dir: next()?,
        };
        lines.next().is_none().then_some(layout)
    }

    /// Every file the listing in `cwd` depends on (see the module documentation); `None`
    /// when `cwd` is not inside the top of the work tree.
    fn files(&self, cwd_given: &Path) -> Option<Vec<PathBuf>> {
        let cwd = std::fs::canonicalize(cwd_given).ok()?;
        let top = std::fs::canonicalize(&self.top).ok()?;
        if !cwd.starts_with(&top) {
            return None;
        }
        // The directory as given, followed: a link on its way pointed elsewhere changes it.
        let mut files: Vec<PathBuf> = vec![cwd_given.to_path_buf()];
        files.extend(
            cwd.ancestors()
                .take_while(|dir| dir.starts_with(&top))
                .map(|dir| dir.join(".git")),
        );
        files.push(self.common_dir.join("config"));
        files.push(self.git_dir.join("config.worktree"));
        files.push(self.git_dir.join("commondir"));
        Some(files)
    }
}

/// What one file was when stamped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stamp {
    /// Not there.
    Absent,
    /// A directory: which one (its times move with every lock file git makes in it).
    Directory { dev: u64, ino: u64 },
    /// Anything else, followed through symbolic links as git does.
    File {
        dev: u64,
        ino: u64,
        mode: u32,
        size: u64,
        mtime_ns: i128,
        ctime_ns: i128,
    },
}

/// The stamps of `files`, in order; `None` when one cannot be read (then nothing is kept).
fn stamps(files: &[PathBuf]) -> Option<Vec<Stamp>> {
    files
        .iter()
        .map(|path| match std::fs::metadata(path) {
            Ok(meta) if meta.is_dir() => Some(Stamp::Directory {
                dev: meta.dev(),
                ino: meta.ino(),
            }),
            Ok(meta) => Some(Stamp::File {
                dev: meta.dev(),
                ino: meta.ino(),
                mode: meta.mode(),
                size: meta.size(),
                mtime_ns: i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec()),
                ctime_ns: i128::from(meta.ctime()) * 1_000_000_000 + i128::from(meta.ctime_nsec()),
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Some(Stamp::Absent),
            Err(e) => {
                tracing::debug!(path = %path.display(), error = %e, "cannot stamp a git configuration file; its listing is not kept");
                None
            }
        })
        .collect()
}

/// Whether the keys a listing printed (NUL-separated) include another file.
pub fn includes_any(listing: &[u8]) -> bool {
    listing
        .split(|b| *b == 0)
        .any(|key| key.starts_with(b"include.") || key.starts_with(b"includeif."))
}

/// The files a listing was taken from and their stamps at the time.
#[derive(Debug, Clone)]
pub struct Taken {
    files: Vec<PathBuf>,
    stamps: Vec<Stamp>,
}

impl Taken {
    /// Stamps the files `layout` names for `cwd`; `None` when they cannot all be stamped.
    pub fn now(layout: &Layout, cwd: &Path) -> Option<Taken> {
        let files = layout.files(cwd)?;
        let stamps = stamps(&files)?;
        Some(Taken { files, stamps })
    }

    fn same_as(&self, other: &Taken) -> bool {
        self.files == other.files && self.stamps == other.stamps
    }

    /// Whether every file is as it was.
    fn unchanged(&self) -> bool {
        stamps(&self.files).is_some_and(|now| now == self.stamps)
    }
}

/// Which listing: the working directory and the environment git ran with, less the variables
/// that cannot change what git reads as configuration ([`NOT_CONFIG`]).
type Key = (PathBuf, Vec<(OsString, OsString)>);

/// Variables git reads for something other than where its configuration is: which index file,
/// who is the author or committer, and which transports it may use. A worker's record commits
/// run the same repository's git with an index of their own and an identity, and its fetches
/// and pushes with the remote's transport allowed; keyed apart, each would list the drivers
/// again (three processes) for a configuration that is the same.
const NOT_CONFIG: &[&str] = &[
    "GIT_INDEX_FILE",
    "GIT_ALLOW_PROTOCOL",
    "GIT_AUTHOR_NAME",
    "GIT_AUTHOR_EMAIL",
    "GIT_AUTHOR_DATE",
    "GIT_COMMITTER_NAME",
    "GIT_COMMITTER_EMAIL",
    "GIT_COMMITTER_DATE",
];

fn key(cwd: &Path, env: &[(OsString, OsString)]) -> Key {
    let env = env
        .iter()
        .filter(|(name, _)| !NOT_CONFIG.iter().any(|n| name.as_os_str() == *n))
        .cloned()
        .collect();
    (cwd.to_path_buf(), env)
}

#[derive(Debug)]
struct Kept {
    taken: Taken,
    overrides: Vec<(String, String)>,
}

/// The listings kept by one engine (see the module documentation).
#[derive(Debug, Default)]
pub struct DriverCache {
    kept: Mutex<HashMap<Key, Kept>>,
}

impl DriverCache {
    /// The overrides kept for git in `cwd` with `env`, when every file they came from is
    /// unchanged; a kept listing whose files changed is dropped.
    pub fn get(&self, cwd: &Path, env: &[(OsString, OsString)]) -> Option<Vec<(String, String)>> {
        let key = key(cwd, env);
        let mut kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        let entry = kept.get(&key)?;
        if entry.taken.unchanged() {
            return Some(entry.overrides.clone());
        }
        tracing::debug!(cwd = %cwd.display(), "the repository's configuration changed; listing its drivers again");
        kept.remove(&key);
        None
    }

    /// Keeps `overrides`, listed between `before` and `after` (each layout asked of git, then
    /// the files stamped), when nothing moved in between and the configuration includes no
    /// other file (`listing` holds its keys).
    pub fn keep(
        &self,
        cwd: &Path,
        env: &[(OsString, OsString)],
        (layout_before, before): (&Layout, &Taken),
        (layout_after, after): (&Layout, &Taken),
        listing: &[u8],
        overrides: &[(String, String)],
    ) {
        if layout_before != layout_after || !before.same_as(after) || includes_any(listing) {
            return;
        }
        let mut kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        if kept.len() >= MOST_ENTRIES {
            kept.clear();
        }
        kept.insert(
            key(cwd, env),
            Kept {
                taken: before.clone(),
                overrides: overrides.to_vec(),
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_index_file_or_an_identity_does_not_key_a_listing_apart_but_a_git_dir_does() {
        let var = |k: &str, v: &str| (OsString::from(k), OsString::from(v));
        let cwd = Path::new("/w");
        let plain = vec![var("PATH", "/bin")];
        let with_index = vec![
            var("PATH", "/bin"),
            var("GIT_INDEX_FILE", "/w/.git/other.index"),
            var("GIT_AUTHOR_NAME", "a"),
            var("GIT_ALLOW_PROTOCOL", "file"),
        ];
        assert_eq!(key(cwd, &plain), key(cwd, &with_index));
        let with_dir = vec![var("PATH", "/bin"), var("GIT_DIR", "/elsewhere/.git")];
        assert_ne!(key(cwd, &plain), key(cwd, &with_dir));
    }

    #[test]
    fn a_layout_is_three_absolute_paths() {
        let layout = Layout::parse("/w\n/w/.git\n/w/.git\n").unwrap();
        assert_eq!(layout.common_dir, PathBuf::from("/w/.git"));
        assert!(Layout::parse("/w\n.git\n/w/.git\n").is_none());
        assert!(Layout::parse("/w\n/w/.git\n").is_none());
        assert!(Layout::parse("/w\n/w/.git\n/w/.git\n/x\n").is_none());
    }

    #[test]
    fn include_keys_are_found_among_the_listed_ones() {
        assert!(includes_any(b"filter.x.clean\0include.path\0"));
        assert!(includes_any(b"includeif.onbranch:main.path\0"));
        assert!(!includes_any(b"filter.include.clean\0merge.m.driver\0"));
        assert!(!includes_any(b""));
    }
}
