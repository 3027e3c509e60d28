//! The producer-state snapshot on the node (docs/storage.md, "The producer-state snapshot"):
//! the replica decides when one is taken and encodes it (`engine::replica::snapshots`; retention
//! never passes the newest one written); the node writes it on a thread of its own so the raft
//! thread never waits for the disk, hands the outcome back to the replica, and reads the file
//! at start, where it must fit the log or is not used.

use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::thread::JoinHandle;

use engine::base::Offset;
use engine::log::Log;
use engine::producer_snapshot::ProducerSnapshot;
use engine::producer_snapshot_store::ProducerSnapshotStore;
use engine::replica::rebuild::{check_snapshot, SnapshotMisfit};

use super::*;

/// The thread that writes the snapshots, and its answers.
pub(super) struct Snapshots {
    /// Hands a snapshot's bytes to the writing thread.
    to_writer: Option<SyncSender<(Offset, Vec<u8>)>>,
    /// The thread's answers: the offset written, and whether the write succeeded.
    written: Receiver<(Offset, bool)>,
    thread: Option<JoinHandle<()>>,
}

impl Snapshots {
    /// Starts the writing thread (before the raft thread pins itself: it must not share that
    /// CPU).
    pub(super) fn start(
        store: ProducerSnapshotStore,
        node: NodeId,
        metrics: Arc<RaftMetrics>,
    ) -> Result<Self, NodeError> {
        // The replica hands over one snapshot at a time (the next waits for this one's answer),
        // plus the last one at a graceful shutdown.
        let (to_writer, from_node) = sync_channel::<(Offset, Vec<u8>)>(2);
        let (answer, written) = sync_channel::<(Offset, bool)>(2);
        let thread = std::thread::Builder::new()
            .name("producer-snapshot".into())
            .spawn(move || {
                for (offset, bytes) in from_node {
                    let ok = match store.write(&bytes) {
                        Ok(()) => {
                            metrics.producer_snapshot_offset.set(offset);
                            true
                        }
                        Err(error) => {
                            metrics.producer_snapshot_failures.add(1);
                            // Nothing acknowledged depends on the file: the replica keeps
                            // retention below the last one written.
                            warn!(
                                node,
                                file = %store.path().display(),
                                "writing the producer-state snapshot failed: {error}"
                            );
                            false
                        }
                    };
                    // At most two wait (one handed over at a time, and the last at a graceful
                    // shutdown), so this never blocks; a node that is gone waits for none.
                    let _ = answer.send((offset, ok));
                }
            })
            .map_err(NodeError::SnapshotThread)?;
        Ok(Self {
            to_writer: Some(to_writer),
            written,
            thread: Some(thread),
        })
    }

    /// Hands the snapshot at `offset` to the writing thread; false if the thread is gone (it
    /// can only have panicked).
    fn hand_over(&self, offset: Offset, bytes: Vec<u8>) -> bool {
        self.to_writer
            .as_ref()
            .is_some_and(|to_writer| to_writer.try_send((offset, bytes)).is_ok())
    }

    /// The next answer of the writing thread, if one came.
    fn answer(&self) -> Option<(Offset, bool)> {
        // Empty, or the thread is gone (it can only have panicked): nothing more comes.
        self.written.try_recv().ok()
    }

    /// Waits for the writing thread to write what it was handed, then stops it.
    fn finish(&mut self) {
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
    #[error("{0}")]
    Misfit(#[from] SnapshotMisfit),
}

/// The snapshot in `store`, and the file's bytes, if there is one and it fits `log`
/// (`engine::replica::rebuild` decides). Ok(None): no file.
pub(super) fn load(
    store: &ProducerSnapshotStore,
    log: &Log,
) -> Result<Option<(ProducerSnapshot, Bytes)>, SnapshotUnused> {
    let Some(bytes) = store.read().map_err(SnapshotUnused::Read)? else {
        return Ok(None);
    };
    let snapshot = ProducerSnapshot::decode(&bytes)?;
    check_snapshot(&snapshot, log.start_offset(), log.end_offset(), |offset| {
        log.epoch_cache().epoch_at(offset)
    })?;
    Ok(Some((snapshot, Bytes::from(bytes))))
}

impl Node {
    /// The replica asked for the snapshot at `offset` to be written.
    pub(super) fn write_producer_snapshot(&mut self, offset: Offset, bytes: Vec<u8>) {
        if !self.snapshots.hand_over(offset, bytes) {
            self.step(engine::replica::Input::ProducerSnapshotWritten { offset, ok: false });
        }
    }

    /// Hands the writing thread's answers to the replica (on every turn of the loop).
    pub(super) fn tend_producer_snapshots(&mut self) {
        // Bounded: the thread answers at most what it was handed, one at a time.
        for _ in 0..4 {
            let Some((offset, ok)) = self.snapshots.answer() else {
                return;
            };
            self.step(engine::replica::Input::ProducerSnapshotWritten { offset, ok });
        }
    }

    /// At a graceful shutdown, once the writer has stopped with its log durable up to
    /// `durable_end` (None: it stopped on an error): the replica's last snapshot (if the high
    /// watermark moved), written before the node exits, so the next start replays nothing it
    /// need not.
    pub(super) fn finish_producer_snapshots(&mut self, durable_end: Option<Offset>) {
        if let Some(durable_end) = durable_end {
            if let Some((offset, bytes)) = self.replica.final_producer_snapshot(durable_end) {
                self.snapshots.hand_over(offset, bytes);
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
            groups: Some(Vec::new()),
        }
        .encode()
        .expect("no offsets")
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
                Ok(Some((snapshot, _))) => assert!(
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
}
