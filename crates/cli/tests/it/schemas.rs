//! Every JSON Corral writes or prints validates against its schema in `docs/schema/` (ADR
//! 0012): the lines of `corral run --json`, `run.json`, every line of `events.jsonl`,
//! `session.json`, `runs list --json`'s lines; the lines of `corral sprint run --json`,
//! `sprint.json`, `role-meta.json` and `sprint status --json`; `providers --json` and `config
//! show --json`. Real outputs of real runs, a Claude stand-in answering; the schemas are
//! generated from the types, so a field the types gained or renamed without the schema shows up
//! here. `sprint work --json`'s lines and its `worker.json` are checked in `sprint_work.rs`, a
//! rate-limit hold file in `account_gate.rs`, where real ones are made.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::support::*;

/// A schema of `docs/schema/`, compiled.
pub(crate) struct Schema {
    name: &'static str,
    schemas: boon::Schemas,
    index: boon::SchemaIndex,
}

impl Schema {
    pub(crate) fn load(name: &'static str) -> Self {
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../docs/schema")
            .join(name);
        let text = std::fs::read_to_string(&path).unwrap();
        let value: Value = serde_json::from_str(&text).unwrap();
        let url = format!("file:///docs/schema/{name}");
        let mut compiler = boon::Compiler::new();
        compiler.add_resource(&url, value).unwrap();
        let mut schemas = boon::Schemas::new();
        let index = compiler
            .compile(&url, &mut schemas)
            .unwrap_or_else(|e| panic!("{name} does not compile: {e}"));
        Schema {
            name,
            schemas,
            index,
        }
    }

    /// Panics naming the schema, what failed and the value, unless `value` is valid.
    pub(crate) fn check(&self, what: &str, value: &Value) {
        if let Err(e) = self.schemas.validate(value, self.index) {
            panic!("{what} does not match {}: {e:#}\n{value:#}", self.name);
        }
    }

    /// Each line of `text` a JSON value that is valid.
    pub(crate) fn check_lines(&self, what: &str, text: &str) -> usize {
        let mut n = 0;
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let value: Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("{what}: not JSON ({e}): {line}"));
            self.check(what, &value);
            n += 1;
        }
        n
    }
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// A Claude stand-in that announces its session, calls a tool, writes `signals` (when given)
/// and answers.
fn agent(env: &Env, signals: Option<&str>) -> FakeClaude {
    let before = signals.map_or(String::new(), |s| {
        format!("printf '%s' '{s}' > \"$SIGNALS\"")
    });
    FakeClaude::new(
        env,
        &before,
        &[
            FakeClaude::init("fake"),
            FakeClaude::text("Looking."),
            FakeClaude::tool_use("Write", serde_json::json!({"file_path": "x.txt"})),
            FakeClaude::result("Done.", 0.001),
        ],
        "",
    )
}

fn native() -> [(&'static str, &'static str); 2] {
    [
        ("CORRAL_SANDBOX__BACKEND", "native"),
        ("CORRAL_SANDBOX__ALLOW_DEGRADED_NATIVE", "true"),
    ]
}

#[test]
fn a_run_s_json_and_records_match_their_schemas() {
    let env = Env::new();
    let project = env.project();
    git(&project, &["init", "-q"]);
    let agent = agent(&env, Some(GOOD_SIGNALS));
    let (name, path) = agent.setting();
    let out = env
        .corral()
        .env(name, &path)
        .envs(native())
        .args(["run", "--json", "write x"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", transcript(&env, &out));
    let stdout = String::from_utf8(out.stdout.clone()).unwrap();
    let lines = Schema::load("run-output.schema.json").check_lines("corral run --json", &stdout);
    assert!(lines >= 4, "{stdout}");

    let dir = run_dir(&summary(&out.stdout));
    Schema::load("run.schema.json").check("run.json", &read_json(&dir.join("run.json")));
    Schema::load("session.schema.json")
        .check("session.json", &read_json(&dir.join("session.json")));
    let log = std::fs::read_to_string(dir.join("events.jsonl")).unwrap();
    let records = Schema::load("events.schema.json").check_lines("events.jsonl", &log);
    assert!(records >= 8, "{log}");

    let list = env
        .corral()
        .args(["runs", "list", "--json"])
        .output()
        .unwrap();
    assert!(list.status.success(), "{}", transcript(&env, &list));
    let runs_list = Schema::load("runs-list.schema.json");
    let listed =
        runs_list.check_lines("runs list --json", &String::from_utf8(list.stdout).unwrap());
    assert_eq!(listed, 1);
    // A record that cannot be read is listed as such, and still matches.
    let broken = project.join(".corral/runs/20261201T100000Z-claude-broken");
    std::fs::create_dir_all(&broken).unwrap();
    std::fs::write(broken.join("run.json"), "{not json").unwrap();
    let list = env
        .corral()
        .args(["runs", "list", "--json"])
        .output()
        .unwrap();
    let stdout = String::from_utf8(list.stdout).unwrap();
    assert!(stdout.contains(r#""unreadable":"#), "{stdout}");
    assert_eq!(runs_list.check_lines("runs list --json", &stdout), 2);
}

#[test]
fn providers_and_config_show_json_match_their_schemas() {
    let env = Env::new();
    env.write("project/corral.toml", "[run]\nprovider = \"codex\"\n");
    let providers = env.corral().args(["providers", "--json"]).output().unwrap();
    assert!(
        providers.status.success(),
        "{}",
        transcript(&env, &providers)
    );
    let value: Value = serde_json::from_slice(&providers.stdout).unwrap();
    assert_eq!(value.as_object().map(|m| m.len()), Some(6), "{value}");
    Schema::load("providers.schema.json").check("providers --json", &value);

    let config = env
        .corral()
        .env("CORRAL_RUN__IDLE_WATCHDOG_MS", "60000")
        .args(["config", "show", "--json"])
        .output()
        .unwrap();
    assert!(config.status.success(), "{}", transcript(&env, &config));
    let value: Value = serde_json::from_slice(&config.stdout).unwrap();
    let sources: Vec<&str> = value
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["source"].as_str())
        .collect();
    assert!(
        sources.iter().any(|s| s.ends_with("corral.toml"))
            && sources.contains(&"env CORRAL_RUN__IDLE_WATCHDOG_MS"),
        "{sources:?}"
    );
    Schema::load("config-show.schema.json").check("config show --json", &value);
}

#[test]
fn a_sprint_s_json_and_records_match_their_schemas() {
    let env = Env::new();
    let project = env.project();
    let signals = r#"{"schemaVersion":1,"signals":[{"type":"task-complete","timestamp":"2026-12-02T10:00:00Z"},{"type":"commit-message","timestamp":"2026-12-02T10:00:00Z","subject":"Write t1"}]}"#;
    let agent = agent(&env, Some(signals));
    let (name, path) = agent.setting();
    std::fs::write(
        project.join("corral-sprint.toml"),
        "[sprint]\nname = \"it\"\ncheck = \"true\"\nmax_rounds = 2\n\n\
         [roles.generator]\nprovider = \"claude\"\n\n\
         [roles.evaluator]\nprovider = \"claude\"\nenabled = false\n\n\
         [[tasks]]\nid = \"t1\"\ntitle = \"Write t1\"\nprompt = \"Write t1.txt.\"\n",
    )
    .unwrap();
    std::fs::write(project.join(".gitignore"), ".corral/\n").unwrap();
    git(&project, &["init", "-q", "-b", "main"]);
    git(&project, &["config", "user.email", "it@example.invalid"]);
    git(&project, &["config", "user.name", "it"]);
    git(&project, &["add", "-A"]);
    git(&project, &["commit", "-q", "-m", "start"]);

    let out = env
        .corral()
        .env(name, &path)
        .envs(native())
        .args(["sprint", "run", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", transcript(&env, &out));
    let stdout = String::from_utf8(out.stdout).unwrap();
    let events =
        Schema::load("sprint-events.schema.json").check_lines("corral sprint run --json", &stdout);
    assert!(events >= 4, "{stdout}");

    let record = project.join(".corral/sprints/it");
    Schema::load("sprint.schema.json")
        .check("sprint.json", &read_json(&record.join("sprint.json")));
    let role_meta = Schema::load("role-meta.schema.json");
    let mut metas = 0;
    for entry in walk(&record) {
        if entry.file_name().is_some_and(|n| n == "role-meta.json") {
            role_meta.check("role-meta.json", &read_json(&entry));
            metas += 1;
        }
    }
    assert!(metas >= 1, "no role-meta.json below {}", record.display());

    let status = env
        .corral()
        .args(["sprint", "status", "--json"])
        .output()
        .unwrap();
    assert!(status.status.success(), "{}", transcript(&env, &status));
    let status: Value = serde_json::from_slice(&status.stdout).unwrap();
    Schema::load("sprint-status.schema.json").check("sprint status --json", &status);
}

/// Every file below `dir`.
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for entry in std::fs::read_dir(&d).unwrap().flatten() {
            let path = entry.path();
            if entry.file_type().unwrap().is_dir() {
                todo.push(path);
            } else {
                found.push(path);
            }
        }
    }
    found
}

/// A TOML document as the JSON value an editor's schema check sees.
fn toml_to_json(item: &toml_edit::Item) -> Value {
    match item {
        toml_edit::Item::None => Value::Null,
        toml_edit::Item::Value(v) => toml_value(v),
        toml_edit::Item::Table(t) => Value::Object(
            t.iter()
                .map(|(k, v)| (k.to_string(), toml_to_json(v)))
                .collect(),
        ),
        toml_edit::Item::ArrayOfTables(a) => Value::Array(
            a.iter()
                .map(|t| toml_to_json(&toml_edit::Item::Table(t.clone())))
                .collect(),
        ),
    }
}

fn toml_value(v: &toml_edit::Value) -> Value {
    match v {
        toml_edit::Value::String(s) => Value::from(s.value().as_str()),
        toml_edit::Value::Integer(i) => Value::from(*i.value()),
        toml_edit::Value::Float(f) => Value::from(*f.value()),
        toml_edit::Value::Boolean(b) => Value::from(*b.value()),
        toml_edit::Value::Datetime(d) => Value::from(d.value().to_string()),
        toml_edit::Value::Array(a) => Value::Array(a.iter().map(toml_value).collect()),
        toml_edit::Value::InlineTable(t) => Value::Object(
            t.iter()
                .map(|(k, v)| (k.to_string(), toml_value(v)))
                .collect(),
        ),
    }
}

fn sprint_file_json(text: &str) -> Value {
    let doc: toml_edit::ImDocument<&str> = toml_edit::ImDocument::parse(text).unwrap();
    toml_to_json(&toml_edit::Item::Table(doc.as_table().clone()))
}

#[test]
fn the_sprint_file_init_writes_matches_its_schema_and_a_typo_does_not() {
    let env = Env::new();
    let out = env.corral().args(["sprint", "init"]).output().unwrap();
    assert!(out.status.success(), "{}", transcript(&env, &out));
    let text = std::fs::read_to_string(env.project().join("corral-sprint.toml")).unwrap();
    let schema = Schema::load("corral-sprint.schema.json");
    schema.check("the example of sprint init", &sprint_file_json(&text));
    let with_durations =
        text.replacen("check_timeout_ms = 900000", "check_timeout_ms = \"15m\"", 1);
    assert_ne!(with_durations, text, "the example sets check_timeout_ms");
    schema.check("a duration as text", &sprint_file_json(&with_durations));

    let typo = text.replacen("[sprint]\n", "[sprint]\nmax_round = 3\n", 1);
    assert!(
        schema
            .schemas
            .validate(&sprint_file_json(&typo), schema.index)
            .is_err(),
        "max_round (for max_rounds) must not validate"
    );
}
