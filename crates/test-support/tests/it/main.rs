//! corral-test-support's integration tests, one binary: the fake agent program (`fake_agent`), the
//! fake model API over raw HTTP (`fake_api` for the Anthropic Messages API, `fake_api_openai` for the
//! OpenAI Responses and Chat Completions APIs, `fake_api_sprint` for the
//! scripts of a sprint's generator and evaluator), and the real CLIs driven by the fake API, which proves
//! the fake speaks each wire format well enough: Claude Code (`claude_cli`, Anthropic Messages), Codex
//! (`codex_cli`, Responses), OpenCode (`opencode_cli`, Chat Completions streaming), Grok CLI
//! (`grok_cli`, Chat Completions non-streaming) and Copilot CLI (`copilot_cli`, Chat Completions
//! streaming). `cli_run` holds the runner the last four share. `recorded` checks the repair of the
//! lines the recorder of the providers' samples cut.

mod claude_cli;
mod cli_run;
mod codex_cli;
mod copilot_cli;
mod fake_agent;
mod fake_api;
mod fake_api_openai;
mod fake_api_sprint;
mod grok_cli;
mod opencode_cli;
mod ray_cluster;
mod recorded;
