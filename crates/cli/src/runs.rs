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
use std::sync::Arc;
use std::time::{Duration, Instant, UNIX_EPOCH};

use corral_compose::{RunRecord, read_record};
use corral_ports::run_dir::{EVENTS_FILE, PROMPT_FILE};
use corral_ports::{AgentEvent, ProviderId, RunObserver, SessionId};

use clap_complete::engine::CompletionCandidate;

use crate::args::RunsCommand;
use crate::config_cmd::load_settings;
use crate::display;
use crate::exit::{Exit, usage};
use crate::json_lines::{ListedRun, RunsListLine, UnreadableRun};
use crate::render::{Renderer, Style, short};
use crate::term::{errln, one_line, outln};

fn runs_root(dir: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    if let Some(dir) = dir {
        return Ok(dir);
    }
    let cwd = std::env::current_dir()?;
    Ok(load_settings(&cwd, Vec::new())?.runs_root())
}

/// Every directory under `root`, newest first (run ids sort by start time). Files and dot
/// directories are not runs.
pub(crate) fn run_dirs(root: &Path) -> Vec<PathBuf> {
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

/// The run ids starting with what has been typed, from the runs of the project around the
/// current directory (found as `runs list` finds them), newest first, each with its outcome and
/// prompt as the shell's help text. Nothing when the settings cannot be read.
pub(crate) fn complete_run_id(typed: &std::ffi::OsStr) -> Vec<CompletionCandidate> {
    let Some(typed) = typed.to_str() else {
        return Vec::new();
    };
    let Ok(root) = runs_root(None) else {
        return Vec::new();
    };
    run_dirs(&root)
        .into_iter()
        .filter_map(|dir| {
            let id = dir.file_name()?.to_str()?.to_string();
            id.starts_with(typed).then_some((id, dir))
        })
        .map(|(id, dir)| {
            let outcome =
                read_record(&dir).map_or_else(|_| "unreadable".to_string(), |r| state(&r));
            let help = one_line(&format!("{outcome}  {}", prompt_line(&dir, PROMPT_COLUMN)));
            CompletionCandidate::new(id).help(Some(help.into()))
        })
        .collect()
}

/// The command that resumes a run's session, when it has one: `corral resume <run-id>`, which
/// takes the provider, working directory and session from the run's record.
pub(crate) fn resume_hint(record: &RunRecord) -> Option<String> {
    record
        .resume_command
        .as_ref()
        .map(|_| format!("corral resume {}", record.run_id))
}

/// The run `id` names, or without one the latest run (as `gh run view` takes the latest).
fn find_run_or_latest(root: &Path, id: Option<&str>) -> anyhow::Result<PathBuf> {
    match id {
        Some(id) => find_run(root, id),
        None => run_dirs(root)
            .into_iter()
            .next()
            .ok_or_else(|| usage(format!("no run under {} yet", root.display()))),
    }
}

pub(crate) fn find_run(root: &Path, id: &str) -> anyhow::Result<PathBuf> {
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
        RunsCommand::List { dir, json, all } => list(&runs_root(dir)?, json, all),
        RunsCommand::Show { id, dir, json } => {
            show(&find_run_or_latest(&runs_root(dir)?, id.as_deref())?, json)
        }
        RunsCommand::Follow { id, dir, json } => {
            follow(&find_run_or_latest(&runs_root(dir)?, id.as_deref())?, json).await
        }
    }
}

fn list(root: &Path, json: bool, all: bool) -> anyhow::Result<Exit> {
    let mut runs: Vec<(PathBuf, Result<RunRecord, corral_compose::RunRecordError>)> =
        run_dirs(root)
            .into_iter()
            .map(|dir| {
                let record = read_record(&dir);
                (dir, record)
            })
            .collect();
    let before = runs.len();
    if !all {
        runs.retain(|(_, record)| !record.as_ref().is_ok_and(RunRecord::refused_before_start));
    }
    let left_out = before - runs.len();
    if json {
        for (dir, record) in &runs {
            let line = match record {
                Ok(record) => RunsListLine::Record(ListedRun {
                    record,
                    supervisor_gone: record.supervisor_gone(),
                }),
                Err(e) => RunsListLine::Unreadable(UnreadableRun {
                    run_id: dir.file_name().map(|n| n.to_string_lossy().into_owned()),
                    unreadable: format!("{e:#}"),
                }),
            };
            outln!("{}", crate::term::json(&line)?);
        }
        return Ok(Exit::Success);
    }
    let left_out_note = match left_out {
        0 => None,
        1 => Some("1 run refused before its CLI started is left out (--all lists it)".to_string()),
        n => Some(format!(
            "{n} runs refused before their CLI started are left out (--all lists them)"
        )),
    };
    if runs.is_empty() {
        outln!("no runs under {}", root.display());
        if let Some(note) = &left_out_note {
            outln!("{note}");
        }
        return Ok(Exit::Success);
    }
    // On a terminal the prompt gets the width the other columns leave; else a fixed share.
    let fit = display::terminal_width();
    let prompt_columns = if fit.is_some() {
        PROMPT_PEEK_BYTES as usize
    } else {
        PROMPT_COLUMN
    };
    let mut rows = Vec::new();
    for (dir, record) in runs {
        let r = match record {
            Ok(r) => r,
            Err(e) => {
                let name = dir.file_name().map(|n| n.to_string_lossy().into_owned());
                rows.push(vec![
                    one_line(name.as_deref().unwrap_or("?")),
                    "unreadable".to_string(),
                    "-".to_string(),
                    "-".to_string(),
                    "-".to_string(),
                    "-".to_string(),
                    "-".to_string(),
                ]);
                errln!("warning: {}", one_line(&format!("{e:#}")));
                continue;
            }
        };
        rows.push(vec![
            one_line(&r.run_id),
            one_line(&state(&r)),
            r.exit_code.map_or("-".to_string(), |c| c.to_string()),
            one_line(&display::recorded_time(&r.started_at)),
            r.duration_ms.map_or("-".to_string(), display::duration_ms),
            cost(&r),
            one_line(&prompt_line(&dir, prompt_columns)),
        ]);
    }
    let header = [
        "run", "outcome", "exit", "started", "duration", "cost", "prompt",
    ];
    for line in display::table(Some(&header), &[2, 4, 5], rows, fit) {
        outln!("{line}");
    }
    if let Some(note) = &left_out_note {
        outln!("({note})");
    }
    Ok(Exit::Success)
}

/// How much of the prompt's first line `runs list` shows when no width is known.
const PROMPT_COLUMN: usize = 40;
/// How much of `prompt.md` is read for its first line.
const PROMPT_PEEK_BYTES: u64 = 4096;

fn cost(record: &RunRecord) -> String {
    record
        .usage
        .cost_usd
        .map_or("-".to_string(), |c| format!("${c:.4}"))
}

/// The first line of the run's prompt, cut to `max` columns; `-` when there is none.
fn prompt_line(dir: &Path, max: usize) -> String {
    let Ok(bytes) = read_head(&dir.join(PROMPT_FILE), PROMPT_PEEK_BYTES) else {
        return "-".to_string();
    };
    let text = String::from_utf8_lossy(&bytes);
    let line = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("-");
    display::cut(line, max)
}

/// The first `max` bytes of a regular file, read without blocking.
fn read_head(path: &Path, max: u64) -> anyhow::Result<Vec<u8>> {
    let Some(file) = open_log(path)? else {
        return Err(anyhow::anyhow!("{} is missing", path.display()));
    };
    let mut bytes = Vec::new();
    file.take(max).read_to_end(&mut bytes)?;
    Ok(bytes)
}

fn show(dir: &Path, json: bool) -> anyhow::Result<Exit> {
    let record = read_record(dir)?;
    if json {
        let mut value = serde_json::to_value(&record)?;
        if record.supervisor_gone()
            && let Some(map) = value.as_object_mut()
        {
            map.insert("supervisorGone".into(), true.into());
        }
        outln!("{}", crate::term::json_pretty(&value)?);
        return Ok(Exit::Success);
    }
    let field = |name: &str, value: &str| outln!("{name:<9} {}", one_line(value));
    field("run", &record.run_id);
    let model = record
        .model
        .as_deref()
        .map(|m| format!(" ({m})"))
        .unwrap_or_default();
    field("provider", &format!("{}{model}", record.provider));
    field("cwd", &record.cwd.display().to_string());
    field("started", &display::recorded_time(&record.started_at));
    let exit = record
        .exit_code
        .map_or(String::new(), |c| format!(" (exit {c})"));
    field("outcome", &format!("{}{exit}", state(&record)));
    if let Some(ms) = record.duration_ms {
        field("duration", &display::duration_ms(ms));
    }
    field("session", record.session_id.as_deref().unwrap_or("-"));
    field("cost", &cost(&record));
    match record.signals_valid {
        None => field("signals", "not checked"),
        Some(true) => field(
            "signals",
            &format!("valid: {}", record.signal_kinds.join(", ")),
        ),
        Some(false) => field(
            "signals",
            &format!(
                "invalid: {}",
                record.signals_error.as_deref().unwrap_or("?")
            ),
        ),
    }
    if let Some(error) = &record.error {
        field("error", error);
    }
    if let Some(cmd) = resume_hint(&record) {
        field("resume", &cmd);
    }
    field("prompt", &prompt_line(dir, 100));
    if let Some(answer) = &record.result {
        outln!("answer");
        for line in answer.lines() {
            outln!("  {line}");
        }
    }
    outln!("files");
    let mut files: Vec<_> = std::fs::read_dir(dir)?.flatten().collect();
    files.sort_by_key(|e| e.file_name());
    let rows = files
        .iter()
        .map(|entry| {
            // lstat: a link is shown as what it is, never followed.
            let len = entry.metadata().map(|m| m.len()).unwrap_or(0);
            vec![
                one_line(&entry.file_name().to_string_lossy()),
                format!("{len} bytes"),
            ]
        })
        .collect();
    for line in display::table(None, &[1], rows, None) {
        outln!("  {line}");
    }
    Ok(Exit::Success)
}

/// How `runs follow` shows the log: as `corral run` shows a run (its renderer, live on a
/// terminal, plain lines on stderr otherwise), or the raw events as JSON lines (`--json`).
enum Follower {
    Json,
    View(Arc<Renderer>),
}

impl Follower {
    fn new(json: bool, record: &RunRecord) -> Self {
        if json {
            return Follower::Json;
        }
        let style = Style::choose(false, false);
        // The elapsed time counts from the run's start, not from the follow's.
        let so_far = jiff::Timestamp::now()
            .duration_since(
                record
                    .started_at
                    .parse::<jiff::Timestamp>()
                    .unwrap_or_else(|_| jiff::Timestamp::now()),
            )
            .try_into()
            .unwrap_or_default();
        Follower::View(Renderer::following(style, record.provider.as_str(), so_far))
    }

    /// Shows one line of the log.
    fn log_line(&self, line: &str) {
        match self {
            Follower::Json => match serde_json::from_str::<serde_json::Value>(line) {
                // Re-written inert: the log holds what the agent wrote.
                Ok(value) => {
                    if let Ok(text) = crate::term::json(&value) {
                        crate::term::out_soon(format_args!("{text}"));
                    }
                }
                Err(_) => errln!("(a log line that is not JSON was skipped)"),
            },
            Follower::View(view) => show_log_line(view, line),
        }
    }

    /// A line about the follow itself (a skipped line).
    fn note(&self, text: &str) {
        match self {
            Follower::Json => errln!("{text}"),
            Follower::View(view) => view.line(text),
        }
    }

    /// How the run ended: on stdout, after the view is cleared; on stderr with `--json`, so
    /// that stdout stays JSON lines.
    fn end(&self, lines: &[String]) {
        match self {
            Follower::Json => {
                crate::term::flush();
                for line in lines {
                    errln!("{line}");
                }
            }
            Follower::View(view) => {
                view.finish();
                for line in lines {
                    outln!("{line}");
                }
            }
        }
    }
}

/// Hands one log line to the renderer, as the run's own observer handed the event to it: the
/// agent's events, each attempt's start, backoffs, waits for another run's hold, a cold
/// fallback. The supervisor's own records (spawn details, exits, signals) are left to `--json`,
/// as `corral run` leaves them to the log.
fn show_log_line(view: &Renderer, line: &str) {
    use serde_json::Value;
    let Ok(v) = serde_json::from_str::<Value>(line) else {
        view.line(&format!(
            "(a log line that is not JSON: {})",
            short(line, 80)
        ));
        return;
    };
    // A log written before the keys were camelCase spells them in snake_case.
    let key = |camel: &str, snake: &str| {
        v.get(camel)
            .or_else(|| v.get(snake))
            .cloned()
            .unwrap_or(Value::Null)
    };
    let attempt = v["attempt"]
        .as_u64()
        .and_then(|a| u32::try_from(a).ok())
        .unwrap_or(0);
    if let Some(at) = key("monoMs", "mono_ms")
        .as_f64()
        .and_then(|ms| Duration::try_from_secs_f64(ms / 1000.0).ok())
    {
        view.replay_at(at);
    }
    let text = |key: &str| v[key].as_str().unwrap_or("").to_string();
    match v["kind"].as_str().unwrap_or("") {
        "agent" => match serde_json::from_value::<AgentEvent>(v.clone()) {
            Ok(event) => view.event(attempt, &event),
            Err(_) => view.line(&format!(
                "(an agent event not understood: {})",
                short(line, 80)
            )),
        },
        "spawn" => {
            let resume = v["resume"].as_str().and_then(|s| SessionId::parse(s).ok());
            view.attempt_started(attempt, resume.as_ref());
        }
        "spawn_failed" => view.line(&format!(
            "cannot start {}: {}",
            text("program"),
            text("error")
        )),
        "backoff" => view.backoff(
            attempt,
            Duration::from_millis(key("waitMs", "wait_ms").as_u64().unwrap_or(0)),
            &text("reason"),
        ),
        "rate_limit_wait" => {
            if let (Ok(provider), Some(ms)) = (
                serde_json::from_value::<ProviderId>(v["provider"].clone()),
                key("untilEpochMs", "until_epoch_ms").as_u64(),
            ) {
                view.account_wait(attempt, provider, UNIX_EPOCH + Duration::from_millis(ms));
            }
        }
        "cold_retry" => view.line(&format!(
            "session {} not found: running the task cold, in a new session",
            key("staleSession", "stale_session").as_str().unwrap_or("")
        )),
        "kill_started" => view.line(&format!(
            "ending the CLI ({})",
            text("reason").replace('_', " ")
        )),
        _ => {}
    }
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
    follower: &Follower,
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
            // The log has nothing more for now: what was read is shown before waiting.
            crate::term::flush();
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
                follower.log_line(&line);
            } else {
                follower.note(&format!(
                    "(a log line of {} bytes was skipped)",
                    partial.len()
                ));
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

async fn follow(dir: &Path, json: bool) -> anyhow::Result<Exit> {
    let path = dir.join(EVENTS_FILE);
    let follower = Follower::new(json, &read_record(dir)?);
    let ticker = match &follower {
        Follower::View(view) => view.spawn_ticker(),
        Follower::Json => None,
    };
    let ended = follow_log(dir, &path, &follower).await;
    if let Some(ticker) = ticker {
        ticker.abort();
    }
    match ended {
        Ok((exit, lines)) => {
            follower.end(&lines);
            Ok(exit)
        }
        Err(e) => {
            follower.end(&[]);
            Err(e)
        }
    }
}

/// Follows the log until the run ends: its exit code, and the lines that say how it ended.
async fn follow_log(
    dir: &Path,
    path: &Path,
    follower: &Follower,
) -> anyhow::Result<(Exit, Vec<String>)> {
    let mut offset = 0u64;
    let mut partial = Vec::new();
    let mut gone_since: Option<Instant> = None;
    let mut last_kind: Option<String> = None;
    loop {
        print_new_lines(path, &mut offset, &mut partial, &mut last_kind, follower)?;
        let record = read_record(dir)?;
        if record.finished_at.is_some() && partial.is_empty() {
            let line = format!(
                "run {} finished: {} (exit {})",
                one_line(&record.run_id),
                one_line(&record.outcome),
                record.exit_code.map_or("-".to_string(), |c| c.to_string())
            );
            // Like `gh run watch --exit-status`: the followed run's own exit code.
            let exit = record
                .exit_code
                .and_then(Exit::from_code)
                .unwrap_or(Exit::Crashed);
            return Ok((exit, vec![line]));
        }
        // A record from before supervisors were recorded: a log that ends the run is the end.
        let legacy_end =
            record.supervisor.is_none() && last_kind.as_deref() == Some("run_finished");
        if record.supervisor_gone() || legacy_end {
            let since = *gone_since.get_or_insert_with(Instant::now);
            if since.elapsed() >= FOLLOW_GONE_GRACE {
                print_new_lines(path, &mut offset, &mut partial, &mut last_kind, follower)?;
                let mut lines = vec![match record.supervisor {
                    Some(s) => format!(
                        "run {} ended without finishing its record: its supervisor (pid {}) is gone",
                        one_line(&record.run_id),
                        s.pid
                    ),
                    None => format!(
                        "run {} ended without finishing its record (its log ends the run)",
                        one_line(&record.run_id)
                    ),
                }];
                if let Some(id) = &record.session_id {
                    lines.push(format!("session {}", one_line(id)));
                }
                return Ok((Exit::Crashed, lines));
            }
        } else {
            gone_since = None;
        }
        tokio::time::sleep(FOLLOW_POLL).await;
    }
}
