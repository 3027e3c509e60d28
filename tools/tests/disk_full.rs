//! Process tests of a full disk (docs/operations.md, "A full disk"): a one-voter node runs in a
//! private user and mount namespace (`unshare -rm`) with its log on a small tmpfs (the test is
//! about space, not durability) and 1 MiB segments, and Produce load runs until the node cannot
//! allocate its next segment. The node must not stop: it refuses appends with
//! KAFKA_STORAGE_ERROR, keeps serving reads and DescribeQuorum, says so in one log line and a
//! metric, and takes appends again on its own once space is freed, with every acknowledged
//! batch still in its log. The second test puts stderr on /dev/full (the logs on the same full
//! disk): the failed write of that log line must not stop or hang the node either. Every wait is
//! bounded; the node is killed when its guard drops.

mod support;

use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use bytes::Bytes;
use engine::raft::ErrorCode;
use engine::record::{BatchIter, RecordBatchBuilder};
use net::client::BlockingClient;
use support::*;

/// Long enough for the few MB the small tmpfs takes before it is full, on a slow machine.
const FILL_BUDGET: Duration = Duration::from_secs(60);
/// The writer tries the allocation again every second; this allows for a slow machine.
const RESUME_BUDGET: Duration = Duration::from_secs(30);
/// What the test frees: a file made in the mount before the node starts.
const BALLAST_BYTES: u64 = 2 << 20;
/// Each batch: one record of this many bytes, its name in front.
const VALUE_BYTES: usize = 60 << 10;

fn wait_listening(addr: SocketAddr, node: &mut ProcessGuard) {
    let deadline = Instant::now() + WAIT;
    while TcpStream::connect(addr).is_err() {
        if let Ok(Some(status)) = node.child.try_wait() {
            panic!("the node exited before listening: {status}");
        }
        assert!(
            Instant::now() < deadline,
            "the node never listened on {addr}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The one-voter node on a `size_mb` tmpfs at `<root>/small` holding the ballast, its stderr
/// sent by `redirect`, with `extra` properties.
fn start_small_node(
    cluster: &Cluster,
    size_mb: u32,
    redirect: &str,
    extra: &str,
) -> (ProcessGuard, PathBuf) {
    let mount = cluster.root.path().join("small");
    std::fs::create_dir(&mount).unwrap();
    let config = cluster.root.path().join("small.properties");
    let addr = cluster.addr(1);
    let voters = format!("quorum.voters=1@{addr}");
    let properties = node_properties(1, CLUSTER_ID, addr, &mount.join("log"), &voters);
    let properties = format!("{properties}log.segment.bytes=1048576\n{extra}");
    std::fs::write(&config, properties).unwrap();
    let mut node = spawn_on_private_mount_after(
        &format!("-t tmpfs -o size={size_mb}m none"),
        &format!(r#"head -c {BALLAST_BYTES} /dev/zero > "$1/ballast""#),
        &mount,
        &config,
        redirect,
        "info",
    );
    wait_listening(addr, &mut node);
    (node, mount)
}

/// One batch of one record: `name`, then padding to `VALUE_BYTES`.
fn named_batch(name: &str) -> Bytes {
    let mut value = name.as_bytes().to_vec();
    value.resize(VALUE_BYTES, b'.');
    let mut builder = RecordBatchBuilder::new(0, 0);
    builder.append(0, None, Some(&value), &[]);
    builder.build().freeze()
}

/// One Produce (acks=all): the partition's error and base offset, or None when the connection
/// failed.
fn produce(client: &mut BlockingClient, name: &str) -> Option<(ErrorCode, i64)> {
    let response = client.produce(9, -1, named_batch(name)).ok()??;
    let partition = &response.topics[0].partitions[0];
    Some((partition.error, partition.base_offset))
}

/// Produces named batches until one is refused with KAFKA_STORAGE_ERROR; returns the
/// acknowledged ones as (offset, name). Other refusals (NOT_LEADER_OR_FOLLOWER while the voter
/// elects itself) are retried.
fn fill(client: &mut BlockingClient, node: &mut ProcessGuard) -> Vec<(i64, String)> {
    let deadline = Instant::now() + FILL_BUDGET;
    let mut acked = Vec::new();
    loop {
        let name = format!("before-{:06}", acked.len());
        match produce(client, &name) {
            Some((ErrorCode::NONE, offset)) => acked.push((offset, name)),
            Some((ErrorCode::KAFKA_STORAGE_ERROR, _)) => return acked,
            Some(_) => std::thread::sleep(Duration::from_millis(20)),
            None => panic!(
                "the connection failed after {} acknowledged batches (node: {:?})",
                acked.len(),
                node.child.try_wait()
            ),
        }
        assert!(
            Instant::now() < deadline,
            "no KAFKA_STORAGE_ERROR after {FILL_BUDGET:?} ({} batches acknowledged)",
            acked.len()
        );
    }
}

/// Every data record below the high watermark, as (offset, name), read with consumer Fetches.
fn read_all(client: &mut BlockingClient) -> Vec<(i64, String)> {
    let mut out = Vec::new();
    let mut offset = 0;
    for _ in 0..10_000 {
        let request = consumer_fetch_request(offset, 4 << 20);
        let response = client.call(&request).expect("a consumer Fetch is answered");
        let partition = &response.topics[0].partitions[0];
        assert_eq!(partition.error, ErrorCode::NONE, "Fetch at {offset}");
        let batches = partition.records.clone().unwrap_or_default();
        if batches.is_empty() {
            assert!(offset >= partition.high_watermark, "no batch at {offset}");
            return out;
        }
        for view in batches.into_iter().flat_map(BatchIter::new) {
            let view = view.expect("a fetched batch parses");
            offset = view.next_offset();
            if view.is_control() {
                continue;
            }
            for record in view.records() {
                let value = record.value.clone().unwrap_or_default();
                let name = value.split(|&b| b == b'.').next().unwrap_or_default();
                out.push((
                    record.offset(view.base_offset()),
                    String::from_utf8(name.to_vec()).unwrap(),
                ));
            }
        }
    }
    panic!("the log never ended")
}

/// The value of a sample with no labels in the node's /metrics.
fn metric(addr: SocketAddr, name: &str) -> f64 {
    metric_sample(&get_metrics(addr, WAIT), name)
}

/// Deletes `file` inside the node's mount namespace (the mount is the node's alone).
fn remove_in_namespace(node: &ProcessGuard, file: &Path) {
    let status = Command::new("nsenter")
        .args([
            "-t",
            &node.pid().to_string(),
            "-U",
            "-m",
            "--preserve-credentials",
        ])
        .arg("rm")
        .arg(file)
        .status()
        .expect("nsenter (util-linux) runs");
    assert!(
        status.success(),
        "rm {} in the node's mount: {status}",
        file.display()
    );
}

#[test]
fn a_full_disk_refuses_writes_serves_reads_and_resumes_when_space_returns() {
    let cluster = Cluster::new(1);
    let metrics_addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let stderr_file = cluster.root.path().join("node.stderr");
    let (mut node, mount) = start_small_node(
        &cluster,
        8,
        &format!("2>{}", stderr_file.display()),
        &format!("metrics.listener=http://{metrics_addr}\n"),
    );
    let mut client = cluster.connect(1, WAIT);
    let mut acked = fill(&mut client, &mut node);
    assert!(
        acked.len() >= 16,
        "only {} batches of 60 KiB were acknowledged before the disk was full",
        acked.len()
    );

    // Full: the node runs, refuses every append, serves reads and DescribeQuorum.
    for i in 0..3 {
        let refused = produce(&mut client, &format!("refused-{i}"));
        assert_eq!(refused.map(|r| r.0), Some(ErrorCode::KAFKA_STORAGE_ERROR));
    }
    assert!(node.child.try_wait().unwrap().is_none(), "the node stopped");
    let quorum = client
        .describe_quorum()
        .expect("DescribeQuorum is answered");
    assert_eq!(
        (quorum.error, quorum.leader_id),
        (ErrorCode::NONE, 1),
        "a lone voter keeps leading: {quorum:?}"
    );
    let log = read_all(&mut client);
    assert!(
        log_holds_once_in_order(&log, &acked),
        "an acknowledged batch is missing while the disk is full"
    );
    assert_eq!(metric(metrics_addr, "ringraft_disk_storage_full"), 1.0);
    let stderr = std::fs::read_to_string(&stderr_file).unwrap();
    let full_lines: Vec<&str> = stderr.lines().filter(|l| l.contains("disk full")).collect();
    assert_eq!(
        full_lines.len(),
        1,
        "one line says the disk is full:\n{stderr}"
    );
    let line = full_lines[0];
    assert!(
        line.contains(&mount.join("log").display().to_string()) && line.contains("free"),
        "the line names the directory and the free space: {line}"
    );

    // Space returns: appends are taken again without a restart.
    remove_in_namespace(&node, &mount.join("ballast"));
    let deadline = Instant::now() + RESUME_BUDGET;
    loop {
        let name = format!("after-{:06}", acked.len());
        match produce(&mut client, &name) {
            Some((ErrorCode::NONE, offset)) => {
                acked.push((offset, name));
                break;
            }
            Some((ErrorCode::KAFKA_STORAGE_ERROR, _)) => {
                std::thread::sleep(Duration::from_millis(100))
            }
            other => panic!("after freeing space: {other:?}"),
        }
        assert!(
            Instant::now() < deadline,
            "appends still refused {RESUME_BUDGET:?} after space was freed"
        );
    }
    for i in 0..8 {
        let name = format!("after-more-{i}");
        let (error, offset) = produce(&mut client, &name).expect("answered");
        assert_eq!(error, ErrorCode::NONE, "append {i} after space returned");
        acked.push((offset, name));
    }
    assert_eq!(metric(metrics_addr, "ringraft_disk_storage_full"), 0.0);
    let log = read_all(&mut client);
    assert!(
        log_holds_once_in_order(&log, &acked),
        "an acknowledged batch is missing after space returned"
    );
    let stderr = std::fs::read_to_string(&stderr_file).unwrap();
    assert!(stderr.contains("disk space is back"), "{stderr}");
    node.signal(libc::SIGTERM);
    let status = node.wait_exit(STOP_WAIT).expect("stops on SIGTERM");
    assert!(status.success(), "{status}");
}

#[test]
fn a_full_disk_with_stderr_unwritable_neither_stops_nor_hangs_the_node() {
    let cluster = Cluster::new(1);
    let (mut node, _mount) = start_small_node(&cluster, 6, "2>/dev/full", "");
    let mut client = cluster.connect(1, WAIT);
    let acked = fill(&mut client, &mut node);
    assert!(acked.len() >= 8, "{} batches acknowledged", acked.len());
    // The warning's write failed: the node still answers, refusing appends and serving reads.
    let refused = produce(&mut client, "refused");
    assert_eq!(refused.map(|r| r.0), Some(ErrorCode::KAFKA_STORAGE_ERROR));
    assert!(log_holds_once_in_order(&read_all(&mut client), &acked));
    assert!(node.child.try_wait().unwrap().is_none(), "the node stopped");
}
