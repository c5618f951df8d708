//! Integration tests of the `corral` binary: help, bad input, settings, runs, doctor, and
//! completions, with insta snapshots of what a person sees.

// Test code: a failed expectation should panic loudly.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::wildcard_enum_match_arm
)]

mod support;

mod bad_input;
mod claude_contract;
mod commands;
