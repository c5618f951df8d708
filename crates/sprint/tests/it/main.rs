//! The sprint crate's one integration-test binary: the sprint file as a user writes it, the
//! state on disk, and the flow with fake agents and real git.

// Test code: a failed expectation should panic loudly.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::wildcard_enum_match_arm
)]

mod extract;
mod failures;
mod file;
mod flow;
mod life;
mod state;
