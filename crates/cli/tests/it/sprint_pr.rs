//! `corral sprint pr` through the real Claude Code against the fake model API: the agent's
//! `pr-content` is completed with what Corral recorded (each task's status, rounds, check,
//! commit and cost); the branch is pushed to a bare repository and the pull request opened
//! through the real `gh` against the fake forge, and a rerun updates the same one. Without a
//! remote or a login the text and the commands are printed with one message saying which was
//! missing; a forge answering 500 fails with the text kept. A sprint that has not run is
//! refused before any agent is asked.

use corral_sprint::{
    Attribution, SprintLayout, SprintName, SprintState, TaskStatus, parse, write_state,
};
use corral_test_support::FakeForge;
use corral_test_support::fake_api::{Scenario, Step};
use serde_json::json;

use crate::providers::{CLAUDE, CODEX, Cli, RUN_CAP, World};
use crate::support::*;

const SPRINT: &str = "[sprint]\nname = \"dates\"\ncheck = \"true\"\n\n[roles.generator]\n\
provider = \"claude\"\n\n[[tasks]]\nid = \"parse\"\ntitle = \"Parse dates\"\nprompt = \"p\"\n\n\
[[tasks]]\nid = \"names\"\ntitle = \"Name bad dates\"\nprompt = \"p\"\ndepends_on = [\"parse\"]\n";

fn pr_content(title: &str) -> String {
    json!({"schemaVersion": 1, "signals": [{
        "type": "pr-content", "timestamp": "2026-12-07T10:00:00Z",
        "title": title,
        "body": "Adds a date parser.\n\nStart with `src/dates.rs`."
    }]})
    .to_string()
}

fn world() -> World {
    worlds(&["Parse ISO dates and name bad ones"])
}

/// A world whose agent writes one pull request per run, with these titles.
fn worlds(titles: &[&str]) -> World {
    world_of(&CLAUDE, titles)
}

/// [`worlds`] through `cli`.
fn world_of(cli: &'static Cli, titles: &[&str]) -> World {
    let steps: Vec<Step> = titles
        .iter()
        .flat_map(|title| {
            [
                Step::write_signals_for(cli.bin, pr_content(title)).unwrap(),
                Step::text("Written."),
            ]
        })
        .collect();
    World::new(cli, move |_| Scenario::script(steps))
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
        &format!("git push 'origin' {}", state.branch),
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

const TOKEN: &str = "gho_fake";

/// A sprint that ran: the file, its state (the first task done), the repository with the
/// sprint's branch one commit ahead of `main`.
fn ran(world: &World) -> SprintState {
    let project = world.project();
    git(&project, &["init", "-q", "-b", "main"]);
    std::fs::write(project.join("corral-sprint.toml"), SPRINT).unwrap();
    std::fs::write(project.join(".gitignore"), ".corral/\n").unwrap();
    git(&project, &["add", "-A"]);
    git(&project, &["commit", "-q", "-m", "base"]);
    let file = parse(&project.join("corral-sprint.toml"), SPRINT).unwrap();
    let mut state = SprintState::fresh(&file, "2026-12-07T09:00:00.000Z");
    git(&project, &["checkout", "-q", "-b", &state.branch]);
    git(
        &project,
        &["commit", "-q", "--allow-empty", "-m", "parse: done"],
    );
    state.tasks[0].status = TaskStatus::Done;
    state.tasks[0].round = 1;
    state.tasks[0].attempt = 1;
    state.tasks[0].commit = Some(rev(&project, "HEAD"));
    state.tasks[0].attribution = Some(Attribution::Clean);
    let layout = SprintLayout::new(&project, &SprintName::new("dates").unwrap());
    write_state(&layout.state_file(), &state).unwrap();
    state
}

fn rev(dir: &std::path::Path, name: &str) -> String {
    let out = corral_test_support::command(std::path::Path::new("git"))
        .args(["rev-parse", "--verify", "-q", name])
        .current_dir(dir)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// A bare repository beside the project, as its `origin`.
fn remote(world: &World) -> std::path::PathBuf {
    let bare = world.project().parent().unwrap().join("remote.git");
    git(
        world.project().parent().unwrap(),
        &["init", "-q", "--bare", bare.to_str().unwrap()],
    );
    git(
        &world.project(),
        &["remote", "add", "origin", bare.to_str().unwrap()],
    );
    bare
}

/// `corral sprint pr --repo <the fake forge's>` with the real gh pointed at `forge`, logged in
/// with `token`.
fn pr_to(world: &World, forge: &FakeForge, token: Option<&str>) -> std::process::Output {
    let gh_config = world.project().parent().unwrap().join("gh-config");
    std::fs::create_dir_all(&gh_config).unwrap();
    world
        .env
        .corral()
        .envs(world.vars().iter().map(|(k, v)| (k, v)))
        .envs(forge.gh_env(&gh_config, token))
        .timeout(RUN_CAP)
        .args(["sprint", "pr", "--repo", &forge.repo()])
        .output()
        .unwrap()
}

#[test]
fn the_pull_request_is_opened_through_gh_and_a_rerun_updates_the_same_one() {
    let world = worlds(&["Parse ISO dates", "Parse ISO dates, with names"]);
    let project = world.project();
    let state = ran(&world);
    let bare = remote(&world);
    let forge = FakeForge::start("octo/widgets", TOKEN).unwrap();

    let out = pr_to(&world, &forge, Some(TOKEN));
    let shown = transcript(&world.env, &out);
    assert_eq!(out.status.code(), Some(0), "{shown}");
    assert!(
        shown.contains(&format!(
            "pr: pushed {} to origin and opened pull request #1: https://github.localhost/octo/widgets/pull/1",
            state.branch
        )),
        "{shown}"
    );
    assert_eq!(rev(&bare, &state.branch), rev(&project, &state.branch));
    let prs = forge.pull_requests();
    assert_eq!(prs.len(), 1, "{prs:?}");
    assert_eq!(prs[0].title, "Parse ISO dates");
    assert_eq!(
        (prs[0].head.as_str(), prs[0].base.as_str()),
        (state.branch.as_str(), "main")
    );
    assert!(
        prs[0].body.starts_with("Adds a date parser."),
        "{}",
        prs[0].body
    );
    assert!(
        prs[0].body.contains("## What Corral recorded"),
        "{}",
        prs[0].body
    );
    let published: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(project.join(".corral/sprints/dates/pr/1/published.json"))
            .unwrap(),
    )
    .unwrap();
    assert_eq!(published["action"], "opened", "{published}");
    assert_eq!(published["number"], 1, "{published}");

    // More work on the branch, and a rerun: pushed again, the same pull request updated.
    git(
        &project,
        &["commit", "-q", "--allow-empty", "-m", "names: done"],
    );
    let out = pr_to(&world, &forge, Some(TOKEN));
    let shown = transcript(&world.env, &out);
    assert_eq!(out.status.code(), Some(0), "{shown}");
    assert!(shown.contains("and updated pull request #1"), "{shown}");
    assert_eq!(rev(&bare, &state.branch), rev(&project, &state.branch));
    let prs = forge.pull_requests();
    assert_eq!(prs.len(), 1, "a second pull request was opened: {prs:?}");
    assert_eq!(prs[0].title, "Parse ISO dates, with names");
    let asked: Vec<String> = forge
        .requests()
        .iter()
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    assert_eq!(
        asked,
        [
            "GET /repos/octo/widgets/pulls",
            "POST /repos/octo/widgets/pulls",
            "GET /repos/octo/widgets/pulls",
            "PATCH /repos/octo/widgets/pulls/1",
        ]
    );
    assert!(forge.requests().iter().all(|r| r.authorized));
}

#[test]
fn without_a_remote_or_a_login_the_commands_are_printed_and_a_forge_in_trouble_fails() {
    let world = worlds(&["One", "Two", "Three"]);
    let state = ran(&world);
    let forge = FakeForge::start("octo/widgets", TOKEN).unwrap();

    // No remote: nothing asked of the forge, the text and the commands printed.
    let out = pr_to(&world, &forge, Some(TOKEN));
    let shown = transcript(&world.env, &out);
    assert_eq!(out.status.code(), Some(0), "{shown}");
    assert!(
        shown.contains("pr: not opened: the repository has no git remote `origin`"),
        "{shown}"
    );
    assert!(
        shown.contains(&format!("git push 'origin' {}", state.branch)),
        "{shown}"
    );
    assert!(shown.contains("gh pr create --repo"), "{shown}");
    assert!(forge.requests().is_empty());

    // A remote, but gh has no login: the forge says 401; nothing pushed.
    let bare = remote(&world);
    let out = pr_to(&world, &forge, None);
    let shown = transcript(&world.env, &out);
    assert_eq!(out.status.code(), Some(0), "{shown}");
    assert!(
        shown.contains("pr: not opened: gh is not logged in"),
        "{shown}"
    );
    assert!(shown.contains("gh pr create --repo"), "{shown}");
    assert_eq!(rev(&bare, &state.branch), "", "pushed without a login");

    // The forge answers 500: exit 8, the text kept and the commands printed, nothing pushed.
    forge.fail_with(500);
    let out = pr_to(&world, &forge, Some(TOKEN));
    let shown = transcript(&world.env, &out);
    assert_eq!(out.status.code(), Some(8), "{shown}");
    assert!(shown.contains("the forge answered HTTP 500"), "{shown}");
    assert!(
        shown.contains("to open the pull request by hand"),
        "{shown}"
    );
    assert_eq!(rev(&bare, &state.branch), "");
    assert!(forge.pull_requests().is_empty());
    assert!(
        world
            .project()
            .join(".corral/sprints/dates/pr/3/pr.md")
            .is_file()
    );
}

/// The same through Codex (its prompt on stdin, its own sandbox inside Corral's): the pull
/// request's text is Codex's, and gh opens it.
#[test]
fn a_pull_request_written_through_codex_is_opened() {
    let world = world_of(&CODEX, &["Parse ISO dates"]);
    let state = ran(&world);
    let bare = remote(&world);
    let forge = FakeForge::start("octo/widgets", TOKEN).unwrap();
    let gh_config = world.project().parent().unwrap().join("gh-config");
    std::fs::create_dir_all(&gh_config).unwrap();
    let out = world
        .env
        .corral()
        .envs(world.vars().iter().map(|(k, v)| (k, v)))
        .envs(forge.gh_env(&gh_config, Some(TOKEN)))
        .timeout(RUN_CAP)
        .args([
            "sprint",
            "pr",
            "--provider",
            "codex",
            "--repo",
            &forge.repo(),
        ])
        .output()
        .unwrap();
    let shown = transcript(&world.env, &out);
    assert_eq!(out.status.code(), Some(0), "{shown}");
    assert!(shown.contains("and opened pull request #1"), "{shown}");
    assert_eq!(
        rev(&bare, &state.branch),
        rev(&world.project(), &state.branch)
    );
    assert_eq!(forge.pull_requests()[0].title, "Parse ISO dates");
}
