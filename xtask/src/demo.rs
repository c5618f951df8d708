//! `cargo xtask demo`: the offline demo. It makes sure the pinned Claude Code CLI (and bubblewrap,
//! where it can be had) is there, starts Corral's fake model API on 127.0.0.1, and runs
//! `corral run` end to end in a scratch project, so a new user sees the live view, a rate limit
//! survived by resuming the session, the validated `signals.json`, and the run directory, without
//! an account or any network but the package registries.
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
}

/// The demo, in order.
const STEPS: &[Step] = &[
    Step::Prerequisites,
    Step::Build,
    Step::FakeApi,
    Step::Run,
    Step::Check,
];

impl Step {
    fn name(self) -> &'static str {
        match self {
            Self::Prerequisites => "prerequisites",
            Self::Build => "build",
            Self::FakeApi => "fake-api",
            Self::Run => "run",
            Self::Check => "check",
        }
    }

    fn run(self, demo: &mut Demo) -> anyhow::Result<()> {
        match self {
            Self::Prerequisites => demo.prerequisites(),
            Self::Build => demo.build(),
            Self::FakeApi => demo.start_api(),
            Self::Run => demo.run_corral(),
            Self::Check => demo.check(),
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
        }
    }
}

/// Everything the steps share.
#[derive(Debug)]
struct Demo {
    root: PathBuf,
    /// `target/demo`: the scratch project, HOME and the fake API's request log.
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
        dir: root.join("target/demo"),
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

    fn corral_bin(&self) -> PathBuf {
        self.root.join("target/debug/corral")
    }

    fn fake_api_bin(&self) -> PathBuf {
        self.root.join("target/debug/corral-fake-api")
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
        let mut child = Command::new(self.fake_api_bin())
            .args(["--scenario", "demo", "--log"])
            .arg(self.dir.join("api-requests.jsonl"))
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
        println!("    listening on {url}");
        self.url = url.to_owned();
        self.api = Some(api);
        Ok(())
    }

    fn run_corral(&mut self) -> anyhow::Result<()> {
        let project = self.project();
        let bin_dir = self.root.join(".cache/clis/node_modules/.bin");
        let path = format!(
            "{}:{}",
            bin_dir.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let prompt = format!(
            "Create the file {} containing a one-line greeting.",
            project.join("hello.txt").display()
        );
        let mut run = Command::new(self.corral_bin());
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
        run.arg(&prompt)
            .current_dir(&project)
            .env_clear()
            .env("PATH", &path)
            .env("HOME", self.home())
            .env(
                "TERM",
                std::env::var("TERM").unwrap_or_else(|_| "dumb".into()),
            )
            .env("ANTHROPIC_API_KEY", "sk-demo-offline")
            .env("ANTHROPIC_BASE_URL", &self.url)
            .env("DISABLE_TELEMETRY", "1")
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
            // A short first backoff so the demo does not wait a minute after its rate limit.
            .env("CORRAL_RETRY__BACKOFF_INITIAL_MS", "1000");
        if prereq::is_root() {
            // Claude Code refuses bypassPermissions as root unless told the machine is a sandbox;
            // the demo's scratch project and fake API are exactly that.
            run.env("IS_SANDBOX", "1");
        }
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
        if record["signals_valid"] != true {
            bail!(
                "signals.json was not validated (run.json says signals_valid = {})",
                record["signals_valid"]
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

    fn stop_api(&mut self) {
        self.api = None;
    }
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
