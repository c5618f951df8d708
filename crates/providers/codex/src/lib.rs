//! Corral's adapter for the codex CLI (being written; see issue 4).
