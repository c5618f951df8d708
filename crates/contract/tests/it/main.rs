//! Contract integration tests.
