//! A listening TCP socket inside the sandbox's network namespace, made for the supervisor.
//!
//! The supervisor cannot simply `setns` one of its threads into the sandbox's network namespace:
//! as a plain user it lacks `CAP_SYS_ADMIN` in its own user namespace, which joining a network
//! namespace needs, and a multithreaded process may not join a user namespace. So a helper is
//! forked (single-threaded, a copy of the supervisor, no program executed): it joins the
//! sandbox's user namespace (where it holds every capability, being its owner's child) and then
//! its network namespace, binds and listens there, hands the socket back over a socket pair
//! (`SCM_RIGHTS`) and exits. The socket keeps belonging to the sandbox's namespace; the
//! supervisor accepts on it from the host side and makes its own connections from the host's.
//!
//! Between `fork` and `_exit` the helper only makes system calls (no allocation, no lock), as a
//! forked copy of a multithreaded process must.

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::MetadataExt;
use std::time::Duration;

/// How long the helper may take before it is killed.
const HELPER_DEADLINE: Duration = Duration::from_secs(5);

/// The steps the helper reports a failure of, by number.
const STEPS: [&str; 7] = [
    "?",
    "join the sandbox's user namespace (setns)",
    "join the sandbox's network namespace (setns)",
    "create the socket",
    "bind the socket",
    "listen",
    "hand the socket back",
];

/// The inode of a namespace file.
pub fn namespace_inode(path: &str) -> io::Result<u64> {
    Ok(std::fs::metadata(path)?.ino())
}

fn other(what: String) -> io::Error {
    io::Error::other(what)
}

/// A listening socket on `0.0.0.0:port` inside the network namespace of `pid`, which must not
/// be this process's and, when `expected_net` is given, must be that namespace (its inode, as
/// bubblewrap reported it). The wildcard address is bound because the sandbox's loopback may
/// not be up yet; once it is, `127.0.0.1:port` reaches the socket, and nothing else can, since
/// the namespace has no other interface.
pub fn listen_in_netns_of(pid: u32, expected_net: Option<u64>, port: u16) -> io::Result<OwnedFd> {
    let net = File::open(format!("/proc/{pid}/ns/net"))?;
    let net_inode = net.metadata()?.ino();
    if net_inode == namespace_inode("/proc/self/ns/net")? {
        return Err(other(format!(
            "process {pid} shares the supervisor's network namespace"
        )));
    }
    if let Some(expected) = expected_net
        && expected != net_inode
    {
        return Err(other(format!(
            "process {pid} is in network namespace {net_inode}, not the sandbox's ({expected})"
        )));
    }
    let user = File::from(owning_user_namespace(&net)?);
    let join_user = user.metadata()?.ino() != namespace_inode("/proc/self/ns/user")?;
    spawn_helper(join_user.then(|| user.as_raw_fd()), net.as_raw_fd(), port)
}

/// The user namespace that owns the network namespace `net` (`NS_GET_USERNS`), whose
/// capabilities joining `net` needs. Not `/proc/<pid>/ns/user`: bubblewrap moves its child
/// into a second, nested user namespace after the network namespace was made with the first
/// (when it maps root to another uid, and for every caller with `--disable-userns`, which it
/// enforces from a nested namespace), and a helper that joined the nested one holds no
/// capability over the network namespace (`setns` failed with `EPERM`, depending on when it
/// looked).
#[allow(unsafe_code)]
fn owning_user_namespace(net: &File) -> io::Result<OwnedFd> {
    // `_IO(0xb7, 0x1)` in linux/nsfs.h.
    const NS_GET_USERNS: libc::Ioctl = 0xb701;
    // SAFETY: an ioctl without argument on a descriptor this function borrows; it returns a new
    // descriptor (close-on-exec) or -1.
    let fd = unsafe { libc::ioctl(net.as_raw_fd(), NS_GET_USERNS) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by the kernel and is owned by nothing else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A datagram socket pair, close-on-exec.
fn socket_pair() -> io::Result<(OwnedFd, OwnedFd)> {
    let (parent, child) = std::os::unix::net::UnixDatagram::pair()?;
    Ok((OwnedFd::from(parent), OwnedFd::from(child)))
}

/// Room for one control message carrying one descriptor, aligned for `cmsghdr`.
#[repr(C, align(8))]
struct ControlBuffer([u8; 64]);

/// What the helper sends: a status byte (0 = ok, else the failed step) and an errno.
type Report = [u8; 5];

#[allow(unsafe_code)]
fn spawn_helper(user: Option<RawFd>, net: RawFd, port: u16) -> io::Result<OwnedFd> {
    let (parent_end, child_end) = socket_pair()?;
    // Everything the helper touches is prepared before the fork.
    // SAFETY: all-zero is a valid sockaddr_in.
    let mut addr: libc::sockaddr_in = unsafe { std::mem::zeroed() };
    addr.sin_family = libc::AF_INET as libc::sa_family_t;
    addr.sin_port = port.to_be();
    addr.sin_addr = libc::in_addr {
        s_addr: u32::from(std::net::Ipv4Addr::UNSPECIFIED).to_be(),
    };
    let out = child_end.as_raw_fd();

    // SAFETY: the child runs only `helper`, which makes system calls on descriptors and memory
    // prepared above and ends in `_exit`; it never returns into Rust code of the parent.
    let child = unsafe { corral_process::fork_helper(|| helper(user, net, out, &addr))? };
    drop(child_end);
    let result = receive(parent_end.as_fd());
    if result.is_err() {
        child.kill();
    }
    // Dropping the helper reaps it.
    drop(child);
    result
}

/// The forked helper: join the namespaces, listen, send the socket, exit.
///
/// # Safety
/// Only for the child of `fork`: it calls nothing but system calls and `_exit`.
#[allow(unsafe_code)]
unsafe fn helper(user: Option<RawFd>, net: RawFd, out: RawFd, addr: &libc::sockaddr_in) -> ! {
    // SAFETY (the whole body): plain system calls on valid descriptors and on stack memory
    // of this function; errno is read through the libc accessor, which does not allocate.
    unsafe {
        let fail = |step: u8| -> ! {
            let errno = *libc::__errno_location();
            let mut report: Report = [step, 0, 0, 0, 0];
            report[1..].copy_from_slice(&errno.to_ne_bytes());
            libc::send(out, report.as_ptr().cast(), report.len(), 0);
            libc::_exit(1)
        };
        if let Some(user) = user
            && libc::setns(user, libc::CLONE_NEWUSER) != 0
        {
            fail(1);
        }
        if libc::setns(net, libc::CLONE_NEWNET) != 0 {
            fail(2);
        }
        let sock = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        if sock < 0 {
            fail(3);
        }
        let one: libc::c_int = 1;
        libc::setsockopt(
            sock,
            libc::SOL_SOCKET,
            libc::SO_REUSEADDR,
            (&raw const one).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        );
        if libc::bind(
            sock,
            (addr as *const libc::sockaddr_in).cast(),
            size_of::<libc::sockaddr_in>() as libc::socklen_t,
        ) != 0
        {
            fail(4);
        }
        if libc::listen(sock, 256) != 0 {
            fail(5);
        }
        let mut report: Report = [0; 5];
        let mut iov = libc::iovec {
            iov_base: report.as_mut_ptr().cast(),
            iov_len: report.len(),
        };
        let mut control = ControlBuffer([0; 64]);
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &raw mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.0.as_mut_ptr().cast();
        msg.msg_controllen = libc::CMSG_SPACE(size_of::<libc::c_int>() as u32) as _;
        let cmsg = libc::CMSG_FIRSTHDR(&raw const msg);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(size_of::<libc::c_int>() as u32) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<libc::c_int>(), sock);
        if libc::sendmsg(out, &raw const msg, 0) < 0 {
            fail(6);
        }
        libc::_exit(0)
    }
}

/// Waits (bounded) for the helper's report and takes the socket out of it (safe system calls
/// through rustix: the descriptor arrives as an `OwnedFd`).
fn receive(fd: BorrowedFd<'_>) -> io::Result<OwnedFd> {
    use rustix::event::{PollFd, PollFlags, Timespec, poll};
    use rustix::net::{RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, recvmsg};
    let deadline = Timespec::try_from(HELPER_DEADLINE).map_err(|e| other(e.to_string()))?;
    let ready = poll(&mut [PollFd::new(&fd, PollFlags::IN)], Some(&deadline))?;
    if ready == 0 {
        return Err(other(format!(
            "the namespace helper did not answer within {HELPER_DEADLINE:?}"
        )));
    }
    let mut report: Report = [0; 5];
    let mut space = [std::mem::MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let got = recvmsg(
        fd,
        &mut [io::IoSliceMut::new(&mut report)],
        &mut control,
        RecvFlags::CMSG_CLOEXEC,
    )?
    .bytes;
    for message in control.drain() {
        if let RecvAncillaryMessage::ScmRights(mut fds) = message
            && let Some(socket) = fds.next()
        {
            return Ok(socket);
        }
    }
    if got == 0 {
        return Err(other(
            "the namespace helper exited without an answer".to_string(),
        ));
    }
    let step = STEPS.get(usize::from(report[0])).copied().unwrap_or("?");
    let errno = i32::from_ne_bytes([report[1], report[2], report[3], report[4]]);
    Err(other(format!(
        "could not {step}: {}",
        io::Error::from_raw_os_error(errno)
    )))
}
