//! The supervised process engine: everything about running an AI coding CLI as a child process
//! that does not depend on which CLI it is.
//!
//! A provider adapter ([`CliAdapter`]) supplies its program, arguments, env profile, prompt
//! delivery, stream parser, failure classifiers and resume spelling; the [`Engine`] does the rest:
//! spawn in a new process group with an explicit environment and closed or prompt-fed stdin, the
//! idle watchdog and wall-clock limit, the kill ladder (SIGTERM, grace, SIGKILL to the group, plus
//! a sweep for descendants that left the group), bounded line framing, the execution log
//! (`events.jsonl`), `session-id.txt` written the moment the id is known, the exit classification
//! ladder, rate-limit backoff with session resume and the one stale-session cold retry, the argv
//! budget, prompt pointer files, and CLI version checks. It is also the ports' `CommandRunner`:
//! a caller's short commands (a sprint's check, gates and setup in the agent's sandbox, Corral's
//! own git on the host with the repository's configuration neutralised) run under the same
//! supervision.
//!
//! It knows nothing about any specific provider (no CLI's flags, stream format or wording) and
//! nothing about settings files: the composition root hands it an [`EngineConfig`]. It is the
//! only crate of the product that creates processes.

mod adapter;
mod argv;
mod attempt;
mod backoff;
mod bounded;
mod classify;
mod commands;
mod config;
mod descriptor;
mod driver_cache;
mod egress;
mod engine;
mod env;
mod files;
mod framing;
mod gate;
mod git_check;
mod headless;
mod host;
mod inside;
mod interactive;
mod launch;
mod log;
mod proc;
mod process_group;
mod run;
mod sandbox;
mod seccomp;
mod spawn;
mod streams;
mod tail;
mod text;
mod verdict;
mod version;
mod version_cache;
mod write_watch;

pub use adapter::{
    AttemptEvidence, AttemptPlan, ChildEnv, CliAdapter, CommandSpec, Diagnosis, Liveness,
    PromptDelivery, StreamParser, TerminalSummary, VersionCheck,
};
pub use argv::{
    ArgvPlatform, ArgvTooLong, LINUX_MAX_ARG_STRLEN, WINDOWS_CMD_MAX, WINDOWS_CREATE_PROCESS_MAX,
    check_argv, env_block_bytes,
};
pub use backoff::{RetryPolicy, WaitBasis};
pub use bounded::{BoundedCommand, BoundedEnd, BoundedError, BoundedOutput, Captured, run_bounded};
pub use classify::{AttemptClass, ClassifyInput, classify};
pub use config::{EngineConfig, process_env};
pub use descriptor::{
    BuildProbe, BuildProvider, CliSettings, CommonFields, OptionValue, ProviderDescriptor,
    SettingError, SupervisedAi,
};
pub use egress::{
    AllowList, AllowRule, BadRule, EgressError, EgressGate, EgressNeeds, EgressNote, EgressProxy,
    PROXY_ADDRESS_VAR, PROXY_PORT, ProxyHonour, UNSET_VARS as EGRESS_UNSET_VARS,
    hide_host_unix_sockets, namespace_args, proxy_address, proxy_env, write_node_preload,
};
pub use engine::{Engine, SupervisedProvider};
pub use env::{EnvInherit, EnvPolicy, EnvProfile, ResolvedEnv};
pub use files::{
    PromptPointer, SessionMeta, Tampered, mint_session_uuid, persist_session, record_copy,
    repair_run_dir, write_atomic, write_prompt_pointer, write_record_file,
};
pub use framing::{Frame, LineFramer, OVERSIZED_PREFIX_BYTES};
pub use gate::{AccountHold, ProviderAccount, RATE_LIMIT_DIR, user_rate_limit_dir};
pub use git_check::{
    Change, ChangeKind, GitCheckError, GitProgram, GitSnapshot, git_snapshot, strays,
};
pub use headless::CONTINUATION_PROMPT;
pub use host::{HOST_CWD, HostProgramError, host_program};
pub use interactive::INTERACTIVE_PROMPT_FILE;
pub use log::{
    ExecutionLog, KillReason, LogLine, RESERVE_PREFIX, RunEnd, create_reserve,
    execution_log_schema, release_reserve, write_tampering_removed, write_task_finished,
};
pub use process_group::{RUN_TOKEN_VAR, group_alive, kill_child_groups, signal_group};
pub use sandbox::{
    BackendChoice, HomePolicy, NetworkPolicy, Paths as SandboxPaths, Refusal, SandboxConfig,
    SandboxPlan, bubblewrap_usable, bwrap_args, plan as plan_sandbox,
    requested as requested_guarantees, sandbox_uid,
};
pub use spawn::{
    ChildInput, ChildOutput, ChildOutputs, ExitInfo, ProviderSpawn, SpawnRequest, SpawnedChild,
    StdinMode, TokioSpawner,
};
pub use streams::{OutputCapture, RAW_STREAMS_DIR, RawStreamRetention, StreamFiles};
pub use text::shorten;
pub use version::{VersionProbe, describe_cli, parse_version, probe_version, version_env};
pub use version_cache::{VERSION_CACHE_FILE, user_version_cache};
pub use write_watch::WatchChild as WriteWatchChild;
