//! The `timestamp` every signal carries: an RFC 3339 date-time, checked by a small hand-written
//! validator (no date library).
//!
//! The accepted grammar is RFC 3339 §5.6 `date-time`: `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`.
//! `T` and `Z` may be lowercase, as the RFC allows; a space instead of `T` is refused. The calendar
//! is checked (month lengths, leap years); a leap second (`:60`) is accepted as the RFC allows. The
//! validator says nothing about whether the instant is plausible (in the future, say): that is the
//! caller's business.

use std::borrow::Cow;
use std::fmt;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};

/// A signal's `timestamp`: an RFC 3339 date-time kept as the text the agent wrote.
///
/// [`Timestamp::parse`] only returns checked values. Deserializing with serde does not check (so
/// that validation can report a bad timestamp with its JSON path, next to every other issue); the
/// timestamps inside a [`crate::ValidatedSignals`] have all passed the check.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Timestamp(String);

impl Timestamp {
    /// Checks `text` against RFC 3339 and wraps it.
    ///
    /// # Errors
    ///
    /// [`TimestampError`] naming the first part of the text that is wrong.
    pub fn parse(text: &str) -> Result<Self, TimestampError> {
        check_rfc3339(text)?;
        Ok(Self(text.to_owned()))
    }

    /// Wraps a literal the crate knows to be valid (the examples). Checked in debug builds.
    pub(crate) fn from_trusted(text: &str) -> Self {
        debug_assert!(check_rfc3339(text).is_ok(), "{text}");
        Self(text.to_owned())
    }

    /// The timestamp as written.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl garde::Validate for Timestamp {
    type Context = ();

    fn validate_into(
        &self,
        _ctx: &Self::Context,
        parent: &mut dyn FnMut() -> garde::Path,
        report: &mut garde::Report,
    ) {
        if let Err(error) = check_rfc3339(&self.0) {
            report.append(parent(), garde::Error::new(error.to_string()));
        }
    }
}

impl JsonSchema for Timestamp {
    fn schema_name() -> Cow<'static, str> {
        Cow::Borrowed("Timestamp")
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_generator: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "string",
            "format": "date-time",
            "description": "RFC 3339 date-time, e.g. 2025-01-01T12:00:00Z or 2025-01-01T13:00:00.5+01:00."
        })
    }
}

/// Why a text is not an RFC 3339 date-time.
///
/// Not retryable as is; the agent can be asked to correct it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TimestampError {
    /// The text does not have the shape `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`.
    #[error(
        "not an RFC 3339 date-time: expected YYYY-MM-DDTHH:MM:SS[.fraction] followed by Z or ±HH:MM, e.g. 2025-01-01T12:00:00Z"
    )]
    Shape,
    /// The shape is right but the calendar date does not exist (month 13, 30 February, ...).
    #[error("not an RFC 3339 date-time: {year:04}-{month:02}-{day:02} is not a calendar date")]
    Date {
        /// The year as written.
        year: u32,
        /// The month as written.
        month: u32,
        /// The day as written.
        day: u32,
    },
    /// Hour above 23, minute above 59 or second above 60.
    #[error("not an RFC 3339 date-time: time of day out of range")]
    Time,
    /// The offset's hour is above 23 or its minute above 59.
    #[error("not an RFC 3339 date-time: UTC offset out of range")]
    Offset,
}

/// Checks `text` against RFC 3339 `date-time`.
///
/// # Errors
///
/// [`TimestampError`] naming what is wrong.
pub fn check_rfc3339(text: &str) -> Result<(), TimestampError> {
    let bytes = text.as_bytes();
    let mut cursor = Cursor { bytes, at: 0 };

    let year = cursor.digits(4)?;
    cursor.literal(b'-')?;
    let month = cursor.digits(2)?;
    cursor.literal(b'-')?;
    let day = cursor.digits(2)?;
    cursor.one_of(b"Tt")?;
    let hour = cursor.digits(2)?;
    cursor.literal(b':')?;
    let minute = cursor.digits(2)?;
    cursor.literal(b':')?;
    let second = cursor.digits(2)?;
    if cursor.peek() == Some(b'.') {
        cursor.at += 1;
        let start = cursor.at;
        while cursor.peek().is_some_and(|b| b.is_ascii_digit()) {
            cursor.at += 1;
        }
        if cursor.at == start {
            return Err(TimestampError::Shape);
        }
    }
    match cursor.peek() {
        Some(b'Z' | b'z') => cursor.at += 1,
        Some(b'+' | b'-') => {
            cursor.at += 1;
            let offset_hour = cursor.digits(2)?;
            cursor.literal(b':')?;
            let offset_minute = cursor.digits(2)?;
            if offset_hour > 23 || offset_minute > 59 {
                return Err(TimestampError::Offset);
            }
        }
        Some(_) | None => return Err(TimestampError::Shape),
    }
    if cursor.at != bytes.len() {
        return Err(TimestampError::Shape);
    }

    if !(1..=12).contains(&month) || day == 0 || day > days_in_month(year, month) {
        return Err(TimestampError::Date { year, month, day });
    }
    if hour > 23 || minute > 59 || second > 60 {
        return Err(TimestampError::Time);
    }
    Ok(())
}

fn days_in_month(year: u32, month: u32) -> u32 {
    match month {
        2 if is_leap_year(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

fn is_leap_year(year: u32) -> bool {
    (year.is_multiple_of(4) && !year.is_multiple_of(100)) || year.is_multiple_of(400)
}

struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Cursor<'_> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    fn literal(&mut self, expected: u8) -> Result<(), TimestampError> {
        self.one_of(&[expected])
    }

    fn one_of(&mut self, expected: &[u8]) -> Result<(), TimestampError> {
        match self.peek() {
            Some(b) if expected.contains(&b) => {
                self.at += 1;
                Ok(())
            }
            Some(_) | None => Err(TimestampError::Shape),
        }
    }

    fn digits(&mut self, count: usize) -> Result<u32, TimestampError> {
        let mut value = 0_u32;
        for _ in 0..count {
            match self.peek() {
                Some(b) if b.is_ascii_digit() => {
                    value = value * 10 + u32::from(b - b'0');
                    self.at += 1;
                }
                Some(_) | None => return Err(TimestampError::Shape),
            }
        }
        Ok(value)
    }
}

#[cfg(test)]
mod tests {
    use super::{TimestampError, check_rfc3339};

    #[test]
    fn accepts_rfc3339_date_times() {
        for ok in [
            "2025-01-01T12:00:00Z",
            "2025-01-01t12:00:00z",
            "2025-01-01T12:00:00.123456789Z",
            "2025-06-30T23:59:60Z",
            "2024-02-29T00:00:00+01:00",
            "2000-02-29T00:00:00-23:59",
            "0001-01-01T00:00:00Z",
        ] {
            assert_eq!(check_rfc3339(ok), Ok(()), "{ok}");
        }
    }

    #[test]
    fn refuses_malformed_text() {
        for bad in [
            "",
            "2025-01-01",
            "2025-01-01 12:00:00Z",
            "2025-01-01T12:00:00",
            "2025-01-01T12:00Z",
            "2025-1-01T12:00:00Z",
            "2025-01-01T12:00:00.Z",
            "2025-01-01T12:00:00+0100",
            "2025-01-01T12:00:00+01",
            "2025-01-01T12:00:00Zjunk",
            " 2025-01-01T12:00:00Z",
            "2025-01-01T12:00:00ZZ",
            "２025-01-01T12:00:00Z",
            "1735732800",
        ] {
            assert_eq!(check_rfc3339(bad), Err(TimestampError::Shape), "{bad:?}");
        }
    }

    #[test]
    fn checks_the_calendar_clock_and_offset() {
        for (bad, expected) in [
            ("2025-13-01T00:00:00Z", "date"),
            ("2025-00-01T00:00:00Z", "date"),
            ("2025-02-29T00:00:00Z", "date"),
            ("1900-02-29T00:00:00Z", "date"),
            ("2025-04-31T00:00:00Z", "date"),
            ("2025-01-00T00:00:00Z", "date"),
            ("2025-01-01T24:00:00Z", "time"),
            ("2025-01-01T23:60:00Z", "time"),
            ("2025-01-01T23:59:61Z", "time"),
            ("2025-01-01T00:00:00+24:00", "offset"),
            ("2025-01-01T00:00:00-00:60", "offset"),
        ] {
            let kind = match check_rfc3339(bad) {
                Err(TimestampError::Date { .. }) => "date",
                Err(TimestampError::Time) => "time",
                Err(TimestampError::Offset) => "offset",
                Err(TimestampError::Shape) => "shape",
                Ok(()) => "ok",
            };
            assert_eq!(kind, expected, "{bad}");
        }
    }
}
