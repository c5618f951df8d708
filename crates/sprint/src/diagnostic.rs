//! What is wrong with a sprint file: one [`Diagnostic`] per broken rule, each naming the file,
//! the line and column, the key and the [`Rule`].

use std::fmt;
use std::path::PathBuf;

/// A rule of the sprint file. Each diagnostic names the one it reports, so a script (or a
/// person searching `docs/sprint.md`) can tell errors apart without reading their wording.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Rule {
    /// The file is not TOML.
    Syntax,
    /// A key the sprint file does not have (a typo, most often).
    UnknownKey,
    /// A required key is absent.
    MissingKey,
    /// A value of the wrong type (a string where a number belongs).
    WrongType,
    /// A number outside its range.
    OutOfRange,
    /// An empty string where text is required.
    Empty,
    /// A sprint name or task id that is unsafe as a directory or branch name.
    BadName,
    /// A branch name git would refuse.
    BadBranch,
    /// A gate path that is not a relative path inside the work tree.
    BadPath,
    /// A provider Corral does not drive.
    UnknownProvider,
    /// An effort other than low, medium or high.
    UnknownEffort,
    /// A `fold_check` other than each or off.
    UnknownFoldCheck,
    /// No `[[tasks]]` at all.
    NoTasks,
    /// Two tasks with the same id.
    DuplicateTaskId,
    /// `depends_on` names no task of the file.
    UnknownDependency,
    /// Tasks that depend on each other in a circle.
    DependencyCycle,
    /// A task with both `prompt` and `brief`.
    PromptAndBrief,
    /// A task with neither `prompt` nor `brief`.
    NoPrompt,
    /// A `brief` file that does not exist.
    BriefMissing,
    /// A `brief` file that exists but cannot be used (not a regular file, too large, not UTF-8,
    /// empty, unreadable).
    BriefUnreadable,
    /// A `brief` outside the work tree: absolute, through `..` out of it, through a hidden path
    /// component, or through a symbolic link.
    BriefOutsideTree,
}

impl Rule {
    /// The rule's name, as printed in brackets after each error.
    pub fn as_str(self) -> &'static str {
        match self {
            Rule::Syntax => "syntax",
            Rule::UnknownKey => "unknown-key",
            Rule::MissingKey => "missing-key",
            Rule::WrongType => "wrong-type",
            Rule::OutOfRange => "out-of-range",
            Rule::Empty => "empty",
            Rule::BadName => "bad-name",
            Rule::BadBranch => "bad-branch",
            Rule::BadPath => "bad-path",
            Rule::UnknownProvider => "unknown-provider",
            Rule::UnknownEffort => "unknown-effort",
            Rule::UnknownFoldCheck => "unknown-fold-check",
            Rule::NoTasks => "no-tasks",
            Rule::DuplicateTaskId => "duplicate-task-id",
            Rule::UnknownDependency => "unknown-dependency",
            Rule::DependencyCycle => "dependency-cycle",
            Rule::PromptAndBrief => "prompt-and-brief",
            Rule::NoPrompt => "no-prompt",
            Rule::BriefMissing => "brief-missing",
            Rule::BriefUnreadable => "brief-unreadable",
            Rule::BriefOutsideTree => "brief-outside-tree",
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One broken rule, where it is broken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// The sprint file, as it was named.
    pub file: PathBuf,
    /// The line, from 1.
    pub line: usize,
    /// The column, from 1, in characters.
    pub column: usize,
    /// The key, dotted (`sprint.max_rounds`, `tasks[2].depends_on`; arrays count from 0).
    /// Empty for an error that belongs to no key (a syntax error).
    pub key: String,
    /// The rule broken.
    pub rule: Rule,
    /// What is wrong, in a sentence without the key.
    pub message: String,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}: ", self.file.display(), self.line, self.column)?;
        if !self.key.is_empty() {
            write!(f, "{}: ", self.key)?;
        }
        write!(f, "{} [{}]", self.message, self.rule)
    }
}

/// The line and column (both from 1, the column in characters) of byte `offset` in `src`.
pub(crate) fn line_col(src: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(src.len());
    let before = src.get(..offset).unwrap_or(src);
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = before.get(line_start..).map_or(0, |s| s.chars().count()) + 1;
    (line, column)
}

/// The candidate closest to `name`, when it is close enough to be a typo of it.
pub(crate) fn did_you_mean<'a>(
    name: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    candidates
        .into_iter()
        .map(|c| (strsim::jaro_winkler(name, c), c))
        .filter(|(score, _)| *score > 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, c)| c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_become_lines_and_columns_from_one() {
        let src = "a = 1\nbé = 2\n";
        assert_eq!(line_col(src, 0), (1, 1));
        assert_eq!(line_col(src, 4), (1, 5));
        assert_eq!(line_col(src, 6), (2, 1));
        // The column counts characters, not bytes: `é` is two bytes.
        assert_eq!(line_col(src, 10), (2, 4));
        assert_eq!(line_col(src, 999), (3, 1));
    }

    #[test]
    fn a_typo_is_matched_and_a_stranger_is_not() {
        assert_eq!(
            did_you_mean("max_round", ["max_rounds", "max_attempts"]),
            Some("max_rounds")
        );
        assert_eq!(did_you_mean("colour", ["max_rounds", "check"]), None);
    }

    #[test]
    fn a_diagnostic_names_file_line_key_and_rule() {
        let d = Diagnostic {
            file: "corral-sprint.toml".into(),
            line: 3,
            column: 1,
            key: "sprint.max_rounds".into(),
            rule: Rule::OutOfRange,
            message: "is 11; it must be from 1 to 10".into(),
        };
        assert_eq!(
            d.to_string(),
            "corral-sprint.toml:3:1: sprint.max_rounds: is 11; it must be from 1 to 10 [out-of-range]"
        );
    }
}
