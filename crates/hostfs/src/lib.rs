//! Corral's files on the host, below directories an agent can write: the one place where Corral
//! opens, creates, replaces, appends to, reads and removes a file of the work tree, a run
//! directory or a sprint's record.
//!
//! An agent can plant anything where Corral will write or read after it: a symbolic link to
//! `~/.bashrc` where Corral writes a check's output (the output lands in the shell's start-up
//! file), a link in a directory of the path (`rounds/2 -> ~/.ssh`), a FIFO (an open waits for
//! ever), a hard link to a file of the user's (a write through it changes that file). A
//! [`HostDir`] is a handle on a directory Corral trusts; every path below it is walked one
//! component at a time, each opened relative to the one before with `O_NOFOLLOW`, so no link
//! is ever followed (what `openat2`'s `RESOLVE_NO_SYMLINKS | RESOLVE_BENEATH` does, on every
//! kernel). What is found where Corral expects its own regular file (a link, a FIFO, a device,
//! a socket, a directory, a file with a second hard link) is [`HostFsError::Tampered`]: nothing
//! is written through it, nothing is read from it, and the caller names it in its record.
//! A file Corral writes whole is written into a new file created exclusively beside it and
//! renamed over the name, so a link that is there is replaced, never followed.
//!
//! It knows nothing of Corral's other crates, of processes, agents or what the files hold.

use std::ffi::OsStr;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use rustix::fs::{AtFlags, FileType, Mode, OFlags};

/// Why a file below a [`HostDir`] was not written or read.
#[derive(Debug, thiserror::Error)]
pub enum HostFsError {
    /// Something other than Corral's own regular file is where Corral expected one (or a link
    /// where it expected a directory). Nothing was written through it or read from it. Not
    /// retryable: the record was tampered with, and the caller names it so.
    #[error("{}: is {found} where Corral expects {expected}; not followed (tampering)", path.display())]
    Tampered {
        /// The path.
        path: PathBuf,
        /// What is there, e.g. `a symbolic link`.
        found: &'static str,
        /// What Corral expected, e.g. `its own regular file`.
        expected: &'static str,
    },
    /// Nothing is at the path. Not retryable as is: the file must be written first.
    #[error("{}: no such file", path.display())]
    Missing {
        /// The path.
        path: PathBuf,
    },
    /// The file is larger than the reader accepts; not read. Not retryable as is.
    #[error("{}: is over {limit} bytes; it was not read", path.display())]
    TooLarge {
        /// The path.
        path: PathBuf,
        /// The limit in bytes.
        limit: u64,
    },
    /// A name that is not a relative path of plain components (`..`, an absolute path, an
    /// empty name): a mistake of the caller. Not retryable.
    #[error("{}: is not a plain relative path below {}", name.display(), dir.display())]
    BadName {
        /// The directory.
        dir: PathBuf,
        /// The name asked for.
        name: PathBuf,
    },
    /// The operating system refused (permissions, a full disk, an I/O error). Retryable: the
    /// same call may succeed once the cause is gone (a full disk is named by
    /// [`HostFsError::is_disk_full`]).
    #[error("{}: {source}", path.display())]
    Io {
        /// The path.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
}

impl HostFsError {
    /// Whether this is tampering: something planted where Corral expected its own file.
    pub fn is_tampering(&self) -> bool {
        matches!(self, HostFsError::Tampered { .. })
    }

    /// Whether the disk (or the user's quota) is full.
    pub fn is_disk_full(&self) -> bool {
        match self {
            HostFsError::Io { source, .. } => {
                source.kind() == io::ErrorKind::StorageFull
                    || source.kind() == io::ErrorKind::QuotaExceeded
            }
            HostFsError::Tampered { .. }
            | HostFsError::Missing { .. }
            | HostFsError::TooLarge { .. }
            | HostFsError::BadName { .. } => false,
        }
    }

    /// The path the error is about.
    pub fn path(&self) -> &Path {
        match self {
            HostFsError::Tampered { path, .. }
            | HostFsError::Missing { path }
            | HostFsError::TooLarge { path, .. }
            | HostFsError::Io { path, .. } => path,
            HostFsError::BadName { name, .. } => name,
        }
    }
}

/// How far a replaced file is made sure to have reached the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flush {
    /// Written and renamed into place, no `fsync`: a `kill -9` leaves the old file or the new
    /// one; a power cut may lose the newest.
    Cached,
    /// The data forced to disk before the rename and the directory's entry after it.
    Synced,
}

/// What an entry is, as [`HostDir::kind`] sees it without following it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    /// A regular file with one link.
    File,
    /// A directory.
    Dir,
    /// Anything else: a link, a FIFO, a device, a socket, a file with a second hard link.
    Other(&'static str),
}

/// What a file type is called in a message.
/// The directory a walk has reached: the handle it started from, or one it opened below it.
enum Here<'s> {
    Start(&'s HostDir),
    Below(HostDir),
}

impl std::ops::Deref for Here<'_> {
    type Target = HostDir;

    fn deref(&self) -> &HostDir {
        match self {
            Here::Start(dir) => dir,
            Here::Below(dir) => dir,
        }
    }
}

fn describe(file_type: FileType, links: u64) -> EntryKind {
    match file_type {
        FileType::RegularFile if links <= 1 => EntryKind::File,
        FileType::RegularFile => EntryKind::Other("a file with another hard link"),
        FileType::Directory => EntryKind::Dir,
        FileType::Symlink => EntryKind::Other("a symbolic link"),
        FileType::Fifo => EntryKind::Other("a FIFO"),
        FileType::CharacterDevice => EntryKind::Other("a character device"),
        FileType::BlockDevice => EntryKind::Other("a block device"),
        FileType::Socket => EntryKind::Other("a socket"),
        FileType::Unknown => EntryKind::Other("not a file"),
    }
}

const OWN_FILE: &str = "its own regular file";
const OWN_DIR: &str = "a directory";

/// The open flags of every open below a handle: never a link, never a controlling terminal,
/// never kept across an exec.
fn base_flags() -> OFlags {
    OFlags::NOFOLLOW | OFlags::NOCTTY | OFlags::CLOEXEC
}

/// A directory Corral trusts, and the one way to reach what is below it (see the crate's
/// documentation).
#[derive(Debug)]
pub struct HostDir {
    fd: OwnedFd,
    path: PathBuf,
}

impl HostDir {
    /// Opens `path`, a directory Corral trusts as it is (the project's root, a run directory a
    /// user named): links in `path` itself are the user's and are followed; nothing below it is.
    ///
    /// # Errors
    ///
    /// [`HostFsError::Missing`] when nothing is there, [`HostFsError::Io`] otherwise.
    pub fn open(path: &Path) -> Result<HostDir, HostFsError> {
        let fd = rustix::fs::open(
            path,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| io_error(path, e.into()))?;
        Ok(HostDir {
            fd,
            path: path.to_owned(),
        })
    }

    /// Like [`HostDir::open`], making `path` and its missing parents first (as `mkdir -p`).
    ///
    /// # Errors
    ///
    /// [`HostFsError::Io`].
    pub fn create(path: &Path) -> Result<HostDir, HostFsError> {
        std::fs::create_dir_all(path).map_err(|e| io_error(path, e))?;
        HostDir::open(path)
    }

    /// The directory's path, for messages and for handing to others.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The path of `rel` below this directory, for messages and for handing to others.
    pub fn join(&self, rel: impl AsRef<Path>) -> PathBuf {
        self.path.join(rel)
    }

    /// Splits `rel` into its plain components, or says why not.
    fn components<'a>(&self, rel: &'a Path) -> Result<Vec<&'a OsStr>, HostFsError> {
        let mut out = Vec::new();
        for component in rel.components() {
            match component {
                Component::Normal(name) => out.push(name),
                Component::CurDir => {}
                Component::ParentDir | Component::RootDir | Component::Prefix(_) => {
                    return Err(self.bad_name(rel));
                }
            }
        }
        if out.is_empty() {
            return Err(self.bad_name(rel));
        }
        Ok(out)
    }

    fn bad_name(&self, rel: &Path) -> HostFsError {
        HostFsError::BadName {
            dir: self.path.clone(),
            name: rel.to_owned(),
        }
    }

    /// Opens the directory `name` in this one, made first when `create` (mode 0777 less the
    /// umask); a link or anything else there is tampering.
    fn step(&self, name: &OsStr, create: bool) -> Result<HostDir, HostFsError> {
        let path = self.path.join(name);
        let open = || {
            rustix::fs::openat(
                &self.fd,
                name,
                base_flags() | OFlags::RDONLY | OFlags::DIRECTORY,
                Mode::empty(),
            )
        };
        let fd = match open() {
            Ok(fd) => fd,
            Err(rustix::io::Errno::NOENT) if create => {
                match rustix::fs::mkdirat(&self.fd, name, Mode::from_raw_mode(0o777)) {
                    Ok(()) | Err(rustix::io::Errno::EXIST) => {}
                    Err(e) => return Err(io_error(&path, e.into())),
                }
                open().map_err(|e| self.explain(name, e, OWN_DIR))?
            }
            Err(e) => return Err(self.explain(name, e, OWN_DIR)),
        };
        Ok(HostDir { fd, path })
    }

    /// Turns a failed open of `name` into the error that says what is there.
    fn explain(
        &self,
        name: &OsStr,
        errno: rustix::io::Errno,
        expected: &'static str,
    ) -> HostFsError {
        let path = self.path.join(name);
        match errno {
            rustix::io::Errno::NOENT => HostFsError::Missing { path },
            // `O_NOFOLLOW` on a link, `O_DIRECTORY` on a non-directory, a FIFO without a writer
            // opened for writing: look at what is there.
            rustix::io::Errno::LOOP | rustix::io::Errno::NOTDIR | rustix::io::Errno::NXIO => {
                match self.kind_here(name) {
                    Ok(Some(EntryKind::Other(found))) => HostFsError::Tampered {
                        path,
                        found,
                        expected,
                    },
                    Ok(Some(EntryKind::File)) => HostFsError::Tampered {
                        path,
                        found: "a regular file",
                        expected,
                    },
                    Ok(Some(EntryKind::Dir)) => HostFsError::Tampered {
                        path,
                        found: "a directory",
                        expected,
                    },
                    Ok(None) => HostFsError::Missing { path },
                    Err(e) => e,
                }
            }
            rustix::io::Errno::ISDIR => HostFsError::Tampered {
                path,
                found: "a directory",
                expected,
            },
            other => io_error(&path, other.into()),
        }
    }

    /// What `name` (one component) is in this directory, not followed; `None` when nothing.
    fn kind_here(&self, name: &OsStr) -> Result<Option<EntryKind>, HostFsError> {
        match rustix::fs::statat(&self.fd, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(stat) => Ok(Some(describe(
                FileType::from_raw_mode(stat.st_mode),
                stat.st_nlink,
            ))),
            Err(rustix::io::Errno::NOENT) => Ok(None),
            Err(e) => Err(io_error(&self.path.join(name), e.into())),
        }
    }

    /// Walks to the directory that holds `rel`'s last component, making missing directories
    /// when `create`; returns it and the last component.
    fn parent_of<'s, 'a>(
        &'s self,
        rel: &'a Path,
        create: bool,
    ) -> Result<(Here<'s>, &'a OsStr), HostFsError> {
        let parts = self.components(rel)?;
        let Some((last, dirs)) = parts.split_last() else {
            return Err(self.bad_name(rel));
        };
        let mut here = Here::Start(self);
        for dir in dirs {
            here = Here::Below(here.step(dir, create)?);
        }
        Ok((here, last))
    }

    /// The directory `rel` below this one, which must exist and be reached without a link.
    ///
    /// # Errors
    ///
    /// [`HostFsError::Missing`], [`HostFsError::Tampered`] (a link or a file on the way),
    /// [`HostFsError::Io`].
    pub fn dir(&self, rel: impl AsRef<Path>) -> Result<HostDir, HostFsError> {
        self.walk_dir(rel.as_ref(), false)
    }

    /// The directory `rel` below this one, made with its missing parents (no link followed).
    ///
    /// # Errors
    ///
    /// [`HostFsError::Tampered`] (a link or a file on the way), [`HostFsError::Io`].
    pub fn create_dir(&self, rel: impl AsRef<Path>) -> Result<HostDir, HostFsError> {
        self.walk_dir(rel.as_ref(), true)
    }

    fn walk_dir(&self, rel: &Path, create: bool) -> Result<HostDir, HostFsError> {
        let (here, last) = self.parent_of(rel, create)?;
        let mut dir = here.step(last, create)?;
        dir.path = self.path.join(rel);
        Ok(dir)
    }

    /// Makes `rel` a new, empty directory made by Corral now: what was there before (a
    /// directory an earlier run left, or anything an agent planted) is removed first, without
    /// following a link. Returns the new directory and whether anything was removed.
    ///
    /// # Errors
    ///
    /// [`HostFsError::Tampered`] (a link on the way to it), [`HostFsError::Io`].
    pub fn fresh_dir(&self, rel: impl AsRef<Path>) -> Result<(HostDir, bool), HostFsError> {
        let rel = rel.as_ref();
        let (here, last) = self.parent_of(rel, true)?;
        let existed = here.kind_here(last)?.is_some();
        if existed {
            here.remove_entry(last)?;
        }
        match rustix::fs::mkdirat(&here.fd, last, Mode::from_raw_mode(0o777)) {
            Ok(()) => {}
            Err(e) => return Err(io_error(&self.path.join(rel), e.into())),
        }
        let mut dir = here.step(last, false)?;
        dir.path = self.path.join(rel);
        Ok((dir, existed))
    }

    /// What `rel` is, not followed; `None` when nothing is there. A link on the way to it is
    /// [`HostFsError::Tampered`].
    ///
    /// # Errors
    ///
    /// [`HostFsError::Tampered`], [`HostFsError::Io`].
    pub fn kind(&self, rel: impl AsRef<Path>) -> Result<Option<EntryKind>, HostFsError> {
        let rel = rel.as_ref();
        let (here, last) = match self.parent_of(rel, false) {
            Ok(found) => found,
            Err(HostFsError::Missing { .. }) => return Ok(None),
            Err(e) => return Err(e),
        };
        here.kind_here(last)
    }

    /// Writes `contents` as the new file `rel`, created exclusively (parents made as needed).
    /// Anything already there is [`HostFsError::Tampered`] and stays untouched.
    ///
    /// # Errors
    ///
    /// [`HostFsError::Tampered`], [`HostFsError::Io`].
    pub fn write_new(&self, rel: impl AsRef<Path>, contents: &[u8]) -> Result<(), HostFsError> {
        let rel = rel.as_ref();
        let (here, last) = self.parent_of(rel, true)?;
        let path = self.path.join(rel);
        let fd = rustix::fs::openat(
            &here.fd,
            last,
            base_flags() | OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL,
            Mode::from_raw_mode(0o666),
        )
        .map_err(|e| match e {
            rustix::io::Errno::EXIST => match here.kind_here(last) {
                Ok(Some(EntryKind::Other(found))) => HostFsError::Tampered {
                    path: path.clone(),
                    found,
                    expected: "no file (Corral makes it)",
                },
                Ok(_) => HostFsError::Tampered {
                    path: path.clone(),
                    found: "a file Corral did not make",
                    expected: "no file (Corral makes it)",
                },
                Err(e) => e,
            },
            other => io_error(&path, other.into()),
        })?;
        let mut file = File::from(fd);
        file.write_all(contents).map_err(|e| io_error(&path, e))
    }

    /// Replaces the file `rel` with `contents` (parents made as needed): written into a new
    /// file created exclusively beside it, then renamed over it, so nothing is written through
    /// what is there. Anything there but Corral's own regular file (a link, a FIFO, a device, a
    /// directory, a file with a second hard link) is [`HostFsError::Tampered`] and stays.
    ///
    /// # Errors
    ///
    /// [`HostFsError::Tampered`], [`HostFsError::Io`].
    pub fn replace(&self, rel: impl AsRef<Path>, contents: &[u8]) -> Result<(), HostFsError> {
        self.replace_with(rel, contents, Flush::Cached)
    }

    /// [`HostDir::replace`], as durably as `flush` says.
    ///
    /// # Errors
    ///
    /// As [`HostDir::replace`].
    pub fn replace_with(
        &self,
        rel: impl AsRef<Path>,
        contents: &[u8],
        flush: Flush,
    ) -> Result<(), HostFsError> {
        let rel = rel.as_ref();
        let (here, last) = self.parent_of(rel, true)?;
        let path = self.path.join(rel);
        match here.kind_here(last)? {
            None | Some(EntryKind::File) => {}
            Some(EntryKind::Dir) => {
                return Err(HostFsError::Tampered {
                    path,
                    found: "a directory",
                    expected: OWN_FILE,
                });
            }
            Some(EntryKind::Other(found)) => {
                return Err(HostFsError::Tampered {
                    path,
                    found,
                    expected: OWN_FILE,
                });
            }
        }
        let (fd, temp) = here.temp_file(last)?;
        let mut file = File::from(fd);
        let synced = flush == Flush::Synced;
        let written = file
            .write_all(contents)
            .and_then(|()| if synced { file.sync_data() } else { Ok(()) })
            .map_err(|e| io_error(&path, e))
            .and_then(|()| {
                rustix::fs::renameat(&here.fd, &temp, &here.fd, last)
                    .map_err(|e| io_error(&path, e.into()))
            })
            .and_then(|()| {
                if synced {
                    rustix::fs::fsync(&here.fd).map_err(|e| io_error(&here.path, e.into()))
                } else {
                    Ok(())
                }
            });
        if written.is_err() {
            let _ = rustix::fs::unlinkat(&here.fd, &temp, AtFlags::empty());
        }
        written
    }

    /// Like [`HostDir::replace`], but what is at the name (a link, a FIFO, a file with a second
    /// hard link) is replaced by the rename too, never written through, and named in the
    /// answer: for a writer whose file must land whatever was planted (the engine's record of
    /// a run, the last thing to lose). A directory there is still an error.
    ///
    /// # Errors
    ///
    /// [`HostFsError::Tampered`] (a directory at the name, a link on the way),
    /// [`HostFsError::Io`].
    pub fn supersede(
        &self,
        rel: impl AsRef<Path>,
        contents: &[u8],
    ) -> Result<Option<&'static str>, HostFsError> {
        let rel = rel.as_ref();
        let (here, last) = self.parent_of(rel, true)?;
        let displaced = match here.kind_here(last)? {
            None | Some(EntryKind::File) => None,
            Some(EntryKind::Dir) => {
                return Err(HostFsError::Tampered {
                    path: self.path.join(rel),
                    found: "a directory",
                    expected: OWN_FILE,
                });
            }
            Some(EntryKind::Other(found)) => Some(found),
        };
        if displaced.is_some() {
            here.remove_entry(last)?;
        }
        here.replace_with(last, contents, Flush::Cached)?;
        Ok(displaced)
    }

    /// A new file beside `name`, created exclusively under a name of its own.
    fn temp_file(&self, name: &OsStr) -> Result<(OwnedFd, PathBuf), HostFsError> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let mut last = None;
        for _ in 0..16 {
            let n = COUNTER.fetch_add(1, Ordering::Relaxed);
            let mut temp = std::ffi::OsString::from(".");
            temp.push(name);
            temp.push(format!(".corral-{}-{n}", std::process::id()));
            let temp = PathBuf::from(temp);
            match rustix::fs::openat(
                &self.fd,
                &temp,
                base_flags() | OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL,
                Mode::from_raw_mode(0o666),
            ) {
                Ok(fd) => return Ok((fd, temp)),
                Err(rustix::io::Errno::EXIST) => last = Some(rustix::io::Errno::EXIST),
                Err(e) => return Err(io_error(&self.path.join(&temp), e.into())),
            }
        }
        Err(io_error(
            &self.path.join(name),
            last.unwrap_or(rustix::io::Errno::EXIST).into(),
        ))
    }

    /// Appends `contents` to the file `rel`, made when missing (parents too). Anything there but
    /// Corral's own regular file is [`HostFsError::Tampered`] and nothing is written.
    ///
    /// # Errors
    ///
    /// [`HostFsError::Tampered`], [`HostFsError::Io`].
    pub fn append(&self, rel: impl AsRef<Path>, contents: &[u8]) -> Result<(), HostFsError> {
        self.append_with(rel, contents, Flush::Cached)
    }

    /// Appends `contents` to the file `rel` as [`HostDir::append`] does, and with
    /// [`Flush::Synced`] forces the file's data to disk before returning: a log whose lines
    /// must outlast a power cut at the moments that matter.
    ///
    /// # Errors
    ///
    /// [`HostFsError::Tampered`], [`HostFsError::Io`].
    pub fn append_with(
        &self,
        rel: impl AsRef<Path>,
        contents: &[u8],
        flush: Flush,
    ) -> Result<(), HostFsError> {
        let rel = rel.as_ref();
        let (here, last) = self.parent_of(rel, true)?;
        let path = self.path.join(rel);
        // Without `O_NONBLOCK` an open of a FIFO for writing waits for a reader.
        let fd = rustix::fs::openat(
            &here.fd,
            last,
            base_flags() | OFlags::WRONLY | OFlags::APPEND | OFlags::CREATE | OFlags::NONBLOCK,
            Mode::from_raw_mode(0o666),
        )
        .map_err(|e| here.explain(last, e, OWN_FILE))?;
        let file = File::from(fd);
        own_file(&file, &path)?;
        let mut file = file;
        file.write_all(contents).map_err(|e| io_error(&path, e))?;
        match flush {
            Flush::Cached => Ok(()),
            Flush::Synced => file.sync_data().map_err(|e| io_error(&path, e)),
        }
    }

    /// Reads the regular file `rel` whole, if it holds at most `limit` bytes: never through a
    /// link, never a FIFO or a device, never blocking.
    ///
    /// # Errors
    ///
    /// [`HostFsError::Missing`], [`HostFsError::Tampered`], [`HostFsError::TooLarge`],
    /// [`HostFsError::Io`].
    pub fn read(&self, rel: impl AsRef<Path>, limit: u64) -> Result<Vec<u8>, HostFsError> {
        let rel = rel.as_ref();
        let (here, last) = self.parent_of(rel, false)?;
        let path = self.path.join(rel);
        let fd = rustix::fs::openat(
            &here.fd,
            last,
            base_flags() | OFlags::RDONLY | OFlags::NONBLOCK,
            Mode::empty(),
        )
        .map_err(|e| here.explain(last, e, OWN_FILE))?;
        let file = File::from(fd);
        let meta = file.metadata().map_err(|e| io_error(&path, e))?;
        if !meta.file_type().is_file() {
            return Err(HostFsError::Tampered {
                path,
                found: if meta.is_dir() {
                    "a directory"
                } else {
                    "not a regular file"
                },
                expected: OWN_FILE,
            });
        }
        if meta.len() > limit {
            return Err(HostFsError::TooLarge { path, limit });
        }
        let mut out = Vec::new();
        file.take(limit.saturating_add(1))
            .read_to_end(&mut out)
            .map_err(|e| io_error(&path, e))?;
        if out.len() as u64 > limit {
            return Err(HostFsError::TooLarge { path, limit });
        }
        Ok(out)
    }

    /// Like [`HostDir::read`], `None` when nothing is there.
    ///
    /// # Errors
    ///
    /// As [`HostDir::read`], less [`HostFsError::Missing`].
    pub fn read_if_exists(
        &self,
        rel: impl AsRef<Path>,
        limit: u64,
    ) -> Result<Option<Vec<u8>>, HostFsError> {
        match self.read(rel, limit) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(HostFsError::Missing { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Removes `rel`, whatever it is (a directory with everything in it), never following a
    /// link: a link is removed, not what it leads to. Nothing there is no error.
    ///
    /// # Errors
    ///
    /// [`HostFsError::Tampered`] (a link on the way to it), [`HostFsError::Io`].
    pub fn remove(&self, rel: impl AsRef<Path>) -> Result<(), HostFsError> {
        let rel = rel.as_ref();
        let (here, last) = match self.parent_of(rel, false) {
            Ok(found) => found,
            Err(HostFsError::Missing { .. }) => return Ok(()),
            Err(e) => return Err(e),
        };
        if here.kind_here(last)?.is_some() {
            here.remove_entry(last)?;
        }
        Ok(())
    }

    /// Removes the entry `name` of this directory, recursively for a directory.
    fn remove_entry(&self, name: &OsStr) -> Result<(), HostFsError> {
        let path = self.path.join(name);
        match self.kind_here(name)? {
            None => Ok(()),
            Some(EntryKind::Dir) => {
                let dir = self.step(name, false)?;
                for entry in dir.entries()? {
                    dir.remove_entry(&entry)?;
                }
                match rustix::fs::unlinkat(&self.fd, name, AtFlags::REMOVEDIR) {
                    Ok(()) | Err(rustix::io::Errno::NOENT) => Ok(()),
                    Err(e) => Err(io_error(&path, e.into())),
                }
            }
            Some(EntryKind::File | EntryKind::Other(_)) => {
                match rustix::fs::unlinkat(&self.fd, name, AtFlags::empty()) {
                    Ok(()) | Err(rustix::io::Errno::NOENT) => Ok(()),
                    Err(e) => Err(io_error(&path, e.into())),
                }
            }
        }
    }

    /// The names in this directory, `.` and `..` left out, sorted.
    ///
    /// # Errors
    ///
    /// [`HostFsError::Io`].
    pub fn entries(&self) -> Result<Vec<std::ffi::OsString>, HostFsError> {
        use std::os::unix::ffi::OsStrExt;
        let mut dir = rustix::fs::Dir::read_from(self.fd.as_fd())
            .map_err(|e| io_error(&self.path, e.into()))?;
        let mut names = Vec::new();
        while let Some(entry) = dir.read() {
            let entry = entry.map_err(|e| io_error(&self.path, e.into()))?;
            let name = entry.file_name().to_bytes();
            if name == b"." || name == b".." {
                continue;
            }
            names.push(OsStr::from_bytes(name).to_os_string());
        }
        names.sort();
        Ok(names)
    }

    /// Renames `from` to `to`, both below this directory, without following a link in either's
    /// directories (the entry itself is moved as it is, whatever it is).
    ///
    /// # Errors
    ///
    /// [`HostFsError::Missing`], [`HostFsError::Tampered`] (a link on the way),
    /// [`HostFsError::Io`].
    pub fn rename(&self, from: impl AsRef<Path>, to: impl AsRef<Path>) -> Result<(), HostFsError> {
        let (from, to) = (from.as_ref(), to.as_ref());
        let (from_here, from_last) = self.parent_of(from, false)?;
        let (to_here, to_last) = self.parent_of(to, true)?;
        rustix::fs::renameat(&from_here.fd, from_last, &to_here.fd, to_last).map_err(|e| match e {
            rustix::io::Errno::NOENT => HostFsError::Missing {
                path: self.path.join(from),
            },
            other => io_error(&self.path.join(from), other.into()),
        })
    }
}

/// Checks that an opened file is Corral's own: a regular file with one link.
fn own_file(file: &File, path: &Path) -> Result<(), HostFsError> {
    let meta = file.metadata().map_err(|e| io_error(path, e))?;
    let kind = if meta.is_dir() {
        EntryKind::Dir
    } else if meta.file_type().is_file() {
        describe(FileType::RegularFile, meta.nlink())
    } else {
        EntryKind::Other("not a regular file")
    };
    match kind {
        EntryKind::File => Ok(()),
        EntryKind::Dir => Err(HostFsError::Tampered {
            path: path.to_owned(),
            found: "a directory",
            expected: OWN_FILE,
        }),
        EntryKind::Other(found) => Err(HostFsError::Tampered {
            path: path.to_owned(),
            found,
            expected: OWN_FILE,
        }),
    }
}

fn io_error(path: &Path, source: io::Error) -> HostFsError {
    if source.kind() == io::ErrorKind::NotFound {
        HostFsError::Missing {
            path: path.to_owned(),
        }
    } else {
        HostFsError::Io {
            path: path.to_owned(),
            source,
        }
    }
}
