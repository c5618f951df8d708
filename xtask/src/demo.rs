//! `cargo xtask demo`: the offline demo. It makes sure the pinned Claude Code CLI (and bubblewrap,
//! where it can be had) is there, starts Corral's fake model API on 127.0.0.1, and runs
//! `corral run` end to end in a scratch project, so a new user sees the live view, a rate limit
//! survived by resuming the session, the validated `signals.json`, and the run directory; then a
//! two-task sprint in a second project: planned from a ticket file by `corral sprint plan`, run by
//! `corral sprint run` (one task needs a second round), shown by `corral sprint status`, and its
//! pull request's text printed by `corral sprint pr`, without an account or any network but the
//! package registries.
//!
//! The demo is a list of named steps ([`STEPS`]), each printing its name and time; the first that
//! fails stops the demo with one message and a `hint:` line. A new step is one variant of
//! [`Step`] and one entry in [`STEPS`].
//!
//! Where bubblewrap cannot be had (not root, no apt-get, or no user namespaces), the demo says so
//! in one line and runs `corral run --allow-degraded-native`: the consent is explicit and visible,
//! and the run's attestation records it.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Instant;

use anyhow::{Context, bail};

use crate::{prereq, shell};

/// One step of the demo.
#[derive(Debug, Clone, Copy)]
enum Step {
    /// npm, the pinned Claude Code, bubblewrap (or the degraded-sandbox consent).
    Prerequisites,
    /// `corral` and `corral-fake-api`.
    Build,
    /// The fake model API on 127.0.0.1, playing the `demo` scenario.
    FakeApi,
    /// `corral run` in the scratch project.
    Run,
    /// hello.txt written and signals.json validated; the run directory shown.
    Check,
    /// `corral sprint plan ticket.md`: the two tasks planned into a sprint file that has only its
    /// settings, against a fake API playing the `sprint-plan` scenario.
    Plan,
    /// `corral sprint run`: a two-task sprint in a second scratch project, one task needing a
    /// second round, against a second fake API playing the `sprint` scenario.
    Sprint,
    /// `corral sprint status`, and the sprint's commits.
    SprintStatus,
    /// `corral sprint pr --print-only`: the pull request's text (the agent's, and Corral's record
    /// of each task) and the commands that open it, against a fake API playing `sprint-pr`.
    Pr,
}

/// The demo, in order.
const STEPS: &[Step] = &[
    Step::Prerequisites,
    Step::Build,
    Step::FakeApi,
    Step::Run,
    Step::Check,
    Step::Plan,
    Step::Sprint,
    Step::SprintStatus,
    Step::Pr,
];

impl Step {
    fn name(self) -> &'static str {
        match self {
            Self::Prerequisites => "prerequisites",
            Self::Build => "build",
            Self::FakeApi => "fake-api",
            Self::Run => "run",
            Self::Check => "check",
            Self::Plan => "plan",
            Self::Sprint => "sprint",
            Self::SprintStatus => "sprint-status",
            Self::Pr => "pr",
        }
    }

    fn run(self, demo: &mut Demo) -> anyhow::Result<()> {
        match self {
            Self::Prerequisites => demo.prerequisites(),
            Self::Build => demo.build(),
            Self::FakeApi => demo.start_api(),
            Self::Run => demo.run_corral(),
            Self::Check => demo.check(),
            Self::Plan => demo.plan(),
            Self::Sprint => demo.sprint(),
            Self::SprintStatus => demo.sprint_status(),
            Self::Pr => demo.pr(),
        }
    }

    /// What to do when the step fails, unless its error already names the fix.
    fn hint(self, demo: &Demo) -> Option<String> {
        match self {
            // The prerequisite errors carry their own `hint:` lines.
            Self::Prerequisites => None,
            Self::Build => Some(
                "the compiler's output above names the error; `cargo build -p corral-cli` \
                 reproduces it"
                    .to_owned(),
            ),
            Self::FakeApi => Some(format!(
                "run `{} --scenario demo` by hand to see why it does not start",
                shell::relative(&demo.root, &demo.fake_api_bin())
            )),
            Self::Run | Self::Check => Some(format!(
                "corral's output above says what failed; the run's record (events.jsonl, run.json) \
                 and the fake API's requests are under {}",
                shell::relative(&demo.root, &demo.dir)
            )),
            Self::Plan | Self::Sprint | Self::SprintStatus | Self::Pr => Some(format!(
                "corral's output above says what failed; the sprint's state and every spawn's \
                 record are under {}, the fake API's requests in {}",
                shell::relative(
                    &demo.root,
                    &demo.sprint_project().join(".corral/sprints/demo")
                ),
                shell::relative(&demo.root, &demo.dir.join(self.api_log()))
            )),
        }
    }
}

impl Step {
    /// The fake API's request log of a sprint step.
    fn api_log(self) -> &'static str {
        match self {
            Self::Plan => "plan-api-requests.jsonl",
            Self::Pr => "pr-api-requests.jsonl",
            Self::Prerequisites
            | Self::Build
            | Self::FakeApi
            | Self::Run
            | Self::Check
            | Self::Sprint
            | Self::SprintStatus => "sprint-api-requests.jsonl",
        }
    }
}

/// Everything the steps share.
#[derive(Debug)]
struct Demo {
    root: PathBuf,
    /// `target/demo` (in `CARGO_TARGET_DIR` when it is set): the scratch projects, HOME and
    /// the fake APIs' request logs.
    dir: PathBuf,
    /// Why bubblewrap is not used, when it is not (the run gets `--allow-degraded-native`).
    degraded: Option<String>,
    api: Option<FakeApiProcess>,
    /// The fake API's URL, once it listens.
    url: String,
}

/// `cargo xtask demo`.
pub fn run(root: &Path) -> anyhow::Result<()> {
    let started = Instant::now();
    let mut demo = Demo {
        root: root.to_path_buf(),
        dir: cargo_target(root).join("demo"),
        degraded: None,
        api: None,
        url: String::new(),
    };
    for (index, step) in STEPS.iter().enumerate() {
        let name = step.name();
        println!("\n==> demo step {}/{}: {name}", index + 1, STEPS.len());
        let step_started = Instant::now();
        if let Err(err) = step.run(&mut demo) {
            demo.stop_api();
            let hint = step
                .hint(&demo)
                .map(|hint| format!("\nhint: {hint}"))
                .unwrap_or_default();
            bail!("demo step `{name}` failed: {err:#}{hint}");
        }
        println!(
            "==> demo step {name}: ok in {:.1}s",
            step_started.elapsed().as_secs_f64()
        );
    }
    demo.stop_api();
    println!(
        "\ndemo ok in {:.1}s; look around in {}",
        started.elapsed().as_secs_f64(),
        shell::relative(root, &demo.dir)
    );
    Ok(())
}

impl Demo {
    fn project(&self) -> PathBuf {
        self.dir.join("project")
    }

    fn home(&self) -> PathBuf {
        self.dir.join("home")
    }

    // Where `cargo build` put them: the target directory `CARGO_TARGET_DIR` names, if any.
    fn corral_bin(&self) -> PathBuf {
        cargo_target(&self.root).join("debug/corral")
    }

    fn fake_api_bin(&self) -> PathBuf {
        cargo_target(&self.root).join("debug/corral-fake-api")
    }

    fn prerequisites(&mut self) -> anyhow::Result<()> {
        let outcome = prereq::ensure(&prereq::Machine::current(&self.root), prereq::DEMO)?;
        self.degraded = outcome.missing("bubblewrap").map(str::to_owned);
        Ok(())
    }

    fn build(&mut self) -> anyhow::Result<()> {
        shell::run(shell::cargo(&self.root).args([
            "build",
            "-q",
            "-p",
            "corral-cli",
            "-p",
            "corral-test-support",
            "--bins",
        ]))
    }

    fn start_api(&mut self) -> anyhow::Result<()> {
        if self.dir.exists() {
            std::fs::remove_dir_all(&self.dir)
                .with_context(|| format!("could not remove {}", self.dir.display()))?;
        }
        for dir in [self.project(), self.home()] {
            std::fs::create_dir_all(&dir)
                .with_context(|| format!("could not create {}", dir.display()))?;
        }
        // The scratch project is a git repository of its own: corral takes the nearest
        // `corral.toml` or git work tree's top as the project root, and without this it would be
        // the checkout's, so the run would land under the checkout's `.corral/` and its
        // cleanliness check would read the checkout instead of the project.
        shell::run(
            Command::new("git")
                .args(["init", "-q"])
                .current_dir(self.project())
                .env("GIT_CONFIG_GLOBAL", "/dev/null"),
        )
        .context("could not make the scratch project a git repository (is git installed?)")?;
        println!("    scenario: a 429, then hello.txt, then signals.json, then done");
        let (api, url) = self.spawn_api("demo", "api-requests.jsonl", None)?;
        println!("    listening on {url}");
        self.url = url;
        self.api = Some(api);
        Ok(())
    }

    /// `corral-fake-api --scenario <scenario>`, logging to `<dir>/<log>`, and its URL; a
    /// scenario that names files of a project is given it.
    fn spawn_api(
        &self,
        scenario: &str,
        log: &str,
        project: Option<&Path>,
    ) -> anyhow::Result<(FakeApiProcess, String)> {
        let mut api = Command::new(self.fake_api_bin());
        api.args(["--scenario", scenario, "--log"])
            .arg(self.dir.join(log));
        if let Some(project) = project {
            api.arg("--project").arg(project);
        }
        let mut child = api
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .with_context(|| format!("could not start {}", self.fake_api_bin().display()))?;
        let mut first = String::new();
        if let Some(out) = child.stdout.take() {
            BufReader::new(out)
                .read_line(&mut first)
                .context("could not read what corral-fake-api printed")?;
        }
        let api = FakeApiProcess(child);
        let Some(url) = first.trim().strip_prefix("listening on ") else {
            drop(api);
            bail!("corral-fake-api did not say where it listens: {first:?}");
        };
        Ok((api, url.to_owned()))
    }

    /// `corral` in `dir` with the demo's environment only: the pinned CLIs on `PATH`, the demo's
    /// HOME, Claude Code pointed at the fake API at `url`.
    fn corral(&self, dir: &Path, url: &str) -> Command {
        let bin_dir = self.root.join(".cache/clis/node_modules/.bin");
        let path = format!(
            "{}:{}",
            bin_dir.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let mut cmd = Command::new(self.corral_bin());
        cmd.current_dir(dir)
            .env_clear()
            .env("PATH", &path)
            .env("HOME", self.home())
            .env(
                "TERM",
                std::env::var("TERM").unwrap_or_else(|_| "dumb".into()),
            )
            .env("ANTHROPIC_API_KEY", "sk-demo-offline")
            .env("ANTHROPIC_BASE_URL", url)
            .env("DISABLE_TELEMETRY", "1")
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1");
        if prereq::is_root() {
            // Claude Code refuses bypassPermissions as root unless told the machine is a sandbox;
            // the demo's scratch project and fake API are exactly that.
            cmd.env("IS_SANDBOX", "1");
        }
        cmd
    }

    fn run_corral(&mut self) -> anyhow::Result<()> {
        let project = self.project();
        let prompt = format!(
            "Create the file {} containing a one-line greeting.",
            project.join("hello.txt").display()
        );
        let mut run = self.corral(&project, &self.url);
        run.args(["run", "--provider", "claude"]);
        match &self.degraded {
            Some(why) => {
                println!(
                    "    sandbox: DEGRADED by consent (--allow-degraded-native): bubblewrap is not \
                     usable here ({}); Claude Code runs as a plain child process, its writes not \
                     confined",
                    first_line(why)
                );
                run.arg("--allow-degraded-native");
            }
            None => println!("    sandbox: bubblewrap"),
        }
        // A short first backoff so the demo does not wait a minute after its rate limit.
        run.arg(&prompt)
            .env("CORRAL_RETRY__BACKOFF_INITIAL_MS", "1000");
        println!("    corral run --provider claude {prompt:?}\n");
        let status = run.status().context("could not start corral")?;
        if !status.success() {
            let outcome = self
                .run_record()
                .ok()
                .and_then(|record| record["outcome"].as_str().map(str::to_owned))
                .unwrap_or_else(|| "no run record".to_owned());
            bail!("corral run exited with {status} (outcome {outcome})");
        }
        Ok(())
    }

    fn check(&mut self) -> anyhow::Result<()> {
        let dir = self.run_dir()?;
        let record = self.run_record()?;
        let hello = std::fs::read_to_string(self.project().join("hello.txt"))
            .context("the agent did not write hello.txt")?;
        if hello.trim().is_empty() {
            bail!("hello.txt is empty");
        }
        if record["signalsValid"] != true {
            bail!(
                "signals.json was not validated (run.json says signalsValid = {})",
                record["signalsValid"]
            );
        }
        let signals = std::fs::read_to_string(dir.join("signals.json"))
            .context("the run directory has no signals.json")?;
        println!(
            "    the run directory {}",
            shell::relative(&self.root, &dir)
        );
        let mut entries: Vec<_> = std::fs::read_dir(&dir)
            .with_context(|| format!("could not list {}", dir.display()))?
            .flatten()
            .collect();
        entries.sort_by_key(std::fs::DirEntry::file_name);
        for entry in entries {
            println!(
                "      {:<16} {:>8} bytes",
                entry.file_name().to_string_lossy(),
                entry.metadata().map(|m| m.len()).unwrap_or(0)
            );
        }
        println!("    signals.json (written by the agent, validated by corral):");
        for line in signals.lines() {
            println!("      {line}");
        }
        println!("    hello.txt: {}", hello.trim());
        println!(
            "    attempts {}, outcome {}",
            record["attempts"], record["outcome"]
        );
        Ok(())
    }

    /// The one run directory under the project.
    fn run_dir(&self) -> anyhow::Result<PathBuf> {
        let runs = self.project().join(".corral/runs");
        let mut dirs: Vec<PathBuf> = std::fs::read_dir(&runs)
            .with_context(|| format!("corral made no run directory under {}", runs.display()))?
            .flatten()
            .map(|entry| entry.path())
            .filter(|path| path.is_dir())
            .collect();
        match (dirs.pop(), dirs.is_empty()) {
            (Some(dir), true) => Ok(dir),
            (Some(_), false) => bail!("more than one run directory under {}", runs.display()),
            (None, _) => bail!("corral made no run directory under {}", runs.display()),
        }
    }

    /// The run's `run.json`.
    fn run_record(&self) -> anyhow::Result<serde_json::Value> {
        let path = self.run_dir()?.join("run.json");
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("could not read {}", path.display()))?;
        serde_json::from_str(&text).with_context(|| format!("{} is not JSON", path.display()))
    }

    fn sprint_project(&self) -> PathBuf {
        self.dir.join("sprint-project")
    }

    /// The sprint file of the demo before planning: its settings (a check that rejects a TODO
    /// left in a file) and roles, no tasks yet.
    fn sprint_file(&self, evaluator: bool) -> String {
        let evaluator = if evaluator {
            "[roles.evaluator]\nprovider = \"claude\"\n"
        } else {
            "# No evaluator: bubblewrap is not usable here, and a read-only review needs it.\n\
             [roles.evaluator]\nprovider = \"claude\"\nenabled = false\n"
        };
        format!(
            "[sprint]\nname = \"demo\"\ncheck = \"! grep -q TODO *.txt\"\ncheck_timeout_ms = 60000\n\
             max_rounds = 3\nmax_attempts = 2\n\n[roles.generator]\nprovider = \"claude\"\n\n\
             {evaluator}\n\
             # The tasks are planned from ticket.md: `corral sprint plan ticket.md` adds them below.\n"
        )
    }

    /// The ticket the demo's sprint is planned from.
    const TICKET: &'static str = "# Greet and say goodbye\n\n\
        The project needs a one-line greeting in hello.txt and, once it is there, a one-line \
        farewell in bye.txt. No TODO may be left in either.\n";

    /// `corral` for a sprint step in the sprint project, talking to the fake API at `url`, with
    /// the degraded sandbox's consent when bubblewrap is not usable here.
    fn corral_sprint(&self, url: &str) -> Command {
        let mut cmd = self.corral(&self.sprint_project(), url);
        if self.degraded.is_some() {
            cmd.env("CORRAL_SANDBOX__ALLOW_DEGRADED_NATIVE", "true");
        }
        cmd
    }

    fn sprint_git(&self, args: &[&str]) -> anyhow::Result<()> {
        shell::run(
            Command::new("git")
                .args(args)
                .current_dir(self.sprint_project())
                .env("GIT_CONFIG_GLOBAL", "/dev/null"),
        )
    }

    fn plan(&mut self) -> anyhow::Result<()> {
        let project = self.sprint_project();
        std::fs::create_dir_all(&project)
            .with_context(|| format!("could not create {}", project.display()))?;
        let evaluator = self.degraded.is_none();
        std::fs::write(
            project.join("corral-sprint.toml"),
            self.sprint_file(evaluator),
        )
        .context("could not write the demo's corral-sprint.toml")?;
        std::fs::write(project.join("ticket.md"), Self::TICKET)
            .context("could not write the demo's ticket.md")?;
        self.sprint_git(&["init", "-q", "-b", "main"])
            .context("could not make the sprint project a git repository (is git installed?)")?;
        self.sprint_git(&["config", "user.name", "Corral demo"])?;
        self.sprint_git(&["config", "user.email", "demo@corral.invalid"])?;
        println!("    ticket.md:");
        for line in Self::TICKET.lines() {
            println!("      {line}");
        }
        println!(
            "    corral-sprint.toml has the check and the roles and no tasks; the agent plans them\n"
        );
        let (api, url) =
            self.spawn_api("sprint-plan", "plan-api-requests.jsonl", Some(&project))?;
        println!("    corral sprint plan ticket.md\n");
        let status = self
            .corral_sprint(&url)
            .args(["sprint", "plan", "ticket.md"])
            .status()
            .context("could not start corral")?;
        drop(api);
        if !status.success() {
            bail!("corral sprint plan exited with {status}");
        }
        self.sprint_git(&["add", "-A"])?;
        self.sprint_git(&[
            "commit",
            "-q",
            "-m",
            "The demo's sprint, planned from ticket.md",
        ])?;
        Ok(())
    }

    fn sprint(&mut self) -> anyhow::Result<()> {
        println!(
            "    sprint: greet passes in round 1; farewell leaves a TODO that the check rejects, \
             and round 2 (the same session, told the check's output) fixes it"
        );
        let (api, url) = self.spawn_api("sprint", "sprint-api-requests.jsonl", None)?;
        let mut run = self.corral_sprint(&url);
        run.args(["sprint", "run"]);
        match &self.degraded {
            Some(_) => println!(
                "    sandbox: DEGRADED by consent, as above; the evaluator is off (a read-only \
                 review needs bubblewrap)"
            ),
            None => println!("    sandbox: bubblewrap; the evaluator reviews read-only"),
        }
        println!("    corral sprint run\n");
        let status = run.status().context("could not start corral")?;
        drop(api);
        if !status.success() {
            bail!("corral sprint run exited with {status}");
        }
        Ok(())
    }

    fn sprint_status(&mut self) -> anyhow::Result<()> {
        let project = self.sprint_project();
        println!("    corral sprint status\n");
        let status = self
            .corral(&project, "http://127.0.0.1:9")
            .args(["sprint", "status"])
            .status()
            .context("could not start corral")?;
        if !status.success() {
            bail!("corral sprint status exited with {status}");
        }
        let log = Command::new("git")
            .args([
                "log",
                "--format=%h %s%n%(trailers:key=Corral-Task)",
                "main..corral/demo",
            ])
            .current_dir(&project)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .output()
            .context("could not run git log")?;
        let log = String::from_utf8_lossy(&log.stdout);
        println!("\n    the sprint's commits on corral/demo (newest first):");
        for line in log.lines().filter(|l| !l.trim().is_empty()) {
            println!("      {line}");
        }
        let commits = log.matches("Corral-Task:").count();
        if commits != 2 {
            bail!("the sprint made {commits} commits, not one per task (2)");
        }
        Ok(())
    }

    fn pr(&mut self) -> anyhow::Result<()> {
        let (api, url) = self.spawn_api("sprint-pr", "pr-api-requests.jsonl", None)?;
        println!(
            "    corral sprint pr --print-only (the demo stays offline: the text and the commands \
             that would push the branch and open it)\n"
        );
        let output = self
            .corral_sprint(&url)
            .args(["sprint", "pr", "--print-only"])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .output()
            .context("could not start corral")?;
        drop(api);
        let text = String::from_utf8_lossy(&output.stdout);
        for line in text.lines() {
            println!("      {line}");
        }
        if !output.status.success() {
            bail!("corral sprint pr exited with {}", output.status);
        }
        if !text.contains("## What Corral recorded") {
            bail!("the pull request's text has no record of the tasks");
        }
        Ok(())
    }

    fn stop_api(&mut self) {
        self.api = None;
    }
}

/// The target directory cargo builds into here: `CARGO_TARGET_DIR` (relative to the workspace
/// when relative), else the workspace's `target/`.
fn cargo_target(root: &Path) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), |dir| root.join(dir))
}

/// The first line of `text`.
fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or_default()
}

/// The running `corral-fake-api`: dropping it closes its stdin (its signal to stop) and waits,
/// killing it if it is still there.
#[derive(Debug)]
struct FakeApiProcess(Child);

impl Drop for FakeApiProcess {
    fn drop(&mut self) {
        drop(self.0.stdin.take());
        for _ in 0..50 {
            if matches!(self.0.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
