//! What the default sandbox holds against an agent's own commands, end to end through `corral
//! run`, Corral's real Claude adapter and a stand-in Claude Code ([`FakeClaude`]) whose shell
//! does what issues 10 and 16 did as an attacker; every effect is checked on the host
//! afterwards. CI runs these as root, the case the sandbox used to lose.

use std::path::Path;

use crate::support::*;

/// Runs `corral run` with an agent whose commands are `acts`, expecting success; the run
/// directory.
fn run_agent(env: &Env, acts: &str) -> std::path::PathBuf {
    let agent = FakeClaude::new(
        env,
        &format!("{acts}\nprintf '%s' '{GOOD_SIGNALS}' > \"$SIGNALS\""),
        &[FakeClaude::init("fake"), FakeClaude::result("done", 0.001)],
        "",
    );
    let (name, path) = agent.setting();
    let out = env
        .corral()
        .env(name, &path)
        .args(["run", "--json", "do the task"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}\nthe run's records (but the CLI's lines):\n{}",
        transcript(env, &out),
        engine_records(env)
    );
    run_dir(&summary(&out.stdout))
}

/// Every record but the CLI's own lines in the project's only run directory: what the inside
/// check saw, how the CLI ended, for a failure message.
fn engine_records(env: &Env) -> String {
    let Some(dir) = only_run_dir(&env.project()) else {
        return "(no run directory)".to_string();
    };
    log(&dir)
        .iter()
        .filter(|r| r["kind"] != "agent")
        .map(|r| format!("  {r}\n"))
        .collect()
}

/// `key=value` lines the agent wrote into `file` of the work tree.
fn report(file: &Path) -> Vec<(String, String)> {
    std::fs::read_to_string(file)
        .unwrap_or_else(|e| panic!("the agent's report {}: {e}", file.display()))
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect()
}

fn value<'a>(report: &'a [(String, String)], key: &str) -> &'a str {
    report
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
        .unwrap_or_else(|| panic!("{key} missing from the agent's report: {report:?}"))
}

/// Issue 10 item 1: as root inside bubblewrap the agent kept every capability
/// (`CapEff 000001fffeffffff`), remounted `/` read-write and wrote anywhere, while the
/// attestation said writes-confined. Now: no capability in any set, `no_new_privs`, no remount,
/// no new mount namespace, a write outside lands nowhere, a SysV queue stays inside.
#[test]
fn the_agent_holds_no_capability_cannot_remount_and_writes_nothing_outside() {
    let env = Env::new();
    let outside = env.dir.path().join("outside.txt");
    let probe = env.project().join("probe.txt");
    let dir = run_agent(
        &env,
        &format!(
            r#"{{
  sed -n 's/^\(CapInh\|CapPrm\|CapEff\|CapBnd\|CapAmb\|NoNewPrivs\):[[:space:]]*/\1=/p' /proc/self/status
  echo "uid=$(id -u)"
  if mount -o remount,rw / 2>/dev/null; then echo remount=done; else echo remount=refused; fi
  mkdir cover
  if mount -t tmpfs none cover 2>/dev/null; then echo tmpfs=done; else echo tmpfs=refused; fi
  if unshare -m true 2>/dev/null; then echo unshare-mount=done; else echo unshare-mount=refused; fi
  if echo escaped > '{outside}' 2>/dev/null; then echo write-outside=done; else echo write-outside=refused; fi
  ipcmk -Q >/dev/null 2>&1
  echo "queue=$(awk 'NR == 2 {{ print $1 }}' /proc/sysvipc/msg)"
}} > probe.txt 2>&1"#,
            outside = outside.display()
        ),
    );
    let seen = report(&probe);
    for set in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
        assert_eq!(value(&seen, set), "0000000000000000", "{set}: {seen:?}");
    }
    assert_eq!(value(&seen, "NoNewPrivs"), "1", "{seen:?}");
    for act in ["remount", "tmpfs", "unshare-mount", "write-outside"] {
        assert_eq!(value(&seen, act), "refused", "{act}: {seen:?}");
    }
    assert!(!outside.exists(), "the write outside landed on the host");
    let queue = value(&seen, "queue");
    assert!(!queue.is_empty(), "the agent made no queue: {seen:?}");
    assert!(
        !host_queue_keys().contains(&queue.to_string()),
        "the agent's SysV queue {queue} is the host's"
    );
    if corral_test_support::is_root() {
        // Root is somebody else inside (see the engine's `isolation_args`): nothing inside
        // looks like the host's root.
        assert_ne!(value(&seen, "uid"), "0", "{seen:?}");
    }
    // The attestation says what held.
    let attestation = &record(&dir)["attestation"];
    assert_eq!(attestation["actualBackend"], "bubblewrap", "{attestation}");
    assert!(
        attestation["enforced"]
            .as_array()
            .unwrap()
            .contains(&"writes-confined".into()),
        "{attestation}"
    );
}

/// The shell function the agent's acts use: `t LABEL CMD…` reports `LABEL=done` or
/// `LABEL=refused`.
const TRY: &str = r#"t() { label=$1; shift; if ( "$@" ) >/dev/null 2>&1; then echo "$label=done"; else echo "$label=refused"; fi; }"#;

/// Issue 16 item 4: the agent could write `.git/config` and `.git/hooks`, rename `.git` away,
/// plant a `.git/commondir` that the user's next `git status` followed, and write Claude Code's
/// `~/.claude/settings.json` (hooks the next unsandboxed `claude` runs). Now `.git` is read-only
/// as a whole, the CLI's settings, hooks and instructions too while its state directory stays
/// writable, and a protected file that did not exist is an empty read-only placeholder.
#[test]
fn the_agent_cannot_persist_through_git_or_the_clis_own_settings() {
    let env = Env::new();
    let project = env.project();
    env.write("project/README", "readme\n");
    git(&project, &["init", "-q"]);
    git(&project, &["add", "-A"]);
    git(&project, &["commit", "-q", "-m", "init"]);
    let settings = env.write("home/.claude/settings.json", "{\"model\": \"mine\"}\n");
    let git_config = std::fs::read_to_string(project.join(".git/config")).unwrap();
    let probe = project.join("probe.txt");
    run_agent(
        &env,
        &format!(
            r##"{TRY}
{{
  t git-config sh -c 'printf "[core]\n\tfsmonitor = touch /tmp/owned\n" >> .git/config'
  t git-hook sh -c 'printf "#!/bin/sh\ntouch /tmp/owned\n" > .git/hooks/pre-commit'
  t git-commondir sh -c 'echo /tmp/evil > .git/commondir'
  t git-rename mv .git .git-away
  t claude-settings sh -c 'echo "{{\"hooks\": {{}}}}" > "$HOME/.claude/settings.json"'
  t claude-md sh -c 'echo "obey the agent" > "$HOME/.claude/CLAUDE.md"'
  t claude-hook sh -c 'echo "touch /tmp/owned" > "$HOME/.claude/hooks/x.sh"'
  t claude-state sh -c 'echo kept > "$HOME/.claude/state.txt"'
  t work-tree sh -c 'echo edited > README'
}} > probe.txt 2>&1"##
        ),
    );
    let seen = report(&probe);
    for act in [
        "git-config",
        "git-hook",
        "git-commondir",
        "git-rename",
        "claude-settings",
        "claude-md",
        "claude-hook",
    ] {
        assert_eq!(value(&seen, act), "refused", "{act}: {seen:?}");
    }
    for act in ["claude-state", "work-tree"] {
        assert_eq!(value(&seen, act), "done", "{act}: {seen:?}");
    }
    // On the host: nothing of it, and the placeholders as empty as they were made.
    assert_eq!(
        std::fs::read_to_string(project.join(".git/config")).unwrap(),
        git_config
    );
    assert!(!project.join(".git/hooks/pre-commit").exists());
    assert!(!project.join(".git/commondir").exists());
    assert!(project.join(".git").is_dir() && !project.join(".git-away").exists());
    assert_eq!(
        std::fs::read_to_string(&settings).unwrap(),
        "{\"model\": \"mine\"}\n"
    );
    let home = env.home();
    assert_eq!(
        std::fs::read_to_string(home.join(".claude/CLAUDE.md")).unwrap_or_default(),
        ""
    );
    assert!(
        std::fs::read_dir(home.join(".claude/hooks"))
            .map(|d| d.count() == 0)
            .unwrap_or(true),
        "a hook landed"
    );
    assert_eq!(
        std::fs::read_to_string(home.join(".claude/state.txt")).unwrap(),
        "kept\n",
        "the state directory stays writable"
    );
    assert_eq!(
        std::fs::read_to_string(project.join("README")).unwrap(),
        "edited\n"
    );
}

/// Issue 16 item 5: a write through a hard link that already existed in the work tree landed in
/// the file's other name, outside. Now such a file is bound read-only and named in the
/// attestation; a new link to a file outside cannot be made from inside at all.
#[test]
fn a_hard_link_into_the_work_tree_is_read_only_and_named() {
    let env = Env::new();
    let outside = env.write("outside/target.txt", "original\n");
    let linked = env.project().join("linked.txt");
    std::fs::hard_link(&outside, &linked).unwrap();
    let other = env.write("outside/other.txt", "other\n");
    let probe = env.project().join("probe.txt");
    let dir = run_agent(
        &env,
        &format!(
            r#"{TRY}
{{
  t write-through-link sh -c 'echo owned > linked.txt'
  t new-link ln '{other}' new-link.txt
  t plain-file sh -c 'echo fine > plain.txt'
}} > probe.txt 2>&1"#,
            other = other.display()
        ),
    );
    let seen = report(&probe);
    assert_eq!(value(&seen, "write-through-link"), "refused", "{seen:?}");
    assert_eq!(value(&seen, "new-link"), "refused", "{seen:?}");
    assert_eq!(value(&seen, "plain-file"), "done", "{seen:?}");
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "original\n");
    assert!(!env.project().join("new-link.txt").exists());
    let attestation = &record(&dir)["attestation"];
    assert_eq!(
        attestation["readOnlyLinks"],
        serde_json::json!([linked.display().to_string()]),
        "{attestation}"
    );
}

/// Issue 16 item 1: with the default home (visible, read-only), `~/.ssh/id_rsa` and
/// `~/.aws/credentials` were readable to the agent. Now the user's credentials for other
/// services are hidden, while the CLI's own state (its credentials) stays readable.
#[test]
fn the_users_other_credentials_are_not_readable_to_the_agent() {
    let env = Env::new();
    let planted = [
        ".ssh/id_rsa",
        ".aws/credentials",
        ".gnupg/private-keys-v1.d/key",
        ".netrc",
        ".config/gh/hosts.yml",
        ".docker/config.json",
        ".kube/config",
        ".git-credentials",
    ];
    for rel in planted {
        env.write(&format!("home/{rel}"), "SECRET\n");
    }
    env.write("home/.claude/.credentials.json", "CLI-OWN\n");
    env.write("home/.gitconfig", "[user]\n\tname = T\n");
    let probe = env.project().join("probe.txt");
    let acts: String = planted
        .iter()
        .map(|rel| format!("  t '{rel}' grep -q SECRET \"$HOME/{rel}\"\n"))
        .collect();
    run_agent(
        &env,
        &format!(
            r#"{TRY}
{{
{acts}  t claude-credentials grep -q CLI-OWN "$HOME/.claude/.credentials.json"
  t gitconfig grep -q name "$HOME/.gitconfig"
}} > probe.txt 2>&1"#
        ),
    );
    let seen = report(&probe);
    for rel in planted {
        assert_eq!(value(&seen, rel), "refused", "{rel} readable: {seen:?}");
    }
    assert_eq!(value(&seen, "claude-credentials"), "done", "{seen:?}");
    assert_eq!(value(&seen, "gitconfig"), "done", "{seen:?}");
    // Hidden, not removed.
    assert_eq!(
        std::fs::read_to_string(env.home().join(".ssh/id_rsa")).unwrap(),
        "SECRET\n"
    );
}

/// Issue 16 item 3: no seccomp filter stood between the agent and `ptrace`, `io_uring` or
/// `clone3`. Now bubblewrap installs Corral's (`Seccomp: 2` inside): `ptrace` and `io_uring_setup`
/// fail with `EPERM`, `clone3` with `ENOSYS`. Issue 29 item 2: a nested user namespace, left
/// open for Codex's own sandbox, is refused too (bubblewrap's `--disable-userns`).
#[cfg(target_arch = "x86_64")]
#[test]
fn a_seccomp_filter_refuses_ptrace_io_uring_and_clone3() {
    let env = Env::new();
    let probe = env.project().join("probe.txt");
    // `syscall(nr, …)` through Python's ctypes; exit 1 (reported `refused`) when it failed with
    // the errno given, 0 otherwise.
    let call = |nr: u32, errno: u32| {
        format!(
            "/usr/bin/python3 -c 'import ctypes, sys; c = ctypes.CDLL(None, use_errno=True); r = c.syscall({nr}, 1, None); sys.exit(1 if r == -1 and ctypes.get_errno() == {errno} else 0)'"
        )
    };
    run_agent(
        &env,
        &format!(
            r#"{TRY}
{{
  sed -n 's/^Seccomp:[[:space:]]*/seccomp=/p' /proc/self/status
  t ptrace strace -o /dev/null true
  t io-uring {io_uring}
  t clone3 {clone3}
  t nested-user-namespace unshare -U true
}} > probe.txt 2>&1"#,
            io_uring = call(425, 1),
            clone3 = call(435, 38),
        ),
    );
    let seen = report(&probe);
    assert_eq!(value(&seen, "seccomp"), "2", "{seen:?}");
    for act in ["ptrace", "io-uring", "clone3"] {
        assert_eq!(value(&seen, act), "refused", "{act}: {seen:?}");
    }
    assert_eq!(value(&seen, "nested-user-namespace"), "refused", "{seen:?}");
}

/// Issue 16 item 6: the sandbox is checked from inside before the CLI runs, and `run.json`
/// records what was seen. Issue 10 item 3's impostor (a `sandbox.bwrap` that drops every option
/// and executes the command) left the attestation saying bubblewrap, writes-confined: now the
/// check sees the supervisor's namespaces, root's capabilities and a write that landed on the
/// host, so the run refuses before the agent ran; with consent it runs and attests nothing.
#[test]
fn the_sandbox_is_checked_from_inside_and_an_impostor_bubblewrap_attests_nothing() {
    let env = Env::new();
    let dir = run_agent(&env, "true");
    let attestation = &record(&dir)["attestation"];
    let seen = &attestation["checkedInside"];
    for set in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
        assert_eq!(seen["status"][set], "0000000000000000", "{set}: {seen}");
    }
    assert_eq!(seen["status"]["NoNewPrivs"], "1", "{seen}");
    assert_eq!(seen["status"]["Seccomp"], "2", "{seen}");
    for ns in ["user", "mnt", "pid", "ipc", "net"] {
        assert_eq!(seen["namespaces"][ns], "own", "{ns}: {seen}");
    }
    assert_eq!(seen["writeOutside"]["landed"], false, "{seen}");
    let outside = seen["writeOutside"]["path"].as_str().unwrap();
    assert!(
        !Path::new(outside).parent().unwrap().exists(),
        "the probe's directory outside is left behind: {outside}"
    );
    for g in ["writes-confined", "tree-contained", "egress-confined"] {
        assert!(
            attestation["enforced"]
                .as_array()
                .unwrap()
                .contains(&g.into()),
            "{g}: {attestation}"
        );
    }
    assert_eq!(kinds(&log(&dir), "sandbox_checked").len(), 1);

    // The impostor.
    let impostor = env.write(
        "impostor/bwrap",
        "#!/bin/sh\nwhile [ \"$#\" -gt 0 ] && [ \"$1\" != -- ]; do shift; done\nshift\nexec \"$@\"\n",
    );
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&impostor, std::fs::Permissions::from_mode(0o755)).unwrap();
    let ran = env.dir.path().join("the-agent-ran");
    let agent = FakeClaude::new(
        &env,
        &format!(
            "touch '{}'\nprintf '%s' '{GOOD_SIGNALS}' > \"$SIGNALS\"",
            ran.display()
        ),
        &[FakeClaude::init("fake"), FakeClaude::result("done", 0.001)],
        "",
    );
    let (name, path) = agent.setting();
    let run = |consent: bool| {
        let mut cmd = env.corral();
        cmd.env(name, &path)
            .env("CORRAL_SANDBOX__BWRAP", &impostor)
            .args(["run", "--json"]);
        if consent {
            cmd.arg("--allow-degraded-native");
        }
        cmd.arg("do the task").output().unwrap()
    };
    let refused = run(false);
    let text = transcript(&env, &refused);
    assert_eq!(refused.status.code(), Some(2), "{text}");
    assert!(
        text.contains("writes-confined") && text.contains("checked from inside"),
        "{text}"
    );
    assert!(!ran.exists(), "the agent ran under the impostor: {text}");
    let dir = run_dir(&summary(&refused.stdout));
    let records = log(&dir);
    let checked = kinds(&records, "sandbox_checked");
    assert_eq!(checked.len(), 1, "{text}");
    assert_eq!(checked[0]["seen"]["namespaces"]["user"], "supervisors");
    assert_eq!(checked[0]["seen"]["writeOutside"]["landed"], true);
    let recorded = &record(&dir)["attestation"];
    assert!(
        recorded.is_null()
            || !recorded["enforced"]
                .as_array()
                .unwrap()
                .contains(&"writes-confined".into()),
        "{recorded}"
    );

    // With consent: it runs, and nothing it asked for is attested.
    let degraded = run(true);
    let text = transcript(&env, &degraded);
    assert_eq!(degraded.status.code(), Some(0), "{text}");
    assert!(ran.exists(), "{text}");
    let attestation = &record(&run_dir(&summary(&degraded.stdout)))["attestation"];
    assert_eq!(
        attestation["enforced"],
        serde_json::json!([]),
        "{attestation}"
    );
    let unenforced: Vec<&str> = attestation["notEnforced"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["guarantee"].as_str().unwrap())
        .collect();
    for g in ["writes-confined", "tree-contained", "egress-confined"] {
        assert!(unenforced.contains(&g), "{g}: {attestation}");
    }
    assert_eq!(attestation["consent"], "allow_degraded_native");
    assert_eq!(
        attestation["checkedInside"]["namespaces"]["mnt"],
        "supervisors"
    );
}

/// Issue 10 item 8: outside a git repository the stray-write check is skipped, yet the
/// attestation read `stray_writes: []`, which says "clean". Now "not checked" is recorded as
/// such, with why, in `run.json`, the JSON summary and the plain one; in a repository the same
/// run reads checked.
#[test]
fn outside_a_git_repository_the_stray_check_reads_not_checked() {
    let env = Env::new();
    let agent = FakeClaude::new(
        &env,
        &format!("printf '%s' '{GOOD_SIGNALS}' > \"$SIGNALS\""),
        &[FakeClaude::init("fake"), FakeClaude::result("done", 0.001)],
        "",
    );
    let (name, path) = agent.setting();
    let run = |json: bool| {
        let mut cmd = env.corral();
        cmd.env(name, &path).arg("run");
        if json {
            cmd.arg("--json");
        }
        let out = cmd.arg("do the task").output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", transcript(&env, &out));
        out
    };
    let out = run(true);
    let summary = summary(&out.stdout);
    assert_eq!(summary["strayCheck"], "not-checked", "{summary}");
    assert_eq!(summary["strayWrites"], serde_json::Value::Null, "{summary}");
    assert!(
        summary["strayCheckWhy"]
            .as_str()
            .is_some_and(|w| w.contains("not in a git work tree")),
        "{summary}"
    );
    let attestation = &record(&run_dir(&summary))["attestation"];
    assert_eq!(attestation["strayCheck"], "not-checked", "{attestation}");
    let plain = env.clean(&run(false).stderr);
    assert!(
        plain.contains("strays    not checked: the working directory is not in a git work tree"),
        "{plain}"
    );

    // In a repository: checked, and clean.
    env.write("project/README", "readme\n");
    git(&env.project(), &["init", "-q"]);
    git(&env.project(), &["add", "-A"]);
    git(&env.project(), &["commit", "-q", "-m", "init"]);
    let summary = crate::support::summary(&run(true).stdout);
    assert_eq!(summary["strayCheck"], "checked", "{summary}");
    assert_eq!(summary["strayWrites"], serde_json::json!([]), "{summary}");
    assert_eq!(
        record(&run_dir(&summary))["attestation"]["strayCheck"],
        "checked"
    );
}

/// Issue 10 item 8: `--cwd /` bound the whole filesystem writable while the attestation said
/// writes-confined; the home, or a directory holding it, is as wide in effect. Now each is
/// refused (exit 2, naming the path and why) before the agent runs; with consent the run goes
/// ahead with writes-confined recorded as not enforced.
#[test]
fn a_work_tree_that_is_the_whole_filesystem_or_holds_the_home_is_refused() {
    let env = Env::new();
    // In the home, which every one of the trees below holds: the agent would write it if it ran.
    let ran = env.home().join("the-agent-ran");
    let agent = FakeClaude::new(
        &env,
        &format!(
            "touch '{}'\nprintf '%s' '{GOOD_SIGNALS}' > \"$SIGNALS\"",
            ran.display()
        ),
        &[FakeClaude::init("fake"), FakeClaude::result("done", 0.001)],
        "",
    );
    let (name, path) = agent.setting();
    let runs = env.dir.path().join("runs");
    let run = |cwd: &Path, consent: bool| {
        let mut cmd = env.corral();
        cmd.env(name, &path)
            .env("CORRAL_RUN__RUNS_DIR", &runs)
            .args(["run", "--json", "--cwd"])
            .arg(cwd);
        if consent {
            cmd.arg("--allow-degraded-native");
        }
        let out = cmd.arg("do the task").output().unwrap();
        (out.status.code(), transcript(&env, &out), out.stdout)
    };
    for (cwd, why) in [
        (Path::new("/").to_path_buf(), "is the whole filesystem"),
        (env.home(), "is the home directory"),
        (env.dir.path().to_path_buf(), "holds the home directory"),
    ] {
        let (code, text, _) = run(&cwd, false);
        assert_eq!(code, Some(2), "{}: {text}", cwd.display());
        assert!(
            text.contains(&format!(
                "{} {why}",
                env.clean(cwd.display().to_string().as_bytes())
            )) && text.contains("writes-confined"),
            "{}: {text}",
            cwd.display()
        );
        assert!(!ran.exists(), "{}: the agent ran: {text}", cwd.display());
    }
    let (code, text, stdout) = run(&env.home(), true);
    assert_eq!(code, Some(0), "{text}");
    assert!(ran.exists(), "{text}");
    let attestation = &record(&run_dir(&summary(&stdout)))["attestation"];
    assert!(
        !attestation["enforced"]
            .as_array()
            .unwrap()
            .contains(&"writes-confined".into()),
        "{attestation}"
    );
    let unenforced = &attestation["notEnforced"][0];
    assert_eq!(unenforced["guarantee"], "writes-confined", "{attestation}");
    assert!(
        unenforced["why"].as_str().unwrap().contains("too wide"),
        "{attestation}"
    );
    assert_eq!(attestation["consent"], "allow_degraded_native");
}

/// Every path under `root` but Corral's own `.corral`, sorted.
fn tree(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().map(Result::unwrap) {
            let path = entry.path();
            if entry.file_name() == ".corral" {
                continue;
            }
            if entry.file_type().unwrap().is_dir() {
                pending.push(path.clone());
            }
            out.push(path.strip_prefix(root).unwrap().display().to_string());
        }
    }
    out.sort();
    out
}

/// Issue 10 item 8: the placeholders made so that a missing protected path could be bound
/// read-only (an empty `.git` in a tree that is no repository, `{}` for Claude Code's
/// `settings.json`, empty `CLAUDE.md` and `hooks/`) stayed on the host after the run. Now the
/// untouched ones are removed: the tree, the home's CLI configuration and `git status` are as
/// they were.
#[test]
fn a_run_leaves_no_placeholder_behind() {
    let env = Env::new();
    let project = env.project();
    env.write("project/README", "readme\n");
    let before = tree(&project);
    run_agent(&env, "true");
    assert_eq!(tree(&project), before, "the work tree changed");
    let claude = env.home().join(".claude");
    for rel in [
        "settings.json",
        "CLAUDE.md",
        "hooks",
        "commands",
        "agents",
        "skills",
    ] {
        assert!(!exists(&claude.join(rel)), "{rel} left in ~/.claude");
    }

    // In a repository: `git status` as it was.
    git(&project, &["init", "-q"]);
    git(&project, &["add", "-A"]);
    git(&project, &["commit", "-q", "-m", "init"]);
    let status = || {
        let out = corral_test_support::command(Path::new("git"))
            .current_dir(&project)
            .args(["status", "--porcelain", "--ignored"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let before = (status(), tree(&project));
    run_agent(&env, "true");
    assert_eq!((status(), tree(&project)), before);
}

/// Issue 10 item 8: the run directory's record was writable by the agent, which could delete
/// the execution log or forge `run.json`. Now every record file there at the start (the log,
/// `run.json`, the prompt, the stream files) is read-only to it and cannot be renamed or removed,
/// while `signals.json` stays writable (the run succeeds on it); afterwards the record is whole.
#[test]
fn the_agent_cannot_forge_or_delete_corrals_record_of_the_run() {
    let env = Env::new();
    let probe = env.project().join("probe.txt");
    let mut acts = String::from(TRY);
    acts.push_str("\n{\n");
    for name in ["events.jsonl", "run.json", "prompt.md", "raw"] {
        acts.push_str(&format!(
            "  t 'delete-{name}' rm -rf \"$RUN_DIR/{name}\"\n  t 'rename-{name}' mv \"$RUN_DIR/{name}\" \"$RUN_DIR/{name}.away\"\n  t 'overwrite-{name}' sh -c 'echo forged > \"$RUN_DIR/{name}\"'\n"
        ));
    }
    acts.push_str("  t raw-file sh -c 'for f in \"$RUN_DIR\"/raw/*; do echo forged > \"$f\" || exit 1; done; ls \"$RUN_DIR\"/raw/* >/dev/null'\n");
    acts.push_str("} > probe.txt 2>&1");
    let dir = run_agent(&env, &acts);
    let seen = report(&probe);
    for (act, result) in &seen {
        assert_eq!(result, "refused", "{act}: {seen:?}");
    }
    assert!(seen.len() >= 13, "{seen:?}");
    // The record is whole: the log from run_started to run_finished, run.json parsed.
    let records = log(&dir);
    assert_eq!(
        records.first().unwrap()["kind"],
        "run_started",
        "{records:?}"
    );
    assert_eq!(
        records.last().unwrap()["kind"],
        "run_finished",
        "{records:?}"
    );
    assert_eq!(record(&dir)["outcome"], "succeeded");
    assert!(
        std::fs::read_to_string(dir.join("prompt.md"))
            .unwrap()
            .contains("do the task")
    );
    for name in ["events.jsonl", "run.json", "prompt.md", "raw"] {
        assert!(!exists(&dir.join(format!("{name}.away"))), "{name} renamed");
    }
}

/// Issue 10 item 8, the rename case: Corral replaced `run.json` (when the session id is seen)
/// and wrote `session-id.txt`/`session.json` atomically during the run, and a rename over a file
/// that is a mount point in another namespace detaches that bind there: from then on the agent
/// saw plain files in its writable run directory and could forge them. Now the files Corral
/// rewrites during a run keep their inode (written in place) and stay bound read-only: the
/// agent waits until Corral has written the session id into them, then every write, delete and
/// rename is refused, and afterwards the record on the host is Corral's.
#[test]
fn the_agent_cannot_forge_the_record_after_corral_rewrote_it() {
    let env = Env::new();
    let probe = env.project().join("probe.txt");
    let mut acts = String::from(TRY);
    // Corral writes the session id into run.json and the session files once it reads the
    // init line: wait for that (at most 20 s), then try.
    acts.push_str(&format!(
        "\nn=0; until grep -q '{FAKE_SESSION}' \"$RUN_DIR/run.json\" 2>/dev/null && grep -q '{FAKE_SESSION}' \"$RUN_DIR/session-id.txt\" 2>/dev/null && grep -q '{FAKE_SESSION}' \"$RUN_DIR/session.json\" 2>/dev/null; do n=$((n+1)); [ $n -gt 200 ] && break; sleep 0.1; done\n{{\n  echo \"waited=$n\"\n"
    ));
    for name in ["run.json", "session-id.txt", "session.json"] {
        acts.push_str(&format!(
            "  t 'overwrite-{name}' sh -c 'echo forged > \"$RUN_DIR/{name}\"'\n  t 'append-{name}' sh -c 'echo forged >> \"$RUN_DIR/{name}\"'\n  t 'rename-{name}' mv \"$RUN_DIR/{name}\" \"$RUN_DIR/{name}.away\"\n  t 'delete-{name}' rm -f \"$RUN_DIR/{name}\"\n  t 'replace-{name}' sh -c 'echo forged > \"$RUN_DIR/x.tmp\" && mv -f \"$RUN_DIR/x.tmp\" \"$RUN_DIR/{name}\"'\n"
        ));
    }
    // Nor can it plant the copies Corral writes first, from which a reader would recover a
    // record that was cut short.
    for name in [
        ".run.json.next",
        ".session-id.txt.next",
        ".session.json.next",
    ] {
        acts.push_str(&format!(
            "  t 'plant-{name}' sh -c 'echo forged > \"$RUN_DIR/{name}\"'\n"
        ));
    }
    acts.push_str("  t signals-stays-writable sh -c 'echo {} > \"$RUN_DIR/signals.json\"'\n");
    acts.push_str(&format!(
        "}} > probe.txt 2>&1\nprintf '%s\\n' '{}'\nprintf '%s' '{GOOD_SIGNALS}' > \"$SIGNALS\"",
        FakeClaude::result("done", 0.001)
    ));
    let agent = FakeClaude::new(&env, "", &[FakeClaude::init("fake")], &acts);
    let (name, path) = agent.setting();
    let out = env
        .corral()
        .env(name, &path)
        .args(["run", "--json", "do the task"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", transcript(&env, &out));
    let dir = run_dir(&summary(&out.stdout));
    let seen = report(&probe);
    let waited: u32 = value(&seen, "waited").parse().unwrap();
    assert!(waited <= 200, "Corral never wrote the session id: {seen:?}");
    for (act, result) in &seen {
        match act.as_str() {
            "waited" => {}
            "signals-stays-writable" => assert_eq!(result, "done", "{seen:?}"),
            _ => assert_eq!(result, "refused", "{act}: {seen:?}"),
        }
    }
    assert!(seen.len() >= 20, "{seen:?}");
    // The record on the host is Corral's.
    assert_eq!(
        std::fs::read_to_string(dir.join("session-id.txt")).unwrap(),
        format!("{FAKE_SESSION}\n")
    );
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("session.json")).unwrap()).unwrap();
    assert_eq!(meta["sessionId"], FAKE_SESSION, "{meta}");
    let run = record(&dir);
    assert_eq!(run["outcome"], "succeeded", "{run}");
    assert_eq!(run["sessionId"], FAKE_SESSION, "{run}");
    for name in ["run.json", "session-id.txt", "session.json"] {
        assert!(!exists(&dir.join(format!("{name}.away"))), "{name} renamed");
    }
    // What Corral made to bind is gone with the sandbox.
    for name in [
        ".run.json.next",
        ".session-id.txt.next",
        ".session.json.next",
    ] {
        assert!(!exists(&dir.join(name)), "{name} left behind");
    }
}
