//! Integration tests of the composition root: layering, sources, validation errors, the schema,
//! the trust model of the project file, the factory, and a task run to a checked result.

// Test code: a failed expectation should panic loudly.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::wildcard_enum_match_arm
)]

mod contract_run;
mod factory;
mod layering;
mod role_agent;
mod run_record;
mod schema;
mod trust;
