//! A cluster of `ringraft serve` processes on 127.0.0.1: configs, logs and stderr files in one
//! temporary directory, nodes started and stopped by id.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use net::client::BlockingClient;

use crate::certs::{Authority, Validity, CN_MAPPING_RULE};
use crate::netns::{Host, NetLab};
use crate::process::{kill_with_parent, ProcessGuard};

/// The port of every node in a [`NetLab`]: each host has a network of its own.
const LAB_PORT: u16 = 9092;
/// The controller listener's port in a [`NetLab`] with [`Security::MutualTls`].
const LAB_CONTROLLER_PORT: u16 = 9093;

/// How the nodes of a [`Cluster`] listen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Security {
    /// One PLAINTEXT listener serving everything: anyone who reaches it can speak for any voter.
    Plaintext,
    /// A PLAINTEXT `CLIENT` listener and a `CONTROLLER` listener with mutual TLS: each node has
    /// a certificate for `CN=ringraft-<id>` from the cluster's own CA (`pki/` in the cluster's
    /// directory), and a voter accepts quorum requests only from the replica they name
    /// (docs/security.md).
    MutualTls,
    /// [`Security::MutualTls`], and the `CLIENT` listener over TLS too (server certificates
    /// only): what the TLS benchmark measures against PLAINTEXT.
    Tls,
}

/// How every node of a [`Cluster`] is configured and started.
#[derive(Clone, Debug)]
pub struct Settings {
    /// The `ringraft` binary.
    pub binary: PathBuf,
    /// `cluster.id` of the nodes [`Cluster::create`] writes.
    pub cluster_id: String,
    /// Prefix of the temporary directory that holds the configs, logs and stderr files.
    pub dir_prefix: String,
    /// `RUST_LOG` of every node.
    pub rust_log: String,
    /// `--override`s of every start, before the start's own.
    pub overrides: Vec<String>,
    /// `--raft-cpu` of the node at position i: entry i mod the list's length (none if empty).
    pub raft_cpus: Vec<usize>,
    /// `--log-cpu` of the node at position i, handed out as `raft_cpus`.
    pub log_cpus: Vec<usize>,
    /// [`Cluster::stderr_tail`]: this many last lines...
    pub tail_lines: usize,
    /// ... or, when set and the node panicked, from its last panic message on.
    pub tail_from_panic: bool,
    pub security: Security,
    /// `log.segment.bytes` written into every node's config (the node's default when None).
    /// Segments are preallocated whole: the process tests run several 3- to 5-node clusters at
    /// once, and at the default 1 GiB those fill a small disk before any record is written.
    pub segment_bytes: Option<u64>,
}

impl Settings {
    /// `cluster.id` "ringraft-testkit", `RUST_LOG=warn` (or `RINGRAFT_TEST_RUST_LOG` when set,
    /// for chasing a failure with more of the nodes' logs), no overrides, no pinning, tails of
    /// 15 lines or from a panic on.
    pub fn new(binary: impl Into<PathBuf>) -> Self {
        Settings {
            binary: binary.into(),
            cluster_id: "ringraft-testkit".into(),
            dir_prefix: ".tmp".into(),
            rust_log: std::env::var("RINGRAFT_TEST_RUST_LOG").unwrap_or_else(|_| "warn".into()),
            overrides: Vec::new(),
            raft_cpus: Vec::new(),
            log_cpus: Vec::new(),
            tail_lines: 15,
            tail_from_panic: true,
            security: Security::Plaintext,
            segment_bytes: None,
        }
    }

    /// `ringraft serve --config config`, these settings' overrides then `overrides`, the
    /// pinning of the node at position `index`, stdin and stdout null (the caller sets stderr),
    /// in a process group of its own and killed with the thread that spawns it.
    pub fn serve_command(&self, config: &Path, overrides: &[&str], index: usize) -> Command {
        self.serve_command_on(None, config, overrides, index)
    }

    /// [`Settings::serve_command`] in `host`'s network namespace (`ip netns exec`, which execs
    /// the node: the child's pid is the node's), or in this process's when None.
    pub fn serve_command_on(
        &self,
        host: Option<&Host>,
        config: &Path,
        overrides: &[&str],
        index: usize,
    ) -> Command {
        let mut command = match host {
            Some(host) => host.command(&self.binary),
            None => Command::new(&self.binary),
        };
        command.arg("serve").arg("--config").arg(config);
        let all = self.overrides.iter().map(String::as_str);
        for pair in all.chain(overrides.iter().copied()) {
            command.arg("--override").arg(pair);
        }
        if !self.raft_cpus.is_empty() {
            let cpu = self.raft_cpus[index % self.raft_cpus.len()];
            command.arg("--raft-cpu").arg(cpu.to_string());
        }
        if !self.log_cpus.is_empty() {
            let cpu = self.log_cpus[index % self.log_cpus.len()];
            command.arg("--log-cpu").arg(cpu.to_string());
        }
        command
            .env("RUST_LOG", &self.rust_log)
            .stdin(Stdio::null())
            .stdout(Stdio::null());
        // Own process group: a terminal's Ctrl-C reaches only the process that started the
        // nodes, which can then stop them with SIGTERM and check how they exit.
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        kill_with_parent(&mut command);
        command
    }
}

/// Where a started node's stderr goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stderr {
    Null,
    /// Appended to [`Cluster::stderr_path`] (read back with [`Cluster::stderr_tail`]).
    File,
}

/// How [`Cluster::wait_for_leader`] waits.
#[derive(Clone, Copy, Debug)]
pub struct LeaderWait<'a> {
    pub timeout: Duration,
    /// A node not to count as the leader.
    pub exclude: Option<i32>,
    /// Give up at once, naming the node and its stderr tail, when a started node has exited.
    pub fail_on_exit: bool,
    /// Give up as soon as this is set.
    pub interrupted: Option<&'a AtomicBool>,
}

impl LeaderWait<'_> {
    /// At most `timeout`, every started node counted, whether or not some have exited.
    pub fn within(timeout: Duration) -> Self {
        LeaderWait {
            timeout,
            exclude: None,
            fail_on_exit: false,
            interrupted: None,
        }
    }
}

pub struct Node {
    pub id: i32,
    /// Where clients connect (Produce, DescribeQuorum): the only listener, or `CLIENT`.
    pub addr: SocketAddr,
    /// Where the voters connect to each other: `addr`, or `CONTROLLER`.
    pub controller_addr: SocketAddr,
    pub dir: PathBuf,
    pub config: PathBuf,
    pub process: Option<ProcessGuard>,
    /// The lab host whose namespace the node runs in ([`Cluster::create_in_lab`]).
    pub host: Option<Host>,
}

pub struct Cluster {
    // Declared before `lab` and `root` so the processes are gone before their namespaces and
    // directories are removed.
    pub nodes: Vec<Node>,
    /// The namespaces of a cluster made by [`Cluster::create_in_lab`].
    pub lab: Option<NetLab>,
    pub root: tempfile::TempDir,
    pub settings: Settings,
    /// The cluster's CA, with [`Security::MutualTls`] and [`Security::Tls`].
    pub pki: Option<Authority>,
    /// How clients reach the `CLIENT` listener over TLS, with [`Security::Tls`].
    pub client_tls: Option<ClientTls>,
}

/// A TLS client configuration that trusts a cluster's CA, and the name its certificates carry.
#[derive(Clone)]
pub struct ClientTls {
    pub config: std::sync::Arc<rustls::ClientConfig>,
    pub server_name: String,
}

fn client_tls(truststore: &Path) -> Result<ClientTls, String> {
    let config = net::security::tls::client_config(&net::security::tls::TlsSettings {
        truststore_location: Some(truststore.to_owned()),
        ..Default::default()
    })
    .map_err(|e| e.to_string())?;
    Ok(ClientTls {
        config,
        server_name: "127.0.0.1".into(),
    })
}

impl std::fmt::Debug for ClientTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientTls")
            .field("server_name", &self.server_name)
            .finish_non_exhaustive()
    }
}

impl ClientTls {
    /// A client connection over TLS to `addr`.
    pub fn connect(&self, addr: SocketAddr, timeout: Duration) -> Result<BlockingClient, String> {
        BlockingClient::connect_tls(addr, timeout, self.config.clone(), &self.server_name)
            .map_err(|e| e.to_string())
    }
}

/// A node's `server.properties` with one PLAINTEXT listener at `addr`: `membership` is its
/// `quorum.voters=...` or `bootstrap.servers=...` line.
pub fn node_properties(
    id: i32,
    cluster_id: &str,
    addr: SocketAddr,
    dir: &Path,
    membership: &str,
) -> String {
    format!(
        "{}listeners=PLAINTEXT://{addr}\n",
        base_properties(id, cluster_id, dir, membership)
    )
}

/// Everything of a node's `server.properties` but its listeners.
fn base_properties(id: i32, cluster_id: &str, dir: &Path, membership: &str) -> String {
    format!(
        "broker.id={id}\ncluster.id={cluster_id}\nlog.dirs={}\n{membership}\n",
        dir.display()
    )
}

/// The listener lines of a node with a PLAINTEXT client listener at `addr` and a mutual-TLS
/// controller listener at `controller`, its key and certificate in `keystore`.
pub fn mutual_tls_properties(
    addr: SocketAddr,
    controller: SocketAddr,
    keystore: &Path,
    truststore: &Path,
) -> String {
    tls_properties("PLAINTEXT", addr, controller, keystore, truststore)
}

/// [`mutual_tls_properties`] with the client listener's protocol `client` (PLAINTEXT or SSL).
fn tls_properties(
    client: &str,
    addr: SocketAddr,
    controller: SocketAddr,
    keystore: &Path,
    truststore: &Path,
) -> String {
    format!(
        "listeners=CLIENT://{addr},CONTROLLER://{controller}\n\
         listener.security.protocol.map=CLIENT:{client},CONTROLLER:SSL\n\
         controller.listener.names=CONTROLLER\n\
         ssl.keystore.location={}\n\
         ssl.truststore.location={}\n\
         listener.name.controller.ssl.client.auth=required\n\
         ssl.principal.mapping.rules={CN_MAPPING_RULE}\n",
        keystore.display(),
        truststore.display()
    )
}

fn loopback(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

/// Client and controller address of the node on lab host `i`: one PLAINTEXT listener, or with
/// [`Security::MutualTls`] a controller listener of its own.
fn lab_addrs(lab: &NetLab, i: usize, security: Security) -> (SocketAddr, SocketAddr) {
    let ip = lab.host(i).ip;
    let addr = SocketAddr::from((ip, LAB_PORT));
    match security {
        Security::Plaintext => (addr, addr),
        Security::MutualTls | Security::Tls => (addr, SocketAddr::from((ip, LAB_CONTROLLER_PORT))),
    }
}

impl Cluster {
    /// Writes the configs of `count` voters, ids 1 to `count` on free ports (none started).
    pub fn create(settings: Settings, count: usize) -> Result<Cluster, String> {
        let ports = crate::free_ports(2 * count)?;
        let addrs: Vec<(SocketAddr, SocketAddr)> = (0..count)
            .map(|i| match settings.security {
                Security::Plaintext => (loopback(ports[i]), loopback(ports[i])),
                Security::MutualTls | Security::Tls => {
                    (loopback(ports[i]), loopback(ports[count + i]))
                }
            })
            .collect();
        Self::create_at(settings, addrs, None)
    }

    /// Writes the configs of `count` voters, ids 1 to `count`, each to run in a namespace of a
    /// new [`NetLab`] of `hosts` hosts (node i on host i - 1, PLAINTEXT on port 9092, and with
    /// [`Security::MutualTls`] the controller listener on 9093, its certificate naming the
    /// host's address; the hosts beyond `count` are for [`Cluster::add_node`]). Clients of the
    /// cluster's methods connect from the lab's client namespace.
    pub fn create_in_lab(
        settings: Settings,
        count: usize,
        hosts: usize,
    ) -> Result<Cluster, String> {
        if settings.security == Security::Tls {
            return Err("a lab cluster's client listener is PLAINTEXT".into());
        }
        assert!(count <= hosts, "{count} voters on {hosts} hosts");
        let lab = NetLab::create(hosts)?;
        let addrs = (0..count)
            .map(|i| lab_addrs(&lab, i, settings.security))
            .collect();
        Self::create_at(settings, addrs, Some(lab))
    }

    fn create_at(
        settings: Settings,
        addrs: Vec<(SocketAddr, SocketAddr)>,
        lab: Option<NetLab>,
    ) -> Result<Cluster, String> {
        let root = tempfile::Builder::new()
            .prefix(&settings.dir_prefix)
            .tempdir_in(std::env::temp_dir())
            .map_err(|e| format!("creating a temporary directory: {e}"))?;
        let pki = match settings.security {
            Security::Plaintext => None,
            Security::MutualTls | Security::Tls => {
                Some(Authority::create(&root.path().join("pki"), "ringraft-ca")?)
            }
        };
        let client_tls = match (&pki, settings.security) {
            (Some(pki), Security::Tls) => Some(client_tls(&pki.ca_path())?),
            _ => None,
        };
        let voters = addrs
            .iter()
            .enumerate()
            .map(|(i, (_, controller))| format!("{}@{controller}", i + 1))
            .collect::<Vec<_>>()
            .join(",");
        let cluster_id = settings.cluster_id.clone();
        let mut cluster = Cluster {
            nodes: Vec::new(),
            lab,
            root,
            settings,
            pki,
            client_tls,
        };
        for (i, (addr, controller)) in addrs.into_iter().enumerate() {
            let id = i as i32 + 1;
            cluster.push_node(
                id,
                (addr, controller),
                &format!("node-{id}"),
                &format!("server-{id}.properties"),
                &cluster_id,
                &format!("quorum.voters={voters}"),
            )?;
        }
        Ok(cluster)
    }

    /// The voters' `quorum.voters` line's value: `id@controller address,...`.
    pub fn voters_value(&self) -> String {
        self.nodes
            .iter()
            .map(|n| format!("{}@{}", n.id, n.controller_addr))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Adds node `id` (not started) on a free port, its log directory `name` and its config
    /// `name.properties` in the cluster's directory; returns its position in `nodes`.
    pub fn add_node(
        &mut self,
        id: i32,
        name: &str,
        cluster_id: &str,
        membership: &str,
    ) -> Result<usize, String> {
        let addrs = match &self.lab {
            Some(lab) if self.nodes.len() >= lab.hosts() => {
                return Err(format!("no free host in the lab for node {id}"))
            }
            Some(lab) => lab_addrs(lab, self.nodes.len(), self.settings.security),
            None => {
                let ports = crate::free_ports(2)?;
                match self.settings.security {
                    Security::Plaintext => (loopback(ports[0]), loopback(ports[0])),
                    Security::MutualTls | Security::Tls => (loopback(ports[0]), loopback(ports[1])),
                }
            }
        };
        let config = format!("{name}.properties");
        self.push_node(id, addrs, name, &config, cluster_id, membership)?;
        Ok(self.nodes.len() - 1)
    }

    fn push_node(
        &mut self,
        id: i32,
        (addr, controller_addr): (SocketAddr, SocketAddr),
        dir: &str,
        config: &str,
        cluster_id: &str,
        membership: &str,
    ) -> Result<(), String> {
        let dir = self.root.path().join(dir);
        let config = self.root.path().join(config);
        let mut properties = match &self.pki {
            None => node_properties(id, cluster_id, addr, &dir, membership),
            Some(pki) => {
                // The peers dial the controller address, which a lab host's certificate must
                // name too.
                let controller_ip = controller_addr.ip().to_string();
                let mut hosts = vec!["127.0.0.1", "localhost"];
                if !controller_addr.ip().is_loopback() {
                    hosts.push(&controller_ip);
                }
                let keystore = pki.issue(
                    &format!("node-{id}"),
                    &format!("ringraft-{id}"),
                    &hosts,
                    Validity::Current,
                )?;
                let client = if self.client_tls.is_some() {
                    "SSL"
                } else {
                    "PLAINTEXT"
                };
                format!(
                    "{}{}",
                    base_properties(id, cluster_id, &dir, membership),
                    tls_properties(client, addr, controller_addr, &keystore, &pki.ca_path())
                )
            }
        };
        if let Some(bytes) = self.settings.segment_bytes {
            properties.push_str(&format!("log.segment.bytes={bytes}\n"));
        }
        std::fs::write(&config, properties)
            .map_err(|e| format!("writing {}: {e}", config.display()))?;
        let host = self
            .lab
            .as_ref()
            .map(|lab| lab.host(self.nodes.len()).clone());
        self.nodes.push(Node {
            id,
            addr,
            controller_addr,
            dir,
            config,
            process: None,
            host,
        });
        Ok(())
    }

    /// A client connection to a node's client listener at `addr` (over TLS with
    /// [`Security::Tls`]).
    pub fn client(&self, addr: SocketAddr, timeout: Duration) -> Result<BlockingClient, String> {
        let _entered = match &self.lab {
            Some(lab) => Some(lab.client().enter()?),
            None => None,
        };
        match &self.client_tls {
            Some(tls) => tls.connect(addr, timeout),
            None => BlockingClient::connect(addr, timeout).map_err(|e| e.to_string()),
        }
    }

    /// The position in `nodes` of the (first) node `id`.
    pub fn index(&self, id: i32) -> Option<usize> {
        self.nodes.iter().position(|n| n.id == id)
    }

    /// Node `id`; panics if there is none.
    pub fn node(&mut self, id: i32) -> &mut Node {
        let index = self.index(id).unwrap_or_else(|| panic!("no node {id}"));
        &mut self.nodes[index]
    }

    /// The ids of every node but `id`, in the cluster's order: a leader's followers.
    pub fn others(&self, id: i32) -> Vec<i32> {
        self.nodes
            .iter()
            .map(|n| n.id)
            .filter(|&n| n != id)
            .collect()
    }

    /// The address of node `id`; panics if there is none.
    pub fn addr(&self, id: i32) -> SocketAddr {
        let index = self.index(id).unwrap_or_else(|| panic!("no node {id}"));
        self.nodes[index].addr
    }

    pub fn stderr_path(&self, id: i32) -> PathBuf {
        self.root.path().join(format!("node-{id}.stderr"))
    }

    /// The end of what node `id` wrote to its stderr file (empty if nothing): as
    /// [`Settings::tail_lines`] and [`Settings::tail_from_panic`] say.
    pub fn stderr_tail(&self, id: i32) -> String {
        let text = std::fs::read_to_string(self.stderr_path(id)).unwrap_or_default();
        crate::tail(
            &text,
            self.settings.tail_lines,
            self.settings.tail_from_panic,
        )
    }

    /// Every node's [`Self::stderr_tail`], each under its id: what a test prints when the
    /// cluster did not do what it waited for.
    pub fn stderr_tails(&self) -> String {
        self.nodes
            .iter()
            .map(|n| format!("node {}:\n{}\n", n.id, self.stderr_tail(n.id)))
            .collect()
    }

    /// Starts node `id` (a running one is killed first) with `overrides` after the settings'.
    pub fn start(&mut self, id: i32, overrides: &[&str], stderr: Stderr) -> Result<(), String> {
        let index = self.index(id).ok_or_else(|| format!("no node {id}"))?;
        self.start_at(index, overrides, stderr)
    }

    /// Starts every node, in order.
    pub fn start_all(&mut self, stderr: Stderr) -> Result<(), String> {
        (0..self.nodes.len()).try_for_each(|index| self.start_at(index, &[], stderr))
    }

    fn start_at(&mut self, index: usize, overrides: &[&str], stderr: Stderr) -> Result<(), String> {
        let node = &self.nodes[index];
        let stdio = match stderr {
            Stderr::Null => Stdio::null(),
            Stderr::File => {
                let path = self.stderr_path(node.id);
                let file = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&path)
                    .map_err(|e| format!("creating {}: {e}", path.display()))?;
                Stdio::from(file)
            }
        };
        let mut command =
            self.settings
                .serve_command_on(node.host.as_ref(), &node.config, overrides, index);
        let child = command
            .stderr(stdio)
            .spawn()
            .map_err(|e| format!("starting {}: {e}", self.settings.binary.display()))?;
        self.nodes[index].process = Some(ProcessGuard { child });
        Ok(())
    }

    /// (node id, pid) of every started node, in order.
    pub fn pids(&self) -> Vec<(i32, u32)> {
        self.nodes
            .iter()
            .filter_map(|n| n.process.as_ref().map(|p| (n.id, p.pid())))
            .collect()
    }

    /// Fails, naming the node and its stderr tail, if a started node has exited.
    pub fn check_running(&mut self) -> Result<(), String> {
        for i in 0..self.nodes.len() {
            if let Some(status) = self.nodes[i].process.as_mut().and_then(|p| p.exited()) {
                let id = self.nodes[i].id;
                return Err(format!(
                    "node {id} exited ({status}); its last stderr lines:\n{}",
                    self.stderr_tail(id)
                ));
            }
        }
        Ok(())
    }

    /// The started node (but `exclude`) that answers DescribeQuorum as the leader, if one does
    /// now.
    pub fn leader_now(&self, exclude: Option<i32>) -> Option<i32> {
        self.nodes
            .iter()
            .filter(|n| Some(n.id) != exclude && n.process.is_some())
            .find(|node| {
                let Ok(mut client) = self.client(node.addr, Duration::from_secs(1)) else {
                    return false;
                };
                client
                    .describe_quorum()
                    .is_ok_and(|d| d.error.is_none() && d.leader_id == node.id)
                    && serves_clients(&mut client, node.id)
            })
            .map(|n| n.id)
    }

    /// Polls [`Cluster::leader_now`] until a leader answers (bounded, as `wait` says).
    pub fn wait_for_leader(&mut self, wait: &LeaderWait) -> Result<i32, String> {
        let deadline = Instant::now() + wait.timeout;
        let interrupted = || wait.interrupted.is_some_and(|i| i.load(Ordering::Relaxed));
        while Instant::now() < deadline && !interrupted() {
            if wait.fail_on_exit {
                self.check_running()?;
            }
            if let Some(id) = self.leader_now(wait.exclude) {
                return Ok(id);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Err(format!("no leader elected within {:?}", wait.timeout))
    }

    /// Waits (at most `timeout`) until the leader reports every voter's log end offset at
    /// `offset` or beyond.
    pub fn wait_for_voters_at(
        &self,
        leader: i32,
        offset: i64,
        timeout: Duration,
    ) -> Result<(), String> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            let reached = self
                .client(self.addr(leader), Duration::from_secs(1))
                .and_then(|mut client| client.describe_quorum().map_err(|e| e.to_string()))
                // Only the leader's own answer counts: a node that is not (any more) the leader
                // lists no voters, and `all` over none would pass.
                .is_ok_and(|d| {
                    d.error.is_none()
                        && !d.current_voters.is_empty()
                        && d.current_voters.iter().all(|v| v.log_end_offset >= offset)
                });
            if reached {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Err(format!(
            "voters did not reach offset {offset} within {timeout:?}"
        ))
    }

    /// Waits (at most `timeout`) until the leader, whichever node it is, reports each of
    /// `ids`, voter or observer, at `offset` or beyond. A leader may answer an observer's
    /// fetches at most once per its observer fetch interval (docs/protocol.md, "Observer fetch
    /// pacing"), so an observer can trail the voters: a test that reads an observer's log waits
    /// for it here, not with [`Cluster::wait_for_voters_at`].
    pub fn wait_for_replicas_at(
        &self,
        ids: &[i32],
        offset: i64,
        timeout: Duration,
    ) -> Result<(), String> {
        let deadline = Instant::now() + timeout;
        let mut seen = String::from("no leader answered");
        while Instant::now() < deadline {
            let described = self.leader_now(None).and_then(|leader| {
                let mut client = self
                    .client(self.addr(leader), Duration::from_secs(1))
                    .ok()?;
                Some((leader, client.describe_quorum().ok()?))
            });
            if let Some((leader, d)) = described.filter(|(_, d)| d.error.is_none()) {
                let ends: Vec<(i32, i64)> = d
                    .current_voters
                    .iter()
                    .chain(&d.observers)
                    .map(|r| (r.replica_id, r.log_end_offset))
                    .collect();
                let at = |id: &i32| ends.iter().any(|&(r, end)| r == *id && end >= offset);
                if ids.iter().all(at) {
                    return Ok(());
                }
                seen = format!("leader {leader}: (replica, log end) {ends:?}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Err(format!(
            "replicas {ids:?} did not reach offset {offset} within {timeout:?}; {seen}"
        ))
    }

    /// Cuts node `id`'s host off from every other ([`NetLab::cut`]).
    pub fn cut(&self, id: i32) -> Result<(), String> {
        self.lab_host_index(id).and_then(|(lab, i)| lab.cut(i))
    }

    /// Heals [`Cluster::cut`].
    pub fn heal(&self, id: i32) -> Result<(), String> {
        self.lab_host_index(id).and_then(|(lab, i)| lab.heal(i))
    }

    /// Severs nodes `a` and `b` from each other only ([`NetLab::sever`]).
    pub fn sever(&self, a: i32, b: i32) -> Result<(), String> {
        let (lab, i) = self.lab_host_index(a)?;
        let (_, j) = self.lab_host_index(b)?;
        lab.sever(i, j)
    }

    /// Undoes [`Cluster::sever`].
    pub fn mend(&self, a: i32, b: i32) -> Result<(), String> {
        let (lab, i) = self.lab_host_index(a)?;
        let (_, j) = self.lab_host_index(b)?;
        lab.mend(i, j)
    }

    fn lab_host_index(&self, id: i32) -> Result<(&NetLab, usize), String> {
        let lab = self.lab.as_ref().ok_or("not a lab cluster")?;
        let index = self.index(id).ok_or_else(|| format!("no node {id}"))?;
        Ok((lab, index))
    }

    /// Stops every started node: SIGTERM, then SIGKILL (its guard) if it has not exited within
    /// `timeout` (one deadline for all). (id, exit status) of each, in order; None = killed.
    pub fn stop_all(&mut self, timeout: Duration) -> Vec<(i32, Option<ExitStatus>)> {
        for process in self.nodes.iter().filter_map(|n| n.process.as_ref()) {
            process.signal(libc::SIGTERM);
        }
        let deadline = Instant::now() + timeout;
        self.nodes
            .iter_mut()
            .filter_map(|node| {
                let mut process = node.process.take()?;
                let left = deadline.saturating_duration_since(Instant::now());
                Some((node.id, process.wait_exit(left)))
            })
            .collect()
    }
}

/// Whether leader `id` answers clients as leader: a new leader does so only once its high
/// watermark is known in its epoch and its lease runs (docs/consistency.md), a moment after
/// DescribeQuorum names it. Its Metadata then names itself. A node whose ACLs refuse the
/// topic's metadata to this client, or that this client cannot ask, counts as serving (the
/// tests of such clusters wait in their own way).
fn serves_clients(client: &mut BlockingClient, id: i32) -> bool {
    use engine::raft::ErrorCode;
    match client.metadata(4, Some(&["__cluster_metadata"])) {
        Ok(m) => match m.topics.first() {
            Some(t) if t.error == ErrorCode::NONE => {
                t.partitions.first().is_some_and(|p| p.leader_id == id)
            }
            Some(t) => t.error == ErrorCode::TOPIC_AUTHORIZATION_FAILED,
            None => false,
        },
        Err(_) => true,
    }
}
