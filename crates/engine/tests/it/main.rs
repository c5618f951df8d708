//! Engine integration tests: the real engine drives the fake agent program through every fault
//! it must survive. Each test checks the outcome class, that the execution log is complete and
//! parseable, that `session-id.txt` exists where an id was seen, and that no process of the
//! run's tree is left.

// Test code: a failed expectation should panic loudly, and matching "anything else" is the point.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::wildcard_enum_match_arm
)]

mod support;

mod bounded;
mod commands;
mod egress;
mod embedding;
mod faults;
mod git_check;
mod interactive;
mod limits;
mod liveness;
mod pdeathsig;
mod refusals;
mod retries;
mod sandbox;
mod scale;
mod streams;
