//! The segmented log on disk: segment files of Kafka RecordBatch v2 batches named by base offset,
//! a sparse offset index per segment, the leader-epoch cache with its checkpoint, recovery on
//! open, reads, appends and truncation.
//!
//! The write path is split so that two drivers share it: [`Log::append`] writes and syncs with
//! plain syscalls (tests, tools), and the group-commit writer (`engine::io`, a layer above) stages many appends with
//! [`Log::stage`], writes the group through io_uring, and calls [`Log::complete_group_write`].
//! See docs/storage.md for the layout and the rules.

mod batch_meta;
mod checkpoint;
mod durable_mark;
mod index;
mod index_file;
mod recovery;
mod retention;
mod segment;
mod timestamps;
mod view;

use std::collections::BTreeMap;
use std::fs::File;
use std::os::fd::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;

pub use crate::base::{EpochCache, EpochCacheError};
pub use batch_meta::{BatchMeta, BATCH_HEADER_LEN};
pub use checkpoint::{Checkpoint, CHECKPOINT_FILE};
pub use retention::{retention_start, RetentionPolicy, SegmentSummary};
pub use segment::{parse_segment_file_name, segment_file_name};
pub use timestamps::{
    first_record_at_or_after, FoundRecord, LookupStep, TimestampLookup, TimestampTarget,
    LOOKUP_STEP_BYTES,
};
pub use view::{LogView, ViewRead};

use crate::base::{Epoch, Offset};
use crate::os::aligned::{align_down, align_up, AlignedBuf, BLOCK};
use crate::os::file;
use durable_mark::DurableMark;
use index::{remove_if_present, SparseIndex};
use segment::{Segment, SegmentFile};

/// How the log lays out and preallocates its files.
#[derive(Clone, Debug)]
pub struct LogConfig {
    /// Roll to a new segment when the next batch would take the active one past this size
    /// (Kafka's `log.segment.bytes`).
    pub segment_bytes: u64,
    /// One sparse-index entry per this many bytes of batches (Kafka's `log.index.interval.bytes`).
    pub index_interval_bytes: u64,
    /// fallocate each new segment to `segment_bytes`.
    pub preallocate: bool,
    /// Bytes one group write may carry (each of the two staging buffers' capacity; a larger batch
    /// grows one). Both buffers plus the 1 MiB zero buffer are registered with the ring, which
    /// needs that much RLIMIT_MEMLOCK room (7 MiB with the default; 8 MiB is a common limit).
    pub max_group_bytes: usize,
    /// Keep this many bytes ahead of the write head zero-filled (0 = never). Writes over zeroed
    /// blocks sync faster than writes into unwritten extents (docs/storage.md, "Zero-fill
    /// ahead").
    pub zero_ahead_bytes: u64,
    /// Groups of at most this many bytes carry a zero-fill as an extra linked write when less
    /// than half of `zero_ahead_bytes` is left. `usize::MAX` = always, 0 = never (the default:
    /// the writer zero-fills while idle instead, [`Self::zero_fill_when_idle`]).
    pub zero_ahead_max_group_bytes: usize,
    /// The writer zero-fills ahead while it has nothing else to do, in chunks of
    /// [`IDLE_ZERO_CHUNK`] bytes, so no group waits for a zero-fill of its own.
    pub zero_fill_when_idle: bool,
    /// Retention renames the oldest segment it retires to the spare (the next segment) instead
    /// of deleting it, so new groups write over blocks written before (docs/storage.md,
    /// "Recycling").
    pub recycle_segments: bool,
}

impl Default for LogConfig {
    fn default() -> Self {
        Self {
            segment_bytes: 1 << 30,
            index_interval_bytes: 4096,
            preallocate: true,
            max_group_bytes: 3 << 20,
            zero_ahead_bytes: 1 << 20,
            zero_ahead_max_group_bytes: 0,
            zero_fill_when_idle: true,
            recycle_segments: true,
        }
    }
}

impl LogConfig {
    /// For opening a stopped node's log to read it (`ringraft dump-log`, checks in tests): no
    /// preallocation, so opening never grows a segment to `segment_bytes` (1 GiB by default,
    /// which once filled a small disk in CI).
    pub fn for_reading() -> Self {
        Self {
            preallocate: false,
            ..Self::default()
        }
    }
}

/// Everything that can go wrong in the log.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    #[error("{op} {path}: {source}")]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "corrupt log: {path} at byte {position} (offset {offset}): {reason}. This is not a torn \
         tail: cutting the log here would lose data that was on disk. Restore this replica from a \
         peer."
    )]
    Corrupt {
        path: PathBuf,
        position: u64,
        offset: Offset,
        reason: String,
    },
    #[error("append at offset {got} but the log ends at {expected}")]
    OffsetMismatch { expected: Offset, got: Offset },
    #[error("invalid batch appended at offset {offset}: {reason}")]
    InvalidBatch { offset: Offset, reason: String },
    #[error(transparent)]
    Epoch(#[from] EpochCacheError),
    /// The filesystem refused to allocate the next segment (ENOSPC, EDQUOT, or fewer free bytes
    /// than a segment needs). Nothing was changed: the log stays as it was and can be written
    /// up to the end of its active segment; the allocation can be tried again later.
    #[error(
        "no room for the next segment in {dir}: {needed} bytes needed, {free} free. Free space \
         on that filesystem (or set retention.bytes / retention.ms); the node resumes on its \
         own once a segment fits (docs/operations.md, \"A full disk\")"
    )]
    NoSpace {
        dir: PathBuf,
        needed: u64,
        free: u64,
    },
}

impl LogError {
    fn io<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> LogError + 'a {
        move |source| LogError::Io {
            op,
            path: path.to_path_buf(),
            source,
        }
    }
}

/// Why [`Log::stage`] stopped before the end of the batches it was given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StageStop {
    /// Every batch was staged.
    Done,
    /// The staging buffer is full: write the group, then stage the rest.
    GroupFull,
    /// The next batch belongs in a new segment: write the group, [`Log::roll`], stage the rest.
    NeedsRoll,
}

/// One group write as the writer submits it: `len` bytes (block multiple) from `buf` at
/// `file_offset` of `fd`, then optionally `zero_len` zeros at `zero_offset`, then a data sync.
#[derive(Clone, Copy, Debug)]
pub struct GroupWrite {
    pub fd: RawFd,
    pub buf: *const u8,
    pub len: usize,
    pub file_offset: u64,
    /// Bytes of batches in this write (the rest is the rewritten partial block and padding).
    pub new_bytes: usize,
    /// Batches in this write.
    pub batches: usize,
    pub zero_fill: Option<(u64, usize)>,
    /// The log end offset once this write is durable.
    pub end_offset: Offset,
    /// File position after the group's last batch.
    pub data_end: u64,
}

/// The write state of the last segment.
struct Active {
    /// O_DIRECT handle of the last segment.
    direct: File,
    /// Bytes of the file from `staging_position`: the rewritten partial block, then staged batches.
    staging: AlignedBuf,
    /// Block-aligned file position of `staging[0]`.
    staging_position: u64,
    /// Staging bytes already written (the partial block kept from the last group).
    written_len: usize,
    /// The file is known to hold written zeros (or data) up to here.
    zeroed_end: u64,
    /// An idle zero-fill is under way: it goes on, chunk by chunk, until `zero_ahead_bytes` are
    /// zeroed ahead; it starts again only once less than half of that is left.
    zero_refilling: bool,
    /// Batches staged since the last write.
    staged_batches: usize,
    /// Free staging buffers of the standard size: while one group's write is in flight from one
    /// buffer, the next group is staged in another.
    spares: Vec<AlignedBuf>,
    /// The buffer of the group write in flight, if any.
    in_flight: Option<AlignedBuf>,
}

/// Bytes of zeros one idle step of the writer writes ([`Log::zero_fill_idle`]): small enough
/// that a request arriving meanwhile waits for one short write at most.
pub const IDLE_ZERO_CHUNK: usize = 64 << 10;

/// The file the next segment is allocated in before a roll needs it (renamed into place by the
/// roll; not a segment name, so recovery never reads it as one).
pub const SPARE_FILE: &str = "next-segment.spare";

/// The next segment's file, allocated ahead (docs/storage.md, "A full disk").
struct Spare {
    path: PathBuf,
    direct: File,
    /// Its blocks up to here hold data written before (a recycled segment): writes over them
    /// need no extent conversion, so no zero-fill either.
    written: u64,
}

/// The log: segments, epoch cache, write state.
pub struct Log {
    dir: PathBuf,
    config: LogConfig,
    segments: BTreeMap<Offset, Segment>,
    epochs: EpochCache,
    end_offset: Offset,
    durable_end_offset: Offset,
    active: Active,
    /// Zeros for zero-fill ahead (allocated once, registered by the writer).
    zeros: AlignedBuf,
    checkpoint: Checkpoint,
    /// The offset the recovery scan at open started from.
    recovery_start: Offset,
    /// What readers on other threads see (kept current by every change below).
    view: Arc<LogView>,
    /// The next segment, allocated ahead of the roll ([`Self::prepare_spare`]).
    spare: Option<Spare>,
    /// How segment files came and went since the log was opened.
    segment_counts: SegmentCounts,
}

/// What the next roll takes for its segment ([`Log::spare_at_roll`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpareAtRoll {
    /// A freshly allocated file: retention lets no segment go by then.
    Allocated,
    /// The oldest sealed segment's file, which retention lets go by then.
    Recycled,
    /// The oldest sealed segment's file too, once the driver carries forward the record that
    /// pins it (without that record retention would start the log at `wanted`), as it must
    /// before the roll: nothing is allocated ahead for it either.
    HeldBack { wanted: Offset },
}

/// How the log came by its segment files and let them go, since it was opened: each is
/// allocated fresh ([`Log::prepare_spare`]), or a retired one renamed and reused (recycled),
/// or deleted. Deletions and fresh allocations are what recycling avoids (docs/storage.md,
/// "Recycling").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SegmentCounts {
    pub allocated: u64,
    pub recycled: u64,
    pub deleted: u64,
}

impl Log {
    /// Opens (or creates) the log in `dir`, recovering it: see [`recovery`] and docs/storage.md.
    pub fn open(dir: impl AsRef<Path>, config: LogConfig) -> Result<Log, LogError> {
        assert!(
            config.segment_bytes >= BLOCK as u64,
            "segment_bytes below one block"
        );
        assert!(
            config.max_group_bytes >= 2 * BLOCK,
            "max_group_bytes below two blocks"
        );
        recovery::open(dir.as_ref(), config)
    }

    /// The view of this log that readers on other threads read through (docs/storage.md,
    /// "Reads off the writer thread").
    pub fn view(&self) -> Arc<LogView> {
        Arc::clone(&self.view)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn config(&self) -> &LogConfig {
        &self.config
    }

    /// One past the last offset appended (staged batches included).
    pub fn end_offset(&self) -> Offset {
        self.end_offset
    }

    /// One past the last offset known to be on disk (written and fdatasync'd).
    pub fn durable_end_offset(&self) -> Offset {
        self.durable_end_offset
    }

    /// The first offset in the log.
    pub fn start_offset(&self) -> Offset {
        *self.segments.keys().next().expect("a log has a segment")
    }

    /// The epoch of the last batch (0 for an empty log).
    pub fn last_epoch(&self) -> Epoch {
        self.epochs.last_epoch()
    }

    pub fn epoch_cache(&self) -> &EpochCache {
        &self.epochs
    }

    /// The largest cached epoch <= `epoch` and where it ends (docs/protocol.md section 6).
    pub fn end_offset_for_epoch(&self, epoch: Epoch) -> Option<(Epoch, Offset)> {
        self.epochs.end_offset_for_epoch(epoch, self.end_offset)
    }

    /// What the Raft core is handed at start-up.
    pub fn snapshot(&self) -> LogSnapshot {
        LogSnapshot {
            start_offset: self.start_offset(),
            end_offset: self.end_offset,
            epochs: self.epochs.entries().to_vec(),
            voter_records: Vec::new(),
        }
    }

    /// The voter records from `from_offset` to the end (for [`LogSnapshot::voter_records`]):
    /// a read of the log's tail above the quorum-state file's AppliedOffset, at start.
    pub fn voter_records_from(
        &self,
        from_offset: Offset,
    ) -> Result<Vec<crate::record::voters::VoterRecord>, LogError> {
        const CHUNK_BYTES: usize = 1 << 20;
        let mut found = Vec::new();
        let mut next = from_offset.max(self.start_offset());
        while next < self.end_offset {
            let chunk = self.read(next, CHUNK_BYTES)?;
            if chunk.is_empty() {
                break;
            }
            let mut batches = Vec::with_capacity(chunk.len());
            for bytes in chunk {
                let batch = crate::record::Batch::from_stored(bytes).map_err(|e| {
                    LogError::InvalidBatch {
                        offset: next,
                        reason: format!("voter record scan: {e}"),
                    }
                })?;
                next = batch.end_offset();
                batches.push(batch);
            }
            let records = crate::record::voters::voter_records(&batches).map_err(|e| {
                LogError::InvalidBatch {
                    offset: e.base_offset,
                    reason: e.reason,
                }
            })?;
            found.extend(records.into_iter().filter(|r| r.offset >= from_offset));
        }
        Ok(found)
    }

    /// The offset the recovery scan at open started from (the checkpoint's recovery point): the
    /// open validated every batch from here to the end.
    pub fn recovery_start(&self) -> Offset {
        self.recovery_start
    }

    /// Base offsets of the segment files, ascending.
    pub fn segment_bases(&self) -> Vec<Offset> {
        self.segments.keys().copied().collect()
    }

    /// Appends whole batches whose base offsets continue the log, writes and fdatasyncs them
    /// before returning (the simple synchronous path; the node uses the GroupCommitWriter).
    pub fn append(&mut self, batches: &[Bytes]) -> Result<Offset, LogError> {
        let mut next = 0;
        loop {
            let (staged, stop) = self.stage(&batches[next..])?;
            next += staged;
            if let Some(write) = self.prepare_group_write() {
                self.write_group_sync(&write)?;
                self.complete_group_write(&write);
            }
            match stop {
                StageStop::Done => return Ok(self.end_offset),
                StageStop::GroupFull => {}
                StageStop::NeedsRoll => self.roll()?,
            }
        }
    }

    fn write_group_sync(&self, write: &GroupWrite) -> Result<(), LogError> {
        let path = self.active_segment().file.path.clone();
        let group = self.active.in_flight.as_ref().expect("a prepared group");
        assert_eq!(group.as_ptr(), write.buf);
        let data = &group.as_full_slice()[..write.len];
        file::write_all_at(&self.active.direct, data, write.file_offset)
            .map_err(LogError::io("write", &path))?;
        if let Some((offset, len)) = write.zero_fill {
            file::write_all_at(
                &self.active.direct,
                &self.zeros.as_full_slice()[..len],
                offset,
            )
            .map_err(LogError::io("write zeros", &path))?;
        }
        file::fdatasync(&self.active.direct).map_err(LogError::io("fdatasync", &path))
    }

    /// Copies as many of `batches` as fit into the staging buffer (without writing them), checking
    /// that each continues the log. Returns how many were staged and why it stopped.
    pub fn stage<B: AsRef<[u8]>>(&mut self, batches: &[B]) -> Result<(usize, StageStop), LogError> {
        // The active segment's index is locked once for the call, not once per batch: with
        // batches of one record the per-batch lock held 85% of the samples in the writer's
        // staging code in profiles of observers (docs/benchmarks.md, "The index locked once
        // per group").
        let file = Arc::clone(&self.active_segment().file);
        let mut index = file.index.lock();
        self.stage_noting(batches, &mut index)
    }

    fn stage_noting<B: AsRef<[u8]>>(
        &mut self,
        batches: &[B],
        index: &mut SparseIndex,
    ) -> Result<(usize, StageStop), LogError> {
        for (i, batch) in batches.iter().enumerate() {
            let batch = batch.as_ref();
            let meta = self.check_appended(batch)?;
            let segment_size = self.active_segment().size;
            if segment_size > 0 && segment_size + batch.len() as u64 > self.config.segment_bytes {
                return Ok((i, StageStop::NeedsRoll));
            }
            // One block stays free for the group's durable mark (see prepare_group_write).
            if batch.len() + BLOCK > self.active.staging.remaining() {
                if self.active.staging.len() > self.active.written_len {
                    return Ok((i, StageStop::GroupFull));
                }
                self.grow_staging(batch.len());
            }
            let last = self.epochs.entries().last().copied();
            self.epochs.assign(meta.epoch, meta.base_offset)?;
            if self.epochs.entries().last().copied() != last {
                // Readers check each batch's epoch against these (docs/storage.md, "Header
                // fields the CRC leaves out"); a new entry covers no readable batch yet.
                self.view.set_epochs(self.epochs.entries());
            }
            let position = self.active.staging_position + self.active.staging.len() as u64;
            self.active.staging.extend_from_slice(batch);
            self.active.staged_batches += 1;
            let interval = self.config.index_interval_bytes;
            index.note(meta.base_offset, position, meta.max_timestamp, interval);
            let segment = self.active_segment_mut();
            segment.size += batch.len() as u64;
            segment.end_offset = meta.next_offset();
            self.end_offset = meta.next_offset();
        }
        Ok((batches.len(), StageStop::Done))
    }

    fn check_appended(&self, batch: &[u8]) -> Result<BatchMeta, LogError> {
        let meta = match batch_meta::peek(batch) {
            batch_meta::Peek::Header(meta) => meta,
            other => {
                return Err(LogError::InvalidBatch {
                    offset: self.end_offset,
                    reason: format!("{other:?}"),
                })
            }
        };
        if meta.len != batch.len() {
            return Err(LogError::InvalidBatch {
                offset: self.end_offset,
                reason: format!("header says {} bytes, buffer has {}", meta.len, batch.len()),
            });
        }
        if meta.base_offset != self.end_offset {
            return Err(LogError::OffsetMismatch {
                expected: self.end_offset,
                got: meta.base_offset,
            });
        }
        Ok(meta)
    }

    fn grow_staging(&mut self, batch_len: usize) {
        let needed = self.active.staging.len() + batch_len + BLOCK;
        let mut grown = AlignedBuf::zeroed(needed.max(self.config.max_group_bytes));
        grown.extend_from_slice(self.active.staging.filled());
        let standard = std::mem::replace(&mut self.active.staging, grown);
        self.active
            .keep_spare(standard, self.config.max_group_bytes);
    }

    /// The two staging buffers' addresses and capacities, for registration with a ring (a buffer
    /// grown for a large batch later is not among them: the writer checks each write's address).
    pub fn staging_regions(&self) -> Vec<(*const u8, usize)> {
        let active = &self.active;
        let staging = std::iter::once(&active.staging);
        staging
            .chain(&active.spares)
            .chain(&active.in_flight)
            .map(|buf| (buf.as_ptr(), buf.capacity()))
            .collect()
    }

    /// The zero buffer's address and length, for registration with a ring.
    pub fn zeros_region(&self) -> (*const u8, usize) {
        (self.zeros.as_ptr(), self.zeros.capacity())
    }

    /// True when batches are staged but not yet written.
    pub fn has_staged(&self) -> bool {
        self.active.staging.len() > self.active.written_len
    }

    /// Pads the staged group to a block and describes its write (None when nothing is staged or
    /// a write is already in flight). The group's buffer stays untouched until
    /// [`Self::complete_group_write`]; meanwhile [`Self::stage`] fills the other buffer, which
    /// starts with a copy of the group's last partial block.
    pub fn prepare_group_write(&mut self) -> Option<GroupWrite> {
        if !self.has_staged() || self.active.in_flight.is_some() {
            return None;
        }
        let active = &mut self.active;
        let new_bytes = active.staging.len() - active.written_len;
        let data_len = active.staging.len();
        let padded = active.staging.pad_to_block();
        let file_offset = active.staging_position;
        // The group's durable mark, in the block after its data, in the same write (no extra
        // IO): what was durable when this write is issued, never this write's own end, which a
        // crash may tear (docs/storage.md, "Torn tail or corruption: the durable mark"). Staging
        // always leaves that block free; the next group's write covers it.
        let base = *self
            .segments
            .keys()
            .next_back()
            .expect("a log has a segment");
        let durable_position = self.active_segment().file.readable_size();
        let mark = DurableMark {
            segment_base: base,
            mark_position: file_offset + padded as u64,
            durable_position,
            durable_offset: self.durable_end_offset,
        };
        let active = &mut self.active;
        mark.encode_into(&mut active.staging.as_mut_slice()[padded..padded + BLOCK]);
        let len = padded + BLOCK;
        let write_end = file_offset + len as u64;
        let write = GroupWrite {
            fd: active.direct.as_raw_fd(),
            buf: active.staging.as_ptr(),
            len,
            file_offset,
            new_bytes,
            batches: active.staged_batches,
            zero_fill: None,
            end_offset: self.end_offset,
            data_end: file_offset + data_len as u64,
        };
        let capacity = self.config.max_group_bytes;
        let active = &mut self.active;
        let mut next = active
            .spares
            .pop()
            .unwrap_or_else(|| AlignedBuf::zeroed(capacity));
        next.set_len(0);
        let tail_start = align_down(data_len as u64) as usize;
        next.extend_from_slice(&active.staging.filled()[tail_start..]);
        let group = std::mem::replace(&mut active.staging, next);
        active.in_flight = Some(group);
        active.staging_position += tail_start as u64;
        active.written_len = active.staging.len();
        active.staged_batches = 0;
        Some(GroupWrite {
            zero_fill: self.zero_fill_for(new_bytes, write_end),
            ..write
        })
    }

    fn zero_fill_for(&self, new_bytes: usize, write_end: u64) -> Option<(u64, usize)> {
        let chunk = self
            .config
            .zero_ahead_bytes
            .min(self.zeros.capacity() as u64);
        if chunk == 0 || new_bytes > self.config.zero_ahead_max_group_bytes {
            return None;
        }
        let zeroed = self.active.zeroed_end.max(write_end);
        // Refill when less than half a chunk of zeroed space is left ahead of this write.
        if zeroed >= write_end + chunk / 2 {
            return None;
        }
        let limit = self.config.segment_bytes.max(write_end);
        let len = chunk.min(limit - zeroed);
        (len > 0).then_some((zeroed, len as usize))
    }

    /// Records that `write` is written and synced: its batches are durable and readable, and its
    /// buffer becomes the spare. (Its last partial block was already carried into the staging
    /// buffer by [`Self::prepare_group_write`], to be rewritten with the next group.)
    pub fn complete_group_write(&mut self, write: &GroupWrite) {
        let group = self
            .active
            .in_flight
            .take()
            .expect("a group write in flight");
        assert_eq!(group.as_ptr(), write.buf);
        let mut zeroed_end = self
            .active
            .zeroed_end
            .max(write.file_offset + write.len as u64);
        if let Some((offset, len)) = write.zero_fill {
            assert!(offset <= zeroed_end);
            zeroed_end = zeroed_end.max(offset + len as u64);
        }
        self.active.zeroed_end = zeroed_end;
        self.active.keep_spare(group, self.config.max_group_bytes);
        assert!(write.end_offset >= self.durable_end_offset);
        assert!(
            write.end_offset <= self.end_offset,
            "durable beyond the log end"
        );
        self.durable_end_offset = write.end_offset;
        let file = &self.active_segment().file;
        file.set_readable_size(file.readable_size().max(write.data_end));
    }

    /// Where the next idle zero-fill goes, if one is due: nothing staged or in flight, and
    /// less than `zero_ahead_bytes` zeroed ahead of the write head (within the segment).
    pub fn idle_zero_fill_due(&self) -> Option<(u64, usize)> {
        let config = &self.config;
        if !config.zero_fill_when_idle
            || config.zero_ahead_bytes == 0
            || self.has_staged()
            || self.write_in_flight()
        {
            return None;
        }
        let active = &self.active;
        let (head, target) = self.zero_ahead_target();
        let from = active.zeroed_end.max(align_up(head));
        // Refill from half a distance left, in one run of chunks: each chunk then carries
        // many blocks, and most requests find the writer with no zero-fill to do.
        let low = target.saturating_sub(config.zero_ahead_bytes / 2);
        let due = from < target && (active.zero_refilling || from < low);
        due.then(|| {
            let len = ((target - from) as usize)
                .min(IDLE_ZERO_CHUNK)
                .min(self.zeros.capacity());
            (from, len)
        })
    }

    /// The write head (the end of what is staged) and the block-aligned end of the zeros
    /// wanted ahead of it: `zero_ahead_bytes` further, within the segment.
    fn zero_ahead_target(&self) -> (u64, u64) {
        let head = self.active.staging_position + self.active.staging.len() as u64;
        let target = (head + self.config.zero_ahead_bytes).min(self.config.segment_bytes);
        (head, align_up(target))
    }

    /// Whether the zero-fill ahead is short of its full distance.
    fn idle_zero_fill_target_left(&self) -> bool {
        self.active.zeroed_end < self.zero_ahead_target().1
    }

    /// Writes one chunk of zeros ahead of the write head ([`Self::idle_zero_fill_due`]) with a
    /// plain O_DIRECT write and no sync: only speed depends on it (a crash leaves zeros or
    /// unwritten extents, both read as the log's end). Returns the bytes written (0: none due).
    pub fn zero_fill_idle(&mut self) -> Result<usize, LogError> {
        let Some((offset, len)) = self.idle_zero_fill_due() else {
            return Ok(0);
        };
        assert!(
            offset.is_multiple_of(BLOCK as u64) && len.is_multiple_of(BLOCK),
            "an unaligned zero-fill"
        );
        let path = &self.active_segment().file.path;
        file::write_all_at(
            &self.active.direct,
            &self.zeros.as_full_slice()[..len],
            offset,
        )
        .map_err(LogError::io("write zeros", path))?;
        self.active.zeroed_end = offset + len as u64;
        self.active.zero_refilling = self.idle_zero_fill_target_left();
        Ok(len)
    }

    /// True while a group write is in flight.
    pub fn write_in_flight(&self) -> bool {
        self.active.in_flight.is_some()
    }

    /// True when the next segment should be allocated now: none is, and the active segment is
    /// past half its size (the writer does it while idle, so a roll finds it ready and a full
    /// disk is known while the active segment still has room).
    pub fn spare_due(&self) -> bool {
        self.spare.is_none() && self.active_segment().size >= self.config.segment_bytes / 2
    }

    /// Allocates the next segment's file ([`SPARE_FILE`]) if it is not allocated yet. A refused
    /// allocation (no room) is [`LogError::NoSpace`] and changes nothing: the log carries on in
    /// its active segment and the allocation can be tried again. Any other error is an IO error.
    pub fn prepare_spare(&mut self) -> Result<(), LogError> {
        if self.spare.is_some() {
            return Ok(());
        }
        let needed = if self.config.preallocate {
            self.config.segment_bytes
        } else {
            0
        };
        let free = file::free_bytes(&self.dir).map_err(LogError::io("statvfs", &self.dir))?;
        if free < needed {
            return Err(self.no_space(needed, free));
        }
        let path = self.dir.join(SPARE_FILE);
        match allocate_spare(&path, needed) {
            Ok(direct) => {
                self.spare = Some(Spare {
                    path,
                    direct,
                    written: 0,
                });
                self.segment_counts.allocated += 1;
                Ok(())
            }
            Err((op, error)) => {
                // Whatever was allocated before the refusal is given back.
                let _ = std::fs::remove_file(&path);
                if file::is_no_space(&error) {
                    let free = file::free_bytes(&self.dir).unwrap_or(0);
                    return Err(self.no_space(needed, free));
                }
                Err(LogError::Io {
                    op,
                    path,
                    source: error,
                })
            }
        }
    }

    fn no_space(&self, needed: u64, free: u64) -> LogError {
        LogError::NoSpace {
            dir: self.dir.clone(),
            needed,
            free,
        }
    }

    /// True when the next segment is allocated.
    pub fn has_spare(&self) -> bool {
        self.spare.is_some()
    }

    pub fn segment_counts(&self) -> SegmentCounts {
        self.segment_counts
    }

    /// Where the oldest sealed segment ends, when a roll could take its file as the next
    /// segment: recycling is on, no spare is allocated, and a sealed segment is there.
    fn recyclable_oldest_end(&self) -> Option<Offset> {
        if !self.config.recycle_segments || self.spare.is_some() || self.segments.len() < 2 {
            return None;
        }
        Some(self.segments.values().next().expect("a segment").end_offset)
    }

    /// What the next roll does for its segment when retention under `policy` is applied at it
    /// (docs/storage.md, "Recycling"), reading the segments once: [`SpareAtRoll::Recycled`]
    /// when, never past `limit`, retention lets the oldest sealed segment go by the time the
    /// active segment is full (that segment then becomes the next one,
    /// [`Self::recycle_oldest_as_spare`], so a fresh allocation now would only be deleted
    /// again); [`SpareAtRoll::HeldBack`] when only `limit` keeps it, not `unpinned` (the high
    /// watermark): the driver must carry the record that pins it forward. With
    /// `retention.bytes` a multiple of the segment size, the oldest goes exactly at the roll,
    /// never before: the byte count asks as if the active segment were full. Deletes nothing.
    pub fn spare_at_roll(
        &self,
        policy: RetentionPolicy,
        wall_clock_ms: i64,
        limit: Offset,
        unpinned: Offset,
    ) -> Result<SpareAtRoll, LogError> {
        let Some(oldest_end) = self.recyclable_oldest_end() else {
            return Ok(SpareAtRoll::Allocated);
        };
        let mut summaries = self.segment_summaries()?;
        let active = summaries.last_mut().expect("a log has a segment");
        active.bytes = active.bytes.max(self.config.segment_bytes);
        let start_within = |limit: Offset| {
            retention_start(
                &summaries,
                policy,
                wall_clock_ms,
                limit.min(self.durable_end_offset),
            )
        };
        if start_within(limit) >= oldest_end {
            return Ok(SpareAtRoll::Recycled);
        }
        let wanted = start_within(unpinned);
        Ok(if wanted >= oldest_end {
            SpareAtRoll::HeldBack { wanted }
        } else {
            SpareAtRoll::Allocated
        })
    }

    /// At a roll with no spare: when retention under `policy` (never past `limit`) lets the
    /// oldest sealed segment go now, it goes, renamed to be the spare, and the new log start is
    /// returned. Any later segments retention lets go too are deleted (a log left over its size
    /// by a roll that came before a newer limit catches up here, not at the next retention
    /// run). `None`: nothing changed.
    pub fn recycle_oldest_as_spare(
        &mut self,
        policy: RetentionPolicy,
        wall_clock_ms: i64,
        limit: Offset,
    ) -> Result<Option<Offset>, LogError> {
        let Some(oldest_end) = self.recyclable_oldest_end() else {
            return Ok(None);
        };
        let wanted = self.retention_wants(policy, wall_clock_ms, limit)?;
        if wanted < oldest_end {
            return Ok(None);
        }
        let start = self.delete_segments_before(wanted)?;
        debug_assert!(start >= oldest_end);
        Ok(Some(start))
    }

    /// Starts a new segment at the end offset. Everything staged must be written first. The
    /// segment is the spare ([`Self::prepare_spare`], allocated here if it is not yet): a
    /// refused allocation is [`LogError::NoSpace`], returned before anything changes.
    pub fn roll(&mut self) -> Result<(), LogError> {
        assert!(
            !self.has_staged() && !self.write_in_flight(),
            "roll with unwritten batches"
        );
        self.prepare_spare()?;
        let old = self.active_segment();
        let (old_path, old_size) = (old.file.path.clone(), old.size);
        // Trim the preallocated tail so a sealed segment's length is its data (recovery relies on
        // it), and make that durable before the next segment exists.
        self.active
            .direct
            .set_len(old_size)
            .map_err(LogError::io("truncate", &old_path))?;
        self.active
            .direct
            .sync_all()
            .map_err(LogError::io("fsync", &old_path))?;
        let sealed = self.active_base();
        let base = self.end_offset;
        let spare = self.spare.take().expect("prepared above");
        let written = spare.written;
        let (segment, direct) = install_spare(&self.dir, base, spare)?;
        self.view.add_segment(base, Arc::clone(&segment.file));
        self.segments.insert(base, segment);
        let buffers = self.active.take_buffers(&self.config);
        self.active = Active::new(direct, 0, buffers);
        self.active.zeroed_end = align_down(written);
        let path = self.active_segment().file.path.clone();
        write_mark_synced(&mut self.active, &path, base, 0, base)?;
        self.persist_sealed_index(sealed);
        self.store_checkpoint(base, base, 0)
    }

    /// Writes a sealed segment's hints to its index file and frees them (docs/storage.md,
    /// "Sparse index").
    fn persist_sealed_index(&self, base: Offset) {
        let segment = &self.segments[&base];
        let file = &segment.file;
        let path = file.index_path();
        file.index.lock().persist_or_warn(&path, base, segment.size);
    }

    /// Drops every batch at or beyond `offset` and makes that durable. A truncation point inside
    /// a batch drops the whole batch. Returns the new end offset.
    pub fn truncate_to(&mut self, offset: Offset) -> Result<Offset, LogError> {
        assert!(
            !self.has_staged() && !self.write_in_flight(),
            "truncate with unwritten batches"
        );
        if offset >= self.end_offset {
            return Ok(self.end_offset);
        }
        let target_base = self.segment_base_for_truncation(offset);
        let (position, new_end, walked_max) = self.position_of(target_base, offset)?;
        // At equality too: a checkpoint at a segment's base names that segment, which goes.
        if self.checkpoint.offset >= new_end {
            let epochs = self.epochs.entries_before(new_end);
            self.checkpoint = Checkpoint::new(new_end, target_base, position, epochs);
            self.checkpoint
                .store(&self.dir)
                .map_err(LogError::io("store checkpoint", &self.dir))?;
        }
        // Readers first: nothing they read from now on shows what this cuts (docs/storage.md).
        self.view.begin_truncation(target_base, position);
        self.remove_segments_after(target_base)?;
        self.reopen_as_active(target_base, position, new_end, walked_max)?;
        self.epochs.truncate_to(new_end);
        self.view.set_epochs(self.epochs.entries());
        self.end_offset = new_end;
        self.durable_end_offset = new_end;
        Ok(new_end)
    }

    /// Drops the whole log and starts it again, empty, at `start` in `epoch`: a replica whose
    /// log fell behind its leader's log start (docs/storage.md, "Starting again at the
    /// leader's log start"). Every crash point leaves a valid log: a contiguous suffix of the
    /// old one while segments go (oldest first, the active one last), no segment at all (the
    /// log opens empty at 0, and the replica is reset again by its next fetch), or the new
    /// empty segment with a checkpoint that names `epoch` (stored first, so the segment never
    /// stands without it). A spare goes too: a recycled one may hold batches at or above
    /// `start`, which recovery would take for the new segment's.
    pub fn reset_to(&mut self, start: Offset, epoch: Epoch) -> Result<(), LogError> {
        assert!(
            !self.has_staged() && !self.write_in_flight(),
            "reset with unwritten batches"
        );
        assert!(start >= 0 && epoch >= 0, "a reset to ({start}, {epoch})");
        // Readers first, as for a truncation: nothing they read from now on shows the old log.
        self.view.begin_truncation(self.start_offset(), 0);
        self.view.drop_front(Offset::MAX);
        let bases: Vec<Offset> = self.segments.keys().copied().collect();
        for base in bases {
            let segment = self.segments.remove(&base).expect("listed segment");
            remove_segment_files(&segment)?;
            self.segment_counts.deleted += 1;
        }
        if let Some(spare) = self.spare.take() {
            std::fs::remove_file(&spare.path).map_err(LogError::io("remove", &spare.path))?;
        }
        file::fsync_dir(&self.dir).map_err(LogError::io("fsync dir", &self.dir))?;
        let epochs = vec![(epoch, start)];
        let checkpoint = Checkpoint::new(start, start, 0, epochs.clone());
        checkpoint
            .store(&self.dir)
            .map_err(LogError::io("store checkpoint", &self.dir))?;
        self.checkpoint = checkpoint;
        let (segment, direct) = create_segment(&self.dir, start, &self.config)?;
        self.view.add_segment(start, Arc::clone(&segment.file));
        self.segments.insert(start, segment);
        let buffers = self.active.take_buffers(&self.config);
        self.active = Active::new(direct, 0, buffers);
        let path = self.active_segment().file.path.clone();
        write_mark_synced(&mut self.active, &path, start, 0, start)?;
        self.epochs = EpochCache::from_entries(&epochs).expect("one entry");
        self.view.set_epochs(self.epochs.entries());
        self.end_offset = start;
        self.durable_end_offset = start;
        Ok(())
    }

    fn segment_base_for_truncation(&self, offset: Offset) -> Offset {
        let first = self.start_offset();
        self.segments
            .range(..offset)
            .next_back()
            .map_or(first, |(&base, _)| base)
    }

    /// What retention decides on (docs/storage.md, "Retention"): every segment in log order,
    /// the last one active. A sealed segment opened lazily is indexed here first, once, to know
    /// its newest timestamp.
    pub fn segment_summaries(&self) -> Result<Vec<SegmentSummary>, LogError> {
        self.segments
            .iter()
            .map(|(&base, segment)| {
                let file = &segment.file;
                file.ensure_indexed(self.config.index_interval_bytes)
                    .map_err(LogError::io("read", &file.path))?;
                let max_timestamp = file.index.lock().max_timestamp();
                Ok(SegmentSummary {
                    base,
                    end_offset: segment.end_offset,
                    bytes: segment.size,
                    max_timestamp,
                })
            })
            .collect()
    }

    /// Runs the retention policy ([`retention_start`]) on the log as it is, never past `limit`
    /// nor the durable end, and deletes (or recycles) what it lets go. Returns the log start.
    pub fn apply_retention(
        &mut self,
        policy: RetentionPolicy,
        wall_clock_ms: i64,
        limit: Offset,
    ) -> Result<Offset, LogError> {
        if policy.keeps_everything() {
            return Ok(self.start_offset());
        }
        let start = self.retention_wants(policy, wall_clock_ms, limit)?;
        self.delete_segments_before(start)
    }

    /// Where [`Self::apply_retention`] would start the log with `limit`, deleting nothing.
    pub fn retention_wants(
        &self,
        policy: RetentionPolicy,
        wall_clock_ms: i64,
        limit: Offset,
    ) -> Result<Offset, LogError> {
        if policy.keeps_everything() {
            return Ok(self.start_offset());
        }
        let limit = limit.min(self.durable_end_offset);
        Ok(retention_start(
            &self.segment_summaries()?,
            policy,
            wall_clock_ms,
            limit,
        ))
    }

    /// Deletes the sealed segments that end at or before `start`, oldest first, and returns
    /// the new log start (the first remaining segment's base, which the file names persist).
    /// Only durable data may go: `start` is at most the durable end. A crash between two
    /// deletions leaves a contiguous run of segments, so the log opens at the next base.
    pub fn delete_segments_before(&mut self, start: Offset) -> Result<Offset, LogError> {
        assert!(
            start <= self.durable_end_offset,
            "retention to {start} past the durable end {}",
            self.durable_end_offset
        );
        let active = self.active_base();
        let doomed: Vec<Offset> = self
            .segments
            .iter()
            .take_while(|(&base, s)| base != active && s.end_offset <= start)
            .map(|(&base, _)| base)
            .collect();
        let Some(&last) = doomed.last() else {
            return Ok(self.start_offset());
        };
        let new_start = self.segments[&last].end_offset;
        // Readers first, so none starts on a file about to lose its name.
        self.view.drop_front(new_start);
        for base in doomed {
            let segment = self.segments.remove(&base).expect("listed segment");
            let index_path = segment.file.index_path();
            remove_if_present(&index_path).map_err(LogError::io("remove", &index_path))?;
            if !self.recycle(&segment)? {
                remove_segment_files(&segment)?;
                self.segment_counts.deleted += 1;
            }
        }
        file::fsync_dir(&self.dir).map_err(LogError::io("fsync dir", &self.dir))?;
        debug_assert_eq!(self.start_offset(), new_start);
        self.epochs.trim_front(new_start);
        self.view.set_epochs(self.epochs.entries());
        if self.checkpoint.segment_base < new_start {
            // The recovery point was in a deleted segment: recovery would scan everything left.
            // Say so explicitly, from the new start, with the epoch that covers it: when nothing
            // follows the start (the active segment is empty) no batch would tell recovery the
            // log's last epoch, and a log of (epoch 0, end 600) would fetch as if it diverged.
            let epochs: Vec<_> = self.epochs.entries().iter().copied().take(1).collect();
            let checkpoint = Checkpoint::new(new_start, new_start, 0, epochs);
            checkpoint
                .store(&self.dir)
                .map_err(LogError::io("store checkpoint", &self.dir))?;
            self.checkpoint = checkpoint;
        }
        Ok(new_start)
    }

    /// Makes a retired segment the spare when recycling is on and there is none yet: renamed
    /// (the oldest first, so a crash leaves a contiguous run), grown back to a segment's size.
    /// Its old batches stay in its blocks; recovery tells them from the log's by their offsets,
    /// all below the base it gets (docs/storage.md, "Recycling"). False: delete it instead.
    fn recycle(&mut self, segment: &Segment) -> Result<bool, LogError> {
        if !self.config.recycle_segments || self.spare.is_some() {
            return Ok(false);
        }
        let path = self.dir.join(SPARE_FILE);
        let old = &segment.file.path;
        std::fs::rename(old, &path).map_err(LogError::io("rename", old))?;
        let direct = file::open_direct(&path, false).map_err(LogError::io("open", &path))?;
        if self.config.preallocate && segment.size < self.config.segment_bytes {
            // The trimmed tail only: a few blocks at most, allocated (if the disk refuses even
            // that, the roll allocates a fresh spare or reports the disk full).
            if let Err(error) = file::fallocate(&direct, 0, self.config.segment_bytes) {
                let _ = std::fs::remove_file(&path);
                if file::is_no_space(&error) {
                    self.segment_counts.deleted += 1;
                    return Ok(true);
                }
                return Err(LogError::io("fallocate", &path)(error));
            }
        }
        self.spare = Some(Spare {
            path,
            direct,
            written: segment.size,
        });
        self.segment_counts.recycled += 1;
        Ok(true)
    }

    /// Byte position in segment `base` where the batch holding `offset` starts (or the segment
    /// end), that batch's base offset, and the largest MaxTimestamp of the batches walked over
    /// from the index's hint to that position (for [`SparseIndex::truncate_at`]).
    fn position_of(&self, base: Offset, offset: Offset) -> Result<(u64, Offset, i64), LogError> {
        let segment = &self.segments[&base];
        let file = &segment.file;
        file.ensure_indexed(self.config.index_interval_bytes)
            .map_err(LogError::io("read", &file.path))?;
        let mut position = file.index.lock().lookup(offset);
        let readable = file.readable_size();
        let mut reader = file.chunk_reader(readable);
        let mut walked_max = index::NO_TIMESTAMP;
        while position < readable {
            let header = reader
                .get(position, BATCH_HEADER_LEN)
                .map_err(LogError::io("read", &file.path))?;
            let batch_meta::Peek::Header(meta) = batch_meta::peek(&header) else {
                break;
            };
            if meta.last_offset >= offset {
                return Ok((position, meta.base_offset, walked_max));
            }
            walked_max = walked_max.max(meta.max_timestamp);
            position += meta.len as u64;
        }
        Ok((position, segment.end_offset, walked_max))
    }

    fn remove_segments_after(&mut self, base: Offset) -> Result<(), LogError> {
        let doomed: Vec<Offset> = self.segments.range(base + 1..).map(|(&b, _)| b).collect();
        if doomed.is_empty() {
            return Ok(());
        }
        for b in doomed.iter().rev() {
            let segment = self.segments.remove(b).expect("listed segment");
            remove_segment_files(&segment)?;
            self.segment_counts.deleted += 1;
        }
        file::fsync_dir(&self.dir).map_err(LogError::io("fsync dir", &self.dir))
    }

    /// Makes segment `base` the active one, cut at `position`, with its tail zeroed and
    /// preallocated again, durably. `walked_max`: see [`Self::position_of`].
    fn reopen_as_active(
        &mut self,
        base: Offset,
        position: u64,
        end_offset: Offset,
        walked_max: i64,
    ) -> Result<(), LogError> {
        let segment = &self.segments[&base];
        let path = segment.file.path.clone();
        // A sealed segment's index file goes, durably, before the segment changes: it
        // describes the segment as it was (docs/storage.md, "Sparse index").
        let index_path = segment.file.index_path();
        let was_sealed = segment.file.index.lock().is_persisted();
        segment
            .file
            .index
            .lock()
            .unpersist(&index_path)
            .map_err(LogError::io("remove", &index_path))?;
        if was_sealed {
            file::fsync_dir(&self.dir).map_err(LogError::io("fsync dir", &self.dir))?;
        }
        let direct = file::open_direct(&path, false).map_err(LogError::io("open", &path))?;
        direct
            .set_len(position)
            .map_err(LogError::io("truncate", &path))?;
        if self.config.preallocate && self.config.segment_bytes > position {
            file::fallocate(&direct, 0, self.config.segment_bytes)
                .map_err(LogError::io("fallocate", &path))?;
        }
        direct.sync_all().map_err(LogError::io("fsync", &path))?;
        let buffers = self.active.take_buffers(&self.config);
        let mut active = Active::new(direct, position, buffers);
        // The cut is the durable end now: a mark says so (the blocks past the cut, and any
        // mark in them, went with the ftruncate).
        write_mark_synced(&mut active, &path, base, position, end_offset)?;
        load_partial_block(&mut active, &segment.file.reader, position)
            .map_err(LogError::io("read", &path))?;
        self.active = active;
        let segment = self.segments.get_mut(&base).expect("target segment");
        segment.size = position;
        segment.file.set_readable_size(position);
        segment.end_offset = end_offset;
        segment.file.index.lock().truncate_at(position, walked_max);
        Ok(())
    }

    /// Reads whole batches from the one holding `from_offset` on, up to about `max_bytes` (at least
    /// one batch when any exists there). Only written batches are returned. (Another thread reads
    /// through [`Self::view`] instead.)
    pub fn read(&self, from_offset: Offset, max_bytes: usize) -> Result<Vec<Bytes>, LogError> {
        let Some((&start, _)) = self.segments.range(..=from_offset).next_back() else {
            return Ok(Vec::new());
        };
        let files = self
            .segments
            .range(start..)
            .map(|(_, segment)| (&*segment.file, segment.file.readable_size()));
        view::read_files(
            files,
            from_offset,
            max_bytes,
            self.config.index_interval_bytes,
        )
    }

    /// A timestamp lookup run to its end here, step by step ([`timestamps`]); on another thread,
    /// [`LogView::lookup_step`] runs one step at a time instead.
    pub fn lookup_timestamp(
        &self,
        target: TimestampTarget,
        end: Offset,
    ) -> Result<Option<FoundRecord>, LogError> {
        let files: Vec<_> = self
            .segments
            .iter()
            .map(|(&base, s)| (base, Arc::clone(&s.file), s.file.readable_size()))
            .collect();
        let mut lookup = TimestampLookup::new(target, end);
        loop {
            match timestamps::step(&files, lookup, self.config.index_interval_bytes)?.0 {
                LookupStep::Done(found) => return Ok(found),
                LookupStep::Continue(next) => lookup = next,
            }
        }
    }

    /// Writes a checkpoint at the durable end, so the next open scans nothing. Call on shutdown.
    pub fn checkpoint_now(&mut self) -> Result<(), LogError> {
        assert!(
            !self.has_staged() && !self.write_in_flight(),
            "checkpoint with unwritten batches"
        );
        let base = self.active_base();
        let position = self.active_segment().size;
        // Everything is durable here: the mark then covers the last group too.
        let path = self.active_segment().file.path.clone();
        write_mark_synced(&mut self.active, &path, base, position, self.end_offset)?;
        self.store_checkpoint(self.end_offset, base, position)
    }

    fn store_checkpoint(
        &mut self,
        offset: Offset,
        base: Offset,
        position: u64,
    ) -> Result<(), LogError> {
        let checkpoint =
            Checkpoint::new(offset, base, position, self.epochs.entries_before(offset));
        checkpoint
            .store(&self.dir)
            .map_err(LogError::io("store checkpoint", &self.dir))?;
        self.checkpoint = checkpoint;
        Ok(())
    }

    fn active_base(&self) -> Offset {
        *self
            .segments
            .keys()
            .next_back()
            .expect("a log has a segment")
    }

    fn active_segment(&self) -> &Segment {
        self.segments
            .values()
            .next_back()
            .expect("a log has a segment")
    }

    fn active_segment_mut(&mut self) -> &mut Segment {
        self.segments
            .values_mut()
            .next_back()
            .expect("a log has a segment")
    }
}

impl Active {
    fn new(direct: File, position: u64, buffers: (AlignedBuf, AlignedBuf)) -> Self {
        let (mut staging, mut spare) = buffers;
        staging.set_len(0);
        spare.set_len(0);
        Active {
            direct,
            staging,
            staging_position: align_down(position),
            written_len: 0,
            zeroed_end: align_up(position),
            zero_refilling: false,
            staged_batches: 0,
            spares: vec![spare],
            in_flight: None,
        }
    }

    /// Keeps a free buffer for reuse if it has the standard size (a buffer grown for one large
    /// batch is dropped: it is not registered with the ring) and fewer than two are kept.
    fn keep_spare(&mut self, buf: AlignedBuf, standard: usize) {
        if buf.capacity() == standard && self.spares.len() < 2 {
            self.spares.push(buf);
        }
    }

    /// Fresh staging buffers for a log's first active segment.
    fn new_buffers(config: &LogConfig) -> (AlignedBuf, AlignedBuf) {
        (
            AlignedBuf::zeroed(config.max_group_bytes),
            AlignedBuf::zeroed(config.max_group_bytes),
        )
    }

    /// The staging buffers, to carry over to the next active segment (they stay registered).
    fn take_buffers(&mut self, config: &LogConfig) -> (AlignedBuf, AlignedBuf) {
        assert!(self.in_flight.is_none());
        let staging = std::mem::replace(&mut self.staging, AlignedBuf::zeroed(BLOCK));
        let spare = self
            .spares
            .pop()
            .unwrap_or_else(|| AlignedBuf::zeroed(config.max_group_bytes));
        (staging, spare)
    }
}

/// Loads the bytes of the last partial block before `position` into a fresh staging buffer, so
/// the next group rewrites that block whole.
fn load_partial_block(active: &mut Active, reader: &File, position: u64) -> std::io::Result<()> {
    let tail = (position - active.staging_position) as usize;
    if tail > 0 {
        let slice = &mut active.staging.as_mut_slice()[..tail];
        let got = file::read_at_most(reader, slice, active.staging_position)?;
        if got != tail {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "segment shorter than its recovered size",
            ));
        }
    }
    active.staging.set_len(tail);
    active.written_len = tail;
    Ok(())
}

/// Writes a durable mark saying that segment `base` holds durable batches up to `position`
/// (offset `offset`), in the block after them, and fdatasyncs it: for the moments the active
/// segment's end is set other than by a group write (a roll, a truncation, a reset, an open, a
/// clean stop). The caller has made those batches durable first. The block counts as written
/// for zero-fill ahead, which must not wipe the mark.
fn write_mark_synced(
    active: &mut Active,
    path: &Path,
    base: Offset,
    position: u64,
    offset: Offset,
) -> Result<(), LogError> {
    let at = align_up(position);
    let mut block = AlignedBuf::zeroed(BLOCK);
    DurableMark {
        segment_base: base,
        mark_position: at,
        durable_position: position,
        durable_offset: offset,
    }
    .encode_into(&mut block.as_mut_slice()[..BLOCK]);
    file::write_all_at(&active.direct, &block.as_full_slice()[..BLOCK], at)
        .map_err(LogError::io("write durable mark", path))?;
    file::fdatasync(&active.direct).map_err(LogError::io("fdatasync", path))?;
    active.zeroed_end = active.zeroed_end.max(at + BLOCK as u64);
    Ok(())
}

/// Creates and allocates the spare at `path` (the size of a segment, or empty), durably.
fn allocate_spare(path: &Path, bytes: u64) -> Result<File, (&'static str, std::io::Error)> {
    let direct = file::open_direct(path, true).map_err(|e| ("create", e))?;
    direct.set_len(0).map_err(|e| ("truncate", e))?;
    if bytes > 0 {
        file::fallocate(&direct, 0, bytes).map_err(|e| ("fallocate", e))?;
    }
    direct.sync_all().map_err(|e| ("fsync", e))?;
    Ok(direct)
}

/// Renames the spare to segment `base`, durably: the new active segment, empty.
/// Unlinks a segment's index file, then the segment (a crash between the two leaves a segment
/// without an index file, which is rebuilt; never an index file that outlives its segment).
fn remove_segment_files(segment: &Segment) -> Result<(), LogError> {
    let index_path = segment.file.index_path();
    remove_if_present(&index_path).map_err(LogError::io("remove", &index_path))?;
    let path = &segment.file.path;
    std::fs::remove_file(path).map_err(LogError::io("remove", path))
}

fn install_spare(dir: &Path, base: Offset, spare: Spare) -> Result<(Segment, File), LogError> {
    let path = dir.join(segment_file_name(base));
    std::fs::rename(&spare.path, &path).map_err(LogError::io("rename", &path))?;
    Ok((empty_segment(dir, path, base)?, spare.direct))
}

/// Creates segment `base` (fallocated when configured), durably, with its directory entry.
fn create_segment(
    dir: &Path,
    base: Offset,
    config: &LogConfig,
) -> Result<(Segment, File), LogError> {
    let path = dir.join(segment_file_name(base));
    let direct = file::open_direct(&path, true).map_err(LogError::io("create", &path))?;
    if config.preallocate {
        file::fallocate(&direct, 0, config.segment_bytes)
            .map_err(LogError::io("fallocate", &path))?;
    }
    direct.sync_all().map_err(LogError::io("fsync", &path))?;
    Ok((empty_segment(dir, path, base)?, direct))
}

/// The empty segment `base` whose file now stands at `path` in `dir`: its directory entry is made
/// durable before the segment is handed out, whether the file was created or a spare renamed.
fn empty_segment(dir: &Path, path: PathBuf, base: Offset) -> Result<Segment, LogError> {
    file::fsync_dir(dir).map_err(LogError::io("fsync dir", dir))?;
    let reader = SegmentFile::open_reader(&path).map_err(LogError::io("open", &path))?;
    Ok(Segment {
        file: SegmentFile::new(path, reader, 0, SparseIndex::new(true)),
        size: 0,
        end_offset: base,
    })
}
/// What the log looked like when the node started (after recovery), handed to the core once.
#[derive(Clone, Debug, Default)]
pub struct LogSnapshot {
    /// The first offset in the log (the first segment's base: docs/storage.md, "Retention").
    pub start_offset: Offset,
    /// Log end offset (everything below is durable: recovery only keeps what is on disk).
    pub end_offset: Offset,
    /// The leader-epoch cache: (epoch, start offset), ascending in both.
    pub epochs: Vec<(Epoch, Offset)>,
    /// The voter records (control type 100) at or above the quorum-state file's AppliedOffset,
    /// ascending: the core rebuilds the voter set in force from them (docs/protocol.md, "The
    /// voter set lives in the log"). [`Log::voter_records_from`] reads them.
    pub voter_records: Vec<crate::record::voters::VoterRecord>,
}
