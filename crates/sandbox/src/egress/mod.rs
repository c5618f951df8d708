//! Egress confined to an allow-list (`sandbox.network = "allowlist"`, the default): the CLI runs
//! in a network namespace of its own whose only way out is Corral's proxy, which connects only
//! to the allow-listed `host:port` pairs: the endpoints the provider's adapter declares (its
//! model API) and the rules the user's own settings add.
//!
//! How the way out is built, without any helper program inside the sandbox: bubblewrap is
//! started with `--unshare-net` (a private loopback, nothing else), `--json-status-fd` (it
//! reports the sandbox's pid and namespace inodes) and `--block-fd` (the CLI is not executed
//! until released). The supervisor then creates a listening socket on the sandbox's
//! `127.0.0.1:3128` (see `netns`), releases the block, and serves the socket as an HTTP proxy
//! from the host side. The CLI is pointed at it with `HTTP_PROXY`/`HTTPS_PROXY`/`ALL_PROXY`, and
//! a Node.js CLI whose `fetch` ignores those also gets a preloaded connector
//! ([`ProxyHonour::NodeFetchPreload`]). Refusals are logged as `egress_refused` records.
//!
//! What else the namespace gives: no host loopback service is reachable (the sandbox's
//! loopback is its own), and no abstract unix socket of the host (they belong to the network
//! namespace). Host unix socket *files* are a filesystem matter: [`hide_host_unix_sockets`]
//! gives the mounts that cover them.

mod netns;
mod proxy;
mod rules;

use std::ffi::OsString;
use std::io::{self, Write};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::AsyncReadExt;
use tokio::sync::mpsc::UnboundedSender;

pub use proxy::EgressNote;
pub use rules::{AllowList, AllowRule, BadRule, EgressNeeds, NetworkPolicy, ProxyHonour};

/// The proxy's port on the sandbox's own loopback (any port is free in a fresh namespace).
pub const PROXY_PORT: u16 = 3128;

/// How long bubblewrap may take to report its sandbox.
const STATUS_TIMEOUT: Duration = Duration::from_secs(10);

/// The variable the Node preload reads the proxy's `host:port` from.
pub const PROXY_ADDRESS_VAR: &str = "CORRAL_EGRESS_PROXY";

/// The Node preload's file name in the run's private temporary directory.
const NODE_PRELOAD_FILE: &str = "corral-node-egress.cjs";

/// Variables removed from a confined CLI's environment: a `NO_PROXY` naming loopback would make
/// a CLI skip the proxy for a model API the allow-list opens on the host's loopback.
pub const UNSET_VARS: &[&str] = &["NO_PROXY", "no_proxy"];

/// bubblewrap's namespace flags for a network policy.
pub fn namespace_args(policy: NetworkPolicy) -> &'static [&'static str] {
    match policy {
        NetworkPolicy::Host => &[],
        NetworkPolicy::Allowlist | NetworkPolicy::None => &["--unshare-net"],
    }
}

/// `127.0.0.1:3128`.
pub fn proxy_address() -> String {
    format!("127.0.0.1:{PROXY_PORT}")
}

/// The variables that send a confined CLI's traffic through the proxy. `preload` is the Node
/// preload file ([`write_node_preload`]) when the CLI needs one; `node_options` the value the
/// CLI would otherwise get.
pub fn proxy_env(
    honour: ProxyHonour,
    preload: Option<&Path>,
    node_options: Option<&str>,
) -> Vec<(String, String)> {
    let url = format!("http://{}", proxy_address());
    let mut vars: Vec<(String, String)> = [
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "http_proxy",
        "https_proxy",
        "all_proxy",
    ]
    .iter()
    .map(|name| (name.to_string(), url.clone()))
    .collect();
    vars.push((PROXY_ADDRESS_VAR.to_string(), proxy_address()));
    match (honour, preload) {
        (ProxyHonour::NodeFetchPreload, Some(file)) => {
            let require = format!("--require=\"{}\"", file.display());
            let value = match node_options.filter(|v| !v.trim().is_empty()) {
                Some(existing) => format!("{existing} {require}"),
                None => require,
            };
            vars.push(("NODE_OPTIONS".to_string(), value));
        }
        (ProxyHonour::NodeFetchPreload, None) | (ProxyHonour::Environment, _) => {}
    }
    vars
}

/// Points a confined CLI's environment at the proxy: `NO_PROXY` removed, the proxy variables
/// set (over any the CLI would get), and the Node preload written into `private_tmp` when the
/// CLI needs it.
pub fn confine_env(
    env: &mut Vec<(OsString, OsString)>,
    honour: ProxyHonour,
    private_tmp: &Path,
) -> io::Result<()> {
    let preload = match honour {
        ProxyHonour::NodeFetchPreload => Some(write_node_preload(private_tmp)?),
        ProxyHonour::Environment => None,
    };
    let node_options = env
        .iter()
        .find(|(k, _)| k == "NODE_OPTIONS")
        .map(|(_, v)| v.to_string_lossy().into_owned());
    let vars = proxy_env(honour, preload.as_deref(), node_options.as_deref());
    env.retain(|(k, _)| {
        !UNSET_VARS.iter().any(|u| k == u) && !vars.iter().any(|(name, _)| k == name.as_str())
    });
    env.extend(vars.into_iter().map(|(k, v)| (k.into(), v.into())));
    Ok(())
}

/// Writes the Node `fetch` preload into `dir` (the run's private temporary directory) and
/// returns its path.
pub fn write_node_preload(dir: &Path) -> io::Result<PathBuf> {
    let path = dir.join(NODE_PRELOAD_FILE);
    std::fs::write(&path, include_str!("node-fetch-proxy.cjs"))?;
    Ok(path)
}

/// bubblewrap arguments that cover every host unix socket file a sandboxed CLI could otherwise
/// connect to (ssh-agent, docker.sock, D-Bus, X11, a tmux server…), whatever the permissions of
/// the mounts above them: an empty `/run` (most live there, and so do new ones made later), and
/// `/dev/null` bound over each other socket the host's `/proc/net/unix` lists at the start.
/// Placed after every bind, so that a writable bind cannot uncover one again; `/run` is left
/// as it is when one of the `writable` paths lies under it (then only the listed sockets are
/// covered). Abstract sockets need nothing here: they belong to the network namespace, which
/// is the sandbox's own.
pub fn hide_host_unix_sockets(writable: &[&Path]) -> Vec<OsString> {
    let mut args: Vec<OsString> = Vec::new();
    let run = Path::new("/run");
    let run_hidden = run.is_dir()
        && !writable.iter().any(|p| {
            p.starts_with(run) || std::fs::canonicalize(p).is_ok_and(|p| p.starts_with(run))
        });
    if run_hidden {
        args.extend(["--tmpfs".into(), run.as_os_str().to_os_string()]);
    }
    let listed = std::fs::read_to_string("/proc/net/unix").unwrap_or_default();
    let mut seen: Vec<PathBuf> = Vec::new();
    for path in listed_socket_paths(&listed) {
        let path = PathBuf::from(path);
        let real = std::fs::canonicalize(&path).unwrap_or_else(|_| path.clone());
        if (run_hidden && real.starts_with(run)) || seen.contains(&real) || !is_socket(&real) {
            continue;
        }
        args.extend([
            "--ro-bind".into(),
            "/dev/null".into(),
            real.as_os_str().to_os_string(),
        ]);
        seen.push(real);
    }
    args
}

/// The pathname sockets of a `/proc/net/unix` listing (abstract ones start with `@`). The path
/// is the rest of the line after seven fields, so it may hold spaces.
fn listed_socket_paths(listing: &str) -> impl Iterator<Item = &str> {
    listing.lines().skip(1).filter_map(|line| {
        let mut rest = line.trim_start();
        for _ in 0..7 {
            let end = rest.find(char::is_whitespace)?;
            rest = rest[end..].trim_start();
        }
        rest.starts_with('/').then_some(rest)
    })
}

fn is_socket(path: &Path) -> bool {
    use std::os::unix::fs::FileTypeExt;
    std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_socket())
}

/// Why the way out could not be opened. Not retryable as is: the run refuses to start rather
/// than run with a network it did not confine; `sandbox.network = "host"` or `"none"` avoids it.
#[derive(Debug, thiserror::Error)]
pub enum EgressError {
    /// bubblewrap ended, or said nothing, before reporting its sandbox (its stderr says why).
    /// Not retryable.
    #[error("bubblewrap did not report its sandbox: {0}")]
    NoStatus(String),
    /// The proxy's socket could not be made inside the sandbox's network namespace. Not
    /// retryable.
    #[error("cannot open the egress proxy inside the sandbox's network namespace: {0}")]
    Namespace(String),
}

/// The pipes that let the supervisor hold a sandboxed CLI until its way out exists.
#[derive(Debug)]
pub struct EgressGate {
    status_read: OwnedFd,
    status_write: OwnedFd,
    block_read: OwnedFd,
    block_write: OwnedFd,
    /// Under the container backend: the container's name. Its process is found with `podman
    /// inspect` instead of bubblewrap's status, and the program waits on the block pipe, given
    /// into the container as its descriptor 3 (`container::starter`).
    container: Option<String>,
}

/// How long podman may take to start the container (its process waiting on the gate).
const CONTAINER_START_TIMEOUT: Duration = Duration::from_secs(20);

/// The shell line that holds a container's program until the gate says `go` on descriptor 3,
/// then runs it (`$0` is the program's name for the shell's messages, `$@` the program and its
/// arguments). Anything but `go` (the supervisor gone: end of file) ends it before the program
/// ran.
pub const CONTAINER_HOLD: &str =
    "IFS= read -r go <&3; exec 3<&-; [ \"$go\" = go ] || exit 125; exec \"$@\"";

fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(io::Error::from)
}

impl EgressGate {
    /// Two close-on-exec pipes: bubblewrap's status and its block.
    pub fn new() -> io::Result<Self> {
        let (status_read, status_write) = pipe()?;
        let (block_read, block_write) = pipe()?;
        Ok(EgressGate {
            status_read,
            status_write,
            block_read,
            block_write,
            container: None,
        })
    }

    /// The gate of the container `name`: its program is held on the block pipe (see
    /// `container::starter`, which puts it at descriptor 3 inside).
    pub fn for_container(name: &str) -> io::Result<Self> {
        Ok(EgressGate {
            container: Some(name.to_string()),
            ..EgressGate::new()?
        })
    }

    /// Under the container backend, the descriptor podman's starter inherits.
    pub fn container_fds(&self) -> Vec<RawFd> {
        vec![self.block_read.as_raw_fd()]
    }

    /// `--json-status-fd W --block-fd R`, to go before bubblewrap's `--`.
    pub fn bwrap_args(&self) -> Vec<OsString> {
        vec![
            "--json-status-fd".into(),
            self.status_write.as_raw_fd().to_string().into(),
            "--block-fd".into(),
            self.block_read.as_raw_fd().to_string().into(),
        ]
    }

    /// The descriptors bubblewrap must inherit.
    pub fn child_fds(&self) -> Vec<RawFd> {
        vec![self.status_write.as_raw_fd(), self.block_read.as_raw_fd()]
    }

    /// After bubblewrap was spawned with [`EgressGate::bwrap_args`]: waits for its report,
    /// opens the proxy inside its network namespace, serves it, and releases the CLI.
    pub async fn open(
        self,
        allow: AllowList,
        notes: UnboundedSender<EgressNote>,
    ) -> Result<EgressProxy, EgressError> {
        let started = Instant::now();
        let EgressGate {
            status_read,
            status_write,
            block_read,
            block_write,
            container,
        } = self;
        // bubblewrap (or podman) holds its own copies; ours would keep the pipes from ending.
        drop(status_write);
        drop(block_read);
        let (status, pid, net_inode) = match container {
            Some(name) => {
                drop(status_read);
                let pid = container_pid(name).await?;
                (None, pid, None)
            }
            None => {
                let mut status = tokio::net::unix::pipe::Receiver::from_owned_fd(status_read)
                    .map_err(|e| EgressError::NoStatus(e.to_string()))?;
                let report = tokio::time::timeout(STATUS_TIMEOUT, read_status_line(&mut status))
                    .await
                    .map_err(|_| {
                        EgressError::NoStatus(format!("nothing within {STATUS_TIMEOUT:?}"))
                    })??;
                (Some(status), report.0, report.1)
            }
        };
        let net_inode = match net_inode {
            Some(inode) => Some(inode),
            None => netns::namespace_inode(&format!("/proc/{pid}/ns/net")).ok(),
        };
        let reported = started.elapsed();
        let listener = tokio::task::spawn_blocking(move || {
            netns::listen_in_netns_of(pid, net_inode, PROXY_PORT)
        })
        .await
        .map_err(|e| EgressError::Namespace(e.to_string()))?
        .map_err(|e| EgressError::Namespace(e.to_string()))?;
        let listener = std::net::TcpListener::from(listener);
        listener
            .set_nonblocking(true)
            .map_err(|e| EgressError::Namespace(e.to_string()))?;
        let listener = tokio::net::TcpListener::from_std(listener)
            .map_err(|e| EgressError::Namespace(e.to_string()))?;
        let serving = tokio::spawn(proxy::serve(listener, Arc::new(allow), notes));
        // Release the CLI: one byte on bubblewrap's block pipe, a line for the container's
        // hold.
        let mut block = std::fs::File::from(block_write);
        block
            .write_all(b"go\n")
            .map_err(|e| EgressError::NoStatus(format!("cannot release the sandbox: {e}")))?;
        Ok(EgressProxy {
            serving,
            _status: status,
            sandbox_netns: net_inode,
            setup: started.elapsed(),
            reported,
        })
    }
}

/// The host pid of the container `name`'s first process, once it runs (held on the gate).
async fn container_pid(name: String) -> Result<u32, EgressError> {
    let started = Instant::now();
    loop {
        let asked = name.clone();
        let answer = tokio::task::spawn_blocking(move || {
            crate::podman::podman(&["inspect", "--format", "{{.State.Pid}}", &asked])
        })
        .await
        .map_err(|e| EgressError::NoStatus(e.to_string()))?;
        let pid = answer
            .as_ref()
            .ok()
            .and_then(|text| text.trim().parse::<u32>().ok())
            .filter(|&pid| pid > 0);
        if let Some(pid) = pid {
            return Ok(pid);
        }
        if started.elapsed() > CONTAINER_START_TIMEOUT {
            let said = answer.unwrap_or_else(|why| why);
            return Err(EgressError::NoStatus(format!(
                "the container {name} did not run within {CONTAINER_START_TIMEOUT:?} (podman inspect: {})",
                said.trim()
            )));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Reads bubblewrap's first status line: `{ "child-pid": N, "net-namespace": M, … }`.
async fn read_status_line(
    status: &mut tokio::net::unix::pipe::Receiver,
) -> Result<(u32, Option<u64>), EgressError> {
    let mut line = Vec::with_capacity(256);
    let mut byte = [0u8; 256];
    while !line.contains(&b'\n') {
        let n = status
            .read(&mut byte)
            .await
            .map_err(|e| EgressError::NoStatus(e.to_string()))?;
        if n == 0 {
            return Err(EgressError::NoStatus(
                "it exited before starting the sandbox".to_string(),
            ));
        }
        line.extend_from_slice(&byte[..n]);
        if line.len() > 4096 {
            return Err(EgressError::NoStatus(
                "its status line is too long".to_string(),
            ));
        }
    }
    let end = line.iter().position(|&b| b == b'\n').unwrap_or(line.len());
    let value: serde_json::Value = serde_json::from_slice(&line[..end])
        .map_err(|e| EgressError::NoStatus(format!("unreadable status ({e})")))?;
    let pid = value["child-pid"]
        .as_u64()
        .and_then(|p| u32::try_from(p).ok())
        .ok_or_else(|| EgressError::NoStatus(format!("no child-pid in {value}")))?;
    Ok((pid, value["net-namespace"].as_u64()))
}

/// The proxy of one attempt, served while this lives; dropping it ends every tunnel. Drop it
/// only after the sandbox was reaped: it also holds bubblewrap's status pipe open, so that
/// bubblewrap's last status write never meets a closed pipe.
#[derive(Debug)]
pub struct EgressProxy {
    serving: tokio::task::JoinHandle<()>,
    /// bubblewrap's status pipe (none for a container).
    _status: Option<tokio::net::unix::pipe::Receiver>,
    /// The sandbox's network namespace (its inode), for the record.
    pub sandbox_netns: Option<u64>,
    /// From spawn to the released CLI.
    pub setup: Duration,
    /// From spawn to bubblewrap's report of its sandbox (namespaces made, the CLI not yet run):
    /// the part of `setup` a sandbox takes with any network policy.
    pub reported: Duration,
}

impl Drop for EgressProxy {
    fn drop(&mut self) {
        self.serving.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn socket_paths_come_from_the_listing_without_abstract_or_unnamed_ones() {
        let listing = "Num       RefCount Protocol Flags    Type St Inode Path\n\
            0000: 00000002 00000000 00010000 0001 01 2001 /run/docker.sock\n\
            0000: 00000002 00000000 00010000 0001 01 2002 @/tmp/.X11-unix/X0\n\
            0000: 00000003 00000000 00000000 0001 03 2003\n\
            0000: 00000002 00000000 00010000 0001 01 2004 /home/u/.gnupg/S.gpg-agent\n\
            0000: 00000002 00000000 00010000 0001 01  905 /tmp/a dir/agent.sock\n";
        let paths: Vec<&str> = listed_socket_paths(listing).collect();
        assert_eq!(
            paths,
            [
                "/run/docker.sock",
                "/home/u/.gnupg/S.gpg-agent",
                "/tmp/a dir/agent.sock"
            ]
        );
    }

    #[test]
    fn the_proxy_variables_point_every_client_at_the_proxy() {
        let vars = proxy_env(ProxyHonour::Environment, None, None);
        for name in ["HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "https_proxy"] {
            assert!(
                vars.contains(&(name.to_string(), "http://127.0.0.1:3128".to_string())),
                "{vars:?}"
            );
        }
        assert!(!vars.iter().any(|(k, _)| k == "NODE_OPTIONS"));
        let preload = Path::new("/run dir/tmp/x.cjs");
        let vars = proxy_env(
            ProxyHonour::NodeFetchPreload,
            Some(preload),
            Some("--max-old-space-size=4096"),
        );
        assert!(
            vars.contains(&(
                "NODE_OPTIONS".to_string(),
                "--max-old-space-size=4096 --require=\"/run dir/tmp/x.cjs\"".to_string()
            )),
            "{vars:?}"
        );
    }
}
