//! Reading a file the sprint file names (a task's `brief`) inside the work tree only.
//!
//! Whatever a brief holds goes into both agents' prompts, and the sprint file may come from the
//! agent's own earlier work or from someone else's repository: a brief that is a symbolic link
//! to `~/.ssh/id_rsa`, or named `../../.ssh/id_rsa`, would hand the key to the agents. So a brief
//! must be a relative name that stays inside the work tree (the nearest directory up from the
//! sprint file that holds `.git`; the sprint file's directory outside a repository), through no
//! hidden component (one starting with `.`) other than those of the sprint file's own
//! directory, and it is opened one component at a time from the top with `O_NOFOLLOW`
//! (`openat`), so that no symbolic link is followed anywhere on the way, not even one swapped in
//! after a check: a link is refused, not read.

use std::fs::File;
use std::io::Read as _;
use std::os::fd::OwnedFd;
use std::path::{Component, Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{OFlag, openat};
use nix::sys::stat::Mode;

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
    let Some((last, dirs)) = parts.split_last() else {
        return Err((
            Rule::BriefUnreadable,
            format!(
                "cannot use the brief {}: it is a directory",
                shown.display()
            ),
        ));
    };
    let unreadable = |e: Errno| {
        if e == Errno::ENOENT {
            (
                Rule::BriefMissing,
                format!(
                    "the brief {} does not exist (a brief is relative to the sprint file)",
                    shown.display()
                ),
            )
        } else if e == Errno::ELOOP {
            outside(
                "is, or lies below, a symbolic link (a brief is read without following links)"
                    .to_string(),
            )
        } else {
            (
                Rule::BriefUnreadable,
                format!("cannot use the brief {}: {e}", shown.display()),
            )
        }
    };
    let directory = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
    let mut at: OwnedFd =
        openat(nix::fcntl::AT_FDCWD, &top, directory, Mode::empty()).map_err(unreadable)?;
    for (i, part) in dirs.iter().enumerate() {
        let opened = openat(
            &at,
            part.as_os_str(),
            directory | OFlag::O_NOFOLLOW,
            Mode::empty(),
        );
        at = opened.map_err(|e| {
            // A link where a directory is asked for is ENOTDIR, not ELOOP.
            let here: PathBuf = top.join(parts.iter().take(i + 1).collect::<PathBuf>());
            let link = std::fs::symlink_metadata(here).is_ok_and(|m| m.file_type().is_symlink());
            unreadable(if link { Errno::ELOOP } else { e })
        })?;
    }
    let fd = openat(
        &at,
        last.as_os_str(),
        OFlag::O_RDONLY
            | OFlag::O_NOFOLLOW
            | OFlag::O_NONBLOCK
            | OFlag::O_NOCTTY
            | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(unreadable)?;
    let file = File::from(fd);
    let io = |e: std::io::Error| {
        (
            Rule::BriefUnreadable,
            format!("cannot use the brief {}: {e}", shown.display()),
        )
    };
    let meta = file.metadata().map_err(io)?;
    if !meta.is_file() {
        return Err((
            Rule::BriefUnreadable,
            format!(
                "cannot use the brief {}: it is not a regular file",
                shown.display()
            ),
        ));
    }
    if meta.len() > limit {
        return Err((
            Rule::BriefUnreadable,
            format!(
                "cannot use the brief {}: it holds {} bytes, more than {limit}",
                shown.display(),
                meta.len()
            ),
        ));
    }
    let mut bytes = Vec::new();
    file.take(limit + 1).read_to_end(&mut bytes).map_err(io)?;
    Ok(bytes)
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
