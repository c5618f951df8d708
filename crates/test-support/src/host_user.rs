//! Who the tests run as, and an unprivileged user to run `corral` as when they run as root: the
//! sandbox must hold for both, and CI runs as root, so the user case needs a user of its own.

use std::path::Path;
use std::sync::OnceLock;

use nix::unistd::User;

/// The account the probe suite creates when it runs as root (a system user, no home, no shell).
pub const PROBE_USER: &str = "corral-probe";

/// Whether this process runs with effective uid 0.
pub fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// An unprivileged account: its name, uid and gid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostUser {
    /// The login name.
    pub name: String,
    /// Its uid (never 0).
    pub uid: u32,
    /// Its primary gid.
    pub gid: u32,
    /// Whether this process already runs as it (no `setpriv` needed to become it).
    pub is_self: bool,
}

/// The unprivileged user to run as: this process's own user when it is not root, else
/// [`PROBE_USER`], created with `useradd` the first time (once per process; a user another
/// process made in the meantime is taken as it is).
///
/// # Errors
/// When root cannot create or find the account; the message says which step failed.
pub fn unprivileged_user() -> Result<HostUser, String> {
    static USER: OnceLock<Result<HostUser, String>> = OnceLock::new();
    USER.get_or_init(find_or_create).clone()
}

fn find_or_create() -> Result<HostUser, String> {
    if !is_root() {
        let uid = nix::unistd::getuid();
        let name = User::from_uid(uid)
            .ok()
            .flatten()
            .map_or_else(|| uid.to_string(), |u| u.name);
        return Ok(HostUser {
            name,
            uid: uid.as_raw(),
            gid: nix::unistd::getgid().as_raw(),
            is_self: true,
        });
    }
    if lookup(PROBE_USER)?.is_none() {
        let out = std::process::Command::new("useradd")
            .args([
                "--system",
                "--no-create-home",
                "--shell",
                "/usr/sbin/nologin",
                PROBE_USER,
            ])
            .output()
            .map_err(|e| format!("useradd cannot be started: {e}"))?;
        // Exit code 9: the name is taken, by a parallel test process in the meantime.
        if !out.status.success() && out.status.code() != Some(9) {
            return Err(format!(
                "useradd {PROBE_USER} failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
    }
    let user =
        lookup(PROBE_USER)?.ok_or_else(|| format!("{PROBE_USER} does not exist after useradd"))?;
    if user.uid.is_root() {
        return Err(format!("{PROBE_USER} has uid 0"));
    }
    Ok(HostUser {
        name: user.name,
        uid: user.uid.as_raw(),
        gid: user.gid.as_raw(),
        is_self: false,
    })
}

fn lookup(name: &str) -> Result<Option<User>, String> {
    User::from_name(name).map_err(|e| format!("looking up {name}: {e}"))
}

impl HostUser {
    /// A command that runs `program` as this user: `program` itself when this process already
    /// is the user, else `setpriv --reuid --regid --clear-groups -- program` (no capability is
    /// kept: the uid change drops them all).
    pub fn command(&self, program: &Path) -> std::process::Command {
        if self.is_self {
            return std::process::Command::new(program);
        }
        let mut cmd = std::process::Command::new("setpriv");
        cmd.arg(format!("--reuid={}", self.uid))
            .arg(format!("--regid={}", self.gid))
            .args(["--clear-groups", "--"])
            .arg(program);
        cmd
    }

    /// Gives `root` and everything below it (not following symbolic links) to this user.
    ///
    /// # Errors
    /// The first path that could not be changed, with the reason.
    pub fn own_tree(&self, root: &Path) -> Result<(), String> {
        if self.is_self {
            return Ok(());
        }
        let mut stack = vec![root.to_path_buf()];
        while let Some(path) = stack.pop() {
            std::os::unix::fs::lchown(&path, Some(self.uid), Some(self.gid))
                .map_err(|e| format!("chown {}: {e}", path.display()))?;
            let meta =
                std::fs::symlink_metadata(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            if meta.is_dir() {
                let entries =
                    std::fs::read_dir(&path).map_err(|e| format!("{}: {e}", path.display()))?;
                stack.extend(entries.flatten().map(|e| e.path()));
            }
        }
        Ok(())
    }

    /// Why bubblewrap cannot make a sandbox as this user, or `None` when it can: runs `bwrap`
    /// with a user, pid, IPC and network namespace of its own and `--cap-drop ALL` (what Corral
    /// asks for), and on failure names bubblewrap's message and the kernel's settings for
    /// unprivileged user namespaces.
    pub fn bwrap_refusal(&self) -> Option<String> {
        let mut cmd = self.command(Path::new("bwrap"));
        cmd.args([
            "--unshare-user",
            "--unshare-pid",
            "--unshare-ipc",
            "--unshare-net",
            "--cap-drop",
            "ALL",
            "--ro-bind",
            "/",
            "/",
            "--proc",
            "/proc",
            "--dev",
            "/dev",
            "--",
            "true",
        ]);
        let why = match cmd.output() {
            Ok(out) if out.status.success() => return None,
            Ok(out) => format!(
                "bwrap as {} exited {}: {}",
                self.name,
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ),
            Err(e) => format!("bwrap cannot be started: {e}"),
        };
        let knobs: Vec<String> = [
            "/proc/sys/user/max_user_namespaces",
            "/proc/sys/kernel/unprivileged_userns_clone",
            "/proc/sys/kernel/apparmor_restrict_unprivileged_userns",
        ]
        .iter()
        .map(|knob| match std::fs::read_to_string(knob) {
            Ok(v) => format!("{knob} = {}", v.trim()),
            Err(_) => format!("{knob}: absent"),
        })
        .collect();
        Some(format!("{why}; {}", knobs.join(", ")))
    }
}
