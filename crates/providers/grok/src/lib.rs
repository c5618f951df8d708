//! Corral's adapter for the grok CLI (being written; see issue 4).
