//! The engine as the supervised command runner of the ports: exit codes and both streams, the
//! output cap with its totals, a whole tree ended on timeout and on cancel, the environment
//! policy, a sandboxed command confined to its working directory (or refused where no sandbox
//! is usable), checked from inside before it runs and given Corral's egress proxy as an agent's
//! CLI is, and host git that runs nothing the repository planted.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use corral_engine::{AllowRule, BackendChoice, Engine, EngineConfig, SandboxConfig};
use corral_ports::{
    CancellationToken, CommandEnd, CommandError, CommandRunner, CommandSpec, Confinement,
};
use corral_test_support::{kill_survivors, read_pids, wait_all_dead, wait_for_lines};

const LONG: Duration = Duration::from_secs(60);

fn host_path() -> String {
    std::env::var("PATH").unwrap_or_else(|_| "/usr/local/bin:/usr/bin:/bin".to_string())
}

/// An engine whose ambient environment is `ambient` plus `PATH`, with `sandbox`.
fn engine_with(sandbox: SandboxConfig, ambient: &[(&str, &str)]) -> Arc<dyn CommandRunner> {
    let mut env: Vec<(String, String)> = vec![("PATH".into(), host_path())];
    env.extend(ambient.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    Arc::new(Engine::new(EngineConfig {
        ambient_env: Some(env),
        kill_grace: Duration::from_millis(200),
        sandbox,
        ..EngineConfig::default()
    }))
}

/// Supervision without the sandbox (pids in the tests are the host's): the native backend,
/// consented to.
fn native(ambient: &[(&str, &str)]) -> Arc<dyn CommandRunner> {
    engine_with(
        SandboxConfig {
            backend: BackendChoice::Native,
            allow_degraded_native: true,
            ..SandboxConfig::default()
        },
        ambient,
    )
}

fn bubblewrap() -> Arc<dyn CommandRunner> {
    engine_with(
        SandboxConfig {
            backend: BackendChoice::Bubblewrap,
            ..SandboxConfig::default()
        },
        &[],
    )
}

fn never() -> CancellationToken {
    CancellationToken::new()
}

#[tokio::test]
async fn a_command_reports_its_exit_code_and_both_streams() {
    let dir = tempfile::tempdir().unwrap();
    let spec = CommandSpec::shell(
        "pwd; echo oops >&2; read x; echo \"stdin:${x:-none}\"; exit 3",
        dir.path(),
        LONG,
    );
    let out = native(&[]).run(spec, &never()).await.unwrap();
    assert_eq!(out.end, CommandEnd::Exited(3));
    assert!(!out.success());
    let mut lines = out.stdout.text.lines();
    assert_eq!(
        lines.next(),
        dir.path().canonicalize().unwrap().to_str(),
        "it runs in the working directory it was given"
    );
    assert_eq!(lines.next(), Some("stdin:none"), "stdin is /dev/null");
    assert_eq!(out.stderr.text, "oops\n");
    assert_eq!(out.stderr.total_bytes, 5);
    assert!(!out.stdout.truncated());

    let ok = native(&[])
        .run(CommandSpec::shell("true", dir.path(), LONG), &never())
        .await
        .unwrap();
    assert!(ok.success());
}

#[tokio::test]
async fn the_output_kept_is_capped_and_the_rest_counted_on_both_streams() {
    let dir = tempfile::tempdir().unwrap();
    let mut spec = CommandSpec::shell(
        "head -c 300000 /dev/zero | tr '\\0' 'x' & head -c 200000 /dev/zero | tr '\\0' 'e' >&2; wait",
        dir.path(),
        LONG,
    );
    spec.output_limit = 1000;
    let out = native(&[]).run(spec, &never()).await.unwrap();
    assert!(out.success(), "{out:?}");
    assert_eq!(out.stdout.text.len(), 1000);
    assert_eq!(out.stdout.total_bytes, 300_000);
    assert!(out.stdout.truncated());
    assert_eq!(out.stderr.text.len(), 1000);
    assert_eq!(out.stderr.total_bytes, 200_000);
}

/// A shell that starts a sleeper in its group and one that leaves it (`setsid`), records the
/// three pids, says so and waits.
fn tree_script(pids: &Path) -> String {
    format!(
        "echo $$ >> {p}; sleep 60 & echo $! >> {p}; setsid sleep 60 & echo $! >> {p}; echo started; wait",
        p = pids.display()
    )
}

#[tokio::test]
async fn a_command_past_its_time_goes_down_with_its_whole_tree() {
    let dir = tempfile::tempdir().unwrap();
    let pids_file = dir.path().join("pids");
    let spec = CommandSpec::shell(
        &tree_script(&pids_file),
        dir.path(),
        Duration::from_millis(1500),
    );
    let started = Instant::now();
    let out = native(&[]).run(spec, &never()).await.unwrap();
    let pids = read_pids(&pids_file);
    let survivors = wait_all_dead(&pids, Duration::from_secs(5));
    kill_survivors(&survivors);
    assert_eq!(out.end, CommandEnd::TimedOut);
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(
        out.stdout.text, "started\n",
        "what came before the kill is kept"
    );
    assert_eq!(
        pids.len(),
        3,
        "the shell, its sleeper and the one that left the group"
    );
    assert!(survivors.is_empty(), "left running: {survivors:?}");
}

#[tokio::test]
async fn a_cancelled_command_goes_down_with_its_whole_tree() {
    let dir = tempfile::tempdir().unwrap();
    let pids_file = dir.path().join("pids");
    let spec = CommandSpec::shell(&tree_script(&pids_file), dir.path(), LONG);
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    let watched = pids_file.clone();
    let canceller = tokio::task::spawn_blocking(move || {
        let ready = wait_for_lines(&watched, 3, Duration::from_secs(20));
        trigger.cancel();
        ready
    });
    let started = Instant::now();
    let out = native(&[]).run(spec, &cancel).await.unwrap();
    assert!(canceller.await.unwrap(), "the tree started");
    let pids = read_pids(&pids_file);
    let survivors = wait_all_dead(&pids, Duration::from_secs(5));
    kill_survivors(&survivors);
    assert_eq!(out.end, CommandEnd::Cancelled);
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(pids.len(), 3);
    assert!(survivors.is_empty(), "left running: {survivors:?}");
}

#[tokio::test]
async fn the_environment_is_the_policy_s_not_the_caller_s() {
    let dir = tempfile::tempdir().unwrap();
    let mut spec = CommandSpec::shell(
        "echo \"${HOME:-none} ${MY_API_KEY:-none} ${RANDOM_SETTING:-none} ${SPRINT_TASK:-none}\"",
        dir.path(),
        LONG,
    );
    spec.env.push(("SPRINT_TASK".into(), "t-1".into()));
    let runner = native(&[
        ("HOME", "/home/me"),
        ("MY_API_KEY", "sk-secret"),
        ("RANDOM_SETTING", "x"),
    ]);
    let out = runner.run(spec, &never()).await.unwrap();
    assert_eq!(
        out.stdout.text, "/home/me none none t-1\n",
        "the core set and the caller's variables pass; secrets and strangers do not"
    );
}

#[tokio::test]
async fn a_program_that_cannot_start_is_an_error_that_is_not_retried() {
    let dir = tempfile::tempdir().unwrap();
    let spec = CommandSpec {
        program: "corral-no-such-program".into(),
        ..CommandSpec::shell("true", dir.path(), LONG)
    };
    let err = native(&[]).run(spec, &never()).await.unwrap_err();
    assert!(matches!(err, CommandError::Spawn { .. }), "{err}");
    assert!(!err.is_retryable());
    assert!(err.to_string().contains("corral-no-such-program"), "{err}");
}

#[tokio::test]
async fn a_sandboxed_command_writes_its_working_tree_and_nothing_else() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().canonicalize().unwrap();
    let tree = root.join("tree");
    let outside = root.join("outside");
    fs::create_dir_all(tree.join(".git")).unwrap();
    fs::create_dir_all(&outside).unwrap();
    let script = format!(
        "echo in > inside.txt; echo out > {out}/escape.txt; echo hook > .git/planted; touch \"$TMPDIR/scratch\" && echo tmp-ok",
        out = outside.display()
    );
    let out = bubblewrap()
        .run(CommandSpec::shell(&script, &tree, LONG), &never())
        .await
        .unwrap();
    assert_eq!(out.end, CommandEnd::Exited(0), "{out:?}");
    assert_eq!(out.stdout.text, "tmp-ok\n", "{out:?}");
    assert_eq!(fs::read_to_string(tree.join("inside.txt")).unwrap(), "in\n");
    assert!(
        !outside.join("escape.txt").exists(),
        "wrote outside: {out:?}"
    );
    assert!(
        !tree.join(".git/planted").exists(),
        "wrote the repository: {out:?}"
    );
    assert!(out.stderr.text.contains("Read-only file system"), "{out:?}");
}

#[tokio::test]
async fn a_sandboxed_command_refuses_where_no_sandbox_works_and_no_one_consented() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let script = format!("touch {}", marker.display());
    for backend in [BackendChoice::Bubblewrap, BackendChoice::Auto] {
        let engine = engine_with(
            SandboxConfig {
                backend,
                bwrap: PathBuf::from("/nonexistent/corral-bwrap"),
                ..SandboxConfig::default()
            },
            &[],
        );
        let err = engine
            .run(CommandSpec::shell(&script, dir.path(), LONG), &never())
            .await
            .unwrap_err();
        assert!(matches!(err, CommandError::Refused { .. }), "{err}");
        assert!(!err.is_retryable());
        assert!(err.to_string().contains("bubblewrap"), "{err}");
        assert!(!marker.exists(), "{backend:?} ran it");
    }
}

/// A "bubblewrap" that confines nothing: it runs what follows its own `--` on the host, as a
/// broken or substituted `sandbox.bwrap` would. It still passes the usability probe.
fn hollow_bwrap(dir: &Path) -> PathBuf {
    let script = dir.join("hollow-bwrap");
    fs::write(
        &script,
        "#!/bin/sh\nwhile [ \"$#\" -gt 0 ] && [ \"$1\" != \"--\" ]; do shift; done\nshift\nexec \"$@\"\n",
    )
    .unwrap();
    fs::set_permissions(&script, fs::Permissions::from_mode(0o755)).unwrap();
    script
}

#[tokio::test]
async fn a_sandboxed_command_is_checked_from_inside_before_it_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let tree = tmp.path().join("tree");
    fs::create_dir_all(&tree).unwrap();
    let marker = tree.join("ran");
    let engine = engine_with(
        SandboxConfig {
            backend: BackendChoice::Bubblewrap,
            bwrap: hollow_bwrap(tmp.path()),
            network: corral_engine::NetworkPolicy::Host,
            ..SandboxConfig::default()
        },
        &[],
    );
    let err = engine
        .run(
            CommandSpec::shell(&format!("touch {}", marker.display()), &tree, LONG),
            &never(),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, CommandError::Refused { .. }), "{err}");
    assert!(
        err.to_string().contains("checked from inside"),
        "the probe's verdict, not the command's: {err}"
    );
    assert!(
        !marker.exists(),
        "the command ran in a sandbox that did not hold"
    );
    // The real bubblewrap holds: the same command runs.
    let out = bubblewrap()
        .run(
            CommandSpec::shell(&format!("touch {}", marker.display()), &tree, LONG),
            &never(),
        )
        .await
        .unwrap();
    assert_eq!(out.end, CommandEnd::Exited(0), "{out:?}");
    assert!(marker.exists());
}

#[tokio::test]
async fn a_sandboxed_command_reaches_only_the_users_allow_list_through_the_proxy() {
    let registry = crate::egress::HostService::start("registry-ok");
    let elsewhere = crate::egress::HostService::start("elsewhere-ok");
    let tmp = tempfile::tempdir().unwrap();
    let tree = tmp.path().join("tree");
    fs::create_dir_all(&tree).unwrap();
    // The default network policy (the allow-list), with one rule of the user's.
    let engine = engine_with(
        SandboxConfig {
            backend: BackendChoice::Bubblewrap,
            network_allow: vec![registry.address().parse::<AllowRule>().unwrap()],
            ..SandboxConfig::default()
        },
        &[],
    );
    let listed = format!("http://{}/pkg", registry.address());
    let unlisted = format!("http://{}/secret", elsewhere.address());
    let direct = elsewhere.address();
    let script = format!(
        "{fake} net-probe --proxy-get {listed},{unlisted} --connect {direct} --pid-file pids",
        fake = corral_test_support::fake_agent_path().display()
    );
    let out = engine
        .run(CommandSpec::shell(&script, &tree, LONG), &never())
        .await
        .unwrap();
    assert_eq!(out.end, CommandEnd::Exited(0), "{out:?}");
    // The fake prints one JSON line per probe, its text starting with the probe's name.
    let said = |prefix: &str| {
        out.stdout
            .text
            .lines()
            .find(|line| line.contains(&format!("\"{prefix}")))
            .map(str::to_string)
            .unwrap_or_else(|| panic!("no line starting with {prefix:?} in {out:?}"))
    };
    assert!(
        said(&format!("proxy-get {listed}:")).contains("ok (HTTP/1.1 200 OK) registry-ok"),
        "{out:?}"
    );
    assert!(
        said(&format!("proxy-get {unlisted}:")).contains("denied (HTTP/1.1 403 Forbidden"),
        "{out:?}"
    );
    assert!(
        !said(&format!("connect {direct}:")).contains(": ok"),
        "a direct connection went past the proxy: {out:?}"
    );
    assert_eq!(elsewhere.connections(), 0, "the unlisted host was reached");
    assert!(
        registry.connections() >= 1,
        "the listed host, through the proxy"
    );
}

/// Runs git for the fixture (identity, no hooks), outside the runner.
fn fixture_git(dir: &Path, args: &[&str]) {
    corral_test_support::git_ok(
        dir,
        &[
            "-c",
            "user.name=Corral Test",
            "-c",
            "user.email=test@corral.invalid",
            "-c",
            "init.defaultBranch=main",
            "-c",
            "core.hooksPath=/dev/null",
        ],
        args,
    );
}

fn git_spec(args: &[&str], cwd: &Path) -> CommandSpec {
    let mut spec = CommandSpec::git(args.iter().copied(), cwd, LONG);
    spec.env = vec![
        ("GIT_AUTHOR_NAME".into(), "Corral".into()),
        ("GIT_AUTHOR_EMAIL".into(), "corral@corral.invalid".into()),
        ("GIT_COMMITTER_NAME".into(), "Corral".into()),
        ("GIT_COMMITTER_EMAIL".into(), "corral@corral.invalid".into()),
    ];
    spec
}

/// What an agent that owns the repository plants for Corral's git on the host: a program behind
/// every key and file that can name one. Status, add, commit, diff, log and a merge all work,
/// and none of them runs.
#[tokio::test]
async fn host_git_runs_nothing_the_repository_planted() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().canonicalize().unwrap();
    let repo = root.join("repo");
    let markers = root.join("markers");
    fs::create_dir_all(&repo).unwrap();
    fs::create_dir_all(&markers).unwrap();
    fixture_git(&repo, &["init", "-q"]);
    fs::write(repo.join("a.txt"), "one\n").unwrap();
    fixture_git(&repo, &["add", "-A"]);
    fixture_git(&repo, &["commit", "-q", "-m", "init"]);
    fixture_git(&repo, &["branch", "side"]);

    let payload = root.join("payload.sh");
    fs::write(
        &payload,
        format!("#!/bin/sh\ntouch '{}'/\"$1\"\ncat\n", markers.display()),
    )
    .unwrap();
    fs::set_permissions(&payload, fs::Permissions::from_mode(0o755)).unwrap();
    let run = |what: &str| format!("\"{} {what}\"", payload.display());
    let mut config = fs::read_to_string(repo.join(".git/config")).unwrap();
    config.push_str(&format!(
        "[core]\n\tfsmonitor = {fsmonitor}\n\thooksPath = .git/agent-hooks\n\tpager = {pager}\n\teditor = {editor}\n\
         [filter \"x\"]\n\tclean = {clean}\n\tsmudge = {smudge}\n\tprocess = {process}\n\trequired = true\n\
         [merge \"m\"]\n\tdriver = {merge}\n\
         [diff]\n\texternal = {diff}\n\
         [diff \"x\"]\n\ttextconv = {textconv}\n\tcommand = {diffcmd}\n\
         [commit]\n\tgpgSign = true\n[gpg]\n\tprogram = {gpg}\n",
        fsmonitor = run("fsmonitor"),
        pager = run("pager"),
        editor = run("editor"),
        clean = run("clean"),
        smudge = run("smudge"),
        process = run("process"),
        merge = run("merge-driver"),
        diff = run("diff-external"),
        textconv = run("textconv"),
        diffcmd = run("diff-command"),
        gpg = run("gpg"),
    ));
    fs::write(repo.join(".git/config"), config).unwrap();
    fs::write(repo.join(".gitattributes"), "* filter=x diff=x merge=m\n").unwrap();
    for hooks in [".git/hooks", ".git/agent-hooks"] {
        fs::create_dir_all(repo.join(hooks)).unwrap();
        for hook in [
            "pre-commit",
            "commit-msg",
            "post-commit",
            "post-checkout",
            "post-merge",
            "reference-transaction",
            "post-index-change",
        ] {
            let path = repo.join(format!("{hooks}/{hook}"));
            fs::write(
                &path,
                format!("#!/bin/sh\n{} hook-{hook}\n", payload.display()),
            )
            .unwrap();
            fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
        }
    }

    let engine = native(&[]);
    let git = |args: &'static [&'static str]| {
        let engine = Arc::clone(&engine);
        let spec = git_spec(args, &repo);
        async move {
            let out = engine.run(spec, &never()).await.unwrap();
            assert!(out.success(), "git {args:?}: {out:?}");
            out
        }
    };
    fs::write(repo.join("a.txt"), "two\n").unwrap();
    let status = git(&["status", "--porcelain"]).await;
    assert!(status.stdout.text.contains("a.txt"), "{status:?}");
    git(&["add", "-A"]).await;
    git(&["commit", "-q", "-m", "change"]).await;
    let diff = git(&["diff", "HEAD~1"]).await;
    assert!(diff.stdout.text.contains("+two"), "a real diff: {diff:?}");
    let log = git(&["log", "-p", "-1"]).await;
    assert!(log.stdout.text.contains("+two"), "{log:?}");
    git(&["checkout", "-q", "side"]).await;
    fs::write(repo.join("b.txt"), "side\n").unwrap();
    git(&["add", "-A"]).await;
    git(&["commit", "-q", "-m", "side"]).await;
    git(&["checkout", "-q", "main"]).await;
    git(&["merge", "-q", "--no-edit", "side"]).await;

    let ran: Vec<String> = fs::read_dir(&markers)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(ran.is_empty(), "the repository ran on the host: {ran:?}");
}

#[tokio::test]
async fn host_git_is_git_with_its_subcommand_first_or_refused() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let not_git = CommandSpec {
        confinement: Confinement::HostGit,
        read_only: Vec::new(),
        ..CommandSpec::shell(&format!("touch {}", marker.display()), dir.path(), LONG)
    };
    let err = native(&[]).run(not_git, &never()).await.unwrap_err();
    assert!(matches!(err, CommandError::Refused { .. }), "{err}");
    assert!(!err.is_retryable());
    assert!(!marker.exists());

    for args in [
        &["-c", "core.hooksPath=.git/hooks", "status"][..],
        &["--exec-path=/tmp", "status"][..],
        &[][..],
    ] {
        let err = native(&[])
            .run(
                CommandSpec::git(args.iter().copied(), dir.path(), LONG),
                &never(),
            )
            .await
            .unwrap_err();
        assert!(
            matches!(err, CommandError::Refused { .. }),
            "{args:?}: {err}"
        );
    }
}

/// The driver listing is kept between host git commands while the repository's configuration
/// is unchanged, and a driver planted after it was kept is still emptied: `.git/config`
/// replaced, rewritten in place with the same size and mtime (only its ctime moves), made to
/// include a new file, and an include target that appears later.
#[tokio::test]
async fn host_git_keeps_the_driver_listing_only_while_the_configuration_is_unchanged() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().canonicalize().unwrap();
    let repo = root.join("repo");
    let bin = root.join("bin");
    fs::create_dir_all(&repo).unwrap();
    fs::create_dir_all(&bin).unwrap();
    fixture_git(&repo, &["init", "-q"]);
    fs::write(repo.join(".gitattributes"), "*.txt filter=evil\n").unwrap();
    fs::write(repo.join("a.txt"), "0\n").unwrap();
    fixture_git(&repo, &["add", "-A"]);
    fixture_git(&repo, &["commit", "-q", "-m", "init"]);

    // Every git the engine starts, logged.
    let log = root.join("git.log");
    let real_git = corral_test_support::command(Path::new("sh"))
        .args(["-c", "command -v git"])
        .output()
        .unwrap();
    let real_git = String::from_utf8(real_git.stdout).unwrap();
    fs::write(
        bin.join("git"),
        format!(
            "#!/bin/sh\necho \"$*\" >> '{}'\nexec '{}' \"$@\"\n",
            log.display(),
            real_git.trim()
        ),
    )
    .unwrap();
    fs::set_permissions(bin.join("git"), fs::Permissions::from_mode(0o755)).unwrap();
    let listings = || {
        fs::read_to_string(&log)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains("config --null"))
            .count()
    };

    let marker = root.join("filter-ran");
    let clean = format!("touch {}; cat", marker.display());
    let config = repo.join(".git/config");
    let original = fs::read_to_string(&config).unwrap();
    // Two sections of the same size: the first names no driver, the second plants one.
    let harmless = format!("{original}[foobar \"evil\"]\n\tclean = \"{clean}\"\n");
    let planted = format!("{original}[filter \"evil\"]\n\tclean = \"{clean}\"\n");
    let harmless_include = format!("{original}[foobarx]\n\tpath = evil.cfg\n");
    let include = format!("{original}[include]\n\tpath = evil.cfg\n");
    assert_eq!(harmless.len(), planted.len());
    assert_eq!(harmless_include.len(), include.len());
    let evil = repo.join(".git/evil.cfg");
    let evil_text = format!("[filter \"evil\"]\n\tclean = \"{clean}\"\n");

    let mut path = bin.display().to_string();
    path.push(':');
    path.push_str(&host_path());
    let engine: Arc<dyn CommandRunner> = Arc::new(Engine::new(EngineConfig {
        ambient_env: Some(vec![("PATH".into(), path)]),
        kill_grace: Duration::from_millis(200),
        sandbox: SandboxConfig {
            backend: BackendChoice::Native,
            allow_degraded_native: true,
            ..SandboxConfig::default()
        },
        ..EngineConfig::default()
    }));
    let git = |args: &'static [&'static str]| {
        let engine = Arc::clone(&engine);
        let spec = git_spec(args, &repo);
        async move {
            let out = engine.run(spec, &never()).await.unwrap();
            assert!(out.success(), "git {args:?}: {out:?}");
            out
        }
    };
    // In place: same inode, same size, the mtime set back; only the ctime tells.
    let rewrite_in_place = |text: &str| {
        let before = fs::metadata(&config).unwrap().modified().unwrap();
        let mut file = fs::OpenOptions::new().write(true).open(&config).unwrap();
        std::io::Write::write_all(&mut file, text.as_bytes()).unwrap();
        file.set_times(fs::FileTimes::new().set_modified(before))
            .unwrap();
    };
    let replace = |text: &str| {
        let next = repo.join(".git/config.next");
        fs::write(&next, text).unwrap();
        fs::rename(&next, &config).unwrap();
    };

    type Plant<'a> = (&'a str, &'a str, Box<dyn Fn() + 'a>);
    let plants: Vec<Plant<'_>> = vec![
        (
            "replaced",
            harmless.as_str(),
            Box::new(|| replace(&planted)),
        ),
        (
            "rewritten in place",
            harmless.as_str(),
            Box::new(|| rewrite_in_place(&planted)),
        ),
        (
            "made to include a new file",
            harmless_include.as_str(),
            Box::new(|| {
                fs::write(&evil, &evil_text).unwrap();
                rewrite_in_place(&include);
            }),
        ),
    ];
    for (n, (how, start, plant)) in plants.into_iter().enumerate() {
        let _ = fs::remove_file(&evil);
        replace(start);
        let listed = listings();
        git(&["status", "--porcelain"]).await;
        git(&["status", "--porcelain"]).await;
        assert_eq!(
            listings(),
            listed + 1,
            "{how}: the second command used the kept listing"
        );
        plant();
        fs::write(repo.join("a.txt"), format!("{n}+1\n")).unwrap();
        git(&["add", "a.txt"]).await;
        assert!(!marker.exists(), "{how}: the planted filter ran");
        assert!(listings() > listed + 1, "{how}: listed again");
    }

    // An include of a file that is not there yet: nothing is kept, so the file appearing
    // later with a driver in it is seen.
    let _ = fs::remove_file(&evil);
    replace(&include);
    git(&["status", "--porcelain"]).await;
    fs::write(&evil, &evil_text).unwrap();
    fs::write(repo.join("a.txt"), "late\n").unwrap();
    git(&["add", "a.txt"]).await;
    assert!(!marker.exists(), "the filter of the late include ran");
    let staged = git(&["diff", "--cached", "--", "a.txt"]).await;
    assert!(staged.stdout.text.contains("+late"), "{staged:?}");
}
