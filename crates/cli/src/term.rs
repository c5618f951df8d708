//! Writing to the terminal: what the agent controls is made inert, and a closed stdout or stderr
//! never ends the program.
//!
//! Agent text reaches the screen in many places: the live view, plain mode, the summary, `runs
//! follow`, `runs list` and `runs show` (from `run.json` fields and file names the agent can
//! write), error messages that quote what it wrote. A terminal obeys control sequences in any of
//! them: OSC 0 and 52 set the title and the clipboard, `CSI 2J` clears the screen, `CSI 6n` makes
//! the terminal type an answer into the shell after `corral` exits, `\r` overwrites a line, bidi
//! overrides reorder what is shown. So every line this crate prints goes through [`sanitize`]:
//! C0 controls (but `\n` and `\t`) and DEL become their visible Unicode pictures (`␛`, `␍`), C1
//! controls and bidi controls become `�`. The live view's status line (indicatif's) is given
//! text that was sanitized the same way. JSON output escapes the same characters
//! as `\uXXXX`, so the data is unchanged for a parser and inert on a screen.
//!
//! `println!` panics when stdout is closed (`corral run … | head -1`), which would lose the run's
//! exit code and skip the cleanup; [`out`] and [`err`] drop what cannot be written instead.

use std::borrow::Cow;
use std::fmt;
use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};

/// Set once stdout refused a write (closed pipe): nothing more is sent there.
static STDOUT_GONE: AtomicBool = AtomicBool::new(false);
/// Set once stderr refused a write.
static STDERR_GONE: AtomicBool = AtomicBool::new(false);

/// Whether `c` could move the cursor, change the terminal's state or reorder text.
fn is_hostile(c: char) -> bool {
    matches!(c,
        '\u{0}'..='\u{8}' | '\u{b}'..='\u{1f}' | '\u{7f}'
        | '\u{80}'..='\u{9f}'
        // Bidi embeddings, overrides and isolates (the "Trojan Source" characters).
        | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// The visible stand-in for a hostile character.
fn picture(c: char) -> char {
    match c {
        '\u{0}'..='\u{1f}' => char::from_u32(0x2400 + u32::from(c)).unwrap_or('\u{fffd}'),
        '\u{7f}' => '\u{2421}',
        _ => '\u{fffd}',
    }
}

/// `text` with every control character but `\n` and `\t` replaced by a visible stand-in.
pub fn sanitize(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_hostile) {
        return Cow::Borrowed(text);
    }
    Cow::Owned(
        text.chars()
            .map(|c| if is_hostile(c) { picture(c) } else { c })
            .collect(),
    )
}

/// `text` on one line: as [`sanitize`], and line breaks and tabs shown as `␊` and `␉` too, for a
/// field that must not start a line of its own (a forged "outcome succeeded" line, say).
pub fn one_line(text: &str) -> String {
    text.chars()
        .map(|c| {
            if is_hostile(c) || c == '\n' || c == '\t' {
                picture(c)
            } else {
                c
            }
        })
        .collect()
}

fn write_to(stream: &mut dyn Write, gone: &AtomicBool, text: &str) {
    if gone.load(Ordering::Relaxed) {
        return;
    }
    if stream
        .write_all(text.as_bytes())
        .and_then(|()| stream.flush())
        .is_err()
    {
        gone.store(true, Ordering::Relaxed);
    }
}

/// Writes one sanitized line to stdout; a closed stdout is remembered, not fatal.
pub fn out(args: fmt::Arguments<'_>) {
    let text = format!("{}\n", sanitize(&args.to_string()));
    write_to(&mut io::stdout().lock(), &STDOUT_GONE, &text);
}

/// Writes one sanitized line to stderr; a closed stderr is remembered, not fatal.
pub fn err(args: fmt::Arguments<'_>) {
    let text = format!("{}\n", sanitize(&args.to_string()));
    write_to(&mut io::stderr().lock(), &STDERR_GONE, &text);
}

/// Prints a sanitized line on stdout (see [`out`]).
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::term::out(format_args!($($arg)*))
    };
}

/// Prints a sanitized line on stderr (see [`err`]).
macro_rules! errln {
    ($($arg:tt)*) => {
        $crate::term::err(format_args!($($arg)*))
    };
}

pub(crate) use {errln, outln};

/// A JSON formatter that writes C1 and bidi controls in strings as `\uXXXX` escapes (serde_json
/// already escapes C0 and DEL is harmless in JSON only if escaped too): the same data for a
/// parser, nothing a terminal acts on.
struct InertFormatter<F>(F);

impl<F: serde_json::ser::Formatter> serde_json::ser::Formatter for InertFormatter<F> {
    fn write_string_fragment<W: ?Sized + Write>(
        &mut self,
        writer: &mut W,
        fragment: &str,
    ) -> io::Result<()> {
        let mut rest = fragment;
        while let Some(at) = rest.find(is_hostile) {
            writer.write_all(&rest.as_bytes()[..at])?;
            let c = rest[at..].chars().next().unwrap_or('\u{fffd}');
            write!(writer, "\\u{:04x}", u32::from(c))?;
            rest = &rest[at + c.len_utf8()..];
        }
        writer.write_all(rest.as_bytes())
    }

    fn begin_array<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.begin_array(w)
    }
    fn end_array<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_array(w)
    }
    fn begin_array_value<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        self.0.begin_array_value(w, first)
    }
    fn end_array_value<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_array_value(w)
    }
    fn begin_object<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.begin_object(w)
    }
    fn end_object<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_object(w)
    }
    fn begin_object_key<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        self.0.begin_object_key(w, first)
    }
    fn end_object_key<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_object_key(w)
    }
    fn begin_object_value<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.begin_object_value(w)
    }
    fn end_object_value<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_object_value(w)
    }
}

fn json_with<F: serde_json::ser::Formatter>(
    value: &impl serde::Serialize,
    formatter: F,
) -> serde_json::Result<String> {
    let mut bytes = Vec::new();
    let mut serializer =
        serde_json::Serializer::with_formatter(&mut bytes, InertFormatter(formatter));
    value.serialize(&mut serializer)?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// `value` as compact JSON, terminal-safe (see [`InertFormatter`]).
pub fn json(value: &impl serde::Serialize) -> serde_json::Result<String> {
    json_with(value, serde_json::ser::CompactFormatter)
}

/// `value` as indented JSON, terminal-safe.
pub fn json_pretty(value: &impl serde::Serialize) -> serde_json::Result<String> {
    json_with(value, serde_json::ser::PrettyFormatter::new())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What issue 10 saw an agent print: title, clipboard, clear screen, cursor report, `\r`.
    const HOSTILE: &str =
        "a\x1b]0;owned\x07b\x1b]52;c;Y3VybA==\x07c\x1b[2Jd\x1b[6ne\rf\u{9b}6ng\u{202e}h\u{7f}";

    #[test]
    fn controls_become_visible_and_inert() {
        let clean = sanitize(HOSTILE);
        assert!(!clean.chars().any(is_hostile), "{clean:?}");
        assert_eq!(
            clean,
            "a␛]0;owned␇b␛]52;c;Y3VybA==␇c␛[2Jd␛[6ne␍f\u{fffd}6ng\u{fffd}h␡"
        );
        assert_eq!(sanitize("plain\ttext\nnext"), "plain\ttext\nnext");
        assert!(matches!(sanitize("naïve — ünïcode"), Cow::Borrowed(_)));
        assert_eq!(
            one_line("done\noutcome   succeeded"),
            "done␊outcome   succeeded"
        );
    }

    #[test]
    fn json_escapes_them_and_keeps_the_data() {
        let value = serde_json::json!({"text": HOSTILE, "plain": "ok é"});
        for text in [json(&value).unwrap(), json_pretty(&value).unwrap()] {
            assert!(!text.chars().any(is_hostile), "{text:?}");
            assert!(
                text.contains("\\u009b") && text.contains("\\u202e"),
                "{text}"
            );
            let back: serde_json::Value = serde_json::from_str(&text).unwrap();
            assert_eq!(back, value);
        }
    }
}
