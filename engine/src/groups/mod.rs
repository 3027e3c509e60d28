//! Consumer groups (docs/protocol.md, "Consumer groups"): the coordinator a Kafka consumer with
//! a `group.id` talks to. The coordinator is the Raft leader. [`membership`] runs the classic
//! rebalance protocol on it (not replicated: members join a new coordinator again);
//! [`offsets`] keeps the committed offsets every replica learns from the log (replicated).
//! [`Groups`] joins the two as the replica steps them: requests in, answers out, the offset
//! commits written through the log and answered once committed.

pub mod expiry;
pub mod membership;
pub mod offsets;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use crate::base::{Offset, TimeMs};
use crate::raft::{ErrorCode, LogOp, LogOpKind};

pub use membership::{
    GroupAnswer, GroupDescription, GroupLimits, GroupState, JoinAnswer, JoinGroup, JoinedMember,
    Leaving, MemberDescription, MemberRef, Membership, Protocol, SyncAnswer, SyncGroup,
};
pub use offsets::{Committed, GroupOffsetsRecord, OffsetStore, PartitionOffset, StoredOffset};

/// A request the coordinator decides (a read-only one, OffsetFetch or a listing, is a query of
/// [`Groups`] instead).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GroupRequest {
    Join(JoinGroup),
    Sync(SyncGroup),
    Heartbeat(MemberRef),
    Leave {
        group_id: String,
        members: Vec<Leaving>,
    },
    /// An OffsetCommit: `offsets` (every one a partition that exists: the driver answers the
    /// others itself) for the member `who`.
    Commit {
        who: MemberRef,
        offsets: Vec<PartitionOffset>,
    },
    /// DeleteGroups of one group: its offsets are deleted through the log, if it has no
    /// members.
    Delete {
        group_id: String,
    },
    /// OffsetDelete: these partitions' offsets, if no member of the group consumes them (the
    /// only topic is the log, so: if the group has no members).
    DeleteOffsets {
        group_id: String,
        partitions: Vec<(String, i32)>,
    },
}

/// The answer to a [`GroupRequest`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GroupReply {
    /// Join, Sync, Heartbeat and Leave.
    Membership(GroupAnswer),
    /// Commit, Delete and DeleteOffsets: NONE once the record committed, or why not.
    Written(ErrorCode),
}

/// What the coordinator asks the replica to do for a request that writes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Answer now.
    Answer(GroupReply),
    /// Append this record; answer when it commits.
    Append(GroupOffsetsRecord),
}

/// The answers that became due: (request id, answer).
pub type Replies = Vec<(u64, GroupReply)>;

/// The coordinator's membership, every replica's committed offsets, and the commits waiting
/// for the high watermark.
#[derive(Debug)]
pub struct Groups {
    membership: Membership,
    offsets: OffsetStore,
    expiry: expiry::OffsetExpiry,
    /// Offset of each appended record -> the request waiting for it to commit.
    writing: BTreeMap<Offset, u64>,
    scratch: membership::Answers,
}

impl Groups {
    pub fn new(limits: GroupLimits, member_id_prefix: String) -> Self {
        Self {
            expiry: expiry::OffsetExpiry::new(
                limits.offsets_retention_ms,
                limits.offsets_retention_check_interval_ms,
            ),
            membership: Membership::new(limits, member_id_prefix),
            offsets: OffsetStore::default(),
            writing: BTreeMap::new(),
            scratch: Vec::new(),
        }
    }

    /// With the offsets a start-up replay of the log rebuilt.
    pub fn with_offsets(mut self, offsets: OffsetStore) -> Self {
        self.offsets = offsets;
        self
    }

    pub fn membership(&self) -> &Membership {
        &self.membership
    }

    pub fn offsets(&self) -> &OffsetStore {
        &self.offsets
    }

    /// Requests waiting for their record to commit.
    pub fn writing(&self) -> usize {
        self.writing.len()
    }

    /// Decides request `request` at `now` (the node leads and has loaded the offsets: the
    /// replica checks that first). Answers of held requests that became due go to `out`.
    pub fn decide(
        &mut self,
        request: u64,
        ask: GroupRequest,
        now: TimeMs,
        commit_timestamp_ms: i64,
        out: &mut Replies,
    ) -> Option<Decision> {
        let mut answers = std::mem::take(&mut self.scratch);
        let membership_of = match &ask {
            GroupRequest::Join(j) => Some(j.group_id.clone()),
            GroupRequest::Sync(s) => Some(s.group_id.clone()),
            GroupRequest::Heartbeat(who) => Some(who.group_id.clone()),
            GroupRequest::Leave { group_id, .. } => Some(group_id.clone()),
            GroupRequest::Commit { .. }
            | GroupRequest::Delete { .. }
            | GroupRequest::DeleteOffsets { .. } => None,
        };
        let had_members = membership_of
            .as_ref()
            .is_some_and(|g| self.membership.has_members(g));
        let decision = match ask {
            GroupRequest::Join(join) => {
                self.membership.join(request, join, now, &mut answers);
                None
            }
            GroupRequest::Sync(sync) => {
                self.membership.sync(request, sync, now, &mut answers);
                None
            }
            GroupRequest::Heartbeat(who) => {
                let error = self.membership.heartbeat(&who, now);
                Some(Decision::Answer(GroupReply::Membership(
                    GroupAnswer::Heartbeat(error),
                )))
            }
            GroupRequest::Leave { group_id, members } => {
                self.membership
                    .leave(request, &group_id, members, now, &mut answers);
                None
            }
            GroupRequest::Commit { who, offsets } => {
                Some(self.commit(who, offsets, commit_timestamp_ms))
            }
            GroupRequest::Delete { group_id } => {
                Some(self.delete(group_id, None, commit_timestamp_ms))
            }
            GroupRequest::DeleteOffsets {
                group_id,
                partitions,
            } => Some(self.delete(group_id, Some(partitions), commit_timestamp_ms)),
        };
        out.extend(
            answers
                .drain(..)
                .map(|(id, answer)| (id, GroupReply::Membership(answer))),
        );
        self.scratch = answers;
        // A group that had members just now is not idle (its last member may have left);
        // requests for groups without members leave no trace (they would grow the map).
        if let Some(group_id) = membership_of {
            if had_members || self.membership.has_members(&group_id) {
                self.expiry.busy(&group_id, now);
            }
        }
        decision
    }

    /// This replica began coordinating at `now` (it leads).
    pub fn led(&mut self, now: TimeMs) {
        self.expiry.led(now);
    }

    /// The records that expire idle groups' offsets, when a check is due at `now` (the
    /// leader's wall clock `wall_ms`); the replica appends them (docs/storage.md, "Committed
    /// offsets").
    pub fn expire(&mut self, now: TimeMs, wall_ms: i64) -> Vec<GroupOffsetsRecord> {
        self.expiry
            .expire(now, wall_ms, &self.membership, &self.offsets)
    }

    fn commit(&self, who: MemberRef, offsets: Vec<PartitionOffset>, timestamp_ms: i64) -> Decision {
        let limits = self.membership.limits();
        let refuse = |error| Decision::Answer(GroupReply::Written(error));
        if who.group_id.is_empty() || who.group_id.len() > membership::MAX_NAME_BYTES {
            return refuse(ErrorCode::INVALID_GROUP_ID);
        }
        if let Err(error) = self.membership.check_commit(&who) {
            return refuse(error);
        }
        if offsets.iter().any(|p| {
            p.metadata
                .as_ref()
                .is_some_and(|m| m.len() > limits.max_metadata_bytes)
        }) {
            return refuse(ErrorCode::OFFSET_METADATA_TOO_LARGE);
        }
        if offsets.iter().any(|p| p.offset.is_none()) {
            return refuse(ErrorCode::INVALID_REQUEST);
        }
        if self.offsets.group(&who.group_id).is_none()
            && self.offsets.group_count() >= limits.max_groups
        {
            return refuse(ErrorCode::COORDINATOR_NOT_AVAILABLE);
        }
        Decision::Append(GroupOffsetsRecord {
            group_id: who.group_id,
            commit_timestamp_ms: timestamp_ms,
            delete_group: false,
            offsets,
        })
    }

    fn delete(
        &self,
        group_id: String,
        partitions: Option<Vec<(String, i32)>>,
        timestamp_ms: i64,
    ) -> Decision {
        let refuse = |error| Decision::Answer(GroupReply::Written(error));
        if self.membership.has_members(&group_id) {
            return refuse(ErrorCode::NON_EMPTY_GROUP);
        }
        let Some(committed) = self.offsets.group(&group_id) else {
            return refuse(ErrorCode::GROUP_ID_NOT_FOUND);
        };
        let delete_group = partitions.is_none();
        let offsets: Vec<PartitionOffset> = match partitions {
            None => Vec::new(),
            Some(partitions) => partitions
                .into_iter()
                .filter(|key| committed.contains_key(key))
                .map(|(topic, partition)| PartitionOffset {
                    topic,
                    partition,
                    offset: None,
                    leader_epoch: None,
                    metadata: None,
                })
                .collect(),
        };
        if !delete_group && offsets.is_empty() {
            // None of those partitions has an offset: nothing to write.
            return refuse(ErrorCode::NONE);
        }
        Decision::Append(GroupOffsetsRecord {
            group_id,
            commit_timestamp_ms: timestamp_ms,
            delete_group,
            offsets,
        })
    }

    /// The record of `request` was appended at `offset`: it is answered when that commits.
    pub fn appended(&mut self, request: u64, offset: Offset) {
        let previous = self.writing.insert(offset, request);
        assert!(
            previous.is_none(),
            "two requests wait for the record at {offset}"
        );
    }

    /// Every log change, in order (on every replica). Requests whose record a truncation cut
    /// are answered NOT_COORDINATOR.
    pub fn track(&mut self, op: &LogOp, hw: Option<Offset>, out: &mut Replies) {
        self.offsets.track(op, hw);
        let cut = match op.kind {
            LogOpKind::TruncateTo(offset) => offset,
            LogOpKind::ResetTo { .. } => hw.unwrap_or(0),
            LogOpKind::Append(_) => return,
        };
        let lost = self.writing.split_off(&cut);
        out.extend(
            lost.into_values()
                .map(|request| (request, GroupReply::Written(ErrorCode::NOT_COORDINATOR))),
        );
    }

    /// A reset to the leader's log start came with its snapshot at `offset`: the committed
    /// offsets below it are `entries`, and the records from it on are fetched next. A
    /// follower has no request waiting for a record. The snapshot may be older than what the
    /// store applied (an earlier reset took a newer leader's snapshot, and the next leader's
    /// newest is older): the records from `offset` on are fetched again all the same, so
    /// both ways end in the same state, and this one matches the producer state's.
    pub fn restore(&mut self, offset: Offset, entries: Vec<offsets::StoredOffset>) {
        assert!(
            self.writing.is_empty(),
            "a replica reset to its leader's log start waits for no commit"
        );
        self.offsets = OffsetStore::restored(offset, entries);
    }

    /// The high watermark moved to `hw`: records below it apply, and their requests are
    /// answered.
    pub fn committed(&mut self, hw: Offset, out: &mut Replies) {
        self.offsets.on_committed(hw);
        let rest = self.writing.split_off(&hw);
        let done = std::mem::replace(&mut self.writing, rest);
        out.extend(
            done.into_values()
                .map(|request| (request, GroupReply::Written(ErrorCode::NONE))),
        );
    }

    /// This node stopped leading: held membership requests and commits not yet committed are
    /// answered NOT_COORDINATOR (a commit may still commit under the next leader; the client
    /// commits again, at least once).
    pub fn resigned(&mut self, out: &mut Replies) {
        self.expiry.resigned();
        let mut answers = std::mem::take(&mut self.scratch);
        self.membership.resign(&mut answers);
        out.extend(
            answers
                .drain(..)
                .map(|(id, answer)| (id, GroupReply::Membership(answer))),
        );
        self.scratch = answers;
        out.extend(
            std::mem::take(&mut self.writing)
                .into_values()
                .map(|request| (request, GroupReply::Written(ErrorCode::NOT_COORDINATOR))),
        );
    }

    /// When the membership next needs a tick.
    pub fn next_deadline(&self) -> Option<TimeMs> {
        [self.membership.next_deadline(), self.expiry.next_deadline()]
            .into_iter()
            .flatten()
            .min()
    }

    /// Time passed (on the leader).
    pub fn tick(&mut self, now: TimeMs, out: &mut Replies) {
        let mut answers = std::mem::take(&mut self.scratch);
        self.membership.tick(now, &mut answers);
        out.extend(
            answers
                .drain(..)
                .map(|(id, answer)| (id, GroupReply::Membership(answer))),
        );
        self.scratch = answers;
    }
}
