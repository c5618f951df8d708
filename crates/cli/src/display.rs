//! How Corral shows a time, a duration and text in a column, one way each, for every view
//! (`corral run`'s live and plain output, `runs`, `sprint run` and `sprint status`, `doctor`).
//!
//! - A time is shown in the local zone with its abbreviation and the year,
//!   `2026-12-07 02:35:10 CET` (the zone from `TZ`, else the system's; jiff reads both). The
//!   records and every `--json` keep RFC 3339 in UTC: only what a person reads is local.
//! - A duration is `0.4s` under ten seconds, `42s` under a minute, `2m 5s` under an hour,
//!   `1h 2m` beyond (jiff's friendly format, rounded to what a person can use).
//! - Widths are display widths (unicode-width): a CJK character or an emoji takes two columns,
//!   a combining mark none. Text is cut to a width, never to a count of characters.
//! - The terminal's width is read from stderr (the terminal the status line is drawn on), else
//!   from `COLUMNS`.

use std::io::IsTerminal;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime};

use jiff::fmt::friendly::{Designator, FractionalUnit, Spacing, SpanPrinter};
use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp};
use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};

/// What marks text cut short (one column wide).
const ELLIPSIS: char = '…';

/// `at` in the local zone: `2026-12-07 02:35:10 CET`.
pub(crate) fn time(at: Timestamp) -> String {
    time_in(at, TimeZone::system())
}

fn time_in(at: Timestamp, zone: TimeZone) -> String {
    at.to_zoned(zone)
        .strftime("%Y-%m-%d %H:%M:%S %Z")
        .to_string()
}

/// A time a record holds as RFC 3339, shown as [`time`] shows it; text that is not such a time
/// (a record written by something else) is shown as it is.
pub(crate) fn recorded_time(rfc3339: &str) -> String {
    match rfc3339.trim().parse::<Timestamp>() {
        Ok(at) => time(at),
        Err(_) => rfc3339.to_string(),
    }
}

/// A system time, shown as [`time`] shows it (one before 1970 or past 9999 as `-`).
pub(crate) fn system_time(at: SystemTime) -> String {
    Timestamp::try_from(at).map_or_else(|_| "-".to_string(), time)
}

/// `d` for a person: `0.4s`, `42s`, `2m 5s`, `1h 2m`.
pub(crate) fn duration(d: Duration) -> String {
    let printer = SpanPrinter::new()
        .designator(Designator::Compact)
        .spacing(Spacing::BetweenUnits);
    // Tenths below ten seconds, where they tell something; whole seconds to a minute.
    let tenths = (d.as_millis() + 50) / 100;
    if tenths < 100 {
        return format!("{}.{}s", tenths / 10, tenths % 10);
    }
    let secs = (d.as_millis() + 500) / 1000;
    let secs = u64::try_from(secs).unwrap_or(u64::MAX);
    let rounded = if secs < 3600 {
        SignedDuration::from_secs(i64::try_from(secs).unwrap_or(i64::MAX))
    } else {
        SignedDuration::from_mins(i64::try_from(secs / 60).unwrap_or(i64::MAX / 60))
    };
    printer
        .fractional(None::<FractionalUnit>)
        .hours_minutes_seconds(false)
        .duration_to_string(&rounded)
}

/// Milliseconds as a record holds them, shown as [`duration`] shows a duration.
pub(crate) fn duration_ms(ms: u64) -> String {
    duration(Duration::from_millis(ms))
}

/// How many columns `text` takes on a terminal.
pub(crate) fn width(text: &str) -> usize {
    text.width()
}

/// `text` in at most `max` columns, cut at the end with `…` when it is wider.
pub(crate) fn cut(text: &str, max: usize) -> String {
    if max == 0 {
        return String::new();
    }
    // Walks no further than the limit: a flood's kilobyte lines are cut early.
    let mut used = 0;
    for c in text.chars() {
        used += c.width().unwrap_or(0);
        if used > max {
            let keep = keep_within(text, max - 1);
            return format!("{}{ELLIPSIS}", &text[..keep]);
        }
    }
    text.to_string()
}

/// The byte length of the longest start of `text` that fits in `max` columns.
fn keep_within(text: &str, max: usize) -> usize {
    let mut used = 0;
    for (at, c) in text.char_indices() {
        let w = c.width().unwrap_or(0);
        if used + w > max {
            return at;
        }
        used += w;
    }
    text.len()
}

/// `path` in at most `max` columns, cut at the front so that the file name stays: a long path's
/// end says which file, its start rarely does. The kept part starts at a `/` when it can, so no
/// directory name is half shown.
pub(crate) fn cut_front(path: &str, max: usize) -> String {
    if width(path) <= max {
        return path.to_string();
    }
    if max == 0 {
        return String::new();
    }
    // The longest end of the path that fits beside the ellipsis.
    let budget = max - 1;
    let mut used = 0;
    let mut start = path.len();
    for (at, c) in path.char_indices().rev() {
        let w = c.width().unwrap_or(0);
        if used + w > budget {
            break;
        }
        used += w;
        start = at;
    }
    let tail = &path[start..];
    let tail = match tail.find('/') {
        Some(at) if at + 1 < tail.len() => &tail[at..],
        _ => tail,
    };
    format!("{ELLIPSIS}{tail}")
}

/// The fewest columns the last column of a fitted table is cut to: below that, the line is
/// let overflow rather than leave the column unreadable.
const LAST_COLUMN_MIN: usize = 16;

/// Rows in columns, as every list Corral prints them: two spaces between columns, the columns
/// in `right` aligned right, each column as wide as its widest cell by display width (comfy-table
/// measures as unicode-width does). Given a width (`fit`), the last column gets what the others
/// leave (at least [`LAST_COLUMN_MIN`]) and its cells are cut with `…`. Lines come without
/// trailing blanks.
pub(crate) fn table(
    header: Option<&[&str]>,
    right: &[usize],
    mut rows: Vec<Vec<String>>,
    fit: Option<usize>,
) -> Vec<String> {
    use comfy_table::{CellAlignment, Table, presets::NOTHING};
    if let Some(fit) = fit {
        fit_last_column(header, &mut rows, fit);
    }
    let mut table = Table::new();
    table.load_style(NOTHING);
    if let Some(header) = header {
        table.set_header(header.to_vec());
    }
    table.add_rows(rows);
    let count = table.column_count();
    for at in 0..count {
        let last = at + 1 == count;
        if let Some(column) = table.column_mut(at) {
            column.set_padding((0, if last { 0 } else { 2 }));
            if right.contains(&at) {
                column.set_cell_alignment(CellAlignment::Right);
            }
        }
    }
    table.lines().map(|l| l.trim_end().to_string()).collect()
}

/// Cuts the last cell of each row to the columns the others leave of `fit`.
fn fit_last_column(header: Option<&[&str]>, rows: &mut [Vec<String>], fit: usize) {
    let count = rows.iter().map(Vec::len).max().unwrap_or(0);
    if count == 0 {
        return;
    }
    let column_width = |at: usize| {
        let cells = rows.iter().filter_map(|r| r.get(at)).map(|c| width(c));
        let head = header.and_then(|h| h.get(at)).map_or(0, |h| width(h));
        cells.chain(std::iter::once(head)).max().unwrap_or(0)
    };
    let others: usize = (0..count - 1).map(|at| column_width(at) + 2).sum();
    let room = fit.saturating_sub(others).max(LAST_COLUMN_MIN);
    for row in rows.iter_mut() {
        if row.len() == count
            && let Some(last) = row.last_mut()
        {
            *last = cut(last, room);
        }
    }
}

/// The width of the terminal on stderr (where the status line and the event lines go), else
/// `COLUMNS`, else `None` (output to a file or a pipe, with no width asked for).
///
/// Asked once per line by the renderers, so it is cheap: whether stderr is a terminal and
/// `COLUMNS` are read once per process, and a terminal's size at most every
/// [`WIDTH_TTL`] (a resize shows from the next line after). Asking the kernel on every line
/// cost four failing `ioctl`s a line when stderr was a file: 800 000 in a 200 000-line flood,
/// a third of `corral run`'s CPU time.
pub(crate) fn terminal_width() -> Option<usize> {
    static STDERR_IS_TERMINAL: OnceLock<bool> = OnceLock::new();
    static COLUMNS: OnceLock<Option<usize>> = OnceLock::new();
    static ASKED: Mutex<Option<(Instant, Option<usize>)>> = Mutex::new(None);
    let from_env = || *COLUMNS.get_or_init(columns);
    if !*STDERR_IS_TERMINAL.get_or_init(|| std::io::stderr().is_terminal()) {
        return from_env();
    }
    let ask = || {
        console::Term::stderr()
            .size_checked()
            .map(|(_rows, cols)| usize::from(cols))
            .filter(|w| *w > 0)
            .or_else(from_env)
    };
    let Ok(mut asked) = ASKED.lock() else {
        return ask();
    };
    match *asked {
        Some((at, width)) if at.elapsed() < WIDTH_TTL => width,
        Some(_) | None => {
            let width = ask();
            *asked = Some((Instant::now(), width));
            width
        }
    }
}

/// How long a terminal's width asked of the kernel is taken as still true.
const WIDTH_TTL: Duration = Duration::from_millis(250);

/// `COLUMNS`, when it holds a width.
fn columns() -> Option<usize> {
    std::env::var("COLUMNS")
        .ok()?
        .trim()
        .parse::<usize>()
        .ok()
        .filter(|w| *w > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_time_is_local_with_its_zone_and_year() {
        let at: Timestamp = "2026-12-07T01:35:10.123Z".parse().unwrap();
        let berlin = TimeZone::posix("CET-1CEST,M3.5.0,M10.5.0/3").unwrap();
        assert_eq!(time_in(at, berlin.clone()), "2026-12-07 02:35:10 CET");
        let summer: Timestamp = "2026-07-01T12:00:00Z".parse().unwrap();
        assert_eq!(time_in(summer, berlin), "2026-07-01 14:00:00 CEST");
        assert_eq!(time_in(at, TimeZone::UTC), "2026-12-07 01:35:10 UTC");
        assert_eq!(recorded_time("not a time"), "not a time");
    }

    #[test]
    fn a_table_aligns_wide_text_by_display_width() {
        let rows = vec![
            vec!["a".to_string(), "1".to_string(), "plain".to_string()],
            vec![
                "日本語".to_string(),
                "22".to_string(),
                "🦀 crab".to_string(),
            ],
            vec!["ok".to_string(), "333".to_string(), "x".repeat(50)],
        ];
        let lines = table(Some(&["name", "n", "text"]), &[1], rows.clone(), None);
        assert_eq!(
            lines,
            [
                "name      n  text".to_string(),
                "a         1  plain".to_string(),
                "日本語   22  🦀 crab".to_string(),
                format!("ok      333  {}", "x".repeat(50)),
            ]
        );
        let fitted = table(None, &[1], rows.clone(), Some(30));
        for line in &fitted {
            assert!(width(line) <= 30, "{line}");
        }
        assert!(fitted[2].ends_with('…'), "{fitted:?}");
        // Too narrow for the rest: the last column keeps a readable start, and the line runs on.
        let narrow = table(Some(&["name", "n", "text"]), &[1], rows, Some(10));
        assert_eq!(narrow[0], "name      n  text");
        assert_eq!(
            narrow[3],
            format!("ok      333  {}…", "x".repeat(LAST_COLUMN_MIN - 1))
        );
    }

    #[test]
    fn durations_are_shown_one_way() {
        let cases = [
            (Duration::from_millis(0), "0.0s"),
            (Duration::from_millis(400), "0.4s"),
            (Duration::from_millis(9_849), "9.8s"),
            (Duration::from_millis(9_960), "10s"),
            (Duration::from_millis(16_849), "17s"),
            (Duration::from_millis(59_600), "1m"),
            (Duration::from_secs(125), "2m 5s"),
            (Duration::from_secs(3599), "59m 59s"),
            (Duration::from_secs(3600 + 125), "1h 2m"),
            (Duration::from_secs(50 * 3600), "50h"),
        ];
        for (d, shown) in cases {
            assert_eq!(duration(d), shown, "{d:?}");
        }
    }

    #[test]
    fn wide_characters_take_two_columns() {
        assert_eq!(width("abc"), 3);
        assert_eq!(width("日本語"), 6);
        assert_eq!(width("🦀 ok"), 5);
        assert_eq!(width("e\u{301}"), 1);
        assert_eq!(cut("日本語のテキスト", 7), "日本語…");
        assert_eq!(width(&cut("日本語のテキスト", 7)), 7);
        assert_eq!(cut("🦀🦀🦀", 4), "🦀…");
        assert_eq!(cut("short", 10), "short");
        assert_eq!(cut("exactly10!", 10), "exactly10!");
        assert_eq!(cut("eleven cols", 10), "eleven co…");
    }

    #[test]
    fn a_cut_path_keeps_its_file_name() {
        let path = "/home/someone/プロジェクト/crates/cli/src/deeply/nested/render_status.rs";
        let shown = cut_front(path, 40);
        assert!(width(&shown) <= 40, "{shown}");
        assert!(shown.starts_with("…/"), "{shown}");
        assert!(shown.ends_with("/render_status.rs"), "{shown}");
        assert_eq!(cut_front("src/main.rs", 40), "src/main.rs");
    }
}
