//! The order tasks run in, and the dependency cycles that leave no order at all.
//!
//! Of the tasks whose dependencies are all done, the first in the file runs next: the order a
//! person reading the file expects, moved only as far as the dependencies require.

use std::collections::BTreeSet;

use crate::file::Task;
use crate::names::TaskId;

/// The run order as indices into `tasks`, and the indices left out because they are on a
/// dependency cycle or depend on one. A dependency on no task of the list is ignored here
/// (validation reports it).
pub(crate) fn dependency_order(tasks: &[Task]) -> (Vec<usize>, Vec<usize>) {
    let deps = edges(tasks);
    let mut done = vec![false; tasks.len()];
    let mut order = Vec::with_capacity(tasks.len());
    while let Some(next) = (0..tasks.len()).find(|&i| !done[i] && deps[i].iter().all(|&d| done[d]))
    {
        done[next] = true;
        order.push(next);
    }
    let left = (0..tasks.len()).filter(|&i| !done[i]).collect();
    (order, left)
}

/// Every dependency cycle among `tasks`, each as the ids along it (starting from the task
/// first in the file, ending before it comes round again), each cycle once.
pub(crate) fn cycles(tasks: &[Task]) -> Vec<Vec<TaskId>> {
    let deps = edges(tasks);
    let (_, left) = dependency_order(tasks);
    let stuck: BTreeSet<usize> = left.iter().copied().collect();
    let mut seen: Vec<BTreeSet<usize>> = Vec::new();
    let mut found = Vec::new();
    for &start in &left {
        // Every task left over waits on another one left over, so following the first such
        // dependency from any of them must come back to a task already on the path.
        let mut path = vec![start];
        let mut at = start;
        let cycle = loop {
            let Some(&next) = deps[at].iter().find(|d| stuck.contains(d)) else {
                break None;
            };
            if let Some(pos) = path.iter().position(|&p| p == next) {
                break path.get(pos..).map(<[usize]>::to_vec);
            }
            path.push(next);
            at = next;
        };
        let Some(mut cycle) = cycle else { continue };
        let members: BTreeSet<usize> = cycle.iter().copied().collect();
        if seen.contains(&members) {
            continue;
        }
        seen.push(members);
        // Start the cycle at its task first in the file, so it reads the same however found.
        if let Some(first) = cycle
            .iter()
            .enumerate()
            .min_by_key(|(_, t)| **t)
            .map(|(i, _)| i)
        {
            cycle.rotate_left(first);
        }
        found.push(
            cycle
                .iter()
                .filter_map(|&i| tasks.get(i))
                .map(|t| t.id.clone())
                .collect(),
        );
    }
    found
}

/// For each task, the indices of the tasks it depends on.
fn edges(tasks: &[Task]) -> Vec<Vec<usize>> {
    tasks
        .iter()
        .map(|t| {
            t.depends_on
                .iter()
                .filter_map(|d| tasks.iter().position(|o| &o.id == d))
                .collect()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::file::TaskPrompt;

    fn tasks(spec: &[(&str, &[&str])]) -> Vec<Task> {
        spec.iter()
            .enumerate()
            .map(|(i, (id, deps))| Task {
                id: TaskId::new(*id).unwrap(),
                title: id.to_string(),
                prompt: TaskPrompt::Inline("p".into()),
                depends_on: deps.iter().map(|d| TaskId::new(*d).unwrap()).collect(),
                may_edit: Vec::new(),
                touches: Vec::new(),
                max_cost_usd: None,
                acceptance_criteria: Vec::new(),
                line: i + 1,
            })
            .collect()
    }

    fn ids(tasks: &[Task], order: &[usize]) -> Vec<String> {
        order.iter().map(|&i| tasks[i].id.to_string()).collect()
    }

    #[test]
    fn without_dependencies_the_file_order_is_kept() {
        let t = tasks(&[("a", &[]), ("b", &[]), ("c", &[])]);
        let (order, left) = dependency_order(&t);
        assert_eq!(ids(&t, &order), ["a", "b", "c"]);
        assert!(left.is_empty());
    }

    #[test]
    fn a_task_waits_for_its_dependencies_and_no_longer() {
        let t = tasks(&[("a", &["c"]), ("b", &[]), ("c", &[]), ("d", &["a", "b"])]);
        let (order, _) = dependency_order(&t);
        assert_eq!(ids(&t, &order), ["b", "c", "a", "d"]);
    }

    #[test]
    fn a_chain_written_backwards_runs_forwards() {
        let t = tasks(&[("c", &["b"]), ("b", &["a"]), ("a", &[])]);
        let (order, _) = dependency_order(&t);
        assert_eq!(ids(&t, &order), ["a", "b", "c"]);
    }

    #[test]
    fn cycles_are_named_once_each_and_their_dependents_are_left_out() {
        let t = tasks(&[
            ("a", &["b"]),
            ("b", &["a"]),
            ("c", &["a"]),
            ("d", &[]),
            ("e", &["f"]),
            ("f", &["g"]),
            ("g", &["e"]),
            ("h", &["h"]),
        ]);
        let (order, left) = dependency_order(&t);
        assert_eq!(ids(&t, &order), ["d"]);
        assert_eq!(ids(&t, &left), ["a", "b", "c", "e", "f", "g", "h"]);
        let named: Vec<Vec<String>> = cycles(&t)
            .iter()
            .map(|c| c.iter().map(ToString::to_string).collect())
            .collect();
        assert_eq!(
            named,
            [vec!["a", "b"], vec!["e", "f", "g"], vec!["h"]],
            "each cycle once, from its task first in the file"
        );
    }

    #[test]
    fn no_cycle_no_names() {
        let t = tasks(&[("a", &[]), ("b", &["a"])]);
        assert!(cycles(&t).is_empty());
    }
}
