//! The headless run: refusals that need no process, the version check and the prompt pointer,
//! then attempts until the verdict ends the run.
//!
//! One attempt is: the adapter's command, launched (`launch.rs`) with the prompt or a
//! continuation on stdin, supervised to its end (`attempt.rs`), read by the adapter's
//! classifiers and the classification ladder (`classify.rs`); the verdict (`verdict.rs`) says
//! whether to back off and resume, retry cold, or stop, and [`conclude`] turns the stop into the
//! ports' result.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use corral_ports::{AiSession, ProviderError, ProviderOutput, RunEvidence, RunObserver, SessionId};

use crate::adapter::{AttemptEvidence, AttemptPlan, CliAdapter, PromptDelivery, VersionCheck};
use crate::attempt::{AttemptContext, AttemptResult, supervise};
use crate::backoff::WaitBasis;
use crate::classify::{AttemptClass, ClassifyInput, classify};
use crate::config::EngineConfig;
use crate::files::{PromptPointer, SessionMeta, write_prompt_pointer};
use crate::gate::{self, Hold, ProviderAccount};
use crate::launch::{Launch, Spawned, launch, spawn};
use crate::log::Record;
use crate::run::{Finished, RunScope};
use crate::streams::{Follower, OutputCapture};
use crate::verdict::{Progress, Step, Verdict, step};
use crate::version::{VersionProbe, probe_version, version_env};
use crate::version_cache::{self, BinaryStamp};
use corral_process::host::{HOST_CWD, host_program};
use corral_process::spawn::ProviderSpawn;
use corral_process::spawn::{ChildOutputs, StdinMode};

/// What a resumed attempt is told after a rate limit interrupted the session: the task is
/// already in the conversation, so the full prompt is not sent again.
pub const CONTINUATION_PROMPT: &str = "Your previous turn was interrupted by a rate limit before it finished. Continue the task from where you stopped; the instructions given earlier in this conversation still apply.\n";

/// Runs `session` through `adapter`'s CLI to the end.
pub(crate) async fn run(
    config: &EngineConfig,
    spawner: &Arc<dyn ProviderSpawn>,
    adapter: &dyn CliAdapter,
    session: AiSession,
    observer: Arc<dyn RunObserver>,
) -> Result<ProviderOutput, ProviderError> {
    let mut scope = RunScope::open(config, spawner, adapter, session)?;
    let result = attempts(&mut scope, &observer).await;
    scope.end(result, |out| out.attestation.as_mut()).await
}

/// Everything between `run_started` and the verdict.
async fn attempts(
    scope: &mut RunScope<'_>,
    observer: &Arc<dyn RunObserver>,
) -> Result<ProviderOutput, ProviderError> {
    scope.begin().await?;
    refuse_unresumable(scope)?;
    scope.plan_sandbox()?;
    scope.refuse_unlisted_endpoints()?;
    let cli_version = match scope.adapter.version_check() {
        Some(check) => Some(check_version(scope, &check).await?),
        None => None,
    };
    let mut pointer = write_pointer(scope, &scope.session.prompt)?;
    let config = scope.config();
    let attempts_before = scope.session.task.map_or(0, |t| t.attempts_before);
    let mut progress = Progress::new(
        scope.session.resume.clone(),
        config.jitter_seed,
        attempts_before,
    );
    // Without the cold fallback, a stale session ends the run at once, as if the one cold run
    // had been spent.
    progress.stale_fallback_used = !scope.session.cold_fallback;
    let account = ProviderAccount::of(scope.config(), scope.provider, &scope.adapter.env_profile());
    loop {
        let attempt = progress.next_attempt();
        match wait_for_account(scope, observer, account.as_ref(), attempt).await {
            AccountWait::Free => {}
            AccountWait::Cancelled => {
                return conclude(
                    scope,
                    Verdict::Cancelled,
                    &AttemptResult::default(),
                    progress,
                );
            }
            AccountWait::Stopped { until_epoch_ms } => {
                // Nothing ran: the attempt is not counted.
                progress.attempt -= 1;
                let verdict = Verdict::RateLimited {
                    resets_at_epoch_s: Some(until_epoch_ms.div_ceil(1000)),
                    auto_resume_off: true,
                };
                return conclude(scope, verdict, &AttemptResult::default(), progress);
            }
        }
        observer.attempt_started(attempt, progress.resume.as_ref());
        let context = AttemptInputs {
            pointer: pointer.as_ref(),
            cli_version: cli_version.as_deref(),
            observer,
            account: account.as_ref(),
        };
        let result = one_attempt(scope, &context, &mut progress).await?;
        progress.absorb(&result);
        let class = judge(scope, attempt, &result, progress.resume.as_ref());
        tracing::debug!(
            attempt,
            exit = ?result.exit,
            killed_by = ?result.killed_by,
            session = result.session_id.as_ref().map(SessionId::as_str),
            class = ?class,
            "attempt ended"
        );
        match step(
            class,
            result.session_id.as_ref(),
            &mut progress,
            &config.retry,
        ) {
            Step::Backoff { wait, basis } => {
                let until = gate::epoch_ms(SystemTime::now() + wait);
                hold_account(scope, account.as_ref(), attempt, until, basis.as_str());
                if !back_off(scope, observer, &progress, wait, basis).await {
                    return conclude(scope, Verdict::Cancelled, &result, progress);
                }
            }
            Step::ColdRetry { stale } => {
                if let Some(stale) = stale {
                    observer.cold_fallback(attempt, &stale);
                    scope.log.record(
                        attempt,
                        &Record::ColdRetry {
                            stale_session: &stale,
                        },
                    );
                }
                // A pointer file held the resume prompt; the new session needs the whole task.
                if let Some(cold) = scope.session.cold_prompt.clone() {
                    pointer = write_pointer(scope, &cold)?;
                }
            }
            Step::Done(verdict) => {
                // A reset too far away to wait for still holds the account's other runs.
                if let Verdict::RateLimited {
                    resets_at_epoch_s: Some(reset),
                    ..
                } = verdict
                {
                    let until = reset.saturating_mul(1000);
                    let basis = WaitBasis::ResetTime.as_str();
                    hold_account(scope, account.as_ref(), attempt, until, basis);
                }
                return conclude(scope, verdict, &result, progress);
            }
        }
    }
}

/// Tells the gate that this run's account is limited until `until_epoch_ms`. A gate that cannot
/// be written costs the other runs their own 429s, not this run its result: it is a warning.
fn hold_account(
    scope: &mut RunScope<'_>,
    account: Option<&ProviderAccount>,
    attempt: u32,
    until_epoch_ms: u64,
    basis: &str,
) {
    let Some(account) = account else {
        return;
    };
    let hold = Hold {
        until_epoch_ms,
        basis: basis.to_string(),
        set_by: scope.token(attempt),
    };
    if let Err(e) = account.record_hold(&hold) {
        tracing::warn!(error = %e, "could not record the rate-limit hold for the account");
        return;
    }
    scope.log.record(
        attempt,
        &Record::RateLimitHold {
            until_epoch_ms,
            basis,
        },
    );
}

/// How the wait for the account's hold ended.
enum AccountWait {
    /// No hold, or it passed: the attempt may start.
    Free,
    /// The caller cancelled meanwhile.
    Cancelled,
    /// The hold is a long limit and auto-resume is off, or longer than the hand-over wait:
    /// the run stops without an attempt.
    Stopped {
        /// When the hold ends.
        until_epoch_ms: u64,
    },
}

/// Waits until the account's hold has passed, when another run recorded one. A hold further
/// away than the longest reset wait is not waited for: the attempt runs and learns the limit for
/// itself, as a run with no gate would. A long hold with auto-resume off stops the run.
async fn wait_for_account(
    scope: &mut RunScope<'_>,
    observer: &Arc<dyn RunObserver>,
    account: Option<&ProviderAccount>,
    attempt: u32,
) -> AccountWait {
    let Some(account) = account else {
        return AccountWait::Free;
    };
    let Some(hold) = account.read() else {
        return AccountWait::Free;
    };
    // This run's own hold is its backoff, already slept to its end: it has passed.
    let Some(wait) = gate::remaining(hold.until_epoch_ms, SystemTime::now()) else {
        return AccountWait::Free;
    };
    // Checked before the longest reset wait: a hold too long to wait for is one to stop at (or
    // hand over) all the more, rather than spend an attempt learning it again.
    if scope.config().retry.stops_at(wait) {
        scope.log.record(
            attempt,
            &Record::Classified {
                class: "rate-limited",
                detail: format!(
                    "the account is held until {} UTC (set by {}), {}: stopped instead of waiting",
                    gate::clock_utc(hold.until_epoch_ms),
                    hold.set_by,
                    scope.config().retry.stop_reason(wait),
                ),
            },
        );
        return AccountWait::Stopped {
            until_epoch_ms: hold.until_epoch_ms,
        };
    }
    if wait > scope.config().retry.max_reset_wait {
        return AccountWait::Free;
    }
    let provider = account.provider();
    scope.log.record(
        attempt,
        &Record::RateLimitWait {
            provider: provider.as_str(),
            until_epoch_ms: hold.until_epoch_ms,
            wait_ms: wait.as_millis() as u64,
            set_by: &hold.set_by,
        },
    );
    scope.log.flush();
    tracing::info!(
        provider = provider.as_str(),
        until = gate::clock_utc(hold.until_epoch_ms),
        set_by = hold.set_by,
        "waiting for the provider account's rate limit"
    );
    observer.account_wait(
        attempt,
        provider,
        UNIX_EPOCH + Duration::from_millis(hold.until_epoch_ms),
    );
    let cancelled = tokio::select! {
        () = tokio::time::sleep(wait) => false,
        () = scope.session.cancel.cancelled() => true,
    };
    if cancelled {
        scope.log.record(
            attempt,
            &Record::Classified {
                class: "cancelled",
                detail: "cancelled while waiting for the account's rate limit".into(),
            },
        );
        return AccountWait::Cancelled;
    }
    AccountWait::Free
}

/// A CLI that cannot resume is refused before anything runs (not even its version probe).
fn refuse_unresumable(scope: &mut RunScope<'_>) -> Result<(), ProviderError> {
    let Some(id) = &scope.session.resume else {
        return Ok(());
    };
    if scope.adapter.capabilities().resume {
        return Ok(());
    }
    let err = ProviderError::InvalidSession {
        provider: scope.provider,
        reason: format!(
            "{} has no headless resume, so session {id} cannot be continued",
            scope.provider
        ),
        hint: Some("start a new session instead".to_string()),
    };
    Err(scope.refuse("invalid-session", err))
}

/// Asks the CLI for its version and refuses one outside the tested range, unless overridden. A
/// CLI that does not answer in time is refused as such (its version is unknown, not wrong); the
/// untested-version override lets it run all the same, as before.
async fn check_version(
    scope: &mut RunScope<'_>,
    check: &VersionCheck,
) -> Result<String, ProviderError> {
    // The probe runs on the host: never a program the agent could have put in its work tree,
    // never with the work tree as its working directory.
    let env = version_env(scope.config().ambient());
    let path_var = env
        .iter()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.clone());
    let mut writable: Vec<&std::path::Path> = vec![&scope.session.cwd, &scope.session.output_dir];
    writable.extend(scope.session.extra_roots.iter().map(|p| p.as_path()));
    let program = match host_program(&check.program, path_var.as_deref(), &writable) {
        Ok(program) => program,
        Err(e) => {
            let err = ProviderError::CliNotFound {
                provider: scope.provider,
                program: check.program.display().to_string(),
                reason: e.to_string(),
            };
            return Err(scope.refuse("cli-not-found", err));
        }
    };
    let cache = scope.config().version_cache.as_deref();
    let stamp = cache.and_then(|_| BinaryStamp::of(&program, &check.args));
    let remembered = match (cache, &stamp) {
        (Some(cache), Some(stamp)) => version_cache::cached(cache, stamp),
        _ => None,
    };
    let from_cache = remembered.is_some();
    let probe = match remembered {
        Some(version) => VersionProbe::Found(version),
        None => {
            let probe = probe_version(
                scope.spawner.as_ref(),
                &program,
                &check.args,
                env,
                std::path::Path::new(HOST_CWD),
                check.timeout,
            )
            .await;
            if let (Some(cache), Some(stamp), VersionProbe::Found(version)) =
                (cache, &stamp, &probe)
            {
                version_cache::remember(cache, stamp, version);
            }
            probe
        }
    };
    let required = check.required.to_string();
    let program = check.program.display().to_string();
    let (found, accepted) = match &probe {
        VersionProbe::Found(v) => (v.to_string(), check.required.matches(v)),
        VersionProbe::Unparsed(text) => (format!("unparsed output {text:?}"), false),
        VersionProbe::TimedOut => (format!("no answer within {:?}", check.timeout), false),
        VersionProbe::SpawnFailed(e) => {
            return Err(ProviderError::CliNotFound {
                provider: scope.provider,
                program,
                reason: e.clone(),
            });
        }
    };
    scope.log.record(
        scope.before_attempts(),
        &Record::VersionChecked {
            program: &program,
            found: Some(&found),
            required: &required,
            accepted,
            overridden: !accepted && check.allow_mismatch,
            cached: from_cache,
        },
    );
    tracing::debug!(
        %program,
        %found,
        %required,
        accepted,
        cached = from_cache,
        "the CLI's version"
    );
    if accepted || check.allow_mismatch {
        return Ok(found);
    }
    scope.log.flush();
    Err(match probe {
        VersionProbe::TimedOut => ProviderError::VersionProbeTimedOut {
            provider: scope.provider,
            program,
            args: check.args.join(" "),
            waited: check.timeout,
        },
        VersionProbe::Found(_) | VersionProbe::Unparsed(_) | VersionProbe::SpawnFailed(_) => {
            ProviderError::VersionMismatch {
                provider: scope.provider,
                program,
                found,
                required,
            }
        }
    })
}

/// Writes `prompt` to the prompt pointer file for a CLI that cannot read its prompt from stdin.
fn write_pointer(
    scope: &RunScope<'_>,
    prompt: &str,
) -> Result<Option<PromptPointer>, ProviderError> {
    match scope.adapter.prompt_delivery() {
        PromptDelivery::Stdin => Ok(None),
        PromptDelivery::PointerFile { file_name } => {
            let dir = scope.pointer_dir();
            write_prompt_pointer(dir, file_name, prompt)
                .map(Some)
                .map_err(|e| scope.io_error(dir, &e))
        }
    }
}

/// What every attempt of a run shares.
struct AttemptInputs<'a> {
    pointer: Option<&'a PromptPointer>,
    cli_version: Option<&'a str>,
    observer: &'a Arc<dyn RunObserver>,
    /// The account the CLI's own rate-limit retries hold in the gate.
    account: Option<&'a ProviderAccount>,
}

/// Launches, spawns and supervises one attempt.
async fn one_attempt(
    scope: &mut RunScope<'_>,
    inputs: &AttemptInputs<'_>,
    progress: &mut Progress,
) -> Result<AttemptResult, ProviderError> {
    let attempt = progress.attempt;
    let spec = scope.adapter.command(&AttemptPlan {
        session: &scope.session,
        resume: progress.resume.as_ref(),
        attempt,
        pointer: inputs.pointer,
    })?;
    let token = scope.token(attempt);
    // A pointer-file CLI reads its prompt from the file, resumed or not: the file holds the task.
    let (stdin_prompt, stdin_label): (Option<Arc<str>>, &str) =
        match scope.adapter.prompt_delivery() {
            PromptDelivery::Stdin if progress.continues() => {
                (Some(Arc::from(CONTINUATION_PROMPT)), "continuation")
            }
            PromptDelivery::Stdin if progress.gone_cold() => match &scope.session.cold_prompt {
                Some(cold) => (Some(Arc::clone(cold)), "cold-prompt"),
                None => (Some(Arc::clone(&scope.session.prompt)), "prompt"),
            },
            PromptDelivery::Stdin => (Some(Arc::clone(&scope.session.prompt)), "prompt"),
            PromptDelivery::PointerFile { .. } => (None, "null"),
        };
    let stdin = match &stdin_prompt {
        Some(prompt) => StdinMode::Prompt(Arc::clone(prompt)),
        None => StdinMode::Null,
    };
    let mut launched = launch(scope, &spec, &token, stdin, Vec::new())?;
    let follower = follow_stream_files(scope, attempt, &mut launched)?;
    let Spawned { child, mut guard } = spawn(
        scope,
        attempt,
        launched,
        stdin_label,
        progress.resume.as_ref(),
    )
    .await?;
    let egress_notes = guard.egress_notes();
    let provider = scope.provider.as_str();
    let cwd = scope.session.cwd.clone();
    let model = scope.session.model.clone();
    let cli_version = inputs.cli_version.map(str::to_string);
    let meta = move |id: &SessionId| SessionMeta {
        session_id: id.clone(),
        provider: provider.to_string(),
        model: model.clone(),
        cwd: cwd.clone(),
        cli_version: cli_version.clone(),
        attempt,
    };
    let parser = scope.adapter.parser();
    let liveness = scope.adapter.liveness();
    let config = scope.config();
    let mut result = supervise(
        child,
        stdin_prompt,
        AttemptContext {
            attempt,
            config,
            log: &mut scope.log,
            observer: inputs.observer,
            cancel: &scope.session.cancel,
            parser,
            persisted: &mut progress.persisted,
            session_meta: &meta,
            output_dir: &scope.session.output_dir,
            run_token: &token,
            liveness,
            minted_session: spec.session_id.clone(),
            egress_notes,
            follower,
            provider: scope.provider,
            account: inputs.account,
        },
    )
    .await;
    // Asked before the guard ends: the limit the tree went over, which the guard's watch ended
    // it for (or the kernel's own end of it: a file over the disk limit).
    result.limit_breach = guard.limit_breach(result.exit);
    // Only now, with the child reaped: the guard's proxy holds bubblewrap's status pipe open.
    scope.spawn_ended(attempt, guard);
    Ok(result)
}

/// With [`OutputCapture::Files`]: the attempt's stream files, created and watched before the
/// spawn (so no write goes unnoticed), given to the child, recorded, and kept for the retention.
fn follow_stream_files(
    scope: &mut RunScope<'_>,
    attempt: u32,
    launched: &mut Launch,
) -> Result<Option<Follower>, ProviderError> {
    match scope.config().capture {
        OutputCapture::Pipes => return Ok(None),
        OutputCapture::Files => {}
    }
    let raw = match &scope.raw_dir {
        Some(raw) => raw.clone(),
        None => {
            let dir = &scope.session.output_dir;
            let raw = crate::streams::open_dir(dir).map_err(|e| scope.io_error(dir, &e))?;
            scope.raw_dir = Some(raw.clone());
            raw
        }
    };
    let files = crate::streams::create(&raw).map_err(|e| scope.io_error(&raw.path, &e))?;
    let follower = Follower::new(&files);
    launched.request.output = ChildOutputs::Files {
        stdout: Arc::clone(&files.stdout),
        stderr: Arc::clone(&files.stderr),
    };
    scope.log.record(
        attempt,
        &Record::StreamFiles {
            stdout: &files.stdout_path,
            stderr: &files.stderr_path,
            follow: if follower.uses_inotify() {
                "inotify"
            } else {
                "poll"
            },
        },
    );
    scope.raw_streams.extend(files.raw_files());
    Ok(Some(follower))
}

/// The adapter's reading of the attempt and the classification ladder, recorded.
fn judge(
    scope: &mut RunScope<'_>,
    attempt: u32,
    result: &AttemptResult,
    resumed: Option<&SessionId>,
) -> AttemptClass {
    let diagnosis = scope.adapter.diagnose(&AttemptEvidence {
        exit: result.exit,
        terminal: result.terminal.as_ref(),
        stderr_tail: &result.stderr_tail,
        stdout_tail: &result.stdout_tail,
        resumed,
        rate_limits: &result.rate_limits,
    });
    let terminal_expected = scope.adapter.capabilities().always_terminal_event;
    // Corral's proxy answers a refusal with a 403 whose body names the target: a failure that
    // echoes it, or reads as an HTTP 403, is the proxy's doing, not the account's.
    let terminal_text = result
        .terminal
        .as_ref()
        .and_then(|t| t.text.as_deref())
        .unwrap_or_default();
    let saw_403 = result
        .terminal
        .as_ref()
        .is_some_and(|t| t.api_status == Some(403))
        || diagnosis
            .refused
            .as_deref()
            .is_some_and(|m| m.contains("403"));
    let egress_refused = result.egress_refused.cause(
        &[&result.stderr_tail, &result.stdout_tail, terminal_text],
        saw_403,
    );
    let class = classify(&ClassifyInput {
        killed_by: result.killed_by,
        terminal: result.terminal.as_ref(),
        exit: result.exit,
        diagnosis: &diagnosis,
        rate_limit_events: &result.rate_limits,
        signals_present: scope.signals_present(),
        resumed: resumed.is_some(),
        egress_refused: egress_refused.as_ref(),
        terminal_expected,
        cli_retry_after_ms: result.cli_retry_after_ms,
        limit_breach: result.limit_breach.as_ref(),
    });
    scope.log.record(
        attempt,
        &Record::Classified {
            class: class.as_str(),
            detail: describe(result, terminal_expected),
        },
    );
    class
}

/// Sleeps before a resumed attempt; `false` when the caller cancelled meanwhile.
async fn back_off(
    scope: &mut RunScope<'_>,
    observer: &Arc<dyn RunObserver>,
    progress: &Progress,
    wait: std::time::Duration,
    basis: WaitBasis,
) -> bool {
    let attempt = progress.attempt;
    scope.log.record(
        attempt,
        &Record::Backoff {
            wait_ms: wait.as_millis() as u64,
            reason: basis.as_str(),
            retry: progress.retries_used,
            next_resume: progress.resume.as_ref(),
        },
    );
    scope.log.flush();
    observer.backoff(attempt, wait, basis.as_str());
    let cancelled = tokio::select! {
        () = tokio::time::sleep(wait) => false,
        () = scope.session.cancel.cancelled() => true,
    };
    if cancelled {
        scope.log.record(
            attempt,
            &Record::Classified {
                class: "cancelled",
                detail: "cancelled during the backoff sleep".into(),
            },
        );
    }
    !cancelled
}

/// The ports' result for the run's verdict, after the last attempt; remembers how the run ended
/// for the log's last line.
fn conclude(
    scope: &mut RunScope<'_>,
    verdict: Verdict,
    last: &AttemptResult,
    progress: Progress,
) -> Result<ProviderOutput, ProviderError> {
    let signals_present = scope.signals_present();
    let outcome = verdict.outcome();
    scope.finish(Finished {
        outcome,
        attempts: progress.attempt,
        session: progress.last_session.clone(),
        usage: progress.usage,
        signals_present,
    });
    let provider = scope.provider;
    let made = progress.made();
    let evidence = Box::new(RunEvidence {
        session_id: progress.last_session.clone(),
        usage: progress.usage,
        attempts: progress.made(),
        duration_ms: scope.start.elapsed().as_millis() as u64,
        exit_code: last.exit.and_then(|e| e.code),
        signal: last.exit.and_then(|e| e.signal),
        stderr_tail: last.stderr_tail.clone(),
        log_path: Some(scope.log.path().to_path_buf()),
        attestation: scope.attestation(),
    });
    Err(match verdict {
        Verdict::Succeeded | Verdict::Recovered => {
            return Ok(ProviderOutput {
                outcome,
                signals_file: scope.session.signals_file.clone(),
                signals_present,
                session_id: progress.last_session,
                exit_code: last.exit.and_then(|e| e.code),
                recovered_from_exit: verdict == Verdict::Recovered,
                usage: progress.usage,
                attempts: made,
                duration: scope.start.elapsed(),
                final_text: last.final_text.clone(),
                attestation: scope.attestation(),
            });
        }
        Verdict::Cancelled => ProviderError::Cancelled { provider, evidence },
        Verdict::RateLimited {
            resets_at_epoch_s,
            auto_resume_off,
        } => ProviderError::RateLimited {
            provider,
            retries: progress.retries_used,
            resets_at_epoch_s,
            auto_resume_off,
            evidence,
        },
        Verdict::ModelUnavailable(message) => ProviderError::ModelUnavailable {
            provider,
            message,
            evidence,
        },
        Verdict::Refused(message) => ProviderError::Refused {
            provider,
            message,
            evidence,
        },
        Verdict::EgressRefused { target, detail } => ProviderError::EgressRefused {
            provider,
            hint: crate::endpoints::allow_hint(&target),
            target,
            detail,
            evidence,
        },
        Verdict::StaleSession(session_id) => ProviderError::StaleSession {
            provider,
            session_id,
            evidence,
        },
        Verdict::IdleTimeout => ProviderError::IdleTimeout {
            provider,
            idle: last.idle_limit,
            evidence,
        },
        // Only a run with a wall-clock limit is ever killed at it.
        Verdict::WallTimeout => ProviderError::WallTimeout {
            provider,
            limit: scope.config().wall_timeout.unwrap_or_default(),
            evidence,
        },
        Verdict::LimitExceeded(breach) => ProviderError::LimitExceeded {
            provider,
            exceeded: crate::limits::exceeded(&breach),
            what: breach.what,
            evidence,
        },
        Verdict::Crashed => ProviderError::Crashed {
            provider,
            reason: crash_reason(last, scope.adapter.capabilities().always_terminal_event),
            evidence,
        },
    })
}

/// How the attempt ended, in a few words, for the log.
fn describe(result: &AttemptResult, terminal_expected: bool) -> String {
    let exit = result
        .exit
        .map_or_else(|| "no exit status".to_string(), |e| e.to_string());
    if let Some(breach) = &result.limit_breach {
        return format!(
            "{exit}; the tree went over its {} and was ended: {}",
            crate::limits::exceeded(breach),
            breach.what
        );
    }
    match (&result.killed_by, &result.terminal) {
        (Some(k), _) => format!("{exit}; group ended by the supervisor ({k:?})"),
        (None, Some(t)) if t.is_error => format!("{exit}; terminal event reports an error"),
        (None, Some(_)) => format!("{exit}; terminal event reports success"),
        (None, None) if terminal_expected => {
            format!("{exit}; no terminal event, though this CLI always prints one")
        }
        (None, None) => format!("{exit}; no terminal event"),
    }
}

/// Why an attempt counts as a crash, for [`ProviderError::Crashed`]; empty when the exit status
/// says it all.
fn crash_reason(result: &AttemptResult, terminal_expected: bool) -> String {
    match (&result.killed_by, &result.terminal) {
        (Some(k), _) => format!("the supervisor ended the process group ({k:?})"),
        (None, Some(t)) if t.is_error => match &t.text {
            Some(text) if !text.is_empty() => {
                let mut text = text.clone();
                crate::attempt::truncate_utf8(&mut text, 300);
                format!("the CLI reported an error: {text}")
            }
            Some(_) | None => "the CLI reported an error".to_string(),
        },
        (None, Some(_)) => String::new(),
        (None, None) if terminal_expected && result.exit.is_some_and(|e| e.success()) => {
            "it exited 0 without its terminal event, which this CLI always prints last: the run \
             did not finish, or its output was cut"
                .to_string()
        }
        (None, None) => "no terminal event".to_string(),
    }
}

#[cfg(test)]
mod tests {
    //! Recorded-spawn tests: what the engine asks the spawner for, without starting anything.

    use std::path::{Path, PathBuf};

    use corral_ports::{AgentEvent, CancellationToken, NoopObserver, Permissions, ProviderId};

    use super::*;
    use crate::adapter::{CommandSpec, Diagnosis, StreamParser};
    use crate::config::EngineConfig;
    use crate::engine::Engine;
    use corral_process::env::EnvProfile;
    use corral_process::process_group::RUN_TOKEN_VAR;
    use corral_process::spawn::{ProviderSpawn, SpawnRequest, SpawnedChild, TokioSpawner};

    mockall::mock! {
        #[derive(Debug)]
        Spawner {}
        impl ProviderSpawn for Spawner {
            fn spawn(&self, request: &SpawnRequest) -> std::io::Result<Box<dyn SpawnedChild>>;
        }
    }

    struct Adapter(PromptDelivery);

    struct NoParser;
    impl StreamParser for NoParser {
        fn parse_line(&mut self, line: &str, out: &mut Vec<AgentEvent>) {
            out.push(AgentEvent::Unparsed {
                line: line.to_string(),
            });
        }
    }

    impl CliAdapter for Adapter {
        fn provider(&self) -> ProviderId {
            ProviderId::Copilot
        }
        fn prompt_delivery(&self) -> PromptDelivery {
            self.0
        }
        fn env_profile(&self) -> EnvProfile {
            EnvProfile::new("test", &["TEST_*"])
        }
        fn command(&self, plan: &AttemptPlan<'_>) -> Result<CommandSpec, ProviderError> {
            let mut args = vec!["--headless".into()];
            if let Some(p) = plan.pointer {
                args.push("-p".into());
                args.push(p.sentence.clone().into());
            }
            Ok(CommandSpec {
                program: "the-cli".into(),
                args,
                env_set: vec![("TEST_KNOB".into(), "1".into())],
                session_id: None,
            })
        }
        fn parser(&self) -> Box<dyn StreamParser> {
            Box::new(NoParser)
        }
        fn diagnose(&self, _: &AttemptEvidence<'_>) -> Diagnosis {
            Diagnosis::default()
        }
        fn egress(&self, _: &crate::adapter::ChildEnv<'_>) -> corral_sandbox::EgressNeeds {
            corral_sandbox::EgressNeeds {
                endpoints: Vec::new(),
                proxy: corral_sandbox::ProxyHonour::Environment,
            }
        }
        fn capabilities(&self) -> corral_ports::Capabilities {
            corral_ports::Capabilities {
                prompt: corral_ports::PromptChannel::Stdin,
                session_id: corral_ports::SessionIdTiming::FirstLine,
                resume: true,
                effort: false,
                cost: corral_ports::CostReporting::TokensAndUsd,
                streaming: true,
                always_terminal_event: true,
                enforced_gates: &[],
                over_grants: &[],
            }
        }
    }

    fn session(dir: &Path) -> AiSession {
        AiSession {
            prompt: Arc::from("PROMPT-BODY ".repeat(20_000).as_str()),
            cold_prompt: None,
            cwd: dir.to_path_buf(),
            extra_roots: Vec::new(),
            model: None,
            effort: None,
            permissions: Permissions::default(),
            resume: None,
            cancel: CancellationToken::new(),
            signals_file: dir.join("run/signals.json"),
            output_dir: dir.join("run"),
            max_budget_usd: None,
            max_turns: None,
            cold_fallback: true,
            task: None,
        }
    }

    /// The git-cleanliness check spawns through the engine's spawner too: let git run for real.
    fn let_git_through(spawner: &mut MockSpawner) {
        spawner
            .expect_spawn()
            .withf(|r: &SpawnRequest| r.program == Path::new("git"))
            .returning(|r| TokioSpawner.spawn(r));
    }

    fn engine(spawner: MockSpawner) -> Engine {
        let config = EngineConfig {
            ambient_env: Some(vec![
                ("PATH".into(), "/bin".into()),
                ("SECRET_TOKEN".into(), "x".into()),
            ]),
            sandbox: corral_sandbox::SandboxConfig {
                backend: corral_sandbox::BackendChoice::Native,
                allow_degraded_native: true,
                ..corral_sandbox::SandboxConfig::default()
            },
            ..EngineConfig::default()
        };
        Engine::with_spawner(config, Arc::new(spawner))
    }

    #[tokio::test]
    async fn stdin_delivery_pipes_the_prompt_and_keeps_it_out_of_argv() {
        let dir = tempfile::tempdir().unwrap();
        let mut spawner = MockSpawner::new();
        let_git_through(&mut spawner);
        spawner
            .expect_spawn()
            .withf(|r: &SpawnRequest| {
                matches!(&r.stdin, StdinMode::Prompt(p) if !p.is_empty())
                    && r.args == [std::ffi::OsString::from("--headless")]
                    && r.env.iter().any(|(k, v)| k == "TEST_KNOB" && v == "1")
                    && r.env.iter().any(|(k, _)| k == RUN_TOKEN_VAR)
                    && !r.env.iter().any(|(k, _)| k == "SECRET_TOKEN")
            })
            .times(1)
            .returning(|_| Err(std::io::Error::from(std::io::ErrorKind::NotFound)));
        let err = engine(spawner)
            .run(
                &Adapter(PromptDelivery::Stdin),
                session(dir.path()),
                Arc::new(NoopObserver),
            )
            .await
            .unwrap_err();
        assert!(matches!(err, ProviderError::CliNotFound { .. }), "{err}");
    }

    #[tokio::test]
    async fn pointer_delivery_writes_the_file_and_passes_one_line() {
        let dir = tempfile::tempdir().unwrap();
        let pointer_path: PathBuf = dir.path().join("run/copilot-prompt.md");
        let expected = pointer_path.display().to_string();
        let mut spawner = MockSpawner::new();
        let_git_through(&mut spawner);
        spawner
            .expect_spawn()
            .withf(move |r: &SpawnRequest| {
                let argv: Vec<String> = r
                    .args
                    .iter()
                    .map(|a| a.to_string_lossy().into_owned())
                    .collect();
                r.stdin == StdinMode::Null
                    && argv.len() == 3
                    && argv[2].contains(&expected)
                    && !argv.iter().any(|a| a.contains("PROMPT-BODY"))
            })
            .times(1)
            .returning(|_| Err(std::io::Error::from(std::io::ErrorKind::PermissionDenied)));
        let s = session(dir.path());
        let prompt = s.prompt.clone();
        let err = engine(spawner)
            .run(
                &Adapter(PromptDelivery::PointerFile {
                    file_name: "copilot-prompt.md",
                }),
                s,
                Arc::new(NoopObserver),
            )
            .await
            .unwrap_err();
        assert!(matches!(err, ProviderError::CliNotFound { .. }), "{err}");
        assert_eq!(std::fs::read_to_string(&pointer_path).unwrap(), &*prompt);
    }
}
