//! Starting and ending programs: the only crate of Corral that forks or execs, and the one that
//! reaps every child it starts.
//!
//! A spawn ([`TokioSpawner`] behind the [`ProviderSpawn`] port) gets a forced working directory,
//! an explicit environment, stdin that is the prompt, a pipe, `/dev/null` or the terminal, a new
//! process group, a group keeper that takes the group down with the supervisor, and the
//! caller's [`PreExecHook`]s run last before exec. Around it: what is done to a process group
//! once it runs (signals, liveness, the kill ladder, the sweep of processes that left it, the
//! registry of children not yet reaped), `/proc` readers, bounded commands (a short program run
//! to its end under a time limit, its output capped), the environment policy, the argv budget
//! the lookup of programs run on the host, and a forked helper that makes a few system calls
//! in another process's namespaces.
//!
//! It knows nothing of what a program is for: no AI CLI, no run, no sandbox, no execution log,
//! no settings. It depends on no other crate of the workspace; a feature that must act inside a
//! child between fork and exec (the native sandbox's write watch) plugs in as a hook.
//!
//! Errors are `thiserror` enums ([`BoundedError`], [`ArgvTooLong`], [`HostProgramError`]) whose
//! variants say whether trying again can help; a spawn's own failure is the operating system's
//! [`std::io::Error`].

pub mod argv;
pub mod bounded;
pub mod env;
pub mod fork;
pub mod host;
pub mod limits;
pub mod proc;
pub mod process_group;
pub mod spawn;

pub use argv::{
    ArgvPlatform, ArgvTooLong, LINUX_MAX_ARG_STRLEN, WINDOWS_CMD_MAX, WINDOWS_CREATE_PROCESS_MAX,
    check_argv, env_block_bytes,
};
pub use bounded::{
    AfterSpawn, BoundedCommand, BoundedEnd, BoundedError, BoundedOutput, Captured, run_bounded,
    run_bounded_blocking,
};
pub use env::{EnvInherit, EnvPolicy, EnvProfile, ResolvedEnv, process_env};
pub use fork::{ForkedHelper, fork_helper};
pub use host::{HOST_CWD, HostProgramError, host_env, host_program, resolve_program};
pub use limits::{Breach, Enforcement, Limit, LimitGroup, ResourceLimits, Usage};
pub use process_group::{RUN_TOKEN_VAR, group_alive, kill_child_groups, signal_group};
pub use spawn::{
    ChildInput, ChildOutput, ChildOutputs, ExitInfo, PreExecHook, ProviderSpawn, SpawnRequest,
    SpawnedChild, StdinMode, TokioSpawner,
};
