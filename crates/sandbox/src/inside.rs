//! The sandbox checked from inside, at the start of every sandboxed attempt.
//!
//! bubblewrap's options say what the sandbox should be; only a process inside it can say what it
//! is. So the first program of the bubblewrap invocation is not the CLI but a probe the engine
//! writes: a POSIX shell script (`/bin/sh`, read-only inside, and no agent has run yet) that reads
//! its own capability sets, `NoNewPrivs` and `Seccomp` from `/proc/self/status`, its namespace
//! inodes, tries a write outside every writable path (and, when the working directory must be
//! read-only, one there), looks for an entry of a hidden home, reports on a pipe, and then waits
//! for the supervisor's word before it executes the CLI in its place (same process, same argv).
//! The supervisor compares the namespaces with its own, checks on the host where the writes
//! went, and confirms each guarantee or not (`confirm`). A guarantee not confirmed is moved to
//! the attestation's not-enforced list, and the run refuses before the CLI ever ran, unless the
//! user consented to run degraded (`allow_degraded_native`). A program that only pretends to be
//! bubblewrap (it drops the options and runs the command) therefore runs the probe on the host,
//! where the namespaces are the supervisor's and the write lands: nothing is attested.
//!
//! Why a shell and two small programs (`cat`, `readlink`) rather than a helper binary: the
//! engine is a library and cannot count on a binary of its own being installed; a shell is
//! everywhere bubblewrap is. A shell cannot open a socket, so the network is judged by the
//! namespace: the sandbox's network namespace must not be the supervisor's and, with the
//! allow-list, must be the one the proxy listens in (a fresh namespace's only way anywhere is
//! its own loopback).

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::{self, Write};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use corral_ports::{Guarantee, InsideCheck, NamespaceSeen, Unenforced, WriteProbe};
use tokio::io::AsyncReadExt;

/// The probe's shell.
const SHELL: &str = "/bin/sh";

/// The probe. `$1` and `$2` are the report and go pipes (as `/proc/self/fd/N`: a POSIX shell
/// redirects only descriptors 0 to 9), then `write=PATH` and `see=PATH` targets, `mounts` (the
/// mount table, in a container), `--`, and the CLI's argv. `true` (not `:`) tries the write: a failed redirection ends the shell when the
/// command is a special built-in. Nothing is printed on the CLI's own streams.
const SCRIPT: &str = r#"report=$1 go=$2
shift 2
{
  cat /proc/self/status
  readlink /proc/self/ns/user /proc/self/ns/mnt /proc/self/ns/pid /proc/self/ns/ipc /proc/self/ns/net
  while [ "$#" -gt 0 ] && [ "$1" != -- ]; do
    case $1 in
      write=*) if { true > "${1#write=}"; } 2>/dev/null; then echo "write: done"; else echo "write: refused"; fi ;;
      see=*) if [ -e "${1#see=}" ] || [ -L "${1#see=}" ]; then echo "see: visible"; else echo "see: hidden"; fi ;;
      mounts) while IFS= read -r line; do echo "mount: $line"; done < /proc/self/mountinfo ;;
    esac
    shift
  done
  echo end
} > "$report" 2>/dev/null || exit 125
shift
IFS= read -r answer < "$go" || exit 125
[ "$answer" = go ] || exit 125
exec "$@"
"#;

/// The `/proc/self/status` lines the probe's report is read for.
const STATUS_KEYS: [&str; 7] = [
    "CapInh",
    "CapPrm",
    "CapEff",
    "CapBnd",
    "CapAmb",
    "NoNewPrivs",
    "Seccomp",
];

/// The capability sets that must be empty.
const CAP_SETS: [&str; 5] = ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"];

/// The namespaces compared with the supervisor's.
const NAMESPACES: [&str; 5] = ["user", "mnt", "pid", "ipc", "net"];

/// Where a write outside every writable path is tried: the first of these that is a directory
/// and lies outside them (a fresh directory is made in it, and removed after).
const OUTSIDE_CANDIDATES: [&str; 3] = ["/tmp", "/var/tmp", "/dev/shm"];

/// How long the probe may take to report (bubblewrap's start included, on a loaded machine).
pub const REPORT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long the probe may take to report in a container: podman's own start (its storage, the
/// overlay of `/`, runc) comes first, seconds on a loaded machine, more through
/// `fuse-overlayfs` as a user.
pub const CONTAINER_REPORT_TIMEOUT: Duration = Duration::from_secs(60);

/// The file systems a container's root may be for `writes-confined`: an overlay of the host's
/// root, so that a write outside the bound paths lands in the container's own upper layer
/// (the kernel's overlay as root, `fuse-overlayfs` as a user).
const CONTAINER_ROOTS: [&str; 2] = ["overlay", "fuse.fuse-overlayfs"];

/// The descriptors a container's probe finds its pipes at: the report's, then the go pipe's
/// at the next.
pub(crate) const CONTAINER_PROBE_FDS: usize = 2;

/// The longest report read.
const REPORT_LIMIT: usize = 64 * 1024;

/// What a sandboxed attempt's probe needs to know to place its targets.
#[derive(Debug)]
pub struct Targets<'a> {
    /// Every path the CLI may write (work tree when writable, run directory, extra roots, the
    /// CLI's state).
    pub writable: Vec<&'a Path>,
    /// The working directory, when it must be read-only.
    pub read_only_cwd: Option<&'a Path>,
    /// The home directory, when it must be hidden.
    pub hidden_home: Option<&'a Path>,
}

/// One attempt's probe, from before the spawn to the supervisor's word.
#[derive(Debug)]
pub struct InsideProbe {
    report_read: Option<OwnedFd>,
    report_write: Option<OwnedFd>,
    go_read: Option<OwnedFd>,
    go_write: Option<OwnedFd>,
    report: Option<tokio::net::unix::pipe::Receiver>,
    buf: Vec<u8>,
    /// The fresh directory outside, and the file the probe tries to create in it.
    outside: Option<(PathBuf, PathBuf)>,
    work_tree: Option<PathBuf>,
    home_entry: Option<PathBuf>,
    started: Instant,
    /// The locks that keep other runs from removing a placeholder this sandbox binds, until
    /// it reported (see `sandbox::BindingLocks`).
    binding: Option<crate::policy::BindingLocks>,
    /// In a container: the descriptor the report pipe is given in as (the go pipe's is the
    /// next); the probe also reports the mount table, and is judged as a container's.
    container_fd: Option<RawFd>,
}

fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(io::Error::from)
}

fn unique_name(prefix: &str) -> String {
    format!("{prefix}-{}-{:016x}", std::process::id(), fastrand::u64(..))
}

impl InsideProbe {
    /// The pipes, and the targets: a fresh directory outside the writable paths, a file name in
    /// a read-only working directory, an entry of a hidden home.
    pub fn prepare(targets: &Targets<'_>) -> io::Result<Self> {
        let (report_read, report_write) = pipe()?;
        let (go_read, go_write) = pipe()?;
        let real = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
        let writable: Vec<PathBuf> = targets.writable.iter().map(|p| real(p)).collect();
        let outside = OUTSIDE_CANDIDATES
            .iter()
            .map(Path::new)
            .filter(|c| c.is_dir())
            .map(|c| real(c).join(unique_name("corral-probe")))
            .find(|dir| !writable.iter().any(|w| dir.starts_with(w)))
            .and_then(|dir| {
                use std::os::unix::fs::DirBuilderExt;
                std::fs::DirBuilder::new()
                    .mode(0o700)
                    .create(&dir)
                    .ok()
                    .map(|()| (dir.clone(), dir.join("written")))
            });
        let work_tree = targets
            .read_only_cwd
            .map(|cwd| cwd.join(format!(".{}", unique_name("corral-probe"))));
        // An entry of the home that holds a path bound inside (the work tree, the CLI's state)
        // is visible by design.
        let bound: Vec<&Path> = targets
            .writable
            .iter()
            .copied()
            .chain(targets.read_only_cwd)
            .collect();
        let home_entry = targets
            .hidden_home
            .and_then(|home| home_entry(home, &bound));
        Ok(InsideProbe {
            report_read: Some(report_read),
            report_write: Some(report_write),
            go_read: Some(go_read),
            go_write: Some(go_write),
            report: None,
            buf: Vec::new(),
            outside,
            work_tree,
            home_entry,
            started: Instant::now(),
            binding: None,
            container_fd: None,
        })
    }

    /// As [`InsideProbe::prepare`], for a container whose first program finds the report pipe
    /// at descriptor `first_fd` and the go pipe at the next ([`InsideProbe::container_fds`]).
    pub fn prepare_in_container(targets: &Targets<'_>, first_fd: RawFd) -> io::Result<Self> {
        let mut probe = Self::prepare(targets)?;
        probe.container_fd = Some(first_fd);
        Ok(probe)
    }

    /// In a container: the descriptors to give in, in order (the report pipe's write end, the
    /// go pipe's read end), each with whether it is written.
    pub fn container_fds(&self) -> Vec<(RawFd, bool)> {
        [(&self.report_write, true), (&self.go_read, false)]
            .into_iter()
            .filter_map(|(fd, write)| fd.as_ref().map(|fd| (fd.as_raw_fd(), write)))
            .collect()
    }

    /// How long the report may take, from the spawn (or from the way out opened).
    pub fn timeout(&self) -> Duration {
        match self.container_fd {
            Some(_) => CONTAINER_REPORT_TIMEOUT,
            None => REPORT_TIMEOUT,
        }
    }

    /// The descriptors bubblewrap (and so the probe) must inherit.
    pub fn child_fds(&self) -> Vec<RawFd> {
        [&self.report_write, &self.go_read]
            .into_iter()
            .flatten()
            .map(AsRawFd::as_raw_fd)
            .collect()
    }

    /// The probe's argv, to go after bubblewrap's `--` and before the CLI's.
    pub fn argv(&self) -> Vec<OsString> {
        // In a container the pipes are given in at fixed descriptors, not at ours.
        let fd_path = |fd: &Option<OwnedFd>, nth: RawFd| {
            let number = match self.container_fd {
                Some(first) => first + nth,
                None => fd.as_ref().map_or(-1, AsRawFd::as_raw_fd),
            };
            OsString::from(format!("/proc/self/fd/{number}"))
        };
        let mut argv: Vec<OsString> = vec![
            SHELL.into(),
            "-c".into(),
            SCRIPT.into(),
            "corral-probe".into(),
            fd_path(&self.report_write, 0),
            fd_path(&self.go_read, 1),
        ];
        let target = |kind: &str, path: &Path| {
            let mut arg = OsString::from(kind);
            arg.push(path.as_os_str());
            arg
        };
        if let Some((_, file)) = &self.outside {
            argv.push(target("write=", file));
        }
        if let Some(file) = &self.work_tree {
            argv.push(target("write=", file));
        }
        if let Some(entry) = &self.home_entry {
            argv.push(target("see=", entry));
        }
        if self.container_fd.is_some() {
            argv.push("mounts".into());
        }
        argv.push("--".into());
        argv
    }

    /// After the spawn: the child holds its own copies of its ends now; ours would keep the
    /// report pipe from ever ending.
    /// Keeps `locks` until [`InsideProbe::bound`] (or until the probe is dropped, the
    /// sandbox never started).
    pub fn hold_until_report(&mut self, locks: crate::policy::BindingLocks) {
        self.binding = Some(locks);
    }

    /// The sandbox reported, or ended: whatever it was to bind, it has bound by now.
    pub fn bound(&mut self) {
        self.binding = None;
    }

    pub fn spawned(&mut self) {
        self.report_write = None;
        self.go_read = None;
    }

    /// Reads the report until its `end` line, the end of the pipe (the sandbox ended before the
    /// probe reported) or the size limit. Cancel-safe: what was read is kept for the next call.
    pub async fn read_report(&mut self) -> Result<String, String> {
        if self.report.is_none() {
            let fd = self
                .report_read
                .take()
                .ok_or_else(|| "the report pipe is gone".to_string())?;
            self.report = Some(
                tokio::net::unix::pipe::Receiver::from_owned_fd(fd).map_err(|e| e.to_string())?,
            );
        }
        let Some(pipe) = self.report.as_mut() else {
            return Err("the report pipe is gone".to_string());
        };
        let mut chunk = [0u8; 4096];
        while !ends_report(&self.buf) {
            let n = pipe.read(&mut chunk).await.map_err(|e| e.to_string())?;
            if n == 0 {
                return Err("the sandbox ended before the probe reported".to_string());
            }
            self.buf.extend_from_slice(&chunk[..n]);
            if self.buf.len() > REPORT_LIMIT {
                return Err("the probe's report is too long".to_string());
            }
        }
        Ok(String::from_utf8_lossy(&self.buf).into_owned())
    }

    /// What the report and the host say: the check, and each of `requested` that it did not
    /// confirm. The write targets are looked at on the host and removed.
    pub fn judge(
        &self,
        report: Result<String, String>,
        requested: &[Guarantee],
        proxy_netns: Option<u64>,
    ) -> (InsideCheck, Vec<Unenforced>) {
        let elapsed_us = u64::try_from(self.started.elapsed().as_micros()).unwrap_or(u64::MAX);
        let landed = |path: &Path| {
            let there = std::fs::symlink_metadata(path).is_ok();
            if there {
                let _ = std::fs::remove_file(path);
            }
            there
        };
        let mut check = InsideCheck {
            elapsed_us,
            ..InsideCheck::default()
        };
        let mut net_inode = None;
        let mut root_fs = None;
        match report {
            Ok(text) => {
                let parsed = parse(&text);
                root_fs = parsed.root_fs.clone();
                check.status = parsed.status;
                let host = host_namespaces();
                for (name, inode) in &parsed.namespaces {
                    let seen = if host.get(name.as_str()) == Some(inode) {
                        NamespaceSeen::Supervisors
                    } else {
                        NamespaceSeen::Own
                    };
                    check.namespaces.insert(name.clone(), seen);
                }
                net_inode = parsed.namespaces.get("net").copied();
                let mut writes = parsed.writes.into_iter();
                if let Some((_, file)) = &self.outside {
                    let tried = writes.next().is_some();
                    check.write_outside = tried.then(|| WriteProbe {
                        path: file.display().to_string(),
                        landed: landed(file),
                    });
                }
                if let Some(file) = &self.work_tree {
                    let tried = writes.next().is_some();
                    check.write_work_tree = tried.then(|| WriteProbe {
                        path: file.display().to_string(),
                        landed: landed(file),
                    });
                }
                if let (Some(entry), Some(visible)) = (&self.home_entry, parsed.seen.first()) {
                    check.home_entry_visible = Some((entry.display().to_string(), *visible));
                }
            }
            Err(e) => check.error = Some(e),
        }
        // Whatever the probe said, nothing it was asked to create stays on the host.
        for file in self.outside.iter().map(|(_, f)| f).chain(&self.work_tree) {
            let _ = std::fs::remove_file(file);
        }
        let proxy_matches = proxy_netns.zip(net_inode).map(|(p, n)| p == n);
        let seen = Seen {
            check: &check,
            proxy_matches,
            home_probed: self.home_entry.is_some(),
            container_root: self.container_fd.map(|_| root_fs.as_deref()),
        };
        let unconfirmed = requested
            .iter()
            .filter_map(|&g| {
                confirm(g, &seen).err().map(|why| Unenforced {
                    guarantee: g,
                    why: format!("not confirmed from inside the sandbox: {why}"),
                })
            })
            .collect();
        (check, unconfirmed)
    }

    /// Lets the probe execute the CLI.
    pub fn release(mut self) -> io::Result<()> {
        match self.go_write.take() {
            Some(fd) => std::fs::File::from(fd).write_all(b"go\n"),
            None => Ok(()),
        }
    }
}

impl Drop for InsideProbe {
    fn drop(&mut self) {
        if let Some((dir, file)) = &self.outside {
            let _ = std::fs::remove_file(file);
            let _ = std::fs::remove_dir(dir);
        }
        if let Some(file) = &self.work_tree {
            let _ = std::fs::remove_file(file);
        }
    }
}

/// Whether `buf` holds the report's last line.
fn ends_report(buf: &[u8]) -> bool {
    buf.ends_with(b"\nend\n") || buf == b"end\n"
}

/// The first entry of `home` (by name) that holds none of the `bound` paths: visible inside
/// only if the home is not hidden.
fn home_entry(home: &Path, bound: &[&Path]) -> Option<PathBuf> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(home)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .filter(|p| !bound.iter().any(|b| b.starts_with(p)))
        .collect();
    entries.sort();
    entries.into_iter().next()
}

/// The supervisor's own namespaces, by name.
fn host_namespaces() -> BTreeMap<&'static str, u64> {
    NAMESPACES
        .iter()
        .filter_map(|&name| {
            std::fs::metadata(format!("/proc/self/ns/{name}"))
                .ok()
                .map(|m| (name, m.ino()))
        })
        .collect()
}

/// The probe's report, read.
#[derive(Debug, Default, PartialEq, Eq)]
struct Parsed {
    status: BTreeMap<String, String>,
    namespaces: BTreeMap<String, u64>,
    /// Each `write:` line in order: whether the probe's write succeeded (inside).
    writes: Vec<bool>,
    /// Each `see:` line in order: whether the entry was visible.
    seen: Vec<bool>,
    /// With the mount table: the file system type of what is mounted at `/` last (the one
    /// seen).
    root_fs: Option<String>,
}

fn parse(text: &str) -> Parsed {
    let mut parsed = Parsed::default();
    for line in text.lines() {
        if let Some(mount) = line.strip_prefix("mount: ") {
            if let Some(fs) = root_mount(mount) {
                parsed.root_fs = Some(fs.to_string());
            }
        } else if let Some(done) = line.strip_prefix("write: ") {
            parsed.writes.push(done == "done");
        } else if let Some(seen) = line.strip_prefix("see: ") {
            parsed.seen.push(seen == "visible");
        } else if let Some((name, rest)) = line.split_once(":[")
            && let Some(inode) = rest.strip_suffix(']').and_then(|n| n.parse().ok())
            && NAMESPACES.contains(&name)
        {
            parsed.namespaces.insert(name.to_string(), inode);
        } else if let Some((key, value)) = line.split_once(':')
            && STATUS_KEYS.contains(&key)
        {
            parsed
                .status
                .insert(key.to_string(), value.trim().to_string());
        }
    }
    parsed
}

/// The file system type of a `/proc/self/mountinfo` line mounted at `/` (`ID PARENT MAJ:MIN
/// ROOT MOUNTPOINT OPTIONS [OPTIONAL…] - FSTYPE SOURCE SUPER`; spaces in paths are escaped as
/// `\040`, so the fields split on whitespace).
fn root_mount(line: &str) -> Option<&str> {
    let (before, after) = line.split_once(" - ")?;
    (before.split_whitespace().nth(4)? == "/").then_some(())?;
    after.split_whitespace().next()
}

/// What the judge looks at besides the guarantee.
struct Seen<'a> {
    check: &'a InsideCheck,
    /// Whether the sandbox's network namespace is the one the allow-list proxy listens in
    /// (`None`: no proxy to compare with).
    proxy_matches: Option<bool>,
    /// Whether an entry of the home was looked for.
    home_probed: bool,
    /// In a container: the root's file system type, as the probe saw it (`Some(None)`: not
    /// seen).
    container_root: Option<Option<&'a str>>,
}

/// Whether `seen` confirms `guarantee`, or what it saw instead.
///
/// bubblewrap's `writes-confined` and `repo-read-only` rest on an unprivileged process in a
/// user namespace of its own: no capability, `no_new_privs`, its own user and mount
/// namespaces, and the probe's write outside not on the host. A rootful container shares the
/// supervisor's user namespace by design, and as uid 0 it may write whatever root owns on
/// every file system it sees: what confines its writes is its mount namespace, whose root is
/// an overlay of the host's (what lands outside the binds lands in the container's upper
/// layer). So in a container the user namespace is not asked for; the root must be an overlay
/// instead, besides no capability, `no_new_privs`, its own mount namespace and the probe's
/// write outside not on the host.
fn confirm(guarantee: Guarantee, seen: &Seen<'_>) -> Result<(), String> {
    let check = seen.check;
    let proxy_matches = seen.proxy_matches;
    let home_probed = seen.home_probed;
    if let Some(e) = &check.error {
        return Err(format!("the probe did not report ({e})"));
    }
    let mut missing: Vec<String> = Vec::new();
    let own = |name: &str, missing: &mut Vec<String>| match check.namespaces.get(name) {
        Some(NamespaceSeen::Own) => {}
        Some(NamespaceSeen::Supervisors) => {
            missing.push(format!("the {name} namespace is the supervisor's"));
        }
        None => missing.push(format!("the {name} namespace was not read")),
    };
    let unprivileged = |missing: &mut Vec<String>| {
        for set in CAP_SETS {
            match check.status.get(set) {
                Some(v) if !v.is_empty() && v.chars().all(|c| c == '0') => {}
                Some(v) => missing.push(format!("{set} {v}")),
                None => missing.push(format!("{set} was not read")),
            }
        }
        match check.status.get("NoNewPrivs").map(String::as_str) {
            Some("1") => {}
            Some(v) => missing.push(format!("NoNewPrivs {v}")),
            None => missing.push("NoNewPrivs was not read".to_string()),
        }
        match seen.container_root {
            None => own("user", missing),
            Some(Some(fs)) if CONTAINER_ROOTS.contains(&fs) => {}
            Some(Some(fs)) => missing.push(format!("the root is {fs}, not an overlay")),
            Some(None) => missing.push("the root's mount was not read".to_string()),
        }
        own("mnt", missing);
    };
    let write = |probe: Option<&WriteProbe>, what: &str, missing: &mut Vec<String>| match probe {
        Some(w) if !w.landed => {}
        Some(w) => missing.push(format!("a write to {} landed on the host", w.path)),
        None => missing.push(format!("no write {what} was tried")),
    };
    match guarantee {
        Guarantee::WritesConfined => {
            unprivileged(&mut missing);
            write(
                check.write_outside.as_ref(),
                "outside the writable paths",
                &mut missing,
            );
        }
        Guarantee::RepoReadOnly => {
            unprivileged(&mut missing);
            write(
                check.write_work_tree.as_ref(),
                "in the working directory",
                &mut missing,
            );
        }
        Guarantee::TreeContained => own("pid", &mut missing),
        Guarantee::NoNetwork => own("net", &mut missing),
        Guarantee::EgressConfined => {
            own("net", &mut missing);
            if proxy_matches == Some(false) {
                missing.push(
                    "the proxy listens in another network namespace than the sandbox's".into(),
                );
            }
        }
        Guarantee::HomeHidden => {
            own("mnt", &mut missing);
            match &check.home_entry_visible {
                Some((entry, true)) => missing.push(format!("{entry} is visible")),
                Some((_, false)) => {}
                None if home_probed => missing.push("the home was not looked at".to_string()),
                None => {}
            }
        }
    }
    if missing.is_empty() {
        Ok(())
    } else {
        Err(missing.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONFINED: &str = "Name:\tsh\nCapInh:\t0000000000000000\nCapPrm:\t0000000000000000\n\
        CapEff:\t0000000000000000\nCapBnd:\t0000000000000000\nCapAmb:\t0000000000000000\n\
        NoNewPrivs:\t1\nSeccomp:\t2\nSeccomp_filters:\t1\n\
        user:[1]\nmnt:[2]\npid:[3]\nipc:[4]\nnet:[5]\nwrite: refused\nsee: hidden\nend\n";

    #[test]
    fn the_report_is_read_for_its_status_namespaces_and_targets() {
        let parsed = parse(CONFINED);
        assert_eq!(parsed.status.len(), 7, "{parsed:?}");
        assert_eq!(parsed.status["Seccomp"], "2");
        assert_eq!(parsed.namespaces["net"], 5);
        assert_eq!(parsed.writes, [false]);
        assert_eq!(parsed.seen, [false]);
        assert!(ends_report(CONFINED.as_bytes()));
        assert!(!ends_report(b"CapEff:\t0\nen"));
    }

    fn bwrap(check: &InsideCheck, proxy_matches: Option<bool>, home_probed: bool) -> Seen<'_> {
        Seen {
            check,
            proxy_matches,
            home_probed,
            container_root: None,
        }
    }

    fn container<'a>(check: &'a InsideCheck, root: Option<&'a str>) -> Seen<'a> {
        Seen {
            check,
            proxy_matches: Some(true),
            home_probed: false,
            container_root: Some(root),
        }
    }

    /// A rootful podman container's mount table, as its probe reads it (runc, `--rootfs /:O`).
    const ROOTFUL_MOUNTS: &str = "mount: 121 95 0:42 / / rw,nodev,relatime - overlay overlay \
        rw,lowerdir=/,upperdir=/run/containers/storage/x/rootfs/upper,workdir=/run/w,uuid=on\n\
        mount: 122 121 0:45 / /proc rw,nosuid,nodev,noexec,relatime - proc proc rw\n\
        mount: 130 121 254:0 /work/tree /work/tree rw,relatime - ext4 /dev/vda rw\n";

    #[test]
    fn in_a_container_the_root_overlay_stands_for_the_user_namespace() {
        let parsed = parse(&format!("{ROOTFUL_MOUNTS}end\n"));
        assert_eq!(parsed.root_fs.as_deref(), Some("overlay"));
        assert_eq!(
            root_mount("1 0 0:1 / /x rw - ext4 /dev/vda rw"),
            None,
            "only what is mounted at /"
        );
        // Rootful: the user namespace is the supervisor's, every capability dropped.
        let mut check = confined_check();
        check
            .namespaces
            .insert("user".into(), NamespaceSeen::Supervisors);
        for g in [Guarantee::WritesConfined, Guarantee::TreeContained] {
            assert_eq!(
                confirm(g, &container(&check, Some("overlay"))),
                Ok(()),
                "{g}"
            );
        }
        assert_eq!(
            confirm(
                Guarantee::WritesConfined,
                &container(&check, Some("fuse.fuse-overlayfs"))
            ),
            Ok(())
        );
        // The same under bubblewrap is refused: there the user namespace is the criterion.
        assert!(confirm(Guarantee::WritesConfined, &bwrap(&check, None, false)).is_err());
        // A root that is not an overlay (or was not seen), a capability kept, or a write that
        // landed: not confirmed.
        let why = confirm(Guarantee::WritesConfined, &container(&check, Some("ext4"))).unwrap_err();
        assert!(why.contains("the root is ext4, not an overlay"), "{why}");
        assert!(confirm(Guarantee::WritesConfined, &container(&check, None)).is_err());
        let mut capable = check.clone();
        capable
            .status
            .insert("CapBnd".into(), "00000000a80425fb".into());
        assert!(
            confirm(
                Guarantee::WritesConfined,
                &container(&capable, Some("overlay"))
            )
            .is_err()
        );
        let mut landed = check.clone();
        landed.write_outside = Some(WriteProbe {
            path: "/tmp/x/written".into(),
            landed: true,
        });
        assert!(
            confirm(
                Guarantee::WritesConfined,
                &container(&landed, Some("overlay"))
            )
            .is_err()
        );
        // Run on the host (a fake podman): the mount namespace is the supervisor's.
        let mut host = check.clone();
        host.namespaces
            .insert("mnt".into(), NamespaceSeen::Supervisors);
        assert!(
            confirm(
                Guarantee::WritesConfined,
                &container(&host, Some("overlay"))
            )
            .is_err()
        );
    }

    fn confined_check() -> InsideCheck {
        let parsed = parse(CONFINED);
        InsideCheck {
            status: parsed.status,
            namespaces: NAMESPACES
                .iter()
                .map(|n| (n.to_string(), NamespaceSeen::Own))
                .collect(),
            write_outside: Some(WriteProbe {
                path: "/tmp/x/written".into(),
                landed: false,
            }),
            ..InsideCheck::default()
        }
    }

    #[test]
    fn a_confined_sandbox_confirms_every_guarantee_it_was_checked_for() {
        let check = confined_check();
        for g in [
            Guarantee::WritesConfined,
            Guarantee::TreeContained,
            Guarantee::NoNetwork,
            Guarantee::EgressConfined,
            Guarantee::HomeHidden,
        ] {
            assert_eq!(confirm(g, &bwrap(&check, Some(true), false)), Ok(()), "{g}");
        }
        // No write was tried in the work tree: read-only is not confirmed.
        assert!(confirm(Guarantee::RepoReadOnly, &bwrap(&check, None, false)).is_err());
    }

    #[test]
    fn what_did_not_hold_is_named_and_nothing_is_confirmed_without_a_report() {
        let mut check = confined_check();
        check
            .status
            .insert("CapEff".into(), "000001fffeffffff".into());
        check
            .namespaces
            .insert("mnt".into(), NamespaceSeen::Supervisors);
        check.write_outside = Some(WriteProbe {
            path: "/tmp/x/written".into(),
            landed: true,
        });
        let why = confirm(Guarantee::WritesConfined, &bwrap(&check, None, false)).unwrap_err();
        for part in [
            "CapEff 000001fffeffffff",
            "the mnt namespace is the supervisor's",
            "a write to /tmp/x/written landed on the host",
        ] {
            assert!(why.contains(part), "{part}: {why}");
        }
        check
            .namespaces
            .insert("net".into(), NamespaceSeen::Supervisors);
        assert!(confirm(Guarantee::EgressConfined, &bwrap(&check, None, false)).is_err());
        let moved = confined_check();
        assert!(
            confirm(
                Guarantee::EgressConfined,
                &bwrap(&moved, Some(false), false)
            )
            .is_err()
        );
        let silent = InsideCheck {
            error: Some("the sandbox ended before the probe reported".into()),
            ..InsideCheck::default()
        };
        assert!(confirm(Guarantee::TreeContained, &bwrap(&silent, None, false)).is_err());
        let unread = InsideCheck::default();
        assert!(confirm(Guarantee::TreeContained, &bwrap(&unread, None, false)).is_err());
    }
}
