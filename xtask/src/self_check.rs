//! `cargo xtask self-check`: proof that each gate fails on a violation planted on purpose.
//!
//! A gate that silently accepts everything looks exactly like a gate that passes, so each case
//! copies the workspace into `target/xtask-self-check/<case>/`, plants one violation, runs the
//! gates that must catch it, and checks that each one fails *and* names the planted violation
//! (a gate failing for some other reason proves nothing). One case plants a correct change
//! instead, the test-only sixth provider of `docs/adding-a-provider.md`, and checks that every
//! gate accepts it; its variants leave out one step each and check that the gate for that step
//! fails. Cargo builds in the scratch copies share one target directory of their own.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, bail};

use crate::{ci, layers, prereq, shell, tidy};

/// What the scratch copy holds: enough to resolve, lint and check the workspace.
const COPIED: &[&str] = &[
    "Cargo.toml",
    "Cargo.lock",
    "deny.toml",
    "clippy.toml",
    "rust-toolchain.toml",
    ".cargo",
    "crates",
    // A workspace member: without it the scratch workspace does not load.
    "xtask",
];

#[derive(Debug, Clone, Copy)]
enum Gate {
    CargoDeny,
    Layers,
    /// `cargo clippy -D warnings` of the named package.
    Clippy(&'static str),
    Tidy,
    /// `cargo clippy -D warnings` of the composition root and the planted provider: the
    /// workspace builds, and the provider meets the workspace lints.
    Build,
    /// `cargo xtask layers` built from the scratch copy, so that its own `xtask/src/layers.rs`
    /// table (which the plant may edit) is the one checked.
    ScratchLayers,
}

impl Gate {
    fn name(self) -> &'static str {
        match self {
            Self::CargoDeny => "cargo-deny",
            Self::Layers => "layers",
            Self::Clippy(_) => "clippy",
            Self::Tidy => "tidy",
            Self::Build => "build",
            Self::ScratchLayers => "layers",
        }
    }
}

#[derive(Debug)]
enum Plant {
    /// Adds `line` right after the `[dependencies]` header of `manifest`.
    Dependency {
        manifest: &'static str,
        line: &'static str,
    },
    /// Appends `text` to `file`.
    Code {
        file: &'static str,
        text: &'static str,
    },
    /// Replaces the one `find` in `file` with `replace`.
    Replace {
        file: &'static str,
        find: &'static str,
        replace: &'static str,
    },
    /// Adds the test-only sixth provider as `docs/adding-a-provider.md` says, but for the steps
    /// in `omit`.
    SixthProvider { omit: &'static [SixthStep] },
}

/// What a case expects of its gates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// Each gate fails and names the violation.
    Reject,
    /// Each gate passes: the plant is a correct change.
    Accept,
}

#[derive(Debug)]
struct Case {
    dir: &'static str,
    violation: &'static str,
    plant: Plant,
    expect: Expect,
    /// Each gate that must reject the plant, with text its failure output must contain.
    gates: &'static [(Gate, &'static [&'static str])],
}

const CASES: &[Case] = &[
    Case {
        dir: "contract-uses-engine",
        violation: "corral-contract -> corral-engine (normal dep)",
        plant: Plant::Dependency {
            manifest: "crates/contract/Cargo.toml",
            line: "corral-engine.workspace = true",
        },
        expect: Expect::Reject,
        gates: &[
            (
                Gate::CargoDeny,
                &[
                    "direct parent 'corral-contract",
                    "error[banned]: crate 'corral-engine",
                ],
            ),
            (
                Gate::Layers,
                &["corral-contract -> corral-engine (normal dep) is not allowed"],
            ),
        ],
    },
    Case {
        dir: "cli-uses-engine",
        violation: "corral-cli -> corral-engine (normal dep): the binary reaching past compose",
        plant: Plant::Dependency {
            manifest: "crates/cli/Cargo.toml",
            line: "corral-engine.workspace = true",
        },
        expect: Expect::Reject,
        gates: &[
            (
                Gate::CargoDeny,
                &[
                    "direct parent 'corral-cli",
                    "error[banned]: crate 'corral-engine",
                ],
            ),
            (
                Gate::Layers,
                &["corral-cli -> corral-engine (normal dep) is not allowed"],
            ),
        ],
    },
    Case {
        dir: "cli-uses-contract",
        violation: "corral-cli -> corral-contract (normal dep): the binary reaching past compose",
        plant: Plant::Dependency {
            manifest: "crates/cli/Cargo.toml",
            line: "corral-contract.workspace = true",
        },
        expect: Expect::Reject,
        gates: &[
            (
                Gate::CargoDeny,
                &[
                    "direct parent 'corral-cli",
                    "error[banned]: crate 'corral-contract",
                ],
            ),
            (
                Gate::Layers,
                &["corral-cli -> corral-contract (normal dep) is not allowed"],
            ),
        ],
    },
    Case {
        dir: "sprint-uses-provider",
        violation: "corral-sprint -> corral-claude (normal dep): the sprint naming a provider",
        plant: Plant::Dependency {
            manifest: "crates/sprint/Cargo.toml",
            line: "corral-claude.workspace = true",
        },
        expect: Expect::Reject,
        gates: &[
            (
                Gate::CargoDeny,
                &[
                    "direct parent 'corral-sprint",
                    "error[banned]: crate 'corral-claude",
                ],
            ),
            (
                Gate::Layers,
                &["corral-sprint -> corral-claude (normal dep) is not allowed"],
            ),
        ],
    },
    Case {
        dir: "executor-uses-provider",
        violation: "corral-executor-local -> corral-claude (normal dep): an executor naming a provider",
        plant: Plant::Dependency {
            manifest: "crates/executors/local/Cargo.toml",
            line: "corral-claude.workspace = true",
        },
        expect: Expect::Reject,
        gates: &[
            (
                Gate::CargoDeny,
                &[
                    "direct parent 'corral-executor-local",
                    "error[banned]: crate 'corral-claude",
                ],
            ),
            (
                Gate::Layers,
                &["corral-executor-local -> corral-claude (normal dep) is not allowed"],
            ),
        ],
    },
    Case {
        dir: "executor-uses-sibling",
        violation: "corral-executor-ray -> corral-executor-local (normal dep): one executor using another",
        plant: Plant::Dependency {
            manifest: "crates/executors/ray/Cargo.toml",
            line: "corral-executor-local.workspace = true",
        },
        expect: Expect::Reject,
        gates: &[
            (
                Gate::CargoDeny,
                &[
                    "direct parent 'corral-executor-ray",
                    "error[banned]: crate 'corral-executor-local",
                ],
            ),
            (
                Gate::Layers,
                &["corral-executor-ray -> corral-executor-local (normal dep) is not allowed"],
            ),
        ],
    },
    Case {
        dir: "executor-uses-engine",
        violation: "corral-executor-local -> corral-engine (normal dep): an executor creating processes",
        plant: Plant::Dependency {
            manifest: "crates/executors/local/Cargo.toml",
            line: "corral-engine.workspace = true",
        },
        expect: Expect::Reject,
        gates: &[
            (
                Gate::CargoDeny,
                &[
                    "direct parent 'corral-executor-local",
                    "error[banned]: crate 'corral-engine",
                ],
            ),
            (
                Gate::Layers,
                &["corral-executor-local -> corral-engine (normal dep) is not allowed"],
            ),
        ],
    },
    Case {
        dir: "sprint-uses-engine",
        violation: "corral-sprint -> corral-engine (normal dep): the sprint creating processes",
        plant: Plant::Dependency {
            manifest: "crates/sprint/Cargo.toml",
            line: "corral-engine.workspace = true",
        },
        expect: Expect::Reject,
        gates: &[
            (
                Gate::CargoDeny,
                &[
                    "direct parent 'corral-sprint",
                    "error[banned]: crate 'corral-engine",
                ],
            ),
            (
                Gate::Layers,
                &["corral-sprint -> corral-engine (normal dep) is not allowed"],
            ),
        ],
    },
    Case {
        dir: "provider-uses-sprint",
        violation: "corral-claude -> corral-sprint (normal dep): a provider reaching the sprint, whose agents only the composition root builds",
        plant: Plant::Dependency {
            manifest: "crates/providers/claude/Cargo.toml",
            line: "corral-sprint.workspace = true",
        },
        expect: Expect::Reject,
        gates: &[
            (
                Gate::CargoDeny,
                &[
                    "direct parent 'corral-claude",
                    "error[banned]: crate 'corral-sprint",
                ],
            ),
            (
                Gate::Layers,
                &["corral-claude -> corral-sprint (normal dep) is not allowed"],
            ),
        ],
    },
    Case {
        dir: "engine-uses-test-support",
        violation: "corral-engine -> corral-test-support (normal dep)",
        plant: Plant::Dependency {
            manifest: "crates/engine/Cargo.toml",
            line: "corral-test-support.workspace = true",
        },
        expect: Expect::Reject,
        gates: &[(
            Gate::Layers,
            &["corral-engine -> corral-test-support (normal dep) is not allowed"],
        )],
    },
    Case {
        dir: "contract-creates-process",
        violation: "std::process::Command::new in corral-contract",
        plant: Plant::Code {
            file: "crates/contract/src/lib.rs",
            text: "\n/// Planted by `cargo xtask self-check`: a process created outside the engine.\n\
                   pub fn planted_process() -> std::io::Result<std::process::Child> {\n    \
                   std::process::Command::new(\"true\").spawn()\n}\n",
        },
        expect: Expect::Reject,
        gates: &[
            (
                Gate::Clippy("corral-contract"),
                &["use of a disallowed method `std::process::Command::new`"],
            ),
            (
                Gate::Tidy,
                &[
                    "crates/contract/src/lib.rs:",
                    "`std::process::Command::new` outside",
                ],
            ),
        ],
    },
    // ADR 0010: only corral-process starts or forks a program, and it knows no other crate.
    Case {
        dir: "engine-creates-process",
        violation: "std::process::Command::new in corral-engine, above corral-process",
        plant: Plant::Code {
            file: "crates/engine/src/lib.rs",
            text: "\n/// Planted by `cargo xtask self-check`: a process created outside corral-process.\n\
                   pub fn planted_process() -> std::io::Result<std::process::Child> {\n    \
                   std::process::Command::new(\"true\").spawn()\n}\n",
        },
        expect: Expect::Reject,
        gates: &[
            (
                Gate::Clippy("corral-engine"),
                &["use of a disallowed method `std::process::Command::new`"],
            ),
            (
                Gate::Tidy,
                &[
                    "crates/engine/src/lib.rs:",
                    "`std::process::Command::new` outside crates/process",
                ],
            ),
        ],
    },
    Case {
        dir: "engine-forks",
        violation: "libc::fork in corral-engine, above corral-process",
        plant: Plant::Code {
            file: "crates/engine/src/lib.rs",
            text: "\n/// Planted by `cargo xtask self-check`: a fork outside corral-process.\n\
                   #[allow(unsafe_code)]\n\
                   pub fn planted_fork() -> i32 {\n    \
                   // SAFETY: planted; never called.\n    \
                   unsafe { libc::fork() }\n}\n",
        },
        expect: Expect::Reject,
        gates: &[
            (
                Gate::Clippy("corral-engine"),
                &["use of a disallowed method `libc::fork`"],
            ),
            (
                Gate::Tidy,
                &[
                    "crates/engine/src/lib.rs:",
                    "`libc::fork(` outside crates/process",
                ],
            ),
        ],
    },
    Case {
        dir: "engine-tokio-process",
        violation: "tokio's process feature declared by corral-engine",
        plant: Plant::Replace {
            file: "crates/engine/Cargo.toml",
            find: "tokio = { workspace = true, features = [\"net\"] }",
            replace: "tokio = { workspace = true, features = [\"net\", \"process\"] }",
        },
        expect: Expect::Reject,
        gates: &[(
            Gate::Layers,
            &[
                "corral-engine -> tokio (normal dep) is not allowed; `tokio` with feature `process` is reserved to corral-process",
            ],
        )],
    },
    Case {
        dir: "process-uses-ports",
        violation: "corral-process -> corral-ports (normal dep): the process layer knowing a crate of the workspace",
        plant: Plant::Dependency {
            manifest: "crates/process/Cargo.toml",
            line: "corral-ports.workspace = true",
        },
        expect: Expect::Reject,
        gates: &[(
            Gate::Layers,
            &["corral-process -> corral-ports (normal dep) is not allowed"],
        )],
    },
    Case {
        dir: "compose-uses-process",
        violation: "corral-compose -> corral-process (normal dep): starting programs past the engine",
        plant: Plant::Dependency {
            manifest: "crates/compose/Cargo.toml",
            line: "corral-process.workspace = true",
        },
        expect: Expect::Reject,
        gates: &[
            (
                Gate::CargoDeny,
                &[
                    "direct parent 'corral-compose",
                    "error[banned]: crate 'corral-process",
                ],
            ),
            (
                Gate::Layers,
                &["corral-compose -> corral-process (normal dep) is not allowed"],
            ),
        ],
    },
    // ADR 0015: what runs on the host with the user's login is built by the composition root
    // alone; the sprint reaches it through the ports' Forge.
    Case {
        dir: "sprint-uses-host",
        violation: "corral-sprint -> corral-host (normal dep): the sprint running git push and gh past the forge port",
        plant: Plant::Dependency {
            manifest: "crates/sprint/Cargo.toml",
            line: "corral-host.workspace = true",
        },
        expect: Expect::Reject,
        gates: &[
            (
                Gate::CargoDeny,
                &[
                    "direct parent 'corral-sprint",
                    "error[banned]: crate 'corral-host",
                ],
            ),
            (
                Gate::Layers,
                &["corral-sprint -> corral-host (normal dep) is not allowed"],
            ),
        ],
    },
    // ADR 0011: the sandbox knows the ports and corral-process, never the rest of Corral.
    Case {
        dir: "sandbox-uses-contract",
        violation: "corral-sandbox -> corral-contract (normal dep): the sandbox knowing more than the ports",
        plant: Plant::Dependency {
            manifest: "crates/sandbox/Cargo.toml",
            line: "corral-contract.workspace = true",
        },
        expect: Expect::Reject,
        gates: &[
            (
                Gate::CargoDeny,
                &[
                    "direct parent 'corral-sandbox",
                    "error[banned]: crate 'corral-contract",
                ],
            ),
            (
                Gate::Layers,
                &["corral-sandbox -> corral-contract (normal dep) is not allowed"],
            ),
        ],
    },
    Case {
        dir: "engine-decides-per-backend",
        violation: "a SandboxBackend match arm in the engine, outside corral-sandbox",
        plant: Plant::Code {
            file: "crates/engine/src/headless.rs",
            text: "\n/// Planted by `cargo xtask self-check`: a decision per backend outside the sandbox.\n\
                   pub fn planted_backend(b: corral_ports::SandboxBackend) -> bool {\n    \
                   matches!(b, corral_ports::SandboxBackend::Native)\n}\n",
        },
        expect: Expect::Reject,
        gates: &[(
            Gate::Tidy,
            &[
                "crates/engine/src/headless.rs:",
                "`SandboxBackend::Native` outside crates/sandbox",
            ],
        )],
    },
    Case {
        dir: "compose-decides-per-backend-choice",
        violation: "a comparison on the settings' BackendChoice in compose, outside corral-sandbox",
        plant: Plant::Code {
            file: "crates/compose/src/lib.rs",
            text: "\n/// Planted by `cargo xtask self-check`: a decision on the backend choice outside the sandbox.\n\
                   pub fn planted_choice(c: corral_engine::BackendChoice) -> bool {\n    \
                   c == corral_engine::BackendChoice::Native\n}\n",
        },
        expect: Expect::Reject,
        gates: &[(
            Gate::Tidy,
            &[
                "crates/compose/src/lib.rs:",
                "`BackendChoice::` matched or compared outside crates/sandbox",
            ],
        )],
    },
    Case {
        dir: "process-import-cycle",
        violation: "a module import cycle in corral-process (spawn -> bounded -> spawn)",
        plant: Plant::Replace {
            file: "crates/process/src/spawn.rs",
            find: "use crate::process_group::{self, Registration};",
            replace: "use crate::process_group::{self, Registration};\n\
                      /// Planted by `cargo xtask self-check`: spawn importing what imports it.\n\
                      #[allow(unused_imports)]\nuse crate::bounded::BoundedCommand;",
        },
        expect: Expect::Reject,
        gates: &[(
            Gate::Tidy,
            &[
                "crates/process: module import cycle bounded -> spawn -> bounded",
                "crates/process/src/spawn.rs:22 `crate::bounded`",
            ],
        )],
    },
    Case {
        dir: "xtask-runs-cargo-offline",
        violation: "cargo's offline flag in xtask",
        plant: Plant::Code {
            file: "xtask/src/ci.rs",
            // In two pieces, so this file does not hold the flag itself.
            text: concat!(
                "\n/// Planted by `cargo xtask self-check`: a gate that passes only on a warm cache.\n\
                 pub const PLANTED: &[&str] = &[\"deny\", \"-",
                "-offline\", \"check\"];\n"
            ),
        },
        expect: Expect::Reject,
        gates: &[(Gate::Tidy, &["xtask/src/ci.rs:", "in xtask or .ci"])],
    },
    // docs/adding-a-provider.md, followed for a test-only provider: the result builds and passes
    // the gates, and each gate's line left out fails that gate.
    Case {
        dir: "sixth-provider",
        violation: "a sixth provider added as docs/adding-a-provider.md says",
        plant: Plant::SixthProvider { omit: &[] },
        expect: Expect::Accept,
        gates: &[
            (Gate::ScratchLayers, &[]),
            (Gate::CargoDeny, &[]),
            (Gate::Tidy, &[]),
            (Gate::Build, &[]),
        ],
    },
    // The step the compiler asks for: an exhaustive `match` on `ProviderId` without the new
    // variant's arm does not build.
    Case {
        dir: "sixth-provider-without-settings",
        violation: "a sixth provider without its settings table entry",
        plant: Plant::SixthProvider {
            omit: &[SixthStep::Settings],
        },
        expect: Expect::Reject,
        gates: &[(Gate::Build, &["E0004", "ProviderId::Sixth` not covered"])],
    },
    Case {
        dir: "sixth-provider-crate-alone",
        violation: "a provider crate added and wired nowhere",
        plant: Plant::SixthProvider {
            omit: &[
                SixthStep::ProviderId,
                SixthStep::DescriptorArm,
                SixthStep::Settings,
                SixthStep::Workspace,
                SixthStep::ComposeDependency,
                SixthStep::DenyEntry,
                SixthStep::EngineWrapper,
                SixthStep::Layer,
            ],
        },
        expect: Expect::Reject,
        gates: &[(
            Gate::ScratchLayers,
            &["crates/providers/sixth/Cargo.toml: a provider crate that is no workspace member"],
        )],
    },
    Case {
        dir: "sixth-provider-without-deny-entry",
        violation: "a sixth provider without its deny.toml entry",
        plant: Plant::SixthProvider {
            omit: &[SixthStep::DenyEntry],
        },
        expect: Expect::Reject,
        gates: &[(
            Gate::ScratchLayers,
            &["provider crate corral-sixth", "entry in deny.toml"],
        )],
    },
    Case {
        dir: "sixth-provider-without-engine-wrapper",
        violation: "a sixth provider missing from corral-engine's wrappers",
        plant: Plant::SixthProvider {
            omit: &[SixthStep::EngineWrapper],
        },
        expect: Expect::Reject,
        gates: &[(
            Gate::CargoDeny,
            &[
                "error[banned]: crate 'corral-engine",
                "direct parent 'corral-sixth",
            ],
        )],
    },
    Case {
        dir: "sixth-provider-without-layer",
        violation: "a sixth provider missing from xtask/src/layers.rs",
        plant: Plant::SixthProvider {
            omit: &[SixthStep::Layer],
        },
        expect: Expect::Reject,
        gates: &[(
            Gate::ScratchLayers,
            &["corral-sixth (", "missing from LAYERS"],
        )],
    },
    Case {
        dir: "sixth-provider-without-compose-arm",
        violation: "a sixth provider the composition root does not name",
        plant: Plant::SixthProvider {
            omit: &[SixthStep::ComposeDependency, SixthStep::DescriptorArm],
        },
        expect: Expect::Reject,
        gates: &[(
            Gate::ScratchLayers,
            &[
                "not a dependency of corral-compose",
                "has no arm in `descriptor()`",
            ],
        )],
    },
];

/// The steps of `docs/adding-a-provider.md`, as planted for the test-only provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SixthStep {
    /// 1: the crate (from `xtask/sixth-provider/`).
    Crate,
    /// 2: the `ProviderId` variant, its place in `ALL`, its name.
    ProviderId,
    /// 2: the arm in `descriptor()`.
    DescriptorArm,
    /// 2: the settings table's field and arm, which the compiler asks for.
    Settings,
    /// 3: `members`, `default-members` and the workspace dependency.
    Workspace,
    /// 3: the composition root's dependency.
    ComposeDependency,
    /// 3: the `deny.toml` entry.
    DenyEntry,
    /// 3: the provider among `corral-engine`'s wrappers.
    EngineWrapper,
    /// 3: the `xtask/src/layers.rs` entry.
    Layer,
}

/// One edit of the sixth provider: `(step, file, find, replace)`. An empty `find` creates `file`
/// with `replace`; otherwise the one occurrence of `find` becomes `replace`.
pub(crate) type SixthEdit = (SixthStep, &'static str, &'static str, &'static str);

const GROK_DENY: &str = "  { crate = \"corral-grok\", wrappers = [\"corral-compose\"], reason = \"providers are siblings; only the composition root wires them\" },\n";

pub(crate) const SIXTH_EDITS: &[SixthEdit] = &[
    (
        SixthStep::Crate,
        "crates/providers/sixth/Cargo.toml",
        "",
        include_str!("../sixth-provider/Cargo.toml.in"),
    ),
    (
        SixthStep::Crate,
        "crates/providers/sixth/src/lib.rs",
        "",
        include_str!("../sixth-provider/lib.rs.in"),
    ),
    (
        SixthStep::ProviderId,
        "crates/ports/src/session.rs",
        "    Gemini,\n}",
        "    Gemini,\n    /// A test-only sixth CLI (`sixth`).\n    Sixth,\n}",
    ),
    (
        SixthStep::ProviderId,
        "crates/ports/src/session.rs",
        "pub const ALL: [ProviderId; 6] = [",
        "pub const ALL: [ProviderId; 7] = [",
    ),
    (
        SixthStep::ProviderId,
        "crates/ports/src/session.rs",
        "        ProviderId::Gemini,\n    ];",
        "        ProviderId::Gemini,\n        ProviderId::Sixth,\n    ];",
    ),
    (
        SixthStep::ProviderId,
        "crates/ports/src/session.rs",
        "            ProviderId::Grok => \"grok\",\n",
        "            ProviderId::Grok => \"grok\",\n            ProviderId::Sixth => \"sixth\",\n",
    ),
    (
        SixthStep::DescriptorArm,
        "crates/compose/src/factory.rs",
        "        ProviderId::Grok => &corral_grok::DESCRIPTOR,\n",
        "        ProviderId::Grok => &corral_grok::DESCRIPTOR,\n        ProviderId::Sixth => &corral_sixth::DESCRIPTOR,\n",
    ),
    (
        SixthStep::Settings,
        "crates/compose/src/settings.rs",
        "    pub grok: ProviderSettings,\n",
        "    pub grok: ProviderSettings,\n    /// The test-only sixth CLI.\n    #[garde(dive)]\n    pub sixth: ProviderSettings,\n",
    ),
    (
        SixthStep::Settings,
        "crates/compose/src/settings.rs",
        "            ProviderId::Grok => &self.grok,\n",
        "            ProviderId::Grok => &self.grok,\n            ProviderId::Sixth => &self.sixth,\n",
    ),
    (
        SixthStep::Workspace,
        "Cargo.toml",
        "  \"crates/providers/gemini\",\n  \"crates/executors/local\",\n  \"crates/executors/ray\",\n  \"xtask\",\n",
        "  \"crates/providers/gemini\",\n  \"crates/providers/sixth\",\n  \"crates/executors/local\",\n  \"crates/executors/ray\",\n  \"xtask\",\n",
    ),
    (
        SixthStep::Workspace,
        "Cargo.toml",
        "  \"crates/providers/gemini\",\n  \"crates/executors/local\",\n  \"crates/executors/ray\",\n]",
        "  \"crates/providers/gemini\",\n  \"crates/providers/sixth\",\n  \"crates/executors/local\",\n  \"crates/executors/ray\",\n]",
    ),
    (
        SixthStep::Workspace,
        "Cargo.toml",
        "corral-compose = { path = \"crates/compose\", version = \"0.1.0\" }\n",
        "corral-compose = { path = \"crates/compose\", version = \"0.1.0\" }\ncorral-sixth = { path = \"crates/providers/sixth\", version = \"0.1.0\" }\n",
    ),
    (
        SixthStep::ComposeDependency,
        "crates/compose/Cargo.toml",
        "corral-opencode.workspace = true\n",
        "corral-opencode.workspace = true\ncorral-sixth.workspace = true\n",
    ),
    (
        SixthStep::DenyEntry,
        "deny.toml",
        GROK_DENY,
        concat!(
            "  { crate = \"corral-grok\", wrappers = [\"corral-compose\"], reason = \"providers are siblings; only the composition root wires them\" },\n",
            "  { crate = \"corral-sixth\", wrappers = [\"corral-compose\"], reason = \"providers are siblings; only the composition root wires them\" },\n",
        ),
    ),
    (
        SixthStep::EngineWrapper,
        "deny.toml",
        "  { crate = \"corral-engine\", wrappers = [\n",
        "  { crate = \"corral-engine\", wrappers = [\n    \"corral-sixth\",\n",
    ),
    (
        SixthStep::Layer,
        "xtask/src/layers.rs",
        "    Layer {\n        name: \"corral-grok\",\n        rules: PROVIDER,\n    },\n",
        "    Layer {\n        name: \"corral-grok\",\n        rules: PROVIDER,\n    },\n    Layer {\n        name: \"corral-sixth\",\n        rules: PROVIDER,\n    },\n",
    ),
];

/// How a gate answered a planted violation.
#[derive(Debug)]
enum Verdict {
    Rejected,
    Accepted,
    /// It failed, but its output does not name the planted violation.
    FailedOtherwise,
}

/// Runs every case; fails if any gate accepted its planted violation, or rejected a correct
/// change.
pub fn run(root: &Path, only: &[String]) -> anyhow::Result<()> {
    prereq::ensure(&prereq::Machine::current(root), &[prereq::CARGO_DENY])?;
    let base = root.join("target").join("xtask-self-check");
    let mut failures = 0_usize;
    let chosen = |case: &&Case| only.is_empty() || only.iter().any(|o| case.dir.starts_with(o));
    if !CASES.iter().any(|case| chosen(&case)) {
        bail!("no self-check case starts with any of {only:?}");
    }
    for case in CASES.iter().filter(chosen) {
        let started = Instant::now();
        let scratch = base.join(case.dir);
        prepare(root, &scratch)?;
        plant(&scratch, &case.plant)?;
        for (gate, evidence) in case.gates {
            let (gate_name, violation) = (gate.name(), case.violation);
            let (verdict, output) = judge(root, &scratch, *gate, evidence)?;
            match (case.expect, verdict) {
                (Expect::Reject, Verdict::Rejected) => {
                    println!("gate {gate_name} rejected planted violation {violation}: ok");
                }
                (Expect::Reject, Verdict::Accepted) => {
                    failures += 1;
                    println!("gate {gate_name} ACCEPTED planted violation {violation}: FAILED");
                }
                (Expect::Accept, Verdict::Accepted) => {
                    println!("gate {gate_name} accepted {violation}: ok");
                }
                (Expect::Accept, Verdict::Rejected | Verdict::FailedOtherwise) => {
                    failures += 1;
                    println!(
                        "gate {gate_name} REJECTED {violation}: FAILED\n{}",
                        tail(&output, 40)
                    );
                }
                (Expect::Reject, Verdict::FailedOtherwise) => {
                    failures += 1;
                    println!(
                        "gate {gate_name} failed, but not on planted violation {violation} \
                         (expected {evidence:?} in its output): FAILED\n{}",
                        tail(&output, 40)
                    );
                }
            }
        }
        println!(
            "  ({} in {:.1}s, scratch copy kept at {})",
            case.dir,
            started.elapsed().as_secs_f64(),
            shell::relative(root, &scratch)
        );
    }
    if failures > 0 {
        bail!(
            "self-check failed: {failures} gate(s) did not answer as expected (see FAILED above)"
        );
    }
    println!(
        "self-check ok: every gate rejected its planted violation and accepted the sixth provider"
    );
    Ok(())
}

/// How `gate` answered in `scratch`, and everything it printed.
fn judge(
    root: &Path,
    scratch: &Path,
    gate: Gate,
    evidence: &[&str],
) -> anyhow::Result<(Verdict, String)> {
    let (failed, output) = match gate {
        Gate::CargoDeny => {
            command_outcome(ci::deny_command(scratch).env("CARGO_TERM_COLOR", "never"))?
        }
        Gate::Clippy(package) => {
            let mut cmd = shell::cargo(scratch);
            cmd.args(["clippy", "--package", package, "--", "-D", "warnings"])
                .env("CARGO_TARGET_DIR", target_dir(root))
                .env("CARGO_TERM_COLOR", "never");
            command_outcome(&mut cmd)?
        }
        Gate::Build => {
            let mut cmd = shell::cargo(scratch);
            cmd.args([
                "clippy",
                "--package",
                "corral-compose",
                "--package",
                "corral-sixth",
                "--",
                "-D",
                "warnings",
            ])
            .env("CARGO_TARGET_DIR", target_dir(root))
            .env("CARGO_TERM_COLOR", "never");
            command_outcome(&mut cmd)?
        }
        Gate::ScratchLayers => {
            let mut cmd = shell::cargo(scratch);
            cmd.args(["run", "--quiet", "--package", "xtask", "--", "layers"])
                .env("CARGO_TARGET_DIR", target_dir(root))
                .env("CARGO_TERM_COLOR", "never");
            command_outcome(&mut cmd)?
        }
        Gate::Layers => check_outcome(layers::check(scratch)),
        Gate::Tidy => check_outcome(tidy::check(scratch)),
    };
    let verdict = if !failed {
        Verdict::Accepted
    } else if evidence.iter().all(|needle| output.contains(needle)) {
        Verdict::Rejected
    } else {
        Verdict::FailedOtherwise
    };
    Ok((verdict, output))
}

/// Whether the command failed, and everything it printed.
fn command_outcome(cmd: &mut Command) -> anyhow::Result<(bool, String)> {
    let out = shell::output(cmd)?;
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    Ok((!out.status.success(), text))
}

/// Whether an in-process check failed (an error counts as a failure), and its report.
fn check_outcome(result: anyhow::Result<Vec<String>>) -> (bool, String) {
    match result {
        Ok(violations) => (!violations.is_empty(), violations.join("\n")),
        Err(err) => (true, format!("{err:#}")),
    }
}

/// The target directory the scratch copies share, apart from the workspace's own: cargo keys a
/// unit by package, not by path, so a scratch build into the workspace's directory would leave
/// the planted code (a sixth `ProviderId`, the scratch's `target/debug/xtask`) where the next
/// workspace build takes it as fresh.
pub(crate) fn target_dir(root: &Path) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| root.join("target"), PathBuf::from)
        .join("xtask-self-check-target")
}

/// A fresh copy of the workspace at `scratch`.
pub(crate) fn prepare(root: &Path, scratch: &Path) -> anyhow::Result<()> {
    if scratch.exists() {
        std::fs::remove_dir_all(scratch)
            .with_context(|| format!("could not remove {}", scratch.display()))?;
    }
    std::fs::create_dir_all(scratch)
        .with_context(|| format!("could not create {}", scratch.display()))?;
    for entry in COPIED {
        let from = root.join(entry);
        if from.exists() {
            copy(&from, &scratch.join(entry))?;
        }
    }
    Ok(())
}

/// Copies a file, or a directory tree without its `target` directories.
fn copy(from: &Path, to: &Path) -> anyhow::Result<()> {
    if from.is_dir() {
        std::fs::create_dir_all(to)
            .with_context(|| format!("could not create {}", to.display()))?;
        let entries = std::fs::read_dir(from)
            .with_context(|| format!("could not list {}", from.display()))?;
        for entry in entries {
            let entry = entry.with_context(|| format!("could not list {}", from.display()))?;
            if entry.file_name() == "target" {
                continue;
            }
            copy(&entry.path(), &to.join(entry.file_name()))?;
        }
    } else {
        std::fs::copy(from, to)
            .with_context(|| format!("could not copy {} to {}", from.display(), to.display()))?;
    }
    Ok(())
}

fn plant(scratch: &Path, plant: &Plant) -> anyhow::Result<()> {
    match plant {
        Plant::SixthProvider { omit } => {
            for (step, file, find, replace) in SIXTH_EDITS {
                if !omit.contains(step) {
                    edit(&scratch.join(file), find, replace)?;
                }
            }
            Ok(())
        }
        Plant::Dependency { manifest, line } => {
            let path = scratch.join(manifest);
            let text = read(&path)?;
            write(&path, &with_dependency(&text, line))
        }
        Plant::Code { file, text } => {
            let path = scratch.join(file);
            let mut code = read(&path)?;
            code.push_str(text);
            write(&path, &code)
        }
        Plant::Replace {
            file,
            find,
            replace,
        } => edit(&scratch.join(file), find, replace),
    }
}

/// Creates `path` with `replace` (an empty `find`), or replaces the one `find` in it.
pub(crate) fn edit(path: &Path, find: &str, replace: &str) -> anyhow::Result<()> {
    if find.is_empty() {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("could not create {}", dir.display()))?;
        }
        return write(path, replace);
    }
    let text = read(path)?;
    if text.matches(find).count() != 1 {
        bail!(
            "{}: expected exactly one {find:?} to plant the sixth provider at;              docs/adding-a-provider.md and this self-check need updating together",
            path.display()
        );
    }
    write(path, &text.replacen(find, replace, 1))
}

/// `manifest` with `line` added to its `[dependencies]` table (created if absent).
fn with_dependency(manifest: &str, line: &str) -> String {
    let mut out = String::with_capacity(manifest.len() + line.len() + 16);
    let mut inserted = false;
    for existing in manifest.lines() {
        out.push_str(existing);
        out.push('\n');
        if !inserted && existing.trim() == "[dependencies]" {
            out.push_str(line);
            out.push('\n');
            inserted = true;
        }
    }
    if !inserted {
        out.push_str("\n[dependencies]\n");
        out.push_str(line);
        out.push('\n');
    }
    out
}

fn read(path: &Path) -> anyhow::Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("could not read {}", path.display()))
}

fn write(path: &Path, text: &str) -> anyhow::Result<()> {
    std::fs::write(path, text).with_context(|| format!("could not write {}", path.display()))
}

/// The last `lines` lines of `text`.
fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dependency_goes_into_the_dependencies_table() {
        let manifest = "[package]\nname = \"x\"\n\n[dependencies]\nserde.workspace = true\n\n[dev-dependencies]\ninsta.workspace = true\n";
        assert_eq!(
            with_dependency(manifest, "corral-engine.workspace = true"),
            "[package]\nname = \"x\"\n\n[dependencies]\ncorral-engine.workspace = true\nserde.workspace = true\n\n[dev-dependencies]\ninsta.workspace = true\n"
        );
        assert_eq!(
            with_dependency("[package]\nname = \"x\"\n", "a = \"1\""),
            "[package]\nname = \"x\"\n\n[dependencies]\na = \"1\"\n"
        );
    }
}
