//! corral-executor-ray's integration tests, one binary, against a real two-node Ray cluster on
//! 127.0.0.1 (test-support's `ray_cluster`; skipped outside CI when Ray is not installed):
//! `jobs`, the Jobs API client.

// Helpers shared by the tests may fail loudly, as the tests themselves may.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod jobs;
