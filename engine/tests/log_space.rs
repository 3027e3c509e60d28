//! A full disk at a segment roll (docs/storage.md, "A full disk"): the allocation of the next
//! segment is refused (`LogError::NoSpace`), nothing changes, and once space is freed the log
//! rolls with nothing lost; the writer reports `StorageFull` once, holds the appends that need
//! the roll, and reports `StorageAvailable` and makes them durable once space returns.
//!
//! The scenarios need a filesystem that fills: the parent test re-runs this binary's
//! `space_child` in a private user and mount namespace (`unshare -rm`, no privilege needed) on a
//! 4 MiB tmpfs made there. The test is about space, not durability (the crash tests run on the
//! real disk). A ballast file sized from `statvfs` leaves less room than a segment.

mod log_support;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use engine::io::writer::SPACE_RETRY;
use engine::io::{WriterConfig, WriterEvent};
use engine::log::{Log, LogError, SPARE_FILE};
use engine::os::file::free_bytes;
use log_support::*;

const CHILD_ENV: &str = "RINGRAFT_LOG_SPACE_DIR";
const SEGMENT: u64 = 1 << 20;
const CHILD_BUDGET: Duration = Duration::from_secs(120);

/// Fills the filesystem of `dir` with a ballast file until `left` bytes are free.
fn ballast(dir: &Path, left: u64) -> std::path::PathBuf {
    let path = dir.join("ballast");
    let free = free_bytes(dir).unwrap();
    assert!(free > left, "the tmpfs has {free} bytes free");
    std::fs::write(&path, vec![0u8; (free - left) as usize]).unwrap();
    path
}

fn space_error(result: Result<i64, LogError>) -> (u64, u64) {
    match result {
        Err(LogError::NoSpace { needed, free, .. }) => (needed, free),
        other => panic!("expected NoSpace, got {other:?}"),
    }
}

/// The log used directly: a refused roll changes nothing and is refused again until space
/// returns; a spare left over is removed at open.
fn log_scenario(dir: &Path) {
    let mut log = Log::open(dir, small_config(SEGMENT)).unwrap();
    let ballast = ballast(dir.parent().unwrap(), SEGMENT / 2);
    let mut written = Vec::new();
    let refused = loop {
        let b = batch(log.end_offset(), 1, 4, 15_000);
        match log.append(std::slice::from_ref(&b)) {
            Ok(_) => written.push(b),
            Err(error) => break error,
        }
        assert!(written.len() < 200, "the segment never filled");
    };
    let (needed, free) = space_error(Err(refused));
    assert_eq!(needed, SEGMENT);
    assert!(free < SEGMENT, "{free} bytes free");
    assert_eq!(log.segment_bases(), vec![0], "no segment was added");
    assert_eq!(log.durable_end_offset(), log.end_offset());
    assert_eq!(read_all(&log), written, "the log is as it was");
    assert!(
        !dir.join(SPARE_FILE).exists(),
        "the refused spare is given back"
    );
    let next = batch(log.end_offset(), 1, 4, 15_000);
    space_error(log.append(std::slice::from_ref(&next)));
    assert!(matches!(log.prepare_spare(), Err(LogError::NoSpace { .. })));

    std::fs::remove_file(&ballast).unwrap();
    log.append(std::slice::from_ref(&next)).unwrap();
    written.push(next);
    assert_eq!(log.segment_bases().len(), 2, "rolled once space returned");
    assert_eq!(read_all(&log), written);
    log.prepare_spare().unwrap();
    assert!(dir.join(SPARE_FILE).exists());
    drop(log);
    let log = Log::open(dir, small_config(SEGMENT)).unwrap();
    assert!(
        !dir.join(SPARE_FILE).exists(),
        "a leftover spare is removed"
    );
    assert_eq!(read_all(&log), written, "nothing lost across the reopen");
}

/// Exactly a segment's bytes free is enough for the next segment: the pre-check refuses only
/// what the allocation would (a 4 KiB page less is refused, by the log scenario's ballast).
fn exact_scenario(dir: &Path) {
    let mut log = Log::open(dir, small_config(SEGMENT)).unwrap();
    let ballast = ballast(dir.parent().unwrap(), SEGMENT);
    assert_eq!(free_bytes(dir).unwrap(), SEGMENT);
    log.prepare_spare().unwrap();
    assert!(log.has_spare());
    assert_eq!(free_bytes(dir).unwrap(), 0);
    drop(log);
    std::fs::remove_file(&ballast).unwrap();
}

fn next_event(writer: &engine::io::GroupCommitWriter, wait: Duration) -> Option<WriterEvent> {
    writer.events().recv_timeout(wait).ok()
}

/// The writer: `StorageFull` once while the active segment still has room, the appends that need
/// the roll held (no durability report), `StorageAvailable` and every append durable once space
/// returns.
fn writer_scenario(dir: &Path) {
    let log = Log::open(dir, small_config(SEGMENT)).unwrap();
    let ballast = ballast(dir.parent().unwrap(), SEGMENT / 4);
    let writer = engine::io::GroupCommitWriter::start(log, WriterConfig::default()).unwrap();
    let mut written = Appended::default();
    let (mut full_reports, mut durable_seq) = (0, 0);
    // One append at a time, each waited for, until one gets no durability report.
    let mut held = None;
    for seq in 1..=200u64 {
        written.submit(&writer, seq, 4, 15_000);
        let deadline = Instant::now() + Duration::from_secs(2);
        while durable_seq < seq && Instant::now() < deadline {
            match next_event(&writer, Duration::from_millis(100)) {
                Some(WriterEvent::Durable { up_to_seq, .. }) => durable_seq = up_to_seq,
                Some(WriterEvent::StorageFull { error }) => {
                    assert!(matches!(error, LogError::NoSpace { .. }), "{error}");
                    full_reports += 1;
                }
                Some(other) => panic!("unexpected {other:?}"),
                None => {}
            }
        }
        if durable_seq < seq {
            held = Some(seq);
            break;
        }
    }
    let held = held.expect("an append waits for the roll");
    assert_eq!(full_reports, 1, "reported once, before the roll was needed");
    assert!(held > 4, "appends filled the active segment first ({held})");
    // Two more queue behind it; none is reported while the disk is full.
    for seq in held + 1..=held + 2 {
        written.submit(&writer, seq, 4, 15_000);
    }
    let quiet = next_event(&writer, Duration::from_millis(2500));
    assert!(quiet.is_none(), "while full: {quiet:?}");
    let last = fill_while_full(&writer, &mut written, held + 3, 3);
    std::fs::remove_file(&ballast).unwrap();
    let mut available = false;
    let deadline = Instant::now() + WAIT;
    while durable_seq < last {
        let left = deadline.saturating_duration_since(Instant::now());
        match next_event(&writer, left).expect("space returned but nothing happened") {
            WriterEvent::StorageAvailable { free_bytes } => {
                assert!(free_bytes >= SEGMENT, "{free_bytes}");
                available = true;
            }
            WriterEvent::Durable { up_to_seq, .. } => {
                assert!(available, "durable before the space was reported back");
                durable_seq = up_to_seq;
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    let log = writer.shutdown().expect("a clean stop");
    assert_eq!(log.segment_bases().len(), 2);
    assert_eq!(read_all(&log), written.batches, "every append, in order");
}

/// Small appends, submitted without waiting while the disk is full and the writer already
/// holds `held` appends it cannot write: it takes `request_capacity` requests in all (none can
/// go out before space returns) and leaves the rest in the channel, where they push back on
/// the sender (`congested` from three quarters full, then refused) for as long as the disk stays
/// full. Returns the last seq submitted.
fn fill_while_full(
    writer: &engine::io::GroupCommitWriter,
    written: &mut Appended,
    first_seq: u64,
    held: usize,
) -> u64 {
    let capacity = writer.request_capacity();
    assert_eq!(capacity % 4, 0);
    let mut seq = first_seq;
    let mut submit = |written: &mut Appended| {
        let b = batch(written.end_offset, 1, 1, 10);
        let request = append_request(seq, b.clone());
        writer.try_submit(request).map(|()| {
            written.end_offset += 1;
            written.batches.push(b);
            seq += 1;
        })
    };
    let settle = || std::thread::sleep(SPACE_RETRY * 2 + Duration::from_millis(500));
    for _ in held..capacity {
        assert!(submit(written).is_ok(), "the channel has room");
    }
    settle();
    assert_eq!(
        writer.backlog(),
        0,
        "the writer's queue takes {capacity} in all"
    );
    for queued in 0..capacity {
        assert_eq!(
            writer.backlog(),
            queued,
            "the writer took a request past its bound"
        );
        assert_eq!(
            writer.congested(),
            queued >= capacity / 4 * 3,
            "{queued} queued"
        );
        assert!(submit(written).is_ok(), "the channel has room");
    }
    assert!(writer.congested());
    assert!(submit(written).is_err(), "a full channel refuses");
    settle();
    assert_eq!(
        writer.backlog(),
        capacity,
        "requests taken off the channel while the disk is full"
    );
    seq - 1
}

/// A shutdown while the disk is full and the request channel too: the writer stops (the
/// Shutdown request cannot reach it through the full channel) and hands back the log as it was
/// durable; the held appends were never reported durable, so nothing acknowledged is lost.
fn stop_while_full_scenario(dir: &Path) {
    let log = Log::open(dir, small_config(SEGMENT)).unwrap();
    let ballast = ballast(dir.parent().unwrap(), SEGMENT / 4);
    let config = WriterConfig {
        request_capacity: 16,
        ..WriterConfig::default()
    };
    let writer = engine::io::GroupCommitWriter::start(log, config).unwrap();
    let mut written = Appended::default();
    let (held, durable_end) = append_until_held(&writer, &mut written);
    fill_while_full(&writer, &mut written, held + 1, 1);
    // On a thread of its own, so a shutdown that never ends fails here rather than at the
    // parent's budget.
    let (done_tx, done) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = done_tx.send(writer.shutdown());
    });
    let log = done
        .recv_timeout(Duration::from_secs(30))
        .expect("the writer stops while the disk and the channel are full")
        .expect("a clean stop");
    assert_eq!(log.end_offset(), durable_end);
    let kept: Vec<_> = written
        .batches
        .iter()
        .filter(|b| header(b).0 < durable_end)
        .cloned()
        .collect();
    assert_eq!(read_all(&log), kept);
    drop(log);
    std::fs::remove_file(&ballast).unwrap();
}

/// The writer's other bound while the disk is full: two groups' worth of batch bytes. Once
/// what it holds reaches exactly that, a request of a single byte more stays in the channel.
fn byte_bound_scenario(dir: &Path) {
    let config = engine::log::LogConfig {
        max_group_bytes: 64 << 10,
        ..small_config(SEGMENT)
    };
    let log = Log::open(dir, config).unwrap();
    let ballast = ballast(dir.parent().unwrap(), SEGMENT / 4);
    let writer = engine::io::GroupCommitWriter::start(log, WriterConfig::default()).unwrap();
    let mut written = Appended::default();
    let (held, _) = append_until_held(&writer, &mut written);
    let held_bytes = written.batches.last().unwrap().len();
    let bound = 2 * (64 << 10);
    let fill = batch_of_len(written.end_offset, bound - held_bytes);
    let one_more = batch(written.end_offset + 1, 1, 1, 10);
    for (seq, b) in [(held + 1, fill), (held + 2, one_more)] {
        let request = append_request(seq, b);
        assert!(writer.try_submit(request).is_ok());
    }
    std::thread::sleep(SPACE_RETRY * 2 + Duration::from_millis(500));
    assert_eq!(writer.backlog(), 1, "taken past {bound} bytes held");
    drop(writer);
    std::fs::remove_file(&ballast).unwrap();
}

/// Appends (4 records of 15 kB each), one at a time and each waited for, until one is held for
/// want of space: its seq, and the end offset durable before it.
fn append_until_held(writer: &engine::io::GroupCommitWriter, written: &mut Appended) -> (u64, i64) {
    let mut durable_end = 0;
    for seq in 1..=200u64 {
        written.submit(writer, seq, 4, 15_000);
        match wait_durable(writer, seq) {
            Some(end) => durable_end = end,
            None => {
                assert!(seq > 1, "the first append was held");
                return (seq, durable_end);
            }
        }
    }
    panic!("200 appends and the disk never filled");
}

/// The end offset once `seq` is durable, or None if it is not within two seconds.
fn wait_durable(writer: &engine::io::GroupCommitWriter, seq: u64) -> Option<i64> {
    let deadline = Instant::now() + Duration::from_secs(2);
    while Instant::now() < deadline {
        match next_event(writer, Duration::from_millis(100)) {
            Some(WriterEvent::Durable {
                up_to_seq,
                end_offset,
            }) if up_to_seq == seq => return Some(end_offset),
            Some(WriterEvent::Durable { .. } | WriterEvent::StorageFull { .. }) | None => {}
            Some(other) => panic!("unexpected {other:?}"),
        }
    }
    None
}

/// The child's body: runs only when re-executed by the parent in its namespace.
#[test]
fn space_child() {
    let Ok(mount) = std::env::var(CHILD_ENV) else {
        return;
    };
    let mount = Path::new(&mount);
    for (name, scenario) in [
        ("log", log_scenario as fn(&Path)),
        ("writer", writer_scenario as fn(&Path)),
        ("exact", exact_scenario as fn(&Path)),
        ("stop-while-full", stop_while_full_scenario as fn(&Path)),
        ("byte-bound", byte_bound_scenario as fn(&Path)),
    ] {
        let dir = mount.join(name);
        std::fs::create_dir(&dir).unwrap();
        // Each scenario's ballast is made from the room left when it starts.
        scenario(&dir);
        std::fs::remove_dir_all(&dir).unwrap();
        println!("scenario {name}: passed");
    }
}

#[test]
fn a_full_disk_refuses_the_roll_and_resumes_when_space_returns() {
    let root = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let script = r#"mount -t tmpfs -o size=4m none "$1" || { echo "mount: failed" >&2; exit 99; }
        exec "$2" --exact space_child --nocapture --test-threads=1"#;
    let mut child = Command::new("unshare")
        .args(["-rm", "sh", "-c", script, "sh"])
        .arg(root.path())
        .arg(&exe)
        .env(CHILD_ENV, root.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("unshare (util-linux) runs");
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > CHILD_BUDGET {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("the child ran past {CHILD_BUDGET:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let output = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(status.success(), "child {status}:\n{stdout}\n{stderr}");
    for name in ["log", "writer", "exact", "stop-while-full", "byte-bound"] {
        assert!(
            stdout.contains(&format!("scenario {name}: passed")),
            "scenario {name} did not run:\n{stdout}"
        );
    }
}
