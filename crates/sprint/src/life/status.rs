//! Where a sprint's life stands: which flows have run (ideate, refine, plan, ready, pr), what
//! each last came to, and whether the sprint itself has run, read from the sprint's record
//! without changing it (no directory is made, no link followed, every file read with a limit).

use std::path::{Path, PathBuf};

use corral_contract::{IdeatedTickets, RefinedTicket, TaskPlan};
use corral_hostfs::{EntryKind, HostDir};
use serde::Serialize;

use super::ideate::{IDEATE_DIR, IDEATED_FILE};
use super::plan::{PLAN_DIR, PLAN_FILE};
use super::pr::{PR_DIR, PR_FILE, PUBLISHED_FILE};
use super::ready::{APPLIED_FILE, PROPOSAL_FILE, READY_DIR, ReadyApplied, ReadyProposal};
use super::refine::{REFINE_DIR, REFINED_FILE};
use crate::layout::{SPRINTS_DIR, STATE_FILE, SprintLayout};
use crate::names::SprintName;
use crate::state::{SprintState, TaskStatus};

/// The most bytes of one artefact read for the status.
const ARTEFACT_MAX_BYTES: u64 = 4 * 1024 * 1024;

/// The flows of a sprint's life, in the order they come.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum LifeFlow {
    /// `corral sprint ideate`.
    Ideate,
    /// `corral sprint refine`.
    Refine,
    /// `corral sprint plan`.
    Plan,
    /// `corral sprint ready`.
    Ready,
    /// `corral sprint pr`.
    Pr,
}

impl LifeFlow {
    /// Every flow, in life order.
    pub const ALL: [LifeFlow; 5] = [
        LifeFlow::Ideate,
        LifeFlow::Refine,
        LifeFlow::Plan,
        LifeFlow::Ready,
        LifeFlow::Pr,
    ];

    /// The flow's directory in the sprint's record, and its command's name.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            LifeFlow::Ideate => IDEATE_DIR,
            LifeFlow::Refine => REFINE_DIR,
            LifeFlow::Plan => PLAN_DIR,
            LifeFlow::Ready => READY_DIR,
            LifeFlow::Pr => PR_DIR,
        }
    }
}

/// Where a sprint's life stands, the furthest stage its record shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum LifeStage {
    /// Nothing recorded yet.
    New,
    /// Tickets were proposed.
    Ideated,
    /// A ticket was refined.
    Refined,
    /// A plan was written into the sprint file.
    Planned,
    /// A readiness proposal was applied.
    Ready,
    /// The sprint has run, and some task is not done.
    Running,
    /// Every task of the sprint is done.
    Finished,
    /// The pull request's text was written.
    PullRequest,
}

impl LifeStage {
    /// The stage's name in `corral sprint status`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            LifeStage::New => "new",
            LifeStage::Ideated => "ideated",
            LifeStage::Refined => "refined",
            LifeStage::Planned => "planned",
            LifeStage::Ready => "ready",
            LifeStage::Running => "running",
            LifeStage::Finished => "finished",
            LifeStage::PullRequest => "pull-request",
        }
    }
}

/// What one flow's record holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FlowStatus {
    /// The flow.
    pub flow: LifeFlow,
    /// How many spawns it has had (`<flow>/<n>/` directories).
    pub spawns: u32,
    /// The latest spawn that came to its result, if any did.
    pub done: Option<FlowDone>,
    /// For `ready`: whether the latest proposal was applied; `None` for the other flows.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub applied: Option<bool>,
}

/// A spawn of a flow that came to its result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FlowDone {
    /// Its number (`<flow>/<n>/`).
    pub spawn: u32,
    /// Its result file, below the project.
    pub artefact: PathBuf,
    /// What it came to, in a few words (a title, "2 tasks").
    pub summary: String,
}

/// Where a sprint's life stands, for `corral sprint status`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LifeStatus {
    /// The furthest stage reached.
    pub stage: LifeStage,
    /// Each flow's record, in life order.
    pub flows: Vec<FlowStatus>,
    /// Tasks done, once the sprint has run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tasks_done: Option<usize>,
    /// Tasks in all, once the sprint has run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tasks_total: Option<usize>,
}

impl LifeStatus {
    /// The status of `flow`.
    #[must_use]
    pub fn flow(&self, flow: LifeFlow) -> Option<&FlowStatus> {
        self.flows.iter().find(|f| f.flow == flow)
    }
}

/// Reads where the life of the sprint at `layout` stands; `state` is its `sprint.json` when it
/// has run. A record that cannot be read counts as absent.
#[must_use]
pub fn life_status(
    project_root: &Path,
    layout: &SprintLayout,
    state: Option<&SprintState>,
) -> LifeStatus {
    let record = open_record(project_root, layout);
    let flows: Vec<FlowStatus> = LifeFlow::ALL
        .iter()
        .map(|&flow| flow_status(record.as_ref(), layout, flow))
        .collect();
    let tasks_done = state.map(|s| s.count(TaskStatus::Done));
    let tasks_total = state.map(|s| s.tasks.len());
    let done = |flow: LifeFlow| {
        flows
            .iter()
            .any(|f| f.flow == flow && f.done.is_some() && f.applied != Some(false))
    };
    let stage = if done(LifeFlow::Pr) {
        LifeStage::PullRequest
    } else if let (Some(done), Some(all)) = (tasks_done, tasks_total) {
        if done == all {
            LifeStage::Finished
        } else {
            LifeStage::Running
        }
    } else if done(LifeFlow::Ready) {
        LifeStage::Ready
    } else if done(LifeFlow::Plan) {
        LifeStage::Planned
    } else if done(LifeFlow::Refine) {
        LifeStage::Refined
    } else if done(LifeFlow::Ideate) {
        LifeStage::Ideated
    } else {
        LifeStage::New
    };
    LifeStatus {
        stage,
        flows,
        tasks_done,
        tasks_total,
    }
}

/// The sprints of the project at `project_root` with anything recorded: a `sprint.json` or
/// a flow's directory.
///
/// # Errors
///
/// The directory of sprints cannot be listed.
pub fn sprints_with_records(project_root: &Path) -> std::io::Result<Vec<SprintName>> {
    let dir = project_root.join(SPRINTS_DIR);
    let entries = match std::fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut names = Vec::new();
    for entry in entries {
        let entry = entry?;
        let Some(name) = entry
            .file_name()
            .to_str()
            .and_then(|n| SprintName::new(n).ok())
        else {
            continue;
        };
        let path = entry.path();
        let recorded = path.join(STATE_FILE).is_file()
            || LifeFlow::ALL.iter().any(|f| path.join(f.as_str()).is_dir());
        if recorded {
            names.push(name);
        }
    }
    names.sort();
    Ok(names)
}

fn open_record(project_root: &Path, layout: &SprintLayout) -> Option<HostDir> {
    let rel = layout.root().strip_prefix(project_root).ok()?;
    let project = HostDir::open(project_root).ok()?;
    // Nothing recorded (or a record that is not a plain directory): nothing to show.
    project.dir(rel).ok()
}

/// The numbers of a flow's spawn directories, in order.
fn spawn_numbers(flow_dir: &HostDir) -> Vec<u32> {
    let mut numbers: Vec<u32> = flow_dir
        .entries()
        .unwrap_or_default()
        .iter()
        .filter_map(|n| n.to_str().and_then(|n| n.parse::<u32>().ok()))
        .filter(|n| matches!(flow_dir.kind(n.to_string()), Ok(Some(EntryKind::Dir))))
        .collect();
    numbers.sort_unstable();
    numbers
}

fn flow_status(record: Option<&HostDir>, layout: &SprintLayout, flow: LifeFlow) -> FlowStatus {
    let mut status = FlowStatus {
        flow,
        spawns: 0,
        done: None,
        applied: None,
    };
    let Some(flow_dir) = record.and_then(|r| r.dir(flow.as_str()).ok()) else {
        return status;
    };
    let numbers = spawn_numbers(&flow_dir);
    status.spawns = u32::try_from(numbers.len()).unwrap_or(u32::MAX);
    let artefact = match flow {
        LifeFlow::Ideate => IDEATED_FILE,
        LifeFlow::Refine => REFINED_FILE,
        LifeFlow::Plan => PLAN_FILE,
        LifeFlow::Ready => PROPOSAL_FILE,
        LifeFlow::Pr => PR_FILE,
    };
    for &n in numbers.iter().rev() {
        let rel = Path::new(&n.to_string()).join(artefact);
        let Ok(Some(bytes)) = flow_dir.read_if_exists(&rel, ARTEFACT_MAX_BYTES) else {
            continue;
        };
        let Some(mut summary) = summarise(flow, &bytes) else {
            continue;
        };
        if flow == LifeFlow::Pr
            && let Some(published) = published(&flow_dir, n)
        {
            summary.push_str(&format!(" ({published})"));
        }
        if flow == LifeFlow::Ready {
            let applied = Path::new(&n.to_string()).join(APPLIED_FILE);
            let applied = flow_dir
                .read_if_exists(&applied, ARTEFACT_MAX_BYTES)
                .ok()
                .flatten()
                .and_then(|b| serde_json::from_slice::<ReadyApplied>(&b).ok());
            status.applied = Some(applied.is_some());
        }
        status.done = Some(FlowDone {
            spawn: n,
            artefact: layout
                .root()
                .join(flow.as_str())
                .join(n.to_string())
                .join(artefact),
            summary,
        });
        break;
    }
    status
}

/// What `pr/<n>/published.json` says was done on the forge: `opened #7 https://…`.
fn published(flow_dir: &HostDir, n: u32) -> Option<String> {
    let rel = Path::new(&n.to_string()).join(PUBLISHED_FILE);
    let bytes = flow_dir.read_if_exists(&rel, ARTEFACT_MAX_BYTES).ok()??;
    let record: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    Some(format!(
        "{} #{} {}",
        record["action"].as_str()?,
        record["number"].as_u64()?,
        record["url"].as_str()?
    ))
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// A few words on what an artefact holds; `None` when it is not what the flow writes.
fn summarise(flow: LifeFlow, bytes: &[u8]) -> Option<String> {
    match flow {
        LifeFlow::Ideate => {
            let t: IdeatedTickets = serde_json::from_slice(bytes).ok()?;
            Some(plural(t.tickets.len(), "ticket", "tickets"))
        }
        LifeFlow::Refine => {
            let t: RefinedTicket = serde_json::from_slice(bytes).ok()?;
            Some(format!(
                "{:?}, {}",
                t.title,
                plural(t.acceptance_criteria.len(), "criterion", "criteria")
            ))
        }
        LifeFlow::Plan => {
            let p: TaskPlan = serde_json::from_slice(bytes).ok()?;
            Some(plural(p.tasks.len(), "task", "tasks"))
        }
        LifeFlow::Ready => {
            let p: ReadyProposal = serde_json::from_slice(bytes).ok()?;
            let mut parts = vec![format!("check {:?}", p.check.command)];
            if !p.context_files.is_empty() {
                let paths: Vec<&str> = p.context_files.iter().map(|c| c.path.as_str()).collect();
                parts.push(paths.join(", "));
            }
            Some(parts.join("; "))
        }
        LifeFlow::Pr => {
            let text = std::str::from_utf8(bytes).ok()?;
            Some(format!("{:?}", text.lines().next().unwrap_or_default()))
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::{LifeFlow, LifeStage, life_status, sprints_with_records};
    use crate::layout::SprintLayout;
    use crate::names::SprintName;

    fn write(root: &Path, rel: &str, text: &str) {
        let path = root.join(".corral/sprints/s").join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    const REFINED: &str = r#"{"timestamp": "2026-12-07T10:00:00Z", "title": "T", "spec": "S",
        "acceptanceCriteria": ["a", "b"]}"#;
    const PROPOSAL: &str = r#"{"contextFiles": [], "setup": null, "gates": null,
        "check": {"timestamp": "2026-12-07T10:00:00Z", "command": "make test"}}"#;

    #[test]
    fn the_stage_is_the_furthest_result_and_a_proposal_counts_once_applied() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let name = SprintName::new("s").unwrap();
        let layout = SprintLayout::new(root, &name);
        assert_eq!(life_status(root, &layout, None).stage, LifeStage::New);
        assert!(sprints_with_records(root).unwrap().is_empty());

        // A spawn that stopped before its result, then one that came to it.
        std::fs::create_dir_all(root.join(".corral/sprints/s/refine/1")).unwrap();
        let life = life_status(root, &layout, None);
        assert_eq!(life.stage, LifeStage::New);
        assert_eq!(life.flow(LifeFlow::Refine).unwrap().spawns, 1);
        write(root, "refine/2/refined.json", REFINED);
        let life = life_status(root, &layout, None);
        assert_eq!(life.stage, LifeStage::Refined);
        let done = life.flow(LifeFlow::Refine).unwrap().done.clone().unwrap();
        assert_eq!(
            (done.spawn, done.summary.as_str()),
            (2, "\"T\", 2 criteria")
        );
        assert_eq!(sprints_with_records(root).unwrap(), [name]);

        write(root, "ready/1/proposal.json", PROPOSAL);
        let life = life_status(root, &layout, None);
        assert_eq!(life.stage, LifeStage::Refined, "proposed, not applied");
        assert_eq!(life.flow(LifeFlow::Ready).unwrap().applied, Some(false));
        write(
            root,
            "ready/1/applied.json",
            r#"{"at": "2026-12-07T10:00:00Z", "files": []}"#,
        );
        assert_eq!(life_status(root, &layout, None).stage, LifeStage::Ready);

        // A forged artefact that is not what the flow writes is no result.
        write(root, "pr/1/pr.md", "Title\n\nBody\n");
        write(
            root,
            "pr/1/published.json",
            r#"{"action": "opened", "number": 7, "url": "http://forge/pr/7"}"#,
        );
        let life = life_status(root, &layout, None);
        assert_eq!(life.stage, LifeStage::PullRequest);
        assert_eq!(
            life.flow(LifeFlow::Pr)
                .unwrap()
                .done
                .as_ref()
                .unwrap()
                .summary,
            "\"Title\" (opened #7 http://forge/pr/7)"
        );
        write(root, "plan/1/plan.json", "not json");
        assert!(
            life_status(root, &layout, None)
                .flow(LifeFlow::Plan)
                .unwrap()
                .done
                .is_none()
        );
    }
}
