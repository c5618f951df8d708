//! Module import cycles inside the crates that hold a supervised run (`corral-process`,
//! `corral-sandbox`, `corral-engine`): a circle of imports between a crate's modules means that
//! no module of it can be read, changed or moved without the others (issue 30).
//!
//! The graph is read from the source text, between top-level modules (`src/a.rs`, `src/a/…`):
//! an edge `a -> b` for every `crate::b` in `a` (in a `use` line, a group `crate::{b::X, c}`,
//! or a path written inline) and every `super::b` in a top-level file. Lines that are comments
//! and everything from the first `#[cfg(test)]` at the start of a line on are not read: a
//! test may reach any module. The crate root (`lib.rs`) and names that are not a module file
//! (re-exports from the root) add no edge.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use anyhow::Context;

use crate::shell;

/// The crates whose modules must not import each other in a circle.
pub const ACYCLIC_CRATES: &[&str] = &["crates/process", "crates/sandbox", "crates/engine"];

/// One import: where it is written, for the message.
#[derive(Debug, Clone)]
struct Site {
    file: String,
    line: usize,
}

/// The top-level modules of one crate and the first place each imports each other.
type Graph = BTreeMap<String, BTreeMap<String, Site>>;

/// Every module import cycle of the crates in [`ACYCLIC_CRATES`] under `root`, one message each.
pub fn check(root: &Path, found: &mut Vec<String>) -> anyhow::Result<()> {
    for krate in ACYCLIC_CRATES {
        let src = root.join(krate).join("src");
        if !src.is_dir() {
            continue;
        }
        let mut files = Vec::new();
        super::rust_files(&src, &mut files)?;
        files.sort();
        let mut sources = Vec::new();
        for file in &files {
            let text = std::fs::read_to_string(file)
                .with_context(|| format!("could not read {}", file.display()))?;
            let rel = shell::relative(&src, file);
            sources.push((shell::relative(root, file), rel, text));
        }
        found.extend(cycles(krate, &sources));
    }
    Ok(())
}

/// The cycles among `sources` (`(path from the workspace root, path from src/, text)`), one
/// message each, naming the crate, the circle and where each of its imports is written.
fn cycles(krate: &str, sources: &[(String, String, String)]) -> Vec<String> {
    let modules: BTreeSet<String> = sources
        .iter()
        .filter_map(|(_, rel, _)| top_module(rel))
        .collect();
    let mut graph = Graph::new();
    for (shown, rel, text) in sources {
        let Some(from) = top_module(rel) else {
            continue;
        };
        let nested = rel.contains('/');
        let edges = graph.entry(from.clone()).or_default();
        for (line, to) in imports(text, nested) {
            if to != from && modules.contains(&to) {
                edges.entry(to).or_insert(Site {
                    file: shown.clone(),
                    line,
                });
            }
        }
    }
    let mut messages = Vec::new();
    for component in strongly_connected(&graph) {
        if component.len() < 2 {
            continue;
        }
        let circle = circle_in(&graph, &component);
        let mut names: Vec<&str> = circle.iter().map(String::as_str).collect();
        names.push(&circle[0]);
        let sites: Vec<String> = circle
            .iter()
            .zip(circle.iter().cycle().skip(1))
            .filter_map(|(a, b)| {
                let site = graph.get(a)?.get(b)?;
                Some(format!("{}:{} `crate::{b}`", site.file, site.line))
            })
            .collect();
        let more = if component.len() > circle.len() {
            format!(
                "; these modules import each other: {}",
                component.join(", ")
            )
        } else {
            String::new()
        };
        messages.push(format!(
            "{krate}: module import cycle {} ({}){more}: move what both need so that one depends \
             on the other only",
            names.join(" -> "),
            sites.join(", ")
        ));
    }
    messages
}

/// The top-level module a file of `src/` belongs to; `None` for the crate root.
fn top_module(rel: &str) -> Option<String> {
    let first = rel.split('/').next()?;
    let name = first.strip_suffix(".rs").unwrap_or(first);
    (name != "lib" && name != "main").then(|| name.to_string())
}

/// The top-level modules `text` names through `crate::` (and `super::` in a top-level file,
/// `nested` false), with the line of each.
fn imports(text: &str, nested: bool) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (index, line) in text.lines().enumerate() {
        if line.starts_with("#[cfg(test)]") {
            break;
        }
        let code = line.trim_start();
        if code.starts_with("//") {
            continue;
        }
        let code = code.split(" //").next().unwrap_or(code);
        let mut prefixes = vec!["crate::"];
        if !nested {
            prefixes.push("super::");
        }
        for prefix in prefixes {
            for (at, _) in code.match_indices(prefix) {
                let before = code[..at].chars().next_back();
                if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                    continue;
                }
                let rest = &code[at + prefix.len()..];
                for name in first_segments(rest) {
                    found.push((index + 1, name));
                }
            }
        }
    }
    found
}

/// The first segment of the path that `rest` starts with, or of each path of a group
/// `{a::X, b}` (a group that goes on over the next lines is read as far as this line goes).
fn first_segments(rest: &str) -> Vec<String> {
    let ident = |s: &str| -> String {
        s.trim_start()
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    match rest.strip_prefix('{') {
        Some(group) => {
            let mut depth = 0usize;
            let mut items = vec![String::new()];
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => items.push(String::new()),
                    _ => {}
                }
                if let Some(item) = items.last_mut()
                    && !(c == ',' && depth == 0)
                {
                    item.push(c);
                }
            }
            items
                .iter()
                .map(|item| ident(item))
                .filter(|name| !name.is_empty() && name != "self")
                .collect()
        }
        None => {
            let name = ident(rest);
            if name.is_empty() {
                Vec::new()
            } else {
                vec![name]
            }
        }
    }
}

/// The strongly connected components of `graph` (Tarjan's algorithm), each sorted.
fn strongly_connected(graph: &Graph) -> Vec<Vec<String>> {
    struct State<'g> {
        graph: &'g Graph,
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        on_stack: BTreeSet<&'g str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'g>(s: &mut State<'g>, node: &'g str) {
        let next = s.index.len();
        s.index.insert(node, next);
        s.low.insert(node, next);
        s.stack.push(node);
        s.on_stack.insert(node);
        if let Some(edges) = s.graph.get(node) {
            for to in edges.keys() {
                let to = to.as_str();
                if !s.index.contains_key(to) {
                    visit(s, to);
                    let low = s.low[node].min(s.low[to]);
                    s.low.insert(node, low);
                } else if s.on_stack.contains(to) {
                    let low = s.low[node].min(s.index[to]);
                    s.low.insert(node, low);
                }
            }
        }
        if s.low[node] == s.index[node] {
            let mut component = Vec::new();
            while let Some(top) = s.stack.pop() {
                s.on_stack.remove(top);
                component.push(top.to_string());
                if top == node {
                    break;
                }
            }
            component.sort();
            s.out.push(component);
        }
    }
    let mut state = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for node in graph.keys() {
        if !state.index.contains_key(node.as_str()) {
            visit(&mut state, node);
        }
    }
    state.out.sort();
    state.out
}

/// One circle through the first module of `component`, by the shortest way back to it.
fn circle_in(graph: &Graph, component: &[String]) -> Vec<String> {
    let inside: BTreeSet<&str> = component.iter().map(String::as_str).collect();
    let start = component[0].as_str();
    // Breadth first from the start's successors back to the start.
    let mut came_from: BTreeMap<&str, &str> = BTreeMap::new();
    let mut queue = std::collections::VecDeque::from([start]);
    while let Some(node) = queue.pop_front() {
        for to in graph.get(node).into_iter().flat_map(|e| e.keys()) {
            let to = to.as_str();
            if !inside.contains(to) {
                continue;
            }
            if to == start {
                let mut path = vec![node.to_string()];
                let mut at = node;
                while at != start {
                    at = came_from[at];
                    path.push(at.to_string());
                }
                path.reverse();
                return path;
            }
            if !came_from.contains_key(to) {
                came_from.insert(to, node);
                queue.push_back(to);
            }
        }
    }
    component.to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source(rel: &str, text: &str) -> (String, String, String) {
        (
            format!("crates/x/src/{rel}"),
            rel.to_string(),
            text.to_string(),
        )
    }

    #[test]
    fn reads_use_lines_groups_inline_paths_and_super() {
        let text = "//! T.\nuse crate::a::X;\npub(crate) use crate::{b::Y, c, self};\n\
                    // crate::d::Z in a comment\nfn f() { crate::e::g(); some_crate::h::i(); }\n\
                    use super::f;\n#[cfg(test)]\nmod tests { use crate::z; }\n";
        let names: Vec<String> = imports(text, false).into_iter().map(|(_, n)| n).collect();
        assert_eq!(names, ["a", "b", "c", "e", "f"]);
        let nested: Vec<String> = imports(text, true).into_iter().map(|(_, n)| n).collect();
        assert_eq!(nested, ["a", "b", "c", "e"]);
    }

    #[test]
    fn names_a_cycle_with_its_sites() {
        let sources = [
            source("lib.rs", "//! R.\npub use crate::a::A;\n"),
            source("a.rs", "//! A.\nuse crate::b::B;\n"),
            source("b/mod.rs", "//! B.\nuse crate::c::C;\n"),
            source("b/inner.rs", "//! I.\nuse super::x;\n"),
            source(
                "c.rs",
                "//! C.\nfn f() { crate::a::g() }\nuse crate::Root;\n",
            ),
            source("d.rs", "//! D.\nuse crate::a::A;\n"),
        ];
        assert_eq!(
            cycles("crates/x", &sources),
            [
                "crates/x: module import cycle a -> b -> c -> a (crates/x/src/a.rs:2 `crate::b`, \
                 crates/x/src/b/mod.rs:2 `crate::c`, crates/x/src/c.rs:2 `crate::a`): move what \
                 both need so that one depends on the other only"
            ]
        );
        let acyclic = [
            source("a.rs", "//! A.\nuse crate::b::B;\n"),
            source("b.rs", "//! B.\nuse super::c;\n"),
            source("c.rs", "//! C.\n"),
        ];
        assert_eq!(cycles("crates/x", &acyclic), Vec::<String>::new());
    }
}
