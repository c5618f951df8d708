//! The raw baseline the `corral-cli` benches set `corral run` beside: a program's stdout read
//! the plainest way tokio allows — `lines()`, each parsed as JSON and logged to a file — with
//! no supervision, no renderer and no record. Here, and not in the bench, because only the
//! engine and the test tools may create processes.

use std::io;
use std::path::Path;
use std::process::Stdio;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

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
    let mut log = tokio::io::BufWriter::new(tokio::fs::File::create(log).await?);
    let mut lines = BufReader::new(stdout).lines();
    let mut n = 0;
    while let Some(line) = lines.next_line().await? {
        let value: serde_json::Value = serde_json::from_str(&line)?;
        std::hint::black_box(&value);
        log.write_all(line.as_bytes()).await?;
        log.write_all(b"\n").await?;
        n += 1;
    }
    log.flush().await?;
    let status = child.wait().await?;
    if !status.success() {
        return Err(io::Error::other(format!(
            "{} exited with {status}",
            program.display()
        )));
    }
    Ok(n)
}
