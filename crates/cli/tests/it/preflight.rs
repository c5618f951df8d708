//! The preflight through the real Claude Code against the fake model API: a sprint whose
//! evaluator's model is a typo stops before any round with exit 8, naming the role, the provider
//! and the model; a bad model and a missing check command are reported together; `--no-preflight`
//! skips it; `corral run --preflight` and `corral doctor` name a refused login (exit 8).
//!
//! The fake serves only [`SERVED`] (an agent turn naming another model gets the API's 404) and,
//! where a test says so, only one API key (another gets 401); it answers the preflight's own
//! request itself, so a request that took a step of a script is a spawn of the sprint.

use corral_test_support::fake_api::{PREFLIGHT_PROMPT_OPENING, Scenario};

use crate::providers::{CLAUDE, RUN_CAP, World};
use crate::support::*;

/// The one model the fake serves.
const SERVED: &str = "fake-model";

/// A one-task sprint on Claude Code: the generator on `generator_model`, the evaluator on
/// `evaluator_model` (`None`: no evaluator), checked by `check`.
fn sprint_file(generator_model: &str, evaluator_model: Option<&str>, check: &str) -> String {
    let evaluator = match evaluator_model {
        Some(model) => format!("[roles.evaluator]\nprovider = \"claude\"\nmodel = \"{model}\"\n"),
        None => "[roles.evaluator]\nprovider = \"claude\"\nenabled = false\n".to_string(),
    };
    format!(
        "[sprint]\nname = \"it\"\ncheck = {check:?}\nmax_rounds = 1\n\n\
         [roles.generator]\nprovider = \"claude\"\nmodel = \"{generator_model}\"\n\n{evaluator}\n\
         [[tasks]]\nid = \"t1\"\ntitle = \"Write t1\"\nprompt = \"Write ok to t1.txt.\"\n"
    )
}

/// A world on Claude Code whose fake serves only [`SERVED`], with `file` committed as the
/// project's sprint file.
fn sprint_world(file: &str, scenario: Scenario) -> World {
    let world = World::new(&CLAUDE, |_| scenario.with_models([SERVED]));
    let project = world.project();
    std::fs::write(project.join("corral-sprint.toml"), file).unwrap();
    std::fs::write(project.join(".gitignore"), ".corral/\n").unwrap();
    git(&project, &["init", "-q", "-b", "main"]);
    git(&project, &["config", "user.email", "it@example.invalid"]);
    git(&project, &["config", "user.name", "it"]);
    git(&project, &["add", "-A"]);
    git(&project, &["commit", "-q", "-m", "start"]);
    world
}

fn sprint_run(world: &World, extra: &[&str]) -> std::process::Output {
    world
        .env
        .corral()
        .envs(world.vars().iter().map(|(k, v)| (k, v)))
        .timeout(RUN_CAP)
        .args(["sprint", "run"])
        .args(extra)
        .output()
        .unwrap()
}

/// stderr with what varies from run to run (the seconds a request took, the scratch path)
/// replaced.
fn stable_stderr(world: &World, out: &std::process::Output) -> String {
    let text = world.env.clean(&out.stderr);
    text.lines()
        .map(|line| {
            // `(3.2 s, ` and `in 3.2 s` → `<t> s`.
            let mut out = String::new();
            let mut rest = line;
            while let Some(at) = rest.find(" s") {
                let (head, tail) = rest.split_at(at);
                let digits = head
                    .rfind(|c: char| !(c.is_ascii_digit() || c == '.'))
                    .map_or(0, |i| i + 1);
                if digits < head.len() && head[digits..].contains('.') {
                    out.push_str(&head[..digits]);
                    out.push_str("<t>");
                } else {
                    out.push_str(head);
                }
                out.push_str(" s");
                rest = &tail[2..];
            }
            out.push_str(rest);
            out
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The steps the fake's requests took, those of side requests (none) left out.
fn steps_taken(world: &World) -> Vec<String> {
    world
        .api
        .requests()
        .into_iter()
        .filter_map(|r| r.step)
        .collect()
}

#[test]
fn the_fakes_preflight_words_are_the_ones_corral_sends() {
    assert_eq!(
        PREFLIGHT_PROMPT_OPENING,
        corral_compose::PREFLIGHT_PROMPT_OPENING
    );
}

#[test]
fn a_typo_in_the_evaluators_model_stops_the_sprint_before_any_round_with_exit_8() {
    let world = sprint_world(
        &sprint_file(SERVED, Some("fake-modle"), "true"),
        Scenario::default(),
    );
    let out = sprint_run(&world, &[]);
    let stderr = stable_stderr(&world, &out);
    assert_eq!(out.status.code(), Some(8), "{stderr}");
    // Named: the role, the provider, the model.
    assert!(
        stderr.contains("✗ evaluator: claude") && stderr.contains("fake-modle"),
        "{stderr}"
    );
    // No round ran: every request was the preflight's, and no step of a script was taken.
    let steps = steps_taken(&world);
    assert!(
        steps.iter().all(|s| s == "preflight" || s == "refused"),
        "{steps:?}"
    );
    assert!(
        !world
            .project()
            .join(".corral/sprints/it/implement")
            .exists(),
        "a round directory was made"
    );
    insta::assert_snapshot!(stderr);
}

#[test]
fn a_bad_model_and_a_missing_check_command_are_reported_together() {
    let world = sprint_world(
        &sprint_file("fake-modle", None, "no-such-test-runner --all"),
        Scenario::default(),
    );
    let out = sprint_run(&world, &[]);
    let stderr = stable_stderr(&world, &out);
    assert_eq!(out.status.code(), Some(8), "{stderr}");
    assert!(stderr.contains("✗ generator: claude"), "{stderr}");
    assert!(stderr.contains("fake-modle"), "{stderr}");
    assert!(
        stderr.contains("✗ check: `no-such-test-runner` is not found on PATH"),
        "{stderr}"
    );
    assert!(stderr.contains("preflight: 2 problems found"), "{stderr}");
    insta::assert_snapshot!(stderr);
}

#[test]
fn no_preflight_skips_it() {
    // The typo'd evaluator is not asked: the generator's round is the first request.
    let world = sprint_world(
        &sprint_file(SERVED, None, "true"),
        Scenario::default().with_role(
            corral_test_support::fake_api::Role::Generator,
            [corral_test_support::fake_api::Step::text("Done.")],
        ),
    );
    let out = sprint_run(&world, &["--no-preflight"]);
    let stderr = stable_stderr(&world, &out);
    assert!(!stderr.contains("preflight:"), "{stderr}");
    let steps = steps_taken(&world);
    assert!(!steps.iter().any(|s| s == "preflight"), "{steps:?}");
    assert_eq!(steps.first().map(String::as_str), Some("text"), "{steps:?}");
}

/// `corral run --preflight` on Claude Code, the fake accepting only another key.
#[test]
fn run_preflight_with_a_refused_login_exits_8_naming_the_login() {
    let world = World::new(&CLAUDE, |_| {
        Scenario::default().with_api_key("sk-not-the-one-set")
    });
    let out = world
        .corral_run()
        .args(["--preflight", "--model", SERVED, "Say hi."])
        .output()
        .unwrap();
    let stderr = stable_stderr(&world, &out);
    assert_eq!(out.status.code(), Some(8), "{stderr}");
    assert!(stderr.contains("the login was refused"), "{stderr}");
    assert!(stderr.contains("fix: log claude in"), "{stderr}");
    // The run itself never started.
    assert!(only_run_dir(&world.project()).is_none());
    insta::assert_snapshot!(stderr);
}

/// `corral doctor --provider claude` asks Claude Code the same request: a refused login exits 8,
/// an accepted one passes.
#[test]
fn doctor_asks_the_cli_and_names_a_refused_login() {
    let doctor = |world: &World| {
        world
            .env
            .corral()
            .envs(world.vars().iter().map(|(k, v)| (k, v)))
            .env("CORRAL_PROVIDERS__CLAUDE__MODEL", SERVED)
            .env("CORRAL_SANDBOX__ALLOW_DEGRADED_NATIVE", "true")
            .timeout(RUN_CAP)
            .args(["doctor", "--provider", "claude"])
            .output()
            .unwrap()
    };
    let refused = World::new(&CLAUDE, |_| Scenario::default().with_api_key("sk-other"));
    let out = doctor(&refused);
    let text = refused.env.clean(&out.stdout);
    assert_eq!(out.status.code(), Some(8), "{text}");
    assert!(text.contains("✗ login: claude"), "{text}");
    assert!(text.contains("the login was refused"), "{text}");

    let accepted = World::new(&CLAUDE, |_| Scenario::default().with_models([SERVED]));
    let out = doctor(&accepted);
    let text = accepted.env.clean(&out.stdout);
    assert!(
        text.contains("✓ login: claude") && text.contains("logged in and answering"),
        "{text}"
    );
    assert_eq!(out.status.code(), Some(0), "{text}");
}

/// A sprint whose repository has no commit identity (no `user.name`, no `user.email`: the scratch
/// HOME has no git config, and the variables are not set) is refused by the preflight, exit 8,
/// before any round: the commit step would fail only after the generator had run and spent.
#[test]
fn no_git_identity_stops_the_sprint_before_any_round_with_exit_8() {
    let world = World::new(&CLAUDE, |_| Scenario::default().with_models([SERVED]));
    let project = world.project();
    std::fs::write(
        project.join("corral-sprint.toml"),
        sprint_file(SERVED, None, "true"),
    )
    .unwrap();
    std::fs::write(project.join(".gitignore"), ".corral/\n").unwrap();
    // The commit that starts the repository names its identity on the command line only.
    git(&project, &["init", "-q", "-b", "main"]);
    git(&project, &["add", "-A"]);
    git(&project, &["commit", "-q", "-m", "start"]);
    let out = sprint_run(&world, &[]);
    let stderr = stable_stderr(&world, &out);
    assert_eq!(out.status.code(), Some(8), "{stderr}");
    assert!(
        stderr.contains("✗ no git user.name") && stderr.contains("✗ no git user.email"),
        "{stderr}"
    );
    let steps = steps_taken(&world);
    assert!(steps.iter().all(|s| s == "preflight"), "{steps:?}");
    assert!(
        !project.join(".corral/sprints/it/implement").exists(),
        "a round directory was made"
    );
    insta::assert_snapshot!(stderr);
}

/// A sprint whose evaluator's CLI is not installed is refused by the preflight, exit 8, naming
/// the role, the command looked for and the command that installs the tested version; the
/// generator's CLI is still asked, so every problem is named at once.
#[test]
fn an_uninstalled_cli_stops_the_sprint_before_any_round_with_exit_8() {
    let file = sprint_file(SERVED, None, "true").replace(
        "[roles.evaluator]\nprovider = \"claude\"\nenabled = false\n",
        "[roles.evaluator]\nprovider = \"codex\"\n",
    );
    assert!(file.contains("provider = \"codex\""), "{file}");
    let world = sprint_world(&file, Scenario::default());
    let out = world
        .env
        .corral()
        .envs(world.vars().iter().map(|(k, v)| (k, v)))
        .env(
            "CORRAL_PROVIDERS__CODEX__COMMAND",
            "corral-test-codex-not-installed",
        )
        .timeout(RUN_CAP)
        .args(["sprint", "run"])
        .output()
        .unwrap();
    let stderr = stable_stderr(&world, &out);
    assert_eq!(out.status.code(), Some(8), "{stderr}");
    assert!(
        stderr.contains(
            "✗ evaluator: codex's CLI `corral-test-codex-not-installed` is not installed"
        ) && stderr.contains("fix: install the tested version with `npm install -g @openai/codex@"),
        "{stderr}"
    );
    let steps = steps_taken(&world);
    assert!(steps.iter().all(|s| s == "preflight"), "{steps:?}");
    insta::assert_snapshot!(stderr);
}
