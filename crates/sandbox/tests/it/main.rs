//! The integration tests of `corral-sandbox`: what a confined spawn may do on the real machine.

// Test code: a failed expectation should panic loudly.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod container;
mod limits;
