//! The sprint's life around its implementation: turning tickets into a plan of tasks written
//! into `corral-sprint.toml`, and the pull request's text (later: refining, ideating, readiness).
//!
//! Each flow has an agent write one signal kind (`task-plan`, ...) through the same spawn path as
//! `corral run`, with its contract; what is here is everything around that spawn that needs no
//! process: reading the flow's sources as files an agent or a user could have made hostile
//! (a link out of the project, a FIFO, a PRD of ten thousand lines), the prompt, the flow's
//! record under `.corral/sprints/<name>/<flow>/`, and applying the result to the sprint file
//! so that a user's comments and hand edits survive and nothing invalid is ever written.

mod error;
mod plan;
mod pr;
mod source;

pub use error::LifeError;
pub use plan::{
    ISSUES_MAX, PLAN_DIR, PLAN_FILE, PlanMerge, flow_spawn_dir, issue_sources, merge_plan, plan_of,
    plan_prompt, plan_spawn_dir, record_flow_file, record_plan, write_sprint_file,
};
pub use pr::{
    FACTS_HEADING, PR_DIR, PR_FILE, PUBLISHED_FILE, Published, pr_body, pr_content_of, pr_facts,
    pr_prompt, publish_pr,
};
pub use source::{SOURCE_MAX_BYTES, SOURCE_MAX_LINES, SourceText, check_source, read_source};
