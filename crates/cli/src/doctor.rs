//! `corral doctor`: is each provider's CLI installed, tested, and logged in?

use std::path::{Path, PathBuf};
use std::time::Duration;

use corral_compose::provider_facts;
use corral_engine::{TokioSpawner, VersionProbe, probe_version};
use corral_ports::ProviderId;

use crate::args::DoctorArgs;
use crate::config_cmd::load_settings;
use crate::exit::Exit;
use crate::term::outln;

fn on_path(command: &Path) -> Option<PathBuf> {
    if command.components().count() > 1 {
        return command.is_file().then(|| command.to_path_buf());
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(command))
        .find(|p| p.is_file())
}

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

/// Runs `corral doctor`.
pub async fn doctor(args: DoctorArgs) -> anyhow::Result<Exit> {
    let cwd = std::env::current_dir()?;
    let settings = load_settings(&cwd, Vec::new())?.settings;
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let ids: Vec<ProviderId> = match args.provider {
        Some(id) => vec![id],
        None => ProviderId::ALL.to_vec(),
    };
    let mut all_ok = true;
    for id in ids {
        let facts = provider_facts(id, &settings);
        outln!(
            "{id}{}",
            if facts.available {
                ""
            } else {
                "  (not available in this build yet)"
            }
        );
        let Some(found) = on_path(&facts.command) else {
            outln!(
                "  ✗ {} not found on PATH; install it with `npm install -g {}`",
                facts.command.display(),
                facts.npm_package
            );
            all_ok = false;
            continue;
        };
        outln!("  ✓ found {}", found.display());
        let env = corral_engine::version_env(corral_engine::process_env());
        let probe = probe_version(
            &TokioSpawner,
            &found,
            &["--version".to_string()],
            env,
            &cwd,
            Duration::from_secs(20),
        )
        .await;
        match probe {
            VersionProbe::Found(v) if facts.tested_versions.matches(&v) => {
                outln!("  ✓ version {v} (tested: {})", facts.tested_versions);
            }
            VersionProbe::Found(v) => {
                outln!(
                    "  ✗ version {v} is outside the tested range {}; set providers.{id}.allow_untested_version = true to run it anyway",
                    facts.tested_versions
                );
                all_ok = false;
            }
            VersionProbe::Unparsed(text) => {
                outln!("  ✗ `--version` printed no version: {text:?}");
                all_ok = false;
            }
            VersionProbe::TimedOut => {
                outln!("  ✗ `--version` did not answer within 20 s");
                all_ok = false;
            }
            VersionProbe::SpawnFailed(e) => {
                outln!("  ✗ cannot start it: {e}");
                all_ok = false;
            }
        }
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
            outln!("  ✓ credentials: {}", found.join(", "));
        }
        if id == ProviderId::Claude
            && let Some(h) = &home
        {
            let dir = h.join(".claude");
            if dir.is_dir() {
                let mb = dir_size(&dir) as f64 / 1_048_576.0;
                let hint = if mb > 10.0 {
                    "; large: slow starts, consider removing ~/.claude/plugins and ~/.claude/debug"
                } else {
                    ""
                };
                outln!("  · ~/.claude is {mb:.1} MiB{hint}");
            }
        }
    }
    Ok(if args.provider.is_some() && !all_ok {
        Exit::Unavailable
    } else {
        Exit::Success
    })
}
