//! The small field rules garde's built-in rules do not cover, shared by the signal payloads.
//!
//! Each is a garde custom validator: `fn(&value, &()) -> garde::Result`. Messages are written
//! for the agent that will read them in a corrective prompt.

/// A required text must contain something other than whitespace.
pub(crate) fn non_blank(value: &str, _ctx: &()) -> garde::Result {
    if value.trim().is_empty() {
        Err(garde::Error::new("must not be empty or only whitespace"))
    } else {
        Ok(())
    }
}

/// A text that must fit on one line (a commit subject, a title).
pub(crate) fn single_line(value: &str, _ctx: &()) -> garde::Result {
    if value.contains(['\n', '\r']) {
        Err(garde::Error::new("must be a single line (no line breaks)"))
    } else {
        Ok(())
    }
}

/// A text of at most `max` characters (Unicode scalar values, as JSON Schema's `maxLength`).
pub(crate) fn max_chars(max: usize) -> impl FnOnce(&str, &()) -> garde::Result {
    move |value, _ctx| {
        let count = value.chars().count();
        if count > max {
            Err(garde::Error::new(format!(
                "must be at most {max} characters long (it is {count})"
            )))
        } else {
            Ok(())
        }
    }
}

/// A path prefix relative to the repository root: not absolute, no `..` component. The empty
/// prefix means "the whole repository".
pub(crate) fn relative_path_prefix(value: &str, _ctx: &()) -> garde::Result {
    let looks_absolute =
        value.starts_with('/') || value.starts_with('\\') || value.as_bytes().get(1) == Some(&b':');
    if looks_absolute {
        return Err(garde::Error::new(
            "must be relative to the repository root (not an absolute path)",
        ));
    }
    if value.split(['/', '\\']).any(|part| part == "..") {
        return Err(garde::Error::new("must not contain a `..` component"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{non_blank, relative_path_prefix, single_line};

    #[test]
    fn non_blank_refuses_whitespace() {
        assert!(non_blank("x", &()).is_ok());
        assert!(non_blank("", &()).is_err());
        assert!(non_blank(" \n\t", &()).is_err());
    }

    #[test]
    fn single_line_refuses_breaks() {
        assert!(single_line("fix: a thing", &()).is_ok());
        assert!(single_line("a\nb", &()).is_err());
        assert!(single_line("a\r", &()).is_err());
    }

    #[test]
    fn path_prefix_must_be_relative_and_inside() {
        for ok in ["", "crates/engine", "crates/engine/", "docs", "a..b/c"] {
            assert!(relative_path_prefix(ok, &()).is_ok(), "{ok}");
        }
        for bad in ["/etc", "\\x", "C:\\x", "../x", "a/../../b", "a\\..\\b"] {
            assert!(relative_path_prefix(bad, &()).is_err(), "{bad}");
        }
    }
}
