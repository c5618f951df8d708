//! Whether two sets of path globs (a task's `touches`, the paths a round changed) may name a
//! path in common: what keeps two tasks of a parallel run apart. Erring towards "they may":
//! two tasks kept apart that need not be cost time; two run together that conflict cost a
//! round.

use crate::flow::glob_matches;

/// The first pair of `a` and `b` that may match a path in common, as text
/// (`` `src/**` and `src/lib.rs` ``); `None` when none can.
pub(crate) fn overlap(a: &[String], b: &[String]) -> Option<String> {
    a.iter().find_map(|x| {
        b.iter()
            .find(|y| globs_meet(x, y))
            .map(|y| format!("`{x}` and `{y}`"))
    })
}

/// Whether globs `a` and `b` may both match one path. Exact for two plain paths and for a glob
/// against a plain path; for two globs, whether their fixed starts and fixed ends agree (a path
/// both match starts with both starts and ends with both ends), which may say yes where no
/// path exists.
pub(crate) fn globs_meet(a: &str, b: &str) -> bool {
    let (a, b) = (normal(a), normal(b));
    match (is_plain(&a), is_plain(&b)) {
        (true, true) => a == b,
        (true, false) => glob_matches(&b, &a),
        (false, true) => glob_matches(&a, &b),
        (false, false) => {
            let (sa, sb) = (fixed_start(&a), fixed_start(&b));
            let (ea, eb) = (fixed_end(&a), fixed_end(&b));
            (sa.starts_with(sb) || sb.starts_with(sa)) && (ea.ends_with(eb) || eb.ends_with(ea))
        }
    }
}

/// `./x` as `x`; a directory `d/` as everything below it.
fn normal(glob: &str) -> String {
    let glob = glob.trim_start_matches("./");
    match glob.strip_suffix('/') {
        Some(dir) => format!("{dir}/**"),
        None => glob.to_string(),
    }
}

fn is_wild(c: char) -> bool {
    matches!(c, '*' | '?' | '[')
}

fn is_plain(glob: &str) -> bool {
    !glob.contains(is_wild)
}

/// What comes before the first wildcard.
fn fixed_start(glob: &str) -> &str {
    glob.find(is_wild)
        .map_or(glob, |i| glob.get(..i).unwrap_or(glob))
}

/// What comes after the last wildcard (after a `[...]` class, after its `]`).
fn fixed_end(glob: &str) -> &str {
    let after = glob.rfind(|c| is_wild(c) || c == ']').map_or(0, |i| i + 1);
    glob.get(after..).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_and_globs_meet_only_where_a_path_could_be_both() {
        assert!(globs_meet("README", "README"));
        assert!(!globs_meet("README", "LICENSE"));
        assert!(globs_meet("src/", "src/lib.rs"));
        assert!(globs_meet("src/**", "src/a/b.rs"));
        assert!(globs_meet("src/*.rs", "src/**"));
        assert!(!globs_meet("docs/*.md", "src/*.rs"));
        assert!(!globs_meet("*.md", "src/*.rs"));
        assert!(globs_meet("**/*.rs", "crates/x/src/lib.rs"));
        assert!(!globs_meet("crates/a/**", "crates/b/**"));
        assert_eq!(
            overlap(&["a/**".to_string()], &["b".to_string(), "a/x".to_string()]),
            Some("`a/**` and `a/x`".to_string())
        );
        assert_eq!(overlap(&[], &["a".to_string()]), None);
    }
}
