//! `corral sprint pr` through the real Claude Code against the fake model API: the agent's
//! `pr-content` is completed with what Corral recorded (each task's status, rounds, check,
//! commit and cost) and printed with the commands that open the pull request; a sprint that
//! has not run is refused before any agent is asked.

use corral_sprint::{
    Attribution, SprintLayout, SprintName, SprintState, TaskStatus, parse, write_state,
};
use corral_test_support::fake_api::{Scenario, Step};
use serde_json::json;

use crate::providers::{CLAUDE, RUN_CAP, World};
use crate::support::*;

const SPRINT: &str = "[sprint]\nname = \"dates\"\ncheck = \"true\"\n\n[roles.generator]\n\
provider = \"claude\"\n\n[[tasks]]\nid = \"parse\"\ntitle = \"Parse dates\"\nprompt = \"p\"\n\n\
[[tasks]]\nid = \"names\"\ntitle = \"Name bad dates\"\nprompt = \"p\"\ndepends_on = [\"parse\"]\n";

fn world() -> World {
    let signals = json!({"schemaVersion": 1, "signals": [{
        "type": "pr-content", "timestamp": "2026-12-07T10:00:00Z",
        "title": "Parse ISO dates and name bad ones",
        "body": "Adds a date parser.\n\nStart with `src/dates.rs`."
    }]})
    .to_string();
    World::new(&CLAUDE, move |_| {
        Scenario::script([
            Step::write_signals_for(CLAUDE.bin, signals).unwrap(),
            Step::text("Written."),
        ])
    })
}

fn pr(world: &World) -> std::process::Output {
    world
        .env
        .corral()
        .envs(world.vars().iter().map(|(k, v)| (k, v)))
        .timeout(RUN_CAP)
        .args(["sprint", "pr"])
        .output()
        .unwrap()
}

#[test]
fn the_agents_text_is_completed_with_the_record_and_the_commands_are_printed() {
    let world = world();
    let project = world.project();
    git(&project, &["init", "-q", "-b", "main"]);
    std::fs::write(project.join("corral-sprint.toml"), SPRINT).unwrap();

    // Not run yet: refused, no agent asked.
    let out = pr(&world);
    let shown = transcript(&world.env, &out);
    assert_eq!(out.status.code(), Some(2), "{shown}");
    assert!(shown.contains("has not run yet"), "{shown}");
    assert!(world.api.requests().is_empty());

    let file = parse(&project.join("corral-sprint.toml"), SPRINT).unwrap();
    let mut state = SprintState::fresh(&file, "2026-12-07T09:00:00.000Z");
    state.tasks[0].status = TaskStatus::Done;
    state.tasks[0].round = 1;
    state.tasks[0].attempt = 1;
    state.tasks[0].commit = Some("0123456789abcdef".into());
    state.tasks[0].attribution = Some(Attribution::Clean);
    state.tasks[0].usage.generator.cost_usd = Some(0.25);
    state.tasks[1].status = TaskStatus::Blocked;
    state.tasks[1].round = 3;
    state.tasks[1].attempt = 2;
    state.tasks[1].reason = Some("the check | still fails".into());
    let layout = SprintLayout::new(&project, &SprintName::new("dates").unwrap());
    write_state(&layout.state_file(), &state).unwrap();

    let out = pr(&world);
    let shown = transcript(&world.env, &out);
    assert_eq!(out.status.code(), Some(0), "{shown}");
    for expected in [
        "Parse ISO dates and name bad ones\n\nAdds a date parser.",
        "## What Corral recorded",
        "| `parse` | done | 1 | 1 | clean | `0123456789ab` | $0.2500 |",
        "| `names` | blocked | 3 | 2 | - (the check \\| still fails) | - | - |",
        "Total cost: $0.2500.",
        &format!("git push -u origin {}", state.branch),
        "gh pr create --head",
        "--title 'Parse ISO dates and name bad ones'",
    ] {
        assert!(shown.contains(expected), "{expected:?} not in:\n{shown}");
    }
    let written =
        std::fs::read_to_string(project.join(".corral/sprints/dates/pr/1/pr.md")).unwrap();
    assert!(written.starts_with("Parse ISO dates and name bad ones\n\nAdds a date parser."));
    assert!(written.contains("## What Corral recorded"));
}
