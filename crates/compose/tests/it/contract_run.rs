//! A task run to a checked result: the signals check after each provider run, and the corrective
//! retries on the captured session, with a scripted provider in place of a CLI.

use std::collections::VecDeque;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use corral_compose::{Contract, ContractPolicy, SignalsError, SignalsVerdict, run_with_contract};
use corral_ports::{
    AiSession, HeadlessAiProvider, NoopObserver, Outcome, ProviderError, ProviderId,
    ProviderOutput, RunEvidence, RunObserver, SessionId, Usage,
};
use corral_test_support::session::session_in;

/// What one provider run does: the `signals.json` it leaves (none: removed) and how it ends.
struct Step {
    signals: Option<&'static str>,
    result: Result<&'static str, &'static str>,
}

/// A provider that plays `steps` in order and remembers every session it was handed.
struct Scripted {
    steps: Mutex<VecDeque<Step>>,
    seen: Mutex<Vec<AiSession>>,
}

impl Scripted {
    fn new(steps: Vec<Step>) -> Self {
        Scripted {
            steps: Mutex::new(steps.into()),
            seen: Mutex::new(Vec::new()),
        }
    }

    fn seen(&self) -> Vec<AiSession> {
        self.seen.lock().unwrap().clone()
    }
}

fn usage(input: u64) -> Usage {
    Usage {
        input: Some(input),
        ..Usage::default()
    }
}

#[async_trait]
impl HeadlessAiProvider for Scripted {
    fn id(&self) -> ProviderId {
        ProviderId::Claude
    }

    async fn run(
        &self,
        session: AiSession,
        _observer: Arc<dyn RunObserver>,
    ) -> Result<ProviderOutput, ProviderError> {
        self.seen.lock().unwrap().push(session.clone());
        let step = self.steps.lock().unwrap().pop_front().expect("a step left");
        match step.signals {
            Some(text) => std::fs::write(&session.signals_file, text).unwrap(),
            None => drop(std::fs::remove_file(&session.signals_file)),
        }
        match step.result {
            Ok(id) => Ok(ProviderOutput {
                outcome: Outcome::Succeeded,
                signals_file: session.signals_file,
                signals_present: step.signals.is_some(),
                session_id: Some(SessionId::new(id).unwrap()),
                exit_code: Some(0),
                recovered_from_exit: false,
                usage: usage(10),
                attempts: 2,
                duration: Duration::from_millis(5),
                final_text: None,
                attestation: None,
            }),
            Err(reason) => Err(ProviderError::Crashed {
                provider: ProviderId::Claude,
                reason: reason.into(),
                evidence: Box::new(RunEvidence {
                    usage: usage(7),
                    attempts: 3,
                    ..RunEvidence::default()
                }),
            }),
        }
    }
}

const VALID: &str = r#"{"schemaVersion": 1, "signals": [{"type": "task-complete", "timestamp": "2026-01-01T12:00:00Z"}]}"#;
const BLOCKED: &str = r#"{"schemaVersion": 1, "signals": [{"type": "task-blocked", "timestamp": "2026-01-01T12:00:00Z", "reason": "no credentials"}]}"#;
const NOT_JSON: &str = "{ not json";

fn first_session(dir: &Path) -> AiSession {
    let run_dir = dir.join("run");
    std::fs::create_dir_all(&run_dir).unwrap();
    session_in("do the task", dir, &run_dir)
}

async fn play(
    steps: Vec<Step>,
    contract: Option<&Contract>,
    corrective: u32,
) -> (corral_compose::ContractRun, Vec<AiSession>, Vec<String>) {
    let dir = tempfile::tempdir().unwrap();
    let provider = Scripted::new(steps);
    let heard = Mutex::new(Vec::new());
    let on_corrective = |e: &SignalsError| heard.lock().unwrap().push(e.to_string());
    let run = run_with_contract(
        &provider,
        first_session(dir.path()),
        ContractPolicy {
            contract,
            corrective_retries: corrective,
        },
        Arc::new(NoopObserver),
        &on_corrective,
    )
    .await;
    (run, provider.seen(), heard.into_inner().unwrap())
}

#[tokio::test]
async fn bad_signals_are_corrected_on_the_captured_session() {
    let contract = Contract::generator();
    let (run, seen, heard) = play(
        vec![
            Step {
                signals: Some(NOT_JSON),
                result: Ok("ses-first"),
            },
            Step {
                signals: Some(VALID),
                result: Ok("ses-first"),
            },
        ],
        Some(&contract),
        2,
    )
    .await;
    assert_eq!(run.provider_runs, 2);
    assert_eq!(run.attempts, 4, "attempts add up over the provider runs");
    assert_eq!(
        run.usage.input,
        Some(20),
        "usage adds up over the provider runs"
    );
    assert!(run.result.is_ok());
    match &run.verdict {
        SignalsVerdict::Valid { kinds, blocked, .. } => {
            assert_eq!(kinds, &["task-complete"]);
            assert_eq!(blocked, &None);
        }
        other => panic!("expected valid signals, got {other:?}"),
    }
    assert_eq!(heard.len(), 1, "the caller hears of the one correction");
    assert_eq!(seen[0].resume, None);
    assert_eq!(
        seen[1].resume.as_ref().map(SessionId::as_str),
        Some("ses-first")
    );
    assert!(
        seen[1].prompt.contains("signals.json") && !seen[1].prompt.contains("do the task"),
        "the retry sends the corrective message, not the task: {}",
        seen[1].prompt
    );
    assert_eq!(seen[0].cold_prompt, None);
    assert_eq!(
        seen[1].cold_prompt.as_deref(),
        Some("do the task"),
        "should the session be gone, the cold start gets the task, not the correction"
    );
}

#[tokio::test]
async fn signals_still_bad_when_the_retries_run_out_are_reported_invalid() {
    let contract = Contract::generator();
    let (run, seen, heard) = play(
        vec![
            Step {
                signals: None,
                result: Ok("ses-a"),
            },
            Step {
                signals: Some(NOT_JSON),
                result: Ok("ses-a"),
            },
        ],
        Some(&contract),
        1,
    )
    .await;
    assert_eq!(seen.len(), 2);
    assert_eq!(heard.len(), 1);
    assert!(run.result.is_ok());
    assert!(
        matches!(run.verdict, SignalsVerdict::Invalid(_)),
        "{:?}",
        run.verdict
    );
}

#[tokio::test]
async fn a_blocked_task_is_valid_and_names_the_reason() {
    let contract = Contract::generator();
    let (run, seen, _) = play(
        vec![Step {
            signals: Some(BLOCKED),
            result: Ok("ses-b"),
        }],
        Some(&contract),
        2,
    )
    .await;
    assert_eq!(seen.len(), 1);
    match &run.verdict {
        SignalsVerdict::Valid { blocked, .. } => {
            assert_eq!(blocked.as_deref(), Some("no credentials"));
        }
        other => panic!("expected valid signals, got {other:?}"),
    }
}

#[tokio::test]
async fn without_a_contract_nothing_is_checked_or_retried() {
    let (run, seen, heard) = play(
        vec![Step {
            signals: None,
            result: Ok("ses-c"),
        }],
        None,
        2,
    )
    .await;
    assert_eq!(seen.len(), 1);
    assert!(heard.is_empty());
    assert!(matches!(run.verdict, SignalsVerdict::NotChecked));
}

#[tokio::test]
async fn a_failed_run_keeps_its_error_and_what_it_paid() {
    let contract = Contract::generator();
    let (run, seen, heard) = play(
        vec![
            Step {
                signals: Some(NOT_JSON),
                result: Ok("ses-d"),
            },
            Step {
                signals: None,
                result: Err("it died"),
            },
        ],
        Some(&contract),
        2,
    )
    .await;
    assert_eq!(seen.len(), 2);
    assert_eq!(heard.len(), 1);
    assert_eq!(run.provider_runs, 2);
    assert_eq!(
        run.attempts,
        2 + 3,
        "the failed run's attempts come from its evidence"
    );
    assert_eq!(run.usage.input, Some(17));
    assert!(
        matches!(run.result, Err(ProviderError::Crashed { .. })),
        "the error is what the task came to"
    );
    assert!(matches!(run.verdict, SignalsVerdict::NotChecked));
}

/// A provider whose first run leaves a FIFO as `signals.json` and whose second (the corrective
/// retry) notes what it found there before writing valid signals.
struct PlantsAFifo {
    runs: Mutex<u32>,
    found: Mutex<Vec<Option<bool>>>,
}

#[async_trait]
impl HeadlessAiProvider for PlantsAFifo {
    fn id(&self) -> ProviderId {
        ProviderId::Claude
    }

    async fn run(
        &self,
        session: AiSession,
        _observer: Arc<dyn RunObserver>,
    ) -> Result<ProviderOutput, ProviderError> {
        use std::os::unix::fs::FileTypeExt;
        let run = {
            let mut runs = self.runs.lock().unwrap();
            *runs += 1;
            *runs
        };
        let is_fifo = std::fs::symlink_metadata(&session.signals_file)
            .ok()
            .map(|m| m.file_type().is_fifo());
        self.found.lock().unwrap().push(is_fifo);
        if run == 1 {
            corral_test_support::mkfifo(&session.signals_file);
        } else if is_fifo != Some(true) {
            // A real CLI's write would block on a FIFO until the idle watchdog: this one only
            // writes where it can.
            std::fs::write(&session.signals_file, VALID).unwrap();
        }
        Ok(ProviderOutput {
            outcome: Outcome::Succeeded,
            signals_file: session.signals_file,
            signals_present: true,
            session_id: Some(SessionId::new("ses-fifo").unwrap()),
            exit_code: Some(0),
            recovered_from_exit: false,
            usage: usage(1),
            attempts: 1,
            duration: Duration::from_millis(5),
            final_text: None,
            attestation: None,
        })
    }
}

/// Issue 29 item 3: an agent that left `signals.json` as a FIFO had its corrective retry
/// resumed with the FIFO in place, whose write then blocked until the idle watchdog. The FIFO
/// is removed before the retry, and `events.jsonl` names it.
#[tokio::test]
async fn a_fifo_left_as_signals_is_removed_before_the_corrective_retry_and_named() {
    let dir = tempfile::tempdir().unwrap();
    let provider = PlantsAFifo {
        runs: Mutex::new(0),
        found: Mutex::new(Vec::new()),
    };
    let contract = Contract::generator();
    let first = first_session(dir.path());
    let run_dir = first.output_dir.clone();
    let run = run_with_contract(
        &provider,
        first,
        ContractPolicy {
            contract: Some(&contract),
            corrective_retries: 1,
        },
        Arc::new(NoopObserver),
        &|_: &SignalsError| {},
    )
    .await;
    assert_eq!(
        *provider.found.lock().unwrap(),
        [None, None],
        "the corrective retry finds no FIFO"
    );
    assert!(
        matches!(run.verdict, SignalsVerdict::Valid { .. }),
        "{:?}",
        run.verdict
    );
    let log = std::fs::read_to_string(run_dir.join("events.jsonl")).unwrap();
    let removed: Vec<serde_json::Value> = log
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["kind"] == "tampering_removed")
        .collect();
    assert_eq!(removed.len(), 1, "{log}");
    assert_eq!(removed[0]["was"], "a FIFO");
    assert_eq!(
        removed[0]["path"],
        run_dir.join("signals.json").display().to_string()
    );
}
