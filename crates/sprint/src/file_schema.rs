//! The JSON Schema of `corral-sprint.toml` (`docs/schema/corral-sprint.schema.json`), for
//! editors that validate TOML with one (taplo, Even Better TOML): built from the parser's own
//! key tables, so a key the parser accepts is a key the schema names, and a test keeps the
//! checked-in file current. The parser stays the judge (`corral sprint check`): the schema
//! cannot say that `prompt` and `brief` exclude each other or that a dependency names a task.

use corral_ports::{Effort, ProviderId};
use schemars::{Schema, SchemaGenerator, json_schema};
use serde_json::{Map, Value};

use crate::file::{FoldCheck, limits};
use crate::parse::{
    EVALUATOR_KEYS, GATE_KEYS, GENERATOR_KEYS, HOOK_KEYS, ROLES_KEYS, SPRINT_KEYS, TASK_KEYS,
    TOP_KEYS,
};

/// A whole number of milliseconds, or a duration as text (`"90s"`, `"15m"`), within `range`.
fn duration((min, max): (i64, i64), description: &str) -> Schema {
    json_schema!({
        "description": description,
        "anyOf": [
            {"type": "integer", "minimum": min, "maximum": max},
            {"type": "string", "description": "a duration such as \"90s\", \"5m\" or \"2h\""},
        ],
    })
}

fn text(description: &str) -> Schema {
    json_schema!({"type": "string", "minLength": 1, "description": description})
}

fn globs(description: &str) -> Schema {
    json_schema!({"type": "array", "items": {"type": "string"}, "description": description})
}

fn dollars(description: &str) -> Schema {
    let (min, max) = limits::COST_USD;
    json_schema!({"type": "number", "minimum": min, "maximum": max, "description": description})
}

fn whole((min, max): (i64, i64), description: &str) -> Schema {
    json_schema!({"type": "integer", "minimum": min, "maximum": max, "description": description})
}

/// The schema of one key of the table `table`; `None` for a key the schema does not know (a
/// test holds every key of the parser's tables to having one).
fn key_schema(generator: &mut SchemaGenerator, table: &str, key: &str) -> Option<Schema> {
    let schema = match (table, key) {
        ("sprint", "name") => text("The sprint's name: its record is .corral/sprints/<name>/."),
        ("sprint", "branch") => text("The branch it commits on (default corral/<name>)."),
        ("sprint", "check") => text("The command that must pass after every round (sh -c)."),
        ("sprint", "check_timeout_ms") => {
            duration(limits::TIMEOUT_MS, "How long the check may run.")
        }
        ("sprint", "setup") => text("A command run once before the first task (sh -c)."),
        ("sprint", "max_rounds") => whole(
            limits::MAX_ROUNDS,
            "Generator and evaluator rounds per task.",
        ),
        ("sprint", "max_attempts") => whole(
            limits::MAX_ATTEMPTS,
            "Runs of a task (after a regression or a crash) before it is blocked.",
        ),
        ("sprint", "transient_retries") => whole(
            limits::TRANSIENT_RETRIES,
            "Per round, reruns of a spawn that failed transiently (watchdog, wall clock, crash) \
             before the task is blocked; they count no round.",
        ),
        ("sprint", "protected") => globs("Paths the agents must not change (globs)."),
        ("sprint", "fold_check") => {
            let values: Vec<&str> = FoldCheck::ALL.iter().map(|f| f.as_str()).collect();
            json_schema!({
                "type": "string",
                "enum": values,
                "description": "With --jobs: whether the check (and the gates of the paths it changed) runs on the sprint's branch after each fold (each, the default) or not (off).",
            })
        }
        ("sprint", "max_cost_usd") => dollars(
            "The sprint's spend cap in US dollars: it pauses (exit 9) before a spawn once its spawns cost this much; raise it and run again to go on.",
        ),
        ("sprint", "max_budget_usd") => dollars(
            "Each spawn's spend cap in US dollars, passed to the CLIs that enforce one (Claude Code).",
        ),
        ("sprint", "max_turns") => whole(
            limits::MAX_TURNS,
            "Each spawn's turn cap, passed to the CLIs that enforce one (Claude Code, Grok CLI).",
        ),
        ("generator" | "evaluator", "provider") => {
            let one = generator.subschema_for::<ProviderId>();
            json_schema!({
                "description": "The CLI that plays the role, or several in failover order: when one's account is held by a rate limit longer than failover_after_ms, the next goes on.",
                "anyOf": [
                    one,
                    {"type": "array", "items": one, "minItems": 1, "uniqueItems": true},
                ],
            })
        }
        ("generator" | "evaluator", "model") => json_schema!({
            "description": "The model, in the provider's spelling; with several providers, a table with one per provider ({ claude = \"…\", codex = \"…\" }).",
            "anyOf": [
                {"type": "string", "minLength": 1},
                {"type": "object", "additionalProperties": {"type": "string", "minLength": 1}},
            ],
        }),
        ("generator" | "evaluator", "effort") => {
            let one = generator.subschema_for::<Effort>();
            json_schema!({
                "description": "How hard the model should think: one for every provider, or a table with one per provider.",
                "anyOf": [one, {"type": "object", "additionalProperties": one}],
            })
        }
        ("generator" | "evaluator", "failover_after_ms") => duration(
            limits::TIMEOUT_MS,
            "How long a rate-limit hold the role waits out before the next provider it lists takes over (default 15m).",
        ),
        ("evaluator", "enabled") => {
            json_schema!({"type": "boolean", "description": "Whether an evaluator reviews each round."})
        }
        ("gates", "path") => text("The directory whose changes the gate checks."),
        ("gates", "command") => {
            text("The command that must pass when that directory changed (sh -c).")
        }
        ("gates", "timeout_ms") => duration(limits::TIMEOUT_MS, "How long the gate may run."),
        ("hooks", "task_finished") => text(
            "Run (sh -c) when a task ends, done, blocked or skipped; the event is on its stdin as JSON.",
        ),
        ("hooks", "blocked") => {
            text("Run (sh -c) when a task is blocked; the event is on its stdin.")
        }
        ("hooks", "rate_limited") => {
            text("Run (sh -c) when the sprint pauses on a rate limit; the event is on its stdin.")
        }
        ("hooks", "budget_exhausted") => {
            text("Run (sh -c) when the sprint pauses at a spend cap; the event is on its stdin.")
        }
        ("hooks", "sprint_finished") => {
            text("Run (sh -c) when the sprint ends, however; the event is on its stdin.")
        }
        ("hooks", "timeout_ms") => duration(
            limits::HOOK_TIMEOUT_MS,
            "How long each hook may run before it is killed (default 30s).",
        ),
        ("tasks", "id") => text("The task's id (letters, digits, - and _)."),
        ("tasks", "title") => {
            text("The task's title: the commit subject unless the agent gives one.")
        }
        ("tasks", "prompt") => text("What the generator is asked to do (or brief)."),
        ("tasks", "brief") => {
            text("A file, relative to the sprint file, holding the prompt (or prompt).")
        }
        ("tasks", "depends_on") => json_schema!({
            "type": "array", "items": {"type": "string"},
            "description": "The ids of the tasks that must be done first."
        }),
        ("tasks", "may_edit") => {
            globs("Paths the task may change beyond the protected ones (globs).")
        }
        ("tasks", "max_cost_usd") => dollars(
            "The task's spend cap in US dollars, over all its spawns: the sprint pauses (exit 9) before its next spawn once reached.",
        ),
        ("tasks", "touches") => globs(
            "Paths the task is expected to change (globs); two tasks that overlap are not run at once.",
        ),
        ("tasks", "acceptance_criteria") => json_schema!({
            "type": "array", "items": {"type": "string", "minLength": 1},
            "description": "What the evaluator checks the work against, one statement each."
        }),
        _ => return None,
    };
    Some(schema)
}

/// A closed table of `keys`, each described by [`key_schema`] under `table`.
fn table(generator: &mut SchemaGenerator, table: &str, keys: &[&str], required: &[&str]) -> Value {
    let mut properties = Map::new();
    for key in keys {
        let schema = key_schema(generator, table, key).unwrap_or_default();
        properties.insert((*key).to_string(), schema.to_value());
    }
    serde_json::json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    })
}

/// The JSON Schema of `corral-sprint.toml`.
pub fn sprint_file_schema() -> Schema {
    let mut generator = SchemaGenerator::default();
    let sprint = table(&mut generator, "sprint", SPRINT_KEYS, &["name", "check"]);
    let generator_role = table(&mut generator, "generator", GENERATOR_KEYS, &["provider"]);
    let evaluator_role = table(&mut generator, "evaluator", EVALUATOR_KEYS, &[]);
    let gate = table(&mut generator, "gates", GATE_KEYS, &["path", "command"]);
    let task = table(&mut generator, "tasks", TASK_KEYS, &["id", "title"]);
    let hooks = table(&mut generator, "hooks", HOOK_KEYS, &[]);
    let mut roles = Map::new();
    for role in ROLES_KEYS {
        let schema = match *role {
            "generator" => generator_role.clone(),
            "evaluator" => evaluator_role.clone(),
            _ => Value::Object(Map::new()),
        };
        roles.insert((*role).to_string(), schema);
    }
    let mut top = Map::new();
    for key in TOP_KEYS {
        let schema = match *key {
            "sprint" => sprint.clone(),
            "roles" => serde_json::json!({
                "type": "object", "properties": roles, "required": ["generator"],
                "additionalProperties": false,
            }),
            "gates" => serde_json::json!({"type": "array", "items": gate}),
            "hooks" => hooks.clone(),
            "tasks" => serde_json::json!({"type": "array", "items": task, "minItems": 1}),
            _ => Value::Object(Map::new()),
        };
        top.insert((*key).to_string(), schema);
    }
    let mut root = json_schema!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "corral-sprint.toml",
        "description": "A Corral sprint: its tasks, the check every round must pass, the roles' providers. `corral sprint check` is the judge; this schema lets an editor point at a wrong key or type as you write.",
        "type": "object",
        "properties": top,
        "required": ["sprint", "roles", "tasks"],
        "additionalProperties": false,
    });
    let defs: Map<String, Value> = generator.take_definitions(true).into_iter().collect();
    if !defs.is_empty() {
        root.insert("$defs".into(), Value::Object(defs));
    }
    root
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_the_parser_accepts_has_a_schema() {
        let mut generator = SchemaGenerator::default();
        for (table, keys) in [
            ("sprint", SPRINT_KEYS),
            ("generator", GENERATOR_KEYS),
            ("evaluator", EVALUATOR_KEYS),
            ("gates", GATE_KEYS),
            ("hooks", HOOK_KEYS),
            ("tasks", TASK_KEYS),
        ] {
            for key in keys {
                assert!(
                    key_schema(&mut generator, table, key).is_some(),
                    "{table}.{key} has no schema"
                );
            }
        }
    }

    #[test]
    fn the_checked_in_sprint_file_schema_is_current() {
        let path = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../docs/schema/corral-sprint.schema.json");
        let fresh = serde_json::to_string_pretty(&sprint_file_schema()).unwrap() + "\n";
        if std::env::var_os("UPDATE_SCHEMA").is_some() {
            std::fs::write(&path, &fresh).unwrap();
        }
        let current = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            current == fresh,
            "docs/schema/corral-sprint.schema.json is stale; run `UPDATE_SCHEMA=1 cargo test -p corral-sprint schema` to refresh"
        );
    }
}
