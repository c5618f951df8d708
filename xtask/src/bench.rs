//! `cargo xtask bench [--quick]`: the engine benchmark in release mode.
//!
//! It builds the release fake agent first (the bench target finds it next to itself, in
//! `target/release`), then runs `cargo bench -p corral-engine --bench engine`, which measures
//! the engine and a raw tokio baseline in the same run, prints the summary table and writes it to
//! `target/bench-report.md`. Then `cargo bench -p corral-cli --bench egress` runs the real Claude
//! Code under `corral run` through the default sandbox's allow-list proxy against the same runs on
//! the host network, and writes `target/bench-egress-report.md`. Last, `cargo bench -p corral-cli
//! --bench giant_reply` measures the peak memory of `corral run` while Claude Code prints a
//! 20 MiB reply, and writes `target/bench-giant-reply-report.md`. Then `cargo bench -p corral-cli
//! --bench cli_path` sets `corral run` beside the bare Claude Code at start and beside a raw tokio
//! reader on a 200 000-line flood in two shapes (text-only, and Claude's: a message id and usage on
//! every line, tool calls among them), and writes `target/bench-cli-path-report.md`. Last,
//! `cargo bench -p corral-cli --bench sprint` sets `corral sprint run` over 30 tasks × 2 rounds
//! beside a shell script doing the same `corral run`s, checks and commits, and writes
//! `target/bench-sprint-report.md`. Then `cargo bench -p corral-cli --bench sprint_jobs` sets
//! `corral sprint run --jobs 4` beside `--jobs 1` over eight independent tasks whose stand-in
//! agent works for 2 s each, and writes `target/bench-sprint-jobs-report.md`. Last, `cargo
//! bench -p corral-cli --bench sprint_ray` sets the same sprint through a real Ray cluster on
//! this machine (`--jobs 4 --executor ray`) beside local worktrees (`--jobs 4`), and writes
//! `target/bench-sprint-ray-report.md`. Last, `cargo bench -p corral-cli --bench sprint_queue`
//! runs eight tasks in two groups that change the same file, `--jobs 4` with and without
//! `touches` beside `--jobs 1`, counts the rounds spent and times the checks after each fold, and
//! writes `target/bench-sprint-queue-report.md`. Last, `cargo bench -p corral-sandbox --bench
//! start` sets the start cost of a check under bubblewrap and under the container backend
//! (podman) beside the native backend, and writes `target/bench-sandbox-start-report.md`.
//! `docs/benchmarks.md` explains
//! the scenarios and targets; `cargo xtask ci` runs every bench target once in its smoke mode.

use std::path::Path;

use anyhow::bail;

use crate::shell;

/// The options `cargo xtask bench` accepts.
#[derive(Debug, Clone, Copy, Default)]
pub struct Opts {
    /// Fewer repetitions: under a minute instead of a few.
    pub quick: bool,
}

impl Opts {
    /// Parses the arguments after `bench`.
    pub fn parse(args: &[String]) -> anyhow::Result<Self> {
        let mut opts = Opts::default();
        for arg in args {
            match arg.as_str() {
                "--quick" => opts.quick = true,
                other => {
                    bail!("unknown argument `{other}` for `cargo xtask bench` (known: --quick)")
                }
            }
        }
        Ok(opts)
    }
}

/// Builds the release fake agent and runs the bench target.
pub fn run(root: &Path, opts: Opts) -> anyhow::Result<()> {
    shell::run(shell::cargo(root).args([
        "build",
        "--release",
        "-p",
        "corral-test-support",
        "--bin",
        "corral-fake-agent",
    ]))?;
    let mut cmd = shell::cargo(root);
    cmd.args(["bench", "-p", "corral-engine", "--bench", "engine"]);
    if opts.quick {
        cmd.args(["--", "--quick"]);
    }
    shell::run(&mut cmd)?;
    let mut egress = shell::cargo(root);
    egress.args(["bench", "-p", "corral-cli", "--bench", "egress"]);
    if opts.quick {
        egress.args(["--", "--quick"]);
    }
    shell::run(&mut egress)?;
    let mut giant = shell::cargo(root);
    giant.args(["bench", "-p", "corral-cli", "--bench", "giant_reply"]);
    if opts.quick {
        giant.args(["--", "--quick"]);
    }
    shell::run(&mut giant)?;
    let mut cli_path = shell::cargo(root);
    cli_path.args(["bench", "-p", "corral-cli", "--bench", "cli_path"]);
    if opts.quick {
        cli_path.args(["--", "--quick"]);
    }
    shell::run(&mut cli_path)?;
    let mut sprint = shell::cargo(root);
    sprint.args(["bench", "-p", "corral-cli", "--bench", "sprint"]);
    if opts.quick {
        sprint.args(["--", "--quick"]);
    }
    shell::run(&mut sprint)?;
    let mut sprint_jobs = shell::cargo(root);
    sprint_jobs.args(["bench", "-p", "corral-cli", "--bench", "sprint_jobs"]);
    if opts.quick {
        sprint_jobs.args(["--", "--quick"]);
    }
    shell::run(&mut sprint_jobs)?;
    let mut sprint_ray = shell::cargo(root);
    sprint_ray.args(["bench", "-p", "corral-cli", "--bench", "sprint_ray"]);
    if opts.quick {
        sprint_ray.args(["--", "--quick"]);
    }
    shell::run(&mut sprint_ray)?;
    let mut sprint_queue = shell::cargo(root);
    sprint_queue.args(["bench", "-p", "corral-cli", "--bench", "sprint_queue"]);
    if opts.quick {
        sprint_queue.args(["--", "--quick"]);
    }
    shell::run(&mut sprint_queue)?;
    let mut sandbox_start = shell::cargo(root);
    sandbox_start.args(["bench", "-p", "corral-sandbox", "--bench", "start"]);
    if opts.quick {
        sandbox_start.args(["--", "--quick"]);
    }
    shell::run(&mut sandbox_start)?;
    for report in [
        "target/bench-report.md",
        "target/bench-egress-report.md",
        "target/bench-giant-reply-report.md",
        "target/bench-cli-path-report.md",
        "target/bench-sprint-report.md",
        "target/bench-sprint-jobs-report.md",
        "target/bench-sprint-ray-report.md",
        "target/bench-sprint-queue-report.md",
        "target/bench-sandbox-start-report.md",
    ] {
        println!("report: {}", shell::relative(root, &root.join(report)));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_quick_and_rejects_the_rest() {
        assert!(!Opts::parse(&[]).unwrap().quick);
        assert!(Opts::parse(&["--quick".into()]).unwrap().quick);
        assert!(Opts::parse(&["--slow".into()]).is_err());
    }
}
