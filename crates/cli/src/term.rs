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
//!
//! The run renderer's event lines go through [`out_soon`] and [`err_soon`]: they are held back
//! for at most 10 ms (or 64 KiB) and written together, one write for a batch of events instead
//! of one per event. Any other line, and [`flush`] at the end of `main`, writes what is held
//! first, so nothing is reordered on a stream or lost at exit.

use std::borrow::Cow;
use std::fmt;
use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::{Duration, Instant};

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

/// Whether byte `b` may begin a hostile character: a C0 control or DEL, or the lead byte of the
/// UTF-8 form of a C1 control (`0xC2`) or of a bidi control (`0xE2`). Every other byte starts a
/// character [`is_hostile`] lets through, so text without these bytes needs no look at its
/// characters.
const fn may_be_hostile(b: u8) -> bool {
    b < 0x20 || b == 0x7f || b == 0xc2 || b == 0xe2
}

/// The offset of the first character of `text` for which `hostile` holds. Text is scanned a
/// block of bytes at a time for a byte that may start one ([`may_be_hostile`]; a flood of agent
/// text has none), and only from such a byte on character by character.
fn find_hostile(text: &str, hostile: impl Fn(char) -> bool) -> Option<usize> {
    const BLOCK: usize = 32;
    let bytes = text.as_bytes();
    let mut from = 0;
    while from < bytes.len() {
        let end = (from + BLOCK).min(bytes.len());
        // No early exit inside the block, so the check is branch-free and vectorises.
        let suspect = bytes[from..end]
            .iter()
            .fold(false, |seen, &b| seen | may_be_hostile(b));
        if !suspect {
            from = end;
            continue;
        }
        // `at` is a character boundary even when a block ended inside a character: every byte
        // that may be hostile is ASCII or a lead byte.
        let at = from + bytes[from..end].iter().position(|&b| may_be_hostile(b))?;
        let c = text[at..].chars().next()?;
        if hostile(c) {
            return Some(at);
        }
        from = at + c.len_utf8();
    }
    None
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
    let Some(at) = find_hostile(text, is_hostile) else {
        return Cow::Borrowed(text);
    };
    let mut clean = String::with_capacity(text.len() + 8);
    clean.push_str(&text[..at]);
    clean.extend(
        text[at..]
            .chars()
            .map(|c| if is_hostile(c) { picture(c) } else { c }),
    );
    Cow::Owned(clean)
}

/// `text` on one line: as [`sanitize`], and line breaks and tabs shown as `␊` and `␉` too, for a
/// field that must not start a line of its own (a forged "outcome succeeded" line, say).
pub fn one_line(text: &str) -> String {
    let breaks = |c: char| is_hostile(c) || c == '\n' || c == '\t';
    let Some(at) = find_hostile(text, breaks) else {
        return text.to_owned();
    };
    let mut clean = String::with_capacity(text.len() + 8);
    clean.push_str(&text[..at]);
    clean.extend(
        text[at..]
            .chars()
            .map(|c| if breaks(c) { picture(c) } else { c }),
    );
    clean
}

/// At most this much output is held back before it is written at once.
const HOLD_MAX: usize = 64 * 1024;
/// Held output is written at the latest this long after its first line was held.
const HOLD_FOR: Duration = Duration::from_millis(10);
/// When this much is held while the flusher is still writing an earlier batch (a slow reader),
/// the line's own writer writes it all itself, waiting for the reader: what is held in memory
/// stays bounded, and a flood slows to the reader's pace instead of growing.
const HOLD_BEHIND: usize = 4 * HOLD_MAX;

/// Output the run renderer holds back so that a flood of events costs one write per batch, not
/// one per line. Every line written now ([`out`], [`err`], [`flush`]) first writes what is held,
/// so the order on each stream is kept.
#[derive(Debug)]
struct Held {
    out: Vec<u8>,
    err: Vec<u8>,
    /// Emptied buffers from the last write, reused by the next batch so that a flood does not
    /// allocate one per batch.
    spare_out: Vec<u8>,
    spare_err: Vec<u8>,
}

impl Held {
    fn is_empty(&self) -> bool {
        self.out.is_empty() && self.err.is_empty()
    }

    fn len(&self) -> usize {
        self.out.len() + self.err.len()
    }

    /// Takes what is held, leaving the spare buffers in its place.
    fn take(&mut self) -> Batch {
        Batch {
            out: std::mem::replace(&mut self.out, std::mem::take(&mut self.spare_out)),
            err: std::mem::replace(&mut self.err, std::mem::take(&mut self.spare_err)),
        }
    }

    /// Keeps a written batch's buffers for the next one.
    fn give_back(&mut self, batch: Batch) {
        if self.spare_out.capacity() < batch.out.capacity() {
            self.spare_out = batch.out;
        }
        if self.spare_err.capacity() < batch.err.capacity() {
            self.spare_err = batch.err;
        }
    }
}

/// Output taken from [`Held`] to be written, outside the lock that producers append under.
#[derive(Debug)]
struct Batch {
    out: Vec<u8>,
    err: Vec<u8>,
}

impl Batch {
    /// Writes the batch to the two streams, stdout first, and empties it.
    fn write(&mut self, out: &mut dyn Write, err: &mut dyn Write) {
        if !self.out.is_empty() {
            write_to(out, &STDOUT_GONE, &self.out);
            self.out.clear();
        }
        if !self.err.is_empty() {
            write_to(err, &STDERR_GONE, &self.err);
            self.err.clear();
        }
    }
}

static HELD: Mutex<Held> = Mutex::new(Held {
    out: Vec::new(),
    err: Vec::new(),
    spare_out: Vec::new(),
    spare_err: Vec::new(),
});
/// Held by whoever writes a batch, from taking it out of [`HELD`] until it is written: batches
/// reach the streams in the order they were taken, whichever thread writes them. Always taken
/// before [`HELD`], never while holding it.
static WRITING: Mutex<()> = Mutex::new(());
/// Wakes the flusher when the first line is held, and when a full batch is.
static WAKE: Condvar = Condvar::new();
/// Whether the flusher thread runs; without it nothing is held.
static FLUSHER: OnceLock<bool> = OnceLock::new();

fn held() -> MutexGuard<'static, Held> {
    HELD.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Writes everything held so far, after any batch another thread is writing.
fn drain_to_std() {
    let _order = WRITING.lock().unwrap_or_else(PoisonError::into_inner);
    let mut batch = held().take();
    if batch.out.is_empty() && batch.err.is_empty() {
        held().give_back(batch);
        return;
    }
    batch.write(&mut io::stdout().lock(), &mut io::stderr().lock());
    held().give_back(batch);
}

/// The thread that writes held output: a full batch at once, anything else at most
/// [`HOLD_FOR`] after it was held, so a live reader (`corral run --json | consumer`) sees every
/// event promptly even when no more follow. A flood's batches are written here, while the
/// engine goes on reading and parsing, not on the engine's thread.
fn flusher_runs() -> bool {
    *FLUSHER.get_or_init(|| {
        std::thread::Builder::new()
            .name("corral-term-flush".into())
            .spawn(|| {
                loop {
                    let mut guard = held();
                    while guard.is_empty() {
                        guard = WAKE.wait(guard).unwrap_or_else(PoisonError::into_inner);
                    }
                    let deadline = Instant::now() + HOLD_FOR;
                    while guard.len() < HOLD_MAX {
                        let now = Instant::now();
                        if now >= deadline {
                            break;
                        }
                        guard = WAKE
                            .wait_timeout(guard, deadline - now)
                            .unwrap_or_else(PoisonError::into_inner)
                            .0;
                    }
                    drop(guard);
                    drain_to_std();
                }
            })
            .is_ok()
    })
}

/// Writes `bytes` to `stream` and flushes it; a refusal (closed pipe) is remembered in `gone`.
fn write_to(stream: &mut dyn Write, gone: &AtomicBool, bytes: &[u8]) {
    if gone.load(Ordering::Relaxed) {
        return;
    }
    if stream
        .write_all(bytes)
        .and_then(|()| stream.flush())
        .is_err()
    {
        gone.store(true, Ordering::Relaxed);
    }
}

/// Which stream a line goes to.
#[derive(Debug, Clone, Copy)]
enum Stream {
    Out,
    Err,
}

fn line(stream: Stream, args: fmt::Arguments<'_>, hold: bool) {
    let mut text = fmt::format(args);
    if let Cow::Owned(clean) = sanitize(&text) {
        text = clean;
    }
    text.push('\n');
    let written: Result<(), std::convert::Infallible> = push(stream, hold, |buf| {
        buf.extend_from_slice(text.as_bytes());
        Ok(())
    });
    let Ok(()) = written;
}

/// Writes `question` (sanitized) on stderr without ending the line, for an answer typed after it
/// (`corral sprint ready`'s y/N).
pub fn err_question(question: &str) {
    let text = sanitize(question).into_owned();
    let written: Result<(), std::convert::Infallible> = push(Stream::Err, false, |buf| {
        buf.extend_from_slice(text.as_bytes());
        Ok(())
    });
    let Ok(()) = written;
}

/// Lets `write` add whole lines (already terminal-safe) to what `stream` holds, straight into
/// the held buffer, and writes it all unless it may be held back. A `write` that fails leaves
/// nothing behind.
fn push<E>(
    stream: Stream,
    hold: bool,
    write: impl FnOnce(&mut Vec<u8>) -> Result<(), E>,
) -> Result<(), E> {
    let mut held = held();
    let before = held.len();
    let buf = match stream {
        Stream::Out => &mut held.out,
        Stream::Err => &mut held.err,
    };
    let start = buf.len();
    let result = write(buf);
    if result.is_err() {
        buf.truncate(start);
    }
    let len = held.len();
    if hold && len < HOLD_BEHIND && flusher_runs() {
        // The flusher waits for the first line held, and then for the hold to pass or a batch
        // to fill: wake it at either.
        if before == 0 || (before < HOLD_MAX && len >= HOLD_MAX) {
            WAKE.notify_one();
        }
        return result;
    }
    drop(held);
    drain_to_std();
    result
}

/// Writes what [`out_soon`] and [`err_soon`] hold back. Called before the program ends; every
/// [`out`] and [`err`] does it too.
pub fn flush() {
    drain_to_std();
}

/// Writes one sanitized line to stdout; a closed stdout is remembered, not fatal.
pub fn out(args: fmt::Arguments<'_>) {
    line(Stream::Out, args, false);
}

/// Writes one sanitized line to stderr; a closed stderr is remembered, not fatal.
pub fn err(args: fmt::Arguments<'_>) {
    line(Stream::Err, args, false);
}

/// As [`out`], but the line may be held back for up to 10 ms (or 64 KiB) and written with the
/// lines that follow it: the run renderer's event lines, where one write per event would cost
/// more than the rest of the path.
pub fn out_soon(args: fmt::Arguments<'_>) {
    line(Stream::Out, args, true);
}

/// As [`err`], held back as [`out_soon`] is.
pub fn err_soon(args: fmt::Arguments<'_>) {
    line(Stream::Err, args, true);
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
        while let Some(at) = find_hostile(rest, is_hostile) {
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

/// `value` as one line of compact JSON on stdout, held back as [`out_soon`] is. Serialised
/// straight into the held output, with no `serde_json::Value` on the way, no second pass and no
/// copy: the [`InertFormatter`] already leaves nothing a terminal acts on.
pub fn json_line_soon(value: &impl serde::Serialize) -> serde_json::Result<()> {
    json_line_soon_with(|buf| {
        let mut serializer = serde_json::Serializer::with_formatter(
            &mut *buf,
            InertFormatter(serde_json::ser::CompactFormatter),
        );
        value.serialize(&mut serializer)
    })
}

/// One line on stdout, held back as [`out_soon`] is, that `write` puts straight into the held
/// output: compact JSON that must be terminal-safe (strings through [`push_inert_json_str`] or
/// the [`InertFormatter`]) and hold no line break. The newline is added here.
pub fn json_line_soon_with(
    write: impl FnOnce(&mut Vec<u8>) -> serde_json::Result<()>,
) -> serde_json::Result<()> {
    push(Stream::Out, true, |buf| {
        write(buf)?;
        buf.push(b'\n');
        Ok(())
    })
}

/// Appends `text` as a JSON string, terminal-safe: the bytes [`json`] gives for it. Text with
/// no byte that JSON escapes and none that may start a hostile character (a flood of agent
/// text) is copied as it is, in one vectorised pass; anything else goes through serde_json and
/// the [`InertFormatter`].
pub fn push_inert_json_str(buf: &mut Vec<u8>, text: &str) -> serde_json::Result<()> {
    // A branch-free fold the compiler vectorises, as in `find_hostile`.
    let plain = !text.as_bytes().iter().fold(false, |seen, &b| {
        seen | may_be_hostile(b) | (b == b'"') | (b == b'\\')
    });
    if plain {
        buf.reserve(text.len() + 2);
        buf.push(b'"');
        buf.extend_from_slice(text.as_bytes());
        buf.push(b'"');
        Ok(())
    } else {
        let mut serializer = serde_json::Serializer::with_formatter(
            &mut *buf,
            InertFormatter(serde_json::ser::CompactFormatter),
        );
        serde::Serialize::serialize(text, &mut serializer)
    }
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

    /// A writer that counts the writes it is asked for.
    #[derive(Default)]
    struct Counting {
        bytes: Vec<u8>,
        writes: usize,
    }

    impl Write for Counting {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.writes += 1;
            self.bytes.extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn held_lines_leave_in_one_write_each_stream_in_order() {
        let mut held = Held {
            out: Vec::new(),
            err: Vec::new(),
            spare_out: Vec::new(),
            spare_err: Vec::new(),
        };
        let mut want_out = Vec::new();
        for i in 0..200 {
            let line = format!("{{\"n\":{i}}}\n");
            held.out.extend_from_slice(line.as_bytes());
            want_out.extend_from_slice(line.as_bytes());
        }
        held.err
            .extend_from_slice(b"[    0.1s] one\n[    0.2s] two\n");
        assert!(held.len() < HOLD_MAX);
        let (mut out, mut err) = (Counting::default(), Counting::default());
        let mut batch = held.take();
        assert!(held.is_empty(), "what is taken is no longer held");
        batch.write(&mut out, &mut err);
        assert_eq!((out.writes, err.writes), (1, 1));
        assert_eq!(out.bytes, want_out);
        assert_eq!(err.bytes, b"[    0.1s] one\n[    0.2s] two\n");
        held.give_back(batch);
        assert!(held.is_empty());
        assert!(
            held.spare_out.capacity() >= want_out.len(),
            "the written batch's buffer is kept for the next"
        );
        held.take().write(&mut out, &mut err);
        assert_eq!(
            (out.writes, err.writes),
            (1, 1),
            "nothing held, nothing written"
        );
        held.out.extend_from_slice(b"next\n");
        let batch = held.take();
        assert!(
            batch.out.capacity() >= want_out.len(),
            "the next batch reuses the spare buffer"
        );
    }

    /// The fast copy of plain text gives the bytes serde_json and the inert formatter give, for
    /// text with and without anything to escape.
    #[test]
    fn inert_json_strings_are_the_same_either_way() {
        for text in [
            "plain ascii",
            "",
            "naïve — ünïcode ’quoted’ 🦀",
            "quote \" back\\slash",
            "ctl \u{1}\n\t\r",
            HOSTILE,
            "del \u{7f} c1 \u{85} nbsp \u{a0} bidi \u{202e} \u{2066}",
        ] {
            let mut fast = Vec::new();
            push_inert_json_str(&mut fast, text).unwrap();
            assert_eq!(
                String::from_utf8(fast).unwrap(),
                json(&text).unwrap(),
                "{text:?}"
            );
        }
    }

    /// The block scan finds what a look at every character finds, wherever a hostile character
    /// or a byte that only may be one (`é` is `0xC3`, `’` is `0xE2 0x80 0x99`) falls against
    /// the blocks.
    #[test]
    fn the_block_scan_finds_every_hostile_character() {
        let mut suspects: Vec<char> = ('\u{0}'..='\u{2ff}').collect();
        suspects.extend([
            '\u{2019}', '\u{2028}', '\u{2029}', '\u{202a}', '\u{202e}', '\u{202f}',
        ]);
        suspects.extend([
            '\u{2065}', '\u{2066}', '\u{2069}', '\u{206a}', '\u{fffd}', '🦀',
        ]);
        for c in suspects {
            for pad in 0..70 {
                for prefix in ["", "é", "’"] {
                    let text = format!("{prefix}{}{c}tail", "a".repeat(pad));
                    let naive = text
                        .char_indices()
                        .find(|&(_, c)| is_hostile(c))
                        .map(|(i, _)| i);
                    assert_eq!(find_hostile(&text, is_hostile), naive, "{text:?}");
                    let breaks = |c: char| is_hostile(c) || c == '\n' || c == '\t';
                    let naive = text
                        .char_indices()
                        .find(|&(_, c)| breaks(c))
                        .map(|(i, _)| i);
                    assert_eq!(find_hostile(&text, breaks), naive, "{text:?}");
                }
            }
        }
        assert_eq!(one_line("a\tb\nc\u{202e}"), "a␉b␊c\u{fffd}");
        assert_eq!(sanitize("plain ’text’ é"), "plain ’text’ é");
    }

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
