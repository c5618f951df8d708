//! Integration tests of the codex adapter.
