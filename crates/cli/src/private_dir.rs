//! The private directory a worker of `corral sprint work` keeps its clone and record in on its
//! node, when no `--work-dir` names one: `<temp dir>/corral-<uid>/<key>`, the key a digest of
//! the sprint run's id, the remote, the sprint file and the task.
//!
//! A fixed path under the temp dir (`/tmp/corral-work/<sprint>/<task>`, once) is a path anyone
//! on the node can make first, putting their tree and record where a worker takes them as its
//! own work. So: the temp dir's own parents must not be writable by another user (a sticky
//! `/tmp` is fine); `corral-<uid>` and the key's directory are made with `mkdir` (mode 0700),
//! and one already there is used only when it is a directory (not a link) of this user that no
//! one else may enter. A `corral-<uid>` that is not (someone made it first) is left alone and
//! the clone goes to a new directory of a random name, made with `mkdir` too: the task then
//! resumes from its record on the remote instead of from a clone on the node.
//!
//! The key is stable across the resubmissions of a task's job and across a continued run (the
//! run's id is the sprint's), so a resubmitted job that lands on the same node finds its clone
//! again; a job of another run never does.

use std::fs::DirBuilder;
use std::io::ErrorKind;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};

use anyhow::Context as _;

use crate::term::errln;

/// The key of a task's directory: the same for every job of the run's task.
pub fn key(run_id: &str, remote: &str, sprint_file: &Path, task: &str) -> String {
    let text = format!("{run_id}\0{remote}\0{}\0{task}", sprint_file.display());
    let digest = corral_compose::content_digest(text.as_bytes());
    // 128 bits: a name, not a secret (the directory above it is this user's alone).
    let hex = digest.trim_start_matches("sha256:");
    hex.get(..32).unwrap_or(hex).to_owned()
}

/// The directory `key` names below `root` (the temp dir), made or checked as the module says.
///
/// # Errors
/// When `root` or one of its parents may be changed by another user, or no directory could be
/// made.
pub fn work_dir(root: &Path, key: &str) -> anyhow::Result<PathBuf> {
    let uid = own_uid()?;
    let root = std::fs::canonicalize(root)
        .with_context(|| format!("the temp dir {} is not there", root.display()))?;
    check_parents(&root, uid)?;
    let user = root.join(format!("corral-{uid}"));
    match own_dir(&user, uid) {
        Ok(()) => {
            let path = user.join(key);
            own_dir(&path, uid)?;
            Ok(path)
        }
        Err(e) => {
            errln!("warning: {e:#}: not used; the task's clone goes to a new directory of its own");
            new_dir(&root, uid)
        }
    }
}

/// This process's effective user: the owner of `/proc/self` (no `unsafe` for `geteuid`).
fn own_uid() -> anyhow::Result<u32> {
    let meta = std::fs::metadata("/proc/self").context("reading /proc/self for this user's id")?;
    Ok(meta.uid())
}

/// `root` and each directory above it: owned by this user or root, and when others may write
/// in it, sticky (no one renames or removes what another made there).
fn check_parents(root: &Path, uid: u32) -> anyhow::Result<()> {
    for dir in root.ancestors() {
        let meta =
            std::fs::symlink_metadata(dir).with_context(|| format!("reading {}", dir.display()))?;
        if meta.file_type().is_symlink() || !meta.is_dir() {
            anyhow::bail!("{} is not a directory", dir.display());
        }
        if meta.uid() != uid && meta.uid() != 0 {
            anyhow::bail!(
                "{} belongs to uid {}, neither this user ({uid}) nor root: it could move the \
                 worker's clone",
                dir.display(),
                meta.uid()
            );
        }
        let others_write = meta.mode() & 0o022 != 0;
        let sticky = meta.mode() & 0o1000 != 0;
        if others_write && !sticky {
            anyhow::bail!(
                "{} may be written by other users and is not sticky (mode {:o})",
                dir.display(),
                meta.mode() & 0o7777
            );
        }
    }
    Ok(())
}

/// Makes `path` (mode 0700), or checks that the one there is this user's alone.
fn own_dir(path: &Path, uid: u32) -> anyhow::Result<()> {
    match DirBuilder::new().mode(0o700).create(path) {
        Ok(()) => {}
        Err(e) if e.kind() == ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e).with_context(|| format!("making {}", path.display())),
    }
    let meta =
        std::fs::symlink_metadata(path).with_context(|| format!("reading {}", path.display()))?;
    if meta.file_type().is_symlink() {
        anyhow::bail!("{} is a symbolic link", path.display());
    }
    if !meta.is_dir() {
        anyhow::bail!("{} is not a directory", path.display());
    }
    if meta.uid() != uid {
        anyhow::bail!(
            "{} belongs to uid {}, not to this user ({uid})",
            path.display(),
            meta.uid()
        );
    }
    if meta.mode() & 0o077 != 0 {
        anyhow::bail!(
            "{} is open to other users (mode {:o})",
            path.display(),
            meta.mode() & 0o7777
        );
    }
    Ok(())
}

/// A directory of a random name below `root` that did not exist, made with mode 0700.
fn new_dir(root: &Path, uid: u32) -> anyhow::Result<PathBuf> {
    for _ in 0..16 {
        let path = root.join(format!("corral-{uid}-{:016x}", fastrand::u64(..)));
        match DirBuilder::new().mode(0o700).create(&path) {
            Ok(()) => return Ok(path),
            Err(e) if e.kind() == ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e).with_context(|| format!("making {}", path.display())),
        }
    }
    anyhow::bail!("no new directory could be made in {}", root.display())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn scratch() -> PathBuf {
        let dir = std::env::temp_dir().join(format!("corral-private-{:016x}", fastrand::u64(..)));
        DirBuilder::new().mode(0o700).create(&dir).unwrap();
        dir
    }

    #[test]
    fn the_same_key_finds_the_same_directory_again_and_it_is_the_users_alone() {
        let root = scratch();
        let key = key(
            "run-1",
            "file:///r.git",
            Path::new("corral-sprint.toml"),
            "t1",
        );
        let first = work_dir(&root, &key).unwrap();
        let mode = std::fs::metadata(&first).unwrap().mode() & 0o777;
        assert_eq!(mode, 0o700);
        std::fs::write(first.join("kept"), "").unwrap();
        let again = work_dir(&root, &key).unwrap();
        assert_eq!(again, first);
        assert!(again.join("kept").exists());
        let other = key_of_other_run();
        assert_ne!(work_dir(&root, &other).unwrap(), first);
        std::fs::remove_dir_all(&root).unwrap();
    }

    fn key_of_other_run() -> String {
        key(
            "run-2",
            "file:///r.git",
            Path::new("corral-sprint.toml"),
            "t1",
        )
    }

    #[test]
    fn a_link_or_an_open_directory_in_its_place_is_not_used() {
        let root = scratch();
        let uid = own_uid().unwrap();
        let elsewhere = root.join("elsewhere");
        std::fs::create_dir(&elsewhere).unwrap();
        std::os::unix::fs::symlink(&elsewhere, root.join(format!("corral-{uid}"))).unwrap();
        let dir = work_dir(&root, "k").unwrap();
        assert!(!dir.starts_with(root.join(format!("corral-{uid}"))));
        assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);

        let root = scratch();
        let open = root.join(format!("corral-{uid}"));
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        let dir = work_dir(&root, "k").unwrap();
        assert!(!dir.starts_with(&open));
        assert_eq!(std::fs::read_dir(&open).unwrap().count(), 0);
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn a_temp_dir_others_may_write_in_without_the_sticky_bit_is_refused() {
        let root = scratch();
        let open = root.join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert!(work_dir(&open, "k").is_err());
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o1777)).unwrap();
        assert!(work_dir(&open, "k").is_ok());
        std::fs::remove_dir_all(&root).unwrap();
    }
}
