//! The producer-state snapshot on the node (docs/storage.md, "The producer-state snapshot"):
//! taken at the high watermark once enough log has been appended since the last one, or enough
//! time has passed, and at a graceful shutdown; written by a thread of its own so the raft
//! thread never waits for the disk; read at start, where it must fit the log or is not used.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, SyncSender};
use std::thread::JoinHandle;

use engine::base::Offset;
use engine::log::Log;
use engine::producer_snapshot::{encode_parts, ProducerSnapshot};
use engine::producer_snapshot_store::ProducerSnapshotStore;

use super::*;

/// A snapshot is due once a segment's worth of batches (`log.segment.bytes`), at most this
/// many bytes, were appended since the last one: a start then replays at most about this much
/// log (docs/benchmarks.md, "Producer-state rebuild at start"), and retention, which deletes
/// whole segments, seldom passes the newest snapshot.
const MAX_SNAPSHOT_EVERY_BYTES: u64 = 64 << 20;
/// ... or once this long has passed with anything appended.
const SNAPSHOT_EVERY: Duration = Duration::from_secs(300);

/// When the next snapshot is due, and the thread that writes them.
pub(super) struct Snapshots {
    /// The offset of the last snapshot taken (0: none this run).
    last_offset: Offset,
    last_at: Instant,
    appended_since: u64,
    every_bytes: u64,
    /// Hands a snapshot's bytes to the writing thread.
    to_writer: Option<SyncSender<(Offset, Vec<u8>)>>,
    /// Set from the hand-over until the thread has written the file: no snapshot is taken
    /// (encoded) meanwhile, so a slow disk costs the raft thread nothing more.
    writing: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Snapshots {
    /// Starts the writing thread (before the raft thread pins itself: it must not share that
    /// CPU).
    pub(super) fn start(
        store: ProducerSnapshotStore,
        node: NodeId,
        segment_bytes: u64,
        metrics: Arc<RaftMetrics>,
    ) -> Result<Self, NodeError> {
        let (to_writer, from_node) = sync_channel::<(Offset, Vec<u8>)>(1);
        let writing = Arc::new(AtomicBool::new(false));
        let done = Arc::clone(&writing);
        let thread = std::thread::Builder::new()
            .name("producer-snapshot".into())
            .spawn(move || {
                for (offset, bytes) in from_node {
                    if let Err(error) = store.write(&bytes) {
                        metrics.producer_snapshot_failures.add(1);
                        // Nothing acknowledged depends on the file: a start without it reads
                        // the whole log, as it would with none.
                        warn!(
                            node,
                            file = %store.path().display(),
                            "writing the producer-state snapshot failed: {error}"
                        );
                    } else {
                        metrics.producer_snapshot_offset.set(offset);
                    }
                    done.store(false, Ordering::Release);
                }
            })
            .map_err(NodeError::SnapshotThread)?;
        Ok(Self {
            last_offset: 0,
            last_at: Instant::now(),
            appended_since: 0,
            every_bytes: segment_bytes.clamp(1, MAX_SNAPSHOT_EVERY_BYTES),
            to_writer: Some(to_writer),
            writing,
            thread: Some(thread),
        })
    }

    pub(super) fn appended(&mut self, bytes: u64) {
        self.appended_since = self.appended_since.saturating_add(bytes);
    }

    /// Whether a snapshot at `hw` is due, with the log starting at `log_start`: past the last
    /// one, and after enough bytes or time, or once retention has moved the log start past
    /// the last one (which a start could then no longer use).
    fn due(&self, hw: Offset, log_start: Offset, now: Instant) -> bool {
        hw > self.last_offset
            && !self.writing.load(Ordering::Acquire)
            && (self.appended_since >= self.every_bytes
                || (self.appended_since > 0 && now.duration_since(self.last_at) >= SNAPSHOT_EVERY)
                || log_start >= self.last_offset)
    }

    /// Hands a snapshot at `offset` to the writing thread, which has written the one before
    /// (see `writing`; only at a graceful shutdown may this wait for it).
    fn hand_over(&mut self, offset: Offset, bytes: Vec<u8>, now: Instant) {
        let Some(to_writer) = &self.to_writer else {
            return;
        };
        // Set before the hand-over: the thread clears it once the file is written.
        self.writing.store(true, Ordering::Release);
        if to_writer.send((offset, bytes)).is_ok() {
            self.last_offset = offset;
            self.last_at = now;
            self.appended_since = 0;
        } else {
            // The thread is gone (it can only have panicked): no snapshot waits for it.
            self.writing.store(false, Ordering::Release);
        }
    }

    /// Waits for the writing thread to write what it was handed, then stops it.
    pub(super) fn finish(&mut self) {
        self.to_writer = None;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Why a snapshot file is not used at start (the node then reads its whole log).
#[derive(Debug, thiserror::Error)]
pub(super) enum SnapshotUnused {
    #[error("reading it: {0}")]
    Read(std::io::Error),
    #[error("{0}")]
    Decode(#[from] engine::producer_snapshot::SnapshotError),
    #[error(
        "its offset {offset} is outside the log's {start}..={end} (retention went past it, or \
         the log was reset or lost its tail)"
    )]
    Outside {
        offset: Offset,
        start: Offset,
        end: Offset,
    },
    #[error("it names epoch {named} at offset {offset}, the log {found:?}")]
    Epoch {
        named: i32,
        offset: Offset,
        found: Option<i32>,
    },
}

/// The snapshot in `store` if there is one and it fits `log`: its offset inside the log (above
/// the start, at most the end) and the batch that ends just below it of the epoch it names.
/// Ok(None): no file.
pub(super) fn load(
    store: &ProducerSnapshotStore,
    log: &Log,
) -> Result<Option<ProducerSnapshot>, SnapshotUnused> {
    let Some(bytes) = store.read().map_err(SnapshotUnused::Read)? else {
        return Ok(None);
    };
    let snapshot = ProducerSnapshot::decode(&bytes)?;
    let (start, end) = (log.start_offset(), log.end_offset());
    if snapshot.offset <= start || snapshot.offset > end {
        return Err(SnapshotUnused::Outside {
            offset: snapshot.offset,
            start,
            end,
        });
    }
    let found = log.epoch_cache().epoch_at(snapshot.offset - 1);
    if found != Some(snapshot.epoch) {
        return Err(SnapshotUnused::Epoch {
            named: snapshot.epoch,
            offset: snapshot.offset - 1,
            found,
        });
    }
    Ok(Some(snapshot))
}

impl Node {
    /// The bytes a log operation appends count toward the next snapshot.
    pub(super) fn note_appended_for_snapshots(&mut self, op: &LogOp) {
        if let LogOpKind::Append(batches) = &op.kind {
            self.snapshots
                .appended(batches.iter().map(|b| b.bytes.len() as u64).sum());
        }
    }

    /// After the high watermark moved to `hw` (and the producer state and the blocks were told):
    /// takes a snapshot there when one is due.
    pub(super) fn maybe_snapshot_producers(&mut self, hw: Offset) {
        let now = self.woke;
        if self
            .snapshots
            .due(hw, self.replica.core().log_start_offset(), now)
        {
            self.snapshot_producers(hw, now);
        }
    }

    fn snapshot_producers(&mut self, hw: Offset, now: Instant) {
        if let Some(bytes) = self.producer_snapshot(hw) {
            self.snapshots.hand_over(hw, bytes, now);
        }
    }

    /// The snapshot's bytes at `hw`, when the producer state and the blocks are both committed
    /// exactly there and the log holds the batch below it. One pass over the state, on the
    /// raft thread (docs/benchmarks.md, "Producer-state snapshot").
    fn producer_snapshot(&self, hw: Offset) -> Option<Vec<u8>> {
        let producers = self.replica.producing().producers();
        if hw <= self.replica.core().log_start_offset()
            || hw > self.replica.core().log_end_offset()
            || producers.committed() != hw
        {
            return None;
        }
        let epoch = self.replica.core().log_epoch_at(hw - 1)?;
        // Taken (copied, sorted) only once the cheap checks pass.
        let blocks = self.replica.producer_ids().committed_blocks();
        if blocks.committed_to != hw {
            return None;
        }
        Some(encode_parts(
            hw,
            epoch,
            &blocks,
            producers.committed_batches(),
        ))
    }

    /// At a graceful shutdown: a last snapshot at the high watermark (if it moved), written
    /// before the node exits, so the next start replays nothing it need not.
    pub(super) fn finish_producer_snapshots(&mut self) {
        if let Some(hw) = self.replica.core().high_watermark() {
            if hw > self.snapshots.last_offset {
                self.snapshot_producers(hw, Instant::now());
            }
        }
        self.snapshots.finish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use engine::log::LogConfig;
    use engine::producer_ids::CommittedBlocks;
    use engine::record::RecordBatchBuilder;

    /// A log with batches of two records: epoch 1 at offsets 0-5, epoch 3 at 6-11.
    fn log_in(dir: &std::path::Path) -> Log {
        let config = LogConfig {
            preallocate: false,
            ..LogConfig::default()
        };
        let mut log = Log::open(dir, config).unwrap();
        for (base, epoch) in [(0, 1), (2, 1), (4, 1), (6, 3), (8, 3), (10, 3)] {
            let mut builder = RecordBatchBuilder::new(base, epoch);
            builder.append(0, None, Some(b"a"), &[]);
            builder.append(0, None, Some(b"b"), &[]);
            log.append(&[builder.build().freeze()]).unwrap();
        }
        log
    }

    fn snapshot_at(offset: Offset, epoch: i32) -> Vec<u8> {
        ProducerSnapshot {
            offset,
            epoch,
            blocks: CommittedBlocks {
                committed_to: offset,
                committed_end: 0,
                newest_record: None,
                latest: Vec::new(),
            },
            producers: Vec::new(),
        }
        .encode()
    }

    /// A snapshot is used only inside the log, in the epoch the log has there.
    #[test]
    fn only_a_snapshot_that_fits_the_log_is_used() {
        let dir = tempfile::tempdir().unwrap();
        let log = log_in(dir.path());
        let store = ProducerSnapshotStore::new(dir.path());
        assert!(matches!(load(&store, &log), Ok(None)), "no file");
        let cases = [
            (8, 3, true),
            (12, 3, true),
            (6, 1, true),
            (6, 3, false),
            (8, 1, false),
            (13, 3, false),
            (0, 1, false),
        ];
        for (offset, epoch, used) in cases {
            if offset == 0 {
                // A snapshot at 0 never decodes: its offset must be above any log start.
                let mut bytes = snapshot_at(1, epoch);
                bytes[6..14].copy_from_slice(&0i64.to_be_bytes());
                store.write(&bytes).unwrap();
            } else {
                store.write(&snapshot_at(offset, epoch)).unwrap();
            }
            match load(&store, &log) {
                Ok(Some(snapshot)) => assert!(
                    used && snapshot.offset == offset,
                    "offset {offset} epoch {epoch} was used"
                ),
                Err(why) => assert!(!used, "offset {offset} epoch {epoch}: {why}"),
                Ok(None) => panic!("offset {offset} epoch {epoch}: the file was not read"),
            }
        }
        // A replica whose log started again at its leader's log start: the snapshot of the old
        // log is below it.
        let mut log = log;
        log.reset_to(20, 5).unwrap();
        for (offset, epoch) in [(12, 3), (20, 5)] {
            store.write(&snapshot_at(offset, epoch)).unwrap();
            let why = load(&store, &log).unwrap_err().to_string();
            assert!(why.contains("outside the log's 20..=20"), "{why}");
        }
    }

    fn snapshots() -> Snapshots {
        Snapshots {
            last_offset: 10,
            last_at: Instant::now(),
            appended_since: 0,
            every_bytes: 1 << 20,
            to_writer: None,
            writing: Arc::new(AtomicBool::new(false)),
            thread: None,
        }
    }

    #[test]
    fn a_snapshot_is_due_after_enough_bytes_or_time_and_only_past_the_last() {
        let mut s = snapshots();
        let now = s.last_at;
        assert!(!s.due(11, 0, now));
        s.appended((1 << 20) - 1);
        assert!(!s.due(11, 0, now));
        assert!(s.due(11, 0, now + SNAPSHOT_EVERY));
        s.appended(1);
        assert!(s.due(11, 0, now));
        assert!(!s.due(10, 0, now), "not again at the same offset");
        let idle = snapshots();
        assert!(
            !idle.due(11, 0, now + SNAPSHOT_EVERY * 2),
            "nothing appended"
        );
        assert!(!idle.due(11, 9, now));
        assert!(
            idle.due(11, 10, now),
            "the log start reached the last snapshot"
        );
        idle.writing.store(true, Ordering::Release);
        assert!(
            !idle.due(11, 10, now),
            "not while the last one is being written"
        );
    }
}
