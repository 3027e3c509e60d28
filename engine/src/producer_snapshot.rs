//! The producer-state snapshot's bytes (docs/storage.md, "The producer-state snapshot"): the
//! idempotent-producer state and the committed producer-id blocks as of a committed offset, so a
//! start reads the log from there instead of from its start, and keeps what retention deleted.
//! Logic only: `crate::producer_snapshot_store` reads and writes the file.
//!
//! Since version 2 it also holds the consumer groups' committed offsets as of the same offset,
//! so that retention, which never deletes past the newest written snapshot, never deletes the
//! only record of an offset (docs/storage.md, "Committed offsets").
//!
//! Layout, big-endian: magic `RRPS`, version (i16), offset (i64), the epoch of the batch that
//! ends at offset - 1 (i32), the blocks (committed end i64, newest record offset i64 or -1, a
//! count i32 and per node: node i32, incarnation i64, first id i64, ascending), the producers
//! (a count i32 and per producer, in any order, each id once: id i64, a batch count i8 and per
//! batch: epoch i16, first sequence i32, last sequence i32, base offset i64, last offset i64),
//! in version 2 the committed offsets (a count i32 and per offset, ascending by group, topic
//! and partition: group string, topic string, partition i32, offset i64, leader epoch i32 or
//! -1, metadata nullable string, commit timestamp i64; a string is an int16 length, -1 for
//! null, and UTF-8 bytes), then the CRC-32C of all before it. Version 1 (no offsets) is still
//! read.

use thiserror::Error;

use crate::base::{Epoch, Offset};
use crate::groups::offsets::{Committed, StoredOffset};
use crate::producer_ids::{CommittedBlocks, MAX_COMMITTED_NODES};
use crate::producers::{BatchMeta, BATCHES_PER_PRODUCER, DEFAULT_MAX_PRODUCERS};

const MAGIC: &[u8; 4] = b"RRPS";
/// The version this build writes (it reads this one and [`VERSION_WITHOUT_GROUPS`]).
pub const VERSION: i16 = 2;
/// The first version, without the groups' committed offsets.
pub const VERSION_WITHOUT_GROUPS: i16 = 1;
/// Committed offsets one snapshot holds at most (a node holds far fewer:
/// `group.coordinator.max.groups` groups, one partition each).
pub const MAX_GROUP_OFFSETS: usize = 100_000;
/// Bytes of the committed offsets' section at most, its count included: a store past it (long
/// group ids and metadata strings, in many groups) is not snapshotted, and retention waits
/// (docs/storage.md, "Committed offsets").
pub const MAX_GROUPS_BYTES: usize = 64 << 20;
/// Bytes of the fixed part before the blocks' entries, and per entry.
const HEAD_BYTES: usize = 4 + 2 + 8 + 4;
const BLOCKS_HEAD_BYTES: usize = 8 + 8 + 4;
const NODE_BYTES: usize = 4 + 8 + 8;
const PRODUCER_HEAD_BYTES: usize = 8 + 1;
const BATCH_BYTES: usize = 2 + 4 + 4 + 8 + 8;
/// Per committed offset, besides its three strings' bytes: three lengths, partition, offset,
/// leader epoch, commit timestamp.
const GROUP_OFFSET_BYTES: usize = 3 * 2 + 4 + 8 + 4 + 8;
/// The largest snapshot this build writes or reads: every bound at its limit.
pub const MAX_BYTES: usize = MAX_PRODUCER_BYTES + MAX_GROUPS_BYTES;
/// All but the committed offsets' section at their largest, the checksum included.
const MAX_PRODUCER_BYTES: usize = HEAD_BYTES
    + BLOCKS_HEAD_BYTES
    + MAX_COMMITTED_NODES * NODE_BYTES
    + 4
    + DEFAULT_MAX_PRODUCERS * (PRODUCER_HEAD_BYTES + BATCHES_PER_PRODUCER * BATCH_BYTES)
    + 4;

/// The state below `offset`, as a start needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProducerSnapshot {
    /// The committed offset the snapshot was taken at: the log is replayed from here.
    pub offset: Offset,
    /// The epoch of the batch that ends at `offset - 1`: a start checks it against its log.
    pub epoch: Epoch,
    /// `blocks.committed_to` is `offset`.
    pub blocks: CommittedBlocks,
    /// Per producer (by id), its batches below `offset`, oldest first.
    pub producers: Vec<(i64, Vec<BatchMeta>)>,
    /// The consumer groups' committed offsets below `offset`, ascending by group, topic and
    /// partition; None in a version 1 snapshot, which did not keep them (a start then reads
    /// them from the whole log).
    pub groups: Option<Vec<StoredOffset>>,
}

/// Why the bytes are not a snapshot this build can use.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum SnapshotError {
    #[error("too short: {len} bytes")]
    TooShort { len: usize },
    #[error("too long: {len} bytes, at most {MAX_BYTES}")]
    TooLong { len: usize },
    #[error("not a producer-state snapshot (magic {found:?})")]
    Magic { found: [u8; 4] },
    #[error("version {found}; this build reads {VERSION}")]
    Version { found: i16 },
    #[error("checksum {stored:#010x}, computed {computed:#010x}")]
    Checksum { stored: u32, computed: u32 },
    #[error("ends inside {what}")]
    Truncated { what: &'static str },
    #[error("{what} out of range: {value}")]
    Range { what: &'static str, value: i64 },
    #[error("{extra} bytes after the last {what}")]
    Trailing { extra: usize, what: &'static str },
    #[error("{what} is not UTF-8")]
    Utf8 { what: &'static str },
    #[error("the committed offsets are not in ascending order at group {group:?}")]
    GroupOrder { group: String },
}

/// Why a state cannot be snapshotted.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum SnapshotTooLarge {
    #[error(
        "{entries} committed offsets in {bytes} bytes; a snapshot holds at most \
         {MAX_GROUP_OFFSETS} in {MAX_GROUPS_BYTES} bytes"
    )]
    Groups { entries: usize, bytes: usize },
}

impl ProducerSnapshot {
    /// The bytes of this snapshot (a version 1 one, without offsets, is written as version 2
    /// with none).
    pub fn encode(&self) -> Result<Vec<u8>, SnapshotTooLarge> {
        encode_parts(
            self.offset,
            self.epoch,
            &self.blocks,
            self.producers
                .iter()
                .map(|(id, batches)| (*id, batches.iter())),
            self.groups.iter().flatten().map(|e| {
                (
                    e.group_id.as_str(),
                    (e.topic.as_str(), e.partition),
                    &e.committed,
                )
            }),
        )
    }

    /// Decodes and checks a snapshot: the checksum first, then every count and offset against
    /// the bounds a writer keeps, so nothing it returns can break the state it restores.
    pub fn decode(bytes: &[u8]) -> Result<Self, SnapshotError> {
        let len = bytes.len();
        if len < HEAD_BYTES + BLOCKS_HEAD_BYTES + 4 + 4 {
            return Err(SnapshotError::TooShort { len });
        }
        if len > MAX_BYTES {
            return Err(SnapshotError::TooLong { len });
        }
        let (body, crc) = bytes.split_at(len - 4);
        let stored = u32::from_be_bytes(crc.try_into().expect("4 bytes"));
        let mut r = Reader { rest: body };
        let magic: [u8; 4] = r.take(4, "the magic")?.try_into().expect("4 bytes");
        if &magic != MAGIC {
            return Err(SnapshotError::Magic { found: magic });
        }
        let version = r.i16("the version")?;
        if version != VERSION && version != VERSION_WITHOUT_GROUPS {
            return Err(SnapshotError::Version { found: version });
        }
        let computed = crc32c::crc32c(body);
        if stored != computed {
            return Err(SnapshotError::Checksum { stored, computed });
        }
        let offset = r.i64("the offset")?;
        in_range("offset", offset, 1, i64::MAX)?;
        let epoch = r.i32("the epoch")?;
        in_range("epoch", epoch.into(), 0, i32::MAX.into())?;
        let blocks = r.blocks(offset)?;
        let count = r.count("the producer count", DEFAULT_MAX_PRODUCERS)?;
        let mut producers = Vec::with_capacity(count.min(r.rest.len() / PRODUCER_HEAD_BYTES));
        for _ in 0..count {
            let id = r.i64("a producer id")?;
            in_range("producer id", id, 0, i64::MAX)?;
            producers.push((id, r.batches(offset)?));
        }
        let groups = match version {
            VERSION_WITHOUT_GROUPS => None,
            _ => Some(r.group_offsets()?),
        };
        if !r.rest.is_empty() {
            return Err(SnapshotError::Trailing {
                extra: r.rest.len(),
                what: if groups.is_some() {
                    "committed offset"
                } else {
                    "producer"
                },
            });
        }
        let mut ids: Vec<i64> = producers.iter().map(|(id, _)| *id).collect();
        ids.sort_unstable();
        if let Some(twice) = ids.windows(2).find(|w| w[0] == w[1]) {
            return Err(SnapshotError::Range {
                what: "producer id (twice)",
                value: twice[0],
            });
        }
        Ok(Self {
            offset,
            epoch,
            blocks,
            producers,
            groups,
        })
    }
}

/// A snapshot's bytes, its producers taken from `producers` in the order given (each id once;
/// one with no batches is left out) and its committed offsets from `groups` (ascending by
/// group, topic and partition, each once): the raft thread encodes straight from the live
/// state ([`crate::producers::ProducerStates::committed_batches`],
/// [`crate::groups::OffsetStore::entries`]) without collecting it first. Refused when the
/// offsets pass the section's bounds.
pub fn encode_parts<'a, 'g, B>(
    offset: Offset,
    epoch: Epoch,
    blocks: &CommittedBlocks,
    producers: impl Iterator<Item = (i64, B)>,
    groups: impl Iterator<Item = (&'g str, (&'g str, i32), &'g Committed)>,
) -> Result<Vec<u8>, SnapshotTooLarge>
where
    B: Iterator<Item = &'a BatchMeta>,
{
    assert_eq!(blocks.committed_to, offset, "one offset for both");
    assert!(blocks.latest.len() <= MAX_COMMITTED_NODES);
    let mut out = Vec::with_capacity(HEAD_BYTES + BLOCKS_HEAD_BYTES + 4 + 4);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&VERSION.to_be_bytes());
    out.extend_from_slice(&offset.to_be_bytes());
    out.extend_from_slice(&epoch.to_be_bytes());
    out.extend_from_slice(&blocks.committed_end.to_be_bytes());
    out.extend_from_slice(&blocks.newest_record.unwrap_or(-1).to_be_bytes());
    out.extend_from_slice(&(blocks.latest.len() as i32).to_be_bytes());
    for &(node, incarnation, first_id) in &blocks.latest {
        out.extend_from_slice(&node.to_be_bytes());
        out.extend_from_slice(&incarnation.to_be_bytes());
        out.extend_from_slice(&first_id.to_be_bytes());
    }
    let count_at = out.len();
    out.extend_from_slice(&0i32.to_be_bytes());
    let mut count = 0usize;
    for (id, batches) in producers {
        let head_at = out.len();
        out.extend_from_slice(&id.to_be_bytes());
        out.push(0);
        let mut in_producer = 0u8;
        for b in batches {
            out.extend_from_slice(&b.producer_epoch.to_be_bytes());
            out.extend_from_slice(&b.first_sequence.to_be_bytes());
            out.extend_from_slice(&b.last_sequence.to_be_bytes());
            out.extend_from_slice(&b.base_offset.to_be_bytes());
            out.extend_from_slice(&b.last_offset.to_be_bytes());
            in_producer += 1;
        }
        assert!(usize::from(in_producer) <= BATCHES_PER_PRODUCER);
        if in_producer == 0 {
            out.truncate(head_at);
        } else {
            out[head_at + 8] = in_producer;
            count += 1;
        }
    }
    assert!(count <= DEFAULT_MAX_PRODUCERS);
    out[count_at..count_at + 4].copy_from_slice(&(count as i32).to_be_bytes());
    let groups_at = out.len();
    out.extend_from_slice(&0i32.to_be_bytes());
    let mut entries = 0usize;
    for (group, (topic, partition), c) in groups {
        put_string(&mut out, Some(group));
        put_string(&mut out, Some(topic));
        out.extend_from_slice(&partition.to_be_bytes());
        out.extend_from_slice(&c.offset.to_be_bytes());
        out.extend_from_slice(&c.leader_epoch.unwrap_or(-1).to_be_bytes());
        put_string(&mut out, c.metadata.as_deref());
        out.extend_from_slice(&c.commit_timestamp_ms.to_be_bytes());
        entries += 1;
        let bytes = out.len() - groups_at;
        if entries > MAX_GROUP_OFFSETS || bytes > MAX_GROUPS_BYTES {
            return Err(SnapshotTooLarge::Groups { entries, bytes });
        }
    }
    out[groups_at..groups_at + 4].copy_from_slice(&(entries as i32).to_be_bytes());
    let crc = crc32c::crc32c(&out);
    out.extend_from_slice(&crc.to_be_bytes());
    Ok(out)
}

/// The order of a snapshot's committed offsets.
fn offset_key(e: &StoredOffset) -> (&str, &str, i32) {
    (&e.group_id, &e.topic, e.partition)
}

/// An int16 length (-1: null) and the UTF-8 bytes; every string the store holds fits one
/// (group ids, topics and metadata are refused past 32,767 bytes before they are committed).
fn put_string(out: &mut Vec<u8>, s: Option<&str>) {
    match s {
        Some(s) => {
            let len = i16::try_from(s.len()).expect("a committed string fits an int16 length");
            out.extend_from_slice(&len.to_be_bytes());
            out.extend_from_slice(s.as_bytes());
        }
        None => out.extend_from_slice(&(-1i16).to_be_bytes()),
    }
}

fn in_range(what: &'static str, value: i64, min: i64, max: i64) -> Result<(), SnapshotError> {
    if (min..=max).contains(&value) {
        Ok(())
    } else {
        Err(SnapshotError::Range { what, value })
    }
}

struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], SnapshotError> {
        if self.rest.len() < n {
            return Err(SnapshotError::Truncated { what });
        }
        let (head, rest) = self.rest.split_at(n);
        self.rest = rest;
        Ok(head)
    }

    fn i16(&mut self, what: &'static str) -> Result<i16, SnapshotError> {
        Ok(i16::from_be_bytes(
            self.take(2, what)?.try_into().expect("2"),
        ))
    }

    fn i32(&mut self, what: &'static str) -> Result<i32, SnapshotError> {
        Ok(i32::from_be_bytes(
            self.take(4, what)?.try_into().expect("4"),
        ))
    }

    fn i64(&mut self, what: &'static str) -> Result<i64, SnapshotError> {
        Ok(i64::from_be_bytes(
            self.take(8, what)?.try_into().expect("8"),
        ))
    }

    fn count(&mut self, what: &'static str, max: usize) -> Result<usize, SnapshotError> {
        let n = self.i32(what)?;
        in_range(what, n.into(), 0, max as i64)?;
        Ok(n as usize)
    }

    fn blocks(&mut self, offset: Offset) -> Result<CommittedBlocks, SnapshotError> {
        let committed_end = self.i64("the blocks' end")?;
        in_range("committed end", committed_end, 0, i64::MAX)?;
        let newest = self.i64("the newest block record")?;
        in_range("newest block record", newest, -1, offset - 1)?;
        let count = self.count("the node count", MAX_COMMITTED_NODES)?;
        let mut latest = Vec::with_capacity(count.min(self.rest.len() / NODE_BYTES));
        for _ in 0..count {
            let node = self.i32("a node id")?;
            in_range("node id", node.into(), 0, i32::MAX.into())?;
            let incarnation = self.i64("an incarnation")? as u64;
            let first_id = self.i64("a first id")?;
            in_range("first id", first_id, 0, committed_end)?;
            if latest.last().is_some_and(|&(last, _, _)| last >= node) {
                return Err(SnapshotError::Range {
                    what: "node id (not ascending)",
                    value: node.into(),
                });
            }
            latest.push((node, incarnation, first_id));
        }
        Ok(CommittedBlocks {
            committed_to: offset,
            committed_end,
            newest_record: (newest >= 0).then_some(newest),
            latest,
        })
    }

    /// An int16 length (-1: null) and UTF-8 bytes.
    fn string(&mut self, what: &'static str) -> Result<Option<String>, SnapshotError> {
        let len = self.i16(what)?;
        in_range(what, len.into(), -1, i16::MAX.into())?;
        if len < 0 {
            return Ok(None);
        }
        let bytes = self.take(len as usize, what)?;
        let s = std::str::from_utf8(bytes).map_err(|_| SnapshotError::Utf8 { what })?;
        Ok(Some(s.to_string()))
    }

    /// The committed offsets' section (version 2): each key once, in ascending order.
    fn group_offsets(&mut self) -> Result<Vec<StoredOffset>, SnapshotError> {
        let count = self.count("the committed offset count", MAX_GROUP_OFFSETS)?;
        let mut entries: Vec<StoredOffset> =
            Vec::with_capacity(count.min(self.rest.len() / GROUP_OFFSET_BYTES));
        for _ in 0..count {
            let group_id = self.string("a group id")?.ok_or(SnapshotError::Range {
                what: "group id length",
                value: -1,
            })?;
            let topic = self.string("a topic")?.ok_or(SnapshotError::Range {
                what: "topic length",
                value: -1,
            })?;
            let partition = self.i32("a partition")?;
            in_range("partition", partition.into(), 0, i32::MAX.into())?;
            let offset = self.i64("a committed offset")?;
            in_range("committed offset", offset, 0, i64::MAX)?;
            let leader_epoch = self.i32("a leader epoch")?;
            in_range("leader epoch", leader_epoch.into(), -1, i32::MAX.into())?;
            let metadata = self.string("a metadata string")?;
            let commit_timestamp_ms = self.i64("a commit timestamp")?;
            let entry = StoredOffset {
                group_id,
                topic,
                partition,
                committed: Committed {
                    offset,
                    leader_epoch: (leader_epoch >= 0).then_some(leader_epoch),
                    metadata,
                    commit_timestamp_ms,
                },
            };
            if entries
                .last()
                .is_some_and(|last| offset_key(last) >= offset_key(&entry))
            {
                return Err(SnapshotError::GroupOrder {
                    group: entry.group_id,
                });
            }
            entries.push(entry);
        }
        Ok(entries)
    }

    fn batches(&mut self, offset: Offset) -> Result<Vec<BatchMeta>, SnapshotError> {
        let count = self.take(1, "a batch count")?[0];
        in_range("batch count", count.into(), 1, BATCHES_PER_PRODUCER as i64)?;
        let mut batches: Vec<BatchMeta> = Vec::with_capacity(count.into());
        for _ in 0..count {
            let b = BatchMeta {
                producer_epoch: self.i16("an epoch")?,
                first_sequence: self.i32("a first sequence")?,
                last_sequence: self.i32("a last sequence")?,
                base_offset: self.i64("a base offset")?,
                last_offset: self.i64("a last offset")?,
            };
            in_range(
                "producer epoch",
                b.producer_epoch.into(),
                0,
                i16::MAX.into(),
            )?;
            in_range(
                "first sequence",
                b.first_sequence.into(),
                0,
                i32::MAX.into(),
            )?;
            in_range("last sequence", b.last_sequence.into(), 0, i32::MAX.into())?;
            let after = batches.last().map_or(0, |p| p.last_offset + 1);
            in_range("base offset", b.base_offset, after, offset - 1)?;
            in_range("last offset", b.last_offset, b.base_offset, offset - 1)?;
            batches.push(b);
        }
        Ok(batches)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(epoch: i16, sequence: i32, base_offset: Offset) -> BatchMeta {
        BatchMeta {
            producer_epoch: epoch,
            first_sequence: sequence,
            last_sequence: sequence + 1,
            base_offset,
            last_offset: base_offset + 1,
        }
    }

    fn sample() -> ProducerSnapshot {
        ProducerSnapshot {
            offset: 40,
            epoch: 3,
            blocks: CommittedBlocks {
                committed_to: 40,
                committed_end: 3000,
                newest_record: Some(12),
                latest: vec![(1, 9, 0), (2, u64::MAX, 2000)],
            },
            producers: vec![
                (5, vec![meta(0, 0, 0), meta(0, 2, 10)]),
                (i64::MAX, vec![meta(2, i32::MAX - 1, 30)]),
            ],
            groups: Some(vec![
                stored("a", "__cluster_metadata", 0, 7, Some("m")),
                stored("a", "t", 3, 0, None),
                stored("b", "__cluster_metadata", 0, i64::MAX, Some("")),
            ]),
        }
    }

    fn stored(
        group: &str,
        topic: &str,
        partition: i32,
        offset: Offset,
        metadata: Option<&str>,
    ) -> StoredOffset {
        StoredOffset {
            group_id: group.to_string(),
            topic: topic.to_string(),
            partition,
            committed: Committed {
                offset,
                leader_epoch: metadata.map(|m| m.len() as i32),
                metadata: metadata.map(str::to_string),
                commit_timestamp_ms: -5 + offset.min(1 << 40),
            },
        }
    }

    /// No producer, no node, at offset 1: the smallest snapshot there is.
    fn empty() -> ProducerSnapshot {
        ProducerSnapshot {
            offset: 1,
            epoch: 0,
            blocks: CommittedBlocks {
                committed_to: 1,
                committed_end: 0,
                newest_record: None,
                latest: Vec::new(),
            },
            producers: Vec::new(),
            groups: Some(Vec::new()),
        }
    }

    #[test]
    fn a_snapshot_round_trips_and_an_empty_one_too() {
        let snapshot = sample();
        assert_eq!(
            ProducerSnapshot::decode(&snapshot.encode().unwrap()),
            Ok(snapshot)
        );
        assert_eq!(
            ProducerSnapshot::decode(&empty().encode().unwrap()),
            Ok(empty())
        );
    }

    /// A version 1 file (written before the committed offsets were kept) still reads, as a
    /// snapshot that does not know the offsets.
    #[test]
    fn a_version_1_snapshot_reads_without_offsets() {
        let mut without = sample();
        without.groups = Some(Vec::new());
        let v2 = without.encode().unwrap();
        // Version 1: the same bytes without the offsets' count, under its own checksum.
        let mut v1 = v2[..v2.len() - 8].to_vec();
        v1[4..6].copy_from_slice(&VERSION_WITHOUT_GROUPS.to_be_bytes());
        let crc = crc32c::crc32c(&v1);
        v1.extend_from_slice(&crc.to_be_bytes());
        without.groups = None;
        assert_eq!(ProducerSnapshot::decode(&v1), Ok(without));
        // A version 1 file with an offsets section is one with trailing bytes.
        let mut wrong = v2[..v2.len() - 4].to_vec();
        wrong[4..6].copy_from_slice(&VERSION_WITHOUT_GROUPS.to_be_bytes());
        let crc = crc32c::crc32c(&wrong);
        wrong.extend_from_slice(&crc.to_be_bytes());
        assert_eq!(
            ProducerSnapshot::decode(&wrong),
            Err(SnapshotError::Trailing {
                extra: 4,
                what: "producer"
            })
        );
    }

    fn entries(v: &[StoredOffset]) -> Vec<(&str, (&str, i32), &Committed)> {
        v.iter()
            .map(|e| {
                (
                    e.group_id.as_str(),
                    (e.topic.as_str(), e.partition),
                    &e.committed,
                )
            })
            .collect()
    }

    /// Committed offsets past the section's bounds are refused when the snapshot is made, not
    /// written as a file no start could read.
    #[test]
    fn offsets_past_the_sections_bounds_are_not_snapshotted() {
        let blocks = empty().blocks;
        let many: Vec<StoredOffset> = (0..=MAX_GROUP_OFFSETS)
            .map(|i| stored(&format!("{i:06}"), "t", 0, 1, None))
            .collect();
        let too_many = encode_parts(
            1,
            0,
            &blocks,
            std::iter::empty::<(i64, std::slice::Iter<BatchMeta>)>(),
            entries(&many).into_iter(),
        );
        assert!(
            matches!(too_many, Err(SnapshotTooLarge::Groups { entries, .. }) if entries == MAX_GROUP_OFFSETS + 1),
            "{too_many:?}"
        );
        let fits = encode_parts(
            1,
            0,
            &blocks,
            std::iter::empty::<(i64, std::slice::Iter<BatchMeta>)>(),
            entries(&many[..MAX_GROUP_OFFSETS]).into_iter(),
        )
        .unwrap();
        assert_eq!(
            ProducerSnapshot::decode(&fits)
                .unwrap()
                .groups
                .unwrap()
                .len(),
            MAX_GROUP_OFFSETS
        );
        let long = "x".repeat(i16::MAX as usize);
        let big: Vec<StoredOffset> = (0..MAX_GROUPS_BYTES / (3 * long.len()) + 1)
            .map(|i| stored(&format!("{i:04}{}", &long[4..]), &long, 0, 1, Some(&long)))
            .collect();
        let too_big = encode_parts(
            1,
            0,
            &blocks,
            std::iter::empty::<(i64, std::slice::Iter<BatchMeta>)>(),
            entries(&big).into_iter(),
        );
        assert!(
            matches!(too_big, Err(SnapshotTooLarge::Groups { bytes, .. }) if bytes > MAX_GROUPS_BYTES),
            "{too_big:?}"
        );
    }

    /// The bytes taken straight from a live state decode to its committed part: the batches
    /// below the committed offset, a producer with none there left out.
    #[test]
    fn a_live_state_encodes_to_its_committed_part() {
        use crate::producers::{ProducerStates, Sequenced};
        let mut states = ProducerStates::default();
        let mut offset = 0;
        for (id, sequence) in [(9, 0), (3, 0), (9, 1), (3, 1), (7, 0), (9, 2)] {
            states.append(&Sequenced::new(id, 0, sequence, 2), offset);
            offset += 2;
        }
        states.set_committed(8); // producer 7's batch (8..=9) and 9's last (10..=11) are above
        let blocks = CommittedBlocks {
            committed_to: 8,
            committed_end: 0,
            newest_record: None,
            latest: Vec::new(),
        };
        let bytes = encode_parts(
            8,
            2,
            &blocks,
            states.committed_batches(),
            std::iter::empty(),
        )
        .unwrap();
        let mut decoded = ProducerSnapshot::decode(&bytes).unwrap();
        decoded.producers.sort_unstable_by_key(|(id, _)| *id);
        assert_eq!(decoded.producers, states.committed_part());
        let ids: Vec<i64> = decoded.producers.iter().map(|(id, _)| *id).collect();
        assert_eq!(ids, vec![3, 9]);
        assert_eq!(decoded.producers[1].1.len(), 2);
        assert_eq!(
            (decoded.offset, decoded.epoch, decoded.blocks),
            (8, 2, blocks)
        );
    }

    /// The largest producer part a node can write (every bound at its limit) reads back; the
    /// smallest snapshot (no producer, no node, no offset) reads, one byte less is too short
    /// (a version 1 file, 4 bytes shorter still, is the shortest there is), and one past
    /// [`MAX_BYTES`] too long.
    #[test]
    fn the_largest_and_the_smallest_snapshot_read_back() {
        let batches: Vec<BatchMeta> = (0..BATCHES_PER_PRODUCER as i64)
            .map(|i| meta(0, 2 * i as i32, 2 * i))
            .collect();
        let largest = ProducerSnapshot {
            offset: 20,
            epoch: 1,
            blocks: CommittedBlocks {
                committed_to: 20,
                committed_end: 1 << 40,
                newest_record: Some(19),
                latest: (0..MAX_COMMITTED_NODES as i32)
                    .map(|n| (n, 1, i64::from(n) * 1000))
                    .collect(),
            },
            producers: (0..DEFAULT_MAX_PRODUCERS as i64)
                .map(|id| (id, batches.clone()))
                .collect(),
            groups: Some(Vec::new()),
        };
        let bytes = largest.encode().unwrap();
        assert_eq!(bytes.len(), MAX_PRODUCER_BYTES + 4);
        assert_eq!(ProducerSnapshot::decode(&bytes).as_ref(), Ok(&largest));

        let smallest = empty().encode().unwrap();
        assert_eq!(smallest.len(), HEAD_BYTES + BLOCKS_HEAD_BYTES + 4 + 4 + 4);
        assert!(ProducerSnapshot::decode(&smallest).is_ok());
        assert!(ProducerSnapshot::decode(&smallest[..smallest.len() - 1]).is_err());
        assert_eq!(
            ProducerSnapshot::decode(&smallest[..smallest.len() - 5]),
            Err(SnapshotError::TooShort {
                len: smallest.len() - 5
            })
        );
        assert_eq!(
            ProducerSnapshot::decode(&vec![0; MAX_BYTES + 1]),
            Err(SnapshotError::TooLong { len: MAX_BYTES + 1 })
        );
    }

    /// Every byte flipped, every cut and every extra byte is refused with an error.
    #[test]
    fn any_damage_is_refused() {
        let bytes = sample().encode().unwrap();
        for i in 0..bytes.len() {
            let mut damaged = bytes.clone();
            damaged[i] ^= 0x40;
            assert!(ProducerSnapshot::decode(&damaged).is_err(), "byte {i}");
        }
        for cut in 0..bytes.len() {
            assert!(
                ProducerSnapshot::decode(&bytes[..cut]).is_err(),
                "cut {cut}"
            );
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(ProducerSnapshot::decode(&longer).is_err());
    }

    /// Values a writer never writes are refused even under a valid checksum.
    #[test]
    fn out_of_range_values_under_a_valid_checksum_are_refused() {
        type Change = Box<dyn Fn(&mut ProducerSnapshot)>;
        let cases: Vec<(Change, &str)> = vec![
            (
                Box::new(|s| s.producers[0].1[1].base_offset = 1),
                "base offset",
            ),
            (
                Box::new(|s| s.producers[0].1[1].base_offset = 40),
                "base offset",
            ),
            // A batch's end past the snapshot's offset (the fuzzer's i64::MAX overflowed the
            // next batch's lower bound before this was checked).
            (
                Box::new(|s| s.producers[0].1[0].last_offset = i64::MAX),
                "last offset",
            ),
            (
                Box::new(|s| s.producers[1].1[0].last_offset = 40),
                "last offset",
            ),
            (Box::new(|s| s.producers[1].0 = 5), "producer id (twice)"),
            (Box::new(|s| s.producers[1].0 = -4), "producer id"),
            (
                Box::new(|s| s.producers[0].1[0].first_sequence = -1),
                "first sequence",
            ),
            (
                Box::new(|s| s.producers[0].1[0].producer_epoch = -2),
                "producer epoch",
            ),
            (
                Box::new(|s| s.blocks.newest_record = Some(40)),
                "newest block record",
            ),
            (Box::new(|s| s.blocks.latest[0].2 = 3001), "first id"),
            (
                Box::new(|s| s.blocks.latest.swap(0, 1)),
                "node id (not ascending)",
            ),
            (Box::new(|s| s.epoch = -1), "epoch"),
            (
                Box::new(|s| s.groups.as_mut().unwrap()[1].partition = -1),
                "partition",
            ),
            (
                Box::new(|s| s.groups.as_mut().unwrap()[0].committed.offset = -1),
                "committed offset",
            ),
        ];
        for (change, what) in cases {
            let mut snapshot = sample();
            change(&mut snapshot);
            match ProducerSnapshot::decode(&snapshot.encode().unwrap()) {
                Err(SnapshotError::Range { what: found, .. }) => assert_eq!(found, what),
                other => panic!("{what}: {other:?}"),
            }
        }
        // The same key twice, or out of order.
        for (a, b) in [(0, 0), (1, 0)] {
            let mut snapshot = sample();
            let groups = snapshot.groups.as_mut().unwrap();
            groups[2] = groups[a].clone();
            groups.swap(2, b);
            assert!(
                matches!(
                    ProducerSnapshot::decode(&snapshot.encode().unwrap()),
                    Err(SnapshotError::GroupOrder { .. })
                ),
                "{a} {b}"
            );
        }
    }

    #[test]
    fn another_version_or_file_is_named_as_such() {
        let mut bytes = sample().encode().unwrap();
        bytes[5] = 3;
        assert_eq!(
            ProducerSnapshot::decode(&bytes),
            Err(SnapshotError::Version { found: 3 })
        );
        bytes[0] = b'X';
        assert!(matches!(
            ProducerSnapshot::decode(&bytes),
            Err(SnapshotError::Magic { .. })
        ));
    }
}
