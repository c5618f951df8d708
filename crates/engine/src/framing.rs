//! Bounded line framing on raw bytes.
//!
//! A CLI can print a line of any length (a whole answer, a tool call holding a whole file, a
//! base64 image), and may print bytes that are not UTF-8. The framer never holds more than
//! `max_line_bytes` of one line. A longer line that is JSON is shortened in place as it streams
//! ([`Frame::Shortened`]): its long strings keep their first bytes and end with a marker naming
//! their length, so the parser still gets the line's outcome, usage, session and tool names. A
//! longer line that cannot be shortened (not JSON, or over the cap even with its strings cut) is
//! reported as [`Frame::Oversized`] with its length and first bytes. Either way the stream keeps
//! flowing. A trailing `\r` is trimmed; invalid UTF-8 is decoded lossily.

mod shrink;

use std::borrow::Cow;

use corral_ports::ShortenedString;

use shrink::{GiveUp, Out, Shrinker};

/// How many leading bytes of an oversized line are kept for the record.
pub const OVERSIZED_PREFIX_BYTES: usize = 256;

/// How much of the line buffer one long string may keep when a line is shortened: an eighth of
/// the cap (1 MiB of the default 8 MiB), so several long strings and the structure around them
/// still fit.
const STRING_SHARE_OF_CAP: usize = 8;

/// One framed line.
#[derive(Debug, PartialEq)]
pub enum Frame<'a> {
    /// A complete line, without its terminator.
    Line(Cow<'a, str>),
    /// A line longer than the cap, with its long strings cut so that it fits: valid JSON when the
    /// line was.
    Shortened {
        /// The shortened line, without its terminator.
        line: Cow<'a, str>,
        /// The line's length as printed, in bytes, terminator excluded.
        len: u64,
        /// The strings that were cut.
        strings: Vec<ShortenedString>,
    },
    /// A line longer than the cap that could not be shortened; only its length and first bytes
    /// were kept.
    Oversized {
        /// Total length in bytes, terminator excluded.
        len: u64,
        /// The first [`OVERSIZED_PREFIX_BYTES`] bytes, decoded lossily.
        prefix: String,
    },
}

/// What the framer does with the line it is in.
enum Mode {
    /// The line fits so far; its bytes are in `partial`.
    Whole,
    /// The line passed the cap and is being shortened inside `partial`.
    Shortening {
        shrinker: Box<Shrinker>,
        /// Bytes of `partial` that hold the shortened line.
        written: usize,
        /// The line's first bytes as printed, for the record should shortening fail.
        head: Vec<u8>,
    },
    /// The rest of an oversized line is being skipped: bytes seen so far and the kept prefix.
    Oversized { len: u64, prefix: Vec<u8> },
}

/// Splits a byte stream into bounded lines.
pub struct LineFramer {
    max_line_bytes: usize,
    partial: Vec<u8>,
    mode: Mode,
}

impl std::fmt::Debug for LineFramer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mode = match &self.mode {
            Mode::Whole => "whole",
            Mode::Shortening { .. } => "shortening",
            Mode::Oversized { .. } => "oversized",
        };
        f.debug_struct("LineFramer")
            .field("max_line_bytes", &self.max_line_bytes)
            .field("partial", &self.partial.len())
            .field("mode", &mode)
            .finish()
    }
}

impl LineFramer {
    /// A framer that keeps at most `max_line_bytes` of any one line (at least 1).
    pub fn new(max_line_bytes: usize) -> Self {
        LineFramer {
            max_line_bytes: max_line_bytes.max(1),
            partial: Vec::new(),
            mode: Mode::Whole,
        }
    }

    /// Feeds a chunk and hands every completed frame to `emit`.
    pub fn push(&mut self, mut chunk: &[u8], mut emit: impl FnMut(Frame<'_>)) {
        while !chunk.is_empty() {
            match memchr::memchr(b'\n', chunk) {
                Some(pos) => {
                    let (segment, rest) = (&chunk[..pos], &chunk[pos + 1..]);
                    self.finish_line(segment, &mut emit);
                    chunk = rest;
                }
                None => {
                    self.absorb(chunk);
                    chunk = &[];
                }
            }
        }
    }

    /// Ends the stream: a line without a terminator (a crash mid-line) is emitted as it is.
    pub fn finish(&mut self, mut emit: impl FnMut(Frame<'_>)) {
        if self.has_partial() {
            self.finish_line(&[], &mut emit);
        }
    }

    /// True when bytes of an unfinished line are buffered.
    pub fn has_partial(&self) -> bool {
        match self.mode {
            Mode::Whole => !self.partial.is_empty(),
            Mode::Shortening { .. } | Mode::Oversized { .. } => true,
        }
    }

    fn absorb(&mut self, bytes: &[u8]) {
        match &mut self.mode {
            Mode::Whole => {
                if self.partial.len() + bytes.len() > self.max_line_bytes {
                    self.start_shortening(bytes);
                } else {
                    self.partial.extend_from_slice(bytes);
                }
            }
            Mode::Shortening {
                shrinker,
                written,
                head,
            } => {
                extend_prefix(head, bytes);
                let mut out = Out::new(&mut self.partial, *written);
                let fed = shrinker.feed(bytes, &mut out);
                *written = out.len();
                if fed.is_err() {
                    let len = shrinker.consumed();
                    let head = std::mem::take(head);
                    self.give_up(len, head);
                }
            }
            Mode::Oversized { len, prefix } => {
                *len += bytes.len() as u64;
                extend_prefix(prefix, bytes);
            }
        }
    }

    /// The line just passed the cap: shorten what is buffered in place, then `more`.
    fn start_shortening(&mut self, more: &[u8]) {
        let keep = (self.max_line_bytes / STRING_SHARE_OF_CAP).max(1);
        let mut shrinker = Shrinker::new(keep, self.max_line_bytes);
        let buffered = self.partial.len();
        let mut head = self.partial[..buffered.min(OVERSIZED_PREFIX_BYTES)].to_vec();
        extend_prefix(&mut head, more);
        // The shortened form is never longer than what was read of the line, so it is written
        // over the buffered bytes already read; a small scratch copy holds the bytes being read.
        let mut scratch = vec![0u8; SCRATCH_BYTES.min(buffered)];
        let mut read = 0;
        let mut written = 0;
        let mut fed: Result<(), GiveUp> = Ok(());
        while read < buffered && fed.is_ok() {
            let n = scratch.len().min(buffered - read);
            scratch[..n].copy_from_slice(&self.partial[read..read + n]);
            let mut out = Out::new(&mut self.partial, written);
            fed = shrinker.feed(&scratch[..n], &mut out);
            written = out.len();
            read += n;
        }
        let line_so_far = buffered as u64 + more.len() as u64;
        if fed.is_err() {
            return self.give_up(line_so_far, head);
        }
        self.partial.truncate(written);
        let mut out = Out::new(&mut self.partial, written);
        fed = shrinker.feed(more, &mut out);
        written = out.len();
        match fed {
            Ok(()) => {
                self.mode = Mode::Shortening {
                    shrinker: Box::new(shrinker),
                    written,
                    head,
                }
            }
            Err(GiveUp) => self.give_up(line_so_far, head),
        }
    }

    /// Stops shortening: the line is skipped to its end and reported as oversized. `len` is how
    /// much of it was read, `prefix` its first bytes.
    fn give_up(&mut self, len: u64, prefix: Vec<u8>) {
        // Give the buffer back: a cap-sized allocation must not outlive the oversized line.
        self.partial = Vec::new();
        self.mode = Mode::Oversized { len, prefix };
    }

    fn finish_line(&mut self, tail: &[u8], emit: &mut impl FnMut(Frame<'_>)) {
        if let Mode::Whole = self.mode {
            if self.partial.len() + tail.len() <= self.max_line_bytes {
                if self.partial.is_empty() {
                    emit(Frame::Line(decode(tail)));
                    return;
                }
                self.partial.extend_from_slice(tail);
                let line = std::mem::take(&mut self.partial);
                emit(Frame::Line(decode(&line)));
                self.recycle(line);
                return;
            }
            self.start_shortening(tail);
        } else {
            self.absorb(tail);
        }
        match std::mem::replace(&mut self.mode, Mode::Whole) {
            Mode::Shortening {
                shrinker, written, ..
            } => {
                let len = shrinker.consumed();
                let mut line = std::mem::take(&mut self.partial);
                line.truncate(written);
                emit(Frame::Shortened {
                    line: decode(&line),
                    len,
                    strings: shrinker.into_strings(),
                });
                self.recycle(line);
            }
            Mode::Oversized { len, prefix } => {
                emit(Frame::Oversized {
                    len,
                    prefix: String::from_utf8_lossy(&prefix).into_owned(),
                });
            }
            Mode::Whole => {}
        }
    }

    /// Keeps a modest buffer for the next partial line, not the largest one ever seen.
    fn recycle(&mut self, mut line: Vec<u8>) {
        if line.capacity() <= 64 * 1024 {
            line.clear();
            self.partial = line;
        }
    }
}

/// How many buffered bytes are copied aside at a time while a line is shortened in place.
const SCRATCH_BYTES: usize = 64 * 1024;

fn extend_prefix(prefix: &mut Vec<u8>, more: &[u8]) {
    let room = OVERSIZED_PREFIX_BYTES.saturating_sub(prefix.len());
    prefix.extend_from_slice(&more[..room.min(more.len())]);
}

fn decode(bytes: &[u8]) -> Cow<'_, str> {
    let bytes = bytes.strip_suffix(b"\r").unwrap_or(bytes);
    // Valid UTF-8 is by far the common case, and the strict check is the faster one.
    match std::str::from_utf8(bytes) {
        Ok(text) => Cow::Borrowed(text),
        Err(_) => String::from_utf8_lossy(bytes),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(max: usize, chunks: &[&[u8]]) -> Vec<String> {
        let mut framer = LineFramer::new(max);
        let mut out = Vec::new();
        let mut record = |f: Frame<'_>| match f {
            Frame::Line(l) => out.push(format!("L:{l}")),
            Frame::Shortened { line, len, strings } => {
                out.push(format!("S:{len}:{}:{line}", strings.len()));
            }
            Frame::Oversized { len, prefix } => out.push(format!("O:{len}:{prefix}")),
        };
        for c in chunks {
            framer.push(c, &mut record);
        }
        framer.finish(&mut record);
        out
    }

    #[test]
    fn splits_lines_across_chunks_and_trims_cr() {
        assert_eq!(
            frames(100, &[b"ab", b"c\r\nde", b"f\n"]),
            ["L:abc", "L:def"]
        );
    }

    #[test]
    fn oversized_line_is_reported_and_the_stream_continues() {
        let long = vec![b'x'; 300];
        let mut chunk = b"ok\n".to_vec();
        chunk.extend_from_slice(&long);
        chunk.extend_from_slice(b"\nafter\n");
        let out = frames(10, &[&chunk]);
        assert_eq!(out[0], "L:ok");
        assert_eq!(out[1], format!("O:300:{}", "x".repeat(256)));
        assert_eq!(out[2], "L:after");
    }

    #[test]
    fn oversized_across_many_chunks_counts_every_byte() {
        let out = frames(4, &[b"12", b"345", b"6789", b"0\nz\n"]);
        assert_eq!(out, ["O:10:1234567890", "L:z"]);
    }

    #[test]
    fn invalid_utf8_is_decoded_lossily() {
        assert_eq!(frames(100, &[b"a\xff\xfeb\n"]), ["L:a\u{fffd}\u{fffd}b"]);
    }

    #[test]
    fn unterminated_tail_is_emitted_at_finish() {
        assert_eq!(
            frames(100, &[b"one\n{\"type\":\"te"]),
            ["L:one", "L:{\"type\":\"te"]
        );
    }

    #[test]
    fn line_exactly_at_cap_is_kept() {
        assert_eq!(frames(3, &[b"abc\n"]), ["L:abc"]);
        assert_eq!(frames(3, &[b"ab", b"c\n"]), ["L:abc"]);
        assert_eq!(frames(3, &[b"abcd\n"]), ["O:4:abcd"]);
    }

    #[test]
    fn an_oversized_json_line_is_shortened_and_the_stream_continues() {
        let line = format!(
            r#"{{"type":"result","result":"{}","session_id":"s-1","usage":{{"output_tokens":7}}}}"#,
            "a".repeat(5000)
        );
        let chunk = format!("ok\n{line}\nafter\n");
        // Fed whole, and a few bytes at a time so the cap is passed mid-string.
        for size in [chunk.len(), 7] {
            let chunks: Vec<&[u8]> = chunk.as_bytes().chunks(size).collect();
            let out = frames(1000, &chunks);
            assert_eq!(out.len(), 3, "{out:?}");
            assert_eq!(out[0], "L:ok");
            let kept = format!(
                r#"{{"type":"result","result":"{}…[cut by corral: 5000 bytes, first 125 kept]","session_id":"s-1","usage":{{"output_tokens":7}}}}"#,
                "a".repeat(125)
            );
            assert_eq!(out[1], format!("S:{}:1:{kept}", line.len()));
            assert_eq!(out[2], "L:after");
        }
    }

    #[test]
    fn a_line_that_stays_over_the_cap_is_oversized_with_its_first_bytes() {
        let line = format!("[{}]", vec!["1"; 400].join(","));
        let out = frames(100, &[line.as_bytes(), b"\nz\n"]);
        assert_eq!(
            out,
            [format!("O:{}:{}", line.len(), &line[..256]), "L:z".into()]
        );
    }

    #[test]
    fn a_crlf_shortened_line_loses_its_cr() {
        let line = format!("{{\"t\":\"{}\"}}\r\n", "b".repeat(400));
        let out = frames(200, &[line.as_bytes()]);
        assert!(out[0].ends_with("kept]\"}"), "{out:?}");
    }

    /// A random JSON value: nested containers, numbers, literals, and strings of every kind of
    /// character (escapes, multi-byte, astral), some of them long.
    fn random_value(rng: &mut fastrand::Rng, depth: u32) -> serde_json::Value {
        use serde_json::Value;
        let pick = if depth > 4 {
            rng.u8(0..4)
        } else {
            rng.u8(0..6)
        };
        match pick {
            0 => Value::Null,
            1 => Value::Bool(rng.bool()),
            // Eighths round-trip exactly through text.
            2 => serde_json::json!(f64::from(rng.i32(..)) / 8.0),
            3 => Value::String(random_string(rng)),
            4 => Value::Array(
                (0..rng.usize(0..5))
                    .map(|_| random_value(rng, depth + 1))
                    .collect(),
            ),
            _ => Value::Object(
                (0..rng.usize(0..5))
                    .map(|i| {
                        (
                            format!(
                                "k{i}{}",
                                random_string(rng).chars().take(3).collect::<String>()
                            ),
                            random_value(rng, depth + 1),
                        )
                    })
                    .collect(),
            ),
        }
    }

    fn random_string(rng: &mut fastrand::Rng) -> String {
        let len = match rng.u8(0..10) {
            0 => rng.usize(200..3000),
            1 => rng.usize(20..200),
            _ => rng.usize(0..20),
        };
        let alphabet = [
            'a', 'Z', ' ', '"', '\\', '\n', '\t', '\u{1}', 'é', '€', '😀', '/', '…',
        ];
        (0..len)
            .map(|_| alphabet[rng.usize(0..alphabet.len())])
            .collect()
    }

    /// Walks the original and the shortened value together: same shape, every string equal or
    /// cut (its kept head, then the marker naming its length), every cut string listed.
    fn compare(
        original: &serde_json::Value,
        short: &serde_json::Value,
        path: &str,
        cuts: &mut Vec<ShortenedString>,
    ) {
        use serde_json::Value;
        match (original, short) {
            (Value::String(o), Value::String(s)) if o != s => {
                let marker = format!("…[cut by corral: {} bytes, first ", o.len());
                let at = s.rfind(&marker).unwrap_or_else(|| panic!("{path}: {s:?}"));
                let head = &s[..at];
                assert!(o.starts_with(head), "{path}");
                assert_eq!(&s[at + marker.len()..], format!("{} kept]", head.len()));
                cuts.push(ShortenedString {
                    path: path.to_string(),
                    len: o.len() as u64,
                    kept: head.len() as u64,
                });
            }
            (Value::Array(o), Value::Array(s)) => {
                assert_eq!(o.len(), s.len(), "{path}");
                for (i, (a, b)) in o.iter().zip(s).enumerate() {
                    compare(a, b, &format!("{path}[{i}]"), cuts);
                }
            }
            (Value::Object(o), Value::Object(s)) => {
                assert_eq!(o.len(), s.len(), "{path}");
                for ((ka, a), (kb, b)) in o.iter().zip(s) {
                    assert_eq!(ka, kb, "{path}");
                    let sub = if path.is_empty() {
                        ka.clone()
                    } else {
                        format!("{path}.{ka}")
                    };
                    compare(a, b, &sub, cuts);
                }
            }
            (o, s) => assert_eq!(o, s, "{path}"),
        }
    }

    #[test]
    fn property_random_json_lines_are_kept_shortened_or_reported_never_broken() {
        let mut rng = fastrand::Rng::with_seed(17);
        let (mut whole, mut shortened, mut oversized) = (0, 0, 0);
        for case in 0..3000 {
            let value = serde_json::Value::Array(
                (0..rng.usize(1..6))
                    .map(|_| random_value(&mut rng, 0))
                    .collect(),
            );
            let line = serde_json::to_string(&value).unwrap();
            // Around the line's length: some fit, most need shortening, some cannot be shortened.
            let cap = rng.usize(line.len() / 20 + 16..line.len() + 64);
            let mut framer = LineFramer::new(cap);
            let mut frames = Vec::new();
            let mut stream = line.clone().into_bytes();
            stream.push(b'\n');
            let mut rest = &stream[..];
            while !rest.is_empty() {
                let n = rng.usize(1..=rest.len().min(600));
                framer.push(&rest[..n], |f| frames.push(owned(f)));
                assert!(
                    framer.partial.len() <= cap,
                    "case {case}: the buffer passed the cap"
                );
                rest = &rest[n..];
            }
            assert_eq!(frames.len(), 1, "case {case}");
            match frames.remove(0) {
                Owned::Line(l) => {
                    assert!(line.len() <= cap, "case {case}");
                    assert_eq!(l, line, "case {case}");
                    whole += 1;
                }
                Owned::Shortened {
                    line: short,
                    len,
                    strings,
                } => {
                    assert!(line.len() > cap && short.len() <= cap, "case {case}");
                    assert_eq!(len, line.len() as u64, "case {case}");
                    let parsed: serde_json::Value = serde_json::from_str(&short)
                        .unwrap_or_else(|e| panic!("case {case}: {e}: {short}"));
                    let mut cuts = Vec::new();
                    compare(&value, &parsed, "", &mut cuts);
                    cuts.truncate(shrink::MAX_LISTED);
                    assert_eq!(cuts, strings, "case {case}");
                    shortened += 1;
                }
                Owned::Oversized { len, prefix } => {
                    assert!(line.len() > cap, "case {case}");
                    assert_eq!(len, line.len() as u64, "case {case}");
                    let head = String::from_utf8_lossy(&line.as_bytes()[..256.min(line.len())])
                        .into_owned();
                    assert_eq!(prefix, head, "case {case}");
                    oversized += 1;
                }
            }
        }
        // The generator must exercise all three outcomes, or the property says little.
        eprintln!("whole {whole}, shortened {shortened}, oversized {oversized}");
        assert!(
            whole > 250 && shortened > 250 && oversized > 250,
            "{whole} {shortened} {oversized}"
        );
    }

    #[test]
    fn property_arbitrary_bytes_never_break_the_framer() {
        let mut rng = fastrand::Rng::with_seed(3);
        let bytes: Vec<u8> = b"{}[]\",:\\u0aZ \xff\xc3\n".to_vec();
        for _ in 0..2000 {
            let cap = rng.usize(1..300);
            let mut framer = LineFramer::new(cap);
            let stream: Vec<u8> = (0..rng.usize(0..3000))
                .map(|_| bytes[rng.usize(0..bytes.len())])
                .collect();
            let mut total = 0u64;
            let mut lines = 0u64;
            for chunk in stream.chunks(rng.usize(1..100)) {
                framer.push(chunk, |f| {
                    lines += 1;
                    total += match f {
                        Frame::Line(l) => {
                            assert!(l.len() <= cap * 3);
                            l.len() as u64
                        }
                        Frame::Shortened { line, len, .. } => {
                            assert!(line.len() <= cap * 3);
                            len
                        }
                        Frame::Oversized { len, .. } => len,
                    };
                });
                assert!(framer.partial.len() <= cap);
            }
            framer.finish(|_| lines += 1);
            let newlines = stream.iter().filter(|&&b| b == b'\n').count() as u64;
            assert!(lines >= newlines);
            let _ = total;
        }
    }

    enum Owned {
        Line(String),
        Shortened {
            line: String,
            len: u64,
            strings: Vec<ShortenedString>,
        },
        Oversized {
            len: u64,
            prefix: String,
        },
    }

    fn owned(f: Frame<'_>) -> Owned {
        match f {
            Frame::Line(l) => Owned::Line(l.into_owned()),
            Frame::Shortened { line, len, strings } => Owned::Shortened {
                line: line.into_owned(),
                len,
                strings,
            },
            Frame::Oversized { len, prefix } => Owned::Oversized { len, prefix },
        }
    }
}
