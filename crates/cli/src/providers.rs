//! `corral providers`: the capability table, rendered from what each adapter declares.

use corral_compose::capabilities;
use corral_ports::{Capabilities, CostReporting, Gate, PromptChannel, ProviderId, SessionIdTiming};

use crate::exit::Exit;
use crate::term::outln;

fn gate(g: Gate) -> &'static str {
    match g {
        Gate::EditFiles => "edit files",
        Gate::RunShell => "run shell",
        Gate::WebAccess => "web access",
        Gate::ExtraRoots => "extra roots",
    }
}

fn yes(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}

fn row(
    label: &str,
    cell: impl Fn(&Capabilities) -> String,
    caps: &[(ProviderId, Capabilities)],
) -> Vec<String> {
    std::iter::once(label.to_string())
        .chain(caps.iter().map(|(_, c)| cell(c)))
        .collect()
}

/// The table and the named over-grants, as Markdown.
pub fn render() -> String {
    let caps: Vec<(ProviderId, Capabilities)> = ProviderId::ALL
        .iter()
        .map(|&id| (id, capabilities(id)))
        .collect();
    let mut out = String::new();
    let header: Vec<&str> = std::iter::once("")
        .chain(caps.iter().map(|(id, _)| id.as_str()))
        .collect();
    let rows = [
        row(
            "prompt",
            |c| {
                match c.prompt {
                    PromptChannel::Stdin => "stdin",
                    PromptChannel::PointerFile => "pointer file",
                }
                .to_string()
            },
            &caps,
        ),
        row(
            "session id",
            |c| {
                match c.session_id {
                    SessionIdTiming::MintedUpFront => "minted up front",
                    SessionIdTiming::FirstLine => "first line",
                    SessionIdTiming::FirstEvent => "first event",
                    SessionIdTiming::LastLine => "last line",
                    SessionIdTiming::Never => "none",
                }
                .to_string()
            },
            &caps,
        ),
        row("headless resume", |c| yes(c.resume).to_string(), &caps),
        row("effort forwarded", |c| yes(c.effort).to_string(), &caps),
        row(
            "cost reported",
            |c| {
                match c.cost {
                    CostReporting::TokensAndUsd => "tokens + USD",
                    CostReporting::TokensOnly => "tokens",
                    CostReporting::PremiumRequests => "premium requests",
                    CostReporting::None => "none",
                }
                .to_string()
            },
            &caps,
        ),
        row(
            "streams while working",
            |c| yes(c.streaming).to_string(),
            &caps,
        ),
        row(
            "always ends with a terminal event",
            |c| yes(c.always_terminal_event).to_string(),
            &caps,
        ),
        row(
            "gates enforced",
            |c| {
                if c.enforced_gates.is_empty() {
                    "none".to_string()
                } else {
                    c.enforced_gates
                        .iter()
                        .map(|g| gate(*g))
                        .collect::<Vec<_>>()
                        .join(", ")
                }
            },
            &caps,
        ),
        row(
            "gates over-granted",
            |c| {
                if c.over_grants.is_empty() {
                    "none".to_string()
                } else {
                    c.over_grants
                        .iter()
                        .map(|(g, _)| gate(*g))
                        .collect::<Vec<_>>()
                        .join(", ")
                }
            },
            &caps,
        ),
    ];
    // A Markdown table aligned by display width (comfy-table), readable as text too.
    let mut table = comfy_table::Table::new();
    table.load_style(comfy_table::presets::ASCII_MARKDOWN);
    table.set_header(header);
    table.add_rows(rows);
    for line in table.lines() {
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out.push_str("\nOver-grants, as each adapter names them:\n\n");
    for (id, c) in &caps {
        for (g, why) in c.over_grants {
            out.push_str(&format!(
                "- **{id}, {}**: {}\n",
                gate(*g),
                why.split_whitespace().collect::<Vec<_>>().join(" ")
            ));
        }
    }
    out
}

/// Prints the table.
pub fn print(json: bool) -> anyhow::Result<Exit> {
    if json {
        let all: crate::json_lines::ProvidersJson = ProviderId::ALL
            .iter()
            .map(|&id| (id.as_str().to_string(), capabilities(id)))
            .collect();
        outln!("{}", crate::term::json_pretty(&all)?);
    } else {
        outln!("{}", render().trim_end_matches('\n'));
    }
    Ok(Exit::Success)
}
