//! Voter records (control type 100) as the voter set they state (docs/protocol.md, "The voter
//! set lives in the log"): what a replica applies when it appends one, and what a driver reads
//! from the log at start ([`crate::log::Log::voter_records_from`]).

use std::collections::BTreeMap;

use super::control::{ControlRecordType, QuorumReassignment};
use super::{Batch, BatchView};
use crate::base::{DirectoryId, NodeId, Offset};

/// A voter set with the reassignment in progress, as one voter record states it.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct VoterConfig {
    /// Sorted, no duplicates, never empty once known.
    pub current: Vec<NodeId>,
    /// The target of a reassignment in progress (sorted); None when none is.
    pub target: Option<Vec<NodeId>>,
    /// The reassignment skips the strict reconfiguration check.
    pub force: bool,
    /// The log directory each bound current voter is (docs/protocol.md, "Voter identity"): a
    /// node of that id with another directory is not that voter. Only ids of `current`; none
    /// is nil.
    pub directories: BTreeMap<NodeId, DirectoryId>,
    /// The directory a voter of the target must come with, for those the request or the
    /// leader named. Only ids of `target`.
    pub target_directories: BTreeMap<NodeId, DirectoryId>,
}

impl VoterConfig {
    /// A set of `current` with nothing bound and no reassignment in progress.
    pub fn of(current: Vec<NodeId>) -> Self {
        VoterConfig {
            current,
            ..Default::default()
        }
    }

    pub fn contains(&self, id: NodeId) -> bool {
        self.current.binary_search(&id).is_ok()
    }

    /// The directory voter `id` is bound to, if it is a bound current voter.
    pub fn directory_of(&self, id: NodeId) -> Option<DirectoryId> {
        self.directories.get(&id).copied()
    }

    /// Is (`id`, `directory`) a current voter: the id is one, and its binding (if any) names
    /// this directory? A nil `directory` (not stated) matches only an unbound voter.
    pub fn has_voter(&self, id: NodeId, directory: DirectoryId) -> bool {
        self.contains(id) && self.directory_of(id).is_none_or(|d| d == directory)
    }

    /// Keeps the maps to the ids they may hold (after `current` or `target` changed).
    pub fn prune_directories(&mut self) {
        let current = &self.current;
        self.directories
            .retain(|id, d| current.binary_search(id).is_ok() && !d.is_zero());
        match &self.target {
            Some(t) => self
                .target_directories
                .retain(|id, d| t.binary_search(id).is_ok() && !d.is_zero()),
            None => self.target_directories.clear(),
        }
    }
}

/// A voter record found in the log: its offset and what it says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VoterRecord {
    pub offset: Offset,
    pub config: VoterConfig,
}

/// Why a voter record could not be read: a log this node cannot apply (the voter set would
/// silently differ from the others'), so the node must stop.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("voter record in the batch at offset {base_offset}: {reason}")]
pub struct VoterRecordError {
    pub base_offset: Offset,
    pub reason: String,
}

impl VoterConfig {
    fn from_record(r: &QuorumReassignment) -> Result<Self, String> {
        let set = |ids: &[NodeId]| -> Result<Vec<NodeId>, String> {
            let mut v = ids.to_vec();
            v.sort_unstable();
            v.dedup();
            if v.len() != ids.len() || v.is_empty() || v[0] < 0 {
                return Err(format!("{ids:?} is not a set of distinct ids >= 0"));
            }
            Ok(v)
        };
        Ok(VoterConfig {
            current: set(&r.current_voters)?,
            target: r.target_voters.as_deref().map(set).transpose()?,
            force: r.force,
            directories: r.current_directories.clone(),
            target_directories: r.target_directories.clone(),
        })
    }

    /// The record this config is written as.
    pub fn to_record(&self, cluster_id: &str) -> QuorumReassignment {
        QuorumReassignment {
            cluster_id: cluster_id.to_string(),
            current_voters: self.current.clone(),
            target_voters: self.target.clone(),
            force: self.force,
            current_directories: self.directories.clone(),
            target_directories: self.target_directories.clone(),
        }
    }
}

/// The voter records of `batches` (the log's, in order): what a driver hands the core at start
/// (`LogSnapshot::voter_records`) and what the core applies as it appends.
pub fn voter_records<'a>(
    batches: impl IntoIterator<Item = &'a Batch>,
) -> Result<Vec<VoterRecord>, VoterRecordError> {
    let mut found = Vec::new();
    for b in batches {
        if !b.is_control {
            continue;
        }
        let error = |reason: String| VoterRecordError {
            base_offset: b.base_offset,
            reason,
        };
        let view = BatchView::parse(b.bytes.clone()).map_err(|e| error(e.to_string()))?;
        if !view.is_control() {
            continue;
        }
        // Only voter records are read here: another control type this build cannot decode
        // (a newer LeaderChange, say) is not this module's business.
        for record in view.records() {
            let kind =
                ControlRecordType::from_key(record.key.as_deref(), record.offset_delta as u32)
                    .map_err(|e| error(e.to_string()))?;
            if kind != ControlRecordType::QUORUM_REASSIGNMENT {
                continue;
            }
            let value = record.value.ok_or_else(|| error("a null value".into()))?;
            let r = QuorumReassignment::decode(&value).map_err(|e| error(e.to_string()))?;
            found.push(VoterRecord {
                offset: b.base_offset + Offset::from(record.offset_delta),
                config: VoterConfig::from_record(&r).map_err(error)?,
            });
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::control::LeaderChange;
    use crate::record::RecordBatchBuilder;

    fn dir(id: u8) -> DirectoryId {
        DirectoryId([id; 16])
    }

    fn reassignment(current: Vec<NodeId>) -> QuorumReassignment {
        QuorumReassignment {
            cluster_id: "c".into(),
            current_voters: current,
            target_voters: None,
            force: false,
            current_directories: BTreeMap::new(),
            target_directories: BTreeMap::new(),
        }
    }

    /// Bindings of ids outside their list, and nil bindings, are dropped; a set with no
    /// reassignment keeps no target bindings.
    #[test]
    fn pruning_keeps_the_non_nil_bindings_of_each_lists_own_ids() {
        let mut config = VoterConfig {
            current: vec![1, 2],
            target: Some(vec![2, 3]),
            force: false,
            directories: BTreeMap::from([(1, dir(1)), (2, DirectoryId([0; 16])), (3, dir(3))]),
            target_directories: BTreeMap::from([
                (1, dir(1)),
                (2, DirectoryId([0; 16])),
                (3, dir(3)),
            ]),
        };
        config.prune_directories();
        assert_eq!(config.directories, BTreeMap::from([(1, dir(1))]));
        assert_eq!(config.target_directories, BTreeMap::from([(3, dir(3))]));
        config.target = None;
        config.prune_directories();
        assert_eq!(config.directories, BTreeMap::from([(1, dir(1))]));
        assert!(config.target_directories.is_empty());
    }

    /// Each of the three faults alone makes a list of ids no voter set.
    #[test]
    fn a_voter_list_with_a_repeat_a_negative_id_or_no_id_is_refused() {
        for bad in [vec![2, 1, 2], vec![-1, 1], vec![]] {
            let error = VoterConfig::from_record(&reassignment(bad.clone())).unwrap_err();
            assert!(error.contains("not a set"), "{bad:?}: {error}");
        }
        let config = VoterConfig::from_record(&reassignment(vec![3, 0, 1])).unwrap();
        assert_eq!(config.current, vec![0, 1, 3]);
    }

    /// A voter record's offset is its batch's base offset plus its own offset delta.
    #[test]
    fn a_voter_record_after_another_control_record_is_found_at_its_own_offset() {
        let leader_change = LeaderChange {
            version: 0,
            leader_id: 1,
            voters: vec![1],
            granting_voters: vec![1],
        };
        let mut builder = RecordBatchBuilder::new(10, 2).control(true);
        let key = ControlRecordType::LEADER_CHANGE.key();
        builder.append(0, Some(&key), Some(&leader_change.encode()), &[]);
        let key = ControlRecordType::QUORUM_REASSIGNMENT.key();
        builder.append(0, Some(&key), Some(&reassignment(vec![1, 2]).encode()), &[]);
        let batch = Batch::from_stored(builder.build().freeze()).unwrap();
        let found = voter_records([&batch]).unwrap();
        assert_eq!(
            found,
            vec![VoterRecord {
                offset: 11,
                config: VoterConfig::of(vec![1, 2]),
            }]
        );
    }
}
