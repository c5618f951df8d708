//! From the sprint file's text to a [`SprintFile`], or to every [`Diagnostic`] found.
//!
//! The TOML is read with its spans kept (`toml_edit`), and walked by hand rather than through
//! serde: serde stops at the first error and forgets where a value was, while a person fixing
//! a sprint file wants every problem at once, each with its line. Each check records its
//! diagnostic and goes on with what it can still check.

use std::ops::Range;
use std::path::Path;

use corral_ports::{Effort, ProviderId};
use toml_edit::{ImDocument, Item, TableLike, Value};

use crate::diagnostic::{Diagnostic, Rule, did_you_mean, line_col};
use crate::file::{
    FoldCheck, Gate, Hooks, ProviderChoice, RoleSettings, SprintFile, SprintFileError,
    SprintSection, Task, Usd, limits,
};
use crate::names::{SprintName, TaskId};

pub(crate) const TOP_KEYS: &[&str] = &["sprint", "roles", "gates", "hooks", "tasks"];
pub(crate) const SPRINT_KEYS: &[&str] = &[
    "name",
    "branch",
    "check",
    "check_timeout_ms",
    "setup",
    "max_rounds",
    "max_attempts",
    "transient_retries",
    "protected",
    "fold_check",
    "max_cost_usd",
    "max_budget_usd",
    "max_turns",
];
pub(crate) const ROLES_KEYS: &[&str] = &["generator", "evaluator"];
pub(crate) const GENERATOR_KEYS: &[&str] = &["provider", "model", "effort", "failover_after_ms"];
pub(crate) const EVALUATOR_KEYS: &[&str] = &[
    "enabled",
    "provider",
    "model",
    "effort",
    "failover_after_ms",
];
pub(crate) const GATE_KEYS: &[&str] = &["path", "command", "timeout_ms"];
pub(crate) const HOOK_KEYS: &[&str] = &[
    "task_finished",
    "blocked",
    "rate_limited",
    "budget_exhausted",
    "sprint_finished",
    "timeout_ms",
];
pub(crate) use tasks::TASK_KEYS;
/// Validates the sprint file `path` whose text is `src`; briefs are read relative to its
/// directory.
pub(crate) fn parse(path: &Path, src: &str) -> Result<SprintFile, SprintFileError> {
    let mut cx = Cx {
        file: path,
        src,
        found: Vec::new(),
    };
    let doc = match ImDocument::parse(src) {
        Ok(doc) => doc,
        Err(e) => {
            cx.report(e.span(), "", Rule::Syntax, e.message().trim().to_string());
            return Err(cx.into_error());
        }
    };
    let root = doc.as_table();
    cx.unknown_keys(root, "", TOP_KEYS);
    let sprint = cx.table(root, "", "sprint", true, None);
    let sprint = sprint.and_then(|(t, at)| cx.sprint_section(t, at));
    let roles = cx.table(root, "", "roles", true, None);
    let (generator, evaluator) = match roles {
        Some((roles, at)) => cx.roles(roles, at),
        None => (None, None),
    };
    let default_timeout = sprint
        .as_ref()
        .map_or(limits::DEFAULT_CHECK_TIMEOUT_MS, |s| s.check_timeout_ms);
    let gates = cx.gates(root, default_timeout);
    let hooks = match cx.table(root, "", "hooks", false, None) {
        Some((t, _)) => cx.hooks(t),
        None => Some(Hooks::default()),
    };
    let entries = cx.tasks(root);
    cx.cross_check(&entries);
    match (sprint, generator, evaluator, hooks) {
        (Some(sprint), Some(generator), Some(evaluator), Some(hooks)) if cx.found.is_empty() => {
            Ok(SprintFile {
                path: path.to_path_buf(),
                sprint,
                generator,
                hooks,
                evaluator,
                gates,
                tasks: entries.into_iter().filter_map(|e| e.task).collect(),
            })
        }
        _ => Err(cx.into_error()),
    }
}

/// Where a value is in the text.
type Span = Option<Range<usize>>;

/// One `[[tasks]]` entry as far as it could be read.
struct Entry {
    /// Its place in the array, from 0.
    index: usize,
    /// The line of its header.
    line: usize,
    /// Its id, when valid.
    id: Option<TaskId>,
    /// Its valid dependencies, each with its span.
    deps: Vec<(TaskId, Span)>,
    /// The task, when every part of it is valid.
    task: Option<Task>,
}

/// The span of the first key of `table` (where an implied table effectively starts).
fn first_span(table: &dyn TableLike) -> Span {
    let (name, _) = table.iter().next()?;
    let (key, item) = table.get_key_value(name)?;
    key.span().or_else(|| item.span())
}

/// The walk's state: where the text came from and what was found wrong so far.
struct Cx<'a> {
    file: &'a Path,
    src: &'a str,
    found: Vec<Diagnostic>,
}

/// A dotted key below `parent`.
fn join(parent: &str, key: &str) -> String {
    if parent.is_empty() {
        key.to_string()
    } else {
        format!("{parent}.{key}")
    }
}

/// What a TOML value is, as a person would say it.
fn kind(item: &Item) -> &'static str {
    match item {
        Item::None => "nothing",
        Item::Table(_) => "a table",
        Item::ArrayOfTables(_) => "an array of tables",
        Item::Value(v) => match v {
            Value::String(_) => "a string",
            Value::Integer(_) => "an integer",
            Value::Float(_) => "a float",
            Value::Boolean(_) => "a boolean",
            Value::Datetime(_) => "a date-time",
            Value::Array(_) => "an array",
            Value::InlineTable(_) => "a table",
        },
    }
}

/// The names of the five providers, for messages.
fn provider_names() -> Vec<&'static str> {
    ProviderId::ALL.iter().map(|p| p.as_str()).collect()
}

/// Every effort, through an exhaustive match so that a new one is not forgotten here.
fn efforts() -> [Effort; 3] {
    let all = [Effort::Low, Effort::Medium, Effort::High];
    for e in all {
        match e {
            Effort::Low | Effort::Medium | Effort::High => {}
        }
    }
    all
}

impl Cx<'_> {
    fn report(&mut self, span: Option<Range<usize>>, key: &str, rule: Rule, message: String) {
        let (line, column) = line_col(self.src, span.map_or(0, |s| s.start));
        self.found.push(Diagnostic {
            file: self.file.to_path_buf(),
            line,
            column,
            key: key.to_string(),
            rule,
            message,
        });
    }

    fn into_error(mut self) -> SprintFileError {
        self.found.sort_by_key(|d| (d.line, d.column));
        SprintFileError::Invalid {
            path: self.file.to_path_buf(),
            diagnostics: self.found,
        }
    }

    /// Where `key` of `table` is: its key, else its value.
    fn span_of(table: &dyn TableLike, key: &str) -> Option<Range<usize>> {
        let (k, item) = table.get_key_value(key)?;
        k.span().or_else(|| item.span())
    }

    /// Reports every key of `table` that is not in `known`, with the closest known one.
    fn unknown_keys(&mut self, table: &dyn TableLike, path: &str, known: &[&str]) {
        for (name, _) in table.iter() {
            if known.contains(&name) {
                continue;
            }
            let hint = did_you_mean(name, known.iter().copied()).map_or(String::new(), |m| {
                format!("; did you mean {}?", join(path, m))
            });
            let within = if path.is_empty() {
                "the top level".to_string()
            } else {
                format!("[{path}]")
            };
            self.report(
                Self::span_of(table, name),
                &join(path, name),
                Rule::UnknownKey,
                format!("unknown key{hint} ({within} has {})", known.join(", ")),
            );
        }
    }

    /// The table at `key` of `parent`, with where it starts (its header; for a table only
    /// implied by a dotted header below it, `at`); a missing required one or a value that is
    /// no table is reported at `at`.
    fn table<'t>(
        &mut self,
        parent: &'t dyn TableLike,
        path: &str,
        key: &str,
        required: bool,
        at: Option<Range<usize>>,
    ) -> Option<(&'t dyn TableLike, Option<Range<usize>>)> {
        let full = join(path, key);
        match parent.get(key) {
            None => {
                if required {
                    self.report(
                        at,
                        &full,
                        Rule::MissingKey,
                        format!("the [{full}] table is missing"),
                    );
                }
                None
            }
            Some(item) => match item.as_table_like() {
                Some(table) => {
                    // A `[header]` table starts at its bracket; an inline one at its key.
                    let header = if item.is_table() { item.span() } else { None };
                    let start = header
                        .or_else(|| Self::span_of(parent, key))
                        .or_else(|| item.span())
                        .or_else(|| first_span(table))
                        .or(at);
                    Some((table, start))
                }
                None => {
                    self.report(
                        Self::span_of(parent, key),
                        &full,
                        Rule::WrongType,
                        format!("is {}, expected a table", kind(item)),
                    );
                    None
                }
            },
        }
    }

    /// A string at `key`: `None` when absent (reported when `required`) or not a string, or
    /// empty (reported).
    fn string(
        &mut self,
        table: &dyn TableLike,
        path: &str,
        key: &str,
        required: bool,
        at: Option<Range<usize>>,
    ) -> Option<(String, Option<Range<usize>>)> {
        let full = join(path, key);
        let Some(item) = table.get(key) else {
            if required {
                self.report(at, &full, Rule::MissingKey, format!("{key} is missing"));
            }
            return None;
        };
        let span = Self::span_of(table, key);
        match item.as_str() {
            Some(s) if s.trim().is_empty() => {
                self.report(span, &full, Rule::Empty, "is empty".to_string());
                None
            }
            Some(s) => Some((s.to_string(), span)),
            None => {
                self.report(
                    span,
                    &full,
                    Rule::WrongType,
                    format!("is {}, expected a string", kind(item)),
                );
                None
            }
        }
    }

    /// An amount of dollars at `key` within [`limits::COST_USD`]: `Ok(None)` when absent,
    /// `Err` (reported) when it is no number or out of range.
    pub(crate) fn dollars(
        &mut self,
        table: &dyn TableLike,
        path: &str,
        key: &str,
    ) -> Result<Option<Usd>, ()> {
        let Some(item) = table.get(key) else {
            return Ok(None);
        };
        let full = join(path, key);
        let span = Self::span_of(table, key);
        #[allow(clippy::cast_precision_loss)]
        let value = item
            .as_float()
            .or_else(|| item.as_integer().map(|n| n as f64));
        let Some(value) = value else {
            self.report(
                span,
                &full,
                Rule::WrongType,
                format!("is {}, expected a number of US dollars", kind(item)),
            );
            return Err(());
        };
        let (min, max) = limits::COST_USD;
        match Usd::from_dollars(value).filter(|_| (min..=max).contains(&value)) {
            Some(usd) => Ok(Some(usd)),
            None => {
                self.report(
                    span,
                    &full,
                    Rule::OutOfRange,
                    format!("is {value}; it must be from {min} to {max} (US dollars)"),
                );
                Err(())
            }
        }
    }

    /// A whole number at `key` within `range` (both ends included), or `default` when absent;
    /// `None` (reported) when it is no integer or out of range.
    fn number(
        &mut self,
        table: &dyn TableLike,
        path: &str,
        key: &str,
        (min, max): (i64, i64),
        default: u64,
    ) -> Option<u64> {
        let full = join(path, key);
        let Some(item) = table.get(key) else {
            return Some(default);
        };
        let span = Self::span_of(table, key);
        // A `*_ms` key takes a duration as text too, as the settings' keys and the flags do.
        let millis = key.ends_with("_ms");
        let n = match (item.as_integer(), item.as_str()) {
            (Some(n), _) => n,
            (None, Some(text)) if millis => match humantime::parse_duration(text.trim()) {
                Ok(d) => i64::try_from(d.as_millis()).unwrap_or(i64::MAX),
                Err(_) => {
                    self.report(
                        span,
                        &full,
                        Rule::WrongType,
                        format!(
                            "is {text:?}, expected a whole number of milliseconds or a duration such as \"90s\", \"5m\" or \"2h\""
                        ),
                    );
                    return None;
                }
            },
            (None, _) => {
                self.report(
                    span,
                    &full,
                    Rule::WrongType,
                    format!("is {}, expected a whole number", kind(item)),
                );
                return None;
            }
        };
        if n < min || n > max {
            self.report(
                span,
                &full,
                Rule::OutOfRange,
                format!("is {n}; it must be from {min} to {max}"),
            );
            return None;
        }
        u64::try_from(n).ok()
    }

    fn sprint_section(
        &mut self,
        t: &dyn TableLike,
        at: Option<Range<usize>>,
    ) -> Option<SprintSection> {
        self.unknown_keys(t, "sprint", SPRINT_KEYS);
        let name = self
            .string(t, "sprint", "name", true, at.clone())
            .and_then(|(name, span)| match SprintName::new(name.as_str()) {
                Ok(name) => Some(name),
                Err(e) => {
                    self.report(span, "sprint.name", Rule::BadName, format!("{name:?} {e}"));
                    None
                }
            });
        let branch = match self.string(t, "sprint", "branch", false, at.clone()) {
            Some((branch, span)) => match branch_problem(&branch) {
                Some(why) => {
                    self.report(
                        span,
                        "sprint.branch",
                        Rule::BadBranch,
                        format!("{branch:?} {why}"),
                    );
                    None
                }
                None => Some(branch),
            },
            None => name.as_ref().map(|n| format!("corral/{n}")),
        };
        let check = self.string(t, "sprint", "check", true, at.clone());
        let check_timeout_ms = self.number(
            t,
            "sprint",
            "check_timeout_ms",
            limits::TIMEOUT_MS,
            limits::DEFAULT_CHECK_TIMEOUT_MS,
        );
        let setup = self.string(t, "sprint", "setup", false, at).map(|(s, _)| s);
        let max_rounds = self.number(
            t,
            "sprint",
            "max_rounds",
            limits::MAX_ROUNDS,
            u64::from(limits::DEFAULT_MAX_ROUNDS),
        );
        let max_attempts = self.number(
            t,
            "sprint",
            "max_attempts",
            limits::MAX_ATTEMPTS,
            u64::from(limits::DEFAULT_MAX_ATTEMPTS),
        );
        let transient_retries = self.number(
            t,
            "sprint",
            "transient_retries",
            limits::TRANSIENT_RETRIES,
            u64::from(limits::DEFAULT_TRANSIENT_RETRIES),
        );
        let protected = self.globs(t, "sprint", "protected");
        let fold_check = match self.string(t, "sprint", "fold_check", false, None) {
            None if t.get("fold_check").is_none() => Some(FoldCheck::default()),
            None => None,
            Some((value, span)) => {
                let found = FoldCheck::ALL.into_iter().find(|f| f.as_str() == value);
                if found.is_none() {
                    let names: Vec<&str> = FoldCheck::ALL.iter().map(|f| f.as_str()).collect();
                    self.report(
                        span,
                        "sprint.fold_check",
                        Rule::UnknownFoldCheck,
                        format!("{value:?} is not one of {}", names.join(", ")),
                    );
                }
                found
            }
        };
        let max_cost_usd = self.dollars(t, "sprint", "max_cost_usd");
        let max_budget_usd = self.dollars(t, "sprint", "max_budget_usd");
        let max_turns = self.number(t, "sprint", "max_turns", limits::MAX_TURNS, 0);
        Some(SprintSection {
            name: name?,
            branch: branch?,
            check: check?.0,
            check_timeout_ms: check_timeout_ms?,
            setup,
            max_rounds: u32::try_from(max_rounds?).ok()?,
            max_attempts: u32::try_from(max_attempts?).ok()?,
            transient_retries: u32::try_from(transient_retries?).ok()?,
            protected: protected?,
            fold_check: fold_check?,
            max_cost_usd: max_cost_usd.ok()?,
            max_budget_usd: max_budget_usd.ok()?,
            // Absent is 0, below the range a written value must be in.
            max_turns: u32::try_from(max_turns?).ok().filter(|&n| n > 0),
        })
    }

    /// `[hooks]`: a command per moment, and their time; `None` when a value is wrong
    /// (reported).
    fn hooks(&mut self, t: &dyn TableLike) -> Option<Hooks> {
        self.unknown_keys(t, "hooks", HOOK_KEYS);
        let command = |cx: &mut Self, key: &str| {
            let bad = t.get(key).is_some();
            match cx.string(t, "hooks", key, false, None) {
                Some((s, _)) => Ok(Some(s)),
                None if bad => Err(()),
                None => Ok(None),
            }
        };
        let task_finished = command(self, "task_finished");
        let blocked = command(self, "blocked");
        let rate_limited = command(self, "rate_limited");
        let budget_exhausted = command(self, "budget_exhausted");
        let sprint_finished = command(self, "sprint_finished");
        let timeout_ms = self.number(
            t,
            "hooks",
            "timeout_ms",
            limits::HOOK_TIMEOUT_MS,
            limits::DEFAULT_HOOK_TIMEOUT_MS,
        );
        Some(Hooks {
            task_finished: task_finished.ok()?,
            blocked: blocked.ok()?,
            rate_limited: rate_limited.ok()?,
            budget_exhausted: budget_exhausted.ok()?,
            sprint_finished: sprint_finished.ok()?,
            timeout_ms: timeout_ms?,
        })
    }

    /// `[roles]`: the generator, and the evaluator (`Some(None)` when turned off).
    fn roles(
        &mut self,
        roles: &dyn TableLike,
        at: Option<Range<usize>>,
    ) -> (Option<RoleSettings>, Option<Option<RoleSettings>>) {
        self.unknown_keys(roles, "roles", ROLES_KEYS);
        let generator = self
            .table(roles, "roles", "generator", true, at.clone())
            .and_then(|(g, g_at)| {
                self.unknown_keys(g, "roles.generator", GENERATOR_KEYS);
                self.role(g, "roles.generator", g_at)
            });
        let evaluator = match self.table(roles, "roles", "evaluator", false, at) {
            // Without its own table, the evaluator is the generator's agent.
            None if roles.get("evaluator").is_none() => generator.clone().map(Some),
            None => None,
            Some((e, e_at)) => self.evaluator(e, e_at),
        };
        (generator, evaluator)
    }

    /// `[roles.evaluator]`: `Some(None)` when `enabled = false`.
    fn evaluator(
        &mut self,
        e: &dyn TableLike,
        at: Option<Range<usize>>,
    ) -> Option<Option<RoleSettings>> {
        self.unknown_keys(e, "roles.evaluator", EVALUATOR_KEYS);
        let enabled = match e.get("enabled") {
            None => true,
            Some(item) => match item.as_bool() {
                Some(b) => b,
                None => {
                    self.report(
                        Self::span_of(e, "enabled"),
                        "roles.evaluator.enabled",
                        Rule::WrongType,
                        format!("is {}, expected true or false", kind(item)),
                    );
                    return None;
                }
            },
        };
        if enabled {
            self.role(e, "roles.evaluator", at).map(Some)
        } else {
            Some(None)
        }
    }

    /// `[roles.<role>]`: `provider` (one name, or several in failover order), `model` and
    /// `effort` (one value, or a table with one per provider), `failover_after_ms`.
    fn role(
        &mut self,
        t: &dyn TableLike,
        path: &str,
        at: Option<Range<usize>>,
    ) -> Option<RoleSettings> {
        let providers = self.providers(t, path, at);
        let listed = providers.as_deref().unwrap_or_default();
        let models = self.per_provider(t, path, "model", listed, |text| Ok(text.to_string()));
        let effort_of = self.per_provider(t, path, "effort", listed, |name| {
            efforts()
                .into_iter()
                .find(|e| e.as_str() == name)
                .ok_or_else(|| {
                    let names: Vec<&str> = efforts().iter().map(|e| e.as_str()).collect();
                    (
                        Rule::UnknownEffort,
                        format!("{name:?} is not one of {}", names.join(", ")),
                    )
                })
        });
        let failover_after_ms = self.number(
            t,
            path,
            "failover_after_ms",
            limits::TIMEOUT_MS,
            limits::DEFAULT_FAILOVER_AFTER_MS,
        );
        let (providers, mut models, mut effort_of) = (providers?, models?, effort_of?);
        let mut choices = providers.into_iter().map(|provider| ProviderChoice {
            provider,
            model: models.remove(&provider),
            effort: effort_of.remove(&provider),
        });
        let first = choices.next()?;
        Some(RoleSettings {
            provider: first.provider,
            model: first.model,
            effort: first.effort,
            failover: choices.collect(),
            failover_after_ms: failover_after_ms?,
        })
    }

    /// `provider`: one provider's name, or an array of them in failover order (none twice).
    fn providers(
        &mut self,
        t: &dyn TableLike,
        path: &str,
        at: Option<Range<usize>>,
    ) -> Option<Vec<ProviderId>> {
        let full = join(path, "provider");
        let Some(item) = t.get("provider") else {
            self.report(
                at,
                &full,
                Rule::MissingKey,
                "provider is missing".to_string(),
            );
            return None;
        };
        let span = Self::span_of(t, "provider");
        let named: Vec<(String, String, Span)> = match item.as_value() {
            Some(Value::String(name)) => vec![(full.clone(), name.value().clone(), span)],
            Some(Value::Array(array)) if !array.is_empty() => {
                let mut named = Vec::new();
                for (i, v) in array.iter().enumerate() {
                    let key = format!("{full}[{i}]");
                    match v.as_str() {
                        Some(name) => {
                            named.push((key, name.to_string(), v.span().or(span.clone())))
                        }
                        None => {
                            self.report(
                                v.span().or(span),
                                &key,
                                Rule::WrongType,
                                format!(
                                    "is {}, expected a provider's name",
                                    kind(&Item::Value(v.clone()))
                                ),
                            );
                            return None;
                        }
                    }
                }
                named
            }
            Some(Value::Array(_)) => {
                self.report(
                    span,
                    &full,
                    Rule::Empty,
                    "is an empty array: name at least one provider".to_string(),
                );
                return None;
            }
            _ => {
                self.report(
                    span,
                    &full,
                    Rule::WrongType,
                    format!(
                        "is {}, expected a provider's name or an array of them in failover order (provider = [\"claude\", \"codex\"])",
                        kind(item)
                    ),
                );
                return None;
            }
        };
        let mut found = Vec::new();
        let mut ok = true;
        for (key, name, at) in named {
            match ProviderId::ALL.into_iter().find(|p| p.as_str() == name) {
                Some(p) if found.contains(&p) => {
                    ok = false;
                    self.report(
                        at,
                        &key,
                        Rule::WrongType,
                        format!("names {name:?} twice: each provider goes on once, in order"),
                    );
                }
                Some(p) => found.push(p),
                None => {
                    ok = false;
                    let names = provider_names();
                    let hint = did_you_mean(&name, names.iter().copied())
                        .map_or(String::new(), |m| format!("; did you mean {m:?}?"));
                    self.report(
                        at,
                        &key,
                        Rule::UnknownProvider,
                        format!("{name:?} is not one of {}{hint}", names.join(", ")),
                    );
                }
            }
        }
        ok.then_some(found)
    }

    /// `key` (`model`, `effort`) per provider of `providers`: one string for the only provider
    /// (`effort`: for all of them), or a table keyed by the providers' names. A model is one
    /// provider's: with several providers it must be a table, so that no CLI is handed a model
    /// another one serves. `None` when something was reported.
    fn per_provider<T>(
        &mut self,
        t: &dyn TableLike,
        path: &str,
        key: &str,
        providers: &[ProviderId],
        read: impl Fn(&str) -> Result<T, (Rule, String)>,
    ) -> Option<std::collections::HashMap<ProviderId, T>>
    where
        T: Clone,
    {
        let full = join(path, key);
        let mut out = std::collections::HashMap::new();
        let Some(item) = t.get(key) else {
            return Some(out);
        };
        let span = Self::span_of(t, key);
        let example = || {
            let pairs: Vec<String> = providers
                .iter()
                .map(|p| format!("{} = \"…\"", p.as_str()))
                .collect();
            format!("{key} = {{ {} }}", pairs.join(", "))
        };
        if let Some(text) = item.as_str() {
            if text.trim().is_empty() {
                self.report(span, &full, Rule::Empty, "is empty".to_string());
                return None;
            }
            if key == "model" && providers.len() > 1 {
                self.report(
                    span,
                    &full,
                    Rule::WrongType,
                    format!(
                        "is one model, but provider lists {} providers and a model is one provider's: give each its own, {}",
                        providers.len(),
                        example()
                    ),
                );
                return None;
            }
            // Read once, even when no provider could be read: its own error is worth telling.
            return match read(text) {
                Ok(v) => {
                    out.extend(providers.iter().map(|&p| (p, v.clone())));
                    Some(out)
                }
                Err((rule, message)) => {
                    self.report(span, &full, rule, message);
                    None
                }
            };
        }
        let Some(table) = item.as_table_like() else {
            self.report(
                span,
                &full,
                Rule::WrongType,
                format!(
                    "is {}, expected a string or a table with one per provider ({})",
                    kind(item),
                    example()
                ),
            );
            return None;
        };
        let mut ok = true;
        for (name, value) in table.iter() {
            let entry = format!("{full}.{name}");
            let at = Self::span_of(table, name).or(span.clone());
            let Some(p) = providers.iter().copied().find(|p| p.as_str() == name) else {
                ok = false;
                let listed: Vec<&str> = providers.iter().map(|p| p.as_str()).collect();
                self.report(
                    at,
                    &entry,
                    Rule::UnknownKey,
                    format!(
                        "names a provider the role does not list (provider lists {})",
                        listed.join(", ")
                    ),
                );
                continue;
            };
            match value.as_str() {
                Some(text) if text.trim().is_empty() => {
                    ok = false;
                    self.report(at, &entry, Rule::Empty, "is empty".to_string());
                }
                Some(text) => match read(text) {
                    Ok(v) => {
                        out.insert(p, v);
                    }
                    Err((rule, message)) => {
                        ok = false;
                        self.report(at, &entry, rule, message);
                    }
                },
                None => {
                    ok = false;
                    self.report(
                        at,
                        &entry,
                        Rule::WrongType,
                        format!("is {}, expected a string", kind(value)),
                    );
                }
            }
        }
        ok.then_some(out)
    }

    /// The tables of an array of tables at `key` (`[[key]]` or `key = [{…}, …]`), each with
    /// its span; anything else is reported.
    fn table_array<'t>(
        &mut self,
        root: &'t dyn TableLike,
        key: &str,
    ) -> Vec<(&'t dyn TableLike, Option<Range<usize>>)> {
        match root.get(key) {
            None => Vec::new(),
            Some(Item::ArrayOfTables(array)) => array
                .iter()
                .map(|t| (t as &dyn TableLike, t.span()))
                .collect(),
            Some(Item::Value(Value::Array(array)))
                if array.iter().all(|v| v.as_inline_table().is_some()) =>
            {
                array
                    .iter()
                    .filter_map(|v| v.as_inline_table().map(|t| (t as &dyn TableLike, v.span())))
                    .collect()
            }
            Some(item) => {
                self.report(
                    Self::span_of(root, key),
                    key,
                    Rule::WrongType,
                    format!("is {}, expected [[{key}]] tables", kind(item)),
                );
                Vec::new()
            }
        }
    }

    fn gates(&mut self, root: &dyn TableLike, default_timeout: u64) -> Vec<Gate> {
        let mut gates = Vec::new();
        for (i, (t, at)) in self.table_array(root, "gates").into_iter().enumerate() {
            let path = format!("gates[{i}]");
            self.unknown_keys(t, &path, GATE_KEYS);
            let prefix = self
                .string(t, &path, "path", true, at.clone())
                .and_then(|(p, span)| match gate_path_problem(&p) {
                    Some(why) => {
                        self.report(
                            span,
                            &join(&path, "path"),
                            Rule::BadPath,
                            format!("{p:?} {why}"),
                        );
                        None
                    }
                    None => Some(p),
                });
            let command = self.string(t, &path, "command", true, at);
            let timeout = self.number(t, &path, "timeout_ms", limits::TIMEOUT_MS, default_timeout);
            if let (Some(path), Some((command, _)), Some(timeout_ms)) = (prefix, command, timeout) {
                gates.push(Gate {
                    path,
                    command,
                    timeout_ms,
                });
            }
        }
        gates
    }

    /// The span of the start of `line` (from 1).
    fn line_span(&self, line: usize) -> Option<Range<usize>> {
        let start = self
            .src
            .match_indices('\n')
            .nth(line.checked_sub(2)?)
            .map_or(0, |(i, _)| i + 1);
        Some(start..start)
    }
}

/// Why `branch` is no branch name git accepts (a conservative subset of `git check-ref-format`).
fn branch_problem(branch: &str) -> Option<&'static str> {
    // `git check-ref-format --branch` refuses these two names; `@` alone also stands for HEAD.
    if branch == "HEAD" || branch == "@" {
        Some("names HEAD, not a branch")
    } else if branch.starts_with('-') {
        Some("starts with '-'")
    } else if branch.starts_with('/') || branch.ends_with('/') || branch.contains("//") {
        Some("has an empty path component")
    } else if branch.contains("..") || branch.contains("@{") {
        Some("holds \"..\" or \"@{\"")
    } else if branch.ends_with('.') || branch.split('/').any(|part| part.ends_with(".lock")) {
        Some("ends in '.', or has a component ending in \".lock\"")
    } else if branch
        .chars()
        .any(|c| c.is_control() || c.is_whitespace() || "~^:?*[\\".contains(c))
    {
        Some("holds a space, a control character or one of ~ ^ : ? * [ \\")
    } else if branch.split('/').any(|part| part.starts_with('.')) {
        Some("has a component starting with '.'")
    } else {
        None
    }
}

/// Why `path` is no gate path: a relative path inside the work tree.
fn gate_path_problem(path: &str) -> Option<&'static str> {
    let p = Path::new(path);
    if p.is_absolute() {
        Some("is absolute; a gate path is relative to the work tree's top")
    } else if p
        .components()
        .any(|c| matches!(c, std::path::Component::ParentDir))
    {
        Some("leaves the work tree (\"..\")")
    } else {
        None
    }
}

mod tasks;
