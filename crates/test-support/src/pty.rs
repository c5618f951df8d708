//! Running a program on a pseudo-terminal, for tests of what a person sees: the program's stdin,
//! stdout and stderr are the terminal, and everything it draws is captured.

use std::io::Read;
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// What a program drew on its terminal, and how it ended.
#[derive(Debug)]
pub struct Screen {
    /// Every byte written to the terminal, escape sequences included, decoded lossily.
    pub output: String,
    /// How the program ended.
    pub status: ExitStatus,
}

/// Runs `cmd` with a pseudo-terminal as its stdin, stdout and stderr, killing it after
/// `timeout`, and returns everything it wrote.
pub fn run_on_pty(cmd: Command, timeout: Duration) -> std::io::Result<Screen> {
    run_on_pty_sized(cmd, 120, 50, timeout)
}

/// [`run_on_pty`] on a terminal of `columns` × `rows`, which the program sees through
/// `TIOCGWINSZ` as it would in a real terminal of that size.
pub fn run_on_pty_sized(
    mut cmd: Command,
    columns: u16,
    rows: u16,
    timeout: Duration,
) -> std::io::Result<Screen> {
    let size = nix::pty::Winsize {
        ws_row: rows,
        ws_col: columns,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    let pty = nix::pty::openpty(Some(&size), None).map_err(std::io::Error::from)?;
    let slave = || pty.slave.try_clone().map(Stdio::from);
    cmd.stdin(slave()?).stdout(slave()?).stderr(slave()?);
    let mut child = cmd.spawn()?;
    // The command keeps its copies of the terminal's fds until dropped; with any copy open here,
    // the reader below would never see the end of the output.
    drop(cmd);
    drop(pty.slave);
    let mut master = std::fs::File::from(pty.master);
    let reader = std::thread::spawn(move || {
        let mut all = Vec::new();
        let mut buf = [0u8; 8192];
        // EIO once the last writer is gone ends the read: that is how a pty says end of file.
        while let Ok(n) = master.read(&mut buf) {
            if n == 0 {
                break;
            }
            all.extend_from_slice(&buf[..n]);
        }
        all
    });
    let deadline = Instant::now() + timeout;
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            break child.wait()?;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let bytes = reader.join().unwrap_or_default();
    Ok(Screen {
        output: String::from_utf8_lossy(&bytes).into_owned(),
        status,
    })
}
