//! A three-voter cluster whose nodes each log to a small disk of their own: an ext4 filesystem
//! of 64 MiB in a file, loop-mounted on the node's log directory by the test (as root, as CI
//! runs; docs/operations.md, "Retention" and "A full disk").
//!
//! With retention on, acks=-1 load writes about twice a disk's size through every log: no
//! produce is refused, no disk fills, every log start moves on, and a consumer asking for
//! offset 0 gets OFFSET_OUT_OF_RANGE with the log start. (A follower that falls behind the
//! log start and comes back: tools/tests/retention.rs.) Then the same cluster restarts
//! with retention off and a ballast file that leaves the leader's disk a few segments, and the
//! load fills it: that node refuses appends with KAFKA_STORAGE_ERROR and hands the lead over,
//! the two voters with room take writes, the full node answers DescribeQuorum and the new
//! leader serves reads; once the ballast goes, the full node fetches again and catches up.
//! (When every voter's disk is full no voter leads: docs/operations.md, "A full disk"; the
//! one-voter case is tools/tests/disk_full.rs.) Every acknowledged record at or above each
//! node's log start is in that node's log, once and in order. Every wait is bounded; the nodes
//! are killed and the disks unmounted when the test ends, failed or not.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use engine::raft::ErrorCode;
use net::client::BlockingClient;
use support::*;

const DISK_MB: u64 = 64;
const SEGMENT: u64 = 4 << 20;
const RETENTION: u64 = 16 << 20;
/// Each record: its name, then padding to this many bytes.
const VALUE_BYTES: usize = 30_000;
const BUDGET: Duration = Duration::from_secs(90);
const TIMEOUT: Duration = Duration::from_secs(10);

/// An ext4 filesystem in a file, loop-mounted on `mount` until dropped.
struct LoopDisk {
    image: PathBuf,
    mount: PathBuf,
}

impl LoopDisk {
    fn new(image: PathBuf, mount: &Path, size_mb: u64) -> LoopDisk {
        let run = |program: &str, args: &[&std::ffi::OsStr]| {
            let out = Command::new(program)
                .args(args)
                .output()
                .unwrap_or_else(|e| {
                    panic!("cannot run {program}, which this test needs (e2fsprogs, mount): {e}")
                });
            assert!(
                out.status.success(),
                "{program} {args:?}: {}\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            );
        };
        let file = std::fs::File::create(&image).unwrap();
        file.set_len(size_mb << 20).unwrap();
        run(
            "mkfs.ext4",
            &["-q".as_ref(), "-F".as_ref(), image.as_os_str()],
        );
        std::fs::create_dir_all(mount).unwrap();
        run(
            "mount",
            &[
                "-o".as_ref(),
                "loop".as_ref(),
                image.as_os_str(),
                mount.as_os_str(),
            ],
        );
        LoopDisk {
            image,
            mount: mount.to_path_buf(),
        }
    }

    /// Free bytes on the filesystem, as an unprivileged writer sees them.
    fn free(&self) -> u64 {
        engine::os::file::free_bytes(&self.mount).expect("statvfs of the small disk")
    }

    fn ballast(&self) -> PathBuf {
        self.mount.join("ballast")
    }
}

impl Drop for LoopDisk {
    fn drop(&mut self) {
        // Lazily: a node killed a moment ago may still hold files open.
        let _ = Command::new("umount").arg("-l").arg(&self.mount).status();
        let _ = std::fs::remove_file(&self.image);
    }
}

/// A record named `name` and a number no other record of the test has: an append that timed
/// out may still commit, so a retry must never write the same value again.
fn value(name: &str) -> String {
    static SENT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = SENT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("{name}#{n}:{}", "d".repeat(VALUE_BYTES))
}

/// One acks=-1 produce of `v`: Ok(base offset), or the error code the node answered with.
fn produce(client: &mut BlockingClient, v: &str) -> Result<i64, Option<ErrorCode>> {
    let response = client.produce(9, -1, batch(v)).map_err(|_| None)?;
    let partition = &response.expect("acks=-1 is answered").topics[0].partitions[0];
    match partition.error {
        ErrorCode::NONE => Ok(partition.base_offset),
        error => Err(Some(error)),
    }
}

/// Every acknowledged record at or above each node's log start is in its log, once and in
/// order.
fn check_logs(cluster: &Cluster, acked: &[(i64, String)]) {
    for id in 1..=3 {
        let dir = log_dir(cluster, id);
        let start = log_start(&dir);
        let expected: Vec<_> = acked.iter().filter(|(o, _)| *o >= start).cloned().collect();
        assert!(
            !expected.is_empty(),
            "node {id}: nothing acknowledged above {start}"
        );
        assert!(
            log_holds_once_in_order(&read_log(&dir), &expected),
            "node {id} (log start {start}) lost or repeated acknowledged records"
        );
    }
}

#[test]
fn small_disks_stay_below_full_with_retention_and_fill_and_recover_without_it() {
    let mut cluster = Cluster::new_with(3, |s| s.segment_bytes = Some(SEGMENT));
    let disks: Vec<LoopDisk> = (1..=3)
        .map(|id| {
            let image = cluster.root.path().join(format!("disk-{id}.img"));
            LoopDisk::new(image, &log_dir(&cluster, id), DISK_MB)
        })
        .collect();
    let free_at_start: Vec<u64> = disks.iter().map(LoopDisk::free).collect();
    let retention = [
        format!("retention.bytes={RETENTION}"),
        "log.retention.check.interval.ms=200".to_string(),
    ];
    for id in 1..=3 {
        let overrides: Vec<&str> = retention.iter().map(String::as_str).collect();
        cluster.start(id, &overrides);
    }

    // About twice a disk through every log, with retention: every produce is taken.
    let total = 2 * (DISK_MB << 20) as usize / VALUE_BYTES;
    let deadline = Instant::now() + BUDGET;
    let mut acked = Vec::new();
    let mut least_free = free_at_start.clone();
    let mut client: Option<BlockingClient> = None;
    while acked.len() < total {
        assert!(
            Instant::now() < deadline,
            "{} of {total} produced",
            acked.len()
        );
        let Some(c) = leader_client(&mut cluster, &mut client) else {
            continue;
        };
        let v = value(&format!("kept-{}", acked.len()));
        match produce(c, &v) {
            Ok(offset) => acked.push((offset, v)),
            Err(Some(ErrorCode::KAFKA_STORAGE_ERROR)) => {
                panic!(
                    "a disk filled with retention on: {:?}",
                    disks.iter().map(LoopDisk::free).collect::<Vec<_>>()
                )
            }
            Err(_) => client = None,
        }
        for (least, disk) in least_free.iter_mut().zip(&disks) {
            *least = (*least).min(disk.free());
        }
    }
    let leader = cluster.wait_for_leader(None);
    cluster.wait_for_voters_at(leader, acked.last().unwrap().0 + 1);
    for id in 1..=3 {
        let i = id as usize - 1;
        let start = log_start(&log_dir(&cluster, id));
        eprintln!(
            "node {id}: log start {start}, free {} of {} bytes at the least",
            least_free[i], free_at_start[i]
        );
        assert!(start > 0, "node {id}: the log start never moved");
        // Retention keeps about its size, the active segment and a spare: the disk never
        // came near full (a new segment always had room).
        assert!(
            least_free[i] > 2 * SEGMENT,
            "node {id}: only {} bytes free at one point",
            least_free[i]
        );
    }
    // A consumer asking for offset 0 is told the leader's log start. The core learns a new
    // start from the writer after its files are gone (docs/protocol.md, "Retention and the log
    // start"), so the two may differ for a moment while a retention run ends: ask again
    // (bounded) until they agree.
    let mut c = cluster.connect(leader, TIMEOUT);
    let deadline = Instant::now() + WAIT;
    loop {
        let response = c
            .call(&consumer_fetch_request(0, 1 << 20))
            .expect("a consumer Fetch is answered");
        let partition = &response.topics[0].partitions[0];
        let on_disk = log_start(&log_dir(&cluster, leader));
        let answered = (partition.error, partition.log_start_offset);
        if answered == (ErrorCode::OFFSET_OUT_OF_RANGE, on_disk) {
            break;
        }
        assert!(
            Instant::now() < deadline && partition.log_start_offset < on_disk,
            "a Fetch at 0 answered {answered:?}; the directory starts at {on_disk}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    cluster.stop_all();
    check_logs(&cluster, &acked);

    // The same cluster, retention off: the leader's disk fills (a ballast file takes all but a
    // few segments of it), the others' do not.
    for id in 1..=3 {
        cluster.start(id, &["retention.bytes=-1"]);
    }
    let full = cluster.wait_for_leader(None);
    let disk = &disks[full as usize - 1];
    let ballast = disk.free().saturating_sub(3 * SEGMENT / 2);
    std::fs::write(disk.ballast(), vec![0u8; ballast as usize]).unwrap();
    // Produces go to that node (through the leader when it no longer leads), until it says
    // its disk is full.
    let deadline = Instant::now() + BUDGET;
    let mut refused = false;
    let mut to_full: Option<BlockingClient> = None;
    let mut client: Option<BlockingClient> = None;
    while !refused {
        assert!(
            Instant::now() < deadline,
            "node {full} never refused an append; {} records, {} bytes free",
            acked.len(),
            disk.free()
        );
        if to_full.is_none() {
            to_full = BlockingClient::connect(cluster.addr(full), TIMEOUT).ok();
        }
        let Some(c) = to_full.as_mut() else { continue };
        let v = value(&format!("filling-{}", acked.len()));
        match produce(c, &v) {
            Ok(offset) => acked.push((offset, v)),
            Err(Some(ErrorCode::KAFKA_STORAGE_ERROR)) => refused = true,
            Err(Some(_)) => {
                let Some(c) = leader_client(&mut cluster, &mut client) else {
                    continue;
                };
                let v = value("through-the-leader");
                match produce(c, &v) {
                    Ok(offset) => acked.push((offset, v)),
                    Err(_) => client = None,
                }
            }
            Err(None) => to_full = None,
        }
    }
    eprintln!(
        "node {full} refused an append with KAFKA_STORAGE_ERROR after {} records, {} bytes free",
        acked.len(),
        disk.free()
    );
    // It hands the lead over to a voter with room, which takes writes with the third.
    let mut client = None;
    let mut after = 0;
    let deadline = Instant::now() + BUDGET;
    while after < 20 {
        assert!(
            Instant::now() < deadline,
            "no write taken after node {full} filled"
        );
        let Some(c) = leader_client(&mut cluster, &mut client) else {
            continue;
        };
        let v = value(&format!("others-{after}"));
        match produce(c, &v) {
            Ok(offset) => {
                acked.push((offset, v));
                after += 1;
            }
            Err(_) => {
                client = None;
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
    let leader = cluster.wait_for_leader(None);
    assert_ne!(
        leader, full,
        "a node with a full disk leads among several voters"
    );
    // The full node refuses appends itself and answers DescribeQuorum; the leader serves reads.
    let mut c = cluster.connect(full, TIMEOUT);
    c.describe_quorum()
        .expect("DescribeQuorum is answered on a full disk");
    let mut c = cluster.connect(leader, TIMEOUT);
    let start = log_start(&log_dir(&cluster, leader));
    let response = c
        .call(&consumer_fetch_request(start, 1 << 20))
        .expect("a consumer Fetch is answered");
    assert_eq!(response.topics[0].partitions[0].error, ErrorCode::NONE);

    // Space comes back: the full node fetches again, on its own, and catches up.
    std::fs::remove_file(disk.ballast()).unwrap();
    cluster.wait_for_voters_at(leader, acked.last().unwrap().0 + 1);
    cluster.stop_all();
    check_logs(&cluster, &acked);
    drop(cluster);
    drop(disks);
}
