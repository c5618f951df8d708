//! The model probe never spends tokens and never hangs: a missing CLI is an error; a model in
//! Codex's model cache is available; anything else is `Unknown` with the reason. The real CLI is
//! not run: the fake agent, a missing path and a script that never answers play it, and the cache
//! files are written here.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use corral_codex::{CodexProbe, CodexSettings, MODELS_CACHE_FILE, headless, model_slugs};
use corral_engine::{Engine, EngineConfig, TokioSpawner};
use corral_ports::{
    HeadlessAiProvider, ModelAvailability, ModelAvailabilityProbe, ProviderError, ProviderId,
};
use serde_json::json;

fn probe_for(command: PathBuf, codex_home: Option<&Path>, provider: Option<&str>) -> CodexProbe {
    CodexProbe::with_parts(
        &CodexSettings {
            command,
            model_provider: provider.map(str::to_string),
            version_timeout: Duration::from_secs(30),
            ..CodexSettings::default()
        },
        codex_home.map(Path::to_path_buf),
        Arc::new(TokioSpawner),
    )
}

fn fake_cli() -> PathBuf {
    corral_test_support::fake_agent_path()
}

fn unknown(reason: &str) -> ModelAvailability {
    ModelAvailability::Unknown {
        reason: reason.into(),
    }
}

/// A cache in the shape of Codex's bundled catalog, with one hidden model.
fn write_cache(dir: &Path) {
    let cache = json!({
        "fetched_at": "2026-11-30T12:00:00Z",
        "etag": "W/\"abc\"",
        "client_version": "0.171.0",
        "models": [
            {"slug": "gpt-5.5", "display_name": "GPT-5.5", "visibility": "list"},
            {"slug": "codex-auto-review", "visibility": "hide"},
        ],
    });
    std::fs::write(dir.join(MODELS_CACHE_FILE), cache.to_string()).unwrap();
}

#[tokio::test]
async fn a_missing_cli_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-codex");
    let probe = probe_for(missing.clone(), Some(dir.path()), None);
    assert_eq!(probe.id(), ProviderId::Codex);
    match probe.probe("gpt-5.5").await {
        Err(ProviderError::CliNotFound {
            provider, program, ..
        }) => {
            assert_eq!(provider, ProviderId::Codex);
            assert_eq!(program, missing.display().to_string());
        }
        other => panic!("expected CliNotFound, got {other:?}"),
    }
}

#[tokio::test]
async fn the_model_cache_answers_when_it_lists_the_model() {
    let home = tempfile::tempdir().unwrap();
    write_cache(home.path());
    let probe = probe_for(fake_cli(), Some(home.path()), None);
    assert_eq!(
        probe.probe("gpt-5.5").await.unwrap(),
        ModelAvailability::Available
    );
    // Hidden from the picker, still usable.
    assert_eq!(
        probe.probe("codex-auto-review").await.unwrap(),
        ModelAvailability::Available
    );
    // Naming the built-in provider reads the same cache.
    let openai = probe_for(fake_cli(), Some(home.path()), Some("openai"));
    assert_eq!(
        openai.probe("gpt-5.5").await.unwrap(),
        ModelAvailability::Available
    );
    // Not listed: unknown, not unavailable.
    let path = home.path().join(MODELS_CACHE_FILE);
    assert_eq!(
        probe.probe("gpt-nope").await.unwrap(),
        unknown(&format!(
            "Codex (version unreadable): \"gpt-nope\" is not among the 2 models cached in {}, but \
             that cache may be stale and lists only what the OpenAI catalog offered this login; \
             only a paid request would show whether \"gpt-nope\" answers, and a missing model is \
             reported as model-unavailable",
            path.display()
        ))
    );
}

#[tokio::test]
async fn without_a_usable_cache_the_answer_is_unknown() {
    let home = tempfile::tempdir().unwrap();
    let path = home.path().join(MODELS_CACHE_FILE);
    let probe = probe_for(fake_cli(), Some(home.path()), None);
    let tail = "; only a paid request would show whether \"gpt-5.5\" answers, and a missing model \
                is reported as model-unavailable";
    assert_eq!(
        probe.probe("gpt-5.5").await.unwrap(),
        unknown(&format!(
            "Codex (version unreadable): no model cache at {}{tail}",
            path.display()
        ))
    );
    std::fs::write(&path, "{ not json").unwrap();
    let ModelAvailability::Unknown { reason } = probe.probe("gpt-5.5").await.unwrap() else {
        panic!("expected Unknown")
    };
    assert!(reason.contains("is not JSON"), "{reason}");
    std::fs::write(&path, r#"{"models": []}"#).unwrap();
    assert_eq!(
        probe.probe("gpt-5.5").await.unwrap(),
        unknown(&format!(
            "Codex (version unreadable): {} lists no models{tail}",
            path.display()
        ))
    );
    // No CODEX_HOME and no HOME.
    let nowhere = probe_for(fake_cli(), None, None);
    assert_eq!(
        nowhere.probe("gpt-5.5").await.unwrap(),
        unknown(
            "Codex (version unreadable): neither CODEX_HOME nor HOME is set, so no model cache"
        )
    );
}

#[tokio::test]
async fn a_custom_provider_is_not_judged_by_openais_catalog() {
    let home = tempfile::tempdir().unwrap();
    write_cache(home.path());
    let probe = probe_for(fake_cli(), Some(home.path()), Some("fake"));
    assert_eq!(
        probe.probe("gpt-5.5").await.unwrap(),
        unknown(
            "Codex (version unreadable) runs model provider \"fake\", which has no model listing \
             Codex keeps; only a paid request would show whether \"gpt-5.5\" answers"
        )
    );
}

#[test]
fn model_slugs_reads_the_shapes_a_cache_may_take() {
    assert_eq!(
        model_slugs(&json!({"models": [{"slug": "b"}, {"id": "a"}, "c", 7, {"name": "x"}]})),
        ["a", "b", "c"]
    );
    assert_eq!(model_slugs(&json!(["m1", {"slug": "m2"}])), ["m1", "m2"]);
    assert_eq!(
        model_slugs(&json!({"entry": {"openai": {"models": [{"slug": "deep"}]}}})),
        ["deep"]
    );
    assert!(model_slugs(&json!({"slug": "not in a models array"})).is_empty());
    assert!(model_slugs(&json!("gpt")).is_empty());
}

#[tokio::test]
async fn a_cli_that_never_answers_does_not_hang_the_probe() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("codex");
    std::fs::write(&script, "#!/bin/sh\nexec sleep 30\n").unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    write_cache(dir.path());
    let probe = CodexProbe::with_parts(
        &CodexSettings {
            command: script,
            version_timeout: Duration::from_millis(300),
            ..CodexSettings::default()
        },
        Some(dir.path().to_path_buf()),
        Arc::new(TokioSpawner),
    );
    let start = Instant::now();
    let mut answer = probe.probe("gpt-5.5").await;
    // A freshly written script can be "busy" while another test thread forks; try again then.
    for _ in 0..20 {
        match &answer {
            Err(ProviderError::CliNotFound { reason, .. }) if reason.contains("busy") => {
                tokio::time::sleep(Duration::from_millis(50)).await;
                answer = probe.probe("gpt-5.5").await;
            }
            _ => break,
        }
    }
    // The cache still answers.
    assert_eq!(answer.unwrap(), ModelAvailability::Available);
    assert!(start.elapsed() < Duration::from_secs(10));
}

#[test]
fn headless_wires_the_adapter_to_the_engine() {
    let settings = CodexSettings {
        model: Some("gpt-5.5".into()),
        ..CodexSettings::default()
    };
    let provider = headless(Engine::new(EngineConfig::default()), settings.clone());
    assert_eq!(provider.id(), ProviderId::Codex);
    assert_eq!(provider.adapter().settings(), &settings);
}
