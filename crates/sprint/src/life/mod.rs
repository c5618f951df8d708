//! The sprint's life around its implementation: ideating tickets, refining a ticket, turning
//! tickets into a plan of tasks written into `corral-sprint.toml`, making the repository ready
//! for agents, and the pull request's text; and where a sprint's life stands.
//!
//! Each flow has an agent write its signal kinds (`task-plan`, ...) through the same spawn path
//! as `corral run`, with its contract; what is here is everything around that spawn that needs
//! no process: reading the flow's sources as files an agent or a user could have made hostile
//! (a link out of the project, a FIFO, a PRD of ten thousand lines), the prompt, the flow's
//! record under `.corral/sprints/<name>/<flow>/`, and applying the result to the sprint file
//! so that a user's comments and hand edits survive and nothing invalid is ever written.

mod error;
mod ideate;
mod plan;
mod pr;
mod project;
mod ready;
mod refine;
mod source;
mod status;
mod untasked;

pub use error::LifeError;
pub use ideate::{
    IDEATE_DIR, IDEATED_FILE, TICKETS_DIR, ideate_prompt, ideated_of, ticket_file_names,
    ticket_markdown, ticket_slug,
};
pub use plan::{
    ISSUES_MAX, PLAN_DIR, PLAN_FILE, PlanMerge, flow_spawn_dir, issue_sources, merge_plan, plan_of,
    plan_prompt, plan_spawn_dir, record_flow_file, record_plan, unfinished_flow_spawn,
    write_sprint_file,
};
pub use pr::{
    FACTS_HEADING, PR_DIR, PR_FILE, PUBLISHED_FILE, Published, pr_body, pr_content_of, pr_facts,
    pr_prompt, publish_pr,
};
pub use project::{
    AGENTS_CONTEXT_FILES, EntryKind, HostDir, Signal, project_dir, write_new_project_file,
    write_project_file,
};
pub use ready::{
    APPLIED_FILE, FileChange, PROPOSAL_FILE, READY_DIR, ReadyApplied, ReadyProposal, apply_ready,
    ready_prompt, ready_proposal_of,
};
pub use refine::{
    CRITERIA_HEADING, REFINE_DIR, REFINE_SOURCE_FILE, REFINED_FILE, REFINED_TICKET_FILE,
    RefineMode, refine_prompt, refined_markdown, refined_of,
};
pub use source::{SOURCE_MAX_BYTES, SOURCE_MAX_LINES, SourceText, check_source, read_source};
pub use status::{
    FlowDone, FlowStatus, LifeFlow, LifeStage, LifeStatus, life_status, sprints_with_records,
};
pub use untasked::load_allowing_no_tasks;
