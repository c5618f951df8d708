//! The engine as the ports' [`CommandRunner`]: a caller's short commands (a sprint's check, its
//! gates and setup step, Corral's own git) run to their end under the supervision an agent's
//! CLI gets, so that no other crate creates a process.
//!
//! Every command runs through [`corral_process::bounded`] with the engine's spawner: a process group of
//! its own, the working directory forced, `/dev/null` on stdin, both streams read at once and
//! capped, the kill ladder (SIGTERM, the configured grace, SIGKILL) for the whole group when the
//! time is up or the caller cancels, and a run token that finds the processes that left the
//! group. What differs is where it runs:
//!
//! * [`Confinement::Sandboxed`]: in the sandbox the agent gets, through the same face
//!   ([`corral_sandbox::Confinement`]: the same plan, refusal and bubblewrap arguments, the
//!   working directory writable, the check from inside before the command runs, and under
//!   `allowlist` Corral's egress proxy serving the user's `sandbox.network_allow` rules only; no
//!   network under `none`). The environment is the policy's: the core set and the user's
//!   allow-list (no secret-looking name), with the spec's variables on top.
//! * [`Confinement::HostGit`]: `git` on the host with the repository's power to run programs
//!   taken away, by the same configuration the git-cleanliness check uses (`git_check.rs`:
//!   [`corral_sandbox::NEUTRAL_CONFIG`], the filter and merge drivers emptied), plus no
//!   commit signing and no editor; a diff driver cannot be emptied (git refuses an empty one),
//!   so `diff`, `show` and `log` get `--no-ext-diff --no-textconv`. The arguments must start
//!   with the subcommand: an option before it could undo the neutralisation. The environment
//!   is `PATH` and `HOME`, the spec's variables (an identity for commits), then the
//!   neutralising ones.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use corral_ports::{
    CommandEnd, CommandError, CommandOutput, CommandRunner, CommandSpec, CommandStream, Confinement,
};
use corral_sandbox::{CommandLine, CommandRequest, Stopped, WrapError};
use tokio_util::sync::CancellationToken;

use crate::engine::Engine;
use corral_process::bounded::{
    AfterSpawn, BoundedCommand, BoundedError, Captured, Stop, run_until_started,
};
use corral_process::env::{EnvPolicy, EnvProfile};
use corral_process::spawn::{ChildOutputs, SpawnRequest, StdinMode};

/// The environment profile of a command: it names no credential.
const PROFILE: &str = "command";

/// git subcommands that would run a diff driver's program, and the flags that stop it.
const DIFF_SUBCOMMANDS: &[&str] = &["diff", "show", "log"];
const NO_DIFF_DRIVERS: &[&str] = &["--no-ext-diff", "--no-textconv"];

/// Configuration on top of the check's for Corral's own git: nothing signs, nothing edits.
const HOST_GIT_CONFIG: &[(&str, &str)] = &[
    ("commit.gpgSign", "false"),
    ("tag.gpgSign", "false"),
    ("core.editor", "true"),
    ("sequence.editor", "true"),
];

/// Variables on top, for the same reason (they outrank the configuration).
const HOST_GIT_ENV: &[(&str, &str)] = &[("GIT_EDITOR", "true"), ("GIT_SEQUENCE_EDITOR", "true")];

#[async_trait]
impl CommandRunner for Engine {
    async fn run(
        &self,
        spec: CommandSpec,
        cancel: &CancellationToken,
    ) -> Result<CommandOutput, CommandError> {
        if self.config().child_subreaper {
            corral_process::process_group::become_subreaper();
        }
        match spec.confinement {
            Confinement::Sandboxed => sandboxed(self, &spec, cancel).await,
            Confinement::HostGit => host_git(self, &spec, cancel).await,
        }
    }
}

/// A sandboxed command: confined by the sandbox as a run is (`corral_sandbox::Confinement`),
/// then supervised, the guard serving it once spawned; the sandbox's leftovers go once it
/// ended.
async fn sandboxed(
    engine: &Engine,
    spec: &CommandSpec,
    cancel: &CancellationToken,
) -> Result<CommandOutput, CommandError> {
    let config = engine.config();
    let refused = |refusal: corral_sandbox::Refusal| CommandError::Refused {
        program: spec.program.clone(),
        reason: format!("{}; {}", refusal.reason, refusal.hint),
    };
    let env = EnvPolicy {
        inherit: config.env_inherit,
        profile: EnvProfile::new(PROFILE, &[]),
        allow: config.env_allow.clone(),
        set: spec.env.clone(),
    }
    .resolve(config.ambient());
    let confinement = corral_sandbox::Confinement::for_command(CommandRequest {
        config: &config.sandbox,
        cwd: &spec.cwd,
        read_only: &spec.read_only,
    })
    .map_err(refused)?;
    let wrapped = confinement
        .wrap(CommandLine {
            program: std::path::Path::new(&spec.program),
            args: &args(spec),
            env: &env.vars,
        })
        .map_err(|e| match e {
            WrapError::NotFound | WrapError::NotPlanned => CommandError::Spawn {
                program: spec.program.clone(),
                reason: e.to_string(),
            },
            WrapError::Io { .. } => CommandError::Io {
                program: spec.program.clone(),
                reason: e.to_string(),
            },
        })?;
    let mut guard = wrapped.guard;
    let mut out = supervise(engine, spec, wrapped.request, cancel, Some(&mut guard)).await;
    // Asked before the guard ends: the limit the command's tree went over, which the guard's
    // watch ended it for (or the kernel's own end of it: a file over the disk limit).
    if let Ok(done) = &mut out {
        let exit = match done.end {
            CommandEnd::Exited(code) => Some(corral_process::spawn::ExitInfo {
                code: Some(code),
                signal: None,
            }),
            CommandEnd::Signalled(signal) => Some(corral_process::spawn::ExitInfo {
                code: None,
                signal: Some(signal),
            }),
            // Ended by the runner for its own reason: a breach is only what the watch saw.
            CommandEnd::TimedOut | CommandEnd::Cancelled | CommandEnd::LimitExceeded(_) => None,
        };
        let ended_by_runner = exit.is_none();
        if let Some(breach) = guard.limit_breach(exit)
            && (!ended_by_runner || done.end == CommandEnd::TimedOut)
        {
            tracing::warn!(program = %spec.program, limit = breach.limit.as_str(), what = %breach.what, "a command went over its limit and was ended");
            done.end = CommandEnd::LimitExceeded(crate::limits::exceeded(&breach));
        }
    }
    let started = guard.take_outcome();
    for note in guard.end() {
        tracing::debug!(?note, program = %spec.program, "sandboxed command");
    }
    confinement.finish().await;
    match started {
        Some(Err(Stopped { notes, refusal })) => {
            tracing::warn!(?notes, program = %spec.program, "the command's sandbox was stopped before it ran");
            Err(refused(refusal))
        }
        Some(Ok(notes)) => {
            tracing::debug!(?notes, program = %spec.program, "sandboxed command started");
            out
        }
        None => out,
    }
}

/// Corral's own git on the host, neutralised (see the module documentation).
async fn host_git(
    engine: &Engine,
    spec: &CommandSpec,
    cancel: &CancellationToken,
) -> Result<CommandOutput, CommandError> {
    let refuse = |reason: &str| CommandError::Refused {
        program: spec.program.clone(),
        reason: reason.to_string(),
    };
    if spec.program != "git" {
        return Err(refuse(
            "only git runs on the host; any other command runs sandboxed",
        ));
    }
    let Some(subcommand) = spec.args.first() else {
        return Err(refuse("git without a subcommand"));
    };
    if subcommand.starts_with('-') {
        return Err(refuse(
            "the arguments must start with the subcommand: an option before it (-c, -C, --exec-path, --git-dir) could undo the neutralised configuration; pass the directory as cwd and variables through env",
        ));
    }
    let base: Vec<(OsString, OsString)> = crate::version::version_env(engine.config().ambient())
        .into_iter()
        .chain(
            spec.env
                .iter()
                .map(|(k, v)| (OsString::from(k), OsString::from(v))),
        )
        .chain(
            HOST_GIT_ENV
                .iter()
                .map(|(k, v)| (OsString::from(k), OsString::from(v))),
        )
        .collect();
    let host_config: Vec<(String, String)> = HOST_GIT_CONFIG
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    // The drivers the repository defines, listed (reading configuration runs nothing) with
    // the same neutral configuration, then emptied for the command itself; the listing is
    // kept while the files it came from are unchanged (`driver_cache.rs`).
    let listing_env = corral_sandbox::neutral_env(base.clone(), &host_config);
    let (drivers, listed_in) = match engine.driver_cache().get(&spec.cwd, &listing_env) {
        Some(drivers) => (drivers, Duration::ZERO),
        None => match list_drivers(engine, spec, &listing_env, cancel).await? {
            Listing::Drivers { overrides, took } => (overrides, took),
            Listing::Stopped(out) => return Ok(out),
        },
    };
    let mut overrides = host_config;
    overrides.extend(drivers);
    let mut command = spec.clone();
    if DIFF_SUBCOMMANDS.contains(&subcommand.as_str()) {
        command
            .args
            .splice(1..1, NO_DIFF_DRIVERS.iter().map(|flag| (*flag).to_string()));
    }
    let remaining = spec.timeout.saturating_sub(listed_in);
    command.timeout = remaining;
    let out = supervise(
        engine,
        &command,
        git_request(&command, corral_sandbox::neutral_env(base, &overrides)),
        cancel,
        None,
    )
    .await?;
    Ok(CommandOutput {
        duration: out.duration + listed_in,
        ..out
    })
}

/// What listing the drivers came to.
enum Listing {
    /// The overrides that empty them, and the time the listing took.
    Drivers {
        overrides: Vec<(String, String)>,
        took: Duration,
    },
    /// A git command of the listing timed out or was cancelled: its output is the answer.
    Stopped(CommandOutput),
}

/// Lists the repository's drivers for `spec` with `env`, and keeps the listing in the
/// engine's cache when it can be (the layout asked and the files stamped before and after).
async fn list_drivers(
    engine: &Engine,
    spec: &CommandSpec,
    env: &[(OsString, OsString)],
    cancel: &CancellationToken,
) -> Result<Listing, CommandError> {
    let mut took = Duration::ZERO;
    let before = match layout(engine, spec, env, cancel, &mut took).await? {
        LayoutAnswer::Stopped(out) => return Ok(Listing::Stopped(out)),
        LayoutAnswer::Unknown => None,
        LayoutAnswer::Known(layout, taken) => Some((layout, taken)),
    };
    let listed = git_quietly(
        engine,
        spec,
        corral_sandbox::driver_cache::DRIVER_AND_INCLUDE_LISTING,
        env,
        cancel,
        &mut took,
    )
    .await?;
    match listed.end {
        // 1: no such key.
        CommandEnd::Exited(0 | 1) => {}
        CommandEnd::Exited(_) | CommandEnd::Signalled(_) => {
            return Err(CommandError::Io {
                program: spec.program.clone(),
                reason: format!(
                    "listing the repository's drivers failed ({:?}): {}",
                    listed.end,
                    listed.stderr.text.trim()
                ),
            });
        }
        CommandEnd::TimedOut | CommandEnd::Cancelled | CommandEnd::LimitExceeded(_) => {
            return Ok(Listing::Stopped(listed));
        }
    }
    let keys = listed.stdout.text.as_bytes();
    let overrides = corral_sandbox::driver_overrides(keys);
    if let Some((layout_before, taken_before)) = &before
        && !corral_sandbox::driver_cache::includes_any(keys)
    {
        match layout(engine, spec, env, cancel, &mut took).await? {
            LayoutAnswer::Stopped(out) => return Ok(Listing::Stopped(out)),
            LayoutAnswer::Unknown => {}
            LayoutAnswer::Known(layout_after, taken_after) => engine.driver_cache().keep(
                &spec.cwd,
                env,
                (layout_before, taken_before),
                (&layout_after, &taken_after),
                keys,
                &overrides,
            ),
        }
    }
    Ok(Listing::Drivers { overrides, took })
}

/// What asking git for the repository's layout came to.
enum LayoutAnswer {
    /// The layout, and its files stamped just after.
    Known(
        corral_sandbox::driver_cache::Layout,
        corral_sandbox::driver_cache::Taken,
    ),
    /// Not to be had (not a work tree, a file that cannot be read): nothing is kept.
    Unknown,
    /// git timed out or was cancelled: its output is the command's answer.
    Stopped(CommandOutput),
}

async fn layout(
    engine: &Engine,
    spec: &CommandSpec,
    env: &[(OsString, OsString)],
    cancel: &CancellationToken,
    took: &mut Duration,
) -> Result<LayoutAnswer, CommandError> {
    let out = git_quietly(
        engine,
        spec,
        corral_sandbox::driver_cache::LAYOUT_QUERY,
        env,
        cancel,
        took,
    )
    .await?;
    Ok(match out.end {
        CommandEnd::TimedOut | CommandEnd::Cancelled | CommandEnd::LimitExceeded(_) => {
            LayoutAnswer::Stopped(out)
        }
        CommandEnd::Exited(_) | CommandEnd::Signalled(_) => out
            .success()
            .then(|| corral_sandbox::driver_cache::Layout::parse(&out.stdout.text))
            .flatten()
            .and_then(|layout| {
                let taken = corral_sandbox::driver_cache::Taken::now(&layout, &spec.cwd)?;
                Some(LayoutAnswer::Known(layout, taken))
            })
            .unwrap_or(LayoutAnswer::Unknown),
    })
}

/// Runs git `args` (reading only) in `spec`'s directory with `env`, within what is left of
/// `spec`'s time; adds the time it took to `took`.
async fn git_quietly(
    engine: &Engine,
    spec: &CommandSpec,
    args: &[&str],
    env: &[(OsString, OsString)],
    cancel: &CancellationToken,
    took: &mut Duration,
) -> Result<CommandOutput, CommandError> {
    let command = CommandSpec {
        args: args.iter().map(|a| (*a).to_string()).collect(),
        output_limit: 1024 * 1024,
        timeout: spec.timeout.saturating_sub(*took),
        ..spec.clone()
    };
    let out = supervise(
        engine,
        &command,
        git_request(&command, env.to_vec()),
        cancel,
        None,
    )
    .await?;
    *took += out.duration;
    Ok(out)
}

/// `git --no-pager <args>` in the spec's directory with `env`.
fn git_request(spec: &CommandSpec, env: Vec<(OsString, OsString)>) -> SpawnRequest {
    let args = std::iter::once(OsString::from("--no-pager"))
        .chain(args(spec))
        .collect();
    request(spec, spec.program.clone().into(), args, env)
}

fn args(spec: &CommandSpec) -> Vec<OsString> {
    spec.args.iter().map(OsString::from).collect()
}

fn request(
    spec: &CommandSpec,
    program: PathBuf,
    args: Vec<OsString>,
    env: Vec<(OsString, OsString)>,
) -> SpawnRequest {
    SpawnRequest {
        program,
        args,
        env,
        cwd: spec.cwd.clone(),
        stdin: StdinMode::Null,
        parent_death_signal: true,
        inherit_fds: Vec::new(),
        output: ChildOutputs::Pipes,
        pre_exec: Vec::new(),
    }
}

/// Runs `request` as `spec` says (time, output cap) with the engine's kill grace and a run
/// token of its own.
async fn supervise(
    engine: &Engine,
    spec: &CommandSpec,
    request: SpawnRequest,
    cancel: &CancellationToken,
    after: Option<&mut dyn AfterSpawn>,
) -> Result<CommandOutput, CommandError> {
    let command = BoundedCommand {
        request,
        timeout: spec.timeout,
        kill_grace: engine.config().kill_grace,
        stdout_limit: spec.output_limit,
        stderr_limit: spec.output_limit,
        run_token: Some(format!(
            "command-{}-{:016x}",
            std::process::id(),
            fastrand::u64(..)
        )),
    };
    let started = Instant::now();
    let (stop, stdout, stderr) = run_until_started(engine.spawner(), &command, cancel, after)
        .await
        .map_err(|e| match e {
            BoundedError::Spawn { source, .. } => CommandError::Spawn {
                program: spec.program.clone(),
                reason: source.to_string(),
            },
            BoundedError::Read { source, .. } | BoundedError::Wait { source, .. } => {
                io_error(spec, &source)
            }
        })?;
    let end = match stop {
        // Killed before it ran; the sandbox's guard says why, and the caller reports that.
        Stop::Refused => CommandEnd::Signalled(nix::sys::signal::Signal::SIGKILL as i32),
        Stop::TimedOut => CommandEnd::TimedOut,
        Stop::Cancelled => CommandEnd::Cancelled,
        Stop::Exited(exit) => match (exit.code, exit.signal) {
            (Some(code), _) => CommandEnd::Exited(code),
            (None, Some(signal)) => CommandEnd::Signalled(signal),
            (None, None) => {
                return Err(CommandError::Io {
                    program: spec.program.clone(),
                    reason: "it ended with neither an exit code nor a signal".to_string(),
                });
            }
        },
    };
    let duration = started.elapsed();
    tracing::debug!(program = %spec.program, ?end, ?duration, "command finished");
    Ok(CommandOutput {
        end,
        stdout: stream(stdout),
        stderr: stream(stderr),
        duration,
    })
}

fn stream(captured: Captured) -> CommandStream {
    CommandStream {
        text: captured.text(),
        total_bytes: captured.total,
    }
}

fn io_error(spec: &CommandSpec, e: &std::io::Error) -> CommandError {
    CommandError::Io {
        program: spec.program.clone(),
        reason: e.to_string(),
    }
}
