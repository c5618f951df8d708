//! The rate-limit gate per provider account, through real Claude Code against the fake model API:
//! three `corral run`s on one account (one HOME, one API key, one base URL), the first answered 429
//! with a usage-limit reset time T until Claude Code's own retries are spent. The other two,
//! started while the first backs off, hold their spawns until T: the fake API's request log shows
//! every later request arriving after T, and no other 429.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use corral_test_support::fake_api::{Scenario, Step};
use serde_json::Value;

use crate::providers::{CLAUDE, World};
use crate::support::*;

/// How far ahead the first run is told the account resets: long enough that the two later runs
/// start (and would reach the API) well before it, even on a loaded machine.
const RESET_AHEAD: Duration = Duration::from_secs(12);

/// Every run directory's log under the project, with its path.
fn run_logs(project: &Path) -> Vec<(PathBuf, Vec<Value>)> {
    std::fs::read_dir(project.join(".corral/runs"))
        .map(|dir| dir.flatten().map(|e| (e.path(), log(&e.path()))).collect())
        .unwrap_or_default()
}

fn epoch_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).unwrap().as_millis() as u64
}

#[test]
fn runs_on_one_account_wait_for_the_reset_another_run_was_told() {
    let reset_epoch_s = (SystemTime::now() + RESET_AHEAD)
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let limited = format!(
        r#"{{"type":"error","error":{{"type":"rate_limit_error","message":"Claude AI usage limit reached|{reset_epoch_s}"}}}}"#
    );
    // The requests' arrival is recorded from the server's start, which lies after this instant:
    // `server_start_lower + at_ms` never says a request came later than it did.
    let server_start_lower = epoch_ms(SystemTime::now());
    // Claude Code retries even a usage limit on its own: each of its requests meets it.
    let per_attempt = CLAUDE.requests_per_failed_call;
    let world = World::new(&CLAUDE, |_| {
        let mut steps = vec![
            Step::HttpError {
                status: 429,
                retry_after_secs: None,
                body: Some(limited),
            };
            per_attempt
        ];
        steps.extend([
            Step::text("Done."),
            Step::text("Done."),
            Step::text("Done."),
        ]);
        Scenario::script(steps)
    });
    let project = world.project();
    let run = |label: &'static str| {
        let mut cmd = world.corral_run();
        cmd.args(["--json", "--no-contract", label]);
        std::thread::spawn(move || cmd.output().unwrap())
    };
    let first = run("the first run");
    let backed_off = wait_until(Duration::from_secs(300), || {
        run_logs(&project)
            .iter()
            .any(|(_, log)| !kinds(log, "backoff").is_empty())
    });
    assert!(backed_off, "the first run never backed off");
    let others = [run("the second run"), run("the third run")];
    let outputs: Vec<_> = std::iter::once(first)
        .chain(others)
        .map(|t| t.join().unwrap())
        .collect();
    for out in &outputs {
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            transcript(&world.env, out)
        );
    }
    // T: when the first run's backoff ends, which the gate hands to the other runs.
    let logs = run_logs(&project);
    let (first_dir, first_log) = logs
        .iter()
        .find(|(_, log)| !kinds(log, "backoff").is_empty())
        .unwrap();
    let backoff = kinds(first_log, "backoff")[0];
    assert_eq!(
        backoff["reason"], "until the reported reset time",
        "{backoff}"
    );
    let backoff_at = humantime::parse_rfc3339(backoff["t"].as_str().unwrap()).unwrap();
    let until_ms = epoch_ms(backoff_at) + backoff["waitMs"].as_u64().unwrap();
    assert!(until_ms >= reset_epoch_s * 1000, "{backoff}");
    let requests = world.api.model_requests();
    let steps: Vec<&str> = requests.iter().filter_map(|r| r.step.as_deref()).collect();
    let mut expected = vec!["http_error"; per_attempt];
    expected.extend(["text", "text", "text"]);
    assert_eq!(
        steps, expected,
        "the first run's CLI meets the limit on each of its own retries, then each run's one request"
    );
    // The hold the first run wrote into the gate (the user's state directory) is the one the
    // others waited for, and matches its schema.
    let gate = world.env.home().join(".local/state/corral/rate-limits");
    let holds: Vec<PathBuf> = std::fs::read_dir(&gate)
        .unwrap_or_else(|e| panic!("{}: {e}", gate.display()))
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    assert_eq!(holds.len(), 1, "one account: {holds:?}");
    let hold: Value = serde_json::from_str(&std::fs::read_to_string(&holds[0]).unwrap()).unwrap();
    crate::schemas::Schema::load("rate-limit-hold.schema.json").check("a rate-limit hold", &hold);
    assert!(
        hold["untilEpochMs"]
            .as_u64()
            .is_some_and(|u| u >= reset_epoch_s * 1000),
        "{hold}"
    );
    // The gate's hold is written just before the backoff record: allow for that gap.
    let slack_ms = 100;
    for request in &requests[per_attempt..] {
        let arrived = server_start_lower + request.at_ms;
        assert!(
            arrived + slack_ms >= until_ms,
            "request {} arrived {} ms before the reset the first run was told",
            request.seq,
            until_ms - arrived
        );
    }
    for (dir, log) in &logs {
        if dir == first_dir {
            // One hold per retry the CLI announced, then the reset's.
            let holds = kinds(log, "rate_limit_hold");
            assert_eq!(holds.len(), per_attempt, "{log:#?}");
            assert_eq!(
                holds.last().map(|h| &h["basis"]),
                Some(&Value::from("until the reported reset time")),
                "{holds:#?}"
            );
            continue;
        }
        let waits = kinds(log, "rate_limit_wait");
        assert_eq!(waits.len(), 1, "{}: {log:#?}", dir.display());
        assert_eq!(waits[0]["provider"], "claude");
        assert!(
            waits[0]["untilEpochMs"]
                .as_u64()
                .is_some_and(|u| u + slack_ms >= until_ms),
            "{}",
            waits[0]
        );
        // The wait comes before the run's only spawn.
        let kinds_in_order: Vec<&str> = log.iter().filter_map(|v| v["kind"].as_str()).collect();
        let wait_at = kinds_in_order.iter().position(|k| *k == "rate_limit_wait");
        let spawn_at = kinds_in_order.iter().position(|k| *k == "spawn");
        assert!(wait_at < spawn_at, "{kinds_in_order:?}");
    }
    // The live view says who waits and until when.
    let said = outputs[1..]
        .iter()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .collect::<String>();
    assert!(said.contains(r#""type":"account_wait""#), "{said}");
}
