//! The raw baseline the `corral-cli` benches set `corral run` beside: a program's stdout read
//! the plainest way tokio allows — `lines()`, each parsed as JSON and logged to a file — with
//! no supervision, no renderer and no record. Here, and not in the bench, because only the
//! engine and the test tools may create processes.

use std::io;
use std::path::Path;
use std::process::Stdio;

use std::io::Write;

use tokio::io::{AsyncBufReadExt, BufReader};

/// The log's buffer: as large as the one the engine bench's raw baseline uses.
const LOG_BUFFER: usize = 64 * 1024;

/// Runs `program` (no arguments) in `cwd`, reads its stdout line by line, parses each line as
/// JSON and appends it to `log`; the number of lines read. An error when it cannot be started,
/// a line is not JSON, or it exits unsuccessfully.
pub async fn raw_tokio_reader(program: &Path, cwd: &Path, log: &Path) -> io::Result<usize> {
    let mut child = tokio::process::Command::new(program)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()?;
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| io::Error::other("no stdout pipe"))?;
    // A plain buffered file, written from the reading task: tokio's own file type hands every
    // write to its blocking pool, which would make the baseline slower than it needs to be.
    let mut log = std::io::BufWriter::with_capacity(LOG_BUFFER, std::fs::File::create(log)?);
    let mut lines = BufReader::new(stdout).lines();
    let mut n = 0;
    while let Some(line) = lines.next_line().await? {
        let value: serde_json::Value = serde_json::from_str(&line)?;
        std::hint::black_box(&value);
        log.write_all(line.as_bytes())?;
        log.write_all(b"\n")?;
        n += 1;
    }
    log.flush()?;
    let status = child.wait().await?;
    if !status.success() {
        return Err(io::Error::other(format!(
            "{} exited with {status}",
            program.display()
        )));
    }
    Ok(n)
}
