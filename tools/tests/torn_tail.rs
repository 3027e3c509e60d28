//! Process test of a torn tail told from corruption (docs/storage.md, "Torn tail or corruption:
//! the durable mark"): three voters under acks=-1 load, one follower killed (SIGKILL), a 4 KiB
//! block of its acknowledged records zeroed in its newest segment. Restarted, it refuses to start
//! with one clear message instead of cutting its log there, leaves the segment as it was, and no
//! acknowledged record is missing from the two others. Real `ringraft serve` processes on
//! 127.0.0.1, real files on the test's filesystem (ext4 here); every wait is bounded and every
//! process is killed when its guard drops.

mod support;

use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use support::*;

const BLOCK: u64 = 4096;

/// Where the batches of a segment file end: a walk of the Kafka batch headers (BaseOffset,
/// BatchLength) from the start to the first that is zeros or not a batch (a durable mark's
/// first byte makes its BaseOffset negative). Bounded by the file's length.
fn data_end(bytes: &[u8]) -> u64 {
    let mut position = 0usize;
    while position + 12 <= bytes.len() {
        let base = i64::from_be_bytes(bytes[position..position + 8].try_into().unwrap());
        let len = i32::from_be_bytes(bytes[position + 8..position + 12].try_into().unwrap());
        if base < 0 || len <= 0 {
            break;
        }
        position += 12 + len as usize;
    }
    position.min(bytes.len()) as u64
}

#[test]
fn a_zeroed_block_of_acknowledged_records_in_a_followers_newest_segment_is_refused_not_cut() {
    let mut cluster = Cluster::new(3);
    let leader = cluster.start_all_and_elect();
    let follower = cluster.others(leader)[0];
    let addrs: Vec<_> = [leader]
        .into_iter()
        .chain(cluster.others(leader))
        .map(|id| cluster.addr(id))
        .collect();
    let stop = Arc::new(AtomicBool::new(false));
    let (acked, load) = start_load(addrs, Arc::clone(&stop));
    let deadline = Instant::now() + Duration::from_secs(60);
    while acked.lock().unwrap().len() < 2_000 {
        assert!(
            Instant::now() < deadline,
            "only {} records acknowledged in 60 s\n{}",
            acked.lock().unwrap().len(),
            cluster.stderr_tails()
        );
        std::thread::sleep(Duration::from_millis(50));
    }

    // The follower dies under load; the two others go on acknowledging.
    let process = cluster.node(follower).process.as_mut().unwrap();
    process.signal(libc::SIGKILL);
    assert!(process.wait_exit(STOP_WAIT).is_some(), "outlived SIGKILL");
    let killed_at = acked.lock().unwrap().len();
    let deadline = Instant::now() + Duration::from_secs(30);
    while acked.lock().unwrap().len() < killed_at + 200 {
        assert!(
            Instant::now() < deadline,
            "no acknowledgement after the kill"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    stop.store(true, Ordering::Relaxed);
    load.join().unwrap();
    let acked = acked.lock().unwrap().clone();
    let last_acked = acked.iter().map(|(o, _)| *o).max().unwrap();

    // A block in the middle of the follower's newest segment: records acknowledged long before
    // the kill (the segment holds at least 2,000 of them, about 100 bytes each).
    let dir = log_dir(&cluster, follower);
    let newest = *segment_bases(&dir).last().unwrap();
    let path = dir.join(engine::log::segment_file_name(newest));
    let bytes = std::fs::read(&path).unwrap();
    let end = data_end(&bytes);
    assert!(end >= 16 * BLOCK, "only {end} bytes of batches");
    let hole = (end / 2) / BLOCK * BLOCK;
    let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    file.write_all_at(&[0u8; BLOCK as usize], hole).unwrap();
    file.sync_all().unwrap();
    let damaged = std::fs::read(&path).unwrap();

    // Restarted, it refuses to start, naming the damage and the remedy, and cuts nothing.
    let stderr_before = std::fs::read_to_string(cluster.stderr_path(follower)).unwrap_or_default();
    cluster.start(follower, &[]);
    let status = cluster
        .node(follower)
        .process
        .as_mut()
        .unwrap()
        .wait_exit(WAIT)
        .unwrap_or_else(|| panic!("node {follower} started on a damaged log"));
    assert!(!status.success(), "exited with {status}");
    let stderr = std::fs::read_to_string(cluster.stderr_path(follower)).unwrap();
    let said = &stderr[stderr_before.len()..];
    assert!(
        said.contains("corrupt log")
            && said.contains("durable mark")
            && said.contains("Restore this replica from a peer"),
        "{said}"
    );
    assert!(
        std::fs::read(&path).unwrap() == damaged,
        "the refused open changed the segment"
    );

    // No acknowledged record is lost from the cluster: both others hold every one.
    for (id, status) in cluster.stop_all() {
        if id != follower {
            let status = status.unwrap_or_else(|| panic!("node {id} ignored SIGTERM"));
            assert!(status.success(), "node {id} exited with {status}");
        }
    }
    for id in cluster.others(follower) {
        let log = read_log(&log_dir(&cluster, id));
        assert!(
            log.iter().any(|(o, _)| *o >= last_acked),
            "node {id} ends below {last_acked}"
        );
        assert_each_once_at_its_offset(&log, &acked);
    }
}

/// The walk of [`data_end`] stops at zeros and at a durable mark, and never runs past the bytes.
#[test]
fn the_walk_finds_where_batches_end() {
    let mut bytes = vec![0u8; 200];
    bytes[8..12].copy_from_slice(&(50i32).to_be_bytes());
    assert_eq!(data_end(&bytes), 62);
    bytes[62] = 0xff;
    assert_eq!(data_end(&bytes), 62);
    bytes[62] = 0;
    bytes[70..74].copy_from_slice(&(1_000i32).to_be_bytes());
    assert_eq!(data_end(&bytes), 200);
}
