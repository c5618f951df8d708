//! The adapter driven by the real engine. A shell script stands in for `grok`: it answers
//! `--version` with `1.0.1` like the pinned CLI, logs its arguments and working directory, and
//! replays a recorded case's stdout, stderr and exit code. This checks what the unit tests
//! cannot: that Grok's exit-0 error reports end as the right outcome (rate limit with cold
//! retries, crash, refusal), that the prompt reaches the pointer file and never argv, and that a
//! resume is refused before anything starts.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use corral_engine::{Engine, EngineConfig, RetryPolicy};
use corral_grok::{GrokSettings, headless};
use corral_ports::{
    AiSession, HeadlessAiProvider, NoopObserver, Outcome, ProviderError, ProviderOutput, SessionId,
};
use corral_test_support::probe::write_script;
use corral_test_support::session::{PROMPT, session_in};

use crate::support::{SAMPLES, exit_code_of};

/// A scratch directory holding the stand-in script, the repository and the run directory.
struct Stage {
    _dir: tempfile::TempDir,
    script: PathBuf,
    argv_log: PathBuf,
    repo: PathBuf,
    run: PathBuf,
}

/// A stage whose script replays recorded `case`.
fn stage(case: &str) -> Stage {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_path_buf();
    let repo = root.join("repo");
    let run = root.join("run");
    std::fs::create_dir_all(&repo).unwrap();
    std::fs::create_dir_all(&run).unwrap();
    let stderr = root.join(format!("{case}.stderr"));
    std::fs::write(&stderr, SAMPLES.stderr_of(case)).unwrap();
    let argv_log = root.join("argv.log");
    let stdout = SAMPLES.dir().join(format!("{case}.stdout"));
    let script = write_script(
        &root,
        "grok",
        &format!(
            "if [ \"$1\" = \"--version\" ]; then echo 1.0.1; exit 0; fi\n\
             {{ echo \"cwd=$(pwd)\"; for a in \"$@\"; do printf '%s\\n' \"$a\"; done; echo '--'; }} >> '{log}'\n\
             cat '{stdout}'\n\
             cat '{stderr}' >&2\n\
             exit {code}\n",
            log = argv_log.display(),
            stdout = stdout.display(),
            stderr = stderr.display(),
            code = exit_code_of(case),
        ),
    );
    Stage {
        _dir: dir,
        script,
        argv_log,
        repo,
        run,
    }
}

impl Stage {
    fn session(&self) -> AiSession {
        session_in(PROMPT, &self.repo, &self.run)
    }

    /// Each invocation's logged lines: `cwd=<dir>`, then one argument per line.
    fn invocations(&self) -> Vec<Vec<String>> {
        let Ok(log) = std::fs::read_to_string(&self.argv_log) else {
            return Vec::new();
        };
        log.split_terminator("--\n")
            .map(|block| block.lines().map(str::to_string).collect())
            .collect()
    }

    fn expected_invocation(&self) -> Vec<String> {
        let sentence = format!(
            "Your complete task is in the file {}. Read that file and follow its \
             instructions exactly.",
            self.run.join("grok-prompt.md").display()
        );
        vec![
            format!("cwd={}", self.repo.display()),
            "-p".into(),
            sentence,
            "-d".into(),
            self.repo.display().to_string(),
        ]
    }

    async fn run(&self, session: AiSession) -> Result<ProviderOutput, ProviderError> {
        let settings = GrokSettings {
            command: self.script.clone(),
            ..GrokSettings::default()
        };
        let provider = headless(Engine::new(config()), settings);
        let mut result = provider.run(session.clone(), Arc::new(NoopObserver)).await;
        // A freshly written script can be "busy" while another test thread forks; try again then.
        for _ in 0..20 {
            match &result {
                Err(e) if e.to_string().contains("busy") => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    let _ = std::fs::remove_file(&self.argv_log);
                    result = provider.run(session.clone(), Arc::new(NoopObserver)).await;
                }
                _ => break,
            }
        }
        result
    }
}

/// Short timers and a controlled ambient environment; two quick rate-limit retries.
fn config() -> EngineConfig {
    EngineConfig {
        idle_timeout: Duration::from_secs(30),
        kill_grace: Duration::from_millis(500),
        post_terminal_grace: Duration::from_secs(2),
        leftover_grace: Duration::from_millis(300),
        retry: RetryPolicy {
            max_retries: 2,
            initial: Duration::from_millis(10),
            max: Duration::from_millis(50),
            jitter: 0.0,
            max_reset_wait: Duration::from_secs(5),
            auto_resume: true,
            hand_over_after: None,
        },
        jitter_seed: Some(7),
        ambient_env: Some(vec![
            ("PATH".into(), "/usr/bin:/bin".into()),
            ("GROK_API_KEY".into(), "sk-test".into()),
        ]),
        // Grok's output under supervision is the subject here, not the sandbox: run natively,
        // with the consent that requires.
        sandbox: corral_engine::SandboxConfig {
            backend: corral_engine::BackendChoice::Native,
            allow_degraded_native: true,
            ..corral_engine::SandboxConfig::default()
        },
        ..EngineConfig::default()
    }
}

fn log_text(run: &Path) -> String {
    std::fs::read_to_string(run.join(corral_ports::run_dir::EVENTS_FILE)).unwrap()
}

#[tokio::test]
async fn a_429_reported_with_exit_0_is_retried_cold_then_reported_as_rate_limited() {
    let s = stage("e429-forever");
    let err = s.run(s.session()).await.unwrap_err();
    match &err {
        ProviderError::RateLimited {
            retries, evidence, ..
        } => {
            assert_eq!(*retries, 2);
            assert_eq!(evidence.attempts, 3);
            assert_eq!(evidence.exit_code, Some(0));
            assert_eq!(evidence.session_id, None);
        }
        other => panic!("expected RateLimited, got {other}"),
    }
    // Every attempt starts cold with the same command: the pointer, never the prompt.
    let expected = s.expected_invocation();
    assert_eq!(
        s.invocations(),
        vec![expected.clone(), expected.clone(), expected]
    );
    assert_eq!(
        std::fs::read_to_string(s.run.join("grok-prompt.md")).unwrap(),
        PROMPT
    );
}

#[tokio::test]
async fn an_api_error_reported_with_exit_0_is_a_crash_not_a_success() {
    let s = stage("e500");
    let err = s.run(s.session()).await.unwrap_err();
    match &err {
        ProviderError::Crashed { evidence, .. } => {
            assert_eq!(evidence.attempts, 1);
            assert_eq!(evidence.exit_code, Some(0));
            // Grok says nothing on stderr: its words are in the execution log only.
            assert_eq!(evidence.stderr_tail, "");
        }
        other => panic!("expected Crashed, got {other}"),
    }
    assert!(log_text(&s.run).contains("Grok API error: 500 Internal server error (fakeapi)"));
}

#[tokio::test]
async fn failed_authentication_and_a_missing_key_are_refusals() {
    for (case, words) in [
        ("e401", "could not authenticate (HTTP 401)"),
        ("nokey", "Grok found no API key"),
        ("badflag", "Grok rejected its command line"),
    ] {
        let s = stage(case);
        match s.run(s.session()).await.unwrap_err() {
            ProviderError::Refused {
                message, evidence, ..
            } => {
                assert!(message.contains(words), "{case}: {message}");
                assert_eq!(evidence.attempts, 1, "{case}");
            }
            other => panic!("{case}: expected Refused, got {other}"),
        }
    }
}

#[tokio::test]
async fn a_tool_run_succeeds_with_its_final_text() {
    let s = stage("write");
    let out = s.run(s.session()).await.unwrap();
    assert_eq!(out.outcome, Outcome::Succeeded);
    assert_eq!(
        out.final_text.as_deref(),
        Some("Created signals.json as requested.")
    );
    assert_eq!(out.session_id, None);
    assert_eq!(out.attempts, 1);
    assert_eq!(s.invocations(), vec![s.expected_invocation()]);
}

#[tokio::test]
async fn a_resume_is_refused_before_anything_starts() {
    let s = stage("text");
    let resumed = AiSession {
        resume: Some(SessionId::new("abc-123").unwrap()),
        ..s.session()
    };
    let err = s.run(resumed).await.unwrap_err();
    assert!(matches!(err, ProviderError::InvalidSession { .. }), "{err}");
    let message = err.to_string();
    assert!(message.contains("no headless resume"), "{message}");
    assert_eq!(
        message.lines().nth(1),
        Some("hint: start a new session instead"),
        "{message}"
    );
    assert_eq!(s.invocations(), Vec::<Vec<String>>::new());
}
