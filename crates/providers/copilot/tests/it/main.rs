//! Integration tests of the copilot adapter.
