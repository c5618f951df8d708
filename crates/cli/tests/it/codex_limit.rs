//! Codex's usage limit with the real pinned Codex against the fake model API (issue 31): Codex
//! 0.171 reports it as prose with the reset in local time (`try again at 3:04 PM`, or with a
//! date when the reset is on another day), not the API body's `resets_at`; Corral reads that
//! time, so the run knows the reset instead of backing off blind.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use corral_test_support::fake_api::{Scenario, Step};

use crate::providers::{CODEX, World};
use crate::support::{kinds, log, run_dir, summary, transcript};

/// With `retry.auto_resume = false` a limit two hours away stops the run at once (exit 4): that
/// Codex's reset was read is what makes it "long"; unread, the run would back off and retry.
#[test]
fn codexs_usage_limit_is_held_until_the_reset_it_names_in_local_time() {
    let reset = SystemTime::now() + Duration::from_secs(2 * 3600);
    let reset_s = reset.duration_since(UNIX_EPOCH).unwrap().as_secs();
    let world = World::new(&CODEX, |_| {
        Scenario::forever(Step::UsageLimit {
            resets_at_epoch_s: reset_s,
        })
    });
    let out = world
        .corral_run()
        .env("CORRAL_RETRY__AUTO_RESUME", "false")
        // A zone with an offset, so that reading the time as UTC would be hours off.
        .env("TZ", "America/New_York")
        .args(["--json", "do the task"])
        .output()
        .unwrap();
    let said = transcript(&world.env, &out);
    assert_eq!(out.status.code(), Some(4), "{said}");
    let s = summary(&out.stdout);
    let log = log(&run_dir(&s));
    assert!(kinds(&log, "backoff").is_empty(), "{log:#?}");
    let holds = kinds(&log, "rate_limit_hold");
    // Codex prints the minute (not the body's `resets_at` to the second); Corral rounds it up.
    assert!(
        holds.iter().any(|h| {
            let until = h["untilEpochMs"].as_u64().unwrap() / 1000;
            until > reset_s && until <= reset_s + 60 && until % 60 == 0
        }),
        "held until the minute after {reset_s}: {holds:#?}\n{said}"
    );
    let error = s["error"].as_str().unwrap_or_default();
    assert!(error.contains("the limit resets at"), "{s}");
}
