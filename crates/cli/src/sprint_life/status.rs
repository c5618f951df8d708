//! Where a sprint's life stands, for `corral sprint status`: one line per flow (ideate, refine,
//! plan, ready, the run, pr) saying what its record last came to.

use std::path::Path;

use corral_sprint::life::{LifeFlow, LifeStatus};
use corral_sprint::{SPRINT_FILE, SprintName};

use crate::term::outln;

/// The name of the sprint the sprint file in `cwd` describes, when there is one that parses (a
/// file with no tasks yet included).
pub(crate) fn sprint_file_name(cwd: &Path) -> Option<SprintName> {
    corral_sprint::life::load_allowing_no_tasks(&cwd.join(SPRINT_FILE))
        .ok()
        .map(|f| f.sprint.name)
}

/// Prints where the life of sprint `name` stands: its stage, then each flow.
pub(crate) fn print_life(name: &SprintName, life: &LifeStatus) {
    outln!("sprint {name}: {}", life.stage.as_str());
    for flow in LifeFlow::ALL {
        if flow == LifeFlow::Pr {
            outln!("  {:<7} {}", "run", run_line(life));
        }
        let Some(status) = life.flow(flow) else {
            continue;
        };
        let line = match &status.done {
            None if status.spawns == 0 => "-".to_owned(),
            None => format!(
                "no result yet ({} spawn{} in {}/)",
                status.spawns,
                if status.spawns == 1 { "" } else { "s" },
                flow.as_str()
            ),
            Some(done) => {
                let mut line = format!("{}/{}: {}", flow.as_str(), done.spawn, done.summary);
                match status.applied {
                    Some(true) => line.push_str(" (applied)"),
                    Some(false) => line.push_str(" (proposed, not applied)"),
                    None => {}
                }
                line
            }
        };
        outln!("  {:<7} {line}", flow.as_str());
    }
}

fn run_line(life: &LifeStatus) -> String {
    match (life.tasks_done, life.tasks_total) {
        (Some(done), Some(total)) => format!("{done} of {total} tasks done"),
        _ => "not started".to_owned(),
    }
}
