//! What a run may touch, how that is enforced, and the proof of what it touched.
//!
//! Its one face is [`Confinement`] (`confinement`): opened for a CLI's run or for a caller's
//! short command, it plans the sandbox (or refuses), wraps one command line into a spawn request
//! and a [`SpawnGuard`] that serves the spawned child (the egress proxy, the check from inside),
//! and finishes with the stray writes. Behind it, private to the crate: the plan, its refusals,
//! the paths a run may write and the ones it must not, placeholders and locks, bubblewrap's
//! arguments (`policy`), the one wrapping every sandboxed line goes through (`wrap`) and what a
//! CLI (`cli`) and a command (`command`) hand it, the seccomp
//! programs (`seccomp`), the probe that checks a bubblewrap sandbox from inside it (`inside`),
//! the network confined to an allow-list through Corral's proxy (`egress`), the native backend's
//! write watch (`write_watch`, a `corral_process::PreExecHook`), and git's cleanliness check
//! (`git_check`). What callers fill in (the settings, an adapter's egress needs) and what the
//! host git of the engine's command runner uses (the neutral configuration, `driver_cache`) is
//! exported as vocabulary.
//!
//! It never sees the execution log, the engine's configuration or a provider adapter: it takes
//! plain values and returns notes, findings and refusals, and the engine records them. It
//! starts programs only through `corral-process`, and depends on no other crate of the
//! workspace but that, `corral-ports` and `corral-hostfs`.

mod cli;
mod command;
mod confinement;
mod container;
pub mod driver_cache;
mod egress;
mod error;
mod git_check;
mod inside;
mod podman;
mod policy;
mod seccomp;
mod wrap;
mod write_watch;

pub use confinement::{
    CliNeeds, CommandLine, CommandRequest, Confinement, Findings, Note, RunRequest, SpawnGuard,
    Stopped, WrapError, Wrapped,
};
pub use container::{backend_limits_readiness, container_limits};
pub use egress::{
    AllowList, AllowRule, BadRule, EgressNeeds, EgressNote, PROXY_ADDRESS_VAR, ProxyHonour,
};
pub use git_check::{
    Change, ChangeKind, GitCheckError, GitProgram, GitSnapshot, NEUTRAL_CONFIG, driver_overrides,
    git_snapshot, neutral_env, strays,
};
pub use podman::{PODMAN, RUNTIME, container_usable};
pub use policy::{
    BackendChoice, BackendReadiness, HomePolicy, NetworkPolicy, Refusal, SandboxConfig,
    backend_readiness, bubblewrap_usable, limits_readiness, record_paths, sandbox_uid,
};
