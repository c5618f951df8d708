//! Integration tests of the Copilot CLI adapter: the JSONL parser against every recorded sample
//! (insta snapshots) and against lines written here for shapes no sample shows, the exact command
//! lines for a fresh run (with a deterministic minted session id), a resume and each permission
//! combination, the prompt pointer, the failure patterns on the recorded failures, the environment
//! profile, minted ids, and the model probe. No test runs the real CLI.

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
mod mint;
mod parser;
mod probe;
