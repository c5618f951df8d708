//! The model probe never spends tokens and never hangs: it reads `opencode models`, answers
//! `Available` or `Unavailable` with the listing, `Unknown` when the listing is late, fails or is
//! empty, and reports a missing CLI as an error. The real CLI is not run: shell scripts play
//! `opencode models`, and the fake agent plays one that never answers and has grandchildren,
//! which the time limit must take down with it.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use corral_engine::{Engine, EngineConfig, EnvInherit, TokioSpawner};
use corral_opencode::{OpencodeProbe, OpencodeSettings, headless, parse_model_listing, probe_env};
use corral_ports::{HeadlessAiProvider, ModelAvailability, ModelAvailabilityProbe, ProviderId};
use corral_test_support::probe::{assert_missing_cli_is_reported, probe_past_busy, write_script};

/// A listing as `opencode models` prints it (one `provider/model` per line, `opencode` providers
/// first), with the noise a first run can add around it.
const LISTING: &str = "\
\u{1b}[32mModels cache refreshed\u{1b}[0m
opencode/big-pickle
opencode/grok-code
anthropic/claude-opus-4-1
anthropic/claude-sonnet-4-5
fake/fake-model
openrouter/openai/gpt-5

opencode/grok-code
";

fn probe_for(command: PathBuf, timeout: Duration) -> OpencodeProbe {
    let settings = OpencodeSettings {
        command,
        probe_timeout: timeout,
        ..OpencodeSettings::default()
    };
    let ambient = [("PATH".to_string(), "/usr/bin:/bin".to_string())];
    OpencodeProbe::with_spawner(
        &settings,
        Arc::new(TokioSpawner),
        probe_env(ambient, EnvInherit::Core, &[]),
    )
}

fn listing_script(dir: &Path) -> PathBuf {
    let out = dir.join("seen");
    write_script(
        dir,
        "opencode",
        &format!(
            "echo \"$@\" > '{args}'\nenv > '{env}'\ncat <<'EOF'\n{LISTING}EOF\n",
            args = out.with_extension("args").display(),
            env = out.with_extension("env").display(),
        ),
    )
}

#[test]
fn the_listing_is_read_line_by_line() {
    assert_eq!(
        parse_model_listing(LISTING),
        [
            "opencode/big-pickle",
            "opencode/grok-code",
            "anthropic/claude-opus-4-1",
            "anthropic/claude-sonnet-4-5",
            "fake/fake-model",
            "openrouter/openai/gpt-5",
        ]
    );
    // `--verbose` tables, usage text and stray words are not model names.
    assert_eq!(
        parse_model_listing(
            "Anthropic\n──────\nModel  Name\nanthropic/claude-x  Claude X  3 / 15\n\
             -h/--help\n/leading\ntrailing/\nplain\n"
        ),
        Vec::<String>::new()
    );
    assert_eq!(parse_model_listing(""), Vec::<String>::new());
}

#[tokio::test]
async fn a_listed_model_is_available_and_the_probe_runs_opencode_models() {
    let dir = tempfile::tempdir().unwrap();
    let p = probe_for(listing_script(dir.path()), Duration::from_secs(30));
    assert_eq!(p.id(), ProviderId::Opencode);
    assert_eq!(
        probe_past_busy(&p, "fake/fake-model").await.unwrap(),
        ModelAvailability::Available
    );
    assert_eq!(
        probe_past_busy(&p, "openrouter/openai/gpt-5")
            .await
            .unwrap(),
        ModelAvailability::Available
    );
    let args = std::fs::read_to_string(dir.path().join("seen.args")).unwrap();
    assert_eq!(args.trim(), "models");
    // The listing sees the environment a run would get.
    let env = std::fs::read_to_string(dir.path().join("seen.env")).unwrap();
    assert!(
        env.lines().any(|l| l == "OPENCODE_DISABLE_AUTOUPDATE=1"),
        "{env}"
    );
    assert!(env.lines().any(|l| l == "PATH=/usr/bin:/bin"), "{env}");
}

#[tokio::test]
async fn an_unlisted_model_is_unavailable_with_what_is_offered() {
    let dir = tempfile::tempdir().unwrap();
    let p = probe_for(listing_script(dir.path()), Duration::from_secs(30));
    let known: Vec<String> = parse_model_listing(LISTING);
    for model in [
        "fake/nope",
        "anthropic/claude-sonnet-4-5 ",
        "claude-sonnet-4-5",
    ] {
        assert_eq!(
            probe_past_busy(&p, model).await.unwrap(),
            ModelAvailability::Unavailable {
                known: known.clone()
            },
            "{model:?}"
        );
    }
}

#[tokio::test]
async fn a_failed_or_empty_listing_is_unknown() {
    let dir = tempfile::tempdir().unwrap();
    let failing = write_script(
        dir.path(),
        "opencode-fails",
        "printf '\\033[91mError: \\033[0mUnexpected error, check log file\\n' >&2\nexit 3\n",
    );
    let p = probe_for(failing.clone(), Duration::from_secs(30));
    assert_eq!(
        probe_past_busy(&p, "fake/fake-model").await.unwrap(),
        ModelAvailability::Unknown {
            reason: format!(
                "`opencode models` failed with exit code 3: Error: Unexpected error, check log \
                 file; run the model, and a missing one is reported as model-unavailable \
                 (program {})",
                failing.display()
            )
        }
    );
    let empty = write_script(dir.path(), "opencode-empty", "exit 0\n");
    let p = probe_for(empty.clone(), Duration::from_secs(30));
    assert_eq!(
        probe_past_busy(&p, "fake/fake-model").await.unwrap(),
        ModelAvailability::Unknown {
            reason: format!(
                "`opencode models` listed no model (no provider is configured, or its key is \
                 not in the environment); run the model, and a missing one is reported as \
                 model-unavailable (program {})",
                empty.display()
            )
        }
    );
}

#[tokio::test]
async fn a_missing_cli_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-opencode");
    let p = probe_for(missing.clone(), Duration::from_secs(5));
    assert_missing_cli_is_reported(&p, "fake/fake-model", ProviderId::Opencode, &missing).await;
}

#[tokio::test]
async fn a_listing_that_never_ends_is_killed_with_its_whole_group() {
    let dir = tempfile::tempdir().unwrap();
    let pids = dir.path().join("pids");
    // Like the npm `opencode`, a wrapper whose real work happens in descendants: the fake agent
    // with two grandchildren, all in the group, sleeping forever.
    let hanging = write_script(
        dir.path(),
        "opencode",
        &format!(
            "exec '{}' grandchildren --count 2 --pid-file '{}'\n",
            corral_test_support::fake_agent_path().display(),
            pids.display()
        ),
    );
    let p = probe_for(hanging.clone(), Duration::from_millis(1500));
    let start = Instant::now();
    let answer = probe_past_busy(&p, "fake/fake-model").await.unwrap();
    let recorded = corral_test_support::read_pids(&pids);
    let survivors = corral_test_support::wait_all_dead(&recorded, Duration::from_secs(5));
    corral_test_support::kill_survivors(&survivors);
    assert_eq!(
        answer,
        ModelAvailability::Unknown {
            reason: format!(
                "`opencode models` did not answer within 1.5s and was killed; run the model, and \
                 a missing one is reported as model-unavailable (program {})",
                hanging.display()
            )
        }
    );
    assert!(start.elapsed() < Duration::from_secs(10));
    assert!(recorded.len() >= 3, "the tree had not formed: {recorded:?}");
    assert_eq!(survivors, Vec::<u32>::new(), "left behind");
}

#[test]
fn headless_wires_the_adapter_to_the_engine() {
    let settings = OpencodeSettings {
        model: Some("fake/fake-model".into()),
        auto_approve: true,
        ..OpencodeSettings::default()
    };
    let provider = headless(Engine::new(EngineConfig::default()), settings.clone());
    assert_eq!(provider.id(), ProviderId::Opencode);
    assert_eq!(provider.adapter().settings(), &settings);
    // The default constructor reads this process's environment through the same profile.
    let _ = OpencodeProbe::new(&settings);
}
