//! Integration tests of the Gemini adapter: the stream-json parser against every recorded sample
//! (insta snapshots) and against lines written here for shapes no sample shows, the exact command
//! lines, and the failure patterns on the recorded failures. No test here runs the real CLI; the
//! conformance suite in corral-cli does.

// Test code: a failed expectation should panic loudly, and matching "anything else" is the point.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::wildcard_enum_match_arm
)]

mod support;

mod argv;
mod diagnose;
mod parser;
