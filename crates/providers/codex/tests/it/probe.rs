//! The model probe never spends tokens and never hangs: a missing CLI is an error; a model in
//! Codex's model cache is available; anything else is `Unknown` with the reason. The real CLI is
//! not run: the fake agent, a missing path and a script that never answers play it, and the cache
//! files are written here.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use corral_codex::{CodexProbe, CodexSettings, MODELS_CACHE_FILE, headless, model_slugs};
use corral_engine::{Engine, EngineConfig, TokioSpawner};
use corral_ports::{HeadlessAiProvider, ModelAvailability, ModelAvailabilityProbe, ProviderId};
use corral_test_support::probe::{assert_missing_cli_is_reported, probe_past_busy, write_script};
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
    assert_missing_cli_is_reported(&probe, "gpt-5.5", ProviderId::Codex, &missing).await;
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
    let script = write_script(dir.path(), "codex", "exec sleep 30\n");
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
    let answer = probe_past_busy(&probe, "gpt-5.5").await;
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
