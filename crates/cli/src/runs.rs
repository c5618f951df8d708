//! `corral runs list | show | follow`: past runs and runs in flight, read from their directories.

use std::io::{BufRead, BufReader, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::Duration;

use corral_engine::EVENTS_FILE;

use crate::args::RunsCommand;
use crate::config_cmd::load_settings;
use crate::exit::{Exit, usage};
use crate::rundir::{RunRecord, read_record};

fn runs_root(dir: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    if let Some(dir) = dir {
        return Ok(dir);
    }
    let cwd = std::env::current_dir()?;
    let settings = load_settings(&cwd, Vec::new())?.settings;
    let dir = PathBuf::from(settings.run.runs_dir);
    Ok(if dir.is_absolute() {
        dir
    } else {
        cwd.join(dir)
    })
}

fn run_dirs(root: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(root)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.path())
                .filter(|p| p.join("run.json").is_file())
                .collect()
        })
        .unwrap_or_default();
    dirs.sort();
    dirs.reverse();
    dirs
}

fn find_run(root: &Path, id: &str) -> anyhow::Result<PathBuf> {
    let matches: Vec<PathBuf> = run_dirs(root)
        .into_iter()
        .filter(|d| {
            d.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(id))
        })
        .collect();
    match matches.as_slice() {
        [one] => Ok(one.clone()),
        [] => Err(usage(format!("no run {id:?} under {}", root.display()))),
        many => Err(usage(format!(
            "{id:?} matches {} runs under {}; give more of the id",
            many.len(),
            root.display()
        ))),
    }
}

/// Runs a `corral runs` subcommand.
pub async fn runs(cmd: RunsCommand) -> anyhow::Result<Exit> {
    match cmd {
        RunsCommand::List { dir, json } => list(&runs_root(dir)?, json),
        RunsCommand::Show { id, dir } => show(&find_run(&runs_root(dir)?, &id)?),
        RunsCommand::Follow { id, dir } => follow(&find_run(&runs_root(dir)?, &id)?).await,
    }
}

fn list(root: &Path, json: bool) -> anyhow::Result<Exit> {
    let records: Vec<RunRecord> = run_dirs(root)
        .iter()
        .filter_map(|d| read_record(d).ok())
        .collect();
    if json {
        for r in &records {
            println!("{}", serde_json::to_string(r)?);
        }
        return Ok(Exit::Success);
    }
    if records.is_empty() {
        println!("no runs under {}", root.display());
        return Ok(Exit::Success);
    }
    println!(
        "{:<34} {:<9} {:<18} {:>4} {:>9}  session",
        "run", "provider", "outcome", "exit", "duration"
    );
    for r in records {
        let duration = r
            .duration_ms
            .map_or("-".to_string(), |ms| format!("{:.1}s", ms as f64 / 1000.0));
        let exit = r.exit_code.map_or("-".to_string(), |c| c.to_string());
        println!(
            "{:<34} {:<9} {:<18} {:>4} {:>9}  {}",
            r.run_id,
            r.provider.as_str(),
            r.outcome,
            exit,
            duration,
            r.session_id.as_deref().unwrap_or("-")
        );
    }
    Ok(Exit::Success)
}

fn show(dir: &Path) -> anyhow::Result<Exit> {
    let record = read_record(dir)?;
    println!("{}", serde_json::to_string_pretty(&record)?);
    println!("files:");
    let mut files: Vec<_> = std::fs::read_dir(dir)?.flatten().collect();
    files.sort_by_key(|e| e.file_name());
    for entry in files {
        let len = entry.metadata().map(|m| m.len()).unwrap_or(0);
        println!(
            "  {:<24} {len:>10} bytes",
            entry.file_name().to_string_lossy()
        );
    }
    Ok(Exit::Success)
}

/// One log line, shortened for a person.
fn describe(line: &str) -> String {
    let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
        return line.to_string();
    };
    let kind = v["kind"].as_str().unwrap_or("?");
    let at = v["mono_ms"].as_f64().unwrap_or(0.0) / 1000.0;
    let attempt = v["attempt"].as_u64().unwrap_or(0);
    let detail = match kind {
        "agent" => {
            let event = v["event"].as_str().unwrap_or("?");
            let text = ["text", "name", "session_id", "line"]
                .iter()
                .find_map(|k| v[*k].as_str())
                .unwrap_or("")
                .lines()
                .next()
                .unwrap_or("")
                .chars()
                .take(100)
                .collect::<String>();
            format!("{event} {text}")
        }
        "spawn" => format!(
            "{} (pid {})",
            v["program"].as_str().unwrap_or("?"),
            v["pid"]
        ),
        "exit" => format!("code {} signal {}", v["code"], v["signal"]),
        "classified" => format!(
            "{}: {}",
            v["class"].as_str().unwrap_or("?"),
            v["detail"].as_str().unwrap_or("")
        ),
        "backoff" => format!(
            "{} ms ({})",
            v["wait_ms"],
            v["reason"].as_str().unwrap_or("")
        ),
        "stderr" => v["line"].as_str().unwrap_or("").chars().take(100).collect(),
        "run_finished" => v["outcome"].as_str().unwrap_or("?").to_string(),
        _ => String::new(),
    };
    format!("[{at:>8.1}s #{attempt}] {kind} {detail}")
}

async fn follow(dir: &Path) -> anyhow::Result<Exit> {
    let path = dir.join(EVENTS_FILE);
    let mut offset = 0u64;
    let mut partial = String::new();
    loop {
        if let Ok(mut file) = std::fs::File::open(&path) {
            file.seek(SeekFrom::Start(offset))?;
            let mut reader = BufReader::new(file);
            let mut buf = String::new();
            loop {
                buf.clear();
                let n = reader.read_line(&mut buf)?;
                if n == 0 {
                    break;
                }
                offset += n as u64;
                if buf.ends_with('\n') {
                    partial.push_str(buf.trim_end_matches('\n'));
                    println!("{}", describe(&partial));
                    partial.clear();
                } else {
                    // A line still being written: keep it until its end arrives.
                    partial.push_str(&buf);
                }
            }
        }
        let finished = read_record(dir)
            .map(|r| r.finished_at.is_some())
            .unwrap_or(false);
        if finished && partial.is_empty() {
            let record = read_record(dir)?;
            println!(
                "run {} finished: {} (exit {})",
                record.run_id,
                record.outcome,
                record.exit_code.unwrap_or(0)
            );
            return Ok(Exit::Success);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
