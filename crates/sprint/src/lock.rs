//! One sprint at a time per repository.
//!
//! Two `corral sprint run`s in one repository would both run generator rounds in the same work
//! tree, undo each other's commits and resets, and one would die on the other's state. So the
//! coordinator of a run (one by one, `--jobs`, or Ray) holds an exclusive `flock` on
//! `corral-sprint.lock` in the repository's git common directory (shared by its linked
//! worktrees; the agent cannot write `.git`, read-only in its sandbox) for as long as it runs.
//! The file holds who holds it (pid, host, start time, sprint), for the message the next run
//! prints. A holder that dies releases the lock with its last descriptor, whatever killed it:
//! there is no pid file to go stale. The descriptor is closed on exec, so a child left behind
//! by a killed run never holds it. A worker (`corral sprint work`) works in its own clone and
//! takes none.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read as _, Seek as _, Write as _};
use std::path::{Path, PathBuf};

use crate::error::SprintError;
use crate::flow::SprintRun;
use crate::git::Git;

/// The lock's file, in the repository's git common directory.
pub const LOCK_FILE: &str = "corral-sprint.lock";

/// Held while the sprint runs; dropping it releases the lock.
#[derive(Debug)]
pub(crate) struct RepositoryLock {
    _file: File,
}

/// Takes the repository's sprint lock for `run`, or says who holds it
/// ([`SprintError::Busy`]).
pub(crate) async fn lock_repository(run: &SprintRun<'_>) -> Result<RepositoryLock, SprintError> {
    let git = Git {
        runner: run.commands,
        cwd: run.project_root.to_path_buf(),
        cancel: &run.cancel,
        env: run.options.git_env.clone(),
        known: crate::git::Known::default(),
    };
    let common = git
        .run(&["rev-parse", "--path-format=absolute", "--git-common-dir"])
        .await?;
    let path = PathBuf::from(common.trim()).join(LOCK_FILE);
    let holder = format!(
        "{{\"sprint\":{},\"pid\":{},\"host\":{},\"started\":{}}}\n",
        json(run.file.sprint.name.as_str()),
        std::process::id(),
        json(&host_name()),
        json(&(run.options.now)()),
    );
    take(&path, &holder)
}

/// Takes the lock at `path`, writing `holder` into it.
fn take(path: &Path, holder: &str) -> Result<RepositoryLock, SprintError> {
    let io = |source| SprintError::Io {
        path: path.to_path_buf(),
        source,
    };
    // Not truncated on open: the holder's record must stay readable until the lock is ours.
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(io)?;
    match file.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => {
            let mut text = String::new();
            let _ = (&file).take(4096).read_to_string(&mut text);
            return Err(SprintError::Busy {
                holder: describe_holder(&text),
            });
        }
        Err(TryLockError::Error(e)) => return Err(io(e)),
    }
    file.set_len(0).map_err(io)?;
    file.rewind().map_err(io)?;
    file.write_all(holder.as_bytes()).map_err(io)?;
    Ok(RepositoryLock { _file: file })
}

/// "NAME, pid P on HOST, started T" from the holder's record (or what is known of it).
fn describe_holder(text: &str) -> String {
    let record: serde_json::Value = serde_json::from_str(text.trim()).unwrap_or_default();
    let field = |key: &str| -> String {
        match record.get(key) {
            Some(serde_json::Value::String(s)) => {
                s.chars().filter(|c| !c.is_control()).take(200).collect()
            }
            Some(serde_json::Value::Number(n)) => n.to_string(),
            Some(_) | None => "?".to_string(),
        }
    };
    format!(
        "{}, pid {} on {}, started {}",
        field("sprint"),
        field("pid"),
        field("host"),
        field("started")
    )
}

fn json(s: &str) -> String {
    serde_json::Value::String(s.to_string()).to_string()
}

/// This machine's name (`/proc/sys/kernel/hostname`), or `?`.
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "?".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_taker_is_refused_with_the_holder_and_the_lock_is_free_once_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(LOCK_FILE);
        let first = take(
            &path,
            "{\"sprint\":\"one\",\"pid\":42,\"host\":\"box\",\"started\":\"T\"}\n",
        )
        .unwrap();
        let Err(SprintError::Busy { holder }) = take(&path, "{}") else {
            panic!("the second taker got the lock");
        };
        assert_eq!(holder, "one, pid 42 on box, started T");
        drop(first);
        let second = take(&path, "{\"sprint\":\"two\"}\n").unwrap();
        drop(second);
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "{\"sprint\":\"two\"}\n"
        );
    }
}
