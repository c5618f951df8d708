//! A `file://` remote's refs read from its files, as `git ls-remote` would list them, without a
//! process: the worker asks its remote for a ref five times a second (its gate, while it waits
//! at it), every second (the holds) or once before it fetches (its record), and on a `file://`
//! remote each `git ls-remote` or fetch of nothing is three processes. Only a repository that keeps its refs as git's files do (loose refs, then
//! `packed-refs`) is read; any other answer is `None`, and the caller asks git.
//!
//! Loose refs are read before `packed-refs`, the order git reads them in: a ref being packed
//! meanwhile (written into `packed-refs`, then its loose file removed) is seen in one or the
//! other. A ref being written is a lock file and a rename: read before or after, never half.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The refs directly below `dir` (`refs/corral/holds/`, with its slash) on `remote`, one a line
/// as `<id>\t<name>`; `None` when they cannot be read from files (see the module
/// documentation).
pub(super) fn list(remote: &str, dir: &str) -> Option<String> {
    let git_dir = git_dir(remote)?;
    let mut listed = String::new();
    let mut seen = Vec::new();
    match std::fs::read_dir(git_dir.join(dir)) {
        Ok(entries) => {
            for entry in entries {
                let entry = entry.ok()?;
                let name = entry.file_name().into_string().ok()?;
                // A ref being written (`<name>.lock`) is not one yet.
                if name.ends_with(".lock") || !entry.file_type().ok()?.is_file() {
                    continue;
                }
                let id = loose_id(&entry.path())?;
                let _ = writeln!(listed, "{id}\t{dir}{name}");
                seen.push(format!("{dir}{name}"));
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(_) => return None,
    }
    for (id, name) in packed(&git_dir)? {
        let direct = name
            .strip_prefix(dir)
            .is_some_and(|rest| !rest.contains('/'));
        if direct && !seen.contains(&name) {
            let _ = writeln!(listed, "{id}\t{name}");
        }
    }
    Some(listed)
}

/// Whether `remote` has the ref `name` (its id), read from files; `None` when that cannot be
/// told (see the module documentation).
pub(super) fn find(remote: &str, name: &str) -> Option<Option<String>> {
    // A name git would refuse (`--gate` is the caller's word) is git's to refuse, not a path
    // to read.
    if !name.starts_with("refs/")
        || name
            .split('/')
            .any(|part| part.is_empty() || part.starts_with('.') || part.ends_with(".lock"))
    {
        return None;
    }
    let git_dir = git_dir(remote)?;
    let loose = git_dir.join(name);
    match std::fs::symlink_metadata(&loose) {
        Ok(meta) if meta.is_file() => return Some(Some(loose_id(&loose)?)),
        Ok(_) => return None,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(_) => return None,
    }
    Some(
        packed(&git_dir)?
            .into_iter()
            .find(|(_, packed_name)| packed_name == name)
            .map(|(id, _)| id),
    )
}

/// The git directory of a `file://` remote whose refs are git's files.
fn git_dir(remote: &str) -> Option<PathBuf> {
    let path = remote.strip_prefix("file://")?;
    // A URL's escapes, a host, or a relative path: git's reading of it is git's.
    if path.contains('%') || !path.starts_with('/') {
        return None;
    }
    let repo = Path::new(path);
    let git_dir = if repo.join("refs").is_dir() && repo.join("HEAD").is_file() {
        repo.to_path_buf()
    } else if repo.join(".git").join("refs").is_dir() {
        repo.join(".git")
    } else {
        return None;
    };
    (!git_dir.join("reftable").exists()).then_some(git_dir)
}

/// The id in a loose ref's file; `None` for a symbolic ref or anything git would not take.
fn loose_id(path: &Path) -> Option<String> {
    let text = read_small(path)?;
    let id = text.trim();
    is_object_id(id).then(|| id.to_owned())
}

/// The refs of `packed-refs` (`(id, name)`), none when there is no such file; `None` when it
/// cannot be read.
fn packed(git_dir: &Path) -> Option<Vec<(String, String)>> {
    let path = git_dir.join("packed-refs");
    let Some(text) = read_small(&path) else {
        return (!path.exists()).then(Vec::new);
    };
    Some(
        text.lines()
            .filter_map(|line| line.split_once(' '))
            .filter(|(id, _)| is_object_id(id))
            .map(|(id, name)| (id.to_owned(), name.to_owned()))
            .collect(),
    )
}

/// A ref file's text, when it is a file (at most 16 MiB: a `packed-refs` of many refs).
fn read_small(path: &Path) -> Option<String> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    if !meta.is_file() || meta.len() > 16 * 1024 * 1024 {
        return None;
    }
    std::fs::read_to_string(path).ok()
}

/// Whether `id` is a full object id (SHA-1 or SHA-256, lower-case hex).
fn is_object_id(id: &str) -> bool {
    matches!(id.len(), 40 | 64) && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "0123456789abcdef0123456789abcdef01234567";
    const B: &str = "89abcdef0123456789abcdef0123456789abcdef";
    const HOLDS: &str = "refs/corral/holds/";

    #[test]
    fn a_file_remotes_refs_are_read_loose_then_packed() {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path().join("remote.git");
        std::fs::create_dir_all(repo.join("refs/corral/holds")).unwrap();
        std::fs::write(repo.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        let url = format!("file://{}", repo.display());
        assert_eq!(list(&url, HOLDS).as_deref(), Some(""));
        assert_eq!(find(&url, "refs/corral/s/t/record"), Some(None));
        std::fs::write(repo.join("refs/corral/holds/claude"), format!("{A}\n")).unwrap();
        std::fs::write(repo.join("refs/corral/holds/codex.lock"), format!("{A}\n")).unwrap();
        std::fs::write(
            repo.join("packed-refs"),
            format!(
                "# pack-refs with: peeled fully-peeled sorted\n{B} refs/corral/holds/claude\n\
                 {B} refs/corral/holds/codex\n{B} refs/corral/holds/deep/er\n\
                 {B} refs/corral/s/t/record\n{B} refs/heads/main\n"
            ),
        )
        .unwrap();
        assert_eq!(
            list(&url, HOLDS).unwrap(),
            format!("{A}\trefs/corral/holds/claude\n{B}\trefs/corral/holds/codex\n")
        );
        assert_eq!(
            find(&url, "refs/corral/s/t/record"),
            Some(Some(B.to_owned()))
        );
        assert_eq!(
            find(&url, "refs/corral/holds/claude"),
            Some(Some(A.to_owned()))
        );
        // Not read from files: a remote of another transport, a symbolic ref, a reftable.
        assert_eq!(list("ssh://host/remote.git", HOLDS), None);
        assert_eq!(find("/srv/remote.git", "refs/heads/main"), None);
        assert_eq!(find(&url, "/etc/hostname"), None);
        assert_eq!(find(&url, "refs/../HEAD"), None);
        std::fs::write(
            repo.join("refs/corral/holds/claude"),
            "ref: refs/heads/main\n",
        )
        .unwrap();
        assert_eq!(list(&url, HOLDS), None);
        assert_eq!(find(&url, "refs/corral/holds/claude"), None);
        std::fs::remove_file(repo.join("refs/corral/holds/claude")).unwrap();
        std::fs::create_dir(repo.join("reftable")).unwrap();
        assert_eq!(list(&url, HOLDS), None);
    }
}
