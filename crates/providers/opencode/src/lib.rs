//! Corral's adapter for the opencode CLI (being written; see issue 4).
