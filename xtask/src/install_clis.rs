//! `cargo xtask install-clis [NAME|all]` (default `claude`; a NAME of the pinned table): installs
//! the pinned real AI coding CLIs with npm into `<root>/.cache/clis`, where corral-test-support's
//! `require_cli` finds them.
//!
//! A CLI whose binary exists and whose installed package has the pinned version is left alone (one
//! line, no npm run), so the command is idempotent. The table and the npm recipe are
//! `crates/test-support/src/pinned_clis.rs`, compiled into xtask with `#[path]` (see `main.rs`), so
//! tests and this command cannot disagree on a version.

use std::path::Path;

use anyhow::{Context, bail};

use crate::pinned_clis::{
    PINNED_CLIS, bin_path, clis_dir, installed_version, is_current, npm_install, pinned,
};
use crate::shell;

/// `cargo xtask install-clis [<name>|all]`.
pub fn run(root: &Path, args: &[String]) -> anyhow::Result<()> {
    for bin in selection(args)? {
        install(root, bin)?;
    }
    Ok(())
}

/// The binaries named by the arguments: none means `claude`, `all` means every pinned CLI.
fn selection(args: &[String]) -> anyhow::Result<Vec<&'static str>> {
    let names: Vec<&'static str> = PINNED_CLIS.iter().map(|&(bin, _, _)| bin).collect();
    match args {
        [] => Ok(vec!["claude"]),
        [one] if one == "all" => Ok(names),
        [one] => match names.iter().find(|name| **name == one.as_str()) {
            Some(name) => Ok(vec![*name]),
            None => bail!(
                "unknown CLI `{one}`; expected one of: {}, all",
                names.join(", ")
            ),
        },
        [_, extra, ..] => bail!("unexpected argument `{extra}`: give one CLI name or `all`"),
    }
}

/// Installs `bin` unless its pinned version is already there; prints where it is either way.
fn install(root: &Path, bin: &str) -> anyhow::Result<()> {
    let Some((package, version)) = pinned(bin) else {
        bail!("`{bin}` is not a pinned CLI");
    };
    let path = bin_path(root, bin);
    if is_current(root, bin) {
        println!("{bin} {version} already installed: {}", path.display());
        return Ok(());
    }
    let dir = clis_dir(root);
    std::fs::create_dir_all(&dir).with_context(|| format!("could not create {}", dir.display()))?;
    println!("installing {package}@{version} into {}", dir.display());
    shell::run(&mut npm_install(root, package, version))
        .context("npm install failed (needs Node.js >= 20 with npm, and the npm registry)")?;
    if !is_current(root, bin) {
        bail!(
            "after npm install, {} is missing or {package} is not {version} (found {:?})",
            path.display(),
            installed_version(root, package)
        );
    }
    println!("{bin} {version} installed: {}", path.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn selection_defaults_to_claude_and_knows_all() {
        assert_eq!(selection(&[]).unwrap(), ["claude"]);
        assert_eq!(selection(&args(&["grok"])).unwrap(), ["grok"]);
        assert_eq!(
            selection(&args(&["all"])).unwrap(),
            crate::pinned_clis::PINNED_CLIS
                .iter()
                .map(|(bin, _, _)| *bin)
                .collect::<Vec<_>>(),
            "every pinned CLI, in the table's order"
        );
        assert!(selection(&args(&["vim"])).is_err());
        assert!(selection(&args(&["claude", "codex"])).is_err());
    }

    #[test]
    fn paths_live_under_the_git_ignored_cache() {
        let root = Path::new("/r");
        assert_eq!(
            bin_path(root, "claude"),
            Path::new("/r/.cache/clis/node_modules/.bin/claude")
        );
        let gitignore = std::fs::read_to_string(shell::project_root().join(".gitignore")).unwrap();
        assert!(gitignore.lines().any(|line| line.trim() == "/.cache"));
    }
}
