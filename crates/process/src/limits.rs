//! Limits on what one spawn may use: memory, processes, CPU and disk, each enforced by the best
//! means the kernel offers here, and the spawn's use measured against them.
//!
//! A [`LimitGroup`] is made before the spawn and joined by the child between fork and exec (its
//! [`LimitGroup::hook`], a [`PreExecHook`]), so that everything the child starts (bubblewrap's
//! sandbox and all in it) is counted. For each limit, in order of preference:
//!
//! - a cgroup v2 child of the cgroup this process runs in, when the controller is delegated
//!   there (listed in its `cgroup.subtree_control`);
//! - a cgroup v1 child of this process's cgroup in the controller's own hierarchy (a hybrid
//!   host: systemd's older layout, or a container runtime's);
//! - an rlimit: `RLIMIT_DATA` for memory (not `RLIMIT_AS`: a JavaScript engine reserves far
//!   more address space than it ever uses). Processes and CPU have no rlimit that bounds one
//!   spawn (`RLIMIT_NPROC` counts the whole user's processes and binds no root process; no
//!   rlimit shares cores): without a cgroup they are recorded as not enforced.
//!
//! Disk has no cgroup: every file is capped at the disk limit (`RLIMIT_FSIZE`, the writer gets
//! `SIGXFSZ`), and the directories the caller names (a run directory, a private `TMPDIR`) are
//! measured by [`LimitGroup::breach`], which a supervisor polls ([`LimitGroup::watch`]).
//!
//! A breach is a memory limit that made the kernel kill a process of the group, a process
//! limit that refused a fork, or measured directories over the disk limit. CPU is a rate: a
//! spinner is held to its share (counted as throttling in [`Usage`]) and never breaches.
//! What a caller does on a breach is its own: Corral's sandbox ends the whole group
//! ([`LimitGroup::kill_all`]) and reports the spawn as having exceeded its limit. Dropped, the
//! group kills what is left in it and removes its cgroups.

use std::fs;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::spawn::PreExecHook;

/// The memory limit without a cgroup.
const DATA_HOW: &str = "RLIMIT_DATA (each process's data, not the group's together)";

/// Why processes are not limited without a cgroup: `RLIMIT_NPROC` counts every process and
/// thread of the user, not the spawn's (a desktop session alone may be over any useful cap, and
/// then the spawn could not start at all), and binds no process with `CAP_SYS_RESOURCE` (root):
/// a fork loop inside bubblewrap as root went on under `prlimit --nproc`.
const NPROC_WHY_NOT: &str = "RLIMIT_NPROC counts every process of the user, not the spawn's, and binds no root process, so processes are not limited";

/// What one spawn may use; `None` leaves a resource unlimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct ResourceLimits {
    /// Memory of the whole group, in bytes.
    pub memory: Option<u64>,
    /// Processes and threads of the whole group.
    pub pids: Option<u64>,
    /// CPU time per wall time, in thousandths of a core (`1500` is one and a half cores).
    pub cpu_millis: Option<u64>,
    /// Disk, in bytes: every file written, and the measured directories together.
    pub disk: Option<u64>,
}

impl ResourceLimits {
    /// Whether no resource is limited.
    pub fn is_unlimited(&self) -> bool {
        self.memory.is_none()
            && self.pids.is_none()
            && self.cpu_millis.is_none()
            && self.disk.is_none()
    }
}

/// One limited resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Limit {
    /// Memory.
    Memory,
    /// Processes and threads.
    Pids,
    /// CPU time.
    Cpus,
    /// Disk.
    Disk,
}

impl Limit {
    /// The kebab-case name, as in the settings (`[limits]`).
    pub fn as_str(self) -> &'static str {
        match self {
            Limit::Memory => "memory",
            Limit::Pids => "pids",
            Limit::Cpus => "cpus",
            Limit::Disk => "disk",
        }
    }
}

/// How one limit is enforced for a spawn, or why it is not.
#[derive(Debug, Clone, PartialEq)]
pub struct Enforcement {
    /// The resource.
    pub limit: Limit,
    /// The cap: bytes, processes, or cores (`2147483648`, `256`, `1.500`).
    pub cap: String,
    /// How it is enforced (`cgroup v1 memory.limit_in_bytes`, `RLIMIT_FSIZE`), or `None`.
    pub how: Option<String>,
    /// Why it is not enforced, when it is not (or only in part).
    pub why_not: Option<String>,
}

/// A limit the group went over.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Breach {
    /// Which limit.
    pub limit: Limit,
    /// The cap, in the limit's unit (bytes, processes).
    pub cap: u64,
    /// The highest use seen, in the same unit, when the kernel or the measure says it.
    pub peak: Option<u64>,
    /// What was seen, in words ("the kernel killed 1 process out of memory").
    pub what: String,
}

/// What the group used, as far as the kernel tells.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct Usage {
    /// The highest memory use, in bytes.
    pub memory_peak: Option<u64>,
    /// The most processes at once.
    pub pids_peak: Option<u64>,
    /// How many CPU periods the group was held back in.
    pub cpu_throttled: Option<u64>,
}

/// Thousandths of a core as cores (`1500` is `1.500`).
pub fn cores(millis: u64) -> String {
    format!("{}.{:03}", millis / 1000, millis % 1000)
}

/// Which cgroup hierarchy a directory belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Version {
    V1,
    V2,
}

/// One cgroup made for the group.
#[derive(Debug)]
struct Cgroup {
    version: Version,
    dir: PathBuf,
}

impl Cgroup {
    fn read(&self, file: &str) -> Option<String> {
        fs::read_to_string(self.dir.join(file)).ok()
    }

    fn write(&self, file: &str, value: &str) -> io::Result<()> {
        fs::write(self.dir.join(file), value)
    }

    fn number(&self, file: &str) -> Option<u64> {
        self.read(file)?.trim().parse().ok()
    }

    /// The value of `key` in a flat keyed file (`memory.events`, `pids.events`, `cpu.stat`).
    fn keyed(&self, file: &str, key: &str) -> Option<u64> {
        self.read(file)?.lines().find_map(|line| {
            let (k, v) = line.split_once(' ')?;
            (k == key).then(|| v.trim().parse().ok()).flatten()
        })
    }

    fn members(&self) -> Vec<i32> {
        self.read("cgroup.procs")
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect()
    }
}

/// The limits of one spawn; see the module documentation.
#[derive(Debug)]
pub struct LimitGroup {
    limits: ResourceLimits,
    memory: Option<Cgroup>,
    pids: Option<Cgroup>,
    cpu: Option<Cgroup>,
    /// `cgroup.procs` of every cgroup made, opened for the child to join.
    join: Vec<OwnedFd>,
    /// `(resource, value)` pairs the child sets before exec.
    rlimits: Vec<(libc::__rlimit_resource_t, u64)>,
    enforcement: Vec<Enforcement>,
    measured: Vec<PathBuf>,
    /// The cgroups are another program's ([`LimitGroup::adopt`]): never removed here.
    adopted: bool,
}

/// Where this process's cgroups are: the v2 path, and the v1 path per controller.
#[derive(Debug, Default)]
struct Placement {
    unified: Option<PathBuf>,
    v1: Vec<(String, PathBuf)>,
}

/// The cgroup file systems mounted here: `(type, mount point, super options)`.
fn cgroup_mounts() -> Vec<(String, PathBuf, String)> {
    let Ok(text) = fs::read_to_string("/proc/self/mountinfo") else {
        return Vec::new();
    };
    text.lines()
        .filter_map(|line| {
            let (left, right) = line.split_once(" - ")?;
            let mount_point = left.split(' ').nth(4)?;
            let mut fields = right.split(' ');
            let fstype = fields.next()?;
            let options = fields.nth(1).unwrap_or_default();
            (fstype == "cgroup" || fstype == "cgroup2").then(|| {
                (
                    fstype.to_string(),
                    PathBuf::from(mount_point),
                    options.to_string(),
                )
            })
        })
        .collect()
}

fn placement() -> Placement {
    let mut placement = Placement::default();
    let Ok(own) = fs::read_to_string("/proc/self/cgroup") else {
        return placement;
    };
    let mounts = cgroup_mounts();
    for line in own.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        let relative = path.trim_start_matches('/');
        if controllers.is_empty() {
            placement.unified = mounts
                .iter()
                .find(|(fstype, _, _)| fstype == "cgroup2")
                .map(|(_, mount, _)| mount.join(relative));
            continue;
        }
        for controller in controllers.split(',') {
            if let Some((_, mount, _)) = mounts.iter().find(|(fstype, _, options)| {
                fstype == "cgroup" && options.split(',').any(|o| o == controller)
            }) {
                placement
                    .v1
                    .push((controller.to_string(), mount.join(relative)));
            }
        }
    }
    placement
}

/// A fresh name for one spawn's cgroups: the process, a count of this process's groups, and
/// the clock (a later process with the same pid does not meet an old name either).
fn unique_name() -> String {
    static MADE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let count = MADE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!("corral-{}-{count}-{nanos:09}", std::process::id())
}

/// Removes the cgroups a Corral that is gone left in `parent` (killed before it could remove
/// them): named `corral-<pid>-…` for a pid that no longer runs, and empty (`rmdir` refuses one
/// with a member, which is then left alone).
fn sweep_stale(parent: &Path) {
    let Ok(entries) = fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("corral-"))
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = fs::remove_dir(entry.path());
        }
    }
}

/// Makes a child cgroup for `controller`: v2 when it is delegated to this process's cgroup,
/// else v1. The error says why neither could be made.
fn make_cgroup(placement: &Placement, controller: &str, name: &str) -> Result<Cgroup, String> {
    let mut why = Vec::new();
    if let Some(own) = &placement.unified {
        let delegated = fs::read_to_string(own.join("cgroup.subtree_control"))
            .is_ok_and(|s| s.split_whitespace().any(|c| c == controller));
        if delegated {
            sweep_stale(own);
            let dir = own.join(name);
            match fs::create_dir(&dir).or_else(|e| {
                if e.kind() == io::ErrorKind::AlreadyExists {
                    Ok(())
                } else {
                    Err(e)
                }
            }) {
                Ok(()) => {
                    return Ok(Cgroup {
                        version: Version::V2,
                        dir,
                    });
                }
                Err(e) => why.push(format!("cgroup v2 {}: {e}", dir.display())),
            }
        } else {
            why.push(format!(
                "cgroup v2: {controller} is not delegated to {}",
                own.display()
            ));
        }
    }
    match placement.v1.iter().find(|(c, _)| c == controller) {
        Some((_, own)) => {
            sweep_stale(own);
            let dir = own.join(name);
            match fs::create_dir(&dir) {
                Ok(()) => Ok(Cgroup {
                    version: Version::V1,
                    dir,
                }),
                Err(e) => {
                    why.push(format!("cgroup v1 {}: {e}", dir.display()));
                    Err(why.join("; "))
                }
            }
        }
        None => {
            why.push(format!("no cgroup v1 hierarchy has {controller}"));
            Err(why.join("; "))
        }
    }
}

fn version_name(version: Version) -> &'static str {
    match version {
        Version::V1 => "cgroup v1",
        Version::V2 => "cgroup v2",
    }
}

impl LimitGroup {
    /// Makes the group for `limits`; `measured` are the directories whose size counts against
    /// the disk limit. Never fails: what cannot be enforced one way falls back to the next, and
    /// [`LimitGroup::enforcement`] says what came of each.
    pub fn create(limits: ResourceLimits, measured: Vec<PathBuf>) -> LimitGroup {
        let placement = placement();
        let name = unique_name();
        let mut group = LimitGroup {
            limits,
            memory: None,
            pids: None,
            cpu: None,
            join: Vec::new(),
            rlimits: Vec::new(),
            enforcement: Vec::new(),
            measured,
            adopted: false,
        };
        if let Some(bytes) = limits.memory {
            let (how, why_not) = match make_cgroup(&placement, "memory", &name) {
                Ok(cgroup) => {
                    let file = match cgroup.version {
                        Version::V1 => "memory.limit_in_bytes",
                        Version::V2 => "memory.max",
                    };
                    let set = cgroup.write(file, &bytes.to_string());
                    if cgroup.version == Version::V2 {
                        // No swap to spill into: the cap is the cap.
                        let _ = cgroup.write("memory.swap.max", "0");
                    }
                    group.settle(cgroup, set, file, Limit::Memory)
                }
                Err(why) => {
                    group.rlimits.push((libc::RLIMIT_DATA, bytes));
                    (Some(DATA_HOW.to_string()), Some(why))
                }
            };
            group.enforcement.push(Enforcement {
                limit: Limit::Memory,
                cap: bytes.to_string(),
                how,
                why_not,
            });
        }
        if let Some(count) = limits.pids {
            let (how, why_not) = match make_cgroup(&placement, "pids", &name) {
                Ok(cgroup) => {
                    let set = cgroup.write("pids.max", &count.to_string());
                    group.settle(cgroup, set, "pids.max", Limit::Pids)
                }
                Err(why) => (None, Some(format!("{why}; {NPROC_WHY_NOT}"))),
            };
            group.enforcement.push(Enforcement {
                limit: Limit::Pids,
                cap: count.to_string(),
                how,
                why_not,
            });
        }
        if let Some(millis) = limits.cpu_millis {
            let (how, why_not) = match make_cgroup(&placement, "cpu", &name) {
                Ok(cgroup) => {
                    // Per 100 ms period; the kernel's smallest quota is 1 ms.
                    let quota = millis.saturating_mul(100).max(1000);
                    let (set, file) = match cgroup.version {
                        Version::V1 => (
                            cgroup.write("cpu.cfs_period_us", "100000").and_then(|()| {
                                cgroup.write("cpu.cfs_quota_us", &quota.to_string())
                            }),
                            "cpu.cfs_quota_us",
                        ),
                        Version::V2 => (
                            cgroup.write("cpu.max", &format!("{quota} 100000")),
                            "cpu.max",
                        ),
                    };
                    match set {
                        Ok(()) => {
                            let how = format!("{} {file}", version_name(cgroup.version));
                            group.joined(&cgroup);
                            group.cpu = Some(cgroup);
                            (Some(how), None)
                        }
                        Err(e) => {
                            let _ = fs::remove_dir(&cgroup.dir);
                            (
                                None,
                                Some(format!("{}: {e}", cgroup.dir.join(file).display())),
                            )
                        }
                    }
                }
                Err(why) => (None, Some(why)),
            };
            group.enforcement.push(Enforcement {
                limit: Limit::Cpus,
                cap: cores(millis),
                how,
                why_not,
            });
        }
        if let Some(bytes) = limits.disk {
            group.rlimits.push((libc::RLIMIT_FSIZE, bytes));
            let how = if group.measured.is_empty() {
                "RLIMIT_FSIZE (each file)".to_string()
            } else {
                format!(
                    "RLIMIT_FSIZE (each file), and {} measured together",
                    group
                        .measured
                        .iter()
                        .map(|p| p.display().to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            };
            group.enforcement.push(Enforcement {
                limit: Limit::Disk,
                cap: bytes.to_string(),
                how: Some(how),
                why_not: None,
            });
        }
        group
    }

    /// Keeps a cgroup whose cap was written (its `cgroup.procs` opened for the child), or
    /// removes it and falls back: memory to `RLIMIT_DATA`, processes to nothing (see
    /// [`NPROC_WHY_NOT`]).
    fn settle(
        &mut self,
        cgroup: Cgroup,
        set: io::Result<()>,
        file: &str,
        limit: Limit,
    ) -> (Option<String>, Option<String>) {
        match set {
            Ok(()) => {
                let how = format!("{} {file}", version_name(cgroup.version));
                self.joined(&cgroup);
                match limit {
                    Limit::Memory => self.memory = Some(cgroup),
                    Limit::Pids => self.pids = Some(cgroup),
                    Limit::Cpus | Limit::Disk => self.cpu = Some(cgroup),
                }
                (Some(how), None)
            }
            Err(e) => {
                let why = format!("{}: {e}", cgroup.dir.join(file).display());
                let _ = fs::remove_dir(&cgroup.dir);
                match (limit, self.limits.memory) {
                    (Limit::Memory, Some(bytes)) => {
                        self.rlimits.push((libc::RLIMIT_DATA, bytes));
                        (Some(DATA_HOW.to_string()), Some(why))
                    }
                    _ => (None, Some(format!("{why}; {NPROC_WHY_NOT}"))),
                }
            }
        }
    }

    /// Opens `cgroup`'s `cgroup.procs` for the child to join (a hierarchy shared by several
    /// controllers is joined once, which is harmless anyway).
    fn joined(&mut self, cgroup: &Cgroup) {
        let path = cgroup.dir.join("cgroup.procs");
        match fs::OpenOptions::new().write(true).open(&path) {
            Ok(file) => self.join.push(OwnedFd::from(file)),
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "cannot open a cgroup to join")
            }
        }
    }

    /// The cgroups another program made at `relative` (the same path in every hierarchy, as a
    /// container engine's `CgroupPath`), watched against `limits` as this group's own are:
    /// [`LimitGroup::breach`], [`LimitGroup::usage`], [`LimitGroup::kill_all`]. Not made here,
    /// they are not removed here either; nothing is joined and no rlimit is set.
    pub fn adopt(limits: ResourceLimits, relative: &Path) -> LimitGroup {
        let relative = relative.strip_prefix("/").unwrap_or(relative);
        let mounts = cgroup_mounts();
        let find = |controller: &str| -> Option<Cgroup> {
            mounts
                .iter()
                .find_map(|(fstype, mount, options)| {
                    let v1 = fstype == "cgroup" && options.split(',').any(|o| o == controller);
                    let dir = mount.join(relative);
                    if v1 {
                        return Some(Cgroup {
                            version: Version::V1,
                            dir,
                        });
                    }
                    let v2 = fstype == "cgroup2"
                        && fs::read_to_string(dir.join("cgroup.controllers"))
                            .is_ok_and(|c| c.split_whitespace().any(|n| n == controller));
                    v2.then_some(Cgroup {
                        version: Version::V2,
                        dir,
                    })
                })
                .filter(|c| c.dir.is_dir())
        };
        LimitGroup {
            limits,
            memory: limits.memory.and_then(|_| find("memory")),
            pids: limits.pids.and_then(|_| find("pids")),
            cpu: limits.cpu_millis.and_then(|_| find("cpu")),
            join: Vec::new(),
            rlimits: Vec::new(),
            enforcement: Vec::new(),
            measured: Vec::new(),
            adopted: true,
        }
    }

    /// A group of no cgroup that measures `measured` against the disk limit `cap`: for a
    /// container whose cgroup cannot be read (rootless podman on a cgroup v1 host).
    pub fn measure_only(cap: u64, measured: Vec<PathBuf>) -> LimitGroup {
        LimitGroup {
            limits: ResourceLimits {
                disk: Some(cap),
                ..ResourceLimits::default()
            },
            memory: None,
            pids: None,
            cpu: None,
            join: Vec::new(),
            rlimits: Vec::new(),
            enforcement: Vec::new(),
            measured,
            adopted: true,
        }
    }

    /// The group, with `measured` counted against the disk limit as well: for an adopted
    /// group, the directories a container writes through its binds.
    pub fn measuring(mut self, measured: Vec<PathBuf>) -> LimitGroup {
        self.measured = measured;
        self
    }

    /// Each limit `limits` sets, with its cap as [`Enforcement::cap`] writes it, for a caller
    /// that enforces them by other means (a container engine's own options).
    pub fn describe(limits: ResourceLimits) -> Vec<(Limit, String)> {
        let mut out = Vec::new();
        if let Some(bytes) = limits.memory {
            out.push((Limit::Memory, bytes.to_string()));
        }
        if let Some(count) = limits.pids {
            out.push((Limit::Pids, count.to_string()));
        }
        if let Some(millis) = limits.cpu_millis {
            out.push((Limit::Cpus, cores(millis)));
        }
        if let Some(bytes) = limits.disk {
            out.push((Limit::Disk, bytes.to_string()));
        }
        out
    }

    /// What came of each limit asked for.
    pub fn enforcement(&self) -> &[Enforcement] {
        &self.enforcement
    }

    /// The limits asked for.
    pub fn limits(&self) -> ResourceLimits {
        self.limits
    }

    /// The step the child runs before exec: join the cgroups, set the rlimits. Put it before
    /// any hook that watches the child's own calls.
    pub fn hook(self: &Arc<Self>) -> Arc<dyn PreExecHook> {
        Arc::new(JoinHook {
            join: self.join.iter().map(AsRawFd::as_raw_fd).collect(),
            rlimits: self.rlimits.clone(),
            _group: Arc::clone(self),
        })
    }

    /// The first limit the group went over, if it went over one.
    pub fn breach(&self) -> Option<Breach> {
        if let (Some(cgroup), Some(cap)) = (&self.memory, self.limits.memory) {
            let killed = match cgroup.version {
                Version::V1 => cgroup.keyed("memory.oom_control", "oom_kill"),
                Version::V2 => cgroup.keyed("memory.events", "oom_kill"),
            }
            .unwrap_or(0);
            if killed > 0 {
                return Some(Breach {
                    limit: Limit::Memory,
                    cap,
                    peak: self.usage().memory_peak,
                    what: format!("the kernel killed {killed} process(es) out of memory"),
                });
            }
        }
        if let (Some(cgroup), Some(cap)) = (&self.pids, self.limits.pids) {
            let refused = cgroup.keyed("pids.events", "max").unwrap_or(0);
            if refused > 0 {
                return Some(Breach {
                    limit: Limit::Pids,
                    cap,
                    peak: self.usage().pids_peak,
                    what: format!("{refused} fork(s) refused at the process limit"),
                });
            }
        }
        self.limits
            .disk
            .and_then(|cap| disk_breach(cap, &self.measured))
    }

    /// The breach that ended a child by its exit: `SIGXFSZ` is a file over the disk limit, and
    /// so is the exit status a shell or bubblewrap passes on for it (128 + `SIGXFSZ`).
    pub fn breach_by_exit(&self, exit: crate::spawn::ExitInfo) -> Option<Breach> {
        if let Some(breach) = self.breach() {
            return Some(breach);
        }
        let cap = self.limits.disk?;
        let by_signal =
            exit.signal == Some(libc::SIGXFSZ) || exit.code == Some(128 + libc::SIGXFSZ);
        by_signal.then(|| Breach {
            limit: Limit::Disk,
            cap,
            peak: None,
            what: "a file grew past the disk limit (SIGXFSZ)".to_string(),
        })
    }

    /// Resolves at the first breach, checking every `period`.
    pub async fn watch(&self, period: Duration) -> Breach {
        loop {
            if let Some(breach) = self.breach() {
                return breach;
            }
            tokio::time::sleep(period).await;
        }
    }

    /// What the group used.
    pub fn usage(&self) -> Usage {
        Usage {
            memory_peak: self.memory.as_ref().and_then(|c| match c.version {
                Version::V1 => c.number("memory.max_usage_in_bytes"),
                Version::V2 => c.number("memory.peak"),
            }),
            pids_peak: self.pids.as_ref().and_then(|c| c.number("pids.peak")),
            cpu_throttled: self
                .cpu
                .as_ref()
                .and_then(|c| c.keyed("cpu.stat", "nr_throttled")),
        }
    }

    /// Every process in the group's cgroups, now.
    pub fn members(&self) -> Vec<i32> {
        let mut all: Vec<i32> = [&self.pids, &self.memory, &self.cpu]
            .into_iter()
            .flatten()
            .flat_map(Cgroup::members)
            .collect();
        all.sort_unstable();
        all.dedup();
        all
    }

    /// Kills every process in the group's cgroups, again until none is left or a few rounds
    /// passed (a fork loop may add members while they are killed, up to its process limit).
    pub fn kill_all(&self) {
        for cgroup in [&self.pids, &self.memory, &self.cpu].into_iter().flatten() {
            if cgroup.version == Version::V2 {
                // One write ends them all where the kernel has it (5.14 and later).
                let _ = cgroup.write("cgroup.kill", "1");
            }
        }
        for _ in 0..50 {
            let members = self.members();
            if members.is_empty() {
                return;
            }
            for pid in members {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The cgroups made (for tests and the record: each is gone once the group is dropped).
    pub fn cgroup_dirs(&self) -> Vec<PathBuf> {
        [&self.pids, &self.memory, &self.cpu]
            .into_iter()
            .flatten()
            .map(|c| c.dir.clone())
            .collect()
    }
}

impl Drop for LimitGroup {
    fn drop(&mut self) {
        if self.adopted {
            return;
        }
        self.kill_all();
        for cgroup in [&self.pids, &self.memory, &self.cpu].into_iter().flatten() {
            // A killed member leaves its cgroup as the kernel finishes its exit: tries for up to
            // 5 s (a second was not always enough at a load average of 40).
            for _ in 0..500 {
                match fs::remove_dir(&cgroup.dir) {
                    Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                        std::thread::sleep(Duration::from_millis(10));
                    }
                    Ok(()) | Err(_) => break,
                }
            }
        }
    }
}

/// A breach of the disk limit `cap` by the directories in `measured` together, if they are at
/// it: at the cap is full, since a file is stopped at exactly the cap (`RLIMIT_FSIZE`). For a
/// caller that measures after its spawn ended (a container whose cgroup went with it).
pub fn disk_breach(cap: u64, measured: &[PathBuf]) -> Option<Breach> {
    if measured.is_empty() {
        return None;
    }
    let used: u64 = measured.iter().map(|dir| disk_use(dir)).sum();
    (used >= cap).then(|| Breach {
        limit: Limit::Disk,
        cap,
        peak: Some(used),
        what: format!("{used} bytes on disk in the measured directories"),
    })
}

/// The bytes `dir` takes on disk, its subdirectories included (symbolic links not followed);
/// what cannot be read counts nothing. Stops after a large number of entries, counting what
/// it saw.
fn disk_use(dir: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let mut total = 0u64;
    let mut stack = vec![dir.to_path_buf()];
    let mut seen = 0usize;
    while let Some(next) = stack.pop() {
        let Ok(entries) = fs::read_dir(&next) else {
            continue;
        };
        for entry in entries.flatten() {
            seen += 1;
            if seen > 200_000 {
                return total;
            }
            let Ok(meta) = entry.metadata() else {
                continue;
            };
            total = total.saturating_add(meta.blocks().saturating_mul(512));
            if meta.is_dir() {
                stack.push(entry.path());
            }
        }
    }
    total
}

/// The child's step before exec (see [`LimitGroup::hook`]).
#[derive(Debug)]
struct JoinHook {
    join: Vec<std::os::fd::RawFd>,
    rlimits: Vec<(libc::__rlimit_resource_t, u64)>,
    /// Keeps the `cgroup.procs` descriptors open until the spawn is done.
    _group: Arc<LimitGroup>,
}

// SAFETY: `in_child` calls only write(2) and setrlimit(2), which are async-signal-safe, on
// descriptors and values prepared before the fork; it allocates nothing and takes no lock.
#[allow(unsafe_code)]
unsafe impl PreExecHook for JoinHook {
    fn in_child(&self) -> io::Result<()> {
        for &fd in &self.join {
            // "0" is the writing process itself, in both versions.
            // SAFETY: a valid descriptor owned by the group, and a one-byte buffer.
            let written = unsafe { libc::write(fd, b"0".as_ptr().cast(), 1) };
            if written < 0 {
                return Err(io::Error::last_os_error());
            }
        }
        for &(resource, value) in &self.rlimits {
            let limit = libc::rlimit {
                rlim_cur: value,
                rlim_max: value,
            };
            // SAFETY: a plain system call on a value on the stack.
            if unsafe { libc::setrlimit(resource, &limit) } != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(())
    }
}
