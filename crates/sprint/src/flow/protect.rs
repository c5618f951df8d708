//! The judges the generator cannot edit: the sprint file, the check's and gates' scripts (when
//! they are files in the tree) and the sprint's `protected` globs.
//!
//! A generator that rewrites `check.sh` to `exit 0`, or the sprint file (its check, its rounds,
//! a new task), would otherwise be judged by what it wrote, committed, and obeyed by the next
//! `corral sprint run`. So before each generator round the protected files are fingerprinted
//! (sha256 of content and mode, `protected.json` in the round's directory, written once so that
//! a round continued after a kill compares with the tree before it), and after the round,
//! before any check runs, a round that changed, added or removed one that its task's
//! `may_edit` does not cover is regressed: its change saved as `regressed.patch`, named in the
//! task's warnings and the event stream, and the tree reset, so that the check runs the
//! version the round did not write.

use std::collections::BTreeMap;
use std::io::Read as _;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use sha2::{Digest as _, Sha256};

use super::task::TaskCursor;
use super::{
    Context, Next, REGRESSED_PATCH_FILE, SprintError, progress_mut, read_record_text, write_file,
};
use crate::event::SprintEvent;
use crate::file::{SprintFile, Task};
use crate::state::Attribution;

/// The fingerprints taken before a generator round, in the round's directory.
pub const PROTECTED_FILE: &str = "protected.json";

/// Protected path → `"<mode>:<sha256>"` (a link: `"link:<sha256 of its target>"`).
type Fingerprints = BTreeMap<String, String>;

/// Whether `path` (relative to the work tree's top, `/`-separated) matches `glob`: `*` and `?`
/// stay within a path component, `**` crosses them, and a glob naming a directory (ending in
/// `/`) covers everything below it.
pub(crate) fn glob_matches(glob: &str, path: &str) -> bool {
    let glob = glob.trim_start_matches("./");
    if let Some(dir) = glob.strip_suffix('/') {
        return glob_matches(&format!("{dir}/**"), path);
    }
    matches_from(glob.as_bytes(), path.as_bytes())
}

fn matches_from(glob: &[u8], path: &[u8]) -> bool {
    match glob.split_first() {
        None => path.is_empty(),
        Some((b'*', rest)) if rest.first() == Some(&b'*') => {
            // `**/` also matches no directory at all.
            let rest = rest.get(1..).unwrap_or_default();
            if let Some(after) = rest.strip_prefix(b"/")
                && matches_from(after, path)
            {
                return true;
            }
            (0..=path.len()).any(|i| matches_from(rest, path.get(i..).unwrap_or_default()))
        }
        Some((b'*', rest)) => {
            let stop = path.iter().position(|&c| c == b'/').unwrap_or(path.len());
            (0..=stop).any(|i| matches_from(rest, path.get(i..).unwrap_or_default()))
        }
        Some((b'?', rest)) => match path.split_first() {
            Some((c, tail)) if *c != b'/' => matches_from(rest, tail),
            Some(_) | None => false,
        },
        Some((g, rest)) => match path.split_first() {
            Some((c, tail)) if c == g => matches_from(rest, tail),
            Some(_) | None => false,
        },
    }
}

/// Programs that run a script named as their first argument (`bash scripts/ci.sh`).
const INTERPRETERS: &[&str] = &[
    "sh", "bash", "dash", "zsh", "ksh", "fish", "python", "python3", "node", "perl", "ruby",
    "deno", "bun", "tsx", "php", "lua", "Rscript", "pwsh",
];

/// The scripts `command` runs that are files in `work_tree`, relative to its top: in each of
/// its simple commands, the program when it names a file in the tree (`./check.sh`), or the
/// first argument of an interpreter (`scripts/ci.sh` in `bash scripts/ci.sh --fast`). Only
/// those: an argument such as the `BROKEN` of `test ! -e BROKEN` is data the task may change.
/// Shell quoting is not undone; a quoted name is not found (the sprint's `protected` can name
/// it).
pub(crate) fn scripts_in(command: &str, work_tree: &Path) -> Vec<String> {
    let in_tree = |word: &str| -> Option<String> {
        if word.contains(['$', '\'', '"', '*', '?']) {
            return None;
        }
        let rel = relative_to(Path::new(word), work_tree)?;
        let meta = std::fs::symlink_metadata(work_tree.join(&rel)).ok()?;
        (meta.is_file() || meta.file_type().is_symlink()).then_some(rel)
    };
    let mut found = Vec::new();
    for simple in command.split(|c: char| ";&|()`\n".contains(c)) {
        let mut words = simple
            .split_whitespace()
            .skip_while(|w| w.contains('=') && !w.starts_with('-'))
            .skip_while(|w| ["exec", "env", "command", "time", "nice"].contains(w));
        let Some(program) = words.next() else {
            continue;
        };
        if let Some(rel) = in_tree(program) {
            found.push(rel);
        } else if INTERPRETERS.contains(&program.rsplit('/').next().unwrap_or(program))
            && let Some(rel) = words.find(|w| !w.starts_with('-')).and_then(in_tree)
        {
            found.push(rel);
        }
    }
    found
}

/// `path` (absolute, or relative to `work_tree`) relative to `work_tree`'s top, when inside it.
fn relative_to(path: &Path, work_tree: &Path) -> Option<String> {
    let joined = if path.is_absolute() {
        path.to_path_buf()
    } else {
        work_tree.join(path)
    };
    let mut parts: Vec<String> = Vec::new();
    let top = normalize(work_tree);
    let full = normalize(&joined);
    let rest = full.strip_prefix(&top).ok()?;
    for c in rest.components() {
        match c {
            std::path::Component::Normal(p) => parts.push(p.to_str()?.to_string()),
            std::path::Component::CurDir
            | std::path::Component::ParentDir
            | std::path::Component::RootDir
            | std::path::Component::Prefix(_) => return None,
        }
    }
    (!parts.is_empty()).then(|| parts.join("/"))
}

/// `path` without `.` and `..` components (lexically), so that `./check.sh` and `a/../b` read
/// as the names they stand for.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::Normal(_)
            | std::path::Component::RootDir
            | std::path::Component::Prefix(_) => out.push(c),
        }
    }
    out
}

/// The globs protected in `work_tree` for `file`: the sprint file itself (when it is in the
/// tree: in `work_tree`, or in `project_root`, a parallel task's project), the scripts of the
/// check and the gates, and the sprint's `protected`.
pub(crate) fn protected_globs(
    file: &SprintFile,
    work_tree: &Path,
    project_root: &Path,
) -> Vec<String> {
    let mut globs = Vec::new();
    let sprint_file = std::fs::canonicalize(&file.path).unwrap_or_else(|_| file.path.clone());
    for top in [work_tree, project_root] {
        let top = std::fs::canonicalize(top).unwrap_or_else(|_| top.to_path_buf());
        if let Some(rel) = relative_to(&sprint_file, &top) {
            globs.push(rel);
            break;
        }
    }
    let commands = std::iter::once(file.sprint.check.as_str())
        .chain(file.gates.iter().map(|g| g.command.as_str()));
    for command in commands {
        globs.extend(scripts_in(command, work_tree));
    }
    globs.extend(file.sprint.protected.iter().cloned());
    globs.sort();
    globs.dedup();
    globs
}

/// The fingerprint of the file at `path`, not following a link: `None` when there is none.
fn fingerprint(path: &Path) -> Option<String> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    let mut hash = Sha256::new();
    if meta.file_type().is_symlink() {
        let target = std::fs::read_link(path).ok()?;
        hash.update(target.as_os_str().as_encoded_bytes());
        return Some(format!("link:{:x}", hash.finalize()));
    }
    if !meta.is_file() {
        return None;
    }
    let mut f = std::fs::File::open(path).ok()?;
    let mut buf = vec![0; 64 * 1024];
    loop {
        match f.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => hash.update(buf.get(..n).unwrap_or_default()),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
    Some(format!(
        "{:o}:{:x}",
        meta.permissions().mode() & 0o7777,
        hash.finalize()
    ))
}

/// The protected paths that differ between `before` and `after` (changed, added, removed).
fn changed(before: &Fingerprints, after: &Fingerprints) -> Vec<String> {
    let mut paths: Vec<String> = before
        .iter()
        .filter(|(p, f)| after.get(*p) != Some(*f))
        .map(|(p, _)| p.clone())
        .chain(after.keys().filter(|p| !before.contains_key(*p)).cloned())
        .collect();
    paths.sort();
    paths
}

impl Context<'_, '_> {
    /// The protected files of the work tree as they are now, each fingerprinted.
    async fn protected_now(&self) -> Result<Fingerprints, SprintError> {
        let globs = protected_globs(self.file(), &self.work_tree, self.run.project_root);
        let listed = self
            .git
            .run(&[
                "ls-files",
                "-z",
                "--cached",
                "--others",
                "--exclude-standard",
            ])
            .await?;
        let mut prints = Fingerprints::new();
        for path in listed.split('\0').filter(|p| !p.is_empty()) {
            if globs.iter().any(|g| glob_matches(g, path))
                && let Some(print) = fingerprint(&self.work_tree.join(path))
            {
                prints.insert(path.to_string(), print);
            }
        }
        Ok(prints)
    }

    /// Fingerprints the protected files before the generator's round `round` of `task`, once:
    /// a round continued after a kill keeps the fingerprints taken before it first ran.
    pub(super) async fn fingerprint_protected(
        &self,
        task: &Task,
        round: u32,
    ) -> Result<(), SprintError> {
        let path = self.layout.round_dir(&task.id, round).join(PROTECTED_FILE);
        // Read, as written, through the record's handle (out of a sandboxed agent's reach).
        if !read_record_text(&self.layout, &path).is_empty() {
            return Ok(());
        }
        let prints = self.protected_now().await?;
        let json = serde_json::to_vec_pretty(&prints).map_err(|e| SprintError::Io {
            path: path.clone(),
            source: std::io::Error::other(e),
        })?;
        write_file(&self.layout, &path, &json)
    }
}

impl TaskCursor<'_, '_, '_> {
    /// After the generator's round, before any check: a round that changed a protected path
    /// the task may not edit is regressed and the tree reset (`Some`: where the task goes);
    /// `None` when it changed none (or no fingerprints were taken).
    pub(super) async fn guard_protected(&mut self) -> Result<Option<Next>, SprintError> {
        let task = self.task;
        let Some((round, base)) = self
            .state
            .tasks
            .get(self.i)
            .and_then(|t| t.progress.as_ref().map(|p| (t.round, p.base.clone())))
        else {
            return Ok(None);
        };
        let round_dir = self.ctx.layout.round_dir(&task.id, round);
        let text = read_record_text(&self.ctx.layout, &round_dir.join(PROTECTED_FILE));
        let Ok(before) = serde_json::from_str::<Fingerprints>(&text) else {
            return Ok(None);
        };
        let after = self.ctx.protected_now().await?;
        let touched: Vec<String> = changed(&before, &after)
            .into_iter()
            .filter(|p| !task.may_edit.iter().any(|g| glob_matches(g, p)))
            .collect();
        if touched.is_empty() {
            return Ok(None);
        }
        let message = format!(
            "round {round}: the generator changed protected path(s) {}; Corral reset the round \
             (a task may change one only when its may_edit lists it)",
            touched.join(", ")
        );
        self.warn(&message)?;
        let patch = self.ctx.git.patch_against(&base).await?;
        let saved = round_dir.join(REGRESSED_PATCH_FILE);
        write_file(&self.ctx.layout, &saved, patch.as_bytes())?;
        let attempts = match self.state.tasks.get_mut(self.i) {
            Some(t) => {
                t.attempt += 1;
                t.attribution = Some(Attribution::Regressed);
                if let Some(p) = t.progress.as_mut() {
                    p.regressions += 1;
                }
                t.attempt
            }
            None => 0,
        };
        if attempts > self.ctx.file().sprint.max_attempts {
            let reason = format!(
                "round {round} changed protected path(s) ({}), and its attempts ({}) are used up",
                touched.join(", "),
                self.ctx.file().sprint.max_attempts
            );
            return self.block(reason).await.map(Some);
        }
        let critique = format!(
            "Your change in round {round} changed {}, which the sprint protects: the check, its \
             scripts and the sprint file are the judges of your work, not part of it. Corral \
             saved the change to {} and put the tree back as it was at the task's start. Do \
             the task without changing them.",
            touched.join(", "),
            saved.display()
        );
        // As after a regression: the reset is written down before it is done.
        if let Some(p) = progress_mut(self.state, self.i) {
            p.reset_pending = true;
        }
        let next = self.next_round(critique).await?;
        self.ctx.emit(SprintEvent::Regressed {
            task: task.id.clone(),
            round,
            patch: saved.display().to_string(),
        });
        if let Some(p) = progress_mut(self.state, self.i).filter(|p| p.reset_pending) {
            p.reset_pending = false;
            self.ctx.git.reset_to(&base).await?;
            self.save()?;
        }
        Ok(Some(next))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_within_and_across_components() {
        assert!(glob_matches("check.sh", "check.sh"));
        assert!(glob_matches("./check.sh", "check.sh"));
        assert!(!glob_matches("check.sh", "a/check.sh"));
        assert!(glob_matches("*.sh", "check.sh"));
        assert!(!glob_matches("*.sh", "ci/check.sh"));
        assert!(glob_matches("**/*.sh", "check.sh"));
        assert!(glob_matches("**/*.sh", "ci/deep/check.sh"));
        assert!(glob_matches("ci/**", "ci/deep/check.sh"));
        assert!(glob_matches("ci/", "ci/deep/check.sh"));
        assert!(!glob_matches("ci/", "cix/check.sh"));
        assert!(glob_matches("c?eck.sh", "check.sh"));
        assert!(!glob_matches("c?eck.sh", "c/eck.sh"));
    }

    #[test]
    fn the_scripts_a_command_runs_are_found_in_the_tree() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("scripts")).unwrap();
        std::fs::write(dir.path().join("check.sh"), "exit 0\n").unwrap();
        std::fs::write(dir.path().join("scripts/ci.sh"), "exit 0\n").unwrap();
        assert_eq!(scripts_in("./check.sh", dir.path()), vec!["check.sh"]);
        assert_eq!(
            scripts_in("bash scripts/ci.sh --fast && cargo test", dir.path()),
            vec!["scripts/ci.sh"]
        );
        std::fs::write(dir.path().join("BROKEN"), "").unwrap();
        assert!(scripts_in("test ! -e BROKEN", dir.path()).is_empty());
        assert_eq!(
            scripts_in("CI=1 ./check.sh; python3 -u scripts/ci.sh", dir.path()),
            vec!["check.sh", "scripts/ci.sh"]
        );
        assert!(scripts_in("sh ../check.sh", dir.path()).is_empty());
    }
}
