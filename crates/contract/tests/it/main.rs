//! Contract integration tests: one binary, one module per concern.
//!
//! - `stages`: every validation stage, each with a test that fails if the stage broke.
//! - `rules`: the per-kind rules (garde) and the evaluation rules, with their JSON paths.
//! - `contracts`: kinds not accepted, multiplicities, collecting every issue.
//! - `life`: the kinds of the sprint's life (plan, refine, ideate, ready) and their rules.
//! - `render`: the prompt section (snapshot) and its example round-tripping for every contract.
//! - `corrective`: the corrective message (snapshot) and its cap.
//! - `sidecar`: `evaluation.md` and the signals summary (snapshots).
//! - `session_id`: reading `session-id.txt`.
//! - `schema`: the checked-in JSON Schema is current.

// Helpers outside `#[test]` functions unwrap and panic by design: a failing helper is a failing
// test. (clippy's allow-*-in-tests settings only cover `#[test]` bodies.)
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod contracts;
mod corrective;
mod life;
mod render;
mod rules;
mod schema;
mod session_id;
mod sidecar;
mod stages;
mod support;
