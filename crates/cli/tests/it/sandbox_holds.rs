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
    assert_eq!(out.status.code(), Some(0), "{}", transcript(env, &out));
    run_dir(&summary(&out.stdout))
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

/// The SysV message queue keys the host sees.
fn host_queue_keys() -> Vec<String> {
    std::fs::read_to_string("/proc/sysvipc/msg")
        .unwrap_or_default()
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect()
}

/// Whether this test runs as root (effective uid 0, the second field of `Uid:`).
fn running_as_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|ids| ids.split_whitespace().nth(1).map(|e| e == "0"))
        .unwrap()
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
    if running_as_root() {
        // Root is somebody else inside (see the engine's `isolation_args`), so that a nested
        // user namespace (Codex's own sandbox) can still be made without `CAP_SETFCAP`.
        assert_ne!(value(&seen, "uid"), "0", "{seen:?}");
    }
    // The attestation says what held.
    let attestation = &record(&dir)["attestation"];
    assert_eq!(attestation["actual_backend"], "bubblewrap", "{attestation}");
    assert!(
        attestation["enforced"]
            .as_array()
            .unwrap()
            .contains(&"writes-confined".into()),
        "{attestation}"
    );
}
