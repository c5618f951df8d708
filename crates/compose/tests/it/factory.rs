//! The factory builds what the settings describe.

use std::time::Duration;

use corral_compose::{Settings, engine_config, headless_provider};
use corral_ports::ProviderId;

#[test]
fn engine_config_follows_the_settings() {
    let mut s = Settings::default();
    s.run.idle_watchdog_ms = 120_000;
    s.run.wall_timeout_ms = 0;
    s.retry.rate_limit_retries = 7;
    let c = engine_config(&s);
    assert_eq!(c.idle_timeout, Duration::from_secs(120));
    assert_eq!(c.wall_timeout, None);
    assert_eq!(c.retry.max_retries, 7);
    s.run.wall_timeout_ms = 1000;
    assert_eq!(engine_config(&s).wall_timeout, Some(Duration::from_secs(1)));
}

#[test]
fn every_provider_id_gets_an_answer() {
    let s = Settings::default();
    for id in ProviderId::ALL {
        match headless_provider(id, &s, engine_config(&s)) {
            Ok(p) => assert_eq!(p.id(), id),
            Err(err) => panic!("{id}: {err}"),
        }
    }
}

#[test]
fn a_bad_version_range_reaching_the_factory_names_the_key() {
    let mut s = Settings::default();
    s.providers.claude.tested_versions = Some("nope".into());
    let err = headless_provider(ProviderId::Claude, &s, engine_config(&s))
        .err()
        .unwrap();
    assert!(
        err.to_string()
            .starts_with("providers.claude.tested_versions"),
        "{err}"
    );
}

/// The command runner follows the settings' sandbox: consented native runs, an unusable
/// bubblewrap without consent refuses, as a run would.
#[tokio::test]
async fn the_command_runner_follows_the_sandbox_settings() {
    use corral_compose::{BackendChoice, command_runner};
    use corral_ports::{CancellationToken, CommandError, CommandSpec};
    let dir = tempfile::tempdir().unwrap();
    let spec = CommandSpec::shell("echo checked", dir.path(), Duration::from_secs(30));
    let mut s = Settings::default();
    s.sandbox.backend = BackendChoice::Native;
    s.sandbox.allow_degraded_native = true;
    let out = command_runner(engine_config(&s))
        .run(spec.clone(), &CancellationToken::new())
        .await
        .unwrap();
    assert!(out.success(), "{out:?}");
    assert_eq!(out.stdout.text, "checked\n");

    let mut s = Settings::default();
    s.sandbox.bwrap = "/nonexistent/corral-bwrap".into();
    let err = command_runner(engine_config(&s))
        .run(spec, &CancellationToken::new())
        .await
        .unwrap_err();
    assert!(matches!(err, CommandError::Refused { .. }), "{err}");
}
