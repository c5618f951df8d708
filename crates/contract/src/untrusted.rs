//! Reading a file that an agent could have replaced: never blocking, regular files only, bounded.
//!
//! An agent can put anything at a path Corral reads after it: a FIFO (an `open` for reading
//! waits for a writer that never comes), a symlink to `/dev/tty` or `/dev/zero` (a read that
//! blocks, or never ends), a device whose mere opening has effects, a file that grows while it is
//! read. [`read_untrusted_file`] looks at what the path leads to before opening it (`stat` does
//! not block, and does not open), refuses anything but a regular file, opens without blocking
//! and without taking a controlling terminal, checks the opened file again (it may have been
//! swapped between the two steps), and never reads past the limit.
//! [`read_untrusted_file_within_directory`], for a file the agent writes, follows a symbolic link
//! only within the file's own directory: the agent can point one anywhere the invoking user can
//! read, and what Corral says about the file (its size, its keys) would then tell the agent
//! about the target. Whether the opened file is inside is checked on the opened descriptor, so a
//! link swapped in between is caught too.

use std::fs::{File, Metadata, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Why an untrusted file was not read.
#[derive(Debug, thiserror::Error)]
pub enum UntrustedFileError {
    /// Nothing is at the path. Not retryable as is: the file must be written first.
    #[error("{}: no such file", file.display())]
    Missing {
        /// The path.
        file: PathBuf,
    },
    /// The path leads to something other than a regular file (a FIFO, a device, a socket, a
    /// directory); it was not read. Not retryable as is: a regular file must be put there.
    #[error("{}: is {kind}, not a regular file; it was not read", file.display())]
    NotRegular {
        /// The path.
        file: PathBuf,
        /// What is there instead, e.g. `a FIFO`.
        kind: &'static str,
    },
    /// The file is larger than the reader accepts; it was not read (or not past the limit).
    /// Not retryable as is: the file must be made smaller.
    #[error("{}: is {size} bytes; the limit is {limit}", file.display())]
    TooLarge {
        /// The path.
        file: PathBuf,
        /// Its size (at least the bytes seen, if it grew while being read).
        size: u64,
        /// The limit in bytes.
        limit: u64,
    },
    /// The operating system refused (permissions, an I/O error). Retryable: reading again may
    /// succeed.
    #[error("{}: {source}", file.display())]
    Io {
        /// The path.
        file: PathBuf,
        /// The error.
        source: io::Error,
    },
}

/// What a file type is called in an error message.
fn kind_of(metadata: &Metadata) -> Option<&'static str> {
    let file_type = metadata.file_type();
    if file_type.is_file() {
        None
    } else if file_type.is_dir() {
        Some("a directory")
    } else if file_type.is_fifo() {
        Some("a FIFO")
    } else if file_type.is_char_device() {
        Some("a character device")
    } else if file_type.is_block_device() {
        Some("a block device")
    } else if file_type.is_socket() {
        Some("a socket")
    } else {
        Some("not a file")
    }
}

/// What [`UntrustedFileError::NotRegular`] calls a link that leads out of its directory.
pub const LINK_OUT_OF_DIRECTORY: &str = "a link out of its directory";

/// Whether `target` (a resolved path) is inside `path`'s own directory, resolved.
fn inside_own_directory(path: &Path, target: &Path) -> bool {
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    std::fs::canonicalize(parent).is_ok_and(|dir| target.starts_with(dir))
}

/// Reads the regular file at `path` (symlinks followed) whole, if it holds at most `limit` bytes.
///
/// # Errors
///
/// [`UntrustedFileError`]: nothing there, not a regular file, too large, or an I/O error.
pub fn read_untrusted_file(path: &Path, limit: u64) -> Result<Vec<u8>, UntrustedFileError> {
    read(path, limit, false)
}

/// Like [`read_untrusted_file`], for a file the agent itself writes (`signals.json`): symlinks
/// are followed only when they lead to a file inside `path`'s own directory (or below it).
///
/// # Errors
///
/// [`UntrustedFileError`]: nothing there, not a regular file (a link out of its directory
/// included, whatever it leads to), too large, or an I/O error.
pub fn read_untrusted_file_within_directory(
    path: &Path,
    limit: u64,
) -> Result<Vec<u8>, UntrustedFileError> {
    read(path, limit, true)
}

fn read(path: &Path, limit: u64, confined: bool) -> Result<Vec<u8>, UntrustedFileError> {
    let io_error = |source: io::Error| {
        if source.kind() == io::ErrorKind::NotFound {
            UntrustedFileError::Missing {
                file: path.to_owned(),
            }
        } else {
            UntrustedFileError::Io {
                file: path.to_owned(),
                source,
            }
        }
    };
    let check = |metadata: &Metadata| -> Result<(), UntrustedFileError> {
        if let Some(kind) = kind_of(metadata) {
            return Err(UntrustedFileError::NotRegular {
                file: path.to_owned(),
                kind,
            });
        }
        Ok(())
    };
    let out_of_directory = || UntrustedFileError::NotRegular {
        file: path.to_owned(),
        kind: LINK_OUT_OF_DIRECTORY,
    };
    let size = |metadata: &Metadata| -> Result<(), UntrustedFileError> {
        if metadata.len() > limit {
            return Err(UntrustedFileError::TooLarge {
                file: path.to_owned(),
                size: metadata.len(),
                limit,
            });
        }
        Ok(())
    };
    let looked_at = std::fs::metadata(path).map_err(io_error)?;
    check(&looked_at)?;
    // Before the size, which would describe the target.
    let linked = confined
        && std::fs::symlink_metadata(path)
            .map_err(io_error)?
            .file_type()
            .is_symlink();
    if linked && !inside_own_directory(path, &std::fs::canonicalize(path).map_err(io_error)?) {
        return Err(out_of_directory());
    }
    size(&looked_at)?;
    let file: File = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(io_error)?;
    // What was opened may not be what was looked at: check the open file itself, and where it
    // is (a link may have been put there in between).
    let metadata = file.metadata().map_err(io_error)?;
    check(&metadata)?;
    if confined {
        use std::os::fd::AsRawFd;
        let opened =
            std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd())).map_err(io_error)?;
        if !inside_own_directory(path, &opened) {
            return Err(out_of_directory());
        }
    }
    size(&metadata)?;
    let mut bytes = Vec::with_capacity(usize::try_from(metadata.len()).unwrap_or(0));
    file.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(io_error)?;
    let read = u64::try_from(bytes.len()).unwrap_or(u64::MAX);
    if read > limit {
        return Err(UntrustedFileError::TooLarge {
            file: path.to_owned(),
            size: read,
            limit,
        });
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_regular_file_is_read_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, b"hello").unwrap();
        assert_eq!(read_untrusted_file(&path, 5).unwrap(), b"hello");
        assert!(matches!(
            read_untrusted_file(&path, 4),
            Err(UntrustedFileError::TooLarge {
                size: 5,
                limit: 4,
                ..
            })
        ));
    }

    #[test]
    fn a_socket_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sock");
        let _listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let result = read_untrusted_file(&path, 1024);
        assert!(
            matches!(
                result,
                Err(UntrustedFileError::NotRegular {
                    kind: "a socket",
                    ..
                })
            ),
            "{result:?}"
        );
    }

    #[test]
    fn links_to_devices_and_directories_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        for (target, kind) in [
            ("/dev/zero", "a character device"),
            ("/dev/null", "a character device"),
            ("/", "a directory"),
        ] {
            let link = dir.path().join(target.replace('/', "_"));
            std::os::unix::fs::symlink(target, &link).unwrap();
            let result = read_untrusted_file(&link, 1024);
            assert!(
                matches!(&result, Err(UntrustedFileError::NotRegular { kind: k, .. }) if *k == kind),
                "{target}: {result:?}"
            );
        }
        assert!(matches!(
            read_untrusted_file(&dir.path().join("nothing"), 1),
            Err(UntrustedFileError::Missing { .. })
        ));
        // A link to itself: an error at once, not a loop.
        let looping = dir.path().join("loop");
        std::os::unix::fs::symlink(&looping, &looping).unwrap();
        assert!(matches!(
            read_untrusted_file(&looping, 1024),
            Err(UntrustedFileError::Io { .. })
        ));
    }

    /// Issue 10 item 8: a `signals.json` linked out of the run directory was read as the
    /// invoking user, and the errors told the agent the target's size and keys. Now a link out
    /// is not read, and the error says nothing of the target; a link within the directory (or
    /// below it) is read.
    #[test]
    fn a_link_out_of_its_directory_is_not_read_and_one_inside_is() {
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().join("run");
        std::fs::create_dir_all(run.join("sub")).unwrap();
        let secret = dir.path().join("secret.json");
        std::fs::write(&secret, "{\"secret_key_name\": 1}").unwrap();
        for target in [secret.clone(), PathBuf::from("../secret.json")] {
            let link = run.join("signals.json");
            let _ = std::fs::remove_file(&link);
            std::os::unix::fs::symlink(&target, &link).unwrap();
            // A limit below its size: the error must not be "too large", which tells the size.
            let result = read_untrusted_file_within_directory(&link, 4);
            assert!(
                matches!(
                    &result,
                    Err(UntrustedFileError::NotRegular {
                        kind: LINK_OUT_OF_DIRECTORY,
                        ..
                    })
                ),
                "{target:?}: {result:?}"
            );
            let text = result.unwrap_err().to_string();
            assert!(!text.contains("secret") && !text.contains("21"), "{text}");
        }
        // A link to a link out: the same.
        let hop = run.join("hop.json");
        std::os::unix::fs::symlink(&secret, &hop).unwrap();
        let link = run.join("via-hop.json");
        std::os::unix::fs::symlink("hop.json", &link).unwrap();
        assert!(matches!(
            read_untrusted_file_within_directory(&link, 1024),
            Err(UntrustedFileError::NotRegular {
                kind: LINK_OUT_OF_DIRECTORY,
                ..
            })
        ));
        // Inside: read, relative or absolute, in the directory or below it.
        std::fs::write(run.join("sub/real.json"), "{}").unwrap();
        for (name, target) in [
            ("rel.json", PathBuf::from("sub/real.json")),
            ("abs.json", run.join("sub/real.json")),
        ] {
            let link = run.join(name);
            std::os::unix::fs::symlink(&target, &link).unwrap();
            assert_eq!(
                read_untrusted_file_within_directory(&link, 1024).unwrap(),
                b"{}",
                "{name}"
            );
        }
        // Not a link: read as before.
        std::fs::write(run.join("plain.json"), "{}").unwrap();
        assert_eq!(
            read_untrusted_file_within_directory(&run.join("plain.json"), 2).unwrap(),
            b"{}"
        );
    }
}
