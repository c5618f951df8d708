//! The preflight: before `corral sprint run` (and `corral run --preflight`) spawns anything,
//! everything it can learn will fail is looked for at once, and each problem is named with what
//! to fix (exit 8). `corral doctor` asks the CLI the same way.
//!
//! For each role (the sprint's generator and evaluator, or the one run): its CLI is found on the
//! host (never in the project, which an agent can write) and its version is in the tested range;
//! then one cheap request goes through the CLI, on the same engine path and sandbox as the role's
//! real spawn (`corral_compose::cheap_request`): a one-line prompt asking for one word, capped at
//! two turns where the CLI enforces a cap. Its answer proves the login and the model; for a
//! read-only role (the evaluator) it must also come back attested `repo-read-only`, which proves
//! a sandbox that keeps the work tree read-only is there. Two roles on the same provider and
//! model share one request, the read-only one. For a sprint, what `sprint check` warns about
//! that no agent is needed to see (no commit identity, a check command not found) is refused too.
//!
//! A rate limit met by the cheap request is not a problem: it is said, and the sprint waits for
//! it as it always does. The request's record is kept in `.corral/preflight/<role>/` for a
//! failure's evidence.
//!
//! The request runs in a scratch directory beside the records (`.corral/preflight/work-tree/`,
//! made empty before and removed after), not in the work tree: a CLI writes there at start-up
//! (Grok its `.grok/settings.json`), and a model may answer with a tool call whatever the prompt
//! says; either would leave the project dirty before the sprint's first task. Inside the project,
//! the CLI still finds the configuration it reads upward from its directory (an OpenCode
//! `opencode.json`, an `AGENTS.md`) as a real spawn does.

use std::path::{Path, PathBuf};
use std::time::Duration;

use corral_compose::{
    CheapAnswer, CheapRequest, CliVersion, HOST_CWD, HostProgramError, Settings, cheap_request,
    cli_version, engine_config, host_program, provider_facts,
};
use corral_ports::{CancellationToken, Effort, ProviderError, ProviderId, Usage};

use crate::term::errln;

/// The longest a cheap request may take, the CLI's start-up included.
const CHEAP_REQUEST_WALL: Duration = Duration::from_secs(180);

/// One role to check.
#[derive(Debug, Clone)]
pub(crate) struct RoleCheck {
    /// What the role is called in what the user reads: `generator`, `evaluator`, `run`.
    pub role: &'static str,
    /// The provider that plays it.
    pub provider: ProviderId,
    /// Its model; `None`: the CLI's default.
    pub model: Option<String>,
    /// Its effort.
    pub effort: Option<Effort>,
    /// Whether it runs read-only.
    pub read_only: bool,
    /// Where its model is set, for the fix: `[roles.evaluator] model in corral-sprint.toml`.
    pub model_key: String,
}

/// One line of the preflight's report.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Finding {
    /// Checked and fine.
    Passed(String),
    /// Worth knowing, not a reason to stop.
    Note(String),
    /// Will fail: what and what to fix.
    Problem {
        /// What is wrong, starting with what it is about.
        what: String,
        /// What to do about it; `None` when `what` says it.
        fix: Option<String>,
    },
}

/// Everything the preflight found, in the order it looked.
#[derive(Debug, Default)]
pub(crate) struct Report {
    /// The findings.
    pub findings: Vec<Finding>,
    /// The cheap requests' wall time, summed.
    pub wall: Duration,
    /// The cheap requests' tokens and cost, summed.
    pub usage: Usage,
    /// How many cheap requests were made.
    pub requests: u32,
}

impl Report {
    /// The problems found.
    pub fn problems(&self) -> usize {
        self.findings
            .iter()
            .filter(|f| matches!(f, Finding::Problem { .. }))
            .count()
    }

    fn problem(&mut self, what: String, fix: Option<String>) {
        self.findings.push(Finding::Problem { what, fix });
    }
}

/// The roles, folded where two play the same provider and model: one request, read-only when
/// either is, names them both.
fn fold(roles: &[RoleCheck]) -> Vec<(String, RoleCheck)> {
    let mut folded: Vec<(String, RoleCheck)> = Vec::new();
    for role in roles {
        match folded
            .iter_mut()
            .find(|(_, r)| r.provider == role.provider && r.model == role.model)
        {
            Some((names, r)) => {
                names.push_str(" and ");
                names.push_str(role.role);
                r.read_only |= role.read_only;
                if r.effort.is_none() {
                    r.effort = role.effort;
                }
                // The fix names both places the model is set.
                if r.model_key != role.model_key {
                    r.model_key = format!("{} and {}", r.model_key, role.model_key);
                }
            }
            None => folded.push((role.role.to_string(), role.clone())),
        }
    }
    folded
}

/// Checks each role: found, tested, and answering one cheap request (see the module's doc).
/// `work_tree` is where the agent works; each request's record goes under `records`.
pub(crate) async fn check_roles(
    roles: &[RoleCheck],
    settings: &Settings,
    work_tree: &Path,
    records: &Path,
    cancel: &CancellationToken,
) -> Report {
    let mut report = Report::default();
    let scratch = records.join(SCRATCH_TREE);
    let _ = std::fs::remove_dir_all(&scratch);
    if let Err(e) = std::fs::create_dir_all(&scratch) {
        report.problem(
            format!(
                "cannot create the preflight's scratch directory {}: {e}",
                scratch.display()
            ),
            None,
        );
        return report;
    }
    for (names, role) in fold(roles) {
        check_role(
            &mut report,
            &names,
            &role,
            settings,
            Places {
                work_tree,
                scratch: &scratch,
                records,
            },
            cancel,
        )
        .await;
    }
    let _ = std::fs::remove_dir_all(&scratch);
    report
}

/// The directory under the records the cheap requests run in (see the module's doc).
const SCRATCH_TREE: &str = "work-tree";

/// Where a role's check looks and writes.
#[derive(Clone, Copy)]
struct Places<'a> {
    /// Where the agent works: a CLI found inside it is refused.
    work_tree: &'a Path,
    /// Where the cheap request runs.
    scratch: &'a Path,
    /// Where each request's record goes.
    records: &'a Path,
}

/// The phrase naming a role's provider and model: `claude, model x`.
fn played_by(role: &RoleCheck) -> String {
    match &role.model {
        Some(model) => format!("{}, model {model}", role.provider),
        None => format!("{} (its default model)", role.provider),
    }
}

async fn check_role(
    report: &mut Report,
    names: &str,
    role: &RoleCheck,
    settings: &Settings,
    places: Places<'_>,
    cancel: &CancellationToken,
) {
    let Places {
        work_tree,
        scratch,
        records,
    } = places;
    let id = role.provider;
    let facts = provider_facts(id, settings);
    let path = std::env::var_os("PATH");
    let found = match host_program(&facts.command, path.as_deref(), &[work_tree]) {
        Ok(found) => found,
        Err(HostProgramError::NotFound { .. }) => {
            report.problem(
                format!(
                    "{names}: {id}'s CLI `{}` is not installed (not found on PATH)",
                    facts.command.display()
                ),
                Some(format!(
                    "install the tested version with `{}`",
                    facts.install_command
                )),
            );
            return;
        }
        Err(e @ HostProgramError::AgentWritable { .. }) => {
            report.problem(format!("{names}: {e}"), None);
            return;
        }
    };
    let version = cli_version(
        engine_config(settings),
        &found,
        Path::new(HOST_CWD),
        Duration::from_secs(20),
    )
    .await;
    let version = match version {
        CliVersion::Found(v)
            if facts.tested_versions.matches(&v)
                || settings.providers.get(id).allow_untested_version =>
        {
            v.to_string()
        }
        CliVersion::Found(v) => {
            report.problem(
                format!(
                    "{names}: {id} {v} is outside the tested range {}",
                    facts.tested_versions
                ),
                Some(format!(
                    "install the tested version with `{}`, or set providers.{id}.allow_untested_version = true",
                    facts.install_command
                )),
            );
            return;
        }
        CliVersion::Unparsed(text) => {
            report.problem(
                format!(
                    "{names}: `{} --version` printed no version: {text:?}",
                    found.display()
                ),
                Some(format!("reinstall it with `{}`", facts.install_command)),
            );
            return;
        }
        CliVersion::TimedOut => {
            report.problem(
                format!(
                    "{names}: `{} --version` did not answer within 20 s",
                    found.display()
                ),
                None,
            );
            return;
        }
        CliVersion::SpawnFailed(e) => {
            report.problem(
                format!("{names}: {} cannot be started: {e}", found.display()),
                None,
            );
            return;
        }
    };
    let mut config = engine_config(settings);
    // A limit met now is said and left to the sprint, which waits for it anyway (or hands the
    // role to its next provider); the preflight does not wait, not even for a hold another run
    // left in the account's gate: any hold stops the request before it starts.
    config.retry.max_retries = 0;
    config.retry.hand_over_after = Some(std::time::Duration::ZERO);
    config.wall_timeout = Some(
        config
            .wall_timeout
            .map_or(CHEAP_REQUEST_WALL, |w| w.min(CHEAP_REQUEST_WALL)),
    );
    let dir_name = names.replace(" and ", "-");
    let request = CheapRequest {
        provider: id,
        model: role.model.clone(),
        effort: role.effort,
        read_only: role.read_only,
        work_tree: scratch,
        dir: records.join(dir_name),
    };
    let answer = match cheap_request(request, settings, config, cancel.clone()).await {
        Ok(answer) => answer,
        Err(e) => {
            report.problem(format!("{names}: {id} cannot be built: {e}"), None);
            return;
        }
    };
    report.requests += 1;
    report.wall += answer.wall;
    judge(report, names, role, &version, answer);
}

/// What the cheap request's answer says about the role.
fn judge(report: &mut Report, names: &str, role: &RoleCheck, version: &str, answer: CheapAnswer) {
    let id = role.provider;
    let who = format!("{names}: {id} {version}");
    let model = played_by(role);
    let doctor = format!("`corral doctor --provider {id}`");
    match answer.result {
        Ok(ok) => {
            report.usage.add(&ok.usage);
            if !ok.read_only_held {
                report.problem(
                    format!("{who}: the sandbox did not attest the work tree read-only"),
                    Some(
                        "use a sandbox that can keep it read-only (sandbox.backend = \"auto\" with bubblewrap installed; see `corral doctor`)"
                            .to_string(),
                    ),
                );
                return;
            }
            let read_only = if role.read_only {
                ", work tree read-only"
            } else {
                ""
            };
            report.findings.push(Finding::Passed(format!(
                "{who} ({model}): logged in and answering{read_only} ({:.1} s, {})",
                answer.wall.as_secs_f64(),
                usage_phrase(&ok.usage)
            )));
        }
        Err(err) => match &err {
            ProviderError::ModelUnavailable { message, .. } => report.problem(
                format!(
                    "{who}: the model {} is not available: {}",
                    role.model.as_deref().unwrap_or("(the CLI's default)"),
                    crate::term::one_line(message)
                ),
                Some(format!(
                    "set {} to a model {id} serves ({doctor} lists them where the CLI can)",
                    role.model_key
                )),
            ),
            ProviderError::Refused { message, .. } => report.problem(
                format!(
                    "{who} ({model}): the login was refused: {}",
                    crate::term::one_line(message)
                ),
                Some(format!("log {id} in as the user corral runs as, then {doctor}")),
            ),
            ProviderError::RateLimited { .. } => report.findings.push(Finding::Note(format!(
                "{who} ({model}): rate limited right now, so the login and model were not confirmed; the sprint waits for the limit as usual"
            ))),
            ProviderError::Unsandboxed { .. } => report.problem(
                format!("{who}: {}", crate::term::one_line(&err.to_string())),
                Some(
                    "install bubblewrap, or choose a sandbox that can hold what this role needs (see `corral doctor`)"
                        .to_string(),
                ),
            ),
            ProviderError::Cancelled { .. } => {
                report.problem(format!("{who}: the preflight was cancelled"), None);
            }
            ProviderError::EgressRefused { target, hint, .. } => report.problem(
                format!(
                    "{who} ({model}): Corral's network allow-list does not include {target}, which the CLI needs"
                ),
                Some(hint.clone()),
            ),
            ProviderError::CliNotFound { .. }
            | ProviderError::SpawnFailed { .. }
            | ProviderError::ArgvTooLong { .. }
            | ProviderError::VersionMismatch { .. }
            | ProviderError::VersionProbeTimedOut { .. }
            | ProviderError::InvalidSession { .. }
            | ProviderError::StaleSession { .. }
            | ProviderError::Crashed { .. }
            | ProviderError::IdleTimeout { .. }
            | ProviderError::WallTimeout { .. }
            | ProviderError::LimitExceeded { .. }
            | ProviderError::Io { .. } => report.problem(
                format!(
                    "{who} ({model}): the cheap request failed: {}",
                    crate::term::one_line(&err.to_string())
                ),
                Some(format!(
                    "see {} and {doctor}",
                    err.evidence()
                        .map(|_| "the request's events.jsonl under .corral/preflight/")
                        .unwrap_or("the message above")
                )),
            ),
        },
    }
}

/// `19 tokens, $0.0001` (what the CLI reported).
fn usage_phrase(usage: &Usage) -> String {
    let tokens: u64 = [
        usage.input,
        usage.output,
        usage.cache_read,
        usage.cache_write,
    ]
    .iter()
    .flatten()
    .sum();
    match usage.cost_usd {
        Some(cost) => format!("{tokens} tokens, ${cost:.4}"),
        None => format!("{tokens} tokens, cost not reported"),
    }
}

/// The sprint's checks that need no agent: a commit identity, the programs of the check, setup
/// and gate commands.
pub(crate) async fn check_sprint_commands(
    report: &mut Report,
    file: &corral_sprint::SprintFile,
    settings: &Settings,
    root: &Path,
) {
    for warning in crate::sprint_init::commit_and_command_warnings(file, settings, root).await {
        report.problem(warning, None);
    }
}

/// `corral run --preflight`: the run's provider and model checked on the run's own engine (only
/// a sprint's evaluator needs the strict read-only one), in `cwd`, the report printed; whether
/// the run may start.
pub(crate) async fn before_a_run(
    provider: ProviderId,
    model: Option<String>,
    model_from_flag: bool,
    settings: &Settings,
    cwd: &Path,
    project_root: &Path,
) -> bool {
    let role = RoleCheck {
        role: "run",
        provider,
        model,
        effort: None,
        read_only: false,
        model_key: if model_from_flag {
            "--model".to_string()
        } else {
            format!("providers.{provider}.model (or pass --model)")
        },
    };
    errln!("preflight: asking {provider} one cheap request before the run");
    let report = check_roles(
        &[role],
        settings,
        cwd,
        &records_dir(project_root),
        &CancellationToken::new(),
    )
    .await;
    print(&report, "the run", "run without --preflight");
    report.problems() == 0
}

/// Where the preflight's request records go in the project at `root`: `.corral/preflight/`,
/// which git ignores as it does the rest of `.corral`.
pub(crate) fn records_dir(root: &Path) -> PathBuf {
    let dir = root.join(".corral").join("preflight");
    if let Err(e) = corral_compose::ignore_state_dir(root, Path::new(".corral/preflight")) {
        tracing::warn!(error = %e, "cannot make git ignore .corral");
    }
    dir
}

/// The findings as lines, indented by two spaces: `✓`, `·` or `✗` and, under a problem, its fix.
pub(crate) fn finding_lines(report: &Report) -> Vec<String> {
    let mut lines = Vec::new();
    for finding in &report.findings {
        match finding {
            Finding::Passed(line) => lines.push(format!("  ✓ {line}")),
            Finding::Note(line) => lines.push(format!("  · {line}")),
            Finding::Problem { what, fix } => {
                lines.push(format!("  ✗ {what}"));
                if let Some(fix) = fix {
                    lines.push(format!("    fix: {fix}"));
                }
            }
        }
    }
    lines
}

/// Prints the report on stderr: each finding, then the count of problems (or that all passed)
/// and what the requests took; `what` did not start, and `skip` is how to do without the
/// preflight.
pub(crate) fn print(report: &Report, what: &str, skip: &str) {
    for line in finding_lines(report) {
        errln!("{line}");
    }
    let cost = format!(
        "{} cheap request{} in {:.1} s, {}",
        report.requests,
        if report.requests == 1 { "" } else { "s" },
        report.wall.as_secs_f64(),
        usage_phrase(&report.usage)
    );
    match report.problems() {
        0 => errln!("preflight: passed ({cost})"),
        n => errln!(
            "preflight: {n} problem{} found ({cost}); {what} did not start: fix {} and run again, or {skip} to skip this check",
            if n == 1 { "" } else { "s" },
            if n == 1 { "it" } else { "them" }
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn role(name: &'static str, model: &str, read_only: bool) -> RoleCheck {
        RoleCheck {
            role: name,
            provider: ProviderId::Claude,
            model: Some(model.to_string()),
            effort: None,
            read_only,
            model_key: format!("[roles.{name}] model"),
        }
    }

    #[test]
    fn two_roles_on_one_provider_and_model_share_one_read_only_request() {
        let folded = fold(&[role("generator", "m", false), role("evaluator", "m", true)]);
        assert_eq!(folded.len(), 1);
        assert_eq!(folded[0].0, "generator and evaluator");
        assert!(folded[0].1.read_only);
        let apart = fold(&[role("generator", "m", false), role("evaluator", "n", true)]);
        assert_eq!(apart.len(), 2);
        assert!(!apart[0].1.read_only);
    }
}
