//! The `cluster` subcommand (and the default): starts N voters as real `ringraft serve`
//! processes on loopback (or joins a running cluster), drives Produce load at the leader and
//! reports committed records/s and commit latency.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use clap::Args;
use serde::Serialize;
use testkit::{ClientTls, Cluster, LeaderWait, Settings, Stderr};

use crate::catch_up::{self, CatchUpReport};
use crate::idle_conns::{self, IdleReport};
use crate::observers::{self, ObserversReport};
use crate::proc_sample::{self, ProcSample};
use crate::produce_load::{self, Interval, LoadConfig, LoadReport, WindowObserver};
use crate::svg_chart::{self, RatePoint};

pub(crate) const LEADER_WAIT: Duration = Duration::from_secs(30);
pub(crate) const STOP_WAIT: Duration = Duration::from_secs(15);
/// The started nodes' `RUST_LOG`: warnings, plus the counters line each node logs when it
/// stops.
pub(crate) const NODE_LOG: &str = "warn,ringraft::stats=info";
const CLUSTER_ID: &str = "ringraft-bench";

#[derive(Args, Debug, Clone)]
pub struct ClusterArgs {
    /// Voters to start on 127.0.0.1.
    #[arg(long, default_value_t = 3)]
    pub(crate) nodes: usize,
    /// A `key=value` handed to every started node as `ringraft serve --override` (repeatable),
    /// e.g. `log.segment.bytes=67108864`.
    #[arg(long = "node-override", value_name = "KEY=VALUE")]
    pub(crate) node_overrides: Vec<String>,
    /// Drive a running cluster (`host:port,...`; the leader is found among them) instead of
    /// starting one.
    #[arg(long)]
    pub(crate) bootstrap_server: Option<String>,
    /// The `ringraft` binary (default: next to this executable).
    #[arg(long)]
    pub(crate) ringraft_bin: Option<PathBuf>,
    /// Connections to the leader.
    #[arg(long, default_value_t = 16)]
    pub(crate) connections: usize,
    /// Threads that drive the connections, each waiting on its share of the sockets at once
    /// (connection i on thread i mod N); default: one per CPU this process may run on, at
    /// most one per connection.
    #[arg(long)]
    pub(crate) load_threads: Option<usize>,
    /// Produce requests in flight per connection (pipelined; answers matched by correlation id).
    #[arg(long, default_value_t = 1)]
    pub(crate) inflight: usize,
    /// Open loop: this many records/s in total, shared evenly by the connections, each request
    /// sent at its scheduled time (when the in-flight window allows) and its latency counted
    /// from that time. Without it: closed loop (a request goes out when one is answered).
    #[arg(long)]
    pub(crate) rate: Option<f64>,
    /// Bytes of each record's value.
    #[arg(long, default_value_t = 1024)]
    pub(crate) record_bytes: usize,
    /// Records per batch (one Produce request carries one batch).
    #[arg(long, default_value_t = 1)]
    pub(crate) batch_records: usize,
    /// -1 (all: committed on a majority), 1 (leader) or 0 (no response).
    #[arg(long, default_value_t = -1, allow_negative_numbers = true)]
    pub(crate) acks: i16,
    /// Seconds measured.
    #[arg(long, default_value_t = 10.0)]
    pub(crate) duration: f64,
    /// Seconds of load before measuring.
    #[arg(long, default_value_t = 1.0)]
    pub(crate) warmup: f64,
    /// CPUs for the nodes' raft threads (`0,1,...`): node i gets entry i mod the list's length.
    #[arg(long, value_delimiter = ',')]
    pub(crate) raft_cpus: Vec<usize>,
    /// CPUs for the nodes' log writer threads, handed out as --raft-cpus.
    #[arg(long, value_delimiter = ',')]
    pub(crate) log_cpus: Vec<usize>,
    /// CPUs for the load threads: thread i runs on entry i mod the list's length.
    #[arg(long, value_delimiter = ',')]
    pub(crate) bench_cpus: Vec<usize>,
    /// Write every figure as one JSON object to this file.
    #[arg(long)]
    pub(crate) json: Option<PathBuf>,
    /// Write an SVG with the latency percentile chart and throughput over time to this file.
    #[arg(long)]
    pub(crate) svg: Option<PathBuf>,
    /// Before the warm-up, commit at least this many MB of record values (256-record batches
    /// from 8 connections), so the log is larger than the leader's in-memory tail.
    #[arg(long, default_value_t = 0.0)]
    pub(crate) prefill_mb: f64,
    /// After the prefill, start one observer with an empty log (id `--nodes` + 1, after any
    /// `--observers`; bootstrap servers only): it replicates the log from offset 0 during the
    /// run, through log reads on the leader. The report says how far it got (`catch_up`).
    #[arg(long)]
    pub(crate) catch_up_observer: bool,
    /// Observers to start with the cluster (ids after the voters', `bootstrap.servers` only,
    /// empty logs), before the prefill and the load: they fetch the log from the leader through
    /// the whole run, as the brokers of a Kafka cluster follow the metadata quorum. Each is a
    /// `ringraft serve` process on this machine's cores, like the voters. The report gives each
    /// one's lag at the window's start and end (`observers`) and the leader's CPU per committed
    /// byte. At most 64.
    #[arg(long, default_value_t = 0)]
    pub(crate) observers: usize,
    /// With `--observers`: the lag (high watermark minus an observer's log end offset, in
    /// offsets) every observer must be within at the window's end for
    /// `observers.all_within_max_lag_at_end`.
    #[arg(long, default_value_t = crate::observers::DEFAULT_MAX_LAG)]
    pub(crate) observer_max_lag: i64,
    /// Before the load, open this many connections to the leader's client listener, each
    /// completing an ApiVersions exchange, and keep them open and idle through the run beside
    /// the loaded ones. Raises the soft open-file limit (RLIMIT_NOFILE) to the hard one first,
    /// for this process and the nodes it starts. The report (`idle_connections`) gives how many
    /// were opened, refused by the node (over its connection limit: 1024 open inbound
    /// connections of every kind, not configurable) or failed, how many were still open at the
    /// end, and the leader's RSS before, after opening them and at the end. A connection
    /// refused or failed stops the run before the load, one closed during the run fails it
    /// after the report. At most 65536.
    #[arg(long, default_value_t = 0)]
    pub(crate) idle_connections: usize,
    /// How the started cluster is secured: `voters-mtls` (each node a certificate from a CA made
    /// for the run, the controller listener requires them: a voter accepts quorum requests only
    /// from the replica they name; clients on a PLAINTEXT listener), `tls` (the same, and the
    /// load over TLS to an SSL client listener) or `plaintext` (one PLAINTEXT listener: anyone
    /// who reaches it can speak for any voter).
    #[arg(long, value_enum, default_value_t = ClusterSecurity::VotersMtls)]
    pub(crate) security: ClusterSecurity,
    /// Give every started node a `/metrics` listener (`metrics.listener` on a free port) and
    /// scrape them all every this many ms during the run (0: no listener).
    #[arg(long, default_value_t = 0)]
    pub(crate) metrics_scrape_ms: u64,
    /// With `--metrics-scrape-ms`: write the nodes' `/metrics` addresses to this file as a
    /// Prometheus file_sd target list, once they have started (bench/dashboard/capture.sh
    /// points a Prometheus server at it).
    #[arg(long)]
    pub(crate) prometheus_targets: Option<std::path::PathBuf>,
}

/// The metrics ports [`start_cluster`] handed out (with `--metrics-scrape-ms`), node by node.
static METRICS_PORTS: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ClusterSecurity {
    VotersMtls,
    Tls,
    Plaintext,
}

#[derive(Serialize)]
struct Report {
    /// With `--metrics-scrape-ms`: what the scraper did.
    #[serde(skip_serializing_if = "Option::is_none")]
    metrics_scrape: Option<crate::metrics_scrape::ScrapeReport>,
    records_per_sec: f64,
    mb_per_sec: f64,
    /// Open loop: from the intended send time (coordinated omission corrected).
    commit_latency_us: produce_load::Latency,
    /// Open loop only: from the actual send time.
    service_latency_us: Option<produce_load::Latency>,
    records: u64,
    requests: u64,
    elapsed_sec: f64,
    leader: String,
    leader_id: Option<i32>,
    started_cluster: bool,
    replication_factor: usize,
    acks: i16,
    fsync: bool,
    record_bytes: usize,
    batch_records: usize,
    connections: usize,
    inflight_per_connection: usize,
    /// Threads that drove the connections.
    load_threads: usize,
    /// "closed loop" or "open loop".
    load_mode: &'static str,
    /// Open loop's target, records/s across all connections; null in closed loop.
    rate_records_per_sec: Option<f64>,
    /// How the cluster was secured (null for a cluster not started here).
    security: Option<ClusterSecurity>,
    raft_cpus: Vec<usize>,
    log_cpus: Vec<usize>,
    bench_cpus: Vec<usize>,
    warmup_sec: f64,
    duration_sec: f64,
    interrupted: bool,
    loadavg: String,
    /// Leader CPU time (user + system, all its threads) over the measured window per record
    /// committed in it; null when this run did not start the cluster.
    leader_cpu_ns_per_record: Option<f64>,
    leader_cpu_sec: Option<f64>,
    /// CPU seconds of each node (by id) over the measured window.
    node_cpu_sec: Vec<Option<f64>>,
    /// VmRSS of each node (by id) at the start and the end of the measured window.
    node_rss_kib_start: Vec<Option<u64>>,
    node_rss_kib_end: Vec<Option<u64>>,
    /// CPU seconds of this load generator over the measured window.
    bench_cpu_sec: Option<f64>,
    intervals: Vec<Interval>,
    /// Every whole minute of the window, its latency over all its requests.
    minutes: Vec<crate::produce_load::Minute>,
    /// Exit status of every node this run started (after SIGTERM).
    node_exits: Vec<String>,
    /// Each started node's own counters over its whole life (warm-up included), from the
    /// `node stats` line it logs when it stops: wake-ups per batch, writer group sizes,
    /// tail-cache hit rate (docs/architecture.md, "Costs per commit").
    node_stats: BTreeMap<i32, BTreeMap<String, f64>>,
    /// The prefill and the catching-up observer (`--prefill-mb`, `--catch-up-observer`).
    catch_up: CatchUpReport,
    /// `--observers`: how many, and each one's lag at the window's start and end.
    observers: ObserversReport,
    /// Leader CPU time over the measured window per byte of record values committed in it
    /// (`leader_cpu_sec` / (`records` x `record_bytes`)), ns; null when this run did not start
    /// the cluster.
    leader_cpu_ns_per_byte: Option<f64>,
    /// The efficiency figure (docs/benchmarks.md, "Where the leader's time goes"): MB of record
    /// values committed in the window per CPU-second the voters this run started spent in it,
    /// summed over them (observers' CPU not counted); null when this run did not start them.
    committed_mb_per_voter_cpu_sec: Option<f64>,
    /// `--idle-connections` (null without).
    idle_connections: Option<IdleReport>,
}

/// /proc readings of the nodes (when this run started them) and of the load generator at the
/// start and the end of the measured window, and the leader's RSS at each interval.
#[derive(Default)]
struct NodeWatch {
    /// (node id, pid), by id.
    nodes: Vec<(i32, u32)>,
    leader_pid: Option<u32>,
    start: Vec<Option<ProcSample>>,
    end: Vec<Option<ProcSample>>,
    bench_start: Option<ProcSample>,
    bench_end: Option<ProcSample>,
    leader: Option<SocketAddr>,
    /// How DescribeQuorum reaches the leader (over TLS with `--security tls`).
    tls: Option<ClientTls>,
    catch_up: CatchUpReport,
    observers: ObserversReport,
}

impl NodeWatch {
    fn sample_all(&self) -> Vec<Option<ProcSample>> {
        self.nodes
            .iter()
            .map(|(_, pid)| proc_sample::sample(*pid))
            .collect()
    }

    /// CPU seconds of the voters (ids 1..=`voters`) over the window; None if one is missing.
    fn voters_cpu_sec(&self, voters: usize) -> Option<f64> {
        let indexes: Vec<usize> = (0..self.nodes.len())
            .filter(|&i| {
                usize::try_from(self.nodes[i].0).is_ok_and(|id| (1..=voters).contains(&id))
            })
            .collect();
        if indexes.len() != voters {
            return None;
        }
        indexes.iter().map(|&i| self.cpu_sec(i)).sum()
    }

    fn cpu_sec(&self, index: usize) -> Option<f64> {
        let (start, end) = (
            self.start.get(index)?.as_ref()?,
            self.end.get(index)?.as_ref()?,
        );
        Some(end.cpu.saturating_sub(start.cpu).as_secs_f64())
    }

    fn leader_index(&self) -> Option<usize> {
        let pid = self.leader_pid?;
        self.nodes.iter().position(|(_, p)| *p == pid)
    }
}

impl WindowObserver for NodeWatch {
    fn window_started(&mut self) {
        self.start = self.sample_all();
        self.bench_start = proc_sample::sample(std::process::id());
        if let Some(leader) = self.leader {
            self.catch_up.window_started(leader, self.tls.as_ref());
            self.observers.window_started(leader, self.tls.as_ref());
        }
    }

    fn interval(&mut self, interval: &mut Interval) {
        interval.leader_rss_kib = self
            .leader_pid
            .and_then(proc_sample::sample)
            .map(|s| s.rss_kib);
        interval.node_rss_kib = self
            .nodes
            .iter()
            .map(|&(_, pid)| proc_sample::sample(pid).map(|s| s.rss_kib))
            .collect();
    }

    fn window_ended(&mut self) {
        self.end = self.sample_all();
        self.bench_end = proc_sample::sample(std::process::id());
        if let Some(leader) = self.leader {
            self.catch_up.window_ended(leader, self.tls.as_ref());
            self.observers.window_ended(leader, self.tls.as_ref());
        }
    }
}

/// Set by SIGINT/SIGTERM: the load stops, the nodes are stopped, the figures so far printed.
pub(crate) static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::Relaxed);
}

pub(crate) fn install_signal_handlers() {
    let handler = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        libc::signal(libc::SIGINT, handler);
        libc::signal(libc::SIGTERM, handler);
    }
}

/// The cluster a run drives: one it started (and the leader's id), or a running one.
pub(crate) struct Target {
    pub(crate) cluster: Option<Cluster>,
    pub(crate) leader: SocketAddr,
    pub(crate) leader_id: Option<i32>,
    pub(crate) replication_factor: usize,
}

/// Starts the cluster `args` describe and waits for its leader, or finds the leader of the
/// running one `--bootstrap-server` names.
pub(crate) fn start_or_join(args: &ClusterArgs, rust_log: &str) -> Result<Target, String> {
    if let Some(servers) = &args.bootstrap_server {
        let (leader, replication_factor) = testkit::find_leader(servers, Duration::from_secs(5))?;
        return Ok(Target {
            cluster: None,
            leader,
            leader_id: None,
            replication_factor,
        });
    }
    let bin = ringraft_binary(args.ringraft_bin.as_deref())?;
    let mut started = start_cluster(&bin, args, rust_log)?;
    let id = started.wait_for_leader(&LeaderWait {
        fail_on_exit: true,
        interrupted: Some(&INTERRUPTED),
        ..LeaderWait::within(LEADER_WAIT)
    })?;
    Ok(Target {
        leader: started.addr(id),
        cluster: Some(started),
        leader_id: Some(id),
        replication_factor: args.nodes,
    })
}

pub fn run(args: ClusterArgs) -> Result<(), String> {
    validate(&args)?;
    install_signal_handlers();
    // Before any node starts: they inherit the raised limit.
    let nofile = if args.idle_connections > 0 {
        let (before, after) = idle_conns::raise_nofile_limit()?;
        idle_conns::check_fits(args.idle_connections, args.connections, after)?;
        if after != before {
            outln!(
                "raised the open-file limit (RLIMIT_NOFILE soft limit) from {before} to the \
                 hard limit, {after}, for this process and the nodes it starts"
            )
            .map_err(|e| crate::out::describe(&e))?;
        }
        Some((before, after))
    } else {
        None
    };
    let Target {
        mut cluster,
        leader,
        leader_id,
        replication_factor,
    } = start_or_join(&args, NODE_LOG)?;
    let tls = cluster.as_ref().and_then(|c| c.client_tls.clone());
    let mut observer_report = ObserversReport::new(Vec::new(), args.observer_max_lag);
    if let (true, Some(cluster)) = (args.observers > 0, cluster.as_mut()) {
        let (ids, listed_sec) =
            observers::start(cluster, args.nodes, args.observers, leader, &INTERRUPTED)?;
        outln!(
            "observers: {} started (ids {ids:?}), every one fetching after {listed_sec:.1} s",
            ids.len()
        )
        .map_err(|e| crate::out::describe(&e))?;
        observer_report = ObserversReport::new(ids, args.observer_max_lag);
        observer_report.listed_sec = Some(listed_sec);
    }
    let mut catch_up = CatchUpReport::default();
    if args.prefill_mb > 0.0 {
        (catch_up.prefill_mb, catch_up.prefill_sec) = catch_up::prefill(
            leader,
            args.record_bytes,
            args.prefill_mb,
            &INTERRUPTED,
            tls.clone(),
        )?;
    }
    if let (true, Some(cluster)) = (args.catch_up_observer, cluster.as_mut()) {
        catch_up.observer_id = Some(start_observer(cluster, args.nodes)? as usize);
    }
    let config = LoadConfig {
        leader,
        connections: args.connections,
        inflight: args.inflight,
        load_threads: args.load_threads(),
        rate: args.rate,
        record_bytes: args.record_bytes,
        batch_records: args.batch_records,
        acks: args.acks,
        warmup: Duration::from_secs_f64(args.warmup),
        duration: Duration::from_secs_f64(args.duration),
        bench_cpus: args.bench_cpus.clone(),
        tls: cluster.as_ref().and_then(|c| c.client_tls.clone()),
    };
    let mut watch = NodeWatch {
        leader: Some(leader),
        tls: tls.clone(),
        catch_up,
        observers: observer_report,
        ..NodeWatch::default()
    };
    if let Some(cluster) = &cluster {
        watch.nodes = cluster.pids();
        watch.leader_pid = watch
            .nodes
            .iter()
            .find(|(id, _)| Some(*id) == leader_id)
            .map(|&(_, pid)| pid);
    }
    let idle = nofile.map(|nofile| {
        idle_conns::open(
            leader,
            tls.as_ref(),
            args.idle_connections,
            watch.leader_pid,
            nofile,
            &INTERRUPTED,
        )
    });
    if let Some(idle) = &idle {
        let r = &idle.report;
        outln!(
            "idle connections: {} of {} opened in {:.1} s ({} refused by the node, {} failed, {} \
             not tried); leader RSS KiB {} before, {} after",
            r.opened,
            r.requested,
            r.open_sec,
            r.refused,
            r.failed,
            r.not_tried,
            opt(r.leader_rss_kib_before.map(|k| k.to_string())),
            opt(r.leader_rss_kib_after_open.map(|k| k.to_string())),
        )
        .map_err(|e| crate::out::describe(&e))?;
    }
    if let Some(shortfall) = idle.as_ref().and_then(|idle| idle.report.shortfall()) {
        // The node refuses connections past its limit, so the load's would be refused too.
        drop(idle);
        if let Some(cluster) = cluster.as_mut() {
            cluster.stop_all(STOP_WAIT);
        }
        return Err(format!(
            "{shortfall}; stopped before the load. A node's listener closes accepted \
             connections beyond its max.connections open ones (1024 by default; \
             --node-override max.connections=N raises it, docs/operations.md)"
        ));
    }
    // A closed stdout ends the run like an interrupt (the nodes are stopped, the files still
    // written); main then exits 141 without a message (docs/operations.md).
    let mut stdout_error = print_settings(&args, leader, replication_factor, cluster.is_some())
        .err()
        .inspect(|_| INTERRUPTED.store(true, Ordering::Relaxed));
    let scraper = (args.metrics_scrape_ms > 0).then(|| {
        let ports = METRICS_PORTS.lock().expect("not poisoned").clone();
        crate::metrics_scrape::Scraper::start(ports, Duration::from_millis(args.metrics_scrape_ms))
    });
    let load = produce_load::run(&config, &INTERRUPTED, &mut watch, |interval| {
        if stdout_error.is_none() {
            if let Err(error) = print_interval(interval) {
                stdout_error = Some(error);
                INTERRUPTED.store(true, Ordering::Relaxed);
            }
        }
    });
    let scrapes = scraper.map(crate::metrics_scrape::Scraper::finish);
    // Before the nodes stop: the idle connections still open? the observers at the end?
    let idle = idle.map(|idle| idle.finish(watch.leader_pid));
    if load.is_ok() {
        watch
            .observers
            .wait_caught_up(leader, tls.as_ref(), &INTERRUPTED);
    }
    // Stop the nodes whatever the load's outcome; their exit status is part of the result.
    let node_exits = match cluster.as_mut() {
        Some(cluster) => cluster.stop_all(STOP_WAIT),
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
    let mut report = Report::new(
        &args,
        &load,
        leader,
        replication_factor,
        &watch,
        &node_exits,
    );
    if let Some(cluster) = &cluster {
        report.node_stats = node_stats(cluster);
    }
    report.idle_connections = idle;
    if let Some(scrapes) = &scrapes {
        println!(
            "metrics: {} scrapes of {} nodes every {} ms ({} failed), {:.0} us and {:.0} bytes each",
            scrapes.scrapes,
            args.nodes,
            scrapes.interval_ms,
            scrapes.failures,
            scrapes.mean_scrape_us,
            scrapes.mean_bytes
        );
    }
    report.metrics_scrape = scrapes;
    if stdout_error.is_none() {
        stdout_error = print_summary(&report).err();
    }
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(&report).expect("report serialises");
        std::fs::write(path, text).map_err(|e| format!("writing {}: {e}", path.display()))?;
    }
    if let Some(path) = &args.svg {
        let svg = render_svg(&report, &load);
        std::fs::write(path, svg).map_err(|e| format!("writing {}: {e}", path.display()))?;
    }
    check_exits(&node_exits, cluster.as_ref())?;
    if let Some(shortfall) = report
        .idle_connections
        .as_ref()
        .and_then(IdleReport::shortfall)
    {
        return Err(shortfall);
    }
    if let Some(error) = stdout_error {
        return Err(crate::out::describe(&error));
    }
    if report.interrupted {
        return Err("interrupted: the figures above cover only the time measured".into());
    }
    Ok(())
}

impl ClusterArgs {
    /// `--load-threads`, or one per CPU this process may run on (at most one per connection):
    /// a thread per connection measured no faster in closed loop and, in open loop, added
    /// about a millisecond to the median as its threads woke for their sends
    /// (docs/benchmarks.md, "A fourth lever: fewer load threads").
    pub(crate) fn load_threads(&self) -> usize {
        self.load_threads.unwrap_or_else(|| {
            let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
            cpus.min(self.connections)
        })
    }
}

pub(crate) fn validate(args: &ClusterArgs) -> Result<(), String> {
    if args.connections == 0 || args.batch_records == 0 || args.nodes == 0 || args.inflight == 0 {
        return Err(
            "--connections, --inflight, --batch-records and --nodes must be at least 1".into(),
        );
    }
    if let Some(threads) = args.load_threads {
        if !(1..=args.connections).contains(&threads) {
            return Err(format!(
                "--load-threads {threads}: from 1 to --connections ({})",
                args.connections
            ));
        }
    }
    if let Some(rate) = args.rate {
        if !(rate.is_finite() && rate > 0.0) {
            return Err(format!("--rate {rate}: records/s must be positive"));
        }
    }
    if ![-1, 0, 1].contains(&args.acks) {
        return Err(format!("--acks {}: use -1, 0 or 1", args.acks));
    }
    if !(args.duration > 0.0 && args.warmup >= 0.0) {
        return Err("--duration must be positive and --warmup not negative".into());
    }
    if !(args.prefill_mb >= 0.0 && args.prefill_mb.is_finite()) {
        return Err(format!(
            "--prefill-mb {}: use a size in MB",
            args.prefill_mb
        ));
    }
    if args.catch_up_observer && args.bootstrap_server.is_some() {
        return Err("--catch-up-observer starts a node: not with --bootstrap-server".into());
    }
    if args.observers > 0 && args.bootstrap_server.is_some() {
        return Err("--observers starts nodes: not with --bootstrap-server".into());
    }
    if args.observers > observers::MAX_OBSERVERS || args.observer_max_lag < 0 {
        return Err(format!(
            "--observers: at most {} (each a node process on this machine); \
             --observer-max-lag: not negative",
            observers::MAX_OBSERVERS
        ));
    }
    if args.idle_connections > idle_conns::MAX_IDLE_CONNECTIONS {
        return Err(format!(
            "--idle-connections {}: at most {}",
            args.idle_connections,
            idle_conns::MAX_IDLE_CONNECTIONS
        ));
    }
    Ok(())
}

impl Report {
    fn new(
        args: &ClusterArgs,
        load: &LoadReport,
        leader: SocketAddr,
        replication_factor: usize,
        watch: &NodeWatch,
        node_exits: &[(i32, Option<ExitStatus>)],
    ) -> Self {
        let leader_index = watch.leader_index();
        let leader_cpu_sec = leader_index.and_then(|i| watch.cpu_sec(i));
        let rss = |samples: &[Option<ProcSample>]| -> Vec<Option<u64>> {
            samples.iter().map(|s| s.map(|s| s.rss_kib)).collect()
        };
        Self {
            metrics_scrape: None,
            records_per_sec: load.records_per_sec,
            mb_per_sec: load.mb_per_sec,
            commit_latency_us: load.latency_us.clone(),
            service_latency_us: load.service_latency_us.clone(),
            records: load.records,
            requests: load.requests,
            elapsed_sec: load.elapsed_sec,
            leader: leader.to_string(),
            leader_id: leader_index.map(|i| watch.nodes[i].0),
            started_cluster: args.bootstrap_server.is_none(),
            replication_factor,
            acks: args.acks,
            fsync: true,
            record_bytes: args.record_bytes,
            batch_records: args.batch_records,
            connections: args.connections,
            inflight_per_connection: args.inflight,
            load_threads: args.load_threads(),
            load_mode: if args.rate.is_some() {
                "open loop"
            } else {
                "closed loop"
            },
            rate_records_per_sec: args.rate,
            security: args.bootstrap_server.is_none().then_some(args.security),
            raft_cpus: args.raft_cpus.clone(),
            log_cpus: args.log_cpus.clone(),
            bench_cpus: args.bench_cpus.clone(),
            warmup_sec: args.warmup,
            duration_sec: args.duration,
            interrupted: INTERRUPTED.load(Ordering::Relaxed),
            loadavg: std::fs::read_to_string("/proc/loadavg")
                .map(|s| s.trim().to_string())
                .unwrap_or_default(),
            leader_cpu_ns_per_record: leader_cpu_sec
                .filter(|_| load.records > 0)
                .map(|sec| sec * 1e9 / load.records as f64),
            leader_cpu_ns_per_byte: leader_cpu_sec
                .filter(|_| load.records > 0 && args.record_bytes > 0)
                .map(|sec| sec * 1e9 / (load.records as f64 * args.record_bytes as f64)),
            committed_mb_per_voter_cpu_sec: watch
                .voters_cpu_sec(args.nodes)
                .filter(|&sec| sec > 0.0)
                .map(|sec| (load.records as f64 * args.record_bytes as f64) / 1e6 / sec),
            leader_cpu_sec,
            node_cpu_sec: (0..watch.nodes.len()).map(|i| watch.cpu_sec(i)).collect(),
            node_rss_kib_start: rss(&watch.start),
            node_rss_kib_end: rss(&watch.end),
            bench_cpu_sec: match (watch.bench_start, watch.bench_end) {
                (Some(start), Some(end)) => Some(end.cpu.saturating_sub(start.cpu).as_secs_f64()),
                _ => None,
            },
            intervals: load.intervals.clone(),
            minutes: load.minutes.clone(),
            node_exits: describe_exits(node_exits),
            node_stats: BTreeMap::new(),
            catch_up: watch.catch_up.clone(),
            observers: watch.observers.clone(),
            idle_connections: None,
        }
    }
}

/// How each node's process ended, one line per node for the report.
pub(crate) fn describe_exits(node_exits: &[(i32, Option<ExitStatus>)]) -> Vec<String> {
    node_exits
        .iter()
        .map(|(id, status)| match status {
            Some(status) => format!("node {id}: {status}"),
            None => format!("node {id}: killed (did not stop on SIGTERM)"),
        })
        .collect()
}

fn print_settings(
    args: &ClusterArgs,
    leader: SocketAddr,
    rf: usize,
    started: bool,
) -> std::io::Result<()> {
    let origin = if started {
        format!("{rf} local voters started by this run")
    } else {
        format!("running cluster of {rf} voters")
    };
    outln!(
        "leader {leader} ({origin}); warm-up {} s, measuring {} s",
        args.warmup,
        args.duration
    )?;
    outln!("  sec   records/s      MB/s   p50 us   p99 us  leader RSS MiB")?;
    Ok(())
}

pub(crate) fn print_interval(interval: &Interval) -> std::io::Result<()> {
    let rss = interval
        .leader_rss_kib
        .map(|kib| format!("{:.1}", kib as f64 / 1024.0))
        .unwrap_or_else(|| "-".into());
    outln!(
        "{:>5.0} {:>11.0} {:>9.1} {:>8} {:>8} {rss:>15}",
        interval.end_sec,
        interval.records_per_sec,
        interval.mb_per_sec,
        interval.latency_us.p50,
        interval.latency_us.p99
    )?;
    Ok(())
}

fn acks_text(acks: i16) -> &'static str {
    match acks {
        -1 => "acks=-1 (all: committed on a majority)",
        1 => "acks=1 (leader only)",
        _ => "acks=0 (no response: latency is the send only)",
    }
}

fn mode_text(r: &Report) -> String {
    match r.rate_records_per_sec {
        Some(rate) => {
            format!("open loop at {rate} records/s (latency from the intended send time)")
        }
        None => "closed loop".into(),
    }
}

fn pinning_text(r: &Report) -> String {
    let list = |cpus: &[usize]| {
        if cpus.is_empty() {
            "unpinned".to_string()
        } else {
            format!("{cpus:?}")
        }
    };
    format!(
        "raft threads {}, log writers {} (node i gets entry i mod length), load threads {}",
        list(&r.raft_cpus),
        list(&r.log_cpus),
        list(&r.bench_cpus)
    )
}

/// The SVG's title and settings lines, then the charts.
fn render_svg(r: &Report, load: &LoadReport) -> String {
    let title = format!(
        "ringraft-bench: {:.0} records/s, {:.1} MB/s, commit latency p50 {} us, p99 {} us",
        r.records_per_sec, r.mb_per_sec, r.commit_latency_us.p50, r.commit_latency_us.p99
    );
    let settings = vec![
        format!(
            "{}, fsync on, replication factor {}",
            acks_text(r.acks),
            r.replication_factor
        ),
        format!(
            "{} B records x {} per batch, {} connections x {} in flight on {} load threads, {}",
            r.record_bytes,
            r.batch_records,
            r.connections,
            r.inflight_per_connection,
            r.load_threads,
            mode_text(r)
        ),
        format!("pinning: {}", pinning_text(r)),
        format!(
            "measured {:.1} s after {} s of warm-up; loadavg {}",
            r.elapsed_sec, r.warmup_sec, r.loadavg
        ),
    ];
    let rate: Vec<RatePoint> = load
        .intervals
        .iter()
        .map(|i| RatePoint {
            start_sec: i.end_sec - i.seconds,
            end_sec: i.end_sec,
            records_per_sec: i.records_per_sec,
        })
        .collect();
    svg_chart::render(&title, &settings, &load.histogram, &rate)
}

fn print_summary(r: &Report) -> std::io::Result<()> {
    let acks = acks_text(r.acks);
    outln!(
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
    )?;
    let l = &r.commit_latency_us;
    outln!(
        "  commit latency us: p50 {}  p99 {}  p99.9 {}  max {}  mean {:.0}",
        l.p50,
        l.p99,
        l.p999,
        l.max,
        l.mean
    )?;
    outln!(
        "  durability: {acks}, fsync on (every batch fdatasync'd before it counts on a node); \
         replication factor {}",
        r.replication_factor
    )?;
    if let Some(rate) = r.rate_records_per_sec {
        if r.records_per_sec < 0.9 * rate {
            outln!(
                "  note: {:.0} records/s delivered of the {rate} asked for: the cluster (or \
                 {} connections x {} in flight) cannot keep up, so requests fall ever further \
                 behind their schedule and the latency from the intended send time grows with \
                 the run's length",
                r.records_per_sec,
                r.connections,
                r.inflight_per_connection
            )?;
        }
    }
    if let Some(s) = &r.service_latency_us {
        outln!(
            "  from the actual send: p50 {}  p99 {}  p99.9 {}  max {}  mean {:.0}",
            s.p50,
            s.p99,
            s.p999,
            s.max,
            s.mean
        )?;
    }
    for m in &r.minutes {
        let l = &m.latency_us;
        outln!(
            "  minute {}: {:.0} records/s, latency us p50 {}  p99 {}  p99.9 {}  max {}",
            m.minute,
            m.records_per_sec,
            l.p50,
            l.p99,
            l.p999,
            l.max
        )?;
    }
    outln!(
        "  load: {} B records, {} per batch, {} connections, {} in flight each, {} load threads, {}",
        r.record_bytes,
        r.batch_records,
        r.connections,
        r.inflight_per_connection,
        r.load_threads,
        mode_text(r)
    )?;
    outln!(
        "  pinning: {}; leader {}; loadavg {}",
        pinning_text(r),
        r.leader,
        r.loadavg
    )?;
    if let (Some(ns), Some(sec)) = (r.leader_cpu_ns_per_record, r.leader_cpu_sec) {
        outln!(
            "  leader CPU: {ns:.0} ns per committed record, {} ns per committed byte ({sec:.2} s \
             in the window)",
            opt(r.leader_cpu_ns_per_byte.map(|b| format!("{b:.2}")))
        )?;
    }
    if let Some(mb) = r.committed_mb_per_voter_cpu_sec {
        outln!("  efficiency: {mb:.2} MB committed per CPU-second of the voters")?;
    }
    let fmt_list = |values: Vec<String>| values.join(", ");
    if !r.node_cpu_sec.is_empty() {
        outln!(
            "  node CPU s: [{}]; load generator CPU s: {}",
            fmt_list(
                r.node_cpu_sec
                    .iter()
                    .map(|c| opt(c.map(|c| format!("{c:.2}"))))
                    .collect()
            ),
            opt(r.bench_cpu_sec.map(|c| format!("{c:.2}")))
        )?;
        let rss = r
            .node_rss_kib_start
            .iter()
            .zip(&r.node_rss_kib_end)
            .map(|(a, b)| {
                format!(
                    "{} -> {}",
                    opt(a.map(|k| k.to_string())),
                    opt(b.map(|k| k.to_string()))
                )
            })
            .collect();
        outln!("  node RSS KiB (window start -> end): [{}]", fmt_list(rss))?;
    }
    if let Some(line) = r.catch_up.summary() {
        outln!("{line}")?;
    }
    if let Some(line) = r.observers.summary() {
        outln!("{line}")?;
    }
    if let Some(idle) = &r.idle_connections {
        outln!("{}", idle.summary())?;
    }
    for exit in &r.node_exits {
        outln!("  {exit}")?;
    }
    for (id, stats) in &r.node_stats {
        let get = |key: &str| stats.get(key).copied().unwrap_or(f64::NAN);
        outln!(
            "  node {id} (whole run): {:.2} wake-ups per stored batch, {:.1} batches and {:.0} \
             bytes per write group, tail-cache hit rate {:.4}, slowest durable group write {:.1} \
             ms, {} over 100 ms",
            get("wakeups_per_batch"),
            get("batches_per_group"),
            get("bytes_per_group"),
            get("tail_hit_rate"),
            get("max_group_us") / 1000.0,
            get("slow_groups"),
        )?;
    }
    Ok(())
}

pub(crate) fn opt(value: Option<String>) -> String {
    value.unwrap_or_else(|| "-".into())
}

pub(crate) fn check_exits(
    exits: &[(i32, Option<ExitStatus>)],
    cluster: Option<&Cluster>,
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

/// `--ringraft-bin`, else `ringraft` in this executable's directory.
pub(crate) fn ringraft_binary(given: Option<&Path>) -> Result<PathBuf, String> {
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

/// Starts `args.nodes` voters on 127.0.0.1, each with the `--node-override`s and its share of
/// `--raft-cpus` and `--log-cpus`, its stderr in a file of the cluster's directory.
pub(crate) fn start_cluster(
    bin: &Path,
    args: &ClusterArgs,
    rust_log: &str,
) -> Result<Cluster, String> {
    let settings = Settings {
        cluster_id: CLUSTER_ID.into(),
        dir_prefix: "ringraft-bench-".into(),
        rust_log: rust_log.into(),
        overrides: args.node_overrides.clone(),
        raft_cpus: args.raft_cpus.clone(),
        log_cpus: args.log_cpus.clone(),
        tail_lines: 20,
        tail_from_panic: false,
        security: match args.security {
            ClusterSecurity::VotersMtls => testkit::Security::MutualTls,
            ClusterSecurity::Tls => testkit::Security::Tls,
            ClusterSecurity::Plaintext => testkit::Security::Plaintext,
        },
        ..Settings::new(bin)
    };
    let mut cluster = Cluster::create(settings, args.nodes)?;
    if args.metrics_scrape_ms == 0 {
        cluster.start_all(Stderr::File)?;
        return Ok(cluster);
    }
    let ports = testkit::free_ports(args.nodes)?;
    let ids: Vec<i32> = cluster.nodes.iter().map(|n| n.id).collect();
    for (id, port) in ids.into_iter().zip(&ports) {
        let setting = format!("metrics.listener=http://127.0.0.1:{port}");
        cluster.start(id, &[setting.as_str()], Stderr::File)?;
    }
    if let Some(path) = &args.prometheus_targets {
        write_prometheus_targets(path, &ports)?;
    }
    *METRICS_PORTS.lock().expect("not poisoned") = ports;
    Ok(cluster)
}

/// A Prometheus file_sd list of the nodes' metrics listeners, replaced atomically (Prometheus
/// reads the file whenever it changes).
fn write_prometheus_targets(path: &Path, ports: &[u16]) -> Result<(), String> {
    let targets: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
    let list = serde_json::json!([{ "targets": targets, "labels": { "job": "ringraft" } }]);
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, list.to_string())
        .and_then(|()| std::fs::rename(&tmp, path))
        .map_err(|e| format!("--prometheus-targets {}: {e}", path.display()))
}

/// Starts an observer (id = the nodes so far + 1) with an empty log that knows the voters (the
/// first `voters` nodes) only as bootstrap servers; returns its id. `--catch-up-observer` and
/// `--observers` both start theirs here.
pub(crate) fn start_observer(cluster: &mut Cluster, voters: usize) -> Result<i32, String> {
    let bootstrap = cluster
        .nodes
        .iter()
        .take(voters)
        .map(|n| n.controller_addr.to_string())
        .collect::<Vec<_>>()
        .join(",");
    let id = cluster.nodes.len() as i32 + 1;
    let cluster_id = cluster.settings.cluster_id.clone();
    cluster.add_node(
        id,
        &format!("node-{id}"),
        &cluster_id,
        &format!("bootstrap.servers={bootstrap}"),
    )?;
    cluster.start(id, &[], Stderr::File)?;
    Ok(id)
}

/// The counters of each node's last `node stats` line (logged at a graceful stop).
pub(crate) fn node_stats(cluster: &Cluster) -> BTreeMap<i32, BTreeMap<String, f64>> {
    cluster
        .nodes
        .iter()
        .filter_map(|node| {
            let text = std::fs::read_to_string(cluster.stderr_path(node.id)).ok()?;
            let line = text.lines().rev().find(|l| l.contains(NODE_STATS_MARKER))?;
            Some((node.id, parse_node_stats(line)))
        })
        .collect()
}

/// What the node's graceful-stop counters line contains (net::node::counters).
const NODE_STATS_MARKER: &str = "node stats: ";

/// The `key=value` pairs after the marker whose values are numbers.
fn parse_node_stats(line: &str) -> BTreeMap<String, f64> {
    let Some(start) = line.find(NODE_STATS_MARKER) else {
        return BTreeMap::new();
    };
    line[start + NODE_STATS_MARKER.len()..]
        .split_whitespace()
        .filter_map(|pair| {
            let (key, value) = pair.split_once('=')?;
            Some((key.to_string(), value.parse::<f64>().ok()?))
        })
        .collect()
}

#[cfg(test)]
mod node_stats_tests {
    use super::*;

    #[test]
    fn parses_the_numbers_after_the_marker() {
        let line = "2026-11-30T15:00:00Z  INFO net::node::runtime: node stats: wakeups=10 \
                    tail_hit_rate=0.9950 batches_per_group=3.50 node=2";
        let stats = parse_node_stats(line);
        assert_eq!(stats.get("wakeups"), Some(&10.0));
        assert_eq!(stats.get("tail_hit_rate"), Some(&0.995));
        assert_eq!(stats.get("batches_per_group"), Some(&3.5));
        assert_eq!(stats.len(), 4);
        assert!(parse_node_stats("no marker here").is_empty());
    }
}
