//! Committed offsets of consumer groups, replicated through the log (docs/storage.md,
//! "Committed offsets"). An OffsetCommit becomes one control batch of type
//! [`ControlRecordType::GROUP_OFFSETS`] appended by the leader; every replica feeds each log
//! change to its [`OffsetStore`], which applies a record once the high watermark passes it and
//! forgets it if a truncation cuts it. So a new leader holds every committed offset once its
//! own epoch's first record has committed (every record below it is then committed, and was
//! fed to it), and a restarted node rebuilds the store by replaying the log. Consumers never
//! see these records as data: they are control batches, which Kafka clients skip.
//!
//! Logic only: records in, offsets out.

use std::collections::{BTreeMap, VecDeque};

use bytes::{BufMut, Bytes, BytesMut};

use crate::base::{Epoch, Offset};
use crate::raft::{LogOp, LogOpKind};
use crate::record::control::{control_batch, single_control_value, ControlRecordType};
use crate::record::{BatchView, RecordError};

/// The value layout's version written.
pub const RECORD_VERSION: i16 = 0;

/// Partitions one record carries at most (a request's bound, `net::wire::kafka::limits`, is
/// lower).
pub const MAX_RECORD_OFFSETS: usize = 100_000;

/// One partition's offset in a record: committed, or deleted (OffsetDelete, DeleteGroups).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionOffset {
    pub topic: String,
    pub partition: i32,
    /// None: the offset is deleted.
    pub offset: Option<Offset>,
    pub leader_epoch: Option<Epoch>,
    pub metadata: Option<String>,
}

/// One control record: a group's offsets as one OffsetCommit set them, or the whole group
/// deleted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupOffsetsRecord {
    pub group_id: String,
    /// The leader's wall clock when it appended the record.
    pub commit_timestamp_ms: i64,
    /// Every offset of the group is forgotten (before `offsets` apply).
    pub delete_group: bool,
    pub offsets: Vec<PartitionOffset>,
}

/// A committed offset as OffsetFetch answers it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Committed {
    pub offset: Offset,
    pub leader_epoch: Option<Epoch>,
    pub metadata: Option<String>,
    pub commit_timestamp_ms: i64,
}

fn put_string(out: &mut BytesMut, s: &str) {
    let len = i16::try_from(s.len()).expect("strings of a record fit an int16 length");
    out.put_i16(len);
    out.put_slice(s.as_bytes());
}

impl GroupOffsetsRecord {
    /// The value: version int16, group string, commit timestamp int64, delete-group int8,
    /// count int32, then per partition topic string, partition int32, offset int64 (-1:
    /// deleted), leader epoch int32 (-1: none), metadata nullable string (docs/storage.md,
    /// "Committed offsets"). Strings are an int16 length and UTF-8 bytes, big-endian numbers.
    pub fn encode(&self) -> BytesMut {
        assert!(
            self.offsets.len() <= MAX_RECORD_OFFSETS,
            "too many offsets for a record"
        );
        let mut out = BytesMut::with_capacity(32 + self.group_id.len() + 48 * self.offsets.len());
        out.put_i16(RECORD_VERSION);
        put_string(&mut out, &self.group_id);
        out.put_i64(self.commit_timestamp_ms);
        out.put_i8(i8::from(self.delete_group));
        out.put_i32(self.offsets.len() as i32);
        for p in &self.offsets {
            put_string(&mut out, &p.topic);
            out.put_i32(p.partition);
            out.put_i64(p.offset.unwrap_or(-1));
            out.put_i32(p.leader_epoch.unwrap_or(-1));
            match &p.metadata {
                Some(m) => put_string(&mut out, m),
                None => out.put_i16(-1),
            }
        }
        out
    }

    pub fn decode(value: &[u8]) -> Result<Self, RecordError> {
        let mut r = Reader { buf: value, at: 0 };
        let version = r.i16()?;
        if version != RECORD_VERSION {
            return Err(r.error("unknown GroupOffsets version"));
        }
        let group_id = r.string()?.ok_or_else(|| r.error("null group id"))?;
        let commit_timestamp_ms = r.i64()?;
        let delete_group = match r.take(1)?[0] {
            0 => false,
            1 => true,
            _ => return Err(r.error("delete-group is neither 0 nor 1")),
        };
        let count = r.i32()?;
        if count < 0 || count as usize > MAX_RECORD_OFFSETS {
            return Err(r.error("offset count out of bounds"));
        }
        let mut offsets = Vec::with_capacity((count as usize).min(1024));
        for _ in 0..count {
            let topic = r.string()?.ok_or_else(|| r.error("null topic"))?;
            let partition = r.i32()?;
            let offset = r.i64()?;
            let leader_epoch = r.i32()?;
            let metadata = r.string()?;
            if offset < -1 || leader_epoch < -1 || partition < 0 {
                return Err(r.error("negative offset, epoch or partition"));
            }
            offsets.push(PartitionOffset {
                topic,
                partition,
                offset: (offset >= 0).then_some(offset),
                leader_epoch: (leader_epoch >= 0).then_some(leader_epoch),
                metadata,
            });
        }
        if r.at != value.len() {
            return Err(r.error("bytes after the record"));
        }
        Ok(Self {
            group_id,
            commit_timestamp_ms,
            delete_group,
            offsets,
        })
    }

    /// A control batch holding this one record.
    pub fn to_batch(&self, base_offset: i64, epoch: i32, timestamp_ms: i64) -> BytesMut {
        control_batch(
            ControlRecordType::GROUP_OFFSETS,
            &self.encode(),
            base_offset,
            epoch,
            timestamp_ms,
        )
    }

    /// Decodes a control batch holding exactly one record of this type.
    pub fn from_batch(batch: &BatchView) -> Result<Self, RecordError> {
        let value = single_control_value(batch, ControlRecordType::GROUP_OFFSETS)?;
        Self::decode(&value)
    }
}

/// The group offsets record a stored control batch holds, if it holds one (anything else, or
/// a record that does not decode, is not one: a control batch of another type).
pub fn group_offsets_record(bytes: &Bytes) -> Option<GroupOffsetsRecord> {
    let view = BatchView::parse(bytes.clone()).ok()?;
    GroupOffsetsRecord::from_batch(&view).ok()
}

struct Reader<'a> {
    buf: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn error(&self, reason: &'static str) -> RecordError {
        RecordError::BadControlValue {
            control_type: ControlRecordType::GROUP_OFFSETS.0,
            offset: self.at,
            reason,
        }
    }

    fn take(&mut self, len: usize) -> Result<&'a [u8], RecordError> {
        if self.buf.len() - self.at < len {
            return Err(self.error("truncated"));
        }
        let slice = &self.buf[self.at..self.at + len];
        self.at += len;
        Ok(slice)
    }

    fn i16(&mut self) -> Result<i16, RecordError> {
        Ok(i16::from_be_bytes(
            self.take(2)?.try_into().expect("2 bytes"),
        ))
    }

    fn i32(&mut self) -> Result<i32, RecordError> {
        Ok(i32::from_be_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }

    fn i64(&mut self) -> Result<i64, RecordError> {
        Ok(i64::from_be_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }

    fn string(&mut self) -> Result<Option<String>, RecordError> {
        let len = self.i16()?;
        if len < -1 {
            return Err(self.error("string length below -1"));
        }
        if len == -1 {
            return Ok(None);
        }
        let bytes = self.take(len as usize)?;
        let s = std::str::from_utf8(bytes).map_err(|_| self.error("string is not UTF-8"))?;
        Ok(Some(s.to_string()))
    }
}

/// One committed offset as the producer-state snapshot keeps it (docs/storage.md, "The
/// producer-state snapshot").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredOffset {
    pub group_id: String,
    pub topic: String,
    pub partition: i32,
    pub committed: Committed,
}

/// Every group's committed offsets, fed every log change in order.
#[derive(Clone, Debug, Default)]
pub struct OffsetStore {
    committed: BTreeMap<String, BTreeMap<(String, i32), Committed>>,
    /// Records in the log above the high watermark, by offset (oldest first).
    uncommitted: VecDeque<(Offset, GroupOffsetsRecord)>,
    /// Every record below this offset was applied.
    committed_to: Offset,
}

impl OffsetStore {
    /// A record was appended at `offset`.
    pub fn on_append(&mut self, offset: Offset, record: GroupOffsetsRecord) {
        if let Some((last, _)) = self.uncommitted.back() {
            assert!(*last < offset, "offset records appended out of order");
        }
        if offset < self.committed_to {
            // Already applied (a replay that starts below what a snapshot held).
            return;
        }
        self.uncommitted.push_back((offset, record));
    }

    /// The log was cut to end at `offset`: records at or above it were never committed.
    pub fn truncate_to(&mut self, offset: Offset) {
        while self.uncommitted.back().is_some_and(|(o, _)| *o >= offset) {
            self.uncommitted.pop_back();
        }
    }

    /// The high watermark moved to `hw`: records below it apply, in order.
    pub fn on_committed(&mut self, hw: Offset) {
        while self.uncommitted.front().is_some_and(|(o, _)| *o < hw) {
            let (_, record) = self.uncommitted.pop_front().expect("looked at");
            self.apply(record);
        }
        self.committed_to = self.committed_to.max(hw);
    }

    /// Applies one record (the start-up replay applies committed records straight away).
    pub fn apply(&mut self, record: GroupOffsetsRecord) {
        if record.delete_group {
            self.committed.remove(&record.group_id);
        }
        let group = self.committed.entry(record.group_id).or_default();
        for p in record.offsets {
            let key = (p.topic, p.partition);
            match p.offset {
                Some(offset) => {
                    group.insert(
                        key,
                        Committed {
                            offset,
                            leader_epoch: p.leader_epoch,
                            metadata: p.metadata,
                            commit_timestamp_ms: record.commit_timestamp_ms,
                        },
                    );
                }
                None => {
                    group.remove(&key);
                }
            }
        }
        self.committed.retain(|_, offsets| !offsets.is_empty());
    }

    /// Every log change, in order, as the core hands it to the log; `hw` is the replica's high
    /// watermark after the step that made it.
    pub fn track(&mut self, op: &LogOp, hw: Option<Offset>) {
        match &op.kind {
            LogOpKind::Append(batches) => {
                for batch in batches.iter().filter(|b| b.is_control) {
                    if let Some(record) = group_offsets_record(&batch.bytes) {
                        self.on_append(batch.base_offset, record);
                    }
                }
            }
            LogOpKind::TruncateTo(offset) => self.truncate_to(*offset),
            // The log restarts at the leader's log start: what was above the high watermark
            // went with it (docs/protocol.md, "Retention and the log start").
            LogOpKind::ResetTo { .. } => self.truncate_to(hw.unwrap_or(0)),
        }
    }

    /// A store that applied every record below `offset`, holding `entries` (a snapshot's,
    /// docs/storage.md, "The producer-state snapshot"); the records from `offset` on are fed
    /// to it as the log replays.
    pub fn restored(offset: Offset, entries: Vec<StoredOffset>) -> Self {
        let mut committed: BTreeMap<String, BTreeMap<(String, i32), Committed>> = BTreeMap::new();
        for e in entries {
            committed
                .entry(e.group_id)
                .or_default()
                .insert((e.topic, e.partition), e.committed);
        }
        Self {
            committed,
            uncommitted: VecDeque::new(),
            committed_to: offset,
        }
    }

    /// Every record below this offset was applied (the high watermark it last learned, or
    /// the snapshot it was restored from).
    pub fn committed_to(&self) -> Offset {
        self.committed_to
    }

    /// The applied offsets, in (group, topic, partition) order.
    pub fn entries(&self) -> impl Iterator<Item = (&str, &(String, i32), &Committed)> {
        self.committed
            .iter()
            .flat_map(|(g, offsets)| offsets.iter().map(move |(k, c)| (g.as_str(), k, c)))
    }

    /// A group's committed offsets (None: it has none).
    pub fn group(&self, group_id: &str) -> Option<&BTreeMap<(String, i32), Committed>> {
        self.committed.get(group_id)
    }

    /// The groups with committed offsets.
    pub fn groups(&self) -> impl Iterator<Item = &str> {
        self.committed.keys().map(String::as_str)
    }

    pub fn group_count(&self) -> usize {
        self.committed.len()
    }

    /// Whether a record of `group_id` is appended but not committed yet.
    pub fn has_uncommitted(&self, group_id: &str) -> bool {
        self.uncommitted.iter().any(|(_, r)| r.group_id == group_id)
    }

    /// Records appended but not committed yet.
    pub fn uncommitted(&self) -> usize {
        self.uncommitted.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::raft::Batch;

    fn record(group: &str, offset: Option<Offset>) -> GroupOffsetsRecord {
        GroupOffsetsRecord {
            group_id: group.to_string(),
            commit_timestamp_ms: 1_700,
            delete_group: false,
            offsets: vec![PartitionOffset {
                topic: "__cluster_metadata".to_string(),
                partition: 0,
                offset,
                leader_epoch: Some(3),
                metadata: Some("m".to_string()),
            }],
        }
    }

    #[test]
    fn a_record_round_trips_through_its_control_batch() {
        let mut r = record("g", Some(42));
        r.offsets.push(PartitionOffset {
            topic: "t".into(),
            partition: 7,
            offset: None,
            leader_epoch: None,
            metadata: None,
        });
        let batch = r.to_batch(10, 2, 99).freeze();
        assert_eq!(group_offsets_record(&batch), Some(r.clone()));
        let value = r.encode();
        assert_eq!(GroupOffsetsRecord::decode(&value).unwrap(), r);
        // Every shorter prefix and one byte more are refused.
        for len in 0..value.len() {
            assert!(
                GroupOffsetsRecord::decode(&value[..len]).is_err(),
                "prefix {len}"
            );
        }
        let mut longer = value.to_vec();
        longer.push(0);
        assert!(GroupOffsetsRecord::decode(&longer).is_err());
        // A producer-id block is not a group offsets record.
        let block = crate::record::control::ProducerIdBlock {
            node_id: 1,
            incarnation: 2,
            first_id: 0,
            count: 10,
        };
        assert_eq!(
            group_offsets_record(&block.to_batch(0, 0, 0).freeze()),
            None
        );
    }

    #[test]
    fn records_apply_when_committed_and_vanish_when_truncated() {
        let mut store = OffsetStore::default();
        let batch = |offset: Offset, r: &GroupOffsetsRecord| {
            let bytes = r.to_batch(offset, 1, 0).freeze();
            Batch::from_stored(bytes).unwrap()
        };
        let append = |store: &mut OffsetStore, offset, r: &GroupOffsetsRecord| {
            store.track(
                &LogOp {
                    seq: 1,
                    kind: LogOpKind::Append(vec![batch(offset, r)]),
                },
                None,
            )
        };
        append(&mut store, 5, &record("a", Some(1)));
        append(&mut store, 6, &record("b", Some(2)));
        assert!(store.group("a").is_none(), "not committed yet");
        store.on_committed(6);
        assert_eq!(
            store.group("a").unwrap()[&("__cluster_metadata".into(), 0)].offset,
            1
        );
        assert!(store.group("b").is_none());
        store.track(
            &LogOp {
                seq: 2,
                kind: LogOpKind::TruncateTo(6),
            },
            Some(6),
        );
        store.on_committed(10);
        assert!(
            store.group("b").is_none(),
            "the truncated record never applies"
        );
        append(&mut store, 10, &record("a", None));
        store.on_committed(11);
        assert!(
            store.group("a").is_none(),
            "a deleted offset leaves an empty group, dropped"
        );
        assert_eq!(store.group_count(), 0);
        assert_eq!(store.uncommitted(), 0);
    }
}
