//! The commented sprint file `corral sprint init` writes, fitted to the machine ([`example`]),
//! and a fixed one ([`EXAMPLE`]). Tests parse every variant, so an example never teaches a key
//! the parser refuses.

use corral_ports::ProviderId;

/// The tasks section both examples end with: the fixed one and the one `init` fits.
macro_rules! example_tasks {
    () => {
        r#"# The tasks. Each has an id (letters, digits, '.', '_', '-'), a title (the commit subject when
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
"#
    };
}

/// A fixed example sprint file (claude generating, codex judging, a cargo check), for tests and
/// the docs: `corral sprint init` writes [`example`], fitted to what is installed where it runs.
pub const EXAMPLE: &str = concat!(
    r#"# A Corral sprint: tasks run one by one, each through generator and evaluator rounds,
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

"#,
    example_tasks!()
);

/// What `corral sprint init` found on the machine, for [`example`]: the example it writes then
/// runs here as written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExampleChoice {
    /// A provider whose CLI is installed, for both roles; `None` when none is, and the example
    /// then names claude and says to install it.
    pub provider: Option<ProviderId>,
    /// The project's own test command; `None` when init cannot tell, and the example's check is
    /// a placeholder that says to replace it.
    pub check: Option<ProjectCheck>,
}

/// A project's test command as init recognises it from the files at the work tree's top.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProjectCheck {
    /// `Cargo.toml`.
    Cargo,
    /// `package.json` with a test script.
    Npm,
    /// `pyproject.toml`, `pytest.ini` or `setup.cfg`.
    Pytest,
    /// `go.mod`.
    Go,
}

impl ProjectCheck {
    /// The shell command that runs the project's tests.
    pub fn command(self) -> &'static str {
        match self {
            ProjectCheck::Cargo => "cargo test --workspace",
            ProjectCheck::Npm => "npm test",
            ProjectCheck::Pytest => "pytest",
            ProjectCheck::Go => "go test ./...",
        }
    }

    /// The file the command was recognised by, for init's message.
    pub fn recognised_by(self) -> &'static str {
        match self {
            ProjectCheck::Cargo => "Cargo.toml",
            ProjectCheck::Npm => "package.json's test script",
            ProjectCheck::Pytest => "the Python project files",
            ProjectCheck::Go => "go.mod",
        }
    }
}

/// The placeholder check of an example for a project whose tests init could not tell: it
/// passes on any tree, so the example runs, and its comment says to replace it.
pub const PLACEHOLDER_CHECK: &str = "true";

/// The commented example sprint file for `choice`: [`EXAMPLE`]'s keys, with the roles, the
/// check and the gate fitted to what is installed and what the project is.
pub fn example(choice: &ExampleChoice) -> String {
    let check = match choice.check {
        Some(check) => format!(
            "# The check: a shell command that exits 0 when the tree is good (here the project's\n\
             # tests). It runs before each task, on the untouched tree, and after each generator\n\
             # round.\n\
             check = \"{}\"\n",
            check.command()
        ),
        None => format!(
            "# The check: a shell command that exits 0 when the tree is good. It runs before each\n\
             # task, on the untouched tree, and after each generator round.\n\
             # REPLACE IT: corral could not tell this project's test command, and `{PLACEHOLDER_CHECK}`\n\
             # passes on any tree, so nothing the generator does would fail it.\n\
             check = \"{PLACEHOLDER_CHECK}\"\n"
        ),
    };
    let (generator, evaluator) = match choice.provider {
        Some(p) => (
            format!(
                "# The agent that changes the tree. provider is one of {};\n\
                 # here one whose CLI is installed. model (in the provider's spelling) and effort\n\
                 # (low, medium, high) are optional.\n\
                 [roles.generator]\nprovider = \"{p}\"\n# model = \"...\"\neffort = \"medium\"\n",
                provider_list()
            ),
            format!(
                "# The agent that judges each round, with the repository read-only: here the same\n\
                 # provider. Without this table the generator's agent judges; `enabled = false`\n\
                 # turns the evaluator off.\n\
                 [roles.evaluator]\nprovider = \"{p}\"\n# enabled = false\n"
            ),
        ),
        None => (
            format!(
                "# The agent that changes the tree. provider is one of {}.\n\
                 # INSTALL ONE: no provider's CLI was found on this machine (see `corral doctor`);\n\
                 # install claude or name the one you install here.\n\
                 [roles.generator]\nprovider = \"claude\"\n# model = \"...\"\neffort = \"medium\"\n",
                provider_list()
            ),
            "# The agent that judges each round, with the repository read-only. Without this table\n\
             # (as here) the generator's agent judges; `enabled = false` turns the evaluator off.\n\
             # [roles.evaluator]\n# provider = \"claude\"\n"
                .to_string(),
        ),
    };
    let gate = match choice.check {
        Some(ProjectCheck::Cargo) => {
            "[[gates]]\npath = \"docs/\"\ncommand = \"cargo doc --no-deps\"\ntimeout_ms = 300000\n"
        }
        // No command that builds the docs is known for these: the gate stays an example.
        Some(ProjectCheck::Npm | ProjectCheck::Pytest | ProjectCheck::Go) | None => {
            "# [[gates]]\n# path = \"docs/\"\n# command = \"make docs\"\n# timeout_ms = 300000\n"
        }
    };
    format!(
        r#"# A Corral sprint: tasks run one by one, each through generator and evaluator rounds,
# gated by checks, and committed on its own. Check this file with `corral sprint check`.
# The format is described in docs/sprint.md.

[sprint]
# The sprint's name: its state lives in .corral/sprints/<name>/.
name = "example"
# Where the sprint commits (default: corral/<name>).
# branch = "corral/example"
{check}# How long the check may take, in milliseconds (1000 to 86400000; default 600000).
check_timeout_ms = 900000
# A shell command run once, before the first task (optional).
# setup = "..."
# Generator and evaluator rounds per task (1 to 10; default 3).
max_rounds = 3
# Runs of a task, after a regression or a crash, before it counts as blocked (1 to 10;
# default 2).
max_attempts = 2

{generator}
{evaluator}
# A further check, run when a round's diff touches a path under `path` (relative to the work
# tree's top). timeout_ms defaults to check_timeout_ms.
{gate}
{tasks}"#,
        tasks = example_tasks!(),
    )
}

/// The providers by name, comma-separated: `claude, codex, copilot, opencode, grok, gemini`.
fn provider_list() -> String {
    let names: Vec<&str> = ProviderId::ALL.iter().map(|p| p.as_str()).collect();
    names.join(", ")
}
