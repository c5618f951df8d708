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

/// A program on a pseudo-terminal that is its controlling terminal (started through util-linux's
/// `setsid --ctty`, as a login shell gives one), read on a thread, typed into by the test: what
/// a person at an interactive handoff sees and does.
#[derive(Debug)]
pub struct Terminal {
    child: std::process::Child,
    master: std::fs::File,
    rx: std::sync::mpsc::Receiver<Vec<u8>>,
    seen: Vec<u8>,
}

impl Terminal {
    /// Starts `program` with `args` in `cwd`, with exactly the variables `env`, on a 120 × 50
    /// terminal.
    pub fn start<K, V>(
        program: &std::path::Path,
        args: &[&str],
        env: impl IntoIterator<Item = (K, V)>,
        cwd: &std::path::Path,
    ) -> std::io::Result<Terminal>
    where
        K: AsRef<std::ffi::OsStr>,
        V: AsRef<std::ffi::OsStr>,
    {
        let size = nix::pty::Winsize {
            ws_row: 50,
            ws_col: 120,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        let pty = nix::pty::openpty(Some(&size), None).map_err(std::io::Error::from)?;
        let slave = || pty.slave.try_clone().map(Stdio::from);
        let mut cmd = Command::new("setsid");
        cmd.arg("--ctty")
            .arg(program)
            .args(args)
            .env_clear()
            .envs(env)
            .current_dir(cwd)
            .stdin(slave()?)
            .stdout(slave()?)
            .stderr(slave()?);
        let child = cmd.spawn()?;
        drop(cmd);
        drop(pty.slave);
        let master = std::fs::File::from(pty.master);
        let mut reader = master.try_clone()?;
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut buf = [0u8; 8192];
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 || tx.send(buf[..n].to_vec()).is_err() {
                    break;
                }
            }
        });
        Ok(Terminal {
            child,
            master,
            rx,
            seen: Vec::new(),
        })
    }

    /// What the terminal showed so far, through [`strip_screen`].
    #[must_use]
    pub fn screen(&self) -> String {
        strip_screen(&self.seen)
    }

    /// Waits up to `timeout` until the terminal has shown `needle` (compared without spaces)
    /// after the offset `from` of [`Terminal::screen`]; the offset after it, or what the
    /// terminal showed when the time ran out.
    pub fn wait_for(
        &mut self,
        needle: &str,
        from: usize,
        timeout: Duration,
    ) -> Result<usize, String> {
        let needle: String = needle.chars().filter(|c| !c.is_whitespace()).collect();
        let deadline = Instant::now() + timeout;
        loop {
            let screen = self.screen();
            if let Some(at) = screen.get(from..).and_then(|s| s.find(&needle)) {
                return Ok(from + at + needle.len());
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left.min(Duration::from_secs(1))) {
                Ok(chunk) => self.seen.extend_from_slice(&chunk),
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) if !left.is_zero() => {}
                Err(_) => return Err(screen),
            }
        }
    }

    /// Types `text`, then Enter a moment later (a TUI takes a burst of keys for a paste).
    pub fn type_line(&mut self, text: &str) -> std::io::Result<()> {
        use std::io::Write as _;
        self.master.write_all(text.as_bytes())?;
        std::thread::sleep(Duration::from_millis(700));
        self.master.write_all(b"\r")
    }

    /// Waits up to `timeout` for the program to exit (killing it then), reading what it shows
    /// meanwhile: its exit code and [`Terminal::screen`].
    pub fn finish(mut self, timeout: Duration) -> std::io::Result<(Option<i32>, String)> {
        let deadline = Instant::now() + timeout;
        let code = loop {
            while let Ok(chunk) = self.rx.try_recv() {
                self.seen.extend_from_slice(&chunk);
            }
            if let Some(status) = self.child.try_wait()? {
                break status.code();
            }
            if Instant::now() >= deadline {
                let _ = self.child.kill();
                break self.child.wait()?.code();
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        while let Ok(chunk) = self.rx.recv_timeout(Duration::from_millis(500)) {
            self.seen.extend_from_slice(&chunk);
        }
        Ok((code, self.screen()))
    }
}

/// `bytes` as text without escape sequences, control characters and whitespace: a TUI moves its
/// cursor instead of writing spaces, so this is what can be compared.
#[must_use]
pub fn strip_screen(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let mut out = String::new();
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            match chars.next() {
                // CSI: parameters up to a final byte.
                Some('[') => {
                    for n in chars.by_ref() {
                        if ('@'..='~').contains(&n) {
                            break;
                        }
                    }
                }
                // OSC: up to BEL or ST.
                Some(']') => {
                    while let Some(n) = chars.next() {
                        if n == '\u{7}' {
                            break;
                        }
                        if n == '\u{1b}' {
                            chars.next();
                            break;
                        }
                    }
                }
                _ => {}
            }
        } else if !c.is_whitespace() && !c.is_control() {
            out.push(c);
        }
    }
    out
}

/// Makes a FIFO at `path`: what a hostile agent plants where a file is expected.
pub fn make_fifo(path: &std::path::Path) -> std::io::Result<()> {
    nix::unistd::mkfifo(path, nix::sys::stat::Mode::from_bits_truncate(0o600))
        .map_err(std::io::Error::from)
}
