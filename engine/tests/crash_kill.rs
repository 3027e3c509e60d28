//! Crash test: a child process (this test binary, re-executed) appends through the
//! GroupCommitWriter under load and is SIGKILLed at random moments, many times. After each kill
//! the log must reopen as a prefix of what was written: every offset reported durable present,
//! every batch whole with a valid CRC, offsets contiguous, epochs non-decreasing.
//!
//! The child prints `durable <end_offset>` after each Durable event (so anything printed is on
//! disk) and `truncate <offset>` before it asks for a truncation.

mod log_support;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;
use engine::io::{GroupCommitWriter, WriterConfig, WriterEvent, WriterRequest};
use engine::log::{Log, LogConfig};
use engine::record::{BatchView, RecordBatchBuilder};
use engine::sim::XorShift64;

const CHILD_ENV: &str = "RINGRAFT_CRASH_CHILD_DIR";
const EPOCH_ENV: &str = "RINGRAFT_CRASH_CHILD_EPOCH";
const SEED_ENV: &str = "RINGRAFT_CRASH_CHILD_SEED";
const ITERATIONS: u64 = 20;
/// The whole test stops starting new iterations after this long.
const TIME_BUDGET: Duration = Duration::from_secs(45);

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 2 << 20,
        ..LogConfig::default()
    }
}

/// The batch this test writes at `base` in `epoch`: its shape and bytes follow from both, so the
/// checker can rebuild it.
fn expected_batch(base: i64, epoch: i32) -> Bytes {
    let records = (base % 5 + 1) as u32;
    let len = ((base * 7 + i64::from(epoch)) % 300 + 1) as usize;
    let mut builder = RecordBatchBuilder::new(base, epoch);
    for r in 0..records {
        let value: Vec<u8> = (0..len)
            .map(|k| (base as usize * 31 + r as usize * 7 + epoch as usize * 13 + k) as u8)
            .collect();
        builder.append(1_700_000_000_000 + base, None, Some(&value), &[]);
    }
    builder.build().freeze()
}

/// The child's body: runs only when re-executed by `kill_and_recover_many_times`.
#[test]
fn crash_child() {
    let Ok(dir) = std::env::var(CHILD_ENV) else {
        return;
    };
    let epoch: i32 = std::env::var(EPOCH_ENV).unwrap().parse().unwrap();
    let seed: u64 = std::env::var(SEED_ENV).unwrap().parse().unwrap();
    run_child(Path::new(&dir), epoch, seed);
}

fn run_child(dir: &Path, epoch: i32, seed: u64) {
    let mut rng = XorShift64(seed | 1);
    let log = Log::open(dir, config()).unwrap();
    let mut next_offset = log.end_offset();
    let writer = GroupCommitWriter::start(log, WriterConfig::default()).unwrap();
    let mut out = std::io::stdout().lock();
    let mut seq = 0;
    // Sometimes start like a follower that was told to drop a divergent suffix.
    if next_offset > 0 && rng.next_u64().is_multiple_of(3) {
        let to = next_offset - (rng.next_u64() % 50) as i64;
        let to = to.max(0);
        writeln!(out, "truncate {to}").unwrap();
        out.flush().unwrap();
        seq += 1;
        writer.submit(WriterRequest::TruncateTo { seq, offset: to });
        next_offset = to;
    }
    let mut in_flight = 0;
    loop {
        while in_flight < 32 {
            let batches: Vec<_> = (0..rng.next_u64() % 4 + 1)
                .map(|_| {
                    let batch = expected_batch(next_offset, epoch);
                    next_offset += next_offset % 5 + 1;
                    log_support::stored(batch)
                })
                .collect();
            seq += 1;
            writer.submit(WriterRequest::Append { seq, batches });
            in_flight += 1;
        }
        match writer.events().recv().unwrap() {
            WriterEvent::Durable {
                up_to_seq,
                end_offset,
            } => {
                writeln!(out, "durable {end_offset}").unwrap();
                out.flush().unwrap();
                in_flight = seq - up_to_seq;
            }
            other => panic!("child: unexpected {other:?}"),
        }
    }
}

/// What the parent learned from one child's stdout.
#[derive(Default)]
struct Reported {
    /// The log must reach at least this offset after recovery.
    floor: i64,
    lines: usize,
}

fn read_reports(stdout: impl std::io::Read, mut floor: i64) -> Reported {
    let mut lines = 0;
    for line in BufReader::new(stdout).lines() {
        let Ok(line) = line else { break };
        if let Some(value) = line.strip_prefix("durable ") {
            floor = value.parse().unwrap();
            lines += 1;
        } else if let Some(value) = line.strip_prefix("truncate ") {
            floor = floor.min(value.parse().unwrap());
        }
    }
    Reported { floor, lines }
}

/// Checks the recovered log in full; returns its end offset.
fn check_log(dir: &Path, floor: i64) -> i64 {
    let log = Log::open(dir, config()).unwrap();
    let end = log.end_offset();
    assert!(
        end >= floor,
        "offsets up to {floor} were reported durable, the log ends at {end}"
    );
    let mut next = 0;
    let mut last_epoch = 0;
    let mut epochs = Vec::new();
    while next < end {
        let batches = log.read(next, 1 << 20).unwrap();
        assert!(
            !batches.is_empty(),
            "no batch at {next} below the end {end}"
        );
        for batch in batches {
            let view = BatchView::parse(batch.clone()).expect("every stored batch is valid");
            assert_eq!(view.base_offset(), next, "offsets are contiguous");
            let epoch = view.partition_leader_epoch();
            assert!(epoch >= last_epoch, "epochs never go back");
            if epoch != last_epoch {
                epochs.push((epoch, next));
            }
            last_epoch = epoch;
            assert_eq!(
                batch,
                expected_batch(next, epoch),
                "batch at {next} is what was written"
            );
            next = view.next_offset();
        }
    }
    assert_eq!(next, end);
    assert_eq!(
        log.epoch_cache().entries(),
        epochs.as_slice(),
        "the epoch cache matches the batches"
    );
    end
}

#[test]
fn kill_and_recover_many_times() {
    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let started = Instant::now();
    let mut rng = XorShift64(0x9E37_79B9_7F4A_7C15);
    let mut floor = 0;
    let mut iterations = 0;
    let mut total_reports = 0;
    for iteration in 0..ITERATIONS {
        if started.elapsed() > TIME_BUDGET {
            break;
        }
        let mut child = Command::new(&exe)
            .args(["--exact", "crash_child", "--nocapture", "--test-threads=1"])
            .env(CHILD_ENV, dir.path())
            .env(EPOCH_ENV, (iteration + 1).to_string())
            .env(SEED_ENV, rng.next_u64().to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let reader = std::thread::spawn(move || read_reports(stdout, floor));
        std::thread::sleep(Duration::from_millis(100 + rng.next_u64() % 400));
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        let reported = reader.join().unwrap();
        total_reports += reported.lines;
        let end = check_log(dir.path(), reported.floor);
        floor = end;
        iterations += 1;
    }
    assert!(
        iterations >= 5,
        "only {iterations} iterations ran within the time budget"
    );
    assert!(
        total_reports > 0,
        "the children never reported anything durable"
    );
    eprintln!(
        "crash test: {iterations} kills, {total_reports} durable reports, final end offset {floor}"
    );
}
