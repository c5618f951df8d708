//! Running `corral` in a scratch home and project, normalizing its output for snapshots, reading
//! what a run left behind (summary, run record, execution log), and looking at processes in `/proc`.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use assert_cmd::Command;
use serde_json::Value;

/// A scratch HOME and project directory.
#[derive(Debug)]
pub struct Env {
    pub dir: tempfile::TempDir,
}

impl Env {
    pub fn new() -> Self {
        let env = Env {
            dir: tempfile::tempdir().unwrap(),
        };
        std::fs::create_dir_all(env.home()).unwrap();
        std::fs::create_dir_all(env.project()).unwrap();
        env
    }

    pub fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }

    pub fn project(&self) -> PathBuf {
        self.dir.path().join("project")
    }

    /// `corral` with a clean environment: PATH, HOME, and `TZ` (UTC, written as POSIX so that
    /// no time zone database is needed), so that the times it shows are the same on every
    /// machine.
    pub fn corral(&self) -> Command {
        let mut cmd = Command::cargo_bin("corral").unwrap();
        cmd.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.home())
            .env("TZ", "UTC0")
            .current_dir(self.project());
        cmd
    }

    pub fn write(&self, rel: &str, text: &str) -> PathBuf {
        let path = self.dir.path().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        path
    }

    /// Output with the scratch path replaced, for stable snapshots.
    pub fn clean(&self, text: &[u8]) -> String {
        String::from_utf8_lossy(text).replace(&self.dir.path().display().to_string(), "<tmp>")
    }
}

/// stdout, stderr and the exit code as one text, jj-style. `corral doctor`'s `limits.*` lines
/// are left out: the caps (`auto`) and their means (a cgroup or not) are the machine's, and
/// `doctor_says_how_each_limit_is_enforced_here` checks them.
pub fn transcript(env: &Env, output: &std::process::Output) -> String {
    let stdout: String = env
        .clean(&output.stdout)
        .lines()
        .filter(|line| !line.starts_with("  ✓ limits.") && !line.starts_with("  · limits."))
        .map(|line| format!("{line}\n"))
        .collect();
    format!(
        "{}[stderr]\n{}[exit status: {}]",
        stdout,
        env.clean(&output.stderr),
        output
            .status
            .code()
            .map_or("signal".to_string(), |c| c.to_string())
    )
}

/// `git` in `dir` with a fixed identity, which must succeed.
pub fn git(dir: &Path, args: &[&str]) {
    corral_test_support::git_ok(
        dir,
        &["-c", "user.name=T", "-c", "user.email=t@t.invalid"],
        args,
    );
}

pub fn exists(path: &Path) -> bool {
    path.exists()
}

/// The `summary` line of `corral run --json` output.
pub fn summary(stdout: &[u8]) -> Value {
    let text = String::from_utf8_lossy(stdout);
    let last = text
        .lines()
        .rev()
        .find(|l| l.contains("\"type\":\"summary\""))
        .unwrap_or_else(|| panic!("no summary in {text}"));
    serde_json::from_str(last).unwrap()
}

/// The run directory a summary names.
pub fn run_dir(summary: &Value) -> PathBuf {
    PathBuf::from(summary["runDir"].as_str().unwrap())
}

/// The only run directory under the project's `.corral/runs`, once it exists.
pub fn only_run_dir(project: &Path) -> Option<PathBuf> {
    let runs: Vec<PathBuf> = std::fs::read_dir(project.join(".corral/runs"))
        .ok()?
        .flatten()
        .map(|e| e.path())
        .collect();
    match runs.as_slice() {
        [one] => Some(one.clone()),
        [] => None,
        more => panic!("expected one run directory, found {more:?}"),
    }
}

/// `run.json` of a run directory.
pub fn record(dir: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("run.json")).unwrap()).unwrap()
}

/// The execution log (`events.jsonl`) of a run directory; a line still being written is skipped.
pub fn log(dir: &Path) -> Vec<Value> {
    std::fs::read_to_string(dir.join("events.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// The records of one `kind`.
pub fn kinds<'a>(log: &'a [Value], kind: &str) -> Vec<&'a Value> {
    log.iter().filter(|v| v["kind"] == kind).collect()
}

/// Pids of the CLI runs recorded in a run's log (each is also its process group id).
pub fn spawned_pids(dir: &Path) -> Vec<u32> {
    kinds(&log(dir), "spawn")
        .iter()
        .filter_map(|v| v["pid"].as_u64())
        .map(|p| u32::try_from(p).unwrap())
        .collect()
}

/// Polls every 20 ms until `done` holds; false when `timeout` passed first.
pub fn wait_until(timeout: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if done() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Asserts that no process of the groups led by `pids` is left (zombies do not count), waiting
/// up to 5 s for the kill ladder to finish.
pub fn assert_group_gone(pids: &[u32]) {
    let alive = |p: u32| corral_test_support::group_alive(p) || corral_test_support::is_alive(p);
    wait_until(Duration::from_secs(5), || !pids.iter().any(|&p| alive(p)));
    let left: Vec<u32> = pids.iter().copied().filter(|&p| alive(p)).collect();
    assert!(left.is_empty(), "process groups left: {left:?}");
}

/// Every numeric entry of `/proc`.
fn all_pids() -> Vec<u32> {
    std::fs::read_dir("/proc")
        .map(|dir| {
            dir.flatten()
                .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse().ok()))
                .collect()
        })
        .unwrap_or_default()
}

/// `(state, process group)` of a live process from `/proc/<pid>/stat`; the command name may hold
/// spaces and parentheses, so the fields are counted from the last `)`.
fn stat(pid: u32) -> Option<(char, u32)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let mut fields = text[text.rfind(')')? + 1..].split_whitespace();
    let state = fields.next()?.chars().next()?;
    let _ppid = fields.next()?;
    Some((state, fields.next()?.parse().ok()?))
}

/// The live (not zombie) processes whose process group is `pgid`.
pub fn group_members(pgid: u32) -> Vec<u32> {
    all_pids()
        .into_iter()
        .filter(|&pid| stat(pid).is_some_and(|(s, g)| g == pgid && !matches!(s, 'Z' | 'X' | 'x')))
        .collect()
}

/// The entries of `/proc/<pid>/environ` (empty when unreadable).
fn environ(pid: u32) -> Vec<String> {
    std::fs::read(format!("/proc/{pid}/environ"))
        .map(|bytes| {
            bytes
                .split(|b| *b == 0)
                .filter(|v| !v.is_empty())
                .map(|v| String::from_utf8_lossy(v).into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// The value of `name` in the environment of `pid`.
pub fn environ_var(pid: u32, name: &str) -> Option<String> {
    let prefix = format!("{name}=");
    environ(pid)
        .into_iter()
        .find_map(|v| v.strip_prefix(&prefix).map(str::to_string))
}

/// Live processes (other than this one) with an environment entry starting with `entry_prefix`
/// (`CORRAL_RUN_ID=claude-1234-`).
pub fn processes_carrying(entry_prefix: &str) -> Vec<u32> {
    let me = std::process::id();
    all_pids()
        .into_iter()
        .filter(|&pid| pid != me)
        .filter(|&pid| stat(pid).is_some_and(|(s, _)| !matches!(s, 'Z' | 'X' | 'x')))
        .filter(|&pid| environ(pid).iter().any(|v| v.starts_with(entry_prefix)))
        .collect()
}

/// `/proc/<pid>/cmdline` with its NUL separators as spaces (empty when the process is gone).
pub fn cmdline(pid: u32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|bytes| String::from_utf8_lossy(&bytes).replace('\0', " "))
        .unwrap_or_default()
}

/// The session id every [`FakeClaude`] announces.
pub const FAKE_SESSION: &str = "11111111-2222-4333-8444-555555555555";

/// A stand-in for Claude Code that Corral's real Claude adapter, parser and sandbox drive: a
/// shell script that answers `--version` like the pinned CLI, reads the prompt, finds the
/// `signals.json` path in it (`$SIGNALS`; `$RUN_DIR` is its directory), runs the test's own
/// commands (the hostile agent's acts), then prints Claude's stream-json lines from a file.
#[derive(Debug)]
pub struct FakeClaude {
    pub path: PathBuf,
}

impl FakeClaude {
    /// Writes the script into `env`'s scratch directory: `before` runs before any line is
    /// printed, `lines` are printed (one JSON value each), then `after` runs.
    pub fn new(env: &Env, before: &str, lines: &[Value], after: &str) -> Self {
        let n = std::fs::read_dir(env.dir.path()).map_or(0, |d| d.count());
        let lines_file = env.dir.path().join(format!("fake-claude-{n}.jsonl"));
        let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
        std::fs::write(&lines_file, text).unwrap();
        let script = format!(
            r#"#!/bin/sh
if [ "$1" = "--version" ]; then echo "2.1.197 (Claude Code)"; exit 0; fi
PROMPT=$(cat)
SIGNALS=$(printf '%s\n' "$PROMPT" | grep -o '/[^`]*signals\.json' | head -n 1)
RUN_DIR=$(dirname "$SIGNALS")
export SIGNALS RUN_DIR
{before}
cat '{lines}'
{after}
"#,
            lines = lines_file.display()
        );
        let path = env.dir.path().join(format!("fake-claude-{n}.sh"));
        std::fs::write(&path, script).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        FakeClaude { path }
    }

    /// The variable that makes Corral run this script as Claude Code (a user-level setting).
    pub fn setting(&self) -> (&'static str, PathBuf) {
        ("CORRAL_PROVIDERS__CLAUDE__COMMAND", self.path.clone())
    }

    /// `{"type":"system","subtype":"init",...}` announcing [`FAKE_SESSION`] with `model`.
    pub fn init(model: &str) -> Value {
        serde_json::json!({
            "type": "system", "subtype": "init", "session_id": FAKE_SESSION, "model": model,
        })
    }

    /// An assistant message with one text block.
    pub fn text(text: &str) -> Value {
        serde_json::json!({
            "type": "assistant", "session_id": FAKE_SESSION,
            "message": {"role": "assistant", "content": [{"type": "text", "text": text}]},
        })
    }

    /// An assistant message with one tool call.
    pub fn tool_use(name: &str, input: Value) -> Value {
        serde_json::json!({
            "type": "assistant", "session_id": FAKE_SESSION,
            "message": {"role": "assistant", "content": [
                {"type": "tool_use", "id": "toolu_1", "name": name, "input": input}
            ]},
        })
    }

    /// The successful `result` line, with `text` and a cost of `cost`.
    pub fn result(text: &str, cost: f64) -> Value {
        serde_json::json!({
            "type": "result", "subtype": "success", "is_error": false, "result": text,
            "session_id": FAKE_SESSION, "total_cost_usd": cost,
            "usage": {"input_tokens": 10, "output_tokens": 5},
        })
    }
}

/// A `signals.json` the generator contract accepts.
pub const GOOD_SIGNALS: &str = r#"{"schemaVersion":1,"signals":[{"type":"task-complete","timestamp":"2026-12-01T10:00:00Z"}]}"#;

/// The keys of the SysV message queues the host sees (the first column of
/// `/proc/sysvipc/msg`). `ipcmk` gives each queue a random key, so a key names one queue; an
/// id does not (the first queue of any IPC namespace is 0, and another test on the host may
/// make one at the same moment).
pub fn host_queue_keys() -> Vec<String> {
    std::fs::read_to_string("/proc/sysvipc/msg")
        .unwrap_or_default()
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect()
}
