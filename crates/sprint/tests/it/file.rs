//! The sprint file: a valid one read into values, the example `corral sprint init` writes,
//! and every rule's error with its file, line, key and rule, all of them at once.

use std::path::{Path, PathBuf};

use corral_ports::{Effort, ProviderId};
use corral_sprint::{
    Diagnostic, EXAMPLE, ExampleChoice, FoldCheck, PLACEHOLDER_CHECK, ProjectCheck, Rule,
    SprintFile, SprintFileError, TaskPrompt, example, limits, load, parse,
};

/// Writes `text` as `corral-sprint.toml` in a new directory and loads it.
fn load_text(text: &str) -> (tempfile::TempDir, Result<SprintFile, SprintFileError>) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("corral-sprint.toml");
    std::fs::write(&path, text).unwrap();
    let loaded = load(&path);
    (dir, loaded)
}

/// The diagnostics of `text`, printed as the CLI prints them, with the file as a bare name.
fn errors(text: &str) -> Vec<String> {
    match parse(Path::new("corral-sprint.toml"), text) {
        Ok(file) => panic!("expected errors, got {file:?}"),
        Err(SprintFileError::Invalid { diagnostics, .. }) => {
            diagnostics.iter().map(Diagnostic::to_string).collect()
        }
        Err(other) => panic!("expected diagnostics, got {other}"),
    }
}

fn rules(text: &str) -> Vec<Rule> {
    match parse(Path::new("corral-sprint.toml"), text) {
        Err(SprintFileError::Invalid { diagnostics, .. }) => {
            diagnostics.iter().map(|d| d.rule).collect()
        }
        other => panic!("expected diagnostics, got {other:?}"),
    }
}

const MINIMAL: &str = r#"
[sprint]
name = "demo"
check = "true"

[roles.generator]
provider = "claude"

[[tasks]]
id = "one"
title = "The one task"
prompt = "Do it."
"#;

#[test]
fn a_minimal_file_gets_every_default() {
    let file = parse(Path::new("corral-sprint.toml"), MINIMAL).unwrap();
    assert_eq!(file.sprint.name.as_str(), "demo");
    assert_eq!(file.sprint.branch, "corral/demo");
    assert_eq!(file.sprint.check, "true");
    assert_eq!(
        file.sprint.check_timeout_ms,
        limits::DEFAULT_CHECK_TIMEOUT_MS
    );
    assert_eq!(file.sprint.setup, None);
    assert_eq!(file.sprint.max_rounds, 3);
    assert_eq!(file.sprint.max_attempts, 2);
    assert_eq!(file.sprint.fold_check, FoldCheck::Each);
    assert_eq!(file.generator.provider, ProviderId::Claude);
    assert_eq!(file.generator.model, None);
    assert_eq!(
        file.evaluator.as_ref(),
        Some(&file.generator),
        "without its own table the evaluator is the generator's agent"
    );
    assert!(file.gates.is_empty());
    assert_eq!(file.tasks.len(), 1);
    assert_eq!(file.tasks[0].prompt, TaskPrompt::Inline("Do it.".into()));
    assert_eq!(file.tasks[0].line, 9);
}

#[test]
fn every_key_is_read() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("briefs")).unwrap();
    std::fs::write(dir.path().join("briefs/b.md"), "Brief B.\n").unwrap();
    let text = r#"
[sprint]
name = "full"
branch = "work/full"
check = "make check"
check_timeout_ms = 5000
setup = "make deps"
max_rounds = 10
max_attempts = 1

[roles.generator]
provider = "opencode"
model = "anthropic/claude-sonnet-4-5"
effort = "high"

[roles.evaluator]
provider = "codex"
model = "gpt-5"
effort = "low"

[[gates]]
path = "crates/engine/"
command = "cargo test -p corral-engine"

[[gates]]
path = "docs/"
command = "make docs"
timeout_ms = 2000

[[tasks]]
id = "a"
title = "A"
prompt = "Do A."

[[tasks]]
id = "b"
title = "B"
brief = "briefs/b.md"
depends_on = ["a", "a"]
"#;
    let path = dir.path().join("corral-sprint.toml");
    std::fs::write(&path, text).unwrap();
    let file = load(&path).unwrap();
    assert_eq!(file.sprint.branch, "work/full");
    assert_eq!(file.sprint.check_timeout_ms, 5000);
    assert_eq!(file.sprint.setup.as_deref(), Some("make deps"));
    assert_eq!((file.sprint.max_rounds, file.sprint.max_attempts), (10, 1));
    assert_eq!(file.generator.provider, ProviderId::Opencode);
    assert_eq!(
        file.generator.model.as_deref(),
        Some("anthropic/claude-sonnet-4-5")
    );
    assert_eq!(file.generator.effort, Some(Effort::High));
    let evaluator = file.evaluator.clone().unwrap();
    assert_eq!(evaluator.provider, ProviderId::Codex);
    assert_eq!(evaluator.effort, Some(Effort::Low));
    assert_eq!(file.gates.len(), 2);
    assert_eq!(
        file.gates[0].timeout_ms, 5000,
        "a gate's timeout defaults to the check's"
    );
    assert_eq!(file.gates[1].timeout_ms, 2000);
    assert!(file.gates[0].applies_to("crates/engine/src/run.rs"));
    assert!(!file.gates[0].applies_to("crates/cli/src/run.rs"));
    assert_eq!(
        file.tasks[1].prompt,
        TaskPrompt::Brief {
            path: dir.path().join("briefs/b.md"),
            text: "Brief B.\n".into()
        },
        "a brief is read relative to the sprint file"
    );
    assert_eq!(file.tasks[1].depends_on.len(), 1, "duplicates are dropped");
}

#[test]
fn the_evaluator_can_be_turned_off() {
    let text = MINIMAL.replace(
        "[[tasks]]",
        "[roles.evaluator]\nenabled = false\n\n[[tasks]]",
    );
    let file = parse(Path::new("corral-sprint.toml"), &text).unwrap();
    assert_eq!(file.evaluator, None);
}

#[test]
fn the_example_init_writes_is_valid_and_runs_in_file_order() {
    let (_dir, file) = load_text(EXAMPLE);
    let file = file.unwrap();
    assert_eq!(file.sprint.name.as_str(), "example");
    assert_eq!(file.generator.provider, ProviderId::Claude);
    assert_eq!(
        file.evaluator.as_ref().map(|e| e.provider),
        Some(ProviderId::Codex)
    );
    let order: Vec<&str> = file.run_order().iter().map(|t| t.id.as_str()).collect();
    assert_eq!(order, ["parse-config", "use-config"]);
}

#[test]
fn every_example_init_can_write_is_valid_and_names_only_what_it_was_given() {
    let checks = [
        None,
        Some(ProjectCheck::Cargo),
        Some(ProjectCheck::Npm),
        Some(ProjectCheck::Pytest),
        Some(ProjectCheck::Go),
    ];
    for provider in ProviderId::ALL.iter().copied().map(Some).chain([None]) {
        for check in checks {
            let text = example(&ExampleChoice { provider, check });
            let (_dir, file) = load_text(&text);
            let file = file.unwrap_or_else(|e| panic!("{provider:?} {check:?}: {e}\n{text}"));
            assert_eq!(
                file.generator.provider,
                provider.unwrap_or(ProviderId::Claude)
            );
            // The evaluator is the generator's provider: never another CLI.
            assert_eq!(
                file.evaluator.as_ref().map(|e| e.provider),
                Some(file.generator.provider)
            );
            assert_eq!(
                file.sprint.check,
                check.map_or(PLACEHOLDER_CHECK, ProjectCheck::command)
            );
            assert_eq!(
                file.gates.len(),
                usize::from(check == Some(ProjectCheck::Cargo))
            );
        }
    }
}

#[test]
fn dependencies_run_first_and_the_file_order_otherwise() {
    let text = r#"
[sprint]
name = "order"
check = "true"
[roles.generator]
provider = "grok"
[[tasks]]
id = "deploy"
title = "Deploy"
prompt = "p"
depends_on = ["build", "test"]
[[tasks]]
id = "docs"
title = "Docs"
prompt = "p"
[[tasks]]
id = "test"
title = "Test"
prompt = "p"
depends_on = ["build"]
[[tasks]]
id = "build"
title = "Build"
prompt = "p"
"#;
    let file = parse(Path::new("corral-sprint.toml"), text).unwrap();
    let order: Vec<&str> = file.run_order().iter().map(|t| t.id.as_str()).collect();
    assert_eq!(order, ["docs", "build", "test", "deploy"]);
}

#[test]
fn every_error_is_reported_with_file_line_key_and_rule() {
    let text = r#"
[sprint]
name = "bad name"
chek = "true"
max_rounds = 11
max_attempts = 0
check_timeout_ms = "ten"
colour = "blue"

[roles.generator]
provider = "claud"
effort = "extreme"

[roles.evaluator]
provider = "gpt"

[[gates]]
path = "/etc"
command = ""

[[tasks]]
id = "a"
title = "A"
prompt = "p"
brief = "b.md"
depends_on = ["c"]

[[tasks]]
id = "a"
title = "A again"

[[tasks]]
id = "c"
title = "C"
prompt = "p"
depends_on = ["a"]

[[tasks]]
id = "d"
title = "D"
prompt = "p"
depends_on = ["e", "ghost"]

[[tasks]]
id = "e"
title = "E"
prompt = "p"
depends_on = ["d"]
"#;
    insta::assert_snapshot!(errors(text).join("\n"));
}

#[test]
fn a_missing_check_name_and_generator_are_each_named() {
    let text = "[sprint]\nmax_rounds = 2\n\n[roles]\n\n[[tasks]]\nid = \"x\"\nprompt = \"p\"\n";
    insta::assert_snapshot!(errors(text).join("\n"));
}

#[test]
fn a_file_without_tables_names_each_missing_one() {
    assert_eq!(
        rules(""),
        [Rule::MissingKey, Rule::MissingKey, Rule::NoTasks],
        "sprint, roles and tasks"
    );
}

#[test]
fn a_syntax_error_names_its_line() {
    let got = errors("[sprint]\nname = \"x\"\ncheck = \n");
    assert_eq!(got.len(), 1, "{got:?}");
    assert!(
        got[0].starts_with("corral-sprint.toml:3:") && got[0].ends_with("[syntax]"),
        "{got:?}"
    );
}

#[test]
fn a_task_with_neither_prompt_nor_brief_is_named() {
    let text = MINIMAL.replace("prompt = \"Do it.\"", "");
    assert_eq!(
        errors(&text),
        [
            "corral-sprint.toml:9:1: tasks[0]: the task has neither a prompt nor a brief (a file) [no-prompt]"
        ]
    );
}

#[test]
fn a_missing_brief_names_the_file_relative_to_the_sprint_file() {
    let text = MINIMAL.replace("prompt = \"Do it.\"", "brief = \"briefs/none.md\"");
    let (dir, loaded) = load_text(&text);
    let Err(SprintFileError::Invalid { diagnostics, .. }) = loaded else {
        panic!("expected diagnostics, got {loaded:?}");
    };
    assert_eq!(diagnostics.len(), 1);
    let d = &diagnostics[0];
    assert_eq!((d.line, d.rule), (12, Rule::BriefMissing));
    assert_eq!(d.key, "tasks[0].brief");
    assert_eq!(d.file, dir.path().join("corral-sprint.toml"));
    let expected: PathBuf = dir.path().join("briefs/none.md");
    assert!(
        d.message.contains(&expected.display().to_string()),
        "{}",
        d.message
    );
}

#[test]
fn an_empty_brief_and_a_directory_brief_are_unusable() {
    let text = MINIMAL.replace("prompt = \"Do it.\"", "brief = \"empty.md\"")
        + "\n[[tasks]]\nid = \"two\"\ntitle = \"Two\"\nbrief = \"dir\"\n";
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("empty.md"), "  \n").unwrap();
    std::fs::create_dir(dir.path().join("dir")).unwrap();
    let path = dir.path().join("corral-sprint.toml");
    std::fs::write(&path, text).unwrap();
    let Err(SprintFileError::Invalid { diagnostics, .. }) = load(&path) else {
        panic!("expected diagnostics");
    };
    let rules: Vec<Rule> = diagnostics.iter().map(|d| d.rule).collect();
    assert_eq!(rules, [Rule::BriefUnreadable, Rule::BriefUnreadable]);
}

#[test]
fn tasks_written_as_an_inline_array_are_read_too() {
    let text = r#"
sprint = { name = "inline", check = "true" }
roles = { generator = { provider = "copilot" } }
tasks = [
  { id = "a", title = "A", prompt = "p" },
  { id = "b", title = "B", prompt = "p", depends_on = ["zz"] },
]
"#;
    assert_eq!(
        errors(text),
        [
            "corral-sprint.toml:6:56: tasks[1].depends_on: task \"b\" depends on \"zz\", which is no task's id [unknown-dependency]"
        ]
    );
}

#[test]
fn wrong_types_are_named_with_what_was_found() {
    let text = r#"
sprint = "demo"
roles = 3
tasks = "none"
"#;
    insta::assert_snapshot!(errors(text).join("\n"));
}

#[test]
fn an_unreadable_or_non_utf8_file_is_an_error_of_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let missing = load(&dir.path().join("nope.toml"));
    assert!(
        matches!(missing, Err(SprintFileError::Unreadable(_))),
        "{missing:?}"
    );
    let path = dir.path().join("latin1.toml");
    std::fs::write(&path, b"[sprint]\nname = \"caf\xe9\"\n").unwrap();
    let Err(SprintFileError::Invalid { diagnostics, .. }) = load(&path) else {
        panic!("expected diagnostics");
    };
    assert_eq!(
        (diagnostics[0].line, diagnostics[0].rule),
        (2, Rule::Syntax)
    );
}

#[test]
fn protected_and_may_edit_are_read_and_checked() {
    let text = MINIMAL
        .replace(
            "check = \"true\"",
            "check = \"true\"\nprotected = [\"ci/**\", \"./tools/check.sh\"]",
        )
        .replace(
            "prompt = \"Do it.\"",
            "prompt = \"Do it.\"\nmay_edit = [\"ci/lint.sh\"]",
        );
    let file = parse(Path::new("corral-sprint.toml"), &text).unwrap();
    assert_eq!(file.sprint.protected, ["ci/**", "tools/check.sh"]);
    assert_eq!(file.tasks[0].may_edit, ["ci/lint.sh"]);
    assert!(
        parse(Path::new("corral-sprint.toml"), MINIMAL)
            .unwrap()
            .sprint
            .protected
            .is_empty()
    );

    let bad = MINIMAL
        .replace(
            "check = \"true\"",
            "check = \"true\"\nprotected = [\"/etc/passwd\", 3]",
        )
        .replace(
            "prompt = \"Do it.\"",
            "prompt = \"Do it.\"\nmay_edit = \"../x\"",
        );
    assert_eq!(
        errors(&bad),
        [
            "corral-sprint.toml:5:14: sprint.protected: \"/etc/passwd\" is absolute; a glob is relative to the work tree's top [bad-path]",
            "corral-sprint.toml:5:29: sprint.protected: holds an integer, expected path globs (strings) [wrong-type]",
            "corral-sprint.toml:14:1: tasks[0].may_edit: is a string, expected a list of path globs [wrong-type]",
        ]
    );
    let bad = MINIMAL.replace(
        "prompt = \"Do it.\"",
        "prompt = \"Do it.\"\nmay_edit = [\"a/../../b\", \"\"]",
    );
    assert_eq!(rules(&bad), [Rule::BadPath, Rule::Empty]);
}

#[test]
fn a_brief_outside_the_work_tree_hidden_or_through_a_link_is_refused() {
    let home = tempfile::tempdir().unwrap();
    let key = home.path().join("id_rsa");
    std::fs::write(&key, "-----BEGIN OPENSSH PRIVATE KEY-----\n").unwrap();
    let repo = tempfile::tempdir().unwrap();
    let root = repo.path();
    std::fs::create_dir_all(root.join(".git")).unwrap();
    std::fs::create_dir_all(root.join("briefs")).unwrap();
    std::fs::create_dir_all(root.join(".ssh")).unwrap();
    std::fs::write(root.join(".ssh/id_rsa"), "secret\n").unwrap();
    std::fs::write(root.join("briefs/ok.md"), "Do it.\n").unwrap();
    std::os::unix::fs::symlink(&key, root.join("briefs/key.md")).unwrap();
    std::os::unix::fs::symlink(home.path(), root.join("linked")).unwrap();
    let briefs = [
        "briefs/key.md",
        "linked/id_rsa",
        ".ssh/id_rsa",
        "briefs/../.ssh/id_rsa",
        "../../../../../../../../etc/hostname",
    ];
    let mut text = MINIMAL.replace("prompt = \"Do it.\"", "brief = \"briefs/ok.md\"");
    for (i, brief) in briefs.iter().enumerate() {
        text.push_str(&format!(
            "\n[[tasks]]\nid = \"t{i}\"\ntitle = \"T\"\nbrief = {brief:?}\n"
        ));
    }
    let path = root.join("corral-sprint.toml");
    std::fs::write(&path, &text).unwrap();
    let Err(SprintFileError::Invalid { diagnostics, .. }) = load(&path) else {
        panic!("expected diagnostics");
    };
    let found: Vec<(String, Rule)> = diagnostics
        .iter()
        .map(|d| (d.key.clone(), d.rule))
        .collect();
    let expected: Vec<(String, Rule)> = (1..=briefs.len())
        .map(|i| (format!("tasks[{i}].brief"), Rule::BriefOutsideTree))
        .collect();
    assert_eq!(found, expected, "{diagnostics:#?}");
    assert!(
        diagnostics.iter().all(|d| !d.message.contains("BEGIN")),
        "nothing of a target is shown"
    );
    assert_eq!(Rule::BriefOutsideTree.as_str(), "brief-outside-tree");

    // The sprint file's own directory may be hidden.
    std::fs::create_dir_all(root.join(".sprints")).unwrap();
    std::fs::write(root.join(".sprints/b.md"), "Do it.\n").unwrap();
    let own = root.join(".sprints/corral-sprint.toml");
    std::fs::write(
        &own,
        MINIMAL.replace("prompt = \"Do it.\"", "brief = \"b.md\""),
    )
    .unwrap();
    let file = load(&own).unwrap();
    assert_eq!(file.tasks[0].prompt.text(), "Do it.\n");
}

#[test]
fn a_branch_git_check_ref_format_refuses_is_refused() {
    for branch in [
        "HEAD",
        "@",
        "-x",
        "work/a.lock/b",
        "a..b",
        "x@{1}",
        "a/.b",
        "a.",
    ] {
        let text = MINIMAL.replace(
            "check = \"true\"",
            &format!("check = \"true\"\nbranch = {branch:?}"),
        );
        assert_eq!(rules(&text), [Rule::BadBranch], "{branch}");
    }
    for branch in ["main", "corral/x", "a@b", "feature/x-1"] {
        let text = MINIMAL.replace(
            "check = \"true\"",
            &format!("check = \"true\"\nbranch = {branch:?}"),
        );
        let file = parse(Path::new("corral-sprint.toml"), &text).unwrap();
        assert_eq!(file.sprint.branch, branch);
    }
}

#[test]
fn touches_are_read_checked_and_their_overlaps_found() {
    let text = format!(
        "{MINIMAL}touches = [\"src/**\"]\n\n[[tasks]]\nid = \"two\"\ntitle = \"Two\"\nprompt = \"p\"\ntouches = [\"src/lib.rs\", \"docs/\"]\n\n[[tasks]]\nid = \"three\"\ntitle = \"Three\"\nprompt = \"p\"\ndepends_on = [\"two\"]\ntouches = [\"docs/a.md\"]\n\n[[tasks]]\nid = \"four\"\ntitle = \"Four\"\nprompt = \"p\"\ntouches = [\"README\"]\n"
    );
    let file = parse(Path::new("corral-sprint.toml"), &text).unwrap();
    assert_eq!(file.tasks[0].touches, ["src/**"]);
    assert_eq!(file.tasks[1].touches, ["src/lib.rs", "docs/"]);
    assert!(
        parse(Path::new("corral-sprint.toml"), MINIMAL)
            .unwrap()
            .tasks[0]
            .touches
            .is_empty()
    );
    // one and two may run at once and both touch src/lib.rs; three overlaps two but runs
    // after it; four overlaps nothing.
    let overlaps: Vec<String> = file.overlaps().iter().map(ToString::to_string).collect();
    assert_eq!(
        overlaps,
        [
            "tasks one and two both touch `src/**` and `src/lib.rs`: with --jobs they run one after the other"
        ]
    );

    let bad = MINIMAL.replace(
        "prompt = \"Do it.\"",
        "prompt = \"Do it.\"\ntouches = \"src\"",
    );
    assert_eq!(
        errors(&bad),
        [
            "corral-sprint.toml:13:1: tasks[0].touches: is a string, expected a list of path globs [wrong-type]"
        ]
    );
    let bad = MINIMAL.replace(
        "prompt = \"Do it.\"",
        "prompt = \"Do it.\"\ntouches = [\"/etc\", 3]",
    );
    assert_eq!(rules(&bad), [Rule::BadPath, Rule::WrongType]);
}

#[test]
fn a_timeout_takes_a_duration_as_text_and_a_bad_one_is_named() {
    let text = MINIMAL
        .replace(
            "check = \"true\"",
            "check = \"true\"\ncheck_timeout_ms = \"15m\"",
        )
        .replace(
            "[[tasks]]",
            "[[gates]]\npath = \"docs/\"\ncommand = \"true\"\ntimeout_ms = \"90s\"\n\n[[tasks]]",
        );
    let file = parse(Path::new("corral-sprint.toml"), &text).unwrap();
    assert_eq!(file.sprint.check_timeout_ms, 900_000);
    assert_eq!(file.gates[0].timeout_ms, 90_000);
    let bad = MINIMAL.replace(
        "check = \"true\"",
        "check = \"true\"\ncheck_timeout_ms = \"soon\"",
    );
    assert_eq!(
        errors(&bad),
        [
            "corral-sprint.toml:5:1: sprint.check_timeout_ms: is \"soon\", expected a whole number of milliseconds or a duration such as \"90s\", \"5m\" or \"2h\" [wrong-type]"
        ]
    );
    // Past its range as text too: the range names milliseconds.
    let long = MINIMAL.replace(
        "check = \"true\"",
        "check = \"true\"\ncheck_timeout_ms = \"2days\"",
    );
    assert_eq!(rules(&long), [Rule::OutOfRange]);
}

#[test]
fn fold_check_is_each_or_off_and_anything_else_is_named() {
    let off = MINIMAL.replace("check = \"true\"", "check = \"true\"\nfold_check = \"off\"");
    let file = parse(Path::new("corral-sprint.toml"), &off).unwrap();
    assert_eq!(file.sprint.fold_check, FoldCheck::Off);
    let each = MINIMAL.replace(
        "check = \"true\"",
        "check = \"true\"\nfold_check = \"each\"",
    );
    let file = parse(Path::new("corral-sprint.toml"), &each).unwrap();
    assert_eq!(file.sprint.fold_check, FoldCheck::Each);
    let bad = MINIMAL.replace(
        "check = \"true\"",
        "check = \"true\"\nfold_check = \"batch\"",
    );
    assert_eq!(
        errors(&bad),
        [
            "corral-sprint.toml:5:1: sprint.fold_check: \"batch\" is not one of each, off [unknown-fold-check]"
        ]
    );
    let wrong = MINIMAL.replace("check = \"true\"", "check = \"true\"\nfold_check = false");
    assert_eq!(rules(&wrong), [Rule::WrongType]);
}
