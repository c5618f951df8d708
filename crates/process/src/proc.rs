//! Readers of `/proc` (Linux), and nothing else: group liveness that ignores zombies, a
//! process's state and group, the supervisor's children, environment entries, and the activity
//! counter of a group. What to do with the answers is `process_group.rs`'s business.
//!
//! Every child gets `CORRAL_RUN_ID=<unique>` in its environment and its descendants inherit it,
//! which is how a process that left the group is recognised. A descendant that scrubs its
//! environment is not; only a pid namespace (the bubblewrap backend) catches that.

use std::fs;
use std::io;

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
            && !is_dead_state(state)
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
    state_and_group(pid).is_some_and(|(state, _)| !is_dead_state(state))
}

/// `(state, pgrp)` of `pid`, `None` when it is gone or unreadable. A zombie keeps its group.
pub fn state_and_group(pid: u32) -> Option<(char, u32)> {
    parse_stat(&fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// Whether a `/proc/<pid>/stat` state letter means the process has exited (zombie or dead).
pub fn is_dead_state(state: char) -> bool {
    matches!(state, 'Z' | 'X' | 'x')
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
pub fn our_children() -> Option<Vec<u32>> {
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

/// Whether `pid`'s environment holds exactly the entry `needle` (`NAME=value`).
pub fn has_env_entry(pid: u32, needle: &[u8]) -> bool {
    fs::read(format!("/proc/{pid}/environ"))
        .is_ok_and(|environ| environ.split(|b| *b == 0).any(|var| var == needle))
}

/// Live processes (other than this one) whose environment holds `var=token`.
pub fn processes_with_token(var: &str, token: &str) -> io::Result<Vec<u32>> {
    let needle = format!("{var}={token}");
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
        if has_env_entry(pid, needle.as_bytes()) && is_live(pid) {
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
