//! The signal kinds and their payloads: what one entry of `signals.json`'s `signals` list may be.
//!
//! Each kind is a struct with serde's `deny_unknown_fields` and garde rules, wrapped by the
//! internally tagged [`Signal`] enum (`"type": "<kind>"`, fields in camelCase). The types describe
//! shapes; the guarantees (non-empty texts, valid timestamps, the evaluation rules) hold for the
//! signals inside a [`crate::ValidatedSignals`], which have passed [`garde::Validate`].
//!
//! [`SignalKind`] is the field-less twin of [`Signal`], used by contracts and in messages. The
//! per-kind prose (description, field table, example) that the prompt renderer needs lives here
//! too, next to the types it describes; a unit test keeps the field tables in step with the
//! generated JSON Schema.

use std::fmt;

use garde::Validate;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::evaluation::{Criterion, Dimension, Evaluation, EvaluationStatus, FLOOR_DIMENSIONS};
use crate::life::{
    self, AgentsMdProposal, IdeatedTicket, IdeatedTickets, PlannedTask, RefinedTicket, SetupScript,
    TaskPlan, VerifyScript,
};
use crate::rules::{max_chars, non_blank, relative_path_prefix, single_line};
use crate::timestamp::Timestamp;

/// The most characters a commit subject may have.
pub const COMMIT_SUBJECT_MAX_CHARS: usize = 72;

/// The largest `timeoutMs` a verify gate may ask for: one hour.
pub const GATE_TIMEOUT_MAX_MS: u64 = 3_600_000;

/// One entry of the `signals` list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum Signal {
    /// The agent finished the task.
    TaskComplete(TaskComplete),
    /// The agent could not finish the task, and says why.
    TaskBlocked(TaskBlocked),
    /// The agent ran the task's verification and reports its output.
    TaskVerified(TaskVerified),
    /// A free-form remark for the humans reading the run.
    Note(Note),
    /// A choice the agent made, optionally with its reason.
    Decision(Decision),
    /// Something the agent learned that later work should know.
    Learning(Learning),
    /// One file the agent changed, with a summary of the change.
    Change(Change),
    /// The commit message the agent proposes for its work.
    CommitMessage(CommitMessage),
    /// The title and body of the pull request the agent proposes.
    PrContent(PrContent),
    /// The commands that verify changes, per path prefix of the repository.
    VerifyGates(VerifyGates),
    /// An evaluator's verdict on a piece of work, dimension by dimension.
    Evaluation(Evaluation),
    /// A ticket made precise enough to plan: its spec and acceptance criteria.
    RefinedTicket(RefinedTicket),
    /// A plan of tasks: ids, titles, briefs, dependencies and acceptance criteria.
    TaskPlan(TaskPlan),
    /// Tickets proposed from a prompt and the repository.
    IdeatedTickets(IdeatedTickets),
    /// The content proposed for one of the agents' context files.
    AgentsMdProposal(AgentsMdProposal),
    /// The command that prepares a fresh work tree.
    SetupScript(SetupScript),
    /// The command that checks the whole repository after each round.
    VerifyScript(VerifyScript),
}

impl Signal {
    /// The kind of this signal.
    #[must_use]
    pub fn kind(&self) -> SignalKind {
        match self {
            Self::TaskComplete(_) => SignalKind::TaskComplete,
            Self::TaskBlocked(_) => SignalKind::TaskBlocked,
            Self::TaskVerified(_) => SignalKind::TaskVerified,
            Self::Note(_) => SignalKind::Note,
            Self::Decision(_) => SignalKind::Decision,
            Self::Learning(_) => SignalKind::Learning,
            Self::Change(_) => SignalKind::Change,
            Self::CommitMessage(_) => SignalKind::CommitMessage,
            Self::PrContent(_) => SignalKind::PrContent,
            Self::VerifyGates(_) => SignalKind::VerifyGates,
            Self::Evaluation(_) => SignalKind::Evaluation,
            Self::RefinedTicket(_) => SignalKind::RefinedTicket,
            Self::TaskPlan(_) => SignalKind::TaskPlan,
            Self::IdeatedTickets(_) => SignalKind::IdeatedTickets,
            Self::AgentsMdProposal(_) => SignalKind::AgentsMdProposal,
            Self::SetupScript(_) => SignalKind::SetupScript,
            Self::VerifyScript(_) => SignalKind::VerifyScript,
        }
    }

    /// When the agent says it emitted this signal.
    #[must_use]
    pub fn timestamp(&self) -> &Timestamp {
        match self {
            Self::TaskComplete(s) => &s.timestamp,
            Self::TaskBlocked(s) => &s.timestamp,
            Self::TaskVerified(s) => &s.timestamp,
            Self::Note(s) => &s.timestamp,
            Self::Decision(s) => &s.timestamp,
            Self::Learning(s) => &s.timestamp,
            Self::Change(s) => &s.timestamp,
            Self::CommitMessage(s) => &s.timestamp,
            Self::PrContent(s) => &s.timestamp,
            Self::VerifyGates(s) => &s.timestamp,
            Self::Evaluation(s) => &s.timestamp,
            Self::RefinedTicket(s) => &s.timestamp,
            Self::TaskPlan(s) => &s.timestamp,
            Self::IdeatedTickets(s) => &s.timestamp,
            Self::AgentsMdProposal(s) => &s.timestamp,
            Self::SetupScript(s) => &s.timestamp,
            Self::VerifyScript(s) => &s.timestamp,
        }
    }

    /// Runs the garde rules of this signal's kind. Paths in the report are relative to the
    /// signal and use the Rust field names.
    pub(crate) fn check_rules(&self) -> Result<(), garde::Report> {
        match self {
            Self::TaskComplete(s) => s.validate(),
            Self::TaskBlocked(s) => s.validate(),
            Self::TaskVerified(s) => s.validate(),
            Self::Note(s) => s.validate(),
            Self::Decision(s) => s.validate(),
            Self::Learning(s) => s.validate(),
            Self::Change(s) => s.validate(),
            Self::CommitMessage(s) => s.validate(),
            Self::PrContent(s) => s.validate(),
            Self::VerifyGates(s) => s.validate(),
            Self::Evaluation(s) => s.validate(),
            Self::RefinedTicket(s) => s.validate(),
            Self::TaskPlan(s) => s.validate(),
            Self::IdeatedTickets(s) => s.validate(),
            Self::AgentsMdProposal(s) => s.validate(),
            Self::SetupScript(s) => s.validate(),
            Self::VerifyScript(s) => s.validate(),
        }
    }
}

/// The agent finished the task.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Validate)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TaskComplete {
    /// When the signal was emitted.
    #[garde(dive)]
    pub timestamp: Timestamp,
}

/// The agent could not finish the task, and says why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Validate)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TaskBlocked {
    /// When the signal was emitted.
    #[garde(dive)]
    pub timestamp: Timestamp,
    /// What blocks the task.
    #[garde(custom(non_blank))]
    #[schemars(length(min = 1))]
    pub reason: String,
}

/// The agent ran the task's verification and reports its output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Validate)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TaskVerified {
    /// When the signal was emitted.
    #[garde(dive)]
    pub timestamp: Timestamp,
    /// The verification output (command and result).
    #[garde(custom(non_blank))]
    #[schemars(length(min = 1))]
    pub output: String,
}

/// A free-form remark for the humans reading the run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Validate)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Note {
    /// When the signal was emitted.
    #[garde(dive)]
    pub timestamp: Timestamp,
    /// The remark.
    #[garde(custom(non_blank))]
    #[schemars(length(min = 1))]
    pub text: String,
}

/// A choice the agent made, optionally with its reason.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Validate)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Decision {
    /// When the signal was emitted.
    #[garde(dive)]
    pub timestamp: Timestamp,
    /// What was decided.
    #[garde(custom(non_blank))]
    #[schemars(length(min = 1))]
    pub text: String,
    /// Why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[garde(skip)]
    pub rationale: Option<String>,
}

/// Something the agent learned that later work should know.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Validate)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Learning {
    /// When the signal was emitted.
    #[garde(dive)]
    pub timestamp: Timestamp,
    /// The lesson.
    #[garde(custom(non_blank))]
    #[schemars(length(min = 1))]
    pub text: String,
    /// The situation it was learned in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[garde(skip)]
    pub context: Option<String>,
    /// Where it applies (a path, a module, a tool).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[garde(skip)]
    pub applies_to: Option<String>,
}

/// One file the agent changed, with a summary of the change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Validate)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Change {
    /// When the signal was emitted.
    #[garde(dive)]
    pub timestamp: Timestamp,
    /// The changed file, relative to the repository root.
    #[garde(custom(non_blank))]
    #[schemars(length(min = 1))]
    pub path: String,
    /// What changed in it.
    #[garde(custom(non_blank))]
    #[schemars(length(min = 1))]
    pub summary: String,
}

/// The commit message the agent proposes for its work.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Validate)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CommitMessage {
    /// When the signal was emitted.
    #[garde(dive)]
    pub timestamp: Timestamp,
    /// The subject line: one line, at most 72 characters.
    #[garde(
        custom(non_blank),
        custom(single_line),
        custom(max_chars(COMMIT_SUBJECT_MAX_CHARS))
    )]
    #[schemars(length(min = 1, max = 72))]
    pub subject: String,
    /// The body, after a blank line in the commit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[garde(skip)]
    pub body: Option<String>,
}

/// The title and body of the pull request the agent proposes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Validate)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PrContent {
    /// When the signal was emitted.
    #[garde(dive)]
    pub timestamp: Timestamp,
    /// The pull request title, one line.
    #[garde(custom(non_blank), custom(single_line))]
    #[schemars(length(min = 1))]
    pub title: String,
    /// The pull request description (Markdown).
    #[garde(custom(non_blank))]
    #[schemars(length(min = 1))]
    pub body: String,
}

/// The commands that verify changes, per path prefix.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Validate)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct VerifyGates {
    /// When the signal was emitted.
    #[garde(dive)]
    pub timestamp: Timestamp,
    /// At least one gate.
    #[garde(length(min = 1), dive)]
    pub gates: Vec<Gate>,
}

/// One verify gate: changes under the path prefix are verified by running the command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Validate)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Gate {
    /// Relative to the repository root; empty means the whole repository.
    #[garde(custom(relative_path_prefix))]
    pub path_prefix: String,
    /// The shell command that verifies the changes.
    #[garde(custom(non_blank))]
    #[schemars(length(min = 1))]
    pub command: String,
    /// How long the command may run, in milliseconds: 1 to 3600000 (one hour).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[garde(range(min = 1, max = 3_600_000))]
    pub timeout_ms: Option<u64>,
}

/// The kind of a [`Signal`], without its payload: the `"type"` value in JSON.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum SignalKind {
    /// `task-complete`
    TaskComplete,
    /// `task-blocked`
    TaskBlocked,
    /// `task-verified`
    TaskVerified,
    /// `note`
    Note,
    /// `decision`
    Decision,
    /// `learning`
    Learning,
    /// `change`
    Change,
    /// `commit-message`
    CommitMessage,
    /// `pr-content`
    PrContent,
    /// `verify-gates`
    VerifyGates,
    /// `evaluation`
    Evaluation,
    /// `refined-ticket`
    RefinedTicket,
    /// `task-plan`
    TaskPlan,
    /// `ideated-tickets`
    IdeatedTickets,
    /// `agents-md-proposal`
    AgentsMdProposal,
    /// `setup-script`
    SetupScript,
    /// `verify-script`
    VerifyScript,
}

impl SignalKind {
    /// Every kind, in the order documentation lists them.
    pub const ALL: [Self; 17] = [
        Self::TaskComplete,
        Self::TaskBlocked,
        Self::TaskVerified,
        Self::Note,
        Self::Decision,
        Self::Learning,
        Self::Change,
        Self::CommitMessage,
        Self::PrContent,
        Self::VerifyGates,
        Self::Evaluation,
        Self::RefinedTicket,
        Self::TaskPlan,
        Self::IdeatedTickets,
        Self::AgentsMdProposal,
        Self::SetupScript,
        Self::VerifyScript,
    ];

    /// The `"type"` value of this kind.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::TaskComplete => "task-complete",
            Self::TaskBlocked => "task-blocked",
            Self::TaskVerified => "task-verified",
            Self::Note => "note",
            Self::Decision => "decision",
            Self::Learning => "learning",
            Self::Change => "change",
            Self::CommitMessage => "commit-message",
            Self::PrContent => "pr-content",
            Self::VerifyGates => "verify-gates",
            Self::Evaluation => "evaluation",
            Self::RefinedTicket => "refined-ticket",
            Self::TaskPlan => "task-plan",
            Self::IdeatedTickets => "ideated-tickets",
            Self::AgentsMdProposal => "agents-md-proposal",
            Self::SetupScript => "setup-script",
            Self::VerifyScript => "verify-script",
        }
    }

    /// The kind whose `"type"` value is `name`, if any.
    #[must_use]
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|kind| kind.as_str() == name)
    }

    /// One sentence telling the agent when to write this kind.
    #[must_use]
    pub fn description(self) -> &'static str {
        match self {
            Self::TaskComplete => "You finished the task.",
            Self::TaskBlocked => "You could not finish the task; say what blocks it.",
            Self::TaskVerified => "You ran the task's verification; report its output.",
            Self::Note => "A remark for the humans reading this run.",
            Self::Decision => "A choice you made, and why.",
            Self::Learning => "Something you learned that later work on this code should know.",
            Self::Change => "One file you changed, with a summary of the change.",
            Self::CommitMessage => "The commit message for your work.",
            Self::PrContent => "The title and description of the pull request for your work.",
            Self::VerifyGates => {
                "The commands that verify changes, per path prefix of the repository."
            }
            Self::Evaluation => {
                "Your verdict on the work you were asked to evaluate, dimension by dimension."
            }
            Self::RefinedTicket => {
                "The ticket made precise enough to plan: its spec and the criteria that say \
                 when it is done."
            }
            Self::TaskPlan => {
                "The plan: the tasks that carry out the ticket, with their dependencies and \
                 acceptance criteria."
            }
            Self::IdeatedTickets => "The tickets you propose.",
            Self::AgentsMdProposal => {
                "The whole content you propose for one of the agents' context files."
            }
            Self::SetupScript => {
                "The command that prepares a fresh clone of the repository (dependencies, build)."
            }
            Self::VerifyScript => {
                "The command that checks the whole repository after each round of work."
            }
        }
    }

    /// The fields of this kind besides `type` and `timestamp`, for the prompt.
    pub(crate) fn fields(self) -> &'static [FieldDoc] {
        match self {
            Self::TaskComplete => const { &[] },
            Self::TaskBlocked => const { &[FieldDoc::text("reason", "what blocks the task")] },
            Self::TaskVerified => {
                const {
                    &[FieldDoc::text(
                        "output",
                        "the verification you ran and its output",
                    )]
                }
            }
            Self::Note => const { &[FieldDoc::text("text", "the remark")] },
            Self::Decision => {
                const {
                    &[
                        FieldDoc::text("text", "what you decided"),
                        FieldDoc::optional("rationale", "string", "why"),
                    ]
                }
            }
            Self::Learning => {
                const {
                    &[
                        FieldDoc::text("text", "the lesson"),
                        FieldDoc::optional("context", "string", "the situation you learned it in"),
                        FieldDoc::optional(
                            "appliesTo",
                            "string",
                            "where it applies: a path, a module, a tool",
                        ),
                    ]
                }
            }
            Self::Change => {
                const {
                    &[
                        FieldDoc::text("path", "the changed file, relative to the repository root"),
                        FieldDoc::text("summary", "what changed in it"),
                    ]
                }
            }
            Self::CommitMessage => {
                const {
                    &[
                        FieldDoc::text(
                            "subject",
                            "the subject line: one line, at most 72 characters",
                        ),
                        FieldDoc::optional("body", "string", "the body of the message"),
                    ]
                }
            }
            Self::PrContent => {
                const {
                    &[
                        FieldDoc::text("title", "the pull request title, one line"),
                        FieldDoc::text("body", "the pull request description, in Markdown"),
                    ]
                }
            }
            Self::VerifyGates => {
                const {
                    &[FieldDoc {
                        name: "gates",
                        required: true,
                        ty: "list",
                        description: "at least one gate; each gate is an object with:",
                        items: &[
                            FieldDoc {
                                name: "pathPrefix",
                                required: true,
                                ty: "string",
                                description: "changes under this prefix, relative to the repository \
                                      root (`\"\"` means the whole repository; no `..`)",
                                items: &[],
                            },
                            FieldDoc::text("command", "the shell command that verifies them"),
                            FieldDoc::optional(
                                "timeoutMs",
                                "integer",
                                "how long the command may run, in milliseconds, 1 to 3600000",
                            ),
                        ],
                    }]
                }
            }
            Self::Evaluation => EVALUATION_FIELDS,
            Self::RefinedTicket => life::REFINED_TICKET_FIELDS,
            Self::TaskPlan => life::TASK_PLAN_FIELDS,
            Self::IdeatedTickets => life::IDEATED_TICKETS_FIELDS,
            Self::AgentsMdProposal => life::AGENTS_MD_PROPOSAL_FIELDS,
            Self::SetupScript => life::SETUP_SCRIPT_FIELDS,
            Self::VerifyScript => life::VERIFY_SCRIPT_FIELDS,
        }
    }

    /// A complete, valid example signal of this kind.
    #[must_use]
    pub fn example(self) -> Signal {
        let timestamp = example_timestamp();
        match self {
            Self::TaskComplete => Signal::TaskComplete(TaskComplete { timestamp }),
            Self::TaskBlocked => Signal::TaskBlocked(TaskBlocked {
                timestamp,
                reason: "The integration tests need a database that is not reachable from \
                         this machine."
                    .to_owned(),
            }),
            Self::TaskVerified => Signal::TaskVerified(TaskVerified {
                timestamp,
                output: "cargo test -p parser: 42 passed, 0 failed".to_owned(),
            }),
            Self::Note => Signal::Note(Note {
                timestamp,
                text: "The old parser is still used by the CLI; left it in place.".to_owned(),
            }),
            Self::Decision => Signal::Decision(Decision {
                timestamp,
                text: "Parse dates by hand instead of adding a dependency.".to_owned(),
                rationale: Some("Only one format is needed.".to_owned()),
            }),
            Self::Learning => Signal::Learning(Learning {
                timestamp,
                text: "The fixtures are generated; edit the generator, not the files.".to_owned(),
                context: Some("A fixture edit was overwritten by the build.".to_owned()),
                applies_to: Some("tests/fixtures/".to_owned()),
            }),
            Self::Change => Signal::Change(Change {
                timestamp,
                path: "src/parser.rs".to_owned(),
                summary: "Reject empty input with a named error.".to_owned(),
            }),
            Self::CommitMessage => Signal::CommitMessage(CommitMessage {
                timestamp,
                subject: "parser: reject empty input with a named error".to_owned(),
                body: Some(
                    "Empty input used to panic; it now returns ParseError::Empty.".to_owned(),
                ),
            }),
            Self::PrContent => Signal::PrContent(PrContent {
                timestamp,
                title: "parser: reject empty input".to_owned(),
                body: "Empty input used to panic.\n\n- returns `ParseError::Empty`\n- adds a test"
                    .to_owned(),
            }),
            Self::VerifyGates => Signal::VerifyGates(VerifyGates {
                timestamp,
                gates: vec![Gate {
                    path_prefix: "src/".to_owned(),
                    command: "cargo test".to_owned(),
                    timeout_ms: Some(600_000),
                }],
            }),
            Self::Evaluation => Signal::Evaluation(example_evaluation(timestamp)),
            Self::RefinedTicket => Signal::RefinedTicket(RefinedTicket {
                timestamp,
                title: "Reject empty input in the parser".to_owned(),
                spec: "The parser panics on empty input. It should return a named error \
                       instead; nothing else about parsing changes."
                    .to_owned(),
                acceptance_criteria: vec![
                    "Empty input returns ParseError::Empty".to_owned(),
                    "Input that is only whitespace returns ParseError::Empty".to_owned(),
                ],
            }),
            Self::TaskPlan => Signal::TaskPlan(TaskPlan {
                timestamp,
                tasks: vec![
                    PlannedTask {
                        id: "empty-error".to_owned(),
                        title: "Add ParseError::Empty".to_owned(),
                        brief: "Add an `Empty` variant to `ParseError` in src/parser.rs."
                            .to_owned(),
                        depends_on: Vec::new(),
                        acceptance_criteria: vec![
                            "ParseError::Empty exists and is documented".to_owned(),
                        ],
                    },
                    PlannedTask {
                        id: "reject-empty".to_owned(),
                        title: "Return ParseError::Empty for empty input".to_owned(),
                        brief: "Make `parse` return `ParseError::Empty` for empty or \
                                whitespace-only input, with a test for each."
                            .to_owned(),
                        depends_on: vec!["empty-error".to_owned()],
                        acceptance_criteria: vec![
                            "Empty input returns ParseError::Empty".to_owned(),
                        ],
                    },
                ],
            }),
            Self::IdeatedTickets => Signal::IdeatedTickets(IdeatedTickets {
                timestamp,
                tickets: vec![IdeatedTicket {
                    title: "Reject empty input in the parser".to_owned(),
                    description: "The parser panics on empty input (src/parser.rs:88).".to_owned(),
                }],
            }),
            Self::AgentsMdProposal => Signal::AgentsMdProposal(AgentsMdProposal {
                timestamp,
                path: "AGENTS.md".to_owned(),
                content: "# Agents\n\nRun `cargo test` before you finish.\n".to_owned(),
            }),
            Self::SetupScript => Signal::SetupScript(SetupScript {
                timestamp,
                command: "cargo fetch".to_owned(),
                rationale: Some("Downloads the dependencies once.".to_owned()),
            }),
            Self::VerifyScript => Signal::VerifyScript(VerifyScript {
                timestamp,
                command: "cargo test --workspace".to_owned(),
                rationale: None,
            }),
        }
    }
}

impl fmt::Display for SignalKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

fn example_timestamp() -> Timestamp {
    // A literal that passes the check; built without `parse` to stay infallible.
    Timestamp::from_trusted("2025-01-01T12:00:00Z")
}

/// The example verdict deliberately fails one dimension: an example that passes everything
/// would invite copying a `passed` verdict.
fn example_evaluation(timestamp: Timestamp) -> Evaluation {
    let dimension = |name: &str, finding: Option<&str>| Dimension {
        name: name.to_owned(),
        passed: finding.is_none(),
        finding: finding.map(str::to_owned),
    };
    let mut dimensions: Vec<Dimension> = FLOOR_DIMENSIONS
        .iter()
        .map(|name| dimension(name, None))
        .collect();
    if let Some(robustness) = dimensions.iter_mut().find(|d| d.name == "robustness") {
        robustness.passed = false;
        robustness.finding = Some(
            "parse() still panics on input that is only whitespace (src/parser.rs:88).".into(),
        );
    }
    Evaluation {
        timestamp,
        status: EvaluationStatus::Failed,
        dimensions,
        criteria: vec![Criterion {
            name: "Empty input returns ParseError::Empty".to_owned(),
            passed: true,
            finding: None,
            applicable: None,
            execution_evidence: Some("cargo test -p parser empty: 1 passed".to_owned()),
        }],
        critique: Some("Handle whitespace-only input as empty input.".to_owned()),
    }
}

/// The fields of `evaluation` for the prompt.
const EVALUATION_FIELDS: &[FieldDoc] = &[
    FieldDoc {
        name: "status",
        required: true,
        ty: "`\"passed\"` | `\"failed\"` | `\"malformed\"`",
        description: "your verdict; `passed` only if every dimension and every \
                                  criterion passed; `malformed` if the work could not be \
                                  evaluated at all",
        items: &[],
    },
    FieldDoc {
        name: "dimensions",
        required: true,
        ty: "list",
        description: "one entry for each of `correctness`, `completeness`, `safety`, \
                                  `consistency`, `robustness` (more are allowed, no duplicates); \
                                  each entry is an object with:",
        items: &[
            FieldDoc::text("name", "the dimension"),
            FieldDoc::boolean("passed", "whether the work passes it"),
            FieldDoc::optional(
                "finding",
                "string",
                "what you found; required and non-empty when `passed` is false",
            ),
        ],
    },
    FieldDoc {
        name: "criteria",
        required: false,
        ty: "list",
        description: "the task's acceptance criteria, if it has any; each entry is \
                                  an object with:",
        items: &[
            FieldDoc::text("name", "the criterion"),
            FieldDoc::boolean("passed", "whether the work meets it"),
            FieldDoc::optional("finding", "string", "what you found"),
            FieldDoc::optional(
                "applicable",
                "boolean",
                "`false` when the criterion does not apply to this work \
                                     (it then fails nothing); leave it out otherwise",
            ),
            FieldDoc::optional(
                "executionEvidence",
                "string",
                "what you ran or read to decide: a command and its result, \
                                     a test's name",
            ),
        ],
    },
    FieldDoc::optional(
        "critique",
        "string",
        "the verdict in your words: what the next round should change first",
    ),
];

/// One field of a signal kind, as the prompt describes it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FieldDoc {
    /// The JSON field name.
    pub(crate) name: &'static str,
    /// Whether the field must be present.
    pub(crate) required: bool,
    /// The JSON type, in words.
    pub(crate) ty: &'static str,
    /// What to put there.
    pub(crate) description: &'static str,
    /// For a list of objects: the fields of each object.
    pub(crate) items: &'static [FieldDoc],
}

impl FieldDoc {
    pub(crate) const fn text(name: &'static str, description: &'static str) -> Self {
        Self {
            name,
            required: true,
            ty: "non-empty string",
            description,
            items: &[],
        }
    }

    pub(crate) const fn boolean(name: &'static str, description: &'static str) -> Self {
        Self {
            name,
            required: true,
            ty: "boolean",
            description,
            items: &[],
        }
    }

    pub(crate) const fn list_of_text(
        name: &'static str,
        required: bool,
        description: &'static str,
    ) -> Self {
        Self {
            name,
            required,
            ty: "list of non-empty strings",
            description,
            items: &[],
        }
    }

    pub(crate) const fn optional(
        name: &'static str,
        ty: &'static str,
        description: &'static str,
    ) -> Self {
        Self {
            name,
            required: false,
            ty,
            description,
            items: &[],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::SignalKind;

    #[test]
    fn names_round_trip() {
        for kind in SignalKind::ALL {
            assert_eq!(SignalKind::from_name(kind.as_str()), Some(kind));
            let json = serde_json::to_value(kind).ok();
            assert_eq!(json, Some(serde_json::Value::from(kind.as_str())));
        }
        assert_eq!(SignalKind::from_name("task_complete"), None);
    }

    /// The prompt's field tables (`SignalKind::fields`) must name exactly the schema's
    /// properties, with the same required set, nested lists included.
    #[test]
    fn field_docs_match_the_json_schema() {
        let schema = crate::signals_json_schema();
        let defs = &schema["$defs"];
        let variants = defs["Signal"]["oneOf"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        assert_eq!(variants.len(), SignalKind::ALL.len());
        for kind in SignalKind::ALL {
            let variant = variants
                .iter()
                .find(|v| v["properties"]["type"]["const"] == kind.as_str())
                .unwrap_or_else(|| panic!("no schema variant for {kind}"));
            compare(
                kind.as_str(),
                variant,
                kind.fields(),
                defs,
                &["type", "timestamp"],
            );
        }
    }

    fn compare(
        context: &str,
        object: &serde_json::Value,
        fields: &[super::FieldDoc],
        defs: &serde_json::Value,
        implicit: &[&str],
    ) {
        let properties = object["properties"]
            .as_object()
            .cloned()
            .unwrap_or_default();
        let mut schema_names: Vec<&str> = properties
            .keys()
            .map(String::as_str)
            .filter(|name| !implicit.contains(name))
            .collect();
        let mut doc_names: Vec<&str> = fields.iter().map(|f| f.name).collect();
        schema_names.sort_unstable();
        doc_names.sort_unstable();
        assert_eq!(doc_names, schema_names, "{context}: field names");
        let required: Vec<&str> = object["required"]
            .as_array()
            .map(|r| r.iter().filter_map(|v| v.as_str()).collect())
            .unwrap_or_default();
        for field in fields {
            assert_eq!(
                field.required,
                required.contains(&field.name),
                "{context}.{}: required",
                field.name
            );
            if !field.items.is_empty() {
                let item_ref = properties[field.name]["items"]["$ref"]
                    .as_str()
                    .unwrap_or("");
                let item = &defs[item_ref.trim_start_matches("#/$defs/")];
                compare(
                    &format!("{context}.{}", field.name),
                    item,
                    field.items,
                    defs,
                    &[],
                );
            }
        }
    }

    #[test]
    fn every_example_has_its_kind_and_passes_the_rules() {
        for kind in SignalKind::ALL {
            let example = kind.example();
            assert_eq!(example.kind(), kind);
            assert!(
                example.check_rules().is_ok(),
                "{kind}: {:?}",
                example.check_rules()
            );
        }
    }
}
