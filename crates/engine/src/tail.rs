//! A bounded tail of a byte stream: the last N bytes, never more.

use std::collections::VecDeque;

/// Keeps the last `cap` bytes pushed into it.
#[derive(Debug)]
pub struct Tail {
    cap: usize,
    bytes: VecDeque<u8>,
    total: u64,
}

impl Tail {
    /// A tail of at most `cap` bytes.
    pub fn new(cap: usize) -> Self {
        Tail {
            cap,
            bytes: VecDeque::with_capacity(cap.min(64 * 1024)),
            total: 0,
        }
    }

    /// Appends bytes, dropping the oldest beyond the cap.
    pub fn push(&mut self, chunk: &[u8]) {
        self.total += chunk.len() as u64;
        if self.cap == 0 {
            return;
        }
        let chunk = if chunk.len() > self.cap {
            &chunk[chunk.len() - self.cap..]
        } else {
            chunk
        };
        let overflow = (self.bytes.len() + chunk.len()).saturating_sub(self.cap);
        self.bytes.drain(..overflow);
        self.bytes.extend(chunk);
    }

    /// The kept bytes, decoded lossily.
    pub fn text(&self) -> String {
        let (a, b) = self.bytes.as_slices();
        let mut joined = Vec::with_capacity(a.len() + b.len());
        joined.extend_from_slice(a);
        joined.extend_from_slice(b);
        String::from_utf8_lossy(&joined).into_owned()
    }

    /// Every byte ever pushed, kept or not.
    pub fn total_bytes(&self) -> u64 {
        self.total
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_only_the_last_bytes() {
        let mut t = Tail::new(4);
        t.push(b"abc");
        t.push(b"defg");
        assert_eq!(t.text(), "defg");
        t.push(b"0123456789");
        assert_eq!(t.text(), "6789");
        assert_eq!(t.total_bytes(), 17);
    }
}
