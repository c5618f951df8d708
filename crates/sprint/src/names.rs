//! The two names a sprint turns into paths and a branch: the sprint's name and each task's id.
//!
//! Both become one directory name under `.corral/sprints/` (and the sprint's name a part of a
//! git branch), so one rule keeps them to characters that are safe in both: ASCII letters,
//! digits, `.`, `_` and `-`, at most [`NAME_MAX_LEN`] of them, not starting with `.` or `-`,
//! without `..` and not ending in `.lock` (which git refuses in a ref).

use std::fmt;

use serde::{Deserialize, Serialize};

/// The longest sprint name or task id.
pub const NAME_MAX_LEN: usize = 64;

/// Why a string is not a valid sprint name or task id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    /// Nothing at all. Retryable: no.
    #[error("is empty")]
    Empty,
    /// Longer than [`NAME_MAX_LEN`]. Retryable: no.
    #[error("is {0} characters long; at most {NAME_MAX_LEN} are allowed")]
    TooLong(usize),
    /// A character outside the allowed set. Retryable: no.
    #[error("holds {0:?}; only ASCII letters, digits, '.', '_' and '-' are allowed")]
    Forbidden(char),
    /// Starts with `.` or `-` (a hidden directory, an option). Retryable: no.
    #[error("starts with {0:?}")]
    BadStart(char),
    /// Holds `..` or ends in `.lock`, which git refuses in a branch name. Retryable: no.
    #[error("holds {0:?}, which git refuses in a branch name")]
    GitRefused(&'static str),
}

/// Checks `s` against the one rule for sprint names and task ids.
pub fn check_name(s: &str) -> Result<(), NameError> {
    let Some(first) = s.chars().next() else {
        return Err(NameError::Empty);
    };
    let len = s.chars().count();
    if len > NAME_MAX_LEN {
        return Err(NameError::TooLong(len));
    }
    if let Some(bad) = s
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return Err(NameError::Forbidden(bad));
    }
    if matches!(first, '.' | '-') {
        return Err(NameError::BadStart(first));
    }
    if s.contains("..") {
        return Err(NameError::GitRefused(".."));
    }
    if s.ends_with(".lock") {
        return Err(NameError::GitRefused(".lock"));
    }
    Ok(())
}

macro_rules! name_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(try_from = "String", into = "String")]
        pub struct $name(String);

        /// In a JSON Schema the name is a string; its rule is [`check_name`]'s.
        impl schemars::JsonSchema for $name {
            fn schema_name() -> std::borrow::Cow<'static, str> {
                stringify!($name).into()
            }

            fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
                String::json_schema(generator)
            }
        }

        impl $name {
            /// Validates `s` (see [`check_name`]).
            pub fn new(s: impl Into<String>) -> Result<Self, NameError> {
                let s = s.into();
                check_name(&s)?;
                Ok(Self(s))
            }

            /// The name as written.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl TryFrom<String> for $name {
            type Error = NameError;
            fn try_from(s: String) -> Result<Self, NameError> {
                Self::new(s)
            }
        }

        impl From<$name> for String {
            fn from(n: $name) -> String {
                n.0
            }
        }
    };
}

name_type!(
    /// A sprint's name: its state directory `.corral/sprints/<name>/` and its default branch
    /// `corral/<name>`.
    SprintName
);

name_type!(
    /// A task's id: its directory `implement/<id>/` and the name `depends_on` refers to it by.
    TaskId
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_safe_as_a_directory_and_a_branch_are_accepted() {
        let longest = "x".repeat(NAME_MAX_LEN);
        for ok in ["a", "api-v2", "Task_1.2", longest.as_str()] {
            assert_eq!(check_name(ok), Ok(()), "{ok}");
        }
    }

    #[test]
    fn each_rule_has_its_own_error() {
        assert_eq!(check_name(""), Err(NameError::Empty));
        assert_eq!(
            check_name(&"x".repeat(NAME_MAX_LEN + 1)),
            Err(NameError::TooLong(NAME_MAX_LEN + 1))
        );
        assert_eq!(check_name("a/b"), Err(NameError::Forbidden('/')));
        assert_eq!(check_name("a b"), Err(NameError::Forbidden(' ')));
        assert_eq!(check_name("-rf"), Err(NameError::BadStart('-')));
        assert_eq!(check_name(".git"), Err(NameError::BadStart('.')));
        assert_eq!(check_name("a..b"), Err(NameError::GitRefused("..")));
        assert_eq!(check_name("main.lock"), Err(NameError::GitRefused(".lock")));
    }

    #[test]
    fn a_bad_name_in_json_is_refused() {
        assert!(serde_json::from_str::<TaskId>("\"../x\"").is_err());
        let id: TaskId = serde_json::from_str("\"ok\"").unwrap();
        assert_eq!(id.as_str(), "ok");
    }
}
