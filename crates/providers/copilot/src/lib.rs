//! Corral's adapter for the copilot CLI (being written; see issue 4).
