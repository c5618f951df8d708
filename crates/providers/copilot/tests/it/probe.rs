//! The model probe never sends a request and never hangs: a missing CLI is an error, anything else
//! is `Unknown` with the reason. The real CLI is not run: the fake agent, a missing path and a
//! script that never answers play it.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use corral_copilot::{CopilotProbe, CopilotSettings, headless};
use corral_engine::{Engine, EngineConfig};
use corral_ports::{HeadlessAiProvider, ModelAvailability, ModelAvailabilityProbe, ProviderId};
use corral_test_support::probe::{assert_missing_cli_is_reported, probe_past_busy, write_script};

fn probe_for(command: PathBuf, timeout: Duration) -> CopilotProbe {
    CopilotProbe::new(&CopilotSettings {
        command,
        version_timeout: timeout,
        ..CopilotSettings::default()
    })
}

#[tokio::test]
async fn a_missing_cli_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-copilot");
    let probe = probe_for(missing.clone(), Duration::from_secs(5));
    assert_missing_cli_is_reported(&probe, "gpt-5.4", ProviderId::Copilot, &missing).await;
}

#[tokio::test]
async fn a_cli_that_starts_gives_unknown_without_a_request() {
    // The fake agent prints no version: still a CLI that starts.
    let probe = probe_for(
        corral_test_support::fake_agent_path(),
        Duration::from_secs(30),
    );
    assert_eq!(
        probe.probe("gpt-5.4").await.unwrap(),
        ModelAvailability::Unknown {
            reason: "Copilot CLI (version unreadable) has no model listing, and only a request \
                     would show whether \"gpt-5.4\" answers; run it, and a model that is not \
                     available is reported as model-unavailable"
                .into()
        }
    );
}

#[tokio::test]
async fn a_cli_that_never_answers_does_not_hang_the_probe() {
    let dir = tempfile::tempdir().unwrap();
    let script = write_script(dir.path(), "copilot", "exec sleep 30\n");
    let probe = probe_for(script, Duration::from_millis(300));
    let start = Instant::now();
    let answer = probe_past_busy(&probe, "gpt-5.4").await;
    assert_eq!(
        answer.unwrap(),
        ModelAvailability::Unknown {
            reason: "Copilot CLI (no answer to --version within 300ms) has no model listing, and \
                     only a request would show whether \"gpt-5.4\" answers; run it, and a model \
                     that is not available is reported as model-unavailable"
                .into()
        }
    );
    assert!(start.elapsed() < Duration::from_secs(10));
}

#[tokio::test]
async fn a_version_that_prints_is_named() {
    let dir = tempfile::tempdir().unwrap();
    // Copilot 1.0.102's own answer to --version.
    let script = write_script(
        dir.path(),
        "copilot",
        "printf 'GitHub Copilot CLI 1.0.102.\\nRun '\"'\"'copilot update'\"'\"' to check for updates.\\n'\n",
    );
    let probe = probe_for(script, Duration::from_secs(30));
    match probe_past_busy(&probe, "gpt-5.4").await.unwrap() {
        ModelAvailability::Unknown { reason } => {
            assert!(
                reason.starts_with("Copilot CLI 1.0.102 has no model listing"),
                "{reason}"
            );
        }
        other => panic!("expected Unknown, got {other:?}"),
    }
}

#[test]
fn headless_wires_the_adapter_to_the_engine() {
    let settings = CopilotSettings {
        model: Some("gpt-5.4".into()),
        ..CopilotSettings::default()
    };
    let provider = headless(Engine::new(EngineConfig::default()), settings.clone());
    assert_eq!(provider.id(), ProviderId::Copilot);
    assert_eq!(provider.adapter().settings(), &settings);
}
