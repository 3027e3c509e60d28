//! The `consume` subcommand: consumers reading `__cluster_metadata`-0 with Fetch, alone or beside
//! the cluster benchmark's produce load, in phases on one cluster (docs/benchmarks.md,
//! "Consumers reading the log"). It starts the cluster (or joins one), fills the log
//! (`--prefill-mb`), then runs `--phases` in order, `--rounds` times:
//! - `produce`: the produce load alone (commit latency);
//! - `produce-consume`: the same load while the consumers read from `--from`;
//! - `consume`: the consumers alone for the warm-up and the window;
//! - `consume-all`: the consumers alone, each from `--from` to the high watermark, timed;
//! - `kcat-all`: `kcat -C -o beginning -e` over the whole log, timed, as a second opinion.
//!
//! Before each phase with readers the leader's segment files are dropped from the page cache
//! (`posix_fadvise(DONTNEED)`, on a cluster started here; not with `--no-evict`), so every phase
//! reads the disk as the first did, whatever earlier phases read.

use std::collections::BTreeMap;
use std::io::{BufRead, Read};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use clap::Args;
use serde::Serialize;
use testkit::Cluster;

use crate::catch_up;
use crate::cluster_bench::{self, ClusterArgs, ClusterSecurity, Target, INTERRUPTED, STOP_WAIT};
use crate::consume_load::{ConsumeConfig, ConsumeFigures, Consumers, Snapshot, StartAt};
use crate::proc_sample::{self, ProcSample};
use crate::produce_load::{self, Interval, LoadConfig, WindowObserver};

/// How often a consume phase looks at its consumers (errors, the end of the log).
const POLL: Duration = Duration::from_millis(20);
const MAX_ROUNDS: usize = 100;
/// Longest fetch wait accepted (Kafka's consumers default to 500 ms).
const MAX_FETCH_WAIT_MS: i32 = 30_000;
/// The started nodes' `RUST_LOG`: the cluster benchmark's, and the role changes (elections
/// stop the consumers with NOT_LEADER_OR_FOLLOWER, and their stderr then says when).
const NODE_LOG: &str = "warn,ringraft::stats=info,net::node::runtime=info";
/// Bytes of kcat's stderr kept for an error message.
const KCAT_STDERR_BYTES: u64 = 16 << 10;

#[derive(Args, Debug, Clone)]
pub struct ConsumeArgs {
    /// The cluster and the produce load of the `produce` phases, as for `cluster`.
    #[command(flatten)]
    cluster: ClusterArgs,
    /// Consumers, each with its own connection and thread, each reading the partition from
    /// `--from` on its own.
    #[arg(long, default_value_t = 1)]
    consumers: usize,
    /// Where each consumer starts: `earliest` (the log start, ListOffsets -2), `latest` (the
    /// high watermark, ListOffsets -1) or an offset.
    #[arg(long, default_value = "earliest")]
    from: StartAt,
    /// Each Fetch's MaxWaitMs (Kafka's `fetch.max.wait.ms`).
    #[arg(long, default_value_t = 500)]
    fetch_max_wait_ms: i32,
    /// Each Fetch's MinBytes (`fetch.min.bytes`).
    #[arg(long, default_value_t = 1)]
    fetch_min_bytes: i32,
    /// Each Fetch's MaxBytes (`fetch.max.bytes`).
    #[arg(long, default_value_t = 52_428_800)]
    fetch_max_bytes: i32,
    /// The partition's PartitionMaxBytes (`max.partition.fetch.bytes`).
    #[arg(long, default_value_t = 1_048_576)]
    partition_max_bytes: i32,
    /// Phases, run in this order in every round: produce, produce-consume, consume,
    /// consume-all, kcat-all.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "consume-all")]
    phases: Vec<Phase>,
    /// Times the phase list is run.
    #[arg(long, default_value_t = 1)]
    rounds: usize,
    /// Longest a `consume-all` or `kcat-all` phase may take, seconds.
    #[arg(long, default_value_t = 600.0)]
    to_end_timeout: f64,
    /// Seconds of pause before each phase, after a sync(2), so the disk settles.
    #[arg(long, default_value_t = 3.0)]
    settle: f64,
    /// Leave the page cache as earlier phases left it (by default the leader's segments are
    /// dropped from it before each phase that reads, so each reads the disk).
    #[arg(long)]
    no_evict: bool,
    /// Do not wait, after the prefill, for every voter to reach the high watermark. A voter
    /// that fell behind the leader's in-memory tail during the prefill catches up through log
    /// reads from the same read budget as the consumers, so by default the phases start only
    /// when none is behind (at most `--to-end-timeout` seconds).
    #[arg(long)]
    no_catch_up_wait: bool,
    /// The kcat binary of the `kcat-all` phase.
    #[arg(long, default_value = "kcat")]
    kcat: PathBuf,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    Produce,
    ProduceConsume,
    Consume,
    ConsumeAll,
    KcatAll,
}

impl Phase {
    fn name(self) -> &'static str {
        match self {
            Phase::Produce => "produce",
            Phase::ProduceConsume => "produce-consume",
            Phase::Consume => "consume",
            Phase::ConsumeAll => "consume-all",
            Phase::KcatAll => "kcat-all",
        }
    }

    fn reads(self) -> bool {
        self != Phase::Produce
    }
}

/// The produce side of a phase.
#[derive(Debug, Clone, Serialize)]
struct ProduceFigures {
    records: u64,
    records_per_sec: f64,
    /// Record value bytes, 10^6 per MB.
    mb_per_sec: f64,
    commit_latency_us: produce_load::Latency,
}

/// What kcat read.
#[derive(Debug, Clone, Serialize)]
struct KcatFigures {
    /// Messages printed (data records: kcat skips control records).
    records: u64,
    first_offset: Option<i64>,
    last_offset: Option<i64>,
    records_per_sec: f64,
    /// kcat's own CPU (user + system).
    cpu_sec: f64,
}

#[derive(Debug, Clone, Serialize)]
struct PhaseReport {
    round: usize,
    phase: Phase,
    /// The measured window (consume-all, kcat-all: from the first request to the end).
    elapsed_sec: f64,
    produce: Option<ProduceFigures>,
    consume: Option<ConsumeFigures>,
    kcat: Option<KcatFigures>,
    /// CPU seconds of each node (by id), of the leader, and of this process over the window.
    node_cpu_sec: Vec<Option<f64>>,
    leader_cpu_sec: Option<f64>,
    bench_cpu_sec: Option<f64>,
    /// /proc/loadavg at the window's end.
    loadavg: String,
    /// Bytes of the leader's segment files dropped from the page cache before the phase.
    evicted_bytes: Option<u64>,
    /// The quorum as the leader described it just before the phase.
    quorum_before: Option<QuorumView>,
}

/// The leader's DescribeQuorum: its epoch, the high watermark and how far each voter's log
/// end is behind it (a voter behind the leader's in-memory tail is served by log reads, from
/// the same read budget as the consumers).
#[derive(Debug, Clone, Serialize)]
struct QuorumView {
    leader_id: i32,
    leader_epoch: i32,
    high_watermark: i64,
    /// (voter id, high watermark - its log end offset).
    voter_lag: Vec<(i32, i64)>,
}

fn describe_quorum(leader: SocketAddr, tls: Option<&testkit::ClientTls>) -> Option<QuorumView> {
    let timeout = Duration::from_secs(5);
    let mut client = match tls {
        Some(tls) => tls.connect(leader, timeout).ok()?,
        None => net::client::BlockingClient::connect(leader, timeout).ok()?,
    };
    let quorum = client.describe_quorum().ok()?;
    quorum.error.is_none().then(|| QuorumView {
        leader_id: quorum.leader_id,
        leader_epoch: quorum.leader_epoch,
        high_watermark: quorum.high_watermark,
        voter_lag: quorum
            .current_voters
            .iter()
            .map(|v| (v.replica_id, quorum.high_watermark - v.log_end_offset))
            .collect(),
    })
}

/// Within one round: the produce-consume phase against the produce phase.
#[derive(Debug, Clone, Serialize)]
struct RoundRatio {
    round: usize,
    commit_p50_ratio: f64,
    commit_p99_ratio: f64,
    produce_records_per_sec_ratio: f64,
}

#[derive(Debug, Serialize)]
struct ConsumeReport {
    leader: String,
    leader_id: Option<i32>,
    started_cluster: bool,
    replication_factor: usize,
    security: Option<ClusterSecurity>,
    /// `--node-override`s of the started nodes (e.g. `log.read.max.bytes.per.sec=0`).
    node_overrides: Vec<String>,
    /// The leader's segments dropped from the page cache before each reading phase.
    evict_page_cache: bool,
    consumers: usize,
    from: StartAt,
    fetch_max_wait_ms: i32,
    fetch_min_bytes: i32,
    fetch_max_bytes: i32,
    partition_max_bytes: i32,
    /// The produce load of the produce phases.
    connections: usize,
    inflight_per_connection: usize,
    rate_records_per_sec: Option<f64>,
    record_bytes: usize,
    batch_records: usize,
    acks: i16,
    warmup_sec: f64,
    duration_sec: f64,
    prefill_mb: f64,
    prefill_sec: f64,
    /// After the prefill: how long until every voter had reached the high watermark (null
    /// with `--no-catch-up-wait` or no prefill).
    voters_catch_up_sec: Option<f64>,
    phases: Vec<PhaseReport>,
    ratios: Vec<RoundRatio>,
    interrupted: bool,
    node_exits: Vec<String>,
    node_stats: BTreeMap<i32, BTreeMap<String, f64>>,
}

pub fn run(args: ConsumeArgs) -> Result<(), String> {
    validate(&args)?;
    cluster_bench::install_signal_handlers();
    let Target {
        mut cluster,
        leader,
        leader_id,
        replication_factor,
    } = cluster_bench::start_or_join(&args.cluster, NODE_LOG)?;
    let result = run_on(&args, cluster.as_ref(), leader, leader_id);
    let node_exits = match cluster.as_mut() {
        Some(cluster) => cluster.stop_all(STOP_WAIT),
        None => Vec::new(),
    };
    let exits = cluster_bench::check_exits(&node_exits, cluster.as_ref());
    let (phases, prefill) = match result {
        Ok(done) => done,
        Err(error) => {
            return Err(match (exits, cluster.as_ref()) {
                (Err(exits), _) => format!("{error}\n{exits}"),
                // A consumer or the load failed with every node up: what the nodes logged
                // (an election, a slow disk) is the likely reason.
                (Ok(()), Some(cluster)) => {
                    format!(
                        "{error}\nthe nodes' last stderr lines:\n{}",
                        cluster.stderr_tails()
                    )
                }
                (Ok(()), None) => error,
            });
        }
    };
    let report = ConsumeReport {
        leader: leader.to_string(),
        leader_id,
        started_cluster: cluster.is_some(),
        replication_factor,
        security: cluster.is_some().then_some(args.cluster.security),
        node_overrides: args.cluster.node_overrides.clone(),
        evict_page_cache: cluster.is_some() && !args.no_evict,
        consumers: args.consumers,
        from: args.from,
        fetch_max_wait_ms: args.fetch_max_wait_ms,
        fetch_min_bytes: args.fetch_min_bytes,
        fetch_max_bytes: args.fetch_max_bytes,
        partition_max_bytes: args.partition_max_bytes,
        connections: args.cluster.connections,
        inflight_per_connection: args.cluster.inflight,
        rate_records_per_sec: args.cluster.rate,
        record_bytes: args.cluster.record_bytes,
        batch_records: args.cluster.batch_records,
        acks: args.cluster.acks,
        warmup_sec: args.cluster.warmup,
        duration_sec: args.cluster.duration,
        prefill_mb: prefill.mb,
        prefill_sec: prefill.sec,
        voters_catch_up_sec: prefill.voters_catch_up_sec,
        ratios: ratios(&phases),
        phases,
        interrupted: INTERRUPTED.load(Ordering::Relaxed),
        node_exits: cluster_bench::describe_exits(&node_exits),
        node_stats: cluster
            .as_ref()
            .map(cluster_bench::node_stats)
            .unwrap_or_default(),
    };
    let printed = print_summary(&report);
    if let Some(path) = &args.cluster.json {
        let text = serde_json::to_string_pretty(&report).expect("report serialises");
        std::fs::write(path, text).map_err(|e| format!("writing {}: {e}", path.display()))?;
    }
    exits?;
    printed.map_err(|e| crate::out::describe(&e))?;
    if report.interrupted {
        return Err("interrupted: the figures above cover only the time measured".into());
    }
    Ok(())
}

fn validate(args: &ConsumeArgs) -> Result<(), String> {
    cluster_bench::validate(&args.cluster)?;
    let cluster = &args.cluster;
    if cluster.svg.is_some()
        || cluster.catch_up_observer
        || cluster.observers > 0
        || cluster.idle_connections > 0
    {
        return Err(
            "--svg, --catch-up-observer, --observers and --idle-connections are the cluster \
             benchmark's, not consume's"
                .into(),
        );
    }
    if args.consumers == 0 {
        return Err("--consumers must be at least 1".into());
    }
    if !(1..=MAX_ROUNDS).contains(&args.rounds) || args.phases.is_empty() {
        return Err(format!("--rounds 1..={MAX_ROUNDS} and at least one phase"));
    }
    if !(0..=MAX_FETCH_WAIT_MS).contains(&args.fetch_max_wait_ms) || args.fetch_min_bytes < 0 {
        return Err(format!(
            "--fetch-max-wait-ms 0..={MAX_FETCH_WAIT_MS} and --fetch-min-bytes 0 or more"
        ));
    }
    if args.fetch_max_bytes <= 0 || args.partition_max_bytes <= 0 {
        return Err("--fetch-max-bytes and --partition-max-bytes must be positive".into());
    }
    let seconds_ok = |s: f64| s.is_finite() && s >= 0.0;
    if !(seconds_ok(args.to_end_timeout) && args.to_end_timeout > 0.0 && seconds_ok(args.settle)) {
        return Err("--to-end-timeout must be positive and --settle not negative".into());
    }
    if args.phases.contains(&Phase::KcatAll) && args.cluster.security == ClusterSecurity::Tls {
        return Err("kcat-all reads a PLAINTEXT client listener: not with --security tls".into());
    }
    Ok(())
}

/// What the prefill did: MB committed, the seconds it took, and the seconds the voters then
/// took to reach the high watermark (None when not waited for).
struct Prefill {
    mb: f64,
    sec: f64,
    voters_catch_up_sec: Option<f64>,
}

/// Runs the prefill and the phases; returns the phases' reports and the prefill.
fn run_on(
    args: &ConsumeArgs,
    cluster: Option<&Cluster>,
    leader: SocketAddr,
    leader_id: Option<i32>,
) -> Result<(Vec<PhaseReport>, Prefill), String> {
    let tls = cluster.and_then(|c| c.client_tls.clone());
    let mut prefill = (0.0, 0.0);
    if args.cluster.prefill_mb > 0.0 {
        prefill = catch_up::prefill(
            leader,
            args.cluster.record_bytes,
            args.cluster.prefill_mb,
            &INTERRUPTED,
            tls.clone(),
        )?;
    }
    let mut catch_up_sec = None;
    if args.cluster.prefill_mb > 0.0 && !args.no_catch_up_wait {
        catch_up_sec = Some(wait_for_voters(args, leader, tls.as_ref())?);
    }
    let nodes = cluster.map(|c| c.pids()).unwrap_or_default();
    let leader_dir = cluster.and_then(|c| {
        leader_id.and_then(|id| c.nodes.iter().find(|n| n.id == id).map(|n| n.dir.clone()))
    });
    let context = PhaseContext {
        args,
        leader,
        leader_pid: nodes
            .iter()
            .find(|(id, _)| Some(*id) == leader_id)
            .map(|&(_, pid)| pid),
        nodes,
        tls,
    };
    outln!(
        "leader {leader}; {} consumer(s) from {:?}, fetch max wait {} ms, min bytes {}, max \
         bytes {}, partition max bytes {}",
        args.consumers,
        args.from,
        args.fetch_max_wait_ms,
        args.fetch_min_bytes,
        args.fetch_max_bytes,
        args.partition_max_bytes
    )
    .map_err(|e| crate::out::describe(&e))?;
    let mut reports = Vec::new();
    'rounds: for round in 1..=args.rounds {
        for &phase in &args.phases {
            if INTERRUPTED.load(Ordering::Relaxed) {
                break 'rounds;
            }
            settle(args.settle);
            let evicted_bytes = match (&leader_dir, phase.reads() && !args.no_evict) {
                (Some(dir), true) => Some(evict_segments(dir)?),
                _ => None,
            };
            let quorum = describe_quorum(leader, context.tls.as_ref());
            let quorum_text = quorum.as_ref().map_or("leader unknown".to_string(), |q| {
                format!(
                    "leader {} epoch {}, high watermark {}, voters behind it {:?}",
                    q.leader_id, q.leader_epoch, q.high_watermark, q.voter_lag
                )
            });
            outln!("round {round}, phase {} ({quorum_text}):", phase.name())
                .map_err(|e| crate::out::describe(&e))?;
            let mut report = context.run_phase(round, phase)?;
            report.evicted_bytes = evicted_bytes;
            report.quorum_before = quorum;
            print_phase(&report).map_err(|e| crate::out::describe(&e))?;
            reports.push(report);
        }
    }
    let prefill = Prefill {
        mb: prefill.0,
        sec: prefill.1,
        voters_catch_up_sec: catch_up_sec,
    };
    Ok((reports, prefill))
}

/// Waits until every voter's log end is at the high watermark; returns the seconds waited.
fn wait_for_voters(
    args: &ConsumeArgs,
    leader: SocketAddr,
    tls: Option<&testkit::ClientTls>,
) -> Result<f64, String> {
    let started = Instant::now();
    let deadline = started + Duration::from_secs_f64(args.to_end_timeout);
    let mut last_print = started;
    loop {
        let quorum = describe_quorum(leader, tls);
        let behind = quorum.as_ref().map(|q| {
            q.voter_lag
                .iter()
                .filter(|(_, lag)| *lag > 0)
                .copied()
                .collect::<Vec<_>>()
        });
        if behind.as_ref().is_some_and(Vec::is_empty) {
            let waited = started.elapsed().as_secs_f64();
            outln!("voters at the high watermark after {waited:.1} s")
                .map_err(|e| crate::out::describe(&e))?;
            return Ok(waited);
        }
        if Instant::now() > deadline || INTERRUPTED.load(Ordering::Relaxed) {
            return Err(format!(
                "voters still behind the high watermark after {:.0} s: {behind:?} \
                 (--no-catch-up-wait to start anyway)",
                started.elapsed().as_secs_f64()
            ));
        }
        if last_print.elapsed() >= Duration::from_secs(5) {
            last_print = Instant::now();
            outln!("waiting for voters to catch up: (id, offsets behind) {behind:?}")
                .map_err(|e| crate::out::describe(&e))?;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn settle(seconds: f64) {
    if seconds > 0.0 {
        // SAFETY: sync(2) has no preconditions.
        unsafe { libc::sync() };
        std::thread::sleep(Duration::from_secs_f64(seconds));
    }
}

/// Drops the segment files under `dir` from the page cache; returns their bytes.
fn evict_segments(dir: &Path) -> Result<u64, String> {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut bytes = 0;
    for entry in entries.flatten() {
        let path = entry.path();
        if path.extension().is_none_or(|e| e != "log") {
            continue;
        }
        let file = std::fs::File::open(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        bytes += file.metadata().map(|m| m.len()).unwrap_or(0);
        // SAFETY: a valid descriptor of a file this function holds open.
        let advised = unsafe {
            use std::os::fd::AsRawFd;
            libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED)
        };
        if advised != 0 {
            let error = std::io::Error::from_raw_os_error(advised);
            return Err(format!("posix_fadvise {}: {error}", path.display()));
        }
    }
    Ok(bytes)
}

/// What every phase needs.
struct PhaseContext<'a> {
    args: &'a ConsumeArgs,
    leader: SocketAddr,
    /// (node id, pid) of the nodes started here; empty for a running cluster.
    nodes: Vec<(i32, u32)>,
    leader_pid: Option<u32>,
    tls: Option<testkit::ClientTls>,
}

/// /proc readings of the nodes and of this process at a window's start.
struct ProcWindow {
    nodes: Vec<(i32, u32)>,
    leader_pid: Option<u32>,
    start: Vec<Option<ProcSample>>,
    bench_start: Option<ProcSample>,
}

/// CPU seconds over a window: each node's, the leader's, this process's.
struct CpuFigures {
    nodes: Vec<Option<f64>>,
    leader: Option<f64>,
    bench: Option<f64>,
}

impl ProcWindow {
    fn start(nodes: &[(i32, u32)], leader_pid: Option<u32>) -> Self {
        ProcWindow {
            nodes: nodes.to_vec(),
            leader_pid,
            start: nodes
                .iter()
                .map(|&(_, pid)| proc_sample::sample(pid))
                .collect(),
            bench_start: proc_sample::sample(std::process::id()),
        }
    }

    fn end(&self) -> CpuFigures {
        let spent = |a: Option<ProcSample>, b: Option<ProcSample>| match (a, b) {
            (Some(a), Some(b)) => Some(b.cpu.saturating_sub(a.cpu).as_secs_f64()),
            _ => None,
        };
        let nodes: Vec<Option<f64>> = self
            .nodes
            .iter()
            .zip(&self.start)
            .map(|(&(_, pid), start)| spent(*start, proc_sample::sample(pid)))
            .collect();
        let leader = self
            .leader_pid
            .and_then(|pid| self.nodes.iter().position(|&(_, p)| p == pid))
            .and_then(|i| nodes[i]);
        CpuFigures {
            leader,
            nodes,
            bench: spent(self.bench_start, proc_sample::sample(std::process::id())),
        }
    }
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

impl PhaseContext<'_> {
    fn consume_config(&self, to_end: bool) -> ConsumeConfig {
        ConsumeConfig {
            leader: self.leader,
            consumers: self.args.consumers,
            from: self.args.from,
            max_wait_ms: self.args.fetch_max_wait_ms,
            min_bytes: self.args.fetch_min_bytes,
            max_bytes: self.args.fetch_max_bytes,
            partition_max_bytes: self.args.partition_max_bytes,
            to_end,
            tls: self.tls.clone(),
        }
    }

    fn load_config(&self) -> LoadConfig {
        let c = &self.args.cluster;
        LoadConfig {
            leader: self.leader,
            connections: c.connections,
            inflight: c.inflight,
            load_threads: c.load_threads(),
            rate: c.rate,
            record_bytes: c.record_bytes,
            batch_records: c.batch_records,
            acks: c.acks,
            warmup: Duration::from_secs_f64(c.warmup),
            duration: Duration::from_secs_f64(c.duration),
            bench_cpus: c.bench_cpus.clone(),
            tls: self.tls.clone(),
        }
    }

    fn report(&self, round: usize, phase: Phase, elapsed_sec: f64, cpu: CpuFigures) -> PhaseReport {
        PhaseReport {
            round,
            phase,
            elapsed_sec,
            produce: None,
            consume: None,
            kcat: None,
            node_cpu_sec: cpu.nodes,
            leader_cpu_sec: cpu.leader,
            bench_cpu_sec: cpu.bench,
            loadavg: loadavg(),
            evicted_bytes: None,
            quorum_before: None,
        }
    }

    fn run_phase(&self, round: usize, phase: Phase) -> Result<PhaseReport, String> {
        match phase {
            Phase::Produce => self.produce(round, phase, false),
            Phase::ProduceConsume => self.produce(round, phase, true),
            Phase::Consume => self.consume(round, phase, false),
            Phase::ConsumeAll => self.consume(round, phase, true),
            Phase::KcatAll => self.kcat(round, phase),
        }
    }

    /// The produce load, with the consumers reading through its warm-up and window when
    /// `with_consumers`.
    fn produce(
        &self,
        round: usize,
        phase: Phase,
        with_consumers: bool,
    ) -> Result<PhaseReport, String> {
        let consumers = match with_consumers {
            true => Some(Consumers::start(&self.consume_config(false))?),
            false => None,
        };
        // Reading from before the warm-up on, so the window sees a reader in its stride.
        if let Some(consumers) = &consumers {
            consumers.go();
        }
        let mut watch = PhaseWatch {
            nodes: &self.nodes,
            leader_pid: self.leader_pid,
            consumers: consumers.as_ref(),
            window: None,
            cpu: None,
            first: None,
            last: None,
            figures: None,
            error: None,
            printed: Ok(()),
        };
        outln!(
            "  sec   records/s      MB/s   p50 us   p99 us{}",
            if with_consumers {
                "   consumer records/s      MB/s  fetches/s       lag"
            } else {
                ""
            }
        )
        .map_err(|e| crate::out::describe(&e))?;
        let load = produce_load::run(&self.load_config(), &INTERRUPTED, &mut watch, |_| {});
        let (error, printed) = (
            watch.error.take(),
            std::mem::replace(&mut watch.printed, Ok(())),
        );
        let (figures, cpu) = (watch.figures.take(), watch.cpu.take());
        drop(watch);
        let stopped = consumers.map(Consumers::stop).transpose();
        if let Some(error) = error {
            return Err(error);
        }
        let load = load?;
        stopped?;
        printed.map_err(|e| crate::out::describe(&e))?;
        let cpu = cpu.ok_or("the load ended before its window")?;
        let mut report = self.report(round, phase, load.elapsed_sec, cpu);
        report.produce = Some(ProduceFigures {
            records: load.records,
            records_per_sec: load.records_per_sec,
            mb_per_sec: load.mb_per_sec,
            commit_latency_us: load.latency_us.clone(),
        });
        report.consume = figures;
        Ok(report)
    }

    /// The consumers alone: for the warm-up and the window, or (`to_end`) until each has read
    /// to the high watermark.
    fn consume(&self, round: usize, phase: Phase, to_end: bool) -> Result<PhaseReport, String> {
        let consumers = Consumers::start(&self.consume_config(to_end))?;
        // To the end: the window starts before the first fetch; else after the warm-up.
        let (window, first) = if to_end {
            let window = ProcWindow::start(&self.nodes, self.leader_pid);
            (window, consumers.go())
        } else {
            consumers.go();
            let warmup = Instant::now() + Duration::from_secs_f64(self.args.cluster.warmup);
            while Instant::now() < warmup && !INTERRUPTED.load(Ordering::Relaxed) {
                consumers.check_errors()?;
                std::thread::sleep(POLL);
            }
            let window = ProcWindow::start(&self.nodes, self.leader_pid);
            (window, consumers.snapshot())
        };
        let limit = Duration::from_secs_f64(if to_end {
            self.args.to_end_timeout
        } else {
            self.args.cluster.duration
        });
        outln!("  sec   consumer records/s      MB/s  fetches/s       lag")
            .map_err(|e| crate::out::describe(&e))?;
        let mut last = first.clone();
        loop {
            std::thread::sleep(POLL);
            consumers.check_errors()?;
            let now = Instant::now();
            let finished = (to_end && consumers.all_done()) || now >= first.at + limit;
            if finished || INTERRUPTED.load(Ordering::Relaxed) {
                break;
            }
            if now >= last.at + Duration::from_secs(1) {
                let current = consumers.snapshot();
                print_consumers(&first, &last, &current).map_err(|e| crate::out::describe(&e))?;
                last = current;
            }
        }
        let end = consumers.snapshot();
        let cpu = window.end();
        consumers.stop()?;
        let figures = ConsumeFigures::between(&first, &end);
        if to_end && !INTERRUPTED.load(Ordering::Relaxed) {
            if let Some(behind) = figures.per_consumer.iter().position(|c| !c.reached_end) {
                return Err(format!(
                    "consumer {behind} had not read to the end after {} s (--to-end-timeout)",
                    self.args.to_end_timeout
                ));
            }
        }
        let mut report = self.report(round, phase, figures.elapsed_sec, cpu);
        report.consume = Some(figures);
        Ok(report)
    }

    /// `kcat -C -o beginning -e` from the leader, its messages' offsets counted and checked in
    /// order (it skips control records, so offsets increase but need not be contiguous).
    fn kcat(&self, round: usize, phase: Phase) -> Result<PhaseReport, String> {
        let children_before = children_cpu();
        let window = ProcWindow::start(&self.nodes, self.leader_pid);
        let started = Instant::now();
        let leader = self.leader.to_string();
        let mut child = Command::new(&self.args.kcat)
            .args(["-C", "-b", &leader, "-t", net::wire::quorum::METADATA_TOPIC])
            .args(["-p", "0", "-o", "beginning", "-e", "-q", "-f", "%o\\n"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("{}: {e}", self.args.kcat.display()))?;
        let stdout = child.stdout.take().expect("piped");
        let mut stderr = child.stderr.take().expect("piped");
        let counter = std::thread::spawn(move || count_offsets(stdout));
        let errors = std::thread::spawn(move || {
            let mut kept = String::new();
            let _ = (&mut stderr)
                .take(KCAT_STDERR_BYTES)
                .read_to_string(&mut kept);
            // Drain the rest so kcat never blocks on a full pipe.
            let _ = std::io::copy(&mut stderr, &mut std::io::sink());
            kept
        });
        let deadline = started + Duration::from_secs_f64(self.args.to_end_timeout);
        let status = loop {
            if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
                break Some(status);
            }
            if Instant::now() > deadline || INTERRUPTED.load(Ordering::Relaxed) {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            std::thread::sleep(POLL);
        };
        let elapsed = started.elapsed().as_secs_f64();
        let cpu = window.end();
        let counted = counter.join().map_err(|_| "the kcat reader panicked")?;
        let stderr = errors.join().unwrap_or_default();
        let counted = counted?;
        match status {
            Some(status) if status.success() => {}
            Some(status) => return Err(format!("kcat ended with {status}: {stderr}")),
            None if INTERRUPTED.load(Ordering::Relaxed) => {}
            None => {
                return Err(format!(
                    "kcat had not read to the end after {} s (--to-end-timeout)",
                    self.args.to_end_timeout
                ))
            }
        }
        let mut report = self.report(round, phase, elapsed, cpu);
        report.kcat = Some(KcatFigures {
            records: counted.records,
            first_offset: counted.first,
            last_offset: counted.last,
            records_per_sec: counted.records as f64 / elapsed,
            cpu_sec: children_cpu() - children_before,
        });
        Ok(report)
    }
}

struct Offsets {
    records: u64,
    first: Option<i64>,
    last: Option<i64>,
}

/// kcat's lines, one offset each, strictly increasing.
fn count_offsets(stdout: impl Read) -> Result<Offsets, String> {
    let mut counted = Offsets {
        records: 0,
        first: None,
        last: None,
    };
    for line in std::io::BufReader::new(stdout).lines() {
        let line = line.map_err(|e| format!("reading kcat's output: {e}"))?;
        let offset: i64 = line
            .trim()
            .parse()
            .map_err(|_| format!("kcat printed {line:?}, not an offset"))?;
        if let Some(last) = counted.last {
            if offset <= last {
                return Err(format!("kcat printed offset {offset} after {last}"));
            }
        }
        counted.first.get_or_insert(offset);
        counted.last = Some(offset);
        counted.records += 1;
    }
    Ok(counted)
}

/// CPU seconds of the children this process has waited for (getrusage RUSAGE_CHILDREN): the
/// difference around a kcat run is kcat's.
fn children_cpu() -> f64 {
    // SAFETY: rusage is plain data; getrusage gets a valid pointer.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage);
        usage
    };
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

/// The produce phases' window hooks: /proc and the consumers' counters at the window's start
/// and end, a line per interval with both sides.
struct PhaseWatch<'a> {
    nodes: &'a [(i32, u32)],
    leader_pid: Option<u32>,
    consumers: Option<&'a Consumers>,
    window: Option<ProcWindow>,
    cpu: Option<CpuFigures>,
    first: Option<Snapshot>,
    last: Option<Snapshot>,
    figures: Option<ConsumeFigures>,
    /// A consumer failed (the load was stopped through the interrupt flag).
    error: Option<String>,
    printed: std::io::Result<()>,
}

impl PhaseWatch<'_> {
    fn check_consumers(&mut self) {
        if let Some(Err(error)) = self.consumers.map(Consumers::check_errors) {
            if self.error.is_none() {
                self.error = Some(error);
                INTERRUPTED.store(true, Ordering::Relaxed);
            }
        }
    }
}

impl WindowObserver for PhaseWatch<'_> {
    fn window_started(&mut self) {
        self.window = Some(ProcWindow::start(self.nodes, self.leader_pid));
        self.first = self.consumers.map(Consumers::snapshot);
        self.last = self.first.clone();
        self.check_consumers();
    }

    fn interval(&mut self, interval: &mut Interval) {
        self.check_consumers();
        let mut line = format!(
            "{:>5.0} {:>11.0} {:>9.1} {:>8} {:>8}",
            interval.end_sec,
            interval.records_per_sec,
            interval.mb_per_sec,
            interval.latency_us.p50,
            interval.latency_us.p99
        );
        if let (Some(consumers), Some(last)) = (self.consumers, &self.last) {
            let current = consumers.snapshot();
            line.push_str(&consumer_columns(last, &current));
            self.last = Some(current);
        }
        if self.printed.is_ok() {
            self.printed = outln!("{line}");
        }
    }

    fn window_ended(&mut self) {
        self.cpu = self.window.as_ref().map(ProcWindow::end);
        if let (Some(consumers), Some(first)) = (self.consumers, &self.first) {
            self.figures = Some(ConsumeFigures::between(first, &consumers.snapshot()));
        }
        self.check_consumers();
    }
}

/// Records/s, MB/s and fetches/s between `last` and `current`, and the lag at `current`.
fn consumer_columns(last: &Snapshot, current: &Snapshot) -> String {
    let step = ConsumeFigures::between(last, current);
    format!(
        " {:>20.0} {:>9.1} {:>10.0} {:>9}",
        step.records_per_sec, step.mb_per_sec, step.fetches_per_sec, step.max_lag_end
    )
}

fn print_consumers(first: &Snapshot, last: &Snapshot, current: &Snapshot) -> std::io::Result<()> {
    let sec = current.at.duration_since(first.at).as_secs_f64();
    outln!("{sec:>5.0}{}", consumer_columns(last, current))
}

fn print_phase(r: &PhaseReport) -> std::io::Result<()> {
    if let Some(p) = &r.produce {
        let l = &p.commit_latency_us;
        outln!(
            "  produce: {:.0} records/s, {:.1} MB/s; commit latency us p50 {} p99 {} p99.9 {} max {}",
            p.records_per_sec,
            p.mb_per_sec,
            l.p50,
            l.p99,
            l.p999,
            l.max
        )?;
    }
    if let Some(c) = &r.consume {
        outln!(
            "  consumers: {:.0} records/s, {:.1} MB/s, {:.1} fetches/s, {:.0} bytes per fetch \
             ({} records, {} control records, {} empty fetches over {:.2} s); lag at the end {}",
            c.records_per_sec,
            c.mb_per_sec,
            c.fetches_per_sec,
            c.bytes_per_fetch,
            c.records,
            c.control_records,
            c.empty_fetches,
            c.elapsed_sec,
            c.max_lag_end
        )?;
    }
    if let Some(k) = &r.kcat {
        outln!(
            "  kcat: {} records (offsets {} to {}) in {:.2} s: {:.0} records/s; kcat CPU {:.2} s",
            k.records,
            cluster_bench::opt(k.first_offset.map(|o| o.to_string())),
            cluster_bench::opt(k.last_offset.map(|o| o.to_string())),
            r.elapsed_sec,
            k.records_per_sec,
            k.cpu_sec
        )?;
    }
    let cpu = |c: &Option<f64>| cluster_bench::opt(c.map(|c| format!("{c:.2}")));
    outln!(
        "  CPU s: nodes [{}], load generator {}; loadavg {}",
        r.node_cpu_sec
            .iter()
            .map(cpu)
            .collect::<Vec<_>>()
            .join(", "),
        cpu(&r.bench_cpu_sec),
        r.loadavg
    )
}

/// Each round's produce-consume phase against its produce phase.
fn ratios(phases: &[PhaseReport]) -> Vec<RoundRatio> {
    let find = |round: usize, phase: Phase| {
        phases
            .iter()
            .find(|p| p.round == round && p.phase == phase)
            .and_then(|p| p.produce.as_ref())
    };
    let rounds = phases.iter().map(|p| p.round).max().unwrap_or(0);
    (1..=rounds)
        .filter_map(|round| {
            let alone = find(round, Phase::Produce)?;
            let read = find(round, Phase::ProduceConsume)?;
            let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { f64::NAN };
            Some(RoundRatio {
                round,
                commit_p50_ratio: ratio(
                    read.commit_latency_us.p50 as f64,
                    alone.commit_latency_us.p50 as f64,
                ),
                commit_p99_ratio: ratio(
                    read.commit_latency_us.p99 as f64,
                    alone.commit_latency_us.p99 as f64,
                ),
                produce_records_per_sec_ratio: ratio(read.records_per_sec, alone.records_per_sec),
            })
        })
        .collect()
}

fn print_summary(r: &ConsumeReport) -> std::io::Result<()> {
    outln!(
        "summary: {} phase(s); {} consumer(s) from {:?}; produce load {} B x {} per batch, {} \
         connections x {} in flight, acks={}; prefill {:.0} MB in {:.1} s",
        r.phases.len(),
        r.consumers,
        r.from,
        r.record_bytes,
        r.batch_records,
        r.connections,
        r.inflight_per_connection,
        r.acks,
        r.prefill_mb,
        r.prefill_sec
    )?;
    outln!(
        "  round phase             commit p50/p99 us   produce rec/s   read rec/s  read MB/s  fetches/s  loadavg"
    )?;
    for p in &r.phases {
        let commit = p.produce.as_ref().map_or("-".to_string(), |f| {
            format!("{}/{}", f.commit_latency_us.p50, f.commit_latency_us.p99)
        });
        let produced = p
            .produce
            .as_ref()
            .map_or("-".to_string(), |f| format!("{:.0}", f.records_per_sec));
        let (read, mb, fetches) = match (&p.consume, &p.kcat) {
            (Some(c), _) => (
                format!("{:.0}", c.records_per_sec),
                format!("{:.1}", c.mb_per_sec),
                format!("{:.1}", c.fetches_per_sec),
            ),
            (None, Some(k)) => (format!("{:.0}", k.records_per_sec), "-".into(), "-".into()),
            (None, None) => ("-".into(), "-".into(), "-".into()),
        };
        let load = p.loadavg.split_whitespace().next().unwrap_or("-");
        outln!(
            "  {:>5} {:<17} {:>18} {:>15} {:>12} {:>10} {:>10}  {load}",
            p.round,
            p.phase.name(),
            commit,
            produced,
            read,
            mb,
            fetches
        )?;
    }
    for ratio in &r.ratios {
        outln!(
            "  round {}: with the reader / without: commit p99 {:.2}x, p50 {:.2}x, produce \
             records/s {:.2}x",
            ratio.round,
            ratio.commit_p99_ratio,
            ratio.commit_p50_ratio,
            ratio.produce_records_per_sec_ratio
        )?;
    }
    for exit in &r.node_exits {
        outln!("  {exit}")?;
    }
    for (id, stats) in &r.node_stats {
        let get = |key: &str| stats.get(key).copied().unwrap_or(f64::NAN);
        outln!(
            "  node {id} (whole run): consumer fetches {}, log reads {} (replicas' and consumers')",
            get("consumer_fetches"),
            get("log_reads")
        )?;
    }
    Ok(())
}
