//! The git the sprint needs, run through the command port ([`corral_ports::Confinement::HostGit`]): the
//! sprint never starts a process itself, and git runs with the repository's power to run
//! programs taken away, because the agent could have written the repository's configuration.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use corral_ports::{CancellationToken, CommandOutput, CommandRunner, CommandSpec};

/// Enough for any git command the sprint runs on a work tree of ordinary size.
const GIT_TIMEOUT: Duration = Duration::from_secs(120);
/// Kept of a diff; a larger one is cut (the evaluator is told, and the patch file is whole).
const DIFF_LIMIT: usize = 4 * 1024 * 1024;

/// git subcommands that leave the work tree's files alone (reading, or a commit of the index as
/// it is), so that what [`Known::staged`] says still holds after them.
const KEEP_STAGED: &[&str] = &[
    "diff",
    "log",
    "ls-files",
    "rev-parse",
    "symbolic-ref",
    "merge-base",
    "commit",
];

/// Variables for the diffs the evaluator reads: no system attributes, and no attributes file
/// of the user's (the engine's host git sets the same; a runner that does not still gets them).
const NO_ATTRIBUTES: &[(&str, &str)] = &[
    ("GIT_ATTR_NOSYSTEM", "1"),
    ("GIT_CONFIG_COUNT", "1"),
    ("GIT_CONFIG_KEY_0", "core.attributesFile"),
    ("GIT_CONFIG_VALUE_0", "/dev/null"),
];

/// Why a git command gave no usable answer.
#[derive(Debug, thiserror::Error)]
pub enum GitError {
    /// The command could not be run. Retryable: as the port's error says.
    #[error("git {args}: {source}")]
    Run {
        /// The arguments, joined.
        args: String,
        /// The port's error.
        source: corral_ports::CommandError,
    },
    /// It ran and failed. Retryable: no, not as the repository stands.
    #[error("git {args}: {end:?}: {stderr}")]
    Failed {
        /// The arguments, joined.
        args: String,
        /// How it ended.
        end: corral_ports::CommandEnd,
        /// Its stderr, trimmed.
        stderr: String,
    },
}

/// Git in one work tree.
pub(crate) struct Git<'a> {
    pub(crate) runner: &'a dyn CommandRunner,
    pub(crate) cwd: PathBuf,
    pub(crate) cancel: &'a CancellationToken,
    /// Variables for every git command (the committer's identity).
    pub(crate) env: Vec<(String, String)>,
    /// What the flow knows of the repository without asking git again.
    pub(crate) known: Known,
}

/// Facts about the repository that hold until the next git command or the next program that
/// could touch the tree ([`Git::forget`]): each saves a git process where the flow already
/// knows the answer.
#[derive(Debug, Default)]
pub(crate) struct Known {
    /// `HEAD`'s commit, read by [`Git::commit`] as its last command: the next task's base.
    head: Mutex<Option<String>>,
    /// Every file of the tree that is not ignored is in the index (`git add --all` ran, and
    /// nothing since but git commands that keep it so): a commit needs no staging first, and a
    /// `reset --hard` leaves no untracked file for `git clean` to remove.
    staged: AtomicBool,
    /// The tree passed the check (a sprint without gates), with this report: set after a
    /// passing check, kept through the git commands that write no file of the tree (staging,
    /// the diff, the commit), so that the next task's pre-verify, on the tree just committed,
    /// is that check's result instead of a second run on the same files.
    checked: Mutex<Option<String>>,
}

impl Git<'_> {
    pub(crate) async fn output(
        &self,
        args: &[&str],
        limit: usize,
    ) -> Result<CommandOutput, GitError> {
        self.output_with(args, limit, &[]).await
    }

    /// [`Git::output`] with `extra` variables on top of the run's.
    async fn output_with(
        &self,
        args: &[&str],
        limit: usize,
        extra: &[(&str, &str)],
    ) -> Result<CommandOutput, GitError> {
        // Any command may move HEAD; the one that leaves it known says so afterwards. Only
        // the commands that write no file of the tree keep everything staged.
        self.known_head().take();
        let subcommand = args.first().copied().unwrap_or_default();
        if !KEEP_STAGED.contains(&subcommand) {
            self.known.staged.store(false, Ordering::SeqCst);
            // `add` writes the index only; anything else may write the tree's files.
            if subcommand != "add" {
                self.known_checked().take();
            }
        }
        let mut spec = CommandSpec::git(args.iter().copied(), &self.cwd, GIT_TIMEOUT);
        spec.output_limit = limit;
        spec.env.clone_from(&self.env);
        spec.env.extend(
            extra
                .iter()
                .map(|(k, v)| ((*k).to_string(), (*v).to_string())),
        );
        self.runner
            .run(spec, self.cancel)
            .await
            .map_err(|source| GitError::Run {
                args: args.join(" "),
                source,
            })
    }

    /// Forgets what [`Known`] holds: called before anything that could touch the tree or the
    /// repository (a spawn, the check) runs.
    pub(crate) fn forget(&self) {
        self.known_head().take();
        self.known.staged.store(false, Ordering::SeqCst);
        self.known_checked().take();
    }

    fn known_checked(&self) -> std::sync::MutexGuard<'_, Option<String>> {
        self.known
            .checked
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Records that the tree, as it is, passed the check with `report` (see [`Known`]).
    pub(crate) fn checked(&self, report: String) {
        *self.known_checked() = Some(report);
    }

    /// The report of the check the tree passed as it is, when nothing that could write its
    /// files ran since; taken (it stands for one pre-verify).
    pub(crate) fn take_checked(&self) -> Option<String> {
        self.known_checked().take()
    }

    fn known_head(&self) -> std::sync::MutexGuard<'_, Option<String>> {
        self.known
            .head
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// `HEAD`'s commit: the one [`Git::commit`] made when nothing ran since, else asked of git.
    pub(crate) async fn current_head(&self) -> Result<String, GitError> {
        let known = self.known_head().take();
        match known {
            Some(head) => Ok(head),
            None => self.head().await,
        }
    }

    /// Whether every file of the tree that is not ignored is in the index (see [`Known`]).
    pub(crate) fn staged(&self) -> bool {
        self.known.staged.load(Ordering::SeqCst)
    }

    /// Runs `git args`; its stdout when it exits 0.
    pub(crate) async fn run(&self, args: &[&str]) -> Result<String, GitError> {
        self.run_limited(args, corral_ports::DEFAULT_OUTPUT_LIMIT)
            .await
    }

    pub(crate) async fn run_limited(
        &self,
        args: &[&str],
        limit: usize,
    ) -> Result<String, GitError> {
        let out = self.output(args, limit).await?;
        finished(args, Ok(out))
    }

    /// Whether `git args` exits 0.
    pub(crate) async fn succeeds(&self, args: &[&str]) -> Result<bool, GitError> {
        Ok(self.output(args, 4096).await?.success())
    }

    /// The work tree's top directory.
    pub(crate) async fn top(&self) -> Result<PathBuf, GitError> {
        Ok(PathBuf::from(
            self.run(&["rev-parse", "--show-toplevel"]).await?.trim(),
        ))
    }

    /// `HEAD`'s commit.
    pub(crate) async fn head(&self) -> Result<String, GitError> {
        Ok(self.run(&["rev-parse", "HEAD"]).await?.trim().to_string())
    }

    /// The branch checked out (`None` on a detached `HEAD`) and `HEAD`'s commit, in one
    /// command.
    pub(crate) async fn branch_and_head(&self) -> Result<(Option<String>, String), GitError> {
        // The mode flag applies to the arguments after it: the commit, then the ref's full
        // name, which is `HEAD` itself when it is detached (no branch may be called `HEAD`).
        let out = self
            .run(&["rev-parse", "HEAD", "--symbolic-full-name", "HEAD"])
            .await?;
        let mut lines = out.lines().map(str::trim);
        let head = lines.next().unwrap_or_default().to_string();
        let branch = match lines.next() {
            None | Some("HEAD" | "") => None,
            Some(name) => Some(name.strip_prefix("refs/heads/").unwrap_or(name).to_string()),
        };
        Ok((branch, head))
    }

    /// The branch checked out, `None` on a detached `HEAD`.
    pub(crate) async fn branch(&self) -> Result<Option<String>, GitError> {
        let out = self
            .output(&["symbolic-ref", "--quiet", "--short", "HEAD"], 4096)
            .await?;
        Ok(out.success().then(|| out.stdout.text.trim().to_string()))
    }

    /// Whether branch `name` exists.
    pub(crate) async fn branch_exists(&self, name: &str) -> Result<bool, GitError> {
        let reference = format!("refs/heads/{name}");
        self.succeeds(&["rev-parse", "--verify", "--quiet", &reference])
            .await
    }

    /// The paths `git status` reports (tracked changes and untracked files; ignored paths,
    /// Corral's state among them, are not).
    pub(crate) async fn dirty_paths(&self) -> Result<Vec<String>, GitError> {
        let out = self
            .run(&["status", "--porcelain=v1", "-z", "--untracked-files=all"])
            .await?;
        let mut paths = Vec::new();
        let mut entries = out.split('\0').filter(|e| !e.is_empty());
        while let Some(entry) = entries.next() {
            let (code, path) = entry.split_at(entry.len().min(3));
            paths.push(path.to_string());
            // A rename or copy is followed by the path it came from.
            if code.starts_with('R') || code.starts_with('C') {
                entries.next();
            }
        }
        Ok(paths)
    }

    /// Stages every change of the tree (new files included; ignored ones not).
    pub(crate) async fn stage_all(&self) -> Result<(), GitError> {
        self.run(&["add", "--all"]).await?;
        self.known.staged.store(true, Ordering::SeqCst);
        Ok(())
    }

    /// The staged tree's diff against `base`, as a patch (binary files included), and the
    /// paths it touches.
    pub(crate) async fn diff_against(&self, base: &str) -> Result<(String, Vec<String>), GitError> {
        let patch = self.patch_against(base).await?;
        let names = self
            .run_limited(&["diff", "--cached", "--name-only", "-z", base], DIFF_LIMIT)
            .await?;
        let paths = names
            .split('\0')
            .filter(|p| !p.is_empty())
            .map(str::to_string)
            .collect();
        Ok((patch, paths))
    }

    /// Stages everything, then the patch from `base` to the index, without the list of paths
    /// (one git command fewer, where nothing needs the paths).
    ///
    /// The patch is what the evaluator judges, so the agent's own `.gitattributes` must not
    /// shape it: every file is diffed as text (`--text`: an attribute marking the agent's
    /// change `binary` or `-diff` would hide it behind "Binary files differ"), no textconv or
    /// external diff runs (which would show what a program of the agent's says instead), and
    /// neither the system's nor the user's attributes file is read. A patch past
    /// [`DIFF_LIMIT`] is cut, and the cut marked in the text, followed by every changed path.
    pub(crate) async fn patch_against(&self, base: &str) -> Result<String, GitError> {
        self.stage_all().await?;
        let args = [
            "diff",
            "--cached",
            "--binary",
            "--text",
            "--no-textconv",
            "--no-ext-diff",
            "--no-color",
            base,
        ];
        let out = self.output_with(&args, DIFF_LIMIT, NO_ATTRIBUTES).await?;
        let (truncated, total) = (out.stdout.truncated(), out.stdout.total_bytes);
        let mut patch = finished(&args, Ok(out))?;
        if truncated {
            let paths = self.changed_paths(base).await?;
            patch.push_str(&format!(
                "\n[diff cut at {} bytes of {total}; the full list of changed paths follows]\n{paths}",
                patch.len()
            ));
        }
        Ok(patch)
    }

    /// Every path the index changes against `base`, one a line as `<status>\t<path>`
    /// (`git diff --name-status`), control characters in a name shown escaped.
    pub(crate) async fn changed_paths(&self, base: &str) -> Result<String, GitError> {
        let args = [
            "diff",
            "--cached",
            "--name-status",
            "--no-renames",
            "-z",
            base,
        ];
        let out = self.output_with(&args, DIFF_LIMIT, NO_ATTRIBUTES).await?;
        let listed = finished(&args, Ok(out))?;
        let mut fields = listed.split('\0').filter(|f| !f.is_empty());
        let mut text = String::new();
        while let (Some(status), Some(path)) = (fields.next(), fields.next()) {
            let shown: String = path
                .chars()
                .flat_map(|c| {
                    if c.is_control() {
                        c.escape_default().collect::<Vec<_>>()
                    } else {
                        vec![c]
                    }
                })
                .collect();
            text.push_str(&format!("{status}\t{shown}\n"));
        }
        Ok(text)
    }

    /// Puts the tree and the index back to `base`, removing files that are not ignored.
    /// When everything was staged and nothing ran since ([`Git::staged`]), `reset --hard`
    /// removes the new files itself (they are in the index, not in `base`) and `git clean`
    /// is not run: it would find nothing but empty directories.
    pub(crate) async fn reset_to(&self, base: &str) -> Result<(), GitError> {
        let staged = self.staged();
        self.run(&["reset", "--hard", "--quiet", base]).await?;
        if !staged {
            self.run(&["clean", "-fd", "--quiet"]).await?;
        }
        // The index is the tree again, with no file left out of it.
        self.known.staged.store(true, Ordering::SeqCst);
        Ok(())
    }

    /// The commits after `base` whose `Corral-Task:` trailer is `task`, newest first.
    pub(crate) async fn commits_for_task(
        &self,
        base: &str,
        task: &str,
    ) -> Result<Vec<String>, GitError> {
        let range = format!("{base}..HEAD");
        let out = self
            .run(&[
                "log",
                "--format=%H %(trailers:key=Corral-Task,valueonly,separator=%x2C)%x1e",
                &range,
            ])
            .await?;
        Ok(out
            .split('\x1e')
            .filter_map(|record| record.trim().split_once(' '))
            .filter(|(_, tasks)| tasks.split(',').any(|t| t.trim() == task))
            .map(|(commit, _)| commit.to_string())
            .collect())
    }

    /// Commits what is staged with `message`, and returns the new commit.
    pub(crate) async fn commit(&self, message: &str, dir: &Path) -> Result<String, GitError> {
        // Through a file: a message is no argument (it could start with '-' or be long).
        let file = dir.join("commit-message.txt");
        std::fs::write(&file, message).map_err(|e| GitError::Run {
            args: "commit".to_string(),
            source: corral_ports::CommandError::Io {
                program: "git".to_string(),
                reason: format!("{}: {e}", file.display()),
            },
        })?;
        let file = file.to_string_lossy().into_owned();
        self.run(&[
            "commit",
            "--quiet",
            "--no-verify",
            "--allow-empty",
            "--file",
            &file,
        ])
        .await?;
        let head = self.head().await?;
        *self.known_head() = Some(head.clone());
        Ok(head)
    }
}

/// Writes the files of `tree_ish` below `path` into `into`, each at `into/<its path>`, byte for
/// byte: git writes them itself, where a capture of `git show` as text would mangle a
/// compressed stream (a record's `raw/*.gz`). Through an index of its own, removed
/// afterwards: the index and the work tree of the repository in `repo` are not touched.
/// Files already under `into` that `tree_ish` lacks stay.
///
/// # Errors
/// [`GitError`] when git cannot be run or the checkout fails (`tree_ish` or `path` unknown).
pub async fn extract_tree(
    runner: &dyn CommandRunner,
    repo: &Path,
    env: &[(String, String)],
    cancel: &CancellationToken,
    tree_ish: &str,
    path: &str,
    into: &Path,
) -> Result<(), GitError> {
    let index = into.join(format!(
        ".corral-extract-{}-{}.index",
        std::process::id(),
        EXTRACT_INDEX.fetch_add(1, Ordering::Relaxed)
    ));
    let io = |e: std::io::Error| GitError::Run {
        args: format!("checkout {tree_ish} -- {path}"),
        source: corral_ports::CommandError::Io {
            program: "git".to_string(),
            reason: format!("{}: {e}", into.display()),
        },
    };
    std::fs::create_dir_all(into).map_err(io)?;
    // Options before the subcommand are refused on the host: the repository, its work tree
    // and the index go through the environment, and the command runs in `into`.
    let ask = ["rev-parse", "--absolute-git-dir"];
    let mut spec = CommandSpec::git(ask, repo, GIT_TIMEOUT);
    spec.env = env.to_vec();
    let git_dir = finished(&ask, runner.run(spec, cancel).await)?;
    let args = ["checkout", tree_ish, "--", path];
    let mut spec = CommandSpec::git(args, into, GIT_TIMEOUT);
    spec.env = env.to_vec();
    spec.env.extend([
        ("GIT_DIR".to_string(), git_dir.trim().to_string()),
        ("GIT_WORK_TREE".to_string(), into.display().to_string()),
        ("GIT_INDEX_FILE".to_string(), index.display().to_string()),
        ("GIT_LITERAL_PATHSPECS".to_string(), "1".to_string()),
    ]);
    let out = runner.run(spec, cancel).await;
    // Its own, whatever happened: never left beside the files.
    let _ = std::fs::remove_file(&index);
    let _ = std::fs::remove_file(index.with_extension("index.lock"));
    finished(&args, out).map(drop)
}

/// A command's stdout when it ran and exited 0, else its error.
fn finished(
    args: &[&str],
    out: Result<CommandOutput, corral_ports::CommandError>,
) -> Result<String, GitError> {
    let out = out.map_err(|source| GitError::Run {
        args: args.join(" "),
        source,
    })?;
    if out.success() {
        Ok(out.stdout.text)
    } else {
        Err(GitError::Failed {
            args: args.join(" "),
            end: out.end,
            stderr: out.stderr.text.trim().to_string(),
        })
    }
}

/// Tells apart the index files of [`extract_tree`] calls made at once by one process.
static EXTRACT_INDEX: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
