//! Bounded line framing on raw bytes.
//!
//! A CLI can print a line of any length (a tool result holding a whole file, a base64 image), and
//! may print bytes that are not UTF-8. The framer never holds more than `max_line_bytes` of one
//! line: a longer line is reported as [`Frame::Oversized`] with its length and first bytes, and
//! the stream keeps flowing. A trailing `\r` is trimmed; invalid UTF-8 is decoded lossily.

use std::borrow::Cow;

/// How many leading bytes of an oversized line are kept for the record.
pub const OVERSIZED_PREFIX_BYTES: usize = 256;

/// One framed line.
#[derive(Debug, PartialEq)]
pub enum Frame<'a> {
    /// A complete line, without its terminator.
    Line(Cow<'a, str>),
    /// A line longer than the cap; only its length and first bytes were kept.
    Oversized {
        /// Total length in bytes, terminator excluded.
        len: u64,
        /// The first [`OVERSIZED_PREFIX_BYTES`] bytes, decoded lossily.
        prefix: String,
    },
}

/// Splits a byte stream into bounded lines.
#[derive(Debug)]
pub struct LineFramer {
    max_line_bytes: usize,
    partial: Vec<u8>,
    /// Set while skipping the rest of an oversized line: bytes seen so far and the kept prefix.
    oversized: Option<(u64, Vec<u8>)>,
}

impl LineFramer {
    /// A framer that keeps at most `max_line_bytes` of any one line (at least 1).
    pub fn new(max_line_bytes: usize) -> Self {
        LineFramer {
            max_line_bytes: max_line_bytes.max(1),
            partial: Vec::new(),
            oversized: None,
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
        if self.oversized.is_some() || !self.partial.is_empty() {
            self.finish_line(&[], &mut emit);
        }
    }

    /// True when bytes of an unfinished line are buffered.
    pub fn has_partial(&self) -> bool {
        self.oversized.is_some() || !self.partial.is_empty()
    }

    fn absorb(&mut self, bytes: &[u8]) {
        if let Some((len, prefix)) = self.oversized.as_mut() {
            *len += bytes.len() as u64;
            extend_prefix(prefix, bytes);
            return;
        }
        if self.partial.len() + bytes.len() > self.max_line_bytes {
            self.start_oversized(bytes);
        } else {
            self.partial.extend_from_slice(bytes);
        }
    }

    fn start_oversized(&mut self, more: &[u8]) {
        let mut prefix = std::mem::take(&mut self.partial);
        let len = prefix.len() as u64 + more.len() as u64;
        if prefix.len() < OVERSIZED_PREFIX_BYTES {
            let want = OVERSIZED_PREFIX_BYTES - prefix.len();
            prefix.extend_from_slice(&more[..want.min(more.len())]);
        }
        prefix.truncate(OVERSIZED_PREFIX_BYTES);
        // Give the buffer back: an 8 MiB allocation must not outlive the oversized line.
        self.partial = Vec::new();
        self.oversized = Some((len, prefix));
    }

    fn finish_line(&mut self, tail: &[u8], emit: &mut impl FnMut(Frame<'_>)) {
        if let Some((len, mut prefix)) = self.oversized.take() {
            let len = len + tail.len() as u64;
            extend_prefix(&mut prefix, tail);
            emit(Frame::Oversized {
                len,
                prefix: String::from_utf8_lossy(&prefix).into_owned(),
            });
            return;
        }
        if self.partial.is_empty() {
            if tail.len() > self.max_line_bytes {
                self.start_oversized(tail);
                self.finish_line(&[], emit);
                return;
            }
            emit(Frame::Line(decode(tail)));
            return;
        }
        if self.partial.len() + tail.len() > self.max_line_bytes {
            self.start_oversized(tail);
            self.finish_line(&[], emit);
            return;
        }
        self.partial.extend_from_slice(tail);
        let line = std::mem::take(&mut self.partial);
        emit(Frame::Line(decode(&line)));
        // Keep a modest buffer for the next partial line, not the largest one ever seen.
        if line.capacity() <= 64 * 1024 {
            self.partial = line;
            self.partial.clear();
        }
    }
}

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
}
