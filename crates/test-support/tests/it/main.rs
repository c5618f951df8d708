//! corral-test-support's integration tests, one binary: the fake agent program (`fake_agent`), the
//! fake model API over raw HTTP (`fake_api`), and the real Claude Code CLI driven by the fake API
//! (`claude_cli`), which proves the fake speaks the Anthropic Messages API well enough.

mod claude_cli;
mod fake_agent;
mod fake_api;
