//! The model probe never spends tokens and never hangs: a missing CLI is an error, anything else
//! is `Unknown` with the reason. The real CLI is not run: the fake agent, a missing path and a
//! script that never answers play it.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use corral_engine::{Engine, EngineConfig};
use corral_grok::{GrokProbe, GrokSettings, headless};
use corral_ports::{HeadlessAiProvider, ModelAvailability, ModelAvailabilityProbe, ProviderId};
use corral_test_support::probe::{assert_missing_cli_is_reported, probe_past_busy, write_script};

fn probe_for(command: PathBuf, timeout: Duration) -> GrokProbe {
    GrokProbe::new(&GrokSettings {
        command,
        version_timeout: timeout,
        ..GrokSettings::default()
    })
}

#[tokio::test]
async fn a_missing_cli_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-grok");
    let probe = probe_for(missing.clone(), Duration::from_secs(5));
    assert_missing_cli_is_reported(&probe, "grok-code-fast-1", ProviderId::Grok, &missing).await;
}

#[tokio::test]
async fn a_cli_that_starts_gives_unknown_without_a_request() {
    // The fake agent refuses `--version` (no version in its output): still a CLI that starts.
    let probe = probe_for(
        corral_test_support::fake_agent_path(),
        Duration::from_secs(30),
    );
    assert_eq!(
        probe.probe("grok-4-latest").await.unwrap(),
        ModelAvailability::Unknown {
            reason: "Grok CLI (version unreadable) has no model listing, and only a paid request \
                     would show whether \"grok-4-latest\" answers; run it, and a model the API \
                     rejects is reported as model-unavailable"
                .into()
        }
    );
}

#[tokio::test]
async fn a_cli_that_never_answers_does_not_hang_the_probe() {
    let dir = tempfile::tempdir().unwrap();
    let script = write_script(dir.path(), "grok", "exec sleep 30\n");
    let probe = probe_for(script, Duration::from_millis(300));
    let start = Instant::now();
    let answer = probe_past_busy(&probe, "grok-3").await;
    assert_eq!(
        answer.unwrap(),
        ModelAvailability::Unknown {
            reason: "Grok CLI (no answer to --version within 300ms) has no model listing, and \
                     only a paid request would show whether \"grok-3\" answers; run it, and a \
                     model the API rejects is reported as model-unavailable"
                .into()
        }
    );
    assert!(start.elapsed() < Duration::from_secs(10));
}

#[test]
fn headless_wires_the_adapter_to_the_engine() {
    let settings = GrokSettings {
        model: Some("grok-code-fast-1".into()),
        ..GrokSettings::default()
    };
    let provider = headless(Engine::new(EngineConfig::default()), settings.clone());
    assert_eq!(provider.id(), ProviderId::Grok);
    assert_eq!(provider.adapter().settings(), &settings);
}
