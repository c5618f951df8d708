//! A real Ray cluster on this machine for the `ray` executor's tests: a head node and a second
//! node joined to it, both on 127.0.0.1, started from the pinned `ray[default]` in
//! `<workspace>/.cache/venv` (`cargo xtask prerequisites ci` installs it).
//!
//! Each node is one `ray start --block` in a process group of its own, so dropping the
//! [`RayCluster`] ends exactly this cluster's processes (never `ray stop`, which would end every
//! Ray on the machine, including another test's cluster). Every port a node is told to use is
//! leased below the kernel's ephemeral range (free, and locked against other clusters), and every
//! process the nodes start inherits one environment entry naming this cluster
//! ([`CLUSTER_VAR`]`=<its temp dir>`), which is how [`RayCluster::leftovers`] finds anything that
//! outlived the drop. Not the command line: a sandboxed CLI anywhere on the machine names the
//! host's unix sockets, this cluster's among them, in bubblewrap's arguments, and killing what
//! merely mentions the temp dir killed other tests' sandboxes.
//!
//! Memory is kept small on purpose (the machine is shared): two CPUs on the head, one on the
//! second node, a 100 MB object store each.

use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

use crate::workspace_root;

/// How long a node may take to come up (the first start on a cold machine imports a lot of Python).
const START_TIMEOUT: Duration = Duration::from_secs(90);
/// How long the processes of a stopped cluster get to exit after SIGTERM before SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(10);
/// The object store of each node: small, Ray's floor is 75 MB.
const OBJECT_STORE_BYTES: u64 = 100 * 1024 * 1024;

/// The variable every process of one cluster inherits from its nodes, set to the cluster's
/// temp dir. Not `CORRAL_…` (a `corral` started by a job reads those as its settings) and not
/// `RAY_…` (Ray reads those as its own configuration).
pub const CLUSTER_VAR: &str = "TEST_SUPPORT_RAY_CLUSTER";

/// The virtual environment Ray is installed into, when it holds the `ray` command.
pub fn ray_venv() -> Option<PathBuf> {
    let venv = workspace_root().join(".cache/venv");
    venv.join("bin/ray").is_file().then_some(venv)
}

/// The venv for a test that needs Ray: `None` (after saying why on stderr) when it is absent
/// outside CI; in CI (`CI=true`) a missing Ray is a failure, so this panics.
///
/// # Panics
/// When `CI` is `true` and Ray is not installed.
pub fn require_ray() -> Option<PathBuf> {
    if let Some(venv) = ray_venv() {
        return Some(venv);
    }
    let in_ci = std::env::var("CI").is_ok_and(|value| value == "true");
    assert!(
        !in_ci,
        "Ray is not installed in .cache/venv: run `cargo xtask prerequisites ci` (CI=true, so a \
         missing Ray fails the test instead of skipping it)"
    );
    eprintln!(
        "skipped: Ray is not installed in .cache/venv (run `cargo xtask prerequisites ci` to \
         install the pinned ray[default])"
    );
    None
}

/// One `ray start --block` node process (the leader of its own process group).
#[derive(Debug)]
struct Node {
    child: Child,
    name: &'static str,
}

/// A running two-node Ray cluster; dropping it stops both nodes and everything they started.
#[derive(Debug)]
pub struct RayCluster {
    venv: PathBuf,
    temp_dir: tempfile::TempDir,
    dashboard_port: u16,
    gcs_port: u16,
    nodes: Vec<Node>,
    env: Vec<(String, String)>,
    /// Added to `env` for the second node only (its own `HOME`, say).
    second_env: Vec<(String, String)>,
    /// The locks that keep this cluster's ports from every other cluster on the machine.
    leases: Vec<std::fs::File>,
}

impl RayCluster {
    /// Starts the head node and a second node joined to it, and waits (bounded) until the
    /// Jobs API answers and both nodes are alive.
    ///
    /// # Errors
    /// When a node cannot be started, exits early, or the cluster is not up within the time
    /// allowed; the error carries the nodes' output.
    pub fn start(venv: &Path) -> io::Result<Self> {
        Self::start_with_env(venv, &[])
    }

    /// [`RayCluster::start`], the nodes (and so every job's entrypoint) with `env` added to
    /// this process's environment: what a worker node's image would provide (credentials,
    /// the fake model API's address, a git identity).
    ///
    /// # Errors
    /// As [`RayCluster::start`].
    pub fn start_with_env(venv: &Path, env: &[(String, String)]) -> io::Result<Self> {
        Self::start_with_node_env(venv, env, &[])
    }

    /// [`RayCluster::start_with_env`], the second node (and the jobs on it) with `second`
    /// added over `env`: two machines that differ (each its own `HOME`).
    ///
    /// # Errors
    /// As [`RayCluster::start`].
    pub fn start_with_node_env(
        venv: &Path,
        env: &[(String, String)],
        second: &[(String, String)],
    ) -> io::Result<Self> {
        // Short on purpose: Ray puts Unix sockets under it, whose paths may not exceed 107 bytes.
        let temp_dir = tempfile::Builder::new().prefix("ray").tempdir_in("/tmp")?;
        let mut leases = Vec::new();
        let mut cluster = Self {
            venv: venv.to_path_buf(),
            dashboard_port: lease_port(&mut leases)?,
            gcs_port: lease_port(&mut leases)?,
            temp_dir,
            nodes: Vec::new(),
            env: env.to_vec(),
            second_env: second.to_vec(),
            leases,
        };
        let client_port = lease_port(&mut cluster.leases)?;
        let head_args = vec![
            "--head".to_owned(),
            format!("--port={}", cluster.gcs_port),
            "--dashboard-host=127.0.0.1".to_owned(),
            format!("--dashboard-port={}", cluster.dashboard_port),
            format!("--ray-client-server-port={client_port}"),
            format!("--temp-dir={}", cluster.temp_dir.path().display()),
            "--num-cpus=2".to_owned(),
        ];
        cluster.spawn_node("head", head_args)?;
        cluster.wait_until(
            |cluster| cluster.jobs_api_answers(),
            "the Jobs API to answer",
        )?;
        let worker_args = vec![
            format!("--address=127.0.0.1:{}", cluster.gcs_port),
            "--num-cpus=1".to_owned(),
        ];
        cluster.spawn_node("second", worker_args)?;
        cluster.wait_until(
            |cluster| cluster.alive_nodes() >= 2,
            "the second node to join",
        )?;
        Ok(cluster)
    }

    /// The Jobs API's base URL, `http://127.0.0.1:<dashboard port>`.
    pub fn address(&self) -> String {
        format!("http://127.0.0.1:{}", self.dashboard_port)
    }

    /// The cluster's GCS address (`127.0.0.1:<port>`), what `ray start --address` joins.
    pub fn gcs_address(&self) -> String {
        format!("127.0.0.1:{}", self.gcs_port)
    }

    /// The cluster's temp dir (its sessions, logs and sockets).
    pub fn temp_dir(&self) -> &Path {
        self.temp_dir.path()
    }

    /// Every job the cluster knows, as `GET /api/jobs/` lists them (submission id, status,
    /// metadata, ...); empty when the Jobs API does not answer.
    pub fn jobs(&self) -> Vec<serde_json::Value> {
        http_get(self.dashboard_port, "/api/jobs/")
            .and_then(|body| serde_json::from_str::<Vec<serde_json::Value>>(&body).ok())
            .unwrap_or_default()
    }

    /// The status Ray reports for the job `submission_id` (`RUNNING`, `STOPPED`, ...).
    pub fn job_status(&self, submission_id: &str) -> Option<String> {
        let body = http_get(self.dashboard_port, &format!("/api/jobs/{submission_id}"))?;
        let job: serde_json::Value = serde_json::from_str(&body).ok()?;
        job["status"].as_str().map(str::to_owned)
    }

    /// Stops the job `submission_id` through the Jobs API (`POST /api/jobs/<id>/stop`), as an
    /// operator would; whether Ray accepted the request.
    pub fn stop_job(&self, submission_id: &str) -> bool {
        http_request(
            self.dashboard_port,
            "POST",
            &format!("/api/jobs/{submission_id}/stop"),
        )
        .is_some()
    }

    /// Submits a job running `entrypoint` (a shell command) under `submission_id`, its
    /// entrypoint reserving `entrypoint_num_cpus`, with no runtime environment of its own:
    /// Ray by itself, without Corral, for a benchmark's baseline. Whether Ray accepted it.
    pub fn submit_job(
        &self,
        submission_id: &str,
        entrypoint: &str,
        entrypoint_num_cpus: f64,
    ) -> bool {
        let body = serde_json::json!({
            "entrypoint": entrypoint,
            "submission_id": submission_id,
            "entrypoint_num_cpus": entrypoint_num_cpus,
        })
        .to_string();
        http_send(self.dashboard_port, "POST", "/api/jobs/", &body).is_some()
    }

    /// Stops the second node (its processes and the jobs' processes on it), as a node lost
    /// from under the cluster.
    pub fn kill_second_node(&mut self) {
        if let Some(index) = self.nodes.iter().position(|node| node.name == "second") {
            let node = self.nodes.remove(index);
            stop_group(node);
        }
    }

    /// The pids of the live processes of the cluster whose temp dir is `temp_dir`: those whose
    /// environment holds exactly `CLUSTER_VAR=<temp_dir>` (none once the cluster is dropped, if
    /// the stop was clean). Zombies do not count.
    pub fn leftovers(temp_dir: &Path) -> Vec<u32> {
        let mut needle = format!("{CLUSTER_VAR}=").into_bytes();
        needle.extend_from_slice(temp_dir.as_os_str().as_encoded_bytes());
        let me = std::process::id();
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return Vec::new();
        };
        entries
            .filter_map(Result::ok)
            .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
            .filter(|&pid| pid != me && crate::is_alive(pid))
            .filter(|pid| {
                std::fs::read(format!("/proc/{pid}/environ"))
                    .is_ok_and(|environ| environ.split(|b| *b == 0).any(|var| var == needle))
            })
            .collect()
    }

    fn spawn_node(&mut self, name: &'static str, args: Vec<String>) -> io::Result<()> {
        let log = std::fs::File::create(self.temp_dir.path().join(format!("{name}.out")))?;
        // Through the venv's Python, not the `ray` script's shebang: the shebang names the
        // path the venv was created at, which a venv moved or shared between checkouts no
        // longer has.
        let mut cmd = Command::new(self.venv.join("bin/python3"));
        cmd.arg(self.venv.join("bin/ray"))
            .arg("start")
            .arg("--block")
            .arg("--disable-usage-stats")
            .arg("--node-ip-address=127.0.0.1")
            .arg(format!("--object-store-memory={OBJECT_STORE_BYTES}"))
            .arg(format!(
                "--dashboard-agent-listen-port={}",
                lease_port(&mut self.leases)?
            ))
            .arg(format!(
                "--metrics-export-port={}",
                lease_port(&mut self.leases)?
            ))
            .args(&args)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .envs(
                self.second_env
                    .iter()
                    .filter(|_| name == "second")
                    .map(|(k, v)| (k, v)),
            )
            .env("RAY_USAGE_STATS_ENABLED", "0")
            .env(CLUSTER_VAR, self.temp_dir.path())
            // The nodes and the jobs' entrypoints find the venv's Python and `ray` first.
            .env("PATH", prepend_path(&self.venv.join("bin")))
            .env("VIRTUAL_ENV", &self.venv)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .process_group(0);
        let child = cmd.spawn()?;
        self.nodes.push(Node { child, name });
        Ok(())
    }

    fn wait_until(&mut self, ready: impl Fn(&Self) -> bool, what: &str) -> io::Result<()> {
        let deadline = Instant::now() + START_TIMEOUT;
        while Instant::now() < deadline {
            if ready(self) {
                return Ok(());
            }
            let mut exited = None;
            for node in &mut self.nodes {
                if let Some(status) = node.child.try_wait()? {
                    exited = Some((node.name, status));
                }
            }
            if let Some((name, status)) = exited {
                return Err(io::Error::other(format!(
                    "the Ray {name} node exited ({status}) while waiting for {what}: {}",
                    self.output()
                )));
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        Err(io::Error::other(format!(
            "the Ray cluster was not up within {}s (waiting for {what}): {}",
            START_TIMEOUT.as_secs(),
            self.output()
        )))
    }

    /// Both nodes' output so far, for an error.
    fn output(&self) -> String {
        ["head", "second"]
            .iter()
            .filter_map(|name| {
                let text =
                    std::fs::read_to_string(self.temp_dir.path().join(format!("{name}.out")))
                        .ok()?;
                Some(format!("--- {name} node ---\n{text}"))
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    fn jobs_api_answers(&self) -> bool {
        http_get(self.dashboard_port, "/api/version")
            .is_some_and(|body| body.contains("ray_version"))
    }

    /// How many nodes the dashboard reports alive.
    fn alive_nodes(&self) -> usize {
        http_get(self.dashboard_port, "/nodes?view=summary").map_or(0, |body| {
            body.matches("\"state\": \"ALIVE\"")
                .count()
                .max(body.matches("\"state\":\"ALIVE\"").count())
        })
    }
}

impl Drop for RayCluster {
    fn drop(&mut self) {
        // The second node first, so the head does not wait on it.
        while let Some(node) = self.nodes.pop() {
            stop_group(node);
        }
        // Anything that left the process groups (Ray's workers are its raylet's children, but
        // a job may start processes of its own): by the mark it inherited ([`CLUSTER_VAR`]).
        for pid in Self::leftovers(self.temp_dir.path()) {
            if let Ok(pid) = i32::try_from(pid) {
                let _ = nix::sys::signal::kill(Pid::from_raw(pid), Signal::SIGKILL);
            }
        }
    }
}

/// SIGTERM to the node's process group (`ray start --block` then stops its node's processes),
/// SIGKILL to whatever is left after [`STOP_GRACE`].
fn stop_group(mut node: Node) {
    let Ok(pgid) = i32::try_from(node.child.id()) else {
        return;
    };
    let group = Pid::from_raw(pgid);
    let _ = killpg(group, Signal::SIGTERM);
    let deadline = Instant::now() + STOP_GRACE;
    while Instant::now() < deadline && crate::group_alive(node.child.id()) {
        let _ = node.child.try_wait();
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = killpg(group, Signal::SIGKILL);
    let _ = node.child.wait();
}

/// Where the ports a cluster is told to listen on come from: above Ray's worker ports
/// (10002-19999 by default) and below the kernel's ephemeral range, so that no port the kernel
/// hands out meanwhile (to this cluster's own processes, which bind dozens while the head starts,
/// or to any other test) can take one before Ray binds it. That race did happen with ports the
/// kernel picked: "Failed to bind to address 127.0.0.1:36347 ... Address already in use".
const LEASED_PORTS_FROM: u16 = 20_000;

/// A port free on 127.0.0.1 now and leased to this cluster: a lock file under
/// `/tmp/corral-test-ports/` held in `leases` keeps every other cluster on the machine off it.
fn lease_port(leases: &mut Vec<std::fs::File>) -> io::Result<u16> {
    let below = ephemeral_low().max(LEASED_PORTS_FROM + 1000);
    let dir = Path::new("/tmp/corral-test-ports");
    std::fs::create_dir_all(dir)?;
    for _ in 0..1000 {
        let port = fastrand::u16(LEASED_PORTS_FROM..below);
        let lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(dir.join(port.to_string()))?;
        if lock.try_lock().is_err() {
            continue;
        }
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            leases.push(lock);
            return Ok(port);
        }
    }
    Err(io::Error::other(format!(
        "no free port between {LEASED_PORTS_FROM} and {below} after 1000 tries"
    )))
}

/// The low end of the kernel's ephemeral port range (`net.ipv4.ip_local_port_range`).
fn ephemeral_low() -> u16 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse().ok())
        .unwrap_or(32_768)
}

fn prepend_path(dir: &Path) -> std::ffi::OsString {
    let mut paths = vec![dir.to_path_buf()];
    if let Some(path) = std::env::var_os("PATH") {
        paths.extend(std::env::split_paths(&path));
    }
    std::env::join_paths(paths).unwrap_or_default()
}

/// The body of `GET <path>` on 127.0.0.1:`port` when it answers 200 within two seconds.
fn http_get(port: u16, path: &str) -> Option<String> {
    http_request(port, "GET", path)
}

/// The body of `<method> <path>` (no request body) on 127.0.0.1:`port` when it answers 200
/// within two seconds.
fn http_request(port: u16, method: &str, path: &str) -> Option<String> {
    http_send(port, method, path, "")
}

/// The body of `<method> <path>` with the JSON `body` on 127.0.0.1:`port` when it answers
/// 200 within two seconds.
fn http_send(port: u16, method: &str, path: &str, body: &str) -> Option<String> {
    let timeout = Duration::from_secs(2);
    let mut stream = TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), timeout).ok()?;
    stream.set_read_timeout(Some(timeout)).ok()?;
    stream.set_write_timeout(Some(timeout)).ok()?;
    write!(
        stream,
        "{method} {path} HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let (head, body) = response.split_once("\r\n\r\n")?;
    (head.starts_with("HTTP/1.1 200") || head.starts_with("HTTP/1.0 200")).then(|| body.to_owned())
}
