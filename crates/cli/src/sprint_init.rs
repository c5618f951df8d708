//! What `corral sprint init` and `corral sprint check` look for on this machine: which
//! providers' CLIs are installed, the project's test command, the commit identity, the programs
//! the check commands start.
//!
//! Init fits its example to what it finds, so the file it writes runs here as written; check
//! warns about what it can already see will fail, before `sprint run` spends rounds on it.
//! Both only look (PATH, files, `git config`); neither starts an agent.

use std::ffi::OsStr;
use std::path::Path;

use corral_compose::{
    HostProgramError, Settings, command_runner, engine_config, host_program, provider_facts,
};
use corral_ports::{CancellationToken, ProviderId};
use corral_sprint::{ExampleChoice, ProjectCheck, SprintFile};

/// Whether provider `id`'s CLI is installed where `corral doctor` looks: the command the
/// settings name (an absolute path, or a name on PATH), not one inside `cwd`, which an agent
/// could write.
pub(crate) fn installed(id: ProviderId, settings: &Settings, cwd: &Path) -> bool {
    let facts = provider_facts(id, settings);
    let path = std::env::var_os("PATH");
    host_program(&facts.command, path.as_deref(), &[cwd]).is_ok()
}

/// The provider for both roles of init's example: the configured default when its CLI is
/// installed, else the first installed one in [`ProviderId::ALL`]'s order.
pub(crate) fn example_provider(settings: &Settings, cwd: &Path) -> Option<ProviderId> {
    std::iter::once(settings.run.provider)
        .chain(ProviderId::ALL)
        .find(|&id| installed(id, settings, cwd))
}

/// The project's test command, told from the files at `root`.
pub(crate) fn project_check(root: &Path) -> Option<ProjectCheck> {
    let has = |name: &str| root.join(name).is_file();
    if has("Cargo.toml") {
        Some(ProjectCheck::Cargo)
    } else if npm_test_script(&root.join("package.json")) {
        Some(ProjectCheck::Npm)
    } else if has("pyproject.toml") || has("pytest.ini") || has("setup.cfg") {
        Some(ProjectCheck::Pytest)
    } else if has("go.mod") {
        Some(ProjectCheck::Go)
    } else {
        None
    }
}

/// Whether `package.json` has a test script of its own: `npm init`'s placeholder (`echo
/// "Error: no test specified" && exit 1`) fails on every tree, so it does not count.
fn npm_test_script(path: &Path) -> bool {
    let Ok(text) = std::fs::read_to_string(path) else {
        return false;
    };
    let Ok(json) = serde_json::from_str::<serde_json::Value>(&text) else {
        return false;
    };
    json.get("scripts")
        .and_then(|s| s.get("test"))
        .and_then(serde_json::Value::as_str)
        .is_some_and(|t| !t.trim().is_empty() && !t.contains("no test specified"))
}

/// What init found, for its example.
pub(crate) fn example_choice(settings: &Settings, cwd: &Path, root: &Path) -> ExampleChoice {
    ExampleChoice {
        provider: example_provider(settings, cwd),
        check: project_check(root),
    }
}

/// The lines init prints after its file, saying what the example was fitted to.
pub(crate) fn choice_notes(choice: &ExampleChoice) -> Vec<String> {
    let mut notes = Vec::new();
    match choice.provider {
        Some(p) => notes.push(format!(
            "  generator and evaluator: {p} (its CLI is installed here)"
        )),
        None => notes.push(
            "  generator: claude, but no provider's CLI is installed here; install one (see `corral doctor`) and name it in [roles.generator]"
                .to_string(),
        ),
    }
    match choice.check {
        Some(check) => notes.push(format!(
            "  check: {} (from {})",
            check.command(),
            check.recognised_by()
        )),
        None => notes.push(format!(
            "  check: `{}`, a placeholder that passes on any tree; replace it with this project's test command",
            corral_sprint::PLACEHOLDER_CHECK
        )),
    }
    notes
}

/// What `sprint check` can see will fail when the sprint runs: a role's provider whose CLI is
/// not installed, no commit identity, a check command whose program is not on PATH. Warnings:
/// the file is still valid (another machine may have them).
pub(crate) async fn check_warnings(
    file: &SprintFile,
    settings: &Settings,
    cwd: &Path,
    root: &Path,
) -> Vec<String> {
    let mut warnings = Vec::new();
    // The evaluator is often the generator's provider (it is when its table is left out): one
    // warning per provider, naming the roles it plays.
    let mut providers: Vec<(ProviderId, Vec<&str>)> = Vec::new();
    let roles = std::iter::once(("generator", &file.generator))
        .chain(file.evaluator.as_ref().map(|e| ("evaluator", e)));
    for (name, role) in roles {
        match providers.iter_mut().find(|(p, _)| *p == role.provider) {
            Some((_, names)) => names.push(name),
            None => providers.push((role.provider, vec![name])),
        }
    }
    for (provider, roles) in providers {
        let facts = provider_facts(provider, settings);
        let path = std::env::var_os("PATH");
        let who = format!("{provider} ({})", roles.join(", "));
        match host_program(&facts.command, path.as_deref(), &[cwd]) {
            Ok(_) => {}
            Err(HostProgramError::NotFound { .. }) => warnings.push(format!(
                "{who}: {} is not installed (not found on PATH); install the tested version with `{}`, see `corral doctor --provider {provider}`",
                facts.command.display(),
                facts.install_command,
            )),
            Err(e @ HostProgramError::AgentWritable { .. }) => {
                warnings.push(format!("{who}: {e}"));
            }
        }
    }
    warnings.extend(commit_and_command_warnings(file, settings, root).await);
    warnings
}

/// The part of [`check_warnings`] that starts no provider: no commit identity, a check, setup or
/// gate command whose program is not found. The preflight of `sprint run` refuses these.
pub(crate) async fn commit_and_command_warnings(
    file: &SprintFile,
    settings: &Settings,
    root: &Path,
) -> Vec<String> {
    let mut warnings = Vec::new();
    let runner = command_runner(engine_config(settings));
    let cancel = CancellationToken::new();
    let (_, missing) = crate::sprint_run::git_identity_and_gaps(&*runner, root, &cancel).await;
    for key in missing {
        warnings.push(format!(
            "no git {key} for the sprint's commits: the commit step will fail; set GIT_AUTHOR_{var} and GIT_COMMITTER_{var}, `git config {key} …` in this repository, or {key} in your global git config",
            var = if key == "user.name" { "NAME" } else { "EMAIL" }
        ));
    }
    let path = std::env::var_os("PATH");
    let commands = std::iter::once(("check".to_string(), file.sprint.check.as_str()))
        .chain(
            file.sprint
                .setup
                .as_deref()
                .map(|s| ("setup".to_string(), s)),
        )
        .chain(
            file.gates
                .iter()
                .map(|g| (format!("the gate on {}", g.path), g.command.as_str())),
        );
    for (what, command) in commands {
        if let Some(program) = missing_program(command, path.as_deref(), root) {
            warnings.push(format!(
                "{what}: `{program}` is not found on PATH, so `{}` will fail",
                crate::term::one_line(command)
            ));
        }
    }
    warnings
}

/// The program a shell command starts, when it can be told and is not found: on `path` for a
/// bare name, under `root` for a relative path. A builtin, a variable or anything else the
/// shell would expand first is not looked for.
fn missing_program(command: &str, path: Option<&OsStr>, root: &Path) -> Option<String> {
    let word = command
        .split_whitespace()
        // Assignments before the program (`RUST_LOG=debug cargo test`).
        .find(|w| !w.contains('=') || w.starts_with('='))?;
    let shell_syntax = |c: char| "$`'\"(){}[]<>|&;*?~!\\".contains(c);
    if word.chars().any(shell_syntax) || SHELL_WORDS.contains(&word) {
        return None;
    }
    let program = Path::new(word);
    let found = if program.is_absolute() {
        host_program(program, path, &[]).is_ok()
    } else if program.components().count() > 1 {
        root.join(program).is_file()
    } else {
        host_program(program, path, &[]).is_ok()
    };
    (!found).then(|| word.to_string())
}

/// Builtins and keywords of `sh`, which no PATH lookup finds.
const SHELL_WORDS: &[&str] = &[
    ".", ":", "alias", "break", "case", "cd", "command", "continue", "eval", "exec", "exit",
    "export", "false", "for", "if", "pwd", "read", "return", "set", "shift", "test", "times",
    "trap", "true", "type", "ulimit", "umask", "unset", "until", "wait", "while", "echo", "printf",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_program_of_a_command_is_its_first_word_after_assignments() {
        let none = Some(OsStr::new(""));
        let root = Path::new("/nonexistent");
        assert_eq!(
            missing_program("RUST_LOG=debug cargo test", none, root).as_deref(),
            Some("cargo")
        );
        assert_eq!(missing_program("true", none, root), None);
        assert_eq!(missing_program("$MAKE all", none, root), None);
        assert_eq!(
            missing_program("./gradlew test", none, root).as_deref(),
            Some("./gradlew")
        );
        assert_eq!(
            missing_program("sh -c 'x'", Some(OsStr::new("/bin:/usr/bin")), root),
            None
        );
    }
}
