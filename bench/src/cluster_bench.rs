//! The `cluster` subcommand (and the default): starts N voters as real `ringraft serve`
//! processes on loopback (or joins a running cluster), drives Produce load at the leader and
//! reports committed records/s and commit latency.

use std::net::{SocketAddr, TcpListener, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use clap::Args;
use net::node::BlockingClient;
use serde::Serialize;

use crate::produce_load::{self, Interval, LoadConfig, LoadReport};

const LEADER_WAIT: Duration = Duration::from_secs(30);
const STOP_WAIT: Duration = Duration::from_secs(15);
const CLUSTER_ID: &str = "ringraft-bench";

#[derive(Args, Debug, Clone)]
pub struct ClusterArgs {
    /// Voters to start on 127.0.0.1.
    #[arg(long, default_value_t = 3)]
    nodes: usize,
    /// Drive a running cluster (`host:port,...`; the leader is found among them) instead of
    /// starting one.
    #[arg(long)]
    bootstrap_server: Option<String>,
    /// The `ringraft` binary (default: next to this executable).
    #[arg(long)]
    ringraft_bin: Option<PathBuf>,
    /// Blocking connections to the leader, one thread each, one request in flight each.
    #[arg(long, default_value_t = 16)]
    connections: usize,
    /// Bytes of each record's value.
    #[arg(long, default_value_t = 1024)]
    record_bytes: usize,
    /// Records per batch (one Produce request carries one batch).
    #[arg(long, default_value_t = 1)]
    batch_records: usize,
    /// -1 (all: committed on a majority), 1 (leader) or 0 (no response).
    #[arg(long, default_value_t = -1, allow_negative_numbers = true)]
    acks: i16,
    /// Seconds measured.
    #[arg(long, default_value_t = 10.0)]
    duration: f64,
    /// Seconds of load before measuring.
    #[arg(long, default_value_t = 1.0)]
    warmup: f64,
    /// CPUs for the nodes' raft threads (`0,1,...`): node i gets entry i mod the list's length.
    #[arg(long, value_delimiter = ',')]
    raft_cpus: Vec<usize>,
    /// CPUs for the nodes' log writer threads, handed out as --raft-cpus.
    #[arg(long, value_delimiter = ',')]
    log_cpus: Vec<usize>,
    /// Write every figure as one JSON object to this file.
    #[arg(long)]
    json: Option<PathBuf>,
}

#[derive(Serialize)]
struct Report {
    records_per_sec: f64,
    mb_per_sec: f64,
    commit_latency_us: produce_load::Latency,
    records: u64,
    requests: u64,
    elapsed_sec: f64,
    leader: String,
    started_cluster: bool,
    replication_factor: usize,
    acks: i16,
    fsync: bool,
    record_bytes: usize,
    batch_records: usize,
    connections: usize,
    inflight_per_connection: usize,
    raft_cpus: Vec<usize>,
    log_cpus: Vec<usize>,
    warmup_sec: f64,
    duration_sec: f64,
    interrupted: bool,
    loadavg: String,
    intervals: Vec<Interval>,
    /// Exit status of every node this run started (after SIGTERM).
    node_exits: Vec<String>,
}

/// Set by SIGINT/SIGTERM: the load stops, the nodes are stopped, the figures so far printed.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::Relaxed);
}

fn install_signal_handlers() {
    let handler = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        libc::signal(libc::SIGINT, handler);
        libc::signal(libc::SIGTERM, handler);
    }
}

pub fn run(args: ClusterArgs) -> Result<(), String> {
    validate(&args)?;
    install_signal_handlers();
    let mut cluster = None;
    let (leader, replication_factor) = match &args.bootstrap_server {
        Some(servers) => find_leader(servers)?,
        None => {
            let bin = ringraft_binary(args.ringraft_bin.as_deref())?;
            let mut started = LocalCluster::start(&bin, &args)?;
            let leader = started.wait_for_leader()?;
            cluster = Some(started);
            (leader, args.nodes)
        }
    };
    let config = LoadConfig {
        leader,
        connections: args.connections,
        record_bytes: args.record_bytes,
        batch_records: args.batch_records,
        acks: args.acks,
        warmup: Duration::from_secs_f64(args.warmup),
        duration: Duration::from_secs_f64(args.duration),
    };
    print_settings(&args, leader, replication_factor, cluster.is_some());
    let load = produce_load::run(&config, &INTERRUPTED, print_interval);
    // Stop the nodes whatever the load's outcome; their exit status is part of the result.
    let node_exits = match cluster.as_mut() {
        Some(cluster) => cluster.stop(),
        None => Vec::new(),
    };
    let load = match load {
        Ok(load) => load,
        Err(error) => {
            let exits = check_exits(&node_exits, cluster.as_ref()).err();
            return Err(match exits {
                Some(exits) => format!("{error}\n{exits}"),
                None => error,
            });
        }
    };
    let report = Report::new(&args, &load, leader, replication_factor, &node_exits);
    print_summary(&report);
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(&report).expect("report serialises");
        std::fs::write(path, text).map_err(|e| format!("writing {}: {e}", path.display()))?;
    }
    check_exits(&node_exits, cluster.as_ref())?;
    if report.interrupted {
        return Err("interrupted: the figures above cover only the time measured".into());
    }
    Ok(())
}

fn validate(args: &ClusterArgs) -> Result<(), String> {
    if args.connections == 0 || args.batch_records == 0 || args.nodes == 0 {
        return Err("--connections, --batch-records and --nodes must be at least 1".into());
    }
    if ![-1, 0, 1].contains(&args.acks) {
        return Err(format!("--acks {}: use -1, 0 or 1", args.acks));
    }
    if !(args.duration > 0.0 && args.warmup >= 0.0) {
        return Err("--duration must be positive and --warmup not negative".into());
    }
    Ok(())
}

impl Report {
    fn new(
        args: &ClusterArgs,
        load: &LoadReport,
        leader: SocketAddr,
        replication_factor: usize,
        node_exits: &[(usize, Option<ExitStatus>)],
    ) -> Self {
        Self {
            records_per_sec: load.records_per_sec,
            mb_per_sec: load.mb_per_sec,
            commit_latency_us: load.latency_us.clone(),
            records: load.records,
            requests: load.requests,
            elapsed_sec: load.elapsed_sec,
            leader: leader.to_string(),
            started_cluster: args.bootstrap_server.is_none(),
            replication_factor,
            acks: args.acks,
            fsync: true,
            record_bytes: args.record_bytes,
            batch_records: args.batch_records,
            connections: args.connections,
            inflight_per_connection: 1,
            raft_cpus: args.raft_cpus.clone(),
            log_cpus: args.log_cpus.clone(),
            warmup_sec: args.warmup,
            duration_sec: args.duration,
            interrupted: INTERRUPTED.load(Ordering::Relaxed),
            loadavg: std::fs::read_to_string("/proc/loadavg")
                .map(|s| s.trim().to_string())
                .unwrap_or_default(),
            intervals: load.intervals.clone(),
            node_exits: node_exits
                .iter()
                .map(|(id, status)| match status {
                    Some(status) => format!("node {id}: {status}"),
                    None => format!("node {id}: killed (did not stop on SIGTERM)"),
                })
                .collect(),
        }
    }
}

fn print_settings(args: &ClusterArgs, leader: SocketAddr, rf: usize, started: bool) {
    let origin = if started {
        format!("{rf} local voters started by this run")
    } else {
        format!("running cluster of {rf} voters")
    };
    println!(
        "leader {leader} ({origin}); warm-up {} s, measuring {} s",
        args.warmup, args.duration
    );
    println!("  sec   records/s      MB/s   p50 us   p99 us");
}

fn print_interval(interval: &Interval) {
    static SECOND: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let second = SECOND.fetch_add(1, Ordering::Relaxed) + 1;
    println!(
        "{second:>5} {:>11.0} {:>9.1} {:>8} {:>8}",
        interval.records_per_sec,
        interval.mb_per_sec,
        interval.latency_us.p50,
        interval.latency_us.p99
    );
}

fn print_summary(r: &Report) {
    let acks = match r.acks {
        -1 => "acks=-1 (all: committed on a majority)",
        1 => "acks=1 (leader only)",
        _ => "acks=0 (no response: latency is the send only)",
    };
    println!(
        "{}: {:.0} records/s, {:.1} MB/s over {:.2} s ({} records)",
        if r.interrupted {
            "interrupted"
        } else {
            "summary"
        },
        r.records_per_sec,
        r.mb_per_sec,
        r.elapsed_sec,
        r.records
    );
    let l = &r.commit_latency_us;
    println!(
        "  commit latency us: p50 {}  p99 {}  p99.9 {}  max {}  mean {:.0}",
        l.p50, l.p99, l.p999, l.max, l.mean
    );
    println!(
        "  durability: {acks}, fsync on (every batch fdatasync'd before it counts on a node); \
         replication factor {}",
        r.replication_factor
    );
    println!(
        "  load: {} B records, {} per batch, {} connections, {} request in flight each",
        r.record_bytes, r.batch_records, r.connections, r.inflight_per_connection
    );
    let pinning = if r.raft_cpus.is_empty() && r.log_cpus.is_empty() {
        "unpinned".to_string()
    } else {
        format!(
            "raft threads on cpus {:?}, log writers on cpus {:?} (node i gets entry i mod length)",
            r.raft_cpus, r.log_cpus
        )
    };
    println!(
        "  pinning: {pinning}; leader {}; loadavg {}",
        r.leader, r.loadavg
    );
    for exit in &r.node_exits {
        println!("  {exit}");
    }
}

fn check_exits(
    exits: &[(usize, Option<ExitStatus>)],
    cluster: Option<&LocalCluster>,
) -> Result<(), String> {
    let bad: Vec<String> = exits
        .iter()
        .filter(|(_, status)| !status.is_some_and(|s| s.success()))
        .map(|(id, status)| {
            let tail = cluster.map(|c| c.stderr_tail(*id)).unwrap_or_default();
            format!("node {id} ended with {status:?}; its last stderr lines:\n{tail}")
        })
        .collect();
    if bad.is_empty() {
        Ok(())
    } else {
        Err(bad.join("\n"))
    }
}

fn resolve(server: &str) -> Result<SocketAddr, String> {
    server
        .to_socket_addrs()
        .map_err(|e| format!("{server}: {e}"))?
        .next()
        .ok_or_else(|| format!("{server} resolves to nothing"))
}

/// The leader among `servers` and the number of voters it reports.
fn find_leader(servers: &str) -> Result<(SocketAddr, usize), String> {
    for server in servers.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let addr = resolve(server)?;
        let Ok(mut client) = BlockingClient::connect(addr, Duration::from_secs(5)) else {
            continue;
        };
        if let Ok(d) = client.describe_quorum() {
            if d.error.is_none() {
                return Ok((addr, d.current_voters.len()));
            }
        }
    }
    Err(format!(
        "no leader among {servers} (list the leader's address)"
    ))
}

/// `--ringraft-bin`, else `ringraft` in this executable's directory.
fn ringraft_binary(given: Option<&Path>) -> Result<PathBuf, String> {
    if let Some(path) = given {
        return if path.is_file() {
            Ok(path.to_path_buf())
        } else {
            Err(format!("--ringraft-bin {}: no such file", path.display()))
        };
    }
    let exe = std::env::current_exe().map_err(|e| format!("cannot locate this executable: {e}"))?;
    let path = exe.with_file_name("ringraft");
    if path.is_file() {
        Ok(path)
    } else {
        Err(format!(
            "{} not found: run `cargo build --release -p ringraft-tools -p ringraft-bench` \
             (or pass --ringraft-bin PATH)",
            path.display()
        ))
    }
}

/// A `ringraft serve` child: SIGKILLed and reaped on drop, and (PR_SET_PDEATHSIG) when this
/// process dies without dropping it.
struct NodeProcess {
    id: usize,
    addr: SocketAddr,
    child: Option<Child>,
    stderr: PathBuf,
}

impl Drop for NodeProcess {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

struct LocalCluster {
    // Declared before `root` so the processes are gone before their directories are removed.
    nodes: Vec<NodeProcess>,
    root: tempfile::TempDir,
}

/// Ports free at the time of asking (all held together so they differ).
fn free_ports(count: usize) -> Result<Vec<u16>, String> {
    let listeners = (0..count)
        .map(|_| TcpListener::bind("127.0.0.1:0"))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("no free port on 127.0.0.1: {e}"))?;
    listeners
        .iter()
        .map(|l| l.local_addr().map(|a| a.port()))
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())
}

impl LocalCluster {
    fn start(bin: &Path, args: &ClusterArgs) -> Result<Self, String> {
        let root = tempfile::Builder::new()
            .prefix("ringraft-bench-")
            .tempdir_in(std::env::temp_dir())
            .map_err(|e| format!("creating a temporary directory: {e}"))?;
        let ports = free_ports(args.nodes)?;
        let voters = ports
            .iter()
            .enumerate()
            .map(|(i, port)| format!("{}@127.0.0.1:{port}", i + 1))
            .collect::<Vec<_>>()
            .join(",");
        let mut cluster = LocalCluster {
            nodes: Vec::new(),
            root,
        };
        for (i, port) in ports.iter().enumerate() {
            let node = cluster.spawn(bin, args, i, *port, &voters)?;
            cluster.nodes.push(node);
        }
        Ok(cluster)
    }

    fn spawn(
        &self,
        bin: &Path,
        args: &ClusterArgs,
        index: usize,
        port: u16,
        voters: &str,
    ) -> Result<NodeProcess, String> {
        let id = index + 1;
        let dir = self.root.path().join(format!("node-{id}"));
        let config = self.root.path().join(format!("server-{id}.properties"));
        let stderr = self.root.path().join(format!("node-{id}.stderr"));
        std::fs::write(
            &config,
            format!(
                "broker.id={id}\ncluster.id={CLUSTER_ID}\nlisteners=PLAINTEXT://127.0.0.1:{port}\n\
                 log.dirs={}\nquorum.voters={voters}\n",
                dir.display()
            ),
        )
        .map_err(|e| format!("writing {}: {e}", config.display()))?;
        let stderr_file = std::fs::File::create(&stderr)
            .map_err(|e| format!("creating {}: {e}", stderr.display()))?;
        let mut command = Command::new(bin);
        command.arg("serve").arg("--config").arg(&config);
        if !args.raft_cpus.is_empty() {
            command
                .arg("--raft-cpu")
                .arg(args.raft_cpus[index % args.raft_cpus.len()].to_string());
        }
        if !args.log_cpus.is_empty() {
            command
                .arg("--log-cpu")
                .arg(args.log_cpus[index % args.log_cpus.len()].to_string());
        }
        command
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr_file);
        // Own process group: a terminal's Ctrl-C reaches only this process, which then stops
        // the nodes with SIGTERM and checks how they exit.
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        kill_with_parent(&mut command);
        let child = command
            .spawn()
            .map_err(|e| format!("starting {}: {e}", bin.display()))?;
        Ok(NodeProcess {
            id,
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            child: Some(child),
            stderr,
        })
    }

    /// Fails if a node has exited.
    fn check_running(&mut self) -> Result<(), String> {
        for i in 0..self.nodes.len() {
            let exited = self.nodes[i]
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten());
            if let Some(status) = exited {
                let id = self.nodes[i].id;
                return Err(format!(
                    "node {id} exited ({status}); its last stderr lines:\n{}",
                    self.stderr_tail(id)
                ));
            }
        }
        Ok(())
    }

    /// Polls DescribeQuorum until a node answers as the leader (bounded).
    fn wait_for_leader(&mut self) -> Result<SocketAddr, String> {
        let deadline = Instant::now() + LEADER_WAIT;
        while Instant::now() < deadline && !INTERRUPTED.load(Ordering::Relaxed) {
            self.check_running()?;
            for node in &self.nodes {
                let Ok(mut client) = BlockingClient::connect(node.addr, Duration::from_secs(1))
                else {
                    continue;
                };
                if let Ok(d) = client.describe_quorum() {
                    if d.error.is_none() && d.leader_id == node.id as i32 {
                        return Ok(node.addr);
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Err(format!("no leader elected within {LEADER_WAIT:?}"))
    }

    /// SIGTERM to every node, then a bounded wait; (id, status), None = had to be killed.
    fn stop(&mut self) -> Vec<(usize, Option<ExitStatus>)> {
        for node in &self.nodes {
            if let Some(child) = &node.child {
                // SAFETY: plain syscall on our own, not yet reaped, child.
                unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
            }
        }
        let deadline = Instant::now() + STOP_WAIT;
        self.nodes
            .iter_mut()
            .map(|node| {
                let mut status = None;
                while let Some(child) = node.child.as_mut() {
                    if let Ok(Some(s)) = child.try_wait() {
                        status = Some(s);
                        node.child = None;
                        break;
                    }
                    if Instant::now() >= deadline {
                        break; // the guard kills it
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
                (node.id, status)
            })
            .collect()
    }

    fn stderr_tail(&self, id: usize) -> String {
        let Some(node) = self.nodes.iter().find(|n| n.id == id) else {
            return String::new();
        };
        let text = std::fs::read_to_string(&node.stderr).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }
}

/// The child gets SIGKILL when this process dies, even by SIGKILL.
fn kill_with_parent(command: &mut Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        command.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}
