//! `corral doctor`: is each provider's CLI installed, tested, and given a credential, can the
//! allow-list reach what its configuration names, and is the configured model available?
//!
//! The provider `corral run` would use (`--provider`, else `run.provider`) is asked the
//! preflight's cheap request (the `preflight` module: one one-word answer through the CLI, in a
//! scratch directory), which proves its login and model; a refused login or an unavailable
//! model exits 8. The other providers' credentials are only seen (a variable set, a login file
//! present), and their lines say so; so are all of them with `--no-request`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use corral_compose::BackendReadiness;
use corral_compose::{
    CliVersion, HOST_CWD, HostProgramError, ProviderEndpoints, allow_hint, cli_version,
    engine_config, host_program, model_probe, provider, provider_facts,
};
use corral_ports::{ModelAvailability, ProviderId};

use crate::args::DoctorArgs;
use crate::config_cmd::load_settings;
use crate::exit::Exit;
use crate::term::outln;

fn dir_size(path: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(path) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => dir_size(&e.path()),
            Ok(_) => e.metadata().map(|m| m.len()).unwrap_or(0),
            Err(_) => 0,
        })
        .sum()
}

/// A state directory above this size is worth a hint, in MiB.
const LARGE_STATE_MIB: f64 = 10.0;

/// What the provider's model probe says about the configured model; false when the model is
/// known to be unavailable, which makes a run fail as surely as a missing CLI. A probe that
/// cannot tell leaves the answer to the run.
async fn report_model(id: ProviderId, settings: &corral_compose::Settings, model: &str) -> bool {
    let probe = match model_probe(id, settings, engine_config(settings)) {
        Ok(probe) => probe,
        Err(e) => {
            outln!("  ✗ {e}");
            return true;
        }
    };
    match probe.probe(model).await {
        Ok(ModelAvailability::Available) => {
            outln!("  ✓ model {model} is available");
            true
        }
        Ok(ModelAvailability::Unavailable { known }) => {
            outln!(
                "  ✗ model {model} is not available (known: {}); set providers.{id}.model to one of them",
                known.join(", ")
            );
            false
        }
        Ok(ModelAvailability::Unknown { reason }) => {
            outln!("  ? model {model}: {reason}");
            true
        }
        Err(e) => {
            outln!("  ✗ model {model}: {e}");
            true
        }
    }
}

/// The preflight's cheap request to provider `id`, in a scratch directory of its own (removed
/// after): doctor may run anywhere, and the project is not its to touch.
async fn ask_cli(
    id: ProviderId,
    model: Option<String>,
    settings: &corral_compose::Settings,
) -> crate::preflight::Report {
    let scratch = std::env::temp_dir().join(format!("corral-doctor-{}", std::process::id()));
    let work_tree = scratch.join("work");
    if let Err(e) = std::fs::create_dir_all(&work_tree) {
        let mut report = crate::preflight::Report::default();
        report.findings.push(crate::preflight::Finding::Problem {
            what: format!("cannot create {}: {e}", work_tree.display()),
            fix: None,
        });
        return report;
    }
    let role = crate::preflight::RoleCheck {
        role: "login",
        provider: id,
        model,
        effort: None,
        read_only: false,
        model_key: format!("providers.{id}.model"),
    };
    let report = crate::preflight::check_roles(
        &[role],
        settings,
        &work_tree,
        // Where a project keeps them (`.corral/preflight/`), as the fake model API of the tests
        // knows a preflight request by.
        &scratch.join(".corral").join("preflight"),
        &corral_ports::CancellationToken::new(),
    )
    .await;
    let _ = std::fs::remove_dir_all(&scratch);
    report
}

/// Runs `corral doctor`.
pub async fn doctor(args: DoctorArgs) -> anyhow::Result<Exit> {
    let cwd = std::env::current_dir()?;
    let settings = load_settings(&cwd, Vec::new())?.settings;
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let ids: Vec<ProviderId> = match args.provider {
        Some(id) => vec![id],
        None => ProviderId::ALL.to_vec(),
    };
    let wanted = args.provider.unwrap_or(settings.run.provider);
    let sandbox_ok = report_sandbox(&settings);
    // Whether each provider checked is usable, for the exit code.
    let mut usable = Vec::new();
    for id in ids {
        let mut all_ok = true;
        let facts = provider_facts(id, &settings);
        outln!("{id}");
        // The probe runs on the host: not a program in this directory, which an agent can write,
        // and not with it as the working directory.
        let path_var = std::env::var_os("PATH");
        let found = match host_program(&facts.command, path_var.as_deref(), &[cwd.as_path()]) {
            Ok(found) => found,
            Err(HostProgramError::NotFound { .. }) => {
                outln!(
                    "  ✗ {} not found on PATH; install the tested version with `{}`",
                    facts.command.display(),
                    facts.install_command
                );
                usable.push((id, false));
                continue;
            }
            Err(e @ HostProgramError::AgentWritable { .. }) => {
                outln!("  ✗ {e}");
                usable.push((id, false));
                continue;
            }
        };
        outln!("  ✓ found {}", found.display());
        let mut tested = false;
        let answer = cli_version(
            engine_config(&settings),
            &found,
            Path::new(HOST_CWD),
            Duration::from_secs(20),
        )
        .await;
        match answer {
            CliVersion::Found(v) if facts.tested_versions.matches(&v) => {
                outln!("  ✓ version {v} (tested: {})", facts.tested_versions);
                tested = true;
            }
            CliVersion::Found(v) => {
                outln!(
                    "  ✗ version {v} is outside the tested range {}; install the tested version with `{}`, or set providers.{id}.allow_untested_version = true to run it anyway",
                    facts.tested_versions,
                    facts.install_command
                );
                all_ok = false;
            }
            CliVersion::Unparsed(text) => {
                outln!("  ✗ `--version` printed no version: {text:?}");
                all_ok = false;
            }
            CliVersion::TimedOut => {
                outln!("  ✗ `--version` did not answer within 20 s");
                all_ok = false;
            }
            CliVersion::SpawnFailed(e) => {
                outln!("  ✗ cannot start it: {e}");
                all_ok = false;
            }
        }
        let ask = id == wanted && !args.no_request;
        let vars: Vec<&str> = facts
            .credential_vars
            .iter()
            .copied()
            .filter(|v| std::env::var_os(v).is_some())
            .collect();
        let files: Vec<PathBuf> = home
            .iter()
            .flat_map(|h| facts.credential_files.iter().map(move |f| h.join(f)))
            .filter(|p| p.is_file())
            .collect();
        if vars.is_empty() && files.is_empty() {
            outln!(
                "  ? no credentials found (looked for {} and ~/{})",
                facts.credential_vars.join(", "),
                facts.credential_files.join(", ~/")
            );
        } else {
            let mut found: Vec<String> = vars.iter().map(|v| format!("${v}")).collect();
            found.extend(files.iter().map(|p| p.display().to_string()));
            if ask {
                outln!("  ✓ a credential is set: {}", found.join(", "));
            } else {
                // Only seen, never tried: a wrong or expired one shows when a run starts.
                outln!(
                    "  ✓ a credential is set: {} (seen, not tried: `corral doctor --provider {id}` asks the CLI)",
                    found.join(", ")
                );
            }
        }
        // The login, by asking: the provider a run would use, once it is installed and tested
        // (an untested CLI is refused before it could answer).
        if ask && tested {
            let model = settings.providers.get(id).model.clone();
            let report = ask_cli(id, model, &settings).await;
            for line in crate::preflight::finding_lines(&report) {
                outln!("{line}");
            }
            if report.problems() > 0 {
                all_ok = false;
            }
        }
        for dir in facts.state_dirs {
            let Some(path) = home.as_ref().map(|h| h.join(dir)) else {
                continue;
            };
            if path.is_dir() {
                let mb = dir_size(&path) as f64 / 1_048_576.0;
                let hint = if mb > LARGE_STATE_MIB {
                    "; large: slow starts, consider removing what the CLI no longer needs"
                } else {
                    ""
                };
                outln!("  · ~/{dir} is {mb:.1} MiB{hint}");
            }
        }
        match provider(id, &settings, engine_config(&settings)) {
            Ok(built) => {
                if !report_endpoints(&built.endpoints(), &settings) {
                    all_ok = false;
                }
            }
            Err(e) => {
                outln!("  ✗ {e}");
                all_ok = false;
            }
        }
        if let Some(model) = &settings.providers.get(id).model
            && !report_model(id, &settings, model).await
        {
            all_ok = false;
        }
        usable.push((id, all_ok));
    }
    // Like `brew doctor` and `gh auth status`: non-zero when what `corral run` would use (the
    // provider asked for, else the default one, and the sandbox) cannot be used.
    let provider_ok = usable.iter().any(|(id, ok)| *id == wanted && *ok);
    Ok(if provider_ok && sandbox_ok {
        Exit::Success
    } else {
        Exit::Unavailable
    })
}

/// The endpoints a run would need, before any run: the provider's own (always allowed), and
/// each one its CLI's configuration names, on the allow-list or with the entry that puts it
/// there. False when one the run uses is not on it: the run would refuse to start.
fn report_endpoints(endpoints: &ProviderEndpoints, settings: &corral_compose::Settings) -> bool {
    if !endpoints.confined {
        outln!(
            "  · network: sandbox.network = \"{}\", no allow-list to check",
            settings.sandbox.network.as_str()
        );
        return true;
    }
    let declared: Vec<String> = endpoints.declared.iter().map(ToString::to_string).collect();
    outln!("  · network: the allow-list opens {}", declared.join(", "));
    let mut ok = true;
    for configured in &endpoints.configured {
        let target = configured.endpoint.to_string();
        let listed = endpoints.allow.permits(&configured.endpoint);
        match (listed, configured.in_use) {
            (true, _) => outln!(
                "  ✓ {} names {target}, on the allow-list",
                configured.source
            ),
            (false, true) => {
                outln!(
                    "  ✗ {} names {target}, which a run uses and the allow-list does not open (a run refuses to start); {}",
                    configured.source,
                    allow_hint(&target)
                );
                ok = false;
            }
            (false, false) => outln!(
                "  · {} names {target}, not on the allow-list (this provider is not the one selected; to use it, {})",
                configured.source,
                allow_hint(&target)
            ),
        }
    }
    ok
}

/// How each limit of `[limits]` would be enforced for a spawn here: a trial cgroup is made and
/// removed; under the container backend, what podman enforces here (none of its cgroup limits
/// when rootless on a cgroup v1 host).
fn report_limits(settings: &corral_compose::Settings) {
    let sandbox = corral_compose::engine_config(settings).sandbox;
    let readiness = corral_compose::backend_limits_readiness(sandbox.backend, sandbox.limits);
    for limit in readiness {
        match (&limit.how, &limit.why_not) {
            (Some(how), None) => outln!("  ✓ limits.{} = {}: {how}", limit.limit, limit.cap),
            (Some(how), Some(why)) => outln!(
                "  · limits.{} = {}: only {how} ({why})",
                limit.limit,
                limit.cap
            ),
            (None, why) => outln!(
                "  · limits.{} = {}: not enforced here ({})",
                limit.limit,
                limit.cap,
                why.as_deref().unwrap_or("no means")
            ),
        }
    }
}

/// What the sandbox `corral run` would use needs: bubblewrap, unless the settings choose the
/// native backend; and how `[limits]` would be enforced here (a cgroup, an rlimit, or not at
/// all). Returns whether a run could start (an unenforced limit does not stop one).
fn report_sandbox(settings: &corral_compose::Settings) -> bool {
    outln!("sandbox");
    let ready = report_backend(settings);
    report_limits(settings);
    ready
}

/// Whether the chosen backend can confine a run here.
fn report_backend(settings: &corral_compose::Settings) -> bool {
    let bwrap = Path::new(&settings.sandbox.bwrap);
    let degraded = settings.sandbox.allow_degraded_native;
    match corral_compose::backend_readiness(settings.sandbox.backend, bwrap, degraded) {
        BackendReadiness::NativeConsented => {
            outln!("  · the native backend is chosen and allowed degraded: nothing is confined");
            true
        }
        BackendReadiness::NativeRefused => {
            outln!("  ✗ the native backend is chosen but sandbox.allow_degraded_native is not set");
            outln!("  hint: pass --allow-degraded-native, or choose sandbox.backend = \"auto\"");
            false
        }
        BackendReadiness::Bubblewrap => {
            outln!(
                "  ✓ bubblewrap ({}) can build a sandbox here",
                bwrap.display()
            );
            true
        }
        BackendReadiness::Container(Ok(version)) => {
            outln!(
                "  ✓ the container backend: {version}, runtime {}",
                corral_compose::CONTAINER_RUNTIME
            );
            if settings.sandbox.network.as_str() == "allowlist" {
                outln!(
                    "  · the container backend has no allow-list proxy yet: with sandbox.network = \"allowlist\" a run refuses unless allowed degraded; set \"none\" or \"host\""
                );
            }
            true
        }
        BackendReadiness::Container(Err(why)) => {
            outln!("  ✗ {why}");
            outln!(
                "  hint: apt-get install podman runc (or `cargo xtask prerequisites` as root), or choose sandbox.backend = \"auto\""
            );
            false
        }
        BackendReadiness::BubblewrapUnusable { why, falls_back } => {
            outln!("  ✗ {why}");
            if falls_back {
                outln!("  · runs fall back to the native backend (allowed degraded)");
                return true;
            }
            outln!(
                "  hint: install bubblewrap (apt-get install bubblewrap, dnf install bubblewrap), or pass --allow-degraded-native to run unconfined"
            );
            false
        }
    }
}
