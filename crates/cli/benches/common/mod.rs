//! What the `corral-cli` bench targets share: who runs them, a process's peak memory, the
//! statistics their tables print, git and the sprints' task ids. Each target uses a part of it.
#![allow(dead_code)]

pub mod parallel;

use std::path::Path;

/// `git` in `dir`, which must succeed; its stdout.
pub fn git(dir: &Path, args: &[&str]) -> String {
    corral_test_support::git_ok(dir, &[], args)
}

/// Makes `dir` a git repository on `main` with a bench identity and one commit of what it holds:
/// the template every run of a sprint bench copies.
pub fn commit_template(dir: &Path) {
    for args in [
        &["init", "--quiet", "--initial-branch=main"][..],
        &["config", "user.name", "Bench"],
        &["config", "user.email", "bench@example.invalid"],
        &["add", "--all"],
        &["commit", "--quiet", "-m", "start"],
    ] {
        git(dir, args);
    }
}

/// `dest` made afresh as a copy of `template` (`cp -a`, so the repository comes along).
pub fn fresh_copy(template: &Path, dest: &Path) {
    let _ = std::fs::remove_dir_all(dest);
    let status = corral_test_support::command(Path::new("cp"))
        .arg("-a")
        .arg(template)
        .arg(dest)
        .status()
        .unwrap();
    assert!(
        status.success(),
        "cp -a {} {}",
        template.display(),
        dest.display()
    );
}

/// The id of the `n`th task.
pub fn task_id(n: usize) -> String {
    format!("t{n:02}")
}

/// `VmHWM` of `pid` in KiB: the kernel's high-water mark of its resident set. `None` once it
/// has exited (a zombie has no memory left to report).
pub fn hwm_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
}

/// The median of `v` (NaN when empty).
pub fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    match s.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => s[n / 2],
        n => (s[n / 2 - 1] + s[n / 2]) / 2.0,
    }
}

/// The largest of `v` (NaN when empty).
pub fn max(v: &[f64]) -> f64 {
    v.iter().copied().fold(f64::NAN, f64::max)
}

/// `v` with one decimal each, comma-separated.
pub fn fmt_list(v: &[f64]) -> String {
    v.iter()
        .map(|x| format!("{x:.1}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The order of `sides` sides in round `round`: rotated by one side a round, and reversed in
/// every other run of `sides` rounds, so that each side comes first, middle and last in turn
/// (with two sides: A B, B A, B A, A B) and drift on a shared machine hits every side alike.
pub fn rotation(round: usize, sides: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..sides).map(|i| (i + round) % sides).collect();
    if (round / sides.max(1)) % 2 == 1 {
        order.reverse();
    }
    order
}
