//! Sessions for tests: [`session_in`] builds an `AiSession` with default permissions and nothing
//! optional set; [`session`] is the fixed one the provider crates build command lines from, its
//! prompt a sentinel that [`assert_prompt_not_in`] looks for in argv.

use std::ffi::OsString;
use std::path::Path;
use std::sync::Arc;

use corral_ports::{AiSession, CancellationToken, Permissions};

/// The prompt [`session`] carries; it must never reach argv.
pub const PROMPT: &str = "SENTINEL-PROMPT: write signals.json and stop";

/// A session with default permissions and nothing optional set: `prompt`, working in `cwd`, its
/// run directory (and so its signals file, `signals.json` there) `run_dir`.
pub fn session_in(prompt: &str, cwd: &Path, run_dir: &Path) -> AiSession {
    AiSession {
        prompt: Arc::from(prompt),
        cold_prompt: None,
        cwd: cwd.to_path_buf(),
        extra_roots: Vec::new(),
        model: None,
        effort: None,
        permissions: Permissions::default(),
        resume: None,
        cancel: CancellationToken::new(),
        signals_file: run_dir.join("signals.json"),
        output_dir: run_dir.to_path_buf(),
        max_budget_usd: None,
        max_turns: None,
        cold_fallback: true,
        task: None,
    }
}

/// A session with default permissions and nothing optional set, carrying [`PROMPT`], working in
/// `/work/repo`; its run directory `/runs/r1` (and so its signals file) lies outside the working
/// directory, as it does in real runs. Nothing is created on disk.
pub fn session() -> AiSession {
    session_in(PROMPT, Path::new("/work/repo"), Path::new("/runs/r1"))
}

/// Asserts that no argument holds [`PROMPT`]: the prompt body never enters argv.
pub fn assert_prompt_not_in(args: &[OsString]) {
    for arg in args {
        assert!(
            !arg.to_string_lossy().contains(PROMPT),
            "the prompt leaked into argv: {arg:?}"
        );
    }
}
