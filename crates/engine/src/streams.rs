//! The CLI's stdout and stderr as files in the run directory, followed as they grow.
//!
//! Claude Code and OpenCode exit before what they queued for a pipe is written: a reader, however
//! fast, loses the tail of their stdout, the terminal event included (see
//! `docs/output.md`). Written to a regular file, every write completes before the CLI exits. So
//! each attempt gets two fresh files, `raw/<n>.stdout` and `raw/<n>.stderr`, that the child
//! inherits as its stdout and stderr; the engine reads what was appended (positional reads, its
//! own offset), woken by inotify on every write (polling every 20 ms where inotify is not
//! available), and reads both to their end once the process group is gone. The files are the
//! raw record of the attempt: they survive a crash of the supervisor, and the retention setting
//! says what happens to them after the run ([`RawStreamRetention`]).
//!
//! The files are created inside `raw/` through a directory descriptor opened without following
//! links, with `O_CREAT | O_EXCL | O_NOFOLLOW`, so nothing planted in the run directory can
//! redirect them. The child gets a write-only, appending descriptor of each; the engine reads
//! through a read-only descriptor of its own (the same file reopened through `/proc/self/fd`), so
//! nothing the CLI does to its descriptor (clearing `O_APPEND`, seeking) changes the engine's.
//! The CLI can still rewrite or truncate what it wrote, as the author of that output; the engine
//! has read it by then, and a file that shrinks is followed from its new end.
//!
//! A file costs what a pipe does not: disk. So that an agent that fills the disk does not take
//! the CLI's output with it, each file is created with disk space allocated beyond its end
//! (1 MiB for stdout, 64 KiB for stderr, less when the disk has less), given back after the run.

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use nix::fcntl::OFlag;
use nix::sys::stat::Mode;
use serde::{Deserialize, Serialize};

/// The folder of the run directory that holds the raw streams.
pub use corral_ports::run_dir::RAW_STREAMS_DIR;

/// How often the files are checked for growth where inotify cannot be used.
const POLL_EVERY: Duration = Duration::from_millis(20);

/// Disk space set aside in each stream file when it is created (stdout, stderr), so that a CLI
/// whose agent fills the disk can still write that much of its output; each is tried at a
/// quarter of the size, down to [`RESERVE_MIN`], when the disk has less.
const RESERVE_BYTES: [u64; 2] = [1024 * 1024, 64 * 1024];
const RESERVE_MIN: u64 = 16 * 1024;

/// How the CLI's stdout and stderr reach the engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OutputCapture {
    /// Files in the run directory (`raw/<n>.stdout`, `raw/<n>.stderr`), followed as they grow:
    /// nothing is lost when a CLI exits before a pipe would have drained, and the raw stream
    /// survives a crash of the supervisor.
    #[default]
    Files,
    /// Pipes: nothing is written to disk but the execution log, but a CLI that exits with output
    /// still queued for the pipe (Claude Code, OpenCode) loses its tail.
    Pipes,
}

/// What becomes of the raw stream files when a run ends.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum RawStreamRetention {
    /// Compressed with gzip (`raw/<n>.stdout.gz`), the uncompressed file removed.
    #[default]
    Compress,
    /// Kept as they are.
    Keep,
    /// Removed when the run succeeded; kept as they are otherwise.
    DropOnSuccess,
}

/// Which of the two streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stream {
    Stdout,
    Stderr,
}

impl Stream {
    fn index(self) -> usize {
        match self {
            Stream::Stdout => 0,
            Stream::Stderr => 1,
        }
    }
}

/// One attempt's two stream files.
#[derive(Debug, Clone)]
pub struct StreamFiles {
    /// The child's stdout: write-only, appending.
    pub stdout: Arc<File>,
    /// The child's stderr: write-only, appending.
    pub stderr: Arc<File>,
    /// The engine's read-only descriptor of the stdout file.
    stdout_reader: Arc<File>,
    /// The engine's read-only descriptor of the stderr file.
    stderr_reader: Arc<File>,
    /// `raw/<n>.stdout`.
    pub stdout_path: PathBuf,
    /// `raw/<n>.stderr`.
    pub stderr_path: PathBuf,
    /// The `raw/` directory, for the retention.
    dir: Arc<OwnedFd>,
}

/// The run directory's `raw/` folder, created if need be and opened without following links.
/// A run opens it once, at its first attempt: what the agent does to the name later (a link in
/// its place) changes nothing for the attempts after.
pub(crate) fn open_dir(output_dir: &Path) -> io::Result<RawDir> {
    let path = output_dir.join(RAW_STREAMS_DIR);
    match std::fs::create_dir(&path) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    let fd = nix::fcntl::open(
        &path,
        OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_RDONLY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| {
        io::Error::new(
            io::Error::from(e).kind(),
            format!("{} is not a directory Corral can use: {e}", path.display()),
        )
    })?;
    Ok(RawDir {
        fd: Arc::new(fd),
        path,
    })
}

/// The `raw/` folder of a run directory, open.
#[derive(Debug, Clone)]
pub(crate) struct RawDir {
    fd: Arc<OwnedFd>,
    /// `<run dir>/raw`.
    pub path: PathBuf,
}

/// Creates the next free pair `<n>.stdout`, `<n>.stderr` in `raw`: `n` counts the CLI starts in
/// this run directory (corrective runs reuse it), from 1.
pub(crate) fn create(raw: &RawDir) -> io::Result<StreamFiles> {
    let dir = &*raw.fd;
    let dir_path = &raw.path;
    let exists = |name: &str| {
        nix::sys::stat::fstatat(dir, name, nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW).is_ok()
    };
    let create_at = |name: &str| -> io::Result<File> {
        let fd = nix::fcntl::openat(
            dir,
            name,
            OFlag::O_CREAT
                | OFlag::O_EXCL
                | OFlag::O_NOFOLLOW
                | OFlag::O_WRONLY
                | OFlag::O_APPEND
                | OFlag::O_CLOEXEC,
            Mode::from_bits_truncate(0o600),
        )
        .map_err(io::Error::from)?;
        Ok(File::from(fd))
    };
    for n in 1u32.. {
        let (out, err) = (format!("{n}.stdout"), format!("{n}.stderr"));
        if exists(&format!("{out}.gz")) || exists(&format!("{err}.gz")) {
            continue;
        }
        let stdout = match create_at(&out) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        };
        let stderr = match create_at(&err) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                // Only the file this call created goes; whatever holds the other name stays.
                let _ = nix::unistd::unlinkat(
                    dir,
                    out.as_str(),
                    nix::unistd::UnlinkatFlags::NoRemoveDir,
                );
                continue;
            }
            Err(e) => return Err(e),
        };
        reserve_space(&stdout, RESERVE_BYTES[0]);
        reserve_space(&stderr, RESERVE_BYTES[1]);
        return Ok(StreamFiles {
            stdout_reader: Arc::new(reopen_for_reading(dir, &out, &stdout)?),
            stderr_reader: Arc::new(reopen_for_reading(dir, &err, &stderr)?),
            stdout: Arc::new(stdout),
            stderr: Arc::new(stderr),
            stdout_path: dir_path.join(out),
            stderr_path: dir_path.join(err),
            dir: Arc::clone(&raw.fd),
        });
    }
    Err(io::Error::other("no free raw stream file name"))
}

/// Allocates up to `bytes` of disk to `file` beyond its end, without changing its size: writes
/// into that range need no new space. Where the file system cannot (or the disk has not even
/// [`RESERVE_MIN`] left), the file simply has no reserve.
fn reserve_space(file: &File, bytes: u64) {
    let mut size = bytes;
    while size >= RESERVE_MIN {
        let len = i64::try_from(size).unwrap_or(i64::MAX);
        match nix::fcntl::fallocate(
            file,
            nix::fcntl::FallocateFlags::FALLOC_FL_KEEP_SIZE,
            0,
            len,
        ) {
            Ok(()) => return,
            Err(nix::errno::Errno::ENOSPC) => size /= 4,
            Err(e) => {
                tracing::debug!(error = %e, "no disk reserve for a stream file");
                return;
            }
        }
    }
}

/// Gives back the reserve [`reserve_space`] set aside and the CLI did not use.
fn release_unused_reserve(raw: &RawFile) -> io::Result<()> {
    let fd = nix::fcntl::openat(
        raw.dir.as_fd(),
        raw.name.as_str(),
        OFlag::O_WRONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )?;
    let file = File::from(fd);
    let len = file.metadata()?.len();
    file.set_len(len)
}

/// A read-only descriptor of the very file `file` was created as `name` in `dir`: opened by name
/// without following links, then checked to be the same inode.
fn reopen_for_reading(dir: &OwnedFd, name: &str, file: &File) -> io::Result<File> {
    let fd = nix::fcntl::openat(
        dir,
        name,
        OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(io::Error::from)?;
    let reader = File::from(fd);
    let (a, b) = (file.metadata()?, reader.metadata()?);
    if (a.dev(), a.ino()) != (b.dev(), b.ino()) {
        return Err(io::Error::other(format!(
            "raw/{name} was replaced while Corral created it"
        )));
    }
    Ok(reader)
}

/// The inotify descriptor, for tokio's readiness.
struct InotifyFd(nix::sys::inotify::Inotify);

impl AsRawFd for InotifyFd {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_fd().as_raw_fd()
    }
}

enum Watch {
    Inotify {
        fd: tokio::io::unix::AsyncFd<InotifyFd>,
        /// The watch descriptor of each stream.
        wds: [nix::sys::inotify::WatchDescriptor; 2],
    },
    Poll(tokio::time::Interval),
    /// The inotify descriptor was handed off to be closed (only while the follower is dropped).
    Closed,
}

struct Followed {
    file: Arc<File>,
    offset: u64,
}

/// Reads what the child appended to its two stream files.
pub(crate) struct Follower {
    files: [Followed; 2],
    watch: Watch,
    /// Streams to read again without waiting for a change (a read stopped at its budget, or the
    /// caller asked for a drain).
    pending: [bool; 2],
    /// Whether inotify is in use (for the log).
    inotify: bool,
}

impl Follower {
    /// Follows `files`, with inotify where it can be set up (it must be, before the child
    /// starts, so that no write goes unnoticed), else by polling.
    pub(crate) fn new(files: &StreamFiles) -> Self {
        let watch = match watch_inotify(files) {
            Ok(watch) => watch,
            Err(e) => {
                tracing::warn!(error = %e, "inotify unavailable; polling the stream files every 20 ms");
                poll_watch()
            }
        };
        let inotify = matches!(watch, Watch::Inotify { .. });
        Follower {
            files: [
                Followed {
                    file: Arc::clone(&files.stdout_reader),
                    offset: 0,
                },
                Followed {
                    file: Arc::clone(&files.stderr_reader),
                    offset: 0,
                },
            ],
            watch,
            pending: [false; 2],
            inotify,
        }
    }

    /// Whether the files are followed with inotify (else by polling).
    pub(crate) fn uses_inotify(&self) -> bool {
        self.inotify
    }

    /// Asks for both streams to be read on the next [`Follower::changed`], change or not.
    pub(crate) fn drain(&mut self) {
        self.pending = [true; 2];
    }

    /// Marks one stream to be read again at once.
    pub(crate) fn again(&mut self, stream: Stream) {
        self.pending[stream.index()] = true;
    }

    /// Waits until a stream may have grown; returns which (stdout, stderr). Cancel-safe.
    pub(crate) async fn changed(&mut self) -> (bool, bool) {
        if self.pending.iter().any(|&p| p) {
            let [out, err] = std::mem::take(&mut self.pending);
            return (out, err);
        }
        loop {
            match &mut self.watch {
                Watch::Poll(interval) => {
                    interval.tick().await;
                    return (true, true);
                }
                Watch::Closed => return (true, true),
                Watch::Inotify { fd, wds } => {
                    let mut guard = match fd.readable().await {
                        Ok(guard) => guard,
                        Err(e) => {
                            tracing::warn!(error = %e, "inotify failed; polling the stream files");
                            self.watch = poll_watch();
                            return (true, true);
                        }
                    };
                    match guard
                        .try_io(|inner| inner.get_ref().0.read_events().map_err(io::Error::from))
                    {
                        Ok(Ok(events)) => {
                            let mut changed = (false, false);
                            for event in events {
                                if event.wd == wds[0] {
                                    changed.0 = true;
                                } else if event.wd == wds[1] {
                                    changed.1 = true;
                                } else {
                                    // A queue overflow names no watch: read both.
                                    changed = (true, true);
                                }
                            }
                            if changed.0 || changed.1 {
                                return changed;
                            }
                        }
                        Ok(Err(e)) => {
                            tracing::warn!(error = %e, "inotify failed; polling the stream files");
                            self.watch = poll_watch();
                            return (true, true);
                        }
                        // Spurious readiness: cleared, wait again.
                        Err(_would_block) => {}
                    }
                }
            }
        }
    }

    /// Reads new bytes of `stream` into `buf`; 0 when nothing new was written.
    pub(crate) fn read(&mut self, stream: Stream, buf: &mut [u8]) -> io::Result<usize> {
        let followed = &mut self.files[stream.index()];
        let n = followed.file.read_at(buf, followed.offset)?;
        if n == 0 {
            // The CLI may have truncated its own stdout (it holds a writable descriptor): go on
            // from the new end rather than wait forever behind it.
            let len = followed.file.metadata()?.len();
            if len < followed.offset {
                tracing::warn!(
                    len,
                    offset = followed.offset,
                    "a stream file shrank; following its new end"
                );
                followed.offset = len;
            }
        }
        followed.offset += n as u64;
        Ok(n)
    }

    /// Bytes of `stream` read so far.
    #[cfg(test)]
    pub(crate) fn offset(&self, stream: Stream) -> u64 {
        self.files[stream.index()].offset
    }
}

impl Drop for Follower {
    /// Removes the two watches, then closes the inotify descriptor. Closing one that still
    /// holds watches waits for the kernel's notification grace period (`synchronize_srcu`,
    /// 15-30 ms on this machine), and whatever thread does it, the runtime's shutdown or the
    /// process's exit waits for it: that was added to every run's wall time. A removed watch is
    /// reaped in the background, and the close then returns at once (0.1 ms).
    fn drop(&mut self) {
        let Watch::Inotify { fd, wds } = std::mem::replace(&mut self.watch, Watch::Closed) else {
            return;
        };
        // Deregistered from the reactor here, on the runtime that registered it.
        drop(unwatch(fd.into_inner(), wds));
    }
}

/// `inotify` without its watches `wds` (one already gone, with its file, is no error).
fn unwatch(
    inotify: InotifyFd,
    wds: [nix::sys::inotify::WatchDescriptor; 2],
) -> nix::sys::inotify::Inotify {
    for wd in wds {
        let _ = inotify.0.rm_watch(wd);
    }
    inotify.0
}

fn poll_watch() -> Watch {
    let mut interval = tokio::time::interval(POLL_EVERY);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    Watch::Poll(interval)
}

fn watch_inotify(files: &StreamFiles) -> io::Result<Watch> {
    use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};
    let inotify = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC)?;
    // Watched through the descriptors, so the watch is on the very files the child writes,
    // whatever happens to their names.
    let watch = |file: &File| {
        inotify.add_watch(
            Path::new(&format!("/proc/self/fd/{}", file.as_raw_fd())),
            AddWatchFlags::IN_MODIFY,
        )
    };
    let wds = [watch(&files.stdout_reader)?, watch(&files.stderr_reader)?];
    if tokio::runtime::Handle::try_current().is_err() {
        return Err(io::Error::other(
            "no tokio runtime to register inotify with",
        ));
    }
    // SAFETY: `InotifyFd` owns the inotify descriptor (an `OwnedFd` inside `Inotify`) and always
    // returns that same descriptor; nothing closes or replaces it while the `AsyncFd` lives.
    #[allow(unsafe_code)]
    let fd = unsafe {
        tokio::io::unix::AsyncFd::register_with_interest(
            InotifyFd(inotify),
            tokio::io::Interest::READABLE,
        )
    }
    .map_err(io::Error::from)?;
    Ok(Watch::Inotify { fd, wds })
}

/// One stream file, for the retention after the run: reached through the `raw/` directory
/// descriptor opened when it was created, so a `raw/` replaced by a link later leads nowhere.
#[derive(Debug, Clone)]
pub(crate) struct RawFile {
    dir: Arc<OwnedFd>,
    name: String,
    path: PathBuf,
}

impl StreamFiles {
    /// The two files, for [`retain`].
    pub(crate) fn raw_files(&self) -> [RawFile; 2] {
        [
            RawFile {
                dir: Arc::clone(&self.dir),
                name: file_name(&self.stdout_path),
                path: self.stdout_path.clone(),
            },
            RawFile {
                dir: Arc::clone(&self.dir),
                name: file_name(&self.stderr_path),
                path: self.stderr_path.clone(),
            },
        ]
    }
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// What the retention did with one file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Retained {
    /// The file as the attempt wrote it.
    pub file: PathBuf,
    /// Where it is now (`None`: removed).
    pub now: Option<PathBuf>,
    /// Its size as written.
    pub bytes: u64,
    /// The error, when the retention could not be applied (the file is then kept as it is).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Applies `retention` to the stream files of a run that `succeeded` or not. Blocking: file
/// compression runs on the caller's thread.
pub(crate) fn retain(
    files: &[RawFile],
    retention: RawStreamRetention,
    succeeded: bool,
) -> Vec<Retained> {
    files
        .iter()
        .map(|raw| {
            let bytes = nix::sys::stat::fstatat(
                raw.dir.as_fd(),
                raw.name.as_str(),
                nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
            )
            .map_or(0, |st| u64::try_from(st.st_size).unwrap_or(0));
            let outcome = match retention {
                RawStreamRetention::Keep => {
                    release_unused_reserve(raw).map(|()| Some(raw.path.clone()))
                }
                RawStreamRetention::DropOnSuccess if succeeded => remove(raw).map(|()| None),
                RawStreamRetention::DropOnSuccess => {
                    release_unused_reserve(raw).map(|()| Some(raw.path.clone()))
                }
                RawStreamRetention::Compress => compress(raw).map(Some),
            };
            match outcome {
                Ok(now) => Retained {
                    file: raw.path.clone(),
                    now,
                    bytes,
                    error: None,
                },
                Err(e) => {
                    let _ = release_unused_reserve(raw);
                    Retained {
                        file: raw.path.clone(),
                        now: Some(raw.path.clone()),
                        bytes,
                        error: Some(e.to_string()),
                    }
                }
            }
        })
        .collect()
}

fn remove(raw: &RawFile) -> io::Result<()> {
    nix::unistd::unlinkat(
        raw.dir.as_fd(),
        raw.name.as_str(),
        nix::unistd::UnlinkatFlags::NoRemoveDir,
    )
    .map_err(io::Error::from)
}

/// Gzips `raw` into `<name>.gz` beside it (through a temporary file renamed into place), then
/// removes it. A link in its place is not followed.
fn compress(raw: &RawFile) -> io::Result<PathBuf> {
    let dir = raw.dir.as_fd();
    let target = format!("{}.gz", raw.name);
    let tmp = format!("{target}.tmp");
    let result = (|| {
        let input = nix::fcntl::openat(
            dir,
            raw.name.as_str(),
            OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::empty(),
        )?;
        let output = nix::fcntl::openat(
            dir,
            tmp.as_str(),
            OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_WRONLY | OFlag::O_CLOEXEC,
            Mode::from_bits_truncate(0o600),
        )?;
        let mut encoder = flate2::write::GzEncoder::new(
            io::BufWriter::with_capacity(256 * 1024, File::from(output)),
            flate2::Compression::fast(),
        );
        io::copy(&mut File::from(input), &mut encoder)?;
        let writer = encoder.finish()?;
        writer
            .into_inner()
            .map_err(io::IntoInnerError::into_error)?;
        nix::fcntl::renameat(dir, tmp.as_str(), dir, target.as_str())?;
        remove(raw)
    })();
    if let Err(e) = result {
        let _ = nix::unistd::unlinkat(dir, tmp.as_str(), nix::unistd::UnlinkatFlags::NoRemoveDir);
        return Err(e);
    }
    Ok(raw.path.with_file_name(target))
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    #[test]
    fn each_start_gets_the_next_free_pair_and_nothing_planted_is_followed() {
        let dir = tempfile::tempdir().unwrap();
        let first = create(&open_dir(dir.path()).unwrap()).unwrap();
        assert_eq!(first.stdout_path, dir.path().join("raw/1.stdout"));
        // A link planted where the next file would go is not followed: the pair after it is used.
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "keep me").unwrap();
        std::os::unix::fs::symlink(&victim, dir.path().join("raw/2.stdout")).unwrap();
        std::fs::write(dir.path().join("raw/3.stdout.gz"), "").unwrap();
        let next = create(&open_dir(dir.path()).unwrap()).unwrap();
        assert_eq!(next.stdout_path, dir.path().join("raw/4.stdout"));
        assert_eq!(next.stderr_path, dir.path().join("raw/4.stderr"));
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep me");
        assert!(
            !dir.path().join("raw/2.stderr").exists(),
            "the half-made pair is removed"
        );
    }

    #[test]
    fn a_raw_folder_that_is_a_link_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(elsewhere.path(), dir.path().join(RAW_STREAMS_DIR)).unwrap();
        let err = open_dir(dir.path()).unwrap_err();
        assert!(
            err.to_string().contains("not a directory Corral can use"),
            "{err}"
        );
        assert_eq!(std::fs::read_dir(elsewhere.path()).unwrap().count(), 0);
    }

    #[tokio::test]
    async fn appended_bytes_wake_the_follower_and_are_read_once() {
        let dir = tempfile::tempdir().unwrap();
        let files = create(&open_dir(dir.path()).unwrap()).unwrap();
        let mut follower = Follower::new(&files);
        assert!(follower.uses_inotify());
        let mut writer = files.stdout.try_clone().unwrap();
        writer.write_all(b"hello\n").unwrap();
        let changed = tokio::time::timeout(Duration::from_secs(5), follower.changed())
            .await
            .unwrap();
        assert_eq!(changed, (true, false));
        let mut buf = [0u8; 64];
        let n = follower.read(Stream::Stdout, &mut buf).unwrap();
        assert_eq!(&buf[..n], b"hello\n");
        assert_eq!(follower.read(Stream::Stdout, &mut buf).unwrap(), 0);
        // Nothing new: no wake-up.
        assert!(
            tokio::time::timeout(Duration::from_millis(100), follower.changed())
                .await
                .is_err()
        );
        let mut err = files.stderr.try_clone().unwrap();
        err.write_all(b"oops").unwrap();
        let changed = tokio::time::timeout(Duration::from_secs(5), follower.changed())
            .await
            .unwrap();
        assert_eq!(changed, (false, true));
        assert_eq!(follower.read(Stream::Stderr, &mut buf).unwrap(), 4);
        follower.drain();
        assert_eq!(follower.changed().await, (true, true));
        assert_eq!(follower.offset(Stream::Stdout), 6);
    }

    #[tokio::test]
    async fn a_truncated_stream_is_followed_from_its_new_end() {
        let dir = tempfile::tempdir().unwrap();
        let files = create(&open_dir(dir.path()).unwrap()).unwrap();
        let mut follower = Follower::new(&files);
        let mut writer = files.stdout.try_clone().unwrap();
        writer.write_all(b"0123456789").unwrap();
        let mut buf = [0u8; 64];
        assert_eq!(follower.read(Stream::Stdout, &mut buf).unwrap(), 10);
        files.stdout.set_len(0).unwrap();
        assert_eq!(follower.read(Stream::Stdout, &mut buf).unwrap(), 0);
        writer.write_all(b"new").unwrap();
        let n = follower.read(Stream::Stdout, &mut buf).unwrap();
        assert_eq!(&buf[..n], b"new");
    }

    /// The inotify descriptor is closed without watches, which the kernel closes at once (see
    /// `Drop for Follower`): before the unwatching the descriptor shows its two watches in
    /// `/proc/self/fdinfo`, after it none.
    #[tokio::test]
    async fn the_follower_removes_its_watches_before_it_closes_inotify() {
        let dir = tempfile::tempdir().unwrap();
        let raw = open_dir(dir.path()).unwrap();
        let files = create(&raw).unwrap();
        let mut follower = Follower::new(&files);
        let Watch::Inotify { fd, wds } = std::mem::replace(&mut follower.watch, Watch::Closed)
        else {
            panic!("no inotify here");
        };
        let fdinfo = |fd: RawFd| {
            std::fs::read_to_string(format!("/proc/self/fdinfo/{fd}"))
                .unwrap()
                .matches("inotify wd:")
                .count()
        };
        let raw_fd = fd.get_ref().as_raw_fd();
        assert_eq!(fdinfo(raw_fd), 2);
        let inotify = unwatch(fd.into_inner(), wds);
        assert_eq!(fdinfo(inotify.as_fd().as_raw_fd()), 0);
    }

    #[test]
    fn each_file_has_a_disk_reserve_until_it_is_kept() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let files = create(&open_dir(dir.path()).unwrap()).unwrap();
        let allocated = |path: &Path| std::fs::metadata(path).unwrap().blocks() * 512;
        assert_eq!(std::fs::metadata(&files.stdout_path).unwrap().len(), 0);
        assert!(allocated(&files.stdout_path) >= RESERVE_BYTES[0]);
        assert!(allocated(&files.stderr_path) >= RESERVE_BYTES[1]);
        files.stdout.as_ref().write_all_at(b"short\n", 0).unwrap();
        retain(&files.raw_files(), RawStreamRetention::Keep, true);
        assert!(allocated(&files.stdout_path) < RESERVE_BYTES[0] / 4);
        assert_eq!(std::fs::read(&files.stdout_path).unwrap(), b"short\n");
    }

    #[test]
    fn retention_compresses_keeps_or_drops() {
        let dir = tempfile::tempdir().unwrap();
        let files = create(&open_dir(dir.path()).unwrap()).unwrap();
        let body = "line of output\n".repeat(10_000);
        files
            .stdout
            .as_ref()
            .write_all_at(body.as_bytes(), 0)
            .unwrap();
        let paths = files.raw_files();

        let kept = retain(&paths, RawStreamRetention::DropOnSuccess, false);
        assert!(
            kept.iter()
                .all(|r| r.now.as_deref() == Some(r.file.as_path()))
        );

        let gz = retain(&paths, RawStreamRetention::Compress, true);
        let target = gz[0].now.clone().unwrap();
        assert_eq!(target, dir.path().join("raw/1.stdout.gz"));
        assert_eq!(gz[0].bytes, body.len() as u64);
        assert!(!files.stdout_path.exists());
        let mut text = String::new();
        io::Read::read_to_string(
            &mut flate2::read::GzDecoder::new(File::open(&target).unwrap()),
            &mut text,
        )
        .unwrap();
        assert_eq!(text, body);
        assert!(std::fs::metadata(&target).unwrap().len() < body.len() as u64 / 10);

        let again = create(&open_dir(dir.path()).unwrap()).unwrap();
        let dropped = retain(
            &again.raw_files()[..1],
            RawStreamRetention::DropOnSuccess,
            true,
        );
        assert_eq!(dropped[0].now, None);
        assert!(!again.stdout_path.exists());
    }
}
