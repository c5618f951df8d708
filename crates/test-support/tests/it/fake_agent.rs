//! Integration tests of `corral-fake-agent`: each mode's exact output, exit status and process tree,
//! plus the library helpers (`read_pids`, `wait_all_dead`, `kill_survivors`, `fake_agent_path`).

// test-support is a tool, not product: it may create processes.
#![allow(clippy::disallowed_methods)]
// The helpers outside `#[test]` functions are test code too (clippy only exempts the test fns).
#![allow(clippy::expect_used, clippy::panic)]

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use corral_test_support::fake_protocol::{FakeLine, HELLO, TREE_READY};
use corral_test_support::{
    fake_agent_path, is_alive, kill_survivors, read_pids, wait_all_dead, wait_for_lines,
};
use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;

const BIN: &str = env!("CARGO_BIN_EXE_corral-fake-agent");

fn fake(args: &[&str]) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.args(args)
        .stdin(Stdio::null())
        .env_remove("FAKE_AGENT_PID_FILE");
    cmd
}

fn run(args: &[&str]) -> Output {
    fake(args).output().expect("run the fake agent")
}

fn path_str(path: &Path) -> &str {
    path.to_str().expect("utf-8 temp path")
}

/// Parses every stdout line (each must end with `\n`) as a protocol line.
fn parse_lines(stdout: &[u8]) -> Vec<FakeLine> {
    let text = std::str::from_utf8(stdout).expect("utf-8 stdout");
    assert!(
        text.is_empty() || text.ends_with('\n'),
        "unterminated: {text:?}"
    );
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad line {l:?}: {e}")))
        .collect()
}

fn ok_lines(session: &str) -> Vec<FakeLine> {
    vec![
        FakeLine::init(session),
        FakeLine::text(HELLO),
        FakeLine::done(),
    ]
}

/// Reads stdout lines until `tree-ready`; returns them.
fn read_until_tree_ready(child: &mut Child) -> Vec<FakeLine> {
    let stdout = child.stdout.take().expect("piped stdout");
    let mut lines = Vec::new();
    for line in BufReader::new(stdout).lines() {
        let parsed: FakeLine = serde_json::from_str(&line.expect("read line")).expect("json");
        let ready = parsed == FakeLine::text(TREE_READY);
        lines.push(parsed);
        if ready {
            return lines;
        }
    }
    panic!("stdout closed before tree-ready: {lines:?}");
}

/// After the group was killed: `pids` has `n` entries, all but the last die, the last (which left
/// the group with setsid) is still alive; it is killed either way.
fn assert_only_last_outlives_the_group(pids: &[u32], n: usize) {
    let (escaped, group) = pids.split_last().expect("some pids");
    let group_survivors = wait_all_dead(group, Duration::from_secs(5));
    let escaped_alive = is_alive(*escaped);
    kill_survivors(pids);
    assert!(wait_all_dead(pids, Duration::from_secs(5)).is_empty());
    assert_eq!(pids.len(), n, "{pids:?}");
    assert!(group_survivors.is_empty(), "{group_survivors:?}");
    assert!(escaped_alive, "{escaped} should have outlived the group");
}

#[test]
fn ok_prints_init_text_result_and_records_its_pid() {
    let dir = tempfile::tempdir().unwrap();
    let pids = dir.path().join("pids");
    let child = fake(&["ok", "--pid-file", path_str(&pids)])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{:?}", out.status);
    assert_eq!(parse_lines(&out.stdout), ok_lines(&format!("fake-{pid}")));
    assert_eq!(read_pids(&pids), vec![pid]);
}

#[test]
fn ok_exact_bytes_with_session_id_and_pid_file_from_env() {
    let dir = tempfile::tempdir().unwrap();
    let pids = dir.path().join("pids");
    let out = fake(&["ok", "--session-id", "s1"])
        .env("FAKE_AGENT_PID_FILE", &pids)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        concat!(
            r#"{"type":"init","session_id":"s1"}"#,
            "\n",
            r#"{"type":"text","text":"hello"}"#,
            "\n",
            r#"{"type":"result","is_error":false,"text":"done","usage":{"input_tokens":10,"output_tokens":5},"cost_usd":0.001}"#,
            "\n",
        )
    );
    assert_eq!(read_pids(&pids).len(), 1);
}

#[test]
fn crlf_ends_every_ok_line_with_crlf() {
    let out = run(&["crlf", "--session-id", "s1"]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.split_terminator("\r\n").collect();
    assert_eq!(lines.len(), 3, "{text:?}");
    assert!(!lines.iter().any(|l| l.contains('\n')), "{text:?}");
    let parsed: Vec<FakeLine> = lines
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(parsed, ok_lines("s1"));
}

#[test]
fn invalid_utf8_puts_ff_fe_inside_a_json_string() {
    let out = run(&["invalid-utf8", "--session-id", "s1"]);
    assert!(out.status.success());
    let lines: Vec<&[u8]> = out.stdout.split_inclusive(|&b| b == b'\n').collect();
    assert_eq!(lines.len(), 3);
    assert_eq!(lines[0], b"{\"type\":\"init\",\"session_id\":\"s1\"}\n");
    assert_eq!(
        lines[1],
        b"{\"type\":\"text\",\"text\":\"bad \xff\xfe bytes\"}\n"
    );
    assert_eq!(
        serde_json::from_slice::<FakeLine>(lines[2]).unwrap(),
        FakeLine::done()
    );
}

#[test]
fn exit_nonzero_after_result_exits_3() {
    let out = run(&["exit-nonzero-after-result", "--session-id", "s1"]);
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(
        parse_lines(&out.stdout),
        vec![FakeLine::init("s1"), FakeLine::done()]
    );
}

#[test]
fn exit_nonzero_with_signals_writes_the_signals_file() {
    let dir = tempfile::tempdir().unwrap();
    let signals = dir.path().join("signals.json");
    let out = run(&[
        "exit-nonzero-with-signals",
        "--session-id",
        "s1",
        "--signals",
        path_str(&signals),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(parse_lines(&out.stdout), vec![FakeLine::init("s1")]);
    assert_eq!(
        std::fs::read_to_string(&signals).unwrap(),
        r#"{"schemaVersion":1,"signals":[{"type":"task-complete","timestamp":"2026-01-01T00:00:00Z"}]}"#
    );
}

#[test]
fn rate_limit_then_ok_counts_invocations_in_the_state_file() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let log = dir.path().join("argv.jsonl");
    let args = [
        "rate-limit-then-ok",
        "--times",
        "2",
        "--state-file",
        path_str(&state),
        "--argv-log",
        path_str(&log),
        "--session-id",
        "ignored",
        "--resume",
        "abc",
        "--resets-at",
        "1700000000",
    ];
    for _ in 0..2 {
        let out = run(&args);
        assert_eq!(out.status.code(), Some(1));
        assert_eq!(
            parse_lines(&out.stdout),
            vec![
                FakeLine::init("abc"),
                FakeLine::rate_limit(Some(1_700_000_000))
            ]
        );
    }
    let out = run(&args);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(parse_lines(&out.stdout), ok_lines("abc"));
    assert_eq!(std::fs::read_to_string(&state).unwrap().trim(), "3");

    let logged: Vec<serde_json::Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(logged.len(), 3);
    for entry in logged {
        assert_eq!(
            entry,
            serde_json::json!({"argv": args, "stdin_bytes": null})
        );
    }
}

#[test]
fn rate_limit_forever_without_resets_at_says_null() {
    let out = run(&["rate-limit-forever", "--session-id", "s1"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "{\"type\":\"init\",\"session_id\":\"s1\"}\n\
         {\"type\":\"rate_limit\",\"resets_at\":null,\"message\":\"rate limited\"}\n"
    );
}

#[test]
fn stale_session_with_resume_fails_without_stdout() {
    let out = run(&["stale-session", "--resume", "old-id"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    assert_eq!(
        String::from_utf8(out.stderr).unwrap(),
        "No conversation found with session ID: old-id\n"
    );
}

#[test]
fn stale_session_without_resume_is_ok_with_a_fresh_id() {
    let child = fake(&["stale-session"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    assert_eq!(parse_lines(&out.stdout), ok_lines(&format!("fake-{pid}")));
}

#[test]
fn echo_stdin_counts_stdin_and_cmdline_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("argv.jsonl");
    let args = [
        "echo-stdin",
        "--session-id",
        "s1",
        "--argv-log",
        path_str(&log),
    ];
    let mut child = fake(&args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || stdin.write_all(&vec![b'p'; 1 << 20]));
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    assert!(out.status.success());

    let cmdline_bytes: usize = BIN.len() + 1 + args.iter().map(|a| a.len() + 1).sum::<usize>();
    assert_eq!(
        parse_lines(&out.stdout),
        vec![
            FakeLine::init("s1"),
            FakeLine::text(format!("stdin_bytes=1048576 cmdline_bytes={cmdline_bytes}")),
            FakeLine::done(),
        ]
    );
    let logged: serde_json::Value =
        serde_json::from_str(std::fs::read_to_string(&log).unwrap().trim()).unwrap();
    assert_eq!(
        logged,
        serde_json::json!({"argv": args, "stdin_bytes": 1_048_576})
    );
}

#[test]
fn giant_line_is_exactly_n_bytes() {
    let out = run(&["giant-line", "--bytes", "1048576", "--session-id", "s1"]);
    assert!(out.status.success());
    let lines: Vec<&[u8]> = out.stdout.split(|&b| b == b'\n').collect();
    assert_eq!(lines.len(), 4, "3 lines and the empty tail");
    assert_eq!(
        serde_json::from_slice::<FakeLine>(lines[0]).unwrap(),
        FakeLine::init("s1")
    );
    assert_eq!(lines[1].len(), 1_048_576);
    let FakeLine::Text { text } = serde_json::from_slice(lines[1]).unwrap() else {
        panic!("not a text line");
    };
    assert!(text.bytes().all(|b| b == b'a'));
    assert_eq!(
        serde_json::from_slice::<FakeLine>(lines[2]).unwrap(),
        FakeLine::done()
    );
    assert!(lines[3].is_empty());
}

#[test]
fn flood_lines_are_exactly_line_bytes() {
    let out = run(&[
        "flood",
        "--lines",
        "1000",
        "--line-bytes",
        "100",
        "--session-id",
        "s1",
    ]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 1002);
    assert!(lines[1..=1000].iter().all(|l| l.len() == 100));
    assert_eq!(
        serde_json::from_str::<FakeLine>(lines[1]).unwrap(),
        FakeLine::text("x".repeat(100 - 25))
    );
    assert_eq!(
        serde_json::from_str::<FakeLine>(lines[1001]).unwrap(),
        FakeLine::done()
    );
}

#[test]
fn stderr_flood_writes_n_bytes_of_1k_lines() {
    let out = run(&["stderr-flood", "--bytes", "200000", "--session-id", "s1"]);
    assert!(out.status.success());
    assert_eq!(out.stderr.len(), 200_000);
    assert!(
        out.stderr
            .chunks(1024)
            .all(|c| c[..c.len().min(1023)].iter().all(|&b| b == b'x'))
    );
    assert_eq!(out.stderr[1023], b'\n');
    assert_eq!(
        parse_lines(&out.stdout),
        vec![FakeLine::init("s1"), FakeLine::done()]
    );
}

#[test]
fn crash_mid_line_dies_by_sigsegv_after_half_a_line() {
    let dir = tempfile::tempdir().unwrap();
    let out = fake(&["crash-mid-line", "--session-id", "s1"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.signal(), Some(libc::SIGSEGV), "{:?}", out.status);
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "{\"type\":\"init\",\"session_id\":\"s1\"}\n{\"type\":\"text\",\"te"
    );
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "no core file"
    );
}

#[test]
fn bad_command_lines_exit_64() {
    for args in [
        &[][..],
        &["no-such-mode"][..],
        &["ok", "--no-such-option", "1"][..],
        &["ok", "--bytes", "many"][..],
        &["ok", "extra"][..],
        &["exit-nonzero-with-signals"][..],
    ] {
        let out = run(args);
        assert_eq!(out.status.code(), Some(64), "{args:?}");
        assert!(out.stdout.is_empty(), "{args:?}");
        assert!(!out.stderr.is_empty(), "{args:?}");
    }
}

#[test]
fn usage_lists_the_modes() {
    let out = run(&["usage"]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    for mode in ["ok", "grandchildren", "daemonize", "echo-stdin", "flood"] {
        assert!(text.contains(mode), "{mode} missing from {text}");
    }
    assert!(!text.contains("__"), "internal modes are not listed");
}

#[test]
fn grandchildren_all_die_with_the_process_group() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pids");
    let mut child = fake(&["grandchildren", "--count", "3", "--session-id", "s1"])
        .arg("--pid-file")
        .arg(&pid_file)
        .stdout(Stdio::piped())
        .process_group(0)
        .spawn()
        .unwrap();
    let lines = read_until_tree_ready(&mut child);
    assert_eq!(
        lines,
        vec![FakeLine::init("s1"), FakeLine::text(TREE_READY)]
    );
    let pids = read_pids(&pid_file);
    let all_alive = pids.iter().all(|&p| is_alive(p));
    killpg(Pid::from_raw(child.id() as i32), Signal::SIGKILL).unwrap();
    child.wait().unwrap();
    assert_eq!(pids.len(), 5, "{pids:?}");
    assert_eq!(pids[0], child.id());
    assert!(all_alive, "{pids:?}");
    let survivors = wait_all_dead(&pids, Duration::from_secs(5));
    kill_survivors(&survivors);
    assert!(survivors.is_empty(), "survivors: {survivors:?}");
}

#[test]
fn setsid_grandchild_escapes_the_process_group() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pids");
    let mut child = fake(&["setsid-grandchild", "--session-id", "s1"])
        .arg("--pid-file")
        .arg(&pid_file)
        .stdout(Stdio::piped())
        .process_group(0)
        .spawn()
        .unwrap();
    read_until_tree_ready(&mut child);
    let pids = read_pids(&pid_file);
    killpg(Pid::from_raw(child.id() as i32), Signal::SIGKILL).unwrap();
    child.wait().unwrap();
    assert_only_last_outlives_the_group(&pids, 2);
}

#[test]
fn daemonize_leaves_an_orphan_in_its_own_session() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pids");
    let mut child = fake(&["daemonize", "--session-id", "s1"])
        .arg("--pid-file")
        .arg(&pid_file)
        .stdout(Stdio::piped())
        .process_group(0)
        .spawn()
        .unwrap();
    read_until_tree_ready(&mut child);
    let pids = read_pids(&pid_file);
    let intermediate_gone = pids.get(1).is_some_and(|&p| !is_alive(p));
    killpg(Pid::from_raw(child.id() as i32), Signal::SIGKILL).unwrap();
    child.wait().unwrap();
    assert_only_last_outlives_the_group(&pids, 3);
    assert!(
        intermediate_gone,
        "the intermediate exited and was reaped: {pids:?}"
    );
}

#[test]
fn trap_term_survives_sigterm_until_sigkill() {
    let mut child = fake(&["trap-term", "--session-id", "s1"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert_eq!(
        serde_json::from_str::<FakeLine>(&first).unwrap(),
        FakeLine::init("s1")
    );
    let pid = Pid::from_raw(child.id() as i32);
    for signal in [Signal::SIGTERM, Signal::SIGINT, Signal::SIGHUP] {
        kill(pid, signal).unwrap();
    }
    std::thread::sleep(Duration::from_millis(100));
    assert!(child.try_wait().unwrap().is_none(), "ignored SIGTERM");
    kill(pid, Signal::SIGKILL).unwrap();
    assert_eq!(child.wait().unwrap().signal(), Some(libc::SIGKILL));
}

#[test]
fn close_stdout_gives_eof_while_still_running() {
    let mut child = fake(&["close-stdout", "--session-id", "s1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = Vec::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_end(&mut stdout)
        .unwrap();
    let mut stderr = Vec::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_end(&mut stderr)
        .unwrap();
    assert_eq!(parse_lines(&stdout), vec![FakeLine::init("s1")]);
    assert!(stderr.is_empty());
    assert!(child.try_wait().unwrap().is_none(), "still running");
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn helpers_handle_missing_files_and_dead_pids() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing");
    assert!(read_pids(&missing).is_empty());
    assert!(!wait_for_lines(&missing, 1, Duration::from_millis(30)));
    let file = dir.path().join("pids");
    std::fs::write(&file, "12\nnot-a-pid\n34\n").unwrap();
    assert_eq!(read_pids(&file), vec![12, 34]);
    assert!(wait_for_lines(&file, 3, Duration::from_millis(30)));

    assert!(is_alive(std::process::id()));
    let mut child = fake(&["ok"]).stdout(Stdio::null()).spawn().unwrap();
    let pid = child.id();
    assert!(
        wait_all_dead(&[pid], Duration::from_secs(5)).is_empty(),
        "a zombie counts as dead"
    );
    child.wait().unwrap();
    assert!(!is_alive(pid));
    kill_survivors(&[0, u32::MAX, std::process::id()]);
}

#[test]
fn fake_agent_path_finds_the_built_binary() {
    let path: PathBuf = fake_agent_path();
    assert_eq!(
        path.canonicalize().unwrap(),
        Path::new(BIN).canonicalize().unwrap()
    );
}
