//! The sprint's role agent over Corral's real Claude adapter, engine and sandbox, with a shell
//! script standing in for Claude Code: one spawn leaves the record `corral run` leaves, signals
//! are held to the contract with corrective retries, a read-only spawn cannot write the work
//! tree (or is refused where the sandbox cannot promise it), and a session that is gone gets
//! the cold prompt.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use corral_compose::{BackendChoice, Contract, EngineConfig, Settings, engine_config, role_agent};
use corral_ports::{CancellationToken, ErrorClass, NoopObserver, Outcome, ProviderId, SessionId};
use corral_sprint::{Role, RoleAgent, RoleSettings, SpawnReport, SpawnRequest, SpawnVerdict};
use serde_json::Value;

/// The session the stand-in announces.
const SESSION: &str = "11111111-2222-4333-8444-555555555555";
/// A session no CLI has.
const GONE: &str = "99999999-8888-4777-8666-555555555555";

const GOOD_SIGNALS: &str = r#"{"schemaVersion":1,"signals":[{"type":"task-complete","timestamp":"2026-12-01T10:00:00Z"}]}"#;
const BAD_SIGNALS: &str = "{ not json";

/// A scratch home, work tree and spawn directory.
struct Scratch {
    dir: tempfile::TempDir,
}

impl Scratch {
    fn new() -> Self {
        let s = Scratch {
            dir: tempfile::tempdir().unwrap(),
        };
        for d in [s.home(), s.work_tree(), s.spawn_dir()] {
            std::fs::create_dir_all(d).unwrap();
        }
        s
    }

    fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }

    fn work_tree(&self) -> PathBuf {
        self.dir.path().join("tree")
    }

    /// `rounds/1/generator/` as the sprint would have made it.
    fn spawn_dir(&self) -> PathBuf {
        self.dir.path().join("spawn")
    }

    /// A Claude Code stand-in: answers `--version` like the pinned CLI, saves each prompt it
    /// is sent (`prompt-<n>.txt` in the spawn directory, with its argv in `argv-<n>.txt`),
    /// runs `acts` with `$SIGNALS` and `$RUN_DIR` set from the prompt, then prints an init line
    /// announcing [`SESSION`] and a successful result.
    fn agent(&self, acts: &str) -> PathBuf {
        let init = serde_json::json!({
            "type": "system", "subtype": "init", "session_id": SESSION, "model": "fake",
        });
        let result = serde_json::json!({
            "type": "result", "subtype": "success", "is_error": false, "result": "done",
            "session_id": SESSION, "total_cost_usd": 0.001,
            "usage": {"input_tokens": 10, "output_tokens": 5},
        });
        let script = format!(
            r#"#!/bin/sh
if [ "$1" = "--version" ]; then echo "2.1.197 (Claude Code)"; exit 0; fi
PROMPT=$(cat)
SIGNALS=$(printf '%s\n' "$PROMPT" | grep -o '/[^`]*signals\.json' | head -n 1)
RUN_DIR=$(dirname "$SIGNALS")
export SIGNALS RUN_DIR
N=$(ls "$RUN_DIR" | grep -c '^prompt-')
printf '%s' "$PROMPT" > "$RUN_DIR/prompt-$N.txt"
printf '%s\n' "$@" > "$RUN_DIR/argv-$N.txt"
{acts}
echo '{init}'
echo '{result}'
"#
        );
        let path = self.dir.path().join("fake-claude.sh");
        std::fs::write(&path, script).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    /// Settings that run `agent` as Claude Code; `native`: the native backend, with consent.
    fn settings(&self, agent: &Path, native: bool) -> (Settings, EngineConfig) {
        let mut s = Settings::default();
        s.providers.claude.command = Some(agent.display().to_string());
        if native {
            s.sandbox.backend = BackendChoice::Native;
            s.sandbox.allow_degraded_native = true;
        }
        let mut config = engine_config(&s);
        config.version_cache = None;
        config.ambient_env = Some(vec![
            (
                "PATH".to_string(),
                std::env::var("PATH").unwrap_or_default(),
            ),
            ("HOME".to_string(), self.home().display().to_string()),
        ]);
        (s, config)
    }

    fn request(&self, prompt: &str) -> SpawnRequest {
        SpawnRequest {
            role: Role::Generator,
            dir: self.spawn_dir(),
            work_tree: self.work_tree(),
            prompt: prompt.to_string(),
            cold_prompt: None,
            resume: None,
            contract: Contract::generator(),
            read_only: false,
            run_id: "sprint-run-1".to_string(),
            max_budget_usd: None,
            max_turns: None,
        }
    }

    /// The prompts the stand-in received, in order.
    fn prompts(&self) -> Vec<String> {
        (0..)
            .map(|n| self.spawn_dir().join(format!("prompt-{n}.txt")))
            .take_while(|p| p.exists())
            .map(|p| std::fs::read_to_string(p).unwrap())
            .collect()
    }

    fn record(&self) -> Value {
        let text = std::fs::read_to_string(self.spawn_dir().join("run.json")).unwrap();
        serde_json::from_str(&text).unwrap()
    }
}

fn claude() -> RoleSettings {
    RoleSettings::single(ProviderId::Claude, None, None)
}

async fn spawn(
    scratch: &Scratch,
    acts: &str,
    native: bool,
    request: SpawnRequest,
) -> (Arc<dyn RoleAgent>, SpawnReport) {
    let agent = scratch.agent(acts);
    let (settings, config) = scratch.settings(&agent, native);
    let role = role_agent(&claude(), &settings, config).unwrap();
    let report = role
        .spawn(request, CancellationToken::new(), Arc::new(NoopObserver))
        .await;
    (role, report)
}

#[tokio::test]
async fn a_spawn_with_valid_signals_leaves_the_record_corral_run_leaves() {
    let scratch = Scratch::new();
    let acts = format!("printf '%s' '{GOOD_SIGNALS}' > \"$SIGNALS\"");
    let (role, report) = spawn(&scratch, &acts, true, scratch.request("do the task")).await;
    assert_eq!(role.provider(), ProviderId::Claude);
    assert!(role.resumes(), "Claude Code resumes headless");

    assert_eq!(report.outcome, Outcome::Succeeded, "{report:?}");
    assert_eq!(report.error, None, "{report:?}");
    assert!(
        matches!(&report.verdict, SpawnVerdict::Valid { signals } if signals.len() == 1),
        "{report:?}"
    );
    assert_eq!(report.session_id, Some(SessionId::new(SESSION).unwrap()));
    assert_eq!(report.attempts, 1);
    assert_eq!(report.usage.input, Some(10), "{report:?}");

    let dir = scratch.spawn_dir();
    let session = std::fs::read_to_string(dir.join("session-id.txt")).unwrap();
    assert_eq!(session.trim(), SESSION);
    let record = scratch.record();
    assert_eq!(record["runId"], "sprint-run-1", "{record}");
    assert_eq!(record["outcome"], "succeeded", "{record}");
    assert!(record["finishedAt"].is_string(), "run.json ended: {record}");
    assert_eq!(record["sessionId"], SESSION, "{record}");
    assert_eq!(record["signalsValid"], true, "{record}");
    assert_eq!(record["providerRuns"], 1, "{record}");
    let log = std::fs::read_to_string(dir.join("events.jsonl")).unwrap();
    assert!(log.contains("run_finished"), "{log}");

    // The agent got the prompt with the contract section, and prompt.md holds the same.
    let prompts = scratch.prompts();
    assert_eq!(prompts.len(), 1);
    assert!(prompts[0].starts_with("do the task\n\n"), "{}", prompts[0]);
    assert!(
        prompts[0].contains(&dir.join("signals.json").display().to_string()),
        "{}",
        prompts[0]
    );
    let prompt_md = std::fs::read_to_string(dir.join("prompt.md")).unwrap();
    assert_eq!(prompt_md.trim_end(), prompts[0].trim_end());
}

#[tokio::test]
async fn invalid_signals_are_corrected_on_the_session_then_reported_invalid() {
    let scratch = Scratch::new();
    let acts = format!("printf '%s' '{BAD_SIGNALS}' > \"$SIGNALS\"");
    let (_, report) = spawn(&scratch, &acts, true, scratch.request("do the task")).await;
    let retries = Settings::default().retry.corrective_retries;
    assert_eq!(retries, 2, "the default this test counts with");

    assert_eq!(report.outcome, Outcome::Succeeded, "{report:?}");
    assert!(
        matches!(&report.verdict, SpawnVerdict::Invalid { reason } if !reason.is_empty()),
        "{report:?}"
    );
    assert_eq!(report.attempts, 1 + retries, "{report:?}");
    assert_eq!(report.usage.input, Some(10 * u64::from(1 + retries)));

    // Each corrective retry resumed the session with the corrective message.
    let prompts = scratch.prompts();
    assert_eq!(prompts.len(), 3, "{prompts:?}");
    for (n, prompt) in prompts.iter().enumerate().skip(1) {
        let argv =
            std::fs::read_to_string(scratch.spawn_dir().join(format!("argv-{n}.txt"))).unwrap();
        assert!(argv.contains(&format!("--resume\n{SESSION}\n")), "{argv}");
        assert!(!prompt.starts_with("do the task"), "{prompt}");
    }
    let record = scratch.record();
    assert_eq!(record["signalsValid"], false, "{record}");
    assert_eq!(record["providerRuns"], 3, "{record}");
}

#[tokio::test]
async fn a_read_only_spawn_cannot_write_the_work_tree() {
    let scratch = Scratch::new();
    let acts = format!(
        "if echo planted > \"$PWD/planted.txt\"; then echo yes; else echo no; fi > \"$RUN_DIR/wrote\"\n\
         printf '%s' '{GOOD_SIGNALS}' > \"$SIGNALS\""
    );
    let mut request = scratch.request("judge the change");
    request.read_only = true;
    // The default sandbox: bubblewrap, which can keep the work tree read-only.
    let (_, report) = spawn(&scratch, &acts, false, request).await;
    assert_eq!(report.outcome, Outcome::Succeeded, "{report:?}");
    assert_eq!(report.error, None, "{report:?}");
    let wrote = std::fs::read_to_string(scratch.spawn_dir().join("wrote")).unwrap();
    assert_eq!(wrote.trim(), "no", "the agent's write must fail");
    assert!(!scratch.work_tree().join("planted.txt").exists());
    let record = scratch.record();
    let enforced = &record["attestation"]["enforced"];
    assert!(
        enforced
            .as_array()
            .unwrap()
            .contains(&Value::from("repo-read-only")),
        "{record}"
    );
}

#[tokio::test]
async fn a_read_only_spawn_is_refused_where_the_sandbox_cannot_keep_it() {
    let scratch = Scratch::new();
    let acts =
        format!("echo planted > \"$PWD/planted.txt\"\nprintf '%s' '{GOOD_SIGNALS}' > \"$SIGNALS\"");
    let mut request = scratch.request("judge the change");
    request.read_only = true;
    // The native backend, with consent to run degraded: a writable run would be allowed.
    let (_, report) = spawn(&scratch, &acts, true, request).await;
    assert_eq!(report.outcome, Outcome::NotStarted, "{report:?}");
    let error = report.error.as_ref().unwrap();
    assert_eq!(error.class, ErrorClass::Permanent, "{report:?}");
    assert_eq!(report.verdict, SpawnVerdict::NotChecked);
    assert!(scratch.prompts().is_empty(), "the agent never ran");
    assert!(!scratch.work_tree().join("planted.txt").exists());
}

#[tokio::test]
async fn a_gone_session_gets_the_cold_prompt_in_a_new_one() {
    let scratch = Scratch::new();
    let acts = format!(
        r#"case " $* " in *" --resume "*)
  echo "No conversation found with session ID: {GONE}" >&2
  exit 1;;
esac
printf '%s' '{GOOD_SIGNALS}' > "$SIGNALS""#
    );
    let mut request = scratch.request("fix what the evaluator found");
    request.cold_prompt = Some("the whole task, from the start".to_string());
    request.resume = Some(SessionId::new(GONE).unwrap());
    let (_, report) = spawn(&scratch, &acts, true, request).await;
    assert_eq!(report.outcome, Outcome::Succeeded, "{report:?}");
    assert!(
        matches!(report.verdict, SpawnVerdict::Valid { .. }),
        "{report:?}"
    );
    assert_eq!(report.session_id, Some(SessionId::new(SESSION).unwrap()));

    let prompts = scratch.prompts();
    assert_eq!(
        prompts.len(),
        2,
        "the resume, then the cold run: {prompts:?}"
    );
    assert!(
        prompts[0].starts_with("fix what the evaluator found\n\n"),
        "{}",
        prompts[0]
    );
    let cold = &prompts[1];
    assert!(
        cold.starts_with("the whole task, from the start\n\n"),
        "the cold run got the full brief: {cold}"
    );
    assert!(
        cold.contains(
            &scratch
                .spawn_dir()
                .join("signals.json")
                .display()
                .to_string()
        ),
        "with the contract section: {cold}"
    );
    let argv = std::fs::read_to_string(scratch.spawn_dir().join("argv-1.txt")).unwrap();
    assert!(!argv.contains("--resume"), "{argv}");
    assert_eq!(scratch.record()["coldFallbackFrom"], GONE);
}

#[test]
fn a_role_agent_plays_its_role_s_provider_model_and_effort() {
    let mut settings = Settings::default();
    settings.providers.codex.model = Some("configured-model".to_string());
    for id in ProviderId::ALL {
        let role = RoleSettings::single(id, None, Some(corral_ports::Effort::High));
        let agent = role_agent(&role, &settings, engine_config(&settings)).unwrap();
        assert_eq!(agent.provider(), id);
        assert_eq!(agent.effort(), Some(corral_ports::Effort::High));
        // Resume follows the capability table: Grok cannot resume headless.
        assert_eq!(agent.resumes(), id != ProviderId::Grok, "{id}");
        let expected = (id == ProviderId::Codex).then_some("configured-model");
        assert_eq!(
            agent.model(),
            expected,
            "{id}: the provider's configured model"
        );
    }
    let role = RoleSettings::single(ProviderId::Codex, Some("role-model".to_string()), None);
    let agent = role_agent(&role, &settings, engine_config(&settings)).unwrap();
    assert_eq!(agent.model(), Some("role-model"), "the role's model wins");
    assert_eq!(agent.effort(), None);
}

/// Issue 9 flow step 6: under the native backend with consent nothing stops a write outside
/// the work tree; the spawn's stray-write check finds it (here in the repository around the
/// work tree) and the report carries it, as `run.json` does, for the sprint to name.
#[tokio::test]
async fn a_native_spawn_s_write_outside_the_work_tree_is_in_its_report() {
    let scratch = Scratch::new();
    let root = scratch.dir.path();
    let git = |args: &[&str]| {
        let out = corral_test_support::command(Path::new("git"))
            .current_dir(root)
            .args(["-c", "user.name=T", "-c", "user.email=t@t.invalid"])
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    std::fs::write(scratch.work_tree().join("keep"), "\n").unwrap();
    std::fs::write(root.join(".gitignore"), "spawn/\nhome/\nfake-claude.sh\n").unwrap();
    git(&["init", "-q"]);
    git(&["add", "-A"]);
    git(&["commit", "-q", "-m", "init"]);
    let acts = format!(
        "printf '%s' '{GOOD_SIGNALS}' > \"$SIGNALS\"\necho mine > in-tree.txt\necho stray > ../stray.txt"
    );
    let (_, report) = spawn(&scratch, &acts, true, scratch.request("do the task")).await;
    assert_eq!(report.outcome, Outcome::Succeeded, "{report:?}");
    let stray = root.canonicalize().unwrap().join("stray.txt");
    assert_eq!(
        report.stray_writes,
        [format!("added {}", stray.display())],
        "{report:?}"
    );
    let record = scratch.record();
    assert_eq!(
        record["attestation"]["strayWrites"],
        serde_json::json!(report.stray_writes),
        "{record}"
    );
}
