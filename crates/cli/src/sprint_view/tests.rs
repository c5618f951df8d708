//! The views' text for a fixed list of events: the plain lines, the summary, the JSON lines, a
//! status line.

use std::time::{Duration, Instant};

use corral_ports::{Outcome, ProviderId, Usage};
use corral_sprint::{
    Attribution, Role, RoleUsage, SprintEnd, SprintEvent, SprintSummary, Step, TaskId, TaskStatus,
    TaskSummary, UsageRollUp,
};

use super::live::{Running, status_text};
use super::plain::{Steps, summary_lines};
use crate::render::{Activity, ToolCall};
use crate::{display, term};

fn id(s: &str) -> TaskId {
    TaskId::new(s).unwrap()
}

fn usage(input: u64, output: u64, cost: f64) -> Usage {
    Usage {
        input: Some(input),
        output: Some(output),
        cost_usd: Some(cost),
        ..Usage::default()
    }
}

/// How the sprint of [`events`] ended.
fn summary() -> SprintSummary {
    SprintSummary {
        end: SprintEnd::Blocked,
        exit_code: 3,
        tasks: vec![
            TaskSummary {
                id: id("t1"),
                status: TaskStatus::Done,
                rounds: 2,
                commit: Some("0123456789abcdef0123456789abcdef01234567".into()),
                attribution: Some(Attribution::Clean),
                reason: None,
                warnings: Vec::new(),
                usage: RoleUsage {
                    generator: usage(2400, 300, 0.02),
                    evaluator: usage(1200, 100, 0.01),
                },
                roll_up: roll_up(),
            },
            TaskSummary {
                id: id("t2"),
                status: TaskStatus::Blocked,
                rounds: 1,
                commit: None,
                attribution: None,
                reason: Some("the agent said: no\x1b[2J".into()),
                warnings: vec!["the agent checked out elsewhere".into()],
                usage: RoleUsage::default(),
                roll_up: UsageRollUp::default(),
            },
        ],
        usage: RoleUsage {
            generator: usage(2400, 300, 0.02),
            evaluator: usage(1200, 100, 0.01),
        },
        roll_up: Box::new(roll_up()),
    }
}

/// t1's usage, the generator on Claude Code and the evaluator on Codex.
fn roll_up() -> UsageRollUp {
    UsageRollUp {
        total: usage(3600, 400, 0.03),
        by_role: RoleUsage {
            generator: usage(2400, 300, 0.02),
            evaluator: usage(1200, 100, 0.01),
        },
        by_provider: [
            (ProviderId::Claude, usage(2400, 300, 0.02)),
            (ProviderId::Codex, usage(1200, 100, 0.01)),
        ]
        .into(),
    }
}

/// A two-task sprint: t1 regresses in round 1 and passes in round 2; t2 is blocked (its
/// reason, written by an agent, holds control sequences), each event with its time.
fn events() -> Vec<(u64, SprintEvent)> {
    let t1 = id("t1");
    let gen_started = |task: &TaskId, round, resumes| SprintEvent::SpawnStarted {
        task: task.clone(),
        round,
        role: Role::Generator,
        provider: ProviderId::Claude,
        model: None,
        resumes,
    };
    let summary = summary();
    vec![
        (
            0,
            SprintEvent::SprintStarted {
                name: "demo".into(),
                branch: "corral/demo".into(),
                run_id: "run-1".into(),
                resumed: false,
            },
        ),
        (
            0,
            SprintEvent::Branch {
                branch: "corral/demo".into(),
                created: true,
            },
        ),
        (
            0,
            SprintEvent::TaskStarted {
                task: t1.clone(),
                title: "Write t1".into(),
                round: 0,
                step: Step::PreVerify,
            },
        ),
        (
            400,
            SprintEvent::Verified {
                task: t1.clone(),
                round: 0,
                step: Step::PreVerify,
                passed: true,
                gates: Vec::new(),
                attribution: None,
            },
        ),
        (400, gen_started(&t1, 1, false)),
        (
            12_700,
            SprintEvent::SpawnFinished {
                task: t1.clone(),
                round: 1,
                role: Role::Generator,
                outcome: Some(Outcome::Succeeded),
                valid: true,
                usage: usage(1200, 150, 0.01),
            },
        ),
        (
            13_000,
            SprintEvent::Verified {
                task: t1.clone(),
                round: 1,
                step: Step::PostVerify,
                passed: false,
                gates: vec!["crates/".into()],
                attribution: Some(Attribution::Regressed),
            },
        ),
        (
            13_100,
            SprintEvent::Regressed {
                task: t1.clone(),
                round: 1,
                patch: ".corral/sprints/demo/implement/t1/rounds/1/regressed.patch".into(),
            },
        ),
        (13_100, gen_started(&t1, 2, true)),
        (
            85_600,
            SprintEvent::SpawnFinished {
                task: t1.clone(),
                round: 2,
                role: Role::Generator,
                outcome: Some(Outcome::Succeeded),
                valid: true,
                usage: usage(1200, 150, 0.01),
            },
        ),
        (
            86_000,
            SprintEvent::Verified {
                task: t1.clone(),
                round: 2,
                step: Step::PostVerify,
                passed: true,
                gates: Vec::new(),
                attribution: Some(Attribution::Clean),
            },
        ),
        (
            86_000,
            SprintEvent::SpawnStarted {
                task: t1.clone(),
                round: 2,
                role: Role::Evaluator,
                provider: ProviderId::Codex,
                model: Some("gpt-5".into()),
                resumes: false,
            },
        ),
        (
            95_000,
            SprintEvent::SpawnFinished {
                task: t1.clone(),
                round: 2,
                role: Role::Evaluator,
                outcome: None,
                valid: true,
                usage: usage(1200, 100, 0.01),
            },
        ),
        (
            95_000,
            SprintEvent::Evaluated {
                task: t1.clone(),
                round: 2,
                passed: true,
                failed: Vec::new(),
            },
        ),
        (
            95_500,
            SprintEvent::TaskFinished {
                task: t1.clone(),
                status: TaskStatus::Done,
                commit: Some("0123456789abcdef0123456789abcdef01234567".into()),
                reason: None,
            },
        ),
    ]
    .into_iter()
    .chain(t2_events(summary))
    .collect()
}

/// The blocked task's events and the end.
fn t2_events(summary: SprintSummary) -> Vec<(u64, SprintEvent)> {
    let t2 = id("t2");
    let gen_started = |task: &TaskId, round, resumes| SprintEvent::SpawnStarted {
        task: task.clone(),
        round,
        role: Role::Generator,
        provider: ProviderId::Claude,
        model: None,
        resumes,
    };
    vec![
        (
            95_500,
            SprintEvent::TaskStarted {
                task: t2.clone(),
                title: "Write t2\nforged line".into(),
                round: 1,
                step: Step::Generate,
            },
        ),
        (95_500, gen_started(&t2, 1, true)),
        (
            99_000,
            SprintEvent::Warning {
                task: t2.clone(),
                message: "the agent checked out elsewhere".into(),
            },
        ),
        (
            99_000,
            SprintEvent::SpawnFinished {
                task: t2.clone(),
                round: 1,
                role: Role::Generator,
                outcome: Some(Outcome::Succeeded),
                valid: true,
                usage: Usage::default(),
            },
        ),
        (
            99_100,
            SprintEvent::Evaluated {
                task: t2.clone(),
                round: 1,
                passed: false,
                failed: vec!["correctness".into(), "safety".into()],
            },
        ),
        (
            99_200,
            SprintEvent::TaskFinished {
                task: t2.clone(),
                status: TaskStatus::Blocked,
                commit: None,
                reason: Some("the agent said: no\x1b[2J".into()),
            },
        ),
        (99_200, SprintEvent::SprintFinished { summary }),
    ]
}

#[test]
fn plain_lines_one_per_finished_step_then_the_summary() {
    let start = Instant::now();
    let mut steps = Steps::default();
    let mut out = Vec::new();
    let mut summary = None;
    for (ms, event) in events() {
        if let Some(line) = steps.line(&event, start + Duration::from_millis(ms)) {
            out.push(line);
        }
        if let SprintEvent::SprintFinished { summary: s } = &event {
            summary = Some(s.clone());
        }
    }
    out.push(String::new());
    out.extend(summary_lines("demo", &summary.unwrap()));
    let text = out.join("\n");
    assert!(!text.contains('\x1b'), "{text}");
    insta::assert_snapshot!(text);
}

#[test]
fn a_full_disk_ends_with_the_summary_and_the_way_on() {
    let mut full = summary();
    full.end = SprintEnd::DiskFull;
    full.exit_code = SprintEnd::DiskFull.exit_code();
    if let Some(t2) = full.tasks.get_mut(1) {
        t2.status = TaskStatus::Running;
        t2.reason = None;
        t2.warnings = vec![
            "stopped here, the disk full: git add --all: Exited(128): error: unable to write new index file: No space left on device".into(),
        ];
    }
    insta::assert_snapshot!(summary_lines("demo", &full).join("\n"));
}

#[test]
fn a_permanent_failure_ends_with_exit_8_the_fix_and_the_way_on() {
    let mut stopped = summary();
    stopped.end = SprintEnd::PermanentFailure;
    stopped.exit_code = SprintEnd::PermanentFailure.exit_code();
    if let Some(t2) = stopped.tasks.get_mut(1) {
        t2.status = TaskStatus::Running;
        t2.reason = None;
        t2.warnings = vec![
            "round 1: the evaluator (codex) failed in a way no rerun mends, so the sprint stopped here: codex: the model fake-modle is not available; hint: set `model` under [roles.evaluator]".into(),
        ];
    }
    insta::assert_snapshot!(summary_lines("demo", &stopped).join("\n"));
}

#[test]
fn json_one_event_per_line_ending_with_the_summary() {
    let lines: Vec<String> = events()
        .iter()
        .map(|(_, e)| term::json(e).unwrap())
        .collect();
    for line in &lines {
        let back: serde_json::Value = serde_json::from_str(line).unwrap();
        assert!(back["event"].is_string(), "{line}");
    }
    let last: serde_json::Value = serde_json::from_str(lines.last().unwrap()).unwrap();
    assert_eq!(last["event"], "sprint-finished");
    assert_eq!(last["summary"]["exitCode"], 3);
    insta::assert_snapshot!(lines.join("\n"));
}

#[test]
fn the_status_line_names_task_round_role_provider_and_activity() {
    let now = Instant::now();
    let running = Running {
        round: 2,
        role: Some(Role::Generator),
        provider: Some(ProviderId::Claude),
        since: now,
        usage: usage(1500, 40, 0.0123),
        activity: "Edit src/lib.rs".into(),
        bar: None,
        heard: now + Duration::from_secs(65),
        waiting: false,
    };
    let text = status_text(&id("t1"), &running, now + Duration::from_secs(65), None);
    assert_eq!(
        text,
        "▶ t1  round 2  generator  claude  1m 5s  in 1.5k out 40 $0.0123  Edit src/lib.rs"
    );
}

/// A CLI that printed nothing for a while is said to be silent, unless it waits on purpose.
#[test]
fn the_status_line_says_how_long_a_quiet_agent_has_been_silent() {
    let now = Instant::now();
    let mut running = Running {
        round: 1,
        role: Some(Role::Generator),
        provider: Some(ProviderId::Claude),
        since: now,
        usage: usage(1500, 40, 0.0123),
        activity: "thinking".into(),
        bar: None,
        heard: now + Duration::from_secs(5),
        waiting: false,
    };
    let later = now + Duration::from_secs(50);
    assert_eq!(
        status_text(&id("t1"), &running, later, None),
        "▶ t1  round 1  generator  claude  50s  in 1.5k out 40 $0.0123  silent for 45 s  thinking"
    );
    // Quiet for less than the threshold: nothing said.
    let soon = now + Duration::from_secs(20);
    assert!(!status_text(&id("t1"), &running, soon, None).contains("silent"));
    // Waiting for a rate limit's reset is not silence.
    running.waiting = true;
    running.activity = "waiting for claude until 12:00".into();
    assert!(!status_text(&id("t1"), &running, later, None).contains("silent"));
}

/// On a narrow terminal the status line fits, and a tool call keeps its file name.
#[test]
fn the_status_line_fits_the_terminal_and_keeps_the_file_name() {
    let now = Instant::now();
    let path = "/home/someone/プロジェクト/crates/cli/src/deeply/nested/render_status.rs";
    let running = Running {
        round: 2,
        role: Some(Role::Generator),
        provider: Some(ProviderId::Claude),
        since: now,
        usage: usage(1500, 40, 0.0123),
        activity: Activity::Tool(ToolCall::new(
            "Edit",
            &serde_json::json!({"file_path": path}),
        )),
        bar: None,
        heard: now,
        waiting: false,
    };
    for columns in [100, 120] {
        let text = status_text(&id("t1"), &running, now, Some(columns));
        assert!(display::width(&text) < columns, "{columns}: {text}");
        assert!(text.ends_with("/render_status.rs"), "{columns}: {text}");
    }
}

#[test]
fn a_hold_and_the_hand_over_it_caused_are_one_line_each() {
    let mut steps = Steps::default();
    let now = Instant::now();
    let hold = SprintEvent::RateLimitHold {
        task: id("b"),
        round: 2,
        role: Role::Generator,
        provider: ProviderId::Claude,
        until: "2026-12-07T04:00:00Z".into(),
    };
    let over = SprintEvent::FailedOver {
        task: id("b"),
        round: 2,
        role: Role::Generator,
        from: ProviderId::Claude,
        held_until: "2026-12-07T04:00:00Z".into(),
        to: ProviderId::Codex,
    };
    let until = display::recorded_time("2026-12-07T04:00:00Z");
    assert_eq!(
        steps.line(&hold, now).unwrap(),
        format!("b  round 2  generator: claude's account is held until {until}")
    );
    assert_eq!(
        steps.line(&over, now).unwrap(),
        format!("b  round 2  generator: claude held until {until}, continued on codex")
    );
}
