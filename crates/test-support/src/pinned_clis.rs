//! The real AI coding CLIs Corral is tested against, pinned, and how they are installed with npm.
//!
//! This one file is compiled twice: as `corral_test_support::pinned_clis` (for `require_cli` in tests)
//! and, through `#[path]`, as a module of `xtask` (for `cargo xtask install-clis`), which may
//! not depend on corral-test-support. So there is one table and one install recipe, and they cannot
//! drift apart. Keep it to the standard library and `serde_json`, which both crates have.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Every pinned CLI: `(binary in node_modules/.bin, npm package, exact version)`.
///
/// The versions are the ones `/work/shared/cli-behaviour/README.md` recorded the CLIs' behaviour with.
/// `@vibe-kit/grok-cli` 0.0.34 prints `1.0.1` for `--version`, which is why the installed version is
/// read from the package's `package.json` rather than from `--version`.
pub const PINNED_CLIS: &[(&str, &str, &str)] = &[
    ("claude", "@anthropic-ai/claude-code", "2.1.197"),
    ("codex", "@openai/codex", "0.171.0"),
    ("opencode", "opencode-ai", "1.18.33"),
    ("grok", "@vibe-kit/grok-cli", "0.0.34"),
    ("copilot", "@github/copilot", "1.0.102"),
    ("gemini", "@google/gemini-cli", "0.61.0"),
];

/// Where the CLIs are installed, relative to the workspace root (git-ignored as `/.cache`).
pub const CLIS_DIR: &str = ".cache/clis";

/// The npm package and version pinned for the binary `bin`, if it is one of [`PINNED_CLIS`].
pub fn pinned(bin: &str) -> Option<(&'static str, &'static str)> {
    PINNED_CLIS
        .iter()
        .find(|(name, _, _)| *name == bin)
        .map(|&(_, package, version)| (package, version))
}

/// The npm prefix the CLIs are installed into: `<root>/.cache/clis`.
pub fn clis_dir(root: &Path) -> PathBuf {
    root.join(CLIS_DIR)
}

/// Where npm links the binary `bin`: `<root>/.cache/clis/node_modules/.bin/<bin>`.
pub fn bin_path(root: &Path, bin: &str) -> PathBuf {
    clis_dir(root).join("node_modules").join(".bin").join(bin)
}

/// The version npm installed of `package` under `<root>/.cache/clis`, from its `package.json`.
pub fn installed_version(root: &Path, package: &str) -> Option<String> {
    let manifest = clis_dir(root)
        .join("node_modules")
        .join(package)
        .join("package.json");
    let text = std::fs::read_to_string(manifest).ok()?;
    let json: serde_json::Value = serde_json::from_str(&text).ok()?;
    json.get("version")?.as_str().map(str::to_owned)
}

/// Whether the pinned CLI `bin` is installed at its pinned version: its binary exists and npm's record
/// of the package says the pinned version. False for a binary that is not in [`PINNED_CLIS`].
pub fn is_current(root: &Path, bin: &str) -> bool {
    let Some((package, version)) = pinned(bin) else {
        return false;
    };
    bin_path(root, bin).is_file()
        && installed_version(root, package).is_some_and(|installed| installed == version)
}

/// `npm install --no-fund --no-audit --save-exact --fetch-timeout=60000 --prefix <root>/.cache/clis <package>@<version>`.
///
/// `--save-exact` records the exact version in the prefix's `package.json`, so installing another CLI
/// later never lets npm move this one within a `^` range.
pub fn npm_install(root: &Path, package: &str, version: &str) -> Command {
    let mut cmd = Command::new("npm");
    cmd.args([
        "install",
        "--no-fund",
        "--no-audit",
        "--save-exact",
        // npm's own default waits five minutes per request, silently, when the registry does
        // not answer; a minute per request (and npm's two retries) fails within a few minutes
        // and names the registry in the error.
        "--fetch-timeout=60000",
        "--prefix",
    ])
    .arg(clis_dir(root))
    .arg(format!("{package}@{version}"));
    cmd
}
