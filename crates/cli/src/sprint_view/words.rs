//! The words the sprint's views share: usage in a few characters, a commit's short form.

use corral_ports::Usage;

use crate::render::tokens;

/// Tokens and cost in a few characters: `in 1.2k out 300 $0.0123`.
pub(crate) fn usage_text(u: &Usage) -> String {
    let cost = u.cost_usd.map(|c| format!(" ${c:.4}")).unwrap_or_default();
    format!("in {} out {}{cost}", tokens(u.input), tokens(u.output))
}

/// A commit as the summaries show it: its first 12 hex digits.
pub(super) fn short_commit(commit: &str) -> &str {
    commit.get(..12).unwrap_or(commit)
}
