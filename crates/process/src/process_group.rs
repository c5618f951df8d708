//! Process groups: everything the engine does to a child's tree once it runs.
//!
//! Every child the engine starts leads its own process group. This module signals a group,
//! tells whether any live process is left in it (zombies do not count), runs the one kill ladder
//! (SIGTERM to the group, the grace, SIGKILL), keeps the registry of the children the engine
//! spawned and tokio will reap, makes the supervisor a child subreaper when the configuration
//! asks, and sweeps the processes that left the group but carry the attempt's run token.
//!
//! The rule that keeps an embedding program safe lives here, in one place: the sweep reaps only
//! what the engine knows to be its run's (a process it killed because it carried the token, or
//! a zombie that was a member of the attempt's own process group) and never a child that tokio
//! owns. A program that embeds the engine keeps the exit status of its own children.
//!
//! It knows nothing about the execution log: the ladder and the sweep say which signals they
//! sent, and the caller records them.

use std::collections::BTreeSet;
use std::io;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

use crate::proc;

/// The environment variable that marks a run's processes.
pub const RUN_TOKEN_VAR: &str = "CORRAL_RUN_ID";

/// How often a dying group is looked at.
pub const KILL_POLL: Duration = Duration::from_millis(2);
/// How long a group gets to disappear after SIGKILL before the ladder gives up waiting.
const AFTER_SIGKILL: Duration = Duration::from_secs(2);
/// How long the sweep waits for the processes it killed in one round.
const SWEEP_ROUND_WAIT: Duration = Duration::from_millis(500);
/// Rounds of the sweep: killing an escaped process re-parents its children, which the next round
/// finds.
const SWEEP_ROUNDS: usize = 8;

/// Sends `signal` to process group `pgid`. `Ok(false)` when no process of the group exists.
pub fn signal_group(pgid: u32, signal: Signal) -> io::Result<bool> {
    // 0 would mean our own group and 1 init's: never a child's group.
    if pgid <= 1 {
        return Err(io::Error::other(format!(
            "refusing to signal process group {pgid}"
        )));
    }
    let pgid = i32::try_from(pgid).map_err(|_| io::Error::other("pid out of range"))?;
    match killpg(Pid::from_raw(pgid), signal) {
        Ok(()) => Ok(true),
        Err(nix::errno::Errno::ESRCH) => Ok(false),
        Err(e) => Err(io::Error::from(e)),
    }
}

/// True while a process of group `pgid` is alive. Zombies are dead: an orphaned grandchild that
/// was killed may wait a long time for an init that reaps slowly, and must not stall the kill
/// ladder.
pub fn group_alive(pgid: u32) -> bool {
    let Ok(raw) = i32::try_from(pgid) else {
        return false;
    };
    if raw <= 1 {
        return false;
    }
    // Signal 0 only checks existence; ESRCH settles it cheaply.
    if let Err(nix::errno::Errno::ESRCH) = killpg(Pid::from_raw(raw), None) {
        return false;
    }
    proc::any_live_in_group(pgid).unwrap_or(true)
}

/// A signal the ladder or the sweep sent, for the caller's record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sent {
    /// The signal.
    pub signal: Signal,
    /// Whether it went to a process group or to one escaped process.
    pub target: Target,
    /// The process group id, or the pid.
    pub id: u32,
    /// Whether anything received it.
    pub delivered: bool,
}

/// What a [`Sent`] signal went to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// A whole process group.
    Group,
    /// One process that had left the group.
    Escaped,
}

impl Target {
    /// The name in the execution log.
    pub fn as_str(self) -> &'static str {
        match self {
            Target::Group => "group",
            Target::Escaped => "escaped",
        }
    }
}

/// The kill ladder for one process group: SIGTERM, then SIGKILL once the grace has passed and a
/// member is still alive. Decided by group liveness, never by signalling a reaped pid.
///
/// The attempt loop calls [`KillLadder::poll`] between reads, so output keeps being drained
/// while the group dies; everywhere else [`KillLadder::run_to_end`] waits it out.
#[derive(Debug)]
pub struct KillLadder {
    pgid: u32,
    sigkill_at: Instant,
    sigkill_sent: Option<Instant>,
    group_dead: bool,
}

impl KillLadder {
    /// Sends SIGTERM to the group and starts the grace (zero: SIGKILL at the first poll).
    pub fn start(pgid: u32, grace: Duration) -> (Self, Sent) {
        let delivered = signal_group(pgid, Signal::SIGTERM).unwrap_or(false);
        let ladder = KillLadder {
            pgid,
            sigkill_at: Instant::now() + grace,
            sigkill_sent: None,
            group_dead: !delivered,
        };
        (ladder, group_sent(Signal::SIGTERM, pgid, delivered))
    }

    /// Whether no live member of the group is left (as of the last poll).
    pub fn group_dead(&self) -> bool {
        self.group_dead
    }

    /// Looks at the group once: notes when it is gone, and sends SIGKILL (once) when the grace
    /// is over and it is not. Returns the SIGKILL when it was sent.
    pub fn poll(&mut self) -> Option<Sent> {
        if self.group_dead {
            return None;
        }
        if !group_alive(self.pgid) {
            self.group_dead = true;
            return None;
        }
        if self.sigkill_sent.is_none() && Instant::now() >= self.sigkill_at {
            let delivered = signal_group(self.pgid, Signal::SIGKILL).unwrap_or(false);
            self.sigkill_sent = Some(Instant::now());
            return Some(group_sent(Signal::SIGKILL, self.pgid, delivered));
        }
        None
    }

    /// Polls until the group is gone, or until it outlived SIGKILL by two seconds (a member
    /// stuck in the kernel); `on_sent` hears the SIGKILL.
    pub async fn run_to_end(&mut self, mut on_sent: impl FnMut(Sent)) {
        loop {
            if let Some(sent) = self.poll() {
                on_sent(sent);
            }
            let stuck = self
                .sigkill_sent
                .is_some_and(|at| at.elapsed() >= AFTER_SIGKILL);
            if self.group_dead || stuck {
                return;
            }
            tokio::time::sleep(KILL_POLL).await;
        }
    }
}

fn group_sent(signal: Signal, pgid: u32, delivered: bool) -> Sent {
    Sent {
        signal,
        target: Target::Group,
        id: pgid,
        delivered,
    }
}

/// Pids the engine spawned that tokio has not reaped yet: the sweep must never reap one of
/// these, tokio does. Registered before the spawn returns its pid (see [`Registration`]).
static OWNED: Mutex<BTreeSet<u32>> = Mutex::new(BTreeSet::new());

/// The registry held while a child is being spawned, so no sweep can see its pid unregistered.
#[derive(Debug)]
pub(crate) struct Registration {
    guard: std::sync::MutexGuard<'static, BTreeSet<u32>>,
}

impl Registration {
    /// Locks the registry for one spawn.
    pub fn lock() -> io::Result<Self> {
        let guard = OWNED
            .lock()
            .map_err(|_| io::Error::other("child registry poisoned"))?;
        Ok(Registration { guard })
    }

    /// Records the spawned child and releases the registry.
    pub fn insert(mut self, pid: u32) {
        self.guard.insert(pid);
    }
}

/// Whether `pid` is a child the engine spawned and tokio will reap.
fn is_owned(pid: u32) -> bool {
    OWNED.lock().map(|set| set.contains(&pid)).unwrap_or(true)
}

/// Sends SIGKILL to the process group of every child the engine spawned that tokio has not
/// reaped yet, and returns how many groups got it. For a supervisor about to exit at once (a
/// second Ctrl-C): without it, the members of a native run's process group would outlive it,
/// since `PR_SET_PDEATHSIG` reaches only each group's leader.
pub fn kill_child_groups() -> usize {
    let pids: Vec<u32> = OWNED
        .lock()
        .map(|set| set.iter().copied().collect())
        .unwrap_or_default();
    pids.into_iter()
        .filter(|&pid| signal_group(pid, Signal::SIGKILL).unwrap_or(false))
        .count()
}

/// Reaps the keeper of group `pgid` (see the `pdeathsig` module of `spawn.rs`) once its leader
/// was reaped: the kernel killed it when the leader exited and handed it to this process. Waits
/// at most a few milliseconds for it to finish dying; members of the group that are still
/// alive are left to the kill ladder.
pub(crate) async fn reap_keeper(pgid: u32) {
    let Ok(group) = i32::try_from(pgid) else {
        return;
    };
    for _ in 0..50 {
        match nix::sys::wait::waitpid(
            Pid::from_raw(-group),
            Some(nix::sys::wait::WaitPidFlag::WNOHANG),
        ) {
            Ok(nix::sys::wait::WaitStatus::StillAlive) => {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            Ok(_) => {}
            // No child of ours is left in the group.
            Err(_) => return,
        }
    }
}

/// Forgets a child tokio has reaped.
pub(crate) fn forget(pid: u32) {
    if let Ok(mut set) = OWNED.lock() {
        set.remove(&pid);
    }
}

/// Makes this process a child subreaper (Linux), once: descendants of our children whose parent
/// dies are re-parented to us instead of to init, so the sweep finds a process that left the
/// group (`setsid`, double fork) among our own children rather than among every process on the
/// machine. It is a property of the whole process, so the first run whose configuration asks
/// for it sets it for every later one.
pub fn become_subreaper() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        #[cfg(target_os = "linux")]
        if let Err(e) = nix::sys::prctl::set_child_subreaper(true) {
            tracing::warn!(error = %e, "cannot become a child subreaper; the sweep scans every process");
        }
    });
}

/// Kills the processes that left group `pgid` but still carry `token`, in rounds: killing an
/// escaped process re-parents its own children to the supervisor, where the next round finds
/// them. Returns the pids killed; `on_sent` hears each SIGKILL.
pub async fn sweep_escaped(token: &str, pgid: u32, mut on_sent: impl FnMut(Sent)) -> Vec<u32> {
    let mut killed = Vec::new();
    for _round in 0..SWEEP_ROUNDS {
        let Ok(pids) = escaped_with_token(token, pgid) else {
            break;
        };
        if pids.is_empty() {
            break;
        }
        for &pid in &pids {
            let delivered = i32::try_from(pid)
                .ok()
                .map(|p| nix::sys::signal::kill(Pid::from_raw(p), Signal::SIGKILL).is_ok())
                .unwrap_or(false);
            on_sent(Sent {
                signal: Signal::SIGKILL,
                target: Target::Escaped,
                id: pid,
                delivered,
            });
        }
        // Give the kernel a moment to finish them, then reap the ones that are our children.
        let deadline = Instant::now() + SWEEP_ROUND_WAIT;
        while pids.iter().any(|&p| proc::is_live(p)) && Instant::now() < deadline {
            tokio::time::sleep(KILL_POLL).await;
        }
        for &pid in &pids {
            reap(pid);
        }
        killed.extend(pids);
    }
    killed
}

/// Processes to kill because they carry `token` but outlived their process group `pgid`.
///
/// As a child subreaper, every such process whose ancestors in the run died is our child, so only
/// our children need a look. A zombie among them is reaped on the way only when it was a member
/// of the attempt's group (a double-forked descendant that exited): its environment is gone, and
/// any other zombie may be a child of the program embedding the engine, whose exit status is not
/// ours to take. Where the kernel cannot list children, every process is read.
fn escaped_with_token(token: &str, pgid: u32) -> io::Result<Vec<u32>> {
    let subreaper = nix::sys::prctl::get_child_subreaper().unwrap_or(false);
    let children = if subreaper {
        proc::our_children()
    } else {
        None
    };
    let Some(children) = children else {
        return proc::processes_with_token(RUN_TOKEN_VAR, token);
    };
    let needle = format!("{RUN_TOKEN_VAR}={token}");
    let mut found = Vec::new();
    for pid in children {
        if is_owned(pid) {
            continue;
        }
        match proc::state_and_group(pid) {
            Some((state, group)) if proc::is_dead_state(state) && group == pgid => reap(pid),
            Some((state, _)) if !proc::is_dead_state(state) => {
                if proc::has_env_entry(pid, needle.as_bytes()) {
                    found.push(pid);
                }
            }
            // Gone, or a zombie that may be the embedding program's: not ours.
            Some(_) | None => {}
        }
    }
    Ok(found)
}

/// Reaps this process's exited children that were members of group `pgid` and that no spawn
/// owns: a program's own helper that outlived it, such as bubblewrap's second process, which is
/// re-parented here (a child subreaper) when bubblewrap exits and would otherwise stay a zombie
/// for as long as this process lives. Never blocks, never touches a live process, a child tokio
/// will reap, or a child of another group (the embedding program's own).
pub fn reap_exited_members(pgid: u32) {
    let Some(children) = proc::our_children() else {
        return;
    };
    for pid in children {
        if is_owned(pid) {
            continue;
        }
        if let Some((state, group)) = proc::state_and_group(pid)
            && proc::is_dead_state(state)
            && group == pgid
        {
            reap(pid);
        }
    }
}

/// Reaps `pid` if it is our exited child; never blocks.
fn reap(pid: u32) {
    if let Ok(raw) = i32::try_from(pid) {
        let _ = nix::sys::wait::waitpid(
            Pid::from_raw(raw),
            Some(nix::sys::wait::WaitPidFlag::WNOHANG),
        );
    }
}
