//! A helper process forked from this one to make a few system calls where this process cannot
//! (another process's namespaces) and report back over a descriptor, then exit. Unlike a spawn
//! it never execs: the child runs the caller's code, which the caller vouches is
//! async-signal-safe. The helper is always reaped, whether its report came or not.

use std::io;

/// A forked helper, reaped (and first killed, when [`ForkedHelper::kill`] was asked) when it
/// is dropped.
#[derive(Debug)]
pub struct ForkedHelper {
    pid: libc::pid_t,
}

/// Forks a helper that runs `in_child` and never returns into the caller's code: a helper that
/// returns is ended with `_exit(127)`.
///
/// # Safety
///
/// `in_child` runs in the forked child of a possibly multi-threaded process: it may make only
/// async-signal-safe calls on memory and descriptors prepared before the fork, must not
/// allocate, lock or panic.
#[allow(unsafe_code)]
pub unsafe fn fork_helper(in_child: impl FnOnce()) -> io::Result<ForkedHelper> {
    // SAFETY: the child runs only `in_child`, whose contract is this function's; it never
    // returns into the parent's code.
    #[allow(clippy::disallowed_methods)] // the one fork helper of the product (clippy.toml)
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    if pid == 0 {
        in_child();
        // SAFETY: `_exit` is async-signal-safe; a helper that returns ends here all the same.
        unsafe { libc::_exit(127) }
    }
    Ok(ForkedHelper { pid })
}

impl ForkedHelper {
    /// Kills the helper (it is reaped when dropped): for a helper whose report did not come.
    pub fn kill(&self) {
        // The pid cannot have been reused: the helper is our child and not reaped yet.
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

impl Drop for ForkedHelper {
    fn drop(&mut self) {
        loop {
            match nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(self.pid), None) {
                Err(nix::errno::Errno::EINTR) => {}
                Ok(_) | Err(_) => return,
            }
        }
    }
}
