//! The commented sprint file `corral sprint init` writes. A test parses it, so the example
//! never teaches a key the parser refuses.

/// The example sprint file.
pub const EXAMPLE: &str = r#"# A Corral sprint: tasks run one by one, each through generator and evaluator rounds,
# gated by checks, and committed on its own. Check this file with `corral sprint check`.
# The format is described in docs/sprint.md.

[sprint]
# The sprint's name: its state lives in .corral/sprints/<name>/.
name = "example"
# Where the sprint commits (default: corral/<name>).
# branch = "corral/example"
# The check: a shell command that exits 0 when the tree is good. It runs before each task,
# on the untouched tree, and after each generator round.
check = "cargo test --workspace"
# How long the check may take, in milliseconds (1000 to 86400000; default 600000).
check_timeout_ms = 900000
# A shell command run once, before the first task (optional).
# setup = "cargo fetch"
# Generator and evaluator rounds per task (1 to 10; default 3).
max_rounds = 3
# Runs of a task, after a regression or a crash, before it counts as blocked (1 to 10;
# default 2).
max_attempts = 2

# The agent that changes the tree. provider is one of claude, codex, copilot, opencode, grok,
# gemini; model (in the provider's spelling) and effort (low, medium, high) are optional.
[roles.generator]
provider = "claude"
# model = "claude-sonnet-4-5"
effort = "medium"

# The agent that judges each round, with the repository read-only. Without this table the
# generator's agent judges; `enabled = false` turns the evaluator off.
[roles.evaluator]
provider = "codex"
# enabled = false

# A further check, run when a round's diff touches a path under `path` (relative to the work
# tree's top). timeout_ms defaults to check_timeout_ms.
[[gates]]
path = "docs/"
command = "cargo doc --no-deps"
timeout_ms = 300000

# The tasks. Each has an id (letters, digits, '.', '_', '-'), a title (the commit subject when
# the agent proposes none), and either a prompt or a brief: a file with the instructions,
# relative to this file. depends_on lists the ids of tasks that must be done first; otherwise
# tasks run in the order written here.
[[tasks]]
id = "parse-config"
title = "Parse the configuration file"
prompt = """
Add a function that reads config.toml and returns the settings, with a test for a missing
file and one for an unknown key.
"""

[[tasks]]
id = "use-config"
title = "Use the configuration at start-up"
prompt = "Call the configuration parser at start-up and fail with a clear message on error."
depends_on = ["parse-config"]

# [[tasks]]
# id = "docs"
# title = "Document the configuration"
# brief = "briefs/docs.md"
"#;
