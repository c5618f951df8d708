//! Programs Corral runs on the host, outside any sandbox, around a run: the CLI's version probe
//! (and `corral doctor`'s). The agent can write its work tree, so a program found there (a
//! `./node_modules/.bin/claude`, a `PATH` entry that is relative or inside the work tree) is one
//! the agent may have replaced: it is refused rather than run with the user's full rights. Such
//! programs also run with `/` as their working directory, so nothing they read at start-up
//! (a project's own configuration) comes from the work tree.

use std::ffi::{OsStr, OsString};
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// The working directory of a program run on the host: never one the agent can write.
pub const HOST_CWD: &str = "/";

/// Why a program is not run on the host.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HostProgramError {
    /// No executable of that name on `PATH` (relative entries skipped), or the path given is not
    /// an executable file. Not retryable: install it, or name it by its absolute path.
    #[error("{} not found (relative PATH entries are not searched)", program.display())]
    NotFound {
        /// The program asked for.
        program: PathBuf,
    },
    /// The program lies in a directory the agent can write. Not retryable: install it outside
    /// the work tree, or name another.
    #[error("{} is inside {}, which the agent can write; it is not run outside the sandbox", found.display(), root.display())]
    AgentWritable {
        /// Where it was found.
        found: PathBuf,
        /// The writable directory it is in.
        root: PathBuf,
    },
}

fn executable(path: &Path) -> bool {
    fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// `path` with symlinks resolved where it exists, as given otherwise.
fn real(path: &Path) -> PathBuf {
    fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

/// Finds `program` for running it on the host: an absolute path as given, a bare name on the
/// absolute entries of `path`. Refuses a relative path with directories (it would resolve in
/// the work tree) and any result inside one of `writable` (symlinks resolved on both sides).
pub fn host_program(
    program: &Path,
    path: Option<&OsStr>,
    writable: &[&Path],
) -> Result<PathBuf, HostProgramError> {
    let not_found = || HostProgramError::NotFound {
        program: program.to_path_buf(),
    };
    let found = if program.is_absolute() {
        executable(program)
            .then(|| program.to_path_buf())
            .ok_or_else(not_found)?
    } else if program.components().count() > 1 {
        return Err(not_found());
    } else {
        std::env::split_paths(path.ok_or_else(not_found)?)
            .filter(|dir| dir.is_absolute())
            .map(|dir| dir.join(program))
            .find(|p| executable(p))
            .ok_or_else(not_found)?
    };
    let resolved = real(&found);
    for root in writable {
        let root_real = real(root);
        if resolved.starts_with(&root_real) || found.starts_with(root) {
            return Err(HostProgramError::AgentWritable {
                found,
                root: root.to_path_buf(),
            });
        }
    }
    Ok(found)
}

/// The environment a question to a host program runs with (`--version`, a model probe):
/// `PATH` and `HOME` from `ambient` (the caller's environment setting), nothing else, so no
/// credential reaches it.
pub fn host_env<I, K, V>(ambient: I) -> Vec<(OsString, OsString)>
where
    I: IntoIterator<Item = (K, V)>,
    K: AsRef<str>,
    V: Into<OsString>,
{
    ambient
        .into_iter()
        .filter(|(k, _)| matches!(k.as_ref(), "PATH" | "HOME"))
        .map(|(k, v)| (OsString::from(k.as_ref()), v.into()))
        .collect()
}

/// Where `program` is, for a child that looks it up itself: as given (against `cwd`) when it
/// names a path, else the first executable on `path`. Unlike [`host_program`] it trusts every
/// entry: the child runs confined, so what it finds is only what it could run anyway.
pub fn resolve_program(program: &Path, path: Option<&str>, cwd: &Path) -> Option<PathBuf> {
    if program.components().count() > 1 {
        let full = if program.is_absolute() {
            program.to_path_buf()
        } else {
            cwd.join(program)
        };
        return executable(&full).then_some(full);
    }
    std::env::split_paths(path?)
        .map(|dir| dir.join(program))
        .find(|p| executable(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exe(path: &Path) {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, "#!/bin/sh\n").unwrap();
        fs::set_permissions(path, fs::Permissions::from_mode(0o755)).unwrap();
    }

    #[test]
    fn a_program_in_the_work_tree_is_refused_however_it_is_reached() {
        let tmp = tempfile::tempdir().unwrap();
        let work = tmp.path().join("work");
        let bin = tmp.path().join("bin");
        exe(&work.join("node_modules/.bin/claude"));
        exe(&bin.join("claude"));
        let writable = [work.as_path()];
        let path = |dirs: &[&Path]| std::env::join_paths(dirs).unwrap();

        // Found first on PATH inside the work tree: refused.
        let inside = work.join("node_modules/.bin");
        assert!(matches!(
            host_program(
                Path::new("claude"),
                Some(&path(&[&inside, &bin])),
                &writable
            ),
            Err(HostProgramError::AgentWritable { .. })
        ));
        // A relative PATH entry is not searched at all.
        assert_eq!(
            host_program(
                Path::new("claude"),
                Some(&path(&[Path::new("node_modules/.bin"), &bin])),
                &writable
            ),
            Ok(bin.join("claude"))
        );
        // Named by a path into the work tree, or relative to it.
        assert!(matches!(
            host_program(&work.join("node_modules/.bin/claude"), None, &writable),
            Err(HostProgramError::AgentWritable { .. })
        ));
        assert!(matches!(
            host_program(Path::new("./payload.sh"), None, &writable),
            Err(HostProgramError::NotFound { .. })
        ));
        // A link from outside into the work tree.
        std::os::unix::fs::symlink(work.join("node_modules/.bin/claude"), bin.join("linked"))
            .unwrap();
        assert!(matches!(
            host_program(Path::new("linked"), Some(&path(&[&bin])), &writable),
            Err(HostProgramError::AgentWritable { .. })
        ));
        assert_eq!(
            host_program(Path::new("claude"), Some(&path(&[&bin])), &writable),
            Ok(bin.join("claude"))
        );
    }
}
