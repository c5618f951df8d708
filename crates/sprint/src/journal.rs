//! The night's record: every [`SprintEvent`] of a sprint run, as `--json` prints it, appended
//! to the sprint's `events.jsonl` (`.corral/sprints/<name>/events.jsonl`) with the wall-clock
//! time (`wallTime`, RFC 3339) and the time since the run began (`monotonicMs`, which no clock
//! change moves), whatever the output style. `corral sprint status --follow` reads it as it
//! grows; a post-mortem reads it after.
//!
//! Crash-safe as an append-only log is: each event is one `write` of one line, and the line that
//! ends a task or the sprint (and the one that starts a task) is forced to disk before the run
//! goes on, so a power cut loses at most the steps of the task in flight. A `kill -9` in the
//! middle of a write leaves a last line cut short, which [`read_events`] leaves out. The file is
//! written through the record's handle (`SprintLayout::record`), never through a link, a FIFO or
//! a second hard link an agent planted there: such a file is refused, the refusal told once
//! ([`SprintEvent::RecordUnwritable`]) and the sprint goes on without its record.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Instant, SystemTime};

use corral_hostfs::Flush;
use corral_ports::{Outcome, ProviderId, RunObserver};
use serde_json::{Map, Value};

use crate::event::{EventSink, SprintEnd, SprintEvent};
use crate::hooks::{HookMoment, HookQueue};
use crate::layout::{EVENTS_FILE, Role, SprintLayout};
use crate::names::TaskId;

/// The key of an event line's wall-clock time (RFC 3339, as the run's clock gives it).
pub const WALL_TIME_KEY: &str = "wallTime";
/// The key of an event line's milliseconds since the run began (a monotonic clock).
pub const MONOTONIC_KEY: &str = "monotonicMs";

/// An [`EventSink`] that writes every event to the sprint's `events.jsonl`, hands it on to the
/// caller's sink, and offers it to the sprint's hooks.
pub(crate) struct Journal<'a> {
    inner: &'a dyn EventSink,
    layout: SprintLayout,
    now: fn() -> String,
    started: Instant,
    hooks: &'a HookQueue,
    /// Held while a line is written (one line at a time), and whether a write failed already
    /// (the failure is told once).
    failed: Mutex<bool>,
    /// Per provider, the end of the last rate-limit hold told ([`SprintEvent::RateLimitHold`]
    /// is told once per hold).
    holds: Mutex<HashMap<ProviderId, SystemTime>>,
    /// Whose accounts the run's spawns ran on and which ended rate limited: the providers
    /// whose limit an exit-4 pause is, for its `rate_limited` hook.
    limited: Mutex<Limited>,
}

/// The provider of each spawn started (by task, round and role), and the providers whose
/// spawns ended rate limited.
#[derive(Debug, Default)]
struct Limited {
    spawns: HashMap<(TaskId, u32, Role), ProviderId>,
    providers: Vec<ProviderId>,
}

impl std::fmt::Debug for Journal<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Journal")
            .field("file", &self.layout.events_file())
            .finish_non_exhaustive()
    }
}

impl<'a> Journal<'a> {
    pub(crate) fn new(
        inner: &'a dyn EventSink,
        layout: SprintLayout,
        now: fn() -> String,
        hooks: &'a HookQueue,
    ) -> Self {
        Journal {
            inner,
            layout,
            now,
            started: Instant::now(),
            hooks,
            failed: Mutex::new(false),
            holds: Mutex::new(HashMap::new()),
            limited: Mutex::new(Limited::default()),
        }
    }

    /// `event` as one line of `events.jsonl`: its `--json` object with the two times.
    fn line(&self, event: &SprintEvent) -> String {
        let object = match serde_json::to_value(event) {
            Ok(Value::Object(object)) => object,
            // Every event serialises to an object (a tagged enum); anything else is kept whole.
            Ok(other) => Map::from_iter([("event".to_string(), other)]),
            Err(e) => Map::from_iter([("unserialisable".to_string(), e.to_string().into())]),
        };
        self.stamped(object)
    }

    /// `object` with the two times, as one line.
    fn stamped(&self, mut object: Map<String, Value>) -> String {
        object.insert(WALL_TIME_KEY.to_string(), (self.now)().into());
        let millis = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        object.insert(MONOTONIC_KEY.to_string(), millis.into());
        let mut line = Value::Object(object).to_string();
        line.push('\n');
        line
    }

    /// Whether a hold of `provider` until `until` (RFC 3339) is one not told yet: the
    /// provider has no hold known, or the one known has passed. A hold met again (another
    /// spawn, the CLI's next retry line, a hand-over) only moves the known end.
    fn new_hold(&self, provider: ProviderId, until: &str) -> bool {
        let Ok(until) = humantime::parse_rfc3339_weak(until) else {
            return true;
        };
        let now = SystemTime::now();
        let mut holds = self.holds.lock().unwrap_or_else(PoisonError::into_inner);
        match holds.get_mut(&provider) {
            Some(known) if *known > now => {
                *known = (*known).max(until);
                false
            }
            _ => {
                holds.insert(provider, until);
                true
            }
        }
    }

    /// Notes a spawn's provider as it starts, and the provider of one that ended rate limited.
    fn note_spawn(&self, spawn: (TaskId, u32, Role), started: Option<ProviderId>, limited: bool) {
        let mut notes = self.limited.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(provider) = started {
            notes.spawns.insert(spawn, provider);
        } else if limited
            && let Some(provider) = notes.spawns.get(&spawn).copied()
            && !notes.providers.contains(&provider)
        {
            notes.providers.push(provider);
        }
    }

    /// Whether the hold an exit-4 pause stopped at was told already (a
    /// [`SprintEvent::RateLimitHold`] of each provider whose spawn ended rate limited, not yet
    /// passed): then the pause's `rate_limited` hook would tell it twice. With no such spawn
    /// noted, any hold told and not yet passed is the pause's.
    fn pause_told(&self) -> bool {
        let providers = self
            .limited
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .providers
            .clone();
        let now = SystemTime::now();
        let holds = self.holds.lock().unwrap_or_else(PoisonError::into_inner);
        let told = |p: &ProviderId| holds.get(p).is_some_and(|until| *until > now);
        if providers.is_empty() {
            holds.values().any(|until| *until > now)
        } else {
            providers.iter().all(told)
        }
    }

    fn append(&self, event: &SprintEvent, line: &str) {
        // A task's start and end and the sprint's end are on disk before the run goes on.
        let flush = flush_for(event);
        self.append_line(flush, line);
    }

    fn append_line(&self, flush: Flush, line: &str) {
        let mut failed = self.failed.lock().unwrap_or_else(PoisonError::into_inner);
        if *failed {
            return;
        }
        let written = self
            .layout
            .record()
            .and_then(|record| record.append_with(EVENTS_FILE, line.as_bytes(), flush));
        if let Err(e) = written {
            *failed = true;
            drop(failed);
            self.inner.event(&SprintEvent::RecordUnwritable {
                file: self.layout.events_file().display().to_string(),
                message: e.to_string(),
            });
        }
    }
}

/// How a line of `event` goes to disk: a task's start and end and the sprint's end are there
/// before the run goes on.
fn flush_for(event: &SprintEvent) -> Flush {
    match event {
        SprintEvent::TaskStarted { .. }
        | SprintEvent::TaskFinished { .. }
        | SprintEvent::SprintFinished { .. } => Flush::Synced,
        SprintEvent::SprintStarted { .. }
        | SprintEvent::DirtyTree { .. }
        | SprintEvent::Branch { .. }
        | SprintEvent::Setup { .. }
        | SprintEvent::Verified { .. }
        | SprintEvent::SpawnStarted { .. }
        | SprintEvent::SpawnFinished { .. }
        | SprintEvent::Evaluated { .. }
        | SprintEvent::Regressed { .. }
        | SprintEvent::Warning { .. }
        | SprintEvent::WaveStarted { .. }
        | SprintEvent::Folded { .. }
        | SprintEvent::FoldChecked { .. }
        | SprintEvent::SentHome { .. }
        | SprintEvent::Held { .. }
        | SprintEvent::FailedOver { .. }
        | SprintEvent::RateLimitHold { .. }
        | SprintEvent::RecordUnwritable { .. } => Flush::Cached,
    }
}

impl EventSink for Journal<'_> {
    fn event(&self, event: &SprintEvent) {
        if let SprintEvent::RateLimitHold {
            provider, until, ..
        } = event
            && !self.new_hold(*provider, until)
        {
            return;
        }
        if let SprintEvent::SpawnStarted {
            task,
            round,
            role,
            provider,
            ..
        } = event
        {
            self.note_spawn((task.clone(), *round, *role), Some(*provider), false);
        }
        if let SprintEvent::SpawnFinished {
            task,
            round,
            role,
            outcome,
            ..
        } = event
        {
            let limited = *outcome == Some(Outcome::RateLimited);
            self.note_spawn((task.clone(), *round, *role), None, limited);
        }
        let line = self.line(event);
        self.append(event, &line);
        self.inner.event(event);
        let mut moments = HookMoment::of(event);
        // The pause's hold told already by its `rate-limit-hold`: only the sprint's end.
        if let SprintEvent::SprintFinished { summary } = event
            && summary.end == SprintEnd::RateLimited
            && self.pause_told()
        {
            moments.retain(|m| *m != HookMoment::RateLimited);
        }
        self.hooks.offer_moments(moments, &line);
    }

    fn observer(&self, task: &TaskId, round: u32, role: Role) -> Arc<dyn RunObserver> {
        self.inner.observer(task, round, role)
    }

    /// A remote worker's event, written as the coordinator's own with the coordinator's two
    /// times (when it read the line): only an object naming its event and `task` as its task,
    /// and no event of the sprint's (a worker runs one task, the sprint is the coordinator's).
    /// Its hooks run as the coordinator's own would (a task's end, a hold told once per
    /// hold): a task run on a Ray node is told as one run here.
    fn relayed(&self, task: &TaskId, event: &Map<String, Value>) {
        let name = event
            .get("event")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let of_task = event.get("task").and_then(Value::as_str) == Some(task.as_str());
        if !of_task || name.is_empty() || name.starts_with("sprint-") {
            return;
        }
        let flush = match name {
            "task-started" | "task-finished" => Flush::Synced,
            _ => Flush::Cached,
        };
        if name == "rate-limit-hold" {
            let provider = event
                .get("provider")
                .cloned()
                .and_then(|p| serde_json::from_value::<ProviderId>(p).ok());
            let until = event.get("until").and_then(Value::as_str);
            if let (Some(provider), Some(until)) = (provider, until)
                && !self.new_hold(provider, until)
            {
                return;
            }
        }
        // A worker's spawns, noted as the coordinator's own are: its pause is the sprint's.
        let text = |key: &str| event.get(key).and_then(Value::as_str);
        let spawn = (
            event
                .get("round")
                .and_then(Value::as_u64)
                .map(|r| u32::try_from(r).unwrap_or(u32::MAX)),
            event
                .get("role")
                .cloned()
                .and_then(|r| serde_json::from_value::<Role>(r).ok()),
        );
        if let (Some(round), Some(role)) = spawn {
            let key = (task.clone(), round, role);
            match name {
                "spawn-started" => {
                    let provider = event
                        .get("provider")
                        .cloned()
                        .and_then(|p| serde_json::from_value::<ProviderId>(p).ok());
                    if provider.is_some() {
                        self.note_spawn(key, provider, false);
                    }
                }
                "spawn-finished" => {
                    self.note_spawn(key, None, text("outcome") == Some("rate-limited"));
                }
                _ => {}
            }
        }
        let line = self.stamped(event.clone());
        self.append_line(flush, &line);
        self.inner.relayed(task, event);
        self.hooks
            .offer_moments(crate::hooks::HookMoment::of_relayed(event), &line);
    }
}

/// The events of `text`, the contents of an `events.jsonl`, each line one JSON object, in
/// order. A last line without its newline (a write a kill cut short) is left out, as is a
/// line that is not a JSON object; [`complete_lines`] says where reading should go on.
pub fn read_events(text: &str) -> Vec<Map<String, Value>> {
    let (events, _) = complete_lines(text.as_bytes());
    events
}

/// The events of the complete lines at the start of `bytes` (up to its last newline), and how
/// many bytes they take: a reader that follows the file as it grows reads on from there once
/// more has been written.
pub fn complete_lines(bytes: &[u8]) -> (Vec<Map<String, Value>>, usize) {
    let Some(end) = bytes.iter().rposition(|&b| b == b'\n').map(|i| i + 1) else {
        return (Vec::new(), 0);
    };
    let events = bytes
        .get(..end)
        .unwrap_or_default()
        .split(|&b| b == b'\n')
        .filter_map(|line| match serde_json::from_slice::<Value>(line) {
            Ok(Value::Object(object)) => Some(object),
            _ => None,
        })
        .collect();
    (events, end)
}
