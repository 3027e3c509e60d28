//! Retention on a running cluster (docs/operations.md, "Retention"): three voters with 1 MiB
//! segments, `retention.bytes` of 2 MiB and a retention check every 200 ms, under acks=-1
//! produces of 30 KB records. Every node's log start moves on and its disk use stays bounded;
//! a follower stopped until the leader's log start passes its log end starts its log again at
//! the leader's start when it comes back and catches up; a consumer asking for offset 0 gets
//! OFFSET_OUT_OF_RANGE with the log start, which ListOffsets earliest reports; every
//! acknowledged record at or above each node's log start is in that node's log, once and in
//! order. Every wait is bounded; every node is killed when the cluster drops.

mod support;

use std::path::Path;
use std::time::{Duration, Instant};

use engine::raft::ErrorCode;
use net::client::BlockingClient;
use net::wire::kafka::{ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic};
use net::wire::quorum::{METADATA_PARTITION, METADATA_TOPIC};
use support::*;

const SEGMENT: u64 = 1 << 20;
const RETENTION: u64 = 2 << 20;
/// Each record: its name, then padding to this many bytes (about 34 to a segment).
const VALUE_BYTES: usize = 30_000;
/// Long enough for a few hundred produces and the retention checks on a slow machine.
const BUDGET: Duration = Duration::from_secs(60);

fn value(name: &str) -> String {
    format!("{name}:{}", "r".repeat(VALUE_BYTES))
}

/// Produces `count` records named `prefix-N` to whichever node leads, reconnecting on any
/// error; returns the acknowledged (offset, value) pairs.
fn produce(cluster: &mut Cluster, prefix: &str, count: usize) -> Vec<(i64, String)> {
    let deadline = Instant::now() + BUDGET;
    let mut acked = Vec::new();
    let mut client = None;
    let mut i = 0;
    while acked.len() < count {
        assert!(
            Instant::now() < deadline,
            "{} of {count} produced",
            acked.len()
        );
        let Some(c) = leader_client(cluster, &mut client) else {
            continue;
        };
        // A new name for every attempt: an append that timed out may still commit.
        let v = value(&format!("{prefix}-{i}"));
        i += 1;
        match produce_one(c, &v) {
            Ok(offset) => acked.push((offset, v)),
            Err(_) => client = None,
        }
    }
    acked
}

/// Bytes of the files in `dir` (segments, spare, checkpoint, quorum state), as allocated.
fn disk_use(dir: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().blocks() * 512)
        .sum()
}

/// Waits (bounded) until `holds` is true of every node in `ids`.
fn wait_until(cluster: &Cluster, ids: &[i32], what: &str, holds: impl Fn(&Path) -> bool) {
    let deadline = Instant::now() + BUDGET;
    loop {
        let dirs: Vec<_> = ids.iter().map(|id| log_dir(cluster, *id)).collect();
        if dirs.iter().all(|d| holds(d)) {
            return;
        }
        assert!(Instant::now() < deadline, "never {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn consumer_fetch(client: &mut BlockingClient, offset: i64) -> (ErrorCode, i64) {
    let request = consumer_fetch_request(offset, 1 << 20);
    let response = client.call(&request).expect("a consumer Fetch is answered");
    let partition = &response.topics[0].partitions[0];
    (partition.error, partition.log_start_offset)
}

fn earliest(client: &mut BlockingClient) -> (ErrorCode, i64) {
    let request = ListOffsetsRequest {
        replica_id: -1,
        isolation_level: 0,
        topics: vec![ListOffsetsTopic {
            name: METADATA_TOPIC.into(),
            partitions: vec![ListOffsetsPartition {
                index: METADATA_PARTITION,
                current_leader_epoch: -1,
                timestamp: -2,
            }],
        }],
    };
    let response = client.call(&request).expect("ListOffsets is answered");
    let partition = &response.topics[0].partitions[0];
    (partition.error, partition.offset)
}

/// What of `acked` a log starting at `start` must hold, once and in order.
fn from_start(acked: &[(i64, String)], start: i64) -> Vec<(i64, String)> {
    acked.iter().filter(|(o, _)| *o >= start).cloned().collect()
}

const TIMEOUT: Duration = Duration::from_secs(10);

/// Three voters (not started) with [`SEGMENT`]-byte segments and [`RETENTION`] bytes of
/// retention, checked every `check_interval_ms`.
fn retention_cluster(check_interval_ms: u64) -> Cluster {
    Cluster::new_with(3, |s| {
        s.segment_bytes = Some(SEGMENT);
        s.overrides = vec![
            format!("retention.bytes={RETENTION}"),
            format!("log.retention.check.interval.ms={check_interval_ms}"),
        ];
    })
}

#[test]
fn retention_moves_every_log_start_and_a_follower_behind_it_starts_again_at_the_leaders() {
    let mut cluster = retention_cluster(200);
    cluster.start_all();
    let mut acked = produce(&mut cluster, "first", 60);
    let leader = cluster.wait_for_leader(None);
    let follower = cluster.others(leader)[0];
    let others: Vec<i32> = cluster.others(follower);
    cluster.wait_for_voters_at(leader, acked.last().unwrap().0 + 1);

    // The follower stops; the others go on until the leader's log start passes its log end.
    let stopped_end = acked.last().unwrap().0 + 1;
    if let Some(mut p) = cluster.node(follower).process.take() {
        p.signal(libc::SIGTERM);
        p.wait_exit(STOP_WAIT);
    }
    let follower_dir = log_dir(&cluster, follower);
    let follower_start = log_start(&follower_dir);
    let mut rounds = 0;
    while log_start(&log_dir(&cluster, leader)) <= stopped_end {
        rounds += 1;
        assert!(
            rounds <= 20,
            "the leader's log start never passed {stopped_end}"
        );
        acked.extend(produce(&mut cluster, &format!("round{rounds}"), 30));
        std::thread::sleep(Duration::from_millis(500));
    }
    // Every running node's start moved on, and its disk holds about the retention size: what
    // retention keeps, the active segment, a spare, and the small files.
    wait_until(&cluster, &others, "moved the log start past 0", |d| {
        log_start(d) > 0
    });
    for id in &others {
        let dir = log_dir(&cluster, *id);
        let used = disk_use(&dir);
        eprintln!(
            "node {id}: log start {}, {used} bytes on disk",
            log_start(&dir)
        );
        assert!(
            used <= RETENTION + 4 * SEGMENT,
            "node {id}: {used} bytes on disk"
        );
    }

    // A consumer at 0 is out of range, told the log start; ListOffsets earliest says the same.
    // The files go first and the raft thread hears of it after (docs/protocol.md, "Retention
    // and the log start", rule 2): on a loaded machine an answer just after the deletion can
    // still name the start before, so the start in the answers must pass the stopped
    // follower's end within a bound (a CI run saw 36 in the answer with 71 on disk).
    let leader = cluster.wait_for_leader(None);
    let mut client = cluster.connect(leader, TIMEOUT);
    let deadline = Instant::now() + WAIT;
    let start = loop {
        let (error, start) = consumer_fetch(&mut client, 0);
        assert_eq!(error, ErrorCode::OFFSET_OUT_OF_RANGE);
        if start > stopped_end {
            break start;
        }
        assert!(
            Instant::now() < deadline,
            "log start {start} in the answer after {WAIT:?}, the follower stopped at {stopped_end}"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let (error, earliest_offset) = earliest(&mut client);
    assert_eq!((error, earliest_offset >= start), (ErrorCode::NONE, true));
    // At the log start it reads.
    assert_eq!(
        consumer_fetch(&mut client, earliest_offset).0,
        ErrorCode::NONE
    );
    // A Produce's answer names the log start too (Kafka's field; it was a constant 0).
    let answer = client
        .produce(9, -1, batch(&value("answer-names-the-start")))
        .expect("the leader answers")
        .expect("acks=-1 is answered");
    let p = &answer.topics[0].partitions[0];
    assert_eq!(p.error, ErrorCode::NONE);
    assert!(
        p.log_start_offset >= earliest_offset && p.log_start_offset <= p.base_offset,
        "log start {} in a Produce answer at {}; ListOffsets said {earliest_offset}",
        p.log_start_offset,
        p.base_offset
    );
    acked.push((p.base_offset, value("answer-names-the-start")));

    // The follower comes back: its log ends below the leader's start, so it starts again there
    // and catches up.
    cluster.start(follower, &[]);
    acked.extend(produce(&mut cluster, "after", 10));
    let end = acked.last().unwrap().0 + 1;
    let leader = cluster.wait_for_leader(None);
    cluster.wait_for_voters_at(leader, end);
    // The leader counts a follower's log end from its fetches, which run ahead of its disk: the
    // follower's writer may still be starting the log again (its old segments gone, the new one
    // not yet made) when the leader reports it caught up. A CI run under load read the directory
    // in that window and found no segment; so wait (bounded) for the new segment itself.
    wait_until(
        &cluster,
        &[follower],
        "started its log again above its old end",
        |d| {
            segment_bases(d)
                .first()
                .is_some_and(|&s| s > stopped_end && s > follower_start)
        },
    );
    let restarted_start = log_start(&follower_dir);
    eprintln!(
        "node {follower}: log start {restarted_start}, was {follower_start}, its log ended at \
         {stopped_end}"
    );

    cluster.stop_all();
    for id in 1..=3 {
        let dir = log_dir(&cluster, id);
        let start = log_start(&dir);
        let log = read_log(&dir);
        let expected = from_start(&acked, start);
        assert!(
            !expected.is_empty(),
            "node {id}: nothing acknowledged above {start}"
        );
        assert!(
            log_holds_once_in_order(&log, &expected),
            "node {id} (log start {start}) lost or repeated acknowledged records"
        );
    }
}

/// The node's `ringraft_log_segments_total` samples: (allocated, recycled, deleted), read
/// with a plain GET (the exposition format itself is checked with a real parser in
/// metrics.rs).
fn segment_counts(port: u16) -> (u64, u64, u64) {
    let text = get_metrics(([127, 0, 0, 1], port).into(), TIMEOUT);
    let count = |how: &str| -> u64 {
        metric_sample(
            &text,
            &format!("ringraft_log_segments_total{{how=\"{how}\"}}"),
        )
    };
    (count("allocated"), count("recycled"), count("deleted"))
}

/// With retention runs ten minutes apart, a cluster keeps its logs at their retention size by
/// recycling at the rolls (docs/storage.md, "Recycling at the roll"): every node's log start
/// moves on and its disk stays bounded, every roll past the retention size reuses the oldest
/// segment's file, and hardly any is deleted. The first voter record pins the log's front, so
/// this also needs the writer's report that a record holds retention back, on which the leader
/// carries it forward: no retention run does that in this test.
#[test]
fn between_retention_runs_every_roll_reuses_the_oldest_segment() {
    let mut cluster = retention_cluster(600000);
    let ports: Vec<u16> = (1..=3).map(|_| free_port()).collect();
    for id in 1..=3 {
        let setting = format!(
            "metrics.listener=http://127.0.0.1:{}",
            ports[id as usize - 1]
        );
        cluster.start(id, &[setting.as_str()]);
    }
    // About twelve segments' worth, five times the retention size, over several seconds: the
    // node tells the writer its limits once a second, and only rolls recycle.
    let mut acked = Vec::new();
    for round in 0..20 {
        acked.extend(produce(&mut cluster, &format!("round{round}"), 20));
        std::thread::sleep(Duration::from_millis(300));
    }
    let leader = cluster.wait_for_leader(None);
    cluster.wait_for_voters_at(leader, acked.last().unwrap().0 + 1);
    wait_until(&cluster, &[1, 2, 3], "moved the log start past 0", |d| {
        log_start(d) > 0
    });
    for id in 1..=3 {
        let dir = log_dir(&cluster, id);
        let used = disk_use(&dir);
        let (allocated, recycled, deleted) = segment_counts(ports[id as usize - 1]);
        eprintln!(
            "node {id}: log start {}, {used} bytes on disk, segments allocated {allocated}, \
             recycled {recycled}, deleted {deleted}",
            log_start(&dir)
        );
        assert!(
            used <= RETENTION + 4 * SEGMENT,
            "node {id}: {used} bytes on disk"
        );
        // Allocated until the log reached its retention size (three or four segments), then
        // recycled at every roll; a roll that came before a newer limit leaves the log a
        // segment over, which the next roll deletes (at most once or twice in this burst).
        assert!(allocated <= 6, "node {id}: {allocated} allocated");
        assert!(recycled >= 5, "node {id}: {recycled} recycled");
        assert!(deleted <= 2, "node {id}: {deleted} deleted");
    }
}
