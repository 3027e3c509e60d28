//! Control records (docs/protocol.md section 13, "Record batches"): LeaderChange (Kafka's type 2
//! and layout, so Kafka tools can read it), ringraft's QuorumReassignment (private type 100) and
//! ProducerIdBlock (private type 101, docs/protocol.md "Idempotent producers").
//!
//! A control batch has attribute bit 5 set. Each control record's key is `int16 version (0),
//! int16 type`; its value is a flexible-version message (compact arrays and strings, tagged
//! fields), as Kafka writes `LeaderChangeMessage`.

use std::collections::BTreeMap;

use bytes::{BufMut, BytesMut};

use super::builder::RecordBatchBuilder;
use super::error::RecordError;
use super::varint::{self, put_uvarint};
use super::view::BatchView;
use crate::base::DirectoryId;

/// The type in a control record's key. Unknown types are kept, not rejected: a reader that does
/// not understand one skips it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ControlRecordType(pub i16);

impl ControlRecordType {
    pub const ABORT: Self = Self(0);
    pub const COMMIT: Self = Self(1);
    pub const LEADER_CHANGE: Self = Self(2);
    pub const SNAPSHOT_HEADER: Self = Self(3);
    pub const SNAPSHOT_FOOTER: Self = Self(4);
    pub const KRAFT_VERSION: Self = Self(5);
    pub const KRAFT_VOTERS: Self = Self(6);
    /// ringraft's own: a voter-set change (AlterQuorum), docs/protocol.md section 1.
    pub const QUORUM_REASSIGNMENT: Self = Self(100);
    /// ringraft's own: producer ids reserved for one node (docs/protocol.md, "Idempotent
    /// producers").
    pub const PRODUCER_ID_BLOCK: Self = Self(101);
    /// ringraft's own: a consumer group's committed offsets (docs/storage.md, "Committed
    /// offsets"; `crate::groups::offsets`).
    pub const GROUP_OFFSETS: Self = Self(102);

    /// The version of the key layout ringraft writes.
    pub const KEY_VERSION: i16 = 0;

    /// The 4-byte key of a control record of this type.
    pub fn key(self) -> [u8; 4] {
        let mut key = [0u8; 4];
        key[..2].copy_from_slice(&Self::KEY_VERSION.to_be_bytes());
        key[2..].copy_from_slice(&self.0.to_be_bytes());
        key
    }

    /// Reads the type from a control record's key (`record` names the record in errors). Later
    /// key versions may append fields, so only the first four bytes are read.
    pub fn from_key(key: Option<&[u8]>, record: u32) -> Result<Self, RecordError> {
        let key = key.ok_or(RecordError::BadControlKey {
            record,
            reason: "key is null",
        })?;
        if key.len() < 4 {
            return Err(RecordError::BadControlKey {
                record,
                reason: "key shorter than 4 bytes",
            });
        }
        let version = i16::from_be_bytes([key[0], key[1]]);
        if version < 0 {
            return Err(RecordError::BadControlKey {
                record,
                reason: "negative key version",
            });
        }
        Ok(Self(i16::from_be_bytes([key[2], key[3]])))
    }
}

/// Kafka's `LeaderChangeMessage` (flexible): written by a new leader as the first record of its
/// epoch. `version` is both the message's Version field and its schema version: ringraft writes
/// 0; version 1 (Kafka's, which adds a 16-byte VoterDirectoryId to each voter) is read too, the
/// directory ids dropped, and written with nil directory ids.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaderChange {
    pub version: i16,
    pub leader_id: i32,
    /// All voters of the epoch.
    pub voters: Vec<i32>,
    /// The voters that granted the leader its votes.
    pub granting_voters: Vec<i32>,
}

/// ringraft's voter-set change record (type 100): the current voters and the target of a
/// reassignment in progress (None when none is).
///
/// Value layout (flexible): ClusterId COMPACT_STRING · CurrentVoters COMPACT_ARRAY of
/// {VoterId int32, tagged fields: tag 0 = VoterDirectoryId (16 bytes, written only when the
/// voter's directory is bound)} · TargetVoters the same, nullable (0 = null) · tagged fields,
/// tag 0 = Force (bool, written only when true). The directory ids are tagged fields so that a
/// reader that predates them still reads the voters (docs/protocol.md, "Voter identity").
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct QuorumReassignment {
    pub cluster_id: String,
    pub current_voters: Vec<i32>,
    pub target_voters: Option<Vec<i32>>,
    /// The reassignment was asked for with `force` (no strict reconfiguration check): in the
    /// record so that a new leader resuming the reassignment keeps to what was asked.
    pub force: bool,
    /// The directory each current voter is bound to, for those bound; ids not among
    /// `current_voters` are not written.
    pub current_directories: BTreeMap<i32, DirectoryId>,
    /// The same for `target_voters`.
    pub target_directories: BTreeMap<i32, DirectoryId>,
}

/// ringraft's producer-id reservation (type 101): ids `first_id .. first_id + count` belong to
/// node `node_id` while it runs as incarnation `incarnation` (a random number drawn at start, so
/// a restarted node never hands out ids a former run of it may have handed out).
///
/// Value layout (flexible): NodeId int32 · Incarnation int64 · FirstId int64 · Count int32 ·
/// tagged fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProducerIdBlock {
    pub node_id: i32,
    pub incarnation: u64,
    pub first_id: i64,
    pub count: i32,
}

/// A decoded control record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ControlRecord {
    LeaderChange(LeaderChange),
    QuorumReassignment(QuorumReassignment),
    ProducerIdBlock(ProducerIdBlock),
    /// A type ringraft does not interpret, with its raw value.
    Other {
        control_type: ControlRecordType,
        value: Option<bytes::Bytes>,
    },
}

/// `to_batch` and `from_batch` of a control message type: one record of `$control_type`, its
/// value the message's `encode`, in a control batch of its own.
macro_rules! control_batch_codec {
    ($message:ident, $control_type:expr) => {
        impl $message {
            /// A control batch holding this one record.
            pub fn to_batch(&self, base_offset: i64, epoch: i32, timestamp_ms: i64) -> BytesMut {
                control_batch(
                    $control_type,
                    &self.encode(),
                    base_offset,
                    epoch,
                    timestamp_ms,
                )
            }

            /// Decodes a control batch holding exactly one record of this type.
            pub fn from_batch(batch: &BatchView) -> Result<Self, RecordError> {
                let value = single_control_value(batch, $control_type)?;
                Self::decode(&value)
            }
        }
    };
}

impl LeaderChange {
    pub fn encode(&self) -> BytesMut {
        let mut out =
            BytesMut::with_capacity(16 + 10 * (self.voters.len() + self.granting_voters.len()));
        let directory_ids = self.version >= 1;
        out.put_i16(self.version);
        out.put_i32(self.leader_id);
        put_voters(&mut out, &self.voters, directory_ids);
        put_voters(&mut out, &self.granting_voters, directory_ids);
        put_uvarint(&mut out, 0); // tagged fields
        out
    }

    pub fn decode(value: &[u8]) -> Result<Self, RecordError> {
        let mut reader = ValueReader::new(value, ControlRecordType::LEADER_CHANGE);
        let version = reader.i16()?;
        if version < 0 {
            return Err(reader.error("negative Version"));
        }
        let directory_ids = version >= 1;
        let leader_id = reader.i32()?;
        let voters = reader
            .voters(directory_ids)?
            .ok_or_else(|| reader.error("Voters is null"))?;
        let granting_voters = reader
            .voters(directory_ids)?
            .ok_or_else(|| reader.error("GrantingVoters is null"))?;
        reader.skip_tagged_fields()?;
        reader.finish()?;
        Ok(Self {
            version,
            leader_id,
            voters,
            granting_voters,
        })
    }
}

control_batch_codec!(LeaderChange, ControlRecordType::LEADER_CHANGE);

impl QuorumReassignment {
    pub fn encode(&self) -> BytesMut {
        let voters = self.current_voters.len() + self.target_voters.as_ref().map_or(0, Vec::len);
        let mut out = BytesMut::with_capacity(8 + self.cluster_id.len() + 10 * voters);
        put_uvarint(&mut out, compact_len(self.cluster_id.len()));
        out.put_slice(self.cluster_id.as_bytes());
        put_bound_voters(&mut out, &self.current_voters, &self.current_directories);
        match &self.target_voters {
            None => put_uvarint(&mut out, 0),
            Some(target) => put_bound_voters(&mut out, target, &self.target_directories),
        }
        if self.force {
            put_uvarint(&mut out, 1); // one tagged field: 0 = Force, 1 byte, true
            put_uvarint(&mut out, 0);
            put_uvarint(&mut out, 1);
            out.put_u8(1);
        } else {
            put_uvarint(&mut out, 0); // tagged fields
        }
        out
    }

    pub fn decode(value: &[u8]) -> Result<Self, RecordError> {
        let mut reader = ValueReader::new(value, ControlRecordType::QUORUM_REASSIGNMENT);
        let cluster_id = reader.compact_string()?;
        let (current_voters, current_directories) = reader
            .bound_voters()?
            .ok_or_else(|| reader.error("CurrentVoters is null"))?;
        let (target_voters, target_directories) = match reader.bound_voters()? {
            Some((voters, directories)) => (Some(voters), directories),
            None => (None, BTreeMap::new()),
        };
        let mut force = false;
        reader.tagged_fields(|tag, value| {
            if tag == 0 {
                force = match value {
                    [0] => false,
                    [1] => true,
                    _ => return Err("Force is not a bool"),
                };
            }
            Ok(())
        })?;
        reader.finish()?;
        Ok(Self {
            cluster_id,
            current_voters,
            target_voters,
            force,
            current_directories,
            target_directories,
        })
    }
}

control_batch_codec!(QuorumReassignment, ControlRecordType::QUORUM_REASSIGNMENT);

impl ProducerIdBlock {
    /// The first id past the block.
    pub fn end_id(&self) -> i64 {
        self.first_id.saturating_add(i64::from(self.count))
    }

    pub fn encode(&self) -> BytesMut {
        let mut out = BytesMut::with_capacity(25);
        out.put_i32(self.node_id);
        out.put_u64(self.incarnation);
        out.put_i64(self.first_id);
        out.put_i32(self.count);
        put_uvarint(&mut out, 0); // tagged fields
        out
    }

    /// Decodes the value; a negative first id or a count that is not positive is refused, as is
    /// a block running past the largest id.
    pub fn decode(value: &[u8]) -> Result<Self, RecordError> {
        let mut reader = ValueReader::new(value, ControlRecordType::PRODUCER_ID_BLOCK);
        let node_id = reader.i32()?;
        let incarnation = reader.i64()? as u64;
        let first_id = reader.i64()?;
        let count = reader.i32()?;
        if first_id < 0 || count <= 0 || first_id.checked_add(i64::from(count)).is_none() {
            return Err(reader.error("FirstId and Count do not make a block of ids"));
        }
        reader.skip_tagged_fields()?;
        reader.finish()?;
        Ok(Self {
            node_id,
            incarnation,
            first_id,
            count,
        })
    }
}

control_batch_codec!(ProducerIdBlock, ControlRecordType::PRODUCER_ID_BLOCK);

impl ControlRecord {
    /// Decodes every record of a control batch, in order.
    pub fn decode_batch(batch: &BatchView) -> Result<Vec<ControlRecord>, RecordError> {
        if !batch.is_control() {
            return Err(RecordError::NotControlBatch {
                base_offset: batch.base_offset(),
            });
        }
        batch
            .records()
            .enumerate()
            .map(|(index, record)| {
                let control_type =
                    ControlRecordType::from_key(record.key.as_deref(), index as u32)?;
                let value = || {
                    record.value.clone().ok_or(RecordError::BadControlValue {
                        control_type: control_type.0,
                        offset: 0,
                        reason: "value is null",
                    })
                };
                Ok(match control_type {
                    ControlRecordType::LEADER_CHANGE => {
                        ControlRecord::LeaderChange(LeaderChange::decode(&value()?)?)
                    }
                    ControlRecordType::QUORUM_REASSIGNMENT => {
                        ControlRecord::QuorumReassignment(QuorumReassignment::decode(&value()?)?)
                    }
                    ControlRecordType::PRODUCER_ID_BLOCK => {
                        ControlRecord::ProducerIdBlock(ProducerIdBlock::decode(&value()?)?)
                    }
                    _ => ControlRecord::Other {
                        control_type,
                        value: record.value,
                    },
                })
            })
            .collect()
    }
}

pub(crate) fn control_batch(
    control_type: ControlRecordType,
    value: &[u8],
    base_offset: i64,
    epoch: i32,
    timestamp_ms: i64,
) -> BytesMut {
    let mut builder =
        RecordBatchBuilder::with_capacity(base_offset, epoch, 16 + value.len()).control(true);
    builder.append(timestamp_ms, Some(&control_type.key()), Some(value), &[]);
    builder.build()
}

pub(crate) fn single_control_value(
    batch: &BatchView,
    expected: ControlRecordType,
) -> Result<bytes::Bytes, RecordError> {
    if !batch.is_control() {
        return Err(RecordError::NotControlBatch {
            base_offset: batch.base_offset(),
        });
    }
    if batch.record_count() != 1 {
        return Err(RecordError::ControlRecordCount {
            count: batch.record_count(),
            expected: 1,
        });
    }
    let record = batch.records().next().expect("one record");
    let actual = ControlRecordType::from_key(record.key.as_deref(), 0)?;
    if actual != expected {
        return Err(RecordError::UnexpectedControlType {
            record: 0,
            expected: expected.0,
            actual: actual.0,
        });
    }
    record.value.ok_or(RecordError::BadControlValue {
        control_type: expected.0,
        offset: 0,
        reason: "value is null",
    })
}

fn compact_len(len: usize) -> u32 {
    u32::try_from(len + 1).expect("compact length exceeds u32")
}

/// A compact array of `Voter { VoterId int32, [VoterDirectoryId uuid,] tagged fields }`.
fn put_voters(out: &mut BytesMut, voters: &[i32], directory_ids: bool) {
    put_uvarint(out, compact_len(voters.len()));
    for &voter in voters {
        out.put_i32(voter);
        if directory_ids {
            out.put_bytes(0, DIRECTORY_ID_LEN);
        }
        put_uvarint(out, 0);
    }
}

/// Voters with each one's VoterDirectoryId, when `directories` has it, as its tagged field 0.
fn put_bound_voters(out: &mut BytesMut, voters: &[i32], directories: &BTreeMap<i32, DirectoryId>) {
    put_uvarint(out, compact_len(voters.len()));
    for &voter in voters {
        out.put_i32(voter);
        match directories.get(&voter).filter(|d| !d.is_zero()) {
            Some(directory) => {
                put_uvarint(out, 1); // one tagged field: 0 = VoterDirectoryId, 16 bytes
                put_uvarint(out, 0);
                put_uvarint(out, DIRECTORY_ID_LEN as u32);
                out.put_slice(&directory.0);
            }
            None => put_uvarint(out, 0),
        }
    }
}

const DIRECTORY_ID_LEN: usize = 16;

/// Reads a flexible message, naming the byte of the value where decoding failed.
struct ValueReader<'a> {
    buf: &'a [u8],
    position: usize,
    control_type: ControlRecordType,
}

impl<'a> ValueReader<'a> {
    fn new(buf: &'a [u8], control_type: ControlRecordType) -> Self {
        Self {
            buf,
            position: 0,
            control_type,
        }
    }

    fn error(&self, reason: &'static str) -> RecordError {
        RecordError::BadControlValue {
            control_type: self.control_type.0,
            offset: self.position,
            reason,
        }
    }

    fn take(&mut self, len: usize, what: &'static str) -> Result<&'a [u8], RecordError> {
        if self.buf.len() - self.position < len {
            return Err(self.error(what));
        }
        let slice = &self.buf[self.position..self.position + len];
        self.position += len;
        Ok(slice)
    }

    fn i16(&mut self) -> Result<i16, RecordError> {
        let bytes = self.take(2, "truncated int16")?;
        Ok(i16::from_be_bytes([bytes[0], bytes[1]]))
    }

    fn i32(&mut self) -> Result<i32, RecordError> {
        let bytes = self.take(4, "truncated int32")?;
        Ok(i32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
    }

    fn i64(&mut self) -> Result<i64, RecordError> {
        let bytes = self.take(8, "truncated int64")?;
        Ok(i64::from_be_bytes(bytes.try_into().expect("8 bytes")))
    }

    fn uvarint(&mut self) -> Result<u32, RecordError> {
        let (value, used) = varint::get_uvarint(&self.buf[self.position..])
            .map_err(|_| self.error("bad unsigned varint"))?;
        self.position += used;
        Ok(value)
    }

    /// A compact length: None for null (0), else the length (stored + 1).
    fn compact_len(&mut self) -> Result<Option<usize>, RecordError> {
        let raw = self.uvarint()?;
        Ok(raw.checked_sub(1).map(|len| len as usize))
    }

    fn compact_string(&mut self) -> Result<String, RecordError> {
        let len = self
            .compact_len()?
            .ok_or_else(|| self.error("string is null"))?;
        let at = self.position;
        let bytes = self.take(len, "string runs past the value")?;
        std::str::from_utf8(bytes).map(str::to_owned).map_err(|_| {
            self.position = at;
            self.error("string is not UTF-8")
        })
    }

    /// A nullable compact array of Voter structs (directory ids read and dropped).
    fn voters(&mut self, directory_ids: bool) -> Result<Option<Vec<i32>>, RecordError> {
        let Some(count) = self.compact_len()? else {
            return Ok(None);
        };
        // Refuse counts the value cannot hold before allocating for them.
        let min_voter_len = 5 + if directory_ids { DIRECTORY_ID_LEN } else { 0 };
        if count > (self.buf.len() - self.position) / min_voter_len {
            return Err(self.error("voter count exceeds the value"));
        }
        let mut voters = Vec::with_capacity(count);
        for _ in 0..count {
            voters.push(self.i32()?);
            if directory_ids {
                self.take(DIRECTORY_ID_LEN, "truncated VoterDirectoryId")?;
            }
            self.skip_tagged_fields()?;
        }
        Ok(Some(voters))
    }

    /// Voters written by [`put_bound_voters`]: the ids, and the directory of each voter that
    /// has one (a nil directory id binds nothing).
    #[allow(clippy::type_complexity)]
    fn bound_voters(
        &mut self,
    ) -> Result<Option<(Vec<i32>, BTreeMap<i32, DirectoryId>)>, RecordError> {
        let Some(count) = self.compact_len()? else {
            return Ok(None);
        };
        if count > (self.buf.len() - self.position) / 5 {
            return Err(self.error("voter count exceeds the value"));
        }
        let mut voters = Vec::with_capacity(count);
        let mut directories = BTreeMap::new();
        for _ in 0..count {
            let voter = self.i32()?;
            voters.push(voter);
            let mut directory = None;
            self.tagged_fields(|tag, value| {
                if tag == 0 {
                    let bytes: [u8; DIRECTORY_ID_LEN] = value
                        .try_into()
                        .map_err(|_| "VoterDirectoryId is not 16 bytes")?;
                    directory = Some(DirectoryId(bytes));
                }
                Ok(())
            })?;
            if let Some(d) = directory.filter(|d| !d.is_zero()) {
                directories.insert(voter, d);
            }
        }
        Ok(Some((voters, directories)))
    }

    /// Skips a tagged-fields section; tags must be strictly increasing.
    fn skip_tagged_fields(&mut self) -> Result<(), RecordError> {
        self.tagged_fields(|_, _| Ok(()))
    }

    /// Reads a tagged-field section, handing each field's tag and bytes to `field`.
    fn tagged_fields(
        &mut self,
        mut field: impl FnMut(u32, &[u8]) -> Result<(), &'static str>,
    ) -> Result<(), RecordError> {
        let count = self.uvarint()?;
        let mut previous: Option<u32> = None;
        for _ in 0..count {
            let tag = self.uvarint()?;
            if previous.is_some_and(|p| tag <= p) {
                return Err(self.error("tagged fields out of order"));
            }
            previous = Some(tag);
            let size = self.uvarint()? as usize;
            let value = self.take(size, "tagged field runs past the value")?;
            field(tag, value).map_err(|reason| self.error(reason))?;
        }
        Ok(())
    }

    fn finish(&self) -> Result<(), RecordError> {
        if self.position != self.buf.len() {
            return Err(self.error("bytes after the message"));
        }
        Ok(())
    }
}
