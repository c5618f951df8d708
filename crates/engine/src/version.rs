//! The CLI version check: ask the CLI for its version, with a timeout, and compare it with the
//! provider's tested range. CLIs change their stream formats between releases; a run on an
//! untested version fails loudly unless the caller overrides it.

use std::ffi::OsString;
use std::path::Path;
use std::time::Duration;

use corral_process::bounded::{BoundedCommand, BoundedEnd, BoundedError, run_bounded};
use corral_process::spawn::{ProviderSpawn, SpawnRequest, StdinMode};

/// What the version command said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VersionProbe {
    /// A version was found in the output.
    Found(semver::Version),
    /// The output held no version.
    Unparsed(String),
    /// The command did not answer in time.
    TimedOut,
    /// The command could not be started.
    SpawnFailed(String),
}

/// Pulls the first version-looking token out of `--version` output: `2.1.197 (Claude Code)`,
/// `codex-cli 0.171.0`, `v1.0.1`. A two-part `1.0` counts as `1.0.0`.
pub fn parse_version(output: &str) -> Option<semver::Version> {
    output
        .split(|c: char| c.is_whitespace() || c == ',' || c == '(' || c == ')')
        .map(|t| t.trim_start_matches('v').trim_end_matches('.'))
        .filter(|t| t.starts_with(|c: char| c.is_ascii_digit()))
        .find_map(|t| {
            semver::Version::parse(t).ok().or_else(|| {
                let parts = t.split('.').count();
                (parts == 2)
                    .then(|| semver::Version::parse(&format!("{t}.0")).ok())
                    .flatten()
            })
        })
}

/// Runs `program args` (stdin `/dev/null`, exactly `env`) as a [`BoundedCommand`] and reads its
/// version from stdout followed by stderr, both read at once. The process group is killed if it
/// does not finish within `timeout`.
pub async fn probe_version(
    spawner: &dyn ProviderSpawn,
    program: &Path,
    args: &[String],
    env: Vec<(OsString, OsString)>,
    cwd: &Path,
    timeout: Duration,
) -> VersionProbe {
    let request = SpawnRequest {
        program: program.to_path_buf(),
        args: args.iter().map(OsString::from).collect(),
        env,
        cwd: cwd.to_path_buf(),
        stdin: StdinMode::Null,
        parent_death_signal: true,
        inherit_fds: Vec::new(),
        output: corral_process::spawn::ChildOutputs::Pipes,
        pre_exec: Vec::new(),
    };
    let output = match run_bounded(spawner, &BoundedCommand::limited(request, timeout)).await {
        Ok(output) => output,
        Err(BoundedError::Spawn { source, .. }) => {
            return VersionProbe::SpawnFailed(source.to_string());
        }
        Err(e @ (BoundedError::Read { .. } | BoundedError::Wait { .. })) => {
            return VersionProbe::Unparsed(e.to_string());
        }
    };
    match output.end {
        BoundedEnd::TimedOut => VersionProbe::TimedOut,
        BoundedEnd::Exited(_) => {
            let mut bytes = output.stdout.bytes;
            bytes.extend_from_slice(&output.stderr.bytes);
            let text = String::from_utf8_lossy(&bytes);
            match parse_version(&text) {
                Some(v) => VersionProbe::Found(v),
                None => VersionProbe::Unparsed(text.chars().take(200).collect()),
            }
        }
    }
}

/// The environment version questions run with: `PATH` and `HOME` from the engine's environment
/// setting ([`crate::EngineConfig::ambient`]), nothing else: no credentials reach a `--version`.
pub use corral_process::host_env as version_env;

/// Asks `program --version` (with `env`, see [`version_env`], the temporary directory as working
/// directory, bounded by `timeout`) and describes the CLI for a diagnostic, `"<label> <version>"`.
/// `Err(CliNotFound)` when it cannot start at all; an unreadable or missing answer still
/// describes it. Model probes use this to report a missing CLI before a run.
pub async fn describe_cli(
    spawner: &dyn ProviderSpawn,
    provider: corral_ports::ProviderId,
    label: &str,
    program: &Path,
    env: Vec<(OsString, OsString)>,
    timeout: Duration,
) -> Result<String, corral_ports::ProviderError> {
    let found = probe_version(
        spawner,
        program,
        &["--version".to_string()],
        env,
        &std::env::temp_dir(),
        timeout,
    )
    .await;
    match found {
        VersionProbe::SpawnFailed(reason) => Err(corral_ports::ProviderError::CliNotFound {
            provider,
            program: program.display().to_string(),
            reason,
        }),
        VersionProbe::Found(version) => Ok(format!("{label} {version}")),
        VersionProbe::Unparsed(_) => Ok(format!("{label} (version unreadable)")),
        VersionProbe::TimedOut => Ok(format!(
            "{label} (no answer to --version within {timeout:?})"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_versions_in_real_cli_outputs() {
        let v = |s: &str| parse_version(s).map(|v| v.to_string());
        assert_eq!(v("2.1.197 (Claude Code)").as_deref(), Some("2.1.197"));
        assert_eq!(v("codex-cli 0.171.0").as_deref(), Some("0.171.0"));
        assert_eq!(v("1.0.1\n").as_deref(), Some("1.0.1"));
        assert_eq!(
            v("GitHub Copilot CLI 1.0.102.\nRun 'copilot update'").as_deref(),
            Some("1.0.102")
        );
        assert_eq!(v("v1.18").as_deref(), Some("1.18.0"));
        assert_eq!(v("no version here"), None);
    }
}
