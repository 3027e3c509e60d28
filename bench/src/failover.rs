//! The `failover` subcommand: a local 3-voter cluster under acks=-1 load from a client that
//! follows the leader (failover_client.rs), and cycles of faults: the leader killed, stopped
//! or cut off, a follower restarted or cut off. Each cycle measures the client-seen
//! unavailability (failover_figures.rs) and counts the elections the fault's undoing caused;
//! at the end every voter's log is read back and every acknowledged record must be in it
//! (docs/benchmarks.md, "Failover").
//!
//! Every wait is bounded and gives up on Ctrl-C; the nodes are killed (stopped ones continued
//! first, cut-off ones healed) and the namespaces deleted on every way out.

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use clap::Args;
use serde::Serialize;
use testkit::{Cluster, LeaderWait, Settings, Stderr};

use crate::cluster_bench::{
    describe_exits, install_signal_handlers, ringraft_binary, ClusterSecurity, INTERRUPTED,
    LEADER_WAIT, NODE_LOG, STOP_WAIT,
};
use crate::failover_client::{Client, ClientCounters};
use crate::failover_figures::{
    longest_gap, read_back, seq_of, unavailability, FaultKind, ReadBack, Summary,
};

/// Voters of the cluster.
const VOTERS: usize = 3;
/// Segments of 64 MiB: the nodes preallocate whole segments, and the run writes little.
const SEGMENT_BYTES: u64 = 64 << 20;
/// How often waits look at the cluster and the interrupt flag.
const POLL: Duration = Duration::from_millis(20);
/// Acknowledgements wanted after a cycle settles before the next fault (a steady load).
const STEADY_ACKS: usize = 20;

#[derive(Args, Debug, Clone)]
pub struct FailoverArgs {
    /// Cycles of each fault kind (the kinds take turns).
    #[arg(long, default_value_t = 20)]
    pub(crate) cycles: usize,
    /// The fault kinds, comma-separated: kill, stop, partition (the leader's), follower-restart,
    /// follower-partition. The partitions need root (network namespaces).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "kill,stop,partition,follower-restart,follower-partition"
    )]
    pub(crate) faults: Vec<FaultKind>,
    /// How long a follower fault is held (a follower restarted after this long down, a cut
    /// healed after this long). Longer than the fetch timeout (2 s), so a cut-off follower's
    /// timer runs out and it asks for (pre-)votes.
    #[arg(long, default_value_t = 5000)]
    pub(crate) hold_ms: u64,
    /// The longest a leader fault is held waiting for another node to acknowledge a record;
    /// a cycle that waits longer fails the run.
    #[arg(long, default_value_t = 30_000)]
    pub(crate) recover_timeout_ms: u64,
    /// After a fault is undone, at least this long with the load on before the cycle ends:
    /// an election the undoing causes shows in this time.
    #[arg(long, default_value_t = 3000)]
    pub(crate) calm_ms: u64,
    /// The longest the cluster may take to settle (a leader, every voter holding the last
    /// acknowledged record, acknowledgements flowing) before and after each cycle.
    #[arg(long, default_value_t = 30_000)]
    pub(crate) settle_timeout_ms: u64,
    /// The client leaves a request unanswered this long (and reconnects to the leader the
    /// watchers name). A new leader named by the watchers ends the wait sooner.
    #[arg(long, default_value_t = 5000)]
    pub(crate) request_timeout_ms: u64,
    /// A `key=value` handed to every node as `ringraft serve --override` (repeatable).
    #[arg(long = "node-override", value_name = "KEY=VALUE")]
    pub(crate) node_overrides: Vec<String>,
    /// The `ringraft` binary (default: next to this executable).
    #[arg(long)]
    pub(crate) ringraft_bin: Option<PathBuf>,
    /// How the voters talk to each other (`voters-mtls` or `plaintext`; the client is on
    /// PLAINTEXT either way).
    #[arg(long, value_enum, default_value_t = ClusterSecurity::VotersMtls)]
    pub(crate) security: ClusterSecurity,
    /// Write the report (summaries, every cycle, the read-back) as one JSON object here.
    #[arg(long)]
    pub(crate) json: Option<PathBuf>,
    /// Write every cycle as a CSV row here.
    #[arg(long)]
    pub(crate) csv: Option<PathBuf>,
}

/// One cycle's figures.
#[derive(Clone, Debug, Serialize)]
pub struct Cycle {
    /// From 1, over all kinds.
    pub cycle: usize,
    pub kind: FaultKind,
    /// The node the fault hit.
    pub node: i32,
    /// Seconds from the first fault of the run.
    pub fault_at_sec: f64,
    /// From the last acknowledgement before the fault to the first after it (for a leader
    /// fault: the first from another node).
    pub unavailable_ms: f64,
    /// The longest gap between two acknowledgements from the fault to the cycle's end
    /// (undoing and calm included).
    pub longest_gap_ms: f64,
    /// From the fault to its undoing.
    pub held_ms: f64,
    /// From the undoing until the cluster had settled again (at least `--calm-ms`).
    pub settle_ms: f64,
    pub epoch_before: i32,
    pub epoch_at_undo: i32,
    pub epoch_end: i32,
    /// Epochs started between the fault and its undoing.
    pub elections_during: i32,
    /// Epochs started after the undoing (the healed node, the restarted one, the continued
    /// one): the target is none.
    pub elections_after_undo: i32,
    /// The leader once the cycle had settled.
    pub leader_end: i32,
}

#[derive(Serialize)]
struct KindReport {
    kind: FaultKind,
    cycles: usize,
    unavailable: Option<Summary>,
    longest_gap: Option<Summary>,
    elections_during: i32,
    elections_after_undo: i32,
}

#[derive(Serialize)]
struct Report<'a> {
    kinds: Vec<KindReport>,
    cycles: Vec<Cycle>,
    /// Whether the nodes ran in network namespaces (root, a partition asked for).
    namespaces: bool,
    security: ClusterSecurity,
    node_overrides: Vec<String>,
    hold_ms: u64,
    calm_ms: u64,
    request_timeout_ms: u64,
    acknowledged: usize,
    client: &'a ClientCounters,
    /// Every voter's log against every acknowledged record, by node id.
    read_back: Vec<(i32, ReadBack)>,
    node_exits: Vec<String>,
    loadavg_start: String,
    loadavg_end: String,
    elapsed_sec: f64,
}

/// The cluster, healed, continued and killed when dropped (every error path).
struct Nodes {
    cluster: Cluster,
}

impl Nodes {
    /// Continues every stopped node and heals every cut-off one (an error of either is
    /// reported by the caller's own wait later, or does not matter on the way out).
    fn undo_everything(&self) {
        for node in &self.cluster.nodes {
            if let Some(process) = &node.process {
                process.signal(libc::SIGCONT);
            }
            if self.cluster.lab.is_some() {
                let _ = self.cluster.heal(node.id);
            }
        }
    }
}

impl Drop for Nodes {
    fn drop(&mut self) {
        // A stopped node does not die of SIGTERM, and a cut-off one's namespace goes with the
        // lab: undo first, then the processes' guards kill them.
        self.undo_everything();
    }
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

fn validate(args: &FailoverArgs) -> Result<(), String> {
    if args.cycles == 0 || args.faults.is_empty() {
        return Err("--cycles and --faults: at least one".into());
    }
    if args.security == ClusterSecurity::Tls {
        return Err("--security: voters-mtls or plaintext (the client is on PLAINTEXT)".into());
    }
    if args.faults.iter().any(|k| k.needs_namespaces()) && !is_root() {
        return Err(
            "partition and follower-partition cut nodes off in network namespaces, which needs \
             root; without it, use --faults kill,stop,follower-restart"
                .into(),
        );
    }
    if args.recover_timeout_ms == 0 || args.settle_timeout_ms == 0 || args.request_timeout_ms == 0 {
        return Err(
            "--recover-timeout-ms, --settle-timeout-ms and --request-timeout-ms: above 0".into(),
        );
    }
    Ok(())
}

/// Sleeps `pause` in short steps; Err on Ctrl-C.
fn sleep_checked(pause: Duration) -> Result<(), String> {
    let end = Instant::now() + pause;
    while Instant::now() < end {
        if INTERRUPTED.load(Ordering::Relaxed) {
            return Err("interrupted".into());
        }
        std::thread::sleep(POLL.min(end.saturating_duration_since(Instant::now())));
    }
    Ok(())
}

/// Polls `done` until it holds, at most `timeout`; Err naming `what` and the last reason.
fn wait_for(
    what: &str,
    timeout: Duration,
    mut done: impl FnMut() -> Result<(), String>,
) -> Result<(), String> {
    let deadline = Instant::now() + timeout;
    loop {
        let reason = match done() {
            Ok(()) => return Ok(()),
            Err(reason) => reason,
        };
        if Instant::now() >= deadline {
            return Err(format!("{what}: not within {timeout:?} ({reason})"));
        }
        sleep_checked(POLL)?;
    }
}

pub fn run(args: FailoverArgs) -> Result<(), String> {
    validate(&args)?;
    install_signal_handlers();
    let bin = ringraft_binary(args.ringraft_bin.as_deref())?;
    let namespaces = args.faults.iter().any(|k| k.needs_namespaces());
    let settings = Settings {
        cluster_id: "ringraft-bench-failover".into(),
        dir_prefix: "ringraft-failover-".into(),
        rust_log: NODE_LOG.into(),
        overrides: args.node_overrides.clone(),
        tail_lines: 20,
        tail_from_panic: true,
        security: match args.security {
            ClusterSecurity::Plaintext => testkit::Security::Plaintext,
            _ => testkit::Security::MutualTls,
        },
        segment_bytes: Some(SEGMENT_BYTES),
        ..Settings::new(&bin)
    };
    let cluster = if namespaces {
        Cluster::create_in_lab(settings, VOTERS, VOTERS)?
    } else {
        Cluster::create(settings, VOTERS)?
    };
    let mut nodes = Nodes { cluster };
    nodes.cluster.start_all(Stderr::File)?;
    nodes.cluster.wait_for_leader(&LeaderWait {
        fail_on_exit: true,
        interrupted: Some(&INTERRUPTED),
        ..LeaderWait::within(LEADER_WAIT)
    })?;
    let loadavg_start = loadavg();
    let host = nodes.cluster.lab.as_ref().map(|lab| lab.client().clone());
    let ids: Vec<i32> = nodes.cluster.nodes.iter().map(|n| n.id).collect();
    let addrs = nodes.cluster.nodes.iter().map(|n| n.addr).collect();
    // Declared after `nodes`: dropped (stopped and joined) before the nodes are killed.
    let mut client = Client::start(
        ids,
        addrs,
        host,
        Duration::from_millis(args.request_timeout_ms),
    );
    let where_ = if namespaces {
        "each in a network namespace of its own"
    } else {
        "on 127.0.0.1"
    };
    outln!(
        "failover: {VOTERS} voters {where_}; {} cycles of each of {}; load average {loadavg_start}",
        args.cycles,
        args.faults
            .iter()
            .map(|k| k.name())
            .collect::<Vec<_>>()
            .join(", ")
    )
    .map_err(|e| crate::out::describe(&e))?;
    outln!("cycle kind               node  unavailable ms  longest gap ms  elections during/after undo")
        .map_err(|e| crate::out::describe(&e))?;
    let started = Instant::now();
    let mut cycles = Vec::new();
    let mut follower_turn = 0usize;
    for round in 0..args.cycles {
        for (k, &kind) in args.faults.iter().enumerate() {
            let number = round * args.faults.len() + k + 1;
            settle(&args, &mut nodes, &client)?;
            let cycle = run_cycle(
                &args,
                &mut nodes,
                &client,
                kind,
                number,
                started,
                &mut follower_turn,
            )?;
            outln!(
                "{:>5} {:<18} {:>4} {:>15.1} {:>15.1}  {}/{}",
                cycle.cycle,
                cycle.kind.name(),
                cycle.node,
                cycle.unavailable_ms,
                cycle.longest_gap_ms,
                cycle.elections_during,
                cycle.elections_after_undo
            )
            .map_err(|e| crate::out::describe(&e))?;
            cycles.push(cycle);
        }
    }
    // Every voter holds the last acknowledged record before the nodes stop: then each log
    // must hold every acknowledged one.
    settle(&args, &mut nodes, &client)?;
    client.stop();
    client.check()?;
    let last = client
        .shared
        .last_ack()
        .ok_or("no record was acknowledged")?;
    wait_voters_at(&args, &nodes, last.offset + 1)?;
    nodes.undo_everything();
    let exits = nodes.cluster.stop_all(STOP_WAIT);
    let acked: Vec<(i64, u64)> = client
        .shared
        .acks
        .lock()
        .unwrap()
        .iter()
        .map(|a| (a.offset, a.seq))
        .collect();
    let mut read_backs = Vec::new();
    for node in &nodes.cluster.nodes {
        read_backs.push((node.id, read_back(&read_log(&node.dir)?, &acked)));
    }
    let report = Report {
        kinds: args
            .faults
            .iter()
            .map(|&kind| kind_report(kind, &cycles))
            .collect(),
        cycles,
        namespaces,
        security: args.security,
        node_overrides: args.node_overrides.clone(),
        hold_ms: args.hold_ms,
        calm_ms: args.calm_ms,
        request_timeout_ms: args.request_timeout_ms,
        acknowledged: acked.len(),
        client: &client.shared.counters,
        read_back: read_backs,
        node_exits: describe_exits(&exits),
        loadavg_start,
        loadavg_end: loadavg(),
        elapsed_sec: started.elapsed().as_secs_f64(),
    };
    print_summary(&report).map_err(|e| crate::out::describe(&e))?;
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(&report).expect("report serialises");
        std::fs::write(path, text).map_err(|e| format!("writing {}: {e}", path.display()))?;
    }
    if let Some(path) = &args.csv {
        std::fs::write(path, csv(&report.cycles))
            .map_err(|e| format!("writing {}: {e}", path.display()))?;
    }
    if let Some((id, bad)) = report.read_back.iter().find(|(_, r)| !r.complete()) {
        return Err(format!(
            "node {id}'s log lacks acknowledged records: {} missing, {} misplaced; {}",
            bad.missing,
            bad.misplaced,
            bad.examples.join("; ")
        ));
    }
    if let Some((id, _)) = exits.iter().find(|(_, s)| !s.is_some_and(|s| s.success())) {
        return Err(format!(
            "node {id} did not stop cleanly: {}\n{}",
            report.node_exits.join(", "),
            nodes.cluster.stderr_tails()
        ));
    }
    Ok(())
}

/// Waits until the cluster has settled: a leader the watchers name answers DescribeQuorum as
/// the leader, with every voter at or beyond the record last acknowledged, and
/// [`STEADY_ACKS`] more records have been acknowledged since the wait began.
fn settle(args: &FailoverArgs, nodes: &mut Nodes, client: &Client) -> Result<(), String> {
    nodes.cluster.check_running()?;
    let from = client.shared.acks_len();
    wait_for(
        "the cluster settling",
        Duration::from_millis(args.settle_timeout_ms),
        || {
            client.check()?;
            let more = client.shared.acks_len() - from;
            if more < STEADY_ACKS {
                return Err(format!("{more} records acknowledged since the wait began"));
            }
            let last = client.shared.last_ack().ok_or("no acknowledgement yet")?;
            let (leader, _) = client.shared.leader().ok_or("no leader named")?;
            voters_at(&nodes.cluster, leader, last.offset + 1)
        },
    )?;
    nodes.cluster.check_running()
}

/// Ok when `leader` answers DescribeQuorum as the leader with every voter at `offset` or
/// beyond; Err says what it saw.
fn voters_at(cluster: &Cluster, leader: i32, offset: i64) -> Result<(), String> {
    let d = cluster
        .client(cluster.addr(leader), Duration::from_millis(500))?
        .describe_quorum()
        .map_err(|e| e.to_string())?;
    if !d.error.is_none() || d.leader_id != leader {
        return Err(format!("node {leader} answers {} as no leader", d.error));
    }
    let ends: Vec<(i32, i64)> = d
        .current_voters
        .iter()
        .map(|v| (v.replica_id, v.log_end_offset))
        .collect();
    if ends.len() == VOTERS && ends.iter().all(|&(_, end)| end >= offset) {
        Ok(())
    } else {
        Err(format!(
            "leader {leader}: (voter, log end) {ends:?}, want every one at {offset}"
        ))
    }
}

/// After the load: whoever leads reports every voter at `offset`.
fn wait_voters_at(args: &FailoverArgs, nodes: &Nodes, offset: i64) -> Result<(), String> {
    wait_for(
        "every voter holding the last acknowledged record",
        Duration::from_millis(args.settle_timeout_ms),
        || {
            let leader = nodes.cluster.leader_now(None).ok_or("no leader answers")?;
            voters_at(&nodes.cluster, leader, offset)
        },
    )
}

/// Puts the fault of `kind` on node `id` (a kill waits, bounded, for the process to be gone).
fn apply(cluster: &mut Cluster, kind: FaultKind, id: i32) -> Result<(), String> {
    match kind {
        FaultKind::Kill | FaultKind::FollowerRestart => {
            let process = cluster
                .node(id)
                .process
                .as_mut()
                .ok_or_else(|| format!("node {id} is not running"))?;
            process.signal(libc::SIGKILL);
            process
                .wait_exit(STOP_WAIT)
                .map(|_| ())
                .ok_or_else(|| format!("node {id} outlived SIGKILL for {STOP_WAIT:?}"))
        }
        FaultKind::Stop => signal(cluster, id, libc::SIGSTOP),
        FaultKind::Partition | FaultKind::FollowerPartition => cluster.cut(id),
    }
}

/// Sends `sig` to node `id`'s running process.
fn signal(cluster: &mut Cluster, id: i32, sig: libc::c_int) -> Result<(), String> {
    let process = cluster
        .node(id)
        .process
        .as_ref()
        .ok_or_else(|| format!("node {id} is not running"))?;
    process.signal(sig);
    Ok(())
}

/// Undoes [`apply`]: a restart, SIGCONT, or the interface up.
fn undo(cluster: &mut Cluster, kind: FaultKind, id: i32) -> Result<(), String> {
    match kind {
        FaultKind::Kill | FaultKind::FollowerRestart => cluster.start(id, &[], Stderr::File),
        FaultKind::Stop => signal(cluster, id, libc::SIGCONT),
        FaultKind::Partition | FaultKind::FollowerPartition => cluster.heal(id),
    }
}

/// One cycle on a settled cluster: the fault, held until another node acknowledges (a leader
/// fault) or for `--hold-ms` (a follower fault), undone, then `--calm-ms` and a settle.
fn run_cycle(
    args: &FailoverArgs,
    nodes: &mut Nodes,
    client: &Client,
    kind: FaultKind,
    number: usize,
    started: Instant,
    follower_turn: &mut usize,
) -> Result<Cycle, String> {
    let shared = &client.shared;
    let (leader, _) = shared.leader().ok_or("no leader named after settling")?;
    let node = if kind.hits_leader() {
        leader
    } else {
        // The followers take turns.
        let followers = nodes.cluster.others(leader);
        *follower_turn += 1;
        followers[*follower_turn % followers.len()]
    };
    let epoch_before = shared.max_epoch.load(Ordering::Relaxed);
    // Two back: the last acknowledgement before the fault is among those kept.
    let first_index = shared.acks_len().saturating_sub(2);
    let fault_at = Instant::now();
    apply(&mut nodes.cluster, kind, node)?;
    let held = if kind.hits_leader() {
        wait_for(
            &format!(
                "an acknowledgement from another node after node {node}'s {}",
                kind.name()
            ),
            Duration::from_millis(args.recover_timeout_ms),
            || {
                client.check()?;
                let acks = shared.acks.lock().unwrap();
                if acks[first_index..]
                    .iter()
                    .any(|a| a.at > fault_at && a.node != node)
                {
                    Ok(())
                } else {
                    Err(format!("leader now {:?}", shared.leader()))
                }
            },
        )
    } else {
        sleep_checked(Duration::from_millis(args.hold_ms))
    };
    let undo_at = Instant::now();
    let epoch_at_undo = shared.max_epoch.load(Ordering::Relaxed);
    // Undone whatever the wait's outcome; the error (if any) after.
    let undone = undo(&mut nodes.cluster, kind, node);
    held?;
    undone?;
    sleep_checked(Duration::from_millis(args.calm_ms))?;
    settle(args, nodes, client)?;
    let settled_at = Instant::now();
    let epoch_end = shared.max_epoch.load(Ordering::Relaxed);
    let acks = shared.acks.lock().unwrap();
    let window = &acks[first_index..];
    let gap = unavailability(window, fault_at, kind.hits_leader().then_some(node))
        .ok_or("no acknowledgement on one side of the fault")?;
    let longest =
        longest_gap(window, fault_at, settled_at).ok_or("no acknowledgement before the fault")?;
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    Ok(Cycle {
        cycle: number,
        kind,
        node,
        fault_at_sec: fault_at.saturating_duration_since(started).as_secs_f64(),
        unavailable_ms: ms(gap.length()),
        longest_gap_ms: ms(longest.max(gap.length())),
        held_ms: ms(undo_at.duration_since(fault_at)),
        settle_ms: ms(settled_at.duration_since(undo_at)),
        epoch_before,
        epoch_at_undo,
        epoch_end,
        elections_during: epoch_at_undo - epoch_before,
        elections_after_undo: epoch_end - epoch_at_undo,
        leader_end: shared.leader().map_or(-1, |(id, _)| id),
    })
}

/// Every data record of a stopped node's log as (offset, sequence number); values that are
/// not the client's are left out.
fn read_log(dir: &std::path::Path) -> Result<Vec<(i64, u64)>, String> {
    use engine::log::{Log, LogConfig};
    use engine::record::BatchView;
    let context = |e: &dyn std::fmt::Display| format!("reading the log in {}: {e}", dir.display());
    let log = Log::open(dir, LogConfig::for_reading()).map_err(|e| context(&e))?;
    let mut out = Vec::new();
    let mut offset = log.start_offset();
    // Bounded: every round moves `offset` past at least one batch, or stops.
    while offset < log.end_offset() {
        let pieces = log.read(offset, 1 << 20).map_err(|e| context(&e))?;
        if pieces.is_empty() {
            return Err(context(&format!("the log ends early at offset {offset}")));
        }
        for piece in pieces {
            let view = BatchView::parse(piece).map_err(|e| context(&e))?;
            offset = view.next_offset();
            if view.is_control() {
                continue;
            }
            for record in view.records() {
                let seq = record.value.as_deref().and_then(seq_of);
                if let Some(seq) = seq {
                    out.push((record.offset(view.base_offset()), seq));
                }
            }
        }
    }
    Ok(out)
}

fn kind_report(kind: FaultKind, cycles: &[Cycle]) -> KindReport {
    let of_kind: Vec<&Cycle> = cycles.iter().filter(|c| c.kind == kind).collect();
    let figures =
        |f: fn(&Cycle) -> f64| Summary::of(&of_kind.iter().map(|c| f(c)).collect::<Vec<_>>());
    KindReport {
        kind,
        cycles: of_kind.len(),
        unavailable: figures(|c| c.unavailable_ms),
        longest_gap: figures(|c| c.longest_gap_ms),
        elections_during: of_kind.iter().map(|c| c.elections_during).sum(),
        elections_after_undo: of_kind.iter().map(|c| c.elections_after_undo).sum(),
    }
}

fn print_summary(report: &Report) -> std::io::Result<()> {
    outln!("kind               cycles  unavailable ms p50 / p99 / max   longest gap max  elections during / after undo")?;
    for k in &report.kinds {
        let (u, g) = (k.unavailable.as_ref(), k.longest_gap.as_ref());
        outln!(
            "{:<18} {:>6}  {:>9.1} / {:>8.1} / {:>8.1}  {:>15.1}  {} / {}",
            k.kind.name(),
            k.cycles,
            u.map_or(f64::NAN, |s| s.p50_ms),
            u.map_or(f64::NAN, |s| s.p99_ms),
            u.map_or(f64::NAN, |s| s.max_ms),
            g.map_or(f64::NAN, |s| s.max_ms),
            k.elections_during,
            k.elections_after_undo
        )?;
    }
    let c = &report.client;
    let n = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
    outln!(
        "client: {} sent, {} acknowledged; connections left: {} closed by the node, {} refused \
         answers, {} for a new leader, {} timed out; {} connects failed",
        n(&c.sent),
        n(&c.acknowledged),
        n(&c.closed),
        n(&c.refused),
        n(&c.left_for_new_leader),
        n(&c.timed_out),
        n(&c.connect_failed)
    )?;
    for (id, r) in &report.read_back {
        outln!(
            "read-back node {id}: {} acknowledged records found, {} missing, {} misplaced",
            r.found,
            r.missing,
            r.misplaced
        )?;
    }
    outln!(
        "{:.0} s; load average {} at the start, {} at the end",
        report.elapsed_sec,
        report.loadavg_start,
        report.loadavg_end
    )?;
    Ok(())
}

fn csv(cycles: &[Cycle]) -> String {
    let mut out = String::from(
        "cycle,kind,node,fault_at_sec,unavailable_ms,longest_gap_ms,held_ms,settle_ms,\
         epoch_before,epoch_at_undo,epoch_end,elections_during,elections_after_undo,leader_end\n",
    );
    for c in cycles {
        out.push_str(&format!(
            "{},{},{},{:.3},{:.1},{:.1},{:.1},{:.1},{},{},{},{},{},{}\n",
            c.cycle,
            c.kind.name(),
            c.node,
            c.fault_at_sec,
            c.unavailable_ms,
            c.longest_gap_ms,
            c.held_ms,
            c.settle_ms,
            c.epoch_before,
            c.epoch_at_undo,
            c.epoch_end,
            c.elections_during,
            c.elections_after_undo,
            c.leader_end
        ));
    }
    out
}
