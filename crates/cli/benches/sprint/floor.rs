//! The floor a user would write instead of `corral sprint run` (issue 38): a shell loop of the
//! bare `claude -p`, the same check, one `git commit` a task.
//!
//! Both sides run the real Claude Code against a fresh fake model API each run, [`TASKS`] tasks
//! of one round each, evaluator off, the same check (`! grep -qs TODO *.txt`) and one commit a
//! task:
//!
//! - **loop**: `sh loop.sh`: per task `claude -p --verbose --output-format stream-json
//!   --permission-mode bypassPermissions "Write <project>/tNN.txt …"`, the check, `git add
//!   --all`, `git commit`. Nothing else: no sandbox, no record, no resume, no validation.
//! - **sprint**: `corral sprint run` over the same tasks (default sandbox, `max_rounds = 1`),
//!   and beside it the same with `--no-preflight` (reported):
//!   what the sprint adds is its pre-verify check before the first task, the contract and its
//!   validated `signals.json`, the execution log and session files, the sandbox, the stray-write
//!   check, `sprint.json` at every step and the commit's trailers.
//!
//! The fake API answers each spawn by what its request names: the loop's by the absolute path
//! of the task's file in the prompt (a request that lost its task cannot name it), the sprint's
//! by the task and round its contract's `signals.json` path names. The table counts what each
//! side ran (checks, commits, model requests), so that "the same work" is seen, not assumed.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Instant;

use corral_test_support::fake_api::{FakeApi, Role, Scenario, Step};
use corral_test_support::is_root;

use crate::common::{commit_template, fmt_list, fresh_copy, git, median, rotation, task_id};

/// Tasks per run.
pub const TASKS: usize = 3;
/// Target: the sprint's median wall over the loop's.
const TARGET: f64 = 1.05;
/// The check both sides run after each task (and the sprint once before the first).
const CHECK: &str = "! grep -qs TODO *.txt";
/// What the model writes into each task's file.
const CONTENT: &str = "done\n";

/// The generator's report: done, with its commit subject.
fn complete(task: &str) -> String {
    format!(
        r#"{{"schemaVersion": 1, "signals": [
  {{"type": "task-complete", "timestamp": "2026-12-07T10:00:00Z"}},
  {{"type": "commit-message", "timestamp": "2026-12-07T10:00:00Z", "subject": "Task {task}"}}
]}}
"#
    )
}

/// A scratch home and the template repository each run copies.
pub struct Floor {
    _dir: tempfile::TempDir,
    root: PathBuf,
    home: PathBuf,
    claude: PathBuf,
    template: PathBuf,
}

#[derive(Debug, Clone, Copy)]
enum Side {
    Loop,
    Sprint,
    /// The sprint without its preflight (one more start of the CLI, and a model request, before
    /// the first task): a cost a longer sprint pays once.
    SprintNoPreflight,
}

impl Side {
    const ALL: [Side; 3] = [Side::Loop, Side::Sprint, Side::SprintNoPreflight];

    /// Where the side's project is: the sprint sides share the path the sprint file names.
    fn dir(self) -> &'static str {
        match self {
            Side::Loop => "loop",
            Side::Sprint | Side::SprintNoPreflight => "sprint",
        }
    }
}

/// What one run did, besides its wall.
#[derive(Debug, Default, Clone, Copy)]
pub struct Counted {
    /// Times the check ran.
    pub checks: usize,
    /// Task commits made.
    pub commits: usize,
    /// Model requests the fake API answered.
    pub requests: usize,
}

impl Floor {
    /// The template repository, with the sprint file naming the sprint side's project paths.
    pub fn new(claude: &Path) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let home = root.join("home");
        std::fs::create_dir_all(&home).unwrap();
        let template = root.join("template");
        std::fs::create_dir_all(&template).unwrap();
        std::fs::write(template.join("README"), "bench\n").unwrap();
        std::fs::write(template.join(".gitignore"), ".corral/\n.checks\n").unwrap();
        // The check counts its runs in a file outside the repository, on both sides alike.
        // The check counts its runs in an ignored file of the project (a sprint's check runs in
        // the sandbox, where the work tree is writable and a scratch directory outside is not).
        std::fs::write(
            template.join("check.sh"),
            format!("#!/bin/sh\necho x >> .checks\n{CHECK}\n"),
        )
        .unwrap();
        let project = root.join(Side::Sprint.dir());
        let mut sprint = String::from(
            "[sprint]\nname = \"floor\"\ncheck = \"sh check.sh\"\ncheck_timeout_ms = 30000\n\
             max_rounds = 1\n\n[roles.generator]\nprovider = \"claude\"\n\n\
             [roles.evaluator]\nprovider = \"claude\"\nenabled = false\n",
        );
        for n in 1..=TASKS {
            let id = task_id(n);
            write!(
                sprint,
                "\n[[tasks]]\nid = \"{id}\"\ntitle = \"Task {id}\"\nprompt = \"Write {} containing done.\"\n",
                project.join(format!("{id}.txt")).display()
            )
            .unwrap();
        }
        std::fs::write(template.join("corral-sprint.toml"), sprint).unwrap();
        let mut looped = String::from("#!/bin/sh\nset -e\n");
        for n in 1..=TASKS {
            let id = task_id(n);
            write!(
                looped,
                "\"$CLAUDE\" -p --verbose --output-format stream-json --permission-mode bypassPermissions \
                 \"Write $PWD/{id}.txt containing done.\" > /dev/null\n\
                 sh check.sh\n\
                 git add --all\n\
                 git commit --quiet -m \"Task {id}\"\n"
            )
            .unwrap();
        }
        std::fs::write(template.join("loop.sh"), looped).unwrap();
        commit_template(&template);
        Floor {
            _dir: dir,
            root,
            home,
            claude: claude.to_path_buf(),
            template,
        }
    }

    /// A fresh copy of the template at the side's own path.
    fn project(&self, side: Side) -> PathBuf {
        let project = self.root.join(side.dir());
        fresh_copy(&self.template, &project);
        project
    }

    /// The fake API's script for `side`: each spawn answered by what its request names.
    fn scenario(side: Side) -> Scenario {
        let write = |id: &str| Step::write_named_for("claude", format!("{id}.txt"), CONTENT);
        match side {
            Side::Loop => Scenario::script(
                (1..=TASKS).flat_map(|n| [write(&task_id(n)).unwrap(), Step::text("Done.")]),
            ),
            Side::Sprint | Side::SprintNoPreflight => {
                (1..=TASKS).fold(Scenario::default(), |s, n| {
                    let id = task_id(n);
                    s.with_round(
                        Role::Generator,
                        &id,
                        1,
                        [
                            write(&id).unwrap(),
                            Step::write_signals_for("claude", complete(&id)).unwrap(),
                            Step::text("Done."),
                        ],
                    )
                })
            }
        }
    }

    /// One run of `side`: its wall in seconds and what it did.
    fn run(&self, corral: &Path, side: Side) -> (f64, Counted) {
        let project = self.project(side);
        let counter = project.join(".checks");
        let api = FakeApi::start(Self::scenario(side)).unwrap();
        let program = match side {
            Side::Loop => Path::new("sh"),
            Side::Sprint | Side::SprintNoPreflight => corral,
        };
        let mut cmd = corral_test_support::command(program);
        cmd.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &self.home)
            .env("ANTHROPIC_API_KEY", "sk-bench")
            .env("ANTHROPIC_BASE_URL", api.url())
            .env("DISABLE_TELEMETRY", "1")
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
            .env("DISABLE_AUTOUPDATER", "1")
            .current_dir(&project)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        if is_root() {
            cmd.env("IS_SANDBOX", "1");
        }
        match side {
            Side::Loop => {
                cmd.env("CLAUDE", &self.claude).arg("loop.sh");
            }
            Side::Sprint | Side::SprintNoPreflight => {
                cmd.env("CORRAL_PROVIDERS__CLAUDE__COMMAND", &self.claude)
                    .args(["sprint", "run"]);
                if matches!(side, Side::SprintNoPreflight) {
                    cmd.arg("--no-preflight");
                }
            }
        }
        let started = Instant::now();
        let out = cmd.output().unwrap();
        let wall = started.elapsed().as_secs_f64();
        assert!(
            out.status.success(),
            "floor {side:?} exited with {}\nstderr: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        let log = git(&project, &["log", "--format=%s"]);
        let commits = log.lines().filter(|l| l.starts_with("Task t")).count();
        assert_eq!(
            commits, TASKS,
            "floor {side:?} made {commits} commits:\n{log}"
        );
        for n in 1..=TASKS {
            let id = task_id(n);
            let text = std::fs::read_to_string(project.join(format!("{id}.txt"))).unwrap();
            assert_eq!(text, CONTENT, "floor {side:?}: {id}.txt");
        }
        let checks = std::fs::read_to_string(&counter)
            .map(|s| s.lines().count())
            .unwrap_or(0);
        let counted = Counted {
            checks,
            commits,
            requests: api.model_requests().len(),
        };
        (wall, counted)
    }

    /// One untimed run of each side: Claude Code's first start in the home, Corral's version
    /// cache, the page cache.
    pub fn warm_up(&self, corral: &Path) {
        for side in Side::ALL {
            self.run(corral, side);
        }
    }

    /// `n` rotating rounds; walls in seconds and the last run's counts, indexed like
    /// `Side::ALL`.
    pub fn rounds(&self, corral: &Path, n: usize) -> [(Vec<f64>, Counted); 3] {
        let mut out: [(Vec<f64>, Counted); 3] = Default::default();
        for round in 0..n {
            for i in rotation(round, Side::ALL.len()) {
                let side = Side::ALL[i];
                let (wall, counted) = self.run(corral, side);
                eprintln!("  floor {side:?} round {}/{n}: {wall:.2} s", round + 1);
                out[i].0.push(wall);
                out[i].1 = counted;
            }
        }
        out
    }
}

/// The floor's table.
pub fn report(runs: &[(Vec<f64>, Counted); 3], load_before: &str, load_after: &str) -> String {
    let floor = median(&runs[0].0);
    let ratio = median(&runs[1].0) / floor;
    let verdict = if ratio <= TARGET { "PASS" } else { "MISS" };
    let row = |name: &str, walls: &[f64], c: Counted, ratio: &str, target: &str, result: &str| {
        format!(
            "| {name} | {:.2} | {} | {} | {} | {} | {ratio} | {target} | {result} |\n",
            median(walls),
            fmt_list(walls),
            c.checks,
            c.commits,
            c.requests,
        )
    };
    let mut out = format!(
        "| {TASKS} tasks × 1 round, real Claude Code, evaluator off ({} rounds) | median wall (s) | runs (s) | checks | commits | model requests | ratio to loop | Target | Result |\n\
         |---|---|---|---|---|---|---|---|---|\n",
        runs[0].0.len()
    );
    out.push_str(&row(
        "loop: `claude -p`, the check, `git commit`",
        &runs[0].0,
        runs[0].1,
        "1.00",
        "",
        "",
    ));
    out.push_str(&row(
        "`corral sprint run` (default sandbox)",
        &runs[1].0,
        runs[1].1,
        &format!("{ratio:.2}×"),
        &format!("≤ {TARGET:.2}×"),
        verdict,
    ));
    out.push_str(&row(
        "`corral sprint run --no-preflight`",
        &runs[2].0,
        runs[2].1,
        &format!("{:.2}×", median(&runs[2].0) / floor),
        "",
        "",
    ));
    let _ = write!(
        out,
        "\nLoad average (1, 5, 15 min): {load_before} before, {load_after} after.\n"
    );
    out
}
