//! A flow's sources (a ticket file, a PRD, issues fetched by the caller): read as files a user
//! or an agent could have made hostile, and held to the size a prompt should carry.

use std::path::Path;

use super::LifeError;

/// The most bytes one source may have: a PRD larger than this is several plans.
pub const SOURCE_MAX_BYTES: u64 = 256 * 1024;

/// The most lines one source may have.
pub const SOURCE_MAX_LINES: usize = 2_000;

/// One source's text and the name it goes by in the prompt and in messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceText {
    /// The file as named, relative to the project when it is in it, or a caller's label
    /// (`GitHub issue #12`).
    pub label: String,
    /// The text.
    pub text: String,
}

/// Reads the source file `file` of the project at `project_root`: it must resolve inside the
/// project (no link out of the tree), be a regular file (not a FIFO), be UTF-8 and within
/// [`SOURCE_MAX_BYTES`] and [`SOURCE_MAX_LINES`].
///
/// # Errors
///
/// [`LifeError::OutsideProject`], [`LifeError::Unreadable`] and the errors of [`check_source`].
pub fn read_source(project_root: &Path, file: &Path) -> Result<SourceText, LifeError> {
    let root = std::fs::canonicalize(project_root).unwrap_or_else(|_| project_root.to_owned());
    let named = if file.is_absolute() {
        file.to_owned()
    } else {
        std::env::current_dir()
            .map(|cwd| cwd.join(file))
            .unwrap_or_else(|_| file.to_owned())
    };
    // A missing file is named as missing, not as outside: canonicalize fails on it.
    if let Ok(resolved) = std::fs::canonicalize(&named)
        && !resolved.starts_with(&root)
    {
        return Err(LifeError::OutsideProject {
            file: file.to_owned(),
            root,
        });
    }
    let bytes = corral_contract::read_untrusted_file(&named, SOURCE_MAX_BYTES)
        .map_err(LifeError::Unreadable)?;
    let label = std::fs::canonicalize(&named)
        .ok()
        .and_then(|r| r.strip_prefix(&root).ok().map(|p| p.display().to_string()))
        .unwrap_or_else(|| file.display().to_string());
    let text = String::from_utf8(bytes).map_err(|_| LifeError::NotText {
        label: label.clone(),
    })?;
    check_source(label, text)
}

/// Holds a source's text to the same rules as a file's: not empty, within
/// [`SOURCE_MAX_LINES`].
///
/// # Errors
///
/// [`LifeError::Empty`], [`LifeError::TooManyLines`].
pub fn check_source(label: String, text: String) -> Result<SourceText, LifeError> {
    if text.trim().is_empty() {
        return Err(LifeError::Empty { label });
    }
    let lines = text.lines().count();
    if lines > SOURCE_MAX_LINES {
        return Err(LifeError::TooManyLines {
            label,
            lines,
            limit: SOURCE_MAX_LINES,
        });
    }
    Ok(SourceText { label, text })
}
