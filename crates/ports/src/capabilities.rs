//! What each provider's CLI can and cannot do, declared once per provider. Every adapter must
//! return one (the method has no default), so a new provider does not compile without its row.

use serde::Serialize;

/// How the prompt reaches the CLI.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum PromptChannel {
    /// Piped to stdin, which is then closed.
    Stdin,
    /// Written to a file; the CLI gets a one-line pointer to it as an argument.
    PointerFile,
}

/// When the session id becomes known.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum SessionIdTiming {
    /// Minted by Corral and passed to the CLI, so it is on disk before the CLI starts.
    MintedUpFront,
    /// On the first line of output, before any model call.
    FirstLine,
    /// On the first event, which comes with the first model output.
    FirstEvent,
    /// Only at the end of the run.
    LastLine,
    /// Never: the CLI has no session id.
    Never,
}

/// What the CLI reports about cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum CostReporting {
    /// Tokens and a dollar cost.
    TokensAndUsd,
    /// Tokens only.
    TokensOnly,
    /// Premium requests (and tokens where given).
    PremiumRequests,
    /// Nothing.
    None,
}

/// A permission gate from [`crate::Permissions`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Gate {
    /// Closing file edits (`edit_files: false`).
    EditFiles,
    /// Closing shell commands (`run_shell: false`).
    RunShell,
    /// Closing web tools (`web_access: false`).
    WebAccess,
    /// Confining access to the working directory plus the extra roots.
    ExtraRoots,
}

/// One provider's row in the capability table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Capabilities {
    /// How the prompt is delivered.
    pub prompt: PromptChannel,
    /// When the session id is known.
    pub session_id: SessionIdTiming,
    /// Whether a headless run can resume a session.
    pub resume: bool,
    /// Whether reasoning effort is forwarded.
    pub effort: bool,
    /// What the CLI reports about cost.
    pub cost: CostReporting,
    /// Whether output streams while the CLI works (otherwise it arrives at the end).
    pub streaming: bool,
    /// Whether the CLI ends every run it completes with its terminal event (Claude's `result`,
    /// Codex's `turn.completed` or `turn.failed`, …). When it does, an exit code 0 without the
    /// terminal event is not a success but a CLI failure: the event was lost, or the CLI stopped
    /// before it was done.
    pub always_terminal_event: bool,
    /// Gates the CLI enforces when closed.
    pub enforced_gates: &'static [Gate],
    /// Gates it cannot enforce, with what is over-granted instead.
    pub over_grants: &'static [(Gate, &'static str)],
}
