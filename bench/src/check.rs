//! The `check` subcommand: a correctness checker in the box (docs/testing.md, "The correctness
//! checker"). A local 3-voter cluster, plain and idempotent producers (acks=-1, several
//! requests in flight) and consumers running against it while a seeded nemesis kills, pauses and
//! restarts nodes and, as root, cuts them off, severs and isolates them (network namespaces) and
//! fills their disks (a small loop-mounted disk each); then every fault is
//! undone, the producers stop, the log is read from its start to the high watermark, and the
//! whole history is checked (check_history.rs, a pure function of the events). It prints a
//! verdict per check with counts, writes the history as JSON lines and an SVG timeline
//! (check_svg.rs), and fails on any violation.
//!
//! `--history-in FILE` checks a history written before, with no cluster. The hidden `--plant`
//! puts a lost acknowledgement or a changed read into the history before it is checked, to show
//! that the checks fail.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::{Args, ValueEnum};
use testkit::{Cluster, LeaderWait, Settings, Stderr};

use crate::check_clients::{fetch_once, Clients, Counts, FetchFailed, Recorder, Shared};
use crate::check_history::{analyse, value_of, Event, Verdict};
use crate::cluster_bench::{
    describe_exits, install_signal_handlers, ringraft_binary, ClusterSecurity, INTERRUPTED,
    LEADER_WAIT, NODE_LOG, STOP_WAIT,
};
use net::client::BlockingClient;

const VOTERS: usize = 3;
/// Segments of 64 MiB: the nodes preallocate whole segments, and a run writes little.
const SEGMENT_BYTES: u64 = 64 << 20;
/// With the disk-full fault: the smallest segment a node takes (docs/configuration.md), so
/// that the next one is allocated, and a full disk found, every few seconds of load.
const SMALL_SEGMENT_BYTES: u64 = 1 << 20;
/// Bytes a record takes in the log, at most (a one-record batch of a short value), for the
/// size of the small disks.
const LOG_BYTES_PER_RECORD: u64 = 160;
const POLL: Duration = Duration::from_millis(20);
/// Acknowledgements wanted after the last fault is undone before the producers stop: the
/// cluster serves again.
const STEADY_ACKS: u64 = 20;

/// A fault the nemesis puts on a node (docs/testing.md, "The correctness checker").
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Fault {
    /// SIGKILL, held down, started again.
    Kill,
    /// SIGSTOP, held, SIGCONT.
    Pause,
    /// SIGTERM (a clean shutdown, handing the lead over), started again at once.
    Restart,
    /// The node's host cut off from every other, held, healed (root: network namespaces).
    Partition,
    /// Two nodes cut off from each other only, held, mended (root: network namespaces).
    Sever,
    /// The node cut off from every other node but not from the clients (a sever from each),
    /// held, mended: a leader isolated so keeps answering the clients while the others elect
    /// a new one (root: network namespaces; docs/testing.md, "The correctness checker").
    Isolate,
    /// The node's disk filled by a ballast file (less than a segment left), held for
    /// `--disk-full-hold-ms`, the ballast deleted (root: each node's log directory on a small
    /// loop-mounted ext4 filesystem of its own, docs/operations.md "A full disk").
    DiskFull,
}

impl Fault {
    fn name(self) -> &'static str {
        match self {
            Fault::Kill => "kill",
            Fault::Pause => "pause",
            Fault::Restart => "restart",
            Fault::Partition => "partition",
            Fault::Sever => "sever",
            Fault::Isolate => "isolate",
            Fault::DiskFull => "disk-full",
        }
    }

    fn needs_namespaces(self) -> bool {
        matches!(self, Fault::Partition | Fault::Sever | Fault::Isolate)
    }

    fn needs_root(self) -> bool {
        self.needs_namespaces() || self == Fault::DiskFull
    }
}

/// What `--plant` puts into the history before it is checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Plant {
    /// A producer claims an acknowledgement that never happened: a record never sent,
    /// "acknowledged" at an offset that holds another record.
    LostAck,
    /// A consumer is shown, at an offset it read, a record that was sent but never committed
    /// (as if a node had served a record later truncated).
    ChangedRead,
}

#[derive(Args, Debug, Clone)]
pub struct CheckArgs {
    /// Seconds of faults (the producers and consumers run from before the first to after the
    /// last).
    #[arg(long, default_value_t = 60)]
    pub(crate) duration: u64,
    /// The faults the nemesis picks from (comma-separated). partition, sever, isolate and
    /// disk-full need root; the default is every fault, less those when not run as root.
    #[arg(long, value_enum, value_delimiter = ',')]
    pub(crate) faults: Option<Vec<Fault>>,
    /// The seed of the nemesis's schedule (default: from the clock; printed).
    #[arg(long)]
    pub(crate) seed: Option<u64>,
    /// Shortest and longest hold of a fault, ms.
    #[arg(long, default_value_t = 500)]
    pub(crate) hold_min_ms: u64,
    #[arg(long, default_value_t = 3000)]
    pub(crate) hold_max_ms: u64,
    /// Shortest and longest pause between faults, ms.
    #[arg(long, default_value_t = 500)]
    pub(crate) calm_min_ms: u64,
    #[arg(long, default_value_t = 2000)]
    pub(crate) calm_max_ms: u64,
    /// How long a full disk is held: a node finds its disk full only when it allocates its
    /// next segment (when the active one is half full, docs/operations.md "A full disk"), so
    /// longer than the other faults.
    #[arg(long, default_value_t = 8000)]
    pub(crate) disk_full_hold_ms: u64,
    /// Plain producers (a new record for every send).
    #[arg(long, default_value_t = 2)]
    pub(crate) producers: u32,
    /// Idempotent producers (a producer id from InitProducerId; unacknowledged records sent
    /// again with their sequence numbers).
    #[arg(long, default_value_t = 2)]
    pub(crate) idempotent_producers: u32,
    /// Requests in flight per producer (at most 5: the leader checks five batches per
    /// idempotent producer, docs/protocol.md "Idempotent producers").
    #[arg(long, default_value_t = 3)]
    pub(crate) inflight: usize,
    /// Records per second per producer (at most).
    #[arg(long, default_value_t = 200)]
    pub(crate) rate: u64,
    /// Consumers, each reading the log from offset 0 with Fetch.
    #[arg(long, default_value_t = 2)]
    pub(crate) consumers: u32,
    /// A client leaves a request unanswered this long.
    #[arg(long, default_value_t = 5000)]
    pub(crate) request_timeout_ms: u64,
    /// The longest the cluster may take to serve again after the last fault, and the final
    /// read to reach every acknowledged offset.
    #[arg(long, default_value_t = 30_000)]
    pub(crate) settle_timeout_ms: u64,
    /// Gaps between acknowledgements longer than this are drawn as unavailability windows.
    #[arg(long, default_value_t = 500)]
    pub(crate) unavailable_ms: u64,
    /// Write the history here (JSON lines, one event each).
    #[arg(long, default_value = "ringraft-check-history.jsonl")]
    pub(crate) history: PathBuf,
    /// Write the SVG timeline here.
    #[arg(long, default_value = "ringraft-check.svg")]
    pub(crate) svg: PathBuf,
    /// Write the verdict as one JSON object here.
    #[arg(long)]
    pub(crate) json: Option<PathBuf>,
    /// Check this history (written by an earlier run) instead of running a cluster.
    #[arg(long)]
    pub(crate) history_in: Option<PathBuf>,
    /// The producers' acks. -1 is what the checks hold the cluster to; 1 (an acknowledgement
    /// from the leader's own durable copy, before a majority has the record) shows the checker
    /// failing on real losses when a leader is cut off (docs/testing.md, "The correctness
    /// checker").
    #[arg(long, default_value_t = -1, allow_negative_numbers = true, hide = true)]
    pub(crate) acks: i16,
    /// Plant a violation into the history before checking it (to show the checker fails).
    #[arg(long, value_enum, value_delimiter = ',', hide = true)]
    pub(crate) plant: Vec<Plant>,
    /// A `key=value` handed to every node as `ringraft serve --override` (repeatable).
    #[arg(long = "node-override", value_name = "KEY=VALUE")]
    pub(crate) node_overrides: Vec<String>,
    /// The `ringraft` binary (default: next to this executable).
    #[arg(long)]
    pub(crate) ringraft_bin: Option<PathBuf>,
    /// How the voters talk to each other (`voters-mtls` or `plaintext`; clients use PLAINTEXT).
    #[arg(long, value_enum, default_value_t = ClusterSecurity::VotersMtls)]
    pub(crate) security: ClusterSecurity,
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

fn faults(args: &CheckArgs) -> Result<Vec<Fault>, String> {
    let faults = match &args.faults {
        Some(faults) => faults.clone(),
        None => {
            let mut all = vec![Fault::Kill, Fault::Pause, Fault::Restart];
            if is_root() {
                all.extend([
                    Fault::Partition,
                    Fault::Sever,
                    Fault::Isolate,
                    Fault::DiskFull,
                ]);
            }
            all
        }
    };
    if faults.is_empty() {
        return Err("--faults: at least one".into());
    }
    if faults.iter().any(|f| f.needs_root()) && !is_root() {
        return Err(
            "partition, sever and isolate cut nodes off in network namespaces, and disk-full \
             mounts a small disk per node, which need root; without it, use --faults \
             kill,pause,restart"
                .into(),
        );
    }
    Ok(faults)
}

fn validate(args: &CheckArgs) -> Result<(), String> {
    if args.duration == 0 || args.rate == 0 {
        return Err("--duration and --rate: above 0".into());
    }
    if args.acks != -1 && args.acks != 1 {
        return Err("--acks: -1 or 1".into());
    }
    if !(1..=5).contains(&args.inflight) {
        return Err("--inflight: 1 to 5".into());
    }
    if args.producers + args.idempotent_producers == 0 || args.consumers == 0 {
        return Err("at least one producer and one consumer".into());
    }
    if args.hold_min_ms > args.hold_max_ms || args.calm_min_ms > args.calm_max_ms {
        return Err("--hold-min-ms/--calm-min-ms: not above the max".into());
    }
    if args.security == ClusterSecurity::Tls {
        return Err("--security: voters-mtls or plaintext (the clients are on PLAINTEXT)".into());
    }
    Ok(())
}

/// xorshift64*: the nemesis's schedule from a seed.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Self(seed.max(1))
    }
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn millis(&mut self, low: u64, high: u64) -> Duration {
        Duration::from_millis(low + self.below(high - low + 1))
    }
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

/// The cluster; every fault undone when dropped, then the nodes killed by their guards.
struct Nodes {
    cluster: Cluster,
    /// Faults in place: (fault, node, the other node of a sever).
    applied: Vec<(Fault, i32, Option<i32>)>,
    /// Each node's small disk, with the disk-full fault: (node, disk).
    disks: Vec<(i32, LoopDisk)>,
}

impl Nodes {
    fn undo_everything(&mut self) {
        for (fault, node, other) in std::mem::take(&mut self.applied) {
            let _ = undo(self, fault, node, other);
        }
    }

    fn disk(&self, id: i32) -> Result<&LoopDisk, String> {
        self.disks
            .iter()
            .find(|(node, _)| *node == id)
            .map(|(_, disk)| disk)
            .ok_or_else(|| format!("node {id} has no small disk"))
    }
}

/// A node's log directory on an ext4 filesystem of its own, in a file, loop-mounted (as
/// tools/tests/small_disk.rs does it; root). Unmounted and the file removed when dropped.
struct LoopDisk {
    image: PathBuf,
    mount: PathBuf,
}

impl LoopDisk {
    fn new(image: PathBuf, mount: &Path, bytes: u64) -> Result<LoopDisk, String> {
        let run = |program: &str, args: &[&std::ffi::OsStr]| -> Result<(), String> {
            let out = std::process::Command::new(program)
                .args(args)
                .output()
                .map_err(|e| format!("cannot run {program} (e2fsprogs, mount): {e}"))?;
            if out.status.success() {
                Ok(())
            } else {
                Err(format!(
                    "{program} {args:?}: {}: {}",
                    out.status,
                    String::from_utf8_lossy(&out.stderr).trim()
                ))
            }
        };
        let file = std::fs::File::create(&image)
            .map_err(|e| format!("creating {}: {e}", image.display()))?;
        file.set_len(bytes)
            .map_err(|e| format!("sizing {}: {e}", image.display()))?;
        run(
            "mkfs.ext4",
            &["-q".as_ref(), "-F".as_ref(), image.as_os_str()],
        )?;
        std::fs::create_dir_all(mount).map_err(|e| format!("{}: {e}", mount.display()))?;
        let disk = LoopDisk {
            image,
            mount: mount.to_path_buf(),
        };
        run(
            "mount",
            &[
                "-o".as_ref(),
                "loop".as_ref(),
                disk.image.as_os_str(),
                mount.as_os_str(),
            ],
        )?;
        Ok(disk)
    }

    fn ballast(&self) -> PathBuf {
        self.mount.join("ballast")
    }

    /// Fills the disk but `leave` bytes with the ballast file.
    fn fill(&self, leave: u64) -> Result<(), String> {
        use std::os::fd::AsRawFd;
        let free = engine::os::file::free_bytes(&self.mount)
            .map_err(|e| format!("statvfs of {}: {e}", self.mount.display()))?;
        let path = self.ballast();
        let file = std::fs::File::create(&path)
            .map_err(|e| format!("creating {}: {e}", path.display()))?;
        let len = libc::off_t::try_from(free.saturating_sub(leave)).unwrap_or(libc::off_t::MAX);
        // SAFETY: a plain syscall on a file descriptor we own.
        if len > 0 && unsafe { libc::fallocate(file.as_raw_fd(), 0, 0, len) } != 0 {
            return Err(format!(
                "fallocate of {}: {}",
                path.display(),
                std::io::Error::last_os_error()
            ));
        }
        Ok(())
    }

    fn empty(&self) -> Result<(), String> {
        match std::fs::remove_file(self.ballast()) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(format!("removing {}: {e}", self.ballast().display()))
            }
            _ => Ok(()),
        }
    }
}

impl Drop for LoopDisk {
    fn drop(&mut self) {
        // Lazily: a node killed a moment ago may still hold files open.
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.mount)
            .status();
        let _ = std::fs::remove_file(&self.image);
    }
}

impl Drop for Nodes {
    fn drop(&mut self) {
        // A stopped node does not die of SIGTERM, and a cut-off one's namespace goes with the
        // lab: undo first, then the guards kill the processes.
        for node in &self.cluster.nodes {
            if let Some(process) = &node.process {
                process.signal(libc::SIGCONT);
            }
        }
        self.undo_everything();
        // The disks are unmounted once no node runs, before the cluster's directory goes.
        for node in &mut self.cluster.nodes {
            drop(node.process.take());
        }
        self.disks.clear();
    }
}

fn apply(nodes: &mut Nodes, fault: Fault, id: i32, other: Option<i32>) -> Result<(), String> {
    let not_running = || format!("node {id} is not running");
    if fault == Fault::DiskFull {
        // Less than a segment left: the next allocation fails (docs/operations.md).
        return nodes.disk(id)?.fill(SMALL_SEGMENT_BYTES / 4);
    }
    let cluster = &mut nodes.cluster;
    match fault {
        Fault::Kill | Fault::Restart => {
            let signal = if fault == Fault::Kill {
                libc::SIGKILL
            } else {
                libc::SIGTERM
            };
            let process = cluster.node(id).process.as_mut().ok_or_else(not_running)?;
            process.signal(signal);
            process
                .wait_exit(STOP_WAIT)
                .ok_or_else(|| format!("node {id} outlived signal {signal} for {STOP_WAIT:?}"))?;
            if fault == Fault::Restart {
                cluster.start(id, &[], Stderr::File)?;
            }
            Ok(())
        }
        Fault::Pause => {
            let process = cluster.node(id).process.as_ref().ok_or_else(not_running)?;
            process.signal(libc::SIGSTOP);
            Ok(())
        }
        Fault::Partition => cluster.cut(id),
        Fault::Sever => cluster.sever(id, other.ok_or("a sever needs two nodes")?),
        Fault::Isolate => cluster
            .others(id)
            .into_iter()
            .try_for_each(|other| cluster.sever(id, other)),
        Fault::DiskFull => unreachable!("filled above"),
    }
}

fn undo(nodes: &mut Nodes, fault: Fault, id: i32, other: Option<i32>) -> Result<(), String> {
    if fault == Fault::DiskFull {
        return nodes.disk(id)?.empty();
    }
    let cluster = &mut nodes.cluster;
    match fault {
        Fault::Kill => cluster.start(id, &[], Stderr::File),
        Fault::Restart => Ok(()),
        Fault::Pause => {
            if let Some(process) = &cluster.node(id).process {
                process.signal(libc::SIGCONT);
            }
            Ok(())
        }
        Fault::Partition => cluster.heal(id),
        Fault::Sever => cluster.mend(id, other.ok_or("a sever needs two nodes")?),
        Fault::Isolate => cluster
            .others(id)
            .into_iter()
            .try_for_each(|other| cluster.mend(id, other)),
        Fault::DiskFull => unreachable!("emptied above"),
    }
}

pub fn run(args: CheckArgs) -> Result<(), String> {
    validate(&args)?;
    if let Some(path) = &args.history_in {
        let mut events = read_history(path)?;
        plant(&mut events, &args.plant)?;
        return report(&args, &events, None);
    }
    let faults = faults(&args)?;
    install_signal_handlers();
    let seed = args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
    });
    let (mut events, run_error) = run_cluster(&args, &faults, seed);
    // The history is written whatever happened: a failed run's is the first thing to read.
    plant(&mut events, &args.plant)?;
    let result = report(&args, &events, Some(seed));
    match run_error {
        Some(error) => Err(format!(
            "{error} (the history so far is in {})",
            args.history.display()
        )),
        None => result,
    }
}

/// Starts the cluster, runs the clients and the nemesis, reads the log at the end; the
/// history, and the error that cut the run short if one did.
fn run_cluster(args: &CheckArgs, faults: &[Fault], seed: u64) -> (Vec<Event>, Option<String>) {
    let start = Instant::now();
    let recorder = Arc::new(Recorder::new(start));
    let result = (|| -> Result<(), String> {
        let bin = ringraft_binary(args.ringraft_bin.as_deref())?;
        let namespaces = faults.iter().any(|f| f.needs_namespaces());
        let disk_full = faults.contains(&Fault::DiskFull);
        let settings = Settings {
            cluster_id: "ringraft-bench-check".into(),
            dir_prefix: "ringraft-check-".into(),
            rust_log: NODE_LOG.into(),
            overrides: args.node_overrides.clone(),
            tail_lines: 20,
            tail_from_panic: true,
            security: match args.security {
                ClusterSecurity::Plaintext => testkit::Security::Plaintext,
                _ => testkit::Security::MutualTls,
            },
            segment_bytes: Some(if disk_full {
                SMALL_SEGMENT_BYTES
            } else {
                SEGMENT_BYTES
            }),
            ..Settings::new(&bin)
        };
        let cluster = if namespaces {
            Cluster::create_in_lab(settings, VOTERS, VOTERS)?
        } else {
            Cluster::create(settings, VOTERS)?
        };
        let mut nodes = Nodes {
            cluster,
            applied: Vec::new(),
            disks: Vec::new(),
        };
        if disk_full {
            // Room for three times what the run can write, and 64 MiB at least; the image
            // files are sparse.
            let records = u64::from(args.producers + args.idempotent_producers)
                * args.rate
                * (args.duration + 120);
            let bytes = (3 * records * LOG_BYTES_PER_RECORD).max(64 << 20);
            for node in &nodes.cluster.nodes {
                let image = nodes
                    .cluster
                    .root
                    .path()
                    .join(format!("disk-{}.img", node.id));
                nodes
                    .disks
                    .push((node.id, LoopDisk::new(image, &node.dir, bytes)?));
            }
        }
        nodes.cluster.start_all(Stderr::File)?;
        nodes.cluster.wait_for_leader(&LeaderWait {
            fail_on_exit: true,
            interrupted: Some(&INTERRUPTED),
            ..LeaderWait::within(LEADER_WAIT)
        })?;
        let host = nodes.cluster.lab.as_ref().map(|lab| lab.client().clone());
        let shared = Shared {
            ids: nodes.cluster.nodes.iter().map(|n| n.id).collect(),
            addrs: nodes.cluster.nodes.iter().map(|n| n.addr).collect(),
            views: Mutex::new(vec![None; VOTERS]),
            recorder: Arc::clone(&recorder),
            stop_producers: AtomicBool::new(false),
            stop_all: AtomicBool::new(false),
            positions: (0..args.consumers).map(|_| AtomicU64::new(0)).collect(),
            acked_end: AtomicU64::new(0),
            error: Mutex::new(None),
            request_timeout: Duration::from_millis(args.request_timeout_ms),
            inflight: args.inflight,
            acks: args.acks,
            send_every: Duration::from_secs_f64(1.0 / args.rate as f64),
        };
        let counts = Counts {
            plain: args.producers,
            idempotent: args.idempotent_producers,
            consumers: args.consumers,
        };
        let where_ = if namespaces {
            "each in a network namespace of its own"
        } else {
            "on 127.0.0.1"
        };
        outln!(
            "check: {VOTERS} voters {where_}; {} plain and {} idempotent producers (acks={}, {} in \
             flight, {} records/s each), {} consumers; faults {} for {} s; seed {seed}",
            args.producers,
            args.idempotent_producers,
            args.acks,
            args.inflight,
            args.rate,
            args.consumers,
            faults
                .iter()
                .map(|f| f.name())
                .collect::<Vec<_>>()
                .join(","),
            args.duration
        )
        .map_err(|e| crate::out::describe(&e))?;
        // Declared after `nodes`: dropped (stopped and joined) before the nodes are killed.
        let mut clients = Clients::start(shared, host.clone(), &counts);
        let shared = Arc::clone(&clients.shared);
        wait_for(
            "the first acknowledgements",
            Duration::from_millis(args.settle_timeout_ms),
            || {
                clients.check()?;
                let acks = recorder.acks.load(Ordering::Relaxed);
                (acks >= STEADY_ACKS)
                    .then_some(())
                    .ok_or(format!("{acks} acknowledged"))
            },
        )?;
        nemesis(args, faults, seed, &mut nodes, &clients, &recorder)?;
        nodes.undo_everything();
        // Serving again: more acknowledgements after the last fault, then the producers stop.
        let from = recorder.acks.load(Ordering::Relaxed);
        wait_for(
            "acknowledgements after the last fault",
            Duration::from_millis(args.settle_timeout_ms),
            || {
                clients.check()?;
                nodes.cluster.check_running()?;
                let more = recorder.acks.load(Ordering::Relaxed) - from;
                (more >= STEADY_ACKS)
                    .then_some(())
                    .ok_or(format!("{more} acknowledged since"))
            },
        )?;
        clients.stop_producers();
        let acked_end = shared.acked_end.load(Ordering::Relaxed) as i64;
        let end = final_read(args, &shared, host.as_ref(), acked_end)?;
        // The consumers read on to the final high watermark (bounded; short of it is no
        // violation, only less checked).
        let _ = wait_for(
            "the consumers reaching the final high watermark",
            Duration::from_millis(args.settle_timeout_ms),
            || {
                let behind = shared
                    .positions
                    .iter()
                    .filter(|p| p.load(Ordering::Relaxed) < end)
                    .count();
                (behind == 0)
                    .then_some(())
                    .ok_or(format!("{behind} consumers behind"))
            },
        );
        clients.stop();
        clients.check()?;
        nodes.undo_everything();
        let exits = nodes.cluster.stop_all(STOP_WAIT);
        if disk_full {
            // Whether the full disks were found (at a segment allocation, so not every time).
            let found: usize = nodes
                .cluster
                .nodes
                .iter()
                .map(|n| {
                    std::fs::read_to_string(nodes.cluster.stderr_path(n.id))
                        .unwrap_or_default()
                        .matches("disk full, this node takes no more appends")
                        .count()
                })
                .sum();
            outln!("disk-full: the nodes logged a full disk {found} times")
                .map_err(|e| crate::out::describe(&e))?;
        }
        if let Some((id, _)) = exits.iter().find(|(_, s)| !s.is_some_and(|s| s.success())) {
            return Err(format!(
                "node {id} did not stop cleanly: {}\n{}",
                describe_exits(&exits).join(", "),
                nodes.cluster.stderr_tails()
            ));
        }
        Ok(())
    })();
    let mut events = recorder.take();
    events.sort_by(|a, b| a.t_ms().total_cmp(&b.t_ms()));
    (events, result.err())
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

/// The seeded schedule for `--duration`: a fault on the leader (half the rounds) or a random
/// node, held, undone, a pause; one fault at a time, so a majority is only ever lost to a
/// sever's or a partition's side effects, never to two faults at once.
fn nemesis(
    args: &CheckArgs,
    faults: &[Fault],
    seed: u64,
    nodes: &mut Nodes,
    clients: &Clients,
    recorder: &Recorder,
) -> Result<(), String> {
    let mut rng = Rng::new(seed);
    let end = Instant::now() + Duration::from_secs(args.duration);
    let mut last_print = Instant::now();
    while Instant::now() < end {
        clients.check()?;
        // A node that stopped on its own must not be hidden by the next fault.
        nodes.cluster.check_running()?;
        let fault = faults[rng.below(faults.len() as u64) as usize];
        let ids: Vec<i32> = nodes.cluster.nodes.iter().map(|n| n.id).collect();
        let leader = clients.shared.leader().map(|(id, _)| id);
        let node = match leader {
            Some(id) if rng.below(2) == 0 => id,
            _ => ids[rng.below(ids.len() as u64) as usize],
        };
        let other = (fault == Fault::Sever).then(|| {
            let others: Vec<i32> = ids.iter().copied().filter(|&i| i != node).collect();
            others[rng.below(others.len() as u64) as usize]
        });
        let hold = rng.millis(args.hold_min_ms, args.hold_max_ms);
        let calm = rng.millis(args.calm_min_ms, args.calm_max_ms);
        let kind = match other {
            Some(other) => format!("{}:{other}", fault.name()),
            None => fault.name().to_string(),
        };
        recorder.push(|t_ms| Event::FaultStart {
            t_ms,
            kind: kind.clone(),
            node,
        });
        // Recorded before it is put, so that a fault put in part is undone too.
        nodes.applied.push((fault, node, other));
        apply(nodes, fault, node, other)?;
        let held = match fault {
            Fault::Restart => Ok(()),
            Fault::DiskFull => sleep_checked(Duration::from_millis(args.disk_full_hold_ms)),
            _ => sleep_checked(hold),
        };
        nodes.undo_everything();
        recorder.push(|t_ms| Event::FaultEnd {
            t_ms,
            kind: kind.clone(),
            node,
        });
        held?;
        sleep_checked(calm)?;
        if last_print.elapsed() >= Duration::from_secs(5) {
            last_print = Instant::now();
            outln!(
                "{:>5.0} s: {} acknowledged, {} records read, leader {:?}",
                recorder.ms_since_start(Instant::now()) / 1000.0,
                recorder.acks.load(Ordering::Relaxed),
                recorder.records_read.load(Ordering::Relaxed),
                clients.shared.leader()
            )
            .map_err(|e| crate::out::describe(&e))?;
        }
    }
    Ok(())
}

/// The final full read: from the leader, the log from its start to its high watermark, once
/// that is at or past `acked_end` (every acknowledged offset); recorded as an
/// [`Event::Final`]. If it does not get there within `--settle-timeout-ms`, the log is read
/// to the high watermark it has (the checks then report what is missing: records
/// acknowledged that did not commit). Returns the high watermark.
fn final_read(
    args: &CheckArgs,
    shared: &Shared,
    host: Option<&testkit::netns::Host>,
    acked_end: i64,
) -> Result<u64, String> {
    let _entered = host.map(|h| h.enter()).transpose()?;
    let settle = Instant::now() + Duration::from_millis(args.settle_timeout_ms);
    // After `settle`, as long again for a read short of `acked_end`.
    let deadline = settle + Duration::from_millis(args.settle_timeout_ms);
    let mut last = String::from("no leader named");
    while Instant::now() < deadline {
        sleep_checked(POLL)?;
        let Some((leader, _)) = shared.leader() else {
            continue;
        };
        let addr = shared.addrs[shared
            .ids
            .iter()
            .position(|&i| i == leader)
            .expect("a node")];
        let Ok(mut client) = BlockingClient::connect(addr, Duration::from_secs(1)) else {
            last = format!("node {leader} refused the connection");
            continue;
        };
        let at_least = if Instant::now() < settle {
            acked_end
        } else {
            0
        };
        match read_all(&mut client, at_least) {
            Ok((log_start, high_watermark, records)) => {
                if high_watermark < acked_end {
                    outln!(
                        "the final read: the high watermark stayed at {high_watermark}, below \
                         the acknowledged end {acked_end}; read to it"
                    )
                    .map_err(|e| crate::out::describe(&e))?;
                }
                shared.recorder.push(|t_ms| Event::Final {
                    t_ms,
                    node: leader,
                    log_start,
                    high_watermark,
                    records,
                });
                return Ok(high_watermark as u64);
            }
            Err(why) => last = format!("node {leader}: {why}"),
        }
    }
    Err(format!("the final read: {last}"))
}

/// Reads the whole log with Fetch: (log start, high watermark, records), once the high
/// watermark is at `at_least` or beyond. Bounded: each round reads at least one record or
/// fails.
fn read_all(
    client: &mut BlockingClient,
    at_least: i64,
) -> Result<(i64, i64, Vec<crate::check_history::Seen>), String> {
    let (_, high_watermark, log_start) = fetch_once(client, 0).map_err(|FetchFailed(why)| why)?;
    if high_watermark < at_least {
        return Err(format!(
            "high watermark {high_watermark}, below the acknowledged end {at_least}"
        ));
    }
    let mut records = Vec::new();
    let mut next = log_start.max(0);
    while next < high_watermark {
        let (got, _, _) = fetch_once(client, next).map_err(|FetchFailed(why)| why)?;
        let Some((last, _)) = got.last() else {
            return Err(format!("an empty answer at {next}, below {high_watermark}"));
        };
        next = last + 1;
        records.extend(got);
    }
    records.retain(|(offset, _)| *offset < high_watermark);
    Ok((log_start, high_watermark, records))
}

fn read_history(path: &Path) -> Result<Vec<Event>, String> {
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(i, line)| {
            serde_json::from_str(line).map_err(|e| format!("{}:{}: {e}", path.display(), i + 1))
        })
        .collect()
}

/// Plants what `plants` asks for into `events` (each also recorded as a
/// [`Event::Planted`]); Err when the history has nothing to plant it on.
pub fn plant(events: &mut Vec<Event>, plants: &[Plant]) -> Result<(), String> {
    let t_end = events.last().map_or(0.0, Event::t_ms);
    for &what in plants {
        match what {
            Plant::LostAck => {
                // The first acknowledgement's producer claims one more record, never sent, at
                // the offset of that acknowledgement.
                let (producer, offset) = events
                    .iter()
                    .find_map(|e| match e {
                        Event::Ack {
                            producer, offset, ..
                        } => Some((*producer, *offset)),
                        _ => None,
                    })
                    .ok_or("--plant lost-ack: no acknowledgement in the history")?;
                let seq = u64::MAX / 2;
                events.push(Event::Ack {
                    t_ms: t_end,
                    producer,
                    seq,
                    offset,
                    node: -1,
                });
                events.push(Event::Planted {
                    t_ms: t_end,
                    what: format!(
                        "lost-ack: {} claimed acknowledged at offset {offset}, never sent",
                        value_of(producer, seq)
                    ),
                });
            }
            Plant::ChangedRead => {
                // The first data record a consumer read becomes one that was sent (a new
                // send, never acknowledged, never committed).
                let (index, slot, producer) = events
                    .iter()
                    .enumerate()
                    .find_map(|(i, e)| match e {
                        Event::Read { records, .. } => records
                            .iter()
                            .position(|(_, v)| v.is_some())
                            .map(|slot| (i, slot, 0)),
                        _ => None,
                    })
                    .ok_or("--plant changed-read: no record read in the history")?;
                let seq = u64::MAX / 2 + 1;
                let Event::Read { records, t_ms, .. } = &mut events[index] else {
                    unreachable!("found a read")
                };
                let offset = records[slot].0;
                records[slot].1 = Some(value_of(producer, seq));
                let t = *t_ms;
                events.insert(
                    0,
                    Event::Send {
                        t_ms: 0.0,
                        producer,
                        seq,
                        idempotent: false,
                        node: -1,
                    },
                );
                events.push(Event::Planted {
                    t_ms: t_end,
                    what: format!(
                        "changed-read: the read at {t:.0} ms shows {} at offset {offset}, sent but never committed",
                        value_of(producer, seq)
                    ),
                });
            }
        }
    }
    Ok(())
}

/// Writes the history and the SVG, prints the verdict (and writes it as JSON); Err when
/// any check failed.
fn report(args: &CheckArgs, events: &[Event], seed: Option<u64>) -> Result<(), String> {
    if args.history_in.as_deref() != Some(args.history.as_path()) {
        write_history(&args.history, events)?;
    }
    let verdict = analyse(events);
    let svg = crate::check_svg::render(events, &verdict, args.unavailable_ms as f64, seed);
    std::fs::write(&args.svg, svg).map_err(|e| format!("writing {}: {e}", args.svg.display()))?;
    print_verdict(&verdict).map_err(|e| crate::out::describe(&e))?;
    outln!(
        "history: {} ({} events); timeline: {}",
        args.history.display(),
        events.len(),
        args.svg.display()
    )
    .map_err(|e| crate::out::describe(&e))?;
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(&serde_json::json!({
            "seed": seed,
            "verdict": verdict,
        }))
        .expect("the verdict serialises");
        std::fs::write(path, text).map_err(|e| format!("writing {}: {e}", path.display()))?;
    }
    match verdict.violations() {
        0 => Ok(()),
        n => Err(format!(
            "{n} violations ({})",
            verdict
                .checks
                .iter()
                .filter(|c| c.violations > 0)
                .map(|c| format!("{} {}", c.name, c.violations))
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

fn write_history(path: &Path, events: &[Event]) -> Result<(), String> {
    let context = |e: std::io::Error| format!("writing {}: {e}", path.display());
    let file = std::fs::File::create(path).map_err(context)?;
    let mut out = std::io::BufWriter::new(file);
    for event in events {
        serde_json::to_writer(&mut out, event).expect("an event serialises");
        out.write_all(b"\n").map_err(context)?;
    }
    out.flush().map_err(context)
}

fn print_verdict(verdict: &Verdict) -> std::io::Result<()> {
    let c = &verdict.counts;
    outln!(
        "history: {} sends of {} records, {} acknowledged, {} indeterminate ({} of those records \
         in the final read); {} reads of {} records, {} failed; {} faults, {} leaders; final \
         read: {} records, high watermark {}{}",
        c.sends,
        c.records_sent,
        c.acknowledged,
        c.indeterminate_sends,
        c.unacknowledged_in_final,
        c.reads,
        c.records_read,
        c.read_errors,
        c.faults,
        c.leaders,
        c.final_records,
        c.final_high_watermark,
        if c.planted > 0 {
            format!("; {} planted violations", c.planted)
        } else {
            String::new()
        }
    )?;
    outln!(
        "reads answered with a high watermark below the consumer's position: {} (allowed: no \
         leader lease yet)",
        c.reads_behind_position
    )?;
    for check in &verdict.checks {
        let verdict = if check.violations == 0 { "ok" } else { "FAIL" };
        outln!(
            "{:<14} {:<4} {:>6} violations  ({})",
            check.name,
            verdict,
            check.violations,
            check.meaning
        )?;
        for example in &check.examples {
            outln!("    {example}")?;
        }
    }
    outln!(
        "verdict: {}",
        if verdict.violations() == 0 {
            "clean".to_string()
        } else {
            format!("{} violations", verdict.violations())
        }
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check_history::{CHANGED, LOST, UNSEEN};

    /// Producer 0's records 0..3 acknowledged at offsets 0..3, read by one consumer, and the
    /// final read.
    fn clean() -> Vec<Event> {
        let mut events = Vec::new();
        let log: Vec<_> = (0..4).map(|i| (i as i64, Some(value_of(0, i)))).collect();
        for seq in 0..4 {
            events.push(Event::Send {
                t_ms: seq as f64,
                producer: 0,
                seq,
                idempotent: true,
                node: 1,
            });
            events.push(Event::Ack {
                t_ms: seq as f64 + 0.5,
                producer: 0,
                seq,
                offset: seq as i64,
                node: 1,
            });
        }
        events.push(Event::Read {
            t_ms: 5.0,
            consumer: 0,
            node: 1,
            fetch_offset: 0,
            high_watermark: 4,
            records: log.clone(),
        });
        events.push(Event::Final {
            t_ms: 6.0,
            node: 1,
            log_start: 0,
            high_watermark: 4,
            records: log,
        });
        events
    }

    fn failing(events: &[Event]) -> Vec<(&'static str, u64)> {
        analyse(events)
            .checks
            .iter()
            .filter(|c| c.violations > 0)
            .map(|c| (c.name, c.violations))
            .collect()
    }

    #[test]
    fn each_plant_fails_its_checks_and_says_so() {
        assert_eq!(failing(&clean()), vec![]);
        let mut events = clean();
        plant(&mut events, &[Plant::LostAck]).unwrap();
        let found = failing(&events);
        assert!(
            found.contains(&(LOST, 1)) && found.contains(&(UNSEEN, 1)),
            "{found:?}"
        );
        assert!(!found.iter().any(|(name, _)| *name == CHANGED), "{found:?}");
        let mut events = clean();
        plant(&mut events, &[Plant::ChangedRead]).unwrap();
        assert_eq!(failing(&events), vec![(CHANGED, 1)]);
        let planted = |events: &[Event]| {
            events
                .iter()
                .filter(|e| matches!(e, Event::Planted { .. }))
                .count()
        };
        assert_eq!(planted(&events), 1);
        let mut events = clean();
        plant(&mut events, &[Plant::LostAck, Plant::ChangedRead]).unwrap();
        assert_eq!(planted(&events), 2);
        // Nothing to plant on: refused, not silently skipped.
        assert!(plant(&mut vec![], &[Plant::LostAck]).is_err());
        assert!(plant(&mut vec![], &[Plant::ChangedRead]).is_err());
    }

    #[test]
    fn a_history_goes_through_its_file_unchanged() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("history.jsonl");
        let events = clean();
        write_history(&path, &events).unwrap();
        assert_eq!(read_history(&path).unwrap(), events);
        std::fs::write(&path, "{\"type\":\"send\"}\n").unwrap();
        let error = read_history(&path).unwrap_err();
        assert!(error.contains("history.jsonl:1"), "{error}");
    }

    #[test]
    fn the_schedule_is_the_seeds() {
        let draws = |seed| {
            let mut rng = Rng::new(seed);
            (0..8).map(|_| rng.below(1000)).collect::<Vec<_>>()
        };
        assert_eq!(draws(47), draws(47));
        assert_ne!(draws(47), draws(48));
        let mut rng = Rng::new(0);
        for _ in 0..1000 {
            let d = rng.millis(500, 3000);
            assert!((500..=3000).contains(&(d.as_millis() as u64)));
        }
    }
}
