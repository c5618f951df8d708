//! The git-cleanliness check: a run works in an isolated workspace, not a sandbox, so the
//! repository is looked at before and after it and every change outside the paths the run was
//! allowed to write is named. A stray write is detected and reported, never silently kept.
//!
//! [`git_snapshot`] notes the repository's state before a run: its root, its `HEAD` commit, and
//! for every path `git status` reports (modified, staged, deleted, renamed, untracked) the status
//! code and a fingerprint of what is on disk: file type, mode, size, mtime in nanoseconds, and a
//! content hash for files of at most 1 MiB (larger files count their ctime instead, which cannot
//! be set back). [`GitSnapshot::changes_since`] takes the same snapshot again and compares:
//!
//! * a path dirty at both ends changed when its status code or fingerprint differs, so a file
//!   that was already dirty before the run and was written during it is found, and one that was
//!   left alone is not;
//! * a path dirty at one end only changed (a file reverted to its committed state is `Modified`);
//! * when `HEAD` moved (the run committed, reset or checked out), paths that are clean at both
//!   ends but differ between the two commits changed too, so committing a stray write does not
//!   hide it.
//!
//! [`strays`] then keeps the changes outside the allowed directories. Gitignored paths (the run
//! directory `.corral/`, build output) are never reported. Known blind spots: a submodule or a
//! nested repository is one path (a submodule counts as changed when its checked-out commit
//! moves, not when files inside it change: looking inside would run git with the submodule's
//! own configuration; a nested repository is seen through its status and its directory's
//! mtime), and writes outside the repository are not looked at.
//!
//! git runs as a bounded command (`bounded.rs`: the engine's spawner, a new process group,
//! `/dev/null` stdin, both pipes read at once, the group killed on timeout) with only `PATH` and
//! `HOME` from the engine's environment setting and `GIT_OPTIONAL_LOCKS=0`: it never takes
//! the index lock, so a concurrent agent's git is not disturbed, and without `LANG` its messages
//! are the untranslated ones this module recognises.
//!
//! The repository is the agent's: it could write `.git/config` (and what it includes),
//! `.gitattributes`, `.git/info/attributes` and the hooks, and git runs here on the host, outside
//! any sandbox. So every git command runs with the repository's power to run programs taken
//! away ([`NEUTRAL_CONFIG`], set through `GIT_CONFIG_COUNT`, which outranks every config file):
//! no fsmonitor hook or daemon, no hooks, no pager, no external diff, no transport (a partial
//! clone's lazy fetch would run `core.sshCommand`), no submodule recursion (`git status` would
//! run git inside each submodule, with that submodule's configuration); the system and global
//! config and the system attributes are not read at all. The one kind of program a config can
//! name and an attribute can call by any name, a filter driver (`filter.<name>.clean`, `smudge`,
//! `process`, run by `git status` for a file whose stat data changed), is found by listing the
//! repository's `filter.*` keys first (reading config runs nothing), and each one found is
//! emptied, which git takes as "no filter"; merge drivers (`merge.<name>.driver`) likewise.
//! The supervised command runner's host git (`commands.rs`) uses the same configuration.

use std::collections::BTreeMap;
use std::collections::hash_map::DefaultHasher;
use std::ffi::{OsStr, OsString};
use std::fmt;
use std::hash::Hasher;
use std::io::{self, Read};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use corral_process::bounded::{BoundedCommand, BoundedEnd, BoundedError, run_bounded};
use corral_process::process_env;
use corral_process::spawn::{ExitInfo, ProviderSpawn, SpawnRequest, StdinMode, TokioSpawner};

/// Files up to this size get a content hash; larger ones are compared by size, mtime and ctime.
const HASH_LIMIT: u64 = 1024 * 1024;
/// The most git output kept; more is an error rather than unbounded memory.
const STDOUT_LIMIT: usize = 256 * 1024 * 1024;
/// How much of git's stderr is kept for error messages.
const STDERR_KEEP: usize = 16 * 1024;

/// Configuration every git command of the check runs with, above whatever the repository says:
/// nothing the agent wrote into its repository makes git run a program.
pub const NEUTRAL_CONFIG: &[(&str, &str)] = &[
    ("core.fsmonitor", "false"),
    ("core.hooksPath", "/dev/null"),
    ("core.attributesFile", "/dev/null"),
    ("core.pager", "cat"),
    ("core.untrackedCache", "false"),
    ("core.sshCommand", "false"),
    ("core.askPass", "false"),
    ("credential.helper", ""),
    ("protocol.allow", "never"),
    ("diff.external", ""),
    ("diff.ignoreSubmodules", "dirty"),
    ("submodule.recurse", "false"),
    ("status.submoduleSummary", "false"),
    ("gc.auto", "0"),
    ("maintenance.auto", "false"),
];

/// Environment every git command of the check runs with, beside `PATH` and `HOME`.
const NEUTRAL_ENV: &[(&str, &str)] = &[
    ("GIT_CONFIG_NOSYSTEM", "1"),
    ("GIT_CONFIG_GLOBAL", "/dev/null"),
    ("GIT_ATTR_NOSYSTEM", "1"),
    ("GIT_OPTIONAL_LOCKS", "0"),
    ("GIT_TERMINAL_PROMPT", "0"),
    ("GIT_NO_LAZY_FETCH", "1"),
    ("GIT_PAGER", "cat"),
];

/// The keys of a filter driver that name a program.
const FILTER_PROGRAM_KEYS: &[&str] = &["clean", "smudge", "process"];

/// `git config` arguments that list the keys of the filter and merge drivers the repository
/// defines (listing runs nothing); [`driver_overrides`] reads the answer.
pub const DRIVER_LISTING: &[&str] = &[
    "config",
    "--null",
    "--name-only",
    "--get-regexp",
    "^(filter|merge)\\.",
];

/// From the keys `DRIVER_LISTING` printed: the overrides that empty every driver found, which
/// git takes as "no driver" (a filter passes content through, a merge falls back to its own
/// text merge).
pub fn driver_overrides(listing: &[u8]) -> Vec<(String, String)> {
    let mut drivers: Vec<(&'static str, String)> = nul_fields(listing)
        .filter_map(|key| {
            let key = String::from_utf8_lossy(key);
            // `<section>.<name>.<var>`, where the name may hold dots.
            let (section, rest) = key.split_once('.')?;
            let section = match section {
                "filter" => "filter",
                "merge" => "merge",
                _ => return None,
            };
            let (name, _) = rest.rsplit_once('.')?;
            Some((section, name.to_owned()))
        })
        .collect();
    drivers.sort();
    drivers.dedup();
    let mut overrides = Vec::new();
    for (section, name) in drivers {
        match section {
            "filter" => {
                for key in FILTER_PROGRAM_KEYS {
                    overrides.push((format!("filter.{name}.{key}"), String::new()));
                }
                overrides.push((format!("filter.{name}.required"), "false".to_owned()));
            }
            _ => overrides.push((format!("merge.{name}.driver"), String::new())),
        }
    }
    overrides
}

/// `base` (the variables git may have, `PATH` and `HOME`), then `NEUTRAL_ENV`, then
/// [`NEUTRAL_CONFIG`] and `extra` as `GIT_CONFIG_*` variables, which outrank every config file.
/// A name set twice keeps its last value.
pub fn neutral_env(
    base: Vec<(OsString, OsString)>,
    extra: &[(String, String)],
) -> Vec<(OsString, OsString)> {
    let mut env = base;
    env.extend(
        NEUTRAL_ENV
            .iter()
            .map(|(k, v)| (OsString::from(k), OsString::from(v))),
    );
    // Keys and values as separate variables: a filter name holding `=` cannot be misread,
    // as it would be in `-c key=value`.
    let config: Vec<(&str, &str)> = NEUTRAL_CONFIG
        .iter()
        .copied()
        .chain(extra.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .collect();
    env.push(("GIT_CONFIG_COUNT".into(), config.len().to_string().into()));
    for (i, (key, value)) in config.iter().enumerate() {
        env.push((format!("GIT_CONFIG_KEY_{i}").into(), (*key).into()));
        env.push((format!("GIT_CONFIG_VALUE_{i}").into(), (*value).into()));
    }
    let mut seen = std::collections::HashSet::new();
    let mut kept: Vec<(OsString, OsString)> = env
        .into_iter()
        .rev()
        .filter(|(k, _)| seen.insert(k.clone()))
        .collect();
    kept.reverse();
    kept
}

/// Why the repository state could not be read.
#[derive(Debug, thiserror::Error)]
pub enum GitCheckError {
    /// The directory to check does not exist or cannot be read. Not retryable: the caller named
    /// the wrong directory, or it was removed.
    #[error("cannot check {}: {source}", path.display())]
    Directory {
        /// The directory.
        path: PathBuf,
        /// The operating system's error.
        source: io::Error,
    },
    /// The git program was not found. Not retryable: install git, or skip the check knowingly.
    #[error("git not found (looked for {})", program.display())]
    GitMissing {
        /// The program that was looked for.
        program: PathBuf,
    },
    /// git could not be started for another reason (permission, resource limits). Not
    /// retryable as is.
    #[error("cannot start {}: {source}", program.display())]
    Spawn {
        /// The program.
        program: PathBuf,
        /// The operating system's error.
        source: io::Error,
    },
    /// git (or reading the files it reported) did not finish within the timeout; git's process
    /// group was killed. Retryable: a slow disk, a very large tree or a busy machine.
    #[error("`{command}` did not finish within {}", humantime::format_duration(*timeout))]
    TimedOut {
        /// What was running.
        command: String,
        /// The timeout of the whole check.
        timeout: Duration,
    },
    /// git exited unsuccessfully (a repository git refuses to use, such as one with dubious
    /// ownership, or a corrupt one). Not retryable: the message says what git objected to.
    #[error("`{command}` failed with {exit}: {stderr}")]
    Failed {
        /// The command.
        command: String,
        /// How git ended.
        exit: ExitInfo,
        /// The start of git's stderr.
        stderr: String,
    },
    /// git wrote more than the module keeps. Not retryable: the tree has an unmanageable number
    /// of dirty or untracked files (a missing `.gitignore` entry, most likely).
    #[error("`{command}` wrote more than {limit} bytes")]
    OutputTooLarge {
        /// The command.
        command: String,
        /// The limit in bytes.
        limit: usize,
    },
    /// git's output was not in the expected format. Not retryable.
    #[error("unexpected output from `{command}`: {detail}")]
    Malformed {
        /// The command.
        command: String,
        /// What was wrong.
        detail: String,
    },
    /// Reading git's output or waiting for it failed. Retryable: a transient operating system
    /// condition.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: &'static str,
        /// The error.
        source: io::Error,
    },
}

impl GitCheckError {
    /// Whether trying the same check again may succeed.
    pub fn is_retryable(&self) -> bool {
        match self {
            GitCheckError::TimedOut { .. } | GitCheckError::Io { .. } => true,
            GitCheckError::Directory { .. }
            | GitCheckError::GitMissing { .. }
            | GitCheckError::Spawn { .. }
            | GitCheckError::Failed { .. }
            | GitCheckError::OutputTooLarge { .. }
            | GitCheckError::Malformed { .. } => false,
        }
    }
}

/// How a path changed between a snapshot and now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ChangeKind {
    /// The path exists now and did not before (a new untracked file, the new name of a rename,
    /// a file added by a commit the run made).
    Added,
    /// The path exists at both ends and its content, metadata or git state changed (including
    /// a dirty file reverted to its committed content).
    Modified,
    /// The path existed before and does not now (including the old name of a rename).
    Deleted,
}

impl ChangeKind {
    /// The lowercase name: `added`, `modified`, `deleted`.
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeKind::Added => "added",
            ChangeKind::Modified => "modified",
            ChangeKind::Deleted => "deleted",
        }
    }
}

impl fmt::Display for ChangeKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One changed path of the repository.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub struct Change {
    /// The absolute path: the repository root as git reports it (symlinks resolved) joined with
    /// the path inside the repository.
    pub path: PathBuf,
    /// How it changed.
    pub kind: ChangeKind,
}

impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.kind, self.path.display())
    }
}

/// Which git program to run, how, and with which environment. [`GitProgram::default`] is `git`
/// looked up on this process's `PATH`; the engine builds its own with [`GitProgram::with_parts`]
/// from its spawner and its environment setting.
#[derive(Debug, Clone)]
pub struct GitProgram {
    program: PathBuf,
    spawner: Arc<dyn ProviderSpawn>,
    /// `PATH` and `HOME` from the ambient environment: git needs no more.
    env: Vec<(OsString, OsString)>,
}

impl Default for GitProgram {
    fn default() -> Self {
        GitProgram::new("git")
    }
}

/// The repository state before a run: compare it with a later one through
/// [`GitSnapshot::changes_since`].
#[derive(Debug, Clone)]
pub struct GitSnapshot {
    git: GitProgram,
    root: PathBuf,
    head: Option<String>,
    entries: BTreeMap<PathBuf, Entry>,
}

/// One path `git status` reported.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    /// The porcelain `XY` code.
    code: [u8; 2],
    /// The old name of a rename: gone from the index, reported only through its new name.
    rename_source: bool,
    /// What is on disk.
    fingerprint: Fingerprint,
}

impl Entry {
    /// Whether the status says the path is new relative to `HEAD` (untracked, added, the new
    /// name of a rename or copy).
    fn new_by_status(&self) -> bool {
        !self.rename_source
            && (self.code == *b"??" || self.code.iter().any(|c| matches!(c, b'A' | b'R' | b'C')))
    }
}

/// What is on disk at a path.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Fingerprint {
    /// Nothing is there.
    Missing,
    /// A regular file.
    File {
        size: u64,
        mtime_ns: i128,
        mode: u32,
        /// The content hash, for files up to [`HASH_LIMIT`] that could be read.
        hash: Option<u64>,
        /// The ctime, only for files without a hash.
        ctime_ns: Option<i128>,
    },
    /// A symbolic link (never followed).
    Symlink {
        target: Option<PathBuf>,
        mtime_ns: i128,
    },
    /// A directory: a submodule or a nested repository.
    Dir { mtime_ns: i128, mode: u32 },
    /// A FIFO, socket or device.
    Other { mtime_ns: i128, mode: u32 },
    /// `lstat` failed for another reason than absence.
    Unreadable(io::ErrorKind),
}

impl Fingerprint {
    fn exists(&self) -> bool {
        !matches!(self, Fingerprint::Missing)
    }
}

/// Notes the state of the git repository containing `cwd`, with the default [`GitProgram`].
/// See [`GitProgram::snapshot`].
pub async fn git_snapshot(
    cwd: &Path,
    timeout: Duration,
) -> Result<Option<GitSnapshot>, GitCheckError> {
    GitProgram::default().snapshot(cwd, timeout).await
}

/// The changes outside every `allowed` directory: the strays a run must answer for.
///
/// Paths are compared component by component (`/repo/a` does not contain `/repo/ab`), and each
/// allowed directory is tried both as given and with symlinks resolved, since change paths carry
/// the root as git reports it (resolved). `allowed` entries must be absolute; a relative one
/// allows nothing.
pub fn strays(changes: &[Change], allowed: &[PathBuf]) -> Vec<Change> {
    let mut roots: Vec<PathBuf> = Vec::new();
    for dir in allowed.iter().filter(|d| d.is_absolute()) {
        roots.push(dir.clone());
        if let Ok(real) = std::fs::canonicalize(dir)
            && real != *dir
        {
            roots.push(real);
        }
    }
    changes
        .iter()
        .filter(|c| !roots.iter().any(|root| c.path.starts_with(root)))
        .cloned()
        .collect()
}

impl GitProgram {
    /// Runs `program` as git (a path, or a name looked up on `PATH`) through [`TokioSpawner`],
    /// with `PATH` and `HOME` from this process's environment.
    pub fn new(program: impl Into<PathBuf>) -> Self {
        GitProgram::with_parts(program, Arc::new(TokioSpawner), process_env())
    }

    /// Runs `program` as git through `spawner`, with `PATH` and `HOME` taken from `ambient`.
    pub fn with_parts(
        program: impl Into<PathBuf>,
        spawner: Arc<dyn ProviderSpawn>,
        ambient: Vec<(String, String)>,
    ) -> Self {
        GitProgram {
            program: program.into(),
            spawner,
            env: corral_process::host_env(ambient),
        }
    }

    /// The program this runs.
    pub fn program(&self) -> &Path {
        &self.program
    }

    /// Notes the state of the git repository containing `cwd`: `Ok(None)` when `cwd` is not
    /// inside a git work tree (outside any repository, inside a `.git` directory or a bare
    /// repository). A missing git is an error ([`GitCheckError::GitMissing`]), not `None`: a
    /// caller that refuses dirty trees must not mistake it for "no repository"; one that treats
    /// the check as best effort can match the variant and skip.
    ///
    /// `timeout` bounds the whole snapshot (three git commands and reading the dirty files).
    pub async fn snapshot(
        &self,
        cwd: &Path,
        timeout: Duration,
    ) -> Result<Option<GitSnapshot>, GitCheckError> {
        let budget = Budget::new(timeout);
        match tokio::fs::metadata(cwd).await {
            Ok(meta) if meta.is_dir() => {}
            Ok(_) => {
                return Err(GitCheckError::Directory {
                    path: cwd.to_path_buf(),
                    source: io::Error::from(io::ErrorKind::NotADirectory),
                });
            }
            Err(source) => {
                return Err(GitCheckError::Directory {
                    path: cwd.to_path_buf(),
                    source,
                });
            }
        }
        self.take(cwd, &budget).await
    }

    async fn take(
        &self,
        cwd: &Path,
        budget: &Budget,
    ) -> Result<Option<GitSnapshot>, GitCheckError> {
        // One process for both: the work tree's top, then HEAD's id (exit 1 and no id on an
        // unborn branch). Each git process is some 4 ms of every run's start and end.
        let top = self
            .run(
                cwd,
                &["rev-parse", "--show-toplevel", "--verify", "-q", "HEAD"],
                budget,
            )
            .await?;
        let born = match top.exit.code {
            Some(0) => true,
            Some(1) => false,
            Some(_) | None => {
                let outside = top.stderr.contains("not a git repository")
                    || top.stderr.contains("must be run in a work tree");
                return if outside && top.exit.code == Some(128) {
                    Ok(None)
                } else {
                    Err(top.failed())
                };
            }
        };
        let (root, head) =
            parse_top_and_head(&top.stdout, born).ok_or_else(|| GitCheckError::Malformed {
                command: top.command.clone(),
                detail: "no absolute path, or no commit id after it".to_owned(),
            })?;

        let filters = self.filter_overrides(&root, budget).await?;
        let status = self
            .run_with(
                &root,
                &[
                    "status",
                    "--porcelain=v1",
                    "-z",
                    "--untracked-files=all",
                    "--ignored=no",
                    "--ignore-submodules=dirty",
                ],
                budget,
                &filters,
            )
            .await?;
        if !status.exit.success() {
            return Err(status.failed());
        }
        let records =
            parse_porcelain(&status.stdout).map_err(|detail| GitCheckError::Malformed {
                command: status.command.clone(),
                detail,
            })?;

        // The old name of a rename is gone from the index (and usually from disk); it is kept
        // as its own entry unless git reported the path by itself too.
        let mut codes: BTreeMap<PathBuf, ([u8; 2], bool)> = BTreeMap::new();
        for record in &records {
            codes.insert(record.path.clone(), (record.code, false));
        }
        for record in &records {
            if let Some(orig) = &record.orig
                && record.code.contains(&b'R')
            {
                codes.entry(orig.clone()).or_insert((record.code, true));
            }
        }
        let paths: Vec<PathBuf> = codes.keys().cloned().collect();
        let prints = fingerprint_all(&root, paths, budget, &status.command).await?;
        let entries = codes
            .into_iter()
            .zip(prints)
            .map(|((path, (code, rename_source)), fingerprint)| {
                (
                    path,
                    Entry {
                        code,
                        rename_source,
                        fingerprint,
                    },
                )
            })
            .collect();
        Ok(Some(GitSnapshot {
            git: self.clone(),
            root,
            head,
            entries,
        }))
    }

    /// The overrides that empty every filter and merge driver the repository's configuration
    /// defines (see the module documentation).
    async fn filter_overrides(
        &self,
        root: &Path,
        budget: &Budget,
    ) -> Result<Vec<(String, String)>, GitCheckError> {
        let listed = self.run(root, DRIVER_LISTING, budget).await?;
        // Exit code 1: no such key.
        if !matches!(listed.exit.code, Some(0 | 1)) {
            return Err(listed.failed());
        }
        Ok(driver_overrides(&listed.stdout))
    }

    /// Runs `git -C dir <args>` under the budget with [`NEUTRAL_CONFIG`]; the process group is
    /// killed on timeout.
    async fn run(
        &self,
        dir: &Path,
        args: &[&str],
        budget: &Budget,
    ) -> Result<GitOutput, GitCheckError> {
        self.run_with(dir, args, budget, &[]).await
    }

    /// [`GitProgram::run`] with `extra` configuration on top of [`NEUTRAL_CONFIG`].
    async fn run_with(
        &self,
        dir: &Path,
        args: &[&str],
        budget: &Budget,
        extra: &[(String, String)],
    ) -> Result<GitOutput, GitCheckError> {
        let command = format!("git {}", args.join(" "));
        let mut argv: Vec<OsString> = vec!["--no-pager".into(), "-C".into(), dir.into()];
        argv.extend(args.iter().map(OsString::from));
        let env = neutral_env(self.env.clone(), extra);
        let request = SpawnRequest {
            program: self.program.clone(),
            args: argv,
            env,
            cwd: dir.to_path_buf(),
            stdin: StdinMode::Null,
            parent_death_signal: true,
            inherit_fds: Vec::new(),
            output: corral_process::spawn::ChildOutputs::Pipes,
            pre_exec: Vec::new(),
        };
        let bounded = BoundedCommand {
            stdout_limit: STDOUT_LIMIT,
            stderr_limit: STDERR_KEEP,
            ..BoundedCommand::limited(request, budget.left())
        };
        let output = match run_bounded(self.spawner.as_ref(), &bounded).await {
            Ok(output) => output,
            Err(BoundedError::Spawn { source, .. }) if source.kind() == io::ErrorKind::NotFound => {
                return Err(GitCheckError::GitMissing {
                    program: self.program.clone(),
                });
            }
            Err(BoundedError::Spawn { source, .. }) => {
                return Err(GitCheckError::Spawn {
                    program: self.program.clone(),
                    source,
                });
            }
            Err(BoundedError::Read { stream, source, .. }) => {
                return Err(GitCheckError::Io {
                    context: if stream == "stdout" {
                        "reading git's output"
                    } else {
                        "reading git's error output"
                    },
                    source,
                });
            }
            Err(BoundedError::Wait { source, .. }) => {
                return Err(GitCheckError::Io {
                    context: "waiting for git",
                    source,
                });
            }
        };
        let exit = match output.end {
            BoundedEnd::Exited(exit) => exit,
            BoundedEnd::TimedOut => return Err(budget.timed_out(command)),
        };
        if output.stdout.truncated() {
            return Err(GitCheckError::OutputTooLarge {
                command,
                limit: STDOUT_LIMIT,
            });
        }
        let stdout = output.stdout.bytes;
        let stderr = output.stderr.bytes;
        Ok(GitOutput {
            command,
            exit,
            stdout,
            stderr: String::from_utf8_lossy(&stderr).trim().to_owned(),
        })
    }
}

impl GitSnapshot {
    /// The repository's root as git reports it (symlinks resolved).
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The `HEAD` commit, `None` before the first commit.
    pub fn head(&self) -> Option<&str> {
        self.head.as_deref()
    }

    /// Every path that was dirty (modified, staged, deleted, renamed — both names — or
    /// untracked and not ignored), absolute and sorted: what a refusal to start on a dirty tree
    /// names.
    pub fn dirty_paths(&self) -> Vec<PathBuf> {
        self.entries.keys().map(|p| self.root.join(p)).collect()
    }

    /// Whether nothing was dirty.
    pub fn is_clean(&self) -> bool {
        self.entries.is_empty()
    }

    /// Takes the snapshot again and lists every path that changed since this one, sorted by
    /// path. `timeout` bounds the whole comparison.
    ///
    /// When the repository root is gone, the root itself is reported deleted; when it is no
    /// longer a repository of its own (its `.git` removed), `<root>/.git` is.
    pub async fn changes_since(&self, timeout: Duration) -> Result<Vec<Change>, GitCheckError> {
        let budget = Budget::new(timeout);
        match tokio::fs::symlink_metadata(&self.root).await {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Ok(vec![Change {
                    path: self.root.clone(),
                    kind: ChangeKind::Deleted,
                }]);
            }
            Err(source) => {
                return Err(GitCheckError::Directory {
                    path: self.root.clone(),
                    source,
                });
            }
        }
        let now = match self.git.take(&self.root, &budget).await? {
            Some(now) if now.root == self.root => now,
            Some(_) | None => {
                return Ok(vec![Change {
                    path: self.root.join(".git"),
                    kind: ChangeKind::Deleted,
                }]);
            }
        };

        let mut changes: BTreeMap<PathBuf, ChangeKind> = BTreeMap::new();
        // Dirty at both ends, or only after the run.
        for (path, after) in &now.entries {
            match self.entries.get(path) {
                Some(before) => {
                    if before.code != after.code || before.fingerprint != after.fingerprint {
                        changes.insert(
                            path.clone(),
                            transition(before.fingerprint.exists(), after.fingerprint.exists()),
                        );
                    }
                }
                None => {
                    // Clean before: it matched HEAD, so it existed unless the status says new.
                    changes.insert(
                        path.clone(),
                        transition(!after.new_by_status(), after.fingerprint.exists()),
                    );
                }
            }
        }
        // Dirty before and clean now: reverted, committed, or removed.
        let cleaned: Vec<PathBuf> = self
            .entries
            .keys()
            .filter(|p| !now.entries.contains_key(*p))
            .cloned()
            .collect();
        let prints = fingerprint_all(&self.root, cleaned.clone(), &budget, "reading files").await?;
        for (path, print) in cleaned.into_iter().zip(prints) {
            let before = self.entries.get(&path).map(|e| e.fingerprint.exists());
            changes.insert(path, transition(before.unwrap_or(true), print.exists()));
        }
        // Clean at both ends but different between the commits HEAD moved across.
        for (path, kind) in self.moved_paths(&now, &budget).await? {
            if !self.entries.contains_key(&path) && !now.entries.contains_key(&path) {
                changes.entry(path).or_insert(kind);
            }
        }
        Ok(changes
            .into_iter()
            .map(|(path, kind)| Change {
                path: self.root.join(path),
                kind,
            })
            .collect())
    }

    /// The paths that differ between this snapshot's `HEAD` and `now`'s.
    async fn moved_paths(
        &self,
        now: &GitSnapshot,
        budget: &Budget,
    ) -> Result<Vec<(PathBuf, ChangeKind)>, GitCheckError> {
        let (args, all_as): (Vec<&str>, Option<ChangeKind>) = match (&self.head, &now.head) {
            (Some(old), Some(new)) if old == new => return Ok(Vec::new()),
            (None, None) => return Ok(Vec::new()),
            (Some(old), Some(new)) => (
                vec![
                    "diff-tree",
                    "-r",
                    "-z",
                    "--no-renames",
                    "--name-status",
                    old,
                    new,
                ],
                None,
            ),
            // The first commit: everything in it is new.
            (None, Some(new)) => (
                vec!["ls-tree", "-r", "-z", "--name-only", new],
                Some(ChangeKind::Added),
            ),
            // HEAD became unborn (an orphan branch): everything committed before is gone.
            (Some(old), None) => (
                vec!["ls-tree", "-r", "-z", "--name-only", old],
                Some(ChangeKind::Deleted),
            ),
        };
        let out = self.git.run(&self.root, &args, budget).await?;
        if !out.exit.success() {
            return Err(out.failed());
        }
        let parsed = match all_as {
            Some(kind) => parse_names(&out.stdout)
                .map(|paths| paths.into_iter().map(|p| (p, kind)).collect::<Vec<_>>()),
            None => parse_name_status(&out.stdout),
        };
        parsed.map_err(|detail| GitCheckError::Malformed {
            command: out.command,
            detail,
        })
    }
}

/// The kind of change from whether the path existed before and exists now. A difference with
/// nothing on disk at either end (a deletion staged or committed) is a change of git state.
fn transition(before: bool, after: bool) -> ChangeKind {
    match (before, after) {
        (false, true) => ChangeKind::Added,
        (true, false) => ChangeKind::Deleted,
        (true, true) | (false, false) => ChangeKind::Modified,
    }
}

/// The deadline of one check and the timeout it came from.
#[derive(Debug)]
struct Budget {
    deadline: Instant,
    timeout: Duration,
}

impl Budget {
    fn new(timeout: Duration) -> Self {
        let now = Instant::now();
        // A timeout too large to add is as good as none: about a century.
        let deadline = now
            .checked_add(timeout)
            .or_else(|| now.checked_add(Duration::from_secs(100 * 365 * 24 * 3600)))
            .unwrap_or(now);
        Budget { deadline, timeout }
    }

    /// The time left until the deadline.
    fn left(&self) -> Duration {
        self.deadline.saturating_duration_since(Instant::now())
    }

    fn timed_out(&self, command: String) -> GitCheckError {
        GitCheckError::TimedOut {
            command,
            timeout: self.timeout,
        }
    }
}

/// What one git command printed.
#[derive(Debug)]
struct GitOutput {
    command: String,
    exit: ExitInfo,
    stdout: Vec<u8>,
    stderr: String,
}

impl GitOutput {
    fn failed(self) -> GitCheckError {
        GitCheckError::Failed {
            command: self.command,
            exit: self.exit,
            stderr: self.stderr,
        }
    }
}

/// The root from `rev-parse --show-toplevel` output: the path and one newline.
fn parse_toplevel(out: &[u8]) -> Option<PathBuf> {
    let line = out.strip_suffix(b"\n").unwrap_or(out);
    let path = PathBuf::from(OsStr::from_bytes(line));
    path.is_absolute().then_some(path)
}

/// The output of `git rev-parse --show-toplevel --verify -q HEAD`: the top (which may hold a
/// newline), then, when `born`, HEAD's id on the last line.
fn parse_top_and_head(out: &[u8], born: bool) -> Option<(PathBuf, Option<String>)> {
    if !born {
        return Some((parse_toplevel(out)?, None));
    }
    let text = out.strip_suffix(b"\n").unwrap_or(out);
    let split = text.iter().rposition(|&b| b == b'\n')?;
    let (top, id) = (&text[..split], &text[split + 1..]);
    let id = std::str::from_utf8(id).ok()?;
    let hex = matches!(id.len(), 40 | 64) && id.bytes().all(|b| b.is_ascii_hexdigit());
    hex.then(|| Some((parse_toplevel(top)?, Some(id.to_owned()))))?
}

/// One record of `git status --porcelain=v1 -z`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct StatusRecord {
    code: [u8; 2],
    path: PathBuf,
    /// The old name, for renames and copies.
    orig: Option<PathBuf>,
}

/// A repository-relative path from git's bytes; a nested repository's trailing `/` is dropped.
/// Anything absolute or climbing out with `..` is refused.
fn repo_path(bytes: &[u8]) -> Result<PathBuf, String> {
    let trimmed = bytes.strip_suffix(b"/").unwrap_or(bytes);
    let path = PathBuf::from(OsStr::from_bytes(trimmed));
    let plain = !trimmed.is_empty()
        && path.components().all(|c| match c {
            Component::Normal(_) | Component::CurDir => true,
            Component::RootDir | Component::Prefix(_) | Component::ParentDir => false,
        });
    if plain {
        Ok(path)
    } else {
        Err(format!(
            "not a path inside the repository: {:?}",
            String::from_utf8_lossy(bytes)
        ))
    }
}

/// Splits NUL-terminated fields; the last terminator is optional.
fn nul_fields(out: &[u8]) -> impl Iterator<Item = &[u8]> {
    let body = out.strip_suffix(b"\0").unwrap_or(out);
    body.split(|b| *b == 0).filter(move |_| !body.is_empty())
}

/// Parses `git status --porcelain=v1 -z`: `XY path\0`, and for a rename or copy
/// `XY new\0old\0`. Paths are raw bytes (spaces, newlines, any encoding).
fn parse_porcelain(out: &[u8]) -> Result<Vec<StatusRecord>, String> {
    let mut fields = nul_fields(out);
    let mut records = Vec::new();
    while let Some(field) = fields.next() {
        let [x, y, b' ', path @ ..] = field else {
            return Err(format!(
                "bad status record {:?}",
                String::from_utf8_lossy(field)
            ));
        };
        let code = [*x, *y];
        let path = repo_path(path)?;
        let orig = if code.iter().any(|c| matches!(c, b'R' | b'C')) {
            let old = fields
                .next()
                .ok_or_else(|| format!("rename of {} without its old name", path.display()))?;
            Some(repo_path(old)?)
        } else {
            None
        };
        records.push(StatusRecord { code, path, orig });
    }
    Ok(records)
}

/// Parses `git diff-tree --name-status -z`: `S\0path\0` pairs.
fn parse_name_status(out: &[u8]) -> Result<Vec<(PathBuf, ChangeKind)>, String> {
    let mut fields = nul_fields(out);
    let mut changes = Vec::new();
    while let Some(status) = fields.next() {
        let kind = match status.first() {
            Some(b'A') => ChangeKind::Added,
            Some(b'D') => ChangeKind::Deleted,
            Some(_) => ChangeKind::Modified,
            None => return Err("empty status".to_owned()),
        };
        let path = fields
            .next()
            .ok_or_else(|| "status without a path".to_owned())?;
        changes.push((repo_path(path)?, kind));
    }
    Ok(changes)
}

/// Parses `git ls-tree --name-only -z`: `path\0` each.
fn parse_names(out: &[u8]) -> Result<Vec<PathBuf>, String> {
    nul_fields(out).map(repo_path).collect()
}

/// Fingerprints `paths` under `root` on a blocking thread, within the budget.
async fn fingerprint_all(
    root: &Path,
    paths: Vec<PathBuf>,
    budget: &Budget,
    command: &str,
) -> Result<Vec<Fingerprint>, GitCheckError> {
    if paths.is_empty() {
        return Ok(Vec::new());
    }
    let root = root.to_path_buf();
    let deadline = budget.deadline.into_std();
    let work = tokio::task::spawn_blocking(move || {
        let mut prints = Vec::with_capacity(paths.len());
        for path in paths {
            if std::time::Instant::now() >= deadline {
                return None;
            }
            prints.push(fingerprint(&root.join(path)));
        }
        Some(prints)
    });
    let timed_out = || budget.timed_out(format!("{command} (fingerprinting files)"));
    match tokio::time::timeout_at(budget.deadline, work).await {
        Ok(Ok(Some(prints))) => Ok(prints),
        Ok(Ok(None)) | Err(_) => Err(timed_out()),
        Ok(Err(join)) => Err(GitCheckError::Io {
            context: "fingerprinting files",
            source: io::Error::other(join.to_string()),
        }),
    }
}

/// What is at `path` now, symlinks not followed.
fn fingerprint(path: &Path) -> Fingerprint {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
            ) =>
        {
            return Fingerprint::Missing;
        }
        Err(e) => return Fingerprint::Unreadable(e.kind()),
    };
    let mtime_ns = i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec());
    let file_type = meta.file_type();
    if file_type.is_file() {
        let size = meta.len();
        let hash = if size <= HASH_LIMIT {
            hash_file(path)
        } else {
            None
        };
        Fingerprint::File {
            size,
            mtime_ns,
            mode: meta.mode(),
            hash,
            ctime_ns: hash
                .is_none()
                .then(|| i128::from(meta.ctime()) * 1_000_000_000 + i128::from(meta.ctime_nsec())),
        }
    } else if file_type.is_symlink() {
        Fingerprint::Symlink {
            target: std::fs::read_link(path).ok(),
            mtime_ns,
        }
    } else if file_type.is_dir() {
        Fingerprint::Dir {
            mtime_ns,
            mode: meta.mode(),
        }
    } else {
        Fingerprint::Other {
            mtime_ns,
            mode: meta.mode(),
        }
    }
}

/// A hash of the file's content, `None` when it cannot be read or grew past [`HASH_LIMIT`].
/// `DefaultHasher` is not stable across Rust releases; snapshots live in one process only.
fn hash_file(path: &Path) -> Option<u64> {
    // Non-blocking open: a FIFO swapped in since the `lstat` must not hang the check.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .ok()?;
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    let mut content = Vec::new();
    file.take(HASH_LIMIT + 1).read_to_end(&mut content).ok()?;
    if u64::try_from(content.len()).ok()? > HASH_LIMIT {
        return None;
    }
    let mut hasher = DefaultHasher::new();
    hasher.write(&content);
    Some(hasher.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(code: &[u8; 2], path: &str, orig: Option<&str>) -> StatusRecord {
        StatusRecord {
            code: *code,
            path: PathBuf::from(path),
            orig: orig.map(PathBuf::from),
        }
    }

    #[test]
    fn porcelain_records_with_renames_spaces_and_newlines() {
        let out = b"R  q\0sub/x y\nz\0?? u\0 M a b\0UU conflict\0?? nested/\0 D gone\0";
        let records = parse_porcelain(out).unwrap();
        assert_eq!(
            records,
            vec![
                record(b"R ", "q", Some("sub/x y\nz")),
                record(b"??", "u", None),
                record(b" M", "a b", None),
                record(b"UU", "conflict", None),
                record(b"??", "nested", None),
                record(b" D", "gone", None),
            ]
        );
    }

    #[test]
    fn porcelain_worktree_rename_and_copy_take_the_old_name() {
        let records = parse_porcelain(b" R new\0old\0C  copy\0src\0").unwrap();
        assert_eq!(
            records,
            vec![
                record(b" R", "new", Some("old")),
                record(b"C ", "copy", Some("src")),
            ]
        );
    }

    #[test]
    fn porcelain_empty_and_unterminated() {
        assert!(parse_porcelain(b"").unwrap().is_empty());
        assert_eq!(
            parse_porcelain(b" M a").unwrap(),
            vec![record(b" M", "a", None)]
        );
    }

    #[test]
    fn porcelain_rejects_malformed_records() {
        assert!(parse_porcelain(b"M\0").is_err());
        assert!(parse_porcelain(b" M \0").is_err());
        assert!(parse_porcelain(b"R  new\0").is_err());
        assert!(parse_porcelain(b" M /etc/passwd\0").is_err());
        assert!(parse_porcelain(b" M ../up\0").is_err());
        assert!(parse_porcelain(b" M a\0\0 M b\0").is_err());
    }

    #[test]
    fn name_status_pairs() {
        let parsed = parse_name_status(b"M\0a\0A\0b c\0D\0d\nx\0T\0link\0").unwrap();
        assert_eq!(
            parsed,
            vec![
                (PathBuf::from("a"), ChangeKind::Modified),
                (PathBuf::from("b c"), ChangeKind::Added),
                (PathBuf::from("d\nx"), ChangeKind::Deleted),
                (PathBuf::from("link"), ChangeKind::Modified),
            ]
        );
        assert!(parse_name_status(b"M\0").is_err());
        assert_eq!(
            parse_names(b"a\0b/c\0").unwrap(),
            vec![PathBuf::from("a"), PathBuf::from("b/c")]
        );
    }

    #[test]
    fn toplevel_is_absolute_and_keeps_inner_newlines() {
        assert_eq!(parse_toplevel(b"/r/a\nb\n"), Some(PathBuf::from("/r/a\nb")));
        let id = "d69faeeb850adeb44b8eb71864c32550e30ffa65";
        assert_eq!(
            parse_top_and_head(format!("/r/a\nb\n{id}\n").as_bytes(), true),
            Some((PathBuf::from("/r/a\nb"), Some(id.to_owned())))
        );
        assert_eq!(
            parse_top_and_head(b"/r/a\n", false),
            Some((PathBuf::from("/r/a"), None))
        );
        assert_eq!(parse_top_and_head(b"/r/a\n", true), None);
        assert_eq!(parse_top_and_head(b"/r/a\nnot-an-id\n", true), None);
        assert_eq!(
            parse_top_and_head(format!("r\n{id}\n").as_bytes(), true),
            None
        );
        assert_eq!(parse_toplevel(b"relative\n"), None);
        assert_eq!(parse_toplevel(b""), None);
    }

    #[test]
    fn strays_compare_whole_components() {
        let change = |p: &str| Change {
            path: PathBuf::from(p),
            kind: ChangeKind::Modified,
        };
        let changes = vec![
            change("/nonexistent-repo/a/x"),
            change("/nonexistent-repo/ab/x"),
            change("/nonexistent-repo/a"),
            change("/nonexistent-repo/b"),
        ];
        let left = strays(
            &changes,
            &[
                PathBuf::from("/nonexistent-repo/a/"),
                PathBuf::from("relative"),
            ],
        );
        assert_eq!(
            left,
            vec![
                change("/nonexistent-repo/ab/x"),
                change("/nonexistent-repo/b")
            ]
        );
        assert_eq!(strays(&changes, &[]), changes);
    }

    #[test]
    fn transitions_name_the_kind() {
        assert_eq!(transition(false, true), ChangeKind::Added);
        assert_eq!(transition(true, false), ChangeKind::Deleted);
        assert_eq!(transition(true, true), ChangeKind::Modified);
        assert_eq!(transition(false, false), ChangeKind::Modified);
    }

    #[test]
    fn new_by_status_codes() {
        let entry = |code: &[u8; 2], rename_source| Entry {
            code: *code,
            rename_source,
            fingerprint: Fingerprint::Missing,
        };
        assert!(entry(b"??", false).new_by_status());
        assert!(entry(b"A ", false).new_by_status());
        assert!(entry(b" A", false).new_by_status());
        assert!(entry(b"R ", false).new_by_status());
        assert!(!entry(b"R ", true).new_by_status());
        assert!(!entry(b" M", false).new_by_status());
        assert!(!entry(b"D ", false).new_by_status());
    }

    #[test]
    fn fingerprint_sees_same_size_rewrite_with_old_mtime() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, b"aaaa").unwrap();
        let before = fingerprint(&path);
        let mtime = std::fs::metadata(&path).unwrap().modified().unwrap();
        std::fs::write(&path, b"bbbb").unwrap();
        std::fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(mtime)
            .unwrap();
        let after = fingerprint(&path);
        assert_ne!(before, after);
        assert_eq!(after, fingerprint(&path));
        assert_eq!(fingerprint(&dir.path().join("none")), Fingerprint::Missing);
        assert_eq!(
            fingerprint(&path.join("under-a-file")),
            Fingerprint::Missing
        );
    }

    #[test]
    fn retryable_errors() {
        let timed_out = GitCheckError::TimedOut {
            command: "git status".into(),
            timeout: Duration::from_secs(1),
        };
        assert!(timed_out.is_retryable());
        assert!(timed_out.to_string().contains("1s"));
        let missing = GitCheckError::GitMissing {
            program: PathBuf::from("git"),
        };
        assert!(!missing.is_retryable());
    }
}
