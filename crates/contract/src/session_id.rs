//! `session-id.txt`: the provider session id, one line, next to `signals.json`.
//!
//! The engine writes it (atomically, the moment a stream yields an id); this module reads it
//! back. The rule for the id itself is the ports' ([`SessionId`]: 1 to [`SESSION_ID_MAX_LEN`]
//! characters from `[A-Za-z0-9._:-]`, not starting with `-` nor with `.`), and so is the file's
//! name ([`corral_ports::run_dir::SESSION_ID_FILE`]). The file is the id plus one optional
//! trailing newline (`\n` or `\r\n`), nothing else.

use std::io;
use std::path::{Path, PathBuf};

use corral_ports::{SessionId, SessionIdError};

#[cfg(doc)]
use corral_ports::SESSION_ID_MAX_LEN;

use crate::untrusted::{UntrustedFileError, read_untrusted_file};

/// The largest `session-id.txt` read, in bytes: a maximal id plus `\r\n`, with room to spare.
const SESSION_ID_FILE_MAX_BYTES: u64 = 1024;

/// Why `session-id.txt` could not be read as a session id.
#[derive(Debug, thiserror::Error)]
pub enum SessionIdFileError {
    /// The file exists but could not be read.
    /// Retryable: reading again may succeed.
    #[error("{}: session id file could not be read: {source}", file.display())]
    Unreadable {
        /// The file.
        file: PathBuf,
        /// The I/O error.
        source: io::Error,
    },
    /// The file is far larger than any session id.
    /// Not retryable: the file is not a session id file; resume cold.
    #[error("{}: session id file is {size} bytes, more than a session id can be", file.display())]
    TooLarge {
        /// The file.
        file: PathBuf,
        /// Its size in bytes.
        size: u64,
    },
    /// The file is not UTF-8.
    /// Not retryable: the file is not a session id file; resume cold.
    #[error("{}: session id file is not UTF-8 text", file.display())]
    NotUtf8 {
        /// The file.
        file: PathBuf,
    },
    /// The file's contents break the session-id rule (or hold more than one line).
    /// Not retryable: resuming with this id is refused; resume cold.
    #[error("{}: {source}", file.display())]
    Invalid {
        /// The file.
        file: PathBuf,
        /// The rule broken.
        source: SessionIdError,
    },
}

/// Reads the session id at `path`: `Ok(None)` when the file does not exist (no id was captured),
/// `Ok(Some(id))` when it holds a valid id and at most one trailing newline.
///
/// # Errors
///
/// [`SessionIdFileError`] when the file exists but is unreadable, oversized, not UTF-8, empty or
/// not a valid id.
pub fn read_session_id(path: &Path) -> Result<Option<SessionId>, SessionIdFileError> {
    let bytes = match read_untrusted_file(path, SESSION_ID_FILE_MAX_BYTES) {
        Ok(bytes) => bytes,
        Err(UntrustedFileError::Missing { .. }) => return Ok(None),
        Err(UntrustedFileError::TooLarge { file, size, .. }) => {
            return Err(SessionIdFileError::TooLarge { file, size });
        }
        Err(UntrustedFileError::NotRegular { file, kind }) => {
            return Err(SessionIdFileError::Unreadable {
                file,
                source: io::Error::other(format!("it is {kind}, not a regular file")),
            });
        }
        Err(UntrustedFileError::Io { file, source }) => {
            return Err(SessionIdFileError::Unreadable { file, source });
        }
    };
    let text = String::from_utf8(bytes).map_err(|_| SessionIdFileError::NotUtf8 {
        file: path.to_owned(),
    })?;
    let line = text
        .strip_suffix("\r\n")
        .or_else(|| text.strip_suffix('\n'))
        .unwrap_or(&text);
    SessionId::parse(line)
        .map(Some)
        .map_err(|source| SessionIdFileError::Invalid {
            file: path.to_owned(),
            source,
        })
}
