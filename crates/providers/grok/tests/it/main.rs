//! Integration tests of the Grok adapter: the message-line parser against every recorded sample
//! (insta snapshots) and against lines written here for shapes no sample shows, the exact command
//! lines, the failure patterns on the recorded failures, the environment profile, the liveness
//! rule and capability row, the model probe, and the adapter driven by the real engine with a
//! shell script replaying recorded output. No test runs the real CLI.

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
mod supervised;
