//! The prompt section that tells the agent where to write `signals.json` and what to put in it.
//!
//! [`render_contract_section`] is the full section for the first prompt; the corrective message
//! reuses the short pieces ([`accepted_kinds_list`], [`minimal_example_block`]) so that both
//! always say the same thing. Everything is derived from the [`Contract`] and the per-kind prose in `signal.rs`;
//! the example document is [`Contract::example_document`], which tests validate for every
//! built-in contract.

use std::path::{Path, PathBuf};

use crate::contract::Contract;
use crate::document::{CURRENT_SCHEMA_VERSION, SIGNALS_FILE_MAX_BYTES};
use crate::markdown::{code, fenced};
use crate::signal::FieldDoc;

/// Renders the Markdown section that tells the agent exactly where (`signals_path`, made
/// absolute against the current directory if it is relative) and what to write for `contract`.
#[must_use]
pub fn render_contract_section(contract: &Contract, signals_path: &Path) -> String {
    let path = absolute(signals_path);
    let mut out = String::new();

    out.push_str("## Your result file\n\n");
    out.push_str(
        "Corral reads the outcome of this step from one JSON file and from nothing else: not your \
         final reply, not your terminal output. Before you finish, create this file with your \
         file-writing tool (overwrite it if it already exists):\n\n",
    );
    out.push_str(&fenced("text", &path.display().to_string()));
    out.push_str("\nWrite the whole document in one go:\n\n");
    out.push_str(&format!(
        "- UTF-8 JSON, at most 4 MB ({SIGNALS_FILE_MAX_BYTES} bytes).\n\
         - The root is an object with exactly two fields: `\"schemaVersion\": {CURRENT_SCHEMA_VERSION}` \
         and `\"signals\"`, a list of signal objects.\n\
         - Every signal has `\"type\"` (one of the kinds below), `\"timestamp\"` (the current \
         time as an RFC 3339 date-time, such as `2025-01-01T12:00:00Z`) and the fields of its \
         kind.\n\
         - Field names are camelCase. Unknown fields are rejected; leave an optional field out \
         rather than writing `null`.\n\n"
    ));

    out.push_str(&format!(
        "### Signal kinds this step accepts ({})\n\n",
        code(contract.name())
    ));
    if let Some(line) = exactly_one_of_line(contract) {
        out.push_str(&line);
        out.push_str("\n\n");
    }
    for (kind, multiplicity) in contract.kinds() {
        out.push_str(&format!(
            "- `{kind}` ({multiplicity}): {}",
            kind.description()
        ));
        let fields = kind.fields();
        if fields.is_empty() {
            out.push_str(" No other fields.\n");
        } else {
            out.push('\n');
            render_fields(&mut out, fields, 1);
        }
    }
    out.push_str("\nAny other kind is rejected.\n\n");

    out.push_str("### Example\n\n");
    out.push_str(
        "A complete, valid file for this step. The values are placeholders: report what you \
         actually did and found.\n\n",
    );
    out.push_str(&example_block(contract));
    out
}

fn render_fields(out: &mut String, fields: &[FieldDoc], depth: usize) {
    let indent = "  ".repeat(depth);
    for field in fields {
        let required = if field.required {
            "required"
        } else {
            "optional"
        };
        out.push_str(&format!(
            "{indent}- `{}` ({}, {required}): {}\n",
            field.name, field.ty, field.description
        ));
        render_fields(out, field.items, depth + 1);
    }
}

/// "The file needs exactly one signal of kind `a` or `b`, …" when the contract has such a group.
pub(crate) fn exactly_one_of_line(contract: &Contract) -> Option<String> {
    let group = contract.exactly_one_of();
    if group.is_empty() {
        return None;
    }
    let kinds: Vec<String> = group.iter().map(|kind| format!("`{kind}`")).collect();
    Some(format!(
        "The file needs exactly one signal of kind {}, and only one in total.",
        kinds.join(" or ")
    ))
}

/// One indented list line per accepted kind with its field signature, for the corrective
/// message: "  - `change` (any number): `path`, `summary`".
pub(crate) fn accepted_kinds_list(contract: &Contract) -> String {
    let mut out = String::new();
    for (kind, multiplicity) in contract.kinds() {
        let fields = kind.fields();
        let signature = if fields.is_empty() {
            "no other fields".to_owned()
        } else {
            field_signature(fields)
        };
        out.push_str(&format!("  - `{kind}` ({multiplicity}): {signature}\n"));
    }
    out
}

/// "`a`, `b`?, `c`: [{`d`, `e`?}]": names, `?` for optional, nested objects in brackets.
fn field_signature(fields: &[FieldDoc]) -> String {
    fields
        .iter()
        .map(|field| {
            let optional = if field.required { "" } else { "?" };
            if field.items.is_empty() {
                format!("`{}`{optional}", field.name)
            } else {
                format!(
                    "`{}`{optional}: [{{{}}}]",
                    field.name,
                    field_signature(field.items)
                )
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The contract's example document as a fenced JSON block.
pub(crate) fn example_block(contract: &Contract) -> String {
    fenced("json", &contract.example_document().to_json_pretty())
}

/// The contract's minimal example document as a fenced JSON block.
pub(crate) fn minimal_example_block(contract: &Contract) -> String {
    fenced(
        "json",
        &contract.minimal_example_document().to_json_pretty(),
    )
}

pub(crate) fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_owned())
}
