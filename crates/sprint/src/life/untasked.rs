//! A sprint file written before its tasks: the `[sprint]` settings and the roles, and no
//! `[[tasks]]` yet, which a plan fills. `corral sprint check` refuses it (a sprint needs a
//! task), but planning into it is the point of writing it.

use std::path::Path;

use crate::diagnostic::Rule;
use crate::file::{SprintFile, SprintFileError};

/// What stands in for the missing tasks while the rest of the file is checked.
const STAND_IN: &str =
    "\n[[tasks]]\nid = \"corral-stand-in\"\ntitle = \"stand-in\"\nprompt = \"stand-in\"\n";

/// Loads the sprint file at `path` as [`crate::load`] does, except that a file whose only
/// error is that it has no `[[tasks]]` is accepted with no tasks.
///
/// # Errors
///
/// As [`crate::load`]: every error but the missing tasks.
pub fn load_allowing_no_tasks(path: &Path) -> Result<SprintFile, SprintFileError> {
    match crate::load(path) {
        Err(SprintFileError::Invalid { path, diagnostics })
            if !diagnostics.is_empty() && diagnostics.iter().all(|d| d.rule == Rule::NoTasks) =>
        {
            let untasked = || SprintFileError::Invalid {
                path: path.clone(),
                diagnostics: diagnostics.clone(),
            };
            let bytes =
                corral_contract::read_untrusted_file(&path, crate::file::limits::FILE_LIMIT)
                    .map_err(SprintFileError::Unreadable)?;
            let text = String::from_utf8(bytes).map_err(|_| untasked())?;
            let mut file =
                crate::parse::parse(&path, &format!("{text}{STAND_IN}")).map_err(|_| untasked())?;
            file.tasks.clear();
            Ok(file)
        }
        other => other,
    }
}
