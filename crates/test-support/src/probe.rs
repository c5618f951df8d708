//! Scaffolding for the provider crates' model-probe tests: shell scripts that stand in for a CLI,
//! a probe call that tries again while such a script is still "busy", and the check that a
//! missing CLI is reported as one.

#![allow(
    clippy::unwrap_used,
    clippy::panic,
    reason = "test fixture: a script that can't be written, or a wrong answer, must stop the test loudly"
)]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use corral_ports::{ModelAvailability, ModelAvailabilityProbe, ProviderError, ProviderId};

/// Writes the executable shell script `dir/name`: `#!/bin/sh`, then `body`. Returns its path.
pub fn write_script(dir: &Path, name: &str, body: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// Probes `model`, trying again (up to 20 times, 50 ms apart) while the program is "busy": a
/// freshly written script can be held open across a fork by another test thread for a moment.
pub async fn probe_past_busy<P>(probe: &P, model: &str) -> Result<ModelAvailability, ProviderError>
where
    P: ModelAvailabilityProbe + ?Sized,
{
    let mut answer = probe.probe(model).await;
    for _ in 0..20 {
        match &answer {
            Err(ProviderError::CliNotFound { reason, .. }) if reason.contains("busy") => {
                tokio::time::sleep(Duration::from_millis(50)).await;
                answer = probe.probe(model).await;
            }
            _ => break,
        }
    }
    answer
}

/// Asserts that `probe` is `provider`'s and that probing `model` with it, its program `missing`
/// not existing, fails with `CliNotFound` naming `provider` and `missing`.
pub async fn assert_missing_cli_is_reported<P>(
    probe: &P,
    model: &str,
    provider: ProviderId,
    missing: &Path,
) where
    P: ModelAvailabilityProbe + ?Sized,
{
    assert_eq!(probe.id(), provider);
    match probe.probe(model).await {
        Err(ProviderError::CliNotFound {
            provider: reported,
            program,
            ..
        }) => {
            assert_eq!(reported, provider);
            assert_eq!(program, missing.display().to_string());
        }
        other => panic!("expected CliNotFound, got {other:?}"),
    }
}
