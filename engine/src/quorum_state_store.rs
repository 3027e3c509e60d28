//! The quorum-state file (docs/protocol.md, "The quorum-state file"): the election state a
//! voter must never forget, kept in two checksummed copies.
//!
//! Each copy is one sealed JSON line (`base::sealed_line`), for example
//! `{"clusterId":"c1","nodeId":1,"leaderId":2,"leaderEpoch":5,"votedId":2,"appliedOffset":0,
//! "currentVoters":[{"voterId":1},{"voterId":2},{"voterId":3}],"targetVoters":null,
//! "targetForce":false,"directoryId":"ASNFZ4mrze_-3LqYdlQyEA","generation":12,
//! "data_version":4,"crc32c":"5d0e1f2a"}`. Copy A is `<dir>/quorum-state`, copy B
//! `<dir>/quorum-state.b`; both hold the same bytes once a write is done. `generation` counts
//! the writes, so two valid copies that differ are ordered: the newer one is the write a crash
//! cut short before it reached the other copy.
//!
//! `directoryId` names this log directory (docs/protocol.md, "Directory ids"): drawn from the
//! OS's random source when the directory gets its first file, kept for the directory's life.
//! A node that comes back with an empty directory gets a new one. A voter whose directory the
//! log binds carries it as `voterDirectoryId` (docs/protocol.md, "Voter identity").
//!
//! A write replaces copy A (write `quorum-state.tmp`, fsync it, rename it over the copy), then
//! copy B the same way, then fsyncs the directory once: a copy's name only ever points at a
//! whole fsynced record, so a crash leaves each copy whole, old or new. Any fsync failure is
//! [`QuorumStateError::SyncFailed`]: after a failed fsync the kernel's view of the file is
//! unknown, so the node must stop (fail-stop), not retry. The node acts on a state only once both copies hold it, so one copy
//! alone always holds every state the node acted on: one damaged copy loses nothing.
//!
//! Opening reads both copies and decides with [`decide`] (pure): equal and valid, used; one
//! damaged (checksum mismatch, unparsable, truncated, unreadable, missing) or older, the other
//! one is used and both are rewritten before [`QuorumStateStore::open`] returns, with one
//! warning naming the copy; none usable, [`QuorumStateError::NoUsableCopy`] names both and the
//! runbook. Nothing is ever silently cleared: a voter that forgot its vote could vote twice.
//!
//! Upgrade: a build before data_version 4 wrote one unchecksummed `quorum-state`. Such a record
//! is accepted only while `quorum-state.b` does not exist (the upgrade has not happened), and
//! is rewritten at once as two sealed copies; once `quorum-state.b` exists, a record without a
//! valid checksum is damage.

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::base::ids::DirectoryId;
use crate::base::sealed_line::{self, SealFault};
use crate::base::{Epoch, NodeId, Offset};

/// Copy A's name inside the node's metadata log directory (the name earlier builds use).
pub const FILE_NAME: &str = "quorum-state";
/// Copy B's name.
pub const COPY_B_FILE_NAME: &str = "quorum-state.b";
/// The temporary file a write of copy A goes through before the rename.
pub const TEMP_FILE_NAME: &str = "quorum-state.tmp";
/// The temporary file of copy B.
pub const COPY_B_TEMP_FILE_NAME: &str = "quorum-state.b.tmp";
/// The `data_version` this build writes. Version 1 adds `targetForce`; a version 0 file (which
/// has none) is read as `targetForce: false`. Version 2 adds `directoryId`; an older file gets
/// one when it is opened. Version 3 adds `voterDirectoryId` to the voters that are bound (an
/// older file binds none). Version 4 seals each line with a CRC-32C (`crc32c`), adds
/// `generation` and keeps two copies; a file of versions 0 to 3 is upgraded when it is opened
/// (written back at once as two version 4 copies).
pub const DATA_VERSION: i64 = 4;
/// The oldest `data_version` this build reads.
pub const OLDEST_DATA_VERSION: i64 = 0;
/// The newest version written without a checksum, in one copy.
const LAST_UNSEALED_VERSION: i64 = 3;

/// One of the two copies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CopyName {
    A,
    B,
}

impl CopyName {
    pub fn file_name(self) -> &'static str {
        match self {
            Self::A => FILE_NAME,
            Self::B => COPY_B_FILE_NAME,
        }
    }

    fn temp_name(self) -> &'static str {
        match self {
            Self::A => TEMP_FILE_NAME,
            Self::B => COPY_B_TEMP_FILE_NAME,
        }
    }

    fn other(self) -> Self {
        match self {
            Self::A => Self::B,
            Self::B => Self::A,
        }
    }
}

/// Why one copy cannot be used.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum CopyFault {
    #[error("missing")]
    Missing,
    /// A read error other than "not found" (EIO on a bad sector, a directory in its place...).
    #[error("unreadable ({0})")]
    Unreadable(String),
    /// Truncated, without its checksum field, or with a checksum that does not match.
    #[error("damaged: {0}")]
    Seal(#[from] SealFault),
    /// The checksum matches (or the record predates checksums) but the record is not one this
    /// build writes: wrong shape, values out of range.
    #[error("damaged: {0}")]
    Malformed(String),
    /// A record without a checksum once `quorum-state.b` exists: damage, or an old file put
    /// back by hand; never trusted.
    #[error(
        "damaged: a record without a checksum, although the checksummed format exists in the \
         directory"
    )]
    Unsealed,
    /// A `data_version` above this build's: a newer build wrote it (a downgrade).
    #[error("of data_version {0}, newer than this build's")]
    Newer(String),
    /// Valid, but an earlier write than the other copy's: a crash cut that write short.
    #[error("at generation {generation}, behind the other copy's {newer} (a write cut short)")]
    Older { generation: u64, newer: u64 },
    /// Valid, but different from the other copy at the same generation: one of them was
    /// changed by hand or damaged in a way the checksum missed; neither is trusted.
    #[error("at generation {0} like the other copy but with different contents")]
    Diverged(u64),
}

#[derive(Debug, Error)]
pub enum QuorumStateError {
    #[error("quorum-state directory {path} is not usable: {source}")]
    Directory { path: PathBuf, source: io::Error },
    /// Neither copy can be used. The node must not start: docs/operations.md, "A quorum-state
    /// with no usable copy".
    #[error(
        "no usable copy of the quorum-state: {a} is {a_fault}, and {b} is {b_fault}. The node \
         must not start (it could vote twice in an epoch); see docs/operations.md, \"A \
         quorum-state with no usable copy\""
    )]
    NoUsableCopy {
        a: PathBuf,
        a_fault: CopyFault,
        b: PathBuf,
        b_fault: CopyFault,
    },
    #[error(
        "quorum-state file {path} has data_version {found}; this build reads only {supported} \
         and older (a downgrade?)"
    )]
    UnknownVersion {
        path: PathBuf,
        found: String,
        supported: i64,
    },
    /// The file was written by another node id: the directory or `broker.id` is misconfigured.
    #[error(
        "quorum-state file {path} belongs to node {found}, but this node is {expected} \
         (check broker.id and log.dirs)"
    )]
    NodeIdMismatch {
        path: PathBuf,
        expected: NodeId,
        found: NodeId,
    },
    /// The file belongs to another cluster: the directory or `cluster.id` is misconfigured.
    #[error(
        "quorum-state file {path} belongs to cluster {found:?}, but this node is in cluster \
         {expected:?} (check cluster.id and log.dirs)"
    )]
    ClusterIdMismatch {
        path: PathBuf,
        expected: String,
        found: String,
    },
    /// Creating, writing or renaming failed before anything was made durable: the copy is
    /// intact.
    #[error("cannot write quorum-state file {path}: {source}")]
    Write { path: PathBuf, source: io::Error },
    /// The OS's random source failed while drawing a directory id.
    #[error("cannot draw a directory id for {path}: {reason}")]
    Random { path: PathBuf, reason: String },
    /// fsync of the file or of its directory failed. Fatal: stop the node.
    #[error("fsync of {path} failed: {source}; the node must stop (fail-stop)")]
    SyncFailed { path: PathBuf, source: io::Error },
}

impl QuorumStateError {
    /// True for the errors after which the node must stop at once rather than report and exit.
    pub fn is_fail_stop(&self) -> bool {
        matches!(self, Self::SyncFailed { .. })
    }
}

/// The record's JSON, field for field (serialized in this order, `crc32c` added by the seal).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct QuorumStateData {
    cluster_id: String,
    node_id: NodeId,
    leader_id: NodeId,
    leader_epoch: i32,
    voted_id: NodeId,
    applied_offset: i64,
    current_voters: Vec<Voter>,
    target_voters: Option<Vec<Voter>>,
    /// Version 1: the reassignment in progress skips the strict reconfiguration check.
    #[serde(default)]
    target_force: bool,
    /// Version 2: this log directory's id (Kafka's base64url uuid text).
    #[serde(default)]
    directory_id: Option<String>,
    /// Version 4: the write's number, one more than the previous write's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    generation: Option<u64>,
    #[serde(rename = "data_version")]
    data_version: i64,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Voter {
    voter_id: NodeId,
    /// Version 3: the directory the log binds this voter to, when it binds one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    voter_directory_id: Option<String>,
}

fn voters(ids: &[NodeId], directories: &BTreeMap<NodeId, DirectoryId>) -> Vec<Voter> {
    ids.iter()
        .map(|&voter_id| Voter {
            voter_id,
            voter_directory_id: directories.get(&voter_id).map(DirectoryId::to_string),
        })
        .collect()
}

fn voter_ids(voters: &[Voter]) -> Vec<NodeId> {
    voters.iter().map(|voter| voter.voter_id).collect()
}

/// The bound voters' directories (checked by `check_ranges`).
fn voter_directories(voters: &[Voter]) -> BTreeMap<NodeId, DirectoryId> {
    voters
        .iter()
        .filter_map(|v| {
            let text = v.voter_directory_id.as_deref()?;
            Some((v.voter_id, text.parse().expect("checked by check_ranges")))
        })
        .collect()
}

/// One copy's record, checked: its checksum matched (or it predates checksums: `sealed` is
/// false) and its values are in range.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    data: QuorumStateData,
    /// The copy's bytes, as read: what a repair writes to the other copy.
    line: Vec<u8>,
    sealed: bool,
}

impl Record {
    /// The write's number (0 for a record that predates version 4).
    pub fn generation(&self) -> u64 {
        self.data.generation.unwrap_or(0)
    }

    pub fn is_sealed(&self) -> bool {
        self.sealed
    }

    pub fn cluster_id(&self) -> &str {
        &self.data.cluster_id
    }

    pub fn node_id(&self) -> NodeId {
        self.data.node_id
    }

    pub fn data_version(&self) -> i64 {
        self.data.data_version
    }

    /// The directory id, when the record has one (every version 4 record does).
    pub fn directory_id(&self) -> Option<DirectoryId> {
        let text = self.data.directory_id.as_deref()?;
        Some(text.parse().expect("checked by check_ranges"))
    }

    pub fn election_state(&self) -> ElectionState {
        let data = &self.data;
        ElectionState {
            epoch: data.leader_epoch,
            leader_id: data.leader_id,
            voted_id: data.voted_id,
            current_voters: voter_ids(&data.current_voters),
            target_voters: data.target_voters.as_deref().map(voter_ids),
            target_force: data.target_force,
            applied_offset: data.applied_offset,
            voter_directories: voter_directories(&data.current_voters),
            target_directories: data
                .target_voters
                .as_deref()
                .map(voter_directories)
                .unwrap_or_default(),
        }
    }

    /// A sealed record of this build's version holding `data` (its generation and directory
    /// id already set).
    fn seal(mut data: QuorumStateData) -> Self {
        assert!(data.generation.is_some() && data.directory_id.is_some());
        data.data_version = DATA_VERSION;
        let object = serde_json::to_vec(&data).expect("plain data serializes");
        Self {
            line: sealed_line::seal(&object),
            data,
            sealed: true,
        }
    }
}

/// Checks one copy's bytes (pure; the fuzz target `quorum_state` drives it). A record without
/// a checksum of versions 0 to 3 is `Ok` with `is_sealed() == false`: only [`decide`] knows
/// whether the directory still allows it.
pub fn decode_copy(bytes: &[u8]) -> Result<Record, CopyFault> {
    match sealed_line::unseal(bytes) {
        Ok(object) => decode_sealed(&object, bytes),
        Err(SealFault::NoChecksum) => decode_unsealed(bytes),
        Err(fault) => Err(fault.into()),
    }
}

fn decode_sealed(object: &[u8], line: &[u8]) -> Result<Record, CopyFault> {
    let value: serde_json::Value =
        serde_json::from_slice(object).map_err(|e| CopyFault::Malformed(e.to_string()))?;
    match data_version(&value)? {
        DATA_VERSION => {}
        v if v > DATA_VERSION => return Err(CopyFault::Newer(v.to_string())),
        v => {
            return Err(CopyFault::Malformed(format!(
                "data_version {v} with a checksum (only version {DATA_VERSION} has one)"
            )))
        }
    }
    let data: QuorumStateData =
        serde_json::from_value(value).map_err(|e| CopyFault::Malformed(e.to_string()))?;
    if data.generation.is_none() {
        return Err(CopyFault::Malformed("no generation".into()));
    }
    if data.directory_id.is_none() {
        return Err(CopyFault::Malformed("no directoryId".into()));
    }
    check_ranges(&data).map_err(CopyFault::Malformed)?;
    Ok(Record {
        data,
        line: line.to_vec(),
        sealed: true,
    })
}

/// A record of versions 0 to 3, one line without a checksum.
fn decode_unsealed(bytes: &[u8]) -> Result<Record, CopyFault> {
    let malformed = |reason: String| CopyFault::Malformed(reason);
    let text = std::str::from_utf8(bytes).map_err(|_| malformed("not UTF-8".into()))?;
    let line = text.strip_suffix('\n').expect("unseal checked the newline");
    if line.contains('\n') {
        return Err(malformed("more than one line".into()));
    }
    // The version first, so a newer format reports as such rather than as damage.
    let value: serde_json::Value =
        serde_json::from_str(line).map_err(|e| malformed(e.to_string()))?;
    match data_version(&value)? {
        v if v > DATA_VERSION => return Err(CopyFault::Newer(v.to_string())),
        DATA_VERSION => return Err(SealFault::NoChecksum.into()),
        v if v < OLDEST_DATA_VERSION => return Err(malformed(format!("data_version {v}"))),
        _ => {}
    }
    let data: QuorumStateData =
        serde_json::from_value(value).map_err(|e| malformed(e.to_string()))?;
    if data.generation.is_some() {
        return Err(malformed(format!(
            "a generation in a data_version {} record",
            data.data_version
        )));
    }
    check_ranges(&data).map_err(malformed)?;
    debug_assert!(data.data_version <= LAST_UNSEALED_VERSION);
    Ok(Record {
        data,
        line: bytes.to_vec(),
        sealed: false,
    })
}

fn data_version(value: &serde_json::Value) -> Result<i64, CopyFault> {
    let version = value
        .get("data_version")
        .ok_or_else(|| CopyFault::Malformed("no data_version field".into()))?;
    version
        .as_i64()
        .ok_or_else(|| CopyFault::Malformed(format!("data_version {version} is not a version")))
}

fn check_ranges(data: &QuorumStateData) -> Result<(), String> {
    if data.leader_epoch < 0 {
        return Err(format!("negative leaderEpoch {}", data.leader_epoch));
    }
    if data.leader_id < -1 {
        return Err(format!("leaderId {} below -1", data.leader_id));
    }
    if data.voted_id < -1 {
        return Err(format!("votedId {} below -1", data.voted_id));
    }
    if let Some(text) = &data.directory_id {
        if text
            .parse::<DirectoryId>()
            .map_or(true, DirectoryId::is_zero)
        {
            return Err(format!("directoryId {text:?} is not a directory id"));
        }
    }
    let listed = data.target_voters.iter().flatten();
    for voter in data.current_voters.iter().chain(listed) {
        if let Some(text) = &voter.voter_directory_id {
            if text
                .parse::<DirectoryId>()
                .map_or(true, DirectoryId::is_zero)
            {
                return Err(format!(
                    "voterDirectoryId {text:?} of voter {} is not a directory id",
                    voter.voter_id
                ));
            }
        }
    }
    Ok(())
}

/// What to do with the two copies, as read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Neither copy exists: a new directory.
    Fresh,
    /// Both valid and equal.
    Intact(Record),
    /// Use `record`, read from copy `from`; the other copy has `fault`. Both are rewritten.
    Repair {
        record: Record,
        from: CopyName,
        fault: CopyFault,
    },
    /// A record of an earlier build in copy A and no copy B: use it, write both copies sealed.
    Upgrade(Record),
    /// A copy written by a newer build: never overwritten.
    Newer { copy: CopyName, found: String },
    /// Neither copy is usable.
    NoUsableCopy { a: CopyFault, b: CopyFault },
}

/// The decision over the two copies (pure; docs/protocol.md, "The quorum-state file").
pub fn decide(a: Result<Record, CopyFault>, b: Result<Record, CopyFault>) -> Verdict {
    for (copy, read) in [(CopyName::A, &a), (CopyName::B, &b)] {
        if let Err(CopyFault::Newer(found)) = read {
            return Verdict::Newer {
                copy,
                found: found.clone(),
            };
        }
    }
    // An unsealed record is an earlier build's only while no copy B exists; copy B was never
    // written unsealed.
    let a = match a {
        Ok(record) if !record.sealed => match b {
            Err(CopyFault::Missing) => return Verdict::Upgrade(record),
            _ => Err(CopyFault::Unsealed),
        },
        other => other,
    };
    let b = b.and_then(|r| {
        if r.sealed {
            Ok(r)
        } else {
            Err(CopyFault::Unsealed)
        }
    });
    match (a, b) {
        (Err(CopyFault::Missing), Err(CopyFault::Missing)) => Verdict::Fresh,
        (Ok(a), Ok(b)) if a.line == b.line => Verdict::Intact(a),
        (Ok(a), Ok(b)) => {
            let (ga, gb) = (a.generation(), b.generation());
            if ga > gb {
                Verdict::Repair {
                    record: a,
                    from: CopyName::A,
                    fault: CopyFault::Older {
                        generation: gb,
                        newer: ga,
                    },
                }
            } else if gb > ga {
                Verdict::Repair {
                    record: b,
                    from: CopyName::B,
                    fault: CopyFault::Older {
                        generation: ga,
                        newer: gb,
                    },
                }
            } else {
                Verdict::NoUsableCopy {
                    a: CopyFault::Diverged(ga),
                    b: CopyFault::Diverged(gb),
                }
            }
        }
        (Ok(record), Err(fault)) => Verdict::Repair {
            record,
            from: CopyName::A,
            fault,
        },
        (Err(fault), Ok(record)) => Verdict::Repair {
            record,
            from: CopyName::B,
            fault,
        },
        (Err(a), Err(b)) => Verdict::NoUsableCopy { a, b },
    }
}

/// Reads and checks one copy.
fn read_copy(path: &Path) -> Result<Record, CopyFault> {
    match fs::read(path) {
        Ok(bytes) => decode_copy(&bytes),
        Err(error) if error.kind() == io::ErrorKind::NotFound => Err(CopyFault::Missing),
        Err(error) => Err(CopyFault::Unreadable(error.to_string())),
    }
}

/// Reads both copies of `dir` and decides.
pub fn inspect(dir: &Path) -> Verdict {
    decide(
        read_copy(&dir.join(FILE_NAME)),
        read_copy(&dir.join(COPY_B_FILE_NAME)),
    )
}

/// The cluster and node id the stored state names (for a tool pointed at a directory, which
/// knows neither), or why no copy can be used; None for a directory without any.
pub fn stored_identity(dir: &Path) -> Result<Option<(String, NodeId)>, QuorumStateError> {
    match inspect(dir) {
        Verdict::Fresh => Ok(None),
        Verdict::Intact(record) | Verdict::Upgrade(record) | Verdict::Repair { record, .. } => {
            Ok(Some((record.data.cluster_id, record.data.node_id)))
        }
        refused => Err(refusal(dir, refused)),
    }
}

/// The error for a verdict that refuses.
fn refusal(dir: &Path, verdict: Verdict) -> QuorumStateError {
    match verdict {
        Verdict::Newer { copy, found } => QuorumStateError::UnknownVersion {
            path: dir.join(copy.file_name()),
            found,
            supported: DATA_VERSION,
        },
        Verdict::NoUsableCopy { a, b } => QuorumStateError::NoUsableCopy {
            a: dir.join(FILE_NAME),
            a_fault: a,
            b: dir.join(COPY_B_FILE_NAME),
            b_fault: b,
        },
        other => unreachable!("{other:?} is not a refusal"),
    }
}

/// The quorum-state copies of one node.
#[derive(Debug)]
pub struct QuorumStateStore {
    dir: PathBuf,
    /// Copy A's path.
    path: PathBuf,
    node_id: NodeId,
    cluster_id: String,
    directory_id: DirectoryId,
    /// The generation of the last write (or of the copies read at open).
    generation: u64,
    /// `File::sync_all` except in tests that inject failures.
    sync: fn(&File) -> io::Result<()>,
}

impl QuorumStateStore {
    /// Opens the copies' directory (which must exist), removes a temporary file a crash may
    /// have left mid-write (it was never renamed, so it never was the state), reads both copies
    /// and, before returning, rewrites both when one was damaged, missing or behind, or when an
    /// earlier build's single file is upgraded. One handle per directory: the node owns its
    /// metadata directory exclusively. Takes the directory id from the copies, or draws one: for
    /// a new directory it is written with the first state.
    ///
    /// Copies that cannot be used, or that belong to another node or cluster, leave the store
    /// unloaded without an error here: [`QuorumStateStore::read`] reports why, and the node
    /// stops before it writes.
    pub fn open(
        dir: &Path,
        node_id: NodeId,
        cluster_id: impl Into<String>,
    ) -> Result<Self, QuorumStateError> {
        let directory_error = |source| QuorumStateError::Directory {
            path: dir.to_path_buf(),
            source,
        };
        let metadata = fs::metadata(dir).map_err(directory_error)?;
        if !metadata.is_dir() {
            return Err(directory_error(io::Error::new(
                io::ErrorKind::NotADirectory,
                "not a directory",
            )));
        }
        let mut store = Self {
            dir: dir.to_path_buf(),
            path: dir.join(FILE_NAME),
            node_id,
            cluster_id: cluster_id.into(),
            directory_id: DirectoryId::ZERO,
            generation: 0,
            sync: File::sync_all,
        };
        for copy in [CopyName::A, CopyName::B] {
            let temp = dir.join(copy.temp_name());
            match fs::remove_file(&temp) {
                Ok(()) => {
                    tracing::warn!(path = %temp.display(), "removed an unfinished quorum-state write (a crash cut it short; the copies \
                        stand, nothing to do)");
                }
                Err(error) if error.kind() == io::ErrorKind::NotFound => {}
                Err(source) => return Err(QuorumStateError::Write { path: temp, source }),
            }
        }
        store.load()?;
        Ok(store)
    }

    /// Adopts the stored state and repairs or upgrades the copies (see [`Self::open`]).
    fn load(&mut self) -> Result<(), QuorumStateError> {
        let record = match inspect(&self.dir) {
            Verdict::Fresh => {
                self.directory_id = self.draw_directory_id()?;
                return Ok(());
            }
            Verdict::Intact(record) => {
                if self.check_identity(&record).is_ok() {
                    self.adopt(&record)?;
                }
                return Ok(());
            }
            Verdict::Repair {
                record,
                from,
                fault,
            } => {
                if self.check_identity(&record).is_err() {
                    return Ok(());
                }
                tracing::warn!(
                    copy = %self.path_of(from.other()).display(),
                    used = %self.path_of(from).display(),
                    generation = record.generation(),
                    "quorum-state copy {} is {fault}: using {} (generation {}) and rewriting both \
                     copies before starting (nothing to do; if this repeats, check the disk)",
                    self.path_of(from.other()).display(),
                    self.path_of(from).display(),
                    record.generation()
                );
                record
            }
            Verdict::Upgrade(record) => {
                if self.check_identity(&record).is_err() {
                    return Ok(());
                }
                record
            }
            Verdict::Newer { .. } | Verdict::NoUsableCopy { .. } => return Ok(()),
        };
        self.adopt(&record)?;
        let record = if record.sealed {
            record
        } else {
            let upgraded_from = record.data.data_version;
            let mut data = record.data;
            data.directory_id = Some(self.directory_id.to_string());
            self.generation = 1;
            data.generation = Some(self.generation);
            tracing::warn!(path = %self.dir.join(FILE_NAME).display(), directory_id = %self.directory_id,
                "upgrading the quorum-state file from data_version {upgraded_from} to \
                 {DATA_VERSION}: two checksummed copies, {FILE_NAME} and {COPY_B_FILE_NAME} \
                 (once; an earlier build no longer starts on this directory)");
            Record::seal(data)
        };
        self.write_copies(&record.line)
    }

    /// Takes the directory id and the generation of `record` (a record of an earlier version
    /// without a directory id gets one drawn, written by the upgrade that follows).
    fn adopt(&mut self, record: &Record) -> Result<(), QuorumStateError> {
        self.directory_id = match record.directory_id() {
            Some(id) => id,
            None => self.draw_directory_id()?,
        };
        self.generation = record.generation();
        Ok(())
    }

    /// This log directory's id (zero only when the copies could not be used at open).
    pub fn directory_id(&self) -> DirectoryId {
        self.directory_id
    }

    /// The generation of the last write, or of the copies read at open (0 for none).
    pub fn generation(&self) -> u64 {
        self.generation
    }

    fn draw_directory_id(&self) -> Result<DirectoryId, QuorumStateError> {
        let mut bytes = [0u8; 16];
        getrandom::fill(&mut bytes).map_err(|e| QuorumStateError::Random {
            path: self.dir.join(FILE_NAME),
            reason: e.to_string(),
        })?;
        // Never the zero id, which means "unknown".
        bytes[15] |= 1;
        Ok(DirectoryId(bytes))
    }

    /// Copy A's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn path_of(&self, copy: CopyName) -> PathBuf {
        self.dir.join(copy.file_name())
    }

    /// The stored election state, or None when neither copy exists (a new node). Reads both
    /// copies and decides as open does, without repairing (open did).
    pub fn read(&self) -> Result<Option<ElectionState>, QuorumStateError> {
        let record = match inspect(&self.dir) {
            Verdict::Fresh => return Ok(None),
            Verdict::Intact(record) | Verdict::Upgrade(record) | Verdict::Repair { record, .. } => {
                record
            }
            refused => return Err(refusal(&self.dir, refused)),
        };
        self.check_identity(&record)?;
        Ok(Some(record.election_state()))
    }

    /// Replaces both copies with `state`, durably ([`Self::write_copies`]). On `Ok` the new
    /// state survives a crash and the damage of either copy.
    pub fn write(&mut self, state: &ElectionState) -> Result<(), QuorumStateError> {
        assert!(state.epoch >= 0, "negative epoch {}", state.epoch);
        assert!(state.leader_id >= -1 && state.voted_id >= -1);
        if self.directory_id.is_zero() {
            // The copies were unusable at open and are being replaced by hand.
            self.directory_id = self.draw_directory_id()?;
        }
        // Taken before the write: a failed write never lends its number to other contents.
        self.generation =
            self.generation
                .checked_add(1)
                .ok_or_else(|| QuorumStateError::Write {
                    path: self.path_of(CopyName::A),
                    source: io::Error::other("the write generation is exhausted"),
                })?;
        let record = Record::seal(QuorumStateData {
            cluster_id: self.cluster_id.clone(),
            node_id: self.node_id,
            leader_id: state.leader_id,
            leader_epoch: state.epoch,
            voted_id: state.voted_id,
            applied_offset: state.applied_offset,
            current_voters: voters(&state.current_voters, &state.voter_directories),
            target_voters: state
                .target_voters
                .as_deref()
                .map(|t| voters(t, &state.target_directories)),
            target_force: state.target_force,
            directory_id: Some(self.directory_id.to_string()),
            generation: Some(self.generation),
            data_version: DATA_VERSION,
        });
        self.write_copies(&record.line)
    }

    /// Copy A, then copy B: each written to its temporary file, fsynced, and renamed over the
    /// copy only then; one fsync of the directory at the end makes both renames durable. A
    /// copy's name only ever points at a whole, fsynced record, so a crash anywhere leaves each
    /// copy old or new and valid, in any combination, and [`decide`] takes the newer one. Three
    /// fsyncs, where a full replace of each copy in turn would take four: a directory fsync
    /// between them would only order the two renames, which the generations already do.
    fn write_copies(&self, line: &[u8]) -> Result<(), QuorumStateError> {
        assert!(
            !self.directory_id.is_zero(),
            "a directory id is drawn before a write"
        );
        for copy in [CopyName::A, CopyName::B] {
            let temp_path = self.dir.join(copy.temp_name());
            let path = self.path_of(copy);
            self.write_temp(&temp_path, line)?;
            fs::rename(&temp_path, &path)
                .map_err(|source| QuorumStateError::Write { path, source })?;
        }
        self.sync_directory()
    }

    fn write_temp(&self, temp_path: &Path, contents: &[u8]) -> Result<(), QuorumStateError> {
        let write_error = |source| QuorumStateError::Write {
            path: temp_path.to_path_buf(),
            source,
        };
        let mut temp = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(temp_path)
            .map_err(write_error)?;
        temp.write_all(contents).map_err(write_error)?;
        (self.sync)(&temp).map_err(|source| QuorumStateError::SyncFailed {
            path: temp_path.to_path_buf(),
            source,
        })
    }

    /// Makes the rename durable: without it a crash can bring back the old directory entry.
    fn sync_directory(&self) -> Result<(), QuorumStateError> {
        let sync_error = |source| QuorumStateError::SyncFailed {
            path: self.dir.clone(),
            source,
        };
        let dir = File::open(&self.dir).map_err(sync_error)?;
        (self.sync)(&dir).map_err(sync_error)
    }

    fn check_identity(&self, record: &Record) -> Result<(), QuorumStateError> {
        let path = self.path_of(CopyName::A);
        if record.data.cluster_id != self.cluster_id {
            return Err(QuorumStateError::ClusterIdMismatch {
                path,
                expected: self.cluster_id.clone(),
                found: record.data.cluster_id.clone(),
            });
        }
        if record.data.node_id != self.node_id {
            return Err(QuorumStateError::NodeIdMismatch {
                path,
                expected: self.node_id,
                found: record.data.node_id,
            });
        }
        Ok(())
    }
}

/// The election state kept in the quorum-state file (docs/protocol.md section 2).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct ElectionState {
    pub epoch: Epoch,
    /// -1 when no leader is known in `epoch`.
    pub leader_id: NodeId,
    /// -1 when this node has not voted in `epoch`.
    pub voted_id: NodeId,
    pub current_voters: Vec<NodeId>,
    pub target_voters: Option<Vec<NodeId>>,
    /// The reassignment toward `target_voters` skips the strict reconfiguration check.
    pub target_force: bool,
    /// The log below this offset implies `current_voters` and `target_voters` (a committed
    /// set); the voter records at or above it are read from the log at start.
    pub applied_offset: Offset,
    /// The directories of the bound current voters (docs/protocol.md, "Voter identity").
    pub voter_directories: BTreeMap<NodeId, DirectoryId>,
    /// The directories the target's voters must come with, where named.
    pub target_directories: BTreeMap<NodeId, DirectoryId>,
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;
    use crate::warnings_counter::Warnings;

    fn state(epoch: i32) -> ElectionState {
        ElectionState {
            epoch,
            leader_id: 2,
            voted_id: 2,
            current_voters: vec![1, 2, 3],
            target_voters: None,
            target_force: false,
            applied_offset: 7,
            ..Default::default()
        }
    }

    /// A voter that voted for 1 in epoch 5: the user's case (a flipped bit made it 3).
    fn voted_for_1() -> ElectionState {
        ElectionState {
            leader_id: -1,
            voted_id: 1,
            ..state(5)
        }
    }

    fn failing_sync(_: &File) -> io::Result<()> {
        Err(io::Error::from_raw_os_error(libc::EIO))
    }

    thread_local! {
        /// Syncs left before `sync_then_fail` fails.
        static SYNCS_LEFT: Cell<u32> = const { Cell::new(0) };
    }

    /// Succeeds `SYNCS_LEFT` times, then fails: a crash at a chosen point of a write.
    fn sync_then_fail(file: &File) -> io::Result<()> {
        let left = SYNCS_LEFT.get();
        if left == 0 {
            return failing_sync(file);
        }
        SYNCS_LEFT.set(left - 1);
        file.sync_all()
    }

    /// Both copies' bytes.
    fn copies(dir: &Path) -> (Vec<u8>, Vec<u8>) {
        (
            fs::read(dir.join(FILE_NAME)).unwrap(),
            fs::read(dir.join(COPY_B_FILE_NAME)).unwrap(),
        )
    }

    fn path_of(dir: &Path, copy: CopyName) -> PathBuf {
        dir.join(copy.file_name())
    }

    /// Opens with a counter of the WARN events the open logs.
    fn open_counting(dir: &Path) -> (Result<QuorumStateStore, QuorumStateError>, usize) {
        let warnings = Warnings::default();
        let store = tracing::subscriber::with_default(warnings.clone(), || {
            QuorumStateStore::open(dir, 1, "c1")
        });
        (store, warnings.count())
    }

    /// A directory whose two copies hold `voted_for_1()` at generation 1.
    fn written() -> (tempfile::TempDir, Vec<u8>) {
        let dir = tempfile::tempdir().unwrap();
        let mut store = QuorumStateStore::open(dir.path(), 1, "c1").unwrap();
        store.write(&voted_for_1()).unwrap();
        let (a, b) = copies(dir.path());
        assert_eq!(a, b);
        (dir, a)
    }

    /// Opens `dir` expecting one copy repaired from the other: one warning, the original state,
    /// both copies equal to `good` again.
    fn assert_repaired(dir: &Path, good: &[u8], case: &str) {
        let (store, warnings) = open_counting(dir);
        let store = store.unwrap_or_else(|e| panic!("{case}: {e}"));
        assert_eq!(warnings, 1, "{case}: one warning");
        assert_eq!(store.read().unwrap(), Some(voted_for_1()), "{case}");
        let (a, b) = copies(dir);
        assert_eq!((a.as_slice(), b.as_slice()), (good, good), "{case}");
        // And the next open finds nothing to say.
        assert_eq!(open_counting(dir).1, 0, "{case}: repaired for good");
    }

    #[test]
    fn failed_fsync_is_fatal_and_keeps_the_old_state() {
        let dir = tempfile::tempdir().unwrap();
        let mut file = QuorumStateStore::open(dir.path(), 1, "c").unwrap();
        file.write(&state(1)).unwrap();
        file.sync = failing_sync;
        let error = file.write(&state(2)).unwrap_err();
        assert!(error.is_fail_stop(), "{error}");
        assert!(
            matches!(error, QuorumStateError::SyncFailed { ref path, .. } if path.ends_with(TEMP_FILE_NAME))
        );
        // The rename never happened: the durable state is still epoch 1, in both copies.
        assert_eq!(file.read().unwrap(), Some(state(1)));
        let (a, b) = copies(dir.path());
        assert_eq!(a, b);
    }

    #[test]
    fn both_copies_have_the_documented_layout_and_each_write_a_new_generation() {
        let dir = tempfile::tempdir().unwrap();
        let mut file = QuorumStateStore::open(dir.path(), 1, "c1").unwrap();
        assert_eq!(file.generation(), 0);
        for generation in 1..=3u64 {
            file.write(&state(5)).unwrap();
            assert_eq!(file.generation(), generation);
            let record = format!(
                "{{\"clusterId\":\"c1\",\"nodeId\":1,\"leaderId\":2,\"leaderEpoch\":5,\"votedId\":2,\
                 \"appliedOffset\":7,\"currentVoters\":[{{\"voterId\":1}},{{\"voterId\":2}},{{\"voterId\":3}}],\
                 \"targetVoters\":null,\"targetForce\":false,\"directoryId\":\"{}\",\
                 \"generation\":{generation},\"data_version\":4",
                file.directory_id()
            );
            let crc = crc32c::crc32c(record.as_bytes());
            let (a, b) = copies(dir.path());
            assert_eq!(
                String::from_utf8(a.clone()).unwrap(),
                format!("{record},\"crc32c\":\"{crc:08x}\"}}\n")
            );
            assert_eq!(a, b, "copy B holds the same bytes");
        }
        let reopened = QuorumStateStore::open(dir.path(), 1, "c1").unwrap();
        assert_eq!(reopened.generation(), 3, "counted on from the copies");
    }

    /// The user's case and its neighbours: one bit flipped in a field of one copy. The copy is
    /// refused (checksum), the other one used, one warning, both rewritten.
    #[test]
    fn a_flipped_bit_in_any_field_of_either_copy_is_repaired_from_the_other() {
        let (dir, good) = written();
        let text = String::from_utf8(good.clone()).unwrap();
        // The byte to change: the first byte of each field's value, and the checksum digits,
        // the closing brace and the newline.
        let value_of = |field: &str| text.find(&format!("\"{field}\":")).unwrap() + field.len() + 3;
        let mut positions: Vec<(String, usize)> = [
            "clusterId",
            "nodeId",
            "leaderId",
            "leaderEpoch",
            "votedId",
            "appliedOffset",
            "currentVoters",
            "targetVoters",
            "targetForce",
            "directoryId",
            "generation",
            "data_version",
            "crc32c",
        ]
        .iter()
        .map(|f| (f.to_string(), value_of(f)))
        .collect();
        positions.push(("the opening brace".into(), 0));
        positions.push(("the closing brace".into(), good.len() - 2));
        positions.push(("the newline".into(), good.len() - 1));
        for copy in [CopyName::A, CopyName::B] {
            for (field, at) in &positions {
                for bit in [0, 1, 5] {
                    let mut bad = good.clone();
                    bad[*at] ^= 1 << bit;
                    fs::write(path_of(dir.path(), copy), &bad).unwrap();
                    let case = format!("copy {copy:?}, {field} (byte {at}), bit {bit}");
                    assert_repaired(dir.path(), &good, &case);
                }
            }
        }
    }

    /// The user's exact case: votedId 1 turned into 3 ("1" is 0x31, "3" 0x33) in copy A. Still
    /// valid JSON of the expected shape, so only the checksum tells.
    #[test]
    fn voted_id_1_turned_into_3_is_refused_and_the_vote_kept() {
        let (dir, good) = written();
        let text = String::from_utf8(good.clone()).unwrap();
        let flipped = text.replace("\"votedId\":1", "\"votedId\":3");
        assert_eq!(flipped.len(), text.len());
        let (a, b) = (text.as_bytes(), flipped.as_bytes());
        let differing: Vec<u8> = a
            .iter()
            .zip(b)
            .map(|(x, y)| x ^ y)
            .filter(|d| *d != 0)
            .collect();
        assert_eq!(differing, vec![0b10], "one bit");
        assert!(serde_json::from_str::<serde_json::Value>(&flipped).is_ok());
        assert!(matches!(
            decode_copy(flipped.as_bytes()),
            Err(CopyFault::Seal(SealFault::Mismatch { .. }))
        ));
        fs::write(dir.path().join(FILE_NAME), &flipped).unwrap();
        assert_repaired(dir.path(), &good, "votedId 1 -> 3");
    }

    #[test]
    fn a_truncated_or_missing_or_unreadable_copy_is_repaired_from_the_other() {
        let (dir, good) = written();
        for copy in [CopyName::A, CopyName::B] {
            let path = path_of(dir.path(), copy);
            for len in [0, 1, good.len() / 2, good.len() - 23, good.len() - 1] {
                fs::write(&path, &good[..len]).unwrap();
                assert_repaired(dir.path(), &good, &format!("copy {copy:?} cut to {len}"));
            }
            fs::remove_file(&path).unwrap();
            assert_repaired(dir.path(), &good, &format!("copy {copy:?} missing"));
            // A directory in its place: the read fails (EISDIR, as EIO would), not the start.
            fs::remove_file(&path).unwrap();
            fs::create_dir(&path).unwrap();
            let (store, warnings) = open_counting(dir.path());
            assert_eq!(warnings, 1);
            // The rewrite cannot rename over a directory: a write error, nothing trusted.
            assert!(
                matches!(store, Err(QuorumStateError::Write { .. })),
                "{store:?}"
            );
            fs::remove_dir(&path).unwrap();
            fs::remove_file(dir.path().join(copy.temp_name())).unwrap();
            fs::write(&path, &good).unwrap();
        }
    }

    /// A crash between the write of copy A and that of copy B leaves A one generation ahead:
    /// the newer one is taken (the node never acted on it, but it is a whole write) and both
    /// copies are made equal before the node goes on.
    #[test]
    fn a_write_cut_short_between_the_copies_is_completed_at_open() {
        let (dir, _) = written();
        let mut store = QuorumStateStore::open(dir.path(), 1, "c1").unwrap();
        // Copy A's temp file synced and renamed, then copy B's temp sync fails.
        SYNCS_LEFT.set(1);
        store.sync = sync_then_fail;
        let error = store.write(&state(9)).unwrap_err();
        assert!(
            matches!(error, QuorumStateError::SyncFailed { ref path, .. } if path.ends_with(COPY_B_TEMP_FILE_NAME)),
            "{error}"
        );
        drop(store);
        let (a, b) = copies(dir.path());
        assert_ne!(a, b);
        assert_eq!(decode_copy(&a).unwrap().generation(), 2);
        assert_eq!(decode_copy(&b).unwrap().generation(), 1);
        let (store, warnings) = open_counting(dir.path());
        let store = store.unwrap();
        assert_eq!(
            warnings, 2,
            "copy B's leftover temporary file, and the repair"
        );
        assert_eq!(store.read().unwrap(), Some(state(9)));
        assert_eq!(store.generation(), 2);
        assert_eq!(copies(dir.path()), (a.clone(), a));
    }

    /// Both orders of generations: whichever copy is newer wins.
    #[test]
    fn the_newer_generation_wins_whichever_copy_holds_it() {
        for newer in [CopyName::A, CopyName::B] {
            let (dir, old) = written();
            let mut store = QuorumStateStore::open(dir.path(), 1, "c1").unwrap();
            store.write(&state(8)).unwrap();
            let (new, _) = copies(dir.path());
            fs::write(path_of(dir.path(), newer.other()), &old).unwrap();
            match inspect(dir.path()) {
                Verdict::Repair { from, fault, .. } => {
                    assert_eq!(from, newer);
                    assert_eq!(
                        fault,
                        CopyFault::Older {
                            generation: 1,
                            newer: 2
                        }
                    );
                }
                other => panic!("{other:?}"),
            }
            let (store, warnings) = open_counting(dir.path());
            assert_eq!(warnings, 1);
            assert_eq!(store.unwrap().read().unwrap(), Some(state(8)));
            assert_eq!(copies(dir.path()), (new.clone(), new));
        }
    }

    /// Neither copy usable: a typed error naming both files and the runbook; nothing written.
    #[test]
    fn both_copies_damaged_refuse_to_start_naming_both_files() {
        let (dir, good) = written();
        let mut flipped = good.clone();
        let at = String::from_utf8(good.clone())
            .unwrap()
            .find("\"votedId\":1")
            .unwrap()
            + 10;
        flipped[at] ^= 0b10;
        /// Copy A, copy B (None: missing), what each copy's fault says.
        type Case<'a> = (&'a [u8], Option<&'a [u8]>, &'a str, &'a str);
        let cases: [Case; 4] = [
            (
                &flipped,
                Some(&flipped),
                "checksum mismatch",
                "checksum mismatch",
            ),
            (
                &good[..10],
                Some(&flipped),
                "truncated",
                "checksum mismatch",
            ),
            (&flipped, None, "checksum mismatch", "missing"),
            (
                b"garbage\n",
                Some(b"garbage\n"),
                "expected value",
                "expected value",
            ),
        ];
        for (a, b, a_says, b_says) in cases {
            fs::write(dir.path().join(FILE_NAME), a).unwrap();
            match b {
                Some(b) => fs::write(dir.path().join(COPY_B_FILE_NAME), b).unwrap(),
                None => fs::remove_file(dir.path().join(COPY_B_FILE_NAME)).unwrap(),
            }
            let (store, warnings) = open_counting(dir.path());
            let store = store.unwrap();
            assert_eq!(warnings, 0);
            assert!(store.directory_id().is_zero(), "nothing adopted");
            let error = store.read().unwrap_err();
            let message = error.to_string();
            match &error {
                QuorumStateError::NoUsableCopy {
                    a,
                    a_fault,
                    b,
                    b_fault,
                } => {
                    assert_eq!(a, &dir.path().join(FILE_NAME));
                    assert_eq!(b, &dir.path().join(COPY_B_FILE_NAME));
                    assert!(a_fault.to_string().contains(a_says), "{message}");
                    assert!(b_fault.to_string().contains(b_says), "{message}");
                }
                other => panic!("{other}"),
            }
            for part in [
                dir.path().join(FILE_NAME).display().to_string(),
                dir.path().join(COPY_B_FILE_NAME).display().to_string(),
                "docs/operations.md, \"A quorum-state with no usable copy\"".into(),
                "vote twice".into(),
            ] {
                assert!(message.contains(&part), "{message} lacks {part}");
            }
            // Refused, not repaired: the copies are as they were.
            assert_eq!(fs::read(dir.path().join(FILE_NAME)).unwrap(), a);
        }
    }

    /// Same generation, different contents: no order between them, so neither is trusted.
    #[test]
    fn valid_copies_that_differ_at_one_generation_are_refused() {
        let (dir, good) = written();
        let other = QuorumStateStore::open(tempfile::tempdir().unwrap().path(), 1, "c1")
            .map(|mut s| {
                let dir = s.dir.clone();
                s.directory_id = decode_copy(&good).unwrap().directory_id().unwrap();
                s.write(&state(6)).unwrap();
                fs::read(dir.join(FILE_NAME)).unwrap()
            })
            .unwrap();
        assert_eq!(decode_copy(&other).unwrap().generation(), 1);
        fs::write(dir.path().join(COPY_B_FILE_NAME), &other).unwrap();
        let store = QuorumStateStore::open(dir.path(), 1, "c1").unwrap();
        match store.read() {
            Err(QuorumStateError::NoUsableCopy {
                a_fault: CopyFault::Diverged(1),
                b_fault: CopyFault::Diverged(1),
                ..
            }) => {}
            other => panic!("{other:?}"),
        }
        assert_eq!(copies(dir.path()), (good, other), "untouched");
    }

    const VERSION_3: &str = "{\"clusterId\":\"c1\",\"nodeId\":1,\"leaderId\":-1,\"leaderEpoch\":5,\
        \"votedId\":1,\"appliedOffset\":7,\"currentVoters\":[{\"voterId\":1},{\"voterId\":2},\
        {\"voterId\":3}],\"targetVoters\":null,\"targetForce\":false,\
        \"directoryId\":\"ASNFZ4mrze_-3LqYdlQyEA\",\"data_version\":3}\n";

    /// An earlier build's single file, alone in the directory: accepted once, one warning, both
    /// sealed copies written at open with the same state and directory id.
    #[test]
    fn an_earlier_builds_file_is_upgraded_once_to_two_sealed_copies() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join(FILE_NAME), VERSION_3).unwrap();
        assert!(matches!(inspect(dir.path()), Verdict::Upgrade(_)));
        let (store, warnings) = open_counting(dir.path());
        let store = store.unwrap();
        assert_eq!(warnings, 1, "warned once");
        assert_eq!(store.directory_id().to_string(), "ASNFZ4mrze_-3LqYdlQyEA");
        assert_eq!(store.read().unwrap(), Some(voted_for_1()));
        let (a, b) = copies(dir.path());
        assert_eq!(a, b);
        let record = decode_copy(&a).unwrap();
        assert!(record.is_sealed());
        assert_eq!((record.generation(), record.data_version()), (1, 4));
        let (_, warnings) = open_counting(dir.path());
        assert_eq!(warnings, 0, "only once");
    }

    /// Versions 0 and 1 have no directory id: the upgrade draws one and writes it.
    #[test]
    fn a_version_0_file_gets_a_directory_id_with_its_upgrade() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(
            dir.path().join(FILE_NAME),
            "{\"clusterId\":\"c1\",\"nodeId\":1,\"leaderId\":2,\"leaderEpoch\":5,\"votedId\":2,\
             \"appliedOffset\":7,\"currentVoters\":[{\"voterId\":1},{\"voterId\":2},{\"voterId\":3}],\
             \"targetVoters\":null,\"data_version\":0}\n",
        )
        .unwrap();
        let file = QuorumStateStore::open(dir.path(), 1, "c1").unwrap();
        assert_eq!(file.read().unwrap(), Some(state(5)));
        let (a, _) = copies(dir.path());
        assert!(String::from_utf8(a).unwrap().contains(&format!(
            "\"targetForce\":false,\"directoryId\":\"{}\",\"generation\":1,\"data_version\":4,",
            file.directory_id()
        )));
        let reopened = QuorumStateStore::open(dir.path(), 1, "c1").unwrap();
        assert_eq!(reopened.directory_id(), file.directory_id(), "kept");
    }

    /// Once copy B exists the upgrade has happened: a record without a checksum is damage,
    /// in either copy, whatever it says.
    #[test]
    fn a_record_without_a_checksum_is_damage_once_the_new_format_exists() {
        let (dir, good) = written();
        fs::write(dir.path().join(FILE_NAME), VERSION_3).unwrap();
        assert!(matches!(
            inspect(dir.path()),
            Verdict::Repair {
                from: CopyName::B,
                fault: CopyFault::Unsealed,
                ..
            }
        ));
        assert_repaired(dir.path(), &good, "unsealed copy A next to copy B");
        // Copy B never held an unsealed record.
        fs::write(dir.path().join(COPY_B_FILE_NAME), VERSION_3).unwrap();
        assert_repaired(dir.path(), &good, "unsealed copy B");
        // And with copy B damaged, an unsealed copy A is no way out: refused.
        fs::write(dir.path().join(FILE_NAME), VERSION_3).unwrap();
        fs::write(dir.path().join(COPY_B_FILE_NAME), &good[..20]).unwrap();
        let store = QuorumStateStore::open(dir.path(), 1, "c1").unwrap();
        assert!(matches!(
            store.read(),
            Err(QuorumStateError::NoUsableCopy {
                a_fault: CopyFault::Unsealed,
                ..
            })
        ));
        // An unsealed record claiming this build's version is damage too.
        let claimed = VERSION_3.replace("\"data_version\":3", "\"data_version\":4");
        assert_eq!(
            decode_copy(claimed.as_bytes()),
            Err(CopyFault::Seal(SealFault::NoChecksum))
        );
    }

    /// A copy a newer build wrote (its checksum matches, its version is above ours) is never
    /// overwritten: the start is refused as a downgrade, even when the other copy is fine.
    #[test]
    fn a_newer_builds_copy_is_refused_and_left_alone() {
        let (dir, good) = written();
        let object = sealed_line::unseal(&good).unwrap();
        let newer = String::from_utf8(object)
            .unwrap()
            .replace("\"data_version\":4", "\"data_version\":5");
        let newer = sealed_line::seal(newer.as_bytes());
        fs::write(dir.path().join(COPY_B_FILE_NAME), &newer).unwrap();
        let store = QuorumStateStore::open(dir.path(), 1, "c1").unwrap();
        match store.read() {
            Err(QuorumStateError::UnknownVersion {
                path,
                found,
                supported,
            }) => {
                assert_eq!(path, dir.path().join(COPY_B_FILE_NAME));
                assert_eq!((found.as_str(), supported), ("5", 4));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(copies(dir.path()), (good, newer));
    }

    /// Another node's copies are never "repaired" into this node's directory.
    #[test]
    fn another_nodes_damaged_copies_are_left_alone() {
        let (dir, good) = written();
        fs::remove_file(dir.path().join(COPY_B_FILE_NAME)).unwrap();
        let store = QuorumStateStore::open(dir.path(), 2, "c1").unwrap();
        assert!(matches!(
            store.read(),
            Err(QuorumStateError::NodeIdMismatch { found: 1, .. })
        ));
        assert!(!dir.path().join(COPY_B_FILE_NAME).exists());
        assert_eq!(fs::read(dir.path().join(FILE_NAME)).unwrap(), good);
    }

    /// Every single-bit change of a sealed copy is caught by the decoder (the open-level test
    /// above samples fields; this covers every bit of the line).
    #[test]
    fn every_bit_of_a_sealed_copy_is_covered() {
        let (_dir, good) = written();
        let record = decode_copy(&good).unwrap();
        for at in 0..good.len() {
            for bit in 0..8 {
                let mut bad = good.clone();
                bad[at] ^= 1 << bit;
                let decided = decide(decode_copy(&bad), Ok(record.clone()));
                assert!(
                    matches!(decided, Verdict::Repair { from: CopyName::B, ref record, .. } if record.line == good),
                    "byte {at} bit {bit}: {decided:?}"
                );
            }
        }
    }

    /// The decision table on its own: every pair of kinds of copy.
    #[test]
    fn the_decision_table() {
        let (_dir, good) = written();
        let record = decode_copy(&good).unwrap();
        let unsealed = decode_copy(VERSION_3.as_bytes()).unwrap();
        let bad = || Err(CopyFault::Seal(SealFault::NoChecksum));
        let missing = || Err(CopyFault::Missing);
        use Verdict::*;
        assert_eq!(decide(missing(), missing()), Fresh);
        assert_eq!(
            decide(Ok(record.clone()), Ok(record.clone())),
            Intact(record.clone())
        );
        assert!(matches!(
            decide(Ok(record.clone()), missing()),
            Repair {
                from: CopyName::A,
                fault: CopyFault::Missing,
                ..
            }
        ));
        assert!(matches!(
            decide(missing(), Ok(record.clone())),
            Repair {
                from: CopyName::B,
                fault: CopyFault::Missing,
                ..
            }
        ));
        assert!(matches!(
            decide(bad(), Ok(record.clone())),
            Repair {
                from: CopyName::B,
                ..
            }
        ));
        assert!(matches!(
            decide(Ok(record.clone()), bad()),
            Repair {
                from: CopyName::A,
                ..
            }
        ));
        assert_eq!(
            decide(Ok(unsealed.clone()), missing()),
            Upgrade(unsealed.clone())
        );
        assert!(matches!(
            decide(Ok(unsealed.clone()), Ok(record.clone())),
            Repair {
                from: CopyName::B,
                fault: CopyFault::Unsealed,
                ..
            }
        ));
        assert!(matches!(
            decide(Ok(unsealed.clone()), bad()),
            NoUsableCopy {
                a: CopyFault::Unsealed,
                ..
            }
        ));
        assert!(matches!(
            decide(missing(), Ok(unsealed.clone())),
            NoUsableCopy {
                a: CopyFault::Missing,
                b: CopyFault::Unsealed
            }
        ));
        assert!(matches!(decide(bad(), bad()), NoUsableCopy { .. }));
        assert!(matches!(
            decide(bad(), missing()),
            NoUsableCopy {
                b: CopyFault::Missing,
                ..
            }
        ));
        assert!(matches!(
            decide(Ok(record.clone()), Err(CopyFault::Newer("5".into()))),
            Newer {
                copy: CopyName::B,
                ..
            }
        ));
    }
}
