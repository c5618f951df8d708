//! A fake model API on 127.0.0.1 for driving the real AI coding CLIs in tests.
//!
//! [`FakeApi::start`] binds a random port and answers every agent turn with the next [`Step`] of a
//! [`Scenario`]: a text reply, a tool call, an HTTP error, a hang, a stalled or slow stream. Which
//! requests are agent turns is decided by what each request is, never by when it arrives: a CLI's
//! side requests (titles, topic checks, summaries, quota probes, warm-ups, token counting) may come
//! before, after or alongside its turn, and they are answered without consuming a step; anything
//! else gets a harmless 404. Every request is recorded as a [`RecordedRequest`]
//! ([`FakeApi::requests`], and optionally a JSONL file), the shape of
//! `/work/shared/cli-behaviour/samples/*/*.requests.jsonl`.
//!
//! Scenarios and steps say *what* to answer, never how a wire format spells it: the wire format is
//! chosen by the request path, and each API lives in its own module that turns a step into a
//! `wire::Reply` plan the server then carries out:
//!
//! | path | [`Endpoint`] | module | spoken by |
//! |---|---|---|---|
//! | `POST /v1/messages` | `AnthropicMessages` / `AnthropicMessagesSide` | `anthropic.rs` | Claude Code (Copilot too with `COPILOT_PROVIDER_TYPE=anthropic`, per the behaviour README) |
//! | `POST /v1/messages/count_tokens` | `AnthropicCountTokens` | `anthropic.rs` | Claude Code |
//! | `POST /v1/responses` | `OpenAiResponses` / `OpenAiResponsesSide` | `responses.rs` | Codex |
//! | `POST /v1/chat/completions` | `ChatCompletions` / `ChatCompletionsSide` | `chat.rs` | OpenCode (streaming), Grok CLI (non-streaming), Copilot (streaming) |
//! | `POST /v1beta/models/<model>:generateContent`, `…:streamGenerateContent` | `GeminiGenerate` / `GeminiGenerateSide` | `gemini.rs` | Gemini CLI |
//!
//! The side-request rule, the same on every wire format: a request that offers **no tools** is a
//! side request (OpenCode's title generation, Claude Code's title, topic and quota requests), and so
//! is a Responses warm-up (`"generate": false`). It is answered with a short text
//! ([`SIDE_REQUEST_TEXT`]) and consumes no step ([`Endpoint::AnthropicMessagesSide`],
//! [`Endpoint::OpenAiResponsesSide`], [`Endpoint::ChatCompletionsSide`]). Every agent turn of the
//! five CLIs offers tools (their recorded requests in `/work/shared/cli-behaviour/samples/`: Claude
//! Code 24, Codex 9, OpenCode 10, Grok CLI 7, Copilot CLI 17), so a side request arriving first,
//! or alongside the turn on a busy machine, can never take the turn's step.
//!
//! Each CLI writes files with its own tool and argument names; [`Step::write_signals_for`] (and
//! [`Step::write_named_for`]) pick them by the CLI's binary name, including Codex, which has no
//! file-writing tool and gets a shell here-document through `exec_command`
//! ([`Step::ShellWriteToNamedPath`]).
//!
//! A sprint (`corral sprint run`) has two roles and several sessions: [`Scenario::by_role`] and
//! [`Scenario::with_round`] give the generator and the evaluator their own scripts, told apart by
//! the spawn directory a path in the request lies in (`…/rounds/<N>/<role>/signals.json`, see
//! [`SpawnKey`]); each request records its spawn ([`RecordedRequest::spawn`]) and the earlier
//! spawns its conversation re-sends ([`RecordedRequest::earlier_spawns`]), so a test can show a
//! resumed generator sending round 1's history in round 2.
//!
//! The server runs on its own thread with its own single-threaded tokio runtime, so it works from plain
//! `#[test]`s and from async tests alike. Dropping the [`FakeApi`] stops it and drops every open
//! connection, including hung and stalled ones.

mod anthropic;
mod chat;
mod gemini;
mod openai;
mod responses;
mod server;
mod wire;

use std::collections::BTreeMap;
use std::io;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tokio::sync::oneshot;

/// Input tokens reported by every successful reply (cache figures are always 0).
pub const USAGE_INPUT_TOKENS: u64 = 12;

/// Output tokens reported by every successful reply.
pub const USAGE_OUTPUT_TOKENS: u64 = 7;

/// The text answering a side request (one offering no tools, e.g. OpenCode's title generation, or a
/// warm-up), whatever the wire format. Such a request consumes no step.
pub const SIDE_REQUEST_TEXT: &str = "Fake title";

/// The words opening Corral's preflight prompt (`corral_compose::PREFLIGHT_PROMPT_OPENING`): an
/// agent turn whose request holds them is answered [`PREFLIGHT_REPLY`] by the fake itself, as a
/// model would, without taking a step of the script, so that a sprint's preflight leaves a test's
/// scripted rounds alone. The models and key rules still apply to it first.
pub const PREFLIGHT_PROMPT_OPENING: &str = "Corral preflight check";

/// The directory Corral keeps a preflight request's record in (`<project>/.corral/preflight/`):
/// a request naming a path in it (the pointer to the prompt file of a CLI that reads its prompt
/// from a file) is a preflight request too.
pub const PREFLIGHT_DIR: &str = "/.corral/preflight/";

/// What the fake answers a preflight request.
pub const PREFLIGHT_REPLY: &str = "OK";

/// The line ending the here-document of [`Step::ShellWriteToNamedPath`] (a digit is appended while
/// the content holds it).
pub const HEREDOC_DELIMITER: &str = "FAKE_API_EOF";

/// One scripted answer to one request to a model endpoint.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// A complete assistant text reply (stop reason "end turn").
    Text(String),
    /// A tool call (stop reason "tool use"), e.g. `Write` with `{"file_path": ..., "content": ...}`.
    /// The CLI runs the tool and posts its result in the next request, which gets the next step.
    ToolUse {
        /// The tool's name as the CLI offered it (`Write`, `Bash`, ...).
        name: String,
        /// The tool's arguments.
        input: serde_json::Value,
    },
    /// An HTTP error status instead of a reply.
    HttpError {
        /// The status code (429, 500, 529, 401, ...).
        status: u16,
        /// A `retry-after` header, in seconds.
        retry_after_secs: Option<u64>,
        /// The exact response body; `None` for the API's usual error JSON for `status`.
        body: Option<String>,
    },
    /// Accept the request and never answer, not even the headers, until the server shuts down.
    HangBeforeHeaders,
    /// Send the headers and the first event of a streamed reply, then nothing until shutdown.
    /// A non-streaming request gets the headers and no body.
    StallMidStream,
    /// A text reply streamed one word at a time, waiting `delay_ms` before each word.
    /// A non-streaming request gets the whole reply after the total delay.
    SlowChunks {
        /// The full text.
        text: String,
        /// The pause before each chunk, in milliseconds.
        delay_ms: u64,
    },
    /// A file-writing tool call whose path is read from the request: the first absolute path in
    /// the last user text that ends with `file_name`. Corral's contract section names the
    /// absolute path of `signals.json` this way, so a scenario need not know the run directory.
    ///
    /// The arguments take the shape of the CLI's tool, chosen by its name (see [`write_tool_input`]):
    /// `Write` (Claude Code) `{"file_path", "content"}`, `write` (OpenCode) `{"filePath", "content"}`,
    /// `create_file` (Grok CLI) `{"path", "content"}`, `create` (Copilot CLI) `{"path", "file_text"}`;
    /// any other name gets Claude Code's shape.
    WriteToNamedPath {
        /// The CLI's file-writing tool (`Write`, `write`, `create_file`, `create`).
        tool: String,
        /// The file name the path must end with (`signals.json`).
        file_name: String,
        /// What to write.
        content: String,
    },
    /// Like [`Step::WriteToNamedPath`], for a CLI without a file-writing tool (Codex): a call of its
    /// shell tool running `cat > 'PATH' <<'FAKE_API_EOF'` … `FAKE_API_EOF` (see [`shell_write_command`]).
    ///
    /// The arguments take the shape of the shell tool, chosen by its name (see
    /// [`shell_tool_input`]): `exec_command` (Codex 0.171) `{"cmd"}`, `shell` (older Codex)
    /// `{"command": ["bash", "-lc", cmd]}`, anything else (`bash`, `Bash`) `{"command", "description"}`.
    ShellWriteToNamedPath {
        /// The CLI's shell tool (`exec_command` for Codex).
        tool: String,
        /// The file name the path must end with (`signals.json`).
        file_name: String,
        /// What to write. A here-document always ends with a newline: one is added when `content`
        /// does not end with one.
        content: String,
    },
    /// The account's usage window is spent until `resets_at_epoch_s` (a long rate limit), said
    /// the way each API says it: Anthropic answers 429 with the subscription's
    /// `anthropic-ratelimit-unified-status: rejected` and `anthropic-ratelimit-unified-reset`
    /// headers (Claude Code with `CLAUDE_CODE_RETRY_WATCHDOG=1` waits for that reset in its own
    /// process; with an OAuth token it prints a rejected `rate_limit_event`); the Responses API
    /// answers 429 with Codex's `usage_limit_reached` body (`resets_at`, `resets_in_seconds`);
    /// Chat Completions and Gemini answer 429 with `retry-after` until the reset.
    UsageLimit {
        /// When the window resets, in seconds since the Unix epoch.
        resets_at_epoch_s: u64,
    },
    /// Start a streamed reply, then send the API's in-stream error and end the stream:
    /// Anthropic's `error` event, the Responses API's `response.failed`, a Chat Completions
    /// `data: {"error": …}` chunk. A non-streaming request gets an HTTP error instead (529
    /// overloaded on Anthropic, 500 on the OpenAI APIs).
    ErrorMidStream {
        /// The error message.
        message: String,
    },
}

impl Step {
    /// [`Step::Text`].
    pub fn text(text: impl Into<String>) -> Self {
        Self::Text(text.into())
    }

    /// [`Step::ToolUse`] of the tool `name`.
    pub fn tool_use(name: impl Into<String>, input: serde_json::Value) -> Self {
        Self::ToolUse {
            name: name.into(),
            input,
        }
    }

    /// A `Write` tool call (Claude Code's file-writing tool) creating `file_path` with `content`.
    pub fn write_file(file_path: &Path, content: impl Into<String>) -> Self {
        Self::tool_use(
            "Write",
            serde_json::json!({
                "file_path": file_path.to_string_lossy(),
                "content": content.into(),
            }),
        )
    }

    /// [`Step::HttpError`] with the API's usual body and no `retry-after`.
    pub fn http_error(status: u16) -> Self {
        Self::HttpError {
            status,
            retry_after_secs: None,
            body: None,
        }
    }

    /// A 429 with `retry-after: <retry_after_secs>`.
    pub fn rate_limited(retry_after_secs: u64) -> Self {
        Self::HttpError {
            status: 429,
            retry_after_secs: Some(retry_after_secs),
            body: None,
        }
    }

    /// [`Step::UsageLimit`] until `ahead` from now.
    pub fn usage_limit_for(ahead: Duration) -> Self {
        let reset = std::time::SystemTime::now() + ahead;
        Self::UsageLimit {
            resets_at_epoch_s: reset
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
        }
    }

    /// The seconds from now until `resets_at_epoch_s` (at least 1), for a `retry-after`.
    pub(crate) fn seconds_until(resets_at_epoch_s: u64) -> u64 {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        resets_at_epoch_s.saturating_sub(now).max(1)
    }

    /// The short name of the step's kind, as recorded in [`RecordedRequest::step`].
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Text(_) => "text",
            Self::ToolUse { .. } => "tool_use",
            Self::HttpError { .. } => "http_error",
            Self::UsageLimit { .. } => "usage_limit",
            Self::HangBeforeHeaders => "hang_before_headers",
            Self::StallMidStream => "stall_mid_stream",
            Self::SlowChunks { .. } => "slow_chunks",
            Self::ErrorMidStream { .. } => "error_mid_stream",
            Self::WriteToNamedPath { .. } => "write_to_named_path",
            Self::ShellWriteToNamedPath { .. } => "shell_write_to_named_path",
        }
    }

    /// A `Write` call creating the `signals.json` the prompt names, with `content`.
    pub fn write_signals(content: impl Into<String>) -> Self {
        Self::write_signals_with("Write", content)
    }

    /// A call of the file-writing tool `tool` creating the `signals.json` the prompt names, with
    /// `content`: `write` for OpenCode, `create_file` for Grok CLI, `create` for Copilot CLI (see
    /// [`Step::WriteToNamedPath`] for the argument shapes).
    pub fn write_signals_with(tool: impl Into<String>, content: impl Into<String>) -> Self {
        Self::WriteToNamedPath {
            tool: tool.into(),
            file_name: "signals.json".into(),
            content: content.into(),
        }
    }

    /// A call of the shell tool `tool` writing the `signals.json` the prompt names with a
    /// here-document: `exec_command` for Codex (see [`Step::ShellWriteToNamedPath`]).
    pub fn shell_write_signals(tool: impl Into<String>, content: impl Into<String>) -> Self {
        Self::ShellWriteToNamedPath {
            tool: tool.into(),
            file_name: "signals.json".into(),
            content: content.into(),
        }
    }

    /// The step writing `content` to the file `file_name` the prompt names, the way the CLI `cli`
    /// (its binary name, as in [`crate::PINNED_CLIS`]) writes files: `claude` → `Write`, `opencode`
    /// → `write`, `grok` → `create_file`, `copilot` → `create`, `gemini` → `write_file` (each a
    /// [`Step::WriteToNamedPath`]),
    /// `codex` → its shell tool `exec_command` ([`Step::ShellWriteToNamedPath`]). `None` for any
    /// other name.
    pub fn write_named_for(
        cli: &str,
        file_name: impl Into<String>,
        content: impl Into<String>,
    ) -> Option<Self> {
        let (tool, shell) = match cli {
            "claude" => ("Write", false),
            "opencode" => ("write", false),
            "grok" => ("create_file", false),
            "copilot" => ("create", false),
            "gemini" => ("write_file", false),
            "codex" => ("exec_command", true),
            _ => return None,
        };
        let (tool, file_name, content) = (tool.to_owned(), file_name.into(), content.into());
        Some(if shell {
            Self::ShellWriteToNamedPath {
                tool,
                file_name,
                content,
            }
        } else {
            Self::WriteToNamedPath {
                tool,
                file_name,
                content,
            }
        })
    }

    /// [`Step::write_named_for`] of `signals.json`.
    pub fn write_signals_for(cli: &str, content: impl Into<String>) -> Option<Self> {
        Self::write_named_for(cli, "signals.json", content)
    }

    /// Turns a step that depends on the request into a plain one.
    /// [`Step::resolve`] against the first of `texts` that resolves the step.
    pub(crate) fn resolve_from<'a>(self, texts: impl IntoIterator<Item = Option<&'a str>>) -> Step {
        let texts: Vec<&str> = texts.into_iter().flatten().collect();
        for text in &texts {
            let resolved = self.clone().resolve(Some(text));
            if resolved.kind() != "text" || self.kind() == "text" {
                return resolved;
            }
        }
        self.resolve(texts.first().copied())
    }

    pub(crate) fn resolve(self, user_text: Option<&str>) -> Step {
        let no_path = |file_name: &str| {
            Self::Text(format!(
                "fake_api: the prompt names no absolute path ending in {file_name}"
            ))
        };
        match self {
            Self::WriteToNamedPath {
                tool,
                file_name,
                content,
            } => match user_text.and_then(|t| named_path(t, &file_name)) {
                Some(path) => {
                    let input = write_tool_input(&tool, &path, &content);
                    Self::tool_use(tool, input)
                }
                None => no_path(&file_name),
            },
            Self::ShellWriteToNamedPath {
                tool,
                file_name,
                content,
            } => match user_text.and_then(|t| named_path(t, &file_name)) {
                Some(path) => {
                    let input = shell_tool_input(&tool, &shell_write_command(&path, &content));
                    Self::tool_use(tool, input)
                }
                None => no_path(&file_name),
            },
            other @ (Self::Text(_)
            | Self::ToolUse { .. }
            | Self::HttpError { .. }
            | Self::UsageLimit { .. }
            | Self::HangBeforeHeaders
            | Self::StallMidStream
            | Self::SlowChunks { .. }
            | Self::ErrorMidStream { .. }) => other,
        }
    }
}

/// The arguments of a call of the file-writing tool `tool` creating `path` with `content`, in the
/// shape that tool takes: `write` (OpenCode) `{"filePath", "content"}`, `create_file` (Grok CLI)
/// `{"path", "content"}`, `create` (Copilot CLI) `{"path", "file_text"}`, anything else (`Write`,
/// Claude Code) `{"file_path", "content"}`.
pub fn write_tool_input(tool: &str, path: &str, content: &str) -> serde_json::Value {
    match tool {
        "write" => serde_json::json!({ "filePath": path, "content": content }),
        "create_file" => serde_json::json!({ "path": path, "content": content }),
        "create" => serde_json::json!({ "path": path, "file_text": content }),
        _ => serde_json::json!({ "file_path": path, "content": content }),
    }
}

/// The arguments of a call of the shell tool `tool` running `command`, in the shape that tool
/// takes: `exec_command` (Codex 0.171) `{"cmd"}`, `shell` (older Codex) `{"command": ["bash", "-lc",
/// command]}`, anything else (`bash`: OpenCode, Grok CLI, Copilot CLI; `Bash`: Claude Code)
/// `{"command", "description"}`.
pub fn shell_tool_input(tool: &str, command: &str) -> serde_json::Value {
    match tool {
        "exec_command" => serde_json::json!({ "cmd": command }),
        "shell" => serde_json::json!({ "command": ["bash", "-lc", command] }),
        _ => serde_json::json!({ "command": command, "description": "Write a file" }),
    }
}

/// The shell command writing `content` to `path`: `cat > 'PATH' <<'FAKE_API_EOF'`, the content (a
/// newline added unless it ends with one), `FAKE_API_EOF`. The path is single-quoted for the shell;
/// the quoted delimiter keeps the content literal; a digit is appended to the delimiter while the
/// content holds it.
pub fn shell_write_command(path: &str, content: &str) -> String {
    let mut delimiter = HEREDOC_DELIMITER.to_owned();
    while content.contains(&delimiter) {
        delimiter.push('0');
    }
    let quoted_path = format!("'{}'", path.replace('\'', "'\\''"));
    let newline = if content.ends_with('\n') || content.is_empty() {
        ""
    } else {
        "\n"
    };
    format!("cat > {quoted_path} <<'{delimiter}'\n{content}{newline}{delimiter}")
}

/// Exactly `bytes` bytes of deterministic ASCII text in numbered lines of 64 bytes (63 characters
/// and a newline; the last line may be shorter), for replies and file contents of a given size.
/// Any prefix names its own position, so a cut copy shows where it was cut.
pub fn bulk_text(bytes: usize) -> String {
    const LINE: usize = 64;
    let mut text = String::with_capacity(bytes + LINE);
    let mut n = 0u64;
    while text.len() < bytes {
        let head = format!("line {n:010} ");
        text.push_str(&head);
        text.extend(std::iter::repeat_n('x', LINE - 1 - head.len()));
        text.push('\n');
        n += 1;
    }
    text.truncate(bytes);
    text
}

/// The first absolute path in `text` that ends with `file_name`.
fn named_path(text: &str, file_name: &str) -> Option<String> {
    absolute_paths_ending(text, file_name)
        .next()
        .map(str::to_owned)
}

/// Every absolute path in `text` that ends with `file_name`, in order.
fn absolute_paths_ending<'a>(text: &'a str, file_name: &'a str) -> impl Iterator<Item = &'a str> {
    let stop =
        |c: char| c.is_whitespace() || matches!(c, '`' | '"' | '\'' | '(' | ')' | '<' | '>' | ',');
    text.match_indices(file_name).filter_map(move |(at, _)| {
        let end = at + file_name.len();
        let start = text[..end].rfind(stop).map_or(0, |i| i + 1);
        let candidate = &text[start..end];
        candidate.starts_with('/').then_some(candidate)
    })
}

/// What the fake API answers, one step per request to a model endpoint, in order.
///
/// When the script is used up, every further request gets `then` (for instance "429 forever"); without
/// it, an exhausted scenario answers HTTP 400 `fake_api: scenario exhausted`, which CLIs do not retry,
/// so a test that scripted too few steps fails fast.
///
/// A sprint's spawns get their own scripts ([`Scenario::by_role`], [`Scenario::with_round`]): a
/// request whose text names a path in a sprint spawn's directory ([`SpawnKey::find`]) is answered from
/// the most specific [`SpawnScript`] matching it that has steps left (a task's round before a
/// task before a whole role; among equals, the first added), and only when none has, from `steps`
/// and `then`. Requests naming no spawn take `steps` and `then` alone.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Scenario {
    /// The scripted steps, consumed one per model request.
    pub steps: Vec<Step>,
    /// The step repeated for every request after the script.
    pub then: Option<Step>,
    /// The scripts of a sprint's spawns, by role and optionally task and round.
    pub spawns: Vec<SpawnScript>,
    /// The models the API serves; `None`: any. An agent turn naming another model gets the
    /// API's "model not found" (HTTP 404), whatever the script says, and consumes no step (side
    /// requests, on the CLI's own small model, are answered as usual).
    pub models: Option<Vec<String>>,
    /// The one API key the API accepts; `None`: any. A request with another key, or none, gets
    /// the API's authentication error (HTTP 401) and consumes no step.
    pub api_key: Option<String>,
}

impl Scenario {
    /// The `steps`, then the exhausted answer.
    pub fn script(steps: impl IntoIterator<Item = Step>) -> Self {
        Self {
            steps: steps.into_iter().collect(),
            ..Self::default()
        }
    }

    /// `step` for every request.
    pub fn forever(step: Step) -> Self {
        Self {
            then: Some(step),
            ..Self::default()
        }
    }

    /// A sprint's scenario: the generator's requests (whatever the task and round) take
    /// `generator` in order, the evaluator's take `evaluator`; each role's script is its own, so
    /// the order in which the roles ask does not matter.
    pub fn by_role(
        generator: impl IntoIterator<Item = Step>,
        evaluator: impl IntoIterator<Item = Step>,
    ) -> Self {
        Self::default()
            .with_role(Role::Generator, generator)
            .with_role(Role::Evaluator, evaluator)
    }

    /// Adds a script for every spawn of `role`.
    #[must_use]
    pub fn with_role(mut self, role: Role, steps: impl IntoIterator<Item = Step>) -> Self {
        self.spawns.push(SpawnScript {
            role,
            task: None,
            round: None,
            steps: steps.into_iter().collect(),
        });
        self
    }

    /// Adds a script for the spawn of `role` in round `round` of task `task` (used before any
    /// role-wide script). A crash-resumed spawn of the same round asks the same script again.
    #[must_use]
    pub fn with_round(
        mut self,
        role: Role,
        task: impl Into<String>,
        round: u32,
        steps: impl IntoIterator<Item = Step>,
    ) -> Self {
        self.spawns.push(SpawnScript {
            role,
            task: Some(task.into()),
            round: Some(round),
            steps: steps.into_iter().collect(),
        });
        self
    }

    /// Serves only `models` (see [`Scenario::models`]).
    #[must_use]
    pub fn with_models(mut self, models: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.models = Some(models.into_iter().map(Into::into).collect());
        self
    }

    /// Accepts only the API key `key` (see [`Scenario::api_key`]): a login the API refuses.
    #[must_use]
    pub fn with_api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(key.into());
        self
    }

    /// Sets the step repeated after every script is used up.
    #[must_use]
    pub fn then(mut self, step: Step) -> Self {
        self.then = Some(step);
        self
    }
}

/// The role of a sprint spawn (the directory name in its path).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// The spawn that changes the repository (`…/generator/signals.json`).
    Generator,
    /// The spawn that reviews the change (`…/evaluator/signals.json`).
    Evaluator,
}

impl Role {
    /// The directory name: `generator` or `evaluator`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Generator => "generator",
            Self::Evaluator => "evaluator",
        }
    }

    fn parse(name: &str) -> Option<Self> {
        match name {
            "generator" => Some(Self::Generator),
            "evaluator" => Some(Self::Evaluator),
            _ => None,
        }
    }
}

/// Which spawn of a `corral sprint` a request belongs to, read from a path in that spawn's
/// directory the request names, `…/implement/<task>/rounds/<round>/<role>/` (the sprint's
/// per-spawn layout, `crates/sprint/src/layout.rs`): the `signals.json` of its contract section,
/// or the prompt file a pointer-file CLI reads.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SpawnKey {
    /// Generator or evaluator.
    pub role: Role,
    /// The task's id.
    pub task: String,
    /// The round, from 1.
    pub round: u32,
}

impl SpawnKey {
    /// A key.
    pub fn new(role: Role, task: impl Into<String>, round: u32) -> Self {
        Self {
            role,
            task: task.into(),
            round,
        }
    }

    /// Every spawn a path in `text` lies in (`…/implement/<task>/rounds/<round>/<role>/<file>`:
    /// the `signals.json` a contract section names, or the `prompt.md` a CLI given its prompt
    /// through a pointer file is told to read), in order of appearance, each once.
    pub fn find(text: &str) -> Vec<SpawnKey> {
        const ROUNDS: &str = "/rounds/";
        let task_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
        let mut keys: Vec<SpawnKey> = Vec::new();
        for (at, _) in text.match_indices(ROUNDS) {
            let before = &text[..at];
            let Some(slash) = before.rfind('/') else {
                continue;
            };
            let task = &before[slash + 1..];
            if task.is_empty() || !task.chars().all(task_char) {
                continue;
            }
            if !before[..slash].ends_with("/implement") {
                continue;
            }
            let mut parts = text[at + ROUNDS.len()..].splitn(3, '/');
            let (Some(round), Some(role), Some(_file)) = (parts.next(), parts.next(), parts.next())
            else {
                continue;
            };
            let (Some(role), true) = (Role::parse(role), round.chars().all(|c| c.is_ascii_digit()))
            else {
                continue;
            };
            let Ok(round) = round.parse::<u32>() else {
                continue;
            };
            let key = SpawnKey::new(role, task, round);
            if !keys.contains(&key) {
                keys.push(key);
            }
        }
        keys
    }
}

/// The steps for the requests of some spawns of a sprint: those of `role`, and when given, of task
/// `task` and round `round` only.
#[derive(Debug, Clone, PartialEq)]
pub struct SpawnScript {
    /// The role whose requests this script answers.
    pub role: Role,
    /// Only this task's spawns, when set.
    pub task: Option<String>,
    /// Only this round's spawns, when set.
    pub round: Option<u32>,
    /// The steps, consumed one per model request of a matching spawn.
    pub steps: Vec<Step>,
}

impl SpawnScript {
    /// Whether this script answers the spawn `key`.
    pub fn matches(&self, key: &SpawnKey) -> bool {
        self.role == key.role
            && self.task.as_ref().is_none_or(|t| *t == key.task)
            && self.round.is_none_or(|r| r == key.round)
    }

    /// How specific the script is: 2 for a task's round, 1 for a task, 0 for a whole role.
    pub(crate) fn specificity(&self) -> u8 {
        u8::from(self.task.is_some()) + u8::from(self.round.is_some())
    }
}

/// Which endpoint a request went to (and so which wire format answered it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Endpoint {
    /// `POST /v1/messages` (any query, e.g. `?beta=true`) offering tools (an agent turn): consumes
    /// a step.
    AnthropicMessages,
    /// `POST /v1/messages` offering no tools (a side request: a title, a topic check, a quota
    /// probe, a summary): answered with [`SIDE_REQUEST_TEXT`] without consuming a step.
    AnthropicMessagesSide,
    /// `POST /v1/messages/count_tokens`: answered without consuming a step.
    AnthropicCountTokens,
    /// `POST /v1/responses` (the OpenAI Responses API) offering tools (an agent turn): consumes a
    /// step.
    #[serde(rename = "openai_responses")]
    OpenAiResponses,
    /// `POST /v1/responses` offering no tools, or a warm-up (`"generate": false`): answered with
    /// [`SIDE_REQUEST_TEXT`] without consuming a step.
    #[serde(rename = "openai_responses_side")]
    OpenAiResponsesSide,
    /// `POST /v1/chat/completions` offering tools (an agent turn): consumes a step.
    ChatCompletions,
    /// `POST /v1/chat/completions` offering no tools (a side request such as OpenCode's title
    /// generation): answered with [`SIDE_REQUEST_TEXT`] without consuming a step.
    ChatCompletionsSide,
    /// `POST /v1beta/models/<model>:generateContent` or `:streamGenerateContent` (the Gemini API)
    /// offering tools (an agent turn): consumes a step.
    GeminiGenerate,
    /// The same offering no tools (Gemini CLI's routing classification, next-speaker and loop
    /// checks): answered with a JSON text satisfying each of their schemas without consuming a
    /// step.
    GeminiGenerateSide,
    /// Anything else: answered 404 without consuming a step.
    Unknown,
}

/// One request the fake API received, and what it answered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordedRequest {
    /// Arrival order, from 1.
    pub seq: u64,
    /// Milliseconds from the server's start to the request's arrival (headers and body read).
    pub at_ms: u64,
    /// The HTTP method.
    pub method: String,
    /// The path and query as sent, e.g. `/v1/messages?beta=true`.
    pub path: String,
    /// The endpoint the path maps to.
    pub endpoint: Endpoint,
    /// The requested model, when the body names one.
    pub model: Option<String>,
    /// Whether the body asked for a streamed reply.
    pub stream: bool,
    /// The number of messages in the conversation sent.
    pub n_msgs: usize,
    /// Whether the conversation sent already holds an earlier assistant turn.
    pub history: bool,
    /// The names of the tools offered, in order.
    pub tools: Vec<String>,
    /// The last plain user text in the conversation (system reminders and tool results skipped).
    pub last_user_text: Option<String>,
    /// The kind of step that answered ([`Step::kind`]), `"exhausted"` when the scenario had none
    /// left, `None` for side requests that consume no step.
    pub step: Option<String>,
    /// The HTTP status answered; `None` while (or if never) the headers were sent.
    pub status: Option<u16>,
    /// How the request authenticated: `"x-api-key"`, `"bearer"` or `None`. Never the key itself.
    pub auth: Option<String>,
    /// Headers of interest (client identity, betas, retry bookkeeping, encodings), lower-case names.
    pub headers: BTreeMap<String, String>,
    /// The sprint spawn the request belongs to: the last spawn the last user text names a path of
    /// (the latest prompt), else the last one the whole request names ([`SpawnKey::find`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spawn: Option<SpawnKey>,
    /// The other sprint spawns the conversation names, in order: a resumed generator re-sends its
    /// history, so round 2's requests name round 1's spawn here.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub earlier_spawns: Vec<SpawnKey>,
    /// Every string of the request's body, one a line: what a test asks of the whole
    /// conversation sent (a resumed request still carries the task?), as a real model reads it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub whole_text: String,
}

impl RecordedRequest {
    /// The CLI's session id, from the header it sends one in (`x-claude-code-session-id` for
    /// Claude Code; `session-id`, `x-session-id` or `thread-id` for others), when it sends one.
    pub fn session_id(&self) -> Option<&str> {
        [
            "x-claude-code-session-id",
            "session-id",
            "x-session-id",
            "thread-id",
        ]
        .iter()
        .find_map(|name| self.headers.get(*name))
        .map(String::as_str)
    }
}

/// A running fake model API. Dropping it shuts the server down and closes every connection.
#[derive(Debug)]
pub struct FakeApi {
    addr: SocketAddr,
    state: Arc<server::State>,
    shutdown: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl FakeApi {
    /// Starts a server on `127.0.0.1:<random port>` answering with `scenario`.
    ///
    /// # Errors
    /// When the port can't be bound or the server's thread or runtime can't be started.
    pub fn start(scenario: Scenario) -> io::Result<Self> {
        server::start(scenario, None)
    }

    /// Like [`FakeApi::start`], and also appends each request to the JSONL file `log` (created if
    /// missing) once its status is known, or on arrival for a hung request.
    ///
    /// # Errors
    /// As [`FakeApi::start`], and when `log` can't be opened for appending.
    pub fn start_with_log(scenario: Scenario, log: &Path) -> io::Result<Self> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)?;
        server::start(scenario, Some(file))
    }

    /// The socket address the server listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:<port>`, without a trailing slash or `/v1` (what `ANTHROPIC_BASE_URL` wants).
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// `http://127.0.0.1:<port>/v1`: the base URL the OpenAI-style clients want (Codex's
    /// `base_url`, OpenCode's `baseURL`, `GROK_BASE_URL`, `COPILOT_PROVIDER_BASE_URL`).
    pub fn url_v1(&self) -> String {
        format!("{}/v1", self.url())
    }

    /// Every request received so far, in arrival order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.state.requests()
    }

    /// The requests to model endpoints (those that consume steps), in arrival order.
    pub fn model_requests(&self) -> Vec<RecordedRequest> {
        self.requests()
            .into_iter()
            .filter(|r| endpoint_consumes_step(r.endpoint))
            .collect()
    }

    /// The model requests of the sprint spawn `key`, in arrival order.
    pub fn spawn_requests(&self, key: &SpawnKey) -> Vec<RecordedRequest> {
        self.model_requests()
            .into_iter()
            .filter(|r| r.spawn.as_ref() == Some(key))
            .collect()
    }

    /// How many scripted steps are still unused, spawn scripts included (the repeated `then` step
    /// is not counted).
    pub fn steps_left(&self) -> usize {
        self.state.steps_left()
    }

    /// Polls until at least `n` requests arrived; false when `timeout` passed first.
    pub fn wait_for_requests(&self, n: usize, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            if self.state.request_count() >= n {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for FakeApi {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Whether a request to `endpoint` consumes a scenario step.
fn endpoint_consumes_step(endpoint: Endpoint) -> bool {
    match endpoint {
        Endpoint::AnthropicMessages
        | Endpoint::OpenAiResponses
        | Endpoint::ChatCompletions
        | Endpoint::GeminiGenerate => true,
        Endpoint::AnthropicMessagesSide
        | Endpoint::GeminiGenerateSide
        | Endpoint::AnthropicCountTokens
        | Endpoint::OpenAiResponsesSide
        | Endpoint::ChatCompletionsSide
        | Endpoint::Unknown => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_write_tool_gets_its_argument_shape() {
        let text = Some("Create /w/signals.json please");
        let resolve = |cli: &str| Step::write_signals_for(cli, "{}").unwrap().resolve(text);
        assert_eq!(
            resolve("claude"),
            Step::tool_use(
                "Write",
                serde_json::json!({"file_path": "/w/signals.json", "content": "{}"})
            )
        );
        assert_eq!(
            resolve("opencode"),
            Step::tool_use(
                "write",
                serde_json::json!({"filePath": "/w/signals.json", "content": "{}"})
            )
        );
        assert_eq!(
            resolve("grok"),
            Step::tool_use(
                "create_file",
                serde_json::json!({"path": "/w/signals.json", "content": "{}"})
            )
        );
        assert_eq!(
            resolve("copilot"),
            Step::tool_use(
                "create",
                serde_json::json!({"path": "/w/signals.json", "file_text": "{}"})
            )
        );
        assert_eq!(
            resolve("codex"),
            Step::tool_use(
                "exec_command",
                serde_json::json!({"cmd": "cat > '/w/signals.json' <<'FAKE_API_EOF'\n{}\nFAKE_API_EOF"})
            )
        );
        assert_eq!(Step::write_signals_for("vim", "{}"), None);
        assert_eq!(
            Step::shell_write_signals("exec_command", "x").resolve(Some("no path here")),
            Step::text("fake_api: the prompt names no absolute path ending in signals.json")
        );
    }

    #[test]
    fn shell_tools_get_their_argument_shape() {
        assert_eq!(
            shell_tool_input("shell", "true"),
            serde_json::json!({"command": ["bash", "-lc", "true"]})
        );
        assert_eq!(
            shell_tool_input("bash", "true"),
            serde_json::json!({"command": "true", "description": "Write a file"})
        );
    }

    #[test]
    fn the_heredoc_keeps_content_literal_and_avoids_its_delimiter() {
        assert_eq!(
            shell_write_command("/a b/it's.json", "x\n"),
            "cat > '/a b/it'\\''s.json' <<'FAKE_API_EOF'\nx\nFAKE_API_EOF"
        );
        assert_eq!(
            shell_write_command("/f", ""),
            "cat > '/f' <<'FAKE_API_EOF'\nFAKE_API_EOF"
        );
        assert_eq!(
            shell_write_command("/f", "FAKE_API_EOF"),
            "cat > '/f' <<'FAKE_API_EOF0'\nFAKE_API_EOF\nFAKE_API_EOF0"
        );
    }

    #[test]
    fn bulk_text_has_the_exact_size_and_numbered_lines() {
        for bytes in [0, 1, 63, 64, 65, 1000, 4096] {
            assert_eq!(bulk_text(bytes).len(), bytes);
        }
        let text = bulk_text(128);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2);
        assert!(lines[1].starts_with("line 0000000001 x"), "{}", lines[1]);
        assert_eq!(lines[0].len(), 63);
    }

    #[test]
    fn the_named_path_is_found_in_prose_and_code() {
        let text = "Write it to `/tmp/run/x/signals.json` now. Not relative signals.json.";
        assert_eq!(
            named_path(text, "signals.json").as_deref(),
            Some("/tmp/run/x/signals.json")
        );
        assert_eq!(named_path("see signals.json", "signals.json"), None);
        let step = Step::write_signals("{}").resolve(Some("path: /a/b/signals.json"));
        assert_eq!(
            step,
            Step::tool_use(
                "Write",
                serde_json::json!({"file_path": "/a/b/signals.json", "content": "{}"})
            )
        );
    }
}
