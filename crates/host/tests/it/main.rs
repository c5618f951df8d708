//! The forge through the real `gh` (Debian's 2.23) and git, against the fake forge of
//! `corral-test-support` and a bare repository as the remote: a branch pushed, its pull request
//! opened then updated (never a second), issues searched, and each way it cannot work (no gh,
//! no login, no remote, a forge answering 500) told apart.

// Test code: a failed expectation should panic loudly.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

use corral_host::HostForge;
use corral_ports::{CancellationToken, Forge, ForgeError, ForgeRepo, PullRequestText};
use corral_test_support::FakeForge;

const TOKEN: &str = "gho_fake";

/// A project with one commit on `corral/dates`, a bare repository as `origin`, and the fake
/// forge; `gh` is the host's.
struct Scene {
    _tmp: tempfile::TempDir,
    project: PathBuf,
    remote: PathBuf,
    forge: FakeForge,
    gh_config: PathBuf,
}

fn git(dir: &Path, args: &[&str]) -> String {
    corral_test_support::git_ok(
        dir,
        &["-c", "user.name=T", "-c", "user.email=t@t.invalid"],
        args,
    )
    .trim()
    .to_owned()
}

/// `program` on this test's `PATH`.
fn on_path(program: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
}

fn scene() -> Option<Scene> {
    if on_path("gh").is_none() {
        eprintln!("SKIPPED: gh is not installed (cargo xtask prerequisites installs it)");
        return None;
    }
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("project");
    let remote = tmp.path().join("remote.git");
    std::fs::create_dir_all(&project).unwrap();
    git(
        tmp.path(),
        &["init", "-q", "--bare", remote.to_str().unwrap()],
    );
    git(&project, &["init", "-q", "-b", "main"]);
    git(&project, &["commit", "-q", "--allow-empty", "-m", "base"]);
    git(&project, &["checkout", "-q", "-b", "corral/dates"]);
    git(&project, &["commit", "-q", "--allow-empty", "-m", "task"]);
    let gh_config = tmp.path().join("gh");
    std::fs::create_dir_all(&gh_config).unwrap();
    let forge = FakeForge::start("octo/widgets", TOKEN).unwrap();
    Some(Scene {
        _tmp: tmp,
        project,
        remote,
        forge,
        gh_config,
    })
}

impl Scene {
    fn host(&self, token: Option<&str>) -> HostForge {
        let mut ambient: Vec<(String, String)> = ["PATH", "HOME"]
            .iter()
            .filter_map(|k| std::env::var(k).ok().map(|v| ((*k).to_owned(), v)))
            .collect();
        ambient.extend(self.forge.gh_env(&self.gh_config, token));
        HostForge {
            ambient,
            timeout: std::time::Duration::from_secs(60),
            kill_grace: std::time::Duration::from_secs(2),
        }
    }

    fn repo(&self, with_remote: bool) -> ForgeRepo {
        if with_remote {
            let _ = corral_test_support::command(Path::new("git"))
                .args(["remote", "add", "origin", self.remote.to_str().unwrap()])
                .current_dir(&self.project)
                .output();
        }
        ForgeRepo {
            dir: self.project.clone(),
            remote: "origin".into(),
            repo: Some(self.forge.repo()),
        }
    }
}

fn text(title: &str) -> PullRequestText {
    PullRequestText {
        title: title.into(),
        body: "Adds a parser.\n\n--title 'x' $(touch /tmp/never) `and` @file".into(),
    }
}

#[tokio::test]
async fn a_branch_is_pushed_and_its_pull_request_opened_then_updated_never_doubled() {
    let Some(scene) = scene() else { return };
    let forge = scene.host(Some(TOKEN));
    let repo = scene.repo(true);
    let cancel = CancellationToken::new();

    forge.check(&repo, &cancel).await.unwrap();
    assert_eq!(
        forge
            .pull_request_for(&repo, "corral/dates", &cancel)
            .await
            .unwrap(),
        None
    );
    forge
        .push_branch(&repo, "corral/dates", &cancel)
        .await
        .unwrap();
    assert_eq!(
        git(&scene.remote, &["rev-parse", "corral/dates"]),
        git(&scene.project, &["rev-parse", "corral/dates"])
    );
    let opened = forge
        .open_pull_request(&repo, "corral/dates", "main", &text("Parse dates"), &cancel)
        .await
        .unwrap();
    let found = forge
        .pull_request_for(&repo, "corral/dates", &cancel)
        .await
        .unwrap();
    assert_eq!(found.as_ref(), Some(&opened));
    let updated = forge
        .update_pull_request(&repo, opened.number, &text("Parse dates, again"), &cancel)
        .await
        .unwrap();
    assert_eq!(updated.number, opened.number);
    let prs = scene.forge.pull_requests();
    assert_eq!(prs.len(), 1, "{prs:?}");
    assert_eq!(prs[0].title, "Parse dates, again");
    assert_eq!(prs[0].head, "corral/dates");
    assert_eq!(prs[0].base, "main");
    // The agent's text arrived as data, whole, and nothing of it ran.
    assert_eq!(prs[0].body, text("x").body);
    assert!(!Path::new("/tmp/never").exists());
    // Opening a second for the same head is the forge's 422, told as its answer.
    let again = forge
        .open_pull_request(&repo, "corral/dates", "main", &text("Twice"), &cancel)
        .await
        .unwrap_err();
    assert!(
        matches!(&again, ForgeError::Answered { status: Some(422), detail, .. } if detail.contains("already exists")),
        "{again:?}"
    );
    assert!(scene.forge.requests().iter().all(|r| r.authorized));
}

#[tokio::test]
async fn issues_are_found_by_label_and_query() {
    let Some(scene) = scene() else { return };
    scene
        .forge
        .add_issue(7, "Parse ISO dates", "Dates like 2026-12-07.", &["sprint"]);
    scene
        .forge
        .add_issue(8, "Name bad dates", "Say which.", &["sprint", "bug"]);
    scene.forge.add_issue(9, "Unrelated", "", &["later"]);
    let forge = scene.host(Some(TOKEN));
    let repo = scene.repo(true);
    let cancel = CancellationToken::new();
    let found = forge
        .issues(&repo, "label:sprint", 30, &cancel)
        .await
        .unwrap();
    let numbers: Vec<u64> = found.iter().map(|i| i.number).collect();
    assert_eq!(numbers, [7, 8]);
    assert_eq!(found[1].labels, ["sprint", "bug"]);
    let none = forge
        .issues(&repo, "label:nothing", 30, &cancel)
        .await
        .unwrap();
    assert!(none.is_empty());
    let search = scene
        .forge
        .requests()
        .into_iter()
        .find(|r| r.path == "/search/issues")
        .unwrap();
    assert!(
        search.query.contains(&(
            "q".into(),
            "repo:octo/widgets is:issue is:open label:sprint".into()
        )),
        "{search:?}"
    );
}

#[tokio::test]
async fn each_way_the_forge_cannot_be_used_is_told_apart() {
    let Some(scene) = scene() else { return };
    let cancel = CancellationToken::new();

    // No remote.
    let repo = scene.repo(false);
    let e = scene
        .host(Some(TOKEN))
        .check(&repo, &cancel)
        .await
        .unwrap_err();
    assert_eq!(
        e,
        ForgeError::NoRemote {
            remote: "origin".into()
        }
    );
    assert!(e.is_unavailable());

    // No gh on PATH (git alone, linked into a directory of its own).
    let repo = scene.repo(true);
    let bin = scene.project.parent().unwrap().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(on_path("git").unwrap(), bin.join("git")).unwrap();
    let mut no_gh = scene.host(Some(TOKEN));
    no_gh.ambient.retain(|(k, _)| k != "PATH");
    no_gh
        .ambient
        .push(("PATH".into(), bin.display().to_string()));
    let e = no_gh.check(&repo, &cancel).await.unwrap_err();
    assert!(
        matches!(&e, ForgeError::Missing { program, .. } if program == "gh"),
        "{e:?}"
    );

    // No login: gh's request carries no token and the forge says 401.
    let e = scene
        .host(None)
        .pull_request_for(&repo, "corral/dates", &cancel)
        .await
        .unwrap_err();
    assert!(matches!(e, ForgeError::NotLoggedIn { .. }), "{e:?}");
    assert!(e.is_unavailable());

    // No login at all for github.com: gh itself refuses (its exit 4) before any request.
    let mut github = scene.host(None);
    github
        .ambient
        .retain(|(k, _)| !matches!(k.as_str(), "GH_HOST" | "HTTP_PROXY"));
    let on_github = ForgeRepo {
        repo: Some("octo/widgets".into()),
        ..repo.clone()
    };
    let e = github
        .pull_request_for(&on_github, "corral/dates", &cancel)
        .await
        .unwrap_err();
    assert!(
        matches!(&e, ForgeError::NotLoggedIn { detail, .. } if detail.contains("gh auth login")),
        "{e:?}"
    );

    // A forge in trouble: its 500, retryable, nothing opened.
    scene.forge.fail_with(500);
    let e = scene
        .host(Some(TOKEN))
        .open_pull_request(&repo, "corral/dates", "main", &text("t"), &cancel)
        .await
        .unwrap_err();
    assert!(
        matches!(
            e,
            ForgeError::Answered {
                status: Some(500),
                ..
            }
        ),
        "{e:?}"
    );
    assert!(e.is_retryable() && !e.is_unavailable());
    assert!(scene.forge.pull_requests().is_empty());

    // A push the remote refuses (not a fast-forward) says so.
    git(&scene.project, &["push", "-q", "origin", "corral/dates"]);
    git(
        &scene.project,
        &[
            "commit",
            "-q",
            "--amend",
            "--allow-empty",
            "-m",
            "rewritten",
        ],
    );
    let e = scene
        .host(Some(TOKEN))
        .push_branch(&repo, "corral/dates", &cancel)
        .await
        .unwrap_err();
    assert!(
        matches!(&e, ForgeError::PushRefused { detail, .. } if detail.contains("rejected")),
        "{e:?}"
    );
}

/// What a hostile repository's configuration could run on a push: a pre-push hook, a
/// receive-pack of its own for a local remote, an fsmonitor. None of them runs.
#[tokio::test]
async fn the_repositorys_own_programs_do_not_run_on_a_push() {
    let Some(scene) = scene() else { return };
    let repo = scene.repo(true);
    let ran = scene.project.parent().unwrap().join("ran");
    let plant = |name: &str| {
        let script = scene.project.parent().unwrap().join(name);
        std::fs::write(
            &script,
            format!(
                "#!/bin/sh\necho {name} >> {}\nexec git-receive-pack \"$@\"\n",
                ran.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        script
    };
    let hooks = scene.project.join(".git/hooks");
    std::fs::create_dir_all(&hooks).unwrap();
    std::fs::copy(plant("pre-push"), hooks.join("pre-push")).unwrap();
    let receive = plant("receive-pack");
    git(
        &scene.project,
        &[
            "config",
            "remote.origin.receivepack",
            receive.to_str().unwrap(),
        ],
    );
    git(
        &scene.project,
        &[
            "config",
            "core.fsmonitor",
            plant("fsmonitor").to_str().unwrap(),
        ],
    );

    scene
        .host(Some(TOKEN))
        .push_branch(&repo, "corral/dates", &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(
        git(&scene.remote, &["rev-parse", "corral/dates"]),
        git(&scene.project, &["rev-parse", "corral/dates"])
    );
    assert!(
        !ran.exists(),
        "ran: {}",
        std::fs::read_to_string(&ran).unwrap_or_default()
    );
}
