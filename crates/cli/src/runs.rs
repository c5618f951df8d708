//! `corral runs list | show | follow`: past runs and runs in flight, read from their directories.
//!
//! Everything here reads what an agent may have written (under the sandbox the run directory is
//! Corral's, but a native run or another tool can change it): records and logs are read without
//! blocking and within limits, shown with their control characters made visible, and a run
//! directory that cannot be read is named, not skipped. A run whose supervisor is gone without
//! finishing its record shows as such, and `runs follow` ends on it.

use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use corral_compose::{RunRecord, read_record};
use corral_ports::run_dir::EVENTS_FILE;

use crate::args::RunsCommand;
use crate::config_cmd::load_settings;
use crate::exit::{Exit, usage};
use crate::term::{errln, one_line, outln};

fn runs_root(dir: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    if let Some(dir) = dir {
        return Ok(dir);
    }
    let cwd = std::env::current_dir()?;
    let settings = load_settings(&cwd, Vec::new())?.settings;
    Ok(settings.runs_root(&cwd))
}

/// Every directory under `root`, newest first (run ids sort by start time). Files and dot
/// directories are not runs.
fn run_dirs(root: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(root)
        .map(|rd| {
            rd.flatten()
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default();
    dirs.sort();
    dirs.reverse();
    dirs
}

/// What `runs list` shows for a run whose record says `running`.
fn state(record: &RunRecord) -> String {
    if record.supervisor_gone() {
        format!("{} (supervisor gone)", record.outcome)
    } else {
        record.outcome.clone()
    }
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
    let runs: Vec<(PathBuf, Result<RunRecord, corral_compose::RunRecordError>)> = run_dirs(root)
        .into_iter()
        .map(|dir| {
            let record = read_record(&dir);
            (dir, record)
        })
        .collect();
    if json {
        for (dir, record) in &runs {
            let value = match record {
                Ok(record) => {
                    let mut value = serde_json::to_value(record)?;
                    if record.supervisor_gone()
                        && let Some(map) = value.as_object_mut()
                    {
                        map.insert("supervisor_gone".into(), true.into());
                    }
                    value
                }
                Err(e) => serde_json::json!({
                    "run_id": dir.file_name().map(|n| n.to_string_lossy().into_owned()),
                    "unreadable": format!("{e:#}"),
                }),
            };
            outln!("{}", crate::term::json(&value)?);
        }
        return Ok(Exit::Success);
    }
    if runs.is_empty() {
        outln!("no runs under {}", root.display());
        return Ok(Exit::Success);
    }
    outln!(
        "{:<34} {:<9} {:<18} {:>4} {:>9}  session",
        "run",
        "provider",
        "outcome",
        "exit",
        "duration"
    );
    for (dir, record) in runs {
        let r = match record {
            Ok(r) => r,
            Err(e) => {
                let name = dir.file_name().map(|n| n.to_string_lossy().into_owned());
                outln!(
                    "{:<34} {:<9} {:<18} {:>4} {:>9}  -",
                    one_line(name.as_deref().unwrap_or("?")),
                    "?",
                    "unreadable",
                    "-",
                    "-"
                );
                errln!("warning: {}", one_line(&format!("{e:#}")));
                continue;
            }
        };
        let duration = r
            .duration_ms
            .map_or("-".to_string(), |ms| format!("{:.1}s", ms as f64 / 1000.0));
        let exit = r.exit_code.map_or("-".to_string(), |c| c.to_string());
        outln!(
            "{:<34} {:<9} {:<18} {:>4} {:>9}  {}",
            one_line(&r.run_id),
            r.provider.as_str(),
            one_line(&state(&r)),
            exit,
            duration,
            one_line(r.session_id.as_deref().unwrap_or("-"))
        );
    }
    Ok(Exit::Success)
}

fn show(dir: &Path) -> anyhow::Result<Exit> {
    let record = read_record(dir)?;
    outln!("{}", crate::term::json_pretty(&record)?);
    if record.supervisor_gone() {
        outln!("supervisor gone: the run never finished its record");
    }
    outln!("files:");
    let mut files: Vec<_> = std::fs::read_dir(dir)?.flatten().collect();
    files.sort_by_key(|e| e.file_name());
    for entry in files {
        // lstat: a link is shown as what it is, never followed.
        let len = entry.metadata().map(|m| m.len()).unwrap_or(0);
        outln!(
            "  {:<24} {len:>10} bytes",
            one_line(&entry.file_name().to_string_lossy())
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

/// The longest log line `runs follow` keeps while waiting for its end; a longer one is skipped.
const FOLLOW_LINE_MAX: usize = 16 * 1024 * 1024;
/// How often `runs follow` looks again.
const FOLLOW_POLL: Duration = Duration::from_millis(200);
/// How long `runs follow` waits for the record to be finished once the supervisor is gone (it may
/// be writing it right now) before it says so.
const FOLLOW_GONE_GRACE: Duration = Duration::from_secs(2);

/// Opens the log for reading without blocking, and only if it is a regular file: a FIFO, or a
/// link to `/dev/zero` or a terminal, is refused.
fn open_log(path: &Path) -> anyhow::Result<Option<std::fs::File>> {
    let file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
    {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(anyhow::anyhow!("cannot read {}: {e}", path.display())),
    };
    let kind = file.metadata()?.file_type();
    if !kind.is_file() {
        let what = if kind.is_fifo() {
            "a FIFO"
        } else if kind.is_char_device() || kind.is_block_device() {
            "a device"
        } else {
            "not a regular file"
        };
        return Err(anyhow::anyhow!(
            "{} is {what}; it is not read",
            path.display()
        ));
    }
    Ok(Some(file))
}

/// Prints the log from `offset` on and returns the new offset; `partial` keeps a line whose end
/// has not been written yet.
fn print_new_lines(
    path: &Path,
    offset: &mut u64,
    partial: &mut Vec<u8>,
    last_kind: &mut Option<String>,
) -> anyhow::Result<()> {
    let Some(mut file) = open_log(path)? else {
        return Ok(());
    };
    let len = file.metadata()?.len();
    if len < *offset {
        // The log was replaced by a shorter one: start over.
        *offset = 0;
        partial.clear();
    }
    file.seek(SeekFrom::Start(*offset))?;
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        let n = file.read(&mut chunk)?;
        if n == 0 {
            return Ok(());
        }
        *offset += n as u64;
        let mut rest = &chunk[..n];
        while let Some(end) = memchr_newline(rest) {
            partial.extend_from_slice(&rest[..end]);
            if partial.len() <= FOLLOW_LINE_MAX {
                let line = String::from_utf8_lossy(partial);
                *last_kind = serde_json::from_str::<serde_json::Value>(&line)
                    .ok()
                    .and_then(|v| v["kind"].as_str().map(str::to_owned));
                outln!("{}", one_line(&describe(&line)));
            } else {
                outln!("(a log line of {} bytes was skipped)", partial.len());
            }
            partial.clear();
            rest = &rest[end + 1..];
        }
        if partial.len() <= FOLLOW_LINE_MAX {
            partial.extend_from_slice(rest);
        }
    }
}

fn memchr_newline(bytes: &[u8]) -> Option<usize> {
    bytes.iter().position(|&b| b == b'\n')
}

async fn follow(dir: &Path) -> anyhow::Result<Exit> {
    let path = dir.join(EVENTS_FILE);
    let mut offset = 0u64;
    let mut partial = Vec::new();
    let mut gone_since: Option<Instant> = None;
    let mut last_kind: Option<String> = None;
    loop {
        print_new_lines(&path, &mut offset, &mut partial, &mut last_kind)?;
        let record = read_record(dir)?;
        if record.finished_at.is_some() && partial.is_empty() {
            outln!(
                "run {} finished: {} (exit {})",
                one_line(&record.run_id),
                one_line(&record.outcome),
                record.exit_code.map_or("-".to_string(), |c| c.to_string())
            );
            return Ok(Exit::Success);
        }
        // A record from before supervisors were recorded: a log that ends the run is the end.
        let legacy_end =
            record.supervisor.is_none() && last_kind.as_deref() == Some("run_finished");
        if record.supervisor_gone() || legacy_end {
            let since = *gone_since.get_or_insert_with(Instant::now);
            if since.elapsed() >= FOLLOW_GONE_GRACE {
                print_new_lines(&path, &mut offset, &mut partial, &mut last_kind)?;
                match record.supervisor {
                    Some(s) => outln!(
                        "run {} ended without finishing its record: its supervisor (pid {}) is gone",
                        one_line(&record.run_id),
                        s.pid
                    ),
                    None => outln!(
                        "run {} ended without finishing its record (its log ends the run)",
                        one_line(&record.run_id)
                    ),
                }
                if let Some(id) = &record.session_id {
                    outln!("session {}", one_line(id));
                }
                return Ok(Exit::Crashed);
            }
        } else {
            gone_since = None;
        }
        tokio::time::sleep(FOLLOW_POLL).await;
    }
}
