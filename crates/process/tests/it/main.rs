//! The integration tests of `corral-process`: what a spawn does to the real machine.

// Test code: a failed expectation should panic loudly.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod limits;
