//! Shortening an over-long JSON line in place, as it streams, so that it still parses.
//!
//! A CLI prints a whole answer or a whole file's content as one JSON string inside one line
//! (Claude's `result` and `assistant` lines, Grok's only line). Such a line can be far longer than
//! the framer's cap, and dropping it whole loses the outcome, usage, cost and session it carries.
//! The [`Shrinker`] rewrites the line while it arrives: structure, numbers, keys and short strings
//! are copied as they are; a string longer than the per-string limit keeps its first bytes (cut
//! on a character and escape boundary) and ends with a marker naming its decoded length. The
//! result is valid JSON whenever the input is, and never longer than the input read so far, so
//! the rewrite runs inside the framer's own buffer and memory stays at the cap.
//!
//! The tokenizer is lexical only: it follows strings (quotes and escapes) and containers (for the
//! path of each cut string) and validates nothing else. Input that does not start like a JSON
//! object or array, nests deeper than [`MAX_DEPTH`], or stays over the cap even with its strings
//! cut, is given up on ([`GiveUp`]); the framer then reports the line as oversized, as before.

use corral_ports::ShortenedString;

/// Room kept after a string's limit: a string is only cut when it is longer than its limit plus
/// this, so the marker always fits in the bytes it replaces.
const MARKER_ROOM: usize = 128;
/// Deepest nesting followed; deeper input is given up on (the path stack stays small).
pub(crate) const MAX_DEPTH: usize = 128;
/// How much of an object key is kept for paths.
const KEY_KEEP: usize = 64;
/// How many cut strings are listed; later ones are still cut and marked.
pub(crate) const MAX_LISTED: usize = 64;

/// The line cannot be shortened into a parseable line under the cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct GiveUp;

/// Writes into the framer's buffer at an index that never passes the bytes still to be read.
pub(crate) struct Out<'a> {
    buf: &'a mut Vec<u8>,
    w: usize,
}

impl<'a> Out<'a> {
    /// A writer starting at `w`.
    pub(crate) fn new(buf: &'a mut Vec<u8>, w: usize) -> Self {
        Out { buf, w }
    }

    /// Bytes written so far.
    pub(crate) fn len(&self) -> usize {
        self.w
    }

    fn put(&mut self, bytes: &[u8]) {
        let end = self.w + bytes.len();
        let overwrite = self.buf.len().saturating_sub(self.w).min(bytes.len());
        self.buf[self.w..self.w + overwrite].copy_from_slice(&bytes[..overwrite]);
        self.buf.extend_from_slice(&bytes[overwrite..]);
        self.w = end;
    }

    fn set_len(&mut self, w: usize) {
        self.w = w;
    }
}

enum Level {
    Object { key: String, expect_key: bool },
    Array { index: u64 },
}

/// Where the string's escape sequence stands.
#[derive(Clone, Copy)]
enum Esc {
    None,
    /// A backslash was read.
    Backslash,
    /// `\u` and `digits` hex digits of `value` were read.
    Unicode {
        digits: u8,
        value: u32,
    },
}

struct Str {
    is_key: bool,
    /// Output offset of the string's first content byte.
    start: usize,
    /// Decoded bytes seen.
    decoded: u64,
    /// Content bytes seen, as written in the line.
    raw: u64,
    /// Content bytes written (at most `keep + MARKER_ROOM`).
    written: usize,
    /// The best cut so far: a written offset at most `keep`, outside any escape sequence.
    cut: usize,
    /// Decoded bytes before `cut`.
    decoded_at_cut: u64,
    esc: Esc,
    /// Written offset and decoded count at the start of the current escape sequence.
    esc_start: (usize, u64),
    /// A high surrogate escape waiting for its low half (where it started, as `esc_start`).
    pending_high: Option<(usize, u64)>,
    key: Vec<u8>,
}

/// Streaming state of one line being shortened.
pub(crate) struct Shrinker {
    keep: usize,
    cap: usize,
    consumed: u64,
    started: bool,
    stack: Vec<Level>,
    string: Option<Str>,
    strings: Vec<ShortenedString>,
}

impl Shrinker {
    /// A shrinker keeping at most `keep` bytes of each long string, giving up when the rewritten
    /// line would pass `cap`.
    pub(crate) fn new(keep: usize, cap: usize) -> Self {
        Shrinker {
            keep,
            cap,
            consumed: 0,
            started: false,
            stack: Vec::new(),
            string: None,
            strings: Vec::new(),
        }
    }

    /// Raw bytes of the line read so far.
    pub(crate) fn consumed(&self) -> u64 {
        self.consumed
    }

    /// The strings cut so far.
    pub(crate) fn into_strings(self) -> Vec<ShortenedString> {
        self.strings
    }

    /// Reads `input` (the next bytes of the line, no newline among them) and writes the
    /// shortened form to `out`.
    pub(crate) fn feed(&mut self, input: &[u8], out: &mut Out<'_>) -> Result<(), GiveUp> {
        self.consumed += input.len() as u64;
        let mut i = 0;
        while i < input.len() {
            if self.string.is_some() {
                i += self.in_string(&input[i..], out);
            } else {
                self.structural(input[i], out)?;
                i += 1;
            }
            if out.len() > self.cap {
                return Err(GiveUp);
            }
        }
        Ok(())
    }

    fn structural(&mut self, b: u8, out: &mut Out<'_>) -> Result<(), GiveUp> {
        if !self.started {
            if b.is_ascii_whitespace() {
                out.put(&[b]);
                return Ok(());
            }
            if b != b'{' && b != b'[' {
                return Err(GiveUp);
            }
            self.started = true;
        }
        match b {
            b'"' => {
                let is_key = matches!(
                    self.stack.last(),
                    Some(Level::Object {
                        expect_key: true,
                        ..
                    })
                );
                out.put(b"\"");
                self.string = Some(Str {
                    is_key,
                    start: out.len(),
                    decoded: 0,
                    raw: 0,
                    written: 0,
                    cut: 0,
                    decoded_at_cut: 0,
                    esc: Esc::None,
                    esc_start: (0, 0),
                    pending_high: None,
                    key: Vec::new(),
                });
                return Ok(());
            }
            b'{' | b'[' => {
                if self.stack.len() >= MAX_DEPTH {
                    return Err(GiveUp);
                }
                self.stack.push(if b == b'{' {
                    Level::Object {
                        key: String::new(),
                        expect_key: true,
                    }
                } else {
                    Level::Array { index: 0 }
                });
            }
            b'}' | b']' => {
                self.stack.pop();
            }
            b',' => match self.stack.last_mut() {
                Some(Level::Object { expect_key, .. }) => *expect_key = true,
                Some(Level::Array { index }) => *index += 1,
                None => {}
            },
            b':' => {
                if let Some(Level::Object { expect_key, .. }) = self.stack.last_mut() {
                    *expect_key = false;
                }
            }
            _ => {}
        }
        out.put(&[b]);
        Ok(())
    }

    /// Reads string content from `input`; returns how many bytes it used.
    fn in_string(&mut self, input: &[u8], out: &mut Out<'_>) -> usize {
        let limit = self.keep + MARKER_ROOM;
        let Some(s) = self.string.as_mut() else {
            return 0;
        };
        match s.esc {
            Esc::None => {}
            Esc::Backslash | Esc::Unicode { .. } => {
                let b = input[0];
                s.raw += 1;
                s.write(&[b], limit, out);
                s.escape_byte(b, self.keep);
                return 1;
            }
        }
        let run = memchr::memchr2(b'"', b'\\', input).unwrap_or(input.len());
        if run > 0 {
            s.plain(&input[..run], self.keep, limit, out);
        }
        if run == input.len() {
            return run;
        }
        if input[run] == b'\\' {
            if s.pending_high.is_none() && s.written <= self.keep {
                s.cut = s.written;
                s.decoded_at_cut = s.decoded;
            }
            s.esc_start = (s.written, s.decoded);
            s.esc = Esc::Backslash;
            s.raw += 1;
            s.write(b"\\", limit, out);
            return run + 1;
        }
        self.end_string(out);
        run + 1
    }

    fn end_string(&mut self, out: &mut Out<'_>) {
        let Some(mut s) = self.string.take() else {
            return;
        };
        if s.pending_high.take().is_some() {
            // A lone high surrogate: decoded lossily as one replacement character.
            s.decoded += 3;
        }
        let whole = s.raw == s.written as u64;
        if !whole {
            let written = &out.buf[s.start..s.start + s.cut];
            let cut = utf8_boundary(written);
            let kept = s.decoded_at_cut - (s.cut - cut) as u64;
            out.set_len(s.start + cut);
            let marker = format!("…[cut by corral: {} bytes, first {kept} kept]", s.decoded);
            out.put(marker.as_bytes());
            if self.strings.len() < MAX_LISTED {
                let path = self.path(s.is_key);
                self.strings.push(ShortenedString {
                    path,
                    len: s.decoded,
                    kept,
                });
            }
        }
        out.put(b"\"");
        if s.is_key
            && let Some(Level::Object { key, expect_key }) = self.stack.last_mut()
        {
            *key = decode_key(&s.key);
            *expect_key = false;
        }
    }

    fn path(&self, is_key: bool) -> String {
        let mut path = String::new();
        for level in &self.stack {
            match level {
                Level::Object { key, .. } => {
                    if !path.is_empty() {
                        path.push('.');
                    }
                    path.push_str(key);
                }
                Level::Array { index } => {
                    path.push('[');
                    path.push_str(&index.to_string());
                    path.push(']');
                }
            }
        }
        if is_key {
            path.push_str(if path.is_empty() { "(key)" } else { ".(key)" });
        }
        path
    }
}

impl Str {
    /// Writes content bytes while the string is within its limit.
    fn write(&mut self, bytes: &[u8], limit: usize, out: &mut Out<'_>) {
        let take = limit.saturating_sub(self.written).min(bytes.len());
        if take > 0 {
            out.put(&bytes[..take]);
            self.written += take;
        }
        if self.is_key && self.key.len() < KEY_KEEP {
            let room = KEY_KEEP - self.key.len();
            self.key.extend_from_slice(&bytes[..room.min(bytes.len())]);
        }
    }

    /// A run of content without quotes or backslashes.
    fn plain(&mut self, run: &[u8], keep: usize, limit: usize, out: &mut Out<'_>) {
        if self.pending_high.take().is_some() {
            self.decoded += 3;
        }
        if self.written <= keep {
            let end = (self.written + run.len()).min(keep);
            self.decoded_at_cut = self.decoded + (end - self.written) as u64;
            self.cut = end;
        }
        self.raw += run.len() as u64;
        self.decoded += run.len() as u64;
        self.write(run, limit, out);
    }

    /// One byte of an escape sequence after its backslash.
    fn escape_byte(&mut self, b: u8, keep: usize) {
        match self.esc {
            Esc::None => {}
            Esc::Backslash if b == b'u' => {
                self.esc = Esc::Unicode {
                    digits: 0,
                    value: 0,
                };
            }
            Esc::Backslash => {
                if self.pending_high.take().is_some() {
                    self.decoded += 3;
                }
                self.decoded += 1;
                self.esc = Esc::None;
                self.escape_done(keep);
            }
            Esc::Unicode { digits, value } => {
                let digit = char::from(b).to_digit(16).unwrap_or(0);
                let value = value * 16 + digit;
                if digits < 3 {
                    self.esc = Esc::Unicode {
                        digits: digits + 1,
                        value,
                    };
                    return;
                }
                self.esc = Esc::None;
                match (value, self.pending_high.take()) {
                    (0xD800..=0xDBFF, pending) => {
                        if pending.is_some() {
                            // The earlier high surrogate was lone.
                            self.decoded += 3;
                        }
                        self.pending_high = Some(self.esc_start);
                    }
                    (0xDC00..=0xDFFF, Some(_)) => {
                        self.decoded += 4;
                        self.escape_done(keep);
                    }
                    (other, pending) => {
                        if pending.is_some() {
                            self.decoded += 3;
                        }
                        self.decoded += char::from_u32(other).map_or(3, |c| c.len_utf8() as u64);
                        self.escape_done(keep);
                    }
                }
            }
        }
    }

    fn escape_done(&mut self, keep: usize) {
        if self.written <= keep {
            self.cut = self.written;
            self.decoded_at_cut = self.decoded;
        }
    }
}

/// A key as written in the line (escapes and all), decoded; kept as written when its first
/// [`KEY_KEEP`] bytes end inside an escape.
fn decode_key(raw: &[u8]) -> String {
    let mut quoted = Vec::with_capacity(raw.len() + 2);
    quoted.push(b'"');
    quoted.extend_from_slice(raw);
    quoted.push(b'"');
    serde_json::from_slice(&quoted).unwrap_or_else(|_| String::from_utf8_lossy(raw).into_owned())
}

/// The longest prefix of `bytes` that does not end inside a UTF-8 sequence.
fn utf8_boundary(bytes: &[u8]) -> usize {
    let n = bytes.len();
    // Look back over at most three continuation bytes for the lead byte of the last character.
    for back in 1..=4.min(n) {
        let b = bytes[n - back];
        if b & 0xC0 == 0x80 {
            continue;
        }
        let width = match b {
            0x00..=0x7F => 1,
            0xC0..=0xDF => 2,
            0xE0..=0xEF => 3,
            _ => 4,
        };
        return if width > back { n - back } else { n };
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shrink(
        line: &str,
        keep: usize,
        cap: usize,
    ) -> Result<(String, Vec<ShortenedString>), GiveUp> {
        let mut buf = Vec::new();
        let mut shrinker = Shrinker::new(keep, cap);
        let mut out = Out::new(&mut buf, 0);
        shrinker.feed(line.as_bytes(), &mut out)?;
        let w = out.len();
        buf.truncate(w);
        Ok((String::from_utf8(buf).unwrap(), shrinker.into_strings()))
    }

    #[test]
    fn short_strings_and_structure_are_copied_as_they_are() {
        let line = r#"{"a": [1, 2.5e3, true, null, "x\"y"], "b": {"c": "d"}}"#;
        assert_eq!(shrink(line, 8, 1000).unwrap(), (line.to_string(), vec![]));
    }

    #[test]
    fn a_long_string_keeps_its_head_and_names_its_length() {
        let long = "y".repeat(500);
        let line =
            format!(r#"{{"type":"result","result":"{long}","usage":{{"input_tokens":12}}}}"#);
        let (out, strings) = shrink(&line, 10, 10_000).unwrap();
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(
            v["result"],
            "yyyyyyyyyy…[cut by corral: 500 bytes, first 10 kept]"
        );
        assert_eq!(v["usage"]["input_tokens"], 12);
        assert_eq!(
            strings,
            [ShortenedString {
                path: "result".into(),
                len: 500,
                kept: 10
            }]
        );
    }

    #[test]
    fn a_string_just_over_its_limit_is_kept_whole() {
        let s = "z".repeat(10 + MARKER_ROOM);
        let line = format!(r#"["{s}"]"#);
        assert_eq!(shrink(&line, 10, 10_000).unwrap(), (line.clone(), vec![]));
    }

    #[test]
    fn paths_name_keys_and_indices() {
        let long = "q".repeat(400);
        let line = format!(
            r#"{{"message":{{"content":[{{"type":"text"}},{{"name":"Write","input":{{"file_path":"/p/big.txt","content":"{long}"}}}}]}}}}"#
        );
        let (out, strings) = shrink(&line, 4, 10_000).unwrap();
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(
            v["message"]["content"][1]["input"]["file_path"],
            "/p/big.txt"
        );
        assert_eq!(strings[0].path, "message.content[1].input.content");
        assert_eq!(strings[0].len, 400);
    }

    #[test]
    fn cuts_never_split_an_escape_a_character_or_a_surrogate_pair() {
        // Each unit is longer than one byte as written; cut at every limit in turn.
        for unit in [r"\n", r"\u00e9", "é", "😀", r"\ud83d\ude00", r#"\""#] {
            let body = unit.repeat(100);
            let line = format!(r#"{{"s":"{body}"}}"#);
            let decoded: String = serde_json::from_str::<serde_json::Value>(&line).unwrap()["s"]
                .as_str()
                .unwrap()
                .to_string();
            for keep in 0..40 {
                let (out, strings) = shrink(&line, keep, 10_000).unwrap();
                let v: serde_json::Value = serde_json::from_str(&out)
                    .unwrap_or_else(|e| panic!("{unit} keep {keep}: {e}: {out}"));
                let s = v["s"].as_str().unwrap();
                let head = s.split('…').next().unwrap();
                assert!(decoded.starts_with(head), "{unit} keep {keep}: {s}");
                assert_eq!(strings[0].len, decoded.len() as u64, "{unit}");
                assert_eq!(strings[0].kept, head.len() as u64, "{unit} keep {keep}");
            }
        }
    }

    #[test]
    fn what_is_not_json_or_too_deep_is_given_up() {
        assert_eq!(shrink("plain text", 4, 100), Err(GiveUp));
        assert_eq!(shrink(&"[".repeat(MAX_DEPTH + 1), 4, 10_000), Err(GiveUp));
        // Many short strings cannot be shortened under the cap.
        let many = format!("[{}]", vec!["\"ab\""; 100].join(","));
        assert_eq!(shrink(&many, 4, 50), Err(GiveUp));
    }

    #[test]
    fn utf8_boundary_backs_off_an_unfinished_character() {
        assert_eq!(utf8_boundary(b"ab"), 2);
        assert_eq!(utf8_boundary("aé".as_bytes()), 3);
        assert_eq!(utf8_boundary(&"aé".as_bytes()[..2]), 1);
        assert_eq!(utf8_boundary(&"a😀".as_bytes()[..4]), 1);
        assert_eq!(utf8_boundary(b""), 0);
    }
}
