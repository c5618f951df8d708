//! Where a key is written in a settings file, for errors that point at it as
//! `file:line:column` with the line itself, as `corral sprint check` does for the sprint file.
//!
//! figment keeps where a value came from (the file) but not where in it, so the file's text is
//! parsed again with toml_edit, which keeps spans, and the key's path is followed in it.

use toml_edit::{ImDocument, TableLike};

/// Where the key at `path` (or, past a table that is not there, the deepest one that is) is
/// written in the TOML `text`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Spot {
    /// From 1.
    pub line: usize,
    /// From 1, in characters.
    pub column: usize,
    /// The line as written, without its end.
    pub text: String,
}

/// The spot of `path` in `text`; `None` when the text does not parse or nothing of the path is
/// in it (a value from a default merged under the file's).
pub(crate) fn locate(text: &str, path: &[String]) -> Option<Spot> {
    let doc = ImDocument::parse(text).ok()?;
    let mut table: &dyn TableLike = doc.as_table();
    let mut span = None;
    for key in path {
        let Some((k, item)) = table.get_key_value(key) else {
            break;
        };
        span = k.span().or_else(|| item.span()).or(span);
        match item.as_table_like() {
            Some(inner) => table = inner,
            None => break,
        }
    }
    let offset = span?.start.min(text.len());
    let before = text.get(..offset)?;
    let line = before.matches('\n').count() + 1;
    let start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = before.get(start..).map_or(0, |s| s.chars().count()) + 1;
    let rest = text.get(start..)?;
    let text = rest.lines().next().unwrap_or_default().to_string();
    Some(Spot { line, column, text })
}

/// `line` with its control characters shown as escapes: a quoted line of a file that came with
/// a repository must not drive the terminal.
pub(crate) fn inert(line: &str) -> String {
    line.chars()
        .flat_map(|c| {
            if c.is_control() && c != '\t' {
                c.escape_default().collect::<Vec<char>>()
            } else {
                vec![c]
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(keys: &[&str]) -> Vec<String> {
        keys.iter().map(|k| (*k).to_string()).collect()
    }

    #[test]
    fn a_key_is_found_through_its_tables() {
        let text = "[run]\nprovider = \"claude\"\n  idle_watchdog_ms = \"5x\"\n";
        let spot = locate(text, &path(&["run", "idle_watchdog_ms"])).unwrap();
        assert_eq!((spot.line, spot.column), (3, 3));
        assert_eq!(spot.text, "  idle_watchdog_ms = \"5x\"");
        let spot = locate(text, &path(&["sandbx"]));
        assert_eq!(spot, None);
        let dotted = "run.provider = \"x\"\n";
        let spot = locate(dotted, &path(&["run", "provider"])).unwrap();
        assert_eq!((spot.line, spot.column), (1, 5));
    }
}
