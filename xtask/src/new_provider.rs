//! `cargo xtask new-provider NAME`: the scaffold of a new provider crate, by the steps of
//! `docs/adding-a-provider.md`. It plants what `cargo xtask self-check` plants for its test-only
//! sixth provider (`SIXTH_EDITS`, the one list of those steps), renamed: the crate
//! `crates/providers/NAME` (settings, adapter, probe, descriptor) with a skeleton test, the
//! `ProviderId` variant, the arm in `descriptor()`, the settings table's field, the workspace
//! members, the composition root's dependency, the `deny.toml` entries and the layer. The result
//! builds and passes its skeleton test and the layering gate; what is left is the CLI itself
//! (its argv, stream parser, diagnosis), its pin, its conformance row and its docs (steps 4
//! and 5 of the doc).

use std::path::Path;

use anyhow::{Context, bail};

use crate::self_check::{SIXTH_EDITS, edit};

/// A provider's name in its three spellings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Names {
    /// `acme` (the id, the command, the crate's suffix).
    pub lower: String,
    /// `Acme` (the type names, the `ProviderId` variant).
    pub camel: String,
    /// `ACME` (its variables).
    pub upper: String,
}

impl Names {
    /// Checks `name`: lower-case ASCII letters and digits, starting with a letter, and not a
    /// provider the workspace already has.
    pub fn parse(name: &str) -> anyhow::Result<Self> {
        let valid = name.chars().next().is_some_and(|c| c.is_ascii_lowercase())
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
        if !valid {
            bail!(
                "provider name {name:?}: use lower-case letters and digits, starting with a letter (it becomes the id, the command and `corral-{name}`)"
            );
        }
        let mut camel = name[..1].to_ascii_uppercase();
        camel.push_str(&name[1..]);
        Ok(Names {
            lower: name.to_string(),
            camel,
            upper: name.to_ascii_uppercase(),
        })
    }

    /// `text` of the test-only provider, renamed.
    fn rename(&self, text: &str) -> String {
        text.replace("A test-only sixth CLI", &format!("The {} CLI", self.camel))
            .replace(
                "The test-only sixth CLI",
                &format!("The {} CLI", self.camel),
            )
            .replace("sixth", &self.lower)
            .replace("Sixth", &self.camel)
            .replace("SIXTH", &self.upper)
    }
}

/// The crate's `//!` paragraph, in place of the test-only provider's.
const HEADER_END: &str = "built and gated like the five real ones.\n";

/// The skeleton test the scaffold adds: what holds for the crate before it knows its CLI.
const SKELETON_TEST: &str = r#"//! The skeleton every provider passes before its CLI is known: its descriptor names it, its
//! adapter declares its endpoints and puts no prompt in argv. Replace and extend it with the
//! recorded samples of the real CLI (docs/adding-a-provider.md, step 1).

use std::path::Path;
use std::sync::Arc;

use corral_engine::{AttemptPlan, ChildEnv, CliAdapter};
use corral_ports::{AiSession, CancellationToken, Permissions, ProviderId, SessionId};

#[test]
fn the_descriptor_names_the_provider() {
    let d = &corral_NAME::DESCRIPTOR;
    assert_eq!(d.id, ProviderId::CAMEL);
    assert_eq!(d.id.as_str(), "NAME");
    assert_eq!(d.command, "NAME");
    assert!(ProviderId::ALL.contains(&ProviderId::CAMEL));
}

#[test]
fn the_adapter_declares_its_endpoints() {
    let adapter = corral_NAME::CAMELAdapter::default();
    let vars = vec![("HOME".to_string(), "/home/someone".to_string())];
    let needs = adapter.egress(&ChildEnv::new(&vars));
    assert!(!needs.endpoints.is_empty());
    assert_eq!(adapter.provider(), ProviderId::CAMEL);
}

/// The prompt reaches the CLI on stdin or through a pointer file, never as an argument (where
/// `ps` shows it to every user of the machine): not in a first attempt, not in a resume.
#[test]
fn the_adapter_puts_no_prompt_in_argv() {
    const PROMPT: &str = "SENTINEL-PROMPT: write signals.json and stop";
    let session = AiSession {
        prompt: Arc::from(PROMPT),
        cold_prompt: None,
        cwd: Path::new("/work/repo").to_path_buf(),
        extra_roots: Vec::new(),
        model: None,
        effort: None,
        permissions: Permissions::default(),
        resume: None,
        cancel: CancellationToken::new(),
        signals_file: Path::new("/runs/r1/signals.json").to_path_buf(),
        output_dir: Path::new("/runs/r1").to_path_buf(),
        max_budget_usd: None,
        max_turns: None,
        cold_fallback: true,
        task: None,
    };
    let adapter = corral_NAME::CAMELAdapter::default();
    let earlier = SessionId::new("0298f576-dcfa-437d-b446-91714c2e202b").unwrap();
    for resume in [None, Some(&earlier)] {
        let plan = AttemptPlan {
            session: &session,
            resume,
            attempt: 1,
            pointer: None,
        };
        let spec = adapter.command(&plan).unwrap();
        for arg in &spec.args {
            assert!(
                !arg.to_string_lossy().contains(PROMPT),
                "the prompt leaked into argv: {arg:?}"
            );
        }
    }
}
"#;

/// Plants the provider `names` into the workspace at `root`; returns the files it wrote.
pub fn scaffold(root: &Path, names: &Names) -> anyhow::Result<Vec<String>> {
    let crate_dir = root.join("crates/providers").join(&names.lower);
    if crate_dir.exists() {
        bail!("{} exists already", crate_dir.display());
    }
    let mut written = Vec::new();
    for (_, file, find, replace) in SIXTH_EDITS {
        let file = names.rename(file);
        let path = root.join(&file);
        if find.starts_with("pub const ALL: [ProviderId; ") {
            grow_all(&path)?;
        } else if find.is_empty() {
            let mut text = names.rename(replace);
            if file.ends_with("lib.rs") {
                text = with_header(&text, names)?;
            }
            if file.ends_with("Cargo.toml") {
                text = text.replace(
                    &format!("A test-only {} provider, planted by cargo xtask self-check from docs/adding-a-provider.md", names.lower),
                    &format!("Corral's provider for the {} CLI", names.camel),
                );
                text = text.replace(
                    "autotests = false\n",
                    "autotests = false\n\n[[test]]\nname = \"integration\"\npath = \"tests/it/main.rs\"\n",
                );
            }
            edit(&path, "", &text)?;
        } else {
            edit(&path, find, &names.rename(replace))?;
        }
        if !written.contains(&file) {
            written.push(file);
        }
    }
    let test = format!("crates/providers/{}/tests/it/main.rs", names.lower);
    let text = SKELETON_TEST
        .replace("CAMEL", &names.camel)
        .replace("NAME", &names.lower);
    edit(&root.join(&test), "", &text)?;
    written.push(test);
    Ok(written)
}

/// `ProviderId::ALL` one longer.
fn grow_all(path: &Path) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("could not read {}", path.display()))?;
    let anchor = "pub const ALL: [ProviderId; ";
    let start = text
        .find(anchor)
        .with_context(|| format!("{}: no `{anchor}`", path.display()))?
        + anchor.len();
    let len: usize = text[start..]
        .split(']')
        .next()
        .and_then(|n| n.trim().parse().ok())
        .with_context(|| format!("{}: `{anchor}` without a length", path.display()))?;
    let find = format!("{anchor}{len}]");
    edit(path, &find, &format!("{anchor}{}]", len + 1))
}

/// The crate's `//!` paragraph for a real provider.
fn with_header(text: &str, names: &Names) -> anyhow::Result<String> {
    let end = text.find(HEADER_END).context(
        "xtask/sixth-provider/lib.rs.in: its first paragraph changed; update new_provider.rs",
    )? + HEADER_END.len();
    Ok(format!(
        "//! Corral's provider for the {camel} CLI (`{lower}`), scaffolded by `cargo xtask new-provider`:\n\
         //! its settings, its adapter (argv, environment, endpoints), its model probe and its\n\
         //! descriptor. Fill in what docs/adding-a-provider.md lists against the real CLI.\n{}",
        &text[end..],
        camel = names.camel,
        lower = names.lower,
    ))
}

/// `cargo xtask new-provider NAME`.
pub fn run(root: &Path, args: &[String]) -> anyhow::Result<()> {
    let [name] = args else {
        bail!("usage: cargo xtask new-provider NAME");
    };
    let names = Names::parse(name)?;
    let started = std::time::Instant::now();
    let written = scaffold(root, &names)?;
    println!(
        "new-provider {}: wrote {} files in {:.1?}:",
        names.lower,
        written.len(),
        started.elapsed()
    );
    for file in &written {
        println!("  {file}");
    }
    println!(
        "next: cargo test -p corral-{} and cargo xtask layers; then steps 4 and 5 of docs/adding-a-provider.md",
        names.lower
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked_and_spelled_three_ways() {
        let n = Names::parse("acme2").unwrap();
        assert_eq!((n.camel.as_str(), n.upper.as_str()), ("Acme2", "ACME2"));
        for bad in ["", "Acme", "2acme", "ac-me", "ac_me"] {
            assert!(Names::parse(bad).is_err(), "{bad:?}");
        }
    }

    /// A scratch directory, removed on drop (xtask takes no `tempfile` dependency).
    struct Scratch {
        path: std::path::PathBuf,
    }

    impl Scratch {
        fn new(name: &str) -> Self {
            let path = std::env::temp_dir().join(format!(
                "corral-xtask-{name}-{}-{:?}",
                std::process::id(),
                std::thread::current().id()
            ));
            let _ = std::fs::remove_dir_all(&path);
            std::fs::create_dir_all(&path).unwrap();
            Scratch { path }
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }

    /// The files the scaffold edits, copied from this workspace into a scratch root.
    fn scratch_with_edited_files() -> Scratch {
        let root = crate::shell::project_root();
        let scratch = Scratch::new("new-provider");
        for (_, file, find, _) in SIXTH_EDITS {
            if !find.is_empty() {
                let to = scratch.path.join(file);
                std::fs::create_dir_all(to.parent().unwrap()).unwrap();
                std::fs::copy(root.join(file), &to).unwrap();
            }
        }
        scratch
    }

    #[test]
    fn the_scaffold_plants_every_step_renamed() {
        let scratch = scratch_with_edited_files();
        let names = Names::parse("acme").unwrap();
        let written = scaffold(&scratch.path, &names).unwrap();
        assert!(written.contains(&"crates/providers/acme/src/lib.rs".to_string()));
        let read = |f: &str| std::fs::read_to_string(scratch.path.join(f)).unwrap();
        let lib = read("crates/providers/acme/src/lib.rs");
        assert!(
            lib.starts_with("//! Corral's provider for the Acme CLI (`acme`)"),
            "{lib}"
        );
        assert!(!lib.to_lowercase().contains("sixth"), "{lib}");
        assert!(read("crates/ports/src/session.rs").contains("ProviderId::Acme => \"acme\""));
        assert!(read("crates/ports/src/session.rs").contains("pub const ALL: [ProviderId; 7]"));
        assert!(
            read("crates/compose/src/factory.rs")
                .contains("ProviderId::Acme => &corral_acme::DESCRIPTOR")
        );
        assert!(read("Cargo.toml").contains("\"crates/providers/acme\""));
        assert!(read("deny.toml").contains("{ crate = \"corral-acme\""));
        assert!(read("xtask/src/layers.rs").contains("name: \"corral-acme\""));
        assert!(read("crates/providers/acme/Cargo.toml").contains("name = \"integration\""));
        assert!(read("crates/providers/acme/tests/it/main.rs").contains("ProviderId::Acme"),);
        let again = scaffold(&scratch.path, &names).unwrap_err();
        assert!(again.to_string().contains("exists already"), "{again}");
    }

    /// The whole path, timed: a scratch copy of the workspace, the scaffold, then the new
    /// crate's skeleton test and the scratch copy's own layering gate in it. Only with
    /// `CORRAL_XTASK_SCAFFOLD_BUILD=1` (the `scaffold` step of `cargo xtask ci`, after the
    /// self-check): it builds in the self-check's target directory, whose dependencies the
    /// self-check's planted sixth provider has built.
    #[test]
    fn the_scaffolded_crate_builds_and_passes_its_skeleton() {
        if std::env::var_os("CORRAL_XTASK_SCAFFOLD_BUILD").is_none() {
            eprintln!("skipped: set CORRAL_XTASK_SCAFFOLD_BUILD=1 to build the scaffold");
            return;
        }
        let root = crate::shell::project_root();
        // Beside the shared target directory, outside the checkout when CARGO_TARGET_DIR is set.
        let scratch = crate::self_check::target_dir(&root).with_file_name("xtask-new-provider");
        crate::self_check::prepare(&root, &scratch).unwrap();
        let started = std::time::Instant::now();
        scaffold(&scratch, &Names::parse("acme").unwrap()).unwrap();
        let planted = started.elapsed();
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        // The composition root with the new arm builds (every exhaustive match on the
        // provider is there or below it), and the crate passes its skeleton. In the
        // self-check's target directory, never the workspace's own: cargo hashes a workspace
        // crate by its path inside the workspace, so the copy's `corral-ports` (one provider
        // longer) would overwrite the real one's artifacts there and pass for fresh.
        let target = crate::self_check::target_dir(&root);
        // The layering gate as the scratch copy has it (its `LAYERS` holds the new crate's row;
        // this binary's does not).
        for args in [
            &["check", "-p", "corral-compose"][..],
            &["test", "-p", "corral-acme"][..],
            &["run", "--quiet", "-p", "xtask", "--", "layers"][..],
        ] {
            let status = std::process::Command::new(&cargo)
                .current_dir(&scratch)
                .env("CARGO_TARGET_DIR", &target)
                .args(args)
                .status()
                .unwrap();
            assert!(
                status.success(),
                "cargo {args:?} failed in the scaffolded copy"
            );
        }
        eprintln!(
            "new-provider: planted in {planted:.1?}; planted, built and tested in {:.1?}",
            started.elapsed()
        );
    }
}
