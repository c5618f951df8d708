//! The tidy gate: rules about source text that neither rustc nor clippy can check for us.
//!
//! - Every `.rs` file under `crates/` and `xtask/` starts with a `//!` paragraph (attributes such as
//!   `#![allow(...)]` come after it), as rust-analyzer's `TidyDocs` requires.
//! - No `todo!(`, `unimplemented!(` or `#[ignore` under `crates/`: unfinished code is not merged,
//!   and a test that is wrong asserts the wrong behaviour instead of being skipped.
//! - Processes are created (`Command::new(`, `fork(`) only under `crates/process`,
//!   `crates/test-support` and `xtask`, and in the engine's tests and benchmark, which play the
//!   program embedding the engine; clippy's `disallowed-methods` is the other half of this rule.
//! - Only the sandbox decides per backend: `SandboxBackend::Native` and `SandboxBackend::Bubblewrap`
//!   appear in product code only under `crates/sandbox` and `crates/ports` (ADR 0011), and a
//!   `BackendChoice::` is matched or compared there only (naming one to fill in settings is not
//!   a decision).
//!
//! - No module import cycle inside `corral-process`, `corral-sandbox` and `corral-engine`
//!   (`cycles.rs`, issue 30).
//!
//! - Nothing under `xtask/` nor `.ci/run` runs cargo offline: the registry cache of a fresh
//!   machine lacks crates an offline `cargo metadata` needs (the Windows-only ones, on Linux), so
//!   an offline gate passes only where some earlier command happened to fetch them.
//!
//! It runs as `cargo xtask tidy` and as a `#[test]`, so `cargo test` enforces it too.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

use crate::shell;

mod cycles;

/// The trees tidy reads, relative to the workspace root.
const ROOTS: &[&str] = &["crates", "xtask"];

/// Text that must not appear in any `.rs` file under `crates/`.
const FORBIDDEN_IN_CRATES: &[(&str, &str)] = &[
    ("todo!(", "unfinished code is not merged"),
    ("unimplemented!(", "unfinished code is not merged"),
    (
        "#[ignore",
        "assert the current (wrong) behaviour and leave a comment instead of skipping a test",
    ),
];

/// Process creation, in any spelling.
const PROCESS_CREATION: &[&str] = &[
    "std::process::Command::new",
    "tokio::process::Command::new",
    "Command::new(",
    "libc::fork(",
    "unistd::fork(",
];

/// A decision per sandbox backend, in any spelling of a pattern or a comparison.
const BACKEND_DECISION: &[&str] = &["SandboxBackend::Native", "SandboxBackend::Bubblewrap"];

/// Where a decision per backend belongs: the sandbox, and the ports that name the backends.
const MAY_DECIDE_PER_BACKEND: &[&str] = &["crates/sandbox/", "crates/ports/"];

/// The backend the settings choose; matched or compared on a line, it is a decision per backend.
const BACKEND_CHOICE: &str = "BackendChoice::";

/// What makes a line that names a [`BACKEND_CHOICE`] a decision: a match arm, a comparison.
const DECIDES: &[&str] = &["=>", "==", "!=", "matches!("];

/// Cargo's offline flag, spelled in two pieces so this file does not hold it.
const OFFLINE_FLAG: &str = concat!("--", "offline");

/// Where [`OFFLINE_FLAG`] may not appear: the README's commands and CI's script.
const MUST_RUN_ONLINE: &[&str] = &["xtask/", ".ci/"];

/// Non-Rust files tidy reads too.
const SCRIPTS: &[&str] = &[".ci/run"];

/// The only places that may create processes: corral-process in the product (ADR 0010); the
/// fixtures and the tool; the engine's tests and benchmark, which act as the program that embeds
/// the engine (its own children, a re-executed supervisor, the raw tokio baseline).
const MAY_CREATE_PROCESSES: &[&str] = &[
    "crates/process/",
    "crates/test-support/",
    "xtask/",
    "crates/engine/tests/",
    "crates/engine/benches/",
];

/// `cargo xtask tidy`: prints every violation and fails if there is any.
pub fn run(root: &Path) -> anyhow::Result<()> {
    let violations = check(root)?;
    if violations.is_empty() {
        println!("tidy ok");
        return Ok(());
    }
    for violation in &violations {
        eprintln!("{violation}");
    }
    bail!("tidy check failed with {} violation(s)", violations.len())
}

/// Every tidy violation in the `.rs` files of the workspace at `root`.
pub fn check(root: &Path) -> anyhow::Result<Vec<String>> {
    let mut files = Vec::new();
    for dir in ROOTS {
        rust_files(&root.join(dir), &mut files)?;
    }
    files.extend(
        SCRIPTS
            .iter()
            .map(|script| root.join(script))
            .filter(|p| p.is_file()),
    );
    files.sort();
    let mut found = Vec::new();
    msrv(root, &mut found)?;
    for file in &files {
        let rel = shell::relative(root, file);
        match std::fs::read_to_string(file) {
            Ok(text) => check_file(&rel, &text, &mut found),
            Err(err) => found.push(format!("{rel}: could not read as UTF-8 text: {err}")),
        }
    }
    cycles::check(root, &mut found)?;
    Ok(found)
}

/// The declared `rust-version` must be the toolchain CI builds with: only the pinned toolchain
/// can be fetched here, so an older MSRV would be a claim nothing checks.
fn msrv(root: &Path, found: &mut Vec<String>) -> anyhow::Result<()> {
    let manifest = std::fs::read_to_string(root.join("Cargo.toml"))?;
    let toolchain = std::fs::read_to_string(root.join("rust-toolchain.toml"))?;
    let value = |text: &str, key: &str| {
        text.lines()
            .find_map(|line| line.trim().strip_prefix(key)?.trim().strip_prefix('='))
            .map(|v| v.trim().trim_matches('"').to_string())
    };
    let declared = value(&manifest, "rust-version");
    let pinned = value(&toolchain, "channel");
    let matches = match (&declared, &pinned) {
        (Some(declared), Some(pinned)) => {
            pinned == declared || pinned.starts_with(&format!("{declared}."))
        }
        (None, _) | (_, None) => false,
    };
    if !matches {
        found.push(format!(
            "Cargo.toml: rust-version {declared:?} is not the toolchain pinned in rust-toolchain.toml \
             ({pinned:?}), the only one CI builds with"
        ));
    }
    Ok(())
}

/// The violations in one file, `rel` being its path from the workspace root with `/` separators.
fn check_file(rel: &str, text: &str, found: &mut Vec<String>) {
    if rel.ends_with(".rs") && !text.starts_with("//!") {
        found.push(format!(
            "{rel}: must start with a `//!` paragraph saying what the file is for (attributes go after it)"
        ));
    }
    let in_crates = rel.starts_with("crates/");
    let may_create_processes = MAY_CREATE_PROCESSES
        .iter()
        .any(|prefix| rel.starts_with(prefix));
    let must_run_online = MUST_RUN_ONLINE.iter().any(|prefix| rel.starts_with(prefix));
    let product_source = in_crates
        && rel.contains("/src/")
        && !rel.starts_with("crates/test-support/")
        && !rel.contains("/src/bin/");
    let may_decide_per_backend = !product_source
        || MAY_DECIDE_PER_BACKEND
            .iter()
            .any(|prefix| rel.starts_with(prefix));
    for (index, line) in text.lines().enumerate() {
        let line_no = index + 1;
        if must_run_online && line.contains(OFFLINE_FLAG) {
            found.push(format!(
                "{rel}:{line_no}: `{OFFLINE_FLAG}` in xtask or .ci: a fresh machine's registry cache \
                 lacks what it assumes; fetch first or run online"
            ));
        }
        if !rel.ends_with(".rs") {
            continue;
        }
        if in_crates {
            for (needle, why) in FORBIDDEN_IN_CRATES {
                if line.contains(needle) {
                    found.push(format!(
                        "{rel}:{line_no}: `{needle}` is not allowed in crates/: {why}"
                    ));
                }
            }
        }
        if !may_decide_per_backend
            && let Some(needle) = BACKEND_DECISION
                .iter()
                .find(|needle| line.contains(*needle))
        {
            found.push(format!(
                "{rel}:{line_no}: `{needle}` outside crates/sandbox: only the sandbox decides per \
                 backend (ADR 0011)"
            ));
        }
        if !may_decide_per_backend
            && line.contains(BACKEND_CHOICE)
            && DECIDES.iter().any(|decides| line.contains(decides))
        {
            found.push(format!(
                "{rel}:{line_no}: `{BACKEND_CHOICE}` matched or compared outside crates/sandbox: \
                 only the sandbox decides per backend (ADR 0011)"
            ));
        }
        if !may_create_processes
            && let Some(needle) = PROCESS_CREATION
                .iter()
                .find(|needle| line.contains(*needle))
        {
            found.push(format!(
                "{rel}:{line_no}: `{needle}` outside crates/process, crates/test-support and xtask: \
                 only corral-process creates processes (tests use corral-test-support)"
            ));
        }
    }
}

/// Collects the `.rs` files under `dir`, skipping `target` and hidden directories.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    if !dir.exists() {
        return Ok(());
    }
    let entries =
        std::fs::read_dir(dir).with_context(|| format!("could not list {}", dir.display()))?;
    for entry in entries {
        let entry = entry.with_context(|| format!("could not list {}", dir.display()))?;
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let file_type = entry
            .file_type()
            .with_context(|| format!("could not stat {}", path.display()))?;
        if file_type.is_dir() {
            if name != "target" && !name.starts_with('.') {
                rust_files(&path, out)?;
            }
        } else if name.ends_with(".rs") {
            out.push(path);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tidy gate, run by `cargo test` / `cargo nextest run` like rust-analyzer's tidy.
    #[test]
    fn tidy() {
        let violations = check(&shell::project_root()).unwrap();
        assert!(
            violations.is_empty(),
            "tidy violations:\n{}",
            violations.join("\n")
        );
    }

    fn violations(rel: &str, text: &str) -> Vec<String> {
        let mut found = Vec::new();
        check_file(rel, text, &mut found);
        found
    }

    #[test]
    fn header_must_come_first() {
        assert_eq!(
            violations("crates/ports/src/lib.rs", "//! Ports.\n"),
            Vec::<String>::new()
        );
        assert_eq!(
            violations(
                "crates/ports/src/lib.rs",
                "#![allow(dead_code)]\n//! Ports.\n"
            ),
            [
                "crates/ports/src/lib.rs: must start with a `//!` paragraph saying what the file is for (attributes go after it)"
            ]
        );
        assert_eq!(violations("xtask/src/new.rs", "").len(), 1);
    }

    #[test]
    fn unfinished_code_and_ignored_tests_are_rejected_in_crates_only() {
        let text =
            "//! T.\nfn f() { todo!() }\n#[ignore = \"flaky\"]\nfn g() { unimplemented!() }\n";
        assert_eq!(
            violations("crates/engine/tests/it/main.rs", text),
            [
                "crates/engine/tests/it/main.rs:2: `todo!(` is not allowed in crates/: unfinished code is not merged",
                "crates/engine/tests/it/main.rs:3: `#[ignore` is not allowed in crates/: assert the current (wrong) behaviour and leave a comment instead of skipping a test",
                "crates/engine/tests/it/main.rs:4: `unimplemented!(` is not allowed in crates/: unfinished code is not merged",
            ]
        );
        assert_eq!(violations("xtask/src/x.rs", text), Vec::<String>::new());
    }

    #[test]
    fn xtask_and_ci_never_run_cargo_offline() {
        let deny =
            format!("//! T.\nconst A: &[&str] = &[\"deny\", \"{OFFLINE_FLAG}\", \"check\"];\n");
        assert_eq!(
            violations("xtask/src/ci.rs", &deny),
            [format!(
                "xtask/src/ci.rs:2: `{OFFLINE_FLAG}` in xtask or .ci: a fresh machine's registry \
                 cache lacks what it assumes; fetch first or run online"
            )]
        );
        let script = format!("#!/usr/bin/env bash\ncargo deny {OFFLINE_FLAG} check\n");
        assert_eq!(violations(".ci/run", &script).len(), 1);
        assert_eq!(
            violations(".ci/run", "#!/usr/bin/env bash\ncargo xtask ci\n").len(),
            0
        );
        assert_eq!(
            violations("crates/engine/src/x.rs", &deny),
            Vec::<String>::new()
        );
    }

    #[test]
    fn only_the_process_crate_test_support_and_xtask_create_processes() {
        let text = "//! T.\nfn f() { let _ = std::process::Command::new(\"true\"); }\n";
        for allowed in [
            "crates/process/src/spawn.rs",
            "crates/test-support/src/lib.rs",
            "xtask/src/ci.rs",
        ] {
            assert_eq!(violations(allowed, text), Vec::<String>::new(), "{allowed}");
        }
        assert_eq!(
            violations("crates/contract/src/lib.rs", text),
            [
                "crates/contract/src/lib.rs:2: `std::process::Command::new` outside crates/process, crates/test-support and xtask: only corral-process creates processes (tests use corral-test-support)"
            ]
        );
        assert_eq!(
            violations(
                "crates/cli/tests/it/main.rs",
                "//! T.\nlet c = Command::new(bin);\n"
            )
            .len(),
            1
        );
        // A decision per backend outside the sandbox (ADR 0011); tests may name backends.
        let arm = "//! T.\nmatch b { SandboxBackend::Native => 1, _ => 2 };\n";
        assert_eq!(
            violations("crates/engine/src/headless.rs", arm),
            [
                "crates/engine/src/headless.rs:2: `SandboxBackend::Native` outside crates/sandbox: only the sandbox decides per backend (ADR 0011)"
            ]
        );
        for allowed in [
            "crates/sandbox/src/command.rs",
            "crates/engine/tests/it/sandbox.rs",
            "crates/ports/src/attestation.rs",
        ] {
            assert_eq!(violations(allowed, arm), Vec::<String>::new(), "{allowed}");
        }
        // The engine's launch and run decide nothing per backend any more (issue 30).
        assert_eq!(violations("crates/engine/src/launch.rs", arm).len(), 1);
        // A match or comparison on the settings' choice is a decision; naming one is not.
        let choice = "//! T.\nlet b = c.backend == BackendChoice::Auto;\nmatch c {\n    BackendChoice::Native => 1,\n};\nlet s = Settings { backend: BackendChoice::Auto };\n";
        assert_eq!(
            violations("crates/compose/src/factory.rs", choice),
            [
                "crates/compose/src/factory.rs:2: `BackendChoice::` matched or compared outside crates/sandbox: only the sandbox decides per backend (ADR 0011)",
                "crates/compose/src/factory.rs:4: `BackendChoice::` matched or compared outside crates/sandbox: only the sandbox decides per backend (ADR 0011)",
            ]
        );
        assert_eq!(
            violations("crates/sandbox/src/policy.rs", choice),
            Vec::<String>::new()
        );
        // The engine's product code and a fork are caught too (ADR 0010).
        assert_eq!(
            violations("crates/engine/src/sandbox.rs", text).len(),
            1,
            "the engine no longer creates processes"
        );
        assert_eq!(
            violations(
                "crates/engine/src/egress/netns.rs",
                "//! T.\nlet pid = unsafe { libc::fork() };\n"
            )
            .len(),
            1
        );
    }
}
