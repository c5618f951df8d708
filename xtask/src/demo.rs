//! `cargo xtask demo`: the offline demo. It installs the pinned Claude Code CLI, starts Corral's
//! fake model API on 127.0.0.1, and runs `corral run` end to end in a scratch project, so a new
//! user sees the live view, a rate limit survived by resuming the session, the validated
//! `signals.json`, and the run directory, without an account or any network but the npm registry.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::{Context, bail};

use crate::shell;

pub fn run(root: &Path) -> anyhow::Result<()> {
    crate::install_clis::run(root, &["claude".to_string()])?;
    println!("==> building corral and the fake model API");
    shell::run(shell::cargo(root).args([
        "build",
        "-q",
        "-p",
        "corral-cli",
        "-p",
        "corral-test-support",
        "--bins",
    ]))?;

    let demo = root.join("target/demo");
    let _ = std::fs::remove_dir_all(&demo);
    let project = demo.join("project");
    let home = demo.join("home");
    std::fs::create_dir_all(&project)?;
    std::fs::create_dir_all(&home)?;

    println!("==> starting the fake model API (scenario: a 429, then a file, then signals.json)");
    let mut api = Command::new(root.join("target/debug/corral-fake-api"))
        .args(["--scenario", "demo", "--log"])
        .arg(demo.join("api-requests.jsonl"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .context("cannot start corral-fake-api")?;
    let mut first = String::new();
    if let Some(out) = api.stdout.take() {
        BufReader::new(out).read_line(&mut first)?;
    }
    let Some(url) = first
        .trim()
        .strip_prefix("listening on ")
        .map(str::to_string)
    else {
        let _ = api.kill();
        bail!("corral-fake-api did not say where it listens: {first:?}");
    };
    println!("    {url}");

    let bin_dir = root.join(".cache/clis/node_modules/.bin");
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let prompt = format!(
        "Create the file {} containing a one-line greeting.",
        project.join("hello.txt").display()
    );
    let corral = root.join("target/debug/corral");
    let mut run = Command::new(&corral);
    run.args(["run", "--provider", "claude", &prompt])
        .current_dir(&project)
        .env_clear()
        .env("PATH", &path)
        .env("HOME", &home)
        .env(
            "TERM",
            std::env::var("TERM").unwrap_or_else(|_| "dumb".into()),
        )
        .env("ANTHROPIC_API_KEY", "sk-demo-offline")
        .env("ANTHROPIC_BASE_URL", &url)
        .env("DISABLE_TELEMETRY", "1")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        // A short first backoff so the demo does not wait a minute after its rate limit.
        .env("CORRAL_RETRY__BACKOFF_INITIAL_MS", "1000");
    if is_root() {
        // Claude Code refuses bypassPermissions as root unless told the machine is a sandbox;
        // the demo's scratch project and fake API are exactly that.
        run.env("IS_SANDBOX", "1");
    }
    println!(
        "==> {} run --provider claude {prompt:?}\n",
        corral.display()
    );
    let status = run.status();
    drop(api.stdin.take());
    let _ = api.wait();
    let status = status.context("cannot run corral")?;

    println!("\n==> corral runs list");
    let _ = Command::new(&corral)
        .args(["runs", "list"])
        .current_dir(&project)
        .env("HOME", &home)
        .status();
    let runs = project.join(".corral/runs");
    if let Some(dir) = std::fs::read_dir(&runs)
        .ok()
        .and_then(|mut d| d.next())
        .and_then(Result::ok)
    {
        println!("\n==> the run directory {}", dir.path().display());
        let mut entries: Vec<_> = std::fs::read_dir(dir.path())?.flatten().collect();
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            println!(
                "    {:<16} {:>8} bytes",
                e.file_name().to_string_lossy(),
                e.metadata().map(|m| m.len()).unwrap_or(0)
            );
        }
        println!("\n==> signals.json (written by the agent, validated by corral)");
        println!(
            "{}",
            std::fs::read_to_string(dir.path().join("signals.json")).unwrap_or_default()
        );
        println!(
            "==> hello.txt: {}",
            std::fs::read_to_string(project.join("hello.txt"))
                .unwrap_or_default()
                .trim()
        );
    }
    if !status.success() {
        bail!("corral run exited with {status}");
    }
    println!("\ndemo ok; look around in {}", demo.display());
    Ok(())
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}
