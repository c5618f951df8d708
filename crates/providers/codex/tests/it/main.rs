//! Integration tests of the Codex adapter: the stream parser against every recorded sample (insta
//! snapshots) and against lines written here for shapes no sample shows, the exact command lines
//! for each session shape and permission combination, the failure patterns on the recorded
//! failures, the environment profile, and the model probe. No test runs the real CLI.

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
mod env;
mod parser;
mod probe;
