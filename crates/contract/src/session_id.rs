//! `session-id.txt`: the provider session id, one line, next to `signals.json`.
//!
//! The engine writes it (atomically, the moment a stream yields an id); this module defines the
//! format and reads it back. A session id ends up in argv on resume (`--resume <id>`), so the rule
//! is strict: 1 to [`SESSION_ID_MAX_LEN`] characters from `[A-Za-z0-9._:-]`, not starting with
//! `-` (an id that could be read as a flag is refused) nor with `.` (CLIs name session files
//! after the id, so `..` or `.` would be a path). The file is the id plus one optional
//! trailing newline (`\n` or `\r\n`), nothing else.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use crate::untrusted::{UntrustedFileError, read_untrusted_file};

/// The conventional file name.
pub const SESSION_ID_FILE: &str = "session-id.txt";

/// The longest session id accepted, in characters.
pub const SESSION_ID_MAX_LEN: usize = 256;

/// The largest `session-id.txt` read, in bytes: a maximal id plus `\r\n`, with room to spare.
const SESSION_ID_FILE_MAX_BYTES: u64 = 1024;

/// A provider session id that passed [`validate_session_id`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SessionId(String);

impl SessionId {
    /// Checks `text` and wraps it.
    ///
    /// # Errors
    ///
    /// [`SessionIdError`] saying which rule `text` breaks.
    pub fn parse(text: &str) -> Result<Self, SessionIdError> {
        validate_session_id(text)?;
        Ok(Self(text.to_owned()))
    }

    /// The id.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The exact contents of `session-id.txt` for this id: the id and one `\n`.
    #[must_use]
    pub fn to_file_contents(&self) -> String {
        format!("{}\n", self.0)
    }
}

impl fmt::Display for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for SessionId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl FromStr for SessionId {
    type Err = SessionIdError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Self::parse(text)
    }
}

/// Why a text is not a session id.
///
/// Not retryable: the id came from the provider's stream; resuming with it is refused and the
/// caller falls back to a cold start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SessionIdError {
    /// The text is empty.
    #[error("session id is empty")]
    Empty,
    /// The text is longer than [`SESSION_ID_MAX_LEN`] characters.
    #[error("session id is {len} characters long; the limit is {SESSION_ID_MAX_LEN}")]
    TooLong {
        /// Its length in characters.
        len: usize,
    },
    /// The text starts with `-`, so it could be read as a command-line flag.
    #[error("session id starts with `-` and could be taken for a flag")]
    LeadingDash,
    /// The text starts with `.`, so as a file name it could be `.`, `..` or a hidden file (CLIs
    /// keep sessions in files named after their ids).
    #[error("session id starts with `.` and could be taken for a path (`.`, `..`)")]
    LeadingDot,
    /// The text has a character outside `[A-Za-z0-9._:-]` (a space, a newline, a slash, ...).
    #[error(
        "session id has the character {ch:?} at index {index}; only A-Z a-z 0-9 . _ : - are allowed"
    )]
    ForbiddenChar {
        /// The first offending character.
        ch: char,
        /// Its index in characters.
        index: usize,
    },
}

/// Checks `text` against the session-id rule.
///
/// # Errors
///
/// The first rule broken, checked in this order: empty, too long, forbidden character, leading
/// dash, leading dot.
pub fn validate_session_id(text: &str) -> Result<(), SessionIdError> {
    if text.is_empty() {
        return Err(SessionIdError::Empty);
    }
    let len = text.chars().count();
    if len > SESSION_ID_MAX_LEN {
        return Err(SessionIdError::TooLong { len });
    }
    if let Some((index, ch)) = text
        .chars()
        .enumerate()
        .find(|(_, ch)| !(ch.is_ascii_alphanumeric() || matches!(ch, '.' | '_' | ':' | '-')))
    {
        return Err(SessionIdError::ForbiddenChar { ch, index });
    }
    if text.starts_with('-') {
        return Err(SessionIdError::LeadingDash);
    }
    if text.starts_with('.') {
        return Err(SessionIdError::LeadingDot);
    }
    Ok(())
}

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

#[cfg(test)]
mod tests {
    use super::{SESSION_ID_MAX_LEN, SessionId, SessionIdError, validate_session_id};

    #[test]
    fn accepts_provider_shaped_ids() {
        for ok in [
            "0f8e4f7a-1b2c-4d5e-8f90-123456789abc",
            "thread_abc123",
            "ses_01J.ABC:def",
            "a",
            &"x".repeat(SESSION_ID_MAX_LEN),
        ] {
            assert_eq!(validate_session_id(ok), Ok(()), "{ok}");
        }
    }

    #[test]
    fn refuses_each_rule() {
        assert_eq!(validate_session_id(""), Err(SessionIdError::Empty));
        assert_eq!(
            validate_session_id(&"x".repeat(SESSION_ID_MAX_LEN + 1)),
            Err(SessionIdError::TooLong {
                len: SESSION_ID_MAX_LEN + 1
            })
        );
        assert_eq!(
            validate_session_id("--help"),
            Err(SessionIdError::LeadingDash)
        );
        assert_eq!(validate_session_id("-"), Err(SessionIdError::LeadingDash));
        for dotted in ["..", ".", ".hidden", "..x"] {
            assert_eq!(
                validate_session_id(dotted),
                Err(SessionIdError::LeadingDot),
                "{dotted}"
            );
        }
        for (bad, ch, index) in [
            ("a b", ' ', 1),
            ("a\nb", '\n', 1),
            ("a/b", '/', 1),
            ("$(x)", '$', 0),
            ("é", 'é', 0),
            ("a;b", ';', 1),
        ] {
            assert_eq!(
                validate_session_id(bad),
                Err(SessionIdError::ForbiddenChar { ch, index }),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn file_contents_are_one_line() {
        let id = SessionId::parse("abc-1");
        assert_eq!(id.map(|id| id.to_file_contents()), Ok("abc-1\n".to_owned()));
    }
}
