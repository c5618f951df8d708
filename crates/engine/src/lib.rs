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
//! nothing about settings files: the composition root hands it an [`EngineConfig`]. It creates
//! no process of its own: every program it starts, it starts through `corral-process`.

mod adapter;
mod attempt;
mod backoff;
mod classify;
mod commands;
mod config;
mod descriptor;
mod endpoints;
mod engine;
mod files;
mod framing;
mod gate;
mod headless;
mod interactive;
mod launch;
mod limits;
mod log;
mod reserve;
mod run;
mod streams;
mod tail;
mod text;
mod verdict;
mod version;
mod version_cache;

pub use adapter::{
    AttemptEvidence, AttemptPlan, ChildEnv, CliAdapter, CommandSpec, ConfiguredEndpoint, Diagnosis,
    Liveness, PromptDelivery, StreamParser, TerminalSummary, VersionCheck,
};
pub use backoff::{LONG_LIMIT, RetryPolicy, WaitBasis};
pub use classify::{AttemptClass, ClassifyInput, classify};
pub use config::EngineConfig;
pub use corral_process::{
    ArgvPlatform, ArgvTooLong, BoundedCommand, BoundedEnd, BoundedError, BoundedOutput, Breach,
    Captured, ChildInput, ChildOutput, ChildOutputs, EnvInherit, EnvPolicy, EnvProfile, ExitInfo,
    HOST_CWD, HostProgramError, LINUX_MAX_ARG_STRLEN, Limit, PreExecHook, ProviderSpawn,
    RUN_TOKEN_VAR, ResolvedEnv, ResourceLimits, SpawnRequest, SpawnedChild, StdinMode,
    TokioSpawner, WINDOWS_CMD_MAX, WINDOWS_CREATE_PROCESS_MAX, check_argv, env_block_bytes,
    group_alive, host_program, kill_child_groups, process_env, run_bounded, signal_group,
};
pub use corral_sandbox::{
    AllowList, AllowRule, BackendChoice, BackendReadiness, BadRule, Change, ChangeKind,
    EgressNeeds, EgressNote, GitCheckError, GitProgram, GitSnapshot, HomePolicy, NetworkPolicy,
    PROXY_ADDRESS_VAR, ProxyHonour, RUNTIME as CONTAINER_RUNTIME, Refusal, SandboxConfig,
    backend_limits_readiness, backend_readiness, bubblewrap_usable, container_limits,
    container_usable, git_snapshot, limits_readiness, sandbox_uid, strays,
};
pub use descriptor::{
    BuildProbe, BuildProvider, CliSettings, CommonFields, OptionValue, ProviderDescriptor,
    SettingError, SupervisedAi,
};
pub use endpoints::{ProviderEndpoints, allow_hint};
pub use engine::{Engine, SupervisedProvider};
pub use files::{
    PromptPointer, SessionMeta, Tampered, mint_session_uuid, persist_session, record_copy,
    repair_run_dir, write_atomic, write_prompt_pointer, write_record_file,
};
pub use framing::{Frame, LineFramer, OVERSIZED_PREFIX_BYTES};
pub use gate::{
    AccountHold, ProviderAccount, RATE_LIMIT_DIR, rate_limit_hold_schema, user_rate_limit_dir,
};
pub use headless::CONTINUATION_PROMPT;
pub use interactive::INTERACTIVE_PROMPT_FILE;
pub use limits::exceeded as limit_exceeded;
pub use log::{
    ExecutionLog, KillReason, LogLine, RunEnd, execution_log_schema, write_tampering_removed,
    write_task_finished,
};
pub use reserve::{RESERVE_PREFIX, create_reserve, release_reserve};
pub use streams::{OutputCapture, RAW_STREAMS_DIR, RawStreamRetention, StreamFiles};
pub use text::shorten;
pub use version::{VersionProbe, describe_cli, parse_version, probe_version, version_env};
pub use version_cache::{VERSION_CACHE_FILE, user_version_cache};
