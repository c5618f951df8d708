//! The ray executor of Corral's sprint: each task of a parallel run (`corral sprint run --jobs N
//! --executor ray`) is one job on a Ray cluster, submitted through the cluster's Jobs HTTP API
//! ([`jobs`]). The job's entrypoint is the worker `corral sprint work`, which clones the
//! sprint's repository from a git remote the cluster reaches, runs the task's rounds with the
//! same engine, sandbox and record, pushes its record after its long steps and its branch when
//! done; this executor fetches both back for the coordinator to fold, and hands the worker's
//! events (its `--json` lines in the job's log) to the coordinator's `events.jsonl`.
//!
//! It implements the sprint's [`TaskExecutor`](corral_sprint::TaskExecutor) port and knows
//! nothing else: not the local executor (a sibling crate), no provider, no process of its own
//! (git runs through the host's supervised runner), no settings file (its settings come built).

mod executor;
mod job_log;
pub mod jobs;

pub use executor::{KIND, RayExecutor, RaySettings};

pub use jobs::{JobInfo, JobStatus, JobSubmission, JobsClient, JobsError, RuntimeEnv};
