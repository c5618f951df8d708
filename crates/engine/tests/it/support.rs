//! A test adapter for the fake agent's protocol, and the checks every test repeats.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use corral_engine::{
    AllowRule, AttemptEvidence, AttemptPlan, ChildEnv, CliAdapter, CommandSpec, Diagnosis,
    EgressNeeds, Engine, EngineConfig, EnvProfile, Liveness, PromptDelivery, ProxyHonour,
    RetryPolicy, StreamParser,
};

/// The fake's "model API" variable: its endpoint is what the adapter declares for egress.
pub const FAKE_BASE_URL_VAR: &str = "FAKE_AGENT_BASE_URL";
use corral_ports::{
    AgentEvent, AiSession, NoopObserver, ProviderError, ProviderId, ProviderOutput, RunObserver,
    SessionId,
};
use corral_test_support::session::session_in;
use corral_test_support::{fake_agent_path, read_pids, wait_all_dead};
use serde_json::Value;

/// Drives `corral-fake-agent <mode> <args…>`.
#[derive(Debug, Clone)]
pub struct FakeAdapter {
    pub program: PathBuf,
    pub mode: String,
    pub args: Vec<String>,
    pub pid_file: PathBuf,
    pub delivery: PromptDelivery,
    pub liveness: Liveness,
    pub minted: Option<SessionId>,
    /// What the capability row says: whether the CLI always ends with its terminal event.
    pub always_terminal_event: bool,
}

impl CliAdapter for FakeAdapter {
    fn provider(&self) -> ProviderId {
        ProviderId::Claude
    }

    fn prompt_delivery(&self) -> PromptDelivery {
        self.delivery
    }

    fn env_profile(&self) -> EnvProfile {
        EnvProfile::new("fake", &["FAKE_AGENT_*"])
    }

    fn command(&self, plan: &AttemptPlan<'_>) -> Result<CommandSpec, ProviderError> {
        let mut args: Vec<OsString> = vec![self.mode.clone().into()];
        args.extend(self.args.iter().map(OsString::from));
        args.push("--pid-file".into());
        args.push(self.pid_file.clone().into());
        if let Some(id) = plan.resume {
            args.push("--resume".into());
            args.push(id.as_str().into());
        }
        Ok(CommandSpec {
            program: self.program.clone(),
            args,
            env_set: Vec::new(),
            session_id: self.minted.clone(),
        })
    }

    fn parser(&self) -> Box<dyn StreamParser> {
        Box::new(FakeParser)
    }

    fn diagnose(&self, evidence: &AttemptEvidence<'_>) -> Diagnosis {
        Diagnosis {
            stale_session: evidence
                .stderr_tail
                .contains("No conversation found with session ID"),
            ..Diagnosis::default()
        }
    }

    fn liveness(&self) -> Liveness {
        self.liveness
    }

    /// Like a real adapter: the endpoint its base-URL variable names.
    fn egress(&self, env: &ChildEnv<'_>) -> EgressNeeds {
        EgressNeeds {
            endpoints: env
                .get(FAKE_BASE_URL_VAR)
                .and_then(AllowRule::from_url)
                .into_iter()
                .collect(),
            proxy: ProxyHonour::Environment,
        }
    }

    fn interactive_command(&self, plan: &AttemptPlan<'_>) -> Result<CommandSpec, ProviderError> {
        let mut spec = self.command(plan)?;
        if let Some(pointer) = plan.pointer {
            spec.args.push("--pointer".into());
            spec.args.push(pointer.sentence.clone().into());
        }
        Ok(spec)
    }

    fn capabilities(&self) -> corral_ports::Capabilities {
        corral_ports::Capabilities {
            prompt: corral_ports::PromptChannel::Stdin,
            session_id: corral_ports::SessionIdTiming::FirstLine,
            resume: true,
            effort: false,
            cost: corral_ports::CostReporting::TokensAndUsd,
            streaming: true,
            always_terminal_event: self.always_terminal_event,
            enforced_gates: &[],
            over_grants: &[],
        }
    }
}

struct FakeParser;

impl StreamParser for FakeParser {
    fn parse_line(&mut self, line: &str, out: &mut Vec<AgentEvent>) {
        out.push(corral_test_support::fake_protocol::to_agent_event(line));
    }
}

/// One test's scratch space: working directory, run directory, pid file.
pub struct Scratch {
    pub dir: tempfile::TempDir,
}

impl Scratch {
    pub fn new() -> Self {
        Scratch {
            dir: tempfile::tempdir().expect("tempdir"),
        }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    pub fn run_dir(&self) -> PathBuf {
        self.path("run")
    }

    pub fn pid_file(&self) -> PathBuf {
        self.path("pids")
    }

    pub fn adapter(&self, mode: &str, args: &[&str]) -> FakeAdapter {
        FakeAdapter {
            program: fake_agent_path(),
            mode: mode.to_string(),
            args: args.iter().map(|s| s.to_string()).collect(),
            pid_file: self.pid_file(),
            delivery: PromptDelivery::Stdin,
            liveness: Liveness::Output,
            minted: None,
            always_terminal_event: true,
        }
    }

    pub fn session(&self) -> AiSession {
        let work = self.path("work");
        std::fs::create_dir_all(&work).expect("work dir");
        session_in("do the thing", &work, &self.run_dir())
    }

    /// Runs the fake agent in `mode` with `args`, in [`Scratch::session`], under [`fast_config`].
    pub async fn run_fake(
        &self,
        mode: &str,
        args: &[&str],
    ) -> Result<ProviderOutput, ProviderError> {
        run(fast_config(), &self.adapter(mode, args), self.session()).await
    }

    /// Every JSON line of the execution log; panics on a line that does not parse or lacks the
    /// fields every line must have.
    pub fn log(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(self.run_dir().join("events.jsonl")).expect("log");
        text.lines()
            .enumerate()
            .map(|(i, line)| {
                let v: Value = serde_json::from_str(line)
                    .unwrap_or_else(|e| panic!("log line {} is not JSON ({e}): {line}", i + 1));
                for key in ["t", "monoMs", "attempt", "kind"] {
                    assert!(
                        v.get(key).is_some(),
                        "log line {} lacks {key}: {line}",
                        i + 1
                    );
                }
                v
            })
            .collect()
    }

    /// The execution log's complete lines so far (none before the file exists), for polling a
    /// run that is still going.
    pub fn log_lines(&self) -> Vec<Value> {
        std::fs::read_to_string(self.run_dir().join("events.jsonl"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// The log is complete: it starts with run_started and ends with run_finished.
    pub fn assert_log_complete(&self, outcome: &str) -> Vec<Value> {
        let log = self.log();
        assert_eq!(
            log.first().map(|v| v["kind"].clone()),
            Some("run_started".into())
        );
        let last = log.last().expect("non-empty log");
        assert_eq!(last["kind"], "run_finished", "last line: {last}");
        assert_eq!(last["outcome"], outcome, "last line: {last}");
        // Wherever the CLI announced a session, the last id announced is on disk.
        let announced = log
            .iter()
            .rev()
            .filter(|v| v["kind"] == "agent" && v["event"] == "session_started")
            .find_map(|v| v["sessionId"].as_str());
        if let Some(id) = announced {
            assert_eq!(
                self.session_file(),
                Some(format!("{id}\n")),
                "session-id.txt"
            );
            assert_eq!(last["sessionId"], id, "run_finished names the session");
        }
        log
    }

    pub fn session_file(&self) -> Option<String> {
        std::fs::read_to_string(self.run_dir().join("session-id.txt")).ok()
    }

    /// Every pid the fake reported is gone.
    pub fn assert_tree_gone(&self) -> Vec<u32> {
        let pids = read_pids(&self.pid_file());
        assert!(!pids.is_empty(), "the fake reported no pid");
        let survivors = wait_all_dead(&pids, Duration::from_secs(5));
        if !survivors.is_empty() {
            corral_test_support::kill_survivors(&survivors);
            panic!("processes left behind: {survivors:?} of {pids:?}");
        }
        pids
    }
}

pub fn fast_config() -> EngineConfig {
    EngineConfig {
        idle_timeout: Duration::from_millis(1500),
        kill_grace: Duration::from_millis(500),
        post_terminal_grace: Duration::from_millis(300),
        leftover_grace: Duration::from_millis(300),
        retry: RetryPolicy {
            max_retries: 3,
            initial: Duration::from_millis(20),
            max: Duration::from_millis(200),
            jitter: 0.2,
            max_reset_wait: Duration::from_secs(5),
            auto_resume: true,
            hand_over_after: None,
        },
        jitter_seed: Some(42),
        // These tests exercise supervision, not the sandbox (see sandbox.rs): run natively, with
        // the consent that requires.
        sandbox: corral_engine::SandboxConfig {
            backend: corral_engine::BackendChoice::Native,
            allow_degraded_native: true,
            ..corral_engine::SandboxConfig::default()
        },
        ..EngineConfig::default()
    }
}

pub async fn run(
    config: EngineConfig,
    adapter: &FakeAdapter,
    session: AiSession,
) -> Result<ProviderOutput, ProviderError> {
    run_observed(config, adapter, session, Arc::new(NoopObserver)).await
}

pub async fn run_observed(
    config: EngineConfig,
    adapter: &FakeAdapter,
    session: AiSession,
    observer: Arc<dyn RunObserver>,
) -> Result<ProviderOutput, ProviderError> {
    Engine::new(config).run(adapter, session, observer).await
}

pub fn records<'a>(log: &'a [Value], kind: &str) -> Vec<&'a Value> {
    log.iter().filter(|v| v["kind"] == kind).collect()
}

pub fn agent_events<'a>(log: &'a [Value], event: &str) -> Vec<&'a Value> {
    log.iter()
        .filter(|v| v["kind"] == "agent" && v["event"] == event)
        .collect()
}

pub fn write_file(path: &Path, text: &str) {
    std::fs::write(path, text).expect("write");
}
