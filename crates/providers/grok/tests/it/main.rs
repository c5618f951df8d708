//! Integration tests of the grok adapter.
