//! What a run's sandbox promised and kept: the attestation recorded with every run.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

/// A guarantee an execution policy can ask for.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Guarantee {
    /// The CLI can write only to the working directory (when writable), the run directory, the
    /// extra roots and the CLI's own declared state paths.
    WritesConfined,
    /// The working directory is read-only to the CLI (the run directory stays writable).
    RepoReadOnly,
    /// The CLI has no network at all.
    NoNetwork,
    /// The CLI reaches only the allow-listed `host:port` pairs (its provider's model endpoints
    /// and what the user's own settings add), through Corral's proxy; nothing on the host
    /// itself: no loopback service, no host unix socket, no abstract socket.
    EgressConfined,
    /// The user's home directory is hidden: only the CLI's declared state paths are visible.
    HomeHidden,
    /// Every process of the run, including ones that leave the process group (`setsid`), ends
    /// with the run.
    TreeContained,
}

impl Guarantee {
    /// The kebab-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Guarantee::WritesConfined => "writes-confined",
            Guarantee::RepoReadOnly => "repo-read-only",
            Guarantee::NoNetwork => "no-network",
            Guarantee::EgressConfined => "egress-confined",
            Guarantee::HomeHidden => "home-hidden",
            Guarantee::TreeContained => "tree-contained",
        }
    }

    /// What it means, in a sentence, for refusal messages.
    pub fn describe(self) -> &'static str {
        match self {
            Guarantee::WritesConfined => {
                "writes confined to the working directory, the run directory, the extra roots and the CLI's own state"
            }
            Guarantee::RepoReadOnly => "the working directory read-only",
            Guarantee::NoNetwork => "no network",
            Guarantee::EgressConfined => {
                "network confined to the allow-listed hosts, and nothing on the host itself reachable"
            }
            Guarantee::HomeHidden => "the user's home directory hidden",
            Guarantee::TreeContained => {
                "every process of the run ended with it, even one that left its process group"
            }
        }
    }
}

impl fmt::Display for Guarantee {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The backend that ran the CLI.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum SandboxBackend {
    /// A plain child process: no filesystem or network guarantee is enforced.
    Native,
    /// bubblewrap: a read-only root, writable binds, a fresh pid namespace.
    Bubblewrap,
    /// A podman container on the host's root filesystem (an overlay), writable binds, its own
    /// namespaces and cgroup.
    Container,
}

impl SandboxBackend {
    /// The kebab-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            SandboxBackend::Native => "native",
            SandboxBackend::Bubblewrap => "bubblewrap",
            SandboxBackend::Container => "container",
        }
    }
}

impl fmt::Display for SandboxBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A guarantee that was asked for and not enforced, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Unenforced {
    /// The guarantee.
    pub guarantee: Guarantee,
    /// Why it was not enforced.
    pub why: String,
}

/// What a run's sandbox promised and kept, recorded in `run.json` and the execution log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Attestation {
    /// The backend asked for (`auto`, `native`, `bubblewrap`, `container`).
    #[serde(alias = "requested_backend")]
    pub requested_backend: String,
    /// The backend that ran.
    #[serde(alias = "actual_backend")]
    pub actual_backend: SandboxBackend,
    /// Guarantees the policy asked for.
    pub requested: Vec<Guarantee>,
    /// Guarantees the backend enforced.
    pub enforced: Vec<Guarantee>,
    /// Guarantees asked for and not enforced, each with the reason.
    #[serde(alias = "not_enforced")]
    pub not_enforced: Vec<Unenforced>,
    /// Why running with unenforced guarantees was allowed, when it was.
    pub consent: Option<String>,
    /// Writes outside the allowed paths that the git-cleanliness check found after the run.
    /// Empty both when the check found nothing and when it did not run: [`Attestation::stray_check`]
    /// says which.
    #[serde(default)]
    #[serde(alias = "stray_writes")]
    pub stray_writes: Vec<String>,
    /// Whether the git-cleanliness check ran after the run; a record without it (an older one)
    /// reads as not checked, never as clean.
    #[serde(default)]
    #[serde(alias = "stray_check")]
    pub stray_check: StrayCheck,
    /// Why the check did not run (not a git work tree, git unavailable, the check failed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(alias = "stray_check_why")]
    pub stray_check_why: Option<String>,
    /// Regular files in the writable trees that had more than one link at the start, bound
    /// read-only: a write through one would land in every other name of the file, wherever
    /// that is (outside the sandbox too).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[serde(alias = "read_only_links")]
    pub read_only_links: Vec<String>,
    /// What the check inside the sandbox saw when the CLI was about to start (the first
    /// attempt's, or the first that did not hold); `None` when no check ran (the native
    /// backend). A guarantee this check did not confirm is never in `enforced`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(alias = "checked_inside")]
    pub checked_inside: Option<InsideCheck>,
    /// The limits on what the run's spawns may use (`[limits]`), each with how it was enforced
    /// or why it was not; empty when no limit was set.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub limits: Vec<LimitEnforced>,
}

/// How one limit of `[limits]` was enforced for a run, or why it was not.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LimitEnforced {
    /// `memory`, `pids`, `cpus` or `disk`.
    pub limit: String,
    /// The cap (bytes, processes, cores).
    pub cap: String,
    /// How it was enforced (`cgroup v1 memory.limit_in_bytes`, `RLIMIT_FSIZE (each file)`),
    /// when it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub how: Option<String>,
    /// Why it was not enforced (or only in part), when it was not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why_not: Option<String>,
}

/// Whether the git-cleanliness check (the stray writes) ran.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum StrayCheck {
    /// It ran: `stray_writes` is everything it found, empty when the tree was clean.
    Checked,
    /// It did not run (or not to the end): an empty `stray_writes` says nothing.
    #[default]
    NotChecked,
}

impl StrayCheck {
    /// The kebab-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            StrayCheck::Checked => "checked",
            StrayCheck::NotChecked => "not-checked",
        }
    }
}

/// Whether a namespace seen inside the sandbox is the supervisor's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum NamespaceSeen {
    /// A namespace of the sandbox's own (its inode differs from the supervisor's).
    Own,
    /// The supervisor's own namespace: no isolation there.
    Supervisors,
}

/// A write the check inside the sandbox tried where the CLI must not write, and where it went.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct WriteProbe {
    /// The file it tried to create.
    pub path: String,
    /// Whether the file then existed on the host: the write was not confined.
    pub landed: bool,
}

/// What a probe run by the engine inside the sandbox, before the CLI, saw of it: its own
/// capability sets and flags, its namespaces against the supervisor's, and where a write
/// outside the writable paths went. Checked on the host afterwards where it can be (the write).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InsideCheck {
    /// `CapInh`, `CapPrm`, `CapEff`, `CapBnd`, `CapAmb`, `NoNewPrivs` and `Seccomp` as
    /// `/proc/self/status` gave them inside.
    #[serde(default)]
    pub status: BTreeMap<String, String>,
    /// `user`, `mnt`, `pid`, `ipc`, `net`: the sandbox's own, or the supervisor's; a
    /// namespace the probe could not read is absent.
    #[serde(default)]
    pub namespaces: BTreeMap<String, NamespaceSeen>,
    /// A file created outside every writable path (in a fresh directory of the host's
    /// `/tmp`), when such a place exists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(alias = "write_outside")]
    pub write_outside: Option<WriteProbe>,
    /// A file created in the working directory, when it must be read-only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(alias = "write_work_tree")]
    pub write_work_tree: Option<WriteProbe>,
    /// With the home hidden: an entry of the host's home directory, and whether it was visible.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(alias = "home_entry_visible")]
    pub home_entry_visible: Option<(String, bool)>,
    /// Microseconds from the spawn to the probe's report.
    #[serde(alias = "elapsed_us")]
    pub elapsed_us: u64,
    /// Why the probe reported nothing, when it did not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}
