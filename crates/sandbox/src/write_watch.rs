//! The write watch: under the native backend nothing confines the CLI, so the engine at least
//! sees where it writes, on disk anywhere (the home directory, `/tmp`, a sibling checkout), not
//! only in the git work tree the stray-write check snapshots.
//!
//! Between fork and exec the child installs a seccomp filter with a user-notification listener
//! (`SECCOMP_FILTER_FLAG_NEW_LISTENER`, after `no_new_privs`) and hands the listener to the
//! supervisor over a socket pair; the CLI and everything it starts inherit the filter and
//! cannot remove it. Every system call that creates, changes or removes a name on disk (an
//! `open` for writing, `mkdir`, `mknod`, `unlink`, `rmdir`, `rename`, `link`, `symlink`,
//! `truncate`, `chmod`, `chown`, `utime`, the extended-attribute calls) then waits until the
//! supervisor's thread has read its paths from the process's memory, resolved them as the
//! process sees them (its working directory, its directory descriptors, `/proc/self/fd`, the
//! symlinks the call follows) and noted those outside the paths the spawn may write; then it
//! goes on unchanged (`SECCOMP_USER_NOTIF_FLAG_CONTINUE`). Reads never stop. A write the
//! process's own permissions would refuse (a file it may not write, a directory it may not
//! change, a path that is not there to remove) is not noted: it does not happen.
//!
//! What it refuses, with `EPERM`, because the filter could not see through them: the
//! `io_uring_*` calls (a second path to the same operations), `open_by_handle_at` (an open by
//! file handle, not by path), `ptrace` and `process_vm_writev` (making another process do the
//! write), and any other architecture's system calls.
//!
//! What it is not: a boundary. The calls go on whatever their paths; a multithreaded program
//! can rewrite a path between the supervisor's read and the kernel's; what another process
//! does on the CLI's behalf (a daemon it asks over a socket) is that process's call; paths are
//! resolved in Corral's own mount namespace, so a process in one of its own (Codex's sandbox,
//! `unshare -m`) can bind a directory from outside under its work tree and write there as if
//! inside; a process that made itself undumpable cannot have its memory read, and such a call
//! is noted as a write to an unknown path. The default sandbox is the boundary; this is the record of the
//! degraded backend the user consented to.

use std::collections::BTreeSet;
use std::fs;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::fs::FileTypeExt;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;

use corral_process::PreExecHook;

use crate::git_check::ChangeKind;
use crate::seccomp::{Instruction, JEQ_K, LD_W_ABS, RET_K, arch_header, ret_eperm, stmt};

/// At most this many distinct writes are kept; the rest are counted.
const MAX_NOTED: usize = 10_000;
/// How often the watch thread looks whether it was asked to stop.
const POLL_MS: i32 = 100;
/// `BPF_JMP | BPF_JSET | BPF_K`.
const JSET_K: u16 = 0x45;
const RET_USER_NOTIF: u32 = 0x7fc0_0000;
const RET_ALLOW: u32 = 0x7fff_0000;
/// An `open` that can write or create: the flags the filter stops.
const WRITE_FLAGS: u32 = (libc::O_WRONLY | libc::O_RDWR | libc::O_CREAT | libc::O_TRUNC) as u32;
/// System calls newer than the C library's tables; the same number on every architecture.
const SYS_FCHMODAT2: libc::c_long = 452;
const SYS_SETXATTRAT: libc::c_long = 463;
const SYS_REMOVEXATTRAT: libc::c_long = 466;
const SYS_FILE_SETATTR: libc::c_long = 468;

/// Where a call's path is: a directory descriptor argument (or the working directory) and the
/// path argument.
#[derive(Debug, Clone, Copy)]
struct At {
    dirfd: Option<usize>,
    path: usize,
}

const fn at(dirfd: usize, path: usize) -> At {
    At {
        dirfd: Some(dirfd),
        path,
    }
}

const fn cwd(path: usize) -> At {
    At { dirfd: None, path }
}

/// What a stopped call does to its paths.
#[derive(Debug, Clone, Copy)]
enum Op {
    /// `open`/`openat`/`creat`: writes the file, creating it when missing. `flags`: the flags
    /// argument (`creat` has none: it always creates and writes).
    Open { at: At, flags: Option<usize> },
    /// `openat2`: its flags are in the `struct open_how` the third argument points to.
    Open2 { at: At },
    /// A new name.
    Create { at: At },
    /// A name removed.
    Remove { at: At },
    /// The old name removed, the new one made (or replaced).
    Rename { from: At, to: At },
    /// A file's content or metadata changed through its name; `follows`: whether the last
    /// component's symlink is followed (not for `lchown`, `lsetxattr`, `lremovexattr`), and for
    /// the `*at` calls the flags argument that can say `AT_SYMLINK_NOFOLLOW`.
    Change {
        at: At,
        follows: bool,
        flags: Option<usize>,
    },
}

/// The calls the filter stops, with what each does.
fn watched_calls() -> Vec<(libc::c_long, Op)> {
    let change = |at, flags| Op::Change {
        at,
        follows: true,
        flags,
    };
    let change_link = |at| Op::Change {
        at,
        follows: false,
        flags: None,
    };
    #[allow(unused_mut)]
    let mut calls = vec![
        (
            libc::SYS_openat,
            Op::Open {
                at: at(0, 1),
                flags: Some(2),
            },
        ),
        (libc::SYS_openat2, Op::Open2 { at: at(0, 1) }),
        (libc::SYS_mkdirat, Op::Create { at: at(0, 1) }),
        (libc::SYS_mknodat, Op::Create { at: at(0, 1) }),
        (libc::SYS_symlinkat, Op::Create { at: at(1, 2) }),
        (libc::SYS_linkat, Op::Create { at: at(2, 3) }),
        (libc::SYS_unlinkat, Op::Remove { at: at(0, 1) }),
        (
            libc::SYS_renameat,
            Op::Rename {
                from: at(0, 1),
                to: at(2, 3),
            },
        ),
        (
            libc::SYS_renameat2,
            Op::Rename {
                from: at(0, 1),
                to: at(2, 3),
            },
        ),
        (libc::SYS_truncate, change(cwd(0), None)),
        (libc::SYS_fchmodat, change(at(0, 1), None)),
        (SYS_FCHMODAT2, change(at(0, 1), Some(3))),
        (libc::SYS_fchownat, change(at(0, 1), Some(4))),
        (libc::SYS_utimensat, change(at(0, 1), Some(3))),
        (libc::SYS_setxattr, change(cwd(0), None)),
        (libc::SYS_lsetxattr, change_link(cwd(0))),
        (libc::SYS_removexattr, change(cwd(0), None)),
        (libc::SYS_lremovexattr, change_link(cwd(0))),
        (SYS_SETXATTRAT, change(at(0, 1), Some(2))),
        (SYS_REMOVEXATTRAT, change(at(0, 1), Some(2))),
        (SYS_FILE_SETATTR, change(at(0, 1), Some(4))),
    ];
    #[cfg(target_arch = "x86_64")]
    calls.extend([
        (
            libc::SYS_open,
            Op::Open {
                at: cwd(0),
                flags: Some(1),
            },
        ),
        (
            libc::SYS_creat,
            Op::Open {
                at: cwd(0),
                flags: None,
            },
        ),
        (libc::SYS_mkdir, Op::Create { at: cwd(0) }),
        (libc::SYS_mknod, Op::Create { at: cwd(0) }),
        (libc::SYS_symlink, Op::Create { at: cwd(1) }),
        (libc::SYS_link, Op::Create { at: cwd(1) }),
        (libc::SYS_unlink, Op::Remove { at: cwd(0) }),
        (libc::SYS_rmdir, Op::Remove { at: cwd(0) }),
        (
            libc::SYS_rename,
            Op::Rename {
                from: cwd(0),
                to: cwd(1),
            },
        ),
        (libc::SYS_chmod, change(cwd(0), None)),
        (libc::SYS_chown, change(cwd(0), None)),
        (libc::SYS_lchown, change_link(cwd(0))),
        (libc::SYS_utime, change(cwd(0), None)),
        (libc::SYS_utimes, change(cwd(0), None)),
        (libc::SYS_futimesat, change(at(0, 1), None)),
    ]);
    calls
}

/// Refused with `EPERM`: ways around the filter (`open_by_handle_at` opens a file, for writing
/// too, by a handle instead of a path; root's only, and no CLI needs it).
const REFUSED: &[libc::c_long] = &[
    libc::SYS_open_by_handle_at,
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    libc::SYS_ptrace,
    libc::SYS_process_vm_writev,
];

fn nr(n: libc::c_long) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// `offsetof(struct seccomp_data, args[i])`, the low 32 bits.
fn arg_offset(i: usize) -> u32 {
    let low = if cfg!(target_endian = "big") { 4 } else { 0 };
    16 + 8 * u32::try_from(i).unwrap_or(0) + low
}

/// Where a listed call's jump goes.
#[derive(Debug, Clone, Copy)]
enum Target {
    Refuse,
    Notify,
    /// The `i`th flag check (an `open` that may only read goes on).
    FlagCheck(usize),
}

/// The filter, as the instructions it is made of: the architecture check, one comparison per
/// listed call, the three returns, then one block per `open` whose flags decide.
fn instructions() -> Vec<Instruction> {
    let mut out = arch_header();
    let mut listed: Vec<(u32, Target)> = REFUSED.iter().map(|&n| (nr(n), Target::Refuse)).collect();
    let mut flag_args = Vec::new();
    for (n, op) in watched_calls() {
        let target = match op {
            Op::Open {
                flags: Some(arg), ..
            } => {
                flag_args.push(arg);
                Target::FlagCheck(flag_args.len() - 1)
            }
            Op::Open { flags: None, .. }
            | Op::Open2 { .. }
            | Op::Create { .. }
            | Op::Remove { .. }
            | Op::Rename { .. }
            | Op::Change { .. } => Target::Notify,
        };
        listed.push((nr(n), target));
    }
    let first = out.len();
    let allow_at = first + listed.len();
    let refuse_at = allow_at + 1;
    let notify_at = allow_at + 2;
    let checks_at = allow_at + 3;
    for (i, &(number, target)) in listed.iter().enumerate() {
        let to = match target {
            Target::Refuse => refuse_at,
            Target::Notify => notify_at,
            Target::FlagCheck(j) => checks_at + 4 * j,
        };
        out.push(Instruction {
            code: JEQ_K,
            jt: u8::try_from(to - (first + i) - 1).unwrap_or(u8::MAX),
            jf: 0,
            k: number,
        });
    }
    out.push(stmt(RET_K, RET_ALLOW));
    out.push(stmt(RET_K, ret_eperm()));
    out.push(stmt(RET_K, RET_USER_NOTIF));
    for arg in flag_args {
        out.push(stmt(LD_W_ABS, arg_offset(arg)));
        out.push(Instruction {
            code: JSET_K,
            jt: 1,
            jf: 0,
            k: WRITE_FLAGS,
        });
        out.push(stmt(RET_K, RET_ALLOW));
        out.push(stmt(RET_K, RET_USER_NOTIF));
    }
    out
}

/// What the child needs between fork and exec: its end of the socket pair and the filter.
#[derive(Debug, Clone)]
struct WatchChild {
    socket: RawFd,
    program: Arc<Vec<Instruction>>,
}

/// A watch set up for one spawn, until the child handed over its listener.
#[derive(Debug)]
pub struct PendingWatch {
    parent: OwnedFd,
    child: OwnedFd,
    program: Arc<Vec<Instruction>>,
    rules: Rules,
}

/// What the watch names.
#[derive(Debug, Clone, Default)]
struct Rules {
    /// The paths the spawn may write.
    allowed: Vec<Allowed>,
    /// Inside those, what it must not: the CLI's own configuration (the commands it runs,
    /// the instructions it reads) and the control files of each writable tree's git
    /// repository (`config`, `hooks/`, `info/`, `commondir`: what the user's next `git` on the
    /// host obeys). The sandbox binds them read-only.
    protected: Vec<PathBuf>,
    /// Names removed or replaced only, not what is under them: each git directory itself
    /// (renamed away, the user's next `git` finds another repository or none).
    protected_names: Vec<PathBuf>,
}

impl Rules {
    fn is_stray(&self, write: &Write) -> bool {
        let path = &write.path;
        if kernel_interface(path) {
            return false;
        }
        write.links > 1
            || self.protected.iter().any(|p| path.starts_with(p))
            || self.protected_names.iter().any(|p| path == p)
            || !self.allowed.iter().any(|a| a.covers(path))
    }
}

/// A path the spawn may write.
#[derive(Debug, Clone)]
struct Allowed {
    /// Everything under it.
    root: PathBuf,
    /// A file of the CLI's state (`~/.claude.json`): also the names the CLI writes it through
    /// (`~/.claude.json.lock`, `~/.claude.json.tmp.<pid>.<n>` renamed over it).
    with_siblings: bool,
}

impl Allowed {
    fn covers(&self, path: &Path) -> bool {
        if path.starts_with(&self.root) {
            return true;
        }
        if !self.with_siblings || path.parent() != self.root.parent() {
            return false;
        }
        match (path.file_name(), self.root.file_name()) {
            (Some(name), Some(own)) => {
                let (name, own) = (name.as_encoded_bytes(), own.as_encoded_bytes());
                name.len() > own.len() && name.starts_with(own) && name[own.len()] == b'.'
            }
            _ => false,
        }
    }
}

impl PendingWatch {
    /// A socket pair for the listener, and the paths the spawn may write: `allowed` trees and
    /// the CLI's `state`, except the `protected` paths in them and the `protected_names`
    /// themselves (each also as its symlinks resolve, as the watch compares resolved paths).
    pub fn new(
        allowed: Vec<PathBuf>,
        state: Vec<PathBuf>,
        protected: Vec<PathBuf>,
        protected_names: Vec<PathBuf>,
    ) -> io::Result<Self> {
        // Close-on-exec both: the CLI never holds either end.
        let (parent, child) = std::os::unix::net::UnixDatagram::pair()?;
        let (parent, child) = (OwnedFd::from(parent), OwnedFd::from(child));
        let mut roots = Vec::new();
        let tagged = allowed
            .into_iter()
            .map(|p| (p, false))
            .chain(state.into_iter().map(|p| {
                let file = !p.is_dir();
                (p, file)
            }));
        for (path, with_siblings) in tagged {
            if let Ok(real) = fs::canonicalize(&path)
                && real != path
            {
                roots.push(Allowed {
                    root: real,
                    with_siblings,
                });
            }
            roots.push(Allowed {
                root: lexical(&path),
                with_siblings,
            });
        }
        let both = |paths: Vec<PathBuf>| -> Vec<PathBuf> {
            paths
                .iter()
                .flat_map(|p| {
                    let real = fs::canonicalize(p).ok().filter(|r| r != p);
                    [Some(lexical(p)), real]
                })
                .flatten()
                .collect()
        };
        let protected = both(protected);
        let protected_names = both(protected_names);
        Ok(PendingWatch {
            parent,
            child,
            program: Arc::new(instructions()),
            rules: Rules {
                allowed: roots,
                protected,
                protected_names,
            },
        })
    }

    /// What goes into the spawn request: the child's part, run last before exec.
    pub fn hook(&self) -> Arc<dyn PreExecHook> {
        Arc::new(WatchChild {
            socket: self.child.as_raw_fd(),
            program: Arc::clone(&self.program),
        })
    }

    /// After the spawn returned (the child ran its pre-exec steps, and exec'd or failed): the
    /// listener it sent, and the thread that serves it; `Err` says why there is no watch.
    pub fn start(self) -> Result<Watch, String> {
        drop(self.child);
        let listener = receive_listener(&self.parent)?;
        sync_wake_up(&listener);
        let stop = Arc::new(AtomicBool::new(false));
        let rules = self.rules;
        let stopping = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("corral-write-watch".into())
            .spawn(move || serve(&listener, &rules, &stopping))
            .map_err(|e| format!("the watch thread did not start: {e}"))?;
        Ok(Watch {
            stop,
            thread: Some(thread),
        })
    }
}

/// Asks the kernel to switch straight to the watch thread when a call stops, and back when it
/// is answered (`SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP`, Linux 6.6): each stopped call costs a
/// direct switch instead of two wake-ups through the scheduler. Older kernels refuse the flag;
/// the watch works the same, only slower.
#[allow(unsafe_code)]
fn sync_wake_up(listener: &OwnedFd) {
    const SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP: libc::c_ulong = 1;
    // SAFETY: the ioctl takes the flags by value.
    let rc = unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_SET_FLAGS,
            SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP,
        )
    };
    if rc < 0 {
        tracing::debug!(error = %io::Error::last_os_error(), "the write watch runs without synchronous wake-ups");
    }
}

/// The listener the child sent, or the `errno` it sent instead (safe system calls through
/// rustix: the listener arrives as an `OwnedFd`, close-on-exec).
fn receive_listener(socket: &OwnedFd) -> Result<OwnedFd, String> {
    use rustix::net::{RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, recvmsg};
    let mut payload = [0u8; 4];
    let mut space = [std::mem::MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let got = recvmsg(
        socket,
        &mut [io::IoSliceMut::new(&mut payload)],
        &mut control,
        RecvFlags::DONTWAIT | RecvFlags::CMSG_CLOEXEC,
    )
    .map_err(|e| format!("the child sent no listener ({})", io::Error::from(e)))?
    .bytes;
    if got == 0 {
        return Err("the child sent no listener".to_string());
    }
    for message in control.drain() {
        if let RecvAncillaryMessage::ScmRights(mut fds) = message
            && let Some(listener) = fds.next()
        {
            return Ok(listener);
        }
    }
    let errno = i32::from_ne_bytes(payload);
    Err(format!(
        "the filter could not be installed: {}",
        io::Error::from_raw_os_error(errno)
    ))
}

// SAFETY: `in_child` only calls `install_in_child`, whose contract is the hook's: async-signal-safe
// calls, no allocation.
#[allow(unsafe_code)]
unsafe impl PreExecHook for WatchChild {
    fn in_child(&self) -> io::Result<()> {
        // SAFETY: called by the spawn between fork and exec, as `install_in_child` requires.
        unsafe { install_in_child(self) };
        Ok(())
    }
}

/// In the child, between fork and exec: `no_new_privs`, the filter with a new listener, the
/// listener (or the `errno` of what failed) sent to the supervisor, both descriptors closed.
/// Never fails the spawn: a run without the watch says so in its record.
///
/// # Safety
/// Only between fork and exec: it calls prctl, seccomp, sendmsg and close, which are
/// async-signal-safe, and allocates nothing (the program was built before the fork).
#[allow(unsafe_code)]
unsafe fn install_in_child(watch: &WatchChild) {
    // SAFETY: see the function's contract; every buffer lives on this stack frame or in the
    // program allocated before the fork.
    unsafe {
        let prog = libc::sock_fprog {
            len: u16::try_from(watch.program.len()).unwrap_or(u16::MAX),
            filter: watch.program.as_ptr().cast_mut().cast(),
        };
        let mut errno: i32 = 0;
        let listener = if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            errno = *libc::__errno_location();
            -1
        } else {
            let fd = libc::syscall(
                libc::SYS_seccomp,
                libc::SECCOMP_SET_MODE_FILTER,
                libc::SECCOMP_FILTER_FLAG_NEW_LISTENER,
                &prog as *const libc::sock_fprog,
            );
            if fd < 0 {
                errno = *libc::__errno_location();
            }
            fd as libc::c_int
        };
        let mut payload = errno.to_ne_bytes();
        let mut iov = libc::iovec {
            iov_base: payload.as_mut_ptr().cast(),
            iov_len: payload.len(),
        };
        // Room for one descriptor, aligned as a cmsghdr must be.
        let mut control = [0u64; 4];
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        if listener >= 0 {
            let space = libc::CMSG_SPACE(std::mem::size_of::<RawFd>() as u32) as usize;
            msg.msg_control = control.as_mut_ptr().cast();
            msg.msg_controllen = space as _;
            let header = libc::CMSG_FIRSTHDR(&msg);
            (*header).cmsg_level = libc::SOL_SOCKET;
            (*header).cmsg_type = libc::SCM_RIGHTS;
            (*header).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<RawFd>() as u32) as _;
            std::ptr::write_unaligned(libc::CMSG_DATA(header).cast::<RawFd>(), listener);
        }
        libc::sendmsg(watch.socket, &msg, libc::MSG_NOSIGNAL);
        if listener >= 0 {
            libc::close(listener);
        }
        libc::close(watch.socket);
    }
}

/// A running watch; [`Watch::finish`] ends it and says what it saw.
#[derive(Debug)]
pub struct Watch {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Seen>>,
}

/// What a watch saw.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Seen {
    /// The calls it stopped.
    pub calls: u64,
    /// The writes outside the allowed paths, as `corral run` lists stray writes
    /// (`added /home/me/x`), sorted; at most `MAX_NOTED`.
    pub strays: Vec<String>,
    /// Strays beyond `MAX_NOTED`, counted only.
    pub more: u64,
    /// Why the watch stopped early, if it did (the listener failed).
    pub error: Option<String>,
}

impl Watch {
    /// Stops the thread (every watched process is gone by now, or is a leftover whose calls
    /// fail from here on) and returns what it saw.
    pub fn finish(mut self) -> Seen {
        self.stop.store(true, Ordering::Release);
        self.thread
            .take()
            .map_or_else(Seen::default, |t| match t.join() {
                Ok(seen) => seen,
                Err(_) => Seen {
                    error: Some("the watch thread panicked".to_string()),
                    ..Seen::default()
                },
            })
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
    }
}

/// The watch thread: answers every stopped call until the last watched process is gone or it
/// is asked to stop.
fn serve(listener: &OwnedFd, rules: &Rules, stop: &AtomicBool) -> Seen {
    let calls = watched_calls();
    let mut noted: BTreeSet<Write> = BTreeSet::new();
    let mut seen = Seen::default();
    loop {
        match wait_readable(listener) {
            Ok(Readiness::Ready) => {}
            Ok(Readiness::Idle) => {
                if stop.load(Ordering::Acquire) {
                    break;
                }
                continue;
            }
            Ok(Readiness::Gone) => break,
            Err(e) => {
                seen.error = Some(format!("the listener failed: {e}"));
                break;
            }
        }
        let notif = match receive(listener) {
            Ok(Some(n)) => n,
            // Raced: the call was interrupted before it could be received.
            Ok(None) => continue,
            Err(e) => {
                seen.error = Some(format!("the listener failed: {e}"));
                break;
            }
        };
        seen.calls += 1;
        let found = calls
            .iter()
            .find(|(n, _)| i64::from(notif.data.nr) == *n)
            .map(|(_, op)| resolve(&notif, *op));
        // Only a call still waiting is noted and answered: a process that died meanwhile may
        // have had its pid reused, and what was read may be another's.
        if !id_valid(listener, notif.id) {
            continue;
        }
        for write in found.unwrap_or_default() {
            if rules.is_stray(&write) {
                if noted.len() < MAX_NOTED {
                    noted.insert(write);
                } else if !noted.contains(&write) {
                    seen.more += 1;
                }
            }
        }
        // The call may have been interrupted meanwhile (ENOENT): it restarts, and stops again.
        let _ = respond_continue(listener, notif.id);
    }
    seen.strays = noted.iter().map(Write::to_string).collect();
    seen
}

enum Readiness {
    Ready,
    Idle,
    Gone,
}

fn wait_readable(listener: &OwnedFd) -> io::Result<Readiness> {
    let mut pfd = libc::pollfd {
        fd: listener.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    #[allow(unsafe_code)]
    // SAFETY: one pollfd, owned above.
    let n = unsafe { libc::poll(&mut pfd, 1, POLL_MS) };
    if n < 0 {
        let e = io::Error::last_os_error();
        return if e.kind() == io::ErrorKind::Interrupted {
            Ok(Readiness::Idle)
        } else {
            Err(e)
        };
    }
    if n == 0 {
        return Ok(Readiness::Idle);
    }
    if pfd.revents & libc::POLLIN != 0 {
        Ok(Readiness::Ready)
    } else {
        // POLLHUP: no process holds the filter any more.
        Ok(Readiness::Gone)
    }
}

#[allow(unsafe_code)]
fn receive(listener: &OwnedFd) -> io::Result<Option<libc::seccomp_notif>> {
    // SAFETY: a zeroed seccomp_notif is valid (the kernel wants it zeroed); the ioctl fills it.
    let mut notif: libc::seccomp_notif = unsafe { std::mem::zeroed() };
    // SAFETY: the ioctl writes one seccomp_notif into the struct above.
    let rc = unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_RECV,
            &mut notif,
        )
    };
    if rc < 0 {
        let e = io::Error::last_os_error();
        return match e.raw_os_error() {
            Some(libc::ENOENT | libc::EINTR) => Ok(None),
            _ => Err(e),
        };
    }
    Ok(Some(notif))
}

#[allow(unsafe_code)]
fn id_valid(listener: &OwnedFd, id: u64) -> bool {
    // SAFETY: the ioctl reads one u64.
    unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_ID_VALID,
            &id,
        ) == 0
    }
}

#[allow(unsafe_code)]
fn respond_continue(listener: &OwnedFd, id: u64) -> io::Result<()> {
    let mut resp = libc::seccomp_notif_resp {
        id,
        val: 0,
        error: 0,
        flags: libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE as u32,
    };
    // SAFETY: the ioctl reads the response above.
    let rc = unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_SEND,
            &mut resp,
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// One write a stopped call makes.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Write {
    path: PathBuf,
    kind: ChangeKind,
    /// An existing file opened for writing that has other names too (`st_nlink > 1`): a write
    /// through this one lands in each of them, wherever they are.
    links: u64,
}

impl Write {
    fn new(path: PathBuf, kind: ChangeKind) -> Self {
        Write {
            path,
            kind,
            links: 1,
        }
    }
}

impl std::fmt::Display for Write {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.kind, self.path.display())?;
        if self.links > 1 {
            write!(
                f,
                " (a file of {} names, written through this one: the others may lie anywhere)",
                self.links
            )?;
        }
        Ok(())
    }
}

/// The paths a stopped call writes, resolved, with how (only what the process may do).
fn resolve(notif: &libc::seccomp_notif, op: Op) -> Vec<Write> {
    let task = Task {
        pid: notif.pid,
        args: notif.data.args,
    };
    let unknown = |e: &io::Error| {
        vec![(
            PathBuf::from(format!(
                "<a path in pid {}'s memory, unreadable: {e}>",
                task.pid
            )),
            ChangeKind::Modified,
        )]
        .into_iter()
        .map(|(p, k)| Write::new(p, k))
        .collect::<Vec<_>>()
    };
    match op {
        Op::Open { at, flags } => {
            let flags = flags.map_or(libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC, |i| {
                task.args[i] as i32
            });
            open_write(&task, at, i64::from(flags)).unwrap_or_else(|e| unknown(&e))
        }
        Op::Open2 { at } => match task.read_u64(task.args[2]) {
            Ok(flags) if flags & u64::from(WRITE_FLAGS) != 0 => {
                open_write(&task, at, flags as i64).unwrap_or_else(|e| unknown(&e))
            }
            Ok(_) => Vec::new(),
            Err(e) => unknown(&e),
        },
        Op::Create { at } => match task.path(at, false) {
            Ok(Some(path)) if parent_writable(&path) && fs::symlink_metadata(&path).is_err() => {
                vec![Write::new(path, ChangeKind::Added)]
            }
            Ok(_) => Vec::new(),
            Err(e) => unknown(&e),
        },
        Op::Remove { at } => match task.path(at, false) {
            Ok(Some(path)) if parent_writable(&path) && fs::symlink_metadata(&path).is_ok() => {
                vec![Write::new(path, ChangeKind::Deleted)]
            }
            Ok(_) => Vec::new(),
            Err(e) => unknown(&e),
        },
        Op::Rename { from, to } => match (task.path(from, false), task.path(to, false)) {
            (Ok(Some(from)), Ok(Some(to)))
                if parent_writable(&from)
                    && parent_writable(&to)
                    && fs::symlink_metadata(&from).is_ok() =>
            {
                let kind = if fs::symlink_metadata(&to).is_ok() {
                    ChangeKind::Modified
                } else {
                    ChangeKind::Added
                };
                vec![Write::new(from, ChangeKind::Deleted), Write::new(to, kind)]
            }
            (Ok(_), Ok(_)) => Vec::new(),
            (Err(e), _) | (_, Err(e)) => unknown(&e),
        },
        Op::Change { at, follows, flags } => {
            let nofollow =
                flags.is_some_and(|i| task.args[i] as i32 & libc::AT_SYMLINK_NOFOLLOW != 0);
            match task.path(at, follows && !nofollow) {
                Ok(Some(path)) if on_disk(&path) && fs::symlink_metadata(&path).is_ok() => {
                    vec![Write::new(path, ChangeKind::Modified)]
                }
                Ok(_) => Vec::new(),
                Err(e) => unknown(&e),
            }
        }
    }
}

/// An `open` with `flags`: the file it writes, unless the process may not write it.
fn open_write(task: &Task, at: At, flags: i64) -> io::Result<Vec<Write>> {
    let flags = flags as i32;
    if flags & (libc::O_WRONLY | libc::O_RDWR | libc::O_CREAT | libc::O_TRUNC) == 0 {
        return Ok(Vec::new());
    }
    let follows = flags & libc::O_NOFOLLOW == 0;
    let Some(path) = task.path(at, follows)? else {
        return Ok(Vec::new());
    };
    // `O_TMPFILE` names a directory and makes a file with no name there.
    let tmpfile = flags & libc::O_TMPFILE == libc::O_TMPFILE;
    use std::os::unix::fs::MetadataExt;
    Ok(match fs::metadata(&path) {
        Ok(meta) if meta.is_dir() && !tmpfile => Vec::new(),
        Ok(_) if !on_disk(&path) || !writable(&path, tmpfile) => Vec::new(),
        Ok(meta) => vec![Write {
            links: if meta.is_file() { meta.nlink() } else { 1 },
            ..Write::new(path, ChangeKind::Modified)
        }],
        Err(_) if flags & libc::O_CREAT != 0 && parent_writable(&path) => {
            vec![Write::new(path, ChangeKind::Added)]
        }
        Err(_) => Vec::new(),
    })
}

/// `/proc` and `/sys` are the kernel's interfaces, not files on disk.
fn kernel_interface(path: &Path) -> bool {
    path.starts_with("/proc") || path.starts_with("/sys")
}

/// A device, a pipe or a socket is not a file on disk: writing one changes nothing there.
fn on_disk(path: &Path) -> bool {
    fs::metadata(path).map_or(true, |m| {
        let t = m.file_type();
        !(t.is_char_device() || t.is_block_device() || t.is_fifo() || t.is_socket())
    })
}

fn writable(path: &Path, directory: bool) -> bool {
    let mode = if directory {
        nix::unistd::AccessFlags::W_OK | nix::unistd::AccessFlags::X_OK
    } else {
        nix::unistd::AccessFlags::W_OK
    };
    nix::unistd::access(path, mode).is_ok()
}

fn parent_writable(path: &Path) -> bool {
    path.parent().is_some_and(|p| writable(p, true))
}

/// The stopped process: its pid and the call's arguments.
struct Task {
    pid: u32,
    args: [u64; 6],
}

impl Task {
    /// The path at `at`, absolute and resolved as the process sees it; `Ok(None)` when the
    /// call names no path of a file (a descriptor of a pipe or a socket).
    fn path(&self, at: At, follow_last: bool) -> io::Result<Option<PathBuf>> {
        let raw = if self.args[at.path] == 0 {
            PathBuf::new()
        } else {
            self.read_path(self.args[at.path])?
        };
        let base = || -> io::Result<Option<PathBuf>> {
            match at.dirfd.map(|i| self.args[i] as i32) {
                None | Some(libc::AT_FDCWD) => {
                    fs::read_link(format!("/proc/{}/cwd", self.pid)).map(Some)
                }
                Some(fd) => self.fd_target(fd),
            }
        };
        let joined = if raw.is_absolute() {
            raw
        } else {
            let Some(base) = base()? else {
                return Ok(None);
            };
            if raw.as_os_str().is_empty() {
                base
            } else {
                base.join(raw)
            }
        };
        let proc_self = self.proc_self(&joined);
        Ok(self.real(&proc_self, follow_last))
    }

    /// `/proc/self` and `/proc/thread-self` as the process sees them.
    fn proc_self(&self, path: &Path) -> PathBuf {
        let mut parts = path.components();
        let (
            Some(Component::RootDir),
            Some(Component::Normal(first)),
            Some(Component::Normal(second)),
        ) = (parts.next(), parts.next(), parts.next())
        else {
            return path.to_path_buf();
        };
        if first != "proc" {
            return path.to_path_buf();
        }
        let own = if second == "self" {
            PathBuf::from(format!("/proc/{}", self.pid))
        } else if second == "thread-self" {
            PathBuf::from(format!("/proc/{0}/task/{0}", self.pid))
        } else {
            return path.to_path_buf();
        };
        own.join(parts.as_path())
    }

    /// A descriptor's file, `None` for a pipe, a socket or an anonymous inode.
    fn fd_target(&self, fd: i32) -> io::Result<Option<PathBuf>> {
        let target = fs::read_link(format!("/proc/{}/fd/{fd}", self.pid))?;
        Ok(target.is_absolute().then_some(target))
    }

    /// The path with its symlinks resolved (the last one only when `follow_last`); a path that
    /// does not resolve (its directory is missing) is kept as written, lexically normalised.
    fn real(&self, path: &Path, follow_last: bool) -> Option<PathBuf> {
        // `/proc/<pid>/fd/<n>` opens what the descriptor is, whatever its name says.
        if is_proc_fd(path) {
            return fs::read_link(path).ok().filter(|t| t.is_absolute());
        }
        if follow_last {
            if let Ok(real) = fs::canonicalize(path) {
                return Some(real);
            }
            // A dangling symlink: the call creates what it points to.
            if let Some(target) = dangling_target(path) {
                return self.real(&target, false);
            }
        }
        let lexical = lexical(path);
        let (Some(parent), Some(name)) = (lexical.parent(), lexical.file_name()) else {
            return Some(lexical);
        };
        Some(
            fs::canonicalize(parent)
                .map(|p| p.join(name))
                .unwrap_or(lexical.clone()),
        )
    }

    fn read_path(&self, address: u64) -> io::Result<PathBuf> {
        use std::os::unix::ffi::OsStringExt;
        let mut out = Vec::new();
        let mut at = address;
        let page = 4096u64;
        while out.len() < libc::PATH_MAX as usize {
            let chunk = (page - at % page) as usize;
            let mut buf = vec![0u8; chunk];
            self.read(at, &mut buf)?;
            if let Some(end) = memchr::memchr(0, &buf) {
                out.extend_from_slice(&buf[..end]);
                return Ok(PathBuf::from(std::ffi::OsString::from_vec(out)));
            }
            out.extend_from_slice(&buf);
            at += chunk as u64;
        }
        Err(io::Error::from_raw_os_error(libc::ENAMETOOLONG))
    }

    fn read_u64(&self, address: u64) -> io::Result<u64> {
        let mut buf = [0u8; 8];
        self.read(address, &mut buf)?;
        Ok(u64::from_ne_bytes(buf))
    }

    #[allow(unsafe_code)]
    fn read(&self, address: u64, buf: &mut [u8]) -> io::Result<()> {
        let local = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        let remote = libc::iovec {
            iov_base: address as *mut libc::c_void,
            iov_len: buf.len(),
        };
        // SAFETY: reads another process's memory into `buf`, whose length the iovec gives.
        let n =
            unsafe { libc::process_vm_readv(self.pid as libc::pid_t, &local, 1, &remote, 1, 0) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        if (n as usize) < buf.len() {
            return Err(io::Error::from_raw_os_error(libc::EFAULT));
        }
        Ok(())
    }
}

/// Where a chain of symlinks ending at a missing file points (at most 40 links, as the kernel
/// follows), or `None` when `path` is no symlink.
fn dangling_target(path: &Path) -> Option<PathBuf> {
    let mut at = path.to_path_buf();
    let mut followed = false;
    for _ in 0..40 {
        let meta = fs::symlink_metadata(&at).ok()?;
        if !meta.file_type().is_symlink() {
            return followed.then_some(at);
        }
        let target = fs::read_link(&at).ok()?;
        at = match at.parent() {
            Some(dir) if target.is_relative() => dir.join(target),
            _ => target,
        };
        followed = true;
        if fs::symlink_metadata(&at).is_err() {
            return Some(at);
        }
    }
    None
}

/// Whether `path` is `/proc/<pid>/fd/<n>`.
fn is_proc_fd(path: &Path) -> bool {
    let mut parts = path.components();
    match (
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
    ) {
        (
            Some(Component::RootDir),
            Some(Component::Normal(p)),
            Some(Component::Normal(pid)),
            Some(Component::Normal(fd_dir)),
            Some(Component::Normal(n)),
            None,
        ) if p == "proc"
            && fd_dir == "fd"
            && pid
                .to_str()
                .is_some_and(|s| s.bytes().all(|b| b.is_ascii_digit())) =>
        {
            n.to_str().is_some_and(|s| s.parse::<i32>().is_ok())
        }
        _ => false,
    }
}

/// `.` and `..` taken out without touching the disk.
fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            Component::RootDir | Component::Prefix(_) | Component::Normal(_) => out.push(part),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_listed_call_jumps_to_its_own_return() {
        let prog = instructions();
        let header = if cfg!(target_arch = "x86_64") { 6 } else { 4 };
        let allow = prog
            .iter()
            .position(|i| i.code == RET_K && i.k == RET_ALLOW)
            .unwrap();
        let watched = watched_calls();
        for (at, i) in prog.iter().enumerate().take(allow).skip(header) {
            assert_eq!(i.code, JEQ_K);
            let target = &prog[at + 1 + usize::from(i.jt)];
            let op = watched
                .iter()
                .find(|(n, _)| nr(*n) == i.k)
                .map(|(_, op)| *op);
            match op {
                None => {
                    assert!(REFUSED.iter().any(|&n| nr(n) == i.k));
                    assert_eq!(target.k, ret_eperm());
                }
                Some(Op::Open {
                    flags: Some(arg), ..
                }) => {
                    assert_eq!((target.code, target.k), (LD_W_ABS, arg_offset(arg)));
                }
                Some(_) => assert_eq!((target.code, target.k), (RET_K, RET_USER_NOTIF)),
            }
        }
    }

    #[test]
    fn lexical_takes_out_dots() {
        assert_eq!(lexical(Path::new("/a/./b/../c")), PathBuf::from("/a/c"));
        assert_eq!(lexical(Path::new("/../x")), PathBuf::from("/x"));
    }

    #[test]
    fn a_descriptor_path_is_recognised() {
        assert!(is_proc_fd(Path::new("/proc/12/fd/3")));
        assert!(!is_proc_fd(Path::new("/proc/12/fdinfo/3")));
        assert!(!is_proc_fd(Path::new("/proc/12/fd/3/x")));
    }

    /// Runs `script` under `sh` with a watch allowing `allowed`, and returns what it saw.
    async fn watched(
        script: &str,
        cwd: &Path,
        allowed: Vec<PathBuf>,
        state: Vec<PathBuf>,
    ) -> (Seen, i32) {
        use corral_process::spawn::{ProviderSpawn, SpawnRequest, StdinMode, TokioSpawner};
        let pending = PendingWatch::new(
            allowed,
            state,
            vec![cwd.join(".git/config")],
            vec![cwd.join(".git")],
        )
        .unwrap();
        let request = SpawnRequest {
            program: "/bin/sh".into(),
            args: vec!["-c".into(), script.into()],
            env: vec![("PATH".into(), "/usr/bin:/bin".into())],
            cwd: cwd.to_path_buf(),
            stdin: StdinMode::Null,
            parent_death_signal: true,
            inherit_fds: Vec::new(),
            output: corral_process::spawn::ChildOutputs::Pipes,
            pre_exec: vec![pending.hook()],
        };
        let mut child = TokioSpawner.spawn(&request).unwrap();
        let watch = pending.start().unwrap();
        let status = child.wait().await.unwrap();
        (watch.finish(), status.code.unwrap_or(-1))
    }

    #[tokio::test]
    async fn writes_outside_the_allowed_paths_are_seen_wherever_they_go() {
        let root = tempfile::tempdir().unwrap();
        let root = fs::canonicalize(root.path()).unwrap();
        let tree = root.join("tree");
        let outside = root.join("outside");
        fs::create_dir_all(&tree).unwrap();
        fs::create_dir_all(&outside).unwrap();
        fs::write(outside.join("old"), "x").unwrap();
        fs::write(outside.join("gone"), "x").unwrap();
        fs::write(outside.join("moved"), "x").unwrap();
        fs::write(outside.join("mode"), "x").unwrap();
        fs::write(outside.join("read"), "x").unwrap();
        fs::write(outside.join("linked"), "x").unwrap();
        std::os::unix::fs::symlink(outside.join("old"), tree.join("link")).unwrap();
        let script = "set -e
            echo in > inside.txt; mkdir sub; rm inside.txt
            echo out > ../outside/new
            echo more >> link
            cat ../outside/read > /dev/null
            rm ../outside/gone
            mv ../outside/moved ../outside/renamed
            mkdir ../outside/dir
            chmod 600 ../outside/mode
            ln -s /etc/passwd ../outside/sym
            ln -s ../outside/dangling dangle && echo x > dangle
            exec 3< ../outside/read; echo via-fd > /proc/self/fd/3 || true
            echo x > /dev/null
            echo denied > /proc/version 2>/dev/null || true
            ln ../outside/linked hard && echo x >> hard
            mkdir .git && echo '[core]' > .git/config && echo x > .git/index
            mv .git .git-away
            ";
        let state = vec![root.join("state.json")];
        let (seen, code) = watched(script, &tree, vec![tree.clone()], state).await;
        assert_eq!(code, 0, "{seen:?}");
        let o = |name: &str| outside.join(name).display().to_string();
        let expected = [
            format!("added {}", o("dir")),
            format!("added {}", o("dangling")),
            format!("added {}", o("new")),
            format!("added {}", o("renamed")),
            format!("added {}", o("sym")),
            format!("deleted {}", o("gone")),
            format!("deleted {}", o("moved")),
            format!("modified {}", o("mode")),
            format!("modified {}", o("old")),
            format!("modified {}", o("read")),
            format!(
                "modified {} (a file of 2 names, written through this one: the others may lie anywhere)",
                tree.join("hard").display()
            ),
            format!("added {}", tree.join(".git").display()),
            format!("added {}", tree.join(".git/config").display()),
            format!("deleted {}", tree.join(".git").display()),
        ];
        let mut got = seen.strays.clone();
        got.sort();
        let mut want: Vec<String> = expected.to_vec();
        want.sort();
        assert_eq!(got, want, "{seen:?}");
        assert!(seen.calls >= 12, "{seen:?}");
        assert_eq!(seen.error, None);
    }

    #[tokio::test]
    async fn a_tree_that_only_reads_and_writes_inside_is_clean() {
        let root = tempfile::tempdir().unwrap();
        let root = fs::canonicalize(root.path()).unwrap();
        let tree = root.join("t");
        fs::create_dir(&tree).unwrap();
        // The CLI's state file, written the way CLIs write it: a lock and a renamed copy.
        let (seen, code) = watched(
            "cat /etc/hostname >/dev/null; echo a > a; mkdir -p b/c; mv a b/c/a; ls / >/dev/null
             : > ../state.json.lock; echo s > ../state.json.tmp.1; mv ../state.json.tmp.1 ../state.json
             rm ../state.json.lock",
            &tree,
            vec![tree.clone()],
            vec![root.join("state.json")],
        )
        .await;
        assert_eq!(code, 0);
        assert_eq!(seen.strays, Vec::<String>::new(), "{seen:?}");
        assert!(seen.calls >= 7, "{seen:?}");
    }
}
