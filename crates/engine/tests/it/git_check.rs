//! The git-cleanliness check against real temporary repositories: a snapshot before a "run",
//! file-system changes standing in for the agent, and the changes and strays found after it.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use corral_engine::{
    Change, ChangeKind, GitCheckError, GitProgram, GitSnapshot, git_snapshot, strays,
};
use corral_test_support::{kill_survivors, read_pids, wait_all_dead};

const TIMEOUT: Duration = Duration::from_secs(60);

/// Runs git for the fixture, with an identity and no hooks or signing, and checks it succeeded.
fn git(dir: &Path, args: &[&str]) {
    corral_test_support::git_ok(
        dir,
        &[
            "-c",
            "user.name=Corral Test",
            "-c",
            "user.email=test@corral.invalid",
            "-c",
            "commit.gpgsign=false",
            "-c",
            "init.defaultBranch=main",
            "-c",
            "core.hooksPath=/dev/null",
        ],
        args,
    );
}

/// A temporary repository at `<tmp>/repo` (symlinks resolved, as git reports it), with a
/// `.gitignore` for `.corral/` and three committed files.
struct Repo {
    _tmp: tempfile::TempDir,
    root: PathBuf,
}

impl Repo {
    fn new() -> Self {
        let repo = Self::empty();
        repo.write(".gitignore", ".corral/\n");
        repo.write("README", "readme\n");
        repo.write("src/lib.rs", "pub fn f() {}\n");
        repo.write("docs/a.md", "# a\n");
        repo.git(&["add", "-A"]);
        repo.git(&["commit", "-q", "-m", "init"]);
        repo
    }

    /// `git init` only: no commit yet.
    fn empty() -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap().join("repo");
        fs::create_dir(&root).unwrap();
        git(&root, &["init", "-q"]);
        Repo { _tmp: tmp, root }
    }

    fn git(&self, args: &[&str]) {
        git(&self.root, args);
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    fn write(&self, rel: &str, content: &str) {
        let path = self.path(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, content).unwrap();
    }

    async fn snapshot(&self) -> GitSnapshot {
        git_snapshot(&self.root, TIMEOUT)
            .await
            .unwrap()
            .expect("a repository")
    }

    fn change(&self, rel: &str, kind: ChangeKind) -> Change {
        Change {
            path: self.path(rel),
            kind,
        }
    }
}

#[tokio::test]
async fn outside_a_work_tree_there_is_no_snapshot() {
    let tmp = tempfile::tempdir().unwrap();
    assert!(git_snapshot(tmp.path(), TIMEOUT).await.unwrap().is_none());

    // Inside `.git` is not a work tree either.
    let repo = Repo::new();
    assert!(
        git_snapshot(&repo.path(".git"), TIMEOUT)
            .await
            .unwrap()
            .is_none()
    );

    let gone = git_snapshot(&tmp.path().join("missing"), TIMEOUT).await;
    assert!(
        matches!(gone, Err(GitCheckError::Directory { .. })),
        "{gone:?}"
    );
}

#[tokio::test]
async fn a_clean_tree_has_no_changes() {
    let repo = Repo::new();
    let before = repo.snapshot().await;
    assert_eq!(before.root(), repo.root);
    assert!(before.is_clean());
    assert!(before.dirty_paths().is_empty());
    assert!(before.head().is_some());
    assert_eq!(before.changes_since(TIMEOUT).await.unwrap(), vec![]);

    // From a subdirectory the root is the same.
    let from_sub = git_snapshot(&repo.path("src"), TIMEOUT)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(from_sub.root(), repo.root);
}

#[tokio::test]
async fn writes_inside_the_allowed_dir_are_changes_but_not_strays() {
    let repo = Repo::new();
    let before = repo.snapshot().await;
    repo.write("src/new.rs", "new\n");
    repo.write("src/lib.rs", "pub fn g() {}\n");
    let changes = before.changes_since(TIMEOUT).await.unwrap();
    assert_eq!(
        changes,
        vec![
            repo.change("src/lib.rs", ChangeKind::Modified),
            repo.change("src/new.rs", ChangeKind::Added),
        ]
    );
    assert_eq!(strays(&changes, &[repo.path("src")]), vec![]);
}

#[tokio::test]
async fn writes_outside_the_allowed_dirs_are_named_strays() {
    let repo = Repo::new();
    let run_dir = tempfile::tempdir().unwrap();
    let before = repo.snapshot().await;
    repo.write("src/ok.rs", "ok\n");
    // A sibling whose name starts with the allowed directory's is not inside it.
    repo.write("src-extra/evil.rs", "evil\n");
    repo.write("README", "overwritten\n");
    let changes = before.changes_since(TIMEOUT).await.unwrap();
    assert_eq!(changes.len(), 3, "{changes:?}");
    let allowed = [repo.path("src"), run_dir.path().to_path_buf()];
    let found = strays(&changes, &allowed);
    assert_eq!(
        found,
        vec![
            repo.change("README", ChangeKind::Modified),
            repo.change("src-extra/evil.rs", ChangeKind::Added),
        ]
    );
    assert_eq!(
        found[0].to_string(),
        format!("modified {}", repo.path("README").display())
    );
    // The whole repository allowed: nothing is a stray.
    assert_eq!(strays(&changes, std::slice::from_ref(&repo.root)), vec![]);
}

#[tokio::test]
async fn a_further_change_to_an_already_dirty_file_is_detected() {
    let repo = Repo::new();
    repo.write("README", "dirty1\n");
    repo.write("notes.txt", "untracked, left alone\n");
    let before = repo.snapshot().await;
    assert_eq!(
        before.dirty_paths(),
        vec![repo.path("README"), repo.path("notes.txt")]
    );

    // Same size, and the old mtime put back: only the content hash can tell.
    let readme = repo.path("README");
    let mtime = fs::metadata(&readme).unwrap().modified().unwrap();
    fs::write(&readme, "dirty2\n").unwrap();
    fs::File::options()
        .write(true)
        .open(&readme)
        .unwrap()
        .set_modified(mtime)
        .unwrap();

    assert_eq!(
        before.changes_since(TIMEOUT).await.unwrap(),
        vec![repo.change("README", ChangeKind::Modified)]
    );
}

#[tokio::test]
async fn a_dirty_file_left_alone_is_not_a_change_and_a_reverted_one_is() {
    let repo = Repo::new();
    repo.write("README", "dirty\n");
    repo.write("docs/a.md", "also dirty\n");
    let before = repo.snapshot().await;
    assert_eq!(before.changes_since(TIMEOUT).await.unwrap(), vec![]);

    repo.git(&["checkout", "--", "README"]);
    assert_eq!(
        before.changes_since(TIMEOUT).await.unwrap(),
        vec![repo.change("README", ChangeKind::Modified)]
    );
}

#[tokio::test]
async fn deleted_files_are_deleted() {
    let repo = Repo::new();
    repo.write("scratch.txt", "untracked\n");
    let before = repo.snapshot().await;
    fs::remove_file(repo.path("docs/a.md")).unwrap();
    fs::remove_file(repo.path("scratch.txt")).unwrap();
    assert_eq!(
        before.changes_since(TIMEOUT).await.unwrap(),
        vec![
            repo.change("docs/a.md", ChangeKind::Deleted),
            repo.change("scratch.txt", ChangeKind::Deleted),
        ]
    );
}

#[tokio::test]
async fn paths_with_a_space_and_a_newline_are_exact() {
    let repo = Repo::new();
    let odd = "dir with space/new\nline.txt";
    repo.write(odd, "committed\n");
    repo.git(&["add", "-A"]);
    repo.git(&["commit", "-q", "-m", "odd"]);
    let before = repo.snapshot().await;

    repo.write(odd, "changed\n");
    repo.write("dir with space/an other\nnew.txt", "new\n");
    let changes = before.changes_since(TIMEOUT).await.unwrap();
    assert_eq!(
        changes,
        vec![
            repo.change("dir with space/an other\nnew.txt", ChangeKind::Added),
            repo.change(odd, ChangeKind::Modified),
        ]
    );
    assert!(changes.iter().all(|c| c.path.exists()));
}

#[tokio::test]
async fn a_rename_reports_both_names() {
    let repo = Repo::new();
    let before = repo.snapshot().await;
    repo.git(&["mv", "README", "README.md"]);
    // A staged rename whose new name also has a space and a newline.
    repo.git(&["mv", "docs/a.md", "docs/b c\nd.md"]);
    assert_eq!(
        before.changes_since(TIMEOUT).await.unwrap(),
        vec![
            repo.change("README", ChangeKind::Deleted),
            repo.change("README.md", ChangeKind::Added),
            repo.change("docs/a.md", ChangeKind::Deleted),
            repo.change("docs/b c\nd.md", ChangeKind::Added),
        ]
    );
}

#[tokio::test]
async fn dirty_paths_list_every_pre_existing_change() {
    let repo = Repo::new();
    repo.write("README", "modified\n");
    repo.write("staged.txt", "staged\n");
    repo.git(&["add", "staged.txt"]);
    repo.write("untracked dir/u.txt", "untracked\n");
    fs::remove_file(repo.path("src/lib.rs")).unwrap();
    repo.git(&["mv", "docs/a.md", "docs/renamed.md"]);
    repo.write(".corral/run-1/events.jsonl", "{}\n");
    let before = repo.snapshot().await;
    assert!(!before.is_clean());
    assert_eq!(
        before.dirty_paths(),
        vec![
            repo.path("README"),
            repo.path("docs/a.md"),
            repo.path("docs/renamed.md"),
            repo.path("src/lib.rs"),
            repo.path("staged.txt"),
            repo.path("untracked dir/u.txt"),
        ]
    );
    assert_eq!(before.changes_since(TIMEOUT).await.unwrap(), vec![]);
}

#[tokio::test]
async fn the_ignored_run_dir_is_not_reported() {
    let repo = Repo::new();
    let before = repo.snapshot().await;
    repo.write(".corral/run-1/events.jsonl", "{\"event\":1}\n");
    repo.write(".corral/run-1/session-id.txt", "abc\n");
    assert_eq!(before.changes_since(TIMEOUT).await.unwrap(), vec![]);
}

#[tokio::test]
async fn a_committed_stray_is_still_found() {
    let repo = Repo::new();
    let before = repo.snapshot().await;
    repo.write("stray.txt", "committed by the agent\n");
    repo.write("docs/a.md", "rewritten and committed\n");
    repo.write("src/lib.rs", "allowed\n");
    repo.git(&["add", "-A"]);
    repo.git(&["commit", "-q", "-m", "agent"]);
    let changes = before.changes_since(TIMEOUT).await.unwrap();
    assert_eq!(
        strays(&changes, &[repo.path("src")]),
        vec![
            repo.change("docs/a.md", ChangeKind::Modified),
            repo.change("stray.txt", ChangeKind::Added),
        ]
    );
    assert_eq!(changes.len(), 3, "{changes:?}");
}

#[tokio::test]
async fn the_first_commit_of_an_empty_repository_is_seen() {
    let repo = Repo::empty();
    let before = repo.snapshot().await;
    assert!(before.head().is_none());
    repo.write("first.txt", "first\n");
    repo.git(&["add", "-A"]);
    repo.git(&["commit", "-q", "-m", "first"]);
    assert_eq!(
        before.changes_since(TIMEOUT).await.unwrap(),
        vec![repo.change("first.txt", ChangeKind::Added)]
    );
}

#[tokio::test]
async fn a_removed_repository_is_reported() {
    let repo = Repo::new();
    let before = repo.snapshot().await;
    fs::remove_dir_all(repo.path(".git")).unwrap();
    assert_eq!(
        before.changes_since(TIMEOUT).await.unwrap(),
        vec![repo.change(".git", ChangeKind::Deleted)]
    );
}

/// Writes an executable script, then runs `attempt` with it, again while a concurrent fork in
/// another test still holds the fresh file open for writing (`ETXTBSY`).
async fn with_script<T>(
    path: &Path,
    body: &str,
    attempt: impl AsyncFn() -> Result<T, GitCheckError>,
) -> Result<T, GitCheckError> {
    fs::write(path, body).unwrap();
    fs::set_permissions(path, fs::Permissions::from_mode(0o755)).unwrap();
    for _ in 0..50 {
        match attempt().await {
            Err(GitCheckError::Spawn { source, .. })
                if source.raw_os_error() == Some(libc::ETXTBSY) =>
            {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            other => return other,
        }
    }
    panic!("{} stayed busy", path.display());
}

#[tokio::test]
async fn a_hanging_git_is_killed_at_the_timeout() {
    let tmp = tempfile::tempdir().unwrap();
    let pid_file = tmp.path().join("pid");
    let script = tmp.path().join("git");
    // A grandchild too: only the kill of the whole process group ends it.
    let body = format!(
        "#!/bin/sh\nsleep 60 &\necho $! $$ | tr ' ' '\\n' > '{}'\nwait\n",
        pid_file.display()
    );
    let fake = GitProgram::new(&script);
    let started = Instant::now();
    let result = with_script(&script, &body, async || {
        fake.snapshot(tmp.path(), Duration::from_secs(1)).await
    })
    .await;
    assert!(
        matches!(&result, Err(GitCheckError::TimedOut { .. })),
        "{result:?}"
    );
    let err = result.unwrap_err();
    assert!(err.is_retryable());
    assert!(err.to_string().contains("rev-parse"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(10));
    // On a very slow machine the script may be killed before it wrote the pids: also fine.
    let pids = read_pids(&pid_file);
    assert!(
        pids.is_empty() || pids.len() == 2,
        "the fake git ran once: {pids:?}"
    );
    let survivors = wait_all_dead(&pids, Duration::from_secs(5));
    kill_survivors(&survivors);
    assert!(
        survivors.is_empty(),
        "git outlived its timeout: {survivors:?}"
    );
}

#[tokio::test]
async fn a_failing_git_is_an_error_with_its_message() {
    let tmp = tempfile::tempdir().unwrap();
    let script = tmp.path().join("git");
    let body = "#!/bin/sh\necho 'fatal: detected dubious ownership' >&2\nexit 128\n";
    let fake = GitProgram::new(&script);
    let result = with_script(&script, body, async || {
        fake.snapshot(tmp.path(), TIMEOUT).await
    })
    .await;
    let Err(GitCheckError::Failed { stderr, exit, .. }) = result else {
        panic!("{result:?}");
    };
    assert_eq!(exit.code, Some(128));
    assert!(stderr.contains("dubious ownership"), "{stderr}");
}

#[tokio::test]
async fn a_missing_git_is_named() {
    let tmp = tempfile::tempdir().unwrap();
    let program = tmp.path().join("no-such-git");
    let result = GitProgram::new(&program)
        .snapshot(tmp.path(), TIMEOUT)
        .await;
    let Err(err @ GitCheckError::GitMissing { .. }) = result else {
        panic!("{result:?}");
    };
    assert!(!err.is_retryable());
    assert!(err.to_string().contains("no-such-git"), "{err}");
}

/// What an agent that owns the repository plants for Corral's next `git status` on the host: a
/// program behind every key and file that can name one, in the repository, in a file it
/// includes, in its attributes and hooks, and in a submodule's own configuration. None of them
/// may run.
#[tokio::test]
async fn the_agents_git_configuration_runs_nothing_on_the_host() {
    let repo = Repo::new();
    let tmp = repo.root.parent().unwrap().to_path_buf();
    let markers = tmp.join("markers");
    fs::create_dir_all(&markers).unwrap();
    let payload = tmp.join("payload.sh");
    fs::write(
        &payload,
        format!("#!/bin/sh\ntouch '{}'/\"$1\"\ncat\n", markers.display()),
    )
    .unwrap();
    fs::set_permissions(&payload, fs::Permissions::from_mode(0o755)).unwrap();
    let run = |what: &str| format!("\"{} {what}\"", payload.display());

    // A submodule whose own configuration carries a filter and an fsmonitor.
    let sub_src = tmp.join("sub-src");
    fs::create_dir_all(&sub_src).unwrap();
    git(&sub_src, &["init", "-q"]);
    fs::write(sub_src.join("file"), "sub\n").unwrap();
    git(&sub_src, &["add", "-A"]);
    git(&sub_src, &["commit", "-q", "-m", "sub"]);
    git(
        &repo.root,
        &[
            "-c",
            "protocol.file.allow=always",
            "submodule",
            "add",
            "-q",
            sub_src.to_str().unwrap(),
            "sub",
        ],
    );
    repo.git(&["commit", "-q", "-m", "submodule"]);
    let sub_git_dir = repo.path(".git/modules/sub");
    let mut sub_config = fs::read_to_string(sub_git_dir.join("config")).unwrap();
    sub_config.push_str(&format!(
        "[core]\n\tfsmonitor = {}\n[filter \"s\"]\n\tclean = {}\n",
        run("sub-fsmonitor"),
        run("sub-clean")
    ));
    fs::write(sub_git_dir.join("config"), sub_config).unwrap();
    fs::write(repo.path("sub/.gitattributes"), "* filter=s\n").unwrap();

    let mut config = fs::read_to_string(repo.path(".git/config")).unwrap();
    config.push_str(&format!(
        "[core]\n\tfsmonitor = {fsmonitor}\n\thooksPath = .git/agent-hooks\n\tpager = {pager}\n\tsshCommand = {ssh}\n\tuntrackedCache = true\n\
         [filter \"x\"]\n\tclean = {clean}\n\tsmudge = {smudge}\n\tprocess = {process}\n\trequired = true\n\
         [filter \"a=b.c\"]\n\tclean = {odd}\n\
         [diff]\n\texternal = {diff}\n\
         [diff \"x\"]\n\ttextconv = {textconv}\n\tcommand = {diffcmd}\n\
         [status]\n\tsubmoduleSummary = true\n\
         [submodule]\n\trecurse = true\n\
         [include]\n\tpath = agent.inc\n",
        fsmonitor = run("fsmonitor"),
        pager = run("pager"),
        ssh = run("ssh"),
        clean = run("clean"),
        smudge = run("smudge"),
        process = run("process"),
        odd = run("odd-name"),
        diff = run("diff-external"),
        textconv = run("textconv"),
        diffcmd = run("diff-command"),
    ));
    fs::write(repo.path(".git/config"), config).unwrap();
    fs::write(
        repo.path(".git/agent.inc"),
        format!("[filter \"inc\"]\n\tclean = {}\n", run("included-clean")),
    )
    .unwrap();
    repo.write(
        ".gitattributes",
        "* filter=x diff=x\n*.md filter=inc\nsrc/* filter=a=b.c\n",
    );
    fs::write(repo.path(".git/info/attributes"), "README filter=x\n").unwrap();
    for hooks in [".git/hooks", ".git/agent-hooks"] {
        fs::create_dir_all(repo.path(hooks)).unwrap();
        for hook in [
            "post-index-change",
            "reference-transaction",
            "post-checkout",
            "pre-commit",
        ] {
            let path = repo.path(&format!("{hooks}/{hook}"));
            fs::write(
                &path,
                format!("#!/bin/sh\n{} hook-{hook}\n", payload.display()),
            )
            .unwrap();
            fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
        }
    }

    // Tracked files touched (same content, new mtime), so git has to look at their content.
    let touch_all = || {
        for rel in ["README", "src/lib.rs", "docs/a.md", "sub/file"] {
            let path = repo.path(rel);
            let content = fs::read(&path).unwrap();
            std::thread::sleep(Duration::from_millis(20));
            fs::write(&path, content).unwrap();
        }
    };
    touch_all();
    let before = repo.snapshot().await;
    touch_all();
    before.changes_since(TIMEOUT).await.unwrap();

    let ran: Vec<String> = fs::read_dir(&markers)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(ran.is_empty(), "the repository ran on the host: {ran:?}");
}
