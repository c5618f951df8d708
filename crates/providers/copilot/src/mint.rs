//! Session ids minted up front: a random (version 4) UUID per fresh attempt, passed to Copilot as
//! `--session-id=<uuid>` so that the id is on disk before the CLI prints anything (Copilot itself
//! names its session only on the last line of a run).
//!
//! The randomness is injectable ([`UuidSource::from_fn`]) so that tests see fixed ids; the real
//! source reads 16 bytes from `/dev/urandom`. No UUID crate is used: the format is small, and it is
//! tested here.

use std::fmt;
use std::io::{self, Read};
use std::sync::Arc;

/// Where the random bytes of a minted UUID come from.
#[derive(Clone)]
pub struct UuidSource(Arc<dyn Fn() -> io::Result<[u8; 16]> + Send + Sync>);

impl UuidSource {
    /// 16 bytes from `/dev/urandom` per id.
    pub fn urandom() -> Self {
        UuidSource(Arc::new(|| {
            let mut bytes = [0u8; 16];
            std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
            Ok(bytes)
        }))
    }

    /// Bytes from `f` (tests: a fixed or counting sequence).
    pub fn from_fn(f: impl Fn() -> io::Result<[u8; 16]> + Send + Sync + 'static) -> Self {
        UuidSource(Arc::new(f))
    }

    /// A new version 4 UUID in its canonical lowercase form.
    pub fn mint(&self) -> io::Result<String> {
        (self.0)().map(format_uuid_v4)
    }
}

impl Default for UuidSource {
    fn default() -> Self {
        UuidSource::urandom()
    }
}

impl fmt::Debug for UuidSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("UuidSource")
    }
}

/// Formats 16 random bytes as a version 4, RFC 4122 variant UUID (`xxxxxxxx-xxxx-4xxx-Nxxx-…`,
/// N one of 8, 9, a, b): the version and variant bits are overwritten, the other 122 bits kept.
pub fn format_uuid_v4(mut bytes: [u8; 16]) -> String {
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    let mut out = String::with_capacity(36);
    for (i, byte) in bytes.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            out.push('-');
        }
        out.push(hex_digit(byte >> 4));
        out.push(hex_digit(byte & 0x0f));
    }
    out
}

fn hex_digit(nibble: u8) -> char {
    char::from(b"0123456789abcdef"[usize::from(nibble & 0x0f)])
}
