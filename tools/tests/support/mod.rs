//! Process-test support: the test kit's cluster of real `ringraft serve` processes on 127.0.0.1
//! (ringraft-testkit) as the tests use it, and what only these tests need: a checker that reads
//! every voter's log after the fact, a producing load thread, raw peer requests, nodes on a
//! private mount.

#![allow(dead_code)]

pub mod clients;
pub mod nemesis;

use std::io::Read;
use std::net::{SocketAddr, TcpStream};
use std::ops::{Deref, DerefMut};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use engine::raft::{ErrorCode, Request, Response};
use engine::record::{BatchView, RecordBatchBuilder};
use net::client::BlockingClient;
use net::wire::{quorum, RequestHeader, ResponseHeader, WireReader, WireWriter};
use testkit::{LeaderWait, Settings, Stderr};

#[allow(unused_imports)] // each test binary uses some
pub use testkit::{node_properties, read_stderr, ProcessGuard};

pub const WAIT: Duration = Duration::from_secs(20);
pub const CLUSTER_ID: &str = "process-test";

/// How long [`Cluster::stop_all`] waits after SIGTERM (one deadline for all the nodes).
pub const STOP_WAIT: Duration = Duration::from_secs(15);

/// The kit's cluster (nodes, root directory, settings: its fields and methods), with its
/// fallible calls made panics, as a test wants them, and the tests' settings: this `ringraft`
/// binary, [`CLUSTER_ID`], `RUST_LOG=warn`.
pub struct Cluster(testkit::Cluster);

impl Deref for Cluster {
    type Target = testkit::Cluster;
    fn deref(&self) -> &testkit::Cluster {
        &self.0
    }
}

impl DerefMut for Cluster {
    fn deref_mut(&mut self) -> &mut testkit::Cluster {
        &mut self.0
    }
}

/// Every node's `log.segment.bytes`: the tests write kilobytes to megabytes, and a 1 GiB
/// preallocated segment per node, several clusters at once, filled the CI machine's disk
/// (nodes stopped with ENOSPC writing their quorum-state file before any leader was elected).
pub const SEGMENT_BYTES: u64 = 64 << 20;

pub fn settings() -> Settings {
    Settings {
        cluster_id: CLUSTER_ID.into(),
        segment_bytes: Some(SEGMENT_BYTES),
        ..Settings::new(binary())
    }
}

pub fn free_port() -> u16 {
    testkit::free_ports(1).unwrap()[0]
}

pub fn binary() -> &'static str {
    env!("CARGO_BIN_EXE_ringraft")
}

fn ok<T>(result: Result<T, String>) -> T {
    result.unwrap_or_else(|e| panic!("{e}"))
}

impl Cluster {
    /// Writes the server.properties of `count` voters (not started).
    pub fn new(count: i32) -> Cluster {
        Cluster(ok(testkit::Cluster::create(settings(), count as usize)))
    }

    /// [`Cluster::new`] with the tests' [`settings`] changed by `change` (overrides of every
    /// start, segment size).
    pub fn new_with(count: i32, change: impl FnOnce(&mut Settings)) -> Cluster {
        let mut settings = settings();
        change(&mut settings);
        Cluster(ok(testkit::Cluster::create(settings, count as usize)))
    }

    /// [`Cluster::new`] with each node in a network namespace of its own, on one bridge of a
    /// lab of `hosts` hosts (testkit's `Cluster::create_in_lab`): to be partitioned for real.
    pub fn new_in_lab(count: i32, hosts: usize) -> Cluster {
        Cluster(ok(testkit::Cluster::create_in_lab(
            settings(),
            count as usize,
            hosts,
        )))
    }

    /// [`Cluster::new_in_lab`] with the voters on mutual TLS, as [`Cluster::new_mutual_tls`].
    pub fn new_mutual_tls_in_lab(count: i32, hosts: usize) -> Cluster {
        Self::new_in_lab_with(count, hosts, |s| s.security = testkit::Security::MutualTls)
    }

    /// [`Cluster::new_in_lab`] with the tests' [`settings`] changed by `change`.
    pub fn new_in_lab_with(
        count: i32,
        hosts: usize,
        change: impl FnOnce(&mut Settings),
    ) -> Cluster {
        let mut settings = settings();
        change(&mut settings);
        Cluster(ok(testkit::Cluster::create_in_lab(
            settings,
            count as usize,
            hosts,
        )))
    }

    /// [`Cluster::new`] with a mutual-TLS controller listener per node and a PLAINTEXT client
    /// listener (testkit's `Security::MutualTls`).
    pub fn new_mutual_tls(count: i32) -> Cluster {
        let settings = Settings {
            security: testkit::Security::MutualTls,
            ..settings()
        };
        Cluster(ok(testkit::Cluster::create(settings, count as usize)))
    }

    /// Starts every node, its stderr appended to [`testkit::Cluster::stderr_path`] so that a
    /// failure can show why a node stopped (a CI run failed with nothing to read until then).
    pub fn start_all(&mut self) {
        ok(self.0.start_all(Stderr::File));
    }

    /// [`Cluster::start_all`], then [`Cluster::wait_for_leader`] with no node excluded: the
    /// start most tests make. Returns the leader.
    pub fn start_all_and_elect(&mut self) -> i32 {
        self.start_all();
        self.wait_for_leader(None)
    }

    /// `count` voters ([`Cluster::new`]) started, and the leader they elected.
    pub fn started(count: i32) -> (Cluster, i32) {
        let mut cluster = Cluster::new(count);
        let leader = cluster.start_all_and_elect();
        (cluster, leader)
    }

    /// A PLAINTEXT client connection to node `id` (bounded by `timeout`); panics naming the node
    /// when it does not connect.
    pub fn connect(&self, id: i32, timeout: Duration) -> BlockingClient {
        let addr = self.addr(id);
        BlockingClient::connect(addr, timeout)
            .unwrap_or_else(|e| panic!("node {id} ({addr}): connect: {e}"))
    }

    /// Starts node `id` with `overrides`, its stderr kept as [`Cluster::start_all`] keeps it.
    pub fn start(&mut self, id: i32, overrides: &[&str]) {
        ok(self.0.start(id, overrides, Stderr::File));
    }

    /// Stops every running node: SIGTERM, then SIGKILL (the guard) if it has not exited in
    /// time. Returns (id, exit status) per node that was running; None = had to be killed.
    pub fn stop_all(&mut self) -> Vec<(i32, Option<std::process::ExitStatus>)> {
        self.0.stop_all(STOP_WAIT)
    }

    /// [`Cluster::stop_all`], asserting that every node that was running exited on SIGTERM, and
    /// successfully; a failure shows the node's stderr tail.
    pub fn stop_all_cleanly(&mut self) {
        for (id, status) in self.stop_all() {
            let status = status
                .unwrap_or_else(|| panic!("node {id} ignored SIGTERM\n{}", self.stderr_tail(id)));
            assert!(
                status.success(),
                "node {id} exited with {status}\n{}",
                self.stderr_tail(id)
            );
        }
    }

    /// Waits (bounded) until the leader reports every voter's log end offset at `offset` or
    /// beyond.
    pub fn wait_for_voters_at(&self, leader: i32, offset: i64) {
        ok(self.0.wait_for_voters_at(leader, offset, WAIT));
    }

    /// Waits (bounded) until the leader reports each of `ids`, voter or observer, at `offset`
    /// or beyond ([`testkit::Cluster::wait_for_replicas_at`]); on failure the panic shows each
    /// node's last stderr lines.
    pub fn wait_for_replicas_at(&self, ids: &[i32], offset: i64) {
        if let Err(e) = self.0.wait_for_replicas_at(ids, offset, WAIT) {
            panic!("{e}\n{}", self.stderr_tails());
        }
    }

    /// Polls DescribeQuorum on every running node until one answers as leader (bounded).
    /// On failure the panic shows each node's last stderr lines.
    pub fn wait_for_leader(&mut self, exclude: Option<i32>) -> i32 {
        let waited = self.0.wait_for_leader(&LeaderWait {
            exclude,
            ..LeaderWait::within(WAIT)
        });
        waited.unwrap_or_else(|e| panic!("{e}\n{}", self.stderr_tails()))
    }

    /// Node `id`'s DescribeQuorum answer, asked with a 1 s bound.
    fn describe(&self, id: i32) -> Result<engine::raft::DescribeQuorumResponse, String> {
        self.0
            .client(self.addr(id), Duration::from_secs(1))
            .and_then(|mut c| c.describe_quorum().map_err(|e| e.to_string()))
    }

    /// What each node says of the quorum (its DescribeQuorum, or why none) and the end of its
    /// stderr: what a test prints when the cluster stopped making progress.
    pub fn quorum_report(&self) -> String {
        self.nodes
            .iter()
            .map(|n| {
                let described = self.describe(n.id).map_or_else(
                    |e| e,
                    |d| {
                        let voters: Vec<_> = d
                            .current_voters
                            .iter()
                            .map(|v| (v.replica_id, v.log_end_offset))
                            .collect();
                        format!(
                            "{:?}, leader {} epoch {}, high watermark {}, voters at {voters:?}",
                            d.error, d.leader_id, d.leader_epoch, d.high_watermark
                        )
                    },
                );
                format!("node {}: {described}\n{}\n", n.id, self.stderr_tail(n.id))
            })
            .collect()
    }

    /// [`Cluster::wait_for_leader`], and then until every voter has fetched the leader's epoch
    /// start (its log end when found): a voter that has not heard of the new leader yet may
    /// still start an election that deposes it, and a test whose first produce must be
    /// acknowledged cannot take that NOT_LEADER_OR_FOLLOWER as a retry without risking a
    /// duplicate. Bounded: at most [`WAIT`] per leader found, and three leaders.
    pub fn wait_for_settled_leader(&mut self, exclude: Option<i32>) -> i32 {
        let mut last_error = String::new();
        for _ in 0..3 {
            let leader = self.wait_for_leader(exclude);
            let end = self.describe(leader).and_then(|d| {
                d.current_voters
                    .iter()
                    .find(|v| v.replica_id == leader)
                    .map(|v| v.log_end_offset)
                    .ok_or_else(|| format!("node {leader} no longer lists itself"))
            });
            match end.and_then(|end| self.0.wait_for_voters_at(leader, end, WAIT)) {
                Ok(()) => return leader,
                Err(e) => last_error = format!("leader {leader}: {e}"),
            }
        }
        panic!("no leader settled: {last_error}")
    }
}

/// A consumer's Fetch (replica id -1) of `__cluster_metadata`-0 from `offset`, answered at once,
/// up to `max_bytes` (and 1 MiB of the partition).
pub fn consumer_fetch_request(offset: i64, max_bytes: i32) -> net::wire::kafka::FetchRequest {
    use net::wire::kafka::{FetchPartition, FetchRequest, FetchTopic};
    use net::wire::quorum::{METADATA_PARTITION, METADATA_TOPIC};
    FetchRequest {
        replica_id: -1,
        max_wait_ms: 0,
        min_bytes: 0,
        max_bytes,
        isolation_level: 0,
        session_id: 0,
        session_epoch: -1,
        topics: vec![FetchTopic {
            name: METADATA_TOPIC.into(),
            partitions: vec![FetchPartition {
                partition: METADATA_PARTITION,
                current_leader_epoch: -1,
                fetch_offset: offset,
                last_fetched_epoch: -1,
                log_start_offset: -1,
                partition_max_bytes: 1 << 20,
            }],
        }],
        forgotten_topics: Vec::new(),
        rack_id: String::new(),
        cluster_id: None,
    }
}

/// Node `id`'s quorum-state file as JSON (bounded wait for it to exist and parse).
pub fn quorum_state_file(cluster: &Cluster, id: i32) -> serde_json::Value {
    let dir = &cluster
        .nodes
        .iter()
        .find(|n| n.id == id)
        .expect("a node")
        .dir;
    let path = dir.join("quorum-state");
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let parsed = std::fs::read_to_string(&path)
            .ok()
            .and_then(|text| serde_json::from_str(&text).ok());
        if let Some(value) = parsed {
            return value;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no readable {}",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Node `id`'s log directory id, as its quorum-state file keeps it (base64, as the file has it).
pub fn directory_of(cluster: &Cluster, id: i32) -> String {
    quorum_state_file(cluster, id)["directoryId"]
        .as_str()
        .expect("directoryId")
        .to_string()
}

/// [`directory_of`] parsed: what a Vote names as CandidateDirectoryId for node `id`.
pub fn directory_id_of(cluster: &Cluster, id: i32) -> engine::base::ids::DirectoryId {
    directory_of(cluster, id).parse().expect("a directory id")
}

/// `ringraft serve --config config` with `overrides`, its stderr to `stderr`.
pub fn spawn(config: &Path, overrides: &[&str], stderr: Stdio) -> Child {
    settings()
        .serve_command(config, overrides, 0)
        .stderr(stderr)
        .spawn()
        .unwrap()
}

/// A new temporary directory (its name starting with `prefix`) for a cluster the test builds by
/// hand, with a CA named ringraft-ca in its `pki/`.
pub fn root_with_ca(prefix: &str) -> (tempfile::TempDir, testkit::certs::Authority) {
    let root = tempfile::Builder::new()
        .prefix(prefix)
        .tempdir_in(std::env::temp_dir())
        .unwrap();
    let pki = testkit::certs::Authority::create(&root.path().join("pki"), "ringraft-ca").unwrap();
    (root, pki)
}

/// [`spawn`] with the node's stderr appended to the file `stderr`.
pub fn spawn_logged(config: &Path, overrides: &[&str], stderr: &Path) -> ProcessGuard {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(stderr)
        .unwrap();
    ProcessGuard {
        child: spawn(config, overrides, Stdio::from(file)),
    }
}

/// One batch of one record whose value is `value`.
pub fn batch(value: &str) -> Bytes {
    let mut builder = RecordBatchBuilder::new(0, 0);
    builder.append(0, None, Some(value.as_bytes()), &[]);
    builder.build().freeze()
}

/// One batch of `records` (timestamp, value), compressed with `compression`, written by
/// kafka-protocol as a Kafka client would write it.
pub fn kafka_client_batch(
    records: &[(i64, String)],
    compression: kafka_protocol::records::Compression,
) -> Bytes {
    use kafka_protocol::records::{Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType};
    let records: Vec<Record> = records
        .iter()
        .enumerate()
        .map(|(i, (timestamp, value))| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: 0,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            // kafka-protocol starts a new batch unless offset - sequence stays the same; this
            // keeps one batch with base sequence -1 (no producer id).
            sequence: i as i32 - 1,
            timestamp: *timestamp,
            key: None,
            value: Some(Bytes::from(value.clone())),
            headers: Default::default(),
        })
        .collect();
    let options = RecordEncodeOptions {
        version: 2,
        compression,
    };
    let mut out = bytes::BytesMut::new();
    RecordBatchEncoder::encode(&mut out, &records, &options).unwrap();
    out.freeze()
}

/// Every batch in a stopped node's log directory, in log order, read with the log's reader.
pub fn read_batches(dir: &Path) -> Vec<BatchView> {
    let log = engine::log::Log::open(dir, engine::log::LogConfig::for_reading()).unwrap();
    let mut out = Vec::new();
    let mut offset = log.start_offset();
    while offset < log.end_offset() {
        let pieces = log.read(offset, 1 << 20).unwrap();
        assert!(
            !pieces.is_empty(),
            "log {} ends early at {offset}",
            dir.display()
        );
        for piece in pieces {
            let view = BatchView::parse(piece).unwrap();
            offset = view.next_offset();
            out.push(view);
        }
    }
    out
}

/// Every data record in a log directory as (offset, value).
pub fn read_log(dir: &Path) -> Vec<(i64, String)> {
    let mut out = Vec::new();
    for view in read_batches(dir).iter().filter(|v| !v.is_control()) {
        for record in view.records() {
            let value = record.value.clone().unwrap_or_default();
            out.push((
                record.offset(view.base_offset()),
                String::from_utf8(value.to_vec()).unwrap(),
            ));
        }
    }
    out
}

/// Every acknowledged (offset, value) is in `log` exactly once, at that offset.
pub fn assert_each_once_at_its_offset(log: &[(i64, String)], acked: &[(i64, String)]) {
    for (offset, value) in acked {
        let at: Vec<i64> = log
            .iter()
            .filter(|(_, v)| v == value)
            .map(|(o, _)| *o)
            .collect();
        assert_eq!(
            at,
            [*offset],
            "{value}: acknowledged at {offset}, found at {at:?}"
        );
    }
}

/// True if every acknowledged record is in `log` exactly once, at its acknowledged offset, and
/// in the acknowledged order. Linear in both lengths: the nemesis checks 10^5 records and more.
pub fn log_holds_once_in_order(log: &[(i64, String)], acked: &[(i64, String)]) -> bool {
    // Each value's position in the log, or None once it is seen twice.
    let mut positions: std::collections::HashMap<&str, Option<usize>> =
        std::collections::HashMap::with_capacity(log.len());
    for (position, (_, value)) in log.iter().enumerate() {
        positions
            .entry(value.as_str())
            .and_modify(|p| *p = None)
            .or_insert(Some(position));
    }
    let mut previous_position = None;
    for (offset, value) in acked {
        let Some(&Some(position)) = positions.get(value.as_str()) else {
            return false;
        };
        if log[position].0 != *offset || previous_position.is_some_and(|p| p >= position) {
            return false;
        }
        previous_position = Some(position);
    }
    true
}

/// The correlation id of [`raw_request_frame`].
pub const RAW_CORRELATION_ID: i32 = 77;

/// `request` as one frame (size prefix, request header v2, body), the way a peer sends it.
pub fn raw_request_frame(request: &Request) -> Vec<u8> {
    let header = RequestHeader {
        api_key: request.api_key(),
        api_version: quorum::request_version(request),
        correlation_id: RAW_CORRELATION_ID,
        client_id: Some("hostile-test".into()),
    };
    request_frame(&header, request)
}

/// `request` as one frame under `header` (v2), whatever version the header claims.
pub fn request_frame(header: &RequestHeader, request: &Request) -> Vec<u8> {
    let mut w = WireWriter::with_capacity(128);
    w.i32(0);
    header.write(&mut w, true);
    quorum::encode_request(request, &mut w);
    let mut frame = w.into_inner().to_vec();
    let size = (frame.len() - 4) as i32;
    frame[..4].copy_from_slice(&size.to_be_bytes());
    frame
}

/// Sends `request` on a fresh connection to `addr`, as a peer would, and reads its response
/// (bounded by `timeout`). Err when the connection fails, or closes without an answer (the
/// node died or refused the frame).
pub fn send_raw_request(
    addr: SocketAddr,
    request: &Request,
    timeout: Duration,
) -> Result<Response, String> {
    use std::io::Write;
    let mut stream =
        TcpStream::connect_timeout(&addr, timeout).map_err(|e| format!("{addr}: connect: {e}"))?;
    stream.set_read_timeout(Some(timeout)).unwrap();
    stream.set_write_timeout(Some(timeout)).unwrap();
    stream
        .write_all(&raw_request_frame(request))
        .map_err(|e| format!("{addr}: send: {e}"))?;
    let mut size = [0u8; 4];
    stream
        .read_exact(&mut size)
        .map_err(|e| format!("{addr}: no response: {e}"))?;
    let mut body = vec![0u8; i32::from_be_bytes(size) as usize];
    stream
        .read_exact(&mut body)
        .map_err(|e| format!("{addr}: truncated response: {e}"))?;
    let mut r = WireReader::new(Bytes::from(body));
    let header = ResponseHeader::read(&mut r, true).map_err(|e| format!("{addr}: header: {e}"))?;
    if header.correlation_id != RAW_CORRELATION_ID {
        return Err(format!(
            "{addr}: correlation id {} in the response",
            header.correlation_id
        ));
    }
    quorum::decode_response(request.api_key(), &mut r)
        .map_err(|e| format!("{addr}: undecodable response: {e}"))
}

/// Produces `value` with acks=-1 to `addr`; Ok(base offset) when acknowledged.
pub fn produce_one(client: &mut BlockingClient, value: &str) -> Result<i64, String> {
    let response = client
        .produce(9, -1, batch(value))
        .map_err(|e| e.to_string())?
        .expect("acks=-1 is answered");
    let partition = &response.topics[0].partitions[0];
    if partition.error == ErrorCode::NONE {
        Ok(partition.base_offset)
    } else {
        Err(format!("error {}", partition.error))
    }
}

/// Produces `{prefix}0` to `{prefix}{count - 1}` one at a time ([`produce_one`]) and returns
/// each acknowledged (offset, value); panics at the first that is not acknowledged.
pub fn produce_numbered(
    client: &mut BlockingClient,
    prefix: &str,
    count: usize,
) -> Vec<(i64, String)> {
    (0..count)
        .map(|i| {
            let value = format!("{prefix}{i}");
            (produce_one(client, &value).unwrap(), value)
        })
        .collect()
}

/// Acknowledged (offset, value) pairs, shared with the producing thread.
pub type Acked = Arc<Mutex<Vec<(i64, String)>>>;

/// Produces `load-N` records from a thread, moving to the next node on any error, until
/// `stop`; every acknowledged (offset, value) goes into the returned list.
pub fn start_load(
    addrs: Vec<SocketAddr>,
    stop: Arc<AtomicBool>,
) -> (Acked, std::thread::JoinHandle<()>) {
    start_load_from(None, addrs, stop)
}

/// [`start_load`] from a thread in `host`'s network namespace (a lab's client namespace), or in
/// this process's when None.
pub fn start_load_from(
    host: Option<testkit::netns::Host>,
    addrs: Vec<SocketAddr>,
    stop: Arc<AtomicBool>,
) -> (Acked, std::thread::JoinHandle<()>) {
    start_writer(host, addrs, 0, "load-", stop)
}

/// A thread (in `host`'s network namespace when given) that produces `{prefix}0`, `{prefix}1`,
/// ... one at a time with acks=-1 ([`produce_one`]) to `addrs[first]`, moving to the next node on
/// any error, until `stop`. A value is never sent twice: one that failed may still be in the
/// log, but only once. Every acknowledged (offset, value) goes into the returned list.
pub fn start_writer(
    host: Option<testkit::netns::Host>,
    addrs: Vec<SocketAddr>,
    first: usize,
    prefix: &str,
    stop: Arc<AtomicBool>,
) -> (Acked, std::thread::JoinHandle<()>) {
    let acked: Acked = Arc::new(Mutex::new(Vec::new()));
    let prefix = prefix.to_owned();
    let handle = {
        let acked = Arc::clone(&acked);
        std::thread::spawn(move || {
            // The thread stays in the namespace until it ends: every connection is made there.
            let _entered = host.map(|h| h.enter().unwrap_or_else(|e| panic!("{e}")));
            let mut i = 0u64;
            let mut target = first % addrs.len();
            while !stop.load(Ordering::Relaxed) {
                let Ok(mut client) = BlockingClient::connect(addrs[target], Duration::from_secs(2))
                else {
                    target = (target + 1) % addrs.len();
                    std::thread::sleep(Duration::from_millis(20));
                    continue;
                };
                while !stop.load(Ordering::Relaxed) {
                    let value = format!("{prefix}{i}");
                    i += 1;
                    match produce_one(&mut client, &value) {
                        Ok(offset) => acked.lock().unwrap().push((offset, value)),
                        Err(_) => break,
                    }
                }
                target = (target + 1) % addrs.len();
            }
        })
    };
    (acked, handle)
}

/// Starts `ringraft serve --config config` in a private user and mount namespace
/// (`unshare -rm`, no privilege needed) after `mount {mount_args} dir` there, so the node sees a
/// filesystem nobody else does. `redirect` is appended to the node's command line in the shell
/// (e.g. `2>/dev/full`); the shell's own stderr is piped. A failed mount exits 99 with "mount:".
pub fn spawn_on_private_mount(
    mount_args: &str,
    dir: &Path,
    config: &Path,
    redirect: &str,
    rust_log: &str,
) -> ProcessGuard {
    spawn_on_private_mount_after(mount_args, "true", dir, config, redirect, rust_log)
}

/// [`spawn_on_private_mount`], running the shell command `setup` (the mount is "$1") between
/// the mount and the node; a failed setup exits 98 with "setup:". The node keeps the shell's
/// pid (`exec`), so `nsenter -t <pid> -U -m` reaches its mount.
pub fn spawn_on_private_mount_after(
    mount_args: &str,
    setup: &str,
    dir: &Path,
    config: &Path,
    redirect: &str,
    rust_log: &str,
) -> ProcessGuard {
    let script = format!(
        r#"mount {mount_args} "$1" || {{ echo "mount: failed" >&2; exit 99; }}
           {setup} || {{ echo "setup: failed" >&2; exit 98; }}
           exec "$2" serve --config "$3" {redirect}"#
    );
    let child = Command::new("unshare")
        .args(["-rm", "sh", "-c", &script, "sh"])
        .arg(dir)
        .arg(binary())
        .arg(config)
        .env("RUST_LOG", rust_log)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| {
            panic!("cannot run `unshare` (util-linux), which this test needs: {e}")
        });
    ProcessGuard { child }
}

/// `ringraft quorum --bootstrap-server <server> <args>`, its output echoed for the test log.
pub fn run_quorum_tool(server: &str, args: &[&str]) -> std::process::Output {
    let output = Command::new(binary())
        .args(["quorum", "--bootstrap-server", server])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    eprintln!(
        "ringraft quorum {args:?}: {}\n{}{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// A node's /metrics at `addr` by a plain HTTP/1.1 GET (reads bounded by `timeout`): the whole
/// response, headers included. metrics.rs checks the exposition format with a real parser;
/// this is for tests that want a sample or two.
pub fn get_metrics(addr: SocketAddr, timeout: Duration) -> String {
    use std::io::Write;
    let mut stream = TcpStream::connect(addr).expect("connect to /metrics");
    stream.set_read_timeout(Some(timeout)).unwrap();
    write!(
        stream,
        "GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    stream.read_to_string(&mut text).unwrap();
    text
}

/// The value of the sample `series` (its name and labels as exposed) in /metrics `text`.
pub fn metric_sample<T>(text: &str, series: &str) -> T
where
    T: std::str::FromStr,
    T::Err: std::fmt::Debug,
{
    let prefix = format!("{series} ");
    let line = text
        .lines()
        .find(|line| line.starts_with(&prefix))
        .unwrap_or_else(|| panic!("no sample {series} in /metrics:\n{text}"));
    line[prefix.len()..].trim().parse().unwrap()
}

/// The log end offset a leader's DescribeQuorum answer gives voter `id`, if it lists it.
pub fn voter_log_end(described: &engine::raft::DescribeQuorumResponse, id: i32) -> Option<i64> {
    described
        .current_voters
        .iter()
        .find(|v| v.replica_id == id)
        .map(|v| v.log_end_offset)
}

/// The resident set size of process `pid` in KiB (VmRSS in /proc/PID/status).
pub fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .expect("VmRSS line");
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// The log directory of node `id`.
pub fn log_dir(cluster: &Cluster, id: i32) -> PathBuf {
    let node = cluster.nodes.iter().find(|n| n.id == id).expect("a node");
    node.dir.clone()
}

/// The base offsets of the segment files in `dir`, ascending.
pub fn segment_bases(dir: &Path) -> Vec<i64> {
    let mut bases: Vec<i64> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().into_string().unwrap();
            name.strip_suffix(".log")?.parse().ok()
        })
        .collect();
    bases.sort_unstable();
    bases
}

/// The log start of the log in `dir`: the base offset in the first segment file's name.
pub fn log_start(dir: &Path) -> i64 {
    segment_bases(dir).first().copied().expect("a segment")
}

/// The client in `slot`, or else a new connection to the node that leads now (waiting for one,
/// bounded); None when that node does not take the connection (ask again).
pub fn leader_client<'a>(
    cluster: &mut Cluster,
    slot: &'a mut Option<BlockingClient>,
) -> Option<&'a mut BlockingClient> {
    if slot.is_none() {
        let leader = cluster.wait_for_leader(None);
        *slot = Some(BlockingClient::connect(cluster.addr(leader), Duration::from_secs(10)).ok()?);
    }
    slot.as_mut()
}
