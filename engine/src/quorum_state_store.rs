//! The quorum-state file (docs/protocol.md section 2, "The quorum-state file"): the election
//! state a voter must never forget.
//!
//! One line of JSON in `<dir>/quorum-state`, for example
//! `{"clusterId":"c1","nodeId":1,"leaderId":2,"leaderEpoch":5,"votedId":2,"appliedOffset":0,
//! "currentVoters":[{"voterId":1},{"voterId":2},{"voterId":3}],"targetVoters":null,
//! "targetForce":false,"directoryId":"ASNFZ4mrze_-3LqYdlQyEA","data_version":3}`.
//!
//! `directoryId` names this log directory (docs/protocol.md, "Directory ids"): drawn from the
//! OS's random source when the directory gets its first file, kept for the directory's life.
//! A node that comes back with an empty directory gets a new one. A voter whose directory the
//! log binds carries it as `voterDirectoryId` (docs/protocol.md, "Voter identity").
//!
//! Writes replace the file atomically: write `quorum-state.tmp`, fsync it, rename it over
//! `quorum-state`, fsync the directory. A crash at any point leaves the old or the new content,
//! never a mix. Any fsync failure is [`QuorumStateError::SyncFailed`]: after a failed fsync the
//! kernel's view of the file is unknown, so the node must stop (fail-stop), not retry.
//!
//! Reads refuse anything doubtful with a typed error naming the file: unreadable, truncated or
//! corrupt JSON, an unknown `data_version`, or a file written by another node id or for another
//! cluster. Nothing is ever silently cleared: a voter that forgot its vote could vote twice.

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::base::ids::DirectoryId;
use crate::base::{Epoch, NodeId, Offset};

/// The file's name inside the node's metadata log directory.
pub const FILE_NAME: &str = "quorum-state";
/// The temporary file a write goes through before the rename.
pub const TEMP_FILE_NAME: &str = "quorum-state.tmp";
/// The `data_version` this build writes. Version 1 adds `targetForce`; a version 0 file (which
/// has none) is read as `targetForce: false` and upgraded by the next write. Version 2 adds
/// `directoryId`; an older file gets one when it is opened, written back at once. Version 3
/// adds `voterDirectoryId` to the voters that are bound (an older file binds none).
pub const DATA_VERSION: i64 = 3;
/// The oldest `data_version` this build reads.
pub const OLDEST_DATA_VERSION: i64 = 0;

#[derive(Debug, Error)]
pub enum QuorumStateError {
    #[error("quorum-state directory {path} is not usable: {source}")]
    Directory { path: PathBuf, source: io::Error },
    #[error("cannot read quorum-state file {path}: {source}")]
    Read { path: PathBuf, source: io::Error },
    /// Not valid JSON of the expected shape, truncated, or with values out of range. The node
    /// must not start: fix or restore the file by hand (never delete it on a voter that voted).
    #[error("quorum-state file {path} is corrupt: {reason}")]
    Corrupt { path: PathBuf, reason: String },
    #[error(
        "quorum-state file {path} has data_version {found}; this build reads only {supported}"
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
    /// Creating, writing or renaming failed before anything was made durable: the old file is
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

/// The file's JSON, field for field (serialized in this order).
#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
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
    #[serde(rename = "data_version")]
    data_version: i64,
}

#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
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

/// The quorum-state file of one node.
#[derive(Debug)]
pub struct QuorumStateStore {
    dir: PathBuf,
    path: PathBuf,
    temp_path: PathBuf,
    node_id: NodeId,
    cluster_id: String,
    directory_id: DirectoryId,
    /// `File::sync_all` except in tests that inject failures.
    sync: fn(&File) -> io::Result<()>,
}

impl QuorumStateStore {
    /// Opens the file's directory (which must exist) and removes a temporary file a crash may
    /// have left mid-write: it was never renamed, so it never was the state. One handle per
    /// directory: the node owns its metadata directory exclusively. Takes the directory id
    /// from the file, or draws one: for a new directory it is written with the first state,
    /// for a file of an older version at once (so it never changes across restarts).
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
        let file = Self {
            dir: dir.to_path_buf(),
            path: dir.join(FILE_NAME),
            temp_path: dir.join(TEMP_FILE_NAME),
            node_id,
            cluster_id: cluster_id.into(),
            directory_id: DirectoryId::ZERO,
            sync: File::sync_all,
        };
        match fs::remove_file(&file.temp_path) {
            Ok(()) => {
                tracing::warn!(path = %file.temp_path.display(), "removed an unfinished quorum-state write (a crash cut it short; the previous file \
                    stands, nothing to do)");
            }
            Err(error) if error.kind() == io::ErrorKind::NotFound => {}
            Err(source) => {
                return Err(QuorumStateError::Write {
                    path: file.temp_path,
                    source,
                })
            }
        }
        let mut file = file;
        file.load_directory_id()?;
        Ok(file)
    }

    /// This log directory's id (zero only when the file could not be read at open).
    pub fn directory_id(&self) -> DirectoryId {
        self.directory_id
    }

    /// A file that cannot be read (corrupt, another node's...) leaves the id unknown here:
    /// [`QuorumStateStore::read`] reports why, and the node stops before it writes.
    fn load_directory_id(&mut self) -> Result<(), QuorumStateError> {
        let mut data = match self.read_data() {
            Ok(Some(data)) => data,
            Ok(None) => {
                self.directory_id = self.draw_directory_id()?;
                return Ok(());
            }
            Err(_) => return Ok(()),
        };
        match data.directory_id.as_deref() {
            Some(text) => self.directory_id = text.parse().expect("checked by decode"),
            None => {
                self.directory_id = self.draw_directory_id()?;
                data.directory_id = Some(self.directory_id.to_string());
                data.data_version = DATA_VERSION;
                self.replace(&data)?;
                tracing::info!(path = %self.path.display(), directory_id = %self.directory_id,
                    "gave the log directory an id (quorum-state file upgraded to data_version {DATA_VERSION})");
            }
        }
        Ok(())
    }

    fn draw_directory_id(&self) -> Result<DirectoryId, QuorumStateError> {
        let mut bytes = [0u8; 16];
        getrandom::fill(&mut bytes).map_err(|e| QuorumStateError::Random {
            path: self.path.clone(),
            reason: e.to_string(),
        })?;
        // Never the zero id, which means "unknown".
        bytes[15] |= 1;
        Ok(DirectoryId(bytes))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The stored election state, or None when the file does not exist (a new node).
    pub fn read(&self) -> Result<Option<ElectionState>, QuorumStateError> {
        let Some(data) = self.read_data()? else {
            return Ok(None);
        };
        Ok(Some(ElectionState {
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
        }))
    }

    /// The file's checked contents, or None when it does not exist.
    fn read_data(&self) -> Result<Option<QuorumStateData>, QuorumStateError> {
        let text = match fs::read(&self.path) {
            Ok(bytes) => bytes,
            Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(source) => {
                return Err(QuorumStateError::Read {
                    path: self.path.clone(),
                    source,
                })
            }
        };
        let data = self.decode(&text)?;
        self.check_identity(&data)?;
        Ok(Some(data))
    }

    /// Replaces the file with `state`, durably. On `Ok` the new state survives a crash.
    pub fn write(&mut self, state: &ElectionState) -> Result<(), QuorumStateError> {
        assert!(state.epoch >= 0, "negative epoch {}", state.epoch);
        assert!(state.leader_id >= -1 && state.voted_id >= -1);
        if self.directory_id.is_zero() {
            // The file was unreadable at open and is being replaced (`quorum-state` repairs).
            self.directory_id = self.draw_directory_id()?;
        }
        let data = QuorumStateData {
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
            data_version: DATA_VERSION,
        };
        self.replace(&data)
    }

    fn replace(&mut self, data: &QuorumStateData) -> Result<(), QuorumStateError> {
        assert!(
            !self.directory_id.is_zero(),
            "a directory id is drawn at open"
        );
        let mut line = serde_json::to_vec(data).expect("plain data serializes");
        line.push(b'\n');
        self.write_temp(&line)?;
        fs::rename(&self.temp_path, &self.path).map_err(|source| QuorumStateError::Write {
            path: self.path.clone(),
            source,
        })?;
        self.sync_directory()
    }

    fn write_temp(&self, contents: &[u8]) -> Result<(), QuorumStateError> {
        let write_error = |source| QuorumStateError::Write {
            path: self.temp_path.clone(),
            source,
        };
        let mut temp = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&self.temp_path)
            .map_err(write_error)?;
        temp.write_all(contents).map_err(write_error)?;
        (self.sync)(&temp).map_err(|source| QuorumStateError::SyncFailed {
            path: self.temp_path.clone(),
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

    fn corrupt(&self, reason: impl Into<String>) -> QuorumStateError {
        QuorumStateError::Corrupt {
            path: self.path.clone(),
            reason: reason.into(),
        }
    }

    fn decode(&self, text: &[u8]) -> Result<QuorumStateData, QuorumStateError> {
        let text = std::str::from_utf8(text).map_err(|_| self.corrupt("not UTF-8"))?;
        let Some(line) = text.strip_suffix('\n') else {
            return Err(self.corrupt(format!(
                "{} bytes without the final newline (truncated?)",
                text.len()
            )));
        };
        if line.contains('\n') {
            return Err(self.corrupt("more than one line"));
        }
        // The version first, so a newer format reports as such rather than as corrupt.
        let value: serde_json::Value =
            serde_json::from_str(line).map_err(|e| self.corrupt(e.to_string()))?;
        let version = value
            .get("data_version")
            .ok_or_else(|| self.corrupt("no data_version field"))?;
        if !version
            .as_i64()
            .is_some_and(|v| (OLDEST_DATA_VERSION..=DATA_VERSION).contains(&v))
        {
            return Err(QuorumStateError::UnknownVersion {
                path: self.path.clone(),
                found: version.to_string(),
                supported: DATA_VERSION,
            });
        }
        let data: QuorumStateData =
            serde_json::from_value(value).map_err(|e| self.corrupt(e.to_string()))?;
        self.check_ranges(&data)?;
        Ok(data)
    }

    fn check_ranges(&self, data: &QuorumStateData) -> Result<(), QuorumStateError> {
        if data.leader_epoch < 0 {
            return Err(self.corrupt(format!("negative leaderEpoch {}", data.leader_epoch)));
        }
        if data.leader_id < -1 {
            return Err(self.corrupt(format!("leaderId {} below -1", data.leader_id)));
        }
        if data.voted_id < -1 {
            return Err(self.corrupt(format!("votedId {} below -1", data.voted_id)));
        }
        if let Some(text) = &data.directory_id {
            if text
                .parse::<DirectoryId>()
                .map_or(true, DirectoryId::is_zero)
            {
                return Err(self.corrupt(format!("directoryId {text:?} is not a directory id")));
            }
        }
        let listed = data.target_voters.iter().flatten();
        for voter in data.current_voters.iter().chain(listed) {
            if let Some(text) = &voter.voter_directory_id {
                if text
                    .parse::<DirectoryId>()
                    .map_or(true, DirectoryId::is_zero)
                {
                    return Err(self.corrupt(format!(
                        "voterDirectoryId {text:?} of voter {} is not a directory id",
                        voter.voter_id
                    )));
                }
            }
        }
        Ok(())
    }

    fn check_identity(&self, data: &QuorumStateData) -> Result<(), QuorumStateError> {
        if data.cluster_id != self.cluster_id {
            return Err(QuorumStateError::ClusterIdMismatch {
                path: self.path.clone(),
                expected: self.cluster_id.clone(),
                found: data.cluster_id.clone(),
            });
        }
        if data.node_id != self.node_id {
            return Err(QuorumStateError::NodeIdMismatch {
                path: self.path.clone(),
                expected: self.node_id,
                found: data.node_id,
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
    use super::*;

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

    fn failing_sync(_: &File) -> io::Result<()> {
        Err(io::Error::from_raw_os_error(libc::EIO))
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
        // The rename never happened: the durable state is still epoch 1.
        assert_eq!(file.read().unwrap(), Some(state(1)));
    }

    #[test]
    fn the_line_has_the_documented_layout() {
        let dir = tempfile::tempdir().unwrap();
        let mut file = QuorumStateStore::open(dir.path(), 1, "c1").unwrap();
        file.write(&state(5)).unwrap();
        let text = fs::read_to_string(file.path()).unwrap();
        assert_eq!(
            text,
            format!("{{\"clusterId\":\"c1\",\"nodeId\":1,\"leaderId\":2,\"leaderEpoch\":5,\"votedId\":2,\
             \"appliedOffset\":7,\"currentVoters\":[{{\"voterId\":1}},{{\"voterId\":2}},{{\"voterId\":3}}],\
             \"targetVoters\":null,\"targetForce\":false,\"directoryId\":\"{}\",\
             \"data_version\":3}}\n",
            file.directory_id()
        ));
    }

    #[test]
    fn a_version_0_file_is_read_and_upgraded_by_the_next_write() {
        let dir = tempfile::tempdir().unwrap();
        let mut file = QuorumStateStore::open(dir.path(), 1, "c1").unwrap();
        fs::write(
            file.path(),
            "{\"clusterId\":\"c1\",\"nodeId\":1,\"leaderId\":2,\"leaderEpoch\":5,\"votedId\":2,\
             \"appliedOffset\":7,\"currentVoters\":[{\"voterId\":1},{\"voterId\":2},{\"voterId\":3}],\
             \"targetVoters\":null,\"data_version\":0}\n",
        )
        .unwrap();
        assert_eq!(file.read().unwrap(), Some(state(5)));
        file.write(&state(5)).unwrap();
        let text = fs::read_to_string(file.path()).unwrap();
        assert!(
            text.ends_with(&format!(
                "\"targetForce\":false,\"directoryId\":\"{}\",\"data_version\":3}}\n",
                file.directory_id()
            )),
            "{text}"
        );
        fs::write(
            file.path(),
            text.replace("\"data_version\":3", "\"data_version\":4"),
        )
        .unwrap();
        assert!(matches!(
            file.read(),
            Err(QuorumStateError::UnknownVersion { .. })
        ));
    }
}
