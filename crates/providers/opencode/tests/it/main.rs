//! Integration tests of the opencode adapter.
