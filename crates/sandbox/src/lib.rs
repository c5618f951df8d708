//! What a run may touch, how that is enforced, and the proof of what it touched.
//!
//! The sandbox plan and its refusals (`policy`: which backend, what it guarantees, the paths a
//! run may write and the ones it must not, placeholders and locks, bubblewrap's arguments), the
//! seccomp programs (`seccomp`), the check of a bubblewrap sandbox from inside it (`inside`), the
//! network confined to an allow-list through Corral's proxy (`egress`), the native backend's
//! write watch (`write_watch`, which plugs into a spawn as a `corral_process::PreExecHook`), and
//! git's cleanliness check with its neutral configuration (`git_check`, `driver_cache`).
//!
//! It never sees the execution log, the engine's configuration or a provider adapter: it takes
//! plain values and returns plans, notes and findings, and the engine records them. It starts
//! programs only through `corral-process`, and depends on no other crate of the workspace but
//! that and `corral-ports`.

pub mod cli;
pub mod command;
pub mod driver_cache;
pub mod egress;
pub mod git_check;
pub mod inside;
pub mod policy;
pub mod seccomp;
pub mod write_watch;

pub use cli::{CliLine, ConfinedCli, WrapCliError, WrappedCli, confine_cli, wrap_cli};
pub use command::{CommandLine, CommandSandbox, WrapError, WrappedCommand, wrap_command};
pub use egress::{
    AllowList, AllowRule, BadRule, EgressError, EgressGate, EgressNeeds, EgressNote, EgressProxy,
    PROXY_ADDRESS_VAR, PROXY_PORT, ProxyHonour, UNSET_VARS as EGRESS_UNSET_VARS,
    hide_host_unix_sockets, namespace_args, proxy_address, proxy_env, write_node_preload,
};
pub use git_check::{
    Change, ChangeKind, GitCheckError, GitProgram, GitSnapshot, git_snapshot, strays,
};
pub use policy::{
    BackendChoice, HomePolicy, NetworkPolicy, Paths as SandboxPaths, Refusal, SandboxConfig,
    SandboxPlan, bubblewrap_usable, bwrap_args, plan as plan_sandbox,
    requested as requested_guarantees, sandbox_uid,
};
