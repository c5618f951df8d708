//! Reading a file the sprint file names (a task's `brief`) inside the work tree only.
//!
//! Whatever a brief holds goes into both agents' prompts, and the sprint file may come from the
//! agent's own earlier work or from someone else's repository: a brief that is a symbolic link
//! to `~/.ssh/id_rsa`, or named `../../.ssh/id_rsa`, would hand the key to the agents. So a brief
//! must be a relative name that stays inside the work tree (the nearest directory up from the
//! sprint file that holds `.git`; the sprint file's directory outside a repository), through no
//! hidden component (one starting with `.`) other than those of the sprint file's own
//! directory, and it is opened one component at a time from the top with `O_NOFOLLOW`
//! (`corral-hostfs`), so that no symbolic link is followed anywhere on the way, not even one
//! swapped in after a check: a link (or a second hard link) is refused, not read.

use std::path::{Component, Path, PathBuf};

use corral_hostfs::{EntryKind, HostDir, HostFsError};

use crate::diagnostic::Rule;

/// Why a brief cannot be used: the rule and a sentence.
pub(crate) type Refusal = (Rule, String);

/// Reads the brief `name` (as written in the sprint file whose directory is `sprint_dir`), at
/// most `limit` bytes; `shown` names it in messages.
pub(crate) fn read_brief_in_tree(
    sprint_dir: &Path,
    name: &str,
    shown: &Path,
    limit: u64,
) -> Result<Vec<u8>, Refusal> {
    let outside = |why: String| {
        (
            Rule::BriefOutsideTree,
            format!("the brief {} {why}", shown.display()),
        )
    };
    if Path::new(name).is_absolute() {
        return Err(outside(
            "is an absolute path; a brief is relative to the sprint file, inside the work tree"
                .to_string(),
        ));
    }
    let dir = std::fs::canonicalize(sprint_dir).unwrap_or_else(|_| sprint_dir.to_path_buf());
    let top = work_tree_top(&dir);
    let target = normalize(&dir.join(name));
    let Ok(below) = target.strip_prefix(&top) else {
        return Err(outside(format!("leaves the work tree ({})", top.display())));
    };
    let own: Vec<Component<'_>> = dir
        .strip_prefix(&top)
        .map(|d| d.components().collect())
        .unwrap_or_default();
    let parts: Vec<Component<'_>> = below.components().collect();
    for (i, part) in parts.iter().enumerate() {
        let hidden = part.as_os_str().as_encoded_bytes().starts_with(b".");
        let the_sprint_files_own =
            own.get(i) == Some(part) && own.iter().take(i).eq(parts.iter().take(i));
        if hidden && !the_sprint_files_own {
            return Err(outside(format!(
                "goes through the hidden path component {:?}",
                part.as_os_str()
            )));
        }
    }
    if parts.is_empty() {
        return Err((
            Rule::BriefUnreadable,
            format!(
                "cannot use the brief {}: it is a directory",
                shown.display()
            ),
        ));
    }
    let unreadable = |why: String| {
        (
            Rule::BriefUnreadable,
            format!("cannot use the brief {}: {why}", shown.display()),
        )
    };
    let tree = HostDir::open(&top).map_err(|e| unreadable(e.to_string()))?;
    // What is at the name, seen without following it: a link (or a second hard link, or a
    // link on the way) is refused before anything is read.
    match tree.kind(below) {
        Ok(Some(EntryKind::File)) => {}
        Ok(Some(EntryKind::Dir)) => return Err(unreadable("it is a directory".to_string())),
        Ok(Some(EntryKind::Other(found))) => {
            return Err(outside(format!(
                "is {found}; a brief is read without following links"
            )));
        }
        Ok(None) | Err(HostFsError::Missing { .. }) => {
            return Err((
                Rule::BriefMissing,
                format!(
                    "the brief {} does not exist (a brief is relative to the sprint file)",
                    shown.display()
                ),
            ));
        }
        // A file where a directory of the path belongs is a mistake, not a link.
        Err(HostFsError::Tampered {
            found: "a regular file",
            ..
        }) => {
            return Err(unreadable(
                "a component of its path is not a directory".to_string(),
            ));
        }
        Err(HostFsError::Tampered { found, .. }) => {
            return Err(outside(format!(
                "lies below {found}; a brief is read without following links"
            )));
        }
        Err(e) => return Err(unreadable(e.to_string())),
    }
    match tree.read(below, limit) {
        Ok(bytes) => Ok(bytes),
        Err(HostFsError::Tampered { found, .. }) => Err(outside(format!(
            "is {found}; a brief is read without following links"
        ))),
        Err(e) => Err(unreadable(e.to_string())),
    }
}

/// The top of the work tree `dir` is in: the nearest directory up from it holding `.git`, or
/// `dir` itself outside a repository.
fn work_tree_top(dir: &Path) -> PathBuf {
    dir.ancestors()
        .find(|d| std::fs::symlink_metadata(d.join(".git")).is_ok())
        .unwrap_or(dir)
        .to_path_buf()
}

/// `path` without `.` and `..` components, lexically.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(_) | Component::RootDir | Component::Prefix(_) => out.push(c),
        }
    }
    out
}
