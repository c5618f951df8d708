//! Integration tests of the OpenCode adapter: the stream parser against every recorded sample
//! (insta snapshots) and against lines written here for shapes no sample shows, the exact command
//! lines for each session shape, the refusals of what OpenCode cannot honour, the failure patterns
//! on the recorded failures (ANSI-coloured stderr included), the environment profile, and the
//! model probe against scripts standing in for `opencode models`. No test runs the real CLI.

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
