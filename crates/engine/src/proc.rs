//! Reading `/proc` (Linux): group liveness that ignores zombies, and the environment-marker sweep
//! that finds descendants which left the process group (`setsid`, double fork).
//!
//! Every child gets `CORRAL_RUN_ID=<unique>` in its environment; descendants inherit it. After
//! the group is dead, any process still carrying the token escaped the group and is killed. A
//! descendant that scrubs its environment still escapes; only a pid namespace (the bubblewrap
//! backend) catches that.

use std::fs;
use std::io;

/// The environment variable that marks a run's processes.
pub const RUN_TOKEN_VAR: &str = "CORRAL_RUN_ID";

/// Whether any non-zombie process has process group `pgid`. `None` when `/proc` is unreadable.
pub fn any_live_in_group(pgid: u32) -> Option<bool> {
    let dir = fs::read_dir("/proc").ok()?;
    for entry in dir.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        if let Some((state, pgrp)) = parse_stat(&stat)
            && pgrp == pgid
            && !matches!(state, 'Z' | 'X' | 'x')
        {
            return Some(true);
        }
    }
    Some(false)
}

/// A number that grows whenever any live process of group `pgid` uses CPU or reads or writes
/// bytes (files, pipes, sockets): the sum of `utime + stime` ticks from `/proc/<pid>/stat` and
/// `rchar + wchar` from `/proc/<pid>/io`. Only its changes mean anything.
pub fn group_activity(pgid: u32) -> u64 {
    let Ok(dir) = fs::read_dir("/proc") else {
        return 0;
    };
    let mut total: u64 = 0;
    for entry in dir.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let Some(after) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
            continue;
        };
        let fields: Vec<&str> = after.split_whitespace().collect();
        // Fields after the command name: state(0) ppid(1) pgrp(2) … utime(11) stime(12).
        if fields.get(2).and_then(|f| f.parse::<u32>().ok()) != Some(pgid) {
            continue;
        }
        let ticks: u64 = [11, 12]
            .iter()
            .filter_map(|&i| fields.get(i)?.parse::<u64>().ok())
            .sum();
        total = total.wrapping_add(ticks);
        if let Ok(io) = fs::read_to_string(format!("/proc/{pid}/io")) {
            for line in io.lines() {
                if let Some(v) = line
                    .strip_prefix("rchar: ")
                    .or_else(|| line.strip_prefix("wchar: "))
                {
                    total = total.wrapping_add(v.trim().parse::<u64>().unwrap_or(0));
                }
            }
        }
    }
    total
}

/// Whether `pid` is alive and not a zombie.
pub fn is_live(pid: u32) -> bool {
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => parse_stat(&stat).is_some_and(|(state, _)| !matches!(state, 'Z' | 'X' | 'x')),
        Err(_) => false,
    }
}

/// `(state, pgrp)` from a `/proc/<pid>/stat` line. The command name may hold spaces and
/// parentheses, so fields are counted from the last `)`.
fn parse_stat(stat: &str) -> Option<(char, u32)> {
    let after = &stat[stat.rfind(')')? + 1..];
    let mut fields = after.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let _ppid = fields.next()?;
    let pgrp = fields.next()?.parse().ok()?;
    Some((state, pgrp))
}

/// Our children as the kernel lists them (`/proc/self/task/*/children`), or `None` where the
/// kernel does not offer that file.
fn our_children() -> Option<Vec<u32>> {
    let mut pids = Vec::new();
    let mut any = false;
    for task in fs::read_dir("/proc/self/task").ok()?.flatten() {
        let Ok(text) = fs::read_to_string(task.path().join("children")) else {
            continue;
        };
        any = true;
        pids.extend(
            text.split_whitespace()
                .filter_map(|p| p.parse::<u32>().ok()),
        );
    }
    any.then_some(pids)
}

fn has_token(pid: u32, needle: &[u8]) -> bool {
    fs::read(format!("/proc/{pid}/environ"))
        .is_ok_and(|environ| environ.split(|b| *b == 0).any(|var| var == needle))
}

/// Processes to kill because they carry `token` but outlived their process group.
///
/// As a child subreaper, every such process whose ancestors in the run died is our child, so only
/// our children need a look; orphans among them that already exited are reaped on the way (tokio
/// reaps only what it spawned). Where the kernel cannot list children, every process is read.
pub fn escaped_with_token(token: &str) -> io::Result<Vec<u32>> {
    let subreaper = nix::sys::prctl::get_child_subreaper().unwrap_or(false);
    let children = if subreaper { our_children() } else { None };
    let Some(children) = children else {
        return processes_with_token(token);
    };
    let needle = format!("{RUN_TOKEN_VAR}={token}");
    let mut found = Vec::new();
    for pid in children {
        if crate::spawn::is_tokio_child(pid) {
            continue;
        }
        if !is_live(pid) {
            reap(pid);
            continue;
        }
        if has_token(pid, needle.as_bytes()) {
            found.push(pid);
        }
    }
    Ok(found)
}

/// Reaps `pid` if it is our exited child; never blocks.
pub fn reap(pid: u32) {
    if let Ok(raw) = i32::try_from(pid) {
        let _ = nix::sys::wait::waitpid(
            nix::unistd::Pid::from_raw(raw),
            Some(nix::sys::wait::WaitPidFlag::WNOHANG),
        );
    }
}

/// Live processes (other than this one) whose environment holds `RUN_TOKEN_VAR=token`.
pub fn processes_with_token(token: &str) -> io::Result<Vec<u32>> {
    let needle = format!("{RUN_TOKEN_VAR}={token}");
    let me = std::process::id();
    let mut found = Vec::new();
    for entry in fs::read_dir("/proc")?.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        if pid == me {
            continue;
        }
        // Unreadable (another user's process, or already gone): not ours to judge.
        let Ok(environ) = fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        if environ
            .split(|b| *b == 0)
            .any(|var| var == needle.as_bytes())
            && is_live(pid)
        {
            found.push(pid);
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_parsing_survives_odd_command_names() {
        let line = "4242 (a) b (c)) S 1 4240 4240 0 -1 4194560 0 0";
        assert_eq!(parse_stat(line), Some(('S', 4240)));
        assert_eq!(parse_stat("7 (zombie) Z 1 7 7"), Some(('Z', 7)));
    }

    #[test]
    fn group_activity_grows_while_a_process_works() {
        let me = nix::unistd::getpgrp().as_raw() as u32;
        let before = group_activity(me);
        let mut x = 0u64;
        for i in 0..5_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        let scratch =
            std::env::temp_dir().join(format!("corral-activity-{x}-{}", std::process::id()));
        std::fs::write(&scratch, vec![0u8; 1 << 20]).unwrap();
        let _ = std::fs::remove_file(&scratch);
        assert_ne!(group_activity(me), before);
    }

    #[test]
    fn this_process_is_live() {
        assert!(is_live(std::process::id()));
    }
}
