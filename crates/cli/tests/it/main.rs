//! Integration tests of the `corral` binary: help, bad input, settings, runs, doctor, and
//! completions, with insta snapshots of what a person sees; and the real-CLI suites: the
//! conformance cases every provider's CLI must pass, Claude Code's own contract, and giant
//! replies and writes that must lose nothing (`lossless.rs`); and the sandbox's probe suite, as
//! root and as an unprivileged user (`probes.rs`); and `corral sprint run` through the real CLIs
//! (`sprint_cases.rs`, which assert the command is still missing until it exists); and
//! `corral sprint plan` and `corral sprint pr` through the real CLIs (`sprint_plan.rs`,
//! `sprint_pr.rs`), and `refine` (on a pseudo-terminal too), `ideate`, `ready` and the life in
//! `sprint status` (`sprint_life.rs`).

// Test code: a failed expectation should panic loudly.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::wildcard_enum_match_arm
)]

mod providers;
mod support;
mod unlucky;

mod account_gate;
mod bad_input;
mod claude_contract;
mod codex_limit;
mod commands;
mod conformance;
mod daily;
mod endpoints;
mod hostile;
mod knobs;
mod limits;
mod live_view;
mod lossless;
mod preflight;
mod probes;
mod ray;
mod resume;
mod sandbox_holds;
mod schemas;
mod sprint;
mod sprint_cases;
mod sprint_life;
mod sprint_plan;
mod sprint_pr;
mod sprint_queue;
mod sprint_work;
